//! `threads`: a pool of threads, each taking reads off one queue and doing `preadv(2)`. The
//! fallback where io_uring is missing (old kernels, seccomp, `io_uring_disabled`). As many
//! threads as reads the device should have in flight; each blocks in the kernel for its read.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::{Backend, Completer, FileData, ReadOp};

struct Queue {
    ops: VecDeque<Box<ReadOp>>,
    stop: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    completer: Arc<dyn Completer>,
}

/// See the module comment.
pub(crate) struct ThreadsBackend {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl ThreadsBackend {
    /// A pool of `threads` workers.
    pub fn new(threads: usize, completer: Arc<dyn Completer>) -> std::io::Result<ThreadsBackend> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                ops: VecDeque::new(),
                stop: false,
            }),
            ready: Condvar::new(),
            completer,
        });
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            let shared = shared.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("ahead-io-{i}"))
                    .stack_size(64 << 10)
                    .spawn(move || worker(&shared))?,
            );
        }
        Ok(ThreadsBackend { shared, workers })
    }
}

fn worker(shared: &Shared) {
    loop {
        let op = {
            let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(op) = q.ops.pop_front() {
                    break op;
                }
                if q.stop {
                    return;
                }
                q = shared.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let result = op.file.source.read(&op);
        shared.completer.complete(op, result);
    }
}

impl Backend for ThreadsBackend {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn submit(&self, op: Box<ReadOp>) {
        let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.ops.push_back(op);
        drop(q);
        self.shared.ready.notify_one();
    }

    fn take_queued(&self, file: &Arc<FileData>, page: u64) -> Option<Box<ReadOp>> {
        let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let i = q.ops.iter().position(|op| op.covers(file, page))?;
        q.ops.remove(i)
    }

    fn arena_granule(&self) -> usize {
        crate::units::PAGE_SIZE as usize
    }

    /// Its threads read with `preadv`, which pins pages only while a read is in flight: it
    /// holds nothing of the arena between reads.
    fn let_go_of_arena(&self, _from: usize, _to: usize) {}
}

impl Drop for ThreadsBackend {
    fn drop(&mut self) {
        // Workers finish what is queued (the arena must outlive every read), then stop.
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stop = true;
        self.shared.ready.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// This backend's entry in the registry.
pub(crate) const REGISTERED: super::Registered = super::Registered {
    name: "threads",
    about: "a thread pool doing preadv",
    start: |w| {
        Ok(Box::new(ThreadsBackend::new(
            w.threads,
            w.completer.clone(),
        )?))
    },
};
