//! Answer bodies: how their end is known (Content-Length, chunked coding, the connection's
//! end) and how their bytes become JSON texts (one JSON body, or SSE events via
//! `transport::sse`), within the size bound and the answer budget.

use super::connection::{MAX_HEAD, malformed};
use crate::transport::budget::{AnswerBudget, AnswerBuf};
use crate::transport::sse::{SseEvent, SseParser};
use crate::transport::{BodyKind, TransportError, Unreadable};
use bytes::{Buf, Bytes, BytesMut};
use std::task::Waker;
use std::time::{Duration, Instant};

/// Longest chunk-size line accepted (extensions included).
const MAX_CHUNK_LINE: usize = 1024;

/// A JSON text or a failure to get one, from a body.
pub(super) enum Piece {
    Message(Instant, Bytes),
    Unreadable(Instant, Unreadable),
}

/// Turns body chunks into JSON texts according to the content type, within the size bound
/// and the answer budget: what is held of a JSON body (from its first byte that is not
/// whitespace) or of an SSE event grows with what arrives and is charged to the budget.
pub(super) struct BodyReader {
    kind: BodyKind,
    /// A byte of the body came.
    began: bool,
    /// Boxed: a JSON body's reader (most answers) stays small enough to move inline.
    sse: Option<Box<SseParser>>,
    json: AnswerBuf,
    /// How many more bytes a JSON or unknown body may have within the bound.
    room: usize,
    last_at: Option<Instant>,
}

impl BodyReader {
    /// A reader for a body of the kind its `Content-Type` announced, charging what it holds
    /// to `budget`.
    pub(super) fn new(kind: BodyKind, max: usize, budget: Option<AnswerBudget>) -> Self {
        let (sse, json) = match kind {
            BodyKind::Sse => (
                Some(Box::new(SseParser::with_budget(max, budget))),
                AnswerBuf::new(None),
            ),
            BodyKind::Json => (None, AnswerBuf::new(budget)),
            _ => (None, AnswerBuf::new(None)),
        };
        BodyReader {
            kind,
            began: false,
            sse,
            json,
            room: max,
            last_at: None,
        }
    }

    /// The kind of body read so far (`Empty` when no byte came).
    pub(super) fn kind(&self) -> BodyKind {
        if !self.began {
            BodyKind::Empty
        } else {
            self.kind
        }
    }

    /// Where an SSE stream that ended early can be resumed: its last event id and the
    /// `retry:` delay the server advised (both are needed). `None` for other bodies.
    pub(super) fn resume_point(&self) -> Option<(&[u8], Duration)> {
        let p = self.sse.as_ref()?;
        Some((p.last_event_id()?, Duration::from_millis(p.retry_ms()?)))
    }

    /// The length `Content-Length` announced. Returns false when a JSON or unknown body is
    /// longer than the bound: none of it is worth reading, the caller drops the connection.
    pub(super) fn announced(
        &mut self,
        length: u64,
        at: Instant,
        out: &mut impl FnMut(Piece),
    ) -> bool {
        if self.sse.is_some() || length <= self.room as u64 {
            return true;
        }
        self.began = true;
        self.too_large(at, out);
        false
    }

    /// Feeds one chunk. Returns false when the rest of the body is not worth reading (a
    /// JSON or unknown body past the bound, an SSE event past it, an answer the budget
    /// refused): the caller drops the connection.
    pub(super) fn feed(&mut self, chunk: &[u8], at: Instant, out: &mut impl FnMut(Piece)) -> bool {
        self.began |= !chunk.is_empty();
        self.last_at = Some(at);
        match &mut self.sse {
            Some(p) => {
                let mut oversized = false;
                p.feed(chunk, |e| match e {
                    // The stream ends at its oversized event, wherever the read ended.
                    _ if oversized => {}
                    SseEvent::Data(b) | SseEvent::Endpoint(b) => out(Piece::Message(at, b)),
                    SseEvent::Oversized => {
                        oversized = true;
                        out(Piece::Unreadable(at, Unreadable::TooLarge));
                    }
                });
                !oversized
            }
            None if chunk.len() > self.room => {
                self.too_large(at, out);
                false
            }
            None if self.kind == BodyKind::Json => {
                self.room -= chunk.len();
                // Whitespace before the JSON text is counted, never held.
                let text = if self.json.is_empty() {
                    chunk.trim_ascii_start()
                } else {
                    chunk
                };
                if text.is_empty() || self.json.extend(text).is_ok() {
                    return true;
                }
                self.too_large(at, out);
                false
            }
            None => {
                self.room -= chunk.len();
                true
            }
        }
    }

    /// A JSON or unknown body past the bound (or refused by the budget): what came is
    /// dropped; a JSON one is reported.
    fn too_large(&mut self, at: Instant, out: &mut impl FnMut(Piece)) {
        self.json.clear();
        if self.kind == BodyKind::Json {
            out(Piece::Unreadable(at, Unreadable::TooLarge));
        }
    }

    /// Whether the answer budget picked this answer to fail (see [`BodyReader::give_up`]).
    pub(super) fn picked(&self) -> bool {
        match &self.sse {
            Some(p) => p.picked(),
            None => self.json.picked(),
        }
    }

    /// Has `waker` woken when the answer budget picks this answer; returns whether it was
    /// picked already.
    pub(super) fn watch(&self, waker: &Waker) -> bool {
        match &self.sse {
            Some(p) => p.watch(waker),
            None => self.json.watch(waker),
        }
    }

    /// The answer budget picked this answer: it ends as oversized, what it held dropped; the
    /// caller drops the connection.
    pub(super) fn give_up(&mut self, at: Instant, out: &mut impl FnMut(Piece)) {
        self.json.clear();
        if let Some(p) = &mut self.sse {
            p.finish();
        }
        out(Piece::Unreadable(at, Unreadable::TooLarge));
    }

    /// The body broke off (a framing or transport failure): what came of a JSON body is
    /// dropped unparsed, as the request ends in that failure; an SSE stream reports the
    /// event it cut, its whole events having gone out already.
    pub(super) fn break_off(&mut self, at: Instant, out: &mut impl FnMut(Piece)) {
        self.json.clear();
        self.finish(at, false, out);
    }

    /// The body ended whole. `other_is_unreadable`: a non-empty body of another
    /// content type counts as unreadable (a success answer that carries no JSON-RPC).
    pub(super) fn finish(
        &mut self,
        at: Instant,
        other_is_unreadable: bool,
        out: &mut impl FnMut(Piece),
    ) {
        if let Some(p) = &mut self.sse {
            if p.finish() {
                out(Piece::Unreadable(at, Unreadable::Truncated));
            }
            return;
        }
        if !self.json.is_empty() {
            out(Piece::Message(self.last_at.unwrap_or(at), self.json.take()));
        } else if self.kind == BodyKind::Other && self.began && other_is_unreadable {
            out(Piece::Unreadable(at, Unreadable::UnexpectedContentType));
        }
    }
}
/// How the body's end is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Empty,
}

/// Where a chunked body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data, so many bytes left.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one.
    Trailers,
}

/// What the buffer yields next of a body.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The first `n` bytes of the buffer are body data.
    Data(usize),
    NeedMore,
    End,
}

/// Moves a body along on what the buffer holds.
pub(super) fn next_piece(
    framing: &mut Framing,
    buf: &mut BytesMut,
) -> Result<Step, TransportError> {
    let chunk = match framing {
        Framing::Empty | Framing::Length(0) => return Ok(Step::End),
        _ if buf.is_empty() => return Ok(Step::NeedMore),
        Framing::UntilClose => return Ok(Step::Data(buf.len())),
        Framing::Length(left) => {
            let n = (*left).min(buf.len() as u64);
            *left -= n;
            return Ok(Step::Data(n as usize));
        }
        Framing::Chunked(chunk) => chunk,
    };
    loop {
        match chunk {
            Chunk::Size => match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete((len, size))) => {
                    buf.advance(len);
                    *chunk = if size == 0 {
                        Chunk::Trailers
                    } else {
                        Chunk::Data(size)
                    };
                }
                Ok(httparse::Status::Partial) if buf.len() > MAX_CHUNK_LINE => {
                    return Err(malformed("chunk-size line over 1 KiB"));
                }
                Ok(httparse::Status::Partial) => return Ok(Step::NeedMore),
                Err(_) => return Err(malformed("bad chunk size")),
            },
            Chunk::Data(left) => {
                if buf.is_empty() {
                    return Ok(Step::NeedMore);
                }
                let n = (*left).min(buf.len() as u64);
                *left -= n;
                if *left == 0 {
                    *chunk = Chunk::DataEnd;
                }
                return Ok(Step::Data(n as usize));
            }
            Chunk::DataEnd => {
                if buf.len() < 2 {
                    return Ok(Step::NeedMore);
                }
                if &buf[..2] != b"\r\n" {
                    return Err(malformed("chunk data not followed by CRLF"));
                }
                buf.advance(2);
                *chunk = Chunk::Size;
            }
            Chunk::Trailers => match memchr::memmem::find(buf, b"\r\n") {
                Some(0) => {
                    buf.advance(2);
                    *framing = Framing::Empty;
                    return Ok(Step::End);
                }
                Some(at) => buf.advance(at + 2),
                None if buf.len() > MAX_HEAD => return Err(malformed("trailers over 64 KiB")),
                None => return Ok(Step::NeedMore),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::connection::{closed_early, content_kind};
    use super::*;

    fn pieces(ct: &str, chunks: &[&[u8]], max: usize, status: u16) -> (Vec<String>, BodyKind) {
        let mut r = BodyReader::new(content_kind(Some(ct.as_bytes())), max, None);
        let mut out = Vec::new();
        let mut sink = |p: Piece| {
            out.push(match p {
                Piece::Message(_, b) => String::from_utf8_lossy(&b).into_owned(),
                Piece::Unreadable(_, why) => format!("!{}", why.as_str()),
            })
        };
        let now = Instant::now();
        let mut done = false;
        for c in chunks {
            if !r.feed(c, now, &mut sink) {
                done = true;
                break;
            }
        }
        if !done {
            r.finish(now, status < 400, &mut sink);
        }
        (out, r.kind())
    }

    #[test]
    fn json_bodies_are_one_message_and_bounded() {
        let (m, k) = pieces(
            "application/json; charset=utf-8",
            &[b"{\"id\":", b"1}"],
            64,
            200,
        );
        assert_eq!((m, k), (vec!["{\"id\":1}".to_string()], BodyKind::Json));
        let (m, _) = pieces("application/json", &[&[b' '; 40], &[b' '; 40]], 64, 200);
        assert_eq!(m, vec!["!message larger than the limit".to_string()]);
        let (m, k) = pieces("application/json", &[], 64, 202);
        assert_eq!((m.len(), k), (0, BodyKind::Empty));
    }

    #[test]
    fn bodies_past_the_bound_are_not_read_on() {
        let now = Instant::now();
        let mut out = Vec::new();
        let mut json = BodyReader::new(BodyKind::Json, 64, None);
        assert!(json.announced(64, now, &mut |_| out.push("")));
        assert!(!json.announced(65, now, &mut |_| out.push("json")));
        let mut sse = BodyReader::new(BodyKind::Sse, 64, None);
        assert!(
            sse.announced(1 << 30, now, &mut |_| out.push("")),
            "SSE events are bounded one by one"
        );
        assert!(!sse.feed(&[b'x'; 80], now, &mut |_| out.push("sse")));
        assert_eq!(out, ["json", "sse"]);
    }

    #[test]
    fn whitespace_before_a_json_text_is_counted_never_held() {
        let now = Instant::now();
        let mut out = Vec::new();
        let mut r = BodyReader::new(BodyKind::Json, 1 << 20, None);
        for _ in 0..127 {
            assert!(r.feed(&[b' '; 8192], now, &mut |_| out.push("?")));
            assert_eq!(r.json.capacity(), 0);
        }
        assert!(r.feed(b"\n {\"id\":1} ", now, &mut |_| out.push("?")));
        assert_eq!(r.json.capacity(), 9, "held from the text's first byte");
        assert!(
            !r.feed(&[b' '; 8192], now, &mut |_| out.push("oversized")),
            "the spaces count against the bound"
        );
        assert_eq!((out, r.json.capacity()), (vec!["oversized"], 0));
    }

    #[test]
    fn a_json_body_that_breaks_off_is_not_parsed() {
        let mut r = BodyReader::new(BodyKind::Json, 64, None);
        let mut out = 0;
        let now = Instant::now();
        assert!(r.feed(b"{\"id\":1,\"res", now, &mut |_| out += 1));
        r.break_off(now, &mut |_| out += 1);
        assert_eq!((out, r.kind()), (0, BodyKind::Json));
    }

    #[test]
    fn sse_bodies_yield_each_event_and_report_truncation() {
        let (m, k) = pieces(
            "text/event-stream",
            &[b"id: 1\ndata: \n\ndata: {\"a\":1}\n\ndata: {\"b\""],
            64,
            200,
        );
        assert_eq!(k, BodyKind::Sse);
        assert_eq!(
            m,
            vec![
                "{\"a\":1}".to_string(),
                "!message cut off by the end of the stream".to_string()
            ]
        );
    }

    #[test]
    fn other_bodies_count_only_on_success() {
        let (m, k) = pieces("text/html", &[b"<html>"], 64, 200);
        assert_eq!((m.len(), k), (1, BodyKind::Other));
        let (m, _) = pieces("text/plain", &[b"Unsupported Media Type"], 64, 415);
        assert!(m.is_empty());
    }

    /// Feeds `wire` to a body framed as `framing`, cut into pieces of `cut` bytes, and
    /// collects the data; `Err` names the first failure.
    fn decode(framing: Framing, wire: &[u8], cut: usize) -> Result<Vec<u8>, TransportError> {
        let mut framing = framing;
        let mut buf = BytesMut::new();
        let mut data = Vec::new();
        let mut pieces = wire.chunks(cut);
        loop {
            match next_piece(&mut framing, &mut buf)? {
                Step::Data(n) => {
                    data.extend_from_slice(&buf[..n]);
                    buf.advance(n);
                }
                Step::End => return Ok(data),
                Step::NeedMore => match pieces.next() {
                    Some(p) => buf.extend_from_slice(p),
                    None => return Err(closed_early()),
                },
            }
        }
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_cuts() {
        let wire = b"5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nx-trailer: 1\r\n\r\n";
        for cut in 1..wire.len() {
            let got = decode(Framing::Chunked(Chunk::Size), wire, cut).unwrap();
            assert_eq!(got, b"hello world!", "cut {cut}");
        }
        let plain = b"0\r\n\r\n";
        assert_eq!(
            decode(Framing::Chunked(Chunk::Size), plain, 2).unwrap(),
            b""
        );
    }

    #[test]
    fn broken_chunked_bodies_are_errors_not_hangs() {
        let cases: [&[u8]; 4] = [
            b"zz\r\nhello\r\n0\r\n\r\n",
            b"5\r\nhelloXX0\r\n\r\n",
            b"5\r\nhel",
            b"5\r\nhello\r\n",
        ];
        for wire in cases {
            assert!(
                decode(Framing::Chunked(Chunk::Size), wire, 3).is_err(),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let endless_size = vec![b'1'; 2 * MAX_CHUNK_LINE];
        assert!(decode(Framing::Chunked(Chunk::Size), &endless_size, 64).is_err());
    }

    #[test]
    fn length_and_close_framing_stop_where_they_should() {
        assert_eq!(decode(Framing::Length(5), b"hello", 2).unwrap(), b"hello");
        assert!(decode(Framing::Length(6), b"hello", 2).is_err());
        assert_eq!(decode(Framing::Empty, b"", 1).unwrap(), b"");
        // A body read to the connection's end: the end shows as the pieces running out.
        assert!(decode(Framing::UntilClose, b"abc", 1).is_err());
    }
}
