//! The `ahead` command as a user meets it: outputs, JSON shapes, bad input, real traces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod bench;
mod calibrate;
mod cat;
#[cfg(feature = "mount")]
mod mount;
mod replay;
#[path = "../../../ahead/tests/common/servers.rs"]
mod servers;
mod sim;

fn ahead(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ahead"))
        .args(args)
        .output()
        .expect("ahead runs")
}

fn tmpdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ahead-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The command failed cleanly: non-zero exit, one `error:` line, no panic.
fn assert_clean_failure(out: &Output, code: i32, mentions: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains("error"), "stderr: {stderr}");
    assert!(
        stderr.contains(mentions),
        "expected '{mentions}' in: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}

#[test]
fn bad_input_fails_cleanly() {
    assert_clean_failure(
        &ahead(&["sim", "--pattern", "seq", "--policy", "nope"]),
        2,
        "unknown policy",
    );
    assert_clean_failure(
        &ahead(&["sim", "--pattern", "zigzag"]),
        2,
        "unknown pattern",
    );
    assert_clean_failure(
        &ahead(&["sim", "--pattern", "seq:size=12q"]),
        2,
        "unknown size unit",
    );
    assert_clean_failure(&ahead(&["sim", "--pattern", "seq:bs"]), 2, "KEY=VALUE");
    assert_clean_failure(
        &ahead(&["sim", "--pattern", "seq", "--device", "floppy"]),
        2,
        "unknown device",
    );
    assert_clean_failure(
        &ahead(&["replay", "/nonexistent/trace.log"]),
        1,
        "cannot open trace",
    );

    let dir = tmpdir("bad");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let empty = write("empty.log", "");
    assert_clean_failure(&ahead(&["replay", &empty]), 1, "empty");
    let no_reads = write(
        "noreads.log",
        "1 openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\n1 close(3</a>) = 0\n",
    );
    assert_clean_failure(&ahead(&["replay", &no_reads]), 1, "no reads");
    let bad_line = write(
        "bad.log",
        "1 openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\n1 read(3</a>, \"\"..., 4096) = 4096\n1 read(3</a>, oops\n1 close(3</a>) = 0\n",
    );
    assert_clean_failure(&ahead(&["replay", &bad_line]), 1, "line 3");
    // The same line last: a log cut short, replayed with a note naming the line.
    let cut = write(
        "cut.log",
        "1 openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\n1 read(3</a>, \"\"..., 4096) = 4096\n1 read(3</a>, oops\n",
    );
    let out = ahead(&["replay", &cut]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: line 3"));
    let bad_csv = write("bad.csv", "file,offset,len\n/a,0,4096\n/a,4096,many\n");
    assert_clean_failure(&ahead(&["replay", &bad_csv]), 1, "line 3");
    std::fs::remove_dir_all(&dir).ok();
}

/// Sizes take one syntax everywhere (64m, 512k); the old spellings in fixed units are aliases
/// that give the same run; giving both is refused.
#[test]
fn sizes_take_one_syntax_and_the_old_spellings_still_work() {
    let new = ahead(&[
        "sim",
        "--pattern",
        "seq:size=16m",
        "--cache",
        "64m",
        "--ra-max",
        "8m",
        "--io-max",
        "1m",
        "--fixed",
        "256k",
        "--json",
    ]);
    let old = ahead(&[
        "sim",
        "--pattern",
        "seq:size=16m",
        "--cache-mb",
        "64",
        "--ra-max-kb",
        "8192",
        "--io-max-kb",
        "1024",
        "--fixed-kb",
        "256",
        "--json",
    ]);
    assert!(new.status.success(), "{new:?}");
    assert_eq!(new.stdout, old.stdout);
    let other = ahead(&[
        "sim",
        "--pattern",
        "seq:size=16m",
        "--cache",
        "32m",
        "--json",
    ]);
    assert_ne!(new.stdout, other.stdout, "--cache changes nothing");
    let both = ahead(&[
        "sim",
        "--pattern",
        "seq",
        "--cache",
        "64m",
        "--cache-mb",
        "64",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let bad = ahead(&["sim", "--pattern", "seq", "--cache", "64q"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--cache"),
        "{bad:?}"
    );
}

/// The registry drives the help and the lookups: every registered policy, pattern and device
/// is named in `sim --help`, and every policy but the oracle runs by its name in `sim` and `cat`.
#[test]
fn the_registries_drive_the_help_and_the_lookups() {
    let help = String::from_utf8(ahead(&["sim", "--help"]).stdout).unwrap();
    for p in ahead::policy::POLICIES {
        assert!(help.contains(p.name), "{} missing from sim --help", p.name);
        let out = ahead(&["sim", "--pattern", "seq:size=1m", "--policy", p.name]);
        assert!(out.status.success(), "{}: {out:?}", p.name);
    }
    for p in ahead::pattern::PATTERN_NAMES {
        assert!(help.contains(p), "{p} missing from sim --help");
    }
    for d in ahead::sim::DeviceModel::PRESETS {
        assert!(help.contains(d.name), "{} missing from sim --help", d.name);
    }
    let dir = tmpdir("registry-cat");
    let f = dir.join("f");
    std::fs::write(&f, vec![7u8; 100_000]).unwrap();
    let cat_help = String::from_utf8(ahead(&["cat", "--help"]).stdout).unwrap();
    for b in ahead::engine::backend_names() {
        assert!(cat_help.contains(b), "{b} missing from cat --help");
        let out = ahead(&["cat", "--engine", b, "--stats", f.to_str().unwrap()]);
        assert!(
            out.status.success() && out.stdout.len() == 100_000,
            "{b}: {out:?}"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("backend {b}")),
            "{b}: {out:?}"
        );
    }
    for p in ahead::policy::POLICIES.iter().filter(|p| p.make.is_some()) {
        let out = ahead(&["cat", "--policy", p.name, f.to_str().unwrap()]);
        assert!(
            out.status.success() && out.stdout.len() == 100_000,
            "{}: {out:?}",
            p.name
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every command, fed what a user can get wrong: missing, unreadable-kind and binary inputs,
/// absurd sizes. Each answers with an `error:` line that says what to do, exit 2 for a usage
/// error and 1 for a runtime one, never a panic, and never blocks (a FIFO is refused, not
/// opened for reading).
#[test]
fn every_command_meets_bad_input_with_one_clear_line() {
    let dir = tmpdir("every-bad");
    let p = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let fifo = p("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::write(p("empty"), b"").unwrap();
    let binary: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(p("binary"), &binary).unwrap();
    std::fs::write(p("file"), b"a small file\n").unwrap();
    let missing = p("missing");
    let (empty, binary_p, file, tlog) = (p("empty"), p("binary"), p("file"), p("t.log"));
    let d = dir.to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        // sim
        (vec!["sim", "--pattern", "seq:size=1E"], 2, "size"),
        (vec!["sim", "--pattern", "seq:bs=0"], 2, "bs"),
        (
            vec!["sim", "--pattern", "seq", "--cache-mb", "0"],
            2,
            "cache",
        ),
        (vec!["sim", "--pattern", ""], 2, "pattern"),
        // replay: missing, directory, FIFO, device, empty, binary
        (vec!["replay", &missing], 1, "cannot open trace"),
        (vec!["replay", &d], 1, "directory"),
        (vec!["replay", &fifo], 1, "not a regular file"),
        (vec!["replay", "/dev/null"], 1, "not a regular file"),
        (vec!["replay", &empty], 1, "empty"),
        (vec!["replay", &binary_p], 1, "line"),
        (vec!["replay", &file, "--cache-mb", "0"], 2, "cache"),
        // cat: missing (a FIFO, a device and procfs are read as cat reads them: see
        // `cat_reads_what_has_no_size_plainly_as_cat_does`)
        (vec!["cat", &missing], 1, "No such file"),
        (vec!["cat", &file, "--budget", "1E"], 2, "budget"),
        // trace: a command that is not there, an output folder that is not there
        (
            vec!["trace", "-o", &tlog, "--", "/nonexistent/cmd"],
            1,
            "nonexistent",
        ),
        (
            vec!["trace", "-o", "/nonexistent/dir/t.log", "--", "true"],
            1,
            "/nonexistent/dir",
        ),
        // compare: a file, an empty folder
        (vec!["compare", &file], 1, "trace --kernel"),
        (vec!["compare", &d], 1, "trace --kernel"),
        // bench: FIFO, device, directory, empty or missing file, absurd budget
        (
            vec!["bench", "--file", &fifo, "--quick"],
            1,
            "not a regular file",
        ),
        (
            vec!["bench", "--file", "/dev/null", "--quick"],
            1,
            "not a regular file",
        ),
        (
            vec!["bench", "--file", &d, "--quick"],
            1,
            "not a regular file",
        ),
        (vec!["bench", "--file", &empty, "--quick"], 1, "empty"),
        (
            vec!["bench", "--file", &missing, "--quick"],
            1,
            "No such file",
        ),
        (vec!["bench", "--dir", &d, "--budget", "1E"], 2, "budget"),
    ];
    let mut wrong = Vec::new();
    for (args, code, mentions) in cases {
        let out = ahead(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let ok = out.status.code() == Some(code)
            && stderr.starts_with("error")
            && stderr.contains(mentions)
            && !stderr.contains("panicked")
            && !stderr.contains("RUST_BACKTRACE")
            && (code != 1 || stderr.trim_end().lines().count() == 1);
        if !ok {
            wrong.push(format!(
                "{args:?}: exit {:?} (want {code}, mentioning '{mentions}'): {stderr}",
                out.status.code()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}
