//! Legacy sessions (2025-03-26 to 2025-11-25): the two POSTs that open one, its
//! re-initialization when the server answers 404 for it.

use super::client::{
    HttpClient, METHOD_HEADER, NAME_HEADER, SESSION_HEADER, VERSION_HEADER, client_error,
    read_reply,
};
use super::exchange::{Flow, Item};
use super::{HttpTransport, within};
use crate::transport::{Event, TransportError};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use http::header::HOST;
use http::{HeaderValue, Method, Uri};
use std::time::Duration;

/// The two POSTs that (re)open a legacy session.
#[derive(Clone, Debug)]
pub struct LegacyInit {
    pub initialize: Bytes,
    pub initialized: Bytes,
}

/// Opens a new legacy session: `initialize`, then `notifications/initialized`.
pub(super) async fn reinitialize(
    client: HttpClient,
    url: Uri,
    host: Option<HeaderValue>,
    version: Option<HeaderValue>,
    init: &LegacyInit,
    max: usize,
) -> Result<HeaderValue, TransportError> {
    let post = |body: &Bytes, session: Option<&HeaderValue>| {
        let req = client.request(
            Method::POST,
            &url,
            body.clone(),
            [
                (HOST, host.as_ref()),
                (VERSION_HEADER, version.as_ref()),
                (SESSION_HEADER, session),
                (METHOD_HEADER, None),
                (NAME_HEADER, None),
            ],
        );
        client.send(req)
    };
    let deadline = Some(tokio::time::Instant::now() + Duration::from_secs(30));
    let reply = within(deadline, read_reply(post(&init.initialize, None), max)).await??;
    if reply.status >= 400 {
        return Err(TransportError::Session(format!(
            "initialize answered HTTP {}",
            reply.status
        )));
    }
    let session = reply
        .session_id
        .ok_or_else(|| TransportError::Session("initialize gave no session id".into()))?;
    let deadline = Some(tokio::time::Instant::now() + Duration::from_secs(30));
    let status = within(deadline, post(&init.initialized, Some(&session)))
        .await?
        .map_err(|e| client_error(&e))?
        .status();
    if !status.is_success() {
        return Err(TransportError::Session(format!(
            "notifications/initialized answered HTTP {status}"
        )));
    }
    Ok(session)
}

impl HttpTransport {
    pub(super) fn start_restart(&mut self) {
        let Some(init) = self.legacy_init.clone() else {
            return;
        };
        self.restarting = true;
        let client = self.client.clone();
        let url = self.url.clone();
        let host = self.host.clone();
        let version = self.protocol_version.clone();
        let max = self.max_message_bytes;
        let fut = async move { reinitialize(client, url, host, version, &init, max).await };
        self.exchanges.push(Flow::Other(
            fut.into_stream().map(Item::SessionReady).boxed(),
        ));
    }

    pub(super) fn on_session_ready(&mut self, result: Result<HeaderValue, TransportError>) {
        self.restarting = false;
        match result {
            Ok(session) => {
                self.set_session(Some(session));
                self.counters.session_restarts += 1;
                let now = tokio::time::Instant::now();
                for (ex, out) in std::mem::take(&mut self.held) {
                    self.launch(ex, out, now);
                }
            }
            Err(error) => {
                for (ex, out) in std::mem::take(&mut self.held) {
                    self.open -= 1;
                    self.ready.push_back(Event::Failed {
                        exchange: Some(ex),
                        ids: out.ids,
                        error: error.clone(),
                    });
                }
            }
        }
    }
}
