//! `ahead bench`: the seeds' benchmarks on real I/O, every contender on the same file in one
//! run, cold for each (the kernel's cache dropped, a new engine), contenders alternating run by
//! run, repeated; medians, spreads, and ratios to the kernel and to the device.
//!
//! Each run reads a pattern until it ends or a time cap (so slow contenders cost bounded time)
//! and measures bytes, reads, per-read latency, CPU time (all threads of this process), and
//! what the device saw (`/sys/.../stat`: requests and sectors read): pages read, and wasted
//! ones (read but never asked for).

mod plot;
mod raw;
pub mod sources;

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use sources::{Aligned, Contender, EngineSettings, Source};

/// Every pattern, in suite order.
pub const PATTERNS: &[&str] = &[
    "seq-4k",
    "seq-16k",
    "seq-128k",
    "seq-1m",
    "reread-4k",
    "reverse-64k",
    "stride-16k",
    "random-4k",
    "random-mix",
    "pread-16k",
    "interleave-16",
    "tiobench",
    "random-4k-qd32",
    "random-4k-buffered",
    "nfiles",
    "overlap",
    "paper",
];

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

/// A single-threaded pattern's reads: (offset, length).
fn reads_of(pattern: &str, size: u64) -> Box<dyn Iterator<Item = (u64, u64)>> {
    let seq = move |bs: u64| Box::new((0..size.div_ceil(bs)).map(move |i| (i * bs, bs)));
    let mut rng = ahead::pattern::SplitMix64(1);
    match pattern {
        "seq-4k" => seq(4096),
        "seq-16k" | "pread-16k" => seq(16 << 10),
        "seq-128k" => seq(128 << 10),
        "seq-1m" => seq(1 << 20),
        "reverse-64k" => {
            let n = size / (64 << 10);
            Box::new((0..n).rev().map(|i| (i * (64 << 10), 64 << 10)))
        }
        "stride-16k" => Box::new((0..size / (32 << 10)).map(|i| (i * (32 << 10), 16 << 10))),
        "random-4k" => {
            let pages = size / 4096;
            Box::new((0..).map(move |_| (rng.below(pages) * 4096, 4096)))
        }
        "random-mix" => {
            // iozone's mix: half the reads continue, half jump to a random 16 KiB record.
            let records = size / (16 << 10);
            let mut at = 0;
            Box::new((0..).map(move |_| {
                let r = if rng.below(2) == 0 {
                    rng.below(records)
                } else {
                    at % records
                };
                at = r + 1;
                (r * (16 << 10), 16 << 10)
            }))
        }
        _ => Box::new(std::iter::empty()),
    }
}

/// Run `reads` on `source` until they end, `cap` passes, or `max_bytes`; `compute_ns_per_byte`
/// of busy work after each read (the overlap pattern).
fn drive(
    source: &Source,
    reads: impl Iterator<Item = (u64, u64)>,
    cap: Duration,
    max_bytes: u64,
    compute_ns_per_byte: f64,
    touched: &mut Touched,
) -> Result<Measured, String> {
    let mut buf = vec![0u8; 4 << 20];
    let mut scratch = Aligned::new((4 << 20) + 8192);
    let (mut bytes, mut n) = (0u64, 0u64);
    let mut lat = Vec::new();
    let start = Instant::now();
    for (offset, len) in reads {
        if start.elapsed() >= cap || bytes >= max_bytes {
            break;
        }
        let t = Instant::now();
        let got = source
            .read_at(&mut buf[..len as usize], offset, &mut scratch)
            .map_err(|e| format!("read at {offset}: {e}"))?;
        lat.push(raw::ns_since(t));
        touched.mark(offset, got as u64);
        bytes += got as u64;
        n += 1;
        if compute_ns_per_byte > 0.0 {
            let until = t + Duration::from_nanos((got as f64 * compute_ns_per_byte) as u64);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
    Ok((bytes, n, lat))
}

/// What a run measured: bytes, reads, and per-read latencies in ns.
type Measured = (u64, u64, Vec<u32>);

/// The threads' measurements added up (the first error, if any).
fn sum(results: Vec<Result<Measured, String>>) -> Result<Measured, String> {
    let (mut b, mut n, mut lat) = (0, 0, Vec::new());
    for r in results {
        let (x, y, l) = r?;
        b += x;
        n += y;
        lat.extend(l);
    }
    Ok((b, n, lat))
}

/// Pages a run asked for, to tell wasted device reads.
struct Touched {
    bits: Vec<u64>,
    tracked: bool,
}

impl Touched {
    fn new(size: u64) -> Touched {
        Touched {
            bits: vec![0; (size / 4096 / 64 + 1) as usize],
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
        for p in offset / 4096..=(offset + len - 1) / 4096 {
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
    if pattern == "reread-4k" {
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
    let r = match pattern {
        "interleave-16" => {
            let r = interleave(&source, size, 16, plan.cap)?;
            touched.mark(0, r.0);
            r
        }
        "tiobench" => {
            touched = Touched::untracked();
            tiobench(&source, size, plan.cap, size)?
        }
        p => {
            let max = if p.starts_with("random") {
                size
            } else {
                u64::MAX
            };
            drive(&source, reads_of(p, size), plan.cap, max, 0.0, &mut touched)?
        }
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

/// 16 threads on one file: each takes the next 64 KiB (16 pages) from a shared counter and reads
/// it in 4 KiB reads, so the file is read in a scrambled order (the nfsd case).
fn interleave(source: &Source, size: u64, threads: u64, cap: Duration) -> Result<Measured, String> {
    let next = AtomicU64::new(0);
    let chunks = size / (64 << 10);
    let deadline = Instant::now() + cap;
    let results: Vec<Result<Measured, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let next = &next;
                s.spawn(move || {
                    let mut buf = vec![0u8; 4096];
                    let mut scratch = Aligned::new(16384);
                    let (mut b, mut n, mut lat) = (0u64, 0u64, Vec::new());
                    loop {
                        let c = next.fetch_add(1, Ordering::Relaxed);
                        if c >= chunks || Instant::now() >= deadline {
                            return Ok((b, n, lat));
                        }
                        for k in 0..16 {
                            let t = Instant::now();
                            let got = source
                                .read_at(&mut buf, c * (64 << 10) + k * 4096, &mut scratch)
                                .map_err(|e| e.to_string())?;
                            lat.push(raw::ns_since(t));
                            b += got as u64;
                            n += 1;
                        }
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    sum(results)
}

/// tiobench's random read test as in the 2004 thread's tables: random 16 KiB and 512 KiB reads
/// by 1, 4, 16 and 64 threads, each for an eighth of the cap; the total.
fn tiobench(source: &Source, size: u64, cap: Duration, max_bytes: u64) -> Result<Measured, String> {
    let (mut b, mut n, mut lat) = (0u64, 0u64, Vec::new());
    // Reads stop at `max_bytes` in all (the file's size: a cold run that has read that much of a
    // file it may have cached whole would go on measuring memory, not the device).
    let total = AtomicU64::new(0);
    for bs in [16u64 << 10, 512 << 10] {
        for threads in [1u64, 4, 16, 64] {
            let deadline = Instant::now() + cap / 8;
            let units = size / bs;
            let total = &total;
            let results: Vec<Result<Measured, String>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|t| {
                        s.spawn(move || {
                            let mut buf = vec![0u8; bs as usize];
                            let mut scratch = Aligned::new(bs as usize + 8192);
                            let mut rng = ahead::pattern::SplitMix64((t + 1) ^ bs);
                            let (mut b, mut n, mut lat) = (0u64, 0u64, Vec::new());
                            while Instant::now() < deadline
                                && total.fetch_add(bs, Ordering::Relaxed) < max_bytes
                            {
                                let t0 = Instant::now();
                                let got = source
                                    .read_at(&mut buf, rng.below(units) * bs, &mut scratch)
                                    .map_err(|e| e.to_string())?;
                                lat.push(raw::ns_since(t0));
                                b += got as u64;
                                n += 1;
                            }
                            Ok((b, n, lat))
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
                    .collect()
            });
            let (x, y, l) = sum(results)?;
            b += x;
            n += y;
            lat.extend(l);
        }
    }
    Ok((b, n, lat))
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
    match pattern {
        "random-4k" => Some(&[(4096, 1.0)]),
        "random-mix" => Some(&[(16 << 10, 1.0)]),
        "tiobench" => Some(&[(16 << 10, 0.5), (512 << 10, 0.5)]),
        _ => None,
    }
}

/// Patterns whose rows have no device ratio: the warm one, and those that are experiments of
/// their own (their rows are methods or counts, not contenders on one pattern).
fn no_device_ratio(pattern: &str) -> bool {
    pattern == "reread-4k"
        || pattern.starts_with("random-4k-qd32")
        || pattern.starts_with("random-4k-buffered")
        || pattern.starts_with("nfiles")
        || pattern.starts_with("overlap")
        || pattern.starts_with("paper")
}

/// The sequential sweep's row name.
const DEVICE_SEQ: &str = "device-seq";

fn push(runs: &mut Vec<(String, String, Run)>, p: &str, c: &str, r: Run) {
    runs.push((p.to_string(), c.to_string(), r));
}

/// The sweep's configuration with the best median so far, if it has run.
fn best_streaming(
    runs: &[(String, String, Run)],
    sweep: &[raw::Streaming],
) -> Option<raw::Streaming> {
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
        .map(|x| x.0)
}

/// Run the plan. The device's ceilings (with the `device` contender) are measured in every
/// repeat beside the rest: the sequential sweep at the repeat's start, each random pattern's
/// random ceiling right after its contenders.
pub fn run(plan: &Plan) -> Result<Outcome, String> {
    let mut notes = Vec::new();
    let special = [
        "random-4k-qd32",
        "random-4k-buffered",
        "nfiles",
        "overlap",
        "paper",
    ];
    let plain: Vec<&String> = plan
        .patterns
        .iter()
        .filter(|p| !special.contains(&p.as_str()))
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
    let randoms = plain.iter().filter(|p| random_phases(p).is_some()).count();
    let total_runs = plan.repeat * plain.len() * rotation.len()
        + plan.repeat * (sweep.len() + if device { randoms } else { 0 })
        + has("random-4k-qd32") as usize * plan.repeat * 3
        + has("random-4k-buffered") as usize * plan.repeat * raw::BUFFERED_METHODS.len()
        + has("overlap") as usize * plan.repeat * 4
        + has("nfiles") as usize * plan.repeat * 6
        + has("paper") as usize * 7 * 4;
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
            bar.set_message(format!("{DEVICE_SEQ} {}", s.name()));
            let (c0, t0) = (cpu_seconds(), Instant::now());
            let disk = DiskStat::for_path(&plan.file);
            let d0 = disk.read();
            match raw::streaming(&plan.file, s, plan.size, plan.cap) {
                Ok(r) => {
                    let mut touched = Touched::new(plan.size);
                    touched.mark(0, r.bytes);
                    let _ = t0;
                    let run = finish(
                        (r.bytes, r.reads, r.latencies),
                        r.elapsed,
                        cpu_seconds() - c0,
                        d0,
                        disk.read(),
                        &touched,
                    );
                    push(&mut runs, DEVICE_SEQ, &s.name(), run);
                }
                Err(e) => notes.push(format!("{DEVICE_SEQ} {}: {e}", s.name())),
            }
            bar.inc(1);
        }
        for p in &plain {
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
            let total = (4u64 << 30) / 4096;
            for m in ["sync", "threads", "uring"] {
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
    let (rows, ceilings) = rows(&runs, &sweep, plan.size);
    notes.extend(yardstick_notes(&rows));
    Ok(Outcome {
        rows,
        notes,
        machine: machine(plan),
        ceilings,
        windows,
    })
}

/// The overlap of I/O and computation (the 1996 seed): a reader that computes at `C` bytes/s on
/// what it reads, with C a quarter of and four times the device's streaming rate D (its best
/// sequential configuration). Achieved rate against min(C, D) (perfect overlap) and
/// 1/(1/C + 1/D) (none).
fn overlap(
    plan: &Plan,
    best: Option<raw::Streaming>,
    push: &mut impl FnMut(&str, &str, Run),
    bar: &indicatif::ProgressBar,
) -> Result<(), String> {
    // D: the device's best sequential rate, measured now with the sweep's best configuration
    // so far (or 8 MiB x QD16 without a sweep).
    let s = best.unwrap_or(raw::Streaming {
        bs: 8 << 20,
        qd: 16,
    });
    let d = raw::streaming(&plan.file, s, plan.size, plan.cap).map_err(|e| e.to_string())?;
    let dev = d.bytes as f64 / d.elapsed.as_secs_f64();
    for (label, c) in [("overlap-slow", dev / 4.0), ("overlap-fast", dev * 4.0)] {
        for contender in [Contender::Kernel, Contender::Ahead("adaptive".into())] {
            bar.set_message(format!("{label} {}", contender.name()));
            let source =
                Source::open(&contender, &plan.file, &plan.engine).map_err(|e| e.to_string())?;
            let mut touched = Touched::new(plan.size);
            let (c0, t0) = (cpu_seconds(), Instant::now());
            let r = drive(
                &source,
                reads_of("seq-128k", plan.size),
                plan.cap,
                u64::MAX,
                1e9 / c,
                &mut touched,
            )?;
            let mut run = finish(
                r,
                t0.elapsed(),
                cpu_seconds() - c0,
                (0, 0),
                (0, 0),
                &touched,
            );
            let achieved = run.mb_per_s * 1e6;
            run.overlap = Some(json!({
                "compute_mb_per_s": c / 1e6,
                "device_mb_per_s": dev / 1e6,
                "perfect_mb_per_s": c.min(dev) / 1e6,
                "serial_mb_per_s": 1.0 / (1.0 / c + 1.0 / dev) / 1e6,
                "share_of_perfect": achieved / c.min(dev),
            }));
            push(label, &contender.name(), run);
            bar.inc(1);
        }
    }
    Ok(())
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

/// nfiles runs under this fixed budget whatever `--budget` says: the point is many streams
/// sharing a small cache.
const NFILES_BUDGET: u64 = 256 << 20;
/// The files every nfiles run reads, whatever N.
const NFILES_FILES: u64 = 1000;

/// N files read slowly at once (the 1999 seed's select-vs-aio table): one reader takes 64 KiB
/// from each file in turn, N = 10, 100, 1000, the same bytes in all; throughput against N.
fn nfiles(
    plan: &Plan,
    push: &mut impl FnMut(&str, &str, Run),
    bar: &indicatif::ProgressBar,
) -> Result<(), String> {
    // The same files for every N, each of the same size (1 MiB; 256 KiB with --quick), read N
    // at a time: a group of N is opened, read in turn 64 KiB from each until all are done, and
    // closed, then the next group. Every run reads the same bytes in streams of the same length;
    // only how many are open and read at once changes. Opening and closing are outside the
    // clock. (One group of 10 alone would be a run of a few milliseconds.)
    let each: u64 = if plan.quick { 256 << 10 } else { 1 << 20 };
    let dir = plan.dir.join("ahead-bench-nfiles");
    let paths = make_files(&dir, NFILES_FILES, each)?;
    for n in [10usize, 100, 1000] {
        for contender in [Contender::Kernel, Contender::Ahead("adaptive".into())] {
            bar.set_message(format!("nfiles-{n} {}", contender.name()));
            // The engine only for its own runs.
            let engine = match contender {
                Contender::Kernel => None,
                _ => Some(
                    ahead::engine::Engine::builder()
                        .budget(NFILES_BUDGET)
                        .build()
                        .map_err(|e| e.to_string())?,
                ),
            };
            for p in &paths {
                sources::drop_kernel_cache(p).map_err(|e| e.to_string())?;
            }
            let mut buf = vec![0u8; 64 << 10];
            let c0 = cpu_seconds();
            let mut reading = Duration::ZERO;
            let (mut bytes, mut reads, mut lat) = (0u64, 0u64, Vec::new());
            'groups: for group in paths.chunks(n) {
                let mut files_k = Vec::new();
                let mut files_a = Vec::new();
                for p in group {
                    match &engine {
                        None => files_k.push(std::fs::File::open(p).map_err(|e| e.to_string())?),
                        Some(engine) => files_a.push(engine.open(p).map_err(|e| e.to_string())?),
                    }
                }
                let t0 = Instant::now();
                let mut off = 0;
                while off < each {
                    for i in 0..group.len() {
                        if reading + t0.elapsed() >= plan.cap {
                            reading += t0.elapsed();
                            break 'groups;
                        }
                        let t = Instant::now();
                        let got = match &engine {
                            None => std::os::unix::fs::FileExt::read_at(&files_k[i], &mut buf, off),
                            Some(_) => files_a[i].read_at(&mut buf, off),
                        }
                        .map_err(|e| e.to_string())?;
                        lat.push(raw::ns_since(t));
                        bytes += got as u64;
                        reads += 1;
                    }
                    off += 64 << 10;
                }
                reading += t0.elapsed();
            }
            let mut run = finish_untracked((bytes, reads, lat), reading, cpu_seconds() - c0);
            if let Some(engine) = &engine {
                let st = engine.stats();
                if std::env::var_os("AHEAD_BENCH_DEBUG").is_some() {
                    eprintln!("nfiles-{n}: {st}");
                }
                run.requests = st.requests;
                run.pages_read = st.pages_read;
            }
            push(&format!("nfiles-{n}"), &contender.name(), run);
            bar.inc(1);
        }
    }
    Ok(())
}

fn make_files(dir: &Path, n: u64, each: u64) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    (0..n)
        .map(|i| {
            let p = dir.join(format!("f{i:04}"));
            if std::fs::metadata(&p).map(|m| m.len()).ok() != Some(each) {
                write_random_file(&p, each, i).map_err(|e| format!("{}: {e}", p.display()))?;
            } else {
                // Written back, or dropping its cached pages before a cold run would not work.
                std::fs::File::open(&p)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| format!("{}: {e}", p.display()))?;
            }
            Ok(p)
        })
        .collect()
}

/// Create (or replace) `path` with `size` pseudo-random bytes from `seed` (random, so nothing
/// compresses or dedups them), written back to the device before it returns.
///
/// The whole pages go through `O_DIRECT`: buffered, each page of the file would first be a
/// page of the kernel's cache, and fresh memory is slow on a VM (2 GiB took 8.4 s here, against
/// 1.4 s direct). A partial last page, or a filesystem that refuses `O_DIRECT`, is written
/// buffered.
pub fn write_random_file(path: &Path, size: u64, seed: u64) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const BLOCK: usize = 1 << 20;
    let create = |flags: i32| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(flags)
            .open(path)
    };
    let mut direct = match create(libc::O_DIRECT) {
        Ok(f) => Some(f),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
        Err(e) => return Err(e),
    };
    let buffered = match direct {
        Some(_) => std::fs::OpenOptions::new().write(true).open(path)?,
        None => create(0)?,
    };
    let whole_pages = size / 4096 * 4096;
    let mut rng = ahead::pattern::SplitMix64(size ^ seed);
    let mut block = Aligned::new(BLOCK);
    let mut off = 0u64;
    while off < size {
        for w in block.as_mut_slice().chunks_exact_mut(8) {
            w.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let n = (size - off).min(BLOCK as u64);
        let bytes = &block.as_slice()[..n as usize];
        // Direct writes need whole pages: the last, partial one goes buffered.
        let whole = whole_pages.saturating_sub(off).min(n) as usize;
        if let Some(d) = &direct {
            match d.write_all_at(&bytes[..whole], off) {
                Ok(()) => {
                    buffered.write_all_at(&bytes[whole..], off + whole as u64)?;
                    off += n;
                    continue;
                }
                // An alignment this filesystem does not take: the rest goes buffered.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => direct = None,
                Err(e) => return Err(e),
            }
        }
        buffered.write_all_at(bytes, off)?;
        off += n;
    }
    // Written back (the buffered tail, and the size), or dropping its cached pages before a
    // cold run would not work.
    buffered.sync_all()
}

/// The paper's Figures 4-10 on the real file: the engine's request count for each policy beside
/// the simulator's prediction for the same pattern, window (128 KiB), largest request and cache.
fn paper(
    plan: &Plan,
    push: &mut impl FnMut(&str, &str, Run),
    bar: &indicatif::ProgressBar,
) -> Result<(), String> {
    use ahead::paper::FIGURES;
    for fig in &FIGURES {
        for policy in ["linux-2.6.7", "pratt", "linux-ondemand", "adaptive"] {
            bar.set_message(format!("paper fig {} {policy}", fig.figure));
            let pattern = fig.pattern(0);
            let workload = pattern.workload();
            let span = (fig.read_pages + fig.seek_pages) * fig.repeat * 4096;
            if span > plan.size {
                return Err(format!(
                    "figure {} needs a file of {span} bytes",
                    fig.figure
                ));
            }
            let engine = ahead::engine::Engine::builder()
                .policy(policy)
                .budget(plan.engine.budget)
                .ra_max_kb(128)
                .io_max_kb(128)
                .backend(ahead::engine::BackendChoice::SYNC)
                .build()
                .map_err(|e| e.to_string())?;
            sources::drop_kernel_cache(&plan.file).map_err(|e| e.to_string())?;
            let file = engine.open(&plan.file).map_err(|e| e.to_string())?;
            let mut buf = vec![0u8; 1 << 20];
            let (c0, t0) = (cpu_seconds(), Instant::now());
            let (mut bytes, mut reads) = (0u64, 0u64);
            let mut lat = Vec::new();
            for ev in workload.events {
                if let ahead::Event::Read { offset, len, .. } = ev {
                    let t = Instant::now();
                    bytes += file
                        .read_at(&mut buf[..len.0 as usize], offset.0)
                        .map_err(|e| e.to_string())? as u64;
                    lat.push(raw::ns_since(t));
                    reads += 1;
                }
            }
            let stats = engine.stats();
            let sim = ahead::sim::run(
                policy,
                ahead::SimConfig {
                    cache_pages: (plan.engine.budget / 4096) as usize,
                    policy: ahead::PolicyConfig {
                        ra_max_pages: 32,
                        io_max_pages: 32,
                        fixed_pages: 32,
                        folio_max_order: 0,
                    },
                    ..ahead::SimConfig::default()
                },
                pattern.workload(),
            )?;
            let mut run = finish_untracked((bytes, reads, lat), t0.elapsed(), cpu_seconds() - c0);
            run.requests = stats.requests;
            run.pages_read = stats.pages_read;
            run.wasted_pages = Some(
                stats
                    .pages_read
                    .saturating_sub(sim.faithful.pages_requested),
            );
            run.sim_requests = Some(sim.faithful.read_requests);
            push(
                &format!("paper-fig{}", fig.figure),
                &format!("ahead:{policy}"),
                run,
            );
            bar.inc(1);
        }
    }
    Ok(())
}

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
    fn for_row(&self, pattern: &str, app_bytes: u64, file_bytes: u64) -> Option<(String, f64)> {
        let (seq_name, seq) = self.sequential.clone()?;
        if random_phases(pattern).is_none() {
            return Some((format!("sequential {seq_name}"), seq));
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
fn random_bound(
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
fn distinct_bytes(pattern: &str, file_bytes: u64, app_bytes: u64) -> u64 {
    let pages = file_bytes.div_ceil(4096).max(1);
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
        for page in off / 4096..(off + len).div_ceil(4096).min(pages) {
            let (w, b) = ((page / 64) as usize, page % 64);
            if seen[w] & (1 << b) == 0 {
                seen[w] |= 1 << b;
                distinct += 4096;
            }
        }
    }
    distinct.min(file_bytes)
}

fn rows(
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
            ceilings.for_row(&out[i].pattern, app_bytes, file_bytes)
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
fn yardstick_notes(rows: &[Row]) -> Vec<String> {
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

fn machine(plan: &Plan) -> serde_json::Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let (ra, io) = ahead::os::device_limits(&plan.file);
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "cpu": cpu,
        "kernel": kernel.trim(),
        "file": plan.file.display().to_string(),
        "size_bytes": plan.size,
        "read_ahead_kb": ra,
        "max_sectors_kb": io,
        "engine_budget_bytes": plan.engine.budget,
        "repeat": plan.repeat,
        "cap_s": plan.cap.as_secs_f64(),
    })
}

/// The readable table.
pub fn table(o: &Outcome) -> String {
    let mut s = String::new();
    let m = &o.machine;
    let _ = writeln!(
        s,
        "ahead bench: {} ({} bytes), {} CPUs, Linux {}, read_ahead_kb {}, max_sectors_kb {}; engine budget {} MiB (nfiles {} MiB); median of {} (min-max), runs capped at {} s\n",
        m["file"].as_str().unwrap_or(""),
        m["size_bytes"],
        m["cpus"],
        m["kernel"].as_str().unwrap_or(""),
        m["read_ahead_kb"],
        m["max_sectors_kb"],
        m["engine_budget_bytes"].as_u64().unwrap_or(0) >> 20,
        NFILES_BUDGET >> 20,
        m["repeat"],
        m["cap_s"]
    );
    let c = &o.ceilings;
    if let Some((name, mb)) = &c.sequential {
        let _ = writeln!(
            s,
            "device ceilings: sequential {name} {mb:.0} MB/s (the best median of the sweep below){}",
            c.random
                .iter()
                .map(|(p, n, mb)| format!("; {p} {n} {mb:.0} MB/s"))
                .collect::<String>()
        );
        let _ = writeln!(
            s,
            "x device is over the most the device gives the row's reads: the sequential ceiling, or for a random pattern the sooner of its distinct reads at the random ceiling and the whole file at the sequential one (repeats are free); none for warm patterns and the experiments\n"
        );
    }
    let _ = writeln!(
        s,
        "{:<20} {:<20} {:>9} {:>15} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "pattern",
        "contender",
        "MB/s",
        "(min-max)",
        "IOPS",
        "CPU s/GiB",
        "pages read",
        "wasted",
        "requests",
        "p50 us",
        "p99 us",
        "x kernel",
        "x device"
    );
    for r in &o.rows {
        let ratio = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{:<20} {:<20} {:>9.1} {:>15} {:>9.0} {:>9.2} {:>10} {:>9} {:>9} {:>9.1} {:>9.1} {:>8} {:>8}",
            r.pattern,
            r.contender,
            r.mb_per_s,
            format!("{:.0}-{:.0}", r.mb_per_s_min, r.mb_per_s_max),
            r.iops,
            r.cpu_s_per_gib,
            r.pages_read,
            r.wasted_pages.map_or("-".to_string(), |w| w.to_string()),
            r.requests,
            r.p50_us,
            r.p99_us,
            ratio(r.vs_kernel),
            ratio(r.vs_device)
        );
        if let Some(sim) = r.runs.first().and_then(|x| x.sim_requests) {
            let _ = writeln!(
                s,
                "{:<41} engine requests {} (simulator: {sim})",
                "", r.requests
            );
        }
        if r.runs.first().and_then(|x| x.context_switches).is_some() {
            // Scaled to the seed's 4 GiB: wall time, CPU time and context switches.
            let per_4g = |f: fn(&Run) -> f64| {
                median(
                    r.runs
                        .iter()
                        .map(|x| f(x) * (4u64 << 30) as f64 / x.bytes.max(1) as f64)
                        .collect(),
                )
            };
            let _ = writeln!(
                s,
                "{:<41} per 4 GiB: {:.1} s wall, {:.2} s CPU, {:.0} context switches",
                "",
                per_4g(|x| x.elapsed_s),
                per_4g(|x| x.cpu_s),
                per_4g(|x| x.context_switches.unwrap_or(0) as f64)
            );
        }
        if let Some(ov) = r.runs.first().and_then(|x| x.overlap.as_ref()) {
            let share = median(
                r.runs
                    .iter()
                    .filter_map(|x| x.overlap.as_ref()?["share_of_perfect"].as_f64())
                    .collect(),
            );
            let _ = writeln!(
                s,
                "{:<41} compute {:.0} MB/s, device {:.0} MB/s: {:.0}% of min(C, D) = {:.0}; no overlap would give {:.0}",
                "",
                ov["compute_mb_per_s"].as_f64().unwrap_or(0.0),
                ov["device_mb_per_s"].as_f64().unwrap_or(0.0),
                100.0 * share,
                ov["perfect_mb_per_s"].as_f64().unwrap_or(0.0),
                ov["serial_mb_per_s"].as_f64().unwrap_or(0.0)
            );
        }
    }
    for n in &o.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The JSON document.
pub fn json(o: &Outcome) -> serde_json::Value {
    json!({
        "machine": o.machine,
        "device_ceilings": o.ceilings,
        "results": o.rows,
        "notes": o.notes,
    })
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
        // random-4k's first reads are nearly all distinct; over twice the file, about
        // 1 - e^-2 of it.
        let few = distinct_bytes("random-4k", size, 1 << 20);
        assert!(few > (1 << 20) * 9 / 10 && few <= 1 << 20, "{few}");
        let many = distinct_bytes("random-4k", size, 2 * size) as f64 / size as f64;
        assert!((many - (1.0 - (-2.0f64).exp())).abs() < 0.01, "{many}");
        // tiobench (threads) uses the expected coverage.
        let t = distinct_bytes("tiobench", size, size) as f64 / size as f64;
        assert!((t - (1.0 - (-1.0f64).exp())).abs() < 1e-6, "{t}");
        // Never more than the file.
        assert!(distinct_bytes("random-mix", size, 10 * size) <= size);
    }
}
