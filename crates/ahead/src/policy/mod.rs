//! Readahead policies: pure state machines that decide, while a driver acts.
//!
//! A [`Policy`] is one per open file, like the kernel's `struct file_ra_state`. The driver (the
//! simulator or the engine) calls [`Policy::on_read`] once for every application read. The
//! policy looks at the cache through [`RaContext`] (is a page present, does it carry a readahead
//! marker) and asks the driver to start I/O with [`RaContext::start_io`]: page ranges marked
//! synchronous (the reader waits for them) or ahead (asynchronous), each with an optional marker
//! page whose later touch is the cue for the next ahead window. The policy never does I/O, reads
//! a clock or allocates per call.
//!
//! Each policy keeps its own caller semantics inside `on_read`: the 2.6.0 and 2.6.7 models walk
//! the read page by page as `do_generic_mapping_read` did, Pratt's is called per request chunk,
//! on-demand reacts only to a miss or a marker. After `on_read` returns, the driver reads any
//! page of the request that is still absent, one request per contiguous run: a policy that only
//! reads ahead need not read the request itself.
//!
//! One file per policy, each opening with a comment that tells its algorithm and its source.

/// The registry: every policy, in the order tables list them. A policy is one file (its
/// state machine and its `REGISTERED` entry: name, one line on what it does, how to make one)
/// plus its module's name here; the command line's help, its lookups, the engine's checks and
/// the tests' loops over every policy all come from [`POLICIES`].
macro_rules! registry {
    ($($vis:vis $module:ident),* $(,)?) => {
        $($vis mod $module;)*
        /// Every policy the project knows, in order (see [`Registered`]).
        pub const POLICIES: &[Registered] = &[$($module::REGISTERED),*];
    };
}

mod driving;
pub use driving::{
    begin_read, begin_unseen, bytes_within, clip_read, readahead_budget, readahead_share_pages,
    run_cap_pages, walk_read, BudgetShares, Congestion, Reached, ReadDriver, ReadWalk,
};

registry!(
    none,
    fixed,
    linux_2_6_0,
    linux_2_6_7,
    pratt,
    linux_ondemand,
    adaptive,
    pub oracle,
);

pub use adaptive::Adaptive;
pub use fixed::Fixed;
pub use linux_2_6_0::Linux260;
pub use linux_2_6_7::Linux267;
pub use linux_ondemand::LinuxOndemand;
pub use none::NoReadahead;
pub use oracle::Oracle;
pub use pratt::Pratt;

use crate::units::{Bytes, PageRange};

/// One application read, as the policy sees it: a byte range, already clipped to the file's end
/// by the driver and never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppRead {
    /// Byte offset of the read.
    pub offset: Bytes,
    /// Byte length of the read (at least 1).
    pub len: Bytes,
}

impl AppRead {
    /// A read of whole pages: `pages` pages from page `first_page`.
    pub fn pages(first_page: u64, pages: u64) -> AppRead {
        AppRead {
            offset: Bytes::of_page(first_page),
            len: Bytes::of_pages(pages),
        }
    }

    /// First page the read touches.
    pub fn first_page(&self) -> u64 {
        self.offset.page()
    }

    /// One past the last page the read touches.
    pub fn end_page(&self) -> u64 {
        Bytes::page_span(self.offset, self.len).end
    }

    /// Number of pages the read touches.
    pub fn page_count(&self) -> u64 {
        self.end_page() - self.first_page()
    }

    /// Exclusive end of the read in bytes.
    pub fn end_byte(&self) -> Bytes {
        Bytes(self.offset.0 + self.len.0)
    }
}

/// Whether the reader waits for an I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoKind {
    /// The reader is blocked on it (a cache miss, the kernel's synchronous readahead).
    Sync,
    /// Read ahead of the reader, asynchronously.
    Ahead,
}

/// An I/O the policy asks the driver to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    /// First page of the range.
    pub start_page: u64,
    /// Length of the range in pages.
    pub pages: u64,
    /// Synchronous or ahead.
    pub kind: IoKind,
    /// Page that gets the readahead marker, if it is one of the pages this I/O newly brings in.
    /// With large folios the marker goes on the folio that holds this page.
    pub marker_page: Option<u64>,
    /// Largest folio order the page cache may use for the pages this I/O brings in (0: single
    /// pages). Folios are naturally aligned, smaller at a misaligned start and at the range's end,
    /// and the cache falls back to single pages from the first folio that would overlap a cached
    /// page, as the kernel's `page_cache_ra_order` does.
    pub folio_order: u8,
}

impl IoRequest {
    /// A range the reader waits for, with no marker.
    pub fn sync(start_page: u64, pages: u64) -> IoRequest {
        IoRequest {
            start_page,
            pages,
            kind: IoKind::Sync,
            marker_page: None,
            folio_order: 0,
        }
    }

    /// A range read ahead of the reader, with no marker.
    pub fn ahead(start_page: u64, pages: u64) -> IoRequest {
        IoRequest {
            start_page,
            pages,
            kind: IoKind::Ahead,
            marker_page: None,
            folio_order: 0,
        }
    }

    /// A range of the given kind, with no marker.
    pub fn of_kind(kind: IoKind, start_page: u64, pages: u64) -> IoRequest {
        match kind {
            IoKind::Sync => IoRequest::sync(start_page, pages),
            IoKind::Ahead => IoRequest::ahead(start_page, pages),
        }
    }

    /// The same range with a marker on `page`.
    pub fn with_marker(mut self, page: u64) -> IoRequest {
        self.marker_page = Some(page);
        self
    }

    /// The same range, cached in folios of up to `order` (2^order pages).
    pub fn with_folio_order(mut self, order: u8) -> IoRequest {
        self.folio_order = order;
        self
    }
}

/// One readahead decision, in the quantities the kernel's `page_cache_ra_order` and
/// `page_cache_ra_unbounded` tracepoints carry: a window of `size` pages from `start`, the last
/// `async_size` of them read ahead (the first of those carries the marker; 0: no marker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Window {
    /// First page of the window.
    pub start: u64,
    /// Pages in the window.
    pub size: u64,
    /// Pages at the window's tail that are ahead of the reader.
    pub async_size: u64,
}

/// What a policy sees of the driver: the cache, and the one way to act on it.
pub trait RaContext {
    /// Size of the file in pages: nothing at or past this page exists.
    fn file_pages(&self) -> u64;
    /// Whether `page` is in the cache (ready or in flight).
    fn is_cached(&self, page: u64) -> bool;
    /// Whether `page` is cached and carries a readahead marker.
    fn has_marker(&self, page: u64) -> bool;
    /// Remove the marker from `page`, if it has one.
    fn clear_marker(&mut self, page: u64);
    /// Start I/O. The driver clips the range at the end of the file, skips pages already cached,
    /// issues one device request per contiguous run of absent pages, and places the marker only
    /// if the marker page is one it newly brought in (as `page_cache_ra_unbounded` does).
    /// Returns the number of pages newly brought in.
    fn start_io(&mut self, io: IoRequest) -> u64;
    /// The pages of the folio holding the cached `page`. A policy that never asks for large
    /// folios sees `page` alone.
    fn folio_of(&self, page: u64) -> PageRange {
        PageRange::of_len(page, 1)
    }
    /// `page_cache_next_miss`: the first absent page in `[index, index + max_scan)`, else
    /// `index + max_scan` (0 if the search wraps past the last index). Pages past the end of the
    /// file are absent. The simulator answers as Linux's XArray walk does, which differs when
    /// the search starts inside a large folio (see `sim::xarray`).
    fn next_miss(&self, index: u64, max_scan: u64) -> u64 {
        let end = index.saturating_add(max_scan);
        (index..end).find(|&p| !self.is_cached(p)).unwrap_or(end)
    }
    /// `page_cache_prev_miss`: scanning down from `index` over at most `max_scan` pages, the
    /// first absent page; if all are cached, the last page scanned; `u64::MAX` if the scan ran
    /// past page 0.
    fn prev_miss(&self, index: u64, max_scan: u64) -> u64 {
        let mut p = index;
        for scanned in 0..max_scan {
            if !self.is_cached(p) {
                return p;
            }
            if scanned + 1 == max_scan {
                break;
            }
            if p == 0 {
                return u64::MAX;
            }
            p -= 1;
        }
        p
    }
    /// Record a readahead decision where the kernel would fire its tracepoint (for comparing a
    /// model with a live kernel, `ahead replay --windows`). Drivers may ignore it.
    fn note_window(&mut self, _window: Window) {}
    /// The most pages this file's readahead should hold read but not yet used at once: the
    /// driver's memory budget shared among the files it has open, so that the windows of all
    /// streams together fit in the cache. Unlimited unless the driver says otherwise.
    fn readahead_budget(&self) -> u64 {
        u64::MAX
    }
    /// What bringing a page into memory the cache has not used before costs now, in ns,
    /// beyond the device's time for it: the kernel zeroes a page on its first touch (and on a
    /// virtual machine may first have to get it back from the host). 0 while the cache
    /// reuses memory, and in the simulator, whose cache models no memory.
    fn first_touch_ns(&self) -> u64 {
        0
    }
}

/// What the driver has measured of the device, passed to policies as plain numbers (a policy
/// never reads a clock): how long a request waits for its first byte, the bandwidth the device
/// streams at with requests of the largest size, and what one more request costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceEstimate {
    /// Time from submitting a request to its first byte, its transfer not counted, in ns.
    pub latency_ns: u64,
    /// Sustained read bandwidth, in bytes per second.
    pub bytes_per_sec: u64,
    /// What one more request costs the device beyond its transfer (1 / its IOPS ceiling), in ns.
    pub request_overhead_ns: u64,
}

impl DeviceEstimate {
    /// Pages that must be in flight beyond the request being transferred to keep the device
    /// busy: latency x bandwidth, rounded up.
    pub fn inflight_pages(&self) -> u64 {
        let bytes = self.latency_ns as u128 * self.bytes_per_sec as u128 / 1_000_000_000;
        (bytes as u64).div_ceil(crate::units::PAGE_SIZE).max(1)
    }
}

/// An application's hint about its access pattern (`posix_fadvise`, `readahead(2)`), in the
/// policy's unit, pages (the engine's `Advice` is the application's, in bytes; `File::advise`
/// converts the range to the pages it touches). Kinds will be added: a policy's `match` needs a
/// wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hint {
    /// Back to default behaviour (`POSIX_FADV_NORMAL`).
    Normal,
    /// The file will be read sequentially (`POSIX_FADV_SEQUENTIAL`).
    Sequential,
    /// The file will be read randomly (`POSIX_FADV_RANDOM`).
    Random,
    /// This range will be needed soon (`POSIX_FADV_WILLNEED`, `readahead(2)`).
    WillNeed {
        /// First page of the range.
        start_page: u64,
        /// Length in pages.
        pages: u64,
    },
    /// This range will not be needed (`POSIX_FADV_DONTNEED`); the driver drops its pages.
    DontNeed {
        /// First page of the range.
        start_page: u64,
        /// Length in pages.
        pages: u64,
    },
    /// Never read ahead at or past this page (a lock extent, a range the caller owns).
    Limit {
        /// First page readahead must not touch.
        end_page: u64,
    },
}

/// A readahead algorithm's per-open-file state.
pub trait Policy: Send {
    /// The policy's name, as given on the command line.
    fn name(&self) -> &'static str;

    /// The application reads `read`. Start whatever I/O the algorithm wants through `ctx`.
    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext);

    /// Feedback: `pages` pages read ahead by this file were evicted before anyone used them.
    fn on_thrashed(&mut self, _pages: u64) {}

    /// Feedback: the device queue became congested (`true`) or drained (`false`).
    fn on_congestion(&mut self, _congested: bool) {}

    /// A hint from the application.
    fn on_hint(&mut self, _hint: Hint, _ctx: &mut dyn RaContext) {}

    /// The driver's latest measurement of the device. Policies that size their window for the
    /// device use it; the others ignore it.
    fn on_device(&mut self, _estimate: DeviceEstimate) {}
}

/// Settings shared by every policy. Fields will be added: outside this crate, start from
/// [`PolicyConfig::new`] or `default()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyConfig {
    /// Maximum readahead window in pages (the kernel's `ra_pages`; default 32 = 128 KiB). For
    /// `adaptive`, the most one stream keeps ahead of its reader beyond the batch in flight; the
    /// engine sets it from the device.
    pub ra_max_pages: u64,
    /// Largest single I/O the device takes, in pages (the kernel's `io_pages`, from
    /// `max_sectors_kb`). Only on-demand's oversize reads use it.
    pub io_max_pages: u64,
    /// Window of the `fixed` baseline in pages.
    pub fixed_pages: u64,
    /// Largest folio order the page cache uses for readahead (the kernel's
    /// `mapping_max_folio_order`): 9 (2 MiB) for ext4, xfs and btrfs on x86-64 since Linux
    /// 6.16; 0 models a filesystem or kernel without large folios.
    pub folio_max_order: u8,
}

impl PolicyConfig {
    /// Windows of at most `ra_max_pages`, requests of at most `io_max_pages`; the rest as
    /// [`Default`] has it.
    pub const fn new(ra_max_pages: u64, io_max_pages: u64) -> PolicyConfig {
        PolicyConfig {
            ra_max_pages,
            io_max_pages,
            ..PolicyConfig::DEFAULT
        }
    }

    /// The same, with the `fixed` baseline's window `pages`.
    pub const fn with_fixed_pages(mut self, pages: u64) -> PolicyConfig {
        self.fixed_pages = pages;
        self
    }

    /// The same, with the page cache's largest folio order `order` (0: no large folios).
    pub const fn with_folio_max_order(mut self, order: u8) -> PolicyConfig {
        self.folio_max_order = order;
        self
    }
}

impl PolicyConfig {
    /// The kernel's defaults: 128 KiB windows and requests, large folios.
    const DEFAULT: PolicyConfig = PolicyConfig {
        ra_max_pages: 32,
        io_max_pages: 32,
        fixed_pages: 32,
        folio_max_order: 9,
    };
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::DEFAULT
    }
}

/// How a registered policy makes a fresh per-file instance from the settings.
pub type MakePolicy = fn(PolicyConfig) -> Box<dyn Policy>;

/// One policy in the registry: its command-line name, a line on what it does, and how to make a
/// fresh per-file instance from the settings (`None` for the oracle, which needs the whole
/// trace: only the simulator's `run_workload` builds it).
#[derive(Clone, Copy)]
pub struct Registered {
    /// The command-line name.
    pub name: &'static str,
    /// What it does, in one line (help texts).
    pub about: &'static str,
    /// A fresh instance for one open file.
    pub make: Option<MakePolicy>,
}

/// The registered names, in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().map(|p| p.name)
}

/// The policy that sees the whole trace; only the simulator can build it.
pub const ORACLE: &str = "oracle";

/// How to make the policy called `name`: its registered constructor, or why there is none (an
/// unknown name, or the oracle, which only the simulator's whole-trace run builds).
///
/// # Errors
/// An unknown name (the message lists the known ones), or `oracle`.
pub fn maker(name: &str) -> Result<MakePolicy, String> {
    match POLICIES.iter().find(|p| p.name == name) {
        Some(Registered {
            make: Some(make), ..
        }) => Ok(*make),
        Some(_) => Err(format!(
            "the {name} policy needs the whole trace in advance: only the simulator's \
             run_workload (ahead sim, ahead replay) can run it"
        )),
        None => Err(format!(
            "unknown policy '{name}'; known policies: {}",
            names().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Make a fresh per-file instance of the policy called `name`.
///
/// # Errors
/// As [`maker`].
pub fn by_name(name: &str, config: PolicyConfig) -> Result<Box<dyn Policy>, String> {
    maker(name).map(|make| make(config))
}

/// Check a policy name without building one.
///
/// # Errors
/// An unknown name, listing the known ones.
pub fn validate_name(name: &str) -> Result<(), String> {
    if POLICIES.iter().any(|p| p.name == name) {
        return Ok(());
    }
    by_name(name, PolicyConfig::default()).map(|_| ())
}
