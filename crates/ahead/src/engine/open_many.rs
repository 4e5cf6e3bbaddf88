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
//! the half was taken is asked for the rest as the files before it close, the nearest first:
//! room freed goes to no file while one before it in the list still waits for its part, so
//! a later open that finishes first cannot take the room the reader's next file needs),
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

use std::collections::{BTreeSet, VecDeque};
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
    /// What the list's files opened ahead share: see [`Room`].
    room: Arc<Room>,
    /// The list position of the next file opened.
    next_place: usize,
}

/// The readahead half of the cache as the files of one list take their first bytes from it:
/// bytes asked for in files still open (given back as each closes), and, by list position, the
/// files opened (or being opened) ahead that wait for part of theirs. Room goes to the
/// nearest of those first.
#[derive(Debug, Default)]
pub(super) struct Room {
    held: AtomicU64,
    waiting: Mutex<BTreeSet<usize>>,
}

impl Room {
    fn waiting(&self) -> std::sync::MutexGuard<'_, BTreeSet<usize>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// File `place` of the list no longer waits (it has all it asks, or its reader has it).
    fn served(&self, place: usize) {
        self.waiting().remove(&place);
    }

    /// Up to `want` more bytes of the readahead half (`half` bytes) for file `place`, if no
    /// file before it in the list waits: the bytes it may ask for now (0 if none). Once it has
    /// all it wants, it waits no more.
    fn take(&self, place: usize, want: u64, half: u64) -> u64 {
        let mut waiting = self.waiting();
        if want == 0 {
            waiting.remove(&place);
            return 0;
        }
        if waiting.range(..place).next().is_some() {
            // A file before it still waits for its part: that one is read sooner.
            return 0;
        }
        let mut more = 0;
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| {
                more = want.min(half.saturating_sub(taken));
                Some(taken + more)
            });
        if more >= want {
            waiting.remove(&place);
        }
        more
    }
}

/// A file's first bytes asked for ahead of its reader: how many, and where it stands in its
/// list's [`Room`].
#[derive(Debug)]
pub(super) struct AskedAhead {
    asked: u64,
    place: usize,
    room: Arc<Room>,
}

impl AskedAhead {
    /// The file closes: what it asked goes back to the room, and it waits no more.
    pub(super) fn give_back(&self) {
        self.room.held.fetch_sub(self.asked, Ordering::Relaxed);
        self.room.served(self.place);
    }
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
            room: Arc::new(Room::default()),
            next_place: 0,
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
            let file = self.open_from_start(path.as_ref());
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
            will_need(
                file,
                0,
                file.len().min(share).min(first_bytes_of_a_scan(file)),
            )?;
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
            let (ahead, room, place) = (path.clone(), self.room.clone(), self.next_place);
            self.next_place += 1;
            // It waits for its first bytes from now: nothing after it in the list takes room
            // before it has its part.
            self.room.waiting().insert(place);
            let started = std::thread::Builder::new()
                .name("ahead-open".into())
                .spawn(move || open_and_ask_first(&engine, &ahead, room, place));
            match started {
                Ok(handle) => self.opening.push_back(Opening::Ahead(handle)),
                Err(_) => {
                    self.room.served(place);
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
/// early ones' first bytes evicted before it comes back to them), and only once no file before
/// it in the list waits for room. `place` is its position in the list.
fn open_and_ask_first(
    engine: &Engine,
    path: &Path,
    room: Arc<Room>,
    place: usize,
) -> io::Result<File> {
    let mut file = match engine.open_from_start(path) {
        Ok(file) => file,
        Err(e) => {
            room.served(place);
            return Err(e);
        }
    };
    engine.inner.activate(&file.activity);
    file.opened_ahead = Some(AskedAhead {
        asked: 0,
        place,
        room,
    });
    ask_rest_of_first(&mut file)?;
    Ok(file)
}

/// Ask file's policy for the part of its first bytes not asked for yet (see
/// [`open_and_ask_first`]), as far as the readahead half of the cache has room after the first
/// bytes of the list's files still open, and only if no file before it in the list waits for
/// room (the nearest first). A file opened while that half was taken gets the rest once the
/// files before it close: [`OpenMany::next`] asks again for those opened ahead.
fn ask_rest_of_first(file: &mut File) -> io::Result<()> {
    let parts = &file.engine;
    let share = parts.budget_pages.load(Ordering::Relaxed) * PAGE_SIZE;
    let half = parts.core.cache.slots() as u64 * PAGE_SIZE / 2;
    let part = file
        .len()
        .min(share.max(half / OPENS_AHEAD as u64))
        .min(first_bytes_of_a_scan(file));
    let Some(ahead) = file.opened_ahead.as_mut() else {
        return Ok(());
    };
    let asked = ahead.asked;
    let more = ahead
        .room
        .take(ahead.place, part.saturating_sub(asked), half);
    ahead.asked += more;
    will_need(file, asked, more)
}

/// The most of a file's first bytes to ask for: a file read through a ring (larger than a
/// quarter of the cache, `cache.rs` "Drop-behind") gets what keeps its device busy, four
/// times over and 8 MiB at least, and its policy's windows take it from there; asked for its
/// whole share, it would hold that much memory before its reader used a page of it, whatever
/// its ring. Any other file, its whole share.
fn first_bytes_of_a_scan(file: &File) -> u64 {
    if !file.data.table.bulk() {
        return u64::MAX;
    }
    (4 * file.device_estimate().inflight_pages() * PAGE_SIZE).max(8 << 20)
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
        let file = match next {
            // Still opening when asked above: once open, it asks for the rest itself.
            Opening::Ahead(thread) => joined(thread).map(|mut file| {
                let _ = ask_rest_of_first(&mut file);
                file
            }),
            Opening::Ready(file) => file,
            Opening::Later(path) => self.engine.open_from_start(path.as_ref()),
        };
        // Its reader has it now, and reads what it has not been given: the files behind it
        // wait for it no longer.
        if let Ok(File {
            opened_ahead: Some(ahead),
            ..
        }) = &file
        {
            self.room.served(ahead.place);
        }
        // A file that failed to open waits for nothing either (its thread said so).
        Some(file)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Room freed goes to the nearest file waiting, not to a later one whose open finished
    /// first (the race that left the reader's next file with nothing asked, and its first
    /// read waiting on a request of its own).
    #[test]
    fn room_goes_to_the_nearest_file_waiting_first() {
        let room = Arc::new(Room::default());
        for place in 0..3 {
            room.waiting().insert(place);
        }
        // Files 0 and 1 take the half between them; 2 finds none.
        assert_eq!(room.take(0, 60, 100), 60);
        assert_eq!(room.take(1, 60, 100), 40);
        assert_eq!(room.take(2, 60, 100), 0);
        // File 0 closes: 60 bytes are free, but file 1 still waits for 20 of its part, so file
        // 2 (its open done first) gets nothing yet.
        AskedAhead {
            asked: 60,
            place: 0,
            room: room.clone(),
        }
        .give_back();
        assert_eq!(room.take(2, 60, 100), 0);
        assert_eq!(room.take(1, 20, 100), 20);
        // File 1 has its part: file 2 takes what is left.
        assert_eq!(room.take(2, 60, 100), 40);
        // Handed to its reader, file 2 waits no more, whatever it lacks.
        room.served(2);
        assert!(room.waiting().is_empty());
    }
}
