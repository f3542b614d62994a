//! Pairing by id, never by position: the pending map, the window of ended ids, and the
//! classification of every incoming message and every unpaired end, as docs/metrics.md defines.

mod answers;
mod input;
mod ledger;

pub use answers::{AnswerRules, OutputSchema, ToolErrors, ValidateOutput};
pub use input::InputCover;
pub use ledger::{Applied, Ledger};

use crate::jsonrpc::{self, DecodeError, Decoded, Id, Message, ResponseId};
use crate::metrics::{AskedKind, Counters, FlowStats, Stats};
use crate::transport::Cancelled;
use rustc_hash::FxHashMap;
use serde_json::value::RawValue;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The error a server answers a protocol version it does not serve with (`version_rejected`).
const UNSUPPORTED_VERSION: i64 = crate::protocol::codes::UNSUPPORTED_VERSION;

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

/// The iteration of a scenario that waits on a request (a worker's own numbering).
pub type Owner = std::num::NonZeroU32;

/// What a request is for: the operation it counts under (ops.csv), the scenario iteration
/// waiting on it, if one is, and whether it carries its own id as progress token
/// (`params._meta.progressToken`), so that progress for it is followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    pub op: u16,
    pub owner: Option<Owner>,
    /// One request of a call of several (a task's, an input round's): no latency of its
    /// own is recorded; its owner records the whole call's ([`Correlator::record_call`]).
    pub part_of_call: bool,
    pub progress: bool,
}

/// How a request an iteration waits on ended: answered (with the answer's `result` or
/// `error`, for captures and conditions) or ended without an answer.
#[derive(Debug)]
pub enum Outcome {
    Answered {
        class: Class,
        result: Option<Box<RawValue>>,
        error: Option<Box<RawValue>>,
    },
    Ended(End),
}

/// An owned request that ended, for its iteration to take up.
#[derive(Debug)]
pub struct Settled {
    pub owner: Owner,
    pub id: Id,
    pub outcome: Outcome,
}

/// How one incoming message was counted: one row of the first table of docs/metrics.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Ok,
    /// A result `input_required` asking for a kind of input nothing answers (its kind).
    InputUnanswered(AskedKind),
    /// A result with `isError: true` (`tool_errors`), unless `--tool-errors ok`.
    ToolError,
    /// A result whose `structuredContent` breaks its tool's `outputSchema`
    /// (`output_schema_violations`).
    OutputSchemaViolation,
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
    /// Whether a message of this class paired (and so ended) a pending request.
    pub fn pairs(self) -> bool {
        matches!(
            self,
            Class::Ok
                | Class::InputUnanswered(_)
                | Class::ToolError
                | Class::OutputSchemaViolation
                | Class::Error
                | Class::BothResultError
                | Class::InvalidJsonrpc
        )
    }

    /// Whether a message of this class answered with a `result` alone (ok or not).
    pub fn is_result(self) -> bool {
        matches!(
            self,
            Class::Ok | Class::ToolError | Class::OutputSchemaViolation
        )
    }
}

/// How a request ended without a response: one row of the second table of docs/metrics.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    Missing,
    Timeout,
    Http429,
    Http503,
    HttpOther,
    /// Refused 401 or 403: `http_other`, and `http_401` or `http_403`.
    Http401,
    Http403,
    Transport,
    /// Timed out before any byte of it was written.
    ExpiredUnsent,
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

/// What is known of one id the run issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Never used (a ring slot only).
    Empty,
    Pending,
    /// Paired by a response; another response with this id is a `duplicate_id`.
    Paired,
    /// Ended unpaired (timed out, cancelled, missing, refused); a response now is `late`.
    Unpaired,
}

/// One id's record; times are nanoseconds since the correlator's epoch.
#[derive(Clone, Copy, Debug)]
struct Record {
    due: u64,
    written: u64,
    deadline: u64,
    /// A call with a progress token: the highest `progress` reported so far.
    progress_high: f64,
    owner: Option<Owner>,
    part_of_call: bool,
    /// A call with a progress token: notifications for it while it was pending.
    progress_seen: u32,
    op: u16,
    state: State,
    /// It carries its id as progress token.
    progress: bool,
}

const EMPTY: Record = Record {
    due: 0,
    written: 0,
    deadline: 0,
    progress_high: 0.0,
    owner: None,
    part_of_call: false,
    progress_seen: 0,
    op: 0,
    state: State::Empty,
    progress: false,
};

/// Integer ids, direct-mapped by `id & mask`: the run issues them in sequence, so a slot is
/// reused only after `len` newer ids, which makes the ring its own window of ended ids. A
/// slot still pending when its index comes round again (a straggler) gives its record up to
/// the correlator's `stragglers`, so one slow request does not double the ring; the ring
/// grows only when half its slots are pending at once.
#[derive(Debug)]
struct Ring {
    ids: Vec<i64>,
    records: Vec<Record>,
    mask: usize,
}

impl Ring {
    fn new(len: usize) -> Self {
        let len = len.next_power_of_two();
        Ring {
            ids: vec![0; len],
            records: vec![EMPTY; len],
            mask: len - 1,
        }
    }

    /// The slot holding `id`, if it does.
    #[inline]
    fn slot(&self, id: i64) -> Option<usize> {
        let i = id as usize & self.mask;
        (self.ids[i] == id && self.records[i].state != State::Empty).then_some(i)
    }

    /// Places a record; returns the pending one it displaces, if any.
    #[inline]
    fn insert(&mut self, id: i64, rec: Record) -> Option<(i64, Record)> {
        let i = id as usize & self.mask;
        let displaced =
            (self.records[i].state == State::Pending).then(|| (self.ids[i], self.records[i]));
        self.ids[i] = id;
        self.records[i] = rec;
        displaced
    }

    fn len(&self) -> usize {
        self.mask + 1
    }

    /// Doubles the ring, keeping every record that still has a slot (pending ones first:
    /// distinct slots before, distinct slots after).
    fn grow(&mut self) {
        let old = std::mem::replace(self, Ring::new(self.len() * 2));
        for pass in [true, false] {
            for (id, rec) in old.ids.iter().zip(&old.records) {
                if (rec.state == State::Pending) == pass && rec.state != State::Empty {
                    let i = *id as usize & self.mask;
                    if self.records[i].state == State::Empty {
                        self.ids[i] = *id;
                        self.records[i] = *rec;
                    }
                }
            }
        }
    }
}

/// Ids kept in a map, each kind with its own window of ended ids: string ids (rare: probes
/// and servers that echo strings) and the ring's stragglers.
#[derive(Debug)]
struct Kept<K> {
    records: FxHashMap<K, Record>,
    ended: VecDeque<K>,
}

impl<K> Default for Kept<K> {
    fn default() -> Self {
        Kept {
            records: FxHashMap::default(),
            ended: VecDeque::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Kept<K> {
    /// Remembers `key` as ended, forgetting the oldest ended one past `window`.
    fn remember_ended(&mut self, key: &K, window: usize) {
        if self.ended.len() >= window
            && let Some(old) = self.ended.pop_front()
            && self
                .records
                .get(&old)
                .is_some_and(|r| r.state != State::Pending)
        {
            self.records.remove(&old);
        }
        self.ended.push_back(key.clone());
    }

    fn pending(&self) -> impl Iterator<Item = &K> {
        self.records
            .iter()
            .filter(|(_, r)| r.state == State::Pending)
            .map(|(k, _)| k)
    }
}

/// A request the server sent the client (2025-11-25: `elicitation/create`,
/// `sampling/createMessage`, `roots/list`), kept for the calls to answer
/// ([`Correlator::keep_server_requests`]).
#[derive(Debug)]
pub struct ServerRequest {
    pub id: Id,
    pub method: Box<str>,
    /// The task it is about (`params._meta["io.modelcontextprotocol/related-task"].taskId`).
    pub related_task: Option<Box<str>>,
    /// Its params, for the answer that fills an elicitation's `requestedSchema`.
    pub params: Option<Box<RawValue>>,
}

/// One worker's correlator. Not shared: each worker owns one and merges its [`Stats`].
#[derive(Debug)]
pub struct Correlator {
    epoch: Instant,
    ring: Ring,
    named: Kept<Box<str>>,
    /// Integer ids still pending when their ring slot came round again.
    stragglers: Kept<i64>,
    ended_window: usize,
    pending: usize,
    /// Deadlines in registration order; nearly always nondecreasing, so a FIFO suffices...
    deadlines: VecDeque<(u64, Id)>,
    /// ...and the few that arrive out of order wait here.
    early_deadlines: BinaryHeap<Reverse<(u64, Id)>>,
    stats: Stats,
    /// Owned requests that ended since the owner last looked ([`Correlator::take_settled`]).
    settled: Vec<Settled>,
    /// Requests from the server, when someone answers them.
    server_requests: Option<Vec<ServerRequest>>,
    /// 2026-07-28: results are read for an `input_required` this cover leaves unanswered.
    input_cover: Option<InputCover>,
    /// How results are read: tool errors, output schemas.
    rules: Arc<AnswerRules>,
    /// Per operation with an output schema: results seen, for `--validate-output sample:N`.
    results_seen: Vec<u32>,
}

impl Default for Correlator {
    fn default() -> Self {
        Self::new(DEFAULT_ENDED_WINDOW)
    }
}

impl Correlator {
    /// A correlator that remembers at least the last `ended_window` ended ids.
    pub fn new(ended_window: usize) -> Self {
        let ended_window = ended_window.max(1);
        Correlator {
            epoch: Instant::now(),
            ring: Ring::new(ended_window),
            named: Kept::default(),
            stragglers: Kept::default(),
            ended_window,
            pending: 0,
            deadlines: VecDeque::new(),
            early_deadlines: BinaryHeap::new(),
            stats: Stats::default(),
            settled: Vec::new(),
            server_requests: None,
            input_cover: None,
            rules: Arc::default(),
            results_seen: Vec::new(),
        }
    }

    /// Reads results by `rules` from now on (tool errors, output schemas).
    pub fn with_rules(mut self, rules: Arc<AnswerRules>) -> Self {
        self.rules = rules;
        self
    }

    /// From now on, a result `input_required` asking for a kind `cover` does not answer
    /// ends its request as `input_unanswered` (2026-07-28, docs/metrics.md "Input nobody
    /// answers").
    pub fn read_input_required(&mut self, cover: InputCover) {
        self.input_cover = Some(cover);
    }

    #[inline]
    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    #[inline]
    fn record(&self, id: &Id) -> Option<&Record> {
        match id {
            Id::Num(n) => match self.ring.slot(*n) {
                Some(i) => Some(&self.ring.records[i]),
                None => self.stragglers.records.get(n),
            },
            Id::Str(s) => self.named.records.get(s),
        }
    }

    #[inline]
    fn record_mut(&mut self, id: &Id) -> Option<&mut Record> {
        match id {
            Id::Num(n) => match self.ring.slot(*n) {
                Some(i) => Some(&mut self.ring.records[i]),
                None => self.stragglers.records.get_mut(n),
            },
            Id::Str(s) => self.named.records.get_mut(s),
        }
    }

    /// Registers a request of operation 0 that no iteration waits on.
    #[inline]
    pub fn register(&mut self, id: Id, sent: Sent) -> Result<(), Collision> {
        self.register_tagged(id, sent, Tag::default())
    }

    /// Registers a request about to be written, counted under `tag.op`. Refused when `id` is
    /// still pending.
    #[inline]
    pub fn register_tagged(&mut self, id: Id, sent: Sent, tag: Tag) -> Result<(), Collision> {
        if matches!(self.record(&id), Some(r) if r.state == State::Pending) {
            return Err(Collision(id));
        }
        let rec = Record {
            due: self.ns(sent.due),
            written: self.ns(sent.written),
            deadline: self.ns(sent.deadline),
            progress_high: 0.0,
            owner: tag.owner,
            part_of_call: tag.part_of_call,
            progress_seen: 0,
            op: tag.op,
            state: State::Pending,
            progress: tag.progress,
        };
        match &id {
            Id::Num(n) => {
                if self.pending >= self.ring.len() / 2 {
                    self.ring.grow();
                }
                if let Some((straggler, rec)) = self.ring.insert(*n, rec) {
                    self.stragglers.records.insert(straggler, rec);
                }
            }
            Id::Str(s) => {
                self.named.records.insert(s.clone(), rec);
            }
        }
        match self.deadlines.back() {
            Some((last, _)) if *last > rec.deadline => {
                self.early_deadlines.push(Reverse((rec.deadline, id)))
            }
            _ => self.deadlines.push_back((rec.deadline, id)),
        }
        self.pending += 1;
        let c = &mut self.stats.counters;
        c.in_flight_max = c.in_flight_max.max(self.pending as u64);
        self.stats.op_mut(tag.op).counters.requests += 1;
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
        let mut op = None;
        let class = match msg {
            Err(_) => Class::ParseError,
            Ok(Message::ServerMessage { method, id, params }) => {
                if method == "notifications/progress" {
                    self.progress(params, now);
                } else if let (Some(id), Some(kept)) = (id, &mut self.server_requests) {
                    kept.push(ServerRequest {
                        id,
                        related_task: params.and_then(related_task),
                        method: method.as_ref().into(),
                        params: params.map(ToOwned::to_owned),
                    });
                }
                Class::ServerMessage
            }
            Ok(Message::Response(r)) => match &r.id {
                ResponseId::Null => Class::NullId,
                ResponseId::Foreign(_) => Class::UnknownId,
                ResponseId::Id(id) => {
                    let (class, of) = self.pair(id, &r, now);
                    op = of;
                    class
                }
            },
        };
        // A message about a request counts under its operation (the step's figure is the
        // sum, [`Stats::fold_ops`]); the rest belongs to no operation.
        let counters = match op {
            Some(op) => &mut self.stats.op_mut(op).counters,
            None => &mut self.stats.counters,
        };
        count_class(counters, class);
        class
    }

    /// Pairs a response with a pending `id`: its class, and the operation it counts under
    /// when the id is known.
    #[inline]
    fn pair(&mut self, id: &Id, r: &jsonrpc::Response<'_>, now: Instant) -> (Class, Option<u16>) {
        let now_ns = self.ns(now);
        let Some(rec) = self.record_mut(id) else {
            return (Class::UnknownId, None);
        };
        let op = rec.op;
        match rec.state {
            State::Pending => {}
            State::Paired => return (Class::DuplicateId, Some(op)),
            State::Unpaired => return (Class::Late, Some(op)),
            State::Empty => return (Class::UnknownId, None),
        }
        rec.state = State::Paired;
        let (due, written, owner, part) = (rec.due, rec.written, rec.owner, rec.part_of_call);
        let progress = rec.progress.then_some(rec.progress_seen);
        self.pending -= 1;
        self.remember_ended(id);
        if let Some(seen) = progress {
            self.progress_call_ended(seen);
        }
        let latency = Duration::from_nanos(now_ns.saturating_sub(due));
        let service = Duration::from_nanos(now_ns.saturating_sub(written));
        let class = match (r.result, r.error.is_some()) {
            _ if !r.well_formed => Class::InvalidJsonrpc,
            (Some(result), false) => match self.input_cover.and_then(|c| c.unanswered(result)) {
                Some(kind) => Class::InputUnanswered(kind),
                None => self.judge_result(op, r, result),
            },
            (None, true) => Class::Error,
            (Some(_), true) => Class::BothResultError,
            (None, false) => Class::InvalidJsonrpc,
        };
        let code = if class == Class::Error {
            r.error_code()
        } else {
            None
        };
        let o = self.stats.op_mut(op);
        if !part {
            o.latency.record(latency);
            o.service_latency.record(service);
        }
        o.counters.responses += 1;
        if let Some(code) = code {
            *o.counters.errors_by_code.entry(code).or_default() += 1;
            o.counters.version_rejected += u64::from(code == UNSUPPORTED_VERSION);
        }
        if let Some(owner) = owner {
            self.settled.push(Settled {
                owner,
                id: id.clone(),
                outcome: Outcome::Answered {
                    class,
                    result: r.result.map(ToOwned::to_owned),
                    error: r.error.map(ToOwned::to_owned),
                },
            });
        }
        (class, Some(op))
    }

    /// The class of a well-formed `result` of operation `op`: a tool error (unless they count
    /// ok), a `structuredContent` its tool's schema refuses (when checked), else `ok`. The
    /// first of each keeps its text under the operation.
    #[inline]
    fn judge_result(&mut self, op: u16, r: &jsonrpc::Response<'_>, result: &RawValue) -> Class {
        if r.is_tool_error() {
            if self.rules.tool_errors_ok {
                return Class::Ok;
            }
            let o = self.stats.op_mut(op);
            if o.tool_error.is_none() {
                o.tool_error = Some(answers::tool_error_text(result));
            }
            return Class::ToolError;
        }
        let Some((schema, every)) = self.rules.schema(op) else {
            return Class::Ok;
        };
        if every > 1 {
            let i = op as usize;
            if i >= self.results_seen.len() {
                self.results_seen.resize(i + 1, 0);
            }
            self.results_seen[i] = self.results_seen[i].wrapping_add(1);
            if !self.results_seen[i].is_multiple_of(every) {
                return Class::Ok;
            }
        }
        if self.stats.op_mut(op).output_schema_violation.is_some() {
            // The first violation is kept: later ones are counted, not described.
            return if schema.conforms(result) {
                Class::Ok
            } else {
                Class::OutputSchemaViolation
            };
        }
        match schema.check(result) {
            Ok(()) => Class::Ok,
            Err(why) => {
                self.stats.op_mut(op).output_schema_violation = Some(answers::one_line(&why));
                Class::OutputSchemaViolation
            }
        }
    }

    /// Ends a pending request without a response. Returns false (and counts nothing) when
    /// `id` was not pending.
    pub fn end(&mut self, id: &Id, end: End) -> bool {
        let (op, owner, progress) = match self.record_mut(id) {
            Some(rec) if rec.state == State::Pending => {
                rec.state = State::Unpaired;
                (rec.op, rec.owner, rec.progress.then_some(rec.progress_seen))
            }
            _ => return false,
        };
        self.pending -= 1;
        self.remember_ended(id);
        count_end(&mut self.stats.op_mut(op).counters, end);
        if let Some(seen) = progress {
            self.progress_call_ended(seen);
            if end == End::Missing && seen > 0 {
                self.stats.counters.progress_then_missing += 1;
            }
        }
        if let Some(owner) = owner {
            self.settled.push(Settled {
                owner,
                id: id.clone(),
                outcome: Outcome::Ended(end),
            });
        }
        true
    }

    /// Counts one `notifications/progress` (docs/metrics.md, "Progress"): for a pending call
    /// that asked for it, its first one's delay and whether it went down; otherwise the
    /// anomaly it is.
    fn progress(&mut self, params: Option<&RawValue>, now: Instant) {
        let now_ns = self.ns(now);
        self.stats.counters.progress_notifications += 1;
        let note = params.and_then(|p| serde_json::from_str::<ProgressNote>(p.get()).ok());
        let rec = note
            .as_ref()
            .and_then(|n| Some((n.progress, self.record_mut(&n.token)?)));
        let heard = match rec {
            Some((value, rec)) if rec.progress && rec.state == State::Pending => {
                let first = rec.progress_seen == 0;
                let up = first || value > rec.progress_high;
                rec.progress_seen = rec.progress_seen.saturating_add(1);
                if up {
                    rec.progress_high = value;
                }
                Heard::Progress {
                    first_after: first.then(|| now_ns.saturating_sub(rec.due)),
                    down: !up,
                }
            }
            Some((_, rec)) if rec.progress && rec.state == State::Paired => Heard::AfterResult,
            // A call given up on (timed out, refused, cut off) may still hear of its work.
            Some((_, rec)) if rec.progress && rec.state == State::Unpaired => Heard::GivenUp,
            _ => Heard::UnknownToken,
        };
        let c = &mut self.stats.counters;
        match heard {
            Heard::Progress { first_after, down } => {
                c.progress_down += u64::from(down);
                if let Some(ns) = first_after {
                    self.stats.first_progress.record(Duration::from_nanos(ns));
                }
            }
            Heard::AfterResult => c.progress_after_result += 1,
            Heard::GivenUp => {}
            Heard::UnknownToken => c.progress_unknown_token += 1,
        }
    }

    /// A call with a progress token ended, having heard `seen` progress notifications.
    fn progress_call_ended(&mut self, seen: u32) {
        self.stats.counters.progress_calls += 1;
        let _ = self.stats.progress_per_call.record(u64::from(seen));
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
        let numbered = self.ring.ids.iter().zip(&self.ring.records);
        let ids: Vec<Id> = numbered
            .filter(|(_, r)| r.state == State::Pending)
            .map(|(id, _)| Id::Num(*id))
            .chain(self.stragglers.pending().map(|n| Id::Num(*n)))
            .chain(self.named.pending().map(|s| Id::Str(s.clone())))
            .collect();
        ids.iter().filter(|id| self.end(id, end)).count()
    }

    /// Ends every pending request whose deadline is at or before `now`, after `cancel` gave
    /// it up on the wire: as `timeouts` when some of it was written, as `expired_unsent`
    /// when it was withdrawn unsent. Returns how many expired.
    pub fn expire(&mut self, now: Instant, mut cancel: impl FnMut(&Id) -> Cancelled) -> usize {
        let now = self.ns(now);
        let mut n = 0;
        let mut give_up = |c: &mut Self, id: &Id| {
            let end = match cancel(id) {
                Cancelled::Sent => End::Timeout,
                Cancelled::Unsent => End::ExpiredUnsent,
            };
            c.end(id, end);
        };
        // The FIFO: drop entries of requests that already ended (so it stays about as long as
        // the span of requests in flight), stop at the first pending one not yet due.
        while let Some((deadline, id)) = self.deadlines.front() {
            let (deadline, live) = (*deadline, self.is_pending_until(id, *deadline));
            if live && deadline > now {
                break;
            }
            let (_, id) = self.deadlines.pop_front().expect("peeked");
            if live {
                give_up(self, &id);
                n += 1;
            }
        }
        while let Some(Reverse((deadline, _))) = self.early_deadlines.peek() {
            if *deadline > now {
                break;
            }
            let Reverse((deadline, id)) = self.early_deadlines.pop().expect("peeked");
            if self.is_pending_until(&id, deadline) {
                give_up(self, &id);
                n += 1;
            }
        }
        n
    }

    /// Whether `id` is registered and not yet ended.
    pub fn is_pending(&self, id: &Id) -> bool {
        matches!(self.record(id), Some(r) if r.state == State::Pending)
    }

    /// Whether `id` is pending under the registration that set this deadline.
    fn is_pending_until(&self, id: &Id, deadline: u64) -> bool {
        matches!(self.record(id), Some(r) if r.state == State::Pending && r.deadline == deadline)
    }

    /// The earliest deadline still queued (possibly of a request already ended).
    pub fn next_deadline(&self) -> Option<Instant> {
        let fifo = self.deadlines.front().map(|(d, _)| *d);
        let early = self.early_deadlines.peek().map(|Reverse((d, _))| *d);
        let d = match (fifo, early) {
            (Some(f), Some(e)) => f.min(e),
            (f, e) => f.or(e)?,
        };
        Some(self.epoch + Duration::from_nanos(d))
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

    /// Ends the pending attempt `id` as `end` (`http_other`: its session was gone; `http_401`:
    /// its token was refused) and registers its retry under the same id, tag and due time,
    /// written `now` with the attempt's timeout (docs/metrics.md, "Retries"): a new request,
    /// in `requests`, whose owner waits on it as on the attempt (so it is not told of the
    /// attempt's end). False (nothing counted) when `id` was not pending.
    pub fn retry(&mut self, id: &Id, now: Instant, end: End) -> bool {
        let now_ns = self.ns(now);
        let (op, progress, deadline) = match self.record_mut(id) {
            Some(rec) if rec.state == State::Pending => {
                let timeout = rec.deadline.saturating_sub(rec.written);
                let seen = rec.progress.then_some(rec.progress_seen);
                rec.written = now_ns;
                rec.deadline = now_ns + timeout;
                rec.progress_seen = 0;
                rec.progress_high = 0.0;
                (rec.op, seen, rec.deadline)
            }
            _ => return false,
        };
        if let Some(seen) = progress {
            self.progress_call_ended(seen);
        }
        let counters = &mut self.stats.op_mut(op).counters;
        count_end(counters, end);
        counters.requests += 1;
        self.early_deadlines.push(Reverse((deadline, id.clone())));
        true
    }

    /// The pending request `id` was written only at `at` (held by its transport until then):
    /// its service latency runs from there.
    pub fn written(&mut self, id: &Id, at: Instant) {
        let at = self.ns(at);
        if let Some(rec) = self.record_mut(id).filter(|r| r.state == State::Pending) {
            rec.written = rec.written.max(at);
        }
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

    /// The measurements so far, the step's totals included (a copy: the correlator counts
    /// each request under its operation only).
    pub fn stats(&self) -> Stats {
        self.stats.clone().fold_ops()
    }

    /// Hands over the owned requests that ended since the last call.
    pub fn take_settled(&mut self, into: &mut Vec<Settled>) {
        into.append(&mut self.settled);
    }

    /// From now on, requests from the server are kept for [`Correlator::take_server_requests`]
    /// (they are still counted as `server_messages`).
    pub fn keep_server_requests(&mut self) {
        self.server_requests.get_or_insert_with(Vec::new);
    }

    /// Counts `id`, just ended unanswered by a refusal that said -32022, under its operation
    /// as `version_rejected` (of the end it had).
    pub fn version_rejected(&mut self, id: &Id) {
        if let Some(op) = self.record(id).map(|r| r.op) {
            self.stats.op_mut(op).counters.version_rejected += 1;
        }
    }

    /// Counts a request for input from the server that was answered with an error for want
    /// of a canned answer (`input_refused`, by kind).
    pub fn input_refused(&mut self, kind: AskedKind) {
        let c = &mut self.stats.counters;
        c.input_refused += 1;
        c.input_refused_by_kind.count(kind);
    }

    /// Hands over the requests from the server kept since the last call.
    pub fn take_server_requests(&mut self, into: &mut Vec<ServerRequest>) {
        if let Some(kept) = &mut self.server_requests {
            into.append(kept);
        }
    }

    /// Records the latency of a whole call of several requests under its operation: from
    /// `due` and from `written` (its first request's) to `now`.
    pub fn record_call(&mut self, op: u16, due: Instant, written: Instant, now: Instant) {
        let o = self.stats.op_mut(op);
        o.latency.record(now.saturating_duration_since(due));
        o.service_latency
            .record(now.saturating_duration_since(written));
    }

    /// The measurements of calls of several requests (tasks, input rounds) so far.
    pub fn flow_stats(&mut self) -> &mut FlowStats {
        self.stats.flows_mut()
    }

    /// Hands over the measurements so far and starts afresh (pending requests stay pending).
    pub fn take_stats(&mut self) -> Stats {
        let mut fresh = Stats::default();
        fresh.counters.in_flight_max = self.pending as u64;
        std::mem::replace(&mut self.stats, fresh).fold_ops()
    }

    /// Integer ids are remembered by the ring, stragglers and string ids by their own window.
    #[inline]
    fn remember_ended(&mut self, id: &Id) {
        match id {
            Id::Num(n) => {
                if !self.stragglers.records.is_empty()
                    && self.ring.slot(*n).is_none()
                    && self.stragglers.records.contains_key(n)
                {
                    self.stragglers.remember_ended(n, self.ended_window);
                }
            }
            Id::Str(s) => self.named.remember_ended(s, self.ended_window),
        }
    }
}

/// Counts one message of `class` under its column.
#[inline]
fn count_class(c: &mut Counters, class: Class) {
    match class {
        Class::Ok => c.ok += 1,
        Class::InputUnanswered(kind) => {
            c.input_unanswered += 1;
            c.input_unanswered_by_kind.count(kind);
        }
        Class::ToolError => c.tool_errors += 1,
        Class::OutputSchemaViolation => c.output_schema_violations += 1,
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
}

/// Counts one unanswered end under its column.
#[inline]
fn count_end(c: &mut Counters, end: End) {
    match end {
        End::Missing => c.missing += 1,
        End::Timeout => c.timeouts += 1,
        End::Http429 => c.http_429 += 1,
        End::Http503 => c.http_503 += 1,
        End::HttpOther => c.http_other += 1,
        End::Http401 => {
            c.http_other += 1;
            c.http_401 += 1;
        }
        End::Http403 => {
            c.http_other += 1;
            c.http_403 += 1;
        }
        End::Transport => c.transport_errors += 1,
        End::ExpiredUnsent => c.expired_unsent += 1,
    }
}

/// What a progress notification was about.
enum Heard {
    /// A pending call that asked for progress: nanoseconds from its due time when this is its
    /// first, and whether the value failed to rise.
    Progress {
        first_after: Option<u64>,
        down: bool,
    },
    AfterResult,
    GivenUp,
    UnknownToken,
}

/// The members of a progress notification's params that are followed.
#[derive(serde::Deserialize)]
struct ProgressNote {
    #[serde(rename = "progressToken")]
    token: Id,
    progress: f64,
}

fn is_non_null_response(m: &Message<'_>) -> bool {
    matches!(m, Message::Response(r) if !r.id.is_null())
}

/// The task a server request is about: `_meta["io.modelcontextprotocol/related-task"].taskId`.
fn related_task(params: &RawValue) -> Option<Box<str>> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "io.modelcontextprotocol/related-task")]
        related: Option<Related>,
    }
    #[derive(serde::Deserialize)]
    struct Related {
        #[serde(rename = "taskId")]
        task_id: Box<str>,
    }
    let p: Params = serde_json::from_str(params.get()).ok()?;
    Some(p.meta?.related?.task_id)
}
