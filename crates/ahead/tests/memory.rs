//! The engine's memory follows what it caches, not its budget: a large budget costs nothing at
//! start (a 4 GiB engine that read 100 KB, with readahead through io_uring, holds under
//! 8 MiB more), an engine that has cached N MiB holds at most N + 32 MiB more than before it was
//! built, one whose pages are dropped gives the memory back (below a page still cached too),
//! and a cache refilled does not grow
//! past what it held at its fullest; an engine built to pretouch holds its budget from the
//! start and no more after.
//! One test in its own binary, so no other test's memory is counted.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ahead::engine::{Advice, BackendChoice, Engine};

const MIB: u64 = 1 << 20;

mod common;
use common::{rss_bytes as rss, write_test_file};

fn make_file(name: &str, size: u64) -> PathBuf {
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    write_test_file("memory-tests", name, &data)
}

/// Read `path` whole through `engine` with 1 MiB reads, checking the bytes.
fn read_all(engine: &Engine, path: &Path) {
    read_all_in(engine, path, MIB as usize);
}

/// Read `path` whole through `engine` with reads of `size` bytes, checking the bytes.
fn read_all_in(engine: &Engine, path: &Path, size: usize) {
    let f = engine.open(path).unwrap();
    let mut buf = vec![0u8; size];
    let mut at = 0u64;
    loop {
        let n = f.read_at(&mut buf, at).unwrap();
        if n == 0 {
            break;
        }
        assert!(
            buf[..n]
                .iter()
                .enumerate()
                .all(|(i, &b)| b == ((at + i as u64) % 251) as u8),
            "bytes at {at}"
        );
        at += n as u64;
    }
}

/// Tell `engine` it will not need the first `len` bytes of `path`; the bytes it still caches.
fn drop_first(engine: &Engine, path: &Path, len: u64) -> u64 {
    let f = engine.open(path).unwrap();
    f.advise(Advice::DontNeed { offset: 0, len }).unwrap();
    drop(f);
    engine.stats().resident_pages * 4096
}

#[test]
fn memory_follows_what_the_cache_holds_not_the_budget() {
    let small = make_file("100k", 100_000);
    let big = make_file("64m", 64 * MIB);
    for backend in [BackendChoice::URING, BackendChoice::THREADS] {
        let before = rss();
        let t = Instant::now();
        let engine = Engine::builder()
            .backend(backend)
            .budget(4 << 30)
            .build()
            .unwrap();
        // In 4 KiB reads: the policy reads ahead of them, through io_uring, whose buffers
        // (two slabs, 16 MiB, pinned as one) are not registered for the arena's first slab.
        read_all_in(&engine, &small, 4096);
        let took = t.elapsed();
        let after_small = rss().saturating_sub(before);
        assert!(
            after_small < 8 * MIB,
            "{backend:?}: a 4 GiB engine that read 100 KB holds {} MiB",
            after_small / MIB
        );
        // Generous against a loaded CI machine; the unloaded figure is in BENCHMARKS.md.
        assert!(
            took.as_millis() < 1000,
            "{backend:?}: building a 4 GiB engine and reading 100 KB took {took:?}"
        );

        read_all(&engine, &big);
        let cached = engine.stats().resident_pages * 4096;
        assert!(cached >= 32 * MIB, "{backend:?}: {:?}", engine.stats());
        let held = rss().saturating_sub(before);
        assert!(
            held <= cached + 32 * MIB,
            "{backend:?}: caching {} MiB, the engine holds {} MiB",
            cached / MIB,
            held / MIB
        );

        // Dropped: the memory goes back to the system, down to what is still cached.
        let still = drop_first(&engine, &big, 64 * MIB);
        let dropped = rss().saturating_sub(before);
        assert!(
            dropped <= still + 32 * MIB,
            "{backend:?}: {} MiB still cached after don't-need, the engine holds {} MiB",
            still / MIB,
            dropped / MIB
        );
        // And read again: correct bytes (fixed buffers registered anew), no more than before.
        read_all(&engine, &big);
        let again = rss().saturating_sub(before);
        assert!(
            again <= cached + 32 * MIB,
            "{backend:?}: refilled, the engine holds {} MiB (it cached {} MiB)",
            again / MIB,
            cached / MIB
        );

        // Most of it dropped, the rest in the slots at the top of what the cache uses: the
        // free memory below a slot in use goes back too.
        let still = drop_first(&engine, &big, 48 * MIB);
        assert!(still >= 16 * MIB, "{backend:?}: {:?}", engine.stats());
        let held = rss().saturating_sub(before);
        assert!(
            held <= still + 32 * MIB,
            "{backend:?}: {} MiB still cached, at the top, after don't-need of the rest: the \
             engine holds {} MiB",
            still / MIB,
            held / MIB
        );
        // The slots given back are read into again, every byte right.
        read_all(&engine, &big);
        drop(engine);

        // Pretouched: the budget is held from the build, and reading adds nothing to it.
        let before = rss();
        let engine = Engine::builder()
            .backend(backend)
            .budget(48 * MIB)
            .pretouch(true)
            .build()
            .unwrap();
        let built = rss().saturating_sub(before);
        assert!(
            built >= 48 * MIB,
            "{backend:?}: a pretouched 48 MiB engine holds {} MiB after its build",
            built / MIB
        );
        read_all(&engine, &big);
        let held = rss().saturating_sub(before);
        assert!(
            held <= built + 16 * MIB,
            "{backend:?}: pretouched, it held {} MiB at build and {} MiB after reading",
            built / MIB,
            held / MIB
        );
        drop(engine);
    }
}
