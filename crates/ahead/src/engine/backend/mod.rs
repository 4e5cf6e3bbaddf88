//! I/O backends: how the engine's reads reach the device. One file per backend behind one
//! interface, as fio keeps its ioengines: adding a backend is its file (with its `REGISTERED`
//! entry) and one line in [`BACKENDS`]; `--engine`, its help and `Stats::backend` follow.
//!
//! * [`uring`]: io_uring, used directly through the `io-uring` crate: the arena registered as
//!   fixed buffers, batched submission, completions reaped by one thread for all requests.
//! * [`threads`]: a pool of threads doing the source's reads (`preadv(2)` for a local file):
//!   the fallback where io_uring is missing.
//! * [`sync`]: the source's reads in the caller's thread, ahead requests included: the
//!   baseline.
//! * `faults` (the `testing` feature): wraps any of them and injects failures, short reads
//!   and delays.
//!
//! A backend is handed [`ReadOp`]s and reports each one, once, to [`Completer::complete`].
//! What it reads from is the op's source (`engine/source`): `threads` and `sync` call its
//! blocking `read`; `uring` reads its descriptor, and reads a source without one in the
//! submitting thread.

#[cfg(feature = "testing")]
pub mod faults;
pub mod sync;
pub mod threads;
#[cfg(feature = "uring")]
pub mod uring;

/// The registry: every backend, one line each (its file holds its entry). `auto` picks the
/// first; one that cannot start falls back to [`FALLBACK`].
#[cfg(feature = "uring")]
pub(crate) const BACKENDS: &[Registered] =
    &[uring::REGISTERED, threads::REGISTERED, sync::REGISTERED];
/// The registry without the `uring` feature: `auto` is the thread pool.
#[cfg(not(feature = "uring"))]
pub(crate) const BACKENDS: &[Registered] = &[threads::REGISTERED, sync::REGISTERED];

/// Where a backend that cannot start falls back to: the thread pool, which needs nothing of
/// the kernel but threads.
pub(crate) const FALLBACK: Registered = threads::REGISTERED;

/// One backend in the registry: its name (`--engine NAME`, `stats().backend`), what it is, and
/// how to start it.
pub(crate) struct Registered {
    pub name: &'static str,
    pub about: &'static str,
    pub start: fn(&StartWith) -> io::Result<Box<dyn Backend>>,
}

/// What a backend is started with.
#[cfg_attr(not(feature = "uring"), allow(dead_code))] // the arena and the probe are io_uring's
pub(crate) struct StartWith {
    /// The cache's arena (base, bytes): the memory every read lands in.
    pub arena: (*mut u8, usize),
    /// Where finished reads are reported.
    pub completer: Arc<dyn Completer>,
    /// Threads of a backend that keeps a pool.
    pub threads: usize,
    /// False when the caller asked the engine to behave as on a kernel without io_uring.
    pub io_uring_allowed: bool,
    /// Register the whole arena at start rather than as reads reach it (the engine's
    /// `pretouch`; the arena is already faulted in).
    pub pretouch: bool,
}

use std::io;
use std::sync::Arc;
use std::time::Instant;

use crate::policy::IoKind;

use crate::units::PAGE_SIZE;

use super::FileData;

/// One read the engine asks a backend for: pages `first_page..` of a file into the slots
/// (page-sized, page-aligned buffers of the arena), described as iovecs over runs of
/// consecutive slots.
pub(crate) struct ReadOp {
    /// The file; holding it keeps the descriptor open until the read completes.
    pub file: Arc<FileData>,
    pub first_page: u64,
    pub slots: Vec<u32>,
    /// The claim its pages carry (`Cache::claim_run`): it lands only on pages that still carry
    /// it, so a read begun before the file changed is never served after.
    pub claim: u32,
    /// Bytes the file holds in this range when it was opened (less than the slots at its end).
    pub expected: u64,
    /// Whether a reader is waiting for it (read in that reader's thread) or it reads ahead.
    pub kind: IoKind,
    pub submitted: Instant,
    /// Requests in flight when this one was submitted (0: it found the device idle).
    pub queued_behind: usize,
    /// One iovec per run of consecutive slots; a single one when the buffer is contiguous.
    pub iov: Vec<libc::iovec>,
    /// For a read into a caller's own buffer instead of the cache (no slots): where its
    /// result goes. The buffer lives there until the read completes.
    pub direct: Option<Arc<crate::engine::direct::DirectRead>>,
}

// SAFETY: the iovecs point into the arena, which outlives every op (see `cache::Arena`); an op
// is owned by exactly one thread at a time (the submitter, then the backend, then the
// completer).
unsafe impl Send for ReadOp {}

impl ReadOp {
    /// Whether this is a read of `page` of `file`.
    pub fn covers(&self, file: &Arc<FileData>, page: u64) -> bool {
        Arc::ptr_eq(&self.file, file)
            && page >= self.first_page
            && page < self.first_page + self.slots.len() as u64
    }

    /// Byte offset of the read in the file.
    pub fn offset(&self) -> u64 {
        self.first_page * PAGE_SIZE
    }

    /// Bytes asked for (whole pages): its slots', or a direct read's buffer.
    pub fn len(&self) -> usize {
        match self.direct {
            None => self.slots.len() * PAGE_SIZE as usize,
            Some(_) => self.iov.iter().map(|v| v.iov_len).sum(),
        }
    }

    /// Copy `src` into the op's slots from byte `at` of the op on, as far as either goes: for a
    /// source that reads by copying rather than through a descriptor. Bytes copied.
    #[cfg(any(test, feature = "remote"))]
    pub fn copy_in(&self, at: usize, src: &[u8]) -> usize {
        let (mut skip, mut copied) = (at, 0);
        for iov in &self.iov {
            if skip >= iov.iov_len {
                skip -= iov.iov_len;
                continue;
            }
            let n = (iov.iov_len - skip).min(src.len() - copied);
            // SAFETY: the iovec covers arena slots this op owns while it is in flight.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(iov.iov_base.cast::<u8>().add(skip), n) };
            dst.copy_from_slice(&src[copied..copied + n]);
            copied += n;
            skip = 0;
            if copied == src.len() {
                break;
            }
        }
        copied
    }
}

/// Where a backend reports finished reads.
pub(crate) trait Completer: Send + Sync {
    /// `op` finished with `result` (bytes read, or the error).
    fn complete(&self, op: Box<ReadOp>, result: io::Result<usize>);
    /// Every read of `finished` finished (emptied): as [`Completer::complete`] on each, except
    /// that a completer may do what it can for all of them at once (see `CacheAndMeter`).
    /// The `uring` backend's reaper calls it with each burst it reaps.
    #[cfg_attr(not(feature = "uring"), allow(dead_code))]
    fn complete_all(&self, finished: &mut Vec<(Box<ReadOp>, io::Result<usize>)>) {
        for (op, result) in finished.drain(..) {
            self.complete(op, result);
        }
    }
}

/// An I/O backend. See the module comment.
pub(crate) trait Backend: Send + Sync {
    /// The name `stats()` reports: `uring`, `threads` or `sync`.
    fn name(&self) -> &'static str;
    /// Start `op`. Its completion may be reported before this returns (`sync` always does).
    fn submit(&self, op: Box<ReadOp>);
    /// Read `op` now, in the caller's thread, and return the result without completing it:
    /// how a read a reader waits for is done (handing it to another thread and back would
    /// cost two context switches for nothing).
    fn read_now(&self, op: &ReadOp) -> io::Result<usize> {
        op.file.source.read(op)
    }
    /// Take back the queued read that covers `page` of `file`, if it waits in this backend's
    /// queue and has not reached the device: a reader about to wait for it reads it itself
    /// ([`Backend::read_now`]) rather than wait behind every ahead read queued before it.
    /// `None` if no queued read covers the page (it is on the device, or done).
    fn take_queued(&self, _file: &Arc<FileData>, _page: u64) -> Option<Box<ReadOp>> {
        None
    }
    /// The descriptor that turns readable when completions are posted, for a caller's event
    /// loop to reap them in its own thread (`Engine::completions`); `None` where reads complete
    /// in the backend's own threads.
    fn completion_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    /// A caller starts (`true`) or stops reaping completions in its own loop.
    fn attach_driver(&self, _attached: bool) {}
    /// Finish the reads whose completions are posted, in this thread: how many.
    fn reap_completions(&self) -> usize {
        0
    }
    /// A fallback taken after the start (say, memory the system refused to pin), for
    /// `stats()`.
    fn late_note(&self) -> Option<super::Fallback> {
        None
    }
    /// Whether ahead reads are asynchronous (false for `sync`).
    fn is_async(&self) -> bool {
        true
    }
    /// How much of the arena this backend holds past a slot in use, in bytes, and the unit it
    /// lets go of: the cache keeps that much above the slots in use when it gives memory back.
    /// (A page for a backend that holds none.) No default, as for [`Backend::let_go_of_arena`].
    fn arena_granule(&self) -> usize;
    /// The arena's bytes `[from, to)` (no slot of them in use, and no read in flight within
    /// `arena_granule()` of them) are about to be given back to the system: drop any hold on
    /// them, so no later read lands in memory the arena no longer maps (io_uring: unregister
    /// the buffers that reach them). No default: a backend that wraps another (`faults`) must
    /// pass it on, and one that did not (it took a default that did nothing) left io_uring's
    /// buffers pinned to memory the cache gave back, whose reads then landed where the arena no
    /// longer looked: pages of zeros (the stress test, RELIABILITY.md).
    fn let_go_of_arena(&self, from: usize, to: usize);
}

/// `preadv(2)` of `op` in full: continue after short transfers until the range is read, the
/// file ends (a read returns 0, or a transfer ends off a page boundary: the end the file had
/// then) or an error. Returns bytes read.
pub(crate) fn preadv_full(fd: libc::c_int, op: &ReadOp) -> io::Result<usize> {
    let total = op.len();
    let mut done = 0usize;
    let mut iov = op.iov.clone();
    while done < total {
        // Skip the iovecs already filled, and the filled part of the first one.
        let mut skip = done;
        let mut first = 0;
        while first < iov.len() && skip >= op.iov[first].iov_len {
            skip -= op.iov[first].iov_len;
            first += 1;
        }
        if first == iov.len() {
            break;
        }
        iov[first] = libc::iovec {
            // SAFETY: `skip` < the iovec's length, so the pointer stays inside its buffer.
            iov_base: unsafe { op.iov[first].iov_base.cast::<u8>().add(skip).cast() },
            iov_len: op.iov[first].iov_len - skip,
        };
        let rest = &iov[first..];
        // SAFETY: every iovec covers arena slots this op owns while it is in flight; the
        // count is the slice's length.
        let n = unsafe {
            libc::preadv(
                fd,
                rest.as_ptr(),
                rest.len() as libc::c_int,
                (op.offset() + done as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n as usize;
        // Only the file's end stops a transfer off a page boundary. Reading on from there,
        // should the file have grown meanwhile, would be an unaligned `O_DIRECT` read (EINVAL,
        // which a reader of a growing file met); the bytes past it are read again as any
        // short read's are.
        if !done.is_multiple_of(PAGE_SIZE as usize) {
            break;
        }
    }
    Ok(done)
}
