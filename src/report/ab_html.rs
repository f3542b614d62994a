//! The A/B folder's report.html: the answer, the forest plots (each figure's interval drawn
//! against its noise band, one row per figure), the table of every figure, and the runs.

use super::ReportError;
use super::ab::{AbRecord, answer, change, design_phrase, place, value, verdict_text};
use super::html::{CSP, STYLE};
use crate::analysis::ab::{AbVerdict, Figure, FigureVerdict};
use crate::analysis::pct;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use std::fmt::Write;
use std::fs;
use std::path::Path;

/// What the A/B page adds to the run report's style: the answer box, verdict colours.
const AB_STYLE: &str = "
.answer { font-size: 1.15rem; border-left: 4px solid #1f77b4; padding: .4rem .8rem; background: #f4f8fb; }
td.l { text-align: left; }
.regressed { color: #d62728; font-weight: bold; } .improved { color: #2ca02c; font-weight: bold; }
.equivalent { color: #222; } .inconclusive { color: #b8860b; }
";

/// A row of a forest plot: an estimate and its interval, and the band it is judged against.
struct ForestRow {
    label: String,
    estimate: f64,
    lo: f64,
    hi: f64,
    band_lo: f64,
    band_hi: f64,
    verdict: AbVerdict,
}

fn colour(v: AbVerdict) -> &'static str {
    match v {
        AbVerdict::Regressed => "#d62728",
        AbVerdict::Improved => "#2ca02c",
        AbVerdict::Equivalent => "#1f77b4",
        AbVerdict::Inconclusive => "#b8860b",
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG forest plot: x in `unit`, a zero line, each row's band shaded, its interval a line
/// and its estimate a dot, coloured by verdict.
fn forest(rows: &[ForestRow], unit: &str) -> String {
    const LABEL_W: f64 = 330.0;
    const PLOT_W: f64 = 560.0;
    const ROW_H: f64 = 22.0;
    const TOP: f64 = 14.0;
    const AXIS_H: f64 = 34.0;
    let mut lo = rows.iter().map(|r| r.lo.min(r.band_lo)).fold(0.0, f64::min);
    let mut hi = rows.iter().map(|r| r.hi.max(r.band_hi)).fold(0.0, f64::max);
    let pad = ((hi - lo) * 0.08).max(1e-9);
    lo -= pad;
    hi += pad;
    let x = |v: f64| LABEL_W + (v - lo) / (hi - lo) * PLOT_W;
    let height = TOP + ROW_H * rows.len() as f64 + AXIS_H;
    let width = LABEL_W + PLOT_W + 20.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" \
         width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    for (i, r) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let mid = y + ROW_H / 2.0;
        let c = colour(r.verdict);
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{ROW_H}\" fill=\"#e8e8e8\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"{c}\" stroke-width=\"2\"/>\
             <circle cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"4\" fill=\"{c}\"/>",
            x(r.band_lo),
            x(r.band_hi) - x(r.band_lo),
            LABEL_W - 8.0,
            mid + 4.0,
            escape(&r.label),
            x(r.lo),
            x(r.hi),
            x(r.estimate),
        );
    }
    let bottom = TOP + ROW_H * rows.len() as f64;
    let _ = write!(
        svg,
        "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{bottom:.1}\" stroke=\"#444\" stroke-dasharray=\"3,3\"/>\
         <line x1=\"{LABEL_W}\" x2=\"{1:.1}\" y1=\"{bottom:.1}\" y2=\"{bottom:.1}\" stroke=\"#444\"/>",
        x(0.0),
        LABEL_W + PLOT_W
    );
    for k in 0..=4 {
        let v = lo + (hi - lo) * f64::from(k) / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{bottom:.1}\" y2=\"{1:.1}\" stroke=\"#444\"/>\
             <text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{3}</text>",
            x(v),
            bottom + 4.0,
            bottom + 17.0,
            tick(v, unit)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#666\">B vs A ({unit}); shaded: the band</text></svg>",
        LABEL_W + PLOT_W / 2.0,
        bottom + 31.0
    );
    svg
}

/// An axis label: `+5%`, `-0.2pt`.
fn tick(v: f64, unit: &str) -> String {
    let s = format!("{v:+.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let s = if s == "+" || s == "-" || s == "-0" || s == "+0" {
        "0"
    } else {
        s
    };
    if unit == "%" {
        format!("{s}%")
    } else {
        format!("{s}pt")
    }
}

fn label(f: &FigureVerdict) -> String {
    format!("{} {}", place(f), f.figure.as_str())
}

/// The ratio figures in percent change, the band [1/(1+δ) − 1, δ].
fn ratio_rows(r: &AbRecord) -> Vec<ForestRow> {
    let pctc = |x: f64| (x - 1.0) * 100.0;
    r.figures
        .iter()
        .filter_map(|f| {
            Some(ForestRow {
                label: label(f),
                estimate: pctc(f.ratio?),
                lo: pctc(f.ratio_lo?),
                hi: pctc(f.ratio_hi?),
                band_lo: pctc(1.0 / (1.0 + r.band)),
                band_hi: r.band * 100.0,
                verdict: f.verdict,
            })
        })
        .collect()
}

/// The error rates in percentage points, each against its own margin.
fn rate_rows(r: &AbRecord) -> Vec<ForestRow> {
    r.figures
        .iter()
        .filter(|f| f.figure == Figure::ErrorRate)
        .filter_map(|f| {
            let m = f.margin? * 100.0;
            Some(ForestRow {
                label: label(f),
                estimate: f.diff? * 100.0,
                lo: f.diff_lo? * 100.0,
                hi: f.diff_hi? * 100.0,
                band_lo: -m,
                band_hi: m,
                verdict: f.verdict,
            })
        })
        .collect()
}

fn page(r: &AbRecord) -> Markup {
    let (ratios, rates) = (ratio_rows(r), rate_rows(r));
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                title { "mcpload " (r.command) ": " (r.verdict.as_str()) }
                style { (PreEscaped(STYLE)) (PreEscaped(AB_STYLE)) }
            }
            body {
                h1 { "mcpload " (r.command) }
                p class="meta" { "A " code { (r.a) } " → B " code { (r.b) } br;
                    (design_phrase(r)) "; band ±" (pct(r.band)) ", α " (r.alpha) }
                p class="answer" { (answer(r)) }
                @if !ratios.is_empty() {
                    h2 { "Throughput and latency" }
                    figure {
                        (PreEscaped(forest(&ratios, "%")))
                        figcaption { "Each row: B's change against A with its 90% interval \
                            (each end a one-sided 95% bound). Regressed or improved when \
                            the interval lies wholly past the band (Holm-adjusted over every \
                            figure), equivalent when it lies inside." }
                    }
                }
                @if !rates.is_empty() {
                    h2 { "Error rates" }
                    figure {
                        (PreEscaped(forest(&rates, "pt")))
                        figcaption { "B − A in percentage points, each against its margin: \
                            the band times A's rate, or 3 / A's requests (the rule of three) \
                            when that is larger." }
                    }
                }
                h2 { "Every figure" }
                table {
                    tr { th { "where" } th { "figure" } th { "n" } th { "method" } th { "A" }
                         th { "B" } th { "B vs A [90% CI]" } th { "p worse (Holm)" }
                         th { "p value" } th { "verdict" } }
                    @for f in &r.figures {
                        tr {
                            td { (place(f)) } td class="l" { (f.figure.as_str()) } td { (f.n) }
                            td class="l" { (f.method) }
                            td { (value(f.figure, f.a)) } td { (value(f.figure, f.b)) }
                            td { (change(f)) } td { (format!("{:.3}", f.p_worse_holm)) }
                            td { (format!("{:.3}", f.p_value)) }
                            td class=(f.verdict.as_str()) { (verdict_text(r, f)) }
                        }
                    }
                }
                h2 { "Runs" }
                table {
                    tr { th { "run" } th { "side" } th { "pair" } th { "used" } th { "reason" } }
                    @for run in &r.runs {
                        tr {
                            td { (run.dir) } td class="l" { (run.side.as_str()) }
                            td { (run.pair.map_or_else(String::new, |p| p.to_string())) }
                            td { (if run.used { "yes" } else { "no" }) }
                            td class="l" { (run.reason.clone().unwrap_or_default()) }
                        }
                    }
                }
                @for w in &r.warnings { p class="meta" { "warning: " (w) } }
            }
        }
    }
}

/// Writes `dir/report.html` for an A/B record.
pub fn write_ab_html(dir: &Path, r: &AbRecord) -> Result<(), ReportError> {
    let path = dir.join(super::REPORT_HTML);
    fs::write(&path, page(r).into_string()).map_err(|e| ReportError::io(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_as_people_write_them() {
        assert_eq!(tick(5.0, "%"), "+5%");
        assert_eq!(tick(-4.76, "%"), "-4.76%");
        assert_eq!(tick(0.0, "pt"), "0pt");
    }
}
