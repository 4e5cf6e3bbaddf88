//! Reports: aligned tables for people and JSON documents for programs.
//!
//! JSON shapes (metrics are the field names of [`Metrics`]):
//! * `sim`: `{"pattern":..,"device":..,"results":[{"policy":..,<metrics>,"vs_oracle":..}, ...]}`
//!   (`vs_oracle`, everywhere: modelled time over the oracle's, present when the oracle ran)
//! * `sim --paper`: `{"figures":[{"figure":4,"published":{..},"results":[{"policy":..,<paper
//!   metrics>,"faithful":{<metrics>}}, ...]}, ...]}`
//! * `replay`: `{"results":[{"policy":..,<metrics>}, ...],"files":[{"file":..,"size":..,
//!   "results":[{"policy":..,<metrics>}]}]}`

use serde_json::{json, Value};

use crate::paper::{within_tolerance, FigureResult, Published};
use crate::policy::ORACLE;
use crate::sim::{time_ratio, Metrics, RunReport};

fn metrics_value(policy: &str, m: &Metrics) -> Value {
    let mut v = serde_json::to_value(m).expect("metrics serialize");
    v.as_object_mut()
        .expect("metrics are an object")
        .insert("policy".into(), json!(policy));
    v
}

/// The oracle's figures among `rows`, if it ran.
fn oracle_of<'a>(rows: impl IntoIterator<Item = (&'a str, &'a Metrics)>) -> Option<&'a Metrics> {
    rows.into_iter()
        .find(|(name, _)| *name == ORACLE)
        .map(|(_, m)| m)
}

/// `{"policy":..,<metrics>,"vs_oracle":..}` for each run, faithful accounting (`vs_oracle`:
/// modelled time over the oracle's, when the oracle ran).
pub fn results_json(runs: &[RunReport]) -> Value {
    let oracle = oracle_of(runs.iter().map(|r| (r.policy.as_str(), &r.faithful)));
    Value::Array(
        runs.iter()
            .map(|r| {
                let mut v = metrics_value(&r.policy, &r.faithful);
                if let Some(o) = oracle {
                    v["vs_oracle"] = json!(time_ratio(&r.faithful, o));
                }
                v
            })
            .collect(),
    )
}

/// Per-file results across runs (all runs must be over the same files).
pub fn files_json(runs: &[RunReport], sizes: &[u64]) -> Value {
    let Some(first) = runs.first() else {
        return json!([]);
    };
    let files = first.files.iter().enumerate().map(|(i, f)| {
        let results: Vec<Value> = runs
            .iter()
            .map(|r| metrics_value(&r.policy, &r.files[i].metrics))
            .collect();
        json!({"file": f.file, "size": sizes.get(i).copied().unwrap_or(0), "results": results})
    });
    Value::Array(files.collect())
}

/// The `sim --paper --json` document.
pub fn paper_json(figures: &[FigureResult]) -> Value {
    let figs = figures.iter().map(|f| {
        let results: Vec<Value> = f
            .results
            .iter()
            .map(|r| {
                let mut v = metrics_value(&r.policy, &r.paper);
                v["faithful"] = serde_json::to_value(&r.faithful).expect("metrics serialize");
                if let Some(o) =
                    oracle_of(f.results.iter().map(|r| (r.policy.as_str(), &r.faithful)))
                {
                    v["vs_oracle"] = json!(time_ratio(&r.faithful, o));
                }
                v
            })
            .collect();
        json!({
            "figure": f.figure.figure,
            "read_pages": f.figure.read_pages,
            "seek_pages": f.figure.seek_pages,
            "repeat": f.figure.repeat,
            "requested": f.figure.requested,
            "published": {"linux-2.6.0": f.figure.linux_2_6_0, "linux-2.6.7": f.figure.linux_2_6_7},
            "results": results,
        })
    });
    json!({ "figures": figs.collect::<Vec<_>>() })
}

/// A plain text table with right-aligned columns (the first left-aligned).
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with this header row.
    pub fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|s| s.to_string()).collect()],
        }
    }

    /// Add a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Render with two spaces between columns.
    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(|r| r.len()).max().unwrap_or(0);
        let width: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c == 0 {
                    line.push_str(&format!("{cell:<w$}", w = width[0]));
                } else {
                    line.push_str(&format!("  {cell:>w$}", w = width[c]));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The metrics of several runs, one row per policy.
pub fn metrics_table(runs: &[(&str, &Metrics)]) -> String {
    let mut t = Table::new(&[
        "policy",
        "requested",
        "read",
        "wasted",
        "requests",
        "avg_pages",
        "sync",
        "async",
        "hits",
        "thrashed",
        "stall_ms",
        "modeled_ms",
        "vs_oracle",
    ]);
    let oracle = oracle_of(runs.iter().map(|(n, m)| (*n, *m)));
    for (name, m) in runs {
        t.row(vec![
            name.to_string(),
            m.pages_requested.to_string(),
            m.pages_read.to_string(),
            m.wasted_pages.to_string(),
            m.requests.to_string(),
            format!("{:.2}", m.avg_request_pages),
            m.sync_requests.to_string(),
            m.ahead_requests.to_string(),
            m.hit_pages.to_string(),
            m.thrashed_pages.to_string(),
            format!("{:.3}", m.stall_ms),
            format!("{:.3}", m.modeled_ms),
            ratio_text(m, oracle),
        ]);
    }
    t.render()
}

/// `m`'s modelled time over the oracle's, as a cell ("-" when the oracle did not run).
fn ratio_text(m: &Metrics, oracle: Option<&Metrics>) -> String {
    oracle
        .map(|o| format!("{:.2}", time_ratio(m, o)))
        .unwrap_or_else(|| "-".into())
}

fn mark(sim: u64, published: u64) -> &'static str {
    if within_tolerance(sim, published) {
        ""
    } else {
        " !"
    }
}

/// One paper figure: the published columns, then every policy under both accountings.
pub fn paper_figure_table(f: &FigureResult) -> String {
    let fig = &f.figure;
    let mut out = format!(
        "Figure {}: {}-page reads, {}-page seeks, {} times ({} pages requested)\n",
        fig.figure, fig.read_pages, fig.seek_pages, fig.repeat, fig.requested
    );
    let mut t = Table::new(&[
        "",
        "avg_pages",
        "read",
        "wasted",
        "requests",
        "|",
        "faithful: read",
        "wasted",
        "requests",
        "hits",
        "vs_oracle",
    ]);
    let oracle = oracle_of(f.results.iter().map(|r| (r.policy.as_str(), &r.faithful)));
    let published = |name: &str, p: &Published| {
        vec![
            format!("paper {name}"),
            format!("{:.2}", p.avg_request_pages),
            p.pages_read.to_string(),
            p.wasted_pages.to_string(),
            p.requests.to_string(),
            "|".into(),
        ]
    };
    t.row(published("2.6.0", &fig.linux_2_6_0));
    t.row(published("2.6.7", &fig.linux_2_6_7));
    for r in &f.results {
        let (read, wasted, req) = match fig.published(&r.policy) {
            Some(p) => (
                mark(r.paper.pages_read, p.pages_read),
                mark(r.paper.wasted_pages, p.wasted_pages),
                mark(r.paper.requests, p.requests),
            ),
            None => ("", "", ""),
        };
        t.row(vec![
            r.policy.clone(),
            format!("{:.2}", r.paper.avg_request_pages),
            format!("{}{read}", r.paper.pages_read),
            format!("{}{wasted}", r.paper.wasted_pages),
            format!("{}{req}", r.paper.requests),
            "|".into(),
            r.faithful.pages_read.to_string(),
            r.faithful.wasted_pages.to_string(),
            r.faithful.requests.to_string(),
            r.faithful.hit_pages.to_string(),
            ratio_text(&r.faithful, oracle),
        ]);
    }
    out.push_str(&t.render());
    out
}
