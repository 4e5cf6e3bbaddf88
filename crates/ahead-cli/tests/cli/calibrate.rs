//! `ahead calibrate`: a profile measured on this machine's disk, taken by `sim`, `replay` and
//! `bench --device`; bad targets and bad profiles are clear errors.

use super::*;

#[test]
fn a_calibrated_disk_is_a_profile_the_simulator_takes() {
    let dir = tmpdir("calibrate");
    let file = dir.join("probe.dat");
    std::fs::write(&file, vec![7u8; 256 << 20]).unwrap();
    let profile = dir.join("disk.json");
    let out = ahead(&[
        "calibrate",
        file.to_str().unwrap(),
        "-o",
        profile.to_str().unwrap(),
        "--probe-seconds",
        "0.2",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("profile written to"), "{stdout}");
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    for key in ["latency_us", "bandwidth_mb_s"] {
        assert!(p[key].as_f64().unwrap() > 0.0, "{key}: {p}");
    }
    assert!(p["queue_depth"].as_u64().unwrap() >= 1, "{p}");
    let probes = p["calibrated"]["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 15, "{p}");
    for probe in probes {
        assert!(probe["mb_per_s"].as_f64().unwrap() > 0.0, "{probe}");
        assert!(
            probe["predicted_mb_per_s"].as_f64().unwrap() > 0.0,
            "{probe}"
        );
    }
    assert!(p["host"]["copy_ns_per_page"].as_f64().unwrap() > 0.0, "{p}");

    // The simulator runs on it, and says so.
    let sim = ahead(&[
        "sim",
        "--pattern",
        "seq:size=64m,bs=16k",
        "--policy",
        "adaptive",
        "--device",
        profile.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&sim.stdout);
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    assert!(text.contains("calibrated"), "{text}");

    // A profile with a bandwidth no device has, and one that is not JSON: clear errors.
    let bad = dir.join("bad.json");
    let mut zero = p.clone();
    zero["bandwidth_mb_s"] = serde_json::json!(0.0);
    std::fs::write(&bad, zero.to_string()).unwrap();
    assert_clean_failure(
        &ahead(&["sim", "--pattern", "seq", "--device", bad.to_str().unwrap()]),
        2,
        "bandwidth_mb_s must be more than 0",
    );
    std::fs::write(&bad, "latency 5").unwrap();
    assert_clean_failure(
        &ahead(&["sim", "--pattern", "seq", "--device", bad.to_str().unwrap()]),
        2,
        "not a device profile",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_too_small_to_measure_is_a_clear_error() {
    let dir = tmpdir("calibrate-small");
    let file = dir.join("small.dat");
    std::fs::write(&file, vec![1u8; 1 << 20]).unwrap();
    assert_clean_failure(
        &ahead(&["calibrate", file.to_str().unwrap()]),
        2,
        "too small to measure",
    );
    assert_clean_failure(
        &ahead(&["calibrate", "/nonexistent/disk"]),
        2,
        "/nonexistent/disk",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--mount` mounts the file's directory, measures what a FUSE read costs a program (one it
/// waits for, one of the kernel's readahead), keeps both in the profile, and unmounts.
#[cfg(feature = "mount")]
#[test]
fn a_mount_is_calibrated_and_left_unmounted() {
    let Some(()) = super::mount::fuse() else {
        return;
    };
    let dir = tmpdir("calibrate-mount");
    let file = dir.join("probe.dat");
    std::fs::write(&file, vec![5u8; 256 << 20]).unwrap();
    let profile = dir.join("disk.json");
    let out = ahead(&[
        "calibrate",
        file.to_str().unwrap(),
        "--mount",
        "-o",
        profile.to_str().unwrap(),
        "--probe-seconds",
        "0.1",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("through ahead mount"), "{stdout}");
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    let wait = p["host"]["fuse_wait_ns"].as_f64().unwrap();
    let ahead_ns = p["host"]["fuse_ahead_ns"].as_f64().unwrap();
    // A round trip through the kernel and back costs something, and less than a second.
    assert!(wait > 0.0 && wait < 1e9, "{p}");
    assert!(ahead_ns > 0.0 && ahead_ns < 1e9, "{p}");
    // The kernel's readahead on the probe's mount, as the mount set it (root can).
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(p["host"]["fuse_readahead_bytes"], 1 << 20, "{p}");
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains("ahead-calibrate-mnt"), "{mounts}");
    let _ = std::fs::remove_dir_all(&dir);
}
