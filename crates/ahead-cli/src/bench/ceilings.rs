//! The device's ceilings a run's rows are held to (the sequential sweep's best; for a random
//! pattern, the most the device gives the bytes a row read), the rows built from the runs, and
//! the note printed wherever a row passes its ceiling (the yardstick would then be wrong).

use super::*;

/// The device's ceilings measured in a run: the best median of the sequential sweep (and which
/// configuration), and each random pattern's random ceiling.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Ceilings {
    /// The sweep's best: its configuration and median MB/s.
    pub sequential: Option<(String, f64)>,
    /// Each random pattern's ceiling: (pattern, what it is, median MB/s).
    pub random: Vec<(String, String, f64)>,
}

impl Ceilings {
    /// The ceiling a cold `pattern`'s row is over, named, for a row whose runs read
    /// `app_bytes` (median) of a file of `file_bytes`: the sequential one, or for a pattern
    /// that reads at random its [`Ceilings::random_bound`].
    ///
    /// `beside`: what the sweep's best configuration gave when measured again right after the
    /// pattern's contenders (a sequential pattern's `device` row): the ceiling is the better of
    /// the two, since the disk drifts within a run.
    fn for_row(
        &self,
        pattern: &str,
        app_bytes: u64,
        file_bytes: u64,
        beside: Option<f64>,
    ) -> Option<(String, f64)> {
        let (seq_name, seq) = self.sequential.clone()?;
        if random_phases(pattern).is_none() {
            return Some(match beside {
                Some(b) if b > seq => (format!("sequential {seq_name}, measured beside it"), b),
                _ => (format!("sequential {seq_name}"), seq),
            });
        }
        let (_, name, random) = self.random.iter().find(|(p, _, _)| p == pattern)?;
        let distinct = distinct_bytes(pattern, file_bytes, app_bytes);
        let (bound, how) = random_bound(app_bytes, distinct, file_bytes, *random, seq);
        Some((
            format!(
                "{how}: {name} ({random:.0} MB/s) for the {} MiB of distinct reads, or the sequential {seq_name} ({seq:.0} MB/s) through the whole file",
                distinct >> 20
            ),
            bound,
        ))
    }
}

/// The most the device can give `app_bytes` of random reads of which `distinct_bytes` are
/// distinct, from a file of `file_bytes`, in MB/s of reads served, and which way it is had.
/// Repeats cost nothing (any cache serves them), and the distinct bytes come either one
/// random read each, at the random ceiling `random`, or from reading the whole file in order
/// at the sequential ceiling `seq`, whichever is sooner. (Reading part of the file in order and
/// the rest at random takes a time between the two: it is linear in the part.) A reader that
/// speculates its way through the file, or serves repeats from its cache, is held to this,
/// not to the bare random ceiling it can pass.
pub(super) fn random_bound(
    app_bytes: u64,
    distinct_bytes: u64,
    file_bytes: u64,
    random: f64,
    seq: f64,
) -> (f64, &'static str) {
    let at_random = distinct_bytes as f64 / random.max(1e-9);
    let through = file_bytes as f64 / seq.max(1e-9);
    let (secs_x_1e6, how) = if at_random <= through {
        (at_random, "random")
    } else {
        (through, "sweep")
    };
    (app_bytes as f64 / secs_x_1e6.max(1e-9), how)
}

/// How many of the first `app_bytes` a random pattern reads from a file of `file_bytes` are
/// distinct: its own sequence replayed where the pattern is one reader's (`reads_of`), else
/// (tiobench's threads) the expected coverage of uniform random reads, `F (1 - e^(-A/F))`.
pub(super) fn distinct_bytes(pattern: &str, file_bytes: u64, app_bytes: u64) -> u64 {
    let pages = file_bytes.div_ceil(PAGE_SIZE).max(1);
    let mut reads = reads_of(pattern, file_bytes).peekable();
    if reads.peek().is_none() {
        let f = file_bytes as f64;
        return (f * (1.0 - (-(app_bytes as f64) / f.max(1.0)).exp())) as u64;
    }
    let mut seen = vec![0u64; pages.div_ceil(64) as usize];
    let (mut served, mut distinct) = (0u64, 0u64);
    for (off, len) in reads {
        if served >= app_bytes {
            break;
        }
        served += len;
        for page in off / PAGE_SIZE..(off + len).div_ceil(PAGE_SIZE).min(pages) {
            let (w, b) = ((page / 64) as usize, page % 64);
            if seen[w] & (1 << b) == 0 {
                seen[w] |= 1 << b;
                distinct += PAGE_SIZE;
            }
        }
    }
    distinct.min(file_bytes)
}

pub(super) fn rows(
    runs: &[(String, String, Run)],
    sweep: &[raw::Streaming],
    file_bytes: u64,
) -> (Vec<Row>, Ceilings) {
    let mut keys: Vec<(String, String)> = Vec::new();
    for (p, c, _) in runs {
        if !keys.iter().any(|(a, b)| a == p && b == c) {
            keys.push((p.clone(), c.clone()));
        }
    }
    let mut out: Vec<Row> = keys
        .into_iter()
        .map(|(p, c)| {
            let rs: Vec<Run> = runs
                .iter()
                .filter(|(a, b, _)| *a == p && *b == c)
                .map(|x| x.2.clone())
                .collect();
            let get = |f: fn(&Run) -> f64| median(rs.iter().map(f).collect());
            let mbs: Vec<f64> = rs.iter().map(|r| r.mb_per_s).collect();
            Row {
                pattern: p,
                contender: c,
                mb_per_s: median(mbs.clone()),
                mb_per_s_min: mbs.iter().copied().fold(f64::INFINITY, f64::min),
                mb_per_s_max: mbs.iter().copied().fold(0.0, f64::max),
                iops: get(|r| r.iops),
                cpu_s_per_gib: median(
                    rs.iter()
                        .map(|r| r.cpu_s / (r.bytes.max(1) as f64 / (1u64 << 30) as f64))
                        .collect(),
                ),
                p50_us: get(|r| r.p50_us),
                p99_us: get(|r| r.p99_us),
                pages_read: get(|r| r.pages_read as f64) as u64,
                wasted_pages: rs
                    .iter()
                    .all(|r| r.wasted_pages.is_some())
                    .then(|| get(|r| r.wasted_pages.unwrap_or(0) as f64) as u64),
                requests: get(|r| r.requests as f64) as u64,
                vs_kernel: None,
                vs_device: None,
                device_ceiling: None,
                device_ceiling_mb_per_s: None,
                predicted_mb_per_s: None,
                predicted_error: None,
                runs: rs,
            }
        })
        .collect();
    let ceilings = Ceilings {
        sequential: sweep
            .iter()
            .filter_map(|s| {
                out.iter()
                    .find(|r| r.pattern == DEVICE_SEQ && r.contender == s.name())
                    .map(|r| (s.name(), r.mb_per_s))
            })
            .filter(|x| x.1 > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1)),
        random: out
            .iter()
            .filter(|r| r.contender == "device")
            .filter_map(|r| {
                let phases = random_phases(&r.pattern)?;
                let sizes: Vec<String> = phases
                    .iter()
                    .map(|(bs, _)| format!("{} KiB", bs >> 10))
                    .collect();
                Some((
                    r.pattern.clone(),
                    format!("random {} x QD32", sizes.join(" + ")),
                    r.mb_per_s,
                ))
            })
            .collect(),
    };
    // Ratios: to `kernel` on the same pattern, and to the pattern's device ceiling.
    for i in 0..out.len() {
        let k = out
            .iter()
            .find(|r| r.pattern == out[i].pattern && r.contender == "kernel")
            .map(|r| r.mb_per_s);
        out[i].vs_kernel = k.filter(|&k| k > 0.0).map(|k| out[i].mb_per_s / k);
        let ceiling = if out[i].pattern == DEVICE_SEQ {
            ceilings
                .sequential
                .as_ref()
                .map(|(n, mb)| (format!("sequential {n}"), *mb))
        } else if no_device_ratio(&out[i].pattern) {
            None
        } else {
            let app_bytes = median(out[i].runs.iter().map(|r| r.bytes as f64).collect()) as u64;
            // The best the device gave beside the row, not the median: a ceiling is the most
            // the device does, and the disk drifts between the samples around a row.
            let beside = out
                .iter()
                .find(|r| r.pattern == out[i].pattern && r.contender == "device")
                .and_then(|r| r.runs.iter().map(|x| x.mb_per_s).reduce(f64::max));
            ceilings.for_row(&out[i].pattern, app_bytes, file_bytes, beside)
        };
        if let Some((name, mb)) = ceiling.filter(|c| c.1 > 0.0) {
            out[i].vs_device = Some(out[i].mb_per_s / mb);
            out[i].device_ceiling = Some(name);
            out[i].device_ceiling_mb_per_s = Some(mb);
        }
    }
    (out, ceilings)
}

/// A ceiling is a bound: a note for every cold row whose median passes the most the device
/// gives its reads by more than 10% (the yardstick, not the contender, would then be wrong).
pub(super) fn yardstick_notes(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.pattern != DEVICE_SEQ)
        .filter_map(|r| {
            let bound = r.device_ceiling_mb_per_s?;
            (r.mb_per_s > 1.1 * bound).then(|| {
                format!(
                    "yardstick: {} {} at {:.0} MB/s is {:.2}x the most the device gives its reads ({:.0} MB/s, {})",
                    r.pattern,
                    r.contender,
                    r.mb_per_s,
                    r.mb_per_s / bound,
                    bound,
                    r.device_ceiling.as_deref().unwrap_or("")
                )
            })
        })
        .collect()
}
