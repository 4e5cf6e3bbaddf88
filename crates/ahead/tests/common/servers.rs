//! Real servers on loopback for the remote-object tests, started by the tests: versitygw (an
//! S3-compatible gateway over a directory), lighttpd (HTTP with Range, and HTTPS) and toxiproxy (latency,
//! bandwidth and faults between the engine and either). `tools/test-servers` installs them
//! into `target/tools/bin` (or `$AHEAD_TOOLS_BIN`); `.ci/run` runs it first.
//!
//! Where a server is missing, [`need`] says which and the test skips, unless
//! `AHEAD_REQUIRE_SERVERS=1` (CI), where that is a failure. Every server listens on 127.0.0.1
//! only, on a port the system picked, and is killed when its handle drops.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The access key and secret the test gateway is started with (never a real account's).
pub const ACCESS_KEY: &str = "ahead-test-access";
pub const SECRET_KEY: &str = "ahead-test-secret-not-real";
pub const REGION: &str = "us-east-1";

/// The environment that points the engine (or `ahead`'s commands) at the gateway at
/// `endpoint`, with the tests' credentials.
pub fn s3_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
        ("AWS_REGION", REGION.into()),
        ("AWS_ENDPOINT_URL", endpoint.into()),
    ]
}

/// `Ok(server)`, or the test's skip: a message naming what is missing, or a panic under
/// `AHEAD_REQUIRE_SERVERS=1`.
pub fn need<T>(what: Result<T, String>) -> Option<T> {
    match what {
        Ok(t) => Some(t),
        Err(why) if std::env::var("AHEAD_REQUIRE_SERVERS").is_ok_and(|v| v == "1") => {
            panic!("a test server is required here (AHEAD_REQUIRE_SERVERS=1): {why}")
        }
        Err(why) => {
            eprintln!("skipped: {why} (run tools/test-servers to install it)");
            None
        }
    }
}

/// Where `name` is: `$AHEAD_TOOLS_BIN`, the workspace's `target/tools/bin`, or `PATH`.
pub fn tool(name: &str) -> Result<PathBuf, String> {
    let dirs = [
        std::env::var_os("AHEAD_TOOLS_BIN").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin")),
    ];
    let found = dirs
        .into_iter()
        .flatten()
        .map(|d| d.join(name))
        .chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join(name)),
        )
        .chain([Path::new("/usr/sbin").join(name)])
        .find(|p| p.is_file());
    found.ok_or_else(|| format!("{name} is not installed"))
}

/// A fresh directory under the system's temporary one, removed with the server using it.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(what: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ahead-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process on a loopback port, killed on drop.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    /// Its files (a gateway's buckets, a web server's documents), removed after it stops.
    pub dir: Scratch,
}

impl Server {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port on 127.0.0.1 nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start `command` and wait until `addr` accepts connections (10 s at most).
fn start(
    mut command: Command,
    addr: SocketAddr,
    dir: Scratch,
    what: &str,
) -> Result<Server, String> {
    let log = std::fs::File::create(dir.0.join("server.log")).map_err(|e| e.to_string())?;
    let child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("{what} would not start: {e}"))?;
    let mut server = Server { child, addr, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return Ok(server);
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            let log = std::fs::read_to_string(server.dir.0.join("server.log")).unwrap_or_default();
            return Err(format!("{what} exited at start ({status}): {}", log.trim()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{what} did not listen on {addr} within 10 s"))
}

/// versitygw over a fresh directory, with one bucket per name in `buckets` (a bucket of its
/// posix backend is a directory at the top), keeping connections alive between requests, as
/// object stores do.
pub fn versitygw(buckets: &[&str]) -> Result<Server, String> {
    versitygw_with(buckets, true)
}

/// [`versitygw`], closing each connection after its answer unless `keep_alive` (versitygw's
/// own default): a test of faults that toxiproxy draws once a connection wants a connection a
/// request.
pub fn versitygw_with(buckets: &[&str], keep_alive: bool) -> Result<Server, String> {
    let bin = tool("versitygw")?;
    let dir = Scratch::new("versitygw");
    let root = dir.0.join("root");
    for b in buckets {
        std::fs::create_dir_all(root.join(b)).unwrap();
    }
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut command = Command::new(bin);
    command
        .args([
            "--access", ACCESS_KEY, "--secret", SECRET_KEY, "--region", REGION,
        ])
        .arg("--quiet")
        .args(keep_alive.then_some("--keep-alive"))
        .args(["--port", &addr.to_string(), "posix"])
        .arg(&root);
    start(command, addr, dir, "versitygw")
}

/// lighttpd serving a fresh directory (its `dir.0/docs`), as the test user.
pub fn lighttpd() -> Result<Server, String> {
    lighttpd_serving(false, Validators::Both)
}

/// lighttpd serving HTTPS (its TLS module) with a self-signed certificate made here for
/// 127.0.0.1: at `https://{addr}`.
pub fn lighttpd_https() -> Result<Server, String> {
    lighttpd_serving(true, Validators::Both)
}

/// What lighttpd tells of a file's version: ETag and Last-Modified (its default), or less,
/// as some servers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validators {
    Both,
    LastModifiedOnly,
    Neither,
}

/// lighttpd serving HTTP with only the `validators` given.
pub fn lighttpd_with(validators: Validators) -> Result<Server, String> {
    lighttpd_serving(false, validators)
}

/// lighttpd serving HTTP with `extra(dir, port)` added to its configuration (modules with
/// `server.modules += ( ... )`): `dir` is its scratch directory (documents in `dir/docs`),
/// `port` the one it listens on.
pub fn lighttpd_configured(extra: impl Fn(&Path, u16) -> String) -> Result<Server, String> {
    lighttpd_conf(false, Validators::Both, extra)
}

fn lighttpd_serving(tls: bool, validators: Validators) -> Result<Server, String> {
    lighttpd_conf(tls, validators, |_, _| String::new())
}

fn lighttpd_conf(
    tls: bool,
    validators: Validators,
    extra: impl Fn(&Path, u16) -> String,
) -> Result<Server, String> {
    let bin = tool("lighttpd")?;
    let dir = Scratch::new("lighttpd");
    let docs = dir.0.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let port = free_port();
    let mut conf = format!(
        "server.document-root = \"{}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
         server.errorlog = \"{}\"\n\
         mimetype.assign = ( \"\" => \"application/octet-stream\" )\n",
        docs.display(),
        dir.0.join("error.log").display()
    );
    if tls {
        if !Path::new("/usr/lib/lighttpd/mod_openssl.so").exists() {
            return Err("lighttpd's TLS module (lighttpd-mod-openssl) is not installed".into());
        }
        let pem = dir.0.join("server.pem");
        let made = Command::new(tool("openssl")?)
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                // A server's certificate, not a CA's: refused for its issuer, as a real one is.
                "-addext",
                "basicConstraints=critical,CA:FALSE",
            ])
            .arg("-keyout")
            .arg(&pem)
            .arg("-out")
            .arg(&pem)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("openssl would not run: {e}"))?;
        if !made.success() {
            return Err(format!("openssl could not make a certificate ({made})"));
        }
        conf += &format!(
            "server.modules = ( \"mod_openssl\" )\nssl.engine = \"enable\"\n\
             ssl.pemfile = \"{}\"\n",
            pem.display()
        );
    } else if validators == Validators::Neither {
        conf += "server.modules = ( \"mod_setenv\" )\n\
                 setenv.set-response-header = ( \"Last-Modified\" => \"\" )\n";
    } else {
        conf += "server.modules = ( )\n";
    }
    if validators != Validators::Both {
        // No stat cache either: a file replaced is served as it is now, size and all.
        conf += "static-file.etags = \"disable\"\nserver.stat-cache-engine = \"disable\"\n";
    }
    conf += &extra(&dir.0, port);
    let path = dir.0.join("lighttpd.conf");
    std::fs::write(&path, conf).unwrap();
    let mut command = Command::new(bin);
    command.arg("-D").arg("-f").arg(&path);
    start(
        command,
        format!("127.0.0.1:{port}").parse().unwrap(),
        dir,
        "lighttpd",
    )
}

/// A toxiproxy server: proxies between the engine and a server, with toxics on them.
pub struct Toxiproxy {
    pub server: Server,
}

/// One proxy: where to connect instead of the server.
pub struct Proxy {
    pub name: String,
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
}

impl Proxy {
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }
}

pub fn toxiproxy() -> Result<Toxiproxy, String> {
    let bin = tool("toxiproxy-server")?;
    let dir = Scratch::new("toxiproxy");
    let port = free_port();
    let mut command = Command::new(bin);
    command.args(["-host", "127.0.0.1", "-port", &port.to_string()]);
    let server = start(
        command,
        format!("127.0.0.1:{port}").parse().unwrap(),
        dir,
        "toxiproxy",
    )?;
    Ok(Toxiproxy { server })
}

impl Toxiproxy {
    /// A new proxy to `upstream`, on a port of its choosing.
    pub fn proxy(&self, name: &str, upstream: SocketAddr) -> Proxy {
        let reply = self.create(name, "127.0.0.1:0", upstream);
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        Proxy {
            name: name.into(),
            listen: v["listen"].as_str().unwrap().parse().unwrap(),
            upstream,
        }
    }

    /// Make the proxy `name` on `listen` to `upstream`, enabled: toxiproxy's answer.
    fn create(&self, name: &str, listen: &str, upstream: SocketAddr) -> String {
        let body = format!(
            r#"{{"name":"{name}","listen":"{listen}","upstream":"{upstream}","enabled":true}}"#
        );
        self.call("POST", "/proxies", &body)
    }

    /// Every toxic off `proxy` at once, and every connection through it closed: the proxy is
    /// deleted and made again on the same port. Taking off a `limit_data` toxic one at a time
    /// can hang toxiproxy (2.5.0) until its API times out (503): a connection the toxic had
    /// not cut yet but whose client went away leaves the toxic blocked handing its next chunk
    /// to a writer that is gone, and removing the toxic waits for it. A new proxy has no
    /// such connection to wait for.
    pub fn heal(&self, proxy: &Proxy) {
        self.call("DELETE", &format!("/proxies/{}", proxy.name), "");
        self.create(&proxy.name, &proxy.listen.to_string(), proxy.upstream);
    }

    /// Add a toxic to `proxy`: `kind` (latency, bandwidth, reset_peer, timeout, limit_data,
    /// ...), on `stream` (upstream or downstream), applied to `toxicity` of its connections,
    /// with `attributes` as JSON. Returns its name.
    pub fn toxic(
        &self,
        proxy: &Proxy,
        kind: &str,
        stream: &str,
        toxicity: f64,
        attributes: &str,
    ) -> String {
        let name = format!("{kind}_{stream}");
        let body = format!(
            r#"{{"name":"{name}","type":"{kind}","stream":"{stream}","toxicity":{toxicity},"attributes":{attributes}}}"#
        );
        self.call("POST", &format!("/proxies/{}/toxics", proxy.name), &body);
        name
    }

    pub fn remove_toxic(&self, proxy: &Proxy, toxic: &str) {
        self.call(
            "DELETE",
            &format!("/proxies/{}/toxics/{toxic}", proxy.name),
            "",
        );
    }

    /// Latency each way, as the issue's benchmarks inject it.
    pub fn latency_each_way(&self, proxy: &Proxy, ms: u64) {
        for stream in ["upstream", "downstream"] {
            self.toxic(
                proxy,
                "latency",
                stream,
                1.0,
                &format!(r#"{{"latency":{ms}}}"#),
            );
        }
    }

    /// One call of toxiproxy's HTTP API; panics on a non-2xx answer.
    fn call(&self, method: &str, path: &str, body: &str) -> String {
        let (status, reply) = http(self.server.addr, method, path, body);
        assert!(
            (200..300).contains(&status),
            "toxiproxy {method} {path}: {status} {reply}"
        );
        reply
    }
}

/// A plain HTTP/1.1 request with `Connection: close`: status and body.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// A front for an S3 server that answers every `every`-th request with 503 SlowDown, as S3
/// does when a prefix is read too fast, and passes the others through unchanged. Requests
/// are told apart by the blank line ending their head (the engine sends only GETs and HEADs,
/// which have no body). Stops when dropped.
pub struct SlowDown {
    pub addr: SocketAddr,
    requests: std::sync::Arc<AtomicU32>,
    sent: std::sync::Arc<AtomicU32>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

const SLOW_DOWN: &str = "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n\
    Content-Length: 87\r\nConnection: close\r\n\r\n\
    <Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";

impl SlowDown {
    pub fn start(upstream: SocketAddr, every: u32) -> SlowDown {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU32::new(0));
        let sent = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (requests, sent, stop) = (requests.clone(), sent.clone(), stop.clone());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let (requests, sent) = (requests.clone(), sent.clone());
                    std::thread::spawn(move || {
                        let _ = relay(client, upstream, every, &requests, &sent);
                    });
                }
            })
        };
        SlowDown {
            addr,
            requests,
            sent,
            stop,
            acceptor: Some(acceptor),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// 503s answered so far.
    pub fn slow_downs(&self) -> u32 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for SlowDown {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr); // wakes the acceptor
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// One client connection: requests pass to `upstream` and answers back, but for every
/// `every`-th request, answered 503 here and the connection closed.
fn relay(
    mut client: TcpStream,
    upstream: SocketAddr,
    every: u32,
    requests: &AtomicU32,
    sent: &AtomicU32,
) -> std::io::Result<()> {
    let mut server = TcpStream::connect(upstream)?;
    let (mut back_from, mut back_to) = (server.try_clone()?, client.try_clone()?);
    let answers = std::thread::spawn(move || {
        let _ = std::io::copy(&mut back_from, &mut back_to);
        let _ = back_to.shutdown(std::net::Shutdown::Both);
    });
    let mut buf = [0u8; 16 << 10];
    // The last bytes of the head being read (to find its end across reads), and whether
    // this request is to be refused.
    let mut tail: Vec<u8> = Vec::new();
    let mut at_start = true;
    let mut refuse = false;
    loop {
        let n = client.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            if at_start {
                refuse = requests.fetch_add(1, Ordering::Relaxed) % every == every - 1;
                at_start = false;
            }
            tail.extend_from_slice(chunk);
            let end = tail.windows(4).position(|w| w == b"\r\n\r\n");
            let used = match end {
                Some(i) => chunk.len() - (tail.len() - (i + 4)),
                None => chunk.len(),
            };
            if !refuse {
                server.write_all(&chunk[..used])?;
            }
            chunk = &chunk[used..];
            if end.is_some() {
                tail.clear();
                at_start = true;
                if refuse {
                    sent.fetch_add(1, Ordering::Relaxed);
                    client.write_all(SLOW_DOWN.as_bytes())?;
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    let _ = server.shutdown(std::net::Shutdown::Both);
                    let _ = answers.join();
                    return Ok(());
                }
            } else if tail.len() > 3 {
                tail.drain(..tail.len() - 3);
            }
        }
    }
    let _ = server.shutdown(std::net::Shutdown::Write);
    let _ = answers.join();
    Ok(())
}
