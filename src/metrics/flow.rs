//! What calls of more than one request measured (docs/metrics.md "Tasks and input rounds"):
//! tasks (creation, terminal states, polls, the task anomalies) and input-required rounds;
//! mergeable with `+=` like the rest of a worker's stats.

use super::{LatencyHistogram, Percentiles};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// The counts of docs/metrics.md's task and input tables. Names are the CSV column names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowCounters {
    /// Calls that took a task, a round or more, or both: calls of an operation run as a task
    /// or with `[input]` answers, whatever they turned out to be.
    pub calls: u64,
    /// Calls that ended with their final answer (a result or an error), all rounds and polls
    /// done; their whole latency is the operation's.
    pub calls_answered: u64,
    /// Calls whose final answer was a result (a tool error included), not an error.
    pub calls_ok: u64,
    /// Calls that ended without one: a request of theirs unanswered, a task cancelled at the
    /// timeout, an input kind unanswered, too many rounds.
    pub calls_failed: u64,
    pub tasks_created: u64,
    /// Terminal states the client saw (the last poll's status).
    pub tasks_completed: u64,
    pub tasks_failed: u64,
    pub tasks_cancelled: u64,
    /// Tasks unknown to the server (-32602) once their `ttl` had passed.
    pub tasks_expired: u64,
    /// Tasks still working at the call's timeout (cancelled with `tasks/cancel`).
    pub tasks_unfinished: u64,
    /// Calls the step's end interrupted (a task of theirs still working is cancelled with
    /// `tasks/cancel`).
    pub calls_interrupted: u64,
    /// `tasks/get` requests sent.
    pub task_polls: u64,
    /// Anomaly: a task reported terminal, then not terminal or terminal otherwise.
    pub task_status_regressed: u64,
    /// Anomaly: a task unknown to the server (-32602) before its `ttl` had passed.
    pub task_forgotten: u64,
    /// Anomaly: a terminal status and the result it ended with disagree.
    pub task_result_mismatch: u64,
    /// Anomaly: a task id given for a call when another call of the run already had it.
    pub task_id_reused: u64,
    /// Anomaly: a `tasks/get` answered with an error other than an unknown task.
    pub task_poll_errors: u64,
    /// Most tasks live at once (merged as `in_flight_max` is: workers' peaks added).
    pub tasks_live_max: u64,
    /// `input_required` answers taken up (each a round).
    pub input_rounds: u64,
    /// Calls ended because they asked for more rounds than `input.max_rounds`.
    pub input_rounds_exceeded: u64,
}

impl AddAssign<&FlowCounters> for FlowCounters {
    fn add_assign(&mut self, o: &FlowCounters) {
        macro_rules! sum {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        sum!(
            calls,
            calls_answered,
            calls_ok,
            calls_failed,
            tasks_created,
            tasks_completed,
            tasks_failed,
            tasks_cancelled,
            tasks_expired,
            tasks_unfinished,
            calls_interrupted,
            task_polls,
            task_status_regressed,
            task_forgotten,
            task_result_mismatch,
            task_id_reused,
            task_poll_errors,
            input_rounds,
            input_rounds_exceeded
        );
        self.tasks_live_max = self.tasks_live_max.max(o.tasks_live_max);
    }
}

impl FlowCounters {
    /// Calls answered with a result per second: with calls of several requests, the
    /// throughput verdicts, the knee and the USL fit judge.
    pub fn calls_per_s(&self, duration_s: f64) -> f64 {
        if duration_s > 0.0 {
            self.calls_ok as f64 / duration_s
        } else {
            0.0
        }
    }

    /// Calls that ended without a result (failed, or answered with an error) over calls
    /// ended; 0 when none ended.
    pub fn call_error_rate(&self) -> f64 {
        let ended = self.calls_answered + self.calls_failed;
        if ended == 0 {
            0.0
        } else {
            (ended - self.calls_ok) as f64 / ended as f64
        }
    }

    /// The task anomalies added up.
    pub fn task_anomalies(&self) -> u64 {
        self.task_status_regressed
            + self.task_forgotten
            + self.task_result_mismatch
            + self.task_id_reused
            + self.task_poll_errors
            + self.tasks_unfinished
    }
}

/// Counts and histograms of one worker's multi-request calls in one interval.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowStats {
    pub counters: FlowCounters,
    /// From a task call's first send to its task's creation answer.
    #[serde(skip)]
    pub time_to_task: LatencyHistogram,
    /// From a task call's first send to the poll that saw it terminal.
    #[serde(skip)]
    pub time_to_terminal: LatencyHistogram,
    /// `tasks/get` per task that reached a terminal state.
    #[serde(skip, default = "super::count_histogram")]
    pub polls_per_task: Histogram<u64>,
    /// Input rounds per call answered (0 included).
    #[serde(skip, default = "super::count_histogram")]
    pub rounds_per_call: Histogram<u64>,
}

impl Default for FlowStats {
    fn default() -> Self {
        FlowStats {
            counters: FlowCounters::default(),
            time_to_task: LatencyHistogram::default(),
            time_to_terminal: LatencyHistogram::default(),
            polls_per_task: super::count_histogram(),
            rounds_per_call: super::count_histogram(),
        }
    }
}

impl AddAssign<&FlowStats> for FlowStats {
    fn add_assign(&mut self, o: &FlowStats) {
        self.counters += &o.counters;
        self.time_to_task += &o.time_to_task;
        self.time_to_terminal += &o.time_to_terminal;
        // Auto-resizing histograms: adding cannot fail.
        let _ = self.polls_per_task.add(&o.polls_per_task);
        let _ = self.rounds_per_call.add(&o.rounds_per_call);
    }
}

/// A step's multi-request calls, for steps.csv and summary.json.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    #[serde(flatten)]
    pub counters: FlowCounters,
    pub time_to_task_p50_ms: Option<f64>,
    pub time_to_task_p99_ms: Option<f64>,
    pub time_to_terminal_p50_ms: Option<f64>,
    pub time_to_terminal_p99_ms: Option<f64>,
    pub polls_per_task_p50: Option<u64>,
    pub polls_per_task_max: Option<u64>,
    pub rounds_per_call_p50: Option<u64>,
    pub rounds_per_call_max: Option<u64>,
}

impl FlowSummary {
    pub fn of(s: &FlowStats) -> Self {
        let task = Percentiles::of(&s.time_to_task);
        let terminal = Percentiles::of(&s.time_to_terminal);
        let count = |h: &Histogram<u64>, q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q));
        FlowSummary {
            counters: s.counters.clone(),
            time_to_task_p50_ms: task.p50,
            time_to_task_p99_ms: task.p99,
            time_to_terminal_p50_ms: terminal.p50,
            time_to_terminal_p99_ms: terminal.p99,
            polls_per_task_p50: count(&s.polls_per_task, 0.5),
            polls_per_task_max: (!s.polls_per_task.is_empty()).then(|| s.polls_per_task.max()),
            rounds_per_call_p50: count(&s.rounds_per_call, 0.5),
            rounds_per_call_max: (!s.rounds_per_call.is_empty()).then(|| s.rounds_per_call.max()),
        }
    }
}
