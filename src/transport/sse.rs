//! A pure, incremental Server-Sent Events parser (the WHATWG `text/event-stream` rules) that
//! turns body chunks into the `data` of each event, bounded in memory.
//!
//! Chunks may split lines, `CRLF` pairs and UTF-8 sequences anywhere. Lines end with CRLF, LF
//! or CR (a leading byte order mark is dropped, even split across chunks); `:` lines are
//! comments; `event:`, `id:` and `retry:` are read and not needed for
//! pairing (`retry:` is kept for the record); several `data:` lines join with `\n`. An event
//! whose data is empty (the priming event of 2025-11-25) is skipped, as the standard says. An
//! event larger than the bound is dropped and reported once as [`SseEvent::Oversized`]; an
//! event cut off by the end of the stream is reported by [`SseParser::finish`].

use bytes::{Bytes, BytesMut};

/// The UTF-8 byte order mark a stream may open with.
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// `SseParser::bom_matched` once the stream is past its first bytes.
const BOM_DECIDED: usize = usize::MAX;

/// One complete event off the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent {
    /// The event's data (non-empty): one JSON-RPC message, or bytes that claim to be one.
    Data(Bytes),
    /// An event (or a line) longer than the bound; its bytes were discarded.
    Oversized,
}

/// The incremental parser. Feed it chunks as they come; it never buffers more than about
/// `max_event_bytes` (plus one chunk).
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of a line not yet terminated.
    line: BytesMut,
    /// The data of the event being read, lines joined with `\n`.
    data: BytesMut,
    /// A `data:` line was seen since the last dispatch (even an empty one).
    has_data: bool,
    /// The previous chunk ended with CR: a leading LF of the next chunk belongs to it.
    after_cr: bool,
    /// The current event went over the bound: skip until its end.
    discarding: bool,
    /// The line being read has at least one byte (kept while discarding, so the end of an
    /// oversized line is not taken for a blank line).
    line_nonempty: bool,
    /// How many bytes of a leading UTF-8 byte order mark the stream has opened with so far
    /// (they are dropped when it completes), or [`BOM_DECIDED`] once the stream is past it.
    bom_matched: usize,
    max_event_bytes: usize,
    retry_ms: Option<u64>,
}

impl SseParser {
    pub fn new(max_event_bytes: usize) -> Self {
        SseParser {
            line: BytesMut::new(),
            data: BytesMut::new(),
            has_data: false,
            after_cr: false,
            discarding: false,
            line_nonempty: false,
            bom_matched: 0,
            max_event_bytes: max_event_bytes.max(1),
            retry_ms: None,
        }
    }

    /// The last `retry:` value the server sent, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
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
                    self.push_line_bytes(&chunk[..i], out);
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
                    self.push_line_bytes(chunk, out);
                    break;
                }
            }
        }
    }

    /// The stream ended. Returns true when an event was cut off (data or a partial line that
    /// never got its terminating blank line); its bytes are discarded, as the standard says.
    pub fn finish(&mut self) -> bool {
        let held_back = self.bom_matched != BOM_DECIDED && self.bom_matched > 0;
        let cut = held_back || self.has_data || self.line.iter().any(|b| !b.is_ascii_whitespace());
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.discarding = false;
        self.line_nonempty = false;
        cut
    }

    fn push_line_bytes(&mut self, bytes: &[u8], out: &mut impl FnMut(SseEvent)) {
        self.line_nonempty |= !bytes.is_empty();
        if self.discarding {
            return;
        }
        if self.line.len() + bytes.len() + self.data.len() > self.max_event_bytes {
            self.start_discarding(out);
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn start_discarding(&mut self, out: &mut impl FnMut(SseEvent)) {
        self.discarding = true;
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        out(SseEvent::Oversized);
    }

    fn end_line(&mut self, out: &mut impl FnMut(SseEvent)) {
        let line = self.line.split();
        if !std::mem::take(&mut self.line_nonempty) {
            self.dispatch(out);
            return;
        }
        if self.discarding || line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', &line) {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.extend_from_slice(b"\n");
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"retry" => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    self.retry_ms = Some(ms);
                }
            }
            // `event`, `id` and unknown fields do not affect pairing.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut impl FnMut(SseEvent)) {
        if self.discarding {
            self.discarding = false;
            return;
        }
        self.has_data = false;
        let data = self.data.split().freeze();
        if !data.is_empty() {
            out(SseEvent::Data(data));
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
    fn memory_stays_bounded_on_an_endless_line() {
        let mut p = SseParser::new(1000);
        let mut n = 0;
        for _ in 0..10_000 {
            p.feed(&[b'y'; 100], |_| n += 1);
            assert!(p.line.capacity() <= 4096);
        }
        assert_eq!(n, 1);
    }
}
