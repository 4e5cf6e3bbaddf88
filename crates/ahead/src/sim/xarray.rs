//! The kernel's page-cache gap search (`page_cache_next_miss` / `page_cache_prev_miss` in
//! mm/filemap.c) walked the way the XArray walks it, so that its answers match Linux's to the
//! page when large folios are cached.
//!
//! The page cache is an XArray: nodes of 64 slots, a node at level `shift` covering 64 << shift
//! pages. A folio of order `o` is one entry at the level `6 * (o / 6)`, in its first slot, with
//! "sibling" entries in the slots after it. The searches step with `xas_next` / `xas_prev`,
//! which inside a bottom-level node just move the slot offset and the index together. But the
//! first lookup of a search that starts inside a multi-slot folio lands the offset on the folio's
//! first slot while the index stays where it was: from then on the reported index runs ahead
//! (next) or behind (prev) the slot really examined, until the walk leaves the node and
//! re-derives its offset from the index. Measured on 6.18: a search for the next gap from page 5,
//! inside a folio at pages 4-7, with the gap at page 20, answers 21. A plain page-by-page scan
//! (what the kernel's comment promises) would answer 20; interleaved streams on one file take
//! their context readahead sizes from these answers.

/// What the walk needs to know of one file's cached pages.
pub(crate) trait FolioMap {
    /// The cached folio holding `page`: `(first page, order)`.
    fn folio(&self, page: u64) -> Option<(u64, u8)>;
    /// Whether any page of `[start, start + len)` is cached.
    fn any_cached(&self, start: u64, len: u64) -> bool;
    /// One past the highest page index the file's XArray has ever held (sets its height).
    fn index_limit(&self) -> u64;
}

const CHUNK: u64 = 64;

/// What a slot holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Empty,
    /// A folio's first slot (or a sibling slot: the folio's first slot is `canonical`).
    Entry {
        canonical: u64,
    },
    Node,
}

/// A walk position: the node (level `shift`, first page `base`), the slot `offset` in it and
/// the index the walk believes it is at.
struct Walk {
    shift: u32,
    base: u64,
    offset: i64,
    index: u64,
    root_shift: u32,
    /// Off the ends of the tree (the kernel's XAS_BOUNDS).
    bounds: bool,
}

fn root_shift(map: &dyn FolioMap) -> u32 {
    let mut shift = 0;
    while map.index_limit() > (CHUNK << shift) && shift < 60 {
        shift += 6;
    }
    shift
}

/// The slot of a node at level `shift` whose pages start at `slot_base`.
fn slot(map: &dyn FolioMap, shift: u32, slot_base: u64) -> Slot {
    if let Some((start, order)) = map.folio(slot_base) {
        let level = 6 * (u32::from(order) / 6);
        if level == shift {
            return Slot::Entry {
                canonical: ((start >> shift) & (CHUNK - 1)),
            };
        }
        if level > shift {
            // Stored higher up: a walk never gets this deep under it.
            return Slot::Entry {
                canonical: ((slot_base >> shift) & (CHUNK - 1)),
            };
        }
    }
    if shift > 0 && map.any_cached(slot_base, 1u64 << shift) {
        Slot::Node
    } else if shift == 0 && map.folio(slot_base).is_some() {
        Slot::Entry {
            canonical: slot_base & (CHUNK - 1),
        }
    } else {
        Slot::Empty
    }
}

impl Walk {
    fn slot_base(&self) -> u64 {
        self.base + ((self.offset as u64) << self.shift)
    }

    fn get_offset(&self) -> i64 {
        ((self.index >> self.shift) & (CHUNK - 1)) as i64
    }

    /// `xas_load` from the root: returns whether the entry at `index` is present.
    fn load(map: &dyn FolioMap, index: u64) -> (Walk, bool) {
        let rs = root_shift(map);
        let mut w = Walk {
            shift: rs,
            base: 0,
            offset: 0,
            index,
            root_shift: rs,
            bounds: false,
        };
        if index >> rs >= CHUNK {
            w.bounds = true;
            return (w, false);
        }
        loop {
            w.offset = w.get_offset();
            match slot(map, w.shift, w.slot_base()) {
                Slot::Node if w.shift > 0 => {
                    w.base = w.slot_base();
                    w.shift -= 6;
                }
                Slot::Entry { canonical } => {
                    w.offset = canonical as i64;
                    return (w, true);
                }
                _ => return (w, false),
            }
        }
    }

    /// Go up from the current node to its parent, at the slot `step` away from it (the
    /// kernel's `xa_offset = node->offset +/- 1; node = parent`). False at the root.
    fn climb(&mut self, step: i64) -> bool {
        if self.shift >= self.root_shift {
            return false;
        }
        let parent_shift = self.shift + 6;
        let parent_span = CHUNK << parent_shift;
        let parent_base = self.base / parent_span * parent_span;
        self.offset = ((self.base - parent_base) >> parent_shift) as i64 + step;
        self.base = parent_base;
        self.shift = parent_shift;
        true
    }

    /// Descend through nodes at the current offset; returns whether the entry is present.
    fn descend(&mut self, map: &dyn FolioMap) -> bool {
        loop {
            match slot(map, self.shift, self.slot_base()) {
                Slot::Node if self.shift > 0 => {
                    self.base = self.slot_base();
                    self.shift -= 6;
                    self.offset = self.get_offset();
                }
                Slot::Entry { .. } => return true,
                _ => return false,
            }
        }
    }

    /// `xas_next`: returns whether the next entry is present.
    fn next(&mut self, map: &dyn FolioMap) -> bool {
        if self.bounds {
            self.index = self.index.wrapping_add(1);
            return false;
        }
        if self.shift == 0 && self.offset != CHUNK as i64 - 1 {
            self.index = self.index.wrapping_add(1);
            self.offset += 1;
            return !matches!(slot(map, 0, self.slot_base()), Slot::Empty);
        }
        self.index = self.index.wrapping_add(1);
        if self.offset != self.get_offset() {
            self.offset += 1;
        }
        while self.offset == CHUNK as i64 {
            if !self.climb(1) {
                self.bounds = true;
                return false;
            }
        }
        self.descend(map)
    }

    /// `xas_prev`: returns whether the previous entry is present.
    fn prev(&mut self, map: &dyn FolioMap) -> bool {
        if self.bounds {
            self.index = self.index.wrapping_sub(1);
            return false;
        }
        if self.shift == 0 && self.offset != 0 {
            self.index = self.index.wrapping_sub(1);
            self.offset -= 1;
            return !matches!(slot(map, 0, self.slot_base()), Slot::Empty);
        }
        self.index = self.index.wrapping_sub(1);
        if self.offset != self.get_offset() {
            self.offset -= 1;
        }
        while self.offset < 0 {
            if !self.climb(-1) {
                self.bounds = true;
                return false;
            }
        }
        self.descend(map)
    }
}

/// Walk from `index` over at most `max_scan` entries, forward or backward, stopping at the first
/// gap. Returns the index the walk reports there, or `None` if every entry scanned was present
/// (with the walk, if it started).
fn scan(
    map: &dyn FolioMap,
    index: u64,
    max_scan: u64,
    forward: bool,
    stop_at: u64,
) -> Result<u64, Option<Walk>> {
    let mut w: Option<Walk> = None;
    for _ in 0..max_scan {
        let present = match w.as_mut() {
            None => {
                let (walk, present) = Walk::load(map, index);
                w = Some(walk);
                present
            }
            Some(walk) if forward => walk.next(map),
            Some(walk) => walk.prev(map),
        };
        let at = w.as_ref().map_or(index, |w| w.index);
        if !present || at == stop_at {
            return Ok(at);
        }
    }
    Err(w)
}

/// `page_cache_next_miss(index, max_scan)`: the index of the first gap the walk reports in
/// `[index, index + max_scan)`, else `index + max_scan`; 0 on wrap-around (or from a cached 0).
pub(crate) fn next_miss(map: &dyn FolioMap, index: u64, max_scan: u64) -> u64 {
    scan(map, index, max_scan, true, 0).unwrap_or(index + max_scan)
}

/// `page_cache_prev_miss(index, max_scan)`: scanning down from `index`, the index of the first
/// gap the walk reports; the last index scanned if none; `u64::MAX` past page 0.
pub(crate) fn prev_miss(map: &dyn FolioMap, index: u64, max_scan: u64) -> u64 {
    scan(map, index, max_scan, false, u64::MAX).unwrap_or_else(|w| w.map_or(index, |w| w.index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Folios by first page.
    struct Map(BTreeMap<u64, u8>, u64);

    impl FolioMap for Map {
        fn folio(&self, page: u64) -> Option<(u64, u8)> {
            let (&s, &o) = self.0.range(..=page).next_back()?;
            (page < s + (1 << o)).then_some((s, o))
        }
        fn any_cached(&self, start: u64, len: u64) -> bool {
            (start..start + len).any(|p| self.folio(p).is_some())
        }
        fn index_limit(&self) -> u64 {
            self.1
        }
    }

    fn map(folios: &[(u64, u8)], limit: u64) -> Map {
        Map(folios.iter().copied().collect(), limit)
    }

    #[test]
    fn single_pages_give_the_plain_answer() {
        let m = map(&[(0, 0), (1, 0), (2, 0), (3, 0), (5, 0)], 9000);
        assert_eq!(next_miss(&m, 1, 100), 4);
        assert_eq!(
            next_miss(&m, 0, 100),
            0,
            "the kernel answers 0 for a search from a cached page 0"
        );
        assert_eq!(next_miss(&m, 5, 100), 6);
        assert_eq!(next_miss(&m, 6, 100), 6);
        assert_eq!(next_miss(&m, 1, 2), 3, "no gap in range: index + max_scan");
        assert_eq!(prev_miss(&m, 3, 100), u64::MAX, "cached back to page 0");
        assert_eq!(prev_miss(&m, 5, 100), 4);
        assert_eq!(
            prev_miss(&m, 3, 2),
            2,
            "no gap in range: the last page scanned"
        );
    }

    #[test]
    fn a_search_starting_inside_a_large_folio_runs_off_by_its_distance_into_it() {
        // Pages 0-3 single, then order-2 folios 4-7 ... 16-19, gap at 20 (as on 6.18).
        let m = map(
            &[
                (0, 0),
                (1, 0),
                (2, 0),
                (3, 0),
                (4, 2),
                (8, 2),
                (12, 2),
                (16, 2),
            ],
            9000,
        );
        assert_eq!(
            next_miss(&m, 4, 2048),
            20,
            "from the folio's first page: exact"
        );
        assert_eq!(next_miss(&m, 5, 2048), 21, "one page in: one ahead");
        assert_eq!(
            prev_miss(&m, 19, 2048),
            2,
            "three pages in: three behind, then off the left edge"
        );
    }
}
