//! Reads beyond one blocking `read_at`: async reads, batches of known ranges, prefetches that
//! can be awaited or cancelled, and a read stream.
//!
//! * **Async** ([`File::read_at_async`]): the same read as [`File::read_at`] (policy, copy,
//!   retry), but a page still in flight parks the task instead of the thread: its waker is
//!   kept with the page's shard of the cache and woken by the completion that readies the
//!   page, on the backend's completion thread. No runtime is needed or imposed; any executor
//!   polls it. The read a task waits for goes to the backend (io_uring, the pool) rather than
//!   being read in the polling thread, so one task can keep many reads in flight. Under the
//!   `sync` backend (no asynchronous I/O at all) the read is done inside `poll`.
//! * **Batches** ([`File::read_many`], [`File::read_many_async`]): the ranges' pages are
//!   sorted, merged into requests where the gap between two ranges costs the device less time
//!   than one more request would (the file's measured estimate), all sent at once up to a
//!   quarter of the cache, and each range copied out as it lands. The policy is not told of
//!   them: the caller has said exactly what it needs.
//! * **Prefetch** ([`File::prefetch`]): the ranges are read into the cache whatever the
//!   file's policy (where [`Advice::WillNeed`] is the policy's to heed or not). The handle
//!   resolves once every page has landed; dropped first, it takes back the requests still
//!   queued in the backend (those already on the device complete into the cache).
//! * **Read stream** ([`File::read_stream`]), in the spirit of PostgreSQL's `read_stream.c`:
//!   the caller gives its next ranges as an iterator; the stream keeps a look-ahead distance of
//!   ranges in flight that doubles while ranges need I/O and shrinks by one when a range is
//!   found cached, as PostgreSQL's does, and yields each range's bytes in order.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::read_loop::{ReadCursor, Wait};
use super::*;

/// Ranges a read stream keeps ahead at most.
const STREAM_MAX_RANGES: usize = 256;

/// A byte range of a file: `(offset, len)`.
pub type Range = (u64, usize);

/// A read stream's next item: a range's offset and bytes, or the error that met it.
pub type Block = io::Result<(u64, Vec<u8>)>;

/// [`File::read_at_async`]'s future: bytes read, as [`File::read_at`] returns them.
#[must_use = "a future does nothing unless polled"]
pub struct ReadAt<'a> {
    file: &'a File,
    buf: &'a mut [u8],
    offset: u64,
    state: ReadAtState,
}

enum ReadAtState {
    Start,
    Copying(ReadCursor),
    Done,
}

impl std::fmt::Debug for ReadAt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAt")
            .field("offset", &self.offset)
            .field("len", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl Future for ReadAt<'_> {
    type Output = io::Result<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wait = Wait::Task(cx.waker());
        if let ReadAtState::Start = this.state {
            match this.file.begin_read_as(this.buf, this.offset, wait) {
                Ok(Some(cur)) => this.state = ReadAtState::Copying(cur),
                Ok(None) => {
                    this.state = ReadAtState::Done;
                    return Poll::Ready(Ok(0));
                }
                Err(e) => {
                    this.state = ReadAtState::Done;
                    return Poll::Ready(Err(e));
                }
            }
        }
        match &mut this.state {
            ReadAtState::Copying(cur) => {
                let r = std::task::ready!(this.file.copy_rest(cur, this.buf, wait));
                this.state = ReadAtState::Done;
                Poll::Ready(r)
            }
            // Polled again after it finished: nothing more to read.
            _ => Poll::Ready(Ok(0)),
        }
    }
}

/// A batch of ranges being read (see the module comment): its ranges clipped at the end of
/// the file, the order they are issued and copied in, and where each stands.
pub(super) struct Batch {
    ranges: Vec<Range>,
    /// Indexes of `ranges`, by offset.
    order: Vec<usize>,
    out: Vec<Vec<u8>>,
    /// Positions in `order`: ranges issued so far, and copied out so far.
    issued: usize,
    copied: usize,
    cursor: Option<ReadCursor>,
}

impl Batch {
    fn new(size: u64, ranges: &[Range]) -> Batch {
        let ranges: Vec<Range> = ranges
            .iter()
            .map(|&(off, len)| (off, (len as u64).min(size.saturating_sub(off)) as usize))
            .collect();
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| ranges[i].0);
        let out = ranges.iter().map(|&(_, len)| vec![0u8; len]).collect();
        Batch {
            ranges,
            order,
            out,
            issued: 0,
            copied: 0,
            cursor: None,
        }
    }
}

/// Merge sorted page spans `[first, end)` into requests: two go in one where the gap between
/// them is at most `gap_pages` and the request stays within `max_pages` (a span longer than
/// that goes whole).
pub(super) fn merge_spans(
    spans: impl IntoIterator<Item = (u64, u64)>,
    gap_pages: u64,
    max_pages: u64,
) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (first, end) in spans {
        if first >= end {
            continue;
        }
        match out.last_mut() {
            Some(last)
                if first <= last.1.saturating_add(gap_pages)
                    && end.max(last.1) - last.0 <= max_pages =>
            {
                last.1 = last.1.max(end)
            }
            Some(last) if first < last.1 => last.1 = last.1.max(end), // overlapping: one read
            _ => out.push((first, end)),
        }
    }
    out
}

impl File {
    /// [`File::read_at`] as a future: the read parks its task, not its thread, while its pages
    /// are in flight, and is woken by the engine's completion thread. Works under any
    /// executor; the blocking API stays. Dropping the future abandons the copy (the reads it
    /// started complete into the cache). An example under tokio is in the crate's docs.
    ///
    /// # Errors
    /// As [`File::read_at`].
    pub fn read_at_async<'a>(&'a self, buf: &'a mut [u8], offset: u64) -> ReadAt<'a> {
        ReadAt {
            file: self,
            buf,
            offset,
            state: ReadAtState::Start,
        }
    }

    /// Read every `(offset, len)` of `ranges` at once: their pages merged into as few
    /// requests as the device's measured costs favour, sent together, each range's bytes
    /// returned in the order asked (shorter at the end of the file, empty past it). The
    /// policy is not shown these reads.
    ///
    /// # Errors
    /// The first error a range met (as [`File::read_at`]'s); no partial result.
    pub fn read_many(&self, ranges: &[Range]) -> io::Result<Vec<Vec<u8>>> {
        self.engine.touch(&self.activity);
        let mut batch = Batch::new(self.current_size()?, ranges);
        match self.poll_batch(&mut batch, Wait::Block) {
            Poll::Ready(r) => r.map(|()| batch.out),
            Poll::Pending => unreachable!("a blocking batch waits rather than returns Pending"),
        }
    }

    /// [`File::read_many`] as a future.
    ///
    /// # Errors
    /// As [`File::read_many`].
    pub fn read_many_async<'a>(&'a self, ranges: &'a [Range]) -> ReadMany<'a> {
        ReadMany {
            file: self,
            ranges,
            batch: None,
        }
    }

    /// Start reading `ranges` into the cache now, whatever the file's policy, and return a
    /// handle: await it (or [`Prefetch::wait`]) to know every page landed; drop it to cancel
    /// what has not reached the device. Where the cache has no room the rest is not read
    /// (a later read reads it).
    pub fn prefetch(&self, ranges: &[Range]) -> Prefetch {
        self.engine.touch(&self.activity);
        let size = self.len();
        let spans: Vec<(u64, u64)> = {
            let mut s: Vec<(u64, u64)> = ranges
                .iter()
                .filter(|&&(off, len)| len > 0 && off < size)
                .map(|&(off, len)| {
                    let r = Bytes::page_span(Bytes(off), Bytes((len as u64).min(size - off)));
                    (r.first, r.end)
                })
                .collect();
            s.sort_unstable();
            s
        };
        let issued = self.issue_spans(spans, self.merge_gap_pages(), IoKind::Ahead);
        Prefetch {
            engine: self.engine.clone(),
            data: self.data.clone(),
            issued,
            next: (0, 0),
            done: false,
        }
    }

    /// A stream of the bytes of `ranges`, in order, read ahead of the caller: see
    /// [`ReadStream`].
    pub fn read_stream<I: IntoIterator<Item = Range>>(
        &self,
        ranges: I,
    ) -> ReadStream<'_, I::IntoIter> {
        let cap = (self.engine.core.cache.slots() as u64 / 8).max(1);
        ReadStream {
            file: self,
            ranges: ranges.into_iter(),
            size: self.len(),
            ahead: VecDeque::new(),
            ahead_pages: 0,
            distance: 1,
            max_pages: cap,
            current: None,
        }
    }

    /// Read the sorted page spans `[first, end)` of `spans`, merged where at most `gap_pages`
    /// apart, as requests of `kind` handed to the backend together (none waits for room, or
    /// is read in this thread). Returns the requests sent: (first page, pages).
    fn issue_spans(&self, spans: Vec<(u64, u64)>, gap_pages: u64, kind: IoKind) -> Vec<(u64, u64)> {
        let mut ops = Vec::new();
        let mut refaults = 0;
        for (first, end) in merge_spans(spans, gap_pages, self.io_max.max(1)) {
            self.engine.start_io_as(
                &self.data,
                self.io_max,
                self.aligned(IoRequest::of_kind(kind, first, end - first)),
                false,
                &mut refaults,
                &mut ops,
            );
        }
        let issued = ops
            .iter()
            .map(|op| (op.first_page, op.slots.len() as u64))
            .collect();
        self.engine.submit_as(&mut ops, false);
        self.report_refaults(refaults);
        issued
    }

    /// The widest gap between two ranges worth reading through rather than asking for
    /// separately: the pages the device transfers in the time one more request costs it.
    pub(super) fn merge_gap_pages(&self) -> u64 {
        let e = self.device_estimate();
        let bytes = e.request_overhead_ns as u128 * e.bytes_per_sec as u128 / 1_000_000_000;
        ((bytes as u64) / PAGE_SIZE).min(self.io_max)
    }

    /// Issue the batch's next wave (ranges up to a quarter of the cache, so none is evicted
    /// before it is copied), then copy out ranges, parking on a page in flight if `wait` is a
    /// task's.
    fn poll_batch(&self, b: &mut Batch, wait: Wait<'_>) -> Poll<io::Result<()>> {
        let quarter = self.engine.core.cache.run_cap_pages();
        loop {
            if b.copied == b.order.len() {
                return Poll::Ready(Ok(()));
            }
            if b.copied == b.issued {
                let mut pages = 0u64;
                let mut spans = Vec::new();
                while b.issued < b.order.len() {
                    let (off, len) = b.ranges[b.order[b.issued]];
                    let r = Bytes::page_span(Bytes(off), Bytes(len as u64));
                    if pages > 0 && pages + r.len() > quarter {
                        break;
                    }
                    pages += r.len();
                    if len > 0 {
                        spans.push((r.first, r.end));
                    }
                    b.issued += 1;
                }
                self.issue_spans(spans, self.merge_gap_pages(), IoKind::Sync);
            }
            let i = b.order[b.copied];
            let (off, len) = b.ranges[i];
            if len == 0 {
                b.copied += 1;
                continue;
            }
            let buf = &mut b.out[i];
            let cur = b
                .cursor
                .get_or_insert_with(|| self.begin_unseen(buf, off, len));
            let r = std::task::ready!(self.copy_rest(cur, buf, wait));
            b.cursor = None;
            match r {
                Ok(n) => buf.truncate(n),
                Err(e) => return Poll::Ready(Err(e)),
            }
            b.copied += 1;
        }
    }
}

/// [`File::read_many_async`]'s future: each range's bytes, in the order asked.
#[must_use = "a future does nothing unless polled"]
pub struct ReadMany<'a> {
    file: &'a File,
    ranges: &'a [Range],
    batch: Option<Batch>,
}

impl std::fmt::Debug for ReadMany<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadMany")
            .field("ranges", &self.ranges.len())
            .finish_non_exhaustive()
    }
}

impl Future for ReadMany<'_> {
    type Output = io::Result<Vec<Vec<u8>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.batch.is_none() {
            let size = match this.file.current_size() {
                Ok(s) => s,
                Err(e) => return Poll::Ready(Err(e)),
            };
            this.file.engine.touch(&this.file.activity);
            this.batch = Some(Batch::new(size, this.ranges));
        }
        let Some(batch) = this.batch.as_mut() else {
            return Poll::Ready(Ok(Vec::new()));
        };
        let r = std::task::ready!(this.file.poll_batch(batch, Wait::Task(cx.waker())));
        let out = std::mem::take(&mut batch.out);
        Poll::Ready(r.map(|()| out))
    }
}

/// A prefetch started by [`File::prefetch`]. As a future it resolves once every page it
/// asked for has landed (`Err` if a read failed); dropped before that, it takes back its
/// requests still queued in the backend, so nothing more is read for it.
#[must_use = "dropping a prefetch cancels what has not reached the device"]
pub struct Prefetch {
    engine: Arc<EngineParts>,
    data: Arc<FileData>,
    /// The requests sent: (first page, pages).
    issued: Vec<(u64, u64)>,
    /// The request and page within it waited for next.
    next: (usize, u64),
    done: bool,
}

impl std::fmt::Debug for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetch")
            .field("requests", &self.issued.len())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Prefetch {
    /// Requests the prefetch sent (pages already cached were not asked for again).
    pub fn requests(&self) -> usize {
        self.issued.len()
    }

    /// Block until every page has landed.
    ///
    /// # Errors
    /// The error of a read that failed.
    pub fn wait(mut self) -> io::Result<()> {
        block_on(&mut self)
    }

    /// Let the reads run on unwatched: a detached prefetch cancels nothing (`posix_fadvise`'s
    /// `WILLNEED`, whatever the file's policy).
    pub fn detach(mut self) {
        self.done = true;
    }
}

impl Future for Prefetch {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let cache = &this.engine.core.cache;
        while let Some(&(first, pages)) = this.issued.get(this.next.0) {
            while this.next.1 < pages {
                match cache.poll_settled(&this.data.table, first + this.next.1, cx.waker()) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(f)) => {
                        this.done = true;
                        return Poll::Ready(Err(f.error()));
                    }
                    Poll::Ready(None) => this.next.1 += 1,
                }
            }
            this.next = (this.next.0 + 1, 0);
        }
        this.done = true;
        Poll::Ready(Ok(()))
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for &(first, pages) in &self.issued[self.next.0..] {
            if let Some(op) = self.engine.backend.take_queued(&self.data, first) {
                if op.first_page == first && op.slots.len() as u64 == pages {
                    // Completed empty: its pages go back to absent, its slots free.
                    for c in Counters::both(&self.engine.core.counters, &self.data) {
                        c.cancelled_requests.fetch_add(1, Ordering::Relaxed);
                    }
                    self.engine.core.complete(op, Ok(0));
                } else {
                    // Someone else's read of the page now: put it back.
                    self.engine.backend.submit(op);
                }
            }
        }
    }
}

/// The bytes of a caller's ranges, in order, read ahead of it: made by [`File::read_stream`]
/// from an iterator of `(offset, len)`. As PostgreSQL's read stream, it keeps a distance of
/// ranges in flight ahead of the one returned: doubled each time a range it sends needs I/O,
/// one less each time a range is found cached, at most 256 ranges and an eighth of the
/// cache. Contiguous ranges go out as one request. An [`Iterator`] (blocking) and, with
/// [`ReadStream::next_async`], a stream of futures. An example is in the crate's docs.
pub struct ReadStream<'a, I> {
    file: &'a File,
    ranges: I,
    size: u64,
    /// Ranges sent ahead and not yet returned, with their pages.
    ahead: VecDeque<(Range, u64)>,
    ahead_pages: u64,
    distance: usize,
    max_pages: u64,
    /// The range being copied out: its place and its bytes.
    current: Option<(ReadCursor, Vec<u8>)>,
}

impl<I> std::fmt::Debug for ReadStream<'_, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadStream")
            .field("ahead", &self.ahead.len())
            .field("distance", &self.distance)
            .finish_non_exhaustive()
    }
}

impl<'a, I: Iterator<Item = Range>> ReadStream<'a, I> {
    /// Ranges in flight ahead of the reader now (the look-ahead distance it aims for).
    pub fn distance(&self) -> usize {
        self.distance
    }

    /// Pull ranges from the caller until `distance` are ahead (or an eighth of the cache),
    /// sending their reads: contiguous ones as one request.
    fn top_up(&mut self) {
        let f = self.file;
        f.engine.touch(&f.activity);
        let mut spans: Vec<(u64, u64)> = Vec::new();
        while self.ahead.len() < self.distance.max(1)
            && (self.ahead.is_empty() || self.ahead_pages < self.max_pages)
        {
            let Some((off, len)) = self.ranges.next() else {
                break;
            };
            let len = (len as u64).min(self.size.saturating_sub(off)) as usize;
            let r = Bytes::page_span(Bytes(off), Bytes(len as u64));
            let pages = if len == 0 { 0 } else { r.len() };
            let cached =
                len == 0 || f.engine.core.cache.next_miss(&f.data.table, r.first, r.end) >= r.end;
            // PostgreSQL's rule: further ahead while reads need I/O, nearer while they hit.
            self.distance = if cached {
                (self.distance - 1).max(1)
            } else {
                (self.distance * 2).min(STREAM_MAX_RANGES)
            };
            if !cached {
                spans.push((r.first, r.end));
            }
            self.ahead.push_back(((off, len), pages));
            self.ahead_pages += pages;
        }
        if spans.is_empty() {
            return;
        }
        spans.sort_unstable();
        f.issue_spans(spans, 0, IoKind::Ahead);
    }

    fn poll_block(&mut self, wait: Wait<'_>) -> Poll<Option<Block>> {
        if self.current.is_none() {
            self.top_up();
            let Some(((off, len), pages)) = self.ahead.pop_front() else {
                return Poll::Ready(None);
            };
            self.ahead_pages -= pages;
            let mut buf = vec![0u8; len];
            let cur = self.file.begin_unseen(&mut buf, off, len);
            self.current = Some((cur, buf));
        }
        let Some((cur, buf)) = self.current.as_mut() else {
            return Poll::Ready(None);
        };
        let r = std::task::ready!(self.file.copy_rest(cur, buf, wait));
        let (cur, mut buf) = self.current.take().expect("current range");
        Poll::Ready(Some(r.map(|n| {
            buf.truncate(n);
            (cur.offset(), buf)
        })))
    }

    /// The next range's offset and bytes, as a future (`None` after the last).
    pub fn next_async(&mut self) -> NextRange<'_, 'a, I> {
        NextRange { stream: self }
    }
}

impl<I: Iterator<Item = Range>> Iterator for ReadStream<'_, I> {
    type Item = Block;

    fn next(&mut self) -> Option<Self::Item> {
        match self.poll_block(Wait::Block) {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("a blocking copy waits rather than returns Pending"),
        }
    }
}

/// [`ReadStream::next_async`]'s future.
#[must_use = "a future does nothing unless polled"]
#[derive(Debug)]
pub struct NextRange<'s, 'a, I> {
    stream: &'s mut ReadStream<'a, I>,
}

impl<I: Iterator<Item = Range>> Future for NextRange<'_, '_, I> {
    type Output = Option<Block>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.stream.poll_block(Wait::Task(cx.waker()))
    }
}

/// Run a future to its end in this thread, parking between polls: the blocking side of a
/// handle that is a future ([`Prefetch::wait`]).
fn block_on<F: Future + Unpin>(mut f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(r) = Pin::new(&mut f).poll(&mut cx) {
            return r;
        }
        std::thread::park();
    }
}
