//! Opening and closing: 10,000 opens and closes leave no descriptor open and grow no memory.
//! A test binary of its own, so no other test's files or memory are counted.

mod common;
use common::rss_bytes;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ahead::engine::{BackendChoice, Engine};

fn write_file(name: &str, size: usize, seed: u8) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("open-close");
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, vec![seed; size]).unwrap();
    p
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn ten_thousand_opens_and_closes_leak_nothing() {
    let paths: Vec<PathBuf> = (0..100)
        .map(|i| write_file(&format!("cycle-{i}"), 64 << 10, i as u8))
        .collect();
    let e = Engine::builder()
        .backend(BackendChoice::AUTO)
        .budget(4 << 20)
        .build()
        .unwrap();
    let mut buf = vec![0u8; 16 << 10];
    let mut cycle = |n: usize| {
        for i in 0..n {
            let f = e.open(&paths[i % paths.len()]).unwrap();
            f.read_at(&mut buf, ((i * 4096) % (48 << 10)) as u64)
                .unwrap();
        }
    };
    cycle(1000); // warm: every table and slot in use once
    let (fds, rss) = (open_fds(), rss_bytes());
    cycle(10_000);
    assert_eq!(open_fds(), fds, "descriptors leaked");
    let grown = rss_bytes().saturating_sub(rss);
    assert!(grown < 4 << 20, "resident memory grew by {grown} bytes");
    let until = Instant::now() + Duration::from_secs(5);
    while e.stats().in_flight_pages > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(e.stats().in_flight_pages, 0);
    assert!(e.stats().resident_pages <= (4 << 20) / 4096);
}
