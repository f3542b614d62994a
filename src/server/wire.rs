//! What goes on the wire: a request's outcome encoded as a JSON-RPC response, spoiled by its
//! fault (if any) into a [`Shaped`] answer, tallied into the stats exactly as a correct
//! client would count it, and framed as a JSON body, a batch member, SSE events or a line.

use super::faults::FaultKind;
use super::stats::{OpCounters, Stats, View};
use crate::jsonrpc::{BatchWriter, ErrorObject, codes};
use bytes::Bytes;
use serde_json::value::RawValue;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What a method produced: a serialised result or an error.
#[derive(Debug)]
pub(crate) enum Outcome {
    Result(Vec<u8>),
    /// A result a correct client does not count `ok`: a tool error ([`View::ToolErrors`]),
    /// or a `structuredContent` off its tool's `outputSchema`
    /// ([`View::OutputSchemaViolations`]).
    Flawed(Vec<u8>, View),
    Error(ErrorObject),
}

/// An answer after its fault was applied, ready to be framed.
#[derive(Debug)]
pub(crate) enum Shaped {
    /// One JSON-RPC message (as meant, or altered: null id, unknown id, both, bad version).
    Message(Vec<u8>),
    /// The message, to be sent twice.
    Twice(Vec<u8>),
    /// Bytes that are not JSON.
    Garbage(Vec<u8>),
    /// The first half of the message.
    Cut(Vec<u8>),
    /// Nothing at all.
    Nothing,
}

/// Appends one JSON-RPC response.
pub(crate) fn encode(
    out: &mut Vec<u8>,
    jsonrpc: &str,
    id: &str,
    result: Option<&[u8]>,
    error: Option<&ErrorObject>,
) {
    out.extend_from_slice(br#"{"jsonrpc":""#);
    out.extend_from_slice(jsonrpc.as_bytes());
    out.extend_from_slice(br#"","id":"#);
    out.extend_from_slice(id.as_bytes());
    if let Some(r) = result {
        out.extend_from_slice(br#","result":"#);
        out.extend_from_slice(r);
    }
    if let Some(e) = error {
        out.extend_from_slice(br#","error":"#);
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, e);
    }
    out.push(b'}');
}

/// An error response with `"id": null` (malformed input, refused batch).
pub(crate) fn null_id_error(error: &ErrorObject) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    encode(&mut out, "2.0", "null", None, Some(error));
    out
}

fn injected(kind: FaultKind) -> ErrorObject {
    ErrorObject {
        code: crate::jsonrpc::codes::INTERNAL_ERROR,
        message: format!("mcpload serve: injected fault {}", kind.name()),
        data: None,
    }
}

/// Builds the answer to request `id` of operation `op` (fault sequence number `seq`) and
/// tallies it: what was sent, which fault, and what a correct client counts for it.
pub(crate) fn shape(
    stats: &Stats,
    op: &OpCounters,
    id: &RawValue,
    outcome: &Outcome,
    fault: Option<FaultKind>,
    seq: u64,
) -> Shaped {
    let (result, error, result_view) = match outcome {
        Outcome::Result(r) => (Some(r.as_slice()), None, View::Ok),
        Outcome::Flawed(r, v) => (Some(r.as_slice()), None, *v),
        Outcome::Error(e) => (None, Some(e), View::Errors),
    };
    let message = |jsonrpc: &str, id: &str, result: Option<&[u8]>, error: Option<&ErrorObject>| {
        let mut out = Vec::with_capacity(48 + result.map_or(64, <[u8]>::len));
        encode(&mut out, jsonrpc, id, result, error);
        out
    };
    let view = |v: View| stats.op_view(op, v, 1);
    let answered = |twice: bool| {
        stats.answered(op, error.is_some(), true);
        view(result_view);
        if twice {
            view(View::DuplicateId);
        }
    };
    // A fault that changes the result was applied to `outcome` already (and counted).
    let Some(kind) = fault.filter(|k| !k.changes_result()) else {
        answered(false);
        return Shaped::Message(message("2.0", id.get(), result, error));
    };
    stats.fault(kind);
    match kind {
        FaultKind::ToolError | FaultKind::BadStructured => unreachable!("filtered out above"),
        FaultKind::Drop => {
            view(View::Missing);
            Shaped::Nothing
        }
        FaultKind::NullId => {
            view(View::NullId);
            view(View::Missing);
            Shaped::Message(message("2.0", "null", None, Some(&injected(kind))))
        }
        FaultKind::UnknownId => {
            view(View::UnknownId);
            view(View::Missing);
            let other = format!("\"mcpload-unknown-{seq}\"");
            Shaped::Message(message("2.0", &other, result, error))
        }
        FaultKind::Duplicate => {
            answered(true);
            Shaped::Twice(message("2.0", id.get(), result, error))
        }
        FaultKind::Both => {
            stats.answered(op, error.is_some(), false);
            view(View::BothResultError);
            let fallback = injected(kind);
            Shaped::Message(message(
                "2.0",
                id.get(),
                Some(result.unwrap_or(b"{}")),
                Some(error.unwrap_or(&fallback)),
            ))
        }
        FaultKind::BadVersion => {
            stats.answered(op, error.is_some(), false);
            view(View::InvalidJsonrpc);
            Shaped::Message(message("1.0", id.get(), result, error))
        }
        FaultKind::Garbage => {
            view(View::ParseErrors);
            view(View::Missing);
            Shaped::Garbage(format!("<<mcpload garbage, request {seq}>>").into_bytes())
        }
        FaultKind::VersionRejected if id.get() == "null" => {
            // Refused with id null (`version_rejected_without_id`, HTTP 400): the request
            // ends `http_other`, its refusal counted in `null_id`.
            stats.answered(op, true, false);
            view(View::NullId);
            view(View::HttpOther);
            Shaped::Message(message("2.0", "null", None, error))
        }
        FaultKind::VersionRejected => {
            // The request's job was refused already (its outcome is the -32022 error).
            answered(false);
            Shaped::Message(message("2.0", id.get(), None, error))
        }
        FaultKind::Truncate => {
            // Over SSE the stream ends inside the event: a plain SSE parser drops it silently,
            // mcpload reports those bytes as unreadable (parse_errors), as for JSON and stdio.
            view(View::ParseErrors);
            view(View::Missing);
            let mut m = message("2.0", id.get(), result, error);
            // Cut at a character boundary so the text stays UTF-8: a proper prefix of a JSON
            // object is never JSON.
            let mut at = m.len() / 2;
            while at > 0 && (m[at] & 0xC0) == 0x80 {
                at -= 1;
            }
            m.truncate(at.max(1));
            Shaped::Cut(m)
        }
    }
}

impl Shaped {
    /// Responses carrying a non-null id that this answer puts on the wire (for
    /// `response_count_mismatch` of a batch).
    pub(crate) fn ids_on_wire(&self) -> u64 {
        match self {
            Shaped::Message(m) if !m.starts_with(br#"{"jsonrpc":"2.0","id":null"#) => 1,
            Shaped::Twice(_) => 2,
            _ => 0,
        }
    }

    /// The body of a POST that carried one request; `None` means "answer 202, no body".
    pub(crate) fn into_body(self) -> Option<Vec<u8>> {
        match self {
            Shaped::Message(m) | Shaped::Garbage(m) | Shaped::Cut(m) => Some(m),
            Shaped::Twice(_) => {
                let mut batch = BatchWriter::default();
                self.push_members(&mut batch);
                Some(batch.into_bytes())
            }
            Shaped::Nothing => None,
        }
    }

    /// Appends this answer to a batch array as its members (none, one, or the same twice).
    pub(crate) fn push_members(&self, batch: &mut BatchWriter) {
        match self {
            Shaped::Message(m) => batch.member().extend_from_slice(m),
            Shaped::Twice(m) => {
                batch.member().extend_from_slice(m);
                batch.member().extend_from_slice(m);
            }
            Shaped::Garbage(m) | Shaped::Cut(m) => {
                let text = serde_json::to_vec(&String::from_utf8_lossy(m)).unwrap_or_default();
                batch.member().extend_from_slice(&text);
            }
            Shaped::Nothing => {}
        }
    }

    /// The SSE bytes of this answer. A cut answer `alone` on its stream is left unterminated
    /// (the stream then ends); among several it is a whole event.
    pub(crate) fn sse(&self, alone: bool) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Shaped::Message(m) | Shaped::Garbage(m) => sse_event(&mut out, m),
            Shaped::Twice(m) => {
                sse_event(&mut out, m);
                sse_event(&mut out, m);
            }
            Shaped::Cut(m) if alone => {
                out.extend_from_slice(b"event: message\ndata: ");
                out.extend_from_slice(m);
            }
            Shaped::Cut(m) => sse_event(&mut out, m),
            Shaped::Nothing => {}
        }
        out
    }

    /// The stdio bytes of this answer: whole lines.
    pub(crate) fn lines(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut line = |m: &[u8]| {
            out.extend_from_slice(m);
            out.push(b'\n');
        };
        match self {
            Shaped::Message(m) | Shaped::Garbage(m) | Shaped::Cut(m) => line(m),
            Shaped::Twice(m) => {
                line(m);
                line(m);
            }
            Shaped::Nothing => {}
        }
        out
    }
}

/// Appends one SSE event carrying `data` (which holds no newline).
pub(crate) fn sse_event(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}

/// Where a running request sends server notifications: an SSE stream or stdout.
pub(crate) struct Sink {
    tx: mpsc::Sender<Bytes>,
    sse: bool,
    stats: Arc<Stats>,
    /// Progress notifications to send after the answer (`progress_fault` after-result).
    late: Mutex<Vec<(Vec<u8>, Arc<OpCounters>)>>,
}

impl Sink {
    pub(crate) fn new(tx: mpsc::Sender<Bytes>, sse: bool, stats: Arc<Stats>) -> Sink {
        Sink {
            tx,
            sse,
            stats,
            late: Mutex::default(),
        }
    }

    /// Sends an answer (framed) and the progress notifications held for after it in one
    /// write, so that no reader has the answer without them; counts them. False when the
    /// stream was closed.
    pub(crate) async fn answer(&self, mut answer: Vec<u8>) -> bool {
        let late = self.take_late();
        for (message, _) in &late {
            self.frame(&mut answer, message);
        }
        let sent = self.tx.send(Bytes::from(answer)).await.is_ok();
        if sent {
            late.iter().for_each(|(_, op)| self.sent_late(op));
        }
        sent
    }

    /// Sends the progress notifications held for after the answers (all written), and
    /// counts them.
    pub(crate) async fn send_late(&self) {
        for (message, op) in self.take_late() {
            if self.notify(&op, message).await {
                self.sent_late(&op);
            }
        }
    }

    fn take_late(&self) -> Vec<(Vec<u8>, Arc<OpCounters>)> {
        std::mem::take(&mut *self.late.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Counts a notification sent after its answer.
    fn sent_late(&self, op: &OpCounters) {
        self.stats.op_view(op, View::ServerMessages, 1);
        Stats::add(&self.stats.progress.sent, 1);
        Stats::add(&self.stats.progress.after_result, 1);
    }

    /// Appends `message` to `out` as this sink frames it: an SSE event, or a line.
    fn frame(&self, out: &mut Vec<u8>, message: &[u8]) {
        if self.sse {
            sse_event(out, message);
        } else {
            out.extend_from_slice(message);
            out.push(b'\n');
        }
    }

    /// Sends one server notification about a request of operation `op`; a closed stream
    /// drops it silently (false).
    async fn notify(&self, op: &OpCounters, message: Vec<u8>) -> bool {
        let mut framed = Vec::with_capacity(message.len() + 24);
        self.frame(&mut framed, &message);
        let sent = self.tx.send(Bytes::from(framed)).await.is_ok();
        if sent {
            self.stats.op_view(op, View::ServerMessages, 1);
        }
        sent
    }
}

/// Where one request's server notifications go: its sink, counted for its operation.
#[derive(Clone, Copy)]
pub(crate) struct Progress<'a> {
    sink: &'a Sink,
    op: &'a Arc<OpCounters>,
}

impl<'a> Progress<'a> {
    pub(crate) fn new(sink: &'a Sink, op: &'a Arc<OpCounters>) -> Progress<'a> {
        Progress { sink, op }
    }

    /// Sends one notification (progress, task status); false when the stream was closed.
    pub(crate) async fn send(&self, message: Vec<u8>) -> bool {
        self.sink.notify(self.op, message).await
    }

    /// Holds a progress notification to send right after the request's answer.
    pub(crate) fn after_answer(&self, message: Vec<u8>) {
        let mut late = self.sink.late.lock().unwrap_or_else(|e| e.into_inner());
        late.push((message, Arc::clone(self.op)));
    }
}

/// A JSON-RPC -32602 error with `message`.
pub(crate) fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject {
        code: codes::INVALID_PARAMS,
        message: message.into(),
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Box<RawValue> {
        RawValue::from_string("42".into()).unwrap()
    }

    fn ok() -> Outcome {
        Outcome::Result(br#"{"content":[]}"#.to_vec())
    }

    #[test]
    fn each_fault_shapes_and_tallies() {
        let stats = Stats::default();
        let op = stats.operation("echo");
        let s = shape(&stats, &op, &id(), &ok(), None, 1);
        assert_eq!(
            s.into_body().unwrap(),
            br#"{"jsonrpc":"2.0","id":42,"result":{"content":[]}}"#
        );
        let s = shape(&stats, &op, &id(), &ok(), Some(FaultKind::Drop), 2);
        assert!(s.into_body().is_none());
        let s = shape(&stats, &op, &id(), &ok(), Some(FaultKind::UnknownId), 3);
        assert!(
            String::from_utf8(s.into_body().unwrap())
                .unwrap()
                .contains("\"mcpload-unknown-3\"")
        );
        let s = shape(&stats, &op, &id(), &ok(), Some(FaultKind::Both), 4);
        let v: serde_json::Value = serde_json::from_slice(&s.into_body().unwrap()).unwrap();
        assert!(v.get("result").is_some() && v.get("error").is_some());
        let s = shape(&stats, &op, &id(), &ok(), Some(FaultKind::Truncate), 5);
        let body = s.into_body().unwrap();
        assert!(serde_json::from_slice::<serde_json::Value>(&body).is_err());
        let s = shape(&stats, &op, &id(), &ok(), Some(FaultKind::Truncate), 6);
        assert!(!s.sse(true).ends_with(b"\n"));
        let snap = stats.snapshot();
        assert_eq!(snap.answers_sent, 2);
        assert_eq!(snap.faults.total(), 5);
        assert_eq!(snap.client_view.ok, 1);
        assert_eq!(snap.client_view.missing, 4);
        // A cut answer is unreadable bytes, however it travels.
        assert_eq!(snap.client_view.parse_errors, 2);
        // All of it was written for echo calls.
        let echo = &snap.operations["echo"];
        assert_eq!(echo.client_view, snap.client_view);
        assert_eq!((echo.answered_ok, echo.answered_error), (2, 0));
        assert_eq!(snap.operations.len(), 1);
    }

    #[test]
    fn batch_members_stay_valid_json() {
        let stats = Stats::default();
        let op = stats.operation("echo");
        let mut batch = BatchWriter::default();
        let mut ids = 0;
        for (seq, f) in [
            None,
            Some(FaultKind::Garbage),
            Some(FaultKind::Duplicate),
            Some(FaultKind::NullId),
        ]
        .into_iter()
        .enumerate()
        {
            let s = shape(&stats, &op, &id(), &ok(), f, seq as u64);
            ids += s.ids_on_wire();
            s.push_members(&mut batch);
        }
        let v: Vec<serde_json::Value> = serde_json::from_slice(batch.finish()).unwrap();
        assert_eq!(v.len(), 5);
        assert_eq!(ids, 3);
    }
}
