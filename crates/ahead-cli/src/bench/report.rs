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
        if let (Some(mb), Some(err)) = (r.predicted_mb_per_s, r.predicted_error) {
            let _ = writeln!(s, "{:<41} {:>9.1} predicted ({:+.0}%)", "", mb, err * 100.0);
        }
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
    s.push('\n');
    s.push_str(&verdict(o));
    s
}

/// The family a row's pattern belongs to, from its registry line: how it is read and what it
/// is held to.
fn family(row_pattern: &str) -> &'static str {
    match registry::for_row(row_pattern) {
        Some(p) => match (&p.runs, &p.yardstick) {
            (Runs::Warm, _) => "warm",
            (Runs::Experiment { .. }, _) => "experiments",
            (_, Yardstick::Random(_)) => "random",
            _ => "sequential",
        },
        None => "experiments",
    }
}

/// Runs of one row this far apart (fastest over slowest) are named: one run could have said
/// either.
const SPREAD_NAMED: f64 = 1.5;

/// The few lines a reader takes away: per family of patterns, each engine contender against
/// the kernel and the ceiling (lowest and highest, and which row), every row over its ceiling
/// (the yardstick is then wrong, not the row fast), and the rows whose repeats disagree.
pub fn verdict(o: &Outcome) -> String {
    let mut s = String::from("verdict:\n");
    let engines: Vec<&str> = {
        let mut v: Vec<&str> = o
            .rows
            .iter()
            .map(|r| r.contender.as_str())
            .filter(|c| c.starts_with("ahead:"))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    // The lowest and the highest of `f` over `rows`, with the rows they came from.
    let range = |rows: &[&Row], f: fn(&Row) -> Option<f64>| -> Option<String> {
        let mut v: Vec<(f64, &str)> = rows
            .iter()
            .filter_map(|r| Some((f(r)?, r.pattern.as_str())))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (lo, hi) = (v.first()?, v.last()?);
        Some(if v.len() == 1 {
            format!("{:.2} ({})", lo.0, lo.1)
        } else {
            format!("{:.2} ({}) to {:.2} ({})", lo.0, lo.1, hi.0, hi.1)
        })
    };
    for engine in &engines {
        for fam in ["sequential", "random", "warm", "experiments"] {
            let rows: Vec<&Row> = o
                .rows
                .iter()
                .filter(|r| r.contender == *engine && family(&r.pattern) == fam)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let mut line = format!(
                "  {engine}, {fam} ({} row{}):",
                rows.len(),
                if rows.len() == 1 { "" } else { "s" }
            );
            if let Some(k) = range(&rows, |r| r.vs_kernel) {
                let _ = write!(line, " {k} x the kernel");
            }
            if let Some(d) = range(&rows, |r| r.vs_device) {
                let _ = write!(line, "; {d} of the ceiling");
            }
            let _ = writeln!(s, "{line}");
        }
    }
    let over: Vec<String> = o
        .rows
        .iter()
        .filter(|r| r.vs_device.is_some_and(|v| v > 1.0))
        .map(|r| {
            format!(
                "{} on {} {:.2}",
                r.contender,
                r.pattern,
                r.vs_device.unwrap_or(0.0)
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "  over the ceiling: {}",
        if over.is_empty() {
            "no row".to_string()
        } else {
            format!(
                "{} (a ceiling a row beats is not one: read its note)",
                over.join(", ")
            )
        }
    );
    let spread: Vec<String> = o
        .rows
        .iter()
        .filter(|r| r.runs.len() > 1 && r.mb_per_s_max > SPREAD_NAMED * r.mb_per_s_min)
        .map(|r| {
            format!(
                "{} on {} {:.0}-{:.0}",
                r.contender, r.pattern, r.mb_per_s_min, r.mb_per_s_max
            )
        })
        .collect();
    if spread.is_empty() {
        let repeats = o.rows.iter().map(|r| r.runs.len()).max().unwrap_or(0);
        let _ = writeln!(
            s,
            "  spread: {}",
            if repeats > 1 {
                format!("no row's runs differ by more than {SPREAD_NAMED}x")
            } else {
                "one run each: repeat (--repeat 5) before trusting a ratio".to_string()
            }
        );
    } else {
        let _ = writeln!(
            s,
            "  runs {SPREAD_NAMED}x or more apart (MB/s, slowest-fastest): {}",
            spread.join(", ")
        );
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
