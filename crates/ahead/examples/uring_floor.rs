//! The floor under the async benchmark (`embed_bench async`): what a bare io_uring loop in Rust
//! reaches on this machine, with no cache, no policy and no copy, for 64 random 4 KiB
//! `O_DIRECT` reads kept in flight. Two shapes:
//!
//! * `single`: one thread submits and reaps (`submit_and_wait(1)`), as fio's loop does;
//! * `reaper`: the engine's shape: the reading thread submits each read with its own
//!   `io_uring_enter`, a second thread reaps and hands the finished reads back through a mutex
//!   and a condition variable.
//! * `tokio`: the reaper's shape under the async benchmark's harness: one tokio task keeps 64
//!   futures in a `FuturesUnordered`, each submitting its read and woken by the reaper thread
//!   when it completes (what `File::read_direct` does, without the engine around it).
//!
//!     cargo run --release -p ahead --example uring_floor -- [single|reaper|tokio] [--file F] [--reads N]
//!
//! Each run prints reads per second; interleave the two and fio on the same file.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use io_uring::{opcode, types, IoUring};

const IN_FLIGHT: usize = 64;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "single".into());
    let path = arg("--file").unwrap_or_else(|| "/work/bench/embed-2g".into());
    let reads: u64 = arg("--reads")
        .and_then(|r| r.parse().ok())
        .unwrap_or(200_000);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (make it with embed_bench first)"));
    let blocks = file.metadata().unwrap().len() / 4096;
    let mut buffers = ahead::os::AlignedBuf::new(IN_FLIGHT * 4096);
    let base = buffers.as_mut_slice().as_mut_ptr() as usize;
    let fd = types::Fd(file.as_raw_fd());
    let mut random = ahead::pattern::SplitMix64(1);
    let mut next_offset = move || random.next_u64() % blocks * 4096;
    let read = move |slot: u64, offset: u64| {
        opcode::Read::new(fd, (base + slot as usize * 4096) as *mut u8, 4096)
            .offset(offset)
            .build()
            .user_data(slot)
    };
    let started_at = Instant::now();
    let (mut done, mut started) = (0u64, IN_FLIGHT as u64);
    if mode == "single" {
        let mut ring = IoUring::new(256).unwrap();
        for slot in 0..IN_FLIGHT as u64 {
            // SAFETY: the buffer slot outlives the read (the loop waits for every read).
            unsafe { ring.submission().push(&read(slot, next_offset())).unwrap() };
        }
        while done < reads {
            ring.submit_and_wait(1).unwrap();
            let finished: Vec<u64> = ring
                .completion()
                .map(|c: io_uring::cqueue::Entry| {
                    assert_eq!(c.result(), 4096);
                    c.user_data()
                })
                .collect();
            for slot in finished {
                done += 1;
                if started < reads {
                    started += 1;
                    // SAFETY: as above.
                    unsafe { ring.submission().push(&read(slot, next_offset())).unwrap() };
                }
            }
        }
    } else if mode == "tokio" {
        done = tokio_floor(fd, base, blocks, reads);
    } else {
        let ring = Arc::new(IoUring::new(256).unwrap());
        let finished = Arc::new((Mutex::new(Vec::<u64>::new()), Condvar::new()));
        {
            let (ring, finished) = (ring.clone(), finished.clone());
            std::thread::spawn(move || loop {
                let _ = ring.submitter().submit_and_wait(1);
                // SAFETY: this thread is the only consumer of the completion queue.
                let slots: Vec<u64> = unsafe { ring.completion_shared() }
                    .map(|c| c.user_data())
                    .collect();
                if !slots.is_empty() {
                    finished.0.lock().unwrap().extend(slots);
                    finished.1.notify_one();
                }
            });
        }
        let submit_lock = Mutex::new(());
        let submit = |slot: u64, offset: u64| {
            let held = submit_lock.lock().unwrap();
            // SAFETY: one producer at a time (the lock); the buffer slot outlives the read.
            unsafe { ring.submission_shared().push(&read(slot, offset)).unwrap() };
            drop(held);
            ring.submit().unwrap();
        };
        for slot in 0..IN_FLIGHT as u64 {
            submit(slot, next_offset());
        }
        while done < reads {
            let slots = {
                let mut f = finished.0.lock().unwrap();
                while f.is_empty() {
                    f = finished.1.wait(f).unwrap();
                }
                std::mem::take(&mut *f)
            };
            for slot in slots {
                done += 1;
                if started < reads {
                    started += 1;
                    submit(slot, next_offset());
                }
            }
        }
    }
    let secs = started_at.elapsed().as_secs_f64();
    println!("{mode}: {:.0} reads/s", done as f64 / secs);
}

/// A read's completion, as the reaper thread leaves it for the future waiting on it.
#[derive(Default)]
struct Landing {
    result: Option<i32>,
    waker: Option<std::task::Waker>,
}

/// The `tokio` shape: see the module comment. Reads done.
fn tokio_floor(fd: types::Fd, base: usize, blocks: u64, reads: u64) -> u64 {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let ring = Arc::new(IoUring::new(256).unwrap());
    let landings: Arc<Vec<Mutex<Landing>>> =
        Arc::new((0..IN_FLIGHT).map(|_| Mutex::default()).collect());
    {
        let (ring, landings) = (ring.clone(), landings.clone());
        std::thread::spawn(move || loop {
            let _ = ring.submitter().submit_and_wait(1);
            // SAFETY: this thread is the only consumer of the completion queue.
            let done: Vec<(u64, i32)> = unsafe { ring.completion_shared() }
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (slot, result) in done {
                let mut l = landings[slot as usize].lock().unwrap();
                l.result = Some(result);
                if let Some(w) = l.waker.take() {
                    drop(l);
                    w.wake();
                }
            }
        });
    }
    let submit_lock = Mutex::new(());
    let read_at = |slot: u64, offset: u64| {
        let (ring, landings, submit_lock) = (&ring, &landings, &submit_lock);
        async move {
            let entry = opcode::Read::new(fd, (base + slot as usize * 4096) as *mut u8, 4096)
                .offset(offset)
                .build()
                .user_data(slot);
            let held = submit_lock.lock().unwrap();
            // SAFETY: one producer at a time; the buffer slot outlives the read.
            unsafe { ring.submission_shared().push(&entry).unwrap() };
            drop(held);
            ring.submit().unwrap();
            std::future::poll_fn(|cx| {
                let mut l = landings[slot as usize].lock().unwrap();
                match l.result.take() {
                    Some(r) => std::task::Poll::Ready((slot, r)),
                    None => {
                        l.waker = Some(cx.waker().clone());
                        std::task::Poll::Pending
                    }
                }
            })
            .await
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut random = ahead::pattern::SplitMix64(1);
        let mut next_offset = move || random.next_u64() % blocks * 4096;
        let mut in_flight = FuturesUnordered::new();
        for slot in 0..IN_FLIGHT as u64 {
            in_flight.push(read_at(slot, next_offset()));
        }
        let (mut done, mut started) = (0u64, IN_FLIGHT as u64);
        while let Some((slot, result)) = in_flight.next().await {
            assert_eq!(result, 4096);
            done += 1;
            if started < reads {
                started += 1;
                in_flight.push(read_at(slot, next_offset()));
            }
        }
        done
    })
}
