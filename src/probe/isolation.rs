//! `mcpload probe --isolation`: whether one slow call holds up the others of the same
//! process or session (head-of-line blocking). Each tool's latency is measured alone (a few
//! sequential calls, their median), then with a slow call in flight beside each call; a
//! tool whose latency at least doubles, by at least a quarter of the slow call, is
//! `blocked`, else `isolated`. Every call has a timeout and the whole probe a time budget.

use super::{Observed, Prober, single_body};
use crate::client::{Connected, Connector, McpError, Operation, ServerInfo};
use crate::jsonrpc::Id;
use crate::load::schema_args::arguments_for;
use crate::transport::{AnyTransport, Event, ExchangeId, Outgoing, Transport};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// Calls per measurement: alone, and beside the slow call.
pub const CALLS: usize = 5;
/// The longest one call is waited for.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole probe's time: tools not measured by then are `skipped`.
pub const BUDGET: Duration = Duration::from_secs(180);
/// The ratio (beside the slow call / alone) from which a tool is `blocked`.
pub const BLOCKED_RATIO: f64 = 2.0;
/// Alone medians below this count as this in the ratio: a sub-millisecond call would
/// double from scheduling noise alone.
const RATIO_FLOOR_MS: f64 = 1.0;
/// The longest the slow call is in flight before the measured call is sent (a quarter of
/// its own latency when that is less), so that the server has it first.
const LEAD_MAX: Duration = Duration::from_millis(100);

/// A slow call faster than this (ms) is flagged in the table: what waits for it waits too
/// little to tell from noise.
const SLOW_ENOUGH_MS: f64 = 50.0;

/// What `--isolation` measures.
#[derive(Clone, Debug, Default)]
pub struct IsolationOptions {
    /// Only these tools, in this order (empty: every tool the server lists).
    pub tools: Vec<String>,
    /// The slow call and its arguments (default: the tool whose median alone was largest,
    /// with arguments from its schema).
    pub slow_call: Option<(String, Value)>,
}

/// Everything `probe --isolation` found.
#[derive(Debug, Serialize)]
pub struct IsolationReport {
    pub target: String,
    /// `http`, `stdio` or `sse`.
    pub transport: &'static str,
    pub server: ServerInfo,
    /// Calls per measurement.
    pub calls: usize,
    /// The call kept in flight; `None` when no call could be one.
    pub slow: Option<SlowCall>,
    pub tools: Vec<ToolIsolation>,
}

/// The call kept in flight beside each measured call.
#[derive(Clone, Debug, Serialize)]
pub struct SlowCall {
    pub tool: String,
    pub arguments: Value,
    pub alone_median_ms: f64,
    /// How long it was in flight before each measured call was sent.
    pub lead_ms: f64,
}

/// One tool's latency alone and beside the slow call.
#[derive(Clone, Debug, Serialize)]
pub struct ToolIsolation {
    pub tool: String,
    pub alone_median_ms: Option<f64>,
    pub beside_slow_median_ms: Option<f64>,
    /// Beside the slow call over alone (the alone median floored at 1 ms).
    pub ratio: Option<f64>,
    /// `isolated`, `blocked`, `slow_call` (the tool is the slow call), `no_answer`,
    /// `skipped`.
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The verdict and ratio of a tool whose median was `alone_ms` alone and `beside_ms` beside
/// a slow call whose median alone is `slow_ms`: `blocked` when the ratio is at least
/// [`BLOCKED_RATIO`] and the call waited at least a quarter of the slow call more (it
/// waited for the slow call), else `isolated`.
pub fn verdict_isolation(alone_ms: f64, beside_ms: f64, slow_ms: f64) -> (&'static str, f64) {
    let ratio = beside_ms / alone_ms.max(RATIO_FLOOR_MS);
    let waited = beside_ms - alone_ms >= slow_ms / 4.0;
    let verdict = if ratio >= BLOCKED_RATIO && waited {
        "blocked"
    } else {
        "isolated"
    };
    (verdict, ratio)
}

/// The median of `samples` in milliseconds (`None` when empty).
fn median_ms(samples: &mut [Duration]) -> Option<f64> {
    samples.sort();
    let n = samples.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(ms(samples[n / 2])),
        _ => Some((ms(samples[n / 2 - 1]) + ms(samples[n / 2])) / 2.0),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A measurement's samples: the latencies of the calls answered, and a note when some
/// were not.
struct Samples {
    latencies: Vec<Duration>,
    unanswered: bool,
}

impl Samples {
    fn note(&self, what: &str) -> Option<String> {
        self.unanswered.then(|| {
            format!(
                "{what}: {} of {CALLS} calls answered within {CALL_TIMEOUT:?}",
                self.latencies.len()
            )
        })
    }
}

/// One tool as the probe calls it.
struct Measured {
    tool: String,
    arguments: Value,
    op: Operation,
    alone: Option<f64>,
    note: Option<String>,
}

/// The call kept in flight, as the probe sends it, and its median alone.
struct Slow {
    tool: String,
    arguments: Value,
    op: Operation,
    alone_ms: f64,
}

/// Runs the isolation probe against the target.
pub async fn run_isolation(
    connector: &Connector,
    opts: &IsolationOptions,
) -> Result<IsolationReport, McpError> {
    let started = Instant::now();
    let Connected { server, transport } = connector.connect().await?;
    let mut p = Prober {
        transport,
        server: server.clone(),
        wait: CALL_TIMEOUT,
    };
    let names: Vec<String> = if opts.tools.is_empty() {
        let callable = server.tools.iter().filter(|t| t.invalid.is_none());
        callable.map(|t| t.name.clone()).collect()
    } else {
        opts.tools.clone()
    };
    // Each tool measured alone, or its row already final; in the order asked for.
    let mut measured: Vec<Result<Measured, ToolIsolation>> = Vec::new();
    for name in names {
        let Some(info) = server.tool(&name) else {
            measured.push(Err(skipped(&name, "the server lists no such tool".into())));
            continue;
        };
        if started.elapsed() > BUDGET {
            measured.push(Err(skipped(&name, over_budget())));
            continue;
        }
        let arguments = arguments_for(&info.input_schema);
        let op = p.tool_call(&name, &arguments)?;
        let mut alone = p.alone(&op, &name).await;
        measured.push(Ok(Measured {
            alone: median_ms(&mut alone.latencies),
            note: alone.note("alone"),
            tool: name,
            arguments,
            op,
        }));
    }
    let slow = match &opts.slow_call {
        Some((tool, arguments)) => {
            let op = p.tool_call(tool, arguments)?;
            let mut alone = p.alone(&op, tool).await;
            median_ms(&mut alone.latencies).map(|alone_ms| Slow {
                tool: tool.clone(),
                arguments: arguments.clone(),
                op,
                alone_ms,
            })
        }
        None => measured
            .iter()
            .filter_map(|m| m.as_ref().ok())
            .filter_map(|m| Some((m, m.alone?)))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(m, alone_ms)| Slow {
                tool: m.tool.clone(),
                arguments: m.arguments.clone(),
                op: m.op.clone(),
                alone_ms,
            }),
    };
    let lead = slow.as_ref().map_or(Duration::ZERO, |s| {
        LEAD_MAX.min(Duration::from_secs_f64(s.alone_ms / 4000.0))
    });
    let mut rows = Vec::new();
    for m in measured {
        let m = match m {
            Ok(m) => m,
            Err(row) => {
                rows.push(row);
                continue;
            }
        };
        let row = match (&slow, m.alone) {
            (_, None) => ToolIsolation {
                verdict: "no_answer",
                ..row(&m.tool, None, m.note)
            },
            (None, Some(alone)) => ToolIsolation {
                verdict: "skipped",
                ..row(&m.tool, Some(alone), Some("no slow call answered".into()))
            },
            (Some(s), Some(alone)) if s.tool == m.tool && s.arguments == m.arguments => {
                ToolIsolation {
                    verdict: "slow_call",
                    ..row(&m.tool, Some(alone), m.note)
                }
            }
            (Some(_), Some(alone)) if started.elapsed() > BUDGET => ToolIsolation {
                verdict: "skipped",
                ..row(&m.tool, Some(alone), Some(over_budget()))
            },
            (Some(s), Some(alone)) => {
                let mut beside = p.beside(&s.op, lead, &m.op, &m.tool).await;
                let note = m.note.or_else(|| beside.note("beside the slow call"));
                match median_ms(&mut beside.latencies) {
                    Some(b) => {
                        let (verdict, ratio) = verdict_isolation(alone, b, s.alone_ms);
                        ToolIsolation {
                            beside_slow_median_ms: Some(b),
                            ratio: Some(ratio),
                            verdict,
                            ..row(&m.tool, Some(alone), note)
                        }
                    }
                    None => ToolIsolation {
                        verdict: "no_answer",
                        ..row(&m.tool, Some(alone), note)
                    },
                }
            }
        };
        rows.push(row);
    }
    p.transport.close().await;
    Ok(IsolationReport {
        target: connector.target().describe(),
        transport: p.transport.short_name(),
        server: (*server).clone(),
        calls: CALLS,
        slow: slow.map(|s| SlowCall {
            tool: s.tool,
            arguments: s.arguments,
            alone_median_ms: s.alone_ms,
            lead_ms: ms(lead),
        }),
        tools: rows,
    })
}

fn row(tool: &str, alone: Option<f64>, note: Option<String>) -> ToolIsolation {
    ToolIsolation {
        tool: tool.to_owned(),
        alone_median_ms: alone,
        beside_slow_median_ms: None,
        ratio: None,
        verdict: "skipped",
        note,
    }
}

fn skipped(tool: &str, why: String) -> ToolIsolation {
    row(tool, None, Some(why))
}

fn over_budget() -> String {
    format!("the probe's time budget ({BUDGET:?}) was spent")
}

impl Prober {
    /// [`CALLS`] calls of `op`, one after the other; stops at the first unanswered one.
    async fn alone(&mut self, op: &Operation, tool: &str) -> Samples {
        let mut s = Samples {
            latencies: Vec::new(),
            unanswered: false,
        };
        for n in 0..CALLS {
            let id = Id::Str(format!("iso-{tool}-{n}").into());
            let ex = self.submit(op, &id);
            let sent = Instant::now();
            let mut arrived = Vec::new();
            self.read_until(ex, &id, sent + CALL_TIMEOUT, &mut arrived)
                .await;
            match arrival(&arrived, &id) {
                Some(at) => s.latencies.push(at.saturating_duration_since(sent)),
                None => {
                    s.unanswered = true;
                    break;
                }
            }
        }
        s
    }

    /// [`CALLS`] calls of `op`, each sent `lead` after a call of `slow`, whose answer is
    /// waited for too before the next; stops at the first unanswered one.
    async fn beside(
        &mut self,
        slow: &Operation,
        lead: Duration,
        op: &Operation,
        tool: &str,
    ) -> Samples {
        let mut s = Samples {
            latencies: Vec::new(),
            unanswered: false,
        };
        for n in 0..CALLS {
            let slow_id = Id::Str(format!("iso-slow-{tool}-{n}").into());
            let id = Id::Str(format!("iso-{tool}-beside-{n}").into());
            let mut arrived = Vec::new();
            let slow_ex = self.submit(slow, &slow_id);
            let slow_sent = Instant::now();
            let slow_done = self
                .read_until(slow_ex, &slow_id, slow_sent + lead, &mut arrived)
                .await;
            let ex = self.submit(op, &id);
            let sent = Instant::now();
            self.read_until(ex, &id, sent + CALL_TIMEOUT, &mut arrived)
                .await;
            if !slow_done {
                self.read_until(slow_ex, &slow_id, sent + CALL_TIMEOUT, &mut arrived)
                    .await;
            }
            match arrival(&arrived, &id) {
                Some(at) => s.latencies.push(at.saturating_duration_since(sent)),
                None => {
                    s.unanswered = true;
                    break;
                }
            }
        }
        s
    }

    /// Sends `op` as `id`: over HTTP a POST whose exchange is returned, else a message on
    /// the stream whose answers come apart.
    fn submit(&mut self, op: &Operation, id: &Id) -> Option<ExchangeId> {
        let body = single_body(op, id);
        match &mut self.transport {
            AnyTransport::Http(h) => Some(h.post(body, op.headers(), CALL_TIMEOUT)),
            AnyTransport::Stdio(s) => {
                s.write_raw(&body);
                s.write_raw(b"\n");
                None
            }
            t @ (AnyTransport::LegacySse(_) | AnyTransport::Fleet(_)) => {
                t.send(Outgoing::single(body, None, op.headers().clone()));
                None
            }
        }
    }

    /// Reads answers into `arrived` (each id with the instant it came) until `id` is
    /// answered or `until`: over HTTP the answer of exchange `ex`, else the stream's.
    /// Returns whether that is over (answered, or never to be).
    async fn read_until(
        &mut self,
        ex: Option<ExchangeId>,
        id: &Id,
        until: Instant,
        arrived: &mut Vec<(Id, Instant)>,
    ) -> bool {
        let deadline = tokio::time::Instant::from_std(until);
        match (&mut self.transport, ex) {
            (AnyTransport::Http(h), Some(ex)) => {
                match tokio::time::timeout_at(deadline, h.reply(ex)).await {
                    Err(_) => false,
                    Ok(Err(_)) => true,
                    Ok(Ok(reply)) => {
                        for (at, m) in &reply.messages {
                            record(arrived, m, *at);
                        }
                        true
                    }
                }
            }
            (AnyTransport::Stdio(s), _) => read_stream(&mut **s, id, deadline, arrived).await,
            (t @ (AnyTransport::LegacySse(_) | AnyTransport::Fleet(_)), _) => {
                read_stream(t, id, deadline, arrived).await
            }
            (AnyTransport::Http(_), None) => true,
        }
    }
}

/// When `id` was answered, if it was.
fn arrival(arrived: &[(Id, Instant)], id: &Id) -> Option<Instant> {
    arrived.iter().find(|(i, _)| i == id).map(|(_, at)| *at)
}

/// Notes the responses in the JSON text `bytes`, which came at `at`.
fn record(arrived: &mut Vec<(Id, Instant)>, bytes: &[u8], at: Instant) {
    let mut o = Observed::default();
    o.add_text(bytes);
    arrived.extend(o.responses.into_iter().filter_map(|r| Some((r.id?, at))));
}

/// Reads a stream's events until `id` is answered or `deadline`; true when it was answered
/// or the transport is down.
async fn read_stream<T: Transport>(
    s: &mut T,
    id: &Id,
    deadline: tokio::time::Instant,
    arrived: &mut Vec<(Id, Instant)>,
) -> bool {
    while arrival(arrived, id).is_none() {
        match tokio::time::timeout_at(deadline, s.next_event()).await {
            Err(_) => return false,
            Ok(Event::Message { bytes, at, .. }) => record(arrived, &bytes, at),
            Ok(Event::Down { .. }) => return true,
            Ok(_) => {}
        }
    }
    true
}

/// Renders the report for people: the target, the slow call, then one row per tool.
pub fn render_isolation(r: &IsolationReport) -> String {
    let mut out = crate::probe::render::head(&r.target, r.transport, &r.server, false);
    match &r.slow {
        Some(slow) => {
            let _ = writeln!(
                out,
                "slow call     {} {}: {:.1} ms alone, in flight {:.0} ms before each call",
                slow.tool, slow.arguments, slow.alone_median_ms, slow.lead_ms
            );
            if slow.alone_median_ms < SLOW_ENOUGH_MS {
                let _ = writeln!(
                    out,
                    "              too fast to hold others up visibly: name a slower call \
                     with --slow-tool and --slow-args"
                );
            }
        }
        None => {
            let _ = writeln!(out, "slow call     none answered");
        }
    }
    let _ = writeln!(
        out,
        "calls         {} per tool alone, {} beside the slow call (medians)",
        r.calls, r.calls
    );
    let _ = writeln!(out);
    let num = |v: Option<f64>, unit: &str| v.map_or("-".into(), |v| format!("{v:.1}{unit}"));
    let rows: Vec<[String; 5]> = r
        .tools
        .iter()
        .map(|t| {
            let verdict = match &t.note {
                Some(n) => format!("{} [{n}]", t.verdict),
                None => t.verdict.to_string(),
            };
            [
                t.tool.clone(),
                num(t.alone_median_ms, ""),
                num(t.beside_slow_median_ms, ""),
                num(t.ratio, "x"),
                verdict,
            ]
        })
        .collect();
    let head = ["tool", "alone ms", "beside slow ms", "ratio", "verdict"];
    let width = |i: usize| {
        let cells = rows.iter().map(|r| r[i].len());
        cells.max().unwrap_or(0).max(head[i].len())
    };
    let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
    let _ = writeln!(
        out,
        "{:w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {}",
        head[0], head[1], head[2], head[3], head[4]
    );
    for [t, a, b, q, v] in rows {
        let _ = writeln!(out, "{t:w0$}  {a:>w1$}  {b:>w2$}  {q:>w3$}  {v}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_waits_for_the_slow_one_is_blocked() {
        // Waited out most of an 800 ms call: blocked.
        assert_eq!(verdict_isolation(0.4, 700.0, 800.0).0, "blocked");
        // Untouched: isolated, whatever the floor.
        let (v, ratio) = verdict_isolation(0.4, 0.9, 800.0);
        assert_eq!((v, ratio), ("isolated", 0.9));
        // Doubled from noise, far less than the slow call: isolated.
        assert_eq!(verdict_isolation(3.0, 9.0, 800.0).0, "isolated");
        // A slow call's worth more but less than double: isolated, by the ratio.
        assert_eq!(verdict_isolation(500.0, 900.0, 400.0).0, "isolated");
        assert_eq!(verdict_isolation(10.0, 20.0, 40.0).0, "blocked");
    }

    #[test]
    fn medians_of_odd_even_and_no_samples() {
        let d = Duration::from_millis;
        assert_eq!(median_ms(&mut [d(5), d(1), d(3)]), Some(3.0));
        assert_eq!(median_ms(&mut [d(4), d(1), d(2), d(3)]), Some(2.5));
        assert_eq!(median_ms(&mut []), None);
    }
}
