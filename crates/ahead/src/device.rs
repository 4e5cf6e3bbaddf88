//! The device model: how long a read request takes.
//!
//! A request pays a latency that overlaps with other requests (up to `queue_depth` of them at
//! once: command round trip, flash read, network first byte), then occupies the device's one
//! serial resource for its per-request cost, a seek when it does not continue where the previous
//! request ended, and its transfer at `bandwidth`. This is enough to make the three questions of
//! readahead visible: fewer, larger requests (per-request cost), early requests (latency hidden
//! behind the reader's work) and enough of them at once (queue depth).
//!
//! A request larger than the device's largest I/O (`max_sectors_kb`, the policies'
//! `io_max_pages`) is split into commands of at most that size, as the block layer splits a
//! bio: each command takes its own queue slot and pays its own per-request cost, and its pages
//! are ready when it completes. A policy's request is still counted once in the reports.
//!
//! Both drivers use it, so it lives beside them rather than in either: the simulator runs its
//! requests through a `Device` timeline, and the engine's meter starts a source it has not
//! measured yet from a preset (an object store's round trips) and tells the policies an
//! estimate in the same terms ([`DeviceModel::estimate`]).

use std::fmt;

/// Parameters of a modelled device.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DeviceModel {
    /// Preset name, for reports.
    pub name: &'static str,
    /// Latency every request pays, overlapped with other requests, in microseconds.
    pub latency_us: f64,
    /// Serial cost of each request (command processing: the IOPS ceiling), in microseconds.
    pub per_request_us: f64,
    /// Serial cost of a request that does not start where the previous one ended, in microseconds.
    pub seek_us: f64,
    /// Transfer rate, in MB/s (10^6 bytes per second).
    pub bandwidth_mb_s: f64,
    /// Requests the device works on at once.
    pub queue_depth: usize,
}

impl DeviceModel {
    /// This project's machines: an NVMe-like virtual disk, ~2.4 GB/s sequential at depth and
    /// ~80K random 4 KiB IOPS at queue depth 32.
    pub const NVME: DeviceModel = DeviceModel {
        name: "nvme",
        latency_us: 80.0,
        per_request_us: 10.5,
        seek_us: 0.0,
        bandwidth_mb_s: 2400.0,
        queue_depth: 32,
    };

    /// A 7200 rpm spinning disk: ~8 ms to seek, ~150 MB/s streaming, shallow queue.
    pub const HDD: DeviceModel = DeviceModel {
        name: "hdd",
        latency_us: 200.0,
        per_request_us: 50.0,
        seek_us: 8000.0,
        bandwidth_mb_s: 150.0,
        queue_depth: 4,
    };

    /// A remote object store (S3-like): ~30 ms to first byte, many requests in parallel,
    /// ~1 GB/s in aggregate.
    pub const REMOTE: DeviceModel = DeviceModel {
        name: "remote",
        latency_us: 30_000.0,
        per_request_us: 0.0,
        seek_us: 0.0,
        bandwidth_mb_s: 1000.0,
        queue_depth: 64,
    };

    /// Every preset, by name.
    pub const PRESETS: [DeviceModel; 3] = [Self::NVME, Self::HDD, Self::REMOTE];

    /// The preset called `name`.
    ///
    /// # Errors
    /// An unknown name, listing the presets.
    pub fn preset(name: &str) -> Result<DeviceModel, String> {
        Self::PRESETS
            .iter()
            .find(|d| d.name == name)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = Self::PRESETS.iter().map(|d| d.name).collect();
                format!(
                    "unknown device '{name}'; known devices: {}",
                    names.join(", ")
                )
            })
    }

    /// Modelled bandwidth of the device when it is kept busy with requests of `pages` pages,
    /// in MB/s (for comparing a run against what the device could do).
    pub fn streaming_mb_s(&self, pages: u64) -> f64 {
        let bytes = (pages * crate::units::PAGE_SIZE) as f64;
        let serial_us = self.per_request_us + bytes / self.bandwidth_mb_s;
        let parallel_us = (self.latency_us + serial_us) / self.queue_depth as f64;
        bytes / serial_us.max(parallel_us)
    }
}

impl DeviceModel {
    /// What a driver measuring this device would tell a policy, for requests of `io_pages`
    /// pages: a request's latency to its first byte (its transfer not counted, as the engine
    /// measures it), the bandwidth at that size, and the per-request overhead.
    pub fn estimate(&self, io_pages: u64) -> crate::policy::DeviceEstimate {
        let io_pages = io_pages.max(1);
        let latency_us = self.latency_us + self.per_request_us;
        crate::policy::DeviceEstimate {
            latency_ns: (latency_us * 1000.0) as u64,
            bytes_per_sec: (self.streaming_mb_s(io_pages) * 1e6) as u64,
            request_overhead_ns: (self.request_overhead_us() * 1000.0) as u64,
        }
    }

    /// What one more request that does not continue the last one costs the device, in
    /// microseconds of its time: 1 / its random-read IOPS ceiling. Either its serial cost (the
    /// command and the seek) or, where requests wait on their latency rather than on each
    /// other (an object store), its share of the queue: a queue slot held for the latency.
    pub fn request_overhead_us(&self) -> f64 {
        let serial = self.per_request_us + self.seek_us;
        let slot = (self.latency_us + self.per_request_us) / self.queue_depth.max(1) as f64;
        serial.max(slot)
    }

    /// Time to transfer one page, in microseconds.
    pub fn page_us(&self) -> f64 {
        crate::units::PAGE_SIZE as f64 / self.bandwidth_mb_s
    }

    /// The longest gap, in pages, that costs less to read through than to skip with one more
    /// request.
    pub fn gap_worth_reading(&self) -> u64 {
        (self.request_overhead_us() / self.page_us()) as u64
    }
}

impl fmt::Display for DeviceModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (latency {} us, {} us/request, seek {} us, {} MB/s, queue depth {})",
            self.name,
            self.latency_us,
            self.per_request_us,
            self.seek_us,
            self.bandwidth_mb_s,
            self.queue_depth
        )
    }
}

/// The device's state during a run: when each queue slot and the serial resource come free.
#[derive(Debug)]
pub(crate) struct Device {
    model: DeviceModel,
    slot_free_ns: Vec<u64>,
    serial_free_ns: u64,
    last_end: (u32, u64),
    latency_ns: u64,
    per_request_ns: u64,
    seek_ns: u64,
    ns_per_page: f64,
    /// Largest command in pages: longer requests are split.
    command_pages: u64,
}

impl Device {
    /// A device that takes commands of at most `command_pages` pages.
    pub(crate) fn new(model: DeviceModel, command_pages: u64) -> Device {
        Device {
            model,
            command_pages: command_pages.max(1),
            slot_free_ns: vec![0; model.queue_depth.max(1)],
            serial_free_ns: 0,
            last_end: (u32::MAX, u64::MAX),
            latency_ns: (model.latency_us * 1000.0) as u64,
            per_request_ns: (model.per_request_us * 1000.0) as u64,
            seek_ns: (model.seek_us * 1000.0) as u64,
            ns_per_page: crate::units::PAGE_SIZE as f64 * 1000.0 / model.bandwidth_mb_s,
        }
    }

    /// Largest command in pages.
    pub(crate) fn command_pages(&self) -> u64 {
        self.command_pages
    }

    /// Submit a command of at most [`Self::command_pages`] pages at `now_ns`; returns when its
    /// data is in memory.
    pub(crate) fn submit(&mut self, now_ns: u64, file: u32, start_page: u64, pages: u64) -> u64 {
        debug_assert!(pages <= self.command_pages);
        let (slot, &slot_free) = self
            .slot_free_ns
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| **t)
            .expect("queue depth is at least 1");
        let begin = now_ns.max(slot_free);
        let seek = if self.last_end == (file, start_page) {
            0
        } else {
            self.seek_ns
        };
        self.last_end = (file, start_page + pages);
        let serial = self.per_request_ns + seek + (pages as f64 * self.ns_per_page) as u64;
        let done = (begin + self.latency_ns).max(self.serial_free_ns) + serial;
        self.serial_free_ns = done;
        self.slot_free_ns[slot] = done;
        done
    }

    /// Queue slots busy at `now_ns`, and the queue's depth.
    pub(crate) fn busy_slots(&self, now_ns: u64) -> (u64, u64) {
        let busy = self.slot_free_ns.iter().filter(|&&t| t > now_ns).count();
        (busy as u64, self.slot_free_ns.len() as u64)
    }

    pub(crate) fn model(&self) -> &DeviceModel {
        &self.model
    }
}
