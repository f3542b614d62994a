//! `mcpload serve --hostile KIND`: a deliberately broken MCP server. It answers the handshake
//! and most calls correctly, and every Nth `tools/call` with one misbehaviour a client must
//! survive and count (broken HTTP framing, endless or huge answers, bad ids, bad JSON, a child
//! that misbehaves on stdio). It writes raw bytes on a TCP socket or stdout, since a correct
//! HTTP library cannot emit broken framing. docs/target.md lists the kinds; docs/metrics.md
//! says where a client must count each.

use crate::jsonrpc::{BatchWriter, codes};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The longest any hostile stream runs when the client never hangs up: every loop here ends.
const STREAM_CAP: Duration = Duration::from_secs(120);
/// The size of each write of a huge answer.
const CHUNK: usize = 64 << 10;
/// The longest request head read before the connection is dropped.
const MAX_HEAD: usize = 64 << 10;

/// One way of misbehaving. The name is its `--hostile` spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostileKind {
    /// HTTP: a response head sent one byte a second, never finished (slowloris).
    SlowHead,
    /// HTTP: 10,000 headers before a valid answer.
    ManyHeaders,
    /// HTTP: a declared 1 GiB body of spaces.
    HugeBody,
    /// HTTP: a valid answer followed by bytes past its `Content-Length`.
    LongBody,
    /// HTTP: a chunked answer whose chunk size is not hex.
    BadChunk,
    /// HTTP: a chunked answer cut off mid-chunk, then the connection closed.
    ChunkCut,
    /// HTTP: a connection reset (RST) mid-body.
    ResetMidBody,
    /// HTTP: an SSE stream that carries a notification, then nothing, never the response.
    SseSilent,
    /// HTTP: an SSE stream of comments, forever.
    SseComments,
    /// HTTP: one SSE event of 100 MB.
    SseHugeEvent,
    /// Invalid UTF-8 inside a JSON string of the answer.
    InvalidUtf8,
    /// An answer whose `result` is nested 100,000 deep.
    DeepJson,
    /// The id sent back as a string (`"1"` for `1`): a different id under JSON-RPC.
    IdAsString,
    /// The id sent back as a 1 MB string.
    IdHuge,
    /// The id sent back as `1e400`.
    IdOverflow,
    /// The id sent back as `-0`.
    IdNegativeZero,
    /// The id sent back as a float (`7.0` for `7`).
    IdFloat,
    /// An answer object with a key twice (`"result"` … `"result"`).
    DuplicateKeys,
    /// An answer with both `result` and `error`.
    BothResultError,
    /// HTTP: a 204 that carries a body.
    NoContentWithBody,
    /// HTTP: an HTTP/1.0 answer delimited by closing the connection.
    Http10Close,
    /// HTTP: `100 Continue` before the answer.
    Continue100,
    /// HTTP: the connection is never read again (nor answered).
    NeverRead,
    /// stdio: stdout closed, the process alive until stdin ends.
    StdoutClosed,
    /// stdio: 1 GiB on stdout without a newline.
    EndlessLine,
    /// stdio: a line of log text on stdout before the answer.
    StdoutNoise,
    /// stdio: half an answer line, then the process exits.
    DieMidLine,
}

impl HostileKind {
    /// Every kind with its `--hostile` name.
    pub const ALL: [(&'static str, HostileKind); 27] = [
        ("slow-head", HostileKind::SlowHead),
        ("many-headers", HostileKind::ManyHeaders),
        ("huge-body", HostileKind::HugeBody),
        ("long-body", HostileKind::LongBody),
        ("bad-chunk", HostileKind::BadChunk),
        ("chunk-cut", HostileKind::ChunkCut),
        ("reset-mid-body", HostileKind::ResetMidBody),
        ("sse-silent", HostileKind::SseSilent),
        ("sse-comments", HostileKind::SseComments),
        ("sse-huge-event", HostileKind::SseHugeEvent),
        ("invalid-utf8", HostileKind::InvalidUtf8),
        ("deep-json", HostileKind::DeepJson),
        ("id-as-string", HostileKind::IdAsString),
        ("id-huge", HostileKind::IdHuge),
        ("id-overflow", HostileKind::IdOverflow),
        ("id-negative-zero", HostileKind::IdNegativeZero),
        ("id-float", HostileKind::IdFloat),
        ("duplicate-keys", HostileKind::DuplicateKeys),
        ("both-result-error", HostileKind::BothResultError),
        ("no-content-with-body", HostileKind::NoContentWithBody),
        ("http10-close", HostileKind::Http10Close),
        ("continue-100", HostileKind::Continue100),
        ("never-read", HostileKind::NeverRead),
        ("stdout-closed", HostileKind::StdoutClosed),
        ("endless-line", HostileKind::EndlessLine),
        ("stdout-noise", HostileKind::StdoutNoise),
        ("die-mid-line", HostileKind::DieMidLine),
    ];

    pub fn name(self) -> &'static str {
        HostileKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// Kinds that exist only over HTTP (framing) or only over stdio (the child process).
    pub fn transport(self) -> HostileTransport {
        use HostileKind::*;
        match self {
            SlowHead | ManyHeaders | HugeBody | LongBody | BadChunk | ChunkCut | ResetMidBody
            | SseSilent | SseComments | SseHugeEvent | NoContentWithBody | Http10Close
            | Continue100 | NeverRead => HostileTransport::Http,
            StdoutClosed | EndlessLine | StdoutNoise | DieMidLine => HostileTransport::Stdio,
            InvalidUtf8 | DeepJson | IdAsString | IdHuge | IdOverflow | IdNegativeZero
            | IdFloat | DuplicateKeys | BothResultError => HostileTransport::Either,
        }
    }
}

/// Where a kind can be played.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostileTransport {
    Http,
    Stdio,
    Either,
}

impl fmt::Display for HostileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HostileKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HostileKind::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = HostileKind::ALL.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown hostile kind {s:?}: use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// How the hostile server runs.
#[derive(Clone, Copy, Debug)]
pub struct HostileConfig {
    pub kind: HostileKind,
    /// Every Nth `tools/call` gets the misbehaviour (1: every call).
    pub every: u64,
    pub bind: SocketAddr,
}

/// Ground truth of a hostile server (`GET /stats`, or the stdio server's return value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostileStats {
    /// `tools/call` requests read, batch members included.
    pub calls_received: u64,
    /// Of those, the ones answered with the misbehaviour.
    pub hostile_answers: u64,
    /// TCP connections accepted.
    pub connections: u64,
}

#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    hostile: AtomicU64,
    connections: AtomicU64,
}

impl Counts {
    fn snapshot(&self) -> HostileStats {
        HostileStats {
            calls_received: self.calls.load(Relaxed),
            hostile_answers: self.hostile.load(Relaxed),
            connections: self.connections.load(Relaxed),
        }
    }
}

struct Shared {
    cfg: HostileConfig,
    counts: Counts,
}

/// What to do with one request body.
enum Plan {
    /// A correct answer (`None`: a notification, nothing to answer).
    Answer(Option<Vec<u8>>),
    /// The misbehaviour, for the call with this id (`None`: a batch, `body` already holds it).
    Hostile { id: Value, body: Vec<u8> },
}

impl Shared {
    /// Answers one JSON-RPC message or batch; a `tools/call` whose turn it is gets the
    /// misbehaviour.
    fn plan(&self, msg: &Value) -> Plan {
        let mut hostile_id = None;
        let body = match msg {
            Value::Array(members) => {
                let mut batch = BatchWriter::default();
                for answer in members
                    .iter()
                    .filter_map(|m| self.answer_one(m, &mut hostile_id))
                {
                    batch.member().extend_from_slice(&answer);
                }
                (!batch.is_empty()).then(|| batch.into_bytes())
            }
            one => self.answer_one(one, &mut hostile_id),
        };
        match (hostile_id, body) {
            (Some(id), Some(body)) => Plan::Hostile { id, body },
            (_, body) => Plan::Answer(body),
        }
    }

    /// The answer to one message (`None` for a notification or a response).
    fn answer_one(&self, msg: &Value, hostile_id: &mut Option<Value>) -> Option<Vec<u8>> {
        let id = msg.get("id")?.clone();
        let method = msg.get("method").and_then(Value::as_str)?;
        let answer = match method {
            "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-03-26",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcpload-hostile", "version": env!("CARGO_PKG_VERSION")},
            }}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
                "name": "echo",
                "description": "Answers ok, or misbehaves on its turn.",
                "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
            }]}}),
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "tools/call" => {
                let n = self.counts.calls.fetch_add(1, Relaxed) + 1;
                if n.is_multiple_of(self.cfg.every.max(1)) && hostile_id.is_none() {
                    self.counts.hostile.fetch_add(1, Relaxed);
                    let member = self.hostile_member(&id);
                    *hostile_id = Some(id);
                    return Some(member);
                }
                json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "ok"}]}})
            }
            _ => json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": codes::METHOD_NOT_FOUND, "message": "Method not found"}}),
        };
        Some(answer.to_string().into_bytes())
    }

    /// The hostile call's answer: corrupted JSON for the kinds that corrupt JSON, a correct
    /// answer for the kinds that break the framing around it.
    fn hostile_member(&self, id: &Value) -> Vec<u8> {
        const RESULT: &str = r#""result":{"content":[{"type":"text","text":"ok"}]}"#;
        let member = |id_and_rest: String| format!(r#"{{"jsonrpc":"2.0",{id_and_rest}}}"#);
        let text = match self.cfg.kind {
            HostileKind::InvalidUtf8 => {
                let mut bytes =
                    member(format!(r#""id":{id},"result":{{"text":"a?b"}}"#)).into_bytes();
                if let Some(at) = memchr::memchr(b'?', &bytes) {
                    bytes.splice(at..at + 1, [0xff, 0xfe]);
                }
                return bytes;
            }
            HostileKind::DeepJson => {
                let depth = 100_000;
                let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                member(format!(r#""id":{id},"result":{nested}"#))
            }
            HostileKind::IdAsString => member(format!(r#""id":"{id}",{RESULT}"#)),
            HostileKind::IdHuge => member(format!(r#""id":"{}",{RESULT}"#, "x".repeat(1 << 20))),
            HostileKind::IdOverflow => member(format!(r#""id":1e400,{RESULT}"#)),
            HostileKind::IdNegativeZero => member(format!(r#""id":-0,{RESULT}"#)),
            HostileKind::IdFloat => member(format!(r#""id":{id}.0,{RESULT}"#)),
            HostileKind::DuplicateKeys => member(format!(r#""id":{id},{RESULT},{RESULT}"#)),
            HostileKind::BothResultError => member(format!(
                r#""id":{id},{RESULT},"error":{{"code":{code},"message":"both"}}"#,
                code = codes::INTERNAL_ERROR
            )),
            _ => member(format!(r#""id":{id},{RESULT}"#)),
        };
        text.into_bytes()
    }
}

/// A running hostile HTTP server.
pub struct RunningHostile {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl RunningHostile {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn stats(&self) -> HostileStats {
        self.shared.counts.snapshot()
    }

    /// Stops accepting; open connections end with the process or their own cap.
    pub fn shutdown(self) -> HostileStats {
        self.task.abort();
        self.stats()
    }
}

/// Starts the hostile server on `cfg.bind` over HTTP.
pub async fn start_hostile_http(cfg: HostileConfig) -> std::io::Result<RunningHostile> {
    let listener = super::listen(cfg.bind)?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        cfg,
        counts: Counts::default(),
    });
    let accept = shared.clone();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            accept.counts.connections.fetch_add(1, Relaxed);
            let _ = sock.set_nodelay(true);
            tokio::spawn(tokio::time::timeout(
                STREAM_CAP,
                connection(sock, accept.clone()),
            ));
        }
    });
    Ok(RunningHostile { addr, shared, task })
}

/// One request as read off the socket.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

/// Reads one request (head, then a `Content-Length` body); `None` when the peer hangs up or
/// sends what this server does not read.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    loop {
        if let Some(end) = memchr::memmem::find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut start = lines.next()?.split(' ');
            let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
            let len: usize = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                .map_or(Some(0), |(_, v)| v.trim().parse().ok())?;
            while buf.len() < end + 4 + len {
                read_more(sock, buf).await?;
            }
            let body = buf.drain(..end + 4 + len).skip(end + 4).collect();
            return Some(Request { method, path, body });
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        read_more(sock, buf).await?;
    }
}

async fn read_more(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match sock.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

async fn connection(mut sock: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        let done = match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/stats") => {
                let stats = serde_json::to_vec(&shared.counts.snapshot()).unwrap_or_default();
                respond(&mut sock, "200 OK", "application/json", &stats).await
            }
            ("POST", _) => match serde_json::from_slice::<Value>(&req.body) {
                Err(_) => {
                    let e = json!({"jsonrpc": "2.0", "id": null,
                        "error": {"code": codes::PARSE_ERROR, "message": "Parse error"}});
                    respond(
                        &mut sock,
                        "400 Bad Request",
                        "application/json",
                        e.to_string().as_bytes(),
                    )
                    .await
                }
                Ok(msg) => match shared.plan(&msg) {
                    Plan::Answer(None) => respond(&mut sock, "202 Accepted", "", b"").await,
                    Plan::Answer(Some(body)) => {
                        respond(&mut sock, "200 OK", "application/json", &body).await
                    }
                    Plan::Hostile { id, body } => {
                        misbehave(shared.cfg.kind, &mut sock, &id, &body).await
                    }
                },
            },
            _ => respond(&mut sock, "405 Method Not Allowed", "", b"").await,
        };
        if done.is_err() {
            return;
        }
    }
}

/// A well-formed HTTP/1.1 answer.
async fn respond(sock: &mut TcpStream, status: &str, ctype: &str, body: &[u8]) -> Result<(), ()> {
    let ctype = if ctype.is_empty() {
        String::new()
    } else {
        format!("content-type: {ctype}\r\n")
    };
    let head = format!(
        "HTTP/1.1 {status}\r\n{ctype}content-length: {}\r\n\r\n",
        body.len()
    );
    write_all(sock, &[head.as_bytes(), body].concat()).await
}

async fn write_all(sock: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> Result<(), ()> {
    sock.write_all(bytes).await.map_err(|_| ())?;
    sock.flush().await.map_err(|_| ())
}

/// Writes `fill` forever (until the peer hangs up or the cap), `every` apart.
async fn stream_forever(sock: &mut TcpStream, fill: &[u8], every: Duration) -> Result<(), ()> {
    loop {
        write_all(sock, fill).await?;
        if !every.is_zero() {
            tokio::time::sleep(every).await;
        }
    }
}

/// Plays one HTTP misbehaviour for the call `id`, whose correct answer is `body` (already
/// corrupted for the kinds that corrupt the JSON). `Err`: the connection is finished.
async fn misbehave(
    kind: HostileKind,
    sock: &mut TcpStream,
    id: &Value,
    body: &[u8],
) -> Result<(), ()> {
    match kind {
        HostileKind::SlowHead => {
            write_all(sock, b"HTTP/1.1 200 OK\r\nx-slow: ").await?;
            stream_forever(sock, b"a", Duration::from_secs(1)).await
        }
        HostileKind::ManyHeaders => {
            let mut head = String::from("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n");
            for i in 0..10_000 {
                head.push_str(&format!("x-h-{i}: v\r\n"));
            }
            head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
            write_all(sock, &[head.as_bytes(), body].concat()).await
        }
        HostileKind::HugeBody => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n";
            write_all(sock, head.as_bytes()).await?;
            let spaces = vec![b' '; CHUNK];
            for _ in 0..(1 << 30) / CHUNK {
                write_all(sock, &spaces).await?;
            }
            Err(())
        }
        HostileKind::LongBody => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let tail = b"{\"jsonrpc\":\"2.0\",\"id\":999999999,\"result\":{}}";
            write_all(sock, &[head.as_bytes(), body, tail].concat()).await
        }
        HostileKind::BadChunk => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
            write_all(sock, head.as_bytes()).await?;
            Err(())
        }
        HostileKind::ChunkCut => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n",
                body.len()
            );
            write_all(sock, &[head.as_bytes(), &body[..body.len() / 2]].concat()).await?;
            Err(())
        }
        HostileKind::ResetMidBody => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            write_all(sock, &[head.as_bytes(), &body[..body.len() / 2]].concat()).await?;
            let _ = sock.set_zero_linger();
            Err(())
        }
        HostileKind::SseSilent | HostileKind::SseComments | HostileKind::SseHugeEvent => {
            write_all(
                sock,
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            )
            .await?;
            sse_misbehave(kind, sock, id).await
        }
        HostileKind::NoContentWithBody => {
            let head = format!(
                "HTTP/1.1 204 No Content\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            write_all(sock, &[head.as_bytes(), body].concat()).await
        }
        HostileKind::Http10Close => {
            let head = "HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n";
            write_all(sock, &[head.as_bytes(), body].concat()).await?;
            Err(())
        }
        HostileKind::Continue100 => {
            write_all(sock, b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            respond(sock, "200 OK", "application/json", body).await
        }
        HostileKind::NeverRead => {
            tokio::time::sleep(STREAM_CAP).await;
            Err(())
        }
        _ => respond(sock, "200 OK", "application/json", body).await,
    }
}

/// Writes one chunk of a chunked body.
async fn chunk(sock: &mut TcpStream, bytes: &[u8]) -> Result<(), ()> {
    let size = format!("{:x}\r\n", bytes.len());
    write_all(sock, &[size.as_bytes(), bytes, b"\r\n"].concat()).await
}

async fn sse_misbehave(kind: HostileKind, sock: &mut TcpStream, id: &Value) -> Result<(), ()> {
    match kind {
        HostileKind::SseSilent => {
            let progress = format!(
                "event: message\ndata: {}\n\n",
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": id, "progress": 1}})
            );
            chunk(sock, progress.as_bytes()).await?;
            // Nothing more: wait for the peer to hang up (a read of 0) or the cap.
            let mut byte = [0u8; 1];
            let _ = sock.read(&mut byte).await;
            Err(())
        }
        HostileKind::SseComments => {
            let mut comments = Vec::new();
            for _ in 0..64 {
                comments.extend_from_slice(b": still working\n");
            }
            loop {
                chunk(sock, &comments).await?;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        _ => {
            let open = format!(r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"text":""#);
            chunk(sock, open.as_bytes()).await?;
            let filler = vec![b'x'; CHUNK];
            for _ in 0..(100 << 20) / CHUNK {
                chunk(sock, &filler).await?;
            }
            chunk(sock, b"\"}}\n\n").await?;
            chunk(sock, b"").await
        }
    }
}

/// Serves the hostile kinds over stdio: one JSON message per line in, one per line out, until
/// stdin ends (or the kind ends the process).
pub async fn serve_hostile_stdio(
    cfg: HostileConfig,
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
) -> HostileStats {
    let shared = Shared {
        cfg,
        counts: Counts::default(),
    };
    let mut lines = BufReader::new(input).lines();
    let mut stdout_open = true;
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if !stdout_open {
            continue;
        }
        let (body, hostile) = match shared.plan(&msg) {
            Plan::Answer(None) => continue,
            Plan::Answer(Some(body)) => (body, false),
            Plan::Hostile { body, .. } => (body, true),
        };
        let written = match (hostile, cfg.kind) {
            (true, HostileKind::StdoutClosed) => {
                let _ = output.shutdown().await;
                close_stdout();
                stdout_open = false;
                Ok(())
            }
            (true, HostileKind::EndlessLine) => {
                let filler = vec![b'x'; CHUNK];
                let mut result = Ok(());
                for _ in 0..(1 << 30) / CHUNK {
                    result = write_all(&mut output, &filler).await;
                    if result.is_err() {
                        break;
                    }
                }
                result
            }
            (true, HostileKind::StdoutNoise) => {
                let noisy = [b"starting the tool...\n".as_slice(), &body, b"\n"].concat();
                write_all(&mut output, &noisy).await
            }
            (true, HostileKind::DieMidLine) => {
                let _ = write_all(&mut output, &body[..body.len() / 2]).await;
                std::process::exit(1);
            }
            _ => write_all(&mut output, &[body.as_slice(), b"\n"].concat()).await,
        };
        if written.is_err() {
            break;
        }
    }
    shared.counts.snapshot()
}

/// Closes the process's file descriptor 1, so the parent reads the end of stdout while this
/// process lives on.
fn close_stdout() {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: fd 1 is this process's stdout; nothing in this server writes to it after this
    // (the stdio loop stops writing once `stdout_open` is false), so closing it leaves no
    // other owner using a dangling descriptor.
    drop(unsafe { OwnedFd::from_raw_fd(1) });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_name_that_reads_back() {
        for (name, kind) in HostileKind::ALL {
            assert_eq!(name.parse::<HostileKind>(), Ok(kind));
            assert_eq!(kind.to_string(), name);
        }
        let e = "nope".parse::<HostileKind>().unwrap_err();
        assert!(e.contains("slow-head"), "{e}");
    }

    fn shared(kind: HostileKind, every: u64) -> Shared {
        Shared {
            cfg: HostileConfig {
                kind,
                every,
                bind: "127.0.0.1:0".parse().unwrap(),
            },
            counts: Counts::default(),
        }
    }

    fn call(id: i64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {}}})
    }

    #[test]
    fn every_nth_call_is_hostile_and_counted() {
        let s = shared(HostileKind::IdFloat, 3);
        let mut hostile = vec![];
        for id in 1..=7 {
            if let Plan::Hostile { id, body } = s.plan(&call(id)) {
                assert!(
                    String::from_utf8(body)
                        .unwrap()
                        .contains(&format!("\"id\":{id}.0"))
                );
                hostile.push(id);
            }
        }
        assert_eq!(hostile, vec![json!(3), json!(6)]);
        let st = s.counts.snapshot();
        assert_eq!((st.calls_received, st.hostile_answers), (7, 2));
    }

    #[test]
    fn json_corruptions_land_on_the_hostile_member_only() {
        let s = shared(HostileKind::BothResultError, 2);
        let batch = json!([call(1), call(2), {"jsonrpc": "2.0", "method": "notifications/x"}]);
        let Plan::Hostile { body, .. } = s.plan(&batch) else {
            panic!("the second call is hostile")
        };
        let answers: Vec<Value> = serde_json::from_slice(&body).unwrap();
        assert_eq!(answers.len(), 2);
        assert!(answers[0].get("error").is_none());
        assert!(answers[1].get("error").is_some() && answers[1].get("result").is_some());
        let s = shared(HostileKind::InvalidUtf8, 1);
        let Plan::Hostile { body, .. } = s.plan(&call(1)) else {
            panic!()
        };
        assert!(std::str::from_utf8(&body).is_err());
    }

    #[test]
    fn the_handshake_is_answered_correctly() {
        let s = shared(HostileKind::SlowHead, 1);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
        let Plan::Answer(Some(body)) = s.plan(&init) else {
            panic!()
        };
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["result"]["protocolVersion"], "2025-03-26");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(matches!(s.plan(&note), Plan::Answer(None)));
    }
}
