//! `ahead cat`: files read through the engine to stdout, like cat.

use crate::*;

pub(crate) fn cmd_cat(a: CatArgs) -> Result<String, Failure> {
    use ahead::engine::Engine;
    use std::io::{BufWriter, ErrorKind};
    let bs = ahead::units::parse_size(&a.bs)
        .map_err(|e| usage(format!("--bs: {e}")))?
        .0;
    if bs == 0 || bs > 1 << 30 {
        return Err(usage("--bs must be between 1 byte and 1g"));
    }
    // Every flag is a setting by name (the library's one table), as `-o KEY=VALUE` is: a size
    // or a name means here what it means to the builder, to Python and to a mount.
    let mut settings = engine_settings(&a.budget, &a.policy, &a.engine, a.budget_over_memory);
    if a.no_lease {
        settings.push(("leases", "false".into(), "--no-lease".into()));
    }
    if let Some(b) = size_flag("ra-max", &a.ra_max, a.ra_max_kb, 1 << 10)? {
        settings.push(("window_max", b.to_string(), "--ra-max".into()));
    }
    if let Some(b) = size_flag("io-max", &a.io_max, a.io_max_kb, 1 << 10)? {
        settings.push(("request_max", b.to_string(), "--io-max".into()));
    }
    // cat reads each file once: a large one goes through a ring, not into the budget.
    let builder = with_settings(Engine::builder().drop_behind(true), settings, &a.option)?;
    if crate::stdout_was_closed() {
        return Err(runtime(
            "cannot write to stdout: it is closed (Bad file descriptor)",
        ));
    }
    let engine = start_engine(builder)?;
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    // Asked of the allocator, not assumed: under a memory limit (ulimit -v) a large --bs is
    // an error, not an abort.
    let mut buf = Vec::new();
    buf.try_reserve_exact(bs as usize).map_err(|_| {
        runtime(format!(
            "cannot allocate a read buffer of {} (--bs): not enough memory for this process (ulimit -v?)",
            a.bs
        ))
    })?;
    buf.resize(bs as usize, 0);
    // Like cat: a file that fails is reported, and the others are still written.
    let mut errors: Vec<String> = Vec::new();
    // With --stats: each file's window and request caps, as its policy was given them, and
    // what its device was measured at once it was read.
    let mut file_stats: Vec<String> = Vec::new();
    // No size to read ahead in (a device, a FIFO, a procfs or sysfs file): read plainly to
    // its end, as cat does. The others are handed to the engine as a list, which opens them
    // ahead of the one being written (over a network, each open is a round trip).
    let plain: Vec<bool> = a
        .paths
        .iter()
        .map(|p| p == STDIN || matches!(ahead::engine::sizeless(p), Ok(Some(_))))
        .collect();
    let mut opened = engine.open_many(
        a.paths
            .iter()
            .zip(&plain)
            .filter(|(_, &plain)| !plain)
            .map(|(p, _)| p.clone()),
    );
    'files: for (path, plain) in a.paths.iter().zip(plain) {
        if path == STDIN {
            match copy_stdin(&engine, &mut buf, &mut out) {
                Ok(()) => {}
                Err(CopyError::Write(e)) if e.kind() == ErrorKind::BrokenPipe => break 'files,
                Err(CopyError::Write(e)) => {
                    return Err(runtime(format!("cannot write to stdout: {e}")))
                }
                Err(CopyError::Read(e)) => errors.push(format!("-: {e}")),
            }
            continue;
        }
        if plain {
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
        let file = match opened.next().unwrap_or_else(|| engine.open(path)) {
            Ok(f) => f,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        if let Some(why) = file.unpinned() {
            eprintln!("warning: {why}");
        }
        if a.stats {
            file_stats.push(format!(
                "{}: window_max {} bytes, request_max {} bytes",
                file.path().display(),
                file.window_max_bytes(),
                file.request_max_bytes()
            ));
        }
        let mut offset = 0u64;
        loop {
            let n = match file.read_at(&mut buf, offset) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    errors.push(format!(
                        "{}: read at byte {offset}: {e}",
                        file.path().display()
                    ));
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
        if a.stats {
            // What its policy was told of the device at the end: the lead it kept is latency
            // x bandwidth.
            let d = file.device_estimate();
            file_stats.push(format!(
                "{}: device measured at {:.2} ms to a first byte, {:.1} MB/s, {:.1} us a request",
                file.path().display(),
                d.latency_ns as f64 / 1e6,
                d.bytes_per_sec as f64 / 1e6,
                d.request_overhead_ns as f64 / 1e3
            ));
            // An object's link: whether the GETs the link wants were in flight at once.
            if let Some(l) = file.link_stats() {
                file_stats.push(format!(
                    "{}: link: {} GETs so far, {:.1} at once on average while any was in flight, {} at most; a connection waits {:.1} ms for a first byte and streams {:.1} MB/s",
                    file.path().display(),
                    l.gets,
                    l.mean_at_once,
                    l.most_at_once,
                    l.first_byte_ms,
                    l.connection_mb_per_s
                ));
            }
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
        for line in &file_stats {
            eprintln!("{line}");
        }
        if let Some(kib) = ahead::os::peak_rss_kib() {
            eprintln!("process: peak resident {kib} KiB (VmHWM)");
        }
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

/// The name that means the standard input, as for cat.
const STDIN: &str = "-";

/// The standard input to `out`, from where it stands: through the engine when it is a regular
/// file (`ahead cat - < big.file`), plainly otherwise (a pipe, a terminal).
fn copy_stdin(
    engine: &ahead::Engine,
    buf: &mut [u8],
    out: &mut impl std::io::Write,
) -> Result<(), CopyError> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let meta = std::fs::File::from(
        stdin
            .as_fd()
            .try_clone_to_owned()
            .map_err(CopyError::Read)?,
    )
    .metadata()
    .map_err(CopyError::Read)?;
    if meta.is_file() {
        let fd = stdin
            .as_fd()
            .try_clone_to_owned()
            .map_err(CopyError::Read)?;
        // SAFETY: lseek on a descriptor this process owns; it only reads the position.
        let start = unsafe { libc::lseek(std::os::fd::AsRawFd::as_raw_fd(&fd), 0, libc::SEEK_CUR) };
        if let (Ok(file), true) = (
            engine.open_fd(fd, STDIN, ahead::engine::OpenOptions::new()),
            start >= 0,
        ) {
            let mut offset = start as u64;
            loop {
                let n = match file.read_at(buf, offset) {
                    Ok(0) => {
                        // Left where a plain read would leave it: at the end.
                        // SAFETY: lseek on the standard input, which this process has open.
                        unsafe {
                            libc::lseek(libc::STDIN_FILENO, offset as libc::off_t, libc::SEEK_SET)
                        };
                        return Ok(());
                    }
                    Ok(n) => n,
                    Err(e) => return Err(CopyError::Read(e)),
                };
                out.write_all(&buf[..n]).map_err(CopyError::Write)?;
                offset += n as u64;
            }
        }
    }
    let mut lock = stdin.lock();
    loop {
        let n = match std::io::Read::read(&mut lock, buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        out.write_all(&buf[..n]).map_err(CopyError::Write)?;
    }
}

pub(crate) enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copy `path` to `out` with plain reads until one returns 0, as cat does a file whose size
/// says nothing (procfs, sysfs, a device, a FIFO).
pub(crate) fn copy_plainly(
    path: &std::path::Path,
    out: &mut impl std::io::Write,
) -> Result<(), CopyError> {
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
