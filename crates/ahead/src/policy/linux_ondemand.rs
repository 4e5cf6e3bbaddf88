//! `linux-ondemand`: today's Linux readahead (mm/readahead.c, on-demand readahead by Wu Fengguang,
//! 2.6.23+, as split into sync and async paths in 6.11), modelled with order-0 pages.
//! Source: shared/research/linux_readahead.md, section 1.
//!
//! The state is one window per open file: `start`, `size` and `async_size`, the last
//! `async_size` pages of the window being "ahead". The first of those ahead pages carries a
//! marker (PG_readahead). Readahead runs only on two events, found while walking the read's
//! pages as `filemap_read` does:
//!
//! * **A miss** (synchronous readahead, `page_cache_sync_ra`), with `req` = pages left in the read:
//!   - at page 0, for a read larger than the maximum, or right after the previous read
//!     (`index - prev_index <= 1`, with `prev_pos` the exclusive end byte of the previous read):
//!     a fresh window of `get_init_ra_size(req)` pages (x4 for tiny reads, x2 for small, else
//!     the maximum), with `size - req` (or half) of it ahead;
//!   - otherwise **context readahead**: count the cached pages just before the miss (the
//!     footprint of a stream that this file's shared state lost track of, e.g. one of several
//!     interleaved readers). If there are more than `req`, read `min(history + req, max)` pages
//!     with the marker on the last; if the history runs back to page 0, double it first;
//!   - otherwise a lone random read: exactly `req` pages, no marker, state untouched.
//! * **A marker hit** (asynchronous readahead, `page_cache_async_ra`): if the marker is where this
//!   state expects its own (`start + size - async_size`) the window moves on and grows
//!   (`get_next_ra_size`: x4 while small, x2 up to max); otherwise it is another stream's marker
//!   and the window restarts at the first hole after it, sized from the distance. The whole new
//!   window is ahead, so its first page carries the next marker: one window is always in flight.
//!
//! Markers are placed only on pages the window newly brings in; cached pages are skipped, so a
//! fully cached file costs nothing. Backward and strided reads get no readahead beyond what
//! the `prev_pos` test lets through. Hints follow `fadvise`: SEQUENTIAL doubles the maximum,
//! RANDOM reads exactly what is asked on a miss (markers still fire), WILLNEED reads the range
//! capped at the larger of the maximum window and the device's largest I/O. Large folios and
//! their alignment trim are not modelled yet (issue 3).

use super::{AppRead, Hint, IoRequest, Policy, RaContext};

/// The `linux-ondemand` policy's per-file state (`struct file_ra_state`).
#[derive(Clone, Debug)]
pub struct LinuxOndemand {
    start: u64,
    size: u64,
    async_size: u64,
    /// Per-file maximum window (`ra->ra_pages`); fadvise SEQUENTIAL doubles it.
    ra_pages: u64,
    /// The device's default maximum (`bdi->ra_pages`).
    bdi_ra_pages: u64,
    /// Largest single I/O (`bdi->io_pages`).
    io_pages: u64,
    /// Exclusive end byte of the previous read; `None` before the first (the kernel's -1).
    prev_pos: Option<u64>,
    /// `FMODE_RANDOM` (fadvise RANDOM).
    random: bool,
}

impl LinuxOndemand {
    /// A fresh state with a maximum window of `ra_pages` and largest I/O of `io_pages`.
    pub fn new(ra_pages: u64, io_pages: u64) -> LinuxOndemand {
        LinuxOndemand {
            start: 0,
            size: 0,
            async_size: 0,
            ra_pages,
            bdi_ra_pages: ra_pages,
            io_pages,
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

    /// Submit the current window, with the marker on its first ahead page. `sync`: the
    /// reader is waiting for the window's first page.
    fn submit_window(&self, sync: bool, ctx: &mut dyn RaContext) {
        let mark = self.start + self.size - self.async_size;
        let io = if sync {
            IoRequest::sync(self.start, self.size)
        } else {
            IoRequest::ahead(self.start, self.size)
        };
        ctx.start_io(io.with_marker(mark));
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
            self.submit_window(true, ctx);
            return;
        }
        // Context readahead: the cached history right before the miss.
        let (contig, from_page_zero) = history_before(index, max, ctx);
        if contig <= req {
            ctx.start_io(IoRequest::sync(index, req));
            return;
        }
        let contig = if from_page_zero { contig * 2 } else { contig };
        self.start = index;
        self.size = (contig + req).min(max);
        self.async_size = 1;
        self.submit_window(true, ctx);
    }

    /// Asynchronous readahead: the reader touched a marker at `index`, `req` pages left.
    fn async_ra(&mut self, index: u64, req: u64, ctx: &mut dyn RaContext) {
        if self.ra_pages == 0 {
            return;
        }
        let max = self.max_pages(req);
        let expected = self.start + self.size - self.async_size;
        if self.size != 0 && index == expected {
            self.start += self.size;
            self.size = self.size.max(get_next_ra_size(self.size, max));
        } else {
            // Another stream's marker, or lost state: restart after the cached run.
            let start = next_miss(index + 1, max, ctx);
            if start == 0 || start - index > max {
                return;
            }
            self.start = start;
            self.size = get_next_ra_size(start - index + req, max);
        }
        self.async_size = self.size;
        self.submit_window(false, ctx);
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

/// `page_cache_prev_miss`: cached pages right before `index` (at most `max`), and whether they
/// run back to page 0.
fn history_before(index: u64, max: u64, ctx: &dyn RaContext) -> (u64, bool) {
    let mut contig = 0;
    while contig < max {
        if contig == index {
            return (contig, true);
        }
        if !ctx.is_cached(index - 1 - contig) {
            break;
        }
        contig += 1;
    }
    (contig, false)
}

/// `page_cache_next_miss`: the first absent page in `[from, from+max)`, else `from+max`.
/// Pages past the end of the file are absent.
fn next_miss(from: u64, max: u64, ctx: &dyn RaContext) -> u64 {
    let end = from + max;
    let mut p = from;
    while p < end && ctx.is_cached(p) {
        p += 1;
    }
    p
}

/// `force_page_cache_ra`: read exactly `[index, index+nr)`, capped at `cap` pages, no marker.
fn force_ra(index: u64, nr: u64, cap: u64, ctx: &mut dyn RaContext) {
    const CHUNK_PAGES: u64 = (2 << 20) / crate::units::PAGE_SIZE;
    let nr = nr.min(cap.max(1));
    let mut done = 0;
    while done < nr {
        let n = (nr - done).min(CHUNK_PAGES);
        ctx.start_io(IoRequest::sync(index + done, n));
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
                    // filemap_create_folio: one page, read synchronously.
                    ctx.start_io(IoRequest::sync(index, 1));
                }
            }
            // The read batch runs over present pages and ends at (and includes) a marker.
            while index < last && ctx.is_cached(index) {
                if ctx.has_marker(index) {
                    ctx.clear_marker(index);
                    self.async_ra(index, last - index, ctx);
                    index += 1;
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
