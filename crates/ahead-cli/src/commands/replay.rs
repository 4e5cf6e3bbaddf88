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
    let mut runs = Vec::new();
    for p in &policies {
        let mut s = sim::Simulator::new(p, config).map_err(runtime)?;
        if let Some(path) = &a.windows {
            s.record_windows();
            s.run_workload(trace.clone().into_workload())
                .map_err(runtime)?;
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
            s.run_workload(trace.clone().into_workload())
                .map_err(runtime)?;
        }
        runs.push(s.report());
    }
    if a.model.json {
        out.push_str(&json_text(&json!({
            "trace": a.file.display().to_string(),
            "notes": trace.notes,
            "ra_max_pages": config.policy.ra_max_pages,
            "io_max_pages": config.policy.io_max_pages,
            "folio_max_order": config.policy.folio_max_order,
            "results": report::results_json(&runs),
            "files": report::files_json(&runs, &sizes),
        })));
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
