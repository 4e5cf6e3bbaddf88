//! `fixed`: a constant readahead distance, the simplest baseline.
//!
//! On every read, read what was asked (synchronously) and the next N pages after it (ahead),
//! whatever the access pattern. Pages already cached are skipped, so a sequential reader issues
//! roughly one N-page request per N pages read; a random reader wastes N pages per read. This is
//! what many userspace readers do by hand ("always prefetch the next block").

use super::{AppRead, Hint, IoRequest, Policy, RaContext};

/// The `fixed` policy.
#[derive(Clone, Copy, Debug)]
pub struct Fixed {
    ahead_pages: u64,
    limit_page: u64,
}

impl Fixed {
    /// Read `ahead_pages` pages after every read.
    pub fn new(ahead_pages: u64) -> Fixed {
        Fixed {
            ahead_pages,
            limit_page: u64::MAX,
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
        if end > start {
            ctx.start_io(IoRequest::ahead(start, end - start));
        }
    }

    fn on_hint(&mut self, hint: Hint, _ctx: &mut dyn RaContext) {
        if let Hint::Limit { end_page } = hint {
            self.limit_page = end_page;
        }
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "fixed",
    about: "read the request plus a fixed number of pages after it",
    make: Some(|c| Box::new(Fixed::new(c.fixed_pages))),
};
