//! Files that change while the engine reads them: same-size rewrites in place, truncations
//! and growth, by a writer of their own, at random moments, while 1-8 threads read at random
//! through every backend and several policies, with and without read leases. Every page a
//! read returns is of a version that was current while the read ran (`common/versioned.rs`):
//! none older than the newest written before the read began, no byte of no version. Once the
//! writer is done, the whole file reads as its last version.

mod common;
#[path = "common/versioned.rs"]
mod versioned;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ahead::engine::{BackendChoice, Engine};
use ahead::pattern::SplitMix64;
use proptest::prelude::*;
use versioned::Versioned;

const BACKENDS: [BackendChoice; 3] = [
    BackendChoice::URING,
    BackendChoice::THREADS,
    BackendChoice::SYNC,
];

/// A read of `len` bytes at `offset`, checked against the versions current while it ran.
fn checked_read(file: &ahead::engine::File, v: &Versioned, offset: u64, len: usize) {
    let mut got = vec![0xA5u8; len];
    let lo = v.before_read();
    let n = file.read_at(&mut got, offset).unwrap();
    let hi = v.after_read();
    if let Err(e) = v.check(offset, len, &got[..n], lo, hi, false) {
        panic!("{}: read of {len} at {offset}: {e}", v.path.display());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn every_page_read_is_of_a_version_current_during_the_read(
        size in prop_oneof![1u64..5000, 5000u64..3_000_000],
        backend in 0usize..3,
        policy in prop::sample::select(vec!["adaptive", "linux-ondemand", "none", "fixed"]),
        leases in any::<bool>(),
        threads in 1usize..=8,
        changes in 1usize..=6,
        seed in any::<u64>(),
    ) {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("changes");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("prop-{seed:x}"));
        let v = Arc::new(Versioned::create(path.clone(), seed, size));
        let engine = Engine::builder()
            .backend(BACKENDS[backend])
            .policy(policy)
            .budget(2 << 20)
            .leases(leases)
            .build()
            .unwrap();
        let file = Arc::new(engine.open(&path).unwrap());
        let writing = AtomicBool::new(true);
        std::thread::scope(|s| {
            // The writer: `changes` new versions, each of the same size, smaller or larger.
            s.spawn(|| {
                let mut rng = SplitMix64(seed ^ 0xC4A7);
                let mut now = size;
                for _ in 0..changes {
                    std::thread::sleep(Duration::from_micros(rng.below(20_000)));
                    now = match rng.below(4) {
                        0 | 1 => now,
                        2 => rng.below(now + 1),
                        _ => now + rng.below(1 << 20) + 1,
                    };
                    v.change(now);
                }
                writing.store(false, Ordering::Release);
            });
            for t in 0..threads {
                let (file, v, writing) = (file.clone(), v.clone(), &writing);
                s.spawn(move || {
                    let mut rng = SplitMix64(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let mut offset = rng.below(size + 10_000);
                    let mut reads = 0;
                    // Until the writer is done, and at least 40 reads.
                    while reads < 40 || writing.load(Ordering::Acquire) {
                        let len = match rng.below(4) {
                            0 => rng.below(300_000) as usize + 1,
                            1 => 4096,
                            2 => rng.below(5000) as usize + 1,
                            _ => 1,
                        };
                        checked_read(&file, &v, offset, len);
                        offset = if rng.below(4) == 0 {
                            rng.below(size * 2 + 10_000)
                        } else {
                            offset + len as u64
                        };
                        reads += 1;
                    }
                });
            }
        });
        // The writer is done: the whole file is its last version.
        let last = v.before_read();
        let mut all = vec![0u8; (4 << 20) + size as usize];
        let mut done = 0;
        loop {
            let n = file.read_at(&mut all[done..], done as u64).unwrap();
            if n == 0 {
                break;
            }
            done += n;
        }
        prop_assert!(v.check(0, all.len(), &all[..done], last, last, false).is_ok(),
            "after the last change: {:?}", v.check(0, all.len(), &all[..done], last, last, false));
        let _ = std::fs::remove_file(&path);
    }
}
