//! What a simulation replays: a set of files and a stream of opens, reads, hints and closes.
//!
//! Patterns ([`crate::pattern`]) and traces (`crate::trace`, with the `tools` feature) both produce a [`Workload`]; the
//! simulator ([`crate::sim`]) consumes one. Offsets are in bytes, as applications issue them.

use crate::policy::Hint;
use crate::units::Bytes;

/// A file the workload reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    /// Name for reports (a path for traces, a made-up name for patterns).
    pub name: String,
    /// Size of the file: no I/O goes past it.
    pub size: Bytes,
}

/// One step of a workload. A handle is one open file description (the kernel's `struct file`):
/// each gets its own readahead state; handles on the same file share its cached pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Open `file` (an index into [`Workload::files`]) as `handle`.
    Open {
        /// Handle the later events use.
        handle: u32,
        /// Index of the file.
        file: u32,
    },
    /// Read `len` bytes at `offset` through `handle`.
    Read {
        /// An open handle.
        handle: u32,
        /// Byte offset.
        offset: Bytes,
        /// Byte length.
        len: Bytes,
    },
    /// Pass a hint to the handle's policy.
    Hint {
        /// An open handle.
        handle: u32,
        /// The hint.
        hint: Hint,
    },
    /// Close `handle`; its readahead state is dropped.
    Close {
        /// An open handle.
        handle: u32,
    },
    /// The program works for `ns` before its next event: its own time between reads, or what
    /// the path its reads take costs beside the device (a FUSE round trip).
    Compute {
        /// Nanoseconds.
        ns: u64,
    },
}

/// Files and the events over them.
pub struct Workload {
    /// The files, indexed by [`Event::Open::file`].
    pub files: Vec<FileSpec>,
    /// The events, in order. Patterns generate them lazily, so huge runs cost no memory.
    pub events: Box<dyn Iterator<Item = Event>>,
}

impl Workload {
    /// A workload from a list of events held in memory.
    pub fn from_events(files: Vec<FileSpec>, events: Vec<Event>) -> Workload {
        Workload {
            files,
            events: Box::new(events.into_iter()),
        }
    }
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}
