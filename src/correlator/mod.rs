//! Pairing by id, never by position: the pending map, the window of ended ids, and the
//! classification of every incoming message and every unpaired end, as METRICS.md defines.

use crate::jsonrpc::{self, DecodeError, Decoded, Id, Message};
use crate::metrics::Stats;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// How many ended ids are remembered by default, to tell `duplicate_id` and `late` from
/// `unknown_id`. Older ids are forgotten; a response for one then counts as `unknown_id`.
pub const DEFAULT_ENDED_WINDOW: usize = 1 << 16;

/// When a registered request was due, written, and when it times out.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    /// When it was due to be sent: the write time in a closed loop, the scheduled arrival in
    /// an open loop. Pairing latency is measured from here.
    pub due: Instant,
    /// When it was actually written; the uncorrected (service) latency starts here.
    pub written: Instant,
    /// When it counts as `timeouts` if still unanswered.
    pub deadline: Instant,
}

/// How one incoming message was counted: one row of the first table of METRICS.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Ok,
    Error,
    BothResultError,
    InvalidJsonrpc,
    DuplicateId,
    Late,
    UnknownId,
    NullId,
    ServerMessage,
    ParseError,
}

impl Class {
    /// The counter (CSV column) this class increments.
    pub fn counter_name(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::Error => "errors",
            Class::BothResultError => "both_result_error",
            Class::InvalidJsonrpc => "invalid_jsonrpc",
            Class::DuplicateId => "duplicate_id",
            Class::Late => "late",
            Class::UnknownId => "unknown_id",
            Class::NullId => "null_id",
            Class::ServerMessage => "server_messages",
            Class::ParseError => "parse_errors",
        }
    }

    /// Whether a message of this class paired (and so ended) a pending request.
    pub fn pairs(self) -> bool {
        matches!(
            self,
            Class::Ok | Class::Error | Class::BothResultError | Class::InvalidJsonrpc
        )
    }
}

/// How a request ended without a response: one row of the second table of METRICS.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    Missing,
    Timeout,
    Http429,
    Http503,
    HttpOther,
    Transport,
}

/// A register call that was refused: the id is already pending.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("id {0} is already pending")]
pub struct Collision(pub Id);

/// What one JSON text (a body, a line, an SSE event's data) held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ingested {
    /// It was a JSON array.
    pub batch: bool,
    /// Messages classified (a parse error of the whole text counts as one).
    pub messages: usize,
    /// Responses with a non-null id, paired or not (for `response_count_mismatch`).
    pub non_null_responses: usize,
}

#[derive(Debug)]
enum Entry {
    Pending(Sent),
    /// Paired by a response; another response with this id is a `duplicate_id`.
    Paired,
    /// Ended unpaired (timed out, cancelled, missing, refused); a response now is `late`.
    Unpaired,
}

/// One worker's correlator. Not shared: each worker owns one and merges its [`Stats`].
#[derive(Debug)]
pub struct Correlator {
    entries: FxHashMap<Id, Entry>,
    pending: usize,
    deadlines: BinaryHeap<Reverse<(Instant, Id)>>,
    ended: VecDeque<Id>,
    ended_window: usize,
    stats: Stats,
}

impl Default for Correlator {
    fn default() -> Self {
        Self::new(DEFAULT_ENDED_WINDOW)
    }
}

impl Correlator {
    /// A correlator that remembers the last `ended_window` ended ids.
    pub fn new(ended_window: usize) -> Self {
        Correlator {
            entries: FxHashMap::default(),
            pending: 0,
            deadlines: BinaryHeap::new(),
            ended: VecDeque::with_capacity(ended_window.min(1 << 20)),
            ended_window: ended_window.max(1),
            stats: Stats::default(),
        }
    }

    /// Registers a request about to be written. Refused when `id` is still pending.
    #[inline]
    pub fn register(&mut self, id: Id, sent: Sent) -> Result<(), Collision> {
        match self.entries.entry(id) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                if matches!(e.get(), Entry::Pending(_)) {
                    return Err(Collision(e.key().clone()));
                }
                // A reused id: its old end is forgotten, its window slot stays (see evict).
                e.insert(Entry::Pending(sent));
                self.deadlines
                    .push(Reverse((sent.deadline, e.key().clone())));
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                self.deadlines
                    .push(Reverse((sent.deadline, v.key().clone())));
                v.insert(Entry::Pending(sent));
            }
        }
        self.pending += 1;
        let c = &mut self.stats.counters;
        c.requests += 1;
        c.in_flight_max = c.in_flight_max.max(self.pending as u64);
        Ok(())
    }

    /// Classifies every message in one JSON text (single message or batch).
    pub fn ingest(&mut self, bytes: &[u8], now: Instant) -> Ingested {
        match jsonrpc::decode(bytes) {
            Ok(Decoded::Single(m)) => {
                let non_null = is_non_null_response(&m);
                self.classify(Ok(m), now);
                Ingested {
                    batch: false,
                    messages: 1,
                    non_null_responses: non_null as usize,
                }
            }
            Ok(Decoded::Batch(members)) => {
                let mut out = Ingested {
                    batch: true,
                    messages: members.len(),
                    non_null_responses: 0,
                };
                for raw in members {
                    let m = jsonrpc::decode_message(raw);
                    out.non_null_responses += m.as_ref().is_ok_and(is_non_null_response) as usize;
                    self.classify(m, now);
                }
                out
            }
            Err(e) => {
                self.classify(Err(e), now);
                Ingested {
                    batch: false,
                    messages: 1,
                    non_null_responses: 0,
                }
            }
        }
    }

    /// Counts one decoded message (or decode failure) and returns its class.
    pub fn classify(&mut self, msg: Result<Message<'_>, DecodeError>, now: Instant) -> Class {
        let class = match msg {
            Err(_) => Class::ParseError,
            Ok(Message::ServerMessage { .. }) => Class::ServerMessage,
            Ok(Message::Response(mut r)) => match r.id.take() {
                None => Class::NullId,
                Some(id) => self.pair(id, &r, now),
            },
        };
        let c = &mut self.stats.counters;
        match class {
            Class::Ok => c.ok += 1,
            Class::Error => c.errors += 1,
            Class::BothResultError => c.both_result_error += 1,
            Class::InvalidJsonrpc => c.invalid_jsonrpc += 1,
            Class::DuplicateId => c.duplicate_id += 1,
            Class::Late => c.late += 1,
            Class::UnknownId => c.unknown_id += 1,
            Class::NullId => c.null_id += 1,
            Class::ServerMessage => c.server_messages += 1,
            Class::ParseError => c.parse_errors += 1,
        }
        class
    }

    #[inline]
    fn pair(&mut self, id: Id, r: &jsonrpc::Response<'_>, now: Instant) -> Class {
        let Some(entry) = self.entries.get_mut(&id) else {
            return Class::UnknownId;
        };
        let sent = match entry {
            Entry::Pending(sent) => *sent,
            Entry::Paired => return Class::DuplicateId,
            Entry::Unpaired => return Class::Late,
        };
        *entry = Entry::Paired;
        self.pending -= 1;
        self.remember_ended(id);
        let s = &mut self.stats;
        s.latency.record(now.saturating_duration_since(sent.due));
        s.service_latency
            .record(now.saturating_duration_since(sent.written));
        s.counters.responses += 1;
        let class = match (r.result.is_some(), r.error.is_some()) {
            _ if !r.jsonrpc_ok => Class::InvalidJsonrpc,
            (true, false) => Class::Ok,
            (false, true) => Class::Error,
            (true, true) => Class::BothResultError,
            (false, false) => Class::InvalidJsonrpc,
        };
        if class == Class::Error
            && let Some(code) = r.error_code()
        {
            *s.counters.errors_by_code.entry(code).or_default() += 1;
        }
        class
    }

    /// Ends a pending request without a response. Returns false (and counts nothing) when
    /// `id` was not pending.
    pub fn end(&mut self, id: &Id, end: End) -> bool {
        let Some(entry) = self.entries.get_mut(id) else {
            return false;
        };
        if !matches!(entry, Entry::Pending(_)) {
            return false;
        }
        *entry = Entry::Unpaired;
        self.pending -= 1;
        self.remember_ended(id.clone());
        let c = &mut self.stats.counters;
        match end {
            End::Missing => c.missing += 1,
            End::Timeout => c.timeouts += 1,
            End::Http429 => c.http_429 += 1,
            End::Http503 => c.http_503 += 1,
            End::HttpOther => c.http_other += 1,
            End::Transport => c.transport_errors += 1,
        }
        true
    }

    /// Ends as `missing` every request of a closed exchange that is still pending; returns
    /// how many were.
    pub fn close_exchange<'a>(&mut self, ids: impl IntoIterator<Item = &'a Id>) -> usize {
        ids.into_iter()
            .filter(|id| self.end(id, End::Missing))
            .count()
    }

    /// Ends every pending request the same way (a child that exited, a drain that gave up).
    pub fn end_all(&mut self, end: End) -> usize {
        let ids: Vec<Id> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Pending(_)))
            .map(|(id, _)| id.clone())
            .collect();
        ids.iter().filter(|id| self.end(id, end)).count()
    }

    /// Ends as `timeouts` every pending request whose deadline is at or before `now`, calling
    /// `on_timeout` for each (to cancel it on the wire). Returns how many timed out.
    pub fn expire(&mut self, now: Instant, mut on_timeout: impl FnMut(&Id)) -> usize {
        let mut n = 0;
        while let Some(Reverse((deadline, _))) = self.deadlines.peek() {
            if *deadline > now {
                break;
            }
            let Some(Reverse((deadline, id))) = self.deadlines.pop() else {
                break;
            };
            let due_now =
                matches!(self.entries.get(&id), Some(Entry::Pending(s)) if s.deadline == deadline);
            if due_now && self.end(&id, End::Timeout) {
                on_timeout(&id);
                n += 1;
            }
        }
        n
    }

    /// The earliest deadline still queued (possibly of a request already ended).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((d, _))| *d)
    }

    /// Records a batch sent with `members` members.
    pub fn batch_sent(&mut self, members: usize) {
        self.stats.counters.batches += 1;
        let _ = self.stats.batch_size.record(members as u64);
    }

    /// Records the answer to a batch: `expected` requests (members with an id) were sent,
    /// `non_null_responses` came back. Counts `response_count_mismatch` when they differ.
    pub fn batch_answered(&mut self, expected: usize, non_null_responses: usize) {
        if expected != non_null_responses {
            self.stats.counters.response_count_mismatch += 1;
        }
    }

    /// Records a batch the server refused as a whole.
    pub fn batch_rejected(&mut self) {
        self.stats.counters.batch_rejected += 1;
    }

    /// Records a `Retry-After` value seen on a refusal.
    pub fn retry_after(&mut self, seconds: u64) {
        let c = &mut self.stats.counters;
        c.retry_after_max_s = c.retry_after_max_s.max(seconds);
    }

    /// Requests registered and not yet ended.
    pub fn in_flight(&self) -> usize {
        self.pending
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Hands over the measurements so far and starts afresh (pending requests stay pending).
    pub fn take_stats(&mut self) -> Stats {
        let mut fresh = Stats::default();
        fresh.counters.in_flight_max = self.pending as u64;
        std::mem::replace(&mut self.stats, fresh)
    }

    fn remember_ended(&mut self, id: Id) {
        if self.ended.len() == self.ended_window
            && let Some(old) = self.ended.pop_front()
            && let Some(Entry::Paired | Entry::Unpaired) = self.entries.get(&old)
        {
            self.entries.remove(&old);
        }
        self.ended.push_back(id);
    }
}

fn is_non_null_response(m: &Message<'_>) -> bool {
    matches!(m, Message::Response(r) if r.id.is_some())
}
