//! `ahead mount` as programs meet it: a local directory and an S3 prefix (versitygw, through
//! toxiproxy where faults are wanted), mounted here, read by cat, dd, cmp, Python, sqlite3
//! and threads, every byte compared with the source's; a replaced object, a failing server
//! and an unmount with readers in flight. Skipped, naming what is missing, where there is no
//! /dev/fuse or no server (a failure under AHEAD_REQUIRE_SERVERS=1, as in CI).

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::servers::{self, need, s3_env, Scratch};

const BUCKET: &str = "mount-test";

/// Bytes no two offsets of which are likely equal over a page (a misplaced page shows).
fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// An `ahead mount` running in the foreground, unmounted (SIGTERM) when dropped.
struct Mounted {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
    _scratch: Scratch,
}

pub(super) fn fuse() -> Option<()> {
    need(if Path::new("/dev/fuse").exists() {
        Ok(())
    } else {
        Err("/dev/fuse is missing".to_string())
    })
}

fn is_mounted(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let dir = dir.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*dir))
}

impl Mounted {
    /// Mount `source` with `args`, the process's environment plus `env`; wait until it serves.
    fn start(source: &str, args: &[&str], env: &[(&str, String)]) -> Mounted {
        let scratch = Scratch::new("mount");
        let dir = scratch.0.join("mnt");
        std::fs::create_dir_all(&dir).unwrap();
        let log = scratch.0.join("mount.log");
        let child = Command::new(env!("CARGO_BIN_EXE_ahead"))
            .arg("mount")
            .arg(source)
            .arg(&dir)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("ahead runs");
        let mut mounted = Mounted {
            child,
            dir,
            log,
            _scratch: scratch,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mounted.dir.join(".ahead/stats.json").exists() {
            if let Ok(Some(status)) = mounted.child.try_wait() {
                panic!("ahead mount exited ({status}): {}", mounted.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "not mounted in 20 s: {}",
                mounted.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        mounted
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and a clean exit within 10 s (its log if not).
    fn stop_ok(&mut self) {
        let status = self.stop(Duration::from_secs(10));
        assert!(status.success(), "{status}: {}", self.log_text());
    }

    /// SIGTERM, and the exit status within `within`.
    fn stop(&mut self, within: Duration) -> std::process::ExitStatus {
        // SAFETY: kill sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "ahead mount still running {within:?} after SIGTERM: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if is_mounted(&self.dir) {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// The mount's statistics as `ahead stats --json` gives them.
fn stats_of(m: &Mounted) -> serde_json::Value {
    let stats = run(
        env!("CARGO_BIN_EXE_ahead"),
        &["stats", m.dir.to_str().unwrap(), "--json"],
    );
    serde_json::from_slice(&stats.stdout).unwrap()
}

/// The mount's own counters (the `mount` part of its statistics).
fn mount_counters(m: &Mounted) -> serde_json::Value {
    stats_of(m)["mount"].clone()
}

fn run(program: &str, args: &[&str]) -> std::process::Output {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `len` bytes at `offset` of `file` (fewer at the end), read until done.
fn pread(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = file.read_at(&mut buf[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

/// Threads reading random ranges of `path`, each compared with `bytes`.
fn threads_read_random_ranges(path: &Path, bytes: &[u8], threads: u64) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let file = std::fs::File::open(path).unwrap();
                let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ t;
                for _ in 0..200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = [4096usize, 65536, 1 << 20, 777][(x % 4) as usize];
                    let off = (x >> 8) % bytes.len() as u64;
                    let got = pread(&file, off, len).unwrap();
                    let end = (off as usize + len).min(bytes.len());
                    assert!(
                        got == bytes[off as usize..end],
                        "thread {t}: bytes differ at {off}"
                    );
                }
            });
        }
    });
}

#[test]
fn a_local_directory_reads_as_its_files_through_cat_dd_cmp_python_sqlite3_and_threads() {
    let Some(()) = fuse() else { return };
    let Some(sqlite3) = need(servers::tool("sqlite3")) else {
        return;
    };
    let src = Scratch::new("mount-src");
    let big = content(24 << 20, 1);
    std::fs::write(src.0.join("big.bin"), &big).unwrap();
    std::fs::create_dir_all(src.0.join("sub")).unwrap();
    std::fs::write(src.0.join("sub/small.txt"), b"hello\n").unwrap();
    std::fs::write(src.0.join("empty"), b"").unwrap();
    let db = src.0.join("db.sqlite");
    let sql = "create table t(k integer primary key, v text); \
        with recursive n(i) as (select 1 union all select i+1 from n where i < 20000) \
        insert into t select i, hex(randomblob(40)) from n;";
    run(sqlite3.to_str().unwrap(), &[db.to_str().unwrap(), sql]);
    let query = "select count(*), sum(length(v)), max(v) from t where k % 7 = 3;";
    let expected = run(sqlite3.to_str().unwrap(), &[db.to_str().unwrap(), query]).stdout;

    let mut m = Mounted::start(src.0.to_str().unwrap(), &["--budget", "64m"], &[]);
    // ls, stat
    let mut names: Vec<String> = std::fs::read_dir(&m.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["big.bin", "db.sqlite", "empty", "sub"]);
    assert_eq!(
        std::fs::metadata(m.path("big.bin")).unwrap().len(),
        big.len() as u64
    );
    assert!(std::fs::metadata(m.path("sub")).unwrap().is_dir());
    // cat, cmp, dd
    assert!(run("cat", &[m.path("big.bin").to_str().unwrap()]).stdout == big);
    run(
        "cmp",
        &[
            m.path("big.bin").to_str().unwrap(),
            src.0.join("big.bin").to_str().unwrap(),
        ],
    );
    let dd = run(
        "dd",
        &[
            &format!("if={}", m.path("big.bin").display()),
            "bs=4k",
            "skip=1001",
            "count=37",
            "status=none",
        ],
    );
    assert!(dd.stdout == big[1001 * 4096..1038 * 4096]);
    assert_eq!(std::fs::read(m.path("sub/small.txt")).unwrap(), b"hello\n");
    assert_eq!(std::fs::read(m.path("empty")).unwrap(), b"");
    // Python, in 64 KiB reads
    let py = run(
        "python3",
        &["-c", "import sys,hashlib\nh=hashlib.sha256()\nf=open(sys.argv[1],'rb')\nwhile (b:=f.read(65536)): h.update(b)\nprint(h.hexdigest())", m.path("big.bin").to_str().unwrap()],
    );
    let py_src = run(
        "python3",
        &[
            "-c",
            "import sys,hashlib\nprint(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())",
            src.0.join("big.bin").to_str().unwrap(),
        ],
    );
    assert_eq!(py.stdout, py_src.stdout);
    // sqlite3, read-only and immutable (the mount takes no lock files)
    let uri = format!("file:{}?immutable=1", m.path("db.sqlite").display());
    assert_eq!(
        run(sqlite3.to_str().unwrap(), &[&uri, query]).stdout,
        expected
    );
    // threads at once
    threads_read_random_ranges(&m.path("big.bin"), &big, 4);
    // read-only
    let write = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path("big.bin"));
    assert!(write.is_err(), "a write open was taken");
    assert!(std::fs::write(m.path("new"), b"x").is_err());
    // its statistics
    let v = stats_of(&m);
    assert!(
        v["engine"]["pages_read"].as_u64().unwrap() >= (24 << 20) / 4096,
        "{v}"
    );
    assert_eq!(v["mount"]["read_errors"], 0, "{v}");
    assert!(v["engine"]["budget_bytes"] == 64 << 20, "{v}");
    let text = run(
        env!("CARGO_BIN_EXE_ahead"),
        &["stats", m.dir.to_str().unwrap()],
    );
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("reads "),
        "{text:?}"
    );
    // SIGTERM unmounts and ends it
    m.stop_ok();
    assert!(!is_mounted(&m.dir));
    assert!(m.log_text().contains("unmounted"), "{}", m.log_text());
}

/// A directory's files read one after another in its listing's order are opened ahead
/// (counted as `opened_ahead`), every byte the file's; reads out of that order, and a
/// directory among the files, change no byte.
#[test]
fn a_directorys_files_read_in_turn_are_opened_ahead_byte_for_byte() {
    let Some(()) = fuse() else { return };
    let src = Scratch::new("mount-turn");
    let shards = src.0.join("shards");
    std::fs::create_dir_all(shards.join("s05x")).unwrap();
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("s{i:02}.bin"),
                content((1 << 20) + i * 4099, 40 + i as u64),
            )
        })
        .collect();
    for (name, bytes) in &files {
        std::fs::write(shards.join(name), bytes).unwrap();
    }
    let mut m = Mounted::start(src.0.to_str().unwrap(), &["--budget", "64m"], &[]);
    let dir = m.path("shards");
    let listed = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(listed, 13);
    // Every file opened at once, in the listing's order, then read at random: not read in
    // turn, so nothing is opened ahead (each first window would be fetched for nothing).
    let held: Vec<std::fs::File> = files
        .iter()
        .map(|(name, _)| std::fs::File::open(dir.join(name)).unwrap())
        .collect();
    for i in [7, 1, 10, 4] {
        assert!(pread(&held[i], 4096, 4096).unwrap() == files[i].1[4096..8192]);
    }
    drop(held);
    assert_eq!(mount_counters(&m)["opened_ahead"], 0);
    for (name, bytes) in &files {
        assert!(std::fs::read(dir.join(name)).unwrap() == *bytes, "{name}");
    }
    for i in [5, 2, 9, 3, 4, 11] {
        let (name, bytes) = &files[i];
        assert!(
            std::fs::read(dir.join(name)).unwrap() == *bytes,
            "{name} again"
        );
    }
    let v = stats_of(&m);
    let ahead = v["mount"]["opened_ahead"].as_u64().unwrap();
    assert!(ahead >= 9, "{ahead} of the 12 in turn opened ahead: {v}");
    assert_eq!(v["mount"]["read_errors"], 0, "{v}");
    m.stop_ok();
}

/// FUSE reads a 4 KiB reader in order sends for `path`, whose bytes must be `bytes`.
fn fuse_reads_in_order(m: &Mounted, name: &str, bytes: &[u8]) -> u64 {
    let before = mount_counters(m)["reads"].as_u64().unwrap();
    let mut f = std::fs::File::open(m.path(name)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got == bytes, "{name}: the bytes differ");
    mount_counters(m)["reads"].as_u64().unwrap() - before
}

#[test]
fn the_kernel_reads_ahead_1_mib_a_fuse_read_or_its_own_128_kib_when_told() {
    let Some(()) = fuse() else { return };
    let src = Scratch::new("mount-ra");
    let bytes = content(16 << 20, 77);
    std::fs::write(src.0.join("f.bin"), &bytes).unwrap();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;

    let mut m = Mounted::start(src.0.to_str().unwrap(), &["--budget", "64m"], &[]);
    let held = mount_counters(&m)["kernel_readahead_bytes"]
        .as_u64()
        .unwrap();
    let reads = fuse_reads_in_order(&m, "f.bin", &bytes);
    if root {
        assert_eq!(held, 1 << 20, "{}", m.log_text());
        // 16 MiB in 1 MiB reads, and the few small ones of the kernel's first window.
        assert!(reads <= 16 + 8, "{reads} FUSE reads for 16 MiB in order");
    } else {
        assert!(
            held == 1 << 20 || m.log_text().contains("read_ahead_kb"),
            "not raised, and not said: {}",
            m.log_text()
        );
    }
    m.stop_ok();

    let mut m = Mounted::start(
        src.0.to_str().unwrap(),
        &["--budget", "64m", "--kernel-readahead", "0"],
        &[],
    );
    assert_eq!(
        mount_counters(&m)["kernel_readahead_bytes"]
            .as_u64()
            .unwrap(),
        128 << 10
    );
    let reads = fuse_reads_in_order(&m, "f.bin", &bytes);
    assert!(reads >= 128, "{reads} FUSE reads for 16 MiB at 128 KiB");
    m.stop_ok();

    let out = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .arg("mount")
        .args([&src.0, &src.0])
        .args(["--kernel-readahead", "3000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--kernel-readahead"), "{err}");
}

/// The engine's pages dropped behind a scan and its pages resident, from the mount's stats.
fn ring_of(m: &Mounted) -> (u64, u64) {
    let engine = stats_of(m)["engine"].clone();
    (
        engine["dropped_behind_pages"].as_u64().unwrap(),
        engine["resident_pages"].as_u64().unwrap(),
    )
}

#[test]
fn a_scan_through_the_mount_runs_in_the_engines_ring_unless_told_not_to() {
    let Some(()) = fuse() else { return };
    let src = Scratch::new("mount-ring");
    // 48 MiB against a 32 MiB budget: larger than a quarter of it, so read through a ring.
    let bytes = content(48 << 20, 91);
    std::fs::write(src.0.join("big.bin"), &bytes).unwrap();
    let budget_pages = (32u64 << 20) / 4096;

    let mut m = Mounted::start(src.0.to_str().unwrap(), &["--budget", "32m"], &[]);
    fuse_reads_in_order(&m, "big.bin", &bytes);
    let (dropped, resident) = ring_of(&m);
    // What the scan passed over went (all but the lag behind its end and what was read
    // last), so the cache holds about its windows, not a full budget of used pages.
    assert!(
        dropped >= (32 << 20) / 4096,
        "{dropped} pages dropped behind a 48 MiB scan"
    );
    assert!(
        resident < budget_pages * 3 / 4,
        "{resident} pages resident of {budget_pages} after a scan in the ring"
    );
    m.stop_ok();

    let mut m = Mounted::start(
        src.0.to_str().unwrap(),
        &["--budget", "32m", "-o", "drop_behind=off"],
        &[],
    );
    fuse_reads_in_order(&m, "big.bin", &bytes);
    let (dropped, resident) = ring_of(&m);
    assert_eq!(dropped, 0, "drop_behind=off dropped pages");
    assert!(
        resident >= budget_pages * 3 / 4,
        "{resident} pages resident of {budget_pages}: the cache should have filled"
    );
    m.stop_ok();
}

/// Write `bytes` as the gateway's object `key` (its posix backend keeps objects as files).
fn put_file(gw: &servers::Server, key: &str, bytes: &[u8]) -> PathBuf {
    let path = gw.dir.0.join("root").join(BUCKET).join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn an_s3_prefix_lists_and_reads_byte_for_byte_and_a_replaced_object_is_eio() {
    let Some(()) = fuse() else { return };
    let Some(gw) = need(servers::versitygw(&[BUCKET])) else {
        return;
    };
    let objects: Vec<(&str, Vec<u8>)> = vec![
        ("data/a.bin", content((8 << 20) + 123, 2)),
        ("data/b.bin", content(300_000, 3)),
        ("data/sub/c.bin", content(5 << 20, 4)),
        ("data/big.bin", content(64 << 20, 5)),
        ("other/x.bin", content(10, 6)),
    ];
    for (key, bytes) in &objects {
        put_file(&gw, key, bytes);
    }
    let mut m = Mounted::start(
        &format!("s3://{BUCKET}/data/"),
        &["--budget", "32m"],
        &s3_env(&gw.url()),
    );
    let mut names: Vec<String> = std::fs::read_dir(&m.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.bin", "b.bin", "big.bin", "sub"]);
    for (key, bytes) in objects.iter().filter(|(k, _)| k.starts_with("data/")) {
        let path = m.path(key.strip_prefix("data/").unwrap());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            bytes.len() as u64,
            "{key}"
        );
        assert!(
            std::fs::read(&path).unwrap() == *bytes,
            "{key}: bytes differ"
        );
    }
    assert!(std::fs::metadata(m.path("missing.bin")).is_err());
    let (_, a) = &objects[0];
    threads_read_random_ranges(&m.path("a.bin"), a, 4);

    // Replaced while open: the next read that reaches the gateway fails (EIO), and no read
    // returns bytes of the new version.
    let (_, big) = &objects[3];
    let file = std::fs::File::open(m.path("big.bin")).unwrap();
    assert!(pread(&file, 0, 4096).unwrap() == big[..4096]);
    let replaced = put_file(&gw, "data/big.bin", &content(64 << 20, 99));
    // Pinned by Last-Modified where the gateway gives no ETag: make the change visible to it.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&replaced)
        .unwrap()
        .set_modified(later)
        .unwrap();
    // (The engine's cache still holds the object's end from the whole read above: those
    // pages are of the version opened and read as such; its start is fetched again.)
    let mut failed = false;
    for off in (8u64 << 20..32 << 20).step_by(1 << 20) {
        match pread(&file, off, 65536) {
            Ok(got) => assert!(
                got == big[off as usize..off as usize + 65536],
                "mixed bytes at {off}"
            ),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
                failed = true;
            }
        }
    }
    assert!(failed, "the replaced object read without an error");
    assert!(m.log_text().contains("changed"), "{}", m.log_text());
    drop(file);
    m.stop_ok();
}

#[test]
fn a_failing_server_is_eio_without_a_hang_and_unmount_with_readers_in_flight_ends() {
    let Some(()) = fuse() else { return };
    let Some(gw) = need(servers::versitygw(&[BUCKET])) else {
        return;
    };
    let Some(toxi) = need(servers::toxiproxy()) else {
        return;
    };
    let bytes = content(32 << 20, 7);
    put_file(&gw, "f/obj.bin", &bytes);
    let proxy = toxi.proxy("mount", gw.addr);
    toxi.latency_each_way(&proxy, 10);
    let mut m = Mounted::start(
        &format!("s3://{BUCKET}/f/"),
        &[
            "--budget",
            "16m",
            "-o",
            "remote.max_retries=1",
            "-o",
            "remote.retry_timeout=2",
            "-o",
            "remote.timeout=2s",
        ],
        &s3_env(&proxy.url()),
    );
    let path = m.path("obj.bin");
    let file = std::fs::File::open(&path).unwrap();
    assert!(pread(&file, 0, 1 << 20).unwrap() == bytes[..1 << 20]);
    // Every connection now stalls: reads past what is cached fail within the retry bound.
    let stall = toxi.toxic(&proxy, "timeout", "downstream", 1.0, r#"{"timeout":0}"#);
    let began = Instant::now();
    let mut errors = 0;
    for off in (20u64 << 20..32 << 20).step_by(4 << 20) {
        match pread(&file, off, 4096) {
            Ok(got) => assert!(
                got == bytes[off as usize..off as usize + 4096],
                "bytes at {off}"
            ),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "no read failed with the server stalled");
    assert!(
        began.elapsed() < Duration::from_secs(60),
        "{:?}",
        began.elapsed()
    );
    // The server back: reads succeed again, with the right bytes.
    toxi.remove_toxic(&proxy, &stall);
    assert!(pread(&file, 30 << 20, 65536).unwrap() == bytes[30 << 20..(30 << 20) + 65536]);
    drop(file);
    // Readers in flight on a slow link when the mount is told to stop: each ends (bytes or an
    // error), none hangs, and the process exits.
    for stream in ["upstream", "downstream"] {
        toxi.remove_toxic(&proxy, &format!("latency_{stream}"));
    }
    toxi.latency_each_way(&proxy, 200);
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (path, bytes) = (path.clone(), bytes.clone());
            std::thread::spawn(move || {
                let Ok(mut f) = std::fs::File::open(&path) else {
                    return;
                };
                let (mut buf, mut off) = (vec![0u8; 1 << 20], 0);
                // Until the end or an error (the mount gone): what was read is right.
                while let Ok(n) = f.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    assert!(buf[..n] == bytes[off..off + n], "bytes at {off}");
                    off += n;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let status = m.stop(Duration::from_secs(30));
    assert!(status.success(), "{status}: {}", m.log_text());
    let deadline = Instant::now() + Duration::from_secs(30);
    for r in readers {
        while !r.is_finished() {
            assert!(Instant::now() < deadline, "a reader hung after unmount");
            std::thread::sleep(Duration::from_millis(20));
        }
        r.join().unwrap();
    }
    assert!(!is_mounted(&m.dir));
}

#[test]
fn an_http_server_mounts_the_files_a_manifest_names_and_a_bad_manifest_is_refused() {
    let Some(()) = fuse() else { return };
    let Some(web) = need(servers::lighttpd()) else {
        return;
    };
    let docs = web.dir.0.join("docs");
    let (a, b) = (content((3 << 20) + 5, 8), content(70_000, 9));
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(docs.join("a.bin"), &a).unwrap();
    std::fs::write(docs.join("sub/b.bin"), &b).unwrap();
    let scratch = Scratch::new("manifest");
    let manifest = scratch.0.join("names.txt");
    std::fs::write(&manifest, "# the files\na.bin\n\nsub/b.bin\nmissing.bin\n").unwrap();
    let manifest_arg = manifest.to_str().unwrap();
    let mut m = Mounted::start(
        &format!("{}/", web.url()),
        &["--manifest", manifest_arg],
        &[],
    );
    let mut names: Vec<String> = std::fs::read_dir(&m.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // A name the server does not have is left out, with a line saying so.
    assert_eq!(names, ["a.bin", "sub"]);
    assert!(std::fs::read(m.path("a.bin")).unwrap() == a);
    assert!(std::fs::read(m.path("sub/b.bin")).unwrap() == b);
    assert!(
        std::fs::metadata(m.path("other.bin")).is_err(),
        "a name not in the manifest"
    );
    assert!(m.log_text().contains("missing.bin"), "{}", m.log_text());
    m.stop_ok();

    // Without a manifest, and with a bad line: refused, naming why.
    let target = scratch.0.join("mnt");
    std::fs::create_dir_all(&target).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args(["mount", &web.url(), target.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--manifest"),
        "{out:?}"
    );
    std::fs::write(&manifest, "a.bin\n../etc/passwd\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args([
            "mount",
            &web.url(),
            target.to_str().unwrap(),
            "--manifest",
            manifest_arg,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 2"),
        "{out:?}"
    );
    assert!(!is_mounted(&target));
}
