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
//! first byte at the measured rate (each connection streaming half its time), never below
//! `PART_BYTES`, and a read ahead smaller than two such parts goes whole; until a large GET
//! has been measured, no split.

use std::sync::Mutex;
use std::time::Duration;

use super::read::{MOST_PARTS, PART_BYTES};

/// A part streams for this many of its GET's waits for the first byte.
pub(super) const WAITS_PER_PART: f64 = 1.0;

/// GETs with fewer body bytes than this do not measure the rate: TCP's slow start, not the
/// connection's rate, sets how fast a small body comes.
const RATE_SAMPLE_BYTES: u64 = 1 << 20;

/// Weight of the newest sample in the running averages.
const NEWEST_WEIGHT: f64 = 0.125;

/// One store's connections, as measured.
#[derive(Debug, Default)]
pub(crate) struct LinkRate {
    measured: Mutex<Measured>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    /// Seconds from a GET sent to its answer's headers (0: none measured).
    first_byte_s: f64,
    /// Bytes a second one GET's body streams at (0: none measured).
    bytes_per_s: f64,
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
        m.first_byte_s = averaged(m.first_byte_s, first_byte.as_secs_f64());
        if bytes >= RATE_SAMPLE_BYTES && !streaming.is_zero() {
            m.bytes_per_s = averaged(m.bytes_per_s, bytes as f64 / streaming.as_secs_f64());
        }
    }

    /// The part size a read ahead is split at: what streams in [`WAITS_PER_PART`]
    /// waits for a first byte, at least `PART_BYTES`; `None` until measured.
    pub(super) fn part_bytes(&self) -> Option<u64> {
        let m = *self.measured.lock().unwrap_or_else(|e| e.into_inner());
        (m.bytes_per_s > 0.0 && m.first_byte_s > 0.0).then(|| {
            let part = m.bytes_per_s * m.first_byte_s * WAITS_PER_PART;
            (part as u64).max(PART_BYTES)
        })
    }

    /// How many parallel GETs a read ahead of `bytes` goes as: 1 until the link is measured or
    /// when the read is less than two parts.
    pub(super) fn ahead_parts(&self, bytes: u64) -> u64 {
        match self.part_bytes() {
            Some(part) => (bytes / part).clamp(1, MOST_PARTS),
            None => 1,
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

    /// (wait for the first byte ms, one GET's MB/s, bytes of a read ahead, parts expected)
    #[test]
    fn a_read_ahead_is_split_where_one_connection_is_capped() {
        for (first_byte_ms, mb_per_s, bytes, parts) in [
            // 25 MiB/s a connection, 20 ms each way and some queueing: parts of 2 MiB.
            (80, 26, 8 * MIB, 4),
            (80, 26, 7 * MIB, 3),
            // A faster connection: larger parts; a longer wait: larger still.
            (40, 60, 8 * MIB, 3),
            (200, 26, 8 * MIB, 1),
            // One connection streaming ~90 MB/s: a part would stream for less than its wait.
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

    #[test]
    fn nothing_is_split_before_a_large_get_is_measured() {
        let link = LinkRate::default();
        assert_eq!(link.ahead_parts(8 * MIB), 1);
        // A small GET's wait is measured, its rate is not (slow start).
        link.record(
            Duration::from_millis(40),
            64 << 10,
            Duration::from_millis(5),
        );
        assert_eq!(link.part_bytes(), None);
        link.record(
            Duration::from_millis(40),
            8 * MIB,
            Duration::from_millis(320),
        );
        assert!(link.part_bytes().is_some());
    }
}
