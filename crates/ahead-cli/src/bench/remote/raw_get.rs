//! The link's ceiling measured by the cheapest client that can still be called one: blocking
//! sockets, one thread and one kept-alive connection per GET in flight, HTTP/1.1 ranged GETs
//! written by hand and their bodies `read(2)` into a 1 MiB buffer that nothing reads.
//!
//! Why not an HTTP crate: on a loopback link the server, the proxy and the client share this
//! machine's CPUs, so a client that spends more CPU per byte than the engine measures itself,
//! not the link: curl (16 KiB reads, a poll per read) spent 1.4 to 2.1 CPU seconds a GiB where
//! the engine spent 0.8 to 1.3, and the engine passed it (BENCHMARKS.md). This client does no
//! more than the link asks of any client: a request, a status line and headers parsed, the
//! body's bytes into memory. It takes plain `http://` URLs only (a proxied link is always
//! plain), an `s3://` object as a URL presigned by object_store's S3 signer, so that no
//! signing runs while the clock does. Each GET's status, length and body are checked: a
//! ceiling that counted short bodies would be no bound.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How much of the body one `read(2)` may take.
const BODY_READ: usize = 1 << 20;
/// The most a response's status line and headers may take.
const HEAD_MAX: usize = 64 << 10;

/// A plain `http://` URL taken apart for a request: where to connect, the `Host` header, and
/// the request target (path and query, as the URL has them encoded).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
}

impl Target {
    /// `url` if this client can reach it: `http://host[:port]/path[?query]`, no user name or
    /// password (those would need a header this client does not write).
    pub(super) fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("not a plain http:// URL: {}", scheme_of(url)))?;
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if host.contains('@') {
            return Err("a URL with credentials".into());
        }
        if host.is_empty() {
            return Err("a URL with no host".into());
        }
        let with_port = if host.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']')) {
            host.to_string()
        } else {
            format!("{host}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("cannot resolve {host}"))?;
        Ok(Target {
            addr,
            host: host.to_string(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.to_string()
            },
        })
    }
}

/// The scheme of `url`, for an error (never the rest: it may hold a signature).
fn scheme_of(url: &str) -> &str {
    url.split_once("://").map_or("no scheme", |(s, _)| s)
}

/// The `s3://bucket/key` URLs as plain URLs at `endpoint` (path-style), presigned for GETs
/// for an hour by object_store's S3 signer with the `AWS_*` environment's credentials and
/// region, as the engine's store signs: one store a bucket (building one loads the TLS roots
/// of its client). The bench has opened its object through the engine before, so the TLS
/// provider such a client wants is installed.
pub(super) fn presigned(urls: &[&str], endpoint: &str) -> Result<Vec<String>, String> {
    use object_store::signer::{Method, Signer};
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let mut stores: Vec<(&str, object_store::aws::AmazonS3)> = Vec::new();
    let mut signed = Vec::with_capacity(urls.len());
    for url in urls {
        let (bucket, key) = url
            .strip_prefix("s3://")
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(|| format!("{url}: not an s3://bucket/key URL"))?;
        let at = match stores.iter().position(|(b, _)| *b == bucket) {
            Some(at) => at,
            None => {
                let store = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_endpoint(endpoint)
                    .with_allow_http(true)
                    .build()
                    .map_err(|e| format!("cannot sign for bucket {bucket}: {e}"))?;
                stores.push((bucket, store));
                stores.len() - 1
            }
        };
        let path = object_store::path::Path::from(key);
        let mut signing =
            std::pin::pin!(stores[at]
                .1
                .signed_url(Method::GET, &path, Duration::from_secs(3600)));
        // Keys from the environment sign at once; credentials that must be fetched first (a
        // metadata service, a web identity) would need a runtime this client does not start.
        signed.push(
            match signing
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(Ok(url)) => url.to_string(),
                Poll::Ready(Err(e)) => return Err(format!("cannot sign a GET of {url}: {e}")),
                Poll::Pending => {
                    return Err("its credentials are not keys in the environment".into())
                }
            },
        );
    }
    Ok(signed)
}

/// One ranged GET: which target, and the bytes from `offset`.
pub(super) struct Get {
    pub(super) target: usize,
    pub(super) offset: u64,
    pub(super) len: u64,
}

/// What a fetch did: the body bytes read, from the first connect to the last byte, and the
/// CPU time its threads spent.
pub(super) struct Fetched {
    pub(super) bytes: u64,
    pub(super) elapsed: Duration,
    pub(super) cpu_s: f64,
}

/// `gets` over `targets` by `parallel` threads at once, each taking the next GET as its last
/// one ends.
pub(super) fn fetch(targets: &[Target], gets: &[Get], parallel: usize) -> Result<Fetched, String> {
    let parallel = parallel.clamp(1, gets.len().max(1));
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let results: Vec<Result<(u64, f64), String>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..parallel)
            .map(|_| {
                let next = &next;
                s.spawn(move || {
                    let cpu = ahead::os::thread_cpu_seconds();
                    let mut worker = Worker {
                        conn: None,
                        buf: vec![0u8; BODY_READ],
                    };
                    let mut bytes = 0;
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(get) = gets.get(at) else { break };
                        bytes += worker.get(&targets[get.target], get.offset, get.len)?;
                    }
                    Ok((bytes, ahead::os::thread_cpu_seconds() - cpu))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a GET thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let (mut bytes, mut cpu_s) = (0, 0.0);
    for r in results {
        let (b, c) = r?;
        bytes += b;
        cpu_s += c;
    }
    Ok(Fetched {
        bytes,
        elapsed,
        cpu_s,
    })
}

/// One thread's connection (kept alive between its GETs while the server allows) and buffer.
struct Worker {
    conn: Option<(SocketAddr, TcpStream)>,
    buf: Vec<u8>,
}

impl Worker {
    /// One GET of `len` bytes from `offset`: the body's length, once all of it is read. A
    /// kept-alive connection the server has closed since (no answer at all) is replaced once.
    fn get(&mut self, target: &Target, offset: u64, len: u64) -> Result<u64, String> {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nRange: bytes={}-{}\r\n\r\n",
            target.path,
            target.host,
            offset,
            offset + len - 1
        );
        let reused = matches!(&self.conn, Some((addr, _)) if *addr == target.addr);
        if !reused {
            self.connect(target)?;
        }
        match self.exchange(&request, offset, len) {
            Err(Exchange::NoAnswer(_)) if reused => {
                self.connect(target)?;
                self.exchange(&request, offset, len)
            }
            other => other,
        }
        .map_err(|e| match e {
            Exchange::NoAnswer(why) | Exchange::Failed(why) => {
                format!("GET of bytes {offset}+{len}: {why}")
            }
        })
    }

    fn connect(&mut self, target: &Target) -> Result<(), String> {
        let stream = TcpStream::connect(target.addr)
            .map_err(|e| format!("cannot connect to {}: {e}", target.addr))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        self.conn = Some((target.addr, stream));
        Ok(())
    }

    /// Write `request` and read its answer to the end of the body.
    fn exchange(&mut self, request: &str, offset: u64, len: u64) -> Result<u64, Exchange> {
        let (_, stream) = self.conn.as_mut().expect("connected");
        if let Err(e) = stream.write_all(request.as_bytes()) {
            self.conn = None;
            return Err(Exchange::NoAnswer(format!("writing the request: {e}")));
        }
        // The status line and headers, and whatever of the body came with them.
        let mut filled = 0;
        let head_end = loop {
            if let Some(i) = find_head_end(&self.buf[..filled]) {
                break i;
            }
            if filled >= HEAD_MAX {
                self.conn = None;
                return Err(Exchange::Failed(format!(
                    "no end of headers in {HEAD_MAX} bytes"
                )));
            }
            let end = (filled + BODY_READ).min(HEAD_MAX);
            match stream.read(&mut self.buf[filled..end]) {
                Ok(0) if filled == 0 => {
                    self.conn = None;
                    return Err(Exchange::NoAnswer(
                        "the server closed the connection".into(),
                    ));
                }
                Ok(0) => {
                    self.conn = None;
                    return Err(Exchange::Failed("the connection closed mid-headers".into()));
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if filled == 0 => {
                    self.conn = None;
                    return Err(Exchange::NoAnswer(e.to_string()));
                }
                Err(e) => {
                    self.conn = None;
                    return Err(Exchange::Failed(e.to_string()));
                }
            }
        };
        let head = Head::parse(&self.buf[..head_end]).map_err(Exchange::Failed)?;
        let whole_object = head.status == 200 && offset == 0;
        if head.status != 206 && !whole_object {
            self.conn = None;
            return Err(Exchange::Failed(format!("HTTP status {}", head.status)));
        }
        if head.content_length != Some(len) {
            self.conn = None;
            return Err(Exchange::Failed(format!(
                "{} bytes in the answer's Content-Length where {len} were asked for",
                head.content_length
                    .map_or("no".to_string(), |n| n.to_string())
            )));
        }
        let came_with_head = (filled - head_end) as u64;
        if came_with_head > len {
            self.conn = None;
            return Err(Exchange::Failed("more bytes than the body's length".into()));
        }
        let mut left = len - came_with_head;
        while left > 0 {
            let want = (left as usize).min(BODY_READ);
            match stream.read(&mut self.buf[..want]) {
                Ok(0) => {
                    self.conn = None;
                    return Err(Exchange::Failed(format!(
                        "the connection closed with {left} of {len} bytes to come"
                    )));
                }
                Ok(n) => left -= n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.conn = None;
                    return Err(Exchange::Failed(e.to_string()));
                }
            }
        }
        if head.close {
            self.conn = None;
        }
        Ok(len)
    }
}

/// Why an exchange failed: before any answer came (worth one retry on a new connection when
/// the old one had been kept alive), or after.
enum Exchange {
    NoAnswer(String),
    Failed(String),
}

/// Where the headers end (the index past their blank line), if they have.
fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// What this client needs of a response's head.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    content_length: Option<u64>,
    /// The server closes the connection after this answer.
    close: bool,
}

impl Head {
    fn parse(head: &[u8]) -> Result<Head, String> {
        let text = std::str::from_utf8(head).map_err(|_| "headers not UTF-8".to_string())?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.split(' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(format!("not an HTTP/1 answer: {status_line:?}"));
        }
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status in {status_line:?}"))?;
        let mut head = Head {
            status,
            content_length: None,
            close: version == "HTTP/1.0",
        };
        for line in lines.filter(|l| !l.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                return Err(format!("a header line with no colon: {line:?}"));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                head.content_length = Some(
                    value
                        .parse()
                        .map_err(|_| format!("Content-Length {value:?}"))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(format!(
                    "a body sent as {value} (this client reads lengths only)"
                ));
            } else if name.eq_ignore_ascii_case("connection") {
                head.close = value.eq_ignore_ascii_case("close");
            }
        }
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_taken_apart_for_its_request() {
        let t = Target::parse("http://127.0.0.1:9000/bench/object.bin?X-Amz-Signature=ab").unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:9000");
        assert_eq!(t.path, "/bench/object.bin?X-Amz-Signature=ab");
        assert_eq!(Target::parse("http://127.0.0.1").unwrap().path, "/");
        assert_eq!(Target::parse("http://127.0.0.1").unwrap().addr.port(), 80);
        let refused = |url: &str| Target::parse(url).unwrap_err();
        assert!(refused("https://127.0.0.1/x").contains("https"));
        assert!(refused("http://me:secret@127.0.0.1/x").contains("credentials"));
        assert!(!refused("http://me:secret@127.0.0.1/x").contains("secret"));
    }

    #[test]
    fn a_head_says_status_length_and_whether_the_connection_closes() {
        let head = |s: &str| Head::parse(s.as_bytes());
        assert_eq!(
            head("HTTP/1.1 206 Partial Content\r\nContent-Length: 42\r\nX: y\r\n\r\n").unwrap(),
            Head {
                status: 206,
                content_length: Some(42),
                close: false
            }
        );
        assert!(
            head("HTTP/1.1 206 OK\r\nconnection: Close\r\n\r\n")
                .unwrap()
                .close
        );
        assert!(head("HTTP/1.0 200 OK\r\n\r\n").unwrap().close);
        assert!(head("HTTP/1.1 206 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(head("SSH-2.0\r\n\r\n").is_err());
        assert!(head("HTTP/1.1 206 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r\nbody"), Some(19));
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n"), None);
    }

    /// Against a server that answers each request as it is asked (one connection kept alive
    /// for two GETs, the second answer closing it): the bytes counted are the bodies', and a
    /// short body is an error.
    #[test]
    fn gets_read_whole_bodies_and_refuse_short_ones() {
        use std::io::BufRead;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut served = 0;
            for conn in listener.incoming().take(2) {
                let conn = conn.unwrap();
                let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
                let mut out = conn;
                loop {
                    let mut range = None;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap() == 0 {
                            break;
                        }
                        if let Some(r) = line.strip_prefix("Range: bytes=") {
                            let (a, b) = r.trim().split_once('-').unwrap();
                            range = Some((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let Some((a, b)) = range else { break };
                    served += 1;
                    let len = b - a + 1;
                    // The third GET's answer is cut short; the second closes its connection.
                    let (sent, close) = match served {
                        2 => (len, "Connection: close\r\n"),
                        3 => (len / 2, ""),
                        _ => (len, ""),
                    };
                    write!(
                        out,
                        "HTTP/1.1 206 Partial Content\r\nContent-Length: {len}\r\n{close}\r\n"
                    )
                    .unwrap();
                    out.write_all(&vec![7u8; sent as usize]).unwrap();
                    if !close.is_empty() || served == 3 {
                        break;
                    }
                }
            }
        });
        let targets = [Target::parse(&format!("http://{addr}/o")).unwrap()];
        let gets = |lens: &[u64]| -> Vec<Get> {
            lens.iter()
                .map(|&len| Get {
                    target: 0,
                    offset: 0,
                    len,
                })
                .collect()
        };
        let done = fetch(&targets, &gets(&[3 << 20, 100]), 1).unwrap();
        assert_eq!(done.bytes, (3 << 20) + 100);
        let short = fetch(&targets, &gets(&[1000]), 1).err().unwrap();
        assert!(short.contains("to come"), "{short}");
        server.join().unwrap();
    }
}
