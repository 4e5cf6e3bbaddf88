//! Which handles share the readahead budget: the *active* ones, those read in the last
//! [`IDLE_AFTER_MS`]. A database keeps thousands of files open and reads a few; were the
//! budget split over every handle, 10,000 idle SST files would leave the one being scanned a
//! few pages of window. A handle joins the shares on its first read (or prefetch, batch,
//! stream, will-need advice), and leaves them once idle: a sweep, run by whichever read first
//! finds the last sweep a quarter of that period old, drops the handles idle since. Files
//! opened through `open_many` join at open, as they are opened to be read at once. Time is the
//! coarse monotonic clock (a load of the vDSO's page, no system call); a handle already
//! active costs a read one load and, at most once per clock tick, one store.

use super::*;

/// A handle not read for this long leaves the budget's shares.
pub const IDLE_AFTER_MS: u64 = 1000;

/// One handle's part in the shares: its file's size, when it was last read, and whether it
/// is counted.
#[derive(Debug)]
pub(super) struct Activity {
    pub(super) pages: u64,
    last_read_ms: AtomicU64,
    active: std::sync::atomic::AtomicBool,
}

impl Activity {
    pub(super) fn new(pages: u64) -> Arc<Activity> {
        Arc::new(Activity {
            pages,
            last_read_ms: AtomicU64::new(0),
            active: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

/// The active handles and the shares of the budget they make.
#[derive(Default)]
pub(super) struct ActiveShares {
    shares: policy::BudgetShares,
    active: Vec<Arc<Activity>>,
}

/// Milliseconds of the coarse monotonic clock.
fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

impl EngineParts {
    /// A read (or a prefetch, a batch) of the handle `a`: mark it read now, count it in the
    /// shares if it was not, and now and then drop the handles idle since.
    #[inline]
    pub(super) fn touch(&self, a: &Arc<Activity>) {
        let now = now_ms();
        if a.last_read_ms.load(Ordering::Relaxed) != now {
            a.last_read_ms.store(now, Ordering::Relaxed);
        }
        if !a.active.load(Ordering::Acquire) {
            self.activate(a);
        }
        let due = self.next_sweep_ms.load(Ordering::Relaxed);
        if now >= due
            && self
                .next_sweep_ms
                .compare_exchange(
                    due,
                    now + IDLE_AFTER_MS / 4,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.sweep_idle(now);
        }
    }

    /// Count `a` in the shares (if it is not already).
    #[cold]
    pub(super) fn activate(&self, a: &Arc<Activity>) {
        a.last_read_ms.store(now_ms(), Ordering::Relaxed);
        self.change_shares(|s| {
            if !a.active.swap(true, Ordering::AcqRel) {
                s.shares.open(a.pages);
                s.active.push(a.clone());
            }
        });
    }

    /// The handle of `a` closed: out of the shares.
    pub(super) fn deactivate(&self, a: &Arc<Activity>) {
        if !a.active.load(Ordering::Acquire) {
            return;
        }
        self.change_shares(|s| {
            if a.active.swap(false, Ordering::AcqRel) {
                s.shares.close(a.pages);
                s.active.retain(|x| !Arc::ptr_eq(x, a));
            }
        });
    }

    /// Drop from the shares the handles not read since `now - IDLE_AFTER_MS`.
    #[cold]
    fn sweep_idle(&self, now: u64) {
        let cutoff = now.saturating_sub(IDLE_AFTER_MS);
        self.change_shares(|s| {
            let ActiveShares { shares, active } = s;
            active.retain(|a| {
                let keep = a.last_read_ms.load(Ordering::Relaxed) >= cutoff;
                if !keep {
                    a.active.store(false, Ordering::Release);
                    shares.close(a.pages);
                }
                keep
            });
        });
    }

    /// Change the active set with `change` and recompute each one's readahead budget.
    fn change_shares(&self, change: impl FnOnce(&mut ActiveShares)) {
        let mut s = self.shares.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut s);
        let budget = s.shares.budget(self.core.cache.slots() as u64);
        self.budget_pages.store(budget, Ordering::Relaxed);
    }

    /// Handles counted in the shares now.
    pub(super) fn active_handles(&self) -> u64 {
        self.shares
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .shares
            .handles()
    }
}
