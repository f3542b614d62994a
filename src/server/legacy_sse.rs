//! The legacy HTTP+SSE transport of 2024-11-05 for the target (`legacy_sse`): `GET /sse`
//! opens a session and its one stream, whose first event, `endpoint`, names
//! `/messages?session_id=…`; each message POSTed there is answered 202, and its answer, made
//! by the same handler, capacity model and faults as over Streamable HTTP, comes on the
//! session's stream, answers of different requests interleaved as they finish.

use super::Shared;
use super::capacity::Admission;
use super::handler::{Batch, Handled, Origin};
use super::http::{self, Body};
use super::job::Job;
use super::mcp::Headers;
use super::stats::Stats;
use super::wire::Sink;
use crate::protocol::Revision;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Where a client opens its session's stream.
pub(super) const STREAM_PATH: &str = "/sse";
/// Where it POSTs its messages (`?session_id=…`).
pub(super) const POST_PATH: &str = "/messages";
/// Answers and notifications a stream holds before their writers wait.
const STREAM_QUEUE: usize = 64;

/// One session: its stream, and what `initialize` agreed on.
struct Session {
    /// Every running request of the session holds the session, so the stream ends once the
    /// session is forgotten and its last request has written its answer.
    tx: mpsc::Sender<Bytes>,
    /// The agreed version: its place in [`Revision::ALL`] plus one; 0 before `initialize`.
    version: AtomicU8,
    /// Requests POSTed in it so far, `initialize` aside (`legacy_sse_end_every`).
    requests: AtomicU64,
}

impl Session {
    fn version(&self) -> Option<Revision> {
        let v = self.version.load(Relaxed);
        v.checked_sub(1)
            .and_then(|i| Revision::ALL.get(usize::from(i)).copied())
    }

    fn agreed(&self, v: Revision) {
        if let Some(i) = Revision::ALL.iter().position(|r| *r == v) {
            self.version.store(i as u8 + 1, Relaxed);
        }
    }
}

/// The open sessions by id. The lock is held only to find, add or forget an entry (once per
/// POST or GET), never while a request runs.
#[derive(Default)]
pub(crate) struct Sessions {
    open: Mutex<FxHashMap<u64, Arc<Session>>>,
    next: AtomicU64,
}

impl Sessions {
    fn table(&self) -> std::sync::MutexGuard<'_, FxHashMap<u64, Arc<Session>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, id: u64) -> Option<Arc<Session>> {
        self.table().get(&id).filter(|s| !s.tx.is_closed()).cloned()
    }

    fn forget(&self, id: u64) {
        self.table().remove(&id);
    }
}

/// Whether `path` is one of this transport's (served with `legacy_sse` on).
pub(super) fn serves(path: &str) -> bool {
    path == STREAM_PATH || path == POST_PATH || path == "/messages/"
}

/// Serves `GET /sse` and `POST /messages`.
pub(super) async fn route(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    Stats::add(&shared.replica.requests, 1);
    match (req.method(), req.uri().path()) {
        (&Method::GET, STREAM_PATH) => open(shared),
        (&Method::POST, path) if path != STREAM_PATH => post(shared, req).await,
        _ => http::text(
            405,
            "GET /sse opens a stream; POST /messages?session_id=…\n",
        ),
    }
}

/// Opens a session: its stream, whose first event names where to POST.
fn open(shared: &Shared) -> Response<Body> {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    let id = shared.legacy.next.fetch_add(1, Relaxed) + 1;
    let endpoint = format!("event: endpoint\ndata: {POST_PATH}?session_id={id:x}\n\n");
    // The channel is new and empty: the first event always fits.
    let _ = tx.try_send(Bytes::from(endpoint));
    let session = Arc::new(Session {
        tx,
        version: AtomicU8::new(0),
        requests: AtomicU64::new(0),
    });
    let mut table = shared.legacy.table();
    // Sessions whose client hung up go as new ones come.
    table.retain(|_, s| !s.tx.is_closed());
    table.insert(id, session);
    drop(table);
    Stats::add(&shared.stats.legacy_sse_streams, 1);
    http::sse_response(rx, None)
}

/// The session a POST names in its query (`session_id=<hex>`).
fn session_id(query: Option<&str>) -> Option<u64> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("session_id="))
        .and_then(|id| u64::from_str_radix(id, 16).ok())
}

async fn post(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let id = session_id(req.uri().query());
    let Some((id, session)) = id.and_then(|id| Some((id, shared.legacy.find(id)?))) else {
        return http::unknown_session(shared, http::text(404, "unknown session\n"));
    };
    let (parts, body) = req.into_parts();
    let (bytes, admission) = match http::read_admitted(shared, &parts.headers, body).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let origin = Origin::Http {
        headers: Headers {
            version: None,
            method: None,
            name: None,
            params: &[],
        },
        session: session.version(),
    };
    match shared.handle(&bytes, origin) {
        Handled::Nothing | Handled::Cancel(_) => {}
        Handled::Refused(refused) => return http::json(refused.status, refused.message),
        Handled::Single(job) => {
            let every = shared.cfg.legacy_sse_end_every;
            let counted = !job.is_initialize() && every > 0;
            if counted && (session.requests.fetch_add(1, Relaxed) + 1) % every == 0 {
                // The stream ends once the session's running requests have answered.
                shared.legacy.forget(id);
                Stats::add(&shared.stats.legacy_sse_ended, 1);
                job.abandon();
            } else {
                tokio::spawn(single(Arc::clone(shared), session, job, admission));
            }
        }
        Handled::Batch(batch) => {
            tokio::spawn(answer_batch(Arc::clone(shared), session, batch, admission));
        }
    }
    http::accepted()
}

/// Runs one request and writes its answer on the session's stream (progress before it).
async fn single(shared: Arc<Shared>, session: Arc<Session>, job: Job, admission: Admission) {
    let sink = Sink::new(session.tx.clone(), true, Arc::clone(&shared.stats));
    let done = shared.run(job, Some(&sink)).await;
    drop(admission);
    if let Some(v) = done.initialized {
        session.agreed(v);
    }
    // Among other answers a cut answer is a whole event, so that it spoils no other.
    let bytes = done.shaped.sse(false);
    if !bytes.is_empty() {
        sink.answer(bytes).await;
    }
}

/// A batch's answers, one event each, on the session's stream.
async fn answer_batch(
    shared: Arc<Shared>,
    session: Arc<Session>,
    batch: Batch,
    admission: Admission,
) {
    let sink = Arc::new(Sink::new(
        session.tx.clone(),
        true,
        Arc::clone(&shared.stats),
    ));
    let mut answers = batch.start(&shared, Some(Arc::clone(&sink)));
    while let Some(answer) = answers.next().await {
        let bytes = answer.sse(false);
        if !bytes.is_empty() && session.tx.send(Bytes::from(bytes)).await.is_err() {
            return;
        }
    }
    drop(admission);
    sink.send_late().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_id_is_read_from_the_query() {
        assert_eq!(session_id(Some("session_id=1f")), Some(0x1f));
        assert_eq!(session_id(Some("a=b&session_id=2")), Some(2));
        assert_eq!(session_id(Some("session_id=zz")), None);
        assert_eq!(session_id(None), None);
    }
}
