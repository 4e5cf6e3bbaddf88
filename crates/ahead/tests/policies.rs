//! Policies in isolation, against a recording cache: a pattern, a policy, the windows it opens.

use std::collections::{BTreeSet, HashSet};

use ahead::policy::{by_name, AppRead, IoKind, IoRequest, Policy, PolicyConfig, RaContext};

/// A cache that records every I/O a policy starts.
struct Recorder {
    file_pages: u64,
    cached: HashSet<u64>,
    markers: BTreeSet<u64>,
    ios: Vec<(u64, u64, IoKind)>,
    /// Pages the policy asked for, cached or not.
    asked_pages: u64,
    /// What the driver gives the file's readahead (u64::MAX: no limit).
    readahead_budget: u64,
    /// What a page of fresh memory costs, as the driver measures it (0: none).
    first_touch_ns: u64,
}

impl Recorder {
    fn new(file_pages: u64) -> Recorder {
        Recorder {
            file_pages,
            cached: HashSet::new(),
            markers: BTreeSet::new(),
            ios: Vec::new(),
            asked_pages: 0,
            readahead_budget: u64::MAX,
            first_touch_ns: 0,
        }
    }
}

impl RaContext for Recorder {
    fn file_pages(&self) -> u64 {
        self.file_pages
    }
    fn is_cached(&self, page: u64) -> bool {
        self.cached.contains(&page)
    }
    fn has_marker(&self, page: u64) -> bool {
        self.markers.contains(&page)
    }
    fn clear_marker(&mut self, page: u64) {
        self.markers.remove(&page);
    }
    fn readahead_budget(&self) -> u64 {
        self.readahead_budget
    }
    fn first_touch_ns(&self) -> u64 {
        self.first_touch_ns
    }
    fn start_io(&mut self, io: IoRequest) -> u64 {
        self.asked_pages += io.pages;
        let end = (io.start_page + io.pages).min(self.file_pages);
        let mut new = 0;
        let mut run: Option<u64> = None;
        for p in io.start_page..end {
            if self.cached.insert(p) {
                new += 1;
                if io.marker_page == Some(p) {
                    self.markers.insert(p);
                }
                run.get_or_insert(p);
            } else if let Some(s) = run.take() {
                self.ios.push((s, p - s, io.kind));
            }
        }
        if let Some(s) = run {
            self.ios.push((s, end - s, io.kind));
        }
        new
    }
}

/// Run reads of `pages` pages at each start through `policy`; return the I/Os as (start, pages).
/// Page-cache folios are single pages here (a kernel or filesystem without large folios).
fn windows(
    policy: &str,
    file_pages: u64,
    reads: impl IntoIterator<Item = (u64, u64)>,
) -> Vec<(u64, u64)> {
    let config = PolicyConfig::default().with_folio_max_order(0);
    windows_with(policy, config, file_pages, reads)
}

fn windows_with(
    policy: &str,
    config: PolicyConfig,
    file_pages: u64,
    reads: impl IntoIterator<Item = (u64, u64)>,
) -> Vec<(u64, u64)> {
    let mut ctx = Recorder::new(file_pages);
    let mut p = by_name(policy, config).unwrap();
    for (start, pages) in reads {
        read(p.as_mut(), &mut ctx, start, pages);
    }
    ctx.ios.iter().map(|&(s, n, _)| (s, n)).collect()
}

/// The application reads `pages` at `start` through `p`; the driver reads whatever is still
/// absent.
fn read(p: &mut dyn Policy, ctx: &mut Recorder, start: u64, pages: u64) {
    p.on_read(AppRead::pages(start, pages), ctx);
    for q in start..start + pages {
        if !ctx.is_cached(q) {
            ctx.start_io(IoRequest::sync(q, 1));
        }
    }
}

/// `adaptive` on an object store (120 ms to a first byte, 500 MB/s) with a 256 MiB readahead
/// budget, over a file of `file_pages`.
fn adaptive_on_a_store(file_pages: u64) -> (Box<dyn Policy>, Recorder) {
    let mut ctx = Recorder::new(file_pages);
    ctx.readahead_budget = (256 << 20) / 4096;
    let mut p = by_name("adaptive", PolicyConfig::new(16384, 2048)).unwrap();
    p.on_device(ahead::policy::DeviceEstimate {
        latency_ns: 120_000_000,
        bytes_per_sec: 500_000_000,
        request_overhead_ns: 2_000_000,
    });
    (p, ctx)
}

#[test]
fn ondemand_sequential_4k_ramps_4_8_16_32() {
    // shared/research/linux_readahead.md 1.9: [0,4) sync; [4,12); [12,28); [28,60); then 32s.
    let w = windows("linux-ondemand", 1000, (0..100).map(|p| (p, 1)));
    assert_eq!(&w[..5], &[(0, 4), (4, 8), (12, 16), (28, 32), (60, 32)]);
}

#[test]
fn ondemand_with_large_folios_trims_windows_to_folio_alignment() {
    // Linux 6.16+: each async window asks for folios two orders up and its end is rounded down
    // to that folio size: 4, 8, 4, 8, 8, 16, 16, 32, 32 (linux_readahead.md 1.9).
    let w = windows_with(
        "linux-ondemand",
        PolicyConfig::default(),
        1000,
        (0..130).map(|p| (p, 1)),
    );
    let sizes: Vec<u64> = w.iter().take(9).map(|&(_, n)| n).collect();
    assert_eq!(sizes, [4, 8, 4, 8, 8, 16, 16, 32, 32], "{w:?}");
    assert_eq!(w[8], (96, 32));
}

#[test]
fn ondemand_sequential_16k_ramps_8_16_32() {
    let w = windows("linux-ondemand", 1000, (0..25).map(|i| (4 * i, 4)));
    assert_eq!(&w[..4], &[(0, 8), (8, 16), (24, 32), (56, 32)]);
}

#[test]
fn ondemand_128k_reads_pipeline_at_once() {
    // A 32-page read gets [0,32) with the marker at 16, hit by the same read: [32,64) at once.
    let w = windows("linux-ondemand", 1000, [(0, 32)]);
    assert_eq!(w, [(0, 32), (32, 32)]);
}

#[test]
fn ondemand_lone_random_reads_get_exactly_what_they_ask() {
    let w = windows(
        "linux-ondemand",
        100_000,
        [(5000, 4), (300, 4), (70_000, 4)],
    );
    assert_eq!(w, [(5000, 4), (300, 4), (70_000, 4)]);
}

#[test]
fn ondemand_backward_reads_get_no_readahead() {
    let w = windows(
        "linux-ondemand",
        1000,
        (0..10).rev().map(|i| (100 + 16 * i, 16)),
    );
    assert!(w.iter().all(|&(_, n)| n == 16), "{w:?}");
}

#[test]
fn ondemand_two_interleaved_streams_both_ramp_to_full_windows() {
    let reads = (0..200).flat_map(|i| [(i, 1), (10_000 + i, 1)]);
    let w = windows("linux-ondemand", 20_000, reads);
    let second: Vec<_> = w.iter().filter(|(s, _)| *s >= 10_000).collect();
    assert!(
        second.iter().filter(|(_, n)| *n == 32).count() >= 3,
        "{second:?}"
    );
}

#[test]
fn pratt_sequential_4k_windows_8_16_32() {
    // shared/research/linux_readahead.md 2.5: [0,8) then [8,24), [24,56), then 32 each.
    let w = windows("pratt", 1000, (0..100).map(|p| (p, 1)));
    assert_eq!(&w[..4], &[(0, 8), (8, 16), (24, 32), (56, 32)]);
}

#[test]
fn pratt_random_reads_read_only_the_request() {
    let w = windows("pratt", 100_000, [(5000, 4), (300, 4), (70_000, 4)]);
    assert_eq!(w, [(5000, 4), (300, 4), (70_000, 4)]);
}

#[test]
fn linux_2_6_0_first_read_off_page_0_shuts_readahead_down() {
    // The paper's "first miss" flaw: 16-page reads after a seek are read one page at a time.
    let w = windows("linux-2.6.0", 100_000, [(117, 16), (250, 16)]);
    assert_eq!(w.len(), 32);
    assert!(w.iter().all(|&(_, n)| n == 1));
}

#[test]
fn linux_2_6_7_random_16_page_reads_get_16_page_requests() {
    // The paper's running example after the fixes: 100 random 16-page reads, ~100 requests of 16.
    let reads: Vec<(u64, u64)> = (0..100).map(|i| (i * 133 + 117, 16)).collect();
    let w = windows("linux-2.6.7", 100_000, reads);
    assert_eq!(w.len(), 100);
    assert!(w.iter().all(|&(_, n)| n == 16), "{w:?}");
}

#[test]
fn none_reads_exactly_the_request() {
    assert_eq!(windows("none", 100, [(3, 5), (50, 1)]), [(3, 5), (50, 1)]);
}

#[test]
fn fixed_reads_the_request_then_n_pages_ahead() {
    assert_eq!(windows("fixed", 1000, [(0, 4)]), [(0, 4), (4, 32)]);
}

/// 1,000 one-page reads in order with a distance of 8,192 pages: `fixed` asks for each page
/// ahead once (the distance, then a page a read), not the whole distance again every read
/// (8.2 million pages for the driver to walk), until half the distance is passed, when it asks
/// for all of it again. The I/O is the same: the request, the distance, then a page a read. A
/// jump starts a new range, and a don't-need asks again.
#[test]
fn fixed_asks_for_each_page_ahead_once() {
    let config = PolicyConfig::default().with_fixed_pages(8192);
    let mut ctx = Recorder::new(1 << 20);
    let mut p = by_name("fixed", config).unwrap();
    for page in 0..1000 {
        p.on_read(AppRead::pages(page, 1), &mut ctx);
    }
    // 1,000 synchronous pages, 8,192 ahead, then 999 more ahead.
    assert_eq!(ctx.asked_pages, 1000 + 8192 + 999);
    assert_eq!(
        &ctx.ios[..3],
        &[
            (0, 1, IoKind::Sync),
            (1, 8192, IoKind::Ahead),
            (8193, 1, IoKind::Ahead)
        ]
    );
    // Past half the distance, the whole distance again (what could not be brought in is
    // asked for again).
    for page in 1000..4096 {
        p.on_read(AppRead::pages(page, 1), &mut ctx);
    }
    let before = ctx.asked_pages;
    p.on_read(AppRead::pages(4096, 1), &mut ctx);
    assert_eq!(ctx.asked_pages - before, 1 + 8192);
    // A jump elsewhere: the whole distance after it.
    let before = ctx.asked_pages;
    p.on_read(AppRead::pages(500_000, 1), &mut ctx);
    assert_eq!(ctx.asked_pages - before, 1 + 8192);
    // Advice that may have dropped pages: the distance is asked for again, whole.
    p.on_hint(
        ahead::policy::Hint::DontNeed {
            start_page: 500_001,
            pages: 10,
        },
        &mut ctx,
    );
    let before = ctx.asked_pages;
    p.on_read(AppRead::pages(500_001, 1), &mut ctx);
    assert_eq!(ctx.asked_pages - before, 1 + 8192);
}

#[test]
fn the_readahead_budget_is_shared_by_size_not_by_count() {
    use ahead::policy::BudgetShares;
    let cache = 16384; // 64 MiB: half of it, 8192 pages, for readahead
    let mut shares = BudgetShares::default();
    shares.open(12288); // the 48 MiB file a script reads
    assert_eq!(shares.budget(cache), 8192);
    // The script and a library it opened take what they are, not a third each.
    shares.open(1);
    shares.open(3);
    assert_eq!(shares.budget(cache), 8188);
    // Two large files share what the small ones leave, equally.
    shares.open(50_000);
    assert_eq!(shares.budget(cache), 4094);
    shares.close(50_000);
    shares.close(12288);
    // All open files fit in the half together: each may have all of it.
    assert_eq!(shares.budget(cache), 8192);
    shares.close(1);
    shares.close(3);
    assert_eq!(shares.handles(), 0);
    assert_eq!(shares.budget(cache), 8192);
}

/// The least, over the reads of runs 4 to 8 of `run` pages each followed by a skip of `skip`
/// pages (a reader in order: no skip), of the pages `adaptive` holds read ahead of the reader
/// in the pages it will read, on an object store (120 ms to a first byte, 500 MB/s), with a
/// 256 MiB readahead budget and 64-page reads.
fn least_ahead_in_runs(run: u64, skip: u64) -> u64 {
    let period = run + skip;
    let file_pages = 16 * period;
    let (mut p, mut ctx) = adaptive_on_a_store(file_pages);
    let in_a_run = |q: u64| q % period < run;
    let mut least = u64::MAX;
    for k in 0..9 {
        for page in (k * period..k * period + run).step_by(64) {
            read(p.as_mut(), &mut ctx, page, 64);
            if k >= 4 {
                let ahead = ctx
                    .cached
                    .iter()
                    .filter(|&&q| q >= page + 64 && in_a_run(q))
                    .count() as u64;
                least = least.min(ahead);
            }
        }
    }
    least
}

#[test]
fn adaptive_keeps_as_much_of_a_skipping_readers_runs_ahead_as_of_a_reader_in_order() {
    // 48 MiB runs and 16 MiB skips, as a program's 48 MiB runs and 17 MiB skips reach the
    // engine through a mount (the kernel's readahead reads on past each run's end).
    let skipping = least_ahead_in_runs(12288, 4096);
    let in_order = least_ahead_in_runs(12288, 0);
    assert!(
        skipping * 10 >= in_order * 9,
        "{skipping} pages of runs ahead of a reader that skips, {in_order} of one in order"
    );
}

/// Nothing cached of the skips of runs 2 to 11 of a reader of `period`-page periods whose
/// runs, with the kernel's read past their end, are `read` pages (the first run's windows
/// read on into its skip, before any skip was seen; the second showed the period once).
fn assert_no_skip_read_after_the_second_run(ctx: &Recorder, period: u64, read: u64) {
    let in_skips = ctx
        .cached
        .iter()
        .filter(|&&q| (2..12).contains(&(q / period)) && q % period >= read)
        .count();
    assert_eq!(
        in_skips, 0,
        "{in_skips} pages of the skips read after the second run"
    );
}

#[test]
fn adaptive_keeps_a_period_when_a_mounts_reads_come_out_of_order() {
    // 48 MiB runs and 17 MiB skips read 1 MiB at a time through a mount, the kernel's
    // readahead reading 1 MiB past each run's end, its reads answered by several threads, so
    // that some reach the policy out of order (as logged through `ahead mount`): two reads of
    // a run swapped (runs 3, 6 and 9), and a run's last read arriving after the next run's
    // first (runs 4, 7 and 10). Neither is a skip nor a jump and back: after the second run
    // nothing of a skip is read but those last reads.
    let (run, skip, read_pages) = (12288u64, 4352u64, 256u64);
    let period = run + skip;
    let (mut p, mut ctx) = adaptive_on_a_store(16 * period);
    let mut reads: Vec<u64> = Vec::new();
    for k in 0..12u64 {
        let mut pages: Vec<u64> = (k * period..k * period + run + read_pages)
            .step_by(read_pages as usize)
            .collect();
        if [3, 6, 9].contains(&k) {
            pages.swap(20, 21);
        }
        reads.extend(pages);
        if [4, 7, 10].contains(&k) {
            // The next run's first read comes before this run's last.
            let n = reads.len();
            reads.insert(n - 1, (k + 1) * period);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for page in reads {
        if seen.insert(page) {
            read(p.as_mut(), &mut ctx, page, read_pages);
        }
    }
    assert_no_skip_read_after_the_second_run(&ctx, period, run + read_pages);
}

#[test]
fn adaptive_keeps_a_period_whose_runs_a_kernels_readahead_reads_a_little_past() {
    // 48 MiB runs and 17 MiB skips read 1 MiB at a time, as through a mount: the kernel's
    // readahead reads 1 MiB on past the end of each run, but one (its read came after the
    // reader's skip). The period stands: what is read of the skips is those reads, and the
    // runs after the third are read ahead (a read past a run's end the period has not yet
    // grown to waits, a few at most).
    let (run, skip, read_pages) = (12288u64, 4352u64, 256u64);
    let period = run + skip;
    let (mut p, mut ctx) = adaptive_on_a_store(16 * period);
    let mut waited_after_third = 0;
    for k in 0..12u64 {
        let end = k * period + run + if k == 5 { 0 } else { read_pages };
        for page in (k * period..end).step_by(read_pages as usize) {
            let waits = !ctx.is_cached(page);
            read(p.as_mut(), &mut ctx, page, read_pages);
            if k >= 3 && waits {
                waited_after_third += 1;
            }
        }
    }
    assert_no_skip_read_after_the_second_run(&ctx, period, run + read_pages);
    assert!(
        waited_after_third <= 4,
        "{waited_after_third} reads waited after the third run"
    );
}

/// `adaptive` on the simulator's NVMe model (a page is 1.7 us of its time at full bandwidth)
/// over a 2 GiB file that fits its readahead budget, the cache's fresh memory costing
/// `first_touch_ns` a page: random 16 KiB reads at seeded places until speculation's read of
/// the file in order starts (a read bringing in over 512 pages past itself; a stream's window
/// from two reads that happen to touch brings in less). The read that started it.
fn sweep_starts(first_touch_ns: u64) -> u64 {
    let file_pages = (2u64 << 30) / 4096;
    let mut ctx = Recorder::new(file_pages);
    ctx.first_touch_ns = first_touch_ns;
    let mut p = by_name("adaptive", PolicyConfig::new(2048, 1024)).unwrap();
    p.on_device(ahead::DeviceModel::NVME.estimate(1024));
    let mut rng = ahead::pattern::SplitMix64(4711);
    (1..=100_000)
        .find(|_| {
            let start = rng.below(file_pages / 4) * 4;
            let asked = ctx.asked_pages;
            read(p.as_mut(), &mut ctx, start, 4);
            ctx.asked_pages - asked > 4 + 512
        })
        .expect("a sweep within 100,000 reads")
}

/// Speculation pays for the memory its pages take: where the cache grows into fresh memory
/// whose first touch costs three times the device's time for a page, the random reader's
/// evidence must be four times as much before the file is read in order.
#[test]
fn speculation_into_fresh_memory_waits_for_what_the_memory_costs() {
    let (warm, fresh) = (sweep_starts(0), sweep_starts(5_100));
    assert!(
        fresh >= 3 * warm,
        "the sweep at read {warm} in memory already used, at read {fresh} in fresh memory"
    );
}
