//! `open_many`: files or objects that will be read in turn, opened ahead of the reader.
//!
//! A reader going through many objects (a dataset's files, the runs of a merge, shards of a
//! model) pays two round trips per object before its policy has seen a read: the open (a HEAD
//! for the size and version) and the first read's GET. At 20 ms each way and 8 MiB objects
//! that is 80 ms of waiting against about 25 ms of transfer, whatever the readahead: no
//! policy can read ahead into an object nobody has named yet. Told the list, the engine can.
//! [`Engine::open_many`] yields the files in the list's order; behind the one the reader holds,
//! up to [`OPENS_AHEAD`] more are being opened, each on its own thread (the opens' round
//! trips overlap), and each, once open, is asked for its first bytes
//! ([`Advice::WillNeed`] from its start: the file's share of the readahead budget, or all of
//! it if smaller), so the reader's first read finds them on their way or in. The first bytes
//! asked for the list's files still open stay within the readahead half of the cache: a
//! reader that closes each file before the next gets every one's share (a file opened while
//! the half was taken is asked for the rest as the files before it close, the nearest first),
//! one that holds them all (a merge) gets first bytes for as many as fit, and the rest are
//! read on demand.
//!
//! What is read ahead is the policy's to decide, as for any `WillNeed`: `none` ignores it (the
//! opens still overlap), `linux-ondemand` reads it as the kernel's `fadvise` does. The pages
//! live in the cache under the budget like any other, and the file's budget share shrinks with
//! every handle open, those opened ahead included, so many opens ahead cannot take more than
//! the readahead half of the cache between them. An error opening one (a missing object)
//! comes out at its place in the order, as its own `open` would have; the files before it are
//! not disturbed. Dropping the iterator lets the opens under way finish on their threads and
//! closes what they opened (their pages stay cached for a later open of the same version).
//!
//! A reader that holds every file of the list open at once and reads them together (a merge)
//! says so with [`Engine::open_all`]: the files are opened [`OPENS_AT_ONCE`] at a time, and only
//! once all are open is each asked for its first bytes, its share of the budget with all of
//! them open, so the early ones do not take the memory the later ones need.
//!
//! Built for readers that read each file from its start. One that reads elsewhere first (a
//! Parquet footer) gains the overlapped opens, and spends a first window per file it may not
//! read.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::thread::JoinHandle;

use super::*;

/// Files being opened (and asked for their first bytes) ahead of the one the reader holds:
/// about the GETs in parallel at which an object store's link gives its best (the remote
/// bench's device sweep peaks at 16 to 32).
pub const OPENS_AHEAD: usize = 16;

/// Opens under way at once in [`Engine::open_all`]: a reader holding every file waits for the
/// last open, so all of a merge's opens overlap (an open is a HEAD, not a transfer: they cost
/// the link next to nothing beside one another).
pub const OPENS_AT_ONCE: usize = 64;

/// The files of a list, in its order, opened ahead of the reader: see [`Engine::open_many`].
pub struct OpenMany {
    engine: Engine,
    waiting: VecDeque<PathBuf>,
    opening: VecDeque<Opening>,
    /// Bytes asked for ahead in files of this list still open (given back as each closes).
    held: Arc<AtomicU64>,
}

/// One file of the list past the reader's.
enum Opening {
    /// Being opened on a thread of its own.
    Ahead(JoinHandle<io::Result<File>>),
    /// Opened (or failed), waiting for the reader; asked for what of its first bytes the
    /// readahead half of the cache had room for.
    Ready(io::Result<File>),
    /// No thread could be had: the reader opens it when it comes to it.
    Later(PathBuf),
}

impl Engine {
    /// Open `paths` in the order given, for a reader that reads them in turn (or all at once,
    /// collected): behind the file the reader takes, up to [`OPENS_AHEAD`] more are opened on
    /// threads of their own and asked for their first bytes (see the module comment in
    /// `engine/open_many.rs`). Each item is what [`Engine::open`] would have returned for it.
    pub fn open_many<P: Into<PathBuf>>(&self, paths: impl IntoIterator<Item = P>) -> OpenMany {
        let mut many = OpenMany {
            engine: self.clone(),
            waiting: paths.into_iter().map(Into::into).collect(),
            opening: VecDeque::new(),
            held: Arc::new(AtomicU64::new(0)),
        };
        many.fill();
        many
    }

    /// Open every one of `paths` at once, for a reader that holds them all and reads them
    /// together (a merge): up to [`OPENS_AT_ONCE`] opens at a time, each on a thread of its own, then
    /// every file asked for its first bytes (its share of the budget with all of them open).
    /// The first error (in the list's order) is returned, and the files opened are closed.
    ///
    /// # Errors
    /// The first open's error in the list's order, as [`Engine::open`] gives it.
    pub fn open_all<P: Into<PathBuf>>(
        &self,
        paths: impl IntoIterator<Item = P>,
    ) -> io::Result<Vec<File>> {
        let paths: Vec<PathBuf> = paths.into_iter().map(Into::into).collect();
        let next = AtomicUsize::new(0);
        let opened: Mutex<Vec<(usize, io::Result<File>)>> = Mutex::new(Vec::new());
        let open_next = || loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(path) = paths.get(at) else { return };
            let file = self.open(path);
            opened
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((at, file));
        };
        std::thread::scope(|s| {
            // Threads that cannot be had leave their share to the others and to this one.
            for _ in 1..paths.len().min(OPENS_AT_ONCE) {
                let _ = std::thread::Builder::new()
                    .name("ahead-open".into())
                    .spawn_scoped(s, open_next);
            }
            open_next();
        });
        let mut opened = opened.into_inner().unwrap_or_else(|e| e.into_inner());
        opened.sort_unstable_by_key(|&(at, _)| at);
        let files = opened
            .into_iter()
            .map(|(_, file)| file)
            .collect::<io::Result<Vec<File>>>()?;
        // Opened to be read at once: all in the budget's shares before any asks for its part.
        for file in &files {
            self.inner.activate(&file.activity);
        }
        let share = self.inner.budget_pages.load(Ordering::Relaxed) * PAGE_SIZE;
        for file in &files {
            will_need(file, 0, file.len().min(share))?;
        }
        Ok(files)
    }
}

impl OpenMany {
    /// Start opens until [`OPENS_AHEAD`] are under way or the list is done.
    fn fill(&mut self) {
        while self.opening.len() < OPENS_AHEAD {
            let Some(path) = self.waiting.pop_front() else {
                return;
            };
            let engine = self.engine.clone();
            let (ahead, held) = (path.clone(), self.held.clone());
            let started = std::thread::Builder::new()
                .name("ahead-open".into())
                .spawn(move || open_and_ask_first(&engine, &ahead, held));
            match started {
                Ok(handle) => self.opening.push_back(Opening::Ahead(handle)),
                Err(_) => {
                    self.opening.push_back(Opening::Later(path));
                    return;
                }
            }
        }
    }

    /// Files not yet taken, opened or not.
    pub fn remaining(&self) -> usize {
        self.waiting.len() + self.opening.len()
    }

    /// The files opened ahead, in order, asked for the rest of their first bytes: the reader
    /// has closed a file since (its part is back in the readahead half), and without this a
    /// file opened while the half was taken would wait for its reader with nothing asked,
    /// and ramp from a miss. (Errors are left for the reader: an advice that fails is a
    /// read that will.)
    fn ask_rest_ahead(&mut self) {
        for opening in self.opening.iter_mut() {
            if let Opening::Ahead(thread) = opening {
                if !thread.is_finished() {
                    // Still opening: it asks for itself once open, before the files behind it.
                    break;
                }
                let placeholder = Opening::Ready(Err(io::Error::other("taking a finished open")));
                if let Opening::Ahead(thread) = std::mem::replace(opening, placeholder) {
                    *opening = Opening::Ready(joined(thread));
                }
            }
            if let Opening::Ready(Ok(file)) = opening {
                let _ = ask_rest_of_first(file);
            }
        }
    }
}

/// The file an open ahead's thread opened.
fn joined(thread: JoinHandle<io::Result<File>>) -> io::Result<File> {
    thread
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("an open ahead panicked")))
}

/// Open `path` and ask its policy for its first bytes: the file's share of the budget (or its
/// part of the readahead half of the cache split [`OPENS_AHEAD`] ways, if more), within what
/// is left of the readahead half of the cache after the first bytes asked for the list's
/// files still open (a reader holding all of them, as a merge does, would otherwise see the
/// early ones' first bytes evicted before it comes back to them).
fn open_and_ask_first(engine: &Engine, path: &Path, held: Arc<AtomicU64>) -> io::Result<File> {
    let mut file = engine.open(path)?;
    engine.inner.activate(&file.activity);
    file.opened_ahead = Some((0, held));
    ask_rest_of_first(&mut file)?;
    Ok(file)
}

/// Ask file's policy for the part of its first bytes not asked for yet (see
/// [`open_and_ask_first`]), as far as the readahead half of the cache has room after the first
/// bytes of the list's files still open. A file opened while that half was taken gets the rest
/// once the files before it close: [`OpenMany::next`] asks again for those opened ahead.
fn ask_rest_of_first(file: &mut File) -> io::Result<()> {
    let Some((asked, held)) = file.opened_ahead.take() else {
        return Ok(());
    };
    let parts = &file.engine;
    let share = parts.budget_pages.load(Ordering::Relaxed) * PAGE_SIZE;
    let half = parts.core.cache.slots() as u64 * PAGE_SIZE / 2;
    let part = file.len().min(share.max(half / OPENS_AHEAD as u64));
    let mut more = 0;
    if asked < part {
        let _ = held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| {
            more = (part - asked).min(half.saturating_sub(taken));
            Some(taken + more)
        });
    }
    file.opened_ahead = Some((asked + more, held));
    will_need(file, asked, more)
}

/// Tell `file`'s policy that `bytes` from `offset` will be needed (nothing if 0).
fn will_need(file: &File, offset: u64, bytes: u64) -> io::Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    file.advise(Advice::WillNeed { offset, len: bytes })
}

impl Iterator for OpenMany {
    type Item = io::Result<File>;

    fn next(&mut self) -> Option<io::Result<File>> {
        // The file handed out now first, then those behind it: the nearest read gets the room.
        self.ask_rest_ahead();
        let next = self.opening.pop_front()?;
        self.fill();
        Some(match next {
            // Still opening when asked above: once open, it asks for the rest itself.
            Opening::Ahead(thread) => joined(thread).map(|mut file| {
                let _ = ask_rest_of_first(&mut file);
                file
            }),
            Opening::Ready(file) => file,
            Opening::Later(path) => self.engine.open(path),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining(), Some(self.remaining()))
    }
}

impl ExactSizeIterator for OpenMany {}

impl std::fmt::Debug for OpenMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenMany")
            .field("opening", &self.opening.len())
            .field("waiting", &self.waiting.len())
            .finish()
    }
}
