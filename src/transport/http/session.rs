//! Legacy sessions (2025-03-26 to 2025-11-25): opening one anew when the server says it is
//! gone (404, or a 400 that says so; the load waits meanwhile, and the requests refused for
//! it are sent again in the new one), and its DELETE at the end. Both go over the transport's
//! own connections, like everything else it sends.

use super::HttpTransport;
use super::client::{Method, RequestHead};
use super::side::{Reply, Side};
use crate::transport::{Event, McpHeaders, Outgoing, TransportError};
use bytes::Bytes;
use futures_util::StreamExt;
use http::HeaderValue;
use std::task::Poll;
use std::time::Duration;

/// Bound on each POST of a restart.
const RESTART_STEP_LIMIT: Duration = Duration::from_secs(30);
/// Bound on the session's DELETE.
const DELETE_LIMIT: Duration = Duration::from_secs(5);

/// The two POSTs that (re)open a legacy session.
#[derive(Clone, Debug)]
pub struct LegacyInit {
    pub initialize: Bytes,
    pub initialized: Bytes,
}

/// Where a session restart is.
pub(super) enum RestartStep {
    /// `initialize` is out.
    Initialize,
    /// `notifications/initialized` is out, for this new session.
    Initialized(HeaderValue),
}

impl HttpTransport {
    /// Opens a new session: `initialize` (without the stale session), then
    /// `notifications/initialized`; the load is held until it is done.
    pub(super) fn start_restart(&mut self) {
        let Some(init) = &self.legacy_init else {
            return;
        };
        let body = init.initialize.clone();
        self.restarting = true;
        self.restart_began = tokio::time::Instant::now();
        self.restart_step(RestartStep::Initialize, body, None);
    }

    fn restart_step(&mut self, step: RestartStep, body: Bytes, session: Option<&HeaderValue>) {
        let head = RequestHead::new(
            &self.client,
            self.protocol_version.as_ref(),
            session,
            self.authorization(),
        );
        let ex = self.next_exchange();
        self.side.push((ex, Side::Restart(step)));
        let out = Outgoing::single(body, None, McpHeaders::default());
        self.send_whole(ex, Method::Post, out, Some(head), RESTART_STEP_LIMIT);
    }

    pub(super) fn on_restart_step(
        &mut self,
        step: RestartStep,
        reply: Result<Reply, TransportError>,
    ) {
        match (step, reply) {
            (_, Err(error)) => self.end_restart(Err(error)),
            (RestartStep::Initialize, Ok(reply)) => {
                let session = if reply.status >= 400 {
                    Err(format!("initialize answered HTTP {}", reply.status))
                } else {
                    reply
                        .session_id
                        .ok_or_else(|| "initialize gave no session id".to_owned())
                };
                match (session, &self.legacy_init) {
                    (Ok(session), Some(init)) => {
                        let body = init.initialized.clone();
                        self.restart_step(
                            RestartStep::Initialized(session.clone()),
                            body,
                            Some(&session),
                        );
                    }
                    (Err(why), _) => self.end_restart(Err(TransportError::Session(why))),
                    (Ok(_), None) => self.restarting = false,
                }
            }
            (RestartStep::Initialized(session), Ok(reply)) => {
                if (200..300).contains(&reply.status) {
                    self.end_restart(Ok(session));
                } else {
                    self.end_restart(Err(TransportError::Session(format!(
                        "notifications/initialized answered HTTP {}",
                        reply.status
                    ))));
                }
            }
        }
    }

    /// The restart is over: the held load goes out in the new session, or fails.
    fn end_restart(&mut self, result: Result<HeaderValue, TransportError>) {
        self.restarting = false;
        let now = tokio::time::Instant::now();
        let took = now - self.restart_began;
        self.counters.reinit_time += took;
        self.counters.reinit_max = self.counters.reinit_max.max(took);
        match result {
            Ok(session) => {
                self.set_session(Some(session));
                self.counters.reinitializations += 1;
                for mut request in std::mem::take(&mut self.held) {
                    request.since = now;
                    self.launch(request);
                }
            }
            Err(error) => {
                self.counters.reinit_failed += 1;
                for request in std::mem::take(&mut self.held) {
                    self.open -= 1;
                    self.ready.push_back(Event::Failed {
                        exchange: Some(request.exchange),
                        ids: request.out.ids,
                        error: error.clone(),
                    });
                }
            }
        }
    }

    /// Drives the exchanges until the restart in progress, if any, is over (each of its
    /// steps is bounded); what else they yield waits in `ready`.
    pub(super) async fn finish_restart(&mut self) {
        std::future::poll_fn(|cx| {
            while self.restarting {
                match self.exchanges.poll_next_unpin(cx) {
                    Poll::Ready(Some(item)) => {
                        if let Some(event) = self.on_item(item) {
                            self.ready.push_back(event);
                        }
                    }
                    // Nothing in flight: nothing can end it.
                    Poll::Ready(None) => break,
                    Poll::Pending => return Poll::Pending,
                }
            }
            Poll::Ready(())
        })
        .await
    }

    /// Ends a legacy session with DELETE, if there is one.
    pub(super) async fn end_session(&mut self) {
        if self.legacy_init.is_none() || self.session.is_none() {
            return;
        }
        let out = Outgoing::single(Bytes::new(), None, McpHeaders::default());
        let ex = self.send_awaited(Method::Delete, out, DELETE_LIMIT);
        // 200, 204 or 405 (the server does not let clients end sessions): all fine.
        let _ = self.reply(ex).await;
        self.set_session(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlator::{Correlator, Ledger, Sent};
    use crate::jsonrpc::Id;
    use crate::metrics::Counters;
    use crate::transport::Transport;
    use crate::transport::http::{HttpClient, HttpOptions};
    use http::Uri;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

    /// How the test server refuses a session it does not know.
    #[derive(Clone, Copy, Debug)]
    enum Refusal {
        /// 404, an error with id null (the spec's status; the SDKs' servers).
        NotFound,
        /// 400, an error with id null saying so (the TypeScript SDK's examples).
        SaysUnknown,
        /// 400, an error saying so with the request's own id (the "everything" server).
        SaysUnknownOwnId,
        /// 400, an error that names no session.
        Plain400,
    }

    /// A legacy server on loopback: `initialize` opens session `s-N`; a request carrying a
    /// session below the returned counter's value is refused as `refusal` says (raise it to
    /// forget every session so far). Every other request is answered with a result.
    async fn session_server(refusal: Refusal) -> (Uri, Arc<AtomicU64>, Arc<AtomicU64>) {
        use crate::transport::wire_for_tests::read_request;
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let (next, valid_from) = (Arc::new(AtomicU64::new(1)), Arc::new(AtomicU64::new(0)));
        let (n, v) = (next.clone(), valid_from.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (next, valid_from) = (n.clone(), v.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some((head, body)) = read_request(&mut sock, &mut buf).await {
                        let session = head
                            .lines()
                            .find_map(|l| l.strip_prefix("mcp-session-id: s-"))
                            .map(|s| s.trim().parse::<u64>().unwrap());
                        let msg: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        let id = &msg["id"];
                        let known = session.is_none_or(|s| s >= valid_from.load(SeqCst));
                        let refused = |code: i64, message: &str, id: &serde_json::Value| {
                            serde_json::json!({"jsonrpc": "2.0", "id": id,
                                "error": {"code": code, "message": message}})
                            .to_string()
                        };
                        let null = serde_json::Value::Null;
                        let (status, extra, answer) = if head.starts_with("delete") {
                            ("200 OK", String::new(), String::new())
                        } else if msg["method"] == "initialize" {
                            let s = next.fetch_add(1, SeqCst);
                            let result = serde_json::json!({"jsonrpc": "2.0", "id": id,
                                "result": {"protocolVersion": "2025-06-18"}});
                            (
                                "200 OK",
                                format!("mcp-session-id: s-{s}\r\n"),
                                result.to_string(),
                            )
                        } else if !known {
                            match refusal {
                                Refusal::NotFound => (
                                    "404 Not Found",
                                    String::new(),
                                    refused(-32001, "Session not found", &null),
                                ),
                                Refusal::SaysUnknown => (
                                    "400 Bad Request",
                                    String::new(),
                                    refused(
                                        -32000,
                                        "Bad Request: No valid session ID provided",
                                        &null,
                                    ),
                                ),
                                Refusal::SaysUnknownOwnId => (
                                    "400 Bad Request",
                                    String::new(),
                                    refused(
                                        -32000,
                                        "Bad Request: No valid session ID provided",
                                        id,
                                    ),
                                ),
                                Refusal::Plain400 => (
                                    "400 Bad Request",
                                    String::new(),
                                    refused(-32600, "Bad Request", &null),
                                ),
                            }
                        } else if id.is_null() {
                            ("202 Accepted", String::new(), String::new())
                        } else {
                            let result =
                                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}});
                            ("200 OK", String::new(), result.to_string())
                        };
                        let reply = format!(
                            "HTTP/1.1 {status}\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        );
                        if sock.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, next, valid_from)
    }

    /// A transport with its legacy session open, as the connector leaves it.
    async fn connected(url: &Uri, session_lost_on_400: bool) -> HttpTransport {
        let opts = HttpOptions {
            pool_size: 4,
            session_lost_on_400,
            ..HttpOptions::default()
        };
        let mut t = HttpTransport::new(HttpClient::new(url, &opts).unwrap(), &opts);
        super::super::tests::open_legacy_session(&mut t, Duration::from_secs(10)).await;
        t
    }

    /// Sends calls `ids` all at once and counts until each has ended and no exchange is
    /// open, as a worker does.
    async fn calls(t: &mut HttpTransport, ids: std::ops::Range<i64>) -> Counters {
        let mut c = Correlator::default();
        let mut ledger = Ledger::default();
        let now = std::time::Instant::now();
        for n in ids {
            let sent = Sent {
                due: now,
                written: now,
                deadline: now + Duration::from_secs(30),
            };
            c.register(Id::Num(n), sent).unwrap();
            let body = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
            t.send(Outgoing::single(
                body.into(),
                Some(Id::Num(n)),
                McpHeaders::default(),
            ));
        }
        while c.in_flight() > 0 || t.open_exchanges() > 0 {
            let ev = tokio::time::timeout(Duration::from_secs(30), t.next_event())
                .await
                .expect("every call ends");
            ledger.apply(&mut c, ev);
        }
        let mut k = c.stats().counters;
        t.take_counters(&mut k);
        k
    }

    /// Four calls in a session the server forgot, then four more: what each answer of a
    /// server that forgot the session leads to.
    async fn forgotten(refusal: Refusal, session_lost_on_400: bool) -> (Counters, Counters) {
        let (url, next, valid_from) = session_server(refusal).await;
        let mut t = connected(&url, session_lost_on_400).await;
        let before = calls(&mut t, 0..4).await;
        assert_eq!(before.ok, 4, "{before:?}");
        valid_from.store(next.load(SeqCst), SeqCst);
        let lost = calls(&mut t, 4..8).await;
        let after = calls(&mut t, 8..12).await;
        (lost, after)
    }

    #[tokio::test]
    async fn a_request_refused_for_its_lost_session_is_sent_again_in_a_new_one() {
        for (refusal, on_400) in [
            (Refusal::NotFound, false),
            (Refusal::SaysUnknown, false),
            (Refusal::Plain400, true),
        ] {
            let (lost, after) = forgotten(refusal, on_400).await;
            let case = format!("{refusal:?}: {lost:?}");
            // Each attempt ends http_other; its retry is a new request, answered.
            assert_eq!(
                (lost.requests, lost.http_other, lost.ok),
                (8, 4, 4),
                "{case}"
            );
            assert_eq!((lost.session_lost, lost.retries_session), (4, 4), "{case}");
            assert_eq!(lost.requests, lost.ended(), "{case}");
            assert_eq!(lost.null_id, 0, "the refusal is no message: {case}");
            // One new session for the four, whatever order the refusals came in.
            assert_eq!(
                (lost.reinitializations, lost.reinit_failed),
                (1, 0),
                "{case}"
            );
            assert!(
                lost.reinit_us > 0 && lost.reinit_max_us <= lost.reinit_us,
                "{case}"
            );
            assert_eq!(
                (after.ok, after.session_lost),
                (4, 0),
                "{refusal:?}: {after:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_400_that_names_no_session_is_no_loss_unless_told() {
        let (url, next, valid_from) = session_server(Refusal::Plain400).await;
        let mut t = connected(&url, false).await;
        valid_from.store(next.load(SeqCst), SeqCst);
        let k = calls(&mut t, 0..4).await;
        // Classified as before: http_other, its error with id null a null_id.
        assert_eq!((k.requests, k.http_other, k.null_id), (4, 4, 4), "{k:?}");
        assert_eq!(
            (k.session_lost, k.reinitializations, k.retries_session),
            (0, 0, 0),
            "{k:?}"
        );
    }

    #[tokio::test]
    async fn a_request_answered_with_its_own_error_keeps_it_and_is_not_sent_again() {
        let (lost, after) = forgotten(Refusal::SaysUnknownOwnId, false).await;
        assert_eq!((lost.requests, lost.errors), (4, 4), "{lost:?}");
        assert_eq!(
            (lost.session_lost, lost.retries_session),
            (4, 0),
            "{lost:?}"
        );
        assert_eq!(lost.errors_by_code.get(&-32000), Some(&4), "{lost:?}");
        // The session is opened anew all the same (while the refusals come, or with the next
        // calls held for it).
        assert_eq!(after.ok, 4, "{after:?}");
        assert_eq!(lost.reinitializations + after.reinitializations, 1);
    }
}
