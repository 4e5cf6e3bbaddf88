//! Raw reading with no cache of ahead's in between: the device's ceilings (a sweep of
//! `O_DIRECT` sequential reads over request sizes and queue depths, and random reads at queue
//! depth 32), the three ways of keeping 32 random reads in flight that the 2020 io_uring seed
//! compares on `O_DIRECT` (004_0138ef365889356d.txt: one thread doing `pread`, a pool of
//! threads, io_uring), and the seed's own experiment on buffered reads (one thread's `preadv`,
//! io_uring forced to its worker threads, io_uring's native async buffered reads).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ahead::os::AlignedBuf;
use ahead::PAGE_SIZE;
use io_uring::{opcode, squeue, types, IoUring};

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

/// `qd` buffers of `bs` bytes in huge pages where the kernel gives them (as the engine's cache
/// is: see `AlignedBuf::huge`), every page written once: the memory is the process's before a
/// clock starts (first touches of fresh memory cost ~3 s/GiB on this VM, which a sweep's 256 MiB
/// of 8 MiB x 32 buffers would otherwise pay inside its run).
fn buffers(qd: usize, bs: usize) -> Vec<Aligned> {
    (0..qd)
        .map(|_| {
            let mut b = Aligned::huge(bs);
            for page in b.as_mut_slice().chunks_mut(PAGE_SIZE as usize) {
                page[0] = 1;
            }
            b
        })
        .collect()
}

/// A read's size as the tables give it: "4 KiB", "8 MiB".
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// One configuration of the device's sequential sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Streaming {
    /// Bytes per read.
    pub bs: usize,
    /// Reads in flight.
    pub qd: usize,
}

impl Streaming {
    /// As the table and the JSON name it: "8 MiB x QD16".
    pub fn name(&self) -> String {
        format!("{} x QD{}", size_text(self.bs as u64), self.qd)
    }

    /// The sweep: 1, 4 and 8 MiB reads and the device's largest request (`max_sectors_kb`,
    /// if it is another size), each at queue depths 8, 16 and 32.
    pub fn sweep(max_sectors_kb: Option<u64>) -> Vec<Streaming> {
        let mut sizes = vec![1usize << 20, 4 << 20, 8 << 20];
        if let Some(kb) = max_sectors_kb.filter(|&kb| kb >= 4) {
            let bs = (kb as usize) << 10;
            if !sizes.contains(&bs) && bs <= 64 << 20 {
                sizes.push(bs);
            }
        }
        sizes.sort_unstable();
        sizes
            .into_iter()
            .flat_map(|bs| [8, 16, 32].map(|qd| Streaming { bs, qd }))
            .collect()
    }
}

/// Sequential `O_DIRECT` reads as `s` says, from the start of the file, until `limit` bytes or
/// `cap` time; the kernel's cached pages of the file dropped first.
pub fn streaming(path: &Path, s: Streaming, limit: u64, cap: Duration) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = open_direct(path)?;
    let size = file.metadata()?.len().min(limit);
    let mut ring = IoUring::new(s.qd as u32 * 2)?;
    let bufs = buffers(s.qd, s.bs);
    let start = Instant::now();
    let mut at = 0u64;
    let (bytes, reads, latencies) = queue_depth_reads(
        &mut ring,
        file.as_fd(),
        bufs,
        squeue::Flags::empty(),
        start + cap,
        || {
            if at >= size {
                return None;
            }
            let len = s.bs.min((size - at).next_multiple_of(PAGE_SIZE) as usize);
            at += len as u64;
            Some((at - len as u64, len))
        },
    )?;
    Ok(RawRun {
        bytes,
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}

use ahead::pattern::SplitMix64 as Rng;

/// The random ceiling: `O_DIRECT` reads at random `bs`-aligned offsets, 32 in flight, for each
/// (`bs`, share of `cap`) in turn (tiobench mixes two sizes), until `limit` bytes or the cap.
pub fn random_ceiling(
    path: &Path,
    phases: &[(usize, f64)],
    limit: u64,
    cap: Duration,
) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = open_direct(path)?;
    let size = file.metadata()?.len();
    let largest = phases.iter().map(|p| p.0).max().unwrap_or(4 << 10);
    let mut ring = IoUring::new(64)?;
    let start = Instant::now();
    let (mut bytes, mut reads, mut latencies) = (0u64, 0u64, Vec::new());
    let mut rng = Rng(7);
    for &(bs, share) in phases {
        let bufs = buffers(32, largest);
        let deadline = Instant::now() + cap.mul_f64(share);
        let units = (size / bs as u64).max(1);
        let (b, n, l) = queue_depth_reads(
            &mut ring,
            file.as_fd(),
            bufs,
            squeue::Flags::empty(),
            deadline,
            || (bytes < limit).then(|| (rng.below(units) * bs as u64, bs)),
        )?;
        bytes += b;
        reads += n;
        latencies.extend(l);
    }
    Ok(RawRun {
        bytes,
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}

/// `O_DIRECT` reads of `bs` bytes, `qd` in flight through io_uring, for `cap`: at random
/// `bs`-aligned offsets, or one after another from the file's start (`random` false); the
/// kernel's cached pages of the file dropped first. `ahead calibrate`'s probe.
pub fn reads_at_depth(
    path: &Path,
    bs: usize,
    qd: usize,
    random: bool,
    cap: Duration,
) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = open_direct(path)?;
    let size = file.metadata()?.len();
    let units = (size / bs as u64).max(1);
    let mut ring = IoUring::new((qd as u32 * 2).next_power_of_two())?;
    let bufs = buffers(qd, bs);
    let mut rng = Rng(11);
    let mut at = 0u64;
    let start = Instant::now();
    let (bytes, reads, latencies) = queue_depth_reads(
        &mut ring,
        file.as_fd(),
        bufs,
        squeue::Flags::empty(),
        start + cap,
        || {
            let unit = if random { rng.below(units) } else { at };
            at = (at + 1) % units;
            Some((unit * bs as u64, bs))
        },
    )?;
    Ok(RawRun {
        bytes,
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}

/// Random 4 KiB `O_DIRECT` reads for `cap` (or `total` reads), by `method`: `sync` (one thread,
/// one read at a time), `threads` (32 threads each doing `pread`), `uring` (one thread, 32 in
/// flight).
pub fn random_qd32(path: &Path, method: &str, total: u64, cap: Duration) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = open_direct(path)?;
    let pages = (file.metadata()?.len() / PAGE_SIZE).max(1);
    let start = Instant::now();
    let deadline = start + cap;
    let mut latencies = Vec::new();
    let reads = match method {
        "sync" => {
            let mut buf = Aligned::new(4 << 10);
            let mut rng = Rng(0);
            let mut issued = 0;
            one_at_a_time(
                deadline,
                &mut latencies,
                || {
                    issued += 1;
                    (issued <= total).then(|| rng.below(pages) * PAGE_SIZE)
                },
                |offset| file.read_at(buf.as_mut_slice(), offset).map(drop),
            )?
        }
        "threads" => {
            let count = AtomicU64::new(0);
            let failed = AtomicBool::new(false);
            let lat = std::sync::Mutex::new(Vec::new());
            std::thread::scope(|s| {
                for t in 0..32u64 {
                    let (file, count, failed, lat) = (&file, &count, &failed, &lat);
                    s.spawn(move || {
                        let mut buf = Aligned::new(4 << 10);
                        let mut rng = Rng(t + 1);
                        let mut mine = Vec::new();
                        while Instant::now() < deadline
                            && count.fetch_add(1, Ordering::Relaxed) < total
                        {
                            let t0 = Instant::now();
                            if file
                                .read_at(buf.as_mut_slice(), rng.below(pages) * PAGE_SIZE)
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
            let (_, done, lat) = queue_depth_reads(
                &mut ring,
                file.as_fd(),
                buffers(32, 4 << 10),
                squeue::Flags::empty(),
                deadline,
                || {
                    issued += 1;
                    (issued <= total).then(|| (rng.below(pages) * PAGE_SIZE, 4 << 10))
                },
            )?;
            latencies = lat;
            done
        }
        other => return Err(io::Error::other(format!("unknown method {other}"))),
    };
    Ok(RawRun {
        bytes: reads * (4 << 10),
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}

/// One read at a time, at each offset `next` gives, until it gives none or `deadline`
/// passes: each read's latency in ns pushed to `latencies`; the reads made.
fn one_at_a_time(
    deadline: Instant,
    latencies: &mut Vec<u32>,
    mut next: impl FnMut() -> Option<u64>,
    mut read: impl FnMut(u64) -> io::Result<()>,
) -> io::Result<u64> {
    let mut n = 0;
    while Instant::now() < deadline {
        let Some(offset) = next() else { break };
        let t = Instant::now();
        read(offset)?;
        latencies.push(ns_since(t));
        n += 1;
    }
    Ok(n)
}

/// How the seed-004 experiment keeps its buffered random reads going.
pub const BUFFERED_METHODS: [&str; 3] = ["preadv", "uring-workers", "uring-async"];

/// The 2020 io_uring seed's experiment (004_0138ef365889356d.txt): random 4 KiB *buffered*
/// reads of every page of the file once (so each is a miss, as the seed's 4 GiB file was larger
/// than its page cache could keep), 32 in flight, by `method`: `preadv` in one thread, one at a
/// time (the seed's "preadv for comparison"); io_uring with every read sent to its worker
/// threads (`IOSQE_ASYNC`: the 2020 "mainline" path, a worker blocking on each page lock); and
/// io_uring's native async buffered reads (the patchset, merged in 5.9: the submitting task is
/// woken when the page is unlocked, no worker). The kernel's cached pages of the file are
/// dropped first; its readahead is off (`POSIX_FADV_RANDOM`), as it would find nothing to do.
pub fn random_buffered(path: &Path, method: &str, cap: Duration) -> io::Result<RawRun> {
    drop_kernel_cache(path)?;
    let file = std::fs::File::open(path)?;
    ahead::os::fadvise(file.as_fd(), 0, 0, libc::POSIX_FADV_RANDOM)?;
    // Every page once, in a scattered order: an odd multiplier is a bijection modulo a power
    // of two.
    let pages = (file.metadata()?.len() / PAGE_SIZE).max(1);
    let span = 1u64 << (63 - pages.leading_zeros());
    let mut i = 0u64;
    let mut next = move || {
        (i < span).then(|| {
            let p = i.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1) & (span - 1);
            i += 1;
            p * PAGE_SIZE
        })
    };
    let start = Instant::now();
    let deadline = start + cap;
    let mut latencies = Vec::new();
    let reads = match method {
        "preadv" => {
            let mut buf = vec![0u8; 4 << 10];
            one_at_a_time(deadline, &mut latencies, &mut next, |offset| {
                let mut iov = [io::IoSliceMut::new(&mut buf)];
                ahead::os::preadv(file.as_fd(), &mut iov, offset).map(drop)
            })?
        }
        "uring-workers" | "uring-async" => {
            let flags = if method == "uring-workers" {
                squeue::Flags::ASYNC
            } else {
                squeue::Flags::empty()
            };
            let mut ring = IoUring::new(64)?;
            let (_, done, lat) = queue_depth_reads(
                &mut ring,
                file.as_fd(),
                buffers(32, 4 << 10),
                flags,
                deadline,
                || next().map(|o| (o, 4 << 10)),
            )?;
            latencies = lat;
            done
        }
        other => return Err(io::Error::other(format!("unknown method {other}"))),
    };
    Ok(RawRun {
        bytes: reads * (4 << 10),
        reads,
        elapsed: start.elapsed(),
        latencies,
    })
}

/// The benchmark's raw loop (the device's own limit, with no cache between): keep one read in
/// flight per buffer of `bufs` (each read at most its buffer's length), with `flags` on each
/// (`IOSQE_ASYNC` forces io_uring's worker threads), one submit per read, until `next` gives no
/// more (offset, length) or `deadline` passes. Returns (bytes, reads, latencies in ns). The
/// caller makes the buffers, so their memory is faulted in before its clock starts.
///
/// One submit per read: a batch rung in with one doorbell is served and completed as one
/// (virtio does), so the queue drains between batches; submitted one by one it stays full, as
/// 32 threads' reads keep it.
pub fn queue_depth_reads(
    ring: &mut IoUring,
    fd: BorrowedFd<'_>,
    mut bufs: Vec<AlignedBuf>,
    flags: io_uring::squeue::Flags,
    deadline: Instant,
    mut next: impl FnMut() -> Option<(u64, usize)>,
) -> io::Result<(u64, u64, Vec<u32>)> {
    let qd = bufs.len();
    // The buffers registered with the ring, as the engine's arena is: O_DIRECT into
    // unregistered memory pins its pages on every read, which costs this VM a quarter of its
    // bandwidth at 1 MiB requests. Where registering fails (a memlock limit), plain reads.
    let iovecs: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: the buffers outlive their registration: they are unregistered below before they
    // are dropped (or leaked with the ring on failure).
    let registered = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
    let mut submitted_at = vec![Instant::now(); qd];
    let (mut in_flight, mut bytes, mut reads) = (0usize, 0u64, 0u64);
    let mut free: Vec<usize> = (0..qd).collect();
    let mut latencies = Vec::new();
    let mut failure: Option<io::Error> = None;
    let mut more = true;
    loop {
        while more && failure.is_none() && Instant::now() < deadline {
            let Some(i) = free.pop() else { break };
            let Some((offset, len)) = next() else {
                free.push(i);
                more = false;
                break;
            };
            let len = len.min(bufs[i].len());
            let target = types::Fd(fd.as_raw_fd());
            let e = if registered {
                opcode::ReadFixed::new(target, bufs[i].as_mut_ptr(), len as u32, i as u16)
                    .offset(offset)
                    .build()
            } else {
                opcode::Read::new(target, bufs[i].as_mut_ptr(), len as u32)
                    .offset(offset)
                    .build()
            }
            .flags(flags)
            .user_data(i as u64);
            // SAFETY: buffer `i` is owned by this loop and not reused or freed until its
            // completion is reaped (below, or in the drain on the way out).
            if unsafe { ring.submission().push(&e) }.is_err() {
                free.push(i);
                break; // full: reap first
            }
            submitted_at[i] = Instant::now();
            in_flight += 1;
            if let Err(e) = ring.submit() {
                failure = Some(e);
            }
        }
        if in_flight == 0 {
            break;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The ring no longer answers: the kernel may still write into the buffers, so
            // they are leaked rather than freed under it.
            std::mem::forget(bufs);
            return Err(e);
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (i, res) in done {
            in_flight -= 1;
            free.push(i as usize);
            if res < 0 {
                failure.get_or_insert(io::Error::from_raw_os_error(-res));
                continue;
            }
            let ns = submitted_at[i as usize].elapsed().as_nanos();
            latencies.push(ns.min(u32::MAX as u128) as u32);
            bytes += res as u64;
            reads += 1;
        }
    }
    if registered {
        let _ = ring.submitter().unregister_buffers();
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((bytes, reads, latencies)),
    }
}
