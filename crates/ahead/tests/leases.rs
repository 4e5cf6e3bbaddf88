//! Read leases: what lets a read served from the cache skip the `fstat` that tells it the file
//! is unchanged. With the lease held no read asks the kernel; a writer's open or a truncation,
//! from this process or another, breaks it, and the next read sees the change; once the writer
//! is gone the lease is taken again. The truncation guarantees themselves, with and without a
//! lease, are in `faults.rs`.

mod common;
use common::{content, pread, write_test_file};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ahead::engine::{BackendChoice, Engine, FallbackKind};

const BACKENDS: [BackendChoice; 3] = [
    BackendChoice::URING,
    BackendChoice::THREADS,
    BackendChoice::SYNC,
];

/// Far below the kernel's lease-break-time (45 s): a writer that waited this long was let
/// through by the kernel's timeout, not by the engine giving the lease up.
const WRITER_WAITS_AT_MOST: Duration = Duration::from_secs(5);

/// Held while a test writes a file or starts a process. A process forked while another
/// thread has a file open for writing holds that descriptor until it execs, and a lease on
/// that file is refused meanwhile: the tests here run in parallel, and one's `dd` once cost
/// another its first lease (66 size checks where 2 were expected).
static WRITES_AND_FORKS: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    WRITES_AND_FORKS.lock().unwrap_or_else(|p| p.into_inner())
}

fn write_file(name: &str, data: &[u8]) -> PathBuf {
    let _alone = one_at_a_time();
    write_test_file("lease-tests", name, data)
}

fn engine(backend: BackendChoice, leases: bool) -> Engine {
    Engine::builder()
        .backend(backend)
        .budget(32 << 20)
        .threads(8)
        .leases(leases)
        .build()
        .unwrap()
}

/// Read the whole file in 4 KiB pieces; returns what was read.
fn read_all_4k(f: &ahead::engine::File) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = f.read_at(&mut buf, out.len() as u64).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn a_leased_file_read_again_from_the_cache_asks_the_kernel_nothing() {
    let data = content(4 << 20, 1);
    let path = write_file("reread", &data);
    for backend in BACKENDS {
        let e = engine(backend, true);
        let f = e.open(&path).unwrap();
        assert!(read_all_4k(&f) == data, "{backend:?}: first pass");
        let before = e.stats();
        assert!(read_all_4k(&f) == data, "{backend:?}: second pass");
        let after = e.stats();
        let reads = after.reads - before.reads;
        assert_eq!(
            reads, 1024,
            "{backend:?}: 1024 pages (the read at the end is not counted)"
        );
        assert_eq!(
            after.size_checks - before.size_checks,
            0,
            "{backend:?}: a leased file's reads make no fstat ({:?})",
            after.fallbacks
        );
        // The first pass took the lease with at most two checks (one before, one after).
        assert!(after.size_checks <= 2, "{backend:?}: {}", after.size_checks);

        // Without leases: one fstat per read, as before leases.
        let e = engine(backend, false);
        let f = e.open(&path).unwrap();
        assert!(read_all_4k(&f) == data);
        let s = e.stats();
        assert_eq!(
            s.size_checks,
            s.reads + 1,
            "{backend:?}: without a lease (and the read at the end)"
        );
        assert!(s
            .fallbacks
            .iter()
            .any(|w| w.kind == FallbackKind::NoLease && w.message.contains("no read lease")));
    }
}

#[test]
fn a_writer_opening_a_leased_file_waits_microseconds_and_its_bytes_are_read() {
    for backend in BACKENDS {
        let data = content(2 << 20, 2);
        let path = write_file(&format!("writer-{backend:?}"), &data);
        let e = engine(backend, true);
        let f = e.open(&path).unwrap();
        assert!(read_all_4k(&f) == data);
        let checks = e.stats().size_checks;

        // This process opens it for writing: the open breaks the lease and waits for the
        // engine's handler to give it up.
        let t = Instant::now();
        let alone = one_at_a_time();
        let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        assert!(t.elapsed() < WRITER_WAITS_AT_MOST, "{:?}", t.elapsed());
        // Rewritten in place, same size. The break dropped the cached pages; the new
        // modification time would tell too where the clock gives it a new value (multigrain
        // timestamps, Linux 6.13+), but not within one clock tick on older kernels.
        let fresh = content(2 << 20, 3);
        writer.write_all_at(&fresh, 0).unwrap();
        assert!(read_all_4k(&f) == fresh, "{backend:?}: after the rewrite");
        let s = e.stats();
        assert!(
            s.fallbacks.iter().any(
                |w| w.kind == FallbackKind::Changed && w.message.contains("opened for writing")
            ),
            "{backend:?}: {:?}",
            s.fallbacks
        );
        // While the writer is open, every read checks.
        assert!(
            s.size_checks - checks >= 513,
            "{backend:?}: {}",
            s.size_checks
        );

        // The writer gone, the lease is taken again within 64 reads, and reads stop checking.
        drop(writer);
        drop(alone);
        assert!(read_all_4k(&f) == fresh);
        let checks = e.stats().size_checks;
        assert!(read_all_4k(&f) == fresh);
        assert_eq!(e.stats().size_checks, checks, "{backend:?}: leased again");
    }
}

#[test]
fn a_truncation_by_another_process_is_seen_by_the_next_read() {
    let data = content(3 << 20, 4);
    for backend in BACKENDS {
        let path = write_file(&format!("truncate-{backend:?}"), &data);
        let e = engine(backend, true);
        let f = e.open(&path).unwrap();
        assert!(read_all_4k(&f) == data);
        // dd opens for writing (blocking) and truncates at its seek offset.
        let t = Instant::now();
        let alone = one_at_a_time();
        let status = std::process::Command::new("dd")
            .args([
                "if=/dev/null",
                "bs=1",
                "seek=100000",
                "count=0",
                "status=none",
            ])
            .arg(format!("of={}", path.display()))
            .status()
            .expect("coreutils' dd");
        drop(alone);
        assert!(status.success());
        assert!(t.elapsed() < WRITER_WAITS_AT_MOST, "{:?}", t.elapsed());
        assert_eq!(
            f.len(),
            3 << 20,
            "nothing read yet: the size is the old one"
        );
        let plain = std::fs::File::open(&path).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        assert_eq!(f.read_at(&mut buf, 2 << 20).unwrap(), 0, "{backend:?}");
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 100_000, "{backend:?}");
        assert!(buf[..100_000] == pread(&plain, 0, 100_000)[..]);
        assert_eq!(f.len(), 100_000);
        // dd has exited, nobody holds it open for writing: leased again at once.
        let checks = e.stats().size_checks;
        for _ in 0..100 {
            f.read_at(&mut buf[..4096], 8192).unwrap();
        }
        assert_eq!(e.stats().size_checks, checks, "{backend:?}: leased again");
    }
}

#[test]
fn a_non_blocking_writer_is_refused_once_then_served() {
    // The cost of a lease, as documented: an open for writing with O_NONBLOCK (coreutils'
    // `truncate` makes one) cannot wait for the lease, so the kernel refuses it with EAGAIN
    // and tells the engine, which gives the lease up; the next attempt succeeds.
    let data = content(1 << 20, 5);
    let path = write_file("nonblocking", &data);
    let e = engine(BackendChoice::AUTO, true);
    let f = e.open(&path).unwrap();
    assert!(read_all_4k(&f) == data);
    let truncate = || {
        let _alone = one_at_a_time();
        std::process::Command::new("truncate")
            .args(["-s", "5000"])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("coreutils' truncate")
            .success()
    };
    assert!(!truncate(), "refused while the lease is held");
    let until = Instant::now() + WRITER_WAITS_AT_MOST;
    while !truncate() {
        assert!(
            Instant::now() < until,
            "still refused: the lease was not given up"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut buf = vec![0u8; 8192];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 5000);
    assert!(buf[..5000] == data[..5000]);
}
