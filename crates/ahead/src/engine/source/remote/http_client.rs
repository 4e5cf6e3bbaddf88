//! The HTTP client a store's requests go through: hyper's, with every connection reading into
//! a buffer of one fixed size, wherever the store's options allow it.
//!
//! object_store's own client is reqwest's, which builds hyper with its defaults: a connection
//! reads its socket into a buffer that grows with what each read returns (up to 400 KiB), and
//! a connection waiting in the pool for its next request keeps a fresh buffer of the size it
//! last grew to (hyper reads an idle connection to notice it closing). Against a store that
//! keeps connections alive, as object stores do, those buffers were the larger part of the
//! process's memory outside the cache's budget (docs/bench-log/issue-47-remote-cluster.md,
//! session 38), and reqwest has no setting that bounds them. Here each connection reads into
//! [`READ_BUF_BYTES`], busy or idle, so what the HTTP stack holds grows with the connections
//! open by a bounded amount each.
//!
//! What reqwest did for object_store and this client does too: TLS by rustls with the
//! platform's verifier (the process's crypto provider: ring, unless the embedding program
//! installed another); redirects followed, at most [`MOST_REDIRECTS`], and without credentials
//! when one leads to another origin; the options' timeouts (the whole request, each read of
//! the body, the connect); the pool's limits; the user agent; errors sorted into the kinds
//! object_store retries. What it does not do: proxies, HTTP/2, other roots of trust, invalid
//! certificates accepted. A store given any of those (an option, or a proxy in the environment,
//! where reqwest looks for one) is served by reqwest's client as before
//! ([`BoundedConnector::serves`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, COOKIE, LOCATION, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use object_store::client::{
    ClientConfigKey, ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind,
    HttpRequest, HttpRequestBody, HttpResponse, HttpResponseBody, HttpService, ReqwestConnector,
};

/// The bytes every connection reads its socket into: enough that a read of a fast stream is
/// not a syscall per few KiB, small enough that hundreds of open connections hold little.
pub(super) const READ_BUF_BYTES: usize = 64 << 10;

/// Redirects followed for one request before its last answer is returned as it is.
const MOST_REDIRECTS: usize = 10;

/// How long an idle connection waits in the pool, where the options do not say (reqwest's).
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The environment variables reqwest takes a proxy from.
const PROXY_ENV: &[&str] = &[
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Whether the environment names a proxy, where reqwest would look for one.
fn proxy_in_env() -> bool {
    PROXY_ENV
        .iter()
        .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
}

/// Builds a store's [`HttpClient`]: the bounded one where it serves the options, reqwest's
/// where it does not. `headers` go on every request (reqwest's default headers, which the
/// options hold but do not show: an HTTP URL's credentials).
#[derive(Debug, Default)]
pub(super) struct BoundedConnector {
    pub(super) headers: HeaderMap,
}

impl BoundedConnector {
    /// Whether the bounded client honours every one of `options` and the environment's
    /// proxies: none set.
    pub(super) fn serves(options: &ClientOptions) -> bool {
        let set = |key: ClientConfigKey| options.get_config_value(&key).is_some();
        let on = |key: ClientConfigKey| options.get_config_value(&key).is_some_and(|v| truthy(&v));
        !(proxy_in_env()
            || set(ClientConfigKey::ProxyUrl)
            || set(ClientConfigKey::ProxyCaCertificate)
            || set(ClientConfigKey::ProxyExcludes)
            || set(ClientConfigKey::Http2KeepAliveInterval)
            || set(ClientConfigKey::Http2KeepAliveTimeout)
            || set(ClientConfigKey::Http2MaxFrameSize)
            || on(ClientConfigKey::Http2Only)
            || on(ClientConfigKey::Http2KeepAliveWhileIdle)
            || on(ClientConfigKey::AllowInvalidCertificates)
            || on(ClientConfigKey::NoSystemCertificates))
    }
}

impl HttpConnector for BoundedConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        if !Self::serves(options) {
            return ReqwestConnector::default().connect(options);
        }
        let client = BoundedClient::new(options, &self.headers).map_err(|source| {
            object_store::Error::Generic {
                store: "HTTP client",
                source: source.into(),
            }
        })?;
        Ok(HttpClient::new(client))
    }
}

/// A boolean option's value as object_store reads it.
fn truthy(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on" | "y"
    )
}

/// A duration option's value (`30s`, `5 seconds`), if set; an error names a bad one.
fn duration(options: &ClientOptions, key: ClientConfigKey) -> Result<Option<Duration>, String> {
    options
        .get_config_value(&key)
        .map(|v| humantime::parse_duration(&v).map_err(|e| format!("{key:?}: {v:?}: {e}")))
        .transpose()
}

/// hyper's pooled client, over TCP or TLS, with the options it was built from.
struct BoundedClient {
    client: Client<HttpsConnector<TcpConnector>, HttpRequestBody>,
    /// What every request carries unless it sets its own: the user agent, the credentials.
    headers: HeaderMap,
    /// The whole request's limit, from sending to the body's last byte.
    timeout: Option<Duration>,
    /// Each read of the body's limit.
    read_timeout: Option<Duration>,
    allow_http: bool,
}

impl std::fmt::Debug for BoundedClient {
    // The headers hold credentials: never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedClient")
            .field("timeout", &self.timeout)
            .field("read_timeout", &self.read_timeout)
            .field("allow_http", &self.allow_http)
            .finish_non_exhaustive()
    }
}

impl BoundedClient {
    fn new(options: &ClientOptions, headers: &HeaderMap) -> Result<BoundedClient, String> {
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .map_err(|e| format!("TLS: {e}"))?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let mut tcp = TcpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(duration(options, ClientConfigKey::ConnectTimeout)?);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(
                duration(options, ClientConfigKey::PoolIdleTimeout)?.unwrap_or(POOL_IDLE),
            )
            .http1_read_buf_exact_size(READ_BUF_BYTES);
        if let Some(most) = options.get_config_value(&ClientConfigKey::PoolMaxIdlePerHost) {
            builder.pool_max_idle_per_host(
                most.parse()
                    .map_err(|_| format!("PoolMaxIdlePerHost: {most:?} is not a number"))?,
            );
        }
        let mut headers = headers.clone();
        let agent = options
            .get_config_value(&ClientConfigKey::UserAgent)
            .unwrap_or_else(|| concat!("ahead/", env!("CARGO_PKG_VERSION")).to_string());
        headers.insert(
            USER_AGENT,
            HeaderValue::from_str(&agent).map_err(|_| format!("UserAgent: {agent:?}"))?,
        );
        Ok(BoundedClient {
            client: builder.build(https),
            headers,
            timeout: duration(options, ClientConfigKey::Timeout)?,
            read_timeout: duration(options, ClientConfigKey::ReadTimeout)?,
            allow_http: options
                .get_config_value(&ClientConfigKey::AllowHttp)
                .is_some_and(|v| truthy(&v)),
        })
    }

    /// `request` sent, following redirects, within `deadline`.
    async fn send(
        &self,
        request: HttpRequest,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<hyper::Response<Incoming>, HttpError> {
        let (mut parts, mut body) = request.into_parts();
        for (key, value) in &self.headers {
            if !parts.headers.contains_key(key) {
                parts.headers.insert(key, value.clone());
            }
        }
        let mut redirects = 0;
        loop {
            if parts.uri.scheme_str() != Some("https") && !self.allow_http {
                return Err(HttpError::new(
                    HttpErrorKind::Unknown,
                    std::io::Error::other(
                        "an http:// URL, and the store does not allow HTTP (allow_http)",
                    ),
                ));
            }
            let sent = self
                .client
                .request(Request::from_parts(parts.clone(), body.clone()));
            let answer = match deadline {
                Some(at) => tokio::time::timeout_at(at, sent)
                    .await
                    .map_err(|_| timed_out())?,
                None => sent.await,
            }
            .map_err(client_error)?;
            let next = (redirects < MOST_REDIRECTS)
                .then(|| redirected(&parts.uri, answer.status(), answer.headers()))
                .flatten();
            let Some(next) = next else {
                return Ok(answer);
            };
            redirects += 1;
            if origin(&next) != origin(&parts.uri) {
                for secret in [AUTHORIZATION, COOKIE] {
                    parts.headers.remove(secret);
                }
            }
            if answer.status() == StatusCode::SEE_OTHER && parts.method != Method::HEAD {
                parts.method = Method::GET;
                body = HttpRequestBody::empty();
            }
            parts.uri = next;
        }
    }
}

impl HttpService for BoundedClient {
    fn call<'a, 'f>(
        &'a self,
        request: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'f>>
    where
        'a: 'f,
        Self: 'f,
    {
        Box::pin(async move {
            let deadline = self.timeout.map(|t| tokio::time::Instant::now() + t);
            let answer = self.send(request, deadline).await?;
            let (parts, body) = answer.into_parts();
            let body = TimedBody {
                body,
                deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
                read_timeout: self.read_timeout,
                idle: self.read_timeout.map(|t| Box::pin(tokio::time::sleep(t))),
            };
            Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
        })
    }
}

/// Where a redirect from `from` with `status` and `headers` leads, if it is one to follow.
fn redirected(from: &Uri, status: StatusCode, headers: &HeaderMap) -> Option<Uri> {
    let followed = [301, 302, 303, 307, 308];
    if !followed.contains(&status.as_u16()) {
        return None;
    }
    let location = headers.get(LOCATION)?.to_str().ok()?;
    if location.contains("://") {
        return location.parse().ok();
    }
    let path = if location.starts_with('/') {
        location.to_string()
    } else {
        let base = from.path();
        format!("{}{location}", &base[..=base.rfind('/').unwrap_or(0)])
    };
    let mut next = from.clone().into_parts();
    next.path_and_query = Some(path.parse().ok()?);
    Uri::from_parts(next).ok()
}

/// A URL's scheme, host and port: credentials go only where they were given.
fn origin(uri: &Uri) -> (Option<&str>, Option<&str>, Option<u16>) {
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    });
    (uri.scheme_str(), uri.host(), port)
}

fn timed_out() -> HttpError {
    HttpError::new(
        HttpErrorKind::Timeout,
        std::io::Error::new(std::io::ErrorKind::TimedOut, "the request timed out"),
    )
}

/// A client's error, sorted as object_store sorts reqwest's: a failed connect and a
/// connection closed under a request are retried, a timeout too.
fn client_error(e: hyper_util::client::legacy::Error) -> HttpError {
    let kind = if e.is_connect() {
        HttpErrorKind::Connect
    } else {
        kind_of(&e)
    };
    HttpError::new(kind, e)
}

/// The kind of an error from its sources: hyper's and the socket's.
fn kind_of(e: &(dyn std::error::Error + 'static)) -> HttpErrorKind {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(e) = source {
        if let Some(e) = e.downcast_ref::<hyper::Error>() {
            if e.is_closed() || e.is_incomplete_message() || e.is_body_write_aborted() {
                return HttpErrorKind::Request;
            }
            if e.is_timeout() {
                return HttpErrorKind::Timeout;
            }
        }
        if let Some(e) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            match e.kind() {
                K::TimedOut => return HttpErrorKind::Timeout,
                K::ConnectionAborted | K::ConnectionReset | K::BrokenPipe | K::UnexpectedEof => {
                    return HttpErrorKind::Interrupted
                }
                _ => {}
            }
        }
        source = e.source();
    }
    HttpErrorKind::Unknown
}

/// An answer's body, held to the request's deadline and to the time one read may take.
struct TimedBody {
    body: Incoming,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    read_timeout: Option<Duration>,
    /// When the read under way times out.
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        let late = |sleep: &mut Option<Pin<Box<tokio::time::Sleep>>>, cx: &mut Context<'_>| {
            sleep
                .as_mut()
                .is_some_and(|s| s.as_mut().poll(cx).is_ready())
        };
        if late(&mut this.deadline, cx) || late(&mut this.idle, cx) {
            return Poll::Ready(Some(Err(timed_out())));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(idle), Some(t)) = (this.idle.as_mut(), this.read_timeout) {
                    idle.as_mut().reset(tokio::time::Instant::now() + t);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(HttpError::new(kind_of(&e), e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (from, status, Location, where it leads)
    #[test]
    fn redirects_lead_where_their_location_says() {
        let cases = [
            ("http://a:1/x/y", 302, "http://b:2/z", Some("http://b:2/z")),
            ("http://a:1/x/y", 301, "/z?q=1", Some("http://a:1/z?q=1")),
            ("http://a:1/x/y", 307, "w", Some("http://a:1/x/w")),
            ("http://a:1/x/y", 304, "/z", None),
            ("http://a:1/x/y", 200, "/z", None),
        ];
        for (from, status, location, expected) in cases {
            let mut headers = HeaderMap::new();
            headers.insert(LOCATION, HeaderValue::from_static(location));
            let got = redirected(
                &from.parse().unwrap(),
                StatusCode::from_u16(status).unwrap(),
                &headers,
            );
            assert_eq!(
                got.map(|u| u.to_string()).as_deref(),
                expected,
                "{from} {status} {location}"
            );
        }
    }

    #[test]
    fn an_origin_is_scheme_host_and_port() {
        let o = |u: &str| {
            let uri: Uri = u.parse().unwrap();
            let (s, h, p) = origin(&uri);
            (s.map(str::to_string), h.map(str::to_string), p)
        };
        assert_eq!(o("https://h/x"), o("https://h:443/y"));
        assert_ne!(o("http://h/x"), o("https://h/x"));
        assert_ne!(o("http://h:1/x"), o("http://h:2/x"));
    }

    #[test]
    fn a_proxy_or_http2_option_goes_to_reqwest() {
        let plain = ClientOptions::new();
        // The environment this test runs in may name a proxy; then nothing is bounded.
        let env_proxy = proxy_in_env();
        assert_eq!(BoundedConnector::serves(&plain), !env_proxy);
        for (key, value) in [
            (ClientConfigKey::ProxyUrl, "http://127.0.0.1:1"),
            (ClientConfigKey::Http2Only, "true"),
            (ClientConfigKey::AllowInvalidCertificates, "true"),
        ] {
            let options = ClientOptions::new().with_config(key, value);
            assert!(!BoundedConnector::serves(&options), "{key:?}");
        }
        let options = ClientOptions::new().with_config(ClientConfigKey::Timeout, "5s");
        assert_eq!(BoundedConnector::serves(&options), !env_proxy);
    }
}
