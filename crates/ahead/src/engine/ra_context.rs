//! What a policy sees of the engine for one call ([`RaContext`]): the file's pages in the
//! cache and their markers, the readahead budget's share, and the reads it starts (aligned to
//! the caller's blocks, submitted by the reader once the file's lock is let go).

use super::*;
use crate::units::PageRange;

/// `io` widened to start and end on multiples of `block_pages` (its marker kept).
pub(super) fn align_to_blocks(io: IoRequest, block_pages: u64) -> IoRequest {
    if block_pages <= 1 {
        return io;
    }
    let start = io.start_page - io.start_page % block_pages;
    let end = io
        .start_page
        .saturating_add(io.pages)
        .div_ceil(block_pages)
        .saturating_mul(block_pages);
    IoRequest {
        start_page: start,
        pages: end - start,
        ..io
    }
}

/// The driver's side of [`RaContext`] for one call into a file's policy.
pub(super) struct EngineCtx<'a> {
    pub(super) engine: &'a EngineParts,
    pub(super) file: &'a Arc<FileData>,
    pub(super) io_max: u64,
    pub(super) block_pages: u64,
    pub(super) refaults: u64,
    pub(super) ops: Vec<ReadOp>,
    /// Pages the driver has just copied out: cached, no need to look.
    pub(super) known_cached: PageRange,
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
            align_to_blocks(io, self.block_pages),
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

    fn first_touch_ns(&self) -> u64 {
        self.engine.core.cache.first_touch_ns()
    }
}
