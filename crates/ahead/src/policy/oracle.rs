//! `oracle`: the lower bound every report shows beside the real policies. It cannot exist
//! outside the simulator: before the first read it is handed every read the workload will make,
//! on every handle and file, in the order they will come (the simulator reads the whole trace
//! first), and it plans the device requests for all of them at once. The simulator plays each
//! of its plans ([`Ramp`]) and keeps the fastest: the oracle is the best schedule it can find,
//! not one guess.
//!
//! **Gathering reads into requests.** Reads are taken in order. The pages of a read already
//! brought in (and still cached: see below) are hits; the rest are gathered into runs, one
//! device request each. Missing pages join an open run of their file when they continue it,
//! across a gap worth reading through, on either side, as far as the run's size limit; the
//! rest opens a run of its own. A gap is worth reading through when one more request would
//! cost the device more time than the gap's pages ([`OracleSettings::gap_pages`]: its
//! per-request cost and seek, or, where requests wait on their latency, its queue slot); pages
//! of the gap that some later read needs cost nothing when everything the plan reads fits in
//! the cache, since they save that read its own request, and a run then also reads on past its
//! last read through such pages. Where not everything fits, neither do pages a later read
//! needs soon (before the reads between touch half of what a page stays cached for: a
//! B-tree scan's next leaves, passed over by its jump to an interior page just ahead), though
//! the whole gap is still counted as given up. Where a seek costs more than a short gap, a new
//! run starts back where its file's last pages end, so the device continues without seeking.
//! A run stays open while its first pages would still be cached when a later read came for
//! more.
//!
//! **Size.** The largest run is the device's largest I/O, or a quarter of the budget if that is
//! more (contiguous commands pay one seek). A run's limit grows on a ramp from the first read:
//! the pages the plan has read so far ([`Ramp::Workload`]) or twice those just before it in
//! its file ([`Ramp::Stream`]), so the reader starts on small requests while larger ones
//! follow, or none at all ([`Ramp::Full`], where every request costs a seek), or none but a
//! cap on each file's head ([`Ramp::Head`]: where a seek is dear and the reader takes files in
//! turn, it starts on every file's head while their rests follow); a read longer
//! than its limit is split. Where everything fits, the sweeps read every
//! page any read needs with no ramp, all at the first read: in file order, as an elevator does,
//! in the largest requests or a request per read ([`Ramp::Sweep`], [`Ramp::SweepReads`]), or
//! the largest requests in the order the reads need them ([`Ramp::SweepByNeed`]: where seeks
//! cost nothing, no request then waits behind pages needed later).
//! Where the reader computes on its pages, the request holding the last page of the last read
//! is cut into a shrinking tail, so the reader waits at the end for one page,
//! not a whole request.
//!
//! **Issuing.** Runs go to the device in the order of the first read that needs them (one
//! queue for every file: no file's far future waits ahead of another's next read), as early as
//! the budget allows: pages issued and not yet used stay within `budget_pages`, the readahead
//! budget the real policies share (half the cache), or the whole cache when everything fits. A
//! run a read needs now is issued whatever the budget says.
//!
//! **Nothing it reads is lost.** Where the plan reads more than the cache holds, it issues a run
//! no further ahead of its first read than a budget's worth of the cache's LRU clock (pages read
//! or touched), and counts a page as still cached only while fewer than the cache less the
//! budget have been read or touched since its last touch: no page can age out of the LRU order
//! before its read. So the only pages it reads that nobody uses are the gaps it chose to read
//! through ([`Oracle::chosen_gap_pages`]).
//!
//! **Cut where the reader waited.** Where the reader computes on its pages, the simulator
//! then replays the two fastest kinds of plan, and the largest requests without the taper,
//! with their requests cut ([`Oracle::cut_at`]): where each read that waited for its pages
//! ends, or inside the request it waited for, in its middle or where the reader's work on the
//! first piece takes as long as the device's on the rest (every such cut at once, or only the
//! longest wait's); some cuts also with the pieces put in the order their pages are needed
//! ([`Oracle::order_by_need`]), so a file's rest waits behind other files' first pieces. It
//! keeps the fastest while it gains, a few rounds. A request cut where a read ends lets that
//! read go on while the rest of the request arrives; on a disk the rest continues without a
//! seek, at one request's cost. Which cuts pay depends on how the reader's work interleaves
//! with the device's, which the replay knows and a rule would guess.
//!
//! **Then a local search.** Where the reader computes and the workload is small enough to
//! replay a few thousand times, the fastest plan's neighbours are replayed in rounds (`Nudge`:
//! a request split or merged with the next, the boundary between two moved, every request cut
//! into pieces of one size or every two made one), and the fastest taken while it gains
//! (once while it only ties: some cuts pay only together). The rules above land near the best
//! cut; on a disk with a slow reader, near was up to 1% slower than `fixed` or `adaptive` on
//! small strided and interleaved patterns, which the search finds.
//!
//! Random reads show the limit of every real policy: the oracle knows where they go, nothing
//! causal does, so `vs_oracle` is not a bound a causal policy can approach there.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

mod planner;
mod sweep;

use super::IoRequest;
use planner::Planner;
use sweep::{distinct_pages, sweep};

/// One read the oracle is told of: a file (the driver's index) and the pages `[first, end)` it
/// touches (non-empty, already clipped at the end of the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// The file read.
    pub file: u32,
    /// First page read.
    pub first: u64,
    /// One past the last page read.
    pub end: u64,
}

/// What the oracle plans with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OracleSettings {
    /// The cache's capacity in pages.
    pub cache_pages: u64,
    /// Pages it may hold read and not yet used (the readahead budget the policies share).
    pub budget_pages: u64,
    /// Where not everything fits in the cache: how far ahead of a read it issues a request,
    /// counted in pages read or touched (the cache's LRU clock). The cache less this is how
    /// long a page it reads is counted on to stay cached by that count.
    pub reach_pages: u64,
    /// Largest request it gathers reads into, in pages (the device's largest I/O).
    pub io_max_pages: u64,
    /// Longest gap between reads that is cheaper to read through than to skip, in pages.
    pub gap_pages: u64,
    /// Longest gap that is cheaper to read through than to seek over, in pages: a new request
    /// starts that far back, where the last one of its file ended, to continue it.
    pub seek_pages: u64,
    /// How requests grow from the first read.
    pub ramp: Ramp,
    /// Where the reader computes on what it reads: how long, per page, against the device's
    /// cost per request and per page: the last request is cut into a shrinking tail.
    pub taper: Option<Taper>,
}

/// The reader's and the device's costs, for cutting the last request into a tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taper {
    /// The reader's time per page, in ns.
    pub compute_ns: u64,
    /// One more request that continues the last one, in ns of the device's time.
    pub request_ns: u64,
    /// One page's transfer, in ns.
    pub page_ns: u64,
}

/// How the plan's requests grow from small (the first reader waits for the first request
/// whole) to the largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ramp {
    /// Each request at most the pages the plan has read so far: the whole workload warms up
    /// once, then every request may be the largest (best when one reader leads, or reads are
    /// scattered and gathered whole).
    Workload,
    /// Each request at most twice the pages read just before it in its file: every stream
    /// warms up on its own, as a readahead window does (best when many streams start at once
    /// and the reader is waiting for the first page of each).
    Stream,
    /// No ramp: every request may be the largest from the first (best where each request
    /// costs a seek, and starting small costs more seeks than it saves).
    Full,
    /// As `Full`, but a request that does not continue pages of its file cached just before
    /// it (a file's head) takes at most this many pages, and the rest of its run follows in
    /// the largest: where each file costs a seek and the reader takes several in turn, the
    /// reader starts on every file's head while the rests follow, instead of waiting behind
    /// the files before it whole.
    Head(u64),
    /// No order of need at all where everything fits: every page any read needs (and the gaps
    /// worth reading through) in file order, the largest requests, all issued at the first
    /// read, as an elevator sweeps (best where seeks cost most). Where it does not fit, as
    /// `Workload`.
    Sweep,
    /// As `Sweep`, but a request per read (reads that overlap share one; gaps worth reading
    /// go with the read before): each read's pages arrive as soon as the sweep passes them.
    SweepReads,
    /// As `Sweep`, but its largest requests go in the order of the first read that needs
    /// each (best where seeks cost nothing and the device serves requests in turn: every
    /// request is as large as a command may be, and none waits behind pages needed later).
    SweepByNeed,
}

impl Ramp {
    /// Every ramp, in the order the simulator tries them.
    pub const ALL: [Ramp; 6] = [
        Ramp::Workload,
        Ramp::Stream,
        Ramp::Full,
        Ramp::Sweep,
        Ramp::SweepReads,
        Ramp::SweepByNeed,
    ];

    /// The plans the simulator plays, as (ramp, reach): every ramp; those that issue in
    /// order of need twice, with a reach of the budget (a page stays counted on for the other
    /// half of the cache: best where pages are read again) and of seven eighths of the cache
    /// (best for streams, where a page is used once, soon after it arrives). The sweeps have
    /// no reach: they run only where everything fits. Where a request that does not continue
    /// the last costs a seek of `seek_pages` pages' transfer, also heads of half and all of
    /// that (`Head`: a head much smaller costs its file a second seek for little, and one
    /// much larger keeps the next file's head waiting).
    pub fn plans(cache_pages: u64, budget_pages: u64, seek_pages: u64) -> Vec<(Ramp, u64)> {
        let far = cache_pages - cache_pages / 8;
        let heads = [seek_pages / 2, seek_pages]
            .into_iter()
            .filter(|&h| h > 0)
            .map(Ramp::Head);
        let mut plans = Vec::new();
        for ramp in Ramp::ALL.into_iter().chain(heads) {
            plans.push((ramp, budget_pages));
            let ordered = matches!(
                ramp,
                Ramp::Workload | Ramp::Stream | Ramp::Full | Ramp::Head(_)
            );
            if ordered && far > budget_pages {
                plans.push((ramp, far));
            }
        }
        plans
    }
}

/// One device request of the plan.
#[derive(Clone, Copy, Debug)]
struct Run {
    file: u32,
    start: u64,
    end: u64,
    /// Largest size it may grow to.
    limit: u64,
    /// The first and the last read (by order) it serves.
    first_need: usize,
    last_need: usize,
    /// The LRU clock when it opened: pages later reads add to it must still find the first
    /// ones cached.
    opened_at: u64,
}

/// The oracle's plan and where it is in it.
#[derive(Clone, Debug)]
pub struct Oracle {
    /// Runs in the order of their first read.
    runs: Vec<Run>,
    next_run: usize,
    /// Pages of the plan's runs each read uses first (or that the plan gives up at that read:
    /// gaps nobody will read): what stops being held ahead once it is done.
    released_by: Vec<u64>,
    /// Reads whose releases are counted.
    released: usize,
    /// The plan's LRU clock as each read begins (empty: everything fits, no clock needed).
    clock_at: Vec<u64>,
    /// Pages issued and not yet used.
    held_pages: u64,
    budget: u64,
    reach: u64,
    chosen_gap_pages: u64,
}

impl Oracle {
    /// Plan the requests for `needs`, read in this order.
    pub fn plan(needs: &[Need], settings: OracleSettings) -> Oracle {
        let mut plan = Self::plan_untapered(needs, settings);
        if let Some(t) = settings.taper {
            plan.taper(needs, t);
        }
        plan
    }

    fn plan_untapered(needs: &[Need], settings: OracleSettings) -> Oracle {
        // If every page the reads touch fits in the cache at once, plan as if nothing is ever
        // evicted, reading through gaps that later reads need; keep that plan if what it reads
        // still fits.
        if distinct_pages(needs) <= settings.cache_pages {
            if let Some(plan) =
                matches!(settings.ramp, Ramp::Sweep | Ramp::SweepReads | Ramp::SweepByNeed)
                    .then(|| sweep(needs, settings, settings.ramp))
                .flatten()
            {
                return plan;
            }
            let plan = Planner::new(needs, settings, true).run();
            if plan.inserted <= settings.cache_pages {
                return plan.into_oracle(settings.cache_pages, u64::MAX);
            }
        }
        Planner::new(needs, settings, false)
            .run()
            .into_oracle(settings.budget_pages, settings.reach_pages)
    }

    /// The reader computes on what it reads, so the request holding the last page of the last
    /// read is cut into a tail of shrinking requests, each small enough to arrive while the
    /// reader works on the one before: the reader, waiting at the end, then computes on one
    /// page after the last transfer instead of on the whole request. Working backward from a
    /// last request of one page, each earlier piece is the fewest pages the reader takes as
    /// long to compute on as the device takes for the next one; where pieces would not grow
    /// (the reader is the slower), there is nothing to cut.
    fn taper(&mut self, needs: &[Need], t: Taper) {
        let Some(last) = needs.last() else { return };
        let page = last.end - 1;
        let Some(i) = self
            .runs
            .iter()
            .rposition(|r| r.file == last.file && r.start <= page && page < r.end)
        else {
            return;
        };
        let r = self.runs[i];
        if page + 1 != r.end {
            return;
        }
        // The tail lies within the last reads, as long as each continues the one before in
        // the file (a reader going on past them would not be waiting at the end).
        let mut span_start = last.first;
        for n in needs.iter().rev().skip(1) {
            if n.file != last.file || n.end != span_start {
                break;
            }
            span_start = n.first;
        }
        // Piece sizes from the end backward, none larger than the largest request.
        let room = r.end.saturating_sub(span_start);
        let largest = self.runs.iter().map(|x| x.end - x.start).max().unwrap_or(1);
        let mut pieces = vec![1u64];
        let mut total = 1;
        loop {
            let next = *pieces.last().expect("one piece");
            let grow = (t.request_ns + next * t.page_ns)
                .div_ceil(t.compute_ns.max(1))
                .min(largest);
            if grow <= next || total + grow >= room {
                break;
            }
            pieces.push(grow);
            total += grow;
        }
        if pieces.len() < 2 && room < 2 || total >= room {
            return;
        }
        // The requests that hold the tail: this one and those just before it in the queue
        // that it continues, back to where the pieces begin.
        let start = r.end - total;
        let mut j = i;
        while self.runs[j].start > start && j > 0 && {
            let p = self.runs[j - 1];
            p.file == r.file && p.end == self.runs[j].start
        } {
            j -= 1;
        }
        if self.runs[j].start > start {
            return; // the tail is not in one stretch of the queue
        }
        // Those requests again: cut where the pieces begin, then the pieces, each piece with
        // the schedule of the request it came from.
        let old: Vec<Run> = self.runs[j..=i].to_vec();
        let from = |page: u64| {
            *old.iter()
                .find(|x| x.start <= page && page < x.end)
                .expect("the tail lies in these requests")
        };
        let mut again: Vec<Run> = old
            .iter()
            .filter(|x| x.start < start)
            .map(|x| Run {
                end: x.end.min(start),
                ..*x
            })
            .collect();
        let mut at = start;
        for &n in pieces.iter().rev() {
            again.push(Run {
                start: at,
                end: at + n,
                ..from(at)
            });
            at += n;
        }
        self.runs.splice(j..=i, again);
    }

    /// Cut the plan's requests at `cuts` (file, page): a request holding that page and pages
    /// before it becomes two, each issued when the whole would have been, so the reads of
    /// the first piece need not wait for the second. Whether any request was cut. Only
    /// before the plan is played.
    pub fn cut_at(&mut self, cuts: &BTreeSet<(u32, u64)>) -> bool {
        debug_assert_eq!(self.next_run, 0, "cut before the plan is played");
        let mut cut = Vec::with_capacity(self.runs.len() + cuts.len());
        for &r in &self.runs {
            let mut at = r.start;
            for &(_, page) in cuts.range((r.file, r.start + 1)..(r.file, r.end)) {
                cut.push(Run {
                    start: at,
                    end: page,
                    ..r
                });
                at = page;
            }
            cut.push(Run { start: at, ..r });
        }
        let any = cut.len() > self.runs.len();
        self.runs = cut;
        any
    }

    /// Put the requests in the order of the first of `needs` (the reads the plan was made
    /// for) that uses any of their pages, keeping when each is issued: a piece cut off a
    /// request then waits behind the requests that reads before its own need, instead of
    /// holding them up. Only before the plan is played.
    pub fn order_by_need(&mut self, needs: &[Need]) {
        debug_assert_eq!(self.next_run, 0, "reordered before the plan is played");
        let at: BTreeMap<(u32, u64), usize> = self
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| ((r.file, r.start), i))
            .collect();
        let mut first_use = vec![usize::MAX; self.runs.len()];
        for (k, n) in needs.iter().enumerate() {
            let from = at
                .range(..=(n.file, n.first))
                .next_back()
                .map_or((n.file, 0), |(&key, _)| key);
            for (_, &i) in at.range(from..(n.file, n.end)) {
                if self.runs[i].file == n.file && self.runs[i].end > n.first {
                    first_use[i] = first_use[i].min(k);
                }
            }
        }
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by_key(|&i| first_use[i]);
        self.runs = order.into_iter().map(|i| self.runs[i]).collect();
    }

    /// Where to cut the requests holding `pages` (file, page), of those with more than one
    /// page: `head(pages)` of a request's pages go in its first piece.
    pub fn cuts_within(
        &self,
        pages: impl Iterator<Item = (u32, u64)>,
        head: impl Fn(u64) -> u64,
    ) -> BTreeSet<(u32, u64)> {
        let by_start: BTreeMap<(u32, u64), u64> =
            self.runs.iter().map(|r| ((r.file, r.start), r.end)).collect();
        pages
            .filter_map(|(f, p)| {
                let (&(_, start), &end) = by_start.range((f, 0)..=(f, p)).next_back()?;
                let n = end - start;
                (p < end && n > 1).then(|| (f, start + head(n).clamp(1, n - 1)))
            })
            .collect()
    }

    /// Pages inside planned requests that no read asks for: the gaps it chose to read through
    /// (with pages it reads again after they may have been evicted unused, an upper bound).
    pub fn chosen_gap_pages(&self) -> u64 {
        self.chosen_gap_pages
    }

    /// Requests the plan holds.
    pub fn planned_requests(&self) -> usize {
        self.runs.len()
    }

    /// Read number `k` (0-based, in the order the plan was given) begins: `start` the requests
    /// due now, as `(file, request)`.
    pub fn on_read(&mut self, k: usize, mut start: impl FnMut(u32, IoRequest)) {
        while self.released < k.min(self.released_by.len()) {
            self.held_pages = self
                .held_pages
                .saturating_sub(self.released_by[self.released]);
            self.released += 1;
        }
        while let Some(run) = self.runs.get(self.next_run) {
            let pages = run.end - run.start;
            let due = run.first_need <= k;
            // Ahead only within the budget, and (where pages may be evicted) no further ahead
            // of its first read than the plan counted on: a budget's worth of the cache's
            // clock, beyond which its pages could age out before that read.
            let far = self
                .clock_at
                .get(k)
                .is_some_and(|&now| run.opened_at > now + self.reach);
            if !due && (far || self.held_pages + pages > self.budget && self.held_pages > 0) {
                break;
            }
            let io = if run.first_need == k {
                IoRequest::sync(run.start, pages)
            } else {
                IoRequest::ahead(run.start, pages)
            };
            start(run.file, io);
            self.held_pages += pages;
            self.next_run += 1;
        }
    }
}

/// One step of the simulator's local search over a plan ([`Oracle::nudges`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nudge {
    /// Request `i` split into two at page `at`, each issued when it would have been.
    Split(usize, u64),
    /// Request `i` and the next in the queue, which continues it in its file, made one.
    Merge(usize),
    /// The boundary between request `i` and the next in the queue, which continues it in its
    /// file, moved to page `at`.
    Move(usize, u64),
    /// Every request of more than `n` pages cut into pieces of `n` from its start, each
    /// issued when the whole would have been.
    Pieces(u64),
    /// Every two requests next in the queue, where the second continues the first in its
    /// file, made one (from the first: requests 0 and 1, 2 and 3, ...).
    Coarsen,
}

impl Oracle {
    /// The plan's requests, as a hash: the local search does not replay a plan twice.
    pub(crate) fn signature(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for r in &self.runs {
            (r.file, r.start, r.end, r.first_need).hash(&mut h);
        }
        h.finish()
    }

    /// The plans one step from this one, as moves for [`Self::nudged`]: every request cut
    /// into pieces of a power of two pages, or every two made one; each request split after
    /// its first page, in its middle and before its last page; each merged with the next in
    /// the queue where that one continues it in its file, or the boundary between the two
    /// moved by a power of two pages either way. Every move keeps the pages the plan reads,
    /// so the gaps it chose stay the same.
    pub(crate) fn nudges(&self) -> Vec<Nudge> {
        let mut moves = Vec::new();
        let largest = self.runs.iter().map(|r| r.end - r.start).max().unwrap_or(0);
        let mut n = 1;
        while n < largest {
            moves.push(Nudge::Pieces(n));
            n *= 2;
        }
        moves.push(Nudge::Coarsen);
        for (i, r) in self.runs.iter().enumerate() {
            let n = r.end - r.start;
            let mut splits = [r.start + 1, r.start + n / 2, r.end - 1];
            splits.sort_unstable();
            let mut last = r.start;
            for at in splits {
                if at > last && at < r.end {
                    moves.push(Nudge::Split(i, at));
                    last = at;
                }
            }
            let Some(next) = self.runs.get(i + 1) else {
                continue;
            };
            if next.file != r.file || next.start != r.end {
                continue;
            }
            moves.push(Nudge::Merge(i));
            let mut d = 1;
            while d < n {
                moves.push(Nudge::Move(i, r.end - d));
                d *= 2;
            }
            let mut d = 1;
            while d < next.end - next.start {
                moves.push(Nudge::Move(i, r.end + d));
                d *= 2;
            }
        }
        moves
    }

    /// This plan with `nudge` made (see [`Nudge`]). A piece keeps the schedule of the request
    /// it came from; a request given another's pages is due as early as either was, so no read
    /// finds its pages planned later than before. Only before the plan is played.
    pub(crate) fn nudged(&self, nudge: Nudge) -> Oracle {
        debug_assert_eq!(self.next_run, 0, "nudged before the plan is played");
        let mut plan = self.clone();
        let runs = &mut plan.runs;
        let joined = |a: &Run, b: &Run| Run {
            first_need: a.first_need.min(b.first_need),
            last_need: a.last_need.max(b.last_need),
            opened_at: a.opened_at.min(b.opened_at),
            limit: a.limit.max(b.limit),
            ..*a
        };
        match nudge {
            Nudge::Split(i, at) => {
                let r = runs[i];
                runs[i].end = at;
                runs.insert(i + 1, Run { start: at, ..r });
            }
            Nudge::Merge(i) => {
                let next = runs.remove(i + 1);
                runs[i] = Run {
                    end: next.end,
                    ..joined(&runs[i], &next)
                };
            }
            Nudge::Move(i, at) => {
                let (a, b) = (runs[i], runs[i + 1]);
                if at < a.end {
                    runs[i + 1] = joined(&b, &a);
                } else {
                    runs[i] = joined(&a, &b);
                }
                runs[i].end = at;
                runs[i + 1].start = at;
            }
            Nudge::Pieces(n) => {
                let n = n.max(1);
                *runs = runs
                    .iter()
                    .flat_map(|r| {
                        (r.start..r.end).step_by(n as usize).map(move |at| Run {
                            start: at,
                            end: (at + n).min(r.end),
                            ..*r
                        })
                    })
                    .collect();
            }
            Nudge::Coarsen => {
                let mut coarse: Vec<Run> = Vec::with_capacity(runs.len());
                let mut pair_open = false;
                for r in runs.iter() {
                    match coarse.last_mut() {
                        Some(last) if pair_open && last.file == r.file && last.end == r.start => {
                            *last = Run {
                                end: r.end,
                                ..joined(last, r)
                            };
                            pair_open = false;
                        }
                        _ => {
                            coarse.push(*r);
                            pair_open = true;
                        }
                    }
                }
                *runs = coarse;
            }
        }
        plan
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "oracle",
    about: "the lower bound: knows the whole trace, reads exactly what will be used (simulator only)",
    make: None,
};

#[cfg(test)]
mod tests;
