//! `pratt`: Steven Pratt's "Simplified Readahead" (LKML RFC 23 Sep 2004, with Ram Pai), as
//! merged in Linux 2.6.11. Source: shared/seeds/001_bd002ed0d6b9b97c.txt and
//! shared/research/linux_readahead.md section 2.5.
//!
//! The redesign threw out the per-page averaging of 2.6.7-2.6.10. The readahead function is
//! now told the size of the request and is called once per request chunk (the caller calls it
//! when the reader reaches `next_index`, and advances by what it returns). It keeps a current
//! window (`start`, `size`) and an ahead window (`ahead_start`, `ahead_size`):
//!
//! * the first access is sequential only at page 0 (or right after a random read, once the
//!   state is off): the current window is `get_init_ra_size(req)` (the request rounded up to a
//!   power of two; a quarter of the maximum for small requests, else the maximum), and a
//!   request of at least the maximum also starts the ahead window at once;
//! * any access that does not follow the previous one turns readahead off and reads exactly
//!   the request (`min(req, max)` pages);
//! * a sequential access with no ahead window opens one right after the current window, sized
//!   `get_next_ra_size` (x4 while small, then x2, up to the maximum);
//! * when the request reaches into the ahead window, the ahead window becomes current and the
//!   next ahead window is started: one window of lead, pipelined.
//!
//! A cache miss inside a window (a page read ahead and evicted before use: thrashing) sets the
//! MISS flag, which makes the next window 2 pages smaller instead of larger ("thrashing is
//! handled by shrinking slowly"). 256 pages in a row found fully cached turn readahead off
//! (INCACHE) until the next miss. Ahead windows that do not block the reader are skipped when
//! the queue is congested. fadvise RANDOM sets the maximum to 0 (one page per call), SEQUENTIAL
//! doubles it.

use super::{AppRead, Hint, IoRequest, Policy, RaContext};

const MIN_PAGES: u64 = 4; // VM_MIN_READAHEAD, 16 KiB
const MAX_CACHE_HIT: u64 = 256; // VM_MAX_CACHE_HIT

/// The `pratt` policy's per-file state.
#[derive(Clone, Debug)]
pub struct Pratt {
    start: u64,
    /// Current window size; 0 before the first access, -1 when readahead is off.
    size: i64,
    ahead_start: u64,
    ahead_size: u64,
    miss: bool,
    in_cache: bool,
    cache_hit: u64,
    prev_page: i64,
    ra_pages: u64,
    bdi_ra_pages: u64,
    congested: bool,
    limit_page: u64,
}

impl Pratt {
    /// A fresh state with a maximum window of `ra_pages`.
    pub fn new(ra_pages: u64) -> Pratt {
        Pratt {
            start: 0,
            size: 0,
            ahead_start: 0,
            ahead_size: 0,
            miss: false,
            in_cache: false,
            cache_hit: 0,
            prev_page: -1,
            ra_pages,
            bdi_ra_pages: ra_pages,
            congested: false,
            limit_page: u64::MAX,
        }
    }

    fn ra_off(&mut self) {
        self.start = 0;
        self.miss = false;
        self.in_cache = false;
        self.size = -1;
        self.ahead_start = 0;
        self.ahead_size = 0;
    }

    /// 2.6.11's initial window: the request rounded up to a power of two, squared if tiny,
    /// a quarter of the maximum if small, else the maximum.
    fn get_init_ra_size(&self, req: u64) -> u64 {
        let max = self.ra_pages;
        let n = req.max(1).next_power_of_two();
        let size = if n <= max / 64 {
            n * n
        } else if n <= max / 4 {
            max / 4
        } else {
            max
        };
        size.min(max)
    }

    /// Next window after one of `cur` pages: two pages smaller after a miss, else x4 while
    /// small, then x2, up to the maximum.
    fn get_next_ra_size(&mut self, cur: u64) -> u64 {
        let max = self.ra_pages;
        let next = if self.miss {
            self.miss = false;
            cur.saturating_sub(2).max(MIN_PAGES)
        } else if cur < max / 16 {
            4 * cur
        } else {
            2 * cur
        };
        next.min(max)
    }

    /// Read a window; a non-blocking one is skipped when the queue is congested. Returns
    /// whether the window was read (and readahead is still on).
    fn blockable(&mut self, start: u64, pages: u64, block: bool, ctx: &mut dyn RaContext) -> bool {
        if !block && self.congested {
            return false;
        }
        let pages = pages.min(self.limit_page.saturating_sub(start));
        let io = if block {
            IoRequest::sync(start, pages)
        } else {
            IoRequest::ahead(start, pages)
        };
        let actual = ctx.start_io(io);
        self.check_ra_success(pages, actual)
    }

    fn check_ra_success(&mut self, nr_to_read: u64, actual: u64) -> bool {
        if actual == 0 {
            self.cache_hit += nr_to_read;
            if self.cache_hit >= MAX_CACHE_HIT {
                self.ra_off();
                self.in_cache = true;
                return false;
            }
        } else {
            self.cache_hit = 0;
        }
        true
    }

    /// `page_cache_readahead(offset, req_size)`: returns how many pages of the request it covered.
    fn page_cache_readahead(&mut self, offset: u64, req: u64, ctx: &mut dyn RaContext) -> u64 {
        let off = offset as i64;
        if off == self.prev_page && req == 1 && self.size != 0 {
            return 1;
        }
        let max = self.ra_pages;
        let mut newsize = req.min(max);
        if newsize == 0 || self.in_cache {
            self.prev_page = off;
            return 1;
        }
        let last = off + newsize as i64 - 1;
        if (self.size == 0 && offset == 0) || (self.size == -1 && self.prev_page == off - 1) {
            // First sequential access: the current window, and the ahead one for big requests.
            self.prev_page = last;
            let size = self.get_init_ra_size(newsize);
            self.size = size as i64;
            self.start = offset;
            if self.blockable(offset, size, true, ctx) && req >= max {
                self.ahead_size = self.get_next_ra_size(size);
                self.ahead_start = offset + size;
                let (s, n) = (self.ahead_start, self.ahead_size);
                self.blockable(s, n, true, ctx);
            }
            self.prev_page = last;
            return newsize;
        }
        if off != self.prev_page + 1 || self.size == 0 {
            // Random access: readahead off, read just the request.
            self.ra_off();
            self.prev_page = last;
            self.blockable(offset, newsize, true, ctx);
            self.prev_page = last;
            return newsize;
        }
        if self.ahead_start == 0 {
            // Sequential, no ahead window yet: open one after the current window.
            self.ahead_size = self.get_next_ra_size(self.size.max(0) as u64);
            self.ahead_start = self.start + self.size.max(0) as u64;
            let block = last as u64 >= self.ahead_start;
            let (s, n) = (self.ahead_start, self.ahead_size);
            if !self.blockable(s, n, block, ctx) {
                self.ahead_start = 0;
                self.ahead_size = 0;
                self.prev_page = last;
                return newsize;
            }
        }
        if last as u64 >= self.ahead_start {
            // The request reached the ahead window: it becomes current, start the next one.
            self.start = self.ahead_start;
            self.size = self.ahead_size as i64;
            self.ahead_start += self.ahead_size;
            self.ahead_size = self.get_next_ra_size(self.ahead_size);
            let block = last as u64 >= self.ahead_start;
            let (s, n) = (self.ahead_start, self.ahead_size);
            if !self.blockable(s, n, block, ctx) {
                self.ahead_start = 0;
                self.ahead_size = 0;
            }
        }
        newsize = newsize.max(1);
        self.prev_page = last;
        newsize
    }

    fn handle_ra_miss(&mut self) {
        self.miss = true;
        self.in_cache = false;
    }
}

impl Policy for Pratt {
    fn name(&self) -> &'static str {
        "pratt"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        // do_generic_mapping_read, 2.6.11: readahead per request chunk, then each page.
        let (first, last) = (read.first_page(), read.end_page());
        let mut next_index = first;
        let mut req_left = last - first;
        for index in first..last {
            if index == next_index && req_left > 0 {
                let covered = self
                    .page_cache_readahead(index, req_left, ctx)
                    .min(req_left);
                next_index += covered;
                req_left -= covered;
            }
            if !ctx.is_cached(index) {
                self.handle_ra_miss();
                ctx.start_io(IoRequest::sync(index, 1));
            }
        }
    }

    fn on_congestion(&mut self, congested: bool) {
        self.congested = congested;
    }

    fn on_hint(&mut self, hint: Hint, ctx: &mut dyn RaContext) {
        match hint {
            Hint::Normal => self.ra_pages = self.bdi_ra_pages,
            Hint::Sequential => self.ra_pages = self.bdi_ra_pages * 2,
            Hint::Random => self.ra_pages = 0,
            Hint::WillNeed { start_page, pages } => {
                ctx.start_io(IoRequest::ahead(start_page, pages));
            }
            Hint::DontNeed { .. } => {}
            Hint::Limit { end_page } => self.limit_page = end_page,
        }
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "pratt",
    about: "Steven Pratt's simplified readahead, as merged in 2.6.11",
    make: Some(|c| Box::new(Pratt::new(c.ra_max_pages))),
};
