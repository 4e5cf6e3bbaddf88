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
//!   first read that starts in slab `k` (which faults their memory in first, outside the ring's
//!   lock: the kernel would fault it in under the lock, and every other thread's reads would
//!   wait for the zeroing); but the first buffer is never registered (unless
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

mod tables;
#[cfg(test)]
mod tests;

use tables::*;

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

    fn submit(&self, mut op: Box<ReadOp>) {
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
            let registered = f.ensure(
                &shared.ring,
                iov.iov_base.cast(),
                iov.iov_len,
                &shared.late_note,
            );
            if registered {
                // The registration faulted memory in (milliseconds, the first time): the
                // device's latency is measured from here, not from before that.
                op.submitted = std::time::Instant::now();
            }
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
