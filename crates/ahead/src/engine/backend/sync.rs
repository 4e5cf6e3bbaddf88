//! `sync`: `preadv(2)` in the caller's thread, ahead reads included. Nothing overlaps: the
//! "preadv" baseline of the 2020 io_uring seed (004_0138ef365889356d.txt), and the backend of
//! last resort.

use std::sync::Arc;

use super::{Backend, Completer, ReadOp};

/// See the module comment.
pub(crate) struct SyncBackend {
    completer: Arc<dyn Completer>,
}

impl SyncBackend {
    pub fn new(completer: Arc<dyn Completer>) -> SyncBackend {
        SyncBackend { completer }
    }
}

impl Backend for SyncBackend {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn submit(&self, op: Box<ReadOp>) {
        let result = op.file.source.read(&op);
        self.completer.complete(op, result);
    }

    fn is_async(&self) -> bool {
        false
    }

    fn arena_granule(&self) -> usize {
        crate::units::PAGE_SIZE as usize
    }

    /// It reads in the caller's thread with `preadv`: it holds nothing of the arena.
    fn let_go_of_arena(&self, _from: usize, _to: usize) {}
}

/// This backend's entry in the registry.
pub(crate) const REGISTERED: super::Registered = super::Registered {
    name: "sync",
    about: "preadv in the reading thread",
    start: |w| Ok(Box::new(SyncBackend::new(w.completer.clone()))),
};
