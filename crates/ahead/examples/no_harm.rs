//! `adaptive` against the kernel's rule and every causal policy on readers nobody tuned for
//! (`tests/common/readers.rs`): for each device and reader speed, COUNT generated cases; the
//! worst ratios, how many cases are over the bars (1.05x `linux-ondemand`, 1.10x the best
//! causal policy; the oracle over 1.005x the best causal policy: the yardstick), and the
//! command that replays each of the worst.
//!
//! `cargo run --release -p ahead --example no_harm -- [COUNT] [SEED] [DEVICES]`
//! (defaults: 20000 cases per device and speed, seed 1, `nvme,hdd,remote`).

use ahead::policy::{ORACLE, POLICIES};
use ahead::DeviceModel;

#[path = "../tests/common/readers.rs"]
mod readers;
use readers::{case, time_of, Case, COMPUTE_US};

/// One case's outcome: adaptive's time over linux-ondemand's and over the best causal one's,
/// and the oracle's over the best causal one's (a lower bound: at most 1.005).
struct Outcome {
    case: Case,
    vs_ondemand: f64,
    vs_best: f64,
    best: &'static str,
    oracle_vs_best: f64,
}

fn judge(case: Case) -> Outcome {
    let causal: Vec<&'static str> = POLICIES
        .iter()
        .map(|p| p.name)
        .filter(|p| *p != ORACLE)
        .collect();
    let times: Vec<(&str, f64)> = causal.iter().map(|p| (*p, time_of(p, &case))).collect();
    let of = |name: &str| times.iter().find(|(p, _)| *p == name).unwrap().1;
    let (best, best_ms) = times
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let adaptive = of("adaptive");
    Outcome {
        vs_ondemand: adaptive / of("linux-ondemand").max(1e-9),
        vs_best: adaptive / best_ms.max(1e-9),
        best,
        oracle_vs_best: time_of(ORACLE, &case) / best_ms.max(1e-9),
        case,
    }
}

/// For every causal policy: in how many cases it is over 1.10x the best causal one, and over
/// 1.05x linux-ondemand (`AHEAD_SURVEY=1`): what the bars ask of any one policy.
fn survey(count: u64, seed: u64, device: DeviceModel, compute_us: u64) {
    let causal: Vec<&'static str> = POLICIES
        .iter()
        .map(|p| p.name)
        .filter(|p| *p != ORACLE)
        .collect();
    let mut over_best = vec![0u64; causal.len()];
    let mut over_od = vec![0u64; causal.len()];
    let mut worst_best = vec![0f64; causal.len()];
    for n in 0..count {
        let c = case(seed, n, device, compute_us);
        let times: Vec<f64> = causal.iter().map(|p| time_of(p, &c)).collect();
        let best = times.iter().copied().fold(f64::MAX, f64::min).max(1e-9);
        let od = times[causal.iter().position(|p| *p == "linux-ondemand").unwrap()].max(1e-9);
        for (i, t) in times.iter().enumerate() {
            if *t > 1.10 * best {
                over_best[i] += 1;
            }
            if *t > 1.05 * od {
                over_od[i] += 1;
            }
            worst_best[i] = worst_best[i].max(t / best);
        }
    }
    println!("{} {compute_us} us/page, {count} cases: cases over 1.10x the best causal / over 1.05x linux-ondemand / worst against the best", device.name);
    for (i, p) in causal.iter().enumerate() {
        println!(
            "  {p:15} {:6} {:6}  {:.2}x",
            over_best[i], over_od[i], worst_best[i]
        );
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let devices: Vec<DeviceModel> = args
        .next()
        .unwrap_or_else(|| "nvme,hdd,remote".into())
        .split(',')
        .map(|d| DeviceModel::preset(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    if std::env::var("AHEAD_SURVEY").is_ok() {
        for device in devices {
            for compute_us in COMPUTE_US {
                survey(count, seed, device, compute_us);
            }
        }
        return;
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    for device in devices {
        for compute_us in COMPUTE_US {
            let started = std::time::Instant::now();
            let mut outcomes: Vec<Outcome> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|t| {
                        s.spawn(move || {
                            (t..count)
                                .step_by(threads as usize)
                                .map(|n| judge(case(seed, n, device, compute_us)))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            let over_od = outcomes.iter().filter(|o| o.vs_ondemand > 1.05).count();
            // Which families fail, and how often.
            let mut by_family: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
            for o in &outcomes {
                let family = if o.case.spec.contains('+') {
                    "mixture".to_string()
                } else {
                    o.case.spec.split(':').next().unwrap().to_string()
                };
                let e = by_family.entry(family).or_default();
                e.0 += 1;
                e.1 += u64::from(o.vs_ondemand > 1.05);
            }
            let over_best = outcomes.iter().filter(|o| o.vs_best > 1.10).count();
            outcomes.sort_by(|a, b| b.vs_ondemand.total_cmp(&a.vs_ondemand));
            let worst_od = outcomes.first().map_or(0.0, |o| o.vs_ondemand);
            println!(
                "{} {compute_us} us/page: {count} cases in {:.0} s; adaptive over 1.05x linux-ondemand in {over_od}, over 1.10x the best causal in {over_best}; worst {worst_od:.3}x linux-ondemand",
                device.name,
                started.elapsed().as_secs_f64()
            );
            println!(
                "  over 1.05x linux-ondemand by family: {}",
                by_family
                    .iter()
                    .filter(|(_, (_, over))| *over > 0)
                    .map(|(f, (n, over))| format!("{f} {over}/{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for o in outcomes.iter().take(8).filter(|o| o.vs_ondemand > 1.05) {
                println!(
                    "  {:.3}x ondemand {:.3}x best ({})  {}",
                    o.vs_ondemand,
                    o.vs_best,
                    o.best,
                    o.case.command()
                );
            }
            // The yardstick: the oracle no more than 0.5% over the best causal policy.
            outcomes.sort_by(|a, b| b.oracle_vs_best.total_cmp(&a.oracle_vs_best));
            let beaten = outcomes.iter().filter(|o| o.oracle_vs_best > 1.005).count();
            println!(
                "  the oracle over 1.005x the best causal in {beaten} cases; worst {:.4}x",
                outcomes.first().map_or(0.0, |o| o.oracle_vs_best)
            );
            for o in outcomes.iter().take(3).filter(|o| o.oracle_vs_best > 1.005) {
                println!(
                    "  oracle {:.4}x {}  {}",
                    o.oracle_vs_best,
                    o.best,
                    o.case.command()
                );
            }
            outcomes.sort_by(|a, b| b.vs_best.total_cmp(&a.vs_best));
            println!(
                "  worst against the best causal: {:.3}x",
                outcomes.first().map_or(0.0, |o| o.vs_best)
            );
            for o in outcomes.iter().take(8).filter(|o| o.vs_best > 1.10) {
                println!(
                    "  {:.3}x best ({}) {:.3}x ondemand  {}",
                    o.vs_best,
                    o.best,
                    o.vs_ondemand,
                    o.case.command()
                );
            }
        }
    }
}
