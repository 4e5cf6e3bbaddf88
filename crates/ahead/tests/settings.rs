//! The engine's settings mean the same by every door: the builder's methods, `set` by name,
//! `options` as a mount's `-o` gives them, and the old KiB spellings give a file's policy the
//! same window and request caps; bad settings are one clear error naming the key. (The CLI's
//! flags and `-o`: `ahead-cli`'s `cat` tests; Python's keyword arguments: `test_file.py`.)

use std::path::PathBuf;

use ahead::engine::{Engine, EngineBuilder, SETTINGS};

const BUDGET: u64 = 64 << 20;

fn file() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("settings-tests");
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("f");
    if std::fs::metadata(&p).map(|m| m.len()).ok() != Some(1 << 20) {
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
    }
    p
}

/// The window and request caps a file opened on `builder`'s engine gets.
fn caps(builder: EngineBuilder) -> (u64, u64) {
    let engine = builder.budget(BUDGET).build().unwrap();
    let f = engine.open(file()).unwrap();
    (f.window_max_bytes(), f.request_max_bytes())
}

/// Bytes rounded up to whole pages, as every door promises.
fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(4096) * 4096
}

/// Sizes written as bytes and as text, odd ones included: `window_max(5000)` once gave two
/// pages through the builder and one through the CLI (KiB rounded two ways).
#[test]
fn one_size_gives_one_window_by_every_door() {
    for (window, request) in [
        ("5000", "4097"),
        ("1500", "4k"),
        ("8m", "1m"),
        ("3145729", "12k"),
        ("16m", "8m"),
    ] {
        let w = ahead::units::parse_size(window).unwrap().0;
        let r = ahead::units::parse_size(request).unwrap().0;
        let expected = (pages(w).min(BUDGET / 4), pages(r).min(BUDGET / 4));
        let by_method = caps(Engine::builder().window_max(w).request_max(r));
        let by_name = caps(
            Engine::builder()
                .set("window_max", window)
                .unwrap()
                .set("request_max", request)
                .unwrap(),
        );
        let by_options = caps(
            Engine::builder()
                .options(&format!("window_max={window}, request_max={request}"))
                .unwrap(),
        );
        assert_eq!(by_method, expected, "{window} {request}");
        assert_eq!(by_name, expected, "{window} {request}");
        assert_eq!(by_options, expected, "{window} {request}");
        if w.is_multiple_of(1024) && r.is_multiple_of(1024) {
            let by_kib = caps(Engine::builder().ra_max_kb(w / 1024).io_max_kb(r / 1024));
            assert_eq!(by_kib, expected, "{window} {request} in KiB");
        }
    }
}

#[test]
fn the_budget_and_switches_by_name_are_the_builders() {
    let engine = Engine::builder()
        .options("budget=96m,policy=linux-ondemand,backend=threads,threads=4,leases=off")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(engine.budget_bytes(), 96 << 20);
    let st = engine.stats();
    assert_eq!(st.policy, "linux-ondemand");
    assert_eq!(st.backend, "threads");
}

#[test]
fn bad_settings_are_one_clear_error_naming_the_key() {
    let err = |text: &str| Engine::builder().options(text).expect_err(text);
    let unknown = err("windowmax=4m");
    assert!(unknown.contains("unknown setting 'windowmax'"), "{unknown}");
    for s in SETTINGS {
        assert!(
            unknown.contains(s.name),
            "{unknown} does not list {}",
            s.name
        );
    }
    assert!(err("budget=lots").starts_with("budget: "));
    assert!(err("window_max=100").contains("at least 1k"));
    assert!(err("request_max=1k").contains("at least 4k"));
    assert!(err("policy=psychic").contains("unknown policy"));
    assert!(err("policy=oracle").contains("whole trace"));
    assert!(err("backend=floppy").contains("unknown engine"));
    assert!(err("direct=maybe").starts_with("direct: "));
    assert!(err("threads=0").starts_with("threads: "));
    assert!(err("budget").contains("KEY=VALUE"));
    // A remote store's setting is passed on, to be checked when an object is opened; its value
    // is never shown.
    let b = Engine::builder()
        .set("remote.secret_access_key", "hunter2")
        .unwrap();
    assert!(!format!("{b:?}").contains("hunter2"));
}

/// `device=` starts every device's meter from a model (a preset or a calibrated profile): a
/// file's policy is told that model's figures before anything is measured; a name that is
/// neither is refused.
#[test]
fn a_device_by_name_or_profile_is_what_the_meter_starts_from() {
    use ahead::DeviceModel;
    let told = |builder: EngineBuilder| {
        let engine = builder.budget(BUDGET).build().unwrap();
        let f = engine.open(file()).unwrap();
        (
            f.device_estimate(),
            f.request_max_bytes() / ahead::PAGE_SIZE,
        )
    };
    let (hdd, io_pages) = told(Engine::builder().set("device", "hdd").unwrap());
    assert_eq!(hdd, DeviceModel::HDD.estimate(io_pages));
    let (plain, _) = told(Engine::builder());
    assert_ne!(plain, hdd);
    let profile = file().with_extension("json");
    std::fs::write(
        &profile,
        r#"{"name": "slow disk", "latency_us": 900, "per_request_us": 50, "seek_us": 0,
            "bandwidth_mb_s": 150, "queue_depth": 2, "connection_mb_s": 0}"#,
    )
    .unwrap();
    let (slow, io_pages) = told(
        Engine::builder()
            .set_pair(&format!("device={}", profile.display()))
            .unwrap(),
    );
    let model = DeviceModel::named(profile.to_str().unwrap()).unwrap();
    assert_eq!(slow, model.estimate(io_pages));
    assert!(slow.latency_ns > hdd.latency_ns / 100, "{slow:?}");
    let err = Engine::builder().set("device", "floppy").err().unwrap();
    assert!(err.starts_with("device:"), "{err}");
}
