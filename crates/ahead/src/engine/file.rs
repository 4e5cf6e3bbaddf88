//! Opening a file for the engine: `O_DIRECT` where the filesystem takes it at page alignment,
//! buffered reads with `POSIX_FADV_RANDOM` where it does not (so the kernel does not read
//! ahead a second time), and the device's limits from sysfs.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::units::PAGE_SIZE;

/// An open file the cache holds pages of. Shared by every open of the same file.
pub(crate) struct FileData {
    /// The cache's name for this file.
    pub id: u32,
    /// Where its pages are in the cache.
    pub table: std::sync::Arc<super::cache::PageTable>,
    pub fd: OwnedFd,
    pub path: PathBuf,
    /// Size in bytes when opened.
    pub size: u64,
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

fn open_raw(c: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the result is checked and owned at once.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by open(2), owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: fstat fills a zeroed stat for an open descriptor; the result is checked.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// The filesystem's direct I/O alignment for `fd`: `Some((memory, offset))` in bytes, `Some((0,
/// 0))` if it reports that direct I/O is unsupported, `None` if it does not say.
fn dio_alignment(fd: &OwnedFd) -> Option<(u32, u32)> {
    // SAFETY: statx on an open descriptor with AT_EMPTY_PATH and an empty path; the buffer is
    // a zeroed statx, and the result is checked.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
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

/// Open `path` for reading: a regular file, with `O_DIRECT` unless `allow_direct` is false or
/// the filesystem refuses it (or needs an alignment above the page).
pub(crate) fn open(path: &Path, allow_direct: bool) -> io::Result<Opened> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a path with a NUL byte", path.display()),
        )
    })?;
    // First a plain open: it gives the right error for a missing file or a directory, and
    // does not block on a FIFO.
    let plain = open_raw(&c, libc::O_NONBLOCK).map_err(|e| with_path(path, e))?;
    let st = fstat(&plain).map_err(|e| with_path(path, e))?;
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFDIR {
        return Err(with_path(path, io::Error::from_raw_os_error(libc::EISDIR)));
    }
    if kind != libc::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: not a regular file (ahead reads files; devices, FIFOs and sockets have no size to read ahead in)",
                path.display()
            ),
        ));
    }
    let identity = Identity {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size as u64,
        mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
    };
    let buffered = |fd: OwnedFd, why: String| -> io::Result<Opened> {
        // SAFETY: fadvise on an open descriptor; advisory, so its result is not needed.
        unsafe {
            libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
        Ok(Opened {
            fd,
            identity,
            direct: false,
            buffered_because: Some(why),
        })
    };
    let plain = {
        // Back to blocking mode for the reads.
        // SAFETY: fcntl on an open descriptor.
        unsafe {
            let flags = libc::fcntl(plain.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(plain.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
        plain
    };
    if !allow_direct {
        return buffered(plain, "O_DIRECT turned off by the caller".into());
    }
    match dio_alignment(&plain) {
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
    match open_raw(&c, libc::O_DIRECT) {
        Ok(fd) => Ok(Opened {
            fd,
            identity,
            direct: true,
            buffered_because: None,
        }),
        Err(e) => buffered(plain, format!("O_DIRECT refused ({e})")),
    }
}
