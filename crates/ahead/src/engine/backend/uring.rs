//! `uring`: io_uring, used directly through the `io-uring` crate (tokio-rs).
//!
//! * **Submission.** Any thread that needs a read pushes its entry onto the submission queue
//!   (under a small lock: the queue has one producer at a time) and enters the kernel to submit
//!   it; there is no hand-off to another thread on the way in. At most [`QUEUE`] reads, and
//!   [`MAX_IN_FLIGHT_BYTES`], are in flight; more wait in a backlog that completions drain,
//!   and from which a reader that needs one of them takes it back to read it itself
//!   (`take_queued`).
//! * **Buffers.** The cache's arena is registered with the ring as reads first reach it, not
//!   at start: registering pins memory, and pinning the whole budget up front made a 6 GiB
//!   engine take 16 s and 6 GiB to read a 100 KB file. The ring gets a sparse table of
//!   buffers at start; buffer `k` covers slabs `k` and `k + 1` of the arena ([`SLAB_BYTES`]
//!   each, so the buffers overlap by a slab) and is registered, pinning those two slabs, by the
//!   first read that starts in slab `k`; but the first buffer is never registered (unless
//!   the engine pretouches its memory), so a cache that holds a few pages pins none beyond
//!   them: its reads into the first slab are plain ones. Any read of at most a slab fits in
//!   the buffer of the slab it starts in, so a read into consecutive slots past the first slab
//!   is a `READ_FIXED`: no page pinning per request. The memory pinned is at most two slabs
//!   past what the cache has touched.
//!   Registration needs locked memory; where that is refused, plain `READ` is used and
//!   `stats()` says why. A read into scattered slots, or larger than a slab, is a plain
//!   `READV`/`READ`: the device still sees one request.
//! * **Files.** The ring has a table of registered files; a file's descriptor takes a slot
//!   on its first read through the ring and gives it back when the file is dropped (its last
//!   open and its last read gone), so a read names its file by slot and the kernel does not
//!   look the descriptor up and let go of it for every read (`fget`/`fput`: 1.7% of the
//!   submitting thread's time with 64 random reads in flight). A full table, or one the kernel
//!   refused, leaves reads naming the descriptor.
//! * **Completions.** One reaper thread waits in the kernel for completions of every read,
//!   whoever submitted it, refills the ring from the backlog, and only then marks the pages
//!   ready: the readers it wakes would otherwise take the CPUs while the device waits.
//!   Readers wait on the page they need only.
//! * **Completions reaped by the caller** (`Engine::completions`, see `engine::completions`).
//!   The kernel posts a read's completion from the thread that submitted it, so an executor's
//!   thread reading through the reaper wakes twice per burst: once to post the completions,
//!   and again when the reaper has reaped them and wakes its futures. A caller's event loop can
//!   watch the ring's descriptor instead and reap in its own thread. The completion queue has
//!   one consumer at a time (the `reaping` lock). While any outside driver is attached the
//!   reaper no longer waits in the kernel for completions, which would have it race the
//!   driver for every burst; it wakes every [`BACKSTOP`] (only while reads are in flight) and
//!   reaps what waited a whole tick with no driver reaping meanwhile, so a reader in another
//!   thread never depends on the caller's loop being run.
//!
//! Probing: a ring that cannot be set up (`ENOSYS`: no io_uring; `EPERM`: disabled by sysctl or
//! seccomp; `ENOMEM`: locked memory) or that cannot complete a no-op makes the engine fall back
//! to `threads`, and `stats()` reports the error.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};

use super::threads::ThreadsBackend;
use super::{Backend, Completer, FileData, ReadOp};
use crate::engine::{Fallback, FallbackKind};

/// Reads in flight at most (the ring's submission queue size).
pub const QUEUE: u32 = 256;
/// Bytes of reads on the device at most (one read larger than this goes alone). A deeper queue
/// does not read faster, it only delays what a reader waits for (its own read, or an ahead read
/// it caught up with) behind reads it does not need yet: measured on 16 threads interleaved
/// over one file, 16 MiB against an unbounded ring gave the same throughput within the noise
/// and a longest read of 2-23 ms against 48-64 ms. What is over waits in the backlog, where a
/// reader can take it back.
pub const MAX_IN_FLIGHT_BYTES: usize = 16 << 20;
/// `user_data` of the no-op that wakes the reaper to stop.
const WAKE: u64 = 0;
/// While a caller reaps completions (see the module comment): how often the reaper looks for
/// completions the caller left, and so how long, two ticks at most, a read waits for it to
/// take over where the caller's loop is not run.
pub const BACKSTOP: Duration = Duration::from_millis(2);
/// The arena's unit of registration with the ring (see the module comment): at least 8 MiB,
/// more for an arena too large for the kernel's table of at most [`MAX_BUFFERS`].
pub const SLAB_BYTES: usize = 8 << 20;
/// Entries of io_uring's table of registered buffers at most (`IORING_MAX_REG_BUFFERS`).
const MAX_BUFFERS: usize = 1 << 14;
/// Slots of the ring's table of registered files at most: files read at once through the ring
/// that are named by slot (more name their descriptor). The kernel also holds the table to the
/// process's descriptor limit (`RLIMIT_NOFILE`), often 1,024.
const FILE_SLOTS: u32 = 4096;

/// The ring's table of registered files (see the module comment): the slots free.
struct FixedFiles {
    free: Mutex<Vec<u32>>,
}

/// A file's slot in the ring's table, given back when the file is dropped. Kept in the file's
/// `backend_file`; a file that found no slot keeps `NoSlot` there instead.
struct RingFile {
    slot: u32,
    ring: Weak<Shared>,
}

/// Kept by a file that found the table full: its reads name its descriptor.
struct NoSlot;

/// `file`'s slot in the ring's table, if it has one.
fn ring_slot(file: &FileData) -> Option<u32> {
    file.backend_file
        .get()
        .and_then(|f| f.downcast_ref::<RingFile>())
        .map(|f| f.slot)
}

impl FixedFiles {
    fn free(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give `file` a slot, if it has had none and one is free.
    fn ensure(&self, shared: &Arc<Shared>, file: &FileData) {
        let Some(fd) = file.source.fd() else {
            return;
        };
        let _ = file.backend_file.get_or_init(|| {
            let Some(slot) = self.free().pop() else {
                return Box::new(NoSlot);
            };
            match shared
                .ring
                .submitter()
                .register_files_update(slot, &[fd.as_raw_fd()])
            {
                Ok(_) => Box::new(RingFile {
                    slot,
                    ring: Arc::downgrade(shared),
                }),
                Err(_) => {
                    self.free().push(slot);
                    Box::new(NoSlot)
                }
            }
        });
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        let Some(shared) = self.ring.upgrade() else {
            return; // the ring is gone, and its table with it
        };
        // -1 empties the slot: the kernel lets go of the file (reads still in flight hold
        // their own reference). A slot that could not be emptied is not used again.
        if shared
            .ring
            .submitter()
            .register_files_update(self.slot, &[-1])
            .is_ok()
        {
            if let Some(files) = &shared.files {
                files.free().push(self.slot);
            }
        }
    }
}

/// The process's soft limit on open descriptors (`RLIMIT_NOFILE`), or 1,024 if it cannot be
/// read.
fn descriptor_limit() -> u32 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    u32::try_from(limit.rlim_cur).unwrap_or(u32::MAX)
}

/// The submission entry reading `op` from `target` (the descriptor, or the file's slot).
macro_rules! read_entry {
    ($shared:expr, $op:expr, $target:expr) => {{
        let (shared, op, target) = ($shared, $op, $target);
        let offset = op.offset();
        let data = op as *const ReadOp as u64;
        if op.iov.len() == 1 {
            let buf = op.iov[0].iov_base.cast::<u8>();
            let len = op.iov[0].iov_len;
            match shared.fixed.as_ref().and_then(|f| f.index(buf, len)) {
                Some(index) => opcode::ReadFixed::new(target, buf, len as u32, index)
                    .offset(offset)
                    .build()
                    .user_data(data),
                None => opcode::Read::new(target, buf, len as u32)
                    .offset(offset)
                    .build()
                    .user_data(data),
            }
        } else {
            opcode::Readv::new(target, op.iov.as_ptr(), op.iov.len() as u32)
                .offset(offset)
                .build()
                .user_data(data)
        }
    }};
}

/// The arena as the ring's registered buffers, registered a buffer at a time as reads reach
/// it.
struct FixedBuffers {
    base: usize,
    bytes: usize,
    slab: usize,
    /// Whether buffer `k` (slabs `k` and `k + 1`) is registered. Changed under the submit
    /// lock.
    registered: Box<[AtomicBool]>,
    /// Set when a registration was refused: every read is a plain one from then on.
    refused: AtomicBool,
    /// Held while a buffer is registered, so two submitters do not register one twice.
    registering: Mutex<()>,
}

impl FixedBuffers {
    /// The index of the buffer that would hold `[buf, buf + len)`.
    fn buffer_for(&self, buf: *mut u8, len: usize) -> Option<usize> {
        let at = (buf as usize).checked_sub(self.base)?;
        let k = at / self.slab;
        (at + len <= self.range_of(k).1 && k < self.registered.len()).then_some(k)
    }

    /// The arena's bytes buffer `k` covers: slabs `k` and `k + 1`.
    fn range_of(&self, k: usize) -> (usize, usize) {
        let start = k * self.slab;
        (start, (start + 2 * self.slab).min(self.bytes))
    }

    /// Register the buffer that holds `[buf, buf + len)` if no read has reached it yet. Called
    /// before the submit lock is taken: registering pins the buffer's memory, which costs
    /// milliseconds the first time the arena's memory is touched, and a reader taking back a
    /// queued read must not wait behind it.
    fn ensure(&self, ring: &IoUring, buf: *mut u8, len: usize, note: &Mutex<Option<Fallback>>) {
        if self.refused.load(Ordering::Relaxed) {
            return;
        }
        let Some(k) = self.buffer_for(buf, len) else {
            return;
        };
        // Not the first buffer: reads into the arena's first slab stay plain, so a cache that
        // holds a few pages does not pin two slabs (16 MiB) for them.
        if k == 0 {
            return;
        }
        self.register(ring, k, note);
    }

    /// Register buffer `k`, unless it is already.
    fn register(&self, ring: &IoUring, k: usize, note: &Mutex<Option<Fallback>>) {
        if self.refused.load(Ordering::Relaxed) || self.registered[k].load(Ordering::Acquire) {
            return;
        }
        let _one_at_a_time = self.registering.lock().unwrap_or_else(|p| p.into_inner());
        if self.registered[k].load(Ordering::Acquire) {
            return;
        }
        let (start, end) = self.range_of(k);
        let iov = libc::iovec {
            iov_base: (self.base + start) as *mut libc::c_void,
            iov_len: end - start,
        };
        // SAFETY: the iovec lies within the arena, which outlives the ring (the cache that owns
        // it is held by the completer, which this backend holds until the ring is dropped).
        match unsafe {
            ring.submitter()
                .register_buffers_update(k as u32, &[iov], None)
        } {
            Ok(()) => self.registered[k].store(true, Ordering::Release),
            Err(e) => {
                self.refused.store(true, Ordering::Relaxed);
                *note.lock().unwrap_or_else(|p| p.into_inner()) = Some(Fallback::new(
                    FallbackKind::FixedBuffers,
                    format!(
                        "io_uring fixed buffers: registering the cache's memory was refused ({e}): plain reads from then on (raise the memlock limit to use them)"
                    ),
                ));
            }
        }
    }

    /// Unregister every buffer that reaches the arena's bytes `[from, to)` (slab multiples):
    /// buffer `k` spans slabs `k` and `k + 1`, so from `from / slab - 1` to the one starting
    /// in the range's last slab. No read is in flight or queued into them (the cache has no
    /// slot in use in the range, and no read in flight within a slab of it: a neighbour's
    /// cached pages stay mapped and are copied from the arena, not through the buffer), and
    /// the next read into one registers it again, pinning the memory it then maps.
    fn unregister(&self, ring: &IoUring, from: usize, to: usize) {
        let _one_at_a_time = self.registering.lock().unwrap_or_else(|p| p.into_inner());
        let first = (from / self.slab).saturating_sub(1);
        let last = to.div_ceil(self.slab).min(self.registered.len());
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        for k in first..last {
            if !self.registered[k].load(Ordering::Acquire) {
                continue;
            }
            // SAFETY: an empty entry clears the table's slot `k`; no read uses it (above).
            match unsafe {
                ring.submitter()
                    .register_buffers_update(k as u32, &[empty], None)
            } {
                Ok(()) => self.registered[k].store(false, Ordering::Release),
                Err(_) => {
                    // Still pinned: reads would land in memory the arena no longer maps after
                    // the cache gives it back, so no fixed read from here on.
                    self.refused.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// The index of the registered buffer holding `[buf, buf + len)`, if it is registered.
    fn index(&self, buf: *mut u8, len: usize) -> Option<u16> {
        let k = self.buffer_for(buf, len)?;
        if !self.registered[k].load(Ordering::Acquire) || self.refused.load(Ordering::Relaxed) {
            return None;
        }
        u16::try_from(k).ok()
    }
}

struct Submit {
    in_flight: usize,
    in_flight_bytes: usize,
    backlog: VecDeque<Box<ReadOp>>,
}

impl Submit {
    /// Whether a read of `bytes` may go to the device now.
    fn has_room(&self, bytes: usize) -> bool {
        self.in_flight < QUEUE as usize
            && (self.in_flight == 0 || self.in_flight_bytes + bytes <= MAX_IN_FLIGHT_BYTES)
    }
}

struct Shared {
    ring: IoUring,
    submit: Mutex<Submit>,
    completer: Arc<dyn Completer>,
    stop: AtomicBool,
    /// Entries pushed and not yet handed to the kernel: whoever enters first submits them all,
    /// so concurrent readers share one system call.
    pending: AtomicUsize,
    /// The arena's registered buffers, unless the ring cannot have any.
    fixed: Option<FixedBuffers>,
    /// Why fixed buffers stopped being used after the start, if they did.
    late_note: Mutex<Option<Fallback>>,
    /// The ring's table of registered files, unless the kernel refused one.
    files: Option<FixedFiles>,
    /// The completion queue's one consumer at a time (the reaper or a caller), with what it
    /// gathers a burst in.
    reaping: Mutex<Reaping>,
    /// Callers reaping completions in their own loop (`Engine::completions`): while any
    /// is, the reaper only backs them up (see the module comment).
    drivers: AtomicUsize,
    /// Bursts the callers have reaped: the reaper's sign that they keep up.
    driver_reaps: AtomicU64,
}

/// What the consumer of the completion queue gathers a burst in (kept to reuse their memory).
struct Reaping {
    done: Vec<(u64, i32)>,
    finished: Vec<(Box<ReadOp>, io::Result<usize>)>,
}

/// See the module comment.
pub(crate) struct UringBackend {
    shared: Arc<Shared>,
    reaper: Option<JoinHandle<()>>,
    /// Reads of sources with no descriptor (a remote object): a `threads` pool, started the
    /// first time one comes, so that they overlap as the kernel's reads do. `None` inside if
    /// the pool could not start; such reads are then done in the submitting thread.
    descriptorless: OnceLock<Option<ThreadsBackend>>,
    threads: usize,
}

impl UringBackend {
    /// Set up a ring, check it completes a no-op, and register `arena` (base, bytes) as fixed
    /// buffers if the system allows.
    pub fn new(
        arena: (*mut u8, usize),
        completer: Arc<dyn Completer>,
        threads: usize,
    ) -> io::Result<Self> {
        let mut ring = IoUring::builder().build(QUEUE)?;
        // A no-op round trip: some sandboxes create rings that never complete anything.
        // SAFETY: a NOP has no buffers.
        unsafe {
            ring.submission()
                .push(&opcode::Nop::new().build().user_data(WAKE))
                .map_err(|_| io::Error::other("io_uring submission queue full at setup"))?;
        }
        ring.submit_and_wait(1)?;
        let ok = ring
            .completion()
            .next()
            .map(|c: io_uring::cqueue::Entry| c.result());
        if ok != Some(0) {
            return Err(io::Error::other(format!(
                "io_uring no-op completed with {ok:?}"
            )));
        }
        let (base, bytes) = arena;
        let slab = SLAB_BYTES
            .max(
                bytes
                    .div_ceil(MAX_BUFFERS)
                    .next_multiple_of(crate::units::PAGE_SIZE as usize),
            )
            .min(1 << 29);
        let buffers = bytes.div_ceil(slab).max(1);
        let (fixed, fixed_note) = match ring.submitter().register_buffers_sparse(buffers as u32) {
            Ok(()) => (
                Some(FixedBuffers {
                    base: base as usize,
                    bytes,
                    slab,
                    registered: (0..buffers).map(|_| AtomicBool::new(false)).collect(),
                    refused: AtomicBool::new(false),
                    registering: Mutex::new(()),
                }),
                None,
            ),
            Err(e) => (
                None,
                Some(Fallback::new(
                    FallbackKind::FixedBuffers,
                    format!("io_uring fixed buffers unavailable ({e}): plain reads"),
                )),
            ),
        };
        // The table of registered files; where refused, reads name descriptors (nothing is
        // lost but the lookups they save, so no fallback is reported).
        let slots = FILE_SLOTS.min(descriptor_limit());
        let files = ring
            .submitter()
            .register_files_sparse(slots)
            .ok()
            .map(|()| FixedFiles {
                free: Mutex::new((0..slots).rev().collect()),
            });
        let shared = Arc::new(Shared {
            ring,
            files,
            submit: Mutex::new(Submit {
                in_flight: 0,
                in_flight_bytes: 0,
                backlog: VecDeque::new(),
            }),
            completer,
            stop: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            fixed,
            late_note: Mutex::new(fixed_note),
            reaping: Mutex::new(Reaping {
                done: Vec::with_capacity(QUEUE as usize),
                finished: Vec::with_capacity(QUEUE as usize),
            }),
            drivers: AtomicUsize::new(0),
            driver_reaps: AtomicU64::new(0),
        });
        let reaper = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("ahead-uring".into())
                .spawn(move || reap(&shared))?
        };
        Ok(UringBackend {
            shared,
            reaper: Some(reaper),
            descriptorless: OnceLock::new(),
            threads,
        })
    }

    /// Wake the reaper: when a driver detaches, when a read starts on an idle ring while a
    /// driver is attached (the reaper then sleeps), and to stop.
    fn wake_reaper(&self) {
        if let Some(r) = &self.reaper {
            r.thread().unpark();
        }
    }

    /// Register every buffer of the arena now (the engine's `pretouch`, whose memory is all
    /// faulted in already: the first buffer too).
    fn register_whole_arena(&self) {
        if let Some(fixed) = &self.shared.fixed {
            for k in 0..fixed.registered.len() {
                fixed.register(&self.shared.ring, k, &self.shared.late_note);
            }
        }
    }
}

impl Shared {
    /// The submission entry for `op`: naming its file by slot where it has one.
    fn entry(&self, op: &ReadOp) -> squeue::Entry {
        match ring_slot(&op.file) {
            Some(slot) => read_entry!(self, op, types::Fixed(slot)),
            // Every op here has a descriptor (`submit` reads those without one itself); -1
            // would complete with EBADF, not touch memory.
            None => read_entry!(
                self,
                op,
                types::Fd(op.file.source.fd().map_or(-1, |fd| fd.as_raw_fd()))
            ),
        }
    }

    /// Push `op` onto the submission queue (the lock held). Returns it back if the queue is
    /// full.
    fn push(&self, op: Box<ReadOp>) -> Result<(), Box<ReadOp>> {
        let entry = self.entry(&op);
        // SAFETY: only one `SubmissionQueue` exists at a time: this function runs under the
        // `submit` lock, the only place the queue is borrowed. The entry's buffers (arena slots,
        // the op's iovecs) live until its completion: the op is leaked into `user_data` here
        // and rebuilt from it by the reaper.
        let mut sq = unsafe { self.ring.submission_shared() };
        match unsafe { sq.push(&entry) } {
            Ok(()) => {
                sq.sync();
                self.pending.fetch_add(1, Ordering::Release);
                let _ = Box::into_raw(op);
                Ok(())
            }
            Err(_) => Err(op),
        }
    }

    /// Move backlogged reads into the queue while there is room (the lock held).
    fn drain_backlog(&self, s: &mut Submit) -> bool {
        let mut pushed = false;
        while s.backlog.front().is_some_and(|op| s.has_room(op.len())) {
            let Some(op) = s.backlog.pop_front() else {
                break;
            };
            let bytes = op.len();
            match self.push(op) {
                Ok(()) => {
                    s.in_flight += 1;
                    s.in_flight_bytes += bytes;
                    pushed = true;
                }
                Err(op) => {
                    s.backlog.push_front(op);
                    break;
                }
            }
        }
        pushed
    }

    fn enter(&self) {
        if self.pending.swap(0, Ordering::AcqRel) == 0 {
            return; // another thread's entry into the kernel took ours along
        }
        loop {
            match self.ring.submit() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EBUSY/EAGAIN: the kernel is short of resources; the reaper submits again
                // after its next completion.
                _ => return,
            }
        }
    }
}

fn reap(shared: &Shared) {
    // Whether completions were waiting at the last backstop tick, and the drivers' reaps then.
    let mut left_last_tick = (false, 0);
    loop {
        if shared.drivers.load(Ordering::Acquire) > 0 {
            if !back_up_drivers(shared, &mut left_last_tick) {
                continue;
            }
        } else {
            left_last_tick = (false, 0);
            match shared.ring.submitter().submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        let mut reaping = shared.reaping.lock().unwrap_or_else(|p| p.into_inner());
        reap_burst(shared, &mut reaping);
        drop(reaping);
        if shared.stop.load(Ordering::Acquire) && shared.is_idle() {
            return;
        }
    }
}

/// The reaper's wait while callers reap (see the module comment): a tick, or until woken while
/// nothing is in flight. Whether to reap now: completions waited since the last tick and no
/// driver reaped meanwhile, or the engine stops.
fn back_up_drivers(shared: &Shared, left_last_tick: &mut (bool, u64)) -> bool {
    if shared.is_idle() {
        std::thread::park();
    } else {
        // Entries a refused entry into the kernel left queued (`enter`: EBUSY) go now, as the
        // reaper's own wait in the kernel sends them when no driver is attached.
        let _ = shared.ring.submit();
        std::thread::park_timeout(BACKSTOP);
    }
    if shared.stop.load(Ordering::Acquire) {
        return true;
    }
    let waiting = match shared.reaping.try_lock() {
        // SAFETY: the reaping lock is held: no other consumer of the completion queue.
        Ok(_held) => !unsafe { shared.ring.completion_shared() }.is_empty(),
        Err(_) => false, // a driver is reaping now
    };
    let reaps = shared.driver_reaps.load(Ordering::Acquire);
    let take_over = waiting && *left_last_tick == (true, reaps);
    *left_last_tick = (waiting, reaps);
    take_over
}

/// Finish every completion posted (the `reaping` lock held): refill the ring from the
/// backlog, then hand the burst to the completer. How many reads finished.
fn reap_burst(shared: &Shared, reaping: &mut Reaping) -> usize {
    let Reaping { done, finished } = reaping;
    done.clear();
    {
        // SAFETY: the reaping lock is held: one consumer of the completion queue at a time.
        let cq = unsafe { shared.ring.completion_shared() };
        done.extend(cq.map(|c| (c.user_data(), c.result())));
    }
    let mut finished_bytes = 0;
    for &(data, res) in done.iter() {
        if data == WAKE {
            continue;
        }
        // SAFETY: every non-WAKE user_data is a `Box<ReadOp>` leaked by `push`, completed
        // exactly once.
        let op = unsafe { Box::from_raw(data as *mut ReadOp) };
        finished_bytes += op.len();
        let result = if res < 0 {
            Err(io::Error::from_raw_os_error(-res))
        } else {
            Ok(res as usize)
        };
        finished.push((op, result));
    }
    let count = finished.len();
    if count == 0 {
        return 0;
    }
    // Refill the device before waking the readers: on a small machine the woken readers take
    // the CPUs, and the device would wait for the reaper to run again (measured with 16
    // readers on 2 cores: the device idle 22-24% of the time, against 2% with one reader).
    let mut s = shared.submit.lock().unwrap_or_else(|p| p.into_inner());
    s.in_flight -= count;
    s.in_flight_bytes -= finished_bytes;
    let pushed = shared.drain_backlog(&mut s);
    drop(s);
    if pushed {
        shared.enter();
    }
    shared.completer.complete_all(finished);
    count
}

impl Shared {
    /// Nothing in flight or waiting to be.
    fn is_idle(&self) -> bool {
        let s = self.submit.lock().unwrap_or_else(|p| p.into_inner());
        s.in_flight == 0 && s.backlog.is_empty()
    }
}

impl Backend for UringBackend {
    fn name(&self) -> &'static str {
        "uring"
    }

    fn completion_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::BorrowedFd;
        // SAFETY: the ring's descriptor stays open as long as the backend (borrowed from it).
        Some(unsafe { BorrowedFd::borrow_raw(self.shared.ring.as_raw_fd()) })
    }

    fn attach_driver(&self, attached: bool) {
        if attached {
            self.shared.drivers.fetch_add(1, Ordering::AcqRel);
        } else {
            self.shared.drivers.fetch_sub(1, Ordering::AcqRel);
            // Back to waiting in the kernel, if it was the last.
            self.wake_reaper();
        }
    }

    fn reap_completions(&self) -> usize {
        // Another consumer holding the lock is reaping what was posted: leave it to it (a
        // waker that polled a driver in place would otherwise deadlock here).
        let Ok(mut reaping) = self.shared.reaping.try_lock() else {
            return 0;
        };
        let count = reap_burst(&self.shared, &mut reaping);
        if count > 0 {
            self.shared.driver_reaps.fetch_add(1, Ordering::AcqRel);
        }
        count
    }

    fn submit(&self, op: Box<ReadOp>) {
        let shared = &self.shared;
        if op.file.source.fd().is_none() {
            // A source with no descriptor for the kernel: the pool reads it (see `source`).
            let pool = self
                .descriptorless
                .get_or_init(|| ThreadsBackend::new(self.threads, shared.completer.clone()).ok());
            match pool {
                Some(pool) => pool.submit(op),
                None => {
                    let result = op.file.source.read(&op);
                    shared.completer.complete(op, result);
                }
            }
            return;
        }
        if let Some(files) = &shared.files {
            files.ensure(shared, &op.file);
        }
        if let (Some(f), [iov]) = (&shared.fixed, op.iov.as_slice()) {
            f.ensure(
                &shared.ring,
                iov.iov_base.cast(),
                iov.iov_len,
                &shared.late_note,
            );
        }
        let mut s = shared.submit.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = op.len();
        if !s.has_room(bytes) || !s.backlog.is_empty() {
            s.backlog.push_back(op);
            return;
        }
        match shared.push(op) {
            Ok(()) => {
                s.in_flight += 1;
                s.in_flight_bytes += bytes;
            }
            Err(op) => {
                s.backlog.push_back(op);
                return;
            }
        }
        let was_idle = s.in_flight == 1;
        drop(s);
        shared.enter();
        if was_idle && shared.drivers.load(Ordering::Acquire) > 0 {
            // The reaper, backing callers up, sleeps while nothing is in flight.
            self.wake_reaper();
        }
    }

    fn late_note(&self) -> Option<Fallback> {
        self.shared
            .late_note
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn take_queued(&self, file: &Arc<FileData>, page: u64) -> Option<Box<ReadOp>> {
        if file.source.fd().is_none() {
            return self.descriptorless.get()?.as_ref()?.take_queued(file, page);
        }
        let mut s = self.shared.submit.lock().unwrap_or_else(|p| p.into_inner());
        let i = s.backlog.iter().position(|op| op.covers(file, page))?;
        s.backlog.remove(i)
    }

    fn arena_granule(&self) -> usize {
        self.shared
            .fixed
            .as_ref()
            .map_or(crate::units::PAGE_SIZE as usize, |f| f.slab)
    }

    fn let_go_of_arena(&self, from: usize, to: usize) {
        if let Some(f) = &self.shared.fixed {
            f.unregister(&self.shared.ring, from, to);
        }
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        // The reaper stops once every read in flight has completed: the kernel may still be
        // writing into the arena until then.
        self.shared.stop.store(true, Ordering::Release);
        {
            let _s = self.shared.submit.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: under the submit lock, as in `push`; a NOP has no buffers.
            let mut sq = unsafe { self.shared.ring.submission_shared() };
            let _ = unsafe { sq.push(&opcode::Nop::new().build().user_data(WAKE)) };
            sq.sync();
            self.shared.pending.fetch_add(1, Ordering::Release);
        }
        self.shared.enter();
        self.wake_reaper();
        if let Some(r) = self.reaper.take() {
            let _ = r.join();
        }
    }
}

/// This backend's entry in the registry.
pub(crate) const REGISTERED: super::Registered = super::Registered {
    name: "uring",
    about: "io_uring",
    start: |w| {
        if !w.io_uring_allowed {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "turned off by the caller (EngineBuilder::without_io_uring)",
            ));
        }
        let backend = UringBackend::new(w.arena, w.completer.clone(), w.threads)?;
        if w.pretouch {
            backend.register_whole_arena();
        }
        Ok(Box::new(backend))
    },
};

#[cfg(test)]
mod tests {
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
}
