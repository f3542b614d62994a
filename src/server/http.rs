//! Streamable HTTP for the target (hyper, HTTP/1.1, keep-alive): the accept loop with its
//! connection bound, the safety checks (Origin 403, body 413, media types), admission (429 /
//! 503 with Retry-After), sessions and DELETE, the handler's answers framed as JSON bodies
//! or SSE streams with their statuses, and `GET /stats`.

use super::capacity::Admission;
use super::fleet::Fleet;
use super::handler::{Batch, Handled, Origin};
use super::job::Job;
use super::legacy_sse;
use super::mcp::Headers;
use super::resume::{self, Resumed};
use super::stats::Stats;
use super::wire::{self, Sink};
use super::{AnswerMode, Shared};
use crate::jsonrpc::ErrorObject;
use crate::protocol::{Revision, headers};
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

/// The error code SDK servers use for an unknown session.
const SESSION_NOT_FOUND: i64 = -32001;
/// How long connections may take to finish their answers once the target stops.
const GRACE: Duration = Duration::from_secs(3);

/// Accepts connections until `stop` turns true; at most `max_connections` are open, more
/// are closed at once and counted. Each is assigned a replica of the fleet.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    fleet: Arc<Fleet>,
    mut stop: watch::Receiver<bool>,
) {
    let limit = Arc::new(Semaphore::new(fleet.cfg().max_connections));
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => accepted,
        };
        while conns.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // Out of descriptors or a connection reset before accept: try again shortly.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
            Stats::add(&fleet.stats().connections_refused, 1);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let fleet = Arc::clone(&fleet);
        let replica = fleet.assign();
        let mut stop = stop.clone();
        conns.spawn(async move {
            let _permit = permit;
            let stats = Arc::clone(fleet.stats());
            let _open = stats.connection();
            let service = service_fn(move |mut req: Request<Incoming>| {
                let fleet = Arc::clone(&fleet);
                // Who is asking (the auth admin call is for loopback only).
                req.extensions_mut().insert(peer);
                async move { Ok::<_, Infallible>(handle(&fleet, replica, req).await) }
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

pub(super) fn respond(
    status: u16,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let body: Bytes = body.into();
    let mut r = Response::new(Body::Full((!body.is_empty()).then_some(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if !matches!(r.body(), Body::Full(None)) {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    r
}

pub(super) fn text(status: u16, body: &'static str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body)
}

pub(super) fn accepted() -> Response<Body> {
    respond(202, "", Bytes::new())
}

pub(super) fn json(status: u16, body: Vec<u8>) -> Response<Body> {
    respond(status, "application/json", body)
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Serves one request on a connection assigned to replica `conn`, by the replica the
/// balancer routes it to.
async fn handle(fleet: &Fleet, conn: usize, req: Request<Incoming>) -> Response<Body> {
    let shared = fleet.route(conn, header(req.headers(), headers::SESSION_ID));
    let resp = route(fleet, shared, req).await;
    shared.stats.status(resp.status().as_u16());
    resp
}

async fn route(fleet: &Fleet, shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    if let Some(origin) = req.headers().get(header::ORIGIN)
        && !origin_allowed(shared, origin)
    {
        return text(403, "forbidden origin\n");
    }
    let req = match &shared.auth {
        Some(auth) => match auth.intercept(req, respond).await {
            Ok(answer) => return answer,
            Err(req) => req,
        },
        None => req,
    };
    if shared.cfg.legacy_sse && legacy_sse::serves(req.uri().path()) {
        return legacy_sse::route(shared, req).await;
    }
    if req.uri().path() == "/mcp" {
        Stats::add(&shared.replica.requests, 1);
    }
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/mcp") => post(shared, req).await,
        (&Method::DELETE, "/mcp") => delete(shared, req.headers()),
        (&Method::GET, "/mcp") if shared.resumptions.on() => resume(shared, req.headers()),
        (_, "/mcp") => {
            let mut r = text(405, "POST or DELETE\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            r
        }
        (&Method::GET, "/stats") => match serde_json::to_vec(&fleet.snapshot()) {
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
    match header(h, headers::SESSION_ID) {
        None => text(400, "DELETE needs Mcp-Session-Id\n"),
        Some(id) if shared.sessions.close(id) => {
            Stats::add(&shared.stats.sessions_closed, 1);
            respond(200, "", Bytes::new())
        }
        Some(_) => unknown_session(shared, text(404, "unknown session\n")),
    }
}

/// Counts an answer that the request's session is unknown, for the fleet and the replica.
pub(super) fn unknown_session(shared: &Shared, resp: Response<Body>) -> Response<Body> {
    Stats::add(&shared.stats.unknown_session, 1);
    Stats::add(&shared.replica.unknown_session, 1);
    resp
}

/// A POST's checks before its body is handled (media types, the body bound), its body, and
/// its admission by the capacity model (429 or 503 with `Retry-After` when refused); the
/// answer to give instead when a check fails.
pub(super) async fn read_admitted(
    shared: &Shared,
    h: &HeaderMap,
    body: Incoming,
) -> Result<(Bytes, Admission), Response<Body>> {
    if let Some(ct) = header(h, header::CONTENT_TYPE.as_str())
        && !ct.trim_start().starts_with("application/json")
    {
        return Err(text(415, "Content-Type must be application/json\n"));
    }
    if !accepts(h, "application/json") && !accepts(h, "text/event-stream") {
        return Err(text(
            406,
            "Accept must allow application/json or text/event-stream\n",
        ));
    }
    let limit = shared.cfg.max_body_bytes;
    let too_big = || {
        let mut r = text(413, "body too large\n");
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_big());
    }
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_big()),
        Err(_) => return Err(text(400, "body could not be read\n")),
    };
    let Some(admission) = shared.capacity.try_admit() else {
        Stats::add(&shared.replica.rejected, 1);
        let reject = shared.cfg.reject.code();
        let mut r = text(reject, "at capacity, retry later\n");
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(shared.cfg.retry_after_s),
        );
        return Err(r);
    };
    Ok((bytes, admission))
}

async fn post(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let h = &parts.headers;
    let (bytes, admission) = match read_admitted(shared, h, body).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    if let Some(auth) = &shared.auth
        && let Some(refused) =
            auth.step_up_refusal(parts.extensions.get(), h, &bytes, |s, ct, b| {
                respond(s, ct, b)
            })
    {
        return refused;
    }
    let session_id = header(h, headers::SESSION_ID);
    let session = match session_id {
        None => None,
        Some(id) => match shared.sessions.lookup(id) {
            Some(v) => Some(v),
            // Refused before parsing: not in the client view.
            None => {
                let body = wire::null_id_error(&ErrorObject {
                    code: SESSION_NOT_FOUND,
                    message: "Session not found".into(),
                    data: None,
                });
                return unknown_session(shared, json(404, body));
            }
        },
    };
    // Read only with `header_tools` on (nothing else checks them), and no allocation unless
    // the request carries `Mcp-Param-*` headers; a value that is not visible ASCII is kept
    // as "" (it then matches no argument).
    let params: Vec<(&str, &str)> = if shared.cfg.header_tools {
        h.iter()
            .filter(|(n, _)| n.as_str().starts_with(headers::PARAM_PREFIX))
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap_or("")))
            .collect()
    } else {
        Vec::new()
    };
    let origin = Origin::Http {
        headers: Headers {
            version: header(h, headers::PROTOCOL_VERSION),
            method: header(h, headers::METHOD),
            name: header(h, headers::NAME),
            params: &params,
        },
        session,
    };
    match shared.handle(&bytes, origin) {
        Handled::Nothing | Handled::Cancel(_) => accepted(),
        Handled::Refused(refused) => json(refused.status, refused.message),
        Handled::Single(job) => {
            // Only with `sse_close_early` on may a (2025-11-25) stream be closed early.
            let resumable = shared.resumptions.on()
                && session
                    .or_else(|| header(h, headers::PROTOCOL_VERSION).and_then(Revision::parse))
                    == Some(Revision::V2025_11_25);
            single(shared, job, h, admission, resumable.then_some(session_id)).await
        }
        Handled::Batch(batch) => answer_batch(shared, batch, h, admission).await,
    }
}

/// Whether answers go out as an SSE stream: the target answers so and the client accepts it.
fn answers_as_sse(shared: &Shared, h: &HeaderMap) -> bool {
    shared.cfg.answer == AnswerMode::Sse && accepts(h, "text/event-stream")
}

/// Answers one request; `resumable` is `Some(its session id)` when its answer stream may be
/// closed early for a resumption (`sse_close_early`).
async fn single(
    shared: &Arc<Shared>,
    job: Job,
    h: &HeaderMap,
    admission: Admission,
    resumable: Option<Option<&str>>,
) -> Response<Body> {
    if job.streams() && answers_as_sse(shared, h) {
        if let Some(session) = resumable
            && let Some((event_id, parked)) = shared.resumptions.close_early(session, &shared.stats)
        {
            return sse_closed_early(shared, job, admission, &event_id, parked);
        }
        return sse_single(shared, job, admission);
    }
    let done = shared.run(job, None).await;
    drop(admission);
    let mut resp = match done.shaped.into_body() {
        Some(body) => json(done.status, body),
        None => accepted(),
    };
    if let Some(v) = done.initialized
        && shared.cfg.sessions
    {
        Stats::add(&shared.stats.sessions_opened, 1);
        Stats::add(&shared.replica.sessions_opened, 1);
        if let Ok(id) = HeaderValue::from_str(&shared.sessions.open(v)) {
            resp.headers_mut().insert(headers::SESSION_ID, id);
        }
    }
    resp
}

pub(super) fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    admission: Option<Admission>,
) -> Response<Body> {
    let mut r = Response::new(Body::Stream {
        rx,
        _admission: admission,
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
                    sink.answer(bytes).await;
                }
            }
            _ = tx.closed() => {}
        }
    });
    sse_response(rx, Some(admission))
}

/// An answer stream closed early (`sse_close_early`): a priming event with its id and a
/// `retry:` advice, then the end; the request runs on and its answer is parked for the GET
/// that resumes the stream. No progress is sent on it.
fn sse_closed_early(
    shared: &Arc<Shared>,
    job: Job,
    admission: Admission,
    event_id: &str,
    parked: tokio::sync::oneshot::Sender<Bytes>,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel(1);
    let priming = format!("id: {event_id}\nretry: {}\ndata:\n\n", resume::RETRY_MS);
    let _ = tx.try_send(Bytes::from(priming));
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let done = shared.run(job, None).await;
        drop(admission);
        let _ = parked.send(Bytes::from(done.shaped.sse(true)));
    });
    sse_response(rx, None)
}

/// A GET with `Last-Event-ID`: the answer parked under that id, on a stream of its own.
fn resume(shared: &Arc<Shared>, h: &HeaderMap) -> Response<Body> {
    let Some(last) = header(h, "last-event-id") else {
        return text(405, "GET only resumes a stream (Last-Event-ID)\n");
    };
    let session = header(h, headers::SESSION_ID);
    if shared.cfg.sessions && session.is_none_or(|s| shared.sessions.lookup(s).is_none()) {
        let resp = text(404, "unknown session\n");
        return match session {
            Some(_) => unknown_session(shared, resp),
            None => resp,
        };
    }
    let answer = match shared.resumptions.resume(last, session, &shared.stats) {
        Resumed::Refused => {
            let mut r = text(405, "no GET streams here\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            return r;
        }
        Resumed::Unknown => return text(404, "no stream to resume under that event id\n"),
        Resumed::Answer(answer) => answer,
    };
    let (tx, rx) = mpsc::channel(1);
    let stats = Arc::clone(&shared.stats);
    tokio::spawn(async move {
        if let Ok(bytes) = answer.await
            && !bytes.is_empty()
            && tx.send(bytes).await.is_ok()
        {
            Stats::add(&stats.sse_answers_on_resumption, 1);
        }
    });
    sse_response(rx, None)
}

/// A batch's answers: one JSON array, or one SSE event per answer (progress events among
/// them). Closing the stream cancels the requests still running.
async fn answer_batch(
    shared: &Arc<Shared>,
    batch: Batch,
    h: &HeaderMap,
    admission: Admission,
) -> Response<Body> {
    if !answers_as_sse(shared, h) {
        let array = batch.start(shared, None).into_array().await;
        drop(admission);
        return array.map_or_else(accepted, |body| json(200, body));
    }
    let (tx, rx) = mpsc::channel(16);
    let sink = Arc::new(Sink::new(tx.clone(), true, Arc::clone(&shared.stats)));
    let mut answers = batch.start(shared, Some(Arc::clone(&sink)));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                next = answers.next() => {
                    let Some(answer) = next else { break };
                    let bytes = answer.sse(false);
                    if !bytes.is_empty() && tx.send(Bytes::from(bytes)).await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
        }
        sink.send_late().await;
    });
    sse_response(rx, Some(admission))
}
