//! The plots of report.html, drawn with plotters' SVG backend from the run folder's own data:
//! throughput and latency against load with the knee marked, the USL curve over the measured
//! points, the latency percentile spectrum of every step, anomalies and rejections per step,
//! the per-second time series, and, with several operations or any scenario, latency and
//! error rate per operation and iterations per scenario against load.

use super::terminal::{by_operation, iteration_rows, load_phrase, op_rows, operations, scenarios};
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
/// The least top of a count axis (before headroom): plotters then ticks whole counts.
const MIN_COUNT: u64 = 6;

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

/// Draws the mesh of every plot: both axis descriptions in the one label font, every tick as
/// [`tick`] writes it; `extra` adds what one plot's axes need beyond that (tick counts, other
/// formats, no light lines).
fn mesh<'a, X, Y>(
    chart: &mut Chart<'a, X, Y>,
    x_desc: &str,
    y_desc: &str,
    extra: impl FnOnce(&mut MeshStyle<'a, '_, X, Y, SVGBackend<'a>>),
) -> Drawn
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let spec = chart.as_coord_spec();
    let (x_top, y_top) = (reach(spec.x_spec().range()), reach(spec.y_spec().range()));
    let x_tick = move |v: &f64| tick(*v, x_top);
    let y_tick = move |v: &f64| tick(*v, y_top);
    let mut m = chart.configure_mesh();
    m.x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 13))
        .x_label_formatter(&x_tick)
        .y_label_formatter(&y_tick);
    extra(&mut m);
    m.draw()?;
    Ok(())
}

/// The largest magnitude an axis reaches.
fn reach(range: std::ops::Range<f64>) -> f64 {
    range.start.abs().max(range.end.abs())
}

/// An axis tick as a person writes it: no needless `.0` (`900`, not `900.0`), the thousands
/// separated (`12,500`), and on an axis reaching 100,000 or more in thousands (`150k`), a
/// million or more in millions (`1.5M`); `top`, the axis's largest magnitude, picks the form
/// so that every tick of one axis is written alike. Small values keep two significant digits
/// (`0.25`, `0.0015`).
pub(super) fn tick(v: f64, top: f64) -> String {
    if v == 0.0 || v.abs() < top.abs() * 1e-9 {
        return "0".to_owned();
    }
    let (scaled, suffix) = if top >= 1e6 {
        (v / 1e6, "M")
    } else if top >= 1e5 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let decimals = if scaled.abs() >= 1.0 {
        2
    } else {
        ((-scaled.abs().log10()).ceil() as usize + 1).min(6)
    };
    let text = format!("{scaled:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    let (sign, digits) = text.strip_prefix('-').map_or(("", text), |t| ("-", t));
    let (whole, fraction) = digits.split_once('.').map_or((digits, ""), |(w, f)| (w, f));
    let dot = if fraction.is_empty() { "" } else { "." };
    format!("{sign}{}{dot}{fraction}{suffix}", thousands(whole))
}

/// A count with its thousands separated: `16674` → `16,674`.
pub(super) fn count(n: u64) -> String {
    thousands(&n.to_string())
}

/// A string of digits with a comma before every third from the right.
fn thousands(digits: &str) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A chart with a left axis from 0 to `top` and a right latency axis from 0 to `top_ms` ms,
/// its mesh and both axes drawn; `x` makes the one x axis, for each side.
fn dual_chart<'b, X>(
    area: &Area<'b>,
    caption: &str,
    x: impl Fn() -> X,
    (top, top_ms): (f64, f64),
    (x_desc, y_desc, y2_desc): (&str, &str, &str),
    extra: impl FnOnce(&mut MeshStyle<'b, '_, X::CoordDescType, RangedCoordf64, SVGBackend<'b>>),
) -> Result<DualChart<'b, X::CoordDescType>, Box<dyn Error>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = frame(area, caption)
        .right_y_label_area_size(60)
        .build_cartesian_2d(x(), 0.0..top)?
        .set_secondary_coord(x(), 0.0..top_ms);
    mesh(&mut chart, x_desc, y_desc, extra)?;
    let y2_tick = move |v: &f64| tick(*v, top_ms);
    chart
        .configure_secondary_axes()
        .y_desc(y2_desc)
        .label_style((FONT, 13))
        .y_label_formatter(&y2_tick)
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
        Some(Model::Open) => "offered rate (req/s, log scale)",
        _ => "concurrency (clients, log scale)",
    }
}

/// The load axis of every plot against load: logarithmic around the steps' loads, ticked at
/// each step's load (a sweep of 2, 4, 8, 12 shows 12 too).
fn load_axis(
    steps: &[&StepSummary],
) -> impl AsRangedCoord<CoordDescType: ValueFormatter<f64>, Value = f64> {
    let (lo, hi) = span(steps.iter().map(|s| s.load()), f64::MIN_POSITIVE);
    let mut loads: Vec<f64> = steps.iter().map(|s| s.load()).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    (lo / 1.3..hi * 1.3).log_scale().with_key_points(loads)
}

/// What a latency of the judged figures is of: an iteration's, a call's or a request's.
fn latency_of(unit: &str) -> &'static str {
    match unit {
        "iterations/s" => "iteration ",
        "calls/s" => "call ",
        _ => "",
    }
}

/// Throughput and latency against load in the unit the knee judged (docs/metrics.md): with
/// scenarios iterations, with calls of several requests calls, else requests; where that is
/// not requests, the requests' own rate is drawn thin and grey, named as not judged.
fn throughput_vs_load(area: &Area<'_>, run: &RunSummary) -> Drawn {
    let unit = super::terminal::rate_unit(run);
    let judged: Vec<StepSummary> = load_steps(run)
        .into_iter()
        .map(StepSummary::judged)
        .collect();
    let steps: Vec<&StepSummary> = judged.iter().collect();
    let raw = load_steps(run);
    let requests_too = unit != "req/s";
    // Headroom above the data keeps the legend clear of it.
    let rates = steps.iter().map(|s| s.throughput_rps);
    let rates = rates.chain(
        raw.iter()
            .filter(|_| requests_too)
            .map(|s| s.throughput_rps),
    );
    let top_rps = rates.fold(1.0, f64::max) * HEADROOM;
    let top_ms = steps.iter().filter_map(|s| s.p99_ms).fold(1.0, f64::max) * HEADROOM;
    let y_desc = if requests_too {
        format!("throughput ({unit}; grey: req/s)")
    } else {
        format!("throughput ({unit})")
    };
    let mut chart = dual_chart(
        area,
        "Throughput and latency against load",
        || load_axis(&steps),
        (top_rps, top_ms),
        (load_label(run.knee.model), &y_desc, LATENCY_MS),
        |m| {
            m.light_line_style(WHITE);
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
    let judged_label = if requests_too {
        format!("{unit} (what the knee judges)")
    } else {
        format!("throughput ({unit})")
    };
    chart
        .draw_series(LineSeries::new(
            pts(&|s| Some(s.throughput_rps)),
            BLUE_.stroke_width(3),
        ))?
        .label(judged_label)
        .legend(line_key(BLUE_, 3));
    if requests_too {
        chart
            .draw_series(DashedLineSeries::new(
                raw.iter().map(|s| (s.load(), s.throughput_rps)),
                4,
                4,
                GREY_.stroke_width(1),
            ))?
            .label("req/s (every request; not judged)")
            .legend(line_key(GREY_, 1));
    }
    chart.draw_series(verdict_dots(&steps))?;
    let of = latency_of(unit);
    for (name, color, f) in [
        (
            format!("{of}p50 (ms)"),
            GREEN_,
            (|s: &StepSummary| s.p50_ms) as fn(&StepSummary) -> Option<f64>,
        ),
        (format!("{of}p99 (ms)"), ORANGE_, |s: &StepSummary| s.p99_ms),
    ] {
        chart
            .draw_secondary_series(LineSeries::new(pts(&f), color.stroke_width(2)))?
            .label(name)
            .legend(line_key(color, 2));
    }
    let k = &run.knee;
    let at = |step: Option<u32>| steps.iter().find(|s| Some(s.step) == step);
    let rate_at = |step| {
        at(step).map_or_else(String::new, |s| {
            format!(", {} {unit}", super::terminal::rps(s.throughput_rps))
        })
    };
    let markers = [
        (
            k.saturation_point,
            GOLD_,
            "saturation point",
            rate_at(k.saturation_step),
        ),
        (
            k.failure_point.as_ref().map(|f| f.load),
            RED_,
            "failure point",
            String::new(),
        ),
    ];
    for (load, color, name, rate) in markers {
        if let Some(l) = load {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(l, 0.0), (l, top_rps)],
                    8,
                    5,
                    color.stroke_width(2),
                ))?
                .label(format!("{name}: {}{rate}", load_phrase(k.model, l)))
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
    // Without a closed-loop step, a few clients wide: whole clients on the empty axis.
    let least = if steps.is_empty() { 8.0 } else { 1.0 };
    let max_n = steps.iter().map(|s| s.load()).fold(least, f64::max);
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
        * HEADROOM;
    let mut chart =
        frame(area, "Universal Scalability Law fit").build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    mesh(
        &mut chart,
        "concurrency (clients)",
        &format!("throughput ({unit})"),
        |_| {},
    )?;
    if let Some(f) = fit {
        chart
            .draw_series(LineSeries::new(samples, PURPLE_.stroke_width(2)))?
            .label(format!(
                "USL: sigma {:.4}, kappa {:.6}, lambda {} {unit} per client (R² {:.3})",
                f.sigma,
                f.kappa,
                super::terminal::rps(f.lambda),
                f.r_squared
            ))
            .legend(line_key(PURPLE_, 2));
        if let (Some(n), Some(x)) = (f.peak_concurrency, f.peak_throughput_rps) {
            chart
                .draw_series(std::iter::once(TriangleMarker::new(
                    (n, x),
                    8,
                    PURPLE_.filled(),
                )))?
                .label(format!(
                    "predicted peak: {} {unit} at {}",
                    super::terminal::rps(x),
                    load_phrase(Some(Model::Closed), (n * 10.0).round() / 10.0)
                ))
                .legend(|(x, y)| TriangleMarker::new((x + 10, y), 6, PURPLE_.filled()));
        }
    }
    chart
        .draw_series(verdict_dots(&steps))?
        .label("measured (colour: verdict)")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, GREEN_.filled()));
    // Above the data (the headroom): the curve rises from the lower left and the failed
    // steps' dots sit low on the right, so the upper left is free; without a fit the note
    // takes it.
    let corner = if fit.is_some() {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::UpperRight
    };
    legend(&mut chart, corner, 13)?;
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

/// The ticks of a log axis over `[lo, hi]`: 1, 2 and 5 times each power of ten in it; every
/// whole multiple where that leaves fewer than four, the powers alone where it is more than
/// twelve.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let marks = |multiples: &[f64]| -> Vec<f64> {
        let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (first..=last)
            .flat_map(|e| multiples.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    match marks(&[1.0, 2.0, 5.0]) {
        few if few.len() < 4 => marks(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
        many if many.len() > 12 => marks(&[1.0]),
        ticks => ticks,
    }
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
        .build_cartesian_2d(0.0..x_max, {
            let (lo, hi) = (lo / 1.3, hi * 1.3);
            (lo..hi).log_scale().with_key_points(log_ticks(lo, hi))
        })?;
    mesh(
        &mut chart,
        "percentile (%)",
        "latency (ms, log scale)",
        |m| {
            m.x_labels(x_max as usize + 1)
                .x_label_formatter(&nines_label)
                .light_line_style(WHITE);
        },
    )?;
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
            |l| format!("step {step} ({})", load_phrase(run.knee.model, *l)),
        );
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(label)
            .legend(line_key(color, 2));
    }
    // Lower right: latency rises with the percentile, and few steps reach the last nines, so
    // that corner is the emptiest (the upper left holds the slow steps' first rise).
    legend(&mut chart, SeriesLabelPosition::LowerRight, 12)?;
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
    // At least a few counts high, so the ticks are whole counts.
    let top = steps
        .iter()
        .flat_map(|s| s.1)
        .max()
        .unwrap_or(0)
        .max(MIN_COUNT) as f64
        * HEADROOM;
    let mut chart = frame(area, "Anomalies, rejections and losses per step")
        .build_cartesian_2d(0.5..n + 0.5, 0.0..top)?;
    mesh(&mut chart, "step (number)", "count (per step)", |m| {
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
                        count(counts[k]),
                        (f64::from(*step) + left, counts[k] as f64 + top * 0.02),
                        (FONT, 11).into_font().color(&color),
                    )
                }),
        )?;
    }
    if steps.iter().all(|s| s.1 == [0, 0, 0]) {
        // No bar to name: the note alone, where the legend would be.
        note(
            area,
            "none: every step was free of anomalies, rejections and losses",
        )?;
    } else {
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)?;
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
        .max(MIN_COUNT) as f64
        * HEADROOM
        * 1.2;
    let top_ms = rows.iter().filter_map(|r| r.p99_ms).fold(1.0, f64::max) * HEADROOM;
    let mut chart = dual_chart(
        area,
        "Per second",
        || 0.0..t_max,
        (top, top_ms),
        ("time since the start (s)", "count (per second)", LATENCY_MS),
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
            // Below the legend (upper right), above the counts (at most 1 / 1.74 of the top).
            (*t + 0.1, top * 0.66),
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
        || 0.0..t_max,
        (top, top_cpu),
        (
            "time since the start (s)",
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
/// left for the legend, but never above `max_top`.
fn lines_vs_load(
    area: &Area<'_>,
    run: &RunSummary,
    caption: &str,
    y_desc: &str,
    (min_top, max_top): (f64, f64),
    lines: &[Line],
) -> Drawn {
    let steps = load_steps(run);
    let top = axis_top(lines.iter().map(|l| l.points.as_slice()), min_top).min(max_top);
    let mut chart = frame(area, caption).build_cartesian_2d(load_axis(&steps), 0.0..top)?;
    mesh(&mut chart, load_label(run.knee.model), y_desc, |m| {
        m.light_line_style(WHITE);
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
        (1.0, f64::INFINITY),
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
        // No rate above 100%, even where the legend needs headroom.
        (1.0, 100.0),
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
        || load_axis(&steps),
        (
            axis_top(series.iter().map(|s| s.2.as_slice()), 1.0),
            axis_top(series.iter().map(|s| s.3.as_slice()), 1.0),
        ),
        (
            load_label(run.knee.model),
            "iterations completed (iterations/s)",
            LATENCY_MS,
        ),
        |m| {
            m.light_line_style(WHITE);
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

#[cfg(test)]
mod tests {
    use super::{count, log_ticks, tick};

    #[test]
    fn ticks_are_written_as_a_person_writes_them() {
        // Integers without ".0", the thousands separated.
        assert_eq!(tick(900.0, 1000.0), "900");
        assert_eq!(tick(0.0, 1000.0), "0");
        assert_eq!(tick(2500.0, 5000.0), "2,500");
        assert_eq!(tick(12345.0, 20000.0), "12,345");
        assert_eq!(tick(99999.0, 99999.0), "99,999");
        // An axis reaching 100,000 is in thousands, a million in millions: every tick alike.
        assert_eq!(tick(100000.0, 150000.0), "100k");
        assert_eq!(tick(20000.0, 150000.0), "20k");
        assert_eq!(tick(12500.0, 150000.0), "12.5k");
        assert_eq!(tick(1_500_000.0, 2e6), "1.5M");
        assert_eq!(tick(500_000.0, 2e6), "0.5M");
        assert_eq!(tick(1_000_000.0, 1e6), "1M");
        // Fractions: float noise gone, small values keep two significant digits.
        assert_eq!(tick(0.6000000001, 1.0), "0.6");
        assert_eq!(tick(2.5, 3.0), "2.5");
        assert_eq!(tick(1.25, 3.0), "1.25");
        assert_eq!(tick(0.25, 1.0), "0.25");
        assert_eq!(tick(0.001, 0.01), "0.001");
        assert_eq!(tick(0.0015, 0.01), "0.0015");
        // Float noise around zero on an axis is zero; negatives keep their sign.
        assert_eq!(tick(1e-13, 1000.0), "0");
        assert_eq!(tick(-1500.0, 2000.0), "-1,500");
        // Counts are exact, however large.
        assert_eq!(count(16674), "16,674");
        assert_eq!(count(150_000), "150,000");
        assert_eq!(count(999), "999");
    }

    #[test]
    fn log_axes_tick_one_two_five_or_every_multiple() {
        assert_eq!(log_ticks(0.8, 60.0), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(
            log_ticks(0.001, 1e5).len(),
            9,
            "8 decades: the powers of ten alone"
        );
        // Less than a decade: every multiple, so the axis still reads.
        assert_eq!(
            log_ticks(150.0, 1100.0),
            [
                200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0
            ]
        );
    }
}
