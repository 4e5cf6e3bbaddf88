//! The oracle's runs: it is handed the whole workload, plans every read's requests, plays
//! each of its plans ([`Ramp::plans`]) as a simulation of its own, and keeps the fastest that
//! wastes only the gaps it chose; where the reader computes, the fastest plans are replayed
//! with their requests cut where reads waited (see `policy/oracle.rs`).

use super::*;
use crate::policy::oracle::Nudge;

/// Rounds of cutting the oracle's best plan where its reads waited (see `play_oracle`).
const ORACLE_CUT_ROUNDS: usize = 8;

/// Reads the local search over the oracle's best plan may replay in all (see `nudge`): a
/// small workload's plan gets every step tried, round after round; a large one's none (its
/// requests are many, and the cuts above have done what replays can afford there).
const NUDGE_READS: usize = 1 << 18;

/// Steps the local search may take that gain nothing (a plateau: two cuts together pay where
/// either alone does not), before it stops.
const NUDGE_SIDEWAYS: usize = 1;

impl Simulator {
    /// Run `workload` as the oracle: every plan played, the fastest clean one kept (this
    /// simulator becomes its run).
    pub(super) fn play_oracle(&mut self, workload: Workload) -> Result<(), String> {
        let events: Vec<Event> = workload.events.collect();
        let fresh = self.files.is_empty() && self.seq == 0;
        let budget = policy::readahead_budget(self.cache.capacity() as u64, 1);
        let mut plans = Ramp::plans(self.cache.capacity() as u64, budget, self.seek_pages());
        if !fresh {
            plans.truncate(1);
        }
        // The fastest plan that wastes only the gaps it chose (a plan whose reach let pages
        // age out before their read is not kept, however fast).
        let mut played: Vec<(bool, (Ramp, u64), Simulator, Oracle)> = Vec::new();
        // The reads the plans are made for: the same for every plan (every fresh run adds the
        // workload's files under the same ids).
        let mut needs: Option<Vec<Need>> = None;
        for (ramp, reach) in plans {
            let mut sim = if fresh {
                self.fresh_oracle_run()?
            } else {
                std::mem::replace(self, Simulator::new(ORACLE, self.config)?)
            };
            let ids = sim.add_files(&workload.files);
            let needs = needs.get_or_insert_with(|| sim.needs_of(&events, &ids));
            let plan = sim.oracle_for(needs, ramp, reach, true);
            sim.replay(Box::new(events.iter().copied()), &ids, Some(plan.clone()))?;
            let clean = sim.report().faithful.wasted_pages <= sim.oracle_gap_pages();
            played.push((clean, (ramp, reach), sim, plan));
        }
        let needs = needs.unwrap_or_default();
        // Clean plans first, then the fastest (stable: the first plan wins a tie).
        played.sort_by(|a, b| {
            (b.0, a.2.report().faithful.modeled_ms)
                .partial_cmp(&(a.0, b.2.report().faithful.modeled_ms))
                .expect("modelled times are numbers")
        });
        // Where the reader computes, a request is best cut where a read that waited for it
        // ends: that read goes on with its pages while the rest arrive, and on a disk the
        // rest costs no seek. Which cuts pay (each is one more request) the plan's own replay
        // tells. The two fastest kinds of plan are cut (the finest is not always the one that
        // cuts best), and the fastest result kept. So is the plan of the largest requests
        // (`Full`) without the tail taper: the taper's cuts are a rule's guess, and the
        // replay's own cuts, which may do better, cannot undo them.
        let refine = fresh && self.config.compute_ns_per_page > 0;
        let mut best: Option<(Simulator, Oracle)> = None;
        let mut ramps_cut = Vec::new();
        let any_clean = played.first().is_some_and(|p| p.0);
        let fastest_reach = played.first().map(|p| p.1 .1);
        let mut keep_if_faster = |(sim, plan): (Simulator, Oracle)| {
            let ms = sim.report().faithful.modeled_ms;
            if best
                .as_ref()
                .is_none_or(|b| ms < b.0.report().faithful.modeled_ms)
            {
                best = Some((sim, plan));
            }
        };
        for (clean, (ramp, _), sim, plan) in played {
            if clean != any_clean {
                break;
            }
            let played = if refine && clean && ramps_cut.len() < 2 && !ramps_cut.contains(&ramp) {
                ramps_cut.push(ramp);
                self.cut_where_reads_waited(sim, plan, &events, &needs, &workload.files)?
            } else {
                (sim, plan)
            };
            keep_if_faster(played);
            if !refine {
                break;
            }
        }
        if let (true, true, Some(reach)) = (refine, any_clean, fastest_reach) {
            let plan = self.oracle_for(&needs, Ramp::Full, reach, false);
            let sim = self.play_plan(plan.clone(), &events, &workload.files)?;
            if sim.report().faithful.wasted_pages <= sim.oracle_gap_pages() {
                let cut =
                    self.cut_where_reads_waited(sim, plan, &events, &needs, &workload.files)?;
                keep_if_faster(cut);
            }
        }
        let (sim, plan) = best.expect("at least one plan");
        *self = if refine && any_clean {
            self.nudge(sim, plan, &events, needs.len(), &workload.files)?
        } else {
            sim
        };
        Ok(())
    }

    /// The oracle's fastest `plan`, played as `sim`, improved by local search: every plan one
    /// step away ([`Oracle::nudges`]: a request split, or merged with the next, or the
    /// boundary between two moved; every request cut into pieces of a size, or every two
    /// made one) is replayed, and the fastest that wastes no more is taken while it is faster
    /// (or, [`NUDGE_SIDEWAYS`] times, as fast: two cuts together may pay where either alone
    /// does not), as long as [`NUDGE_READS`] allows a whole round. The rules and cuts above
    /// guess where the reader's work and the device's interleave best; on a small workload
    /// the replays can try the plans around theirs where a guess is off by a little.
    fn nudge(
        &self,
        mut sim: Simulator,
        mut plan: Oracle,
        events: &[Event],
        reads: usize,
        files: &[crate::workload::FileSpec],
    ) -> Result<Simulator, String> {
        let mut replays_left = NUDGE_READS / reads.max(1);
        let mut sideways_left = NUDGE_SIDEWAYS;
        let mut seen = std::collections::HashSet::from([plan.signature()]);
        let ms = |s: &Simulator| s.report().faithful.modeled_ms;
        loop {
            let steps = plan.nudges();
            if steps.len() > replays_left {
                break;
            }
            replays_left -= steps.len();
            // The fastest step's replay, and the step (its plan made again when taken).
            let mut best: Option<(Simulator, Nudge)> = None;
            for step in steps {
                let nudged = plan.nudged(step);
                if !seen.insert(nudged.signature()) {
                    continue;
                }
                let again = self.play_plan(nudged, events, files)?;
                let m = again.report().faithful;
                if m.wasted_pages <= again.oracle_gap_pages()
                    && best.as_ref().is_none_or(|b| m.modeled_ms < ms(&b.0))
                {
                    best = Some((again, step));
                }
            }
            let Some((again, step)) = best else { break };
            if ms(&again) >= ms(&sim) {
                // No gain: a tie is taken while sideways steps are left, a loss never.
                if ms(&again) > ms(&sim) || sideways_left == 0 {
                    break;
                }
                sideways_left -= 1;
            }
            // Never slower than the step before: the current plan is the fastest seen.
            (sim, plan) = (again, plan.nudged(step));
        }
        Ok(sim)
    }

    /// The oracle's `plan`, played as `sim`, cut where its reads waited: all those cuts at once,
    /// else the longest wait's alone, kept while the replay is faster, a bounded number of
    /// rounds. The fastest replay.
    fn cut_where_reads_waited(
        &self,
        mut sim: Simulator,
        mut plan: Oracle,
        events: &[Event],
        needs: &[Need],
        files: &[crate::workload::FileSpec],
    ) -> Result<(Simulator, Oracle), String> {
        let taper = self.taper();
        for _ in 0..ORACLE_CUT_ROUNDS {
            let waits = std::mem::take(&mut sim.oracle_waits);
            let longest = waits.iter().max_by_key(|w| w.wait_ns);
            let waited = || waits.iter().map(|w| (w.file, w.waited_page));
            let longest_waited = || longest.map(|w| (w.file, w.waited_page)).into_iter();
            // Cuts where the reads that waited end; in the middles of the requests they waited
            // for; where the reader's work on a request's first piece covers the device's on
            // the rest (a piece of n pages takes per_request + n * page of the device's time).
            let half = |n: u64| n / 2;
            let balanced = |n: u64| {
                (taper.request_ns + n * taper.page_ns).div_ceil(taper.compute_ns + taper.page_ns)
            };
            // Each cut where it stands in the queue, and some also with the pieces put in
            // the order their pages are needed.
            let ends: BTreeSet<_> = waits.iter().map(|w| (w.file, w.read_end)).collect();
            let longest_end: BTreeSet<_> =
                longest.map(|w| (w.file, w.read_end)).into_iter().collect();
            let balanced_all = plan.cuts_within(waited(), balanced);
            let balanced_longest = plan.cuts_within(longest_waited(), balanced);
            let candidates = [
                (ends.clone(), false),
                (longest_end.clone(), false),
                (plan.cuts_within(waited(), half), false),
                (plan.cuts_within(longest_waited(), half), false),
                (balanced_all.clone(), false),
                (balanced_longest.clone(), false),
                (ends, true),
                (longest_end, true),
                (balanced_all, true),
                (balanced_longest, true),
            ];
            let mut best: Option<(Simulator, Oracle)> = None;
            for (cuts, by_need) in candidates {
                let mut cut = plan.clone();
                if !cut.cut_at(&cuts) {
                    continue;
                }
                if by_need {
                    cut.order_by_need(needs);
                }
                let again = self.play_plan(cut.clone(), events, files)?;
                let ms = again.report().faithful.modeled_ms;
                let to_beat = best.as_ref().map_or(&sim, |b| &b.0);
                if ms < to_beat.report().faithful.modeled_ms {
                    best = Some((again, cut));
                }
            }
            match best {
                Some((again, cut)) => (sim, plan) = (again, cut),
                None => break,
            }
        }
        Ok((sim, plan))
    }

    /// The reader's and the device's costs, for cutting the oracle's requests.
    fn taper(&self) -> Taper {
        Taper {
            compute_ns: self.config.compute_ns_per_page,
            request_ns: (self.config.device.per_request_us * 1000.0) as u64,
            page_ns: (self.config.device.page_us() * 1000.0).ceil() as u64,
        }
    }

    /// `plan` played over `events` on `files`, as a run of its own.
    fn play_plan(
        &self,
        plan: Oracle,
        events: &[Event],
        files: &[crate::workload::FileSpec],
    ) -> Result<Simulator, String> {
        let mut sim = self.fresh_oracle_run()?;
        let ids = sim.add_files(files);
        sim.replay(Box::new(events.iter().copied()), &ids, Some(plan))?;
        Ok(sim)
    }

    /// A new simulator for one of the oracle's plans, recording windows if this one does.
    fn fresh_oracle_run(&self) -> Result<Simulator, String> {
        let mut sim = Simulator::new(ORACLE, self.config)?;
        sim.windows = self.windows.as_ref().map(|_| Vec::new());
        Ok(sim)
    }

    /// The oracle's plan for `needs` (every read the workload makes, [`Self::needs_of`]),
    /// with the readahead budget the real policies share (half the cache), the
    /// device's largest I/O, and the gaps this device reads through more cheaply than it skips.
    /// A seek's cost in pages' transfer: the longest gap worth reading to continue a run.
    fn seek_pages(&self) -> u64 {
        (self.config.device.seek_us / self.config.device.page_us()) as u64
    }

    fn oracle_for(&self, needs: &[Need], ramp: Ramp, reach: u64, tapered: bool) -> Oracle {
        // It holds ahead the readahead budget the policies share (half the cache).
        let budget = policy::readahead_budget(self.cache.capacity() as u64, 1);
        Oracle::plan(
            needs,
            OracleSettings {
                cache_pages: self.cache.capacity() as u64,
                budget_pages: budget,
                reach_pages: reach,
                io_max_pages: self.config.policy.io_max_pages.max(1),
                gap_pages: self.config.device.gap_worth_reading(),
                seek_pages: self.seek_pages(),
                ramp,
                taper: (tapered && self.config.compute_ns_per_page > 0).then(|| self.taper()),
            },
        )
    }

    /// The reads `events` make on files `ids`, in order, as the oracle is told of them
    /// (clipped at EOF as [`Self::read`] clips them).
    fn needs_of(&self, events: &[Event], ids: &[u32]) -> Vec<Need> {
        let mut needs = Vec::new();
        let mut handles: Vec<Option<u32>> = Vec::new(); // handle -> file id
        for event in events {
            match *event {
                Event::Open { handle, file } => {
                    let h = handle as usize;
                    if handles.len() <= h {
                        handles.resize(h + 1, None);
                    }
                    handles[h] = ids.get(file as usize).copied();
                }
                Event::Close { handle } => {
                    if let Some(slot) = handles.get_mut(handle as usize) {
                        *slot = None;
                    }
                }
                Event::Read {
                    handle,
                    offset,
                    len,
                } => {
                    if let Some(&Some(id)) = handles.get(handle as usize) {
                        // Clipped as the run will clip it (`policy::bytes_within`), so the
                        // oracle's reads are the run's, one for one.
                        let file_bytes = self.files[id as usize].bytes;
                        let within = policy::bytes_within(offset.0, len.0, file_bytes);
                        if within > 0 {
                            let read = AppRead {
                                offset,
                                len: Bytes(within),
                            };
                            needs.push(Need {
                                file: id,
                                first: read.first_page(),
                                end: read.end_page(),
                            });
                        }
                    }
                }
                Event::Hint { .. } | Event::Compute { .. } => {}
            }
        }
        needs
    }
}
