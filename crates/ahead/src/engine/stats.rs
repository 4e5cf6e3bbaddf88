//! What an engine reports of itself: [`Stats`] (from [`Engine::stats`]) and each file's
//! [`FileStats`] (from [`File::stats`]), the counters behind them, the latency histograms
//! ([`Latency`]), and the bounded log of requests ([`RequestRecord`]).
//!
//! The counters' names and meanings are the simulator's too (its `Metrics`):
//! `requests`, `sync_requests`, `ahead_requests`, `pages_read`, `wasted_pages`,
//! `thrashed_pages`, `hit_pages` (ready when the reader reached them: no wait), `miss_pages`
//! (waited for: in flight, or read for the reader), `avg_request_pages` and `stall_ms`. One
//! difference stays: the engine sends at most the largest request's pages at once, where the
//! simulator counts each run a policy starts as one request, as the kernel submits readahead.

use super::*;
use hdrhistogram::Histogram;

/// What fell back from what was asked (the kind of [`Fallback`]), for a program to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FallbackKind {
    /// The backend asked for could not start, or is not built in: another one reads.
    Backend,
    /// io_uring could not pin the cache's memory as fixed buffers: plain reads.
    FixedBuffers,
    /// A file could not be opened with `O_DIRECT`: it is read through the kernel's page
    /// cache (buffered, `POSIX_FADV_RANDOM`).
    Buffered,
    /// No read lease on a file: each read checks its size with `fstat`.
    NoLease,
    /// A file changed while open: its cached pages were dropped.
    Changed,
    /// A remote object without an ETag: a change is told by size and Last-Modified only.
    NoETag,
    /// A remote object with neither ETag nor Last-Modified: a change is told by its size
    /// only, so a same-size replacement while it is read may mix two versions' bytes
    /// ([`File::unpinned`](super::File::unpinned)).
    Unpinned,
    /// The cache's memory could not be faulted in ahead of its reads
    /// ([`EngineBuilder::fault_ahead`](super::EngineBuilder::fault_ahead)): the reads fault in
    /// their own.
    FaultAhead,
}

/// One fallback the engine took: what, and why in words (with the file's name where it
/// concerns one file). Shown by `Display` as its message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Fallback {
    /// What fell back.
    pub kind: FallbackKind,
    /// Why, and what the engine does instead.
    pub message: String,
}

impl Fallback {
    pub(crate) fn new(kind: FallbackKind, message: impl Into<String>) -> Fallback {
        Fallback {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Statistics of an engine since it started. Fields will be added: built only by the engine.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// The backend reading for the engine: `uring`, `threads` or `sync`.
    pub backend: &'static str,
    /// Every fallback taken, and why (no io_uring, a file read without `O_DIRECT`, ...).
    pub fallbacks: Vec<Fallback>,
    /// The policy files are opened with.
    pub policy: String,
    /// The memory budget in bytes.
    pub budget_bytes: u64,
    /// Application reads.
    pub reads: u64,
    /// Bytes returned to the application.
    pub bytes_returned: u64,
    /// Bytes the engine copied: out of the cache into readers' buffers, and a remote answer's
    /// body into the cache (or into a reader's buffer). A local file's pages land in the cache
    /// from the device, and a direct read in the reader's own buffer, with no copy. Over
    /// `bytes_returned`: copies per byte read.
    pub copied_bytes: u64,
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
    /// Requests taken back from the backend's queue before they reached the device: a
    /// [`crate::engine::Prefetch`] dropped unfinished.
    pub cancelled_requests: u64,
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
    /// Memory the cache gave back to the system after its pages were dropped, in all.
    pub given_back_bytes: u64,
    /// Pages a scan passed over and dropped so it could read on in the same memory (files
    /// larger than a quarter of the budget, where [`crate::EngineBuilder::drop_behind`] is on).
    pub dropped_behind_pages: u64,
    /// Handles read in the last [`crate::engine::IDLE_AFTER_MS`]: those that share the
    /// readahead budget (idle handles take no share).
    pub active_handles: u64,
    /// The readahead budget of each active handle now, in bytes.
    pub readahead_share_bytes: u64,
    /// How long application reads took, from the call to the last byte copied.
    pub read_latency: Latency,
    /// How long requests took, from submission to completion.
    pub request_latency: Latency,
    /// Requests the bounded log ([`EngineBuilder::record_requests`]) dropped, oldest first,
    /// to keep within its limit.
    pub request_log_dropped: u64,
}

/// One file's figures, across every open of it through one engine ([`File::stats`]). The
/// counters mean what [`Stats`]'s of the same names do. Fields will be added: built only by the
/// engine.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct FileStats {
    /// The path (or URL) it was opened with.
    pub path: String,
    /// Application reads.
    pub reads: u64,
    /// Bytes returned to the application.
    pub bytes_returned: u64,
    /// Bytes copied for it (see [`Stats::copied_bytes`]).
    pub copied_bytes: u64,
    /// Pages read that were ready (no wait).
    pub hit_pages: u64,
    /// Pages read that a reader waited for.
    pub miss_pages: u64,
    /// Pages read from the device.
    pub pages_read: u64,
    /// Pages read and evicted before anyone used them.
    pub wasted_pages: u64,
    /// Pages evicted unused and then read again.
    pub thrashed_pages: u64,
    /// Requests sent to the device.
    pub requests: u64,
    /// Requests a reader waited for.
    pub sync_requests: u64,
    /// Requests read ahead.
    pub ahead_requests: u64,
    /// Ahead requests a reader caught up with in the backend's queue and read itself.
    pub expedited_requests: u64,
    /// Requests taken back unread (a [`crate::engine::Prefetch`] dropped).
    pub cancelled_requests: u64,
    /// `pages_read / requests`.
    pub avg_request_pages: f64,
    /// Time readers spent waiting for data, summed over threads, in milliseconds.
    pub stall_ms: f64,
    /// Requests that failed.
    pub io_errors: u64,
    /// `fstat` calls made to learn whether the file changed.
    pub size_checks: u64,
    /// How long its reads took: only where an open asked for it
    /// ([`crate::OpenOptions::record_latency`]), as a histogram costs tens of KiB per file.
    pub read_latency: Option<Latency>,
}

/// Latencies summarised from an HDR histogram (microsecond resolution, two significant
/// digits: each figure within 1% of the true one, up to an hour).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Latency {
    /// How many were recorded.
    pub count: u64,
    /// Their mean, in microseconds.
    pub mean_us: f64,
    /// The median, in microseconds.
    pub p50_us: u64,
    /// The 90th percentile, in microseconds.
    pub p90_us: u64,
    /// The 99th percentile, in microseconds.
    pub p99_us: u64,
    /// The 99.9th percentile, in microseconds.
    pub p999_us: u64,
    /// The longest, in microseconds.
    pub max_us: u64,
}

/// An HDR histogram of durations in microseconds, made on the first record (a file never
/// read, or one whose open did not ask, costs a word).
pub(crate) struct LatencyRecorder {
    on: std::sync::atomic::AtomicBool,
    histogram: Mutex<Option<Box<Histogram<u64>>>>,
}

/// The longest latency the histograms tell apart: an hour, in microseconds.
const LATENCY_MAX_US: u64 = 3_600_000_000;

impl LatencyRecorder {
    pub(super) fn new(on: bool) -> LatencyRecorder {
        LatencyRecorder {
            on: std::sync::atomic::AtomicBool::new(on),
            histogram: Mutex::new(None),
        }
    }

    pub(super) fn switch_on(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    pub(super) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub(super) fn record(&self, took: Duration) {
        self.record_all([took]);
    }

    /// [`LatencyRecorder::record`] for each of `took`, the lock taken once (not at all for
    /// none).
    pub(super) fn record_all(&self, took: impl IntoIterator<Item = Duration>) {
        let mut took = took.into_iter().peekable();
        if !self.is_on() || took.peek().is_none() {
            return;
        }
        let mut h = self.histogram.lock().unwrap_or_else(|p| p.into_inner());
        let h = h.get_or_insert_with(|| {
            Box::new(
                Histogram::new_with_bounds(1, LATENCY_MAX_US, 2)
                    .expect("1 us to an hour at two digits is a valid histogram"),
            )
        });
        for t in took {
            h.saturating_record((t.as_micros() as u64).max(1));
        }
    }

    pub(super) fn summary(&self) -> Latency {
        let h = self.histogram.lock().unwrap_or_else(|p| p.into_inner());
        match h.as_deref() {
            None => Latency::default(),
            Some(h) => Latency {
                count: h.len(),
                mean_us: h.mean(),
                p50_us: h.value_at_quantile(0.5),
                p90_us: h.value_at_quantile(0.9),
                p99_us: h.value_at_quantile(0.99),
                p999_us: h.value_at_quantile(0.999),
                max_us: h.max(),
            },
        }
    }
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} timed, mean {:.0} us, p50 {} us, p99 {} us, max {} us",
            self.count, self.mean_us, self.p50_us, self.p99_us, self.max_us
        )
    }
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
            "  reads {}, bytes {} (copied {}), hit pages {}, miss pages {}, stall {:.1} ms",
            self.reads,
            self.bytes_returned,
            self.copied_bytes,
            self.hit_pages,
            self.miss_pages,
            self.stall_ms
        )?;
        writeln!(
            f,
            "  pages read {}, wasted {}, thrashed {}, dropped behind {}, requests {} ({} sync, {} ahead, {} ahead expedited), avg {:.1} pages, errors {}",
            self.pages_read,
            self.wasted_pages,
            self.thrashed_pages,
            self.dropped_behind_pages,
            self.requests,
            self.sync_requests,
            self.ahead_requests,
            self.expedited_requests,
            self.avg_request_pages,
            self.io_errors
        )?;
        writeln!(
            f,
            "  size checks (fstat) {}, memory given back {} MiB",
            self.size_checks,
            self.given_back_bytes >> 20
        )?;
        write!(
            f,
            "  reads: {}\n  requests: {}",
            self.read_latency, self.request_latency
        )
    }
}

/// Direct reads ([`File::read_direct`]) finished in one burst, summed before they are added
/// to the counters: each is a read, a request the reader waited for, and its pages missed and
/// read; the completion adds a burst's at once, not a dozen atomic additions a read.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct DirectTally {
    pub(super) reads: u64,
    pub(super) pages: u64,
    pub(super) bytes: u64,
    pub(super) stall_ns: u64,
}

impl DirectTally {
    pub(super) fn add(&mut self, pages: u64, bytes: u64, took: Duration) {
        self.reads += 1;
        self.pages += pages;
        self.bytes += bytes;
        self.stall_ns += took.as_nanos() as u64;
    }
}

/// Aligned to two cache lines of its own: a reader's thread counts into it on every read while
/// the completion thread updates the atomics beside it (`in_flight`), and sharing a line with
/// those would move it between CPUs on every read.
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Counters {
    pub(super) reads: AtomicU64,
    pub(super) bytes_returned: AtomicU64,
    pub(super) hit_pages: AtomicU64,
    pub(super) miss_pages: AtomicU64,
    pub(super) stall_ns: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) sync_requests: AtomicU64,
    pub(super) ahead_requests: AtomicU64,
    pub(super) expedited_requests: AtomicU64,
    pub(super) cancelled_requests: AtomicU64,
    pub(super) pages_read: AtomicU64,
    pub(super) io_errors: AtomicU64,
    pub(super) size_checks: AtomicU64,
    /// Bytes read straight into readers' buffers (no copy out of the cache).
    pub(super) direct_bytes: AtomicU64,
    /// Bytes a source copied in from a body it was handed (a remote answer's).
    pub(super) copied_in_bytes: AtomicU64,
    /// A file's own refaults (the engine's are the cache's count).
    pub(super) thrashed_pages: AtomicU64,
}

impl Counters {
    /// A request of `pages` about to go to the device.
    pub(super) fn count_request(&self, pages: u64, kind: IoKind) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.pages_read.fetch_add(pages, Ordering::Relaxed);
        match kind {
            IoKind::Sync => self.sync_requests.fetch_add(1, Ordering::Relaxed),
            IoKind::Ahead => self.ahead_requests.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// One finished application read.
    pub(super) fn count_read(&self, bytes: u64, hits: u64, misses: u64, stall: Duration) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes_returned.fetch_add(bytes, Ordering::Relaxed);
        if hits > 0 {
            self.hit_pages.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            self.miss_pages.fetch_add(misses, Ordering::Relaxed);
        }
        if !stall.is_zero() {
            self.stall_ns
                .fetch_add(stall.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Direct reads finished together (see [`DirectTally`]): one addition per figure.
    pub(super) fn add_direct(&self, t: &DirectTally) {
        if t.reads == 0 {
            return;
        }
        self.requests.fetch_add(t.reads, Ordering::Relaxed);
        self.sync_requests.fetch_add(t.reads, Ordering::Relaxed);
        self.pages_read.fetch_add(t.pages, Ordering::Relaxed);
        self.reads.fetch_add(t.reads, Ordering::Relaxed);
        self.bytes_returned.fetch_add(t.bytes, Ordering::Relaxed);
        self.direct_bytes.fetch_add(t.bytes, Ordering::Relaxed);
        self.miss_pages.fetch_add(t.pages, Ordering::Relaxed);
        self.stall_ns.fetch_add(t.stall_ns, Ordering::Relaxed);
    }

    /// Bytes copied: each byte returned, but those read straight into the reader's buffer,
    /// and each a source copied in.
    pub(super) fn copied_bytes(&self) -> u64 {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        get(&self.bytes_returned).saturating_sub(get(&self.direct_bytes))
            + get(&self.copied_in_bytes)
    }

    /// The engine's and the file's counters, for the figures both keep.
    pub(super) fn both<'a>(engine: &'a Counters, file: &'a FileData) -> [&'a Counters; 2] {
        [engine, &file.counters]
    }
}

impl FileData {
    /// This file's figures.
    pub(super) fn stats(&self) -> FileStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (requests, pages_read) = (get(&c.requests), get(&c.pages_read));
        FileStats {
            path: self.source.path().display().to_string(),
            reads: get(&c.reads),
            bytes_returned: get(&c.bytes_returned),
            copied_bytes: c.copied_bytes(),
            hit_pages: get(&c.hit_pages),
            miss_pages: get(&c.miss_pages),
            pages_read,
            wasted_pages: self.table.wasted_pages(),
            thrashed_pages: get(&c.thrashed_pages),
            requests,
            sync_requests: get(&c.sync_requests),
            ahead_requests: get(&c.ahead_requests),
            expedited_requests: get(&c.expedited_requests),
            cancelled_requests: get(&c.cancelled_requests),
            avg_request_pages: crate::units::ratio(pages_read, requests),
            stall_ms: get(&c.stall_ns) as f64 / 1e6,
            io_errors: get(&c.io_errors),
            size_checks: get(&c.size_checks),
            read_latency: self
                .read_latency
                .is_on()
                .then(|| self.read_latency.summary()),
        }
    }
}

/// The requests sent most recently, at most `limit` of them (oldest dropped first).
pub(super) struct RequestLog {
    pub(super) records: std::collections::VecDeque<RequestRecord>,
    pub(super) limit: usize,
    pub(super) dropped: u64,
}

impl RequestLog {
    pub(super) fn new(limit: usize) -> RequestLog {
        RequestLog {
            records: std::collections::VecDeque::new(),
            limit,
            dropped: 0,
        }
    }

    pub(super) fn push(&mut self, r: RequestRecord) {
        if self.limit == 0 {
            self.dropped += 1;
            return;
        }
        if self.records.len() == self.limit {
            self.records.pop_front();
            self.dropped += 1;
        }
        self.records.push_back(r);
    }
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

/// What a store's link was measured at, for everything read from the store so far
/// ([`crate::engine::File::link_stats`]): how many GETs, how many at once, what one
/// connection gives.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct LinkStats {
    /// GETs sent.
    pub gets: u64,
    /// GETs in flight at once, on average over the time any was.
    pub mean_at_once: f64,
    /// The most in flight at once.
    pub most_at_once: usize,
    /// The link's wait for a GET's first byte: the least of the latest GETs', in ms.
    pub first_byte_ms: f64,
    /// What one GET's body streams at, in MB/s (0: no large GET measured yet).
    pub connection_mb_per_s: f64,
}
