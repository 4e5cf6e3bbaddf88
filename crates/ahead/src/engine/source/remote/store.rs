//! Names and stores: an object URL taken to the store that holds it (built once per bucket or
//! origin and options, and shared), the runtime its requests run on, how they retry, and the
//! errors they end in, named by the object and never showing a secret.

use super::http_client::BoundedConnector;
use super::*;
use crate::per_process::PerProcess;

/// The runtime every remote source's GETs run on: object_store is async; the engine's
/// workers block on it. One per process: a child forked from a process that had one starts its
/// own (the parent's threads are not in the child).
pub(super) fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: PerProcess<Result<tokio::runtime::Runtime, String>> = PerProcess::new();
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
pub(super) fn retry_config(
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
            // The source's own (`Reading`), not the store's.
            k if READING_OPTIONS.contains(&k) => {}
            _ => rest.push((key.clone(), value.clone())),
        }
    }
    Ok((config, rest))
}

/// rustls's crypto provider is process-wide: ring, installed once before the first store is
/// built, unless the program embedding the engine installed its own first.
pub(super) fn install_tls_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // An Err means a provider is already installed: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `name` taken apart as an object URL, or an error that names it (its password hidden).
pub(super) fn parsed(name: &Path, prefix: bool) -> io::Result<url::ObjectUrl> {
    let text = name.to_str().ok_or_else(|| bad_url(name, "not UTF-8"))?;
    url::parse(text, prefix).map_err(|why| bad_url(name, &why))
}

/// The store `url` is in (built, or shared with earlier opens), its place there, and what the
/// store's connections have been measured to give.
pub(super) fn store_and_location(
    url: &url::ObjectUrl,
    remote_options: &[(String, String)],
) -> io::Result<(Arc<dyn ObjectStore>, ObjectPath, Arc<LinkRate>)> {
    install_tls_provider();
    let name = Path::new(&url.shown);
    let (retry, options) = retry_config(name, remote_options)?;
    // The credentials of an HTTP URL are part of what a store is built from.
    let place = match &url.credentials {
        Some((user, password)) => format!("{} as {user}:{password}", url.place),
        None => url.place.clone(),
    };
    Ok(if url.scheme == url::Scheme::S3 {
        let (store, link) = shared_store(place, remote_options, || {
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(&url.authority)
                .with_retry(retry.clone())
                .with_http_connector(BoundedConnector::default());
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
        (store, ObjectPath::from(url.key.as_str()), link)
    } else {
        let (store, link) = shared_store(place, remote_options, || {
            let mut client = ClientOptions::new().with_allow_http(url.scheme == url::Scheme::Http);
            for (key, value) in options.iter() {
                let parsed: ClientConfigKey = key.parse().map_err(|_| unknown_option(name, key))?;
                client = client.with_config(parsed, value);
            }
            let mut connector = BoundedConnector::default();
            if let Some((user, password)) = &url.credentials {
                // Reqwest's client, where the options want it, takes them from the options.
                connector.headers = basic_auth(user, password);
                client = client.with_default_headers(connector.headers.clone());
            }
            let store = object_store::http::HttpBuilder::new()
                .with_url(url.place.as_str())
                .with_client_options(client)
                .with_http_connector(connector)
                .with_retry(retry)
                .build()
                .map_err(|e| store_error(name, "cannot reach it", e))?;
            Ok(Arc::new(store))
        })?;
        let location =
            ObjectPath::parse(url.key.as_str()).map_err(|e| bad_url(name, &e.to_string()))?;
        (store, location, link)
    })
}

/// The header that sends `user` and `password` as HTTP Basic authentication, marked
/// sensitive: never shown by the HTTP stack's `Debug`, and dropped by it on a redirect to
/// another host (scheme, host or port), as curl drops it.
pub(super) fn basic_auth(user: &str, password: &str) -> reqwest::header::HeaderMap {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {token}"))
        .expect("base64 is a valid header value");
    value.set_sensitive(true);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    headers
}

/// The stores built so far, by everything that went into building one: opening many objects
/// of one bucket or server shares one client, its open connections and its TLS set-up (a new
/// client per object cost a connection's round trips and its buffers per object). Never
/// printed: the keys hold the options, credentials among them.
pub(super) type StoreKey = (String, Vec<(String, String)>, Vec<(String, String)>);

/// A store kept for reuse, by what it was built for, with its connections' measures.
type KeptStore = (StoreKey, Arc<dyn ObjectStore>, Arc<LinkRate>);

/// How many stores are kept; past it they are all let go (their clients close when the
/// last object open on them closes).
pub(super) const STORES_KEPT: usize = 32;

/// The store for `place` (`s3://bucket` or an origin) with `options`, from those built before
/// under the same `AWS_*` environment, or `build` it; with what its connections were measured
/// to give.
pub(super) fn shared_store(
    place: String,
    options: &[(String, String)],
    build: impl FnOnce() -> io::Result<Arc<dyn ObjectStore>>,
) -> io::Result<(Arc<dyn ObjectStore>, Arc<LinkRate>)> {
    // One table per process: a store's client belongs to its process's runtime.
    static STORES: PerProcess<Mutex<Vec<KeptStore>>> = PerProcess::new();
    let aws_env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_"))
        .collect();
    let key = (place, options.to_vec(), aws_env);
    let mut stores = STORES
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, store, link)) = stores.iter().find(|(k, _, _)| *k == key) {
        return Ok((store.clone(), link.clone()));
    }
    let (store, link) = (build()?, Arc::new(LinkRate::default()));
    if stores.len() >= STORES_KEPT {
        stores.clear();
    }
    stores.push((key, store.clone(), link.clone()));
    Ok((store, link))
}

pub(super) fn unknown_option(name: &Path, key: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{}: unknown remote option {key:?} (object_store's config keys: endpoint, region, access_key_id, timeout, ...)",
            name.display()
        ),
    )
}

pub(super) fn bad_url(name: &Path, why: &str) -> io::Error {
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
pub(super) fn store_error(name: &Path, doing: &str, e: object_store::Error) -> io::Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        object_store::Error::Precondition { .. } => io::ErrorKind::InvalidData,
        _ => io::ErrorKind::Other,
    };
    let why = match &e {
        object_store::Error::NotFound { .. }
            if name.to_str().and_then(url::Scheme::of) == Some(url::Scheme::S3) =>
        {
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
pub(super) fn with_root_cause(e: &object_store::Error) -> String {
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
