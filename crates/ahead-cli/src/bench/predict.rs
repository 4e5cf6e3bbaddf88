//! The simulator's prediction beside an engine row (`ahead bench --device PROFILE`, and
//! `--device calibrate` on a remote bench): the same reader over a file of the same size, as
//! many of its reads as the engine's run made, the same policy, the engine's budget and the
//! windows it gives the file, on a device model (a profile `ahead calibrate` measured, or a
//! preset). The engine's own cost per read and per page copied (the profile's `host`) is the
//! reader's time per page, as the engine spends it while its reads ahead are in flight. Only
//! the rows of one sequence of reads (the library's named readers) are predicted: the
//! experiments (threads, many files, overlap, a Parquet projection) are not one reader the
//! simulator replays.

use ahead::sim::{self, DeviceModel, Eviction, SimConfig};
use ahead::{PolicyConfig, PAGE_SIZE};

use super::{Plan, Row};
use crate::commands::HostCost;

/// An engine run to replay in the simulator: the first `made` reads of the named reader
/// `reader` over `size` bytes, through `policy` with `config`'s windows and a cache of
/// `cache_bytes`.
pub(super) struct Replayed<'a> {
    pub policy: &'a str,
    pub reader: &'a str,
    pub size: u64,
    pub made: u64,
    pub cache_bytes: u64,
    pub config: PolicyConfig,
}

/// The simulator's MB/s for `run` on `device`, the engine costing the reader `host`; None
/// where the reader is not a named reader or no time passed.
///
/// # Errors
/// The simulator's (an unknown policy).
pub(super) fn predicted_mb_per_s(
    run: &Replayed<'_>,
    device: DeviceModel,
    host: HostCost,
) -> Result<Option<f64>, String> {
    let &Replayed {
        policy,
        reader,
        size,
        made,
        cache_bytes,
        config,
    } = run;
    let Some(named) = ahead::readers::find(reader) else {
        return Ok(None);
    };
    // The reads the engine made: a run stops at its time cap, and a reader's later reads may
    // go otherwise than its first (a random reader's repeats hit the cache).
    let (bytes, read_bytes) = ahead::readers::reads(reader, size)?
        .take(made as usize)
        .fold((0, 0), |(sum, _), (_, len)| (sum + len, len));
    let mut workload = (named.pattern)(size).workload();
    let mut seen = 0u64;
    workload.events = Box::new(workload.events.take_while(move |e| {
        if matches!(e, ahead::Event::Read { .. }) {
            seen += 1;
        }
        seen <= made
    }));
    let report = sim::run(
        policy,
        SimConfig {
            cache_pages: (cache_bytes / PAGE_SIZE) as usize,
            device,
            compute_ns_per_page: host.ns_per_page(read_bytes),
            policy: config,
            eviction: Eviction::Clock,
            ..SimConfig::default()
        },
        workload,
    )?;
    let ms = report.faithful.modeled_ms;
    Ok((ms > 0.0).then(|| bytes as f64 / (ms * 1e3)))
}

/// Fill in `predicted_mb_per_s` and `predicted_error` of every engine row of a named reader;
/// returns notes on what could not be predicted.
pub(super) fn predict(
    plan: &Plan,
    device: DeviceModel,
    host: HostCost,
    rows: &mut [Row],
) -> Vec<String> {
    let mut notes = Vec::new();
    let config = match windows(plan) {
        Ok(c) => c,
        Err(e) => return vec![format!("predictions: {e}")],
    };
    for row in rows.iter_mut() {
        let Some(policy) = row.contender.strip_prefix("ahead:") else {
            continue;
        };
        let run = Replayed {
            policy,
            reader: &row.pattern,
            size: plan.size,
            made: median_reads(row.runs.iter().map(|r| r.reads)),
            cache_bytes: plan.engine.budget,
            config,
        };
        match predicted_mb_per_s(&run, device, host) {
            Ok(Some(mb_per_s)) => {
                row.predicted_mb_per_s = Some(mb_per_s);
                row.predicted_error = Some(mb_per_s / row.mb_per_s.max(1e-9) - 1.0);
            }
            Ok(None) => {}
            Err(e) => notes.push(format!(
                "{} {}: no prediction: {e}",
                row.pattern, row.contender
            )),
        }
    }
    notes
}

/// The median of a row's runs' read counts.
pub(super) fn median_reads(reads: impl Iterator<Item = u64>) -> u64 {
    let mut reads: Vec<u64> = reads.collect();
    reads.sort_unstable();
    reads.get(reads.len() / 2).copied().unwrap_or(0)
}

/// The windows and request sizes the engine gives the bench's file.
fn windows(plan: &Plan) -> Result<PolicyConfig, String> {
    let engine = super::sources::shared_engine(&plan.engine).map_err(|e| e.to_string())?;
    let file = engine.open(&plan.file).map_err(|e| e.to_string())?;
    Ok(file.policy_config())
}
