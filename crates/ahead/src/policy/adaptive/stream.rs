//! Streams: which stream of the file a read joins, and how joining moves it on (the module
//! comment of `adaptive` says what a stream is). Each stream is one reader's history: where
//! its last read was, its shape, and where its readahead stands.

use super::*;
use crate::units::PageRange;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// One read seen (or a stride candidate, when `delta` is set).
    Unknown,
    Forward,
    Backward,
    Stride,
}

/// How a read relates to a stream, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Join {
    Continues,
    InWindow,
    Repeats,
    /// A forward stream's reader skipped ahead past what was read ahead (a columnar scan, a
    /// reader seeking over what it does not need): the same stream, its window kept.
    Skips,
    /// A forward stream's reader, after a skip ahead, goes on from where it was before it:
    /// the skip was one read elsewhere.
    Returns,
    /// The read after a `Returns` goes on from the read the skip landed on: the skip was a
    /// skip after all, and the returning read a late one of the run before it (a kernel's
    /// readahead, its reads answered by several threads, sends them out of order).
    Resumes,
    /// A second read at the distance a stride candidate saw: the stride is confirmed.
    StrideConfirms,
    /// A first read at some distance from this stream's last: maybe a stride. It starts a new
    /// stream (the old one may still continue forward: interleaved readers look like a stride
    /// for one round).
    StrideCandidate,
}

/// A forward stream's state right after a skip: where its reader stood, its readahead, the
/// start of its run and the period the skip made.
#[derive(Clone, Copy, Debug)]
pub(super) struct SkipState {
    reach: u64,
    frontier: u64,
    run_start: u64,
    period_seen: u8,
    gap: PageRange,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Stream {
    pub(super) live: bool,
    pub(super) tick: u64,
    pub(super) shape: Shape,
    /// First page of the stream's first read.
    pub(super) origin: u64,
    /// First page of the last read.
    pub(super) first: u64,
    /// One past the last page of the last read.
    pub(super) end: u64,
    /// Forward: one past the furthest page read. Backward: the lowest page read.
    pub(super) reach: u64,
    /// Pages in the last read.
    pub(super) record: u64,
    /// Stride: page distance between read starts (signed).
    pub(super) delta: i64,
    /// Forward: pages of gap read through.
    pub(super) skip: u64,
    /// Forward: first page of the run of reads since the last skip ahead, and the run and skip
    /// the last skip made (`period_seen` times in a row): from the first, readahead follows
    /// it, stopping at each run's end and going on after the skip, until a run goes on longer.
    pub(super) run_start: u64,
    pub(super) period_run: u64,
    pub(super) period_skip: u64,
    pub(super) period_seen: u8,
    /// Whether this run has grown the period's run already (see [`Stream::grow_run`]).
    pub(super) run_grown: bool,
    /// The pages the last skip passed over: a read among them shows it was no skip (a
    /// shuffled scan comes back for them), and the period is forgotten.
    pub(super) gap: PageRange,
    /// Forward: where the stream stood before its last read skipped ahead (0: no skip
    /// pending). A next read that goes on from there shows the skip was a jump elsewhere and
    /// back (a B-tree scan reading an interior page): the stream goes on where it was.
    pub(super) before_skip: u64,
    /// The read (tick) that skipped: only the next read may return.
    pub(super) skip_tick: u64,
    /// Its frontier then (`None`: the skip was within what was read ahead, whose window
    /// stands), and the start of its run then.
    pub(super) frontier_before_skip: Option<u64>,
    pub(super) run_start_before_skip: u64,
    /// Whether that skip was noise (a gap of a record or two: two reads swapped): a return
    /// from it is the swapped read, and forgets only a period seen once.
    pub(super) skip_was_noise: bool,
    /// What a `Returns` undid, kept for the read after it only: a `Resumes` puts it back.
    pub(super) before_return: Option<SkipState>,
    /// Reads that continued the stream.
    pub(super) run: u32,
    /// Pages the stream's reads covered.
    pub(super) used: u64,
    /// Forward: first page not yet read ahead. Backward: lowest page read ahead. Stride: start
    /// of the next record not yet read ahead.
    pub(super) frontier: u64,
    /// Pages the next top-up reads (0: no window yet).
    pub(super) window: u64,
    pub(super) cached: bool,
    pub(super) idle_topups: u8,
    pub(super) misses: u8,
    pub(super) since_miss: u32,
}

impl Stream {
    pub(super) const EMPTY: Stream = Stream {
        live: false,
        tick: 0,
        shape: Shape::Unknown,
        origin: 0,
        first: 0,
        end: 0,
        reach: 0,
        record: 0,
        delta: 0,
        skip: 0,
        run_start: 0,
        period_run: 0,
        period_skip: 0,
        period_seen: 0,
        run_grown: false,
        gap: PageRange::new(0, 0),
        before_skip: 0,
        frontier_before_skip: None,
        run_start_before_skip: 0,
        skip_was_noise: false,
        before_return: None,
        skip_tick: 0,
        run: 0,
        used: 0,
        frontier: 0,
        window: 0,
        cached: false,
        idle_topups: 0,
        misses: 0,
        since_miss: 0,
    };

    pub(super) fn confirmed(&self) -> bool {
        self.shape != Shape::Unknown
    }

    /// Pages read ahead that the reader has not reached.
    pub(super) fn ahead_pages(&self) -> u64 {
        match self.shape {
            Shape::Unknown => 0,
            Shape::Forward => self.frontier.saturating_sub(self.reach),
            Shape::Backward => self.reach.saturating_sub(self.frontier),
            Shape::Stride => self.records_ahead() * self.record,
        }
    }

    /// Stride: records read ahead past the last one read.
    pub(super) fn records_ahead(&self) -> u64 {
        if self.delta == 0 {
            return 0;
        }
        let span = self.frontier as i64 - self.first as i64;
        (span / self.delta - 1).max(0) as u64
    }

    /// Forward: the reader skipped ahead to `s`: the run it ended and the skip, counted if
    /// the same as the last. Only a run of several reads, no shorter than the skip, counts:
    /// readers taking turns over one file, or records with small gaps between them, also jump
    /// ahead within what was read ahead, and are better served by reading through.
    pub(super) fn note_skip(&mut self, s: u64) -> bool {
        let reach = self.reach;
        let (run, skip) = (reach.saturating_sub(self.run_start), s.saturating_sub(reach));
        // A gap of a record or two is noise, not a skip: two records read in swapped order, a
        // B-tree scan's neighbouring pages. The run goes on through it.
        if skip <= 2 * self.record.max(1) {
            return false;
        }
        self.gap = PageRange::new(reach, s);
        self.run_grown = false;
        if run < skip.max(4 * self.record) {
            self.period_seen = 0;
        } else if (run, skip) == (self.period_run, self.period_skip) {
            self.period_seen = self.period_seen.saturating_add(1);
        } else if run + skip == self.period_run + self.period_skip
            && self.period_seen > 0
            && run.abs_diff(self.period_run) <= (run + skip) / 32
        {
            // The same period, its run longer or shorter by a read (a kernel's readahead read
            // past the run's end, or not: `grow_run`): the longer run is kept.
            self.period_seen = self.period_seen.saturating_add(1);
            self.period_run = self.period_run.max(run);
            self.period_skip = run + skip - self.period_run;
        } else {
            (self.period_run, self.period_skip, self.period_seen) = (run, skip, 1);
        }
        self.run_start = s;
        true
    }

    /// Forward: its reader skipped ahead to `s`: where the stream stood is kept for a next
    /// read that returns there, and whether the skip was noise (see `note_skip`); `frontier`
    /// is its readahead then (`None`: the skip landed within it, and it stands).
    fn skip_to(&mut self, s: u64, frontier: Option<u64>) {
        let (reach, run_start) = (self.reach, self.run_start);
        self.skip_was_noise = !self.note_skip(s);
        self.before_skip = reach;
        self.frontier_before_skip = frontier;
        self.run_start_before_skip = run_start;
        self.skip_tick = self.tick;
    }

    /// Forward: its reader read on to `e`, past the end of the run its period foretold. Once a
    /// run, by at most 1/32 of the period, the run grows to `e` (its skip shrinks as much)
    /// and the period stands: a kernel's readahead reads on a little past each run's end (a
    /// program reading through a mount), and whether that read comes before the reader's skip
    /// or after, or whether the run's reads start on the period's boundary or a part of a
    /// read past it, changes the run by a read. Else the runs do not repeat: the period is
    /// forgotten.
    pub(super) fn grow_run(&mut self, e: u64) {
        let end = self.run_start + self.period_run;
        let over = e.saturating_sub(end);
        let period = self.period_run.saturating_add(self.period_skip);
        if self.period_seen >= 1
            && !self.run_grown
            && over <= period / 32
            && over < self.period_skip
        {
            self.run_grown = true;
            self.period_run += over;
            self.period_skip -= over;
        } else {
            self.period_seen = 0;
        }
    }

    /// Forward: whether `[s, e)` lies within a run its period, repeated, foretells.
    pub(super) fn in_foretold_run(&self, s: u64, e: u64) -> bool {
        if self.period_seen < 2 || self.period_run == 0 || s < self.run_start {
            return false;
        }
        let run = self.follow_period(s, e - s);
        run.first == s && run.end >= e
    }

    /// Forward: where a window of `pages` from `from` goes once the stream has made a skip:
    /// past the skip if `from` falls in one, and no further than its run's end.
    pub(super) fn follow_period(&self, from: u64, pages: u64) -> PageRange {
        if self.period_seen < 1 || self.period_run == 0 || from < self.run_start {
            return PageRange::of_len(from, pages);
        }
        let period = self.period_run.saturating_add(self.period_skip);
        let off = (from - self.run_start) % period;
        let (from, off) = if off >= self.period_run {
            (from + period - off, 0)
        } else {
            (from, off)
        };
        PageRange::of_len(from, pages.min(self.period_run - off).max(1))
    }

    /// Forward: the pages in `[from, to)` its reader will read: with `runs_only` (its windows
    /// follow a period: see [`Adaptive::counts_runs`]) and a period that has repeated (the
    /// same run and skip twice in a row), the runs' pages only, not the skips between them;
    /// else the distance.
    pub(super) fn run_pages(&self, from: u64, to: u64, runs_only: bool) -> u64 {
        if !runs_only
            || self.period_seen < 2
            || self.period_run == 0
            || from < self.run_start
            || to <= from
        {
            return to.saturating_sub(from);
        }
        let period = self.period_run.saturating_add(self.period_skip);
        let read_before = |x: u64| {
            let d = x - self.run_start;
            (d / period) * self.period_run + (d % period).min(self.period_run)
        };
        read_before(to) - read_before(from)
    }

    /// How `(s, e)` relates to this stream, if at all, at read number `now`.
    pub(super) fn join(&self, s: u64, e: u64, now: u64) -> Option<Join> {
        if !self.live {
            return None;
        }
        let len = e - s;
        match self.shape {
            Shape::Unknown | Shape::Forward => {
                let behind = self.reach.saturating_sub(1);
                if s >= behind && s <= self.reach + self.skip && e > self.reach {
                    return Some(Join::Continues);
                }
                // Back where it was before its last skip: the skip was a jump and back.
                let r = self.before_skip;
                if self.shape == Shape::Forward
                    && r > 0
                    && now == self.skip_tick + 1
                    && goes_on_from(s, e, r)
                {
                    return Some(Join::Returns);
                }
                // On from the read the skip landed on, right after a read came back.
                if let Some(b) = self.before_return {
                    if now == self.skip_tick + 2 && goes_on_from(s, e, b.reach) {
                        return Some(Join::Resumes);
                    }
                }
            }
            _ => {}
        }
        match self.shape {
            Shape::Unknown | Shape::Backward => {
                let low = if self.shape == Shape::Backward {
                    self.reach
                } else {
                    self.first
                };
                if e <= low + 1 && e >= low && s < low {
                    return Some(Join::Continues);
                }
            }
            _ => {}
        }
        if self.shape == Shape::Stride
            && s as i64 - self.first as i64 == self.delta
            && len.abs_diff(self.record) <= 1
        {
            return Some(Join::Continues);
        }
        if s == self.first && e == self.end {
            return Some(Join::Repeats);
        }
        // Inside the window only counts for a stream read in the last few reads (threads racing
        // over one region); a random read into an old window is just a cache hit.
        let recent = now.saturating_sub(self.tick) <= RACE_READS;
        match self.shape {
            Shape::Forward if self.window > 0 && recent => {
                let low = self.first.saturating_sub(self.window);
                if s >= low && s < self.frontier.max(self.reach) {
                    return Some(Join::InWindow);
                }
            }
            // Pages this stream read ahead and nobody has reached yet: whoever reads them is
            // its reader, however many other reads came between.
            Shape::Forward if self.window > 0 && s >= self.reach && s < self.frontier => {
                return Some(Join::InWindow);
            }
            // Threads racing over a backward region read in its window or around the last
            // read; a read past the last read's end is not backward (a reader that went back
            // a few pages and then on forward, as a shuffled scan does), however close.
            Shape::Backward
                if self.window > 0 && recent && s >= self.frontier && s < self.end =>
            {
                return Some(Join::InWindow);
            }
            _ => {}
        }
        // A skip ahead by a stream that has shown itself sequential is no sign of random reads:
        // up to four windows (or records) or half of what it has read, it goes on.
        if self.shape == Shape::Forward && self.run >= 2 && recent && s > self.reach + self.skip {
            let limit = (4 * self.window.max(self.record)).max(self.used / 2);
            if s - self.reach <= limit {
                return Some(Join::Skips);
            }
        }
        if self.shape == Shape::Unknown || (self.shape == Shape::Forward && self.run == 0) {
            let d = s as i64 - self.first as i64;
            if d.unsigned_abs() > self.record
                && d.unsigned_abs() <= MAX_STRIDE_PAGES
                && len.abs_diff(self.record) <= 1
            {
                if self.delta == d {
                    return Some(Join::StrideConfirms);
                }
                if self.delta == 0 {
                    return Some(Join::StrideCandidate);
                }
            }
        }
        None
    }
}

/// Whether a read of `[s, e)` goes on from page `at`: it starts there (or on the page
/// before, a read not aligned to its predecessor's end) and reads past it.
fn goes_on_from(s: u64, e: u64, at: u64) -> bool {
    s + 1 >= at && s <= at && e > at
}

impl Adaptive {
    /// Whether another stream's last read lies in what stream `i` read ahead: another reader
    /// is using those pages (threads sharing the file), so leaving them is no loss.
    pub(super) fn ahead_read_by_others(&self, i: usize) -> bool {
        let v = &self.streams[i];
        let (lo, hi) = match v.shape {
            Shape::Forward => (v.reach, v.frontier),
            Shape::Backward => (v.frontier, v.reach),
            _ => return false,
        };
        lo < hi
            && self
                .streams
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && o.live && o.first < hi && o.end > lo)
    }

    /// The stream `(s, e)` joins, and how.
    pub(super) fn find(&self, s: u64, e: u64) -> Option<(usize, Join)> {
        // The previous read's stream, continued: the common case, and the answer the scan
        // would give (`Continues` is the best join, and this stream is the most recent).
        if self.streams[self.last].join(s, e, self.tick) == Some(Join::Continues) {
            return Some((self.last, Join::Continues));
        }
        let mut best: Option<(usize, Join)> = None;
        for (i, st) in self.streams.iter().enumerate() {
            if let Some(j) = st.join(s, e, self.tick) {
                let better = match best {
                    None => true,
                    Some((b, bj)) => j < bj || (j == bj && st.tick > self.streams[b].tick),
                };
                if better {
                    best = Some((i, j));
                }
            }
        }
        best
    }

    /// A slot for a new stream: an empty one, else the least recently used.
    pub(super) fn free_slot(&self) -> usize {
        let mut pick = 0;
        for (i, st) in self.streams.iter().enumerate() {
            if !st.live {
                return i;
            }
            if st.tick < self.streams[pick].tick {
                pick = i;
            }
        }
        pick
    }

    /// Streams of the file with a reader lately: any shape, learned or not.
    pub(super) fn live_streams(&self) -> usize {
        self.streams.iter().filter(|s| s.live).count()
    }

    /// Streams of this file that read ahead now.
    pub(super) fn active_streams(&self) -> u64 {
        self.streams
            .iter()
            .filter(|s| s.live && s.confirmed() && s.window > 0 && !s.cached)
            .count()
            .max(1) as u64
    }

    /// A read that joins stream `i` as `join`: update its history.
    pub(super) fn advance(&mut self, i: usize, join: Join, s: u64, e: u64) {
        let rt = self.reads_through_gap(i, s);
        let st = &mut self.streams[i];
        st.tick = self.tick;
        let len = e - s;
        if s < st.gap.end && e > st.gap.first && join != Join::Returns {
            // The reader came back for what it passed over: no skip, no period to follow (a
            // return forgets them itself, undone if the next read resumes after the skip).
            st.period_seen = 0;
            st.gap = PageRange::new(0, 0);
        }
        if !matches!(join, Join::Skips | Join::Returns) {
            // One read on from the skip: it was a skip, not a jump and back.
            st.before_skip = 0;
        }
        if !matches!(join, Join::Returns | Join::Resumes) && st.before_return.take().is_some() {
            // The read after a return does not go on from the skip: the skip was a jump
            // elsewhere and back, and the period it made is forgotten.
            st.period_seen = 0;
            st.gap = PageRange::new(0, 0);
        }
        match join {
            Join::Continues => {
                match st.shape {
                    Shape::Unknown | Shape::Forward if s + 1 >= st.reach && e > st.reach => {
                        if st.shape == Shape::Unknown {
                            st.frontier = st.frontier.max(st.reach);
                        }
                        // A gap read through is the stream's as much as the read: its pages
                        // count towards what the stream has shown.
                        st.used += s.saturating_sub(st.reach);
                        st.shape = Shape::Forward;
                        st.reach = e;
                        // A run longer than the last: the runs do not repeat (or, by a
                        // read, once, the run was a read longer: `grow_run`).
                        if st.period_seen > 0 && e > st.run_start + st.period_run {
                            st.grow_run(e);
                        }
                    }
                    Shape::Unknown | Shape::Backward => {
                        if st.shape == Shape::Unknown {
                            st.reach = st.first;
                            st.frontier = st.first;
                        }
                        st.shape = Shape::Backward;
                        st.reach = st.reach.min(s);
                    }
                    _ => {}
                }
                st.run += 1;
                st.used += len;
            }
            Join::InWindow => {
                if st.shape == Shape::Forward {
                    if s > st.reach + st.skip {
                        // A skip ahead within what was read ahead: a run and a skip, or a
                        // jump there and back (a B-tree's interior page read ahead of its
                        // leaves): where the stream stood is kept for a return, and the
                        // window it read ahead stands.
                        st.skip_to(s, None);
                    }
                    st.reach = st.reach.max(e);
                    // Past the run's end by a read that came before the one it follows (two
                    // reads answered out of order): the run is longer, as in `Continues`.
                    if st.period_seen > 0 && e > st.run_start + st.period_run {
                        st.grow_run(e);
                    }
                } else {
                    st.reach = st.reach.min(s);
                }
                st.used += len;
                st.run += 1;
            }
            Join::Repeats => {}
            Join::Skips => {
                st.skip_to(s, Some(st.frontier));
                st.reach = e;
                st.run += 1;
                st.used += len;
            }
            Join::Returns => {
                // Back where the stream stood before its skip: go on from there, its readahead
                // as it stood then (what the skip read ahead is lost).
                let keeps_period = if st.skip_was_noise {
                    // Two reads swapped: a period that has repeated stands (a mount's reads,
                    // answered by several threads, come so now and then); one seen once is
                    // forgotten, as after any return.
                    st.period_seen >= 2
                } else {
                    // The skip was a jump: forget the period it made. Unless, where the
                    // period had repeated, the next read goes on from the skip (`Resumes`):
                    // then the return was the run's last read, late, and the stream is put
                    // back as the skip left it (a period seen once is not evidence enough:
                    // readers in shuffled order skip and come back as often). A return no
                    // further past the run's end than a period allows a run to grow
                    // (`grow_run`) may well be that: the period is kept for it, so that its
                    // windows do not go into the skip, and forgotten at the next read if that
                    // does not resume.
                    st.before_return = (st.period_seen >= 2).then_some(SkipState {
                        reach: st.reach,
                        frontier: st.frontier,
                        run_start: st.run_start,
                        period_seen: st.period_seen,
                        gap: st.gap,
                    });
                    st.run_start = st.run_start_before_skip.min(s);
                    let period = st.period_run.saturating_add(st.period_skip);
                    st.period_seen >= 2
                        && e <= st.run_start_before_skip + st.period_run + period / 32
                };
                if !keeps_period {
                    st.period_seen = 0;
                    st.gap = PageRange::new(0, 0);
                }
                st.reach = e;
                st.frontier = st.frontier_before_skip.unwrap_or(st.frontier).max(e);
                st.before_skip = 0;
                st.run += 1;
                st.used += len;
            }
            Join::Resumes => {
                // The skip stands, and the read that came back was the run's last, late: the
                // stream is as the skip left it (what the return read ahead is lost), the run
                // a read longer than the skip saw, which the period allows (`note_skip`).
                if let Some(b) = st.before_return.take() {
                    st.frontier = b.frontier.max(st.frontier).max(e);
                    st.run_start = b.run_start;
                    st.period_seen = b.period_seen;
                    st.gap = b.gap;
                }
                st.reach = e;
                st.run += 1;
                st.used += len;
            }
            Join::StrideConfirms => {
                // Third read at the same distance: a stride, or a gap to read through.
                let d = st.delta;
                if let Some(gap) = rt {
                    st.shape = Shape::Forward;
                    st.skip = gap;
                    st.reach = e;
                    st.frontier = e;
                } else {
                    st.shape = Shape::Stride;
                    st.frontier = (s as i64 + d).max(0) as u64;
                }
                st.run += 1;
                st.used += len;
            }
            Join::StrideCandidate => unreachable!("a stride candidate starts its own stream"),
        }
        st.first = s;
        st.end = e;
        st.record = len;
    }

    /// The gap stream `i` would read through if `s` continued its stride, if small enough.
    pub(super) fn reads_through_gap(&self, i: usize, s: u64) -> Option<u64> {
        let st = &self.streams[i];
        let d = s as i64 - st.first as i64;
        if d <= 0 || st.delta != d {
            return None;
        }
        let gap = d as u64 - st.record.min(d as u64);
        self.reads_through(gap, st.record).then_some(gap)
    }

    /// A read that joins no stream: start one in a free slot.
    pub(super) fn start_stream(&mut self, s: u64, e: u64, ctx: &dyn RaContext) -> usize {
        let i = self.free_slot();
        let victim = self.streams[i];
        if victim.live && !victim.cached && !self.ahead_read_by_others(i) {
            // Whatever it had ahead is lost: its reader never came back for it.
            self.account(0, victim.ahead_pages());
        }
        let mut st = Stream::EMPTY;
        st.live = true;
        st.tick = self.tick;
        st.origin = s;
        st.first = s;
        st.end = e;
        st.reach = e;
        st.frontier = e;
        st.record = e - s;
        st.used = e - s;
        st.run_start = s;
        // Forward at once: the file's start, a sequential hint, or cached pages just before
        // (a stream this state lost track of: the kernel's context readahead).
        let context = s >= CONTEXT_PAGES && (s - CONTEXT_PAGES..s).all(|p| ctx.is_cached(p));
        if s == 0 || self.sequential || context {
            st.shape = Shape::Forward;
            st.reach = s;
            st.frontier = s;
        }
        // A read on the page after one a bet past a miss was placed for continues that
        // read (the bet's pages are the context): the stream has continued once.
        if context && self.bets.won_now {
            st.run = 1;
        }
        self.streams[i] = st;
        i
    }

    /// A read in a stream whose readahead is off because its pages were cached: count misses.
    pub(super) fn cached_read(&mut self, i: usize, s: u64, e: u64, ctx: &dyn RaContext) -> bool {
        let st = &mut self.streams[i];
        st.since_miss += 1;
        if st.since_miss > CACHED_SPAN {
            st.misses = 0;
        }
        if !ctx.is_cached(s) || (e - 1 > s && !ctx.is_cached(e - 1)) {
            st.misses += 1;
            st.since_miss = 0;
        }
        // A forward stream that reads towards pages nobody brought in (it ran through pages
        // another stream read ahead, the next run of a merge) turns back on before it misses.
        let ahead = e.saturating_add(st.record);
        let runs_out =
            st.shape == Shape::Forward && ahead < ctx.file_pages() && !ctx.is_cached(ahead);
        if st.misses >= CACHED_ON_MISSES || runs_out {
            st.cached = false;
            st.idle_topups = 0;
            st.frontier = match st.shape {
                Shape::Backward => st.reach,
                Shape::Forward => st.reach,
                _ => st.frontier,
            };
            return true;
        }
        false
    }
}
