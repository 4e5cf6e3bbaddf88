//! `ahead bench`: the seeds' benchmarks on real I/O, every contender on the same file in one
//! run, cold for each (the kernel's cache dropped, a new engine), contenders alternating run by
//! run, repeated; medians, spreads, and ratios to the kernel and to the device.
//!
//! Each run reads a pattern until it ends or a time cap (so slow contenders cost bounded time)
//! and measures bytes, reads, per-read latency, CPU time (all threads of this process), and
//! what the device saw (`/sys/.../stat`: requests and sectors read): pages read, and wasted
//! ones (read but never asked for).

mod ceilings;
pub(crate) mod patterns;
mod plot;
pub(crate) mod predict;
pub(crate) mod raw;
mod registry;
pub mod remote;
mod report;
pub mod sources;

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use sources::{Aligned, Contender, EngineSettings, Source};

pub use ceilings::Ceilings;
use ceilings::*;
pub use patterns::write_random_file;
use patterns::*;
pub use registry::{names as pattern_names, BENCH_PATTERNS};
use registry::{Runs, Yardstick};
use report::*;
pub use report::{json, table};

/// random-4k-qd32's methods: plain preads, a thread pool, io_uring.
const QD32_METHODS: [&str; 3] = ["sync", "threads", "uring"];

/// The contenders run when none are named.
pub const DEFAULT_CONTENDERS: &[&str] =
    &["kernel", "kernel-seq", "direct", "ahead:adaptive", "device"];

/// What to run.
pub struct Plan {
    pub file: PathBuf,
    pub dir: PathBuf,
    pub size: u64,
    pub patterns: Vec<String>,
    pub contenders: Vec<Contender>,
    pub repeat: usize,
    /// Longest a single run may take.
    pub cap: Duration,
    pub engine: EngineSettings,
    pub quick: bool,
    /// Beside every engine row of a named reader, the simulator's prediction on this model
    /// (`--device`: a calibrated profile or a preset).
    pub predict_on: Option<(ahead::DeviceModel, crate::commands::HostCost)>,
}

/// One run's measurements.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Run {
    pub mb_per_s: f64,
    pub iops: f64,
    pub bytes: u64,
    pub reads: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    pub pages_read: u64,
    /// Pages the device read that the run never asked for (`None`: not tracked).
    pub wasted_pages: Option<u64>,
    pub requests: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// For `paper`: the simulator's request count for the same pattern and policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_requests: Option<u64>,
    /// For `overlap`: the compute rate and the bounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<serde_json::Value>,
    /// For `random-4k-buffered`: context switches the run made (all the process's threads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_switches: Option<u64>,
}

/// A pattern x contender, over the repeats.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub pattern: String,
    pub contender: String,
    pub mb_per_s: f64,
    pub mb_per_s_min: f64,
    pub mb_per_s_max: f64,
    pub iops: f64,
    pub cpu_s_per_gib: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub pages_read: u64,
    pub wasted_pages: Option<u64>,
    pub requests: u64,
    pub vs_kernel: Option<f64>,
    /// Over the pattern's device ceiling (`device_ceiling`): none for warm patterns.
    pub vs_device: Option<f64>,
    /// The ceiling `vs_device` is over: the sequential sweep's best, or for a random pattern
    /// the most the device can give the bytes this row read (see [`Ceilings::random_bound`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_ceiling: Option<String>,
    /// That ceiling in MB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_ceiling_mb_per_s: Option<f64>,
    /// The simulator's MB/s for the same reader and policy on `--device`'s model, and its
    /// error over the measured median (+0.10: predicted 10% faster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_mb_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_error: Option<f64>,
    pub runs: Vec<Run>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn percentile(lat: &mut [u32], q: f64) -> f64 {
    if lat.is_empty() {
        return 0.0;
    }
    lat.sort_unstable();
    let i = ((lat.len() - 1) as f64 * q).round() as usize;
    lat[i] as f64 / 1000.0
}

use ahead::os::cpu_seconds;
use ahead::PAGE_SIZE;

/// The block device's counters for `path`'s filesystem: (reads completed, sectors read).
struct DiskStat(Option<PathBuf>);

impl DiskStat {
    fn for_path(path: &Path) -> DiskStat {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::metadata(path) else {
            return DiskStat(None);
        };
        let (ma, mi) = (libc::major(m.dev()), libc::minor(m.dev()));
        let p = PathBuf::from(format!("/sys/dev/block/{ma}:{mi}/stat"));
        DiskStat(p.exists().then_some(p))
    }

    fn read(&self) -> (u64, u64) {
        let Some(p) = &self.0 else { return (0, 0) };
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        (
            f.first().copied().unwrap_or(0),
            f.get(2).copied().unwrap_or(0),
        )
    }
}

/// Pages a run asked for, to tell wasted device reads.
struct Touched {
    bits: Vec<u64>,
    tracked: bool,
}

impl Touched {
    fn new(size: u64) -> Touched {
        Touched {
            bits: vec![0; (size / PAGE_SIZE / 64 + 1) as usize],
            tracked: size > 0,
        }
    }
    /// For runs whose reads are not followed (many threads at random).
    fn untracked() -> Touched {
        Touched {
            bits: Vec::new(),
            tracked: false,
        }
    }
    fn mark(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        for p in offset / PAGE_SIZE..=(offset + len - 1) / PAGE_SIZE {
            if let Some(w) = self.bits.get_mut((p / 64) as usize) {
                *w |= 1 << (p % 64);
            }
        }
    }
    fn pages(&self) -> u64 {
        self.bits.iter().map(|w| w.count_ones() as u64).sum()
    }
}

/// Measure one run of `pattern` by `contender`. Opening (a new engine, the kernel's cache
/// dropped) is not timed.
fn run_one(
    plan: &Plan,
    pattern: &str,
    contender: &Contender,
    log: Option<&mut Vec<ahead::engine::RequestRecord>>,
) -> Result<Run, String> {
    let disk = DiskStat::for_path(&plan.file);
    let size = plan.size;
    let mut touched = Touched::new(size);
    let source = Source::open(contender, &plan.file, &plan.engine).map_err(|e| e.to_string())?;
    let runs = registry::find(pattern).map(|p| &p.runs);
    if let Some(Runs::Warm) = runs {
        // Bring it in, unmeasured; then the measured pass.
        // Half the budget, at most 512 MiB: the warm pass is not what is measured.
        let region = (plan.engine.budget / 2).min(size).min(512 << 20);
        drive(
            &source,
            reads_of("seq-4k", region),
            plan.cap * 4,
            region,
            0.0,
            &mut Touched::new(size),
        )?;
        let (d1, c1, t1) = (disk.read(), cpu_seconds(), Instant::now());
        let r = drive(
            &source,
            reads_of("seq-4k", region),
            plan.cap,
            u64::MAX,
            0.0,
            &mut touched,
        )?;
        return Ok(finish(
            r,
            t1.elapsed(),
            cpu_seconds() - c1,
            d1,
            disk.read(),
            &touched,
        ));
    }
    let (d0, cpu0, t0) = (disk.read(), cpu_seconds(), Instant::now());
    let r = match runs {
        Some(Runs::Threads(threads)) => threads(&source, size, plan.cap, &mut touched)?,
        // The pattern's reads end where it does (the random ones after a file's worth).
        _ => drive(
            &source,
            reads_of(pattern, size),
            plan.cap,
            u64::MAX,
            0.0,
            &mut touched,
        )?,
    };
    let run = finish(
        r,
        t0.elapsed(),
        cpu_seconds() - cpu0,
        d0,
        disk.read(),
        &touched,
    );
    if let Some(log) = log {
        *log = source.request_log();
    }
    Ok(run)
}

/// A raw run's figures (no cache of ahead's between: one request per read), timed over
/// `elapsed`, with the process's CPU time since `cpu_at_start`.
fn raw_run(r: raw::RawRun, elapsed: Duration, cpu_at_start: f64) -> Run {
    let reads = r.reads;
    let mut run = finish_untracked(
        (r.bytes, r.reads, r.latencies),
        elapsed,
        cpu_seconds() - cpu_at_start,
    );
    run.requests = reads;
    run
}

/// A run's figures where the device's counters and the pages asked for are not followed.
fn finish_untracked(m: Measured, elapsed: Duration, cpu_s: f64) -> Run {
    finish(m, elapsed, cpu_s, (0, 0), (0, 0), &Touched::untracked())
}

fn finish(
    (bytes, reads, mut lat): (u64, u64, Vec<u32>),
    elapsed: Duration,
    cpu_s: f64,
    d0: (u64, u64),
    d1: (u64, u64),
    touched: &Touched,
) -> Run {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let pages_read = d1.1.saturating_sub(d0.1) / 8;
    Run {
        mb_per_s: bytes as f64 / 1e6 / secs,
        iops: reads as f64 / secs,
        bytes,
        reads,
        elapsed_s: secs,
        cpu_s,
        pages_read,
        wasted_pages: touched
            .tracked
            .then(|| pages_read.saturating_sub(touched.pages())),
        requests: d1.0.saturating_sub(d0.0),
        p50_us: percentile(&mut lat, 0.5),
        p99_us: percentile(&mut lat, 0.99),
        sim_requests: None,
        overlap: None,
        context_switches: None,
    }
}

/// The rows of one suite, and notes on what could not run.
pub struct Outcome {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub machine: serde_json::Value,
    /// The device's ceilings the ratios are over (see [`Ceilings`]).
    pub ceilings: Ceilings,
    /// The requests of one engine run (the first `ahead:` run of the first pattern), for the
    /// windows picture: its label and its log.
    pub windows: Option<(String, Vec<ahead::engine::RequestRecord>)>,
}

/// The patterns read at random, held to the random ceiling: the same reads at random offsets,
/// `O_DIRECT`, 32 in flight (tiobench's two sizes for half the time each).
fn random_phases(pattern: &str) -> Option<&'static [(usize, f64)]> {
    match registry::find(pattern)?.yardstick {
        Yardstick::Random(phases) => Some(phases),
        _ => None,
    }
}

/// Patterns whose rows have no device ratio: the warm one, and those that are experiments of
/// their own (their rows are methods or counts, not contenders on one pattern).
fn no_device_ratio(pattern: &str) -> bool {
    registry::for_row(pattern).is_some_and(|p| matches!(p.yardstick, Yardstick::None))
}

/// The sequential sweep's row name.
const DEVICE_SEQ: &str = "device-seq";

fn push(runs: &mut Vec<(String, String, Run)>, p: &str, c: &str, r: Run) {
    runs.push((p.to_string(), c.to_string(), r));
}

/// One streaming run of the device in configuration `s`, kept as pattern `p`'s row `c` (or a
/// note of why it failed), and the progress bar moved on.
fn measure_streaming(
    plan: &Plan,
    s: raw::Streaming,
    p: &str,
    c: &str,
    runs: &mut Vec<(String, String, Run)>,
    notes: &mut Vec<String>,
    bar: &indicatif::ProgressBar,
) {
    bar.set_message(format!("{p} {c}"));
    match streaming_run(plan, s) {
        Ok(run) => push(runs, p, c, run),
        Err(e) => notes.push(format!("{p} {c}: {e}")),
    }
    bar.inc(1);
}

/// The sweep's configuration with the best median so far, and that median in MB/s, if it has run.
fn best_streaming(
    runs: &[(String, String, Run)],
    sweep: &[raw::Streaming],
) -> Option<(raw::Streaming, f64)> {
    sweep
        .iter()
        .map(|s| {
            let mbs: Vec<f64> = runs
                .iter()
                .filter(|(p, c, _)| p == DEVICE_SEQ && *c == s.name())
                .map(|r| r.2.mb_per_s)
                .collect();
            (*s, median(mbs))
        })
        .filter(|x| x.1 > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// One run of the device's sequential reads in configuration `s` (the sweep's, or its best
/// beside a pattern).
fn streaming_run(plan: &Plan, s: raw::Streaming) -> Result<Run, String> {
    let c0 = cpu_seconds();
    let disk = DiskStat::for_path(&plan.file);
    let d0 = disk.read();
    let r = raw::streaming(&plan.file, s, plan.size, plan.cap).map_err(|e| e.to_string())?;
    let mut touched = Touched::new(plan.size);
    touched.mark(0, r.bytes);
    Ok(finish(
        (r.bytes, r.reads, r.latencies),
        r.elapsed,
        cpu_seconds() - c0,
        d0,
        disk.read(),
        &touched,
    ))
}

/// Whether `pattern` is held to the sequential sweep's best.
fn sequential_yardstick(pattern: &str) -> bool {
    registry::find(pattern).is_some_and(|p| matches!(p.yardstick, Yardstick::Sequential))
}

/// Run the plan. The device's ceilings (with the `device` contender) are measured in every
/// repeat beside the rest: the sequential sweep at the repeat's start, each random pattern's
/// random ceiling right after its contenders, and before and after a sequential pattern's
/// contenders the sweep's best configuration so far once more: the disk drifts within a run,
/// and a row is held to the better of the sweep and the best the device gave beside it (a
/// quick run's sweep, measured once at its start, had five rows 1.01-1.15x over it:
/// BENCHMARKS, issue 45; measured after the contenders only, two rows 1.01x: issue 44's log,
/// session 44).
pub fn run(plan: &Plan) -> Result<Outcome, String> {
    let mut notes = Vec::new();
    // Every contender runs the patterns that are not experiments of their own.
    let plain: Vec<&String> = plan
        .patterns
        .iter()
        .filter(|p| {
            !matches!(
                registry::find(p).map(|p| &p.runs),
                Some(Runs::Experiment { .. })
            )
        })
        .collect();
    let has = |p: &str| plan.patterns.iter().any(|x| x == p);
    let device = plan.contenders.contains(&Contender::Device);
    let rotation: Vec<&Contender> = plan
        .contenders
        .iter()
        .filter(|c| **c != Contender::Device)
        .collect();
    let sweep = if device {
        raw::Streaming::sweep(ahead::os::device_limits(&plan.file).1)
    } else {
        Vec::new()
    };
    let total_runs = registry::total_runs(
        &plan.patterns,
        plan.repeat,
        rotation.len(),
        device,
        sweep.len(),
    );
    let bar = if std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(total_runs as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} {msg} [{elapsed}, ~{eta} left]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut runs: Vec<(String, String, Run)> = Vec::new();
    let mut windows: Option<(String, Vec<ahead::engine::RequestRecord>)> = None;
    for rep in 0..plan.repeat {
        // The device's sequential sweep, each configuration in turn, from a different one each
        // repeat.
        for k in 0..sweep.len() {
            let s = sweep[(k + rep) % sweep.len()];
            measure_streaming(plan, s, DEVICE_SEQ, &s.name(), &mut runs, &mut notes, &bar);
        }
        for p in &plain {
            let best = best_streaming(&runs, &sweep).filter(|_| sequential_yardstick(p));
            if let Some(best) = best {
                measure_streaming(plan, best.0, p, "device", &mut runs, &mut notes, &bar);
            }
            // Contenders alternate: each repeat starts one further along.
            let n = rotation.len();
            for k in 0..n {
                let c = rotation[(k + rep) % n];
                bar.set_message(format!("{p} {}", c.name()));
                let mut log = Vec::new();
                let record = windows.is_none() && matches!(c, Contender::Ahead(_));
                match run_one(plan, p, c, record.then_some(&mut log)) {
                    Ok(r) => {
                        if record {
                            windows = Some((format!("{p}, {}", c.name()), log));
                        }
                        push(&mut runs, p, &c.name(), r)
                    }
                    Err(e) => notes.push(format!("{p} {}: {e}", c.name())),
                }
                bar.inc(1);
            }
            if let Some(best) = best {
                measure_streaming(plan, best.0, p, "device", &mut runs, &mut notes, &bar);
            }
            if let Some(phases) = random_phases(p).filter(|_| device) {
                bar.set_message(format!("{p} device"));
                let c0 = cpu_seconds();
                match raw::random_ceiling(&plan.file, phases, plan.size, plan.cap) {
                    Ok(r) => {
                        let elapsed = r.elapsed;
                        push(&mut runs, p, "device", raw_run(r, elapsed, c0));
                    }
                    Err(e) => notes.push(format!("{p} device: {e}")),
                }
                bar.inc(1);
            }
        }
        if has("random-4k-qd32") {
            let total = (4u64 << 30) / (4 << 10);
            for m in QD32_METHODS {
                bar.set_message(format!("random-4k-qd32 {m}"));
                let (c0, t0) = (cpu_seconds(), Instant::now());
                match raw::random_qd32(&plan.file, m, total, plan.cap) {
                    Ok(r) => {
                        let reads = r.reads;
                        let mut run = raw_run(r, t0.elapsed(), c0);
                        run.pages_read = reads;
                        push(&mut runs, "random-4k-qd32", m, run);
                    }
                    Err(e) => notes.push(format!("random-4k-qd32 {m}: {e}")),
                }
                bar.inc(1);
            }
        }
        if has("random-4k-buffered") {
            for k in 0..raw::BUFFERED_METHODS.len() {
                let m = raw::BUFFERED_METHODS[(k + rep) % raw::BUFFERED_METHODS.len()];
                bar.set_message(format!("random-4k-buffered {m}"));
                let (c0, x0) = (cpu_seconds(), ahead::os::context_switches());
                match raw::random_buffered(&plan.file, m, plan.cap) {
                    Ok(r) => {
                        let elapsed = r.elapsed;
                        let mut run = raw_run(r, elapsed, c0);
                        run.context_switches =
                            Some(ahead::os::context_switches().saturating_sub(x0));
                        push(&mut runs, "random-4k-buffered", m, run);
                    }
                    Err(e) => notes.push(format!("random-4k-buffered {m}: {e}")),
                }
                bar.inc(1);
            }
        }
        if has("overlap") {
            let best = best_streaming(&runs, &sweep);
            if let Err(e) = overlap(plan, best, &mut |p, c, r| push(&mut runs, p, c, r), &bar) {
                notes.push(format!("overlap: {e}"));
            }
        }
        if has("nfiles") {
            if let Err(e) = nfiles(plan, &mut |p, c, r| push(&mut runs, p, c, r), &bar) {
                notes.push(format!("nfiles: {e}"));
            }
        }
    }
    if has("paper") {
        if let Err(e) = paper(plan, &mut |p, c, r| push(&mut runs, p, c, r), &bar) {
            notes.push(format!("paper: {e}"));
        }
    }
    bar.finish_and_clear();
    let (mut rows, ceilings) = rows(&runs, &sweep, plan.size);
    notes.extend(yardstick_notes(&rows));
    if let Some((device, host)) = plan.predict_on {
        notes.extend(predict::predict(plan, device, host, &mut rows));
    }
    Ok(Outcome {
        rows,
        notes,
        machine: machine(plan),
        ceilings,
        windows,
    })
}

/// The default engine budget: a quarter of physical memory (256 MiB if it can't be told).
pub fn quarter_of_ram() -> u64 {
    let total_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    (total_kb * 1024 / 4).max(256 << 20)
}

pub use plot::{plot, windows as plot_windows};

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `write_random_file` promises: one stream of words across its blocks, cut to
    /// `size`.
    fn expected(size: u64, seed: u64) -> Vec<u8> {
        let mut rng = ahead::pattern::SplitMix64(size ^ seed);
        let mut out = Vec::new();
        while (out.len() as u64) < size {
            out.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        out.truncate(size as usize);
        out
    }

    #[test]
    fn a_random_file_has_every_byte_in_place_whatever_its_size() {
        let dir = std::env::temp_dir().join(format!("ahead-bench-rand-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Whole pages only (all direct), a partial page alone (all buffered), both at once,
        // across a block boundary, and a file that shrinks when rewritten.
        for (i, size) in [
            0u64,
            1,
            4095,
            4096,
            4097,
            (1 << 20) + 4096 + 5,
            3 << 20,
            8192,
        ]
        .into_iter()
        .enumerate()
        {
            let p = dir.join("f");
            write_random_file(&p, size, i as u64).unwrap();
            let got = std::fs::read(&p).unwrap();
            assert_eq!(got.len() as u64, size, "size {size}");
            assert!(got == expected(size, i as u64), "size {size}: bytes differ");
        }
        // Different seeds, different files (nfiles' files must not be copies of each other).
        write_random_file(&dir.join("a"), 4096, 1).unwrap();
        write_random_file(&dir.join("b"), 4096, 2).unwrap();
        assert_ne!(
            std::fs::read(dir.join("a")).unwrap(),
            std::fs::read(dir.join("b")).unwrap()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_random_pattern_is_held_to_the_sooner_of_its_random_reads_and_a_sweep() {
        let gib = 1u64 << 30;
        // 1 GiB of 4 KiB reads, all distinct, of a 2 GiB file: at 300 MB/s random and
        // 1500 MB/s in order, random reads take 3.58 s and a sweep 1.43 s: the sweep bounds it.
        let (bound, how) = random_bound(gib, gib, 2 * gib, 300.0, 1500.0);
        assert_eq!(how, "sweep");
        assert!((bound - gib as f64 / (2 * gib) as f64 * 1500.0).abs() < 1e-6);
        // A few reads are sooner read at random, and repeats are free.
        let (bound, how) = random_bound(64 << 20, 32 << 20, 2 * gib, 300.0, 1500.0);
        assert_eq!(how, "random");
        assert!((bound - 600.0).abs() < 1e-6);
    }

    #[test]
    fn distinct_reads_are_counted_from_the_patterns_own_sequence() {
        let size = 64u64 << 20;
        // random-4k's first reads are nearly all distinct; over its whole run (a file's worth
        // of reads), about 1 - e^-1 of the file.
        let few = distinct_bytes("random-4k", size, 1 << 20);
        assert!(few > (1 << 20) * 9 / 10 && few <= 1 << 20, "{few}");
        let many = distinct_bytes("random-4k", size, 2 * size) as f64 / size as f64;
        assert!((many - (1.0 - (-1.0f64).exp())).abs() < 0.01, "{many}");
        // tiobench (threads) uses the expected coverage.
        let t = distinct_bytes("tiobench", size, size) as f64 / size as f64;
        assert!((t - (1.0 - (-1.0f64).exp())).abs() < 1e-6, "{t}");
        // Never more than the file.
        assert!(distinct_bytes("random-mix", size, 10 * size) <= size);
    }
}
