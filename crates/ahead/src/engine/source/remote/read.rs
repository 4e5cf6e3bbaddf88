//! Ranged reads: one object, pinned to the version opened, read in GETs (a reader's wait
//! split into parallel parts), every answer checked against the version and size opened.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// One object, pinned to the version opened.
pub(super) struct RemoteSource {
    pub(super) name: PathBuf,
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) location: ObjectPath,
    pub(super) size: u64,
    pub(super) e_tag: Option<String>,
    /// Last-Modified at open, in ns (0: the server gave none).
    pub(super) last_modified_ns: i64,
    /// Why a change may go unseen: neither ETag nor Last-Modified to pin.
    pub(super) unpinned: Option<String>,
    /// How its GETs go.
    pub(super) reading: Reading,
    /// What its store's connections give, measured on every GET.
    pub(super) link: Arc<LinkRate>,
    /// The object's last bytes, fetched by the GET that opened it: the first read takes
    /// them, and is answered from them if it lies within (see `open_object_as`).
    pub(super) tail: Mutex<Option<Tail>>,
}

/// How many of an object's last bytes the open fetches: pyarrow's first read of a Parquet
/// file (its footer, the last 64 KiB) in whole pages, or all of a smaller object.
pub(super) const TAIL_BYTES: u64 = (64 << 10) + PAGE_SIZE;

/// The most bytes of tails held, by all objects opened and not yet read (outside the
/// engine's budget); past it, an open asks for the metadata alone (a HEAD).
const MOST_TAIL_BYTES_HELD: u64 = 4 << 20;

/// Bytes of tails held now, in the whole process.
static TAIL_BYTES_HELD: AtomicU64 = AtomicU64::new(0);

/// An object's last bytes, `bytes` from byte `start` on, of the version opened.
pub(super) struct Tail {
    pub(super) start: u64,
    pub(super) bytes: bytes::Bytes,
    pub(super) _held: TailHeld,
}

/// [`TAIL_BYTES`] counted in [`TAIL_BYTES_HELD`] until dropped.
pub(super) struct TailHeld(());

impl TailHeld {
    /// Room for a tail, if the tails held leave it.
    pub(super) fn reserve() -> Option<TailHeld> {
        TAIL_BYTES_HELD
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                (held + TAIL_BYTES <= MOST_TAIL_BYTES_HELD).then_some(held + TAIL_BYTES)
            })
            .ok()
            .map(|_| TailHeld(()))
    }
}

impl Drop for TailHeld {
    fn drop(&mut self) {
        TAIL_BYTES_HELD.fetch_sub(TAIL_BYTES, Ordering::Relaxed);
    }
}

/// Where a GET's body goes: each piece at its offset from the read's start. Called on the
/// runtime's threads as pieces arrive, by the parts of one read at once (their ranges are
/// disjoint), so it is `Sync`.
pub(super) type Sink<'a> = dyn Fn(u64, &[u8]) + Sync + 'a;

/// A [`Sink`] lent to the GETs' tasks, which the runtime wants `'static`. Sound because
/// [`RemoteSource::get`] does not return before every task holding it has ended (see there).
#[derive(Clone, Copy)]
struct LentSink(*const Sink<'static>);

// SAFETY: a `Sink` is `Sync`; the pointer is only dereferenced while `get` waits for the tasks.
unsafe impl Send for LentSink {}
unsafe impl Sync for LentSink {}

impl LentSink {
    fn lend(sink: &Sink<'_>) -> LentSink {
        // SAFETY: only the lifetime is erased; see the type's comment for why it holds.
        LentSink(unsafe { std::mem::transmute::<*const Sink<'_>, *const Sink<'static>>(sink) })
    }

    /// # Safety
    /// Only while the `get` that lent it waits.
    unsafe fn put(self, at: u64, piece: &[u8]) {
        unsafe { (*self.0)(at, piece) }
    }
}

/// The version an object was opened at, which every answer must be.
#[derive(Clone)]
struct Opened {
    size: u64,
    e_tag: Option<String>,
    last_modified_ns: i64,
}

impl Opened {
    /// Whether an answer of `size` bytes with `e_tag` and `last_modified_ns` is of another
    /// version than this one: its size, or its ETag where both have one, or else its
    /// Last-Modified where both have one (an answer without the ETag its listing gave is
    /// still held to the time).
    fn changed(&self, e_tag: &Option<String>, size: u64, last_modified_ns: i64) -> bool {
        let e_tag = e_tag
            .as_ref()
            .filter(|tag| !tag.trim_matches('"').is_empty());
        size != self.size
            || match (&self.e_tag, e_tag) {
                (Some(opened), Some(now)) => opened != now,
                // To the second: an HTTP date's, though a listing may have given finer.
                _ => {
                    const SECOND: i64 = 1_000_000_000;
                    self.last_modified_ns != 0
                        && last_modified_ns != 0
                        && last_modified_ns.div_euclid(SECOND)
                            != self.last_modified_ns.div_euclid(SECOND)
                }
            }
    }
}

/// [`ReadOp::copy_in`] as a [`Sink`]: the parts of one read copy into disjoint bytes of its
/// slots, from several of the runtime's threads at once.
struct OpSink<'a>(&'a ReadOp);

// SAFETY: `copy_in` writes only the bytes of the op's slots it is given, and the parts' ranges
// are disjoint; nothing else of the op is touched.
unsafe impl Sync for OpSink<'_> {}

impl OpSink<'_> {
    fn put(&self, at: u64, piece: &[u8]) {
        self.0.copy_in(at as usize, piece);
    }
}

/// A buffer the parts of one read copy into, at disjoint ranges, from the runtime's threads.
struct BufferSink {
    start: *mut u8,
    len: usize,
}

// SAFETY: as `OpSink`: disjoint ranges of a buffer its lender does not touch meanwhile.
unsafe impl Sync for BufferSink {}

impl BufferSink {
    fn put(&self, at: u64, piece: &[u8]) {
        let at = at as usize;
        let n = piece.len().min(self.len.saturating_sub(at));
        // SAFETY: within the lent buffer (clipped above); ranges of parts are disjoint.
        unsafe { std::ptr::copy_nonoverlapping(piece.as_ptr(), self.start.add(at), n) };
    }
}

/// The smallest part of a read fetched in parallel parts, and the most parts.
pub(super) const PART_BYTES: u64 = 2 << 20;
pub(super) const MOST_PARTS: u64 = 8;

/// How many parallel GETs fetch a read of `bytes` that its reader waits for. One connection
/// streams at its TCP window over the round trip (about 85 MB/s here at 20 ms each way, against
/// 500-700 MB/s for many at once): a reader waiting for 8 MiB (a Parquet column chunk) waits a
/// round trip and that transfer, so reads of more than two parts go as parts of at least
/// [`PART_BYTES`], as S3's guidance and boto3's transfer manager split large GETs.
pub(super) fn parts(bytes: u64) -> u64 {
    if bytes <= 2 * PART_BYTES {
        1
    } else {
        (bytes / PART_BYTES).clamp(1, MOST_PARTS)
    }
}

impl RemoteSource {
    /// Bytes `[start, end)` handed to `sink` (at their offset from `start`) from the tail the
    /// open fetched, if it lies within it: whether they were. The tail is dropped by the first
    /// read either way (a reader that starts elsewhere reads on from there).
    fn read_from_tail(&self, start: u64, end: u64, sink: &Sink<'_>) -> bool {
        let Some(tail) = self.tail.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return false;
        };
        let tail_end = tail.start + tail.bytes.len() as u64;
        let within = start >= tail.start && end <= tail_end;
        if within {
            sink(
                0,
                &tail.bytes[(start - tail.start) as usize..(end - tail.start) as usize],
            );
        }
        within
    }

    /// The version it was opened at.
    fn opened(&self) -> Opened {
        Opened {
            size: self.size,
            e_tag: self.e_tag.clone(),
            last_modified_ns: self.last_modified_ns,
        }
    }

    /// Bytes `[start, end)` of the object as opened, as `parts` ranged GETs in parallel (equal
    /// parts, page-aligned), each piece handed to `sink` (at its offset from `start`) by the
    /// GET's own task on the runtime as it arrives: no copy of the range is held outside the
    /// cache, and this thread is woken once a GET, not once a piece. An error if the object
    /// changed or any body falls short; the caller keeps nothing of a failed read.
    ///
    /// The tasks borrow `sink`, so this returns only once every one of them has ended: each
    /// holds a sender of `finished`, which closes when the last is dropped; on the first
    /// error the others are aborted (a task's future is dropped at its next await, never in a
    /// copy) and waited for all the same.
    fn get(&self, start: u64, end: u64, parts: u64, sink: &Sink<'_>) -> io::Result<()> {
        let runtime = runtime()?;
        let want = end - start;
        let part = want.div_ceil(parts.max(1)).next_multiple_of(PAGE_SIZE);
        let ranges: Vec<(u64, u64)> = (start..end)
            .step_by(part as usize)
            .map(|from| (from, (from + part).min(end)))
            .collect();
        let lent = LentSink::lend(sink);
        let (finished, mut ending) = tokio::sync::mpsc::unbounded_channel::<io::Result<()>>();
        let mut tasks = Vec::with_capacity(ranges.len());
        for &(from, to) in &ranges {
            let options = GetOptions {
                range: Some(GetRange::Bounded(from..to)),
                if_match: self.e_tag.clone(),
                // With no ETag, the time it was opened at, rounded up to the next second: HTTP
                // dates are to the second, and a server that compares its file's finer time
                // with one rounded down refuses the version opened (versitygw does). Each
                // answer's Last-Modified is checked as well (`Opened::changed`).
                if_unmodified_since: (self.e_tag.is_none() && self.last_modified_ns != 0).then(
                    || {
                        let next_second = self.last_modified_ns.div_euclid(1_000_000_000) + 1;
                        chrono::DateTime::from_timestamp_nanos(next_second * 1_000_000_000)
                    },
                ),
                ..GetOptions::default()
            };
            let (store, location) = (self.store.clone(), self.location.clone());
            let (name, opened, link) = (self.name.clone(), self.opened(), self.link.clone());
            let finished = finished.clone();
            let in_flight = self.link.sending();
            tasks.push(runtime.spawn(async move {
                let _in_flight = in_flight;
                use futures_util::StreamExt;
                let sent = std::time::Instant::now();
                let part = async {
                    let got = store
                        .get_opts(&location, options)
                        .await
                        .map_err(|e| store_error(&name, "read failed", e))?;
                    // A server that ignores If-Match (lighttpd does, for ranges) still names
                    // what it sent.
                    let last_modified_ns = got.meta.last_modified.timestamp_nanos_opt();
                    if opened.changed(
                        &got.meta.e_tag,
                        got.meta.size,
                        last_modified_ns.unwrap_or(0),
                    ) {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "{}: read failed: the object changed since it was opened",
                                name.display()
                            ),
                        ));
                    }
                    let first_byte = sent.elapsed();
                    let mut body = got.into_stream();
                    let mut received = 0;
                    while let Some(piece) = body.next().await {
                        let piece = piece.map_err(|e| store_error(&name, "read failed", e))?;
                        let n = piece.len().min((to - from - received) as usize);
                        // SAFETY: `get` waits for this task before it returns.
                        unsafe { lent.put(from - start + received, &piece[..n]) };
                        received += n as u64;
                    }
                    if received < to - from {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!(
                                "{}: short read: {received} bytes of {} at {from}",
                                name.display(),
                                to - from
                            ),
                        ));
                    }
                    link.record(first_byte, received, sent.elapsed() - first_byte);
                    Ok(())
                };
                let _ = finished.send(part.await);
            }));
        }
        drop(finished);
        let (mut answered, mut failed) = (0, None);
        while let Some(ended) = ending.blocking_recv() {
            answered += 1;
            if let (Err(e), None) = (ended, &failed) {
                failed = Some(e);
                for task in &tasks {
                    task.abort();
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            // A task that ended without its answer (it panicked) brought no whole part.
            None if answered < ranges.len() => Err(io::Error::other(format!(
                "{}: read failed: a GET ended without an answer",
                self.name.display()
            ))),
            None => Ok(()),
        }
    }
}

impl Source for RemoteSource {
    fn path(&self) -> &Path {
        &self.name
    }
    fn pinned_entry(&self) -> Option<Entry> {
        Some(Entry {
            name: self.name.to_string_lossy().into_owned(),
            size: self.size,
            is_dir: false,
            e_tag: self.e_tag.clone(),
            modified_ns: self.last_modified_ns,
        })
    }
    fn live_size(&self) -> u64 {
        self.size
    }
    fn current_size(&self, _events: &mut dyn FnMut(Event)) -> io::Result<u64> {
        // Pinned: a change shows as If-Match failing on the next GET, not as a new size.
        Ok(self.size)
    }
    fn unpinned(&self) -> Option<&str> {
        self.unpinned.as_deref()
    }
    fn link_stats(&self) -> Option<crate::engine::LinkStats> {
        Some(self.link.stats())
    }
    fn is_direct(&self) -> bool {
        true
    }
    fn copies_in(&self) -> bool {
        true
    }
    fn limits(&self) -> Limits {
        Limits {
            read_ahead_kb: Some(WINDOW_KB),
            max_sectors_kb: Some(REQUEST_KB),
            starts_as: Some(crate::device::DeviceModel::REMOTE),
        }
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn read(&self, op: &ReadOp) -> io::Result<usize> {
        let start = op.offset().min(self.size);
        let end = start.saturating_add(op.len() as u64).min(self.size);
        if end <= start {
            return Ok(0);
        }
        let into = OpSink(op);
        let put = |at: u64, piece: &[u8]| into.put(at, piece);
        // Every byte of `[start, end)` lands in the op's slots, or the read is an error.
        let read = (end - start) as usize;
        if self.read_from_tail(start, end, &put) {
            return Ok(read);
        }
        // A read its reader waits for comes in parts, in parallel (see `parts`, and more
        // where one connection is capped: `LinkRate::waiting_parts`); a read ahead, the size
        // its policy chose, beside the others it keeps in flight, as many parts as the
        // store's connections want, or as a waited read's on a quiet link (see `Reading`,
        // `LinkRate`).
        let parts = match (op.kind, self.reading.split_ahead) {
            (crate::policy::IoKind::Sync, SplitAhead::Auto) => {
                parts(end - start).max(self.link.waiting_parts(end - start))
            }
            (crate::policy::IoKind::Sync, _) | (_, SplitAhead::Always) => parts(end - start),
            (_, SplitAhead::Auto) => self.link.ahead_parts_now(end - start),
            (_, SplitAhead::Never) => 1,
        };
        self.get(start, end, parts, &put)?;
        Ok(read)
    }
    fn read_page_uncached(&self, page: u64, from: usize, dst: &mut [u8]) -> io::Result<usize> {
        let start = (page * PAGE_SIZE + from as u64).min(self.size);
        let end = start.saturating_add(dst.len() as u64).min(self.size);
        if end <= start {
            return Ok(0);
        }
        let into = BufferSink {
            start: dst.as_mut_ptr(),
            len: dst.len(),
        };
        let put = |at: u64, piece: &[u8]| into.put(at, piece);
        if !self.read_from_tail(start, end, &put) {
            self.get(start, end, 1, &put)?;
        }
        Ok((end - start) as usize)
    }
}
