//! The one request handler, transport-free: reads a POST body or a stdio line (one message
//! or a batch), routes it to an era, applies the batch policy of the revision, refuses what
//! is no JSON-RPC message, and turns requests into jobs whose answers it collects. HTTP and
//! stdio only move the bytes it produces.

use super::Shared;
use super::job::{Done, Job};
use super::mcp::{self, Early, Headers, Msg, Parsed, Req};
use super::stats::{Stats, View};
use super::wire::{self, Shaped, Sink};
use crate::jsonrpc::{BatchWriter, codes};
use crate::protocol::Revision;
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::task::JoinSet;

/// Where a body or line came from, as far as routing and the tallies differ.
#[derive(Clone, Copy)]
pub(crate) enum Origin<'h> {
    /// An HTTP POST: its MCP headers, and the version of the legacy session it named.
    Http {
        headers: Headers<'h>,
        session: Option<Revision>,
    },
    /// A stdio line: the version `initialize` negotiated on this stream so far.
    Stdio { negotiated: Option<Revision> },
}

impl Origin<'_> {
    /// What a client counts for each request of a refused batch: the HTTP 400 it got
    /// (`http_other`), or on stdio an answer that never comes (`missing`).
    fn refused_member(self) -> View {
        match self {
            Origin::Http { .. } => View::HttpOther,
            Origin::Stdio { .. } => View::Missing,
        }
    }
}

/// What a body or line asks its front to do.
pub(crate) enum Handled<'a> {
    /// Nothing to answer (a notification, a client's response, a batch of those): HTTP 202,
    /// no stdio line.
    Nothing,
    /// `notifications/cancelled` naming this request id: stdio aborts that request; HTTP
    /// acknowledges it as [`Handled::Nothing`].
    Cancel(&'a RawValue),
    /// Refused before anything ran.
    Refused(Refused),
    /// One request to run.
    Single(Job),
    /// A batch to run.
    Batch(Batch),
}

/// One error with id null (already tallied), answered before anything ran, and its HTTP
/// status.
pub(crate) struct Refused {
    pub status: u16,
    pub message: Vec<u8>,
}

/// A batch that is served: errors for its members that were no JSON-RPC message, and its
/// requests.
pub(crate) struct Batch {
    early: Vec<Vec<u8>>,
    jobs: Vec<Job>,
}

impl Shared {
    /// Reads one POST body or stdio line.
    pub(crate) fn handle<'a>(&self, bytes: &'a [u8], origin: Origin) -> Handled<'a> {
        let raw: &RawValue = match serde_json::from_slice(bytes) {
            Ok(raw) => raw,
            Err(e) => {
                return Handled::Refused(
                    self.malformed(codes::PARSE_ERROR, format!("Parse error: {e}")),
                );
            }
        };
        if raw.get().starts_with('[') {
            self.batch(raw, origin)
        } else {
            self.single(raw, origin)
        }
    }

    /// Input that is no JSON-RPC message: counted, and refused with HTTP 400.
    pub(crate) fn malformed(&self, code: i64, message: String) -> Refused {
        Stats::add(&self.stats.malformed_received, 1);
        self.refuse(Early::new(code, message, 400))
    }

    /// One error with id null, tallied as the `null_id` a client counts for it.
    fn refuse(&self, early: Early) -> Refused {
        self.stats.unattributed_view(View::NullId, 1);
        Refused {
            status: early.status,
            message: wire::null_id_error(&early.error),
        }
    }

    fn notification<'a>(&self, n: &Req<'a>) -> Handled<'a> {
        Stats::add(&self.stats.notifications_seen, 1);
        if n.method != "notifications/cancelled" {
            return Handled::Nothing;
        }
        Parsed::new(n)
            .cancelled_request()
            .map_or(Handled::Nothing, Handled::Cancel)
    }

    fn single<'a>(&self, raw: &'a RawValue, origin: Origin) -> Handled<'a> {
        let (id, req) = match mcp::classify(raw) {
            Msg::Request(id, req) => (id, req),
            Msg::Notification(n) => return self.notification(&n),
            Msg::ClientResponse => return Handled::Nothing,
            Msg::Invalid(why) => {
                let why = format!("Invalid Request: {why}");
                return Handled::Refused(self.malformed(codes::INVALID_REQUEST, why));
            }
        };
        let parsed = Parsed::new(&req);
        let modern_body = parsed.meta_version().is_some();
        let (route, headers) = match origin {
            Origin::Http { headers, session } => {
                let initialize = req.method == "initialize";
                let route =
                    self.protocol
                        .route_http(headers.version, session, initialize, modern_body);
                (route, Some(headers))
            }
            Origin::Stdio { negotiated } => {
                (Ok(self.protocol.route_stdio(modern_body, negotiated)), None)
            }
        };
        Handled::Single(self.job(id, route, &req, &parsed, headers))
    }

    /// A batch: refused whole as its revision (or `--batches`) says, else its members become
    /// jobs. Headers are not checked against members (one set of headers, many requests).
    fn batch<'a>(&self, raw: &'a RawValue, origin: Origin) -> Handled<'a> {
        let stats = &self.stats;
        let members: Vec<&RawValue> = match serde_json::from_str(raw.get()) {
            Ok(m) => m,
            Err(e) => {
                return Handled::Refused(
                    self.malformed(codes::PARSE_ERROR, format!("Parse error: {e}")),
                );
            }
        };
        if members.is_empty() {
            let why = "Invalid Request: empty batch".into();
            return Handled::Refused(self.malformed(codes::INVALID_REQUEST, why));
        }
        let msgs: Vec<Msg> = members.iter().map(|m| mcp::classify(m)).collect();
        let route = match origin {
            Origin::Http { headers, session } => {
                self.protocol
                    .route_http(headers.version, session, false, false)
            }
            Origin::Stdio { negotiated } => {
                let modern = msgs.iter().any(|m| match m {
                    Msg::Request(_, r) => Parsed::new(r).meta_version().is_some(),
                    _ => false,
                });
                Ok(self.protocol.route_stdio(modern, negotiated))
            }
        };
        // Refused whole: one error with id null; none of its requests is answered.
        let refuse = |early: Early| {
            for m in &msgs {
                if let Msg::Request(_, req) = m {
                    let op = stats.operation(mcp::operation_name(req, &Parsed::new(req)));
                    stats.op_view(&op, origin.refused_member(), 1);
                }
            }
            Handled::Refused(self.refuse(early))
        };
        let route = match route {
            Ok(route) => route,
            Err(early) => return refuse(early),
        };
        if !self.protocol.batch_allowed(route) {
            Stats::add(&stats.batch_rejected, 1);
            return refuse(Early {
                error: self.protocol.batch_refusal(route),
                status: 400,
            });
        }
        Stats::add(&stats.batches, 1);
        let (mut jobs, mut early) = (Vec::new(), Vec::new());
        for m in msgs {
            match m {
                Msg::Request(id, req) => {
                    let parsed = Parsed::new(&req);
                    // MCP: the initialize request must not be part of a JSON-RPC batch.
                    let route = if req.method == "initialize" {
                        Err(Early::new(
                            codes::INVALID_REQUEST,
                            "initialize must not be part of a batch",
                            400,
                        ))
                    } else {
                        Ok(route)
                    };
                    jobs.push(self.job(id, route, &req, &parsed, None));
                }
                Msg::Notification(_) => Stats::add(&stats.notifications_seen, 1),
                Msg::ClientResponse => {}
                Msg::Invalid(why) => {
                    Stats::add(&stats.malformed_received, 1);
                    stats.unattributed_view(View::NullId, 1);
                    let e = Early::new(
                        codes::INVALID_REQUEST,
                        format!("Invalid Request: {why}"),
                        400,
                    );
                    early.push(wire::null_id_error(&e.error));
                }
            }
        }
        if jobs.is_empty() && early.is_empty() {
            return Handled::Nothing;
        }
        Handled::Batch(Batch { early, jobs })
    }
}

impl Batch {
    /// Its `tools/call` requests.
    pub(crate) fn tool_calls(&self) -> u64 {
        self.jobs.iter().filter(|j| j.is_tool_call()).count() as u64
    }

    /// Starts every member at once (progress notifications to `sink`, when given).
    pub(crate) fn start(self, shared: &Arc<Shared>, sink: Option<Arc<Sink>>) -> Answers {
        let expected = self.jobs.len() as u64;
        let mut running = JoinSet::new();
        for job in self.jobs {
            let shared = Arc::clone(shared);
            let sink = sink.clone();
            running.spawn(async move { shared.run(job, sink.as_deref()).await });
        }
        Answers {
            early: self.early.into_iter(),
            running,
            expected,
            ids: 0,
            stats: Arc::clone(&shared.stats),
            finished: false,
        }
    }
}

/// A running batch's answers: the errors of its malformed members first, then each
/// request's in completion order. Dropped early, its unanswered requests count as cancelled.
pub(crate) struct Answers {
    early: std::vec::IntoIter<Vec<u8>>,
    running: JoinSet<Done>,
    expected: u64,
    /// Responses with a non-null id put on the wire so far.
    ids: u64,
    stats: Arc<Stats>,
    finished: bool,
}

impl Answers {
    /// The next answer, `None` after the last one. Then, when the answers carried more or
    /// fewer ids than the batch had requests, the client sees `response_count_mismatch`.
    pub(crate) async fn next(&mut self) -> Option<Shaped> {
        if let Some(message) = self.early.next() {
            return Some(Shaped::Message(message));
        }
        while let Some(joined) = self.running.join_next().await {
            if let Ok(done) = joined {
                self.ids += done.shaped.ids_on_wire();
                return Some(done.shaped);
            }
        }
        if !self.finished {
            self.finished = true;
            if self.ids != self.expected {
                self.stats.unattributed_view(View::ResponseCountMismatch, 1);
            }
        }
        None
    }

    /// Every answer as one JSON array in completion order; `None` when none has any bytes.
    pub(crate) async fn into_array(mut self) -> Option<Vec<u8>> {
        let mut batch = BatchWriter::default();
        while let Some(answer) = self.next().await {
            answer.push_members(&mut batch);
        }
        (!batch.is_empty()).then(|| batch.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{BatchPolicy, ServeConfig};
    use serde_json::Value;

    const HTTP: Origin<'static> = Origin::Http {
        headers: Headers {
            version: None,
            method: None,
            name: None,
            params: &[],
        },
        session: None,
    };
    const STDIO: Origin<'static> = Origin::Stdio { negotiated: None };

    fn shared(batches: BatchPolicy) -> Arc<Shared> {
        let cfg = ServeConfig {
            batches,
            ..ServeConfig::default()
        };
        Arc::new(Shared::new(cfg).unwrap())
    }

    #[tokio::test]
    async fn initialize_in_a_batch_is_refused_on_every_transport() {
        let body = br#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}},
                        {"jsonrpc":"2.0","id":2,"method":"ping"}]"#;
        for origin in [HTTP, STDIO] {
            let shared = shared(BatchPolicy::Auto);
            let Handled::Batch(batch) = shared.handle(body, origin) else {
                panic!("a 2025-03-26 batch is served");
            };
            let array = batch.start(&shared, None).into_array().await.unwrap();
            let answers: Vec<Value> = serde_json::from_slice(&array).unwrap();
            let init = answers.iter().find(|a| a["id"] == 1).unwrap();
            assert_eq!(init["error"]["code"], codes::INVALID_REQUEST);
            assert_eq!(
                init["error"]["message"],
                "initialize must not be part of a batch"
            );
            assert!(
                answers
                    .iter()
                    .any(|a| a["id"] == 2 && a.get("result").is_some())
            );
            let stats = shared.stats.snapshot();
            assert_eq!((stats.requests_seen, stats.answers_sent), (2, 2));
            assert_eq!((stats.client_view.errors, stats.client_view.ok), (1, 1));
        }
    }

    #[tokio::test]
    async fn a_refused_batch_is_one_null_id_error_and_its_requests_go_unanswered() {
        let body =
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"},
                        {"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
        for (origin, unanswered) in [(HTTP, "http_other"), (STDIO, "missing")] {
            let shared = shared(BatchPolicy::Reject);
            let Handled::Refused(refused) = shared.handle(body, origin) else {
                panic!("--batches reject refuses every batch");
            };
            assert_eq!(refused.status, 400);
            let error: Value = serde_json::from_slice(&refused.message).unwrap();
            assert_eq!(
                (&error["id"], &error["error"]["code"]),
                (&Value::Null, &(-32600).into())
            );
            let stats = serde_json::to_value(shared.stats.snapshot()).unwrap();
            assert_eq!(stats["batch_rejected"], 1);
            assert_eq!(stats["client_view"]["null_id"], 1);
            assert_eq!(stats["client_view"][unanswered], 2, "{stats}");
        }
    }
}
