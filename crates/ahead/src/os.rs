//! The system calls ahead makes besides the reads themselves, each wrapped once behind a safe
//! function: opening with `O_DIRECT`, `fstat`/`statx`, `fadvise`, `statfs`, `getrusage`,
//! `pread` into a page-aligned buffer, `mincore`, `mount`, and read leases (`fcntl` and the
//! signal handler their breaks come to), and the device limits sysfs gives. With the backends and
//! the cache, this is the only place `unsafe` is written; the rest of the library and the
//! command line call these. Public with the `tools` feature only (the command line's helpers,
//! not part of the stable surface); without it the engine keeps what it uses.

#![cfg_attr(not(feature = "tools"), allow(dead_code))]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a path with a NUL byte", path.display()),
        )
    })
}

/// Open `path` read-only (and close-on-exec) with `flags` added (`O_DIRECT`, `O_NONBLOCK`).
pub fn open_read(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = c_path(path)?;
    // SAFETY: a NUL-terminated path; the result is checked and owned at once.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by open(2), owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open `path` with `O_DIRECT`, as a `std::fs::File`.
pub fn open_direct(path: &Path) -> io::Result<std::fs::File> {
    open_read(path, libc::O_DIRECT).map(std::fs::File::from)
}

/// `fstat(2)`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into the struct it is given, for an open descriptor.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// The filesystem's direct I/O alignment for `fd` (`statx` `STATX_DIOALIGN`): `Some((memory,
/// offset))` in bytes, `Some((0, 0))` if direct I/O is unsupported, `None` if it does not say.
pub fn dio_alignment(fd: BorrowedFd<'_>) -> Option<(u32, u32)> {
    // SAFETY: an all-zero `statx` is a valid value of this plain C struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx on an open descriptor with AT_EMPTY_PATH and an empty, NUL-terminated
    // path, writing into the struct it is given.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc < 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    Some((stx.stx_dio_mem_align, stx.stx_dio_offset_align))
}

/// Turn `O_NONBLOCK` off on `fd`.
pub fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl F_GETFL/F_SETFL on an open descriptor, with an int argument.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `posix_fadvise(2)` on `len` bytes at `offset` (0, 0: the whole file).
pub fn fadvise(fd: BorrowedFd<'_>, offset: u64, len: u64, advice: libc::c_int) -> io::Result<()> {
    // SAFETY: advice on an open descriptor; it reads and writes no memory of ours.
    let rc = unsafe {
        libc::posix_fadvise(
            fd.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            advice,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Drop `path`'s pages from the kernel's page cache (`POSIX_FADV_DONTNEED` over the file), so
/// the next buffered read of it is cold.
pub fn drop_kernel_cache(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    use std::os::fd::AsFd;
    fadvise(f.as_fd(), 0, 0, libc::POSIX_FADV_DONTNEED)
}

/// The filesystem type (`statfs(2)`'s `f_type`) of the filesystem holding `path`.
pub fn fs_type(path: &Path) -> io::Result<i64> {
    let c = c_path(path)?;
    // SAFETY: an all-zero `statfs` is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs writes into the struct it is given, for a NUL-terminated path.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
}

/// The most memory this process can have, and what sets it: the machine's RAM, or a lower
/// limit of the memory cgroup it runs in (v2's `memory.max`, v1's `memory.limit_in_bytes`,
/// of its own group or any group above it). `None` if not even the RAM can be read.
pub fn memory_limit() -> Option<(u64, String)> {
    // SAFETY: sysconf only reads the system's configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let mut best = (pages > 0 && page > 0).then(|| {
        (
            (pages as u64).saturating_mul(page as u64),
            "this machine's RAM".to_string(),
        )
    });
    let groups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in groups.lines() {
        // "0::/path" (v2) or "N:memory:/path" (v1).
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let (root, file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir = Path::new(path);
        loop {
            let at = Path::new(root)
                .join(dir.strip_prefix("/").unwrap_or(dir))
                .join(file);
            if let Some(limit) = std::fs::read_to_string(&at)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
            {
                if best.as_ref().is_none_or(|(b, _)| limit < *b) {
                    best = Some((
                        limit,
                        format!("the memory cgroup's limit ({})", at.display()),
                    ));
                }
            }
            match dir.parent() {
                Some(up) => dir = up,
                None => break,
            }
        }
    }
    best
}

/// tmpfs's and ramfs's `f_type`: memory, not a disk.
pub const TMPFS_MAGIC: i64 = 0x0102_1994;
/// See [`TMPFS_MAGIC`].
pub const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// Context switches this process's threads have made, voluntary and not (`getrusage(2)`;
/// io_uring's worker threads are its own).
pub fn context_switches() -> u64 {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    (u.ru_nvcsw + u.ru_nivcsw).max(0) as u64
}

/// CPU time this process has used, user and system, in seconds (`getrusage(2)`; kernel
/// threads working for its io_uring count as its own).
pub fn cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// CPU time the calling thread has used, user and system, in seconds (`getrusage(2)`'s
/// `RUSAGE_THREAD`): a benchmark's client threads, apart from the rest of the process.
pub fn thread_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_THREAD)
}

/// CPU time, user and system, in seconds, of this process's children that have ended and been
/// waited for (`getrusage(2)`'s `RUSAGE_CHILDREN`): a benchmark's contenders run as processes
/// of their own.
pub fn children_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_CHILDREN)
}

fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// `preadv(2)` into `bufs`, retried on `EINTR`: bytes read (0 at the end of the file).
pub fn preadv(
    fd: BorrowedFd<'_>,
    bufs: &mut [io::IoSliceMut<'_>],
    offset: u64,
) -> io::Result<usize> {
    loop {
        // SAFETY: `IoSliceMut` is ABI-compatible with `iovec` on Unix, and each is valid for
        // writes of its length for the duration of the call.
        let n = unsafe {
            libc::preadv(
                fd.as_raw_fd(),
                bufs.as_mut_ptr() as *const libc::iovec,
                bufs.len().min(libc::c_int::MAX as usize) as libc::c_int,
                offset as libc::off_t,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `pread(2)` into `buf`, retried on `EINTR`: bytes read (0 at the end of the file).
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    preadv(fd, &mut [io::IoSliceMut::new(buf)], offset)
}

/// A zeroed, page-aligned buffer (what `O_DIRECT` reads need), freed on drop.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    /// From `huge`: the whole mapping (its start and length), unmapped on drop; else from the
    /// allocator with page alignment.
    mapping: Option<(*mut libc::c_void, usize)>,
}

// SAFETY: it owns its allocation outright; shared access is only through &self / &mut self.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above: &AlignedBuf gives only reads.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// At least `len` bytes (rounded up to whole pages, at least one).
    pub fn new(len: usize) -> AlignedBuf {
        let len = len.max(1).next_multiple_of(4096);
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("page layout");
        // SAFETY: a layout of non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf {
            ptr,
            len,
            mapping: None,
        }
    }

    /// At least `len` bytes in transparent huge pages where the kernel gives them (2 MiB
    /// aligned, `MADV_HUGEPAGE` before any page is touched), as the engine's cache is: a direct
    /// read into physically contiguous memory is one device request up to `max_sectors_kb`,
    /// where 4 KiB pages cut it at the device's segment limit (254 segments, 1016 KiB, on this
    /// machine's virtio disk). The memory is zeroed (fresh anonymous pages).
    pub fn huge(len: usize) -> AlignedBuf {
        const HUGE: usize = 2 << 20;
        let len = len.max(1).next_multiple_of(4096);
        let map_len = len + HUGE;
        // SAFETY: a private anonymous mapping of our own; no file, no fixed address.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return AlignedBuf::new(len);
        }
        let start = (map as usize).next_multiple_of(HUGE) as *mut u8;
        // SAFETY: advice on memory this mapping owns, before any page of it is touched (so
        // the first touch of each 2 MiB faults in a huge page); a refusal leaves 4 KiB pages.
        unsafe { libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE) };
        AlignedBuf {
            ptr: std::ptr::NonNull::new(start).expect("a mapping is not at address 0"),
            len,
            mapping: Some((map, map_len)),
        }
    }

    /// The bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` initialized bytes owned by self, borrowed mutably once.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, read only.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialized bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The start, for an I/O submission that writes into it while self lives.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (at least one page); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        match self.mapping {
            // SAFETY: the mapping `huge` made, unmapped once.
            Some((map, len)) => unsafe {
                libc::munmap(map, len);
            },
            None => {
                let layout =
                    std::alloc::Layout::from_size_align(self.len, 4096).expect("page layout");
                // SAFETY: allocated in `new` with this layout.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
            }
        }
    }
}

/// Pages of `f` in the kernel's page cache (`mincore(2)` over a mapping of it).
pub fn kernel_cached_pages(f: &std::fs::File) -> io::Result<u64> {
    let len = f.metadata()?.len() as usize;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: a read-only shared mapping of an open file; only passed to mincore and unmapped
    // before returning; no byte of it is read.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut vec = vec![0u8; len.div_ceil(4096)];
        let rc = libc::mincore(addr, len, vec.as_mut_ptr());
        let err = io::Error::last_os_error();
        libc::munmap(addr, len);
        if rc != 0 {
            return Err(err);
        }
        Ok(vec.iter().filter(|&&b| b & 1 != 0).count() as u64)
    }
}

/// Mount tracefs at `target` (root only).
pub fn mount_tracefs(target: &Path) -> io::Result<()> {
    let c = c_path(target)?;
    // SAFETY: mount(2) with NUL-terminated strings and no data.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// This process's peak resident memory since its program started, in KiB (`VmHWM` of
/// `/proc/self/status`: the high-water mark of its own address space, which a new program
/// starts afresh, unlike `ru_maxrss`, which an `exec` carries over from the process it
/// replaced, or from the parent whose memory a `vfork`ed child shared).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Wait for `child` to exit: its exit code (128 + signal if killed) and the peak resident
/// memory it reached, in KiB (`wait4(2)`'s `ru_maxrss`: a child spawned by `vfork`, as
/// `std::process::Command` spawns, starts from its parent's, so it is a bound only for a small
/// parent; a program can report its own with [`peak_rss_kib`]).
pub fn wait_with_peak_rss(child: std::process::Child) -> io::Result<(i32, u64)> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on our own child, writing into the two values it is given.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((code, usage.ru_maxrss.max(0) as u64))
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

// ---------------------------------------------------------------------------------------------
// Read leases.
//
// A read lease (`fcntl(F_SETLEASE, F_RDLCK)`) makes the kernel tell its holder before anyone
// opens the file for writing or truncates it, and hold that writer back until the holder lets
// go (or `/proc/sys/fs/lease-break-time`, 45 s by default, passes). The engine holds one on
// each file it reads, so that a read served from its cache needs no system call to know the
// file has not changed: while the lease is held, it cannot have. The kernel's notice is a
// signal; its handler counts the break ([`lease_breaks`]) and gives the lease up at once, so
// the writer waits microseconds and every read that starts after the writer proceeds sees the
// count move and looks at the file again.

/// `F_SETSIG` (Linux): the signal a descriptor's lease break is sent with.
const F_SETSIG: libc::c_int = 10;
/// `F_SETOWN_EX` (Linux) and its `F_OWNER_TID`: send a descriptor's signals to one thread.
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// `struct f_owner_ex`.
#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// The signal lease breaks come by, and the thread they are sent to.
#[derive(Clone, Copy)]
struct LeaseSignal {
    signal: libc::c_int,
    thread: libc::pid_t,
}

/// Lease breaks this process has been told of, by any file.
static LEASE_BREAKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Lease breaks whose handler has finished (given its lease up): at most one behind
/// [`LEASE_BREAKS`], since the handler runs on one thread with its signal blocked.
static LEASE_BREAKS_HANDLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The handler's view of `siginfo_t` for a lease break (`SIGPOLL` layout: the band, then
/// the descriptor), as the kernel lays it out on every Linux ABI with C alignment.
#[repr(C)]
struct PollSigInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    band: libc::c_long,
    fd: libc::c_int,
}

extern "C" fn on_lease_break(
    _signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // Only async-signal-safe work: an atomic add and fcntl(2), with errno kept as it was.
    // SAFETY: errno is thread-local; its location is valid for the life of the thread.
    let saved = unsafe { *libc::__errno_location() };
    LEASE_BREAKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if !info.is_null() {
        // SAFETY: the kernel passes a full siginfo_t to an SA_SIGINFO handler; a lease break
        // fills its SIGPOLL fields, which PollSigInfo lays out.
        let fd = unsafe { (*info.cast::<PollSigInfo>()).fd };
        // SAFETY: fcntl on a descriptor number: at worst it names another file (a lease
        // released there is taken again after a size check) or none (EBADF).
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
    }
    LEASE_BREAKS_HANDLED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Lease breaks this process has been told of so far. A file whose lease was held when the
/// count was `n` still holds it, unchanged, while the count is `n`.
pub fn lease_breaks() -> u64 {
    LEASE_BREAKS.load(std::sync::atomic::Ordering::SeqCst)
}

/// [`lease_breaks`] once every break counted has been handled, for a lease about to be taken.
/// A handler still running gives up whatever lease its descriptor holds *now*, and resets the
/// descriptor's signal and owner: run against a lease just taken again on the same file, it
/// would leave the file unleased while the engine believed it leased (and a later break sent
/// as `SIGIO`, which ends the process). Waits out such a handler: a few system calls.
pub fn settled_lease_breaks() -> u64 {
    loop {
        let breaks = LEASE_BREAKS.load(std::sync::atomic::Ordering::SeqCst);
        if LEASE_BREAKS_HANDLED.load(std::sync::atomic::Ordering::SeqCst) == breaks {
            return breaks;
        }
        std::thread::yield_now();
    }
}

/// The real-time signal asked for with [`want_lease_signal`] (0: `SIGRTMAX - 3`).
static WANTED_LEASE_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Have lease breaks come by `signal` (between `SIGRTMIN` and `SIGRTMAX`) instead of
/// `SIGRTMAX - 3`. The handler is installed once per process, by the first lease taken: asking
/// for another signal after that fails, saying which one is in use.
pub(crate) fn want_lease_signal(signal: i32) -> Result<(), String> {
    let (lo, hi) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    if !(lo..=hi).contains(&signal) {
        return Err(format!(
            "lease signal {signal}: it must be a real-time signal, {lo} to {hi}"
        ));
    }
    let prev = WANTED_LEASE_SIGNAL.swap(signal, std::sync::atomic::Ordering::SeqCst);
    match LEASE_TARGET.get() {
        Some(Ok(t)) if t.signal != signal => {
            WANTED_LEASE_SIGNAL.store(prev, std::sync::atomic::Ordering::SeqCst);
            Err(format!(
                "lease signal {signal}: this process already takes lease breaks by signal {}",
                t.signal
            ))
        }
        _ => Ok(()),
    }
}

/// The signal lease breaks come by: `SIGRTMAX - 3` unless an engine was built with another
/// ([`crate::EngineBuilder::lease_signal`]), with its handler installed the first time this is
/// called. Fails, saying why, if the signal already has another handler (the
/// application's own), or the handler cannot be installed.
///
/// The breaks are sent to one thread of ahead's own ("ahead-lease", started here, idle but for
/// them), not to the process: the application's threads are never interrupted by them, and a
/// break is handled even if every one of them blocks signals.
pub fn lease_signal() -> Result<libc::c_int, String> {
    lease_target().map(|t| t.signal)
}

/// The signal and thread lease breaks go to, once installed in this process (or why they
/// could not be). A child forked after it has the handler but not the thread: it starts its own.
static LEASE_TARGET: crate::per_process::PerProcess<Result<LeaseSignal, String>> =
    crate::per_process::PerProcess::new();

fn lease_target() -> Result<LeaseSignal, String> {
    LEASE_TARGET.get_or_init(install_lease_handler).clone()
}

fn install_lease_handler() -> Result<LeaseSignal, String> {
    let signal = match WANTED_LEASE_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) {
        0 => libc::SIGRTMAX() - 3,
        wanted => wanted,
    };
    // SAFETY: an all-zero `sigaction` is a valid value of this plain C struct.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: sigaction with no new action only reads the current one into `old`.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 {
        return Err(format!("sigaction: {}", io::Error::last_os_error()));
    }
    let ours = on_lease_break as *const () as libc::sighandler_t;
    // Ours already: installed before this process was forked from its parent.
    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != ours {
        return Err(format!(
            "signal {signal} already has a handler in this process (choose another with EngineBuilder::lease_signal)"
        ));
    }
    // SAFETY: as above.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_lease_break as *const () as libc::sighandler_t;
    // SA_RESTART: the call the signal interrupts (the lease thread's wait) resumes after it.
    action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: sa_mask is a valid sigset_t to empty.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: installs a handler that does only async-signal-safe work.
    if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
        return Err(format!("sigaction: {}", io::Error::last_os_error()));
    }
    let (tell, told) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("ahead-lease".into())
        .spawn(move || {
            // SAFETY: an all-zero sigset_t is valid; sigemptyset/sigaddset initialise it.
            let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: operations on the local set, then on this thread's own mask; gettid
            // has no preconditions.
            let tid = unsafe {
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, signal);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::gettid()
            };
            let _ = tell.send(tid);
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("cannot start the lease thread: {e}"))?;
    let thread = told
        .recv()
        .map_err(|_| "the lease thread ended at its start".to_string())?;
    Ok(LeaseSignal { signal, thread })
}

/// Take a read lease on `fd` (a descriptor open read-only), its breaks sent with
/// [`lease_signal`] to ahead's lease thread. Fails with `EAGAIN` while anyone has the file open
/// for writing, `EACCES` for a file this user does not own (without `CAP_LEASE`), `EINVAL`
/// where the filesystem does not lease.
pub fn take_read_lease(fd: BorrowedFd<'_>) -> io::Result<()> {
    let target = lease_target().map_err(|why| io::Error::new(io::ErrorKind::Unsupported, why))?;
    let owner = FOwnerEx {
        kind: F_OWNER_TID,
        pid: target.thread,
    };
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl F_SETSIG/F_SETLEASE on an open descriptor with int arguments, and
    // F_SETOWN_EX with a pointer to a valid f_owner_ex it only reads.
    unsafe {
        if libc::fcntl(fd, F_SETSIG, target.signal) < 0
            || libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) < 0
            || libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether `fd` holds a read lease now (`F_GETLEASE`).
pub fn holds_read_lease(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: fcntl F_GETLEASE on an open descriptor.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETLEASE) == libc::F_RDLCK }
}

/// The filesystem type (`fstatfs(2)`'s `f_type`) of the filesystem holding `fd`.
pub fn fd_fs_type(fd: BorrowedFd<'_>) -> io::Result<i64> {
    // SAFETY: an all-zero `statfs` is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes into the struct it is given, for an open descriptor.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
}

/// The readahead limits of the device holding `path`: `(read_ahead_kb, max_sectors_kb)`, from
/// sysfs, when there is a block device behind it.
pub fn device_limits(path: &Path) -> (Option<u64>, Option<u64>) {
    let Ok(meta) = std::fs::metadata(path) else {
        return (None, None);
    };
    let (ma, mi) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    let read = |p: PathBuf| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let block = PathBuf::from(format!("/sys/dev/block/{ma}:{mi}"));
    // A partition's queue is its disk's.
    let queue = [block.join("queue"), block.join("../queue")]
        .into_iter()
        .find(|q| q.is_dir());
    let ra = read(PathBuf::from(format!(
        "/sys/class/bdi/{ma}:{mi}/read_ahead_kb"
    )))
    .or_else(|| read(queue.as_ref()?.join("read_ahead_kb")));
    let io = queue.and_then(|q| read(q.join("max_sectors_kb")));
    (ra, io)
}
