//! The plan where everything the reads touch fits in the cache: one sweep over those pages in
//! file order (the module comment of `oracle` gives when it is chosen), and the count of them.

use super::*;

/// The sweeps' plan where everything fits: the pages the reads touch, in file order (files in
/// the order of their first read), gaps worth reading through read, in the largest requests
/// (or a request per read, [`Ramp::SweepReads`]), all due at the first read; for
/// [`Ramp::SweepByNeed`], those requests then put in the order the reads need them.
pub(super) fn sweep(needs: &[Need], s: OracleSettings, ramp: Ramp) -> Option<Oracle> {
    let by_read = ramp == Ramp::SweepReads;
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
    let mut plan = Oracle {
        runs: cut,
        next_run: 0,
        released_by: Vec::new(),
        released: 0,
        clock_at: Vec::new(),
        held_pages: 0,
        budget: u64::MAX,
        reach: u64::MAX,
        chosen_gap_pages: unneeded,
    };
    if ramp == Ramp::SweepByNeed {
        plan.order_by_need(needs);
    }
    Some(plan)
}

/// Pages the reads touch, each counted once.
pub(super) fn distinct_pages(needs: &[Need]) -> u64 {
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
