//! `linux-2.6.0`: the readahead of Linux 2.6.0, as the paper's Figure 1 gives it (Pai,
//! Pulavarty, Cao, "Linux 2.6 performance improvement through readahead optimization", OLS
//! 2004, shared/seeds/002_cb27686ff0bbb5ba.txt), read literally.
//!
//! It is called once for every page a read touches. The state is an estimate of the next
//! readahead size, a current window (pages that serve the present requests) and an ahead
//! window (pages for the anticipated ones):
//!
//! * the first read of the file instance, if it is for page 0, sets the estimate to half the
//!   maximum; any other first read finds the estimate at zero;
//! * a page inside the current window (strictly: `start <= page < start + size`) grows the
//!   estimate by 2 (up to the maximum); a page outside shrinks it by 2, and at zero readahead
//!   shuts down. This is the "first miss" flaw: a file first read anywhere but page 0 shuts
//!   readahead down at once;
//! * a page that is the first of the ahead window makes the ahead window current;
//! * a page outside the current window scraps both windows and reads `estimate` pages from
//!   it as the new current window ("large current window": most of it is wasted on random
//!   reads);
//! * a page inside the current window with no ahead window reads `estimate` pages after the
//!   current window as the ahead window ("upfront" readahead, triggered by any page);
//! * a window whose pages were all cached shrinks the estimate by 1 ("first hit" flaw);
//! * when shut down, pages are read one at a time ("slow-read mode"); each page adjacent to
//!   the previous opens the window by one, any other closes it entirely, and once it is open
//!   by the maximum, readahead resumes with the maximum estimate. Requests of fewer pages than
//!   the maximum never resume it ("extremely slow slow-read mode").
//!
//! Paper calibration (shared/research/paper_calibration.md): with the paper's accounting this
//! reproduces Figures 4-10 provided the first read starts at page 0 in Figures 4, 7 and 9 and
//! after the first seek in the others; [`crate::paper`] runs it that way.

use super::{AppRead, Hint, IoRequest, Policy, RaContext};

/// The `linux-2.6.0` policy's per-file state.
#[derive(Clone, Debug)]
pub struct Linux260 {
    max: u64,
    bdi_max: u64,
    /// Estimated size of the next window.
    estimate: i64,
    shut_down: bool,
    cur_start: u64,
    /// Current window size; in slow-read mode, how far the window has opened.
    cur_size: u64,
    ahead_start: u64,
    ahead_size: u64,
    prev_page: Option<u64>,
    first_request: bool,
}

impl Linux260 {
    /// A fresh state with a maximum window of `max` pages.
    pub fn new(max: u64) -> Linux260 {
        Linux260 {
            max,
            bdi_max: max,
            estimate: 0,
            shut_down: false,
            cur_start: 0,
            cur_size: 0,
            ahead_start: 0,
            ahead_size: 0,
            prev_page: None,
            first_request: true,
        }
    }

    fn in_current_window(&self, page: u64) -> bool {
        self.cur_start <= page && page < self.cur_start + self.cur_size
    }

    fn shut_down(&mut self) {
        self.shut_down = true;
        self.cur_size = 0;
        self.ahead_size = 0;
    }

    /// Slow-read mode: count adjacent pages until the window is open by the maximum.
    fn slow_read(&mut self, page: u64) {
        if self.prev_page.map(|p| p + 1) == Some(page) {
            self.cur_size += 1;
        } else {
            self.cur_size = 0;
        }
        if self.cur_size >= self.max {
            self.shut_down = false;
            self.estimate = self.max as i64;
            self.cur_start = page + 1 - self.max;
            self.cur_size = self.max;
            self.ahead_size = 0;
        }
    }

    /// Read a window; if every page was cached already, shrink the estimate by one.
    fn read_window(&mut self, io: IoRequest, ctx: &mut dyn RaContext) {
        if io.pages == 0 {
            return;
        }
        if ctx.start_io(io) == 0 {
            self.estimate -= 1;
            if self.estimate <= 0 {
                self.shut_down();
            }
        }
    }

    fn on_page(&mut self, page: u64, first_page_of_read: bool, ctx: &mut dyn RaContext) {
        if self.shut_down {
            self.slow_read(page);
            return;
        }
        if self.first_request && first_page_of_read && page == 0 {
            self.estimate = (self.max / 2) as i64;
        }
        let hit = self.in_current_window(page);
        if hit {
            self.estimate = (self.estimate + 2).min(self.max as i64);
        } else {
            self.estimate -= 2;
            if self.estimate <= 0 {
                self.shut_down();
                return;
            }
        }
        if self.ahead_size > 0 && page == self.ahead_start {
            self.cur_start = self.ahead_start;
            self.cur_size = self.ahead_size;
            self.ahead_size = 0;
            return;
        }
        let estimate = self.estimate as u64;
        if !hit {
            self.cur_start = page;
            self.cur_size = estimate;
            self.ahead_size = 0;
            self.read_window(IoRequest::sync(page, estimate), ctx);
        } else if self.ahead_size == 0 {
            self.ahead_start = self.cur_start + self.cur_size;
            self.ahead_size = estimate;
            self.read_window(IoRequest::ahead(self.ahead_start, estimate), ctx);
        }
    }
}

impl Policy for Linux260 {
    fn name(&self) -> &'static str {
        "linux-2.6.0"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        for page in read.first_page()..read.end_page() {
            self.on_page(page, page == read.first_page(), ctx);
            if !ctx.is_cached(page) {
                ctx.start_io(IoRequest::sync(page, 1));
            }
            self.prev_page = Some(page);
        }
        self.first_request = false;
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
    name: "linux-2.6.0",
    about: "Linux 2.6.0: the paper's Figure 1, called once per page",
    make: Some(|c| Box::new(Linux260::new(c.ra_max_pages))),
};
