//! The link's ceiling over TLS, where the raw client (`raw_get.rs`) cannot go: curl, many
//! ranged GETs at once. A yardstick measured through the engine's own HTTP stack
//! (object_store, hyper, the runtime it shares with the engine's readers) would carry that
//! stack's costs into the bound the engine is held to; curl's are its own, though more a byte
//! than the engine's (16 KiB reads), so on a link the machine's CPUs bound it can be passed.
//!
//! `parallel` curl processes each take every `parallel`-th GET in turn, one after another on
//! one connection (as a worker starts its next GET as its last ends). An `s3://` object is
//! reached path-style at the endpoint, its GETs signed by curl (`--aws-sigv4`, curl 7.75 and
//! later) with the `AWS_*` credentials and an unsigned payload's hash header (which S3 asks
//! of every signed request, and curl 7.88 does not add). Each process reads its GETs from a config file of its
//! own (mode 0600, removed after), so no credential is on a command line, and each GET's
//! `size_download` is checked against the bytes asked for.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How curl signs an S3 GET.
pub(super) struct Signing {
    pub(super) region: String,
    pub(super) access_key: String,
    pub(super) secret_key: String,
}

impl Signing {
    /// From the `AWS_*` environment, as the engine's store reads it (region `us-east-1` if
    /// none is set).
    pub(super) fn from_env() -> Result<Signing, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Ok(Signing {
            region: var("AWS_REGION")
                .or_else(|| var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into()),
            access_key: var("AWS_ACCESS_KEY_ID")
                .ok_or("curl's ceiling for s3:// needs AWS_ACCESS_KEY_ID")?,
            secret_key: var("AWS_SECRET_ACCESS_KEY")
                .ok_or("curl's ceiling for s3:// needs AWS_SECRET_ACCESS_KEY")?,
        })
    }
}

/// One ranged GET: the URL curl fetches, and the bytes from `offset`.
pub(super) struct Get {
    pub(super) url: String,
    pub(super) offset: u64,
    pub(super) len: u64,
}

/// curl, where it is installed and signs S3 requests.
pub(super) struct Curl {
    binary: PathBuf,
}

impl Curl {
    /// curl from `PATH`, or why it cannot serve (missing, or older than `--aws-sigv4`).
    pub(super) fn find() -> Result<Curl, String> {
        let out = Command::new("curl")
            .arg("--help")
            .arg("all")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("curl is not installed ({e})"))?;
        if !String::from_utf8_lossy(&out.stdout).contains("--aws-sigv4") {
            return Err("this curl has no --aws-sigv4 (curl 7.75 or later signs S3 GETs)".into());
        }
        Ok(Curl {
            binary: PathBuf::from("curl"),
        })
    }

    /// `gets` fetched by `parallel` curl processes at once: the bytes, and how long from the
    /// first process's start to the last one's end.
    pub(super) fn fetch(
        &self,
        gets: &[Get],
        parallel: usize,
        signing: Option<&Signing>,
        scratch: &std::path::Path,
    ) -> Result<(u64, Duration), String> {
        let parallel = parallel.clamp(1, gets.len().max(1));
        let mut configs = Vec::with_capacity(parallel);
        for worker in 0..parallel {
            let path = scratch.join(format!("curl-{}-{worker}.conf", std::process::id()));
            let text: Vec<String> = gets
                .iter()
                .skip(worker)
                .step_by(parallel)
                .map(|get| config_of(get, signing))
                .collect();
            let text = text.join("next\n");
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            f.write_all(text.as_bytes())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            configs.push(path);
        }
        let start = Instant::now();
        let children: Vec<_> = configs
            .iter()
            .map(|config| {
                Command::new(&self.binary)
                    .arg("--config")
                    .arg(config)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot start curl: {e}"))
            })
            .collect::<Result<_, _>>()?;
        let outputs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().map_err(|e| format!("curl: {e}")))
            .collect::<Result<_, _>>()?;
        let elapsed = start.elapsed();
        for config in &configs {
            let _ = std::fs::remove_file(config);
        }
        let mut bytes = 0u64;
        for (worker, out) in outputs.iter().enumerate() {
            if !out.status.success() {
                return Err(format!(
                    "curl failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let sizes: Vec<u64> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            let asked: Vec<u64> = gets
                .iter()
                .skip(worker)
                .step_by(parallel)
                .map(|g| g.len)
                .collect();
            if sizes != asked {
                return Err(format!(
                    "curl's GETs brought {sizes:?} bytes where {asked:?} were asked for"
                ));
            }
            bytes += sizes.iter().sum::<u64>();
        }
        Ok((bytes, elapsed))
    }
}

/// One GET in curl's config syntax (a process's GETs are joined by `next`, which starts the
/// next URL's options).
fn config_of(get: &Get, signing: Option<&Signing>) -> String {
    let mut text = format!(
        "url = \"{}\"\nrange = \"{}-{}\"\noutput = \"/dev/null\"\nwrite-out = \"%{{size_download}}\\n\"\nsilent\nshow-error\nfail\n",
        get.url,
        get.offset,
        get.offset + get.len - 1
    );
    if let Some(s) = signing {
        text.push_str(&format!(
            "aws-sigv4 = \"aws:amz:{}:s3\"\nuser = \"{}:{}\"\nheader = \"x-amz-content-sha256: UNSIGNED-PAYLOAD\"\n",
            s.region, s.access_key, s.secret_key
        ));
    }
    text
}

/// The plain HTTP URL of `url` as curl reaches it: an `s3://bucket/key` path-style at
/// `endpoint` (the proxy's front, or `AWS_ENDPOINT_URL`); anything else as it is.
pub(super) fn http_url(url: &str, endpoint: Option<&str>) -> Result<String, String> {
    match url.strip_prefix("s3://") {
        None => Ok(url.to_string()),
        Some(path) => {
            let endpoint = endpoint
                .map(str::to_string)
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
                .ok_or("curl's ceiling for s3:// needs an endpoint (AWS_ENDPOINT_URL)")?;
            Ok(format!("{}/{path}", endpoint.trim_end_matches('/')))
        }
    }
}
