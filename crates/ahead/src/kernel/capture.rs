//! Recording the live kernel's readahead: a private tracefs instance with the four readahead
//! events on, a program (or one of the simulator's patterns, run for real with buffered reads)
//! reading files meanwhile, and the result written as a [`super::TraceDir`].
//!
//! Needs Linux 6.16+ (the readahead tracepoints), tracefs (mounted here if it is not) and root.
//! Each failure says which of these is missing.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{
    folio_order_from_events, parse_event, RaEvent, TraceMeta, TracedFile, KERNEL_EVENTS, META,
    READS_CSV, READS_STRACE,
};
use crate::pattern::Pattern;
use crate::policy::Hint;
use crate::units::PAGE_SIZE;
use crate::workload::Event;

const EVENTS: [&str; 4] = [
    "page_cache_sync_ra",
    "page_cache_async_ra",
    "page_cache_ra_order",
    "page_cache_ra_unbounded",
];

/// Largest folio order assumed when the events do not show one (x86-64's PMD order).
pub const DEFAULT_FOLIO_MAX_ORDER: u8 = 9;

/// Where tracefs is, mounting it at /sys/kernel/tracing if it is not mounted anywhere.
pub fn tracefs_root() -> Result<PathBuf, String> {
    for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(root).join("events").is_dir() {
            return Ok(root.into());
        }
    }
    let rc = crate::os::mount_tracefs(Path::new("/sys/kernel/tracing"));
    if rc.is_ok() && Path::new("/sys/kernel/tracing/events").is_dir() {
        return Ok("/sys/kernel/tracing".into());
    }
    let why = std::io::Error::last_os_error();
    Err(format!(
        "tracefs is not mounted and cannot be mounted ({why}): run as root, or mount it with \
         `mount -t tracefs nodev /sys/kernel/tracing`"
    ))
}

/// Whether this machine can record the kernel's readahead: tracefs mounted (or mountable), the
/// readahead tracepoints present, and the right to create a tracefs instance. The error says
/// which is missing.
pub fn available() -> Result<(), String> {
    Recorder::start(None)?.finish().map(|_| ())
}

/// A private tracefs instance recording the readahead events, drained by a background thread.
pub struct Recorder {
    instance: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<std::io::Result<Vec<u8>>>>,
}

static INSTANCE_SEQ: AtomicU32 = AtomicU32::new(0);

fn write_to(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write '{text}' to {}: {e}", path.display()))
}

impl Recorder {
    /// Start recording. `inode`: only events for this inode (tracefs filter), or all.
    pub fn start(inode: Option<u64>) -> Result<Recorder, String> {
        if !crate::os::is_root() {
            return Err(
                "recording the kernel's readahead (tracefs) needs root: run it again with sudo"
                    .into(),
            );
        }
        let root = tracefs_root()?;
        if !root.join("events/readahead/page_cache_ra_order").is_dir() {
            return Err(format!(
                "this kernel ({}) has no readahead tracepoints ({}/events/readahead): they \
                 arrived in Linux 6.16",
                kernel_release(),
                root.display()
            ));
        }
        let name = format!(
            "ahead-{}-{}",
            std::process::id(),
            INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let instance = root.join("instances").join(name);
        std::fs::create_dir(&instance).map_err(|e| {
            format!(
                "cannot create the tracefs instance {} ({e}): recording kernel events needs root",
                instance.display()
            )
        })?;
        let mut rec = Recorder {
            instance,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
        };
        write_to(&rec.instance.join("buffer_size_kb"), "16384")?;
        for e in EVENTS {
            let dir = rec.instance.join("events/readahead").join(e);
            if let Some(ino) = inode {
                write_to(&dir.join("filter"), &format!("i_ino == {ino}"))?;
            }
            write_to(&dir.join("enable"), "1")?;
        }
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(rec.instance.join("trace_pipe"))
            .map_err(|e| format!("cannot open trace_pipe: {e}"))?;
        let stop = rec.stop.clone();
        rec.reader = Some(std::thread::spawn(move || drain(pipe, &stop)));
        write_to(&rec.instance.join("tracing_on"), "1")?;
        Ok(rec)
    }

    /// Stop recording and return the events, in order, each with the line tracefs printed.
    pub fn finish(mut self) -> Result<Vec<(RaEvent, String)>, String> {
        let _ = write_to(&self.instance.join("tracing_on"), "0");
        self.stop.store(true, Ordering::SeqCst);
        let bytes = self
            .reader
            .take()
            .expect("started")
            .join()
            .map_err(|_| "the trace reader thread panicked".to_string())?
            .map_err(|e| format!("cannot read trace_pipe: {e}"))?;
        let overrun = std::fs::read_to_string(self.instance.join("per_cpu/cpu0/stats"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("overrun: ").map(|v| v.trim().to_string()))
            });
        if overrun.as_deref().is_some_and(|v| v != "0") {
            return Err("the kernel dropped readahead events (trace buffer overrun)".into());
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut events = Vec::new();
        for line in text.lines() {
            if line.contains("LOST") && line.contains("EVENTS") {
                return Err(format!("the kernel dropped readahead events: {line}"));
            }
            if let Some(ev) = parse_event(line) {
                let ev = ev.map_err(|e| format!("unreadable kernel event '{line}': {e}"))?;
                events.push((ev, line.to_string()));
            }
        }
        Ok(events)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        for e in EVENTS {
            let _ = std::fs::write(
                self.instance
                    .join("events/readahead")
                    .join(e)
                    .join("enable"),
                "0",
            );
        }
        let _ = std::fs::remove_dir(&self.instance);
    }
}

fn drain(mut pipe: File, stop: &AtomicBool) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        // Empty: done if asked to stop (tracing is off by then, so nothing more comes).
        if stop.load(Ordering::SeqCst) {
            return Ok(out);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Describe a traced file for `meta.json`.
pub fn traced_file(path: &Path) -> Result<TracedFile, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (ra_max_kb, io_max_kb) = crate::os::device_limits(path);
    Ok(TracedFile {
        path: path.display().to_string(),
        dev: format!("{}:{}", libc::major(meta.dev()), libc::minor(meta.dev())),
        ino: meta.ino(),
        size: meta.len(),
        ra_max_kb,
        io_max_kb,
        cold: false,
    })
}

/// Write back and drop `path`'s cached pages (`fdatasync`, `POSIX_FADV_DONTNEED`), so the next
/// read starts cold, and check with `mincore` that none is left.
pub fn drop_cached_pages(path: &Path) -> Result<(), String> {
    let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    f.sync_data()
        .map_err(|e| format!("cannot write back {}: {e}", path.display()))?;
    for _ in 0..3 {
        fadvise(&f, 0, 0, libc::POSIX_FADV_DONTNEED)
            .map_err(|e| format!("cannot drop the cached pages of {}: {e}", path.display()))?;
        if resident_pages(&f)? == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{} still has {} pages cached after POSIX_FADV_DONTNEED (mapped or in use by another \
         process?): the kernel would not start cold",
        path.display(),
        resident_pages(&f)?
    ))
}

/// Pages of `f` in the page cache (`mincore` over a mapping of the whole file).
pub fn resident_pages(f: &File) -> Result<u64, String> {
    crate::os::kernel_cached_pages(f).map_err(|e| format!("mincore: {e}"))
}

fn fadvise(f: &File, offset: u64, len: u64, advice: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    crate::os::fadvise(f.as_fd(), offset, len, advice)
}

/// Make `path` a file of at least `size` bytes: create it (filled with pseudo-random bytes) if it
/// does not exist; refuse a shorter existing file rather than change it.
pub fn ensure_file(path: &Path, size: u64) -> Result<bool, String> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(format!("{} is not a regular file", path.display())),
        Ok(m) if m.len() < size => Err(format!(
            "{} is {} bytes but the pattern reads {size}: give a larger file, a new path \
             (it will be created), or a smaller size= in the pattern",
            path.display(),
            m.len()
        )),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let mut rng = crate::pattern::SplitMix64(size);
            let mut chunk = vec![0u8; 1 << 20];
            let mut left = size;
            while left > 0 {
                for w in chunk.chunks_mut(8) {
                    let v = rng.next_u64().to_le_bytes();
                    w.copy_from_slice(&v[..w.len()]);
                }
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                left -= n as u64;
            }
            f.sync_all()
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(true)
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// What a recording produced.
pub struct Recording {
    /// The directory written.
    pub dir: PathBuf,
    /// Reads made.
    pub reads: usize,
    /// Kernel events kept (those of the traced files).
    pub events: usize,
}

/// Run `pattern` for real against `path` with buffered reads (`pread`), its cached pages dropped
/// first, while recording the kernel's readahead; write the trace directory `out`.
/// Single-file patterns only. Creates `path` if it does not exist.
pub fn record_pattern(spec: &str, path: &Path, out: &Path) -> Result<Recording, String> {
    let pattern = Pattern::parse(spec)?;
    let workload = pattern.workload();
    if workload.files.len() != 1 {
        return Err(format!(
            "pattern '{spec}' reads {} files; a real run takes single-file patterns",
            workload.files.len()
        ));
    }
    let size = workload.files[0].size.0;
    ensure_file(path, size)?;
    let path = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut file = traced_file(&path)?;
    drop_cached_pages(&path)?;
    file.cold = true;

    let recorder = Recorder::start(Some(file.ino))?;
    let mut csv = String::from("file,offset,len,size\n");
    let mut handles: Vec<Option<File>> = Vec::new();
    let mut buf = Vec::new();
    let mut reads = 0;
    let name = path.display().to_string();
    let run = || -> Result<(), String> {
        for ev in workload.events {
            match ev {
                Event::Open { handle, .. } => {
                    let f = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    let h = handle as usize;
                    if handles.len() <= h {
                        handles.resize_with(h + 1, || None);
                    }
                    handles[h] = Some(f);
                }
                Event::Read {
                    handle,
                    offset,
                    len,
                } => {
                    let f = handles
                        .get(handle as usize)
                        .and_then(|f| f.as_ref())
                        .ok_or_else(|| format!("pattern read on unopened handle {handle}"))?;
                    buf.resize(len.0 as usize, 0);
                    // One pread, as the pattern asks: a short read is what the kernel gave.
                    let n = f
                        .read_at(&mut buf, offset.0)
                        .map_err(|e| format!("read of {} at {}: {e}", path.display(), offset.0))?;
                    if n > 0 {
                        csv.push_str(&format!("{name},{},{n},{size}\n", offset.0));
                        reads += 1;
                    }
                }
                Event::Hint { handle, hint } => {
                    if let Some(Some(f)) = handles.get(handle as usize) {
                        let p = PAGE_SIZE;
                        let r = match hint {
                            Hint::Normal => fadvise(f, 0, 0, libc::POSIX_FADV_NORMAL),
                            Hint::Sequential => fadvise(f, 0, 0, libc::POSIX_FADV_SEQUENTIAL),
                            Hint::Random => fadvise(f, 0, 0, libc::POSIX_FADV_RANDOM),
                            Hint::WillNeed { start_page, pages } => {
                                fadvise(f, start_page * p, pages * p, libc::POSIX_FADV_WILLNEED)
                            }
                            Hint::DontNeed { start_page, pages } => {
                                fadvise(f, start_page * p, pages * p, libc::POSIX_FADV_DONTNEED)
                            }
                            Hint::Limit { .. } => Ok(()),
                        };
                        r.map_err(|e| format!("fadvise: {e}"))?;
                    }
                }
                Event::Close { handle } => {
                    if let Some(slot) = handles.get_mut(handle as usize) {
                        *slot = None;
                    }
                }
                // Patterns run for real take their own time.
                Event::Compute { .. } => {}
            }
        }
        Ok(())
    };
    let ran = run();
    let events = recorder.finish()?;
    ran?;
    // On a stacked filesystem (overlayfs) stat names the upper device while the kernel's events
    // name the one holding the pages: the inode filter already picked the file, so take the
    // device the events agree on.
    if let Some((first, _)) = events.first() {
        if events.iter().all(|(e, _)| e.dev == first.dev) {
            file.dev = format!("{}:{}", first.dev.0, first.dev.1);
        }
    }
    let folio_max_order = folio_order_from_events(&just_events(&events), DEFAULT_FOLIO_MAX_ORDER);
    let meta = TraceMeta {
        kernel: kernel_release(),
        source: format!("pattern {spec}"),
        files: vec![file],
        folio_max_order,
    };
    write_dir(out, &meta, &events_text(&events), Some(&csv))?;
    Ok(Recording {
        dir: out.to_path_buf(),
        reads,
        events: events.len(),
    })
}

/// Run `command` under strace while recording the kernel's readahead, keep the events of the
/// files it read, and write the trace directory `out`. `drop`: files whose cached pages are
/// dropped first. Returns the recording and whether the command succeeded.
pub fn record_command(
    command: &[String],
    drop: &[PathBuf],
    out: &Path,
) -> Result<(Recording, std::process::ExitStatus), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut dropped = Vec::new();
    for p in drop {
        drop_cached_pages(p)?;
        let t = traced_file(p)?;
        dropped.push((t.dev, t.ino));
    }
    let strace_log = out.join(READS_STRACE);
    let recorder = Recorder::start(None)?;
    let status = crate::trace::run_strace(&strace_log, command);
    let events = recorder.finish()?;
    let status = status?;
    let reads = crate::trace::read_path(&strace_log)
        .map_err(|e| format!("{}: {e}", strace_log.display()))?;
    let mut files = Vec::new();
    for f in &reads.files {
        match traced_file(Path::new(&f.name)) {
            Ok(mut t) => {
                t.cold = dropped.contains(&(t.dev.clone(), t.ino));
                files.push(t)
            }
            Err(e) => eprintln!("note: no kernel events kept for {}: {e}", f.name),
        }
    }
    let keep: Vec<(RaEvent, String)> = events
        .into_iter()
        .filter(|(e, _)| {
            files
                .iter()
                .any(|f| f.ino == e.ino && super::parse_dev(&f.dev) == Some(e.dev))
        })
        .collect();
    let meta = TraceMeta {
        kernel: kernel_release(),
        source: command.join(" "),
        files,
        folio_max_order: folio_order_from_events(&just_events(&keep), DEFAULT_FOLIO_MAX_ORDER),
    };
    write_dir(out, &meta, &events_text(&keep), None)?;
    Ok((
        Recording {
            dir: out.to_path_buf(),
            reads: reads.reads(),
            events: keep.len(),
        },
        status,
    ))
}

/// `kernel.txt`: the events' lines as tracefs printed them.
fn events_text(events: &[(RaEvent, String)]) -> String {
    let mut s =
        String::from("# readahead tracepoints of the traced files, as tracefs printed them\n");
    for (_, line) in events {
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn just_events(events: &[(RaEvent, String)]) -> Vec<RaEvent> {
    events.iter().map(|(e, _)| *e).collect()
}

fn write_dir(out: &Path, meta: &TraceMeta, events: &str, csv: Option<&str>) -> Result<(), String> {
    let w = |name: &str, text: &str| {
        std::fs::write(out.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", out.join(name).display()))
    };
    w(
        META,
        &(serde_json::to_string_pretty(meta).expect("meta serializes") + "\n"),
    )?;
    w(KERNEL_EVENTS, events)?;
    if let Some(csv) = csv {
        w(READS_CSV, csv)?;
        let _ = std::fs::remove_file(out.join(READS_STRACE));
    }
    Ok(())
}
