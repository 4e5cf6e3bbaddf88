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
//! The cache (`cache`) is an arena of page slots: its size is the budget, a hard limit.
//! Eviction (CLOCK) tells the policy, through refaults, when its windows outgrow the cache.
//! Reads go through a backend (`backend`): io_uring, a thread pool or plain `preadv` in the
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
//!
//! Where each part lives: `builder` (settings and start), `reader` (the file API: a read
//! from policy to copy-out), `requests` (a policy's I/O issued to the backend, and finished
//! reads landing in the cache), `meter` (each device as measured for the policies: a block
//! device, a bucket, a host), `open_many` (many files read in turn, opened ahead of the
//! reader), `stats` (counters, statistics, the request log), `cache` (the arena, page tables and eviction),
//! `source` (where a file's bytes come from, one module per kind: `local` opens files, tells
//! their identity, holds their leases), `completions` (completions reaped in the caller's own
//! event loop) and `backend` (one file per I/O backend); this file
//! holds the engine itself: its parts, and opening files through it.

mod activity;
mod backend;
mod batch;
mod builder;
mod cache;
mod completions;
pub(crate) mod direct;
mod meter;
mod open_many;
mod options;
mod ra_context;
mod read_loop;
mod reader;
mod requests;
mod settings;
mod source;
mod stats;

use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::policy::{self, DeviceEstimate, Hint, IoKind, IoRequest, Policy, PolicyConfig};
use crate::policy::{AppRead, RaContext};
use crate::units::{kib_to_pages, Bytes, PAGE_SIZE};

#[cfg(feature = "testing")]
pub use backend::faults::{Fault, Faults, Gate};
use backend::{Backend, Completer, ReadOp};
use cache::{Cache, Lookup};
use source::{Identity, ObjectKey, Source};

const PAGE: usize = PAGE_SIZE as usize;

pub use builder::{
    BackendChoice, EngineBuilder, DEFAULT_BUDGET, DEFAULT_POLICY, DEFAULT_REQUEST_LOG_LIMIT,
    DEFAULT_THREADS, MIN_BUDGET,
};
pub use source::local::sizeless;
pub use source::url::{check as check_url, redact as redact_url};
pub use source::Entry;

/// The registered backends' names, in the order `auto` prefers them (`--engine NAME`,
/// [`Stats::backend`]).
pub fn backend_names() -> impl Iterator<Item = &'static str> {
    backend::BACKENDS.iter().map(|b| b.name)
}
pub use activity::IDLE_AFTER_MS;
pub use batch::{Block, NextRange, Prefetch, Range, ReadAt, ReadMany, ReadStream};
pub use completions::Completions;
pub use direct::{AlignedBuf, ReadDirect, DIRECT_MAX_BYTES};
use meter::{DeviceKey, DeviceMeter, Meters};
pub use open_many::{OpenMany, OPENS_AHEAD, OPENS_AT_ONCE};
pub use options::OpenOptions;
use options::PolicyChoice;
pub use reader::File;
use reader::PolicyState;
use requests::CacheAndMeter;
pub use settings::{Setting, REMOTE_PREFIX, SETTINGS};
use stats::{Counters, RequestLog};
pub use stats::{Fallback, FallbackKind, FileStats, Latency, LinkStats, RequestRecord, Stats};

/// An application's advice about how it will read a file ([`File::advise`]), in bytes as
/// `posix_fadvise` takes it; the policy is handed it as a [`Hint`] in the pages the range
/// touches. Kinds will be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

/// A file the cache holds pages of: its source and its page table. Shared by every open of
/// the same version of a file.
pub(crate) struct FileData {
    /// The cache's name for this file.
    pub id: u32,
    /// Where its pages are in the cache.
    pub table: Arc<cache::PageTable>,
    /// Size in bytes when opened: the page table covers this much.
    pub size: u64,
    /// Where its bytes come from.
    pub source: Box<dyn Source>,
    /// What the engine measures of the device those bytes come from.
    pub meter: Arc<DeviceMeter>,
    /// Its own figures ([`File::stats`]), beside the engine's.
    pub(super) counters: Counters,
    /// Its reads' latencies, where an open asked for them.
    pub(super) read_latency: stats::LatencyRecorder,
    /// What the backend keeps for this file while it lives, made by its first read there
    /// (io_uring: the file's slot in the ring's table of registered files, given back when
    /// this is dropped).
    #[cfg_attr(not(feature = "uring"), allow(dead_code))] // only io_uring keeps one yet
    pub(super) backend_file: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

impl FileData {
    fn new(
        id: u32,
        table: Arc<cache::PageTable>,
        size: u64,
        source: Box<dyn Source>,
        meter: Arc<DeviceMeter>,
    ) -> FileData {
        FileData {
            id,
            table,
            size,
            source,
            meter,
            counters: Counters::default(),
            read_latency: stats::LatencyRecorder::new(false),
            backend_file: std::sync::OnceLock::new(),
        }
    }

    /// Size in pages (the last one partial if the size is not a multiple of the page).
    pub fn pages(&self) -> u64 {
        self.size.div_ceil(PAGE_SIZE)
    }
}

/// Files the engine has opened, by identity, so that opens of one file share its pages.
#[derive(Default)]
struct OpenFiles {
    live: FxHashMap<ObjectKey, Weak<FileData>>,
    /// The id each object's pages were cached under, and the identity they were read with.
    ids: FxHashMap<ObjectKey, (u32, Identity)>,
    next_id: u32,
}

/// Everything an engine is: the cache and what completions update, the backend, the settings
/// it was built with, the files open through it, the fallbacks taken and the request log.
/// Shared by the [`Engine`] handles and every [`File`] opened through them.
struct EngineParts {
    core: Arc<CacheAndMeter>,
    backend: Box<dyn Backend>,
    config: EngineBuilder,
    /// How to make the engine's policy (`config.policy`), looked up once, at build.
    make_policy: policy::MakePolicy,
    files: Mutex<OpenFiles>,
    /// The active handles (see `activity`), which share the readahead budget, and each
    /// one's budget in pages (kept here so a read need not take the lock).
    shares: Mutex<activity::ActiveShares>,
    budget_pages: AtomicU64,
    /// When the next sweep for idle handles is due, in ms of the coarse clock.
    next_sweep_ms: AtomicU64,
    fallbacks: Mutex<Vec<Fallback>>,
    started: Instant,
    log: Option<Mutex<RequestLog>>,
}

impl EngineParts {
    /// After pages were dropped: give the system back the cache's free memory, the backend
    /// letting go of it first (see `cache.rs`). Not for an engine
    /// built to pretouch or to keep its memory: it asked to hold it.
    fn give_back_memory(&self) {
        if self.config.pretouch || self.config.keep_memory {
            return;
        }
        let backend = &self.backend;
        self.core.cache.trim(backend.arena_granule(), |from, to| {
            backend.let_go_of_arena(from, to)
        });
    }
}

/// A caller's one-off maker of a file's policy ([`Engine::open_with`]).
type MakeOnce<'a> = Box<dyn FnOnce(PolicyConfig) -> Box<dyn Policy> + 'a>;

/// The engine: a cache under one memory budget, an I/O backend, and the files opened through
/// it. Cheap to clone (a handle); dropped with its last clone and last open file.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineParts>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("Engine")
            .field("backend", &inner.backend.name())
            .field("policy", &inner.config.policy)
            .field(
                "budget_bytes",
                &(inner.core.cache.slots() as u64 * PAGE_SIZE),
            )
            .field("resident_pages", &inner.core.cache.resident_pages())
            .field("active_handles", &inner.active_handles())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Settings, starting from the defaults (256 MiB, `adaptive`, io_uring if it works).
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// An engine with the default settings.
    ///
    /// # Errors
    /// As [`EngineBuilder::build`].
    pub fn new() -> io::Result<Engine> {
        Engine::builder().build()
    }

    /// Open `path` for reading. Two opens of one file (same device, inode, size and
    /// modification time) share its cached pages; each open has its own policy state.
    ///
    /// # Errors
    /// The system's, naming the path: `NotFound`, `PermissionDenied`, `IsADirectory`;
    /// `Unsupported` for a file with no size to read ahead in (a FIFO, a device, a procfs
    /// file); for a URL, the store's (see `Engine::stat`).
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        self.open_with_options(path, OpenOptions::new())
    }

    /// Open `path` with a policy other than the engine's.
    ///
    /// # Errors
    /// As [`Engine::open`]; `InvalidInput` for a name no policy has.
    pub fn open_with_policy(&self, path: impl AsRef<Path>, policy_name: &str) -> io::Result<File> {
        self.open_with_options(path, OpenOptions::new().policy(policy_name))
    }

    /// Open `path` with a policy of the caller's own, made by `make` from the settings the
    /// engine gives policies for this file (windows sized for its device).
    ///
    /// # Errors
    /// As [`Engine::open`].
    pub fn open_with(
        &self,
        path: impl AsRef<Path>,
        make: impl FnOnce(PolicyConfig) -> Box<dyn Policy>,
    ) -> io::Result<File> {
        let opened = source::open(path.as_ref(), &self.open_settings())?;
        self.open_source(opened, &OpenOptions::new(), Box::new(make))
    }

    /// Open `path` with per-file options (policy, window and request caps, `O_DIRECT`,
    /// block size): see [`OpenOptions`].
    ///
    /// # Errors
    /// As [`OpenOptions::open`].
    pub fn open_with_options(
        &self,
        path: impl AsRef<Path>,
        options: OpenOptions,
    ) -> io::Result<File> {
        self.open_path(path.as_ref(), options, true)
    }

    /// Open `path` under `options`, an object with its last bytes if `with_tail`.
    fn open_path(
        &self,
        path: &Path,
        mut options: OpenOptions,
        with_tail: bool,
    ) -> io::Result<File> {
        let make = self.policy_maker(std::mem::take(&mut options.policy))?;
        let settings = source::OpenSettings {
            with_tail,
            ..self.settings_with(&options)?
        };
        let opened = source::open(path, &settings)?;
        self.open_source(opened, &options, make)
    }

    /// Open a local file from a descriptor the caller opened (and hands over: it is the
    /// engine's, closed with the last open of the file). `name` is what errors and stats call
    /// it. With `O_DIRECT` wanted and not set on `fd`, the engine reads through a descriptor of
    /// its own with `O_DIRECT`, opened from `fd` (`/proc/self/fd`), not from the name; `fd`
    /// itself is left as it is.
    ///
    /// # Errors
    /// As [`Engine::open`]: `Unsupported` for a descriptor of a FIFO, a socket or a device;
    /// `IsADirectory` for a directory.
    pub fn open_fd(
        &self,
        fd: std::os::fd::OwnedFd,
        name: impl AsRef<Path>,
        mut options: OpenOptions,
    ) -> io::Result<File> {
        let make = self.policy_maker(std::mem::take(&mut options.policy))?;
        let opened = source::local::open_owned(fd, name.as_ref(), &self.settings_with(&options)?)?;
        self.open_source(opened, &options, make)
    }

    /// What `name` is (a local path, `s3://bucket/key`, `http(s)://host/path`), without
    /// opening it: a file or a directory (an S3 prefix with objects under it), its size, and
    /// its version (an ETag where the store gives one, the modification time). The kind of
    /// source that reads the name answers, from the one table of them (`source::SOURCES`).
    ///
    /// # Errors
    /// `NotFound` where there is no such file or object, `PermissionDenied` for refused
    /// credentials, `InvalidInput` for a URL that names nothing; each message names it, never
    /// a key or a password.
    pub fn stat(&self, name: impl AsRef<Path>) -> io::Result<Entry> {
        let name = name.as_ref();
        (source::kind_of(name)?.stat)(name, &self.open_settings())
    }

    /// What is directly under `name`, sorted by name, one level deep as `ls` lists a
    /// directory (an S3 prefix's objects and prefixes, a local directory's entries); a file
    /// or an object lists as itself (an HTTP server, which has no listing, lists a URL so).
    ///
    /// # Errors
    /// As [`Engine::stat`].
    pub fn list(&self, name: impl AsRef<Path>) -> io::Result<Vec<Entry>> {
        let name = name.as_ref();
        (source::kind_of(name)?.list)(name, &self.open_settings())
    }

    /// Open what `entry` describes, as [`Engine::stat`] or [`Engine::list`] gave it, without
    /// asking again: an object's ETag pins the version (a change since fails the first read).
    /// A filesystem layer that has just made a stat (fsspec's `info` before `open`, a mount's
    /// `lookup`) saves a round trip per open.
    ///
    /// # Errors
    /// As [`Engine::open`]; `IsADirectory` for a directory or prefix.
    pub fn open_entry(&self, entry: &Entry) -> io::Result<File> {
        if entry.is_dir {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{}: a directory, not a file", entry.name),
            ));
        }
        let make = self.policy_maker(PolicyChoice::Engine)?;
        let kind = source::kind_of(Path::new(&entry.name))?;
        let opened = (kind.open_entry)(entry, &self.open_settings())?;
        self.open_source(opened, &OpenOptions::new(), make)
    }

    /// The engine's settings a source is opened with.
    fn open_settings(&self) -> source::OpenSettings<'_> {
        let config = &self.inner.config;
        source::OpenSettings {
            direct: config.direct,
            leases: config.leases,
            remote_options: &config.remote_options.0,
            with_tail: true,
        }
    }

    /// Open `path` to be read from its start on (a file of `open_many`'s or `open_all`'s): as
    /// [`Engine::open`], without an object's last bytes.
    pub(crate) fn open_from_start(&self, path: &Path) -> io::Result<File> {
        self.open_path(path, OpenOptions::new(), false)
    }

    /// The settings a source is opened with under `options` (its `O_DIRECT` choice), once the
    /// options are checked.
    fn settings_with(&self, options: &OpenOptions) -> io::Result<source::OpenSettings<'_>> {
        options.block_pages()?;
        let mut settings = self.open_settings();
        if let Some(direct) = options.direct {
            settings.direct = direct;
        }
        Ok(settings)
    }

    /// What makes a file's policy under `choice`: a name is checked here, before any file is
    /// opened.
    fn policy_maker(&self, choice: PolicyChoice) -> io::Result<MakeOnce<'static>> {
        let named = |name: &str| -> io::Result<MakeOnce<'static>> {
            let make =
                policy::maker(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            Ok(Box::new(make))
        };
        match choice {
            PolicyChoice::Engine => Ok(Box::new(self.inner.make_policy)),
            PolicyChoice::Named(name) => named(&name),
            PolicyChoice::Value(policy) => Ok(Box::new(move |_| policy)),
            PolicyChoice::Maker(make) => Ok(make),
        }
    }

    /// Open a source already opened by its kind (see `source`): share the pages of an open of
    /// the same version, or give it a page table of its own; then give it a policy.
    /// `make` makes its policy from the settings for this file.
    fn open_source(
        &self,
        opened: source::Opened,
        options: &OpenOptions,
        make: MakeOnce<'_>,
    ) -> io::Result<File> {
        let inner = &self.inner;
        let block_pages = options.block_pages()?;
        let key = opened.identity.object.clone();
        let data = {
            let mut reg = inner.files.lock().unwrap_or_else(|p| p.into_inner());
            let live = reg.live.get(&key).and_then(Weak::upgrade).filter(|d| {
                reg.ids
                    .get(&key)
                    .is_some_and(|(_, id)| *id == opened.identity)
                    && d.source.is_direct() == opened.source.is_direct()
            });
            match live {
                Some(d) => d,
                None => {
                    let id = match reg.ids.get(&key) {
                        Some((id, ident)) if *ident == opened.identity => *id,
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
                    for note in opened.notes {
                        inner.note_fallback(note);
                    }
                    let size = opened.identity.size;
                    let meter = inner.core.meters.of(DeviceKey::of(&key));
                    reg.ids.insert(key.clone(), (id, opened.identity));
                    let table = inner.core.cache.table(id, size.div_ceil(PAGE_SIZE));
                    let d = Arc::new(FileData::new(id, table, size, opened.source, meter));
                    reg.live.insert(key, Arc::downgrade(&d));
                    d
                }
            }
        };
        inner.core.meters.opened(&data.meter);
        if options.record_latency {
            data.read_latency.switch_on();
        }
        let config = self.policy_config(&data, options);
        let mut policy = make(config);
        let (estimate, version) = {
            let mut m = data.meter.lock();
            if let Some(model) = data.source.limits().starts_as {
                m.start_as(model, config.io_max_pages);
            }
            (m.for_policy(config.io_max_pages), m.version)
        };
        policy.on_device(estimate);
        let activity = activity::Activity::new(data.size.div_ceil(PAGE_SIZE));
        Ok(File {
            engine: inner.clone(),
            data,
            io_max: config.io_max_pages,
            window_max: config.ra_max_pages,
            block_pages,
            activity,
            state: Mutex::new(PolicyState {
                policy,
                device_version: version,
                congestion: crate::policy::Congestion::default(),
            }),
            pos: AtomicU64::new(0),
            opened_ahead: None,
        })
    }

    /// The policy settings for a file on this engine: windows sized for its device.
    fn policy_config(&self, data: &FileData, options: &OpenOptions) -> PolicyConfig {
        let c = &self.inner.config;
        let quarter = self.inner.core.cache.run_cap_pages();
        let limits = data.source.limits();
        let io_max = options
            .request_max_bytes
            .or(c.request_max_bytes)
            .map(|b| b.div_ceil(PAGE_SIZE))
            .or(limits.max_sectors_kb.map(kib_to_pages))
            .unwrap_or(256)
            .clamp(1, quarter);
        let ra_max = options
            .window_max_bytes
            .or(c.window_max_bytes)
            .map(|b| b.div_ceil(PAGE_SIZE))
            .unwrap_or_else(|| {
                // The device's read_ahead_kb, but at least eight of its largest requests:
                // the queue depth at which a virtual or NVMe device streams at full speed
                // (measured: 8 MiB ahead gave 790-1050 MB/s here, 32 MiB 1250-1310).
                let device = limits.read_ahead_kb.map_or(0, kib_to_pages);
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

    /// The memory budget, in bytes: the most the cache holds (whole pages).
    pub fn budget_bytes(&self) -> u64 {
        self.inner.core.cache.slots() as u64 * PAGE_SIZE
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
                f.extend(
                    inner
                        .core
                        .cache
                        .fault_ahead_refused()
                        .map(|why| Fallback::new(FallbackKind::FaultAhead, why)),
                );
                f
            },
            policy: inner.config.policy.clone(),
            budget_bytes: self.budget_bytes(),
            reads: get(&c.reads),
            bytes_returned: get(&c.bytes_returned),
            copied_bytes: c.copied_bytes(),
            hit_pages: get(&c.hit_pages),
            miss_pages: get(&c.miss_pages),
            pages_read,
            wasted_pages: get(&k.wasted_pages),
            thrashed_pages: get(&k.thrashed_pages),
            requests,
            sync_requests: get(&c.sync_requests),
            ahead_requests: get(&c.ahead_requests),
            expedited_requests: get(&c.expedited_requests),
            cancelled_requests: get(&c.cancelled_requests),
            avg_request_pages: crate::units::ratio(pages_read, requests),
            stall_ms: get(&c.stall_ns) as f64 / 1e6,
            io_errors: get(&c.io_errors),
            resident_pages: inner.core.cache.resident_pages() as u64,
            in_flight_pages: inner.core.cache.in_flight_pages() as u64,
            size_checks: get(&c.size_checks),
            given_back_bytes: inner
                .core
                .cache
                .counters
                .given_back_pages
                .load(Ordering::Relaxed)
                * PAGE_SIZE,
            dropped_behind_pages: inner
                .core
                .cache
                .counters
                .dropped_behind_pages
                .load(Ordering::Relaxed),
            active_handles: inner.active_handles(),
            readahead_share_bytes: inner.budget_pages.load(Ordering::Relaxed) * PAGE_SIZE,
            read_latency: inner.core.read_latency.summary(),
            request_latency: inner.core.request_latency.summary(),
            request_log_dropped: inner
                .log
                .as_ref()
                .map_or(0, |l| l.lock().unwrap_or_else(|p| p.into_inner()).dropped),
        }
    }

    /// The requests sent so far (the latest, up to the log's limit), if
    /// [`EngineBuilder::record_requests`] was on.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.inner.log.as_ref().map_or_else(Vec::new, |l| {
            let log = l.lock().unwrap_or_else(|p| p.into_inner());
            log.records.iter().copied().collect()
        })
    }

    /// The requests sent since the last call (or since the start), emptying the log: an
    /// engine kept for many runs hands each run its own requests.
    pub fn take_request_log(&self) -> Vec<RequestRecord> {
        self.inner.log.as_ref().map_or_else(Vec::new, |l| {
            let mut log = l.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut log.records).into()
        })
    }

    /// Forget what the engine measured of every device: policies are given the starting
    /// estimate again, as in a new engine, and measuring starts over. For benchmarks that
    /// reuse one engine but want each run to learn the device as a new engine would.
    pub fn forget_device_estimate(&self) {
        self.inner.core.meters.forget_all();
    }

    /// The estimate of the device of the file opened last: as measured so far, or the one
    /// its meter started from (each device has its own; [`File::device_estimate`] gives a
    /// file's, as its policy is told it).
    pub fn device_estimate(&self) -> DeviceEstimate {
        self.inner.core.meters.last_estimate()
    }
}
