//! The embedding API: async reads under tokio, batches of ranges, prefetches that are awaited
//! or cancelled, read streams, per-file options and opening from a descriptor. Every byte is
//! checked against pread(2), for every backend, under a budget small enough to evict.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ahead::engine::{BackendChoice, Engine, OpenOptions};
use proptest::prelude::*;

mod common;
use common::pread;

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("embedding-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A file of `size` seeded random bytes (made once).
fn make_file(name: &str, size: usize) -> PathBuf {
    common::seeded_file("embedding-tests", name, size)
}

fn engine(backend: BackendChoice, policy: &str, budget: u64) -> Engine {
    Engine::builder()
        .backend(backend)
        .policy(policy)
        .budget(budget)
        .threads(4)
        .record_requests(true)
        .build()
        .unwrap()
}

const BACKENDS: [BackendChoice; 3] = [
    BackendChoice::URING,
    BackendChoice::THREADS,
    BackendChoice::SYNC,
];

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .build()
        .unwrap()
}

/// A random stream from `seed`.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut r = ahead::pattern::SplitMix64(seed);
    move || r.next_u64()
}

/// Ranges of every kind: inside, straddling the end, past it, empty, overlapping.
fn ranges(size: u64, n: usize, seed: u64) -> Vec<(u64, usize)> {
    let mut next = rng(seed);
    (0..n)
        .map(|_| {
            let off = next() % (size + 20_000);
            let len = match next() % 4 {
                0 => 0,
                1 => (next() % 100) as usize,
                2 => (next() % 20_000) as usize,
                _ => 16 << 10,
            };
            (off, len)
        })
        .collect()
}

/// Whether the engine's reads in flight all land within two seconds.
fn settles(engine: &Engine) -> bool {
    for _ in 0..200 {
        if engine.stats().in_flight_pages == 0 {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// One async read of three times the cache at an odd offset, two tasks at once, every backend
/// and policy: the task's rest-of-read requests are held to a quarter of the cache, so it parks
/// for room and goes on, and every byte is the file's.
#[test]
fn an_async_read_larger_than_the_cache_is_read_whole() {
    let budget = 1u64 << 20;
    let size = 4 * budget as usize + 777;
    let path = make_file("async-larger-than-cache", size);
    let reference = Arc::new(std::fs::File::open(&path).unwrap());
    for backend in BACKENDS {
        for policy in ["adaptive", "none"] {
            let engine = engine(backend, policy, budget);
            let file = Arc::new(engine.open(&path).unwrap());
            let wrong = runtime(2).block_on(async {
                let mut handles = Vec::new();
                for (t, off) in [12_345u64, 777_777].into_iter().enumerate() {
                    let (file, reference) = (file.clone(), reference.clone());
                    handles.push(tokio::spawn(async move {
                        let len = 3 * budget as usize - t;
                        let mut buf = vec![0xEEu8; len];
                        let n = file.read_at_async(&mut buf, off).await.unwrap();
                        buf[..n] != pread(&reference, off, len)[..]
                    }));
                }
                let mut wrong = 0;
                for h in handles {
                    wrong += h.await.unwrap() as usize;
                }
                wrong
            });
            assert_eq!(wrong, 0, "{backend:?} {policy}");
            assert!(
                settles(&engine),
                "{backend:?} {policy}: pages left in flight"
            );
            assert!(engine.stats().resident_pages <= budget / 4096);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Many tasks on a tokio runtime, each with its own random reads, under a 1 MiB budget:
    /// every async read returns what pread does.
    #[test]
    fn async_reads_equal_pread(
        size in prop_oneof![1usize..5000, 5000usize..2_000_000],
        backend in 0usize..3,
        policy in prop::sample::select(vec!["adaptive", "linux-ondemand", "none"]),
        tasks in 1usize..=32,
        workers in 1usize..=4,
        seed in any::<u64>(),
    ) {
        let path = make_file(&format!("async-{size}"), size);
        let engine = engine(BACKENDS[backend], policy, 1 << 20);
        let file = Arc::new(engine.open(&path).unwrap());
        let reference = Arc::new(std::fs::File::open(&path).unwrap());
        let rt = runtime(workers);
        let wrong = rt.block_on(async {
            let mut handles = Vec::new();
            for t in 0..tasks {
                let (file, reference) = (file.clone(), reference.clone());
                handles.push(tokio::spawn(async move {
                    let mut wrong = 0;
                    for (off, len) in ranges(size as u64, 20, seed ^ t as u64) {
                        let mut buf = vec![0xEEu8; len];
                        let n = file.read_at_async(&mut buf, off).await.unwrap();
                        if buf[..n] != pread(&reference, off, len)[..] {
                            wrong += 1;
                        }
                    }
                    wrong
                }));
            }
            let mut wrong = 0;
            for h in handles {
                wrong += h.await.unwrap();
            }
            wrong
        });
        prop_assert_eq!(wrong, 0);
        // The reads are done; what their policies read ahead may still be landing. Nothing
        // may stay in flight for good.
        prop_assert!(settles(&engine), "pages left in flight");
    }

    /// `read_many`, blocking and async, returns each range's bytes as pread does, in the
    /// order asked, under a budget small enough that one batch takes several waves.
    #[test]
    fn read_many_equals_pread(
        size in prop_oneof![1usize..5000, 5000usize..3_000_000],
        backend in 0usize..3,
        n in 0usize..200,
        budget_kib in prop::sample::select(vec![256u64, 1024, 16384]),
        seed in any::<u64>(),
    ) {
        let path = make_file(&format!("many-{size}"), size);
        let engine = engine(BACKENDS[backend], "adaptive", budget_kib << 10);
        let file = engine.open(&path).unwrap();
        let reference = std::fs::File::open(&path).unwrap();
        let rs = ranges(size as u64, n, seed);
        let want: Vec<Vec<u8>> = rs.iter().map(|&(o, l)| pread(&reference, o, l)).collect();
        prop_assert!(file.read_many(&rs).unwrap() == want, "blocking read_many");
        let got = runtime(2).block_on(file.read_many_async(&rs)).unwrap();
        prop_assert!(got == want, "async read_many");
    }

    /// Direct reads (into the caller's own buffer, past the cache) from many tasks return what
    /// pread does, at the file's end too, while cached reads of the same file go on beside
    /// them; the counts add up, and nothing is cached by them.
    #[test]
    fn direct_reads_equal_pread(
        size in prop_oneof![1usize..5000, 5000usize..2_000_000],
        backend in 0usize..3,
        tasks in 1usize..=16,
        seed in any::<u64>(),
    ) {
        let path = make_file(&format!("direct-{size}"), size);
        let engine = engine(BACKENDS[backend], "adaptive", 1 << 20);
        let file = Arc::new(engine.open(&path).unwrap());
        let reference = Arc::new(std::fs::File::open(&path).unwrap());
        let rt = runtime(2);
        let wrong = rt.block_on(async {
            let mut handles = Vec::new();
            for t in 0..tasks {
                let (file, reference) = (file.clone(), reference.clone());
                handles.push(tokio::spawn(async move {
                    // Reads that went wrong, and reads within the file (those past its end
                    // are not counted, as for `read_at`).
                    let (mut wrong, mut within) = (0, 0u64);
                    let mut next = rng(seed ^ t as u64);
                    for _ in 0..10 {
                        // Page-aligned offsets up to a page past the end, 1 to 16 pages.
                        let pages = size as u64 / 4096 + 2;
                        let off = next() % pages * 4096;
                        let len = (1 + next() % 16) as usize * 4096;
                        let buf = ahead::AlignedBuf::new(len);
                        let (got, buf) = file.read_direct(buf, off).await;
                        let n = got.unwrap();
                        let want = pread(&reference, off, len);
                        if n != want.len() || buf.as_slice()[..n] != want[..] {
                            wrong += 1;
                        }
                        // A cached read beside it.
                        let mut small = vec![0u8; 1000];
                        let m = file.read_at_async(&mut small, off / 3).await.unwrap();
                        if small[..m] != pread(&reference, off / 3, 1000)[..] {
                            wrong += 1;
                        }
                        within += u64::from(off < size as u64) + u64::from(off / 3 < size as u64);
                    }
                    (wrong, within)
                }));
            }
            let (mut wrong, mut within) = (0, 0);
            for h in handles {
                let (w, n) = h.await.unwrap();
                wrong += w;
                within += n;
            }
            (wrong, within)
        });
        let (wrong, within) = wrong;
        prop_assert_eq!(wrong, 0);
        prop_assert!(settles(&engine), "pages left in flight");
        let s = engine.stats();
        prop_assert_eq!(s.reads, within);
        prop_assert_eq!(s.read_latency.count, s.reads);
    }

    /// A read stream yields every range, in order, as pread reads it.
    #[test]
    fn read_stream_equals_pread(
        size in 5000usize..3_000_000,
        backend in 0usize..3,
        n in 0usize..300,
        seed in any::<u64>(),
    ) {
        let path = make_file(&format!("stream-{size}"), size);
        let engine = engine(BACKENDS[backend], "none", 1 << 20);
        let file = engine.open(&path).unwrap();
        let reference = std::fs::File::open(&path).unwrap();
        let rs = ranges(size as u64, n, seed);
        let mut i = 0;
        for got in file.read_stream(rs.iter().copied()) {
            let (off, bytes) = got.unwrap();
            prop_assert_eq!(off, rs[i].0);
            prop_assert!(bytes == pread(&reference, rs[i].0, rs[i].1), "range {}", i);
            i += 1;
        }
        prop_assert_eq!(i, rs.len());
        // And as futures.
        let mut stream = file.read_stream(rs.iter().copied());
        let rt = runtime(1);
        let mut j = 0;
        while let Some(got) = rt.block_on(stream.next_async()) {
            let (_, bytes) = got.unwrap();
            prop_assert!(bytes == pread(&reference, rs[j].0, rs[j].1), "async range {}", j);
            j += 1;
        }
        prop_assert_eq!(j, rs.len());
    }
}

/// A direct read's future dropped while its read is in flight leaves the buffer with the
/// request until it completes (no write into freed memory: the buffer is owned); an unaligned
/// offset is refused with the buffer given back.
#[test]
fn a_dropped_direct_read_is_safe_and_an_unaligned_one_is_refused() {
    use std::future::Future;
    let path = make_file("direct-drop", 8 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    for backend in BACKENDS {
        let engine = engine(backend, "none", 4 << 20);
        let file = engine.open(&path).unwrap();
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        for i in 0..32u64 {
            let mut read = Box::pin(file.read_direct(ahead::AlignedBuf::new(256 << 10), i << 18));
            let _ = read.as_mut().poll(&mut cx);
            drop(read);
        }
        assert!(settles(&engine), "{backend:?}: the dropped reads complete");
        let (got, buf) = runtime(1).block_on(file.read_direct(ahead::AlignedBuf::new(8192), 100));
        assert_eq!(got.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(buf.len(), 8192);
        let (got, buf) = runtime(1).block_on(file.read_direct(buf, 8 << 20));
        assert_eq!(got.unwrap(), 0, "{backend:?}: at the end");
        let (got, buf) = runtime(1).block_on(file.read_direct(buf, 4096));
        assert_eq!(got.unwrap(), 8192);
        assert!(buf.as_slice() == &pread(&reference, 4096, 8192)[..]);
    }
}

/// Adjacent ranges go out as one request; a lone range as its own.
#[test]
fn read_many_merges_adjacent_ranges_into_one_request() {
    let path = make_file("merge", 4 << 20);
    for backend in BACKENDS {
        let engine = engine(backend, "none", 64 << 20);
        let file = engine.open(&path).unwrap();
        // Three adjacent 16 KiB blocks (given out of order), and one far away.
        let rs = [
            (32 << 10, 16 << 10),
            (0, 16 << 10),
            (16 << 10, 16 << 10),
            (3 << 20, 16 << 10),
        ];
        let out = file.read_many(&rs).unwrap();
        assert_eq!(
            out.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![16 << 10; 4]
        );
        let log = engine.request_log();
        let spans: Vec<(u64, u64)> = log.iter().map(|r| (r.first_page, r.pages)).collect();
        assert!(
            spans.contains(&(0, 12)),
            "{backend:?}: the three adjacent blocks in one request: {spans:?}"
        );
        assert!(
            spans.iter().any(|&(f, _)| f == 768),
            "{backend:?}: {spans:?}"
        );
        assert_eq!(log.len(), 2, "{backend:?}: {spans:?}");
    }
}

/// A prefetch reads its ranges under a policy that reads nothing ahead (`none`), and once
/// awaited they are hits.
#[test]
fn an_awaited_prefetch_leaves_its_ranges_cached_whatever_the_policy() {
    let path = make_file("prefetch", 8 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    for backend in BACKENDS {
        let engine = engine(backend, "none", 64 << 20);
        let file = engine.open(&path).unwrap();
        let rs = [(1 << 20, 256 << 10), (5 << 20, 64 << 10)];
        let p = file.prefetch(&rs);
        assert!(p.requests() >= 2, "{backend:?}");
        runtime(1).block_on(p).unwrap();
        let before = engine.stats();
        for &(off, len) in &rs {
            let mut buf = vec![0u8; len];
            assert_eq!(file.read_at(&mut buf, off).unwrap(), len);
            assert!(buf == pread(&reference, off, len));
        }
        let after = engine.stats();
        assert_eq!(
            after.miss_pages, before.miss_pages,
            "{backend:?}: every page a hit"
        );
        assert_eq!(after.hit_pages - before.hit_pages, 80, "{backend:?}");
        assert_eq!(
            after.requests, before.requests,
            "{backend:?}: nothing read again"
        );
        // And blocking.
        file.prefetch(&[(7 << 20, 4096)]).wait().unwrap();
    }
}

/// A detached prefetch reads its range whatever the policy, as `posix_fadvise`'s `WILLNEED`
/// does: under `none` and `fixed` the range is read, once the reads land every page of it is a
/// hit, and nothing is cancelled. Will-need advice, by contrast, is the policy's: `none` reads
/// nothing for it.
#[test]
fn a_detached_prefetch_reads_its_range_under_any_policy() {
    use ahead::Advice;
    let path = make_file("willneed", 4 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    for policy in ["none", "fixed"] {
        let engine = engine(BackendChoice::THREADS, policy, 64 << 20);
        let file = engine.open(&path).unwrap();
        file.advise(Advice::WillNeed {
            offset: 1 << 20,
            len: 512 << 10,
        })
        .unwrap();
        assert_eq!(
            engine.stats().pages_read,
            0,
            "{policy}: advice is the policy's"
        );
        file.prefetch(&[(1 << 20, 512 << 10)]).detach();
        assert!(settles(&engine), "{policy}: the prefetch's reads land");
        let before = engine.stats();
        assert_eq!(before.pages_read, 128, "{policy}");
        let mut buf = vec![0u8; 512 << 10];
        file.read_exact_at(&mut buf, 1 << 20).unwrap();
        assert!(buf == pread(&reference, 1 << 20, 512 << 10), "{policy}");
        let after = engine.stats();
        assert_eq!(after.hit_pages - before.hit_pages, 128, "{policy}");
        assert_eq!(after.cancelled_requests, 0, "{policy}");
    }
}

/// A prefetch dropped at once takes back what still waits in the backend's queue: with one
/// pool thread and 64 requests, most never reach the device, and the pages they claimed are
/// absent again (nothing stays in flight; reads of them are right).
#[test]
fn a_dropped_prefetch_cancels_what_has_not_reached_the_device() {
    let path = make_file("cancel", 16 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    let engine = Engine::builder()
        .backend(BackendChoice::THREADS)
        .threads(1)
        .policy("none")
        .budget(64 << 20)
        .io_max_kb(256)
        .build()
        .unwrap();
    let file = engine.open(&path).unwrap();
    let p = file.prefetch(&[(0, 16 << 20)]);
    assert_eq!(p.requests(), 64);
    drop(p);
    let s = engine.stats();
    assert!(
        s.cancelled_requests >= 32,
        "cancelled {}",
        s.cancelled_requests
    );
    assert!(settles(&engine), "pages left in flight");
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(file.read_at(&mut buf, 15 << 20).unwrap(), 1 << 20);
    assert!(buf == pread(&reference, 15 << 20, 1 << 20));
}

/// A read stream of cold blocks looks further ahead as its reads need I/O, and of cached ones
/// falls back to one.
#[test]
fn a_read_stream_looks_further_ahead_while_reads_need_io() {
    let path = make_file("distance", 8 << 20);
    let engine = engine(BackendChoice::URING, "none", 64 << 20);
    let file = engine.open(&path).unwrap();
    let blocks: Vec<(u64, usize)> = (0..64).map(|b| (b * 3 * 8192, 8192)).collect();
    let mut stream = file.read_stream(blocks.clone());
    stream.next().unwrap().unwrap();
    let cold = stream.distance();
    assert!(cold >= 32, "distance after cold reads: {cold}");
    for b in stream {
        b.unwrap();
    }
    let mut again = file.read_stream(blocks);
    again.next().unwrap().unwrap();
    assert_eq!(again.distance(), 1, "all cached: no look-ahead");
}

/// Per-open options: a policy by name, caps, a block size every request is aligned to, and
/// clear errors for a bad block size or policy name.
#[test]
fn open_options_set_policy_caps_and_block_alignment() {
    let path = make_file("options", 4 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    let engine = engine(BackendChoice::URING, "adaptive", 64 << 20);
    let file = OpenOptions::new()
        .policy("none")
        .block_size(16 << 10)
        .open(&engine, &path)
        .unwrap();
    let mut buf = vec![0u8; 100];
    for off in [5000u64, 70_000, 1 << 20, (4 << 20) - 50] {
        let n = file.read_at(&mut buf, off).unwrap();
        assert!(buf[..n] == pread(&reference, off, 100)[..]);
    }
    let log = engine.request_log();
    assert_eq!(log.len(), 4, "policy none: one request per read: {log:?}");
    for r in &log {
        assert_eq!(r.first_page % 4, 0, "{r:?}");
        assert_eq!((r.first_page + r.pages) % 4, 0, "{r:?}");
        assert!(!r.ahead);
    }
    for bad in [0u64, 1000, 6000] {
        let e = OpenOptions::new()
            .block_size(bad)
            .open(&engine, &path)
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad}: {e}");
    }
    let e = OpenOptions::new()
        .policy("no-such")
        .open(&engine, &path)
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("no-such"), "{e}");
    // A window cap: `fixed` reads exactly its window ahead.
    let capped = OpenOptions::new()
        .policy("fixed")
        .window_max(64 << 10)
        .open(&engine, make_file("options-2", 1 << 20))
        .unwrap();
    engine.take_request_log();
    capped.read_at(&mut buf, 0).unwrap();
    let log = engine.take_request_log();
    assert!(log.iter().all(|r| r.pages <= 16), "{log:?}");
}

/// A policy value of the caller's own drives the file.
#[test]
fn a_policy_value_drives_the_file() {
    let path = make_file("value", 1 << 20);
    let engine = engine(BackendChoice::URING, "adaptive", 64 << 20);
    let config = ahead::PolicyConfig::new(8, 8)
        .with_fixed_pages(8)
        .with_folio_max_order(0);
    let policy = ahead::policy::by_name("fixed", config).unwrap();
    let file = OpenOptions::new()
        .policy_value(policy)
        .open(&engine, &path)
        .unwrap();
    let mut buf = vec![0u8; 4096];
    file.read_at(&mut buf, 0).unwrap();
    let log = engine.request_log();
    assert!(log.iter().any(|r| r.ahead && r.pages == 8), "{log:?}");
}

/// A descriptor the caller opened (without O_DIRECT) is read with O_DIRECT through one of the
/// engine's own, every byte right; a write-only one is refused.
#[test]
fn open_from_a_descriptor() {
    let path = make_file("fd", 3 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    let engine = engine(BackendChoice::URING, "adaptive", 64 << 20);
    let fd: OwnedFd = std::fs::File::open(&path).unwrap().into();
    let file = engine.open_fd(fd, "table.dat", OpenOptions::new()).unwrap();
    assert!(file.is_direct());
    assert_eq!(file.len(), 3 << 20);
    let mut buf = vec![0u8; 100_000];
    let n = file.read_at(&mut buf, 12345).unwrap();
    assert!(buf[..n] == pread(&reference, 12345, 100_000)[..]);
    let wo: OwnedFd = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .into();
    let e = engine.open_fd(wo, "w.dat", OpenOptions::new()).unwrap_err();
    assert!(e.to_string().contains("w.dat"), "{e}");
}

/// Idle handles take no share of the readahead budget: with 10,000 handles open and never
/// read, a scanned file has the share it has alone; a handle read joins, and leaves once idle.
#[test]
fn idle_handles_take_no_share_of_the_budget() {
    let engine = engine(BackendChoice::URING, "adaptive", 512 << 20);
    let big = dir().join("sparse-64m");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let scanned = make_file("scanned", 8 << 20);
    let alone = {
        let f = engine.open(&scanned).unwrap();
        let mut buf = [0u8; 4096];
        f.read_at(&mut buf, 0).unwrap();
        engine.stats().readahead_share_bytes
    };
    let idle: Vec<_> = (0..10_000).map(|_| engine.open(&big).unwrap()).collect();
    let f = engine.open(&scanned).unwrap();
    let mut buf = [0u8; 4096];
    f.read_at(&mut buf, 4096).unwrap();
    let s = engine.stats();
    assert_eq!(s.readahead_share_bytes, alone, "10,000 idle handles");
    assert_eq!(s.active_handles, 1);
    // Read one of the idle ones: two share now.
    idle[0].read_at(&mut buf, 0).unwrap();
    assert_eq!(engine.stats().active_handles, 2);
    // Idle for longer than the limit, and a read of the scanned file sweeps it out.
    std::thread::sleep(std::time::Duration::from_millis(
        ahead::engine::IDLE_AFTER_MS + 300,
    ));
    f.read_at(&mut buf, 8192).unwrap();
    assert_eq!(engine.stats().active_handles, 1);
    drop(idle);
    drop(f);
    assert_eq!(engine.stats().active_handles, 0);
}

/// The engine's completions reaped by a tokio task, woken by the reactor when the ring's
/// descriptor turns readable (`Engine::completions`). What it has reaped so far.
fn reap_in_the_reactor(completions: ahead::Completions) -> Arc<std::sync::atomic::AtomicUsize> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{unix::AsyncFd, Interest};
    let reaped = Arc::new(AtomicUsize::new(0));
    let total = reaped.clone();
    tokio::spawn(async move {
        // SAFETY: the ring's descriptor stays open, and the same, while `completions` lives.
        let ring =
            unsafe { AsyncFd::register_with_interest(completions, Interest::READABLE) }.unwrap();
        while let Ok(mut ready) = ring.readable().await {
            ready.clear_ready();
            total.fetch_add(ring.get_ref().reap(), Ordering::Relaxed);
        }
    });
    reaped
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// With the engine's completions reaped in tokio's reactor, async reads (direct and
    /// through the cache) from many tasks, and blocking reads from threads beside them, return
    /// what pread does; the reactor's task reaped reads; the counts add up.
    #[test]
    fn reads_reaped_in_the_callers_loop_equal_pread(
        size in 5000usize..4_000_000,
        tasks in 1usize..=16,
        threads in 0usize..=3,
        workers in 1usize..=2,
        seed in any::<u64>(),
    ) {
        let path = make_file(&format!("reactor-{size}"), size);
        let engine = engine(BackendChoice::URING, "adaptive", 1 << 20);
        let Some(completions) = engine.completions() else {
            // Only where io_uring is refused, which stats() names.
            prop_assert_ne!(engine.stats().backend, "uring");
            return Ok(());
        };
        let file = Arc::new(engine.open(&path).unwrap());
        let reference = Arc::new(std::fs::File::open(&path).unwrap());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_io()
            .build()
            .unwrap();
        let (wrong, reaped) = rt.block_on(async {
            let reaped = reap_in_the_reactor(completions);
            let blocking: Vec<_> = (0..threads)
                .map(|t| {
                    let (file, reference) = (file.clone(), reference.clone());
                    std::thread::spawn(move || {
                        let mut wrong = 0;
                        for (off, len) in ranges(size as u64, 30, seed ^ (100 + t as u64)) {
                            let mut buf = vec![0xEEu8; len];
                            let n = file.read_at(&mut buf, off).unwrap();
                            wrong += usize::from(buf[..n] != pread(&reference, off, len)[..]);
                        }
                        wrong
                    })
                })
                .collect();
            let mut handles = Vec::new();
            for t in 0..tasks {
                let (file, reference) = (file.clone(), reference.clone());
                handles.push(tokio::spawn(async move {
                    let mut wrong = 0;
                    let mut next = rng(seed ^ t as u64);
                    for (off, len) in ranges(size as u64, 10, seed ^ t as u64) {
                        let mut buf = vec![0xEEu8; len];
                        let n = file.read_at_async(&mut buf, off).await.unwrap();
                        wrong += usize::from(buf[..n] != pread(&reference, off, len)[..]);
                        let off = next() % (size as u64 / 4096 + 1) * 4096;
                        let len = (1 + next() % 8) as usize * 4096;
                        let (got, buf) = file.read_direct(ahead::AlignedBuf::new(len), off).await;
                        let n = got.unwrap();
                        let want = pread(&reference, off, len);
                        wrong += usize::from(n != want.len() || buf.as_slice()[..n] != want[..]);
                    }
                    wrong
                }));
            }
            let mut wrong = 0;
            for h in handles {
                wrong += h.await.unwrap();
            }
            for b in blocking {
                wrong += b.join().unwrap();
            }
            (wrong, reaped)
        });
        prop_assert_eq!(wrong, 0);
        prop_assert!(settles(&engine), "pages left in flight");
        // Each task's direct reads went to the device: at least one completion per task was
        // there to reap, and the reactor's task reaped them rather than the reaper thread.
        let reaped = reaped.load(std::sync::atomic::Ordering::Relaxed);
        prop_assert!(reaped >= tasks, "the reactor reaped {} reads for {} tasks", reaped, tasks);
        let s = engine.stats();
        prop_assert_eq!(s.read_latency.count, s.reads);
        drop(rt);
    }
}

/// A caller that takes the completions and never reaps them delays reads by the reaper's
/// backstop, a few milliseconds, and never hangs them; dropping it gives the completions back
/// to the reaper. Backends with no completion queue have none to give.
#[test]
fn completions_left_unreaped_delay_reads_and_never_hang_them() {
    use std::time::{Duration, Instant};
    let path = make_file("reactor-stalled", 4 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    for backend in [BackendChoice::THREADS, BackendChoice::SYNC] {
        assert!(
            engine(backend, "none", 1 << 20).completions().is_none(),
            "{backend:?}"
        );
    }
    let engine = engine(BackendChoice::URING, "none", 1 << 20);
    let Some(completions) = engine.completions() else {
        assert_ne!(engine.stats().backend, "uring");
        eprintln!(
            "skipped: io_uring refused here ({:?})",
            engine.stats().fallbacks
        );
        return;
    };
    let file = engine.open(&path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read = |off: u64| {
        let (got, buf) = rt.block_on(file.read_direct(ahead::AlignedBuf::new(8192), off));
        assert_eq!(got.unwrap(), 8192);
        assert_eq!(buf.as_slice(), &pread(&reference, off, 8192)[..]);
    };
    // Nobody reaps: each read waits for the backstop (two ticks of 2 ms at most, and the
    // reaper's wake), and lands.
    let started = Instant::now();
    for k in 0..20u64 {
        read(k * 65536);
    }
    let stalled = started.elapsed();
    assert!(
        stalled < Duration::from_secs(2),
        "20 reads took {stalled:?}"
    );
    assert_eq!(completions.reap(), 0, "the reaper took them all");
    // Blocking reads, and readahead, likewise.
    let mut buf = vec![0u8; 100_000];
    let n = file.read_at(&mut buf, 1_234_567).unwrap();
    assert_eq!(buf[..n], pread(&reference, 1_234_567, 100_000)[..]);
    // The reads did wait for the backstop: not one of them was answered at once by a reaper
    // waiting in the kernel (a direct read takes well under 2 ms here, against at least one
    // tick of the backstop once the reaper sleeps).
    assert!(
        stalled >= Duration::from_millis(20),
        "20 reads in {stalled:?}: the reaper did not stand back"
    );
    drop(completions);
    // The reaper waits in the kernel again: the same reads, quicker than the backstop allows.
    let started = Instant::now();
    for k in 20..40u64 {
        read(k * 65536);
    }
    let after = started.elapsed();
    assert!(
        after < stalled,
        "{after:?} with the reaper back, {stalled:?} without"
    );
}
