//! The mounted tree: FUSE's calls answered from the engine's namespace (`Engine::stat`,
//! `list`, `open_entry`) and its reads.
//!
//! **Names.** Every node is an [`Entry`] of the source (a file or an object, a directory or a
//! prefix) and an inode number, kept for the mount's life (a name seen once keeps its number,
//! as a kernel expects between `lookup`s). A directory's listing is kept for
//! [`LISTING_TTL`]: `ls`, then `stat` of each name, then `open` make one listing, not a HEAD
//! per name, and the `open` pins the version the listing saw (its ETag), with no request of
//! its own. A name looked up in a directory not listed lately is a `stat` of that name.
//!
//! **Reads.** One engine, one budget, for every handle; each open is a file of the engine with
//! its own policy state, so two programs reading one object at different places are two
//! streams, as two opens through the library are. A read is `File::read_at` into a buffer of
//! the session thread's, looped to the size asked for or the end.
//!
//! **Files read in turn.** A program going through a directory's files in its listing's order
//! (`tar -c`, `cp -r`, a loader of shards) pays, per file, an open and a first read's round
//! trip before any policy has seen it: readahead within a file cannot reach the next. Once two
//! files of a directory have been opened one after the other in its listing's order (by any
//! program), the first read from before the second was opened, the rest of the listing's
//! files are opened ahead through [`Engine::open_many`] (up to its `OPENS_AHEAD` ahead, each
//! asked for its first bytes within the readahead half of the budget), and the next open of
//! the file expected takes it from there. An open of any other file of the directory drops
//! the files opened ahead (their pages stay cached under the budget). A program that opens
//! many files at once in the listing's order and reads them later, at random, opens nothing
//! ahead: its opens are not reads in turn, and the first bytes of each would be fetched for
//! nothing. A file opened ahead is pinned when opened ahead; one whose version or size is not
//! the listing's is not used (the open is made anew, pinned to the listing's version as every
//! open is).
//!
//! **The kernel's cache and readahead.** Files are not opened `direct_io`: every read of the
//! program would then be a round trip through FUSE (a 4 KiB reader pays ~20 us a read), and
//! mmap would be refused. The kernel's page cache stays in front, and its readahead for the
//! mount is 1 MiB (`--kernel-readahead`), so that a 4 KiB reader in order costs one FUSE read
//! per 1 MiB, not per page. `max_readahead` at `init` cannot give that: it only lowers the
//! mount's readahead, which starts at the kernel's default for a new FUSE mount (128 KiB).
//! The mount's own `read_ahead_kb` (its bdi in sysfs, writable by root) raises it, set once
//! mounted (`mod.rs`; where it cannot be, the mount says so and reads go through FUSE 128
//! KiB at a time, 8 round trips to the daemon where one would do). FUSE's largest read,
//! `max_pages`, is negotiated at `init` from fuser's `max_write` and stops at the kernel's
//! `fuse.max_pages_limit` (1 MiB by default), so it does not bind first. The kernel's
//! readahead decides no fetch from the source: a lone random read reaches the engine as its
//! own pages (the kernel reads a miss with no sequential history as it is), a reader in order
//! as reads of up to 1 MiB in order, from which the engine's policy sizes every request to
//! storage, and each of those reads is a read of the engine's cache when the policy was
//! right. The kernel fetches each page from
//! the engine at most once per open (no `keep_cache`: an open starts with the kernel's copy
//! dropped, so a local file changed between opens is read afresh; the engine's own cache,
//! which checks a file's version, keeps what it fetched). A file larger than a quarter of
//! the budget is read through the engine's ring (`drop_behind`, on for the mount as for
//! `ahead cat`; `-o drop_behind=off` turns it off): the pages a scan has passed over are in
//! the kernel's cache for the rest of the open, so the engine's copy would serve only a later
//! open, and a scan kept in the ring faults in its windows' memory, not the budget's (the
//! kernel zeroes every page on its first touch: docs/bench-log/issue-48-mount.md, session
//! 42). A program that opens such a file again and reads it from its start fetches it again.
//!
//! **Errors.** An I/O or network error is the read's `EIO` (or the errno the source gave),
//! with a line on stderr naming the file; a changed object is `EIO` and a line that says so,
//! never bytes of two versions. Writes are refused: the mount is read-only.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ahead::engine::{Engine, Entry, File, OpenMany};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};

/// How long a directory's listing, and the attributes the kernel caches, are trusted.
pub(crate) const LISTING_TTL: Duration = Duration::from_secs(5);

use crate::commands::{KERNEL_READAHEAD_BYTES, STATS_DIR, STATS_FILE};

const ROOT: u64 = 1;
const STATS_DIR_INO: u64 = 2;
const STATS_FILE_INO: u64 = 3;
/// The first inode number of a source's name.
const FIRST_INO: u64 = 4;

/// A directory's children: each name and its inode, in the listing's order.
type Children = Arc<Vec<(OsString, u64)>>;

/// A manifest's tree: each directory's full name (ending `/`) and its children, each a name
/// and whether it is a directory.
pub(crate) type Manifest = HashMap<String, Vec<(String, bool)>>;

/// How many HEADs a manifest's directory is stated with at once.
const STATS_AT_ONCE: usize = 16;

/// The tree of a manifest's `text` (one path under `root` a line; blank lines and `#`
/// comments skipped), or the first bad line, named by its number.
pub(crate) fn parse_manifest(root: &str, text: &str) -> Result<Manifest, String> {
    let root = dir_key(root);
    let mut tree: Manifest = HashMap::new();
    tree.entry(root.clone()).or_default();
    for (n, line) in text.lines().enumerate() {
        let path = line.trim();
        if path.is_empty() || path.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = path.split('/').collect();
        if path.starts_with('/')
            || parts
                .iter()
                .any(|p| p.is_empty() || *p == "." || *p == "..")
        {
            return Err(format!(
                "line {}: {path:?}: a path under the URL, as a/b/c.bin (no leading /, no . or .., no empty part)",
                n + 1
            ));
        }
        let mut dir = root.clone();
        for (i, part) in parts.iter().enumerate() {
            let is_dir = i + 1 < parts.len();
            let children = tree.entry(dir.clone()).or_default();
            if !children.iter().any(|(c, _)| c == part) {
                children.push((part.to_string(), is_dir));
            }
            if is_dir {
                dir = format!("{dir}{part}/");
                tree.entry(dir.clone()).or_default();
            }
        }
    }
    for children in tree.values_mut() {
        children.sort();
    }
    Ok(tree)
}

/// One name of the source.
struct Node {
    entry: Entry,
    /// Its children by name, as last listed, and when (directories only).
    listed: Option<(Instant, Children)>,
}

#[derive(Default)]
struct Names {
    nodes: HashMap<u64, Node>,
    by_name: HashMap<String, u64>,
    next: u64,
}

impl Names {
    /// The inode of `entry`, numbered on first sight; its entry updated to what was seen now.
    fn number(&mut self, entry: Entry) -> u64 {
        if let Some(&ino) = self.by_name.get(&entry.name) {
            let node = self.nodes.get_mut(&ino).expect("numbered names have nodes");
            node.entry = entry;
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.by_name.insert(entry.name.clone(), ino);
        self.nodes.insert(
            ino,
            Node {
                entry,
                listed: None,
            },
        );
        ino
    }
}

/// A directory's files as programs open them (see "Files read in turn" in the module comment).
#[derive(Default)]
struct InTurn {
    /// The listing's place of the file opened last.
    last: Option<usize>,
    /// Whether that open has been read from (its handle sets it at its first read).
    last_read: Arc<AtomicBool>,
    /// The listing's files after it, being opened ahead, and their inodes in that order.
    ahead: Option<(OpenMany, VecDeque<u64>)>,
}

/// An open file of the mount.
#[derive(Clone)]
struct Handle {
    file: Arc<File>,
    /// Set at the handle's first read: its directory's [`InTurn::last_read`] while it is the
    /// last file opened there.
    read: Arc<AtomicBool>,
}

/// What the mount counts beside the engine's statistics.
#[derive(Default, serde::Serialize)]
pub(crate) struct MountCounters {
    pub(crate) lookups: AtomicU64,
    pub(crate) listings: AtomicU64,
    pub(crate) opens: AtomicU64,
    pub(crate) open_handles: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) read_errors: AtomicU64,
    /// Opens that found their file opened ahead (a directory's files read in turn).
    pub(crate) opened_ahead: AtomicU64,
    /// The kernel's readahead on the mount's files as set after mounting (its bdi's
    /// `read_ahead_kb`), in bytes: the largest read FUSE sends in order. 0 where unknown.
    pub(crate) kernel_readahead_bytes: AtomicU64,
}

/// The mounted filesystem.
pub(crate) struct AheadFs {
    engine: Engine,
    /// Where the names come from a manifest rather than the source's listings (an HTTP
    /// server has none): each directory's full name (ending `/`) and its children, each a
    /// name and whether it is a directory.
    manifest: Option<Manifest>,
    /// The source's root as given (`s3://bucket/prefix/`, a local directory).
    root_name: String,
    names: Mutex<Names>,
    files: Mutex<HashMap<u64, Handle>>,
    dirs: Mutex<HashMap<u64, Children>>,
    /// Each directory's files as programs open them: see "Files read in turn" above.
    in_turn: Mutex<HashMap<u64, Arc<Mutex<InTurn>>>>,
    next_handle: AtomicU64,
    pub(crate) counters: Arc<MountCounters>,
    uid: u32,
    gid: u32,
    started: SystemTime,
}

/// The errno for `e` (its own where the OS gave one).
fn errno_of(e: &io::Error) -> Errno {
    match e.raw_os_error() {
        Some(code) => Errno::from_i32(code),
        None => match e.kind() {
            io::ErrorKind::NotFound => Errno::ENOENT,
            io::ErrorKind::PermissionDenied => Errno::EACCES,
            io::ErrorKind::IsADirectory => Errno::EISDIR,
            io::ErrorKind::InvalidInput => Errno::EINVAL,
            _ => Errno::EIO,
        },
    }
}

/// The last part of `name` (a path or a URL; a prefix's trailing `/` dropped).
fn base_name(name: &str) -> &str {
    let name = name.trim_end_matches('/');
    name.rsplit('/').next().unwrap_or(name)
}

/// The directory named `dir`, ending `/` (as a manifest's tree keys it).
fn dir_key(dir: &str) -> String {
    if dir.ends_with('/') {
        dir.to_string()
    } else {
        format!("{dir}/")
    }
}

/// The name of `child` under the directory named `dir`.
fn child_name(dir: &str, child: &str) -> String {
    format!("{}{child}", dir_key(dir))
}

impl AheadFs {
    /// The tree of `root` (a directory or a prefix, as `engine.stat` found it), its names
    /// listed by the source or, where given, by `manifest`.
    pub(crate) fn new(engine: Engine, root: Entry, manifest: Option<Manifest>) -> AheadFs {
        let mut names = Names {
            next: FIRST_INO,
            ..Names::default()
        };
        let root_name = root.name.clone();
        names.by_name.insert(root.name.clone(), ROOT);
        names.nodes.insert(
            ROOT,
            Node {
                entry: root,
                listed: None,
            },
        );
        AheadFs {
            engine,
            manifest,
            root_name,
            names: Mutex::new(names),
            files: Mutex::default(),
            dirs: Mutex::default(),
            in_turn: Mutex::default(),
            next_handle: AtomicU64::new(1),
            counters: Arc::default(),
            // SAFETY: getuid and getgid cannot fail.
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
            started: SystemTime::now(),
        }
    }

    /// The engine's statistics and the mount's counters, as JSON text.
    pub(crate) fn stats_json(&self) -> String {
        stats_json(&self.engine, &self.counters, &self.root_name)
    }

    fn attr(&self, ino: u64, entry: &Entry) -> FileAttr {
        let mtime = if entry.modified_ns > 0 {
            UNIX_EPOCH + Duration::from_nanos(entry.modified_ns as u64)
        } else {
            self.started
        };
        self.attr_of(ino, entry.is_dir, entry.size, mtime)
    }

    fn attr_of(&self, ino: u64, is_dir: bool, size: u64, mtime: SystemTime) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind: if is_dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if is_dir { 0o555 } else { 0o444 },
            nlink: if is_dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 1 << 20,
        }
    }

    fn stats_attr(&self, ino: u64) -> FileAttr {
        match ino {
            STATS_DIR_INO => self.attr_of(ino, true, 0, self.started),
            _ => self.attr_of(
                ino,
                false,
                self.stats_json().len() as u64,
                SystemTime::now(),
            ),
        }
    }

    /// `dir`'s children, from its listing if that is recent, else listed now.
    fn children(&self, dir: u64) -> io::Result<Children> {
        let name = {
            let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            let node = names
                .nodes
                .get(&dir)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
            if !node.entry.is_dir {
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            if let Some((at, children)) = &node.listed {
                if at.elapsed() < LISTING_TTL {
                    return Ok(children.clone());
                }
            }
            node.entry.name.clone()
        };
        // Listed without the lock held: a listing is a round trip or more.
        self.counters.listings.fetch_add(1, Ordering::Relaxed);
        let listed = self.list(&name)?;
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let children: Vec<(OsString, u64)> = listed
            .into_iter()
            // A listing of a prefix may name the prefix itself (an S3 "directory marker").
            .filter(|e| e.name.trim_end_matches('/') != name.trim_end_matches('/'))
            .map(|e| (OsString::from(base_name(&e.name)), e))
            .filter(|(base, _)| !base.is_empty())
            .map(|(base, e)| (base, names.number(e)))
            .collect();
        let children = Arc::new(children);
        if let Some(node) = names.nodes.get_mut(&dir) {
            node.listed = Some((Instant::now(), children.clone()));
        }
        Ok(children)
    }

    /// What is under the directory `name`: the source's listing, or the manifest's names, each
    /// file stated (HEADs, [`STATS_AT_ONCE`] at a time).
    fn list(&self, name: &str) -> io::Result<Vec<Entry>> {
        let Some(manifest) = &self.manifest else {
            return self.engine.list(name);
        };
        let key = dir_key(name);
        let children = manifest.get(&key).map(Vec::as_slice).unwrap_or_default();
        let mut out = Vec::with_capacity(children.len());
        for batch in children.chunks(STATS_AT_ONCE) {
            let stated: Vec<io::Result<Entry>> = std::thread::scope(|s| {
                let handles: Vec<_> = batch
                    .iter()
                    .map(|(child, is_dir)| {
                        let full = format!("{key}{child}");
                        s.spawn(move || match is_dir {
                            true => Ok(Entry {
                                name: format!("{full}/"),
                                size: 0,
                                is_dir: true,
                                e_tag: None,
                                modified_ns: 0,
                            }),
                            false => self.engine.stat(&full),
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(io::Error::other("a stat panicked")))
                    })
                    .collect()
            });
            for entry in stated {
                match entry {
                    Ok(entry) => out.push(entry),
                    // A name of the manifest the server does not have: left out, said once.
                    Err(e) => eprintln!("ahead mount: {e}"),
                }
            }
        }
        Ok(out)
    }

    /// Whether `child` is a name under the directory `dir` (always, without a manifest).
    fn named(&self, dir: &str, child: &str) -> bool {
        let Some(manifest) = &self.manifest else {
            return true;
        };
        manifest
            .get(&dir_key(dir))
            .is_some_and(|c| c.iter().any(|(name, _)| name == child))
    }

    /// The parent directory of `entry` and its recent listing, if there is one.
    fn parent_listing(&self, entry: &Entry) -> Option<(u64, Children)> {
        let name = entry.name.trim_end_matches('/');
        let parent = &name[..name.rfind('/')?];
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let dir = *names
            .by_name
            .get(parent)
            .or_else(|| names.by_name.get(&dir_key(parent)))?;
        let (at, children) = names.nodes.get(&dir)?.listed.as_ref()?;
        (at.elapsed() < LISTING_TTL).then(|| (dir, children.clone()))
    }

    /// `ino`'s file if it was opened ahead as the next of its directory's files read in turn;
    /// and, where this open is the second of two in the listing's order and the first was
    /// read from before it, the rest opened ahead from here (see the module comment). None:
    /// open it as usual. `read` is the new handle's flag of its first read.
    fn open_in_turn(&self, ino: u64, entry: &Entry, read: &Arc<AtomicBool>) -> Option<File> {
        let (dir, children) = self.parent_listing(entry)?;
        let place = children.iter().position(|&(_, i)| i == ino)?;
        let state = self
            .in_turn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(dir)
            .or_default()
            .clone();
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = None;
        if let Some((files, inos)) = &mut state.ahead {
            if inos.front() == Some(&ino) {
                inos.pop_front();
                taken = files.next().and_then(Result::ok);
            } else {
                // Another file than the next: the files opened ahead are let go.
                state.ahead = None;
            }
        }
        // Opened one after the other and read in turn: a program holding many files open at
        // once (opened in the listing's order, read later, at random) opens nothing ahead.
        let in_order = state.last.is_some_and(|last| last + 1 == place)
            && state.last_read.load(Ordering::Relaxed);
        state.last = Some(place);
        state.last_read = read.clone();
        if in_order && state.ahead.is_none() {
            let rest: Vec<(String, u64)> = {
                let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
                children[place + 1..]
                    .iter()
                    .filter_map(|&(_, i)| {
                        let e = &names.nodes.get(&i)?.entry;
                        (!e.is_dir).then(|| (e.name.clone(), i))
                    })
                    .collect()
            };
            if !rest.is_empty() {
                let inos = rest.iter().map(|&(_, i)| i).collect();
                let files = self.engine.open_many(rest.into_iter().map(|(n, _)| n));
                state.ahead = Some((files, inos));
            }
        }
        // The file opened ahead must be the one asked for, at the version the listing saw
        // (the open pins that one: a changed object is then the read's EIO, as ever), and the
        // size the kernel was told; else it is opened anew.
        taken.filter(|f| {
            let same_version = match (f.pinned_entry(), &entry.e_tag) {
                (Some(pinned), Some(tag)) => pinned.e_tag.as_ref() == Some(tag),
                (Some(pinned), None) => pinned.modified_ns == entry.modified_ns,
                (None, _) => true,
            };
            f.path().to_string_lossy() == entry.name && f.len() == entry.size && same_version
        })
    }

    fn entry_of(&self, ino: u64) -> Option<Entry> {
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names.nodes.get(&ino).map(|n| n.entry.clone())
    }

    /// `name` under `parent`: from the parent's recent listing, or a stat of its own.
    fn look_up(&self, parent: u64, name: &OsStr) -> io::Result<(u64, Entry)> {
        let (parent_name, recent) = {
            let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            let node = names
                .nodes
                .get(&parent)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
            let recent = node
                .listed
                .as_ref()
                .filter(|(at, _)| at.elapsed() < LISTING_TTL)
                .map(|(_, c)| c.clone());
            (node.entry.name.clone(), recent)
        };
        if let Some(children) = recent {
            return match children.iter().find(|(n, _)| n == name) {
                Some(&(_, ino)) => Ok((ino, self.entry_of(ino).expect("listed names have nodes"))),
                None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            };
        }
        let text = name
            .to_str()
            .filter(|text| self.named(&parent_name, text))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let entry = self.engine.stat(child_name(&parent_name, text))?;
        let ino = self
            .names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .number(entry.clone());
        Ok((ino, entry))
    }

    /// Read `size` bytes at `offset` of `file` (fewer at its end) into `buf`, looped until
    /// done or the end; the bytes read.
    fn read_file(
        &self,
        file: &File,
        offset: u64,
        size: usize,
        buf: &mut Vec<u8>,
    ) -> io::Result<usize> {
        let len = file.len();
        let want = (size as u64).min(len.saturating_sub(offset)) as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let mut done = 0;
        while done < want {
            let n = file.read_at(&mut buf[done..want], offset + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }
}

thread_local! {
    /// A session thread's buffer for the bytes of a read's reply, kept between reads: a fresh
    /// one a read (up to FUSE's largest, 1 MiB) was zeroed and faulted in every time.
    static REPLY_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The engine's statistics and a mount's counters, as the stats file holds them.
pub(crate) fn stats_json(engine: &Engine, counters: &MountCounters, source: &str) -> String {
    let value = serde_json::json!({
        "source": source,
        "mount": counters,
        "engine": engine.stats(),
    });
    let mut text = serde_json::to_string_pretty(&value).expect("stats serialize");
    text.push('\n');
    text
}

impl Filesystem for AheadFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // The kernel offers its default for a new mount (128 KiB) as the most, and keeps the
        // lesser; the mount's read_ahead_kb, set after this handshake (mod.rs), raises it.
        let _ = config.set_max_readahead(KERNEL_READAHEAD_BYTES);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.counters.lookups.fetch_add(1, Ordering::Relaxed);
        let parent = u64::from(parent);
        if parent == ROOT && name == STATS_DIR {
            return reply.entry(
                &Duration::ZERO,
                &self.stats_attr(STATS_DIR_INO),
                Generation(0),
            );
        }
        if parent == STATS_DIR_INO {
            return match name == STATS_FILE {
                true => reply.entry(
                    &Duration::ZERO,
                    &self.stats_attr(STATS_FILE_INO),
                    Generation(0),
                ),
                false => reply.error(Errno::ENOENT),
            };
        }
        match self.look_up(parent, name) {
            Ok((ino, entry)) => reply.entry(&LISTING_TTL, &self.attr(ino, &entry), Generation(0)),
            Err(e) => {
                if e.kind() != io::ErrorKind::NotFound && e.raw_os_error() != Some(libc::ENOENT) {
                    eprintln!("ahead mount: lookup of {}: {e}", name.to_string_lossy());
                }
                reply.error(errno_of(&e))
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let ino = u64::from(ino);
        if ino == STATS_DIR_INO || ino == STATS_FILE_INO {
            return reply.attr(&Duration::ZERO, &self.stats_attr(ino));
        }
        match self.entry_of(ino) {
            Some(entry) => reply.attr(&LISTING_TTL, &self.attr(ino, &entry)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        let ino = u64::from(ino);
        if ino == STATS_FILE_INO {
            // Its size changes with every read of it: read as a stream, past the kernel's cache.
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
        }
        let Some(entry) = self.entry_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        self.counters.opens.fetch_add(1, Ordering::Relaxed);
        let read = Arc::new(AtomicBool::new(false));
        let opened = match self.open_in_turn(ino, &entry, &read) {
            Some(file) => {
                self.counters.opened_ahead.fetch_add(1, Ordering::Relaxed);
                Ok(file)
            }
            None => self.engine.open_entry(&entry),
        };
        match opened {
            Ok(file) => {
                let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
                self.files.lock().unwrap_or_else(|e| e.into_inner()).insert(
                    fh,
                    Handle {
                        file: Arc::new(file),
                        read,
                    },
                );
                self.counters.open_handles.fetch_add(1, Ordering::Relaxed);
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => {
                eprintln!("ahead mount: open: {e}");
                reply.error(errno_of(&e))
            }
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if u64::from(ino) == STATS_FILE_INO {
            let text = self.stats_json();
            let bytes = text.as_bytes();
            let from = (offset as usize).min(bytes.len());
            let to = (from + size as usize).min(bytes.len());
            return reply.data(&bytes[from..to]);
        }
        let handle = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&u64::from(fh))
            .cloned();
        let Some(Handle { file, read }) = handle else {
            return reply.error(Errno::EBADF);
        };
        read.store(true, Ordering::Relaxed);
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        REPLY_BUF.with_borrow_mut(
            |buf| match self.read_file(&file, offset, size as usize, buf) {
                Ok(n) => {
                    self.counters
                        .bytes_read
                        .fetch_add(n as u64, Ordering::Relaxed);
                    reply.data(&buf[..n])
                }
                Err(e) => {
                    self.counters.read_errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("ahead mount: read of {} bytes at {offset}: {e}", size);
                    reply.error(errno_of(&e))
                }
            },
        )
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let removed = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&u64::from(fh));
        if removed.is_some() {
            self.counters.open_handles.fetch_sub(1, Ordering::Relaxed);
        }
        reply.ok()
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let ino = u64::from(ino);
        let children = if ino == STATS_DIR_INO {
            Ok(Arc::new(vec![(OsString::from(STATS_FILE), STATS_FILE_INO)]))
        } else {
            self.children(ino)
        };
        match children {
            Ok(children) => {
                let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
                self.dirs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(fh, children);
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => {
                eprintln!("ahead mount: list: {e}");
                reply.error(errno_of(&e))
            }
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let children = self
            .dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&u64::from(fh))
            .cloned();
        let Some(children) = children else {
            return reply.error(Errno::EBADF);
        };
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let kind_of = |child: u64| match child {
            STATS_DIR_INO => FileType::Directory,
            STATS_FILE_INO => FileType::RegularFile,
            _ => match names.nodes.get(&child).is_some_and(|n| n.entry.is_dir) {
                true => FileType::Directory,
                false => FileType::RegularFile,
            },
        };
        let ino = u64::from(ino);
        let mut all: Vec<(u64, FileType, &OsStr)> = vec![
            (ino, FileType::Directory, OsStr::new(".")),
            (ROOT, FileType::Directory, OsStr::new("..")),
        ];
        all.extend(
            children
                .iter()
                .map(|(n, c)| (*c, kind_of(*c), n.as_os_str())),
        );
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&u64::from(fh));
        reply.ok()
    }
}
