//! `linux-ondemand`: today's Linux readahead (mm/readahead.c and mm/filemap.c as of 6.16-6.18:
//! on-demand readahead by Wu Fengguang, 2.6.23+, split into sync and async paths in 6.11, with
//! large folios and their order ramp from 6.16). Source: shared/research/linux_readahead.md,
//! section 1, checked window for window against a live 6.18 kernel's readahead tracepoints
//! (`ahead compare`, crates/ahead/tests/kernel_fidelity.rs).
//!
//! The state is one window per open file: `start`, `size` and `async_size`, the last
//! `async_size` pages of the window being "ahead", plus `order`, the folio order the last window
//! asked for. The folio holding the first ahead page carries a marker (PG_readahead).
//! Readahead runs only on two events, found while walking the read's folios as `filemap_read`
//! does:
//!
//! * **A miss** (synchronous readahead, `page_cache_sync_ra`), with `req` = pages left in the read:
//!   - at page 0, for a read larger than the maximum, or right after the previous read
//!     (`index - prev_index <= 1`, with `prev_pos` the exclusive end byte of the previous read):
//!     a fresh window of `get_init_ra_size(req)` pages (x4 for tiny reads, x2 for small, else
//!     the maximum), with `size - req` (or half) of it ahead, in single pages (order 0);
//!   - otherwise **context readahead**: count the cached pages just before the miss (the
//!     footprint of a stream that this file's shared state lost track of, e.g. one of several
//!     interleaved readers). If there are more than `req`, read `min(history + req, max)` pages
//!     with the marker on the last; if the history runs back to page 0, double it first;
//!   - otherwise a lone random read: exactly `req` pages, no marker, state untouched.
//! * **A marker hit** (asynchronous readahead, `page_cache_async_ra`) at the marked folio's first
//!   page: if that is where this state expects its own marker (`start + size - async_size`,
//!   rounded down to the folio) the window moves on and grows (`get_next_ra_size`: x4 while
//!   small, x2 up to max); otherwise it is another stream's marker and the window restarts at the
//!   first hole after it, sized from the distance. Each async window asks for folios two orders
//!   larger than the last (`order += 2`), and its end is trimmed down to a multiple of that
//!   folio size (`1 << min(order, lowest set bit of max)`) so the next window starts aligned:
//!   with a 32-page maximum, 4 KiB reads see windows of 4, 8, 4, 8, 8, 16, 16, 32. The whole
//!   new window is ahead, so its first folio carries the next marker: one window always in
//!   flight.
//!
//! `page_cache_ra_order` then caps the order at the filesystem's largest folio, the window's
//! log2 size and 0 for a filesystem without large folios, and lays the window out in naturally
//! aligned folios. Markers are placed only on
//! folios the window newly brings in; cached pages are skipped, so a fully cached file costs
//! nothing. Backward and strided reads get no readahead beyond what the `prev_pos` test lets
//! through. Hints follow `fadvise`: SEQUENTIAL doubles the maximum, RANDOM reads exactly what is
//! asked on a miss (markers still fire), WILLNEED reads the range capped at the larger of the
//! maximum window and the device's largest I/O, in 2 MiB chunks.
//!
//! Every decision is noted (`RaContext::note_window`) where the kernel fires
//! `page_cache_ra_order` or, for reads that bypass it, `page_cache_ra_unbounded`.

use super::{AppRead, Hint, IoKind, IoRequest, Policy, RaContext, Window};

/// The `linux-ondemand` policy's per-file state (`struct file_ra_state`).
#[derive(Clone, Debug)]
pub struct LinuxOndemand {
    start: u64,
    size: u64,
    async_size: u64,
    /// Folio order the last window asked for (`ra->order`).
    order: u8,
    /// Per-file maximum window (`ra->ra_pages`); fadvise SEQUENTIAL doubles it.
    ra_pages: u64,
    /// The device's default maximum (`bdi->ra_pages`).
    bdi_ra_pages: u64,
    /// Largest single I/O (`bdi->io_pages`).
    io_pages: u64,
    /// Largest folio order of the filesystem (`mapping_max_folio_order`; 0: no large folios).
    max_folio_order: u8,
    /// Exclusive end byte of the previous read; `None` before the first (the kernel's -1).
    prev_pos: Option<u64>,
    /// `FMODE_RANDOM` (fadvise RANDOM).
    random: bool,
}

impl LinuxOndemand {
    /// A fresh state with a maximum window of `ra_pages`, largest I/O of `io_pages`, and folios
    /// of up to `max_folio_order`.
    pub fn new(ra_pages: u64, io_pages: u64, max_folio_order: u8) -> LinuxOndemand {
        LinuxOndemand {
            start: 0,
            size: 0,
            async_size: 0,
            order: 0,
            ra_pages,
            bdi_ra_pages: ra_pages,
            io_pages,
            max_folio_order,
            prev_pos: None,
            random: false,
        }
    }

    /// The current window: `(start, size, async_size)`.
    pub fn window(&self) -> (u64, u64, u64) {
        (self.start, self.size, self.async_size)
    }

    /// `ractl_max_pages`: oversize reads may use up to the device's largest I/O.
    fn max_pages(&self, req: u64) -> u64 {
        if req > self.ra_pages && self.io_pages > self.ra_pages {
            req.min(self.io_pages)
        } else {
            self.ra_pages
        }
    }

    /// `page_cache_ra_order`: read the current window in folios of up to `self.order`.
    fn ra_order(&mut self, kind: IoKind, ctx: &mut dyn RaContext) {
        let (start, size, async_size) = (self.start, self.size, self.async_size);
        ctx.note_window(Window {
            start,
            size,
            async_size,
        });
        if self.max_folio_order == 0 {
            self.order = 0;
            do_page_cache_ra(start, size, async_size, kind, false, ctx);
            return;
        }
        let file_pages = ctx.file_pages();
        if file_pages == 0 || start >= file_pages {
            return;
        }
        // The marker goes where the window says even when the window ends at EOF (6.18 does;
        // the marker of a window cut short by EOF falls past it and is never set). Touching it
        // opens a window past EOF that reads nothing, as the kernel's trace shows.
        let limit = (start + size - 1).min(file_pages - 1);
        let log2_size = 63 - size.leading_zeros() as u8;
        self.order = self.order.min(self.max_folio_order).min(log2_size);
        let io = IoRequest::of_kind(kind, start, limit - start + 1)
            .with_marker(start + size - async_size)
            .with_folio_order(self.order);
        ctx.start_io(io);
    }

    /// Synchronous readahead on a miss at `index` with `req` pages left in the read.
    fn sync_ra(&mut self, index: u64, req: u64, ctx: &mut dyn RaContext) {
        if self.ra_pages == 0 || self.random {
            let req = if self.ra_pages == 0 { 1 } else { req };
            force_ra(index, req, self.ra_pages.max(self.io_pages), ctx);
            return;
        }
        let max = self.max_pages(req);
        let prev_index = match self.prev_pos {
            Some(pos) => pos / crate::units::PAGE_SIZE,
            None => u64::MAX >> 12, // (u64)-1 >> PAGE_SHIFT
        };
        if index == 0 || req > max || index.wrapping_sub(prev_index) <= 1 {
            self.start = index;
            self.size = get_init_ra_size(req, max);
            self.async_size = if self.size > req {
                self.size - req
            } else {
                self.size >> 1
            };
        } else {
            // Context readahead: the cached history right before the miss.
            let miss = ctx.prev_miss(index - 1, max);
            let mut contig = index.wrapping_sub(miss).wrapping_sub(1);
            if contig <= req {
                // A lone small random read: exactly what was asked, state untouched.
                do_page_cache_ra(index, req, 0, IoKind::Sync, true, ctx);
                return;
            }
            if miss == u64::MAX {
                contig *= 2; // cached from page 0: a long stream
            }
            self.start = index;
            self.size = (contig + req).min(max);
            self.async_size = 1;
        }
        self.order = 0;
        self.ra_order(IoKind::Sync, ctx);
    }

    /// Asynchronous readahead: the reader touched the marked folio `folio_start..+folio_pages`,
    /// with `req` pages of the read left from the folio's start.
    fn async_ra(&mut self, folio_start: u64, folio_pages: u64, req: u64, ctx: &mut dyn RaContext) {
        if self.ra_pages == 0 {
            return;
        }
        let index = folio_start;
        let max = self.max_pages(req);
        let expected = (self.start + self.size - self.async_size) & !(folio_pages - 1);
        if index == expected {
            self.start += self.size;
            self.size = self.size.max(get_next_ra_size(self.size, max));
        } else {
            // Another stream's marker, or lost state: restart after the cached run.
            let start = ctx.next_miss(index + 1, max);
            if start == 0 || start - index > max {
                return;
            }
            self.start = start;
            self.size = get_next_ra_size(start - index + req, max);
        }
        self.order = self.order.saturating_add(2);
        let align = 1u64 << u32::from(self.order).min(max.trailing_zeros());
        let end = self.start + self.size;
        let aligned_end = end & !(align - 1);
        if aligned_end > self.start {
            self.size -= end - aligned_end;
        }
        self.async_size = self.size;
        self.ra_order(IoKind::Ahead, ctx);
    }
}

/// Initial window for a first read of `req` pages: 1-2 pages get 4x, small reads 2x, else max.
pub(crate) fn get_init_ra_size(req: u64, max: u64) -> u64 {
    let n = req.max(1).next_power_of_two();
    if n <= max / 32 {
        4 * n
    } else if n <= max / 4 {
        2 * n
    } else {
        max
    }
}

/// Next window after one of `cur` pages: x4 while small, x2 up to half the max, then max.
pub(crate) fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// `do_page_cache_ra`: read `nr` pages from `index` in single pages, the marker `lookahead`
/// pages before the end; clipped at EOF, where the marker is dropped. `note`: this is a decision
/// of its own (the kernel's `page_cache_ra_unbounded` event), not the fallback of a window
/// already noted.
fn do_page_cache_ra(
    index: u64,
    nr: u64,
    lookahead: u64,
    kind: IoKind,
    note: bool,
    ctx: &mut dyn RaContext,
) {
    let file_pages = ctx.file_pages();
    if file_pages == 0 || index >= file_pages {
        return;
    }
    let end_index = file_pages - 1;
    let (nr, lookahead) = if nr > end_index - index {
        (end_index - index + 1, 0)
    } else {
        (nr, lookahead)
    };
    if note {
        ctx.note_window(Window {
            start: index,
            size: nr,
            async_size: lookahead,
        });
    }
    let mut io = IoRequest::of_kind(kind, index, nr);
    if lookahead > 0 && lookahead <= nr {
        io = io.with_marker(index + nr - lookahead);
    }
    ctx.start_io(io);
}

/// `force_page_cache_ra`: read exactly `[index, index+nr)`, capped at `cap` pages, in 2 MiB
/// chunks, no marker.
fn force_ra(index: u64, nr: u64, cap: u64, ctx: &mut dyn RaContext) {
    const CHUNK_PAGES: u64 = (2 << 20) / crate::units::PAGE_SIZE;
    let nr = nr.min(cap.max(1));
    let mut done = 0;
    while done < nr {
        let n = (nr - done).min(CHUNK_PAGES);
        do_page_cache_ra(index + done, n, 0, IoKind::Sync, true, ctx);
        done += n;
    }
}

impl Policy for LinuxOndemand {
    fn name(&self) -> &'static str {
        "linux-ondemand"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        let last = read.end_page();
        let mut index = read.first_page();
        while index < last {
            if !ctx.is_cached(index) {
                self.sync_ra(index, last - index, ctx);
                if !ctx.is_cached(index) {
                    // filemap_create_folio: one page, read synchronously (no tracepoint).
                    ctx.start_io(IoRequest::sync(index, 1));
                }
                if !ctx.is_cached(index) {
                    // The driver could not bring it in (past the end of the file it knows, or
                    // evicted at once): the reader reads it itself; walking on never spins.
                    index += 1;
                    continue;
                }
            }
            // The read batch runs over present pages and ends at (and includes) a marker.
            while index < last && ctx.is_cached(index) {
                if ctx.has_marker(index) {
                    // filemap_readahead: the marked folio, from its first page.
                    let folio = ctx.folio_of(index);
                    let (folio_start, folio_pages) = (folio.first, folio.len());
                    ctx.clear_marker(index);
                    self.async_ra(folio_start, folio_pages, last - folio_start, ctx);
                    index = (folio_start + folio_pages).min(last).max(index + 1);
                    break;
                }
                index += 1;
            }
        }
        self.prev_pos = Some(read.end_byte().0);
    }

    fn on_hint(&mut self, hint: Hint, ctx: &mut dyn RaContext) {
        match hint {
            Hint::Normal => {
                self.ra_pages = self.bdi_ra_pages;
                self.random = false;
            }
            Hint::Sequential => {
                self.ra_pages = self.bdi_ra_pages * 2;
                self.random = false;
            }
            Hint::Random => self.random = true,
            Hint::WillNeed { start_page, pages } => {
                force_ra(start_page, pages, self.ra_pages.max(self.io_pages), ctx)
            }
            Hint::DontNeed { .. } | Hint::Limit { .. } => {}
        }
    }
}


/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "linux-ondemand",
    about: "today's Linux on-demand readahead with markers and context readahead",
    make: Some(|c| Box::new(LinuxOndemand::new(c.ra_max_pages, c.io_max_pages, c.folio_max_order))),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_and_next_sizes_match_the_kernel_tables() {
        // "1-2 page = 16k, 3-4 page 32k, 5-8 page = 64k, > 8 page = 128k"
        let init: Vec<u64> = [1, 2, 3, 4, 5, 8, 9, 32]
            .iter()
            .map(|&r| get_init_ra_size(r, 32))
            .collect();
        assert_eq!(init, [4, 4, 8, 8, 16, 16, 32, 32]);
        let next: Vec<u64> = [1, 2, 4, 8, 16, 17]
            .iter()
            .map(|&c| get_next_ra_size(c, 32))
            .collect();
        assert_eq!(next, [4, 4, 8, 16, 32, 32]);
        let init128: Vec<u64> = [1, 2, 4, 8, 16, 32, 33]
            .iter()
            .map(|&r| get_init_ra_size(r, 128))
            .collect();
        assert_eq!(init128, [4, 8, 16, 16, 32, 64, 128]);
    }
}
