//! Simulator speed: page accesses per second on one core, and the time to replay a 100 MB
//! strace log. Run with `cargo bench -p ahead --bench sim_speed`; results go in BENCHMARKS.md.
//! Each measurement is repeated 5 times; the median and the spread (min-max) are printed.

use std::io::Write;
use std::time::Instant;

use ahead::pattern::Pattern;
use ahead::sim::{self, SimConfig};

fn median_spread(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

fn main() {
    const RUNS: usize = 5;
    for (spec, policy) in [
        ("seq:size=40g,bs=4k", "linux-ondemand"),
        ("seq:size=40g,bs=128k", "linux-ondemand"),
    ] {
        let pattern = Pattern::parse(spec).unwrap();
        let pages = pattern.pages_read() as f64;
        let rates: Vec<f64> = (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                let r = sim::run(policy, SimConfig::default(), pattern.workload()).unwrap();
                assert_eq!(r.faithful.pages_requested as f64, pages);
                pages / t.elapsed().as_secs_f64()
            })
            .collect();
        let (m, lo, hi) = median_spread(rates);
        println!(
            "sim {policy} {spec}: {:.1} M page accesses/s (median of {RUNS}; {:.1}-{:.1})",
            m / 1e6,
            lo / 1e6,
            hi / 1e6
        );
    }

    // A 100 MB strace log: a program reading 20 files with 4 KiB reads, plus library noise.
    let dir = std::env::temp_dir().join(format!("ahead-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("big.log");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
        let mut written = 0usize;
        let mut i = 0u64;
        writeln!(w, "4242 openat(AT_FDCWD, \"/usr/lib/libc.so.6\", O_RDONLY|O_CLOEXEC) = 3</usr/lib/libc.so.6>").unwrap();
        writeln!(
            w,
            "4242 read(3</usr/lib/libc.so.6>, \"\\177ELF\\2\\1\\1\\3\\0\"..., 832) = 832"
        )
        .unwrap();
        for f in 0..20 {
            writeln!(
                w,
                "4242 openat(AT_FDCWD, \"/data/file{f}\", O_RDONLY) = {}</data/file{f}>",
                4 + f
            )
            .unwrap();
        }
        while written < 100_000_000 {
            let f = i % 20;
            let line = format!(
                "4242 read({}</data/file{f}>, \"\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\"..., 4096) = 4096\n",
                4 + f
            );
            written += line.len();
            w.write_all(line.as_bytes()).unwrap();
            i += 1;
        }
    }
    let bytes = std::fs::metadata(&log).unwrap().len();
    let mut reads = 0;
    let times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let trace = ahead::trace::read_path(&log).unwrap();
            reads = trace.reads();
            sim::run(
                "linux-ondemand",
                SimConfig::default(),
                trace.into_workload(),
            )
            .unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    let (m, lo, hi) = median_spread(times);
    println!(
        "replay linux-ondemand of a {:.0} MB strace log ({} reads): {m:.2} s (median of {RUNS}; {lo:.2}-{hi:.2})",
        bytes as f64 / 1e6,
        reads
    );
    std::fs::remove_dir_all(&dir).ok();
}
