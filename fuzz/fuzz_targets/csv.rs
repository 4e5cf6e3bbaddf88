//! Any bytes, read as a CSV trace: an error naming a line, or a trace; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = ahead::trace::parse_csv(data) {
        let _ = trace.reads();
        let _ = trace.into_workload();
    }
});
