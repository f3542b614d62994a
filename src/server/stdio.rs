//! The target over stdio: one JSON-RPC message or batch per line in, answers as lines out
//! (through one writer task, in completion order), `notifications/cancelled` honoured,
//! overlong lines refused; at end of input every request still running is answered first.

use super::Shared;
use super::handler::{Handled, Origin};
use super::wire::Sink;
use crate::jsonrpc::codes;
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

/// Serves until `input` ends, then waits for every request still running.
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
    loop {
        while running.try_join_next().is_some() {}
        if by_id.len() > 4096 {
            by_id.retain(|_, h| !h.is_finished());
        }
        let text = match read_line(&mut input, &mut line, shared.cfg.max_line_bytes).await? {
            Line::End => break,
            Line::Text(t) => t,
            Line::TooLong => {
                let refused = shared.malformed(codes::INVALID_REQUEST, "line too long".into());
                write_line(&tx, refused.message).await;
                continue;
            }
        };
        let trimmed = text.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        match shared.handle(trimmed, Origin::Stdio { negotiated }) {
            Handled::Nothing => {}
            Handled::Cancel(id) => {
                if let Some(h) = by_id.remove(id.get()) {
                    h.abort();
                }
            }
            Handled::Refused(refused) => write_line(&tx, refused.message).await,
            Handled::Single(job) => {
                let sink = Sink::new(tx.clone(), false, Arc::clone(&shared.stats));
                if job.is_initialize() {
                    // Answered in line: later messages need the negotiated version.
                    let done = shared.run(job, Some(&sink)).await;
                    negotiated = done.initialized.or(negotiated);
                    let _ = tx.send(Bytes::from(done.shaped.lines())).await;
                    continue;
                }
                let id = job.id().get().into();
                let shared = Arc::clone(&shared);
                let handle = running.spawn(async move {
                    let done = shared.run(job, Some(&sink)).await;
                    let lines = done.shaped.lines();
                    if !lines.is_empty() {
                        sink.answer(lines).await;
                    }
                });
                by_id.insert(id, handle);
            }
            Handled::Batch(batch) => {
                // Its members run concurrently; their answers leave as one line.
                let sink = Arc::new(Sink::new(tx.clone(), false, Arc::clone(&shared.stats)));
                let answers = batch.start(&shared, Some(Arc::clone(&sink)));
                running.spawn(async move {
                    if let Some(mut array) = answers.into_array().await {
                        array.push(b'\n');
                        sink.answer(array).await;
                    }
                });
            }
        }
    }
    while running.join_next().await.is_some() {}
    drop(tx);
    writing
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// Sends `message` (one JSON-RPC message) as a line.
async fn write_line(tx: &mpsc::Sender<Bytes>, mut message: Vec<u8>) {
    message.push(b'\n');
    let _ = tx.send(Bytes::from(message)).await;
}

#[cfg(test)]
mod tests {
    use super::super::{ServeConfig, serve_stdio};
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    /// Writes `lines` to a stdio server and returns every line it answered.
    async fn exchange(lines: &[Value]) -> Vec<Value> {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_r, server_w) = tokio::io::split(server);
        let served = tokio::spawn(serve_stdio(ServeConfig::default(), server_r, server_w));
        let (client_r, mut w) = tokio::io::split(client);
        for l in lines {
            w.write_all(format!("{l}\n").as_bytes()).await.unwrap();
        }
        w.shutdown().await.unwrap();
        served.await.unwrap().unwrap();
        let mut out = Vec::new();
        let mut answers = tokio::io::BufReader::new(client_r).lines();
        while let Some(l) = answers.next_line().await.unwrap() {
            out.push(serde_json::from_str(&l).unwrap());
        }
        out
    }

    #[tokio::test]
    async fn initialize_in_a_batch_is_refused_as_over_http() {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}});
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
        let answers = exchange(&[json!([init, ping])]).await;
        assert_eq!(answers.len(), 1, "{answers:?}");
        let members = answers[0].as_array().unwrap();
        let refused = members.iter().find(|m| m["id"] == 1).unwrap();
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert_eq!(
            refused["error"]["message"],
            "initialize must not be part of a batch"
        );
        assert!(
            members
                .iter()
                .any(|m| m["id"] == 2 && m["result"] == json!({}))
        );
    }
}
