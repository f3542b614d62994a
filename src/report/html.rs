//! report.html: one self-contained page (inline CSS and SVG, no script, no external resource,
//! a Content-Security-Policy that forbids every fetch) and the same plots as SVG files beside
//! it. Drawn from the run folder alone: summary.json's figures, timeseries.csv, latency.hlog.

use super::terminal::{
    by_operation, callouts, error_codes, failures_line, generator_lines, iteration_rows,
    knee_facts, knee_sentence, ms, num, polls, rps, scenarios, shown_op_rows, status_phrase,
    step_list, usl_line,
};
use super::{ReportError, RunSummary, plots, read_timeseries, step_histograms};
use crate::analysis::pct;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use std::fs;
use std::path::Path;

/// Forbids every fetch: no script, image, font, frame or connection; only the inline styles.
pub(super) const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

pub(super) const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
.meta { color: #666; }
.knee { font-size: 1.15rem; border-left: 4px solid #1f77b4; padding: .4rem .8rem; background: #f4f8fb; }
figure { margin: 1.5rem 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #666; font-size: .9rem; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; font-size: .8rem; }
th, td { padding: .25rem .5rem; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.ok { color: #2ca02c; } .saturated { color: #b8860b; font-weight: bold; } .failed { color: #d62728; font-weight: bold; }
.pass { color: #2ca02c; } .fail { color: #d62728; font-weight: bold; }
.checks { display: flex; flex-wrap: wrap; gap: .6rem; margin: 1rem 0; }
.check { border: 1px solid #ddd; border-top: 4px solid #999; padding: .4rem .6rem; width: 14rem; font-size: .85rem; }
.check.st-pass { border-top-color: #2ca02c; } .check.st-warn { border-top-color: #b8860b; }
.check.st-fail { border-top-color: #d62728; } .check.st-skipped { color: #777; }
.check b { display: block; }
pre { background: #f6f6f6; padding: .8rem; overflow-x: auto; }
";

fn steps_table(run: &RunSummary) -> Markup {
    html! {
        table {
            tr {
                th { "step" } th { "load" } th { "duration s" } th { "requests" } th { "req/s" }
                th { "goodput/s" } th { "error rate" } th { "p50 ms" } th { "p90 ms" }
                th { "p99 ms" } th { "p99.9 ms" } th { "max ms" } th { "in flight max" }
                th { "anomalies" } th { "rejected" } th { "verdict" }
            }
            @for rec in &run.steps {
                @let s = &rec.figures;
                tr {
                    td { (s.step) }
                    td { (num(s.load())) }
                    td { (format!("{:.1}", s.duration_s)) }
                    td { (s.requests) }
                    td { (rps(s.throughput_rps)) }
                    td { (rps(s.goodput_rps)) }
                    td { (pct(s.error_rate)) }
                    td { (ms(s.p50_ms)) }
                    td { (ms(s.p90_ms)) }
                    td { (ms(s.p99_ms)) }
                    td { (ms(s.p999_ms)) }
                    td { (ms(s.max_ms)) }
                    td { (s.in_flight_max) }
                    td { (rec.anomalies) }
                    td { (rec.rejected) }
                    td class=(s.verdict.as_str()) {
                        (s.verdict.as_str())
                        @if s.interrupted { " (cut short)" }
                        @if s.generator_bound { " (generator-bound)" }
                    }
                }
            }
        }
    }
}

/// A row per operation and step (the `-` rows only where they count something).
fn ops_table(run: &RunSummary) -> Markup {
    html! {
        table {
            tr {
                th { "operation" } th { "step" } th { "requests" } th { "req/s" }
                th { "error rate" } th { "p50 ms" } th { "p90 ms" } th { "p99 ms" }
                th { "max ms" } th { "anomalies" } th { "rejected" }
            }
            @for o in shown_op_rows(run) {
                tr {
                    td { (o.op) }
                    td { (o.step) }
                    td { (o.requests) }
                    td { (rps(o.throughput_rps)) }
                    td { (pct(o.error_rate)) }
                    td { (ms(o.p50_ms)) }
                    td { (ms(o.p90_ms)) }
                    td { (ms(o.p99_ms)) }
                    td { (ms(o.max_ms)) }
                    td { (o.anomalies()) }
                    td { (o.rejected()) }
                }
            }
        }
    }
}

/// A row per scenario and step (whole iterations), then each scenario's top failure reasons.
fn scenarios_table(run: &RunSummary) -> Markup {
    let names = scenarios(run);
    html! {
        table {
            tr {
                th { "scenario" } th { "step" } th { "started" } th { "iterations/s" }
                th { "completed" } th { "failed" } th { "error rate" } th { "interrupted" }
                th { "p50 ms" } th { "p99 ms" } th { "polls/iteration" }
                th { "assertion failures" }
            }
            @for name in &names {
                @for r in iteration_rows(run, name) {
                    tr {
                        td { (r.scenario) }
                        td { (r.step) }
                        td { (r.started) }
                        td { (rps(r.completed_per_s)) }
                        td { (r.completed) }
                        td { (r.failed) }
                        td { (pct(r.error_rate)) }
                        td { (r.interrupted) }
                        td { (ms(r.p50_ms)) }
                        td { (ms(r.p99_ms)) }
                        td { (polls(r.polls_mean)) }
                        td { (r.assertion_failures) }
                    }
                }
            }
        }
        ul {
            @for name in &names {
                @if let Some(line) = failures_line(&iteration_rows(run, name)) {
                    li { strong { (name) } " failed: " (line) }
                }
            }
        }
    }
}

fn page(run: &RunSummary, plots: &[plots::Plot]) -> Markup {
    let settings = serde_json::to_string_pretty(&run.settings).unwrap_or_default();
    let criteria = &run.criteria;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "mcpload: " (run.name) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "mcpload run: " (run.name) }
                p class="meta" {
                    (status_phrase(run.status))
                    @if let Some(why) = &run.status_reason { " (" (why) ")" }
                    " · started " (run.started_at)
                    @if let Some(end) = &run.finished_at { " · finished " (end) }
                    @if let Some(rev) = &run.protocol_revision { " · MCP protocol " (rev) }
                    " · mcpload " (run.mcpload_version)
                }
                @if run.checks.iter().any(|c| c.status != crate::analysis::checks::CheckStatus::Skipped) {
                    div class="checks" {
                        @for c in &run.checks {
                            div class=(format!("check st-{}", c.status.as_str())) {
                                b { (c.label()) ": " (c.status.as_str()) }
                                (c.reason)
                            }
                        }
                    }
                }
                p class="knee" { strong { "Knee: " } (knee_sentence(run)) @if let Some(cpu) = &run.knee_cpu { "; at the knee, " (cpu) } }
                ul {
                    @for f in knee_facts(run) { li { (f) } }
                    @if let Some(u) = usl_line(run) { li { "USL: " (u) } }
                    @if let Some(f) = &run.fleet { li { "Fleet: " (f.reason) } }
                }
                @for p in plots {
                    figure {
                        // The SVG comes from plotters, which escapes the text it draws.
                        (PreEscaped(&p.svg))
                        figcaption { (p.title) " (also saved as " code { (p.file) } ")" }
                    }
                }
                h2 { "Steps" }
                div class="wide" { (steps_table(run)) }
                @let limited = generator_lines(run);
                @if !limited.is_empty() {
                    h2 { "Generator" }
                    ul {
                        @for line in &limited { li class="saturated" { (line) } }
                        li { (crate::metrics::BOUND_HINT) "." }
                    }
                }
                @if by_operation(run) {
                    h2 { "By operation" }
                    div class="wide" { (ops_table(run)) }
                    @if !scenarios(run).is_empty() {
                        h2 { "By scenario (whole iterations)" }
                        div class="wide" { (scenarios_table(run)) }
                    }
                }
                @let called = callouts(run);
                @if !called.is_empty() {
                    h2 { "Anomalies and losses" }
                    ul {
                        @for c in &called {
                            li {
                                code { (c.counter) } " " (c.total) " in " (step_list(&c.steps)) ": " (c.hint) "."
                                @if let Some((step, cause)) = &c.cause {
                                    br; "First in step " (step) ": " code { (cause) }
                                }
                            }
                        }
                    }
                }
                (super::correctness::correctness_html(
                    &super::correctness::run_totals(run),
                    &super::correctness::run_findings(run),
                ))
                @let codes = error_codes(run);
                @if !codes.is_empty() {
                    h2 { "Error responses by code" }
                    p { (codes.join(", ")) }
                }
                @if !run.gates.is_empty() {
                    h2 { "Gates" }
                    ul {
                        @for g in &run.gates {
                            li {
                                @if g.holds { span class="pass" { "pass " } } @else { span class="fail" { "FAIL " } }
                                (g.detail)
                            }
                        }
                    }
                }
                h2 { "Stop criteria" }
                p {
                    "error rate above " (pct(criteria.max_error_rate))
                    @if let Some(slo) = criteria.p99_slo_ms { "; p99 above " (slo) " ms" }
                    @if criteria.fail_on_anomaly { "; any unknown_id, null_id, duplicate_id, both_result_error or invalid_jsonrpc" }
                }
                h2 { "Settings" }
                pre { (settings) }
                @if let Some(p) = &run.profile_file { p { "Profile as run: " code { (p) } } }
            }
        }
    }
}

/// Draws every plot from the folder's files, saves each as an SVG file and writes
/// report.html around them.
pub(super) fn write_report(dir: &Path, run: &RunSummary) -> Result<(), ReportError> {
    let rows = read_timeseries(dir)?;
    let hists = step_histograms(dir)?;
    let resources = super::read_resources(dir)?;
    let plots = plots::all(run, &rows, &hists, &resources)?;
    for p in &plots {
        let path = dir.join(p.file);
        fs::write(&path, &p.svg).map_err(|e| ReportError::io(&path, e))?;
    }
    let path = dir.join(super::REPORT_HTML);
    fs::write(&path, page(run, &plots).into_string()).map_err(|e| ReportError::io(&path, e))
}
