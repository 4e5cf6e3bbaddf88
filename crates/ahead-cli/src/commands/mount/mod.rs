//! `ahead mount SOURCE MOUNTPOINT`: an S3 prefix, a local directory, or the files of an HTTP
//! server a manifest names (it has no listing), read-only through FUSE,
//! every program's reads going through one engine (its readahead, one memory budget). The
//! tree and its reads are in `fs`; this module builds the engine, mounts, and stays until
//! unmounted.
//!
//! **Lifetime.** Foreground by default; `-d` forks before anything else starts (no thread
//! exists yet), the parent returning once the child has mounted (or with the child's error).
//! SIGINT, SIGTERM and SIGHUP unmount (lazily: readers in flight finish or fail, none hangs)
//! and the command ends with the engine's totals; `umount`/`fusermount3 -u` from outside end
//! it the same way. Where `fusermount3` is installed, the mount is made with `auto_unmount`,
//! so a crash (even SIGKILL) leaves no mount behind; where it cannot be, the command says so.
//!
//! **Threads.** [`SESSION_THREADS`] FUSE session threads, each with its own descriptor
//! (`clone_fd`). A session thread answers a read by waiting for it (a miss of a remote object
//! is a round trip), so the threads, not the CPUs, bound how many programs' reads wait at
//! once: with one per CPU, 16 programs' threads reading objects at random queued behind two
//! (docs/bench-log/issue-48-mount.md).

/// FUSE session threads by default (`--threads`), as many as mountpoint-s3's default.
const SESSION_THREADS: usize = 16;

mod fs;

use std::time::Duration;

use crate::*;
use fs::AheadFs;

pub(crate) fn cmd_mount(a: MountArgs) -> Result<String, Failure> {
    let stats_every = match &a.stats_every {
        Some(text) => Some(seconds(text).map_err(|e| usage(format!("--stats-every: {e}")))?),
        None => None,
    };
    let kernel_readahead = ahead::units::parse_size(&a.kernel_readahead)
        .map_err(|e| usage(format!("--kernel-readahead: {e}")))?
        .0;
    if kernel_readahead % ahead::PAGE_SIZE != 0 || kernel_readahead > 1 << 30 {
        return Err(usage(format!(
            "--kernel-readahead: {} is not a whole number of 4 KiB pages up to 1 GiB",
            a.kernel_readahead
        )));
    }
    if !a.mountpoint.is_dir() {
        return Err(usage(format!(
            "{}: the mountpoint must be an existing directory",
            a.mountpoint.display()
        )));
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        return Err(runtime(
            "/dev/fuse is missing: this kernel or container has no FUSE (modprobe fuse, or run the container with --device /dev/fuse)",
        ));
    }
    let mounted_signal = if a.background {
        // Before any thread exists: fork is safe only then.
        Some(background()?)
    } else {
        None
    };
    // Signals are taken by one thread (below); every thread made from here on has them blocked.
    let signals = blocked_signals();
    let engine = build_engine(&a)?;
    let http = a.source.starts_with("http://") || a.source.starts_with("https://");
    let manifest = match &a.manifest {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--manifest {}: {e}", path.display())))?;
            Some(
                fs::parse_manifest(&a.source, &text)
                    .map_err(|e| usage(format!("--manifest {}: {e}", path.display())))?,
            )
        }
        None if http => {
            return Err(usage(format!(
                "{}: an HTTP server gives no listing: name its files with --manifest FILE (one path under the URL a line)",
                a.source
            )))
        }
        None => None,
    };
    let root = if http {
        // Its names are the manifest's; the base URL itself need not answer.
        ahead::engine::Entry {
            name: format!("{}/", a.source.trim_end_matches('/')),
            size: 0,
            is_dir: true,
            e_tag: None,
            modified_ns: 0,
        }
    } else {
        engine
            .stat(&a.source)
            .map_err(|e| runtime(format!("cannot mount {}: {e}", a.source)))?
    };
    if !root.is_dir {
        return Err(usage(format!(
            "{}: a file or an object; mount a directory or a prefix (s3://bucket/prefix/)",
            a.source
        )));
    }
    let filesystem = AheadFs::new(engine.clone(), root, manifest);
    let counters = filesystem.counters.clone();
    let threads = a.threads.unwrap_or(SESSION_THREADS).max(1);
    // Named before mounting: once mounted, resolving the path would ask the session, which
    // does not run yet.
    let mountpoint_path = a
        .mountpoint
        .canonicalize()
        .map_err(|e| usage(format!("{}: {e}", a.mountpoint.display())))?;
    let (session, mut notes) = mount(filesystem, &a, threads)?;
    let mut session = session;
    let wanted = (kernel_readahead > 0).then_some(kernel_readahead);
    match mount_readahead(&mountpoint_path, wanted) {
        Ok(bytes) => counters
            .kernel_readahead_bytes
            .store(bytes, std::sync::atomic::Ordering::Relaxed),
        Err(e) => notes.push(format!(
            "the kernel reads this mount's files ahead at its default for a FUSE mount ({} KiB, one FUSE read each){}: {e}",
            crate::commands::FUSE_DEFAULT_READAHEAD_BYTES >> 10,
            match wanted {
                Some(bytes) => format!(" rather than {} KiB", bytes >> 10),
                None => String::new(),
            }
        )),
    }
    for note in notes {
        eprintln!("ahead mount: {note}");
    }
    eprintln!(
        "ahead mount: {} on {} (budget {}, policy {}, {} threads){}",
        a.source,
        a.mountpoint.display(),
        a.budget,
        a.policy,
        threads,
        if a.background {
            ""
        } else {
            "; Ctrl-C unmounts"
        }
    );
    if let Some(fd) = mounted_signal {
        mounted(fd);
    }
    let mut unmounter = session.unmount_callable();
    let mountpoint = a.mountpoint.clone();
    std::thread::Builder::new()
        .name("ahead-signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `signals` is a valid set, blocked in every thread.
            unsafe { libc::sigwait(&signals, &mut signal) };
            eprintln!(
                "ahead mount: signal {signal}: unmounting {}",
                mountpoint.display()
            );
            if let Err(e) = unmounter.unmount() {
                eprintln!("ahead mount: cannot unmount: {e}");
            }
            // With auto_unmount, fuser leaves the unmount to fusermount3's watcher, which may
            // be gone; a lazy unmount here makes it happen either way (the session then ends).
            detach(&mountpoint);
        })
        .map_err(|e| runtime(format!("cannot start a thread: {e}")))?;
    if let Some(every) = stats_every {
        let (engine, counters) = (engine.clone(), counters.clone());
        std::thread::Builder::new()
            .name("ahead-stats".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                eprintln!("ahead mount: {}", stats_line(&engine, &counters));
            })
            .map_err(|e| runtime(format!("cannot start a thread: {e}")))?;
    }
    let ended = session.run();
    eprintln!("ahead mount: unmounted; {}", stats_line(&engine, &counters));
    match ended {
        // A lazy unmount with reads in flight ends the kernel's side of the connection under
        // them: the session's next read of /dev/fuse says ECONNABORTED rather than ENODEV.
        // Either is the end of a mount, not a failure.
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
        ended => {
            ended.map_err(|e| runtime(format!("the FUSE session ended with an error: {e}")))?
        }
    }
    Ok(String::new())
}

/// A line of the engine's and the mount's counters.
fn stats_line(engine: &ahead::engine::Engine, counters: &fs::MountCounters) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let s = engine.stats();
    format!(
        "{} reads ({:.1} MiB, {} errors), {} open; fetched {:.1} MiB in {} requests, resident {:.1} MiB of {:.0}",
        counters.reads.load(Relaxed),
        counters.bytes_read.load(Relaxed) as f64 / (1 << 20) as f64,
        counters.read_errors.load(Relaxed),
        counters.open_handles.load(Relaxed),
        (s.pages_read * 4096) as f64 / (1 << 20) as f64,
        s.requests,
        (s.resident_pages * 4096) as f64 / (1 << 20) as f64,
        s.budget_bytes as f64 / (1 << 20) as f64,
    )
}

fn build_engine(a: &MountArgs) -> Result<ahead::engine::Engine, Failure> {
    let settings = engine_settings(&a.budget, &a.policy, &a.engine, a.budget_over_memory);
    // The engine's ring for scans (drop-behind) by default: fs.rs says why.
    start_engine(with_settings(
        ahead::engine::Engine::builder().drop_behind(true),
        settings,
        &a.option,
    )?)
}

/// Mount `filesystem`: with `auto_unmount` where fusermount3 can give it, else plainly (and a
/// note saying what a crash would leave).
fn mount(
    filesystem: AheadFs,
    a: &MountArgs,
    threads: usize,
) -> Result<(fuser::Session<AheadFs>, Vec<String>), Failure> {
    use fuser::{Config, MountOption, SessionACL};
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::FSName(a.source.clone()),
        MountOption::Subtype("ahead".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    config.n_threads = Some(threads.max(1));
    config.clone_fd = true;
    let mut notes = Vec::new();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if has_fusermount3() {
        config.mount_options.push(MountOption::AutoUnmount);
        // auto_unmount goes through fusermount3, which asks for allow_other or allow_root.
        config.acl = if root {
            SessionACL::All
        } else {
            SessionACL::RootAndOwner
        };
    } else {
        notes.push(
            "fusermount3 not found (Debian's fuse3): mounted without auto_unmount, so if this process is killed the mount stays until `umount` of it".to_string(),
        );
    }
    match fuser::Session::new(filesystem, &a.mountpoint, &config) {
        Ok(session) => Ok((session, notes)),
        Err(e) => Err(runtime(format!(
            "cannot mount on {}: {e}{}",
            a.mountpoint.display(),
            if root {
                ""
            } else {
                " (as a user: fusermount3 must be installed, and auto_unmount needs user_allow_other in /etc/fuse.conf)"
            }
        ))),
    }
}

/// Set the kernel's readahead on the FUSE mount at `mountpoint` (a canonical path) to
/// `bytes` if given, through its bdi's `read_ahead_kb`, and give what the kernel then holds.
/// `max_readahead` at FUSE's `init` can only lower it from the kernel's 128 KiB (fs.rs).
/// The mount is found in /proc/self/mountinfo, so nothing here asks the FUSE session.
fn mount_readahead(mountpoint: &std::path::Path, bytes: Option<u64>) -> Result<u64, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let wanted = mountpoint.to_string_lossy();
    // Fields: id, parent, major:minor, root, mount point (spaces as \040), ...; " - ", type.
    // The last such line is the mount on top.
    let device = mountinfo
        .lines()
        .rev()
        .find(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let fs_type = line.split(" - ").nth(1).and_then(|t| t.split(' ').next());
            fields.len() > 4
                && unescape_mountinfo(fields[4]) == wanted
                && fs_type.is_some_and(|t| t.starts_with("fuse"))
        })
        .and_then(|line| line.split(' ').nth(2))
        .ok_or_else(|| format!("{wanted} is not in /proc/self/mountinfo as a FUSE mount"))?
        .to_string();
    let path = format!("/sys/class/bdi/{device}/read_ahead_kb");
    if let Some(bytes) = bytes {
        std::fs::write(&path, format!("{}\n", bytes >> 10)).map_err(|e| format!("{path}: {e}"))?;
    }
    let held = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let kib: u64 = held
        .trim()
        .parse()
        .map_err(|_| format!("{path}: {held:?} is not a number"))?;
    Ok(kib << 10)
}

/// A mount point as /proc/self/mountinfo writes it, with its octal escapes (`\040`) undone.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|digits| digits[0] <= b'3' && digits.iter().all(|b| (b'0'..=b'7').contains(b)));
        if let (b'\\', Some(digits)) = (bytes[i], octal) {
            out.push((digits[0] - b'0') * 64 + (digits[1] - b'0') * 8 + (digits[2] - b'0'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmount `mountpoint` lazily (readers in flight get an error, none hangs) if it is still
/// mounted: umount2 as root, fusermount3 -u -z as a user.
fn detach(mountpoint: &std::path::Path) {
    let Ok(path) = mountpoint.canonicalize() else {
        return;
    };
    let mounted = std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split(' ').nth(1) == Some(&*path.to_string_lossy()))
    });
    if !mounted {
        return;
    }
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: c_path is a valid NUL-terminated path.
    if unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) } != 0 {
        let _ = std::process::Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(&path)
            .status();
    }
}

fn has_fusermount3() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("fusermount3").is_file())
    })
}

/// SIGINT, SIGTERM and SIGHUP, blocked in this thread (and so in every thread it makes).
fn blocked_signals() -> libc::sigset_t {
    // SAFETY: the set is initialized by sigemptyset before use; pthread_sigmask only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Fork; the parent waits for the child to say it mounted (or to fail, its error on the
/// shared stderr) and exits; the child returns the descriptor to say so on.
fn background() -> Result<i32, Failure> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe fills the two descriptors; fork is called with no other thread running.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err(runtime(format!(
                "cannot go to the background: {}",
                std::io::Error::last_os_error()
            )));
        }
        match libc::fork() {
            -1 => Err(runtime(format!(
                "cannot go to the background: {}",
                std::io::Error::last_os_error()
            ))),
            0 => {
                libc::close(fds[0]);
                libc::setsid();
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::dup2(null, 1);
                    libc::close(null);
                }
                Ok(fds[1])
            }
            _child => {
                libc::close(fds[1]);
                let mut byte = 0u8;
                let n = libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
                std::process::exit(if n == 1 { 0 } else { 1 });
            }
        }
    }
}

/// Tell the waiting parent the mount is up.
fn mounted(fd: i32) {
    // SAFETY: fd is the pipe's write end, written once and closed.
    unsafe {
        libc::write(fd, [1u8].as_ptr().cast(), 1);
        libc::close(fd);
    }
}

/// `10s`, `1m`, `500ms` or plain seconds.
fn seconds(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?}: not a duration (10s, 1m, 500ms)"))?;
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        _ => return Err(format!("{text:?}: the unit is ms, s or m")),
    };
    Duration::try_from_secs_f64(value * scale)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?}: not a positive duration"))
}
