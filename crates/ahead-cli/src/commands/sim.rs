//! `ahead sim`: policies on a pattern, or the 2004 paper's figures.

use crate::*;

pub(crate) fn cmd_sim(a: SimArgs) -> Result<String, Failure> {
    let mut out = String::new();
    let config = a.model.config()?;
    let policies = a.model.policies()?;
    let Some(spec) = a.pattern else {
        let figures = paper::reproduce(&policies, config).map_err(runtime)?;
        if a.model.json {
            out.push_str(&json_text(&report::paper_json(&figures)));
        } else {
            writeln!(out, "The 2004 readahead paper's Figures 4-10 (Pai, Pulavarty, Cao, OLS 2004), reproduced.").ok();
            writeln!(out, "Left: the paper's accounting (every window page counts as read; wasted = read - requested).").ok();
            writeln!(out, "Right: a faithful page cache. '!' marks a cell more than 1% (and 3) from the paper.\n").ok();
            for f in &figures {
                writeln!(out, "{}", report::paper_figure_table(f)).ok();
            }
        }
        return Ok(out);
    };
    let pattern = Pattern::parse(&spec).map_err(usage)?;
    let runs = policies
        .iter()
        .map(|p| sim::run(p, config, pattern.workload()))
        .collect::<Result<Vec<RunReport>, String>>()
        .map_err(runtime)?;
    if a.model.json {
        out.push_str(&json_text(&json!({
            "pattern": spec,
            "device": config.device,
            "cache_pages": config.cache_pages,
            "ra_max_pages": config.policy.ra_max_pages,
            "eviction": a.model.eviction,
            "results": report::results_json(&runs),
        })));
    } else {
        writeln!(
            out,
            "pattern {spec}, device {}, cache {}{}, max window {} KiB",
            config.device,
            show_size(config.cache_pages as u64 * PAGE_SIZE),
            if config.eviction == sim::Eviction::Clock {
                " (CLOCK, as the engine's)"
            } else {
                ""
            },
            a.model.ra_kb(Defaults::default())
        )
        .ok();
        out.push_str(&totals_table(&runs));
    }
    Ok(out)
}
