//! What both drivers do with an application's read, in order, and the rules they share: one
//! description, each rule defined once here, that the simulator's loop (`sim/mod.rs`, `read`)
//! and the engine's (`engine/reader.rs`, `begin_read_as` and `copy_rest`) both follow, so a
//! rule changed here is changed in both (`tests/drivers.rs` holds them to the same requests).
//!
//! 1. **Clip** the read at the file's last byte ([`bytes_within`]); nothing left, nothing shown.
//! 2. **Copy out what is there** before the policy sees the read: those pages are used and
//!    referenced first (under the engine's CLOCK, and the simulator's when it models it), and
//!    the policy is told they are cached.
//! 3. **Tell the policy** of a change in congestion (the engine: reads in flight; the
//!    simulator: its modelled device's queue), then **show it the read**; the I/O it starts is
//!    submitted, a synchronous run capped at [`run_cap_pages`] of the cache.
//! 4. **Walk the read's pages**: a page ready is a hit; one in flight is waited for; one
//!    absent is read by the reader itself, with the absent pages after it, again at most
//!    [`run_cap_pages`] (so its first page survives its own request). A page read again after
//!    readahead lost it unused is a refault, told to the policy (`on_thrashed`).
//! 5. **Share the readahead budget**: half the cache ([`readahead_share_pages`]) among the
//!    open files, max-min fairly by size ([`BudgetShares`]), as `RaContext::readahead_budget`.

/// The readahead budget both drivers give each of `open` files in a cache of `cache_pages`:
/// half the cache for pages read ahead and not yet used, shared by the open files (at least
/// a page).
pub fn readahead_budget(cache_pages: u64, open: u64) -> u64 {
    (readahead_share_pages(cache_pages) / open.max(1)).max(1)
}

/// The sizes of the files open through a driver, for sharing the readahead budget among them
/// as both drivers do: half the cache for pages read ahead and not yet used, shared max-min
/// fairly by size. A file never holds more read ahead than it has pages, so a small file's
/// equal share would sit idle; the level is the one at which every file's
/// `min(its pages, level)` together fill that half, and each file's budget is the level.
/// (Equal shares let a script's 4 KiB source file halve the budget of the 48 MiB file it
/// reads.) When all open files fit in the half together, each may have all of it.
#[derive(Clone, Debug, Default)]
pub struct BudgetShares {
    /// Pages of each open handle's file, ascending.
    open_pages: Vec<u64>,
}

/// The bytes of a read of `len` at `offset` that lie within a file of `file_bytes`, in both
/// drivers: what the policy is shown (0: nothing, the read is at or past the end).
pub fn bytes_within(offset: u64, len: u64, file_bytes: u64) -> u64 {
    file_bytes.saturating_sub(offset).min(len)
}

/// The most pages one run may take in a cache of `cache_pages`, in both drivers: a file's
/// window, a request, what a reader waits for at once. A quarter, so a run's first pages are
/// never dropped to make room for its last, and four streams can each hold a whole window.
pub fn run_cap_pages(cache_pages: u64) -> u64 {
    (cache_pages / 4).max(1)
}

/// The share of a cache of `cache_pages` that every file's readahead divides (the rest holds
/// what readers have read and may read again): half.
pub fn readahead_share_pages(cache_pages: u64) -> u64 {
    (cache_pages / 2).max(1)
}

impl BudgetShares {
    /// A handle of a file of `pages` pages was opened.
    pub fn open(&mut self, pages: u64) {
        let at = self.open_pages.partition_point(|&p| p < pages);
        self.open_pages.insert(at, pages);
    }

    /// A handle of a file of `pages` pages (as given to [`open`](Self::open)) was closed.
    pub fn close(&mut self, pages: u64) {
        if let Ok(at) = self.open_pages.binary_search(&pages) {
            self.open_pages.remove(at);
        }
    }

    /// Handles open.
    pub fn handles(&self) -> u64 {
        self.open_pages.len() as u64
    }

    /// Each open file's readahead budget in a cache of `cache_pages` (at least a page).
    pub fn budget(&self, cache_pages: u64) -> u64 {
        let share = readahead_share_pages(cache_pages);
        let mut left = share;
        let mut files = self.open_pages.len() as u64;
        for &pages in &self.open_pages {
            if pages.saturating_mul(files) > left {
                return (left / files).max(1);
            }
            left -= pages;
            files -= 1;
        }
        share
    }
}
