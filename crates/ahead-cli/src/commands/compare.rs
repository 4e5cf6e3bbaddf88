//! `ahead compare`: the live kernel's windows beside the linux-ondemand model's.

use crate::*;

/// The policy `compare` shows beside the kernel model by default.
pub(crate) fn default_instead() -> &'static str {
    if ahead::policy::names().any(|n| n == "adaptive") {
        "adaptive"
    } else {
        "pratt"
    }
}

pub(crate) fn window_text(w: Option<&Window>) -> String {
    match w {
        Some(w) => format!("{:>9} {:>6} {:>6}", w.start, w.size, w.async_size),
        None => format!("{:>9} {:>6} {:>6}", "-", "-", "-"),
    }
}

pub(crate) fn cmd_compare(a: CompareArgs) -> Result<String, Failure> {
    let instead = a.instead.as_deref().unwrap_or(default_instead());
    ahead::policy::validate_name(instead).map_err(usage)?;
    let dir = TraceDir::load(&a.dir).map_err(runtime)?;
    let cmp = kernel::compare(&dir).map_err(runtime)?;
    let config = dir.sim_config();
    let runs = ["linux-ondemand", instead]
        .iter()
        .map(|p| sim::run(p, config, dir.reads.clone().into_workload()))
        .collect::<Result<Vec<RunReport>, String>>()
        .map_err(runtime)?;
    if a.json {
        return Ok(json_text(&json!({
            "dir": a.dir.display().to_string(),
            "kernel": dir.meta.kernel,
            "source": dir.meta.source,
            "kernel_windows": cmp.kernel_windows(),
            "model_windows": cmp.model_windows(),
            "identical": cmp.identical(),
            "exact_share": cmp.exact_share(),
            "comparison": cmp,
            "results": report::results_json(&runs),
        })));
    }
    let mut out = String::new();
    writeln!(
        out,
        "{}: {} on Linux {}\nmodel: linux-ondemand, max window {} pages, largest I/O {} pages, folios up to order {}\n",
        a.dir.display(),
        dir.meta.source,
        dir.meta.kernel,
        cmp.ra_max_pages,
        cmp.io_max_pages,
        cmp.folio_max_order
    )
    .ok();
    let skipped: Vec<&str> = cmp
        .files
        .iter()
        .filter(|f| !f.compared)
        .map(|f| f.path.as_str())
        .collect();
    if !skipped.is_empty() {
        writeln!(
            out,
            "not compared (their cache state before the run is unknown; name them with --drop to trace them cold): {}\n",
            skipped.join(", ")
        )
        .ok();
    }
    for f in cmp.files.iter().filter(|f| f.compared) {
        writeln!(
            out,
            "{}: kernel {} windows, model {}, identical {}",
            f.path,
            f.kernel.len(),
            f.model.len(),
            f.identical
        )
        .ok();
        if let Some(first) = f.first_difference {
            writeln!(
                out,
                "  first difference at decision {first}:\n  {:>5}  {:>9} {:>6} {:>6}   {:>9} {:>6} {:>6}",
                "#", "kernel", "size", "async", "model", "size", "async"
            )
            .ok();
            let from = first.saturating_sub(1);
            let to = (first + a.show).min(f.kernel.len().max(f.model.len()));
            for i in from..to {
                writeln!(
                    out,
                    "  {i:>5}  {}   {}{}",
                    window_text(f.kernel.get(i)),
                    window_text(f.model.get(i)),
                    if f.kernel.get(i) == f.model.get(i) {
                        ""
                    } else {
                        "  <"
                    }
                )
                .ok();
            }
        }
    }
    if cmp.kernel_windows() + cmp.model_windows() == 0 {
        writeln!(
            out,
            "\nno windows compared: neither the kernel nor the model read ahead on a cold file\n"
        )
        .ok();
    } else {
        writeln!(
            out,
            "\nidentical windows: {} of {} kernel windows ({} model windows): {:.2}%\n",
            cmp.identical(),
            cmp.kernel_windows(),
            cmp.model_windows(),
            100.0 * cmp.exact_share()
        )
        .ok();
    }
    writeln!(
        out,
        "the same reads through the model and through {instead} instead:"
    )
    .ok();
    out.push_str(&totals_table(&runs));
    Ok(out)
}
