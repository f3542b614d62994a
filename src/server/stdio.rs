//! The target over stdio: one JSON-RPC message or batch per line in, answers as lines out
//! (through one writer task, in completion order), `notifications/cancelled` honoured,
//! overlong lines refused; at end of input every request still running is answered first.
//! The start-up and failure knobs only this front has: a banner, an RSS ballast, a start-up
//! delay, an exit after N calls, and serial service.

use super::Shared;
use super::handler::{Handled, Origin};
use super::wire::Sink;
use crate::jsonrpc::codes;
use crate::protocol::Revision;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot};
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
    let cfg = &shared.cfg;
    if let Some(banner) = &cfg.stdout_banner {
        write_line(&tx, banner.clone().into_bytes()).await;
    }
    let ballast = ballast(cfg.rss_ballast_mb);
    if cfg.startup_ms > 0 {
        tokio::time::sleep(Duration::from_millis(cfg.startup_ms)).await;
    }
    let mut tool_calls = ToolCalls {
        limit: cfg.exit_after_calls,
        read: 0,
    };
    let mut queue = cfg.serial.then(Queue::new);
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
                if job.is_tool_call() {
                    tool_calls.read(1);
                }
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
                let mut turn = queue.as_mut().map(Queue::next);
                let handle = running.spawn(async move {
                    if let Some(turn) = &mut turn {
                        turn.wait().await;
                    }
                    let done = shared.run(job, Some(&sink)).await;
                    let lines = done.shaped.lines();
                    if !lines.is_empty() {
                        sink.answer(lines).await;
                    }
                    drop(turn);
                });
                by_id.insert(id, handle);
            }
            Handled::Batch(batch) => {
                tool_calls.read(batch.tool_calls());
                // Its members run concurrently (with `serial`, the batch is one turn); their
                // answers leave as one line.
                let sink = Arc::new(Sink::new(tx.clone(), false, Arc::clone(&shared.stats)));
                let shared = Arc::clone(&shared);
                let mut turn = queue.as_mut().map(Queue::next);
                running.spawn(async move {
                    if let Some(turn) = &mut turn {
                        turn.wait().await;
                    }
                    let answers = batch.start(&shared, Some(Arc::clone(&sink)));
                    if let Some(mut array) = answers.into_array().await {
                        array.push(b'\n');
                        sink.answer(array).await;
                    }
                    drop(turn);
                });
            }
        }
    }
    while running.join_next().await.is_some() {}
    drop(std::hint::black_box(ballast));
    drop(tx);
    writing
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// `rss_ballast_mb`: that many MiB with every 4 KiB page written (non-zero, so that none
/// stays the kernel's shared zero page), for the caller to hold until exit.
fn ballast(mib: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; mib << 20];
    for page in bytes.chunks_mut(4096) {
        page[0] = 0xa5;
    }
    std::hint::black_box(bytes)
}

/// `exit_after_calls`: the `tools/call` requests read so far, and how many are answered.
struct ToolCalls {
    limit: Option<u64>,
    read: u64,
}

impl ToolCalls {
    /// Counts `n` more read; past the limit, says so on stderr and ends the process at once
    /// with exit code 3, the request that went past it never answered.
    fn read(&mut self, n: u64) {
        self.read += n;
        if let Some(limit) = self.limit
            && self.read > limit
        {
            eprintln!("mcpload serve: exiting after {limit} calls");
            std::process::exit(3);
        }
    }
}

/// `serial`: the turns of requests in the order read. Each turn waits for the one before
/// it to end; a turn ends when its request was answered, or, cancelled, once the one
/// before it has ended too (so a cancel never lets two requests run at once).
struct Queue {
    last: oneshot::Receiver<()>,
}

/// One request's place in the [`Queue`]: dropping its sender ends it.
struct Turn {
    before: Option<oneshot::Receiver<()>>,
    ended: Option<oneshot::Sender<()>>,
}

impl Queue {
    fn new() -> Queue {
        // The first turn waits for nothing: its predecessor's sender is gone.
        let (_, last) = oneshot::channel();
        Queue { last }
    }

    /// The turn after every turn handed out so far.
    fn next(&mut self) -> Turn {
        let (ended, last) = oneshot::channel();
        let before = std::mem::replace(&mut self.last, last);
        Turn {
            before: Some(before),
            ended: Some(ended),
        }
    }
}

impl Turn {
    /// Waits until the turn before this one has ended.
    async fn wait(&mut self) {
        if let Some(before) = &mut self.before {
            let _ = before.await;
            self.before = None;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Cancelled while waiting: the next turn still waits for the one before this.
        if let (Some(before), Ok(runtime)) =
            (self.before.take(), tokio::runtime::Handle::try_current())
        {
            let ended = self.ended.take();
            runtime.spawn(async move {
                let _ = before.await;
                drop(ended);
            });
        }
    }
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
        exchange_with(ServeConfig::default(), lines).await
    }

    /// [`exchange`] with a server of configuration `cfg`.
    async fn exchange_with(cfg: ServeConfig, lines: &[Value]) -> Vec<Value> {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_r, server_w) = tokio::io::split(server);
        let served = tokio::spawn(serve_stdio(cfg, server_r, server_w));
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

    #[tokio::test]
    async fn serial_a_cancelled_waiting_request_keeps_the_order() {
        let call = |id: u64, tool: &str, args: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": args}})
        };
        let cfg = ServeConfig {
            serial: true,
            ..ServeConfig::default()
        };
        let answers = exchange_with(
            cfg,
            &[
                call(1, "sleep", json!({"ms": 300})),
                call(2, "echo", json!({"message": "cancelled"})),
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 2}}),
                call(3, "echo", json!({"message": "after"})),
            ],
        )
        .await;
        let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
        // 2 gave up its turn, but 3 still waited for 1: answered after it, not beside it.
        assert_eq!(ids, [&json!(1), &json!(3)], "{answers:?}");
    }
}
