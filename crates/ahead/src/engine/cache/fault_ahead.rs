//! Faulting in the arena ahead of the frontier, on a thread of its own.
//!
//! The arena is only reserved (`cache.rs`): its memory is faulted in as slots are first handed
//! out. The kernel's first touch of a page zeroes it and, for the huge pages the arena asks
//! for, may first compact memory to find one; on a virtual machine that reports free memory
//! to its host, the host must first give the page back, which costs the most. Left to the
//! reads, that is paid by the thread that submits them (an `O_DIRECT` read pins its pages,
//! io_uring registers a slab), which is the reader's, while the device waits: a process's
//! first engine filled its cache at a quarter of the speed of one whose memory was faulted in
//! (BENCHMARKS, issue 22, `embed_bench first-touch`).
//!
//! So once a cache has grown past [`AFTER_BYTES`] for such reads (a local file's: the engine
//! tells it so, `Cache::note_growth`; a remote object's bytes are copied in by the threads that
//! receive them, off the reader's path, and memory faulted in ahead for them was only held:
//! 20 MiB more at the peak of a Parquet read), a helper thread keeps the next
//! [`AHEAD_BYTES`] past the frontier faulted in, [`CHUNK_BYTES`] at a time, with
//! `MADV_POPULATE_WRITE`: it faults pages in without changing what they hold, so it cannot
//! disturb a read that lands there meanwhile. The memory is the arena's, so within the budget,
//! and a cache that holds a few pages never starts the helper. Where the kernel has no
//! `MADV_POPULATE_WRITE` (before 5.14), nothing is faulted ahead.
//!
//! The helper times its faults: what a page of fresh memory costs this machine
//! ([`FaultAhead::first_touch_ns`]), which the cache tells the policies while it grows into
//! fresh memory (`Cache::first_touch_ns`), so that what they read on speculation is charged
//! for the memory it takes as well as for the device's time.
//!
//! Giving memory back ([`super::Cache::trim`]) and the helper hold one lock (`advising`)
//! around their `madvise`s, and trim moves the helper's mark down under it: the helper never
//! faults in again a range trim has just given back, and trim gives back what the helper
//! faulted in above the frontier. The helper ends once it has had nothing to do for
//! [`IDLE_EXIT`], and the next growth starts another; dropping the cache stops it and waits.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::units::PAGE_SIZE;

/// How far past the frontier the helper keeps memory faulted in: past the two slabs an
/// io_uring registration pins (`backend/uring.rs`), so the registration finds its memory there.
pub(super) const AHEAD_BYTES: usize = 24 << 20;
/// The cache's size before the helper starts.
pub(super) const AFTER_BYTES: usize = 8 << 20;
/// The helper's unit of work, and how often the frontier tells it (a huge page).
pub(super) const CHUNK_BYTES: usize = 2 << 20;
/// The least a chunk's pages must have cost the helper, in ns a page, to count in its measure
/// of fresh memory: pages a read or a registration faulted in first cost it nothing, so a
/// chunk faster than this is one it mostly found done.
const LEAST_MEASURED_NS: u64 = 1_000;
/// How long the helper waits for more growth before it ends.
const IDLE_EXIT: Duration = Duration::from_millis(200);

const PAGE: usize = PAGE_SIZE as usize;

/// The helper's marks, in slots.
struct Marks {
    /// Slots below this hold memory (faulted in by the helper, or handed out by the cache).
    faulted_to: usize,
    /// Where the helper is to fault in up to.
    wanted_to: usize,
    /// A helper thread is running (or starting).
    running: bool,
    stop: bool,
    /// Nothing is faulted ahead: the engine faulted in its whole arena, or the kernel refused.
    off: bool,
    /// Why the helper stopped for good, where the system refused it (for the engine's stats).
    refused: Option<String>,
}

struct Shared {
    /// The arena's first byte, and its size in slots.
    base: usize,
    slots: usize,
    /// Held around every `madvise` above the frontier: the helper's and trim's.
    advising: Mutex<()>,
    marks: Mutex<Marks>,
    work: Condvar,
    /// The last chunk of the arena the helper was told the frontier reached.
    told_chunk: AtomicUsize,
    /// What faulting in a page has cost the helper, in ns, a running mean (0: not measured).
    first_touch_ns: AtomicU64,
}

pub(super) struct FaultAhead {
    shared: Arc<Shared>,
    helper: Mutex<Option<JoinHandle<()>>>,
}

impl FaultAhead {
    /// The helper for an arena of `slots` pages at `base`, not started.
    pub fn new(base: *mut u8, slots: usize) -> FaultAhead {
        FaultAhead {
            shared: Arc::new(Shared {
                base: base as usize,
                slots,
                advising: Mutex::new(()),
                marks: Mutex::new(Marks {
                    faulted_to: 0,
                    wanted_to: 0,
                    running: false,
                    stop: false,
                    off: false,
                    refused: None,
                }),
                work: Condvar::new(),
                told_chunk: AtomicUsize::new(0),
                first_touch_ns: AtomicU64::new(0),
            }),
            helper: Mutex::new(None),
        }
    }

    /// What faulting in a page of fresh memory has cost here, in ns: the mean of the helper's
    /// recent chunks (each counts a quarter), 0 before it has faulted in one.
    pub fn first_touch_ns(&self) -> u64 {
        self.shared.first_touch_ns.load(Ordering::Relaxed)
    }

    /// Have the helper's measure be `ns` (tests: a machine's real cost may be below what the
    /// helper counts).
    #[cfg(test)]
    pub fn set_first_touch_ns(&self, ns: u64) {
        self.shared.first_touch_ns.store(ns, Ordering::Relaxed);
    }

    /// Nothing to fault in ahead, ever: the engine was built without it, or its whole arena
    /// was faulted in (`pretouch`).
    pub fn turn_off(&self) {
        self.shared.marks().off = true;
    }

    /// The frontier is at `frontier`: tell the helper once it has passed [`AFTER_BYTES`] and
    /// each time it reaches a new chunk (an atomic load otherwise).
    pub fn grew_to(&self, frontier: usize) {
        let chunk = frontier / (CHUNK_BYTES / PAGE);
        let told = &self.shared.told_chunk;
        if frontier < AFTER_BYTES / PAGE || chunk <= told.load(Ordering::Relaxed) {
            return;
        }
        if told.fetch_max(chunk, Ordering::Relaxed) < chunk {
            self.frontier_moved(frontier);
        }
    }

    /// The frontier reached `frontier`: have the helper fault in up to [`AHEAD_BYTES`] past it,
    /// starting it if it is not running.
    pub fn frontier_moved(&self, frontier: usize) {
        let shared = &self.shared;
        {
            let mut marks = shared.marks();
            if marks.off || marks.stop {
                return;
            }
            marks.faulted_to = marks.faulted_to.max(frontier);
            let wanted = (frontier + AHEAD_BYTES / PAGE).min(shared.slots);
            if wanted <= marks.wanted_to {
                return;
            }
            marks.wanted_to = wanted;
            if marks.running {
                shared.work.notify_one();
                return;
            }
            marks.running = true;
        }
        let mut helper = self.helper.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ended) = helper.take() {
            // It said it was no longer running before it returned.
            let _ = ended.join();
        }
        let for_helper = shared.clone();
        match std::thread::Builder::new()
            .name("ahead-fault-ahead".into())
            .spawn(move || for_helper.fault_in_ahead())
        {
            Ok(h) => *helper = Some(h),
            Err(e) => {
                // No thread: the reads fault their memory in, as without the helper.
                let mut marks = shared.marks();
                marks.running = false;
                marks.off = true;
                marks.refused = Some(format!(
                    "no thread to fault the cache's memory in ahead of its reads ({e}): the reads fault in their own"
                ));
            }
        }
    }

    /// Why memory is not faulted in ahead, if the system refused it.
    pub fn refused(&self) -> Option<String> {
        self.shared.marks().refused.clone()
    }

    /// Hold off the helper while memory above the frontier is given back; what the guard
    /// says is how far up the helper faulted memory in.
    pub fn hold(&self) -> Held<'_> {
        Held {
            shared: &self.shared,
            _advising: self
                .shared
                .advising
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        }
    }
}

/// The helper held off (see [`FaultAhead::hold`]).
pub(super) struct Held<'a> {
    shared: &'a Shared,
    _advising: MutexGuard<'a, ()>,
}

impl Held<'_> {
    /// Slots below this may hold memory above the frontier: the helper's mark.
    pub fn faulted_to(&self) -> usize {
        self.shared.marks().faulted_to
    }

    /// Trim is done: memory from slot `from` up was given back, or none was and `from` is
    /// where the helper's memory ends (the frontier at least). The helper's work still to do
    /// is dropped (the cache shrank), and the next growth starts it from `from`, never below:
    /// below the frontier, trim gives back units whose slots are all free.
    pub fn gave_back_from(&self, from: usize) {
        let mut marks = self.shared.marks();
        marks.faulted_to = from;
        marks.wanted_to = marks.wanted_to.min(from);
        // The frontier may be lower now: the next growth past it is news again.
        self.shared
            .told_chunk
            .store(from / (CHUNK_BYTES / PAGE), Ordering::Relaxed);
    }
}

impl Drop for FaultAhead {
    fn drop(&mut self) {
        self.shared.marks().stop = true;
        self.shared.work.notify_all();
        let helper = self.helper.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = helper.take() {
            let _ = h.join();
        }
    }
}

impl Shared {
    fn marks(&self) -> MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The helper thread: fault in a chunk at a time while there is one to do.
    fn fault_in_ahead(&self) {
        loop {
            {
                let mut marks = self.marks();
                while !marks.stop && !marks.off && marks.faulted_to >= marks.wanted_to {
                    let (m, waited) = self
                        .work
                        .wait_timeout(marks, IDLE_EXIT)
                        .unwrap_or_else(|p| p.into_inner());
                    marks = m;
                    if waited.timed_out() && marks.faulted_to >= marks.wanted_to {
                        break;
                    }
                }
                if marks.stop || marks.off || marks.faulted_to >= marks.wanted_to {
                    marks.running = false;
                    return;
                }
            }
            let _advising = self.advising.lock().unwrap_or_else(|p| p.into_inner());
            // Read again under `advising`: trim may have moved the marks down meanwhile.
            let (from, to) = {
                let marks = self.marks();
                let from = marks.faulted_to;
                (from, marks.wanted_to.min(from + CHUNK_BYTES / PAGE))
            };
            if from >= to {
                continue;
            }
            let started = std::time::Instant::now();
            // SAFETY: advice on slots [from, to) of the arena, which is mapped until the cache
            // is dropped, and the cache's drop waits for this thread. MADV_POPULATE_WRITE faults
            // pages in writable without changing their contents, so a slot handed out and
            // being read into meanwhile is left as it is.
            let done = unsafe {
                libc::madvise(
                    (self.base + from * PAGE) as *mut libc::c_void,
                    (to - from) * PAGE,
                    libc::MADV_POPULATE_WRITE,
                )
            } == 0;
            let error = (!done).then(std::io::Error::last_os_error);
            let mut marks = self.marks();
            if let Some(e) = error {
                // No MADV_POPULATE_WRITE here (EINVAL before Linux 5.14), or no memory for it:
                // the reads fault in their own.
                marks.off = true;
                marks.running = false;
                marks.refused = Some(format!(
                    "faulting the cache's memory in ahead of its reads was refused (MADV_POPULATE_WRITE, Linux 5.14 and later: {e}): the reads fault in their own"
                ));
                return;
            }
            marks.faulted_to = marks.faulted_to.max(to);
            drop(marks);
            let ns = started.elapsed().as_nanos() as u64 / (to - from) as u64;
            if ns >= LEAST_MEASURED_NS {
                let mean = &self.first_touch_ns;
                let old = mean.load(Ordering::Relaxed);
                mean.store(
                    if old == 0 { ns } else { (3 * old + ns) / 4 },
                    Ordering::Relaxed,
                );
            }
        }
    }
}
