//! Legacy sessions (2025-03-26 to 2025-11-25): opening one anew when the server says it is
//! gone (404, or a 400 that says so; the load waits meanwhile, and the requests refused for
//! it are sent again in the new one), and its DELETE at the end. Both go over the transport's
//! own connections, like everything else it sends.

use super::HttpTransport;
use super::client::{Method, RequestHead};
use super::side::{Reply, Side};
use crate::transport::{Event, McpHeaders, Outgoing, TransportError};
use bytes::Bytes;
use http::HeaderValue;
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
        let head = RequestHead::new(&self.client, self.protocol_version.as_ref(), session);
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
