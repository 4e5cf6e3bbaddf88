//! The suite's report: the table, the JSON, and the machine it ran on.

use super::*;

pub(super) fn machine(plan: &Plan) -> serde_json::Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let (ra, io) = ahead::os::device_limits(&plan.file);
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "cpu": cpu,
        "kernel": kernel.trim(),
        "file": plan.file.display().to_string(),
        "size_bytes": plan.size,
        "read_ahead_kb": ra,
        "max_sectors_kb": io,
        "engine_budget_bytes": plan.engine.budget,
        "repeat": plan.repeat,
        "cap_s": plan.cap.as_secs_f64(),
    })
}

/// The readable table.
pub fn table(o: &Outcome) -> String {
    let mut s = String::new();
    let m = &o.machine;
    let _ = writeln!(
        s,
        "ahead bench: {} ({} bytes), {} CPUs, Linux {}, read_ahead_kb {}, max_sectors_kb {}; engine budget {} MiB (nfiles {} MiB, faulted in at build); median of {} (min-max), runs capped at {} s\n",
        m["file"].as_str().unwrap_or(""),
        m["size_bytes"],
        m["cpus"],
        m["kernel"].as_str().unwrap_or(""),
        m["read_ahead_kb"],
        m["max_sectors_kb"],
        m["engine_budget_bytes"].as_u64().unwrap_or(0) >> 20,
        NFILES_BUDGET >> 20,
        m["repeat"],
        m["cap_s"]
    );
    let c = &o.ceilings;
    if let Some((name, mb)) = &c.sequential {
        let _ = writeln!(
            s,
            "device ceilings: sequential {name} {mb:.0} MB/s (the best median of the sweep below){}",
            c.random
                .iter()
                .map(|(p, n, mb)| format!("; {p} {n} {mb:.0} MB/s"))
                .collect::<String>()
        );
        let _ = writeln!(
            s,
            "x device is over the most the device gives the row's reads: the sequential ceiling (or, if better, its best configuration measured again beside the pattern: the pattern's device row), or for a random pattern the sooner of its distinct reads at the random ceiling and the whole file at the sequential one (repeats are free); none for warm patterns and the experiments\n"
        );
    }
    let _ = writeln!(
        s,
        "{:<20} {:<20} {:>9} {:>15} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "pattern",
        "contender",
        "MB/s",
        "(min-max)",
        "IOPS",
        "CPU s/GiB",
        "pages read",
        "wasted",
        "requests",
        "p50 us",
        "p99 us",
        "x kernel",
        "x device"
    );
    for r in &o.rows {
        let ratio = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{:<20} {:<20} {:>9.1} {:>15} {:>9.0} {:>9.2} {:>10} {:>9} {:>9} {:>9.1} {:>9.1} {:>8} {:>8}",
            r.pattern,
            r.contender,
            r.mb_per_s,
            format!("{:.0}-{:.0}", r.mb_per_s_min, r.mb_per_s_max),
            r.iops,
            r.cpu_s_per_gib,
            r.pages_read,
            r.wasted_pages.map_or("-".to_string(), |w| w.to_string()),
            r.requests,
            r.p50_us,
            r.p99_us,
            ratio(r.vs_kernel),
            ratio(r.vs_device)
        );
        if let Some(sim) = r.runs.first().and_then(|x| x.sim_requests) {
            let _ = writeln!(
                s,
                "{:<41} engine requests {} (simulator: {sim})",
                "", r.requests
            );
        }
        if r.runs.first().and_then(|x| x.context_switches).is_some() {
            // Scaled to the seed's 4 GiB: wall time, CPU time and context switches.
            let per_4g = |f: fn(&Run) -> f64| {
                median(
                    r.runs
                        .iter()
                        .map(|x| f(x) * (4u64 << 30) as f64 / x.bytes.max(1) as f64)
                        .collect(),
                )
            };
            let _ = writeln!(
                s,
                "{:<41} per 4 GiB: {:.1} s wall, {:.2} s CPU, {:.0} context switches",
                "",
                per_4g(|x| x.elapsed_s),
                per_4g(|x| x.cpu_s),
                per_4g(|x| x.context_switches.unwrap_or(0) as f64)
            );
        }
        if let Some(ov) = r.runs.first().and_then(|x| x.overlap.as_ref()) {
            let share = median(
                r.runs
                    .iter()
                    .filter_map(|x| x.overlap.as_ref()?["share_of_perfect"].as_f64())
                    .collect(),
            );
            let _ = writeln!(
                s,
                "{:<41} compute {:.0} MB/s, device {:.0} MB/s: {:.0}% of min(C, D) = {:.0}; no overlap would give {:.0}",
                "",
                ov["compute_mb_per_s"].as_f64().unwrap_or(0.0),
                ov["device_mb_per_s"].as_f64().unwrap_or(0.0),
                100.0 * share,
                ov["perfect_mb_per_s"].as_f64().unwrap_or(0.0),
                ov["serial_mb_per_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    for n in &o.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The JSON document.
pub fn json(o: &Outcome) -> serde_json::Value {
    json!({
        "machine": o.machine,
        "device_ceilings": o.ceilings,
        "results": o.rows,
        "notes": o.notes,
    })
}
