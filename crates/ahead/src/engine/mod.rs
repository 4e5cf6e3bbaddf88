//! The engine: readahead on real files. The driver that acts where the simulator models.
//!
//! An application opens a file through an [`Engine`] and reads it with [`File::read_at`] (from
//! any number of threads) or through [`std::io::Read`] and [`std::io::Seek`]. For every read the
//! file's policy (the same code the simulator runs; `adaptive` by default) decides what to read
//! ahead; the engine keeps the pages in its own cache under one memory budget and reads them
//! from the device with `O_DIRECT`, so the kernel's page cache and readahead are out of the way:
//!
//! 1. **Policy.** The read is shown to the file's policy, which looks at the cache and starts
//!    I/O: the read itself if it wants (synchronous) and windows ahead of it (asynchronous),
//!    with a marker whose later touch is its cue.
//! 2. **Read what is missing.** Pages of the read still absent are read, one request per run.
//! 3. **Copy.** Each page is copied out as soon as it is ready; a reader waits for the pages it
//!    needs only. A page whose ahead read still waits in the backend's queue (behind others
//!    not yet sent to the device) is not waited for: the reader takes that read back and does
//!    it itself. A failed read fails the reads that waited for it with the system's error and
//!    caches nothing, so the next read tries again.
//!
//! The cache ([`cache`]) is an arena of page slots: its size is the budget, a hard limit.
//! Eviction (CLOCK) tells the policy, through refaults, when its windows outgrow the cache.
//! Reads go through a backend ([`backend`]): io_uring, a thread pool or plain `preadv` in the
//! caller, chosen by a probe at start, the choice and any fallback reported by [`Engine::stats`].
//! Ahead requests are at most the device's `max_sectors_kb` (a read a reader waits for goes whole, as
//! its policy sized it); the largest window follows the device's
//! `read_ahead_kb` (at least eight full requests, a quarter of the budget at most), and the
//! policy is told the latency and
//! bandwidth the engine measures, so windows keep the device busy rather than the kernel's
//! historical 128 KiB. The bandwidth estimate rises quickly and falls slowly: a light load
//! measures only what it asked of the device, and believed at once it would keep itself light.
//!
//! A file may change while it is read. The engine holds a read lease on each file
//! (`F_SETLEASE`): while it holds it nobody has opened the file for writing or truncated it, so
//! a read served from the cache trusts it with one atomic load and no system call. A writer's
//! open or a truncation breaks the lease; the engine's signal handler gives it up at once, and
//! the next read drops the file's cached pages and checks its size and modification time with
//! `fstat`, as every read does until the writer is gone and the lease is taken again. Where
//! no lease can be had (another user's file, a network filesystem, [`EngineBuilder::leases`]
//! off) every read makes that `fstat`.

mod backend;
mod cache;
mod file;

use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::policy::{self, DeviceEstimate, Hint, IoKind, IoRequest, Policy, PolicyConfig};
use crate::policy::{AppRead, RaContext};
use crate::units::{Bytes, PAGE_SIZE};

pub use backend::faults::{Fault, Faults};
pub use backend::os;
use backend::{Backend, Completer, ReadOp};
use cache::{Cache, Lookup};
use file::{FileData, Identity};

const PAGE: usize = PAGE_SIZE as usize;

/// The engine's default memory budget: 256 MiB.
pub const DEFAULT_BUDGET: u64 = 256 << 20;
/// The engine's default policy.
pub const DEFAULT_POLICY: &str = "adaptive";
/// Threads of the `threads` backend by default: enough for a queue depth of 32.
pub const DEFAULT_THREADS: usize = 32;
/// Smallest budget the engine accepts: 64 pages.
pub const MIN_BUDGET: u64 = 64 * PAGE_SIZE;
/// Reads in flight above which policies are told the queue is congested (and below half of
/// which, that it drained).
const CONGESTED: usize = 128;
/// Times a page may come back absent for one read before the engine reads it with a plain
/// `pread` (a file truncated meanwhile, or a cache too small for the threads reading it).
const ATTEMPTS: u32 = 3;

/// Which I/O backend reads for the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// io_uring if the probe finds it works, else `Threads`.
    Auto,
    /// io_uring (falls back to `Threads`, saying why, if the probe fails).
    Uring,
    /// A thread pool doing `preadv(2)`.
    Threads,
    /// `preadv(2)` in the reading thread, ahead reads included (no overlap: the baseline).
    Sync,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "uring" => Ok(BackendChoice::Uring),
            "threads" => Ok(BackendChoice::Threads),
            "sync" => Ok(BackendChoice::Sync),
            other => Err(format!(
                "unknown engine '{other}'; known: auto, uring, threads, sync"
            )),
        }
    }
}

/// Settings for an [`Engine`]; [`Engine::builder`] starts from the defaults.
#[derive(Clone, Debug)]
pub struct EngineBuilder {
    budget: u64,
    policy: String,
    backend: BackendChoice,
    direct: bool,
    io_uring_allowed: bool,
    record_requests: bool,
    threads: usize,
    ra_max_kb: Option<u64>,
    io_max_kb: Option<u64>,
    faults: Option<Faults>,
    leases: bool,
    device_estimate: Option<DeviceEstimate>,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            budget: DEFAULT_BUDGET,
            policy: DEFAULT_POLICY.into(),
            backend: BackendChoice::Auto,
            direct: true,
            io_uring_allowed: true,
            record_requests: false,
            threads: DEFAULT_THREADS,
            ra_max_kb: None,
            io_max_kb: None,
            faults: None,
            leases: true,
            device_estimate: None,
        }
    }
}

impl EngineBuilder {
    /// The memory budget in bytes: the most the cache ever holds (default 256 MiB).
    pub fn budget(mut self, bytes: u64) -> Self {
        self.budget = bytes;
        self
    }

    /// The readahead policy for files opened from now on (default `adaptive`).
    pub fn policy(mut self, name: &str) -> Self {
        self.policy = name.into();
        self
    }

    /// The I/O backend (default: io_uring if it works).
    pub fn backend(mut self, choice: BackendChoice) -> Self {
        self.backend = choice;
        self
    }

    /// Whether to read with `O_DIRECT` where the filesystem allows (default true). Without it
    /// files are read buffered with `POSIX_FADV_RANDOM`, as on a filesystem that refuses
    /// `O_DIRECT`.
    pub fn direct(mut self, on: bool) -> Self {
        self.direct = on;
        self
    }

    /// Behave as on a kernel without io_uring: the probe fails and the engine falls back, as
    /// it would on such a kernel (for tests, and for systems where io_uring misbehaves).
    pub fn without_io_uring(mut self) -> Self {
        self.io_uring_allowed = false;
        self
    }

    /// Keep a log of every request sent to the device ([`Engine::request_log`]): when, where,
    /// how large, and whether it was read ahead. For pictures of a policy's windows over time.
    pub fn record_requests(mut self, on: bool) -> Self {
        self.record_requests = on;
        self
    }

    /// Tell the policies this estimate of the device and never measure it: every run then
    /// decides alike, as the simulator does with a modelled device (tests that hold the engine
    /// to the simulator's decisions, reproducible benchmarks).
    pub fn device_estimate(mut self, estimate: DeviceEstimate) -> Self {
        self.device_estimate = Some(estimate);
        self
    }

    /// Threads of the `threads` backend (default 32).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    /// The largest readahead window in KiB, instead of the device's `read_ahead_kb`.
    pub fn ra_max_kb(mut self, kb: u64) -> Self {
        self.ra_max_kb = Some(kb);
        self
    }

    /// The largest single read in KiB, instead of the device's `max_sectors_kb`.
    pub fn io_max_kb(mut self, kb: u64) -> Self {
        self.io_max_kb = Some(kb);
        self
    }

    /// Wrap the backend in a fault injector driven by `faults` (tests and stress runs: see
    /// [`Faults`]). Every request, waited for or read ahead, passes through it.
    pub fn inject_faults(mut self, faults: Faults) -> Self {
        self.faults = Some(faults);
        self
    }

    /// Whether to hold a read lease on each file (default true), so that a read served from
    /// the cache needs no system call to know the file is unchanged. Off, every read checks
    /// the file's size and modification time with `fstat`. A lease makes a writer's open or a
    /// truncation wait while the engine gives it up: microseconds, or up to the kernel's
    /// `lease-break-time` if this process cannot run its signal handler (stopped in a
    /// debugger). A writer that opens with `O_NONBLOCK` (coreutils' `truncate` does) cannot
    /// wait, and is refused once with `EAGAIN`; its next attempt succeeds. See
    /// [`os::lease_signal`] for the signal it takes.
    pub fn leases(mut self, on: bool) -> Self {
        self.leases = on;
        self
    }

    /// Start the engine: allocate the cache, probe and start the backend.
    pub fn build(self) -> io::Result<Engine> {
        policy::validate_name(&self.policy)
            .and_then(|()| policy::by_name(&self.policy, PolicyConfig::default()).map(drop))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if self.budget < MIN_BUDGET {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a memory budget of {} bytes is too small: give at least {} KiB",
                    self.budget,
                    MIN_BUDGET / 1024
                ),
            ));
        }
        let slots = usize::try_from(self.budget / PAGE_SIZE)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "memory budget too large"))?;
        let core = Arc::new(Core {
            cache: Cache::new(slots).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot map a {} MiB cache: {e}", self.budget >> 20),
                )
            })?,
            counters: Counters::default(),
            meter: Mutex::new(Meter::new(self.device_estimate)),
            meter_version: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        });
        let completer: Arc<dyn Completer> = core.clone();
        let mut fallbacks = Vec::new();
        let threads = || -> io::Result<Box<dyn Backend>> {
            Ok(Box::new(backend::threads::ThreadsBackend::new(
                self.threads,
                completer.clone(),
            )?))
        };
        let backend: Box<dyn Backend> = match self.backend {
            BackendChoice::Sync => Box::new(backend::sync::SyncBackend::new(completer.clone())),
            BackendChoice::Threads => threads()?,
            BackendChoice::Auto | BackendChoice::Uring => {
                let probe = if self.io_uring_allowed {
                    let arena = core.cache.arena();
                    backend::uring::UringBackend::new(
                        (arena.base(), arena.bytes()),
                        completer.clone(),
                    )
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "turned off by the caller (EngineBuilder::without_io_uring)",
                    ))
                };
                match probe {
                    Ok(u) => {
                        if let Some(note) = &u.fixed_note {
                            fallbacks.push(note.clone());
                        }
                        Box::new(u)
                    }
                    Err(e) => {
                        fallbacks.push(format!("io_uring unavailable ({e}): using threads"));
                        threads()?
                    }
                }
            }
        };
        let backend: Box<dyn Backend> = match &self.faults {
            Some(f) => Box::new(backend::faults::FaultBackend::new(
                backend,
                completer.clone(),
                f.clone(),
            )?),
            None => backend,
        };
        let log = self.record_requests.then(|| Mutex::new(Vec::new()));
        Ok(Engine {
            inner: Arc::new(Inner {
                core,
                backend,
                config: self,
                files: Mutex::new(Registry::default()),
                open_handles: AtomicU64::new(0),
                fallbacks: Mutex::new(fallbacks),
                started: Instant::now(),
                log,
            }),
        })
    }
}

/// Statistics of an engine since it started.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Stats {
    /// The backend reading for the engine: `uring`, `threads` or `sync`.
    pub backend: &'static str,
    /// Every fallback taken, and why (no io_uring, a file read without `O_DIRECT`, ...).
    pub fallbacks: Vec<String>,
    /// The policy files are opened with.
    pub policy: String,
    /// The memory budget in bytes.
    pub budget_bytes: u64,
    /// Application reads.
    pub reads: u64,
    /// Bytes returned to the application.
    pub bytes_returned: u64,
    /// Pages the application read that were ready in the cache (no wait).
    pub hit_pages: u64,
    /// Pages the application read that it had to wait for (in flight, or read for it).
    pub miss_pages: u64,
    /// Pages read from the device.
    pub pages_read: u64,
    /// Pages read and evicted before anyone used them.
    pub wasted_pages: u64,
    /// Pages evicted unused and then read again (the windows outgrew the cache).
    pub thrashed_pages: u64,
    /// Requests sent to the device.
    pub requests: u64,
    /// Requests a reader waited for.
    pub sync_requests: u64,
    /// Requests read ahead.
    pub ahead_requests: u64,
    /// Ahead requests a reader caught up with while they still waited in the backend's queue,
    /// and read itself rather than wait behind the reads queued before them.
    pub expedited_requests: u64,
    /// `pages_read / requests`.
    pub avg_request_pages: f64,
    /// Time readers spent waiting for data, summed over threads, in milliseconds.
    pub stall_ms: f64,
    /// Requests that failed.
    pub io_errors: u64,
    /// Pages the cache holds now (ready or in flight).
    pub resident_pages: u64,
    /// Pages claimed by reads still in flight now: 0 once the engine is idle (a read that
    /// never completes would pin its pages for good).
    pub in_flight_pages: u64,
    /// `fstat` calls made to learn whether a file changed while open: one per read of a file
    /// without a read lease, next to none for a leased one.
    pub size_checks: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "engine: backend {}, policy {}, budget {} MiB",
            self.backend,
            self.policy,
            self.budget_bytes >> 20
        )?;
        for why in &self.fallbacks {
            writeln!(f, "  fallback: {why}")?;
        }
        writeln!(
            f,
            "  reads {}, bytes {}, hit pages {}, miss pages {}, stall {:.1} ms",
            self.reads, self.bytes_returned, self.hit_pages, self.miss_pages, self.stall_ms
        )?;
        writeln!(
            f,
            "  pages read {}, wasted {}, thrashed {}, requests {} ({} sync, {} ahead, {} ahead expedited), avg {:.1} pages, errors {}",
            self.pages_read,
            self.wasted_pages,
            self.thrashed_pages,
            self.requests,
            self.sync_requests,
            self.ahead_requests,
            self.expedited_requests,
            self.avg_request_pages,
            self.io_errors
        )?;
        write!(f, "  size checks (fstat) {}", self.size_checks)
    }
}

/// An application's advice about how it will read a file ([`File::advise`]), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// Default behaviour (`POSIX_FADV_NORMAL`).
    Normal,
    /// The file will be read sequentially (`POSIX_FADV_SEQUENTIAL`).
    Sequential,
    /// The file will be read randomly: no readahead (`POSIX_FADV_RANDOM`).
    Random,
    /// This range will be needed soon: read it now (`POSIX_FADV_WILLNEED`).
    WillNeed {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// This range will not be needed: drop its pages (`POSIX_FADV_DONTNEED`).
    DontNeed {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// Never read ahead at or past this byte offset.
    Limit {
        /// Byte offset.
        end: u64,
    },
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    bytes_returned: AtomicU64,
    hit_pages: AtomicU64,
    miss_pages: AtomicU64,
    stall_ns: AtomicU64,
    requests: AtomicU64,
    sync_requests: AtomicU64,
    ahead_requests: AtomicU64,
    expedited_requests: AtomicU64,
    pages_read: AtomicU64,
    io_errors: AtomicU64,
    size_checks: AtomicU64,
}

/// What the engine measures of the device, for the policies.
struct Meter {
    estimate: DeviceEstimate,
    /// Whether `estimate` holds a measurement yet.
    measured: bool,
    /// Whether it is fixed by the builder (never measured).
    fixed: bool,
    version: u64,
    busy_since: Option<Instant>,
    busy: Duration,
    bytes: u64,
}

impl Meter {
    fn new(fixed: Option<DeviceEstimate>) -> Meter {
        Meter {
            // Until measured: an NVMe-class device.
            estimate: fixed.unwrap_or(DeviceEstimate {
                latency_ns: 100_000,
                bytes_per_sec: 1_000_000_000,
                request_overhead_ns: 10_000,
            }),
            measured: fixed.is_some(),
            fixed: fixed.is_some(),
            version: 0,
            busy_since: None,
            busy: Duration::ZERO,
            bytes: 0,
        }
    }

    /// What a policy reading with requests of up to `io_pages` pages is told: the measurement,
    /// or until there is one, the simulator's model of an NVMe device (so a new engine's
    /// policies decide as the simulator's do).
    fn for_policy(&self, io_pages: u64) -> DeviceEstimate {
        if self.measured {
            self.estimate
        } else {
            crate::sim::DeviceModel::NVME.estimate(io_pages)
        }
    }

    fn update(&mut self, latency_ns: Option<u64>, bytes_per_sec: Option<u64>) {
        if self.fixed {
            return;
        }
        self.measured |= latency_ns.is_some() || bytes_per_sec.is_some();
        let mut e = self.estimate;
        if let Some(l) = latency_ns {
            e.latency_ns = (3 * e.latency_ns + l) / 4;
        }
        if let Some(b) = bytes_per_sec {
            // A busy period measures what the load drew from the device, which is its
            // bandwidth only when the queue was deep enough. A shallow load (a stride's small
            // records) measures low, shrinks the lead, and keeps the queue shallow: it then
            // measured 60-100 MB/s on a device that streams 1.4 GB/s, and the stride ran
            // below the kernel. So the estimate rises half way to a higher sample, and falls
            // only a sixteenth of the way to a lower one: a slower device still gets there,
            // within some tens of samples.
            e.bytes_per_sec = if b >= e.bytes_per_sec {
                (e.bytes_per_sec + b) / 2
            } else {
                e.bytes_per_sec - (e.bytes_per_sec - b) / 16
            };
        }
        let moved = |a: u64, b: u64| a.abs_diff(b) * 5 > b;
        if moved(e.latency_ns, self.estimate.latency_ns)
            || moved(e.bytes_per_sec, self.estimate.bytes_per_sec)
        {
            self.version += 1;
        }
        self.estimate = e;
    }
}

/// The cache, the counters and the meter: what a backend's completions need.
struct Core {
    cache: Cache,
    counters: Counters,
    meter: Mutex<Meter>,
    /// The meter's version, readable without its lock (checked on every read).
    meter_version: AtomicU64,
    in_flight: AtomicUsize,
}

impl Completer for Core {
    fn complete(&self, op: Box<ReadOp>, result: io::Result<usize>) {
        self.cache.complete(
            &op.file.table,
            op.first_page,
            &op.slots,
            op.expected,
            &result,
        );
        if result.is_err() {
            self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        let left = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        // A measurement may be skipped while busy (a reader must not queue behind one), but
        // not the end of a busy period, which the bandwidth is measured over.
        let mut m = if left == 0 {
            self.meter.lock().unwrap_or_else(|p| p.into_inner())
        } else {
            match self.meter.try_lock() {
                Ok(m) => m,
                Err(_) => return,
            }
        };
        let bytes = *result.as_ref().unwrap_or(&0) as u64;
        m.bytes += bytes;
        let mut bw = None;
        if left == 0 {
            if let Some(since) = m.busy_since.take() {
                m.busy += now - since;
            }
        }
        let busy = m.busy + m.busy_since.map_or(Duration::ZERO, |s| now - s);
        if busy >= Duration::from_millis(50) && m.bytes >= 8 << 20 {
            bw = Some((m.bytes as f64 / busy.as_secs_f64()) as u64);
            m.bytes = 0;
            m.busy = Duration::ZERO;
            if m.busy_since.is_some() {
                m.busy_since = Some(now);
            }
        }
        // Latency from requests that found the device idle, less their transfer time.
        let latency = (op.queued_behind == 0 && bytes > 0).then(|| {
            let total = (now - op.submitted).as_nanos() as u64;
            let transfer = bytes * 1_000_000_000 / m.estimate.bytes_per_sec.max(1);
            total.saturating_sub(transfer).max(1_000)
        });
        m.update(latency, bw);
        self.meter_version.store(m.version, Ordering::Release);
    }
}

/// Files the engine has opened, by identity, so that opens of one file share its pages.
#[derive(Default)]
struct Registry {
    live: FxHashMap<(u64, u64), Weak<FileData>>,
    /// The id each file's pages were cached under, and the identity they were read with.
    ids: FxHashMap<(u64, u64), (u32, Identity)>,
    next_id: u32,
}

struct Inner {
    core: Arc<Core>,
    backend: Box<dyn Backend>,
    config: EngineBuilder,
    files: Mutex<Registry>,
    open_handles: AtomicU64,
    fallbacks: Mutex<Vec<String>>,
    started: Instant,
    log: Option<Mutex<Vec<RequestRecord>>>,
}

/// One request the engine sent to the device (see [`EngineBuilder::record_requests`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RequestRecord {
    /// When it was submitted, in ns since the engine started.
    pub at_ns: u64,
    /// First page.
    pub first_page: u64,
    /// Pages.
    pub pages: u64,
    /// Read ahead (true) or waited for by a reader (false).
    pub ahead: bool,
}

impl Inner {
    /// Start the I/O `io` asks for on `file` (the driver's side of `RaContext::start_io`):
    /// clip at the end of the file, skip cached pages, one request per run of absent pages of
    /// at most `io_max` pages. Ahead reads give up where the cache has no room; synchronous ones
    /// wait for it. Returns pages newly brought in; `refaults` counts pages read again after
    /// being evicted unused. The requests are added to `out`, for [`Inner::submit`] once no lock
    /// is held (a policy's lock must not be held across a `sync` backend's read).
    fn start_io(
        &self,
        file: &Arc<FileData>,
        io_max: u64,
        io: IoRequest,
        refaults: &mut u64,
        out: &mut Vec<ReadOp>,
    ) -> u64 {
        let cache = &self.core.cache;
        let end = io.start_page.saturating_add(io.pages).min(file.pages());
        let sync = io.kind == IoKind::Sync;
        // What a reader waits for is copied out only after this returns: never more than a
        // quarter of the cache, or its first pages would make room for its last.
        let end = if sync {
            end.min(io.start_page.saturating_add(cache.slots() as u64 / 4))
        } else {
            end
        };
        // A read a reader waits for goes whole, as the policy sized it (it is never split, so
        // the simulator's request counts hold here); ahead reads go in the device's largest.
        let io_max = if sync { io_max.max(io.pages) } else { io_max };
        let io_max = io_max.min(cache.slots() as u64 / 4).max(1);
        let mut p = io.start_page;
        let mut brought = 0;
        while p < end {
            p = cache.next_miss(&file.table, p, end);
            if p >= end {
                break;
            }
            let (claimed, refault) = cache.claim_run(&file.table, p, (end - p).min(io_max));
            if claimed == 0 {
                continue; // another reader claimed it first
            }
            *refaults += refault;
            let mut slots = cache.alloc(file.id, p, claimed as usize, false);
            if sync && slots.is_empty() {
                // No room, and a reader waits: send the requests collected so far first (their
                // slots free only once they complete; waiting with them unsent would wait for
                // ever), then wait for a slot.
                self.submit(out);
                slots = cache.alloc(file.id, p, claimed as usize, true);
            }
            let n = slots.len() as u64;
            if n < claimed {
                cache.unclaim(&file.table, p + n, p + claimed);
            }
            if n == 0 {
                break; // no room for reading ahead now
            }
            if let Some(m) = io.marker_page.filter(|&m| m >= p && m < p + n) {
                cache.set_marker(&file.table, m, true);
            }
            out.push(self.make_op(file, p, slots, io.kind));
            brought += n;
            p += n;
        }
        brought
    }

    /// Send requests made by [`Inner::start_io`] to the backend.
    fn submit(&self, ops: &mut Vec<ReadOp>) {
        for op in ops.drain(..) {
            let queued_behind = self.core.in_flight.fetch_add(1, Ordering::AcqRel);
            let now = Instant::now();
            if queued_behind == 0 {
                if let Ok(mut m) = self.core.meter.try_lock() {
                    m.busy_since.get_or_insert(now);
                }
            }
            if let Some(log) = &self.log {
                log.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(RequestRecord {
                        at_ns: (now - self.started).as_nanos() as u64,
                        first_page: op.first_page,
                        pages: op.slots.len() as u64,
                        ahead: op.kind == IoKind::Ahead,
                    });
            }
            let mut op = Box::new(op);
            op.submitted = now;
            op.queued_behind = queued_behind;
            if op.kind == IoKind::Sync {
                // A reader waits for this one: it reads it in its own thread, as the kernel
                // does a synchronous read. Handing it to another thread and back would cost
                // two context switches for nothing.
                let result = self.backend.read_now(&op);
                self.core.complete(op, result);
            } else {
                self.backend.submit(op);
            }
        }
    }

    /// A reader is about to wait for `page` of `file`, which is in flight: if the read that
    /// brings it still waits in the backend's queue (behind other ahead reads), read it now in
    /// this thread instead, as a synchronous read would be. Without this, a reader that catches
    /// up with a deep queue of readahead waits for all of it (a file read whole in a scrambled
    /// order queued gigabytes ahead, and its reader starved for seconds).
    fn expedite(&self, file: &Arc<FileData>, page: u64) {
        if let Some(op) = self.backend.take_queued(file, page) {
            self.core
                .counters
                .expedited_requests
                .fetch_add(1, Ordering::Relaxed);
            let result = self.backend.read_now(&op);
            self.core.complete(op, result);
        }
    }

    /// The request for pages `first..` of `file` into `slots`.
    fn make_op(&self, file: &Arc<FileData>, first: u64, slots: Vec<u32>, kind: IoKind) -> ReadOp {
        let arena = self.core.cache.arena();
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(1);
        let mut prev: Option<u32> = None;
        for &s in &slots {
            match (prev, iov.last_mut()) {
                (Some(q), Some(last)) if s == q + 1 => last.iov_len += PAGE,
                _ => iov.push(libc::iovec {
                    iov_base: arena.slot_ptr(s).cast(),
                    iov_len: PAGE,
                }),
            }
            prev = Some(s);
        }
        let pages = slots.len() as u64;
        let c = &self.core.counters;
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.pages_read.fetch_add(pages, Ordering::Relaxed);
        match kind {
            IoKind::Sync => c.sync_requests.fetch_add(1, Ordering::Relaxed),
            IoKind::Ahead => c.ahead_requests.fetch_add(1, Ordering::Relaxed),
        };
        ReadOp {
            file: file.clone(),
            first_page: first,
            expected: file
                .live_size
                .load(Ordering::Acquire)
                .saturating_sub(first * PAGE_SIZE)
                .min(pages * PAGE_SIZE),
            slots,
            kind,
            submitted: Instant::now(),
            queued_behind: 0,
            iov,
        }
    }

    fn note_fallback(&self, why: String) {
        let mut f = self.fallbacks.lock().unwrap_or_else(|p| p.into_inner());
        if !f.contains(&why) && f.len() < 64 {
            f.push(why);
        }
    }
}

/// The engine: a cache under one memory budget, an I/O backend, and the files opened through
/// it. Cheap to clone (a handle); dropped with its last clone and last open file.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl Engine {
    /// Settings, starting from the defaults (256 MiB, `adaptive`, io_uring if it works).
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// An engine with the default settings.
    pub fn new() -> io::Result<Engine> {
        Engine::builder().build()
    }

    /// Open `path` for reading. Two opens of one file (same device, inode, size and
    /// modification time) share its cached pages; each open has its own policy state.
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        self.open_with_policy(path, &self.inner.config.policy)
    }

    /// Open `path` with a policy other than the engine's.
    pub fn open_with_policy(&self, path: impl AsRef<Path>, policy_name: &str) -> io::Result<File> {
        policy::validate_name(policy_name)
            .and_then(|()| policy::by_name(policy_name, PolicyConfig::default()).map(drop))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.open_with(path, |config| {
            policy::by_name(policy_name, config).expect("a policy name checked above")
        })
    }

    /// Open `path` with a policy of the caller's own, made by `make` from the settings the
    /// engine gives policies for this file (windows sized for its device).
    pub fn open_with(
        &self,
        path: impl AsRef<Path>,
        make: impl FnOnce(PolicyConfig) -> Box<dyn Policy>,
    ) -> io::Result<File> {
        let path = path.as_ref();
        let inner = &self.inner;
        let opened = file::open(path, inner.config.direct)?;
        if let Some(why) = &opened.buffered_because {
            inner.note_fallback(format!(
                "{}: buffered reads with POSIX_FADV_RANDOM: {why}",
                path.display()
            ));
        }
        let key = (opened.identity.dev, opened.identity.ino);
        let data = {
            let mut reg = inner.files.lock().unwrap_or_else(|p| p.into_inner());
            let live = reg.live.get(&key).and_then(Weak::upgrade).filter(|d| {
                reg.ids
                    .get(&key)
                    .is_some_and(|(_, id)| *id == opened.identity)
                    && d.direct == opened.direct
            });
            match live {
                Some(d) => d,
                None => {
                    let id = match reg.ids.get(&key) {
                        Some(&(id, ident)) if ident == opened.identity => id,
                        _ => {
                            if reg.next_id >= 1 << 24 {
                                return Err(io::Error::other(
                                    "this engine has opened 16 M distinct files; start a new engine",
                                ));
                            }
                            reg.next_id += 1;
                            reg.next_id
                        }
                    };
                    reg.ids.insert(key, (id, opened.identity));
                    let (ra, io) = crate::kernel::capture::device_limits(path);
                    let (lease, no_lease) = file::Lease::new(&opened.fd, inner.config.leases);
                    if let Some(why) = no_lease {
                        inner.note_fallback(format!(
                            "{}: no read lease ({why}): each read checks its size with fstat",
                            path.display()
                        ));
                    }
                    let table = inner
                        .core
                        .cache
                        .table(id, opened.identity.size.div_ceil(PAGE_SIZE));
                    let d = Arc::new(FileData {
                        id,
                        table,
                        fd: opened.fd,
                        path: path.to_path_buf(),
                        size: opened.identity.size,
                        live_size: AtomicU64::new(opened.identity.size),
                        live_mtime_ns: std::sync::atomic::AtomicI64::new(
                            opened.identity.mtime_ns as i64,
                        ),
                        lease,
                        direct: opened.direct,
                        read_ahead_kb: ra,
                        max_sectors_kb: io,
                    });
                    reg.live.insert(key, Arc::downgrade(&d));
                    d
                }
            }
        };
        let config = self.policy_config(&data);
        let mut policy = make(config);
        let (estimate, version) = {
            let m = inner.core.meter.lock().unwrap_or_else(|p| p.into_inner());
            (m.for_policy(config.io_max_pages), m.version)
        };
        policy.on_device(estimate);
        inner.open_handles.fetch_add(1, Ordering::Relaxed);
        Ok(File {
            engine: inner.clone(),
            data,
            io_max: config.io_max_pages,
            state: Mutex::new(PolicyState {
                policy,
                device_version: version,
                congested: false,
            }),
            pos: AtomicU64::new(0),
        })
    }

    /// The policy settings for a file on this engine: windows sized for its device.
    fn policy_config(&self, data: &FileData) -> PolicyConfig {
        let c = &self.inner.config;
        let quarter = (self.inner.core.cache.slots() as u64 / 4).max(1);
        let io_max = c
            .io_max_kb
            .or(data.max_sectors_kb)
            .map_or(256, |kb| kb * 1024 / PAGE_SIZE)
            .clamp(1, quarter);
        let ra_max = c
            .ra_max_kb
            .map(|kb| kb * 1024 / PAGE_SIZE)
            .unwrap_or_else(|| {
                // The device's read_ahead_kb, but at least eight of its largest requests:
                // the queue depth at which a virtual or NVMe device streams at full speed
                // (measured: 8 MiB ahead gave 790-1050 MB/s here, 32 MiB 1250-1310).
                let device = data.read_ahead_kb.map_or(0, |kb| kb * 1024 / PAGE_SIZE);
                device.max(8 * io_max).max(256)
            })
            .clamp(1, quarter);
        PolicyConfig {
            ra_max_pages: ra_max,
            io_max_pages: io_max,
            fixed_pages: ra_max,
            folio_max_order: 0,
        }
    }

    /// What the engine has done so far.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let c = &inner.core.counters;
        let k = &inner.core.cache.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let requests = get(&c.requests);
        let pages_read = get(&c.pages_read);
        Stats {
            backend: inner.backend.name(),
            fallbacks: {
                let mut f = inner
                    .fallbacks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                f.extend(inner.backend.late_note());
                f
            },
            policy: inner.config.policy.clone(),
            budget_bytes: inner.core.cache.slots() as u64 * PAGE_SIZE,
            reads: get(&c.reads),
            bytes_returned: get(&c.bytes_returned),
            hit_pages: get(&c.hit_pages),
            miss_pages: get(&c.miss_pages),
            pages_read,
            wasted_pages: get(&k.wasted_pages),
            thrashed_pages: get(&k.thrashed_pages),
            requests,
            sync_requests: get(&c.sync_requests),
            ahead_requests: get(&c.ahead_requests),
            expedited_requests: get(&c.expedited_requests),
            avg_request_pages: if requests == 0 {
                0.0
            } else {
                pages_read as f64 / requests as f64
            },
            stall_ms: get(&c.stall_ns) as f64 / 1e6,
            io_errors: get(&c.io_errors),
            resident_pages: inner.core.cache.resident_pages() as u64,
            in_flight_pages: inner.core.cache.in_flight_pages() as u64,
            size_checks: get(&c.size_checks),
        }
    }

    /// The requests sent so far, if [`EngineBuilder::record_requests`] was on.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.inner.log.as_ref().map_or_else(Vec::new, |l| {
            l.lock().unwrap_or_else(|p| p.into_inner()).clone()
        })
    }

    /// The requests sent since the last call (or since the start), emptying the log: an
    /// engine kept for many runs hands each run its own requests.
    pub fn take_request_log(&self) -> Vec<RequestRecord> {
        self.inner.log.as_ref().map_or_else(Vec::new, |l| {
            std::mem::take(&mut *l.lock().unwrap_or_else(|p| p.into_inner()))
        })
    }

    /// Forget what the engine measured of the device: policies are given the starting
    /// estimate again, as in a new engine, and measuring starts over. For benchmarks that
    /// reuse one engine but want each run to learn the device as a new engine would.
    pub fn forget_device_estimate(&self) {
        let core = &self.inner.core;
        let mut m = core.meter.lock().unwrap_or_else(|p| p.into_inner());
        let version = m.version + 1;
        *m = Meter::new(m.fixed.then_some(m.estimate));
        m.version = version;
        core.meter_version.store(version, Ordering::Release);
    }

    /// The device estimate the policies are given now (measured as reads complete).
    pub fn device_estimate(&self) -> DeviceEstimate {
        self.inner
            .core
            .meter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .estimate
    }
}

struct PolicyState {
    policy: Box<dyn Policy>,
    device_version: u64,
    congested: bool,
}

/// A file opened through an [`Engine`]. [`File::read_at`] may be called from many threads at
/// once; `Read` and `Seek` use the file's own position, like `std::fs::File`.
pub struct File {
    engine: Arc<Inner>,
    data: Arc<FileData>,
    io_max: u64,
    state: Mutex<PolicyState>,
    pos: AtomicU64,
}

/// The driver's side of [`RaContext`] for one call into a file's policy.
struct EngineCtx<'a> {
    engine: &'a Inner,
    file: &'a Arc<FileData>,
    io_max: u64,
    refaults: u64,
    ops: Vec<ReadOp>,
    /// Pages `[start, end)` the driver has just copied out: cached, no need to look.
    known_cached: (u64, u64),
}

impl RaContext for EngineCtx<'_> {
    fn file_pages(&self) -> u64 {
        self.file.pages()
    }

    fn is_cached(&self, page: u64) -> bool {
        let (s, e) = self.known_cached;
        (page >= s && page < e)
            || page < self.file.pages() && self.engine.core.cache.is_cached(&self.file.table, page)
    }

    fn has_marker(&self, page: u64) -> bool {
        self.engine.core.cache.has_marker(&self.file.table, page)
    }

    fn clear_marker(&mut self, page: u64) {
        self.engine
            .core
            .cache
            .set_marker(&self.file.table, page, false);
    }

    fn start_io(&mut self, io: IoRequest) -> u64 {
        self.engine.start_io(
            self.file,
            self.io_max,
            io,
            &mut self.refaults,
            &mut self.ops,
        )
    }

    fn next_miss(&self, index: u64, max_scan: u64) -> u64 {
        let end = index.saturating_add(max_scan);
        self.engine
            .core
            .cache
            .next_miss(&self.file.table, index, end.min(self.file.pages()))
    }

    fn readahead_budget(&self) -> u64 {
        let open = self.engine.open_handles.load(Ordering::Relaxed).max(1);
        self.engine.core.cache.slots() as u64 / 2 / open
    }
}

impl File {
    /// Size of the file in bytes, when it was opened.
    pub fn len(&self) -> u64 {
        self.data.live_size.load(Ordering::Acquire)
    }

    /// Whether the file was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.data.path
    }

    /// Whether it is read with `O_DIRECT` (false: buffered, see [`Stats::fallbacks`]).
    pub fn is_direct(&self) -> bool {
        self.data.direct
    }

    /// The engine this file was opened from.
    pub fn engine(&self) -> Engine {
        Engine {
            inner: self.engine.clone(),
        }
    }

    /// The engine's statistics.
    pub fn engine_stats(&self) -> Stats {
        self.engine().stats()
    }

    fn ctx(&self) -> EngineCtx<'_> {
        EngineCtx {
            engine: &self.engine,
            file: &self.data,
            io_max: self.io_max,
            refaults: 0,
            ops: Vec::new(),
            known_cached: (0, 0),
        }
    }

    fn with_policy(&self, f: impl FnOnce(&mut dyn Policy, &mut EngineCtx<'_>)) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let core = &self.engine.core;
        if core.meter_version.load(Ordering::Acquire) != st.device_version {
            let m = core.meter.lock().unwrap_or_else(|p| p.into_inner());
            st.device_version = m.version;
            let e = m.for_policy(self.io_max);
            drop(m);
            st.policy.on_device(e);
        }
        let in_flight = core.in_flight.load(Ordering::Relaxed);
        if !st.congested && in_flight >= CONGESTED {
            st.congested = true;
            st.policy.on_congestion(true);
        } else if st.congested && in_flight < CONGESTED / 2 {
            st.congested = false;
            st.policy.on_congestion(false);
        }
        let mut ctx = self.ctx();
        f(st.policy.as_mut(), &mut ctx);
        if ctx.refaults > 0 {
            self.count_refaults(ctx.refaults);
            st.policy.on_thrashed(ctx.refaults);
        }
        drop(st);
        self.engine.submit(&mut ctx.ops);
    }

    fn count_refaults(&self, pages: u64) {
        self.engine
            .core
            .cache
            .counters
            .thrashed_pages
            .fetch_add(pages, Ordering::Relaxed);
    }

    /// Pages this handle read again after they were evicted unused, outside a policy call (a
    /// reader's own read of what its readahead lost): counted, and told to the policy, as the
    /// simulator tells it of every refault.
    fn report_refaults(&self, pages: u64) {
        if pages == 0 {
            return;
        }
        self.count_refaults(pages);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.policy.on_thrashed(pages);
    }

    /// Read up to `buf.len()` bytes at `offset`, as `pread(2)` does: fewer only at the end of
    /// the file (0 at or past it). Errors are the system's, from the read that met them.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let size = self.current_size()?;
        if buf.is_empty() || offset >= size {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset);
        let read = AppRead {
            offset: Bytes(offset),
            len: Bytes(len),
        };
        let (first, end) = (read.first_page(), read.end_page());
        let cache = &self.engine.core.cache;
        let table = &self.data.table;
        let len = len as usize;
        let mut done = 0usize;
        let mut page = first;
        let (mut hits, mut misses) = (0u64, 0u64);
        let mut stall = Duration::ZERO;
        let mut attempts = 0u32;
        // The last page retried after a failed read: each page gets one retry for this reader
        // (an ahead read that failed may have covered pages that read fine on their own).
        let mut retried_page = None;
        let mut result = Ok(());

        // Hits first: copy while pages are ready, without waiting. A read that is all hits
        // then shows the policy pages it knows are cached, so it need not look them up again.
        let mut eof = false;
        while page < end && done < len {
            let from = if page == first {
                (offset % PAGE_SIZE) as usize
            } else {
                0
            };
            let want = (PAGE - from).min(len - done);
            match cache.read_page(
                table,
                page,
                from,
                &mut buf[done..done + want],
                false,
                &mut stall,
            ) {
                Lookup::Copied { n, whole, .. } => {
                    done += n;
                    hits += 1;
                    page += 1;
                    if !whole {
                        eof = true;
                        break;
                    }
                }
                _ => break,
            }
        }
        let known = (first, page);
        self.with_policy(|p, ctx| {
            ctx.known_cached = known;
            p.on_read(read, ctx)
        });
        if eof {
            page = end;
        }

        while page < end && done < len {
            let from = if page == first {
                (offset % PAGE_SIZE) as usize
            } else {
                0
            };
            let want = (PAGE - from).min(len - done);
            let dst = &mut buf[done..done + want];
            if cache.is_in_flight(table, page) {
                let t = Instant::now();
                self.engine.expedite(&self.data, page);
                stall += t.elapsed();
            }
            match cache.read_page(table, page, from, dst, true, &mut stall) {
                Lookup::Copied { n, whole, .. } => {
                    // It was not ready when the read began (the hits were copied above).
                    misses += 1;
                    done += n;
                    attempts = 0;
                    page += 1;
                    if !whole {
                        break; // the file ends in this page
                    }
                }
                // Past the end the file had when opened (it grew): read past the cache.
                Lookup::Absent if attempts < ATTEMPTS && page < self.data.pages() => {
                    attempts += 1;
                    let t = Instant::now();
                    let mut refaults = 0;
                    let mut ops = Vec::new();
                    // One request's worth at a time: the pages are copied out as they come, and
                    // asking for all of a read larger than the cache at once would evict its
                    // first pages with its last before they are copied (and ask again, and
                    // again). Ahead windows, not this, keep the device busy.
                    self.engine.start_io(
                        &self.data,
                        self.io_max,
                        IoRequest::sync(page, (end - page).min(self.io_max.max(1))),
                        &mut refaults,
                        &mut ops,
                    );
                    self.engine.submit(&mut ops);
                    if !self.engine.backend.is_async() {
                        stall += t.elapsed();
                    }
                    self.report_refaults(refaults);
                }
                Lookup::Absent => {
                    // Read and lost again and again: read this page past the cache.
                    misses += 1;
                    match self.pread_page(page, from, dst) {
                        Ok(n) => {
                            done += n;
                            attempts = 0;
                            page += 1;
                            if n < want {
                                break;
                            }
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
                Lookup::Failed(f) if retried_page != Some(page) => {
                    // It may have been an ahead read that failed: try this page once more,
                    // for this reader.
                    retried_page = Some(page);
                    let mut refaults = 0;
                    let mut ops = Vec::new();
                    self.engine.start_io(
                        &self.data,
                        self.io_max,
                        IoRequest::sync(page, 1),
                        &mut refaults,
                        &mut ops,
                    );
                    self.engine.submit(&mut ops);
                    self.report_refaults(refaults);
                    drop(f);
                }
                Lookup::Failed(f) => {
                    result = Err(f.error());
                    break;
                }
            }
        }
        let c = &self.engine.core.counters;
        c.reads.fetch_add(1, Ordering::Relaxed);
        c.bytes_returned.fetch_add(done as u64, Ordering::Relaxed);
        if hits > 0 {
            c.hit_pages.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            c.miss_pages.fetch_add(misses, Ordering::Relaxed);
        }
        if !stall.is_zero() {
            c.stall_ns
                .fetch_add(stall.as_nanos() as u64, Ordering::Relaxed);
        }
        match result {
            Err(e) if done == 0 => Err(e),
            _ => Ok(done),
        }
    }

    /// The file's size now, with its cached pages dropped first if it changed while open
    /// (truncated, extended, written in place), so no read returns bytes the file no longer
    /// holds. A read racing the change may see either side of it, as with `pread(2)`.
    ///
    /// While the file holds its read lease this is one atomic load: nobody can have opened it
    /// for writing or truncated it. Otherwise it asks the kernel ([`File::check_file`]).
    #[inline]
    fn current_size(&self) -> io::Result<u64> {
        if self.data.lease.unchanged() {
            return Ok(self.data.live_size.load(Ordering::Acquire));
        }
        self.check_file()
    }

    /// The slow path of [`File::current_size`]: a lease break somewhere in the process (is it
    /// this file's?), or no lease (`fstat`, and now and then an attempt to take the lease).
    #[cold]
    fn check_file(&self) -> io::Result<u64> {
        let d = &self.data;
        let lease = &d.lease;
        if lease.held_at.load(Ordering::Acquire) != file::NO_LEASE {
            let _gate = lease.gate.lock().unwrap_or_else(|p| p.into_inner());
            let breaks = os::lease_breaks();
            let held_at = lease.held_at.load(Ordering::Acquire);
            if held_at == breaks {
                // Another reader settled it meanwhile.
                return Ok(d.live_size.load(Ordering::Acquire));
            }
            if held_at != file::NO_LEASE {
                if os::holds_read_lease(d.fd.as_fd()) {
                    // Another file's lease broke, not this one's.
                    lease.held_at.store(breaks, Ordering::Release);
                    return Ok(d.live_size.load(Ordering::Acquire));
                }
                // Someone opened the file for writing or truncated it. What they write next
                // only fstat can see (and only as a new size or modification time), so the
                // pages cached until now go: a writer's first bytes may land in any of them
                // within the clock tick the modification time is kept in.
                lease.held_at.store(file::NO_LEASE, Ordering::Release);
                lease.unleased_reads.store(0, Ordering::Relaxed);
                self.engine.core.cache.drop_range(&d.table, 0, d.pages());
                self.engine.note_fallback(format!(
                    "{}: opened for writing or truncated while read: its cached pages were dropped, and each read checks its size until the lease can be taken again",
                    d.path.display()
                ));
            }
        }
        let size = self.size_check()?;
        if lease.allowed
            && lease
                .unleased_reads
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(file::LEASE_RETRY)
        {
            if let Ok(_gate) = lease.gate.try_lock() {
                if lease.held_at.load(Ordering::Acquire) == file::NO_LEASE {
                    let breaks = os::lease_breaks();
                    match os::take_read_lease(d.fd.as_fd()) {
                        Ok(()) => {
                            // A change between the check above and the lease would go
                            // unseen: check once more, now that changes break the lease.
                            let size = self.size_check()?;
                            lease.held_at.store(breaks, Ordering::Release);
                            return Ok(size);
                        }
                        Err(e) if !lease.reported.swap(true, Ordering::Relaxed) => {
                            let why = match e.raw_os_error() {
                                Some(libc::EAGAIN) => "it is open for writing".to_string(),
                                Some(libc::EACCES) => {
                                    "another user owns it and this process lacks CAP_LEASE"
                                        .to_string()
                                }
                                _ => e.to_string(),
                            };
                            self.engine.note_fallback(format!(
                                "{}: no read lease yet ({why}): each read checks its size with fstat",
                                d.path.display()
                            ));
                        }
                        Err(_) => {}
                    }
                }
            }
        }
        Ok(size)
    }

    /// One `fstat`: if the size or modification time changed since the last check, every
    /// cached page of the file is dropped.
    fn size_check(&self) -> io::Result<u64> {
        let d = &self.data;
        self.engine
            .core
            .counters
            .size_checks
            .fetch_add(1, Ordering::Relaxed);
        let (size, mtime) = file::size_and_mtime(&d.fd)?;
        let (was, was_mtime) = (
            d.live_size.load(Ordering::Acquire),
            d.live_mtime_ns.load(Ordering::Acquire),
        );
        if size != was || mtime != was_mtime {
            d.live_size.store(size, Ordering::Release);
            d.live_mtime_ns.store(mtime, Ordering::Release);
            self.engine.core.cache.drop_range(&d.table, 0, d.pages());
            self.engine.note_fallback(format!(
                "{}: changed while open (size {was} -> {size} bytes): its cached pages were dropped",
                d.path.display()
            ));
        }
        Ok(size)
    }

    /// Read one page's bytes from `from` straight from the file, past the cache.
    fn pread_page(&self, page: u64, from: usize, dst: &mut [u8]) -> io::Result<usize> {
        // Page-aligned, for a descriptor opened with O_DIRECT.
        let mut tmp = os::AlignedBuf::new(PAGE);
        let n = os::pread(self.data.fd.as_fd(), tmp.as_mut_slice(), page * PAGE_SIZE)?;
        let got = n.saturating_sub(from).min(dst.len());
        dst[..got].copy_from_slice(&tmp.as_slice()[from..from + got]);
        Ok(got)
    }

    /// Pass advice to the file's policy (and, for don't-need, drop the range's pages).
    pub fn advise(&self, advice: Advice) -> io::Result<()> {
        let pages = |offset: u64, len: u64| -> (u64, u64) {
            let (s, e) = Bytes::page_span(Bytes(offset), Bytes(len.max(1)));
            (s, e - s)
        };
        let hint = match advice {
            Advice::Normal => Hint::Normal,
            Advice::Sequential => Hint::Sequential,
            Advice::Random => Hint::Random,
            Advice::WillNeed { offset, len } => {
                let (start_page, pages) = pages(offset, len);
                Hint::WillNeed { start_page, pages }
            }
            Advice::DontNeed { offset, len } => {
                // Only whole pages are dropped, as the kernel does.
                let start = offset.div_ceil(PAGE_SIZE);
                let end = offset.saturating_add(len) / PAGE_SIZE;
                // The cache holds no page past the table: a len of u64::MAX ("to the end")
                // must not walk 2^52 pages.
                let cached_end = end.min(self.data.pages());
                if cached_end > start {
                    self.engine
                        .core
                        .cache
                        .drop_range(&self.data.table, start, cached_end);
                }
                Hint::DontNeed {
                    start_page: start,
                    pages: end.saturating_sub(start),
                }
            }
            Advice::Limit { end } => Hint::Limit {
                end_page: end.div_ceil(PAGE_SIZE),
            },
        };
        self.with_policy(|p, ctx| p.on_hint(hint, ctx));
        Ok(())
    }
}

impl Drop for File {
    fn drop(&mut self) {
        self.engine.open_handles.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let pos = self.pos.load(Ordering::Relaxed);
        let n = self.read_at(buf, pos)?;
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Seek for File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        (&*self).seek(to)
    }
}

impl Seek for &File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let cur = self.pos.load(Ordering::Relaxed);
        let new = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len().checked_add_signed(d),
            SeekFrom::Current(d) => cur.checked_add_signed(d),
        }
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            )
        })?;
        self.pos.store(new, Ordering::Relaxed);
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::Meter;

    #[test]
    fn the_bandwidth_estimate_rises_fast_and_falls_slowly() {
        let mut m = Meter::new(None);
        let start = m.estimate.bytes_per_sec;
        // One busy period of a shallow load (a stride's small records) barely moves it.
        m.update(None, Some(60_000_000));
        assert!(
            m.estimate.bytes_per_sec > start * 9 / 10,
            "{:?}",
            m.estimate
        );
        // A device that really is that slow gets there within some tens of samples.
        for _ in 0..100 {
            m.update(None, Some(60_000_000));
        }
        assert!(m.estimate.bytes_per_sec < 66_000_000, "{:?}", m.estimate);
        // A faster sample is believed half at once.
        m.update(None, Some(2_000_000_000));
        assert!(m.estimate.bytes_per_sec > 1_000_000_000, "{:?}", m.estimate);
    }
}
