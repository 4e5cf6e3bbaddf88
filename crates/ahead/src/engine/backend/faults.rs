//! `faults`: wraps any backend and makes chosen requests fail, come back short or come back
//! late, the way a storage engine's tests break its disk. For tests and stress runs only; the
//! engine takes it through [`crate::engine::EngineBuilder::inject_faults`].
//!
//! A request is matched by file (or any file) and byte range: a request that overlaps a rule's
//! range gets its fault. `Fail` completes it with the rule's errno without reading; `Short`
//! reads it but reports only the bytes before the range (a read that stops early, as one
//! racing a truncation does); `Delay` holds it back before it reaches the wrapped backend;
//! `Hold` reads it at once and holds its completion until the test opens a [`Gate`] (a read
//! whose bytes are of one moment and which lands at a later one, whatever happened between:
//! how a test makes a race happen every time instead of one run in six).
//! Rules may fire a limited number of times, and [`Faults::clear`] heals the disk at once, so
//! a test can check that a retry after the fault succeeds. Random faults draw from a seeded
//! generator: the same seed, the same faults for the same requests in the same order.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Backend, Completer, FileData, ReadOp};
use crate::pattern::SplitMix64;

/// What happens to a request a rule matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Fail with this errno (`libc::EIO`, ...), reading nothing.
    Fail(i32),
    /// Read, but report only the bytes before the rule's range.
    Short,
    /// Reach the device this much later.
    Delay(Duration),
    /// Read now; complete only once the gate is open. Under `sync` (and for a read a reader
    /// waits for) the thread that reads waits at the gate; under the asynchronous backends
    /// the completion waits in the injector's own thread, ahead of anything delayed after it.
    Hold(Gate),
}

/// Where [`Fault::Hold`] keeps completions until a test lets them go. Clones are one gate.
#[derive(Clone, Debug, Default)]
pub struct Gate {
    inner: Arc<(Mutex<GateState>, Condvar)>,
}

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    /// Requests read and held (or read and passed, once open).
    held: u64,
    /// Of them, completed.
    landed: u64,
}

impl PartialEq for Gate {
    fn eq(&self, other: &Gate) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Gate {}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.inner.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Let every held completion go, and every later one through.
    pub fn open(&self) {
        self.state().open = true;
        self.inner.1.notify_all();
    }

    /// Requests read so far at this gate.
    pub fn held(&self) -> u64 {
        self.state().held
    }

    /// Of them, the ones completed (reported to the engine).
    pub fn landed(&self) -> u64 {
        self.state().landed
    }

    /// Wait until `pred` holds of (held, landed), or `timeout` passes: whether it held.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(u64, u64) -> bool) -> bool {
        let until = Instant::now() + timeout;
        let mut st = self.state();
        while !pred(st.held, st.landed) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self
                .inner
                .1
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    fn note_read(&self) {
        self.state().held += 1;
        self.inner.1.notify_all();
    }

    fn wait_open(&self) {
        let mut st = self.state();
        while !st.open {
            st = self.inner.1.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn note_landed(&self) {
        self.state().landed += 1;
        self.inner.1.notify_all();
    }
}

#[derive(Clone, Debug)]
struct Rule {
    path: Option<PathBuf>,
    bytes: Range<u64>,
    fault: Fault,
    /// Times it may still fire (`None`: every time).
    left: Option<u64>,
}

/// Random faults: out of every million requests, how many fail (with `errno`), come back
/// short, come back late (by `delay`).
#[derive(Clone, Copy, Debug)]
struct Random {
    fail_ppm: u64,
    short_ppm: u64,
    delay_ppm: u64,
    errno: i32,
    delay: Duration,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    random: Option<(Random, SplitMix64)>,
}

/// A fault plan, shared: clones are one plan, so a test keeps a clone to change or clear it
/// while the engine runs.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    injected: Arc<AtomicU64>,
}

impl Faults {
    /// A plan with no faults.
    pub fn new() -> Faults {
        Faults::default()
    }

    /// Requests overlapping `bytes` of `path` (any file if `None`) get `fault`, at most
    /// `times` times (`None`: every time).
    pub fn add(&self, path: Option<&Path>, bytes: Range<u64>, fault: Fault, times: Option<u64>) {
        self.lock().rules.push(Rule {
            path: path.map(Path::to_path_buf),
            bytes,
            fault,
            left: times,
        });
    }

    /// Random faults from a generator seeded with `seed`: out of a million requests,
    /// `fail_ppm` fail with `errno`, `short_ppm` come back short and `delay_ppm` are delayed by
    /// `delay`.
    pub fn random(
        &self,
        seed: u64,
        fail_ppm: u64,
        short_ppm: u64,
        delay_ppm: u64,
        errno: i32,
        delay: Duration,
    ) {
        self.lock().random = Some((
            Random {
                fail_ppm,
                short_ppm,
                delay_ppm,
                errno,
                delay,
            },
            SplitMix64(seed),
        ));
    }

    /// Heal: no rule and no random fault from now on.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.rules.clear();
        s.random = None;
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fault for a request of `len` bytes at `offset` of `path`, if any; and where a short
    /// read stops (bytes from `offset`).
    fn pick(&self, path: &Path, offset: u64, len: u64) -> Option<(Fault, u64)> {
        let mut s = self.lock();
        let end = offset + len;
        let hit = s.rules.iter_mut().find(|r| {
            r.left != Some(0)
                && r.path.as_deref().is_none_or(|p| p == path)
                && r.bytes.start < end
                && offset < r.bytes.end
        });
        let picked = if let Some(r) = hit {
            if let Some(n) = &mut r.left {
                *n -= 1;
            }
            Some((r.fault.clone(), r.bytes.start.saturating_sub(offset)))
        } else if let Some((r, rng)) = &mut s.random {
            let x = rng.below(1_000_000);
            if x < r.fail_ppm {
                Some((Fault::Fail(r.errno), 0))
            } else if x < r.fail_ppm + r.short_ppm {
                // Stop somewhere inside the request, on a page boundary or not.
                Some((Fault::Short, rng.below(len.max(1))))
            } else if x < r.fail_ppm + r.short_ppm + r.delay_ppm {
                Some((Fault::Delay(r.delay), 0))
            } else {
                None
            }
        } else {
            None
        };
        if picked.is_some() {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        picked
    }
}

/// A request held back, and when it may go; or one read, whose completion waits at a gate.
enum Delayed {
    Submit(Instant, Box<ReadOp>),
    Complete(Gate, Box<ReadOp>, io::Result<usize>),
}

/// The wrapper. See the module comment.
pub(crate) struct FaultBackend {
    inner: Arc<dyn Backend>,
    completer: Arc<dyn Completer>,
    faults: Faults,
    /// Delayed requests go to a thread of their own that submits each when its time comes,
    /// so the submitter is not held up (a slow device's completion arrives late, too).
    delayed: Mutex<Option<mpsc::Sender<Delayed>>>,
    delay_thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultBackend {
    pub fn new(
        inner: Box<dyn Backend>,
        completer: Arc<dyn Completer>,
        faults: Faults,
    ) -> io::Result<Self> {
        let inner: Arc<dyn Backend> = Arc::from(inner);
        let (tx, rx) = mpsc::channel::<Delayed>();
        let late = inner.clone();
        let late_completer = completer.clone();
        let delay_thread = std::thread::Builder::new()
            .name("ahead-fault-delay".into())
            .spawn(move || {
                // Ends when the backend (and its sender) is dropped.
                for delayed in rx {
                    match delayed {
                        Delayed::Submit(at, op) => {
                            std::thread::sleep(at.saturating_duration_since(Instant::now()));
                            late.submit(op);
                        }
                        Delayed::Complete(gate, op, result) => {
                            gate.wait_open();
                            late_completer.complete(op, result);
                            gate.note_landed();
                        }
                    }
                }
            })?;
        Ok(FaultBackend {
            inner,
            completer,
            faults,
            delayed: Mutex::new(Some(tx)),
            delay_thread: Some(delay_thread),
        })
    }

    /// Hand `late` to the delay thread; back if it is gone.
    fn send_late(&self, late: Delayed) -> Result<(), Delayed> {
        match &*self.delayed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(tx) => tx.send(late).map_err(|mpsc::SendError(l)| l),
            None => Err(late),
        }
    }

    fn pick(&self, op: &ReadOp) -> Option<(Fault, u64)> {
        self.faults
            .pick(op.file.source.path(), op.offset(), op.len() as u64)
    }
}

impl Backend for FaultBackend {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn late_note(&self) -> Option<crate::engine::Fallback> {
        self.inner.late_note()
    }

    fn completion_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.inner.completion_fd()
    }

    fn attach_driver(&self, attached: bool) {
        self.inner.attach_driver(attached)
    }

    fn reap_completions(&self) -> usize {
        self.inner.reap_completions()
    }

    fn submit(&self, op: Box<ReadOp>) {
        match self.pick(&op) {
            None => self.inner.submit(op),
            Some((Fault::Fail(errno), _)) => {
                self.completer
                    .complete(op, Err(io::Error::from_raw_os_error(errno)));
            }
            Some((Fault::Short, keep)) => {
                let result = self.inner.read_now(&op).map(|n| n.min(keep as usize));
                self.completer.complete(op, result);
            }
            Some((Fault::Delay(d), _)) => {
                if !self.inner.is_async() {
                    std::thread::sleep(d);
                    self.inner.submit(op);
                    return;
                }
                if let Err(Delayed::Submit(_, op)) =
                    self.send_late(Delayed::Submit(Instant::now() + d, op))
                {
                    // The delay thread is gone: submit it now rather than lose it.
                    self.inner.submit(op);
                }
            }
            Some((Fault::Hold(gate), _)) => {
                let result = self.inner.read_now(&op);
                gate.note_read();
                if !self.inner.is_async() {
                    gate.wait_open();
                    self.completer.complete(op, result);
                    gate.note_landed();
                    return;
                }
                if let Err(Delayed::Complete(gate, op, result)) =
                    self.send_late(Delayed::Complete(gate, op, result))
                {
                    gate.wait_open();
                    self.completer.complete(op, result);
                    gate.note_landed();
                }
            }
        }
    }

    fn read_now(&self, op: &ReadOp) -> io::Result<usize> {
        match self.pick(op) {
            None => self.inner.read_now(op),
            Some((Fault::Fail(errno), _)) => Err(io::Error::from_raw_os_error(errno)),
            Some((Fault::Short, keep)) => self.inner.read_now(op).map(|n| n.min(keep as usize)),
            Some((Fault::Delay(d), _)) => {
                std::thread::sleep(d);
                self.inner.read_now(op)
            }
            Some((Fault::Hold(gate), _)) => {
                let result = self.inner.read_now(op);
                gate.note_read();
                gate.wait_open();
                gate.note_landed();
                result
            }
        }
    }

    fn take_queued(&self, file: &Arc<FileData>, page: u64) -> Option<Box<ReadOp>> {
        self.inner.take_queued(file, page)
    }

    fn is_async(&self) -> bool {
        self.inner.is_async()
    }

    fn arena_granule(&self) -> usize {
        self.inner.arena_granule()
    }

    fn let_go_of_arena(&self, from: usize, to: usize) {
        self.inner.let_go_of_arena(from, to)
    }
}

impl Drop for FaultBackend {
    /// Close the delay queue and wait for its thread: it holds the wrapped backend, and with it
    /// the cache, so an engine dropped gives its memory back at once, not when that thread
    /// gets round to ending.
    fn drop(&mut self) {
        self.delayed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = self.delay_thread.take() {
            let _ = t.join();
        }
    }
}
