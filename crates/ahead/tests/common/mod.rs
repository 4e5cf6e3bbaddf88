//! Helpers the engine's fault, stress and open/close tests share (each uses some of them).
#![allow(dead_code)]

use std::os::unix::fs::FileExt;

/// `pread` into `dst`, to the end of the file: the reference every byte the engine returns is
/// checked against. Returns the bytes read. (Into a buffer the caller keeps, so a long run
/// does not churn the allocator: the stress test measures resident memory.)
pub fn pread_into(file: &std::fs::File, off: u64, dst: &mut [u8]) -> usize {
    let mut n = 0;
    while n < dst.len() {
        let k = file.read_at(&mut dst[n..], off + n as u64).unwrap();
        if k == 0 {
            break;
        }
        n += k;
    }
    n
}

/// `pread` of `len` bytes at `off` through a plain descriptor, to the end of the file.
pub fn pread(file: &std::fs::File, off: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let n = pread_into(file, off, &mut v);
    v.truncate(n);
    v
}

/// This process's resident memory in bytes (`/proc/self/statm`).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Seeded random bytes: a zeroed or shifted page never passes for the right one.
pub fn content(size: usize, seed: u64) -> Vec<u8> {
    let mut rng = ahead::pattern::SplitMix64(seed);
    let mut v = Vec::with_capacity(size + 8);
    while v.len() < size {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(size);
    v
}

/// A file of `size` seeded random bytes ([`content`]) named `name` in the folder `subdir`,
/// made once: an existing one of that size is kept. Written under another name and renamed,
/// so a test running beside never reads it half written.
#[allow(dead_code)] // not every test binary makes its files this way
pub fn seeded_file(subdir: &str, name: &str, size: usize) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(subdir);
    let path = dir.join(name);
    if std::fs::metadata(&path).map(|m| m.len()).ok() == Some(size as u64) {
        return path;
    }
    let tmp = write_test_file(subdir, &format!("{name}.tmp"), &content(size, size as u64));
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// Write `data` to `name` in the test binary's own folder `subdir` (made if missing).
pub fn write_test_file(subdir: &str, name: &str, data: &[u8]) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(subdir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    path
}
