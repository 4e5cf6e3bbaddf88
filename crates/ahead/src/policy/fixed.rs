//! `fixed`: a constant readahead distance, the simplest baseline.
//!
//! On every read, read what was asked (synchronously) and the next N pages after it (ahead),
//! whatever the access pattern. Pages already cached are skipped, so a sequential reader issues
//! roughly one N-page request per N pages read; a random reader wastes N pages per read. This is
//! what many userspace readers do by hand ("always prefetch the next block"). Like such a
//! reader, it remembers the range it has asked for ahead: a read in its first half asks only
//! for the pages past its end, not the whole distance again (the driver would walk every page
//! of the distance to find the few absent: with a distance of thousands of pages, a walk of
//! thousands of words for every small read). A read past the half asks for the whole distance
//! again, so pages the driver could not bring in (a full cache) or dropped since are asked for
//! again within half a distance, and the walks cost about two pages' worth a page read.

use super::{AppRead, Hint, IoRequest, Policy, RaContext};

/// The `fixed` policy.
#[derive(Clone, Copy, Debug)]
pub struct Fixed {
    ahead_pages: u64,
    limit_page: u64,
    /// The range asked for ahead since the reader entered it: `[asked_from, asked_to)`.
    asked_from: u64,
    asked_to: u64,
}

impl Fixed {
    /// Read `ahead_pages` pages after every read.
    pub fn new(ahead_pages: u64) -> Fixed {
        Fixed {
            ahead_pages,
            limit_page: u64::MAX,
            asked_from: 0,
            asked_to: 0,
        }
    }
}

impl Policy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        ctx.start_io(IoRequest::sync(read.first_page(), read.page_count()));
        let start = read.end_page();
        let end = start.saturating_add(self.ahead_pages).min(self.limit_page);
        // Within the first half of what was asked for already, only the pages past it.
        let half = self.asked_from.saturating_add(self.ahead_pages / 2);
        let from = if (self.asked_from..self.asked_to.min(half)).contains(&start) {
            self.asked_to
        } else {
            (self.asked_from, self.asked_to) = (start, start);
            start
        };
        if end > from {
            ctx.start_io(IoRequest::ahead(from, end - from));
            self.asked_to = end;
        }
    }

    fn on_hint(&mut self, hint: Hint, _ctx: &mut dyn RaContext) {
        match hint {
            Hint::Limit { end_page } => self.limit_page = end_page,
            // Advice may have dropped what was asked for (don't-need) or changed what is
            // wanted: ask for all of it again.
            _ => self.asked_to = self.asked_from,
        }
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "fixed",
    about: "read the request plus a fixed number of pages after it",
    make: Some(|c| Box::new(Fixed::new(c.fixed_pages))),
};
