//! `oracle`: the lower bound every report shows beside the real policies. It cannot exist
//! outside the simulator: it is handed, when its file is opened, every read that will come
//! through this handle (the simulator reads the whole trace first).
//!
//! It reads exactly the pages that will be used and nothing else. At each read it first
//! fetches that read's own missing pages, then keeps the pages of the next reads issued ahead,
//! up to `lookahead` pages (its share of the cache: the simulator gives each handle half the
//! cache divided by the most handles open at once, the same share the real policies get as
//! their readahead budget). As soon as one largest-size request's worth (or half the lookahead)
//! is free it fetches the next batch: the coming reads' pages, with adjacent and overlapping
//! ranges merged into requests of up to the device's largest I/O (a single read is never
//! split), issued in the order the reader will need them. Issued that early, device latency
//! hides behind the reads before; merged that way, no policy can use fewer requests for the
//! same pages.
//!
//! Random reads show the limit of every real policy: the oracle knows where they go, nothing
//! causal does.

use super::{AppRead, IoRequest, Policy, RaContext};

/// A read's pages: `[first, end)`.
pub type PageRange = (u64, u64);

/// The oracle's per-handle state.
#[derive(Debug)]
pub struct Oracle {
    reads: Vec<PageRange>,
    next: usize,
    issued: usize,
    ahead_pages: u64,
    lookahead: u64,
    io_max: u64,
    /// The batch being issued: (first, end, order of need), reused across refills.
    batch: Vec<(u64, u64, usize)>,
    /// Its merged requests: (order of the earliest need, first, end).
    runs: Vec<(usize, u64, u64)>,
}

/// How far past the expected read the oracle looks for the read it is given (a trace whose
/// reads were clipped differently than it was told).
const RESYNC: usize = 64;

impl Oracle {
    /// An oracle that will see `reads`, in this order; keeps `lookahead` pages issued ahead, in
    /// requests of up to `io_max` pages.
    pub fn new(reads: Vec<PageRange>, lookahead: u64, io_max: u64) -> Oracle {
        Oracle {
            reads,
            next: 0,
            issued: 0,
            ahead_pages: 0,
            lookahead: lookahead.max(1),
            io_max: io_max.max(1),
            batch: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Take `(s, e)` as the read that came: move past it in the future list.
    fn consume(&mut self, s: u64, e: u64) {
        let upto = (self.next + RESYNC).min(self.reads.len());
        let Some(k) = (self.next..upto).find(|&k| self.reads[k] == (s, e)) else {
            return; // not a read it was told about: nothing to learn from it
        };
        for j in self.next..=k {
            if j < self.issued {
                let (a, b) = self.reads[j];
                self.ahead_pages -= b - a;
            }
        }
        self.next = k + 1;
        self.issued = self.issued.max(self.next);
    }

    /// Issue the next batch of reads' pages, merged, the requests in the order the reader will
    /// need them (sorted by page, a batch would make a backward or random reader wait for its
    /// whole batch).
    fn refill(&mut self, ctx: &mut dyn RaContext) {
        self.batch.clear();
        self.runs.clear();
        while self.issued < self.reads.len() && self.ahead_pages < self.lookahead {
            let (a, b) = self.reads[self.issued];
            self.batch.push((a, b, self.issued));
            self.ahead_pages += b - a;
            self.issued += 1;
        }
        self.batch.sort_unstable();
        let mut run: Option<(usize, u64, u64)> = None;
        for k in 0..self.batch.len() {
            let (a, b, need) = self.batch[k];
            run = match run {
                Some((n, rs, re)) if a <= re && b.max(re) - rs <= self.io_max => {
                    Some((n.min(need), rs, b.max(re)))
                }
                Some(done) => {
                    self.runs.push(done);
                    Some((need, a, b))
                }
                None => Some((need, a, b)),
            };
        }
        self.runs.extend(run);
        self.runs.sort_unstable();
        for &(_, rs, re) in &self.runs {
            ctx.start_io(IoRequest::ahead(rs, re - rs));
        }
    }
}

impl Policy for Oracle {
    fn name(&self) -> &'static str {
        super::ORACLE
    }

    fn on_read(&mut self, read: AppRead, ctx: &mut dyn RaContext) {
        let (s, e) = (read.first_page(), read.end_page());
        self.consume(s, e);
        // This read's own pages first: the reader is waiting for them.
        let mut p = s;
        while p < e {
            if ctx.is_cached(p) {
                p += 1;
                continue;
            }
            let mut q = p + 1;
            while q < e && !ctx.is_cached(q) {
                q += 1;
            }
            ctx.start_io(IoRequest::sync(p, q - p));
            p = q;
        }
        // Top up as soon as a full-size request's worth is free (or half the lookahead, if the
        // lookahead is smaller than one request).
        if self.ahead_pages + self.io_max.min(self.lookahead / 2) <= self.lookahead {
            self.refill(ctx);
        }
    }
}
