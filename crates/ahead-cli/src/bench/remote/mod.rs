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
//!   ends, by curl (`curl.rs`: a client that is not the engine's; where curl is missing, the
//!   engine's own client, and the row says so). Each run sweeps [`DEVICE_SWEEP`]; the table keeps the configuration with the best
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

mod curl;
mod measure;
mod report;
mod tools;

use measure::{peak_rss, read_full, reset_peak_rss, Nanos, PageSet};
use report::table;
use tools::{Fsspec, Toxiproxy};

/// The patterns run when none are named, in order: the library's named readers
/// (`ahead::readers`, the same reads the local bench and the Python bench make) and this
/// bench's own experiments ([`EXPERIMENTS`]). `--patterns` takes any reader's name.
const DEFAULT_PATTERNS: &[&str] = &[
    "seq-4k",
    "seq-1m",
    "reverse-64k",
    "stride-64k",
    "random-4k",
    "parquet",
    "skip-forward",
    "objects-in-turn",
    "objects-64-at-once",
];

/// What only a remote bench runs: not one sequence of reads over the object.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "parquet",
        "a footer, then four column chunks of 4 MiB in 1 MiB reads",
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
/// As much as the sequential patterns read of the 1 GiB object: a ceiling read over
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
    let pattern_names: Vec<&str> = ahead::readers::READERS
        .iter()
        .map(|r| r.name)
        .chain(EXPERIMENTS.iter().map(|(n, _)| *n))
        .collect();
    let mut patterns = match a.patterns {
        Some(_) => pick(a.patterns.as_deref(), &pattern_names, "pattern")?,
        None => DEFAULT_PATTERNS.to_vec(),
    };
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
        // One run of `contender` on this pattern; None for a contender that does not run it.
        let run_one = |contender: &str| -> Result<Option<RemoteRun>, Failure> {
            let policy = match contender {
                "naive" => "none",
                c => c.strip_prefix("ahead:").unwrap_or(c),
            };
            Ok(Some(match (contender, many) {
                ("device", _) => link.device(&device_targets)?,
                ("fsspec", Some(_)) => return Ok(None),
                ("fsspec", None) => match &fsspec {
                    Some(f) => f.run(&reads, cap)?,
                    None => return Ok(None),
                },
                (_, Some((urls, at_once))) => {
                    let opens_ahead = contender.starts_with("ahead:");
                    link.run_objects(policy, budget, urls, at_once, opens_ahead, cap)?
                }
                (_, None) => link.run_engine(policy, budget, &reads, cap)?,
            }))
        };
        // The loopback gateway and proxy run slower for the first heavy run after a lighter
        // one, whoever makes it (BENCHMARKS, issue 21 run 4): the pattern's first contender
        // runs once first, not counted.
        if let Some(first) = contenders.first() {
            if let Some(run) = run_one(first)? {
                eprintln!(
                    "  {pattern:<18} {first:<21} {:>8.1} MB/s  (warm-up, not counted)",
                    run.mb_per_s
                );
            }
        }
        for _ in 0..repeat {
            for (contender, done) in runs.iter_mut() {
                let Some(run) = run_one(contender)? else {
                    continue;
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

/// The reads of `pattern` over an object of `size` bytes: (offset, length): a named reader's
/// (`ahead::readers`), or the Parquet projection's.
fn reads_of(pattern: &str, size: u64) -> Vec<(u64, u64)> {
    if pattern == "parquet" {
        let mut v = vec![
            (size.saturating_sub(8), 8),
            (size.saturating_sub(64 << 10), 64 << 10),
        ];
        for k in 0..4 {
            let start = size / 5 * k;
            v.extend((0..4).map(|i| (start + i * (1 << 20), 1 << 20)));
        }
        return v;
    }
    ahead::readers::reads(pattern, size)
        .map(Iterator::collect)
        .unwrap_or_default()
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
    /// The ceiling's client, where curl can be one (else the engine's own, said in its row).
    curl: Option<curl::Curl>,
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
            curl: match curl::Curl::find() {
                Ok(c) => Some(c),
                Err(why) => {
                    eprintln!(
                        "note: the device ceiling is measured by the engine's own client: {why}"
                    );
                    None
                }
            },
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
    /// its bytes to read at most), each worker taking its next GET as its last one ends: by
    /// curl ([`curl`]) where it can, else by the engine's own client (policy `none`), which the
    /// row's `ceiling` then says.
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
        let label = format!("{} MiB GETs x {parallel}", get >> 20);
        if let Some(curl) = &self.curl {
            let urls = targets
                .iter()
                .map(|(url, _)| curl::http_url(url, self.endpoint.as_deref()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(runtime)?;
            let requests: Vec<curl::Get> = gets
                .iter()
                .map(|&(i, offset, len)| curl::Get {
                    url: self.via_proxy(&urls[i]),
                    offset,
                    len,
                })
                .collect();
            let signing = match targets.first() {
                Some((url, _)) if url.starts_with("s3://") => {
                    Some(curl::Signing::from_env().map_err(runtime)?)
                }
                _ => None,
            };
            let (bytes, elapsed) = curl
                .fetch(
                    &requests,
                    parallel as usize,
                    signing.as_ref(),
                    &std::env::temp_dir(),
                )
                .map_err(runtime)?;
            if bytes != total {
                return Err(runtime(format!(
                    "curl brought {bytes} bytes of the {total} asked for"
                )));
            }
            return Ok(RemoteRun {
                requests: requests.len() as u64,
                ceiling: Some(format!("{label}, curl")),
                ..measured(total, elapsed, &mut [])
            });
        }
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
            ceiling: Some(format!("{label}, the engine's client")),
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
