//! `ahead bench --remote URL`: readahead over a remote object (S3 or HTTP), every contender on
//! the same object in one run, contenders alternating run by run, repeated; medians, spreads,
//! and ratios to the link's ceiling.
//!
//! Contenders:
//! * `ahead:adaptive`, `ahead:linux-ondemand`: the engine with that policy, a new engine (an
//!   empty cache) for each run.
//! * `naive`: one GET per read, as an unbuffered client does (the engine with policy `none`).
//! * `fsspec`: Python's fsspec (s3fs for `s3://`) with its default readahead cache, run as a
//!   subprocess on the same object and reads, where Python has the packages.
//! * `device`: the link's ceiling: the pattern's objects (the URL's up to 1 GiB, or the
//!   `--objects`) in large ranged GETs, many at once, each worker starting its next GET as one
//!   ends. Each run sweeps [`DEVICE_SWEEP`]; the table keeps the configuration with the best
//!   median over the runs, and lists every configuration's median under it. Opening the
//!   objects (a HEAD each) is not timed.
//!
//! `--objects TEMPLATE` names the many-objects patterns' 100 objects (`{}` becomes 000..099).
//! Every engine run starts from a reset peak RSS (`/proc/self/clear_refs`), so the peak it
//! reports is that run's: the cache, its buffers and the rest of the process.
//!
//! With `--latency-ms` or `--bandwidth`, the bench starts toxiproxy in front of the server
//! (the URL's host, or `AWS_ENDPOINT_URL` for `s3://`) and reads through it. The server's own
//! page cache is not dropped between runs: the link, not the server's disk, is what is
//! measured.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ahead::engine::{Engine, File};
use serde_json::json;

use crate::*;

/// The patterns, in the order they run.
pub const PATTERNS: &[(&str, &str)] = &[
    ("seq-4k", "the object from its start in 4 KiB reads"),
    ("seq-1m", "the object from its start in 1 MiB reads"),
    ("backward-64k", "from its end to its start, 64 KiB reads"),
    ("stride-64k", "64 KiB of every 256 KiB"),
    (
        "random-4k",
        "300 reads of 4 KiB at random places, one at a time",
    ),
    (
        "parquet",
        "a footer, then four column chunks of 4 MiB in 1 MiB reads",
    ),
    (
        "skip-forward",
        "1 MiB reads: 48 MiB read, 16 MiB skipped, again",
    ),
    (
        "objects-in-turn",
        "100 objects (--objects) one after another: open, 1 MiB reads to the end, close",
    ),
    (
        "objects-64-at-once",
        "64 objects (--objects) open at once, 1 MiB from each in turn (a 64-way merge)",
    ),
];

/// The many-objects patterns: how many objects `--objects` names, and how many are read at
/// once by `objects-64-at-once`.
const OBJECTS: usize = 100;
const AT_ONCE: usize = 64;

/// The patterns that read `--objects` instead of the URL's object.
fn reads_objects(pattern: &str) -> bool {
    pattern.starts_with("objects-")
}

/// The contenders, in the order they alternate.
const CONTENDERS: &[&str] = &[
    "ahead:adaptive",
    "ahead:linux-ondemand",
    "naive",
    "fsspec",
    "device",
];

/// The device yardstick: the best of ranged GETs of these sizes, this many at once, over at
/// most [`DEVICE_BYTES`] of the object. The small sizes keep a small object (or one without
/// latency) from being read in one wave of a few large GETs, and show what the link gives
/// readers held to small GETs (many streams sharing one budget: the 64-way merge's 2 MiB
/// shares make 1 MiB GETs).
const DEVICE_SWEEP: &[(u64, u64)] = &[
    (1 << 20, 32),
    (2 << 20, 32),
    (4 << 20, 32),
    (8 << 20, 16),
    (8 << 20, 32),
    (16 << 20, 16),
    (16 << 20, 32),
];
/// As much as the sequential patterns read of the issue's 1 GiB object: a ceiling read over
/// fewer bytes pays its first round trip and its last partial wave over less, and read
/// 512 MiB it fell 9% below the engine's median on seq-1m.
const DEVICE_BYTES: u64 = 1 << 30;

pub(crate) fn cmd(url: &str, a: &BenchArgs) -> Result<String, Failure> {
    let budget = match &a.budget {
        Some(b) => {
            ahead::units::parse_size(b)
                .map_err(|e| usage(format!("--budget: {e}")))?
                .0
        }
        None => 256 << 20,
    };
    let pattern_names: Vec<&str> = PATTERNS.iter().map(|(n, _)| *n).collect();
    let mut patterns = pick(a.patterns.as_deref(), &pattern_names, "pattern")?;
    let objects: Vec<String> = match &a.objects {
        Some(template) if template.contains("{}") => (0..OBJECTS)
            .map(|i| template.replace("{}", &format!("{i:03}")))
            .collect(),
        Some(_) => {
            return Err(usage(
                "--objects: the template needs {} (replaced by 000..099)",
            ))
        }
        None if a.patterns.is_some() && patterns.iter().any(|p| reads_objects(p)) => {
            return Err(usage(
                "the objects-* patterns read --objects TEMPLATE (say s3://bucket/many/{}.bin)",
            ))
        }
        None => {
            patterns.retain(|p| !reads_objects(p));
            Vec::new()
        }
    };
    let contenders = pick(a.contenders.as_deref(), CONTENDERS, "contender")?;
    let repeat = a.repeat.unwrap_or(if a.quick { 1 } else { 3 });
    if repeat == 0 || repeat > 100 {
        return Err(usage("--repeat must be between 1 and 100"));
    }
    let cap = Duration::from_secs_f64(a.cap_s.unwrap_or(if a.quick { 5.0 } else { 20.0 }));
    let bandwidth = match &a.bandwidth {
        Some(b) => Some(
            ahead::units::parse_size(b)
                .map_err(|e| usage(format!("--bandwidth: {e}")))?
                .0,
        ),
        None => None,
    };
    let link = Link::set_up(url, a.latency_ms, bandwidth)?;
    let objects: Vec<String> = objects.iter().map(|o| link.via_proxy(o)).collect();
    let size = {
        let engine = link.engine("none", 8 << 20, None)?;
        let file = engine.open(&link.url).map_err(|e| runtime(e.to_string()))?;
        file.len()
    };
    let fsspec = contenders
        .contains(&"fsspec")
        .then(|| Fsspec::find(&a.python, &link))
        .flatten();
    eprintln!(
        "bench --remote {url}: {} MiB object{}, budget {} MiB, {repeat} repeat(s), runs capped at {:.0} s",
        size >> 20,
        link.describe(),
        budget >> 20,
        cap.as_secs_f64()
    );
    let mut rows = Vec::new();
    for pattern in &patterns {
        let many = match *pattern {
            "objects-in-turn" => Some((&objects[..], false)),
            "objects-64-at-once" => Some((&objects[..AT_ONCE], true)),
            _ => None,
        };
        let reads = if many.is_some() {
            Vec::new()
        } else {
            reads_of(pattern, size)
        };
        let device_targets = match many {
            Some((urls, _)) => urls.iter().map(|u| (u.clone(), u64::MAX)).collect(),
            None => vec![(link.url.clone(), DEVICE_BYTES)],
        };
        let mut runs: Vec<(&str, Vec<RemoteRun>)> =
            contenders.iter().map(|c| (*c, Vec::new())).collect();
        for _ in 0..repeat {
            for (contender, done) in runs.iter_mut() {
                let policy = match *contender {
                    "naive" => "none",
                    c => c.strip_prefix("ahead:").unwrap_or(c),
                };
                let run = match (*contender, many) {
                    ("device", _) => link.device(&device_targets)?,
                    ("fsspec", Some(_)) => continue,
                    ("fsspec", None) => match &fsspec {
                        Some(f) => f.run(&reads, cap)?,
                        None => continue,
                    },
                    (_, Some((urls, at_once))) => {
                        let opens_ahead = contender.starts_with("ahead:");
                        link.run_objects(policy, budget, urls, at_once, opens_ahead, cap)?
                    }
                    (_, None) => link.run_engine(policy, budget, &reads, cap)?,
                };
                eprintln!(
                    "  {pattern:<18} {contender:<21} {:>8.1} MB/s  p50 {:>7.2} ms  {} GETs  peak {} MiB {}",
                    run.mb_per_s,
                    run.p50_ms,
                    run.requests,
                    run.peak_rss >> 20,
                    run.ceiling.as_deref().unwrap_or("")
                );
                if !run.sweep.is_empty() {
                    let points: Vec<String> = run
                        .sweep
                        .iter()
                        .map(|p| {
                            format!("{} {:.0}", p.ceiling.as_deref().unwrap_or("?"), p.mb_per_s)
                        })
                        .collect();
                    eprintln!("    sweep: {} MB/s", points.join(", "));
                }
                done.push(run);
            }
        }
        rows.push((pattern.to_string(), runs));
    }
    if patterns.iter().any(|p| reads_objects(p)) && contenders.contains(&"fsspec") {
        eprintln!("note: fsspec does not run the objects-* patterns");
    }
    if contenders.contains(&"fsspec") && fsspec.is_none() {
        eprintln!(
            "note: fsspec skipped: {} has no s3fs/fsspec (pip install s3fs)",
            a.python
        );
    }
    let out = table(&rows, budget);
    if let Some(path) = &a.json {
        let v = json!({
            "url": url,
            "size": size,
            "latency_ms_each_way": a.latency_ms,
            "bandwidth_per_connection": bandwidth,
            "budget": budget,
            "objects": a.objects,
            "repeat": repeat,
            "patterns": rows.iter().map(|(p, runs)| json!({
                "pattern": p,
                "contenders": runs.iter().map(|(c, r)| json!({"contender": c, "runs": r})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&v).unwrap())
            .map_err(|e| runtime(format!("{}: {e}", path.display())))?;
    }
    Ok(out)
}

/// The names in the comma-separated `list` (all of `known` without one), each one of `known`.
fn pick(
    list: Option<&str>,
    known: &[&'static str],
    what: &str,
) -> Result<Vec<&'static str>, Failure> {
    let Some(list) = list else {
        return Ok(known.to_vec());
    };
    list.split(',')
        .map(|name| {
            let name = name.trim();
            known.iter().find(|k| **k == name).copied().ok_or_else(|| {
                usage(format!(
                    "unknown remote {what} '{name}'; known: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// A pattern's runs: each contender's, in order.
type PatternRuns<'a> = (String, Vec<(&'a str, Vec<RemoteRun>)>);

/// One run's measurements.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RemoteRun {
    pub mb_per_s: f64,
    pub bytes: u64,
    pub reads: u64,
    pub elapsed_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// GETs sent (engine contenders and the device).
    pub requests: u64,
    /// Bytes fetched that no read asked for, as a share of those fetched (engine contenders).
    pub unused_share: Option<f64>,
    /// Peak resident memory during the run, in bytes: this process's (`VmHWM`, reset as the run
    /// starts) or, for fsspec, its subprocess's.
    pub peak_rss: u64,
    /// For `device`: the sweep's best configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<String>,
    /// For `device`: every point of the sweep (its `ceiling` naming it), this run among them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<RemoteRun>,
}

/// The reads of `pattern` over an object of `size` bytes: (offset, length).
fn reads_of(pattern: &str, size: u64) -> Vec<(u64, u64)> {
    let seq = |bs: u64| {
        (0..size.div_ceil(bs))
            .map(|i| (i * bs, bs))
            .collect::<Vec<_>>()
    };
    match pattern {
        "seq-4k" => seq(4 << 10),
        "seq-1m" => seq(1 << 20),
        "backward-64k" => seq(64 << 10).into_iter().rev().collect(),
        "stride-64k" => (0..size / (256 << 10))
            .map(|i| (i * (256 << 10), 64 << 10))
            .collect(),
        "random-4k" => {
            let mut rng = ahead::pattern::SplitMix64(42);
            (0..300)
                .map(|_| ((rng.next_u64() % size.max(1)) & !4095, 4096))
                .collect()
        }
        "parquet" => {
            let mut v = vec![
                (size.saturating_sub(8), 8),
                (size.saturating_sub(64 << 10), 64 << 10),
            ];
            for k in 0..4 {
                let start = size / 5 * k;
                v.extend((0..4).map(|i| (start + i * (1 << 20), 1 << 20)));
            }
            v
        }
        "skip-forward" => seq(1 << 20)
            .into_iter()
            .filter(|(off, _)| off % (64 << 20) < (48 << 20))
            .collect(),
        _ => unreachable!("checked against PATTERNS"),
    }
}

/// Where the contenders read: the object's URL as opened, and the endpoint to reach it by
/// (the proxy's, when there is one).
struct Link {
    url: String,
    endpoint: Option<String>,
    /// For an http(s) URL behind the proxy: the server's origin and the proxy's, to swap.
    http_front: Option<(String, String)>,
    proxy: Option<Toxiproxy>,
    latency_ms: Option<u64>,
    bandwidth: Option<u64>,
}

impl Link {
    fn set_up(url: &str, latency_ms: Option<u64>, bandwidth: Option<u64>) -> Result<Link, Failure> {
        let mut link = Link {
            url: url.to_string(),
            endpoint: None,
            http_front: None,
            proxy: None,
            latency_ms,
            bandwidth,
        };
        if latency_ms.is_none() && bandwidth.is_none() {
            return Ok(link);
        }
        // The server's address, and how to say the proxy's instead.
        let (upstream, via_endpoint) = if url.starts_with("s3://") {
            let e = std::env::var("AWS_ENDPOINT_URL").map_err(|_| {
                usage("--latency-ms/--bandwidth with s3:// put a proxy in front of AWS_ENDPOINT_URL: set it (an http:// endpoint)")
            })?;
            (e, true)
        } else {
            (url.to_string(), false)
        };
        let rest = upstream.strip_prefix("http://").ok_or_else(|| {
            usage("--latency-ms/--bandwidth need a plain http:// server to proxy (TLS names would not match)")
        })?;
        let (hostport, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let addr: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(&hostport)
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| usage(format!("cannot resolve {hostport}")))?;
        let proxy = Toxiproxy::start(addr, latency_ms, bandwidth)?;
        let front = format!("http://{}", proxy.listen);
        if via_endpoint {
            link.endpoint = Some(front);
        } else {
            link.url = format!("{front}{path}");
            link.http_front = Some((format!("http://{hostport}"), front));
        }
        link.proxy = Some(proxy);
        Ok(link)
    }

    /// `url` as the contenders reach it: through the proxy, if there is one.
    fn via_proxy(&self, url: &str) -> String {
        match &self.http_front {
            Some((origin, front)) if url.starts_with(origin.as_str()) => {
                format!("{front}{}", &url[origin.len()..])
            }
            _ => url.to_string(),
        }
    }

    fn describe(&self) -> String {
        match &self.proxy {
            None => String::new(),
            Some(_) => format!(
                " through toxiproxy ({} ms each way{})",
                self.latency_ms.unwrap_or(0),
                self.bandwidth.map_or(String::new(), |b| format!(
                    ", {} MB/s per connection",
                    b / 1_000_000
                ))
            ),
        }
    }

    fn engine(&self, policy: &str, budget: u64, io_max_kb: Option<u64>) -> Result<Engine, Failure> {
        let mut b = Engine::builder().policy(policy).budget(budget);
        if let Some(e) = &self.endpoint {
            b = b.remote_option("endpoint", e);
        }
        if let Some(kb) = io_max_kb {
            b = b.io_max_kb(kb);
        }
        b.build()
            .map_err(|e| runtime(format!("cannot start the engine: {e}")))
    }

    /// One contender's run of `reads` on a new engine with `policy`.
    fn run_engine(
        &self,
        policy: &str,
        budget: u64,
        reads: &[(u64, u64)],
        cap: Duration,
    ) -> Result<RemoteRun, Failure> {
        reset_peak_rss();
        let engine = self.engine(policy, budget, None)?;
        let file = engine.open(&self.url).map_err(|e| runtime(e.to_string()))?;
        let mut buf = vec![0u8; reads.iter().map(|r| r.1).max().unwrap_or(0) as usize];
        let mut lat = Vec::with_capacity(reads.len());
        let mut touched = PageSet::new(file.len());
        let mut bytes = 0;
        let start = Instant::now();
        for &(off, len) in reads {
            let t = Instant::now();
            let n = read_full(&file, off, &mut buf[..len as usize])
                .map_err(|e| runtime(e.to_string()))?;
            lat.push(Nanos::since(t));
            bytes += n as u64;
            touched.insert(off / 4096..(off + n as u64).div_ceil(4096));
            if start.elapsed() > cap {
                break;
            }
        }
        let elapsed = start.elapsed();
        let stats = engine.stats();
        let fetched = stats.pages_read;
        Ok(RemoteRun {
            unused_share: Some(unused_share(fetched, touched.count())),
            requests: stats.requests,
            ..measured(bytes, elapsed, &mut lat)
        })
    }

    /// One contender's run of a many-objects pattern on a new engine with `policy`: the
    /// `urls` one after another (open, 1 MiB reads to the end, close), or all open at once and
    /// read 1 MiB from each in turn. Opens are timed: a reader pays them. With `opens_ahead`
    /// (ahead's contenders) the list is handed to the engine (`Engine::open_many` in turn,
    /// `Engine::open_all` at once), which opens ahead of the reader; `naive` opens each as it
    /// comes, as a plain client does.
    fn run_objects(
        &self,
        policy: &str,
        budget: u64,
        urls: &[String],
        at_once: bool,
        opens_ahead: bool,
        cap: Duration,
    ) -> Result<RemoteRun, Failure> {
        const READ: u64 = 1 << 20;
        reset_peak_rss();
        let engine = self.engine(policy, budget, None)?;
        let start = Instant::now();
        let opened: Box<dyn Iterator<Item = std::io::Result<File>>> = if opens_ahead && at_once {
            match engine.open_all(urls) {
                Ok(files) => Box::new(files.into_iter().map(Ok)),
                Err(e) => return Err(runtime(e.to_string())),
            }
        } else if opens_ahead {
            Box::new(engine.open_many(urls))
        } else {
            Box::new(urls.iter().map(|url| engine.open(url)))
        };
        let mut opened = opened.map(|o| o.map_err(|e| runtime(e.to_string())));
        let mut buf = vec![0u8; READ as usize];
        let mut lat = Vec::new();
        let mut bytes = 0;
        let mut read = |file: &File, off: u64| -> Result<u64, Failure> {
            let t = Instant::now();
            let n = read_full(file, off, &mut buf).map_err(|e| runtime(e.to_string()))? as u64;
            lat.push(Nanos::since(t));
            bytes += n;
            Ok(n)
        };
        if at_once {
            let files = opened.collect::<Result<Vec<_>, _>>()?;
            let mut off = 0;
            while start.elapsed() <= cap && files.iter().any(|f| off < f.len()) {
                for file in files.iter().filter(|f| off < f.len()) {
                    read(file, off)?;
                }
                off += READ;
            }
        } else {
            for file in opened.by_ref() {
                let file = file?;
                let mut off = 0;
                while off < file.len() && start.elapsed() <= cap {
                    off += read(&file, off)?.max(1);
                }
                if start.elapsed() > cap {
                    break;
                }
            }
        }
        let elapsed = start.elapsed();
        let stats = engine.stats();
        let used = bytes.div_ceil(4096);
        Ok(RemoteRun {
            unused_share: Some(unused_share(stats.pages_read, used)),
            requests: stats.requests,
            ..measured(bytes, elapsed, &mut lat)
        })
    }

    /// The link's ceiling over `targets` (a URL, and how many of its bytes to read at most):
    /// the best of [`DEVICE_SWEEP`].
    fn device(&self, targets: &[(String, u64)]) -> Result<RemoteRun, Failure> {
        let mut best: Option<RemoteRun> = None;
        let mut sweep = Vec::new();
        for &(get, parallel) in DEVICE_SWEEP {
            let run = self.device_with(targets, get, parallel)?;
            sweep.push(run.clone());
            if best.as_ref().is_none_or(|b| run.mb_per_s > b.mb_per_s) {
                best = Some(run);
            }
        }
        let mut best = best.expect("a sweep of several");
        best.sweep = sweep;
        Ok(best)
    }

    /// `parallel` GETs of up to `get` bytes at a time over `targets` (a URL, and how many of
    /// its bytes to read at most): each worker takes the next GET as its last one ends.
    fn device_with(
        &self,
        targets: &[(String, u64)],
        get: u64,
        parallel: u64,
    ) -> Result<RemoteRun, Failure> {
        let engine = self.engine("none", (parallel + 2).max(4) * get, Some(get >> 10))?;
        // The opens (a HEAD each) overlapped: they are not what is measured. Policy `none`
        // ignores open_all's ask for first bytes, so nothing is read before the clock starts.
        let opened = engine
            .open_all(targets.iter().map(|(url, _)| url))
            .map_err(|e| runtime(e.to_string()))?;
        let lens: Vec<u64> = opened
            .iter()
            .zip(targets)
            .map(|(file, &(_, most))| file.len().min(most))
            .collect();
        let gets: Vec<(usize, u64, u64)> = lens
            .iter()
            .enumerate()
            .flat_map(|(i, &len)| {
                (0..len.div_ceil(get)).map(move |k| (i, k * get, get.min(len - k * get)))
            })
            .collect();
        let total: u64 = lens.iter().sum();
        let next = AtomicU64::new(0);
        let start = Instant::now();
        let failed = std::thread::scope(|s| {
            let workers: Vec<_> = (0..parallel)
                .map(|_| {
                    let (opened, gets, next) = (&opened, &gets, &next);
                    s.spawn(move || {
                        let mut buf = vec![0u8; get as usize];
                        loop {
                            let at = next.fetch_add(1, Ordering::Relaxed) as usize;
                            let Some(&(i, off, len)) = gets.get(at) else {
                                return Ok::<(), std::io::Error>(());
                            };
                            read_full(&opened[i], off, &mut buf[..len as usize])?;
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .find_map(|w| w.join().expect("no panic").err())
        });
        if let Some(e) = failed {
            return Err(runtime(e.to_string()));
        }
        let elapsed = start.elapsed();
        Ok(RemoteRun {
            requests: engine.stats().requests,
            ceiling: Some(format!("{} MiB GETs x {parallel}", get >> 20)),
            ..measured(total, elapsed, &mut [])
        })
    }
}

/// Of `fetched` pages, the share no read asked for, given the `used` pages reads touched.
fn unused_share(fetched: u64, used: u64) -> f64 {
    if fetched == 0 {
        0.0
    } else {
        fetched.saturating_sub(used) as f64 / fetched as f64
    }
}

fn measured(bytes: u64, elapsed: Duration, lat: &mut [Nanos]) -> RemoteRun {
    lat.sort_unstable();
    let at = |q: f64| {
        lat.get(((lat.len().max(1) - 1) as f64 * q) as usize)
            .map_or(0.0, |d| d.0 as f64 / 1e6)
    };
    RemoteRun {
        mb_per_s: bytes as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6,
        bytes,
        reads: lat.len() as u64,
        elapsed_s: elapsed.as_secs_f64(),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        requests: 0,
        unused_share: None,
        peak_rss: peak_rss(),
        ceiling: None,
        sweep: Vec::new(),
    }
}

/// One read's latency in ns, saturating at about 4.3 s: a quarter of a `Duration`'s memory,
/// so that a run of a million 4 KiB reads keeps 4 MiB of latencies, not 16, in the RSS it
/// measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Nanos(u32);

impl Nanos {
    fn since(t: Instant) -> Nanos {
        t.elapsed().into()
    }
}

impl From<Duration> for Nanos {
    fn from(d: Duration) -> Nanos {
        Nanos(u32::try_from(d.as_nanos()).unwrap_or(u32::MAX))
    }
}

/// The pages of an object that reads touched, one bit each (32 KiB for a 1 GiB object), so
/// that the bench's own bookkeeping stays out of the memory it measures: a hash set of the
/// same 262,144 pages takes 4.5 MiB, more while it grows.
struct PageSet {
    words: Vec<u64>,
}

impl PageSet {
    fn new(bytes: u64) -> PageSet {
        PageSet {
            words: vec![0; bytes.div_ceil(4096).div_ceil(64) as usize],
        }
    }

    fn insert(&mut self, pages: std::ops::Range<u64>) {
        for page in pages {
            if let Some(word) = self.words.get_mut((page / 64) as usize) {
                *word |= 1 << (page % 64);
            }
        }
    }

    fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

fn read_full(file: &File, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let k = file.read_at(&mut buf[n..], off + n as u64)?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

/// Start this process's peak resident memory (`VmHWM`) over from what is resident now, after
/// giving back what earlier runs freed.
fn reset_peak_rss() {
    // glibc keeps large freed blocks (the device run's 16 MiB buffers) resident in its arenas
    // once they have raised its dynamic mmap threshold; a fixed threshold maps and unmaps
    // them instead, so a run's peak is its own.
    static FIXED_THRESHOLD: std::sync::Once = std::sync::Once::new();
    FIXED_THRESHOLD.call_once(|| {
        // SAFETY: mallopt only changes the allocator's tuning.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
    });
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe { libc::malloc_trim(0) };
    // "5" resets the peak (Linux 4.0 and later); where it cannot, the peak is the process's.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This process's peak resident memory (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The table: per pattern and contender, the median MB/s with its spread, p50 latency, GETs,
/// unused bytes, the highest peak RSS over the budget (engine contenders), and the ratios to
/// the device and to fsspec.
fn table(rows: &[PatternRuns], budget: u64) -> String {
    let mut out = String::from(
        "pattern            contender              MB/s (min-max)          p50 ms   GETs   unused  RSS-budget  x device  x fsspec\n",
    );
    for (pattern, runs) in rows {
        let runs: Vec<(&str, Vec<RemoteRun>)> = runs
            .iter()
            .map(|(c, r)| match *c {
                "device" => (*c, device_runs(r)),
                _ => (*c, r.clone()),
            })
            .collect();
        let of = |name: &str| {
            runs.iter()
                .find(|(c, r)| *c == name && !r.is_empty())
                .map(|(_, r)| med(r, |r| r.mb_per_s).0)
        };
        let (device, fsspec) = (of("device"), of("fsspec"));
        for (contender, r) in runs.iter().filter(|(_, r)| !r.is_empty()) {
            let (m, lo, hi) = med(r, |r| r.mb_per_s);
            let ratio = |base: Option<f64>| {
                base.filter(|b| *b > 0.0)
                    .map_or("-".to_string(), |b| format!("{:.2}", m / b))
            };
            let unused = r
                .iter()
                .filter_map(|r| r.unused_share)
                .fold(None, |a: Option<f64>, u| Some(a.unwrap_or(0.0).max(u)));
            // Memory over the budget, in MiB (negative: under it); the device and fsspec keep
            // their own buffers.
            let over = if contender.starts_with("ahead:") || *contender == "naive" {
                let peak = r.iter().map(|r| r.peak_rss).max().unwrap_or(0);
                format!("{:+}", (peak as i64 - budget as i64) >> 20)
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                out,
                "{pattern:<18} {contender:<21} {m:>8.1} ({lo:>7.1}-{hi:>7.1})  {:>8.2} {:>6} {:>8} {over:>11} {:>8} {:>9}",
                med(r, |r| r.p50_ms).0,
                med(r, |r| r.requests as f64).0 as u64,
                unused.map_or("-".to_string(), |u| format!("{:.1}%", u * 100.0)),
                ratio(device),
                ratio(fsspec),
            );
        }
    }
    out.push_str(&device_sweeps(rows));
    out
}

/// The median of `f` over `runs`, with its lowest and highest.
fn med(runs: &[RemoteRun], f: fn(&RemoteRun) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    (
        v.get(v.len() / 2).copied().unwrap_or(0.0),
        v.first().copied().unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
    )
}

/// The device's runs regrouped by the sweep's configuration: one list per configuration, its
/// run in each of `runs`.
fn sweep_points(runs: &[RemoteRun]) -> Vec<Vec<RemoteRun>> {
    let points = runs.iter().map(|r| r.sweep.len()).min().unwrap_or(0);
    (0..points)
        .map(|i| runs.iter().map(|r| r.sweep[i].clone()).collect())
        .collect()
}

/// The device's runs of its best configuration: the sweep's point with the highest median over
/// the runs (as the local bench keeps its sweep's best median). The best of each run instead
/// would lift the ceiling by the noise of picking a maximum of several samples per run.
fn device_runs(runs: &[RemoteRun]) -> Vec<RemoteRun> {
    let mb_per_s = |point: &Vec<RemoteRun>| med(point, |r| r.mb_per_s).0;
    sweep_points(runs)
        .into_iter()
        .max_by(|a, b| mb_per_s(a).total_cmp(&mb_per_s(b)))
        .unwrap_or_else(|| runs.to_vec())
}

/// Under the table, per pattern: the device's sweep, each configuration's median MB/s over
/// the runs (the ceiling is the best of them; the others say what smaller GETs get).
fn device_sweeps(rows: &[PatternRuns]) -> String {
    let mut out = String::new();
    for (pattern, runs) in rows {
        let Some((_, device)) = runs.iter().find(|(c, r)| *c == "device" && !r.is_empty()) else {
            continue;
        };
        let medians: Vec<String> = sweep_points(device)
            .iter()
            .map(|point| {
                let config = point[0].ceiling.as_deref().unwrap_or("?");
                format!("{config} {:.0}", med(point, |r| r.mb_per_s).0)
            })
            .collect();
        if !medians.is_empty() {
            let _ = writeln!(out, "device sweep, {pattern}: {} MB/s", medians.join(", "));
        }
    }
    out
}

/// toxiproxy between the contenders and the server: one proxy with the latency and bandwidth
/// toxics. Killed when dropped.
struct Toxiproxy {
    child: Child,
    listen: SocketAddr,
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Toxiproxy {
    fn start(
        upstream: SocketAddr,
        latency_ms: Option<u64>,
        bandwidth: Option<u64>,
    ) -> Result<Toxiproxy, Failure> {
        let bin = find_tool("toxiproxy-server").ok_or_else(|| {
            runtime("toxiproxy-server is not installed (tools/test-servers installs it into target/tools/bin)")
        })?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| runtime(e.to_string()))?
            .port();
        let api: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut child = Command::new(bin)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| runtime(format!("cannot start toxiproxy-server: {e}")))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(api).is_err() {
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(runtime("toxiproxy-server did not start within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut proxy = Toxiproxy { child, listen: api };
        let reply = api_call(
            api,
            "/proxies",
            &format!(
                r#"{{"name":"bench","listen":"127.0.0.1:0","upstream":"{upstream}","enabled":true}}"#
            ),
        )?;
        let v: serde_json::Value =
            serde_json::from_str(&reply).map_err(|e| runtime(format!("toxiproxy: {e}")))?;
        proxy.listen = v["listen"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| runtime(format!("toxiproxy: no listen address in {reply}")))?;
        for stream in ["upstream", "downstream"] {
            if let Some(ms) = latency_ms {
                api_call(
                    api,
                    "/proxies/bench/toxics",
                    &format!(
                        r#"{{"type":"latency","stream":"{stream}","attributes":{{"latency":{ms}}}}}"#
                    ),
                )?;
            }
        }
        if let Some(b) = bandwidth {
            api_call(
                api,
                "/proxies/bench/toxics",
                &format!(
                    r#"{{"type":"bandwidth","stream":"downstream","attributes":{{"rate":{}}}}}"#,
                    (b / 1000).max(1)
                ),
            )?;
        }
        Ok(proxy)
    }
}

/// A POST to toxiproxy's API: the reply's body.
fn api_call(api: SocketAddr, path: &str, body: &str) -> Result<String, Failure> {
    let fail = |e: std::io::Error| runtime(format!("toxiproxy {path}: {e}"));
    let mut s = TcpStream::connect(api).map_err(fail)?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {api}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(fail)?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).map_err(fail)?;
    let ok = reply
        .split_whitespace()
        .nth(1)
        .is_some_and(|c| c.starts_with('2'));
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    if !ok {
        return Err(runtime(format!("toxiproxy {path}: {body}")));
    }
    Ok(body)
}

/// `name` in `$AHEAD_TOOLS_BIN`, `target/tools/bin` (where tools/test-servers puts it) or PATH.
fn find_tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("AHEAD_TOOLS_BIN")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("target/tools/bin")])
        .chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        )
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The fsspec contender: a Python with s3fs (or fsspec's HTTP filesystem) reading the same
/// object with the same reads, with the library's defaults.
struct Fsspec {
    python: String,
    url: String,
    endpoint: Option<String>,
}

const FSSPEC_SCRIPT: &str = r#"
import json, sys, time
url, endpoint, reads_path, cap = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
if url.startswith("s3://"):
    import s3fs
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint} if endpoint else {})
    f = fs.open(url[5:], "rb")
else:
    import fsspec
    f = fsspec.open(url, "rb").open()
if reads_path == "-":
    print("ok"); sys.exit(0)
reads = json.load(open(reads_path))
lat, n = [], 0
t0 = time.perf_counter()
for off, ln in reads:
    t = time.perf_counter()
    f.seek(off)
    n += len(f.read(ln))
    lat.append(time.perf_counter() - t)
    if time.perf_counter() - t0 > cap:
        break
print(json.dumps({"bytes": n, "elapsed_s": time.perf_counter() - t0, "lat": lat}))
"#;

impl Fsspec {
    /// The contender, if `python` can open the object with its packages.
    fn find(python: &str, link: &Link) -> Option<Fsspec> {
        let f = Fsspec {
            python: python.to_string(),
            url: link.url.clone(),
            endpoint: link
                .endpoint
                .clone()
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok()),
        };
        let ok = f.command("-", 0.0).output().ok()?;
        (ok.status.success() && ok.stdout.starts_with(b"ok")).then_some(f)
    }

    fn command(&self, reads: &str, cap: f64) -> Command {
        let mut c = Command::new(&self.python);
        c.arg("-c")
            .arg(FSSPEC_SCRIPT)
            .arg(&self.url)
            .arg(self.endpoint.as_deref().unwrap_or(""))
            .arg(reads)
            .arg(cap.to_string())
            .stderr(Stdio::null());
        if let Ok(region) = std::env::var("AWS_REGION") {
            c.env("AWS_DEFAULT_REGION", region);
        }
        c
    }

    fn run(&self, reads: &[(u64, u64)], cap: Duration) -> Result<RemoteRun, Failure> {
        let path =
            std::env::temp_dir().join(format!("ahead-bench-reads-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::to_string(reads).unwrap())
            .map_err(|e| runtime(e.to_string()))?;
        let out = self
            .command(path.to_str().unwrap_or_default(), cap.as_secs_f64())
            .output();
        let _ = std::fs::remove_file(&path);
        let out = out.map_err(|e| runtime(format!("fsspec: {e}")))?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|_| runtime(format!("fsspec failed ({})", out.status)))?;
        let mut lat: Vec<Nanos> = v["lat"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_f64())
                    .map(|secs| Nanos::from(Duration::from_secs_f64(secs)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(measured(
            v["bytes"].as_u64().unwrap_or(0),
            Duration::from_secs_f64(v["elapsed_s"].as_f64().unwrap_or(0.0)),
            &mut lat,
        ))
    }
}
