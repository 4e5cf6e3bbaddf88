//! One module per command; each exports its `cmd_*` function, which `main` calls with the
//! command's flags and which returns the text to print or a [`crate::Failure`].

use crate::*;

mod bench;
mod calibrate;
mod cat;
mod compare;
#[cfg(feature = "mount")]
mod mount;
mod replay;
mod sim;
mod stats;
mod trace;

pub(crate) use bench::*;
pub(crate) use calibrate::*;
pub(crate) use cat::*;
pub(crate) use compare::*;
#[cfg(feature = "mount")]
pub(crate) use mount::*;
pub(crate) use replay::*;
pub(crate) use sim::*;
pub(crate) use stats::*;
pub(crate) use trace::*;

/// The kernel's readahead on `ahead mount`'s files, set once mounted where it can be (see the
/// mount's `fs.rs`); `replay --mount` models what the profile's mount held.
pub(crate) const KERNEL_READAHEAD_BYTES: u32 = 1 << 20;

/// The kernel's readahead on a new FUSE mount: what a mount that could not raise it reads
/// ahead, and what a profile that does not say had.
pub(crate) const FUSE_DEFAULT_READAHEAD_BYTES: u64 = 128 << 10;

/// The largest read FUSE sends the mount: the kernel's `fuse.max_pages_limit` (256 pages),
/// which the `max_pages` fuser asks for at `init` reaches.
pub(crate) const FUSE_REQUEST_BYTES: u64 = 1 << 20;

pub(crate) fn json_text(v: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(v).expect("JSON serializes");
    text.push('\n');
    text
}

/// One row per run, faithful totals.
pub(crate) fn totals_table(runs: &[RunReport]) -> String {
    let rows: Vec<(&str, &ahead::sim::Metrics)> = runs
        .iter()
        .map(|r| (r.policy.as_str(), &r.faithful))
        .collect();
    report::metrics_table(&rows)
}
