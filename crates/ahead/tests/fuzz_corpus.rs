//! The fuzzers' committed corpus (fuzz/corpus), run through the same calls as the fuzz
//! targets on every `cargo test`: every input gives a result or an error, never a panic. The
//! coverage-guided runs themselves are `cargo +nightly fuzz run <target>` (see fuzz/).

use std::path::Path;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.display().to_string(), std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{}: no corpus", dir.display());
    v
}

#[test]
fn the_strace_corpus_parses_or_errs() {
    for (name, data) in inputs("strace") {
        if let Ok(t) = ahead::trace::parse_strace(&data[..]) {
            let _ = t.into_workload();
        }
        match ahead::trace::parse(&data[..]) {
            Ok(t) => assert!(t.reads() > 0, "{name}"),
            Err(e) => assert!(!e.to_string().is_empty(), "{name}"),
        }
    }
}

#[test]
fn the_csv_corpus_parses_or_errs() {
    for (name, data) in inputs("csv") {
        match ahead::trace::parse_csv(&data[..]) {
            Ok(t) => drop(t.into_workload()),
            Err(e) => assert!(!e.to_string().is_empty(), "{name}"),
        }
    }
}

#[test]
fn the_pattern_corpus_parses_or_errs() {
    for (name, data) in inputs("pattern") {
        let spec = String::from_utf8_lossy(&data);
        if let Err(e) = ahead::pattern::Pattern::parse(&spec) {
            assert!(!e.is_empty(), "{name}");
        }
        let _ = ahead::units::parse_size(&spec);
    }
}

#[test]
fn the_url_corpus_parses_or_errs() {
    for (name, data) in inputs("url") {
        let text = String::from_utf8_lossy(&data);
        let shown = ahead::engine::redact_url(&text);
        assert_eq!(ahead::engine::redact_url(&shown), shown, "{name}");
        if let Ok(ok) = ahead::engine::check_url(&text) {
            assert_eq!(ok, shown, "{name}");
        }
    }
}

/// Every parser of outside input, fed inputs shaped like its own (names, keys and numbers up to
/// and past u64, the ways strace prints a line, credentials in URLs): a result or an error,
/// within a second; what is accepted is within what the simulator models, and small workloads
/// simulate (in the same second). Seeded by proptest; a failure prints the input.
mod parsers {
    use std::time::{Duration, Instant};

    use ahead::units::{MAX_MODELLED_BYTES, MAX_PATTERN_READS};
    use ahead::workload::Event;
    use proptest::prelude::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            (0u64..100_000).prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (0u32..64).prop_map(|b| (1u128 << b).to_string()),
            (0u32..64).prop_map(|b| ((1u128 << b) - 1).to_string()),
            Just("18446744073709551616".to_string()),
            Just("-1".to_string()),
            Just("".to_string()),
        ]
    }

    fn size() -> impl Strategy<Value = String> {
        (
            number(),
            prop::sample::select(vec!["", "k", "m", "g", "p", "KiB", "e", "b"]),
        )
            .prop_map(|(n, u)| format!("{n}{u}"))
    }

    /// A simulation of `workload` (small ones only), within a second with its parse.
    fn simulate(workload: ahead::Workload, started: Instant) {
        let config = ahead::sim::SimConfig {
            cache_pages: 256,
            ..Default::default()
        };
        let _ = ahead::sim::run("adaptive", config, workload);
        assert!(started.elapsed() < SECOND, "{:?}", started.elapsed());
    }

    /// Every read within what the simulator models; whether the trace is small enough to
    /// simulate in a second (its pages: simulating takes time in proportion to them).
    fn trace_within_limits(trace: &ahead::trace::Trace) -> bool {
        let mut pages = 0u64;
        for e in &trace.events {
            if let Event::Read { offset, len, .. } = e {
                assert!(offset
                    .0
                    .checked_add(len.0)
                    .is_some_and(|e| e <= MAX_MODELLED_BYTES));
                pages += len.0.div_ceil(4096);
            }
        }
        // Hints may ask for whole files: their sizes bound what a simulation reads.
        let bytes: u64 = trace.files.iter().map(|f| f.size.0).sum();
        pages <= 100_000 && bytes <= 256 << 20
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn sizes(text in size()) {
            let started = Instant::now();
            let _ = ahead::units::parse_size(&text);
            prop_assert!(started.elapsed() < SECOND);
        }

        #[test]
        fn patterns(
            name in prop::sample::select(ahead::pattern::PATTERN_NAMES.to_vec()),
            keys in prop::collection::vec(
                (prop::sample::select(vec!["size", "bs", "count", "streams", "ways", "group", "files",
                    "run", "skip", "stride", "read", "seek", "repeat", "first", "seed"]), size()), 0..4),
        ) {
            let spec = format!("{name}:{}", keys.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","));
            let started = Instant::now();
            if let Ok(p) = ahead::pattern::Pattern::parse(&spec) {
                prop_assert!(p.reads() <= MAX_PATTERN_READS, "{spec}");
                if p.reads() <= 500 && p.pages_read() <= 100_000 {
                    simulate(p.workload(), started);
                }
            }
            prop_assert!(started.elapsed() < SECOND, "{spec}");
        }

        #[test]
        fn csv_rows(rows in prop::collection::vec((number(), number(), number()), 1..6)) {
            let mut text = String::from("file,offset,len,size\n");
            for (o, l, s) in &rows {
                text += &format!("/f,{o},{l},{s}\n");
            }
            let started = Instant::now();
            if let Ok(t) = ahead::trace::parse(text.as_bytes()) {
                if trace_within_limits(&t) {
                    simulate(t.into_workload(), started);
                }
            }
            prop_assert!(started.elapsed() < SECOND, "{text}");
        }

        #[test]
        fn strace_lines(
            lines in prop::collection::vec(
                (prop::sample::select(vec![
                    "read(3, \"\"..., {a}) = {b}",
                    "pread64(3</f>, \"\"..., {a}, {b}) = {a}",
                    "preadv(3, [{{iov_base=\"\", iov_len={a}}}], 1, {b}) = {a}",
                    "lseek(3, {a}, SEEK_SET) = {b}",
                    "dup2(3, {a}) = {a}",
                    "fcntl(3, F_DUPFD, {a}) = {b}",
                    "fadvise64(3, {a}, {b}, POSIX_FADV_WILLNEED) = 0",
                    "readahead(3, {a}, {b}) = 0",
                    "close({a}) = 0",
                    "openat(AT_FDCWD, \"../f\", O_RDONLY) = {a}",
                    "chdir(\"{a}\") = 0",
                ]),
                number(), number(),
                prop::sample::select(vec!["", "12 ", "[pid 7] ", "10:00:00.123456 ", "12 1.5 "]),
                prop::sample::select(vec!["", " <0.000012>"]),
                any::<bool>()),
                1..8),
        ) {
            let mut text = String::from("openat(AT_FDCWD, \"/f\", O_RDONLY) = 3\n");
            for (template, a, b, prefix, suffix, cut) in &lines {
                let line = format!("{prefix}{}{suffix}", template.replace("{a}", a).replace("{b}", b));
                // Some lines cut short, as a log still being written ends.
                let line = if *cut { &line[..line.len() / 2] } else { &line[..] };
                text += line;
                text += "\n";
            }
            let started = Instant::now();
            if let Ok(t) = ahead::trace::parse(text.as_bytes()) {
                if trace_within_limits(&t) {
                    simulate(t.into_workload(), started);
                }
            }
            prop_assert!(started.elapsed() < SECOND, "{text}");
        }

        #[test]
        fn urls(
            scheme in prop::sample::select(vec!["s3://", "http://", "https://", "ftp://", ""]),
            user in "[a-z]{0,5}",
            password in "PW[A-Z0-9]{6,10}",
            with_credentials in any::<bool>(),
            host in "[a-z0-9.:\\[\\]]{0,12}",
            path in "(/[a-z0-9._%@-]{0,8}){0,3}",
        ) {
            let userinfo = if with_credentials { format!("{user}:{password}@") } else { String::new() };
            let text = format!("{scheme}{userinfo}{host}{path}");
            let started = Instant::now();
            let shown = ahead::engine::redact_url(&text);
            let checked = ahead::engine::check_url(&text);
            prop_assert!(started.elapsed() < SECOND);
            if with_credentials && !scheme.is_empty() {
                prop_assert!(!shown.contains(&password), "{text} shown as {shown}");
                if let Err(why) = &checked {
                    prop_assert!(!why.contains(&password), "{why}");
                }
            }
            if let Ok(ok) = checked {
                prop_assert_eq!(ok, shown);
            }
        }
    }
}
