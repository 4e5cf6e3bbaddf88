//! The bench patterns, each listed once: its name, what it is, how it runs, how many runs a
//! repeat makes and what its device ratio is over. `--patterns`, its error, the suite's order,
//! the progress bar's total, the random ceilings and the rows without a device ratio all come
//! from [`BENCH_PATTERNS`]. A pattern that is one reader's sequence of reads is its line here
//! and nothing else (the line holds the sequence); a threaded one names its function in
//! `patterns.rs`; an experiment (rows of its own: methods, counts) names how many runs it makes
//! and is run by its function, called from `run` in `mod.rs`.

use super::patterns::{interleave_run, tiobench_run};
use super::sources::Source;
use super::{Measured, Touched};
use std::time::Duration;

/// One reader's reads, (offset, length) in bytes.
pub(super) type Reads = Box<dyn Iterator<Item = (u64, u64)>>;

/// A threaded pattern's run: the source, the file's bytes, the time cap, the pages asked for.
pub(super) type ThreadsRun = fn(&Source, u64, Duration, &mut Touched) -> Result<Measured, String>;

/// One bench pattern.
pub struct BenchPattern {
    pub name: &'static str,
    /// What it is; `None` for a single reader's, which its line in `ahead::readers` says.
    about: Option<&'static str>,
    pub(super) runs: Runs,
    pub(super) yardstick: Yardstick,
}

impl BenchPattern {
    /// The single reader `name` of the library's table (`ahead::readers`), held to `yardstick`.
    const fn reader(name: &'static str, yardstick: Yardstick) -> BenchPattern {
        BenchPattern {
            name,
            about: None,
            runs: Runs::Reads,
            yardstick,
        }
    }

    /// What the pattern is, in a few words.
    pub fn about(&self) -> &'static str {
        self.about
            .or_else(|| ahead::readers::find(self.name).map(|r| r.about))
            .unwrap_or("")
    }
}

/// How a pattern runs.
pub(super) enum Runs {
    /// One reader's reads of the file, by every contender in turn: the library's reader of
    /// the pattern's name (`ahead::readers`, the table every bench reads by name), a
    /// simulator's pattern of the file's size, so `ahead sim --pattern` runs the same reads.
    Reads,
    /// The file's first part read once unmeasured, then again measured, by every contender.
    Warm,
    /// Threads over the file, by every contender in turn.
    Threads(ThreadsRun),
    /// An experiment with rows of its own; it makes `per_repeat` runs each repeat, or, `once`,
    /// that many in all.
    Experiment { per_repeat: usize, once: bool },
}

/// What a pattern's `x device` is over.
pub(super) enum Yardstick {
    /// The best of the sequential sweep.
    Sequential,
    /// The same reads at random offsets, `O_DIRECT`, 32 in flight: (read bytes, share of the
    /// time) per phase (see `Ceilings::random_bound` for how a row is held to it).
    Random(&'static [(usize, f64)]),
    /// None: a warm pattern, or an experiment.
    None,
}

impl Yardstick {
    /// The device's runs beside a pattern's contenders, each repeat: a sequential yardstick
    /// before them and after them (the disk drifts), a random one after them.
    pub(super) fn runs_beside(&self) -> usize {
        match self {
            Yardstick::Sequential => 2,
            Yardstick::Random(_) => 1,
            Yardstick::None => 0,
        }
    }
}

/// The reads of the single-reader pattern `name` over a file of `size` bytes: (offset,
/// length), from the library's table of readers (none for a pattern that is not one).
pub(super) fn reads(name: &str, size: u64) -> Reads {
    match ahead::readers::reads(name, size) {
        Ok(reads) => Box::new(reads),
        Err(_) => Box::new(std::iter::empty()),
    }
}

/// Every bench pattern, in suite order.
pub const BENCH_PATTERNS: &[BenchPattern] = &[
    BenchPattern::reader("seq-4k", Yardstick::Sequential),
    BenchPattern::reader("seq-16k", Yardstick::Sequential),
    BenchPattern::reader("seq-128k", Yardstick::Sequential),
    BenchPattern::reader("seq-1m", Yardstick::Sequential),
    BenchPattern {
        name: "reread-4k",
        about: Some("4 KiB reads in order of a part already read (warm)"),
        runs: Runs::Warm,
        yardstick: Yardstick::None,
    },
    BenchPattern::reader("reverse-64k", Yardstick::Sequential),
    BenchPattern::reader("stride-16k", Yardstick::Sequential),
    BenchPattern::reader("random-4k", Yardstick::Random(&[(4 << 10, 1.0)])),
    BenchPattern::reader("random-mix", Yardstick::Random(&[(16 << 10, 1.0)])),
    BenchPattern::reader("pread-16k", Yardstick::Sequential),
    BenchPattern {
        name: "interleave-16",
        about: Some(
            "16 threads, each taking the next 64 KiB in turn in 4 KiB reads (nfsd's order)",
        ),
        runs: Runs::Threads(interleave_run),
        yardstick: Yardstick::Sequential,
    },
    BenchPattern {
        name: "tiobench",
        about: Some("random 16 KiB and 512 KiB reads by 1, 4, 16 and 64 threads"),
        runs: Runs::Threads(tiobench_run),
        yardstick: Yardstick::Random(&[(16 << 10, 0.5), (512 << 10, 0.5)]),
    },
    BenchPattern {
        name: "random-4k-qd32",
        about: Some("4 KiB at random, 32 in flight: plain preads, a thread pool, io_uring"),
        runs: Runs::Experiment {
            per_repeat: super::QD32_METHODS.len(),
            once: false,
        },
        yardstick: Yardstick::None,
    },
    BenchPattern {
        name: "random-4k-buffered",
        about: Some(
            "seed 004: buffered 4 KiB at random, QD32: preadv, io_uring workers, native async",
        ),
        runs: Runs::Experiment {
            per_repeat: super::raw::BUFFERED_METHODS.len(),
            once: false,
        },
        yardstick: Yardstick::None,
    },
    BenchPattern {
        name: "nfiles",
        about: Some("one reader over N files at once, N = 10, 100, 1000"),
        runs: Runs::Experiment {
            per_repeat: 3 * 2,
            once: false,
        },
        yardstick: Yardstick::None,
    },
    BenchPattern {
        name: "overlap",
        about: Some("128 KiB reads with compute a quarter and four times the device's speed"),
        runs: Runs::Experiment {
            per_repeat: 2 * 2,
            once: false,
        },
        yardstick: Yardstick::None,
    },
    BenchPattern {
        name: "paper",
        about: Some("the 2004 paper's Figures 4-10 on the real file, engine against simulator"),
        runs: Runs::Experiment {
            per_repeat: 7 * 4,
            once: true,
        },
        yardstick: Yardstick::None,
    },
];

/// Every pattern's name, in suite order.
pub fn names() -> impl Iterator<Item = &'static str> {
    BENCH_PATTERNS.iter().map(|p| p.name)
}

/// The pattern called `name`.
pub(super) fn find(name: &str) -> Option<&'static BenchPattern> {
    BENCH_PATTERNS.iter().find(|p| p.name == name)
}

/// The pattern a row belongs to: its name, or the pattern it is a part of (`nfiles-10`,
/// `paper-fig4`, `overlap-slow`).
pub(super) fn for_row(row: &str) -> Option<&'static BenchPattern> {
    find(row).or_else(|| {
        BENCH_PATTERNS.iter().find(|p| {
            row.strip_prefix(p.name)
                .is_some_and(|rest| rest.starts_with('-') || rest.starts_with(' '))
        })
    })
}

/// How many runs `patterns` make in `repeat` repeats with `contenders` contenders (the
/// `device` contender apart), and with `device_rows` (the sweep's configurations) if the
/// device is measured: the progress bar's total.
pub(super) fn total_runs(
    patterns: &[String],
    repeat: usize,
    contenders: usize,
    device: bool,
    sweep: usize,
) -> usize {
    let mut total = repeat * sweep;
    for p in patterns.iter().filter_map(|p| find(p)) {
        total += match &p.runs {
            Runs::Reads | Runs::Warm | Runs::Threads(_) => {
                repeat * (contenders + if device { p.yardstick.runs_beside() } else { 0 })
            }
            Runs::Experiment { per_repeat, once } => *per_repeat * if *once { 1 } else { repeat },
        };
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_is_listed_once_and_its_rows_find_it() {
        let mut names: Vec<&str> = names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BENCH_PATTERNS.len());
        for (row, pattern) in [
            ("nfiles-10", "nfiles"),
            ("paper-fig4", "paper"),
            ("overlap-slow", "overlap"),
            ("random-4k-qd32", "random-4k-qd32"),
            ("random-4k", "random-4k"),
        ] {
            assert_eq!(for_row(row).map(|p| p.name), Some(pattern), "{row}");
        }
        assert!(for_row("device-seq").is_none());
    }

    #[test]
    fn one_readers_patterns_read_within_the_file() {
        let size = 1 << 20;
        for p in BENCH_PATTERNS {
            if let Runs::Reads = p.runs {
                let v: Vec<(u64, u64)> = reads(p.name, size).take(10_000).collect();
                assert!(!v.is_empty(), "{}", p.name);
                assert!(v.iter().all(|&(o, l)| l > 0 && o + l <= size), "{}", p.name);
                assert!(!p.about().is_empty(), "{} has no reader", p.name);
            }
        }
    }

    #[test]
    fn the_run_count_follows_the_table() {
        let all: Vec<String> = names().map(str::to_string).collect();
        let (repeat, contenders, sweep) = (5, 4, 9);
        let plain = BENCH_PATTERNS
            .iter()
            .filter(|p| !matches!(p.runs, Runs::Experiment { .. }))
            .count();
        // Each pattern held to a ceiling measures it beside its contenders: a random one its
        // random ceiling after them, a sequential one the sweep's best before and after them.
        let ceilinged: usize = BENCH_PATTERNS
            .iter()
            .map(|p| p.yardstick.runs_beside())
            .sum();
        let experiments = 5 * (3 + 3 + 6 + 4) + 7 * 4;
        assert_eq!(
            total_runs(&all, repeat, contenders, true, sweep),
            repeat * sweep + repeat * plain * contenders + repeat * ceilinged + experiments
        );
        assert_eq!(total_runs(&["seq-4k".into()], 2, 3, false, 0), 6);
    }
}
