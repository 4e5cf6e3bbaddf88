//! Any text, read as a pattern spec (and as a size): an error, or a pattern within what the
//! simulator models; never a panic. A small one is simulated, as `ahead sim` would.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = std::str::from_utf8(data) {
        let _ = ahead::units::parse_size(spec);
        if let Ok(pattern) = ahead::pattern::Pattern::parse(spec) {
            assert!(pattern.reads() <= ahead::units::MAX_PATTERN_READS);
            // Simulating takes time in proportion to the pages read: small ones only.
            if pattern.reads() <= 2000 && pattern.pages_read() <= 100_000 {
                let config = ahead::sim::SimConfig {
                    cache_pages: 256,
                    ..Default::default()
                };
                let _ = ahead::sim::run("adaptive", config, pattern.workload());
            }
        }
    }
});
