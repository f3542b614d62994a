//! One answer read from scripted reads through the real connection, exchange and body code,
//! and told as plain lines: the HTTP/1.1 fuzz target's entry point, and the tests' way to
//! check that an answer reads the same wherever the network cuts it.

use super::connection::Connection;
use super::exchange::{Exchange, Item, Phase, Request};
use crate::jsonrpc::Id;
use crate::transport::{Event, ExchangeId, McpHeaders, Outgoing};
use futures_util::StreamExt;
use std::task::{Context, Poll, Waker};

/// Sends one request on a connection whose answer arrives as `reads` and reads the answer
/// with messages bounded at `max` bytes. Returns what the exchange yielded, one line each:
/// `message …`, `unreadable …`, `closed …`, `refused …` or `failed …`, then `connection
/// kept` or `connection closed` (handed back as soon as the answer is over, which may come
/// before its last events; listed last, so the lines do not depend on where reads ended).
///
/// Panics where the exchange breaks its own contract: it waits on a script that has ended,
/// it yields without end, a message is over `max`, the connection is handed back twice or
/// never, or the events do not end with exactly one terminal event.
// `pub` for the fuzz target, which reaches it through `transport::read_scripted_answer`.
#[allow(unreachable_pub)]
pub fn read_answer(reads: Vec<Vec<u8>>, max: usize) -> Vec<String> {
    let bytes: usize = reads.iter().map(Vec::len).sum();
    let mut conn = Connection::scripted(reads);
    conn.start(|w| w.extend_from_slice(b"POST /mcp HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}"));
    let out = Outgoing::single(
        b"{}".as_slice().into(),
        Some(Id::Num(1)),
        McpHeaders::default(),
    );
    let request = Request::load(ExchangeId(0), out, None, tokio::time::Instant::now());
    let mut exchange = Exchange::new(request, Phase::Head(conn), 0, max, None, None, None);
    let mut cx = Context::from_waker(Waker::noop());
    let mut lines = Vec::new();
    let mut terminal = 0;
    let mut connection = None;
    // Every item is a message, a piece that could not be read, the end or the connection:
    // never more than one per byte of the answer, and a handful besides.
    for _ in 0..bytes + 8 {
        let item = match exchange.poll_next_unpin(&mut cx) {
            Poll::Ready(Some(item)) => item,
            Poll::Ready(None) => {
                assert_eq!(terminal, 1, "{lines:?}");
                lines.push(connection.expect("the connection is handed back"));
                return lines;
            }
            Poll::Pending => panic!("the exchange waits on an answer that has ended: {lines:?}"),
        };
        let line = match item {
            Item::Conn { back, .. } => {
                let kept = if back.is_some() { "kept" } else { "closed" };
                let twice = connection.replace(format!("connection {kept}"));
                assert!(
                    twice.is_none(),
                    "the connection handed back twice: {lines:?}"
                );
                continue;
            }
            Item::Reply { .. } => panic!("a load exchange yields no reply"),
            Item::Dialed(_) => panic!("an exchange never dials"),
            // The stream ended early: the exchange ends in a resumption, not an event.
            Item::Resume { request, delay } => {
                terminal += 1;
                let id = request.last_event_id.as_ref().map(|v| v.as_bytes());
                format!(
                    "resume after {delay:?} from {:?}",
                    id.map(|i| i.escape_ascii().to_string())
                )
            }
            Item::ResumeFailed | Item::Due(_) => panic!("a first answer is never a resumption"),
            Item::Lost { .. } => panic!("a request without a session never loses one"),
            Item::Unauthorized { .. } | Item::TokenNews(_) => {
                panic!("a request without credentials is never refused for them")
            }
            Item::Event(event) => {
                assert_eq!(terminal, 0, "an event after the end: {event:?}");
                match event {
                    Event::Message { bytes, .. } => {
                        assert!(bytes.len() <= max, "a message of {} bytes", bytes.len());
                        match std::str::from_utf8(&bytes) {
                            Ok(text) => format!("message {text}"),
                            Err(_) => format!("message (not UTF-8) {}", bytes.escape_ascii()),
                        }
                    }
                    Event::Unreadable { why, .. } => format!("unreadable {}", why.as_str()),
                    Event::Closed { status, body, .. } => {
                        terminal += 1;
                        format!("closed {status} {body:?}")
                    }
                    Event::Refused {
                        status,
                        retry_after_s,
                        ..
                    } => {
                        terminal += 1;
                        format!("refused {status} {retry_after_s:?}")
                    }
                    Event::Failed { error, .. } => {
                        terminal += 1;
                        format!("failed {error}")
                    }
                    Event::Retried { .. } => panic!("only the transport retries"),
                    Event::Down { .. } => panic!("HTTP is never down"),
                    Event::Abandoned { .. } => panic!("HTTP has no child to exit"),
                    Event::Released { .. } => panic!("nothing is held for a token here"),
                }
            }
        };
        lines.push(line);
    }
    panic!("the exchange yields without end: {lines:?}");
}

#[cfg(test)]
mod tests {
    use super::read_answer;

    /// The answer read whole, and cut before every byte: the same lines.
    fn same_at_every_cut(wire: &[u8], max: usize) -> Vec<String> {
        let whole = read_answer(vec![wire.to_vec()], max);
        for at in 1..wire.len() {
            let cut = vec![wire[..at].to_vec(), wire[at..].to_vec()];
            assert_eq!(read_answer(cut, max), whole, "cut at {at}");
        }
        let bytes = wire.iter().map(|b| vec![*b]).collect();
        assert_eq!(read_answer(bytes, max), whole, "byte by byte");
        whole
    }

    #[test]
    fn answers_read_the_same_wherever_they_are_cut() {
        let json = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
        assert_eq!(
            same_at_every_cut(json, 1 << 20),
            [
                r#"message {"jsonrpc":"2.0","id":1,"result":{}}"#,
                "closed 200 Json",
                "connection kept",
            ]
        );
        let sse = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n8\r\n: hi\r\n\r\n\r\n12\r\ndata: {\"id\":1}\r\n\r\n\r\n0\r\n\r\n";
        assert_eq!(
            same_at_every_cut(sse, 1 << 20),
            [r#"message {"id":1}"#, "closed 200 Sse", "connection kept"]
        );
        let cut_chunk = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n10\r\n{\"jsonrpc\"";
        let lines = same_at_every_cut(cut_chunk, 1 << 20);
        assert!(lines[0].starts_with("failed "), "{lines:?}");
        assert_eq!(lines[1], "connection closed");
        let over = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: 0123456789\n\ndata: 01234567890123456789\n\ndata: x\n\n";
        assert_eq!(
            same_at_every_cut(over, 16),
            [
                "message 0123456789",
                "unreadable message larger than the limit",
                "closed 200 Sse",
                "connection closed",
            ]
        );
    }

    #[test]
    fn a_head_over_the_bound_is_refused_wherever_the_reads_end() {
        let mut wire = b"HTTP/1.1 200 OK\r\nx-pad: ".to_vec();
        wire.resize(wire.len() + (64 << 10), b'a');
        wire.extend_from_slice(b"\r\ncontent-length: 0\r\n\r\n");
        for reads in [
            vec![wire.clone()],
            wire.chunks(1000).map(<[u8]>::to_vec).collect(),
        ] {
            let lines = read_answer(reads, 1 << 20);
            assert_eq!(
                lines,
                [
                    "failed request failed: malformed HTTP answer: head over 64 KiB",
                    "connection closed",
                ]
            );
        }
    }
}
