//! `ahead calibrate`: measure the device the way the engine reads it, and write the model the
//! simulator takes (`--device profile.json` wherever `--device nvme` is taken).
//!
//! The probes are the reads the engine makes, each for a second or two in all (three rounds of
//! every probe, the median round kept) with the kernel's cache of the file dropped: a small
//! read alone, in order and at random, and 64 KiB and 1 MiB alone (a request's cost against
//! its size); 4 KiB at random at depths 4-128 (the rate of commands, and the depth that
//! reaches it) and in order at depth 32 (a request's own cost, told from a seek's); and the
//! engine's own largest requests (`max_sectors_kb`) in order at depths 1-16 (its windows). For
//! an object store: a small GET alone (the wait for a first byte), a 4 MiB GET alone (one
//! connection's rate), small GETs 64 at once, and 4 MiB GETs 8-64 at once, through the
//! engine's own client, one GET a read.
//!
//! The model (`ahead::DeviceModel`) has six figures: latency, per-request cost, seek,
//! bandwidth, queue depth and a request's own streaming rate (an object store's connection;
//! a virtual disk has one too). A first guess reads each where it shows alone (bandwidth from
//! the best stream, the per-request cost from the best small-read rate, latency from a small
//! read alone less that cost, queue depth by Little's law), then a search moves the figures
//! to the model closest to every probe (the sum of squared log errors, the engine's operating
//! points, a small read alone and the largest streams, counted three times).
//!
//! The engine's own cost is measured beside it: a read call and a page copied out of its
//! cache, on pages it holds (the profile's `host`), which `ahead bench --device` charges as the
//! reader's time.
//!
//! With `--mount`, a local file's directory is mounted with `ahead mount` and what a read
//! through FUSE costs a program beside storage is measured (`host.fuse_wait_ns`,
//! `fuse_ahead_ns`, which `ahead replay --mount` charges): a region read through a fresh open
//! in 4 KiB reads backward (the kernel reads nothing ahead: each read is a FUSE read the
//! program waits for) and in order (the kernel's readahead sends the daemon its largest reads
//! while the program reads on), the engine's cache already holding it, less the same reads
//! again from the kernel's cache; over the mount's own count of the reads that reached it.
//!
//! Every probe is then predicted back from the model, and the error printed beside it: the
//! model is as simple as that error allows, and a user sees where it is not.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ahead::engine::{Engine, File};
use ahead::pattern::SplitMix64;
use ahead::DeviceModel;

use crate::bench::raw::{ns_since, reads_at_depth, size_text, RawRun};
use crate::bench::remote::read_full;
use crate::*;

/// One probe: `bs`-byte reads, `qd` in flight, at random or in order.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Probe {
    pub what: &'static str,
    pub bs: u64,
    pub qd: u64,
    pub random: bool,
    /// Measured: MB/s and the median read's time.
    pub mb_per_s: f64,
    pub p50_us: f64,
    /// The model's figure for the same reads, and its error against the measure.
    pub predicted_mb_per_s: f64,
    pub error: f64,
}

/// The probe `run` made: its MB/s and its median read's time.
fn probe(what: &'static str, bs: u64, qd: u64, random: bool, run: &RawRun) -> Probe {
    let mut lat = run.latencies.clone();
    lat.sort_unstable();
    let p50_us = lat.get(lat.len() / 2).map_or(0.0, |&ns| ns as f64 / 1000.0);
    Probe {
        what,
        bs,
        qd,
        random,
        mb_per_s: run.bytes as f64 / run.elapsed.as_secs_f64().max(1e-9) / 1e6,
        p50_us,
        predicted_mb_per_s: 0.0,
        error: 0.0,
    }
}

/// Fill in each probe's prediction and error.
fn predict(model: &DeviceModel, probes: &mut [Probe]) {
    for p in probes {
        p.predicted_mb_per_s = model.steady_mb_s(p.bs, p.qd, p.random);
        p.error = p.predicted_mb_per_s / p.mb_per_s.max(1e-9) - 1.0;
    }
}

/// How far the model is from the probes: the sum of squared log ratios of predicted to
/// measured MB/s (a model 2x too fast and one 2x too slow are as wrong), the engine's own
/// operating points counted three times: a small read at random alone (a random reader's),
/// and streams of its largest requests (a sequential reader's windows).
fn misfit(model: &DeviceModel, probes: &[Probe]) -> f64 {
    let largest = probes
        .iter()
        .filter(|p| p.what == "stream")
        .map(|p| p.bs)
        .max()
        .unwrap_or(0);
    probes
        .iter()
        .map(|p| {
            let predicted = model.steady_mb_s(p.bs, p.qd, p.random);
            let engines = (p.what == "one" && p.random && p.bs <= ahead::PAGE_SIZE)
                || (p.what == "stream" && p.bs == largest);
            let weight = if engines { 3.0 } else { 1.0 };
            weight * (predicted.max(1e-9) / p.mb_per_s.max(1e-9)).ln().powi(2)
        })
        .sum()
}

/// The model's figures as the search moves them: latency, per-request cost, seek, bandwidth,
/// queue depth, per-connection rate.
const FIGURES: usize = 6;

fn figure(m: &mut DeviceModel, i: usize) -> &mut f64 {
    match i {
        0 => &mut m.latency_us,
        1 => &mut m.per_request_us,
        2 => &mut m.seek_us,
        3 => &mut m.bandwidth_mb_s,
        4 => unreachable!("the queue depth is an integer"),
        _ => &mut m.connection_mb_s,
    }
}

/// The model closest to the probes ([`misfit`]), searched from `guess` (each figure scaled up
/// and down, by smaller steps as the search closes in; a per-request cost, seek or connection
/// rate may also be none). The seek stays as guessed unless `seeks` (an object store has none
/// apart from its per-request cost). Deterministic, and at most a few thousand evaluations.
fn fit(guess: DeviceModel, probes: &[Probe], seeks: bool) -> DeviceModel {
    let mut best = guess;
    let mut best_misfit = misfit(&best, probes);
    for step in [4.0, 2.0, 1.4, 1.15, 1.05, 1.01] {
        loop {
            let mut moved = false;
            for i in (0..FIGURES).filter(|&i| seeks || i != 2) {
                let mut candidates: Vec<DeviceModel> = Vec::new();
                if i == 4 {
                    for qd in [
                        (best.queue_depth as f64 / step).floor() as usize,
                        (best.queue_depth as f64 * step).ceil() as usize,
                    ] {
                        let mut m = best;
                        m.queue_depth = qd.clamp(1, 4096);
                        candidates.push(m);
                    }
                } else {
                    let now = *figure(&mut best, i);
                    // A figure at 0 starts again from a small value; those that may be none
                    // (all but the latency and the bandwidth) are also tried at 0.
                    let from = if now > 0.0 {
                        now
                    } else if i == 5 {
                        best.bandwidth_mb_s / 8.0
                    } else {
                        1.0
                    };
                    for v in [from * step, from / step, 0.0] {
                        if v == 0.0 && matches!(i, 0 | 3) {
                            continue;
                        }
                        let mut m = best;
                        *figure(&mut m, i) = v;
                        candidates.push(m);
                    }
                }
                for m in candidates {
                    let e = misfit(&m, probes);
                    if e < best_misfit * (1.0 - 1e-9) {
                        (best, best_misfit, moved) = (m, e, true);
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
    DeviceModel {
        latency_us: round(best.latency_us),
        per_request_us: round(best.per_request_us),
        seek_us: round(best.seek_us),
        bandwidth_mb_s: round(best.bandwidth_mb_s),
        connection_mb_s: round(best.connection_mb_s),
        ..best
    }
}

/// A first guess from a local device's probes (see the module comment), for [`fit`].
fn guess_local(name: &'static str, probes: &[Probe]) -> DeviceModel {
    let find = |what: &'static str| probes.iter().filter(move |p| p.what == what);
    let bandwidth = find("stream").map(|p| p.mb_per_s).fold(1.0, f64::max);
    let best_small = find("iops")
        .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s))
        .expect("iops probes");
    let small = best_small.bs as f64;
    let small_rate = best_small.mb_per_s * 1e6 / small; // reads a second
    let rand1 = find("one").find(|p| p.random).expect("a random read alone");
    let per_request_us = (1e6 / small_rate - small / bandwidth).max(0.0);
    let latency_us = (rand1.p50_us - per_request_us - small / bandwidth).max(1.0);
    let queue_depth = ((small_rate * rand1.p50_us / 1e6).round() as u64).clamp(1, best_small.qd);
    DeviceModel {
        name,
        latency_us,
        per_request_us,
        seek_us: 0.0,
        bandwidth_mb_s: bandwidth,
        queue_depth: queue_depth as usize,
        connection_mb_s: 0.0,
    }
}

/// The model of a local device: the guess, fitted.
fn fit_local(name: &'static str, probes: &[Probe]) -> DeviceModel {
    fit(guess_local(name, probes), probes, true)
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The local probes, each `each` long in all: three rounds of every probe, the median kept.
fn probe_local(path: &Path, each: Duration) -> Result<Vec<Probe>, Failure> {
    let run = |bs: usize, qd: usize, random: bool, each: Duration| {
        reads_at_depth(path, bs, qd, random, each).map_err(|e| {
            let why = if e.raw_os_error() == Some(libc::EINVAL) {
                " (does its file system take O_DIRECT? the engine reads with it, and so does \
                 calibration)"
            } else {
                ""
            };
            runtime(format!("{}: {e}{why}", path.display()))
        })
    };
    // Streams in the engine's own requests: the device's largest (`max_sectors_kb`, as the
    // engine sizes them; 1 MiB where it cannot be told), at the depths its windows keep.
    let request = ahead::os::device_limits(path).1.map_or(1 << 20, |kb| {
        ((kb as usize) << 10).clamp(128 << 10, 16 << 20)
    });
    let mut shapes: Vec<(&'static str, usize, usize, bool)> = Vec::new();
    for (bs, random) in [
        (4 << 10, false),
        (4 << 10, true),
        (64 << 10, true),
        (1 << 20, true),
    ] {
        shapes.push(("one", bs, 1, random));
    }
    for qd in [4, 16, 32, 64, 128] {
        shapes.push(("iops", 4 << 10, qd, true));
    }
    // Small reads in order at depth: what tells a request's own cost from a seek (a disk that
    // gives these no faster than reads at random has no seek to speak of; the readers that
    // ask for a page at a time ahead make exactly these).
    shapes.push(("iops", 4 << 10, 32, false));
    for qd in [1, 2, 4, 8, 16] {
        shapes.push(("stream", request, qd, false));
    }
    // Every probe in each of three rounds, a third of its time each, and the median round's
    // figures kept: a virtual disk's rate moves within a minute, and one slow stretch under one
    // probe would otherwise be the model's.
    const ROUNDS: u32 = 3;
    let mut rounds: Vec<Vec<Probe>> = vec![Vec::new(); shapes.len()];
    for _ in 0..ROUNDS {
        for (i, &(what, bs, qd, random)) in shapes.iter().enumerate() {
            let r = run(bs, qd, random, each / ROUNDS)?;
            rounds[i].push(probe(what, bs as u64, qd as u64, random, &r));
        }
    }
    let probes = rounds
        .into_iter()
        .map(|mut runs| {
            runs.sort_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
            runs.swap_remove(runs.len() / 2)
        })
        .collect();
    Ok(probes)
}

/// Where the probes read: `target` itself if it is a file of at least `MIN_FILE`, else a
/// scratch file written in the directory `target` (removed when dropped).
struct ProbeFile {
    path: PathBuf,
    scratch: bool,
}

impl Drop for ProbeFile {
    fn drop(&mut self) {
        if self.scratch {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

const MIN_FILE: u64 = 256 << 20;
const SCRATCH_FILE: u64 = 1 << 30;

fn probe_file(target: &Path) -> Result<ProbeFile, Failure> {
    let meta =
        std::fs::metadata(target).map_err(|e| usage(format!("{}: {e}", target.display())))?;
    if meta.is_file() {
        if meta.len() < MIN_FILE {
            return Err(usage(format!(
                "{}: {} MiB is too small to measure a device by (reads at random would hit the \
                 same few blocks); give a file of at least {} MiB, or a directory to write a \
                 scratch file in",
                target.display(),
                meta.len() >> 20,
                MIN_FILE >> 20
            )));
        }
        return Ok(ProbeFile {
            path: target.to_path_buf(),
            scratch: false,
        });
    }
    let path = target.join(format!(".ahead-calibrate-{}", std::process::id()));
    let file = ProbeFile {
        path: path.clone(),
        scratch: true,
    };
    eprintln!(
        "calibrate: writing a {} MiB scratch file {} (removed after)",
        SCRATCH_FILE >> 20,
        path.display()
    );
    crate::bench::patterns::write_random_file(&path, SCRATCH_FILE, 1)
        .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
    Ok(file)
}

/// The remote probes, each through a new engine from `engine` (its own client, one GET a read,
/// its cache empty, so no probe finds what another read): a small GET alone, a 4 MiB GET alone,
/// small GETs 64 at once, 4 MiB GETs 8-64 at once. Each reads places of the object in an order
/// of its own, each place once; a probe ends at its time or when the object is read whole.
fn probe_remote(
    engine: &dyn Fn() -> Result<Engine, Failure>,
    url: &str,
    each: Duration,
) -> Result<Vec<Probe>, Failure> {
    const SMALL: u64 = 4 << 10;
    const GET: u64 = 4 << 20;
    let size = engine()?
        .open(url)
        .map_err(|e| runtime(format!("{url}: {e}")))?
        .len();
    if size < 64 << 20 {
        return Err(usage(format!(
            "{url}: {} MiB is too small to measure a store by; give an object of at least 64 MiB",
            size >> 20
        )));
    }
    let mut probes = Vec::new();
    let mut seed = 5;
    for (what, bs, qd) in [
        ("one", SMALL, 1),
        ("connection", GET, 1),
        ("iops", SMALL, 64),
        ("stream", GET, 8),
        ("stream", GET, 16),
        ("stream", GET, 32),
        ("stream", GET, 64),
    ] {
        let engine = engine()?;
        let files: Vec<File> = (0..qd.min(8))
            .map(|_| engine.open(url))
            .collect::<Result<_, _>>()
            .map_err(|e| runtime(format!("{url}: {e}")))?;
        seed += 1;
        let mut rng = SplitMix64(seed);
        let mut order: Vec<u64> = (0..size / bs).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let next = AtomicU64::new(0);
        let (bytes, latencies) = (AtomicU64::new(0), std::sync::Mutex::new(Vec::new()));
        let start = Instant::now();
        // Alone, at least a few, at most a few dozen: enough for a median.
        let enough = |done: usize| qd == 1 && (done >= 40 || (bs == GET && done >= 20));
        let failed = std::thread::scope(|s| {
            let workers: Vec<_> = (0..qd)
                .map(|w| {
                    let file = &files[w as usize % files.len()];
                    let (order, next, bytes, latencies) = (&order, &next, &bytes, &latencies);
                    s.spawn(move || -> Result<(), Failure> {
                        let mut buf = vec![0u8; bs as usize];
                        loop {
                            let done = next.load(Ordering::Relaxed) as usize;
                            if (start.elapsed() >= each && !(qd == 1 && done < 3)) || enough(done) {
                                return Ok(());
                            }
                            let at = next.fetch_add(1, Ordering::Relaxed) as usize;
                            let Some(&place) = order.get(at) else {
                                return Ok(());
                            };
                            let t = Instant::now();
                            let n = read_full(file, place * bs, &mut buf)
                                .map_err(|e| runtime(e.to_string()))?
                                as u64;
                            latencies
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(ns_since(t));
                            bytes.fetch_add(n, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .find_map(|w| w.join().expect("a probe thread does not panic").err())
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let latencies = latencies.into_inner().unwrap_or_else(|e| e.into_inner());
        let run = raw_run(bytes.into_inner(), start, latencies);
        if run.bytes == 0 {
            return Err(runtime(format!("{url}: the {what} probe read nothing")));
        }
        probes.push(probe(what, bs, qd, true, &run));
    }
    Ok(probes)
}

fn raw_run(bytes: u64, start: Instant, latencies: Vec<u32>) -> RawRun {
    RawRun {
        bytes,
        reads: latencies.len() as u64,
        elapsed: start.elapsed(),
        latencies,
    }
}

/// A first guess from an object store's probes (see the module comment), for [`fit`].
fn guess_remote(name: &'static str, probes: &[Probe]) -> DeviceModel {
    let find = |what: &str| probes.iter().find(|p| p.what == what).expect("probe");
    let one = find("one");
    let conn = find("connection");
    let small = find("iops");
    let best = probes
        .iter()
        .filter(|p| p.what == "stream")
        .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s))
        .expect("stream probes");
    let latency_us = one.p50_us;
    // One GET's time less its wait, over its bytes.
    let streaming_us = (conn.p50_us - latency_us).max(1.0);
    let connection_mb_s = conn.bs as f64 / streaming_us;
    let small_rate = small.mb_per_s * 1e6 / small.bs as f64;
    // Small GETs at 64 at once: what they do not owe to their wait is each GET's own cost
    // (the client's and the server's work), in turn.
    let slot_bound = small.qd as f64 / (latency_us / 1e6);
    let per_request_us = if small_rate < 0.8 * slot_bound {
        1e6 / small_rate
    } else {
        0.0
    };
    let mut bandwidth = best.mb_per_s;
    let transfer_us = best.bs as f64 / best.mb_per_s - per_request_us;
    if transfer_us > 0.0 {
        bandwidth = best.bs as f64 / transfer_us;
    }
    DeviceModel {
        name,
        latency_us: round(latency_us),
        per_request_us: round(per_request_us),
        seek_us: 0.0,
        bandwidth_mb_s: round(bandwidth),
        queue_depth: best.qd as usize,
        connection_mb_s: round(connection_mb_s),
    }
}

/// The model of an object store: the guess, fitted.
fn fit_remote(name: &'static str, probes: &[Probe]) -> DeviceModel {
    fit(guess_remote(name, probes), probes, false)
}

/// What the engine itself costs a reader, beside the device: a read call, and each page it
/// copies out of its cache (measured on pages it holds, so no device in it). The simulator
/// charges them as the reader's own time, which overlaps the device's as the engine's does.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HostCost {
    pub read_ns: f64,
    pub copy_ns_per_page: f64,
    /// What a read through `ahead mount` that reaches the daemon costs the program
    /// (`--mount`), the engine's cache holding its pages: one it waits for, one of the
    /// kernel's readahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_wait_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_ahead_ns: Option<f64>,
    /// The kernel's readahead on that mount's files, in bytes, as the mount set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_readahead_bytes: Option<u64>,
}

impl HostCost {
    /// The reader's time per page for reads of `read_bytes` each.
    pub(crate) fn ns_per_page(&self, read_bytes: u64) -> u64 {
        let pages = read_bytes.div_ceil(ahead::PAGE_SIZE).max(1) as f64;
        (self.read_ns / pages + self.copy_ns_per_page).round() as u64
    }

    /// The host cost a profile holds (none for a preset, or a profile without one).
    pub(crate) fn of_profile(spec: &str) -> HostCost {
        #[derive(serde::Deserialize)]
        struct WithHost {
            host: HostCost,
        }
        std::fs::read_to_string(spec)
            .ok()
            .and_then(|t| serde_json::from_str::<WithHost>(&t).ok())
            .map_or(HostCost::default(), |w| w.host)
    }
}

/// The engine's cost per read and per page copied: `target` read through an engine until it
/// holds its first 64 MiB, then those pages read again in 4 KiB and in 1 MiB reads.
fn probe_host(engine: &Engine, target: &str, each: Duration) -> Result<HostCost, Failure> {
    const HELD: u64 = 64 << 20;
    let file = engine
        .open(target)
        .map_err(|e| runtime(format!("{target}: {e}")))?;
    let held = HELD.min(file.len()) & !((1 << 20) - 1);
    // Its policy reads nothing past the pages held: the passes below are hits and copies
    // only (without the limit each pass's reads ahead of its end, device requests into fresh
    // memory, were counted as the copy's cost).
    file.advise(ahead::Advice::Limit { end: held })
        .map_err(|e| runtime(format!("{target}: {e}")))?;
    let mut buf = vec![0u8; 1 << 20];
    for at in (0..held).step_by(buf.len()) {
        read_full(&file, at, &mut buf).map_err(|e| runtime(e.to_string()))?;
    }
    let mut per_read_ns = |bs: usize| -> Result<f64, Failure> {
        let start = Instant::now();
        let mut reads = 0u64;
        while start.elapsed() < each / 2 {
            for at in (0..held).step_by(bs) {
                file.read_at(&mut buf[..bs], at)
                    .map_err(|e| runtime(e.to_string()))?;
                reads += 1;
            }
        }
        Ok(start.elapsed().as_nanos() as f64 / reads as f64)
    };
    let (small, large) = (per_read_ns(4 << 10)?, per_read_ns(1 << 20)?);
    let copy_ns_per_page = ((large - small) / 255.0).max(0.0);
    Ok(HostCost {
        read_ns: (small - copy_ns_per_page).max(0.0),
        copy_ns_per_page,
        ..HostCost::default()
    })
}

/// A mount of `dir` by this program's `ahead mount`, unmounted when dropped.
struct ProbeMount {
    child: std::process::Child,
    point: PathBuf,
}

impl ProbeMount {
    fn start(dir: &Path) -> Result<ProbeMount, Failure> {
        let point =
            std::env::temp_dir().join(format!("ahead-calibrate-mnt-{}", std::process::id()));
        std::fs::create_dir_all(&point)
            .map_err(|e| runtime(format!("{}: {e}", point.display())))?;
        let exe =
            std::env::current_exe().map_err(|e| runtime(format!("cannot find ahead: {e}")))?;
        let child = std::process::Command::new(exe)
            .arg("mount")
            .arg(dir)
            .arg(&point)
            .args(["--budget", "512m"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| runtime(format!("cannot run ahead mount: {e}")))?;
        let mut mount = ProbeMount { child, point };
        let stats = mount.stats_path();
        let start = Instant::now();
        while !stats.exists() {
            if let Ok(Some(status)) = mount.child.try_wait() {
                let mut said = String::new();
                if let Some(mut err) = mount.child.stderr.take() {
                    use std::io::Read;
                    let _ = err.read_to_string(&mut said);
                }
                return Err(runtime(format!(
                    "--mount: ahead mount of {} failed ({status}): {}",
                    dir.display(),
                    said.trim()
                )));
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(runtime(format!(
                    "--mount: ahead mount of {} was not up after 10 s",
                    dir.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(mount)
    }

    /// The mount's stats file (there once the mount serves).
    fn stats_path(&self) -> PathBuf {
        self.point
            .join(crate::commands::STATS_DIR)
            .join(crate::commands::STATS_FILE)
    }

    /// The mount's count of file reads so far.
    fn reads(&self) -> Result<u64, Failure> {
        self.counter("reads")
    }

    /// One of the mount's own counters (the stats file's `mount` part).
    fn counter(&self, name: &str) -> Result<u64, Failure> {
        let path = self.stats_path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| runtime(format!("{}: {e}", path.display())))?;
        v["mount"][name]
            .as_u64()
            .ok_or_else(|| runtime(format!("the mount's stats have no {name}")))
    }
}

impl Drop for ProbeMount {
    fn drop(&mut self) {
        // SIGTERM unmounts (the mount's own handler); a mount that does not end is killed.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir(&self.point);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir(&self.point);
    }
}

/// What a FUSE read through `ahead mount` costs a program beside storage, one waited for and
/// one of the kernel's readahead: `path`'s first 128 MiB read through a mount of its directory
/// until the engine holds them, then, three times each, read in 4 KiB reads through a fresh
/// open (the kernel's copy dropped) backward and in order, less the same reads again from the
/// kernel's cache, over the reads that reached the mount (medians); and the kernel's readahead
/// on the mount's files.
fn probe_mount(path: &Path) -> Result<(f64, f64, u64), Failure> {
    use std::os::unix::fs::FileExt;
    const REGION: u64 = 128 << 20;
    const BACKWARD: u64 = 32 << 20;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(usage(format!(
            "--mount: {} names no file in a directory",
            path.display()
        )));
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mount = ProbeMount::start(dir)?;
    let through = mount.point.join(name);
    let open = || {
        std::fs::File::open(&through).map_err(|e| runtime(format!("{}: {e}", through.display())))
    };
    let len = open()?
        .metadata()
        .map_err(|e| runtime(e.to_string()))?
        .len();
    let region = REGION.min(len) & !((1 << 20) - 1);
    if region < BACKWARD {
        return Err(usage(format!("--mount: {} is too small", path.display())));
    }
    let mut buf = vec![0u8; 1 << 20];
    let f = open()?;
    for at in (0..region).step_by(buf.len()) {
        f.read_exact_at(&mut buf, at)
            .map_err(|e| runtime(e.to_string()))?;
    }
    drop(f);
    let small = 4096usize;
    let in_order: Vec<u64> = (0..region).step_by(small).collect();
    let mut backward: Vec<u64> = (region - BACKWARD..region).step_by(small).collect();
    backward.reverse();
    // ns a FUSE read of each shape, median of 3.
    let mut shape = |places: &[u64]| -> Result<f64, Failure> {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let f = open()?;
            let before = mount.reads()?;
            let mut pass = || -> Result<u64, Failure> {
                let start = Instant::now();
                for &at in places {
                    f.read_exact_at(&mut buf[..small], at)
                        .map_err(|e| runtime(e.to_string()))?;
                }
                Ok(start.elapsed().as_nanos() as u64)
            };
            let cold = pass()?;
            let requests = mount.reads()? - before;
            let warm = pass()?;
            if requests == 0 {
                return Err(runtime("--mount: the reads never reached the mount"));
            }
            runs.push(cold.saturating_sub(warm) as f64 / requests as f64);
        }
        runs.sort_by(f64::total_cmp);
        Ok(runs[1])
    };
    let wait_ns = shape(&backward)?;
    let ahead_ns = shape(&in_order)?;
    Ok((wait_ns, ahead_ns, mount.counter("kernel_readahead_bytes")?))
}

/// `ahead calibrate`.
pub(crate) fn cmd_calibrate(a: CalibrateArgs) -> Result<String, Failure> {
    let each = Duration::from_secs_f64(a.probe_seconds);
    if !(a.probe_seconds > 0.0 && a.probe_seconds <= 60.0) {
        return Err(usage("--probe-seconds must be more than 0 and at most 60"));
    }
    let target = a.target.as_deref().unwrap_or(".");
    let remote = target.contains("://");
    if remote && a.mount {
        return Err(usage(
            "--mount measures a mount of a local file's directory; an object's is not built",
        ));
    }
    let name: &'static str = Box::leak(format!("calibrated {target}").into_boxed_str());
    let (model, host, probes) = if remote {
        calibrate_remote(name, target, &a.set, each)?
    } else {
        let file = probe_file(Path::new(target))?;
        let probes = probe_local(&file.path, each)?;
        let engine = Engine::builder()
            .budget(256 << 20)
            .build()
            .map_err(|e| runtime(format!("cannot start the engine: {e}")))?;
        let mut host = probe_host(&engine, &file.path.to_string_lossy(), each)?;
        drop(engine);
        if a.mount {
            let (wait_ns, ahead_ns, readahead_bytes) = probe_mount(&file.path)?;
            host.fuse_wait_ns = Some(round(wait_ns));
            host.fuse_ahead_ns = Some(round(ahead_ns));
            host.fuse_readahead_bytes = (readahead_bytes > 0).then_some(readahead_bytes);
        }
        let mut probes = probes;
        let model = fit_local(name, &probes);
        predict(&model, &mut probes);
        (model, host, probes)
    };
    // The model's own fields (as `DeviceModel::from_profile` reads them back), then the rest.
    let mut profile = serde_json::to_value(model).expect("a model serializes");
    profile["host"] = serde_json::json!(host);
    profile["calibrated"] = serde_json::json!({
        "target": target,
        "probe_seconds": a.probe_seconds,
        "probes": probes,
    });
    let mut out = probes_text(&model, &host, &probes);
    let text = json_text(&profile);
    match &a.output {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| runtime(format!("{}: {e}", path.display())))?;
            writeln!(
                out,
                "profile written to {}: --device {} takes it",
                path.display(),
                path.display()
            )
            .unwrap();
            Ok(out)
        }
        None => Ok(format!("{out}\n{text}")),
    }
}

/// An object store measured through an engine of `settings` (KEY=VALUE, as `-o` takes them),
/// one GET a read: its model, the engine's own cost, and the probes with the model's figures.
pub(crate) fn calibrate_remote(
    name: &'static str,
    url: &str,
    settings: &[String],
    each: Duration,
) -> Result<(DeviceModel, HostCost, Vec<Probe>), Failure> {
    let engine = || -> Result<Engine, Failure> {
        let mut b = Engine::builder()
            .policy("none")
            .budget(1 << 30)
            .io_max_kb(4 << 10)
            .set_pair("remote.split_ahead=false")
            .map_err(usage)?;
        for pair in settings {
            b = b.set_pair(pair).map_err(|e| usage(format!("--set: {e}")))?;
        }
        b.build()
            .map_err(|e| runtime(format!("cannot start the engine: {e}")))
    };
    let mut probes = probe_remote(&engine, url, each)?;
    let host = probe_host(&engine()?, url, each)?;
    let model = fit_remote(name, &probes);
    predict(&model, &mut probes);
    Ok((model, host, probes))
}

/// The model, the engine's cost and every probe beside the model's figure for it.
pub(crate) fn probes_text(model: &DeviceModel, host: &HostCost, probes: &[Probe]) -> String {
    let mut out = String::new();
    writeln!(out, "device: {model}").unwrap();
    writeln!(
        out,
        "the engine: {:.0} ns a read, {:.0} ns a page copied",
        host.read_ns, host.copy_ns_per_page
    )
    .unwrap();
    if let (Some(wait), Some(ahead)) = (host.fuse_wait_ns, host.fuse_ahead_ns) {
        writeln!(
            out,
            "through ahead mount: {:.1} us a FUSE read waited for, {:.1} us one read ahead; the kernel reads ahead {} KiB",
            wait / 1e3,
            ahead / 1e3,
            host.fuse_readahead_bytes.unwrap_or(crate::commands::FUSE_DEFAULT_READAHEAD_BYTES) >> 10
        )
        .unwrap();
    }
    writeln!(
        out,
        "{:<11} {:>9} {:>5} {:<9} {:>10} {:>10} {:>10} {:>7}",
        "probe", "size", "depth", "order", "MB/s", "p50 us", "model MB/s", "error"
    )
    .unwrap();
    for p in probes {
        writeln!(
            out,
            "{:<11} {:>9} {:>5} {:<9} {:>10.1} {:>10.1} {:>10.1} {:>+6.0}%",
            p.what,
            size_text(p.bs),
            p.qd,
            if p.random { "random" } else { "in order" },
            p.mb_per_s,
            p.p50_us,
            p.predicted_mb_per_s,
            p.error * 100.0
        )
        .unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probes a device exactly like `m` would give: each probe's rate from the model, and
    /// a read alone taking its latency, cost, seek and transfer.
    fn probes_of(m: &DeviceModel, shape: &[(&'static str, u64, u64, bool)]) -> Vec<Probe> {
        shape
            .iter()
            .map(|&(what, bs, qd, random)| {
                let seek = if random { m.seek_us } else { 0.0 };
                let alone_us = m.latency_us
                    + m.per_request_us
                    + seek
                    + (bs as f64 / m.bandwidth_mb_s).max(if m.connection_mb_s > 0.0 {
                        bs as f64 / m.connection_mb_s
                    } else {
                        0.0
                    });
                Probe {
                    what,
                    bs,
                    qd,
                    random,
                    mb_per_s: m.steady_mb_s(bs, qd, random),
                    p50_us: alone_us,
                    predicted_mb_per_s: 0.0,
                    error: 0.0,
                }
            })
            .collect()
    }

    fn close(a: f64, b: f64, within: f64) -> bool {
        (a - b).abs() <= within * b.abs().max(1e-9)
    }

    #[test]
    fn a_local_device_is_fitted_back_from_its_own_figures() {
        for truth in [DeviceModel::NVME, DeviceModel::HDD] {
            let shape = [
                ("one", 4 << 10, 1, false),
                ("one", 4 << 10, 1, true),
                ("one", 64 << 10, 1, true),
                ("iops", 4 << 10, 4, true),
                ("iops", 4 << 10, 16, true),
                ("iops", 4 << 10, 32, true),
                ("iops", 4 << 10, 32, false),
                ("iops", 4 << 10, 64, true),
                ("stream", 1 << 20, 8, false),
                ("stream", 8 << 20, 16, false),
            ];
            let fitted = fit_local("test", &probes_of(&truth, &shape));
            // What the probes pin down: the bandwidth, a random read's serial cost (command
            // and seek) and its time alone. How that time splits between latency and cost is
            // not seen by reads that wait on one another, and is not asserted.
            let serial = |m: &DeviceModel| m.per_request_us + m.seek_us;
            let alone = |m: &DeviceModel| m.latency_us + serial(m);
            assert!(
                close(fitted.bandwidth_mb_s, truth.bandwidth_mb_s, 0.03),
                "{truth}: {fitted}"
            );
            assert!(
                close(serial(&fitted), serial(&truth), 0.03),
                "{truth}: {fitted}"
            );
            assert!(
                close(alone(&fitted), alone(&truth), 0.03),
                "{truth}: {fitted}"
            );
            // Every probe predicted back within 5%.
            let mut probes = probes_of(&truth, &shape);
            predict(&fitted, &mut probes);
            for p in &probes {
                assert!(p.error.abs() < 0.05, "{truth}: {p:?} from {fitted}");
            }
        }
    }

    #[test]
    fn an_object_store_with_capped_connections_is_fitted_back_from_its_own_figures() {
        let truth = DeviceModel {
            name: "capped store",
            latency_us: 45_000.0,
            per_request_us: 0.0,
            seek_us: 0.0,
            bandwidth_mb_s: 550.0,
            queue_depth: 64,
            connection_mb_s: 26.0,
        };
        let shape = [
            ("one", 4 << 10, 1, true),
            ("connection", (4 << 20) - (4 << 10), 1, true),
            ("iops", 4 << 10, 64, true),
            ("stream", (4 << 20) - (4 << 10), 8, true),
            ("stream", (4 << 20) - (4 << 10), 64, true),
        ];
        let fitted = fit_remote("test", &probes_of(&truth, &shape));
        assert!(close(fitted.connection_mb_s, 26.0, 0.02), "{fitted}");
        assert!(close(fitted.bandwidth_mb_s, 550.0, 0.02), "{fitted}");
        assert!(close(fitted.latency_us, 45_000.0, 0.01), "{fitted}");
        assert_eq!(fitted.queue_depth, 64);
        // Eight capped connections carry 8 x 26 MB/s, not the store's 550.
        let eight = fitted.steady_mb_s(4 << 20, 8, true);
        assert!(eight < 8.0 * 26.0 && eight > 100.0, "{eight}");
    }
}
