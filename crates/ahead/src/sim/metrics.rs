//! What a run reports: the counters the driver keeps per file, and the figures made from them
//! (the faithful accounting and the paper's), per file and for the run. The names and meanings
//! are the engine's too ([`crate::engine::Stats`]); JSON keeps the names of before,
//! `read_requests` and `async_requests`, beside them.

use crate::units::ratio;

/// The figures of one run, under one accounting.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
#[serde(into = "MetricsJson")]
pub struct Metrics {
    /// Pages the application asked for (each read's pages, clipped at EOF).
    pub pages_requested: u64,
    /// Pages read from the device.
    pub pages_read: u64,
    /// Pages read and never used by the end of the run.
    pub wasted_pages: u64,
    /// Device requests.
    pub requests: u64,
    /// `pages_read / requests`.
    pub avg_request_pages: f64,
    /// Requests the reader waited for.
    pub sync_requests: u64,
    /// Requests read ahead.
    pub ahead_requests: u64,
    /// Pages of reads that were ready when the reader reached them (no wait).
    pub hit_pages: u64,
    /// Pages of reads the reader waited for: in flight, or read for it.
    pub miss_pages: u64,
    /// Pages read ahead, evicted before anyone used them, and then read again (refaults).
    pub thrashed_pages: u64,
    /// Time the reader spent waiting for data, in milliseconds.
    pub stall_ms: f64,
    /// Modelled time from the first read to the end of the last, in milliseconds.
    pub modeled_ms: f64,
}

/// [`Metrics`] as JSON: its fields, and the names `requests` and `ahead_requests` had before
/// the engine and the simulator shared theirs.
#[derive(serde::Serialize)]
struct MetricsJson {
    pages_requested: u64,
    pages_read: u64,
    wasted_pages: u64,
    requests: u64,
    read_requests: u64,
    avg_request_pages: f64,
    sync_requests: u64,
    ahead_requests: u64,
    async_requests: u64,
    hit_pages: u64,
    miss_pages: u64,
    thrashed_pages: u64,
    stall_ms: f64,
    modeled_ms: f64,
}

impl From<Metrics> for MetricsJson {
    fn from(m: Metrics) -> MetricsJson {
        MetricsJson {
            pages_requested: m.pages_requested,
            pages_read: m.pages_read,
            wasted_pages: m.wasted_pages,
            requests: m.requests,
            read_requests: m.requests,
            avg_request_pages: m.avg_request_pages,
            sync_requests: m.sync_requests,
            ahead_requests: m.ahead_requests,
            async_requests: m.ahead_requests,
            hit_pages: m.hit_pages,
            miss_pages: m.miss_pages,
            thrashed_pages: m.thrashed_pages,
            stall_ms: m.stall_ms,
            modeled_ms: m.modeled_ms,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    pub(super) pages_requested: u64,
    pub(super) pages_read: u64,
    pub(super) used_pages: u64,
    pub(super) requests: u64,
    pub(super) sync_requests: u64,
    pub(super) ahead_requests: u64,
    pub(super) hit_pages: u64,
    pub(super) thrashed_pages: u64,
    pub(super) stall_ns: u64,
    pub(super) paper_pages_read: u64,
    pub(super) paper_requests: u64,
    pub(super) paper_sync: u64,
    pub(super) paper_async: u64,
    pub(super) first_ns: Option<u64>,
    pub(super) last_ns: u64,
}

impl Counters {
    pub(super) fn add(&mut self, o: &Counters) {
        self.pages_requested += o.pages_requested;
        self.pages_read += o.pages_read;
        self.used_pages += o.used_pages;
        self.requests += o.requests;
        self.sync_requests += o.sync_requests;
        self.ahead_requests += o.ahead_requests;
        self.hit_pages += o.hit_pages;
        self.thrashed_pages += o.thrashed_pages;
        self.stall_ns += o.stall_ns;
        self.paper_pages_read += o.paper_pages_read;
        self.paper_requests += o.paper_requests;
        self.paper_sync += o.paper_sync;
        self.paper_async += o.paper_async;
        self.first_ns = match (self.first_ns, o.first_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_ns = self.last_ns.max(o.last_ns);
    }

    pub(super) fn modeled_ms(&self) -> f64 {
        (self.last_ns - self.first_ns.unwrap_or(self.last_ns)) as f64 / 1e6
    }

    pub(super) fn faithful(&self) -> Metrics {
        Metrics {
            pages_requested: self.pages_requested,
            pages_read: self.pages_read,
            wasted_pages: self.pages_read - self.used_pages,
            requests: self.requests,
            avg_request_pages: ratio(self.pages_read, self.requests),
            sync_requests: self.sync_requests,
            ahead_requests: self.ahead_requests,
            hit_pages: self.hit_pages,
            miss_pages: self.pages_requested - self.hit_pages,
            thrashed_pages: self.thrashed_pages,
            stall_ms: self.stall_ns as f64 / 1e6,
            modeled_ms: self.modeled_ms(),
        }
    }

    pub(super) fn paper(&self) -> Metrics {
        Metrics {
            pages_read: self.paper_pages_read,
            wasted_pages: self.paper_pages_read.saturating_sub(self.pages_requested),
            requests: self.paper_requests,
            avg_request_pages: ratio(self.paper_pages_read, self.paper_requests),
            sync_requests: self.paper_sync,
            ahead_requests: self.paper_async,
            ..self.faithful()
        }
    }
}

/// One file's figures in a run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FileReport {
    /// The file's name.
    pub file: String,
    /// Its figures (faithful accounting).
    #[serde(flatten)]
    pub metrics: Metrics,
}

/// The result of one run of one policy.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunReport {
    /// The policy's name.
    pub policy: String,
    /// Figures with a faithful page cache.
    pub faithful: Metrics,
    /// Figures counted the way the 2004 paper counted.
    pub paper: Metrics,
    /// Per-file figures (faithful).
    pub files: Vec<FileReport>,
}

/// `a`'s modelled time over `oracle`'s (1.0 when both are zero).
pub fn time_ratio(a: &Metrics, oracle: &Metrics) -> f64 {
    if oracle.modeled_ms > 0.0 {
        a.modeled_ms / oracle.modeled_ms
    } else if a.modeled_ms > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}
