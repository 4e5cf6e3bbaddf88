//! `ahead cat`: byte for byte, within its budget, and files with no size read as `cat` does.

use super::*;

fn write_pattern(path: &Path, size: u64) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut x = size ^ 0x5DEE_CE66;
    for _ in 0..size {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        f.write_all(&[(x >> 56) as u8]).unwrap();
    }
}

/// The `--stats` line of `name` that starts `what`, and the figures in it (after the name).
fn stats_line<'a>(stderr: &'a str, name: &str, what: &str) -> (&'a str, Vec<f64>) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("{name}: {what}")))
        .unwrap_or_else(|| panic!("no '{what}' line for {name}: {stderr}"));
    let figures = line[name.len() + 1..]
        .split(' ')
        .filter_map(|w| w.trim_end_matches([',', ';']).parse().ok())
        .collect();
    (line, figures)
}

#[test]
fn cat_writes_each_file_byte_for_byte() {
    let dir = tmpdir("cat");
    for size in [0u64, 1, 4095, 4096, 4097, 1_000_003] {
        let path = dir.join(format!("f{size}"));
        write_pattern(&path, size);
        for engine in ["auto", "threads", "sync"] {
            for bs in ["4k", "128k", "1000"] {
                let out = ahead(&[
                    "cat",
                    path.to_str().unwrap(),
                    "--bs",
                    bs,
                    "--engine",
                    engine,
                ]);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    out.stdout == std::fs::read(&path).unwrap(),
                    "size {size}, engine {engine}, bs {bs}"
                );
            }
        }
    }
    // Several files, concatenated, and the stats on stderr.
    let (a, b) = (dir.join("f4097"), dir.join("f1"));
    let out = ahead(&["cat", a.to_str().unwrap(), b.to_str().unwrap(), "--stats"]);
    let mut want = std::fs::read(&a).unwrap();
    want.extend(std::fs::read(&b).unwrap());
    assert!(out.stdout == want);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("engine: backend"), "{stderr}");
    assert!(stderr.contains("bytes 4098"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--stats` says what the file's policy was told of its device at the end, as numbers a
/// reader can check against the link (the lead it kept is latency x bandwidth).
#[test]
fn cat_stats_say_what_the_device_was_measured_at() {
    let dir = tmpdir("cat-device");
    let f = dir.join("f");
    write_pattern(&f, 4 << 20);
    let f = f.to_str().unwrap();
    let out = ahead(&["cat", f, "--stats"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let (line, figures) = stats_line(&stderr, f, "device measured at ");
    assert_eq!(figures.len(), 3, "{line}");
    assert!(figures.iter().all(|&x| x > 0.0), "{line}");
}

/// An object's `--stats` say what its link was given: GETs sent, how many were in flight at
/// once (on average while any was, and at most), the link's wait and one connection's rate.
#[test]
fn cat_stats_of_an_object_say_how_many_gets_were_in_flight_at_once() {
    let Some(gw) = servers::need(servers::versitygw(&["bench"])) else {
        return;
    };
    let size: usize = 24 << 20;
    let bytes: Vec<u8> = (0..size as u32)
        .map(|i| (i * 13 + i / 4096) as u8)
        .collect();
    std::fs::create_dir_all(gw.dir.0.join("root/bench")).unwrap();
    std::fs::write(gw.dir.0.join("root/bench/object.bin"), &bytes).unwrap();
    let url = "s3://bench/object.bin";
    let out = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args(["cat", url, "--stats", "--budget", "64m"])
        .envs(servers::s3_env(&gw.url()))
        .output()
        .expect("ahead runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout == bytes, "the object's bytes");
    let (line, figures) = stats_line(&stderr, url, "link: ");
    // GETs, at once on average, at most, wait in ms, MB/s.
    let [gets, mean, most, wait_ms, mb_per_s] = figures[..] else {
        panic!("five figures: {line}");
    };
    // 24 MiB in requests of at most 8 MiB (`request_max`), each one GET or more.
    assert!(gets >= 3.0, "{line}");
    assert!(most >= 1.0 && most <= gets, "{line}");
    assert!(mean >= 1.0 && mean <= most, "{line}");
    assert!(wait_ms > 0.0 && mb_per_s > 0.0, "{line}");
}

/// A size means one thing by every door: `--ra-max 5000` once gave a 4 KiB window (bytes cut
/// to KiB) where the builder's `window_max(5000)` gave 8 KiB. The flags, `-o` and the library
/// (`crates/ahead/tests/settings.rs`) all give whole pages, rounded up.
#[test]
fn cat_sizes_give_the_windows_the_library_gives() {
    let dir = tmpdir("cat-sizes");
    let f = dir.join("f");
    write_pattern(&f, 1 << 20);
    let f = f.to_str().unwrap();
    let caps = |args: &[&str]| {
        let mut all = vec!["cat", f, "--stats", "--budget", "64m"];
        all.extend_from_slice(args);
        let out = ahead(&all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        stderr
            .lines()
            .find(|l| l.starts_with(f) && l.contains("window_max"))
            .unwrap_or_else(|| panic!("no window line: {stderr}"))
            .to_string()
    };
    let want = format!("{f}: window_max 8192 bytes, request_max 12288 bytes");
    assert_eq!(caps(&["--ra-max", "5000", "--io-max", "8193"]), want);
    assert_eq!(
        caps(&["-o", "window_max=5000", "-o", "request_max=8193"]),
        want
    );
    assert_eq!(caps(&["--ra-max-kb", "5", "--io-max-kb", "12"]), want);
    assert_clean_failure(
        &ahead(&["cat", f, "-o", "windowmax=4m"]),
        2,
        "unknown setting 'windowmax'",
    );
    assert_clean_failure(&ahead(&["cat", f, "-o", "budget"]), 2, "KEY=VALUE");
    assert_clean_failure(&ahead(&["cat", f, "--ra-max", "100"]), 2, "--ra-max: ");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cat_bad_input_fails_cleanly() {
    let dir = tmpdir("cat-bad");
    let f = dir.join("f");
    write_pattern(&f, 10);
    let f = f.to_str().unwrap();
    assert_clean_failure(&ahead(&["cat", f, "--bs", "0"]), 2, "--bs");
    assert_clean_failure(&ahead(&["cat", f, "--bs", "1E"]), 2, "--bs");
    assert_clean_failure(&ahead(&["cat", f, "--engine", "aio"]), 2, "known: auto");
    assert_clean_failure(&ahead(&["cat", f, "--policy", "nope"]), 2, "unknown policy");
    assert_clean_failure(&ahead(&["cat", f, "--policy", "oracle"]), 2, "oracle");
    assert_clean_failure(&ahead(&["cat", f, "--budget", "1k"]), 2, "too small");
    let missing = dir.join("missing");
    let out = ahead(&["cat", missing.to_str().unwrap(), f]);
    assert_clean_failure(&out, 1, "No such file");
    // The other file was still written, as cat does.
    assert_eq!(out.stdout.len(), 10);
    assert_clean_failure(&ahead(&["cat", dir.to_str().unwrap()]), 1, "Is a directory");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ahead cat f | cmp - f` for a 3 GiB file. Long: run with
/// `cargo test --release -p ahead-cli -- --ignored`.
#[test]
#[ignore = "writes and reads 3 GiB; run with --ignored"]
fn cat_of_a_few_gib_is_the_file() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cat-gib");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f3g");
    let size = (3u64 << 30) + 12_345;
    if std::fs::metadata(&path).map(|m| m.len()).ok() != Some(size) {
        let st = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "head -c {size} /dev/urandom > {}",
                path.to_str().unwrap()
            ))
            .status()
            .unwrap();
        assert!(st.success());
    }
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} cat --bs 4k {p} | cmp - {p}",
            env!("CARGO_BIN_EXE_ahead"),
            p = path.to_str().unwrap()
        ))
        .status()
        .unwrap();
    assert!(st.success(), "ahead cat differs from the file");
}

/// Run `ahead cat --stats` with `args`, stdout discarded; return its exit status and the peak
/// resident memory it reports of itself, in KiB (`VmHWM`: `wait4`'s `ru_maxrss` of a child
/// spawned from this test binary starts from the binary's own, tens of MiB while other tests
/// run).
fn peak_rss_kib(args: &[&str]) -> (i32, i64) {
    let out = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args(args)
        .arg("--stats")
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib = stderr
        .lines()
        .find_map(|l| l.strip_prefix("process: peak resident "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("no peak in: {stderr}"));
    (out.status.code().unwrap_or(-1), kib)
}

#[test]
fn cat_of_more_than_the_budget_stays_within_budget_plus_32_mib() {
    let dir = tmpdir("rss");
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 253) as u8).collect();
    let mut paths = Vec::new();
    for i in 0..40 {
        let p = dir.join(format!("f{i}"));
        let mut data = Vec::with_capacity(8 << 20);
        for _ in 0..8 {
            data.extend_from_slice(&block);
        }
        data[i] = 1;
        std::fs::write(&p, &data).unwrap();
        paths.push(p.to_str().unwrap().to_string());
    }
    for engine in ["uring", "threads"] {
        let mut args = vec!["cat", "--budget", "64m", "--bs", "64k", "--engine", engine];
        args.extend(paths.iter().map(String::as_str));
        let (code, rss_kib) = peak_rss_kib(&args);
        assert_eq!(code, 0);
        // 320 MiB read through a 64 MiB budget.
        eprintln!("{engine}: peak RSS {rss_kib} KiB");
        assert!(
            rss_kib <= (64 + 32) * 1024,
            "{engine}: peak RSS {rss_kib} KiB"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Files whose size says nothing of their content are read to their end with plain reads, as
/// cat reads them: procfs and sysfs files (size 0), a character device, a FIFO.
#[test]
fn cat_reads_what_has_no_size_plainly_as_cat_does() {
    for path in [
        "/proc/version",
        "/proc/self/mountinfo",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        if !Path::new(path).exists() {
            continue;
        }
        let out = ahead(&["cat", path]);
        assert!(out.status.success(), "{path}: {out:?}");
        if path == "/proc/version" {
            assert_eq!(out.stdout, std::fs::read(path).unwrap(), "{path}");
        } else {
            assert!(!out.stdout.is_empty(), "{path}: nothing printed");
        }
    }
    let out = ahead(&["cat", "/proc/self/status"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("Name:\tahead"),
        "{out:?}"
    );
    let out = ahead(&["cat", "/dev/null"]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    // A FIFO: what its writer writes, then the end when the writer closes.
    let dir = tmpdir("fifo-cat");
    let fifo = dir.join("fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(&fifo, b"through a fifo\n").unwrap())
    };
    let out = ahead(&["cat", fifo.to_str().unwrap()]);
    writer.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"through a fifo\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 6 GiB budget is a limit, not an allocation: `cat` of a 100 KB file holds what it reads,
/// and starts at once (the whole budget was faulted in and pinned at start: 16-25 s and
/// 6.3 GB here).
#[test]
fn cat_with_a_large_budget_of_a_small_file_costs_what_it_reads() {
    let dir = tmpdir("large-budget");
    let p = dir.join("small");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 249) as u8).collect();
    std::fs::write(&p, &data).unwrap();
    let out = ahead(&["cat", "--budget", "6g", p.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout == data, "cat's bytes differ from the file's");
    for engine in ["uring", "threads"] {
        let t = std::time::Instant::now();
        let (code, rss_kib) = peak_rss_kib(&[
            "cat",
            "--budget",
            "6g",
            "--engine",
            engine,
            p.to_str().unwrap(),
        ]);
        let took = t.elapsed();
        assert_eq!(code, 0);
        eprintln!("{engine}: {took:?}, peak RSS {rss_kib} KiB");
        assert!(rss_kib < 64 * 1024, "{engine}: peak RSS {rss_kib} KiB");
        // The must-show is 50 ms, unloaded (BENCHMARKS.md); a loaded CI machine gets slack.
        assert!(took.as_millis() < 1000, "{engine}: took {took:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file its reader may not read: the system's "Permission denied", exit 1. As root the check
/// runs `ahead` as nobody (setpriv); as another user, the file is made unreadable.
#[test]
fn cat_of_an_unreadable_file_says_permission_denied() {
    let dir = std::env::temp_dir().join(format!("ahead-cli-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = dir.join("secret");
    std::fs::write(&f, b"no").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let root = ahead::os::is_root();
    let out = if root {
        let bin = env!("CARGO_BIN_EXE_ahead");
        // nobody must be able to reach the binary; skip if the build tree is private.
        let probe = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                bin,
                "--version",
            ])
            .output();
        if !probe.is_ok_and(|o| o.status.success()) {
            eprintln!("skipped: cannot run ahead as nobody here");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                bin,
                "cat",
            ])
            .arg(&f)
            .output()
            .unwrap()
    } else {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
        ahead(&["cat", f.to_str().unwrap()])
    };
    assert_clean_failure(&out, 1, "Permission denied");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A closed stdout is an error (exit 1), as for coreutils' cat, not a silent success: the
/// Rust runtime would otherwise reopen it on /dev/null before `main`. A full one too.
#[test]
fn cat_to_a_closed_or_full_stdout_fails() {
    let dir = tmpdir("cat-closed");
    let f = dir.join("f");
    write_pattern(&f, 100_000);
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec '{}' cat '{}' >&-",
            env!("CARGO_BIN_EXE_ahead"),
            f.display()
        ))
        .output()
        .unwrap();
    assert_clean_failure(&out, 1, "stdout");
    let full = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args(["cat", f.to_str().unwrap()])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_clean_failure(&full, 1, "No space left");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ahead cat -` reads the standard input: a file (through the engine, from where its
/// position stands) or a pipe, between other files, as cat does.
#[test]
fn cat_dash_reads_stdin() {
    use std::io::Write;
    let dir = tmpdir("cat-stdin");
    let (a, b) = (dir.join("a"), dir.join("b"));
    write_pattern(&a, 300_001);
    write_pattern(&b, 5_000);
    let (bytes_a, bytes_b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let from_file = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args([
            "cat",
            b.to_str().unwrap(),
            "-",
            b.to_str().unwrap(),
            "--stats",
        ])
        .stdin(std::fs::File::open(&a).unwrap())
        .output()
        .unwrap();
    assert!(
        from_file.status.success(),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    assert!(from_file.stdout == [&bytes_b[..], &bytes_a[..], &bytes_b[..]].concat());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args(["cat", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = bytes_a.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&feed).unwrap());
    let piped = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(piped.status.success());
    assert!(piped.stdout == bytes_a);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A budget above the machine's RAM is refused with one line saying how much there is,
/// unless insisted on; under a memory cgroup's limit (root, cgroup v1 here), the cgroup's.
#[test]
fn cat_refuses_a_budget_above_the_memory_there_is() {
    let dir = tmpdir("cat-budget");
    let f = dir.join("f");
    write_pattern(&f, 10_000);
    let out = ahead(&["cat", "--budget", "102400g", f.to_str().unwrap()]);
    assert_clean_failure(&out, 2, "RAM is");
    let out = ahead(&[
        "cat",
        "--budget",
        "48g",
        "--budget-over-memory",
        f.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), 10_000);
    let group = std::path::Path::new("/sys/fs/cgroup/memory")
        .join(format!("ahead-cli-test-{}", std::process::id()));
    if std::fs::create_dir(&group).is_err() {
        eprintln!("skipped the cgroup half: no cgroup v1 memory controller to write (needs root)");
        return;
    }
    std::fs::write(group.join("memory.limit_in_bytes"), "536870912").unwrap();
    let run = |budget: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}/cgroup.procs' && exec '{}' cat --budget {budget} '{}'",
                group.display(),
                env!("CARGO_BIN_EXE_ahead"),
                f.display()
            ))
            .output()
            .unwrap()
    };
    let refused = run("1g");
    let taken = run("256m");
    let _ = std::fs::remove_dir(&group);
    assert_clean_failure(&refused, 2, "memory cgroup's limit");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("512 MiB"));
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--bs 1g` in a process allowed 1 GB of address space: an error, not an abort.
#[test]
fn cat_with_a_buffer_larger_than_the_memory_allowed_fails_cleanly() {
    let dir = tmpdir("cat-ulimit");
    let f = dir.join("f");
    write_pattern(&f, 10_000);
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 1000000 && exec '{}' cat --bs 1g '{}'",
            env!("CARGO_BIN_EXE_ahead"),
            f.display()
        ))
        .output()
        .unwrap();
    assert_clean_failure(&out, 1, "cannot allocate a read buffer");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A password in a URL is never printed: not in the error of a server that cannot be reached,
/// of an s3:// URL (which takes no credentials), nor with --stats.
#[test]
fn cat_never_prints_a_password_from_a_url() {
    const PASSWORD: &str = "S3cretPW-plugh";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for url in [
        format!("http://alice:{PASSWORD}@127.0.0.1:{port}/obj"),
        format!("s3://KEY:{PASSWORD}@bucket/obj"),
        format!("https://alice:{PASSWORD}@127.0.0.1:{port}"),
    ] {
        let out = ahead(&["cat", "--stats", &url]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{url}: {stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
        assert!(
            stderr.contains("alice:***@") || stderr.contains("KEY:***@"),
            "{stderr}"
        );
    }
}

/// HTTPS through the stores' own client (hyper, each connection's read buffer fixed): a
/// server whose certificate the process trusts (`SSL_CERT_FILE`, where the platform's verifier
/// looks on Linux) is read byte for byte; the same server, trusted by nothing, is refused on
/// open with a clear error.
#[test]
fn cat_of_https_reads_what_the_platform_trusts_and_refuses_the_rest() {
    let Some(web) = servers::need(servers::lighttpd_https()) else {
        return;
    };
    let bytes: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(web.dir.0.join("docs/object.bin"), &bytes).unwrap();
    let url = format!("https://{}/object.bin", web.addr);
    let cat = |trusted: Option<&Path>| {
        // Nothing of the test's environment: no proxy (which would leave HTTPS to reqwest's
        // client) and no other roots of trust.
        let mut command = Command::new(env!("CARGO_BIN_EXE_ahead"));
        command.args(["cat", &url]).env_clear();
        if let Some(pem) = trusted {
            command.env("SSL_CERT_FILE", pem);
        }
        command.output().expect("ahead runs")
    };
    let out = cat(Some(&web.dir.0.join("server.pem")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        out.stdout == bytes,
        "the bytes differ ({} read)",
        out.stdout.len()
    );
    assert_clean_failure(&cat(None), 1, "certificate");
}
