//! `ahead replay`: policies on a recorded trace (strace log, CSV or a trace directory).

use crate::*;

/// A CSV field, quoted when it has to be.
pub(crate) fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

pub(crate) fn cmd_replay(a: ReplayArgs) -> Result<String, Failure> {
    // Usage first: a wrong option is reported before the trace is read.
    a.model.config_with(Defaults::default())?;
    a.model.policies()?;
    let mut out = String::new();
    let (trace, defaults, from) = ahead::kernel::load_for_replay(&a.file).map_err(runtime)?;
    for note in &trace.notes {
        eprintln!("note: {note}");
    }
    let config = a.model.config_with(defaults)?;
    let mut policies = a.model.policies()?;
    if a.windows.is_some() {
        policies = a.model.chosen_policies()?;
        if a.model.policy == "all" {
            policies = vec!["linux-ondemand"];
        } else if policies.len() != 1 {
            return Err(usage("--windows takes one --policy"));
        }
    }
    let sizes: Vec<u64> = trace.files.iter().map(|f| f.size.0).collect();
    let mount = if a.mount {
        Some(mount_path(&a.model.device)?)
    } else {
        None
    };
    let mut config = trace.timed_config(config);
    if mount.is_some() {
        // The mount's costs hold the engine's copies: nothing more a page.
        config.compute_ns_per_page = 0;
    }
    let workload = || -> Result<ahead::workload::Workload, Failure> {
        let timed = trace.clone().into_timed_workload();
        match mount {
            Some(path) => sim::through_mount(timed, path).map_err(runtime),
            None => Ok(timed),
        }
    };
    let mut runs = Vec::new();
    for p in &policies {
        let mut s = sim::Simulator::new(p, config).map_err(runtime)?;
        if let Some(path) = &a.windows {
            s.record_windows();
            s.run_workload(workload()?).map_err(runtime)?;
            let mut csv = String::from("file,start,size,async_size\n");
            for w in s.windows() {
                writeln!(
                    csv,
                    "{},{},{},{}",
                    csv_field(s.file_name(w.file)),
                    w.window.start,
                    w.window.size,
                    w.window.async_size
                )
                .ok();
            }
            if s.windows().is_empty() {
                eprintln!("note: policy {p} names no windows (only linux-ondemand models the kernel's tracepoints)");
            }
            std::fs::write(path, csv)
                .map_err(|e| runtime(format!("cannot write {}: {e}", path.display())))?;
            eprintln!(
                "wrote {} windows of {p} to {}",
                s.windows().len(),
                path.display()
            );
        } else {
            s.run_workload(workload()?).map_err(runtime)?;
        }
        runs.push(s.report());
    }
    if a.model.json {
        let mut doc = json!({
            "trace": a.file.display().to_string(),
            "notes": trace.notes,
            "ra_max_pages": config.policy.ra_max_pages,
            "program_ns": trace.program_ns,
            "io_max_pages": config.policy.io_max_pages,
            "folio_max_order": config.policy.folio_max_order,
            "results": report::results_json(&runs),
            "files": report::files_json(&runs, &sizes),
        });
        if let Some(p) = mount {
            doc["mount"] = json!({
                "readahead_pages": p.readahead_pages,
                "request_pages": p.request_pages,
                "wait_ns": p.wait_ns,
                "ahead_ns": p.ahead_ns,
            });
        }
        out.push_str(&json_text(&doc));
        return Ok(out);
    }
    let ra_kb = a.model.ra_kb(defaults);
    writeln!(
        out,
        "trace {}: {} reads over {} files; device {}, cache {}, max window {ra_kb} KiB{}",
        a.file.display(),
        trace.reads(),
        trace.files.len(),
        config.device,
        show_size(config.cache_pages as u64 * PAGE_SIZE),
        if a.model.ra_max_kb().ok().flatten().is_none() && !from.is_empty() {
            format!(" ({from})")
        } else {
            String::new()
        }
    )
    .ok();
    if let Some(ns) = trace.program_ns {
        writeln!(
            out,
            "the program's own time: {:.1} ms, spent in equal shares before its reads",
            ns as f64 / 1e6
        )
        .ok();
    }
    if let Some(p) = mount {
        writeln!(
            out,
            "through ahead mount: the kernel's readahead {} KiB in front, FUSE reads of at most {} KiB, {:.1} us each waited for, {:.1} us each read ahead",
            p.readahead_pages * 4,
            p.request_pages * 4,
            p.wait_ns as f64 / 1e3,
            p.ahead_ns as f64 / 1e3
        )
        .ok();
    }
    out.push_str(&totals_table(&runs));
    if trace.files.len() > 1 {
        for (i, f) in trace.files.iter().enumerate() {
            writeln!(out, "\n{} ({} bytes)", f.name, f.size.0).ok();
            let rows: Vec<(&str, &sim::Metrics)> = runs
                .iter()
                .map(|r| (r.policy.as_str(), &r.files[i].metrics))
                .collect();
            write!(out, "{}", report::metrics_table(&rows)).ok();
        }
    }
    Ok(out)
}

/// How reads through `ahead mount` reach its engine: the mount's own settings, and what a FUSE
/// read costs as the profile `device` measured it (`ahead calibrate --mount`).
fn mount_path(device: &str) -> Result<sim::MountPath, Failure> {
    let host = crate::commands::calibrate::HostCost::of_profile(device);
    let (Some(wait_ns), Some(ahead_ns)) = (host.fuse_wait_ns, host.fuse_ahead_ns) else {
        return Err(usage(format!(
            "--mount needs what a FUSE read costs: --device takes a profile from `ahead calibrate --mount` ({device} has none)"
        )));
    };
    let readahead_bytes = host
        .fuse_readahead_bytes
        .unwrap_or(crate::commands::FUSE_DEFAULT_READAHEAD_BYTES);
    Ok(sim::MountPath {
        readahead_pages: (readahead_bytes / PAGE_SIZE).max(1),
        request_pages: crate::commands::FUSE_REQUEST_BYTES / PAGE_SIZE,
        wait_ns: wait_ns.round() as u64,
        ahead_ns: ahead_ns.round() as u64,
    })
}
