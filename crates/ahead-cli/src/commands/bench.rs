//! `ahead bench`: the suite run, its file checks and its report (the suite itself is in `crate::bench`).

use crate::*;

pub(crate) fn cmd_bench(a: BenchArgs) -> Result<String, Failure> {
    use bench::sources::{Contender, EngineSettings};
    if let Some(url) = &a.remote {
        return bench::remote::cmd(url, &a);
    }
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
            if let Some(bad) = v
                .iter()
                .find(|p| bench::pattern_names().all(|n| n != p.as_str()))
            {
                return Err(usage(format!(
                    "unknown pattern '{bad}'; known: {}",
                    bench::pattern_names().collect::<Vec<_>>().join(", ")
                )));
            }
            v
        }
        None => bench::pattern_names().map(str::to_string).collect(),
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
        predict_on: match a.device.as_deref() {
            Some(spec) => Some((
                DeviceModel::named(spec).map_err(usage)?,
                HostCost::of_profile(spec),
            )),
            None => None,
        },
    };
    let outcome = bench::run(&plan).map_err(runtime)?;
    // Every file the run leaves behind is named at the end; nothing else stays.
    let mut wrote: Vec<String> = Vec::new();
    if a.file.is_none() {
        wrote.push(format!(
            "{} (the file read, kept for the next run)",
            plan.file.display()
        ));
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&bench::json(&outcome)).expect("serializable");
        std::fs::write(path, text + "\n")
            .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
        wrote.push(path.display().to_string());
    }
    if let Some(path) = &a.plot {
        bench::plot(&outcome, path).map_err(|e| runtime(format!("{}: {e}", path.display())))?;
        wrote.push(path.display().to_string());
        if let Some((label, log)) = &outcome.windows {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("plot");
            let w = path.with_file_name(format!("{stem}-windows.svg"));
            bench::plot_windows(label, log, &w)
                .map_err(|e| runtime(format!("{}: {e}", w.display())))?;
            wrote.push(w.display().to_string());
        }
    }
    let mut out = bench::table(&outcome);
    if !wrote.is_empty() {
        out.push_str(&format!("  files: {}\n", wrote.join(", ")));
    }
    Ok(out)
}

/// Whether `dir` is on tmpfs or ramfs (memory, not a disk).
pub(crate) fn on_tmpfs(dir: &std::path::Path) -> bool {
    ahead::os::fs_type(dir)
        .is_ok_and(|t| t == ahead::os::TMPFS_MAGIC || t == ahead::os::RAMFS_MAGIC)
}

/// The bytes to benchmark of a file the user named: all of it up to `size` (an explicit
/// `--size` larger than the file is an error; the default just shrinks to the file).
pub(crate) fn user_file_size(
    path: &std::path::Path,
    size: u64,
    explicit: bool,
) -> Result<u64, Failure> {
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
pub(crate) fn ensure_file(path: &std::path::Path, size: u64) -> Result<u64, Failure> {
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
