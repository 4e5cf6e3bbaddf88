//! The embedding API's measurements (issue 22), each contender interleaved with the others
//! in every round, cold (`O_DIRECT`, a new engine per run), the median and spread printed:
//!
//!     cargo run --release -p ahead --example embed_bench -- [async|many|idle|first-touch|all] [--repeat N] [--dir D]
//!     cargo run --release -p ahead --example embed_bench -- direct-only|async-only [--reactor] [--repeat N]
//!
//! * `async`: 64 random 4 KiB reads kept in flight by one tokio task (`read_at_async`, and
//!   `read_direct` into the task's own buffers past the cache; each with the engine's reaper
//!   thread, and with its completions reaped in tokio's reactor, `Engine::completions`),
//!   against 64 OS threads calling the blocking `read_at`, and fio with io_uring at queue
//!   depth 64 on the same file (when `fio` is on the PATH): reads per second, and CPU time per
//!   read (user + system, of the whole process: the engine's completion threads included;
//!   fio's own figure for fio). Policy `none`, 64 MiB budget on a 2 GiB file: few hits. The
//!   engines are warm (`pretouch`: their memory faulted in at build), the file cold.
//! * `many`: 1,000 scattered 16 KiB ranges, one `read_many`, against 1,000 `read_at` calls one
//!   after another: time, and requests sent. Each on an engine whose memory is faulted in
//!   (`pretouch`), as a long-lived engine's is: the file is cold, the engine is not.
//! * `idle`: a 1 GiB file scanned with 4 KiB reads, alone, and with 10,000 other files open
//!   and never read (sparse, 64 MiB each): throughput, and the scan's readahead share.
//! * `first-touch`: a process's first engine (256 MiB, `adaptive`) reading a 1 GiB file whole
//!   with 4 KiB `read_at`s, with its memory faulted in ahead of the cache's growth
//!   (`fault_ahead`, the default) and without: throughput over the first 256 MiB (the cache
//!   filling: every read's memory is touched for the first time) and over the whole file.
//!   Each run is a new process, started once the kernel's caches are dropped (all of them, as
//!   root: the memory freed is what a new engine is then given) and, with `--settle S`, S
//!   seconds after that: on a virtual machine that reports free memory to its host, as this
//!   one does, memory freed a few seconds ago is the host's again, and its first touch costs
//!   much more.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ahead::engine::{Engine, File};

const FILE_BYTES: u64 = 2 << 30;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A file of at least `bytes` random bytes at `path`, written once.
fn data_file(path: &Path, bytes: u64) {
    ahead::kernel::capture::ensure_file(path, bytes).unwrap();
}

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut r = ahead::pattern::SplitMix64(seed);
    move || r.next_u64()
}

/// CPU time of this process so far (user + system).
fn cpu() -> Duration {
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn engine(policy: &str, budget: u64) -> Engine {
    engine_with(policy, budget, std::env::var_os("PRETOUCH").is_some())
}

/// An engine whose cache memory is faulted in (and registered with io_uring) at build, as a
/// long-lived engine's is after its first use: a fresh engine's first reads also pay the
/// kernel's first touch of that memory, which for a burst of 16 MiB at once took 23-79 ms
/// against 20-23 (BENCHMARKS, issue 22 run 5).
fn warm_engine(policy: &str, budget: u64) -> Engine {
    engine_with(policy, budget, true)
}

fn engine_with(policy: &str, budget: u64, pretouch: bool) -> Engine {
    Engine::builder()
        .policy(policy)
        .budget(budget)
        .record_requests(false)
        .pretouch(pretouch)
        .build()
        .unwrap()
}

fn median(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// One tokio task keeps 64 random 4 KiB reads of `file` in flight, each its own future in a
/// `FuturesUnordered`, polled when its read lands: `read(offset, spare)` starts one, handed
/// the buffer the read just finished gave back, if it gives one. With `reactor`, that engine's
/// completions are reaped by a second task, woken by tokio's reactor (`Engine::completions`),
/// instead of by the engine's reaper thread. Reads per second, and CPU time per read in
/// microseconds.
fn keep_64_in_flight<B, Fut>(
    reads: u64,
    seed: u64,
    reactor: Option<&Engine>,
    mut read: impl FnMut(u64, Option<B>) -> Fut,
) -> (f64, f64)
where
    Fut: std::future::Future<Output = Option<B>>,
{
    use futures_util::stream::{FuturesUnordered, StreamExt};
    use tokio::io::{unix::AsyncFd, Interest};
    let mut rt = tokio::runtime::Builder::new_current_thread();
    if reactor.is_some() {
        rt.enable_io();
    }
    let rt = rt.build().unwrap();
    let (c0, t0) = (cpu(), Instant::now());
    let done = rt.block_on(async {
        if let Some(completions) = reactor.map(|e| e.completions().expect("io_uring")) {
            // SAFETY: the ring's descriptor stays open, and the same, while `completions` lives.
            let ring = unsafe { AsyncFd::register_with_interest(completions, Interest::READABLE) }
                .unwrap();
            tokio::spawn(async move {
                while let Ok(mut ready) = ring.readable().await {
                    ready.clear_ready();
                    ring.get_ref().reap();
                }
            });
        }
        let mut next = rng(seed);
        let mut offset = move || next() % (FILE_BYTES / 4096) * 4096;
        let mut in_flight = FuturesUnordered::new();
        let mut started = 0;
        while started < 64.min(reads) {
            in_flight.push(read(offset(), None));
            started += 1;
        }
        let mut done = 0u64;
        while let Some(spare) = in_flight.next().await {
            done += 1;
            if started < reads {
                in_flight.push(read(offset(), spare));
                started += 1;
            }
        }
        done
    });
    let (secs, cpu_s) = (t0.elapsed().as_secs_f64(), (cpu() - c0).as_secs_f64());
    (done as f64 / secs, cpu_s / done as f64 * 1e6)
}

/// `read_at_async` through the cache; with `reactor`, completions reaped in tokio's reactor.
fn async_run(path: &Path, reads: u64, seed: u64, reactor: bool) -> (f64, f64) {
    let e = warm_engine("none", 64 << 20);
    let file = e.open(path).unwrap();
    keep_64_in_flight(reads, seed, reactor.then_some(&e), |off, _: Option<()>| {
        let file = &file;
        async move {
            let mut buf = [0u8; 4096];
            assert_eq!(file.read_at_async(&mut buf, off).await.unwrap(), 4096);
            None
        }
    })
}

/// `read_direct`: each read into its own page-aligned buffer, past the cache (the buffers come
/// back with the reads and go out again). With `reactor`, completions reaped in tokio's
/// reactor.
fn direct_run(path: &Path, reads: u64, seed: u64, reactor: bool) -> (f64, f64) {
    let e = warm_engine("none", 64 << 20);
    let file = e.open(path).unwrap();
    keep_64_in_flight(reads, seed, reactor.then_some(&e), |off, spare| {
        let read = file.read_direct(spare.unwrap_or_else(|| ahead::AlignedBuf::new(4096)), off);
        async move {
            let (n, buf) = read.await;
            assert_eq!(n.unwrap(), 4096);
            Some(buf)
        }
    })
}

fn threads_run(path: &Path, reads: u64, seed: u64) -> (f64, f64) {
    let e = warm_engine("none", 64 << 20);
    let file = e.open(path).unwrap();
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::scope(|s| {
        for t in 0..64u64 {
            let file = &file;
            s.spawn(move || {
                let mut next = rng(seed ^ (t + 1).wrapping_mul(0x9E37));
                let mut buf = [0u8; 4096];
                for _ in 0..reads / 64 {
                    let off = next() % (FILE_BYTES / 4096) * 4096;
                    file.read_at(&mut buf, off).unwrap();
                }
            });
        }
    });
    let (secs, cpu_s) = (t0.elapsed().as_secs_f64(), (cpu() - c0).as_secs_f64());
    let done = (reads / 64 * 64) as f64;
    (done / secs, cpu_s / done * 1e6)
}

/// fio, io_uring, QD 64, random 4 KiB O_DIRECT reads for `secs`: IOPS and CPU us per read.
fn fio_run(path: &Path, secs: u64) -> Option<(f64, f64)> {
    let out = std::process::Command::new("fio")
        .args([
            "--name=r",
            &format!("--filename={}", path.display()),
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=io_uring",
            "--iodepth=64",
            &format!("--runtime={secs}"),
            "--time_based",
            "--output-format=json",
        ])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let job = &v["jobs"][0];
    let iops = job["read"]["iops"].as_f64()?;
    let cpu_pct = job["usr_cpu"].as_f64()? + job["sys_cpu"].as_f64()?;
    let runtime_s = job["read"]["runtime"].as_f64()? / 1000.0;
    let ios = job["read"]["total_ios"].as_f64()?;
    Some((iops, cpu_pct / 100.0 * runtime_s / ios * 1e6))
}

fn bench_async(dir: &Path, repeat: usize) {
    let path = dir.join("embed-2g");
    data_file(&path, FILE_BYTES);
    let reads = 200_000;
    let has_fio = std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_ok();
    // Contenders: read_at_async and read_direct, each with the engine's reaper thread and
    // with completions reaped in tokio's reactor; 64 threads; fio.
    const NAMES: [&str; 6] = [
        "ahead async, one tokio task",
        "  the same, read_direct",
        "ahead async, reaped in the reactor",
        "  the same, read_direct",
        "ahead blocking, 64 threads",
        "fio io_uring, iodepth 64",
    ];
    let mut runs: [Vec<(f64, f64)>; 6] = Default::default();
    for r in 0..repeat {
        // The order turns each round: a contender that always ran after another (fio after
        // the 64 threads) would always meet the device as that one left it.
        let seed = r as u64 + 1;
        for k in 0..NAMES.len() {
            let i = (k + r) % NAMES.len();
            let run = match i {
                0 => Some(async_run(&path, reads, seed, false)),
                1 => Some(direct_run(&path, reads, seed, false)),
                2 => Some(async_run(&path, reads, seed, true)),
                3 => Some(direct_run(&path, reads, seed, true)),
                4 => Some(threads_run(&path, reads, seed)),
                _ if has_fio => fio_run(&path, 4),
                _ => None,
            };
            runs[i].extend(run);
        }
    }
    println!("64 random 4 KiB reads in flight, 2 GiB file, O_DIRECT; median (min-max) of {repeat}");
    println!(
        "{:<36} {:>26} {:>24}",
        "contender", "reads/s", "CPU us/read"
    );
    for (name, v) in NAMES.iter().zip(&runs) {
        if v.is_empty() {
            println!("{name:<36} (not run: fio is not on the PATH)");
            continue;
        }
        let (i, i0, i1) = median(&mut v.iter().map(|x| x.0).collect::<Vec<_>>());
        let (c, c0, c1) = median(&mut v.iter().map(|x| x.1).collect::<Vec<_>>());
        println!("{name:<36} {i:>9.0} ({i0:>6.0}-{i1:>6.0}) {c:>9.2} ({c0:>5.2}-{c1:>5.2})");
    }
    // Per round, so the drift between rounds cancels.
    let per_round = |name: &str, a: &[(f64, f64)], b: &[(f64, f64)]| {
        let mut ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x.0 / y.0).collect();
        let (m, lo, hi) = median(&mut ratios);
        println!("{name} per round: median {m:.3} ({lo:.3}-{hi:.3})");
    };
    let fio = &runs[5];
    if fio.len() == repeat {
        for (name, i) in [
            ("async", 0),
            ("read_direct", 1),
            ("async, reactor", 2),
            ("read_direct, reactor", 3),
        ] {
            per_round(&format!("{name} / fio IOPS"), &runs[i], fio);
        }
        per_round("read_direct, reactor / reaper thread", &runs[3], &runs[1]);
    }
}

fn bench_many(dir: &Path, repeat: usize) {
    let path = dir.join("embed-2g");
    data_file(&path, FILE_BYTES);
    let (mut batch, mut serial, mut reqs) = (Vec::new(), Vec::new(), (0, 0));
    for r in 0..repeat {
        let mut next = rng(r as u64 + 7);
        let ranges: Vec<(u64, usize)> = (0..1000)
            .map(|_| (next() % (FILE_BYTES / 16384) * 16384, 16384))
            .collect();
        let e = warm_engine("adaptive", 256 << 20);
        let file = e.open(&path).unwrap();
        let t0 = Instant::now();
        let out = file.read_many(&ranges).unwrap();
        batch.push(t0.elapsed().as_secs_f64() * 1e3);
        assert!(out.iter().all(|b| b.len() == 16384));
        reqs.0 = e.stats().requests;
        drop(file);
        let e = warm_engine("adaptive", 256 << 20);
        let file = e.open(&path).unwrap();
        let mut buf = vec![0u8; 16384];
        let t0 = Instant::now();
        for &(off, len) in &ranges {
            assert_eq!(file.read_at(&mut buf, off).unwrap(), len);
        }
        serial.push(t0.elapsed().as_secs_f64() * 1e3);
        reqs.1 = e.stats().requests;
    }
    let mut ratios: Vec<f64> = serial.iter().zip(&batch).map(|(s, b)| s / b).collect();
    let (batch_rounds, serial_rounds) = (batch.clone(), serial.clone());
    let (b, b0, b1) = median(&mut batch);
    let (s, s0, s1) = median(&mut serial);
    let (x, x0, x1) = median(&mut ratios);
    println!("1,000 scattered 16 KiB ranges of a 2 GiB file, cold, on warm engines; median (min-max) of {repeat}");
    println!(
        "read_many:        {b:8.1} ms ({b0:.1}-{b1:.1}), {} requests",
        reqs.0
    );
    println!(
        "1,000 x read_at:  {s:8.1} ms ({s0:.1}-{s1:.1}), {} requests",
        reqs.1
    );
    println!("speedup per round: {x:.2}x ({x0:.2}-{x1:.2})");
    println!(
        "each round, read_many / read_at ms: {}",
        batch_rounds
            .iter()
            .zip(&serial_rounds)
            .map(|(b, s)| format!("{b:.1}/{s:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn scan(e: &Engine, path: &Path) -> f64 {
    scan_marking(e, path, u64::MAX).1
}

/// `path` read whole through `e` in 4 KiB `read_at`s: MB/s over its first `mark` bytes (0 if
/// it is shorter), and over all of it.
fn scan_marking(e: &Engine, path: &Path, mark: u64) -> (f64, f64) {
    let file = e.open(path).unwrap();
    let mut buf = vec![0u8; 4096];
    let t0 = Instant::now();
    let (mut off, mut marked) = (0u64, 0.0);
    loop {
        let n = file.read_at(&mut buf, off).unwrap();
        if n == 0 {
            break;
        }
        off += n as u64;
        if off == mark {
            marked = mark as f64 / t0.elapsed().as_secs_f64() / 1e6;
        }
    }
    (marked, off as f64 / t0.elapsed().as_secs_f64() / 1e6)
}

fn bench_idle(dir: &Path, repeat: usize) {
    let path = dir.join("embed-1g");
    data_file(&path, 1 << 30);
    let idle_dir = dir.join("embed-idle");
    std::fs::create_dir_all(&idle_dir).unwrap();
    let idle_paths: Vec<PathBuf> = (0..10_000)
        .map(|i| idle_dir.join(format!("{i:05}.sst")))
        .collect();
    for p in &idle_paths {
        if std::fs::metadata(p).map(|m| m.len()).ok() != Some(64 << 20) {
            std::fs::File::create(p).unwrap().set_len(64 << 20).unwrap();
        }
    }
    let (mut alone, mut crowd, mut shares) = (Vec::new(), Vec::new(), (0, 0));
    for _ in 0..repeat {
        let e = engine("adaptive", 512 << 20);
        alone.push(scan(&e, &path));
        shares.0 = e.stats().readahead_share_bytes;
        drop(e);
        let e = engine("adaptive", 512 << 20);
        let open: Vec<File> = idle_paths.iter().map(|p| e.open(p).unwrap()).collect();
        crowd.push(scan(&e, &path));
        shares.1 = e.stats().readahead_share_bytes;
        drop(open);
    }
    let mut ratios: Vec<f64> = crowd.iter().zip(&alone).map(|(c, a)| c / a).collect();
    let (a, a0, a1) = median(&mut alone);
    let (c, c0, c1) = median(&mut crowd);
    let (x, x0, x1) = median(&mut ratios);
    println!("1 GiB scanned with 4 KiB reads, 512 MiB budget; median (min-max) of {repeat}, MB/s");
    println!(
        "alone:                      {a:7.0} ({a0:.0}-{a1:.0}), share {} MiB",
        shares.0 >> 20
    );
    println!(
        "with 10,000 idle files open: {c:7.0} ({c0:.0}-{c1:.0}), share {} MiB",
        shares.1 >> 20
    );
    println!("with / alone per round: {x:.3} ({x0:.3}-{x1:.3})");
}

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let repeat: usize = arg("--repeat").and_then(|r| r.parse().ok()).unwrap_or(5);
    let dir = PathBuf::from(arg("--dir").unwrap_or_else(|| "/work/bench".into()));
    std::fs::create_dir_all(&dir).unwrap();
    // `--reactor`: completions reaped in tokio's reactor rather than the reaper thread.
    let reactor = std::env::args().any(|a| a == "--reactor");
    if what == "async-only" {
        let path = dir.join("embed-2g");
        for r in 0..repeat {
            let (i, c) = async_run(&path, 200_000, r as u64 + 1, reactor);
            println!("async: {i:.0} reads/s, {c:.2} us CPU/read");
            let (i, c) = direct_run(&path, 200_000, r as u64 + 1, reactor);
            println!("read_direct: {i:.0} reads/s, {c:.2} us CPU/read");
        }
    }
    if what == "direct-only" {
        let path = dir.join("embed-2g");
        for r in 0..repeat {
            let (i, c) = direct_run(&path, 200_000, r as u64 + 1, reactor);
            println!("read_direct: {i:.0} reads/s, {c:.2} us CPU/read");
        }
    }
    if what == "async" || what == "all" {
        bench_async(&dir, repeat);
    }
    if what == "many" || what == "all" {
        bench_many(&dir, repeat);
    }
    if what == "idle" || what == "all" {
        bench_idle(&dir, repeat);
    }
    if what == "first-touch" || what == "all" {
        bench_first_touch(&dir, repeat);
    }
    if what == "first-touch-one" {
        let on = std::env::args().nth(2).as_deref() == Some("on");
        let (filling, whole) = first_touch_one(&dir.join("embed-1g"), on);
        println!("{filling} {whole}");
    }
}

/// Drop the kernel's caches: all of them as root (`sync`, then `drop_caches`), else `path`'s.
fn drop_caches(path: &Path) -> &'static str {
    // SAFETY: sync(2) takes no arguments.
    unsafe { libc::sync() };
    if std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok() {
        return "all of the kernel's caches dropped before each run";
    }
    ahead::os::drop_kernel_cache(path).unwrap();
    "only the file's cached pages dropped before each run (not root)"
}

/// One run of `first-touch`, in this process: MB/s over the first 256 MiB and over the file.
fn first_touch_one(path: &Path, fault_ahead: bool) -> (f64, f64) {
    let budget = 256u64 << 20;
    let e = Engine::builder()
        .policy("adaptive")
        .budget(budget)
        .record_requests(false)
        .fault_ahead(fault_ahead)
        .build()
        .unwrap();
    scan_marking(&e, path, budget)
}

fn bench_first_touch(dir: &Path, repeat: usize) {
    let path = dir.join("embed-1g");
    data_file(&path, 1 << 30);
    let exe = std::env::current_exe().unwrap();
    let names = ["fault-ahead", "off"];
    let mut runs: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    let (mut ratio_filling, mut ratio_whole) = (Vec::new(), Vec::new());
    let mut dropped = "";
    let settle =
        Duration::from_secs_f64(arg("--settle").and_then(|s| s.parse().ok()).unwrap_or(0.0));
    for round in 0..repeat {
        let mut this = [(0.0, 0.0); 2];
        for k in 0..2 {
            let i = (k + round) % 2;
            dropped = drop_caches(&path);
            std::thread::sleep(settle);
            let out = std::process::Command::new(&exe)
                .args(["first-touch-one", ["on", "off"][i], "--dir"])
                .arg(dir)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let v: Vec<f64> = text
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            assert!(
                out.status.success() && v.len() == 2,
                "first-touch-one: {text}"
            );
            this[i] = (v[0], v[1]);
            runs[i].push(this[i]);
        }
        ratio_filling.push(this[0].0 / this[1].0);
        ratio_whole.push(this[0].1 / this[1].1);
        println!(
            "round {round}: fault-ahead {:.0}/{:.0} MB/s, off {:.0}/{:.0} (first 256 MiB/whole)",
            this[0].0, this[0].1, this[1].0, this[1].1
        );
    }
    println!("first-touch ({dropped}):");
    for i in 0..2 {
        let (f, flo, fhi) = median(&mut runs[i].iter().map(|r| r.0).collect::<Vec<_>>());
        let (w, wlo, whi) = median(&mut runs[i].iter().map(|r| r.1).collect::<Vec<_>>());
        println!(
            "  {:<12} first 256 MiB {f:.0} MB/s ({flo:.0}-{fhi:.0}), whole file {w:.0} MB/s ({wlo:.0}-{whi:.0})",
            names[i]
        );
    }
    let (f, flo, fhi) = median(&mut ratio_filling);
    let (w, wlo, whi) = median(&mut ratio_whole);
    println!(
        "  fault-ahead x off per round: first 256 MiB {f:.2} ({flo:.2}-{fhi:.2}), whole file {w:.2} ({wlo:.2}-{whi:.2})"
    );
}
