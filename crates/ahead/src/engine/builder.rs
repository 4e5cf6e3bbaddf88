//! Building an engine: its settings ([`EngineBuilder`], from [`Engine::builder`]), their
//! defaults, and [`EngineBuilder::build`], which makes the cache, probes the backends and
//! falls back where one is missing, saying so in the statistics.

use super::*;

/// The engine's default memory budget: 256 MiB.
pub const DEFAULT_BUDGET: u64 = 256 << 20;
/// The engine's default policy.
pub const DEFAULT_POLICY: &str = "adaptive";
/// Threads of the `threads` backend by default: enough for a queue depth of 32.
pub const DEFAULT_THREADS: usize = 32;
/// Requests the log keeps by default ([`EngineBuilder::record_requests`]): the latest 65,536
/// (2 MiB).
pub const DEFAULT_REQUEST_LOG_LIMIT: usize = 1 << 16;
/// Smallest budget the engine accepts: 64 pages.
pub const MIN_BUDGET: u64 = 64 * PAGE_SIZE;

/// Which I/O backend reads for the engine: `auto` or the name of a registered backend (see
/// `backend/mod.rs`'s registry; `"threads"` and the like parse with `str::parse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendChoice(&'static str);

impl BackendChoice {
    /// io_uring if the probe finds it works, else `threads`.
    pub const AUTO: BackendChoice = BackendChoice("auto");
    /// io_uring (falls back to `threads`, saying why, if the probe fails).
    pub const URING: BackendChoice = BackendChoice("uring");
    /// A thread pool doing `preadv(2)`.
    pub const THREADS: BackendChoice = BackendChoice("threads");
    /// `preadv(2)` in the reading thread, ahead reads included (no overlap: the baseline).
    /// An async read ([`File::read_at_async`](crate::File::read_at_async), `read_direct`,
    /// a prefetch) does its I/O inside `poll`, blocking the executor's thread for it: this
    /// backend is for measurements and tests, not for a service.
    pub const SYNC: BackendChoice = BackendChoice("sync");

    /// The name: `auto` or a registered backend's.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(BackendChoice::AUTO);
        }
        match backend::BACKENDS.iter().find(|b| b.name == s) {
            Some(b) => Ok(BackendChoice(b.name)),
            None => Err(format!(
                "unknown engine '{s}'; known: auto, {}",
                backend::BACKENDS
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// Settings for an [`Engine`]; [`Engine::builder`] starts from the defaults.
#[derive(Clone, Debug)]
pub struct EngineBuilder {
    pub(super) budget: u64,
    pub(super) policy: String,
    pub(super) backend: BackendChoice,
    pub(super) direct: bool,
    pub(super) io_uring_allowed: bool,
    pub(super) record_requests: bool,
    pub(super) request_log_limit: usize,
    pub(super) threads: usize,
    pub(super) window_max_bytes: Option<u64>,
    pub(super) request_max_bytes: Option<u64>,
    #[cfg(feature = "testing")]
    pub(super) faults: Option<Faults>,
    pub(super) leases: bool,
    pub(super) lease_signal: Option<i32>,
    pub(super) device_estimate: Option<DeviceEstimate>,
    pub(super) device_model: Option<crate::device::DeviceModel>,
    pub(super) pretouch: bool,
    pub(super) keep_memory: bool,
    pub(super) fault_ahead: bool,
    pub(super) drop_behind: bool,
    pub(super) budget_over_memory: bool,
    pub(super) remote_options: RemoteOptions,
}

/// Settings for remote stores, key and value; shown by key only, as they may hold secrets.
#[derive(Clone, Default)]
pub(super) struct RemoteOptions(pub(super) Vec<(String, String)>);

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| format!("{k}=<hidden>")))
            .finish()
    }
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            budget: DEFAULT_BUDGET,
            policy: DEFAULT_POLICY.into(),
            backend: BackendChoice::AUTO,
            direct: true,
            io_uring_allowed: true,
            record_requests: false,
            request_log_limit: DEFAULT_REQUEST_LOG_LIMIT,
            threads: DEFAULT_THREADS,
            window_max_bytes: None,
            request_max_bytes: None,
            #[cfg(feature = "testing")]
            faults: None,
            leases: true,
            lease_signal: None,
            device_estimate: None,
            device_model: None,
            pretouch: false,
            keep_memory: false,
            fault_ahead: true,
            drop_behind: false,
            budget_over_memory: false,
            remote_options: RemoteOptions::default(),
        }
    }
}

impl EngineBuilder {
    /// The memory budget in bytes: the most the cache ever holds (default 256 MiB). A budget
    /// above the memory the process can have (the machine's RAM, or its memory cgroup's
    /// limit) is refused at [`build`](Self::build), unless
    /// [`allow_budget_over_memory`](Self::allow_budget_over_memory).
    pub fn budget(mut self, bytes: u64) -> Self {
        self.budget = bytes;
        self
    }

    /// Take a budget above the memory the process can have (default off: refused). The cache
    /// faults memory in as it fills, so such a budget is only reached by reading that much;
    /// then the system swaps or the cgroup's OOM killer ends the process.
    pub fn allow_budget_over_memory(mut self, on: bool) -> Self {
        self.budget_over_memory = on;
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

    /// Keep a log of the requests sent to the device ([`Engine::request_log`]): when, where,
    /// how large, and whether it was read ahead. For pictures of a policy's windows over time.
    /// The log keeps the latest [`request_log_limit`](Self::request_log_limit) requests and
    /// counts those it dropped ([`Stats::request_log_dropped`]).
    pub fn record_requests(mut self, on: bool) -> Self {
        self.record_requests = on;
        self
    }

    /// The most requests the log keeps (default [`DEFAULT_REQUEST_LOG_LIMIT`], 32 bytes each):
    /// the oldest go first.
    pub fn request_log_limit(mut self, records: usize) -> Self {
        self.request_log_limit = records;
        self
    }

    /// Tell the policies this estimate of the device and never measure it: every run then
    /// decides alike, as the simulator does with a modelled device (tests that hold the engine
    /// to the simulator's decisions, reproducible benchmarks).
    pub fn device_estimate(mut self, estimate: DeviceEstimate) -> Self {
        self.device_estimate = Some(estimate);
        self
    }

    /// What each device is taken for until the engine has measured it: a profile `ahead
    /// calibrate` wrote, or a preset ([`crate::DeviceModel::named`]), instead of an NVMe-class
    /// device (or an object store's own guess). The policies' first windows follow it; the
    /// first requests' measurements then move it, as always.
    pub fn device_model(mut self, model: crate::device::DeviceModel) -> Self {
        self.device_model = Some(model);
        self
    }

    /// Threads of the `threads` backend (default 32).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    /// The largest readahead window in bytes (rounded up to pages where a file's policy is
    /// made), instead of the device's `read_ahead_kb` (the name [`OpenOptions::window_max`]
    /// has for one file; `window_max=` by [`set`](Self::set)).
    pub fn window_max(mut self, bytes: u64) -> Self {
        self.window_max_bytes = Some(bytes);
        self
    }

    /// The largest single read in bytes (rounded up to pages), instead of the device's
    /// `max_sectors_kb` (the name [`OpenOptions::request_max`] has for one file;
    /// `request_max=` by [`set`](Self::set)).
    pub fn request_max(mut self, bytes: u64) -> Self {
        self.request_max_bytes = Some(bytes);
        self
    }

    /// [`window_max`](Self::window_max) in KiB, as sysfs's `read_ahead_kb` gives it.
    pub fn ra_max_kb(self, kb: u64) -> Self {
        self.window_max(kb.saturating_mul(1024))
    }

    /// [`request_max`](Self::request_max) in KiB, as sysfs's `max_sectors_kb` gives it.
    pub fn io_max_kb(self, kb: u64) -> Self {
        self.request_max(kb.saturating_mul(1024))
    }

    /// Wrap the backend in a fault injector driven by `faults` (tests and stress runs: see
    /// [`Faults`]). Every request, waited for or read ahead, passes through it. With the
    /// `testing` feature only.
    #[cfg(feature = "testing")]
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
    /// [`lease_signal`](Self::lease_signal) for the signal it takes.
    pub fn leases(mut self, on: bool) -> Self {
        self.leases = on;
        self
    }

    /// The real-time signal lease breaks come by (default `SIGRTMAX - 3`), for a process that
    /// uses that one itself. The handler is the process's, installed by the first lease
    /// taken: every engine of a process must agree, and [`build`](Self::build) fails for one
    /// that asks for another signal after a lease was taken.
    pub fn lease_signal(mut self, signal: i32) -> Self {
        self.lease_signal = Some(signal);
        self
    }

    /// Fault in the whole budget, and register it with io_uring, at build (default off), as
    /// the JVM's `AlwaysPreTouch` does for its heap. By default memory is faulted in as the
    /// cache first uses it, so an engine costs what it caches; the kernel zeroes each fresh
    /// page on that first touch, on the path of the read that needed it. A long-running
    /// service that will fill its cache anyway can pay that at start instead: the build then
    /// takes time in proportion to the budget, and the process holds the budget from the start.
    pub fn pretouch(mut self, on: bool) -> Self {
        self.pretouch = on;
        self
    }

    /// Fault in the cache's memory a little ahead of its growth, on a thread of its own
    /// (default on). Memory is faulted in as the cache first uses it; the kernel's first touch
    /// of a page (zeroing it, and on a virtual machine often the host's own first touch)
    /// would otherwise be paid by the thread that submits the read, which is the reader's.
    /// Once the cache holds 8 MiB and grows for a local file's reads (which the kernel makes
    /// into the cache's memory: a remote object's bytes are copied in by the threads that
    /// receive them), a thread named `ahead-fault-ahead` keeps the next 24 MiB of the budget
    /// faulted in (`MADV_POPULATE_WRITE`, Linux 5.14 and later), so a cache that grows finds
    /// its memory ready; it ends after 200 ms without growth. The memory is within
    /// the budget, and dropped pages give it back with the rest. Off: no thread, and the reads
    /// fault in their own memory. An engine built to [`pretouch`](Self::pretouch) has nothing
    /// to fault in ahead.
    pub fn fault_ahead(mut self, on: bool) -> Self {
        self.fault_ahead = on;
        self
    }

    /// Read files larger than a quarter of the budget through a ring (default off), as
    /// PostgreSQL scans a table larger than a quarter of its buffers: what a scan has passed
    /// over (256 pages behind it, every page of a 64-page batch used) is dropped, so the scan
    /// reads on in memory already faulted in, and the engine holds about its windows rather
    /// than the file; such a file opened with [`crate::Engine::open_many`] is asked for the
    /// first bytes that keep its device busy, not its whole share. For a caller that reads
    /// each large file once (`ahead cat` turns it on, as `dd iflag=nocache` asks the kernel):
    /// a re-read of such a file from its start reads it again. Off: every file is cached
    /// whole while the budget allows. Not the default because it costs re-readers, measured
    /// (BENCHMARKS, issue 45): the bench's warm re-read of 512 MiB of its 2 GiB file read it
    /// all again, and its large random reads (512 KiB, `tiobench`) used whole batches and
    /// lost them.
    pub fn drop_behind(mut self, on: bool) -> Self {
        self.drop_behind = on;
        self
    }

    /// Keep the cache's memory once touched, even when its pages are dropped (default off).
    /// By default, when dropped pages (don't-need advice, a file that changed) leave at least
    /// 16 MiB free at the top of the cache, that memory goes back to the system, so the engine
    /// holds about what it caches now; reading into it again faults it in afresh. An engine
    /// that drops and refills its cache over and over (a benchmark's cold runs) can keep it.
    /// An engine built to [`pretouch`](Self::pretouch) keeps its memory either way.
    pub fn keep_memory(mut self, on: bool) -> Self {
        self.keep_memory = on;
        self
    }

    /// A setting for remote objects (`s3://`, `http(s)://`), as object_store's config keys
    /// take them: `endpoint`, `region`, `access_key_id`, `secret_access_key`, `timeout`,
    /// `allow_http`, ... (fsspec's `storage_options`). They override the environment's
    /// `AWS_*` variables; an unknown key fails the open that would use it. Values are never
    /// shown (`Debug` prints keys only).
    pub fn remote_option(mut self, key: &str, value: &str) -> Self {
        self.remote_options.0.push((key.into(), value.into()));
        self
    }

    /// Start the engine: allocate the cache, probe and start the backend.
    ///
    /// # Errors
    /// `InvalidInput` for an unknown policy, a budget below [`MIN_BUDGET`] or a lease signal
    /// that is not a real-time one (or not the one this process already uses); the system's
    /// where the cache cannot be mapped or no backend can start (io_uring missing is not an
    /// error: the engine falls back and says so in [`Stats::fallbacks`]).
    pub fn build(self) -> io::Result<Engine> {
        // The policy's name is looked up here, once (`set("policy", ..)` looked it up too, to
        // refuse a bad name where it was given); every open uses what this found.
        let make_policy = policy::maker(&self.policy)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if let Some(signal) = self.lease_signal {
            crate::os::want_lease_signal(signal)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
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
        if !self.budget_over_memory {
            if let Some((limit, what)) = crate::os::memory_limit() {
                if self.budget > limit {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "a memory budget of {} MiB is more than this process can have: {what} is {} MiB; give a smaller budget, or allow it explicitly (ahead cat --budget-over-memory; EngineBuilder::allow_budget_over_memory; Python budget_over_memory=True)",
                            self.budget >> 20,
                            limit >> 20
                        ),
                    ));
                }
            }
        }
        let slots = usize::try_from(self.budget / PAGE_SIZE)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "memory budget too large"))?;
        let core = Arc::new(CacheAndMeter {
            cache: Cache::new(slots).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot map a {} MiB cache: {e}", self.budget >> 20),
                )
            })?,
            counters: Counters::default(),
            read_latency: stats::LatencyRecorder::new(true),
            request_latency: stats::LatencyRecorder::new(true),
            meters: Meters::new(self.device_estimate, self.device_model),
            in_flight: AtomicUsize::new(0),
        });
        if !self.fault_ahead {
            core.cache.no_fault_ahead();
        }
        if self.drop_behind {
            core.cache.drop_behind();
        }
        if self.pretouch {
            core.cache.populate().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot fault in a {} MiB cache: {e}", self.budget >> 20),
                )
            })?;
        }
        let completer: Arc<dyn Completer> = core.clone();
        let mut fallbacks = Vec::new();
        let arena = core.cache.arena();
        let start_with = backend::StartWith {
            arena: (arena.base(), arena.bytes()),
            completer: completer.clone(),
            threads: self.threads,
            io_uring_allowed: self.io_uring_allowed,
            pretouch: self.pretouch,
        };
        // `auto` is the first registered (io_uring); any backend that cannot start falls back
        // to the fallback (the thread pool), saying why, and so does one not compiled in.
        let wanted = match self.backend.name() {
            "auto" => backend::BACKENDS[0].name,
            name => name,
        };
        let backend: Box<dyn Backend> = match backend::BACKENDS.iter().find(|b| b.name == wanted) {
            None => {
                fallbacks.push(Fallback::new(
                    FallbackKind::Backend,
                    format!(
                        "backend {wanted} not built in (the crate's `{wanted}` feature is off): using {}",
                        backend::FALLBACK.name
                    ),
                ));
                (backend::FALLBACK.start)(&start_with)?
            }
            Some(entry) => match (entry.start)(&start_with) {
                Ok(b) => b,
                Err(e) if entry.name != backend::FALLBACK.name => {
                    fallbacks.push(Fallback::new(
                        FallbackKind::Backend,
                        format!(
                            "{} unavailable ({e}): using {}",
                            entry.about,
                            backend::FALLBACK.name
                        ),
                    ));
                    (backend::FALLBACK.start)(&start_with)?
                }
                Err(e) => return Err(e),
            },
        };
        #[cfg(feature = "testing")]
        let backend: Box<dyn Backend> = match &self.faults {
            Some(f) => Box::new(backend::faults::FaultBackend::new(
                backend,
                completer.clone(),
                f.clone(),
            )?),
            None => backend,
        };
        self.finish(core, backend, fallbacks, make_policy)
    }

    /// The engine, once its cache and backend are made.
    fn finish(
        self,
        core: Arc<CacheAndMeter>,
        backend: Box<dyn Backend>,
        fallbacks: Vec<Fallback>,
        make_policy: policy::MakePolicy,
    ) -> io::Result<Engine> {
        let log = self
            .record_requests
            .then(|| Mutex::new(RequestLog::new(self.request_log_limit)));
        let half_cache = core.cache.readahead_share_pages();
        Ok(Engine {
            inner: Arc::new(EngineParts {
                core,
                backend,
                config: self,
                make_policy,
                files: Mutex::new(OpenFiles::default()),
                shares: Mutex::new(Default::default()),
                budget_pages: AtomicU64::new(half_cache),
                next_sweep_ms: AtomicU64::new(0),
                fallbacks: Mutex::new(fallbacks),
                started: Instant::now(),
                log,
            }),
        })
    }
}
