//! What both drivers do with an application's read, in order: one loop ([`clip_read`],
//! [`begin_read`], then [`walk_read`]) that the simulator (`sim/read.rs`) and the engine
//! (`engine/read_loop.rs`) both run through their [`ReadDriver`], and every rule they share
//! defined once here, so a rule changed here is changed in both (`tests/drivers.rs` holds them to the same requests). The
//! loop decides the order and the rules; a driver decides what a page costs (modelled time, or
//! bytes copied and real waits) and keeps what only it has (the engine's retries of a failed
//! or lost page, its async reader's parking; the simulator's clock and counters).
//!
//! 1. **Clip** the read at the file's last byte ([`bytes_within`]); nothing left, nothing shown.
//! 2. **Copy out what is there** before the policy sees the read: those pages are used and
//!    referenced first (under the engine's CLOCK, and the simulator's when it models it), and
//!    the policy is told they are cached.
//! 3. **Tell the policy** of a change in congestion ([`Congestion`]: the engine counts reads
//!    in flight, the simulator its modelled device's busy slots), then **show it the read**;
//!    the I/O it starts is submitted, a synchronous run capped at [`run_cap_pages`] of the
//!    cache.
//! 4. **Walk the read's pages**: a page ready is a hit; one in flight is waited for; one
//!    absent is read by the reader itself, with the absent pages after it, again at most
//!    [`run_cap_pages`] (so its first page survives its own request). A page read again after
//!    readahead lost it unused is a refault, told to the policy (`on_thrashed`).
//! 5. **Share the readahead budget**: half the cache ([`readahead_share_pages`]) among the
//!    open files, max-min fairly by size ([`BudgetShares`]), as `RaContext::readahead_budget`.

use std::task::Poll;

use crate::units::{Bytes, PageRange};

use super::AppRead;

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

/// Whether a driver's queue is congested, by the one rule both drivers apply: congested once
/// the requests in flight reach `at`, drained once they fall below `below`. The figures are the
/// driver's. The simulator's are exact: its modelled device's queue slots, congested with all
/// of them busy and drained with one free (a request sent then starts at once). The engine's
/// count reads in flight engine-wide, which land and go out in batches: congested at a depth
/// no device here needs, drained at half of it, so a policy is not told of every batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Congestion {
    congested: bool,
}

impl Congestion {
    /// With `in_flight` requests: the change to tell the policy, if any.
    #[inline]
    pub fn update(&mut self, in_flight: u64, at: u64, below: u64) -> Option<bool> {
        let now = if self.congested {
            in_flight >= below
        } else {
            in_flight >= at
        };
        (now != self.congested).then(|| {
            self.congested = now;
            now
        })
    }
}

/// A page as the walking reader finds it ([`ReadDriver::reach`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reached {
    /// Taken: copied out (the engine) or used (the simulator), waiting first if it was in
    /// flight.
    Taken {
        /// The file ends within it (it shrank since the read began).
        last: bool,
    },
    /// Neither cached nor in flight: the reader reads it, and the absent pages after it.
    Absent,
    /// Not yet, and the reader does not block (an async task parks): resume at this page.
    Pending,
    /// The read ends here, short (the driver keeps the error).
    Stopped,
}

/// A driver's side of one application read, for the one loop both drivers run
/// ([`clip_read`], [`begin_read`], then [`walk_read`]): where pages come from, how the policy is shown the
/// read, and how the reader's own requests go out. The loop decides the order and the rules;
/// the driver, what a page costs (modelled time, or copied bytes and real waits).
pub trait ReadDriver {
    /// Step 2: take the pages of `pages` that are ready now, from its first, without waiting
    /// or starting I/O; how many were taken, and whether the file ended within them.
    fn take_ready(&mut self, pages: PageRange) -> (u64, bool);
    /// Step 3: tell the policy of any change in congestion ([`Congestion`]), show it `read`
    /// (the pages of `known_cached` it is told are cached), and send the I/O it starts.
    fn show_policy(&mut self, read: AppRead, known_cached: PageRange);
    /// Step 4: the reader reaches `page`.
    fn reach(&mut self, page: u64) -> Reached;
    /// Step 4, a page absent: the reader's own request for the pages of `run` that are absent
    /// from its first on (`run` is capped by [`walk_read`]). `Pending`: no room now, resume
    /// at the same page.
    fn read_run(&mut self, run: PageRange) -> Poll<()>;
    /// Pages in the cache, for the cap on a run.
    fn cache_pages(&self) -> u64;
}

/// Where an application read stands in the one loop: its pages, and the next to reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadWalk {
    /// The read as the policy sees it: clipped at the file's end.
    pub read: AppRead,
    /// Its pages.
    pub pages: PageRange,
    /// The next page the reader reaches (`pages.end`: done).
    pub next: u64,
}

impl ReadWalk {
    /// A read not yet begun: its first page next.
    #[inline]
    pub fn new(read: AppRead) -> ReadWalk {
        let pages = PageRange::new(read.first_page(), read.end_page());
        ReadWalk {
            read,
            pages,
            next: pages.first,
        }
    }
}

/// Step 1: the part of a read of `len` bytes at `offset` that lies in a file of `file_bytes`
/// ([`bytes_within`]); `None`: nothing, and nothing is shown to the policy.
#[inline]
pub fn clip_read(offset: u64, len: u64, file_bytes: u64) -> Option<AppRead> {
    let within = bytes_within(offset, len, file_bytes);
    (within > 0).then_some(AppRead {
        offset: Bytes(offset),
        len: Bytes(within),
    })
}

/// Steps 2 and 3 of a read clipped by [`clip_read`]: take what is ready, then show the read
/// to the policy, telling it which of its pages were taken.
#[inline]
pub fn begin_read<D: ReadDriver + ?Sized>(driver: &mut D, read: AppRead) -> ReadWalk {
    let (mut walk, file_ended) = take_ready(driver, read);
    driver.show_policy(read, PageRange::new(walk.pages.first, walk.next));
    if file_ended {
        walk.next = walk.pages.end;
    }
    walk
}

/// Step 2 alone, for a read no policy is shown (the engine's batches, whose I/O was planned
/// from all their ranges at once): take what is ready.
#[inline]
pub fn begin_unseen<D: ReadDriver + ?Sized>(driver: &mut D, read: AppRead) -> ReadWalk {
    let (mut walk, file_ended) = take_ready(driver, read);
    if file_ended {
        walk.next = walk.pages.end;
    }
    walk
}

/// Step 2: the walk past the pages taken ready, and whether the file ended within them.
#[inline]
fn take_ready<D: ReadDriver + ?Sized>(driver: &mut D, read: AppRead) -> (ReadWalk, bool) {
    let mut walk = ReadWalk::new(read);
    let (taken, file_ended) = driver.take_ready(walk.pages);
    walk.next += taken;
    (walk, file_ended)
}

/// Step 4 of a read begun with [`begin_read`]: walk its pages from `walk.next`, each taken as
/// it becomes ready, an absent one read by the reader with the pages after it (at most
/// [`run_cap_pages`] of the cache, and never past the read). `Pending`: the driver parked,
/// and `walk` keeps the place.
#[inline]
pub fn walk_read<D: ReadDriver + ?Sized>(driver: &mut D, walk: &mut ReadWalk) -> Poll<()> {
    while walk.next < walk.pages.end {
        match driver.reach(walk.next) {
            Reached::Taken { last } => {
                walk.next += 1;
                if last {
                    walk.next = walk.pages.end;
                }
            }
            Reached::Absent => {
                let cap = run_cap_pages(driver.cache_pages());
                let run = PageRange::new(walk.next, walk.pages.end.min(walk.next + cap));
                if driver.read_run(run).is_pending() {
                    return Poll::Pending;
                }
            }
            Reached::Pending => return Poll::Pending,
            Reached::Stopped => break,
        }
    }
    Poll::Ready(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver of pages in a cache of `cache_pages`: `ready` taken before the policy,
    /// `absent` read by the reader, `parks` times a page is not ready yet; every call logged.
    struct Logged {
        cache_pages: u64,
        ready: Vec<u64>,
        absent: Vec<u64>,
        parks: u32,
        log: Vec<String>,
    }

    impl ReadDriver for Logged {
        fn take_ready(&mut self, pages: PageRange) -> (u64, bool) {
            let n = (pages.first..pages.end)
                .take_while(|p| self.ready.contains(p))
                .count() as u64;
            self.log
                .push(format!("take {}..{} -> {n}", pages.first, pages.end));
            (n, false)
        }
        fn show_policy(&mut self, read: AppRead, known: PageRange) {
            self.log.push(format!(
                "policy {}+{} known {}..{}",
                read.offset.0, read.len.0, known.first, known.end
            ));
        }
        fn reach(&mut self, page: u64) -> Reached {
            if self.parks > 0 {
                self.parks -= 1;
                self.log.push(format!("park {page}"));
                return Reached::Pending;
            }
            if self.absent.contains(&page) {
                self.log.push(format!("absent {page}"));
                return Reached::Absent;
            }
            self.log.push(format!("take {page}"));
            Reached::Taken { last: false }
        }
        fn read_run(&mut self, run: PageRange) -> Poll<()> {
            self.log.push(format!("run {}..{}", run.first, run.end));
            self.absent.retain(|p| !(run.first..run.end).contains(p));
            Poll::Ready(())
        }
        fn cache_pages(&self) -> u64 {
            self.cache_pages
        }
    }

    #[test]
    fn a_read_is_clipped_then_taken_then_shown_then_walked_with_runs_capped() {
        assert_eq!(clip_read(8192, 4096, 8192), None);
        let read = clip_read(100, 5 * 4096, 4 * 4096).expect("within the file");
        assert_eq!(read.len.0, 4 * 4096 - 100);
        // Page 0 ready; 1, 2 and 3 absent; a cache of 8 pages caps a run at 2.
        let mut d = Logged {
            cache_pages: 8,
            ready: vec![0],
            absent: vec![1, 2, 3],
            parks: 0,
            log: Vec::new(),
        };
        let mut walk = begin_read(&mut d, read);
        assert_eq!(walk.next, 1);
        assert!(walk_read(&mut d, &mut walk).is_ready());
        assert_eq!(
            d.log,
            [
                "take 0..4 -> 1",
                "policy 100+16284 known 0..1",
                "absent 1",
                "run 1..3",
                "take 1",
                "take 2",
                "absent 3",
                "run 3..4",
                "take 3",
            ]
        );
    }

    #[test]
    fn a_parked_walk_resumes_at_the_page_it_parked_on() {
        let read = clip_read(0, 3 * 4096, 1 << 20).unwrap();
        let mut d = Logged {
            cache_pages: 64,
            ready: vec![],
            absent: vec![],
            parks: 1,
            log: Vec::new(),
        };
        let mut walk = begin_unseen(&mut d, read);
        assert!(walk_read(&mut d, &mut walk).is_pending());
        assert_eq!(walk.next, 0);
        assert!(walk_read(&mut d, &mut walk).is_ready());
        assert_eq!(
            d.log,
            ["take 0..3 -> 0", "park 0", "take 0", "take 1", "take 2"]
        );
    }

    #[test]
    fn congestion_is_told_once_at_its_depth_and_once_below_its_drain() {
        let mut c = Congestion::default();
        let told: Vec<_> = [10, 128, 130, 100, 64, 63, 127, 128]
            .iter()
            .map(|&n| c.update(n, 128, 64))
            .collect();
        assert_eq!(
            told,
            [
                None,
                Some(true),
                None,
                None,
                None,
                Some(false),
                None,
                Some(true)
            ]
        );
        // The simulator's queue: congested with every slot busy, drained with one free.
        let mut c = Congestion::default();
        assert_eq!(c.update(32, 32, 32), Some(true));
        assert_eq!(c.update(31, 32, 32), Some(false));
    }
}
