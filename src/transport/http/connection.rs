//! One HTTP/1.1 connection to the target, over TCP or rustls, polled inline by the exchange
//! using it (no task, no channel, no header map per request): the request is written from one
//! buffer, the answer's head parsed with httparse, its body framed by `body`. One request at a
//! time. Kept idle, it tells whether it can take another request, and whether it was found
//! closed before any byte of that request was written (then the request may go elsewhere;
//! once a byte is out, it never is).

use super::body::{Chunk, Framing, Step, next_piece};
use super::client::SESSION_HEADER;
use crate::transport::{BodyKind, TransportError};
use bytes::{Buf, BytesMut};
use http::HeaderValue;
use rustls::pki_types::ServerName;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Largest answer head (or trailer section) accepted.
pub(super) const MAX_HEAD: usize = 64 << 10;
/// Most headers an answer head may have (as many as hyper allows).
const MAX_HEADERS: usize = 100;
/// Room a read offers the socket at least.
const READ_CHUNK: usize = 8 << 10;

/// What the exchange needs of an answer's head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    /// What `Content-Type` announces.
    pub(super) kind: BodyKind,
    pub(super) retry_after_s: Option<u64>,
    /// The body's length, when `Content-Length` frames it.
    pub(super) length: Option<u64>,
    /// `WWW-Authenticate` of a 401 or 403 (read for those only).
    pub(super) challenge: Option<Box<str>>,
    /// Kept only for an answer read whole (handshakes, probes); a load answer needs none,
    /// and its head stays small.
    pub(super) details: Option<Box<Details>>,
}

/// What an answer read whole keeps of its head besides the status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Details {
    pub(super) content_type: Option<String>,
    pub(super) session_id: Option<HeaderValue>,
    /// `Location` of a redirect (3xx), for the OAuth client's authorization request.
    pub(super) location: Option<String>,
}

/// The body kind a `Content-Type` value announces (`Other` when absent).
pub(super) fn content_kind(content_type: Option<&[u8]>) -> BodyKind {
    let Some(ct) = content_type else {
        return BodyKind::Other;
    };
    let ct = ct.trim_ascii();
    let starts = |p: &[u8]| ct.len() >= p.len() && ct[..p.len()].eq_ignore_ascii_case(p);
    if starts(b"text/event-stream") {
        BodyKind::Sse
    } else if starts(b"application/json") || ct.windows(5).any(|w| w.eq_ignore_ascii_case(b"+json"))
    {
        BodyKind::Json
    } else {
        BodyKind::Other
    }
}

/// `Retry-After`: delay-seconds or an HTTP date (seconds from now, 0 if past).
pub(super) fn retry_after_seconds(value: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(value).ok()?.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Some(n);
    }
    let at = httpdate::parse_http_date(s).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .map_or(0, |d| d.as_secs()),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Writing,
    ReadingHead,
    Body(Framing),
}

/// The bytes under a connection: plain TCP (`http://`) or rustls over TCP (`https://`).
#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// An answer scripted as the reads that deliver it, then the end (tests and fuzz
    /// targets: [`super::scripted`]). Writes are taken whole.
    #[cfg(any(test, fuzzing))]
    Script(std::collections::VecDeque<Vec<u8>>),
}

impl Stream {
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
            #[cfg(any(test, fuzzing))]
            Stream::Script(_) => Poll::Ready(Ok(buf.len())),
        }
    }

    /// Pushes out what TLS still holds of the request (plain TCP holds nothing).
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Stream::Tcp(_) => Poll::Ready(Ok(())),
            Stream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
            #[cfg(any(test, fuzzing))]
            Stream::Script(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_read_buf(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        match self {
            Stream::Tcp(s) => tokio_util::io::poll_read_buf(Pin::new(s), cx, buf),
            Stream::Tls(s) => tokio_util::io::poll_read_buf(Pin::new(&mut **s), cx, buf),
            #[cfg(any(test, fuzzing))]
            Stream::Script(reads) => {
                // As a socket would: no more than the buffer's free room at once.
                let Some(mut read) = reads.pop_front() else {
                    return Poll::Ready(Ok(0));
                };
                let room = (buf.capacity() - buf.len()).max(1);
                if read.len() > room {
                    reads.push_front(read.split_off(room));
                }
                buf.extend_from_slice(&read);
                Poll::Ready(Ok(read.len()))
            }
        }
    }

    /// Whether the server has neither closed the stream nor sent anything since the last
    /// answer. Costs no system call unless the socket has news; TLS records that carry no
    /// data (a TLS 1.3 session ticket) are read and leave the stream quiet.
    ///
    /// Looked at outside tokio's cooperative budget: once the task has spent it (128 socket
    /// polls in one turn, as when a burst of sends takes many idle connections at once, or
    /// 10,000 tasks' polls fall due together), every readiness poll is `Pending`, which would
    /// read as quiet, and a connection the server closed long ago would take the request
    /// and lose it.
    fn is_quiet(&mut self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let look = tokio::task::coop::unconstrained(std::future::poll_fn(|cx| {
            Poll::Ready(self.quiet_now(cx))
        }));
        match std::pin::pin!(look).poll(&mut cx) {
            Poll::Ready(quiet) => quiet,
            Poll::Pending => unreachable!("the look is always ready"),
        }
    }

    fn quiet_now(&mut self, cx: &mut Context<'_>) -> bool {
        match self {
            Stream::Tcp(tcp) => match tcp.poll_read_ready(cx) {
                Poll::Pending => true,
                Poll::Ready(Err(_)) => false,
                // Readiness may be left over from the last answer's read: look once.
                Poll::Ready(Ok(())) => matches!(
                    tcp.try_read(&mut [0u8; 1]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock
                ),
            },
            Stream::Tls(tls) => {
                let (tcp, session) = tls.get_mut();
                // Data or a close the TLS layer already holds.
                if !matches!(
                    session.reader().into_first_chunk(),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock
                ) {
                    return false;
                }
                match tcp.poll_read_ready(cx) {
                    Poll::Pending => true,
                    Poll::Ready(Err(_)) => false,
                    Poll::Ready(Ok(())) => Pin::new(&mut **tls).poll_fill_buf(cx).is_pending(),
                }
            }
            #[cfg(any(test, fuzzing))]
            Stream::Script(reads) => reads.is_empty(),
        }
    }
}

/// One HTTP/1.1 connection, reused request after request. Its state lives in one box, so
/// the exchange phases and items that hand a connection around stay small enough to be
/// moved inline: a connection moves several times per request.
#[derive(Debug)]
pub(super) struct Connection(Box<Wire>);

/// A connection's socket and buffers, and where it is in its exchange.
#[derive(Debug)]
pub(super) struct Wire {
    stream: Stream,
    state: State,
    /// The request being written; `written` bytes of it are out.
    wbuf: Vec<u8>,
    written: usize,
    rbuf: BytesMut,
    /// The answer (or its framing) ends the connection after this exchange.
    closing: bool,
}

pub(super) fn malformed(what: &str) -> TransportError {
    TransportError::Request(format!("malformed HTTP answer: {what}"))
}

fn io_error(e: io::Error) -> TransportError {
    if e.kind() == io::ErrorKind::TimedOut {
        TransportError::Timeout(e.to_string())
    } else {
        TransportError::Request(e.to_string())
    }
}

pub(super) fn closed_early() -> TransportError {
    TransportError::Request("the connection closed before the answer's end".into())
}

/// How `https://` connections are secured: rustls, and the name the certificate must bear.
#[derive(Clone)]
pub(super) struct Tls {
    pub(super) connector: TlsConnector,
    pub(super) name: ServerName<'static>,
}

impl std::ops::Deref for Connection {
    type Target = Wire;

    fn deref(&self) -> &Wire {
        &self.0
    }
}

impl std::ops::DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut Wire {
        &mut self.0
    }
}

impl Connection {
    /// Connects (Nagle off) and, with `tls`, completes the TLS handshake, all within
    /// `timeout`; a connect that takes longer fails naming the part that did not finish.
    pub(super) async fn connect(
        host: &str,
        port: u16,
        tls: Option<&Tls>,
        timeout: Duration,
    ) -> Result<Self, TransportError> {
        let mut tcp_connected = false;
        let open = async {
            let tcp = TcpStream::connect((host, port))
                .await
                .map_err(|e| TransportError::Connect(format!("{host}:{port}: {e}")))?;
            tcp_connected = true;
            let _ = tcp.set_nodelay(true);
            Ok(match tls {
                None => Stream::Tcp(tcp),
                Some(tls) => Stream::Tls(Box::new(
                    tls.connector
                        .connect(tls.name.clone(), tcp)
                        .await
                        .map_err(|e| TransportError::Connect(format!("{host}:{port}: TLS: {e}")))?,
                )),
            })
        };
        let opened = tokio::time::timeout(timeout, open).await;
        let stream = match opened {
            Ok(stream) => stream?,
            Err(_) => {
                // Over plain TCP the connection is ready as soon as it is connected.
                let unfinished = if tcp_connected {
                    "the TLS handshake"
                } else {
                    "the TCP connect"
                };
                return Err(TransportError::Timeout(format!(
                    "connecting to {host}:{port} took over {timeout:?}: {unfinished} did not finish"
                )));
            }
        };
        Ok(Connection::over(stream))
    }

    fn over(stream: Stream) -> Self {
        Connection(Box::new(Wire {
            stream,
            state: State::Idle,
            wbuf: Vec::with_capacity(1024),
            written: 0,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            closing: false,
        }))
    }

    /// A connection whose answer comes as `reads` (each a non-empty read), then its end.
    #[cfg(any(test, fuzzing))]
    pub(super) fn scripted(reads: impl IntoIterator<Item = Vec<u8>>) -> Self {
        Connection::over(Stream::Script(
            reads.into_iter().filter(|r| !r.is_empty()).collect(),
        ))
    }
}

impl Wire {
    /// Whether an idle connection can take a request: its last answer was read whole, and
    /// the server has neither closed it nor sent anything unasked since.
    pub(super) fn reusable(&mut self) -> bool {
        self.state == State::Idle && !self.closing && self.rbuf.is_empty() && self.stream.is_quiet()
    }

    /// Starts a request on an idle connection: `encode` fills the emptied request buffer
    /// with the whole request, head and body.
    pub(super) fn start(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        debug_assert_eq!(self.state, State::Idle);
        self.wbuf.clear();
        encode(&mut self.wbuf);
        self.written = 0;
        self.state = State::Writing;
    }

    /// Starts a request on an idle connection kept from an earlier one ([`Self::start`]) and
    /// writes what the socket takes at once. `false`: the connection was found closed (or
    /// sending unasked bytes) before any byte of the request was written, so the server has
    /// none of it and the request may go on another connection; this one is done. Once a
    /// byte is out, a failure is the exchange's to report.
    pub(super) fn reuse(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
        if !self.reusable() {
            return false;
        }
        self.start(encode);
        let Stream::Tcp(tcp) = &mut self.stream else {
            // rustls may put records out and still report an error for the rest: whether
            // nothing was sent cannot be told, so the exchange writes, and any failure ends it
            // (a scripted stream takes every write).
            return true;
        };
        // No waker is kept: if the socket is full, the exchange's first poll registers its own.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(tcp).poll_write(&mut cx, &self.wbuf) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(n)) => {
                self.written = n;
                true
            }
            Poll::Pending => true,
        }
    }

    /// Writes the request, then reads the answer's head (informational heads skipped);
    /// `details`: keep what an answer read whole needs ([`Head::details`]). A server may answer (413, 429) before it has read the whole
    /// request: while the write is held up, the answer is looked for too, and the connection
    /// ends with the exchange.
    pub(super) fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        details: bool,
    ) -> Poll<Result<Head, TransportError>> {
        while self.state == State::Writing {
            let wrote = if self.written < self.wbuf.len() {
                match self.stream.poll_write(cx, &self.wbuf[self.written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(closed_early())),
                    wrote => wrote.map_ok(|n| self.written += n),
                }
            } else {
                // All of it handed over: TLS may still hold some.
                self.stream
                    .poll_flush(cx)
                    .map_ok(|()| self.state = State::ReadingHead)
            };
            match wrote {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(io_error(e))),
                Poll::Pending => {
                    if let Some(head) = ready!(self.poll_read_head(cx, details))? {
                        self.closing = true;
                        return Poll::Ready(Ok(head));
                    }
                }
            }
        }
        loop {
            if let Some(head) = ready!(self.poll_read_head(cx, details))? {
                return Poll::Ready(Ok(head));
            }
        }
    }

    /// Reads once more toward the answer's head: `Ready(Ok(Some(_)))` once it is whole,
    /// `Ready(Ok(None))` after a read that did not complete it.
    fn poll_read_head(
        &mut self,
        cx: &mut Context<'_>,
        details: bool,
    ) -> Poll<Result<Option<Head>, TransportError>> {
        if let Some(head) = self.parse_head(details)? {
            return Poll::Ready(Ok(Some(head)));
        }
        if self.rbuf.len() > MAX_HEAD {
            return Poll::Ready(Err(malformed("head over 64 KiB")));
        }
        if ready!(self.poll_fill(cx))? == 0 {
            return Poll::Ready(Err(closed_early()));
        }
        Poll::Ready(self.parse_head(details))
    }

    /// Takes a complete final head off the read buffer, if there is one, and sets the
    /// body's framing.
    fn parse_head(&mut self, details: bool) -> Result<Option<Head>, TransportError> {
        loop {
            // Left uninitialised: zeroing 100 headers per answer would cost more than parsing.
            let mut headers = [const { MaybeUninit::uninit() }; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut []);
            let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
                &mut resp,
                &self.rbuf,
                &mut headers,
            );
            let len = match parsed {
                // The bound holds wherever the reads happened to end.
                Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => {
                    return Err(malformed("head over 64 KiB"));
                }
                Ok(httparse::Status::Complete(len)) => len,
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(e) => return Err(malformed(&e.to_string())),
            };
            let status = resp.code.unwrap_or(0);
            if (100..200).contains(&status) && status != 101 {
                // 100 Continue and the like: the real head follows.
                self.rbuf.advance(len);
                continue;
            }
            let mut head = Head {
                status,
                kind: content_kind(None),
                retry_after_s: None,
                length: None,
                challenge: None,
                details: details.then(Box::default),
            };
            let refused = matches!(status, 401 | 403);
            let mut length = None;
            // `Transfer-Encoding`, if any: whether chunked is its last coding.
            let mut coded: Option<bool> = None;
            let mut closing = resp.version == Some(0) || status == 101;
            for h in resp.headers.iter() {
                let name = h.name;
                if name.eq_ignore_ascii_case("content-type") {
                    head.kind = content_kind(Some(h.value));
                    if let Some(d) = &mut head.details {
                        d.content_type = std::str::from_utf8(h.value).ok().map(str::to_owned);
                    }
                } else if name.eq_ignore_ascii_case("retry-after") {
                    head.retry_after_s = retry_after_seconds(h.value);
                } else if refused && name.eq_ignore_ascii_case("www-authenticate") {
                    // Several challenges may come in several headers: the Bearer one counts.
                    let v = String::from_utf8_lossy(h.value);
                    if head.challenge.is_none() || v.to_ascii_lowercase().contains("bearer") {
                        head.challenge = Some(v.into());
                    }
                } else if name.eq_ignore_ascii_case("content-length") {
                    let n = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .ok_or_else(|| malformed("bad Content-Length"))?;
                    if length.is_some_and(|l| l != n) {
                        return Err(malformed("conflicting Content-Length"));
                    }
                    length = Some(n);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    coded =
                        Some(h.value.rsplit(|&b| b == b',').next().is_some_and(|last| {
                            last.trim_ascii().eq_ignore_ascii_case(b"chunked")
                        }));
                } else if let Some(d) = &mut head.details
                    && name.eq_ignore_ascii_case(SESSION_HEADER.as_str())
                {
                    d.session_id = HeaderValue::from_bytes(h.value).ok();
                } else if let Some(d) = &mut head.details
                    && (300..400).contains(&status)
                    && name.eq_ignore_ascii_case("location")
                {
                    d.location = std::str::from_utf8(h.value).ok().map(str::to_owned);
                } else if name.eq_ignore_ascii_case("connection") {
                    for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                        if token.eq_ignore_ascii_case(b"close") {
                            closing = true;
                        } else if token.eq_ignore_ascii_case(b"keep-alive") {
                            closing = false;
                        }
                    }
                }
            }
            self.rbuf.advance(len);
            // RFC 9112 6.3: chunked last, chunked; another coding, to the end, whatever the
            // length says; else the length; else to the end.
            let framing = match (coded, length) {
                _ if status == 204 || status == 304 => Framing::Empty,
                (Some(true), _) => Framing::Chunked(Chunk::Size),
                (None, Some(n)) => Framing::Length(n),
                _ => {
                    closing = true;
                    Framing::UntilClose
                }
            };
            if let Framing::Length(n) = framing {
                head.length = Some(n);
            }
            self.closing = closing;
            self.state = State::Body(framing);
            return Ok(Some(head));
        }
    }

    /// Reads more of the answer into the buffer; `Ready(Ok(0))` at the connection's end.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, TransportError>> {
        self.rbuf.reserve(READ_CHUNK);
        self.stream
            .poll_read_buf(cx, &mut self.rbuf)
            .map_err(io_error)
    }

    /// Hands the next piece of the body to `take`: `Ready(Ok(true))` after a piece,
    /// `Ready(Ok(false))` once the body is over (the connection is then idle).
    pub(super) fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
        take: &mut impl FnMut(&[u8]),
    ) -> Poll<Result<bool, TransportError>> {
        loop {
            let State::Body(framing) = &mut self.state else {
                return Poll::Ready(Ok(false));
            };
            match next_piece(framing, &mut self.rbuf)? {
                Step::Data(n) => {
                    take(&self.rbuf[..n]);
                    self.rbuf.advance(n);
                    return Poll::Ready(Ok(true));
                }
                Step::End => {
                    self.state = State::Idle;
                    return Poll::Ready(Ok(false));
                }
                Step::NeedMore => {
                    let until_close = *framing == Framing::UntilClose;
                    if ready!(self.poll_fill(cx))? == 0 {
                        if until_close {
                            self.state = State::Idle;
                            return Poll::Ready(Ok(false));
                        }
                        return Poll::Ready(Err(closed_early()));
                    }
                }
            }
        }
    }

    /// Whether the connection may serve another request: the answer was read to its end,
    /// nothing came after it, and neither side means to close.
    pub(super) fn keeps_alive(&self) -> bool {
        self.state == State::Idle && !self.closing && self.rbuf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_name_the_body_kind() {
        let kind = |ct: &str| content_kind(Some(ct.as_bytes()));
        assert_eq!(kind("application/json"), BodyKind::Json);
        assert_eq!(kind(" Application/JSON; charset=utf-8"), BodyKind::Json);
        assert_eq!(kind("application/vnd.api+json"), BodyKind::Json);
        assert_eq!(kind("text/event-stream"), BodyKind::Sse);
        assert_eq!(kind("text/plain"), BodyKind::Other);
        assert_eq!(content_kind(None), BodyKind::Other);
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after_seconds(b"7"), Some(7));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let s = retry_after_seconds(later.as_bytes()).unwrap();
        assert!((100..=120).contains(&s), "{s}");
        assert_eq!(retry_after_seconds(b"soon"), None);
    }

    /// A server on loopback that takes one connection and answers each request it reads
    /// with the next of `answers`, then closes.
    async fn raw_server(answers: Vec<&'static [u8]>) -> u16 {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            for answer in answers {
                let request = crate::transport::wire_for_tests::read_request(&mut tcp, &mut seen);
                assert!(request.await.is_some(), "the client hung up mid-request");
                let _ = tcp.write_all(answer).await;
            }
        });
        port
    }

    /// Sends one request on `conn` and reads the whole answer: its head and its body.
    async fn exchange(conn: &mut Connection) -> Result<(Head, Vec<u8>), TransportError> {
        conn.start(|w| {
            w.extend_from_slice(b"POST /mcp HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}");
        });
        let head = std::future::poll_fn(|cx| conn.poll_head(cx, false)).await?;
        let mut body = Vec::new();
        while std::future::poll_fn(|cx| conn.poll_body(cx, &mut |b| body.extend_from_slice(b)))
            .await?
        {}
        Ok((head, body))
    }

    async fn connect(port: u16) -> Connection {
        Connection::connect("127.0.0.1", port, None, Duration::from_secs(5))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_kept_alive_connection_serves_answer_after_answer() {
        let port = raw_server(vec![
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 429 Too Many\r\nRetry-After: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: 1\n\n",
        ])
        .await;
        let mut conn = connect(port).await;
        let (head, body) = exchange(&mut conn).await.unwrap();
        assert_eq!(
            (head.status, head.kind, &body[..]),
            (200, BodyKind::Json, &b"{}"[..])
        );
        assert!(conn.keeps_alive() && conn.reusable());
        let (head, body) = exchange(&mut conn).await.unwrap();
        assert_eq!(
            (head.status, head.retry_after_s, &body[..]),
            (429, Some(3), &b"no"[..])
        );
        assert!(conn.keeps_alive() && conn.reusable());
        // No length, no chunks: the body runs to the connection's end, which ends its use.
        let (head, body) = exchange(&mut conn).await.unwrap();
        assert_eq!((head.kind, &body[..]), (BodyKind::Sse, &b"data: 1\n\n"[..]));
        assert!(!conn.keeps_alive() && !conn.reusable());
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_not_reused() {
        let port = raw_server(vec![b"HTTP/1.1 204 No Content\r\n\r\n"]).await;
        let mut conn = connect(port).await;
        let (head, body) = exchange(&mut conn).await.unwrap();
        assert_eq!((head.status, body.len()), (204, 0));
        assert!(conn.keeps_alive());
        // The server's FIN arrives on its own time: look until it shows, within a bound.
        let seen = async {
            while conn.reusable() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), seen)
            .await
            .unwrap();
    }

    /// A kept connection takes the next request's first bytes at once; one whose first write
    /// fails is reported with nothing of the request out, so the request may go elsewhere.
    #[tokio::test]
    async fn a_kept_connection_tells_whether_the_first_write_took_any_of_the_request() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            for _ in 0..2 {
                let request = crate::transport::wire_for_tests::read_request(&mut tcp, &mut seen);
                assert!(request.await.is_some(), "the client hung up mid-request");
                let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                tcp.write_all(answer).await.unwrap();
            }
            // Held open, never closed by this side.
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let mut conn = connect(port).await;
        exchange(&mut conn).await.unwrap();
        let request = b"POST /mcp HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}";
        assert!(conn.reuse(|w| w.extend_from_slice(request)));
        assert_eq!(conn.written, request.len(), "written before the first poll");
        let head = std::future::poll_fn(|cx| conn.poll_head(cx, false)).await;
        assert_eq!(head.unwrap().status, 200);
        while std::future::poll_fn(|cx| conn.poll_body(cx, &mut |_| {}))
            .await
            .unwrap()
        {}
        // Shut for writing on this side: the server has not closed it, so it looks reusable,
        // and the first write fails.
        let Stream::Tcp(tcp) = &mut conn.stream else {
            unreachable!("plain TCP")
        };
        tcp.shutdown().await.unwrap();
        assert!(conn.reusable());
        assert!(!conn.reuse(|w| w.extend_from_slice(request)));
        assert_eq!(conn.written, 0);
    }

    #[tokio::test]
    async fn a_coded_body_runs_to_the_end_whatever_its_length_says() {
        let port = raw_server(vec![
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nabcdef",
        ])
        .await;
        let mut conn = connect(port).await;
        let (_, body) = exchange(&mut conn).await.unwrap();
        assert_eq!(body, b"abcdef");
        assert!(!conn.keeps_alive());
    }

    #[tokio::test]
    async fn an_answer_before_the_request_was_read_is_taken_while_writing() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            // Read a little, refuse, then stop reading and hold the connection open.
            let _ = tcp.read(&mut [0u8; 1024]).await;
            let refusal = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n";
            let _ = tcp.write_all(refusal).await;
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let mut conn = connect(port).await;
        let body = vec![b' '; 32 << 20];
        conn.start(|w| {
            w.extend_from_slice(b"POST /mcp HTTP/1.1\r\ncontent-length: 33554432\r\n\r\n");
            w.extend_from_slice(&body);
        });
        let head = tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| conn.poll_head(cx, false)),
        )
        .await
        .expect("the answer is seen while the write is held up")
        .unwrap();
        assert_eq!(head.status, 413);
        while std::future::poll_fn(|cx| conn.poll_body(cx, &mut |_| {}))
            .await
            .unwrap()
        {}
        assert!(
            !conn.keeps_alive(),
            "half a request went out: the connection ends"
        );
    }

    #[tokio::test]
    async fn garbage_and_endless_heads_are_errors() {
        let port = raw_server(vec![b"SSH-2.0-OpenSSH\r\n\r\n"]).await;
        let err = exchange(&mut connect(port).await).await.unwrap_err();
        assert!(err.to_string().contains("malformed"), "{err}");
        let endless: &'static [u8] = Box::leak(
            [
                &b"HTTP/1.1 200 OK\r\n"[..],
                &b"x-pad: 0123456789\r\n".repeat(5000),
            ]
            .concat()
            .into_boxed_slice(),
        );
        let port = raw_server(vec![endless]).await;
        let err = exchange(&mut connect(port).await).await.unwrap_err();
        assert!(err.to_string().contains("malformed"), "{err}");
        let port = raw_server(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"]).await;
        let err = exchange(&mut connect(port).await).await.unwrap_err();
        assert!(err.to_string().contains("closed before"), "{err}");
    }

    #[tokio::test]
    async fn a_tls_connection_is_reused_until_the_server_closes_it() {
        use tokio::io::AsyncWriteExt;
        let (acceptor, client) = crate::transport::wire_for_tests::self_signed_tls();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut seen = Vec::new();
            for _ in 0..2 {
                let request = crate::transport::wire_for_tests::read_request(&mut tls, &mut seen);
                assert!(request.await.is_some(), "the client hung up mid-request");
                let answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
                tls.write_all(answer).await.unwrap();
                tls.flush().await.unwrap();
            }
            // close_notify, then the connection stays open until the client goes.
            tls.shutdown().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let tls = Tls {
            connector: std::sync::Arc::new(client).into(),
            name: ServerName::try_from("127.0.0.1").unwrap(),
        };
        let mut conn = Connection::connect("127.0.0.1", port, Some(&tls), Duration::from_secs(5))
            .await
            .unwrap();
        let (head, body) = exchange(&mut conn).await.unwrap();
        assert_eq!((head.status, &body[..]), (200, &b"{}"[..]));
        // TLS 1.3 session tickets may come after the answer: they carry no data.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            conn.reusable(),
            "an idle TLS connection takes the next request"
        );
        let (head, _) = exchange(&mut conn).await.unwrap();
        assert_eq!(head.status, 200);
        let closed = async {
            while conn.reusable() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), closed)
            .await
            .expect("the server's close_notify shows");
    }
}
