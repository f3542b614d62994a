//! The target over stdio: one JSON-RPC message or batch per line in, answers as lines out
//! (through one writer task, in completion order), `notifications/cancelled` honoured,
//! overlong lines refused; at end of input every request still running is answered first.

use super::mcp::{self, Msg, Parsed, Route};
use super::stats::{Stats, View};
use super::wire::{self, Sink};
use super::{Done, Shared};
use crate::jsonrpc::{ErrorObject, codes};
use crate::protocol::Revision;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

/// A line as read: complete, or longer than the limit (its bytes were skipped).
enum Line {
    Text(Vec<u8>),
    TooLong,
    End,
}

/// Reads one line of at most `max` bytes; a longer one is consumed and reported.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut overflow = false;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(match (overflow, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Text(std::mem::take(buf)),
            });
        }
        let (chunk, done) = match memchr::memchr(b'\n', avail) {
            Some(i) => (&avail[..i], i + 1),
            None => (avail, avail.len()),
        };
        if !overflow && buf.len() + chunk.len() <= max {
            buf.extend_from_slice(chunk);
        } else {
            overflow = true;
            buf.clear();
        }
        let newline = done > chunk.len();
        r.consume(done);
        if newline {
            return Ok(if overflow {
                Line::TooLong
            } else {
                Line::Text(std::mem::take(buf))
            });
        }
    }
}

/// Writes every chunk it is sent, flushing whenever no more is waiting.
async fn writer<W: AsyncWrite + Unpin>(
    out: W,
    mut rx: mpsc::Receiver<Bytes>,
) -> std::io::Result<()> {
    let mut out = BufWriter::new(out);
    while let Some(chunk) = rx.recv().await {
        out.write_all(&chunk).await?;
        while let Ok(more) = rx.try_recv() {
            out.write_all(&more).await?;
        }
        out.flush().await?;
    }
    out.flush().await
}

pub(crate) async fn serve<R, W>(shared: Arc<Shared>, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let writing = tokio::spawn(writer(output, rx));
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    let mut negotiated: Option<Revision> = None;
    let mut running: JoinSet<()> = JoinSet::new();
    let mut by_id: HashMap<Box<str>, AbortHandle> = HashMap::new();
    let stats = Arc::clone(&shared.stats);
    let send_error = |error: ErrorObject| {
        stats.view(View::NullId, 1);
        let mut l = wire::null_id_error(&error);
        l.push(b'\n');
        let tx = tx.clone();
        async move {
            let _ = tx.send(Bytes::from(l)).await;
        }
    };
    loop {
        while running.try_join_next().is_some() {}
        if by_id.len() > 4096 {
            by_id.retain(|_, h| !h.is_finished());
        }
        let text = match read_line(&mut input, &mut line, shared.cfg.max_line_bytes).await? {
            Line::End => break,
            Line::TooLong => {
                Stats::add(&stats.malformed_received, 1);
                send_error(error(codes::INVALID_REQUEST, "line too long".into())).await;
                continue;
            }
            Line::Text(t) => t,
        };
        let trimmed = text.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let raw: &serde_json::value::RawValue = match serde_json::from_slice(trimmed) {
            Ok(r) => r,
            Err(e) => {
                Stats::add(&stats.malformed_received, 1);
                send_error(error(codes::PARSE_ERROR, format!("Parse error: {e}"))).await;
                continue;
            }
        };
        if raw.get().starts_with('[') {
            let Ok(members) = serde_json::from_str::<Vec<&serde_json::value::RawValue>>(raw.get())
            else {
                continue;
            };
            batch(
                &shared,
                &members,
                negotiated,
                &tx,
                &mut running,
                &send_error,
            )
            .await;
            continue;
        }
        match mcp::classify(raw) {
            Msg::Request(id, req) => {
                let parsed = Parsed::new(&req);
                let era = shared
                    .protocol
                    .route_stdio(parsed.meta_version().is_some(), negotiated);
                let job = shared.job(id, Ok(era), &req, &parsed, None);
                let sink = Sink::new(tx.clone(), false, Arc::clone(&stats));
                if req.method == "initialize" {
                    // Answered in line: later messages need the negotiated version.
                    let done = shared.run(job, Some(&sink)).await;
                    negotiated = done.initialized.or(negotiated);
                    let _ = tx.send(Bytes::from(done.shaped.lines())).await;
                    continue;
                }
                let shared = Arc::clone(&shared);
                let tx = tx.clone();
                let handle = running.spawn(async move {
                    let done: Done = shared.run(job, Some(&sink)).await;
                    let _ = tx.send(Bytes::from(done.shaped.lines())).await;
                });
                by_id.insert(id.get().into(), handle);
            }
            Msg::Notification(n) => {
                Stats::add(&stats.notifications_seen, 1);
                if n.method == "notifications/cancelled"
                    && let Some(target) = Parsed::new(&n).cancelled_request()
                    && let Some(h) = by_id.remove(target.get())
                {
                    h.abort();
                }
            }
            Msg::ClientResponse => {}
            Msg::Invalid(why) => {
                Stats::add(&stats.malformed_received, 1);
                send_error(error(
                    codes::INVALID_REQUEST,
                    format!("Invalid Request: {why}"),
                ))
                .await;
            }
        }
    }
    while running.join_next().await.is_some() {}
    drop(tx);
    writing
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

fn error(code: i64, message: String) -> ErrorObject {
    ErrorObject {
        code,
        message,
        data: None,
    }
}

/// One batch line: refused as the revision says, or its members run concurrently and
/// answered as one line in completion order.
async fn batch<F, Fut>(
    shared: &Arc<Shared>,
    members: &[&serde_json::value::RawValue],
    negotiated: Option<Revision>,
    tx: &mpsc::Sender<Bytes>,
    running: &mut JoinSet<()>,
    send_error: &F,
) where
    F: Fn(ErrorObject) -> Fut,
    Fut: Future<Output = ()>,
{
    let stats = &shared.stats;
    if members.is_empty() {
        Stats::add(&stats.malformed_received, 1);
        send_error(error(
            codes::INVALID_REQUEST,
            "Invalid Request: empty batch".into(),
        ))
        .await;
        return;
    }
    let msgs: Vec<Msg> = members.iter().map(|m| mcp::classify(m)).collect();
    let modern = msgs.iter().any(|m| match m {
        Msg::Request(_, r) => Parsed::new(r).meta_version().is_some(),
        _ => false,
    });
    let era = if modern {
        Route::Modern
    } else {
        Route::Legacy(negotiated.unwrap_or(Revision::V2025_03_26))
    };
    if !shared.protocol.batch_allowed(era) {
        Stats::add(&stats.batch_rejected, 1);
        let with_id = msgs
            .iter()
            .filter(|m| matches!(m, Msg::Request(..)))
            .count() as u64;
        stats.view(View::Missing, with_id);
        send_error(shared.protocol.batch_refusal(era)).await;
        return;
    }
    Stats::add(&stats.batches, 1);
    let mut jobs = Vec::new();
    let mut out = b"[".to_vec();
    for m in msgs {
        match m {
            Msg::Request(id, req) => {
                let parsed = Parsed::new(&req);
                jobs.push(shared.job(id, Ok(era), &req, &parsed, None));
            }
            Msg::Notification(_) => Stats::add(&stats.notifications_seen, 1),
            Msg::ClientResponse => {}
            Msg::Invalid(why) => {
                Stats::add(&stats.malformed_received, 1);
                stats.view(View::NullId, 1);
                let e = error(codes::INVALID_REQUEST, format!("Invalid Request: {why}"));
                wire::Shaped::Message(wire::null_id_error(&e)).push_member(&mut out);
            }
        }
    }
    let expected = jobs.len() as u64;
    let shared = Arc::clone(shared);
    let tx = tx.clone();
    running.spawn(async move {
        let mut set = JoinSet::new();
        for job in jobs {
            let shared = Arc::clone(&shared);
            let sink = Sink::new(tx.clone(), false, Arc::clone(&shared.stats));
            set.spawn(async move { shared.run(job, Some(&sink)).await });
        }
        let mut ids = 0;
        while let Some(next) = set.join_next().await {
            if let Ok(done) = next {
                ids += done.shaped.ids_on_wire();
                done.shaped.push_member(&mut out);
            }
        }
        if ids != expected {
            shared.stats.view(View::ResponseCountMismatch, 1);
        }
        if out.len() > 1 {
            out.extend_from_slice(b"]\n");
            let _ = tx.send(Bytes::from(out)).await;
        }
    });
}
