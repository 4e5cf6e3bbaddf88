//! The simulator: replays a [`Workload`] through a policy against a modelled page cache and
//! device, and reports the paper's figures (pages read, wasted, requests) with modelled time.
//!
//! Each application read runs the one loop both drivers share (`policy::driving`: clip, take
//! what is there, show the policy, walk the pages), through the simulator's side of it
//! (`read.rs`): a page still absent is read synchronously by the reader; a page whose data is
//! not there yet stalls the reader until it is; then the reader spends `compute_ns_per_page`
//! on it; policies whose read-ahead pages were evicted unused and then read again are told
//! (thrashing).
//!
//! Every I/O starts at the time of the read that caused it. Two accountings run side by side:
//! the faithful one (only absent pages are read; wasted = read but never used) and the paper's
//! (every page of every window counts as read, cached or not; wasted = read - requested), which
//! is how the 2004 paper's simulator counted (shared/research/paper_calibration.md).

mod cache;
mod context;
mod metrics;
mod mount;
mod oracle_runs;
mod read;
mod xarray;

pub use crate::device::DeviceModel;
pub use metrics::{time_ratio, FileReport, Metrics, RunReport};
pub use mount::{through_mount, MountPath};

use std::collections::BTreeSet;

use context::Ctx;
use metrics::Counters;
use read::SimRead;

use crate::device::Device;
use crate::policy::oracle::{Need, Oracle, OracleSettings, Ramp, Taper};
use crate::policy::{
    self, AppRead, Hint, IoKind, IoRequest, Policy, PolicyConfig, RaContext, Window, ORACLE,
};
use crate::units::{Bytes, PageRange, PAGE_SIZE};
use crate::workload::{Event, Workload};
pub use cache::Eviction;
use cache::PageCache;

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
    /// Its size, in bytes (reads are clipped to it) and in pages.
    bytes: u64,
    pages: u64,
    counters: Counters,
}

struct OpenState {
    file: u32,
    policy: Box<dyn Policy>,
    congestion: policy::Congestion,
}

/// The simulator's state during a run.
pub struct Simulator {
    config: SimConfig,
    policy_name: String,
    /// The caller's maker of each handle's policy ([`Simulator::with_policy`]); `None`: a
    /// fresh instance of the policy named `policy_name`.
    policy_maker: Option<PolicyMaker>,
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
    /// Every device command since [`Simulator::record_commands`], when asked for.
    commands: Option<Vec<DeviceCommand>>,
    /// The oracle's plan, when the policy is the oracle (it issues for every handle at once).
    oracle: Option<Oracle>,
    /// Under the oracle's plan, where the reader computes: each read that waited for a page in
    /// flight, for the plan's refinement (see [`Simulator::run_workload`]).
    oracle_waits: Vec<ReadWait>,
    /// Under CLOCK, the pages of the current read copied before its policy saw it (reused
    /// from read to read).
    copied: Vec<cache::Touched>,
}

/// A caller's maker of policies, one per opened handle, from the settings of the run.
pub type PolicyMaker = Box<dyn FnMut(PolicyConfig) -> Box<dyn Policy>>;

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

/// A command the simulator sent its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCommand {
    /// Index of the file.
    pub file: u32,
    /// Its first page.
    pub first_page: u64,
    /// Its length in pages.
    pub pages: u64,
    /// Whether it was read ahead (not for a reader's miss).
    pub ahead: bool,
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
    ///
    /// # Errors
    /// An unknown policy name; a cache of no pages.
    pub fn new(policy_name: &str, config: SimConfig) -> Result<Simulator, String> {
        policy::validate_name(policy_name)?;
        Simulator::build(policy_name.to_string(), None, config)
    }

    /// A simulator that gives every opened handle a policy of the caller's own, made by
    /// `make` from the run's policy settings (as [`crate::OpenOptions::policy_maker`] does on
    /// the engine): a policy written outside this crate runs against the same cache and
    /// device model as the built-in ones. Reports name it as its instances do.
    ///
    /// # Errors
    /// A cache of no pages.
    pub fn with_policy(
        make: impl FnMut(PolicyConfig) -> Box<dyn Policy> + 'static,
        config: SimConfig,
    ) -> Result<Simulator, String> {
        Simulator::build(String::new(), Some(Box::new(make)), config)
    }

    fn build(
        policy_name: String,
        policy_maker: Option<PolicyMaker>,
        config: SimConfig,
    ) -> Result<Simulator, String> {
        if config.cache_pages == 0 {
            return Err("the cache must hold at least one page".into());
        }
        Ok(Simulator {
            config,
            policy_name,
            policy_maker,
            cache: PageCache::new(config.cache_pages, config.eviction),
            device: Device::new(config.device, config.policy.io_max_pages),
            files: Vec::new(),
            opens: Vec::new(),
            shares: policy::BudgetShares::default(),
            thrash: ThrashLog::default(),
            now_ns: 0,
            seq: 0,
            windows: None,
            commands: None,
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

    /// Keep every command sent to the device from now on (see [`Self::take_commands`]).
    pub fn record_commands(&mut self) {
        self.commands.get_or_insert_with(Vec::new);
    }

    /// The commands sent since [`Self::record_commands`] or the last call, in order.
    pub fn take_commands(&mut self) -> Vec<DeviceCommand> {
        self.commands
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
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
            bytes: size.0,
            pages: size.pages_ceil(),
            counters: Counters::default(),
        });
        debug_assert_eq!(id as usize, self.files.len() - 1);
        id
    }

    /// Open `file` as `handle` (replacing any handle of that number). The oracle cannot be
    /// opened this way: it needs the whole workload ([`Self::run_workload`]).
    ///
    /// # Errors
    /// An unknown file; the oracle (see above).
    pub fn open(&mut self, handle: u32, file: u32) -> Result<(), String> {
        let policy = match &mut self.policy_maker {
            Some(make) => {
                let policy = make(self.config.policy);
                if self.policy_name.is_empty() {
                    self.policy_name = policy.name().to_string();
                }
                policy
            }
            None => policy::by_name(&self.policy_name, self.config.policy)?,
        };
        self.open_with(handle, file, policy)
    }

    /// Open `file` as `handle` with a policy of the caller's own (as [`crate::engine::Engine::open_with`]
    /// does on the engine).
    ///
    /// # Errors
    /// An unknown file.
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
            congestion: policy::Congestion::default(),
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
    ///
    /// # Errors
    /// A handle not open.
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

    /// The application reads `len` bytes at `offset` through `handle`, in the order and by the
    /// rules `policy::driving` gives both drivers.
    ///
    /// # Errors
    /// A handle not open.
    pub fn read(&mut self, handle: u32, offset: Bytes, len: Bytes) -> Result<(), String> {
        let file = self.open_state(handle)?.file;
        let file_bytes = self.files[file as usize].bytes;
        let Some(read) = policy::clip_read(offset.0, len.0, file_bytes) else {
            return Ok(());
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
        let mut copied = std::mem::take(&mut self.copied);
        copied.clear();
        let now_ns = self.now_ns;
        let mut driver = SimRead {
            seq: self.seq,
            sim: self,
            handle,
            file,
            start_ns: now_ns,
            now_ns,
            counters: Counters::default(),
            waited: read.first_page(),
            copied,
        };
        let mut walk = policy::begin_read(&mut driver, read);
        let walked = policy::walk_read(&mut driver, &mut walk);
        debug_assert!(walked.is_ready(), "the simulator's reader never parks");
        driver.finish(walk.pages);
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
            commands,
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
            commands: commands.as_mut(),
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

    /// The reader works for `ns` before its next call ([`Event::Compute`]).
    pub fn compute(&mut self, ns: u64) {
        self.now_ns += ns;
    }

    /// Replay a whole workload. The oracle reads it all first, to know the future; on a fresh
    /// simulator it plays each of its ramps ([`Ramp`]) and keeps the fastest.
    ///
    /// # Errors
    /// An event naming a file or handle the workload never opened.
    pub fn run_workload(&mut self, workload: Workload) -> Result<(), String> {
        if self.policy_maker.is_some() || self.policy_name != ORACLE {
            let ids = self.add_files(&workload.files);
            return self.replay(workload.events, &ids, None);
        }
        self.play_oracle(workload)
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
                Event::Compute { ns } => self.compute(ns),
            }
        }
        Ok(())
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
///
/// # Errors
/// As [`Simulator::new`] and [`Simulator::run_workload`].
pub fn run(policy_name: &str, config: SimConfig, workload: Workload) -> Result<RunReport, String> {
    let mut sim = Simulator::new(policy_name, config)?;
    sim.run_workload(workload)?;
    Ok(sim.report())
}

/// Run `workload` with a policy of the caller's own, one made by `make` per handle (see
/// [`Simulator::with_policy`]).
///
/// # Errors
/// As [`Simulator::with_policy`] and [`Simulator::run_workload`].
pub fn run_with(
    make: impl FnMut(PolicyConfig) -> Box<dyn Policy> + 'static,
    config: SimConfig,
    workload: Workload,
) -> Result<RunReport, String> {
    let mut sim = Simulator::with_policy(make, config)?;
    sim.run_workload(workload)?;
    Ok(sim.report())
}
