//! Measurement state owned by one worker: the counters of docs/metrics.md and HDR histograms, all
//! mergeable with `+=` so workers never share anything until a step ends.

/// docs/metrics.md's two sums of counters, written once for every type that holds their terms
/// under their column names.
macro_rules! derived_counts {
    ($t:ty) => {
        impl $t {
            /// docs/metrics.md's `anomalies`: `duplicate_id + late + unknown_id + null_id +
            /// both_result_error + invalid_jsonrpc + parse_errors`.
            pub fn anomalies(&self) -> u64 {
                self.duplicate_id
                    + self.late
                    + self.unknown_id
                    + self.null_id
                    + self.both_result_error
                    + self.invalid_jsonrpc
                    + self.parse_errors
            }

            /// docs/metrics.md's `rejected`: `http_429 + http_503`.
            pub fn rejected(&self) -> u64 {
                self.http_429 + self.http_503
            }
        }
    };
}

mod correctness;
mod flow;
mod generator;
mod input;
mod scenario;
mod summary;
mod tags;

pub use correctness::{Defect, FINDINGS_KEPT, Finding, IDS_KEPT, Tallies};
pub use flow::{FlowCounters, FlowStats, FlowSummary};
pub use generator::{GeneratorFacts, Observed, bound_hint, judge, late_allowance_us};
pub use input::{AskedKind, ByKind};
pub use tags::Slot;

pub use scenario::{
    EXPECT_PREFIX, FailureReasons, RunCounts, ScenarioNames, ScenarioStats, ScenarioSummary, WHOLE,
};

pub use summary::{
    AuthSummary, Model, NO_OP, OpSummary, Percentiles, RetriesByCause, SessionSummary, StepFacts,
    StepSummary, Verdict, us_to_ms,
};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::AddAssign;
use std::time::Duration;

/// Every count of docs/metrics.md that one worker keeps. Names are the CSV column names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Requests registered (sent or attempted), batch members included.
    pub requests: u64,
    /// Responses that paired a request: `ok + tool_errors + output_schema_violations + errors +
    /// both_result_error + invalid_jsonrpc`.
    pub responses: u64,
    pub ok: u64,
    pub errors: u64,
    pub both_result_error: u64,
    pub invalid_jsonrpc: u64,
    pub duplicate_id: u64,
    pub late: u64,
    pub unknown_id: u64,
    pub null_id: u64,
    pub server_messages: u64,
    pub parse_errors: u64,
    pub missing: u64,
    pub timeouts: u64,
    pub http_429: u64,
    pub http_503: u64,
    pub http_other: u64,
    pub transport_errors: u64,
    pub batches: u64,
    pub batch_rejected: u64,
    pub response_count_mismatch: u64,
    /// Largest `Retry-After` seen, in seconds (merged by maximum).
    pub retry_after_max_s: u64,
    /// Highest number of requests in flight at once (merged by maximum).
    pub in_flight_max: u64,
    /// Error responses by their JSON-RPC error code (absent code: not counted here).
    pub errors_by_code: BTreeMap<i64, u64>,
    /// Legacy HTTP sessions opened anew after the server said the session was gone
    /// (docs/metrics.md, "Sessions").
    #[serde(default)]
    pub reinitializations: u64,
    /// `notifications/progress` received (also counted in `server_messages`).
    pub progress_notifications: u64,
    /// Milliseconds spent with requests waiting because a child's stdin was full.
    pub stdio_write_block_ms: u64,
    /// Requests whose timeout expired before any byte of them was written (waiting for a
    /// connection): never sent, so no server saw them. An end of the pairing identity.
    #[serde(default)]
    pub expired_unsent: u64,
    /// Requests sent again on a fresh connection because the one picked for them was found
    /// closed before any byte of them was written (not an end: the request goes on).
    #[serde(default)]
    pub reconnects_before_send: u64,
    /// SSE answers (2025-11-25) whose stream ended early, after an event with an id and a
    /// `retry:`, resumed with a GET carrying `Last-Event-ID` (not an end: the request goes on).
    #[serde(default)]
    pub sse_resumptions: u64,
    /// Requests whose resumed answer never brought the response (the GET refused, or its
    /// stream ended without it past the resumption bound): a subset of `missing`.
    #[serde(default)]
    pub sse_resumptions_failed: u64,
    /// Requests sent with a progress token (`progress = true`) that ended, one way or another.
    #[serde(default)]
    pub progress_calls: u64,
    /// Progress notifications for a call that had already been answered.
    #[serde(default)]
    pub progress_after_result: u64,
    /// Progress notifications whose `progress` was not above every earlier one of their call.
    #[serde(default)]
    pub progress_down: u64,
    /// Progress notifications whose token names no call of the run that asked for progress
    /// (or that carry no readable token and `progress` value).
    #[serde(default)]
    pub progress_unknown_token: u64,
    /// Calls that ended `missing` after progress came for them: a subset of `missing`.
    #[serde(default)]
    pub progress_then_missing: u64,
    /// HTTP answers that said the session the request carried was gone (404, or a 400 that
    /// says so).
    #[serde(default)]
    pub session_lost: u64,
    /// Re-initializations that gave no usable session.
    #[serde(default)]
    pub reinit_failed: u64,
    /// Microseconds spent re-initializing, summed over the re-initializations (completed or
    /// failed).
    #[serde(default)]
    pub reinit_us: u64,
    /// The longest re-initialization, in microseconds (merged by maximum).
    #[serde(default)]
    pub reinit_max_us: u64,
    /// Requests sent again in a new session after theirs was lost: new requests (in
    /// `requests`), the attempt each replaces ended `http_other`.
    #[serde(default)]
    pub retries_session: u64,
    /// Of `http_other`: requests refused 401 (unauthorized) and 403 (forbidden), whatever
    /// came of them (docs/metrics.md, "Authorization").
    #[serde(default)]
    pub http_401: u64,
    #[serde(default)]
    pub http_403: u64,
    /// POSTs to the token endpoint, and the tokens that replaced an earlier one.
    #[serde(default)]
    pub token_requests: u64,
    #[serde(default)]
    pub token_refreshes: u64,
    /// Requests that ended for want of a token the target takes: answered 401 and not sent
    /// again (a fresh token refused, a static one, a retry already), or failed because no
    /// token could be fetched.
    #[serde(default)]
    pub auth_failures: u64,
    /// Requests answered 401 and sent again with a newer token: new requests (in
    /// `requests`), the attempt each replaces ended `http_other` and `http_401`.
    #[serde(default)]
    pub retries_token: u64,
    /// Responses `input_required` (2026-07-28) that no canned answer of `[input]` met: the
    /// call asked for input and got none. An end of the pairing identity, never `ok`
    /// (docs/metrics.md, "Input nobody answers").
    #[serde(default)]
    pub input_unanswered: u64,
    /// `input_unanswered` by the first kind left unanswered (in the order elicitation,
    /// sampling, roots, other).
    #[serde(default)]
    pub input_unanswered_by_kind: ByKind,
    /// Requests for input the server sent during a call (2025-11-25: `elicitation/create`,
    /// `sampling/createMessage`, `roots/list`) answered with an error for want of a canned
    /// answer: of `server_messages`, not an end.
    #[serde(default)]
    pub input_refused: u64,
    #[serde(default)]
    pub input_refused_by_kind: ByKind,
    /// Of `errors` (or of `http_other`, as it arrived): requests refused with -32022, the
    /// protocol version they carried not served (docs/metrics.md, "Versions refused").
    #[serde(default)]
    pub version_rejected: u64,
    /// Results with `isError: true`, a tool's own failure (unless `--tool-errors ok`): a class
    /// of the pairing identity, not `ok` (schema_version 3).
    #[serde(default)]
    pub tool_errors: u64,
    /// Results whose `structuredContent` breaks their tool's `outputSchema`: a class of the
    /// pairing identity, not `ok` (schema_version 3).
    #[serde(default)]
    pub output_schema_violations: u64,
    /// stdio: lines on a child's stdout that are not JSON (a `console.log`, a banner): a
    /// breakdown of `parse_errors`, each such line counted once.
    #[serde(default)]
    pub stdout_pollution: u64,
    /// stdio: children that exited while their session was in use (their pending calls end
    /// `missing`).
    #[serde(default)]
    pub process_exits: u64,
    /// A process per session: children not started for the fleet's memory budget.
    #[serde(default)]
    pub fleet_budget_refusals: u64,
    /// stdio: the most children alive at once (merged by maximum).
    #[serde(default)]
    pub processes_max: u64,
}

derived_counts!(Counters);

impl Counters {
    /// Requests that ended, one way or another: every term of the pairing identity but
    /// `in_flight_at_end`.
    pub fn ended(&self) -> u64 {
        self.ends().iter().map(|(_, n)| n).sum()
    }

    /// The ends of docs/metrics.md's pairing identity (all but `in_flight_at_end`), by their
    /// column names: every request that ended did so as exactly one of them.
    pub fn ends(&self) -> [(&'static str, u64); 14] {
        [
            ("ok", self.ok),
            ("tool_errors", self.tool_errors),
            ("output_schema_violations", self.output_schema_violations),
            ("input_unanswered", self.input_unanswered),
            ("errors", self.errors),
            ("both_result_error", self.both_result_error),
            ("invalid_jsonrpc", self.invalid_jsonrpc),
            ("missing", self.missing),
            ("timeouts", self.timeouts),
            ("http_429", self.http_429),
            ("http_503", self.http_503),
            ("http_other", self.http_other),
            ("transport_errors", self.transport_errors),
            ("expired_unsent", self.expired_unsent),
        ]
    }

    /// The terms of docs/metrics.md's `anomalies`, by their column names.
    pub fn anomaly_terms(&self) -> [(&'static str, u64); 7] {
        [
            ("duplicate_id", self.duplicate_id),
            ("late", self.late),
            ("unknown_id", self.unknown_id),
            ("null_id", self.null_id),
            ("both_result_error", self.both_result_error),
            ("invalid_jsonrpc", self.invalid_jsonrpc),
            ("parse_errors", self.parse_errors),
        ]
    }
}

/// Calls `$apply!` with the names of every counter that adds up (all but the maxima and the
/// map by code), so adding and taking away list them once.
macro_rules! additive_counters {
    ($apply:ident) => {
        $apply!(
            requests,
            responses,
            ok,
            errors,
            both_result_error,
            invalid_jsonrpc,
            duplicate_id,
            late,
            unknown_id,
            null_id,
            server_messages,
            parse_errors,
            missing,
            timeouts,
            http_429,
            http_503,
            http_other,
            transport_errors,
            batches,
            batch_rejected,
            response_count_mismatch,
            reinitializations,
            progress_notifications,
            stdio_write_block_ms,
            expired_unsent,
            reconnects_before_send,
            sse_resumptions,
            sse_resumptions_failed,
            progress_calls,
            progress_after_result,
            progress_down,
            progress_unknown_token,
            progress_then_missing,
            session_lost,
            reinit_failed,
            reinit_us,
            retries_session,
            http_401,
            http_403,
            token_requests,
            token_refreshes,
            auth_failures,
            retries_token,
            input_unanswered,
            input_refused,
            version_rejected,
            tool_errors,
            output_schema_violations,
            stdout_pollution,
            process_exits,
            fleet_budget_refusals
        )
    };
}

impl Counters {
    /// What is left of these counts once `parts` are taken away (floored at 0): the step's
    /// counts that no operation holds. Maxima and the counts by code are not taken apart.
    pub fn residual<'a>(&self, parts: impl IntoIterator<Item = &'a Counters>) -> Counters {
        let mut left = self.clone();
        left.errors_by_code.clear();
        for p in parts {
            macro_rules! take {
                ($($f:ident),*) => { $( left.$f = left.$f.saturating_sub(p.$f); )* };
            }
            additive_counters!(take);
            left.input_unanswered_by_kind = left
                .input_unanswered_by_kind
                .less(&p.input_unanswered_by_kind);
            left.input_refused_by_kind = left.input_refused_by_kind.less(&p.input_refused_by_kind);
        }
        left
    }
}

impl AddAssign<&Counters> for Counters {
    fn add_assign(&mut self, o: &Counters) {
        macro_rules! sum {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        additive_counters!(sum);
        self.retry_after_max_s = self.retry_after_max_s.max(o.retry_after_max_s);
        self.in_flight_max = self.in_flight_max.max(o.in_flight_max);
        self.reinit_max_us = self.reinit_max_us.max(o.reinit_max_us);
        self.processes_max = self.processes_max.max(o.processes_max);
        for (code, n) in &o.errors_by_code {
            *self.errors_by_code.entry(*code).or_default() += n;
        }
        self.input_unanswered_by_kind += &o.input_unanswered_by_kind;
        self.input_refused_by_kind += &o.input_refused_by_kind;
    }
}

/// Highest value an HDR latency histogram records: one hour, in microseconds.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

/// An HDR histogram of durations in microseconds, 1 µs to 1 h, 3 significant digits.
/// Left out of the serde of the stats that hold one: histograms are written to interval
/// logs (docs/results.md, histograms.hlog), not to JSON.
#[derive(Clone, Debug)]
pub struct LatencyHistogram(Histogram<u64>);

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram(
            Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static bounds are valid"),
        )
    }
}

impl LatencyHistogram {
    /// Records a duration (clamped to 1 µs ..= 1 h; never fails).
    #[inline]
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(us.clamp(1, LATENCY_MAX_US));
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn histogram(&self) -> &Histogram<u64> {
        &self.0
    }

    pub fn reset(&mut self) {
        self.0.reset();
    }
}

impl AddAssign<&LatencyHistogram> for LatencyHistogram {
    fn add_assign(&mut self, o: &LatencyHistogram) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&o.0);
    }
}

/// What one operation measured: a mix entry, or one call of a scenario step. Only the
/// counts that belong to a request are kept here (its registration, its pairing or its end,
/// a duplicate or late answer to it, its latency); the rest stay at step level.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OpStats {
    pub counters: Counters,
    /// The text of the first tool error (`tool_errors`) of the operation.
    #[serde(default)]
    pub tool_error: Option<String>,
    /// The first output schema violation of the operation, as `PATH: MESSAGE`.
    #[serde(default)]
    pub output_schema_violation: Option<String>,
    #[serde(skip)]
    pub latency: LatencyHistogram,
    #[serde(skip)]
    pub service_latency: LatencyHistogram,
}

impl AddAssign<&OpStats> for OpStats {
    fn add_assign(&mut self, o: &OpStats) {
        self.counters += &o.counters;
        self.latency += &o.latency;
        self.service_latency += &o.service_latency;
        if self.tool_error.is_none() {
            self.tool_error.clone_from(&o.tool_error);
        }
        if self.output_schema_violation.is_none() {
            self.output_schema_violation
                .clone_from(&o.output_schema_violation);
        }
    }
}

/// Everything one worker measures in one step. Its serde holds the counts alone (the
/// machine record of a run folder, counts.jsonl); every histogram is named by
/// [`Stats::histograms`] and written to an interval log.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stats {
    pub counters: Counters,
    /// Pairing latency from the moment each request was due (coordinated-omission corrected
    /// in open loop).
    #[serde(skip)]
    pub latency: LatencyHistogram,
    /// Pairing latency from the moment each request was written (the uncorrected figure).
    #[serde(skip)]
    pub service_latency: LatencyHistogram,
    /// Members per batch sent.
    #[serde(skip, default = "count_histogram")]
    pub batch_size: Histogram<u64>,
    /// Calls with a progress token: from the moment each was due to its first progress
    /// notification (the convention of `latency`).
    #[serde(skip)]
    pub first_progress: LatencyHistogram,
    /// Calls with a progress token: the progress notifications each got before it ended.
    #[serde(skip, default = "count_histogram")]
    pub progress_per_call: Histogram<u64>,
    /// Per operation, indexed by the operation's number (grown on first use); the rows of
    /// ops.csv.
    pub ops: Vec<OpStats>,
    /// Per scenario, by scenario number (grown on first use); the rows of scenarios.csv.
    pub scenarios: Vec<ScenarioStats>,
    /// Tasks and input rounds, made on first use (runs without them carry none).
    pub flows: Option<Box<FlowStats>>,
    /// The time of each token fetch (a POST to the token endpoint) of the step.
    #[serde(skip)]
    pub token_fetch: LatencyHistogram,
    /// stdio: each child's start-up, its spawn (until the process runs) and its connect
    /// (from the spawn until `initialize` is answered, or the first answer under 2026-07-28).
    #[serde(skip)]
    pub spawn: LatencyHistogram,
    #[serde(skip)]
    pub connect: LatencyHistogram,
}

/// An empty histogram of counts (batch members, polls, notifications): 3 significant
/// digits, growing to fit.
pub(crate) fn count_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("static bounds are valid")
}

/// Entry `i` of `v`, the vector grown with defaults to hold it: per-operation and
/// per-scenario figures are made on first use, so a step's stats hold only what ran.
#[inline]
fn grown<T: Default>(v: &mut Vec<T>, i: usize) -> &mut T {
    if i >= v.len() {
        v.resize_with(i + 1, T::default);
    }
    &mut v[i]
}

impl Stats {
    /// The stats of operation `op`, made on first use.
    #[inline]
    pub fn op_mut(&mut self, op: u16) -> &mut OpStats {
        grown(&mut self.ops, op as usize)
    }

    /// Adds every operation's counts and latencies into the step's totals: the correlator
    /// counts a request under its operation alone, once, and the totals are made here, once
    /// a second, not once per request.
    pub fn fold_ops(mut self) -> Self {
        for op in &self.ops {
            self.counters += &op.counters;
            self.latency += &op.latency;
            self.service_latency += &op.service_latency;
        }
        self
    }

    /// The stats of tasks and input rounds, made on first use.
    pub fn flows_mut(&mut self) -> &mut FlowStats {
        self.flows.get_or_insert_with(Box::default)
    }

    /// The stats of scenario `i`, made on first use.
    pub fn scenario_mut(&mut self, i: usize) -> &mut ScenarioStats {
        grown(&mut self.scenarios, i)
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            counters: Counters::default(),
            latency: LatencyHistogram::default(),
            service_latency: LatencyHistogram::default(),
            batch_size: count_histogram(),
            first_progress: LatencyHistogram::default(),
            progress_per_call: count_histogram(),
            ops: Vec::new(),
            scenarios: Vec::new(),
            flows: None,
            token_fetch: LatencyHistogram::default(),
            spawn: LatencyHistogram::default(),
            connect: LatencyHistogram::default(),
        }
    }
}

impl AddAssign<&Stats> for Stats {
    fn add_assign(&mut self, o: &Stats) {
        self.counters += &o.counters;
        self.latency += &o.latency;
        self.service_latency += &o.service_latency;
        let _ = self.batch_size.add(&o.batch_size);
        self.first_progress += &o.first_progress;
        let _ = self.progress_per_call.add(&o.progress_per_call);
        for (i, op) in o.ops.iter().enumerate() {
            *self.op_mut(i as u16) += op;
        }
        for (i, sc) in o.scenarios.iter().enumerate() {
            *self.scenario_mut(i) += sc;
        }
        if let Some(f) = &o.flows {
            *self.flows_mut() += f;
        }
        self.token_fetch += &o.token_fetch;
        self.spawn += &o.spawn;
        self.connect += &o.connect;
    }
}
