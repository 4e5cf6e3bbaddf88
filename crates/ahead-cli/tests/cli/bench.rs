//! `ahead bench`: bad input, and contenders side by side with their JSON.

use super::*;

#[test]
fn bench_bad_input_fails_cleanly() {
    let dir = tmpdir("bench-bad");
    let d = dir.to_str().unwrap();
    assert_clean_failure(
        &ahead(&["bench", "--dir", d, "--patterns", "seq-9k"]),
        2,
        "unknown pattern",
    );
    assert_clean_failure(
        &ahead(&["bench", "--dir", d, "--contenders", "ahead:nope"]),
        2,
        "unknown policy",
    );
    assert_clean_failure(
        &ahead(&["bench", "--dir", d, "--contenders", "ahead:oracle"]),
        2,
        "oracle",
    );
    assert_clean_failure(
        &ahead(&["bench", "--dir", d, "--contenders", "dd"]),
        2,
        "unknown contender",
    );
    // The remote bench reads the library's named readers (the local bench's) and its own
    // experiments: an unknown name lists both, before any server is reached.
    let out = ahead(&[
        "bench",
        "--remote",
        "s3://b/k",
        "--patterns",
        "backward-64k",
    ]);
    assert_clean_failure(&out, 2, "unknown remote pattern");
    let said = String::from_utf8_lossy(&out.stderr);
    for name in ahead::readers::READERS
        .iter()
        .map(|r| r.name)
        .chain(["parquet"])
    {
        assert!(said.contains(name), "{name} missing from: {said}");
    }
    assert_clean_failure(&ahead(&["bench", "--dir", d, "--size", "0"]), 2, "--size");
    assert_clean_failure(&ahead(&["bench", "--dir", d, "--size", "1E"]), 2, "--size");
    assert_clean_failure(
        &ahead(&["bench", "--dir", d, "--repeat", "0"]),
        2,
        "--repeat",
    );
    assert_clean_failure(
        &ahead(&["bench", "--dir", "/nonexistent-dir"]),
        1,
        "not a directory",
    );
    if Path::new("/dev/shm").is_dir() {
        assert_clean_failure(&ahead(&["bench", "--dir", "/dev/shm"]), 1, "tmpfs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small real run: the JSON has the documented shape, every contender ran on the pattern,
/// and the ratios are computed against the kernel's run.
#[test]
fn bench_runs_contenders_side_by_side_and_writes_json() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-test");
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("out.json");
    let svg_path = dir.join("out.svg");
    let out = ahead(&[
        "bench",
        "--dir",
        dir.to_str().unwrap(),
        "--size",
        "64m",
        "--patterns",
        "seq-1m,random-4k",
        "--contenders",
        "kernel,direct,ahead:adaptive,device",
        "--repeat",
        "2",
        "--cap-s",
        "0.3",
        "--json",
        json_path.to_str().unwrap(),
        "--plot",
        svg_path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("seq-1m") && table.contains("ahead:adaptive"),
        "{table}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
    let results = v["results"].as_array().unwrap();
    // The device's sequential sweep: 1, 4 and 8 MiB (and max_sectors_kb) x QD 8, 16, 32, each
    // run every repeat; the ceiling is the best median, named.
    let sweep: Vec<&serde_json::Value> = results
        .iter()
        .filter(|r| r["pattern"] == "device-seq")
        .collect();
    assert!(sweep.len() >= 9, "{sweep:?}");
    for qd in [8, 16, 32] {
        for mib in [1, 4, 8] {
            let name = format!("{mib} MiB x QD{qd}");
            let r = sweep
                .iter()
                .find(|r| r["contender"] == name.as_str())
                .unwrap_or_else(|| panic!("{name} missing from the sweep"));
            assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        }
    }
    let best = sweep
        .iter()
        .map(|r| r["mb_per_s"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let ceiling = &v["device_ceilings"]["sequential"];
    assert_eq!(ceiling[1].as_f64().unwrap(), best, "{ceiling}");
    let seq = results
        .iter()
        .find(|r| r["pattern"] == "seq-1m" && r["contender"] == "kernel")
        .unwrap();
    // Its ceiling is the sweep's best, or the best configuration measured again beside the
    // pattern's contenders (the "device" row: before and after them, each repeat) at its
    // fastest, when that ran faster: the disk drifts.
    let beside = results
        .iter()
        .find(|r| r["pattern"] == "seq-1m" && r["contender"] == "device")
        .expect("the sweep's best measured beside seq-1m");
    let beside_runs = beside["runs"].as_array().unwrap();
    assert_eq!(beside_runs.len(), 4);
    let beside_best = beside_runs
        .iter()
        .map(|r| r["mb_per_s"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let row_ceiling = seq["device_ceiling_mb_per_s"].as_f64().unwrap();
    assert_eq!(row_ceiling, best.max(beside_best), "{seq}");
    let ratio = seq["vs_device"].as_f64().unwrap();
    assert!((ratio - seq["mb_per_s"].as_f64().unwrap() / row_ceiling).abs() < 1e-9);
    assert!(seq["device_ceiling"]
        .as_str()
        .unwrap()
        .starts_with("sequential"));
    // random-4k is held to its random ceiling, measured beside its contenders.
    let random = results
        .iter()
        .find(|r| r["pattern"] == "random-4k" && r["contender"] == "device")
        .expect("random ceiling");
    assert_eq!(random["runs"].as_array().unwrap().len(), 2);
    let r4k = results
        .iter()
        .find(|r| r["pattern"] == "random-4k" && r["contender"] == "kernel")
        .unwrap();
    // ... for the bytes each row read: the sooner of its distinct reads at that ceiling and
    // the whole file at the sequential one, so no contender that speculates through the file
    // or serves repeats from a cache passes it.
    let bound = r4k["device_ceiling_mb_per_s"].as_f64().unwrap();
    assert!(bound >= random["mb_per_s"].as_f64().unwrap(), "{r4k}");
    assert!(r4k["device_ceiling"]
        .as_str()
        .unwrap()
        .contains("random 4 KiB x QD32"));
    for pattern in ["seq-1m", "random-4k"] {
        for contender in ["kernel", "direct", "ahead:adaptive"] {
            let r = results
                .iter()
                .find(|r| r["pattern"] == pattern && r["contender"] == contender)
                .unwrap_or_else(|| panic!("{pattern} {contender} missing"));
            assert_eq!(r["runs"].as_array().unwrap().len(), 2);
            for key in ["mb_per_s", "iops", "cpu_s_per_gib", "p50_us", "p99_us"] {
                assert!(r[key].as_f64().unwrap() >= 0.0, "{key}");
            }
            assert!(
                r["mb_per_s"].as_f64().unwrap() > 0.0,
                "{pattern} {contender}"
            );
        }
        let kernel = results
            .iter()
            .find(|r| r["pattern"] == pattern && r["contender"] == "kernel")
            .unwrap();
        assert!((kernel["vs_kernel"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    }
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("seq-1m"),
        "not the picture"
    );
}

/// The remote bench's ceiling as it reaches a real gateway and a real web server: raw GETs
/// (S3's presigned), every point of the sweep counting the object's bytes exactly, in as many
/// GETs as its size asks for.
#[test]
fn the_remote_ceiling_is_raw_gets_that_bring_every_byte() {
    let Some(gw) = servers::need(servers::versitygw(&["bench"])) else {
        return;
    };
    let Some(web) = servers::need(servers::lighttpd()) else {
        return;
    };
    let size: u64 = (3 << 20) + 5;
    let bytes: Vec<u8> = (0..size as u32).map(|i| (i * 7) as u8).collect();
    std::fs::create_dir_all(gw.dir.0.join("root/bench")).unwrap();
    std::fs::write(gw.dir.0.join("root/bench/object.bin"), &bytes).unwrap();
    std::fs::write(web.dir.0.join("docs/object.bin"), &bytes).unwrap();
    let dir = tmpdir("bench-remote-ceiling");
    for url in [
        "s3://bench/object.bin".to_string(),
        format!("http://{}/object.bin", web.addr),
    ] {
        let json = dir.join("remote.json");
        let out = Command::new(env!("CARGO_BIN_EXE_ahead"))
            .args(["bench", "--remote", &url, "--contenders", "device"])
            .args(["--patterns", "seq-1m", "--repeat", "1", "--json"])
            .arg(&json)
            .envs(servers::s3_env(&gw.url()))
            .output()
            .expect("ahead runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{url}: {stderr}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let run = &v["patterns"][0]["contenders"][0]["runs"][0];
        let sweep = run["sweep"].as_array().expect("the sweep's points");
        assert!(sweep.len() >= 3, "{run}");
        for point in sweep {
            let config = point["ceiling"].as_str().unwrap();
            assert!(config.ends_with("raw GETs"), "{url}: {config}");
            assert_eq!(point["bytes"], size, "{url}: {config}");
            // "N MiB GETs x P": the object in GETs of N MiB.
            let get_mib: u64 = config.split(' ').next().unwrap().parse().unwrap();
            assert_eq!(
                point["requests"],
                size.div_ceil(get_mib << 20),
                "{url}: {config}"
            );
        }
    }
}
