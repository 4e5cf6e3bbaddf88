//! Remote objects against real servers on loopback, started here: versitygw (S3), lighttpd
//! (HTTP with Range, and HTTPS), toxiproxy (latency and faults) and a gateway that answers 503 SlowDown
//! (see `common/servers.rs`). Every byte the engine returns equals the object's; faults change
//! no byte and lose no read; a changed object is an error. Where a server is not installed the
//! test skips saying which (`tools/test-servers` installs them; CI requires them).
#![cfg(feature = "remote")]

mod common;
#[path = "common/servers.rs"]
mod servers;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahead::engine::{Engine, File};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use servers::{need, Server, ACCESS_KEY, REGION, SECRET_KEY};

const BUCKET: &str = "ahead-test";

/// Put `bytes` at `key` of the gateway at `endpoint` (an upload, so the object has the ETag
/// the gateway computes).
fn put(endpoint: &str, key: &str, bytes: &[u8]) {
    // rustls's process-wide provider (the engine installs the same one on its first open).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_access_key_id(ACCESS_KEY)
        .with_secret_access_key(SECRET_KEY)
        .with_region(REGION)
        .with_bucket_name(BUCKET)
        .build()
        .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(store.put(&ObjectPath::from(key), PutPayload::from(bytes.to_vec())))
        .unwrap();
}

/// An engine reading the gateway at `endpoint` with `policy`, plus any `extra` options.
fn s3_engine(endpoint: &str, policy: &str, budget: u64, extra: &[(&str, &str)]) -> Engine {
    let mut b = Engine::builder()
        .policy(policy)
        .budget(budget)
        .remote_option("endpoint", endpoint)
        .remote_option("access_key_id", ACCESS_KEY)
        .remote_option("secret_access_key", SECRET_KEY)
        .remote_option("region", REGION);
    for (k, v) in extra {
        b = b.remote_option(k, v);
    }
    b.build().unwrap()
}

fn gateway() -> Option<Server> {
    need(servers::versitygw(&[BUCKET]))
}

/// Read `len` bytes at `offset` in full (to the end of the object), as a reader would.
fn read_full(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut n = 0;
    while n < len {
        let k = file.read_at(&mut buf[n..], offset + n as u64)?;
        if k == 0 {
            break;
        }
        n += k;
    }
    buf.truncate(n);
    Ok(buf)
}

/// The offsets a reader of `shape` visits in an object of `size` bytes with reads of `bs`.
fn offsets(shape: u8, size: u64, bs: u64, seed: u64) -> Vec<u64> {
    let reads = size.div_ceil(bs);
    let mut rng = ahead::pattern::SplitMix64(seed);
    match shape {
        // Sequential.
        0 => (0..reads).map(|i| i * bs).collect(),
        // Backward.
        1 => (0..reads).rev().map(|i| i * bs).collect(),
        // A stride: every third record.
        2 => (0..reads).step_by(3).map(|i| i * bs).collect(),
        // Runs of 16 reads, skipping 8 records forward.
        3 => (0..reads).filter(|i| i % 24 < 16).map(|i| i * bs).collect(),
        // Random.
        _ => (0..reads.min(200)).map(|_| rng.next_u64() % size).collect(),
    }
}

#[test]
fn every_byte_equals_the_objects_over_s3_for_random_patterns_and_threads() {
    let Some(gw) = gateway() else { return };
    let size = 5 * 1024 * 1024 + 4321;
    let bytes = Arc::new(common::content(size, 11));
    put(&gw.url(), "data/object.bin", &bytes);
    let url = format!("s3://{BUCKET}/data/object.bin");
    let strategy = (
        0u8..5,
        prop_oneof![Just(4096u64), 1u64..300_000],
        1usize..5,
        prop_oneof![Just("adaptive"), Just("linux-ondemand"), Just("none")],
        any::<u64>(),
        prop_oneof![Just("true"), Just("false"), Just("auto")],
    );
    let mut runner = TestRunner::new(Config {
        cases: 16,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |(shape, bs, threads, policy, seed, split)| {
            // A small budget: the policies' windows, and eviction, are exercised; reads ahead
            // in one GET each, in parallel parts, or as the link is measured (`split_ahead`).
            let engine = s3_engine(&gw.url(), policy, 4 << 20, &[("split_ahead", split)]);
            let file = Arc::new(engine.open(&url).unwrap());
            prop_assert_eq!(file.len(), size as u64);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (file, bytes) = (file.clone(), bytes.clone());
                    s.spawn(move || {
                        for off in offsets(shape, size as u64, bs, seed ^ t as u64) {
                            let got = read_full(&file, off, bs as usize).unwrap();
                            let end = (off as usize + bs as usize).min(size);
                            assert!(
                                got == bytes[off as usize..end],
                                "{policy}, shape {shape}, bs {bs}, split_ahead {split}: bytes differ at {off}"
                            );
                        }
                    });
                }
            });
            prop_assert_eq!(engine.stats().io_errors, 0);
            // A direct read (into an owned buffer, past the cache) of an object: a ranged GET
            // into the buffer, its end clipped at the object's.
            let off = (seed % (size as u64 / 4096 + 1)) * 4096;
            let (got, buf) = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(file.read_direct(ahead::AlignedBuf::new(256 << 10), off));
            let end = (off as usize + (256 << 10)).min(size);
            prop_assert_eq!(got.unwrap(), end - off as usize);
            prop_assert!(buf.as_slice()[..end - off as usize] == bytes[off as usize..end]);
            Ok(())
        })
        .unwrap();
    let refused = s3_engine(&gw.url(), "adaptive", 4 << 20, &[("split_ahead", "maybe")])
        .open(&url)
        .unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
    assert!(refused.to_string().contains("split_ahead"), "{refused}");
}

/// The open fetches an object's last bytes with its metadata (one GET for both): a reader of
/// a footer (a Parquet file's last 64 KiB) reads it without a second round trip. Objects of
/// every size around that tail (none, smaller, exactly, larger) read byte for byte, whether
/// the first read is the tail, the start, or the whole; an object that changed since its open
/// is still read as opened.
#[test]
fn an_objects_last_bytes_come_with_its_open() {
    let Some(gw) = gateway() else { return };
    let Some(toxi) = need(servers::toxiproxy()) else {
        return;
    };
    let tail = (64 << 10) + 4096;
    for (i, size) in [0, 1, 4095, 4096, tail - 1, tail, tail + 1, 300_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let bytes = common::content(size, 500 + i as u64);
        put(&gw.url(), &format!("tails/{size}.bin"), &bytes);
        let url = format!("s3://{BUCKET}/tails/{size}.bin");
        let engine = s3_engine(&gw.url(), "adaptive", 8 << 20, &[]);
        let footer = size.saturating_sub(64 << 10);
        for first in [footer, 0, size / 3] {
            let file = engine.open(&url).unwrap();
            assert_eq!(file.len(), size as u64);
            let got = read_full(&file, first as u64, size - first + 1).unwrap();
            assert!(got == bytes[first..], "{size} bytes, first read at {first}");
            assert!(read_full(&file, 0, size).unwrap() == bytes, "{size} bytes");
        }
    }
    // The opened version's tail, though the object changed since.
    let size = 1 << 20;
    put(&gw.url(), "tails/changed.bin", &common::content(size, 1));
    let engine = s3_engine(&gw.url(), "none", 8 << 20, &[]);
    let file = engine
        .open(format!("s3://{BUCKET}/tails/changed.bin"))
        .unwrap();
    put(&gw.url(), "tails/changed.bin", &common::content(size, 2));
    assert!(
        read_full(&file, size as u64 - 100, 100).unwrap() == common::content(size, 1)[size - 100..]
    );
    let err = read_full(&file, 0, 4096).unwrap_err();
    assert!(
        err.to_string().contains("changed since it was opened"),
        "{err}"
    );
    // At 20 ms each way: opening and reading the footer is one round trip; opening and
    // reading the start, two (the fastest of three of each, against a loaded machine).
    let timed = common::content(1 << 20, 77);
    let footer_at = (1 << 20) - (64 << 10);
    put(&gw.url(), "tails/timed.bin", &timed);
    let proxy = toxi.proxy("tails", gw.addr);
    toxi.latency_each_way(&proxy, 20);
    let s3 = || s3_engine(&proxy.url(), "none", 8 << 20, &[]);
    let url = format!("s3://{BUCKET}/tails/timed.bin");
    let (footer, start) = (
        fastest_open_and_read(&s3, &url, footer_at, &timed),
        fastest_open_and_read(&s3, &url, 0, &timed),
    );
    assert!(
        footer < Duration::from_millis(70) && start >= Duration::from_millis(80),
        "open and footer {footer:?}, open and start {start:?}"
    );
    // The same over plain HTTP (lighttpd answers a suffix range).
    let Some(web) = need(servers::lighttpd()) else {
        return;
    };
    std::fs::write(web.dir.0.join("docs/timed.bin"), &timed).unwrap();
    let proxy = toxi.proxy("tails-http", web.addr);
    toxi.latency_each_way(&proxy, 20);
    let http = || {
        Engine::builder()
            .policy("none")
            .budget(8 << 20)
            .build()
            .unwrap()
    };
    let footer = fastest_open_and_read(
        &http,
        &format!("{}/timed.bin", proxy.url()),
        footer_at,
        &timed,
    );
    assert!(
        footer < Duration::from_millis(70),
        "HTTP: open and footer {footer:?}"
    );
}

/// The fastest of three opens of `url`, each on an engine of its own from `engine` (none has
/// the object cached), and a read of 64 KiB at `at`, whose bytes must be `want`'s.
fn fastest_open_and_read(engine: &dyn Fn() -> Engine, url: &str, at: u64, want: &[u8]) -> Duration {
    (0..3)
        .map(|_| {
            let engine = engine();
            let t = Instant::now();
            let file = engine.open(url).unwrap();
            let got = read_full(&file, at, 64 << 10).unwrap();
            let took = t.elapsed();
            let end = (at as usize + (64 << 10)).min(want.len());
            assert!(got == want[at as usize..end], "{url}: bytes differ at {at}");
            took
        })
        .min()
        .unwrap()
}

#[test]
fn faults_through_the_proxy_change_no_byte_and_lose_no_read() {
    // A connection a request: toxiproxy draws its toxics once a connection, and a pool of
    // kept-alive connections keeps those that drew none (the open's retries weed out the
    // rest), so no fault reached a reader in five rounds.
    let Some(gw) = need(servers::versitygw_with(&[BUCKET], false)) else {
        return;
    };
    let Some(toxi) = need(servers::toxiproxy()) else {
        return;
    };
    let size = 12 * 1024 * 1024 + 77;
    let bytes = common::content(size, 12);
    put(&gw.url(), "faults.bin", &bytes);
    let proxy = toxi.proxy("faults", gw.addr);
    toxi.latency_each_way(&proxy, 2);
    // A tenth of connections reset, a tenth cut off after 100 KB (mid-body), a twentieth
    // stalled until the client's timeout.
    toxi.toxic(&proxy, "reset_peer", "downstream", 0.1, r#"{"timeout":20}"#);
    toxi.toxic(
        &proxy,
        "limit_data",
        "downstream",
        0.1,
        r#"{"bytes":100000}"#,
    );
    toxi.toxic(&proxy, "timeout", "downstream", 0.05, r#"{"timeout":0}"#);
    let url = format!("s3://{BUCKET}/faults.bin");
    let read_all = |retries: &str| {
        let engine = s3_engine(
            &proxy.url(),
            "adaptive",
            8 << 20,
            &[
                ("max_retries", retries),
                ("timeout", "2s"),
                ("retry_timeout", "120"),
            ],
        );
        // The open's HEAD meets the faults too; without retries, try it again here (the
        // reads are what this test is about).
        let file = Arc::new(
            (0..50)
                .find_map(|_| engine.open(&url).ok())
                .expect("the HEAD got through in 50 tries"),
        );
        let failed = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (file, bytes, failed) = (file.clone(), &bytes, &failed);
                s.spawn(move || {
                    // Each thread reads its quarter in 64 KiB reads.
                    let part = (size as u64).div_ceil(4);
                    let mut off = t * part;
                    while off < ((t + 1) * part).min(size as u64) {
                        match read_full(&file, off, 64 << 10) {
                            Ok(got) => {
                                let end = (off as usize + got.len()).min(size);
                                assert!(got == bytes[off as usize..end], "bytes differ at {off}");
                                off += 64 << 10;
                            }
                            Err(e) => {
                                // Surfaced on the read that hit it; the read may be tried again.
                                assert!(!e.to_string().contains(SECRET_KEY), "{e}");
                                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                off += 64 << 10;
                            }
                        }
                    }
                });
            }
        });
        (
            failed.load(std::sync::atomic::Ordering::Relaxed),
            engine.stats(),
        )
    };
    // Without retries the faults reach the reader: they are there.
    // (A few connections may all draw no toxic: up to five rounds.)
    let reached = (0..5).any(|_| {
        let (failed, stats) = read_all("0");
        failed > 0 && stats.io_errors > 0
    });
    assert!(reached, "no fault reached a reader in five rounds");
    // With retries none does, and every byte is right.
    let (failed, stats) = read_all("10");
    assert_eq!((failed, stats.io_errors), (0, 0), "{stats:?}");
}

/// Reads the engine splits into parallel GETs (`split_ahead=true`: 2 MiB parts), every
/// connection cut after 300 KB (mid-part) and no retries by the store's client: a read whose
/// part was cut fails as a whole (its other parts stopped and waited for, nothing of it
/// cached), the reader's one retry is one request, and once the link is whole every byte read
/// again through the same engine is the object's.
#[test]
fn a_read_in_parts_with_a_part_cut_off_fails_whole_and_caches_nothing() {
    // A connection a request, as for the faults above: with the open's connection kept alive
    // under the cutting toxic, toxiproxy timed out taking the toxic off (503, two runs in five).
    // It still did once in CI with a connection a request, so the link is healed by making the
    // proxy anew (`Toxiproxy::heal`), not by taking the toxic off.
    let Some(gw) = need(servers::versitygw_with(&[BUCKET], false)) else {
        return;
    };
    let Some(toxi) = need(servers::toxiproxy()) else {
        return;
    };
    let size = 24 << 20;
    let bytes = common::content(size, 21);
    put(&gw.url(), "parts.bin", &bytes);
    let proxy = toxi.proxy("parts", gw.addr);
    let engine = s3_engine(
        &proxy.url(),
        "none",
        64 << 20,
        &[("max_retries", "0"), ("split_ahead", "true")],
    );
    let url = format!("s3://{BUCKET}/parts.bin");
    toxi.toxic(
        &proxy,
        "limit_data",
        "downstream",
        1.0,
        r#"{"bytes":300000}"#,
    );
    // The open's GET (the object's last 68 KiB) gets through a cut connection too.
    let file = engine.open(&url).unwrap();
    let (mut failed, mut read) = (0, 0);
    for at in (0..size as u64).step_by(8 << 20) {
        match read_full(&file, at, 8 << 20) {
            Ok(got) => {
                assert!(
                    got == bytes[at as usize..at as usize + got.len()],
                    "bytes differ at {at}"
                );
                read += 1;
            }
            Err(e) => {
                assert!(!e.to_string().contains(SECRET_KEY), "{e}");
                failed += 1;
            }
        }
    }
    assert_eq!((failed, read), (3, 0), "every read met a cut connection");
    // Each failed once and was tried once more, the rest of it as one request: not a request
    // a page (2,048 for each).
    let requests = engine.stats().requests;
    assert!(requests <= 3 * 4, "{requests} requests for 3 reads");
    toxi.heal(&proxy);
    for at in (0..size as u64).step_by(1 << 20) {
        let got = read_full(&file, at, 1 << 20).unwrap();
        assert!(
            got == bytes[at as usize..at as usize + got.len()],
            "bytes differ at {at} after the failures"
        );
    }
}

#[test]
fn slow_down_answers_are_retried_and_change_no_byte() {
    let Some(gw) = gateway() else { return };
    let size = 6 * 1024 * 1024 + 5;
    let bytes = common::content(size, 13);
    put(&gw.url(), "slowdown.bin", &bytes);
    // Every third request is answered 503 SlowDown, as S3 does under load.
    let front = servers::SlowDown::start(gw.addr, 3);
    let engine = s3_engine(&front.url(), "adaptive", 8 << 20, &[]);
    let file = engine.open(format!("s3://{BUCKET}/slowdown.bin")).unwrap();
    for off in (0..size).step_by(64 << 10) {
        let got = read_full(&file, off as u64, 64 << 10).unwrap();
        assert!(
            got == bytes[off..(off + (64 << 10)).min(size)],
            "bytes differ at {off}"
        );
    }
    let answered = front.slow_downs();
    eprintln!(
        "{answered} of {} requests answered 503: {}",
        front.requests(),
        engine.stats()
    );
    assert!(answered > 0, "no 503 was sent");
    assert_eq!(engine.stats().io_errors, 0);
}

#[test]
fn a_changed_object_mid_read_is_a_clear_error() {
    let Some(gw) = gateway() else { return };
    let size = 4 << 20;
    put(&gw.url(), "changes.bin", &common::content(size, 1));
    let engine = s3_engine(&gw.url(), "none", 8 << 20, &[]);
    let url = format!("s3://{BUCKET}/changes.bin");
    let file = engine.open(&url).unwrap();
    assert_eq!(
        read_full(&file, 0, 4096).unwrap(),
        common::content(size, 1)[..4096]
    );
    put(&gw.url(), "changes.bin", &common::content(size, 2));
    let err = read_full(&file, 2 << 20, 4096).unwrap_err();
    assert!(
        err.to_string().contains("changed since it was opened"),
        "{err}"
    );
    // Opened again, it is the new version.
    let file = engine.open(&url).unwrap();
    assert_eq!(
        read_full(&file, 2 << 20, 4096).unwrap(),
        common::content(size, 2)[2 << 20..(2 << 20) + 4096]
    );
}

/// Objects replaced over and over (same size, smaller, larger) through the real server while
/// four threads read them at random: every read returns the bytes of the version opened, or
/// the clear error that it changed; never a byte of another version. Opened again once the
/// writer stops, each is its last version.
#[test]
fn objects_replaced_while_read_give_the_opened_bytes_or_a_clear_error() {
    let Some(gw) = gateway() else { return };
    let names = ["churn-a.bin", "churn-b.bin"];
    let first: Vec<Vec<u8>> = (0..names.len())
        .map(|i| common::content((3 << 20) + 777 * i, 100 + i as u64))
        .collect();
    for (name, bytes) in names.iter().zip(&first) {
        put(&gw.url(), name, bytes);
    }
    let engine = s3_engine(&gw.url(), "adaptive", 4 << 20, &[]);
    let files: Vec<File> = names
        .iter()
        .map(|n| engine.open(format!("s3://{BUCKET}/{n}")).unwrap())
        .collect();
    let writing = std::sync::atomic::AtomicBool::new(true);
    let (mut ok, mut changed) = (0u64, 0u64);
    let last: Vec<Vec<u8>> = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut rng = ahead::pattern::SplitMix64(7);
            let mut last = first.clone();
            for round in 0..24u64 {
                std::thread::sleep(Duration::from_millis(40));
                let i = rng.below(names.len() as u64) as usize;
                let size = match rng.below(3) {
                    0 => last[i].len(),
                    1 => rng.below(last[i].len() as u64) as usize,
                    _ => last[i].len() + rng.below(1 << 20) as usize,
                };
                last[i] = common::content(size, 1000 + round);
                put(&gw.url(), names[i], &last[i]);
            }
            writing.store(false, std::sync::atomic::Ordering::Release);
            last
        });
        let readers: Vec<_> = (0..4u64)
            .map(|t| {
                let (files, first, writing) = (&files, &first, &writing);
                s.spawn(move || {
                    let mut rng = ahead::pattern::SplitMix64(t);
                    let (mut ok, mut changed) = (0u64, 0u64);
                    while writing.load(std::sync::atomic::Ordering::Acquire) {
                        let i = rng.below(files.len() as u64) as usize;
                        let at = rng.below(first[i].len() as u64);
                        let len = 1 + rng.below(200_000) as usize;
                        let mut buf = vec![0u8; len];
                        match files[i].read_at(&mut buf, at) {
                            Ok(n) => {
                                let want =
                                    &first[i][at as usize..(at as usize + len).min(first[i].len())];
                                assert!(
                                    buf[..n] == want[..n],
                                    "object {i}: a byte not of the version opened at {at}+{len}"
                                );
                                ok += 1;
                            }
                            Err(e) => {
                                assert!(
                                    e.to_string().contains("changed since it was opened"),
                                    "{e}"
                                );
                                changed += 1;
                            }
                        }
                    }
                    (ok, changed)
                })
            })
            .collect();
        for r in readers {
            let (o, c) = r.join().unwrap();
            ok += o;
            changed += c;
        }
        writer.join().unwrap()
    });
    assert!(
        ok > 0 && changed > 0,
        "{ok} reads of the opened version, {changed} refused"
    );
    for (name, bytes) in names.iter().zip(&last) {
        let file = engine.open(format!("s3://{BUCKET}/{name}")).unwrap();
        assert!(
            read_full(&file, 0, bytes.len()).unwrap() == *bytes,
            "{name}"
        );
    }
    println!("{ok} reads of the version opened, {changed} refused as changed");
}

#[test]
fn missing_objects_buckets_and_wrong_credentials_are_clear_errors() {
    let Some(gw) = gateway() else { return };
    put(&gw.url(), "here.bin", b"here");
    let engine = s3_engine(&gw.url(), "adaptive", 8 << 20, &[]);
    let err = engine
        .open(format!("s3://{BUCKET}/missing.bin"))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    let err = engine.open("s3://no-such-bucket/here.bin").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    let wrong = s3_engine(
        &gw.url(),
        "adaptive",
        8 << 20,
        &[("secret_access_key", "wrong")],
    );
    let err = wrong.open(format!("s3://{BUCKET}/here.bin")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("access denied") && !text.contains("wrong"),
        "{text}"
    );
    let engine = s3_engine(&gw.url(), "adaptive", 8 << 20, &[("no_such_option", "1")]);
    let err = engine.open(format!("s3://{BUCKET}/here.bin")).unwrap_err();
    assert!(err.to_string().contains("unknown remote option"), "{err}");
}

#[test]
fn objects_and_prefixes_are_stated_and_listed_one_level_deep() {
    let Some(gw) = gateway() else { return };
    put(&gw.url(), "ls/a.bin", &[1; 10]);
    put(&gw.url(), "ls/sub/b.bin", &[2; 20]);
    let engine = s3_engine(&gw.url(), "adaptive", 8 << 20, &[]);
    let a = engine.stat(format!("s3://{BUCKET}/ls/a.bin")).unwrap();
    assert_eq!((a.size, a.is_dir), (10, false));
    assert!(a.e_tag.is_some());
    // Opened from the stat, without a HEAD of its own; pinned to what the stat saw.
    let mut buf = [0u8; 16];
    let file = engine.open_entry(&a).unwrap();
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 10);
    assert_eq!(buf[..10], [1; 10]);
    // Changed since the stat: an engine with nothing cached of it reads nothing of the new
    // version through the old stat (this engine would serve the stat's version it holds).
    put(&gw.url(), "ls/a.bin", &[3; 10]);
    let other = s3_engine(&gw.url(), "adaptive", 8 << 20, &[]);
    let err = other
        .open_entry(&a)
        .unwrap()
        .read_at(&mut buf, 0)
        .unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    let dir = engine.stat(format!("s3://{BUCKET}/ls")).unwrap();
    assert_eq!(
        (dir.name.as_str(), dir.is_dir),
        (&*format!("s3://{BUCKET}/ls/"), true)
    );
    let err = engine.open_entry(&dir).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::IsADirectory, "{err}");
    let names = |name: String| -> Vec<(String, u64, bool)> {
        engine
            .list(name)
            .unwrap()
            .into_iter()
            .map(|o| (o.name, o.size, o.is_dir))
            .collect()
    };
    let under = [
        (format!("s3://{BUCKET}/ls/a.bin"), 10, false),
        (format!("s3://{BUCKET}/ls/sub/"), 0, true),
    ];
    assert_eq!(names(format!("s3://{BUCKET}/ls/")), under);
    assert_eq!(names(format!("s3://{BUCKET}/ls")), under);
    // An object lists as itself, as `ls FILE` shows it.
    assert_eq!(
        names(format!("s3://{BUCKET}/ls/a.bin")),
        [(format!("s3://{BUCKET}/ls/a.bin"), 10, false)]
    );
    for missing in ["ls/nothing", "ls/no/"] {
        let err = engine.stat(format!("s3://{BUCKET}/{missing}")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    }
    let err = engine
        .list(format!("s3://{BUCKET}/ls/nothing"))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
}

#[test]
fn http_objects_read_byte_for_byte_from_lighttpd_and_a_rewrite_is_caught() {
    let Some(web) = need(servers::lighttpd()) else {
        return;
    };
    let size = 3 * 1024 * 1024 + 999;
    let bytes = common::content(size, 21);
    std::fs::write(web.dir.0.join("docs/object.bin"), &bytes).unwrap();
    let engine = Engine::builder().budget(8 << 20).build().unwrap();
    let url = format!("{}/object.bin", web.url());
    let file = engine.open(&url).unwrap();
    assert_eq!(read_full(&file, 0, size).unwrap(), bytes);
    // No listing over HTTP: a URL lists as the object it names.
    let entry = engine.stat(&url).unwrap();
    assert_eq!((entry.size, entry.is_dir), (size as u64, false));
    assert_eq!(engine.list(&url).unwrap(), [entry]);
    let stats = engine.stats();
    assert!(stats.requests < 20, "read ahead in large GETs: {stats:?}");
    let err = engine
        .open(format!("{}/missing.bin", web.url()))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    // lighttpd ignores If-Match on ranges; the engine checks the ETag of every answer.
    let none = Engine::builder()
        .policy("none")
        .budget(8 << 20)
        .build()
        .unwrap();
    let file = none.open(&url).unwrap();
    read_full(&file, 0, 4096).unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // a new mtime, so a new ETag
    std::fs::write(web.dir.0.join("docs/object.bin"), common::content(size, 22)).unwrap();
    let err = read_full(&file, 1 << 20, 4096).unwrap_err();
    assert!(
        err.to_string().contains("changed since it was opened"),
        "{err}"
    );
}

/// Credentials in an HTTP URL are sent as Basic auth (the server that asks for them serves),
/// never shown (errors, the file's name and `Debug`, stats), and not carried on a redirect
/// to another host: the second server's log of the Authorization header it received is empty.
#[test]
fn credentials_in_a_url_are_used_never_shown_and_not_carried_to_another_host() {
    const PASSWORD: &str = "S3cretPW-xyzzy";
    let log_auth = |dir: &Path| {
        format!(
            "server.modules += ( \"mod_accesslog\" )\naccesslog.filename = \"{}\"\n\
             accesslog.format = \"%r [%{{Authorization}}i]\"\n",
            dir.join("access.log").display()
        )
    };
    let Some(other) = need(servers::lighttpd_configured(|dir, _| log_auth(dir))) else {
        return;
    };
    let other_port = other.addr.port();
    let Some(web) = need(servers::lighttpd_configured(|dir, _| {
        std::fs::write(dir.join("users"), format!("alice:{PASSWORD}\n")).unwrap();
        log_auth(dir)
            + &format!(
                "server.modules += ( \"mod_redirect\", \"mod_auth\", \"mod_authn_file\" )\n\
                 url.redirect = ( \"^/moved/(.*)$\" => \"http://127.0.0.1:{other_port}/$1\" )\n\
                 auth.backend = \"plain\"\nauth.backend.plain.userfile = \"{}\"\n\
                 auth.require = ( \"/\" => ( \"method\" => \"basic\", \"realm\" => \"t\", \"require\" => \"valid-user\" ) )\n",
                dir.join("users").display()
            )
    })) else {
        return;
    };
    let size = (1 << 20) + 3;
    let bytes = common::content(size, 35);
    std::fs::write(web.dir.0.join("docs/object.bin"), &bytes).unwrap();
    std::fs::write(other.dir.0.join("docs/object.bin"), &bytes).unwrap();
    let host = web.addr;
    let engine = Engine::builder().budget(8 << 20).build().unwrap();
    // Used: the server that asks for them serves the object.
    let url = format!("http://alice:{PASSWORD}@{host}/object.bin");
    let file = engine.open(&url).unwrap();
    assert_eq!(read_full(&file, 0, size).unwrap(), bytes);
    let shown = format!(
        "{file:?} {} {}",
        file.path().display(),
        serde_json::to_string(&engine.stats()).unwrap()
    );
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains(&format!("alice:***@{host}")), "{shown}");
    // Refused without them, and with a wrong one: an error that shows neither password.
    let err = engine
        .open(format!("http://{host}/object.bin"))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    let err = engine
        .open(format!("http://alice:wrong-{PASSWORD}@{host}/object.bin"))
        .unwrap_err();
    assert!(!err.to_string().contains(PASSWORD), "{err}");
    // A redirect to another host (another port) is followed without the credentials.
    let moved = engine
        .open(format!("http://alice:{PASSWORD}@{host}/moved/object.bin"))
        .unwrap();
    assert_eq!(read_full(&moved, 0, size).unwrap(), bytes);
    // lighttpd writes its access log out about once a second.
    let logged = |server: &Server, line: &str| {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(server.dir.0.join("access.log")).unwrap_or_default();
            if log.contains(line) || Instant::now() > until {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let sent_here = logged(&web, "/moved/object.bin");
    let sent_there = logged(&other, "GET /object.bin");
    assert!(
        sent_here.contains("[Basic "),
        "the credentials were not sent: {sent_here}"
    );
    assert!(sent_there.contains("GET /object.bin"), "{sent_there}");
    assert!(
        !sent_there.contains("Basic"),
        "credentials carried to another host: {sent_there}"
    );
    // An s3:// URL with credentials is refused without repeating them.
    let err = engine
        .open(format!("s3://KEY:{PASSWORD}@bucket/key"))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(!err.to_string().contains(PASSWORD), "{err}");
}

/// A server that gives Last-Modified but no ETag: the object is pinned by its time (every
/// answer's Last-Modified must be the opened one), so a same-size replacement mid-read is an
/// error, not the new bytes mixed with the old.
#[test]
fn an_object_with_no_etag_replaced_mid_read_is_a_clear_error() {
    let Some(web) = need(servers::lighttpd_with(
        servers::Validators::LastModifiedOnly,
    )) else {
        return;
    };
    let size = 2 << 20;
    let path = web.dir.0.join("docs/object.bin");
    std::fs::write(&path, common::content(size, 31)).unwrap();
    let engine = Engine::builder()
        .policy("none")
        .budget(8 << 20)
        .build()
        .unwrap();
    let file = engine.open(format!("{}/object.bin", web.url())).unwrap();
    assert!(file.unpinned().is_none(), "pinned by Last-Modified");
    assert!(engine
        .stats()
        .fallbacks
        .iter()
        .any(|f| f.kind == ahead::engine::FallbackKind::NoETag));
    read_full(&file, 0, 4096).unwrap();
    std::thread::sleep(Duration::from_millis(1100)); // a new Last-Modified (to the second)
    std::fs::write(&path, common::content(size, 32)).unwrap();
    let err = read_full(&file, 1 << 20, 4096).unwrap_err();
    assert!(
        err.to_string().contains("changed since it was opened"),
        "{err}"
    );
}

/// An object versitygw has no ETag for (its file written in place, as an object copied into
/// the gateway's directory is) lists with an empty `<ETag></ETag>`: opened from that listing
/// (as a mount or fsspec opens what `ls` showed), it is pinned by Last-Modified, not by the
/// empty tag, so a same-size replacement mid-read is an error, not the new bytes.
#[test]
fn an_object_listed_with_an_empty_etag_and_replaced_mid_read_is_a_clear_error() {
    let Some(gw) = gateway() else { return };
    let size = 6 << 20;
    let path = gw
        .dir
        .0
        .join("root")
        .join(BUCKET)
        .join("in-place/object.bin");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, common::content(size, 41)).unwrap();
    let engine = s3_engine(&gw.url(), "none", 8 << 20, &[]);
    let listed = engine.list(format!("s3://{BUCKET}/in-place/")).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].e_tag, None, "an empty ETag is none: {listed:?}");
    let file = engine.open_entry(&listed[0]).unwrap();
    assert!(read_full(&file, 0, 4096).unwrap() == common::content(size, 41)[..4096]);
    std::fs::write(&path, common::content(size, 42)).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(3);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let err = read_full(&file, 3 << 20, 4096).unwrap_err();
    assert!(
        err.to_string().contains("changed since it was opened"),
        "{err}"
    );
}

/// A server that gives neither ETag nor Last-Modified: nothing pins the object but its size.
/// The open says so (`unpinned`, a fallback in stats); its bytes still read right, and a
/// change of size is still caught.
#[test]
fn an_object_with_neither_etag_nor_last_modified_is_said_unpinned() {
    let Some(web) = need(servers::lighttpd_with(servers::Validators::Neither)) else {
        return;
    };
    let size = (3 << 20) + 17;
    let bytes = common::content(size, 33);
    let path = web.dir.0.join("docs/object.bin");
    std::fs::write(&path, &bytes).unwrap();
    let engine = Engine::builder().budget(8 << 20).build().unwrap();
    let file = engine.open(format!("{}/object.bin", web.url())).unwrap();
    let why = file.unpinned().expect("nothing to pin it by");
    assert!(
        why.contains("no ETag and no Last-Modified") && why.contains("object.bin"),
        "{why}"
    );
    assert!(engine
        .stats()
        .fallbacks
        .iter()
        .any(|f| f.kind == ahead::engine::FallbackKind::Unpinned));
    assert_eq!(read_full(&file, 0, size).unwrap(), bytes);
    // A change of size is still seen.
    let none = Engine::builder()
        .policy("none")
        .budget(8 << 20)
        .build()
        .unwrap();
    let file = none.open(format!("{}/object.bin", web.url())).unwrap();
    read_full(&file, 0, 4096).unwrap();
    std::fs::write(&path, common::content(size + 4096, 34)).unwrap();
    let err = read_full(&file, 1 << 20, 4096).unwrap_err();
    assert!(
        err.to_string().contains("changed since it was opened"),
        "{err}"
    );
}

#[test]
fn https_objects_read_byte_for_byte_and_an_untrusted_certificate_is_an_error() {
    let Some(web) = need(servers::lighttpd_https()) else {
        return;
    };
    let size = 2 * 1024 * 1024 + 333;
    let bytes = common::content(size, 23);
    std::fs::write(web.dir.0.join("docs/object.bin"), &bytes).unwrap();
    let url = format!("https://{}/object.bin", web.addr);
    // The certificate is self-signed: trusted by no root, so the default open refuses it.
    let strict = Engine::builder().budget(8 << 20).build().unwrap();
    let err = strict.open(&url).expect_err("an untrusted certificate");
    assert!(
        err.to_string().contains("object.bin") && err.to_string().contains("certificate"),
        "{err}"
    );
    let engine = Engine::builder()
        .budget(8 << 20)
        .remote_option("allow_invalid_certificates", "true")
        .build()
        .unwrap();
    let file = engine.open(&url).unwrap();
    assert_eq!(read_full(&file, 0, size).unwrap(), bytes);
    let back = size - 100_000;
    assert_eq!(
        read_full(&file, back as u64, 100_000).unwrap(),
        &bytes[back..]
    );
}

#[test]
fn sequential_reads_keep_the_link_busy_at_20_ms_each_way() {
    let Some(gw) = gateway() else { return };
    let Some(toxi) = need(servers::toxiproxy()) else {
        return;
    };
    let size = 64 << 20;
    let bytes = common::content(size, 31);
    put(&gw.url(), "seq.bin", &bytes);
    let proxy = toxi.proxy("seq", gw.addr);
    toxi.latency_each_way(&proxy, 20);
    let url = format!("s3://{BUCKET}/seq.bin");
    // The link's ceiling here: 16 GETs of 4 MiB at once, as the engine's device yardstick.
    let ceiling = {
        let engine = s3_engine(&proxy.url(), "none", 128 << 20, &[]);
        let file = Arc::new(engine.open(&url).unwrap());
        let t = Instant::now();
        std::thread::scope(|s| {
            for i in 0..16u64 {
                let file = file.clone();
                s.spawn(move || read_full(&file, i * (4 << 20), 4 << 20).unwrap());
            }
        });
        t.elapsed()
    };
    let engine = s3_engine(&proxy.url(), "adaptive", 128 << 20, &[]);
    let file = engine.open(&url).unwrap();
    let t = Instant::now();
    let mut off = 0;
    let mut buf = vec![0u8; 4096];
    while off < size {
        let n = file.read_at(&mut buf, off as u64).unwrap();
        assert!(buf[..n] == bytes[off..off + n]);
        off += n;
    }
    let adaptive = t.elapsed();
    let stats = engine.stats();
    eprintln!("ceiling {ceiling:?}, adaptive 4 KiB reads {adaptive:?}: {stats}");
    // One GET per 4 KiB read would take 16384 round trips (11 minutes); the engine must come
    // within reach of the link's ceiling (the bench holds it to 90%; a shared CI machine, less).
    assert!(
        adaptive < ceiling * 3,
        "adaptive {adaptive:?} against the ceiling's {ceiling:?}: {stats}"
    );
    assert!(stats.requests < 200, "{stats}");
    // Each byte copied twice: a GET's body into the cache, and out to the reader; the body
    // copied in is what was fetched, at least the object and at most the pages read.
    let copied_in = stats.copied_bytes - stats.bytes_returned;
    assert_eq!(stats.bytes_returned, size as u64);
    assert!(
        copied_in >= size as u64 && copied_in <= stats.pages_read * 4096,
        "{copied_in} bytes copied in: {stats:?}"
    );

    // The same engine reads a local file: its device is measured on its own, not blended
    // with the object store's round trips (one estimate for both was wrong for both).
    let remote = file.device_estimate();
    assert!(remote.latency_ns > 10_000_000, "{remote:?}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("remote-and-local.bin");
    let local_bytes = common::content(8 << 20, 32);
    std::fs::write(&path, &local_bytes).unwrap();
    let local = engine.open(&path).unwrap();
    assert!(
        engine.device_estimate().latency_ns < 5_000_000,
        "the local file starts from the engine's start, not the store's {:?}",
        engine.device_estimate()
    );
    let got = read_full(&local, 0, local_bytes.len()).unwrap();
    assert!(got == local_bytes);
    // Measured now: a local disk under a loaded CI machine's other tests answered in 7.7 ms
    // once, so it is held against the store's round trip, which one shared meter would equal.
    let (local_now, remote_now) = (local.device_estimate(), file.device_estimate());
    assert!(
        local_now.latency_ns * 2 < remote_now.latency_ns,
        "local {local_now:?}, remote {remote_now:?}"
    );
    assert!(remote_now.latency_ns > 10_000_000, "{remote_now:?}");
}

#[test]
fn objects_read_in_turn_are_opened_ahead_at_20_ms_each_way() {
    let Some(gw) = gateway() else { return };
    let Some(toxi) = need(servers::toxiproxy()) else {
        return;
    };
    const OBJECTS: usize = 24;
    let size = 2 << 20;
    let contents: Vec<Vec<u8>> = (0..OBJECTS)
        .map(|i| common::content(size, 100 + i as u64))
        .collect();
    for (i, bytes) in contents.iter().enumerate() {
        put(&gw.url(), &format!("turn/{i:02}.bin"), bytes);
    }
    let proxy = toxi.proxy("turn", gw.addr);
    toxi.latency_each_way(&proxy, 20);
    let mut urls: Vec<String> = (0..OBJECTS)
        .map(|i| format!("s3://{BUCKET}/turn/{i:02}.bin"))
        .collect();
    // One missing among them: its error comes at its place, the others read on.
    urls.insert(5, format!("s3://{BUCKET}/turn/missing.bin"));
    let read_all = |file: &File, want: &[u8]| {
        let got = read_full(file, 0, size + 1).unwrap();
        assert!(got == want, "{}: bytes differ", file.path().display());
    };
    let timed = |ahead: bool| {
        let engine = s3_engine(&proxy.url(), "adaptive", 128 << 20, &[]);
        let t = Instant::now();
        let mut contents = contents.iter();
        let mut check = |i: usize, opened: std::io::Result<File>| match opened {
            Ok(file) => read_all(&file, contents.next().unwrap()),
            Err(e) => {
                assert_eq!(i, 5, "only the missing object fails: {e}");
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
                assert!(e.to_string().contains("missing.bin"), "{e}");
            }
        };
        if ahead {
            for (i, opened) in engine.open_many(urls.iter()).enumerate() {
                check(i, opened);
            }
        } else {
            for (i, url) in urls.iter().enumerate() {
                check(i, engine.open(url));
            }
        }
        assert!(contents.next().is_none(), "every object read");
        (t.elapsed(), engine.stats())
    };
    let (one_by_one, plain) = timed(false);
    let (opened_ahead, stats) = timed(true);
    eprintln!("one by one {one_by_one:?}: {plain}\nopened ahead {opened_ahead:?}: {stats}");
    // One by one, each object waits at least two round trips (its open, its first GET): 80 ms
    // here. Opened ahead, sixteen at a time, those overlap the reads of the objects before.
    assert!(
        one_by_one >= Duration::from_millis(80) * OBJECTS as u32,
        "{one_by_one:?}"
    );
    assert!(
        opened_ahead * 3 < one_by_one,
        "opened ahead {opened_ahead:?}, one by one {one_by_one:?}"
    );
    // A merge's open_all: every open overlaps, so all of them take a few round trips, not
    // one each (24 x 40 ms); the missing object fails it, naming the object.
    let engine = s3_engine(&proxy.url(), "adaptive", 128 << 20, &[]);
    let e = engine.open_all(urls.iter()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("missing.bin"), "{e}");
    urls.remove(5);
    let t = Instant::now();
    let files = engine.open_all(urls.iter()).unwrap();
    let opened = t.elapsed();
    assert!(
        opened < Duration::from_millis(200),
        "open_all took {opened:?}"
    );
    for (file, want) in files.iter().zip(&contents) {
        read_all(file, want);
    }
}
