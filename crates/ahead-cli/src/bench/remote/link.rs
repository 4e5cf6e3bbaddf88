//! The link the remote bench reads over: the object's URL and the endpoint to reach it by
//! (toxiproxy's front, with `--latency-ms`/`--bandwidth`), the engines each contender runs on
//! it, and the `device` ceiling's runs (raw GETs, `raw_get.rs`; curl over TLS, `curl.rs`).

use super::*;

/// Where the contenders read: the object's URL as opened, and the endpoint to reach it by
/// (the proxy's, when there is one).
pub(super) struct Link {
    pub(super) url: String,
    pub(super) endpoint: Option<String>,
    /// For an http(s) URL behind the proxy: the server's origin and the proxy's, to swap.
    pub(super) http_front: Option<(String, String)>,
    pub(super) proxy: Option<Toxiproxy>,
    pub(super) latency_ms: Option<u64>,
    pub(super) bandwidth: Option<u64>,
    /// The ceiling's client over TLS, where curl can be one (else the engine's own, said in
    /// its row); plain HTTP goes by [`raw_get`].
    pub(super) curl: Option<curl::Curl>,
    /// Every engine contender's settings, KEY=VALUE (`-o`).
    pub(super) options: Vec<String>,
}

impl Link {
    pub(super) fn set_up(
        url: &str,
        latency_ms: Option<u64>,
        bandwidth: Option<u64>,
    ) -> Result<Link, Failure> {
        let mut link = Link {
            url: url.to_string(),
            endpoint: None,
            http_front: None,
            proxy: None,
            latency_ms,
            bandwidth,
            options: Vec::new(),
            curl: match curl::Curl::find() {
                Ok(c) => Some(c),
                Err(why) => {
                    eprintln!(
                        "note: over https the device ceiling is measured by the engine's own client: {why}"
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
    pub(super) fn via_proxy(&self, url: &str) -> String {
        match &self.http_front {
            Some((origin, front)) if url.starts_with(origin.as_str()) => {
                format!("{front}{}", &url[origin.len()..])
            }
            _ => url.to_string(),
        }
    }

    pub(super) fn describe(&self) -> String {
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

    pub(super) fn engine(
        &self,
        policy: &str,
        budget: u64,
        io_max_kb: Option<u64>,
    ) -> Result<Engine, Failure> {
        let mut b = Engine::builder().policy(policy).budget(budget);
        if let Some(e) = &self.endpoint {
            b = b.remote_option("endpoint", e);
        }
        if let Some(kb) = io_max_kb {
            b = b.io_max_kb(kb);
        }
        for pair in &self.options {
            b = b.set_pair(pair).map_err(|e| usage(format!("-o: {e}")))?;
        }
        b.build()
            .map_err(|e| runtime(format!("cannot start the engine: {e}")))
    }

    /// `ahead cat --bs BS` of the whole object as a user runs it: this binary in a process of
    /// its own, its output to /dev/null, with the link's endpoint and `-o` settings; timed
    /// from its start to its exit. Its peak RSS is not measured: a child's `ru_maxrss` starts
    /// from its parent's at the fork, which here is the bench's.
    pub(super) fn run_cat(&self, bs: u64, budget: u64, size: u64) -> Result<RemoteRun, Failure> {
        let exe = std::env::current_exe().map_err(|e| runtime(format!("ahead cat: {e}")))?;
        let mut c = Command::new(exe);
        c.args([
            "cat",
            "--bs",
            &bs.to_string(),
            "--budget",
            &budget.to_string(),
        ]);
        for pair in &self.options {
            c.args(["-o", pair]);
        }
        c.arg(&self.url).stdout(Stdio::null());
        if let Some(e) = &self.endpoint {
            c.env("AWS_ENDPOINT_URL", e);
        }
        let (started, cpu) = (Instant::now(), children_cpu_seconds());
        let done = c.output().map_err(|e| runtime(format!("ahead cat: {e}")))?;
        let (elapsed, cpu) = (started.elapsed(), children_cpu_seconds() - cpu);
        if !done.status.success() {
            return Err(runtime(format!(
                "ahead cat failed: {}",
                String::from_utf8_lossy(&done.stderr).trim()
            )));
        }
        Ok(RemoteRun {
            mb_per_s: size as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6,
            bytes: size,
            reads: size.div_ceil(bs.max(1)),
            elapsed_s: elapsed.as_secs_f64(),
            cpu_s_per_gib: cpu_per_gib(cpu, size),
            ..RemoteRun::default()
        })
    }

    /// One contender's run of `reads` on a new engine with `policy`.
    pub(super) fn run_engine(
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
        let (start, cpu) = (Instant::now(), ahead::os::cpu_seconds());
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
            cpu_s_per_gib: cpu_per_gib(ahead::os::cpu_seconds() - cpu, bytes),
            ..measured(bytes, elapsed, &mut lat)
        })
    }

    /// One contender's run of a many-objects pattern on a new engine with `policy`: the
    /// `urls` one after another (open, 1 MiB reads to the end, close), or all open at once and
    /// read 1 MiB from each in turn. Opens are timed: a reader pays them. With `opens_ahead`
    /// (ahead's contenders) the list is handed to the engine (`Engine::open_many` in turn,
    /// `Engine::open_all` at once), which opens ahead of the reader; `naive` opens each as it
    /// comes, as a plain client does.
    pub(super) fn run_objects(
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

    /// `targets` as the raw client ([`raw_get`]) reaches them, if it can: plain `http://`
    /// URLs (through the proxy), `s3://` objects presigned at a plain `http://` endpoint.
    /// `None` where it cannot (TLS, credentials in the URL); an error where signing failed.
    fn raw_targets(
        &self,
        targets: &[(String, u64)],
    ) -> Option<Result<Vec<raw_get::Target>, String>> {
        let s3: Vec<&str> = targets
            .iter()
            .map(|(url, _)| url.as_str())
            .filter(|url| url.starts_with("s3://"))
            .collect();
        let mut signed = Vec::new().into_iter();
        if !s3.is_empty() {
            let endpoint = self
                .endpoint
                .clone()
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
                .filter(|e| e.starts_with("http://"))?;
            match raw_get::presigned(&s3, &endpoint) {
                Ok(urls) => signed = urls.into_iter(),
                Err(why) => return Some(Err(format!("the ceiling cannot sign: {why}"))),
            }
        }
        let mut reached = Vec::with_capacity(targets.len());
        for (url, _) in targets {
            let plain = if url.starts_with("s3://") {
                signed.next().expect("a signed URL for each s3:// one")
            } else {
                self.via_proxy(url)
            };
            reached.push(raw_get::Target::parse(&plain).ok()?);
        }
        Some(Ok(reached))
    }

    /// The link's ceiling over `targets` (a URL, and how many of its bytes to read at most):
    /// the best of [`DEVICE_SWEEP`].
    pub(super) fn device(&self, targets: &[(String, u64)]) -> Result<RemoteRun, Failure> {
        // Reached (signed, resolved) once for the whole sweep.
        let raw = self.raw_targets(targets).transpose().map_err(runtime)?;
        let mut sweep = Vec::new();
        for &(get, parallel) in DEVICE_SWEEP {
            sweep.push(self.device_with(targets, raw.as_deref(), get, parallel)?);
        }
        Ok(best_of_sweep(sweep))
    }

    /// `parallel` GETs of up to `get` bytes at a time over `targets` (a URL, and how many of
    /// its bytes to read at most), each worker taking its next GET as its last one ends: by
    /// the raw client ([`raw_get`]) over `raw` (the targets as it reaches them, where it can),
    /// by curl ([`curl`]) over TLS, else by the engine's own client (policy `none`); the row's
    /// `ceiling` says which.
    pub(super) fn device_with(
        &self,
        targets: &[(String, u64)],
        raw: Option<&[raw_get::Target]>,
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
        if let Some(raw) = raw {
            let requests: Vec<raw_get::Get> = gets
                .iter()
                .map(|&(target, offset, len)| raw_get::Get {
                    target,
                    offset,
                    len,
                })
                .collect();
            let done = raw_get::fetch(raw, &requests, parallel as usize).map_err(runtime)?;
            if done.bytes != total {
                return Err(runtime(format!(
                    "the ceiling's GETs brought {} bytes of the {total} asked for",
                    done.bytes
                )));
            }
            return Ok(RemoteRun {
                requests: requests.len() as u64,
                ceiling: Some(format!("{label}, raw GETs")),
                cpu_s_per_gib: cpu_per_gib(done.cpu_s, total),
                ..measured(total, done.elapsed, &mut [])
            });
        }
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
            let cpu = children_cpu_seconds();
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
                cpu_s_per_gib: cpu_per_gib(children_cpu_seconds() - cpu, total),
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
