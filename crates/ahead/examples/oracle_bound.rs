//! How often, and by how much, a causal policy comes in under the oracle on small random
//! patterns of the property test's kinds, on a disk with a reader that computes (where the
//! oracle's rules are least sure of the best cut, and `no_policy_beats_the_oracle` once held it
//! to 2% instead of 0.5%).
//!
//! `cargo run --release -p ahead --example oracle_bound -- [PATTERNS] [SEED] [DEVICE] [US_PER_PAGE]`
//! (defaults: 5000 patterns, seed 12345, hdd, 10 us per page).

use ahead::pattern::Pattern;
use ahead::policy::{ORACLE, POLICIES};
use ahead::sim::{self, SimConfig};

#[path = "../tests/common/small_patterns.rs"]
mod small_patterns;
use small_patterns::{small_pattern, KINDS};

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5000);
    let mut state: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12345)
        .max(1);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let device = args.next().unwrap_or_else(|| "hdd".into());
    let device = match ahead::DeviceModel::preset(&device) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let us_per_page: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let config = SimConfig {
        device,
        compute_ns_per_page: us_per_page * 1000,
        ..SimConfig::default()
    };
    let mut over = Vec::new();
    for _ in 0..count {
        let (size, bs, k, seed) = (1 + next() % 399, 1 + next() % 39, 1 + next() % 5, next());
        let spec = small_pattern((next() % KINDS as u64) as usize, size, bs, k, seed);
        let pattern = Pattern::parse(&spec).expect("a valid pattern");
        let oracle = sim::run(ORACLE, config, pattern.workload())
            .expect("runs")
            .faithful;
        let mut worst: Option<(f64, &str, f64)> = None;
        for p in POLICIES.iter().map(|p| p.name).filter(|p| *p != ORACLE) {
            let m = sim::run(p, config, pattern.workload())
                .expect("runs")
                .faithful;
            let x = oracle.modeled_ms / m.modeled_ms;
            if x > 1.005 && worst.is_none_or(|w| x > w.0) {
                worst = Some((x, p, m.modeled_ms));
            }
        }
        if let Some((x, p, ms)) = worst {
            over.push((x, spec, p, ms, oracle.modeled_ms));
        }
    }
    over.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "{} of {count} patterns have a policy more than 0.5% under the oracle ({}, {us_per_page} us/page)",
        over.len(),
        device.name
    );
    for (x, spec, p, ms, oracle) in over.iter().take(10) {
        println!("{x:.4}  {spec}  {p} {ms:.3} ms, oracle {oracle:.3} ms");
    }
}
