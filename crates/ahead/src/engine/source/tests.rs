//! The seam holds: a source that is not a local file (bytes in memory, no descriptor, as a
//! remote object will be) is read through the engine's cache, policies and miss path, under
//! every backend, and every byte is its own.

use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Event, Identity, Limits, ObjectKey, Opened, Source};
use crate::engine::backend::ReadOp;
use crate::engine::{BackendChoice, Engine, File};
use crate::units::PAGE_SIZE;

/// Bytes in memory, read by copying: what a source with no descriptor must do itself.
struct MemorySource {
    name: PathBuf,
    bytes: Arc<Vec<u8>>,
    reads: Arc<AtomicU64>,
}

impl Source for MemorySource {
    fn path(&self) -> &Path {
        &self.name
    }
    fn live_size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn current_size(&self, _events: &mut dyn FnMut(Event)) -> io::Result<u64> {
        Ok(self.live_size())
    }
    fn is_direct(&self) -> bool {
        true
    }
    fn copies_in(&self) -> bool {
        true
    }
    fn limits(&self) -> Limits {
        Limits::default()
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn read(&self, op: &ReadOp) -> io::Result<usize> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let at = (op.offset() as usize).min(self.bytes.len());
        Ok(op.copy_in(0, &self.bytes[at..]))
    }
    fn read_page_uncached(&self, page: u64, from: usize, dst: &mut [u8]) -> io::Result<usize> {
        let at = ((page * PAGE_SIZE) as usize + from).min(self.bytes.len());
        let n = dst.len().min(self.bytes.len() - at);
        dst[..n].copy_from_slice(&self.bytes[at..at + n]);
        Ok(n)
    }
}

/// `bytes` opened through `engine` as a [`MemorySource`] named `name` (object `key`), under
/// `adaptive`, counting its reads in `reads`.
fn open_memory(
    engine: &Engine,
    key: u32,
    name: &str,
    bytes: &Arc<Vec<u8>>,
    reads: &Arc<AtomicU64>,
) -> File {
    let opened = Opened {
        identity: Identity {
            object: ObjectKey::Test(key),
            size: bytes.len() as u64,
            version: 0,
        },
        source: Box::new(MemorySource {
            name: PathBuf::from(name),
            bytes: bytes.clone(),
            reads: reads.clone(),
        }),
        notes: Vec::new(),
    };
    let make = crate::policy::maker("adaptive").unwrap();
    engine
        .open_source(opened, &crate::engine::OpenOptions::new(), Box::new(make))
        .unwrap()
}

/// Read `file` from its start to its end in reads of `read_size` bytes, checking each against
/// `bytes` (the source's own) and that the end comes where `bytes` ends; `what` names the run.
pub(super) fn read_to_end_checking(file: &File, bytes: &[u8], read_size: usize, what: &str) {
    let mut buf = vec![0u8; read_size];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at).unwrap();
        if n == 0 {
            break;
        }
        assert!(
            buf[..n] == bytes[at as usize..at as usize + n],
            "{what}: bytes at {at}"
        );
        at += n as u64;
    }
    assert_eq!(at, bytes.len() as u64, "{what}");
}

#[test]
fn a_source_without_a_descriptor_reads_through_the_engine_under_every_backend() {
    let size = 5 * 1024 * 1024 + 777;
    let bytes: Arc<Vec<u8>> = Arc::new((0..size).map(|i| (i * 7 % 253) as u8).collect());
    for backend in [
        BackendChoice::URING,
        BackendChoice::THREADS,
        BackendChoice::SYNC,
    ] {
        let engine = Engine::builder()
            .backend(backend)
            .budget(2 << 20)
            .build()
            .unwrap();
        let reads = Arc::new(AtomicU64::new(0));
        let file = open_memory(&engine, 1, "memory://test", &bytes, &reads);
        assert_eq!(file.len(), size as u64);
        assert_eq!(file.path(), Path::new("memory://test"));
        // Forward in odd pieces, then a few reads back.
        read_to_end_checking(&file, &bytes, 10_007, &format!("{backend:?}"));
        let mut buf = vec![0u8; 10_007];
        for back in [3_000_000u64, 17, 1 << 20] {
            let n = file.read_at(&mut buf, back).unwrap();
            assert!(
                buf[..n] == bytes[back as usize..back as usize + n],
                "{backend:?}"
            );
        }
        // Requests read ahead may still be queued for the pool: every one is read once they
        // have all landed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut stats = engine.stats();
        while stats.in_flight_pages > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
            stats = engine.stats();
        }
        assert!(
            stats.ahead_requests > 0,
            "{backend:?}: the policy read ahead of the reader: {stats:?}"
        );
        assert_eq!(
            reads.load(Ordering::Relaxed),
            stats.requests,
            "{backend:?}: every request went to the source: {stats:?}"
        );
        assert!(
            stats.resident_pages * PAGE_SIZE <= 2 << 20,
            "{backend:?}: {stats:?}"
        );
    }
}

/// Pages of `engine`'s arena that hold memory from `from` bytes past its frontier to `to`.
fn resident_past_frontier(engine: &Engine, from: usize, to: usize) -> usize {
    let cache = &engine.inner.core.cache;
    let page = PAGE_SIZE as usize;
    let start = cache.touched_slots() * page + from;
    let end = (cache.touched_slots() * page + to).min(cache.slots() * page);
    let mut vec = vec![0u8; (end - start) / page];
    // SAFETY: a page-aligned range of the arena, with a byte of `vec` per page.
    let r = unsafe {
        libc::mincore(
            cache.arena().base().add(start).cast(),
            end - start,
            vec.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

#[test]
fn memory_is_faulted_in_ahead_for_a_local_file_not_for_a_source_that_copies_its_bytes_in() {
    // 16 MiB read whole into a 64 MiB cache: past the 8 MiB after which the cache's memory is
    // faulted in ahead of its growth, for reads the kernel does into it (a local file's). A
    // source that copies its bytes in (a remote object's) touches its memory itself, off the
    // reader's path: memory faulted in ahead for it would only be held.
    let size = 16 << 20;
    let bytes: Arc<Vec<u8>> = Arc::new((0..size).map(|i| (i * 7 % 253) as u8).collect());
    let local = std::env::temp_dir().join(format!("ahead-fault-ahead-{}", std::process::id()));
    std::fs::write(&local, bytes.as_slice()).unwrap();
    let build = || {
        Engine::builder()
            .backend(BackendChoice::THREADS)
            .budget(64 << 20)
            .build()
            .unwrap()
    };
    // Past the frontier by more than a huge page (one may be faulted in whole around the
    // last page read), up to 16 MiB: what the helper faults in, and nothing else does.
    let (from, to) = (4 << 20, 16 << 20);
    let all = (to - from) / PAGE_SIZE as usize;

    let engine = build();
    let file = engine.open(&local).unwrap();
    read_to_end_checking(&file, &bytes, 1 << 20, "local");
    let waited = std::time::Instant::now();
    let mut local_ahead = resident_past_frontier(&engine, from, to);
    while local_ahead < all && waited.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(10));
        local_ahead = resident_past_frontier(&engine, from, to);
    }
    drop((file, engine));
    std::fs::remove_file(&local).unwrap();
    assert_eq!(local_ahead, all, "a local file");

    let engine = build();
    let reads = Arc::new(AtomicU64::new(0));
    let file = open_memory(&engine, 2, "memory://fault-ahead", &bytes, &reads);
    read_to_end_checking(&file, &bytes, 1 << 20, "memory");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        resident_past_frontier(&engine, from, to),
        0,
        "a source that copies its bytes in"
    );
}
