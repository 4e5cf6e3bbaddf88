//! The file API: [`File`], opened through an [`Engine`], read with [`File::read_at`] from any
//! number of threads or through `Read` and `Seek`. Each read is shown to the file's policy
//! (under the file's lock), then the pages are copied out as they become ready; a page still
//! absent is read by the reader itself; a read that failed fails the read that meets it.

use super::*;
use crate::units::PageRange;

/// Reads in flight above which policies are told the queue is congested (and below half of
/// which, that it drained).
const CONGESTED: usize = 128;
/// Times a page may come back absent for one read before the engine reads it with a plain
/// `pread` (a file truncated meanwhile, or a cache too small for the threads reading it).
const ATTEMPTS: u32 = 3;

pub(super) struct PolicyState {
    pub(super) policy: Box<dyn Policy>,
    pub(super) device_version: u64,
    pub(super) congested: bool,
}

/// A file opened through an [`Engine`]. [`File::read_at`] may be called from many threads at
/// once; `Read` and `Seek` use the file's own position, like `std::fs::File`.
pub struct File {
    pub(super) engine: Arc<EngineParts>,
    pub(super) data: Arc<FileData>,
    pub(super) io_max: u64,
    pub(super) state: Mutex<PolicyState>,
    pub(super) pos: AtomicU64,
    /// Bytes asked for ahead of the reader when it was opened ahead (`open_many`), and the
    /// count of such bytes of files still open that they are given back to on close.
    pub(super) opened_ahead: Option<(u64, Arc<AtomicU64>)>,
}

/// The driver's side of [`RaContext`] for one call into a file's policy.
struct EngineCtx<'a> {
    engine: &'a EngineParts,
    file: &'a Arc<FileData>,
    io_max: u64,
    refaults: u64,
    ops: Vec<ReadOp>,
    /// Pages the driver has just copied out: cached, no need to look.
    known_cached: PageRange,
}

impl RaContext for EngineCtx<'_> {
    fn file_pages(&self) -> u64 {
        self.file.pages()
    }

    fn is_cached(&self, page: u64) -> bool {
        self.known_cached.contains(page)
            || page < self.file.pages() && self.engine.core.cache.is_cached(&self.file.table, page)
    }

    fn has_marker(&self, page: u64) -> bool {
        self.engine.core.cache.has_marker(&self.file.table, page)
    }

    fn clear_marker(&mut self, page: u64) {
        self.engine
            .core
            .cache
            .set_marker(&self.file.table, page, false);
    }

    fn start_io(&mut self, io: IoRequest) -> u64 {
        self.engine.start_io(
            self.file,
            self.io_max,
            io,
            &mut self.refaults,
            &mut self.ops,
        )
    }

    fn next_miss(&self, index: u64, max_scan: u64) -> u64 {
        let end = index.saturating_add(max_scan);
        self.engine
            .core
            .cache
            .next_miss(&self.file.table, index, end.min(self.file.pages()))
    }

    fn readahead_budget(&self) -> u64 {
        self.engine.budget_pages.load(Ordering::Relaxed)
    }
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

    /// The engine's statistics.
    pub fn engine_stats(&self) -> Stats {
        self.engine().stats()
    }

    fn ctx(&self) -> EngineCtx<'_> {
        EngineCtx {
            engine: &self.engine,
            file: &self.data,
            io_max: self.io_max,
            refaults: 0,
            ops: Vec::new(),
            known_cached: PageRange::default(),
        }
    }

    fn with_policy(&self, f: impl FnOnce(&mut dyn Policy, &mut EngineCtx<'_>)) {
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
        let in_flight = core.in_flight.load(Ordering::Relaxed);
        if !st.congested && in_flight >= CONGESTED {
            st.congested = true;
            st.policy.on_congestion(true);
        } else if st.congested && in_flight < CONGESTED / 2 {
            st.congested = false;
            st.policy.on_congestion(false);
        }
        let mut ctx = self.ctx();
        f(st.policy.as_mut(), &mut ctx);
        if ctx.refaults > 0 {
            self.count_refaults(ctx.refaults);
            st.policy.on_thrashed(ctx.refaults);
        }
        drop(st);
        self.engine.submit(&mut ctx.ops);
    }

    fn count_refaults(&self, pages: u64) {
        self.engine
            .core
            .cache
            .counters
            .thrashed_pages
            .fetch_add(pages, Ordering::Relaxed);
    }

    /// Pages this handle read again after they were evicted unused, outside a policy call (a
    /// reader's own read of what its readahead lost): counted, and told to the policy, as the
    /// simulator tells it of every refault.
    fn report_refaults(&self, pages: u64) {
        if pages == 0 {
            return;
        }
        self.count_refaults(pages);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.policy.on_thrashed(pages);
    }

    /// Read up to `buf.len()` bytes at `offset`, as `pread(2)` does: fewer only at the end of
    /// the file (0 at or past it). Errors are the system's, from the read that met them.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let size = self.current_size()?;
        if buf.is_empty() || offset >= size {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset);
        let read = AppRead {
            offset: Bytes(offset),
            len: Bytes(len),
        };
        let (first, end) = (read.first_page(), read.end_page());
        let cache = &self.engine.core.cache;
        let table = &self.data.table;
        let len = len as usize;
        let mut done = 0usize;
        let mut page = first;
        let (mut hits, mut misses) = (0u64, 0u64);
        let mut stall = Duration::ZERO;
        let mut attempts = 0u32;
        // The last page retried after a failed read: each page gets one retry for this reader
        // (an ahead read that failed may have covered pages that read fine on their own).
        let mut retried_page = None;
        let mut result = Ok(());

        // Hits first: copy while pages are ready, without waiting. A read that is all hits
        // then shows the policy pages it knows are cached, so it need not look them up again.
        let mut eof = false;
        while page < end && done < len {
            let from = if page == first {
                (offset % PAGE_SIZE) as usize
            } else {
                0
            };
            let want = (PAGE - from).min(len - done);
            match cache.read_page(
                table,
                page,
                from,
                &mut buf[done..done + want],
                false,
                &mut stall,
            ) {
                Lookup::Copied { n, whole, .. } => {
                    done += n;
                    hits += 1;
                    page += 1;
                    if !whole {
                        eof = true;
                        break;
                    }
                }
                _ => break,
            }
        }
        let known = PageRange::new(first, page);
        self.with_policy(|p, ctx| {
            ctx.known_cached = known;
            p.on_read(read, ctx)
        });
        if eof {
            page = end;
        }

        while page < end && done < len {
            let from = if page == first {
                (offset % PAGE_SIZE) as usize
            } else {
                0
            };
            let want = (PAGE - from).min(len - done);
            let dst = &mut buf[done..done + want];
            if cache.is_in_flight(table, page) {
                let t = Instant::now();
                self.engine.expedite(&self.data, page);
                stall += t.elapsed();
            }
            match cache.read_page(table, page, from, dst, true, &mut stall) {
                Lookup::Copied { n, whole, .. } => {
                    // It was not ready when the read began (the hits were copied above).
                    misses += 1;
                    done += n;
                    attempts = 0;
                    page += 1;
                    if !whole {
                        break; // the file ends in this page
                    }
                }
                // Past the end the file had when opened (it grew): read past the cache.
                Lookup::Absent if attempts < ATTEMPTS && page < self.data.pages() => {
                    attempts += 1;
                    let t = Instant::now();
                    let mut refaults = 0;
                    let mut ops = Vec::new();
                    // One request's worth at a time: the pages are copied out as they come, and
                    // asking for all of a read larger than the cache at once would evict its
                    // first pages with its last before they are copied (and ask again, and
                    // again). Ahead windows, not this, keep the device busy.
                    self.engine.start_io(
                        &self.data,
                        self.io_max,
                        IoRequest::sync(page, (end - page).min(self.io_max.max(1))),
                        &mut refaults,
                        &mut ops,
                    );
                    self.engine.submit(&mut ops);
                    if !self.engine.backend.is_async() {
                        stall += t.elapsed();
                    }
                    self.report_refaults(refaults);
                }
                Lookup::Absent => {
                    // Read and lost again and again: read this page past the cache.
                    misses += 1;
                    match self.data.source.read_page_uncached(page, from, dst) {
                        Ok(n) => {
                            done += n;
                            attempts = 0;
                            page += 1;
                            if n < want {
                                break;
                            }
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
                Lookup::Failed(f) if retried_page != Some(page) => {
                    // It may have been an ahead read that failed: try this page once more,
                    // for this reader.
                    retried_page = Some(page);
                    let mut refaults = 0;
                    let mut ops = Vec::new();
                    self.engine.start_io(
                        &self.data,
                        self.io_max,
                        IoRequest::sync(page, 1),
                        &mut refaults,
                        &mut ops,
                    );
                    self.engine.submit(&mut ops);
                    self.report_refaults(refaults);
                    drop(f);
                }
                Lookup::Failed(f) => {
                    result = Err(f.error());
                    break;
                }
            }
        }
        let c = &self.engine.core.counters;
        c.reads.fetch_add(1, Ordering::Relaxed);
        c.bytes_returned.fetch_add(done as u64, Ordering::Relaxed);
        if hits > 0 {
            c.hit_pages.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            c.miss_pages.fetch_add(misses, Ordering::Relaxed);
        }
        if !stall.is_zero() {
            c.stall_ns
                .fetch_add(stall.as_nanos() as u64, Ordering::Relaxed);
        }
        match result {
            Err(e) if done == 0 => Err(e),
            _ => Ok(done),
        }
    }

    /// The file's size now, with its cached pages dropped first if it changed while open
    /// (truncated, extended, written in place), so no read returns bytes the file no longer
    /// holds. A read racing the change may see either side of it, as with `pread(2)`. How the
    /// change is seen is the source's (a local file's lease: one load; else `fstat`).
    #[inline]
    fn current_size(&self) -> io::Result<u64> {
        let d = &self.data;
        d.source.current_size(&mut |event| match event {
            source::Event::Changed(why) => {
                self.engine.core.cache.drop_range(&d.table, 0, d.pages());
                self.engine.give_back_memory();
                self.engine.note_fallback(why);
            }
            source::Event::Note(why) => self.engine.note_fallback(why),
            source::Event::SizeChecked => {
                self.engine
                    .core
                    .counters
                    .size_checks
                    .fetch_add(1, Ordering::Relaxed);
            }
        })
    }

    /// Pass advice to the file's policy (and, for don't-need, drop the range's pages).
    pub fn advise(&self, advice: Advice) -> io::Result<()> {
        let pages = |offset: u64, len: u64| Bytes::page_span(Bytes(offset), Bytes(len.max(1)));
        let hint = match advice {
            Advice::Normal => Hint::Normal,
            Advice::Sequential => Hint::Sequential,
            Advice::Random => Hint::Random,
            Advice::WillNeed { offset, len } => {
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
        let pages = self.data.size.div_ceil(PAGE_SIZE);
        self.engine.share_budget(|s| s.close(pages));
        if let Some((bytes, held)) = &self.opened_ahead {
            held.fetch_sub(*bytes, Ordering::Relaxed);
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
