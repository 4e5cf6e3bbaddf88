//! `remote`: an object behind a URL (`s3://bucket/key`, `http://host/path`,
//! `https://host/path`), read with plain ranged GETs through the `object_store` crate.
//!
//! The engine drives it as any source: the policies decide what to fetch, one ranged GET per
//! request the engine issues (object_store's own coalescing, `get_ranges`, is not used: the
//! policy is the one deciding sizes). A remote source has no descriptor, so it is read through
//! [`Source::read`] on a pool of threads (the `threads` backend's, or the one `uring` keeps
//! for such sources): each worker waits on one request's GETs, which run on a small tokio
//! runtime and copy their bodies into the cache's slots as they arrive (the worker is woken
//! once a GET, not once a piece of a body), and the pool's size is how many requests are in
//! flight.
//!
//! **Sized for the link.** Its [`Limits`] give requests of up to 8 MiB (what S3's guidance and
//! mountpoint-s3 use for ranged GETs) and start the engine's meter from the simulator's model
//! of an object store; from the first GETs on, the meter measures latency to first byte and
//! bandwidth, and `adaptive` keeps latency x bandwidth in flight (see `engine/meter.rs`).
//!
//! **Pinned to what was opened.** Opening asks the store for the object's metadata (with its
//! last bytes, one GET; else a HEAD): its size, and its ETag (or, where the store gives none,
//! its Last-Modified). Every GET then
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
//!
//! **Memory outside the cache.** The stores' requests go through hyper with every connection
//! reading into a buffer of one fixed size (`http_client.rs`), so the connections a process
//! keeps open, busy or idle in the pool, hold a bounded amount each beside the budget; a store
//! given a proxy or an HTTP/2 option keeps reqwest's client, whose buffers are not bounded.

mod http_client;
mod link_rate;
mod listing;
mod read;
mod store;

use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientConfigKey, ClientOptions, GetOptions, GetRange, ObjectMeta, ObjectStore,
    ObjectStoreExt, RetryConfig,
};

use super::{
    url, Entry, Event, Identity, Limits, ObjectKey, OpenSettings, Opened, Registered, Source,
};
use crate::engine::backend::ReadOp;
use crate::engine::{Fallback, FallbackKind};
use crate::units::PAGE_SIZE;

use link_rate::LinkRate;
use listing::*;
use read::*;
use store::*;

/// This kind's entry in [`super::SOURCES`].
pub(crate) const REGISTERED: Registered = Registered {
    name: "remote",
    about: "an object behind a URL (s3://bucket/key, http(s)://host/path), read with ranged GETs",
    claims,
    open,
    open_entry: open_known,
    stat,
    list,
};

fn claims(name: &Path) -> bool {
    name.to_str().and_then(url::Scheme::of).is_some()
}

/// The largest GET, in KiB: S3's guidance for ranged GETs (8-16 MiB) and mountpoint-s3's part.
const REQUEST_KB: u64 = 8 << 10;

/// The most a reader of one object keeps ahead, in KiB, where the budget allows (a file's
/// window is at most a quarter of it): a link's window, as a disk's is its `read_ahead_kb`.
/// Reads ahead split over capped connections each hold their part for a wait and its
/// streaming (2 MiB at 25 MiB/s: 45 ms and 80 ms), so the link's rate times that is 60 MB and
/// more in flight; 64 MiB held `ahead cat` to 0.79-0.86 of curl's ceiling on such a link and
/// 128 MiB reached 0.90-1.02 (BENCHMARKS, issue 47, session 32).
const WINDOW_KB: u64 = 128 << 10;

fn open(name: &Path, settings: &OpenSettings) -> io::Result<Opened> {
    let url = parsed(name, false)?;
    let reading = Reading::of(name, settings.remote_options)?;
    let (store, location, link) = store_and_location(&url, settings.remote_options)?;
    open_object_as(
        PathBuf::from(&url.shown),
        store,
        location,
        reading,
        link,
        settings.with_tail,
    )
}

/// How an object's GETs go, from the remote options the source takes for itself (the rest
/// are the store's).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reading {
    /// `split_ahead`: whether a read ahead goes in parallel parts, as a read its reader waits
    /// for does. More connections for the same bytes in flight: where each connection is
    /// capped (an object store's tens of MB/s per connection) the link fills with less
    /// memory; where one connection is not the limit, the GETs' cost per byte grows
    /// (docs/bench-log/issue-47-remote-cluster.md).
    pub(crate) split_ahead: SplitAhead,
}

/// The remote option `split_ahead`: `auto` (the default), `true` or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SplitAhead {
    /// As the store's connections are measured to want ([`LinkRate::ahead_parts`]).
    #[default]
    Auto,
    /// Always, in parts of `PART_BYTES` ([`read::parts`]).
    Always,
    /// Never: a read ahead is one GET.
    Never,
}

/// The remote options [`Reading`] takes (the store never sees them).
pub(super) const READING_OPTIONS: &[&str] = &["split_ahead"];

impl Reading {
    fn of(name: &Path, options: &[(String, String)]) -> io::Result<Reading> {
        let mut reading = Reading::default();
        for (key, value) in options {
            if key == "split_ahead" {
                // `auto`, or a switch as the engine's own settings take one.
                reading.split_ahead = match value.trim() {
                    "auto" => SplitAhead::Auto,
                    value => match crate::engine::settings::switch(value) {
                        Ok(true) => SplitAhead::Always,
                        Ok(false) => SplitAhead::Never,
                        Err(why) => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                format!(
                                    "{}: remote option split_ahead: {why} (or auto)",
                                    name.display()
                                ),
                            ))
                        }
                    },
                };
            }
        }
        Ok(reading)
    }
}

/// Open the object `info` describes (a stat or a listing the caller has just made) without
/// a HEAD of its own (see [`opened`]); `Engine::open_entry` has refused a prefix already.
pub(crate) fn open_known(info: &Entry, settings: &OpenSettings) -> io::Result<Opened> {
    let url = parsed(Path::new(&info.name), false)?;
    let reading = Reading::of(Path::new(&url.shown), settings.remote_options)?;
    let (store, location, link) = store_and_location(&url, settings.remote_options)?;
    Ok(opened(info, store, location, reading, link, None))
}

/// Open `location` in `store` as `name`: one GET of its tail (or a HEAD) for its size and
/// version.
#[cfg(test)]
pub(crate) fn open_object(
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
) -> io::Result<Opened> {
    open_object_as(
        name,
        store,
        location,
        Reading::default(),
        Arc::default(),
        true,
    )
}

/// [`open_object`], its GETs going as `reading` says.
fn open_object_as(
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    reading: Reading,
    link: Arc<LinkRate>,
    with_tail: bool,
) -> io::Result<Opened> {
    let runtime = runtime()?;
    // The metadata comes with the object's last bytes (one GET for the last TAIL_BYTES, whose
    // answer names the version and the whole size): a reader of a format indexed at its end
    // (Parquet, ORC, a zip) reads them first and waits no second round trip, and an object
    // that small is read whole. A server that cannot answer such a range (an empty object;
    // one that sends the whole body) gets a HEAD, as do opens past the tails' memory.
    if let Some(held) = with_tail.then(TailHeld::reserve).flatten() {
        match runtime.block_on(tail_of(&store, &location)) {
            Ok((meta, start, bytes)) => {
                let info = object(name.to_string_lossy().into_owned(), &meta);
                let tail = Tail {
                    start,
                    bytes,
                    _held: held,
                };
                return Ok(opened(&info, store, location, reading, link, Some(tail)));
            }
            Err(e @ object_store::Error::NotFound { .. }) => {
                return Err(store_error(&name, "cannot open it", e))
            }
            Err(_) => {}
        }
    }
    let meta = runtime
        .block_on(store.head(&location))
        .map_err(|e| store_error(&name, "cannot open it", e))?;
    let info = object(name.to_string_lossy().into_owned(), &meta);
    Ok(opened(&info, store, location, reading, link, None))
}

/// The object's metadata and its last [`TAIL_BYTES`] (all of it if smaller), from where they
/// start: one GET.
async fn tail_of(
    store: &Arc<dyn ObjectStore>,
    location: &ObjectPath,
) -> object_store::Result<(ObjectMeta, u64, bytes::Bytes)> {
    let options = GetOptions {
        range: Some(GetRange::Suffix(TAIL_BYTES)),
        ..GetOptions::default()
    };
    let got = store.get_opts(location, options).await?;
    let (meta, range) = (got.meta.clone(), got.range.clone());
    let bytes = got.bytes().await?;
    if bytes.len() as u64 != range.end - range.start || range.end != meta.size {
        return Err(object_store::Error::Generic {
            store: "ahead",
            source: "the tail's answer is not the range it names".into(),
        });
    }
    Ok((meta, range.start, bytes))
}

/// The object `info` describes, pinned to that version: its size and ETag (a GET's
/// `If-Match` fails if the object changed since), or, where the store gives no ETag, its size
/// and Last-Modified.
fn opened(
    info: &Entry,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    reading: Reading,
    link: Arc<LinkRate>,
    tail: Option<Tail>,
) -> Opened {
    // An empty ETag (as a listing may give, or a caller pass on) pins nothing: none.
    let info = &Entry {
        e_tag: info
            .e_tag
            .clone()
            .filter(|tag| !tag.trim_matches('"').is_empty()),
        ..info.clone()
    };
    let (version, notes, unpinned) = match (&info.e_tag, info.modified_ns) {
        (Some(tag), _) => (fingerprint(tag.as_bytes()), Vec::new(), None),
        // object_store reads a missing Last-Modified as the epoch.
        (None, 0) => {
            let why = format!(
                "{}: the server gives no ETag and no Last-Modified: a change of the object while it is read is seen only if its size changes (a same-size replacement may mix the two versions' bytes)",
                info.name
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
                    info.name
                ),
            )],
            None,
        ),
    };
    Opened {
        identity: Identity {
            object: ObjectKey::Url(info.name.clone()),
            size: info.size,
            version,
        },
        source: Box::new(RemoteSource {
            name: PathBuf::from(&info.name),
            store,
            location,
            size: info.size,
            e_tag: info.e_tag.clone(),
            last_modified_ns: info.modified_ns,
            unpinned,
            reading,
            link,
            tail: Mutex::new(tail),
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
                    with_tail: true,
                },
            )
            .err()
            .expect("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}: {err}");
        }
    }
}
