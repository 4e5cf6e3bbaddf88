//! `remote`: an object behind a URL (`s3://bucket/key`, `http://host/path`,
//! `https://host/path`), read with plain ranged GETs through the `object_store` crate.
//!
//! The engine drives it as any source: the policies decide what to fetch, one ranged GET per
//! request the engine issues (object_store's own coalescing, `get_ranges`, is not used: the
//! policy is the one deciding sizes). A remote source has no descriptor, so it is read through
//! [`Source::read`] on a pool of threads (the `threads` backend's, or the one `uring` keeps
//! for such sources): each worker waits on one GET, which runs on a small tokio runtime, and
//! the pool's size is how many are in flight.
//!
//! **Sized for the link.** Its [`Limits`] give requests of up to 8 MiB (what S3's guidance and
//! mountpoint-s3 use for ranged GETs) and start the engine's meter from the simulator's model
//! of an object store; from the first GETs on, the meter measures latency to first byte and
//! bandwidth, and `adaptive` keeps latency x bandwidth in flight (see `engine/meter.rs`).
//!
//! **Pinned to what was opened.** Opening asks the store for the object's metadata (a HEAD):
//! its size, and its ETag (or, where the store gives none, its Last-Modified). Every GET then
//! carries `If-Match` with that ETag (or `If-Unmodified-Since` with that time), and every
//! answer's ETag (or Last-Modified) and size must be the opened ones, so a changed object fails
//! the next read with a clear error instead of mixing two versions in the cache. A server that
//! gives neither (some plain web servers) leaves nothing to pin but the size: a same-size
//! replacement mid-read goes unseen, which the open says once ([`FallbackKind::Unpinned`],
//! `File::unpinned`; `ahead cat` warns, Python too). A GET whose body is shorter than the
//! range asked for (before the object's end) is an error, never short data: nothing
//! half-received enters the cache, since the engine only marks a request's pages cached when
//! its read succeeded in full.
//!
//! **Failures.** object_store retries each request on its own: connection errors, timeouts,
//! 5xx (S3's 503 SlowDown among them), 429 and 408, and a body cut off mid-way (resumed from
//! where it stopped, if the ETag still matches), with exponential backoff and decorrelated
//! jitter. [`RETRY`] bounds it: at most 4 retries per request, within 30 s (the remote options
//! `max_retries` and `retry_timeout` change both). 403 and 404 are not retried: they are clear
//! errors naming the object. A server that ignores `If-Match` is still caught: every answer's
//! ETag and size must be the opened ones.
//!
//! **Credentials and settings** come the way AWS tools take them: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, profile files
//! (object_store's `AmazonS3Builder::from_env`), overridden by the engine's
//! [`remote options`](crate::engine::EngineBuilder::remote_option) (object_store's config keys:
//! `endpoint`, `access_key_id`, `timeout`, ...). An `http://` endpoint is allowed (loopback
//! test servers). Errors name the object and what failed, never a key or a secret. TLS is
//! rustls with ring, which the first open installs as rustls's process-wide crypto provider
//! unless the program has installed its own.

use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientConfigKey, ClientOptions, GetOptions, GetRange, ObjectMeta, ObjectStore,
    ObjectStoreExt, RetryConfig,
};

use super::{url, Event, Identity, Limits, ObjectKey, OpenSettings, Opened, Registered, Source};
use crate::engine::backend::ReadOp;
use crate::engine::{Fallback, FallbackKind};
use crate::units::PAGE_SIZE;

/// This kind's entry in [`super::SOURCES`].
pub(crate) const REGISTERED: Registered = Registered {
    name: "remote",
    about: "an object behind a URL (s3://bucket/key, http(s)://host/path), read with ranged GETs",
    claims,
    open,
};

fn claims(name: &Path) -> bool {
    name.to_str().and_then(url::Scheme::of).is_some()
}

/// The largest GET, in KiB: S3's guidance for ranged GETs (8-16 MiB) and mountpoint-s3's part.
const REQUEST_KB: u64 = 8 << 10;

/// The runtime every remote source's GETs run on: object_store is async; the engine's
/// workers block on it.
fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("ahead-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("cannot start the remote runtime: {e}")))
}

/// How often and how long object_store retries one request (see the module comment).
pub(crate) const RETRY: RetryConfig = RetryConfig {
    backoff: BackoffConfig {
        init_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(2),
        base: 2.0,
    },
    max_retries: 4,
    retry_timeout: Duration::from_secs(30),
};

/// [`RETRY`], with the options `max_retries` (a count) and `retry_timeout` (seconds) taken
/// out of `options`, which keeps the rest for the store.
fn retry_config(
    name: &Path,
    options: &[(String, String)],
) -> io::Result<(RetryConfig, Vec<(String, String)>)> {
    let mut config = RETRY;
    let mut rest = Vec::new();
    for (key, value) in options {
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: remote option {key}: {value:?} is not a number",
                    name.display()
                ),
            )
        };
        match key.as_str() {
            "max_retries" => config.max_retries = value.parse().map_err(|_| bad())?,
            "retry_timeout" => {
                let secs: f64 = value.trim_end_matches('s').parse().map_err(|_| bad())?;
                config.retry_timeout = Duration::try_from_secs_f64(secs).map_err(|_| bad())?;
            }
            _ => rest.push((key.clone(), value.clone())),
        }
    }
    Ok((config, rest))
}

/// rustls's crypto provider is process-wide: ring, installed once before the first store is
/// built, unless the program embedding the engine installed its own first.
fn install_tls_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // An Err means a provider is already installed: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn open(name: &Path, settings: &OpenSettings) -> io::Result<Opened> {
    let url = parsed(name, false)?;
    let (store, location) = store_and_location(&url, settings.remote_options)?;
    open_object(PathBuf::from(&url.shown), store, location)
}

/// `name` taken apart as an object URL, or an error that names it (its password hidden).
fn parsed(name: &Path, prefix: bool) -> io::Result<url::ObjectUrl> {
    let text = name.to_str().ok_or_else(|| bad_url(name, "not UTF-8"))?;
    url::parse(text, prefix).map_err(|why| bad_url(name, &why))
}

/// The store `url` is in (built, or shared with earlier opens) and its place there.
fn store_and_location(
    url: &url::ObjectUrl,
    remote_options: &[(String, String)],
) -> io::Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    install_tls_provider();
    let name = Path::new(&url.shown);
    let (retry, options) = retry_config(name, remote_options)?;
    // The credentials of an HTTP URL are part of what a store is built from.
    let place = match &url.credentials {
        Some((user, password)) => format!("{} as {user}:{password}", url.place),
        None => url.place.clone(),
    };
    Ok(if url.scheme == url::Scheme::S3 {
        let store = shared_store(place, remote_options, || {
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(&url.authority)
                .with_retry(retry.clone());
            let mut endpoint = std::env::var("AWS_ENDPOINT_URL").ok();
            for (key, value) in options.iter() {
                let parsed: AmazonS3ConfigKey =
                    key.parse().map_err(|_| unknown_option(name, key))?;
                if parsed == AmazonS3ConfigKey::Endpoint {
                    endpoint = Some(value.clone());
                }
                builder = builder.with_config(parsed, value);
            }
            if endpoint.is_some_and(|e| e.starts_with("http://")) {
                builder = builder.with_allow_http(true);
            }
            let store = builder
                .build()
                .map_err(|e| store_error(name, "cannot reach it", e))?;
            Ok(Arc::new(store))
        })?;
        (store, ObjectPath::from(url.key.as_str()))
    } else {
        let store = shared_store(place, remote_options, || {
            let mut client = ClientOptions::new().with_allow_http(url.scheme == url::Scheme::Http);
            for (key, value) in options.iter() {
                let parsed: ClientConfigKey = key.parse().map_err(|_| unknown_option(name, key))?;
                client = client.with_config(parsed, value);
            }
            if let Some((user, password)) = &url.credentials {
                client = client.with_default_headers(basic_auth(user, password));
            }
            let store = object_store::http::HttpBuilder::new()
                .with_url(url.place.as_str())
                .with_client_options(client)
                .with_retry(retry)
                .build()
                .map_err(|e| store_error(name, "cannot reach it", e))?;
            Ok(Arc::new(store))
        })?;
        let location =
            ObjectPath::parse(url.key.as_str()).map_err(|e| bad_url(name, &e.to_string()))?;
        (store, location)
    })
}

/// The header that sends `user` and `password` as HTTP Basic authentication, marked
/// sensitive: never shown by the HTTP stack's `Debug`, and dropped by it on a redirect to
/// another host (scheme, host or port), as curl drops it.
fn basic_auth(user: &str, password: &str) -> reqwest::header::HeaderMap {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {token}"))
        .expect("base64 is a valid header value");
    value.set_sensitive(true);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    headers
}

/// What a listing or a stat tells of one entry of a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The entry's full URL (`s3://bucket/key`; a prefix ends with `/`).
    pub url: String,
    /// Size in bytes (0 for a prefix).
    pub size: u64,
    /// Whether it is a prefix that objects are under (a directory), not an object.
    pub is_prefix: bool,
    /// The object's ETag, where the store gives one.
    pub e_tag: Option<String>,
    /// When the object was last modified, in ns since the epoch (0 for a prefix).
    pub last_modified_ns: i64,
}

impl ObjectInfo {
    /// An object at `url`, as the store's metadata describes it.
    fn object(url: String, meta: &ObjectMeta) -> ObjectInfo {
        ObjectInfo {
            url,
            size: meta.size,
            is_prefix: false,
            e_tag: meta.e_tag.clone(),
            last_modified_ns: meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
        }
    }

    /// A prefix at `url` (ending with `/`).
    fn prefix(url: String) -> ObjectInfo {
        ObjectInfo {
            url,
            size: 0,
            is_prefix: true,
            e_tag: None,
            last_modified_ns: 0,
        }
    }
}

/// The object at `name` (a HEAD), or, for an S3 URL with no object but objects under it as
/// under a directory, that prefix.
pub(crate) fn stat(name: &Path, remote_options: &[(String, String)]) -> io::Result<ObjectInfo> {
    let url = parsed(name, true)?;
    let (store, location) = store_and_location(&url, remote_options)?;
    let (text, name) = (url.shown.as_str(), Path::new(&url.shown));
    let runtime = runtime()?;
    if !text.ends_with('/') && !location.as_ref().is_empty() {
        match runtime.block_on(store.head(&location)) {
            Ok(meta) => return Ok(ObjectInfo::object(text.to_string(), &meta)),
            Err(object_store::Error::NotFound { .. }) if text.starts_with("s3://") => {}
            Err(e) => return Err(store_error(name, "cannot stat it", e)),
        }
    }
    // No such object: a prefix if anything is listed under it (the bucket itself always is).
    let listed = runtime
        .block_on(store.list_with_delimiter(Some(&location)))
        .map_err(|e| store_error(name, "cannot list it", e))?;
    if location.as_ref().is_empty()
        || !listed.objects.is_empty()
        || !listed.common_prefixes.is_empty()
    {
        return Ok(ObjectInfo::prefix(format!(
            "{}/",
            text.trim_end_matches('/')
        )));
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such object (or no such bucket)", name.display()),
    ))
}

/// The objects and prefixes directly under `name` (`s3://bucket`, `s3://bucket/dir/`), one
/// level deep as `ls` shows a directory. HTTP servers have no listing: an error says so.
pub(crate) fn list(
    name: &Path,
    remote_options: &[(String, String)],
) -> io::Result<Vec<ObjectInfo>> {
    let url = parsed(name, true)?;
    let name = Path::new(&url.shown);
    if url.scheme != url::Scheme::S3 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: an HTTP server has no listing; open the object by its URL",
                name.display()
            ),
        ));
    }
    let bucket = url.authority.as_str();
    let (store, location) = store_and_location(&url, remote_options)?;
    let listed = runtime()?
        .block_on(store.list_with_delimiter(Some(&location)))
        .map_err(|e| store_error(name, "cannot list it", e))?;
    let mut out: Vec<ObjectInfo> = listed
        .common_prefixes
        .iter()
        .map(|p| ObjectInfo::prefix(format!("s3://{bucket}/{p}/")))
        .chain(
            listed
                .objects
                .iter()
                .map(|o| ObjectInfo::object(format!("s3://{bucket}/{}", o.location), o)),
        )
        .collect();
    out.sort_by(|a, b| a.url.cmp(&b.url));
    Ok(out)
}

/// The stores built so far, by everything that went into building one: opening many objects
/// of one bucket or server shares one client, its open connections and its TLS set-up (a new
/// client per object cost a connection's round trips and its buffers per object). Never
/// printed: the keys hold the options, credentials among them.
type StoreKey = (String, Vec<(String, String)>, Vec<(String, String)>);

/// How many stores are kept; past it they are all let go (their clients close when the
/// last object open on them closes).
const STORES_KEPT: usize = 32;

/// The store for `place` (`s3://bucket` or an origin) with `options`, from those built before
/// under the same `AWS_*` environment, or `build` it.
fn shared_store(
    place: String,
    options: &[(String, String)],
    build: impl FnOnce() -> io::Result<Arc<dyn ObjectStore>>,
) -> io::Result<Arc<dyn ObjectStore>> {
    static STORES: Mutex<Vec<(StoreKey, Arc<dyn ObjectStore>)>> = Mutex::new(Vec::new());
    let aws_env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_"))
        .collect();
    let key = (place, options.to_vec(), aws_env);
    let mut stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, store)) = stores.iter().find(|(k, _)| *k == key) {
        return Ok(store.clone());
    }
    let store = build()?;
    if stores.len() >= STORES_KEPT {
        stores.clear();
    }
    stores.push((key, store.clone()));
    Ok(store)
}

/// Open the object `info` describes (a stat or a listing the caller has just made) without
/// a HEAD of its own (see [`opened`]).
pub(crate) fn open_known(info: &ObjectInfo, settings: &OpenSettings) -> io::Result<Opened> {
    let name = Path::new(&info.url);
    if info.is_prefix {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{}: a prefix, not an object", name.display()),
        ));
    }
    let url = parsed(name, false)?;
    let (store, location) = store_and_location(&url, settings.remote_options)?;
    Ok(opened(info, store, location))
}

/// Open `location` in `store` as `name`: one HEAD for its size and version.
pub(crate) fn open_object(
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
) -> io::Result<Opened> {
    let meta = runtime()?
        .block_on(store.head(&location))
        .map_err(|e| store_error(&name, "cannot open it", e))?;
    let info = ObjectInfo::object(name.to_string_lossy().into_owned(), &meta);
    Ok(opened(&info, store, location))
}

/// The object `info` describes, pinned to that version: its size and ETag (a GET's
/// `If-Match` fails if the object changed since), or, where the store gives no ETag, its size
/// and Last-Modified.
fn opened(info: &ObjectInfo, store: Arc<dyn ObjectStore>, location: ObjectPath) -> Opened {
    let (version, notes, unpinned) = match (&info.e_tag, info.last_modified_ns) {
        (Some(tag), _) => (fingerprint(tag.as_bytes()), Vec::new(), None),
        // object_store reads a missing Last-Modified as the epoch.
        (None, 0) => {
            let why = format!(
                "{}: the server gives no ETag and no Last-Modified: a change of the object while it is read is seen only if its size changes (a same-size replacement may mix the two versions' bytes)",
                info.url
            );
            (
                0,
                vec![Fallback::new(FallbackKind::Unpinned, why.clone())],
                Some(why),
            )
        }
        (None, modified) => (
            modified as i128,
            vec![Fallback::new(
                FallbackKind::NoETag,
                format!(
                    "{}: no ETag: a change is told by size and Last-Modified (to the second) only",
                    info.url
                ),
            )],
            None,
        ),
    };
    Opened {
        identity: Identity {
            object: ObjectKey::Url(info.url.clone()),
            size: info.size,
            version,
        },
        source: Box::new(RemoteSource {
            name: PathBuf::from(&info.url),
            store,
            location,
            size: info.size,
            e_tag: info.e_tag.clone(),
            last_modified_ns: info.last_modified_ns,
            unpinned,
        }),
        notes,
    }
}

/// A version number from an ETag (FNV-1a: stable across runs, unlike the std hasher).
fn fingerprint(bytes: &[u8]) -> i128 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h as i128
}

fn unknown_option(name: &Path, key: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{}: unknown remote option {key:?} (object_store's config keys: endpoint, region, access_key_id, timeout, ...)",
            name.display()
        ),
    )
}

fn bad_url(name: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{}: not an object URL: {why}",
            url::redact(&name.to_string_lossy())
        ),
    )
}

/// An error of the store, named by the object and what was being done. object_store's
/// messages name the store's URL and the HTTP status, not the credentials.
fn store_error(name: &Path, doing: &str, e: object_store::Error) -> io::Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        object_store::Error::Precondition { .. } => io::ErrorKind::InvalidData,
        _ => io::ErrorKind::Other,
    };
    let why = match &e {
        object_store::Error::NotFound { .. } if name.starts_with("s3://") => {
            "no such object (or no such bucket)".to_string()
        }
        object_store::Error::NotFound { .. } => "no such object".to_string(),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            "access denied: check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and the object's permissions".to_string()
        }
        object_store::Error::Precondition { .. } => {
            "the object changed since it was opened".to_string()
        }
        // With no credentials anywhere, object_store falls back to the EC2 instance metadata
        // service; off EC2 that fails with a message about a link-local address.
        other if other.to_string().contains("169.254.169.254") => {
            "no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
                .to_string()
        }
        other => with_root_cause(other),
    };
    io::Error::new(kind, format!("{}: {doing}: {why}", name.display()))
}

/// `e`'s message, and the innermost error it wraps where that one says more: object_store's
/// HTTP errors end at "error sending request", while the cause (a refused connection, an
/// untrusted certificate) is a few sources down.
fn with_root_cause(e: &object_store::Error) -> String {
    let message = e.to_string();
    let mut root: &dyn std::error::Error = e;
    while let Some(inner) = root.source() {
        root = inner;
    }
    let cause = root.to_string();
    if message.contains(&cause) {
        message
    } else {
        format!("{message}: {cause}")
    }
}

/// One object, pinned to the version opened.
struct RemoteSource {
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    size: u64,
    e_tag: Option<String>,
    /// Last-Modified at open, in ns (0: the server gave none).
    last_modified_ns: i64,
    /// Why a change may go unseen: neither ETag nor Last-Modified to pin.
    unpinned: Option<String>,
}

/// What a GET's task hands the waiting thread, in order: the version answered, then the body.
enum Piece {
    Version {
        e_tag: Option<String>,
        size: u64,
        last_modified_ns: i64,
    },
    Body(bytes::Bytes),
}

/// Body pieces a GET may have received ahead of the thread copying them out: the memory a GET
/// holds outside the cache is this many of the HTTP stack's chunks, not the whole range.
const PIECES_AHEAD: usize = 4;

/// The smallest part of a read fetched in parallel parts, and the most parts.
const PART_BYTES: u64 = 2 << 20;
const MOST_PARTS: u64 = 8;

/// How many parallel GETs fetch a read of `bytes` that its reader waits for. One connection
/// streams at its TCP window over the round trip (about 85 MB/s here at 20 ms each way, against
/// 500-700 MB/s for many at once): a reader waiting for 8 MiB (a Parquet column chunk) waits a
/// round trip and that transfer, so reads of more than two parts go as parts of at least
/// [`PART_BYTES`], as S3's guidance and boto3's transfer manager split large GETs.
fn parts(bytes: u64) -> u64 {
    if bytes <= 2 * PART_BYTES {
        1
    } else {
        (bytes / PART_BYTES).clamp(1, MOST_PARTS)
    }
}

impl RemoteSource {
    /// Whether an answer of `size` bytes with `e_tag` and `last_modified_ns` is of another
    /// version than the one opened: its size, or its ETag where both have one, or (with no
    /// ETag at open) its Last-Modified where both have one.
    fn changed(&self, e_tag: &Option<String>, size: u64, last_modified_ns: i64) -> bool {
        size != self.size
            || match (&self.e_tag, e_tag) {
                (Some(opened), Some(now)) => opened != now,
                (Some(_), None) => false,
                // To the second: an HTTP date's, though a listing may have given finer.
                (None, _) => {
                    const SECOND: i64 = 1_000_000_000;
                    self.last_modified_ns != 0
                        && last_modified_ns != 0
                        && last_modified_ns.div_euclid(SECOND)
                            != self.last_modified_ns.div_euclid(SECOND)
                }
            }
    }

    /// Bytes `[start, end)` of the object as opened, as `parts` ranged GETs in parallel (equal
    /// parts, page-aligned), handed to `sink` piece by piece as they arrive (at their offset
    /// from `start`), so no copy of the whole range is ever held outside the cache. An error
    /// if the object changed or any body falls short; the caller keeps nothing of a failed read.
    fn get(
        &self,
        start: u64,
        end: u64,
        parts: u64,
        sink: &mut dyn FnMut(u64, &[u8]),
    ) -> io::Result<()> {
        let want = end - start;
        let part = want.div_ceil(parts.max(1)).next_multiple_of(PAGE_SIZE);
        let ranges: Vec<(u64, u64)> = (start..end)
            .step_by(part as usize)
            .map(|from| (from, (from + part).min(end)))
            .collect();
        // The GETs run on the runtime's threads (their stacks, their connection pool); this
        // thread, one of the engine's pool with a small stack, copies out what arrives.
        let (pieces, mut arriving) = tokio::sync::mpsc::channel(PIECES_AHEAD * ranges.len());
        for (index, &(from, to)) in ranges.iter().enumerate() {
            let options = GetOptions {
                range: Some(GetRange::Bounded(from..to)),
                if_match: self.e_tag.clone(),
                // With no ETag, the time it was opened at, rounded up to the next second: HTTP
                // dates are to the second, and a server that compares its file's finer time
                // with one rounded down refuses the version opened (versitygw does). Each
                // answer's Last-Modified is checked as well (`changed`).
                if_unmodified_since: (self.e_tag.is_none() && self.last_modified_ns != 0).then(
                    || {
                        let next_second = self.last_modified_ns.div_euclid(1_000_000_000) + 1;
                        chrono::DateTime::from_timestamp_nanos(next_second * 1_000_000_000)
                    },
                ),
                ..GetOptions::default()
            };
            let (store, location) = (self.store.clone(), self.location.clone());
            let pieces = pieces.clone();
            runtime()?.spawn(async move {
                use futures_util::StreamExt;
                let got = match store.get_opts(&location, options).await {
                    Ok(got) => got,
                    Err(e) => return drop(pieces.send((index, Err(e))).await),
                };
                let version = Piece::Version {
                    e_tag: got.meta.e_tag.clone(),
                    size: got.meta.size,
                    last_modified_ns: got.meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
                };
                if pieces.send((index, Ok(version))).await.is_err() {
                    return; // the reader gave up
                }
                let mut body = got.into_stream();
                while let Some(piece) = body.next().await {
                    let failed = piece.is_err();
                    if pieces.send((index, piece.map(Piece::Body))).await.is_err() || failed {
                        return;
                    }
                }
            });
        }
        drop(pieces);
        let mut received = vec![0u64; ranges.len()];
        while let Some((index, piece)) = arriving.blocking_recv() {
            match piece.map_err(|e| store_error(&self.name, "read failed", e))? {
                // A server that ignores If-Match (lighttpd does, for ranges) still names what
                // it sent.
                Piece::Version {
                    e_tag,
                    size,
                    last_modified_ns,
                } => {
                    if self.changed(&e_tag, size, last_modified_ns) {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "{}: read failed: the object changed since it was opened",
                                self.name.display()
                            ),
                        ));
                    }
                }
                Piece::Body(bytes) => {
                    let (from, to) = ranges[index];
                    let got = &mut received[index];
                    let n = bytes.len().min((to - from - *got) as usize);
                    sink(from - start + *got, &bytes[..n]);
                    *got += n as u64;
                }
            }
        }
        for (&(from, to), &got) in ranges.iter().zip(&received) {
            if got < to - from {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{}: short read: {got} bytes of {} at {from}",
                        self.name.display(),
                        to - from
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Source for RemoteSource {
    fn path(&self) -> &Path {
        &self.name
    }
    fn live_size(&self) -> u64 {
        self.size
    }
    fn current_size(&self, _events: &mut dyn FnMut(Event)) -> io::Result<u64> {
        // Pinned: a change shows as If-Match failing on the next GET, not as a new size.
        Ok(self.size)
    }
    fn unpinned(&self) -> Option<&str> {
        self.unpinned.as_deref()
    }
    fn is_direct(&self) -> bool {
        true
    }
    fn limits(&self) -> Limits {
        Limits {
            read_ahead_kb: None,
            max_sectors_kb: Some(REQUEST_KB),
            starts_as: Some(crate::device::DeviceModel::REMOTE),
        }
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn read(&self, op: &ReadOp) -> io::Result<usize> {
        let start = op.offset().min(self.size);
        let end = start.saturating_add(op.len() as u64).min(self.size);
        if end <= start {
            return Ok(0);
        }
        // A read its reader waits for comes in parts, in parallel (see `parts`); a read
        // ahead is one GET, the size its policy chose, beside the others it keeps in flight.
        let parts = if op.kind == crate::policy::IoKind::Sync {
            parts(end - start)
        } else {
            1
        };
        let mut copied = 0;
        self.get(start, end, parts, &mut |at, piece| {
            copied += op.copy_in(at as usize, piece);
        })?;
        Ok(copied)
    }
    fn read_page_uncached(&self, page: u64, from: usize, dst: &mut [u8]) -> io::Result<usize> {
        let start = (page * PAGE_SIZE + from as u64).min(self.size);
        let end = start.saturating_add(dst.len() as u64).min(self.size);
        if end <= start {
            return Ok(0);
        }
        self.get(start, end, 1, &mut |at, piece| {
            dst[at as usize..at as usize + piece.len()].copy_from_slice(piece);
        })?;
        Ok((end - start) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{BackendChoice, Engine};
    use object_store::memory::InMemory;
    use object_store::PutPayload;

    fn engine() -> Engine {
        Engine::builder()
            .backend(BackendChoice::THREADS)
            .budget(4 << 20)
            .build()
            .unwrap()
    }

    /// Put `bytes` at `name` in `store` and open it through `engine` with `policy`.
    fn put_and_open(
        engine: &Engine,
        store: &Arc<InMemory>,
        name: &str,
        bytes: Vec<u8>,
        policy: &str,
    ) -> crate::engine::File {
        let location = ObjectPath::from(name);
        runtime()
            .unwrap()
            .block_on(store.put(&location, PutPayload::from(bytes)))
            .unwrap();
        let url = PathBuf::from(format!("memory://{name}"));
        let opened = open_object(url, store.clone(), location).unwrap();
        let make = Box::new(crate::policy::maker(policy).unwrap());
        engine
            .open_source(opened, &crate::engine::OpenOptions::new(), make)
            .unwrap()
    }

    #[test]
    fn an_object_reads_through_the_engine_byte_for_byte() {
        let store = Arc::new(InMemory::new());
        let size = 3 * 1024 * 1024 + 123;
        let bytes: Vec<u8> = (0..size).map(|i| (i * 13 % 251) as u8).collect();
        let engine = engine();
        let file = put_and_open(
            &engine,
            &store,
            "data/object.bin",
            bytes.clone(),
            "adaptive",
        );
        assert_eq!(file.len(), size as u64);
        crate::engine::source::tests::read_to_end_checking(&file, &bytes, 4096, "remote");
        let stats = engine.stats();
        assert!(stats.ahead_requests > 0, "read ahead: {stats:?}");
        assert!(
            stats.requests < (size as u64 / 4096) / 4,
            "fewer GETs than reads: {stats:?}"
        );
    }

    #[test]
    fn a_large_read_its_reader_waits_for_comes_in_parallel_parts_byte_for_byte() {
        assert_eq!(parts(PART_BYTES), 1);
        assert_eq!(parts(2 * PART_BYTES), 1);
        assert_eq!(parts(8 << 20), 4);
        assert_eq!(parts(1 << 30), MOST_PARTS);
        let store = Arc::new(InMemory::new());
        let size = 40 * 1024 * 1024 + 4321;
        let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 253) as u8).collect();
        let engine = Engine::builder()
            .backend(BackendChoice::THREADS)
            .budget(64 << 20)
            .build()
            .unwrap();
        let file = put_and_open(&engine, &store, "big.bin", bytes.clone(), "adaptive");
        // Reads far apart, each a miss read whole by its reader, in one request (its parts
        // fetched at once), not a request of the largest I/O after another: 9 MiB, an odd offset
        // and length, and the object's end.
        for (at, len) in [
            (12_345usize, 9 << 20),
            (20 << 20, (7 << 20) + 11),
            (size - (5 << 20), 5 << 20),
        ] {
            let requests = engine.stats().sync_requests;
            let mut buf = vec![0u8; len];
            let mut done = 0;
            while done < len {
                let n = file.read_at(&mut buf[done..], (at + done) as u64).unwrap();
                assert!(n > 0);
                done += n;
            }
            assert!(buf == bytes[at..at + len], "bytes at {at}");
            assert_eq!(
                engine.stats().sync_requests - requests,
                1,
                "requests for {len} bytes at {at}: {:?}",
                engine.stats()
            );
        }
    }

    #[test]
    fn a_changed_object_is_an_error_not_a_mix_of_versions() {
        let store = Arc::new(InMemory::new());
        let engine = engine();
        let file = put_and_open(&engine, &store, "changes.bin", vec![1u8; 1 << 20], "none");
        let (rt, location) = (runtime().unwrap(), ObjectPath::from("changes.bin"));
        let mut buf = vec![0u8; 4096];
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), 4096);
        assert!(buf.iter().all(|&b| b == 1));
        rt.block_on(store.put(&location, PutPayload::from(vec![2u8; 1 << 20])))
            .unwrap();
        let err = file.read_at(&mut buf, 512 * 1024).unwrap_err();
        assert!(
            err.to_string().contains("changed since it was opened"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_object_and_a_bad_url_are_clear_errors() {
        let store = Arc::new(InMemory::new());
        let err = open_object(
            PathBuf::from("memory://nothing"),
            store,
            ObjectPath::from("nothing"),
        )
        .err()
        .expect("no such object");
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(err
            .to_string()
            .contains("memory://nothing: cannot open it: no such object"));
        for bad in ["s3://", "s3://bucket", "s3://bucket/", "http://host-only"] {
            let err = open(
                Path::new(bad),
                &OpenSettings {
                    direct: true,
                    leases: false,
                    remote_options: &[],
                },
            )
            .err()
            .expect("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}: {err}");
        }
    }
}
