//! The cache on its own: claims, completions, eviction and the lock-free hit path.

use super::*;

fn ready(cache: &Cache, t: &PageTable, first: u64, n: usize, result: io::Result<usize>) {
    ready_as(cache, t, first, n, result, true);
}

/// [`ready`], read ahead of its reader (`ahead`) or for a reader's own miss.
fn ready_as(
    cache: &Cache,
    t: &PageTable,
    first: u64,
    n: usize,
    result: io::Result<usize>,
    ahead: bool,
) {
    let run = cache.claim_run(t, first, n as u64);
    assert_eq!(run.pages, n as u64);
    let slots = cache.alloc(t.id, first, n, true);
    assert_eq!(slots.len(), n);
    for (i, &s) in slots.iter().enumerate() {
        // SAFETY: the slots were just allocated to this test and are in flight.
        unsafe {
            std::ptr::write_bytes(cache.arena().slot_ptr(s), (i as u8).wrapping_add(1), PAGE)
        };
    }
    cache.complete(
        t,
        first,
        &slots,
        run.claim,
        (n * PAGE) as u64,
        &result,
        ahead,
    );
}

fn read(cache: &Cache, t: &PageTable, page: u64, buf: &mut [u8]) -> Lookup {
    let mut stall = Duration::ZERO;
    cache.read_page(t, page, 0, buf, true, &mut stall)
}

#[test]
fn a_failed_read_reports_its_error_and_caches_nothing() {
    let cache = Cache::new(16).unwrap();
    let t = cache.table(1, 100);
    ready(
        &cache,
        &t,
        0,
        2,
        Err(io::Error::from_raw_os_error(libc::EIO)),
    );
    let mut buf = [0u8; 10];
    match read(&cache, &t, 0, &mut buf) {
        Lookup::Failed(f) => assert_eq!(f.error().raw_os_error(), Some(libc::EIO)),
        _ => panic!("expected the read's error"),
    }
    assert!(!cache.is_cached(&t, 0) && !cache.is_cached(&t, 1));
    assert_eq!(cache.resident_pages(), 0, "no slot stays pinned");
    // A retry claims the pages again and reads them.
    ready(&cache, &t, 0, 2, Ok(2 * PAGE));
    match read(&cache, &t, 1, &mut buf) {
        Lookup::Copied { n: 10, .. } => assert!(buf.iter().all(|&b| b == 2)),
        _ => panic!("expected the data"),
    }
}

#[test]
fn a_short_read_caches_only_the_pages_it_filled() {
    let cache = Cache::new(16).unwrap();
    let t = cache.table(1, 100);
    // Three pages asked, one and a half returned (a file truncated meanwhile).
    ready(&cache, &t, 0, 3, Ok(PAGE + PAGE / 2));
    assert!(cache.is_cached(&t, 0));
    assert!(!cache.is_cached(&t, 1) && !cache.is_cached(&t, 2));
    assert_eq!(cache.resident_pages(), 1);
}

#[test]
fn eviction_keeps_to_the_slots_and_remembers_unused_pages() {
    let cache = Cache::new(8).unwrap();
    let t = cache.table(1, 1000);
    for p in 0..8 {
        ready(&cache, &t, p, 1, Ok(PAGE));
    }
    // Full: the next page evicts one that nobody used (wasted, with a shadow).
    ready(&cache, &t, 100, 1, Ok(PAGE));
    assert_eq!(cache.resident_pages(), 8);
    assert_eq!(cache.counters.wasted_pages.load(Ordering::Relaxed), 1);
    let evicted = (0..8).find(|&p| !cache.is_cached(&t, p)).unwrap();
    // Reading it again is a refault.
    let run = cache.claim_run(&t, evicted, 1);
    assert_eq!((run.pages, run.refaults), (1, 1));
}

#[test]
fn a_page_back_in_the_slot_it_left_is_not_the_word_a_reader_loaded() {
    // One slot: page 0 lands in it, is evicted for page 1, and lands in it again. A reader
    // descheduled mid-copy from the first landing to after the second copied part page 1's
    // bytes; the word it checks again must not look as it did when it began.
    let cache = Cache::new(1).unwrap();
    let t = cache.table(1, 10);
    ready(&cache, &t, 0, 1, Ok(PAGE));
    let w = t.get(0).unwrap();
    let first = w.load(Ordering::Acquire);
    ready(&cache, &t, 1, 1, Ok(PAGE));
    ready(&cache, &t, 0, 1, Ok(PAGE));
    let again = w.load(Ordering::Acquire);
    assert_eq!(word::slot(first), word::slot(again), "the same slot");
    assert_eq!(word::state(again), word::READY);
    let masked = |v: u64| v & !(word::MARKER | word::USED);
    assert_ne!(masked(first), masked(again));
}

#[test]
fn a_copy_raced_by_an_eviction_is_discarded() {
    let cache = Cache::new(1).unwrap();
    let t = cache.table(1, 10);
    ready(&cache, &t, 0, 1, Ok(PAGE));
    let w = t.get(0).unwrap();
    let mut buf = [0u8; 8];
    assert!(cache.try_copy(w, 0, &mut buf).is_some());
    // Evict page 0 and put page 1 in its slot: a copy through page 0's old word must fail.
    ready(&cache, &t, 1, 1, Ok(PAGE));
    assert!(cache.try_copy(w, 0, &mut buf).is_none());
    assert!(matches!(read(&cache, &t, 0, &mut buf), Lookup::Absent));
}

/// Fill `slots` with `byte` and complete them as pages `first..` under `claim`.
fn land(cache: &Cache, t: &PageTable, first: u64, slots: &[u32], claim: u32, byte: u8) {
    for &s in slots {
        // SAFETY: the slots were allocated to this test's read and are in flight.
        unsafe { std::ptr::write_bytes(cache.arena().slot_ptr(s), byte, PAGE) };
    }
    let len = slots.len() * PAGE;
    cache.complete(t, first, slots, claim, len as u64, &Ok(len), false);
}

/// A read claimed before the file changed completes after the change, and after a read of the
/// new contents claimed the same pages: its old bytes land nowhere, and the new read's do.
/// Either order of the two completions gives the new bytes.
#[test]
fn a_read_claimed_before_a_change_never_lands_after_it() {
    for new_first in [false, true] {
        let cache = Cache::new(16).unwrap();
        let t = cache.table(1, 8);
        let old = cache.claim_run(&t, 0, 4);
        let old_slots = cache.alloc(1, 0, 4, true);
        assert_eq!(old.pages, 4);
        // The file changes: every page goes, those in flight too.
        cache.invalidate(&t, 8);
        assert!(
            !cache.is_cached(&t, 0),
            "a page in flight outlived the change"
        );
        let new = cache.claim_run(&t, 0, 4);
        assert_eq!(
            new.pages, 4,
            "the pages are claimed again for the new contents"
        );
        assert_ne!(new.claim, old.claim);
        let new_slots = cache.alloc(1, 0, 4, true);
        if new_first {
            land(&cache, &t, 0, &new_slots, new.claim, b'N');
            land(&cache, &t, 0, &old_slots, old.claim, b'O');
        } else {
            land(&cache, &t, 0, &old_slots, old.claim, b'O');
            land(&cache, &t, 0, &new_slots, new.claim, b'N');
        }
        for p in 0..4 {
            let mut buf = [0u8; 16];
            match read(&cache, &t, p, &mut buf) {
                Lookup::Copied { n: 16, .. } => assert_eq!(buf, [b'N'; 16], "page {p}"),
                _ => panic!("page {p} not ready"),
            }
        }
        // The old read's slots are free again, not leaked.
        assert_eq!(cache.resident_pages(), 4);
    }
}

/// A reader waiting for a page in flight when the file changes is woken and finds it absent
/// (to read it again), rather than waiting for the old read.
#[test]
fn a_reader_waiting_on_a_page_dropped_by_a_change_is_woken() {
    let cache = Arc::new(Cache::new(16).unwrap());
    let t = cache.table(1, 8);
    let old = cache.claim_run(&t, 0, 1);
    assert_eq!(old.pages, 1);
    let waiter = {
        let (cache, t) = (cache.clone(), t.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8];
            matches!(read(&cache, &t, 0, &mut buf), Lookup::Absent)
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    cache.invalidate(&t, 8);
    assert!(waiter.join().unwrap(), "the waiter saw the old read's page");
}

/// Don't-need advice leaves pages in flight, as the kernel's does.
#[test]
fn dont_need_leaves_pages_in_flight() {
    let cache = Cache::new(16).unwrap();
    let t = cache.table(1, 8);
    let run = cache.claim_run(&t, 0, 2);
    let slots = cache.alloc(1, 0, 2, true);
    cache.drop_range(&t, 0, 8);
    assert!(cache.is_in_flight(&t, 0));
    land(&cache, &t, 0, &slots, run.claim, 7);
    assert!(cache.is_cached(&t, 1));
}

/// Hit speed against a bare copy: `cargo test --release -p ahead --lib hit_speed --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn hit_speed() {
    let n = 32768usize;
    let cache = Cache::new(n).unwrap();
    let t = cache.table(1, n as u64);
    for p in (0..n as u64).step_by(256) {
        let run = cache.claim_run(&t, p, 256);
        let slots = cache.alloc(1, p, run.pages as usize, true);
        let len = slots.len() * PAGE;
        cache.complete(&t, p, &slots, run.claim, len as u64, &Ok(len), false);
    }
    let mut buf = vec![0u8; PAGE];
    let mut stall = Duration::ZERO;
    for _ in 0..3 {
        let t0 = Instant::now();
        for _ in 0..8 {
            for p in 0..n as u64 {
                let _ = cache.read_page(&t, p, 0, &mut buf, false, &mut stall);
            }
        }
        let mb = (8 * n * PAGE) as f64 / 1e6;
        eprintln!("read_page: {:.0} MB/s", mb / t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        for _ in 0..8 {
            for s in 0..n as u32 {
                // SAFETY: every slot is ready and nothing else runs.
                unsafe {
                    std::ptr::copy_nonoverlapping(cache.arena().slot_ptr(s), buf.as_mut_ptr(), PAGE)
                };
                std::hint::black_box(&buf);
            }
        }
        eprintln!("copy alone: {:.0} MB/s", mb / t0.elapsed().as_secs_f64());
    }
}

/// Pages of the arena's slots `[from, to)` that hold memory (`mincore`).
fn resident_in(cache: &Cache, from: usize, to: usize) -> usize {
    let mut vec = vec![0u8; to - from];
    // SAFETY: a range of the arena, page aligned, with a byte of `vec` per page.
    let r = unsafe {
        libc::mincore(
            cache.arena().base().add(from * PAGE).cast(),
            (to - from) * PAGE,
            vec.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

/// [`resident_in`] once all of `[from, to)` holds memory, or after 10 s.
fn resident_soon(cache: &Cache, from: usize, to: usize) -> usize {
    let waited = Instant::now();
    while resident_in(cache, from, to) < to - from && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    resident_in(cache, from, to)
}

/// A cache with room past where its memory starts being faulted in ahead (`AFTER_BYTES`,
/// then `AHEAD_BYTES`, then 32 MiB), holding half of `AFTER_BYTES` of one file: the cache, the
/// file's table, and a MiB, the helper's start and its reach, in slots.
fn small_cache_below_fault_ahead() -> (Cache, Arc<PageTable>, usize, usize, usize) {
    use fault_ahead::{AFTER_BYTES, AHEAD_BYTES};
    let mib = (1 << 20) / PAGE;
    let (after, ahead) = (AFTER_BYTES / PAGE, AHEAD_BYTES / PAGE);
    let slots = after + ahead + 32 * mib;
    let cache = Cache::new(slots).unwrap();
    let t = cache.table(1, slots as u64);
    ready(&cache, &t, 0, after / 2, Ok(after / 2 * PAGE));
    (cache, t, mib, after, ahead)
}

#[test]
fn a_growing_cache_finds_its_memory_faulted_in_ahead_and_gives_it_back_with_the_rest() {
    let (cache, t, mib, after, ahead) = small_cache_below_fault_ahead();
    let slots = cache.slots();
    // A huge page may be faulted in whole around a touched page: 2 MiB of margin.
    let margin = 2 * mib;
    // A small cache: nothing past what it holds.
    cache.note_growth();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(resident_in(&cache, after / 2 + margin, slots), 0);
    // Past `AFTER_BYTES`: the next `AHEAD_BYTES` hold memory before any read reaches them,
    // and nothing past them does.
    // (Enough, once dropped, for trim to give back: `TRIM_MIN_BYTES`.)
    let frontier = after + TRIM_MIN_BYTES / PAGE;
    ready(
        &cache,
        &t,
        (after / 2) as u64,
        frontier - after / 2,
        Ok((frontier - after / 2) * PAGE),
    );
    cache.note_growth();
    assert_eq!(resident_soon(&cache, frontier, frontier + ahead), ahead);
    assert_eq!(resident_in(&cache, frontier + ahead + margin, slots), 0);
    // Faulting in changed no byte a read put there.
    let mut buf = [0u8; 4];
    for (page, byte) in [
        (0, 1),
        (after as u64 / 2 - 1, (after / 2) as u8),
        (after as u64 / 2, 1),
    ] {
        assert!(matches!(
            read(&cache, &t, page, &mut buf),
            Lookup::Copied { n: 4, .. }
        ));
        assert_eq!(buf, [byte; 4], "page {page}");
    }
    // Every page dropped: trim gives back the memory faulted in ahead with the rest.
    cache.drop_range(&t, 0, frontier as u64);
    assert!(cache.trim(PAGE, |_, _| {}) > 0);
    assert_eq!(resident_in(&cache, margin, slots), 0);
    // And the cache grows again, the helper ahead of it again.
    ready(&cache, &t, 0, frontier, Ok(frontier * PAGE));
    cache.note_growth();
    assert_eq!(resident_soon(&cache, frontier, frontier + ahead), ahead);
}

#[test]
fn memory_the_system_will_not_fault_in_ahead_is_said_why_and_left_to_the_reads() {
    use fault_ahead::{AFTER_BYTES, CHUNK_BYTES};
    // Memory that cannot be faulted in (no access at all: MADV_POPULATE_WRITE fails with
    // EINVAL, as on a kernel before 5.14).
    let bytes = AFTER_BYTES + 4 * CHUNK_BYTES;
    // SAFETY: a new anonymous mapping, checked, unmapped below; nothing reads or writes it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let helper = FaultAhead::new(base.cast(), bytes / PAGE);
    assert_eq!(helper.refused(), None);
    helper.frontier_moved(AFTER_BYTES / PAGE);
    let waited = Instant::now();
    while helper.refused().is_none() && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let why = helper.refused().expect("the refusal is kept");
    assert!(
        why.contains("MADV_POPULATE_WRITE") && why.contains("os error 22"),
        "{why}"
    );
    drop(helper);
    // SAFETY: the mapping made above; the helper that used its address has stopped.
    unsafe { libc::munmap(base, bytes) };
}

/// A scan reading `pages` of a file one page at a time (each read in, then read, then passed
/// over), as the engine's reader does: returns how far the frontier (the memory touched) went.
fn scan(cache: &Cache, t: &PageTable, pages: u64) -> usize {
    for p in 0..pages {
        ready(cache, t, p, 1, Ok(PAGE));
        use_page(cache, t, p);
        cache.pass_over(t, p, p + 1);
    }
    cache.touched_slots()
}

/// A reader copies page `p` out: it must be there.
fn use_page(cache: &Cache, t: &PageTable, p: u64) {
    let mut buf = [0u8; 8];
    assert!(matches!(read(cache, t, p, &mut buf), Lookup::Copied { .. }));
}

fn dropped_behind(cache: &Cache) -> u64 {
    cache.counters.dropped_behind_pages.load(Ordering::Relaxed)
}

#[test]
fn a_scan_of_a_file_over_a_quarter_of_the_cache_runs_in_a_ring_and_steps_back_within_its_lag() {
    // 4096 slots; a file of 2048 pages is over a quarter of them: read through a ring.
    let cache = Cache::new(4096).unwrap();
    cache.drop_behind();
    let t = cache.table(1, 2048);
    assert!(t.bulk());
    let touched = scan(&cache, &t, 2048);
    let ring = (BEHIND_LAG + 2 * BEHIND_BATCH) as usize;
    assert!(
        touched <= ring,
        "touched {touched} slots, the ring is {ring}"
    );
    // All but the lag's worth, which the scan's end leaves.
    assert_eq!(dropped_behind(&cache), 2048 - BEHIND_LAG);
    // The pages within the lag behind the scan are still there; those before it are not.
    assert!((2048 - BEHIND_LAG..2048).all(|p| cache.is_cached(&t, p)));
    assert!(!cache.is_cached(&t, 0));

    // A file of a quarter of the cache or less is cached whole, for a re-read.
    let small = cache.table(2, 1024);
    assert!(!small.bulk());
    scan(&cache, &small, 1024);
    assert!((0..1024).all(|p| cache.is_cached(&small, p)));

    // And with drop-behind off (the default), a large file too.
    let whole = Cache::new(4096).unwrap();
    let t = whole.table(1, 2048);
    assert_eq!(scan(&whole, &t, 2048), 2048);
}

#[test]
fn a_batch_not_every_page_of_which_was_used_is_not_dropped() {
    let cache = Cache::new(4096).unwrap();
    cache.drop_behind();
    let t = cache.table(1, 2048);
    // Every page read in, every other one used (a strided reader): no batch is whole.
    for p in 0..2048 {
        ready(&cache, &t, p, 1, Ok(PAGE));
        if p % 2 == 0 {
            use_page(&cache, &t, p);
        }
        cache.pass_over(&t, p, p + 1);
    }
    assert_eq!(dropped_behind(&cache), 0);
    assert_eq!(cache.touched_slots(), 2048);
}

#[test]
fn pages_read_for_a_readers_own_misses_are_never_dropped_behind() {
    let cache = Cache::new(4096).unwrap();
    cache.drop_behind();
    let t = cache.table(1, 2048);
    // A random reader's large reads, each its own miss (512 KiB, as tiobench's), that together
    // use every page: still cached, for its repeats.
    for first in (0..2048).step_by(128) {
        ready_as(&cache, &t, first, 128, Ok(128 * PAGE), false);
        for p in first..first + 128 {
            use_page(&cache, &t, p);
        }
        cache.pass_over(&t, first, first + 128);
    }
    assert_eq!(dropped_behind(&cache), 0);
    assert!((0..2048).all(|p| cache.is_cached(&t, p)));
}

/// Pages read ahead and not yet used, with slots freed here and there among them (a scan's
/// batches dropped behind it while reads ahead land out of order, a range let go by advice):
/// while the budget has room above the frontier, the hand takes only the free slots, and no
/// page read ahead is evicted for a read. (It used to clear the reference bits of the pages it
/// passed on the way to a free slot and take them on its next turn: pages read twice, and the
/// file's window cut for thrashing, in a cache a quarter full.)
#[test]
fn no_page_read_ahead_is_evicted_while_the_cache_has_room() {
    let cache = Cache::new(4096).unwrap();
    let t = cache.table(1, 8192);
    for first in (0..1024).step_by(64) {
        ready(&cache, &t, first, 64, Ok(64 * PAGE));
    }
    // Freed in the middle, then further on, then behind where the hand has passed.
    let mut next = 1024;
    for freed in [500, 900, 10] {
        cache.drop_range(&t, freed, freed + 64);
        ready(&cache, &t, next, 64, Ok(64 * PAGE));
        next += 64;
    }
    // More than is free: the rest grows the frontier.
    cache.drop_range(&t, 300, 310);
    ready(&cache, &t, next, 64, Ok(64 * PAGE));
    assert_eq!(cache.counters.wasted_pages.load(Ordering::Relaxed), 0);
    assert_eq!(cache.touched_slots(), 1024 + 64 - 10);
    assert!((0..1024)
        .filter(|p| !(500..564).contains(p)
            && !(900..964).contains(p)
            && !(10..74).contains(p)
            && !(300..310).contains(p))
        .all(|p| cache.is_cached(&t, p)));

    // Full, the clock evicts as before.
    let full = Cache::new(64).unwrap();
    let t = full.table(1, 1000);
    ready(&full, &t, 0, 64, Ok(64 * PAGE));
    full.drop_range(&t, 10, 11);
    ready(&full, &t, 100, 2, Ok(2 * PAGE));
    assert_eq!(full.counters.wasted_pages.load(Ordering::Relaxed), 1);
}

#[test]
fn fresh_memory_is_charged_only_while_the_cache_grows_into_it() {
    let (cache, t, mib, after, ahead) = small_cache_below_fault_ahead();
    // Nothing faulted in ahead yet: nothing measured.
    assert_eq!(cache.first_touch_ns(), 0);
    // Past `AFTER_BYTES` the helper faults memory in ahead, timing it: the cache, growing into
    // fresh memory, charges what the helper measured (0 where a page took under a
    // microsecond: memory that cheap is not worth charging).
    let frontier = after + 4 * mib;
    ready(
        &cache,
        &t,
        (after / 2) as u64,
        frontier - after / 2,
        Ok((frontier - after / 2) * PAGE),
    );
    cache.note_growth();
    resident_soon(&cache, frontier, frontier + ahead);
    let measured = cache.fault_ahead.first_touch_ns();
    assert_eq!(cache.first_touch_ns(), measured);
    cache.fault_ahead.set_first_touch_ns(5_000);
    assert_eq!(cache.first_touch_ns(), 5_000);
    // Pages dropped below the frontier: the next pages reuse that memory, at no charge.
    cache.drop_range(&t, 0, 16);
    assert_eq!(cache.first_touch_ns(), 0);
}
