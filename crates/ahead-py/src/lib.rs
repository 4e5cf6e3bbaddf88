//! `ahead._ahead`: the Python binding's native half. The Python package (`python/ahead`) wraps
//! it in Python's own types: `ahead.File` is an `io.RawIOBase` over [`RawFile`], `ahead.open`
//! wraps that in `io.BufferedReader` as Python's `open` does, `ahead.fs` is the fsspec
//! filesystem, and `ahead.sim`/`ahead.replay` turn the JSON returned here into dicts.
//!
//! **The GIL.** Every call that may wait (an open, which may be a HEAD to a store; a read,
//! which may wait for the device or a GET) releases the GIL (`Python::detach`), so a pool
//! of Python threads reading through one engine runs its reads in parallel. A read into a
//! caller's buffer (`readinto`) holds the buffer exported while the GIL is released, as
//! CPython's own `readinto` does, so its memory cannot move; bytes returned by `pread` are
//! filled in place, copied only when the read comes back short (the end of the file).
//!
//! **Errors** are `OSError`s built as Python's own are, `OSError(errno, message, filename)`,
//! so Python picks the subclass from the errno: `FileNotFoundError` for a missing file or
//! object, `PermissionError` for refused credentials, `IsADirectoryError`, and so on. Errors
//! the system did not number (a store's 404, a bad URL) get the errno of their kind.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ahead::engine::EngineBuilder;
use ahead::pattern::Pattern;
use ahead::{sim, Advice, DeviceModel, PolicyConfig, SimConfig};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The errno Python would have raised for `e`: the system's own, or its kind's.
fn errno_of(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    use io::ErrorKind::*;
    match e.kind() {
        NotFound => libc_errno::ENOENT,
        PermissionDenied => libc_errno::EACCES,
        InvalidInput => libc_errno::EINVAL,
        Unsupported => libc_errno::EOPNOTSUPP,
        TimedOut => libc_errno::ETIMEDOUT,
        ConnectionRefused => libc_errno::ECONNREFUSED,
        ConnectionReset => libc_errno::ECONNRESET,
        IsADirectory => libc_errno::EISDIR,
        _ => libc_errno::EIO,
    }
}

/// The few errnos used above (Linux's numbers; the engine is Linux-only).
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EACCES: i32 = 13;
    pub const EISDIR: i32 = 21;
    pub const EINVAL: i32 = 22;
    pub const EOPNOTSUPP: i32 = 95;
    pub const ECONNRESET: i32 = 104;
    pub const ETIMEDOUT: i32 = 110;
    pub const ECONNREFUSED: i32 = 111;
}

/// `e` as Python's `OSError(errno, message, filename)`.
fn os_error(e: io::Error, name: &str) -> PyErr {
    let errno = errno_of(&e);
    // A URL's password is never shown (the engine's messages hide it already).
    let name = &ahead::engine::redact_url(name);
    // Python shows the filename itself: the engine's leading "NAME: " goes, and so does
    // Rust's " (os error N)" (Python shows "[Errno N]").
    let text = e.to_string();
    let text = text
        .strip_prefix(name)
        .and_then(|t| t.strip_prefix(": "))
        .unwrap_or(&text);
    let message = match text.find(" (os error ") {
        Some(at) => {
            let close = text[at..].find(')').map_or(text.len(), |i| at + i + 1);
            format!("{}{}", &text[..at], &text[close..])
        }
        None => text.to_string(),
    };
    PyOSError::new_err((errno, message, name.to_string()))
}

/// A size from Python: bytes as an int, or text such as "256m" or "1g".
fn size_arg(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if let Ok(n) = value.extract::<u64>() {
        return Ok(n);
    }
    if let Ok(text) = value.extract::<String>() {
        return ahead::units::parse_size(&text)
            .map(|b| b.0)
            .map_err(|e| PyValueError::new_err(format!("{what}: {e}")));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a number of bytes or a size such as '256m'"
    )))
}

/// A file, object, directory or prefix as Python gets it: `(name, size, is_dir, etag,
/// mtime_ns)`.
type Entry = (String, u64, bool, Option<String>, i64);

/// An object's version as `Engine.open_known` takes it: (url, size, etag, mtime_ns).
type Pin = (String, u64, Option<String>, i64);

fn entry(e: ahead::engine::Entry) -> Entry {
    (e.name, e.size, e.is_dir, e.e_tag, e.modified_ns)
}

/// An engine: one cache under one memory budget, its backend, and the files opened through it.
#[pyclass(name = "Engine", module = "ahead._ahead", frozen)]
struct PyEngine {
    engine: ahead::Engine,
}

#[pymethods]
impl PyEngine {
    /// `settings`: the engine's settings by name, as text, in order (the library's one table:
    /// `EngineBuilder::set`); `storage_options`: a remote store's own.
    #[new]
    #[pyo3(signature = (settings, storage_options=None))]
    fn new(
        py: Python<'_>,
        settings: Vec<(String, String)>,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let mut builder: EngineBuilder = ahead::Engine::builder();
        for (key, value) in &settings {
            builder = builder.set(key, value).map_err(PyValueError::new_err)?;
        }
        let mut options: Vec<(String, String)> =
            storage_options.unwrap_or_default().into_iter().collect();
        options.sort();
        for (key, value) in &options {
            builder = builder.remote_option(key, value);
        }
        let engine = py.detach(|| builder.build()).map_err(|e| {
            // A setting refused (a budget above the memory there is): the caller's argument.
            if e.kind() == io::ErrorKind::InvalidInput {
                PyValueError::new_err(e.to_string())
            } else {
                os_error(e, "engine")
            }
        })?;
        Ok(PyEngine { engine })
    }

    /// The memory budget in bytes.
    #[getter]
    fn budget(&self) -> u64 {
        self.engine.budget_bytes()
    }

    /// Open `path` (a local path, `s3://bucket/key` or `http(s)://host/path`) for reading.
    #[pyo3(signature = (path, policy=None))]
    fn open(&self, py: Python<'_>, path: PathBuf, policy: Option<String>) -> PyResult<RawFile> {
        // Shown (in errors, `name`, `repr`) with any password in a URL hidden.
        let name = ahead::engine::redact_url(&path.to_string_lossy());
        let engine = self.engine.clone();
        let file = py
            .detach(|| match &policy {
                Some(p) => engine.open_with_policy(&path, p),
                None => engine.open(&path),
            })
            .map_err(|e| os_error(e, &name))?;
        Ok(RawFile {
            file: Mutex::new(Some(Arc::new(file))),
            name,
        })
    }

    /// Open the object a stat just described (`url`, `size`, `etag`) without asking the
    /// store again; its ETag pins the version.
    fn open_known(
        &self,
        py: Python<'_>,
        url: String,
        size: u64,
        etag: Option<String>,
        mtime_ns: i64,
    ) -> PyResult<RawFile> {
        let engine = self.engine.clone();
        let info = ahead::engine::Entry {
            name: url.clone(),
            size,
            is_dir: false,
            e_tag: etag,
            modified_ns: mtime_ns,
        };
        let file = py
            .detach(|| engine.open_entry(&info))
            .map_err(|e| os_error(e, &url))?;
        Ok(RawFile {
            file: Mutex::new(Some(Arc::new(file))),
            name: url,
        })
    }

    /// The engine's statistics as JSON (`ahead.Engine.stats` parses it).
    fn stats_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.engine.stats())
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// `(name, size, is_dir, etag, mtime_ns)` of what `name` is (`Engine::stat`: a local
    /// path or an object URL alike).
    fn stat(&self, py: Python<'_>, name: String) -> PyResult<Entry> {
        let engine = self.engine.clone();
        let info = py
            .detach(|| engine.stat(&name))
            .map_err(|e| os_error(e, &name))?;
        Ok(entry(info))
    }

    /// `(name, size, is_dir, etag, mtime_ns)` of each entry directly under `name`
    /// (`Engine::list`).
    fn list(&self, py: Python<'_>, name: String) -> PyResult<Vec<Entry>> {
        let engine = self.engine.clone();
        let listed = py
            .detach(|| engine.list(&name))
            .map_err(|e| os_error(e, &name))?;
        Ok(listed.into_iter().map(entry).collect())
    }
}

/// One open file or object: reads at an offset, from any thread. `ahead.File` keeps the
/// position and the rest of `io.RawIOBase`.
///
/// Closing never waits for reads in flight, and no thread ever waits for a lock while it holds
/// the GIL: each call takes its own reference to the file under a lock held for a clone, and a
/// close takes the file out. Reads in flight finish on their reference; calls after the close
/// raise `ValueError`; the engine's file (its descriptor) goes with the last reference. (A
/// read-write lock held across the read, as before, deadlocked: a reader waiting for the lock
/// behind a waiting close held the GIL that the reader in flight needed to return.)
#[pyclass(module = "ahead._ahead", frozen)]
struct RawFile {
    /// `None` once closed.
    file: Mutex<Option<Arc<ahead::File>>>,
    name: String,
}

impl RawFile {
    fn open_file(&self) -> PyResult<Arc<ahead::File>> {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| PyValueError::new_err("I/O operation on closed file."))
    }

    /// Read into `dst` at `offset` until it is full or the end of the file.
    fn read_full(file: &ahead::File, dst: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < dst.len() {
            match file.read_at(&mut dst[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

/// A caller's writable buffer, as a pointer and length the GIL-free read may fill.
struct Destination {
    at: usize,
    len: usize,
}

#[pymethods]
impl RawFile {
    /// Fill `buffer` (a writable, C-contiguous bytes-like object of bytes) from `offset`:
    /// bytes read, fewer only at the end of the file.
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let view = PyBuffer::<u8>::get(buffer)?;
        if view.readonly() {
            return Err(PyTypeError::new_err("readinto() needs a writable buffer"));
        }
        if !view.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "readinto() needs a contiguous buffer",
            ));
        }
        let dst = Destination {
            at: view.buf_ptr() as usize,
            len: view.len_bytes(),
        };
        let file = self.open_file()?;
        let file = &*file;
        let read = py.detach(|| {
            // SAFETY: the buffer stays exported (`view` lives past this call), so its memory
            // neither moves nor is freed; it is `len` writable bytes, checked above.
            let slice = unsafe { std::slice::from_raw_parts_mut(dst.at as *mut u8, dst.len) };
            Self::read_full(file, slice, offset)
        });
        drop(view);
        read.map_err(|e| os_error(e, &self.name))
    }

    /// Up to `n` bytes from `offset` (fewer at the end of the file), as `os.pread`.
    fn pread<'py>(&self, py: Python<'py>, n: usize, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let file = self.open_file()?;
        let file = &*file;
        let n = (n as u64).min(file.len().saturating_sub(offset)) as usize;
        let mut got = 0usize;
        let mut failed = None;
        let bytes = PyBytes::new_with(py, n, |dst| {
            match py.detach(|| Self::read_full(file, dst, offset)) {
                Ok(k) => got = k,
                Err(e) => failed = Some(e),
            }
            Ok(())
        })?;
        if let Some(e) = failed {
            return Err(os_error(e, &self.name));
        }
        if got < n {
            // The file shrank under the read: only what was read.
            return Ok(PyBytes::new(py, &bytes.as_bytes()[..got]));
        }
        Ok(bytes)
    }

    /// Size in bytes, as opened.
    fn size(&self) -> PyResult<u64> {
        Ok(self.open_file()?.len())
    }

    /// Why a change of the object while it is read may go unseen (a server that gives neither
    /// ETag nor Last-Modified), or `None`.
    fn unpinned(&self) -> PyResult<Option<String>> {
        Ok(self.open_file()?.unpinned().map(str::to_string))
    }

    /// The object's version as opened, `(url, size, etag, mtime_ns)`, for `Engine.open_known`
    /// to open it again (a forked process); `None` for a local file.
    fn pinned(&self) -> PyResult<Option<Pin>> {
        Ok(self
            .open_file()?
            .pinned_entry()
            .map(|e| (e.name, e.size, e.e_tag, e.modified_ns)))
    }

    /// Whether reads bypass the kernel's page cache (O_DIRECT).
    fn is_direct(&self) -> PyResult<bool> {
        Ok(self.open_file()?.is_direct())
    }

    /// Tell the policy how the file will be read: "normal", "sequential", "random",
    /// "willneed" or "dontneed" (the last two for `length` bytes from `offset`).
    fn advise(&self, py: Python<'_>, advice: &str, offset: u64, length: u64) -> PyResult<()> {
        let advice = match advice {
            "normal" => Advice::Normal,
            "sequential" => Advice::Sequential,
            "random" => Advice::Random,
            "willneed" => Advice::WillNeed {
                offset,
                len: length,
            },
            "dontneed" => Advice::DontNeed {
                offset,
                len: length,
            },
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown advice {other:?}: normal, sequential, random, willneed or dontneed"
                )))
            }
        };
        let file = self.open_file()?;
        py.detach(|| file.advise(advice))
            .map_err(|e| os_error(e, &self.name))
    }

    /// This file's figures as JSON (`ahead.File.stats` parses it): the engine's counters for
    /// this file alone, and this open's window and request caps.
    fn stats_json(&self) -> PyResult<String> {
        let file = self.open_file()?;
        let mut v =
            serde_json::to_value(file.stats()).map_err(|e| PyValueError::new_err(e.to_string()))?;
        v["window_max_bytes"] = file.window_max_bytes().into();
        v["request_max_bytes"] = file.request_max_bytes().into();
        Ok(v.to_string())
    }

    /// Close: later calls raise `ValueError`; reads in flight finish (on their own reference
    /// to the file), and the file is let go with the last of them. Returns at once.
    fn close(&self, py: Python<'_>) {
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner()).take();
        // Dropping the last reference closes the descriptor: without the GIL, except while
        // the interpreter finalizes. A file closed then (its last reference dropped on one of
        // pyarrow's I/O threads as the process exits) could not take the GIL back: pyo3 parks
        // such a thread for good, and pyarrow's exit waits for that thread, so the process
        // never ended (seen once in five runs of a pyarrow dataset read through the fsspec
        // filesystem).
        if finalizing(py) {
            drop(file);
        } else {
            py.detach(|| drop(file));
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
}

/// The simulator's settings, as the CLI's flags give them: a dict from `ahead.sim` and
/// `ahead.replay` (sizes as bytes or text such as "64m"; `None` for the default).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ModelArgs<'py> {
    policy: String,
    device: String,
    cache: Option<Bound<'py, PyAny>>,
    ra_max: Option<Bound<'py, PyAny>>,
    io_max: Option<Bound<'py, PyAny>>,
    compute_us: f64,
    eviction: String,
}

/// Pages in a size argument, or `default` bytes' worth where it is `None`.
fn pages_arg(value: Option<&Bound<'_, PyAny>>, what: &str, default: u64) -> PyResult<u64> {
    let bytes = match value {
        Some(v) => size_arg(v, what)?,
        None => default,
    };
    Ok(bytes.div_ceil(ahead::PAGE_SIZE).max(1))
}

impl ModelArgs<'_> {
    /// The configuration, with the window and request sizes a trace brings (`defaults`) where
    /// none is given, as `ahead replay` takes them.
    fn config(&self, defaults: ahead::kernel::TraceDefaults) -> PyResult<SimConfig> {
        let device = DeviceModel::named(&self.device).map_err(PyValueError::new_err)?;
        let ra = pages_arg(
            self.ra_max.as_ref(),
            "ra_max",
            defaults.ra_max_kb.unwrap_or(128) << 10,
        )?;
        let io = match (&self.io_max, defaults.io_max_kb) {
            (Some(v), _) => pages_arg(Some(v), "io_max", 0)?,
            (None, Some(kb)) if self.ra_max.is_none() => pages_arg(None, "io_max", kb << 10)?,
            _ => ra,
        };
        if !(self.compute_us >= 0.0 && self.compute_us.is_finite()) {
            return Err(PyValueError::new_err(
                "compute_us must be a number of microseconds, 0 or more",
            ));
        }
        let eviction = match self.eviction.as_str() {
            "lru" => sim::Eviction::Lru,
            "clock" => sim::Eviction::Clock,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown eviction {other:?}: lru or clock"
                )))
            }
        };
        let mut policy =
            PolicyConfig::new(ra, io).with_fixed_pages(pages_arg(None, "fixed", 128 << 10)?);
        if let Some(order) = defaults.folio_max_order {
            policy.folio_max_order = order;
        }
        Ok(SimConfig {
            cache_pages: pages_arg(self.cache.as_ref(), "cache", 256 << 20)? as usize,
            device,
            compute_ns_per_page: (self.compute_us * 1000.0) as u64,
            policy,
            eviction,
            ..SimConfig::default()
        })
    }

    /// The policies to run: "all", a name, or names separated by commas; the oracle always.
    fn policies(&self) -> PyResult<Vec<&'static str>> {
        let known = || ahead::policy::names();
        let mut list: Vec<&'static str> = if self.policy == "all" {
            known().collect()
        } else {
            self.policy
                .split(',')
                .map(|name| {
                    known().find(|n| *n == name.trim()).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "unknown policy {name:?}; known: {}, or all",
                            known().collect::<Vec<_>>().join(", ")
                        ))
                    })
                })
                .collect::<PyResult<_>>()?
        };
        if !list.contains(&ahead::policy::ORACLE) {
            list.push(ahead::policy::ORACLE);
        }
        Ok(list)
    }
}

/// Each policy's run of `workload()` under `config`, with the GIL released.
fn run_policies(
    py: Python<'_>,
    policies: &[&str],
    config: SimConfig,
    workload: impl Fn() -> ahead::Workload + Sync,
) -> PyResult<Vec<ahead::RunReport>> {
    py.detach(|| {
        policies
            .iter()
            .map(|p| sim::run(p, config, workload()))
            .collect::<Result<Vec<_>, String>>()
    })
    .map_err(PyValueError::new_err)
}

/// `ahead sim --json`'s document for `pattern`, as a string.
#[pyfunction]
fn sim_json(py: Python<'_>, pattern: &str, model: ModelArgs<'_>) -> PyResult<String> {
    let config = model.config(Default::default())?;
    let policies = model.policies()?;
    let parsed = Pattern::parse(pattern).map_err(PyValueError::new_err)?;
    let runs = run_policies(py, &policies, config, || parsed.workload())?;
    let doc = serde_json::json!({
        "pattern": pattern,
        "device": config.device,
        "cache_pages": config.cache_pages,
        "ra_max_pages": config.policy.ra_max_pages,
        "eviction": model.eviction,
        "results": ahead::report::results_json(&runs),
    });
    Ok(doc.to_string())
}

/// `ahead replay --json`'s document for the trace at `path`, as a string.
#[pyfunction]
fn replay_json(py: Python<'_>, path: PathBuf, model: ModelArgs<'_>) -> PyResult<String> {
    let policies = model.policies()?;
    let (trace, defaults, _) = py
        .detach(|| ahead::kernel::load_for_replay(&path))
        .map_err(|e| PyOSError::new_err((libc_errno::EINVAL, e, path.display().to_string())))?;
    let config = trace.timed_config(model.config(defaults)?);
    let sizes: Vec<u64> = trace.files.iter().map(|f| f.size.0).collect();
    let runs = run_policies(py, &policies, config, || {
        trace.clone().into_timed_workload()
    })?;
    let doc = serde_json::json!({
        "trace": path.display().to_string(),
        "notes": trace.notes,
        "program_ns": trace.program_ns,
        "ra_max_pages": config.policy.ra_max_pages,
        "io_max_pages": config.policy.io_max_pages,
        "folio_max_order": config.policy.folio_max_order,
        "results": ahead::report::results_json(&runs),
        "files": ahead::report::files_json(&runs, &sizes),
    });
    Ok(doc.to_string())
}

/// The registered policies' names, in the CLI's order.
#[pyfunction]
fn policy_names() -> Vec<&'static str> {
    ahead::policy::names().collect()
}

/// The reads of a named reader, lazily: `(offset, length)` pairs in bytes.
#[pyclass(unsendable, module = "ahead._ahead")]
struct ReaderReads {
    reads: Box<dyn Iterator<Item = (u64, u64)>>,
}

#[pymethods]
impl ReaderReads {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(mut slf: PyRefMut<'_, Self>) -> Option<(u64, u64)> {
        slf.reads.next()
    }
}

/// The reads of the reader called `name` over `size` bytes: the table every bench reads by
/// name (`ahead::readers`: `ahead bench`, `ahead bench --remote` and the Python bench).
#[pyfunction]
fn reader_reads(name: &str, size: u64) -> PyResult<ReaderReads> {
    let reads = ahead::readers::reads(name, size).map_err(PyValueError::new_err)?;
    Ok(ReaderReads {
        reads: Box::new(reads),
    })
}

/// Every named reader: `(name, about)`.
#[pyfunction]
fn readers() -> Vec<(&'static str, &'static str)> {
    ahead::readers::READERS
        .iter()
        .map(|r| (r.name, r.about))
        .collect()
}

#[pymodule]
fn _ahead(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add_class::<RawFile>()?;
    m.add_class::<ReaderReads>()?;
    m.add_function(wrap_pyfunction!(reader_reads, m)?)?;
    m.add_function(wrap_pyfunction!(readers, m)?)?;
    m.add_function(wrap_pyfunction!(sim_json, m)?)?;
    m.add_function(wrap_pyfunction!(replay_json, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add("DEFAULT_BUDGET", ahead::engine::DEFAULT_BUDGET)?;
    Ok(())
}

/// Whether the interpreter is finalizing (`sys.is_finalizing()`; the C call is in the limited
/// API only from 3.13): a thread that lets go of the GIL then cannot take it back.
fn finalizing(py: Python<'_>) -> bool {
    py.import("sys")
        .and_then(|sys| sys.call_method0("is_finalizing"))
        .and_then(|v| v.extract::<bool>())
        .unwrap_or(true)
}
