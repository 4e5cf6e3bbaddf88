//! The engine on real files: every byte equals what pread(2) returns, for every backend and
//! policy, from many threads, under a budget small enough to evict; bad input gets the right
//! error or fallback; the budget holds.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ahead::engine::{Advice, BackendChoice, Engine, FallbackKind};
use proptest::prelude::*;

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("engine-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A file of `size` bytes whose every 8-byte word says where it is (so a wrong offset shows).
fn make_file(name: &str, size: u64) -> PathBuf {
    let path = dir().join(name);
    if std::fs::metadata(&path).map(|m| m.len()).ok() == Some(size) {
        return path;
    }
    let mut data = Vec::with_capacity(size as usize);
    let mut w = 0u64;
    while (data.len() as u64) < size {
        data.extend_from_slice(&(w.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ w).to_le_bytes());
        w += 1;
    }
    data.truncate(size as usize);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, &data).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn engine(backend: BackendChoice, policy: &str, budget: u64) -> Engine {
    Engine::builder()
        .backend(backend)
        .policy(policy)
        .budget(budget)
        .threads(8)
        .build()
        .unwrap()
}

const BACKENDS: [BackendChoice; 3] = [
    BackendChoice::URING,
    BackendChoice::THREADS,
    BackendChoice::SYNC,
];

/// Compare one read through the engine with pread of the same range.
fn check_read(file: &ahead::engine::File, reference: &std::fs::File, offset: u64, len: usize) {
    let mut got = vec![0xAAu8; len];
    let mut want = vec![0x55u8; len];
    let n = file.read_at(&mut got, offset).unwrap();
    let mut m = 0;
    while m < len {
        let k = reference
            .read_at(&mut want[m..], offset + m as u64)
            .unwrap();
        if k == 0 {
            break;
        }
        m += k;
    }
    assert_eq!(n, m, "bytes returned at offset {offset}, len {len}");
    assert!(
        got[..n] == want[..m],
        "bytes differ at offset {offset}, len {len}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random reads from 1-16 threads, sizes that are not page multiples, reads past the end,
    /// a 1 MiB budget (so pages are evicted and read again), every backend, several policies.
    #[test]
    fn every_byte_equals_pread(
        size in prop_oneof![Just(0u64), 1u64..5000, 5000u64..3_000_000],
        backend in 0usize..3,
        policy in prop::sample::select(vec!["adaptive", "linux-ondemand", "none", "fixed", "pratt"]),
        threads in 1usize..=16,
        seed in any::<u64>(),
    ) {
        let path = make_file(&format!("prop-{size}"), size);
        let engine = engine(BACKENDS[backend], policy, 1 << 20);
        let file = Arc::new(engine.open(&path).unwrap());
        let reference = Arc::new(std::fs::File::open(&path).unwrap());
        std::thread::scope(|s| {
            for t in 0..threads {
                let (file, reference) = (file.clone(), reference.clone());
                s.spawn(move || {
                    let mut rng = seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    let mut next = move || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng
                    };
                    let mut offset = next() % (size + 10_000);
                    for _ in 0..40 {
                        let len = match next() % 4 {
                            0 => (next() % 300_000) as usize,
                            1 => 4096,
                            2 => (next() % 5000) as usize,
                            _ => 1,
                        };
                        check_read(&file, &reference, offset, len);
                        // Mostly sequential runs, some jumps (forward, backward, past the end).
                        offset = if next() % 4 == 0 {
                            next() % (size + 10_000)
                        } else {
                            offset + len as u64
                        };
                    }
                });
            }
        });
        let stats = engine.stats();
        prop_assert_eq!(stats.io_errors, 0);
        prop_assert!(stats.resident_pages <= 256, "{:?}", stats);
    }
}

#[test]
fn a_whole_file_read_in_odd_pieces_is_the_file() {
    let size = 9 * 1024 * 1024 + 123;
    let path = make_file("whole", size);
    let want = std::fs::read(&path).unwrap();
    for backend in BACKENDS {
        for policy in ["adaptive", "linux-ondemand", "none"] {
            let engine = engine(backend, policy, 2 << 20);
            let mut file = engine.open(&path).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 12_345];
            loop {
                let n = file.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert!(got == want, "{backend:?} {policy}");
            // Backward, with Seek.
            file.seek(SeekFrom::End(-5000)).unwrap();
            let mut tail = vec![0u8; 6000];
            assert_eq!(file.read(&mut tail).unwrap(), 5000);
            assert!(tail[..5000] == want[want.len() - 5000..]);
        }
    }
}

/// One read of three times the cache, at an odd offset, on every backend and policy: the
/// reader asks for the rest of its read a quarter of the cache at a time, so no page is evicted
/// before it is copied, and every byte is the file's.
#[test]
fn a_read_larger_than_the_cache_is_read_whole() {
    let budget = 1u64 << 20;
    let size = 4 * budget + 777;
    let path = make_file("larger-than-cache", size);
    let reference = std::fs::File::open(&path).unwrap();
    for backend in BACKENDS {
        for policy in ["adaptive", "linux-ondemand", "none"] {
            let engine = engine(backend, policy, budget);
            let file = engine.open(&path).unwrap();
            check_read(&file, &reference, 12_345, 3 * budget as usize);
            let stats = engine.stats();
            assert_eq!(stats.io_errors, 0, "{backend:?} {policy}");
            assert!(
                stats.resident_pages <= budget / 4096,
                "{backend:?} {policy}: {stats:?}"
            );
        }
    }
}

#[test]
fn sequential_reads_are_read_ahead_in_large_requests() {
    let path = make_file("seq-8m", 8 << 20);
    for backend in [BackendChoice::URING, BackendChoice::THREADS] {
        let engine = engine(backend, "adaptive", 64 << 20);
        let file = engine.open(&path).unwrap();
        let mut buf = vec![0u8; 4096];
        for i in 0..2048u64 {
            assert_eq!(file.read_at(&mut buf, i * 4096).unwrap(), 4096);
        }
        let s = engine.stats();
        assert_eq!(s.pages_read, 2048, "{s:?}");
        // 2048 pages in 4 KiB reads: far fewer requests than reads, nearly all ahead.
        assert!(s.requests <= 40, "{s:?}");
        assert!(s.sync_requests <= 2, "{s:?}");
        assert_eq!(
            s.backend,
            if backend == BackendChoice::URING {
                "uring"
            } else {
                "threads"
            }
        );
    }
}

#[test]
fn two_opens_of_one_file_share_its_pages() {
    let path = make_file("shared-1m", 1 << 20);
    let engine = engine(BackendChoice::AUTO, "none", 16 << 20);
    let a = engine.open(&path).unwrap();
    let b = engine.open(&path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(a.read_at(&mut buf, 0).unwrap(), 1 << 20);
    let before = engine.stats();
    assert_eq!(b.read_at(&mut buf, 0).unwrap(), 1 << 20);
    let after = engine.stats();
    assert_eq!(
        after.pages_read, before.pages_read,
        "the second open read nothing"
    );
    assert_eq!(after.hit_pages - before.hit_pages, 256);
    // And a later open too, after both closed (same size and mtime: same pages).
    drop((a, b));
    let c = engine.open(&path).unwrap();
    assert_eq!(c.read_at(&mut buf, 0).unwrap(), 1 << 20);
    assert_eq!(engine.stats().pages_read, before.pages_read);
}

#[test]
fn random_reads_with_policy_none_read_exactly_what_is_asked() {
    let path = make_file("rand-16m", 16 << 20);
    let engine = engine(BackendChoice::AUTO, "none", 64 << 20);
    let file = engine.open(&path).unwrap();
    let mut buf = vec![0u8; 4096];
    for i in 0..500u64 {
        let page = (i * 7919) % 4096;
        file.read_at(&mut buf, page * 4096).unwrap();
    }
    let s = engine.stats();
    assert_eq!(s.requests, s.pages_read);
    assert_eq!(s.ahead_requests, 0);
}

#[test]
fn the_budget_is_never_exceeded_by_the_cache() {
    let path = make_file("budget-24m", 24 << 20);
    let engine = engine(BackendChoice::AUTO, "adaptive", 1 << 20);
    let file = engine.open(&path).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let mut off = 0;
    while off < 24 << 20 {
        off += file.read_at(&mut buf, off).unwrap() as u64;
        assert!(engine.stats().resident_pages <= 256);
    }
}

#[test]
fn will_need_reads_a_range_and_dont_need_drops_it() {
    let path = make_file("advice-4m", 4 << 20);
    let engine = engine(BackendChoice::AUTO, "adaptive", 16 << 20);
    let file = engine.open(&path).unwrap();
    file.advise(Advice::WillNeed {
        offset: 1 << 20,
        len: 1 << 20,
    })
    .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(file.read_at(&mut buf, 1 << 20).unwrap(), 1 << 20);
    let s = engine.stats();
    assert_eq!(s.pages_read, 256, "{s:?}");
    assert_eq!(s.sync_requests, 0, "{s:?}");
    file.advise(Advice::DontNeed {
        offset: 1 << 20,
        len: 1 << 20,
    })
    .unwrap();
    assert_eq!(engine.stats().resident_pages, 0);
    let reference = std::fs::File::open(&path).unwrap();
    check_read(&file, &reference, 1 << 20, 1 << 20);
    // "To the end" written as the largest length: drops what is cached, and returns at once
    // (it once walked every page number up to 2^52).
    let t = std::time::Instant::now();
    file.advise(Advice::DontNeed {
        offset: 0,
        len: u64::MAX,
    })
    .unwrap();
    assert!(
        t.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(engine.stats().resident_pages, 0);
    check_read(&file, &reference, 0, 4 << 20);
    // And will-need to the end: reads what the file has, no more.
    file.advise(Advice::DontNeed {
        offset: 0,
        len: u64::MAX,
    })
    .unwrap();
    let before = engine.stats().pages_read;
    file.advise(Advice::WillNeed {
        offset: 0,
        len: u64::MAX,
    })
    .unwrap();
    check_read(&file, &reference, 0, 4 << 20);
    assert!(engine.stats().pages_read - before <= 1024);
}

#[test]
fn bad_paths_get_clear_errors() {
    let engine = Engine::new().unwrap();
    let e = engine.open("/nonexistent/ahead-test").err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("/nonexistent/ahead-test"), "{e}");
    let e = engine.open(dir()).err().unwrap();
    assert!(e.to_string().contains("Is a directory"), "{e}");
    let fifo = dir().join("fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let e = engine.open(&fifo).err().unwrap();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn an_empty_file_reads_as_empty() {
    let path = make_file("empty", 0);
    for backend in BACKENDS {
        let engine = engine(backend, "adaptive", 1 << 20);
        let mut file = engine.open(&path).unwrap();
        let mut buf = [0u8; 100];
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), 0);
        assert_eq!(file.read(&mut buf).unwrap(), 0);
        assert_eq!(engine.stats().requests, 0);
    }
}

#[test]
fn without_io_uring_the_engine_falls_back_to_threads_and_says_why() {
    let path = make_file("fallback-1m", 1 << 20);
    let engine = Engine::builder().without_io_uring().build().unwrap();
    let s = engine.stats();
    assert_eq!(s.backend, "threads");
    assert!(
        s.fallbacks
            .iter()
            .any(|f| f.kind == FallbackKind::Backend && f.message.contains("io_uring unavailable")),
        "{s:?}"
    );
    let file = engine.open(&path).unwrap();
    let reference = std::fs::File::open(&path).unwrap();
    check_read(&file, &reference, 0, 1 << 20);
}

/// A filesystem that refuses O_DIRECT: ramfs (tmpfs takes O_DIRECT since Linux 6.6). Needs
/// root to mount; skipped with a message otherwise.
#[test]
fn a_filesystem_without_o_direct_is_read_buffered_and_says_so() {
    let mnt = dir().join("ramfs");
    std::fs::create_dir_all(&mnt).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "ramfs", "ramfs"])
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot mount ramfs here (needs root)");
        return;
    }
    let path = mnt.join("f");
    std::fs::write(&path, vec![7u8; 10_000]).unwrap();
    let result = std::panic::catch_unwind(|| {
        let engine = Engine::new().unwrap();
        let file = engine.open(&path).unwrap();
        assert!(!file.is_direct());
        let mut buf = vec![0u8; 20_000];
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), 10_000);
        assert!(buf[..10_000].iter().all(|&b| b == 7));
        let s = engine.stats();
        assert!(
            s.fallbacks
                .iter()
                .any(|f| f.kind == FallbackKind::Buffered && f.message.contains("O_DIRECT refused")),
            "{s:?}"
        );
    });
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    result.unwrap();
}

#[test]
fn tmpfs_files_read_correctly_whichever_way_they_are_opened() {
    let Ok(dir) = tempdir_in("/dev/shm") else {
        eprintln!("skipped: no /dev/shm");
        return;
    };
    let path = dir.join("f");
    let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let engine = Engine::new().unwrap();
    let file = engine.open(&path).unwrap();
    let mut buf = vec![0u8; 60_000];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 50_000);
    assert!(buf[..50_000] == data[..]);
    let s = engine.stats();
    // Either O_DIRECT (Linux 6.6+ tmpfs) or the fallback, and then it says so.
    assert!(file.is_direct() || s.fallbacks.iter().any(|f| f.kind == FallbackKind::Buffered));
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir_in(base: &str) -> std::io::Result<PathBuf> {
    let d = Path::new(base).join(format!("ahead-test-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

#[test]
fn an_unknown_policy_or_a_tiny_budget_is_refused_at_build() {
    let e = Engine::builder().policy("nope").build().err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = Engine::builder().policy("oracle").build().err().unwrap();
    assert!(e.to_string().contains("oracle"), "{e}");
    let e = Engine::builder().budget(4096).build().err().unwrap();
    assert!(e.to_string().contains("too small"), "{e}");
}

#[test]
fn forgetting_the_device_estimate_returns_to_a_new_engines() {
    let path = make_file("estimate-16m", 16 << 20);
    let fresh = engine(BackendChoice::AUTO, "adaptive", 32 << 20);
    let start = fresh.device_estimate();
    let used = engine(BackendChoice::AUTO, "adaptive", 32 << 20);
    let file = used.open(&path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < 16 << 20 {
        off += file.read_at(&mut buf, off).unwrap() as u64;
    }
    // 16 MiB read in large requests: the bandwidth, at least, has been measured.
    assert_ne!(used.device_estimate(), start);
    used.forget_device_estimate();
    assert_eq!(used.device_estimate(), start);
}

#[test]
fn a_reader_that_catches_up_with_queued_readahead_reads_it_itself() {
    // Will-need of 64 MiB queues far more than the device is given at once (the ring's bytes in
    // flight, the pool's threads). A read of the last page at once finds its request still
    // queued: it takes it back and reads it in its own thread, rather than waiting behind all
    // the others. Every page is still read once, and the bytes are the file's.
    let path = make_file("expedite-64m", 64 << 20);
    let reference = std::fs::File::open(&path).unwrap();
    for backend in [BackendChoice::URING, BackendChoice::THREADS] {
        // The cache's memory is faulted in (and registered with io_uring) as reads first reach
        // it, and given back when its pages are dropped; on fresh memory that takes longer
        // than the device takes to read 64 MiB, and no read would still be queued. An engine
        // built to pretouch holds it warm, as a running engine's is; read once, and start cold.
        let engine = Engine::builder()
            .backend(backend)
            .policy("adaptive")
            .budget(128 << 20)
            .threads(8)
            .pretouch(true)
            .build()
            .unwrap();
        let file = engine.open(&path).unwrap();
        check_read(&file, &reference, 0, 64 << 20);
        file.advise(Advice::DontNeed {
            offset: 0,
            len: 64 << 20,
        })
        .unwrap();
        let warm = engine.stats();
        file.advise(Advice::WillNeed {
            offset: 0,
            len: 64 << 20,
        })
        .unwrap();
        check_read(&file, &reference, (64 << 20) - 4096, 4096);
        let s = engine.stats();
        assert!(
            s.expedited_requests > warm.expedited_requests,
            "{backend:?}: {s:?}"
        );
        check_read(&file, &reference, 0, 64 << 20);
        let s = engine.stats();
        assert_eq!(
            s.pages_read - warm.pages_read,
            (64 << 20) / 4096,
            "{backend:?}: {s:?}"
        );
        assert_eq!(s.sync_requests, warm.sync_requests, "{backend:?}: {s:?}");
    }
}

#[test]
fn memory_given_back_under_readers_changes_no_byte() {
    // Readers at random offsets while another thread drops every page, or a part of them, over
    // and over: each drop gives free memory back to the system, at the top of the arena when
    // nothing is in use there and below slots in use where whole units are free (and
    // io_uring's buffers over it are unregistered), and the next reads fault it in and register
    // it again. Every byte still equals pread's, on every backend.
    let path = make_file("give-back-48m", 48 << 20);
    let size = 48u64 << 20;
    for backend in BACKENDS {
        let engine = engine(backend, "adaptive", 64 << 20);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for t in 0..3u64 {
                let (engine, path, stop) = (&engine, &path, &stop);
                scope.spawn(move || {
                    let file = engine.open(path).unwrap();
                    let reference = std::fs::File::open(path).unwrap();
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                    for _ in 0..300 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Runs of sequential reads, so readahead fills the arena's top too.
                        let at = x % size;
                        for k in 0..8 {
                            check_read(&file, &reference, at + k * (256 << 10), 256 << 10);
                        }
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                    }
                });
            }
            let file = engine.open(&path).unwrap();
            for i in 0..40u64 {
                std::thread::sleep(std::time::Duration::from_millis(5));
                // Every page, or 20 MiB of them (free slots below slots in use, given back
                // too while the readers read on).
                let (offset, len) = if i % 2 == 0 {
                    (0, size)
                } else {
                    ((i * (7 << 20)) % (28 << 20), 20 << 20)
                };
                file.advise(Advice::DontNeed { offset, len }).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        // Idle (the last readahead landed), the whole file read, every page dropped: the
        // arena's memory goes back (the readers above keep slots in use near its top, so drops
        // under them give back only now and then), and a read of the whole file after it
        // (into memory faulted in and, for io_uring, registered again) returns its bytes.
        let idle = std::time::Instant::now();
        while engine.stats().in_flight_pages > 0 && idle.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let file = engine.open(&path).unwrap();
        let reference = std::fs::File::open(&path).unwrap();
        let read_whole = || {
            for at in (0..size).step_by(1 << 20) {
                check_read(&file, &reference, at, 1 << 20);
            }
        };
        read_whole();
        while engine.stats().in_flight_pages > 0 && idle.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let before = engine.stats().given_back_bytes;
        file.advise(Advice::DontNeed {
            offset: 0,
            len: size,
        })
        .unwrap();
        let s = engine.stats();
        assert!(
            s.given_back_bytes >= before + (16 << 20),
            "{backend:?}: {s:?}"
        );
        read_whole();
    }
}

/// `open_many` and `open_all` over local files: the files come in the list's order with their
/// own bytes, a missing one fails at its place (the others read on) or fails `open_all`, the
/// first bytes asked ahead stay within the budget.
#[test]
fn files_opened_ahead_come_in_order_and_a_missing_one_fails_at_its_place() {
    let paths: Vec<PathBuf> = (0..40)
        .map(|i| {
            let path = dir().join(format!("many-{i}"));
            std::fs::write(&path, [i as u8 + 1; 256 << 10]).unwrap();
            path
        })
        .collect();
    let budget = 8 << 20;
    let e = Engine::builder()
        .backend(BackendChoice::AUTO)
        .budget(budget)
        .build()
        .unwrap();
    let mut list: Vec<PathBuf> = paths.clone();
    list.insert(7, paths[0].with_file_name("many-missing"));
    let mut buf = vec![0u8; 256 << 10];
    let mut seen = 0;
    for (i, opened) in e.open_many(&list).enumerate() {
        match opened {
            Ok(file) => {
                let seed = paths.iter().position(|p| p == file.path()).unwrap() as u8 + 1;
                assert_eq!(file.path(), list[i]);
                assert_eq!(file.read_at(&mut buf, 0).unwrap(), buf.len());
                assert!(buf.iter().all(|&b| b == seed), "{}", file.path().display());
                assert!(e.stats().resident_pages <= budget / 4096);
                seen += 1;
            }
            Err(err) => {
                assert_eq!(i, 7, "{err}");
                assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
            }
        }
    }
    assert_eq!(seen, paths.len());
    // A file's first bytes are all of it (256 KiB, a sixteenth of the readahead half), and
    // the reader's file and the sixteen opened ahead do not fit that half at once: those
    // opened while it was taken get the rest as the files before them close, so no read
    // waits on a request of its own.
    let stats = e.stats();
    assert_eq!(stats.sync_requests, 0, "{stats}");
    let err = e.open_all(&list).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    let files = e.open_all(&paths).unwrap();
    for (k, file) in files.iter().enumerate().rev() {
        assert_eq!(file.path(), paths[k]);
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), buf.len());
        assert!(buf.iter().all(|&b| b == k as u8 + 1));
    }
    assert!(e.stats().resident_pages <= budget / 4096);
}

/// The namespace a mount and fsspec read names through: a local path is stated and listed by
/// the same calls as an object URL (`tests/remote.rs`), one level deep and sorted, a file
/// listing as itself; an entry opens without a second stat, and a directory does not open.
#[test]
fn local_names_are_stated_and_listed_as_objects_are() {
    let root = dir().join("namespace");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("b.bin"), [2u8; 20]).unwrap();
    std::fs::write(root.join("a.bin"), [1u8; 10]).unwrap();
    let engine = engine(BackendChoice::THREADS, "adaptive", 8 << 20);
    let a = engine.stat(root.join("a.bin")).unwrap();
    assert_eq!((a.size, a.is_dir, a.e_tag.clone()), (10, false, None));
    assert!(a.modified_ns > 0);
    let listed: Vec<(String, u64, bool)> = engine
        .list(&root)
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.size, e.is_dir))
        .collect();
    let name = |n: &str| root.join(n).to_string_lossy().into_owned();
    assert_eq!(
        listed,
        [
            (name("a.bin"), 10, false),
            (name("b.bin"), 20, false),
            (name("sub"), 0, true)
        ]
    );
    assert_eq!(
        engine.list(root.join("a.bin")).unwrap(),
        std::slice::from_ref(&a)
    );
    let mut buf = [0u8; 16];
    assert_eq!(
        engine.open_entry(&a).unwrap().read_at(&mut buf, 0).unwrap(),
        10
    );
    assert_eq!(buf[..10], [1; 10]);
    let sub = engine.stat(root.join("sub")).unwrap();
    assert_eq!(
        engine.open_entry(&sub).unwrap_err().kind(),
        std::io::ErrorKind::IsADirectory
    );
    let err = engine.stat(root.join("missing")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("missing"), "{err}");
    assert_eq!(
        engine.list(root.join("missing")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
}

/// A name with a scheme no kind of source reads is refused by name, listing the kinds (and
/// never showing a password in it), not looked for as a relative path; a local name with a
/// colon in it is still a local path.
#[test]
fn an_unknown_scheme_is_refused_by_name() {
    let engine = engine(BackendChoice::THREADS, "adaptive", 8 << 20);
    for name in ["ftp://user:hunter2@host/f", "gs://bucket/key", "file+x://a"] {
        let err = engine.open(name).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{name}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("no kind of source reads this") && text.contains("local"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(
            engine.stat(name).unwrap_err().kind(),
            std::io::ErrorKind::Unsupported
        );
    }
    let local = dir().join("a:b");
    std::fs::write(&local, b"colon").unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(
        engine.open(&local).unwrap().read_at(&mut buf, 0).unwrap(),
        5
    );
    assert!(engine.open("3d://not-a-scheme").unwrap_err().kind() == std::io::ErrorKind::NotFound);
}
