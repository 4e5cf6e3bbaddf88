//! `ahead replay` and `ahead trace`: CSV and strace traces counted as a person would, the
//! windows file, and kernel tracing refused cleanly where it cannot run.

use super::*;

#[test]
fn replay_csv_counts_what_a_person_would() {
    let dir = tmpdir("csv");
    let p = dir.join("t.csv");
    // 8 sequential 16 KiB reads of a 128 KiB file, then the same again.
    let mut text = String::from("# two passes\nfile,offset,len\n");
    for _pass in 0..2 {
        for i in 0..8 {
            text.push_str(&format!("/data/f,{},16384\n", i * 16384));
        }
    }
    std::fs::write(&p, text).unwrap();
    let out = ahead(&["replay", p.to_str().unwrap(), "--policy", "none", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["pages_requested"], 64);
    assert_eq!(r["pages_read"], 32, "the second pass is all hits");
    assert_eq!(r["hit_pages"], 32);
    assert_eq!(r["read_requests"], 8);
    assert_eq!(v["files"][0]["file"], "/data/f");
    assert_eq!(v["files"][0]["size"], 131072);
    std::fs::remove_dir_all(&dir).ok();
}

fn have_strace() -> bool {
    Command::new("strace")
        .arg("-V")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `ahead trace [flags] -o log -- dd if=data bs=BS`: whether it was recorded (false, with a line
/// saying why, where strace is missing or may not trace here).
fn trace_dd(log: &Path, data: &Path, bs: &str, flags: &[&str]) -> bool {
    if !have_strace() {
        eprintln!("skipped: strace is not installed (apt-get install strace)");
        return false;
    }
    let mut args = vec!["trace"];
    args.extend_from_slice(flags);
    let input = format!("if={}", data.display());
    let bs = format!("bs={bs}");
    args.extend_from_slice(&[
        "-o",
        log.to_str().unwrap(),
        "--",
        "dd",
        &input,
        "of=/dev/null",
        &bs,
    ]);
    let out = ahead(&args);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("ptrace") || stderr.contains("Operation not permitted") {
            eprintln!("skipped: strace cannot trace here: {stderr}");
            return false;
        }
        panic!("ahead trace failed: {stderr}");
    }
    true
}

/// Record a real trace of dd reading a 1 MiB file in 16 KiB pieces, and replay it.
#[test]
fn replay_of_a_real_strace_trace_matches_a_hand_count() {
    let dir = tmpdir("strace");
    let data = dir.join("data.bin");
    std::fs::write(&data, vec![7u8; 1 << 20]).unwrap();
    let log = dir.join("trace.log");
    if !trace_dd(&log, &data, "16k", &[]) {
        return;
    }
    // The file is on this machine, so replay would take its device's read_ahead_kb from
    // sysfs: pin the hand count's settings (128 KiB windows, single-page folios).
    let out = ahead(&[
        "replay",
        log.to_str().unwrap(),
        "--policy",
        "none,linux-ondemand,pratt",
        "--ra-max-kb",
        "128",
        "--folio-max-order",
        "0",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let path = canonical(&data);
    let file = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == path)
        .unwrap_or_else(|| panic!("{path} not in {}", v["files"]));
    assert_eq!(file["size"], 1 << 20);
    let by = |p: &str| {
        file["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == p)
            .unwrap()
            .clone()
    };
    // 64 reads of 4 pages. none: one 4-page request per read.
    let none = by("none");
    assert_eq!(
        (
            none["pages_requested"].as_u64(),
            none["pages_read"].as_u64()
        ),
        (Some(256), Some(256))
    );
    assert_eq!(none["read_requests"], 64);
    // On-demand, by hand: [0,8) [8,24) [24,56), then 32-page windows to the end:
    // [56,88) [88,120) [120,152) [152,184) [184,216) [216,248) [248,256) = 10 requests.
    let od = by("linux-ondemand");
    assert_eq!(od["pages_read"], 256);
    assert_eq!(od["read_requests"], 10);
    assert_eq!(od["sync_requests"], 1);
    assert_eq!(od["wasted_pages"], 0);
    // Pratt, by hand: [0,8) then ahead [8,24) at once, then [24,56), [56,88), ... [248,256).
    let pratt = by("pratt");
    assert_eq!(pratt["pages_read"], 256);
    assert_eq!(pratt["read_requests"], 10);
    std::fs::remove_dir_all(&dir).ok();
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn replay_windows_writes_one_row_per_decision() {
    // 64 sequential 4 KiB reads of a 1 MiB file, 128 KiB window, no large folios: the kernel's
    // sequence is [0,4) with 3 ahead, then 8, 16, 32 (the rest of the file).
    let dir = tmpdir("windows");
    let trace = dir.join("t.csv");
    let mut csv = String::from("file,offset,len,size\n");
    for i in 0..64 {
        csv.push_str(&format!("/data/f,{},4096,1048576\n", i * 4096));
    }
    std::fs::write(&trace, csv).unwrap();
    let windows = dir.join("w.csv");
    let out = ahead(&[
        "replay",
        trace.to_str().unwrap(),
        "--windows",
        windows.to_str().unwrap(),
        "--ra-max-kb",
        "128",
        "--folio-max-order",
        "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&windows).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "file,start,size,async_size");
    assert_eq!(
        &rows[1..6],
        [
            "/data/f,0,4,3",
            "/data/f,4,8,8",
            "/data/f,12,16,16",
            "/data/f,28,32,32",
            "/data/f,60,32,32"
        ]
    );
    // --windows takes one policy.
    let out = ahead(&[
        "replay",
        trace.to_str().unwrap(),
        "--windows",
        windows.to_str().unwrap(),
        "--policy",
        "pratt,none",
    ]);
    assert_clean_failure(&out, 2, "one --policy");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn kernel_tracing_bad_input_fails_cleanly() {
    let out = ahead(&["compare", "/nonexistent/ahead-dir"]);
    assert_clean_failure(&out, 1, "trace --kernel");
    let out = ahead(&["trace", "--kernel", "--pattern", "seq", "-o", "/tmp/x"]);
    assert_eq!(out.status.code(), Some(2), "--pattern needs --file");
    let out = ahead(&[
        "trace",
        "--pattern",
        "seq",
        "--file",
        "/tmp/x",
        "-o",
        "/tmp/x",
    ]);
    assert_eq!(out.status.code(), Some(2), "--pattern needs --kernel");
    let dir = tmpdir("kernel-bad");
    let out = ahead(&[
        "trace",
        "--kernel",
        "--pattern",
        "nosuch",
        "--file",
        dir.join("f").to_str().unwrap(),
        "-o",
        dir.join("o").to_str().unwrap(),
    ]);
    assert_clean_failure(&out, 2, "unknown pattern");
    // A file shorter than the pattern is refused, not grown.
    let short = dir.join("short");
    std::fs::write(&short, b"tiny").unwrap();
    let out = ahead(&[
        "trace",
        "--kernel",
        "--pattern",
        "seq:size=1m",
        "--file",
        short.to_str().unwrap(),
        "-o",
        dir.join("o").to_str().unwrap(),
    ]);
    assert_clean_failure(&out, 1, "4 bytes");
    assert_eq!(std::fs::read(&short).unwrap(), b"tiny");
    std::fs::remove_dir_all(&dir).ok();
}

/// `replay` simulates: it never opens the files a trace names (strace shows every open it
/// makes), so it needs no rights to them and cannot disturb them.
#[test]
fn replay_never_opens_the_files_a_trace_names() {
    if !have_strace() {
        eprintln!("skipped: strace is not installed");
        return;
    }
    let dir = tmpdir("replay-opens");
    let named = dir.join("named-by-the-trace");
    std::fs::write(&named, b"do not open").unwrap();
    let csv = dir.join("t.csv");
    std::fs::write(
        &csv,
        format!(
            "file,offset,len\n{0},0,4096\n{0},4096,4096\n",
            named.display()
        ),
    )
    .unwrap();
    let log = dir.join("opens.log");
    let out = Command::new("strace")
        .args(["-f", "-e", "trace=open,openat,openat2", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_ahead"))
        .arg("replay")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let opens = std::fs::read_to_string(&log).unwrap();
    assert!(
        opens.contains("t.csv"),
        "the trace itself is opened: {opens}"
    );
    assert!(
        !opens.contains("named-by-the-trace"),
        "replay opened a file the trace names"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Recording the kernel's readahead needs root: as anyone else it says so, exit 1.
#[test]
fn kernel_tracing_as_a_user_says_it_needs_root() {
    if !ahead::os::is_root() {
        let out = ahead(&["trace", "--kernel", "-o", "/tmp/ahead-k", "--", "true"]);
        assert_clean_failure(&out, 1, "root");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_ahead");
    let run_as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
            .args(args)
            .output()
    };
    if !run_as_nobody(&["--version"]).is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: cannot run ahead as nobody here");
        return;
    }
    let out = run_as_nobody(&[
        "trace",
        "--kernel",
        "-o",
        "/tmp/ahead-k-nobody",
        "--",
        "true",
    ])
    .unwrap();
    assert_clean_failure(&out, 1, "root");
}

/// Traces recorded by hand the ways users record them (plain `strace -o`, `-T`, `-xx`,
/// `-tt`, a relative path, `dd`'s input dup2'd onto descriptor 0): every read of the file is
/// counted, all of its bytes, as the program made them.
#[test]
fn replay_counts_every_read_of_logs_recorded_by_hand() {
    if !have_strace() {
        eprintln!("skipped: strace is not installed (apt-get install strace)");
        return;
    }
    let dir = tmpdir("strace-by-hand");
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let size = 300_001u64;
    std::fs::write(dir.join("f"), vec![5u8; size as usize]).unwrap();
    let runs: [(&str, &[&str], &[&str]); 6] = [
        ("plain", &[], &["cat", "../f"]),
        ("T", &["-T"], &["cat", "../f"]),
        ("xx-y", &["-xx", "-y"], &["cat", "../f"]),
        ("tt-f", &["-tt", "-f"], &["cat", "../f"]),
        ("dd", &[], &["dd", "if=../f", "of=/dev/null", "bs=64k"]),
        (
            "dd-y-f",
            &["-y", "-f"],
            &["dd", "if=../f", "of=/dev/null", "bs=64k"],
        ),
    ];
    for (name, flags, command) in runs {
        let log = dir.join(format!("{name}.log"));
        let traced = Command::new("strace")
            .args(flags)
            .arg("-o")
            .arg(&log)
            .args(command)
            .current_dir(&sub)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        if !traced.success() {
            eprintln!("skipped: strace cannot trace here");
            return;
        }
        let out = ahead(&[
            "replay",
            log.to_str().unwrap(),
            "--policy",
            "none",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let file = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["file"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/f") || p == "../f")
            })
            .unwrap_or_else(|| panic!("{name}: the file is not in {}", v["files"]));
        assert_eq!(file["size"], size, "{name}: {file}");
        let none = &file["results"][0];
        // Every byte of the file asked for: its pages, all of them.
        assert_eq!(none["pages_read"], size.div_ceil(4096), "{name}: {none}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `ahead trace` checks its output before it starts, writes the working directory the
/// program ran in (relative paths resolve against it), and reports the program's own status.
#[test]
fn trace_checks_its_output_and_reports_the_programs_status() {
    if !have_strace() {
        eprintln!("skipped: strace is not installed (apt-get install strace)");
        return;
    }
    let dir = tmpdir("trace-output");
    let out = ahead(&["trace", "-o", "/proc/version", "--", "true"]);
    assert_clean_failure(&out, 2, "not a regular file");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("wrote"));
    let out = ahead(&["trace", "-o", dir.to_str().unwrap(), "--", "true"]);
    assert_clean_failure(&out, 2, "is a directory");
    let log = dir.join("false.log");
    let out = ahead(&["trace", "-o", log.to_str().unwrap(), "--", "false"]);
    assert_clean_failure(&out, 1, "(false) exited with status 1");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("# cwd: /"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Offsets, lengths and sizes no file could hold: one clear line naming the row (or the
/// pattern), quickly; they aborted or hung the simulator.
#[test]
fn sizes_past_what_the_simulator_models_are_one_clear_line() {
    let dir = tmpdir("huge");
    for (i, row) in [
        "/a,9223372036854775807,1",
        "/a,4611686018427387904,4611686018427387904",
        "/a,9223372036854771712,4096",
        "/a,0,9223372036854775807",
    ]
    .iter()
    .enumerate()
    {
        let csv = dir.join(format!("huge{i}.csv"));
        std::fs::write(&csv, format!("file,offset,len\n{row}\n")).unwrap();
        let started = std::time::Instant::now();
        let out = ahead(&["replay", csv.to_str().unwrap()]);
        assert_clean_failure(&out, 1, "line 2");
        assert!(started.elapsed().as_secs() < 5, "{row}");
    }
    for spec in [
        "seq:size=18446744073709551615",
        "reverse:size=8388608g",
        "interleaved:size=99999999g",
        "seq:size=1g,bs=1",
        "merge:ways=999999999999",
    ] {
        let started = std::time::Instant::now();
        let out = ahead(&["sim", "--pattern", spec]);
        assert_clean_failure(&out, 2, "pattern");
        assert!(started.elapsed().as_secs() < 5, "{spec}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `ahead trace --time` keeps the program's own time, `replay` spends it between the reads,
/// and `replay --mount` adds the kernel's cache in front and a FUSE read's costs from the
/// profile; a profile without them, and a time that is not a number, are clear errors.
#[test]
fn a_programs_own_time_and_a_mount_are_in_its_replay() {
    let dir = tmpdir("timed");
    let data = dir.join("data.bin");
    std::fs::write(&data, vec![3u8; 4 << 20]).unwrap();
    let log = dir.join("dd.log");
    if !trace_dd(&log, &data, "4k", &["--time"]) {
        return;
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let ns: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("# program_ns: "))
        .unwrap_or_else(|| {
            panic!(
                "no program time in the log:\n{}",
                &text[..200.min(text.len())]
            )
        })
        .parse()
        .unwrap();
    assert!(ns > 0);

    // The same reads with a program time of 3 s, and with none.
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with("# program_ns"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (slow, plain) = (dir.join("slow.log"), dir.join("plain.log"));
    std::fs::write(&slow, format!("# program_ns: 3000000000\n{body}")).unwrap();
    std::fs::write(&plain, &body).unwrap();
    let profile = dir.join("fuse.json");
    std::fs::write(
        &profile,
        r#"{"name": "test disk", "latency_us": 80, "per_request_us": 5, "seek_us": 0,
            "bandwidth_mb_s": 2000, "queue_depth": 8, "connection_mb_s": 0,
            "host": {"read_ns": 200, "copy_ns_per_page": 300,
                     "fuse_wait_ns": 1000000, "fuse_ahead_ns": 2000000}}"#,
    )
    .unwrap();
    let modeled_ms = |log: &Path, extra: &[&str]| -> (f64, serde_json::Value) {
        let mut args = vec![
            "replay",
            log.to_str().unwrap(),
            "--policy",
            "adaptive",
            "--device",
            profile.to_str().unwrap(),
            "--ra-max",
            "1m",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = ahead(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let ms = v["results"][0]["modeled_ms"].as_f64().unwrap();
        (ms, v)
    };
    let (plain_ms, _) = modeled_ms(&plain, &[]);
    let (slow_ms, v) = modeled_ms(&slow, &[]);
    assert_eq!(v["program_ns"], 3_000_000_000u64);
    // The program's 3 s are spent before its reads (the first share before the first read is
    // not in the file's time), and the device's time overlaps them.
    assert!(
        slow_ms > 2990.0 && slow_ms < 3000.0 + plain_ms,
        "{slow_ms} ms against {plain_ms}"
    );
    assert!(plain_ms < 100.0, "{plain_ms}");

    // Through a mount whose profile does not say how far the kernel read ahead (the kernel's
    // default for a FUSE mount, 128 KiB): 4 MiB read in order reach the daemon as reads of at
    // most 128 KiB (32 or more), each costing 1-2 ms.
    let (mount_ms, v) = modeled_ms(&plain, &["--mount"]);
    assert_eq!(v["mount"]["wait_ns"], 1_000_000);
    assert_eq!(v["mount"]["ahead_ns"], 2_000_000);
    assert_eq!(v["mount"]["readahead_pages"], 32);
    assert_eq!(v["mount"]["request_pages"], 256);
    assert!(
        mount_ms >= plain_ms + 32.0,
        "{mount_ms} ms against {plain_ms}"
    );
    assert!(
        mount_ms <= plain_ms + 2.0 * 40.0,
        "{mount_ms} ms against {plain_ms}"
    );
    // The mount's readahead at 1 MiB (as `ahead mount` sets it as root): 4 and a few of the
    // kernel's first, smaller reads.
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        text.replace(
            r#""fuse_ahead_ns": 2000000"#,
            r#""fuse_ahead_ns": 2000000, "fuse_readahead_bytes": 1048576"#,
        ),
    )
    .unwrap();
    let (wide_ms, v) = modeled_ms(&plain, &["--mount"]);
    assert_eq!(v["mount"]["readahead_pages"], 256);
    assert!(
        wide_ms >= plain_ms + 4.0 && wide_ms <= plain_ms + 2.0 * 12.0,
        "{wide_ms} ms against {plain_ms}"
    );

    // A profile with no mount costs (a preset has none), and a time that is not a number.
    assert_clean_failure(
        &ahead(&[
            "replay",
            plain.to_str().unwrap(),
            "--mount",
            "--device",
            "nvme",
        ]),
        2,
        "ahead calibrate --mount",
    );
    std::fs::write(&slow, format!("# program_ns: soon\n{body}")).unwrap();
    assert_clean_failure(&ahead(&["replay", slow.to_str().unwrap()]), 1, "line 1");
    std::fs::remove_dir_all(&dir).ok();
}
