//! Helpers the engine's fault and stress tests share.

use std::os::unix::fs::FileExt;

/// `pread` of `len` bytes at `off` through a plain descriptor, to the end of the file: the
/// reference every byte the engine returns is checked against.
pub fn pread(file: &std::fs::File, off: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let mut n = 0;
    while n < len {
        let k = file.read_at(&mut v[n..], off + n as u64).unwrap();
        if k == 0 {
            break;
        }
        n += k;
    }
    v.truncate(n);
    v
}
