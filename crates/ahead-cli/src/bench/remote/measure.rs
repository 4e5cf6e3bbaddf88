//! What a run measures with, kept small so the bench's own bookkeeping stays out of the memory
//! it measures: latencies, the pages reads touched, the process's peak memory.

use std::time::{Duration, Instant};

use ahead::engine::File;

/// One read's latency in ns, saturating at about 4.3 s: a quarter of a `Duration`'s memory,
/// so that a run of a million 4 KiB reads keeps 4 MiB of latencies, not 16, in the RSS it
/// measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Nanos(pub(super) u32);

impl Nanos {
    pub(super) fn since(t: Instant) -> Nanos {
        t.elapsed().into()
    }
}

impl From<Duration> for Nanos {
    fn from(d: Duration) -> Nanos {
        Nanos(u32::try_from(d.as_nanos()).unwrap_or(u32::MAX))
    }
}

/// The pages of an object that reads touched, one bit each (32 KiB for a 1 GiB object), so
/// that the bench's own bookkeeping stays out of the memory it measures: a hash set of the
/// same 262,144 pages takes 4.5 MiB, more while it grows.
pub(super) struct PageSet {
    words: Vec<u64>,
}

impl PageSet {
    pub(super) fn new(bytes: u64) -> PageSet {
        PageSet {
            words: vec![0; bytes.div_ceil(4096).div_ceil(64) as usize],
        }
    }

    pub(super) fn insert(&mut self, pages: std::ops::Range<u64>) {
        for page in pages {
            if let Some(word) = self.words.get_mut((page / 64) as usize) {
                *word |= 1 << (page % 64);
            }
        }
    }

    pub(super) fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

pub(crate) fn read_full(file: &File, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let k = file.read_at(&mut buf[n..], off + n as u64)?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

/// CPU seconds a GiB: `cpu_s` spent bringing `bytes`.
pub(super) fn cpu_per_gib(cpu_s: f64, bytes: u64) -> Option<f64> {
    (bytes > 0).then(|| cpu_s / (bytes as f64 / (1u64 << 30) as f64))
}

/// Start this process's peak resident memory (`VmHWM`) over from what is resident now, after
/// giving back what earlier runs freed.
pub(super) fn reset_peak_rss() {
    // glibc keeps large freed blocks (the device run's 16 MiB buffers) resident in its arenas
    // once they have raised its dynamic mmap threshold; a fixed threshold maps and unmaps
    // them instead, so a run's peak is its own.
    static FIXED_THRESHOLD: std::sync::Once = std::sync::Once::new();
    FIXED_THRESHOLD.call_once(|| {
        // SAFETY: mallopt only changes the allocator's tuning.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
    });
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe { libc::malloc_trim(0) };
    // "5" resets the peak (Linux 4.0 and later); where it cannot, the peak is the process's.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This process's peak resident memory (`VmHWM`), in bytes.
pub(super) fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
