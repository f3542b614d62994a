//! Encoding: one request, a notification, a batch; a request pre-serialised once and
//! re-stamped with a fresh id for every send.

use super::Id;
use serde_json::value::RawValue;

/// Appends one request to `out`. `params` is already-serialised JSON (or `None`).
pub fn encode_request(out: &mut Vec<u8>, id: &Id, method: &str, params: Option<&RawValue>) {
    match params {
        Some(p) => encode_request_with(out, id, method, |out| {
            out.extend_from_slice(p.get().as_bytes())
        }),
        None => {
            write_head(out, id, method);
            out.push(b'}');
        }
    }
}

/// Appends one request whose params `write_params` renders in place (a template).
pub fn encode_request_with(
    out: &mut Vec<u8>,
    id: &Id,
    method: &str,
    write_params: impl FnOnce(&mut Vec<u8>),
) {
    write_head(out, id, method);
    out.extend_from_slice(br#","params":"#);
    write_params(out);
    out.push(b'}');
}

fn write_head(out: &mut Vec<u8>, id: &Id, method: &str) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    write_id(out, id);
    out.extend_from_slice(br#","method":"#);
    write_json_str(out, method);
}

/// Appends one notification (no id) to `out`.
pub fn encode_notification(out: &mut Vec<u8>, method: &str, params: Option<&RawValue>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
    write_json_str(out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p.get().as_bytes());
    }
    out.push(b'}');
}

/// A request serialised once without its id; [`RequestTemplate::stamp`] writes it with an id
/// at the cost of a memcpy and an integer format.
#[derive(Clone, Debug)]
pub struct RequestTemplate {
    /// Everything after the id: `,"method":...,"params":...}`.
    tail: Box<[u8]>,
    method: Box<str>,
}

impl RequestTemplate {
    pub fn new(method: &str, params: Option<&RawValue>) -> Self {
        let mut tail = Vec::with_capacity(64 + params.map_or(0, |p| p.get().len()));
        tail.extend_from_slice(br#","method":"#);
        write_json_str(&mut tail, method);
        if let Some(p) = params {
            tail.extend_from_slice(br#","params":"#);
            tail.extend_from_slice(p.get().as_bytes());
        }
        tail.push(b'}');
        RequestTemplate {
            tail: tail.into_boxed_slice(),
            method: method.into(),
        }
    }

    pub fn method(&self) -> &str {
        &self.method
    }

    /// Appends the request with `id` to `out`.
    pub fn stamp(&self, out: &mut Vec<u8>, id: &Id) {
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        write_id(out, id);
        out.extend_from_slice(&self.tail);
    }
}

/// Builds a JSON array of messages in a reusable buffer.
#[derive(Debug, Default)]
pub struct BatchWriter {
    buf: Vec<u8>,
    members: usize,
}

impl BatchWriter {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.members = 0;
    }

    /// The buffer to append the next member to; call [`BatchWriter::finish`] (or
    /// [`BatchWriter::into_bytes`]) after the last.
    pub fn member(&mut self) -> &mut Vec<u8> {
        self.buf.push(if self.members == 0 { b'[' } else { b',' });
        self.members += 1;
        &mut self.buf
    }

    /// Closes the array and returns the whole batch (`[]` when empty).
    pub fn finish(&mut self) -> &[u8] {
        if self.members == 0 {
            self.buf.push(b'[');
        }
        self.buf.push(b']');
        &self.buf
    }

    /// Closes the array and hands its bytes over (`[]` when empty).
    pub fn into_bytes(mut self) -> Vec<u8> {
        self.finish();
        self.buf
    }

    pub fn len(&self) -> usize {
        self.members
    }

    pub fn is_empty(&self) -> bool {
        self.members == 0
    }
}

fn write_id(out: &mut Vec<u8>, id: &Id) {
    match id {
        Id::Num(n) => {
            let mut b = itoa::Buffer::new();
            out.extend_from_slice(b.format(*n).as_bytes());
        }
        Id::Str(s) => write_json_str(out, s),
    }
}

fn write_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing JSON into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}
