//! The oracle's planner in isolation: a few reads, a setting, the requests it plans.

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

/// Every step of the local search reads the same pages as the plan it came from, once each,
/// and issues none of them later than before: a piece keeps its request's schedule, and a
/// request given another's pages is due as early as either.
#[test]
fn every_nudge_reads_the_same_pages_no_later() {
    // Two files: one read in order (requests that continue each other, up to the largest),
    // the other in strided records with the gaps read through.
    let mut needs: Vec<Need> = (0..24).map(|i| need(0, i * 3, i * 3 + 3)).collect();
    needs.extend((0..8).map(|i| need(1, i * 6, i * 6 + 3)));
    let plan = Oracle::plan(&needs, settings(4));
    let pages_of = |o: &Oracle| {
        let mut v: Vec<(u32, u64)> = o
            .runs
            .iter()
            .flat_map(|r| (r.start..r.end).map(move |p| (r.file, p)))
            .collect();
        v.sort_unstable();
        v
    };
    let due = |o: &Oracle, page: (u32, u64)| {
        o.runs
            .iter()
            .find(|r| r.file == page.0 && r.start <= page.1 && page.1 < r.end)
            .map(|r| r.first_need)
            .expect("every page is in a request")
    };
    let before = pages_of(&plan);
    assert!(before.windows(2).all(|w| w[0] != w[1]), "no page twice");
    let steps = plan.nudges();
    for kind in ["Split", "Merge", "Move", "Pieces", "Coarsen"] {
        assert!(
            steps.iter().any(|s| format!("{s:?}").starts_with(kind)),
            "{kind} among {steps:?}"
        );
    }
    for step in steps {
        let nudged = plan.nudged(step);
        assert_eq!(pages_of(&nudged), before, "{step:?}");
        assert_eq!(nudged.chosen_gap_pages(), plan.chosen_gap_pages());
        for &page in &before {
            assert!(due(&nudged, page) <= due(&plan, page), "{step:?} {page:?}");
        }
        assert_ne!(nudged.signature(), plan.signature(), "{step:?} changed nothing");
    }
}
