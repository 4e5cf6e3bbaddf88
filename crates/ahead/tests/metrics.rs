//! What the engine reports: each file's figures beside the engine's, latency histograms, the
//! bounded request log, one set of counter names with the simulator; and the small parts of the
//! file API an embedder expects of `std::fs::File` (`read_exact_at`, the descriptor).

use std::path::PathBuf;

use ahead::engine::{BackendChoice, Engine, OpenOptions};

mod common;

fn data_file(name: &str, size: usize) -> PathBuf {
    common::seeded_file("metrics-tests", name, size)
}

fn sync_engine(policy: &str) -> Engine {
    Engine::builder()
        .backend(BackendChoice::SYNC)
        .policy(policy)
        .budget(64 << 20)
        .build()
        .unwrap()
}

/// Two files read differently: each file's figures are its own, and they add up to the
/// engine's.
///
/// | file | reads                        | policy            | sync | ahead | pages read |
/// |------|------------------------------|-------------------|------|-------|------------|
/// | a    | 40 x 4 KiB, every other page | none              | 40   | 0     | 40         |
/// | b    | 10 x 16 KiB, 256 KiB apart   | fixed, 64 KiB win | 10   | 10    | 200        |
#[test]
fn each_files_figures_are_its_own_and_add_up_to_the_engines() {
    let (a_path, b_path) = (data_file("a", 1 << 20), data_file("b", 4 << 20));
    let engine = sync_engine("none");
    let a = engine.open(&a_path).unwrap();
    let b = OpenOptions::new()
        .policy("fixed")
        .window_max(64 << 10)
        .record_latency(true)
        .open(&engine, &b_path)
        .unwrap();
    let mut buf = vec![0u8; 16 << 10];
    for i in 0..40u64 {
        a.read_exact_at(&mut buf[..4096], i * 8192).unwrap();
    }
    for i in 0..10u64 {
        b.read_exact_at(&mut buf, i * (256 << 10)).unwrap();
    }
    let (fa, fb, s) = (a.stats(), b.stats(), engine.stats());
    assert_eq!(fa.path, a_path.display().to_string());
    assert_eq!((fa.reads, fa.bytes_returned), (40, 40 * 4096));
    // A local file's pages land in the cache from the device: one copy a byte, out to the
    // reader.
    assert_eq!(fa.copied_bytes, fa.bytes_returned);
    assert_eq!(
        (
            fa.requests,
            fa.sync_requests,
            fa.ahead_requests,
            fa.pages_read
        ),
        (40, 40, 0, 40)
    );
    assert_eq!(
        (fb.reads, fb.sync_requests, fb.ahead_requests, fb.pages_read),
        (10, 10, 10, 200)
    );
    for (name, file, engine) in [
        ("reads", fa.reads + fb.reads, s.reads),
        ("requests", fa.requests + fb.requests, s.requests),
        ("pages_read", fa.pages_read + fb.pages_read, s.pages_read),
        ("hit_pages", fa.hit_pages + fb.hit_pages, s.hit_pages),
        ("miss_pages", fa.miss_pages + fb.miss_pages, s.miss_pages),
        (
            "bytes_returned",
            fa.bytes_returned + fb.bytes_returned,
            s.bytes_returned,
        ),
        (
            "copied_bytes",
            fa.copied_bytes + fb.copied_bytes,
            s.copied_bytes,
        ),
    ] {
        assert_eq!(file, engine, "{name}: files' sum vs the engine's");
    }
    // A histogram only where the open asked for one; the engine's counts every read.
    assert_eq!(fa.read_latency, None);
    let lb = fb.read_latency.expect("b's open asked for its latencies");
    assert_eq!(lb.count, 10);
    assert!(
        lb.p50_us >= 1 && lb.p50_us <= lb.p99_us && lb.p99_us <= lb.max_us,
        "{lb:?}"
    );
    assert_eq!(s.read_latency.count, 50);
    assert_eq!(s.request_latency.count, s.requests);
    // A second open of b shares its pages, and so its figures.
    let b2 = engine.open(&b_path).unwrap();
    b2.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(b2.stats().reads, 11);
}

/// The request log keeps the latest requests up to its limit and counts what it dropped.
///
/// | policy | reads      | limit | kept         | dropped |
/// |--------|------------|-------|--------------|---------|
/// | none   | 50 x 4 KiB | 10    | pages 40..50 | 40      |
#[test]
fn the_request_log_keeps_the_latest_requests_within_its_limit() {
    let path = data_file("log", 1 << 20);
    let engine = Engine::builder()
        .backend(BackendChoice::SYNC)
        .policy("none")
        .record_requests(true)
        .request_log_limit(10)
        .build()
        .unwrap();
    let file = engine.open(&path).unwrap();
    let mut buf = [0u8; 4096];
    for page in 0..50u64 {
        file.read_exact_at(&mut buf, page * 4096).unwrap();
    }
    let log = engine.request_log();
    assert_eq!(
        log.iter().map(|r| r.first_page).collect::<Vec<_>>(),
        (40..50).collect::<Vec<_>>()
    );
    assert_eq!(engine.stats().request_log_dropped, 40);
    assert_eq!(engine.take_request_log().len(), 10);
    assert!(engine.request_log().is_empty());
}

/// The engine's stats and the simulator's metrics share their counters' names (the JSON the
/// CLI prints keeps the simulator's old `read_requests` and `async_requests` beside them).
#[test]
fn the_engine_and_the_simulator_name_their_counters_alike() {
    let path = data_file("names", 1 << 20);
    let engine = sync_engine("fixed");
    let file = engine.open(&path).unwrap();
    file.read_exact_at(&mut [0u8; 4096], 0).unwrap();
    let stats = serde_json::to_value(engine.stats()).unwrap();
    let pattern = ahead::pattern::Pattern::parse("seq:size=1m,bs=4k").unwrap();
    let report = ahead::sim::run("fixed", ahead::SimConfig::default(), pattern.workload()).unwrap();
    let metrics = serde_json::to_value(&report.faithful).unwrap();
    for name in [
        "requests",
        "sync_requests",
        "ahead_requests",
        "pages_read",
        "wasted_pages",
        "thrashed_pages",
        "hit_pages",
        "miss_pages",
        "avg_request_pages",
        "stall_ms",
    ] {
        assert!(stats.get(name).is_some(), "engine stats lack {name}");
        assert!(metrics.get(name).is_some(), "simulator metrics lack {name}");
    }
    assert_eq!(metrics["read_requests"], metrics["requests"]);
    assert_eq!(metrics["async_requests"], metrics["ahead_requests"]);
    // Every page asked for is a hit or a miss, in both.
    let m = &report.faithful;
    assert_eq!(m.hit_pages + m.miss_pages, m.pages_requested);
    let s = engine.stats();
    assert_eq!(s.hit_pages + s.miss_pages, 1);
}

/// `read_exact_at` fills the buffer or says where the file ended; `fd` gives the descriptor.
#[test]
fn read_exact_at_fills_the_buffer_or_fails_at_the_end() {
    let path = data_file("exact", 100_000);
    let reference = std::fs::File::open(&path).unwrap();
    let engine = sync_engine("adaptive");
    let file = engine.open(&path).unwrap();
    let mut buf = vec![0u8; 50_000];
    file.read_exact_at(&mut buf, 40_000).unwrap();
    assert!(buf == common::pread(&reference, 40_000, 50_000));
    let e = file.read_exact_at(&mut buf, 60_000).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("exact"), "{e}");
    let fd = file.fd().expect("a local file has a descriptor");
    let mut head = [0u8; 16];
    let n = ahead::os::pread(fd, &mut head, 0);
    // O_DIRECT may refuse an unaligned buffer; when it reads, it reads the file's bytes.
    if let Ok(n) = n {
        assert_eq!(head[..n], common::pread(&reference, 0, n)[..]);
    }
    assert!(format!("{file:?}").contains("exact"));
    assert!(format!("{engine:?}").contains("sync"));
}

/// The lease signal can be chosen before the first lease, must be a real-time signal, and
/// cannot change once the process takes lease breaks by one.
#[test]
fn the_lease_signal_is_a_real_time_one_and_the_processs_own() {
    let e = Engine::builder().lease_signal(10).build().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("real-time"), "{e}");
    // This installs the handler (the default signal: no test of this binary asks for another
    // before).
    let Ok(in_use) = ahead::os::lease_signal() else {
        panic!("this machine takes read leases: the handler must install");
    };
    assert_eq!(in_use, libc::SIGRTMAX() - 3);
    Engine::builder().lease_signal(in_use).build().unwrap();
    let e = Engine::builder()
        .lease_signal(in_use - 1)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains(&in_use.to_string()), "{e}");
}

/// Direct reads (past the cache) are counted by the completion, a burst at a time, before
/// their readers are woken: a read is in the figures as soon as its future returns, on every
/// backend, and 64 in flight at once add up to the same figures as one at a time.
///
/// | reads in flight  | reads | bytes each | requests (all sync) | miss pages | hit pages |
/// |------------------|-------|------------|---------------------|------------|-----------|
/// | 1, then 64 at once | 1 + 64 | 8 KiB    | 65                  | 130        | 0         |
#[test]
fn a_direct_read_is_counted_when_its_future_returns() {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let path = data_file("direct-counts", 4 << 20);
    for backend in [
        BackendChoice::AUTO,
        BackendChoice::THREADS,
        BackendChoice::SYNC,
    ] {
        let engine = Engine::builder()
            .backend(backend)
            .policy("none")
            .budget(64 << 20)
            .build()
            .unwrap();
        let file = OpenOptions::new()
            .record_latency(true)
            .open(&engine, &path)
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (got, _) = rt.block_on(file.read_direct(ahead::AlignedBuf::new(8192), 8192));
        assert_eq!(got.unwrap(), 8192);
        let s = engine.stats();
        assert_eq!(
            (
                s.reads,
                s.requests,
                s.sync_requests,
                s.miss_pages,
                s.bytes_returned
            ),
            (1, 1, 1, 2, 8192),
            "{backend:?}: counted as soon as the future returned"
        );
        rt.block_on(async {
            let mut reads: FuturesUnordered<_> = (0..64u64)
                .map(|i| file.read_direct(ahead::AlignedBuf::new(8192), i * 65536))
                .collect();
            while let Some((got, _)) = reads.next().await {
                assert_eq!(got.unwrap(), 8192);
            }
        });
        let (s, f) = (engine.stats(), file.stats());
        for (who, reads, requests, sync, miss, hit, bytes) in [
            (
                "engine",
                s.reads,
                s.requests,
                s.sync_requests,
                s.miss_pages,
                s.hit_pages,
                s.bytes_returned,
            ),
            (
                "file",
                f.reads,
                f.requests,
                f.sync_requests,
                f.miss_pages,
                f.hit_pages,
                f.bytes_returned,
            ),
        ] {
            assert_eq!(
                (reads, requests, sync, miss, hit, bytes),
                (65, 65, 65, 130, 0, 65 * 8192),
                "{backend:?}: the {who}'s figures"
            );
        }
        assert_eq!(s.read_latency.count, 65, "{backend:?}");
        assert_eq!(s.request_latency.count, 65, "{backend:?}");
        assert_eq!(f.read_latency.map(|l| l.count), Some(65), "{backend:?}");
    }
}
