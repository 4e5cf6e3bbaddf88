//! The engine's side of the one read loop (`policy::driving`), which the simulator runs too:
//! a read's pages copied out of the cache as they become ready, waited for by blocking the
//! reader's thread or by parking its task ([`Wait`]); a page absent read by the reader itself
//! through the engine's requests; a page read and lost again and again read past the cache; a
//! page whose read failed tried once more, then its error returned by the read that met it.
//! [`ReadCursor`] keeps a read's place across an async read's polls.

use super::*;
use crate::policy::{Reached, ReadDriver, ReadWalk};
use crate::units::PageRange;
use std::task::{Poll, Waker};

/// Reads in flight above which policies are told the queue is congested (and below half of
/// which, that it drained).
pub(super) const CONGESTED: u64 = 128;
/// Times a page may come back absent for one read before the engine reads it with a plain
/// `pread` (a file truncated meanwhile, or a cache too small for the threads reading it).
const ATTEMPTS: u32 = 3;

/// How a reader waits for a page in flight: blocking its thread, or parking an async task.
#[derive(Clone, Copy)]
pub(super) enum Wait<'a> {
    Block,
    Task(&'a Waker),
}

/// One read's place in the one loop (`policy::driving`), and what only the engine keeps of
/// it, across an async read's polls.
pub(super) struct ReadCursor {
    /// The read (clipped at the end of the file), its pages, and the next the reader reaches.
    walk: ReadWalk,
    /// Bytes copied so far.
    done: usize,
    hits: u64,
    misses: u64,
    stall: Duration,
    /// When the read was called (its latency ends when it returns).
    started: Instant,
    /// Since when an async read has been parked (its wait counts as stall).
    parked_at: Option<Instant>,
    /// Times its current page came back absent after the reader's own request for it.
    attempts: u32,
    /// The page a retry after a failed read started at: a read gets one retry from each page
    /// found failed (an ahead read that failed may have covered pages that read fine on
    /// their own), of the rest of the read from there.
    retried_page: Option<u64>,
    result: io::Result<()>,
}

impl ReadCursor {
    /// `read` (clipped at the end of the file), called at `started`.
    #[inline]
    pub(super) fn new(read: AppRead, started: Instant) -> ReadCursor {
        ReadCursor {
            walk: ReadWalk::new(read),
            done: 0,
            hits: 0,
            misses: 0,
            stall: Duration::ZERO,
            started,
            parked_at: None,
            attempts: 0,
            retried_page: None,
            result: Ok(()),
        }
    }

    /// Where in `page` to copy from, and how many bytes.
    #[inline]
    fn piece_of(&self, page: u64) -> (usize, usize) {
        let from = if page == self.walk.pages.first {
            (self.walk.read.offset.0 % PAGE_SIZE) as usize
        } else {
            0
        };
        (from, (PAGE - from).min(self.len() - self.done))
    }

    /// Bytes to copy (the read clipped at the end of the file).
    #[inline]
    fn len(&self) -> usize {
        self.walk.read.len.0 as usize
    }

    /// Where the read starts, in bytes.
    pub(super) fn offset(&self) -> u64 {
        self.walk.read.offset.0
    }
}

/// The engine's side of the one read loop for a read of `file` into `buf`: pages copied out
/// of the cache, waited for by blocking or by parking a task, the reader's own requests sent
/// through the engine; a page lost again and again read past the cache, a failed one tried
/// once more.
struct EngineRead<'r, 'w> {
    file: &'r File,
    cur: &'r mut ReadCursor,
    buf: &'r mut [u8],
    wait: Wait<'w>,
}

impl EngineRead<'_, '_> {
    fn in_caller(&self) -> bool {
        matches!(self.wait, Wait::Block)
    }

    /// `page`'s lookup, waiting for it if in flight (or parking: `None`).
    fn look_up(&mut self, page: u64, from: usize, want: usize) -> Option<Lookup> {
        let cache = &self.file.engine.core.cache;
        let table = &self.file.data.table;
        let cur = &mut *self.cur;
        let dst = &mut self.buf[cur.done..cur.done + want];
        let lookup = match self.wait {
            Wait::Block => {
                if cache.is_in_flight(table, page) {
                    let t = Instant::now();
                    self.file.engine.expedite(&self.file.data, page);
                    cur.stall += t.elapsed();
                }
                cache.read_page(table, page, from, dst, true, &mut cur.stall)
            }
            Wait::Task(waker) => match cache.poll_page(table, page, from, dst, waker) {
                Poll::Ready(l) => l,
                Poll::Pending => {
                    cur.parked_at.get_or_insert_with(Instant::now);
                    return None;
                }
            },
        };
        if let Some(t0) = cur.parked_at.take() {
            cur.stall += t0.elapsed();
        }
        Some(lookup)
    }

    /// A request the reader waits for: `io`, sent from this thread only if it blocks.
    fn request(&mut self, io: IoRequest) -> u64 {
        let in_caller = self.in_caller();
        let (mut refaults, mut ops) = (0, Vec::new());
        let brought = self.file.engine.start_io_as(
            &self.file.data,
            self.file.io_max,
            io,
            in_caller,
            &mut refaults,
            &mut ops,
        );
        self.file.engine.submit_as(&mut ops, in_caller);
        self.file.report_refaults(refaults);
        brought
    }
}

impl ReadDriver for EngineRead<'_, '_> {
    #[inline]
    fn take_ready(&mut self, pages: PageRange) -> (u64, bool) {
        let cache = &self.file.engine.core.cache;
        let cur = &mut *self.cur;
        let mut stall = Duration::ZERO;
        let mut page = pages.first;
        while page < pages.end && cur.done < cur.len() {
            let (from, want) = cur.piece_of(page);
            match cache.read_page(
                &self.file.data.table,
                page,
                from,
                &mut self.buf[cur.done..cur.done + want],
                false,
                &mut stall,
            ) {
                Lookup::Copied { n, whole, .. } => {
                    cur.done += n;
                    cur.hits += 1;
                    page += 1;
                    if !whole {
                        return (page - pages.first, true);
                    }
                }
                _ => break,
            }
        }
        (page - pages.first, false)
    }

    #[inline]
    fn show_policy(&mut self, read: AppRead, known_cached: PageRange) {
        // The policy sees the part of the read within the file as its pages were opened: a
        // file grown since is read past that end by the reader itself (`reach`).
        let opened_bytes = self.file.data.pages() * PAGE_SIZE;
        if read.offset.0 >= opened_bytes {
            return;
        }
        let read = AppRead {
            offset: read.offset,
            len: Bytes(read.len.0.min(opened_bytes - read.offset.0)),
        };
        let in_caller = self.in_caller();
        self.file.with_policy_as(
            |p, ctx| {
                ctx.known_cached = known_cached;
                p.on_read(read, ctx)
            },
            in_caller,
        );
    }

    fn reach(&mut self, page: u64) -> Reached {
        let (from, want) = self.cur.piece_of(page);
        let Some(lookup) = self.look_up(page, from, want) else {
            return Reached::Pending;
        };
        let cur = &mut *self.cur;
        match lookup {
            Lookup::Copied { n, whole, .. } => {
                // It was not ready when the read began (the hits were copied before).
                cur.misses += 1;
                cur.done += n;
                cur.attempts = 0;
                Reached::Taken { last: !whole }
            }
            // Past the end the file had when opened (it grew): read past the cache.
            Lookup::Absent if cur.attempts < ATTEMPTS && page < self.file.data.pages() => {
                Reached::Absent
            }
            Lookup::Absent => {
                // Read and lost again and again: read this page past the cache.
                cur.misses += 1;
                let dst = &mut self.buf[cur.done..cur.done + want];
                match self.file.data.source.read_page_uncached(page, from, dst) {
                    Ok(n) => {
                        cur.done += n;
                        cur.attempts = 0;
                        Reached::Taken { last: n < want }
                    }
                    Err(e) => {
                        cur.result = Err(e);
                        Reached::Stopped
                    }
                }
            }
            Lookup::Failed(f) if cur.retried_page != Some(page) => {
                // It may have been an ahead read that failed: for this reader, once, the
                // page is absent, and the walk reads it with the rest of the read as any
                // miss (one request, not page by page: a failed 8 MiB read of an object
                // retried a page at a time was 2,048 round trips).
                cur.retried_page = Some(page);
                drop(f);
                Reached::Absent
            }
            Lookup::Failed(f) => {
                cur.result = Err(f.error());
                Reached::Stopped
            }
        }
    }

    fn read_run(&mut self, run: PageRange) -> Poll<()> {
        let cache = &self.file.engine.core.cache;
        let t = Instant::now();
        if let Wait::Task(waker) = self.wait {
            // Registered before the try, so a slot freed after it wakes us.
            cache.wake_when_slots_free(waker);
        }
        // One request, as the policy's own synchronous reads: a source that fetches a large
        // request in parallel parts (an object store) then waits one round trip for it, not
        // one per `io_max` in turn (BENCHMARKS, issue 21 run 4).
        let io = self
            .file
            .aligned(IoRequest::sync(run.first, run.end - run.first));
        let brought = self.request(io);
        let in_caller = self.in_caller();
        if in_caller && !self.file.engine.backend.is_async() {
            self.cur.stall += t.elapsed();
        }
        if brought > 0 || in_caller {
            self.cur.attempts += 1;
        } else if !cache.is_cached(&self.file.data.table, run.first) {
            // No room: woken when a slot frees.
            self.cur.parked_at.get_or_insert_with(Instant::now);
            return Poll::Pending;
        }
        Poll::Ready(())
    }

    #[inline]
    fn cache_pages(&self) -> u64 {
        self.file.engine.core.cache.slots() as u64
    }
}

impl File {
    /// The first half of a read, steps 1 to 3 of the one loop (`policy::driving`): the size
    /// check and the clip, the pages already ready copied out without waiting, and the read
    /// shown to the policy (which starts what it wants; a synchronous read of it is done in
    /// this thread only under [`Wait::Block`]). `None` at or past the end of the file. What is
    /// left is [`File::copy_rest`]'s.
    pub(super) fn begin_read_as(
        &self,
        buf: &mut [u8],
        offset: u64,
        wait: Wait<'_>,
    ) -> io::Result<Option<ReadCursor>> {
        let Some((read, called)) = self.clip_read_at(buf.len(), offset)? else {
            return Ok(None);
        };
        let mut cur = ReadCursor::new(read, called);
        self.begin_walk(&mut cur, buf, wait);
        Ok(Some(cur))
    }

    /// Step 1 of a read of `len` bytes at `offset`: the size check and the clip (`None`:
    /// nothing of it is in the file), and when it was called. A cursor made from it takes
    /// [`File::begin_walk`] next.
    #[inline]
    pub(super) fn clip_read_at(
        &self,
        len: usize,
        offset: u64,
    ) -> io::Result<Option<(AppRead, Instant)>> {
        if len == 0 {
            return Ok(None);
        }
        let called = Instant::now();
        let size = self.current_size()?;
        Ok(crate::policy::clip_read(offset, len as u64, size).map(|read| (read, called)))
    }

    /// Steps 2 and 3 of the read `cur` was made for ([`File::clip_read_at`]).
    #[inline]
    pub(super) fn begin_walk(&self, cur: &mut ReadCursor, buf: &mut [u8], wait: Wait<'_>) {
        self.engine.touch(&self.activity);
        let read = cur.walk.read;
        let mut driver = EngineRead {
            file: self,
            cur,
            buf,
            wait,
        };
        let walk = crate::policy::begin_read(&mut driver, read);
        cur.walk = walk;
    }

    /// A range of `len` bytes at `offset` that no policy is shown (a batch's, its I/O planned
    /// with all its ranges): step 2 alone, what is ready copied out. What is left is
    /// [`File::copy_rest`]'s.
    pub(super) fn begin_unseen(&self, buf: &mut [u8], offset: u64, len: usize) -> ReadCursor {
        let read = AppRead {
            offset: Bytes(offset),
            len: Bytes(len as u64),
        };
        let mut cur = ReadCursor::new(read, Instant::now());
        if len == 0 {
            cur.walk.next = cur.walk.pages.end;
        } else {
            let mut driver = EngineRead {
                file: self,
                cur: &mut cur,
                buf,
                wait: Wait::Block,
            };
            let walk = crate::policy::begin_unseen(&mut driver, read);
            cur.walk = walk;
        }
        cur
    }

    /// The rest of a read begun with [`File::begin_read_as`] or [`File::begin_unseen`], step 4
    /// of the one loop: each page copied out as it becomes ready, an absent one read, a failed
    /// one tried once more. With [`Wait::Block`] it waits, in this thread, and never returns
    /// `Pending`; with [`Wait::Task`] a page in flight or a cache with no room parks the task
    /// and returns `Pending`, `cur` keeping the place. `Ready` counts the read in the stats.
    #[inline]
    pub(super) fn copy_rest(
        &self,
        cur: &mut ReadCursor,
        buf: &mut [u8],
        wait: Wait<'_>,
    ) -> Poll<io::Result<usize>> {
        let mut walk = cur.walk;
        let mut driver = EngineRead {
            file: self,
            cur,
            buf,
            wait,
        };
        let walked = crate::policy::walk_read(&mut driver, &mut walk);
        cur.walk = walk;
        if walked.is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(self.finish_read(cur))
    }

    /// Count a finished read in the stats, and give its result.
    #[inline]
    fn finish_read(&self, cur: &mut ReadCursor) -> io::Result<usize> {
        self.engine
            .core
            .cache
            .pass_over(&self.data.table, cur.walk.pages.first, cur.walk.next);
        for c in Counters::both(&self.engine.core.counters, &self.data) {
            c.count_read(cur.done as u64, cur.hits, cur.misses, cur.stall);
        }
        let took = cur.started.elapsed();
        self.engine.core.read_latency.record(took);
        self.data.read_latency.record(took);
        match std::mem::replace(&mut cur.result, Ok(())) {
            Err(e) if cur.done == 0 => Err(e),
            _ => Ok(cur.done),
        }
    }
}
