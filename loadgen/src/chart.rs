//! A sale drawn as one SVG beside its report: grabs per second by outcome, latency percentiles
//! over time, and the drain (orders confirmed and mailed). Every curve is on the time since the
//! first grab, so the three panels line up.

use std::{collections::BTreeMap, path::Path};

use plotters::prelude::*;

/// One grab request as the client saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// When it was sent, in seconds since the first grab.
    pub at_s: f64,
    pub latency: std::time::Duration,
    /// Its outcome: the status and the stable code (`202`, `409 SOLD_OUT`, ...).
    pub outcome: String,
}

/// What a sale's chart is drawn from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub grabs: Vec<Sample>,
    /// When each winner's order was confirmed, and when its mail was sent (seconds since the
    /// first grab).
    pub confirmed_s: Vec<f64>,
    pub mailed_s: Vec<f64>,
}

#[derive(Debug, thiserror::Error)]
#[error("chart: {0}")]
pub struct ChartError(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for ChartError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        Self(e.to_string())
    }
}

/// The panels' titles, in order (a test and the test command look for them).
pub const PANELS: [&str; 3] =
    ["grabs per second, by outcome", "grab latency percentiles (ms)", "the drain: orders confirmed and mailed"];

/// How many time buckets the grab phase is cut into (at least 50 ms each).
const BUCKETS: f64 = 60.0;
/// How many moments the drain's curves are counted at.
const DRAIN_POINTS: usize = 400;

/// Axis labels: seconds to a tenth, counts and milliseconds whole.
fn seconds(v: &f64) -> String {
    format!("{v:.1}")
}

fn whole(v: &f64) -> String {
    format!("{v:.0}")
}

/// One named curve of a panel.
type Curve = (String, Vec<(f64, f64)>);

/// Draws the sale into `path` (SVG).
pub fn draw(timeline: &Timeline, title: &str, path: &Path) -> Result<(), ChartError> {
    let root = SVGBackend::new(path, (960, 1080)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let panels = root.split_evenly((3, 1));
    let grab_end = timeline.grabs.iter().map(|s| s.at_s + s.latency.as_secs_f64()).fold(0.0, f64::max);
    let width = (grab_end / BUCKETS).max(0.05);
    let buckets = (grab_end / width).ceil().max(1.0) as usize;
    let bucket = |t: f64| ((t / width) as usize).min(buckets - 1);
    let middle = |b: usize| (b as f64 + 0.5) * width;

    // 1. grabs per second by outcome
    let mut by_outcome: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in &timeline.grabs {
        by_outcome.entry(s.outcome.as_str()).or_insert_with(|| vec![0.0; buckets])[bucket(s.at_s)] += 1.0 / width;
    }
    let rates: Vec<Curve> = by_outcome
        .iter()
        .map(|(outcome, rates)| (outcome.to_string(), rates.iter().enumerate().map(|(b, r)| (middle(b), *r)).collect()))
        .collect();
    let grab_span = buckets as f64 * width;
    panel(&panels[0], PANELS[0], "seconds since the first grab", "requests/s", grab_span, &rates)?;

    // 2. latency percentiles by the bucket a request was sent in
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); buckets];
    for s in &timeline.grabs {
        latencies[bucket(s.at_s)].push(s.latency.as_secs_f64() * 1000.0);
    }
    for l in &mut latencies {
        l.sort_by(f64::total_cmp);
    }
    let quantile = |l: &Vec<f64>, q: f64| l.get(((l.len() as f64 - 1.0) * q).round() as usize).copied();
    let percentiles: Vec<Curve> = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]
        .into_iter()
        .map(|(name, q)| {
            let points = latencies.iter().enumerate().filter_map(|(b, l)| quantile(l, q).map(|v| (middle(b), v)));
            (name.to_owned(), points.collect())
        })
        .collect();
    panel(&panels[1], PANELS[1], "seconds since the first grab (when sent)", "ms", grab_span, &percentiles)?;

    // 3. the drain: how many orders were confirmed, and mailed, by each moment (counted at a few
    // hundred moments: a red packet's 20,000 steps each would make a megabyte of SVG)
    let end = timeline.confirmed_s.iter().chain(&timeline.mailed_s).copied().fold(grab_end, f64::max).max(0.1);
    let cumulative = |times: &[f64]| -> Vec<(f64, f64)> {
        let mut sorted = times.to_vec();
        sorted.sort_by(f64::total_cmp);
        (0..=DRAIN_POINTS)
            .map(|i| {
                let t = end * i as f64 / DRAIN_POINTS as f64;
                (t, sorted.partition_point(|&x| x <= t) as f64)
            })
            .collect()
    };
    let drain: Vec<Curve> = vec![
        ("confirmed".to_owned(), cumulative(&timeline.confirmed_s)),
        ("mailed".to_owned(), cumulative(&timeline.mailed_s)),
    ];
    panel(&panels[2], PANELS[2], "seconds since the first grab", "orders", end * 1.02, &drain)?;
    root.present()?;
    Ok(())
}

/// One panel: its title, axes from 0 (x up to `x_max`, y a tenth above the highest point), and
/// each curve in its own colour with its name in the legend.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x_max: f64,
    curves: &[Curve],
) -> Result<(), ChartError> {
    let y_max = curves.iter().flat_map(|(_, points)| points.iter().map(|p| p.1)).fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max * 1.1)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&seconds)
        .y_label_formatter(&whole)
        .draw()?;
    for (i, (name, points)) in curves.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_is_drawn_with_its_three_panels_and_one_curve_per_outcome() {
        let mut grabs = Vec::new();
        for i in 0..300 {
            let outcome = if i < 100 { "202" } else { "409 SOLD_OUT" };
            let latency = std::time::Duration::from_millis(5 + i % 7);
            grabs.push(Sample { at_s: i as f64 / 100.0, latency, outcome: outcome.into() });
        }
        let timeline = Timeline {
            grabs,
            confirmed_s: (0..100).map(|i| 0.5 + i as f64 / 50.0).collect(),
            mailed_s: (0..100).map(|i| 0.8 + i as f64 / 50.0).collect(),
        };
        let path = std::env::temp_dir().join(format!("loadgen-chart-{}.svg", std::process::id()));
        draw(&timeline, "a test sale", &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert!(svg.starts_with("<svg"), "an SVG");
        for text in PANELS.iter().chain(&["a test sale", "202", "409 SOLD_OUT", "p50", "p99", "confirmed", "mailed"]) {
            // plotters writes each text on a line of its own.
            assert!(svg.lines().any(|line| line.trim() == *text), "{text} is drawn");
        }
        // One polyline per curve: two outcomes, three percentiles, two drain curves, and the legend's marks.
        assert!(svg.matches("<polyline").count() >= 7, "every curve is drawn");
    }
}
