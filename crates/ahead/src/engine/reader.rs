//! The file API: [`File`], opened through an [`Engine`], read with [`File::read_at`] from any
//! number of threads or through `Read` and `Seek`. Every read runs the one loop the simulator
//! runs too (`policy::driving`), through the engine's side of it ([`EngineRead`]): the pages
//! ready are copied out, the read is shown to the file's policy (under the file's lock), then
//! the rest are copied out as they become ready; a page still absent is read by the reader
//! itself; a read that failed fails the read that meets it.

use super::ra_context::{align_to_blocks, EngineCtx};
use super::*;
use crate::policy::{Congestion, Reached, ReadDriver, ReadWalk};
use crate::units::PageRange;
use std::task::{Poll, Waker};

/// Reads in flight above which policies are told the queue is congested (and below half of
/// which, that it drained).
const CONGESTED: u64 = 128;
/// Times a page may come back absent for one read before the engine reads it with a plain
/// `pread` (a file truncated meanwhile, or a cache too small for the threads reading it).
const ATTEMPTS: u32 = 3;

/// How a reader waits for a page in flight: blocking its thread, or parking an async task.
#[derive(Clone, Copy)]
pub(super) enum Wait<'a> {
    Block,
    Task(&'a Waker),
}

/// One read's place in the one loop (`policy::driving`), and what only the engine keeps of
/// it, across an async read's polls.
pub(super) struct ReadCursor {
    /// Its pages, and the next the reader reaches.
    walk: ReadWalk,
    pub(super) offset: u64,
    /// Bytes to copy (clipped at the end of the file).
    len: usize,
    /// Bytes copied so far.
    done: usize,
    hits: u64,
    misses: u64,
    stall: Duration,
    /// When the read was called (its latency ends when it returns).
    started: Instant,
    /// Since when an async read has been parked (its wait counts as stall).
    parked_at: Option<Instant>,
    /// Times its current page came back absent after the reader's own request for it.
    attempts: u32,
    /// The last page retried after a failed read: each page gets one retry for this reader
    /// (an ahead read that failed may have covered pages that read fine on their own).
    retried_page: Option<u64>,
    result: io::Result<()>,
}

impl ReadCursor {
    /// `read` (clipped at the end of the file), called at `started`.
    fn new(read: AppRead, started: Instant) -> ReadCursor {
        ReadCursor {
            walk: ReadWalk::new(read),
            offset: read.offset.0,
            len: read.len.0 as usize,
            done: 0,
            hits: 0,
            misses: 0,
            stall: Duration::ZERO,
            started,
            parked_at: None,
            attempts: 0,
            retried_page: None,
            result: Ok(()),
        }
    }

    /// Where in `page` to copy from, and how many bytes.
    fn piece_of(&self, page: u64) -> (usize, usize) {
        let from = if page == self.walk.pages.first {
            (self.offset % PAGE_SIZE) as usize
        } else {
            0
        };
        (from, (PAGE - from).min(self.len - self.done))
    }
}

/// The engine's side of the one read loop for a read of `file` into `buf`: pages copied out
/// of the cache, waited for by blocking or by parking a task, the reader's own requests sent
/// through the engine; a page lost again and again read past the cache, a failed one tried
/// once more.
struct EngineRead<'r, 'w> {
    file: &'r File,
    cur: &'r mut ReadCursor,
    buf: &'r mut [u8],
    wait: Wait<'w>,
}

impl EngineRead<'_, '_> {
    fn in_caller(&self) -> bool {
        matches!(self.wait, Wait::Block)
    }

    /// `page`'s lookup, waiting for it if in flight (or parking: `None`).
    fn look_up(&mut self, page: u64, from: usize, want: usize) -> Option<Lookup> {
        let cache = &self.file.engine.core.cache;
        let table = &self.file.data.table;
        let cur = &mut *self.cur;
        let dst = &mut self.buf[cur.done..cur.done + want];
        let lookup = match self.wait {
            Wait::Block => {
                if cache.is_in_flight(table, page) {
                    let t = Instant::now();
                    self.file.engine.expedite(&self.file.data, page);
                    cur.stall += t.elapsed();
                }
                cache.read_page(table, page, from, dst, true, &mut cur.stall)
            }
            Wait::Task(waker) => match cache.poll_page(table, page, from, dst, waker) {
                Poll::Ready(l) => l,
                Poll::Pending => {
                    cur.parked_at.get_or_insert_with(Instant::now);
                    return None;
                }
            },
        };
        if let Some(t0) = cur.parked_at.take() {
            cur.stall += t0.elapsed();
        }
        Some(lookup)
    }

    /// A request the reader waits for: `io`, sent from this thread only if it blocks.
    fn request(&mut self, io: IoRequest) -> u64 {
        let in_caller = self.in_caller();
        let (mut refaults, mut ops) = (0, Vec::new());
        let brought = self.file.engine.start_io_as(
            &self.file.data,
            self.file.io_max,
            io,
            in_caller,
            &mut refaults,
            &mut ops,
        );
        self.file.engine.submit_as(&mut ops, in_caller);
        self.file.report_refaults(refaults);
        brought
    }
}

impl ReadDriver for EngineRead<'_, '_> {
    fn take_ready(&mut self, pages: PageRange) -> (u64, bool) {
        let cache = &self.file.engine.core.cache;
        let cur = &mut *self.cur;
        let mut stall = Duration::ZERO;
        let mut page = pages.first;
        while page < pages.end && cur.done < cur.len {
            let (from, want) = cur.piece_of(page);
            match cache.read_page(
                &self.file.data.table,
                page,
                from,
                &mut self.buf[cur.done..cur.done + want],
                false,
                &mut stall,
            ) {
                Lookup::Copied { n, whole, .. } => {
                    cur.done += n;
                    cur.hits += 1;
                    page += 1;
                    if !whole {
                        return (page - pages.first, true);
                    }
                }
                _ => break,
            }
        }
        (page - pages.first, false)
    }

    fn show_policy(&mut self, read: AppRead, known_cached: PageRange) {
        // The policy sees the part of the read within the file as its pages were opened: a
        // file grown since is read past that end by the reader itself (`reach`).
        let opened_bytes = self.file.data.pages() * PAGE_SIZE;
        if read.offset.0 >= opened_bytes {
            return;
        }
        let read = AppRead {
            offset: read.offset,
            len: Bytes(read.len.0.min(opened_bytes - read.offset.0)),
        };
        let in_caller = self.in_caller();
        self.file.with_policy_as(
            |p, ctx| {
                ctx.known_cached = known_cached;
                p.on_read(read, ctx)
            },
            in_caller,
        );
    }

    fn reach(&mut self, page: u64) -> Reached {
        loop {
            let (from, want) = self.cur.piece_of(page);
            let Some(lookup) = self.look_up(page, from, want) else {
                return Reached::Pending;
            };
            let cur = &mut *self.cur;
            match lookup {
                Lookup::Copied { n, whole, .. } => {
                    // It was not ready when the read began (the hits were copied before).
                    cur.misses += 1;
                    cur.done += n;
                    cur.attempts = 0;
                    return Reached::Taken { last: !whole };
                }
                // Past the end the file had when opened (it grew): read past the cache.
                Lookup::Absent if cur.attempts < ATTEMPTS && page < self.file.data.pages() => {
                    return Reached::Absent;
                }
                Lookup::Absent => {
                    // Read and lost again and again: read this page past the cache.
                    cur.misses += 1;
                    let dst = &mut self.buf[cur.done..cur.done + want];
                    return match self.file.data.source.read_page_uncached(page, from, dst) {
                        Ok(n) => {
                            cur.done += n;
                            cur.attempts = 0;
                            Reached::Taken { last: n < want }
                        }
                        Err(e) => {
                            cur.result = Err(e);
                            Reached::Stopped
                        }
                    };
                }
                Lookup::Failed(f) if cur.retried_page != Some(page) => {
                    // It may have been an ahead read that failed: try this page once more,
                    // for this reader.
                    cur.retried_page = Some(page);
                    drop(f);
                    self.request(IoRequest::sync(page, 1));
                }
                Lookup::Failed(f) => {
                    cur.result = Err(f.error());
                    return Reached::Stopped;
                }
            }
        }
    }

    fn read_run(&mut self, run: PageRange) -> Poll<()> {
        let cache = &self.file.engine.core.cache;
        let t = Instant::now();
        if let Wait::Task(waker) = self.wait {
            // Registered before the try, so a slot freed after it wakes us.
            cache.wake_when_slots_free(waker);
        }
        // One request, as the policy's own synchronous reads: a source that fetches a large
        // request in parallel parts (an object store) then waits one round trip for it, not
        // one per `io_max` in turn (BENCHMARKS, issue 21 run 4).
        let io = self
            .file
            .aligned(IoRequest::sync(run.first, run.end - run.first));
        let brought = self.request(io);
        let in_caller = self.in_caller();
        if in_caller && !self.file.engine.backend.is_async() {
            self.cur.stall += t.elapsed();
        }
        if brought > 0 || in_caller {
            self.cur.attempts += 1;
        } else if !cache.is_cached(&self.file.data.table, run.first) {
            // No room: woken when a slot frees.
            self.cur.parked_at.get_or_insert_with(Instant::now);
            return Poll::Pending;
        }
        Poll::Ready(())
    }

    fn cache_pages(&self) -> u64 {
        self.file.engine.core.cache.slots() as u64
    }
}

pub(super) struct PolicyState {
    pub(super) policy: Box<dyn Policy>,
    pub(super) device_version: u64,
    pub(super) congestion: Congestion,
}

/// A file opened through an [`Engine`]. [`File::read_at`] may be called from many threads at
/// once; `Read` and `Seek` use the file's own position, like `std::fs::File`.
pub struct File {
    pub(super) engine: Arc<EngineParts>,
    pub(super) data: Arc<FileData>,
    pub(super) io_max: u64,
    /// The largest window its policy reads ahead, in pages.
    pub(super) window_max: u64,
    /// Pages per block of the caller's (`OpenOptions::block_size`): every request starts and
    /// ends on a block boundary. 1 unless set.
    pub(super) block_pages: u64,
    /// Its part in the readahead budget's shares (see `activity`).
    pub(super) activity: Arc<super::activity::Activity>,
    pub(super) state: Mutex<PolicyState>,
    pub(super) pos: AtomicU64,
    /// Its first bytes asked for ahead of the reader, when it was opened ahead (`open_many`).
    pub(super) opened_ahead: Option<super::open_many::AskedAhead>,
}

impl File {
    /// Size of the file in bytes as the engine last saw it: the size at open, or what the
    /// size check of a later read found (a file truncated or extended while open).
    pub fn len(&self) -> u64 {
        self.data.source.live_size()
    }

    /// Whether the file was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        self.data.source.path()
    }

    /// Why a change of its contents while it is read might go unseen, where it might: an
    /// object whose server gives neither ETag nor Last-Modified, so that only a change of size
    /// is caught ([`FallbackKind::Unpinned`] in `stats()` says the same). `None` for a local
    /// file (its lease or `fstat` sees every change) and for every object pinned by its ETag or
    /// Last-Modified.
    pub fn unpinned(&self) -> Option<&str> {
        self.data.source.unpinned()
    }

    /// What the engine has measured of the device this file is read from (its block device,
    /// or its object store), as its policy is told: each device has an estimate of its own.
    pub fn device_estimate(&self) -> DeviceEstimate {
        self.data.meter.lock().for_policy(self.io_max)
    }

    /// Whether it is read with `O_DIRECT` (false: buffered, see [`Stats::fallbacks`]).
    pub fn is_direct(&self) -> bool {
        self.data.source.is_direct()
    }

    /// The engine this file was opened from.
    pub fn engine(&self) -> Engine {
        Engine {
            inner: self.engine.clone(),
        }
    }

    /// The descriptor it is read through, for a local file (`None` for a remote object).
    /// With `O_DIRECT`, reading or writing it directly bypasses the engine's cache: the
    /// engine sees a change in size, not a write in place.
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.data.source.fd()
    }

    /// The engine's statistics.
    pub fn engine_stats(&self) -> Stats {
        self.engine().stats()
    }

    /// This file's figures, across every open of it through this engine (opens of the same
    /// version of a file share its pages, and so its counts).
    pub fn stats(&self) -> FileStats {
        self.data.stats()
    }

    /// The largest window this open's policy reads ahead, in bytes: the open's
    /// [`OpenOptions::window_max`](crate::OpenOptions::window_max), else the engine's
    /// `window_max`, else the device's, rounded up to pages and capped at a quarter of the
    /// budget.
    pub fn window_max_bytes(&self) -> u64 {
        self.window_max * PAGE_SIZE
    }

    /// The largest request this open sends ahead, in bytes, found as
    /// [`window_max_bytes`](Self::window_max_bytes) is.
    pub fn request_max_bytes(&self) -> u64 {
        self.io_max * PAGE_SIZE
    }

    fn ctx(&self) -> EngineCtx<'_> {
        EngineCtx {
            engine: &self.engine,
            file: &self.data,
            io_max: self.io_max,
            block_pages: self.block_pages,
            refaults: 0,
            ops: Vec::new(),
            known_cached: PageRange::default(),
        }
    }

    fn with_policy(&self, f: impl FnOnce(&mut dyn Policy, &mut EngineCtx<'_>)) {
        self.with_policy_as(f, true)
    }

    /// Call into the file's policy; the reads it starts are submitted after its lock is let
    /// go, a synchronous one read in this thread only if `in_caller`.
    fn with_policy_as(&self, f: impl FnOnce(&mut dyn Policy, &mut EngineCtx<'_>), in_caller: bool) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let core = &self.engine.core;
        let device = &self.data.meter;
        if device.version.load(Ordering::Acquire) != st.device_version {
            let m = device.lock();
            st.device_version = m.version;
            let e = m.for_policy(self.io_max);
            drop(m);
            st.policy.on_device(e);
        }
        let in_flight = core.in_flight.load(Ordering::Relaxed) as u64;
        if let Some(congested) = st.congestion.update(in_flight, CONGESTED, CONGESTED / 2) {
            st.policy.on_congestion(congested);
        }
        let mut ctx = self.ctx();
        f(st.policy.as_mut(), &mut ctx);
        if ctx.refaults > 0 {
            self.count_refaults(ctx.refaults);
            st.policy.on_thrashed(ctx.refaults);
        }
        drop(st);
        self.engine.submit_as(&mut ctx.ops, in_caller);
    }

    /// `io` widened to whole blocks of the caller's block size.
    pub(super) fn aligned(&self, io: IoRequest) -> IoRequest {
        align_to_blocks(io, self.block_pages)
    }

    fn count_refaults(&self, pages: u64) {
        self.engine
            .core
            .cache
            .counters
            .thrashed_pages
            .fetch_add(pages, Ordering::Relaxed);
        self.data
            .counters
            .thrashed_pages
            .fetch_add(pages, Ordering::Relaxed);
    }

    /// Pages this handle read again after they were evicted unused, outside a policy call (a
    /// reader's own read of what its readahead lost): counted, and told to the policy, as the
    /// simulator tells it of every refault.
    pub(super) fn report_refaults(&self, pages: u64) {
        if pages == 0 {
            return;
        }
        self.count_refaults(pages);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.policy.on_thrashed(pages);
    }

    /// Read up to `buf.len()` bytes at `offset`, as `pread(2)` does: fewer only at the end of
    /// the file (0 at or past it).
    ///
    /// # Errors
    /// The system's (or the store's), from the read that met them: a failed request fails
    /// the reads that wait for it and caches nothing, so the next read tries again. Bytes
    /// copied before the failure are returned instead, as `pread(2)` returns a short count.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some(mut cur) = self.begin_read_as(buf, offset, Wait::Block)? else {
            return Ok(0);
        };
        match self.copy_rest(&mut cur, buf, Wait::Block) {
            Poll::Ready(r) => r,
            Poll::Pending => unreachable!("a blocking copy waits rather than returns Pending"),
        }
    }

    /// Read exactly `buf.len()` bytes at `offset`, as `std::os::unix::fs::FileExt::read_exact_at`
    /// does.
    ///
    /// # Errors
    /// `UnexpectedEof` where the file ends before `buf` is full (what was read is in `buf`);
    /// otherwise as [`File::read_at`].
    pub fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{}: the file ends at {} bytes, before the read's end",
                            self.path().display(),
                            offset
                        ),
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The first half of a read, steps 1 to 3 of the one loop (`policy::driving`): the size
    /// check and the clip, the pages already ready copied out without waiting, and the read
    /// shown to the policy (which starts what it wants; a synchronous read of it is done in
    /// this thread only under [`Wait::Block`]). `None` at or past the end of the file. What is
    /// left is [`File::copy_rest`]'s.
    pub(super) fn begin_read_as(
        &self,
        buf: &mut [u8],
        offset: u64,
        wait: Wait<'_>,
    ) -> io::Result<Option<ReadCursor>> {
        if buf.is_empty() {
            return Ok(None);
        }
        let called = Instant::now();
        let size = self.current_size()?;
        let Some(read) = crate::policy::clip_read(offset, buf.len() as u64, size) else {
            return Ok(None);
        };
        self.engine.touch(&self.activity);
        let mut cur = ReadCursor::new(read, called);
        let mut driver = EngineRead {
            file: self,
            cur: &mut cur,
            buf,
            wait,
        };
        let walk = crate::policy::begin_read(&mut driver, read);
        cur.walk = walk;
        Ok(Some(cur))
    }

    /// A range of `len` bytes at `offset` that no policy is shown (a batch's, its I/O planned
    /// with all its ranges): step 2 alone, what is ready copied out. What is left is
    /// [`File::copy_rest`]'s.
    pub(super) fn begin_unseen(&self, buf: &mut [u8], offset: u64, len: usize) -> ReadCursor {
        let read = AppRead {
            offset: Bytes(offset),
            len: Bytes(len as u64),
        };
        let mut cur = ReadCursor::new(read, Instant::now());
        if len == 0 {
            cur.walk.next = cur.walk.pages.end;
        } else {
            let mut driver = EngineRead {
                file: self,
                cur: &mut cur,
                buf,
                wait: Wait::Block,
            };
            let walk = crate::policy::begin_unseen(&mut driver, read);
            cur.walk = walk;
        }
        cur
    }

    /// The rest of a read begun with [`File::begin_read_as`] or [`File::begin_unseen`], step 4
    /// of the one loop: each page copied out as it becomes ready, an absent one read, a failed
    /// one tried once more. With [`Wait::Block`] it waits, in this thread, and never returns
    /// `Pending`; with [`Wait::Task`] a page in flight or a cache with no room parks the task
    /// and returns `Pending`, `cur` keeping the place. `Ready` counts the read in the stats.
    pub(super) fn copy_rest(
        &self,
        cur: &mut ReadCursor,
        buf: &mut [u8],
        wait: Wait<'_>,
    ) -> Poll<io::Result<usize>> {
        let mut walk = cur.walk;
        let mut driver = EngineRead {
            file: self,
            cur,
            buf,
            wait,
        };
        let walked = crate::policy::walk_read(&mut driver, &mut walk);
        cur.walk = walk;
        if walked.is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(self.finish_read(cur))
    }

    /// Count a finished read in the stats, and give its result.
    fn finish_read(&self, cur: &mut ReadCursor) -> io::Result<usize> {
        self.engine
            .core
            .cache
            .pass_over(&self.data.table, cur.walk.pages.first, cur.walk.next);
        for c in Counters::both(&self.engine.core.counters, &self.data) {
            c.count_read(cur.done as u64, cur.hits, cur.misses, cur.stall);
        }
        let took = cur.started.elapsed();
        self.engine.core.read_latency.record(took);
        self.data.read_latency.record(took);
        match std::mem::replace(&mut cur.result, Ok(())) {
            Err(e) if cur.done == 0 => Err(e),
            _ => Ok(cur.done),
        }
    }

    /// The file's size now, with its cached pages dropped first if it changed while open
    /// (truncated, extended, written in place), so no read returns bytes the file no longer
    /// holds. A read racing the change may see either side of it, as with `pread(2)`. How the
    /// change is seen is the source's (a local file's lease: one load; else `fstat`).
    #[inline]
    pub(super) fn current_size(&self) -> io::Result<u64> {
        let d = &self.data;
        d.source.current_size(&mut |event| match event {
            source::Event::Changed(why) => {
                self.engine.core.cache.invalidate(&d.table, d.pages());
                self.engine.give_back_memory();
                self.engine
                    .note_fallback(Fallback::new(FallbackKind::Changed, why));
            }
            source::Event::Note(why) => self.engine.note_fallback(why),
            source::Event::SizeChecked => {
                for c in Counters::both(&self.engine.core.counters, d) {
                    c.size_checks.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    }

    /// Pass advice to the file's policy; don't-need also drops the range's pages. Will-need
    /// is the policy's to act on, within its share of the budget (`none` and `fixed` ignore
    /// it; `open_many` relies on that): [`File::prefetch`] reads a range whatever the policy,
    /// and can be awaited or detached.
    ///
    /// # Errors
    /// None today (advice a policy has no use for is ignored, as the kernel ignores it); the
    /// result is kept for sources that may refuse advice.
    pub fn advise(&self, advice: Advice) -> io::Result<()> {
        let pages = |offset: u64, len: u64| Bytes::page_span(Bytes(offset), Bytes(len.max(1)));
        let hint = match advice {
            Advice::Normal => Hint::Normal,
            Advice::Sequential => Hint::Sequential,
            Advice::Random => Hint::Random,
            Advice::WillNeed { offset, len } => {
                self.engine.touch(&self.activity);
                let range = pages(offset, len);
                Hint::WillNeed {
                    start_page: range.first,
                    pages: range.len(),
                }
            }
            Advice::DontNeed { offset, len } => {
                // Only whole pages are dropped, as the kernel does.
                let start = offset.div_ceil(PAGE_SIZE);
                let end = offset.saturating_add(len) / PAGE_SIZE;
                // The cache holds no page past the table: a len of u64::MAX ("to the end")
                // must not walk 2^52 pages.
                let cached_end = end.min(self.data.pages());
                if cached_end > start {
                    self.engine
                        .core
                        .cache
                        .drop_range(&self.data.table, start, cached_end);
                    self.engine.give_back_memory();
                }
                Hint::DontNeed {
                    start_page: start,
                    pages: end.saturating_sub(start),
                }
            }
            Advice::Limit { end } => Hint::Limit {
                end_page: end.div_ceil(PAGE_SIZE),
            },
        };
        self.with_policy(|p, ctx| p.on_hint(hint, ctx));
        Ok(())
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("path", &self.path())
            .field("len", &self.len())
            .field("direct", &self.is_direct())
            .finish_non_exhaustive()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        self.engine.deactivate(&self.activity);
        if let Some(asked) = &self.opened_ahead {
            asked.give_back();
        }
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let pos = self.pos.load(Ordering::Relaxed);
        let n = self.read_at(buf, pos)?;
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Seek for File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        (&*self).seek(to)
    }
}

impl Seek for &File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let cur = self.pos.load(Ordering::Relaxed);
        let new = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len().checked_add_signed(d),
            SeekFrom::Current(d) => cur.checked_add_signed(d),
        }
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            )
        })?;
        self.pos.store(new, Ordering::Relaxed);
        Ok(new)
    }
}
