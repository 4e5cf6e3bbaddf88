//! Readers nobody tuned for: families of patterns with random parameters, and the settings a
//! reader runs under (the device, how fast it computes, how much cache), each case named by
//! the `ahead sim` command that replays it. Shared by `tests/no_harm.rs` (a few hundred cases
//! per device in every `cargo test`) and `examples/no_harm.rs` (tens of thousands, the issue's
//! must-show), so a failure found by either is one command to replay.
//!
//! Families: sequential with noise (swaps, steps back, jumps at 0-10%); random over a file that
//! fits the cache and one that does not; hot sets; strides with gaps of 1-64 pages; several
//! streams taking turns (1-16 readers on one file); runs with forward skips; a merge of sorted
//! runs; groups read in shuffled order (threads racing); reads forward and backward; the
//! paper's read-and-seek; many files read in turn; and mixtures of two of them, one after the
//! other, on one file.
#![allow(dead_code)]

use ahead::pattern::{Pattern, SplitMix64};
use ahead::sim::{SimConfig, Simulator};
use ahead::workload::{Event, FileSpec, Workload};
use ahead::{Bytes, DeviceModel};

/// One generated case: the pattern, and the run's settings.
#[derive(Clone, Debug)]
pub struct Case {
    /// A pattern spec, or two joined by `+` (the first's reads, then the second's, on one file
    /// of the larger size).
    pub spec: String,
    pub device: DeviceModel,
    pub compute_us: u64,
    pub cache_pages: usize,
}

impl Case {
    /// The command that replays this case.
    pub fn command(&self) -> String {
        format!(
            "ahead sim --pattern '{}' --device {} --compute-us {} --cache {}p --policy all",
            self.spec, self.device.name, self.compute_us, self.cache_pages
        )
    }

    pub fn config(&self) -> SimConfig {
        SimConfig {
            device: self.device,
            compute_ns_per_page: self.compute_us * 1000,
            cache_pages: self.cache_pages,
            ..SimConfig::default()
        }
    }

    /// The case's reads as a workload (a `+` mixture: both parts' reads on one file).
    pub fn workload(&self) -> Workload {
        workload(&self.spec)
    }
}

/// The workload of a spec, or of two joined by `+`: the reads of the first, then of the
/// second, on one file as large as the larger.
pub fn workload(spec: &str) -> Workload {
    let parts: Vec<Workload> = spec
        .split('+')
        .map(|s| {
            Pattern::parse(s)
                .unwrap_or_else(|e| panic!("{e}"))
                .workload()
        })
        .collect();
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap();
    }
    let size = parts.iter().map(|w| w.files[0].size.0).max().unwrap();
    let events: Vec<Event> = std::iter::once(Event::Open { handle: 0, file: 0 })
        .chain(parts.into_iter().flat_map(|w| {
            w.events
                .filter(|e| matches!(e, Event::Read { handle: 0, .. }))
                .collect::<Vec<_>>()
        }))
        .collect();
    Workload {
        files: vec![FileSpec {
            name: "file0".into(),
            size: Bytes(size),
        }],
        events: Box::new(events.into_iter()),
    }
}

/// A draw in `lo..=hi`.
fn pick(rng: &mut SplitMix64, lo: u64, hi: u64) -> u64 {
    lo + rng.below(hi - lo + 1)
}

/// A pattern of one family (`family` in `0..FAMILIES`, not a mixture) over `size` pages.
fn one_family(rng: &mut SplitMix64, family: u64, size: u64) -> String {
    let bs = pick(rng, 1, 16).min(size);
    let seed = rng.next_u64() % 1_000_000;
    match family {
        0 => format!(
            "noisy:size={size}p,bs={bs}p,swap={},back={},jump={},seed={seed}",
            rng.below(11),
            rng.below(11),
            rng.below(11)
        ),
        1 => format!(
            "random:size={size}p,bs={bs}p,count={},seed={seed}",
            pick(rng, 8, 2 * size / bs + 8)
        ),
        2 => {
            let hot = pick(rng, bs, (size / 4).max(bs));
            format!(
                "hotset:size={size}p,bs={bs}p,hot={hot}p,hit={},count={},seed={seed}",
                pick(rng, 50, 99),
                pick(rng, 8, 2 * size / bs + 8)
            )
        }
        3 => {
            let bs = pick(rng, 1, 8).min(size);
            format!(
                "stride:size={size}p,bs={bs}p,stride={}p",
                bs + pick(rng, 1, 64)
            )
        }
        4 => format!(
            "interleaved:size={size}p,bs={bs}p,streams={}",
            pick(rng, 1, 16)
        ),
        5 => {
            let run = pick(rng, bs, (size / 2).max(bs));
            format!(
                "skips:size={size}p,bs={bs}p,run={run}p,skip={}p",
                pick(rng, 1, (size / 2).max(1))
            )
        }
        6 => format!(
            "merge:size={size}p,bs={bs}p,ways={},seed={seed}",
            pick(rng, 2, 16)
        ),
        7 => format!(
            "shuffled:size={size}p,bs={bs}p,group={},seed={seed}",
            pick(rng, 2, 32)
        ),
        8 => format!("seq:size={size}p,bs={bs}p"),
        9 => format!("reverse:size={size}p,bs={bs}p"),
        10 => format!(
            "paper:read={bs},seek={},repeat={}",
            pick(rng, 0, 64),
            (size / bs).max(1)
        ),
        _ => format!(
            "manyfiles:files={},size={}p,bs={bs}p",
            pick(rng, 2, 16),
            (size / 4).max(bs)
        ),
    }
}

/// Families [`one_family`] knows; one more is the mixture of two.
pub const FAMILIES: u64 = 12;

/// Reader speeds: I/O-bound, and computing 10 us a page.
pub const COMPUTE_US: [u64; 2] = [0, 10];

/// The `n`th case of the stream seeded with `seed` on `device` with a reader computing
/// `compute_us` a page.
pub fn case(seed: u64, n: u64, device: DeviceModel, compute_us: u64) -> Case {
    let mut rng = SplitMix64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let size = pick(&mut rng, 16, 4096);
    let family = rng.below(FAMILIES + 1);
    let spec = if family == FAMILIES {
        let a = rng.below(FAMILIES - 1); // not manyfiles: one file
        let b = rng.below(FAMILIES - 1);
        format!(
            "{}+{}",
            one_family(&mut rng, a, size),
            one_family(&mut rng, b, size)
        )
    } else {
        one_family(&mut rng, family, size)
    };
    // A cache from a sixteenth of the file to eight times it: files that fit and files that
    // do not.
    let cache_pages = (size * pick(&mut rng, 1, 128) / 16).max(64) as usize;
    Case {
        spec,
        device,
        compute_us,
        cache_pages,
    }
}

/// Modelled time of `policy` on `case`, in ms.
pub fn time_of(policy: &str, case: &Case) -> f64 {
    let mut s = Simulator::new(policy, case.config()).expect("a policy");
    s.run_workload(case.workload()).expect("runs");
    s.report().faithful.modeled_ms
}
