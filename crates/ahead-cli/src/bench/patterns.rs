//! What each bench pattern does beyond one reader's sequence of reads: the reads of the
//! single-reader patterns (`reads_of`) and the loop that drives them, the many-threaded ones
//! (interleave, tiobench), overlap, nfiles, the paper's figures on the real file, and the test
//! files' bytes.

use super::*;

/// A single-reader pattern's reads: (offset, length), from its line in the registry (none for
/// any other pattern).
pub(super) fn reads_of(pattern: &str, size: u64) -> registry::Reads {
    match registry::find(pattern).map(|p| &p.runs) {
        Some(registry::Runs::Reads) => registry::reads(pattern, size),
        _ => Box::new(std::iter::empty()),
    }
}

/// interleave-16's run, as the registry calls it: 16 threads, the whole file read.
pub(super) fn interleave_run(
    source: &Source,
    size: u64,
    cap: Duration,
    touched: &mut Touched,
) -> Result<Measured, String> {
    let r = interleave(source, size, 16, cap)?;
    touched.mark(0, r.0);
    Ok(r)
}

/// tiobench's run, as the registry calls it: its reads are not followed page by page.
pub(super) fn tiobench_run(
    source: &Source,
    size: u64,
    cap: Duration,
    touched: &mut Touched,
) -> Result<Measured, String> {
    *touched = Touched::untracked();
    tiobench(source, size, cap, size)
}

/// Run `reads` on `source` until they end, `cap` passes, or `max_bytes`; `compute_ns_per_byte`
/// of busy work after each read (the overlap pattern).
pub(super) fn drive(
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
pub(super) type Measured = (u64, u64, Vec<u32>);

/// The threads' measurements added up (the first error, if any).
pub(super) fn sum(results: Vec<Result<Measured, String>>) -> Result<Measured, String> {
    let (mut b, mut n, mut lat) = (0, 0, Vec::new());
    for r in results {
        let (x, y, l) = r?;
        b += x;
        n += y;
        lat.extend(l);
    }
    Ok((b, n, lat))
}

/// 16 threads on one file: each takes the next 64 KiB (16 pages) from a shared counter and reads
/// it in 4 KiB reads, so the file is read in a scrambled order (the nfsd case).
pub(super) fn interleave(
    source: &Source,
    size: u64,
    threads: u64,
    cap: Duration,
) -> Result<Measured, String> {
    let next = AtomicU64::new(0);
    let chunks = size / (64 << 10);
    let deadline = Instant::now() + cap;
    let results: Vec<Result<Measured, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let next = &next;
                s.spawn(move || {
                    let mut buf = vec![0u8; 4 << 10];
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
                                .read_at(&mut buf, c * (64 << 10) + k * (4 << 10), &mut scratch)
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
pub(super) fn tiobench(
    source: &Source,
    size: u64,
    cap: Duration,
    max_bytes: u64,
) -> Result<Measured, String> {
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

/// The overlap of I/O and computation (the 1996 seed): a reader that computes at `C` bytes/s on
/// what it reads, with C a quarter of and four times the device's streaming rate D (its best
/// sequential configuration). Achieved rate against min(C, D) (perfect overlap) and
/// 1/(1/C + 1/D) (none).
pub(super) fn overlap(
    plan: &Plan,
    best: Option<(raw::Streaming, f64)>,
    push: &mut impl FnMut(&str, &str, Run),
    bar: &indicatif::ProgressBar,
) -> Result<(), String> {
    // D: the device's best sequential rate: measured now with the sweep's best configuration
    // so far (or 8 MiB x QD16 without a sweep), or that configuration's median so far if this
    // one run of it came out slower (a ceiling is the best the device does, not one sample).
    let (s, median_mb_per_s) = best.unwrap_or((
        raw::Streaming {
            bs: 8 << 20,
            qd: 16,
        },
        0.0,
    ));
    let d = raw::streaming(&plan.file, s, plan.size, plan.cap).map_err(|e| e.to_string())?;
    let dev = (d.bytes as f64 / d.elapsed.as_secs_f64()).max(median_mb_per_s * 1e6);
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

/// nfiles runs under this fixed budget whatever `--budget` says: the point is many streams
/// sharing a small cache.
pub(super) const NFILES_BUDGET: u64 = 256 << 20;

/// The files every nfiles run reads, whatever N.
pub(super) const NFILES_FILES: u64 = 1000;

/// N files read slowly at once (the 1999 seed's select-vs-aio table): one reader takes 64 KiB
/// from each file in turn, N = 10, 100, 1000, the same bytes in all; throughput against N.
pub(super) fn nfiles(
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
    // The files go when the pattern is done (or fails): the bench leaves behind only what it
    // names.
    struct RemoveDir<'a>(&'a Path);
    impl Drop for RemoveDir<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0);
        }
    }
    let _remove = RemoveDir(&dir);
    let paths = make_files(&dir, NFILES_FILES, each)?;
    for n in [10usize, 100, 1000] {
        for contender in [Contender::Kernel, Contender::Ahead("adaptive".into())] {
            bar.set_message(format!("nfiles-{n} {}", contender.name()));
            // The engine only for its own runs, its memory faulted in at build, outside the
            // clock: the kernel's page cache reads into memory that is already its own, and
            // these rows compare readahead over many streams, not the first touch of fresh
            // memory (which the single-file rows, on a lazily touched engine, do include).
            let engine = match contender {
                Contender::Kernel => None,
                _ => Some(
                    ahead::engine::Engine::builder()
                        .budget(NFILES_BUDGET)
                        .pretouch(true)
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

pub(super) fn make_files(dir: &Path, n: u64, each: u64) -> Result<Vec<PathBuf>, String> {
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
    let whole_pages = size / PAGE_SIZE * PAGE_SIZE;
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
pub(super) fn paper(
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
            let span = (fig.read_pages + fig.seek_pages) * fig.repeat * PAGE_SIZE;
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
                    cache_pages: (plan.engine.budget / PAGE_SIZE) as usize,
                    policy: ahead::PolicyConfig::new(32, 32).with_folio_max_order(0),
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
            run.sim_requests = Some(sim.faithful.requests);
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
