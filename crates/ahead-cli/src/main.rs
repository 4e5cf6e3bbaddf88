//! `ahead`: the command-line tool. A thin layer over the `ahead` library: it parses arguments,
//! runs the simulator and prints tables or JSON. Usage errors exit with 2, runtime errors with 1,
//! each with one line that says what to do.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use ahead::kernel::{self, capture, TraceDir};
use ahead::paper;
use ahead::pattern::Pattern;
use ahead::policy::{PolicyConfig, Window, ORACLE};
use ahead::report;
use ahead::sim::{self, DeviceModel, RunReport, SimConfig};
use ahead::units::PAGE_SIZE;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod bench;
use serde_json::json;

/// The help after `sim`'s and `replay`'s options, from the registries: every policy, pattern
/// and device model as the library lists them.
fn after_help() -> String {
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

#[derive(Parser)]
#[command(
    name = "ahead",
    version,
    about = "Userspace readahead: simulate readahead policies on patterns and traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate policies on a pattern, or reproduce the 2004 paper's Figures 4-10 (the default).
    Sim(SimArgs),
    /// Simulate policies on a recorded trace (strace log or CSV). Never opens the traced files.
    Replay(ReplayArgs),
    /// Run a command under strace and write the log `replay` reads; with --kernel, also record
    /// the live kernel's readahead decisions (or run a pattern for real) into a directory.
    Trace(TraceArgs),
    /// Line up the live kernel's readahead windows (from `trace --kernel`) with the
    /// linux-ondemand model's for the same reads.
    Compare(CompareArgs),
    /// Read files through the engine (io_uring, O_DIRECT, ahead's own readahead and cache) and
    /// write them to stdout, like cat.
    Cat(CatArgs),
    /// Benchmark readahead on real I/O: the kernel, O_DIRECT, the engine's policies and the
    /// device's own limit, on the same file, cold, repeated, side by side.
    Bench(BenchArgs),
}

#[derive(Args)]
struct BenchArgs {
    /// An existing file to read (at least 64 MiB; never written). Default: ahead-bench.dat in
    /// --dir, created with --size random bytes if missing.
    #[arg(long, conflicts_with = "dir")]
    file: Option<PathBuf>,
    /// Where to create the test file and the nfiles files (default: the current directory;
    /// not tmpfs).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Size of the test file, or of the part of --file read (default 2g).
    #[arg(long)]
    size: Option<String>,
    /// A short suite: runs capped at 1 s, one repeat (under 2 minutes here).
    #[arg(long)]
    quick: bool,
    /// Patterns to run, comma-separated (default: all).
    #[arg(long)]
    patterns: Option<String>,
    /// Contenders, comma-separated: kernel, kernel-seq, direct, device, ahead:<policy>.
    #[arg(long)]
    contenders: Option<String>,
    /// Repeats of every run (default 5; 1 with --quick).
    #[arg(long)]
    repeat: Option<usize>,
    /// Longest one run may take, in seconds (default 3; 1 with --quick).
    #[arg(long)]
    cap_s: Option<f64>,
    /// Memory budget of each engine's cache (default: a quarter of RAM, as a database's buffer
    /// pool is sized; the kernel's page cache may use all free memory). nfiles keeps 256m.
    #[arg(long)]
    budget: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a picture (SVG) of the ratios to the kernel per pattern to this file, and one of
    /// the first engine run's requests over time beside it (NAME-windows.svg).
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Args)]
struct CatArgs {
    /// Files to read, in order.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Size of each read, like dd's bs (4k, 128k, 1m, ...).
    #[arg(long, default_value = "128k")]
    bs: String,
    /// Readahead policy.
    #[arg(long, default_value = ahead::engine::DEFAULT_POLICY)]
    policy: String,
    /// I/O backend: auto (io_uring if it works, else threads), uring, threads or sync.
    #[arg(long, default_value = "auto")]
    engine: String,
    /// Memory budget of the engine's cache (a hard limit).
    #[arg(long, default_value = "256m")]
    budget: String,
    /// Print the engine's statistics to stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Largest readahead window (8m, ...; default: sized for the device).
    #[arg(long, conflicts_with = "ra_max_kb")]
    ra_max: Option<String>,
    /// The old spelling of --ra-max, in KiB.
    #[arg(long, hide = true)]
    ra_max_kb: Option<u64>,
    /// Largest single read (4m, ...; default: the device's max_sectors_kb).
    #[arg(long, conflicts_with = "io_max_kb")]
    io_max: Option<String>,
    /// The old spelling of --io-max, in KiB.
    #[arg(long, hide = true)]
    io_max_kb: Option<u64>,
    /// Take no read lease on the files: every read checks the file's size with fstat, and a
    /// writer's open never waits for ahead (nor is refused, with O_NONBLOCK).
    #[arg(long)]
    no_lease: bool,
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// Policy to run, or 'all'.
    #[arg(long, default_value = "all")]
    policy: String,
    /// Page cache size (64m, 1g, ...; default 256m).
    #[arg(long, conflicts_with = "cache_mb")]
    cache: Option<String>,
    /// The old spelling of --cache, in MiB.
    #[arg(long, hide = true)]
    cache_mb: Option<u64>,
    /// Device model: nvme, hdd or remote.
    #[arg(long, default_value = "nvme")]
    device: String,
    /// Maximum readahead window (the device's read_ahead_kb; 128k, 8m, ...). Default 128k;
    /// `replay` reads it from sysfs (or the trace directory) when the traced files are on this
    /// machine.
    #[arg(long, conflicts_with = "ra_max_kb")]
    ra_max: Option<String>,
    /// The old spelling of --ra-max, in KiB.
    #[arg(long, hide = true)]
    ra_max_kb: Option<u64>,
    /// Largest single I/O (the device's max_sectors_kb); defaults to the window, or to sysfs
    /// like --ra-max.
    #[arg(long, conflicts_with = "io_max_kb")]
    io_max: Option<String>,
    /// The old spelling of --io-max, in KiB.
    #[arg(long, hide = true)]
    io_max_kb: Option<u64>,
    /// Window of the `fixed` policy (default 128k).
    #[arg(long, conflicts_with = "fixed_kb")]
    fixed: Option<String>,
    /// The old spelling of --fixed, in KiB.
    #[arg(long, hide = true)]
    fixed_kb: Option<u64>,
    /// Largest page cache folio order linux-ondemand uses (default 9 = 2 MiB, as ext4/xfs on
    /// Linux 6.16+; 0 = no large folios, as older kernels).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=20))]
    folio_max_order: Option<u8>,
    /// Time the reader spends on each page, in microseconds.
    #[arg(long, default_value_t = 0.0)]
    compute_us: f64,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SimArgs {
    /// Pattern spec, e.g. seq:size=1g,bs=16k or paper:read=30,seek=2,repeat=984.
    #[arg(long, conflicts_with = "paper")]
    pattern: Option<String>,
    /// Reproduce the paper's Figures 4-10 (what `ahead sim` does with no pattern).
    #[arg(long)]
    paper: bool,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Args)]
struct ReplayArgs {
    /// The trace: an strace log (from `ahead trace`), a CSV with file,offset,len, or a directory
    /// from `ahead trace --kernel`.
    file: PathBuf,
    /// Write every readahead decision of the policy as CSV (file,start,size,async_size, in
    /// pages), as the kernel's page_cache_ra_order / page_cache_ra_unbounded events carry them.
    /// Takes one policy; with --policy all, linux-ondemand.
    #[arg(long, value_name = "FILE")]
    windows: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Args)]
struct TraceArgs {
    /// Where to write: the strace log, or with --kernel a directory.
    #[arg(short, long)]
    output: PathBuf,
    /// Also record the live kernel's readahead tracepoints for the files read (needs root,
    /// tracefs and Linux 6.16+), into the directory --output.
    #[arg(long)]
    kernel: bool,
    /// With --kernel: instead of a command, run this pattern for real (buffered preads) against
    /// --file, its cached pages dropped first.
    #[arg(long, requires_all = ["kernel", "file"], conflicts_with = "command")]
    pattern: Option<String>,
    /// The file --pattern reads (created, filled, if it does not exist).
    #[arg(long, requires = "pattern")]
    file: Option<PathBuf>,
    /// With --kernel and a command: drop this file's cached pages before running (repeatable),
    /// so the kernel starts cold as the model does.
    #[arg(long, requires = "kernel", value_name = "PATH")]
    drop: Vec<PathBuf>,
    /// The command to run, after `--`.
    #[arg(last = true, required_unless_present = "pattern")]
    command: Vec<String>,
}

#[derive(Args)]
struct CompareArgs {
    /// A directory written by `ahead trace --kernel`.
    dir: PathBuf,
    /// The policy whose totals are shown beside the kernel model's ("what it would have done
    /// instead"). Default: adaptive when the build has it, else pratt.
    #[arg(long)]
    instead: Option<String>,
    /// How many differing windows to show per file.
    #[arg(long, default_value_t = 5)]
    show: usize,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
}

/// A failure: usage (exit 2) or runtime (exit 1).
enum Failure {
    Usage(String),
    Runtime(String),
}

fn usage(e: impl Into<String>) -> Failure {
    Failure::Usage(e.into())
}

fn runtime(e: impl Into<String>) -> Failure {
    Failure::Runtime(e.into())
}

fn main() -> ExitCode {
    let help = after_help();
    let command = Cli::command()
        .mut_subcommand("sim", |c| c.after_help(help.clone()))
        .mut_subcommand("replay", |c| c.after_help(help.clone()));
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let outcome = match cli.command {
        Command::Sim(a) => cmd_sim(a),
        Command::Replay(a) => cmd_replay(a),
        Command::Trace(a) => cmd_trace(a),
        Command::Compare(a) => cmd_compare(a),
        Command::Cat(a) => cmd_cat(a),
        Command::Bench(a) => cmd_bench(a),
    };
    match outcome {
        Ok(text) => {
            // A closed pipe (`ahead sim | head`) is not an error worth a word.
            match std::io::stdout().lock().write_all(text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("error: cannot write the output: {e}");
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Err(Failure::Usage(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(1)
        }
    }
}

/// Defaults the model takes from where a trace came from (a trace directory's meta, or sysfs
/// for files on this machine), used where the user gave no value.
#[derive(Clone, Copy, Debug, Default)]
struct Defaults {
    ra_max_kb: Option<u64>,
    io_max_kb: Option<u64>,
    folio_max_order: Option<u8>,
}

/// A size flag in the one syntax (`--cache 64m`), or its old spelling in a fixed unit
/// (`--cache-mb 64`, `unit` = 1 MiB): bytes, if either was given.
fn size_flag(
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
fn show_size(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

impl ModelArgs {
    /// The page cache's size in bytes.
    fn cache_bytes(&self) -> Result<u64, Failure> {
        let b = size_flag("cache", &self.cache, self.cache_mb, 1 << 20)?.unwrap_or(256 << 20);
        if b < PAGE_SIZE {
            return Err(usage("--cache must be at least one page (4k)"));
        }
        Ok(b)
    }

    /// --ra-max in KiB, if given.
    fn ra_max_kb(&self) -> Result<Option<u64>, Failure> {
        Ok(size_flag("ra-max", &self.ra_max, self.ra_max_kb, 1 << 10)?.map(|b| b >> 10))
    }

    /// --io-max in KiB, if given.
    fn io_max_kb(&self) -> Result<Option<u64>, Failure> {
        Ok(size_flag("io-max", &self.io_max, self.io_max_kb, 1 << 10)?.map(|b| b >> 10))
    }

    fn config(&self) -> Result<SimConfig, Failure> {
        self.config_with(Defaults::default())
    }

    /// The window the run uses, in KiB.
    fn ra_kb(&self, d: Defaults) -> u64 {
        self.ra_max_kb()
            .ok()
            .flatten()
            .or(d.ra_max_kb)
            .unwrap_or(128)
    }

    fn config_with(&self, d: Defaults) -> Result<SimConfig, Failure> {
        let device = DeviceModel::preset(&self.device).map_err(usage)?;
        let kb_pages = |kb: u64| kb * 1024 / PAGE_SIZE;
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
            policy: PolicyConfig {
                ra_max_pages: ra,
                io_max_pages: io_kb.map(kb_pages).unwrap_or(ra),
                fixed_pages: kb_pages(fixed_kb),
                folio_max_order: self
                    .folio_max_order
                    .or(d.folio_max_order)
                    .unwrap_or(PolicyConfig::default().folio_max_order),
            },
            ..SimConfig::default()
        })
    }

    /// The policies to run; the oracle always runs too, as the yardstick.
    fn policies(&self) -> Result<Vec<&'static str>, Failure> {
        let mut list = self.chosen_policies()?;
        if !list.contains(&ORACLE) {
            list.push(ORACLE);
        }
        Ok(list)
    }

    fn chosen_policies(&self) -> Result<Vec<&'static str>, Failure> {
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

fn json_text(v: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(v).expect("JSON serializes");
    text.push('\n');
    text
}

/// One row per run, faithful totals.
fn totals_table(runs: &[RunReport]) -> String {
    let rows: Vec<(&str, &sim::Metrics)> = runs
        .iter()
        .map(|r| (r.policy.as_str(), &r.faithful))
        .collect();
    report::metrics_table(&rows)
}

fn cmd_sim(a: SimArgs) -> Result<String, Failure> {
    let mut out = String::new();
    let config = a.model.config()?;
    let policies = a.model.policies()?;
    let Some(spec) = a.pattern else {
        let figures = paper::reproduce(&policies, config).map_err(runtime)?;
        if a.model.json {
            out.push_str(&json_text(&report::paper_json(&figures)));
        } else {
            writeln!(out, "The 2004 readahead paper's Figures 4-10 (Pai, Pulavarty, Cao, OLS 2004), reproduced.").ok();
            writeln!(out, "Left: the paper's accounting (every window page counts as read; wasted = read - requested).").ok();
            writeln!(out, "Right: a faithful page cache. '!' marks a cell more than 1% (and 3) from the paper.\n").ok();
            for f in &figures {
                writeln!(out, "{}", report::paper_figure_table(f)).ok();
            }
        }
        return Ok(out);
    };
    let pattern = Pattern::parse(&spec).map_err(usage)?;
    let runs = policies
        .iter()
        .map(|p| sim::run(p, config, pattern.workload()))
        .collect::<Result<Vec<RunReport>, String>>()
        .map_err(runtime)?;
    if a.model.json {
        out.push_str(&json_text(&json!({
            "pattern": spec,
            "device": config.device,
            "cache_pages": config.cache_pages,
            "ra_max_pages": config.policy.ra_max_pages,
            "results": report::results_json(&runs),
        })));
    } else {
        writeln!(
            out,
            "pattern {spec}, device {}, cache {}, max window {} KiB",
            config.device,
            show_size(config.cache_pages as u64 * PAGE_SIZE),
            a.model.ra_kb(Defaults::default())
        )
        .ok();
        out.push_str(&totals_table(&runs));
    }
    Ok(out)
}

/// Where a trace's model defaults come from: its directory's meta, or sysfs for files on this
/// machine. Returns the defaults and a phrase saying where they came from.
fn trace_defaults(
    input: &std::path::Path,
    trace: &ahead::trace::Trace,
) -> Result<(Defaults, String), Failure> {
    let kb = |d: Defaults| d.ra_max_kb.map(|v| format!("{v} KiB")).unwrap_or_default();
    if TraceDir::is_trace_dir(input) {
        let dir = TraceDir::load(input).map_err(runtime)?;
        let (ra_max_kb, io_max_kb) = dir.meta.device_limits();
        let d = Defaults {
            ra_max_kb,
            io_max_kb,
            folio_max_order: Some(dir.meta.folio_max_order),
        };
        let from = format!("read_ahead_kb {} recorded in {}", kb(d), input.display());
        return Ok((d, from));
    }
    for f in &trace.files {
        let path = std::path::Path::new(&f.name);
        if let (Some(ra), io) = ahead::os::device_limits(path) {
            let d = Defaults {
                ra_max_kb: Some(ra),
                io_max_kb: io,
                folio_max_order: None,
            };
            return Ok((
                d,
                format!("read_ahead_kb {} from sysfs for {}", kb(d), f.name),
            ));
        }
    }
    Ok((Defaults::default(), String::new()))
}

/// A CSV field, quoted when it has to be.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn cmd_replay(a: ReplayArgs) -> Result<String, Failure> {
    // Usage first: a wrong option is reported before the trace is read.
    a.model.config_with(Defaults::default())?;
    a.model.policies()?;
    let mut out = String::new();
    let reads_path = if TraceDir::is_trace_dir(&a.file) {
        TraceDir::reads_path(&a.file).map_err(runtime)?
    } else {
        a.file.clone()
    };
    let trace = ahead::trace::read_path(&reads_path)
        .map_err(|e| runtime(format!("{}: {e}", reads_path.display())))?;
    let (defaults, from) = trace_defaults(&a.file, &trace)?;
    let config = a.model.config_with(defaults)?;
    let mut policies = a.model.policies()?;
    if a.windows.is_some() {
        policies = a.model.chosen_policies()?;
        if a.model.policy == "all" {
            policies = vec!["linux-ondemand"];
        } else if policies.len() != 1 {
            return Err(usage("--windows takes one --policy"));
        }
    }
    let sizes: Vec<u64> = trace.files.iter().map(|f| f.size.0).collect();
    let mut runs = Vec::new();
    for p in &policies {
        let mut s = sim::Simulator::new(p, config).map_err(runtime)?;
        if let Some(path) = &a.windows {
            s.record_windows();
            s.run_workload(trace.clone().into_workload())
                .map_err(runtime)?;
            let mut csv = String::from("file,start,size,async_size\n");
            for w in s.windows() {
                writeln!(
                    csv,
                    "{},{},{},{}",
                    csv_field(s.file_name(w.file)),
                    w.window.start,
                    w.window.size,
                    w.window.async_size
                )
                .ok();
            }
            if s.windows().is_empty() {
                eprintln!("note: policy {p} names no windows (only linux-ondemand models the kernel's tracepoints)");
            }
            std::fs::write(path, csv)
                .map_err(|e| runtime(format!("cannot write {}: {e}", path.display())))?;
            eprintln!(
                "wrote {} windows of {p} to {}",
                s.windows().len(),
                path.display()
            );
        } else {
            s.run_workload(trace.clone().into_workload())
                .map_err(runtime)?;
        }
        runs.push(s.report());
    }
    if a.model.json {
        out.push_str(&json_text(&json!({
            "trace": a.file.display().to_string(),
            "ra_max_pages": config.policy.ra_max_pages,
            "io_max_pages": config.policy.io_max_pages,
            "folio_max_order": config.policy.folio_max_order,
            "results": report::results_json(&runs),
            "files": report::files_json(&runs, &sizes),
        })));
        return Ok(out);
    }
    let ra_kb = a.model.ra_kb(defaults);
    writeln!(
        out,
        "trace {}: {} reads over {} files; device {}, cache {}, max window {ra_kb} KiB{}",
        a.file.display(),
        trace.reads(),
        trace.files.len(),
        config.device,
        show_size(config.cache_pages as u64 * PAGE_SIZE),
        if a.model.ra_max_kb().ok().flatten().is_none() && !from.is_empty() {
            format!(" ({from})")
        } else {
            String::new()
        }
    )
    .ok();
    out.push_str(&totals_table(&runs));
    if trace.files.len() > 1 {
        for (i, f) in trace.files.iter().enumerate() {
            writeln!(out, "\n{} ({} bytes)", f.name, f.size.0).ok();
            let rows: Vec<(&str, &sim::Metrics)> = runs
                .iter()
                .map(|r| (r.policy.as_str(), &r.files[i].metrics))
                .collect();
            write!(out, "{}", report::metrics_table(&rows)).ok();
        }
    }
    Ok(out)
}

fn cmd_trace(a: TraceArgs) -> Result<String, Failure> {
    if a.kernel {
        return cmd_trace_kernel(a);
    }
    if !a.drop.is_empty() {
        return Err(usage("--drop goes with --kernel"));
    }
    check_output_dir(&a.output)?;
    if let Some(cmd) = a.command.first() {
        if !command_exists(cmd) {
            return Err(runtime(format!(
                "{cmd}: command not found: give a program to trace, as in `ahead trace -o t.log -- cat FILE`"
            )));
        }
    }
    let status = ahead::trace::run_strace(&a.output, &a.command).map_err(runtime)?;
    if !a.output.exists() {
        return Err(runtime(format!(
            "strace wrote no log to {}",
            a.output.display()
        )));
    }
    eprintln!(
        "wrote {}; replay it with: ahead replay {}",
        a.output.display(),
        a.output.display()
    );
    if !status.success() {
        return Err(runtime(format!("the traced command exited with {status}")));
    }
    Ok(String::new())
}

fn cmd_trace_kernel(a: TraceArgs) -> Result<String, Failure> {
    let out = &a.output;
    if out.exists() && !out.is_dir() {
        return Err(usage(format!(
            "{} exists and is not a directory: --kernel writes a directory",
            out.display()
        )));
    }
    if let Some(spec) = &a.pattern {
        let file = a
            .file
            .as_ref()
            .expect("clap requires --file with --pattern");
        Pattern::parse(spec).map_err(usage)?;
        let rec = capture::record_pattern(spec, file, out).map_err(runtime)?;
        eprintln!(
            "ran {spec} on {}: {} reads, {} kernel readahead events; wrote {}\n\
             compare with: ahead compare {}",
            file.display(),
            rec.reads,
            rec.events,
            rec.dir.display(),
            rec.dir.display()
        );
        return Ok(String::new());
    }
    let (rec, status) = capture::record_command(&a.command, &a.drop, out).map_err(runtime)?;
    eprintln!(
        "{} reads, {} kernel readahead events for the files read; wrote {}\n\
         compare with: ahead compare {}",
        rec.reads,
        rec.events,
        rec.dir.display(),
        rec.dir.display()
    );
    if !status.success() {
        return Err(runtime(format!("the traced command exited with {status}")));
    }
    Ok(String::new())
}

/// The policy `compare` shows beside the kernel model by default.
fn default_instead() -> &'static str {
    if ahead::policy::names().any(|n| n == "adaptive") {
        "adaptive"
    } else {
        "pratt"
    }
}

fn window_text(w: Option<&Window>) -> String {
    match w {
        Some(w) => format!("{:>9} {:>6} {:>6}", w.start, w.size, w.async_size),
        None => format!("{:>9} {:>6} {:>6}", "-", "-", "-"),
    }
}

fn cmd_compare(a: CompareArgs) -> Result<String, Failure> {
    let instead = a.instead.as_deref().unwrap_or(default_instead());
    ahead::policy::validate_name(instead).map_err(usage)?;
    let dir = TraceDir::load(&a.dir).map_err(runtime)?;
    let cmp = kernel::compare(&dir).map_err(runtime)?;
    let config = dir.sim_config();
    let runs = ["linux-ondemand", instead]
        .iter()
        .map(|p| sim::run(p, config, dir.reads.clone().into_workload()))
        .collect::<Result<Vec<RunReport>, String>>()
        .map_err(runtime)?;
    if a.json {
        return Ok(json_text(&json!({
            "dir": a.dir.display().to_string(),
            "kernel": dir.meta.kernel,
            "source": dir.meta.source,
            "kernel_windows": cmp.kernel_windows(),
            "model_windows": cmp.model_windows(),
            "identical": cmp.identical(),
            "exact_share": cmp.exact_share(),
            "comparison": cmp,
            "results": report::results_json(&runs),
        })));
    }
    let mut out = String::new();
    writeln!(
        out,
        "{}: {} on Linux {}\nmodel: linux-ondemand, max window {} pages, largest I/O {} pages, folios up to order {}\n",
        a.dir.display(),
        dir.meta.source,
        dir.meta.kernel,
        cmp.ra_max_pages,
        cmp.io_max_pages,
        cmp.folio_max_order
    )
    .ok();
    let skipped: Vec<&str> = cmp
        .files
        .iter()
        .filter(|f| !f.compared)
        .map(|f| f.path.as_str())
        .collect();
    if !skipped.is_empty() {
        writeln!(
            out,
            "not compared (their cache state before the run is unknown; name them with --drop to trace them cold): {}\n",
            skipped.join(", ")
        )
        .ok();
    }
    for f in cmp.files.iter().filter(|f| f.compared) {
        writeln!(
            out,
            "{}: kernel {} windows, model {}, identical {}",
            f.path,
            f.kernel.len(),
            f.model.len(),
            f.identical
        )
        .ok();
        if let Some(first) = f.first_difference {
            writeln!(
                out,
                "  first difference at decision {first}:\n  {:>5}  {:>9} {:>6} {:>6}   {:>9} {:>6} {:>6}",
                "#", "kernel", "size", "async", "model", "size", "async"
            )
            .ok();
            let from = first.saturating_sub(1);
            let to = (first + a.show).min(f.kernel.len().max(f.model.len()));
            for i in from..to {
                writeln!(
                    out,
                    "  {i:>5}  {}   {}{}",
                    window_text(f.kernel.get(i)),
                    window_text(f.model.get(i)),
                    if f.kernel.get(i) == f.model.get(i) {
                        ""
                    } else {
                        "  <"
                    }
                )
                .ok();
            }
        }
    }
    if cmp.kernel_windows() + cmp.model_windows() == 0 {
        writeln!(
            out,
            "\nno windows compared: neither the kernel nor the model read ahead on a cold file\n"
        )
        .ok();
    } else {
        writeln!(
            out,
            "\nidentical windows: {} of {} kernel windows ({} model windows): {:.2}%\n",
            cmp.identical(),
            cmp.kernel_windows(),
            cmp.model_windows(),
            100.0 * cmp.exact_share()
        )
        .ok();
    }
    writeln!(
        out,
        "the same reads through the model and through {instead} instead:"
    )
    .ok();
    out.push_str(&totals_table(&runs));
    Ok(out)
}

fn cmd_cat(a: CatArgs) -> Result<String, Failure> {
    use ahead::engine::{BackendChoice, Engine};
    use std::io::{BufWriter, ErrorKind};
    let bs = ahead::units::parse_size(&a.bs)
        .map_err(|e| usage(format!("--bs: {e}")))?
        .0;
    if bs == 0 || bs > 1 << 30 {
        return Err(usage("--bs must be between 1 byte and 1g"));
    }
    let budget = ahead::units::parse_size(&a.budget)
        .map_err(|e| usage(format!("--budget: {e}")))?
        .0;
    let backend: BackendChoice = a
        .engine
        .parse()
        .map_err(|e: String| usage(format!("--engine: {e}")))?;
    ahead::policy::validate_name(&a.policy).map_err(usage)?;
    if a.policy == ORACLE {
        return Err(usage("the oracle needs the whole trace in advance: it runs only in sim and replay; pick another --policy"));
    }
    let mut builder = Engine::builder()
        .policy(&a.policy)
        .backend(backend)
        .budget(budget)
        .leases(!a.no_lease);
    if let Some(b) = size_flag("ra-max", &a.ra_max, a.ra_max_kb, 1 << 10)? {
        if b < 1 << 10 {
            return Err(usage("--ra-max must be at least 1k"));
        }
        builder = builder.ra_max_kb(b >> 10);
    }
    if let Some(b) = size_flag("io-max", &a.io_max, a.io_max_kb, 1 << 10)? {
        if b < PAGE_SIZE {
            return Err(usage("--io-max must be at least 4k (one page)"));
        }
        builder = builder.io_max_kb(b >> 10);
    }
    let engine = builder.build().map_err(|e| match e.kind() {
        ErrorKind::InvalidInput => usage(e.to_string()),
        _ => runtime(format!("cannot start the engine: {e}")),
    })?;
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let mut buf = vec![0u8; bs as usize];
    // Like cat: a file that fails is reported, and the others are still written.
    let mut errors: Vec<String> = Vec::new();
    'files: for path in &a.paths {
        // No size to read ahead in (a device, a FIFO, a procfs or sysfs file): read it
        // plainly to its end, as cat does.
        if let Ok(Some(_)) = ahead::engine::sizeless(path) {
            match copy_plainly(path, &mut out) {
                Ok(()) => {}
                Err(CopyError::Write(e)) if e.kind() == ErrorKind::BrokenPipe => break 'files,
                Err(CopyError::Write(e)) => {
                    return Err(runtime(format!("cannot write to stdout: {e}")))
                }
                Err(CopyError::Read(e)) => errors.push(format!("{}: {e}", path.display())),
            }
            continue;
        }
        let file = match engine.open(path) {
            Ok(f) => f,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        let mut offset = 0u64;
        loop {
            let n = match file.read_at(&mut buf, offset) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    errors.push(format!("{}: read at byte {offset}: {e}", path.display()));
                    continue 'files;
                }
            };
            if let Err(e) = out.write_all(&buf[..n]) {
                if e.kind() == ErrorKind::BrokenPipe {
                    break 'files;
                }
                return Err(runtime(format!("cannot write to stdout: {e}")));
            }
            offset += n as u64;
        }
    }
    match out.flush() {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => {
            return Err(runtime(format!("cannot write to stdout: {e}")))
        }
        _ => {}
    }
    drop(out);
    if a.stats {
        eprintln!("{}", engine.stats());
    }
    match errors.len() {
        0 => Ok(String::new()),
        1 => Err(runtime(errors.remove(0))),
        n => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            Err(runtime(format!(
                "{n} of {} files could not be read in full (see above)",
                a.paths.len()
            )))
        }
    }
}

enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copy `path` to `out` with plain reads until one returns 0, as cat does a file whose size
/// says nothing (procfs, sysfs, a device, a FIFO).
fn copy_plainly(path: &std::path::Path, out: &mut impl std::io::Write) -> Result<(), CopyError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(CopyError::Read)?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        out.write_all(&buf[..n]).map_err(CopyError::Write)?;
    }
}

fn cmd_bench(a: BenchArgs) -> Result<String, Failure> {
    use bench::sources::{Contender, EngineSettings};
    let size = ahead::units::parse_size(a.size.as_deref().unwrap_or("2g"))
        .map_err(|e| usage(format!("--size: {e}")))?
        .0;
    if !(64 << 20..=1 << 40).contains(&size) {
        return Err(usage("--size must be between 64m and 1t"));
    }
    let budget = match &a.budget {
        Some(b) => {
            ahead::units::parse_size(b)
                .map_err(|e| usage(format!("--budget: {e}")))?
                .0
        }
        None => bench::quarter_of_ram(),
    };
    let patterns: Vec<String> = match &a.patterns {
        Some(list) => {
            let v: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
            if let Some(bad) = v.iter().find(|p| !bench::PATTERNS.contains(&p.as_str())) {
                return Err(usage(format!(
                    "unknown pattern '{bad}'; known: {}",
                    bench::PATTERNS.join(", ")
                )));
            }
            v
        }
        None => bench::PATTERNS.iter().map(|s| s.to_string()).collect(),
    };
    let contenders = match &a.contenders {
        Some(list) => list
            .split(',')
            .map(|s| Contender::parse(s.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(usage)?,
        None => bench::DEFAULT_CONTENDERS
            .iter()
            .map(|s| Contender::parse(s).expect("default contenders parse"))
            .collect(),
    };
    let repeat = a.repeat.unwrap_or(if a.quick { 1 } else { 5 });
    if repeat == 0 || repeat > 100 {
        return Err(usage("--repeat must be between 1 and 100"));
    }
    let cap = a.cap_s.unwrap_or(if a.quick { 1.0 } else { 3.0 });
    if !(cap > 0.0 && cap <= 3600.0) {
        return Err(usage("--cap-s must be above 0 and at most 3600"));
    }
    // A file the user names is read, never written: check it before anything else.
    let size = match &a.file {
        Some(f) => user_file_size(f, size, a.size.is_some())?,
        None => size,
    };
    let dir = a
        .dir
        .clone()
        .or_else(|| {
            a.file
                .as_ref()
                .and_then(|f| f.parent().map(|p| p.to_path_buf()))
        })
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    if !dir.is_dir() {
        return Err(runtime(format!("{}: not a directory", dir.display())));
    }
    if on_tmpfs(&dir) {
        return Err(runtime(format!(
            "{} is on tmpfs (memory): the benchmark needs a file on a disk; pass --dir or --file there",
            dir.display()
        )));
    }
    let (file, size) = match &a.file {
        Some(f) => (f.clone(), size),
        None => {
            let f = dir.join("ahead-bench.dat");
            let size = ensure_file(&f, size)?;
            (f, size)
        }
    };
    let plan = bench::Plan {
        file,
        dir,
        size,
        patterns,
        contenders,
        repeat,
        cap: std::time::Duration::from_secs_f64(cap),
        engine: EngineSettings {
            budget,
            ra_max_kb: None,
            io_max_kb: None,
        },
        quick: a.quick,
    };
    let outcome = bench::run(&plan).map_err(runtime)?;
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&bench::json(&outcome)).expect("serializable");
        std::fs::write(path, text + "\n")
            .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
    }
    if let Some(path) = &a.plot {
        bench::plot(&outcome, path).map_err(|e| runtime(format!("{}: {e}", path.display())))?;
        if let Some((label, log)) = &outcome.windows {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
            let w = path.with_file_name(format!("{stem}-windows.svg"));
            bench::plot_windows(label, log, &w)
                .map_err(|e| runtime(format!("{}: {e}", w.display())))?;
        }
    }
    Ok(bench::table(&outcome))
}

/// The folder `output` goes in must exist (strace would only say it cannot open the file).
fn check_output_dir(output: &std::path::Path) -> Result<(), Failure> {
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !parent.is_dir() {
        return Err(runtime(format!(
            "{}: no such folder for the output: create it, or give -o a path in an existing one",
            parent.display()
        )));
    }
    Ok(())
}

/// Whether `cmd` names a program: a path to an executable file, or a name found on PATH.
fn command_exists(cmd: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        return runnable(std::path::Path::new(cmd));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| runnable(&d.join(cmd))))
}

/// Whether `dir` is on tmpfs or ramfs (memory, not a disk).
fn on_tmpfs(dir: &std::path::Path) -> bool {
    ahead::os::fs_type(dir)
        .is_ok_and(|t| t == ahead::os::TMPFS_MAGIC || t == ahead::os::RAMFS_MAGIC)
}

/// The bytes to benchmark of a file the user named: all of it up to `size` (an explicit
/// `--size` larger than the file is an error; the default just shrinks to the file).
fn user_file_size(path: &std::path::Path, size: u64, explicit: bool) -> Result<u64, Failure> {
    let m = std::fs::metadata(path).map_err(|e| {
        runtime(format!(
            "{}: {e} (give an existing file, or --dir DIR to let ahead make one there)",
            path.display()
        ))
    })?;
    if !m.is_file() {
        return Err(runtime(format!(
            "{}: not a regular file (the benchmark reads a file on a disk)",
            path.display()
        )));
    }
    let len = m.len();
    if len == 0 {
        return Err(runtime(format!(
            "{} is empty: give a file of at least 64 MiB, or --dir DIR to let ahead make one",
            path.display()
        )));
    }
    if len < 64 << 20 {
        return Err(runtime(format!(
            "{} is {len} bytes: the benchmark needs at least 64 MiB; give a bigger file or --dir DIR",
            path.display()
        )));
    }
    if explicit && size > len {
        return Err(usage(format!(
            "--size {size} is more than {} holds ({len} bytes); ahead never writes a file you name",
            path.display()
        )));
    }
    Ok(size.min(len))
}

/// Make sure `path` exists with at least `size` bytes (random, so nothing compresses or dedups
/// them); returns the size to use (the file's, if it is larger).
fn ensure_file(path: &std::path::Path, size: u64) -> Result<u64, Failure> {
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() {
            return Err(runtime(format!("{}: not a regular file", path.display())));
        }
        if m.len() >= size {
            return Ok(size);
        }
    }
    eprintln!(
        "creating {} ({} MiB of random bytes)",
        path.display(),
        size >> 20
    );
    bench::write_random_file(path, size, 0)
        .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
    Ok(size)
}
