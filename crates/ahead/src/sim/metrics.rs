//! What a run reports: the counters the driver keeps per file, and the figures made from them
//! (the faithful accounting and the paper's), per file and for the run.

/// The figures of one run, under one accounting.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Metrics {
    /// Pages the application asked for (each read's pages, clipped at EOF).
    pub pages_requested: u64,
    /// Pages read from the device.
    pub pages_read: u64,
    /// Pages read and never used by the end of the run.
    pub wasted_pages: u64,
    /// Device requests.
    pub read_requests: u64,
    /// `pages_read / read_requests`.
    pub avg_request_pages: f64,
    /// Requests the reader waited for.
    pub sync_requests: u64,
    /// Requests read ahead.
    pub async_requests: u64,
    /// Pages of reads that were already cached (or in flight) when the read began.
    pub hit_pages: u64,
    /// Pages read ahead, evicted before anyone used them, and then read again (refaults).
    pub thrashed_pages: u64,
    /// Time the reader spent waiting for data, in milliseconds.
    pub stall_ms: f64,
    /// Modelled time from the first read to the end of the last, in milliseconds.
    pub modeled_ms: f64,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    pub(super) pages_requested: u64,
    pub(super) pages_read: u64,
    pub(super) used_pages: u64,
    pub(super) read_requests: u64,
    pub(super) sync_requests: u64,
    pub(super) async_requests: u64,
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
        self.read_requests += o.read_requests;
        self.sync_requests += o.sync_requests;
        self.async_requests += o.async_requests;
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
            read_requests: self.read_requests,
            avg_request_pages: ratio(self.pages_read, self.read_requests),
            sync_requests: self.sync_requests,
            async_requests: self.async_requests,
            hit_pages: self.hit_pages,
            thrashed_pages: self.thrashed_pages,
            stall_ms: self.stall_ns as f64 / 1e6,
            modeled_ms: self.modeled_ms(),
        }
    }

    pub(super) fn paper(&self) -> Metrics {
        Metrics {
            pages_read: self.paper_pages_read,
            wasted_pages: self.paper_pages_read.saturating_sub(self.pages_requested),
            read_requests: self.paper_requests,
            avg_request_pages: ratio(self.paper_pages_read, self.paper_requests),
            sync_requests: self.paper_sync,
            async_requests: self.paper_async,
            ..self.faithful()
        }
    }
}

pub(super) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
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
