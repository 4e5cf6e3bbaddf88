//! The simulator's side of the one read loop (`policy::driving`): an application read in
//! modelled time. A page taken costs the reader `compute_ns_per_page`, after a stall until its
//! modelled data is ready; the reader's own requests go to the modelled device at the time it
//! reaches their first page. Under the kernel's LRU nothing is taken before the policy sees the
//! read (the kernel's reader marks pages accessed after its readahead); under the engine's
//! CLOCK the pages ready are, as the engine copies them.

use std::task::Poll;

use super::cache::{Eviction, Touched};
use super::metrics::Counters;
use super::{ReadWait, Simulator};
use crate::policy::{AppRead, IoRequest, RaContext, Reached, ReadDriver};
use crate::units::PageRange;

/// One application read through the simulator.
pub(super) struct SimRead<'s> {
    pub(super) sim: &'s mut Simulator,
    pub(super) handle: u32,
    pub(super) file: u32,
    /// The read's sequence number: a page loaded by it is no hit.
    pub(super) seq: u64,
    /// When the read was called, and the reader's clock since.
    pub(super) start_ns: u64,
    pub(super) now_ns: u64,
    pub(super) counters: Counters,
    /// The last page it waited for.
    pub(super) waited: u64,
    /// The pages taken before the policy saw the read, counted once it has.
    pub(super) copied: Vec<Touched>,
}

impl SimRead<'_> {
    /// The reader takes a page: a stall until it is ready, then its compute.
    fn account(&mut self, page: u64, touched: Touched) {
        let c = &mut self.counters;
        // A hit is a page ready when the reader reaches it, as the engine counts one: brought
        // in before this read, and not still in flight.
        if touched.loaded_seq < self.seq && touched.ready_ns <= self.now_ns {
            c.hit_pages += 1;
        }
        if touched.first_use {
            c.used_pages += 1;
        }
        if touched.ready_ns > self.now_ns {
            self.waited = page;
            c.stall_ns += touched.ready_ns - self.now_ns;
            self.now_ns = touched.ready_ns;
        }
        self.now_ns += self.sim.config.compute_ns_per_page;
    }

    /// The read is done: its figures go to its file, and its refaults to their policies.
    pub(super) fn finish(mut self, pages: PageRange) {
        let c = &self.counters;
        let fc = &mut self.sim.files[self.file as usize].counters;
        fc.first_ns.get_or_insert(self.start_ns);
        fc.pages_requested += pages.end - pages.first;
        fc.hit_pages += c.hit_pages;
        fc.used_pages += c.used_pages;
        fc.stall_ns += c.stall_ns;
        fc.last_ns = self.now_ns;
        // The oracle's plans are cut where reads waited only where the reader computes.
        if self.sim.oracle.is_some() && self.sim.config.compute_ns_per_page > 0 && c.stall_ns > 0 {
            self.sim.oracle_waits.push(ReadWait {
                file: self.file,
                read_end: pages.end,
                waited_page: self.waited,
                wait_ns: c.stall_ns,
            });
        }
        self.sim.now_ns = self.now_ns;
        self.sim.copied = std::mem::take(&mut self.copied);
        self.sim.deliver_thrash();
    }
}

impl ReadDriver for SimRead<'_> {
    fn take_ready(&mut self, pages: PageRange) -> (u64, bool) {
        if self.sim.cache.eviction() != Eviction::Clock {
            return (0, false);
        }
        // The pages cached, in flight in modelled time or not: the engine's synchronous
        // backend, the one held to every request (`tests/drivers.rs`), finds every page its
        // reads brought; taking only those ready in modelled time parts them under memory
        // pressure (9 of the 238 cases). A page in flight costs its stall when counted.
        let mut p = pages.first;
        while p < pages.end {
            match self.sim.cache.touch(self.file, p) {
                Some(t) => self.copied.push(t),
                None => break,
            }
            p += 1;
        }
        (p - pages.first, false)
    }

    fn show_policy(&mut self, read: AppRead, known_cached: PageRange) {
        let (busy, depth) = self.sim.device.busy_slots(self.sim.now_ns);
        let (open, mut ctx) = self.sim.policy_and_ctx(self.handle, self.file);
        ctx.known_cached = known_cached;
        if let Some(congested) = open.congestion.update(busy, depth, depth) {
            open.policy.on_congestion(congested);
        }
        open.policy.on_read(read, &mut ctx);
        ctx.cache.complete_reads();
        let copied = std::mem::take(&mut self.copied);
        for (i, &t) in copied.iter().enumerate() {
            self.account(known_cached.first + i as u64, t);
        }
        self.copied = copied;
    }

    fn reach(&mut self, page: u64) -> Reached {
        match self.sim.cache.touch(self.file, page) {
            Some(t) => {
                self.account(page, t);
                Reached::Taken { last: false }
            }
            None => Reached::Absent,
        }
    }

    fn read_run(&mut self, run: PageRange) -> Poll<()> {
        // One request for the run: its absent stretches each go to the device on their own, as
        // the engine claims them (`Ctx::start_io`).
        let (mut ctx, _) = self.sim.ctx_for(self.file, self.handle);
        ctx.now_ns = self.now_ns;
        ctx.start_io(IoRequest::sync(run.first, run.end - run.first));
        ctx.cache.complete_reads();
        assert!(
            ctx.cache.contains(self.file, run.first),
            "a page just read is cached"
        );
        Poll::Ready(())
    }

    fn cache_pages(&self) -> u64 {
        self.sim.cache.capacity() as u64
    }
}
