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
