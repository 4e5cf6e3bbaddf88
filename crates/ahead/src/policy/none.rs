//! `none`: no readahead at all.
//!
//! Reads exactly the pages the application asks for, in one synchronous request per contiguous
//! run of absent pages, and nothing else. It is the floor every readahead policy must beat on
//! sequential reads, and the ideal on random ones. With O_DIRECT this is what a database gets.

use super::{AppRead, IoRequest, Policy, RaContext};

/// The `none` policy: it has no state.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoReadahead;

impl Policy for NoReadahead {
    fn name(&self) -> &'static str {
        "none"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        ctx.start_io(IoRequest::sync(read.first_page(), read.page_count()));
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "none",
    about: "read exactly what is asked, nothing more",
    make: Some(|_| Box::new(NoReadahead)),
};
