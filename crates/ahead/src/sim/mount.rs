//! A program's reads as they reach the engine through `ahead mount`.
//!
//! A program reading a FUSE file reads the kernel's page cache of that file; what the cache
//! lacks the kernel asks the daemon for, in reads it sizes by its own on-demand readahead
//! (the mount's `read_ahead_kb`) and splits at FUSE's largest request. The daemon's engine
//! then reads those, with its own policy, from storage. So a mount is two readaheads in a
//! row, and the first is the kernel's: this module runs the program's workload through the
//! simulator's `linux-ondemand` over a cache that holds every file (nothing is evicted in
//! front: a mount's files are read once per open), keeps each request it sends to its
//! device, and hands those on as the workload the engine's policy sees, each request
//! followed by what a FUSE read costs the program beside storage, which `ahead calibrate
//! --mount` measures in two shapes: a read the program waits for ([`MountPath::wait_ns`]: the
//! kernel to the daemon and back, a small read backward, as the kernel sends it when it reads
//! nothing ahead) and a read of the kernel's readahead ([`MountPath::ahead_ns`]: FUSE's
//! largest, sent while the program reads what is cached, so it pays the part the daemon's
//! work does not hide). A read's size beside these is not priced apart: the two shapes are the
//! two a mount mostly sees.
//!
//! Hints (`fadvise`) are the kernel's: they shape the front's readahead and never reach the
//! daemon. The program's own time ([`Event::Compute`]) passes through in its place.

use super::*;

/// How reads through a mount reach the engine, and what each costs beside storage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MountPath {
    /// The kernel's readahead on the mount's files (its `read_ahead_kb`), in pages.
    pub readahead_pages: u64,
    /// The largest read FUSE sends the daemon, in pages.
    pub request_pages: u64,
    /// What a FUSE read the program waits for costs it, in nanoseconds.
    pub wait_ns: u64,
    /// What a FUSE read of the kernel's readahead costs it, in nanoseconds.
    pub ahead_ns: u64,
}

/// `workload` as the engine under a mount sees it: the requests the kernel's cache in front
/// sends, each followed by its cost (see the module comment).
///
/// # Errors
/// An event naming a file or handle the workload never opened.
pub fn through_mount(workload: Workload, path: MountPath) -> Result<Workload, String> {
    let held: u64 = workload.files.iter().map(|f| f.size.pages_ceil()).sum();
    let config = SimConfig {
        cache_pages: held.clamp(1, usize::MAX as u64) as usize,
        // The front's timing decides nothing it sends; only its requests are kept.
        device: DeviceModel::NVME,
        compute_ns_per_page: 0,
        policy: PolicyConfig::new(path.readahead_pages.max(1), path.request_pages.max(1))
            .with_folio_max_order(0),
        accounting: Accounting::Faithful,
        eviction: Eviction::Lru,
    };
    let mut front = Simulator::new("linux-ondemand", config)?;
    front.record_commands();
    let ids: Vec<u32> = workload
        .files
        .iter()
        .map(|f| front.add_file(&f.name, f.size))
        .collect();
    let mut events = Vec::new();
    for event in workload.events {
        match event {
            Event::Open { handle, file } => {
                let id = *ids
                    .get(file as usize)
                    .ok_or_else(|| format!("open of unknown file #{file}"))?;
                front.open(handle, id)?;
                events.push(event);
            }
            Event::Read {
                handle,
                offset,
                len,
            } => {
                front.read(handle, offset, len)?;
                for sent in front.take_commands() {
                    events.push(Event::Read {
                        handle,
                        offset: Bytes(sent.first_page * PAGE_SIZE),
                        len: Bytes(sent.pages * PAGE_SIZE),
                    });
                    events.push(Event::Compute {
                        ns: if sent.ahead {
                            path.ahead_ns
                        } else {
                            path.wait_ns
                        },
                    });
                }
            }
            Event::Hint { handle, hint } => front.hint(handle, hint)?,
            Event::Close { handle } => {
                front.close(handle);
                events.push(event);
            }
            Event::Compute { .. } => events.push(event),
        }
    }
    Ok(Workload::from_events(workload.files, events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::FileSpec;

    const PATH: MountPath = MountPath {
        readahead_pages: 256,
        request_pages: 32,
        wait_ns: 20_000,
        ahead_ns: 50_000,
    };

    fn reads(w: Workload) -> Vec<(u64, u64)> {
        w.events
            .filter_map(|e| match e {
                Event::Read { offset, len, .. } => Some((offset.0, len.0)),
                _ => None,
            })
            .collect()
    }

    fn file(pages: u64) -> Vec<FileSpec> {
        vec![FileSpec {
            name: "f".into(),
            size: Bytes(pages * PAGE_SIZE),
        }]
    }

    fn reader(pages: u64, step: i64) -> Workload {
        let mut events = vec![Event::Open { handle: 0, file: 0 }];
        for i in 0..pages {
            let page = if step > 0 { i } else { pages - 1 - i };
            events.push(Event::Read {
                handle: 0,
                offset: Bytes(page * PAGE_SIZE),
                len: Bytes(PAGE_SIZE),
            });
        }
        events.push(Event::Close { handle: 0 });
        Workload::from_events(file(pages), events)
    }

    #[test]
    fn a_reader_in_order_reaches_the_engine_as_reads_of_fuses_largest_request() {
        // 4 MiB in 4 KiB reads: the kernel ramps its window up to 1 MiB, split at 128 KiB.
        let sent = reads(through_mount(reader(1024, 1), PATH).unwrap());
        let pages: u64 = sent.iter().map(|&(_, len)| len / PAGE_SIZE).sum();
        assert_eq!(pages, 1024, "every page fetched once: {sent:?}");
        assert!(sent.iter().all(|&(_, len)| len <= 32 * PAGE_SIZE));
        assert!(sent.len() <= 1024 / 32 + 4, "{} requests", sent.len());
        assert!(sent.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    }

    #[test]
    fn a_reader_going_backward_reaches_the_engine_a_read_at_a_time() {
        let sent = reads(through_mount(reader(256, -1), PATH).unwrap());
        assert_eq!(
            sent.len(),
            256,
            "the kernel reads no window behind a reader"
        );
        assert_eq!(sent[0], (255 * PAGE_SIZE, PAGE_SIZE));
    }

    #[test]
    fn each_request_is_followed_by_its_cost() {
        let w = through_mount(reader(256, -1), PATH).unwrap();
        let cost: u64 = w
            .events
            .filter_map(|e| match e {
                Event::Compute { ns } => Some(ns),
                _ => None,
            })
            .sum();
        assert_eq!(cost, 256 * 20_000, "a read backward is waited for");
        let w = through_mount(reader(1024, 1), PATH).unwrap();
        let (mut waits, mut aheads) = (0, 0);
        for e in w.events {
            match e {
                Event::Compute { ns: 20_000 } => waits += 1,
                Event::Compute { ns: 50_000 } => aheads += 1,
                _ => {}
            }
        }
        assert!(
            waits >= 1 && aheads > 4 * waits,
            "{waits} waited, {aheads} ahead"
        );
    }
}
