//! Completions reaped in the caller's own event loop: [`Engine::completions`].
//!
//! By default a reaper thread of the engine's waits in the kernel for every read's completion
//! and wakes whoever waits for it: a blocking reader, or an async read's future, whatever the
//! executor. That imposes no runtime, and costs an async service one hand-off per burst of
//! completions that it need not pay. io_uring posts a read's completion from the thread that
//! submitted it, so an executor thread with reads in flight is woken to post them; the reaper
//! is then woken for them, reaps them, and wakes the executor thread back to poll its futures.
//!
//! An event loop that watches descriptors (tokio's reactor, mio, a database's own `epoll`
//! loop) can instead watch the ring's: it turns readable when completions are posted, and
//! [`Completions::reap`] finishes them in the loop's thread, waking its futures there. A
//! [`Completions`] is that descriptor ([`AsFd`]) and the call; while one is alive the reaper
//! stops waiting for completions and only backs the caller up: every 2 ms while reads are in
//! flight (`backend::uring::BACKSTOP`), it reaps what waited a whole tick with no
//! [`Completions::reap`] meanwhile. So a loop that stalls delays reads by a few milliseconds
//! and never hangs them, and blocking readers in other threads need nothing of the loop.
//! Dropping the last [`Completions`] gives the completions back to the reaper.
//!
//! Only the `uring` backend has a completion queue to hand out; under `threads` and `sync`
//! reads complete in the engine's own threads (or the caller's), and [`Engine::completions`]
//! is `None`. Measured: BENCHMARKS.md, issue 22 run 10.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use super::{Engine, EngineParts};

/// The engine's completions, reaped by the caller's event loop (see `engine::completions`):
/// watch the descriptor ([`AsFd`]) for readability and call [`Completions::reap`] when it is.
/// Register it edge-triggered or level-triggered as the loop does; either way, clear the
/// readiness before reaping (a completion posted while reaping turns it readable again).
///
/// Under tokio (the `net` feature's `AsyncFd`):
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("ahead-doc-completions-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("data");
/// # std::fs::write(&path, vec![7u8; 1 << 20])?;
/// use tokio::io::{unix::AsyncFd, Interest};
///
/// let engine = ahead::Engine::new()?;
/// let file = engine.open(&path)?;
/// let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
/// rt.block_on(async {
///     if let Some(completions) = engine.completions() {
///         // SAFETY: `completions` owns the ring's descriptor's use here: it stays open, and
///         // the same, for as long as the `AsyncFd` holds it.
///         let ring = unsafe { AsyncFd::register_with_interest(completions, Interest::READABLE) }
///             .map_err(|e| e.into_parts().1)?;
///         tokio::spawn(async move {
///             while let Ok(mut ready) = ring.readable().await {
///                 ready.clear_ready();
///                 ring.get_ref().reap();
///             }
///         });
///     }
///     let (n, buf) = file.read_direct(ahead::AlignedBuf::new(4096), 8192).await;
///     assert_eq!((n?, buf.as_slice()[0]), (4096, 7));
///     Ok::<_, std::io::Error>(())
/// })?;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub struct Completions {
    engine: Arc<EngineParts>,
}

impl Engine {
    /// The engine's completions, for the caller's event loop to reap in its own thread
    /// instead of the engine's reaper thread handing them over (see [`Completions`]). `None`
    /// where the backend is not `uring` (its reads complete in the engine's own threads).
    /// Each call attaches one more driver; the reaper waits for completions again when the
    /// last is dropped.
    pub fn completions(&self) -> Option<Completions> {
        self.inner.backend.completion_fd()?;
        self.inner.backend.attach_driver(true);
        Some(Completions {
            engine: self.inner.clone(),
        })
    }
}

impl Completions {
    /// Finish every read whose completion the kernel has posted, in this thread: its bytes
    /// land, its waiters wake (a future's waker is called here). How many reads finished: 0
    /// when none was posted, or when another thread is reaping them at this moment.
    pub fn reap(&self) -> usize {
        self.engine.backend.reap_completions()
    }
}

impl AsFd for Completions {
    /// The ring's descriptor: readable while completions wait to be reaped.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.engine
            .backend
            .completion_fd()
            .expect("a Completions exists only for a backend with a completion queue")
    }
}

impl AsRawFd for Completions {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl Drop for Completions {
    fn drop(&mut self) {
        self.engine.backend.attach_driver(false);
    }
}

impl std::fmt::Debug for Completions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completions")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
