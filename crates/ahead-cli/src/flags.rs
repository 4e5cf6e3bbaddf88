//! The command line's flags: one struct per command, the options `sim` and `replay` share
//! ([`ModelArgs`]) and how they become a simulator's settings, and the sizes' one syntax.

use crate::*;

/// `cat --engine`'s help, from the backends' registry.
pub(crate) fn engine_help() -> String {
    format!(
        "I/O backend: auto (the first listed; a backend that cannot start falls back to threads, saying why in --stats), or one of: {}",
        ahead::engine::backend_names().collect::<Vec<_>>().join(", ")
    )
}

/// The help after `sim`'s and `replay`'s options, from the registries: every policy, pattern
/// and device model as the library lists them.
/// `ahead bench --help`'s list of patterns, from the bench's registry.
pub(crate) fn bench_help() -> String {
    let mut out =
        String::from("Patterns (--patterns, comma-separated; all by default, in this order):\n");
    for p in crate::bench::BENCH_PATTERNS {
        out.push_str(&format!("  {:<20} {}\n", p.name, p.about()));
    }
    out
}

pub(crate) fn after_help() -> String {
    let policies: Vec<&str> = ahead::policy::names().collect();
    let devices: Vec<&str> = DeviceModel::PRESETS.iter().map(|d| d.name).collect();
    format!(
        "Policies: {} (or 'all'). The oracle (knows the whole trace: the lower bound) always runs
          beside the others, and vs_oracle is each policy's modelled time over the oracle's.
Patterns: {}, each with optional :size=64m,bs=4k,... (see the pattern module docs).
Devices:  {} (nvme models this machine).",
        policies.join(", "),
        ahead::pattern::PATTERN_NAMES.join(", "),
        devices.join(", ")
    )
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// An existing file to read (at least 64 MiB; never written). Default: ahead-bench.dat in
    /// --dir, created with --size random bytes if missing.
    #[arg(long, conflicts_with = "dir")]
    pub(crate) file: Option<PathBuf>,
    /// Where to create the test file and the nfiles files (default: the current directory;
    /// not tmpfs).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// Size of the test file, or of the part of --file read (default 2g).
    #[arg(long)]
    pub(crate) size: Option<String>,
    /// A short suite: runs capped at 1 s, one repeat (under 2 minutes here).
    #[arg(long)]
    pub(crate) quick: bool,
    /// Patterns to run, comma-separated (default: all).
    #[arg(long)]
    pub(crate) patterns: Option<String>,
    /// Contenders, comma-separated: kernel, kernel-seq, direct, device, ahead:<policy>.
    #[arg(long)]
    pub(crate) contenders: Option<String>,
    /// Repeats of every run (default 5; 1 with --quick).
    #[arg(long)]
    pub(crate) repeat: Option<usize>,
    /// Longest one run may take, in seconds (default 3; 1 with --quick).
    #[arg(long)]
    pub(crate) cap_s: Option<f64>,
    /// Memory budget of each engine's cache (default: a quarter of RAM, as a database's buffer
    /// pool is sized; the kernel's page cache may use all free memory). nfiles keeps 256m.
    #[arg(long)]
    pub(crate) budget: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Beside every engine row of a named reader, the simulator's prediction on this device:
    /// a profile `ahead calibrate` wrote, or a preset (nvme, hdd, remote); with --remote also
    /// `calibrate`, to measure the link first, through the same proxy.
    #[arg(long)]
    pub(crate) device: Option<String>,
    /// Write a picture (SVG) of the ratios to the kernel per pattern to this file, and one of
    /// the first engine run's requests over time beside it (NAME-windows.svg).
    #[arg(long)]
    pub(crate) plot: Option<PathBuf>,
    /// Bench a remote object instead (s3://bucket/key or http(s)://host/path): contenders
    /// ahead:adaptive, ahead:linux-ondemand, naive, fsspec, fsspec:tuned, pyarrow, cat and
    /// device, on remote patterns.
    #[arg(long, conflicts_with_all = ["file", "dir"])]
    pub(crate) remote: Option<String>,
    /// With --remote: put toxiproxy (tools/test-servers installs it) in front of the server,
    /// adding this latency each way, in ms.
    #[arg(long, requires = "remote")]
    pub(crate) latency_ms: Option<u64>,
    /// With --remote: through toxiproxy, cap each connection's bandwidth (per second: 100m).
    #[arg(long, requires = "remote")]
    pub(crate) bandwidth: Option<String>,
    /// With --remote: the Python that runs the fsspec and pyarrow contenders (needs s3fs or
    /// fsspec's HTTP support, and pyarrow; skipped, saying so, where missing).
    #[arg(long, requires = "remote", default_value = "python3")]
    pub(crate) python: String,
    /// With --remote: the 100 objects of the objects-* patterns, as a template where {}
    /// becomes 000..099 (s3://bucket/many/{}.bin); without it those patterns are left out.
    #[arg(long, requires = "remote")]
    pub(crate) objects: Option<String>,
    /// With --remote: a setting of every engine contender's, KEY=VALUE as `ahead cat -o`
    /// takes it (remote.split_ahead=true); repeatable.
    #[arg(short = 'o', long = "option", requires = "remote")]
    pub(crate) option: Vec<String>,
}

#[derive(Args)]
pub(crate) struct CatArgs {
    /// Files to read, in order.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// Size of each read, like dd's bs (4k, 128k, 1m, ...).
    #[arg(long, default_value = "128k")]
    pub(crate) bs: String,
    /// Readahead policy.
    #[arg(long, default_value = ahead::engine::DEFAULT_POLICY)]
    pub(crate) policy: String,
    /// I/O backend: auto (io_uring if it works, else threads), uring, threads or sync.
    #[arg(long, default_value = "auto")]
    pub(crate) engine: String,
    /// Memory budget of the engine's cache (a hard limit).
    #[arg(long, default_value = "256m")]
    pub(crate) budget: String,
    /// Take a --budget above the memory this process can have (the machine's RAM or its
    /// memory cgroup's limit), which is refused otherwise.
    #[arg(long)]
    pub(crate) budget_over_memory: bool,
    /// Print the engine's statistics to stderr at the end.
    #[arg(long)]
    pub(crate) stats: bool,
    /// Largest readahead window (8m, ...; default: sized for the device).
    #[arg(long, conflicts_with = "ra_max_kb")]
    pub(crate) ra_max: Option<String>,
    /// The old spelling of --ra-max, in KiB.
    #[arg(long, hide = true)]
    pub(crate) ra_max_kb: Option<u64>,
    /// Largest single read (4m, ...; default: the device's max_sectors_kb).
    #[arg(long, conflicts_with = "io_max_kb")]
    pub(crate) io_max: Option<String>,
    /// The old spelling of --io-max, in KiB.
    #[arg(long, hide = true)]
    pub(crate) io_max_kb: Option<u64>,
    /// Take no read lease on the files: every read checks the file's size with fstat, and a
    /// writer's open never waits for ahead (nor is refused, with O_NONBLOCK).
    #[arg(long)]
    pub(crate) no_lease: bool,
    /// Any engine setting by name, KEY=VALUE (repeatable; after the flags): budget, policy,
    /// backend, window_max, request_max, threads, direct, leases, drop_behind, pretouch,
    /// fault_ahead, keep_memory, budget_over_memory, remote.KEY for a store's own.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub(crate) option: Vec<String>,
}

#[cfg(feature = "mount")]
#[derive(Args)]
pub(crate) struct MountArgs {
    /// What to mount: s3://bucket[/prefix], a local directory (read with O_DIRECT through
    /// the engine), or http(s)://host/base with --manifest.
    pub(crate) source: String,
    /// An empty directory to mount it on.
    pub(crate) mountpoint: PathBuf,
    /// Memory budget of the engine's cache, shared by every open file (a hard limit).
    #[arg(long, default_value = "512m")]
    pub(crate) budget: String,
    /// Readahead policy of every open file.
    #[arg(long, default_value = ahead::engine::DEFAULT_POLICY)]
    pub(crate) policy: String,
    /// I/O backend: auto (io_uring if it works, else threads), uring, threads or sync.
    #[arg(long, default_value = "auto")]
    pub(crate) engine: String,
    /// Take a --budget above the memory this process can have (refused otherwise).
    #[arg(long)]
    pub(crate) budget_over_memory: bool,
    /// Go to the background once mounted (the command returns; the mount stays until
    /// `umount` or `fusermount3 -u`).
    #[arg(short = 'd', long)]
    pub(crate) background: bool,
    /// Print a line of the engine's counters to stderr this often (10s, 1m).
    #[arg(long)]
    pub(crate) stats_every: Option<String>,
    /// A file naming the files to show, one path under SOURCE a line (a/b/c.bin): needed for
    /// an HTTP server, which gives no listing; with another source, only those are shown.
    #[arg(long)]
    pub(crate) manifest: Option<PathBuf>,
    /// FUSE session threads: how many programs' reads can wait on the source at once.
    /// [default: 16]
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// The kernel's readahead on the mount's files (its read_ahead_kb; needs root): how
    /// large a FUSE read a program reading in order sends (at most 1m, FUSE's largest). 0
    /// leaves the kernel's default for a FUSE mount (128k).
    #[arg(long, value_name = "SIZE", default_value = "1m")]
    pub(crate) kernel_readahead: String,
    /// Any engine setting by name, KEY=VALUE, as `ahead cat -o` takes it (repeatable).
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub(crate) option: Vec<String>,
}

#[derive(Args)]
pub(crate) struct StatsArgs {
    /// A directory `ahead mount` serves.
    pub(crate) mountpoint: PathBuf,
    /// Print the statistics as JSON, as the mount's `.ahead/stats.json` holds them.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct CalibrateArgs {
    /// What to measure: a local file (256 MiB or more), a directory to write a 1 GiB scratch
    /// file in (removed after), or an object (`s3://bucket/key`, `http(s)://...`, 64 MiB or
    /// more). Default: the current directory.
    pub(crate) target: Option<String>,
    /// Write the profile (JSON) here; `--device FILE` takes it. Default: print it.
    #[arg(short = 'o', long)]
    pub(crate) output: Option<PathBuf>,
    /// How long each probe runs, in seconds (15 probes and the engine's own cost locally; 7
    /// probes and the engine's cost for an object).
    #[arg(long, default_value_t = 2.0)]
    pub(crate) probe_seconds: f64,
    /// An engine setting for an object's probes, KEY=VALUE (remote.endpoint=..., ...).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub(crate) set: Vec<String>,
    /// Also measure what a read through `ahead mount` costs (mounts the file's directory for
    /// a few seconds; needs /dev/fuse), for `ahead replay --mount`.
    #[arg(long)]
    pub(crate) mount: bool,
}

#[derive(Args, Clone)]
pub(crate) struct ModelArgs {
    /// Policy to run, or 'all'.
    #[arg(long, default_value = "all")]
    pub(crate) policy: String,
    /// Page cache size (64m, 1g, ...; default 256m).
    #[arg(long, conflicts_with = "cache_mb")]
    pub(crate) cache: Option<String>,
    /// The old spelling of --cache, in MiB.
    #[arg(long, hide = true)]
    pub(crate) cache_mb: Option<u64>,
    /// Device model: nvme, hdd or remote, or a profile `ahead calibrate` wrote (a .json file).
    #[arg(long, default_value = "nvme")]
    pub(crate) device: String,
    /// Maximum readahead window (the device's read_ahead_kb; 128k, 8m, ...). Default 128k;
    /// `replay` reads it from sysfs (or the trace directory) when the traced files are on this
    /// machine.
    #[arg(long, conflicts_with = "ra_max_kb")]
    pub(crate) ra_max: Option<String>,
    /// The old spelling of --ra-max, in KiB.
    #[arg(long, hide = true)]
    pub(crate) ra_max_kb: Option<u64>,
    /// Largest single I/O (the device's max_sectors_kb); defaults to the window, or to sysfs
    /// like --ra-max.
    #[arg(long, conflicts_with = "io_max_kb")]
    pub(crate) io_max: Option<String>,
    /// The old spelling of --io-max, in KiB.
    #[arg(long, hide = true)]
    pub(crate) io_max_kb: Option<u64>,
    /// Window of the `fixed` policy (default 128k).
    #[arg(long, conflicts_with = "fixed_kb")]
    pub(crate) fixed: Option<String>,
    /// The old spelling of --fixed, in KiB.
    #[arg(long, hide = true)]
    pub(crate) fixed_kb: Option<u64>,
    /// Largest page cache folio order linux-ondemand uses (default 9 = 2 MiB, as ext4/xfs on
    /// Linux 6.16+; 0 = no large folios, as older kernels).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=20))]
    pub(crate) folio_max_order: Option<u8>,
    /// Time the reader spends on each page, in microseconds.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) compute_us: f64,
    /// How the cache evicts: lru (the kernel's page cache) or clock (the engine's cache, to
    /// see what `ahead cat` and the library would do under memory pressure).
    #[arg(long, default_value = "lru", value_parser = ["lru", "clock"])]
    pub(crate) eviction: String,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct SimArgs {
    /// Pattern spec, e.g. seq:size=1g,bs=16k or paper:read=30,seek=2,repeat=984.
    #[arg(long, conflicts_with = "paper")]
    pub(crate) pattern: Option<String>,
    /// Reproduce the paper's Figures 4-10 (what `ahead sim` does with no pattern).
    #[arg(long)]
    pub(crate) paper: bool,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
}

#[derive(Args)]
pub(crate) struct ReplayArgs {
    /// The trace: an strace log (from `ahead trace`), a CSV with file,offset,len, or a directory
    /// from `ahead trace --kernel`.
    pub(crate) file: PathBuf,
    /// Write every readahead decision of the policy as CSV (file,start,size,async_size, in
    /// pages), as the kernel's page_cache_ra_order / page_cache_ra_unbounded events carry them.
    /// Takes one policy; with --policy all, linux-ondemand.
    #[arg(long, value_name = "FILE")]
    pub(crate) windows: Option<PathBuf>,
    /// Replay the program as it reads through `ahead mount`: the kernel's cache and readahead
    /// in front, then the engine's policy on what it asks for, each FUSE read at the cost
    /// `ahead calibrate --mount` measured (--device takes that profile).
    #[arg(long)]
    pub(crate) mount: bool,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
}

#[derive(Args)]
pub(crate) struct TraceArgs {
    /// Where to write: the strace log, or with --kernel a directory.
    #[arg(short, long)]
    pub(crate) output: PathBuf,
    /// Also record the live kernel's readahead tracepoints for the files read (needs root,
    /// tracefs and Linux 6.16+), into the directory --output.
    #[arg(long)]
    pub(crate) kernel: bool,
    /// With --kernel: instead of a command, run this pattern for real (buffered preads) against
    /// --file, its cached pages dropped first.
    #[arg(long, requires_all = ["kernel", "file"], conflicts_with = "command")]
    pub(crate) pattern: Option<String>,
    /// The file --pattern reads (created, filled, if it does not exist).
    #[arg(long, requires = "pattern")]
    pub(crate) file: Option<PathBuf>,
    /// With --kernel and a command: drop this file's cached pages before running (repeatable),
    /// so the kernel starts cold as the model does.
    #[arg(long, requires = "kernel", value_name = "PATH")]
    pub(crate) drop: Vec<PathBuf>,
    /// Then run the command again, untraced, on its files as the first run left them in the
    /// kernel's cache, and keep its time in the log (`# program_ns:`): `replay` spends it
    /// between the reads. Runs the command twice: not for commands that change things.
    #[arg(long, conflicts_with = "kernel")]
    pub(crate) time: bool,
    /// The command to run, after `--`.
    #[arg(last = true, required_unless_present = "pattern")]
    pub(crate) command: Vec<String>,
}

#[derive(Args)]
pub(crate) struct CompareArgs {
    /// A directory written by `ahead trace --kernel`.
    pub(crate) dir: PathBuf,
    /// The policy whose totals are shown beside the kernel model's ("what it would have done
    /// instead"). Default: adaptive when the build has it, else pratt.
    #[arg(long)]
    pub(crate) instead: Option<String>,
    /// How many differing windows to show per file.
    #[arg(long, default_value_t = 5)]
    pub(crate) show: usize,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Defaults the model takes from where a trace came from (see
/// [`ahead::kernel::load_for_replay`]), used where the user gave no value.
pub(crate) use ahead::kernel::TraceDefaults as Defaults;

/// The engine flags `cat` and `mount` share, each as a setting by name (the library's one
/// table, as `-o KEY=VALUE` is): (key, value, the flag it came from).
pub(crate) fn engine_settings(
    budget: &str,
    policy: &str,
    backend: &str,
    budget_over_memory: bool,
) -> Vec<(&'static str, String, String)> {
    let mut settings = vec![
        ("budget", budget.to_string(), "--budget".to_string()),
        ("policy", policy.to_string(), "--policy".to_string()),
        ("backend", backend.to_string(), "--engine".to_string()),
    ];
    if budget_over_memory {
        settings.push((
            "budget_over_memory",
            "true".to_string(),
            "--budget-over-memory".to_string(),
        ));
    }
    settings
}

/// `builder` with `settings` (from flags) and then `options` (`-o KEY=VALUE`) set on it.
pub(crate) fn with_settings(
    mut builder: ahead::engine::EngineBuilder,
    settings: Vec<(&str, String, String)>,
    options: &[String],
) -> Result<ahead::engine::EngineBuilder, Failure> {
    for (key, value, flag) in settings {
        builder = builder.set_as(key, &value, &flag).map_err(usage)?;
    }
    for pair in options {
        builder = builder
            .set_pair(pair)
            .map_err(|e| usage(format!("-o: {e}")))?;
    }
    Ok(builder)
}

/// The engine `builder` makes, or the failure: a bad setting is a usage error.
pub(crate) fn start_engine(
    builder: ahead::engine::EngineBuilder,
) -> Result<ahead::engine::Engine, Failure> {
    builder.build().map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => usage(e.to_string()),
        _ => runtime(format!("cannot start the engine: {e}")),
    })
}

/// A size flag in the one syntax (`--cache 64m`), or its old spelling in a fixed unit
/// (`--cache-mb 64`, `unit` = 1 MiB): bytes, if either was given.
pub(crate) fn size_flag(
    flag: &str,
    new: &Option<String>,
    old: Option<u64>,
    unit: u64,
) -> Result<Option<u64>, Failure> {
    match (new, old) {
        (Some(text), _) => ahead::units::parse_size(text)
            .map(|b| Some(b.0))
            .map_err(|e| usage(format!("--{flag}: {e}"))),
        (None, Some(n)) => n
            .checked_mul(unit)
            .map(Some)
            .ok_or_else(|| usage(format!("--{flag}: too large"))),
        (None, None) => Ok(None),
    }
}

/// A size for a header line: whole MiB where it is, else KiB.
pub(crate) fn show_size(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

impl ModelArgs {
    /// The page cache's size in bytes.
    pub(crate) fn cache_bytes(&self) -> Result<u64, Failure> {
        let b = size_flag("cache", &self.cache, self.cache_mb, 1 << 20)?.unwrap_or(256 << 20);
        if b < PAGE_SIZE {
            return Err(usage("--cache must be at least one page (4k)"));
        }
        Ok(b)
    }

    /// --ra-max in KiB, if given.
    pub(crate) fn ra_max_kb(&self) -> Result<Option<u64>, Failure> {
        Ok(size_flag("ra-max", &self.ra_max, self.ra_max_kb, 1 << 10)?.map(|b| b >> 10))
    }

    /// --io-max in KiB, if given.
    pub(crate) fn io_max_kb(&self) -> Result<Option<u64>, Failure> {
        Ok(size_flag("io-max", &self.io_max, self.io_max_kb, 1 << 10)?.map(|b| b >> 10))
    }

    pub(crate) fn config(&self) -> Result<SimConfig, Failure> {
        self.config_with(Defaults::default())
    }

    /// The window the run uses, in KiB.
    pub(crate) fn ra_kb(&self, d: Defaults) -> u64 {
        self.ra_max_kb()
            .ok()
            .flatten()
            .or(d.ra_max_kb)
            .unwrap_or(128)
    }

    pub(crate) fn config_with(&self, d: Defaults) -> Result<SimConfig, Failure> {
        let device = DeviceModel::named(&self.device).map_err(usage)?;
        let kb_pages = ahead::units::kib_to_pages;
        let cache_bytes = self.cache_bytes()?;
        let ra_max_kb = self.ra_max_kb()?;
        let fixed_kb =
            size_flag("fixed", &self.fixed, self.fixed_kb, 1 << 10)?.map_or(128, |b| b >> 10);
        if !(self.compute_us >= 0.0 && self.compute_us.is_finite()) {
            return Err(usage(
                "--compute-us must be a number of microseconds, 0 or more",
            ));
        }
        let ra_kb = self.ra_kb(d);
        if ra_kb > 1 << 30 {
            return Err(usage("--ra-max is too large"));
        }
        let ra = kb_pages(ra_kb);
        let io_kb = self.io_max_kb()?.or(if ra_max_kb.is_some() {
            None
        } else {
            d.io_max_kb
        });
        Ok(SimConfig {
            cache_pages: (cache_bytes / PAGE_SIZE) as usize,
            device,
            compute_ns_per_page: (self.compute_us * 1000.0) as u64,
            policy: PolicyConfig::new(ra, io_kb.map(kb_pages).unwrap_or(ra))
                .with_fixed_pages(kb_pages(fixed_kb))
                .with_folio_max_order(
                    self.folio_max_order
                        .or(d.folio_max_order)
                        .unwrap_or(PolicyConfig::default().folio_max_order),
                ),
            eviction: if self.eviction == "clock" {
                sim::Eviction::Clock
            } else {
                sim::Eviction::Lru
            },
            ..SimConfig::default()
        })
    }

    /// The policies to run; the oracle always runs too, as the yardstick.
    pub(crate) fn policies(&self) -> Result<Vec<&'static str>, Failure> {
        let mut list = self.chosen_policies()?;
        if !list.contains(&ORACLE) {
            list.push(ORACLE);
        }
        Ok(list)
    }

    pub(crate) fn chosen_policies(&self) -> Result<Vec<&'static str>, Failure> {
        if self.policy == "all" {
            return Ok(ahead::policy::names().collect());
        }
        self.policy
            .split(',')
            .map(|name| {
                ahead::policy::names()
                    .find(|n| *n == name.trim())
                    .ok_or_else(|| {
                        usage(format!(
                            "unknown policy '{name}'; known policies: {}, or all",
                            ahead::policy::names().collect::<Vec<_>>().join(", ")
                        ))
                    })
            })
            .collect()
    }
}
