//! `ahead bench --remote URL`: readahead over a remote object (S3 or HTTP), every contender on
//! the same object in one run, contenders alternating run by run, repeated; medians, spreads,
//! and ratios to the link's ceiling.
//!
//! Contenders:
//! * `ahead:adaptive`, `ahead:linux-ondemand`: the engine with that policy, a new engine (an
//!   empty cache) for each run.
//! * `naive`: one GET per read, as an unbuffered client does (the engine with policy `none`).
//! * `fsspec`: Python's fsspec (s3fs for `s3://`) with its default readahead cache, run as a
//!   subprocess on the same object and reads, where Python has the packages.
//! * `fsspec:tuned`: the same with each of the caches fsspec documents for a pattern
//!   (`tools::FSSPEC_TUNINGS`) every run; the row keeps the one with the best median, as the
//!   device keeps its sweep's, and the sweep is listed under the table.
//! * `pyarrow`: pyarrow's own S3 client (`pyarrow.fs.S3FileSystem`) in the same Python, each
//!   read a `read_at` of a file from `open_input_file` (S3 objects only).
//! * `cat`: `ahead cat --bs N` of the object, the CLI as a user runs it (a process of its own),
//!   on the patterns that read the whole object in order in one size (`seq-4k`, ...).
//! * `device`: the link's ceiling: the pattern's objects (the URL's up to 1 GiB, or the
//!   `--objects`) in large ranged GETs, many at once, each worker starting its next GET as one
//!   ends, by a client that is not the engine's and spends less CPU a byte than any: raw
//!   HTTP/1.1 GETs on blocking sockets (`raw_get.rs`; S3 GETs presigned before the clock
//!   starts). Over TLS, curl (`curl.rs`); where curl is missing too, the engine's own client;
//!   the row says which. Each run sweeps [`DEVICE_SWEEP`]; the table keeps the configuration
//!   with the best median over the runs, and lists every configuration's median under it.
//!   Opening the objects (a HEAD each) is not timed.
//!
//! `--objects TEMPLATE` names the many-objects patterns' 100 objects (`{}` becomes 000..099).
//! Every engine run starts from a reset peak RSS (`/proc/self/clear_refs`), so the peak it
//! reports is that run's: the cache, its buffers and the rest of the process.
//!
//! With `--latency-ms` or `--bandwidth`, the bench starts toxiproxy in front of the server
//! (the URL's host, or `AWS_ENDPOINT_URL` for `s3://`) and reads through it. The server's own
//! page cache is not dropped between runs: the link, not the server's disk, is what is
//! measured.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ahead::engine::{Engine, File};
use serde_json::json;

use crate::*;

mod curl;
mod link;
mod measure;
mod raw_get;
mod report;
mod tools;

use ahead::os::children_cpu_seconds;
use link::Link;
pub(crate) use measure::read_full;
use measure::{cpu_per_gib, peak_rss, reset_peak_rss, Nanos, PageSet};
use report::table;
use tools::{Fsspec, Toxiproxy};

/// The patterns run when none are named, in order: the library's named readers
/// (`ahead::readers`, the same reads the local bench and the Python bench make) and this
/// bench's own experiments ([`EXPERIMENTS`]). `--patterns` takes any reader's name.
const DEFAULT_PATTERNS: &[&str] = &[
    "seq-4k",
    "seq-1m",
    "reverse-64k",
    "stride-64k",
    "random-4k",
    "parquet",
    "skip-forward",
    "objects-in-turn",
    "objects-64-at-once",
];

/// What only a remote bench runs: not one sequence of reads over the object.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "parquet",
        "a footer, then four column chunks of 4 MiB in 1 MiB reads",
    ),
    (
        "objects-in-turn",
        "100 objects (--objects) one after another: open, 1 MiB reads to the end, close",
    ),
    (
        "objects-64-at-once",
        "64 objects (--objects) open at once, 1 MiB from each in turn (a 64-way merge)",
    ),
];

/// The many-objects patterns: how many objects `--objects` names, and how many are read at
/// once by `objects-64-at-once`.
const OBJECTS: usize = 100;
const AT_ONCE: usize = 64;

/// The patterns that read `--objects` instead of the URL's object.
fn reads_objects(pattern: &str) -> bool {
    pattern.starts_with("objects-")
}

/// The contenders, in the order they alternate.
const CONTENDERS: &[&str] = &[
    "ahead:adaptive",
    "ahead:linux-ondemand",
    "naive",
    "fsspec",
    "fsspec:tuned",
    "pyarrow",
    "cat",
    "device",
];

/// The one size of `reads` if they read the object in order from its start (a read() loop,
/// as `ahead cat --bs` reads); None otherwise.
fn in_order_size(reads: &[(u64, u64)], size: u64) -> Option<u64> {
    let &(_, bs) = reads.first()?;
    let mut end = 0;
    for &(offset, len) in reads {
        if offset != end || (len != bs && offset + len != size) {
            return None;
        }
        end = offset + len;
    }
    (end == size).then_some(bs)
}

/// The device yardstick: the best of ranged GETs of these sizes, this many at once, over at
/// most [`DEVICE_BYTES`] of the object. The small sizes keep a small object (or one without
/// latency) from being read in one wave of a few large GETs, and show what the link gives
/// readers held to small GETs (many streams sharing one budget: the 64-way merge's 2 MiB
/// shares make 1 MiB GETs).
const DEVICE_SWEEP: &[(u64, u64)] = &[
    (1 << 20, 32),
    (2 << 20, 32),
    (4 << 20, 32),
    (8 << 20, 16),
    (8 << 20, 32),
    (16 << 20, 16),
    (16 << 20, 32),
    // On a link capped per connection the engine keeps more than 32 GETs in flight (reads
    // ahead in parts): the ceiling must try as many.
    (2 << 20, 64),
    (4 << 20, 64),
    // 64 GETs of 8 MiB: 512 MiB in flight, more than an engine with a window of 128 MiB
    // keeps (`ahead cat` with a 512 MiB budget passed the sweep without it).
    (8 << 20, 64),
    // On a link capped lower per connection (5 MB/s), 64 connections bound the sweep and the
    // engine, in parts of 2 MiB, passed it: the ceiling tries twice as many.
    (2 << 20, 128),
    (4 << 20, 128),
];
/// As much as the sequential patterns read of the 1 GiB object: a ceiling read over
/// fewer bytes pays its first round trip and its last partial wave over less, and read
/// 512 MiB it fell 9% below the engine's median on seq-1m.
const DEVICE_BYTES: u64 = 1 << 30;

pub(crate) fn cmd(url: &str, a: &BenchArgs) -> Result<String, Failure> {
    let budget = match &a.budget {
        Some(b) => {
            ahead::units::parse_size(b)
                .map_err(|e| usage(format!("--budget: {e}")))?
                .0
        }
        None => 256 << 20,
    };
    let pattern_names: Vec<&str> = ahead::readers::READERS
        .iter()
        .map(|r| r.name)
        .chain(EXPERIMENTS.iter().map(|(n, _)| *n))
        .collect();
    let mut patterns = match a.patterns {
        Some(_) => pick(a.patterns.as_deref(), &pattern_names, "pattern")?,
        None => DEFAULT_PATTERNS.to_vec(),
    };
    let objects: Vec<String> = match &a.objects {
        Some(template) if template.contains("{}") => (0..OBJECTS)
            .map(|i| template.replace("{}", &format!("{i:03}")))
            .collect(),
        Some(_) => {
            return Err(usage(
                "--objects: the template needs {} (replaced by 000..099)",
            ))
        }
        None if a.patterns.is_some() && patterns.iter().any(|p| reads_objects(p)) => {
            return Err(usage(
                "the objects-* patterns read --objects TEMPLATE (say s3://bucket/many/{}.bin)",
            ))
        }
        None => {
            patterns.retain(|p| !reads_objects(p));
            Vec::new()
        }
    };
    let contenders = pick(a.contenders.as_deref(), CONTENDERS, "contender")?;
    let repeat = a.repeat.unwrap_or(if a.quick { 1 } else { 3 });
    if repeat == 0 || repeat > 100 {
        return Err(usage("--repeat must be between 1 and 100"));
    }
    let cap = Duration::from_secs_f64(a.cap_s.unwrap_or(if a.quick { 5.0 } else { 20.0 }));
    let bandwidth = match &a.bandwidth {
        Some(b) => Some(
            ahead::units::parse_size(b)
                .map_err(|e| usage(format!("--bandwidth: {e}")))?
                .0,
        ),
        None => None,
    };
    let mut link = Link::set_up(url, a.latency_ms, bandwidth)?;
    link.options = a.option.clone();
    let objects: Vec<String> = objects.iter().map(|o| link.via_proxy(o)).collect();
    let size = {
        let engine = link.engine("none", 8 << 20, None)?;
        let file = engine.open(&link.url).map_err(|e| runtime(e.to_string()))?;
        file.len()
    };
    let predict_on = match a.device.as_deref() {
        None => None,
        // The link measured as `ahead calibrate` measures a store, through the same proxy.
        Some("calibrate") => {
            let mut settings = link.options.clone();
            if let Some(e) = &link.endpoint {
                settings.push(format!("remote.endpoint={e}"));
            }
            let (model, host, probes) = crate::commands::calibrate_remote(
                "calibrated link",
                &link.url,
                &settings,
                Duration::from_secs_f64(1.5),
            )?;
            eprint!("{}", crate::commands::probes_text(&model, &host, &probes));
            Some((model, host))
        }
        Some(spec) => Some((
            DeviceModel::named(spec).map_err(usage)?,
            crate::commands::HostCost::of_profile(spec),
        )),
    };
    let runs_fsspec = contenders.iter().any(|c| c.starts_with("fsspec"));
    let fsspec = runs_fsspec
        .then(|| Fsspec::find(&a.python, &link))
        .flatten();
    let pyarrow = contenders
        .contains(&"pyarrow")
        .then(|| Fsspec::find_pyarrow(&a.python, &link))
        .flatten();
    eprintln!(
        "bench --remote {url}: {} MiB object{}, budget {} MiB, {repeat} repeat(s), runs capped at {:.0} s{}",
        size >> 20,
        link.describe(),
        budget >> 20,
        cap.as_secs_f64(),
        if a.option.is_empty() {
            String::new()
        } else {
            format!(", engines with {}", a.option.join(" "))
        }
    );
    let mut rows = Vec::new();
    for pattern in &patterns {
        let many = match *pattern {
            "objects-in-turn" => Some((&objects[..], false)),
            "objects-64-at-once" => Some((&objects[..AT_ONCE], true)),
            _ => None,
        };
        let reads = if many.is_some() {
            Vec::new()
        } else {
            reads_of(pattern, size)
        };
        let device_targets = match many {
            Some((urls, _)) => urls.iter().map(|u| (u.clone(), u64::MAX)).collect(),
            None => vec![(link.url.clone(), DEVICE_BYTES)],
        };
        let mut runs: Vec<(&str, Vec<RemoteRun>)> =
            contenders.iter().map(|c| (*c, Vec::new())).collect();
        // One run of `contender` on this pattern; None for a contender that does not run it.
        let run_one = |contender: &str| -> Result<Option<RemoteRun>, Failure> {
            let policy = match contender {
                "naive" => "none",
                c => c.strip_prefix("ahead:").unwrap_or(c),
            };
            Ok(Some(match (contender, many) {
                ("device", _) => link.device(&device_targets)?,
                ("fsspec" | "fsspec:tuned" | "pyarrow" | "cat", Some(_)) => return Ok(None),
                ("cat", None) => match in_order_size(&reads, size) {
                    Some(bs) => link.run_cat(bs, budget, size)?,
                    None => return Ok(None),
                },
                ("fsspec", None) => match &fsspec {
                    Some(f) => f.run(&reads, cap)?,
                    None => return Ok(None),
                },
                ("fsspec:tuned", None) => match &fsspec {
                    Some(f) => f.run_tuned(&reads, cap)?,
                    None => return Ok(None),
                },
                ("pyarrow", None) => match &pyarrow {
                    Some(p) => p.run(&reads, cap)?,
                    None => return Ok(None),
                },
                (_, Some((urls, at_once))) => {
                    let opens_ahead = contender.starts_with("ahead:");
                    link.run_objects(policy, budget, urls, at_once, opens_ahead, cap)?
                }
                (_, None) => link.run_engine(policy, budget, &reads, cap)?,
            }))
        };
        // The loopback gateway and proxy run slower for the first heavy run after a lighter
        // one, whoever makes it (BENCHMARKS, issue 21 run 4): the pattern's first contender
        // runs once first, not counted.
        if let Some(first) = contenders.first() {
            if let Some(run) = run_one(first)? {
                eprintln!(
                    "  {pattern:<18} {first:<21} {:>8.1} MB/s  (warm-up, not counted)",
                    run.mb_per_s
                );
            }
        }
        for _ in 0..repeat {
            for (contender, done) in runs.iter_mut() {
                let Some(run) = run_one(contender)? else {
                    continue;
                };
                eprintln!(
                    "  {pattern:<18} {contender:<21} {:>8.1} MB/s  p50 {:>7.2} ms  {} GETs  peak {} MiB {}",
                    run.mb_per_s,
                    run.p50_ms,
                    run.requests,
                    run.peak_rss >> 20,
                    run.ceiling.as_deref().unwrap_or("")
                );
                if !run.sweep.is_empty() {
                    let points: Vec<String> = run
                        .sweep
                        .iter()
                        .map(|p| {
                            format!("{} {:.0}", p.ceiling.as_deref().unwrap_or("?"), p.mb_per_s)
                        })
                        .collect();
                    eprintln!("    sweep: {} MB/s", points.join(", "));
                }
                done.push(run);
            }
        }
        rows.push((pattern.to_string(), runs));
    }
    if patterns.iter().any(|p| reads_objects(p)) && runs_fsspec {
        eprintln!("note: fsspec does not run the objects-* patterns");
    }
    if contenders.contains(&"pyarrow") && pyarrow.is_none() {
        eprintln!(
            "note: pyarrow skipped: {} has no pyarrow, or the object is not S3's",
            a.python
        );
    }
    if runs_fsspec && fsspec.is_none() {
        eprintln!(
            "note: fsspec skipped: {} has no s3fs/fsspec (pip install s3fs)",
            a.python
        );
    }
    let mut out = table(&rows, budget);
    let predictions = match predict_on {
        Some((device, host)) => predictions(&link, &rows, size, budget, device, host)?,
        None => Vec::new(),
    };
    if let Some((device, _)) = predict_on {
        out.push_str(&format!(
            "\npredicted: the simulator on {device}, the same reads as each engine row's median run\n"
        ));
        for p in &predictions {
            out.push_str(&format!(
                "  {:<18} {:<21} {:>9.3} MB/s measured {:>9.3} predicted ({:+.0}%)\n",
                p["pattern"].as_str().unwrap_or(""),
                p["contender"].as_str().unwrap_or(""),
                p["mb_per_s"].as_f64().unwrap_or(0.0),
                p["predicted_mb_per_s"].as_f64().unwrap_or(0.0),
                p["error"].as_f64().unwrap_or(0.0) * 100.0
            ));
        }
    }
    if let Some(path) = &a.json {
        let v = json!({
            "url": url,
            "size": size,
            "latency_ms_each_way": a.latency_ms,
            "bandwidth_per_connection": bandwidth,
            "budget": budget,
            "objects": a.objects,
            "repeat": repeat,
            "predictions": predictions,
            "patterns": rows.iter().map(|(p, runs)| json!({
                "pattern": p,
                "contenders": runs.iter().map(|(c, r)| json!({"contender": c, "runs": r})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&v).unwrap())
            .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
    }
    Ok(out)
}

/// The simulator's prediction for every engine row of a named reader (see `bench::predict`):
/// the engine's windows for the object, its reads ahead split as the link makes it split
/// them (parts of 1.5 waits' streaming on one connection, at least 2 MiB: the model's
/// commands), the same reads as the row's median run.
fn predictions(
    link: &Link,
    rows: &[PatternRuns<'_>],
    size: u64,
    budget: u64,
    device: DeviceModel,
    host: crate::commands::HostCost,
) -> Result<Vec<serde_json::Value>, Failure> {
    // The windows the engine gives the object: its budget's and the source's, whatever the
    // policy.
    let mut config = link
        .engine("none", budget, None)?
        .open(&link.url)
        .map_err(|e| runtime(e.to_string()))?
        .policy_config();
    if device.connection_mb_s > 0.0 {
        let wait_s = device.latency_us / 1e6;
        let part = (1.5 * wait_s * device.connection_mb_s * 1e6).max((2 << 20) as f64);
        let part_pages = (part as u64).div_ceil(ahead::PAGE_SIZE);
        if 2 * part_pages <= config.io_max_pages {
            config.io_max_pages = part_pages;
        }
    }
    let mut out = Vec::new();
    for (pattern, runs) in rows {
        for (contender, done) in runs {
            let Some(policy) = contender.strip_prefix("ahead:") else {
                continue;
            };
            if done.is_empty() || ahead::readers::find(pattern).is_none() {
                continue;
            }
            let made = super::predict::median_reads(done.iter().map(|r| r.reads));
            let mb_per_s = super::median(done.iter().map(|r| r.mb_per_s).collect());
            let run = super::predict::Replayed {
                policy,
                reader: pattern,
                size,
                made,
                cache_bytes: budget,
                config,
            };
            let predicted =
                super::predict::predicted_mb_per_s(&run, device, host).map_err(runtime)?;
            if let Some(p) = predicted {
                out.push(json!({
                    "pattern": pattern,
                    "contender": contender,
                    "mb_per_s": mb_per_s,
                    "predicted_mb_per_s": p,
                    "error": p / mb_per_s.max(1e-9) - 1.0,
                }));
            }
        }
    }
    Ok(out)
}

/// The names in the comma-separated `list` (all of `known` without one), each one of `known`.
fn pick(
    list: Option<&str>,
    known: &[&'static str],
    what: &str,
) -> Result<Vec<&'static str>, Failure> {
    let Some(list) = list else {
        return Ok(known.to_vec());
    };
    list.split(',')
        .map(|name| {
            let name = name.trim();
            known.iter().find(|k| **k == name).copied().ok_or_else(|| {
                usage(format!(
                    "unknown remote {what} '{name}'; known: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// The run of a sweep with the highest MB/s, holding the whole sweep.
fn best_of_sweep(sweep: Vec<RemoteRun>) -> RemoteRun {
    let mut best = sweep
        .iter()
        .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s))
        .expect("a sweep of several")
        .clone();
    best.sweep = sweep;
    best
}

/// A pattern's runs: each contender's, in order.
type PatternRuns<'a> = (String, Vec<(&'a str, Vec<RemoteRun>)>);

/// One run's measurements.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RemoteRun {
    pub mb_per_s: f64,
    pub bytes: u64,
    pub reads: u64,
    pub elapsed_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// GETs sent (engine contenders and the device).
    pub requests: u64,
    /// Bytes fetched that no read asked for, as a share of those fetched (engine contenders).
    pub unused_share: Option<f64>,
    /// Peak resident memory during the run, in bytes: this process's (`VmHWM`, reset as the run
    /// starts) or, for fsspec and pyarrow, its subprocess's.
    pub peak_rss: u64,
    /// The client's CPU seconds a GiB brought: the engine's (this process's, all its
    /// threads), `ahead cat`'s or curl's (children), the raw ceiling's (its threads'); none
    /// for fsspec and pyarrow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_s_per_gib: Option<f64>,
    /// For `device` and `fsspec:tuned`: the sweep's configuration this run measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<String>,
    /// For `device` and `fsspec:tuned`: every point of the sweep (its `ceiling` naming it),
    /// this run among them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<RemoteRun>,
}

/// The reads of `pattern` over an object of `size` bytes: (offset, length): a named reader's
/// (`ahead::readers`), or the Parquet projection's.
fn reads_of(pattern: &str, size: u64) -> Vec<(u64, u64)> {
    if pattern == "parquet" {
        let mut v = vec![
            (size.saturating_sub(8), 8),
            (size.saturating_sub(64 << 10), 64 << 10),
        ];
        for k in 0..4 {
            let start = size / 5 * k;
            v.extend((0..4).map(|i| (start + i * (1 << 20), 1 << 20)));
        }
        return v;
    }
    ahead::readers::reads(pattern, size)
        .map(Iterator::collect)
        .unwrap_or_default()
}

/// Of `fetched` pages, the share no read asked for, given the `used` pages reads touched.
fn unused_share(fetched: u64, used: u64) -> f64 {
    if fetched == 0 {
        0.0
    } else {
        fetched.saturating_sub(used) as f64 / fetched as f64
    }
}

fn measured(bytes: u64, elapsed: Duration, lat: &mut [Nanos]) -> RemoteRun {
    lat.sort_unstable();
    let at = |q: f64| {
        lat.get(((lat.len().max(1) - 1) as f64 * q) as usize)
            .map_or(0.0, |d| d.0 as f64 / 1e6)
    };
    RemoteRun {
        mb_per_s: bytes as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6,
        bytes,
        reads: lat.len() as u64,
        elapsed_s: elapsed.as_secs_f64(),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        requests: 0,
        unused_share: None,
        peak_rss: peak_rss(),
        cpu_s_per_gib: None,
        ceiling: None,
        sweep: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (the reads, the object's size, the size `ahead cat --bs` reads them in, if it can)
    #[test]
    fn cat_runs_only_what_a_read_loop_reads() {
        let in_order: Vec<(u64, u64)> = (0..10).map(|i| (i * 4096, 4096)).collect();
        let short_tail = vec![(0, 4096), (4096, 4096), (8192, 100)];
        let gap = vec![(0, 4096), (8192, 4096)];
        let not_from_start = vec![(4096, 4096), (8192, 4096)];
        let stops_early: Vec<(u64, u64)> = (0..5).map(|i| (i * 4096, 4096)).collect();
        for (reads, size, bs) in [
            (&in_order, 40960, Some(4096)),
            (&short_tail, 8292, Some(4096)),
            (&gap, 12288, None),
            (&not_from_start, 12288, None),
            (&stops_early, 40960, None),
            (&Vec::new(), 0, None),
        ] {
            assert_eq!(in_order_size(reads, size), bs, "{reads:?} of {size}");
        }
        let size = 1 << 30;
        assert_eq!(in_order_size(&reads_of("seq-4k", size), size), Some(4096));
        assert_eq!(in_order_size(&reads_of("random-4k", size), size), None);
    }
}
