//! What the trace targets check of every trace a parser accepts.

use ahead::units::MAX_MODELLED_BYTES;
use ahead::workload::Event;

/// Every read ends within what the simulator models; a trace that reads few pages is simulated
/// (simulating takes time in proportion to the pages read).
pub fn check_and_simulate(trace: ahead::trace::Trace) {
    let mut pages = 0u64;
    for e in &trace.events {
        if let Event::Read { offset, len, .. } = e {
            assert!(offset.0.checked_add(len.0).is_some_and(|end| end <= MAX_MODELLED_BYTES));
            pages += len.0.div_ceil(4096);
        }
    }
    // Hints may ask for whole files: their sizes bound what a simulation reads.
    let bytes: u64 = trace.files.iter().map(|f| f.size.0).sum();
    if trace.reads() <= 2000 && pages <= 100_000 && bytes <= 256 << 20 {
        let config = ahead::sim::SimConfig {
            cache_pages: 256,
            ..Default::default()
        };
        let _ = ahead::sim::run("adaptive", config, trace.into_workload());
    }
}
