//! The file API: [`File`], opened through an [`Engine`], read with [`File::read_at`] from any
//! number of threads or through `Read` and `Seek`. Every read runs the one loop the simulator
//! runs too (`policy::driving`), through the engine's side of it (`read_loop.rs`); the file's
//! policy is called here, under the file's lock, and the I/O it starts sent after it.

use super::ra_context::{align_to_blocks, EngineCtx};
use super::read_loop::{ReadCursor, Wait, CONGESTED};
use super::*;
use crate::policy::Congestion;
use crate::units::PageRange;
use std::task::Poll;

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
    /// The windows and request sizes its policy was given (sized for its device, within the
    /// budget): what a simulation of this file's reads takes to decide as the engine does.
    pub fn policy_config(&self) -> crate::policy::PolicyConfig {
        crate::policy::PolicyConfig {
            ra_max_pages: self.window_max,
            io_max_pages: self.io_max,
            fixed_pages: self.window_max,
            folio_max_order: 0,
        }
    }

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

    /// What the link to this object's store was measured at so far, for every object of the
    /// store: GETs sent, how many were in flight at once (on average over the time any was,
    /// and at most), the link's wait for a first byte and one connection's rate. `None` for a
    /// local file.
    pub fn link_stats(&self) -> Option<LinkStats> {
        self.data.source.link_stats()
    }

    /// The version of an object this file reads, as [`Engine::open_entry`] takes it to open
    /// the same version again (another engine, another process): its URL, size, and ETag or
    /// Last-Modified. `None` for a local file, which a path names.
    pub fn pinned_entry(&self) -> Option<Entry> {
        self.data.source.pinned_entry()
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
    #[inline]
    pub(super) fn with_policy_as(
        &self,
        f: impl FnOnce(&mut dyn Policy, &mut EngineCtx<'_>),
        in_caller: bool,
    ) {
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
        // The cursor made here, not moved out of a call: a read that hits is short enough for
        // moving it to show.
        let Some((read, called)) = self.clip_read_at(buf.len(), offset)? else {
            return Ok(0);
        };
        let mut cur = ReadCursor::new(read, called);
        self.begin_walk(&mut cur, buf, Wait::Block);
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
