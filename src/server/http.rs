//! Streamable HTTP for the target (hyper, HTTP/1.1, keep-alive): the accept loop with its
//! connection bound, the safety checks (Origin 403, body 413, media types), admission (429 /
//! 503 with Retry-After), sessions and DELETE, era routing per POST, single requests and
//! batches answered as JSON or SSE, and `GET /stats`.

use super::capacity::Admission;
use super::mcp::{self, Headers, Msg, Parsed};
use super::stats::{Stats, View};
use super::wire::{self, Sink};
use super::{Done, Job, Shared};
use crate::jsonrpc::{ErrorObject, codes};
use crate::protocol::{Revision, headers};
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

const SESSION_HEADER: &str = headers::SESSION_ID;
const VERSION_HEADER: &str = headers::PROTOCOL_VERSION;
const METHOD_HEADER: &str = headers::METHOD;
const NAME_HEADER: &str = headers::NAME;
/// The error code SDK servers use for an unknown session.
const SESSION_NOT_FOUND: i64 = -32001;
/// How long connections may take to finish their answers once the target stops.
const GRACE: Duration = Duration::from_secs(3);

/// Accepts connections until `stop` turns true; at most `max_connections` are open, more
/// are closed at once and counted.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let limit = Arc::new(Semaphore::new(shared.cfg.max_connections));
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => accepted,
        };
        while conns.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of descriptors or a connection reset before accept: try again shortly.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
            Stats::add(&shared.stats.connections_refused, 1);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let mut stop = stop.clone();
        conns.spawn(async move {
            let _permit = permit;
            let stats = Arc::clone(&shared.stats);
            let _open = stats.connection();
            let service = service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(handle(&shared, req).await) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(GRACE, conn).await;
                }
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(GRACE + Duration::from_secs(1), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    conns.abort_all();
}

/// Resolves once the target is told to stop.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: the target is stopping too.
    let _ = stop.wait_for(|s| *s).await;
}

/// A response body: all at once, or a stream of SSE chunks (holding the POST's admission
/// until the stream ends).
pub(crate) enum Body {
    Full(Option<Bytes>),
    Stream {
        rx: mpsc::Receiver<Bytes>,
        _admission: Option<Admission>,
    },
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream { rx, .. } => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            Body::Stream { .. } => SizeHint::default(),
        }
    }
}

fn respond(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let body: Bytes = body.into();
    let mut r = Response::new(Body::Full((!body.is_empty()).then_some(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if !matches!(r.body(), Body::Full(None)) {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    r
}

fn text(status: u16, body: &'static str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body)
}

fn accepted() -> Response<Body> {
    respond(202, "", Bytes::new())
}

fn json(status: u16, body: Vec<u8>) -> Response<Body> {
    respond(status, "application/json", body)
}

/// An error with id null, tallied as the `null_id` a client will count.
fn null_id_error(stats: &Stats, status: u16, code: i64, message: String) -> Response<Body> {
    stats.view(View::NullId, 1);
    json(
        status,
        wire::null_id_error(&ErrorObject {
            code,
            message,
            data: None,
        }),
    )
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

async fn handle(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let resp = route(shared, req).await;
    shared.stats.status(resp.status().as_u16());
    resp
}

async fn route(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if let Some(origin) = req.headers().get(header::ORIGIN)
        && !origin_allowed(shared, origin)
    {
        return text(403, "forbidden origin\n");
    }
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/mcp") => post(shared, req).await,
        (&Method::DELETE, "/mcp") => delete(shared, req.headers()),
        (_, "/mcp") => {
            let mut r = text(405, "POST or DELETE\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            r
        }
        (&Method::GET, "/stats") => match serde_json::to_vec(&shared.stats.snapshot()) {
            Ok(body) => json(200, body),
            Err(_) => text(500, "stats\n"),
        },
        _ => text(
            404,
            "not found: the MCP endpoint is /mcp, counters are at /stats\n",
        ),
    }
}

/// Loopback origins (any port), the bind address, and `allowed_origins` are accepted.
fn origin_allowed(shared: &Shared, origin: &HeaderValue) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if shared.cfg.allowed_origins.iter().any(|o| o == origin) {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        rest.split([':', '/']).next().unwrap_or("")
    };
    let bind = shared.cfg.bind.ip();
    matches!(host, "localhost" | "127.0.0.1" | "::1")
        || (!bind.is_unspecified() && host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip == bind))
}

fn accepts(h: &HeaderMap, media: &str) -> bool {
    match header(h, header::ACCEPT.as_str()) {
        None => true,
        Some(a) => a.split(',').any(|part| {
            let m = part.split(';').next().unwrap_or("").trim();
            m == media || m == "*/*" || m == "application/*" && media.starts_with("application/")
        }),
    }
}

fn delete(shared: &Shared, h: &HeaderMap) -> Response<Body> {
    if !shared.cfg.sessions {
        return text(405, "sessions are off\n");
    }
    match header(h, SESSION_HEADER) {
        None => text(400, "DELETE needs Mcp-Session-Id\n"),
        Some(id) if shared.sessions.close(id) => respond(200, "", Bytes::new()),
        Some(_) => text(404, "unknown session\n"),
    }
}

async fn post(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let h = &parts.headers;
    if let Some(ct) = header(h, header::CONTENT_TYPE.as_str())
        && !ct.trim_start().starts_with("application/json")
    {
        return text(415, "Content-Type must be application/json\n");
    }
    if !accepts(h, "application/json") && !accepts(h, "text/event-stream") {
        return text(
            406,
            "Accept must allow application/json or text/event-stream\n",
        );
    }
    let limit = shared.cfg.max_body_bytes;
    let too_big = || {
        let mut r = text(413, "body too large\n");
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    if body.size_hint().lower() > limit as u64 {
        return too_big();
    }
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_big(),
        Err(_) => return text(400, "body could not be read\n"),
    };
    let Some(admission) = shared.capacity.try_admit() else {
        let reject = shared.cfg.reject.code();
        let mut r = text(reject, "at capacity, retry later\n");
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(shared.cfg.retry_after_s),
        );
        return r;
    };
    let session = match header(h, SESSION_HEADER) {
        None => None,
        Some(id) => match shared.sessions.lookup(id) {
            Some(v) => Some(v),
            // Refused before parsing: not in the client view.
            None => {
                return json(
                    404,
                    wire::null_id_error(&ErrorObject {
                        code: SESSION_NOT_FOUND,
                        message: "Session not found".into(),
                        data: None,
                    }),
                );
            }
        },
    };
    let raw: &RawValue = match serde_json::from_slice(&bytes) {
        Ok(raw) => raw,
        Err(e) => {
            Stats::add(&shared.stats.malformed_received, 1);
            return null_id_error(
                &shared.stats,
                400,
                codes::PARSE_ERROR,
                format!("Parse error: {e}"),
            );
        }
    };
    if raw.get().starts_with('[') {
        batch(shared, raw, h, session, admission).await
    } else {
        single(shared, raw, h, session, admission).await
    }
}

async fn single(
    shared: &Arc<Shared>,
    raw: &RawValue,
    h: &HeaderMap,
    session: Option<Revision>,
    admission: Admission,
) -> Response<Body> {
    let stats = &shared.stats;
    let (id, req) = match mcp::classify(raw) {
        Msg::Request(id, req) => (id, req),
        Msg::Notification(_) => {
            Stats::add(&stats.notifications_seen, 1);
            return accepted();
        }
        Msg::ClientResponse => return accepted(),
        Msg::Invalid(why) => {
            Stats::add(&stats.malformed_received, 1);
            return null_id_error(
                stats,
                400,
                codes::INVALID_REQUEST,
                format!("Invalid Request: {why}"),
            );
        }
    };
    let parsed = Parsed::new(&req);
    let era = shared.protocol.route_http(
        header(h, VERSION_HEADER),
        session,
        req.method == "initialize",
        parsed.meta_version().is_some(),
    );
    let headers = Headers {
        version: header(h, VERSION_HEADER),
        method: header(h, METHOD_HEADER),
        name: header(h, NAME_HEADER),
    };
    let job = shared.job(id, era, &req, &parsed, Some(headers));
    if shared.cfg.answer == super::AnswerMode::Sse
        && job.streams()
        && accepts(h, "text/event-stream")
    {
        return sse_single(shared, job, admission);
    }
    let done = shared.run(job, None).await;
    drop(admission);
    let initialized = done.initialized;
    let mut resp = match done.shaped.into_body() {
        Some(body) => json(done.status, body),
        None => accepted(),
    };
    if let Some(v) = initialized
        && shared.cfg.sessions
    {
        Stats::add(&stats.sessions_opened, 1);
        if let Ok(id) = HeaderValue::from_str(&shared.sessions.open(v)) {
            resp.headers_mut().insert(SESSION_HEADER, id);
        }
    }
    resp
}

fn sse_response(rx: mpsc::Receiver<Bytes>, admission: Admission) -> Response<Body> {
    let mut r = Response::new(Body::Stream {
        rx,
        _admission: Some(admission),
    });
    let hs = r.headers_mut();
    hs.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    hs.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// Streams one request's answer: progress events, then the answer. Closing the stream
/// cancels the request.
fn sse_single(shared: &Arc<Shared>, job: Job, admission: Admission) -> Response<Body> {
    let (tx, rx) = mpsc::channel(16);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let sink = Sink::new(tx.clone(), true, Arc::clone(&shared.stats));
        tokio::select! {
            done = shared.run(job, Some(&sink)) => {
                let bytes = done.shaped.sse(true);
                if !bytes.is_empty() {
                    let _ = tx.send(Bytes::from(bytes)).await;
                }
            }
            _ = tx.closed() => {}
        }
    });
    sse_response(rx, admission)
}

async fn batch(
    shared: &Arc<Shared>,
    raw: &RawValue,
    h: &HeaderMap,
    session: Option<Revision>,
    admission: Admission,
) -> Response<Body> {
    let stats = &shared.stats;
    let members: Vec<&RawValue> = match serde_json::from_str(raw.get()) {
        Ok(m) => m,
        Err(e) => {
            Stats::add(&stats.malformed_received, 1);
            return null_id_error(stats, 400, codes::PARSE_ERROR, format!("Parse error: {e}"));
        }
    };
    if members.is_empty() {
        Stats::add(&stats.malformed_received, 1);
        return null_id_error(
            stats,
            400,
            codes::INVALID_REQUEST,
            "Invalid Request: empty batch".into(),
        );
    }
    let msgs: Vec<Msg> = members.iter().map(|m| mcp::classify(m)).collect();
    // Refused whole: one error with id null; the requests in it end as `http_other`.
    let refuse = |status: u16, error: &ErrorObject| {
        let with_id = msgs
            .iter()
            .filter(|m| matches!(m, Msg::Request(..)))
            .count() as u64;
        stats.view(View::HttpOther, with_id);
        stats.view(View::NullId, 1);
        json(status, wire::null_id_error(error))
    };
    let era = match shared
        .protocol
        .route_http(header(h, VERSION_HEADER), session, false, false)
    {
        Ok(era) => era,
        Err(early) => return refuse(early.status, &early.error),
    };
    if !shared.protocol.batch_allowed(era) {
        Stats::add(&stats.batch_rejected, 1);
        return refuse(400, &shared.protocol.batch_refusal(era));
    }
    Stats::add(&stats.batches, 1);
    let mut jobs = Vec::new();
    let mut immediate = Vec::new();
    for m in msgs {
        match m {
            Msg::Request(id, req) => {
                let parsed = Parsed::new(&req);
                let era = if req.method == "initialize" {
                    Err(mcp::Early {
                        error: ErrorObject {
                            code: codes::INVALID_REQUEST,
                            message: "initialize must not be part of a batch".into(),
                            data: None,
                        },
                        status: 400,
                    })
                } else {
                    Ok(era)
                };
                jobs.push(shared.job(id, era, &req, &parsed, None));
            }
            Msg::Notification(_) => Stats::add(&stats.notifications_seen, 1),
            Msg::ClientResponse => {}
            Msg::Invalid(why) => {
                Stats::add(&stats.malformed_received, 1);
                stats.view(View::NullId, 1);
                immediate.push(wire::null_id_error(&ErrorObject {
                    code: codes::INVALID_REQUEST,
                    message: format!("Invalid Request: {why}"),
                    data: None,
                }));
            }
        }
    }
    let expected = jobs.len() as u64;
    if jobs.is_empty() && immediate.is_empty() {
        return accepted();
    }
    let sse = shared.cfg.answer == super::AnswerMode::Sse && accepts(h, "text/event-stream");
    if sse {
        let (tx, rx) = mpsc::channel(16);
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            let mut first = Vec::new();
            for m in &immediate {
                wire::sse_event(&mut first, m);
            }
            if !first.is_empty() && tx.send(Bytes::from(first)).await.is_err() {
                return;
            }
            let sink = Arc::new(Sink::new(tx.clone(), true, Arc::clone(&shared.stats)));
            let mut running = spawn_members(&shared, jobs, Some(&sink));
            let mut ids = 0;
            loop {
                tokio::select! {
                    next = running.join_next() => match next {
                        Some(Ok(done)) => {
                            ids += done.shaped.ids_on_wire();
                            let bytes = done.shaped.sse(false);
                            if !bytes.is_empty() && tx.send(Bytes::from(bytes)).await.is_err() {
                                return;
                            }
                        }
                        Some(Err(_)) => {}
                        None => break,
                    },
                    _ = tx.closed() => return,
                }
            }
            if ids != expected {
                shared.stats.view(View::ResponseCountMismatch, 1);
            }
        });
        return sse_response(rx, admission);
    }
    let mut out = Vec::with_capacity(64 * (jobs.len() + immediate.len()) + 2);
    out.push(b'[');
    for m in &immediate {
        wire::Shaped::Message(m.clone()).push_member(&mut out);
    }
    let mut running = spawn_members(shared, jobs, None);
    let mut ids = 0;
    while let Some(next) = running.join_next().await {
        if let Ok(done) = next {
            ids += done.shaped.ids_on_wire();
            done.shaped.push_member(&mut out);
        }
    }
    drop(admission);
    if ids != expected {
        stats.view(View::ResponseCountMismatch, 1);
    }
    if out.len() == 1 {
        return accepted();
    }
    out.push(b']');
    json(200, out)
}

/// Runs the members of a batch concurrently; their answers come out in completion order.
fn spawn_members(shared: &Arc<Shared>, jobs: Vec<Job>, sink: Option<&Arc<Sink>>) -> JoinSet<Done> {
    let mut set = JoinSet::new();
    for job in jobs {
        let shared = Arc::clone(shared);
        let sink = sink.cloned();
        set.spawn(async move { shared.run(job, sink.as_deref()).await });
    }
    set
}
