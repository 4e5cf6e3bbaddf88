//! The simulator: replays a [`Workload`] through a policy against a modelled page cache and
//! device, and reports the paper's figures (pages read, wasted, requests) with modelled time.
//!
//! The driver loop per application read:
//! 1. clip the read at the end of the file (a read at or past EOF does nothing);
//! 2. hand it to the handle's policy, which starts I/O through [`RaContext`];
//! 3. walk the read's pages as the reader would: a page still absent is read synchronously (one
//!    request per contiguous absent run); a page whose data is not there yet stalls the reader
//!    until it is; then the reader spends `compute_ns_per_page` on it;
//! 4. tell policies whose read-ahead pages were evicted unused and then read again (thrashing).
//!
//! Every I/O starts at the time of the read that caused it. Two accountings run side by side:
//! the faithful one (only absent pages are read; wasted = read but never used) and the paper's
//! (every page of every window counts as read, cached or not; wasted = read - requested), which
//! is how the 2004 paper's simulator counted (shared/research/paper_calibration.md).

mod cache;
mod context;
mod device;
mod metrics;
mod xarray;

pub use device::DeviceModel;
pub use metrics::{time_ratio, FileReport, Metrics, RunReport};

use std::collections::BTreeSet;

use context::Ctx;
use metrics::Counters;

use crate::policy::oracle::{Need, Oracle, OracleSettings, Ramp, Taper};
use crate::policy::{
    self, AppRead, Hint, IoKind, IoRequest, Policy, PolicyConfig, RaContext, Window, ORACLE,
};
use crate::units::{Bytes, PageRange, PAGE_SIZE};
use crate::workload::{Event, Workload};
pub use cache::Eviction;
use cache::PageCache;
use device::Device;

/// Rounds of cutting the oracle's best plan where its reads waited (see `run_workload`).
const ORACLE_CUT_ROUNDS: usize = 8;

/// Settings of one simulation.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// Page cache capacity in pages.
    pub cache_pages: usize,
    /// The device.
    pub device: DeviceModel,
    /// Time the reader spends on each page it reads, in nanoseconds.
    pub compute_ns_per_page: u64,
    /// Window sizes and other policy settings.
    pub policy: PolicyConfig,
    /// How a policy's I/O is counted (and what it is told it started).
    pub accounting: Accounting,
    /// How the cache chooses what to evict: the kernel's LRU, or the engine's CLOCK.
    pub eviction: Eviction,
}

/// How I/O is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Accounting {
    /// A real page cache: only absent pages are read, and a policy learns how many it started.
    #[default]
    Faithful,
    /// The 2004 paper's simulator: every page of every window counts as read, cached or not,
    /// and a policy is never told that a window was already cached. The faithful figures are
    /// still kept beside these.
    Paper,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cache_pages: (256 << 20) / PAGE_SIZE as usize,
            device: DeviceModel::NVME,
            compute_ns_per_page: 0,
            policy: PolicyConfig::default(),
            accounting: Accounting::Faithful,
            eviction: Eviction::Lru,
        }
    }
}

struct FileState {
    name: String,
    pages: u64,
    counters: Counters,
}

struct OpenState {
    file: u32,
    policy: Box<dyn Policy>,
    congested: bool,
}

/// The simulator's state during a run.
pub struct Simulator {
    config: SimConfig,
    policy_name: String,
    cache: PageCache,
    device: Device,
    files: Vec<FileState>,
    opens: Vec<Option<OpenState>>,
    /// The open handles' file sizes, which share the readahead budget.
    shares: policy::BudgetShares,
    thrash: ThrashLog,
    now_ns: u64,
    seq: u64,
    windows: Option<Vec<FileWindow>>,
    /// The oracle's plan, when the policy is the oracle (it issues for every handle at once).
    oracle: Option<Oracle>,
    /// Under the oracle's plan, where the reader computes: each read that waited for a page in
    /// flight, for the plan's refinement (see [`Simulator::run_workload`]).
    oracle_waits: Vec<ReadWait>,
    /// Under CLOCK, the pages of the current read copied before its policy saw it (reused
    /// from read to read).
    copied: Vec<cache::Touched>,
}

/// A read that waited for pages in flight.
#[derive(Clone, Copy)]
struct ReadWait {
    file: u32,
    /// One past the read's last page.
    read_end: u64,
    /// The last page it waited for.
    waited_page: u64,
    wait_ns: u64,
}

/// What each handle runs under the oracle: nothing of its own (the plan issues for all).
struct Planned;

impl Policy for Planned {
    fn name(&self) -> &'static str {
        ORACLE
    }
    fn on_read(&mut self, _read: AppRead, _ctx: &mut dyn RaContext) {}
}

/// A readahead decision a policy noted, with the file it was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileWindow {
    /// Index of the file (as [`Simulator::add_file`] returned it).
    pub file: u32,
    /// The decision.
    #[serde(flatten)]
    pub window: Window,
}

/// Thrashing, detected as the kernel's workingset code does: a page evicted before anyone used
/// it leaves a shadow, and reading that page again (a refault) is thrashing, charged to the
/// handle that read it first. A page skipped for good (a gap read through, the end of a window
/// nobody came back to) is waste, not thrashing: nothing asks for it again.
#[derive(Default)]
struct ThrashLog {
    /// Refaults per handle since the last delivery to its policy.
    per_owner: Vec<u64>,
    dirty: Vec<u32>,
    /// (file, page) evicted unused -> the handle that read it.
    shadows: std::collections::HashMap<(u32, u64), u32>,
}

impl ThrashLog {
    /// `page` of `file` is being read into the cache: a refault if it left a shadow.
    #[inline]
    fn refault(&mut self, file: u32, page: u64) -> bool {
        if self.shadows.is_empty() {
            return false;
        }
        match self.shadows.remove(&(file, page)) {
            Some(owner) => {
                self.record(owner);
                true
            }
            None => false,
        }
    }

    fn record(&mut self, owner: u32) {
        let i = owner as usize;
        if self.per_owner.len() <= i {
            self.per_owner.resize(i + 1, 0);
        }
        if self.per_owner[i] == 0 {
            self.dirty.push(owner);
        }
        self.per_owner[i] += 1;
    }
}

impl Simulator {
    /// A simulator that gives every opened handle a fresh instance of `policy_name`.
    pub fn new(policy_name: &str, config: SimConfig) -> Result<Simulator, String> {
        policy::validate_name(policy_name)?;
        if config.cache_pages == 0 {
            return Err("the cache must hold at least one page".into());
        }
        Ok(Simulator {
            config,
            policy_name: policy_name.to_string(),
            cache: PageCache::new(config.cache_pages, config.eviction),
            device: Device::new(config.device, config.policy.io_max_pages),
            files: Vec::new(),
            opens: Vec::new(),
            shares: policy::BudgetShares::default(),
            thrash: ThrashLog::default(),
            now_ns: 0,
            seq: 0,
            windows: None,
            oracle: None,
            oracle_waits: Vec::new(),
            copied: Vec::new(),
        })
    }

    /// Keep every readahead decision the policies note from now on (see [`Self::windows`]).
    pub fn record_windows(&mut self) {
        self.windows.get_or_insert_with(Vec::new);
    }

    /// The decisions noted since [`Self::record_windows`], in order.
    pub fn windows(&self) -> &[FileWindow] {
        self.windows.as_deref().unwrap_or(&[])
    }

    /// A file's name, by index.
    pub fn file_name(&self, file: u32) -> &str {
        &self.files[file as usize].name
    }

    /// Add a file of `size` bytes; returns its index.
    pub fn add_file(&mut self, name: &str, size: Bytes) -> u32 {
        let id = self.cache.add_file();
        self.files.push(FileState {
            name: name.to_string(),
            pages: size.pages_ceil(),
            counters: Counters::default(),
        });
        debug_assert_eq!(id as usize, self.files.len() - 1);
        id
    }

    /// Open `file` as `handle` (replacing any handle of that number). The oracle cannot be
    /// opened this way: it needs the whole workload ([`Self::run_workload`]).
    pub fn open(&mut self, handle: u32, file: u32) -> Result<(), String> {
        let policy = policy::by_name(&self.policy_name, self.config.policy)?;
        self.open_with(handle, file, policy)
    }

    /// Open `file` as `handle` with a policy of the caller's own (as [`crate::engine::Engine::open_with`]
    /// does on the engine).
    pub fn open_with(
        &mut self,
        handle: u32,
        file: u32,
        mut policy: Box<dyn Policy>,
    ) -> Result<(), String> {
        if file as usize >= self.files.len() {
            return Err(format!("open of unknown file #{file}"));
        }
        policy.on_device(self.config.device.estimate(self.config.policy.io_max_pages));
        let h = handle as usize;
        if self.opens.len() <= h {
            self.opens.resize_with(h + 1, || None);
        }
        if let Some(old) = &self.opens[h] {
            self.shares.close(self.files[old.file as usize].pages);
        }
        self.shares.open(self.files[file as usize].pages);
        self.opens[h] = Some(OpenState {
            file,
            policy,
            congested: false,
        });
        Ok(())
    }

    /// Close `handle`.
    pub fn close(&mut self, handle: u32) {
        if let Some(slot) = self.opens.get_mut(handle as usize) {
            if let Some(old) = slot.take() {
                self.shares.close(self.files[old.file as usize].pages);
            }
        }
    }

    fn open_state(&mut self, handle: u32) -> Result<&mut OpenState, String> {
        self.opens
            .get_mut(handle as usize)
            .and_then(|o| o.as_mut())
            .ok_or_else(|| format!("handle {handle} is not open"))
    }

    /// Pass a hint to `handle`'s policy. `DontNeed` also drops the range's pages from the cache.
    pub fn hint(&mut self, handle: u32, hint: Hint) -> Result<(), String> {
        let file = self.open_state(handle)?.file;
        if let Hint::DontNeed { start_page, pages } = hint {
            let end = start_page
                .saturating_add(pages)
                .min(self.files[file as usize].pages);
            for p in start_page..end {
                self.cache.remove(file, p);
            }
        }
        let (open, mut ctx) = self.policy_and_ctx(handle, file);
        open.policy.on_hint(hint, &mut ctx);
        ctx.cache.complete_reads();
        self.deliver_thrash();
        Ok(())
    }

    /// The application reads `len` bytes at `offset` through `handle`.
    pub fn read(&mut self, handle: u32, offset: Bytes, len: Bytes) -> Result<(), String> {
        let file = self.open_state(handle)?.file;
        let file_pages = self.files[file as usize].pages;
        let file_bytes = Bytes::of_pages(file_pages);
        // Clip at EOF (page granularity: the model knows sizes in pages).
        let end = offset.0.saturating_add(len.0).min(file_bytes.0);
        if end <= offset.0 {
            return Ok(());
        }
        let read = AppRead {
            offset,
            len: Bytes(end - offset.0),
        };
        self.seq += 1;
        if let Some(mut oracle) = self.oracle.take() {
            oracle.on_read((self.seq - 1) as usize, |f, io| {
                let (mut ctx, _) = self.ctx_for(f, handle);
                ctx.start_io(io);
                ctx.cache.complete_reads();
            });
            self.oracle = Some(oracle);
        }
        // The engine's reader copies the pages already there before it shows the read to its
        // policy: under its CLOCK they are used, and referenced, before the policy's I/O turns
        // the hand (the kernel's reader marks pages accessed after its readahead).
        let mut copied = std::mem::take(&mut self.copied);
        copied.clear();
        if self.cache.eviction() == Eviction::Clock {
            let mut p = read.first_page();
            while let Some(t) = (p < read.end_page())
                .then(|| self.cache.touch(file, p))
                .flatten()
            {
                copied.push(t);
                p += 1;
            }
        }
        let congested = self.device.congested(self.now_ns);
        // The oracle's plans are cut where reads waited only where the reader computes.
        let note_wait = self.oracle.is_some() && self.config.compute_ns_per_page > 0;

        let (start_ns, seq, compute_ns) = (self.now_ns, self.seq, self.config.compute_ns_per_page);
        let (open, mut ctx) = self.policy_and_ctx(handle, file);
        ctx.known_cached = PageRange::of_len(read.first_page(), copied.len() as u64);
        if open.congested != congested {
            open.congested = congested;
            open.policy.on_congestion(congested);
        }
        open.policy.on_read(read, &mut ctx);
        ctx.cache.complete_reads();

        // The reader walks its pages.
        let (first, last) = (read.first_page(), read.end_page());
        let mut now = start_ns;
        let mut c = Counters::default();
        let mut waited = first;
        let mut p = first;
        while p < last {
            let touched = match copied.get((p - first) as usize).copied() {
                Some(t) => t,
                None => match ctx.cache.touch(file, p) {
                    Some(t) => t,
                    None => {
                        // Absent: read this page and the absent ones after it in one request, no
                        // more than the cache holds (so this page survives its own request).
                        let run_limit = last.min(p + ctx.cache.capacity() as u64);
                        let mut run_end = p + 1;
                        while run_end < run_limit && !ctx.cache.contains(file, run_end) {
                            run_end += 1;
                        }
                        ctx.now_ns = now;
                        ctx.start_io(IoRequest::sync(p, run_end - p));
                        ctx.cache.complete_reads();
                        ctx.cache
                            .touch(file, p)
                            .expect("a page just read is cached")
                    }
                },
            };
            if touched.loaded_seq < seq {
                c.hit_pages += 1;
            }
            if touched.first_use {
                c.used_pages += 1;
            }
            if touched.ready_ns > now {
                waited = p;
                c.stall_ns += touched.ready_ns - now;
                now = touched.ready_ns;
            }
            now += compute_ns;
            p += 1;
        }
        let fc = &mut ctx.files[file as usize].counters;
        fc.first_ns.get_or_insert(start_ns);
        fc.pages_requested += last - first;
        fc.hit_pages += c.hit_pages;
        fc.used_pages += c.used_pages;
        fc.stall_ns += c.stall_ns;
        fc.last_ns = now;
        if note_wait && c.stall_ns > 0 {
            self.oracle_waits.push(ReadWait {
                file,
                read_end: last,
                waited_page: waited,
                wait_ns: c.stall_ns,
            });
        }
        self.now_ns = now;
        self.copied = copied;
        self.deliver_thrash();
        Ok(())
    }

    /// `handle`'s policy and the driver's side of [`RaContext`] for it, borrowed apart so the
    /// policy can be called with the context. The caller has checked that `handle` is open.
    fn policy_and_ctx(&mut self, handle: u32, file: u32) -> (&mut OpenState, Ctx<'_>) {
        let (ctx, opens) = self.ctx_for(file, handle);
        let open = opens[handle as usize]
            .as_mut()
            .expect("handle checked by the caller");
        (open, ctx)
    }

    /// The driver's side of [`RaContext`] for `file`, its I/O charged to `owner`; and the open
    /// handles, borrowed apart.
    fn ctx_for(&mut self, file: u32, owner: u32) -> (Ctx<'_>, &mut Vec<Option<OpenState>>) {
        let Simulator {
            opens,
            shares,
            cache,
            device,
            files,
            thrash,
            now_ns,
            seq,
            config,
            windows,
            ..
        } = self;
        let ctx = Ctx {
            budget: shares.budget(cache.capacity() as u64),
            cache,
            device,
            files,
            thrash,
            file,
            owner,
            now_ns: *now_ns,
            seq: *seq,
            paper: config.accounting == Accounting::Paper,
            windows: windows.as_mut(),
            known_cached: PageRange::default(),
        };
        (ctx, opens)
    }

    fn deliver_thrash(&mut self) {
        while let Some(owner) = self.thrash.dirty.pop() {
            let n = std::mem::take(&mut self.thrash.per_owner[owner as usize]);
            if let Some(Some(open)) = self.opens.get_mut(owner as usize) {
                open.policy.on_thrashed(n);
            }
        }
    }

    /// Replay a whole workload. The oracle reads it all first, to know the future; on a fresh
    /// simulator it plays each of its ramps ([`Ramp`]) and keeps the fastest.
    pub fn run_workload(&mut self, workload: Workload) -> Result<(), String> {
        if self.policy_name != ORACLE {
            let ids = self.add_files(&workload.files);
            return self.replay(workload.events, &ids, None);
        }
        let events: Vec<Event> = workload.events.collect();
        let fresh = self.files.is_empty() && self.seq == 0;
        let budget = policy::readahead_budget(self.cache.capacity() as u64, 1);
        let mut plans = Ramp::plans(self.cache.capacity() as u64, budget);
        if !fresh {
            plans.truncate(1);
        }
        // The fastest plan that wastes only the gaps it chose (a plan whose reach let pages
        // age out before their read is not kept, however fast).
        let mut played: Vec<(bool, (Ramp, u64), Simulator, Oracle)> = Vec::new();
        // The reads the plans are made for: the same for every plan (every fresh run adds the
        // workload's files under the same ids).
        let mut needs: Option<Vec<Need>> = None;
        for (ramp, reach) in plans {
            let mut sim = if fresh {
                self.fresh_oracle_run()?
            } else {
                std::mem::replace(self, Simulator::new(ORACLE, self.config)?)
            };
            let ids = sim.add_files(&workload.files);
            let needs = needs.get_or_insert_with(|| sim.needs_of(&events, &ids));
            let plan = sim.oracle_for(needs, ramp, reach, true);
            sim.replay(Box::new(events.iter().copied()), &ids, Some(plan.clone()))?;
            let clean = sim.report().faithful.wasted_pages <= sim.oracle_gap_pages();
            played.push((clean, (ramp, reach), sim, plan));
        }
        let needs = needs.unwrap_or_default();
        // Clean plans first, then the fastest (stable: the first plan wins a tie).
        played.sort_by(|a, b| {
            (b.0, a.2.report().faithful.modeled_ms)
                .partial_cmp(&(a.0, b.2.report().faithful.modeled_ms))
                .expect("modelled times are numbers")
        });
        // Where the reader computes, a request is best cut where a read that waited for it
        // ends: that read goes on with its pages while the rest arrive, and on a disk the
        // rest costs no seek. Which cuts pay (each is one more request) the plan's own replay
        // tells. The two fastest kinds of plan are cut (the finest is not always the one that
        // cuts best), and the fastest result kept. So is the plan of the largest requests
        // (`Full`) without the tail taper: the taper's cuts are a rule's guess, and the
        // replay's own cuts, which may do better, cannot undo them.
        let refine = fresh && self.config.compute_ns_per_page > 0;
        let mut best: Option<Simulator> = None;
        let mut ramps_cut = Vec::new();
        let any_clean = played.first().is_some_and(|p| p.0);
        let fastest_reach = played.first().map(|p| p.1 .1);
        let mut keep_if_faster = |sim: Simulator| {
            let ms = sim.report().faithful.modeled_ms;
            if best
                .as_ref()
                .is_none_or(|b| ms < b.report().faithful.modeled_ms)
            {
                best = Some(sim);
            }
        };
        for (clean, (ramp, _), sim, plan) in played {
            if clean != any_clean {
                break;
            }
            let sim = if refine && clean && ramps_cut.len() < 2 && !ramps_cut.contains(&ramp) {
                ramps_cut.push(ramp);
                self.cut_where_reads_waited(sim, plan, &events, &needs, &workload.files)?
            } else {
                sim
            };
            keep_if_faster(sim);
            if !refine {
                break;
            }
        }
        if let (true, true, Some(reach)) = (refine, any_clean, fastest_reach) {
            let mut sim = self.fresh_oracle_run()?;
            let ids = sim.add_files(&workload.files);
            let plan = sim.oracle_for(&needs, Ramp::Full, reach, false);
            sim.replay(Box::new(events.iter().copied()), &ids, Some(plan.clone()))?;
            if sim.report().faithful.wasted_pages <= sim.oracle_gap_pages() {
                let cut =
                    self.cut_where_reads_waited(sim, plan, &events, &needs, &workload.files)?;
                keep_if_faster(cut);
            }
        }
        *self = best.expect("at least one plan");
        Ok(())
    }

    /// The oracle's `plan`, played as `sim`, cut where its reads waited: all those cuts at once,
    /// else the longest wait's alone, kept while the replay is faster, a bounded number of
    /// rounds. The fastest replay.
    fn cut_where_reads_waited(
        &self,
        mut sim: Simulator,
        mut plan: Oracle,
        events: &[Event],
        needs: &[Need],
        files: &[crate::workload::FileSpec],
    ) -> Result<Simulator, String> {
        let taper = self.taper();
        for _ in 0..ORACLE_CUT_ROUNDS {
            let waits = std::mem::take(&mut sim.oracle_waits);
            let longest = waits.iter().max_by_key(|w| w.wait_ns);
            let waited = || waits.iter().map(|w| (w.file, w.waited_page));
            let longest_waited = || longest.map(|w| (w.file, w.waited_page)).into_iter();
            // Cuts where the reads that waited end; in the middles of the requests they waited
            // for; where the reader's work on a request's first piece covers the device's on
            // the rest (a piece of n pages takes per_request + n * page of the device's time).
            let half = |n: u64| n / 2;
            let balanced = |n: u64| {
                (taper.request_ns + n * taper.page_ns).div_ceil(taper.compute_ns + taper.page_ns)
            };
            // Each cut where it stands in the queue, and some also with the pieces put in
            // the order their pages are needed.
            let ends: BTreeSet<_> = waits.iter().map(|w| (w.file, w.read_end)).collect();
            let longest_end: BTreeSet<_> =
                longest.map(|w| (w.file, w.read_end)).into_iter().collect();
            let balanced_all = plan.cuts_within(waited(), balanced);
            let balanced_longest = plan.cuts_within(longest_waited(), balanced);
            let candidates = [
                (ends.clone(), false),
                (longest_end.clone(), false),
                (plan.cuts_within(waited(), half), false),
                (plan.cuts_within(longest_waited(), half), false),
                (balanced_all.clone(), false),
                (balanced_longest.clone(), false),
                (ends, true),
                (longest_end, true),
                (balanced_all, true),
                (balanced_longest, true),
            ];
            let mut best: Option<(Simulator, Oracle)> = None;
            for (cuts, by_need) in candidates {
                let mut cut = plan.clone();
                if !cut.cut_at(&cuts) {
                    continue;
                }
                if by_need {
                    cut.order_by_need(needs);
                }
                let mut again = self.fresh_oracle_run()?;
                let ids = again.add_files(files);
                again.replay(Box::new(events.iter().copied()), &ids, Some(cut.clone()))?;
                let ms = again.report().faithful.modeled_ms;
                let to_beat = best.as_ref().map_or(&sim, |b| &b.0);
                if ms < to_beat.report().faithful.modeled_ms {
                    best = Some((again, cut));
                }
            }
            match best {
                Some((again, cut)) => (sim, plan) = (again, cut),
                None => break,
            }
        }
        Ok(sim)
    }

    /// The reader's and the device's costs, for cutting the oracle's requests.
    fn taper(&self) -> Taper {
        Taper {
            compute_ns: self.config.compute_ns_per_page,
            request_ns: (self.config.device.per_request_us * 1000.0) as u64,
            page_ns: (self.config.device.page_us() * 1000.0).ceil() as u64,
        }
    }

    /// A new simulator for one of the oracle's plans, recording windows if this one does.
    fn fresh_oracle_run(&self) -> Result<Simulator, String> {
        let mut sim = Simulator::new(ORACLE, self.config)?;
        sim.windows = self.windows.as_ref().map(|_| Vec::new());
        Ok(sim)
    }

    fn add_files(&mut self, files: &[crate::workload::FileSpec]) -> Vec<u32> {
        files
            .iter()
            .map(|f| self.add_file(&f.name, f.size))
            .collect()
    }

    /// Play `events` on files `ids`, under the oracle's `plan` if there is one.
    fn replay(
        &mut self,
        events: Box<dyn Iterator<Item = Event> + '_>,
        ids: &[u32],
        plan: Option<Oracle>,
    ) -> Result<(), String> {
        let oracle = plan.is_some();
        self.oracle = plan;
        for event in events {
            match event {
                Event::Open { handle, file } => {
                    let id = *ids
                        .get(file as usize)
                        .ok_or_else(|| format!("open of unknown file #{file}"))?;
                    if oracle {
                        self.open_with(handle, id, Box::new(Planned))?;
                    } else {
                        self.open(handle, id)?;
                    }
                }
                Event::Read {
                    handle,
                    offset,
                    len,
                } => self.read(handle, offset, len)?,
                Event::Hint { handle, hint } => self.hint(handle, hint)?,
                Event::Close { handle } => self.close(handle),
            }
        }
        Ok(())
    }

    /// The oracle's plan for `needs` (every read the workload makes, [`Self::needs_of`]),
    /// with the readahead budget the real policies share (half the cache), the
    /// device's largest I/O, and the gaps this device reads through more cheaply than it skips.
    fn oracle_for(&self, needs: &[Need], ramp: Ramp, reach: u64, tapered: bool) -> Oracle {
        // It holds ahead the readahead budget the policies share (half the cache).
        let budget = policy::readahead_budget(self.cache.capacity() as u64, 1);
        Oracle::plan(
            needs,
            OracleSettings {
                cache_pages: self.cache.capacity() as u64,
                budget_pages: budget,
                reach_pages: reach,
                io_max_pages: self.config.policy.io_max_pages.max(1),
                gap_pages: self.config.device.gap_worth_reading(),
                seek_pages: (self.config.device.seek_us / self.config.device.page_us()) as u64,
                ramp,
                taper: (tapered && self.config.compute_ns_per_page > 0).then(|| self.taper()),
            },
        )
    }

    /// The reads `events` make on files `ids`, in order, as the oracle is told of them
    /// (clipped at EOF as [`Self::read`] clips them).
    fn needs_of(&self, events: &[Event], ids: &[u32]) -> Vec<Need> {
        let mut needs = Vec::new();
        let mut handles: Vec<Option<u32>> = Vec::new(); // handle -> file id
        for event in events {
            match *event {
                Event::Open { handle, file } => {
                    let h = handle as usize;
                    if handles.len() <= h {
                        handles.resize(h + 1, None);
                    }
                    handles[h] = ids.get(file as usize).copied();
                }
                Event::Close { handle } => {
                    if let Some(slot) = handles.get_mut(handle as usize) {
                        *slot = None;
                    }
                }
                Event::Read {
                    handle,
                    offset,
                    len,
                } => {
                    if let Some(&Some(id)) = handles.get(handle as usize) {
                        let pages = self.files[id as usize].pages;
                        let end = offset.0.saturating_add(len.0).min(Bytes::of_pages(pages).0);
                        if end > offset.0 {
                            let read = AppRead {
                                offset,
                                len: Bytes(end - offset.0),
                            };
                            needs.push(Need {
                                file: id,
                                first: read.first_page(),
                                end: read.end_page(),
                            });
                        }
                    }
                }
                Event::Hint { .. } => {}
            }
        }
        needs
    }

    /// Pages the oracle read through gaps by choice (0 for other policies): the only pages
    /// it may waste.
    pub fn oracle_gap_pages(&self) -> u64 {
        self.oracle.as_ref().map_or(0, |o| o.chosen_gap_pages())
    }

    /// How many pages of `file` in `[start, end)` are cached now.
    pub fn cached_in(&self, file: u32, start: u64, end: u64) -> u64 {
        (start..end)
            .filter(|&p| self.cache.contains(file, p))
            .count() as u64
    }

    /// Pages in the cache now (never more than its capacity).
    pub fn cached_pages(&self) -> usize {
        self.cache.len()
    }

    /// The cache's capacity in pages.
    pub fn cache_capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// The device model in use.
    pub fn device(&self) -> &DeviceModel {
        self.device.model()
    }

    /// The figures so far.
    pub fn report(&self) -> RunReport {
        let mut total = Counters::default();
        let mut files = Vec::with_capacity(self.files.len());
        for f in &self.files {
            total.add(&f.counters);
            files.push(FileReport {
                file: f.name.clone(),
                metrics: f.counters.faithful(),
            });
        }
        RunReport {
            policy: self.policy_name.clone(),
            faithful: total.faithful(),
            paper: total.paper(),
            files,
        }
    }
}

/// Run `workload` through `policy_name` with `config`.
pub fn run(policy_name: &str, config: SimConfig, workload: Workload) -> Result<RunReport, String> {
    let mut sim = Simulator::new(policy_name, config)?;
    sim.run_workload(workload)?;
    Ok(sim.report())
}
