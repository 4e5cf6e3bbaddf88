//! # ahead: userspace readahead
//!
//! Policies decide, drivers act. A readahead [`policy`] is a pure state machine per open file:
//! told of each application read, it looks at the cache and asks for I/O. The [`sim`]ulator is
//! one driver: it replays [`pattern`]s and [`trace`]s against a modelled page cache and device
//! and reports the figures the 2004 readahead paper reported, with modelled time. [`paper`]
//! reproduces that paper's Figures 4-10. [`kernel`] records the live kernel's readahead
//! decisions and lines them up with the `linux-ondemand` model's. The [`engine`] is the other
//! driver: the same policies reading real files, with io_uring over `O_DIRECT` into a cache of
//! its own under one memory budget.

#![warn(missing_docs)]

pub mod engine;
pub mod kernel;
pub mod os;
pub mod paper;
pub mod pattern;
pub mod policy;
pub mod report;
pub mod sim;
pub mod trace;
pub mod units;
pub mod workload;

pub use engine::{Advice, BackendChoice, Engine, File, RequestRecord, Stats};
pub use policy::{AppRead, Hint, IoKind, IoRequest, Policy, PolicyConfig, RaContext};
pub use sim::{DeviceModel, Metrics, RunReport, SimConfig, Simulator};
pub use units::{Bytes, PageRange, PAGE_SIZE};
pub use workload::{Event, FileSpec, Workload};
