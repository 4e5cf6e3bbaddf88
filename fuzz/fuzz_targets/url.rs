//! Any text, read as an object URL: the URL as shown, or why not; never a panic. What is shown
//! never holds the password the URL gave, and hiding it twice changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let shown = ahead::engine::redact_url(text);
        assert_eq!(ahead::engine::redact_url(&shown), shown);
        if let Ok(ok) = ahead::engine::check_url(text) {
            assert_eq!(ok, shown);
        }
    }
});
