//! The simulator's side of [`RaContext`]: what a policy sees of the modelled cache, and how
//! the I/O it starts becomes device requests and cached pages.

use super::*;

/// The driver's side of [`RaContext`] for one call into a policy.
pub(super) struct Ctx<'a> {
    pub(super) cache: &'a mut PageCache,
    pub(super) device: &'a mut Device,
    pub(super) files: &'a mut Vec<FileState>,
    pub(super) thrash: &'a mut ThrashLog,
    pub(super) file: u32,
    pub(super) owner: u32,
    pub(super) now_ns: u64,
    pub(super) seq: u64,
    pub(super) paper: bool,
    pub(super) windows: Option<&'a mut Vec<FileWindow>>,
    pub(super) commands: Option<&'a mut Vec<DeviceCommand>>,
    pub(super) budget: u64,
    /// Pages the reader copied out before the policy saw its read (CLOCK, as the engine's
    /// reader does): the policy is told they are cached, as the engine tells it, whatever its
    /// I/O evicts meanwhile.
    pub(super) known_cached: PageRange,
}

impl Ctx<'_> {
    /// Bring the absent pages `[p, run_end)` into the cache as one device request, in folios of
    /// up to `order`. `fallback`: single pages from here on (a folio collided with a cached page).
    /// Returns whether the layout fell back to single pages.
    pub(super) fn fill_run(
        &mut self,
        io: &IoRequest,
        p: u64,
        run_end: u64,
        limit: u64,
        fallback: bool,
    ) -> bool {
        // One device command per `command_pages` (the block layer's split), submitted in order
        // as the walk below reaches it; a page is ready when its command completes.
        let command = self.device.command_pages();
        let (mut submitted, mut ready_ns) = (0u64, 0u64);
        let mut fallback = fallback;
        let mut q = p;
        while q < run_end {
            let mut order = if fallback { 0 } else { io.folio_order.min(63) };
            if order > 0 {
                // Naturally aligned: a misaligned index takes the order of its lowest set bit.
                if q & ((1u64 << order) - 1) != 0 {
                    order = q.trailing_zeros().min(63) as u8;
                }
                // No folio past the range's last page.
                while order > 0 && q + (1u64 << order) - 1 > limit {
                    order -= 1;
                }
                if q + (1u64 << order) > run_end {
                    // It would cover a cached page: the kernel's folio insert fails and the rest
                    // of the range is read in single pages.
                    fallback = true;
                    order = 0;
                }
            }
            let n = 1u64 << order;
            let marker = io.marker_page.is_some_and(|m| m >= q && m < q + n);
            for page in q..q + n {
                while p + submitted * command <= page {
                    let at = p + submitted * command;
                    let pages = command.min(run_end - at);
                    ready_ns = self.device.submit(self.now_ns, self.file, at, pages);
                    if let Some(log) = self.commands.as_deref_mut() {
                        log.push(DeviceCommand {
                            file: self.file,
                            first_page: at,
                            pages,
                            ahead: io.kind == IoKind::Ahead,
                        });
                    }
                    submitted += 1;
                    // A command's refaults are counted before its pages take their places (as
                    // the engine claims a request's pages before it allocates their slots):
                    // where the shadows kept are bounded, the order decides which evictions
                    // leave one.
                    for q in at..at + pages {
                        if self.thrash.refault(self.file, q) {
                            self.files[self.file as usize].counters.thrashed_pages += 1;
                        }
                    }
                }
                if let Some(ev) = self.cache.insert(
                    self.file,
                    self.owner,
                    page,
                    ready_ns,
                    self.seq,
                    marker && page == q,
                    order,
                ) {
                    if !ev.used && self.thrash.shadows.len() < self.cache.shadow_limit() {
                        self.thrash.shadows.insert((ev.file, ev.page), ev.owner);
                    }
                }
            }
            q += n;
        }
        fallback
    }
}

impl RaContext for Ctx<'_> {
    fn file_pages(&self) -> u64 {
        self.files[self.file as usize].pages
    }

    fn is_cached(&self, page: u64) -> bool {
        self.known_cached.contains(page) || self.cache.contains(self.file, page)
    }

    fn has_marker(&self, page: u64) -> bool {
        self.cache.has_marker(self.file, page)
    }

    fn clear_marker(&mut self, page: u64) {
        self.cache.clear_marker(self.file, page);
    }

    fn folio_of(&self, page: u64) -> PageRange {
        self.cache.folio_of(self.file, page)
    }

    fn next_miss(&self, index: u64, max_scan: u64) -> u64 {
        let map = cache::FileFolios {
            cache: self.cache,
            file: self.file,
        };
        xarray::next_miss(&map, index, max_scan)
    }

    fn prev_miss(&self, index: u64, max_scan: u64) -> u64 {
        let map = cache::FileFolios {
            cache: self.cache,
            file: self.file,
        };
        xarray::prev_miss(&map, index, max_scan)
    }

    fn readahead_budget(&self) -> u64 {
        self.budget
    }

    fn note_window(&mut self, window: Window) {
        if let Some(log) = self.windows.as_deref_mut() {
            log.push(FileWindow {
                file: self.file,
                window,
            });
        }
    }

    fn start_io(&mut self, io: IoRequest) -> u64 {
        let file_pages = self.file_pages();
        let start = io.start_page;
        let end = start.saturating_add(io.pages).min(file_pages);
        // What a reader waits for at once is capped as the engine caps it (a run's first
        // pages are not dropped for its last): one rule, `policy::run_cap_pages`.
        let end = match io.kind {
            IoKind::Sync => end.min(
                start.saturating_add(crate::policy::run_cap_pages(self.cache.capacity() as u64)),
            ),
            IoKind::Ahead => end,
        };
        if end <= start {
            return 0;
        }
        {
            let c = &mut self.files[self.file as usize].counters;
            c.paper_pages_read += end - start;
            c.paper_requests += 1;
            match io.kind {
                IoKind::Sync => c.paper_sync += 1,
                IoKind::Ahead => c.paper_async += 1,
            }
        }
        let mut started = 0;
        let mut fallback = false;
        let mut p = start;
        while p < end {
            if self.cache.contains(self.file, p) {
                // A cached page inside the range: large folios stop here (see `fill_run`).
                fallback = true;
                p += 1;
                continue;
            }
            let mut run_end = p + 1;
            while run_end < end && !self.cache.contains(self.file, run_end) {
                run_end += 1;
            }
            let n = run_end - p;
            fallback = self.fill_run(&io, p, run_end, end - 1, fallback);
            let c = &mut self.files[self.file as usize].counters;
            c.pages_read += n;
            c.requests += 1;
            match io.kind {
                IoKind::Sync => c.sync_requests += 1,
                IoKind::Ahead => c.ahead_requests += 1,
            }
            started += n;
            p = run_end;
        }
        if self.paper {
            end - start
        } else {
            started
        }
    }
}
