//! `--plot`: a picture of each contender's throughput over the kernel's, per pattern, and one
//! of an engine run's requests over time (its windows), both SVG.

use plotters::prelude::*;

use super::Outcome;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Write grouped bars of `vs_kernel` per pattern and contender to `path` (SVG).
pub fn plot(o: &Outcome, path: &std::path::Path) -> Result<(), String> {
    let mut patterns: Vec<&str> = Vec::new();
    let mut contenders: Vec<&str> = Vec::new();
    for r in o.rows.iter().filter(|r| r.vs_kernel.is_some()) {
        if !patterns.contains(&r.pattern.as_str()) {
            patterns.push(&r.pattern);
        }
        if !contenders.contains(&r.contender.as_str()) {
            contenders.push(&r.contender);
        }
    }
    if patterns.is_empty() {
        return Err("nothing to plot: no pattern ran with the kernel contender".into());
    }
    let top = o
        .rows
        .iter()
        .filter_map(|r| r.vs_kernel)
        .fold(1.0f64, f64::max)
        * 1.1;
    let width = 160 + 90 * patterns.len() as u32;
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("throughput / kernel's, per pattern", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..patterns.len() as f64, 0f64..top)
        .map_err(|e| e.to_string())?;
    let names = patterns.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(patterns.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < names.len() {
                names[i].to_string()
            } else {
                String::new()
            }
        })
        .y_desc("x kernel")
        .draw()
        .map_err(|e| e.to_string())?;
    let w = 0.8 / contenders.len() as f64;
    for (ci, c) in contenders.iter().enumerate() {
        let color = COLORS[ci % COLORS.len()];
        let bars = o.rows.iter().filter(|r| r.contender == *c).filter_map(|r| {
            let pi = patterns.iter().position(|p| *p == r.pattern)? as f64;
            let x0 = pi + 0.1 + ci as f64 * w;
            Some(Rectangle::new(
                [(x0, 0.0), (x0 + w, r.vs_kernel?)],
                color.filled(),
            ))
        });
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(*c)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 1.0), (patterns.len() as f64, 1.0)],
            BLACK,
        )))
        .map_err(|e| e.to_string())?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// Write the size of each request of one engine run against time to `path` (SVG): ahead
/// requests (the policy's windows) and the ones a reader waited for.
pub fn windows(
    label: &str,
    log: &[ahead::engine::RequestRecord],
    path: &std::path::Path,
) -> Result<(), String> {
    if log.is_empty() {
        return Err("no engine requests were recorded".into());
    }
    let end = log.iter().map(|r| r.at_ns).max().unwrap_or(1).max(1) as f64 / 1e9;
    let top = log.iter().map(|r| r.pages * 4).max().unwrap_or(4) as f64 * 1.1;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("requests over time: {label}"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..end * 1.02, 0f64..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("request KiB")
        .draw()
        .map_err(|e| e.to_string())?;
    for (ahead, color, name) in [
        (true, COLORS[0], "read ahead"),
        (false, COLORS[3], "waited for"),
    ] {
        let points = log.iter().filter(|r| r.ahead == ahead).map(|r| {
            Circle::new(
                (r.at_ns as f64 / 1e9, (r.pages * 4) as f64),
                2,
                color.filled(),
            )
        });
        chart
            .draw_series(points)
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 5, y), 3, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
