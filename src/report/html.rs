//! report.html: one self-contained page (inline CSS and SVG, no script, no external resource,
//! a Content-Security-Policy that forbids every fetch) and the same plots as SVG files beside
//! it. Drawn from the run folder alone: summary.json's figures, timeseries.csv, latency.hlog.

use super::ci::{Outcome, run_verdict};
use super::plots::count;
use super::terminal::{
    by_operation, callouts, error_codes, failures_line, generator_hint, generator_lines,
    iteration_rows, knee_facts, knee_sentence, load_phrase, ms, num, polls, rate_unit, rps,
    scenarios, shown_op_rows, status_phrase, step_list, usl_line, worst_callout,
};
use super::{ReportError, RunSummary, plots, read_timeseries, step_histograms};
use crate::analysis::checks::{Check, CheckStatus};
use crate::analysis::pct;
use crate::metrics::{OpSummary, ScenarioSummary};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// Forbids every fetch: no script, image, font, frame or connection; only the inline styles.
pub(super) const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

pub(super) const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; overflow-wrap: anywhere; } h2 { font-size: 1.2rem; margin-top: 2rem; }
.meta { color: #666; overflow-wrap: anywhere; }
.card { border: 1px solid #ccc; border-left: 6px solid #999; padding: .6rem 1rem; margin: 1rem 0; background: #fafafa; }
.card.pass { border-left-color: #2ca02c; } .card.fail { border-left-color: #d62728; } .card.unfinished { border-left-color: #b8860b; }
.card dl { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: 0; }
.card dt { font-weight: bold; } .card dd { margin: 0; overflow-wrap: anywhere; }
.card .verdict { font-size: 1.15rem; font-weight: bold; }
figure { margin: 1.5rem 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; box-sizing: border-box; }
figcaption { color: #666; font-size: .9rem; }
.note { color: #555; font-size: .9rem; }
table { border-collapse: collapse; font-size: .8rem; }
th, td { padding: .25rem .5rem; border-bottom: 1px solid #ddd; text-align: right; overflow-wrap: anywhere; }
th { vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
details { margin: .5rem 0 1rem; } summary { cursor: pointer; color: #1f77b4; }
.more { overflow-x: auto; }
table.settings { font-size: .85rem; }
table.settings td, table.settings th { text-align: left; }
table.settings td:first-child { font-family: ui-monospace, monospace; white-space: nowrap; }
table.settings th { background: #f0f0f0; padding-top: .5rem; }
.ok { color: #2ca02c; } .saturated { color: #b8860b; font-weight: bold; } .failed { color: #d62728; font-weight: bold; }
.pass { color: #2ca02c; } .fail { color: #d62728; font-weight: bold; } .unfinished { color: #b8860b; font-weight: bold; }
.card.pass, .card.fail, .card.unfinished { color: inherit; font-weight: normal; }
.checks { display: flex; flex-wrap: wrap; gap: .6rem; margin: 1rem 0; }
.check { border: 1px solid #ddd; border-top: 4px solid #999; padding: .4rem .6rem; width: 14rem; font-size: .85rem; overflow-wrap: anywhere; }
.check.st-pass { border-top-color: #2ca02c; } .check.st-warn { border-top-color: #b8860b; }
.check.st-fail { border-top-color: #d62728; } .check.st-skipped { color: #777; }
.check b { display: block; }
li { overflow-wrap: anywhere; }
";

/// A cell of one column for one row.
type Cell<R> = fn(&R) -> Markup;

/// Where a column of a table is shown.
#[derive(Clone, Copy, PartialEq)]
enum View {
    /// Names the row: in the table and in its "more columns" view.
    Key,
    /// In the table a reader sees first.
    Main,
    /// Only in the "more columns" view, behind a `<details>`.
    More,
}

/// One column of a table: its heading, where it is shown, and its cell.
struct Col<R> {
    head: String,
    view: View,
    cell: Cell<R>,
}

fn col<R>(head: impl Into<String>, view: View, cell: Cell<R>) -> Col<R> {
    Col {
        head: head.into(),
        view,
        cell,
    }
}

fn table_of<R>(cols: &[&Col<R>], rows: &[R]) -> Markup {
    html! {
        table {
            tr { @for c in cols { th { (c.head) } } }
            @for r in rows { tr { @for c in cols { ((c.cell)(r)) } } }
        }
    }
}

/// A table of few columns that fits a narrow window, and the rest of its columns (beside
/// the row's key columns) in a `<details>` view below it.
fn split_table<R>(cols: &[Col<R>], rows: &[R]) -> Markup {
    let shown: Vec<&Col<R>> = cols.iter().filter(|c| c.view != View::More).collect();
    let more: Vec<&Col<R>> = cols.iter().filter(|c| c.view != View::Main).collect();
    let names: Vec<&str> = (more.iter())
        .filter(|c| c.view == View::More)
        .map(|c| c.head.as_str())
        .collect();
    html! {
        (table_of(&shown, rows))
        @if !names.is_empty() {
            details {
                summary { "More columns: " (names.join(", ")) }
                div class="more" { (table_of(&more, rows)) }
            }
        }
    }
}

/// A plain cell.
fn td(text: impl maud::Render) -> Markup {
    html! { td { (text) } }
}

/// A step with its figures as judged (docs/metrics.md: with scenarios the iterations', with
/// calls of several requests the calls').
struct StepRow<'a> {
    rec: &'a crate::report::StepRecord,
    judged: crate::metrics::StepSummary,
}

/// The steps: the judged figures first, every request figure in the "more" view. Where the
/// judged unit is not requests, the headings say whose figures each column holds.
fn steps_table(run: &RunSummary) -> Markup {
    let unit = rate_unit(run);
    let rows: Vec<StepRow<'_>> = (run.steps.iter())
        .map(|rec| StepRow {
            rec,
            judged: rec.figures.judged(),
        })
        .collect();
    let requests = unit == "req/s";
    let of = match unit {
        "iterations/s" => "iteration ",
        "calls/s" => "call ",
        _ => "",
    };
    let more_rate = if requests { View::Main } else { View::More };
    // The requests' latency: shown with requests judged, behind the details with iterations,
    // and not again with calls (a call's latency is its requests', docs/metrics.md).
    let latency = match unit {
        "req/s" => Some(View::Main),
        "calls/s" => None,
        _ => Some(View::More),
    };
    let mut cols: Vec<Col<StepRow<'_>>> = vec![
        col("step", View::Key, |r| td(r.rec.figures.step)),
        col("load", View::Key, |r| {
            td(load_phrase(Some(r.rec.figures.model), r.rec.figures.load()))
        }),
    ];
    if !requests {
        cols.push(col(unit, View::Main, |r| td(rps(r.judged.throughput_rps))));
        cols.push(col(format!("{of}error rate"), View::Main, |r| {
            td(pct(r.judged.error_rate))
        }));
        cols.push(col(format!("{of}p50 ms"), View::Main, |r| {
            td(ms(r.judged.p50_ms))
        }));
        cols.push(col(format!("{of}p99 ms"), View::Main, |r| {
            td(ms(r.judged.p99_ms))
        }));
    }
    cols.push(col("requests", View::More, |r| {
        td(count(r.rec.figures.requests))
    }));
    cols.push(col("req/s", more_rate, |r| {
        td(rps(r.rec.figures.throughput_rps))
    }));
    cols.push(col("goodput/s", View::More, |r| {
        td(rps(r.rec.figures.goodput_rps))
    }));
    let error_rate = if requests {
        "error rate"
    } else {
        "request error rate"
    };
    cols.push(col(error_rate, more_rate, |r| {
        td(pct(r.rec.figures.error_rate))
    }));
    if let Some(view) = latency {
        cols.push(col("p50 ms", view, |r| td(ms(r.rec.figures.p50_ms))));
    }
    cols.push(col("p90 ms", View::More, |r| td(ms(r.rec.figures.p90_ms))));
    if let Some(view) = latency {
        cols.push(col("p99 ms", view, |r| td(ms(r.rec.figures.p99_ms))));
    }
    cols.push(col("p99.9 ms", View::More, |r| {
        td(ms(r.rec.figures.p999_ms))
    }));
    cols.push(col("max ms", View::More, |r| td(ms(r.rec.figures.max_ms))));
    let rest: [Col<StepRow<'_>>; 5] = [
        col("in flight max", View::More, |r| {
            td(r.rec.figures.in_flight_max)
        }),
        col("anomalies", View::Main, |r| td(count(r.rec.anomalies))),
        col("rejected", View::More, |r| td(count(r.rec.rejected))),
        col("duration s", View::More, |r| {
            td(format!("{:.1}", r.rec.figures.duration_s))
        }),
        col("verdict", View::Main, |r| {
            let s = &r.rec.figures;
            html! {
                td class=(s.verdict.as_str()) {
                    (s.verdict.as_str())
                    @if s.interrupted { " (cut short)" }
                    @if s.generator_bound { " (generator-bound)" }
                }
            }
        }),
    ];
    cols.extend(rest);
    split_table(&cols, &rows)
}

/// A row per operation and step (the `-` rows only where they count something).
fn ops_table(run: &RunSummary) -> Markup {
    let cols: [Col<&OpSummary>; 11] = [
        col("operation", View::Key, |o| td(&o.op)),
        col("step", View::Key, |o| td(o.step)),
        col("req/s", View::Main, |o| td(rps(o.throughput_rps))),
        col("error rate", View::Main, |o| td(pct(o.error_rate))),
        col("p50 ms", View::Main, |o| td(ms(o.p50_ms))),
        col("p99 ms", View::Main, |o| td(ms(o.p99_ms))),
        col("requests", View::More, |o| td(count(o.requests))),
        col("p90 ms", View::More, |o| td(ms(o.p90_ms))),
        col("max ms", View::More, |o| td(ms(o.max_ms))),
        col("anomalies", View::More, |o| td(count(o.anomalies()))),
        col("rejected", View::More, |o| td(count(o.rejected()))),
    ];
    split_table(&cols, &shown_op_rows(run))
}

/// A row per scenario and step (whole iterations), then each scenario's top failure reasons.
fn scenarios_table(run: &RunSummary) -> Markup {
    let names = scenarios(run);
    let rows: Vec<&ScenarioSummary> = (names.iter())
        .flat_map(|name| iteration_rows(run, name))
        .collect();
    let cols: [Col<&ScenarioSummary>; 12] = [
        col("scenario", View::Key, |r| td(&r.scenario)),
        col("step", View::Key, |r| td(r.step)),
        col("iterations/s", View::Main, |r| td(rps(r.completed_per_s))),
        col("completed", View::Main, |r| td(count(r.completed))),
        col("failed", View::Main, |r| td(count(r.failed))),
        col("error rate", View::Main, |r| td(pct(r.error_rate))),
        col("p99 ms", View::Main, |r| td(ms(r.p99_ms))),
        col("started", View::More, |r| td(count(r.started))),
        col("interrupted", View::More, |r| td(count(r.interrupted))),
        col("p50 ms", View::More, |r| td(ms(r.p50_ms))),
        col("polls/iteration", View::More, |r| td(polls(r.polls_mean))),
        col("assertion failures", View::More, |r| {
            td(count(r.assertion_failures))
        }),
    ];
    html! {
        (split_table(&cols, &rows))
        ul {
            @for name in &names {
                @if let Some(line) = failures_line(&iteration_rows(run, name)) {
                    li { strong { (name) } " failed: " (line) }
                }
            }
        }
    }
}

/// A settings value as a person writes it: whole numbers without `.0`, lists joined by
/// commas (`4, 8, 16`), objects inside a list as `key: value` pairs.
fn setting_text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => num(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let sep = if items.iter().any(Value::is_object) {
                "; "
            } else {
                ", "
            };
            items.iter().map(setting_text).collect::<Vec<_>>().join(sep)
        }
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !is_unset(v))
            .map(|(k, v)| format!("{k}: {}", setting_text(v)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A setting that says nothing: null, or an empty list or object.
fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_unset),
        _ => false,
    }
}

/// summary.json's settings as rows of a table: per top-level group (`run` for the top-level
/// values), each set value under its dotted name within the group (`builtin.capacity`).
fn settings_rows(settings: &Value) -> Vec<(String, Vec<(String, String)>)> {
    fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&name, v, out);
                }
            }
            v if is_unset(v) => {}
            v => out.push((prefix.to_owned(), setting_text(v))),
        }
    }
    let Value::Object(top) = settings else {
        return vec![(
            "run".to_owned(),
            vec![(String::new(), setting_text(settings))],
        )];
    };
    let mut scalars = Vec::new();
    let mut groups = Vec::new();
    for (k, v) in top {
        if v.is_object() {
            let mut rows = Vec::new();
            flatten("", v, &mut rows);
            if !rows.is_empty() {
                groups.push((k.clone(), rows));
            }
        } else {
            flatten(k, v, &mut scalars);
        }
    }
    if !scalars.is_empty() {
        groups.insert(0, ("run".to_owned(), scalars));
    }
    groups
}

fn settings_table(settings: &Value) -> Markup {
    html! {
        table class="settings" {
            @for (group, rows) in settings_rows(settings) {
                tr { th colspan="2" { (group) } }
                @for (name, value) in rows {
                    tr { td { (name) } td { (value) } }
                }
            }
        }
    }
}

/// Where the knee's unit is not requests, what it counts, so its figures are not read as
/// requests.
fn unit_note(run: &RunSummary) -> Option<&'static str> {
    match rate_unit(run) {
        "iterations/s" => Some(
            "The knee, the verdicts and the USL fit judge whole scenario iterations \
             (iterations/s, each several requests); req/s counts every request.",
        ),
        "calls/s" => Some(
            "The knee, the verdicts and the USL fit judge calls answered with a result \
             (calls/s; a task's call is several requests); req/s counts every request.",
        ),
        _ => None,
    }
}

/// The summary card's worst anomaly: the most frequent anomaly with what it usually means;
/// without any, "none", and the most frequent of the other counters called out, the
/// rejections and the error responses, if any was counted.
fn worst_line(run: &RunSummary) -> Markup {
    let said = |c: &super::terminal::Callout| {
        html! { code { (c.counter) } " " (count(c.total)) " in " (step_list(&c.steps)) ": " (c.hint) "." }
    };
    let worst = worst_callout(run);
    if let Some((c, false)) = &worst {
        return said(c);
    }
    let over_steps = |get: fn(&crate::report::StepRecord) -> u64| {
        let steps: Vec<u32> = (run.steps.iter())
            .filter(|s| get(s) > 0)
            .map(|s| s.figures.step)
            .collect();
        (run.steps.iter().map(get).sum::<u64>(), steps)
    };
    let (rejected, rejected_in) = over_steps(|s| s.rejected);
    let (errors, errors_in) = over_steps(|s| s.figures.errors);
    let mut others: Vec<(u64, Markup)> = worst.iter().map(|(c, _)| (c.total, said(c))).collect();
    if rejected > 0 {
        others.push((
            rejected,
            html! { (count(rejected)) " requests rejected (HTTP 429 + 503) in " (step_list(&rejected_in)) "." },
        ));
    }
    if errors > 0 {
        others.push((
            errors,
            html! { (count(errors)) " JSON-RPC error responses in " (step_list(&errors_in)) "." },
        ));
    }
    match others.into_iter().max_by_key(|o| o.0) {
        Some((_, other)) => html! { "none; most frequent otherwise: " (other) },
        None => html! { "none: no anomaly, loss, rejection or error response was counted" },
    }
}

/// The card atop the page: the run's verdict, its knee, its worst anomaly and its checks.
fn summary_card(run: &RunSummary) -> Markup {
    let (outcome, verdict) = run_verdict(run);
    // Without thresholds nothing was passed: the card stays neutral.
    let class = match outcome {
        Outcome::Pass if run.gates.is_empty() => "neutral",
        o => o.as_str(),
    };
    let judged: Vec<&Check> = (run.checks.iter())
        .filter(|c| c.status != CheckStatus::Skipped)
        .collect();
    html! {
        section class=(format!("card {class}")) id="summary" {
            dl {
                dt { "Verdict" }
                dd class=(format!("verdict {class}")) { (verdict) }
                dt { "Knee" }
                dd {
                    @match &run.knee_cpu {
                        Some(cpu) => {
                            (knee_sentence(run).trim_end_matches('.')) "; at the knee, " (cpu) "."
                        }
                        None => (knee_sentence(run)),
                    }
                    @if let Some(note) = unit_note(run) { br; span class="note" { (note) } }
                }
                dt { "Worst anomaly" }
                dd { (worst_line(run)) }
                dt { "Checks" }
                dd {
                    @if judged.is_empty() {
                        "none judged (the soak checks judge a long fixed-load run, docs/checks.md)"
                    } @else {
                        @for (i, c) in judged.iter().enumerate() {
                            @if i > 0 { br; }
                            (c.label()) " "
                            span class=(match c.status { CheckStatus::Pass => "pass", CheckStatus::Fail => "fail", _ => "unfinished" }) {
                                (c.status.as_str())
                            }
                            @if c.status != CheckStatus::Pass { ": " (c.reason) }
                        }
                    }
                }
            }
        }
    }
}

fn page(run: &RunSummary, plots: &[plots::Plot]) -> Markup {
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
                (summary_card(run))
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
                (steps_table(run))
                @let limited = generator_lines(run);
                @if !limited.is_empty() {
                    h2 { "Generator" }
                    ul {
                        @for line in &limited { li class="saturated" { (line) } }
                        li { (generator_hint(run)) "." }
                    }
                }
                @if by_operation(run) {
                    h2 { "By operation" }
                    (ops_table(run))
                    @if !scenarios(run).is_empty() {
                        h2 { "By scenario (whole iterations)" }
                        (scenarios_table(run))
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
                @if run.checks.iter().any(|c| c.status != CheckStatus::Skipped) {
                    h2 { "Checks" }
                    div class="checks" {
                        @for c in &run.checks {
                            div class=(format!("check st-{}", c.status.as_str())) {
                                b { (c.label()) ": " (c.status.as_str()) }
                                (c.reason)
                            }
                        }
                    }
                }
                h2 { "Settings" }
                (settings_table(&run.settings))
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

#[cfg(test)]
mod tests {
    use super::{setting_text, settings_rows};
    use serde_json::json;

    fn rows(v: &serde_json::Value) -> Vec<(String, Vec<(String, String)>)> {
        settings_rows(v)
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn settings_read_as_a_person_writes_them() {
        let settings = json!({
            "name": "jobs",
            "seed": 42,
            "segment": null,
            "load": {"levels": [4.0, 8.0, 16.0], "duration_s": 3.0, "timeout_s": 0.25,
                     "stop_on_failure": true, "max_in_flight": null},
            "target": {"builtin": {"capacity": 4, "service_ms": "fixed:5"},
                       "watch": {"pid": null, "metric": {}}},
            "protocol_agreed": {"tried": [{"sent": "initialize", "answered": "2025-06-18"}]},
            "thresholds": [],
        });
        assert_eq!(
            rows(&settings),
            vec![
                ("run".to_owned(), pairs(&[("name", "jobs"), ("seed", "42")])),
                (
                    "load".to_owned(),
                    pairs(&[
                        ("duration_s", "3"),
                        ("levels", "4, 8, 16"),
                        ("stop_on_failure", "yes"),
                        ("timeout_s", "0.25"),
                    ])
                ),
                (
                    "protocol_agreed".to_owned(),
                    pairs(&[("tried", "answered: 2025-06-18, sent: initialize")])
                ),
                (
                    "target".to_owned(),
                    pairs(&[("builtin.capacity", "4"), ("builtin.service_ms", "fixed:5")])
                ),
            ],
            "groups in key order, unset values (null, empty) left out"
        );
        assert_eq!(setting_text(&json!([200.5, 400.0])), "200.5, 400");
        assert_eq!(
            setting_text(&json!([{"a": 1}, {"a": 2.0}])),
            "a: 1; a: 2",
            "objects in a list apart by semicolons"
        );
    }
}
