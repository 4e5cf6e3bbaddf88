//! The programs the remote bench drives beside the engine: toxiproxy (latency and bandwidth in
//! front of the server) and fsspec (Python's readahead, the contender to beat).

use super::*;

/// toxiproxy between the contenders and the server: one proxy with the latency and bandwidth
/// toxics. Killed when dropped.
pub(super) struct Toxiproxy {
    child: Child,
    pub(super) listen: SocketAddr,
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Toxiproxy {
    pub(super) fn start(
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
pub(super) fn api_call(api: SocketAddr, path: &str, body: &str) -> Result<String, Failure> {
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
pub(super) fn find_tool(name: &str) -> Option<PathBuf> {
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

/// The Python clients: a Python with s3fs (or fsspec's HTTP filesystem) reading the same
/// object with the same reads, with the library's defaults (`fsspec`) or each of
/// [`FSSPEC_TUNINGS`] (`fsspec:tuned`); or with pyarrow's own S3 client (`pyarrow`, S3 only).
pub(super) struct Fsspec {
    /// The contender's name, for its errors.
    client: &'static str,
    python: String,
    url: String,
    endpoint: Option<String>,
    /// How the client opens the object (`f`) and reads a range (`read(off, ln)`), before
    /// [`READ_LOOP`].
    opening: &'static str,
}

/// The clients' arguments: the object's URL, the endpoint, a JSON file of reads (`-`: open
/// the object, say `ok` and stop: the check that the packages are there) and the time cap.
const ARGUMENTS: &str = r#"
import json, os, sys, time
url, endpoint, reads_path, cap = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
"#;

/// Every client's reads, timed each, after its opening.
const READ_LOOP: &str = r#"
if reads_path == "-":
    print("ok"); sys.exit(0)
reads = json.load(open(reads_path))
lat, n = [], 0
t0 = time.perf_counter()
for off, ln in reads:
    t = time.perf_counter()
    n += len(read(off, ln))
    lat.append(time.perf_counter() - t)
    if time.perf_counter() - t0 > cap:
        break
print(json.dumps({"bytes": n, "elapsed_s": time.perf_counter() - t0, "lat": lat}))
"#;

/// The `pyarrow` contender: pyarrow's `S3FileSystem` (the AWS SDK for C++), a file opened
/// with `open_input_file` as `pyarrow.parquet` opens one, each read a `read_at`: pyarrow
/// reads ahead nothing for a file read this way (its Parquet reader asks for a footer's
/// ranges at once itself), which is what a reader of it gets.
const PYARROW_OPENING: &str = r#"
import pyarrow.fs as pafs
options = {"region": os.environ.get("AWS_REGION", "us-east-1")}
if endpoint:
    scheme, _, host = endpoint.partition("://")
    options.update(endpoint_override=host, scheme=scheme)
f = pafs.S3FileSystem(**options).open_input_file(url[5:])
read = lambda off, ln: f.read_at(ln, off)
"#;

const FSSPEC_OPENING: &str = r#"
# The file's cache: the library's default, or a cache_type and block_size to try.
tuning = {"cache_type": sys.argv[5], "block_size": int(sys.argv[6])} if len(sys.argv) > 6 else {}
if url.startswith("s3://"):
    import s3fs
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint} if endpoint else {})
    f = fs.open(url[5:], "rb", **tuning)
else:
    import fsspec
    f = fsspec.open(url, "rb", **tuning).open()
def read(off, ln):
    f.seek(off)
    return f.read(ln)
"#;

/// The caches `fsspec:tuned` tries on every pattern, as fsspec documents them (`cache_type`,
/// `block_size`): none (a GET a read: random reads), LRU blocks of 1 and 8 MiB (reads that
/// come back or go backward), readahead of 8 MiB (in order, small), and blocks fetched one
/// ahead in a thread (in order, large). The row keeps the one with the best median, as the
/// device keeps its sweep's best.
pub(super) const FSSPEC_TUNINGS: &[(&str, u64)] = &[
    ("none", 0),
    ("blockcache", 1 << 20),
    ("blockcache", 8 << 20),
    ("readahead", 8 << 20),
    ("background", 8 << 20),
];

impl Fsspec {
    /// The fsspec contender, if `python` can open the object with its packages.
    pub(super) fn find(python: &str, link: &Link) -> Option<Fsspec> {
        Self::find_with(python, link, "fsspec", FSSPEC_OPENING)
    }

    /// The pyarrow contender, if the object is S3's and `python` has pyarrow.
    pub(super) fn find_pyarrow(python: &str, link: &Link) -> Option<Fsspec> {
        link.url
            .starts_with("s3://")
            .then(|| Self::find_with(python, link, "pyarrow", PYARROW_OPENING))
            .flatten()
    }

    fn find_with(
        python: &str,
        link: &Link,
        client: &'static str,
        opening: &'static str,
    ) -> Option<Fsspec> {
        let f = Fsspec {
            client,
            python: python.to_string(),
            url: link.url.clone(),
            endpoint: link
                .endpoint
                .clone()
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok()),
            opening,
        };
        let ok = f.command("-", 0.0, None).output().ok()?;
        (ok.status.success() && ok.stdout.starts_with(b"ok")).then_some(f)
    }

    fn command(&self, reads: &str, cap: f64, tuning: Option<(&str, u64)>) -> Command {
        let mut c = Command::new(&self.python);
        c.arg("-c")
            .arg(format!("{ARGUMENTS}{}{READ_LOOP}", self.opening))
            .arg(&self.url)
            .arg(self.endpoint.as_deref().unwrap_or(""))
            .arg(reads)
            .arg(cap.to_string())
            .stderr(Stdio::null());
        if let Some((cache_type, block_size)) = tuning {
            c.arg(cache_type).arg(block_size.to_string());
        }
        if let Ok(region) = std::env::var("AWS_REGION") {
            c.env("AWS_DEFAULT_REGION", region);
        }
        c
    }

    /// One run with the library's defaults.
    pub(super) fn run(&self, reads: &[(u64, u64)], cap: Duration) -> Result<RemoteRun, Failure> {
        self.run_with(reads, cap, None)
    }

    /// One run of each of [`FSSPEC_TUNINGS`]: the best, holding them all as its sweep.
    pub(super) fn run_tuned(
        &self,
        reads: &[(u64, u64)],
        cap: Duration,
    ) -> Result<RemoteRun, Failure> {
        let mut sweep = Vec::new();
        for &(cache_type, block_size) in FSSPEC_TUNINGS {
            let mut run = self.run_with(reads, cap, Some((cache_type, block_size)))?;
            run.ceiling = Some(match block_size {
                0 => cache_type.to_string(),
                b => format!("{cache_type} {} MiB", b >> 20),
            });
            sweep.push(run);
        }
        Ok(best_of_sweep(sweep))
    }

    fn run_with(
        &self,
        reads: &[(u64, u64)],
        cap: Duration,
        tuning: Option<(&str, u64)>,
    ) -> Result<RemoteRun, Failure> {
        let path =
            std::env::temp_dir().join(format!("ahead-bench-reads-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::to_string(reads).unwrap())
            .map_err(|e| runtime(e.to_string()))?;
        let out = self
            .command(path.to_str().unwrap_or_default(), cap.as_secs_f64(), tuning)
            .output();
        let _ = std::fs::remove_file(&path);
        let who = self.client;
        let out = out.map_err(|e| runtime(format!("{who}: {e}")))?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|_| runtime(format!("{who} failed ({})", out.status)))?;
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
