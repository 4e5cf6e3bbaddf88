//! Units: the classic readahead bug is mixing pages and bytes, so bytes get a type of their own.
//!
//! Page indices and page counts are plain `u64` named `*_page` / `pages`; byte offsets and lengths
//! are [`Bytes`], and the only way from one to the other is through the methods here. A range of
//! pages that travels between functions is a [`PageRange`], `[first, end)`, never a bare pair
//! whose second number might be an end or a length.
//!
//! Where the two sides meet: the policies, the simulator and the workloads speak pages and
//! [`Bytes`]; the engine's public surface speaks bytes as `u64`, as `std`'s `FileExt` and every
//! I/O API an embedder knows do (`read_at(buf, offset)`, `Advice::WillNeed { offset, len }`,
//! sizes named `*_bytes`), and turns them into pages in one place each (`Bytes::page_span`
//! for a range, [`kib_to_pages`] for a sysfs limit), so a policy's [`crate::policy::Hint`]
//! counts pages where the application's `Advice` counted bytes.

use std::fmt;

/// Size of one page, in bytes. The simulator and the policies work in 4 KiB pages, as the kernel
/// does on x86-64.
pub const PAGE_SIZE: u64 = 4096;

/// The largest file the simulator models, and so the furthest byte a pattern or a trace may
/// name (offset + length): 1 TiB. The simulator's page tables are dense, a word per page up to
/// the furthest page read, so a read at the end of a file this large costs a 1 GiB table;
/// past it, a typo (`size=1000000g`) would exhaust memory rather than run. Checked where
/// patterns and traces are parsed.
pub const MAX_MODELLED_BYTES: u64 = 1 << 40;

/// The most one `read(2)` transfers on Linux (`MAX_RW_COUNT`): a trace's read of more cannot
/// have happened.
pub const MAX_READ_BYTES: u64 = 0x7fff_f000;

/// The most reads a pattern may make: 2^28 (1 TiB in 4 KiB reads). More would simulate for
/// hours; a pattern that needs more reads can take larger ones.
pub const MAX_PATTERN_READS: u64 = 1 << 28;

/// A byte offset or a byte length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

/// Whole pages in `kib` KiB (rounded down): how sysfs's `read_ahead_kb` and `max_sectors_kb`,
/// and the `-kb` options, become page counts.
pub fn kib_to_pages(kib: u64) -> u64 {
    kib.saturating_mul(1024) / PAGE_SIZE
}

/// Pages `[first, end)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PageRange {
    /// First page of the range.
    pub first: u64,
    /// One past its last page.
    pub end: u64,
}

impl PageRange {
    /// Pages `[first, end)`.
    pub const fn new(first: u64, end: u64) -> PageRange {
        PageRange { first, end }
    }

    /// `pages` pages from `first` (the end saturates).
    pub const fn of_len(first: u64, pages: u64) -> PageRange {
        PageRange {
            first,
            end: first.saturating_add(pages),
        }
    }

    /// How many pages it holds.
    pub const fn len(self) -> u64 {
        self.end.saturating_sub(self.first)
    }

    /// Whether it holds no page.
    pub const fn is_empty(self) -> bool {
        self.end <= self.first
    }

    /// Whether it holds `page`.
    pub const fn contains(self, page: u64) -> bool {
        self.first <= page && page < self.end
    }
}

impl Bytes {
    /// The page that holds this byte offset.
    pub fn page(self) -> u64 {
        self.0 / PAGE_SIZE
    }

    /// Pages needed to hold this many bytes (rounded up).
    pub fn pages_ceil(self) -> u64 {
        self.0.div_ceil(PAGE_SIZE)
    }

    /// The byte offset where page `page` starts.
    pub fn of_page(page: u64) -> Bytes {
        Bytes(page.saturating_mul(PAGE_SIZE))
    }

    /// Byte length of `pages` whole pages.
    pub fn of_pages(pages: u64) -> Bytes {
        Bytes(pages.saturating_mul(PAGE_SIZE))
    }

    /// The pages that a byte range `[offset, offset+len)` touches.
    pub fn page_span(offset: Bytes, len: Bytes) -> PageRange {
        if len.0 == 0 {
            return PageRange::new(offset.page(), offset.page());
        }
        PageRange::new(
            offset.page(),
            Bytes(offset.0.saturating_add(len.0)).pages_ceil(),
        )
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B", self.0)
    }
}

/// Parse a size such as `4k`, `128KiB`, `1m`, `2G` or `4096` (bytes).
///
/// # Errors
/// Text that is not a number with an optional unit, naming it.
pub fn parse_size(text: &str) -> Result<Bytes, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(format!(
            "'{text}' is not a size: expected a number such as 4k, 128KiB or 1m"
        ));
    }
    let number: u64 = t[..digits_end]
        .parse()
        .map_err(|_| format!("'{text}' is too large a size"))?;
    let unit = t[digits_end..].trim().to_ascii_lowercase();
    let mult: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "p" | "page" | "pages" => PAGE_SIZE,
        other => {
            return Err(format!(
                "'{text}': unknown size unit '{other}' (use k, m, g or p for pages)"
            ))
        }
    };
    number
        .checked_mul(mult)
        .map(Bytes)
        .ok_or_else(|| format!("'{text}' is too large a size"))
}

/// `a / b`, or 0 when `b` is 0 (a run that made no requests has no average request size).
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_span_rounds_out() {
        assert_eq!(
            Bytes::page_span(Bytes(0), Bytes(4096)),
            PageRange::new(0, 1)
        );
        assert_eq!(
            Bytes::page_span(Bytes(4095), Bytes(2)),
            PageRange::new(0, 2)
        );
        assert_eq!(
            Bytes::page_span(Bytes(8192), Bytes(0)),
            PageRange::new(2, 2)
        );
        assert_eq!(PageRange::of_len(3, 4), PageRange::new(3, 7));
        assert_eq!(PageRange::new(3, 7).len(), 4);
        assert!(PageRange::new(3, 7).contains(6) && !PageRange::new(3, 7).contains(7));
        assert!(PageRange::new(5, 5).is_empty());
        assert_eq!(PageRange::new(7, 5).len(), 0);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4k"), Ok(Bytes(4096)));
        assert_eq!(parse_size("128KiB"), Ok(Bytes(131072)));
        assert_eq!(parse_size("2p"), Ok(Bytes(8192)));
        assert!(parse_size("x").is_err());
        assert!(parse_size("4q").is_err());
    }
}
