//! The engine's page cache: one arena of page-sized slots that is the memory budget, an index
//! from (file, page) to each page's state, and CLOCK eviction.
//!
//! * **Arena.** One anonymous mapping of `budget` bytes, page aligned, so every slot can be the
//!   target of an `O_DIRECT` read and the whole arena can be registered with io_uring once. Its
//!   size is the budget: the cache can never hold more, whatever the load.
//! * **Index.** [`SHARDS`] shards, each a mutex over a hash map and a condition variable. Sixteen
//!   consecutive pages of a file share a shard, so one lock covers a small read or a run of a
//!   completion, while readers of different places rarely meet. A page is `InFlight` (a reader
//!   waits on its shard's condition variable), `Ready` (in a slot, with how many of its bytes are
//!   valid), `Failed` (the read for it failed: the error, no slot, not cached) or a `Shadow` (it
//!   was evicted before anyone used it: reading it again is thrashing, as the kernel's
//!   workingset code counts it).
//! * **Eviction.** CLOCK over the slots: a page's reference bit is set when it is read in and
//!   when it is used; the hand clears set bits and evicts the first ready page whose bit is
//!   clear. Pages in flight are never evicted. The hand's order makes slots it frees consecutive
//!   when it frees several, so most requests get one contiguous buffer.
//!
//! Lock order: the allocator (the clock) before a shard. The read path takes shard locks only,
//! one at a time, and never the allocator while holding one.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use crate::units::PAGE_SIZE;

/// Shards of the index.
pub(crate) const SHARDS: usize = 256;
/// Consecutive pages that share a shard: 2^4 = 16.
const GROUP_SHIFT: u32 = 4;

const PAGE: usize = PAGE_SIZE as usize;

/// A page of a file: (file id, page index).
pub(crate) type Key = (u32, u64);

/// Why a read failed, kept so every reader waiting on it gets the same error.
#[derive(Debug)]
pub(crate) struct Failure {
    os: Option<i32>,
    kind: io::ErrorKind,
    message: String,
}

impl Failure {
    pub(crate) fn of(e: &io::Error) -> Failure {
        Failure {
            os: e.raw_os_error(),
            kind: e.kind(),
            message: e.to_string(),
        }
    }

    /// The error again, as the system reported it.
    pub(crate) fn error(&self) -> io::Error {
        match self.os {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(self.kind, self.message.clone()),
        }
    }
}

#[derive(Debug)]
pub(crate) enum State {
    InFlight,
    Ready { slot: u32, valid: u16 },
    Failed(Arc<Failure>),
    Shadow,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub state: State,
    /// The readahead marker (the cue for the next ahead window).
    pub marker: bool,
    /// Someone read this page since it came in.
    pub used: bool,
}

impl Entry {
    /// In the cache, as a policy sees it: ready or on its way.
    pub fn cached(&self) -> bool {
        matches!(self.state, State::InFlight | State::Ready { .. })
    }
}

pub(crate) struct Shard {
    pub map: FxHashMap<Key, Entry>,
}

/// What became of one page a reader wanted.
pub(crate) enum Lookup {
    /// `n` bytes copied; `whole`: the page held every byte the reader asked for from it.
    Copied { n: usize, whole: bool, waited: bool },
    /// Not in the cache: the reader must start a read for it.
    Absent,
    /// The read that was bringing it in failed.
    Failed(Arc<Failure>),
}

const SLOT_FREE: u8 = 0;
const SLOT_IN_FLIGHT: u8 = 1;
const SLOT_READY: u8 = 2;

/// An anonymous, page-aligned mapping: the budget.
pub(crate) struct Arena {
    base: *mut u8,
    bytes: usize,
}

// SAFETY: the arena is a plain memory region. Which slots are written or read, and when, is
// governed by the slot states and the shard locks (see `Cache`): a slot is written only by the
// one I/O that owns it while it is in flight, and read only while it is ready under its
// shard's lock.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

impl Arena {
    fn new(slots: usize) -> io::Result<Arena> {
        let bytes = slots * PAGE;
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Huge pages where the system allows: fewer TLB misses when copying out of the cache.
        // SAFETY: advice on the mapping just made; failure is harmless.
        unsafe {
            libc::madvise(base, bytes, libc::MADV_HUGEPAGE);
        }
        Ok(Arena {
            base: base.cast(),
            bytes,
        })
    }

    /// Address of `slot`'s first byte.
    pub fn slot_ptr(&self, slot: u32) -> *mut u8 {
        debug_assert!((slot as usize + 1) * PAGE <= self.bytes);
        // SAFETY: in bounds: slot < slots, checked by every caller's slot source (the clock).
        unsafe { self.base.add(slot as usize * PAGE) }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once. No I/O can still target it: the
        // arena lives in the cache, which every backend holds until its last I/O completed.
        unsafe {
            libc::munmap(self.base.cast(), self.bytes);
        }
    }
}

struct Clock {
    hand: usize,
}

/// Counters the cache keeps as it evicts.
#[derive(Default)]
pub(crate) struct CacheCounters {
    pub wasted_pages: AtomicU64,
    pub thrashed_pages: AtomicU64,
    pub evicted_pages: AtomicU64,
}

/// The page cache. See the module comment.
pub(crate) struct Cache {
    arena: Arena,
    slots: usize,
    shards: Box<[(Mutex<Shard>, Condvar)]>,
    clock: Mutex<Clock>,
    /// Signalled when a slot is freed or an I/O completes, for allocators that found none.
    slot_freed: Condvar,
    slot_state: Box<[AtomicU8]>,
    /// The key of the page in each slot, packed (see `pack`).
    slot_owner: Box<[AtomicU64]>,
    refbit: Box<[AtomicBool]>,
    shadows: AtomicUsize,
    pub counters: CacheCounters,
}

fn pack(key: Key) -> u64 {
    ((key.0 as u64) << 40) | (key.1 & ((1 << 40) - 1))
}

fn unpack(v: u64) -> Key {
    ((v >> 40) as u32, v & ((1 << 40) - 1))
}

impl Cache {
    /// A cache of `slots` pages.
    pub fn new(slots: usize) -> io::Result<Cache> {
        let slots = slots.max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                (
                    Mutex::new(Shard {
                        map: FxHashMap::default(),
                    }),
                    Condvar::new(),
                )
            })
            .collect();
        Ok(Cache {
            arena: Arena::new(slots)?,
            slots,
            shards,
            clock: Mutex::new(Clock { hand: 0 }),
            slot_freed: Condvar::new(),
            slot_state: (0..slots).map(|_| AtomicU8::new(SLOT_FREE)).collect(),
            slot_owner: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            refbit: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            shadows: AtomicUsize::new(0),
            counters: CacheCounters::default(),
        })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// The shard holding `key`.
    pub fn shard_of(key: Key) -> usize {
        let group = key.1 >> GROUP_SHIFT;
        let h = (group ^ ((key.0 as u64) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 56) as usize % SHARDS
    }

    pub fn lock(&self, shard: usize) -> MutexGuard<'_, Shard> {
        self.shards[shard]
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn notify(&self, shard: usize) {
        self.shards[shard].1.notify_all();
    }

    /// Whether `key` is ready or in flight.
    pub fn is_cached(&self, key: Key) -> bool {
        self.lock(Self::shard_of(key))
            .map
            .get(&key)
            .is_some_and(Entry::cached)
    }

    /// Whether `key` is cached with a marker.
    pub fn has_marker(&self, key: Key) -> bool {
        self.lock(Self::shard_of(key))
            .map
            .get(&key)
            .is_some_and(|e| e.cached() && e.marker)
    }

    pub fn clear_marker(&self, key: Key) {
        if let Some(e) = self.lock(Self::shard_of(key)).map.get_mut(&key) {
            e.marker = false;
        }
    }

    /// The first page in `[from, end)` of `file` that is not cached, or `end`.
    pub fn next_miss(&self, file: u32, from: u64, end: u64) -> u64 {
        let mut p = from;
        while p < end {
            let shard = Self::shard_of((file, p));
            let group_end = (((p >> GROUP_SHIFT) + 1) << GROUP_SHIFT).min(end);
            let guard = self.lock(shard);
            while p < group_end {
                if !guard.map.get(&(file, p)).is_some_and(Entry::cached) {
                    return p;
                }
                p += 1;
            }
        }
        end
    }

    /// Claim the absent pages of `file` from `start` on (at most `max` pages, stopping at the
    /// first cached page) as in flight. Returns how many were claimed (0 if `start` is cached)
    /// and how many of them were shadows (refaults: thrashing).
    pub fn claim_run(&self, file: u32, start: u64, max: u64) -> (u64, u64) {
        let end = start.saturating_add(max);
        let mut p = start;
        let mut refaults = 0;
        while p < end {
            let shard = Self::shard_of((file, p));
            let group_end = (((p >> GROUP_SHIFT) + 1) << GROUP_SHIFT).min(end);
            let mut guard = self.lock(shard);
            while p < group_end {
                match guard.map.get_mut(&(file, p)) {
                    Some(e) if e.cached() => return (p - start, refaults),
                    Some(e) => {
                        if matches!(e.state, State::Shadow) {
                            refaults += 1;
                            self.shadows.fetch_sub(1, Ordering::Relaxed);
                        }
                        e.state = State::InFlight;
                        e.marker = false;
                        e.used = false;
                    }
                    None => {
                        guard.map.insert(
                            (file, p),
                            Entry {
                                state: State::InFlight,
                                marker: false,
                                used: false,
                            },
                        );
                    }
                }
                p += 1;
            }
        }
        (p - start, refaults)
    }

    /// Give back claimed pages `[start, end)` of `file` that will not be read after all.
    pub fn unclaim(&self, file: u32, start: u64, end: u64) {
        for p in start..end {
            let shard = Self::shard_of((file, p));
            let mut guard = self.lock(shard);
            if matches!(
                guard.map.get(&(file, p)).map(|e| &e.state),
                Some(State::InFlight)
            ) {
                guard.map.remove(&(file, p));
            }
            drop(guard);
            self.notify(shard);
        }
    }

    /// Put the marker on claimed page `key`.
    pub fn set_marker(&self, key: Key) {
        if let Some(e) = self.lock(Self::shard_of(key)).map.get_mut(&key) {
            e.marker = true;
        }
    }

    /// Allocate up to `n` slots for pages `first..` of `file`, evicting as the clock goes.
    /// Returns what two turns of the hand found; with `wait`, if that is nothing, waits for
    /// I/O in flight to give slots back and tries again (so it returns at least one). A caller
    /// that gets fewer than `n` reads fewer pages: holding some slots while waiting for more
    /// could deadlock readers against each other.
    pub fn alloc(&self, file: u32, first: u64, n: usize, wait: bool) -> Vec<u32> {
        let mut got = Vec::with_capacity(n);
        let mut clock = self.clock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let mut steps = 0;
            // Two turns: the first may only clear reference bits.
            while got.len() < n && steps < 2 * self.slots {
                let s = clock.hand;
                clock.hand = (clock.hand + 1) % self.slots;
                steps += 1;
                if let Some(slot) = self.try_take(s) {
                    let key = (file, first + got.len() as u64);
                    self.slot_owner[slot as usize].store(pack(key), Ordering::Relaxed);
                    got.push(slot);
                }
            }
            if !got.is_empty() || !wait {
                return got;
            }
            clock = self
                .slot_freed
                .wait_timeout(clock, std::time::Duration::from_millis(10))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Take slot `s` if it is free or holds an evictable page (clearing its reference bit
    /// otherwise). Called with the clock held.
    fn try_take(&self, s: usize) -> Option<u32> {
        match self.slot_state[s].load(Ordering::Acquire) {
            SLOT_FREE => {
                self.slot_state[s].store(SLOT_IN_FLIGHT, Ordering::Release);
                Some(s as u32)
            }
            SLOT_READY => {
                if self.refbit[s].swap(false, Ordering::Relaxed) {
                    return None;
                }
                let key = unpack(self.slot_owner[s].load(Ordering::Relaxed));
                let shard = Self::shard_of(key);
                let mut guard = self.lock(shard);
                let e = guard.map.get_mut(&key)?;
                if !matches!(e.state, State::Ready { slot, .. } if slot as usize == s) {
                    return None;
                }
                self.counters.evicted_pages.fetch_add(1, Ordering::Relaxed);
                if e.used {
                    guard.map.remove(&key);
                } else {
                    self.counters.wasted_pages.fetch_add(1, Ordering::Relaxed);
                    // Remember it (within a bound) to recognise a refault.
                    if self.shadows.load(Ordering::Relaxed) < self.slots {
                        self.shadows.fetch_add(1, Ordering::Relaxed);
                        e.state = State::Shadow;
                        e.marker = false;
                    } else {
                        guard.map.remove(&key);
                    }
                }
                self.slot_state[s].store(SLOT_IN_FLIGHT, Ordering::Release);
                Some(s as u32)
            }
            _ => None,
        }
    }

    /// An I/O into `slots` for pages `first..` of `file` finished: `Ok(bytes)` or the error.
    /// `expected`: the bytes the file holds in that range (less than the slots' size at the
    /// file's end). Pages the read did not fill are left absent (a short read mid-file, say from
    /// a file truncated meanwhile, caches nothing for them); on error every page is `Failed`.
    pub fn complete(
        &self,
        file: u32,
        first: u64,
        slots: &[u32],
        expected: u64,
        result: &io::Result<usize>,
    ) {
        let failure = result.as_ref().err().map(|e| Arc::new(Failure::of(e)));
        let got = *result.as_ref().unwrap_or(&0) as u64;
        let mut i = 0;
        while i < slots.len() {
            let p = first + i as u64;
            let shard = Self::shard_of((file, p));
            let group_end = ((((p >> GROUP_SHIFT) + 1) << GROUP_SHIFT) - first) as usize;
            let mut guard = self.lock(shard);
            while i < slots.len().min(group_end) {
                let key = (file, first + i as u64);
                let s = slots[i];
                let page_start = i as u64 * PAGE_SIZE;
                let want = expected.saturating_sub(page_start).min(PAGE_SIZE);
                let have = got.saturating_sub(page_start).min(PAGE_SIZE);
                let entry = guard.map.get_mut(&key);
                match (&failure, entry) {
                    (_, None) => {
                        // Dropped meanwhile (don't-need): the slot goes back.
                        self.slot_state[s as usize].store(SLOT_FREE, Ordering::Release);
                    }
                    (Some(f), Some(e)) => {
                        e.state = State::Failed(f.clone());
                        self.slot_state[s as usize].store(SLOT_FREE, Ordering::Release);
                    }
                    (None, Some(e)) if have < want || want == 0 => {
                        let _ = e;
                        guard.map.remove(&key);
                        self.slot_state[s as usize].store(SLOT_FREE, Ordering::Release);
                    }
                    (None, Some(e)) => {
                        e.state = State::Ready {
                            slot: s,
                            valid: have as u16,
                        };
                        self.refbit[s as usize].store(true, Ordering::Relaxed);
                        self.slot_state[s as usize].store(SLOT_READY, Ordering::Release);
                    }
                }
                i += 1;
            }
            drop(guard);
            self.notify(shard);
        }
        self.slot_freed.notify_all();
    }

    /// Copy `key`'s bytes from `from` (within the page) into `dst`, waiting while the page is in
    /// flight if `wait` (the time waited is added to `stall`).
    pub fn read_page(
        &self,
        key: Key,
        from: usize,
        dst: &mut [u8],
        wait: bool,
        stall: &mut std::time::Duration,
    ) -> Lookup {
        let shard = Self::shard_of(key);
        let mut guard = self.lock(shard);
        let mut waited: Option<std::time::Instant> = None;
        loop {
            let Some(e) = guard.map.get_mut(&key) else {
                return Lookup::Absent;
            };
            match &e.state {
                State::Ready { slot, valid } => {
                    let valid = *valid as usize;
                    let n = valid.saturating_sub(from).min(dst.len());
                    // SAFETY: the slot is ready and this shard's lock is held, so no I/O writes
                    // it and no eviction can hand it to one until the lock is released; `from +
                    // n <= valid <= PAGE`, so the source is within the slot.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.arena.slot_ptr(*slot).add(from),
                            dst.as_mut_ptr(),
                            n,
                        );
                    }
                    self.refbit[*slot as usize].store(true, Ordering::Relaxed);
                    e.used = true;
                    let whole = from + n == PAGE || n == dst.len();
                    if let Some(t) = waited {
                        *stall += t.elapsed();
                    }
                    return Lookup::Copied {
                        n,
                        whole,
                        waited: waited.is_some(),
                    };
                }
                State::InFlight if wait => {
                    waited.get_or_insert_with(std::time::Instant::now);
                    guard = self.shards[shard]
                        .1
                        .wait(guard)
                        .unwrap_or_else(|p| p.into_inner());
                }
                State::InFlight => return Lookup::Absent,
                State::Failed(f) => return Lookup::Failed(f.clone()),
                State::Shadow => return Lookup::Absent,
            }
        }
    }

    /// Drop the ready pages `[start, end)` of `file` (don't-need); pages in flight stay.
    pub fn drop_range(&self, file: u32, start: u64, end: u64) {
        let mut p = start;
        while p < end {
            let shard = Self::shard_of((file, p));
            let group_end = (((p >> GROUP_SHIFT) + 1) << GROUP_SHIFT).min(end);
            let mut guard = self.lock(shard);
            while p < group_end {
                if let Some(e) = guard.map.get(&(file, p)) {
                    match e.state {
                        State::Ready { slot, .. } => {
                            guard.map.remove(&(file, p));
                            self.slot_state[slot as usize].store(SLOT_FREE, Ordering::Release);
                        }
                        State::Failed(_) => {
                            guard.map.remove(&(file, p));
                        }
                        State::Shadow => {
                            guard.map.remove(&(file, p));
                            self.shadows.fetch_sub(1, Ordering::Relaxed);
                        }
                        State::InFlight => {}
                    }
                }
                p += 1;
            }
        }
        self.slot_freed.notify_all();
    }

    /// Pages ready or in flight, for tests and stats.
    pub fn resident_pages(&self) -> usize {
        self.slot_state
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != SLOT_FREE)
            .count()
    }
}
