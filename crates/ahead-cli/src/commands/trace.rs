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
