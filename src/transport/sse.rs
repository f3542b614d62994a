//! A pure, incremental Server-Sent Events parser (the WHATWG `text/event-stream` rules) that
//! turns body chunks into the `data` of each event, bounded in memory.
//!
//! Chunks may split lines, `CRLF` pairs and UTF-8 sequences anywhere. Lines end with CRLF, LF
//! or CR (a leading byte order mark is dropped, even split across chunks); `:` lines are
//! comments; `event:` is read and dropped, except that a parser made to
//! [`SseParser::report_endpoints`] reports an `endpoint` event (legacy HTTP+SSE) as such; `id:` and `retry:` are not needed for pairing and
//! are kept for resuming a stream (the last event id, as the standard sets it on each
//! dispatch, and the last `retry:` advice); several `data:` lines join with `\n`. Only an
//! event's data is held: a line's field name is read as it comes, a `data` value goes
//! straight into the event's data, and every other byte is counted and dropped. An event
//! whose data is empty (the priming event of 2025-11-25) is skipped, as the standard says. An
//! event larger than the bound (its data and the line being read), or whose data the answer
//! budget refuses, is dropped and reported once as [`SseEvent::Oversized`]; an event cut off
//! by the end of the stream is reported by [`SseParser::finish`].

use crate::transport::budget::{AnswerBudget, AnswerBuf};
use bytes::Bytes;
use std::task::Waker;

/// The UTF-8 byte order mark a stream may open with.
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// `SseParser::bom_matched` once the stream is past its first bytes.
const BOM_DECIDED: usize = usize::MAX;
/// The longest field name that matters (`retry`); a longer one names a field not read.
const NAME_MAX: usize = 5;
/// The longest `retry:` value read (a u64 has 20 digits); a longer one is not a number.
const RETRY_MAX: usize = 20;
/// The longest `id:` value kept; a longer one is ignored like an id with a NUL (mcpload
/// would have to send it back whole in `Last-Event-ID`).
const ID_MAX: usize = 256;

/// One complete event off the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent {
    /// The event's data (non-empty): one JSON-RPC message, or bytes that claim to be one.
    Data(Bytes),
    /// The data of an `event: endpoint` (the legacy HTTP+SSE transport's POST URL), only
    /// from a parser made to [`SseParser::report_endpoints`].
    Endpoint(Bytes),
    /// An event (or a line) longer than the bound, or refused by the answer budget; its
    /// bytes were discarded.
    Oversized,
}

/// The fields a line can set that matter here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Data,
    Retry,
    Id,
    Event,
    /// A comment, `event`, or a field the standard does not know.
    Ignored,
}

/// Where the line being read is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// In the field name (up to the first colon).
    Name,
    /// Just past the colon: a single space here is dropped.
    Colon(Field),
    Value(Field),
}

/// The incremental parser. Feed it chunks as they come; it holds no more than the data of
/// the event being read, at most `max_event_bytes`.
#[derive(Debug)]
pub struct SseParser {
    /// The data of the event being read, lines joined with `\n`.
    data: AnswerBuf,
    /// A `data` line was seen since the last dispatch (even an empty one).
    has_data: bool,
    /// The previous chunk ended with CR: a leading LF of the next chunk belongs to it.
    after_cr: bool,
    /// The current event went over the bound: skip until its end.
    discarding: bool,
    at: At,
    /// The first bytes of the field name being read, and how many it has (counted up to
    /// one past [`NAME_MAX`]).
    name: [u8; NAME_MAX],
    name_len: usize,
    /// The `retry:` value being read, and how many bytes it has (up to one past the most).
    retry: [u8; RETRY_MAX],
    retry_len: usize,
    /// Bytes of the line being read that are not held in `data` (name, colon, other values).
    line_len: usize,
    /// The line being read has at least one byte (kept while discarding, so the end of an
    /// oversized line is not taken for a blank line).
    line_nonempty: bool,
    /// The line being read has a byte other than ASCII whitespace: cut off, it is a
    /// truncated event.
    line_visible: bool,
    /// How many bytes of a leading UTF-8 byte order mark the stream has opened with so far
    /// (they are dropped when it completes), or [`BOM_DECIDED`] once the stream is past it.
    bom_matched: usize,
    max_event_bytes: usize,
    retry_ms: Option<u64>,
    /// The `id:` value being read (up to one byte past [`ID_MAX`]).
    id_line: Vec<u8>,
    /// The standard's last event ID buffer: the last valid `id:` value read.
    id_buffer: Vec<u8>,
    /// The last event ID: the buffer as it was at the last dispatch (empty: none).
    last_event_id: Vec<u8>,
    /// `endpoint` events are reported as [`SseEvent::Endpoint`].
    endpoints: bool,
    /// The `event:` value being read: how many of its bytes matched `endpoint` so far
    /// (`usize::MAX` once one did not).
    event_matched: usize,
    /// The event being read is of type `endpoint`.
    is_endpoint: bool,
}

/// The event type of the legacy transport's POST URL.
const ENDPOINT: &[u8] = b"endpoint";

impl SseParser {
    /// A parser whose events hold at most `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self::with_budget(max_event_bytes, None)
    }

    /// A parser whose event data is also charged to `budget`.
    pub fn with_budget(max_event_bytes: usize, budget: Option<AnswerBudget>) -> Self {
        let max_event_bytes = max_event_bytes.max(1);
        SseParser {
            data: AnswerBuf::new(budget),
            has_data: false,
            after_cr: false,
            discarding: false,
            at: At::Name,
            name: [0; NAME_MAX],
            name_len: 0,
            retry: [0; RETRY_MAX],
            retry_len: 0,
            line_len: 0,
            line_nonempty: false,
            line_visible: false,
            bom_matched: 0,
            max_event_bytes,
            retry_ms: None,
            id_line: Vec::new(),
            id_buffer: Vec::new(),
            last_event_id: Vec::new(),
            endpoints: false,
            event_matched: 0,
            is_endpoint: false,
        }
    }

    /// Reports `event: endpoint` events as [`SseEvent::Endpoint`] (legacy HTTP+SSE).
    pub fn report_endpoints(mut self) -> Self {
        self.endpoints = true;
        self
    }

    /// The last `retry:` value the server sent, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// The last event id, set as each event is dispatched (priming events with no data
    /// included); `None` while there is none. A client resumes with it in `Last-Event-ID`.
    pub fn last_event_id(&self) -> Option<&[u8]> {
        Some(self.last_event_id.as_slice()).filter(|id| !id.is_empty())
    }

    /// Whether the answer budget picked the event being read to fail.
    pub fn picked(&self) -> bool {
        self.data.picked()
    }

    /// Has `waker` woken when the answer budget picks the event being read; returns whether
    /// it was picked already.
    pub fn watch(&self, waker: &Waker) -> bool {
        self.data.watch(waker)
    }

    /// Parses one chunk, calling `out` for every event it completes.
    pub fn feed(&mut self, chunk: &[u8], mut out: impl FnMut(SseEvent)) {
        if self.bom_matched == BOM_DECIDED {
            return self.feed_lines(chunk, &mut out);
        }
        // A UTF-8 byte order mark may open the stream, whole or split across chunks.
        let before = self.bom_matched;
        let matched = chunk
            .iter()
            .zip(&BOM[before..])
            .take_while(|(a, b)| a == b)
            .count();
        if before + matched == BOM.len() {
            self.bom_matched = BOM_DECIDED;
            self.feed_lines(&chunk[matched..], &mut out);
        } else if matched == chunk.len() {
            self.bom_matched = before + matched;
        } else {
            // Not a BOM after all: the bytes held back were the stream's first.
            self.bom_matched = BOM_DECIDED;
            self.feed_lines(&BOM[..before], &mut out);
            self.feed_lines(chunk, &mut out);
        }
    }

    fn feed_lines(&mut self, mut chunk: &[u8], out: &mut impl FnMut(SseEvent)) {
        if self.after_cr {
            self.after_cr = false;
            if chunk.first() == Some(&b'\n') {
                chunk = &chunk[1..];
            }
        }
        while !chunk.is_empty() {
            match memchr::memchr2(b'\n', b'\r', chunk) {
                Some(i) => {
                    let end = chunk[i];
                    self.line_bytes(&chunk[..i], out);
                    self.end_line(out);
                    chunk = &chunk[i + 1..];
                    if end == b'\r' {
                        match chunk.first() {
                            Some(b'\n') => chunk = &chunk[1..],
                            None => self.after_cr = true,
                            Some(_) => {}
                        }
                    }
                }
                None => {
                    self.line_bytes(chunk, out);
                    break;
                }
            }
        }
    }

    /// The stream ended. Returns true when an event was cut off (data or a partial line that
    /// never got its terminating blank line); its bytes are discarded, as the standard says.
    pub fn finish(&mut self) -> bool {
        let held_back = self.bom_matched != BOM_DECIDED && self.bom_matched > 0;
        let cut = held_back || self.has_data || self.line_visible;
        self.data.clear();
        self.has_data = false;
        self.discarding = false;
        self.new_line();
        cut
    }

    /// Reads bytes of a line (no line end among them).
    fn line_bytes(&mut self, mut bytes: &[u8], out: &mut impl FnMut(SseEvent)) {
        if bytes.is_empty() {
            return;
        }
        self.line_nonempty = true;
        if self.discarding {
            return;
        }
        if !self.line_visible {
            self.line_visible = bytes.iter().any(|b| !b.is_ascii_whitespace());
        }
        while !bytes.is_empty() {
            let fits = match self.at {
                At::Name => {
                    let (name, rest, colon) = match memchr::memchr(b':', bytes) {
                        Some(c) => (&bytes[..c], &bytes[c + 1..], true),
                        None => (bytes, &b""[..], false),
                    };
                    self.keep_name(name);
                    self.line_len += name.len() + usize::from(colon);
                    if colon {
                        self.at = At::Colon(self.field());
                    }
                    bytes = rest;
                    true
                }
                At::Colon(field) => {
                    if bytes[0] == b' ' {
                        self.line_len += 1;
                        bytes = &bytes[1..];
                    }
                    self.at = At::Value(field);
                    field != Field::Data || self.start_data()
                }
                At::Value(Field::Data) => {
                    let value = std::mem::take(&mut bytes);
                    self.data.len() + value.len() + self.line_len <= self.max_event_bytes
                        && self.data.extend(value).is_ok()
                }
                At::Value(field) => {
                    let value = std::mem::take(&mut bytes);
                    if field == Field::Id && self.id_line.len() <= ID_MAX {
                        let keep = value.len().min(ID_MAX + 1 - self.id_line.len());
                        self.id_line.extend_from_slice(&value[..keep]);
                    }
                    if field == Field::Event && self.event_matched != usize::MAX {
                        let at = self.event_matched;
                        self.event_matched = if ENDPOINT.get(at..at + value.len()) == Some(value) {
                            at + value.len()
                        } else {
                            usize::MAX
                        };
                    }
                    if field == Field::Retry {
                        let keep = value.len().min(RETRY_MAX - self.retry_len.min(RETRY_MAX));
                        let at = self.retry_len.min(RETRY_MAX);
                        self.retry[at..at + keep].copy_from_slice(&value[..keep]);
                        self.retry_len = (self.retry_len + value.len()).min(RETRY_MAX + 1);
                    }
                    self.line_len += value.len();
                    true
                }
            };
            if !fits || self.data.len() + self.line_len > self.max_event_bytes {
                return self.start_discarding(out);
            }
        }
    }

    /// Keeps the first bytes of the field name.
    fn keep_name(&mut self, bytes: &[u8]) {
        let at = self.name_len.min(NAME_MAX);
        let keep = bytes.len().min(NAME_MAX - at);
        self.name[at..at + keep].copy_from_slice(&bytes[..keep]);
        self.name_len = (self.name_len + bytes.len()).min(NAME_MAX + 1);
    }

    /// The field the name read so far names.
    fn field(&self) -> Field {
        match self.name.get(..self.name_len) {
            Some(b"data") => Field::Data,
            Some(b"retry") => Field::Retry,
            Some(b"id") => Field::Id,
            Some(b"event") => Field::Event,
            _ => Field::Ignored,
        }
    }

    /// A `data` line's value begins: it joins the data before it with `\n`. False when that
    /// is refused (bound or budget).
    fn start_data(&mut self) -> bool {
        if !std::mem::replace(&mut self.has_data, true) {
            return true;
        }
        self.data.len() + 1 + self.line_len <= self.max_event_bytes
            && self.data.extend(b"\n").is_ok()
    }

    fn start_discarding(&mut self, out: &mut impl FnMut(SseEvent)) {
        self.discarding = true;
        self.data.clear();
        self.has_data = false;
        self.line_visible = false;
        out(SseEvent::Oversized);
    }

    /// Forgets the line read (its end was reached).
    fn new_line(&mut self) {
        self.at = At::Name;
        self.name_len = 0;
        self.retry_len = 0;
        self.event_matched = 0;
        self.id_line.clear();
        self.line_len = 0;
        self.line_nonempty = false;
        self.line_visible = false;
    }

    fn end_line(&mut self, out: &mut impl FnMut(SseEvent)) {
        let (at, field, nonempty) = (self.at, self.field(), self.line_nonempty);
        if at == At::Value(Field::Retry) && self.retry_len <= RETRY_MAX {
            let value = std::str::from_utf8(&self.retry[..self.retry_len]).ok();
            if let Some(ms) = value.and_then(|v| v.parse::<u64>().ok()) {
                self.retry_ms = Some(ms);
            }
        }
        // `id` with no value (or no colon) empties the buffer; one with a NUL is ignored.
        let id_field = matches!(at, At::Value(Field::Id) | At::Colon(Field::Id))
            || (at == At::Name && field == Field::Id);
        if id_field && self.id_line.len() <= ID_MAX && !self.id_line.contains(&0) {
            std::mem::swap(&mut self.id_buffer, &mut self.id_line);
        }
        if matches!(at, At::Value(Field::Event) | At::Colon(Field::Event)) {
            self.is_endpoint = self.event_matched == ENDPOINT.len();
        }
        self.new_line();
        if !nonempty {
            return self.dispatch(out);
        }
        // A `data` line with no value adds an empty line to the data.
        let empty_data = at == At::Colon(Field::Data) || (at == At::Name && field == Field::Data);
        if !self.discarding && empty_data && !self.start_data() {
            self.start_discarding(out);
        }
    }

    fn dispatch(&mut self, out: &mut impl FnMut(SseEvent)) {
        self.last_event_id.clone_from(&self.id_buffer);
        let endpoint = std::mem::take(&mut self.is_endpoint) && self.endpoints;
        if self.discarding {
            self.discarding = false;
            return;
        }
        self.has_data = false;
        if self.data.is_empty() {
            self.data.clear();
        } else if endpoint {
            out(SseEvent::Endpoint(self.data.take()));
        } else {
            out(SseEvent::Data(self.data.take()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]], max: usize) -> (Vec<SseEvent>, bool) {
        let mut p = SseParser::new(max);
        let mut v = Vec::new();
        for c in chunks {
            p.feed(c, |e| v.push(e));
        }
        let cut = p.finish();
        (v, cut)
    }

    fn data(s: &str) -> SseEvent {
        SseEvent::Data(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn endpoint_events_are_told_apart_only_when_asked() {
        let body: &[u8] =
            b"event: endpoint\ndata: /messages/?session_id=1\n\nevent: endpoints\ndata: {}\n\ndata: {\"id\":1}\n\n";
        let mut told = Vec::new();
        let mut p = SseParser::new(1024).report_endpoints();
        // Split inside the event type: it is matched across chunks.
        p.feed(&body[..10], |e| told.push(e));
        p.feed(&body[10..], |e| told.push(e));
        let url = SseEvent::Endpoint(Bytes::from_static(b"/messages/?session_id=1"));
        assert_eq!(told, vec![url, data("{}"), data("{\"id\":1}")]);
        let (plain, _) = parse_chunks(&[body], 1024);
        assert_eq!(plain[0], data("/messages/?session_id=1"));
    }

    #[test]
    fn one_event_per_blank_line_and_priming_events_are_skipped() {
        let body = b"id: a\ndata: \n\nevent: message\nid: b\ndata: {\"id\":1}\n\n";
        let (ev, cut) = parse_chunks(&[body], 1024);
        assert_eq!(ev, vec![data("{\"id\":1}")]);
        assert!(!cut);
    }

    #[test]
    fn multi_line_data_joins_with_newline_and_comments_are_ignored() {
        let body = b": keep-alive\ndata: [1,\ndata:2]\nretry: 1500\n\n";
        let mut p = SseParser::new(1024);
        let mut v = Vec::new();
        p.feed(body, |e| v.push(e));
        assert_eq!(v, vec![data("[1,\n2]")]);
        assert_eq!(p.retry_ms(), Some(1500));
    }

    #[test]
    fn crlf_cr_and_lf_endings_split_anywhere() {
        let body: &[u8] = b"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\n\r\n";
        let expect = vec![data("a"), data("b"), data("c"), data("d")];
        for cut_at in 0..body.len() {
            let (ev, cut) = parse_chunks(&[&body[..cut_at], &body[cut_at..]], 64);
            assert_eq!(ev, expect, "split at {cut_at}");
            assert!(!cut);
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(parse_chunks(&bytes, 64).0, expect);
    }

    #[test]
    fn a_field_without_colon_and_a_bom_are_handled() {
        let (ev, _) = parse_chunks(&[b"\xEF\xBB\xBFdata\n\ndata:x\n\n"], 64);
        // `data` alone is a data line with an empty value: an empty event, skipped.
        assert_eq!(ev, vec![data("x")]);
    }

    #[test]
    fn a_bom_split_across_chunks_is_still_dropped() {
        // Found by the sse_split fuzz target: a BOM was dropped only when whole in the first
        // chunk, so one split across reads hid the stream's first event.
        let stream = b"\xEF\xBB\xBFdata: x\n\n";
        for at in 0..=stream.len() {
            for second in [at, (at + 1).min(stream.len())] {
                let (ev, cut) =
                    parse_chunks(&[&stream[..at], &stream[at..second], &stream[second..]], 64);
                assert_eq!(
                    ev,
                    vec![SseEvent::Data(Bytes::from_static(b"x"))],
                    "split at {at}"
                );
                assert!(!cut);
            }
        }
        // Bytes that start like a BOM and are not one are the stream's own.
        let (ev, _) = parse_chunks(&[b"\xEF", b"\xBB", b"data: y\n\n"], 64);
        assert!(
            ev.is_empty(),
            "a field named \\xEF\\xBBdata is no data field"
        );
        let (_, cut) = parse_chunks(&[b"\xEF\xBB"], 64);
        assert!(cut, "a stream that ends inside what could be a BOM was cut");
    }

    #[test]
    fn a_truncated_event_is_reported_at_the_end() {
        let (ev, cut) = parse_chunks(&[b"data: {\"id\":1}\n\ndata: {\"id\":2,"], 64);
        assert_eq!(ev, vec![data("{\"id\":1}")]);
        assert!(cut);
        let (_, cut) = parse_chunks(&[b"data: {\"id\":2}\n"], 64);
        assert!(cut, "data without its blank line is cut off");
        let (_, cut) = parse_chunks(&[b"data: 1\n\n: comment\n"], 64);
        assert!(!cut);
    }

    #[test]
    fn an_oversized_event_is_dropped_once_and_parsing_resumes() {
        let big = vec![b'x'; 100];
        let mut body = b"data: ".to_vec();
        body.extend_from_slice(&big);
        body.extend_from_slice(b"\ndata: more\n\ndata: ok\n\n");
        for chunk in [body.len(), 7, 1] {
            let chunks: Vec<&[u8]> = body.chunks(chunk).collect();
            let (ev, cut) = parse_chunks(&chunks, 32);
            assert_eq!(ev, vec![SseEvent::Oversized, data("ok")], "chunk {chunk}");
            assert!(!cut);
        }
    }

    #[test]
    fn fields_and_retry_split_anywhere() {
        let body: &[u8] = b"retry: 1500\nid: 7\ndata:x\ndata\n\n";
        for cut_at in 0..=body.len() {
            let mut p = SseParser::new(64);
            let mut v = Vec::new();
            p.feed(&body[..cut_at], |e| v.push(e));
            p.feed(&body[cut_at..], |e| v.push(e));
            assert_eq!(v, vec![data("x\n")], "split at {cut_at}");
            assert_eq!(p.retry_ms(), Some(1500), "split at {cut_at}");
        }
        let (ev, _) = parse_chunks(
            &[b"retryx: 9\ndatax: y\nretry: 99999999999999999999999\n\n"],
            64,
        );
        assert!(ev.is_empty(), "longer names are other fields");
    }

    #[test]
    fn the_last_event_id_is_set_at_each_dispatch_priming_events_included() {
        let body: &[u8] = b"id: s-1\nretry: 20\ndata:\n\n";
        for cut_at in 0..=body.len() {
            let mut p = SseParser::new(64);
            let mut v = Vec::new();
            p.feed(&body[..cut_at], |e| v.push(e));
            p.feed(&body[cut_at..], |e| v.push(e));
            assert!(v.is_empty(), "a priming event has no data");
            assert_eq!(p.last_event_id(), Some(&b"s-1"[..]), "split at {cut_at}");
            assert_eq!(p.retry_ms(), Some(20));
        }
        let mut p = SseParser::new(64);
        p.feed(b"id: a\n", |_| {});
        assert_eq!(
            p.last_event_id(),
            None,
            "set only when the event is dispatched"
        );
        p.feed(b"\nid: b\0c\ndata: 1\n\n", |_| {});
        assert_eq!(
            p.last_event_id(),
            Some(&b"a"[..]),
            "an id with a NUL is ignored"
        );
        p.feed(b"id\ndata: 2\n\n", |_| {});
        assert_eq!(p.last_event_id(), None, "an empty id resets it");
        let long = format!("id: {}\n\n", "x".repeat(ID_MAX + 1));
        p.feed(long.as_bytes(), |_| {});
        assert_eq!(p.last_event_id(), None, "an id past the bound is ignored");
    }

    #[test]
    fn a_huge_event_holds_what_arrived_and_never_past_the_bound() {
        let max = 64 << 10;
        let mut p = SseParser::new(max);
        let mut events = Vec::new();
        p.feed(b"data: ", |e| events.push(e));
        p.feed(&[b'x'; 1000], |e| events.push(e));
        assert_eq!(
            p.data.capacity(),
            1000,
            "nothing reserved ahead of the bytes"
        );
        for _ in 0..100 {
            p.feed(&[b'x'; 1000], |e| events.push(e));
            assert!(p.data.capacity() <= max, "{}", p.data.capacity());
        }
        assert_eq!(events, vec![SseEvent::Oversized]);
        assert_eq!(
            p.data.capacity(),
            0,
            "the oversized event's bytes are dropped"
        );
    }

    #[test]
    fn an_event_the_answer_budget_refuses_is_oversized() {
        let budget = AnswerBudget::new(4096);
        let mut p = SseParser::with_budget(1 << 20, Some(budget.clone()));
        let mut ev = Vec::new();
        p.feed(b"data: {\"id\":1}\n\ndata: ", |e| ev.push(e));
        p.feed(&[b'x'; 8192], |e| ev.push(e));
        assert_eq!(budget.in_flight(), 0, "given back at once");
        p.feed(b"\n\ndata: 2\n\n", |e| ev.push(e));
        assert_eq!(ev, vec![data("{\"id\":1}"), SseEvent::Oversized, data("2")]);
        assert_eq!(budget.in_flight(), 0);
    }

    #[test]
    fn memory_stays_bounded_on_an_endless_line() {
        let mut p = SseParser::new(1000);
        let mut n = 0;
        for _ in 0..10_000 {
            p.feed(&[b'y'; 100], |_| n += 1);
            assert_eq!(p.data.capacity(), 0, "only data is held");
        }
        assert_eq!(n, 1);
    }
}
