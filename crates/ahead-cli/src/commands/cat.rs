//! `ahead cat`: files read through the engine to stdout, like cat.

use crate::*;

pub(crate) fn cmd_cat(a: CatArgs) -> Result<String, Failure> {
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
    // No size to read ahead in (a device, a FIFO, a procfs or sysfs file): read plainly to
    // its end, as cat does. The others are handed to the engine as a list, which opens them
    // ahead of the one being written (over a network, each open is a round trip).
    let plain: Vec<bool> = a
        .paths
        .iter()
        .map(|p| matches!(ahead::engine::sizeless(p), Ok(Some(_))))
        .collect();
    let mut opened = engine.open_many(
        a.paths
            .iter()
            .zip(&plain)
            .filter(|(_, &plain)| !plain)
            .map(|(p, _)| p.clone()),
    );
    'files: for (path, plain) in a.paths.iter().zip(plain) {
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
