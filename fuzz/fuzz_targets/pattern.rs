//! Any text, read as a pattern spec (and as a size): an error, or a pattern; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = std::str::from_utf8(data) {
        let _ = ahead::pattern::Pattern::parse(spec);
        let _ = ahead::units::parse_size(spec);
    }
});
