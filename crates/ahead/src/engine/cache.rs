//! The engine's page cache: one arena of page-sized slots that is the memory budget, a page
//! table per file saying where each page is, and CLOCK eviction.
//!
//! * **Arena.** One anonymous mapping of `budget` bytes, page aligned (huge pages where the
//!   system gives them), so every slot can be the target of an `O_DIRECT` read. Its size is the
//!   budget: the cache can never hold more, whatever the load. It is only reserved: memory is
//!   faulted in as slots are first used, so an engine's cost follows what it caches, not its
//!   budget (a 6 GiB engine that reads a 100 KB file holds a few pages). The backend registers
//!   the arena with io_uring a slab at a time, as reads first reach it (`backend/uring.rs`).
//!   Once the cache has grown past a few MiB, a helper thread faults in the memory just
//!   ahead of the frontier (below), so the reads do not wait for the kernel's first touch of
//!   it (`cache/fault_ahead.rs`).
//! * **Page tables.** Each file has a dense table, one 64-bit word per page (allocated 512
//!   pages at a time, as they are first read): the page's state, its slot, how many of its
//!   bytes are valid, its readahead marker and whether it was used. A page is `InFlight` (a
//!   reader waits on its shard's condition variable), `Ready`, `Failed` (the read for it failed:
//!   the error is kept aside, no slot, not cached) or a `Shadow` (it was evicted before anyone
//!   used it: reading it again is thrashing, as the kernel's workingset code counts it).
//! * **Hits take no lock.** A reader loads the word, copies from the slot, and loads the word
//!   again: if it still names the same ready slot with the same landing stamp, nothing
//!   evicted the page meanwhile and the copy is good; otherwise it takes the slow path. Sequential pages sit in sequential words,
//!   so the hardware prefetches the table as it does the data (a hashed index costs a cache
//!   miss per page: measured, it halved the hit rate).
//! * **Changes take a shard lock.** Claiming pages for a read, completing it, evicting, and
//!   markers lock one of [`SHARDS`] mutexes (sixteen consecutive pages of a file share one),
//!   whose condition variable wakes the readers waiting there.
//! * **A file that changes.** When a file's contents change under the engine (a writer, a
//!   truncation: the source says so), every page of it is dropped ([`Cache::invalidate`]),
//!   those in flight too, and its table's *generation* goes up. A page in flight carries the
//!   generation its read was claimed in, and a completion lands only on pages that still carry
//!   its claim: a read issued before a change (which may hold old bytes) is never served
//!   after it, even when its completion comes after a new read of the same page was claimed.
//!   The generation is read under the shard lock the change takes to drop the page, so a
//!   claim either is dropped by the change or carries the new generation.
//! * **Growth, then eviction.** Slots are handed out from the arena's start: the *frontier*
//!   moves up one slot at a time while no slot below it is free, so the slots in use stay
//!   packed at the bottom of the arena and a request's new slots are consecutive. While slots
//!   below the frontier are free, the hand takes those, and nothing else: no page is evicted
//!   while the budget has room. Once the frontier reaches the budget, CLOCK runs over the slots
//!   below it: a page's reference bit is set when it is read in and when it is used; the hand
//!   clears set bits and takes the first free slot or ready page whose bit is clear. Pages in
//!   flight are never evicted. The hand's order makes the slots it frees consecutive, so most
//!   requests get one contiguous buffer. The cache never reads into a new slot while an old
//!   one is free, so the memory touched is what was cached at its fullest.
//! * **Drop-behind for scans** (where the engine asks for it: a reader that reads each file
//!   once, as `ahead cat` does). A file larger than a quarter of the cache is read through a
//!   ring, as PostgreSQL reads a table larger than a quarter of its buffers: memory a scan has
//!   passed over goes first, so the scan runs in slots already faulted in instead of faulting
//!   fresh memory for every page (the kernel zeroes each on first touch; on a virtual machine
//!   its host may first have to find it). When a read of such a file crosses a multiple of
//!   [`BEHIND_BATCH`] pages, the batch [`BEHIND_LAG`] pages behind it, either way (a scan may
//!   run backwards), is dropped if every page of it is ready, was read ahead and was used: a
//!   scan, or several readers taking turns, passed over it whole. A reader's steps back
//!   within the lag still hit; pages read for a reader's own misses (a random reader's, even
//!   512 KiB at a time) are never dropped behind, and a strided reader's leave no batch
//!   whole: they age under CLOCK as before; a smaller file stays cached whole for a re-read. Dropped slots are
//!   free below the frontier, so the next read takes them before the frontier moves.
//! * **Giving memory back.** When pages are dropped (don't-need advice, a file that changed),
//!   the free slots at the top of the arena, above the highest slot in use, are returned to
//!   the system (`MADV_DONTNEED`) and the frontier comes down to them ([`Cache::trim`]), once
//!   there are at least [`TRIM_MIN_BYTES`] of them: an engine holds about what it caches now,
//!   not what it cached at its fullest. The backend first lets go of any hold it has on that
//!   memory (io_uring: the registered buffers that reach it), keeping a granule of its choosing
//!   above the slots in use. Below the highest slot in use, nothing moves pages down, but each
//!   unit of the arena (a granule, 2 MiB at least) whose slots are all free is given back as
//!   well, once neither neighbour has a read in flight: a cache that drops most of what it
//!   held holds about what is left, whatever slots that sits in. The hand hands such a unit's
//!   slots out again as it reaches them, faulting the memory in anew (as does registering a
//!   neighbour's io_uring buffer again, which spans the unit).
//!
//! Lock order: the allocator (the clock) before a shard. Readers take shard locks only, one at
//! a time, and never the allocator while holding one. A shard's list of async tasks (`Wakers`)
//! is taken under that shard's lock or under none, and nothing is taken while it is held.
//!
//! One file, over 700 lines, on purpose: the word layout below, the lock order above and every
//! function that moves a page from one state to another must be read together to check that a
//! hit's lock-free copy is safe; split, a reader would check the layout in one file against
//! transitions in another. (Its tests are in `cache/tests.rs`.)

use std::io;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::units::PAGE_SIZE;
use fault_ahead::FaultAhead;

/// Shards of the locks and wait queues.
pub(crate) const SHARDS: usize = 256;
/// Consecutive pages that share a shard: 2^4 = 16.
const GROUP_SHIFT: u32 = 4;
/// Pages per chunk of a page table: 2^9 = 512.
const CHUNK_SHIFT: u32 = 9;
/// The least memory [`Cache::trim`] gives back at once: less is not worth the faults of
/// using it again.
pub(crate) const TRIM_MIN_BYTES: usize = 16 << 20;
/// The least memory given back from below the highest slot in use, at once: a huge page, so
/// giving it back splits none.
const GIVE_BACK_UNIT_BYTES: usize = 2 << 20;
/// Pages a scan drops behind it at once (see the module comment).
const BEHIND_BATCH: u64 = 64;
/// How far behind a scan's reads it keeps what it passed over: its steps back within this hit.
const BEHIND_LAG: u64 = 256;

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

/// One page's word: state in bits 0-2, marker bit 3, used bit 4, read-ahead bit 5 (a ready
/// page brought in ahead of its reader, not for a reader's miss), valid bytes in bits 8-20,
/// a ready page's landing stamp in bits 21-31, and in bits 32-63 the slot of a ready page or
/// the claim of a page in flight (the file's generation when its read was claimed: see
/// [`PageTable::generation`]).
///
/// The stamp is the low bits of a count of completions: a page evicted and read again into
/// the very slot it left (the clock's hand came round to it) lands with another stamp, so a
/// reader whose lock-free copy spanned both (it was descheduled mid-copy while the slot held
/// another page between them) sees the word differ and discards the copy. Without it the
/// two words were equal and the copy, part another page's bytes, was kept.
mod word {
    pub const ABSENT: u64 = 0;
    pub const IN_FLIGHT: u64 = 1;
    pub const READY: u64 = 2;
    pub const FAILED: u64 = 3;
    pub const SHADOW: u64 = 4;
    pub const STATE: u64 = 0b111;
    pub const MARKER: u64 = 1 << 3;
    pub const USED: u64 = 1 << 4;
    pub const AHEAD: u64 = 1 << 5;
    const STAMP_SHIFT: u64 = 21;
    pub const STAMP_BITS: u32 = 11;

    pub fn state(w: u64) -> u64 {
        w & STATE
    }
    pub fn cached(w: u64) -> bool {
        matches!(state(w), IN_FLIGHT | READY)
    }
    pub fn slot(w: u64) -> u32 {
        (w >> 32) as u32
    }
    pub fn valid(w: u64) -> usize {
        ((w >> 8) & 0x1FFF) as usize
    }
    pub fn ready(slot: u32, valid: usize, stamp: u32) -> u64 {
        let stamp = (stamp as u64 & ((1 << STAMP_BITS) - 1)) << STAMP_SHIFT;
        READY | ((valid as u64) << 8) | stamp | ((slot as u64) << 32)
    }
    pub fn in_flight(claim: u32) -> u64 {
        IN_FLIGHT | ((claim as u64) << 32)
    }
    /// Whether `w` is in flight for the read that claimed it as `claim` (its marker aside).
    pub fn claimed_by(w: u64, claim: u32) -> bool {
        w & !(MARKER | USED | AHEAD) == in_flight(claim)
    }
}

/// A file's page table: one word per page, allocated a chunk at a time.
pub(crate) struct PageTable {
    /// The file's id in the cache.
    pub id: u32,
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    /// Its pages evicted unused (the file's share of the cache's count).
    wasted_pages: AtomicU64,
    /// Read through a ring: larger than a quarter of the cache (see "Drop-behind").
    bulk: bool,
    /// How many times its contents changed under it ([`Cache::invalidate`]). A read is
    /// claimed with the generation it was claimed in, and lands only if its pages still carry
    /// that claim: a read begun before a change never lands after it.
    generation: AtomicU32,
}

impl PageTable {
    /// Whether it is read through a ring (see "Drop-behind").
    pub fn bulk(&self) -> bool {
        self.bulk
    }

    /// Its pages evicted before anyone used them.
    pub fn wasted_pages(&self) -> u64 {
        self.wasted_pages.load(Ordering::Relaxed)
    }

    fn new(id: u32, pages: u64, bulk: bool) -> PageTable {
        let n = pages.div_ceil(1 << CHUNK_SHIFT).max(1) as usize;
        PageTable {
            id,
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
            wasted_pages: AtomicU64::new(0),
            bulk,
            generation: AtomicU32::new(0),
        }
    }

    /// The word of `page`, if its chunk exists.
    #[inline]
    fn get(&self, page: u64) -> Option<&AtomicU64> {
        let chunk = self.chunks.get((page >> CHUNK_SHIFT) as usize)?.get()?;
        Some(&chunk[(page & ((1 << CHUNK_SHIFT) - 1)) as usize])
    }

    /// The word of `page`, making its chunk if needed (`None` past the table's end).
    fn make(&self, page: u64) -> Option<&AtomicU64> {
        let chunk = self
            .chunks
            .get((page >> CHUNK_SHIFT) as usize)?
            .get_or_init(|| {
                (0..1 << CHUNK_SHIFT)
                    .map(|_| AtomicU64::new(word::ABSENT))
                    .collect()
            });
        Some(&chunk[(page & ((1 << CHUNK_SHIFT) - 1)) as usize])
    }

    #[inline]
    fn load(&self, page: u64) -> u64 {
        self.get(page)
            .map_or(word::ABSENT, |w| w.load(Ordering::Acquire))
    }
}

/// Pages claimed for a read ([`Cache::claim_run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claimed {
    pub pages: u64,
    /// Of them, shadows: pages read again after being evicted unused.
    pub refaults: u64,
    /// What the read must carry to land.
    pub claim: u32,
}

/// What became of one page a reader wanted.
pub(crate) enum Lookup {
    /// `n` bytes copied; `whole`: the page held every byte the reader asked for from it.
    Copied { n: usize, whole: bool },
    /// Not in the cache (or, without waiting, not ready): the reader must start a read for it.
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
// governed by the slot states and the page words (see `Cache`): a slot is written only by the
// one I/O that owns it while it is in flight, and read only while a page word names it ready.
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
        // SAFETY: in bounds: every slot number comes from the clock, which hands out only
        // slots below the arena's count.
        unsafe { self.base.add(slot as usize * PAGE) }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Fault in every page of the arena now instead of as slots are first used (the engine's
    /// `pretouch`): the kernel zeroes fresh memory on first touch, and a cold read that first
    /// touches it pays for the zeroing on the reader's path.
    pub fn populate(&self) -> io::Result<()> {
        // SAFETY: advice on the whole mapping made in `new`.
        if unsafe { libc::madvise(self.base.cast(), self.bytes, libc::MADV_POPULATE_WRITE) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
        // Kernels before 5.14 have no MADV_POPULATE_WRITE: touch a byte of every page. The
        // arena is new, so no slot is in use yet and nothing reads these bytes.
        for at in (0..self.bytes).step_by(PAGE) {
            // SAFETY: in bounds, and no I/O or reader uses the arena before the engine starts.
            unsafe { self.base.add(at).write_volatile(0) };
        }
        Ok(())
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
    /// Slots below this have been handed out at least once (their memory is faulted in, but
    /// for units given back since); none above it has.
    frontier: usize,
    /// Slots per unit of memory given back below the frontier (0 until the first trim), and
    /// which units are given back and not handed a slot since.
    unit_slots: usize,
    given_back: Vec<bool>,
}

impl Clock {
    /// Slot `s` is handed out: its unit's memory is faulted in again as it is read into.
    fn taken(&mut self, s: usize) {
        if let Some(g) = s
            .checked_div(self.unit_slots)
            .and_then(|u| self.given_back.get_mut(u))
        {
            *g = false;
        }
    }
}

/// A lock for changes to a group of pages, and the readers waiting for pages of it: threads
/// on the condition variable, async tasks by their wakers. Waking is a system call, so it is
/// made only when someone waits.
struct Shard {
    lock: Mutex<()>,
    changed: Condvar,
    waiters: AtomicUsize,
    tasks: Wakers,
}

/// Async tasks waiting for something (a page of a shard, a free slot), woken all at once when
/// it may have happened. A task registers before it looks again, so a change after its look
/// finds it registered; a task dropped meanwhile is woken for nothing, once.
#[derive(Default)]
pub(crate) struct Wakers {
    count: AtomicUsize,
    list: Mutex<Vec<Waker>>,
}

impl Wakers {
    fn register(&self, w: &Waker) {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if !list.iter().any(|x| x.will_wake(w)) {
            list.push(w.clone());
            self.count.store(list.len(), Ordering::Release);
        }
    }

    fn wake_all(&self) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let woken = {
            let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
            self.count.store(0, Ordering::Release);
            std::mem::take(&mut *list)
        };
        for w in woken {
            w.wake();
        }
    }
}

/// Counters the cache keeps as it evicts.
#[derive(Default)]
pub(crate) struct CacheCounters {
    pub wasted_pages: AtomicU64,
    pub thrashed_pages: AtomicU64,
    /// Slots whose memory [`Cache::trim`] gave back.
    pub given_back_pages: AtomicU64,
    /// Pages a scan passed over and dropped ("Drop-behind").
    pub dropped_behind_pages: AtomicU64,
}

/// The page cache. See the module comment.
pub(crate) struct Cache {
    /// Declared before the arena, so dropped first: its thread stops before the arena is
    /// unmapped.
    fault_ahead: FaultAhead,
    arena: Arena,
    slots: usize,
    shards: Box<[Shard]>,
    tables: RwLock<FxHashMap<u32, Arc<PageTable>>>,
    failures: Mutex<FxHashMap<Key, Arc<Failure>>>,
    clock: Mutex<Clock>,
    /// Signalled when an I/O completes or pages are dropped, for allocators that found no slot.
    slot_freed: Condvar,
    alloc_waiters: AtomicUsize,
    /// Async tasks waiting for a free slot.
    slot_tasks: Wakers,
    slot_state: Box<[AtomicU8]>,
    /// Free slots below the frontier: while there are any, the frontier does not move.
    free_below_frontier: AtomicUsize,
    /// Slots freed since [`Cache::trim`] last looked: it looks again only once there are
    /// enough to give back.
    freed_since_trim: AtomicUsize,
    /// The frontier, readable without the clock's lock (stats).
    frontier: AtomicUsize,
    /// The key of the page in each slot, packed (see `pack`).
    slot_owner: Box<[AtomicU64]>,
    refbit: Box<[AtomicBool]>,
    shadows: AtomicUsize,
    /// Completions so far: each stamps the pages it makes ready (see the word's layout).
    landings: AtomicU32,
    /// Whether files larger than a quarter of the cache are read through a ring.
    drop_behind: AtomicBool,
    pub counters: CacheCounters,
}

/// `n` atomics, all zero, in memory the system gives untouched (a large zeroed allocation is a
/// fresh mapping): pages of it are faulted in only as they are written.
/// An error, not an abort, where the system refuses the memory (a budget allowed over the
/// memory there is: `EngineBuilder::allow_budget_over_memory`).
fn zeroed_atomics<T: ZeroIsValid>(n: usize) -> io::Result<Box<[T]>> {
    let refused = || {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "the system refused {n} slots' bookkeeping ({} bytes each)",
                size_of::<T>()
            ),
        )
    };
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| refused())?;
    if layout.size() == 0 {
        return Ok((0..n).map(|_| T::ZERO).collect());
    }
    // SAFETY: a layout of non-zero size; the result is checked. (`Box::new_zeroed_slice` does
    // this from Rust 1.92; the crate builds with 1.89.)
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return Err(refused());
    }
    // SAFETY: `n` zeroed `T`s, allocated with the global allocator in the layout `Box<[T]>`
    // frees with; `ZeroIsValid` is implemented only for types whose all-zero bytes are a value.
    Ok(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) })
}

/// Types for which all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for such types.
unsafe trait ZeroIsValid {
    /// The all-zero value.
    const ZERO: Self;
}
// SAFETY: the atomics of integers and bools have the layout of the integer (bool): zero is 0
// (false).
unsafe impl ZeroIsValid for AtomicU8 {
    const ZERO: Self = AtomicU8::new(0);
}
// SAFETY: as above.
unsafe impl ZeroIsValid for AtomicU64 {
    const ZERO: Self = AtomicU64::new(0);
}
// SAFETY: as above.
unsafe impl ZeroIsValid for AtomicBool {
    const ZERO: Self = AtomicBool::new(false);
}

fn pack(key: Key) -> u64 {
    ((key.0 as u64) << 40) | (key.1 & ((1 << 40) - 1))
}

fn unpack(v: u64) -> Key {
    ((v >> 40) as u32, v & ((1 << 40) - 1))
}

fn shard_of(id: u32, page: u64) -> usize {
    let group = page >> GROUP_SHIFT;
    let h = (group ^ ((id as u64) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 56) as usize % SHARDS
}

/// One past the last page of the shard group holding `p`, at most `end`.
fn group_end(p: u64, end: u64) -> u64 {
    (((p >> GROUP_SHIFT) + 1) << GROUP_SHIFT).min(end)
}

impl Cache {
    /// A cache of `slots` pages.
    pub fn new(slots: usize) -> io::Result<Cache> {
        let slots = slots.max(1);
        let arena = Arena::new(slots)?;
        let fault_ahead = FaultAhead::new(arena.base(), slots);
        Ok(Cache {
            fault_ahead,
            arena,
            slots,
            shards: (0..SHARDS)
                .map(|_| Shard {
                    lock: Mutex::new(()),
                    changed: Condvar::new(),
                    waiters: AtomicUsize::new(0),
                    tasks: Wakers::default(),
                })
                .collect(),
            tables: RwLock::new(FxHashMap::default()),
            failures: Mutex::new(FxHashMap::default()),
            clock: Mutex::new(Clock {
                hand: 0,
                frontier: 0,
                unit_slots: 0,
                given_back: Vec::new(),
            }),
            slot_freed: Condvar::new(),
            alloc_waiters: AtomicUsize::new(0),
            slot_tasks: Wakers::default(),
            // Zeroed allocations: the system hands these out untouched, so the per-slot state
            // of slots never used costs no memory either (`SLOT_FREE`, owner 0 and a clear bit
            // are all zero).
            slot_state: zeroed_atomics(slots)?,
            free_below_frontier: AtomicUsize::new(0),
            freed_since_trim: AtomicUsize::new(0),
            frontier: AtomicUsize::new(0),
            slot_owner: zeroed_atomics(slots)?,
            refbit: zeroed_atomics(slots)?,
            shadows: AtomicUsize::new(0),
            landings: AtomicU32::new(0),
            drop_behind: AtomicBool::new(false),
            counters: CacheCounters::default(),
        })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The most pages one run may take in this cache: the rule both drivers share
    /// ([`crate::policy::run_cap_pages`]).
    pub fn run_cap_pages(&self) -> u64 {
        crate::policy::run_cap_pages(self.slots as u64)
    }

    /// The share of this cache every file's readahead divides
    /// ([`crate::policy::readahead_share_pages`]).
    pub fn readahead_share_pages(&self) -> u64 {
        crate::policy::readahead_share_pages(self.slots as u64)
    }

    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// The cache grew for reads that fault in the memory they land on (a local file's): have
    /// memory faulted in ahead of the frontier, if it reached a new chunk.
    pub fn note_growth(&self) {
        self.fault_ahead
            .grew_to(self.frontier.load(Ordering::Acquire));
    }

    /// Files larger than a quarter of the cache read through a ring (the engine's
    /// `drop_behind(true)`), for files opened from now on.
    pub fn drop_behind(&self) {
        self.drop_behind.store(true, Ordering::Relaxed);
    }

    /// A read served pages `[first, end)` of `t`: for each multiple of [`BEHIND_BATCH`] it
    /// crossed, drop the batch [`BEHIND_LAG`] pages behind it, below and above, if a scan
    /// passed over it whole (see "Drop-behind"). Nothing for a file cached whole.
    pub fn pass_over(&self, t: &PageTable, first: u64, end: u64) {
        if !t.bulk {
            return;
        }
        let mut boundary = (first / BEHIND_BATCH + 1) * BEHIND_BATCH;
        while boundary <= end {
            if let Some(lo) = boundary.checked_sub(BEHIND_LAG + BEHIND_BATCH) {
                self.drop_if_passed(t, lo);
            }
            self.drop_if_passed(t, boundary + BEHIND_LAG);
            boundary += BEHIND_BATCH;
        }
    }

    /// Drop the batch of pages from `start` if every page of it is ready and was used.
    fn drop_if_passed(&self, t: &PageTable, start: u64) {
        let end = start + BEHIND_BATCH;
        // Ready, read ahead and used.
        let passed_word = |v: u64| {
            word::state(v) == word::READY
                && v & (word::USED | word::AHEAD) == word::USED | word::AHEAD
        };
        let passed = |p: u64| {
            t.get(p)
                .is_some_and(|w| passed_word(w.load(Ordering::Acquire)))
        };
        // The last page first: a scan ahead of itself has not used it yet.
        if !passed(end - 1) || !(start..end - 1).all(passed) {
            return;
        }
        let mut dropped = 0;
        self.each_locked(t, start, end, |_, w| {
            let v = w.load(Ordering::Acquire);
            if passed_word(v) {
                // The word changes before the slot is freed: a reader copying from it
                // meanwhile sees the change and discards its copy.
                w.store(word::ABSENT, Ordering::Release);
                self.free_slot(word::slot(v));
                dropped += 1;
            }
            false
        });
        self.counters
            .dropped_behind_pages
            .fetch_add(dropped, Ordering::Relaxed);
        if dropped > 0 {
            // As every other path that frees slots: an allocator or async reader waiting for
            // room is told.
            self.slots_freed();
        }
    }

    /// Visit the pages `[start, end)` of `t` that have a word, a group of them at a time under
    /// its shard's lock; `visit` says whether the readers waiting in that shard are to be woken
    /// once the lock is let go.
    fn each_locked(
        &self,
        t: &PageTable,
        start: u64,
        end: u64,
        mut visit: impl FnMut(u64, &AtomicU64) -> bool,
    ) {
        let mut p = start;
        while p < end {
            let ge = group_end(p, end);
            let shard = shard_of(t.id, p);
            let g = self.lock(shard);
            let mut wake = false;
            while p < ge {
                if let Some(w) = t.get(p) {
                    wake |= visit(p, w);
                }
                p += 1;
            }
            drop(g);
            if wake {
                self.notify(shard);
            }
        }
    }

    /// What a page brought in now costs in fresh memory, in ns: what the kernel's first touch
    /// of a page has cost here (measured by the fault-ahead helper) while the cache grows into
    /// memory it never used (no free slot below the frontier), else 0 (it reuses memory, or
    /// the helper measured nothing: its memory was faulted in at build, or no local file
    /// grew it).
    pub fn first_touch_ns(&self) -> u64 {
        if self.free_below_frontier.load(Ordering::Relaxed) > 0
            || self.frontier.load(Ordering::Relaxed) >= self.slots
        {
            return 0;
        }
        self.fault_ahead.first_touch_ns()
    }

    /// No memory faulted in ahead of the frontier (the engine's `fault_ahead(false)`).
    pub fn no_fault_ahead(&self) {
        self.fault_ahead.turn_off();
    }

    /// Why memory is not faulted in ahead of the frontier, where the system refused it.
    pub fn fault_ahead_refused(&self) -> Option<String> {
        self.fault_ahead.refused()
    }

    /// Fault in the whole arena now (the engine's `pretouch`), so nothing is left to fault in
    /// ahead of the frontier.
    pub fn populate(&self) -> io::Result<()> {
        self.arena.populate()?;
        self.fault_ahead.turn_off();
        Ok(())
    }

    /// The page table of file `id` (of `pages` pages), made on first use. An id names one
    /// version of a file's contents (see `Identity`), so its size never changes.
    pub fn table(&self, id: u32, pages: u64) -> Arc<PageTable> {
        if let Some(t) = self
            .tables
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            return t.clone();
        }
        self.tables
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_insert_with(|| {
                let bulk = self.drop_behind.load(Ordering::Relaxed) && pages > self.run_cap_pages();
                Arc::new(PageTable::new(id, pages, bulk))
            })
            .clone()
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, ()> {
        self.shards[shard]
            .lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Wake the readers waiting in `shard` (called after changing a page of it, the change
    /// made under its lock: a reader counts itself in under the same lock before it waits).
    fn notify(&self, shard: usize) {
        let sh = &self.shards[shard];
        if sh.waiters.load(Ordering::Acquire) > 0 {
            sh.changed.notify_all();
        }
        sh.tasks.wake_all();
    }

    /// Tell allocators waiting for a slot that some may be free.
    fn slots_freed(&self) {
        if self.alloc_waiters.load(Ordering::Acquire) > 0 {
            self.slot_freed.notify_all();
        }
        self.slot_tasks.wake_all();
    }

    /// Wake the task of `waker` when slots may have been freed: an async reader that found no
    /// room registers before it tries again.
    pub fn wake_when_slots_free(&self, waker: &Waker) {
        self.slot_tasks.register(waker);
    }

    /// Whether `page` is ready or in flight.
    pub fn is_cached(&self, t: &PageTable, page: u64) -> bool {
        word::cached(t.load(page))
    }

    /// Whether `page` is in flight: claimed by a read that has not completed.
    pub fn is_in_flight(&self, t: &PageTable, page: u64) -> bool {
        word::state(t.load(page)) == word::IN_FLIGHT
    }

    /// Whether `page` is cached with a marker.
    pub fn has_marker(&self, t: &PageTable, page: u64) -> bool {
        let w = t.load(page);
        word::cached(w) && w & word::MARKER != 0
    }

    /// Set or clear `page`'s marker (if it is cached).
    pub fn set_marker(&self, t: &PageTable, page: u64, on: bool) {
        let Some(w) = t.get(page) else { return };
        let _g = self.lock(shard_of(t.id, page));
        let v = w.load(Ordering::Acquire);
        if word::cached(v) {
            let v = if on {
                v | word::MARKER
            } else {
                v & !word::MARKER
            };
            w.store(v, Ordering::Release);
        }
    }

    /// The first page in `[from, end)` that is not cached, or `end`.
    pub fn next_miss(&self, t: &PageTable, from: u64, end: u64) -> u64 {
        (from..end)
            .find(|&p| !word::cached(t.load(p)))
            .unwrap_or(end)
    }

    /// Claim the absent pages from `start` on (at most `max` pages, stopping at the first
    /// cached page) as in flight, in the file's current generation. Returns how many were
    /// claimed (0 if `start` is cached), how many of them were shadows (refaults: thrashing),
    /// and the claim their read must carry to land ([`Cache::complete`]). A change of the file
    /// during the claim ends it there: every page of one claim carries one generation.
    pub fn claim_run(&self, t: &PageTable, start: u64, max: u64) -> Claimed {
        let end = start.saturating_add(max);
        let mut p = start;
        let mut claimed = Claimed {
            pages: 0,
            refaults: 0,
            claim: 0,
        };
        while p < end {
            let ge = group_end(p, end);
            let _g = self.lock(shard_of(t.id, p));
            // Read under the shard lock: a change bumps the generation before it takes this
            // lock to drop the group's pages, so a page claimed here either is dropped by that
            // change or carries the new generation.
            let generation = t.generation.load(Ordering::Acquire);
            if p == start {
                claimed.claim = generation;
            } else if generation != claimed.claim {
                break;
            }
            while p < ge {
                let Some(w) = t.make(p) else {
                    claimed.pages = p - start;
                    return claimed;
                };
                let v = w.load(Ordering::Acquire);
                match word::state(v) {
                    word::IN_FLIGHT | word::READY => {
                        claimed.pages = p - start;
                        return claimed;
                    }
                    word::SHADOW => {
                        claimed.refaults += 1;
                        self.shadows.fetch_sub(1, Ordering::Relaxed);
                    }
                    word::FAILED => {
                        self.failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&(t.id, p));
                    }
                    _ => {}
                }
                w.store(word::in_flight(claimed.claim), Ordering::Release);
                p += 1;
            }
        }
        claimed.pages = p - start;
        claimed
    }

    /// Give back claimed pages `[start, end)` that will not be read after all (those still
    /// carrying `claim`).
    pub fn unclaim(&self, t: &PageTable, start: u64, end: u64, claim: u32) {
        self.each_locked(t, start, end, |_, w| {
            if word::claimed_by(w.load(Ordering::Acquire), claim) {
                w.store(word::ABSENT, Ordering::Release);
            }
            true
        });
    }

    /// Allocate up to `n` slots for pages `first..` of file `id`, evicting as the clock goes.
    /// Returns what two turns of the hand found; with `wait`, if that is nothing, waits for
    /// I/O in flight to give slots back and tries again (so it returns at least one). A caller
    /// that gets fewer than `n` reads fewer pages: holding some slots while waiting for more
    /// could deadlock readers against each other.
    pub fn alloc(&self, id: u32, first: u64, n: usize, wait: bool) -> Vec<u32> {
        let mut got = Vec::with_capacity(n);
        let mut clock = self.clock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let mut steps = 0;
            while got.len() < n {
                // Below the budget, the hand takes free slots only: no page is evicted while
                // the budget has room for the read (a page read ahead and evicted unused is
                // read again; sweeping for free slots among such pages, clearing their
                // reference bits on the way, the hand took them on its next turn, and the
                // file's window was cut for thrashing in a cache far from full). Grow while
                // nothing below the frontier is free, or once a turn found no free slot (one
                // freed behind the hand meanwhile waits for the next turn): a new slot costs
                // memory the budget allows.
                let room = clock.frontier < self.slots;
                if room
                    && (self.free_below_frontier.load(Ordering::Acquire) == 0
                        || steps >= clock.frontier)
                {
                    let s = clock.frontier;
                    clock.frontier += 1;
                    self.frontier.store(clock.frontier, Ordering::Release);
                    self.slot_state[s].store(SLOT_IN_FLIGHT, Ordering::Release);
                    let key = (id, first + got.len() as u64);
                    self.slot_owner[s].store(pack(key), Ordering::Relaxed);
                    got.push(s as u32);
                    clock.taken(s);
                    continue;
                }
                // Two turns of the slots below it: the first may only clear reference bits.
                if steps >= 2 * clock.frontier {
                    break;
                }
                let s = clock.hand % clock.frontier;
                clock.hand = (s + 1) % clock.frontier;
                steps += 1;
                let taken = if room {
                    self.try_take_free(s)
                } else {
                    self.try_take(s)
                };
                if let Some(slot) = taken {
                    let key = (id, first + got.len() as u64);
                    self.slot_owner[slot as usize].store(pack(key), Ordering::Relaxed);
                    got.push(slot);
                    clock.taken(s);
                }
            }
            if !got.is_empty() || !wait {
                return got;
            }
            self.alloc_waiters.fetch_add(1, Ordering::AcqRel);
            // A timeout too: a slot freed between the sweep and the count above is not
            // signalled.
            clock = self
                .slot_freed
                .wait_timeout(clock, Duration::from_millis(1))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            self.alloc_waiters.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Take slot `s` if it is free. Called with the clock held.
    fn try_take_free(&self, s: usize) -> Option<u32> {
        (self.slot_state[s].load(Ordering::Acquire) == SLOT_FREE).then(|| {
            self.slot_state[s].store(SLOT_IN_FLIGHT, Ordering::Release);
            self.free_below_frontier.fetch_sub(1, Ordering::AcqRel);
            s as u32
        })
    }

    /// Take slot `s` if it is free or holds an evictable page (clearing its reference bit
    /// otherwise). Called with the clock held.
    fn try_take(&self, s: usize) -> Option<u32> {
        match self.slot_state[s].load(Ordering::Acquire) {
            SLOT_FREE => self.try_take_free(s),
            SLOT_READY => {
                if self.refbit[s].swap(false, Ordering::Relaxed) {
                    return None;
                }
                let (id, page) = unpack(self.slot_owner[s].load(Ordering::Relaxed));
                let t = self
                    .tables
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&id)?
                    .clone();
                let w = t.get(page)?;
                let _g = self.lock(shard_of(id, page));
                let v = w.load(Ordering::Acquire);
                if word::state(v) != word::READY || word::slot(v) as usize != s {
                    return None;
                }
                let next = if v & word::USED != 0 {
                    word::ABSENT
                } else {
                    self.counters.wasted_pages.fetch_add(1, Ordering::Relaxed);
                    t.wasted_pages.fetch_add(1, Ordering::Relaxed);
                    // Remember it (within a bound) to recognise a refault.
                    if self.shadows.load(Ordering::Relaxed) < self.slots {
                        self.shadows.fetch_add(1, Ordering::Relaxed);
                        word::SHADOW
                    } else {
                        word::ABSENT
                    }
                };
                // The word changes before the slot is handed to another read: a reader that
                // copied from it meanwhile sees the change and discards its copy.
                w.store(next, Ordering::Release);
                self.slot_state[s].store(SLOT_IN_FLIGHT, Ordering::Release);
                Some(s as u32)
            }
            _ => None,
        }
    }

    /// An I/O into `slots` for pages `first..`, claimed as `claim`, finished: `Ok(bytes)` or
    /// the error; `ahead`: it was read ahead of its reader, not for a reader's miss. `expected`: the bytes the file holds in that range (less than the slots'
    /// size at the file's end). Pages the read did not fill are left absent (a short read
    /// mid-file, say from a file truncated meanwhile, caches nothing for them); on error every
    /// page is `Failed`. A page that no longer carries the claim (the file changed while the
    /// read was in flight, and the page was dropped, perhaps claimed again by a read of the
    /// new contents) is left as it is: the read's bytes for it are discarded.
    // Each argument is one fact of the finished read, as its `ReadOp` holds them.
    #[allow(clippy::too_many_arguments)]
    pub fn complete(
        &self,
        t: &PageTable,
        first: u64,
        slots: &[u32],
        claim: u32,
        expected: u64,
        result: &io::Result<usize>,
        ahead: bool,
    ) {
        let ahead_bit = if ahead { word::AHEAD } else { 0 };
        let stamp = self.landings.fetch_add(1, Ordering::Relaxed);
        let failure = result.as_ref().err().map(|e| Arc::new(Failure::of(e)));
        let got = *result.as_ref().unwrap_or(&0) as u64;
        let end = first + slots.len() as u64;
        let mut p = first;
        while p < end {
            let ge = group_end(p, end);
            let shard = shard_of(t.id, p);
            let g = self.lock(shard);
            while p < ge {
                let i = (p - first) as usize;
                let s = slots[i];
                let page_start = i as u64 * PAGE_SIZE;
                let want = expected.saturating_sub(page_start).min(PAGE_SIZE);
                let have = got.saturating_sub(page_start).min(PAGE_SIZE);
                let w = t
                    .get(p)
                    .filter(|w| word::claimed_by(w.load(Ordering::Acquire), claim));
                match (w, &failure) {
                    (Some(w), None) if have >= want && want > 0 => {
                        self.refbit[s as usize].store(true, Ordering::Relaxed);
                        self.slot_state[s as usize].store(SLOT_READY, Ordering::Release);
                        // The marker was planted when the read was started; it stays.
                        let marker = w.load(Ordering::Relaxed) & word::MARKER;
                        w.store(
                            word::ready(s, have as usize, stamp) | marker | ahead_bit,
                            Ordering::Release,
                        );
                    }
                    (Some(w), Some(f)) => {
                        self.failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert((t.id, p), f.clone());
                        w.store(word::FAILED, Ordering::Release);
                        self.free_slot(s);
                    }
                    (w, _) => {
                        // Short (nothing cached for it), or dropped meanwhile (a change: not
                        // this read's page any more).
                        if let Some(w) = w {
                            w.store(word::ABSENT, Ordering::Release);
                        }
                        self.free_slot(s);
                    }
                }
                p += 1;
            }
            drop(g);
            self.notify(shard);
        }
        self.slots_freed();
    }

    /// Copy the page's bytes from `from` (within the page) into `dst`. Without `wait`, only a
    /// ready page is copied (no lock taken); with it, the reader waits while the page is in
    /// flight (the time waited is added to `stall`).
    pub fn read_page(
        &self,
        t: &PageTable,
        page: u64,
        from: usize,
        dst: &mut [u8],
        wait: bool,
        stall: &mut Duration,
    ) -> Lookup {
        let Some(w) = t.get(page) else {
            return Lookup::Absent;
        };
        if let Some(l) = self.try_copy(w, from, dst) {
            return l;
        }
        if !wait {
            return Lookup::Absent;
        }
        let shard = shard_of(t.id, page);
        let mut g = self.lock(shard);
        let mut waited: Option<Instant> = None;
        loop {
            let v = w.load(Ordering::Acquire);
            match word::state(v) {
                word::READY => {
                    // Under the shard lock nothing can evict it: copy, then account.
                    drop(g);
                    if let Some(copied) = self.try_copy(w, from, dst) {
                        if let Some(t0) = waited {
                            *stall += t0.elapsed();
                        }
                        return copied;
                    }
                    g = self.lock(shard);
                }
                word::IN_FLIGHT => {
                    waited.get_or_insert_with(Instant::now);
                    let sh = &self.shards[shard];
                    sh.waiters.fetch_add(1, Ordering::AcqRel);
                    g = sh.changed.wait(g).unwrap_or_else(|p| p.into_inner());
                    sh.waiters.fetch_sub(1, Ordering::AcqRel);
                }
                word::FAILED => return self.failure_of(t, page),
                _ => return Lookup::Absent,
            }
        }
    }

    /// [`Cache::read_page`] for an async reader: a page in flight is not waited for; the task
    /// of `waker` is registered with its shard (under the lock its completion takes, so the
    /// completion cannot slip between the look and the registration) and `Pending` returned.
    pub fn poll_page(
        &self,
        t: &PageTable,
        page: u64,
        from: usize,
        dst: &mut [u8],
        waker: &Waker,
    ) -> Poll<Lookup> {
        let Some(w) = t.get(page) else {
            return Poll::Ready(Lookup::Absent);
        };
        loop {
            if let Some(l) = self.try_copy(w, from, dst) {
                return Poll::Ready(l);
            }
            let shard = shard_of(t.id, page);
            let g = self.lock(shard);
            match word::state(w.load(Ordering::Acquire)) {
                word::READY => continue, // evicted and read again during the copy: look again
                word::IN_FLIGHT => {
                    self.shards[shard].tasks.register(waker);
                    drop(g);
                    return Poll::Pending;
                }
                word::FAILED => {
                    drop(g);
                    return Poll::Ready(self.failure_of(t, page));
                }
                _ => return Poll::Ready(Lookup::Absent),
            }
        }
    }

    /// Whether `page` has settled (not in flight: ready, absent, or failed with the kept
    /// failure), registering the task of `waker` with its shard if not. For a prefetch that
    /// waits without copying.
    pub fn poll_settled(
        &self,
        t: &PageTable,
        page: u64,
        waker: &Waker,
    ) -> Poll<Option<Arc<Failure>>> {
        let Some(w) = t.get(page) else {
            return Poll::Ready(None);
        };
        if word::state(w.load(Ordering::Acquire)) == word::READY {
            return Poll::Ready(None);
        }
        let shard = shard_of(t.id, page);
        let g = self.lock(shard);
        match word::state(w.load(Ordering::Acquire)) {
            word::IN_FLIGHT => {
                self.shards[shard].tasks.register(waker);
                Poll::Pending
            }
            word::FAILED => {
                drop(g);
                match self.failure_of(t, page) {
                    Lookup::Failed(f) => Poll::Ready(Some(f)),
                    _ => Poll::Ready(None),
                }
            }
            _ => Poll::Ready(None),
        }
    }

    /// The kept failure of a failed page (absent if it was dropped meanwhile).
    fn failure_of(&self, t: &PageTable, page: u64) -> Lookup {
        let f = self
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(t.id, page))
            .cloned();
        match f {
            Some(f) => Lookup::Failed(f),
            None => Lookup::Absent,
        }
    }

    /// Copy a ready page without a lock: load its word, copy, load it again. If the word still
    /// names the same ready slot, no eviction intervened and the copy is good. `None` if the
    /// page is not ready (or was evicted during the copy).
    #[inline]
    fn try_copy(&self, w: &AtomicU64, from: usize, dst: &mut [u8]) -> Option<Lookup> {
        let v = w.load(Ordering::Acquire);
        if word::state(v) != word::READY {
            return None;
        }
        let slot = word::slot(v);
        let n = word::valid(v).saturating_sub(from).min(dst.len());
        // SAFETY: `from + n <= valid <= PAGE`, so the source lies within the slot, a slot of
        // the arena. The page was ready when its word was loaded (Acquire, pairing with the
        // Release store that published it after its read completed). An eviction may hand the
        // slot to another read during the copy; it changes this word first, which the check
        // below sees, and the copy is then discarded: the bytes a reader gets are always the
        // page's. Should the page land in the same slot again before the check, its word
        // carries another landing stamp, and the check sees that too.
        unsafe {
            std::ptr::copy_nonoverlapping(self.arena.slot_ptr(slot).add(from), dst.as_mut_ptr(), n);
        }
        fence(Ordering::Acquire);
        let again = w.load(Ordering::Relaxed);
        if again & !(word::MARKER | word::USED) != v & !(word::MARKER | word::USED) {
            return None;
        }
        if again & word::USED == 0 {
            w.fetch_or(word::USED, Ordering::Relaxed);
        }
        let r = &self.refbit[slot as usize];
        if !r.load(Ordering::Relaxed) {
            r.store(true, Ordering::Relaxed);
        }
        let whole = from + n == PAGE || n == dst.len();
        Some(Lookup::Copied { n, whole })
    }

    /// Drop the ready pages `[start, end)` (don't-need); pages in flight stay, as the
    /// kernel's `POSIX_FADV_DONTNEED` leaves pages under I/O.
    pub fn drop_range(&self, t: &PageTable, start: u64, end: u64) {
        self.drop_pages(t, start, end, false);
    }

    /// The file's contents changed: every page of it goes, those in flight too. A read in
    /// flight may have read the old bytes; the new generation tells its completion that its
    /// pages are no longer its own, so it lands nothing, and a reader waiting for one of them
    /// is woken to read it again.
    pub fn invalidate(&self, t: &PageTable, pages: u64) {
        // Before any shard lock is taken: a claim made after this walk passes its group reads
        // the new generation under that lock (see `claim_run`).
        t.generation.fetch_add(1, Ordering::AcqRel);
        self.drop_pages(t, 0, pages, true);
    }

    fn drop_pages(&self, t: &PageTable, start: u64, end: u64, in_flight_too: bool) {
        self.each_locked(t, start, end, |p, w| {
            let v = w.load(Ordering::Acquire);
            match word::state(v) {
                word::READY => {
                    w.store(word::ABSENT, Ordering::Release);
                    self.free_slot(word::slot(v));
                }
                word::IN_FLIGHT if in_flight_too => {
                    // Its slot stays its read's until the read completes; its waiters wake.
                    w.store(word::ABSENT, Ordering::Release);
                    return true;
                }
                word::FAILED => {
                    w.store(word::ABSENT, Ordering::Release);
                    self.failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&(t.id, p));
                }
                word::SHADOW => {
                    w.store(word::ABSENT, Ordering::Release);
                    self.shadows.fetch_sub(1, Ordering::Relaxed);
                }
                _ => {}
            }
            false
        });
        self.slots_freed();
    }

    /// Give the system back the arena's free memory (see the module comment): above the
    /// highest slot in use, keeping `granule` bytes above it and starting on a multiple of
    /// `granule` (a page at least); and below it, each unit of `granule` bytes (2 MiB at
    /// least) whose slots are all free, with no read in flight in either neighbour.
    /// `let_go(from, to)` is called first for each range, with the clock held and no read in
    /// flight within a granule of it: the backend drops its hold on the arena there. Returns
    /// the slots given back.
    pub fn trim(&self, granule: usize, mut let_go: impl FnMut(usize, usize)) -> usize {
        let min_slots = TRIM_MIN_BYTES / PAGE;
        if self.free_below_frontier.load(Ordering::Acquire) < min_slots
            || self.freed_since_trim.load(Ordering::Acquire) < min_slots
        {
            return 0;
        }
        let mut clock = self.clock.lock().unwrap_or_else(|p| p.into_inner());
        self.freed_since_trim.store(0, Ordering::Release);
        let granule_slots = granule.div_ceil(PAGE).max(1);
        let old = clock.frontier;
        let mut top = old;
        // Free slots are counted before they are marked, and only the clock takes them: the
        // ones seen free here stay free while the clock is held.
        while top > 0 && self.slot_state[top - 1].load(Ordering::Acquire) == SLOT_FREE {
            top -= 1;
        }
        // A granule above the highest slot in use: no read in flight reaches past it.
        let clear = (top.div_ceil(granule_slots) + 1) * granule_slots;
        let keep = clear.min(old);
        let mut given = 0;
        // The helper that faults memory in ahead of the frontier, held off meanwhile: what it
        // faulted in above the frontier goes back too, and it starts again from there.
        let fault_ahead = self.fault_ahead.hold();
        let ahead_to = fault_ahead.faulted_to().min(self.slots);
        if old - keep >= min_slots {
            let_go(keep * PAGE, self.slots * PAGE);
            self.give_back(keep, old.max(ahead_to));
            clock.frontier = keep;
            clock.hand %= keep;
            self.frontier.store(keep, Ordering::Release);
            self.free_below_frontier
                .fetch_sub(old - keep, Ordering::AcqRel);
            given += old - keep;
            fault_ahead.gave_back_from(keep);
        } else if ahead_to > clear.max(old) {
            let from = clear.max(old);
            let_go(from * PAGE, self.slots * PAGE);
            self.give_back(from, ahead_to);
            fault_ahead.gave_back_from(from);
        } else {
            fault_ahead.gave_back_from(ahead_to.max(old));
        }
        given + self.trim_below(&mut clock, granule_slots, &mut let_go)
    }

    /// The units below the frontier that [`Cache::trim`] gives back: those whose slots are all
    /// free and were not given back already, where neither neighbour has a read in flight (a
    /// backend's hold on the arena, dropped for the unit, may reach into a neighbour: io_uring's
    /// buffers span two slabs; a neighbour's cached pages stay mapped, but a read in flight
    /// into it may be using that hold).
    fn trim_below(
        &self,
        clock: &mut Clock,
        granule_slots: usize,
        let_go: &mut impl FnMut(usize, usize),
    ) -> usize {
        let unit = granule_slots * (GIVE_BACK_UNIT_BYTES / PAGE).div_ceil(granule_slots).max(1);
        if clock.unit_slots != unit {
            clock.unit_slots = unit;
            clock.given_back.clear();
        }
        let units = clock.frontier / unit;
        clock
            .given_back
            .resize(units.max(clock.given_back.len()), false);
        // Whether unit `u` has every slot free, and whether it has a read in flight.
        let look = |u: usize| {
            let slots = &self.slot_state[u * unit..(u + 1) * unit];
            let state = |s: &AtomicU8| s.load(Ordering::Acquire);
            (
                slots.iter().all(|s| state(s) == SLOT_FREE),
                slots.iter().any(|s| state(s) == SLOT_IN_FLIGHT),
            )
        };
        let mut given = 0;
        // Units u - 1, u and u + 1, carried along the scan (one past the end: no read there).
        let mut before = (true, false);
        let mut here = if units > 0 { look(0) } else { (false, false) };
        for u in 0..units {
            let after = if u + 1 < units {
                look(u + 1)
            } else {
                (false, false)
            };
            if here.0 && !before.1 && !after.1 && !clock.given_back[u] {
                let (from, to) = (u * unit, (u + 1) * unit);
                let_go(from * PAGE, to * PAGE);
                self.give_back(from, to);
                clock.given_back[u] = true;
                given += unit;
            }
            (before, here) = (here, after);
        }
        given
    }

    /// Return slots `[from, to)` of the arena to the system (none of them in use), counted.
    fn give_back(&self, from: usize, to: usize) {
        // SAFETY: advice on slots of the arena none of which is in use or handed out while the
        // clock is held; a reader still copying from one of them (a page dropped under it)
        // reads zeros and discards the copy when it checks the page's word again.
        unsafe {
            libc::madvise(
                self.arena.base().add(from * PAGE).cast(),
                (to - from) * PAGE,
                libc::MADV_DONTNEED,
            );
        }
        self.counters
            .given_back_pages
            .fetch_add((to - from) as u64, Ordering::Relaxed);
    }

    /// Slot `s` holds nothing now. Counted before it is marked, so the clock, which takes
    /// it only once marked, never counts it out first.
    fn free_slot(&self, s: u32) {
        self.free_below_frontier.fetch_add(1, Ordering::AcqRel);
        self.freed_since_trim.fetch_add(1, Ordering::AcqRel);
        self.slot_state[s as usize].store(SLOT_FREE, Ordering::Release);
    }

    /// Slots handed out so far: the part of the arena that holds memory.
    pub fn touched_slots(&self) -> usize {
        self.frontier.load(Ordering::Acquire)
    }

    /// Pages whose read is in flight, for tests and stats.
    pub fn in_flight_pages(&self) -> usize {
        self.slot_state[..self.touched_slots()]
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == SLOT_IN_FLIGHT)
            .count()
    }

    /// Pages ready or in flight, for tests and stats.
    pub fn resident_pages(&self) -> usize {
        self.slot_state[..self.touched_slots()]
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != SLOT_FREE)
            .count()
    }
}

mod fault_ahead;
#[cfg(test)]
mod tests;
