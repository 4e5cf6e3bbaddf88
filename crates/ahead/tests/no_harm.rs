//! Readers nobody tuned for (`common/readers.rs`: families with random parameters, each case an
//! `ahead sim` command), adaptive against the kernel's rule: how many cases it is over 1.05x
//! `linux-ondemand` and its worst ratio, per device and reader speed, no more than measured at
//! this commit (a ratchet: a change that makes any of them worse fails here, and one that makes
//! them better lowers the figures below). The bar is no case over 1.05x; the counts
//! below are where that stands (BENCHMARKS.md, issue 44). The full run, 20,000 cases each:
//! `cargo run --release -p ahead --example no_harm`.

#[path = "common/readers.rs"]
mod readers;

use ahead::DeviceModel;
use readers::{case, time_of};

/// Cases per device and reader speed in this test.
const CASES: u64 = 400;
const SEED: u64 = 44;

/// (device, us per page, cases over 1.05x linux-ondemand, worst ratio) at this commit. The
/// worst ratios rose when a jump back from within the window became a return (sqlite3's table
/// scan, 3.6x linux-ondemand on NVMe before): nvme 3.056x to 3.115x, remote 4.217x to 4.515x
/// (a reader in a cache smaller than the link's lead, thrashing either way). Speculation held
/// to 1/16 of the misses' cost (a reader cut short pays for no unpaid bet) put two more disk
/// cases over 1.05x (30 to 32; in the example's 3,000 cases at seed 7, random 9 to 15 and
/// hotset 21 to 30, where speculation now pays for itself more slowly). When the simulator's
/// reader took the engine's rule for a read with holes (a request for every absent stretch of
/// its run at once, not the first stretch alone), no case of the 2,400 became slower under
/// either policy, 23 became faster under adaptive and 10 under the kernel's rule; one of those
/// (a 5-page shuffled reader in a 64-page cache) put adaptive over 1.05x on nvme at 10 us and
/// on remote (11 to 12, 7 to 8).
const MEASURED: [(&str, u64, usize, f64); 6] = [
    ("nvme", 0, 16, 3.115),
    ("nvme", 10, 12, 2.160),
    ("hdd", 0, 32, 3.922),
    ("hdd", 10, 32, 3.903),
    ("remote", 0, 8, 4.515),
    ("remote", 10, 8, 4.492),
];

#[test]
fn adaptive_is_no_further_behind_the_kernels_rule_than_measured() {
    let mut report = Vec::new();
    let mut worse = Vec::new();
    for (device, us, over_bound, worst_bound) in MEASURED {
        let d = DeviceModel::preset(device).unwrap();
        let (mut over, mut worst, mut worst_case) = (0, 0.0f64, String::new());
        for n in 0..CASES {
            let c = case(SEED, n, d, us);
            let r = time_of("adaptive", &c) / time_of("linux-ondemand", &c).max(1e-9);
            over += usize::from(r > 1.05);
            if r > worst {
                worst = r;
                worst_case = c.command();
            }
        }
        report.push(format!("(\"{device}\", {us}, {over}, {worst:.3}),"));
        if over > over_bound || worst > worst_bound + 1e-3 {
            worse.push(format!(
                "{device} {us} us/page: {over} cases over 1.05x (measured {over_bound}), worst {worst:.3}x (measured {worst_bound:.3}x): {worst_case}"
            ));
        }
    }
    assert!(
        worse.is_empty(),
        "{}\nnow: {}",
        worse.join("\n"),
        report.join(" ")
    );
}
