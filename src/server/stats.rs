//! Ground truth out: the target's own counters (relaxed atomics, no locks) and their
//! serialisable snapshot served at `GET /stats` and written by `--stats FILE`.

use super::faults::FaultKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
}

const VIEWS: usize = 12;

/// Statuses other than 2xx that the target answers with, counted one by one.
const STATUSES: [u16; 9] = [400, 403, 404, 405, 406, 413, 415, 429, 503];

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
    in_flight: AtomicU64,
    in_flight_max: AtomicU64,
    serving: AtomicU64,
    serving_max: AtomicU64,
    connections: AtomicU64,
    connections_max: AtomicU64,
    faults: [AtomicU64; 8],
    view: [AtomicU64; VIEWS],
    status: [AtomicU64; STATUSES.len()],
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

    pub(crate) fn view(&self, v: View, n: u64) {
        self.view[v as usize].fetch_add(n, Relaxed);
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
        let v = |w: View| g(&self.view[w as usize]);
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
            faults: FaultCounts {
                drop: f(FaultKind::Drop),
                null_id: f(FaultKind::NullId),
                unknown_id: f(FaultKind::UnknownId),
                duplicate: f(FaultKind::Duplicate),
                both: f(FaultKind::Both),
                bad_version: f(FaultKind::BadVersion),
                garbage: f(FaultKind::Garbage),
                truncate: f(FaultKind::Truncate),
            },
            client_view: ClientView {
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
            },
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
    /// Faults injected, by kind.
    pub faults: FaultCounts,
    /// What a correct client counts for the answers written.
    pub client_view: ClientView,
}
