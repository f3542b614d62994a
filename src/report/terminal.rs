//! The terminal report: one table (a row per step), the knee in one sentence, the USL fit,
//! with several operations or any scenario a table per operation and per scenario, every
//! anomaly with a hint of what it usually means, the correctness section of `tally` steps,
//! error codes, and the gates. Returned as a
//! string; ANSI colours only when the caller says the output is a terminal.

use super::{RunStatus, RunSummary, StepRecord};
use crate::analysis::{Knee, Tripped, distinct, pct};
use crate::metrics::{
    self, AskedKind, ByKind, Model, NO_OP, OpSummary, ScenarioSummary, StepSummary, Verdict, WHOLE,
};
use anstyle::{AnsiColor, Style};
use std::collections::BTreeMap;
use std::fmt::Write;

pub(super) const RED: Style = AnsiColor::Red.on_default().bold();
pub(super) const GREEN: Style = AnsiColor::Green.on_default();
pub(super) const YELLOW: Style = AnsiColor::Yellow.on_default().bold();
pub(super) const BOLD: Style = Style::new().bold();

/// Text cells laid out in columns: numbers right-aligned, the first column and any marked
/// [`Table::left`] left-aligned. Styles are applied after padding so colour codes never break
/// the alignment.
pub(super) struct Table {
    rows: Vec<Vec<(String, Style)>>,
    left: Vec<usize>,
}

impl Table {
    pub(super) fn new(header: &[&str]) -> Self {
        Table {
            rows: vec![header.iter().map(|h| (h.to_string(), BOLD)).collect()],
            left: vec![0],
        }
    }

    /// Left-aligns column `col` (a text column).
    pub(super) fn left(mut self, col: usize) -> Self {
        self.left.push(col);
        self
    }

    pub(super) fn row(&mut self, cells: Vec<(String, Style)>) {
        self.rows.push(cells);
    }

    pub(super) fn render(&self, out: &mut String, color: bool) {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|(s, _)| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in &self.rows {
            let mut line = String::new();
            for (c, (text, style)) in r.iter().enumerate() {
                let sep = if c == 0 { "" } else { "  " };
                let cell = if self.left.contains(&c) {
                    format!("{sep}{text:<w$}", w = width[c])
                } else {
                    format!("{sep}{text:>w$}", w = width[c])
                };
                line.push_str(&paint(&cell, *style, color));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

/// Whether to colour output for `stream`: a terminal, and `NO_COLOR` unset or empty.
pub fn use_color(stream: &impl std::io::IsTerminal) -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && stream.is_terminal()
}

/// `text` in `style` when `color`, else plain.
pub(super) fn paint(text: &str, style: Style, color: bool) -> String {
    if color && style != Style::new() {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

/// A latency in ms: 3 decimals below 1 ms, 2 below 100 ms, whole above.
pub(super) fn ms(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v < 1.0 => format!("{v:.3}"),
        Some(v) if v < 100.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// A rate in requests per second, 1 decimal.
pub(super) fn rps(v: f64) -> String {
    format!("{v:.1}")
}

/// A load as a number without a needless fraction: 8 → "8", 12.5 → "12.5".
pub(super) fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// A load with its unit: "8 concurrent" or "200 req/s offered".
pub(super) fn load_phrase(model: Option<Model>, load: f64) -> String {
    match model {
        Some(Model::Open) => format!("{} req/s offered", num(load)),
        _ => format!("{} concurrent", num(load)),
    }
}

fn verdict_style(v: Verdict) -> Style {
    match v {
        Verdict::Ok => GREEN,
        Verdict::Saturated => YELLOW,
        Verdict::Failed => RED,
    }
}

/// Reads one counter of a step.
type Count = fn(&StepSummary) -> u64;

/// How many of [`CALLOUTS`] come first as docs/metrics.md's anomalies.
const ANOMALY_CALLOUTS: usize = 7;

/// Counters called out under the table when they are not zero, with what they usually mean.
/// The first seven are docs/metrics.md's anomalies.
const CALLOUTS: [(&str, Count); 24] = [
    ("duplicate_id", |s| s.duplicate_id),
    ("late", |s| s.late),
    ("unknown_id", |s| s.unknown_id),
    ("null_id", |s| s.null_id),
    ("both_result_error", |s| s.both_result_error),
    ("invalid_jsonrpc", |s| s.invalid_jsonrpc),
    ("parse_errors", |s| s.parse_errors),
    ("missing", |s| s.missing),
    ("timeouts", |s| s.timeouts),
    ("response_count_mismatch", |s| s.response_count_mismatch),
    ("batch_rejected", |s| s.batch_rejected),
    ("transport_errors", |s| s.transport_errors),
    ("expired_unsent", |s| s.expired_unsent),
    ("progress_after_result", |s| s.progress_after_result),
    ("progress_down", |s| s.progress_down),
    ("progress_unknown_token", |s| s.progress_unknown_token),
    ("progress_then_missing", |s| s.progress_then_missing),
    ("auth_failures", |s| s.auth_failures),
    ("http_403", |s| s.http_403),
    ("input_unanswered", |s| s.input_unanswered.unwrap_or(0)),
    ("input_refused", |s| s.input_refused),
    ("version_rejected", |s| s.version_rejected),
    ("tool_errors", |s| s.tool_errors),
    ("output_schema_violations", |s| s.output_schema_violations),
];

/// What a non-zero count of `counter` usually means, for the counters called out in reports.
pub(super) fn anomaly_hint(counter: &str) -> Option<&'static str> {
    Some(match counter {
        "duplicate_id" => {
            "the server answered one request twice: a retry inside the server or a proxy, or \
             one response routed to two streams"
        }
        "late" => {
            "answers came after their request had timed out: the timeout is shorter than the \
             server's tail latency, or the server still works off requests it can no longer \
             serve in time"
        }
        "unknown_id" => {
            "answers carried ids that were never sent: the server or a proxy rewrites ids \
             (a number turned into a string, a big integer losing precision) or mixes up \
             sessions"
        }
        "null_id" => {
            "answers with \"id\": null: the server could not read a request (parse error, \
             invalid request), so that request stays unanswered"
        }
        "both_result_error" => {
            "responses holding both result and error: invalid JSON-RPC, a server bug"
        }
        "invalid_jsonrpc" => {
            "responses without \"jsonrpc\":\"2.0\" or without result and error: something \
             other than a JSON-RPC 2.0 server answers on this path"
        }
        "parse_errors" => {
            "bytes that are not JSON-RPC: truncated bodies or SSE events, answers over the \
             message limit (16 MiB) or over the answer memory budget (--max-answer-memory), or \
             a stdio server printing logs on stdout"
        }
        "missing" => {
            "exchanges ended without their response: an HTTP body or SSE stream closed \
             early, a batch answer lacking members, or a stdio server that exited"
        }
        "timeouts" => {
            "no answer within the timeout: the server is overloaded, or dropped the request"
        }
        "auth_failures" => {
            "requests refused 401 with a token just fetched (or a static one), or held for a \
             token that could not be fetched: the credentials, scope or resource are not what \
             the server takes, or its authorization server is down"
        }
        "http_403" => {
            "requests refused 403 (insufficient_scope): the token lacks the scope the server \
             wants; ask for it with --oauth-scope or `scope`"
        }
        "response_count_mismatch" => {
            "batch answers with a different number of responses than requests: the server \
             drops or invents batch members"
        }
        "batch_rejected" => {
            "the server refuses JSON-RPC batches (MCP 2025-06-18 and later removed them): \
             send single requests"
        }
        "transport_errors" => {
            "connections refused, reset or slower to open than the connect timeout, TLS \
             failures, or a stdio server not running: the server is down or out of \
             connections"
        }
        "expired_unsent" => {
            "requests timed out while waiting for a connection, never sent: every connection \
             the run may open (one per client, or max_in_flight) was held by a slow answer"
        }
        "progress_after_result" => {
            "progress notifications came after their call's answer: the server reports \
             progress it should have sent before answering (MCP: progress stops at completion)"
        }
        "progress_down" => {
            "progress that did not rise above the call's earlier progress: MCP requires the \
             value to increase with each notification"
        }
        "progress_unknown_token" => {
            "progress notifications for tokens mcpload never issued (or without a readable \
             token and value): the server mixes up requests or sessions"
        }
        "input_unanswered" => {
            "calls answered input_required (2026-07-28) asking for input that the profile's \
             [input] does not give: the calls never completed; answer them with [input]"
        }
        "version_rejected" => {
            "requests refused with -32022 (unsupported protocol version): the server stopped \
             serving the revision agreed at the start, or a replica behind the same URL serves \
             other revisions"
        }
        "input_refused" => {
            "the server asked for input during calls (elicitation/create, \
             sampling/createMessage, roots/list) that the profile's [input] does not give: \
             mcpload answered each with an error; answer them with [input]"
        }
        "tool_errors" => {
            "tool results with isError: true: the tool itself failed (wrong arguments, a \
             downstream error), so the call did not complete; --tool-errors ok counts them ok \
             for servers that use isError for expected outcomes"
        }
        "output_schema_violations" => {
            "results whose structuredContent breaks the outputSchema their tool declares (or \
             lacks one): real clients reject them; a server dropping fields under load \
             (--validate-output sets how often this is checked)"
        }
        "progress_then_missing" => {
            "calls that reported progress and then ended without their answer: the stream \
             closed or the server exited mid-work"
        }
        _ => return None,
    })
}

pub(super) fn step_list(steps: &[u32]) -> String {
    let list: Vec<String> = steps.iter().map(u32::to_string).collect();
    let s = if steps.len() == 1 { "" } else { "s" };
    format!("step{s} {}", list.join(", "))
}

/// What the knee and the USL fit count per second: iterations when the run had scenarios,
/// calls when it had calls of several requests (they judge those, docs/metrics.md), else
/// requests.
pub(super) fn rate_unit(run: &RunSummary) -> &'static str {
    let any = |f: fn(&StepSummary) -> bool| run.steps.iter().any(|s| f(&s.figures));
    if any(|s| s.iterations_per_s.is_some()) {
        "iterations/s"
    } else if any(|s| s.calls_per_s.is_some()) {
        "calls/s"
    } else {
        "req/s"
    }
}

/// The knee in one sentence, e.g. "saturates at 8 concurrent, 398.0 req/s; fails at 32
/// concurrent: error rate 41% > 1%, mostly HTTP 429 (40.8% of requests)."
pub(super) fn knee_sentence(run: &RunSummary) -> String {
    let k: &Knee = &run.knee;
    let steps: Vec<&StepSummary> = run
        .steps
        .iter()
        .map(|s| &s.figures)
        .filter(|s| !s.interrupted && Some(s.model) == k.model)
        .collect();
    let Some(top) = steps.iter().map(|s| s.load()).reduce(f64::max) else {
        return "no complete step was recorded, so there is no knee.".to_owned();
    };
    let at = |step: Option<u32>| steps.iter().find(|s| Some(s.step) == step);
    let saturation = match (k.saturation_point, at(k.saturation_step)) {
        (Some(load), Some(s)) => format!(
            "saturates at {}, {} {}",
            load_phrase(k.model, load),
            rps(s.judged().throughput_rps),
            rate_unit(run)
        ),
        _ => match steps.first() {
            Some(first) if first.verdict == Verdict::Saturated => format!(
                "saturated from the first step ({})",
                load_phrase(k.model, first.load())
            ),
            _ => "did not saturate".to_owned(),
        },
    };
    let failure = match &k.failure_point {
        Some(f) => {
            let why: Vec<String> = f.tripped.iter().map(Tripped::to_string).collect();
            format!(
                "fails at {}: {}",
                load_phrase(k.model, f.load),
                why.join(" and ")
            )
        }
        None => format!("did not fail up to {}", load_phrase(k.model, top)),
    };
    match k.generator_limited.as_slice() {
        [] => format!("{saturation}; {failure}."),
        limited => format!(
            "{saturation}; {failure}; the generator, not the server, limited {}.",
            step_list(limited)
        ),
    }
}

/// One line per generator-bound step: the step, why, and what to do.
pub(super) fn generator_lines(run: &RunSummary) -> Vec<String> {
    run.steps
        .iter()
        .map(|r| &r.figures)
        .filter(|s| s.generator_bound)
        .map(|s| {
            let why = s
                .generator_bound_reason
                .as_deref()
                .unwrap_or("its own limits");
            format!(
                "the generator, not the server, limited step {}: {why}",
                s.step
            )
        })
        .collect()
}

/// What the user can do about the generator-bound steps of `run` (after [`generator_lines`]).
/// An open loop that sent each arrival at its own instant can also send them in bunches.
pub(super) fn generator_hint(run: &RunSummary) -> String {
    let load = &run.settings["load"];
    let exact_open_loop = load["model"] == "open" && load["send_window_s"].as_f64() == Some(0.0);
    metrics::bound_hint(exact_open_loop)
}

/// The knee's supporting facts: max sustainable load, peak throughput.
pub(super) fn knee_facts(run: &RunSummary) -> Vec<String> {
    let k = &run.knee;
    let mut facts = Vec::new();
    if let (Some(load), Some(step)) = (k.max_sustainable, k.max_sustainable_step) {
        facts.push(format!(
            "max sustainable {} (step {step})",
            load_phrase(k.model, load)
        ));
    }
    if let (Some(peak), Some(step)) = (k.peak_throughput_rps, k.peak_step) {
        facts.push(format!(
            "peak {} {} (step {step})",
            rps(peak),
            rate_unit(run)
        ));
    }
    facts
}

/// The USL fit in one line, or why there is none (`None` for open-loop runs).
pub(super) fn usl_line(run: &RunSummary) -> Option<String> {
    let k = &run.knee;
    let Some(u) = &k.usl else {
        return (k.model == Some(Model::Closed)).then(|| {
            "not fitted: it needs three closed-loop steps at different concurrencies that \
             did not fail."
                .to_owned()
        });
    };
    let unit = rate_unit(run);
    let prediction = match (u.peak_concurrency, u.peak_throughput_rps) {
        (Some(n), Some(x)) => format!(
            "predicts a peak of {} {unit} at {}",
            rps(x),
            load_phrase(Some(Model::Closed), (n * 10.0).round() / 10.0)
        ),
        (None, Some(x)) => format!("predicts a ceiling of {} {unit}", rps(x)),
        _ => "scales linearly over the measured range".to_owned(),
    };
    Some(format!(
        "sigma {:.4}, kappa {:.6}, lambda {} {unit} per client; {prediction} (R² {:.3} over {} steps).",
        u.sigma,
        u.kappa,
        rps(u.lambda),
        u.r_squared,
        u.points
    ))
}

/// A counter worth calling out: its total over the run, the steps where it occurred, what
/// it usually means, and what caused it where the run knows (its first step's cause).
pub(super) struct Callout {
    pub counter: &'static str,
    pub total: u64,
    pub steps: Vec<u32>,
    pub hint: &'static str,
    pub cause: Option<(u32, String)>,
}

/// What a step recorded of the cause of `counter`, for the counters whose cause is kept.
fn cause(counter: &str, s: &StepRecord) -> Option<String> {
    match counter {
        "transport_errors" => s.figures.transport_error.clone(),
        "tool_errors" => s.figures.tool_error.clone(),
        "output_schema_violations" => s.figures.output_schema_violation.clone(),
        "input_unanswered" => {
            let asked: Vec<&str> = (s.ops.iter())
                .filter(|o| o.input_unanswered > 0)
                .map(|o| o.op.as_str())
                .collect();
            let lines = input_lines(&s.input_unanswered_by_kind)?;
            Some(format!("asked by {}; {lines}", asked.join(", ")))
        }
        "input_refused" => input_lines(&s.input_refused_by_kind),
        _ => None,
    }
}

/// The `[input]` lines that would answer the kinds counted in `kinds`, as one sentence.
fn input_lines(kinds: &ByKind) -> Option<String> {
    let named: Vec<&str> = kinds.kinds().map(AskedKind::name).collect();
    let lines: Vec<&str> = kinds.kinds().filter_map(AskedKind::input_line).collect();
    if named.is_empty() {
        return None;
    }
    let answer = if lines.is_empty() {
        "no [input] line answers it".to_owned()
    } else {
        format!("answer with [input] {}", lines.join("; "))
    };
    Some(format!("{} asked for; {answer}", named.join(", ")))
}

/// Every non-zero counter of [`CALLOUTS`].
pub(super) fn callouts(run: &RunSummary) -> Vec<Callout> {
    let figures: Vec<&StepSummary> = run.steps.iter().map(|s| &s.figures).collect();
    CALLOUTS
        .iter()
        .filter_map(|&(counter, get)| {
            let steps: Vec<u32> = figures
                .iter()
                .filter(|s| get(s) > 0)
                .map(|s| s.step)
                .collect();
            (!steps.is_empty()).then(|| Callout {
                counter,
                total: figures.iter().map(|s| get(s)).sum(),
                steps,
                hint: anomaly_hint(counter).unwrap_or_default(),
                cause: (run.steps.iter())
                    .filter(|s| get(&s.figures) > 0)
                    .find_map(|s| Some((s.figures.step, cause(counter, s)?))),
            })
        })
        .collect()
}

/// The callout a reader should see first: the most frequent anomaly (docs/metrics.md), and
/// `false`; without any anomaly the most frequent other counter called out, and `true`.
pub(super) fn worst_callout(run: &RunSummary) -> Option<(Callout, bool)> {
    let anomalies: Vec<&str> = CALLOUTS[..ANOMALY_CALLOUTS].iter().map(|c| c.0).collect();
    let (mut worst, mut other): (Vec<Callout>, Vec<Callout>) = callouts(run)
        .into_iter()
        .partition(|c| anomalies.contains(&c.counter));
    let other_only = worst.is_empty();
    let pick = if other_only { &mut other } else { &mut worst };
    // A stable sort: of equal totals, the one listed first in CALLOUTS.
    pick.sort_by_key(|c| std::cmp::Reverse(c.total));
    (!pick.is_empty()).then(|| (pick.remove(0), other_only))
}

/// Error responses by JSON-RPC code over the whole run, as "-32603 × 40".
pub(super) fn error_codes(run: &RunSummary) -> Vec<String> {
    let mut codes: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &run.steps {
        for (code, n) in &s.errors_by_code {
            *codes.entry(code).or_default() += n;
        }
    }
    codes.iter().map(|(c, n)| format!("{c} × {n}")).collect()
}

/// Whether the report breaks the run down by operation and scenario: with more than one
/// operation, or any scenario. A run of one operation reads as its steps table alone.
pub(super) fn by_operation(run: &RunSummary) -> bool {
    operations(run).len() > 1 || !scenarios(run).is_empty()
}

/// The operations' names in order of first appearance, the `-` row left out.
pub(super) fn operations(run: &RunSummary) -> Vec<&str> {
    let ops = run.steps.iter().flat_map(|s| &s.ops);
    distinct(ops.map(|o| o.op.as_str()).filter(|&op| op != NO_OP))
}

/// Whether an ops.csv row counts anything at all (the `-` row is shown only then).
fn counts_anything(o: &OpSummary) -> bool {
    o.requests
        + o.responses
        + o.anomalies()
        + o.server_messages
        + o.missing
        + o.timeouts
        + o.rejected()
        + o.http_other
        + o.transport_errors
        + o.tool_errors
        + o.output_schema_violations
        + o.expired_unsent
        + o.batches
        + o.batch_rejected
        + o.response_count_mismatch
        > 0
}

/// The ops rows the reports show, grouped by operation (in order of first appearance) and
/// then by step; the `-` rows last, only those that count anything.
pub(super) fn shown_op_rows(run: &RunSummary) -> Vec<&OpSummary> {
    let mut out: Vec<&OpSummary> = operations(run)
        .into_iter()
        .flat_map(|name| op_rows(run, name))
        .collect();
    out.extend(
        op_rows(run, NO_OP)
            .into_iter()
            .filter(|o| counts_anything(o)),
    );
    out
}

/// The ops rows of operation `name`, step by step.
pub(super) fn op_rows<'a>(run: &'a RunSummary, name: &str) -> Vec<&'a OpSummary> {
    run.steps
        .iter()
        .flat_map(|s| &s.ops)
        .filter(|o| o.op == name)
        .collect()
}

/// The scenarios' names in order of first appearance.
pub(super) fn scenarios(run: &RunSummary) -> Vec<&str> {
    distinct(
        run.steps
            .iter()
            .flat_map(|s| &s.scenarios)
            .map(|r| r.scenario.as_str()),
    )
}

/// The whole-iteration (`*`) rows of scenario `name`, step by step.
pub(super) fn iteration_rows<'a>(run: &'a RunSummary, name: &str) -> Vec<&'a ScenarioSummary> {
    run.steps
        .iter()
        .flat_map(|s| &s.scenarios)
        .filter(|r| r.scenario == name && r.part == WHOLE)
        .collect()
}

/// How many reasons a report names per scenario.
const TOP_REASONS: usize = 3;

/// The reasons iterations of `rows` failed, most frequent first (ties by reason), with their
/// counts.
pub(super) fn top_failures(rows: &[&ScenarioSummary]) -> Vec<(String, u64)> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for (reason, n) in rows.iter().flat_map(|r| &r.failure_reasons.0) {
        *counts.entry(reason).or_default() += n;
    }
    let mut out: Vec<(String, u64)> = counts.into_iter().map(|(r, n)| (r.to_owned(), n)).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// The top failure reasons of a scenario as one line, e.g. `expect ok × 3; timeout × 1 (and
/// 2 more)`; `None` when nothing failed.
pub(super) fn failures_line(rows: &[&ScenarioSummary]) -> Option<String> {
    let all = top_failures(rows);
    let mut line = all
        .iter()
        .take(TOP_REASONS)
        .map(|(r, n)| format!("{r} × {n}"))
        .collect::<Vec<_>>()
        .join("; ");
    if all.len() > TOP_REASONS {
        line.push_str(&format!(" (and {} more)", all.len() - TOP_REASONS));
    }
    (!all.is_empty()).then_some(line)
}

/// Polls per iteration: its mean, or "-" when nothing polled.
pub(super) fn polls(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |m| format!("{m:.2}"))
}

/// The per-operation table: a row per operation and step.
fn ops_table(run: &RunSummary, out: &mut String, color: bool) {
    let mut t = Table::new(&[
        "operation",
        "step",
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "anomalies",
        "rejected",
    ]);
    let plain = Style::new();
    for o in shown_op_rows(run) {
        let failed = o.requests - o.ok.min(o.requests);
        t.row(vec![
            (o.op.clone(), plain),
            (o.step.to_string(), plain),
            (o.requests.to_string(), plain),
            (rps(o.throughput_rps), plain),
            (ms(o.p50_ms), plain),
            (ms(o.p99_ms), plain),
            (
                format!("{failed} ({})", pct(o.error_rate)),
                if failed > 0 { YELLOW } else { plain },
            ),
            (
                o.anomalies().to_string(),
                if o.anomalies() > 0 { RED } else { plain },
            ),
            (o.rejected().to_string(), plain),
        ]);
    }
    t.render(out, color);
}

/// The per-scenario table (whole iterations, a row per scenario and step) and each
/// scenario's top failure reasons.
fn scenarios_table(run: &RunSummary, out: &mut String, color: bool) {
    let mut t = Table::new(&[
        "scenario",
        "step",
        "iterations/s",
        "completed",
        "failed",
        "interrupted",
        "p50 ms",
        "p99 ms",
        "polls/iteration",
    ]);
    let plain = Style::new();
    let names = scenarios(run);
    for name in &names {
        for r in iteration_rows(run, name) {
            t.row(vec![
                (r.scenario.clone(), plain),
                (r.step.to_string(), plain),
                (rps(r.completed_per_s), plain),
                (r.completed.to_string(), plain),
                (
                    format!("{} ({})", r.failed, pct(r.error_rate)),
                    if r.failed > 0 { YELLOW } else { plain },
                ),
                (r.interrupted.to_string(), plain),
                (ms(r.p50_ms), plain),
                (ms(r.p99_ms), plain),
                (polls(r.polls_mean), plain),
            ]);
        }
    }
    t.render(out, color);
    for name in &names {
        if let Some(line) = failures_line(&iteration_rows(run, name)) {
            let _ = writeln!(out, "  {} failed: {line}", paint(name, BOLD, color));
        }
    }
}

pub(super) fn status_phrase(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "incomplete: the run did not finish",
        RunStatus::Complete => "complete",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Aborted => "aborted",
    }
}

/// The whole terminal report of a run.
/// The soak checks: each judged one on a line (status, value, reason); the skipped ones
/// counted in one line with the first reason, so a short run is not a wall of skips.
fn checks_block(run: &RunSummary, out: &mut String, color: bool) {
    use crate::analysis::checks::CheckStatus;
    if run.checks.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}", paint("Checks:", BOLD, color));
    for c in run
        .checks
        .iter()
        .filter(|c| c.status != CheckStatus::Skipped)
    {
        let (word, style) = match c.status {
            CheckStatus::Pass => ("pass", GREEN),
            CheckStatus::Warn => ("warn", YELLOW),
            _ => ("FAIL", RED),
        };
        let _ = writeln!(
            out,
            "  {:<14} {} {}",
            c.label(),
            paint(&format!("{word:<4}"), style, color),
            c.reason
        );
    }
    let skipped: Vec<String> = run
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Skipped)
        .map(|c| c.label())
        .collect();
    if let Some(first) = run.checks.iter().find(|c| c.status == CheckStatus::Skipped) {
        let _ = writeln!(
            out,
            "  skipped: {} (first: {})",
            skipped.join(", "),
            first.reason
        );
    }
}

pub(super) fn render_terminal(run: &RunSummary, color: bool) -> String {
    let mut out = String::new();
    let status = status_phrase(run.status);
    let _ = write!(
        out,
        "{} {}: {status}",
        paint("mcpload run", BOLD, color),
        run.name
    );
    if let Some(why) = &run.status_reason {
        let _ = write!(out, " ({why})");
    }
    if let Some(rev) = &run.protocol_revision {
        let _ = write!(out, "; protocol {rev}");
    }
    let _ = writeln!(out, "; started {}", run.started_at);
    if let Some(seg) = &run.segment {
        let _ = write!(out, "segment {}/{}", seg.index, seg.count);
        if let Some(at) = &seg.start_at {
            let _ = write!(out, "; common start {at}");
        }
        if let Some(late) = seg.start_late_ms {
            let _ = write!(out, ", began {late:.1} ms after it");
        }
        if seg.count > 1 {
            let _ = write!(
                out,
                "; figures are this segment's share: merge the segments to judge the whole"
            );
        }
        let _ = writeln!(out);
    }
    if run.settings.pointer("/target/tls/insecure") == Some(&serde_json::Value::Bool(true)) {
        let _ = writeln!(
            out,
            "{}",
            paint(
                "WARNING: TLS certificates were not checked (--insecure): these figures may \
                 come from any server on the path",
                RED,
                color
            )
        );
    }
    if let Some(a) = &run.auth {
        let _ = writeln!(
            out,
            "auth: {}{} token request(s), {} refresh(es), token fetch p50 {} ms, p99 {} ms; \
             {} retried after 401, {} auth failure(s)",
            a.users
                .filter(|_| a.token_per_user)
                .map(|u| format!("a token per user ({u} user(s) holding one), "))
                .unwrap_or_default(),
            a.token_requests,
            a.token_refreshes,
            ms(a.token_fetch_p50_ms),
            ms(a.token_fetch_p99_ms),
            a.retries_token_refresh,
            a.auth_failures
        );
    }

    let load_header = match run.knee.model {
        Some(Model::Open) => "target rps",
        _ => "concurrency",
    };
    let mut t = Table::new(&[
        "step",
        load_header,
        "req/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "errors",
        "anomalies",
        "rejected",
        "verdict",
    ])
    .left(9);
    let plain = Style::new();
    for rec in &run.steps {
        let s = &rec.figures;
        let failed = s.requests - s.ok.min(s.requests);
        let mut verdict = s.verdict.as_str().to_owned();
        if s.interrupted {
            verdict.push_str(" (cut short)");
        }
        if s.generator_bound {
            verdict.push_str(" (generator-bound)");
        }
        t.row(vec![
            (s.step.to_string(), plain),
            (num(s.load()), plain),
            (rps(s.throughput_rps), plain),
            (ms(s.p50_ms), plain),
            (ms(s.p99_ms), plain),
            (ms(s.max_ms), plain),
            (
                format!("{failed} ({})", pct(s.error_rate)),
                if failed > 0 { YELLOW } else { plain },
            ),
            (
                rec.anomalies.to_string(),
                if rec.anomalies > 0 { RED } else { plain },
            ),
            (rec.rejected.to_string(), plain),
            (verdict, verdict_style(s.verdict)),
        ]);
    }
    out.push('\n');
    t.render(&mut out, color);
    out.push('\n');

    let _ = writeln!(
        out,
        "{} {}",
        paint("Knee:", BOLD, color),
        knee_sentence(run)
    );
    let facts = knee_facts(run);
    if !facts.is_empty() {
        let _ = writeln!(out, "      {}.", facts.join("; "));
    }
    if let Some(cpu) = &run.knee_cpu {
        let _ = writeln!(out, "      At the knee, {cpu}.");
    }
    if let Some(line) = usl_line(run) {
        let _ = writeln!(out, "{} {line}", paint("USL:", BOLD, color));
    }
    if let Some(f) = &run.fleet {
        let _ = writeln!(out, "{} {}.", paint("Fleet:", BOLD, color), f.reason);
    }
    let limited = generator_lines(run);
    if !limited.is_empty() {
        let _ = writeln!(out, "\n{}", paint("Generator:", BOLD, color));
        for line in limited {
            let _ = writeln!(out, "  {}", paint(&line, YELLOW, color));
        }
        let _ = writeln!(out, "  {}.", generator_hint(run));
    }

    checks_block(run, &mut out, color);

    if by_operation(run) {
        let _ = writeln!(out, "\n{}", paint("By operation:", BOLD, color));
        ops_table(run, &mut out, color);
        if !scenarios(run).is_empty() {
            let _ = writeln!(
                out,
                "\n{}",
                paint("By scenario (whole iterations):", BOLD, color)
            );
            scenarios_table(run, &mut out, color);
        }
    }

    let called = callouts(run);
    if !called.is_empty() {
        let _ = writeln!(out, "\n{}", paint("Anomalies and losses:", BOLD, color));
        for c in called {
            let _ = writeln!(
                out,
                "  {} {} in {}: {}.",
                paint(c.counter, RED, color),
                c.total,
                step_list(&c.steps),
                c.hint
            );
            if let Some((step, cause)) = &c.cause {
                let _ = writeln!(out, "    first in step {step}: {cause}");
            }
        }
    }

    let section = super::correctness::correctness_text(
        &super::correctness::run_totals(run),
        &super::correctness::run_findings(run),
    );
    if let Some(rest) = section.strip_prefix("Correctness:") {
        let _ = write!(out, "\n{}{rest}", paint("Correctness:", BOLD, color));
    }

    let codes = error_codes(run);
    if !codes.is_empty() {
        let _ = writeln!(
            out,
            "\n{} {}",
            paint("Error responses by code:", BOLD, color),
            codes.join(", ")
        );
    }

    if let Some(e) = &run.export {
        let _ = writeln!(out, "\n{}", export_line(&e.prometheus_remote_write, color));
    }

    if !run.gates.is_empty() {
        let _ = writeln!(out, "\n{}", paint("Gates:", BOLD, color));
        for g in &run.gates {
            let (mark, style) = if g.holds {
                ("pass", GREEN)
            } else {
                ("FAIL", RED)
            };
            let _ = writeln!(out, "  {} {}", paint(mark, style, color), g.detail);
        }
    }
    out
}

/// What came of the live metrics pushes, in one line; yellow when any was lost.
fn export_line(e: &super::remote_write::RemoteWriteSummary, color: bool) -> String {
    let c = &e.counts;
    let mut line = format!(
        "{} {} of {} pushes to {} taken",
        paint("Remote write:", BOLD, color),
        c.sent,
        c.pushes,
        e.url
    );
    if c.retries > 0 {
        let _ = write!(line, ", {} retries", c.retries);
    }
    let lost = [
        (c.dropped, "dropped (backlog full)"),
        (c.failed, "failed"),
        (c.unsent_at_end, "unsent at the end"),
    ];
    let lost: Vec<String> = lost
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if lost.is_empty() {
        return line;
    }
    let last = c.last_error.as_deref().unwrap_or("unknown");
    let tail = format!("; {} (last error: {last})", lost.join(", "));
    line.push_str(&paint(&tail, YELLOW, color));
    line
}
