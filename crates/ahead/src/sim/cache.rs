//! The page cache model: a fixed capacity in pages, one LRU over every file, and per page the
//! facts readahead cares about (present, marker, used, when its data arrives, who read it).
//!
//! Pages may belong to large folios (naturally aligned runs of 2^order pages, as the kernel
//! allocates for readahead since 6.16). Each page records its folio's order; the readahead
//! marker lives on the folio's first page and answers for the whole folio. Eviction stays per
//! page: a model of memory pressure, not of the kernel's folio-granular reclaim.
//!
//! Lookups are a direct index per file (`Vec` from page to slot), and the LRU is an intrusive
//! doubly linked list over a slab of slots, so a hit costs a few memory accesses and no
//! allocation: the simulator has to run tens of millions of page accesses a second.
//!
//! [`Eviction::Clock`] models the engine's cache instead (`engine/cache.rs`), slot for slot:
//! the slab is its arena, slots handed out from the start while none below is free, then a
//! hand that clears reference bits (set when a page is read in and when it is used) and takes
//! the first free slot or page whose bit is clear. With it the two drivers evict the same
//! pages, and so agree under memory pressure (the engine's test of the two drivers).

use crate::units::PageRange;

const NIL: u32 = u32::MAX;

const MARKER: u8 = 1;
const USED: u8 = 2;

#[derive(Clone, Copy, Debug)]
struct Slot {
    file: u32,
    owner: u32,
    page: u64,
    prev: u32,
    next: u32,
    ready_ns: u64,
    loaded_seq: u64,
    flags: u8,
    order: u8,
}

/// A page that was evicted, and whether anyone had used it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Evicted {
    pub file: u32,
    pub page: u64,
    pub owner: u32,
    pub used: bool,
}

/// How the cache chooses the page to evict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Eviction {
    /// The kernel's page cache: the least recently used page (one list standing for its
    /// active and inactive lists).
    #[default]
    Lru,
    /// The engine's cache: CLOCK over its arena's slots (see the module comment). It also
    /// remembers no more evicted pages (to recognise a refault) than it has slots, as the
    /// engine does.
    Clock,
}

/// The engine's CLOCK: the hand, a reference bit per slot, how many slots below the frontier
/// are free, and the slots read into since the reads last completed (in flight: the hand
/// passes them by). The frontier, the slots handed out so far, is the slab's length.
#[derive(Debug)]
struct ClockHand {
    hand: usize,
    refbit: Vec<bool>,
    in_flight: Vec<bool>,
    pending: Vec<u32>,
    free_below: usize,
}

/// Pages per chunk of a file's index: 2^9 = 512.
const INDEX_CHUNK_SHIFT: u32 = 9;
const INDEX_CHUNK: usize = 1 << INDEX_CHUNK_SHIFT;

/// One file's pages: the slot of each cached page (`NIL` if none), in chunks of
/// [`INDEX_CHUNK`] made as pages of them are first cached. A file read only at its far end
/// costs a pointer per chunk before it (4 MiB at 1 TiB), not a word per page.
#[derive(Debug, Default)]
struct PageIndex {
    chunks: Vec<Option<Box<[u32; INDEX_CHUNK]>>>,
    /// One past the highest page ever cached (as the kernel's XArray keeps its height).
    limit: u64,
}

impl PageIndex {
    #[inline]
    fn get(&self, page: u64) -> u32 {
        match self.chunks.get((page >> INDEX_CHUNK_SHIFT) as usize) {
            Some(Some(chunk)) => chunk[page as usize & (INDEX_CHUNK - 1)],
            _ => NIL,
        }
    }

    fn set(&mut self, page: u64, slot: u32) {
        let c = (page >> INDEX_CHUNK_SHIFT) as usize;
        if slot == NIL && c >= self.chunks.len() {
            return;
        }
        if slot != NIL {
            self.limit = self.limit.max(page + 1);
        }
        if c >= self.chunks.len() {
            self.chunks.resize_with(c + 1, || None);
        }
        let chunk = self.chunks[c].get_or_insert_with(|| Box::new([NIL; INDEX_CHUNK]));
        chunk[page as usize & (INDEX_CHUNK - 1)] = slot;
    }

    /// Whether any page in `[start, end)` is cached.
    fn any_in(&self, start: u64, end: u64) -> bool {
        let end = end.min(self.limit());
        let mut p = start;
        while p < end {
            let c = (p >> INDEX_CHUNK_SHIFT) as usize;
            let chunk_end = (((c as u64) + 1) << INDEX_CHUNK_SHIFT).min(end);
            if let Some(chunk) = &self.chunks[c] {
                let (from, to) = (
                    p as usize & (INDEX_CHUNK - 1),
                    (chunk_end - 1) as usize & (INDEX_CHUNK - 1),
                );
                if chunk[from..=to].iter().any(|&s| s != NIL) {
                    return true;
                }
            }
            p = chunk_end;
        }
        false
    }

    /// One past the highest page ever cached.
    fn limit(&self) -> u64 {
        self.limit
    }
}

/// The page cache model.
#[derive(Debug)]
pub(crate) struct PageCache {
    capacity: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    head: u32, // most recently used
    tail: u32, // least recently used
    files: Vec<PageIndex>,
    len: usize,
    /// `Some` under [`Eviction::Clock`]: then the LRU list is not kept.
    clock: Option<ClockHand>,
}

impl PageCache {
    /// The eviction it models.
    pub(crate) fn eviction(&self) -> Eviction {
        if self.clock.is_some() {
            Eviction::Clock
        } else {
            Eviction::Lru
        }
    }

    pub(crate) fn new(capacity_pages: usize, eviction: Eviction) -> PageCache {
        PageCache {
            capacity: capacity_pages.max(1),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            files: Vec::new(),
            len: 0,
            clock: (eviction == Eviction::Clock).then(|| ClockHand {
                hand: 0,
                refbit: Vec::new(),
                in_flight: Vec::new(),
                pending: Vec::new(),
                free_below: 0,
            }),
        }
    }

    /// Evicted pages remembered at most, to recognise a refault (`usize::MAX`: no bound).
    pub(crate) fn shadow_limit(&self) -> usize {
        if self.clock.is_some() {
            self.capacity
        } else {
            usize::MAX
        }
    }

    /// Register a file; its pages are looked up by index from then on.
    pub(crate) fn add_file(&mut self) -> u32 {
        self.files.push(PageIndex::default());
        (self.files.len() - 1) as u32
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn slot_of(&self, file: u32, page: u64) -> u32 {
        self.files[file as usize].get(page)
    }

    #[inline]
    pub(crate) fn contains(&self, file: u32, page: u64) -> bool {
        self.slot_of(file, page) != NIL
    }

    /// The folio holding a cached page: its first page and its order.
    #[inline]
    pub(crate) fn folio(&self, file: u32, page: u64) -> Option<(u64, u8)> {
        let s = self.slot_of(file, page);
        if s == NIL {
            return None;
        }
        let order = self.slots[s as usize].order;
        Some((page & !((1u64 << order) - 1), order))
    }

    /// The pages of the folio holding a cached page (the page alone if it is absent).
    #[inline]
    pub(crate) fn folio_of(&self, file: u32, page: u64) -> PageRange {
        self.folio(file, page)
            .map_or(PageRange::of_len(page, 1), |(start, order)| {
                PageRange::of_len(start, 1u64 << order)
            })
    }

    /// Whether the folio holding `page` carries the readahead marker (an absent page's
    /// "folio" is itself, which has no slot).
    pub(crate) fn has_marker(&self, file: u32, page: u64) -> bool {
        let s = self.slot_of(file, self.folio_of(file, page).first);
        s != NIL && self.slots[s as usize].flags & MARKER != 0
    }

    /// Clear the marker of the folio holding `page`.
    pub(crate) fn clear_marker(&mut self, file: u32, page: u64) {
        let s = self.slot_of(file, self.folio_of(file, page).first);
        if s != NIL {
            self.slots[s as usize].flags &= !MARKER;
        }
    }

    fn unlink(&mut self, s: u32) {
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    fn push_front(&mut self, s: u32) {
        self.slots[s as usize].prev = NIL;
        self.slots[s as usize].next = self.head;
        if self.head != NIL {
            self.slots[self.head as usize].prev = s;
        }
        self.head = s;
        if self.tail == NIL {
            self.tail = s;
        }
    }

    /// Evict the least recently used page.
    fn evict_lru(&mut self) -> Option<Evicted> {
        let s = self.tail;
        if s == NIL {
            return None;
        }
        self.unlink(s);
        let ev = self.vacate(s);
        self.free.push(s);
        Some(ev)
    }

    /// Slot `s` no longer holds its page: the page is gone from its file's index.
    fn vacate(&mut self, s: u32) -> Evicted {
        let slot = self.slots[s as usize];
        self.files[slot.file as usize].set(slot.page, NIL);
        self.slots[s as usize].file = NIL;
        self.len -= 1;
        Evicted {
            file: slot.file,
            page: slot.page,
            owner: slot.owner,
            used: slot.flags & USED != 0,
        }
    }

    /// The engine's allocation of one slot (`Cache::alloc`): a new slot at the frontier while
    /// none below it is free and the arena has room; else the hand's first free slot or page
    /// whose reference bit is clear, clearing set bits as it passes and passing by pages in
    /// flight. The engine's sync backend, which this models, reads a policy call's requests
    /// once the call returns: until [`Self::complete_reads`], the pages placed are in flight.
    /// `None`: a new slot, at the slab's end.
    fn clock_take(&mut self) -> (Option<u32>, Option<Evicted>) {
        let frontier = self.slots.len();
        let c = self.clock.as_mut().expect("clock eviction");
        if frontier < self.capacity && c.free_below == 0 {
            c.refbit.push(false);
            c.in_flight.push(true);
            c.pending.push(frontier as u32);
            return (None, None);
        }
        let mut steps = 0;
        loop {
            let c = self.clock.as_mut().expect("clock eviction");
            let s = c.hand % frontier;
            c.hand = (s + 1) % frontier;
            steps += 1;
            // Past two turns every slot is in flight (a request larger than the cache, which
            // the engine would cut short): take the slot anyway.
            let any = steps > 2 * frontier;
            if c.in_flight[s] && !any {
                continue;
            }
            c.in_flight[s] = true;
            c.pending.push(s as u32);
            if self.slots[s].file == NIL {
                c.free_below -= 1;
                return (Some(s as u32), None);
            }
            if !any && std::mem::take(&mut c.refbit[s]) {
                c.in_flight[s] = false;
                c.pending.pop();
                continue;
            }
            return (Some(s as u32), Some(self.vacate(s as u32)));
        }
    }

    /// Under [`Eviction::Clock`], the reads placed since the last call complete: their pages
    /// are referenced, and the hand may take them again. (A no-op under LRU.)
    pub(crate) fn complete_reads(&mut self) {
        if let Some(c) = self.clock.as_mut() {
            for s in c.pending.drain(..) {
                c.in_flight[s as usize] = false;
                c.refbit[s as usize] = true;
            }
        }
    }

    /// Insert an absent page at the MRU end, evicting the LRU page first if the cache is full.
    /// `order`: the order of the folio the page belongs to (`marker` only on its first page).
    /// Returns what was evicted, if anything.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &mut self,
        file: u32,
        owner: u32,
        page: u64,
        ready_ns: u64,
        loaded_seq: u64,
        marker: bool,
        order: u8,
    ) -> Option<Evicted> {
        debug_assert!(!self.contains(file, page));
        let (taken, evicted) = if self.clock.is_some() {
            self.clock_take()
        } else if self.len >= self.capacity {
            (None, self.evict_lru())
        } else {
            (None, None)
        };
        let slot = Slot {
            file,
            owner,
            page,
            prev: NIL,
            next: NIL,
            ready_ns,
            loaded_seq,
            flags: if marker { MARKER } else { 0 },
            order,
        };
        let s = match taken.or_else(|| self.free.pop()) {
            Some(s) => {
                self.slots[s as usize] = slot;
                s
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.files[file as usize].set(page, s);
        if self.clock.is_none() {
            self.push_front(s);
        }
        self.len += 1;
        evicted
    }

    /// The reader touches a cached page: move it to the MRU end (under CLOCK: set its
    /// reference bit) and mark it used. Returns when its data is ready, when it was loaded, and
    /// whether this is its first use.
    #[inline]
    pub(crate) fn touch(&mut self, file: u32, page: u64) -> Option<Touched> {
        let s = self.slot_of(file, page);
        if s == NIL {
            return None;
        }
        match self.clock.as_mut() {
            Some(c) => c.refbit[s as usize] = true,
            None if self.head != s => {
                self.unlink(s);
                self.push_front(s);
            }
            None => {}
        }
        let slot = &mut self.slots[s as usize];
        let first_use = slot.flags & USED == 0;
        slot.flags |= USED;
        Some(Touched {
            ready_ns: slot.ready_ns,
            loaded_seq: slot.loaded_seq,
            first_use,
        })
    }

    /// Drop a page (`POSIX_FADV_DONTNEED`).
    pub(crate) fn remove(&mut self, file: u32, page: u64) -> Option<Evicted> {
        let s = self.slot_of(file, page);
        if s == NIL {
            return None;
        }
        let ev = match self.clock.as_mut() {
            Some(c) => {
                // A free slot below the frontier: the hand takes it when it comes by.
                c.free_below += 1;
                self.vacate(s)
            }
            None => {
                self.unlink(s);
                let ev = self.vacate(s);
                self.free.push(s);
                ev
            }
        };
        Some(ev)
    }
}

/// One file of the cache, as the XArray walk sees it.
pub(crate) struct FileFolios<'a> {
    pub cache: &'a PageCache,
    pub file: u32,
}

impl super::xarray::FolioMap for FileFolios<'_> {
    fn folio(&self, page: u64) -> Option<(u64, u8)> {
        self.cache.folio(self.file, page)
    }

    fn any_cached(&self, start: u64, len: u64) -> bool {
        self.cache.files[self.file as usize].any_in(start, start.saturating_add(len))
    }

    fn index_limit(&self) -> u64 {
        self.cache.files[self.file as usize].limit()
    }
}

/// What touching a cached page told the reader.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Touched {
    pub ready_ns: u64,
    pub loaded_seq: u64,
    pub first_use: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recently_touched_page() {
        let mut c = PageCache::new(2, Eviction::Lru);
        let f = c.add_file();
        assert_eq!(c.insert(f, 0, 0, 0, 0, false, 0), None);
        assert_eq!(c.insert(f, 0, 1, 0, 0, false, 0), None);
        c.touch(f, 0);
        let ev = c
            .insert(f, 0, 2, 0, 0, false, 0)
            .expect("full cache evicts");
        assert!(!ev.used, "page 1 was never touched");
        assert!(c.contains(f, 0) && !c.contains(f, 1) && c.contains(f, 2));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn clock_gives_a_referenced_page_a_second_chance_and_passes_reads_in_flight_by() {
        let mut c = PageCache::new(3, Eviction::Clock);
        let f = c.add_file();
        for p in 0..3 {
            assert_eq!(c.insert(f, 0, p, 0, 0, false, 0), None);
        }
        c.complete_reads();
        // Every page is referenced (read in): the hand clears all three bits, then takes the
        // first slot, page 0.
        let ev = c.insert(f, 0, 3, 0, 0, false, 0).expect("full");
        assert_eq!((ev.page, ev.used), (0, false));
        // Page 2 is used (its bit set again); pages 3 and 4 stay in flight (no
        // `complete_reads`). The hand takes page 1, whose bit it cleared; then it clears page
        // 2's bit, passes 3 and 4 by, and comes back to take page 2.
        c.touch(f, 2);
        let ev = c.insert(f, 0, 4, 0, 0, false, 0).expect("full");
        assert_eq!(ev.page, 1);
        let ev = c.insert(f, 0, 5, 0, 0, false, 0).expect("full");
        assert_eq!((ev.page, ev.used), (2, true));
        assert!(c.contains(f, 3) && c.contains(f, 4) && c.contains(f, 5));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn clock_takes_a_dropped_pages_slot_when_the_hand_reaches_it() {
        let mut c = PageCache::new(4, Eviction::Clock);
        let f = c.add_file();
        for p in 0..4 {
            c.insert(f, 0, p, 0, 0, false, 0);
        }
        c.complete_reads();
        assert!(c.remove(f, 2).is_some());
        // No new slot while one below the frontier is free: the hand clears 0 and 1, takes
        // slot 2 (free), and evicts nothing.
        assert_eq!(c.insert(f, 0, 9, 0, 0, false, 0), None);
        assert_eq!(c.len(), 4);
        assert_eq!(c.shadow_limit(), 4);
    }

    #[test]
    fn markers_are_per_page() {
        let mut c = PageCache::new(4, Eviction::Lru);
        let f = c.add_file();
        c.insert(f, 0, 3, 0, 0, true, 0);
        assert!(c.has_marker(f, 3));
        c.clear_marker(f, 3);
        assert!(!c.has_marker(f, 3));
        assert!(!c.has_marker(f, 4));
    }

    #[test]
    fn a_folio_marker_answers_for_every_page_of_the_folio() {
        let mut c = PageCache::new(16, Eviction::Lru);
        let f = c.add_file();
        for p in 8..12 {
            c.insert(f, 0, p, 0, 0, p == 8, 2);
        }
        assert_eq!(c.folio_of(f, 10), PageRange::new(8, 12));
        assert!(c.has_marker(f, 11));
        c.clear_marker(f, 9);
        assert!((8..12).all(|p| !c.has_marker(f, p)));
    }
}
