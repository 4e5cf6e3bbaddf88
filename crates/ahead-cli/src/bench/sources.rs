//! What a benchmark reads through: the kernel (buffered `pread`, with or without
//! `POSIX_FADV_SEQUENTIAL`), `O_DIRECT` with no readahead at all, or the engine with a policy.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ahead::engine::{self, Engine};
use ahead::PAGE_SIZE;

/// A contender: how a pattern's reads reach the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contender {
    /// Buffered `pread(2)`: the kernel's page cache and readahead as configured.
    Kernel,
    /// The same, after `POSIX_FADV_SEQUENTIAL`.
    KernelSeq,
    /// `O_DIRECT` `pread(2)`: no cache, no readahead: the floor.
    Direct,
    /// The engine with this policy.
    Ahead(String),
    /// `O_DIRECT` 1 MiB reads at queue depth 8 over the file: the device's ceiling.
    Device,
}

impl Contender {
    pub fn parse(s: &str) -> Result<Contender, String> {
        Ok(match s {
            "kernel" => Contender::Kernel,
            "kernel-seq" => Contender::KernelSeq,
            "direct" => Contender::Direct,
            "device" => Contender::Device,
            other => match other.strip_prefix("ahead:") {
                Some(p) => {
                    ahead::policy::validate_name(p)?;
                    if p == ahead::policy::ORACLE {
                        return Err("ahead:oracle cannot run on real files (it needs the whole trace in advance)".into());
                    }
                    Contender::Ahead(p.to_string())
                }
                None => {
                    return Err(format!(
                        "unknown contender '{other}'; known: kernel, kernel-seq, direct, device, ahead:<policy>"
                    ))
                }
            },
        })
    }

    pub fn name(&self) -> String {
        match self {
            Contender::Kernel => "kernel".into(),
            Contender::KernelSeq => "kernel-seq".into(),
            Contender::Direct => "direct".into(),
            Contender::Ahead(p) => format!("ahead:{p}"),
            Contender::Device => "device".into(),
        }
    }
}

pub use ahead::os::{drop_kernel_cache, open_direct, AlignedBuf as Aligned};

/// An open source for one run.
pub enum Source {
    Kernel(File),
    Direct(File),
    /// The engine's file (which holds the engine).
    Ahead(engine::File),
}

impl Source {
    /// Open `path` for `contender` (not `Device`), cold: the kernel's cache for it dropped,
    /// and the engine's too (see [`shared_engine`]).
    pub fn open(contender: &Contender, path: &Path, engine: &EngineSettings) -> io::Result<Source> {
        drop_kernel_cache(path)?;
        Ok(match contender {
            Contender::Kernel => Source::Kernel(File::open(path)?),
            Contender::KernelSeq => {
                let f = File::open(path)?;
                ahead::os::fadvise(f.as_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL)?;
                Source::Kernel(f)
            }
            Contender::Direct => Source::Direct(open_direct(path)?),
            Contender::Ahead(policy) => {
                let engine = shared_engine(engine)?;
                let f = engine.open_with_policy(path, policy)?;
                // Cold: whatever an earlier run left of this file in the cache goes (the
                // engine's POSIX_FADV_DONTNEED), and its log starts empty.
                f.advise(engine::Advice::DontNeed {
                    offset: 0,
                    len: u64::MAX,
                })?;
                engine.take_request_log();
                // And it learns the device afresh, as a new engine would: an estimate learned
                // on one pattern's large requests misled the next pattern's small ones
                // (tiobench: 0.72x the kernel in a full suite with it kept; 1.8x in two runs
                // of four with it forgotten).
                engine.forget_device_estimate();
                Source::Ahead(f)
            }
            Contender::Device => {
                return Err(io::Error::other("the device contender has no source"))
            }
        })
    }

    /// The engine's log of requests, if this is the engine and it kept one.
    pub fn request_log(&self) -> Vec<ahead::engine::RequestRecord> {
        match self {
            Source::Ahead(f) => {
                // Times from this run's first request (the engine outlives the run).
                let mut log = f.engine().take_request_log();
                let first = log.iter().map(|r| r.at_ns).min().unwrap_or(0);
                for r in &mut log {
                    r.at_ns -= first;
                }
                log
            }
            _ => Vec::new(),
        }
    }

    /// Read `buf.len()` bytes at `offset` (fewer at the end of the file). `scratch` is a
    /// page-aligned buffer at least as large as `buf` plus two pages, for `O_DIRECT`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64, scratch: &mut Aligned) -> io::Result<usize> {
        match self {
            Source::Kernel(f) => f.read_at(buf, offset),
            Source::Ahead(f) => f.read_at(buf, offset),
            Source::Direct(f) => {
                let start = offset & !4095;
                let end = (offset + buf.len() as u64).next_multiple_of(PAGE_SIZE);
                let span = (end - start) as usize;
                let s = &mut scratch.as_mut_slice()[..span];
                let n = f.read_at(s, start)?;
                let skip = (offset - start) as usize;
                let got = n.saturating_sub(skip).min(buf.len());
                buf[..got].copy_from_slice(&s[skip..skip + got]);
                Ok(got)
            }
        }
    }
}

/// The engine every `ahead:` run of a bench shares, built at its first run and again only if
/// the settings change. One engine for the whole bench is how an application runs one (built
/// at start, kept): its cache's memory, faulted in as the first runs fill it, is not faulted in
/// again by every run (fresh memory costs ~3 s/GiB to touch on this VM): it keeps its memory
/// when a run drops its pages ([`engine::EngineBuilder::keep_memory`]). Each run opens the
/// file with its own policy, after the file's pages are dropped from the cache, reads still in
/// flight from the last run finished, and the device estimate forgotten.
pub fn shared_engine(settings: &EngineSettings) -> io::Result<Engine> {
    static SHARED: std::sync::Mutex<Option<(EngineSettings, Engine)>> = std::sync::Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let key = *settings;
    if let Some((k, e)) = shared.as_ref() {
        if *k == key {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while e.stats().in_flight_pages > 0 && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            return Ok(e.clone());
        }
    }
    // The old one goes first: two budgets at once may not fit in memory. It always logs its
    // requests (each run takes its own: see `Source::request_log`), for the windows picture.
    *shared = None;
    let mut b = Engine::builder()
        .budget(key.budget)
        .record_requests(true)
        .request_log_limit(1 << 22)
        .keep_memory(true);
    if let Some(kb) = key.ra_max_kb {
        b = b.ra_max_kb(kb);
    }
    if let Some(kb) = key.io_max_kb {
        b = b.io_max_kb(kb);
    }
    let e = b.build()?;
    *shared = Some((key, e.clone()));
    Ok(e)
}

/// Settings every `ahead:` contender gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineSettings {
    pub budget: u64,
    pub ra_max_kb: Option<u64>,
    pub io_max_kb: Option<u64>,
}
