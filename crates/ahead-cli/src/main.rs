//! `ahead`: the command-line tool, a thin layer over the `ahead` library. Its flags are in
//! `flags` (one struct per command), each command is one module of `commands` (`sim`,
//! `replay`, `trace`, `compare`, `cat`, `bench`), and `bench` holds the benchmark suite. This
//! file parses the command line, runs the command and prints what it returns. Usage errors
//! exit with 2, runtime errors with 1, each with one line that says what to do.

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
mod commands;
mod flags;
use serde_json::json;

use commands::*;
use flags::*;

#[derive(Parser)]
#[command(
    name = "ahead",
    version,
    about = "ahead, a userspace readahead engine: read local files and S3/HTTP objects through its \
             cache and readahead (cat), measure it against the kernel and the device (bench), and \
             model readahead policies on patterns and recorded programs (sim, replay, trace, compare)"
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
    /// Mount an S3 prefix or a local directory read-only with FUSE: every program's reads go
    /// through one engine, its readahead and one memory budget.
    #[cfg(feature = "mount")]
    Mount(MountArgs),
    /// Print the statistics of a directory `ahead mount` serves.
    Stats(StatsArgs),
    /// Measure a device (a local file system, or an object store) the way the engine reads
    /// it, and write the model the simulator takes (`--device profile.json`).
    Calibrate(CalibrateArgs),
}

/// Whether the standard output was closed when the process started (`ahead cat F >&-`). The
/// Rust runtime opens `/dev/null` on a closed standard descriptor before `main` runs, so the
/// look is taken earlier, from the ELF initializers (`.init_array`), which run before it.
static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

extern "C" fn look_at_stdout() {
    // SAFETY: F_GETFD asks whether descriptor 1 is open; it touches no memory.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        STDOUT_CLOSED_AT_START.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[used]
#[link_section = ".init_array"]
static LOOK_AT_STDOUT: extern "C" fn() = look_at_stdout;

/// Whether stdout was closed when `ahead` started (see [`STDOUT_CLOSED_AT_START`]).
fn stdout_was_closed() -> bool {
    STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed)
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
        .mut_subcommand("replay", |c| c.after_help(help.clone()))
        .mut_subcommand("cat", |c| c.mut_arg("engine", |a| a.help(engine_help())))
        .mut_subcommand("bench", |c| c.after_help(bench_help()));
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
        #[cfg(feature = "mount")]
        Command::Mount(a) => cmd_mount(a),
        Command::Stats(a) => cmd_stats(a),
        Command::Bench(a) => cmd_bench(a),
        Command::Calibrate(a) => cmd_calibrate(a),
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
