//! Raw `O_DIRECT` reading with no cache in between: the device's ceiling (1 MiB reads at queue
//! depth 8), and the three ways of keeping 32 random reads in flight that the 2020 io_uring
//! seed compares (004_0138ef365889356d.txt): one thread doing `pread`, a pool of threads doing
//! `pread`, and io_uring.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use io_uring::IoUring;

use super::sources::{drop_kernel_cache, open_direct, Aligned};

/// What a raw run did.
pub struct RawRun {
    pub bytes: u64,
    pub reads: u64,
    pub elapsed: Duration,
    /// Per-read latencies in ns (a sample: at most one per read).
    pub latencies: Vec<u32>,
}

/// Nanoseconds since `t`, saturated to `u32` (latency samples).
pub fn ns_since(t: Instant) -> u32 {
    t.elapsed().as_nanos().min(u32::MAX as u128) as u32
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
    let start = Instant::now();
    let mut at = 0u64;
    let (bytes, reads, latencies) =
        ahead::os::queue_depth_reads(&mut ring, file.as_fd(), qd, bs, start + cap, || {
            if at >= size {
                return None;
            }
            let len = bs.min((size - at).next_multiple_of(4096) as usize);
            at += len as u64;
            Some((at - len as u64, len))
        })?;
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
                file.read_at(buf.as_mut_slice(), rng.below(pages) * 4096)?;
                latencies.push(ns_since(t));
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
                            if file
                                .read_at(buf.as_mut_slice(), rng.below(pages) * 4096)
                                .is_err()
                            {
                                failed.store(true, Ordering::Relaxed);
                                return;
                            }
                            mine.push(ns_since(t0));
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
            // One thread submits and reaps: the kernel can run completions in its context.
            let mut ring = IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(64)
                .or_else(|_| IoUring::new(64))?;
            let mut rng = Rng(0);
            let mut issued = 0u64;
            let (_, done, lat) =
                ahead::os::queue_depth_reads(&mut ring, file.as_fd(), 32, 4096, deadline, || {
                    issued += 1;
                    (issued <= total).then(|| (rng.below(pages) * 4096, 4096))
                })?;
            latencies = lat;
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
