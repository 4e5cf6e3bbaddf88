//! Raw `O_DIRECT` reading with no cache in between: the device's ceiling (1 MiB reads at queue
//! depth 8), and the three ways of keeping 32 random reads in flight that the 2020 io_uring
//! seed compares (004_0138ef365889356d.txt): one thread doing `pread`, a pool of threads doing
//! `pread`, and io_uring.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::sources::{drop_kernel_cache, open_direct, Aligned};

/// What a raw run did.
pub struct RawRun {
    pub bytes: u64,
    pub reads: u64,
    pub elapsed: Duration,
    /// Per-read latencies in ns (a sample: at most one per read).
    pub latencies: Vec<u32>,
}

/// Sequential `O_DIRECT` reads of `bs` bytes at queue depth `qd` from the start of the file,
/// until `limit` bytes or `cap` time.
pub fn streaming(
    path: &Path,
    bs: usize,
    qd: usize,
    limit: u64,
    cap: Duration,
) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = open_direct(path)?;
    let size = file.metadata()?.len().min(limit);
    let mut ring = IoUring::new(qd as u32 * 2)?;
    let mut bufs: Vec<Aligned> = (0..qd).map(|_| Aligned::new(bs)).collect();
    let mut submitted_at = vec![Instant::now(); qd];
    let (mut next, mut in_flight, mut bytes, mut reads) = (0u64, 0usize, 0u64, 0u64);
    let mut free: Vec<usize> = (0..qd).collect();
    let mut latencies = Vec::new();
    let start = Instant::now();
    let deadline = start + cap;
    loop {
        while let Some(i) = free.pop() {
            if next >= size || Instant::now() >= deadline {
                free.push(i);
                break;
            }
            let len = bs.min((size - next).next_multiple_of(4096) as usize);
            let e = opcode::Read::new(types::Fd(file.as_raw_fd()), bufs[i].ptr(), len as u32)
                .offset(next)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer `i` is owned by this loop and not reused until its completion.
            unsafe { ring.submission().push(&e) }.map_err(|_| io::Error::other("queue full"))?;
            submitted_at[i] = Instant::now();
            next += len as u64;
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        ring.submit_and_wait(1)?;
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (i, res) in done {
            if res < 0 {
                return Err(io::Error::from_raw_os_error(-res));
            }
            let i = i as usize;
            latencies.push(submitted_at[i].elapsed().as_nanos().min(u32::MAX as u128) as u32);
            bytes += res as u64;
            reads += 1;
            in_flight -= 1;
            free.push(i);
        }
    }
    Ok(RawRun {
        bytes,
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}

use ahead::pattern::SplitMix64 as Rng;

/// Random 4 KiB `O_DIRECT` reads for `cap` (or `total` reads), by `method`: `sync` (one thread,
/// one read at a time), `threads` (32 threads each doing `pread`), `uring` (one thread, 32 in
/// flight).
pub fn random_qd32(path: &Path, method: &str, total: u64, cap: Duration) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = open_direct(path)?;
    let pages = (file.metadata()?.len() / 4096).max(1);
    let start = Instant::now();
    let deadline = start + cap;
    let mut latencies = Vec::new();
    let reads = match method {
        "sync" => {
            let mut buf = Aligned::new(4096);
            let mut rng = Rng(0);
            let mut n = 0;
            while n < total && Instant::now() < deadline {
                let t = Instant::now();
                file.read_at(buf.as_mut(), rng.below(pages) * 4096)?;
                latencies.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                n += 1;
            }
            n
        }
        "threads" => {
            let count = AtomicU64::new(0);
            let failed = AtomicBool::new(false);
            let lat = std::sync::Mutex::new(Vec::new());
            std::thread::scope(|s| {
                for t in 0..32u64 {
                    let (file, count, failed, lat) = (&file, &count, &failed, &lat);
                    s.spawn(move || {
                        let mut buf = Aligned::new(4096);
                        let mut rng = Rng(t + 1);
                        let mut mine = Vec::new();
                        while Instant::now() < deadline
                            && count.fetch_add(1, Ordering::Relaxed) < total
                        {
                            let t0 = Instant::now();
                            if file.read_at(buf.as_mut(), rng.below(pages) * 4096).is_err() {
                                failed.store(true, Ordering::Relaxed);
                                return;
                            }
                            mine.push(t0.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                        }
                        lat.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
                    });
                }
            });
            if failed.load(Ordering::Relaxed) {
                return Err(io::Error::other("a random read failed"));
            }
            latencies = lat.into_inner().unwrap_or_else(|p| p.into_inner());
            latencies.len() as u64
        }
        "uring" => {
            let qd = 32usize;
            // One thread submits and reaps: the kernel can run completions in its context.
            let mut ring = IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(64)
                .or_else(|_| IoUring::new(64))?;
            let mut bufs: Vec<Aligned> = (0..qd).map(|_| Aligned::new(4096)).collect();
            let mut at = vec![Instant::now(); qd];
            let mut rng = Rng(0);
            let (mut issued, mut done, mut in_flight) = (0u64, 0u64, 0usize);
            let mut free: Vec<usize> = (0..qd).collect();
            loop {
                while let Some(i) = free.pop() {
                    if issued >= total || Instant::now() >= deadline {
                        free.push(i);
                        break;
                    }
                    let e = opcode::Read::new(types::Fd(file.as_raw_fd()), bufs[i].ptr(), 4096)
                        .offset(rng.below(pages) * 4096)
                        .build()
                        .user_data(i as u64);
                    // SAFETY: buffer `i` is not reused until its completion.
                    unsafe { ring.submission().push(&e) }
                        .map_err(|_| io::Error::other("queue full"))?;
                    at[i] = Instant::now();
                    issued += 1;
                    in_flight += 1;
                }
                if in_flight == 0 {
                    break;
                }
                ring.submit_and_wait(1)?;
                let c: Vec<(u64, i32)> = ring
                    .completion()
                    .map(|c| (c.user_data(), c.result()))
                    .collect();
                for (i, res) in c {
                    if res < 0 {
                        return Err(io::Error::from_raw_os_error(-res));
                    }
                    latencies
                        .push(at[i as usize].elapsed().as_nanos().min(u32::MAX as u128) as u32);
                    done += 1;
                    in_flight -= 1;
                    free.push(i as usize);
                }
            }
            done
        }
        other => return Err(io::Error::other(format!("unknown method {other}"))),
    };
    Ok(RawRun {
        bytes: reads * 4096,
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}
