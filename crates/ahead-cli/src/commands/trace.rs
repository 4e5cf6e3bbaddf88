//! `ahead trace`: record a program's reads with strace, or the live kernel's readahead windows.

use crate::*;

pub(crate) fn cmd_trace(a: TraceArgs) -> Result<String, Failure> {
    if a.kernel {
        return cmd_trace_kernel(a);
    }
    if !a.drop.is_empty() {
        return Err(usage("--drop goes with --kernel"));
    }
    check_output_dir(&a.output)?;
    check_output_file(&a.output)?;
    let Some(cmd) = a.command.first() else {
        return Err(usage(
            "give a program to trace, as in `ahead trace -o t.log -- cat FILE`",
        ));
    };
    if !command_exists(cmd) {
        return Err(runtime(format!(
            "{cmd}: command not found: give a program to trace, as in `ahead trace -o t.log -- cat FILE`"
        )));
    }
    // strace writes to a log of its own; the output gets it after the working directory the
    // program started in (relative paths in the log are resolved against it), so what strace
    // cannot write never passes for the trace.
    let scratch = std::env::temp_dir().join(format!(
        "ahead-trace-{}-{}.log",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let status = ahead::trace::run_strace(&scratch, &a.command);
    let log = std::fs::read(&scratch);
    let _ = std::fs::remove_file(&scratch);
    let status = status.map_err(runtime)?;
    let log = log.map_err(|e| {
        runtime(format!(
            "strace wrote no log ({e}); its messages, if any, are above"
        ))
    })?;
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let mut text = format!("# cwd: {cwd}\n").into_bytes();
    if a.time && status.success() {
        let ns = program_time(&a.command)?;
        eprintln!(
            "{cmd} took {:.1} ms again, untraced, on its files as cached",
            ns as f64 / 1e6
        );
        text.extend_from_slice(format!("# program_ns: {ns}\n").as_bytes());
    }
    text.extend_from_slice(&log);
    std::fs::write(&a.output, &text)
        .map_err(|e| runtime(format!("cannot write {}: {e}", a.output.display())))?;
    let lines = log.iter().filter(|&&c| c == b'\n').count();
    eprintln!(
        "wrote {} ({lines} lines of strace); replay it with: ahead replay {}",
        a.output.display(),
        a.output.display()
    );
    match status.code() {
        Some(0) => {
            eprintln!("{cmd} exited with status 0");
            Ok(String::new())
        }
        Some(code) => Err(runtime(format!(
            "the traced command ({cmd}) exited with status {code}"
        ))),
        None => Err(runtime(format!(
            "the traced command ({cmd}) ended by a signal ({status})"
        ))),
    }
}

/// The command's wall time, run once more without the tracer, its output discarded.
fn program_time(command: &[String]) -> Result<u64, Failure> {
    let start = std::time::Instant::now();
    let status = std::process::Command::new(&command[0])
        .args(&command[1..])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| runtime(format!("cannot run {} again: {e}", command[0])))?;
    let ns = start.elapsed().as_nanos() as u64;
    if !status.success() {
        return Err(runtime(format!(
            "{} failed when run again untraced ({status}): no program time kept",
            command[0]
        )));
    }
    Ok(ns)
}

/// The output must be a file ahead can write: not a directory, not a file of procfs, sysfs or
/// a device (strace would report every write failing, and the trace would be lost).
pub(crate) fn check_output_file(output: &std::path::Path) -> Result<(), Failure> {
    if let Ok(meta) = std::fs::metadata(output) {
        if meta.is_dir() {
            return Err(usage(format!(
                "{} is a directory: -o takes the log file's path",
                output.display()
            )));
        }
        let pseudo = ahead::engine::sizeless(output).ok().flatten().is_some();
        if !meta.is_file() || pseudo {
            return Err(usage(format!(
                "{} is not a regular file to write a log to",
                output.display()
            )));
        }
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(output)
        .map(drop)
        .map_err(|e| runtime(format!("cannot write {}: {e}", output.display())))
}

pub(crate) fn cmd_trace_kernel(a: TraceArgs) -> Result<String, Failure> {
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

/// The folder `output` goes in must exist (strace would only say it cannot open the file).
pub(crate) fn check_output_dir(output: &std::path::Path) -> Result<(), Failure> {
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
pub(crate) fn command_exists(cmd: &str) -> bool {
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
