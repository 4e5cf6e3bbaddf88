//! Windows: how large a stream's next window is (`Sizing`, `bet`, the caps memory sets) and
//! the top-ups that read it ahead, forward, backward or along a stride, in requests of at most
//! the device's largest I/O (the module comment of `adaptive` gives the rules).

use super::*;

/// Whether the file is no larger than its share of the whole cache (twice its readahead
/// budget: the half kept for pages already used included), so all of it can be cached at once.
pub(super) fn fits_cache_whole(ctx: &dyn RaContext) -> bool {
    ctx.file_pages() <= ctx.readahead_budget().saturating_mul(2)
}

/// Pages that must stay ahead of a reader whose window is `window`: at least the window, what
/// the device needs in flight, at most `cap`.
pub(super) fn lead(window: u64, device_lead: u64, cap: u64) -> u64 {
    window.max(device_lead).min(cap).max(1)
}

/// The first page at or after `from` that is cached, or `to`.
fn hole_end(ctx: &dyn RaContext, from: u64, to: u64) -> u64 {
    (from..to).find(|&p| ctx.is_cached(p)).unwrap_or(to.max(from))
}

/// The most one stream may read in one top-up (`window`) and keep ahead of its reader
/// (`lead`), in pages.
#[derive(Clone, Copy, Debug)]
pub(super) struct Caps {
    pub(super) window: u64,
    pub(super) lead: u64,
}

/// What sizes a stream's next window: the device's costs and the application's hint.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sizing {
    /// The least a window may be (within its cap): `Adaptive::window_floor`.
    pub(super) floor: u64,
    pub(super) miss_cost: u64,
    pub(super) sequential: bool,
}

impl Sizing {
    /// Grow a stream's window for its next top-up. The first is sized from the read, the next
    /// double it, but none smaller than `floor` (what one request costs the device, a seek's
    /// worth of pages on a disk), so no window pays more for its request than for its pages.
    pub(super) fn next_window(self, st: &Stream, cap: u64) -> u64 {
        let floor = self.floor;
        if st.window == 0 && self.sequential {
            // The application's word: a window four times the usual first, or what a miss
            // costs its reader if more (one round trip to an object store), the ramp after.
            (4 * get_init_ra_size(st.record.max(1), cap))
                .max(floor)
                .max(self.miss_cost)
                .min(cap)
        } else if st.window == 0 {
            get_init_ra_size(st.record.max(1), cap).max(floor.min(cap))
        } else {
            get_next_ra_size(st.window, cap).max(floor).min(cap)
        }
    }
}

impl Adaptive {
    /// The most stream `st` may have ahead: what it has shown (four times its pages so far, or
    /// one request's cost if more; 1/128 of them for a stride, or for any stream where betting
    /// has not paid; 1/[`LONE_BET`] of its span for a disk's lone stream), within `cap`.
    pub(super) fn bet(&self, st: &Stream, cap: u64) -> u64 {
        // A forward stream under a sequential hint has the application's word for it.
        if (self.sequential || self.read_whole()) && st.shape == Shape::Forward {
            return cap;
        }
        let shown = if st.shape == Shape::Stride {
            (st.used / STRIDE_BET).max(STRIDE_PRIOR)
        } else if self.conservative {
            st.used / STRIDE_BET
        } else {
            // No smaller than what one request costs the device (a smaller window would cost
            // more than its pages are worth), or, once a stream has continued, than what a miss
            // costs its reader (on an object store, a round trip's worth of bandwidth: ramping
            // up from less would pay a round trip per doubling), where it is the file's one
            // stream or the file fits its share of the cache whole (then nothing read ahead is
            // evicted before its reader comes, and all the streams' windows together are at
            // most the file). Elsewhere many streams ramp as usual: their windows together must
            // fit the cache. Continued twice: two reads in a row can be chance among random ones.
            // Once bets past a miss have won in this file (its new streams do go on), one
            // continuation is enough where the file fits its share of the cache: threads
            // taking turns each show theirs a round trip apart.
            let shown_enough = st.run >= 2
                || (st.run >= 1 && self.fits_cache_whole && self.bets.won > 0);
            let floor = if shown_enough && (self.active_streams() == 1 || self.fits_cache_whole) {
                // No less than the ramp's floor either (four seeks' worth on a disk with
                // other streams live: `Adaptive::window_floor`).
                self.miss_cost.max(self.window_floor())
            } else {
                self.request_cost
            };
            if self.lone_on_disk(st) {
                // A disk's lone stream, contiguous so far: continuing requests do not seek,
                // so a small window costs only its command, and what is ahead when the
                // reader stops or skips is waste. A sixteenth of what it has passed over,
                // no less than two of its reads (one may straddle a window's end) or twice
                // what the device needs in flight.
                (st.reach.saturating_sub(st.origin) / LONE_BET)
                    .max(2 * st.record)
                    .max(2 * self.device_lead)
            } else {
                (4 * st.used.max(st.record)).max(floor)
            }
        };
        cap.min(shown)
    }

    /// Whether stream `st` is a disk's lone stream (see [`LONE_BET`]): a forward stream that
    /// has continued twice, read no gap and made no skip (not even within what it read
    /// ahead: readers taking turns over one window look like one stream skipping about), the
    /// file's only live stream, on a device that seeks ([`Self::seeks`]). Not on an SSD or an
    /// object store, where a smaller window costs a request's latency; not where other
    /// streams are live, whose requests come between and make each window seek.
    fn lone_on_disk(&self, st: &Stream) -> bool {
        st.shape == Shape::Forward
            && st.run >= 2
            && st.skip == 0
            && st.run_start == st.origin
            && self.seeks()
            && self.live_streams() == 1
    }

    /// Whether a request that does not continue the last one costs the device eight times what
    /// keeps it busy: a seek (a disk), not an SSD's latency or an object store's round trip.
    pub(super) fn seeks(&self) -> bool {
        self.request_cost > 8 * self.device_lead
    }

    /// The largest window and lead one stream may have. The window is the configured maximum
    /// (or, where a request costs the device more than that window's transfer, a seek's or a
    /// queue slot's worth of pages four times over, so a request's cost is amortized), within
    /// half the file's budget shared among its streams, and the cap thrashing left. The lead
    /// follows the device (what it needs in flight) within the rest of three quarters of that
    /// share.
    pub(super) fn stream_caps(&self, ctx: &dyn RaContext) -> Caps {
        let share = (self.ahead_budget(ctx) / self.active_streams()).max(1);
        let window = self
            .ra_max
            .max(4 * self.request_cost)
            .min(share / 2)
            .min(self.thrash_cap)
            .max(1);
        // A top-up brings in a window when less than the lead is ahead: both within three
        // quarters of the share. (A page read ahead is passed in the cache's LRU order by what
        // comes in after it and by what the reader touches before it, twice what is ahead: a
        // full share would have the cache evict it at the margin.)
        let lead = (share.saturating_mul(3) / 4)
            .saturating_sub(window)
            .min(self.thrash_cap)
            .max(window);
        Caps { window, lead }
    }

    /// Pages this file's streams may hold read ahead together: the driver's readahead budget,
    /// or, for a file no larger than its share of the whole cache (twice that budget, the half
    /// kept for pages already used included), all of that share: every page of the file fits
    /// at once, so nothing read ahead can be evicted by the file's own reads before its reader
    /// comes, and the historical kernels' windows, which take the whole cache, would not beat
    /// it there.
    pub(super) fn ahead_budget(&self, ctx: &dyn RaContext) -> u64 {
        let budget = ctx.readahead_budget();
        if fits_cache_whole(ctx) {
            budget.saturating_mul(2)
        } else {
            budget
        }
    }

    /// Whether a gap of `gap` pages between records of `record` pages is read through: it is
    /// cheaper than a separate request and wastes at most 1%, or a separate request costs the
    /// device four times what the gap's pages do (a seek on a disk, a round trip to a store),
    /// whatever it wastes.
    pub(super) fn reads_through(&self, gap: u64, record: u64) -> bool {
        gap > 0 && (gap < self.request_cost && gap * 100 <= record || 4 * gap <= self.request_cost)
    }

    /// Whether what is ahead of stream `i`'s reader is counted in the pages of its runs, not
    /// as the distance to its frontier: where its windows follow its runs and skips, each run
    /// at least the largest request (so following them costs no more requests than reading
    /// in order). What must stay ahead of a reader that skips is the runs it will read:
    /// counted as the distance, a reader of 48 MiB runs and 17 MiB skips kept a quarter less
    /// in flight than a reader in order, and waited at the start of every third run
    /// (docs/bench-log/issue-48-mount.md, session 42). Where runs are smaller than a request
    /// (a fragmented table's pages, a few at a time), each window is a small request of its
    /// own, and keeping more of them ahead cost more than it brought (the recorded sqlite3
    /// scan of a fragmented table, `tests/recorded_traces.rs`, twice as slow).
    pub(super) fn counts_runs(&self, i: usize) -> bool {
        self.follows_period(i) && self.streams[i].period_run >= self.io_max
    }

    /// Whether stream `i`'s windows follow its runs and skips: not where a skip is cheaper to
    /// read through than to jump with another request (a disk's seek over a few pages), as a
    /// stride's gap is not.
    pub(super) fn follows_period(&self, i: usize) -> bool {
        let st = &self.streams[i];
        !self.reads_through(st.period_skip, st.period_run)
    }

    /// Start I/O `[start, start + pages)` of `kind`, clipped at the limit, in requests of at
    /// most the largest I/O (the first at least `whole` pages: a read is never split). The
    /// marker goes on the first page. Returns pages newly brought in.
    pub(super) fn issue(
        &self,
        ctx: &mut dyn RaContext,
        kind: IoKind,
        start: u64,
        pages: u64,
        whole: u64,
    ) -> u64 {
        let end = start
            .saturating_add(pages)
            .min(self.limit)
            .min(ctx.file_pages());
        let mut p = start;
        let mut started = 0;
        let mut first = true;
        while p < end {
            let n = if first {
                self.io_max.max(whole)
            } else {
                self.io_max
            }
            .min(end - p);
            let mut io = IoRequest::of_kind(if first { kind } else { IoKind::Ahead }, p, n);
            if first {
                io = io.with_marker(p);
            }
            started += ctx.start_io(io);
            first = false;
            p += n;
        }
        started
    }

    /// Read ahead for stream `i` after its read `(s, e)`, if the reader reached the marker.
    pub(super) fn top_up(&mut self, i: usize, s: u64, e: u64, ctx: &mut dyn RaContext) {
        let caps = self.stream_caps(ctx);
        let st = self.streams[i];
        let missed = !ctx.is_cached(s);
        // A congested queue defers the top-up while what is ahead still covers the reader's
        // next read; what the reader would wait for is never deferred.
        if self.congested && !missed && st.ahead_pages() >= 2 * st.record {
            return;
        }
        let mut caps = if st.shape == Shape::Unknown {
            caps
        } else {
            Caps {
                window: self.bet(&st, caps.window).max(1),
                lead: self.bet(&st, caps.lead).max(1),
            }
        };
        // A proven forward stream whose reads are larger than the window still keeps its next
        // read ahead: the window is one read.
        if st.shape == Shape::Forward
            && st.run > 0
            && caps.window < st.record
            && st.record <= caps.lead
        {
            caps.window = st.record;
        }
        if caps.window < st.record {
            // A bet smaller than one of the reader's records would not hold its next read, only
            // split it in two requests (the pages ahead and the rest): read what it asks for.
            if missed && st.shape != Shape::Unknown {
                let started = self.issue(ctx, IoKind::Sync, s, e - s, e - s);
                self.account(started, 0);
            }
            return;
        }
        let started = match st.shape {
            Shape::Forward => self.top_up_forward(i, s, e, caps, missed, ctx),
            Shape::Backward => self.top_up_backward(i, s, e, caps, missed, ctx),
            Shape::Stride => self.top_up_stride(i, s, e, caps, missed, ctx),
            Shape::Unknown => None,
        };
        let Some(started) = started else { return };
        self.account(started, 0);
        let st = &mut self.streams[i];
        if started == 0 {
            st.idle_topups += 1;
            if st.idle_topups >= CACHED_OFF_AFTER {
                st.cached = true;
                st.misses = 0;
                st.since_miss = 0;
            }
        } else {
            st.idle_topups = 0;
        }
        if self.thrash_cap != u64::MAX {
            self.clean_topups += 1;
            if self.clean_topups >= REGROW_EVERY {
                self.clean_topups = 0;
                self.thrash_cap += (self.thrash_cap / 8).max(1);
                if self.thrash_cap >= self.ra_max {
                    self.thrash_cap = u64::MAX;
                }
            }
        }
    }

    /// Whether stream `st`'s next window waits until the reader has used half of its first.
    /// Under a sequential hint the first window is the application's word, four times the
    /// guess, not what the reader has shown: a merge opens every run with the hint and reads a
    /// little of each before the next, and if each run's second window went out at once it
    /// would sit in the device's queue ahead of the next run's first read. Half the first
    /// window is still ahead when the next starts. Only where a request that does not continue
    /// the last costs the device little against the window (no seek: a disk's successor, sent
    /// later, would seek where sent now it would not).
    pub(super) fn defers_successor(&self, st: &Stream) -> bool {
        self.sequential
            && st.frontier <= st.origin + st.window.max(st.record)
            && 4 * self.request_cost <= st.window
    }

    pub(super) fn top_up_forward(
        &mut self,
        i: usize,
        s: u64,
        e: u64,
        caps: Caps,
        missed: bool,
        ctx: &mut dyn RaContext,
    ) -> Option<u64> {
        let (dl, sz) = (self.device_lead, self.sizing());
        let defer = self.defers_successor(&self.streams[i]);
        let follows = self.follows_period(i);
        let runs_only = self.counts_runs(i);
        let st = &mut self.streams[i];
        if st.frontier < st.reach {
            st.frontier = st.reach;
        }
        let window = sz.next_window(st, caps.window);
        // The marker: the next window starts when less than the lead for the window out now
        // is ahead (its first page reached), not the lead the next, larger window will want.
        let need = lead(
            if st.window > 0 { st.window } else { window },
            dl,
            caps.lead,
        );
        let need = if defer { need.div_ceil(2) } else { need };
        if !missed && st.run_pages(st.reach, st.frontier, runs_only) >= need {
            return None; // the marker is still ahead of the reader
        }
        if missed {
            // The reader waits: its read, and the first window if none is out, in one request.
            // The window counts from the read (as the kernel's initial window does); the next
            // one starts when the reader passes the marker.
            if st.frontier > e {
                // A hole in what was read ahead: a skip the period foretold that the reader
                // read into after all, or pages evicted. The reader waits either way; the
                // hole up to the next cached page comes in the same request (a window at
                // most), or every read through it would wait on its own.
                // A period that foretold a skip the reader did not make is no period; a read
                // within a run it foretells (one it has just grown to: `grow_run`) leaves it
                // standing, and the hole is filled to the run's end, not into the skip.
                let mut to = st.frontier.min(s + window.max(e - s));
                if follows && st.in_foretold_run(s, e) {
                    to = to.min(st.follow_period(s, to - s).end);
                } else if follows {
                    st.period_seen = 0;
                }
                let end = hole_end(ctx, e, to);
                return Some(self.issue(ctx, IoKind::Sync, s, end - s, e - s));
            }
            // The lead waits for the stream to continue, hinted or not: many files opened at
            // once with the hint (a merge) would each put their whole lead ahead of the next
            // file's first read. But where the hinted first window is less than a miss costs
            // (an object store's round trip), waiting for the second read would cost the
            // reader that round trip: the application's word is taken for it.
            let proven = st.run > 0 || (self.sequential && self.miss_cost > window);
            // A guess brings in one window counted from the read, or, when the memory budget
            // has shrunk the window to no more than the read (many files sharing the cache),
            // one window past it: else the guess would be no bet at all, and the next read
            // would wait too. (A window that the configured maximum or thrashing holds to the
            // read's size stays so.)
            let budget_bound = caps.window < self.ra_max.min(self.thrash_cap);
            let pages = if !proven && budget_bound && window <= e - s {
                (e - s) + window
            } else {
                (e - s).max(window)
            };
            // No further than the run's end, where runs and skips repeat, or than where
            // another reader began.
            let pages = if follows {
                st.follow_period(s, pages).len()
            } else {
                pages
            };
            let bound = self.partition_end(i);
            let pages = pages.min(bound.saturating_sub(s)).max(e - s);
            let st = &mut self.streams[i];
            st.frontier = s + pages;
            st.window = window;
            let started = self.issue(ctx, IoKind::Sync, s, pages, e - s);
            if !proven {
                // A guess (a file read from its start): one window, no lead yet.
                return Some(started);
            }
            return Some(started + self.lead_loop(i, window, caps, ctx));
        }
        Some(self.lead_loop(i, window, caps, ctx))
    }

    /// Where forward stream `i`'s readahead stops: the first page at which another forward
    /// stream began, ahead of `i`'s reader, and has read on from (u64::MAX if none). Readers
    /// that each began at their own place (threads reading a part each, the runs of a merge)
    /// end where the next began; the pages there were read once already, and if they are
    /// evicted, reading them again is a bet on a reader who has shown no sign of wanting
    /// them. Once `i`'s reader reads there, it goes on as before.
    pub(super) fn partition_end(&self, i: usize) -> u64 {
        let reach = self.streams[i].reach;
        self.streams
            .iter()
            .enumerate()
            .filter(|&(j, o)| {
                j != i && o.live && o.shape == Shape::Forward && o.origin + 1 >= reach && o.reach > o.origin + 1
            })
            .map(|(_, o)| o.origin + 1)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Start windows ahead of forward stream `i` until `lead` pages are ahead of its reader.
    pub(super) fn lead_loop(&mut self, i: usize, window: u64, caps: Caps, ctx: &mut dyn RaContext) -> u64 {
        let (dl, sz) = (self.device_lead, self.sizing());
        let mut window = window;
        let mut started = 0;
        // Where another reader began: the loop moves only this stream's frontier.
        let bound = self.partition_end(i);
        let follows = self.follows_period(i);
        let runs_only = self.counts_runs(i);
        loop {
            let st = &mut self.streams[i];
            let need = lead(st.window.max(window), dl, caps.lead);
            if st.run_pages(st.reach, st.frontier, runs_only) >= need {
                break;
            }
            if st.window > 0 {
                window = sz.next_window(st, caps.window);
            }
            let window_at = if follows {
                st.follow_period(st.frontier, window)
            } else {
                crate::units::PageRange::of_len(st.frontier, window)
            };
            let (from, pages) = (window_at.first, window_at.len());
            if from >= self.limit.min(ctx.file_pages()).min(bound) {
                break;
            }
            let pages = pages.min(bound - from);
            let st = &mut self.streams[i];
            st.frontier = from + pages;
            st.window = window;
            started += self.issue(ctx, IoKind::Ahead, from, pages, 0);
        }
        started
    }

    pub(super) fn top_up_backward(
        &mut self,
        i: usize,
        s: u64,
        e: u64,
        caps: Caps,
        missed: bool,
        ctx: &mut dyn RaContext,
    ) -> Option<u64> {
        let (dl, sz) = (self.device_lead, self.sizing());
        let st = &mut self.streams[i];
        if st.frontier > st.reach || st.window == 0 {
            st.frontier = st.reach;
        }
        let window = sz.next_window(st, caps.window);
        let need = lead(window, dl, caps.lead);
        if !missed && st.reach - st.frontier >= need {
            return None;
        }
        let mut started = 0;
        if missed {
            started += self.issue(ctx, IoKind::Sync, s, e - s, e - s);
        }
        let mut window = window;
        loop {
            let st = &mut self.streams[i];
            if st.frontier == 0
                || st.reach - st.frontier >= lead(st.window.max(window), dl, caps.lead)
            {
                break;
            }
            if st.window > 0 {
                window = sz.next_window(st, caps.window);
            }
            let from = st.frontier.saturating_sub(window);
            let pages = st.frontier - from;
            st.frontier = from;
            st.window = window;
            // Nearest pages first: the reader needs the top of the window soonest.
            let mut top = from + pages;
            while top > from {
                let n = self.io_max.min(top - from);
                if top - n < self.limit {
                    started += self.issue(ctx, IoKind::Ahead, top - n, n, 0);
                }
                top -= n;
            }
        }
        Some(started)
    }

    pub(super) fn top_up_stride(
        &mut self,
        i: usize,
        s: u64,
        e: u64,
        caps: Caps,
        missed: bool,
        ctx: &mut dyn RaContext,
    ) -> Option<u64> {
        let dl = self.device_lead;
        let mut started = 0;
        if missed {
            started += self.issue(ctx, IoKind::Sync, s, e - s, e - s);
        }
        // Readers taking turns over one file (threads each reading the next chunk) look like a
        // stride until the others read the gaps. A forward stride whose pages just before
        // this record have been read by others is one of them. If a forward stream already
        // follows this place, the stride was only its echo and goes; otherwise it becomes the
        // forward stream.
        let st = self.streams[i];
        if st.delta > st.record as i64 && s >= 2 && ctx.is_cached(s - 1) && ctx.is_cached(s - 2) {
            let followed = (0..STREAMS).any(|j| {
                j != i
                    && self.streams[j].shape == Shape::Forward
                    && matches!(
                        self.streams[j].join(s, e, self.tick),
                        Some(Join::Continues | Join::InWindow)
                    )
            });
            if followed {
                self.streams[i] = Stream::EMPTY;
                return Some(started);
            }
            let st = &mut self.streams[i];
            // Its frontier ran along the stride; as a forward stream nothing is ahead yet.
            st.shape = Shape::Forward;
            st.reach = e;
            st.frontier = e;
            st.window = 0;
            st.delta = 0;
            return Some(started + self.top_up_forward(i, s, e, caps, false, ctx).unwrap_or(0));
        }
        let st = &mut self.streams[i];
        let next = st.first as i64 + st.delta;
        let behind = if st.delta > 0 {
            (st.frontier as i64) < next
        } else {
            (st.frontier as i64) > next
        };
        if behind {
            st.frontier = next.max(0) as u64;
        }
        // `cap` already holds the bet (1/128 of what the stream has used); the lead caps it too.
        let allowed = lead(caps.window.min(st.record * 4), dl, caps.window);
        let records = allowed / st.record.max(1);
        let ahead = st.records_ahead();
        if ahead >= records || ahead > records / 2 && !missed {
            return if missed { Some(started) } else { None };
        }
        st.window = records * st.record;
        let (record, delta) = (st.record, st.delta);
        let end = self.limit.min(ctx.file_pages());
        for _ in ahead..records {
            let st = &mut self.streams[i];
            let from = st.frontier;
            if from >= end {
                break;
            }
            let next = from as i64 + delta;
            if next < 0 {
                st.frontier = from;
                break;
            }
            st.frontier = next as u64;
            started += self.issue(ctx, IoKind::Ahead, from, record, record);
            if delta < 0 && from == 0 {
                break;
            }
        }
        Some(started)
    }
}
