//! `linux-2.6.7`: the readahead of Linux 2.6.7, the paper's Figure 2 with its simplification
//! (Pai, Pulavarty, Cao, OLS 2004, shared/seeds/002_cb27686ff0bbb5ba.txt), in the shape of the
//! 2.6.7/2.6.8 `page_cache_readahead()` (shared/research/linux_readahead.md sections 2.2-2.3) with
//! the two rules that 2.6.8 later changed (shared/research/paper_calibration.md, item 3).
//!
//! Called once for every page a read touches, it keeps the 2.6.0 current and ahead windows and
//! the +2/-2 estimate, with the paper's fixes:
//!
//! * "first miss": the first access sets the estimate to half the maximum wherever it is;
//! * "first hit": the first window is never judged by whether it was cached;
//! * "slow read": when off, a non-adjacent page shrinks the slow-read window by one page
//!   instead of closing it; after the maximum's worth of adjacent pages readahead resumes;
//! * "adaptive readahead": it keeps a running average of the application's request size
//!   (`serial_cnt` counts adjacent pages; a jump folds it into `average`). A page outside the
//!   current window starts a new current window of `min(average, max)` pages, so random reads
//!   get about what they ask for, and an ahead window is read only when the effective average
//!   is strictly above the maximum, so only streams read ahead.
//!
//! A page found absent after all this (evicted before use) shrinks the estimate by 3
//! (`handle_ra_miss`), unless readahead is off, where it feeds the slow-read count. A window
//! whose pages were all cached shrinks the estimate by 1; at zero readahead turns off.
//!
//! 2.6.7, not 2.6.8: the new current window is `min(average, max)` (2.6.8: the effective
//! average), and re-enabling from slow-read mode keeps `average` (2.6.8 resets it to max/2).

use super::{AppRead, Hint, IoRequest, Policy, RaContext};

const MIN_PAGES: i64 = 4; // VM_MIN_READAHEAD, 16 KiB

/// The `linux-2.6.7` policy's per-file state.
#[derive(Clone, Debug)]
pub struct Linux267 {
    max: i64,
    bdi_max: i64,
    start: u64,
    size: u64,
    /// Estimate of the next window; 0 before the first access, -1 when readahead is off.
    next_size: i64,
    prev_page: i64,
    ahead_start: u64,
    ahead_size: u64,
    serial_cnt: i64,
    average: i64,
}

impl Linux267 {
    /// A fresh state with a maximum window of `max` pages.
    pub fn new(max: u64) -> Linux267 {
        let max = max as i64;
        Linux267 {
            max,
            bdi_max: max,
            start: 0,
            size: 0,
            next_size: 0,
            prev_page: -1,
            ahead_start: 0,
            ahead_size: 0,
            serial_cnt: 0,
            average: max / 2,
        }
    }

    /// The running-average update on each access: adjacent pages extend the current run; a
    /// jump folds the run into the average.
    fn update_average(&mut self, page: u64, preoffset: i64) {
        if page as i64 == preoffset + 1 {
            if self.serial_cnt <= 2 * self.max {
                self.serial_cnt += 1;
            }
        } else {
            let mut a = self.average;
            if a < self.serial_cnt {
                a += 1;
            }
            self.average = (a + self.serial_cnt) / 2;
            self.serial_cnt = 1;
        }
    }

    fn effective_average(&self) -> i64 {
        if self.serial_cnt > self.average {
            (self.serial_cnt + self.average + 1) / 2
        } else {
            self.average
        }
    }

    /// A window came back fully cached: shrink, or turn readahead off.
    fn check_ra_success(&mut self, actual: u64, orig_next_size: i64) {
        if actual == 0 {
            if orig_next_size > 1 {
                self.next_size = orig_next_size - 1;
                if self.ahead_size > 0 {
                    self.ahead_size = self.next_size as u64;
                }
            } else {
                self.next_size = -1;
                self.size = 0;
            }
        }
    }

    /// `page_cache_readahead(offset)` for one page.
    fn readahead(&mut self, page: u64, ctx: &mut dyn RaContext) {
        if page as i64 == self.prev_page && self.next_size != 0 {
            return;
        }
        if self.next_size == -1 {
            return;
        }
        let max = self.max;
        let orig = self.next_size;
        let first_access = self.next_size == 0;
        if first_access {
            self.next_size = max / 2;
            self.prev_page = page as i64;
            self.serial_cnt += 1;
        } else {
            let preoffset = self.prev_page;
            self.prev_page = page as i64;
            self.update_average(page, preoffset);
            if self.start <= page && page <= self.start + self.size {
                self.next_size += 2;
            } else {
                self.next_size -= 2;
            }
            self.next_size = self.next_size.min(max);
            if self.next_size <= 0 {
                self.next_size = -1;
                self.size = 0;
                return;
            }
            let in_window = self.start <= page && page < self.start + self.size;
            if in_window {
                if self.ahead_start == 0 && self.effective_average() > max {
                    self.ahead_start = self.start + self.size;
                    self.ahead_size = self.next_size as u64;
                    let actual = ctx.start_io(IoRequest::ahead(self.ahead_start, self.ahead_size));
                    self.check_ra_success(actual, orig);
                }
                return;
            }
            if self.ahead_size > 0 && page == self.ahead_start {
                self.start = self.ahead_start;
                self.size = self.ahead_size;
                self.ahead_start = 0;
                self.ahead_size = 0;
                return;
            }
            self.next_size = self.average.min(max);
        }
        // A new current window from this page.
        self.start = page;
        self.size = self.next_size.max(0) as u64;
        self.ahead_start = 0;
        self.ahead_size = 0;
        let actual = ctx.start_io(IoRequest::sync(page, self.size));
        if !first_access {
            self.check_ra_success(actual, orig);
        }
    }

    /// A page was absent after readahead.
    fn handle_ra_miss(&mut self, page: u64) {
        if self.next_size == -1 {
            let max = self.max as u64;
            if page as i64 != self.prev_page + 1 {
                self.size = self.size.saturating_sub(1);
            } else {
                self.size += 1;
                if self.size >= max {
                    self.start = page - max;
                    self.next_size = max as i64;
                    self.size = max;
                    self.ahead_start = 0;
                    self.ahead_size = 0;
                }
            }
            self.prev_page = page as i64;
        } else {
            self.next_size = (self.next_size - 3).max(MIN_PAGES);
        }
    }
}

impl Policy for Linux267 {
    fn name(&self) -> &'static str {
        "linux-2.6.7"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        for page in read.first_page()..read.end_page() {
            self.readahead(page, ctx);
            if !ctx.is_cached(page) {
                self.handle_ra_miss(page);
                ctx.start_io(IoRequest::sync(page, 1));
            }
        }
    }

    fn on_hint(&mut self, hint: Hint, ctx: &mut dyn RaContext) {
        // 2.6's fadvise: WILLNEED forces the range in without touching the window state;
        // RANDOM sets the maximum to 0 (no readahead), SEQUENTIAL doubles it.
        match hint {
            Hint::WillNeed { start_page, pages } => {
                ctx.start_io(IoRequest::ahead(start_page, pages));
            }
            Hint::Random => self.max = 0,
            Hint::Sequential => self.max = self.bdi_max * 2,
            Hint::Normal => self.max = self.bdi_max,
            Hint::DontNeed { .. } | Hint::Limit { .. } => {}
        }
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "linux-2.6.7",
    about: "Linux 2.6.7: the paper's Figure 2 with its simplification",
    make: Some(|c| Box::new(Linux267::new(c.ra_max_pages))),
};
