//! The planner: one pass over every read the workload will make, gathering the pages they
//! miss into runs (device requests), reading through the gaps worth it, and keeping track of
//! what the plan has brought in and whether the cache still holds it (the module comment of
//! `oracle` gives the rules).

use super::*;

/// Pages brought in by the plan, `[start, end)` (the start is the key).
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) end: u64,
    /// The LRU clock when they were last touched or brought in.
    pub(super) stamp: u64,
    /// Brought in and not yet used by any read.
    pub(super) fresh: bool,
}

/// The plan being made.
pub(super) struct Planner<'a> {
    pub(super) needs: &'a [Need],
    /// Largest run: pages the device reads in one go (several commands of the largest I/O,
    /// contiguous, pay one seek), within what may be held ahead.
    pub(super) run_max: u64,
    pub(super) gap: u64,
    pub(super) seek: u64,
    pub(super) ramp: Ramp,
    /// Everything fits: nothing is evicted, and gaps later reads need cost nothing.
    pub(super) fits: bool,
    /// Fits: the last read of each page.
    pub(super) last_use: HashMap<(u32, u64), usize>,
    /// Does not fit: every (file, page, read) a read touches, sorted, and the pages the reads
    /// before each read touch (a lower bound on the LRU clock's advance between two reads).
    pub(super) uses: Vec<(u32, u64, usize)>,
    pub(super) touched_before: Vec<u64>,
    /// Pages read or touched since the start: the cache's LRU clock.
    pub(super) clock: u64,
    /// How long a page stays cached after its last touch, on that clock.
    pub(super) lifetime: u64,
    pub(super) runs: Vec<Run>,
    /// Open runs by (file, first page) -> index in `runs`, and in the order they opened.
    pub(super) open: BTreeMap<(u32, u64), usize>,
    pub(super) opened: VecDeque<usize>,
    /// Pages the plan has brought in: (file, first page) -> their span.
    pub(super) covered: BTreeMap<(u32, u64), Span>,
    /// Per read: pages it is the first to use, or gives up (see [`Oracle::released_by`]).
    pub(super) released_by: Vec<u64>,
    /// Per read: the clock as it begins.
    pub(super) clock_at: Vec<u64>,
    /// Pages brought in, and those of them no read needs.
    pub(super) inserted: u64,
    pub(super) unneeded: u64,
}

impl<'a> Planner<'a> {
    pub(super) fn new(needs: &'a [Need], s: OracleSettings, fits: bool) -> Planner<'a> {
        let mut last_use = HashMap::new();
        let mut uses = Vec::new();
        let mut touched_before = Vec::new();
        if fits {
            for (k, n) in needs.iter().enumerate() {
                for p in n.first..n.end {
                    last_use.insert((n.file, p), k);
                }
            }
        } else {
            let mut touched = 0;
            touched_before.reserve(needs.len());
            for (k, n) in needs.iter().enumerate() {
                touched_before.push(touched);
                touched += n.end - n.first;
                uses.extend((n.first..n.end).map(|p| (n.file, p, k)));
            }
            uses.sort_unstable();
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
            uses,
            touched_before,
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

    pub(super) fn run(mut self) -> Self {
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

    pub(super) fn into_oracle(self, budget: u64, reach: u64) -> Oracle {
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
    pub(super) fn close_old_runs(&mut self) {
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

    pub(super) fn valid(&self, stamp: u64) -> bool {
        self.clock.saturating_sub(stamp) < self.lifetime
    }

    /// The read `k` touches its pages: those still cached are hits (touched now); the
    /// missing pieces go to `pieces`.
    pub(super) fn touch(&mut self, k: usize, need: &Need, pieces: &mut Vec<(u64, u64)>) {
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
    pub(super) fn take_spans(&mut self, f: u32, x: u64, y: u64) -> Vec<(u64, Span)> {
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
    pub(super) fn any_covered(&self, f: u32, x: u64, y: u64) -> bool {
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
    /// may be read through at all (no page of it cached). Where evictions are possible, a page
    /// a later read needs soon costs nothing either: the reads until then touch under half
    /// the pages a page stays cached for (a B-tree scan's next leaves, passed over by its jump
    /// to an interior page just ahead). It is still counted as given up ([`Self::given_up`]).
    pub(super) fn gap_cost(&self, k: usize, f: u32, x: u64, y: u64) -> Option<u64> {
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
            (x..y).filter(|&p| !self.needed_soon(k, f, p)).count() as u64
        })
    }

    /// Does not fit: whether a read after `k` needs page `p` of `f` before the reads between
    /// touch half the pages a page stays cached for.
    fn needed_soon(&self, k: usize, f: u32, p: u64) -> bool {
        let next = self.uses.partition_point(|&use_| use_ <= (f, p, k));
        self.uses.get(next).is_some_and(|&(uf, up, u)| {
            (uf, up) == (f, p) && 2 * (self.touched_before[u] - self.touched_before[k]) < self.lifetime
        })
    }

    /// The pages of the gap `[x, y)` counted as given up when it is read through, at `cost`
    /// (from [`Self::gap_cost`]): where evictions are possible, all of them, whatever comes.
    fn given_up(&self, x: u64, y: u64, cost: u64) -> u64 {
        if self.fits {
            cost
        } else {
            y - x
        }
    }

    /// Bring in `[x, y)` of `f` for read `k`: join an open run or open one.
    pub(super) fn place(&mut self, k: usize, f: u32, x: u64, y: u64) {
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
    pub(super) fn read_on(&mut self, k: usize, i: usize) {
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
    pub(super) fn gather(&mut self, k: usize, f: u32, x: u64, y: u64) -> (usize, u64) {
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
                let given_up = self.given_up(self.runs[i].end, x, gap);
                (gap <= self.gap).then_some((i, self.runs[i].end, x, given_up))
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
                    let given_up = self.given_up(y, self.runs[i].start, gap);
                    (gap <= self.gap).then_some((i, y, self.runs[i].start, given_up))
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
                    Ramp::Workload | Ramp::Sweep | Ramp::SweepReads | Ramp::SweepByNeed => {
                        self.inserted
                    }
                    Ramp::Full => u64::MAX,
                    Ramp::Head(head) if self.cached_before(f, start) == 0 => head,
                    Ramp::Head(_) => u64::MAX,
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
    pub(super) fn cached_before(&self, f: u32, x: u64) -> u64 {
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
    pub(super) fn continue_from(&self, k: usize, f: u32, x: u64) -> Option<(u64, u64)> {
        if self.seek == 0 || x == 0 {
            return None;
        }
        let (_, span) = self.covered.range((f, 0)..(f, x)).next_back()?;
        if span.end >= x || x - span.end > self.seek || !self.valid(span.stamp) {
            return None;
        }
        let cost = self.gap_cost(k, f, span.end, x)?;
        (cost <= self.seek).then_some((span.end, self.given_up(span.end, x, cost)))
    }

    /// Pages `[x, y)` of `f` are read for read `k` (`fresh`: not used by it): covered from
    /// now on, replacing what the plan had presumed evicted there.
    pub(super) fn bring_in(&mut self, k: usize, f: u32, x: u64, y: u64, fresh: bool) {
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
