//! Ground truth out: the target's own counters (relaxed atomics; a lock only for operations
//! outside the fixed registry), the same per operation, and their serialisable snapshot
//! served at `GET /stats` and written by `--stats FILE`.

use super::faults::FaultKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// What a correct client counts for the messages this server wrote, one field per counter of
/// docs/metrics.md. The server tallies each message as it writes it (see docs/target.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum View {
    Ok,
    Errors,
    BothResultError,
    InvalidJsonrpc,
    DuplicateId,
    UnknownId,
    NullId,
    ServerMessages,
    ParseErrors,
    Missing,
    HttpOther,
    ResponseCountMismatch,
    ToolErrors,
    OutputSchemaViolations,
}

const VIEWS: usize = 14;

/// Statuses other than 2xx that the target answers with, counted one by one.
const STATUSES: [u16; 10] = [400, 401, 403, 404, 405, 406, 413, 415, 429, 503];

/// The operations counted without a lock: every method, tool, prompt and listed resource
/// the target serves. Others get a slot on first sight, up to [`OTHER_OPERATIONS_MAX`].
pub(super) const KNOWN_OPERATIONS: [&str; 35] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "echo",
    "sleep",
    "fail",
    "tool_error",
    "payload",
    "progress",
    "job_start",
    "job_status",
    "job_report",
    "job_lookup",
    "counter_add",
    "counter_read",
    "slow_task",
    "task_only",
    "ask_input",
    "region_echo",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
    "tasks/list",
    "tasks/update",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "mem://item/1",
    "mem://item/2",
    "mem://item/3",
    "prompts/list",
    "prompts/get",
    "greet",
];

/// Names outside [`KNOWN_OPERATIONS`] that get a slot of their own (unknown tools, other
/// resource URIs, unknown methods); past that, all share [`OTHER_OPERATIONS`], so a client
/// inventing names cannot grow the map.
const OTHER_OPERATIONS_MAX: usize = 256;
const OTHER_OPERATIONS: &str = "(other)";

/// One operation's counters.
#[derive(Debug, Default)]
pub(crate) struct OpCounters {
    requests: AtomicU64,
    answered_ok: AtomicU64,
    answered_error: AtomicU64,
    cancelled: AtomicU64,
    view: [AtomicU64; VIEWS],
}

/// Every operation's counters, by name.
#[derive(Debug)]
struct Operations {
    known: [Arc<OpCounters>; KNOWN_OPERATIONS.len()],
    others: Mutex<BTreeMap<String, Arc<OpCounters>>>,
    overflow: Arc<OpCounters>,
}

impl Default for Operations {
    fn default() -> Self {
        Operations {
            known: std::array::from_fn(|_| Arc::default()),
            others: Mutex::default(),
            overflow: Arc::default(),
        }
    }
}

impl Operations {
    fn get(&self, name: &str) -> Arc<OpCounters> {
        if let Some(i) = KNOWN_OPERATIONS.iter().position(|k| *k == name) {
            return Arc::clone(&self.known[i]);
        }
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(op) = others.get(name) {
            return Arc::clone(op);
        }
        if others.len() >= OTHER_OPERATIONS_MAX {
            return Arc::clone(&self.overflow);
        }
        let op = Arc::new(OpCounters::default());
        others.insert(name.to_owned(), Arc::clone(&op));
        op
    }

    /// The operations that saw anything, by name.
    fn snapshot(&self) -> BTreeMap<String, OperationCounts> {
        let others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        KNOWN_OPERATIONS
            .iter()
            .copied()
            .zip(self.known.iter())
            .chain(others.iter().map(|(k, v)| (k.as_str(), v)))
            .chain(std::iter::once((OTHER_OPERATIONS, &self.overflow)))
            .map(|(name, op)| (name.to_owned(), op.snapshot()))
            .filter(|(_, counts)| *counts != OperationCounts::default())
            .collect()
    }
}

impl OpCounters {
    fn snapshot(&self) -> OperationCounts {
        let g = |a: &AtomicU64| a.load(Relaxed);
        OperationCounts {
            requests: g(&self.requests),
            answered_ok: g(&self.answered_ok),
            answered_error: g(&self.answered_error),
            cancelled: g(&self.cancelled),
            client_view: ClientView::from_counters(&self.view),
        }
    }
}

/// The live counters. One per server, shared by every connection.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub requests_seen: AtomicU64,
    pub notifications_seen: AtomicU64,
    pub answers_sent: AtomicU64,
    pub errors_sent: AtomicU64,
    pub cancelled: AtomicU64,
    pub malformed_received: AtomicU64,
    pub batches: AtomicU64,
    pub batch_rejected: AtomicU64,
    pub sessions_opened: AtomicU64,
    pub sessions_closed: AtomicU64,
    pub connections_refused: AtomicU64,
    pub sse_closed_early: AtomicU64,
    pub sse_resumptions_served: AtomicU64,
    pub sse_resumptions_refused: AtomicU64,
    pub sse_answers_on_resumption: AtomicU64,
    pub legacy_sse_streams: AtomicU64,
    pub legacy_sse_ended: AtomicU64,
    pub param_header_checks: AtomicU64,
    pub param_header_mismatches: AtomicU64,
    pub unknown_session: AtomicU64,
    pub discover_refused: AtomicU64,
    pub leaked_bytes: AtomicU64,
    pub leaked_fds: AtomicU64,
    in_flight: AtomicU64,
    in_flight_max: AtomicU64,
    serving: AtomicU64,
    serving_max: AtomicU64,
    connections: AtomicU64,
    connections_max: AtomicU64,
    faults: [AtomicU64; FaultKind::ALL.len()],
    pub input: InputCounters,
    pub progress: ProgressCounters,
    view: [AtomicU64; VIEWS],
    /// The part of `view` written for no request (see [`Stats::unattributed_view`]).
    unattributed: [AtomicU64; VIEWS],
    status: [AtomicU64; STATUSES.len()],
    operations: Operations,
}

/// A gauge raised while the guard lives, with its high-water mark.
pub(crate) struct Gauge<'a> {
    now: &'a AtomicU64,
}

impl Gauge<'_> {
    fn raise<'a>(now: &'a AtomicU64, max: &AtomicU64) -> Gauge<'a> {
        let v = now.fetch_add(1, Relaxed) + 1;
        max.fetch_max(v, Relaxed);
        Gauge { now }
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.now.fetch_sub(1, Relaxed);
    }
}

impl Stats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// The counters of the operation named `name` (see docs/target.md for the names).
    pub(crate) fn operation(&self, name: &str) -> Arc<OpCounters> {
        self.operations.get(name)
    }

    /// A request of operation `op` received; its arrival number (from 1).
    pub(crate) fn request(&self, op: &OpCounters) -> u64 {
        op.requests.fetch_add(1, Relaxed);
        self.requests_seen.fetch_add(1, Relaxed) + 1
    }

    /// A request of operation `op` dropped before it was answered.
    pub(crate) fn cancelled(&self, op: &OpCounters) {
        self.cancelled.fetch_add(1, Relaxed);
        op.cancelled.fetch_add(1, Relaxed);
    }

    /// An answer carrying the request's own id written for operation `op`; `error` when
    /// what the method produced was a JSON-RPC error (`plain`: and it went out as one).
    pub(crate) fn answered(&self, op: &OpCounters, error: bool, plain: bool) {
        self.answers_sent.fetch_add(1, Relaxed);
        if error && plain {
            self.errors_sent.fetch_add(1, Relaxed);
        }
        let mine = if error {
            &op.answered_error
        } else {
            &op.answered_ok
        };
        mine.fetch_add(1, Relaxed);
    }

    /// What a client counts for something written in answer to a request of operation `op`.
    pub(crate) fn op_view(&self, op: &OpCounters, v: View, n: u64) {
        self.view[v as usize].fetch_add(n, Relaxed);
        op.view[v as usize].fetch_add(n, Relaxed);
    }

    /// What a client counts for something written in answer to no request: an error with
    /// id null for input that was no JSON-RPC request or for a refused batch, a batch's
    /// `response_count_mismatch`.
    pub(crate) fn unattributed_view(&self, v: View, n: u64) {
        self.view[v as usize].fetch_add(n, Relaxed);
        self.unattributed[v as usize].fetch_add(n, Relaxed);
    }

    pub(crate) fn fault(&self, kind: FaultKind) {
        self.faults[kind.index()].fetch_add(1, Relaxed);
    }

    /// Counts an HTTP answer status (only the statuses listed in [`STATUSES`]).
    pub(crate) fn status(&self, code: u16) {
        if let Some(i) = STATUSES.iter().position(|s| *s == code) {
            self.status[i].fetch_add(1, Relaxed);
        }
    }

    /// A request received and not answered yet.
    pub(crate) fn in_flight(&self) -> Gauge<'_> {
        Gauge::raise(&self.in_flight, &self.in_flight_max)
    }

    /// A request holding a service slot.
    pub(crate) fn serving(&self) -> Gauge<'_> {
        Gauge::raise(&self.serving, &self.serving_max)
    }

    /// An open connection.
    pub(crate) fn connection(&self) -> Gauge<'_> {
        Gauge::raise(&self.connections, &self.connections_max)
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let f = |k: FaultKind| g(&self.faults[k.index()]);
        let status = |code: u16| {
            STATUSES
                .iter()
                .position(|s| *s == code)
                .map_or(0, |i| g(&self.status[i]))
        };
        StatsSnapshot {
            requests_seen: g(&self.requests_seen),
            notifications_seen: g(&self.notifications_seen),
            answers_sent: g(&self.answers_sent),
            errors_sent: g(&self.errors_sent),
            cancelled: g(&self.cancelled),
            malformed_received: g(&self.malformed_received),
            batches: g(&self.batches),
            batch_rejected: g(&self.batch_rejected),
            http_429: status(429),
            http_503: status(503),
            http_status: STATUSES
                .iter()
                .map(|s| (*s, status(*s)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            in_flight: g(&self.in_flight),
            in_flight_max: g(&self.in_flight_max),
            serving_max: g(&self.serving_max),
            connections_max: g(&self.connections_max),
            connections_refused: g(&self.connections_refused),
            sessions_opened: g(&self.sessions_opened),
            sessions_closed: g(&self.sessions_closed),
            // The session tables count it, not these counters: the server fills it in.
            sessions_held: 0,
            leaked_bytes: g(&self.leaked_bytes),
            leaked_fds: g(&self.leaked_fds),
            sse_closed_early: g(&self.sse_closed_early),
            sse_resumptions_served: g(&self.sse_resumptions_served),
            sse_resumptions_refused: g(&self.sse_resumptions_refused),
            sse_answers_on_resumption: g(&self.sse_answers_on_resumption),
            legacy_sse_streams: g(&self.legacy_sse_streams),
            legacy_sse_ended: g(&self.legacy_sse_ended),
            param_header_checks: g(&self.param_header_checks),
            param_header_mismatches: g(&self.param_header_mismatches),
            faults: FaultCounts {
                drop: f(FaultKind::Drop),
                null_id: f(FaultKind::NullId),
                unknown_id: f(FaultKind::UnknownId),
                duplicate: f(FaultKind::Duplicate),
                both: f(FaultKind::Both),
                bad_version: f(FaultKind::BadVersion),
                garbage: f(FaultKind::Garbage),
                truncate: f(FaultKind::Truncate),
                version_rejected: f(FaultKind::VersionRejected),
                tool_error: f(FaultKind::ToolError),
                bad_structured: f(FaultKind::BadStructured),
            },
            client_view: ClientView::from_counters(&self.view),
            client_view_unattributed: ClientView::from_counters(&self.unattributed),
            operations: self.operations.snapshot(),
            jobs: JobCounts::default(),
            tasks: TaskCounts::default(),
            input: self.input.snapshot(),
            progress: self.progress.snapshot(),
            unknown_session: g(&self.unknown_session),
            discover_refused: g(&self.discover_refused),
            replicas: Vec::new(),
            races: RaceCounts::default(),
            auth: None,
        }
    }
}

/// Faults injected, by kind (each request gets at most one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    pub drop: u64,
    pub null_id: u64,
    pub unknown_id: u64,
    pub duplicate: u64,
    pub both: u64,
    pub bad_version: u64,
    pub garbage: u64,
    pub truncate: u64,
    /// Requests refused HTTP 400, -32022 (`version-rejected`).
    #[serde(default)]
    pub version_rejected: u64,
    /// `tools/call` results turned into tool errors.
    #[serde(default)]
    pub tool_error: u64,
    /// `tools/call` results whose `structuredContent` was made to break its `outputSchema`.
    #[serde(default)]
    pub bad_structured: u64,
}

impl FaultCounts {
    pub fn total(&self) -> u64 {
        self.drop
            + self.null_id
            + self.unknown_id
            + self.duplicate
            + self.both
            + self.bad_version
            + self.garbage
            + self.truncate
            + self.version_rejected
            + self.tool_error
            + self.bad_structured
    }
}

/// What a correct client counts (docs/metrics.md names) for everything this server wrote in
/// answer to messages it parsed. HTTP refusals before parsing (403, 404 session, 413, 429,
/// 503, …) are not in here; they are in `http_status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientView {
    pub ok: u64,
    pub errors: u64,
    pub both_result_error: u64,
    pub invalid_jsonrpc: u64,
    pub duplicate_id: u64,
    pub unknown_id: u64,
    pub null_id: u64,
    pub server_messages: u64,
    pub parse_errors: u64,
    pub missing: u64,
    pub http_other: u64,
    pub response_count_mismatch: u64,
    /// Results with `isError: true` (the `tool_error` tool, failed task tools, the
    /// `tool-error` fault).
    #[serde(default)]
    pub tool_errors: u64,
    /// Results whose `structuredContent` breaks the tool's `outputSchema` (`bad-structured`).
    #[serde(default)]
    pub output_schema_violations: u64,
}

impl ClientView {
    fn from_counters(view: &[AtomicU64; VIEWS]) -> ClientView {
        let v = |w: View| view[w as usize].load(Relaxed);
        ClientView {
            ok: v(View::Ok),
            errors: v(View::Errors),
            both_result_error: v(View::BothResultError),
            invalid_jsonrpc: v(View::InvalidJsonrpc),
            duplicate_id: v(View::DuplicateId),
            unknown_id: v(View::UnknownId),
            null_id: v(View::NullId),
            server_messages: v(View::ServerMessages),
            parse_errors: v(View::ParseErrors),
            missing: v(View::Missing),
            http_other: v(View::HttpOther),
            response_count_mismatch: v(View::ResponseCountMismatch),
            tool_errors: v(View::ToolErrors),
            output_schema_violations: v(View::OutputSchemaViolations),
        }
    }
}

/// One operation's share of the counters (a tool's name for `tools/call`, the URI for
/// `resources/read`, the prompt's name for `prompts/get`, else the method).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationCounts {
    /// Requests received (as `requests_seen`).
    pub requests: u64,
    /// Answers written with the request's own id whose method produced a result (a fault
    /// may still have spoiled them: see `client_view`).
    pub answered_ok: u64,
    /// Answers written with the request's own id whose method produced a JSON-RPC error.
    pub answered_error: u64,
    /// Requests whose client went away first.
    pub cancelled: u64,
    /// What a correct client counts for the answers to these requests.
    pub client_view: ClientView,
}

/// The job API's counters (`job_start`, `job_status`, `job_report`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCounts {
    /// Jobs created.
    pub created: u64,
    /// `job_start` calls that named a known `request_key` with the same input: the same
    /// job answered again.
    pub replays: u64,
    /// `job_start` calls that named a known `request_key` with another input: refused.
    pub conflicts: u64,
    /// `job_start` calls refused because `max_jobs` jobs were held and none could go.
    pub refused_full: u64,
    /// `job_status` calls answered with a status.
    pub polls: u64,
    /// `job_report` calls answered with a report.
    pub reports_read: u64,
    /// `job_report` calls refused because the job was not finished.
    pub reports_unfinished: u64,
    /// Of `reports_read`, those that left items out (`job_lose_every`).
    pub reports_lossy: u64,
    /// Items left out of those reports, summed over them.
    pub items_lost: u64,
    /// `job_status` and `job_report` calls naming a job that is unknown or expired.
    pub unknown_job: u64,
    /// Jobs held now (not expired).
    pub live: u64,
    /// `job_key_break_every`: `job_start` calls that named a known `request_key` with the
    /// same input and started a new job all the same.
    #[serde(default)]
    pub double_effects: u64,
    /// `job_key_break_every`: `job_start` calls that named a known `request_key` with
    /// another input and started a new job instead of being refused.
    #[serde(default)]
    pub accepted_conflicts: u64,
    /// `job_lookup` calls answered.
    #[serde(default)]
    pub lookups: u64,
}

/// The target's counters at one moment (`GET /stats`, `--stats FILE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// JSON-RPC requests (messages with a method and a usable id) received, batch members
    /// included; POSTs refused before parsing are not in here.
    pub requests_seen: u64,
    /// Notifications received.
    pub notifications_seen: u64,
    /// Answers written carrying the request's own id (result or error; a duplicated answer
    /// counts once). `requests_seen = answers_sent + faults that lose the answer (drop,
    /// null_id, unknown_id, garbage, truncate) + cancelled + in_flight`.
    pub answers_sent: u64,
    /// Of `answers_sent`, those that are plain JSON-RPC errors.
    pub errors_sent: u64,
    /// Requests whose client went away first (SSE stream closed, stdio cancel).
    pub cancelled: u64,
    /// Bodies/lines/members that were no valid JSON-RPC message (answered with an error
    /// whose id is null).
    pub malformed_received: u64,
    /// Batches served.
    pub batches: u64,
    /// Batches refused (HTTP 400 / one error line).
    pub batch_rejected: u64,
    /// POSTs refused by the capacity model with 429.
    pub http_429: u64,
    /// POSTs refused by the capacity model with 503.
    pub http_503: u64,
    /// Every non-2xx status sent, by code.
    pub http_status: BTreeMap<u16, u64>,
    /// Requests received and not answered yet.
    pub in_flight: u64,
    /// Highest number of requests in progress at once (waiting for a slot or served).
    pub in_flight_max: u64,
    /// Highest number of requests holding a service slot at once (never above capacity).
    pub serving_max: u64,
    /// Highest number of open connections.
    pub connections_max: u64,
    /// Connections closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Legacy sessions handed out.
    pub sessions_opened: u64,
    /// Legacy sessions ended by the client's DELETE.
    pub sessions_closed: u64,
    /// Legacy sessions held now: those opened, less those the client's DELETE ended, less
    /// those a newer session's slot took over (the table holds 65,536).
    #[serde(default)]
    pub sessions_held: u64,
    /// `leak_bytes_per_call`: bytes retained, written, by calls of a tool so far.
    #[serde(default)]
    pub leaked_bytes: u64,
    /// `leak_fd_every`: file descriptors opened and kept open so far.
    #[serde(default)]
    pub leaked_fds: u64,
    /// `sse_close_early`: answer streams closed after a priming event with an id and
    /// `retry:`, their answer parked for a resumption.
    #[serde(default)]
    pub sse_closed_early: u64,
    /// GETs with `Last-Event-ID` that found their parked answer.
    #[serde(default)]
    pub sse_resumptions_served: u64,
    /// GETs with `Last-Event-ID` refused 405 (`sse_resume_refuse`).
    #[serde(default)]
    pub sse_resumptions_refused: u64,
    /// Answers written on a resumed stream.
    #[serde(default)]
    pub sse_answers_on_resumption: u64,
    /// `legacy_sse`: session streams opened by `GET /sse`.
    #[serde(default)]
    pub legacy_sse_streams: u64,
    /// `legacy_sse_end_every`: requests that ended their session (answered 202, never run,
    /// their stream ended after the session's other answers): a client counts them `missing`.
    #[serde(default)]
    pub legacy_sse_ended: u64,
    /// 2026-07-28 `tools/call`s of `region_echo` (`header_tools`) whose `Mcp-Param-*`
    /// headers were checked against the arguments.
    #[serde(default)]
    pub param_header_checks: u64,
    /// Of `param_header_checks`, those refused: a header missing or not matching its
    /// argument (400, -32020).
    #[serde(default)]
    pub param_header_mismatches: u64,
    /// Faults injected, by kind.
    pub faults: FaultCounts,
    /// What a correct client counts for the answers written.
    pub client_view: ClientView,
    /// The part of `client_view` written in answer to no request (errors with id null for
    /// input that was no JSON-RPC request and for refused batches; `response_count_mismatch`).
    /// With `operations`' views it sums to `client_view`.
    #[serde(default)]
    pub client_view_unattributed: ClientView,
    /// Requests and what a client counts for their answers, by operation.
    #[serde(default)]
    pub operations: BTreeMap<String, OperationCounts>,
    /// The job API.
    #[serde(default)]
    pub jobs: JobCounts,
    /// Tasks (both revisions).
    #[serde(default)]
    pub tasks: TaskCounts,
    /// Input-required rounds of `ask_input` (2026-07-28).
    #[serde(default)]
    pub input: InputCounts,
    /// Progress notifications of the `progress` tool.
    #[serde(default)]
    pub progress: ProgressCounts,
    /// Answers that the request's session is unknown (404): a POST, a resuming GET or a
    /// DELETE that carried an `Mcp-Session-Id` no replica that saw it knew.
    #[serde(default)]
    pub unknown_session: u64,
    /// `server/discover` requests refused -32022 (`discover_refusals`).
    #[serde(default)]
    pub discover_refused: u64,
    /// With `replicas` above 1, each replica's own counters (the fields above are the
    /// fleet's totals); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaCounts>,
    /// The race targets: counters and the lazy initialisation.
    #[serde(default)]
    pub races: RaceCounts,
    /// With `auth`: the authorization server's and the protected resource's counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthCounts>,
}

/// One replica's share (`--replicas`): what the load balancer sent it and what it answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaCounts {
    /// Its number, from 0.
    pub replica: usize,
    /// Connections the balancer assigned to it (round-robin or random; with `sticky`, where
    /// a request without a known session goes).
    pub connections: u64,
    /// HTTP requests to `/mcp` it handled (POST, GET, DELETE).
    pub requests: u64,
    /// Of those, answered 404 because it did not know their session.
    pub unknown_session: u64,
    /// Sessions it handed out.
    pub sessions_opened: u64,
    /// POSTs its capacity model refused (429 or 503).
    pub rejected: u64,
}

/// A replica's live counters (see [`ReplicaCounts`]).
#[derive(Debug, Default)]
pub(crate) struct ReplicaStats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub unknown_session: AtomicU64,
    pub sessions_opened: AtomicU64,
    pub rejected: AtomicU64,
}

impl ReplicaStats {
    pub(crate) fn snapshot(&self, replica: usize) -> ReplicaCounts {
        let g = |a: &AtomicU64| a.load(Relaxed);
        ReplicaCounts {
            replica,
            connections: g(&self.connections),
            requests: g(&self.requests),
            unknown_session: g(&self.unknown_session),
            sessions_opened: g(&self.sessions_opened),
            rejected: g(&self.rejected),
        }
    }
}

/// The task store's counters (see docs/target.md, "Tasks").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCounts {
    /// Tasks created (a `CreateTaskResult` answered), faulted ones included.
    pub created: u64,
    /// Tasks that ended `completed` (the true state, whatever a fault reported).
    pub completed: u64,
    /// Tasks that ended `failed` (2025-11-25: a tool result with `isError: true` too).
    pub failed: u64,
    /// Tasks cancelled by `tasks/cancel` before their work ended.
    pub cancelled: u64,
    /// Tasks forgotten because their ttl ended.
    pub expired: u64,
    /// `tasks/get` answered with a task.
    pub polls: u64,
    /// `tasks/result` answered with the call's result or error (or the cancelled error).
    pub results: u64,
    /// `tasks/cancel` that cancelled a task.
    pub cancels: u64,
    /// `tasks/cancel` of a task already terminal (2025-11-25: -32602; 2026-07-28: acked).
    pub cancels_too_late: u64,
    /// `tasks/update` acknowledged (2026-07-28).
    pub updates: u64,
    /// `tasks/list` pages answered (2025-11-25).
    pub lists: u64,
    /// Requests naming a task that is unknown, expired, forgotten or replaced (-32602).
    pub unknown_task: u64,
    /// Task creations refused because `max_tasks` tasks were held and none had ended.
    pub refused_full: u64,
    /// `notifications/tasks/status` sent (on a `tasks/result` stream, 2025-11-25).
    pub status_notifications: u64,
    /// Tasks working now (created, not terminal, still held).
    pub working: u64,
    /// Highest number of tasks working at once.
    pub working_max: u64,
    /// Tasks held now, terminal ones included.
    pub held: u64,
    /// Task faults injected.
    pub faults: TaskFaultCounts,
}

/// Task faults injected (`task_fault`), each counted once per task except `get_error`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFaultCounts {
    /// Tasks forgotten right after their creation was answered.
    pub forget: u64,
    /// Tasks created with the id of the task created before them.
    pub reuse_id: u64,
    /// Tasks that stay `working` until their ttl ends.
    pub never_ends: u64,
    /// Tasks reported `working` again after a terminal status was reported.
    pub regress: u64,
    /// Tasks whose flipped terminal status (completed ⇄ failed) was reported.
    pub mismatch: u64,
    /// `tasks/get` answered with an injected error.
    pub get_error: u64,
}

/// Live counters of the input-required rounds.
#[derive(Debug, Default)]
pub(crate) struct InputCounters {
    pub rounds_asked: AtomicU64,
    pub rounds_answered: AtomicU64,
    pub responses_missing: AtomicU64,
    pub responses_invalid: AtomicU64,
    pub state_invalid: AtomicU64,
    pub completed: AtomicU64,
    pub to_task: AtomicU64,
}

impl InputCounters {
    fn snapshot(&self) -> InputCounts {
        let g = |a: &AtomicU64| a.load(Relaxed);
        InputCounts {
            rounds_asked: g(&self.rounds_asked),
            rounds_answered: g(&self.rounds_answered),
            responses_missing: g(&self.responses_missing),
            responses_invalid: g(&self.responses_invalid),
            state_invalid: g(&self.state_invalid),
            completed: g(&self.completed),
            to_task: g(&self.to_task),
        }
    }
}

/// Input-required rounds of `ask_input` (see docs/target.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputCounts {
    /// `input_required` results answered (re-asked rounds included).
    pub rounds_asked: u64,
    /// Retries whose `inputResponses` answered their round in full and validly.
    pub rounds_answered: u64,
    /// Retries that left a key of the round out: the round is asked again.
    pub responses_missing: u64,
    /// Retries with a response of the wrong shape: -32602.
    pub responses_invalid: u64,
    /// Retries whose `requestState` is missing, altered or from another call: -32602.
    pub state_invalid: u64,
    /// Calls that completed after their last round.
    pub completed: u64,
    /// Calls that became a task after their last round.
    pub to_task: u64,
}

/// Live counters of the progress notifications.
#[derive(Debug, Default)]
pub(crate) struct ProgressCounters {
    /// Calls of `progress` with a token and a stream, numbered for the progress faults.
    pub calls: AtomicU64,
    pub sent: AtomicU64,
    pub after_result: AtomicU64,
    pub down: AtomicU64,
    pub unknown_token: AtomicU64,
}

impl ProgressCounters {
    fn snapshot(&self) -> ProgressCounts {
        let g = |a: &AtomicU64| a.load(Relaxed);
        ProgressCounts {
            sent: g(&self.sent),
            after_result: g(&self.after_result),
            down: g(&self.down),
            unknown_token: g(&self.unknown_token),
        }
    }
}

/// Progress notifications sent (see docs/target.md, `progress_fault`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressCounts {
    /// Every `notifications/progress` sent, faulty ones included.
    pub sent: u64,
    /// Of them, sent after the call's answer.
    pub after_result: u64,
    /// Of them, reporting less progress than the one before.
    pub down: u64,
    /// Of them, carrying a token the client never issued.
    pub unknown_token: u64,
}

/// The race targets' counters (see docs/target.md, "Races").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceCounts {
    /// `counter_add` calls applied.
    pub counter_adds: u64,
    /// `counter_read` calls answered.
    pub counter_reads: u64,
    /// With `racy`: the updates racy writes overwrote, summed (each write discards what
    /// was added between its read and its write): the updates a client finds lost.
    pub overwritten: u64,
    /// With `read_lag_ms`: `counter_read` calls that saw an older value than the counter
    /// held.
    pub stale_reads: u64,
    /// Counters held.
    pub counters: u64,
    /// With `lazy_init_ms`: calls answered after waiting for the lazy initialisation.
    pub lazy_init_waited: u64,
    /// With `first_call_deadlock`: calls that will never be answered (inside the lazy
    /// initialisation when it deadlocked, or arrived after).
    pub first_call_hung: u64,
}

/// What the authorization server and the resource counted (`/stats` `auth`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthCounts {
    /// POSTs to the token endpoint, and of those the ones answered with a token.
    pub token_requests: u64,
    pub tokens_issued: u64,
    /// Token requests refused, by OAuth error code (`invalid_client`, `invalid_scope`, …).
    pub token_refused: std::collections::BTreeMap<String, u64>,
    /// Most token requests being served at once.
    pub token_requests_in_flight_max: u64,
    /// MCP requests refused 401, by reason: `missing` (no bearer token), `invalid` (not one
    /// of this server's), `expired`, `revoked`; and their total.
    pub unauthorized: u64,
    pub unauthorized_missing: u64,
    pub unauthorized_invalid: u64,
    pub unauthorized_expired: u64,
    pub unauthorized_revoked: u64,
    /// MCP requests refused 403 (`insufficient_scope`).
    pub forbidden: u64,
    /// MCP requests let through with a valid token.
    pub authorized: u64,
    /// Revocations (at `auth_revoke_at` times, or by `POST /auth/revoke`) that took place.
    pub revocations: u64,
    /// Metadata documents served.
    pub metadata_served: u64,
    /// Tokens checked by `POST /introspect` (another resource server asking).
    pub introspections: u64,
    /// With `auth_code`: the authorization code grant's counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeCounts>,
}

/// What the authorization code grant counted (`/stats` `auth.code`, `serve --auth-code`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeCounts {
    /// `GET /authorize` requests, and those refused, by OAuth error code.
    pub authorization_requests: u64,
    pub authorization_refused: std::collections::BTreeMap<String, u64>,
    /// Codes handed out by redirect, and codes exchanged for tokens.
    pub codes_issued: u64,
    pub codes_redeemed: u64,
    /// Authorization requests without S256, and token requests whose verifier did not match.
    pub pkce_failures: u64,
    /// `POST /register` requests (RFC 7591).
    pub registrations: u64,
    /// Client ID metadata documents fetched.
    pub metadata_documents: u64,
    /// Refresh grants answered with a token, and refresh tokens rotated by them (every
    /// refresh rotates).
    pub refreshes: u64,
    pub rotations: u64,
    /// Refresh grants refused: a rotated-out token presented again, or a revoked one.
    pub refresh_reused: u64,
    pub refresh_revoked: u64,
    /// `POST /auth/revoke` calls with `refresh_tokens=all`.
    pub refresh_revocations: u64,
    /// Codes issued for a scope with the step-up scope, and `tools/call` requests refused
    /// 403 for want of it.
    pub step_ups: u64,
    pub forbidden_step_up: u64,
}
