//! The plots of report.html, drawn with plotters' SVG backend from the run folder's own data:
//! throughput and latency against load with the knee marked, the USL curve over the measured
//! points, the latency percentile spectrum of every step, anomalies and rejections per step,
//! the per-second time series, and, with several operations or any scenario, latency and
//! error rate per operation and iterations per scenario against load.

use super::terminal::{by_operation, iteration_rows, op_rows, operations, scenarios};
use super::{ReportError, ResourcePoint, RunSummary, TimeseriesRow};
use crate::metrics::{Model, StepSummary, Verdict};
use hdrhistogram::Histogram;
use plotters::chart::{DualCoordChartContext, MeshStyle};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::error::Error;

const SIZE: (u32, u32) = (900, 440);
/// How far the y axes reach above the data, leaving the upper part to the legend.
const HEADROOM: f64 = 1.45;
const FONT: &str = "sans-serif";

/// One plot: the file it is saved as beside report.html, its title, and its SVG text.
pub(super) struct Plot {
    pub file: &'static str,
    pub title: &'static str,
    pub svg: String,
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), Box<dyn Error>>;
type Chart<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;
/// A chart with counts on the left axis and latency in ms on the right one, over one x axis.
type DualChart<'a, X> = DualCoordChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<X, RangedCoordf64>,
    Cartesian2d<X, RangedCoordf64>,
>;

/// The frame of every plot: its caption, margins and label areas.
fn frame<'a, 'b>(area: &'a Area<'b>, caption: &str) -> ChartBuilder<'a, 'static, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    builder
}

/// Draws the mesh of every plot: both axis descriptions in the one label font; `extra` adds
/// what one plot's axes need beyond that (tick counts, formats, no light lines).
fn mesh<'a, X, Y>(
    chart: &mut Chart<'a, X, Y>,
    x_desc: &str,
    y_desc: &str,
    extra: impl FnOnce(&mut MeshStyle<'a, '_, X, Y, SVGBackend<'a>>),
) -> Drawn
where
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let mut m = chart.configure_mesh();
    m.x_desc(x_desc).y_desc(y_desc).label_style((FONT, 13));
    extra(&mut m);
    m.draw()?;
    Ok(())
}

/// A chart with a left axis from 0 to `top` and a right latency axis from 0 to `top_ms` ms,
/// its mesh and both axes drawn.
fn dual_chart<'b, X>(
    area: &Area<'b>,
    caption: &str,
    x: X,
    (top, top_ms): (f64, f64),
    (x_desc, y_desc, y2_desc): (&str, &str, &str),
    extra: impl FnOnce(&mut MeshStyle<'b, '_, X::CoordDescType, RangedCoordf64, SVGBackend<'b>>),
) -> Result<DualChart<'b, X::CoordDescType>, Box<dyn Error>>
where
    X: AsRangedCoord + Clone,
    X::CoordDescType: ValueFormatter<X::Value>,
{
    let mut chart = frame(area, caption)
        .right_y_label_area_size(60)
        .build_cartesian_2d(x.clone(), 0.0..top)?
        .set_secondary_coord(x, 0.0..top_ms);
    mesh(&mut chart, x_desc, y_desc, extra)?;
    chart
        .configure_secondary_axes()
        .y_desc(y2_desc)
        .label_style((FONT, 13))
        .draw()?;
    Ok(chart)
}

/// The secondary axis of the plots that show latency on it.
const LATENCY_MS: &str = "latency (ms)";

/// The legend key of a line series.
fn line_key(
    color: impl Color + Copy,
    width: u32,
) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
}

/// Draws a chart's series labels in the one legend style of every plot.
fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Drawn {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, font_size))
        .draw()?;
    Ok(())
}

const BLUE_: RGBColor = RGBColor(31, 119, 180);
const ORANGE_: RGBColor = RGBColor(255, 127, 14);
const GREEN_: RGBColor = RGBColor(44, 160, 44);
const RED_: RGBColor = RGBColor(214, 39, 40);
const PURPLE_: RGBColor = RGBColor(148, 103, 189);
const GREY_: RGBColor = RGBColor(127, 127, 127);
const GOLD_: RGBColor = RGBColor(200, 150, 0);
const TEAL_: RGBColor = RGBColor(23, 190, 207);

fn verdict_color(v: Verdict) -> RGBColor {
    match v {
        Verdict::Ok => GREEN_,
        Verdict::Saturated => GOLD_,
        Verdict::Failed => RED_,
    }
}

fn draw(
    file: &'static str,
    title: &'static str,
    f: impl FnOnce(&Area<'_>) -> Drawn,
) -> Result<Plot, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| f(&root).map_err(|e| e.to_string()))
            .and_then(|()| root.present().map_err(|e| e.to_string()))
            .map_err(|msg| ReportError::Plot { name: file, msg })?;
    }
    Ok(Plot { file, title, svg })
}

/// A note in the plot's corner, e.g. why a fit is missing.
fn note(area: &Area<'_>, text: &str) -> Drawn {
    area.draw(&Text::new(
        text.to_owned(),
        (80, 50),
        (FONT, 15).into_font().color(&GREY_),
    ))?;
    Ok(())
}

/// `[lo, hi]` around the values, never empty, never below `floor`.
fn span(values: impl Iterator<Item = f64>, floor: f64) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return (floor.max(1.0), floor.max(1.0) * 10.0);
    }
    let lo = lo.max(floor);
    if hi <= lo {
        (lo / 2.0, lo * 2.0)
    } else {
        (lo, hi)
    }
}

/// The steps plotted against load: complete or not, of the knee's model.
fn load_steps(run: &RunSummary) -> Vec<&StepSummary> {
    run.steps
        .iter()
        .map(|s| &s.figures)
        .filter(|s| Some(s.model) == run.knee.model && s.load() > 0.0)
        .collect()
}

/// Every step of `steps` at its load and throughput, coloured by verdict.
fn verdict_dots<'s>(
    steps: &'s [&StepSummary],
) -> impl Iterator<Item = Circle<(f64, f64), i32>> + 's {
    steps.iter().map(|s| {
        Circle::new(
            (s.load(), s.throughput_rps),
            6,
            verdict_color(s.verdict).filled(),
        )
    })
}

/// A load tick: the load to two decimals at most.
fn load_tick(v: &f64) -> String {
    super::terminal::num((v * 100.0).round() / 100.0)
}

/// A step tick: whole steps only.
fn step_tick(x: &f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

fn load_label(model: Option<Model>) -> &'static str {
    match model {
        Some(Model::Open) => "target rate (req/s, log scale)",
        _ => "concurrency (log scale)",
    }
}

/// The load axis of every plot against load: logarithmic around the steps' loads.
fn load_axis(
    run: &RunSummary,
    steps: &[&StepSummary],
) -> impl AsRangedCoord<CoordDescType: ValueFormatter<f64>, Value = f64> + Clone {
    let (lo, hi) = span(steps.iter().map(|s| s.load()), f64::MIN_POSITIVE);
    // Sweeps usually double their load: base 2 puts the ticks on the steps.
    let base = if run.knee.model == Some(Model::Closed) {
        2.0
    } else {
        10.0
    };
    (lo / 1.3..hi * 1.3).log_scale().base(base)
}

fn throughput_vs_load(area: &Area<'_>, run: &RunSummary) -> Drawn {
    let steps = load_steps(run);
    let x = load_axis(run, &steps);
    // Headroom above the data keeps the legend clear of it.
    let top_rps = steps.iter().map(|s| s.throughput_rps).fold(1.0, f64::max) * HEADROOM;
    let top_ms = steps.iter().filter_map(|s| s.p99_ms).fold(1.0, f64::max) * HEADROOM;
    let mut chart = dual_chart(
        area,
        "Throughput and latency against load",
        x,
        (top_rps, top_ms),
        (load_label(run.knee.model), "throughput (req/s)", LATENCY_MS),
        |m| {
            m.light_line_style(WHITE).x_label_formatter(&load_tick);
        },
    )?;
    if steps.is_empty() {
        return note(area, "no step recorded");
    }
    let pts = |f: &dyn Fn(&StepSummary) -> Option<f64>| -> Vec<(f64, f64)> {
        steps
            .iter()
            .filter_map(|s| f(s).map(|v| (s.load(), v)))
            .collect()
    };
    chart
        .draw_series(LineSeries::new(
            pts(&|s| Some(s.throughput_rps)),
            BLUE_.stroke_width(3),
        ))?
        .label("throughput (req/s)")
        .legend(line_key(BLUE_, 3));
    chart.draw_series(verdict_dots(&steps))?;
    for (name, color, f) in [
        (
            "p50 (ms)",
            GREEN_,
            (|s: &StepSummary| s.p50_ms) as fn(&StepSummary) -> Option<f64>,
        ),
        ("p99 (ms)", ORANGE_, |s: &StepSummary| s.p99_ms),
    ] {
        chart
            .draw_secondary_series(LineSeries::new(pts(&f), color.stroke_width(2)))?
            .label(name)
            .legend(line_key(color, 2));
    }
    let k = &run.knee;
    let markers = [
        (k.saturation_point, GOLD_, "saturation point"),
        (
            k.failure_point.as_ref().map(|f| f.load),
            RED_,
            "failure point",
        ),
    ];
    for (load, color, name) in markers {
        if let Some(l) = load {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(l, 0.0), (l, top_rps)],
                    8,
                    5,
                    color.stroke_width(2),
                ))?
                .label(format!("{name}: {}", super::terminal::num(l)))
                .legend(line_key(color, 2));
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
    Ok(())
}

fn usl_curve(area: &Area<'_>, run: &RunSummary) -> Drawn {
    // The fit's figures: with scenarios, iterations (docs/metrics.md).
    let judged: Vec<StepSummary> = load_steps(run)
        .into_iter()
        .filter(|s| s.model == Model::Closed)
        .map(StepSummary::judged)
        .collect();
    let steps: Vec<&StepSummary> = judged.iter().collect();
    let unit = super::terminal::rate_unit(run);
    let fit = run.knee.usl.as_ref();
    let max_n = steps.iter().map(|s| s.load()).fold(1.0, f64::max);
    let x_max = fit
        .and_then(|f| f.peak_concurrency)
        .map_or(max_n, |p| max_n.max(p * 1.3).min(max_n * 4.0))
        * 1.1;
    let samples: Vec<(f64, f64)> = fit
        .map(|f| {
            (0..=200)
                .map(|i| {
                    let n = 1.0 + (x_max - 1.0) * f64::from(i) / 200.0;
                    (n, f.throughput(n))
                })
                .collect()
        })
        .unwrap_or_default();
    let y_max = steps
        .iter()
        .map(|s| s.throughput_rps)
        .chain(samples.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart =
        frame(area, "Universal Scalability Law fit").build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    mesh(
        &mut chart,
        "concurrency",
        &format!("throughput ({unit})"),
        |_| {},
    )?;
    if let Some(f) = fit {
        chart
            .draw_series(LineSeries::new(samples, PURPLE_.stroke_width(2)))?
            .label(format!(
                "USL: sigma {:.4}, kappa {:.6}, lambda {:.1} (R² {:.3})",
                f.sigma, f.kappa, f.lambda, f.r_squared
            ))
            .legend(line_key(PURPLE_, 2));
        if let (Some(n), Some(x)) = (f.peak_concurrency, f.peak_throughput_rps) {
            chart
                .draw_series(std::iter::once(TriangleMarker::new(
                    (n, x),
                    8,
                    PURPLE_.filled(),
                )))?
                .label(format!("predicted peak: {x:.1} {unit} at {n:.1}"))
                .legend(|(x, y)| TriangleMarker::new((x + 10, y), 6, PURPLE_.filled()));
        }
    }
    chart
        .draw_series(verdict_dots(&steps))?
        .label("measured (colour: verdict)")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, GREEN_.filled()));
    legend(&mut chart, SeriesLabelPosition::LowerRight, 13)?;
    if fit.is_none() {
        let why = if run.knee.model == Some(Model::Open) {
            "no USL fit: the law applies to closed-loop (concurrency) sweeps"
        } else {
            "no USL fit: it needs 3 closed-loop steps at different concurrencies that did not fail"
        };
        note(area, why)?;
    }
    Ok(())
}

/// HDR-style x position of a quantile: log10(1 / (1 − q)), so 90% is 1, 99% is 2, 99.9% is 3.
fn nines(q: f64) -> f64 {
    -(1.0 - q.min(1.0 - 1e-9)).log10()
}

fn nines_label(x: &f64) -> String {
    let q = 100.0 * (1.0 - 10f64.powf(-x));
    let s = format!("{q:.4}");
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

fn spectrum(area: &Area<'_>, run: &RunSummary, hists: &BTreeMap<u32, Histogram<u64>>) -> Drawn {
    let curves: Vec<(u32, Vec<(f64, f64)>)> = hists
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(step, h)| {
            let top = (h.len() as f64).log10().max(1.0);
            let pts = h
                .iter_quantiles(2)
                .map(|v| {
                    (
                        nines(v.quantile_iterated_to()).min(top),
                        v.value_iterated_to() as f64 / 1000.0,
                    )
                })
                .collect();
            (*step, pts)
        })
        .collect();
    let x_max = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.0))
        .fold(2.0, f64::max)
        .ceil();
    let (lo, hi) = span(
        curves.iter().flat_map(|(_, c)| c.iter().map(|p| p.1)),
        0.001,
    );
    let mut chart = frame(area, "Latency by percentile, per step")
        .margin_right(40)
        .build_cartesian_2d(0.0..x_max, (lo / 1.3..hi * 1.3).log_scale())?;
    mesh(&mut chart, "percentile", "latency (ms, log scale)", |m| {
        m.x_labels(x_max as usize + 1)
            .x_label_formatter(&nines_label)
            .y_labels(5)
            .light_line_style(WHITE);
    })?;
    if curves.is_empty() {
        return note(area, "no latency recorded");
    }
    let loads: BTreeMap<u32, f64> = run
        .steps
        .iter()
        .map(|s| (s.figures.step, s.figures.load()))
        .collect();
    for (i, (step, pts)) in curves.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        // A step with seconds in the log but no row yet was cut off by a crash.
        let label = loads.get(&step).map_or_else(
            || format!("step {step} (unfinished)"),
            |l| format!("step {step} (load {})", super::terminal::num(*l)),
        );
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(label)
            .legend(line_key(color, 2));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    Ok(())
}

fn anomalies(area: &Area<'_>, run: &RunSummary) -> Drawn {
    let steps: Vec<(u32, [u64; 3])> = run
        .steps
        .iter()
        .map(|s| {
            let f = &s.figures;
            (f.step, [s.anomalies, s.rejected, f.missing + f.timeouts])
        })
        .collect();
    let n = steps.iter().map(|s| s.0).max().unwrap_or(1) as f64;
    let top = steps.iter().flat_map(|s| s.1).max().unwrap_or(0).max(1) as f64 * HEADROOM;
    let mut chart = frame(area, "Anomalies, rejections and losses per step")
        .build_cartesian_2d(0.5..n + 0.5, 0.0..top)?;
    mesh(&mut chart, "step", "count", |m| {
        m.x_labels(n as usize).x_label_formatter(&step_tick);
    })?;
    let series = [
        ("anomalies", RED_),
        ("rejected (HTTP 429 + 503)", ORANGE_),
        ("lost (missing + timeouts)", GREY_),
    ];
    for (k, (name, color)) in series.into_iter().enumerate() {
        let left = k as f64 * 0.27 - 0.4;
        chart
            .draw_series(steps.iter().map(|(step, counts)| {
                let x = f64::from(*step) + left;
                Rectangle::new([(x, 0.0), (x + 0.25, counts[k] as f64)], color.filled())
            }))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        // Counts over the bars, so a handful of anomalies beside thousands of rejections
        // still shows.
        chart.draw_series(
            steps
                .iter()
                .filter(|(_, c)| c[k] > 0)
                .map(|(step, counts)| {
                    Text::new(
                        counts[k].to_string(),
                        (f64::from(*step) + left, counts[k] as f64 + top * 0.02),
                        (FONT, 11).into_font().color(&color),
                    )
                }),
        )?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
    if steps.iter().all(|s| s.1 == [0, 0, 0]) {
        note(
            area,
            "none: every step was free of anomalies, rejections and losses",
        )?;
    }
    Ok(())
}

fn timeseries(area: &Area<'_>, rows: &[TimeseriesRow]) -> Drawn {
    let t_max = rows.iter().map(|r| r.t_s + 1.0).fold(1.0, f64::max);
    // More headroom than elsewhere: the legend is taller and the last step often peaks.
    let top = rows
        .iter()
        .map(|r| r.requests.max(r.ok))
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * HEADROOM
        * 1.2;
    let top_ms = rows.iter().filter_map(|r| r.p99_ms).fold(1.0, f64::max) * HEADROOM;
    let mut chart = dual_chart(
        area,
        "Per second",
        0.0..t_max,
        (top, top_ms),
        ("seconds since the start", "per second", LATENCY_MS),
        |_| {},
    )?;
    if rows.is_empty() {
        return note(area, "no second recorded");
    }
    // Step boundaries: a light line where each step's first second starts.
    let mut starts: BTreeMap<u32, f64> = BTreeMap::new();
    for r in rows {
        starts.entry(r.step).or_insert(r.t_s);
    }
    for (step, t) in &starts {
        chart.draw_series(LineSeries::new(vec![(*t, 0.0), (*t, top)], GREY_.mix(0.4)))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("step {step}"),
            (*t + 0.1, top * 0.97),
            (FONT, 11).into_font().color(&GREY_),
        )))?;
    }
    type Get = fn(&TimeseriesRow) -> f64;
    let counts: [(&str, RGBColor, Get); 4] = [
        ("requests", BLUE_, |r| r.requests as f64),
        ("ok", GREEN_, |r| r.ok as f64),
        ("errors + rejected + lost", ORANGE_, |r| {
            (r.errors + r.rejected + r.missing + r.timeouts) as f64
        }),
        ("anomalies", RED_, |r| r.anomalies as f64),
    ];
    for (name, color, get) in counts {
        chart
            .draw_series(LineSeries::new(
                rows.iter().map(|r| (r.t_s, get(r))),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(line_key(color, 2));
    }
    type Lat = fn(&TimeseriesRow) -> Option<f64>;
    let lat: [(&str, RGBColor, Lat); 2] = [
        ("p50 ms", TEAL_, |r| r.p50_ms),
        ("p99 ms", PURPLE_, |r| r.p99_ms),
    ];
    for (name, color, get) in lat {
        chart
            .draw_secondary_series(DashedLineSeries::new(
                rows.iter().filter_map(|r| get(r).map(|v| (r.t_s, v))),
                6,
                4,
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(line_key(color, 2));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
    Ok(())
}

/// The server's resources over the whole run: RSS on the left, CPU on the right, the
/// warm-ups and the cool-down shaded.
fn server_resources(area: &Area<'_>, rows: &[ResourcePoint]) -> Drawn {
    let t_max = rows.iter().map(|r| r.t_s + 1.0).fold(1.0, f64::max);
    let mib = |r: &ResourcePoint| r.rss_bytes.map(|b| b as f64 / f64::from(1u32 << 20));
    let top = rows.iter().filter_map(mib).fold(1.0, f64::max) * HEADROOM;
    let top_cpu = rows.iter().filter_map(|r| r.cpu_pct).fold(100.0, f64::max) * HEADROOM;
    let mut chart = dual_chart(
        area,
        "The server's resources",
        0.0..t_max,
        (top, top_cpu),
        (
            "seconds since the start",
            "RSS (MiB)",
            "CPU (% of one core)",
        ),
        |_| {},
    )?;
    // Each sample's second, shaded where no load was measured: warm-ups, gaps, cool-down.
    chart.draw_series(rows.iter().filter(|r| r.phase != "measure").map(|r| {
        Rectangle::new(
            [(r.t_s - 0.5, 0.0), (r.t_s + 0.5, top)],
            GREY_.mix(0.12).filled(),
        )
    }))?;
    chart
        .draw_series(LineSeries::new(
            rows.iter().filter_map(|r| mib(r).map(|m| (r.t_s, m))),
            BLUE_.stroke_width(2),
        ))?
        .label("RSS MiB")
        .legend(line_key(BLUE_, 2));
    chart
        .draw_secondary_series(DashedLineSeries::new(
            rows.iter().filter_map(|r| r.cpu_pct.map(|c| (r.t_s, c))),
            6,
            4,
            ORANGE_.stroke_width(2),
        ))?
        .label("CPU %")
        .legend(line_key(ORANGE_, 2));
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    Ok(())
}

/// One line of a plot against load: its label, colour, whether dashed, and its points.
struct Line {
    label: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// The `i`th colour of the lines per operation and per scenario.
fn series_color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// The loads of the steps plotted against load, by step.
fn loads_by_step(run: &RunSummary) -> BTreeMap<u32, f64> {
    load_steps(run).iter().map(|s| (s.step, s.load())).collect()
}

/// `rows` at their step's load, where the step is plotted against load and `get` has a value.
fn at_load<R>(
    loads: &BTreeMap<u32, f64>,
    rows: &[&R],
    step: impl Fn(&R) -> u32,
    get: impl Fn(&R) -> Option<f64>,
) -> Vec<(f64, f64)> {
    rows.iter()
        .filter_map(|r| Some((*loads.get(&step(r))?, get(r)?)))
        .collect()
}

/// The top of a y axis over the lines' points: their highest value (at least `min_top`),
/// headroom left for the legend.
fn axis_top<'a>(lines: impl Iterator<Item = &'a [(f64, f64)]>, min_top: f64) -> f64 {
    lines.flatten().map(|p| p.1).fold(min_top, f64::max) * HEADROOM
}

/// Lines against load on one axis from 0 to the data's top (at least `min_top`), headroom
/// left for the legend.
fn lines_vs_load(
    area: &Area<'_>,
    run: &RunSummary,
    caption: &str,
    y_desc: &str,
    min_top: f64,
    lines: &[Line],
) -> Drawn {
    let steps = load_steps(run);
    let top = axis_top(lines.iter().map(|l| l.points.as_slice()), min_top);
    let mut chart = frame(area, caption).build_cartesian_2d(load_axis(run, &steps), 0.0..top)?;
    mesh(&mut chart, load_label(run.knee.model), y_desc, |m| {
        m.light_line_style(WHITE).x_label_formatter(&load_tick);
    })?;
    if lines.iter().all(|l| l.points.is_empty()) {
        return note(area, "nothing measured against load");
    }
    for l in lines {
        let drawn = if l.dashed {
            chart.draw_series(DashedLineSeries::new(
                l.points.clone(),
                6,
                4,
                l.color.stroke_width(2),
            ))?
        } else {
            chart.draw_series(LineSeries::new(l.points.clone(), l.color.stroke_width(2)))?
        };
        drawn.label(l.label.as_str()).legend(line_key(l.color, 2));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    Ok(())
}

/// Per operation, p99 (solid) and p50 (dashed) against load.
fn ops_latency(area: &Area<'_>, run: &RunSummary) -> Drawn {
    let loads = loads_by_step(run);
    let mut lines = Vec::new();
    for (i, name) in operations(run).into_iter().enumerate() {
        let rows = op_rows(run, name);
        let color = series_color(i);
        lines.push(Line {
            label: format!("{name} p99"),
            color,
            dashed: false,
            points: at_load(&loads, &rows, |o| o.step, |o| o.p99_ms),
        });
        lines.push(Line {
            label: format!("{name} p50"),
            color,
            dashed: true,
            points: at_load(&loads, &rows, |o| o.step, |o| o.p50_ms),
        });
    }
    lines_vs_load(
        area,
        run,
        "Latency per operation against load",
        "latency (ms)",
        1.0,
        &lines,
    )
}

/// Per operation (solid) and per scenario's iterations (dashed), the error rate in percent
/// against load.
fn error_rates(area: &Area<'_>, run: &RunSummary) -> Drawn {
    let loads = loads_by_step(run);
    let mut lines = Vec::new();
    for (i, name) in operations(run).into_iter().enumerate() {
        lines.push(Line {
            label: name.to_owned(),
            color: series_color(i),
            dashed: false,
            points: at_load(
                &loads,
                &op_rows(run, name),
                |o| o.step,
                |o| Some(o.error_rate * 100.0),
            ),
        });
    }
    let first = lines.len();
    for (i, name) in scenarios(run).into_iter().enumerate() {
        lines.push(Line {
            label: format!("scenario {name}"),
            color: series_color(first + i),
            dashed: true,
            points: at_load(
                &loads,
                &iteration_rows(run, name),
                |r| r.step,
                |r| Some(r.error_rate * 100.0),
            ),
        });
    }
    lines_vs_load(
        area,
        run,
        "Error rate per operation and scenario against load",
        "error rate (%)",
        1.0,
        &lines,
    )
}

/// Per scenario, iterations completed per second (solid, left axis) and the p99 of an
/// iteration (dashed, right axis) against load.
fn scenarios_vs_load(area: &Area<'_>, run: &RunSummary) -> Drawn {
    let loads = loads_by_step(run);
    let steps = load_steps(run);
    type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>, Vec<(f64, f64)>);
    let series: Vec<Series<'_>> = scenarios(run)
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let rows = iteration_rows(run, name);
            (
                name,
                series_color(i),
                at_load(&loads, &rows, |r| r.step, |r| Some(r.completed_per_s)),
                at_load(&loads, &rows, |r| r.step, |r| r.p99_ms),
            )
        })
        .collect();
    let mut chart = dual_chart(
        area,
        "Scenario iterations against load",
        load_axis(run, &steps),
        (
            axis_top(series.iter().map(|s| s.2.as_slice()), 1.0),
            axis_top(series.iter().map(|s| s.3.as_slice()), 1.0),
        ),
        (
            load_label(run.knee.model),
            "iterations completed per second",
            LATENCY_MS,
        ),
        |m| {
            m.light_line_style(WHITE).x_label_formatter(&load_tick);
        },
    )?;
    if series.iter().all(|s| s.2.is_empty()) {
        return note(area, "no iteration measured against load");
    }
    for (name, color, rate, p99) in series {
        chart
            .draw_series(LineSeries::new(rate, color.stroke_width(3)))?
            .label(format!("{name}: iterations/s"))
            .legend(line_key(color, 3));
        chart
            .draw_secondary_series(DashedLineSeries::new(p99, 6, 4, color.stroke_width(2)))?
            .label(format!("{name}: p99 ms"))
            .legend(line_key(color, 2));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    Ok(())
}

/// Every plot of a run, in the order report.html shows them.
pub(super) fn all(
    run: &RunSummary,
    rows: &[TimeseriesRow],
    hists: &BTreeMap<u32, Histogram<u64>>,
    resources: &[ResourcePoint],
) -> Result<Vec<Plot>, ReportError> {
    let mut plots = vec![
        draw(
            "throughput.svg",
            "Throughput and latency against load",
            |a| throughput_vs_load(a, run),
        )?,
        draw("usl.svg", "Universal Scalability Law", |a| {
            usl_curve(a, run)
        })?,
        draw("latency-spectrum.svg", "Latency percentile spectrum", |a| {
            spectrum(a, run, hists)
        })?,
        draw("anomalies.svg", "Anomalies and rejections", |a| {
            anomalies(a, run)
        })?,
        draw("timeseries.svg", "Time series", |a| timeseries(a, rows))?,
    ];
    if !resources.is_empty() {
        plots.push(draw(RESOURCES_SVG, "The server's resources", |a| {
            server_resources(a, resources)
        })?);
    }
    if by_operation(run) {
        plots.push(draw(OPS_LATENCY_SVG, "Latency per operation", |a| {
            ops_latency(a, run)
        })?);
        plots.push(draw(
            ERROR_RATES_SVG,
            "Error rate per operation and scenario",
            |a| error_rates(a, run),
        )?);
    }
    if !scenarios(run).is_empty() {
        plots.push(draw(SCENARIOS_SVG, "Scenario iterations", |a| {
            scenarios_vs_load(a, run)
        })?);
    }
    Ok(plots)
}

/// The plots drawn only when the run is broken down by operation or has scenarios.
pub(super) const OPS_LATENCY_SVG: &str = "ops-latency.svg";
pub(super) const ERROR_RATES_SVG: &str = "error-rates.svg";
pub(super) const SCENARIOS_SVG: &str = "scenarios.svg";
/// Drawn only when the server was watched.
pub(super) const RESOURCES_SVG: &str = "resources.svg";
