//! # ahead: userspace readahead
//!
//! Policies decide, drivers act. A readahead [`policy`] is a pure state machine per open file:
//! told of each application read, it looks at the cache and asks for I/O. The [`sim`]ulator is
//! one driver: it replays [`pattern`]s and traces against a modelled page cache and device
//! and reports the figures the 2004 readahead paper reported, with modelled time. `paper`
//! reproduces that paper's Figures 4-10. `kernel` records the live kernel's readahead
//! decisions and lines them up with the `linux-ondemand` model's. The [`engine`] is the other
//! driver: the same policies reading real files, with io_uring over `O_DIRECT` into a cache of
//! its own under one memory budget. (`trace`, `paper`, `kernel`, `report` and `os` are the
//! command line's, with the `tools` feature.)

//!
//! # Embedding the engine
//!
//! What a storage engine or a data service uses is at the root: [`Engine`] (with
//! [`EngineBuilder`]), [`File`], [`OpenOptions`], [`Advice`], [`Stats`] and the batch and async
//! types ([`ReadAt`], [`ReadMany`], [`Prefetch`], [`ReadStream`], and [`ReadDirect`] for reads
//! into the caller's own [`AlignedBuf`] past the cache, as a database with its own buffer pool
//! reads random blocks). The examples below run as
//! doc tests (`cargo test --doc`), each on a file of its own.
//!
//! **A blocking read**, `pread(2)`-style, from any number of threads:
//!
//! ```
//! # let path = std::env::temp_dir().join(format!("ahead-doc-blocking-{}", std::process::id()));
//! # std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
//! let engine = ahead::Engine::builder().budget(64 << 20).build()?;
//! let file = engine.open(&path)?;
//! let mut buf = vec![0u8; 64 << 10];
//! let n = file.read_at(&mut buf, 4096)?;
//! assert_eq!(n, 64 << 10);
//! assert!(buf.iter().all(|&b| b == 7));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! **An async read under tokio**: the task parks while its pages are in flight and is woken by
//! the engine's completion thread; the engine needs no runtime of its own.
//!
//! ```
//! # let path = std::env::temp_dir().join(format!("ahead-doc-async-{}", std::process::id()));
//! # std::fs::write(&path, (0..1u32 << 18).flat_map(u32::to_le_bytes).collect::<Vec<u8>>()).unwrap();
//! let engine = ahead::Engine::builder().budget(64 << 20).build()?;
//! let file = std::sync::Arc::new(engine.open(&path)?);
//! let rt = tokio::runtime::Runtime::new()?;
//! let words = rt.block_on(async {
//!     let mut tasks = Vec::new();
//!     for i in 0..8u64 {
//!         let file = file.clone();
//!         tasks.push(tokio::spawn(async move {
//!             let mut word = [0u8; 4];
//!             file.read_at_async(&mut word, i * 30_000 * 4).await.map(|_| u32::from_le_bytes(word))
//!         }));
//!     }
//!     let mut words = Vec::new();
//!     for t in tasks {
//!         words.push(t.await.unwrap()?);
//!     }
//!     Ok::<_, std::io::Error>(words)
//! })?;
//! assert_eq!(words, (0..8).map(|i| i * 30_000).collect::<Vec<u32>>());
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! An event loop that watches descriptors can reap the completions itself instead, in its own
//! thread: [`Engine::completions`] (an example with tokio's `AsyncFd` is on [`Completions`]).
//!
//! **A batch of known ranges** with [`File::read_many`]: merged into as few requests as the
//! device's costs favour and sent together (an async twin, [`File::read_many_async`]):
//!
//! ```
//! # let path = std::env::temp_dir().join(format!("ahead-doc-many-{}", std::process::id()));
//! # std::fs::write(&path, (0..=255u8).cycle().take(4 << 20).collect::<Vec<u8>>()).unwrap();
//! let engine = ahead::Engine::builder().budget(64 << 20).build()?;
//! let file = engine.open(&path)?;
//! let blocks = file.read_many(&[(3 << 20, 16 << 10), (5, 10), (100 << 10, 16 << 10)])?;
//! assert_eq!(blocks[1], (5..15).collect::<Vec<u8>>());
//! assert_eq!(blocks[0].len(), 16 << 10);
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! **A read stream** ([`File::read_stream`]): the caller says which ranges come next, the
//! engine keeps reads in flight ahead of it (further while they need I/O, as PostgreSQL's
//! read stream does) and yields each range's bytes in order:
//!
//! ```
//! # let path = std::env::temp_dir().join(format!("ahead-doc-stream-{}", std::process::id()));
//! # std::fs::write(&path, vec![1u8; 8 << 20]).unwrap();
//! let engine = ahead::Engine::builder().budget(64 << 20).build()?;
//! let file = engine.open(&path)?;
//! // Every third 8 KiB block, as an index scan might visit them.
//! let blocks = (0..200u64).map(|b| (b * 3 * 8192, 8192));
//! let mut total = 0;
//! for block in file.read_stream(blocks) {
//!     let (_offset, bytes) = block?;
//!     total += bytes.len();
//! }
//! assert_eq!(total, 200 * 8192);
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! **Per-file options** ([`OpenOptions`]): a policy, caps on the window and the request, direct
//! or buffered, and the caller's block size (every request whole blocks):
//!
//! ```
//! # let path = std::env::temp_dir().join(format!("ahead-doc-options-{}", std::process::id()));
//! # std::fs::write(&path, vec![3u8; 1 << 20]).unwrap();
//! use ahead::OpenOptions;
//! let engine = ahead::Engine::builder().budget(64 << 20).build()?;
//! let table = OpenOptions::new()
//!     .policy("fixed")
//!     .window_max(256 << 10)
//!     .block_size(16 << 10)
//!     .open(&engine, &path)?;
//! let mut row = [0u8; 100];
//! table.read_at(&mut row, 70_000)?;
//! assert_eq!(row, [3u8; 100]);
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Side effects
//!
//! Leases (on unless [`EngineBuilder::leases`] turns them off): the first engine to take a
//! read lease installs a handler for the real-time signal `SIGRTMAX - 3` (set with `F_SETSIG`,
//! so a lease break does not kill the process with `SIGIO`) and starts one thread, `ahead-lease`,
//! that gives broken leases back; both last for the life of the process. A process that uses
//! that signal itself picks another with [`EngineBuilder::lease_signal`] (every engine of the
//! process must agree), or builds its engines with `.leases(false)` (every read of a local
//! file then checks its size with `fstat`). The io_uring backend starts one completion thread
//! per engine; the thread-pool backend, its pool. While an engine's cache grows past 8 MiB for
//! local files, a thread `ahead-fault-ahead` faults its memory in just ahead of the reads,
//! ending 200 ms after the growth stops ([`EngineBuilder::fault_ahead`] turns it off).

#![warn(missing_docs)]

pub mod device;
pub mod engine;
#[cfg(feature = "tools")]
pub mod kernel;
#[cfg(feature = "tools")]
pub mod os;
#[cfg(not(feature = "tools"))]
mod os;
#[cfg(feature = "tools")]
pub mod paper;
pub mod pattern;
mod per_process;
pub mod policy;
pub mod readers;
#[cfg(feature = "tools")]
pub mod report;
pub mod sim;
#[cfg(feature = "tools")]
pub mod trace;
pub mod units;
pub mod workload;

pub use engine::{
    Advice, AlignedBuf, BackendChoice, Completions, Engine, EngineBuilder, Fallback, FallbackKind,
    File, FileStats, Latency, OpenOptions, Prefetch, Range, ReadAt, ReadDirect, ReadMany,
    ReadStream, RequestRecord, Stats,
};
pub use policy::DeviceEstimate;
pub use policy::{AppRead, Hint, IoKind, IoRequest, Policy, PolicyConfig, RaContext};
pub use sim::{DeviceModel, Metrics, RunReport, SimConfig, Simulator};
pub use units::{Bytes, PageRange, PAGE_SIZE};
pub use workload::{Event, FileSpec, Workload};
