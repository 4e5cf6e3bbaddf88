//! The live kernel's readahead, beside the model's.
//!
//! Linux 6.16+ publishes every readahead decision through tracepoints (tracefs,
//! `events/readahead/`): `page_cache_sync_ra` and `page_cache_async_ra` when a read misses or
//! touches a marker (with the state before the decision), then `page_cache_ra_order` with the
//! window it decided (index, size, async size, folio order, `ra_pages`), or
//! `page_cache_ra_unbounded` for reads that bypass the window (a lone random read, `WILLNEED`,
//! and the single-page fallback of `page_cache_ra_order`, which repeats a window already seen).
//!
//! This module:
//! * parses those events from tracefs text ([`parse_event`]) and turns them into one
//!   [`Window`] per decision ([`kernel_windows`]);
//! * reads and writes a **kernel trace directory** ([`TraceDir`]): the reads a program made
//!   (`reads.csv` or `reads.strace`), the kernel's events for its files (`kernel.txt`) and what
//!   the machine was (`meta.json`: kernel, devices' `read_ahead_kb` and `max_sectors_kb`, files'
//!   device and inode);
//! * replays the same reads through the `linux-ondemand` model and lines its windows up with the
//!   kernel's ([`compare`]).
//!
//! Recording (tracefs, sysfs, running patterns for real) is in [`capture`].

pub mod capture;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::policy::{PolicyConfig, Window};
use crate::sim::{SimConfig, Simulator};
use crate::trace::{self, Trace};

/// Which readahead tracepoint an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaEventKind {
    /// `page_cache_sync_ra`: a read missed the cache (state before the decision).
    SyncRa,
    /// `page_cache_async_ra`: a read touched a marked folio (state before the decision).
    AsyncRa,
    /// `page_cache_ra_order`: a window about to be read (after the decision).
    RaOrder,
    /// `page_cache_ra_unbounded`: pages read without a window.
    RaUnbounded,
}

/// One readahead tracepoint hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaEvent {
    /// Which tracepoint.
    pub kind: RaEventKind,
    /// The task that hit it.
    pub pid: u32,
    /// The filesystem's device, `(major, minor)`.
    pub dev: (u32, u32),
    /// The file's inode number.
    pub ino: u64,
    /// `index`: the page the event is about.
    pub index: u64,
    /// `size` (`nr_to_read` for unbounded).
    pub size: u64,
    /// `async_size` (`lookahead_size` for unbounded).
    pub async_size: u64,
    /// `order` (0 for unbounded).
    pub order: u32,
    /// `ra_pages` (0 for unbounded).
    pub ra_pages: u64,
    /// `req_count` (sync and async events only).
    pub req_count: u64,
}

/// Parse one line of tracefs text. `None` for lines that are not readahead events (comments,
/// other events, lost-event notices); `Some(Err)` for a readahead event that cannot be read.
pub fn parse_event(line: &str) -> Option<Result<RaEvent, String>> {
    let (kind, at) = [
        (RaEventKind::SyncRa, ": page_cache_sync_ra: "),
        (RaEventKind::AsyncRa, ": page_cache_async_ra: "),
        (RaEventKind::RaOrder, ": page_cache_ra_order: "),
        (RaEventKind::RaUnbounded, ": page_cache_ra_unbounded: "),
    ]
    .iter()
    .find_map(|&(k, tag)| line.find(tag).map(|i| (k, (i, i + tag.len()))))?;
    Some(parse_fields(kind, &line[..at.0], &line[at.1..]))
}

fn parse_fields(kind: RaEventKind, head: &str, body: &str) -> Result<RaEvent, String> {
    // head: "<comm>-<pid> [cpu] flags timestamp"
    let task = head
        .split(" [")
        .next()
        .ok_or("no task before the CPU field")?
        .trim();
    let pid = task
        .rsplit('-')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("cannot read the task id in '{task}'"))?;
    let mut ev = RaEvent {
        kind,
        pid,
        dev: (0, 0),
        ino: 0,
        index: 0,
        size: 0,
        async_size: 0,
        order: 0,
        ra_pages: 0,
        req_count: 0,
    };
    let mut seen_index = false;
    for field in body.split_whitespace() {
        let Some((key, value)) = field.split_once('=') else {
            continue;
        };
        let num = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("{key}={v} is not a whole number"))
        };
        match key {
            "dev" => {
                let (ma, mi) = value
                    .split_once(':')
                    .ok_or_else(|| format!("dev={value} is not major:minor"))?;
                ev.dev = (num(ma)? as u32, num(mi)? as u32);
            }
            "ino" => {
                ev.ino = u64::from_str_radix(value, 16)
                    .map_err(|_| format!("ino={value} is not hexadecimal"))?
            }
            "index" => {
                ev.index = num(value)?;
                seen_index = true;
            }
            "size" | "nr_to_read" => ev.size = num(value)?,
            "async_size" | "lookahead_size" => ev.async_size = num(value)?,
            "order" => ev.order = num(value)? as u32,
            "ra_pages" => ev.ra_pages = num(value)?,
            "req_count" => ev.req_count = num(value)?,
            _ => {}
        }
    }
    if !seen_index || ev.ino == 0 {
        return Err("a readahead event without ino= and index=".into());
    }
    Ok(ev)
}

/// A file as the kernel names it: `((major, minor), inode)`.
pub type FileKey = ((u32, u32), u64);

/// The decisions in `events` (one file's or many), one window per decision, in order, keyed by
/// `(device, inode)`. A `page_cache_ra_unbounded` event that continues the window its task's
/// last `page_cache_ra_order` event opened (the kernel's single-page fallback, or a filesystem
/// without large folios) is part of that window, not a decision of its own.
pub fn kernel_windows(events: &[RaEvent]) -> BTreeMap<FileKey, Vec<Window>> {
    let mut out: BTreeMap<FileKey, Vec<Window>> = BTreeMap::new();
    // Per task, the window its last event opened (if that event was page_cache_ra_order).
    let mut open: HashMap<u32, (FileKey, Window)> = HashMap::new();
    for ev in events {
        let key = (ev.dev, ev.ino);
        match ev.kind {
            RaEventKind::RaOrder => {
                let w = Window {
                    start: ev.index,
                    size: ev.size,
                    async_size: ev.async_size,
                };
                out.entry(key).or_default().push(w);
                open.insert(ev.pid, (key, w));
            }
            RaEventKind::RaUnbounded => {
                let continues = open.remove(&ev.pid).is_some_and(|(k, w)| {
                    k == key && ev.index >= w.start && ev.index < w.start + w.size
                });
                if !continues {
                    out.entry(key).or_default().push(Window {
                        start: ev.index,
                        size: ev.size,
                        async_size: ev.async_size,
                    });
                }
            }
            RaEventKind::SyncRa | RaEventKind::AsyncRa => {
                open.remove(&ev.pid);
            }
        }
    }
    out
}

/// One file of a kernel trace directory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TracedFile {
    /// Path, as the reads name it.
    pub path: String,
    /// Device of its filesystem, `"major:minor"`.
    pub dev: String,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes when traced.
    pub size: u64,
    /// The device's `read_ahead_kb` when traced, if sysfs has it.
    pub ra_max_kb: Option<u64>,
    /// The device's `max_sectors_kb` when traced, if sysfs has it.
    pub io_max_kb: Option<u64>,
    /// Whether its cached pages were dropped before the run, so the kernel started cold as the
    /// model does. Only cold files are compared.
    #[serde(default)]
    pub cold: bool,
}

/// `meta.json` of a kernel trace directory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceMeta {
    /// `uname -r` of the traced kernel.
    pub kernel: String,
    /// What ran: `pattern SPEC` or the command line.
    pub source: String,
    /// The files read, with their devices' limits.
    pub files: Vec<TracedFile>,
    /// Largest folio order the kernel used for these files, as far as the events show (0: the
    /// filesystem has no large folios; 9 unless the events show otherwise).
    pub folio_max_order: u8,
}

impl TraceMeta {
    /// The traced device's `(read_ahead_kb, max_sectors_kb)`: those of the first file sysfs
    /// described.
    pub fn device_limits(&self) -> (Option<u64>, Option<u64>) {
        self.files
            .iter()
            .find(|f| f.ra_max_kb.is_some())
            .map_or((None, None), |f| (f.ra_max_kb, f.io_max_kb))
    }
}

/// A kernel trace directory: what `ahead trace --kernel` writes and `ahead compare` reads.
#[derive(Clone, Debug)]
pub struct TraceDir {
    /// The directory.
    pub dir: PathBuf,
    /// Its `meta.json`.
    pub meta: TraceMeta,
    /// The reads (`reads.csv` or `reads.strace`).
    pub reads: Trace,
    /// The kernel's readahead events for the traced files, in order.
    pub events: Vec<RaEvent>,
}

/// Name of the reads file in a trace directory, CSV form.
pub const READS_CSV: &str = "reads.csv";
/// Name of the reads file in a trace directory, strace form.
pub const READS_STRACE: &str = "reads.strace";
/// Name of the kernel events file in a trace directory.
pub const KERNEL_EVENTS: &str = "kernel.txt";
/// Name of the metadata file in a trace directory.
pub const META: &str = "meta.json";

impl TraceDir {
    /// Whether `path` looks like a kernel trace directory.
    pub fn is_trace_dir(path: &Path) -> bool {
        path.is_dir() && path.join(META).is_file()
    }

    /// The reads file of a trace directory.
    pub fn reads_path(dir: &Path) -> Result<PathBuf, String> {
        [READS_CSV, READS_STRACE]
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "{} has no {READS_CSV} or {READS_STRACE}: record one with `ahead trace --kernel -o DIR`",
                    dir.display()
                )
            })
    }

    /// A trace directory's `meta.json` alone.
    pub fn load_meta(dir: &Path) -> Result<TraceMeta, String> {
        let meta_path = dir.join(META);
        let text = std::fs::read_to_string(&meta_path).map_err(|e| {
            format!(
                "cannot read {}: {e} (is {} a directory written by `ahead trace --kernel`?)",
                meta_path.display(),
                dir.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", meta_path.display()))
    }

    /// Load a trace directory.
    pub fn load(dir: &Path) -> Result<TraceDir, String> {
        let meta = Self::load_meta(dir)?;
        let reads_path = Self::reads_path(dir)?;
        let reads =
            trace::read_path(&reads_path).map_err(|e| format!("{}: {e}", reads_path.display()))?;
        let events_path = dir.join(KERNEL_EVENTS);
        let text = std::fs::read_to_string(&events_path)
            .map_err(|e| format!("cannot read {}: {e}", events_path.display()))?;
        let mut events = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match parse_event(line) {
                Some(Ok(ev)) => events.push(ev),
                Some(Err(e)) => {
                    return Err(format!("{}: line {}: {e}", events_path.display(), i + 1))
                }
                None => {}
            }
        }
        Ok(TraceDir {
            dir: dir.to_path_buf(),
            meta,
            reads,
            events,
        })
    }

    /// The model settings that match the traced machine: its devices' maximum window and
    /// largest I/O (of the first file whose device sysfs described), its folio order, and a cache
    /// big enough that nothing is evicted (the traced runs are far below this machine's memory).
    pub fn sim_config(&self) -> SimConfig {
        let kb_pages = crate::units::kib_to_pages;
        let (ra_kb, io_kb) = self.meta.device_limits();
        let ra = ra_kb.map(kb_pages).unwrap_or(32);
        let io = io_kb.map(kb_pages).unwrap_or(ra);
        let pages: u64 = self.reads.files.iter().map(|f| f.size.pages_ceil()).sum();
        SimConfig {
            cache_pages: (pages as usize + 1024).max(1 << 16),
            policy: PolicyConfig {
                ra_max_pages: ra,
                io_max_pages: io,
                folio_max_order: self.meta.folio_max_order,
                ..PolicyConfig::default()
            },
            ..SimConfig::default()
        }
    }
}

/// The folio order the kernel's events show for a file: 0 if every async decision found the
/// order reset to 0 by the previous window (a filesystem without large folios), else `default`.
pub fn folio_order_from_events(events: &[RaEvent], default: u8) -> u8 {
    let asyncs: Vec<&RaEvent> = events
        .iter()
        .filter(|e| e.kind == RaEventKind::AsyncRa)
        .collect();
    // An async event after an async window sees order >= 2 when large folios are on.
    let after_async_window = asyncs.iter().skip(1);
    if asyncs.len() >= 2 && after_async_window.clone().all(|e| e.order == 0) {
        0
    } else {
        default
    }
}

/// One file's windows, kernel beside model.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FileComparison {
    /// The file.
    pub path: String,
    /// The kernel's decisions, in order.
    pub kernel: Vec<Window>,
    /// The model's decisions, in order.
    pub model: Vec<Window>,
    /// Kernel windows the model made too (start, size and async size equal), each model window
    /// matched at most once.
    pub identical: usize,
    /// Position of the first decision where the two sequences differ, if they do.
    pub first_difference: Option<usize>,
    /// Whether the file counts in the comparison (it was read from a cold cache).
    pub compared: bool,
}

impl FileComparison {
    fn new(
        path: String,
        kernel: Vec<Window>,
        model: Vec<Window>,
        compared: bool,
    ) -> FileComparison {
        let mut pool: HashMap<Window, usize> = HashMap::new();
        for w in &model {
            *pool.entry(*w).or_default() += 1;
        }
        let identical = kernel
            .iter()
            .filter(|w| match pool.get_mut(w) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            })
            .count();
        let first_difference =
            (0..kernel.len().max(model.len())).find(|&i| kernel.get(i) != model.get(i));
        FileComparison {
            path,
            kernel,
            model,
            identical,
            first_difference,
            compared,
        }
    }
}

/// A whole trace directory compared.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Comparison {
    /// Per file, in the order of the reads.
    pub files: Vec<FileComparison>,
    /// The model settings used.
    pub ra_max_pages: u64,
    /// Largest I/O the model used, in pages.
    pub io_max_pages: u64,
    /// Folio order the model used.
    pub folio_max_order: u8,
}

impl Comparison {
    fn compared(&self) -> impl Iterator<Item = &FileComparison> {
        self.files.iter().filter(|f| f.compared)
    }

    /// Kernel windows over the compared files.
    pub fn kernel_windows(&self) -> usize {
        self.compared().map(|f| f.kernel.len()).sum()
    }

    /// Model windows over the compared files.
    pub fn model_windows(&self) -> usize {
        self.compared().map(|f| f.model.len()).sum()
    }

    /// Kernel windows the model reproduced exactly, over the compared files.
    pub fn identical(&self) -> usize {
        self.compared().map(|f| f.identical).sum()
    }

    /// Share of the kernel's windows reproduced exactly, counting windows the model made and
    /// the kernel did not as misses too: `identical / max(kernel, model)`. 1.0 when neither made
    /// any.
    pub fn exact_share(&self) -> f64 {
        let n = self.kernel_windows().max(self.model_windows());
        if n == 0 {
            1.0
        } else {
            self.identical() as f64 / n as f64
        }
    }
}

/// Replay a trace directory's reads through the `linux-ondemand` model set up like the traced
/// machine, and line the model's windows up with the kernel's, file by file.
pub fn compare(dir: &TraceDir) -> Result<Comparison, String> {
    compare_with(dir, dir.sim_config())
}

/// [`compare`] with explicit model settings.
pub fn compare_with(dir: &TraceDir, config: SimConfig) -> Result<Comparison, String> {
    let mut sim = Simulator::new("linux-ondemand", config)?;
    sim.record_windows();
    sim.run_workload(dir.reads.clone().into_workload())?;
    let mut model: Vec<Vec<Window>> = vec![Vec::new(); dir.reads.files.len()];
    for fw in sim.windows() {
        model[fw.file as usize].push(fw.window);
    }
    let mut kernel = kernel_windows(&dir.events);
    let mut files = Vec::new();
    for (i, f) in dir.reads.files.iter().enumerate() {
        let traced = dir.meta.files.iter().find(|t| t.path == f.name);
        let key = traced.and_then(|t| Some((parse_dev(&t.dev)?, t.ino)));
        let k = key.and_then(|k| kernel.remove(&k)).unwrap_or_default();
        files.push(FileComparison::new(
            f.name.clone(),
            k,
            std::mem::take(&mut model[i]),
            traced.is_some_and(|t| t.cold),
        ));
    }
    Ok(Comparison {
        files,
        ra_max_pages: config.policy.ra_max_pages,
        io_max_pages: config.policy.io_max_pages,
        folio_max_order: config.policy.folio_max_order,
    })
}

/// `"254:0"` as `(254, 0)`.
pub fn parse_dev(text: &str) -> Option<(u32, u32)> {
    let (a, b) = text.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The model settings a trace brings with it, for the options the user did not give: the
/// maximum window and largest I/O of the traced files' device, and the page cache's folio
/// order, where they are known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceDefaults {
    /// The device's `read_ahead_kb`.
    pub ra_max_kb: Option<u64>,
    /// The device's `max_sectors_kb`.
    pub io_max_kb: Option<u64>,
    /// The largest folio order the traced kernel used.
    pub folio_max_order: Option<u8>,
}

/// A trace to replay, read once: its reads, the defaults it brings (a trace directory's
/// `meta.json`, or sysfs for traced files on this machine) and a phrase saying where they came
/// from (empty if nowhere). `input` is a trace file or a directory of `ahead trace --kernel`.
pub fn load_for_replay(input: &Path) -> Result<(Trace, TraceDefaults, String), String> {
    let dir = TraceDir::is_trace_dir(input);
    let reads_path = if dir {
        TraceDir::reads_path(input)?
    } else {
        input.to_path_buf()
    };
    let reads =
        trace::read_path(&reads_path).map_err(|e| format!("{}: {e}", reads_path.display()))?;
    let kb = |d: TraceDefaults| d.ra_max_kb.map(|v| format!("{v} KiB")).unwrap_or_default();
    if dir {
        let meta = TraceDir::load_meta(input)?;
        let (ra_max_kb, io_max_kb) = meta.device_limits();
        let d = TraceDefaults {
            ra_max_kb,
            io_max_kb,
            folio_max_order: Some(meta.folio_max_order),
        };
        let from = format!("read_ahead_kb {} recorded in {}", kb(d), input.display());
        return Ok((reads, d, from));
    }
    for f in &reads.files {
        if let (Some(ra), io) = crate::os::device_limits(Path::new(&f.name)) {
            let d = TraceDefaults {
                ra_max_kb: Some(ra),
                io_max_kb: io,
                folio_max_order: None,
            };
            let from = format!("read_ahead_kb {} from sysfs for {}", kb(d), f.name);
            return Ok((reads, d, from));
        }
    }
    Ok((reads, TraceDefaults::default(), String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = "\
# tracer: nop
              dd-21003   [001] .....  1150.092887: page_cache_sync_ra: dev=254:0 ino=984002 index=0 req_count=1 order=0 size=0 async_size=0 ra_pages=2048 mmap_miss=0 prev_pos=-1
              dd-21003   [001] .....  1150.092890: page_cache_ra_order: dev=254:0 ino=984002 index=0 order=0 size=4 async_size=3 ra_pages=2048
 my task-name-77   [000] .....  1150.1: page_cache_ra_order: dev=254:0 ino=984002 index=100 order=0 size=8 async_size=8 ra_pages=32
 my task-name-77   [000] .....  1150.2: page_cache_ra_unbounded: dev=254:0 ino=984002 index=104 nr_to_read=4 lookahead_size=8
              dd-21003   [001] .....  1150.3: page_cache_ra_unbounded: dev=254:0 ino=984002 index=9000 nr_to_read=4 lookahead_size=0
";

    #[test]
    fn tracefs_lines_become_one_window_per_decision() {
        let events: Vec<RaEvent> = LINES
            .lines()
            .filter_map(parse_event)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(events.len(), 5);
        assert_eq!(events[0].kind, RaEventKind::SyncRa);
        assert_eq!(events[0].ino, 0x984002);
        assert_eq!(events[2].pid, 77);
        let w = kernel_windows(&events);
        let file = &w[&((254, 0), 0x984002)];
        // The unbounded event at 104 finishes task 77's window at 100; the one at 9000 is a
        // lone read of its own.
        let got: Vec<(u64, u64, u64)> = file
            .iter()
            .map(|w| (w.start, w.size, w.async_size))
            .collect();
        assert_eq!(got, [(0, 4, 3), (100, 8, 8), (9000, 4, 0)]);
    }

    #[test]
    fn a_malformed_event_is_an_error_not_a_skip() {
        let bad = "dd-1 [000] ..... 1.0: page_cache_ra_order: dev=254:0 ino=zz index=0";
        assert!(parse_event(bad).unwrap().is_err());
        assert!(parse_event("dd-1 [000] ..... 1.0: sched_switch: x=1").is_none());
    }
}
