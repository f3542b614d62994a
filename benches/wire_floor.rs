//! The wire floor (issue #24): the cheapest honest HTTP/1.1 client for the exchange the
//! open-loop benchmarks measure, so that mcpload's CPU per request can be judged against
//! what the kernel and a minimal client cost, not only against another load generator.
//!
//! It owns exactly this and nothing more: arrivals at a constant rate R for D seconds
//! (released on tokio's millisecond timer: at 20 000/s they leave in groups of about 20 each
//! millisecond, every one due by then), one pre-encoded POST (the `tools/call echo` body and
//! 2026-07-28 headers of benches/vs_oha.sh), one keep-alive connection per request in flight
//! (an idle one is reused, a new one opened when none is idle), and each answer read to the
//! end of its body, parsing only the status line and the framing (`Content-Length` or
//! chunked); no JSON, no latency histograms, no per-request allocation. One thread (a
//! current_thread runtime), tokio and std only.
//!
//! `wire_floor URL RATE SECS`, URL like `http://127.0.0.1:PORT/mcp`; at the end it prints
//! `requests=N errors=E achieved_rps=X`, N the answers that were a 200 with their whole body,
//! E everything else (failed connects, errors, non-200 answers, arrivals past the connection
//! cap, requests unanswered 5 s after the last arrival). Built by
//! `cargo bench --bench wire_floor --no-run`; run by benches/vs_oha_rate.sh.

use std::cell::Cell;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// The body benches/vs_oha.sh posts, with this client's name.
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"oha","version":"1"}}}}"#;

/// More connections than this at once and an arrival is counted as an error, not sent.
const MAX_CONNECTIONS: usize = 8192;

/// A connection's read buffer; an answer's head must fit in it.
const BUFFER: usize = 16 * 1024;

/// What the pacer and the connections share (one thread: cells, no locks).
struct Shared {
    addr: SocketAddr,
    request: Vec<u8>,
    /// Idle connections waiting on `wake`, each woken by one `notify_one`.
    wake: Notify,
    idle: Cell<usize>,
    connections: Cell<usize>,
    in_flight: Cell<usize>,
    ok: Cell<u64>,
    errors: Cell<u64>,
    /// Set when the last arrival has been sent; `drained` fires when nothing is in flight.
    sending_done: Cell<bool>,
    drained: Notify,
}

/// How one exchange ended, when the connection did not fail.
struct Answer {
    ok: bool,
    keep_alive: bool,
}

fn bad(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Position of `\r\n` in `data`.
fn find_crlf(data: &[u8]) -> Option<usize> {
    data.windows(2).position(|w| w == b"\r\n")
}

/// The end of the head (just past `\r\n\r\n`) in `data`.
fn find_head_end(data: &[u8]) -> Option<usize> {
    data.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
}

fn parse_decimal(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

fn parse_hex(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        let d = (b as char).to_digit(16)?;
        n.checked_mul(16)?.checked_add(u64::from(d))
    })
}

/// A connection: its socket and read buffer, `buf[pos..filled]` not yet consumed.
struct Conn {
    stream: TcpStream,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
}

enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

impl Conn {
    /// Reads more bytes after the unconsumed ones (moved to the front first); false at EOF.
    async fn fill(&mut self) -> io::Result<bool> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.filled == self.buf.len() {
            return Err(bad("an answer's head or chunk line is over the buffer"));
        }
        let n = self.stream.read(&mut self.buf[self.filled..]).await?;
        self.filled += n;
        Ok(n > 0)
    }

    async fn fill_or_eof_error(&mut self) -> io::Result<()> {
        if self.fill().await? {
            Ok(())
        } else {
            Err(io::ErrorKind::UnexpectedEof.into())
        }
    }

    /// Consumes one line (without its `\r\n`) and returns its bounds in the buffer.
    async fn line(&mut self) -> io::Result<(usize, usize)> {
        loop {
            if let Some(p) = find_crlf(&self.buf[self.pos..self.filled]) {
                let start = self.pos;
                self.pos += p + 2;
                return Ok((start, start + p));
            }
            self.fill_or_eof_error().await?;
        }
    }

    /// Discards `n` body bytes.
    async fn skip(&mut self, mut n: u64) -> io::Result<()> {
        loop {
            let have = (self.filled - self.pos) as u64;
            if have >= n {
                self.pos += n as usize;
                return Ok(());
            }
            n -= have;
            self.pos = 0;
            self.filled = 0;
            self.fill_or_eof_error().await?;
        }
    }

    /// Writes the request and reads its answer to the end of the body.
    async fn exchange(&mut self, request: &[u8]) -> io::Result<Answer> {
        self.stream.write_all(request).await?;
        let head_end = loop {
            if let Some(end) = find_head_end(&self.buf[self.pos..self.filled]) {
                break self.pos + end;
            }
            self.fill_or_eof_error().await?;
        };
        let head = &self.buf[self.pos..head_end];
        // Status line: `HTTP/1.1 200 OK`.
        let status_end = find_crlf(head).ok_or(bad("no status line"))?;
        let status_line = &head[..status_end];
        let http11 = status_line.starts_with(b"HTTP/1.1 ");
        let code = status_line.get(9..12).ok_or(bad("short status line"))?;
        let ok = code == b"200";
        let mut framing = Framing::UntilClose;
        let mut keep_alive = http11;
        for line in head[status_end + 2..].split(|&b| b == b'\n') {
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = parse_decimal(value).ok_or(bad("bad Content-Length"))?;
                if !matches!(framing, Framing::Chunked) {
                    framing = Framing::Length(n);
                }
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                if value.len() >= 7 && value[value.len() - 7..].eq_ignore_ascii_case(b"chunked") {
                    framing = Framing::Chunked;
                }
            } else if name.eq_ignore_ascii_case(b"connection") {
                if value.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if value.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        }
        self.pos = head_end;
        match framing {
            Framing::Length(n) => self.skip(n).await?,
            Framing::Chunked => loop {
                let (start, end) = self.line().await?;
                let size_field = &self.buf[start..end];
                let size_field = size_field
                    .iter()
                    .position(|&b| b == b';')
                    .map_or(size_field, |p| &size_field[..p]);
                let size = parse_hex(size_field).ok_or(bad("bad chunk size"))?;
                if size == 0 {
                    // Trailers, up to an empty line.
                    loop {
                        let (start, end) = self.line().await?;
                        if start == end {
                            break;
                        }
                    }
                    break;
                }
                self.skip(size).await?;
                let (start, end) = self.line().await?;
                if start != end {
                    return Err(bad("no CRLF after a chunk"));
                }
            },
            Framing::UntilClose => {
                self.pos = 0;
                self.filled = 0;
                while self.fill().await? {
                    self.pos = 0;
                    self.filled = 0;
                }
                keep_alive = false;
            }
        }
        Ok(Answer { ok, keep_alive })
    }
}

/// One connection's life: an exchange each time the pacer hands it a request (the first at
/// once), reopened when the last one failed or closed it.
async fn connection(shared: Rc<Shared>) {
    let mut buf = Some(vec![0u8; BUFFER].into_boxed_slice());
    let mut conn: Option<Conn> = None;
    loop {
        if conn.is_none() {
            match TcpStream::connect(shared.addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    conn = Some(Conn {
                        stream,
                        buf: buf.take().expect("a buffer for the new connection"),
                        pos: 0,
                        filled: 0,
                    });
                }
                Err(_) => shared.errors.set(shared.errors.get() + 1),
            }
        }
        if let Some(c) = conn.as_mut() {
            match c.exchange(&shared.request).await {
                Ok(answer) => {
                    if answer.ok {
                        shared.ok.set(shared.ok.get() + 1);
                    } else {
                        shared.errors.set(shared.errors.get() + 1);
                    }
                    if !answer.keep_alive {
                        buf = conn.take().map(|c| c.buf);
                    }
                }
                Err(_) => {
                    shared.errors.set(shared.errors.get() + 1);
                    buf = conn.take().map(|c| c.buf);
                }
            }
            if let Some(c) = conn.as_mut()
                && c.pos == c.filled
            {
                c.pos = 0;
                c.filled = 0;
            }
        }
        shared.in_flight.set(shared.in_flight.get() - 1);
        if shared.sending_done.get() && shared.in_flight.get() == 0 {
            shared.drained.notify_one();
        }
        // Idle until the pacer hands over the next request: `idle` counts the waiters, and
        // nothing runs between the increment and the wait's registration (one thread).
        shared.idle.set(shared.idle.get() + 1);
        shared.wake.notified().await;
    }
}

/// Releases `total` arrivals at `rate` per second from `start`.
async fn pace(shared: &Rc<Shared>, rate: f64, total: u64, start: Instant) {
    let spacing_ns = 1e9 / rate;
    let mut next = 0u64;
    while next < total {
        let due = start + Duration::from_nanos((next as f64 * spacing_ns) as u64);
        let now = Instant::now();
        if due > now {
            tokio::time::sleep_until(due.into()).await;
            continue;
        }
        // Every arrival due by now leaves.
        let elapsed_ns = now.duration_since(start).as_nanos() as f64;
        let due_by_now = ((elapsed_ns / spacing_ns) as u64 + 1).min(total);
        while next < due_by_now {
            next += 1;
            if shared.idle.get() > 0 {
                shared.idle.set(shared.idle.get() - 1);
                shared.in_flight.set(shared.in_flight.get() + 1);
                shared.wake.notify_one();
            } else if shared.connections.get() < MAX_CONNECTIONS {
                shared.connections.set(shared.connections.get() + 1);
                shared.in_flight.set(shared.in_flight.get() + 1);
                tokio::task::spawn_local(connection(shared.clone()));
            } else {
                shared.errors.set(shared.errors.get() + 1);
            }
        }
    }
}

fn usage() -> ! {
    println!(
        "usage: wire_floor URL RATE SECS (URL http://HOST:PORT/PATH; built by `cargo bench --bench wire_floor --no-run`, run by benches/vs_oha_rate.sh)"
    );
    std::process::exit(0);
}

fn main() {
    // `cargo bench` passes `--bench` and no URL: print the usage and succeed.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [url, rate, secs] = args.as_slice() else {
        usage();
    };
    let (Ok(rate), Ok(secs)) = (rate.parse::<f64>(), secs.parse::<f64>()) else {
        usage();
    };
    if !(rate > 0.0 && secs > 0.0) {
        usage();
    }
    let Some(rest) = url.strip_prefix("http://") else {
        eprintln!("wire_floor: only http:// URLs");
        std::process::exit(2);
    };
    let (authority, path) = rest
        .find('/')
        .map_or((rest, "/"), |p| (&rest[..p], &rest[p..]));
    let addr = match authority.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(addr)) => addr,
        _ => {
            eprintln!("wire_floor: cannot resolve {authority} (HOST:PORT)");
            std::process::exit(2);
        }
    };
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    )
    .into_bytes();
    let shared = Rc::new(Shared {
        addr,
        request,
        wake: Notify::new(),
        idle: Cell::new(0),
        connections: Cell::new(0),
        in_flight: Cell::new(0),
        ok: Cell::new(0),
        errors: Cell::new(0),
        sending_done: Cell::new(false),
        drained: Notify::new(),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let total = (rate * secs).round() as u64;
    let elapsed = runtime.block_on(tokio::task::LocalSet::new().run_until(async {
        let start = Instant::now();
        pace(&shared, rate, total, start).await;
        shared.sending_done.set(true);
        if shared.in_flight.get() > 0 {
            // Whatever is unanswered 5 s after the last arrival counts as an error.
            let drained = shared.drained.notified();
            if tokio::time::timeout(Duration::from_secs(5), drained)
                .await
                .is_err()
            {
                shared
                    .errors
                    .set(shared.errors.get() + shared.in_flight.get() as u64);
            }
        }
        start.elapsed()
    }));
    let ok = shared.ok.get();
    println!(
        "requests={ok} errors={} achieved_rps={:.1}",
        shared.errors.get(),
        ok as f64 / elapsed.as_secs_f64().max(secs)
    );
}
