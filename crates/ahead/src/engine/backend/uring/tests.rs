//! The ring against the cache, on a real file.

use super::*;
use crate::engine::cache::Cache;
use crate::engine::source::{self, OpenSettings};
use crate::engine::FileData;
use crate::policy::IoKind;
use crate::units::PAGE_SIZE;
use std::sync::Weak;
use std::time::Duration;
use std::time::Instant;

/// `path` opened (`O_DIRECT`) as file `id` of `cache`.
fn file_data(cache: &Cache, id: u32, path: &std::path::Path) -> Arc<FileData> {
    let settings = OpenSettings {
        direct: true,
        leases: false,
        remote_options: &[],
        with_tail: true,
    };
    let opened = source::open(path, &settings).unwrap();
    let size = opened.identity.size;
    Arc::new(FileData::new(
        id,
        cache.table(id, size.div_ceil(PAGE_SIZE)),
        size,
        opened.source,
        Arc::new(crate::engine::DeviceMeter::new(None)),
    ))
}

/// Records, as each read is completed, how many reads still wait in the backlog.
struct BacklogProbe {
    shared: OnceLock<Weak<Shared>>,
    backlog_at_completion: Mutex<Vec<usize>>,
}

impl Completer for BacklogProbe {
    fn complete(&self, op: Box<ReadOp>, result: io::Result<usize>) {
        assert_eq!(result.ok(), Some(op.len()));
        let waiting = self.shared.get().and_then(Weak::upgrade).map_or(0, |sh| {
            sh.submit
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .backlog
                .len()
        });
        self.backlog_at_completion.lock().unwrap().push(waiting);
    }
}

/// Eight 4 MiB reads: four fit under the byte cap, four wait. When the first completes, the
/// reaper has already moved the next into the ring (the device is refilled before readers
/// are woken), so the completer sees fewer than four still waiting.
#[test]
fn the_device_is_refilled_before_the_readers_are_woken() {
    const OP_PAGES: usize = 1024;
    const OPS: usize = 8;
    let op_bytes = OP_PAGES * PAGE_SIZE as usize;
    assert_eq!(MAX_IN_FLIGHT_BYTES / op_bytes, OPS / 2);
    let path = std::env::temp_dir().join(format!("ahead-uring-refill-{}", std::process::id()));
    std::fs::write(&path, vec![7u8; OPS * op_bytes]).unwrap();
    let cache = Cache::new(OPS * OP_PAGES).unwrap();
    let data = file_data(&cache, 0, &path);
    let probe = Arc::new(BacklogProbe {
        shared: OnceLock::new(),
        backlog_at_completion: Mutex::new(Vec::new()),
    });
    let arena = (cache.arena().base(), cache.arena().bytes());
    let backend = UringBackend::new(arena, probe.clone(), 1).expect("io_uring on this machine");
    let _ = probe.shared.set(Arc::downgrade(&backend.shared));
    {
        // All eight go into the backlog under one hold of the lock, so none can complete
        // before the last is queued; then as many as fit go to the ring, as `submit` does.
        let shared = &backend.shared;
        let mut s = shared.submit.lock().unwrap();
        for i in 0..OPS {
            let first = (i * OP_PAGES) as u32;
            s.backlog.push_back(Box::new(ReadOp {
                file: data.clone(),
                first_page: (i * OP_PAGES) as u64,
                slots: (first..first + OP_PAGES as u32).collect(),
                claim: 0,
                expected: op_bytes as u64,
                kind: IoKind::Ahead,
                submitted: Instant::now(),
                queued_behind: 0,
                iov: vec![libc::iovec {
                    iov_base: cache.arena().slot_ptr(first).cast(),
                    iov_len: op_bytes,
                }],
                direct: None,
            }));
        }
        assert!(shared.drain_backlog(&mut s));
        assert_eq!((s.in_flight, s.backlog.len()), (OPS / 2, OPS / 2));
        drop(s);
        shared.enter();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while probe.backlog_at_completion.lock().unwrap().len() < OPS {
        assert!(Instant::now() < deadline, "the reads did not complete");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(backend);
    let _ = std::fs::remove_file(&path);
    let seen = probe.backlog_at_completion.lock().unwrap().clone();
    assert!(seen[0] < OPS / 2, "backlog at each completion: {seen:?}");
}

/// Completions' results as they come.
struct Arrivals(Mutex<Vec<io::Result<usize>>>);

impl Completer for Arrivals {
    fn complete(&self, op: Box<ReadOp>, result: io::Result<usize>) {
        // The op (and its hold on the file) goes before the result is seen.
        drop(op);
        self.0.lock().unwrap().push(result);
    }
}

/// A file's slot in the ring's table is taken by its first read and given back when the
/// file is dropped; its reads through the slot, and a file's that found the table full
/// (through its descriptor), bring the file's own bytes.
#[test]
fn a_file_holds_a_ring_slot_while_it_lives_and_reads_right_through_it() {
    let dir = std::env::temp_dir().join(format!("ahead-uring-slots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cache = Cache::new(64).unwrap();
    let arrivals = Arc::new(Arrivals(Mutex::new(Vec::new())));
    let arena = (cache.arena().base(), cache.arena().bytes());
    let backend = UringBackend::new(arena, arrivals.clone(), 1).expect("io_uring here");
    let files = backend
        .shared
        .files
        .as_ref()
        .expect("a table of registered files");
    let free = || files.free.lock().unwrap().len();
    let all = free();
    assert!(all > 0);
    let open = |i: u8| {
        let path = dir.join(format!("f{i}"));
        std::fs::write(&path, vec![i; PAGE_SIZE as usize]).unwrap();
        file_data(&cache, i as u32, &path)
    };
    // Read page 0 of `file` into slot `slot` of the cache and wait for it: its first byte.
    let read = |file: &Arc<FileData>, slot: u32| {
        backend.submit(Box::new(ReadOp {
            file: file.clone(),
            first_page: 0,
            slots: vec![slot],
            claim: 0,
            expected: PAGE_SIZE,
            kind: IoKind::Sync,
            submitted: Instant::now(),
            queued_behind: 0,
            iov: vec![libc::iovec {
                iov_base: cache.arena().slot_ptr(slot).cast(),
                iov_len: PAGE_SIZE as usize,
            }],
            direct: None,
        }));
        let deadline = Instant::now() + Duration::from_secs(30);
        let result = loop {
            if let Some(done) = arrivals.0.lock().unwrap().pop() {
                break done;
            }
            assert!(Instant::now() < deadline, "the read did not complete");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(result.unwrap(), PAGE_SIZE as usize);
        // SAFETY: the read into this slot has completed; nothing else writes it.
        unsafe { *cache.arena().slot_ptr(slot) }
    };
    let (a, b) = (open(1), open(2));
    assert_eq!((read(&a, 0), read(&b, 1)), (1, 2));
    let (sa, sb) = (ring_slot(&a), ring_slot(&b));
    assert!(sa.is_some() && sb.is_some() && sa != sb, "{sa:?} {sb:?}");
    assert_eq!(free(), all - 2);
    drop(a);
    assert_eq!(free(), all - 1, "a dropped file gives its slot back");
    // The table full: a new file reads through its descriptor, and takes no slot later.
    let taken: Vec<u32> = std::mem::take(&mut *files.free.lock().unwrap());
    let c = open(3);
    assert_eq!(read(&c, 2), 3);
    assert_eq!(ring_slot(&c), None);
    files.free.lock().unwrap().extend(taken);
    assert_eq!(read(&c, 3), 3);
    assert_eq!(ring_slot(&c), None);
    // The slot given back is taken again, by a file read right.
    let d = open(4);
    assert_eq!(read(&d, 4), 4);
    assert!(ring_slot(&d).is_some());
    drop((b, c, d));
    assert_eq!(free(), all);
    drop(backend);
    let _ = std::fs::remove_dir_all(&dir);
}
