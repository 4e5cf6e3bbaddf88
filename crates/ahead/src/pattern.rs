//! Read patterns: synthetic workloads named by a short spec, `NAME[:KEY=VALUE,...]`.
//!
//! | spec | what it reads |
//! |---|---|
//! | `paper:read=R,seek=S,repeat=N[,first=F]` | the 2004 paper's pattern: R pages, skip S, N times (pages), from page F |
//! | `seq[:size=,bs=]` | the file from start to end in `bs` reads |
//! | `reverse[:size=,bs=]` | the file from end to start in `bs` reads |
//! | `stride[:size=,bs=,stride=]` | one `bs` read every `stride` bytes |
//! | `random[:size=,bs=,count=,seed=]` | `count` reads at random `bs`-aligned offsets |
//! | `interleaved[:streams=,size=,bs=]` | `streams` sequential readers, each over its own slice of one file, taking turns |
//! | `shuffled[:group=,size=,bs=,seed=]` | groups of `group` adjacent reads issued in random order (threads racing over contiguous pages) |
//! | `manyfiles[:files=,size=,bs=]` | `files` files each read sequentially, one read each in turn (one process serving many slow clients) |
//! | `skips[:size=,bs=,run=,skip=]` | runs of `run` bytes read in order in `bs` reads, each followed by a forward skip of `skip` (a reader that jumps over what it does not need: a columnar scan, mountpoint-s3's forward seeks) |
//! | `merge[:ways=,size=,bs=,seed=]` | a `ways`-way merge: the file holds `ways` sorted runs of equal length, and each read takes the next `bs` of a run chosen at random, weighted by what it has left (sort's merge pass, an LSM compaction) |
//! | `noisy[:size=,bs=,swap=,back=,jump=,seed=]` | the file in order, but `swap`% of steps read the next two records in swapped order, `back`% re-read one of the two records before, `jump`% read a record anywhere and come back (a database's scan: B-tree pages read mostly in file order, interior and overflow pages elsewhere) |
//! | `hotset[:size=,bs=,hot=,hit=,count=,seed=]` | `count` random reads, `hit`% of them within a hot set of `hot` bytes at a random place, the rest anywhere (an index's upper levels, a cache's working set) |
//! | `iozone:TEST[:size=,bs=]` | iozone's read tests: `read`, `reread`, `reverse`, `stride`, `random`, `mix`, `pread` |
//!
//! Sizes take units (`4k`, `1m`, `2g`, `8p` for pages). Defaults: `size=64m`, `bs=4k`;
//! `paper` patterns are in pages. Random patterns are seeded and reproducible.

use crate::units::{parse_size, Bytes, MAX_MODELLED_BYTES, MAX_PATTERN_READS, PAGE_SIZE};
use crate::workload::{Event, FileSpec, Workload};

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// The paper's read-R-seek-S pattern, in pages.
    Paper {
        /// Pages per read.
        read_pages: u64,
        /// Pages skipped after each read.
        seek_pages: u64,
        /// Number of reads.
        repeat: u64,
        /// Page of the first read.
        first_page: u64,
    },
    /// Sequential reads over the whole file.
    Sequential {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
    },
    /// Backward reads over the whole file.
    Reverse {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
    },
    /// One `bs` read every `stride` bytes.
    Stride {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Distance between read starts.
        stride: Bytes,
    },
    /// Random aligned reads.
    Random {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Number of reads.
        count: u64,
        /// Random seed.
        seed: u64,
    },
    /// Sequential streams over slices of one file, round robin.
    Interleaved {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Number of streams.
        streams: u64,
    },
    /// Groups of adjacent reads in shuffled order.
    Shuffled {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Reads per shuffled group.
        group: u64,
        /// Random seed.
        seed: u64,
    },
    /// Many files read sequentially, round robin.
    ManyFiles {
        /// Number of files.
        files: u64,
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
    },
    /// Half the reads continue sequentially, half jump to a random record (iozone's mix).
    RandomMix {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Number of reads.
        count: u64,
        /// Random seed.
        seed: u64,
    },
    /// Runs read in order, each followed by a forward skip.
    Skips {
        /// File size.
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Bytes read in order between two skips.
        run: Bytes,
        /// Bytes skipped after each run.
        skip: Bytes,
    },
    /// A k-way merge of sorted runs laid out one after another in one file.
    Merge {
        /// File size (all runs together).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Number of runs merged.
        ways: u64,
        /// Random seed (which run has the next smallest key).
        seed: u64,
    },
    /// The file in order with noise: swaps of two neighbouring records, steps back, jumps
    /// elsewhere and back (percent of steps each).
    Noisy {
        /// File size.
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Percent of steps that read the next two records swapped.
        swap: u64,
        /// Percent of steps that re-read one of the two records before.
        back: u64,
        /// Percent of steps that read one record anywhere, then go on where they were.
        jump: u64,
        /// Random seed.
        seed: u64,
    },
    /// Random reads, most of them within a hot set.
    HotSet {
        /// File size.
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
        /// Bytes of the hot set.
        hot: Bytes,
        /// Percent of reads within it.
        hit: u64,
        /// Number of reads.
        count: u64,
        /// Random seed.
        seed: u64,
    },
    /// The file read twice from start to end (iozone's re-read).
    Reread {
        /// File size (per file).
        size: Bytes,
        /// Bytes per read.
        bs: Bytes,
    },
}

/// Every pattern name, for help and errors.
pub const PATTERN_NAMES: &[&str] = &[
    "paper",
    "seq",
    "reverse",
    "stride",
    "random",
    "interleaved",
    "shuffled",
    "manyfiles",
    "skips",
    "merge",
    "noisy",
    "hotset",
    "iozone",
];

struct Args<'a> {
    spec: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
    used: Vec<bool>,
}

impl<'a> Args<'a> {
    fn parse(spec: &'a str, text: &'a str) -> Result<Args<'a>, String> {
        let mut pairs = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("pattern '{spec}': '{part}' should be KEY=VALUE"))?;
            pairs.push((k.trim(), v.trim()));
        }
        let used = vec![false; pairs.len()];
        Ok(Args { spec, pairs, used })
    }

    fn get(&mut self, key: &str) -> Option<&'a str> {
        let i = self.pairs.iter().position(|(k, _)| *k == key)?;
        self.used[i] = true;
        Some(self.pairs[i].1)
    }

    fn size(&mut self, key: &str, default: u64) -> Result<Bytes, String> {
        match self.get(key) {
            None => Ok(Bytes(default)),
            Some(v) => parse_size(v).map_err(|e| format!("pattern '{}': {key}: {e}", self.spec)),
        }
    }

    fn number(&mut self, key: &str, default: u64) -> Result<u64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                format!(
                    "pattern '{}': {key} must be a whole number, not '{v}'",
                    self.spec
                )
            }),
        }
    }

    fn finish(self) -> Result<(), String> {
        match self.pairs.iter().zip(&self.used).find(|(_, u)| !**u) {
            Some(((k, _), _)) => Err(format!("pattern '{}': unknown key '{k}'", self.spec)),
            None => Ok(()),
        }
    }
}

const DEFAULT_SIZE: u64 = 64 << 20;
const DEFAULT_BS: u64 = 4096;

impl Pattern {
    /// Parse a spec such as `seq:size=1g,bs=16k` or `paper:read=30,seek=2,repeat=984`.
    ///
    /// # Errors
    /// An unknown pattern or key, or a value that does not parse, naming it.
    pub fn parse(spec: &str) -> Result<Pattern, String> {
        let spec = spec.trim();
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let (name, rest) = if name == "iozone" {
            let (test, rest) = rest.split_once(':').unwrap_or((rest, ""));
            (test, rest)
        } else {
            (name, rest)
        };
        let iozone = spec.starts_with("iozone");
        let mut a = Args::parse(spec, rest)?;
        let size = a.size("size", DEFAULT_SIZE)?;
        let bs = a.size("bs", if iozone { 128 << 10 } else { DEFAULT_BS })?;
        let pattern = match (iozone, name) {
            (false, "paper") => {
                let p = Pattern::Paper {
                    read_pages: a.number("read", 0)?,
                    seek_pages: a.number("seek", 0)?,
                    repeat: a.number("repeat", 0)?,
                    first_page: a.number("first", 0)?,
                };
                if let Pattern::Paper { read_pages: 0, .. } | Pattern::Paper { repeat: 0, .. } = p {
                    return Err(format!("pattern '{spec}': paper needs read=R,seek=S,repeat=N with R and N above 0"));
                }
                p
            }
            (false, "seq") | (true, "read") | (true, "pread") => Pattern::Sequential { size, bs },
            (false, "reverse") | (true, "reverse") => Pattern::Reverse { size, bs },
            (false, "stride") | (true, "stride") => {
                let default_stride = bs.0.saturating_mul(if iozone { 17 } else { 8 });
                let stride = a.size("stride", default_stride)?;
                if stride < bs {
                    return Err(format!("pattern '{spec}': stride must be at least bs"));
                }
                Pattern::Stride { size, bs, stride }
            }
            (false, "random") | (true, "random") => {
                let count = a.number("count", size.0 / bs.0.max(1))?;
                Pattern::Random { size, bs, count, seed: a.number("seed", 1)? }
            }
            (true, "mix") => {
                let count = a.number("count", size.0 / bs.0.max(1))?;
                Pattern::RandomMix { size, bs, count, seed: a.number("seed", 1)? }
            }
            (true, "reread") => Pattern::Reread { size, bs },
            (false, "interleaved") => Pattern::Interleaved { size, bs, streams: a.number("streams", 16)? },
            (false, "shuffled") => {
                Pattern::Shuffled { size, bs, group: a.number("group", 16)?, seed: a.number("seed", 1)? }
            }
            (false, "manyfiles") => Pattern::ManyFiles { files: a.number("files", 1000)?, size, bs },
            (false, "skips") => {
                let run = a.size("run", 32 << 20)?;
                let skip = a.size("skip", 4 << 20)?;
                if run.0 == 0 {
                    return Err(format!("pattern '{spec}': run must be above 0"));
                }
                if run.0.max(skip.0) > MAX_MODELLED_BYTES {
                    return Err(format!(
                        "pattern '{spec}': run and skip must be at most the largest file modelled ({} GiB)",
                        MAX_MODELLED_BYTES >> 30
                    ));
                }
                Pattern::Skips { size, bs, run, skip }
            }
            (false, "merge") => Pattern::Merge { size, bs, ways: a.number("ways", 12)?, seed: a.number("seed", 1)? },
            (false, "noisy") => {
                let (swap, back, jump) = (a.number("swap", 2)?, a.number("back", 1)?, a.number("jump", 1)?);
                if swap.saturating_add(back).saturating_add(jump) > 100 {
                    return Err(format!("pattern '{spec}': swap, back and jump are percents of the steps: at most 100 together"));
                }
                Pattern::Noisy { size, bs, swap, back, jump, seed: a.number("seed", 1)? }
            }
            (false, "hotset") => {
                let hot = a.size("hot", (size.0 / 16).max(bs.0))?;
                let hit = a.number("hit", 90)?;
                if hit > 100 || hot < bs || hot > size {
                    return Err(format!("pattern '{spec}': hit is a percent (at most 100), and hot must hold a read and fit in size"));
                }
                let count = a.number("count", size.0 / bs.0.max(1))?;
                Pattern::HotSet { size, bs, hot, hit, count, seed: a.number("seed", 1)? }
            }
            (true, other) => {
                return Err(format!(
                    "unknown iozone test '{other}'; known: read, reread, reverse, stride, random, mix, pread"
                ))
            }
            (false, other) => {
                return Err(format!("unknown pattern '{other}'; known patterns: {}", PATTERN_NAMES.join(", ")))
            }
        };
        a.finish()?;
        pattern.validate(spec)?;
        Ok(pattern)
    }

    fn validate(&self, spec: &str) -> Result<(), String> {
        let (size, bs) = match *self {
            Pattern::Paper { .. } => return self.within_limits(spec),
            Pattern::Sequential { size, bs }
            | Pattern::Reverse { size, bs }
            | Pattern::Stride { size, bs, .. }
            | Pattern::Random { size, bs, .. }
            | Pattern::RandomMix { size, bs, .. }
            | Pattern::Reread { size, bs }
            | Pattern::Skips { size, bs, .. }
            | Pattern::Merge { size, bs, .. }
            | Pattern::Noisy { size, bs, .. }
            | Pattern::HotSet { size, bs, .. }
            | Pattern::Interleaved { size, bs, .. }
            | Pattern::Shuffled { size, bs, .. }
            | Pattern::ManyFiles { size, bs, .. } => (size, bs),
        };
        if bs.0 == 0 || size.0 == 0 {
            return Err(format!("pattern '{spec}': size and bs must be above 0"));
        }
        if bs > size {
            return Err(format!(
                "pattern '{spec}': bs ({}) is larger than size ({})",
                bs.0, size.0
            ));
        }
        match *self {
            Pattern::Interleaved { streams: 0, .. }
            | Pattern::Merge { ways: 0, .. }
            | Pattern::Shuffled { group: 0, .. }
            | Pattern::ManyFiles { files: 0, .. } => {
                return Err(format!(
                    "pattern '{spec}': streams, ways, group and files must be above 0"
                ))
            }
            _ => {}
        }
        self.within_limits(spec)
    }

    /// Whether the pattern fits what the simulator models: its files within
    /// [`MAX_MODELLED_BYTES`] together, its reads within [`MAX_PATTERN_READS`].
    fn within_limits(&self, spec: &str) -> Result<(), String> {
        let bytes = self.modelled_bytes();
        if bytes > MAX_MODELLED_BYTES {
            return Err(format!(
                "pattern '{spec}': its files hold {} in all, more than the simulator models ({} GiB); make size (or files, streams, ways) smaller",
                if bytes == u64::MAX { "more than 16 EiB".to_string() } else { format!("{bytes} bytes") },
                MAX_MODELLED_BYTES >> 30
            ));
        }
        let reads = self.reads();
        if reads > MAX_PATTERN_READS {
            return Err(format!(
                "pattern '{spec}': {} reads, more than a pattern may make ({MAX_PATTERN_READS}); make bs (or count) larger or size smaller",
                if reads == u64::MAX { "too many".to_string() } else { reads.to_string() },
            ));
        }
        Ok(())
    }

    /// Bytes of all its files together, as the workload makes them (saturating).
    fn modelled_bytes(&self) -> u64 {
        match *self {
            Pattern::Paper {
                read_pages,
                seek_pages,
                repeat,
                first_page,
            } => read_pages
                .checked_add(seek_pages)
                .and_then(|step| step.checked_mul(repeat))
                .and_then(|p| p.checked_add(first_page))
                .and_then(|p| p.checked_add(1024))
                .and_then(|p| p.checked_mul(PAGE_SIZE))
                .unwrap_or(u64::MAX),
            Pattern::Merge { size, bs, ways, .. } => (size.0 / ways).max(bs.0).saturating_mul(ways),
            Pattern::Interleaved {
                size, bs, streams, ..
            } => (size.0 / streams).max(bs.0).saturating_mul(streams),
            Pattern::ManyFiles { files, size, .. } => files.saturating_mul(size.0),
            Pattern::Sequential { size, .. }
            | Pattern::Reverse { size, .. }
            | Pattern::Stride { size, .. }
            | Pattern::Random { size, .. }
            | Pattern::RandomMix { size, .. }
            | Pattern::Reread { size, .. }
            | Pattern::Skips { size, .. }
            | Pattern::Noisy { size, .. }
            | Pattern::HotSet { size, .. }
            | Pattern::Shuffled { size, .. } => size.0,
        }
    }

    /// How many reads the workload makes (saturating).
    pub fn reads(&self) -> u64 {
        match *self {
            Pattern::Paper { repeat, .. } => repeat,
            Pattern::Sequential { size, bs }
            | Pattern::Reverse { size, bs }
            | Pattern::Shuffled { size, bs, .. } => size.0.div_ceil(bs.0),
            Pattern::Reread { size, bs } => size.0.div_ceil(bs.0).saturating_mul(2),
            Pattern::Stride { size, stride, .. } => size.0.div_ceil(stride.0.max(1)),
            Pattern::Random { count, .. }
            | Pattern::RandomMix { count, .. }
            | Pattern::HotSet { count, .. } => count,
            // Each step one read, a swap two: at most twice the records.
            Pattern::Noisy { size, bs, .. } => size.0.div_ceil(bs.0).saturating_mul(2),
            Pattern::Skips {
                size,
                bs,
                run,
                skip,
                ..
            } => {
                let period = run.0.saturating_add(skip.0);
                size.0.div_ceil(period).saturating_mul(run.0.div_ceil(bs.0))
            }
            Pattern::Merge { size, bs, ways, .. } => {
                let per_run = (size.0 / ways).max(bs.0);
                per_run.div_ceil(bs.0).saturating_mul(ways)
            }
            Pattern::Interleaved {
                size, bs, streams, ..
            } => {
                let per_stream = (size.0 / streams).max(bs.0);
                per_stream.div_ceil(bs.0).saturating_mul(streams)
            }
            Pattern::ManyFiles { files, size, bs } => size.0.div_ceil(bs.0).saturating_mul(files),
        }
    }

    /// The workload this pattern describes: files and a lazily generated stream of reads.
    pub fn workload(&self) -> Workload {
        let one_file = |size: Bytes| {
            vec![FileSpec {
                name: "file0".into(),
                size,
            }]
        };
        let open0 = std::iter::once(Event::Open { handle: 0, file: 0 });
        let read0 = |offset: u64, len: u64| Event::Read {
            handle: 0,
            offset: Bytes(offset),
            len: Bytes(len),
        };
        match *self {
            Pattern::Paper {
                read_pages,
                seek_pages,
                repeat,
                first_page,
            } => {
                let step = read_pages + seek_pages;
                // The file goes on well past the last read: the paper's windows are not cut at EOF.
                let size = Bytes::of_pages(first_page + step * repeat + 1024);
                let reads = (0..repeat).map(move |i| {
                    let start = first_page + i * step;
                    Event::Read {
                        handle: 0,
                        offset: Bytes::of_page(start),
                        len: Bytes::of_pages(read_pages),
                    }
                });
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Sequential { size, bs } => {
                let reads = (0..size.0.div_ceil(bs.0)).map(move |i| read0(i * bs.0, bs.0));
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Noisy {
                size,
                bs,
                swap,
                back,
                jump,
                seed,
            } => {
                let records = size.0.div_ceil(bs.0);
                let mut rng = SplitMix64(seed);
                let mut next = 0u64; // the next record in order
                let mut pending: Option<u64> = None; // a swap's second read
                let reads = std::iter::from_fn(move || {
                    if let Some(r) = pending.take() {
                        return Some(r);
                    }
                    if next >= records {
                        return None;
                    }
                    let roll = rng.below(100);
                    let record = if roll < swap && next + 1 < records {
                        pending = Some(next);
                        next += 2;
                        next - 1
                    } else if roll < swap + back && next > 0 {
                        next - 1 - rng.below(2.min(next))
                    } else if roll < swap + back + jump {
                        rng.below(records)
                    } else {
                        next += 1;
                        next - 1
                    };
                    Some(record)
                })
                .map(move |r| read0(r * bs.0, bs.0.min(size.0 - r * bs.0)));
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::HotSet {
                size,
                bs,
                hot,
                hit,
                count,
                seed,
            } => {
                let records = (size.0 / bs.0).max(1);
                let hot_records = (hot.0 / bs.0).max(1).min(records);
                let mut rng = SplitMix64(seed);
                let hot_first = rng.below(records - hot_records + 1);
                let reads = (0..count).map(move |_| {
                    let record = if rng.below(100) < hit {
                        hot_first + rng.below(hot_records)
                    } else {
                        rng.below(records)
                    };
                    read0(record * bs.0, bs.0)
                });
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Reread { size, bs } => {
                let n = size.0.div_ceil(bs.0);
                let reads = (0..2 * n).map(move |i| read0((i % n) * bs.0, bs.0));
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Reverse { size, bs } => {
                let n = size.0.div_ceil(bs.0);
                let reads = (0..n).rev().map(move |i| read0(i * bs.0, bs.0));
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Stride { size, bs, stride } => {
                let reads = (0..size.0.div_ceil(stride.0)).map(move |i| read0(i * stride.0, bs.0));
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Random {
                size,
                bs,
                count,
                seed,
            } => {
                let records = (size.0 / bs.0).max(1);
                let mut rng = SplitMix64(seed);
                let reads = (0..count).map(move |_| read0(rng.below(records) * bs.0, bs.0));
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::RandomMix {
                size,
                bs,
                count,
                seed,
            } => {
                let records = (size.0 / bs.0).max(1);
                let mut rng = SplitMix64(seed);
                let mut next = 0;
                let reads = (0..count).map(move |_| {
                    let record = if rng.below(2) == 0 {
                        rng.below(records)
                    } else {
                        next % records
                    };
                    next = record + 1;
                    read0(record * bs.0, bs.0)
                });
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Skips {
                size,
                bs,
                run,
                skip,
            } => {
                // Reads of `bs` within each run (the last one of a run shorter), run after run.
                let period = run.0 + skip.0;
                let reads = (0..size.0.div_ceil(period)).flat_map(move |r| {
                    let start = r * period;
                    let end = (start + run.0).min(size.0);
                    (start..end)
                        .step_by(bs.0 as usize)
                        .map(move |o| read0(o, bs.0.min(end - o)))
                });
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Merge {
                size,
                bs,
                ways,
                seed,
            } => {
                let per_run = (size.0 / ways).max(bs.0);
                let mut left: Vec<u64> = vec![per_run; ways as usize];
                let mut total = per_run * ways;
                let mut rng = SplitMix64(seed);
                let reads = std::iter::from_fn(move || {
                    if total == 0 {
                        return None;
                    }
                    // The run holding the next smallest key, weighted by what it has left.
                    let mut pick = rng.below(total);
                    let w = left
                        .iter()
                        .position(|&l| {
                            if pick < l {
                                true
                            } else {
                                pick -= l;
                                false
                            }
                        })
                        .expect("total is the sum of what is left");
                    let done = per_run - left[w];
                    let len = bs.0.min(left[w]);
                    left[w] -= len;
                    total -= len;
                    Some(read0(w as u64 * per_run + done, len))
                });
                Workload {
                    files: one_file(Bytes(per_run * ways)),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Interleaved { size, bs, streams } => {
                let per_stream = (size.0 / streams).max(bs.0);
                let reads_per_stream = per_stream.div_ceil(bs.0);
                let reads = (0..reads_per_stream * streams).map(move |i| {
                    let (round, stream) = (i / streams, i % streams);
                    read0(
                        stream * per_stream + round * bs.0,
                        bs.0.min(per_stream - round * bs.0),
                    )
                });
                Workload {
                    files: one_file(Bytes(per_stream * streams)),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::Shuffled {
                size,
                bs,
                group,
                seed,
            } => {
                let n = size.0.div_ceil(bs.0);
                let mut rng = SplitMix64(seed);
                let mut order: Vec<u64> = Vec::new();
                let reads = (0..n.div_ceil(group)).flat_map(move |g| {
                    let lo = g * group;
                    let hi = (lo + group).min(n);
                    order.clear();
                    order.extend(lo..hi);
                    for i in (1..order.len()).rev() {
                        let j = rng.below(i as u64 + 1) as usize;
                        order.swap(i, j);
                    }
                    order
                        .clone()
                        .into_iter()
                        .map(move |r| read0(r * bs.0, bs.0))
                });
                Workload {
                    files: one_file(size),
                    events: Box::new(open0.chain(reads)),
                }
            }
            Pattern::ManyFiles { files, size, bs } => {
                let specs = (0..files)
                    .map(|i| FileSpec {
                        name: format!("file{i}"),
                        size,
                    })
                    .collect();
                let opens = (0..files).map(|i| Event::Open {
                    handle: i as u32,
                    file: i as u32,
                });
                let rounds = size.0.div_ceil(bs.0);
                let reads = (0..rounds * files).map(move |i| {
                    let (round, f) = (i / files, i % files);
                    Event::Read {
                        handle: f as u32,
                        offset: Bytes(round * bs.0),
                        len: bs,
                    }
                });
                Workload {
                    files: specs,
                    events: Box::new(opens.chain(reads)),
                }
            }
        }
    }

    /// Pages the pattern reads in all (with repeats), for sizing benchmarks.
    pub fn pages_read(&self) -> u64 {
        let pages = |b: Bytes| b.0.div_ceil(PAGE_SIZE);
        match *self {
            Pattern::Paper {
                read_pages, repeat, ..
            } => read_pages * repeat,
            Pattern::Sequential { size, .. } | Pattern::Reverse { size, .. } => pages(size),
            Pattern::Reread { size, .. } => 2 * pages(size),
            Pattern::Stride { size, bs, stride } => size.0.div_ceil(stride.0) * pages(bs),
            Pattern::Random { bs, count, .. }
            | Pattern::RandomMix { bs, count, .. }
            | Pattern::HotSet { bs, count, .. } => count * pages(bs),
            Pattern::Noisy {
                size,
                bs,
                back,
                jump,
                ..
            } => {
                // The records once each, plus the re-reads and jumps.
                let records = size.0.div_ceil(bs.0);
                pages(size) + records * (back + jump) / 100 * pages(bs)
            }
            Pattern::Interleaved { size, .. } | Pattern::Shuffled { size, .. } => pages(size),
            Pattern::Skips {
                size, run, skip, ..
            } => {
                let period = run.0 + skip.0;
                let full = size.0 / period;
                let tail = (size.0 - full * period).min(run.0);
                (full * run.0 + tail).div_ceil(PAGE_SIZE)
            }
            Pattern::Merge { size, ways, bs, .. } => pages(Bytes((size.0 / ways).max(bs.0) * ways)),
            Pattern::ManyFiles { files, size, .. } => files * pages(size),
        }
    }
}

/// A small, fast, seeded generator (SplitMix64): patterns must be the same on every machine.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(p: &Pattern) -> Vec<(u64, u64)> {
        p.workload()
            .events
            .filter_map(|e| match e {
                Event::Read { offset, len, .. } => Some((offset.0, len.0)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn paper_pattern_reads_then_seeks() {
        let p = Pattern::parse("paper:read=30,seek=2,repeat=3").unwrap();
        let r: Vec<(u64, u64)> = reads(&p)
            .iter()
            .map(|&(o, l)| (o / 4096, l / 4096))
            .collect();
        assert_eq!(r, [(0, 30), (32, 30), (64, 30)]);
    }

    #[test]
    fn reverse_and_stride() {
        assert_eq!(
            reads(&Pattern::parse("reverse:size=12k,bs=4k").unwrap()),
            [(8192, 4096), (4096, 4096), (0, 4096)]
        );
        assert_eq!(
            reads(&Pattern::parse("stride:size=32k,bs=4k,stride=16k").unwrap()),
            [(0, 4096), (16384, 4096)]
        );
    }

    #[test]
    fn interleaved_streams_take_turns() {
        let r = reads(&Pattern::parse("interleaved:streams=2,size=16k,bs=4k").unwrap());
        assert_eq!(r, [(0, 4096), (8192, 4096), (4096, 4096), (12288, 4096)]);
    }

    #[test]
    fn skips_read_runs_and_jump_forward() {
        let r = reads(&Pattern::parse("skips:size=40k,bs=4k,run=8k,skip=12k").unwrap());
        assert_eq!(r, [(0, 4096), (4096, 4096), (20480, 4096), (24576, 4096)]);
    }

    #[test]
    fn a_merge_reads_every_run_in_order_each_once() {
        let p = Pattern::parse("merge:ways=3,size=96k,bs=4k,seed=5").unwrap();
        let r = reads(&p);
        assert_eq!(r.len(), 24);
        for w in 0..3u64 {
            let run: Vec<u64> = r.iter().map(|x| x.0).filter(|&o| o / 32768 == w).collect();
            let want: Vec<u64> = (0..8).map(|i| w * 32768 + i * 4096).collect();
            assert_eq!(run, want, "run {w} in order");
        }
        assert_ne!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            (0..24).map(|i| i * 4096).collect::<Vec<_>>(),
            "interleaved"
        );
        assert_eq!(p.pages_read(), 24);
    }

    #[test]
    fn shuffled_groups_cover_each_read_once() {
        let mut r = reads(&Pattern::parse("shuffled:group=16,size=256k,bs=4k,seed=7").unwrap());
        assert_ne!(
            r,
            (0..64).map(|i| (i * 4096, 4096)).collect::<Vec<_>>(),
            "order is shuffled"
        );
        r.sort();
        assert_eq!(r, (0..64).map(|i| (i * 4096, 4096)).collect::<Vec<_>>());
    }

    #[test]
    fn bad_specs_are_refused_with_a_reason() {
        for bad in [
            "nope",
            "seq:size",
            "seq:size=1q",
            "seq:bogus=1",
            "paper:read=0",
            "seq:size=4k,bs=8k",
            "iozone:what",
        ] {
            let e = Pattern::parse(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }
}
