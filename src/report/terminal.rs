//! The terminal report: one table (a row per step), the knee in one sentence, the USL fit,
//! every anomaly with a hint of what it usually means, error codes, and the gates. Returned as
//! a string; ANSI colours only when the caller says the output is a terminal.

use super::{RunStatus, RunSummary};
use crate::analysis::{Knee, Tripped, pct};
use crate::metrics::{Model, StepSummary, Verdict};
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

/// Counters called out under the table when they are not zero, with what they usually mean.
/// The first seven are docs/metrics.md's anomalies.
const CALLOUTS: [(&str, Count); 13] = [
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
        _ => return None,
    })
}

pub(super) fn step_list(steps: &[u32]) -> String {
    let list: Vec<String> = steps.iter().map(u32::to_string).collect();
    let s = if steps.len() == 1 { "" } else { "s" };
    format!("step{s} {}", list.join(", "))
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
            "saturates at {}, {} req/s",
            load_phrase(k.model, load),
            rps(s.throughput_rps)
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
    format!("{saturation}; {failure}.")
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
        facts.push(format!("peak {} req/s (step {step})", rps(peak)));
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
    let prediction = match (u.peak_concurrency, u.peak_throughput_rps) {
        (Some(n), Some(x)) => format!("predicts a peak of {} req/s at {n:.1} concurrent", rps(x)),
        (None, Some(x)) => format!("predicts a ceiling of {} req/s", rps(x)),
        _ => "scales linearly over the measured range".to_owned(),
    };
    Some(format!(
        "sigma {:.4}, kappa {:.6}, lambda {} req/s per client; {prediction} (R² {:.3} over {} steps).",
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
fn cause<'a>(counter: &str, s: &'a StepSummary) -> Option<&'a str> {
    match counter {
        "transport_errors" => s.transport_error.as_deref(),
        _ => None,
    }
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
                cause: figures
                    .iter()
                    .find_map(|s| Some((s.step, cause(counter, s)?.to_owned()))),
            })
        })
        .collect()
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

pub(super) fn status_phrase(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "incomplete: the run did not finish",
        RunStatus::Complete => "complete",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Aborted => "aborted",
    }
}

/// The whole terminal report of a run.
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
    if let Some(line) = usl_line(run) {
        let _ = writeln!(out, "{} {line}", paint("USL:", BOLD, color));
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

    let codes = error_codes(run);
    if !codes.is_empty() {
        let _ = writeln!(
            out,
            "\n{} {}",
            paint("Error responses by code:", BOLD, color),
            codes.join(", ")
        );
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
