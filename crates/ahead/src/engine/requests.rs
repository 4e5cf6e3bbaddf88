//! Requests: how a policy's I/O becomes reads on the device, and how finished reads land.
//!
//! * **Issuing** ([`EngineParts::start_io`]): clip at the end of the file, skip cached pages,
//!   claim the absent ones, allocate slots, one request per run of at most the device's largest
//!   I/O; [`EngineParts::submit`] hands them to the backend (a read a reader waits for is read
//!   in its own thread).
//! * **Expediting** ([`EngineParts::expedite`]): a reader about to wait for a read still queued
//!   in the backend takes it back and reads it itself.
//! * **Completion** ([`CacheAndMeter::complete`]): the pages become ready (or failed, caching
//!   nothing), and the device meter learns from the request.

use super::*;

/// The cache, the counters and the meters: what a backend's completions need.
pub(super) struct CacheAndMeter {
    pub(super) cache: Cache,
    pub(super) counters: Counters,
    /// Every application read's latency, and every request's.
    pub(super) read_latency: stats::LatencyRecorder,
    pub(super) request_latency: stats::LatencyRecorder,
    pub(super) meters: Meters,
    /// Requests in flight to every device: the backend's queue, which congests.
    pub(super) in_flight: AtomicUsize,
}

impl Completer for CacheAndMeter {
    fn complete(&self, op: Box<ReadOp>, result: io::Result<usize>) {
        self.complete_burst(&[(op, result)]);
    }

    fn complete_all(&self, finished: &mut Vec<(Box<ReadOp>, io::Result<usize>)>) {
        self.complete_burst(finished);
        finished.clear();
    }
}

impl CacheAndMeter {
    /// The device finishes reads in bursts (dozens at once on a virtual disk, the whole
    /// queue often). The burst's counts are summed and added once (a few atomic additions a
    /// burst, not a dozen a read) and its latencies recorded under one lock per engine
    /// histogram (a file's histogram takes its lock per read), before any reader is woken, so a
    /// woken reader finds its read counted; then every reader is woken; the device meter
    /// comes last. On a machine of two CPUs the reaper's work is taken from the reader
    /// refilling the queue: `read_direct` ran 3% faster for it (BENCHMARKS, issue 22 run 4).
    fn complete_burst(&self, finished: &[(Box<ReadOp>, io::Result<usize>)]) {
        let now = Instant::now();
        self.count_burst(finished, now);
        for (op, result) in finished {
            self.land(op, result);
        }
        for (op, result) in finished {
            self.account(op, result, now);
        }
    }

    /// What is counted of finished requests before their readers are woken: errors, the
    /// latencies, and a direct read's figures (its request and the read itself), summed per
    /// file and for the engine.
    fn count_burst(&self, finished: &[(Box<ReadOp>, io::Result<usize>)], now: Instant) {
        let mut engine_tally = stats::DirectTally::default();
        let mut file_tally: Option<(&Arc<FileData>, stats::DirectTally)> = None;
        for (op, result) in finished {
            match result {
                Err(_) => {
                    for c in Counters::both(&self.counters, &op.file) {
                        c.io_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(n) if *n > 0 && op.file.source.copies_in() => {
                    for c in Counters::both(&self.counters, &op.file) {
                        c.copied_in_bytes.fetch_add(*n as u64, Ordering::Relaxed);
                    }
                }
                Ok(_) => {}
            }
            let Some(direct) = &op.direct else { continue };
            let took = now.saturating_duration_since(direct.started);
            let (pages, bytes) = (
                op.expected.div_ceil(PAGE_SIZE),
                *result.as_ref().unwrap_or(&0) as u64,
            );
            engine_tally.add(pages, bytes, took);
            if let Some((f, t)) = file_tally.take_if(|(f, _)| !Arc::ptr_eq(f, &op.file)) {
                f.counters.add_direct(&t);
            }
            file_tally
                .get_or_insert((&op.file, stats::DirectTally::default()))
                .1
                .add(pages, bytes, took);
            op.file.read_latency.record(took);
        }
        self.counters.add_direct(&engine_tally);
        if let Some((f, t)) = file_tally {
            f.counters.add_direct(&t);
        }
        self.request_latency.record_all(
            finished
                .iter()
                .map(|(op, _)| now.saturating_duration_since(op.submitted)),
        );
        self.read_latency
            .record_all(finished.iter().filter_map(|(op, _)| {
                let direct = op.direct.as_ref()?;
                Some(now.saturating_duration_since(direct.started))
            }));
    }

    /// The read's bytes become what its reader sees: its pages ready (or failed, caching
    /// nothing), or a direct read's result handed over; its reader is woken.
    fn land(&self, op: &ReadOp, result: &io::Result<usize>) {
        if let Some(direct) = &op.direct {
            direct.finish(match result {
                Ok(n) => Ok(*n),
                Err(e) => Err(cache::Failure::of(e).error()),
            });
        } else {
            self.cache.complete(
                &op.file.table,
                op.first_page,
                &op.slots,
                op.claim,
                op.expected,
                result,
                op.kind == IoKind::Ahead,
            );
        }
    }

    /// What the engine learns from a finished read (at `now`) once its reader is woken: the
    /// queue's depth, and the device meter.
    fn account(&self, op: &ReadOp, result: &io::Result<usize>, now: Instant) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        let device = &op.file.meter;
        let left = device.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        // A measurement may be skipped while busy (a reader must not queue behind one), but
        // not the end of a busy period, which the bandwidth is measured over.
        let mut m = if left == 0 {
            device.lock()
        } else {
            match device.meter.try_lock() {
                Ok(m) => m,
                Err(_) => return,
            }
        };
        let bytes = *result.as_ref().unwrap_or(&0) as u64;
        // From its submission to its completion: queued, on the device, and transferred.
        let in_system = now.saturating_duration_since(op.submitted);
        m.bytes += bytes;
        m.byte_seconds += bytes as f64 * in_system.as_secs_f64();
        let mut bw = None;
        let mut saturated = false;
        if left == 0 {
            if let Some(since) = m.busy_since.take() {
                m.busy += now - since;
            }
        }
        let busy = m.busy + m.busy_since.map_or(Duration::ZERO, |s| now - s);
        // A sample spans at least two of the device's latencies: GETs in parallel (an object
        // store's parts, hundreds of milliseconds each) finish in clumps, and 50 ms of
        // completions measured a clump (up to 2.3 GB/s on a link giving 0.3).
        let least = Duration::from_millis(50).max(Duration::from_nanos(2 * m.estimate.latency_ns));
        if busy >= least && m.bytes >= 8 << 20 {
            bw = Some((m.bytes as f64 / busy.as_secs_f64()) as u64);
            let waited_s = m.byte_seconds / m.bytes as f64;
            saturated = waited_s * 1e9 >= 2.0 * m.estimate.latency_ns as f64;
            m.bytes = 0;
            m.byte_seconds = 0.0;
            m.busy = Duration::ZERO;
            if m.busy_since.is_some() {
                m.busy_since = Some(now);
            }
        }
        // Latency from requests that found the device idle, less their transfer time.
        let latency = (op.queued_behind == 0 && bytes > 0).then(|| {
            let total = in_system.as_nanos() as u64;
            let transfer = bytes * 1_000_000_000 / m.estimate.bytes_per_sec.max(1);
            total.saturating_sub(transfer).max(1_000)
        });
        m.update(latency, bw, saturated);
        device.version.store(m.version, Ordering::Release);
    }
}

impl EngineParts {
    /// Start the I/O `io` asks for on `file` (the driver's side of `RaContext::start_io`):
    /// clip at the end of the file, skip cached pages, one request per run of absent pages of
    /// at most `io_max` pages. Ahead reads give up where the cache has no room; synchronous ones
    /// wait for it. Returns pages newly brought in; `refaults` counts pages read again after
    /// being evicted unused. The requests are added to `out`, for [`EngineParts::submit`] once no lock
    /// is held (a policy's lock must not be held across a `sync` backend's read).
    pub(super) fn start_io(
        &self,
        file: &Arc<FileData>,
        io_max: u64,
        io: IoRequest,
        refaults: &mut u64,
        out: &mut Vec<ReadOp>,
    ) -> u64 {
        self.start_io_as(file, io_max, io, true, refaults, out)
    }

    /// [`EngineParts::start_io`], where a synchronous read that finds no room waits for it
    /// only if `wait_for_room` (an async reader does not: it registers for a free slot and
    /// tries again when woken).
    pub(super) fn start_io_as(
        &self,
        file: &Arc<FileData>,
        io_max: u64,
        io: IoRequest,
        wait_for_room: bool,
        refaults: &mut u64,
        out: &mut Vec<ReadOp>,
    ) -> u64 {
        let cache = &self.core.cache;
        let end = io.start_page.saturating_add(io.pages).min(file.pages());
        let sync = io.kind == IoKind::Sync;
        // What a reader waits for is copied out only after this returns: never more than a
        // quarter of the cache, or its first pages would make room for its last.
        let end = if sync {
            end.min(io.start_page.saturating_add(cache.run_cap_pages()))
        } else {
            end
        };
        // A read a reader waits for goes whole, as the policy sized it (it is never split, so
        // the simulator's request counts hold here); ahead reads go in the device's largest.
        let io_max = if sync { io_max.max(io.pages) } else { io_max };
        let io_max = io_max.min(cache.run_cap_pages()).max(1);
        let mut p = io.start_page;
        let mut brought = 0;
        while p < end {
            p = cache.next_miss(&file.table, p, end);
            if p >= end {
                break;
            }
            let run = cache.claim_run(&file.table, p, (end - p).min(io_max));
            let claimed = run.pages;
            if claimed == 0 {
                continue; // another reader claimed it first
            }
            *refaults += run.refaults;
            let mut slots = cache.alloc(file.id, p, claimed as usize, false);
            if sync && wait_for_room && slots.is_empty() {
                // No room, and a reader waits: send the requests collected so far first (their
                // slots free only once they complete; waiting with them unsent would wait for
                // ever), then wait for a slot.
                self.submit(out);
                slots = cache.alloc(file.id, p, claimed as usize, true);
            }
            let n = slots.len() as u64;
            if n < claimed {
                cache.unclaim(&file.table, p + n, p + claimed, run.claim);
            }
            if n == 0 {
                break; // no room for reading ahead now
            }
            if let Some(m) = io.marker_page.filter(|&m| m >= p && m < p + n) {
                cache.set_marker(&file.table, m, true);
            }
            out.push(self.make_op(file, p, slots, run.claim, io.kind));
            brought += n;
            p += n;
        }
        // The cache's memory faulted in ahead of its growth, for a local file's reads: the
        // kernel faults in what they land on in the thread that submits them, the reader's.
        // A remote object's bytes are copied in by the runtime's threads as they arrive, and
        // memory faulted in ahead for them held up to 24 MiB the cache never used (see
        // `cache/fault_ahead.rs`).
        if brought > 0 && file.source.fd().is_some() {
            cache.note_growth();
        }
        brought
    }

    /// Send requests made by [`EngineParts::start_io`] to the backend; a synchronous one is
    /// read in this thread (see below).
    pub(super) fn submit(&self, ops: &mut Vec<ReadOp>) {
        self.submit_as(ops, true);
    }

    /// Send requests to the backend; synchronous ones are read in this thread only if
    /// `in_caller` (an async reader, or a batch whose reads go out together, hands every one
    /// to the backend).
    pub(super) fn submit_as(&self, ops: &mut Vec<ReadOp>, in_caller: bool) {
        for op in ops.drain(..) {
            self.submit_one(op, in_caller);
        }
    }

    /// Send one request to the backend, as [`EngineParts::submit_as`] does.
    pub(super) fn submit_one(&self, op: ReadOp, in_caller: bool) {
        self.core.in_flight.fetch_add(1, Ordering::AcqRel);
        let device = &op.file.meter;
        let queued_behind = device.in_flight.fetch_add(1, Ordering::AcqRel);
        let now = Instant::now();
        if queued_behind == 0 {
            if let Ok(mut m) = device.meter.try_lock() {
                m.busy_since.get_or_insert(now);
            }
        }
        if let Some(log) = &self.log {
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(RequestRecord {
                    at_ns: (now - self.started).as_nanos() as u64,
                    first_page: op.first_page,
                    pages: op.slots.len() as u64,
                    ahead: op.kind == IoKind::Ahead,
                });
        }
        let mut op = Box::new(op);
        op.submitted = now;
        op.queued_behind = queued_behind;
        if op.kind == IoKind::Sync && in_caller {
            // A reader waits for this one: it reads it in its own thread, as the kernel
            // does a synchronous read. Handing it to another thread and back would cost
            // two context switches for nothing.
            let result = self.backend.read_now(&op);
            self.core.complete(op, result);
        } else {
            self.backend.submit(op);
        }
    }

    /// A reader is about to wait for `page` of `file`, which is in flight: if the read that
    /// brings it still waits in the backend's queue (behind other ahead reads), read it now in
    /// this thread instead, as a synchronous read would be. Without this, a reader that catches
    /// up with a deep queue of readahead waits for all of it (a file read whole in a scrambled
    /// order queued gigabytes ahead, and its reader starved for seconds).
    pub(super) fn expedite(&self, file: &Arc<FileData>, page: u64) {
        if let Some(op) = self.backend.take_queued(file, page) {
            for c in Counters::both(&self.core.counters, file) {
                c.expedited_requests.fetch_add(1, Ordering::Relaxed);
            }
            let result = self.backend.read_now(&op);
            self.core.complete(op, result);
        }
    }

    /// The request for pages `first..` of `file` into `slots`, claimed as `claim`.
    pub(super) fn make_op(
        &self,
        file: &Arc<FileData>,
        first: u64,
        slots: Vec<u32>,
        claim: u32,
        kind: IoKind,
    ) -> ReadOp {
        let arena = self.core.cache.arena();
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(1);
        let mut prev: Option<u32> = None;
        for &s in &slots {
            match (prev, iov.last_mut()) {
                (Some(q), Some(last)) if s == q + 1 => last.iov_len += PAGE,
                _ => iov.push(libc::iovec {
                    iov_base: arena.slot_ptr(s).cast(),
                    iov_len: PAGE,
                }),
            }
            prev = Some(s);
        }
        let pages = slots.len() as u64;
        for c in Counters::both(&self.core.counters, file) {
            c.count_request(pages, kind);
        }
        ReadOp {
            file: file.clone(),
            first_page: first,
            expected: file
                .source
                .live_size()
                .saturating_sub(first * PAGE_SIZE)
                .min(pages * PAGE_SIZE),
            slots,
            claim,
            kind,
            submitted: Instant::now(),
            queued_behind: 0,
            iov,
            direct: None,
        }
    }

    pub(super) fn note_fallback(&self, why: Fallback) {
        let mut f = self.fallbacks.lock().unwrap_or_else(|p| p.into_inner());
        if !f.contains(&why) && f.len() < 64 {
            f.push(why);
        }
    }
}
