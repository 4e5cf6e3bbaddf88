//! Any bytes, read as an strace log: an error naming a line, or a trace; never a panic. A
//! trace is turned into a workload, as `ahead replay` does.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = ahead::trace::parse_strace(data) {
        let _ = trace.reads();
        let _ = trace.into_workload();
    }
    // The format sniffing in front of both parsers, too.
    let _ = ahead::trace::parse(data);
});
