//! The readers every bench reads by name, in one table: `ahead bench` on a local file, `ahead
//! bench --remote` on an object, and the Python package's bench (`ahead.reader_reads`) read
//! "seq-4k" or "random-4k" as the same sequence of reads over a file of the size they have,
//! and `ahead sim --pattern` models it (each is a [`Pattern`] of that size).
//!
//! A bench adds what it runs around a reader (threads, contenders, a ceiling, a time cap that
//! ends a long reader early); a reader that is not one sequence of reads (a Parquet projection
//! through pyarrow, many objects at once, threads at random) is that bench's own experiment,
//! named there.

use crate::pattern::Pattern;
use crate::units::{Bytes, PAGE_SIZE};

/// One named reader: one sequence of reads over a file of any size.
pub struct Reader {
    /// Its name in every bench (`--patterns NAME`).
    pub name: &'static str,
    /// What it reads, in a few words.
    pub about: &'static str,
    /// Its reads over a file of the given bytes.
    pub pattern: fn(u64) -> Pattern,
}

/// Sequential reads of `bs` bytes from the start.
const fn seq(size: u64, bs: u64) -> Pattern {
    Pattern::Sequential {
        size: Bytes(size),
        bs: Bytes(bs),
    }
}

/// Every named reader, in the order the benches run them.
pub const READERS: &[Reader] = &[
    Reader {
        name: "seq-4k",
        about: "4 KiB reads in order",
        pattern: |size| seq(size, 4 << 10),
    },
    Reader {
        name: "seq-16k",
        about: "16 KiB reads in order",
        pattern: |size| seq(size, 16 << 10),
    },
    Reader {
        name: "seq-64k",
        about: "64 KiB reads in order (Python's default buffer)",
        pattern: |size| seq(size, 64 << 10),
    },
    Reader {
        name: "seq-128k",
        about: "128 KiB reads in order",
        pattern: |size| seq(size, 128 << 10),
    },
    Reader {
        name: "seq-1m",
        about: "1 MiB reads in order",
        pattern: |size| seq(size, 1 << 20),
    },
    Reader {
        name: "reverse-64k",
        about: "64 KiB reads from the end back",
        pattern: |size| Pattern::Reverse {
            size: Bytes(size),
            bs: Bytes(64 << 10),
        },
    },
    Reader {
        name: "stride-16k",
        about: "16 KiB records, 16 KiB gaps",
        pattern: |size| Pattern::Stride {
            size: Bytes(size),
            bs: Bytes(16 << 10),
            stride: Bytes(32 << 10),
        },
    },
    Reader {
        name: "stride-64k",
        about: "64 KiB of every 256 KiB",
        pattern: |size| Pattern::Stride {
            size: Bytes(size),
            bs: Bytes(64 << 10),
            stride: Bytes(256 << 10),
        },
    },
    Reader {
        name: "skip-forward",
        about: "1 MiB reads: 48 MiB read, 16 MiB skipped, again",
        pattern: |size| Pattern::Skips {
            size: Bytes(size),
            bs: Bytes(1 << 20),
            run: Bytes(48 << 20),
            skip: Bytes(16 << 20),
        },
    },
    Reader {
        name: "random-4k",
        about: "4 KiB reads at random, one at a time, as many as the file has pages",
        pattern: |size| Pattern::Random {
            size: Bytes(size),
            bs: Bytes(PAGE_SIZE),
            count: size / PAGE_SIZE,
            seed: 1,
        },
    },
    Reader {
        name: "random-mix",
        about: "iozone's mix: half the 16 KiB reads continue, half jump to a random record",
        pattern: |size| Pattern::RandomMix {
            size: Bytes(size),
            bs: Bytes(16 << 10),
            count: size / (16 << 10),
            seed: 1,
        },
    },
    Reader {
        name: "pread-16k",
        about: "16 KiB preads in order (the seed's name for seq-16k's reads)",
        pattern: |size| seq(size, 16 << 10),
    },
];

/// The reader called `name`.
pub fn find(name: &str) -> Option<&'static Reader> {
    READERS.iter().find(|r| r.name == name)
}

/// The reads of the reader called `name` over a file of `size` bytes: (offset, length) in
/// bytes, in order, lazily (a reader of a large file costs no memory).
///
/// # Errors
/// An unknown name; the message lists the known ones.
pub fn reads(name: &str, size: u64) -> Result<impl Iterator<Item = (u64, u64)>, String> {
    let reader = find(name).ok_or_else(|| {
        format!(
            "unknown reader '{name}'; known: {}",
            READERS
                .iter()
                .map(|r| r.name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    Ok((reader.pattern)(size)
        .workload()
        .events
        .filter_map(|e| match e {
            crate::workload::Event::Read { offset, len, .. } => Some((offset.0, len.0)),
            _ => None,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_reads_within_its_file_and_names_are_unique() {
        let mut names: Vec<&str> = READERS.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), READERS.len());
        // Within the file where its size is a multiple of every read; at an odd size a read
        // may ask past the end (and gets what is there, as read(2) gives it), never start there.
        for size in [1 << 20, (64 << 20) + 4097] {
            for r in READERS {
                let v: Vec<(u64, u64)> = reads(r.name, size).unwrap().take(20_000).collect();
                assert!(!v.is_empty(), "{}", r.name);
                assert!(v.iter().all(|&(o, l)| l > 0 && o < size), "{}", r.name);
                if size == 1 << 20 {
                    assert!(v.iter().all(|&(o, l)| o + l <= size), "{}", r.name);
                }
            }
        }
        assert!(reads("seq-3k", 1 << 20).err().unwrap().contains("seq-4k"));
    }
}
