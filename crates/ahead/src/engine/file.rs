//! Opening a file for the engine: `O_DIRECT` where the filesystem takes it at page alignment,
//! buffered reads with `POSIX_FADV_RANDOM` where it does not (so the kernel does not read
//! ahead a second time); files with no size to read ahead in refused, saying why
//! ([`sizeless`]); the identity that tells two versions of a file apart; and the read lease
//! that lets a cached read trust the file unchanged. (The device's limits come from sysfs
//! through [`crate::os::device_limits`].)

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::os;

use crate::units::PAGE_SIZE;

/// An open file the cache holds pages of. Shared by every open of the same file.
pub(crate) struct FileData {
    /// The cache's name for this file.
    pub id: u32,
    /// Where its pages are in the cache.
    pub table: std::sync::Arc<super::cache::PageTable>,
    pub fd: OwnedFd,
    pub path: PathBuf,
    /// Size in bytes when opened: the page table covers this much.
    pub size: u64,
    /// Size and modification time (ns) at the last read's check: a change means the file was
    /// truncated, extended or written while open, and its cached pages are dropped.
    pub live_size: std::sync::atomic::AtomicU64,
    pub live_mtime_ns: std::sync::atomic::AtomicI64,
    /// The read lease that spares a read the `fstat` (see [`Lease`]).
    pub lease: Lease,
    /// Read with `O_DIRECT`.
    pub direct: bool,
    /// The device's `read_ahead_kb` and `max_sectors_kb`, if sysfs has them.
    pub read_ahead_kb: Option<u64>,
    pub max_sectors_kb: Option<u64>,
}

impl FileData {
    /// Size in pages (the last one partial if the size is not a multiple of the page).
    pub fn pages(&self) -> u64 {
        self.size.div_ceil(PAGE_SIZE)
    }
}

/// A file's read lease, as its reads see it. While the lease is held the file cannot have
/// been opened for writing or truncated, so a read needs no `fstat` to trust the cache: it
/// compares `held_at` with the process's count of lease breaks ([`os::lease_breaks`]), one
/// load. Without a lease (someone has the file open for writing, the filesystem does not
/// lease, the engine was built without leases) every read checks with `fstat`, and every
/// [`LEASE_RETRY`] reads the engine tries to take the lease again.
pub(crate) struct Lease {
    /// [`os::lease_breaks`] when the lease was last known held, or [`NO_LEASE`].
    pub held_at: AtomicU64,
    /// Whether to try at all: the engine allows it and the filesystem is a local one.
    pub allowed: bool,
    /// Reads checked with `fstat` since the file last held its lease.
    pub unleased_reads: AtomicU64,
    /// Whether the reason for having no lease has been reported in stats.
    pub reported: AtomicBool,
    /// Held while the lease is checked, taken or given up (rare: never on a read that finds
    /// the lease held).
    pub gate: Mutex<()>,
}

/// `Lease::held_at` of a file without a lease.
pub(crate) const NO_LEASE: u64 = u64::MAX;
/// Reads between attempts to take a lease again.
pub(crate) const LEASE_RETRY: u64 = 64;

/// Filesystems whose leases see every writer: local ones (ext2/3/4, XFS, btrfs, F2FS, tmpfs).
/// A network filesystem's local lease does not see another machine's writes.
const LEASING_FILESYSTEMS: [i64; 5] = [0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010, 0x0102_1994];

impl Lease {
    /// The lease state of a file just opened as `fd`, with leases `wanted` by the engine:
    /// none held yet (the first read takes it), and why none will be, if so.
    pub fn new(fd: &OwnedFd, wanted: bool) -> (Lease, Option<String>) {
        let why_not = if !wanted {
            Some("leases turned off by the caller (EngineBuilder::leases)".to_string())
        } else {
            match os::fd_fs_type(fd.as_fd()) {
                Ok(t) if LEASING_FILESYSTEMS.contains(&t) => None,
                Ok(t) => Some(format!(
                    "not a local filesystem ahead leases on (f_type {t:#x})"
                )),
                Err(e) => Some(format!("fstatfs: {e}")),
            }
        };
        let lease = Lease {
            held_at: AtomicU64::new(NO_LEASE),
            allowed: why_not.is_none(),
            unleased_reads: AtomicU64::new(0),
            reported: AtomicBool::new(false),
            gate: Mutex::new(()),
        };
        (lease, why_not)
    }

    /// Whether the file is known unchanged since its last check, without a system call.
    #[inline]
    pub fn unchanged(&self) -> bool {
        self.held_at.load(Ordering::Acquire) == os::lease_breaks()
    }
}

/// What identifies a file's contents across opens: device, inode, size, modification time.
/// Pages cached for one open are reused by a later open only if all four still match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

/// A file opened, before the engine names it.
pub(crate) struct Opened {
    pub fd: OwnedFd,
    pub identity: Identity,
    pub direct: bool,
    /// Why `O_DIRECT` is not used, if it is not.
    pub buffered_because: Option<String>,
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    let hint = match e.kind() {
        io::ErrorKind::NotFound => " (check the path)",
        io::ErrorKind::PermissionDenied => {
            " (reading through ahead needs the same rights as reading with cat)"
        }
        _ => "",
    };
    io::Error::new(e.kind(), format!("{}: {e}{hint}", path.display()))
}

/// The size in bytes and modification time in ns of an open file, as they are now.
pub(crate) fn size_and_mtime(fd: &OwnedFd) -> io::Result<(u64, i64)> {
    let st = os::fstat(fd.as_fd())?;
    Ok((
        st.st_size as u64,
        st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec,
    ))
}

/// Filesystems whose files make their content when read (procfs, sysfs, debugfs, tracefs,
/// cgroupfs, configfs, securityfs, efivarfs, bpffs): `stat` gives them size 0, or a size
/// unrelated to what a read returns.
const PSEUDO_FS: [i64; 10] = [
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x6462_6720, // debugfs
    0x7472_6163, // tracefs
    0x0027_e0eb, // cgroup
    0x6367_7270, // cgroup2
    0x6265_6570, // configfs
    0x7363_6673, // securityfs
    0xde5e_81e4, // efivarfs
    0xcafe_4a11, // bpf
];

/// Why a file of type `kind` (`st_mode & S_IFMT`) and `size` bytes, on a filesystem of type
/// `fs` (asked only for size 0), has no size to read ahead in; `None` if it has one.
fn sizeless_why(kind: libc::mode_t, size: i64, fs: Option<i64>) -> Option<&'static str> {
    if kind != libc::S_IFREG {
        return Some(
            "not a regular file: devices, FIFOs and sockets have no size to read ahead in",
        );
    }
    if size == 0 && fs.is_some_and(|t| PSEUDO_FS.contains(&t)) {
        return Some(
            "a file of procfs, sysfs or the like: its size (0) says nothing of what a read returns, so there is nothing to read ahead in",
        );
    }
    None
}

/// Why `path` has no size to read ahead in (a device, a FIFO, a socket, a procfs or sysfs
/// file), which [`super::Engine::open`] refuses with `ErrorKind::Unsupported`; `None` for a
/// file it reads (or a directory, which it refuses as `EISDIR`). From `stat` and `statfs`: the
/// file is not opened, so a FIFO's writer is neither waited for nor robbed of its data. A
/// caller like `cat` reads such a file plainly instead.
pub fn sizeless(path: &Path) -> io::Result<Option<String>> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).map_err(|e| with_path(path, e))?;
    let kind = meta.mode() & libc::S_IFMT;
    if kind == libc::S_IFDIR {
        return Ok(None);
    }
    let fs = if meta.size() == 0 {
        os::fs_type(path).ok()
    } else {
        None
    };
    Ok(sizeless_why(kind, meta.size() as i64, fs).map(String::from))
}

/// Open `path` for reading: a regular file, with `O_DIRECT` unless `allow_direct` is false or
/// the filesystem refuses it (or needs an alignment above the page).
pub(crate) fn open(path: &Path, allow_direct: bool) -> io::Result<Opened> {
    // First a plain open: it gives the right error for a missing file or a directory, and
    // does not block on a FIFO.
    let plain = os::open_read(path, libc::O_NONBLOCK).map_err(|e| with_path(path, e))?;
    let st = os::fstat(plain.as_fd()).map_err(|e| with_path(path, e))?;
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFDIR {
        return Err(with_path(path, io::Error::from_raw_os_error(libc::EISDIR)));
    }
    let fs = if st.st_size == 0 {
        os::fd_fs_type(plain.as_fd()).ok()
    } else {
        None
    };
    if let Some(why) = sizeless_why(kind, st.st_size, fs) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{}: {why} (read it plainly)", path.display()),
        ));
    }
    let identity = Identity {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size as u64,
        mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
    };
    let buffered = |fd: OwnedFd, why: String| -> io::Result<Opened> {
        // Advisory: the reads are right without it, only slower.
        let _ = os::fadvise(fd.as_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        Ok(Opened {
            fd,
            identity,
            direct: false,
            buffered_because: Some(why),
        })
    };
    // Back to blocking mode for the reads.
    os::set_blocking(plain.as_fd()).map_err(|e| with_path(path, e))?;
    if !allow_direct {
        return buffered(plain, "O_DIRECT turned off by the caller".into());
    }
    match os::dio_alignment(plain.as_fd()) {
        Some((0, _)) | Some((_, 0)) => {
            return buffered(
                plain,
                "the filesystem does not support O_DIRECT for this file (statx DIOALIGN)".into(),
            )
        }
        Some((mem, off)) if mem as u64 > PAGE_SIZE || off as u64 > PAGE_SIZE => {
            return buffered(
                plain,
                format!("O_DIRECT needs {mem}-byte buffers and {off}-byte offsets, above the page"),
            )
        }
        _ => {}
    }
    match os::open_read(path, libc::O_DIRECT) {
        Ok(fd) => Ok(Opened {
            fd,
            identity,
            direct: true,
            buffered_because: None,
        }),
        Err(e) => buffered(plain, format!("O_DIRECT refused ({e})")),
    }
}
