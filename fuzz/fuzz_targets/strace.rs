//! Any bytes, read as an strace log: an error naming a line, or a trace within what the
//! simulator models; never a panic. A small one is simulated, as `ahead replay` would.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = ahead::trace::parse_strace(data) {
        ahead_fuzz::check_and_simulate(trace);
    }
    // The format sniffing in front of both parsers, too.
    let _ = ahead::trace::parse(data);
});
