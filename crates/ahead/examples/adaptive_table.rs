//! The simulator's tables for adaptive, from one command (what BENCHMARKS.md records):
//!
//!     cargo run --release -p ahead --example adaptive_table
//!
//! Part 1: the paper's Figures 4-10 (default settings: nvme, 256 MiB cache, 128 KiB window):
//! adaptive's wasted pages against 1% of the requested pages, and its requests against the best
//! of linux-2.6.7, pratt and linux-ondemand plus 1% (rounded up).
//! Part 2: every pattern of the table (`tests/common/table.rs`) on every modelled device, with a
//! reader computing 10 us per page and one computing nothing: the fastest causal policy (every
//! one but the oracle, adaptive among them), adaptive's time over it, both waste shares, the
//! fastest policy other than adaptive (for reading adaptive's waste against), and the oracle
//! against the fastest causal policy. "ok" or "MISS" against the bar (1.03x, 2% or the
//! fastest's waste, no policy 0.5% below the oracle); "known" marks a row held to a looser bar
//! (see `table::bar`).
//! Part 3: issue 18's named cases on the default settings (128 KiB window, 256 MiB cache).
//! Every figure is computed here.

#[path = "../tests/common/table.rs"]
#[allow(dead_code)]
mod table;

use ahead::paper::FIGURES;
use ahead::pattern::Pattern;
use ahead::policy::ORACLE;
use ahead::sim::{self, DeviceModel, SimConfig};

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "MISS"
    }
}

fn main() {
    println!("## Figures 4-10 (nvme, 256 MiB cache, 128 KiB window)\n");
    println!("| figure | requested | adaptive wasted | 1% of requested | | adaptive requests | best of 2.6.7/pratt/ondemand | +1% | |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for fig in &FIGURES {
        let bars = table::FigureBars::of(fig);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fig.figure,
            fig.requested,
            bars.wasted,
            bars.wasted_allowed,
            verdict(bars.wasted <= bars.wasted_allowed),
            bars.requests,
            bars.best_kernel_requests,
            bars.requests_allowed,
            verdict(bars.requests <= bars.requests_allowed)
        );
    }

    println!("\n## Every pattern, device and reader (64 MiB cache, read_ahead_kb 8192, max_sectors_kb 4096)\n");
    println!("Times in modelled ms; waste as % of pages read.\n");
    println!("| device | us/page | pattern | fastest causal | ms | adaptive ms | x | adaptive waste | fastest's waste | | fastest other (waste) | oracle ms | fastest/oracle | |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let rows = table::rows();
    for row in &rows {
        let a = row.get("adaptive");
        let (name, f) = row.fastest(true);
        let (other, g) = row.fastest(false);
        let o = row.get(ORACLE);
        let known = table::bar(row) != (1.03, 0.02);
        let ok = table::shortfalls(row).is_empty();
        println!(
            "| {} | {} | {} | {name} | {:.1} | {:.1} | {:.3} | {:.2} | {:.2} | {} | {other} {:.1} ({:.2}) | {:.1} | {:.3} | {} |",
            row.device,
            row.compute_ns / 1000,
            row.spec,
            f.modeled_ms,
            a.modeled_ms,
            a.modeled_ms / f.modeled_ms,
            100.0 * table::waste(a),
            100.0 * table::waste(f),
            if ok && known { "known" } else { verdict(ok) },
            g.modeled_ms,
            100.0 * table::waste(g),
            o.modeled_ms,
            f.modeled_ms / o.modeled_ms,
            verdict(o.modeled_ms <= 1.005 * f.modeled_ms),
        );
    }
    let worst = rows
        .iter()
        .map(|r| r.get("adaptive").modeled_ms / r.fastest(true).1.modeled_ms)
        .fold(0.0, f64::max);
    println!("\nWorst adaptive/fastest: {worst:.3}.");

    println!("\n## Issue 18's named cases, default settings (nvme or remote, 256 MiB cache, 128 KiB window)\n");
    println!("| case | adaptive ms | fastest other | ms | oracle ms | adaptive/oracle |");
    println!("|---|---|---|---|---|---|");
    for (spec, device) in [
        ("seq:size=256m,bs=256k", DeviceModel::NVME),
        ("seq:size=256m,bs=1m", DeviceModel::NVME),
        ("seq:size=256m,bs=4k", DeviceModel::REMOTE),
    ] {
        let config = SimConfig {
            device,
            ..SimConfig::default()
        };
        let pattern = Pattern::parse(spec).expect("valid spec");
        let m = |p: &str| {
            sim::run(p, config, pattern.workload())
                .expect("runs")
                .faithful
        };
        let (a, o) = (m("adaptive"), m(ORACLE));
        let (name, f) = ahead::policy::POLICIES
            .iter()
            .filter(|p| p.name != ORACLE && p.name != "adaptive")
            .map(|p| (p.name, m(p.name)))
            .min_by(|x, y| x.1.modeled_ms.total_cmp(&y.1.modeled_ms))
            .expect("policies");
        println!(
            "| {spec} on {} | {:.1} | {name} | {:.1} | {:.1} | {:.2} |",
            device.name,
            a.modeled_ms,
            f.modeled_ms,
            o.modeled_ms,
            a.modeled_ms / o.modeled_ms
        );
    }
}
