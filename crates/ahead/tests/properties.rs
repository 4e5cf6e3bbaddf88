//! Properties that hold for every policy on every pattern.

use std::collections::HashSet;

use ahead::pattern::Pattern;
use ahead::policy::POLICIES;
use ahead::sim::{self, SimConfig, Simulator};
use ahead::workload::Event;
use proptest::prelude::*;

#[path = "common/small_patterns.rs"]
mod small_patterns;

fn spec() -> impl Strategy<Value = String> {
    let size = 1u64..400; // pages
    let bs = 1u64..40; // pages
    (0..small_patterns::KINDS, size, bs, 1u64..6, any::<u64>()).prop_map(
        |(kind, size, bs, k, seed)| small_patterns::small_pattern(kind, size, bs, k, seed),
    )
}

/// Sub-page reads too: arbitrary byte offsets and lengths on one file.
fn byte_reads() -> impl Strategy<Value = (u64, Vec<(u64, u64)>)> {
    (1u64..300_000).prop_flat_map(|size| {
        (
            Just(size),
            prop::collection::vec((0..size + 10_000, 1u64..70_000), 1..60),
        )
    })
}

fn unique_pages(pattern: &Pattern) -> u64 {
    let w = pattern.workload();
    let sizes: Vec<u64> = w.files.iter().map(|f| f.size.pages_ceil()).collect();
    let mut files = std::collections::HashMap::new();
    let mut seen = HashSet::new();
    for e in w.events {
        match e {
            Event::Open { handle, file } => {
                files.insert(handle, file);
            }
            Event::Read {
                handle,
                offset,
                len,
            } => {
                let f = files[&handle];
                let (a, b) = ahead::Bytes::page_span(offset, len);
                for p in a..b.min(sizes[f as usize]) {
                    seen.insert((f, p));
                }
            }
            _ => {}
        }
    }
    seen.len() as u64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn cold_cache_invariants(spec in spec(), policy in 0..POLICIES.len()) {
        let policy = POLICIES[policy].name;
        let pattern = Pattern::parse(&spec).unwrap();
        let unique = unique_pages(&pattern);
        // A cache that never evicts: every page read stays, so the cache shows all I/O.
        let config = SimConfig { cache_pages: 1 << 20, ..SimConfig::default() };
        let mut sim = Simulator::new(policy, config).unwrap();
        let w = pattern.workload();
        let sizes: Vec<u64> = w.files.iter().map(|f| f.size.pages_ceil()).collect();
        sim.run_workload(w).unwrap();
        let r = sim.report();
        let m = &r.faithful;
        // No I/O past EOF.
        for (f, &pages) in sizes.iter().enumerate() {
            prop_assert_eq!(sim.cached_in(f as u32, pages, pages + 4096), 0, "{} read past EOF on {}", policy, spec);
        }
        // Every requested page was read, and nothing was read twice.
        prop_assert!(m.pages_read >= unique, "{} on {}: read {} < unique {}", policy, spec, m.pages_read, unique);
        prop_assert_eq!(m.pages_read, sim.cached_pages() as u64);
        // wasted = read - used, with used counted independently as the unique pages requested.
        prop_assert_eq!(m.wasted_pages, m.pages_read - unique);
        prop_assert_eq!(m.sync_requests + m.async_requests, m.read_requests);
        prop_assert_eq!(m.thrashed_pages, 0);
        // Per-file figures add up to the total.
        prop_assert_eq!(r.files.iter().map(|f| f.metrics.pages_read).sum::<u64>(), m.pages_read);
    }

    /// The oracle is a lower bound: on any pattern, any device, with a reader that computes or
    /// not, no policy's modelled time is below the oracle's by more than 0.5%. One exception,
    /// held to its own bar: a disk (hdd) with a computing reader, on patterns of a few hundred
    /// pages, where the best cut of requests into seeks and the reader's tail is not always
    /// among the oracle's plans and their cuts (up to 1.5%, in about 1 of 500 such patterns:
    /// `examples/oracle_bound.rs`, BENCHMARKS.md): 2% there.
    #[test]
    fn no_policy_beats_the_oracle(spec in spec(), device in 0..3usize, compute in prop::bool::ANY) {
        let config = SimConfig {
            device: ahead::DeviceModel::PRESETS[device],
            compute_ns_per_page: if compute { 10_000 } else { 0 },
            ..SimConfig::default()
        };
        let bar = if device == 1 && compute { 1.02 } else { 1.005 };
        let pattern = Pattern::parse(&spec).unwrap();
        let oracle = sim::run(ahead::policy::ORACLE, config, pattern.workload()).unwrap().faithful;
        for policy in POLICIES.iter().map(|p| p.name).filter(|p| *p != ahead::policy::ORACLE) {
            let m = sim::run(policy, config, pattern.workload()).unwrap().faithful;
            prop_assert!(
                oracle.modeled_ms <= m.modeled_ms * bar,
                "{} beats the oracle on {} ({}, compute {}): {:.4} ms against {:.4}",
                policy, spec, config.device.name, compute, m.modeled_ms, oracle.modeled_ms
            );
        }
    }

    #[test]
    fn same_input_same_output(spec in spec(), policy in 0..POLICIES.len()) {
        let policy = POLICIES[policy].name;
        let pattern = Pattern::parse(&spec).unwrap();
        let a = sim::run(policy, SimConfig::default(), pattern.workload()).unwrap();
        let b = sim::run(policy, SimConfig::default(), pattern.workload()).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn cache_never_exceeds_capacity(spec in spec(), policy in 0..POLICIES.len(), capacity in 1usize..64) {
        let policy = POLICIES[policy].name;
        let pattern = Pattern::parse(&spec).unwrap();
        let config = SimConfig { cache_pages: capacity, ..SimConfig::default() };
        let mut sim = Simulator::new(policy, config).unwrap();
        let w = pattern.workload();
        if policy == ahead::policy::ORACLE {
            // The oracle needs the whole workload up front: check the cache after the run.
            sim.run_workload(w).unwrap();
            prop_assert!(sim.cached_pages() <= capacity);
            return Ok(());
        }
        let ids: Vec<u32> = w.files.iter().map(|f| sim.add_file(&f.name, f.size)).collect();
        for e in w.events {
            match e {
                Event::Open { handle, file } => sim.open(handle, ids[file as usize]).unwrap(),
                Event::Read { handle, offset, len } => sim.read(handle, offset, len).unwrap(),
                Event::Hint { handle, hint } => sim.hint(handle, hint).unwrap(),
                Event::Close { handle } => sim.close(handle),
            }
            prop_assert!(sim.cached_pages() <= capacity);
        }
        let m = sim.report().faithful;
        prop_assert!(m.thrashed_pages <= m.wasted_pages);
        prop_assert!(m.wasted_pages <= m.pages_read);
    }

    #[test]
    fn byte_granular_reads_never_go_past_eof(file in byte_reads(), policy in 0..POLICIES.len()) {
        let (size, reads) = file;
        let policy = POLICIES[policy].name;
        let mut sim = Simulator::new(policy, SimConfig { cache_pages: 1 << 20, ..SimConfig::default() }).unwrap();
        let events = std::iter::once(Event::Open { handle: 0, file: 0 }).chain(reads.into_iter().map(
            |(offset, len)| Event::Read { handle: 0, offset: ahead::Bytes(offset), len: ahead::Bytes(len) },
        ));
        sim.run_workload(ahead::Workload {
            files: vec![ahead::FileSpec { name: "f".into(), size: ahead::Bytes(size) }],
            events: Box::new(events),
        })
        .unwrap();
        let pages = ahead::Bytes(size).pages_ceil();
        prop_assert_eq!(sim.cached_in(0, pages, pages + 8192), 0);
    }
}
