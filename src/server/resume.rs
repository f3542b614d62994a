//! SSE resumption played on purpose (2025-11-25, `sse_close_early`): every Nth answer stream
//! of a 2025-11-25 request is closed after a priming event with an id and a `retry:` advice,
//! the request runs on, and its answer is parked until a GET carrying that id in
//! `Last-Event-ID` (and the request's session) takes it; `sse_resume_refuse` answers such
//! GETs 405 instead, so the answers are never delivered.

use super::stats::Stats;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tokio::sync::oneshot;

/// The `retry:` advice (ms) of a stream closed early.
pub(crate) const RETRY_MS: u64 = 20;
/// Answers parked at most; past that, streams are answered whole rather than closed early.
const PARKED_MAX: usize = 10_000;

/// Where an answer parked for a resumption comes from.
pub(crate) type Parked = oneshot::Receiver<Bytes>;

pub(crate) struct Resumptions {
    every: u64,
    refuse: bool,
    /// SSE answer streams of 2025-11-25 requests so far.
    seen: AtomicU64,
    /// By event id: the session the stream belongs to, and its answer to come.
    parked: Mutex<HashMap<String, (Option<String>, Parked)>>,
}

/// What a GET with `Last-Event-ID` gets.
pub(crate) enum Resumed {
    /// The target does not offer GET streams (405).
    Refused,
    /// No answer parked under that id for that session (404).
    Unknown,
    /// The answer, once it is ready.
    Answer(Parked),
}

impl Resumptions {
    pub(crate) fn new(every: u64, refuse: bool) -> Self {
        Resumptions {
            every,
            refuse,
            seen: AtomicU64::new(0),
            parked: Mutex::new(HashMap::new()),
        }
    }

    /// Whether GETs on the endpoint are for resumptions (the knob is on).
    pub(crate) fn on(&self) -> bool {
        self.every > 0
    }

    /// For an SSE answer stream of a 2025-11-25 request: when it is one to close early, its
    /// event id and where its answer goes.
    pub(crate) fn close_early(
        &self,
        session: Option<&str>,
        stats: &Stats,
    ) -> Option<(String, oneshot::Sender<Bytes>)> {
        if !self.on() {
            return None;
        }
        let n = self.seen.fetch_add(1, Relaxed) + 1;
        if !n.is_multiple_of(self.every) {
            return None;
        }
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        if parked.len() >= PARKED_MAX {
            return None;
        }
        let event_id = format!("r{n}");
        let (tx, rx) = oneshot::channel();
        parked.insert(event_id.clone(), (session.map(str::to_owned), rx));
        Stats::add(&stats.sse_closed_early, 1);
        Some((event_id, tx))
    }

    /// A GET asking for the stream after `last_event_id`, in `session`.
    pub(crate) fn resume(
        &self,
        last_event_id: &str,
        session: Option<&str>,
        stats: &Stats,
    ) -> Resumed {
        if self.refuse {
            Stats::add(&stats.sse_resumptions_refused, 1);
            return Resumed::Refused;
        }
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        match parked.get(last_event_id) {
            Some((s, _)) if s.as_deref() == session => {
                let (_, answer) = parked.remove(last_event_id).expect("found above");
                Stats::add(&stats.sse_resumptions_served, 1);
                Resumed::Answer(answer)
            }
            _ => Resumed::Unknown,
        }
    }
}
