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
//!   `read_ahead_kb`), or four requests' cost where that is more. On a disk whose file has
//!   other live streams (threads reading their own parts), their requests come between this
//!   stream's windows and make each one seek, so a window after the first is no smaller than
//!   four seeks' worth: each seek amortized as the largest windows are, not ramped up to a
//!   seek at a time. A forward stream whose reads are larger than the window keeps one read
//!   ahead all the same. Top-ups go out as requests
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
//! time, and what is ahead then is wasted. A disk's lone forward stream (the file's only live
//! stream, contiguous so far) bets a sixteenth of what it has passed over ([`LONE_BET`]), not
//! four times: there a request that continues the last one costs its command and no seek, so
//! a small window costs little, while what is ahead when the reader stops, or first skips, is
//! wasted (a window of a seek's worth or more read through the first skip of a run-and-skip
//! reader whole). A bet smaller than the reader's record is not placed at all: it would not
//! hold the next read, only split it into two requests (the pages ahead, then the rest,
//! waited for).
//!
//! A forward stream's readahead stops where another forward stream of the file began, ahead
//! of its reader (`partition_end`): readers that each began at their own place
//! (threads with a part each, the runs of a merge) end where the next began, and the pages
//! there, read once already, may have been evicted since. If the reader goes on there, so do
//! its windows. A stream whose reader read a run and skipped ahead expects the same again:
//! its windows stop at the next run's end and go on after the skip, until a run goes on
//! longer (one miss, then windows as before). Once the same run and skip have come twice in a
//! row, and each run is at least the largest request, what is ahead of its reader is counted
//! in the runs' pages, not the distance to its frontier: the lead is what it will read.
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
//! and the rest of the file is read ahead in order, a step for each random read: a block, or
//! more where the device needs more in flight or where its per-request cost (a disk's seek,
//! paid by each step, as random misses' blocks come between) would be more than a sixteenth
//! of a block's transfer. What the speculated pages earn is then the judge: once random reads
//! have had time to come for them (a quarter of the file's pages), speculation stops if those
//! that landed on them earned less than half what they cost, and tries again only when random
//! reads have doubled. Every page is charged for the memory it takes as well as for the
//! device's time: while the engine's cache grows into memory it has never used, the kernel's
//! first touch of a page (zeroing it; on a virtual machine perhaps getting it back from the
//! host first) may cost more than reading it, and the driver says what it costs
//! ([`RaContext::first_touch_ns`]). A reader's misses and speculation's reads pay it alike, so
//! on a fresh engine the prior waits for that much more evidence and the ledger below pays for
//! that many fewer pages; the simulator's cache is no memory, and there it costs nothing.
//!
//! **A bet past a miss.** Where a miss costs its reader [`BET_PAYOFF`] times the pages of a
//! first window or more (an object store's round trip; not an SSD's latency, nor a disk's seek,
//! which a window would double),
//! a read that misses and finds nothing on its way for the page after it also brings in a
//! first window past itself, before any stream has shown its shape: the second read of a new
//! stream, or of each of several threads taking turns over their own parts of a file, would
//! otherwise wait a round trip of its own. A bet is won when a later read starts on the page
//! after the read it was placed for; betting stops while fewer than one in four have won (the
//! first three are free). Until one has won, a bet is one more read's worth (the next read
//! of a new stream needs no more to not wait), so random reads lose three reads' worth at
//! most; after a win, bets are full first windows. A read that lands on a bet's pages
//! continues the read the bet was placed for: its stream starts as continued once, and in a
//! file that fits its share of the cache, once a bet has won, one continuation earns a
//! stream a miss's worth ahead (threads taking turns each show their second read a round
//! trip after the first; waiting for a third would cost another).
//!
//! **No harm.** Every bet above is bounded by what the reader has shown or paid, so that a
//! reader nobody tuned for costs little more than the kernel's rule or no readahead at all:
//! * *Noise does not end a stream.* A gap of a record or two ahead (two records read in
//!   swapped order) is no skip: no period is learned from it, and the read passed over,
//!   when it comes, forgets only a period seen once. A skip the reader later comes back into
//!   (it reads the pages it passed over) was no skip: the period is forgotten. A skip
//!   followed by a read where the stream stood before it was a jump elsewhere and back (a
//!   B-tree scan's interior page), also when the jump landed within what was read ahead: the
//!   stream goes on where it was, its readahead as it stood. Unless the skip had repeated a
//!   period and the read after that goes on from where the skip landed: then the skip
//!   stands, and the read that came back was its run's last, late (a mount's reads, answered
//!   by several threads, reach the policy out of order); where that read lies no further past
//!   the run than a run may grow, the period is kept until the next read says which it was.
//!   A miss in a hole of what was read ahead (a skip the period foretold that the reader read
//!   into after all) brings the hole in with it, a window at most, and forgets the period. A
//!   backward stream takes no read past its last read's end for one of its window.
//! * *A skip cheaper than a request is read through*, as a stride's gap is: on a disk a run
//!   and skip of a few pages each is one stream, not a seek per run.
//! * *Speculation spends only what it was given or has earned.* Its net cost, the pages and
//!   requests it spent less the misses its pages saved (each speculated granule's first read
//!   once: a hot page read again saved one miss, not one a read), stays within 1/16 of what
//!   the reader's own misses have cost ([`speculation::SPEC_SHARE_DIV`]), at every moment: a
//!   reader that stops, or a run cut short, has paid at most that share for bets that had not
//!   yet paid. What the speculated pages save pays for more, so on a reader that keeps finding
//!   them the sweep goes on at a pace that compounds (a file read at random to the end is read
//!   whole later than a bet on it would have: the table rows in `tests/common/table.rs` say how
//!   much). A sweep step waits until the ledger pays for all of it. The judge above still stops
//!   speculation when its pages go unread.
//!
//! These are rules of thumb made safe case by case, not a bound proved: the generator of readers
//! nobody tuned for (`tests/no_harm.rs`, `examples/no_harm.rs`) measures what is left, and
//! BENCHMARKS.md says where it stands against the kernel's rule.
//!
//! **Hints.** Sequential: new streams are forward from their first read, their first window
//! four times the unhinted guess. That window is the application's word, not the reader's
//! showing: its successor waits until half of it is used (a merge opens every run with the
//! hint and reads a little of each in turn; their second windows, sent at once, would queue
//! ahead of the next run's first read), except on a device where a later request would seek.
//! Where the first window is less than a miss costs (an object store's round trip), the
//! first read starts the lead too, not the second: waiting to see it would cost a round trip.
//! Random: no readahead at all. Will-need: the range is read ahead, no stream is disturbed.
//! Don't-need: streams whose window covered the range will fetch it again if they get there.
//! Limit: nothing at or past the page is ever read ahead (Lustre's lock extent in the 2004
//! thread).
//!
//! The code follows the prose: `stream` decides which stream a read joins and moves it on,
//! `windows` sizes windows and starts the top-ups, `speculation` handles random reads; this
//! file holds the file's state and the [`Policy`] entry points that call them.

mod speculation;
mod stream;
mod windows;

use super::linux_ondemand::{get_init_ra_size, get_next_ra_size};
use speculation::{Marks, Speculation};
use stream::{Join, Shape, Stream};
use windows::{fits_cache_whole, Sizing};
use super::{AppRead, DeviceEstimate, Hint, IoKind, IoRequest, Policy, PolicyConfig, RaContext};

/// Streams tracked per open file.
pub const STREAMS: usize = 32;
/// Farthest apart, in pages, two reads may start and still be taken for one strided stream.
const MAX_STRIDE_PAGES: u64 = 4096;
/// A strided stream keeps at most 1/`STRIDE_BET` (under 1%) of the pages it has used read ahead,
/// or [`STRIDE_PRIOR`] pages, whichever is more.
pub const STRIDE_BET: u64 = 128;
/// A disk's lone forward stream keeps at most 1/`LONE_BET` of the pages it has passed over
/// ahead (`Adaptive::lone_on_disk`): what is ahead when its reader stops or skips is wasted,
/// and on a disk a continuing request costs little, so a small lead costs little.
pub const LONE_BET: u64 = 16;
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
/// How many times a first window's pages a miss must cost its reader before a read that misses
/// bets a window past itself (an object store's round trip, not an SSD's latency or a disk's
/// seek): a bet that loses then costs the device little of what one that wins saves.
const BET_PAYOFF: u64 = 32;
/// Pages per granule of the marks that tell a speculative page from others.
const SPEC_GRANULE: u64 = 16;

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
    /// The device's time for a page at full bandwidth, in ns (0: not told).
    page_ns: u64,
    /// What a page brought into fresh memory costs beyond the device's time, in sixteenths of
    /// a page's worth (0 while the cache reuses memory): see [`Adaptive::with_memory`].
    first_touch16: u64,
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
    /// The file is no larger than its share of the whole cache ([`windows::fits_cache_whole`]).
    fits_cache_whole: bool,
    /// Reads that joined no stream, and those of them that landed on cached pages.
    jumps: u64,
    jumps_onto_cached: u64,
    spec: Speculation,
    bets: PastBets,
}

/// Windows read past a missed read on a device where a miss costs the reader far more than
/// the window's pages (see `bet_past`): how many were placed, how many a later read came for,
/// and the page after each read a bet was placed for.
#[derive(Clone, Copy, Debug)]
struct PastBets {
    placed: u64,
    won: u64,
    /// The read being handled won a bet: it continues the read the bet was placed for.
    won_now: bool,
    marks: Marks,
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
            page_ns: 0,
            first_touch16: 0,
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
            fits_cache_whole: false,
            jumps: 0,
            jumps_onto_cached: 0,
            spec: Speculation::OFF,
            bets: PastBets {
                placed: 0,
                won: 0,
                won_now: false,
                marks: Marks::EMPTY,
            },
        }
    }

    /// The least a window may be: what one request costs the device, or, on a disk whose
    /// file has other live streams (their requests come between this stream's windows and
    /// make each one seek), four times that, so a window amortizes its seek four times.
    fn window_floor(&self) -> u64 {
        if self.seeks() && self.live_streams() > 1 {
            4 * self.request_cost
        } else {
            self.request_cost
        }
    }

    fn sizing(&self) -> Sizing {
        Sizing {
            floor: self.window_floor(),
            miss_cost: self.miss_cost,
            sequential: self.sequential,
        }
    }

    /// After a read `(s, e)` that missed, where nothing is on its way for the page after it:
    /// bring in a first window past it, if a miss costs the reader [`BET_PAYOFF`] times that
    /// window's pages or more (a round trip to an object store: the reads of a new stream, or of
    /// threads taking turns, that would each wait for one) and at least one in four such bets
    /// has been read since (the first three are free, and one read's worth until one wins). A
    /// bet is won when a later read starts on the page after the read it was placed for.
    fn bet_past(&mut self, s: u64, e: u64, ctx: &mut dyn RaContext) {
        let bets = &mut self.bets;
        let read = (e - s).max(1);
        // Until one has won, a bet is one more read's worth, not a first window: random reads
        // then lose three reads' worth at most.
        let window = if bets.won == 0 {
            2 * read
        } else {
            get_init_ra_size(read, self.ra_max).max(self.request_cost)
        };
        if self.miss_cost < BET_PAYOFF * window
            || bets.placed >= 4 * bets.won + 3
            || e >= ctx.file_pages().min(self.limit)
            || ctx.is_cached(e)
        {
            return;
        }
        bets.marks.insert(e);
        bets.placed += 1;
        self.issue(ctx, IoKind::Ahead, e, window.saturating_sub(e - s).max(1), 0);
    }

    /// The read `(s, e)` joins or starts a stream, which reads ahead if it has shown its shape.
    fn on_read_streams(&mut self, s: u64, e: u64, ctx: &mut dyn RaContext) {
        let found = self.find(s, e);
        self.file_fits = ctx.file_pages() <= ctx.readahead_budget();
        self.fits_cache_whole = windows::fits_cache_whole(ctx);
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

    /// What bringing `pages` into the cache costs, in pages' worth of the device's time: the
    /// device's time, and the kernel's first touch of the memory they take while the cache
    /// grows into fresh memory (a reader's misses pay it too, and speculation's reads, which
    /// may never be used, pay it as theirs).
    fn with_memory(&self, pages: u64) -> u64 {
        pages.saturating_add(pages.saturating_mul(self.first_touch16) / 16)
    }

    /// The pages `worth` pages' worth of time brings into the cache, their memory paid:
    /// [`Adaptive::with_memory`] the other way.
    fn pages_within(&self, worth: u64) -> u64 {
        worth.saturating_mul(16) / (16 + self.first_touch16)
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
        self.first_touch16 = match self.page_ns {
            0 => 0,
            page_ns => ctx.first_touch_ns().saturating_mul(16) / page_ns,
        };
        let missed = !ctx.is_cached(s);
        self.bets.won_now = !missed && self.bets.marks.remove(s);
        if missed {
            // What the reader's own misses cost: what speculation may spend.
            self.spec.demand += self.miss_cost + self.with_memory(e - s);
        } else if self.spec.take_mark(s) {
            // The first read to find a speculated granule: a miss speculation saved, whatever
            // stream it joins (a file read in order and at random finds the sweep's pages both
            // ways). Once per granule: a hot page read again and again saved one miss, not
            // one a read.
            self.spec.saved += self.miss_cost + self.with_memory(e - s);
            self.spec.hits += 1;
        }
        if self.bets.won_now {
            self.bets.won += 1;
        }
        self.on_read_streams(s, e, ctx);
        if missed {
            self.bet_past(s, e, ctx);
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
        self.page_ns = if estimate.bytes_per_sec == 0 {
            0
        } else {
            let ns = crate::units::PAGE_SIZE as u128 * 1_000_000_000;
            (ns / estimate.bytes_per_sec as u128).max(1) as u64
        };
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
