//! The incremental SSE parser against a plain reference parser: fed whole, fed one byte at a
//! time, or split at a fuzzed point, it yields exactly the reference's events; with a small
//! bound it never panics and never yields an event over the bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpload::transport::sse::{SseEvent, SseParser};

/// The WHATWG rules, written for clarity on a whole stream: lines end with CRLF, LF or CR; an
/// unterminated last line is dropped; a leading BOM is dropped; `data` lines join with LF; a
/// blank line dispatches non-empty data.
fn reference(mut input: &[u8]) -> Vec<Vec<u8>> {
    if let Some(rest) = input.strip_prefix(b"\xEF\xBB\xBF") {
        input = rest;
    }
    let mut events = vec![];
    let (mut data, mut has_data) = (Vec::new(), false);
    let mut i = 0;
    let mut start = 0;
    while i < input.len() {
        let b = input[i];
        if b != b'\n' && b != b'\r' {
            i += 1;
            continue;
        }
        let line = &input[start..i];
        i += if b == b'\r' && input.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
        start = i;
        if line.is_empty() {
            if has_data && !data.is_empty() {
                events.push(std::mem::take(&mut data));
            }
            data.clear();
            has_data = false;
        } else if line[0] != b':' {
            let (field, value) = match line.iter().position(|&c| c == b':') {
                Some(p) => {
                    let v = &line[p + 1..];
                    (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            if field == b"data" {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
            }
        }
    }
    events
}

fn parse(chunks: &[&[u8]], bound: usize) -> Vec<SseEvent> {
    let mut p = SseParser::new(bound);
    let mut out = vec![];
    for c in chunks {
        p.feed(c, |e| out.push(e));
    }
    out
}

fn data(events: Vec<SseEvent>) -> Vec<Vec<u8>> {
    events
        .into_iter()
        .map(|e| match e {
            SseEvent::Data(b) => b.to_vec(),
            SseEvent::Oversized => panic!("oversized under a bound larger than the input"),
        })
        .collect()
}

fuzz_target!(|input: (u16, &[u8])| {
    let (split, bytes) = input;
    let want = reference(bytes);
    let big = bytes.len() + 1;
    assert_eq!(data(parse(&[bytes], big)), want, "whole");
    let ones: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(data(parse(&ones, big)), want, "byte by byte");
    let at = split as usize % (bytes.len() + 1);
    assert_eq!(data(parse(&[&bytes[..at], &bytes[at..]], big)), want, "split at {at}");
    for e in parse(&ones, 16) {
        if let SseEvent::Data(d) = e {
            assert!(d.len() <= 16, "an event of {} bytes passed a bound of 16", d.len());
        }
    }
});
