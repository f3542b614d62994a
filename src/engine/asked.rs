//! The answer to a request the server sends during a call (2025-11-25: `elicitation/create`,
//! `sampling/createMessage`, `roots/list`, on the call's stream or the session's): from the
//! profile's `[input]`, else a JSON-RPC error (-32601) counted in `input_refused`. Never left
//! waiting: a server that waits for the answer would hold its call until the timeout.

use crate::correlator::{Correlator, ServerRequest};
use crate::load::flow::CannedInput;
use crate::metrics::AskedKind;
use crate::transport::{AnyTransport, McpHeaders, Outgoing, Transport};
use bytes::Bytes;
use serde_json::{Value, json};

/// JSON-RPC's method not found: the answer to a server request the profile has no canned
/// answer for.
const NO_ANSWER: i64 = -32601;

/// Answers `request` from `canned` (or with an error), counting a refusal; true when a
/// canned answer went back.
pub(super) fn answer(
    corr: &mut Correlator,
    t: &mut AnyTransport,
    canned: Option<&CannedInput>,
    request: &ServerRequest,
) -> bool {
    let kind = AskedKind::of_method(&request.method);
    let params =
        (request.params.as_deref()).and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
    let answer = canned.and_then(|c| c.answer(kind, params.as_ref()));
    let answered = answer.is_some();
    let body = match answer {
        Some(result) => json!({"jsonrpc": "2.0", "id": request.id, "result": result}),
        None => json!({"jsonrpc": "2.0", "id": request.id, "error": {
            "code": NO_ANSWER,
            "message": format!("mcpload has no answer for {} (the profile's [input])", request.method),
        }}),
    };
    let bytes = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    t.send(Outgoing::single(bytes, None, McpHeaders::default()));
    if !answered {
        corr.input_refused(kind);
    }
    answered
}

/// Answers every request the server sent since the last call, outside calls of several
/// requests (a plain call's, a scenario step's): no call takes them as rounds.
pub(super) fn answer_all(
    corr: &mut Correlator,
    t: &mut AnyTransport,
    canned: Option<&CannedInput>,
) {
    let mut asked = Vec::new();
    corr.take_server_requests(&mut asked);
    for request in &asked {
        answer(corr, t, canned, request);
    }
}
