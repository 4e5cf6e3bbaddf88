//! `adaptive`: ahead's own readahead policy, built to fail nowhere the historical ones fail.
//! Sources: the 1996 asynchronous readahead patch (shared/seeds/000_b34001b5bfec9e3b.txt), the
//! 2004 request-size-aware redesign thread (001_bd002ed0d6b9b97c.txt), the 2004 paper's tables
//! (002_cb27686ff0bbb5ba.txt) and what the userspace peers got wrong
//! (shared/research/userspace_peers.md).
//!
//! **Streams.** An open file tracks up to [`STREAMS`] streams, each the history of one reader:
//! where its last read was, its shape and its window. A read joins the stream it continues,
//! best match first: the next pages forward (`Forward`), the pages just before backward
//! (`Backward`), the same distance again (`Stride`), or a read inside the stream's own readahead
//! window (threads racing over one region). A read that joins nothing starts a new stream in the
//! least recently used slot, so interleaved readers on one file (threads, a merge of several
//! runs) each keep their own window. A new stream is `Forward` at once when it starts at page 0
//! (a file read from its start) or right after cached pages (the kernel's context readahead);
//! otherwise it waits for a second read to show its shape, and a stride needs a third read to
//! confirm the distance. A read that joins nothing is random: it gets exactly what it asked for,
//! one request, and no window, unless speculating pays (below). Threads taking turns over one file (each reading the next chunk,
//! as an NFS server's do) look like a stride at first; once the pages just before a stride's
//! record have been read by the others, the stride is taken for what it is: a forward stream
//! (or, if a forward stream already follows that place, nothing).
//!
//! **Windows.** A confirmed stream reads ahead in its own direction: forward, backward, or record
//! by record along its stride. A stride's gap is read through, as one forward stream, where a
//! separate request costs the device more than the gap's pages and the gap is at most 1% of the
//! record, or where a separate request costs four times the gap's pages whatever it wastes (a
//! seek on a disk, a round trip to an object store). Two sizes govern a window, as the kernel's
//! on-demand window and its async part do:
//! * `window`: the pages one top-up reads. The first is sized from the request
//!   (`get_init_ra_size`: x4 for small reads, x2 for medium, else the maximum), but no smaller
//!   than what one request costs the device (a seek's worth of pages on a disk); then it grows
//!   (`get_next_ra_size`) up to the maximum window: the configured one (the kernel's
//!   `read_ahead_kb`), or four requests' cost where that is more. A forward stream whose reads
//!   are larger than the window keeps one read ahead all the same. Top-ups go out as requests
//!   of at most the device's largest I/O, but a read is never split: a read the cache cannot
//!   serve is read in one synchronous request that also brings in the first window.
//! * `lead`: what must stay ahead of the reader. When less than `lead` is left (the reader has
//!   touched the marker on the first page of the newest window), the next window starts
//!   asynchronously, so its I/O overlaps the reader's work on this one. The lead follows the
//!   device: latency x bandwidth from [`DeviceEstimate`] (the driver measures, the simulator
//!   models; the policy only does arithmetic), at least one window, whatever the configured
//!   window (a 128 KiB `read_ahead_kb` would keep 1% of an object store busy).
//!
//! Both are capped by memory: the driver's readahead budget for the file
//! ([`RaContext::readahead_budget`]; twice it for a file no larger than that, which fits in
//! the cache whole) is split among its active streams (half of a share at most for the window,
//! the rest for the lead), so all windows together fit in the cache. Where that
//! share holds a window to no more than one read (a thousand files
//! read in turn), the guess a file's first read makes still brings in one window past the read,
//! so the second read does not wait as the first did. A strided stream bets at most 1% of what it
//! has used ([`STRIDE_BET`]), or a few pages ([`STRIDE_PRIOR`]) if more: its reads may stop any
//! time, and what is ahead then is wasted. A bet
//! smaller than the reader's record is not placed at all: it would not hold the next read, only
//! split it into two requests (the pages ahead, then the rest, waited for).
//!
//! A forward stream's readahead stops where another forward stream of the file began, ahead
//! of its reader (`partition_end`): readers that each began at their own place
//! (threads with a part each, the runs of a merge) end where the next began, and the pages
//! there, read once already, may have been evicted since. If the reader goes on there, so do
//! its windows. A stream whose reader read a run and skipped ahead expects the same again:
//! its windows stop at the next run's end and go on after the skip, until a run goes on
//! longer (one miss, then windows as before).
//!
//! **Feedback.** Top-ups that find every page cached twice in a row turn the stream's
//! readahead off (no more lookups); it comes back on after two misses within sixteen reads, so
//! one miss among hits does not flap, or, for a forward stream, as soon as the page a read
//! beyond its read is not cached (it ran through pages another stream read ahead). Thrashing (pages evicted before use) shrinks the file's
//! window cap by a quarter at each report, and only then, down to where thrashing stops; eight
//! clean top-ups regrow it by an eighth. A congested queue defers asynchronous top-ups; what the
//! reader waits for is never deferred. A file read whole in a scrambled order (it fits in its
//! share of the cache, and at least 1 in 32 reads that join no stream land on pages already
//! cached, as iozone's mix does) loses nothing it reads ahead, since every page stays until a
//! read comes for it: its forward streams read ahead at full size, as the kernel's page cache
//! lets its windows do.
//!
//! **Speculation.** Random reads get only what they ask while speculating would not pay. It pays
//! when a page brought in around a random miss is likely to be read later: at least one in the
//! pages' worth of time a small miss costs (`miss_cost`: a request's latency and overhead at full
//! bandwidth, 53 pages on the modelled NVMe device, thousands on an object store). Only a file
//! that fits in its share of the cache is speculated on: what comes in stays until a read comes
//! for it, and all of the file is the most speculation can cost. The guide, before any page
//! speculated on has been read, is the reads so far (a page will be read about as often in the
//! time to come as pages were in the time gone): once random reads, counted by the jumps back
//! (reads in random order go back as often as forward; a stride or runs with skips never do),
//! have covered enough of the file, a random miss brings in the largest aligned block around it,
//! and the rest of the file is read ahead in order, a block (or what the device needs in flight)
//! for each random read. What the speculated pages earn is then the judge: once random reads
//! have had time to come for them (a quarter of the file's pages), speculation stops if those
//! that landed on them earned less than half what they cost, and tries again only when random
//! reads have doubled.
//!
//! **Hints.** Sequential: new streams are forward from their first read, their first window
//! four times the unhinted guess.
//! Random: no readahead at all. Will-need: the range is read ahead, no stream is disturbed.
//! Don't-need: streams whose window covered the range will fetch it again if they get there.
//! Limit: nothing at or past the page is ever read ahead (Lustre's lock extent in the 2004
//! thread).

use super::linux_ondemand::{get_init_ra_size, get_next_ra_size};
use super::{AppRead, DeviceEstimate, Hint, IoKind, IoRequest, Policy, PolicyConfig, RaContext};

/// Streams tracked per open file.
pub const STREAMS: usize = 32;
/// Farthest apart, in pages, two reads may start and still be taken for one strided stream.
const MAX_STRIDE_PAGES: u64 = 4096;
/// A strided stream keeps at most 1/`STRIDE_BET` (under 1%) of the pages it has used read ahead,
/// or [`STRIDE_PRIOR`] pages, whichever is more.
pub const STRIDE_BET: u64 = 128;
/// Pages a strided stream may keep ahead before it has shown more: records of a page or two
/// need several in flight to hide the device's latency, and a handful of pages is all a stride
/// that stops can waste.
pub const STRIDE_PRIOR: u64 = 8;
/// Top-ups in a row that find everything cached before a stream stops reading ahead.
const CACHED_OFF_AFTER: u8 = 2;
/// Misses, within [`CACHED_SPAN`] reads, that turn a cached stream's readahead back on.
const CACHED_ON_MISSES: u8 = 2;
const CACHED_SPAN: u32 = 16;
/// Cached pages just before a new stream's first read that make it forward at once: enough that
/// a random reader over a mostly cached file rarely finds them by chance.
const CONTEXT_PAGES: u64 = 16;
/// Pages of readahead a file is credited with before its losses count against it.
const BET_PRIOR: u64 = 512;
/// Reads since a stream was last read within which a read inside its window joins it.
const RACE_READS: u64 = 4;
/// Clean top-ups between two regrowth steps after thrashing.
const REGROW_EVERY: u32 = 8;
/// Smallest window cap thrashing can shrink to, in pages.
const MIN_CAP: u64 = 4;
/// Pages per granule of the marks that tell a speculative page from others.
const SPEC_GRANULE: u64 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// One read seen (or a stride candidate, when `delta` is set).
    Unknown,
    Forward,
    Backward,
    Stride,
}

/// How a read relates to a stream, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Join {
    Continues,
    InWindow,
    Repeats,
    /// A forward stream's reader skipped ahead past what was read ahead (a columnar scan, a
    /// reader seeking over what it does not need): the same stream, its window kept.
    Skips,
    /// A second read at the distance a stride candidate saw: the stride is confirmed.
    StrideConfirms,
    /// A first read at some distance from this stream's last: maybe a stride. It starts a new
    /// stream (the old one may still continue forward: interleaved readers look like a stride
    /// for one round).
    StrideCandidate,
}

#[derive(Clone, Copy, Debug)]
struct Stream {
    live: bool,
    tick: u64,
    shape: Shape,
    /// First page of the stream's first read.
    origin: u64,
    /// First page of the last read.
    first: u64,
    /// One past the last page of the last read.
    end: u64,
    /// Forward: one past the furthest page read. Backward: the lowest page read.
    reach: u64,
    /// Pages in the last read.
    record: u64,
    /// Stride: page distance between read starts (signed).
    delta: i64,
    /// Forward: pages of gap read through.
    skip: u64,
    /// Forward: first page of the run of reads since the last skip ahead, and the run and skip
    /// the last skip made (`period_seen` times in a row): from the first, readahead follows
    /// it, stopping at each run's end and going on after the skip, until a run goes on longer.
    run_start: u64,
    period_run: u64,
    period_skip: u64,
    period_seen: u8,
    /// Reads that continued the stream.
    run: u32,
    /// Pages the stream's reads covered.
    used: u64,
    /// Forward: first page not yet read ahead. Backward: lowest page read ahead. Stride: start
    /// of the next record not yet read ahead.
    frontier: u64,
    /// Pages the next top-up reads (0: no window yet).
    window: u64,
    cached: bool,
    idle_topups: u8,
    misses: u8,
    since_miss: u32,
}

impl Stream {
    const EMPTY: Stream = Stream {
        live: false,
        tick: 0,
        shape: Shape::Unknown,
        origin: 0,
        first: 0,
        end: 0,
        reach: 0,
        record: 0,
        delta: 0,
        skip: 0,
        run_start: 0,
        period_run: 0,
        period_skip: 0,
        period_seen: 0,
        run: 0,
        used: 0,
        frontier: 0,
        window: 0,
        cached: false,
        idle_topups: 0,
        misses: 0,
        since_miss: 0,
    };

    fn confirmed(&self) -> bool {
        self.shape != Shape::Unknown
    }

    /// Pages read ahead that the reader has not reached.
    fn ahead_pages(&self) -> u64 {
        match self.shape {
            Shape::Unknown => 0,
            Shape::Forward => self.frontier.saturating_sub(self.reach),
            Shape::Backward => self.reach.saturating_sub(self.frontier),
            Shape::Stride => self.records_ahead() * self.record,
        }
    }

    /// Stride: records read ahead past the last one read.
    fn records_ahead(&self) -> u64 {
        if self.delta == 0 {
            return 0;
        }
        let span = self.frontier as i64 - self.first as i64;
        (span / self.delta - 1).max(0) as u64
    }

    /// Forward: the reader skipped ahead to `s`: the run it ended and the skip, counted if
    /// the same as the last. Only a run of several reads, no shorter than the skip, counts:
    /// readers taking turns over one file, or records with small gaps between them, also jump
    /// ahead within what was read ahead, and are better served by reading through.
    fn note_skip(&mut self, s: u64) {
        let (run, skip) = (self.reach - self.run_start, s - self.reach);
        if run < skip.max(4 * self.record) {
            self.period_seen = 0;
        } else if (run, skip) == (self.period_run, self.period_skip) {
            self.period_seen = self.period_seen.saturating_add(1);
        } else {
            (self.period_run, self.period_skip, self.period_seen) = (run, skip, 1);
        }
        self.run_start = s;
    }

    /// Forward: where a window of `pages` from `from` goes once the stream has made a skip:
    /// past the skip if `from` falls in one, and no further than its run's end.
    fn follow_period(&self, from: u64, pages: u64) -> (u64, u64) {
        if self.period_seen < 1 || self.period_run == 0 || from < self.run_start {
            return (from, pages);
        }
        let period = self.period_run + self.period_skip;
        let off = (from - self.run_start) % period;
        let (from, off) = if off >= self.period_run {
            (from + period - off, 0)
        } else {
            (from, off)
        };
        (from, pages.min(self.period_run - off).max(1))
    }

    /// How `(s, e)` relates to this stream, if at all, at read number `now`.
    fn join(&self, s: u64, e: u64, now: u64) -> Option<Join> {
        if !self.live {
            return None;
        }
        let len = e - s;
        match self.shape {
            Shape::Unknown | Shape::Forward => {
                let behind = self.reach.saturating_sub(1);
                if s >= behind && s <= self.reach + self.skip && e > self.reach {
                    return Some(Join::Continues);
                }
            }
            _ => {}
        }
        match self.shape {
            Shape::Unknown | Shape::Backward => {
                let low = if self.shape == Shape::Backward {
                    self.reach
                } else {
                    self.first
                };
                if e <= low + 1 && e >= low && s < low {
                    return Some(Join::Continues);
                }
            }
            _ => {}
        }
        if self.shape == Shape::Stride
            && s as i64 - self.first as i64 == self.delta
            && len.abs_diff(self.record) <= 1
        {
            return Some(Join::Continues);
        }
        if s == self.first && e == self.end {
            return Some(Join::Repeats);
        }
        // Inside the window only counts for a stream read in the last few reads (threads racing
        // over one region); a random read into an old window is just a cache hit.
        let recent = now.saturating_sub(self.tick) <= RACE_READS;
        match self.shape {
            Shape::Forward if self.window > 0 && recent => {
                let low = self.first.saturating_sub(self.window);
                if s >= low && s < self.frontier.max(self.reach) {
                    return Some(Join::InWindow);
                }
            }
            // Pages this stream read ahead and nobody has reached yet: whoever reads them is
            // its reader, however many other reads came between.
            Shape::Forward if self.window > 0 && s >= self.reach && s < self.frontier => {
                return Some(Join::InWindow);
            }
            Shape::Backward
                if self.window > 0
                    && recent
                    && s >= self.frontier
                    && e <= self.end + self.window =>
            {
                return Some(Join::InWindow);
            }
            _ => {}
        }
        // A skip ahead by a stream that has shown itself sequential is no sign of random reads:
        // up to four windows (or records) or half of what it has read, it goes on.
        if self.shape == Shape::Forward && self.run >= 2 && recent && s > self.reach + self.skip {
            let limit = (4 * self.window.max(self.record)).max(self.used / 2);
            if s - self.reach <= limit {
                return Some(Join::Skips);
            }
        }
        if self.shape == Shape::Unknown || (self.shape == Shape::Forward && self.run == 0) {
            let d = s as i64 - self.first as i64;
            if d.unsigned_abs() > self.record
                && d.unsigned_abs() <= MAX_STRIDE_PAGES
                && len.abs_diff(self.record) <= 1
            {
                if self.delta == d {
                    return Some(Join::StrideConfirms);
                }
                if self.delta == 0 {
                    return Some(Join::StrideCandidate);
                }
            }
        }
        None
    }
}

/// Speculation around random reads: a read that joins no stream and misses may bring in the
/// aligned block of `block` pages around it, when the reads so far say those pages will be read
/// (see the module comment).
#[derive(Clone, Copy, Debug)]
struct Speculation {
    /// Pages a random miss brings in (a power of two; 0: only what is asked).
    block: u64,
    /// Speculative pages issued, and random reads that landed on a cached page of a speculated
    /// granule.
    issued: u64,
    hits: u64,
    /// Pages of the reads that joined no stream and went back (twice: see `on_read`).
    jump_pages: u64,
    /// First page of the file's last read.
    last_first: u64,
    /// After speculation stopped, the jump pages at which the prior may start it again.
    retry_at: u64,
    /// The jump pages at which what speculation earned is judged.
    judge_at: u64,
    /// Where the in-order read of the whole file started, and how far it has gone.
    sweep_from: u64,
    swept: u64,
    /// Granules brought in by speculation, hashed into 4096 bits.
    marks: [u64; 64],
}

impl Speculation {
    const OFF: Speculation = Speculation {
        block: 0,
        issued: 0,
        hits: 0,
        jump_pages: 0,
        last_first: 0,
        retry_at: 0,
        judge_at: u64::MAX,
        sweep_from: 0,
        swept: 0,
        marks: [0; 64],
    };

    fn bit(page: u64) -> (usize, u64) {
        let h = (page / SPEC_GRANULE).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52;
        ((h / 64) as usize, 1 << (h % 64))
    }

    fn marked(&self, page: u64) -> bool {
        let (w, b) = Self::bit(page);
        self.marks[w] & b != 0
    }

    fn mark(&mut self, start: u64, end: u64) {
        let mut g = start / SPEC_GRANULE;
        while g * SPEC_GRANULE < end {
            let (w, b) = Self::bit(g * SPEC_GRANULE);
            self.marks[w] |= b;
            g += 1;
        }
    }
}

/// The largest power of two at most `n` (n > 0).
fn prev_power_of_two(n: u64) -> u64 {
    1 << (63 - n.leading_zeros())
}

/// Pages that must stay ahead of a reader whose window is `window`: at least the window, what
/// the device needs in flight, at most `cap`.
fn lead(window: u64, device_lead: u64, cap: u64) -> u64 {
    window.max(device_lead).min(cap).max(1)
}

/// The most one stream may read in one top-up (`window`) and keep ahead of its reader
/// (`lead`), in pages.
#[derive(Clone, Copy, Debug)]
struct Caps {
    window: u64,
    lead: u64,
}

/// What sizes a stream's next window: the device's costs and the application's hint.
#[derive(Clone, Copy, Debug)]
struct Sizing {
    request_cost: u64,
    miss_cost: u64,
    sequential: bool,
}

impl Sizing {
    /// Grow a stream's window for its next top-up. The first is sized from the read, but no
    /// smaller than what one request costs the device (`floor`, a seek's worth of pages on a
    /// disk), so no window pays more for its request than for its pages.
    fn next_window(self, st: &Stream, cap: u64) -> u64 {
        let floor = self.request_cost;
        if st.window == 0 && self.sequential {
            // The application's word: a window four times the usual first, or what a miss
            // costs its reader if more (one round trip to an object store), the ramp after.
            (4 * get_init_ra_size(st.record.max(1), cap))
                .max(floor)
                .max(self.miss_cost)
                .min(cap)
        } else if st.window == 0 {
            get_init_ra_size(st.record.max(1), cap).max(floor.min(cap))
        } else {
            get_next_ra_size(st.window, cap).min(cap)
        }
    }
}

/// The adaptive policy's per-open-file state. See the module comment.
#[derive(Debug)]
pub struct Adaptive {
    streams: [Stream; STREAMS],
    tick: u64,
    ra_max: u64,
    io_max: u64,
    /// Pages the device needs in flight (latency x bandwidth); 0 until the driver says.
    device_lead: u64,
    /// Pages one extra request costs the device (its overhead at full bandwidth).
    request_cost: u64,
    /// Pages' worth of time a reader loses to one small miss: a request's latency and overhead
    /// at full bandwidth.
    miss_cost: u64,
    /// Largest window and lead after thrashing (u64::MAX: no thrashing seen).
    thrash_cap: u64,
    clean_topups: u32,
    congested: bool,
    random: bool,
    sequential: bool,
    limit: u64,
    /// Pages this file read ahead, and the part of them estimated lost (left ahead by streams
    /// that were abandoned, or evicted unused): the file's record of how well betting pays.
    ahead_issued: u64,
    ahead_lost: u64,
    /// Betting does not pay here (over 3% lost): every stream bets as a strided one does.
    conservative: bool,
    /// The stream the previous read joined.
    last: usize,
    /// The whole file fits in its share of the cache: what is read ahead stays until read.
    file_fits: bool,
    /// Reads that joined no stream, and those of them that landed on cached pages.
    jumps: u64,
    jumps_onto_cached: u64,
    spec: Speculation,
}

impl Adaptive {
    /// A fresh state with `config`'s maximum window and largest I/O.
    pub fn new(config: PolicyConfig) -> Adaptive {
        Adaptive {
            streams: [Stream::EMPTY; STREAMS],
            tick: 0,
            ra_max: config.ra_max_pages.max(1),
            io_max: config.io_max_pages.max(1),
            device_lead: 0,
            request_cost: 0,
            miss_cost: 0,
            thrash_cap: u64::MAX,
            clean_topups: 0,
            congested: false,
            random: false,
            sequential: false,
            limit: u64::MAX,
            ahead_issued: 0,
            ahead_lost: 0,
            conservative: false,
            last: 0,
            file_fits: false,
            jumps: 0,
            jumps_onto_cached: 0,
            spec: Speculation::OFF,
        }
    }

    fn sizing(&self) -> Sizing {
        Sizing {
            request_cost: self.request_cost,
            miss_cost: self.miss_cost,
            sequential: self.sequential,
        }
    }

    /// Whether another stream's last read lies in what stream `i` read ahead: another reader
    /// is using those pages (threads sharing the file), so leaving them is no loss.
    fn ahead_read_by_others(&self, i: usize) -> bool {
        let v = &self.streams[i];
        let (lo, hi) = match v.shape {
            Shape::Forward => (v.reach, v.frontier),
            Shape::Backward => (v.frontier, v.reach),
            _ => return false,
        };
        lo < hi
            && self
                .streams
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && o.live && o.first < hi && o.end > lo)
    }

    /// Account pages read ahead (`issued`) and pages lost, and decide whether to bet less.
    fn account(&mut self, issued: u64, lost: u64) {
        self.ahead_issued += issued;
        self.ahead_lost += lost;
        if self.ahead_issued > 1 << 20 {
            // Remember the recent past more than the distant one.
            self.ahead_issued /= 2;
            self.ahead_lost /= 2;
        }
        // A few pages lost at the start prove nothing: judge against a prior of BET_PRIOR.
        if self.ahead_lost * 32 > self.ahead_issued + BET_PRIOR {
            self.conservative = true;
        } else if self.ahead_lost * 64 < self.ahead_issued {
            self.conservative = false;
        }
    }

    /// A read `(s, e)` that joins no stream: count what speculation brought in that it uses,
    /// and, if it misses and speculating pays, bring in the aligned block around it.
    fn speculate(&mut self, s: u64, e: u64, ctx: &mut dyn RaContext) {
        if ctx.is_cached(s) {
            if self.spec.marked(s) {
                self.spec.hits += 1;
            }
            return;
        }
        let block = self.spec_block(ctx);
        if block == 0 {
            return;
        }
        // The miss brings in the aligned block around it that a miss's own cost pays for (twice
        // its pages' worth, at most the largest block): the sweep (below) brings in the rest
        // of the file, and a larger block would only hold the reader up on pages it does not
        // need yet.
        let block = (2 * self.miss_cost).next_power_of_two().min(block);
        let start = s & !(block - 1);
        let end = (start + block).max(e).min(self.limit).min(ctx.file_pages());
        if self.spec.swept == 0 {
            self.spec.sweep_from = end;
        }
        if end <= e && start == s {
            return;
        }
        let started = self
            .issue(ctx, IoKind::Sync, start, end - start, end - start)
            .saturating_sub(e - s);
        self.spec.mark(start, end);
        self.spec.issued += started;
    }

    /// While speculation is on, the file is also read ahead in order, a block (or what the
    /// device needs in flight, if more) for each random read, from the first speculated block
    /// on round to it: the whole file fits, the reads say it will be read, and in order is how
    /// the device streams it best. A little at a time keeps the queue short for the reads that
    /// miss.
    fn sweep(&mut self, ctx: &mut dyn RaContext) {
        let block = self.spec.block;
        let last = self.limit.min(ctx.file_pages());
        if block == 0 || self.spec.swept >= last {
            return;
        }
        // A block, or what the device needs in flight if more (an object store's round trip).
        let mut budget = block.max(self.device_lead);
        while budget > 0 && self.spec.swept < last {
            let from = (self.spec.sweep_from + self.spec.swept) % last.max(1);
            let pages = block
                .min(budget)
                .min(last - from)
                .min(last - self.spec.swept);
            let started = self.issue(ctx, IoKind::Ahead, from, pages, 0);
            self.spec.mark(from, from + pages);
            self.spec.issued += started;
            self.spec.swept += pages;
            budget -= pages;
        }
    }

    /// The block a random miss of `record` pages brings in now (0: none). Only a file that fits
    /// in its share of the cache is speculated on: every page brought in then stays until a read
    /// comes for it, and reading all of it is the most speculation can cost. A random miss costs
    /// the device and its reader `unit` pages' worth of time (its latency and its request), so
    /// speculative pages pay when at least one in `unit` is read later. Before any are, the
    /// reads so far are the guide: a page brought in now will be read about as often in the time
    /// to come as pages were in the time gone, and random reads have read `jump_pages` of the
    /// file's pages. Once that makes speculation pay, a miss brings in the largest aligned block
    /// (its own request's worth: the device's largest I/O, within half the budget). What the
    /// speculative pages earn is then the judge: once random reads have had time to come for
    /// them (a quarter of the file's pages read since the start), speculation stops if they earned
    /// less than half their cost, and is tried again only when the random reads have doubled.
    fn spec_block(&mut self, ctx: &dyn RaContext) -> u64 {
        let sp = &mut self.spec;
        let file = ctx.file_pages().max(1);
        let budget = ctx.readahead_budget();
        if file > 2 * budget {
            return 0;
        }
        let unit = self.miss_cost.max(1);
        if sp.block > 0 {
            if sp.jump_pages >= sp.judge_at {
                if 2 * sp.hits * unit < sp.issued {
                    sp.block = 0;
                    sp.retry_at = 2 * sp.jump_pages;
                }
                sp.judge_at = u64::MAX;
            }
        } else if sp.jump_pages >= sp.retry_at && sp.jump_pages.saturating_mul(2 * unit) >= file {
            sp.block = prev_power_of_two(self.io_max.min(budget / 2).max(1));
            sp.judge_at = sp.jump_pages + file / 4;
        }
        sp.block
    }

    /// Count a read that joined no stream, and whether it landed on cached pages.
    fn note_jump(&mut self, onto_cached: bool) {
        self.jumps += 1;
        self.jumps_onto_cached += onto_cached as u64;
        if self.jumps > 1 << 12 {
            self.jumps /= 2;
            self.jumps_onto_cached /= 2;
        }
    }

    /// Whether the file is being read whole in a scrambled order: it fits in its share of the
    /// cache, and jumps keep landing on pages read earlier (iozone's mix; a join over a table
    /// that fits in memory). Then nothing read ahead is lost (it stays until some read comes
    /// for it), and forward streams read ahead at full size, as the kernel's page cache does.
    fn read_whole(&self) -> bool {
        self.file_fits && self.jumps_onto_cached >= 8 && self.jumps_onto_cached * 32 >= self.jumps
    }

    /// The most stream `st` may have ahead: what it has shown (four times its pages so far, or
    /// one request's cost if more; 1/128 of them for a stride, or for any stream where betting
    /// has not paid), within `cap`.
    fn bet(&self, st: &Stream, cap: u64) -> u64 {
        // A forward stream under a sequential hint has the application's word for it.
        if (self.sequential || self.read_whole()) && st.shape == Shape::Forward {
            return cap;
        }
        let shown = if st.shape == Shape::Stride {
            (st.used / STRIDE_BET).max(STRIDE_PRIOR)
        } else if self.conservative {
            st.used / STRIDE_BET
        } else {
            // No smaller than what one request costs the device (a smaller window would cost
            // more than its pages are worth), or, once a stream has continued, than what a miss
            // costs its reader (on an object store, a round trip's worth of bandwidth: ramping
            // up from less would pay a round trip per doubling), where it is the file's one
            // stream (many streams ramp as usual: their windows together must fit the cache).
            // Continued twice: two reads in a row can be chance among random ones.
            let floor = if st.run >= 2 && self.active_streams() == 1 {
                self.miss_cost
            } else {
                self.request_cost
            };
            (4 * st.used.max(st.record)).max(floor)
        };
        cap.min(shown)
    }

    /// The stream `(s, e)` joins, and how.
    fn find(&self, s: u64, e: u64) -> Option<(usize, Join)> {
        // The previous read's stream, continued: the common case, and the answer the scan
        // would give (`Continues` is the best join, and this stream is the most recent).
        if self.streams[self.last].join(s, e, self.tick) == Some(Join::Continues) {
            return Some((self.last, Join::Continues));
        }
        let mut best: Option<(usize, Join)> = None;
        for (i, st) in self.streams.iter().enumerate() {
            if let Some(j) = st.join(s, e, self.tick) {
                let better = match best {
                    None => true,
                    Some((b, bj)) => j < bj || (j == bj && st.tick > self.streams[b].tick),
                };
                if better {
                    best = Some((i, j));
                }
            }
        }
        best
    }

    /// A slot for a new stream: an empty one, else the least recently used.
    fn free_slot(&self) -> usize {
        let mut pick = 0;
        for (i, st) in self.streams.iter().enumerate() {
            if !st.live {
                return i;
            }
            if st.tick < self.streams[pick].tick {
                pick = i;
            }
        }
        pick
    }

    /// Streams of this file that read ahead now.
    fn active_streams(&self) -> u64 {
        self.streams
            .iter()
            .filter(|s| s.live && s.confirmed() && s.window > 0 && !s.cached)
            .count()
            .max(1) as u64
    }

    /// The largest window and lead one stream may have. The window is the configured maximum
    /// (or, where a request costs the device more than that window's transfer, a seek's or a
    /// queue slot's worth of pages four times over, so a request's cost is amortized), within
    /// half the file's budget shared among its streams, and the cap thrashing left. The lead
    /// follows the device (what it needs in flight) within the rest of three quarters of that
    /// share.
    fn stream_caps(&self, ctx: &dyn RaContext) -> Caps {
        let share = (self.ahead_budget(ctx) / self.active_streams()).max(1);
        let window = self
            .ra_max
            .max(4 * self.request_cost)
            .min(share / 2)
            .min(self.thrash_cap)
            .max(1);
        // A top-up brings in a window when less than the lead is ahead: both within three
        // quarters of the share. (A page read ahead is passed in the cache's LRU order by what
        // comes in after it and by what the reader touches before it, twice what is ahead: a
        // full share would have the cache evict it at the margin.)
        let lead = (share * 3 / 4)
            .saturating_sub(window)
            .min(self.thrash_cap)
            .max(window);
        Caps { window, lead }
    }

    /// Pages this file's streams may hold read ahead together: the driver's readahead budget,
    /// or, for a file no larger than its share of the whole cache (twice that budget, the half
    /// kept for pages already used included), all of that share: every page of the file fits
    /// at once, so nothing read ahead can be evicted by the file's own reads before its reader
    /// comes, and the historical kernels' windows, which take the whole cache, would not beat
    /// it there.
    fn ahead_budget(&self, ctx: &dyn RaContext) -> u64 {
        let budget = ctx.readahead_budget();
        if ctx.file_pages() <= budget.saturating_mul(2) {
            budget.saturating_mul(2)
        } else {
            budget
        }
    }

    /// Whether a gap of `gap` pages between records of `record` pages is read through: it is
    /// cheaper than a separate request and wastes at most 1%, or a separate request costs the
    /// device four times what the gap's pages do (a seek on a disk, a round trip to a store),
    /// whatever it wastes.
    fn reads_through(&self, gap: u64, record: u64) -> bool {
        gap > 0 && (gap < self.request_cost && gap * 100 <= record || 4 * gap <= self.request_cost)
    }

    /// Start I/O `[start, start + pages)` of `kind`, clipped at the limit, in requests of at
    /// most the largest I/O (the first at least `whole` pages: a read is never split). The
    /// marker goes on the first page. Returns pages newly brought in.
    fn issue(
        &self,
        ctx: &mut dyn RaContext,
        kind: IoKind,
        start: u64,
        pages: u64,
        whole: u64,
    ) -> u64 {
        let end = start
            .saturating_add(pages)
            .min(self.limit)
            .min(ctx.file_pages());
        let mut p = start;
        let mut started = 0;
        let mut first = true;
        while p < end {
            let n = if first {
                self.io_max.max(whole)
            } else {
                self.io_max
            }
            .min(end - p);
            let mut io = IoRequest::of_kind(if first { kind } else { IoKind::Ahead }, p, n);
            if first {
                io = io.with_marker(p);
            }
            started += ctx.start_io(io);
            first = false;
            p += n;
        }
        started
    }

    /// Read ahead for stream `i` after its read `(s, e)`, if the reader reached the marker.
    fn top_up(&mut self, i: usize, s: u64, e: u64, ctx: &mut dyn RaContext) {
        let caps = self.stream_caps(ctx);
        let st = self.streams[i];
        let missed = !ctx.is_cached(s);
        // A congested queue defers the top-up while what is ahead still covers the reader's
        // next read; what the reader would wait for is never deferred.
        if self.congested && !missed && st.ahead_pages() >= 2 * st.record {
            return;
        }
        let mut caps = if st.shape == Shape::Unknown {
            caps
        } else {
            Caps {
                window: self.bet(&st, caps.window).max(1),
                lead: self.bet(&st, caps.lead).max(1),
            }
        };
        // A proven forward stream whose reads are larger than the window still keeps its next
        // read ahead: the window is one read.
        if st.shape == Shape::Forward
            && st.run > 0
            && caps.window < st.record
            && st.record <= caps.lead
        {
            caps.window = st.record;
        }
        if caps.window < st.record {
            // A bet smaller than one of the reader's records would not hold its next read, only
            // split it in two requests (the pages ahead and the rest): read what it asks for.
            if missed && st.shape != Shape::Unknown {
                let started = self.issue(ctx, IoKind::Sync, s, e - s, e - s);
                self.account(started, 0);
            }
            return;
        }
        let started = match st.shape {
            Shape::Forward => self.top_up_forward(i, s, e, caps, missed, ctx),
            Shape::Backward => self.top_up_backward(i, s, e, caps, missed, ctx),
            Shape::Stride => self.top_up_stride(i, s, e, caps, missed, ctx),
            Shape::Unknown => None,
        };
        let Some(started) = started else { return };
        self.account(started, 0);
        let st = &mut self.streams[i];
        if started == 0 {
            st.idle_topups += 1;
            if st.idle_topups >= CACHED_OFF_AFTER {
                st.cached = true;
                st.misses = 0;
                st.since_miss = 0;
            }
        } else {
            st.idle_topups = 0;
        }
        if self.thrash_cap != u64::MAX {
            self.clean_topups += 1;
            if self.clean_topups >= REGROW_EVERY {
                self.clean_topups = 0;
                self.thrash_cap += (self.thrash_cap / 8).max(1);
                if self.thrash_cap >= self.ra_max {
                    self.thrash_cap = u64::MAX;
                }
            }
        }
    }

    fn top_up_forward(
        &mut self,
        i: usize,
        s: u64,
        e: u64,
        caps: Caps,
        missed: bool,
        ctx: &mut dyn RaContext,
    ) -> Option<u64> {
        let (dl, sz) = (self.device_lead, self.sizing());
        let st = &mut self.streams[i];
        if st.frontier < st.reach {
            st.frontier = st.reach;
        }
        let window = sz.next_window(st, caps.window);
        // The marker: the next window starts when less than the lead for the window out now
        // is ahead (its first page reached), not the lead the next, larger window will want.
        let need = lead(
            if st.window > 0 { st.window } else { window },
            dl,
            caps.lead,
        );
        if !missed && st.frontier - st.reach >= need {
            return None; // the marker is still ahead of the reader
        }
        if missed {
            // The reader waits: its read, and the first window if none is out, in one request.
            // The window counts from the read (as the kernel's initial window does); the next
            // one starts when the reader passes the marker.
            if st.frontier > e {
                return Some(self.issue(ctx, IoKind::Sync, s, e - s, e - s));
            }
            // The lead waits for the stream to continue, hinted or not: many files opened at
            // once with the hint (a merge) would each put their whole lead ahead of the next
            // file's first read.
            let proven = st.run > 0;
            // A guess brings in one window counted from the read, or, when the memory budget
            // has shrunk the window to no more than the read (many files sharing the cache),
            // one window past it: else the guess would be no bet at all, and the next read
            // would wait too. (A window that the configured maximum or thrashing holds to the
            // read's size stays so.)
            let budget_bound = caps.window < self.ra_max.min(self.thrash_cap);
            let pages = if !proven && budget_bound && window <= e - s {
                (e - s) + window
            } else {
                (e - s).max(window)
            };
            // No further than the run's end, where runs and skips repeat, or than where
            // another reader began.
            let pages = st.follow_period(s, pages).1;
            let bound = self.partition_end(i);
            let pages = pages.min(bound.saturating_sub(s)).max(e - s);
            let st = &mut self.streams[i];
            st.frontier = s + pages;
            st.window = window;
            let started = self.issue(ctx, IoKind::Sync, s, pages, e - s);
            if !proven {
                // A guess (a file read from its start): one window, no lead yet.
                return Some(started);
            }
            return Some(started + self.lead_loop(i, window, caps, ctx));
        }
        Some(self.lead_loop(i, window, caps, ctx))
    }

    /// Where forward stream `i`'s readahead stops: the first page at which another forward
    /// stream began, ahead of `i`'s reader, and has read on from (u64::MAX if none). Readers
    /// that each began at their own place (threads reading a part each, the runs of a merge)
    /// end where the next began; the pages there were read once already, and if they are
    /// evicted, reading them again is a bet on a reader who has shown no sign of wanting
    /// them. Once `i`'s reader reads there, it goes on as before.
    fn partition_end(&self, i: usize) -> u64 {
        let reach = self.streams[i].reach;
        self.streams
            .iter()
            .enumerate()
            .filter(|&(j, o)| {
                j != i && o.live && o.shape == Shape::Forward && o.origin + 1 >= reach && o.reach > o.origin + 1
            })
            .map(|(_, o)| o.origin + 1)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Start windows ahead of forward stream `i` until `lead` pages are ahead of its reader.
    fn lead_loop(&mut self, i: usize, window: u64, caps: Caps, ctx: &mut dyn RaContext) -> u64 {
        let (dl, sz) = (self.device_lead, self.sizing());
        let mut window = window;
        let mut started = 0;
        loop {
            let st = &mut self.streams[i];
            if st.frontier - st.reach >= lead(st.window.max(window), dl, caps.lead) {
                break;
            }
            if st.window > 0 {
                window = sz.next_window(st, caps.window);
            }
            let (from, pages) = st.follow_period(st.frontier, window);
            let bound = self.partition_end(i);
            if from >= self.limit.min(ctx.file_pages()).min(bound) {
                break;
            }
            let pages = pages.min(bound - from);
            let st = &mut self.streams[i];
            st.frontier = from + pages;
            st.window = window;
            started += self.issue(ctx, IoKind::Ahead, from, pages, 0);
        }
        started
    }

    fn top_up_backward(
        &mut self,
        i: usize,
        s: u64,
        e: u64,
        caps: Caps,
        missed: bool,
        ctx: &mut dyn RaContext,
    ) -> Option<u64> {
        let (dl, sz) = (self.device_lead, self.sizing());
        let st = &mut self.streams[i];
        if st.frontier > st.reach || st.window == 0 {
            st.frontier = st.reach;
        }
        let window = sz.next_window(st, caps.window);
        let need = lead(window, dl, caps.lead);
        if !missed && st.reach - st.frontier >= need {
            return None;
        }
        let mut started = 0;
        if missed {
            started += self.issue(ctx, IoKind::Sync, s, e - s, e - s);
        }
        let mut window = window;
        loop {
            let st = &mut self.streams[i];
            if st.frontier == 0
                || st.reach - st.frontier >= lead(st.window.max(window), dl, caps.lead)
            {
                break;
            }
            if st.window > 0 {
                window = sz.next_window(st, caps.window);
            }
            let from = st.frontier.saturating_sub(window);
            let pages = st.frontier - from;
            st.frontier = from;
            st.window = window;
            // Nearest pages first: the reader needs the top of the window soonest.
            let mut top = from + pages;
            while top > from {
                let n = self.io_max.min(top - from);
                if top - n < self.limit {
                    started += self.issue(ctx, IoKind::Ahead, top - n, n, 0);
                }
                top -= n;
            }
        }
        Some(started)
    }

    fn top_up_stride(
        &mut self,
        i: usize,
        s: u64,
        e: u64,
        caps: Caps,
        missed: bool,
        ctx: &mut dyn RaContext,
    ) -> Option<u64> {
        let dl = self.device_lead;
        let mut started = 0;
        if missed {
            started += self.issue(ctx, IoKind::Sync, s, e - s, e - s);
        }
        // Readers taking turns over one file (threads each reading the next chunk) look like a
        // stride until the others read the gaps. A forward stride whose pages just before
        // this record have been read by others is one of them. If a forward stream already
        // follows this place, the stride was only its echo and goes; otherwise it becomes the
        // forward stream.
        let st = self.streams[i];
        if st.delta > st.record as i64 && s >= 2 && ctx.is_cached(s - 1) && ctx.is_cached(s - 2) {
            let followed = (0..STREAMS).any(|j| {
                j != i
                    && self.streams[j].shape == Shape::Forward
                    && matches!(
                        self.streams[j].join(s, e, self.tick),
                        Some(Join::Continues | Join::InWindow)
                    )
            });
            if followed {
                self.streams[i] = Stream::EMPTY;
                return Some(started);
            }
            let st = &mut self.streams[i];
            // Its frontier ran along the stride; as a forward stream nothing is ahead yet.
            st.shape = Shape::Forward;
            st.reach = e;
            st.frontier = e;
            st.window = 0;
            st.delta = 0;
            return Some(started + self.top_up_forward(i, s, e, caps, false, ctx).unwrap_or(0));
        }
        let st = &mut self.streams[i];
        let next = st.first as i64 + st.delta;
        let behind = if st.delta > 0 {
            (st.frontier as i64) < next
        } else {
            (st.frontier as i64) > next
        };
        if behind {
            st.frontier = next.max(0) as u64;
        }
        // `cap` already holds the bet (1/128 of what the stream has used); the lead caps it too.
        let allowed = lead(caps.window.min(st.record * 4), dl, caps.window);
        let records = allowed / st.record.max(1);
        let ahead = st.records_ahead();
        if ahead >= records || ahead > records / 2 && !missed {
            return if missed { Some(started) } else { None };
        }
        st.window = records * st.record;
        let (record, delta) = (st.record, st.delta);
        let end = self.limit.min(ctx.file_pages());
        for _ in ahead..records {
            let st = &mut self.streams[i];
            let from = st.frontier;
            if from >= end {
                break;
            }
            let next = from as i64 + delta;
            if next < 0 {
                st.frontier = from;
                break;
            }
            st.frontier = next as u64;
            started += self.issue(ctx, IoKind::Ahead, from, record, record);
            if delta < 0 && from == 0 {
                break;
            }
        }
        Some(started)
    }

    /// A read that joins stream `i` as `join`: update its history.
    fn advance(&mut self, i: usize, join: Join, s: u64, e: u64) {
        let rt = self.reads_through_gap(i, s);
        let st = &mut self.streams[i];
        st.tick = self.tick;
        let len = e - s;
        match join {
            Join::Continues => {
                match st.shape {
                    Shape::Unknown | Shape::Forward if s + 1 >= st.reach && e > st.reach => {
                        if st.shape == Shape::Unknown {
                            st.frontier = st.frontier.max(st.reach);
                        }
                        // A gap read through is the stream's as much as the read: its pages
                        // count towards what the stream has shown.
                        st.used += s.saturating_sub(st.reach);
                        st.shape = Shape::Forward;
                        st.reach = e;
                        // A run longer than the last: the runs do not repeat.
                        if st.period_seen > 0 && e > st.run_start + st.period_run {
                            st.period_seen = 0;
                        }
                    }
                    Shape::Unknown | Shape::Backward => {
                        if st.shape == Shape::Unknown {
                            st.reach = st.first;
                            st.frontier = st.first;
                        }
                        st.shape = Shape::Backward;
                        st.reach = st.reach.min(s);
                    }
                    _ => {}
                }
                st.run += 1;
                st.used += len;
            }
            Join::InWindow => {
                if st.shape == Shape::Forward {
                    if s > st.reach + st.skip {
                        // A skip ahead within what was read ahead: a run and a skip.
                        st.note_skip(s);
                    }
                    st.reach = st.reach.max(e);
                } else {
                    st.reach = st.reach.min(s);
                }
                st.used += len;
                st.run += 1;
            }
            Join::Repeats => {}
            Join::Skips => {
                st.note_skip(s);
                st.reach = e;
                st.run += 1;
                st.used += len;
            }
            Join::StrideConfirms => {
                // Third read at the same distance: a stride, or a gap to read through.
                let d = st.delta;
                if let Some(gap) = rt {
                    st.shape = Shape::Forward;
                    st.skip = gap;
                    st.reach = e;
                    st.frontier = e;
                } else {
                    st.shape = Shape::Stride;
                    st.frontier = (s as i64 + d).max(0) as u64;
                }
                st.run += 1;
                st.used += len;
            }
            Join::StrideCandidate => unreachable!("a stride candidate starts its own stream"),
        }
        st.first = s;
        st.end = e;
        st.record = len;
    }

    /// The gap stream `i` would read through if `s` continued its stride, if small enough.
    fn reads_through_gap(&self, i: usize, s: u64) -> Option<u64> {
        let st = &self.streams[i];
        let d = s as i64 - st.first as i64;
        if d <= 0 || st.delta != d {
            return None;
        }
        let gap = d as u64 - st.record.min(d as u64);
        self.reads_through(gap, st.record).then_some(gap)
    }

    /// A read that joins no stream: start one in a free slot.
    fn start_stream(&mut self, s: u64, e: u64, ctx: &dyn RaContext) -> usize {
        let i = self.free_slot();
        let victim = self.streams[i];
        if victim.live && !victim.cached && !self.ahead_read_by_others(i) {
            // Whatever it had ahead is lost: its reader never came back for it.
            self.account(0, victim.ahead_pages());
        }
        let mut st = Stream::EMPTY;
        st.live = true;
        st.tick = self.tick;
        st.origin = s;
        st.first = s;
        st.end = e;
        st.reach = e;
        st.frontier = e;
        st.record = e - s;
        st.used = e - s;
        st.run_start = s;
        // Forward at once: the file's start, a sequential hint, or cached pages just before
        // (a stream this state lost track of: the kernel's context readahead).
        let context = s >= CONTEXT_PAGES && (s - CONTEXT_PAGES..s).all(|p| ctx.is_cached(p));
        if s == 0 || self.sequential || context {
            st.shape = Shape::Forward;
            st.reach = s;
            st.frontier = s;
        }
        self.streams[i] = st;
        i
    }

    /// A read in a stream whose readahead is off because its pages were cached: count misses.
    fn cached_read(&mut self, i: usize, s: u64, e: u64, ctx: &dyn RaContext) -> bool {
        let st = &mut self.streams[i];
        st.since_miss += 1;
        if st.since_miss > CACHED_SPAN {
            st.misses = 0;
        }
        if !ctx.is_cached(s) || (e - 1 > s && !ctx.is_cached(e - 1)) {
            st.misses += 1;
            st.since_miss = 0;
        }
        // A forward stream that reads towards pages nobody brought in (it ran through pages
        // another stream read ahead, the next run of a merge) turns back on before it misses.
        let ahead = e.saturating_add(st.record);
        let runs_out =
            st.shape == Shape::Forward && ahead < ctx.file_pages() && !ctx.is_cached(ahead);
        if st.misses >= CACHED_ON_MISSES || runs_out {
            st.cached = false;
            st.idle_topups = 0;
            st.frontier = match st.shape {
                Shape::Backward => st.reach,
                Shape::Forward => st.reach,
                _ => st.frontier,
            };
            return true;
        }
        false
    }
}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        if self.random {
            return;
        }
        self.tick += 1;
        let (s, e) = (read.first_page(), read.end_page());
        let found = self.find(s, e);
        self.file_fits = ctx.file_pages() <= ctx.readahead_budget();
        if matches!(found, None | Some((_, Join::StrideCandidate))) {
            self.note_jump(ctx.is_cached(s));
            // Reads in random order go back as often as forward; a pattern that only ever goes
            // forward (a stride, runs with skips) is not random, however its reads join. So the
            // prior counts the jumps back, twice.
            if s < self.spec.last_first {
                self.spec.jump_pages += 2 * (e - s);
            }
            self.speculate(s, e, ctx);
            self.sweep(ctx);
        }
        self.spec.last_first = s;
        let i = match found {
            Some((from, Join::StrideCandidate)) => {
                let d = s as i64 - self.streams[from].first as i64;
                let used = self.streams[from].used;
                let i = self.start_stream(s, e, ctx);
                let st = &mut self.streams[i];
                if st.shape == Shape::Unknown {
                    st.delta = d;
                    st.used += used;
                }
                i
            }
            Some((i, join)) => {
                self.advance(i, join, s, e);
                i
            }
            None => self.start_stream(s, e, ctx),
        };
        self.last = i;
        let st = self.streams[i];
        if !st.confirmed() {
            return;
        }
        if st.cached && !self.cached_read(i, s, e, ctx) {
            return;
        }
        self.top_up(i, s, e, ctx);
        // A stream forward from its first read has now read that read: the next read
        // continues from its end, even when the first window was no larger than the read.
        let st = &mut self.streams[i];
        if st.shape == Shape::Forward && st.run == 0 && st.reach < e {
            st.reach = e;
        }
    }

    fn on_thrashed(&mut self, pages: u64) {
        self.account(0, pages);
        // Shrink the largest live window by a quarter (at least what was lost), never below
        // MIN_CAP; regrowth happens in `top_up`.
        let largest = self
            .streams
            .iter()
            .filter(|s| s.live)
            .map(|s| s.window.max(s.ahead_pages()))
            .max()
            .unwrap_or(self.ra_max)
            .min(self.thrash_cap)
            .min(self.ra_max);
        let shrunk = largest - (largest / 4).max(pages.min(largest / 2));
        self.thrash_cap = shrunk.max(MIN_CAP);
        self.clean_topups = 0;
        for st in self.streams.iter_mut() {
            st.window = st.window.min(self.thrash_cap);
        }
    }

    fn on_congestion(&mut self, congested: bool) {
        self.congested = congested;
    }

    fn on_device(&mut self, estimate: DeviceEstimate) {
        self.device_lead = estimate.inflight_pages();
        // A small miss costs its reader the latency and the request.
        self.miss_cost = DeviceEstimate {
            latency_ns: estimate.latency_ns + estimate.request_overhead_ns,
            ..estimate
        }
        .inflight_pages();
        let cost = DeviceEstimate {
            latency_ns: estimate.request_overhead_ns,
            ..estimate
        };
        self.request_cost = if estimate.request_overhead_ns == 0 {
            0
        } else {
            cost.inflight_pages()
        };
    }

    fn on_hint(&mut self, hint: Hint, ctx: &mut dyn RaContext) {
        match hint {
            Hint::Normal => {
                self.random = false;
                self.sequential = false;
            }
            Hint::Sequential => {
                self.random = false;
                self.sequential = true;
            }
            Hint::Random => {
                self.random = true;
                self.sequential = false;
                for st in self.streams.iter_mut() {
                    *st = Stream::EMPTY;
                }
            }
            Hint::WillNeed { start_page, pages } => {
                self.issue(ctx, IoKind::Ahead, start_page, pages, 0);
            }
            Hint::DontNeed { start_page, pages } => {
                let end = start_page.saturating_add(pages);
                for st in self.streams.iter_mut().filter(|s| s.live) {
                    match st.shape {
                        Shape::Forward if start_page < st.frontier && end > st.reach => {
                            st.frontier = st.reach.max(start_page);
                        }
                        Shape::Backward if end > st.frontier && start_page < st.reach => {
                            st.frontier = st.reach.min(end);
                        }
                        _ => {}
                    }
                }
            }
            Hint::Limit { end_page } => self.limit = end_page,
        }
    }
}

/// This policy's entry in the registry ([`super::POLICIES`]).
pub(super) const REGISTERED: super::Registered = super::Registered {
    name: "adaptive",
    about: "ahead's own: streams per file, backward and strided, sized for the device",
    make: Some(|c| Box::new(Adaptive::new(c))),
};
