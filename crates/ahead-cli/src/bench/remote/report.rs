//! The remote bench's tables: medians, spreads, ratios to the device and to fsspec, and the
//! device sweep's configurations.

use super::*;

/// The table: per pattern and contender, the median MB/s with its spread, p50 latency, GETs,
/// unused bytes, the highest peak RSS over the budget (engine contenders), and the ratios to
/// the device and to fsspec.
pub(super) fn table(rows: &[PatternRuns], budget: u64) -> String {
    let mut out = String::from(
        "pattern            contender              MB/s (min-max)          p50 ms   GETs   unused  RSS-budget  x device  x fsspec  CPU s/GiB\n",
    );
    for (pattern, runs) in rows {
        let runs: Vec<(&str, Vec<RemoteRun>)> = runs
            .iter()
            .map(|(c, r)| {
                if sweeps_configurations(r) {
                    (*c, best_point_runs(r))
                } else {
                    (*c, r.clone())
                }
            })
            .collect();
        let of = |name: &str| {
            runs.iter()
                .find(|(c, r)| *c == name && !r.is_empty())
                .map(|(_, r)| med(r, |r| r.mb_per_s).0)
        };
        let (device, fsspec) = (of("device"), of("fsspec"));
        for (contender, r) in runs.iter().filter(|(_, r)| !r.is_empty()) {
            let (m, lo, hi) = med(r, |r| r.mb_per_s);
            let ratio = |base: Option<f64>| {
                base.filter(|b| *b > 0.0)
                    .map_or("-".to_string(), |b| format!("{:.2}", m / b))
            };
            let unused = r
                .iter()
                .filter_map(|r| r.unused_share)
                .fold(None, |a: Option<f64>, u| Some(a.unwrap_or(0.0).max(u)));
            // Memory over the budget, in MiB (negative: under it); the device and fsspec keep
            // their own buffers.
            let over = if contender.starts_with("ahead:") || *contender == "naive" {
                let peak = r.iter().map(|r| r.peak_rss).max().unwrap_or(0);
                format!("{:+}", (peak as i64 - budget as i64) >> 20)
            } else {
                "-".to_string()
            };
            // The client's CPU a GiB brought (the engine's, `ahead cat`'s, curl's): on a link
            // that shares this machine's CPUs with the server and the proxy, a client that
            // spends more a byte leaves them less.
            let cpu = r
                .iter()
                .all(|r| r.cpu_s_per_gib.is_some())
                .then(|| med(r, |r| r.cpu_s_per_gib.unwrap_or(0.0)).0)
                .map_or("-".to_string(), |c| format!("{c:.2}"));
            let _ = writeln!(
                out,
                "{pattern:<18} {contender:<21} {m:>8.1} ({lo:>7.1}-{hi:>7.1})  {:>8.2} {:>6} {:>8} {over:>11} {:>8} {:>9} {cpu:>10}",
                med(r, |r| r.p50_ms).0,
                med(r, |r| r.requests as f64).0 as u64,
                unused.map_or("-".to_string(), |u| format!("{:.1}%", u * 100.0)),
                ratio(device),
                ratio(fsspec),
            );
        }
    }
    out.push_str(&sweeps(rows));
    out
}

/// The median of `f` over `runs`, with its lowest and highest.
pub(super) fn med(runs: &[RemoteRun], f: fn(&RemoteRun) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    (
        v.get(v.len() / 2).copied().unwrap_or(0.0),
        v.first().copied().unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
    )
}

/// Whether `runs` are a sweeping contender's (the device's, `fsspec:tuned`'s): each run
/// holds its sweep.
fn sweeps_configurations(runs: &[RemoteRun]) -> bool {
    !runs.is_empty() && runs.iter().all(|r| !r.sweep.is_empty())
}

/// A sweeping contender's runs regrouped by the sweep's configuration: one list per
/// configuration, its run in each of `runs`.
pub(super) fn sweep_points(runs: &[RemoteRun]) -> Vec<Vec<RemoteRun>> {
    let points = runs.iter().map(|r| r.sweep.len()).min().unwrap_or(0);
    (0..points)
        .map(|i| runs.iter().map(|r| r.sweep[i].clone()).collect())
        .collect()
}

/// A sweeping contender's (the device's, `fsspec:tuned`'s) runs of its best configuration: the
/// sweep's point with the highest median over the runs (as the local bench keeps its sweep's
/// best median). The best of each run instead would lift the row by the noise of picking a
/// maximum of several samples per run.
pub(super) fn best_point_runs(runs: &[RemoteRun]) -> Vec<RemoteRun> {
    let mb_per_s = |point: &Vec<RemoteRun>| med(point, |r| r.mb_per_s).0;
    sweep_points(runs)
        .into_iter()
        .max_by(|a, b| mb_per_s(a).total_cmp(&mb_per_s(b)))
        .unwrap_or_else(|| runs.to_vec())
}

/// Under the table, per pattern: the sweeps (the device's, `fsspec:tuned`'s), each
/// configuration's median MB/s over the runs (the row is the best of them; the others say
/// what smaller GETs, or fsspec's other caches, get).
pub(super) fn sweeps(rows: &[PatternRuns]) -> String {
    let mut out = String::new();
    for (pattern, runs) in rows {
        for (contender, done) in runs {
            if !sweeps_configurations(done) {
                continue;
            }
            let medians: Vec<String> = sweep_points(done)
                .iter()
                .map(|point| {
                    let config = point[0].ceiling.as_deref().unwrap_or("?");
                    let m = med(point, |r| r.mb_per_s).0;
                    // A tenth where the rates are small (fsspec's random reads).
                    format!("{config} {m:.*}", if m < 10.0 { 1 } else { 0 })
                })
                .collect();
            if !medians.is_empty() {
                let _ = writeln!(
                    out,
                    "{contender} sweep, {pattern}: {} MB/s",
                    medians.join(", ")
                );
            }
        }
    }
    out
}
