//! The serialisable figures of one step: one row of steps.csv, one entry of summary.json.
//! Field order is the column order of docs/metrics.md; extra columns come after `verdict`.

use super::{
    Counters, Defect, FlowSummary, GeneratorFacts, LatencyHistogram, RunCounts, Stats, Tallies,
};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Closed loop (N virtual clients) or open loop (R arrivals per second).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Closed,
    Open,
}

/// A step's verdict (docs/metrics.md "The knee").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Saturated,
    Failed,
}

impl Verdict {
    /// Its spelling in steps.csv and summary.json (serde's), and in every report.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Saturated => "saturated",
            Verdict::Failed => "failed",
        }
    }
}

/// One step's figures. Every field is a column of steps.csv, in this order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    /// 1-based step number within the run.
    pub step: u32,
    pub model: Model,
    /// Virtual clients (closed loop); empty in open loop.
    pub concurrency: Option<u64>,
    /// Arrivals per second (open loop); empty in closed loop.
    pub target_rate: Option<f64>,
    /// Measured duration in seconds (warm-up excluded).
    pub duration_s: f64,
    pub requests: u64,
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
    /// Responses paired per second.
    pub throughput_rps: f64,
    /// `ok` per second.
    pub goodput_rps: f64,
    /// (requests − ok) / requests; 0 when no request was sent.
    pub error_rate: f64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub in_flight_max: u64,
    pub retry_after_max_s: Option<u64>,
    /// Open loop: p99 of how late sends left compared with their schedule.
    pub schedule_lag_p99_ms: Option<f64>,
    /// Open loop: arrivals not sent because `max_in_flight` was reached.
    pub dropped_arrivals: Option<u64>,
    pub verdict: Verdict,
    /// Open loop: the same percentiles measured from the actual write (uncorrected).
    pub service_p50_ms: Option<f64>,
    pub service_p90_ms: Option<f64>,
    pub service_p99_ms: Option<f64>,
    pub service_p999_ms: Option<f64>,
    pub service_max_ms: Option<f64>,
    pub service_mean_ms: Option<f64>,
    /// Requests still pending when the step's figures were taken (0 once drained).
    pub in_flight_at_end: u64,
    /// The step was cut short by Ctrl-C / SIGTERM.
    pub interrupted: bool,
    /// Why the target went down for good during the step (a stdio child that exited): the
    /// step failed and the sweep ended there. Empty otherwise.
    #[serde(default)]
    pub target_down: Option<String>,
    /// Requests that timed out before any byte of them was written: an end of the pairing
    /// identity, apart from `timeouts` since no server saw them (schema_version 2).
    #[serde(default)]
    pub expired_unsent: u64,
    /// Requests sent again on a fresh connection because theirs was found closed before any
    /// byte was written (schema_version 2).
    #[serde(default)]
    pub reconnects_before_send: u64,
    /// What ended requests of the step as `transport_errors`: the first such failure seen
    /// (by the first worker to report one), e.g. a refused connect, a TLS certificate
    /// rejected, a connect that took over the connect timeout. Empty when there was none.
    #[serde(default)]
    pub transport_error: Option<String>,
    /// With scenarios: iterations of every scenario started, completed, failed and
    /// interrupted in the step (scenarios.csv's `*` rows added up); empty without.
    #[serde(default)]
    pub iterations_started: Option<u64>,
    #[serde(default)]
    pub iterations_completed: Option<u64>,
    #[serde(default)]
    pub iterations_failed: Option<u64>,
    #[serde(default)]
    pub iterations_interrupted: Option<u64>,
    /// Iterations completed per second: with scenarios, the step's throughput for verdicts,
    /// the knee and the USL fit.
    #[serde(default)]
    pub iterations_per_s: Option<f64>,
    /// `iterations_failed / iterations_started`: the error rate verdicts judge.
    #[serde(default)]
    pub iteration_error_rate: Option<f64>,
    /// Iteration latency (from the scheduled start to the end of the last step).
    #[serde(default)]
    pub iteration_p50_ms: Option<f64>,
    #[serde(default)]
    pub iteration_p90_ms: Option<f64>,
    #[serde(default)]
    pub iteration_p99_ms: Option<f64>,
    /// SSE answers resumed with a GET and `Last-Event-ID` after their stream ended early.
    #[serde(default)]
    pub sse_resumptions: u64,
    /// Requests whose resumed answer never brought the response: a subset of `missing`.
    #[serde(default)]
    pub sse_resumptions_failed: u64,
    /// With task mode or input rounds (docs/metrics.md "Tasks and input rounds"; empty
    /// without): calls, their ends, tasks by terminal state, polls, anomalies, rounds.
    #[serde(default)]
    pub calls: Option<u64>,
    #[serde(default)]
    pub calls_answered: Option<u64>,
    #[serde(default)]
    pub calls_failed: Option<u64>,
    /// Calls answered with a result (not an error) per second, and calls that ended without
    /// one over calls ended: what verdicts, the knee and the USL fit judge with calls of
    /// several requests.
    #[serde(default)]
    pub calls_per_s: Option<f64>,
    #[serde(default)]
    pub call_error_rate: Option<f64>,
    #[serde(default)]
    pub tasks_created: Option<u64>,
    #[serde(default)]
    pub tasks_completed: Option<u64>,
    #[serde(default)]
    pub tasks_failed: Option<u64>,
    #[serde(default)]
    pub tasks_cancelled: Option<u64>,
    #[serde(default)]
    pub tasks_expired: Option<u64>,
    #[serde(default)]
    pub tasks_unfinished: Option<u64>,
    #[serde(default)]
    pub task_polls: Option<u64>,
    #[serde(default)]
    pub tasks_live_max: Option<u64>,
    /// `task_status_regressed + task_forgotten + task_result_mismatch + task_id_reused +
    /// task_poll_errors + tasks_unfinished`.
    #[serde(default)]
    pub task_anomalies: Option<u64>,
    #[serde(default)]
    pub time_to_task_p50_ms: Option<f64>,
    #[serde(default)]
    pub time_to_terminal_p50_ms: Option<f64>,
    #[serde(default)]
    pub time_to_terminal_p99_ms: Option<f64>,
    #[serde(default)]
    pub polls_per_task_p50: Option<u64>,
    #[serde(default)]
    pub input_rounds: Option<u64>,
    /// Responses `input_required` nothing answered: an end of the pairing identity (always
    /// written since schema_version 3; a folder of before has it only with calls of several
    /// requests).
    #[serde(default)]
    pub input_unanswered: Option<u64>,
    #[serde(default)]
    pub input_rounds_exceeded: Option<u64>,
    /// `notifications/progress` received (also counted in `server_messages`).
    #[serde(default)]
    pub progress_notifications: u64,
    /// Calls with a progress token (`progress = true`) that ended in the step.
    #[serde(default)]
    pub progress_calls: u64,
    /// Progress anomalies (docs/metrics.md, "Progress"): for a call already answered; not
    /// above the call's earlier progress; for a token never issued; a call that had progress
    /// and then ended `missing` (a subset of `missing`).
    #[serde(default)]
    pub progress_after_result: u64,
    #[serde(default)]
    pub progress_down: u64,
    #[serde(default)]
    pub progress_unknown_token: u64,
    #[serde(default)]
    pub progress_then_missing: u64,
    /// Calls with a progress token that heard progress: the samples of time to first
    /// progress.
    #[serde(default)]
    pub progressed_calls: u64,
    /// Time to first progress, from the moment the call was due (as pairing latency).
    #[serde(default)]
    pub first_progress_p50_ms: Option<f64>,
    #[serde(default)]
    pub first_progress_p90_ms: Option<f64>,
    #[serde(default)]
    pub first_progress_p99_ms: Option<f64>,
    #[serde(default)]
    pub first_progress_max_ms: Option<f64>,
    /// Progress notifications per call with a progress token, heard before it ended.
    #[serde(default)]
    pub progress_per_call_p50: Option<u64>,
    #[serde(default)]
    pub progress_per_call_p99: Option<u64>,
    #[serde(default)]
    pub progress_per_call_max: Option<u64>,
    #[serde(default)]
    pub progress_per_call_mean: Option<f64>,
    /// HTTP answers that said the session the request carried was gone (docs/metrics.md,
    /// "Sessions").
    #[serde(default)]
    pub session_lost: u64,
    /// Sessions opened anew after a loss, and re-initializations that gave none.
    #[serde(default)]
    pub reinitializations: u64,
    #[serde(default)]
    pub reinit_failed: u64,
    /// Milliseconds spent re-initializing (the load held meanwhile), summed over the
    /// re-initializations of the step; and the longest one (empty when there was none).
    #[serde(default)]
    pub reinit_ms: f64,
    #[serde(default)]
    pub reinit_max_ms: Option<f64>,
    /// Retries of every cause (summary.json's `retries_by_cause`).
    #[serde(default)]
    pub retries: u64,
    /// Correctness, counted by scenarios' `tally` steps (docs/metrics.md, "Correctness");
    /// empty when no tally of it ran in the step.
    #[serde(default)]
    pub lost_updates: Option<u64>,
    #[serde(default)]
    pub double_effects: Option<u64>,
    #[serde(default)]
    pub accepted_conflicts: Option<u64>,
    #[serde(default)]
    pub stale_reads: Option<u64>,
    /// Of `http_other`: requests refused 401 and 403 (docs/metrics.md, "Authorization").
    #[serde(default)]
    pub http_401: u64,
    #[serde(default)]
    pub http_403: u64,
    /// POSTs to the token endpoint, and tokens that replaced an earlier one.
    #[serde(default)]
    pub token_requests: u64,
    #[serde(default)]
    pub token_refreshes: u64,
    /// Requests that ended for want of a token the target takes.
    #[serde(default)]
    pub auth_failures: u64,
    /// How long the token requests took (empty when there was none).
    #[serde(default)]
    pub token_fetch_p50_ms: Option<f64>,
    #[serde(default)]
    pub token_fetch_p99_ms: Option<f64>,
    #[serde(default)]
    pub token_fetch_max_ms: Option<f64>,
    /// The server's requests for input during a call (2025-11-25) answered with an error for
    /// want of a canned answer (docs/metrics.md, "Input nobody answers").
    #[serde(default)]
    pub input_refused: u64,
    /// Of `errors` or `http_other` (as it arrived): requests refused -32022, their protocol
    /// version not served.
    #[serde(default)]
    pub version_rejected: u64,
    /// Results with `isError: true` (schema_version 3): not `ok`, so in `error_rate`;
    /// `--tool-errors ok` counts them `ok` instead.
    #[serde(default)]
    pub tool_errors: u64,
    /// Results whose `structuredContent` breaks their tool's `outputSchema` (schema_version 3).
    #[serde(default)]
    pub output_schema_violations: u64,
    /// The text of the step's first tool error (of the first operation that had one).
    #[serde(default)]
    pub tool_error: Option<String>,
    /// The step's first output schema violation, as `PATH: MESSAGE`.
    #[serde(default)]
    pub output_schema_violation: Option<String>,
    /// Open loop: the median and the largest schedule lag (beside `schedule_lag_p99_ms`).
    #[serde(default)]
    pub schedule_lag_p50_ms: Option<f64>,
    #[serde(default)]
    pub schedule_lag_max_ms: Option<f64>,
    /// The generator's own health (docs/metrics.md, "The generator's own health").
    #[serde(default)]
    pub late_sends: Option<u64>,
    #[serde(default)]
    pub dropped_no_worker: Option<u64>,
    #[serde(default)]
    pub loop_delay_p99_ms: Option<f64>,
    #[serde(default)]
    pub generator_cpu_pct: Option<f64>,
    #[serde(default)]
    pub generator_wait_pct: Option<f64>,
    #[serde(default)]
    pub generator_bound: bool,
    #[serde(default)]
    pub generator_bound_reason: Option<String>,
    /// The watched server's largest RSS and CPU (percent of one core) over the samples of
    /// the step's measured time (docs/results.md, "The server's resources"); empty unwatched.
    #[serde(default)]
    pub server_rss_max_bytes: Option<u64>,
    #[serde(default)]
    pub server_cpu_max_pct: Option<f64>,
    /// stdio: the children's start-up (docs/metrics.md, "A process per session"): spawn
    /// until the process runs, connect until its handshake is answered; empty with no
    /// child started in the step.
    #[serde(default)]
    pub spawn_p50_ms: Option<f64>,
    #[serde(default)]
    pub spawn_p99_ms: Option<f64>,
    #[serde(default)]
    pub connect_p50_ms: Option<f64>,
    #[serde(default)]
    pub connect_p99_ms: Option<f64>,
    /// stdio: the most children alive at once; empty over HTTP.
    #[serde(default)]
    pub processes_max: Option<u64>,
    /// stdio: stdout lines that were not JSON (of `parse_errors`).
    #[serde(default)]
    pub stdout_pollution: u64,
    /// stdio: children that exited while their session was in use.
    #[serde(default)]
    pub process_exits: u64,
    /// A process per session: children not started for the fleet's memory budget (the step
    /// is `failed`).
    #[serde(default)]
    pub fleet_budget_refusals: u64,
    /// The busiest load worker thread's time run plus time waiting for a core, in percent
    /// of the measured wall time (docs/metrics.md, "The generator's own health").
    #[serde(default)]
    pub generator_load_thread_pct: Option<f64>,
}

/// Retries by cause (docs/metrics.md, "Retries"); steps.csv's `retries` is their sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetriesByCause {
    /// Requests sent again in a new session after theirs was lost: each a new request (in
    /// `requests`), the attempt it replaces ended `http_other`.
    pub session_reinit: u64,
    /// Requests sent on another connection because the idle one picked for them was found
    /// closed before any byte of them was written (`reconnects_before_send`): no attempt
    /// left, so not a new request.
    pub reconnect_before_send: u64,
    /// Requests answered 401 and sent again with a newer token: each a new request, the
    /// attempt it replaces ended `http_other` (and `http_401`).
    #[serde(default)]
    pub token_refresh: u64,
}

impl RetriesByCause {
    pub fn of(c: &Counters) -> Self {
        RetriesByCause {
            session_reinit: c.retries_session,
            reconnect_before_send: c.reconnects_before_send,
            token_refresh: c.retries_token,
        }
    }

    pub fn total(&self) -> u64 {
        self.session_reinit + self.reconnect_before_send + self.token_refresh
    }
}

/// What a run's connections saw of their sessions, from the first handshake to the last
/// DELETE, warm-ups included: summary.json's `sessions`, written at the run's end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub session_lost: u64,
    pub reinitializations: u64,
    pub reinit_failed: u64,
    pub reinit_ms: f64,
    pub reinit_max_ms: Option<f64>,
    pub retries_by_cause: RetriesByCause,
}

impl SessionSummary {
    pub fn of(c: &Counters) -> Self {
        let reinit = Reinit::of(c);
        SessionSummary {
            session_lost: c.session_lost,
            reinitializations: c.reinitializations,
            reinit_failed: c.reinit_failed,
            reinit_ms: reinit.total_ms,
            reinit_max_ms: reinit.max_ms,
            retries_by_cause: RetriesByCause::of(c),
        }
    }
}

/// What authorization cost the whole run, from the first token to the last request (the
/// handshake and warm-ups included): summary.json's `auth`, written at the run's end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuthSummary {
    /// POSTs to the token endpoint, and tokens that replaced an earlier one.
    pub token_requests: u64,
    pub token_refreshes: u64,
    /// How long the token requests took.
    pub token_fetch_p50_ms: Option<f64>,
    pub token_fetch_p99_ms: Option<f64>,
    pub token_fetch_max_ms: Option<f64>,
    /// Requests answered 401 and sent again with a newer token.
    pub retries_token_refresh: u64,
    /// Requests that ended for want of a token the target takes.
    pub auth_failures: u64,
    /// Every virtual user had a token of its own (the counts above are summed over them).
    #[serde(default)]
    pub token_per_user: bool,
    /// With `token_per_user`: the tokens held at the run's end, one per user that sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
}

impl AuthSummary {
    /// From the transports' whole-run counts and the credentials' own.
    pub fn of(
        c: &Counters,
        token_requests: u64,
        token_refreshes: u64,
        fetch: &LatencyHistogram,
    ) -> Self {
        let p = Percentiles::of(fetch);
        AuthSummary {
            token_requests,
            token_refreshes,
            token_fetch_p50_ms: p.p50,
            token_fetch_p99_ms: p.p99,
            token_fetch_max_ms: p.max,
            retries_token_refresh: c.retries_token,
            auth_failures: c.auth_failures,
            token_per_user: false,
            users: None,
        }
    }
}

/// Time spent re-initializing, in milliseconds (3 decimals).
struct Reinit {
    total_ms: f64,
    /// `None` when nothing was re-initialized.
    max_ms: Option<f64>,
}

impl Reinit {
    fn of(c: &Counters) -> Self {
        Reinit {
            total_ms: us_to_ms(c.reinit_us as f64),
            max_ms: (c.reinitializations + c.reinit_failed > 0)
                .then(|| us_to_ms(c.reinit_max_us as f64)),
        }
    }
}

/// Percentiles of one latency histogram in milliseconds (3 decimals), `None` when empty.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

impl Percentiles {
    pub fn of(h: &LatencyHistogram) -> Self {
        if h.is_empty() {
            return Percentiles::default();
        }
        let h = h.histogram();
        let q = |q: f64| Some(us_to_ms(h.value_at_quantile(q) as f64));
        Percentiles {
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            max: Some(us_to_ms(h.max() as f64)),
            mean: Some(us_to_ms(h.mean())),
        }
    }
}

/// Percentiles of a histogram of counts (polls per iteration, progress per call), `None`
/// when it is empty; the mean to 2 decimals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct CountPercentiles {
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
    pub mean: Option<f64>,
}

impl CountPercentiles {
    pub(super) fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return CountPercentiles::default();
        }
        CountPercentiles {
            p50: Some(h.value_at_quantile(0.5)),
            p99: Some(h.value_at_quantile(0.99)),
            max: Some(h.max()),
            mean: Some((h.mean() * 100.0).round() / 100.0),
        }
    }
}

/// Microseconds to milliseconds, rounded to 3 decimals.
pub fn us_to_ms(us: f64) -> f64 {
    (us).round() / 1000.0
}

/// What the engine knows of a step besides its merged [`Stats`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepFacts {
    pub step: u32,
    pub model: Model,
    pub concurrency: Option<u64>,
    pub target_rate: Option<f64>,
    pub duration_s: f64,
    /// Open loop only: p99 schedule lag in ms, and arrivals dropped at `max_in_flight`.
    pub schedule_lag_p99_ms: Option<f64>,
    pub dropped_arrivals: Option<u64>,
    /// Open loop only: the median and the largest schedule lag in ms.
    #[serde(default)]
    pub schedule_lag_p50_ms: Option<f64>,
    #[serde(default)]
    pub schedule_lag_max_ms: Option<f64>,
    /// What the generator saw of itself, and whether it limited the step.
    #[serde(default)]
    pub generator: GeneratorFacts,
    pub in_flight_at_end: u64,
    pub interrupted: bool,
    /// Why the target went down for good during the step, when it did.
    pub target_down: Option<String>,
    /// The first transport failure that ended requests of the step, when one did.
    pub transport_error: Option<String>,
}

impl StepFacts {
    /// Sets `schedule_lag_p99_ms` from the step's schedule lag (open loop; none without a
    /// send or in closed loop).
    pub fn set_lag(&mut self, lag: &LatencyHistogram) {
        let h = (self.model == Model::Open && !lag.is_empty()).then(|| lag.histogram());
        let ms = |us: u64| us as f64 / 1000.0;
        self.schedule_lag_p50_ms = h.map(|h| ms(h.value_at_quantile(0.5)));
        self.schedule_lag_p99_ms = h.map(|h| ms(h.value_at_quantile(0.99)));
        self.schedule_lag_max_ms = h.map(|h| ms(h.max()));
    }

    /// A finished closed-loop step with nothing but its level and length known (no open-loop
    /// figures, nothing left in flight).
    pub fn closed(step: u32, concurrency: u64, duration_s: f64) -> Self {
        StepFacts {
            step,
            model: Model::Closed,
            concurrency: Some(concurrency),
            target_rate: None,
            duration_s,
            schedule_lag_p99_ms: None,
            dropped_arrivals: None,
            schedule_lag_p50_ms: None,
            schedule_lag_max_ms: None,
            generator: GeneratorFacts::default(),
            in_flight_at_end: 0,
            interrupted: false,
            target_down: None,
            transport_error: None,
        }
    }
}

derived_counts!(StepSummary);

impl StepSummary {
    /// Builds the row from the merged stats; `verdict` starts `Ok` and is set by the analysis.
    pub fn new(f: StepFacts, s: &Stats) -> Self {
        let c: &Counters = &s.counters;
        let rates = Rates::of(c, f.duration_s);
        let lat = Percentiles::of(&s.latency);
        let service = match f.model {
            Model::Open => Percentiles::of(&s.service_latency),
            Model::Closed => Percentiles::default(),
        };
        let first_progress = Percentiles::of(&s.first_progress);
        let per_call = CountPercentiles::of(&s.progress_per_call);
        let reinit = Reinit::of(c);
        let token_fetch = Percentiles::of(&s.token_fetch);
        let spawn = Percentiles::of(&s.spawn);
        let connect = Percentiles::of(&s.connect);
        StepSummary {
            step: f.step,
            model: f.model,
            concurrency: f.concurrency,
            target_rate: f.target_rate,
            duration_s: f.duration_s,
            requests: c.requests,
            responses: c.responses,
            ok: c.ok,
            errors: c.errors,
            both_result_error: c.both_result_error,
            invalid_jsonrpc: c.invalid_jsonrpc,
            duplicate_id: c.duplicate_id,
            late: c.late,
            unknown_id: c.unknown_id,
            null_id: c.null_id,
            server_messages: c.server_messages,
            parse_errors: c.parse_errors,
            missing: c.missing,
            timeouts: c.timeouts,
            http_429: c.http_429,
            http_503: c.http_503,
            http_other: c.http_other,
            transport_errors: c.transport_errors,
            batches: c.batches,
            batch_rejected: c.batch_rejected,
            response_count_mismatch: c.response_count_mismatch,
            throughput_rps: rates.throughput,
            goodput_rps: rates.goodput,
            error_rate: rates.error_rate,
            p50_ms: lat.p50,
            p90_ms: lat.p90,
            p99_ms: lat.p99,
            p999_ms: lat.p999,
            max_ms: lat.max,
            mean_ms: lat.mean,
            in_flight_max: c.in_flight_max,
            retry_after_max_s: (c.rejected() > 0).then_some(c.retry_after_max_s),
            schedule_lag_p99_ms: f.schedule_lag_p99_ms,
            dropped_arrivals: f.dropped_arrivals,
            verdict: Verdict::Ok,
            service_p50_ms: service.p50,
            service_p90_ms: service.p90,
            service_p99_ms: service.p99,
            service_p999_ms: service.p999,
            service_max_ms: service.max,
            service_mean_ms: service.mean,
            in_flight_at_end: f.in_flight_at_end,
            interrupted: f.interrupted,
            target_down: f.target_down,
            expired_unsent: c.expired_unsent,
            reconnects_before_send: c.reconnects_before_send,
            transport_error: f.transport_error,
            iterations_started: None,
            iterations_completed: None,
            iterations_failed: None,
            iterations_interrupted: None,
            iterations_per_s: None,
            iteration_error_rate: None,
            iteration_p50_ms: None,
            iteration_p90_ms: None,
            iteration_p99_ms: None,
            sse_resumptions: c.sse_resumptions,
            sse_resumptions_failed: c.sse_resumptions_failed,
            calls: None,
            calls_answered: None,
            calls_failed: None,
            calls_per_s: None,
            call_error_rate: None,
            tasks_created: None,
            tasks_completed: None,
            tasks_failed: None,
            tasks_cancelled: None,
            tasks_expired: None,
            tasks_unfinished: None,
            task_polls: None,
            tasks_live_max: None,
            task_anomalies: None,
            time_to_task_p50_ms: None,
            time_to_terminal_p50_ms: None,
            time_to_terminal_p99_ms: None,
            polls_per_task_p50: None,
            input_rounds: None,
            input_unanswered: Some(c.input_unanswered),
            input_rounds_exceeded: None,
            progress_notifications: c.progress_notifications,
            progress_calls: c.progress_calls,
            progress_after_result: c.progress_after_result,
            progress_down: c.progress_down,
            progress_unknown_token: c.progress_unknown_token,
            progress_then_missing: c.progress_then_missing,
            progressed_calls: s.first_progress.len(),
            first_progress_p50_ms: first_progress.p50,
            first_progress_p90_ms: first_progress.p90,
            first_progress_p99_ms: first_progress.p99,
            first_progress_max_ms: first_progress.max,
            progress_per_call_p50: per_call.p50,
            progress_per_call_p99: per_call.p99,
            progress_per_call_max: per_call.max,
            progress_per_call_mean: per_call.mean,
            session_lost: c.session_lost,
            reinitializations: c.reinitializations,
            reinit_failed: c.reinit_failed,
            reinit_ms: reinit.total_ms,
            reinit_max_ms: reinit.max_ms,
            retries: RetriesByCause::of(c).total(),
            lost_updates: None,
            double_effects: None,
            accepted_conflicts: None,
            stale_reads: None,
            http_401: c.http_401,
            http_403: c.http_403,
            token_requests: c.token_requests,
            token_refreshes: c.token_refreshes,
            auth_failures: c.auth_failures,
            token_fetch_p50_ms: token_fetch.p50,
            token_fetch_p99_ms: token_fetch.p99,
            token_fetch_max_ms: token_fetch.max,
            input_refused: c.input_refused,
            version_rejected: c.version_rejected,
            tool_errors: c.tool_errors,
            output_schema_violations: c.output_schema_violations,
            tool_error: s.ops.iter().find_map(|o| o.tool_error.clone()),
            output_schema_violation: s.ops.iter().find_map(|o| o.output_schema_violation.clone()),
            schedule_lag_p50_ms: f.schedule_lag_p50_ms,
            schedule_lag_max_ms: f.schedule_lag_max_ms,
            late_sends: f.generator.late_sends,
            dropped_no_worker: f.generator.dropped_no_worker,
            loop_delay_p99_ms: f.generator.loop_delay_p99_ms,
            generator_cpu_pct: f.generator.cpu_pct,
            generator_wait_pct: f.generator.wait_pct,
            generator_bound: f.generator.bound,
            generator_bound_reason: f.generator.bound_reason,
            server_rss_max_bytes: None,
            server_cpu_max_pct: None,
            spawn_p50_ms: spawn.p50,
            spawn_p99_ms: spawn.p99,
            connect_p50_ms: connect.p50,
            connect_p99_ms: connect.p99,
            processes_max: (c.processes_max > 0).then_some(c.processes_max),
            stdout_pollution: c.stdout_pollution,
            process_exits: c.process_exits,
            fleet_budget_refusals: c.fleet_budget_refusals,
            generator_load_thread_pct: f.generator.load_thread_pct,
        }
        .with_iterations(s)
        .with_flows(s)
    }

    /// Fills the task and input columns when the step ran calls of several requests.
    fn with_flows(mut self, s: &Stats) -> Self {
        let Some(f) = &s.flows else {
            return self;
        };
        let sum = FlowSummary::of(f);
        let c = &sum.counters;
        self.calls = Some(c.calls);
        self.calls_answered = Some(c.calls_answered);
        self.calls_failed = Some(c.calls_failed);
        self.calls_per_s = Some(c.calls_per_s(self.duration_s));
        self.call_error_rate = Some(c.call_error_rate());
        self.tasks_created = Some(c.tasks_created);
        self.tasks_completed = Some(c.tasks_completed);
        self.tasks_failed = Some(c.tasks_failed);
        self.tasks_cancelled = Some(c.tasks_cancelled);
        self.tasks_expired = Some(c.tasks_expired);
        self.tasks_unfinished = Some(c.tasks_unfinished);
        self.task_polls = Some(c.task_polls);
        self.tasks_live_max = Some(c.tasks_live_max);
        self.task_anomalies = Some(c.task_anomalies());
        self.time_to_task_p50_ms = sum.time_to_task_p50_ms;
        self.time_to_terminal_p50_ms = sum.time_to_terminal_p50_ms;
        self.time_to_terminal_p99_ms = sum.time_to_terminal_p99_ms;
        self.polls_per_task_p50 = sum.polls_per_task_p50;
        self.input_rounds = Some(c.input_rounds);
        self.input_rounds_exceeded = Some(c.input_rounds_exceeded);
        self
    }

    /// Fills the iteration columns when the step ran scenarios.
    fn with_iterations(mut self, s: &Stats) -> Self {
        if s.scenarios.is_empty() {
            return self;
        }
        let mut all = RunCounts::default();
        let mut tallies = Tallies::default();
        for sc in &s.scenarios {
            all += &sc.iterations;
            tallies += &sc.tallies;
        }
        self.lost_updates = tallies.get(Defect::LostUpdates);
        self.double_effects = tallies.get(Defect::DoubleEffects);
        self.accepted_conflicts = tallies.get(Defect::AcceptedConflicts);
        self.stale_reads = tallies.get(Defect::StaleReads);
        let lat = Percentiles::of(&all.latency);
        self.iterations_started = Some(all.started);
        self.iterations_completed = Some(all.completed);
        self.iterations_failed = Some(all.failed);
        self.iterations_interrupted = Some(all.interrupted);
        self.iterations_per_s = Some(all.completed_per_s(self.duration_s));
        self.iteration_error_rate = Some(all.error_rate());
        self.iteration_p50_ms = lat.p50;
        self.iteration_p90_ms = lat.p90;
        self.iteration_p99_ms = lat.p99;
        self
    }

    /// The figures verdicts, the knee and the USL fit judge: with scenarios, a copy whose
    /// throughput, error rate and latency percentiles are the iterations'; with calls of
    /// several requests (tasks, input rounds), whose throughput and error rate are the
    /// calls'; else itself.
    pub fn judged(&self) -> StepSummary {
        let mut v = self.clone();
        if let (Some(rate), Some(err)) = (self.iterations_per_s, self.iteration_error_rate) {
            v.throughput_rps = rate;
            v.goodput_rps = rate;
            v.error_rate = err;
            v.p50_ms = self.iteration_p50_ms;
            v.p90_ms = self.iteration_p90_ms;
            v.p99_ms = self.iteration_p99_ms;
        } else if let (Some(rate), Some(err)) = (self.calls_per_s, self.call_error_rate) {
            // The step's latency is the calls' already (docs/metrics.md).
            v.throughput_rps = rate;
            v.goodput_rps = rate;
            v.error_rate = err;
        }
        v
    }

    /// The step's load: concurrency (closed loop) or target rate (open loop).
    pub fn load(&self) -> f64 {
        match self.model {
            Model::Closed => self.concurrency.unwrap_or(0) as f64,
            Model::Open => self.target_rate.unwrap_or(0.0),
        }
    }
}

/// The name of ops.csv's row that holds what belongs to no operation.
pub const NO_OP: &str = "-";

/// One row of ops.csv: one operation's figures in one step (docs/results.md). The row named
/// [`NO_OP`] holds the step's counts that belong to no request (`unknown_id`, `null_id`,
/// `parse_errors`, `server_messages`, batches), so a step's rows add up to its steps.csv row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpSummary {
    pub step: u32,
    pub op: String,
    pub model: Model,
    pub concurrency: Option<u64>,
    pub target_rate: Option<f64>,
    pub duration_s: f64,
    pub requests: u64,
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
    pub expired_unsent: u64,
    pub batches: u64,
    pub batch_rejected: u64,
    pub response_count_mismatch: u64,
    pub throughput_rps: f64,
    pub goodput_rps: f64,
    pub error_rate: f64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub service_p50_ms: Option<f64>,
    pub service_p90_ms: Option<f64>,
    pub service_p99_ms: Option<f64>,
    pub service_p999_ms: Option<f64>,
    pub service_max_ms: Option<f64>,
    pub service_mean_ms: Option<f64>,
    /// Its responses `input_required` nothing answered (docs/metrics.md, "Input nobody
    /// answers").
    #[serde(default)]
    pub input_unanswered: u64,
    /// Of its `errors` or `http_other`: requests refused -32022.
    #[serde(default)]
    pub version_rejected: u64,
    #[serde(default)]
    pub tool_errors: u64,
    #[serde(default)]
    pub output_schema_violations: u64,
    /// The text of the operation's first tool error in the step.
    #[serde(default)]
    pub tool_error: Option<String>,
    /// The operation's first output schema violation in the step, as `PATH: MESSAGE`.
    #[serde(default)]
    pub output_schema_violation: Option<String>,
}

derived_counts!(OpSummary);

impl OpSummary {
    /// The rows of one step: one per named operation (in `names` order, those that sent
    /// nothing left out), then the [`NO_OP`] row.
    pub fn rows(step: &StepSummary, stats: &Stats, names: &[String]) -> Vec<OpSummary> {
        let empty = LatencyHistogram::default();
        let mut rows: Vec<OpSummary> = stats
            .ops
            .iter()
            .enumerate()
            .filter(|(_, o)| o.counters.requests > 0 || o.counters.ended() > 0)
            .map(|(i, o)| {
                let name = names.get(i).cloned().unwrap_or_else(|| format!("op{i}"));
                OpSummary::new(step, name, &o.counters, &o.latency, &o.service_latency)
                    .with_first_texts(o)
            })
            .collect();
        let rest = stats
            .counters
            .residual(stats.ops.iter().map(|o| &o.counters));
        rows.push(OpSummary::new(step, NO_OP.into(), &rest, &empty, &empty));
        rows
    }

    /// The operation's first tool error and output schema violation.
    fn with_first_texts(mut self, o: &super::OpStats) -> Self {
        self.tool_error.clone_from(&o.tool_error);
        self.output_schema_violation
            .clone_from(&o.output_schema_violation);
        self
    }

    fn new(
        step: &StepSummary,
        op: String,
        c: &Counters,
        latency: &LatencyHistogram,
        service: &LatencyHistogram,
    ) -> Self {
        let rates = Rates::of(c, step.duration_s);
        let lat = Percentiles::of(latency);
        let service = match step.model {
            Model::Open => Percentiles::of(service),
            Model::Closed => Percentiles::default(),
        };
        OpSummary {
            step: step.step,
            op,
            model: step.model,
            concurrency: step.concurrency,
            target_rate: step.target_rate,
            duration_s: step.duration_s,
            requests: c.requests,
            responses: c.responses,
            ok: c.ok,
            errors: c.errors,
            both_result_error: c.both_result_error,
            invalid_jsonrpc: c.invalid_jsonrpc,
            duplicate_id: c.duplicate_id,
            late: c.late,
            unknown_id: c.unknown_id,
            null_id: c.null_id,
            server_messages: c.server_messages,
            parse_errors: c.parse_errors,
            missing: c.missing,
            timeouts: c.timeouts,
            http_429: c.http_429,
            http_503: c.http_503,
            http_other: c.http_other,
            transport_errors: c.transport_errors,
            expired_unsent: c.expired_unsent,
            batches: c.batches,
            batch_rejected: c.batch_rejected,
            response_count_mismatch: c.response_count_mismatch,
            throughput_rps: rates.throughput,
            goodput_rps: rates.goodput,
            error_rate: rates.error_rate,
            p50_ms: lat.p50,
            p90_ms: lat.p90,
            p99_ms: lat.p99,
            p999_ms: lat.p999,
            max_ms: lat.max,
            mean_ms: lat.mean,
            service_p50_ms: service.p50,
            service_p90_ms: service.p90,
            service_p99_ms: service.p99,
            service_p999_ms: service.p999,
            service_max_ms: service.max,
            service_mean_ms: service.mean,
            input_unanswered: c.input_unanswered,
            version_rejected: c.version_rejected,
            tool_errors: c.tool_errors,
            output_schema_violations: c.output_schema_violations,
            tool_error: None,
            output_schema_violation: None,
        }
    }
}

/// Throughput, goodput and error rate of some counts over a step's length.
struct Rates {
    throughput: f64,
    goodput: f64,
    error_rate: f64,
}

impl Rates {
    fn of(c: &Counters, duration_s: f64) -> Self {
        Rates {
            throughput: per_second(c.responses, duration_s),
            goodput: per_second(c.ok, duration_s),
            error_rate: share(c.requests - c.ok.min(c.requests), c.requests),
        }
    }
}

/// `n` per second over `duration_s`; 0 over a step of no length.
pub(super) fn per_second(n: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        n as f64 / duration_s
    } else {
        0.0
    }
}

/// `part / whole`; 0 when `whole` is 0.
pub(super) fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_words_are_their_serde_names() {
        for v in [Verdict::Ok, Verdict::Saturated, Verdict::Failed] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
