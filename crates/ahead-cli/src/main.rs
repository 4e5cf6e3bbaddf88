//! `ahead`: the command-line tool. A thin layer over the `ahead` library: it parses arguments,
//! runs the simulator and prints tables or JSON. Usage errors exit with 2, runtime errors with 1,
//! each with one line that says what to do.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use ahead::paper;
use ahead::pattern::Pattern;
use ahead::policy::{PolicyConfig, POLICIES};
use ahead::report;
use ahead::sim::{self, DeviceModel, RunReport, SimConfig};
use ahead::units::PAGE_SIZE;
use clap::{Args, Parser, Subcommand};
use serde_json::json;

const AFTER_HELP: &str = "\
Policies: none, fixed, linux-2.6.0, linux-2.6.7, pratt, linux-ondemand (or 'all').
Patterns: paper:read=R,seek=S,repeat=N  seq  reverse  stride  random  interleaved  shuffled
          manyfiles  iozone:{read,reread,reverse,stride,random,mix,pread}
          each with optional :size=64m,bs=4k,... (see the pattern module docs).
Devices:  nvme (this machine), hdd, remote (an object store).";

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
    #[command(after_help = AFTER_HELP)]
    Sim(SimArgs),
    /// Simulate policies on a recorded trace (strace log or CSV). Never opens the traced files.
    #[command(after_help = AFTER_HELP)]
    Replay(ReplayArgs),
    /// Run a command under strace and write the log `replay` reads.
    Trace(TraceArgs),
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// Policy to run, or 'all'.
    #[arg(long, default_value = "all")]
    policy: String,
    /// Page cache size in MiB.
    #[arg(long, default_value_t = 256)]
    cache_mb: u64,
    /// Device model: nvme, hdd or remote.
    #[arg(long, default_value = "nvme")]
    device: String,
    /// Maximum readahead window in KiB (the device's read_ahead_kb).
    #[arg(long, default_value_t = 128)]
    ra_max_kb: u64,
    /// Largest single I/O in KiB (the device's max_sectors_kb); defaults to the window.
    #[arg(long)]
    io_max_kb: Option<u64>,
    /// Window of the `fixed` policy in KiB.
    #[arg(long, default_value_t = 128)]
    fixed_kb: u64,
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
    /// The trace: an strace log (from `ahead trace`) or a CSV with file,offset,len.
    file: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Args)]
struct TraceArgs {
    /// Where to write the strace log.
    #[arg(short, long)]
    output: PathBuf,
    /// The command to run, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
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
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Sim(a) => cmd_sim(a),
        Command::Replay(a) => cmd_replay(a),
        Command::Trace(a) => cmd_trace(a),
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

impl ModelArgs {
    fn config(&self) -> Result<SimConfig, Failure> {
        let device = DeviceModel::preset(&self.device).map_err(usage)?;
        let kb_pages = |kb: u64| kb * 1024 / PAGE_SIZE;
        if self.cache_mb == 0 {
            return Err(usage("--cache-mb must be at least 1"));
        }
        if !(self.compute_us >= 0.0 && self.compute_us.is_finite()) {
            return Err(usage(
                "--compute-us must be a number of microseconds, 0 or more",
            ));
        }
        let ra = kb_pages(self.ra_max_kb);
        Ok(SimConfig {
            cache_pages: (self.cache_mb << 20) as usize / PAGE_SIZE as usize,
            device,
            compute_ns_per_page: (self.compute_us * 1000.0) as u64,
            policy: PolicyConfig {
                ra_max_pages: ra,
                io_max_pages: self.io_max_kb.map(kb_pages).unwrap_or(ra),
                fixed_pages: kb_pages(self.fixed_kb),
            },
            ..SimConfig::default()
        })
    }

    fn policies(&self) -> Result<Vec<&'static str>, Failure> {
        if self.policy == "all" {
            return Ok(POLICIES.iter().map(|(n, _)| *n).collect());
        }
        self.policy
            .split(',')
            .map(|name| {
                POLICIES
                    .iter()
                    .map(|(n, _)| *n)
                    .find(|n| *n == name.trim())
                    .ok_or_else(|| {
                        usage(format!(
                            "unknown policy '{name}'; known policies: {}, or all",
                            POLICIES
                                .iter()
                                .map(|(n, _)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
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
            "pattern {spec}, device {}, cache {} MiB, max window {} KiB",
            config.device, a.model.cache_mb, a.model.ra_max_kb
        )
        .ok();
        out.push_str(&totals_table(&runs));
    }
    Ok(out)
}

fn cmd_replay(a: ReplayArgs) -> Result<String, Failure> {
    let mut out = String::new();
    let config = a.model.config()?;
    let policies = a.model.policies()?;
    let trace = ahead::trace::read_path(&a.file)
        .map_err(|e| runtime(format!("{}: {e}", a.file.display())))?;
    let sizes: Vec<u64> = trace.files.iter().map(|f| f.size.0).collect();
    let runs = policies
        .iter()
        .map(|p| sim::run(p, config, trace.clone().into_workload()))
        .collect::<Result<Vec<RunReport>, String>>()
        .map_err(runtime)?;
    if a.model.json {
        out.push_str(&json_text(&json!({
            "trace": a.file.display().to_string(),
            "results": report::results_json(&runs),
            "files": report::files_json(&runs, &sizes),
        })));
        return Ok(out);
    }
    writeln!(
        out,
        "trace {}: {} reads over {} files; device {}, cache {} MiB, max window {} KiB",
        a.file.display(),
        trace.reads(),
        trace.files.len(),
        config.device,
        a.model.cache_mb,
        a.model.ra_max_kb
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
    let status = std::process::Command::new("strace")
        .args([
            "-f",
            "-y",
            "-e",
            "trace=openat,read,pread64,preadv,lseek,close",
            "-o",
        ])
        .arg(&a.output)
        .arg("--")
        .args(&a.command)
        .status()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => runtime(
                "strace is not installed: install it (apt-get install strace) and try again",
            ),
            _ => runtime(format!("cannot run strace: {e}")),
        })?;
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
