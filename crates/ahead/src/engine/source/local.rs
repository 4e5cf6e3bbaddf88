//! `local`: a file of a local filesystem. Opened with `O_DIRECT` where the filesystem takes it
//! at page alignment, buffered with `POSIX_FADV_RANDOM` where it does not (so the kernel does
//! not read ahead a second time); files with no size to read ahead in are refused, saying why
//! ([`sizeless`]). Its identity is device, inode, size and modification time; a read lease
//! lets a read trust the file unchanged with one load, and without one every read checks with
//! `fstat`. The device's limits come from sysfs ([`crate::os::device_limits`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::engine::backend::{preadv_full, ReadOp};
use crate::engine::{Fallback, FallbackKind};
use crate::os;
use crate::units::PAGE_SIZE;

use super::{Event, Identity, Limits, ObjectKey, OpenSettings, Opened, Source};

pub(crate) const REGISTERED: super::Registered = super::Registered {
    name: "local",
    about: "a file of a local filesystem",
    // Every name but a URL (`scheme://...`): an unknown scheme is refused by name, not looked
    // for as a relative path.
    claims: |name| !name.to_str().is_some_and(super::url::has_scheme),
    open,
    // A local file's version is checked at every open anyway: nothing to save.
    open_entry: |entry, settings| open(Path::new(&entry.name), settings),
    stat,
    list,
};

/// A local path as an [`super::Entry`]: its metadata (following a symbolic link, as `open`
/// does).
fn stat(name: &Path, _: &OpenSettings) -> io::Result<super::Entry> {
    let meta = std::fs::metadata(name).map_err(|e| named(name, e))?;
    Ok(entry(name.to_string_lossy().into_owned(), &meta))
}

fn entry(name: String, meta: &std::fs::Metadata) -> super::Entry {
    use std::os::unix::fs::MetadataExt;
    super::Entry {
        name,
        size: if meta.is_dir() { 0 } else { meta.len() },
        is_dir: meta.is_dir(),
        e_tag: None,
        modified_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
    }
}

/// A local directory's entries, sorted by name (a file lists as itself). An entry that
/// vanishes while it is listed is left out, as `ls` leaves it.
fn list(name: &Path, settings: &OpenSettings) -> io::Result<Vec<super::Entry>> {
    let top = stat(name, settings)?;
    if !top.is_dir {
        return Ok(vec![top]);
    }
    let mut out = Vec::new();
    for dirent in std::fs::read_dir(name).map_err(|e| named(name, e))? {
        let path = dirent.map_err(|e| named(name, e))?.path();
        match std::fs::metadata(&path) {
            Ok(meta) => out.push(entry(path.to_string_lossy().into_owned(), &meta)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(named(&path, e)),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// `e`, its message naming `name`.
fn named(name: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", name.display()))
}

/// A local file, open for reading. See the module comment.
pub(crate) struct LocalFile {
    fd: OwnedFd,
    path: PathBuf,
    /// The file as the last check saw it ([`Seen`]). Held through a whole check (`fstat`,
    /// compare, drop, store), so checks see the file in the order it changed, and a read that
    /// finds the file as last seen finds the pages of every change before that already gone.
    seen: Mutex<Seen>,
    /// `seen`'s size, for a read under the lease (one load, no lock).
    live_size: AtomicU64,
    /// The read lease that spares a read the `fstat` (see [`Lease`]).
    lease: Lease,
    /// Read with `O_DIRECT`.
    direct: bool,
    /// From sysfs when first asked: an open of a file already open is dropped unasked.
    limits: OnceLock<Limits>,
}

/// Size, modification and change times (ns) of a file: a change of any means it was truncated,
/// extended or written while open, and its cached pages go. The change time too, because a
/// writer can set the modification time back (`touch -r`, `rsync --inplace`) and nobody can
/// set the change time.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Seen {
    fn of(st: &libc::stat) -> Seen {
        Seen {
            size: st.st_size as u64,
            mtime_ns: mtime_ns(st),
            ctime_ns: ctime_ns(st),
        }
    }
}

/// A file's read lease, as its reads see it. While the lease is held the file cannot have
/// been opened for writing or truncated, so a read needs no `fstat` to trust the cache: it
/// compares `held_at` with the process's count of lease breaks ([`os::lease_breaks`]), one
/// load. Without a lease (someone has the file open for writing, the filesystem does not
/// lease, the engine was built without leases) every read checks with `fstat`, and every
/// [`LEASE_RETRY`] reads the engine tries to take the lease again.
///
/// `fstat` alone cannot see the end of a write: a write sets the file's times before it copies
/// its bytes, so a page read from the disk in between is old while the times already say new,
/// and no later `fstat` tells it apart. Only the lease shows every writer gone. So a file a
/// writer may have had open (its lease broke, taking it failed with `EAGAIN`, or `fstat` saw
/// it change) is *suspect*: every read tries to take the lease again, and the read that takes
/// it drops the file's pages first.
struct Lease {
    /// [`os::lease_breaks`] when the lease was last known held, or [`NO_LEASE`].
    pub held_at: AtomicU64,
    /// Whether to try at all: the engine allows it and the filesystem is a local one.
    pub allowed: bool,
    /// Reads checked with `fstat` since the file last held its lease.
    pub unleased_reads: AtomicU64,
    /// Whether a writer may have had the file open since the lease was last held (see above).
    pub suspect: AtomicBool,
    /// Whether the reason for having no lease has been reported in stats.
    pub reported: AtomicBool,
    /// Held while the lease is checked, taken or given up (rare: never on a read that finds
    /// the lease held).
    pub gate: Mutex<()>,
}

/// `Lease::held_at` of a file without a lease.
const NO_LEASE: u64 = u64::MAX;
/// Reads between attempts to take a lease again.
const LEASE_RETRY: u64 = 64;

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
            suspect: AtomicBool::new(false),
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

fn mtime_ns(st: &libc::stat) -> i64 {
    st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec
}

fn ctime_ns(st: &libc::stat) -> i64 {
    st.st_ctime.saturating_mul(1_000_000_000) + st.st_ctime_nsec
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
/// file), which [`crate::engine::Engine::open`] refuses with `ErrorKind::Unsupported`; `None` for a
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

/// Open `path` for reading: a regular file, with `O_DIRECT` unless the engine turned it off or
/// the filesystem refuses it (or needs an alignment above the page).
fn open(path: &Path, settings: &OpenSettings) -> io::Result<Opened> {
    // First a plain open: it gives the right error for a missing file or a directory, and
    // does not block on a FIFO.
    let plain = os::open_read(path, libc::O_NONBLOCK).map_err(|e| with_path(path, e))?;
    let (fd, st, buffered_because) = for_reading(plain, path, settings.direct, |_| {
        os::open_read(path, libc::O_DIRECT)
    })?;
    opened(fd, st, buffered_because, path, settings)
}

/// Open a file from a descriptor the caller opened and hands over (`Engine::open_fd`): as
/// [`open`], with `name` for errors and stats. A descriptor without `O_DIRECT`, where it is
/// wanted, is opened again with it through `/proc/self/fd` (the caller's file description
/// keeps its flags); where that fails it is read buffered, as a path would be.
pub(crate) fn open_owned(fd: OwnedFd, name: &Path, settings: &OpenSettings) -> io::Result<Opened> {
    // SAFETY: F_GETFL on a descriptor the caller handed over, open for as long as `fd` is.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(with_path(name, io::Error::last_os_error()));
    }
    if flags & libc::O_ACCMODE == libc::O_WRONLY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: the descriptor is open for writing only",
                name.display()
            ),
        ));
    }
    // A descriptor already direct is read as it is (a duplicate of it); any other is opened
    // again with O_DIRECT, where that is wanted.
    let already_direct = flags & libc::O_DIRECT != 0;
    let (fd, st, buffered_because) =
        for_reading(fd, name, settings.direct || already_direct, |fd| {
            if already_direct {
                fd.try_clone()
            } else {
                let again = Path::new("/proc/self/fd").join(fd.as_raw_fd().to_string());
                os::open_read(&again, libc::O_DIRECT)
            }
        })?;
    opened(fd, st, buffered_because, name, settings)
}

/// A local file's source, from its descriptor and its `fstat`.
fn opened(
    fd: OwnedFd,
    st: libc::stat,
    buffered_because: Option<String>,
    path: &Path,
    settings: &OpenSettings,
) -> io::Result<Opened> {
    let mut notes = Vec::new();
    if let Some(why) = &buffered_because {
        notes.push(Fallback::new(
            FallbackKind::Buffered,
            format!(
                "{}: buffered reads with POSIX_FADV_RANDOM: {why}",
                path.display()
            ),
        ));
    }
    let (lease, no_lease) = Lease::new(&fd, settings.leases);
    if let Some(why) = no_lease {
        notes.push(Fallback::new(
            FallbackKind::NoLease,
            format!(
                "{}: no read lease ({why}): each read checks its size with fstat",
                path.display()
            ),
        ));
    }
    let seen = Seen::of(&st);
    Ok(Opened {
        identity: Identity {
            object: ObjectKey::Inode {
                dev: st.st_dev,
                ino: st.st_ino,
            },
            size: seen.size,
            version: seen.mtime_ns as i128,
        },
        source: Box::new(LocalFile {
            fd,
            path: path.to_path_buf(),
            seen: Mutex::new(seen),
            live_size: AtomicU64::new(seen.size),
            lease,
            direct: buffered_because.is_none(),
            limits: OnceLock::new(),
        }),
        notes,
    })
}

/// Make `plain`, a descriptor of `name`, one to read with: refused for a directory or a file
/// with no size to read ahead in, in blocking mode, and replaced by `reopen_direct`'s
/// `O_DIRECT` descriptor where direct reads are allowed and the filesystem takes them at page
/// alignment (given `plain`). Returns the descriptor, its `fstat`, and why it is buffered if
/// it is.
fn for_reading(
    plain: OwnedFd,
    name: &Path,
    allow_direct: bool,
    reopen_direct: impl FnOnce(&OwnedFd) -> io::Result<OwnedFd>,
) -> io::Result<(OwnedFd, libc::stat, Option<String>)> {
    let st = os::fstat(plain.as_fd()).map_err(|e| with_path(name, e))?;
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFDIR {
        return Err(with_path(name, io::Error::from_raw_os_error(libc::EISDIR)));
    }
    let fs = if st.st_size == 0 {
        os::fd_fs_type(plain.as_fd()).ok()
    } else {
        None
    };
    if let Some(why) = sizeless_why(kind, st.st_size, fs) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{}: {why} (read it plainly)", name.display()),
        ));
    }
    let buffered = |fd: OwnedFd, why: String| {
        // Advisory: the reads are right without it, only slower.
        let _ = os::fadvise(fd.as_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        Ok((fd, st, Some(why)))
    };
    // Back to blocking mode for the reads.
    os::set_blocking(plain.as_fd()).map_err(|e| with_path(name, e))?;
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
    match reopen_direct(&plain) {
        Ok(fd) => Ok((fd, st, None)),
        Err(e) => buffered(plain, format!("O_DIRECT refused ({e})")),
    }
}

impl Source for LocalFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn live_size(&self) -> u64 {
        self.live_size.load(Ordering::Acquire)
    }

    /// While the file holds its read lease this is one atomic load: nobody can have opened it
    /// for writing or truncated it. Otherwise it asks the kernel ([`LocalFile::check`]).
    #[inline]
    fn current_size(&self, events: &mut dyn FnMut(Event)) -> io::Result<u64> {
        if self.lease.unchanged() {
            return Ok(self.live_size());
        }
        self.check(events)
    }

    fn is_direct(&self) -> bool {
        self.direct
    }

    fn limits(&self) -> Limits {
        *self.limits.get_or_init(|| {
            let (read_ahead_kb, max_sectors_kb) = os::device_limits(&self.path);
            Limits {
                read_ahead_kb,
                max_sectors_kb,
                starts_as: None,
            }
        })
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn read(&self, op: &ReadOp) -> io::Result<usize> {
        preadv_full(self.fd.as_raw_fd(), op)
    }

    fn read_page_uncached(&self, page: u64, from: usize, dst: &mut [u8]) -> io::Result<usize> {
        // Page-aligned, for a descriptor opened with O_DIRECT.
        let mut tmp = os::AlignedBuf::new(PAGE_SIZE as usize);
        let n = os::pread(self.fd.as_fd(), tmp.as_mut_slice(), page * PAGE_SIZE)?;
        let got = n.saturating_sub(from).min(dst.len());
        dst[..got].copy_from_slice(&tmp.as_slice()[from..from + got]);
        Ok(got)
    }
}

impl LocalFile {
    /// The slow path of [`Source::current_size`]: a lease break somewhere in the process (is
    /// it this file's?), or no lease (`fstat`, and an attempt to take the lease: on every read
    /// of a suspect file, else now and then).
    #[cold]
    fn check(&self, events: &mut dyn FnMut(Event)) -> io::Result<u64> {
        let lease = &self.lease;
        if lease.held_at.load(Ordering::Acquire) != NO_LEASE {
            let _gate = lease.gate.lock().unwrap_or_else(|p| p.into_inner());
            let breaks = os::lease_breaks();
            let held_at = lease.held_at.load(Ordering::Acquire);
            if held_at == breaks {
                // Another reader settled it meanwhile.
                return Ok(self.live_size());
            }
            if held_at != NO_LEASE {
                if os::holds_read_lease(self.fd.as_fd()) {
                    // Another file's lease broke, not this one's.
                    lease.held_at.store(breaks, Ordering::Release);
                    return Ok(self.live_size());
                }
                // Someone opened the file for writing or truncated it. What they write next
                // only fstat can see (and only as a new size or modification time), so the
                // pages cached until now go: a writer's first bytes may land in any of them
                // within the clock tick the modification time is kept in. Suspect before
                // unleased: a read that finds no lease finds it suspect.
                lease.suspect.store(true, Ordering::Release);
                lease.held_at.store(NO_LEASE, Ordering::Release);
                lease.unleased_reads.store(0, Ordering::Relaxed);
                events(Event::Changed(format!(
                    "{}: opened for writing or truncated while read: its cached pages were dropped, and each read checks its size until the lease can be taken again",
                    self.path.display()
                )));
            }
        }
        let size = self.size_check(events)?;
        if lease.allowed {
            if let Some(size) = self.retake_lease(events)? {
                return Ok(size);
            }
        }
        Ok(size)
    }

    /// Try to take the lease again: on every read while the file is suspect, every
    /// [`LEASE_RETRY`] reads otherwise. Returns the size if this read took it.
    fn retake_lease(&self, events: &mut dyn FnMut(Event)) -> io::Result<Option<u64>> {
        let lease = &self.lease;
        let suspect = lease.suspect.load(Ordering::Acquire);
        let due = lease
            .unleased_reads
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(LEASE_RETRY);
        if !suspect && !due {
            return Ok(None);
        }
        // A suspect file's read waits for a retake under way: that retake may be dropping
        // the very pages this read would be served.
        let _gate = if suspect {
            lease.gate.lock().unwrap_or_else(|p| p.into_inner())
        } else {
            match lease.gate.try_lock() {
                Ok(gate) => gate,
                Err(_) => return Ok(None),
            }
        };
        if lease.held_at.load(Ordering::Acquire) != NO_LEASE {
            return Ok(None);
        }
        let breaks = os::settled_lease_breaks();
        match os::take_read_lease(self.fd.as_fd()) {
            Ok(()) => {
                // A change between the check above and the lease would go unseen: check
                // once more, now that changes break the lease.
                let size = self.size_check(events)?;
                if lease.suspect.swap(false, Ordering::AcqRel) {
                    events(Event::Changed(format!(
                        "{}: no longer open for writing: the pages read while it was were dropped (a write sets the file's times before its bytes land)",
                        self.path.display()
                    )));
                }
                lease.held_at.store(breaks, Ordering::Release);
                Ok(Some(size))
            }
            Err(e) => {
                if e.raw_os_error() == Some(libc::EAGAIN) {
                    lease.suspect.store(true, Ordering::Release);
                }
                if !lease.reported.swap(true, Ordering::Relaxed) {
                    let why = match e.raw_os_error() {
                        Some(libc::EAGAIN) => "it is open for writing".to_string(),
                        Some(libc::EACCES) => {
                            "another user owns it and this process lacks CAP_LEASE".to_string()
                        }
                        _ => e.to_string(),
                    };
                    events(Event::Note(Fallback::new(
                        FallbackKind::NoLease,
                        format!(
                            "{}: no read lease yet ({why}): each read checks its size with fstat",
                            self.path.display()
                        ),
                    )));
                }
                Ok(None)
            }
        }
    }

    /// One `fstat`: if the size, modification or change time changed since the last check,
    /// the file's cached pages go, and then the check stores what it saw. (Since Linux 6.13 a
    /// write after an `fstat` gets a fine-grained time, so two writes a check apart never
    /// share one.)
    fn size_check(&self, events: &mut dyn FnMut(Event)) -> io::Result<u64> {
        events(Event::SizeChecked);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let now = Seen::of(&os::fstat(self.fd.as_fd())?);
        if now != *seen {
            if self.lease.allowed {
                self.lease.suspect.store(true, Ordering::Release);
            }
            events(Event::Changed(format!(
                "{}: changed while open (size {} -> {} bytes): its cached pages were dropped",
                self.path.display(),
                seen.size,
                now.size
            )));
            self.live_size.store(now.size, Ordering::Release);
            *seen = now;
        }
        Ok(now.size)
    }
}
