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
//! An object store adds one more limit: each request streams no faster than one connection
//! carries (`connection_mb_s`, tens of MB/s on S3), however idle the store is, so its
//! throughput is set by how many requests are in flight and how large. That part of a
//! request's time overlaps with other requests, as its latency does.
//!
//! A model is a preset (nvme, hdd, remote) or a profile measured on the user's own device by
//! `ahead calibrate` and written as JSON ([`DeviceModel::named`] takes either).
//!
//! Both drivers use it, so it lives beside them rather than in either: the simulator runs its
//! requests through a `Device` timeline, and the engine's meter starts a source it has not
//! measured yet from a preset (an object store's round trips) and tells the policies an
//! estimate in the same terms ([`DeviceModel::estimate`]).

use std::fmt;

/// Parameters of a modelled device.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DeviceModel {
    /// Preset name (or a profile's), for reports.
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
    /// The most one request streams at, in MB/s (an object store's connection); 0: no limit
    /// but the device's.
    pub connection_mb_s: f64,
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
        connection_mb_s: 0.0,
    };

    /// A 7200 rpm spinning disk: ~8 ms to seek, ~150 MB/s streaming, shallow queue.
    pub const HDD: DeviceModel = DeviceModel {
        name: "hdd",
        latency_us: 200.0,
        per_request_us: 50.0,
        seek_us: 8000.0,
        bandwidth_mb_s: 150.0,
        queue_depth: 4,
        connection_mb_s: 0.0,
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
        connection_mb_s: 0.0,
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

    /// The model `spec` names: a preset's name, or the path of a profile `ahead calibrate`
    /// wrote.
    ///
    /// # Errors
    /// An unknown name (listing the presets), or a profile that cannot be read or is not one.
    pub fn named(spec: &str) -> Result<DeviceModel, String> {
        let path = std::path::Path::new(spec);
        if Self::preset(spec).is_ok() || !(spec.ends_with(".json") || path.is_file()) {
            return Self::preset(spec);
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{spec}: {e}"))?;
        Self::from_profile(&text).map_err(|e| format!("{spec}: {e}"))
    }

    /// A model from a profile's JSON text (the fields of [`DeviceModel`]; anything else in it,
    /// such as what calibration measured, is kept for people and ignored here).
    ///
    /// # Errors
    /// Not JSON, a field missing, or a figure no device has.
    pub fn from_profile(text: &str) -> Result<DeviceModel, String> {
        let p: Profile =
            serde_json::from_str(text).map_err(|e| format!("not a device profile: {e}"))?;
        let model = DeviceModel {
            name: interned(p.name),
            latency_us: p.latency_us,
            per_request_us: p.per_request_us,
            seek_us: p.seek_us,
            bandwidth_mb_s: p.bandwidth_mb_s,
            queue_depth: p.queue_depth,
            connection_mb_s: p.connection_mb_s,
        };
        let times = [model.latency_us, model.per_request_us, model.seek_us];
        if times.iter().any(|t| !(t.is_finite() && *t >= 0.0)) {
            return Err("latency_us, per_request_us and seek_us must be 0 or more".into());
        }
        if !(model.bandwidth_mb_s.is_finite() && model.bandwidth_mb_s > 0.0) {
            return Err("bandwidth_mb_s must be more than 0".into());
        }
        if !(model.connection_mb_s.is_finite() && model.connection_mb_s >= 0.0) {
            return Err("connection_mb_s must be 0 (no limit) or more".into());
        }
        if !(1..=65_536).contains(&model.queue_depth) {
            return Err("queue_depth must be 1 to 65536".into());
        }
        Ok(model)
    }

    /// Time one request of `bytes` spends streaming on its own connection, in microseconds (0
    /// where the model has no per-connection limit).
    fn connection_us(&self, bytes: f64) -> f64 {
        if self.connection_mb_s > 0.0 {
            bytes / self.connection_mb_s
        } else {
            0.0
        }
    }

    /// Modelled bandwidth of the device when it is kept busy with requests of `pages` pages,
    /// in MB/s (for comparing a run against what the device could do).
    pub fn streaming_mb_s(&self, pages: u64) -> f64 {
        self.steady_mb_s(
            pages * crate::units::PAGE_SIZE,
            self.queue_depth as u64,
            false,
        )
    }

    /// The steady rate of `in_flight` requests of `request_bytes` each kept in flight, in MB/s
    /// (not continuing one another where `seeks`): each waits its latency and holds the serial
    /// part for its cost, seek and transfer (and its connection for its own streaming), and at
    /// most `queue_depth` overlap.
    pub fn steady_mb_s(&self, request_bytes: u64, in_flight: u64, seeks: bool) -> f64 {
        let bytes = request_bytes as f64;
        let seek = if seeks { self.seek_us } else { 0.0 };
        let serial_us = self.per_request_us + seek + bytes / self.bandwidth_mb_s;
        let held_us = serial_us.max(self.per_request_us + self.connection_us(bytes));
        let overlapped = in_flight.min(self.queue_depth as u64).max(1) as f64;
        bytes / serial_us.max((self.latency_us + held_us) / overlapped)
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

/// A profile as JSON holds it: [`DeviceModel`]'s fields, the name owned.
#[derive(serde::Deserialize)]
struct Profile {
    name: String,
    latency_us: f64,
    per_request_us: f64,
    seek_us: f64,
    bandwidth_mb_s: f64,
    queue_depth: usize,
    #[serde(default)]
    connection_mb_s: f64,
}

/// `name` as a `&'static str`: a profile's name is kept once per distinct name for the
/// process's life (models are `Copy` and named in reports), so loading the same profile again
/// keeps nothing more.
fn interned(name: String) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.iter().find(|&&n| n == name) {
        return known;
    }
    let kept: &'static str = Box::leak(name.into_boxed_str());
    names.push(kept);
    kept
}

impl fmt::Display for DeviceModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (latency {} us, {} us/request, seek {} us, {} MB/s, queue depth {}",
            self.name,
            self.latency_us,
            self.per_request_us,
            self.seek_us,
            self.bandwidth_mb_s,
            self.queue_depth
        )?;
        if self.connection_mb_s > 0.0 {
            write!(f, ", {} MB/s a connection", self.connection_mb_s)?;
        }
        f.write_str(")")
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
    /// A command's own streaming time per page, where one connection limits it (0: none).
    connection_ns_per_page: f64,
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
            connection_ns_per_page: model.connection_us(crate::units::PAGE_SIZE as f64) * 1000.0,
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
        let serial_done = (begin + self.latency_ns).max(self.serial_free_ns) + serial;
        // On its own connection the command streams no faster than the connection carries,
        // beside (not in turn with) the others.
        let streamed = begin
            + self.latency_ns
            + self.per_request_ns
            + (pages as f64 * self.connection_ns_per_page) as u64;
        let done = serial_done.max(streamed);
        self.serial_free_ns = serial_done;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that answers in 40 ms, 500 MB/s in all, 25 MB/s a connection.
    const CAPPED: DeviceModel = DeviceModel {
        name: "capped",
        latency_us: 40_000.0,
        per_request_us: 0.0,
        seek_us: 0.0,
        bandwidth_mb_s: 500.0,
        queue_depth: 64,
        connection_mb_s: 25.0,
    };

    #[test]
    fn a_capped_connection_holds_one_request_not_the_others() {
        let pages = (2u64 << 20) / crate::units::PAGE_SIZE; // 2 MiB
        let mut d = Device::new(CAPPED, pages);
        // One 2 MiB request: its wait, then 2 MiB at 25 MB/s (84 ms), not at 500 (4 ms).
        let one = d.submit(0, 0, 0, pages);
        assert!((one as f64 / 1e6 - (40.0 + 83.9)).abs() < 0.5, "{one}");
        // Sixteen more at once each stream on their own connection beside it: the sixteenth
        // ends by the serial transfer of all of them (17 x 4.2 ms) or its own streaming,
        // whichever is later, not sixteen streamings in turn.
        let mut last = 0;
        for k in 1..17 {
            last = d.submit(0, 0, k * pages, pages);
        }
        assert!(last < one + 80_000_000, "{last}");
        // Without the cap, a request is done by its wait and its share of the bandwidth.
        let mut free = Device::new(
            DeviceModel {
                connection_mb_s: 0.0,
                ..CAPPED
            },
            pages,
        );
        assert!(free.submit(0, 0, 0, pages) < 45_000_000);
        // The streaming rate at depth the model reports agrees: 64 x 25 MB/s > 500.
        assert!((CAPPED.streaming_mb_s(pages) - 500.0).abs() < 1.0);
        let shallow = DeviceModel {
            queue_depth: 8,
            ..CAPPED
        };
        assert!(shallow.streaming_mb_s(pages) < 8.0 * 25.0);
    }

    #[test]
    fn a_profile_is_read_back_and_a_bad_one_refused() {
        let text = r#"{"name": "my disk", "latency_us": 70.5, "per_request_us": 4.0,
            "seek_us": 0.0, "bandwidth_mb_s": 2100.0, "queue_depth": 6,
            "host": {"read_ns": 150.0}, "calibrated": {"probes": []}}"#;
        let m = DeviceModel::from_profile(text).unwrap();
        assert_eq!(m.name, "my disk");
        assert_eq!(
            (m.latency_us, m.queue_depth, m.connection_mb_s),
            (70.5, 6, 0.0)
        );
        // The same name twice is one name kept.
        let again = DeviceModel::from_profile(text).unwrap();
        assert!(std::ptr::eq(m.name, again.name));
        for (bad, says) in [
            (text.replace("2100.0", "0"), "bandwidth_mb_s"),
            (
                text.replace("\"queue_depth\": 6", "\"queue_depth\": 0"),
                "queue_depth",
            ),
            (text.replace("70.5", "-1"), "latency_us"),
            (text.replace("\"latency_us\": 70.5,", ""), "latency_us"),
            ("[1, 2]".to_string(), "not a device profile"),
        ] {
            let e = DeviceModel::from_profile(&bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert!(DeviceModel::named("floppy")
            .unwrap_err()
            .contains("unknown device"));
        assert!(DeviceModel::named("/no/such/profile.json").is_err());
    }
}
