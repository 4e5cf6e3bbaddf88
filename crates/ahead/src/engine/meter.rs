//! What the engine measures of each device for its policies: latency to the first byte from
//! requests that found the device idle, and bandwidth over busy periods, each sample at least
//! two latencies long (see [`EngineParts`]'s completion path), told to each file's policy when
//! it moves. The bandwidth rises fast and falls slowly (a shallow load draws less than the
//! device gives), except to a sample whose bytes waited in the queue: that load was deeper than
//! the device serves, and the sample is the device's.
//!
//! One meter per device ([`DeviceKey`]): a block device, or an object store's bucket (an HTTP
//! server's host). An engine reading a local file and an S3 object at once would otherwise
//! blend a 100 us disk with a 40 ms round trip into one estimate wrong for both, and a busy
//! period on one would hide the other's idle requests, the only ones latency is measured from.

use super::*;

/// What a meter measures: the device a file's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum DeviceKey {
    /// A local file's block device (`st_dev`).
    Block(u64),
    /// A remote object's store: `s3://bucket`, or `scheme://host` for HTTP.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    Store(String),
    /// The tests' sources.
    #[cfg(test)]
    Other,
}

impl DeviceKey {
    /// The device `object`'s bytes come from.
    pub(super) fn of(object: &ObjectKey) -> DeviceKey {
        match object {
            ObjectKey::Inode { dev, .. } => DeviceKey::Block(*dev),
            #[cfg(feature = "remote")]
            // The bucket, or the origin: what a store is built for (`source::url`, the one
            // parser of object URLs).
            ObjectKey::Url(url) => match super::source::url::parse(url, true) {
                Ok(parsed) => DeviceKey::Store(parsed.place),
                Err(_) => DeviceKey::Store(url.clone()),
            },
            #[cfg(test)]
            ObjectKey::Test(_) => DeviceKey::Other,
        }
    }
}

/// One device's meter, shared by the files read from it, and what its completions need
/// without its lock.
pub(crate) struct DeviceMeter {
    pub(super) meter: Mutex<Meter>,
    /// The meter's version, readable without its lock (checked on every read).
    pub(super) version: AtomicU64,
    /// Requests in flight to this device: a busy period ends when none is left, and a request
    /// submitted while others are in flight measures no latency.
    pub(super) in_flight: AtomicUsize,
}

impl DeviceMeter {
    pub(super) fn new(fixed: Option<DeviceEstimate>) -> DeviceMeter {
        DeviceMeter {
            meter: Mutex::new(Meter::new(fixed)),
            version: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// A meter that takes the device for `model` until it measures it (the user's choice).
    fn starting_as(
        fixed: Option<DeviceEstimate>,
        model: crate::device::DeviceModel,
    ) -> DeviceMeter {
        let meter = DeviceMeter::new(fixed);
        {
            let mut m = meter.lock();
            m.model = model;
            m.chosen = true;
        }
        meter
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Meter> {
        self.meter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Measuring starts over from the estimate a new engine starts with.
    pub(super) fn forget(&self) {
        let mut m = self.lock();
        let version = m.version + 1;
        *m = Meter {
            model: m.model,
            chosen: m.chosen,
            ..Meter::new(m.fixed.then_some(m.estimate))
        };
        m.version = version;
        self.version.store(version, Ordering::Release);
    }
}

/// The engine's meters, one per device, the estimate the builder fixed for all (if any), and
/// the model the user takes each device for until measured (if any).
pub(super) struct Meters {
    by_device: Mutex<FxHashMap<DeviceKey, Arc<DeviceMeter>>>,
    fixed: Option<DeviceEstimate>,
    start: Option<crate::device::DeviceModel>,
    /// The meter of the file opened last: what [`Engine::device_estimate`] reports.
    last: Mutex<Option<Arc<DeviceMeter>>>,
}

impl Meters {
    pub(super) fn new(
        fixed: Option<DeviceEstimate>,
        start: Option<crate::device::DeviceModel>,
    ) -> Meters {
        Meters {
            by_device: Mutex::new(FxHashMap::default()),
            fixed,
            start,
            last: Mutex::new(None),
        }
    }

    /// The meter of `device`, made on its first file's open.
    pub(super) fn of(&self, device: DeviceKey) -> Arc<DeviceMeter> {
        self.by_device
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(device)
            .or_insert_with(|| {
                Arc::new(match self.start {
                    Some(model) => DeviceMeter::starting_as(self.fixed, model),
                    None => DeviceMeter::new(self.fixed),
                })
            })
            .clone()
    }

    /// A file read through `meter` was opened: the one [`Meters::last_estimate`] reports.
    pub(super) fn opened(&self, meter: &Arc<DeviceMeter>) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(meter.clone());
    }

    /// The estimate of the device of the file opened last (the starting one before any).
    pub(super) fn last_estimate(&self) -> DeviceEstimate {
        match &*self.last.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(meter) => meter.lock().estimate,
            None => Meter::new(self.fixed).estimate,
        }
    }

    /// Every meter starts over (see [`DeviceMeter::forget`]).
    pub(super) fn forget_all(&self) {
        for meter in self
            .by_device
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            meter.forget();
        }
    }
}

/// What the engine measures of the device, for the policies.
pub(super) struct Meter {
    pub(super) estimate: DeviceEstimate,
    /// Whether `estimate` holds a measurement yet.
    pub(super) measured: bool,
    /// Whether it is fixed by the builder (never measured).
    pub(super) fixed: bool,
    /// Whether `model` is the user's (the builder's `device_model`, a calibrated profile):
    /// then no source's own guess replaces it.
    pub(super) chosen: bool,
    pub(super) version: u64,
    pub(super) busy_since: Option<Instant>,
    pub(super) busy: Duration,
    pub(super) bytes: u64,
    /// Over the same requests, each one's bytes times its time from submission to completion
    /// (byte-seconds): over `bytes`, how long a byte of the sample waited in the device's
    /// queue and transfer ([`Meter::update`] takes a sample whose bytes waited long as the
    /// device's).
    pub(super) byte_seconds: f64,
    /// What the device is taken for until measured, and what shapes a request's overhead.
    pub(super) model: crate::device::DeviceModel,
}

impl Meter {
    pub(super) fn new(fixed: Option<DeviceEstimate>) -> Meter {
        Meter {
            // Until measured: an NVMe-class device.
            estimate: fixed.unwrap_or(DeviceEstimate {
                latency_ns: 100_000,
                bytes_per_sec: 1_000_000_000,
                request_overhead_ns: 10_000,
            }),
            measured: fixed.is_some(),
            fixed: fixed.is_some(),
            chosen: false,
            version: 0,
            busy_since: None,
            busy: Duration::ZERO,
            bytes: 0,
            byte_seconds: 0.0,
            model: crate::device::DeviceModel::NVME,
        }
    }

    /// What a policy reading with requests of up to `io_pages` pages is told: the measurement,
    /// or until there is one, the simulator's model of an NVMe device (so a new engine's
    /// policies decide as the simulator's do).
    pub(super) fn for_policy(&self, io_pages: u64) -> DeviceEstimate {
        if self.measured {
            self.estimate
        } else {
            self.model.estimate(io_pages)
        }
    }

    /// Take `model` as what the device is until measured (a source that knows its kind: an
    /// object store), read with requests of up to `io_pages` pages. Its requests' overhead then
    /// follows the measured latency as the model's does (a queue slot held for a round trip).
    /// The first measurements move the estimate from the model's figures at that request size:
    /// from its figures for one-page requests (an object store's 4 KiB per round trip), the
    /// bandwidth had to climb back from 9 MB/s half a busy period at a time, and a sequential
    /// reader's windows ramped a round trip per doubling.
    pub(super) fn start_as(&mut self, model: crate::device::DeviceModel, io_pages: u64) {
        if self.fixed || self.chosen || self.model == model {
            return;
        }
        self.model = model;
        if !self.measured {
            self.estimate = model.estimate(io_pages);
        }
    }

    /// Take a latency sample and a bandwidth sample (`saturated`: its bytes waited in the
    /// device's queue, see below).
    pub(super) fn update(
        &mut self,
        latency_ns: Option<u64>,
        bytes_per_sec: Option<u64>,
        saturated: bool,
    ) {
        if self.fixed {
            return;
        }
        self.measured |= latency_ns.is_some() || bytes_per_sec.is_some();
        let mut e = self.estimate;
        if let Some(l) = latency_ns {
            e.latency_ns = (3 * e.latency_ns + l) / 4;
            // Where requests wait on their latency rather than on each other (an object
            // store), a request costs its share of the queue: the latency over the depth.
            let m = &self.model;
            if m.request_overhead_us() > m.per_request_us + m.seek_us {
                e.request_overhead_ns = e.latency_ns / m.queue_depth.max(1) as u64;
            }
        }
        if let Some(b) = bytes_per_sec {
            // A busy period measures what the load drew from the device, which is its
            // bandwidth only when the queue was deep enough. A shallow load (a stride's small
            // records) measures low, shrinks the lead, and keeps the queue shallow: it then
            // measured 60-100 MB/s on a device that streams 1.4 GB/s, and the stride ran
            // below the kernel. So the estimate rises half way to a higher sample, and falls
            // only a sixteenth of the way to a lower one: a slower device still gets there,
            // within some tens of samples. A sample whose bytes waited in the queue for at
            // least twice the device's latency was drawn by a load deeper than the device
            // serves: that is its bandwidth, lower or higher, and the estimate moves half way.
            // (Through a link capped a connection, the estimate had started at the model's
            // 1 GB/s, fallen a sixteenth at a time towards 0.25, and the lead, latency x
            // bandwidth, filled the budget's cap: 0.95 GB held for a scan of 1 GiB.)
            e.bytes_per_sec = if b >= e.bytes_per_sec || saturated {
                (e.bytes_per_sec + b) / 2
            } else {
                e.bytes_per_sec - (e.bytes_per_sec - b) / 16
            };
        }
        let moved = |a: u64, b: u64| a.abs_diff(b) * 5 > b;
        if moved(e.latency_ns, self.estimate.latency_ns)
            || moved(e.bytes_per_sec, self.estimate.bytes_per_sec)
        {
            self.version += 1;
        }
        self.estimate = e;
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceKey, Meter};
    use crate::engine::ObjectKey;

    #[test]
    fn a_device_is_a_block_device_a_bucket_or_a_host() {
        let inode = |dev, ino| DeviceKey::of(&ObjectKey::Inode { dev, ino });
        assert_eq!(inode(8, 1), inode(8, 2));
        assert_ne!(inode(8, 1), inode(9, 1));
        #[cfg(feature = "remote")]
        {
            let url = |u: &str| DeviceKey::of(&ObjectKey::Url(u.into()));
            assert_eq!(url("s3://bkt/a/b.bin"), DeviceKey::Store("s3://bkt".into()));
            assert_eq!(url("s3://bkt/c"), url("s3://bkt/a/b.bin"));
            assert_ne!(url("s3://other/c"), url("s3://bkt/c"));
            assert_eq!(
                url("http://127.0.0.1:8080/x/y"),
                DeviceKey::Store("http://127.0.0.1:8080".into())
            );
            assert_eq!(url("https://host"), DeviceKey::Store("https://host".into()));
        }
    }

    #[test]
    fn the_bandwidth_estimate_rises_fast_and_falls_slowly() {
        let mut m = Meter::new(None);
        let start = m.estimate.bytes_per_sec;
        // One busy period of a shallow load (a stride's small records) barely moves it.
        m.update(None, Some(60_000_000), false);
        assert!(
            m.estimate.bytes_per_sec > start * 9 / 10,
            "{:?}",
            m.estimate
        );
        // A device that really is that slow gets there within some tens of samples.
        for _ in 0..100 {
            m.update(None, Some(60_000_000), false);
        }
        assert!(m.estimate.bytes_per_sec < 66_000_000, "{:?}", m.estimate);
        // A faster sample is believed half at once.
        m.update(None, Some(2_000_000_000), false);
        assert!(m.estimate.bytes_per_sec > 1_000_000_000, "{:?}", m.estimate);
    }

    #[test]
    fn a_sample_whose_bytes_waited_in_the_queue_is_the_devices_bandwidth() {
        // A link capped a connection, 250 MB/s in all, starting from the model's 1 GB/s: a
        // sample drawn by a queue deeper than the device serves moves the estimate half way
        // down, where an unsaturated one moves it a sixteenth.
        let mut saturated = Meter::new(None);
        let mut shallow = Meter::new(None);
        for _ in 0..4 {
            saturated.update(None, Some(250_000_000), true);
            shallow.update(None, Some(250_000_000), false);
        }
        assert!(
            saturated.estimate.bytes_per_sec < 300_000_000,
            "{:?}",
            saturated.estimate
        );
        assert!(
            shallow.estimate.bytes_per_sec > 700_000_000,
            "{:?}",
            shallow.estimate
        );
        // Saturated samples move it either way alike: around the device's own figure.
        saturated.update(None, Some(350_000_000), true);
        saturated.update(None, Some(150_000_000), true);
        let b = saturated.estimate.bytes_per_sec;
        assert!((200_000_000..300_000_000).contains(&b), "{b}");
    }

    /// An object store read in 8 MiB GETs: its first GET (a 4 KiB read's, 45 ms, one small
    /// body) leaves the policies what the model says an 8 MiB GET streams at, so a sequential
    /// reader keeps tens of MiB in flight from its second round trip, not 400 KB.
    #[test]
    fn an_object_store_starts_from_the_models_figures_at_its_request_size() {
        let model = crate::device::DeviceModel::REMOTE;
        let mut m = Meter::new(None);
        m.start_as(model, 2048);
        m.update(Some(45_000_000), Some(9_000_000), false);
        let told = m.for_policy(2048);
        let model_lead = model.estimate(2048).inflight_pages();
        assert!(
            told.inflight_pages() >= model_lead,
            "{told:?}, model {model_lead} pages"
        );
    }
}
