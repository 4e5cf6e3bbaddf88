//! Speculation around random reads: when a random miss brings in the aligned block around it,
//! when the file is also read in order behind the random reads (the sweep), and the judge that
//! stops both when what they brought in is not read (the module comment of `adaptive`).

use super::*;

/// Speculation around random reads: a read that joins no stream and misses may bring in the
/// aligned block of `block` pages around it, when the reads so far say those pages will be read
/// (see the module comment).
#[derive(Clone, Copy, Debug)]
pub(super) struct Speculation {
    /// Pages a random miss brings in (a power of two; 0: only what is asked).
    pub(super) block: u64,
    /// Speculative pages issued, and speculated granules a read then found (each once).
    pub(super) issued: u64,
    pub(super) hits: u64,
    /// Pages of the reads that joined no stream and went back (twice: see `on_read`).
    pub(super) jump_pages: u64,
    /// First page of the file's last read.
    pub(super) last_first: u64,
    /// After speculation stopped, the jump pages at which the prior may start it again.
    pub(super) retry_at: u64,
    /// The jump pages at which what speculation earned is judged.
    pub(super) judge_at: u64,
    /// Where the in-order read of the whole file started, and how far it has gone.
    pub(super) sweep_from: u64,
    pub(super) swept: u64,
    /// Granules brought in by speculation.
    pub(super) marks: Marks,
    /// The ledger (in pages' worth of device time): what the reader's own random misses cost
    /// it, what speculation spent (its pages and its requests), and what it saved (the misses
    /// that found speculated pages instead). See [`Speculation::allowance`].
    pub(super) demand: u64,
    pub(super) spent: u64,
    pub(super) saved: u64,
}

/// A set of keys (pages, granules) hashed into 4096 bits: a key may be found that was never
/// put in (about one in 4096 per key in), which the judges that read it can afford.
#[derive(Clone, Copy, Debug)]
pub(super) struct Marks([u64; 64]);

impl Marks {
    pub(super) const EMPTY: Marks = Marks([0; 64]);

    /// The word and bit that mark `key`.
    fn bit(key: u64) -> (usize, u64) {
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52;
        ((h / 64) as usize, 1 << (h % 64))
    }

    pub(super) fn insert(&mut self, key: u64) {
        let (w, b) = Self::bit(key);
        self.0[w] |= b;
    }


    /// Take `key` out; whether it was in.
    pub(super) fn remove(&mut self, key: u64) -> bool {
        let (w, b) = Self::bit(key);
        let was = self.0[w] & b != 0;
        self.0[w] &= !b;
        was
    }
}

impl Speculation {
    pub(super) const OFF: Speculation = Speculation {
        block: 0,
        issued: 0,
        hits: 0,
        jump_pages: 0,
        last_first: 0,
        retry_at: 0,
        judge_at: u64::MAX,
        sweep_from: 0,
        swept: 0,
        marks: Marks::EMPTY,
        demand: 0,
        spent: 0,
        saved: 0,
    };

    /// Pages' worth of device time speculation may spend now: its net cost (what it spent less
    /// the misses it saved) stays within 1/[`SPEC_SHARE_DIV`] of what the reader's own misses
    /// have cost. A bet that loses costs the reader at most that share over reading only what
    /// it asks, at every moment (a run cut short sees no bet it paid for unrepaid); a bet that
    /// wins pays for the next, so a reader that keeps finding speculated pages has the file
    /// read ahead at a pace that compounds with what it finds.
    pub(super) fn allowance(&self) -> u64 {
        (self.demand / SPEC_SHARE_DIV + self.saved).saturating_sub(self.spent)
    }

    /// Whether `page`'s granule was brought in by speculation and not yet read: it is read
    /// now, and no longer counts.
    pub(super) fn take_mark(&mut self, page: u64) -> bool {
        self.marks.remove(page / SPEC_GRANULE)
    }

    /// Mark the granules of pages `start..end` as speculation's.
    pub(super) fn mark(&mut self, start: u64, end: u64) {
        let mut g = start / SPEC_GRANULE;
        while g * SPEC_GRANULE < end {
            self.marks.insert(g);
            g += 1;
        }
    }
}

/// Speculation's net cost is at most 1/`SPEC_SHARE_DIV` of the reader's own misses' (what
/// it has not earned back): a bet never costs a reader more than that share, however soon it
/// stops reading.
pub(super) const SPEC_SHARE_DIV: u64 = 16;

/// A sweep step is at least this many times the pages' worth of a request's cost
/// (`miss_cost`), so the request costs at most a sixteenth of the step.
const SWEEP_COST_SHARE: u64 = 16;

/// The largest power of two at most `n` (n > 0).
pub(super) fn prev_power_of_two(n: u64) -> u64 {
    1 << (63 - n.leading_zeros())
}

impl Adaptive {
    /// A read `(s, e)` that joins no stream: count what speculation brought in that it uses,
    /// and, if it misses and speculating pays, bring in the aligned block around it.
    pub(super) fn speculate(&mut self, s: u64, e: u64, ctx: &mut dyn RaContext) {
        if ctx.is_cached(s) {
            return; // a hit on a speculated granule was counted in `on_read`
        }
        let block = self.spec_block(ctx);
        if block == 0 {
            return;
        }
        // The miss brings in the aligned block around it that a miss's own cost pays for (twice
        // its pages' worth, at most the largest block): the sweep (below) brings in the rest
        // of the file, and a larger block would only hold the reader up on pages it does not
        // need yet.
        let block = (2 * self.miss_cost).next_power_of_two().min(block);
        // No larger than the ledger allows past the read itself.
        let allowed = self.pages_within(self.spec.allowance());
        let block = if block > (e - s) + allowed {
            prev_power_of_two(((e - s) + allowed).max(1))
        } else {
            block
        };
        let start = s & !(block - 1);
        let end = (start + block).max(e).min(self.limit).min(ctx.file_pages());
        if self.spec.swept == 0 {
            self.spec.sweep_from = end;
        }
        if end <= e && start == s {
            return;
        }
        let started = self
            .issue(ctx, IoKind::Sync, start, end - start, end - start)
            .saturating_sub(e - s);
        self.spec.mark(start, end);
        self.spec.issued += started;
        self.spec.spent += self.with_memory(started);
    }

    /// While speculation is on, the file is also read ahead in order, a step for each random
    /// read (a block, or what the device needs in flight or what makes its per-request cost
    /// small beside the step, if more), from the first speculated block on round to it: the
    /// whole file fits, the reads say it will be read, and in order is how the device streams
    /// it best. A little at a time keeps the queue short for the reads that miss.
    pub(super) fn sweep(&mut self, ctx: &mut dyn RaContext) {
        let block = self.spec.block;
        let last = self.limit.min(ctx.file_pages());
        if block == 0 || self.spec.swept >= last {
            return;
        }
        // A block, or what the device needs in flight if more (an object store's round trip),
        // or enough blocks that the request costs at most 1/`SWEEP_COST_SHARE` of their
        // transfer: on a disk each step seeks (a random miss's block lies between two), and
        // one block a step paid a seek per 4 MiB where the kernel's windows paid one per 8-16.
        let step = block
            .max(self.device_lead)
            .max((SWEEP_COST_SHARE * self.miss_cost).next_multiple_of(block))
            .min(last - self.spec.swept);
        if self.spec.allowance() < self.with_memory(step) + self.request_cost {
            // The ledger pays for no whole step: wait for more misses, or hits (a step in
            // pieces would pay a request for each).
            return;
        }
        let mut budget = step;
        while budget > 0 && self.spec.swept < last {
            let from = (self.spec.sweep_from + self.spec.swept) % last.max(1);
            let pages = block
                .min(budget)
                .min(last - from)
                .min(last - self.spec.swept);
            let started = self.issue(ctx, IoKind::Ahead, from, pages, 0);
            self.spec.mark(from, from + pages);
            self.spec.issued += started;
            self.spec.spent +=
                self.with_memory(started) + if started > 0 { self.request_cost } else { 0 };
            self.spec.swept += pages;
            budget -= pages;
        }
    }

    /// The block a random miss of `record` pages brings in now (0: none). Only a file that fits
    /// in its share of the cache is speculated on: every page brought in then stays until a read
    /// comes for it, and reading all of it is the most speculation can cost. A random miss costs
    /// the device and its reader `unit` pages' worth of time (its latency and its request), so
    /// speculative pages pay when at least one in `unit` is read later. Before any are, the
    /// reads so far are the guide: a page brought in now will be read about as often in the time
    /// to come as pages were in the time gone, and random reads have read `jump_pages` of the
    /// file's pages. Once that makes speculation pay, a miss brings in the largest aligned block
    /// (its own request's worth: the device's largest I/O, within half the budget). What the
    /// speculative pages earn is then the judge: once random reads have had time to come for
    /// them (a quarter of the file's pages read since the start), speculation stops if they earned
    /// less than half their cost, and is tried again only when the random reads have doubled.
    pub(super) fn spec_block(&mut self, ctx: &dyn RaContext) -> u64 {
        let file = ctx.file_pages().max(1);
        // What reading the file, and what speculation issued, cost with their memory.
        let (file_cost, issued_cost) = (self.with_memory(file), self.with_memory(self.spec.issued));
        let sp = &mut self.spec;
        let budget = ctx.readahead_budget();
        if !fits_cache_whole(ctx) {
            return 0;
        }
        let unit = self.miss_cost.max(1);
        if sp.block > 0 {
            if sp.jump_pages >= sp.judge_at {
                if 2 * sp.hits * unit < issued_cost {
                    sp.block = 0;
                    sp.retry_at = 2 * sp.jump_pages;
                }
                sp.judge_at = u64::MAX;
            }
        } else if sp.jump_pages >= sp.retry_at
            && sp.jump_pages.saturating_mul(2 * unit) >= file_cost
        {
            sp.block = prev_power_of_two(self.io_max.min(budget / 2).max(1));
            sp.judge_at = sp.jump_pages + file / 4;
        }
        sp.block
    }

    /// Count a read that joined no stream, and whether it landed on cached pages.
    pub(super) fn note_jump(&mut self, onto_cached: bool) {
        self.jumps += 1;
        self.jumps_onto_cached += onto_cached as u64;
        if self.jumps > 1 << 12 {
            self.jumps /= 2;
            self.jumps_onto_cached /= 2;
        }
    }

    /// Whether the file is being read whole in a scrambled order: it fits in its share of the
    /// cache, and jumps keep landing on pages read earlier (iozone's mix; a join over a table
    /// that fits in memory). Then nothing read ahead is lost (it stays until some read comes
    /// for it), and forward streams read ahead at full size, as the kernel's page cache does.
    pub(super) fn read_whole(&self) -> bool {
        self.file_fits && self.jumps_onto_cached >= 8 && self.jumps_onto_cached * 32 >= self.jumps
    }
}
