//! What an engine reports of itself: [`Stats`] (from [`Engine::stats`]), the counters behind
//! them, and the log of requests ([`RequestRecord`]).

use super::*;

/// Statistics of an engine since it started. Fields will be added: built only by the engine.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
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
    /// Handles read in the last [`crate::engine::IDLE_AFTER_MS`]: those that share the
    /// readahead budget (idle handles take no share).
    pub active_handles: u64,
    /// The readahead budget of each active handle now, in bytes.
    pub readahead_share_bytes: u64,
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
        write!(
            f,
            "  size checks (fstat) {}, memory given back {} MiB",
            self.size_checks,
            self.given_back_bytes >> 20
        )
    }
}

#[derive(Default)]
pub(super) struct Counters {
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
