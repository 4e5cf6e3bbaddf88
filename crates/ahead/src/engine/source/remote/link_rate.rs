//! What one connection to a store gives: its wait for a GET's first byte and the rate a GET's
//! body then streams at, measured on every GET, shared by every object of the store. From
//! them, how many parallel parts a read ahead goes as (`split_ahead=auto`, the default).
//!
//! The engine's window keeps a number of bytes in flight; how many GETs carry them is the
//! source's business. A GET of `part` bytes keeps its connection waiting `first_byte` and
//! then streaming `part / rate`, so with `in_flight` bytes spread over GETs of `part` bytes
//! the link gives `in_flight / (part / rate + first_byte)`: smaller parts give more, until
//! each GET's own cost (a request the client and server must handle) is what is paid. Where
//! one connection is capped (an object store's tens of MB/s a connection), a GET of 8 MiB
//! streams for several waits for a first byte, and the bytes in flight fill the link only
//! when they go over more connections. Where it is not (one connection streams as fast as the
//! link or the CPUs allow), a part would stream for less than its wait and splitting only
//! adds requests. The rule between: parts that stream for [`WAITS_PER_PART`] waits for a
//! first byte at the measured rate, never below `PART_BYTES`, and a read ahead smaller than
//! two such parts goes whole. Until a large GET has been measured, a read ahead is split as a
//! read its reader waits for is ([`parts`]): a new engine's first window goes out at once,
//! and as whole 8 MiB GETs on a capped link it all came in one connection's time for 8 MiB
//! (docs/bench-log/issue-47-remote-cluster.md, session 41), where a few more requests on a
//! link that is not capped cost little.
//!
//! The wait is the link's own: its floor, not its average. Under load a GET waits also behind
//! the engine's other GETs (at the server, at a proxy), and an average that counts that wait
//! made parts larger the more GETs were in flight, so a busy link was split less: logged on a
//! capped link, the average rose from 80 to 250 ms as reads ahead went out, and 8 MiB reads
//! ahead fell from 4 parts to 1. The floor is the least wait of the last [`FLOOR_GETS`] GETs:
//! one GET in that many that finds the link idle keeps it, and a link slower for good is
//! followed once that many GETs have waited longer.
//!
//! A read ahead that finds the link quiet (fewer than [`QUIET_GETS`] GETs in flight) is split
//! as a read its reader waits for (`waiting_parts`): nothing else fills the link, and the
//! reader's next reads are what it holds (a Parquet reader's column chunks, asked for at once
//! from the footer, each read in turn as soon as it lands). Behind a window of GETs already in
//! flight, parts of a few waits keep the link as full with fewer requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::read::{parts, MOST_PARTS, PART_BYTES};
use crate::engine::LinkStats;

/// A part streams for this many of the link's waits for a first byte.
pub(super) const WAITS_PER_PART: f64 = 1.5;

/// The smallest part of a read its reader waits for, split by the link's measure: below it a
/// part's own request costs more than its share of the stream saves.
pub(super) const WAITING_PART_BYTES: u64 = 1 << 20;

/// GETs with fewer body bytes than this do not measure the rate: TCP's slow start, not the
/// connection's rate, sets how fast a small body comes.
const RATE_SAMPLE_BYTES: u64 = 1 << 20;

/// Weight of the newest sample in the rate's running average.
const NEWEST_WEIGHT: f64 = 0.125;

/// The link's wait is the least of this many GETs' latest.
const FLOOR_GETS: usize = 64;

/// Fewer GETs in flight than this, on all the store's objects, and the link is quiet: a read
/// ahead goes in the parts a waited-for read would.
const QUIET_GETS: usize = MOST_PARTS as usize;

/// One store's connections, as measured.
#[derive(Debug, Default)]
pub(crate) struct LinkRate {
    measured: Mutex<Measured>,
    /// GETs sent and not yet done.
    in_flight: AtomicUsize,
    /// How many were in flight at once, over time (for [`LinkRate::stats`]).
    at_once: Mutex<AtOnce>,
}

/// GETs in flight at once, integrated over the time any was: what a link that wants many
/// connections busy (an object store capped a connection) was given.
#[derive(Clone, Copy, Debug, Default)]
struct AtOnce {
    /// When the count last changed.
    since: Option<Instant>,
    /// GETs x seconds, and seconds, while at least one was in flight.
    get_seconds: f64,
    busy_seconds: f64,
    most: usize,
    sent: u64,
}

impl AtOnce {
    /// The count goes from `before` to `before + 1` (`up`) or `before - 1` at `now`.
    fn changed(&mut self, now: Instant, before: usize, up: bool) {
        if let Some(since) = self.since.filter(|_| before > 0) {
            let dt = now.saturating_duration_since(since).as_secs_f64();
            self.get_seconds += before as f64 * dt;
            self.busy_seconds += dt;
        }
        self.since = Some(now);
        if up {
            self.sent += 1;
            self.most = self.most.max(before + 1);
        }
    }
}

/// One GET in flight on a link, until dropped.
pub(super) struct InFlight(Arc<LinkRate>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut at_once = self.0.at_once();
        let before = self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        at_once.changed(Instant::now(), before, false);
    }
}

#[derive(Debug)]
struct Measured {
    /// Seconds from a GET sent to its answer's headers, of the latest [`FLOOR_GETS`] GETs
    /// (`next` of them recorded in all, the newest at `(next - 1) % FLOOR_GETS`).
    first_byte_s: [f32; FLOOR_GETS],
    next: usize,
    /// Bytes a second one GET's body streams at (0: none measured).
    bytes_per_s: f64,
}

impl Default for Measured {
    fn default() -> Measured {
        Measured {
            first_byte_s: [0.0; FLOOR_GETS],
            next: 0,
            bytes_per_s: 0.0,
        }
    }
}

impl Measured {
    /// The least wait of the latest GETs, in seconds (0: none measured).
    fn first_byte_floor_s(&self) -> f64 {
        let seen = &self.first_byte_s[..self.next.min(FLOOR_GETS)];
        seen.iter().copied().reduce(f32::min).map_or(0.0, f64::from)
    }
}

/// A running average's next value.
fn averaged(average: f64, sample: f64) -> f64 {
    if average == 0.0 {
        sample
    } else {
        average + NEWEST_WEIGHT * (sample - average)
    }
}

impl LinkRate {
    /// A GET answered its headers after `first_byte`, then streamed `bytes` in `streaming`.
    pub(super) fn record(&self, first_byte: Duration, bytes: u64, streaming: Duration) {
        let mut m = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        let at = m.next % FLOOR_GETS;
        m.first_byte_s[at] = first_byte.as_secs_f32();
        m.next += 1;
        if bytes >= RATE_SAMPLE_BYTES && !streaming.is_zero() {
            m.bytes_per_s = averaged(m.bytes_per_s, bytes as f64 / streaming.as_secs_f64());
        }
    }

    /// What one connection streams in one of the link's waits for a first byte, in bytes;
    /// `None` until a wait and a large GET's rate are measured.
    fn one_wait_bytes(&self) -> Option<f64> {
        let m = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        let wait_s = m.first_byte_floor_s();
        (m.bytes_per_s > 0.0 && wait_s > 0.0).then(|| m.bytes_per_s * wait_s)
    }

    /// The part size a read ahead is split at: what streams in [`WAITS_PER_PART`]
    /// of the link's waits for a first byte, at least `PART_BYTES`; `None` until measured.
    pub(super) fn part_bytes(&self) -> Option<u64> {
        self.one_wait_bytes()
            .map(|bytes| ((bytes * WAITS_PER_PART) as u64).max(PART_BYTES))
    }

    /// How many parallel GETs a read its reader waits for of `bytes` goes as, by the link's
    /// measure: parts that stream for one wait for a first byte (the reader waits for the
    /// slowest part: the wait and one part's streaming), at least [`WAITING_PART_BYTES`]; 1
    /// until measured. Where one connection streams a wait's worth of several MiB (no cap),
    /// a read of a few MiB stays whole.
    pub(super) fn waiting_parts(&self, bytes: u64) -> u64 {
        match self.one_wait_bytes() {
            Some(one_wait) => {
                (bytes / (one_wait as u64).max(WAITING_PART_BYTES)).clamp(1, MOST_PARTS)
            }
            None => 1,
        }
    }

    /// How many parallel GETs a read ahead of `bytes` goes as: 1 when the read is less than
    /// two parts; as a read its reader waits for ([`parts`]) until the link is measured.
    pub(super) fn ahead_parts(&self, bytes: u64) -> u64 {
        match self.part_bytes() {
            Some(part) => (bytes / part).clamp(1, MOST_PARTS),
            None => parts(bytes),
        }
    }

    /// How many parallel GETs a read ahead of `bytes` goes as now: as a waited-for read while
    /// the link is quiet, else [`Self::ahead_parts`].
    pub(super) fn ahead_parts_now(&self, bytes: u64) -> u64 {
        let ahead = self.ahead_parts(bytes);
        if self.in_flight.load(Ordering::Relaxed) < QUIET_GETS {
            ahead.max(self.waiting_parts(bytes))
        } else {
            ahead
        }
    }

    /// A GET sent on this link: in flight until the guard is dropped.
    pub(super) fn sending(self: &Arc<Self>) -> InFlight {
        // Counted under the lock, so the count over time sees each change in its order.
        let mut at_once = self.at_once();
        let before = self.in_flight.fetch_add(1, Ordering::Relaxed);
        at_once.changed(Instant::now(), before, true);
        drop(at_once);
        InFlight(self.clone())
    }

    fn at_once(&self) -> std::sync::MutexGuard<'_, AtOnce> {
        self.at_once.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the link was measured at so far.
    pub(crate) fn stats(&self) -> LinkStats {
        let (first_byte_s, bytes_per_s) = {
            let m = self.measured.lock().unwrap_or_else(|e| e.into_inner());
            (m.first_byte_floor_s(), m.bytes_per_s)
        };
        let a = self.at_once();
        // The time since the last change counts too, while GETs are in flight.
        let mut now = *a;
        now.changed(
            Instant::now(),
            self.in_flight.load(Ordering::Relaxed),
            false,
        );
        LinkStats {
            gets: a.sent,
            mean_at_once: if now.busy_seconds > 0.0 {
                now.get_seconds / now.busy_seconds
            } else {
                0.0
            },
            most_at_once: a.most,
            first_byte_ms: first_byte_s * 1e3,
            connection_mb_per_s: bytes_per_s / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn link(first_byte_ms: u64, mb_per_s: u64) -> LinkRate {
        let link = LinkRate::default();
        let bytes = 8 * MIB;
        link.record(
            Duration::from_millis(first_byte_ms),
            bytes,
            Duration::from_secs_f64(bytes as f64 / (mb_per_s as f64 * 1e6)),
        );
        link
    }

    /// (the link's wait for a first byte ms, one GET's MB/s, bytes of a read ahead, parts
    /// expected)
    #[test]
    fn a_read_ahead_is_split_where_one_connection_is_capped() {
        for (first_byte_ms, mb_per_s, bytes, parts) in [
            // 25 MiB/s a connection, 20 ms each way: parts of 2 MiB.
            (45, 26, 8 * MIB, 4),
            (45, 26, 7 * MIB, 3),
            // A faster connection: larger parts; a longer wait: larger still.
            (40, 60, 8 * MIB, 2),
            (200, 26, 8 * MIB, 1),
            // One connection streaming ~100 MB/s at 20 ms each way: a part would stream for
            // about its wait, and splitting only adds GETs.
            (40, 96, 8 * MIB, 1),
            (90, 90, 8 * MIB, 1),
            // Never below PART_BYTES, never past MOST_PARTS.
            (1, 26, 8 * MIB, 4),
            (40, 26, 1 << 30, MOST_PARTS),
            // A read ahead smaller than two parts is one GET.
            (40, 26, MIB, 1),
        ] {
            assert_eq!(
                link(first_byte_ms, mb_per_s).ahead_parts(bytes),
                parts,
                "{first_byte_ms} ms, {mb_per_s} MB/s, {bytes} bytes"
            );
        }
    }

    /// A read its reader waits for, split by the link: (the link's wait ms, one GET's MB/s,
    /// bytes read, parts expected).
    #[test]
    fn a_waited_for_read_is_split_where_one_connection_is_capped() {
        for (first_byte_ms, mb_per_s, bytes, parts) in [
            // 25 MiB/s a connection, 20 ms each way: a 3.3 MB Parquet column chunk in 2-3.
            (45, 26, 3_300_000, 2),
            (40, 26, 3_300_000, 3),
            // No cap: it stays whole.
            (40, 96, 3_300_000, 1),
            // Never below a MiB a part; never past MOST_PARTS.
            (10, 26, 3_300_000, 3),
            (45, 26, 64 * MIB, MOST_PARTS),
            (45, 26, 512 << 10, 1),
        ] {
            assert_eq!(
                link(first_byte_ms, mb_per_s).waiting_parts(bytes),
                parts,
                "{first_byte_ms} ms, {mb_per_s} MB/s, {bytes} bytes"
            );
        }
        assert_eq!(LinkRate::default().waiting_parts(64 * MIB), 1);
    }

    /// GETs waiting behind the engine's own (45 ms the link's wait, 250 ms a busy moment's)
    /// leave the split as it was; a link slower for good is followed.
    #[test]
    fn the_wait_is_the_links_floor_not_its_queue() {
        let link = link(45, 26);
        let busy = |link: &LinkRate, n| {
            for _ in 0..n {
                link.record(
                    Duration::from_millis(250),
                    8 * MIB,
                    Duration::from_millis(330),
                );
            }
        };
        busy(&link, FLOOR_GETS - 1);
        assert_eq!(link.ahead_parts(8 * MIB), 4);
        busy(&link, 1);
        assert_eq!(link.ahead_parts(8 * MIB), 1);
    }

    /// A 3.6 MB read ahead (a Parquet column chunk asked for from the footer) on a capped
    /// link: in a waited read's parts while the link is quiet, in a read ahead's behind a
    /// window of GETs in flight.
    #[test]
    fn a_read_ahead_on_a_quiet_link_is_split_as_a_waited_read() {
        let link = Arc::new(link(40, 26));
        let chunk = 3_600_000;
        assert_eq!(link.ahead_parts(chunk), 1);
        assert_eq!(link.ahead_parts_now(chunk), 3);
        let busy: Vec<InFlight> = (0..QUIET_GETS).map(|_| link.sending()).collect();
        assert_eq!(link.ahead_parts_now(chunk), 1);
        drop(busy);
        assert_eq!(link.ahead_parts_now(chunk), 3);
        assert_eq!(link.in_flight.load(Ordering::Relaxed), 0);
    }

    /// Two GETs at once for a second, then one for a second: 1.5 at once on average over the
    /// two seconds any was in flight; an idle second between does not count.
    #[test]
    fn gets_at_once_are_averaged_over_the_time_any_was_in_flight() {
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        let mut a = AtOnce::default();
        a.changed(s(0), 0, true);
        a.changed(s(0), 1, true);
        a.changed(s(1), 2, false);
        a.changed(s(2), 1, false);
        // Idle from 2 to 3 s.
        a.changed(s(3), 0, true);
        a.changed(s(3), 1, false);
        assert_eq!((a.sent, a.most), (3, 2));
        assert_eq!((a.get_seconds, a.busy_seconds), (3.0, 2.0));
    }

    #[test]
    fn the_links_stats_count_the_gets_sent_and_at_once() {
        let link = Arc::new(link(40, 26));
        let busy: Vec<InFlight> = (0..3).map(|_| link.sending()).collect();
        drop(busy);
        let st = link.stats();
        assert_eq!((st.gets, st.most_at_once), (3, 3));
        assert!(st.mean_at_once > 0.0 && st.mean_at_once <= 3.0, "{st:?}");
        assert_eq!(st.first_byte_ms.round(), 40.0);
        assert!((st.connection_mb_per_s - 26.0).abs() < 1.0, "{st:?}");
    }

    /// Before a large GET is measured, an 8 MiB read ahead goes as a waited read's 2 MiB
    /// parts; once a link that is not capped is measured (one connection streams a wait's
    /// worth of 8 MiB and more), whole.
    #[test]
    fn a_read_ahead_is_split_as_a_waited_read_until_a_large_get_is_measured() {
        let link = LinkRate::default();
        assert_eq!(link.ahead_parts(8 * MIB), 4);
        assert_eq!(link.ahead_parts(4 * MIB), 1);
        // A small GET's wait is measured, its rate is not (slow start).
        link.record(
            Duration::from_millis(40),
            64 << 10,
            Duration::from_millis(5),
        );
        assert_eq!(link.part_bytes(), None);
        assert_eq!(link.ahead_parts(8 * MIB), 4);
        link.record(
            Duration::from_millis(40),
            8 * MIB,
            Duration::from_millis(20),
        );
        assert!(link.part_bytes().is_some());
        assert_eq!(link.ahead_parts(8 * MIB), 1);
    }
}
