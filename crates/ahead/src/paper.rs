//! The 2004 paper's Figures 4-10, reproduced.
//!
//! Pai, Pulavarty and Cao ran seven read-R-pages-seek-S-pages patterns through a simulator of
//! Linux 2.6.0 and 2.6.7 readahead and tabled average request size, pages read, wasted pages and
//! request count (shared/seeds/002_cb27686ff0bbb5ba.txt; the numbers are in
//! shared/anchors/paper_figures.json and below). Their simulator counted every page of every
//! window as read, cached or not, and wasted as read minus requested; [`crate::sim`] keeps that
//! "paper accounting" beside the faithful one.
//!
//! Two facts about how the paper's runs began are needed to come out exact (see
//! shared/research/paper_calibration.md): for 2.6.0, the first read starts at page 0 in
//! Figures 4, 7 and 9 and after the first seek in the others ([`Figure::first_page_2_6_0`]);
//! for 2.6.7, Figures 4, 7 and 9 begin with one extra one-page read of page 0. Every other
//! policy runs the plain pattern, from page 0.

use crate::pattern::Pattern;
use crate::policy::Hint;
use crate::sim::{self, Accounting, RunReport, SimConfig};
use crate::workload::{Event, Workload};

/// A figure's published column for one kernel.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Published {
    /// Average request size in pages, as printed.
    pub avg_request_pages: f64,
    /// Pages read.
    pub pages_read: u64,
    /// Pages wasted.
    pub wasted_pages: u64,
    /// Read requests.
    pub requests: u64,
}

/// One of the paper's figures.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Figure {
    /// Figure number (4-10).
    pub figure: u32,
    /// Pages per read.
    pub read_pages: u64,
    /// Pages skipped between reads.
    pub seek_pages: u64,
    /// Number of reads.
    pub repeat: u64,
    /// Pages requested in all.
    pub requested: u64,
    /// The paper's Linux 2.6.0 column.
    pub linux_2_6_0: Published,
    /// The paper's Linux 2.6.7 column.
    pub linux_2_6_7: Published,
    /// Where the first read starts for the 2.6.0 column to come out.
    pub first_page_2_6_0: u64,
}

const fn published(
    avg_request_pages: f64,
    pages_read: u64,
    wasted_pages: u64,
    requests: u64,
) -> Published {
    Published {
        avg_request_pages,
        pages_read,
        wasted_pages,
        requests,
    }
}

/// Figures 4-10 as printed (Figure 8's 2.6.0 "50810" is the paper's; see the anchors' note).
pub const FIGURES: [Figure; 7] = [
    Figure {
        figure: 4,
        read_pages: 30,
        seek_pages: 2,
        repeat: 984,
        requested: 29520,
        linux_2_6_0: published(31.0, 61010, 31490, 1970),
        linux_2_6_7: published(30.0, 29535, 15, 987),
        first_page_2_6_0: 0,
    },
    Figure {
        figure: 5,
        read_pages: 16,
        seek_pages: 117,
        repeat: 100,
        requested: 1600,
        linux_2_6_0: published(1.0, 1600, 0, 1600),
        linux_2_6_7: published(16.0, 1600, 0, 100),
        first_page_2_6_0: 117,
    },
    Figure {
        figure: 6,
        read_pages: 32,
        seek_pages: 3,
        repeat: 1000,
        requested: 32000,
        linux_2_6_0: published(1.0, 32000, 0, 32000),
        linux_2_6_7: published(31.95, 32009, 9, 1002),
        first_page_2_6_0: 3,
    },
    Figure {
        figure: 7,
        read_pages: 32,
        seek_pages: 68,
        repeat: 1000,
        requested: 32000,
        linux_2_6_0: published(31.31, 93970, 61970, 3001),
        linux_2_6_7: published(31.91, 32099, 99, 1006),
        first_page_2_6_0: 0,
    },
    Figure {
        figure: 8,
        read_pages: 40,
        seek_pages: 5,
        repeat: 1000,
        requested: 40000,
        linux_2_6_0: published(31.13, 50810, 10801, 1631),
        linux_2_6_7: published(31.91, 51176, 11176, 1601),
        first_page_2_6_0: 5,
    },
    Figure {
        figure: 9,
        read_pages: 4,
        seek_pages: 96,
        repeat: 1000,
        requested: 4000,
        linux_2_6_0: published(30.94, 61914, 57914, 2001),
        linux_2_6_7: published(4.02, 4023, 23, 1001),
        first_page_2_6_0: 0,
    },
    Figure {
        figure: 10,
        read_pages: 16,
        seek_pages: 0,
        repeat: 1000,
        requested: 16000,
        linux_2_6_0: published(30.08, 16031, 31, 533),
        linux_2_6_7: published(31.85, 16050, 50, 504),
        first_page_2_6_0: 1,
    },
];

impl Figure {
    /// The figure's pattern, from page `first_page`.
    pub fn pattern(&self, first_page: u64) -> Pattern {
        Pattern::Paper {
            read_pages: self.read_pages,
            seek_pages: self.seek_pages,
            repeat: self.repeat,
            first_page,
        }
    }

    /// The published column for `policy`, if the paper has one.
    pub fn published(&self, policy: &str) -> Option<&Published> {
        match policy {
            "linux-2.6.0" => Some(&self.linux_2_6_0),
            "linux-2.6.7" => Some(&self.linux_2_6_7),
            _ => None,
        }
    }

    /// The workload the paper ran `policy` on (see the module comment for the calibration).
    pub fn workload(&self, policy: &str) -> Workload {
        match policy {
            "linux-2.6.0" => self.pattern(self.first_page_2_6_0).workload(),
            "linux-2.6.7" if self.first_page_2_6_0 == 0 => {
                let mut w = self.pattern(0).workload();
                let lead = [
                    Event::Open { handle: 0, file: 0 },
                    Event::Hint {
                        handle: 0,
                        hint: Hint::WillNeed {
                            start_page: 0,
                            pages: 1,
                        },
                    },
                ];
                let rest = w.events.skip(1); // the pattern's own open
                w.events = Box::new(lead.into_iter().chain(rest));
                w
            }
            _ => self.pattern(0).workload(),
        }
    }

    /// Run `policy` on this figure's pattern with the paper's accounting (the report's
    /// `paper` figures) and with a faithful cache (its `faithful` figures).
    pub fn run(&self, policy: &str, config: SimConfig) -> Result<RunReport, String> {
        let paper = sim::run(
            policy,
            SimConfig {
                accounting: Accounting::Paper,
                ..config
            },
            self.workload(policy),
        )?;
        let faithful = sim::run(
            policy,
            SimConfig {
                accounting: Accounting::Faithful,
                ..config
            },
            self.workload(policy),
        )?;
        Ok(RunReport {
            paper: paper.paper,
            ..faithful
        })
    }
}

/// Results of one figure for every policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FigureResult {
    /// The figure and its published columns.
    pub figure: Figure,
    /// One run per policy.
    pub results: Vec<RunReport>,
}

/// Run every figure through `policies` (all of them if empty).
pub fn reproduce(policies: &[&str], config: SimConfig) -> Result<Vec<FigureResult>, String> {
    let all: Vec<&str> = crate::policy::names().collect();
    let policies = if policies.is_empty() {
        &all[..]
    } else {
        policies
    };
    FIGURES
        .iter()
        .map(|fig| {
            let results = policies
                .iter()
                .map(|p| fig.run(p, config))
                .collect::<Result<_, _>>()?;
            Ok(FigureResult {
                figure: *fig,
                results,
            })
        })
        .collect()
}

/// Whether a simulated figure is close enough to a published one: within 1%, or within 3 where
/// the number is small.
pub fn within_tolerance(simulated: u64, published: u64) -> bool {
    let diff = simulated.abs_diff(published) as f64;
    diff <= 3.0 || diff <= 0.01 * published as f64
}
