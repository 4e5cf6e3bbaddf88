//! A local file whose contents change under its readers, every version known, so that any
//! bytes a reader gets can be checked against the versions that were current while it read.
//!
//! Version `v` is `size(v)` bytes; page `p` of it is seeded random bytes of (seed, v, p), so a
//! page names the version it came from. A change writes a whole new version in place, page
//! by page (a same-size rewrite, a truncation, or growth), through its own descriptor (a
//! writer's open, as another program's, breaks the engine's read lease). A read that began
//! after version `lo` was written and ended before version `hi + 1` was begun must return, in
//! each page, the bytes of one version in `lo..=hi` (as `pread(2)` racing writes does): a
//! page of an older version is stale, any other byte wrong.
#![allow(dead_code)]

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ahead::pattern::SplitMix64;

const PAGE: usize = 4096;

pub struct Versioned {
    pub path: PathBuf,
    seed: u64,
    /// Size of each version so far.
    sizes: Mutex<Vec<u64>>,
    /// The newest version begun, and the newest one written whole.
    begun: AtomicU64,
    done: AtomicU64,
}

/// Page `page` of version `v`'s bytes (a whole page; a file's last page is its prefix).
fn page_of(seed: u64, v: u64, page: u64) -> [u8; PAGE] {
    let mut rng = SplitMix64(
        seed ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ page.wrapping_mul(0xD6E8_FEB8_6659_FD93),
    );
    let mut out = [0u8; PAGE];
    for chunk in out.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    out
}

impl Versioned {
    /// Version 0, `size` bytes, at `path`.
    pub fn create(path: PathBuf, seed: u64, size: u64) -> Versioned {
        let v = Versioned {
            path,
            seed,
            sizes: Mutex::new(vec![size]),
            begun: AtomicU64::new(0),
            done: AtomicU64::new(0),
        };
        let f = std::fs::File::create(&v.path).unwrap();
        v.write_version(&f, 0, size);
        v
    }

    fn write_version(&self, f: &std::fs::File, v: u64, size: u64) {
        let mut at = 0u64;
        while at < size {
            let page = page_of(self.seed, v, at / PAGE as u64);
            let n = (size - at).min(PAGE as u64) as usize;
            f.write_all_at(&page[..n], at).unwrap();
            at += n as u64;
        }
    }

    /// Write the next version, `size` bytes: shrink first if smaller (the pages kept are then
    /// rewritten), grow as the pages are written if larger.
    pub fn change(&self, size: u64) {
        let v = {
            let mut sizes = self.sizes.lock().unwrap();
            sizes.push(size);
            sizes.len() as u64 - 1
        };
        self.begun.store(v, Ordering::SeqCst);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .unwrap();
        if size < self.size_of(v - 1) {
            f.set_len(size).unwrap();
        }
        self.write_version(&f, v, size);
        drop(f);
        self.done.store(v, Ordering::SeqCst);
    }

    fn size_of(&self, v: u64) -> u64 {
        self.sizes.lock().unwrap()[v as usize]
    }

    /// The newest version written whole: take it before a read.
    pub fn before_read(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }

    /// The newest version begun: take it after a read.
    pub fn after_read(&self) -> u64 {
        self.begun.load(Ordering::SeqCst)
    }

    /// Whether `got`, read at `offset` for `len` bytes between versions `lo` and `hi`, is what
    /// a `pread(2)` racing the writes could return; `short_ok`: a fault may have cut it short.
    pub fn check(
        &self,
        offset: u64,
        len: usize,
        got: &[u8],
        lo: u64,
        hi: u64,
        short_ok: bool,
    ) -> Result<(), String> {
        let sizes: Vec<u64> = self.sizes.lock().unwrap()[lo as usize..=hi as usize].to_vec();
        let (least, most) = (*sizes.iter().min().unwrap(), *sizes.iter().max().unwrap());
        let end = offset + got.len() as u64;
        if got.len() > len || (!got.is_empty() && end > most) {
            return Err(format!("{} bytes at {offset}: past the end of every version in {lo}..={hi} (sizes {sizes:?})", got.len()));
        }
        if got.len() < len && end < least.min(offset + len as u64) && !short_ok {
            return Err(format!("short: {} of {len} bytes at {offset}, every version in {lo}..={hi} holds more (sizes {sizes:?})", got.len()));
        }
        let mut at = offset;
        while at < end {
            let page = at / PAGE as u64;
            let from = (at % PAGE as u64) as usize;
            let n = ((PAGE - from) as u64).min(end - at) as usize;
            let piece = &got[(at - offset) as usize..(at - offset) as usize + n];
            let found = (lo..=hi).rev().find(|&v| {
                at + n as u64 <= sizes[(v - lo) as usize]
                    && page_of(self.seed, v, page)[from..from + n] == *piece
            });
            if found.is_none() {
                let older =
                    (0..lo).find(|&v| page_of(self.seed, v, page)[from..from + n] == *piece);
                return Err(match older {
                    Some(v) => format!("stale: page {page} ({n} bytes at {at}) is of version {v}, older than {lo} (the newest written before the read began)"),
                    None => format!("wrong bytes: page {page} ({n} bytes at {at}) is of no version in {lo}..={hi}"),
                });
            }
            at += n as u64;
        }
        Ok(())
    }

    pub fn versions(&self) -> u64 {
        self.sizes.lock().unwrap().len() as u64
    }
}
