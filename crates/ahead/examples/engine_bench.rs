//! Issue 5's performance figures, measured in one run, contenders interleaved, repeated:
//!
//!     cargo build --release && cargo run --release -p ahead --example engine_bench -- [FILE] [REPEATS] [SECTIONS]
//!
//! SECTIONS: any of `seq,random,cached` (default all three).
//!
//! FILE (default `bench-2g` in the current directory) is created with 2 GiB of random bytes if
//! missing. Needs fio (Debian package `fio`) for the device's own limits; run as root to also
//! measure the kernel with its default 128 KiB readahead (the device's `read_ahead_kb` is set
//! for that run and restored). Every cold run starts with the file dropped from the kernel's
//! cache (`POSIX_FADV_DONTNEED`).
//!
//! 1. Sequential 4 KiB reads of the whole file, cold: `ahead cat --bs 4k` against `dd bs=4k`
//!    (buffered: the kernel's readahead) and the device's limit (`fio`, O_DIRECT reads at queue
//!    depth 8, the better of 1 MiB and 4 MiB requests).
//! 2. Random 4 KiB reads by 32 threads through the engine with policy `none` (a 16 MiB budget,
//!    so hits are rare) against `fio` io_uring at queue depth 32 on the same file.
//! 3. A cached file re-read with 4 KiB reads: the engine's `read_at` against `read(2)` of the
//!    kernel's cached pages, both in this process.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ahead::engine::Engine;

fn drop_cache(path: &Path) {
    ahead::os::drop_kernel_cache(path).expect("the kernel's cache for the file drops");
}

fn median_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).expect("numbers"));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn show(name: &str, unit: &str, v: &[f64]) -> f64 {
    let (m, lo, hi) = median_spread(v.to_vec());
    println!("| {name} | {m:.0} {unit} | {lo:.0}-{hi:.0} |");
    m
}

/// Time a shell command with stdout discarded; seconds.
fn time_cmd(cmd: &str) -> f64 {
    let t = Instant::now();
    let st = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("sh runs");
    assert!(st.success(), "failed: {cmd}");
    t.elapsed().as_secs_f64()
}

fn fio_json(args: &str) -> Option<serde_json::Value> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("fio --output-format=json {args}"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn fio_read(v: &serde_json::Value, key: &str) -> f64 {
    v["jobs"][0]["read"][key].as_f64().unwrap_or(0.0)
}

fn sysfs_read_ahead(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    use std::os::unix::fs::MetadataExt;
    let dev = meta.dev();
    // SAFETY: pure arithmetic on a dev_t.
    let (ma, mi) = (libc::major(dev), libc::minor(dev));
    let block = PathBuf::from(format!("/sys/dev/block/{ma}:{mi}"));
    [block.join("queue"), block.join("../queue")]
        .into_iter()
        .map(|q| q.join("read_ahead_kb"))
        .find(|p| p.exists())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = PathBuf::from(args.first().map_or("bench-2g", String::as_str));
    let repeats: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(3).max(1);
    let sections = args.get(2).map_or("seq,random,cached", String::as_str);
    let run = |name: &str| sections.split(',').any(|s| s == name);
    let size: u64 = 2 << 30;
    if std::fs::metadata(&path).map(|m| m.len()).ok() != Some(size) {
        eprintln!("creating {} (2 GiB of random bytes)", path.display());
        time_cmd(&format!("head -c {size} /dev/urandom > {}", path.display()));
    }
    let ahead = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("ahead")))
        .filter(|p| p.exists())
        .expect("build the CLI first: cargo build --release");
    let have_fio = Command::new("fio").arg("--version").output().is_ok();
    let p = path.display();
    let mb = |secs: f64| size as f64 / 1e6 / secs;
    let ra_file = sysfs_read_ahead(&path);
    let ra_now = ra_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|s| s.trim().to_string());

    if run("seq") {
        println!("## Sequential 4 KiB reads of {p}, cold, MB/s (median of {repeats}, min-max)\n");
        println!("| contender | median | spread |");
        println!("|---|---|---|");
        let (mut ours, mut dd, mut dd128, mut device) = (vec![], vec![], vec![], vec![]);
        for _ in 0..repeats {
            drop_cache(&path);
            ours.push(mb(time_cmd(&format!(
                "{} cat --bs 4k {p}",
                ahead.display()
            ))));
            drop_cache(&path);
            dd.push(mb(time_cmd(&format!("dd if={p} of=/dev/null bs=4k"))));
            if let (Some(f), Some(old)) = (&ra_file, &ra_now) {
                if std::fs::write(f, "128").is_ok() {
                    drop_cache(&path);
                    dd128.push(mb(time_cmd(&format!("dd if={p} of=/dev/null bs=4k"))));
                    let _ = std::fs::write(f, old);
                }
            }
            if have_fio {
                // The device's limit: the better of 1 MiB and 4 MiB (its max_sectors_kb
                // here) O_DIRECT reads at queue depth 8.
                let mut best: f64 = 0.0;
                for bs in ["1M", "4M"] {
                    drop_cache(&path);
                    if let Some(v) = fio_json(&format!(
                        "--name=dev --filename={p} --rw=read --bs={bs} --iodepth=8 --ioengine=io_uring --direct=1 --size={size}"
                    )) {
                        best = best.max(fio_read(&v, "bw_bytes") / 1e6);
                    }
                }
                if best > 0.0 {
                    device.push(best);
                }
            }
        }
        let o = show(
            "ahead cat --bs 4k (adaptive, io_uring, O_DIRECT)",
            "MB/s",
            &ours,
        );
        let d = show(
            &format!(
                "dd bs=4k (buffered, read_ahead_kb {})",
                ra_now.as_deref().unwrap_or("?")
            ),
            "MB/s",
            &dd,
        );
        let d128 = (!dd128.is_empty()).then(|| {
            show(
                "dd bs=4k (buffered, read_ahead_kb 128, the kernel's default)",
                "MB/s",
                &dd128,
            )
        });
        let dev = (!device.is_empty()).then(|| {
            show(
                "device: fio O_DIRECT, queue depth 8, best of 1 MiB and 4 MiB reads",
                "MB/s",
                &device,
            )
        });
        println!();
        println!(
            "- ahead / dd (read_ahead_kb {}): {:.2}x",
            ra_now.as_deref().unwrap_or("?"),
            o / d
        );
        if let Some(d128) = d128 {
            println!("- ahead / dd (read_ahead_kb 128): {:.2}x", o / d128);
        }
        if let Some(dev) = dev {
            println!("- ahead / device: {:.0}%", 100.0 * o / dev);
        }
    }
    if run("random") {
        println!("\n## Random 4 KiB reads, 32 in flight, IOPS (median of {repeats}, min-max)\n");
        println!("| contender | median | spread |");
        println!("|---|---|---|");
        let secs = 3.0;
        let (mut ours, mut fio) = (vec![], vec![]);
        for _ in 0..repeats {
            ours.push(random_reads(&path, size, secs));
            if have_fio {
                if let Some(v) = fio_json(&format!(
                "--name=rand --filename={p} --rw=randread --bs=4k --iodepth=32 --ioengine=io_uring --direct=1 --runtime={secs} --time_based --size={size}"
            )) {
                fio.push(fio_read(&v, "iops"));
            }
            }
        }
        let o = show(
            "ahead: 32 threads, read_at, policy none (device requests/s)",
            "IOPS",
            &ours,
        );
        if !fio.is_empty() {
            let f = show("fio io_uring O_DIRECT, queue depth 32", "IOPS", &fio);
            // The device's rate drifts between runs: the ratio of each back-to-back pair too.
            let pairs: Vec<f64> = ours.iter().zip(&fio).map(|(a, b)| a / b).collect();
            let (m, lo, hi) = median_spread(pairs);
            println!(
                "\n- ahead / fio: {:.0}% (medians); {:.0}% median of back-to-back pairs ({:.0}-{:.0}%)",
                100.0 * o / f,
                100.0 * m,
                100.0 * lo,
                100.0 * hi
            );
        }
    }
    if !run("cached") {
        return;
    }
    println!("\n## Re-reading a cached 128 MiB file with 4 KiB reads, MB/s (median of {repeats}, min-max)\n");
    println!("| contender | median | spread |");
    println!("|---|---|---|");
    let cached = 128u64 << 20;
    let (mut ours, mut kernel) = (vec![], vec![]);
    let engine = Engine::new().expect("engine starts");
    let file = engine.open(&path).expect("file opens");
    let mut buf = vec![0u8; 4096];
    // Eight passes per measurement (1 GiB of reads), so each takes long enough to time.
    const PASSES: u64 = 8;
    let pass = |file: &ahead::engine::File, buf: &mut [u8]| {
        let t = Instant::now();
        for _ in 0..PASSES {
            let mut off = 0;
            while off < cached {
                off += file.read_at(buf, off).expect("read") as u64;
            }
        }
        (PASSES * cached) as f64 / 1e6 / t.elapsed().as_secs_f64()
    };
    pass(&file, &mut buf); // bring it in
    let mut kf = std::fs::File::open(&path).expect("opens");
    let mut kpass = |buf: &mut [u8]| {
        use std::io::Seek;
        let t = Instant::now();
        for _ in 0..PASSES {
            kf.seek(std::io::SeekFrom::Start(0)).expect("seek");
            let mut left = cached;
            while left > 0 {
                left -= kf.read(buf).expect("read") as u64;
            }
        }
        (PASSES * cached) as f64 / 1e6 / t.elapsed().as_secs_f64()
    };
    kpass(&mut buf);
    for _ in 0..repeats {
        ours.push(pass(&file, &mut buf));
        kernel.push(kpass(&mut buf));
    }
    let o = show("ahead read_at 4 KiB, cached", "MB/s", &ours);
    let k = show("read(2) 4 KiB, kernel page cache", "MB/s", &kernel);
    println!("\n- ahead / kernel: {:.2}x", o / k);
    let s = engine.stats();
    println!(
        "\nengine for the cached runs: {} pages read, {} hit pages",
        s.pages_read, s.hit_pages
    );
}

/// 32 threads reading random 4 KiB pages through the engine for `secs`: device reads per
/// second (the engine's requests, so the rare cache hit does not count).
fn random_reads(path: &Path, size: u64, secs: f64) -> f64 {
    let backend = std::env::var("AHEAD_BENCH_ENGINE")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(ahead::engine::BackendChoice::AUTO);
    let engine = Engine::builder()
        .policy("none")
        .budget(16 << 20)
        .backend(backend)
        .build()
        .expect("engine starts");
    let file = engine.open(path).expect("file opens");
    let pages = size / 4096;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let t = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..32u64)
            .map(|i| {
                let file = &file;
                s.spawn(move || {
                    let mut buf = vec![0u8; 4096];
                    let mut rng = ahead::pattern::SplitMix64(i + 1);
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        file.read_at(&mut buf, rng.below(pages) * 4096)
                            .expect("read");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    let elapsed = t.elapsed().as_secs_f64();
    let s = engine.stats();
    assert!(total >= s.requests);
    s.requests as f64 / elapsed
}
