//! Sources: where a file's bytes come from, behind one seam.
//!
//! The engine's cache, policies, statistics and miss path do not care what a file is. What
//! they need of it is here, in [`Source`]: its name, its size now (and whether its contents
//! changed since the pages cached for it were read, in which case they are dropped), whether
//! reads bypass the kernel's cache, the device's limits the windows are sized from, a blocking
//! read of a request into the cache's slots, and, for the kernel's asynchronous backends, a
//! descriptor to read from. Opening is the other half: a [`Registered`] kind of source claims
//! the names it reads and opens them into an [`Opened`]: the source, its [`Identity`] (so two
//! opens of one version share pages), and the fallbacks it took.
//!
//! **The namespace.** Each kind also tells what a name is ([`Registered::stat`]) and what is
//! under it ([`Registered::list`]), as one [`Entry`] type whatever the kind: a file or an
//! object, a directory or a prefix. [`kind_of`] is the one place a name is matched to its
//! kind; the engine's `stat`, `list` and `open`, Python's fsspec layer and a mount all go
//! through it, and none parses a scheme of its own.
//!
//! * [`local`]: a file of a local filesystem: `O_DIRECT` where it can, read leases or `fstat`
//!   for change detection, sysfs for the device's limits.
//! * `remote` (the `remote` feature): an object behind an `s3://` or `http(s)://` URL, read with
//!   ranged GETs, pinned to the version opened by its ETag.
//!
//! Adding a kind of source is its module (with its `REGISTERED` entry) and one line in
//! [`SOURCES`]. A source with no descriptor is read through [`Source::read`]: by `threads`'
//! pool, or by `sync` and `uring` in the thread that submits it (`uring` cannot hand the kernel
//! a read it has no descriptor for, so such a source gets no overlap under it).

pub(crate) mod local;
#[cfg(feature = "remote")]
pub(crate) mod remote;
#[cfg(test)]
mod tests;
pub(crate) mod url;

use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;

use super::backend::ReadOp;

/// The registry: every kind of source, one line each. The first that claims a name opens it.
pub(crate) const SOURCES: &[Registered] = &[
    #[cfg(feature = "remote")]
    remote::REGISTERED,
    local::REGISTERED,
];

/// One kind of source: its name, what it is, which names it reads, and how to open one.
pub(crate) struct Registered {
    pub name: &'static str,
    pub about: &'static str,
    /// Whether this kind reads `name` (a path, or a URL for sources that take them).
    pub claims: fn(&Path) -> bool,
    pub open: fn(&Path, &OpenSettings) -> io::Result<Opened>,
    /// Open what a stat or a listing of this kind just described, without asking again.
    pub open_entry: fn(&Entry, &OpenSettings) -> io::Result<Opened>,
    /// What `name` is: a file or a directory, its size and version.
    pub stat: fn(&Path, &OpenSettings) -> io::Result<Entry>,
    /// What is directly under `name`, sorted by name, one level deep as `ls` shows a
    /// directory; a file lists as itself.
    pub list: fn(&Path, &OpenSettings) -> io::Result<Vec<Entry>>,
}

/// What a name is, as a stat or a listing tells it, for every kind of source alike: a file
/// (a local file, an object) or a directory (a local directory, an S3 prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its full name: a path, or a URL (`s3://bucket/key`; a prefix's ends with `/`), with
    /// any password hidden.
    pub name: String,
    /// Size in bytes (0 for a directory).
    pub size: u64,
    /// Whether it is a directory (or a prefix objects are under) rather than a file.
    pub is_dir: bool,
    /// The object's ETag, where a store gives one (never for a local file).
    pub e_tag: Option<String>,
    /// When it was last modified, in ns since the epoch (0 where unknown).
    pub modified_ns: i64,
}

/// The engine's settings a source is opened with.
pub(crate) struct OpenSettings<'a> {
    /// Bypass the kernel's page cache where the source can (`EngineBuilder::direct`).
    pub direct: bool,
    /// Take read leases where the source can (`EngineBuilder::leases`).
    pub leases: bool,
    /// Settings for remote stores (`EngineBuilder::remote_option`): key, value.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub remote_options: &'a [(String, String)],
    /// Whether an object opened by name comes with its last bytes (a reader of a footer
    /// reads them first); not for objects read in turn from their start (`open_many`).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub with_tail: bool,
}

/// A source just opened, before the engine names it.
pub(crate) struct Opened {
    pub identity: Identity,
    pub source: Box<dyn Source>,
    /// Fallbacks taken while opening (no `O_DIRECT`, no lease), for `stats()`.
    pub notes: Vec<super::Fallback>,
}

/// What a source is, across opens: the same object (an inode, later an object's URL).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ObjectKey {
    /// A local file: device and inode.
    Inode { dev: u64, ino: u64 },
    /// A remote object: its URL.
    #[cfg(feature = "remote")]
    Url(String),
    /// A source the tests make (`source/tests.rs`).
    #[cfg(test)]
    Test(u32),
}

/// What identifies a source's contents across opens: the object, its size, and its version
/// (a local file's modification time in ns). Pages cached for one open are reused by a later
/// open only if all three still match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub object: ObjectKey,
    pub size: u64,
    pub version: i128,
}

/// The device limits windows are sized from, where the source knows them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    /// The device's readahead window (`read_ahead_kb`).
    pub read_ahead_kb: Option<u64>,
    /// The device's largest request (`max_sectors_kb`).
    pub max_sectors_kb: Option<u64>,
    /// The modelled device the engine's meter starts from, until it has measured this one
    /// (an object store's round trips, not the NVMe disk it assumes otherwise).
    pub starts_as: Option<crate::device::DeviceModel>,
}

/// What a source reports while it checks its size (see [`Source::current_size`]).
pub(crate) enum Event {
    /// Its contents may have changed since its cached pages were read: the engine drops them
    /// and notes why.
    Changed(String),
    /// A fallback to note in `stats()` (say, no lease to be had).
    Note(super::Fallback),
    /// It asked the system for its size (`stats().size_checks`).
    SizeChecked,
}

/// Where one file's bytes come from. See the module comment.
pub(crate) trait Source: Send + Sync {
    /// The name it was opened by, for errors and `stats()`.
    fn path(&self) -> &Path;
    /// Size in bytes as last seen: at open, or what the last check found.
    fn live_size(&self) -> u64;
    /// Size in bytes now, reporting through `events` a change of contents since the last
    /// check. Called on every read: a source that can know it unchanged without asking the
    /// system (a local file's lease) answers with a load.
    fn current_size(&self, events: &mut dyn FnMut(Event)) -> io::Result<u64>;
    /// Whether reads bypass the kernel's page cache (`O_DIRECT`).
    fn is_direct(&self) -> bool;
    /// The device limits windows are sized from.
    fn limits(&self) -> Limits;
    /// The descriptor the kernel's backends read from; `None` for a source read only through
    /// [`Source::read`].
    fn fd(&self) -> Option<BorrowedFd<'_>>;
    /// Read `op` in full into its slots, in this thread: bytes read (fewer at the end of the
    /// source), or the error.
    fn read(&self, op: &ReadOp) -> io::Result<usize>;
    /// Bytes of page `page` from byte `from` on, into `dst`, past the cache: for a read that
    /// keeps finding its page evicted.
    fn read_page_uncached(&self, page: u64, from: usize, dst: &mut [u8]) -> io::Result<usize>;
    /// Whether its reads copy bytes it was handed (a remote answer's body) into the cache,
    /// rather than the device writing them there: counted in `stats().copied_bytes`.
    fn copies_in(&self) -> bool {
        false
    }
    /// What its link to a store was measured at (every object of the store shares it);
    /// `None` for a local file.
    fn link_stats(&self) -> Option<crate::engine::LinkStats> {
        None
    }
    /// Why a change of its contents while it is read may go unseen, if it may (a remote
    /// object with neither ETag nor Last-Modified to pin it by).
    fn unpinned(&self) -> Option<&str> {
        None
    }
    /// The version it reads, as [`crate::engine::Engine::open_entry`] opens it again (the
    /// same object, pinned alike); `None` where a name is all there is (a local file).
    fn pinned_entry(&self) -> Option<Entry> {
        None
    }
}

/// Open `name` with the first kind of source that claims it.
pub(crate) fn open(name: &Path, settings: &OpenSettings) -> io::Result<Opened> {
    (kind_of(name)?.open)(name, settings)
}

/// The kind of source that reads `name`: the first that claims it.
pub(crate) fn kind_of(name: &Path) -> io::Result<&'static Registered> {
    match SOURCES.iter().find(|s| (s.claims)(name)) {
        Some(kind) => Ok(kind),
        None => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: no kind of source reads this; known: {}",
                url::redact(&name.to_string_lossy()),
                SOURCES
                    .iter()
                    .map(|s| format!("{} ({})", s.name, s.about))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}
