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
//! last read through such pages. Where a seek costs more than a short gap, a new run starts
//! back where its file's last pages end, so the device continues without seeking. A run stays
//! open while its first pages would still be cached when a later read came for more.
//!
//! **Size.** The largest run is the device's largest I/O, or a quarter of the budget if that is
//! more (contiguous commands pay one seek). A run's limit grows on a ramp from the first read:
//! the pages the plan has read so far ([`Ramp::Workload`]) or twice those just before it in
//! its file ([`Ramp::Stream`]), so the reader starts on small requests while larger ones
//! follow, or none at all ([`Ramp::Full`], where every request costs a seek); a read longer
//! than its limit is split. Where everything fits, the sweeps read every
//! page any read needs in file order with no ramp, in the largest requests or a request per
//! read ([`Ramp::Sweep`], [`Ramp::SweepReads`]), all at the first read, as an elevator does.
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
//! Random reads show the limit of every real policy: the oracle knows where they go, nothing
//! causal does, so `vs_oracle` is not a bound a causal policy can approach there.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::IoRequest;

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
    /// No order of need at all where everything fits: every page any read needs (and the gaps
    /// worth reading through) in file order, the largest requests, all issued at the first
    /// read, as an elevator sweeps (best where seeks cost most). Where it does not fit, as
    /// `Workload`.
    Sweep,
    /// As `Sweep`, but a request per read (reads that overlap share one; gaps worth reading
    /// go with the read before): each read's pages arrive as soon as the sweep passes them.
    SweepReads,
}

impl Ramp {
    /// Every ramp, in the order the simulator tries them.
    pub const ALL: [Ramp; 5] = [
        Ramp::Workload,
        Ramp::Stream,
        Ramp::Full,
        Ramp::Sweep,
        Ramp::SweepReads,
    ];

    /// The plans the simulator plays, as (ramp, reach): every ramp; those that issue in
    /// order of need twice, with a reach of the budget (a page stays counted on for the other
    /// half of the cache: best where pages are read again) and of seven eighths of the cache
    /// (best for streams, where a page is used once, soon after it arrives). The sweeps have
    /// no reach: they run only where everything fits.
    pub fn plans(cache_pages: u64, budget_pages: u64) -> Vec<(Ramp, u64)> {
        let far = cache_pages - cache_pages / 8;
        let mut plans = Vec::new();
        for ramp in Ramp::ALL {
            plans.push((ramp, budget_pages));
            if matches!(ramp, Ramp::Workload | Ramp::Stream | Ramp::Full) && far > budget_pages {
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
#[derive(Debug)]
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
            if let Some(plan) = matches!(settings.ramp, Ramp::Sweep | Ramp::SweepReads)
                .then(|| sweep(needs, settings, settings.ramp == Ramp::SweepReads))
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

/// The [`Ramp::Sweep`] plan where everything fits: the pages the reads touch, in file order
/// (files in the order of their first read), gaps worth reading through read, in the largest
/// requests, all due at the first read.
fn sweep(needs: &[Need], s: OracleSettings, by_read: bool) -> Option<Oracle> {
    let mut first_read: HashMap<u32, usize> = HashMap::new();
    for (k, n) in needs.iter().enumerate() {
        first_read.entry(n.file).or_insert(k);
    }
    let mut v: Vec<(usize, u32, u64, u64)> = needs
        .iter()
        .map(|n| (first_read[&n.file], n.file, n.first, n.end))
        .collect();
    v.sort_unstable();
    let io_max = s.io_max_pages.max(1);
    let mut runs: Vec<Run> = Vec::new();
    let mut unneeded = 0;
    for (_, f, a, b) in v {
        if let Some(r) = runs.last_mut().filter(|r| r.file == f) {
            if b <= r.end {
                continue;
            }
            if !by_read && a <= r.end.saturating_add(s.gap_pages) {
                unneeded += a.saturating_sub(r.end);
                r.end = b;
                continue;
            }
            if a <= r.end.saturating_add(s.gap_pages) {
                // A request per read: this one starts where the last ends.
                unneeded += a.saturating_sub(r.end);
                let start = r.end;
                r.end = r.end.max(a);
                let r = Run {
                    start,
                    end: b,
                    ..*r
                };
                runs.push(r);
                continue;
            }
        }
        runs.push(Run {
            file: f,
            start: a,
            end: b,
            limit: io_max,
            first_need: 0,
            last_need: 0,
            opened_at: 0,
        });
    }
    // All of it stays cached, or this plan is not for this workload.
    if runs.iter().map(|r| r.end - r.start).sum::<u64>() > s.cache_pages {
        return None;
    }
    // Cut into the largest requests.
    let mut cut = Vec::with_capacity(runs.len());
    for r in runs {
        let mut at = r.start;
        while at < r.end {
            let end = r.end.min(at + io_max);
            cut.push(Run {
                start: at,
                end,
                ..r
            });
            at = end;
        }
    }
    Some(Oracle {
        runs: cut,
        next_run: 0,
        released_by: Vec::new(),
        released: 0,
        clock_at: Vec::new(),
        held_pages: 0,
        budget: u64::MAX,
        reach: u64::MAX,
        chosen_gap_pages: unneeded,
    })
}

/// Pages the reads touch, each counted once.
fn distinct_pages(needs: &[Need]) -> u64 {
    let mut v: Vec<(u32, u64, u64)> = needs.iter().map(|n| (n.file, n.first, n.end)).collect();
    v.sort_unstable();
    let mut total = 0;
    let mut at = (u32::MAX, 0u64);
    for (f, a, b) in v {
        if f != at.0 {
            at = (f, a);
        }
        let a = a.max(at.1);
        if b > a {
            total += b - a;
            at.1 = b;
        }
    }
    total
}

/// Pages brought in by the plan, `[start, end)` (the start is the key).
#[derive(Clone, Copy, Debug)]
struct Span {
    end: u64,
    /// The LRU clock when they were last touched or brought in.
    stamp: u64,
    /// Brought in and not yet used by any read.
    fresh: bool,
}

/// The plan being made.
struct Planner<'a> {
    needs: &'a [Need],
    /// Largest run: pages the device reads in one go (several commands of the largest I/O,
    /// contiguous, pay one seek), within what may be held ahead.
    run_max: u64,
    gap: u64,
    seek: u64,
    ramp: Ramp,
    /// Everything fits: nothing is evicted, and gaps later reads need cost nothing.
    fits: bool,
    /// Fits: the last read of each page.
    last_use: HashMap<(u32, u64), usize>,
    /// Pages read or touched since the start: the cache's LRU clock.
    clock: u64,
    /// How long a page stays cached after its last touch, on that clock.
    lifetime: u64,
    runs: Vec<Run>,
    /// Open runs by (file, first page) -> index in `runs`, and in the order they opened.
    open: BTreeMap<(u32, u64), usize>,
    opened: VecDeque<usize>,
    /// Pages the plan has brought in: (file, first page) -> their span.
    covered: BTreeMap<(u32, u64), Span>,
    /// Per read: pages it is the first to use, or gives up (see [`Oracle::released_by`]).
    released_by: Vec<u64>,
    /// Per read: the clock as it begins.
    clock_at: Vec<u64>,
    /// Pages brought in, and those of them no read needs.
    inserted: u64,
    unneeded: u64,
}

impl<'a> Planner<'a> {
    fn new(needs: &'a [Need], s: OracleSettings, fits: bool) -> Planner<'a> {
        let mut last_use = HashMap::new();
        if fits {
            for (k, n) in needs.iter().enumerate() {
                for p in n.first..n.end {
                    last_use.insert((n.file, p), k);
                }
            }
        }
        let cache = s.cache_pages.max(1);
        Planner {
            needs,
            run_max: s.io_max_pages.max(s.budget_pages / 4).max(1),
            gap: s.gap_pages,
            seek: s.seek_pages,
            ramp: s.ramp,
            fits,
            last_use,
            clock: 0,
            lifetime: if fits {
                u64::MAX
            } else {
                cache.saturating_sub(s.reach_pages)
            },
            runs: Vec::new(),
            open: BTreeMap::new(),
            opened: VecDeque::new(),
            covered: BTreeMap::new(),
            released_by: vec![0; needs.len()],
            clock_at: Vec::with_capacity(if fits { 0 } else { needs.len() }),
            inserted: 0,
            unneeded: 0,
        }
    }

    fn run(mut self) -> Self {
        let mut pieces: Vec<(u64, u64)> = Vec::new();
        for (k, need) in self.needs.iter().enumerate() {
            self.close_old_runs();
            if !self.fits {
                self.clock_at.push(self.clock);
            }
            pieces.clear();
            self.touch(k, need, &mut pieces);
            for &(x, y) in &pieces {
                self.place(k, need.file, x, y);
            }
        }
        self
    }

    fn into_oracle(self, budget: u64, reach: u64) -> Oracle {
        Oracle {
            runs: self.runs,
            next_run: 0,
            released_by: self.released_by,
            released: 0,
            clock_at: self.clock_at,
            held_pages: 0,
            budget: budget.max(1),
            reach,
            chosen_gap_pages: self.unneeded,
        }
    }

    /// Close the open runs whose first pages would no longer be cached when a later read
    /// came for more.
    fn close_old_runs(&mut self) {
        while let Some(&i) = self.opened.front() {
            if self.valid(self.runs[i].opened_at) {
                break;
            }
            self.opened.pop_front();
            let key = (self.runs[i].file, self.runs[i].start);
            if self.open.get(&key) == Some(&i) {
                self.open.remove(&key);
            }
        }
    }

    fn valid(&self, stamp: u64) -> bool {
        self.clock.saturating_sub(stamp) < self.lifetime
    }

    /// The read `k` touches its pages: those still cached are hits (touched now); the
    /// missing pieces go to `pieces`.
    fn touch(&mut self, k: usize, need: &Need, pieces: &mut Vec<(u64, u64)>) {
        let (f, a, b) = (need.file, need.first, need.end);
        let mut at = a;
        for (start, span) in self.take_spans(f, a, b) {
            if !self.valid(span.stamp) {
                continue; // presumed evicted: read again
            }
            // The parts outside [a, b) keep their stamp; the touched part is touched now.
            if start < a {
                self.covered.insert((f, start), Span { end: a, ..span });
            }
            if span.end > b {
                self.covered.insert((f, b), span);
            }
            let (hs, he) = (start.max(a), span.end.min(b));
            if hs > at {
                pieces.push((at, hs));
            }
            if span.fresh {
                self.released_by[k] += he - hs;
            }
            self.covered.insert(
                (f, hs),
                Span {
                    end: he,
                    stamp: self.clock,
                    fresh: false,
                },
            );
            at = at.max(he);
        }
        if at < b {
            pieces.push((at, b));
        }
        self.clock += b - a;
    }

    /// Remove and return the spans of `f` overlapping `[x, y)`, in order.
    fn take_spans(&mut self, f: u32, x: u64, y: u64) -> Vec<(u64, Span)> {
        let first = self
            .covered
            .range((f, 0)..=(f, x))
            .next_back()
            .filter(|(_, span)| span.end > x)
            .map(|(&key, _)| key);
        let keys: Vec<(u32, u64)> = first
            .into_iter()
            .chain(self.covered.range((f, x + 1)..(f, y)).map(|(&key, _)| key))
            .collect();
        keys.into_iter()
            .map(|key| (key.1, self.covered.remove(&key).expect("listed above")))
            .collect()
    }

    /// Whether any page of `[x, y)` of `f` is covered.
    fn any_covered(&self, f: u32, x: u64, y: u64) -> bool {
        if x >= y {
            return false;
        }
        let before = self
            .covered
            .range((f, 0)..=(f, x))
            .next_back()
            .is_some_and(|(_, span)| span.end > x && self.valid(span.stamp));
        before
            || self
                .covered
                .range((f, x + 1)..(f, y))
                .any(|(_, span)| self.valid(span.stamp))
    }

    /// What reading through the gap `[x, y)` of `f` costs, in pages nobody will use, if it
    /// may be read through at all (no page of it cached).
    fn gap_cost(&self, k: usize, f: u32, x: u64, y: u64) -> Option<u64> {
        if x >= y {
            return Some(0);
        }
        if y - x > self.run_max || self.any_covered(f, x, y) {
            return None;
        }
        Some(if self.fits {
            (x..y)
                .filter(|p| self.last_use.get(&(f, *p)).is_none_or(|&u| u <= k))
                .count() as u64
        } else {
            y - x
        })
    }

    /// Bring in `[x, y)` of `f` for read `k`: join an open run or open one.
    fn place(&mut self, k: usize, f: u32, x: u64, y: u64) {
        let mut at = x;
        while at < y {
            let (i, end) = self.gather(k, f, at, y);
            if self.fits && end == y {
                self.read_on(k, i);
            }
            at = end;
        }
    }

    /// Everything fits: run `i` reads on past its end through pages later reads need (they
    /// cost nothing but their transfer, which they pay anyway, and save their own request or
    /// seek), as far as its size limit and the gap rule allow.
    fn read_on(&mut self, k: usize, i: usize) {
        let r = self.runs[i];
        let room = r.limit.saturating_sub(r.end - r.start);
        if room == 0 {
            return;
        }
        let (f, from) = (r.file, r.end);
        // Where the next cached pages of the file begin: reading stops before them.
        let stop = self
            .covered
            .range((f, from)..(f, u64::MAX))
            .next()
            .map_or(u64::MAX, |(&(_, start), _)| start);
        let (mut unneeded, mut upto, mut upto_unneeded) = (0u64, from, 0u64);
        for p in from..(from + room).min(stop) {
            match self.last_use.get(&(f, p)) {
                Some(&u) if u > k => {
                    upto = p + 1;
                    upto_unneeded = unneeded;
                }
                _ => {
                    unneeded += 1;
                    if unneeded > self.gap {
                        break;
                    }
                }
            }
        }
        if upto > from {
            self.runs[i].end = upto;
            self.bring_in(k, f, from, upto, true);
            self.released_by[k] += upto_unneeded;
            self.unneeded += upto_unneeded;
        }
    }

    /// Bring in `[x, y)` of `f` for read `k`, or its start: join an open run or open one (the
    /// pages a new run may take on its ramp). Returns the run and where its pages end.
    fn gather(&mut self, k: usize, f: u32, x: u64, y: u64) -> (usize, u64) {
        let fits = |r: &Run| r.end.max(y) - r.start.min(x) <= r.limit;
        // The open run starting at or before x, if the piece continues it: as much of the
        // piece as the run has room for (the rest opens the next run, so runs come out as
        // large as their limit).
        let before = self
            .open
            .range((f, 0)..=(f, x))
            .next_back()
            .map(|(_, &i)| i)
            .filter(|&i| self.runs[i].end <= x && x < self.runs[i].start + self.runs[i].limit)
            .and_then(|i| {
                let gap = self.gap_cost(k, f, self.runs[i].end, x)?;
                (gap <= self.gap).then_some((i, self.runs[i].end, x, gap))
            });
        // Else the open run starting after y, if the piece ends close enough below it.
        let after = || {
            self.open
                .range((f, x + 1)..(f, u64::MAX))
                .next()
                .map(|(_, &i)| i)
                .filter(|&i| {
                    fits(&self.runs[i])
                        && self.runs[i].start >= y
                        && !self.open.contains_key(&(f, x))
                })
                .and_then(|i| {
                    let gap = self.gap_cost(k, f, y, self.runs[i].start)?;
                    (gap <= self.gap).then_some((i, y, self.runs[i].start, gap))
                })
        };
        match before.or_else(after) {
            Some((i, gx, gy, unneeded)) => {
                let r = &mut self.runs[i];
                let y = y.min(r.start.min(x) + r.limit);
                if x < r.start {
                    self.open.remove(&(f, r.start));
                    r.start = x;
                    self.open.insert((f, x), i);
                }
                r.end = r.end.max(y);
                r.last_need = k;
                // The piece is used now; the gap waits for a later read, or is given up now
                // if no read will come for it (where evictions are possible, it is counted
                // as given up whatever comes).
                self.bring_in(k, f, x, y, false);
                self.bring_in(k, f, gx, gy, self.fits);
                if self.fits {
                    self.released_by[k] += unneeded;
                }
                self.unneeded += unneeded;
                (i, y)
            }
            None => {
                // Where seeks cost more than a short gap, start where the file's last pages
                // read end, if that is close behind: the device continues without a seek.
                let (start, unneeded) = self.continue_from(k, f, x).unwrap_or((x, 0));
                let i = self.runs.len();
                let grown = match self.ramp {
                    Ramp::Workload | Ramp::Sweep | Ramp::SweepReads => self.inserted,
                    Ramp::Full => u64::MAX,
                    Ramp::Stream => 2 * self.cached_before(f, start).max(1),
                };
                let limit = self.run_max.min(grown).max(1);
                // A read longer than the ramp allows is split: the reader starts on its first
                // pages while the rest arrive.
                let y = y.min(start + limit).max(x + 1);
                self.runs.push(Run {
                    file: f,
                    start,
                    end: y,
                    limit,
                    first_need: k,
                    last_need: k,
                    opened_at: self.clock,
                });
                // One as large as its limit is closed at once; so is one starting where an
                // open run that could not take it starts.
                if y - start < limit && !self.open.contains_key(&(f, start)) {
                    self.open.insert((f, start), i);
                    self.opened.push_back(i);
                }
                self.bring_in(k, f, x, y, false);
                self.bring_in(k, f, start, x, self.fits);
                if self.fits {
                    self.released_by[k] += unneeded;
                }
                self.unneeded += unneeded;
                (i, y)
            }
        }
    }

    /// Pages of `f` cached without a break just before `x` (up to the largest run).
    fn cached_before(&self, f: u32, x: u64) -> u64 {
        let mut at = x;
        for (&(_, start), span) in self.covered.range((f, 0)..(f, x)).rev() {
            if span.end < at || !self.valid(span.stamp) || x - start > self.run_max {
                break;
            }
            at = start;
        }
        x - at
    }

    /// Where a new run for `x` of `f` should start to continue the file's last request
    /// without a seek, and what that gap costs: the end of the cached pages just before `x`,
    /// if reading the gap costs less than the seek.
    fn continue_from(&self, k: usize, f: u32, x: u64) -> Option<(u64, u64)> {
        if self.seek == 0 || x == 0 {
            return None;
        }
        let (_, span) = self.covered.range((f, 0)..(f, x)).next_back()?;
        if span.end >= x || x - span.end > self.seek || !self.valid(span.stamp) {
            return None;
        }
        let cost = self.gap_cost(k, f, span.end, x)?;
        (cost <= self.seek).then_some((span.end, cost))
    }

    /// Pages `[x, y)` of `f` are read for read `k` (`fresh`: not used by it): covered from
    /// now on, replacing what the plan had presumed evicted there.
    fn bring_in(&mut self, k: usize, f: u32, x: u64, y: u64, fresh: bool) {
        if x >= y {
            return;
        }
        for (start, span) in self.take_spans(f, x, y) {
            if start < x {
                self.covered.insert((f, start), Span { end: x, ..span });
            }
            if span.end > y {
                self.covered.insert((f, y), span);
            }
        }
        self.covered.insert(
            (f, x),
            Span {
                end: y,
                stamp: self.clock,
                fresh,
            },
        );
        if !fresh {
            self.released_by[k] += y - x;
        }
        self.inserted += y - x;
        self.clock += y - x;
    }
}


/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "oracle",
    about: "the lower bound: knows the whole trace, reads exactly what will be used (simulator only)",
    make: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::IoKind;

    fn settings(gap: u64) -> OracleSettings {
        OracleSettings {
            cache_pages: 1 << 20,
            budget_pages: 1 << 19,
            reach_pages: 1 << 19,
            io_max_pages: 32,
            gap_pages: gap,
            seek_pages: 0,
            ramp: Ramp::Workload,
            taper: None,
        }
    }

    fn need(file: u32, first: u64, end: u64) -> Need {
        Need { file, first, end }
    }

    fn issued(o: &mut Oracle, reads: usize) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        for k in 0..reads {
            o.on_read(k, |f, io| out.push((f, io.start_page, io.pages)));
        }
        out
    }

    #[test]
    fn sequential_reads_are_gathered_into_requests_that_double_up_to_the_largest() {
        let needs: Vec<Need> = (0..64).map(|i| need(0, i, i + 1)).collect();
        let mut o = Oracle::plan(&needs, settings(0));
        assert_eq!(
            issued(&mut o, 64),
            [
                (0, 0, 1),
                (0, 1, 1),
                (0, 2, 2),
                (0, 4, 4),
                (0, 8, 8),
                (0, 16, 16),
                (0, 32, 32)
            ]
        );
        assert_eq!(o.chosen_gap_pages(), 0);
    }

    #[test]
    fn a_gap_is_read_through_only_when_cheaper_than_a_request() {
        // Records of 4 pages every 8 pages: gaps of 4 that no read needs.
        let needs: Vec<Need> = (0..64).map(|i| need(0, i * 8, i * 8 + 4)).collect();
        let mut skip = Oracle::plan(&needs, settings(3));
        let requests = issued(&mut skip, 64);
        // A request per record (the first split on the ramp), no page between them.
        assert!(requests.len() >= 64, "{requests:?}");
        assert_eq!(requests.iter().map(|r| r.2).sum::<u64>(), 64 * 4);
        assert_eq!(skip.chosen_gap_pages(), 0);
        let mut through = Oracle::plan(&needs, settings(4));
        let requests = issued(&mut through, 64);
        assert!(requests.len() < 24, "{requests:?}");
        // Every page read is a record's or a gap's it counted.
        let read: u64 = requests.iter().map(|r| r.2).sum();
        assert_eq!(read, 64 * 4 + through.chosen_gap_pages());
        assert!(through.chosen_gap_pages() > 0);
    }

    #[test]
    fn gaps_that_later_reads_need_are_read_through_for_free() {
        // Every other page, then the pages between: everything fits, so the first pass reads
        // through the gaps the second pass needs, and wastes nothing.
        let needs: Vec<Need> = (0..64)
            .map(|i| need(0, i * 2, i * 2 + 1))
            .chain((0..64).map(|i| need(0, i * 2 + 1, i * 2 + 2)))
            .collect();
        let mut o = Oracle::plan(&needs, settings(0));
        let requests = issued(&mut o, 128);
        assert_eq!(requests.iter().map(|r| r.2).sum::<u64>(), 128);
        // 64 of them a page each, without the gaps read through.
        assert!(requests.len() <= 16, "{requests:?}");
        assert_eq!(o.chosen_gap_pages(), 0);
    }

    #[test]
    fn files_read_in_turn_are_issued_in_the_order_they_are_needed() {
        // Two files read alternately, far apart: a request each.
        let needs: Vec<Need> = (0..8)
            .map(|i| need(i % 2, 100 * (i as u64 / 2), 100 * (i as u64 / 2) + 1))
            .collect();
        let mut o = Oracle::plan(&needs, settings(0));
        let order: Vec<u32> = issued(&mut o, 8).iter().map(|x| x.0).collect();
        assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn the_budget_holds_what_is_issued_ahead() {
        // More than the cache holds, so the budget applies.
        let needs: Vec<Need> = (0..64).map(|i| need(0, i * 32, i * 32 + 32)).collect();
        let mut o = Oracle::plan(
            &needs,
            OracleSettings {
                cache_pages: 192,
                budget_pages: 96,
                reach_pages: 96,
                ..settings(0)
            },
        );
        let mut first = Vec::new();
        o.on_read(0, |f, io| first.push((f, io.start_page, io.pages, io.kind)));
        // The first read's pages, split on the ramp, the reader waits for; ahead of it, as far
        // as the budget reaches on the cache's clock (each read of 32 pages advances it by 64:
        // its touches and its pages brought in): the next read's run, not the one after.
        let sync: u64 = first
            .iter()
            .filter(|x| x.3 == IoKind::Sync)
            .map(|x| x.2)
            .sum();
        let ahead: Vec<u64> = first
            .iter()
            .filter(|x| x.3 == IoKind::Ahead)
            .map(|x| x.1)
            .collect();
        assert_eq!((sync, ahead), (32, vec![32]), "{first:?}");
        let mut second = Vec::new();
        o.on_read(1, |f, io| second.push((f, io.start_page)));
        assert_eq!(second, [(0, 64)], "one read further, one run further");
    }

    #[test]
    fn pages_already_brought_in_are_not_read_again() {
        let needs: Vec<Need> = (0..4)
            .map(|_| need(0, 0, 16))
            .chain([need(0, 4, 8)])
            .collect();
        let mut o = Oracle::plan(&needs, settings(0));
        let requests = issued(&mut o, 5);
        assert_eq!(
            requests.iter().map(|r| r.2).sum::<u64>(),
            16,
            "{requests:?}"
        );
        assert!(
            requests.windows(2).all(|w| w[0].1 + w[0].2 == w[1].1),
            "{requests:?}"
        );
    }

    #[test]
    fn backward_reads_are_gathered_downward() {
        let needs: Vec<Need> = (0..64).rev().map(|i| need(0, i, i + 1)).collect();
        let mut o = Oracle::plan(&needs, settings(0));
        let requests = issued(&mut o, 64);
        assert_eq!(requests.iter().map(|r| r.2).sum::<u64>(), 64);
        assert!(requests.len() <= 8, "{requests:?}");
        assert!(requests.windows(2).all(|w| w[1].1 < w[0].1), "{requests:?}");
    }
}
