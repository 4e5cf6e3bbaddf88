//! Reads into the caller's own buffer, past the cache: [`File::read_direct`].
//!
//! A database reading random blocks on `O_DIRECT` keeps its own buffer pool; the engine's cache
//! adds a copy, a slot and an eviction per read and reads nothing ahead for such reads. A direct
//! read hands the caller's page-aligned buffer ([`AlignedBuf`]) to the backend as it is: one
//! request, the bytes land in the buffer, and the future gives the buffer back with the count.
//! The buffer is owned, not borrowed, because a future may be dropped (or forgotten) while the
//! kernel still writes into it: the request holds the buffer until it completes, whoever is
//! left to see it. The policy is not consulted and nothing is cached; pages of the range the
//! cache holds are read again from the file, which holds the same bytes (the engine never
//! writes). Counted in the stats as reads, requests a reader waited for, and miss pages, by
//! the completion, with the other reads finished in the same burst, before the reader is
//! woken (`CacheAndMeter::complete_burst`). A direct read does not make its file active for the
//! readahead budget (`engine::activity`): it takes none of the cache.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::*;
pub use crate::os::AlignedBuf;

/// The largest direct read: 1 GiB (one request; larger ones are the caller's to split).
pub const DIRECT_MAX_BYTES: usize = 1 << 30;

/// Where a direct read's result goes, and the buffer it reads into until then.
pub(crate) struct DirectRead {
    slot: Mutex<DirectSlot>,
    /// When the read was called: its latency, counted by the completion
    /// (`CacheAndMeter::complete_burst`).
    pub(super) started: Instant,
}

/// The buffer (held until the request completes), the result, and the reader to wake.
struct DirectSlot {
    buffer: Option<AlignedBuf>,
    result: Option<io::Result<usize>>,
    waker: Option<Waker>,
}

impl DirectRead {
    /// The request completed: keep the result and wake the reader (called once).
    pub(crate) fn finish(&self, result: io::Result<usize>) {
        let mut s = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        s.result = Some(result);
        if let Some(w) = s.waker.take() {
            drop(s);
            w.wake();
        }
    }
}

/// The future of [`File::read_direct`]: the buffer back, and the bytes read into it (fewer
/// than its length only at the end of the file) or the error.
#[must_use = "a future does nothing unless polled"]
pub struct ReadDirect<'a> {
    file: &'a File,
    offset: u64,
    state: DirectState,
    started: Instant,
}

enum DirectState {
    /// Not yet sent: the buffer still here.
    Unsent(AlignedBuf),
    /// Sent: the request holds the buffer.
    Sent(Arc<DirectRead>),
    /// Given back.
    Done,
}

impl std::fmt::Debug for ReadDirect<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadDirect")
            .field("offset", &self.offset)
            .field("sent", &matches!(self.state, DirectState::Sent(_)))
            .finish_non_exhaustive()
    }
}

impl File {
    /// Read `buf.len()` bytes at `offset` straight into `buf`, past the cache (see the module
    /// `engine::direct`): for random reads a caller buffers itself, with no copy, no cache slot
    /// and no readahead. `offset` must be a multiple of the 4 KiB page (the buffer is whole
    /// pages). The future gives the buffer back with the bytes read: fewer than its length only
    /// at the end of the file, 0 at or past it.
    ///
    /// # Errors
    /// `InvalidInput` for an offset that is not page-aligned or a buffer over
    /// [`DIRECT_MAX_BYTES`]; otherwise as [`File::read_at`].
    pub fn read_direct(&self, buf: AlignedBuf, offset: u64) -> ReadDirect<'_> {
        ReadDirect {
            file: self,
            offset,
            state: DirectState::Unsent(buf),
            started: Instant::now(),
        }
    }

    /// Send the direct read of `buf` at `offset` (within the file, page-aligned), called at
    /// `started`.
    fn send_direct(
        &self,
        mut buf: AlignedBuf,
        offset: u64,
        size: u64,
        started: Instant,
    ) -> Arc<DirectRead> {
        let len = (buf.len() as u64).min(size - offset) as usize;
        let iov = vec![libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            // Whole pages, as O_DIRECT wants; the file's end makes the read short.
            iov_len: len.next_multiple_of(PAGE),
        }];
        let direct = Arc::new(DirectRead {
            slot: Mutex::new(DirectSlot {
                buffer: Some(buf),
                result: None,
                waker: None,
            }),
            started,
        });
        let op = backend::ReadOp {
            file: self.data.clone(),
            first_page: offset / PAGE_SIZE,
            slots: Vec::new(),
            claim: 0,
            expected: len as u64,
            kind: IoKind::Sync,
            // Set again as it is handed to the backend.
            submitted: started,
            queued_behind: 0,
            iov,
            direct: Some(direct.clone()),
        };
        self.engine.submit_one(op, false);
        direct
    }
}

impl Future for ReadDirect<'_> {
    type Output = (io::Result<usize>, AlignedBuf);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let direct = match std::mem::replace(&mut this.state, DirectState::Done) {
            DirectState::Done => panic!("ReadDirect polled after it completed"),
            DirectState::Unsent(buf) => {
                if !this.offset.is_multiple_of(PAGE_SIZE) || buf.len() > DIRECT_MAX_BYTES {
                    let e = io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "{}: a direct read of {} bytes at offset {}: the offset must be a multiple of {PAGE_SIZE}, the buffer at most {DIRECT_MAX_BYTES} bytes",
                            this.file.path().display(),
                            buf.len(),
                            this.offset
                        ),
                    );
                    return Poll::Ready((Err(e), buf));
                }
                let size = match this.file.current_size() {
                    Ok(size) => size,
                    Err(e) => return Poll::Ready((Err(e), buf)),
                };
                if this.offset >= size {
                    return Poll::Ready((Ok(0), buf));
                }
                this.file.send_direct(buf, this.offset, size, this.started)
            }
            DirectState::Sent(direct) => direct,
        };
        let mut s = direct.slot.lock().unwrap_or_else(|p| p.into_inner());
        let Some(result) = s.result.take() else {
            s.waker = Some(cx.waker().clone());
            drop(s);
            this.state = DirectState::Sent(direct);
            return Poll::Pending;
        };
        let buf = s
            .buffer
            .take()
            .expect("a direct read's buffer is given back once");
        drop(s);
        Poll::Ready((result, buf))
    }
}
