//! Calls of more than one request inside one worker (docs/metrics.md "Tasks and input
//! rounds"): a task created, polled with `tasks/get` at the server's interval, its result
//! taken (`tasks/result`, or inline where the revision puts it), cancelled with
//! `tasks/cancel` at the call's timeout; an `input_required` answer answered from the
//! profile's canned input and the call sent again with a new id; a 2025-11-25 task that
//! asks for input (`input_required`) has its result taken at once, and the requests the
//! server sends on that stream are answered from the same canned input. A call is addressed by its
//! slot and generation, so an answer that comes back for a call already ended is ignored.
//! Its whole latency, from the first send to the final answer, is its operation's.

use super::slots::Slots;
use super::worker::{Sending, next_id};
use crate::correlator::{Class, End, Outcome, Owner, Sent, ServerRequest, Settled, Tag};
use crate::jsonrpc::Id;
use crate::load::flow::{
    CallAnswer, FlowRules, Inline, OpFlow, Status, TaskMethod, TaskView, read_call, read_task,
    render_retry, result_agrees,
};
use crate::load::mix::MixOp;
use crate::metrics::FlowStats;
use crate::transport::{AnyTransport, McpHeaders, Outgoing, Transport};
use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// JSON-RPC's invalid params: what both revisions answer for a task id they do not hold.
const UNKNOWN_TASK: i64 = -32602;
/// Task ids remembered run-wide to see one given twice.
const TASK_IDS_KEPT: usize = 1 << 16;

/// The task ids the run's calls were given lately, shared by the workers: a server that
/// gives one id to two calls may give them to calls of different workers. Taken once per
/// task created, never per request.
#[derive(Debug, Default)]
pub(super) struct TaskIds(Mutex<Window>);

#[derive(Debug, Default)]
struct Window {
    seen: HashSet<Box<str>>,
    order: VecDeque<Box<str>>,
}

impl TaskIds {
    /// Remembers `id`; false when a call of the run was given it already.
    fn first_use(&self, id: &str) -> bool {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if w.seen.contains(id) {
            return false;
        }
        if w.order.len() == TASK_IDS_KEPT
            && let Some(old) = w.order.pop_front()
        {
            w.seen.remove(&old);
        }
        w.seen.insert(id.into());
        w.order.push_back(id.into());
        true
    }
}

/// What the request a call waits on is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    /// The call itself (its first send or a round's retry).
    Call,
    Poll,
    /// The poll after a terminal status, to see it stay.
    Confirm,
    Result,
}

/// A task a call was given.
struct LiveTask {
    id: Box<str>,
    created: Instant,
    ttl: Option<Duration>,
    poll: Duration,
    polls: u64,
    /// The terminal status a poll reported.
    terminal: Option<Status>,
    /// What that poll carried inline (2026-07-28).
    inline: Option<Inline>,
    mismatch_counted: bool,
}

/// One call in progress.
struct Call {
    /// The operation it counts under.
    op: u16,
    /// Its requests carry a progress token (the operation's `progress = true`).
    progress: bool,
    flow: OpFlow,
    /// How long each of its requests may wait for an answer: the entry's own timeout, else
    /// the load's.
    timeout: Duration,
    due: Instant,
    written: Instant,
    deadline: Instant,
    user: bool,
    /// The call as first sent, for the retries of input rounds.
    first: Option<Box<[u8]>>,
    headers: McpHeaders,
    rounds: u32,
    task: Option<LiveTask>,
    waiting: Option<(Id, Waiting)>,
    /// When the next poll is due.
    poll_at: Option<Instant>,
    /// Past its timeout with a request in flight: it ends when that request does, whose
    /// answer is still counted.
    closing: bool,
}

/// How a call ended.
enum Ending {
    /// With its final answer (a result, `ok`, or an error): its latency is recorded.
    Answered { ok: bool },
    /// Without one.
    Failed,
}

/// The calls of one worker.
pub(super) struct Flows {
    rules: Arc<FlowRules>,
    calls: Slots<Call>,
    timers: BinaryHeap<Reverse<(Instant, Owner)>>,
    settled: Vec<Settled>,
    /// Tasks created and not yet ended.
    live_tasks: u64,
    users_freed: usize,
    task_ids: Arc<TaskIds>,
    /// 2025-11-25: the calls of the tasks alive, by task id, for the requests the server
    /// sends about a task.
    by_task: HashMap<Box<str>, Owner>,
    asked: Vec<ServerRequest>,
}

impl Flows {
    pub(super) fn new(rules: Arc<FlowRules>, task_ids: Arc<TaskIds>) -> Self {
        Flows {
            rules,
            calls: Slots::default(),
            timers: BinaryHeap::new(),
            settled: Vec::new(),
            live_tasks: 0,
            users_freed: 0,
            task_ids,
            by_task: HashMap::new(),
            asked: Vec::new(),
        }
    }

    /// Whether the server may send requests about the calls' tasks (2025-11-25), each a
    /// round of its task's call.
    pub(super) fn answers_server_requests(&self) -> bool {
        !self.rules.revision.is_modern()
    }

    /// Calls in progress.
    pub(super) fn live(&self) -> usize {
        self.calls.live()
    }

    pub(super) fn full(&self) -> bool {
        self.calls.full()
    }

    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Closed loop: how many virtual users became free since the last call.
    pub(super) fn take_freed_users(&mut self) -> usize {
        std::mem::take(&mut self.users_freed)
    }

    /// Starts a new interval's stats with the tasks live now as its peak so far.
    pub(super) fn carry_peak(&self, s: &mut Sending<'_>) {
        if self.live_tasks > 0 {
            s.corr.flow_stats().counters.tasks_live_max = self.live_tasks;
        }
    }

    /// Starts a call of `op`, due at `due` (an operation that is no flow is a call of one
    /// request).
    pub(super) fn start(
        &mut self,
        op: &MixOp,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        due: Instant,
        now: Instant,
        user: bool,
    ) {
        let timeout = op.timeout.unwrap_or(s.timeout);
        let flow = op.flow.unwrap_or(OpFlow {
            task: false,
            poll_interval: None,
            timeout,
            confirm: false,
        });
        s.corr.flow_stats().counters.calls += 1;
        let slot = self.calls.insert(Call {
            op: op.op,
            progress: op.progress,
            flow,
            timeout,
            due,
            written: now,
            deadline: due + flow.timeout,
            user,
            first: None,
            headers: McpHeaders::default(),
            rounds: 0,
            task: None,
            waiting: None,
            poll_at: None,
            closing: false,
        });
        let owner = self.calls.owner(slot);
        self.timers.push(Reverse((due + flow.timeout, owner)));
        let (id, seq) = next_id(s.seq, s.worker, s.workers, s.segment);
        s.buf.clear();
        let headers = op.render(s.buf, &id, seq, s.renderer);
        let keep = self.rules.input.is_some();
        let call = self.calls.get(slot);
        if keep {
            call.first = Some(s.buf.as_slice().into());
            call.headers = headers.clone();
        }
        let sent = self.register(s, slot, id.clone(), op.op, Waiting::Call, due, now);
        if sent {
            t.send(
                Outgoing::single(Bytes::copy_from_slice(s.buf), Some(id), headers).by(s.user(slot)),
            );
        } else {
            self.end(s, slot, Ending::Failed, now);
        }
    }

    /// Registers a request of the call in `slot`; false on an id collision.
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        s: &mut Sending<'_>,
        slot: u32,
        id: Id,
        op: u16,
        what: Waiting,
        due: Instant,
        now: Instant,
    ) -> bool {
        let tag = Tag {
            op,
            owner: Some(self.calls.owner(slot)),
            part_of_call: true,
            // Only the call itself carries a token, not its task's follow-ups.
            progress: what == Waiting::Call && self.calls.get(slot).progress,
        };
        let sent = Sent {
            due,
            written: now,
            deadline: now + self.calls.get(slot).timeout,
        };
        if s.corr.register_tagged(id.clone(), sent, tag).is_err() {
            return false;
        }
        self.calls.get(slot).waiting = Some((id, what));
        true
    }

    /// Takes up the answers and ends the correlator has for calls.
    pub(super) fn settle(&mut self, s: &mut Sending<'_>, t: &mut AnyTransport) {
        let now = Instant::now();
        let mut settled = std::mem::take(&mut self.settled);
        s.corr.take_settled(&mut settled);
        for end in settled.drain(..) {
            let Some(slot) = self.calls.slot_of(end.owner) else {
                continue;
            };
            let call = self.calls.get(slot);
            let what = match &call.waiting {
                Some((id, what)) if *id == end.id => *what,
                _ => continue,
            };
            call.waiting = None;
            self.answered(s, t, slot, what, end.outcome, now);
        }
        self.settled = settled;
        let mut asked = std::mem::take(&mut self.asked);
        s.corr.take_server_requests(&mut asked);
        for request in asked.drain(..) {
            self.server_asked(s, t, request, now);
        }
        self.asked = asked;
    }

    /// Polls that are due, and calls past their timeout.
    pub(super) fn fire_timers(&mut self, s: &mut Sending<'_>, t: &mut AnyTransport, now: Instant) {
        while let Some(Reverse((at, owner))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(slot) = self.calls.slot_of(owner) else {
                continue;
            };
            let call = self.calls.get(slot);
            if call.closing {
                continue;
            }
            if now >= call.deadline {
                self.time_out(s, t, slot, now);
            } else if call.waiting.is_none() && call.poll_at.is_some_and(|p| p <= now) {
                call.poll_at = None;
                self.send_task(s, t, slot, TaskMethod::Get, now);
            }
        }
    }

    /// Ends every call in progress (the step's graceful stop ran out, or Ctrl-C); a task still
    /// working is cancelled. Nothing starts after this in the phase.
    pub(super) fn interrupt_all(&mut self, s: &mut Sending<'_>, t: &mut AnyTransport) {
        let calls: Vec<Call> = self.calls.release_all().collect();
        self.timers.clear();
        self.by_task.clear();
        for call in calls {
            s.corr.flow_stats().counters.calls_interrupted += 1;
            if let Some(task) = &call.task {
                self.live_tasks -= 1;
                if task.terminal.is_none() {
                    self.cancel(s, t, &task.id);
                }
            }
        }
    }

    /// One request of the call in `slot` ended.
    #[allow(clippy::too_many_arguments)]
    fn answered(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        what: Waiting,
        outcome: Outcome,
        now: Instant,
    ) {
        let modern = self.rules.revision.is_modern();
        let (class, result, error) = match outcome {
            Outcome::Answered {
                class,
                result,
                error,
            } => (class, result, error),
            Outcome::Ended(end) => return self.unanswered(s, t, slot, what, end, now),
        };
        if self.calls.get(slot).closing {
            // The call timed out: its last poll's error still counts.
            let poll = matches!(what, Waiting::Poll | Waiting::Confirm);
            let unknown = error.as_deref().and_then(error_code) == Some(UNKNOWN_TASK);
            if poll && result.is_none() && !unknown {
                s.corr.flow_stats().counters.task_poll_errors += 1;
            }
            return self.end(s, slot, Ending::Failed, now);
        }
        match what {
            Waiting::Call => match (class, result) {
                (c, Some(r)) if c.is_result() => match read_call(&r, modern) {
                    // A tool error or a result off its schema is an answer, not an ok one.
                    CallAnswer::Done { .. } => {
                        self.end(s, slot, Ending::Answered { ok: c == Class::Ok }, now)
                    }
                    CallAnswer::Input { requests, state } => {
                        self.input_round(s, t, slot, &requests, state, now)
                    }
                    CallAnswer::Task(view) => self.task_created(s, t, slot, view, now),
                },
                // Input nothing answers: the correlator counted it `input_unanswered`.
                (Class::InputUnanswered(_), _) => self.end(s, slot, Ending::Failed, now),
                // An error, or an answer no client can read: the call's final answer.
                _ => self.end(s, slot, Ending::Answered { ok: false }, now),
            },
            Waiting::Poll | Waiting::Confirm => {
                let view = result.as_deref().and_then(|r| read_task(r, modern));
                match (view, error) {
                    (Some(v), _) => self.polled(s, t, slot, what, v, now),
                    (None, Some(e)) if error_code(&e) == Some(UNKNOWN_TASK) => {
                        self.unknown_task(s, slot, now)
                    }
                    // Any other error, or a result that is no task: the poll failed; the next
                    // one may not.
                    _ => {
                        s.corr.flow_stats().counters.task_poll_errors += 1;
                        self.poll_later(slot, now);
                    }
                }
            }
            Waiting::Result => {
                let inline = match (&result, &error) {
                    (Some(r), _) => match read_call(r, false) {
                        CallAnswer::Done { is_error } => Inline::Result { is_error },
                        _ => Inline::Result { is_error: false },
                    },
                    _ => Inline::Error,
                };
                let unseen = self
                    .calls
                    .get(slot)
                    .task
                    .as_ref()
                    .is_some_and(|k| k.terminal.is_none());
                if unseen {
                    // Asked for while the task wanted input: the answer is its end.
                    let status = match inline {
                        Inline::Result { is_error: false } => Status::Completed,
                        _ => Status::Failed,
                    };
                    self.reached_terminal(s, slot, status, None, now);
                }
                self.check_result(s, slot, inline);
                let ok = result.is_some();
                self.end(s, slot, Ending::Answered { ok }, now);
            }
        }
    }

    /// A request of the call ended without an answer (the correlator counted how).
    fn unanswered(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        what: Waiting,
        _end: End,
        now: Instant,
    ) {
        if self.calls.get(slot).closing {
            return self.end(s, slot, Ending::Failed, now);
        }
        match what {
            // A lost poll says nothing of the task: poll again.
            Waiting::Poll | Waiting::Confirm => self.poll_later(slot, now),
            Waiting::Call | Waiting::Result => {
                let task = self.calls.get(slot).task.as_ref().map(|k| k.id.clone());
                if let Some(id) = task {
                    self.cancel(s, t, &id);
                }
                self.end(s, slot, Ending::Failed, now);
            }
        }
    }

    /// An `input_required` answer: the call is sent again with the canned responses, or
    /// ends when a kind has none or the rounds run out.
    #[allow(clippy::too_many_arguments)]
    fn input_round(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        requests: &serde_json::Map<String, Value>,
        state: Option<Value>,
        now: Instant,
    ) {
        let rules = Arc::clone(&self.rules);
        let call = self.calls.get(slot);
        call.rounds += 1;
        let rounds = call.rounds;
        let stats = s.corr.flow_stats();
        stats.counters.input_rounds += 1;
        let max = rules.input.as_ref().map_or(0, |i| i.max_rounds);
        if rounds > max && rules.input.is_some() {
            stats.counters.input_rounds_exceeded += 1;
            return self.end(s, slot, Ending::Failed, now);
        }
        // The correlator ended a round asking for a kind `[input]` does not answer as
        // `input_unanswered`, so this one is answered in full.
        let Some(Ok(responses)) = rules.input.as_ref().map(|c| c.respond(requests)) else {
            return self.end(s, slot, Ending::Failed, now);
        };
        let (id, _) = next_id(s.seq, s.worker, s.workers, s.segment);
        s.buf.clear();
        let call = self.calls.get(slot);
        let first = call.first.as_deref().unwrap_or_default();
        if render_retry(s.buf, first, &id, responses, state).is_err() {
            return self.end(s, slot, Ending::Failed, now);
        }
        let (headers, op) = (call.headers.clone(), call.op);
        if self.register(s, slot, id.clone(), op, Waiting::Call, now, now) {
            t.send(
                Outgoing::single(Bytes::copy_from_slice(s.buf), Some(id), headers).by(s.user(slot)),
            );
        } else {
            self.end(s, slot, Ending::Failed, now);
        }
    }

    /// The call's answer is a task.
    fn task_created(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        view: TaskView,
        now: Instant,
    ) {
        let reused = !self.task_ids.first_use(&view.id);
        let call = self.calls.get(slot);
        let poll = poll_interval(view.poll_interval, call.flow.poll_interval);
        let due = call.due;
        call.task = Some(LiveTask {
            id: view.id.as_str().into(),
            created: now,
            ttl: view.ttl,
            poll,
            polls: 0,
            terminal: None,
            inline: None,
            mismatch_counted: false,
        });
        if self.answers_server_requests() {
            self.by_task
                .insert(view.id.as_str().into(), self.calls.owner(slot));
        }
        self.live_tasks += 1;
        let live = self.live_tasks;
        let f = s.corr.flow_stats();
        f.counters.tasks_created += 1;
        f.counters.tasks_live_max = f.counters.tasks_live_max.max(live);
        f.counters.task_id_reused += u64::from(reused);
        f.time_to_task.record(now.saturating_duration_since(due));
        if view.status.is_terminal() {
            return self.polled(s, t, slot, Waiting::Poll, view, now);
        }
        self.poll_later(slot, now);
    }

    /// A poll's answer: the task's status now.
    fn polled(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        what: Waiting,
        view: TaskView,
        now: Instant,
    ) {
        let modern = self.rules.revision.is_modern();
        let call = self.calls.get(slot);
        let confirm = call.flow.confirm;
        let Some(task) = call.task.as_mut() else {
            return;
        };
        if let Some(p) = view.poll_interval {
            task.poll = poll_interval(Some(p), call.flow.poll_interval);
        }
        if what == Waiting::Confirm {
            let seen = task.terminal;
            if seen != Some(view.status) {
                s.corr.flow_stats().counters.task_status_regressed += 1;
            }
            return self.after_terminal(s, t, slot, now);
        }
        // A 2025-11-25 task that asks for input: its result is asked for at once, and the
        // server's requests come on that stream.
        if !modern && view.status == Status::InputRequired {
            return self.send_task(s, t, slot, TaskMethod::Result, now);
        }
        if !view.status.is_terminal() {
            return self.poll_later(slot, now);
        }
        self.reached_terminal(s, slot, view.status, view.inline, now);
        if modern && let Some(inline) = view.inline {
            self.check_result(s, slot, inline);
        }
        if confirm {
            return self.send_task(s, t, slot, TaskMethod::Get, now);
        }
        self.after_terminal(s, t, slot, now)
    }

    /// The call's task reached `status` (terminal), as a poll or its result showed.
    fn reached_terminal(
        &mut self,
        s: &mut Sending<'_>,
        slot: u32,
        status: Status,
        inline: Option<Inline>,
        now: Instant,
    ) {
        let call = self.calls.get(slot);
        let due = call.due;
        let Some(task) = call.task.as_mut() else {
            return;
        };
        task.terminal = Some(status);
        task.inline = inline;
        let polls = task.polls;
        let f = s.corr.flow_stats();
        match status {
            Status::Completed => f.counters.tasks_completed += 1,
            Status::Failed => f.counters.tasks_failed += 1,
            _ => f.counters.tasks_cancelled += 1,
        }
        f.time_to_terminal
            .record(now.saturating_duration_since(due));
        let _ = f.polls_per_task.record(polls);
    }

    /// A request the server sent (2025-11-25): answered from the canned input, or with an
    /// error when the profile has none for its kind. One about a call's task is a round of
    /// that call; a call whose request goes unanswered, or past the rounds allowed, ends and
    /// its task is cancelled.
    fn server_asked(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        request: ServerRequest,
        now: Instant,
    ) {
        let canned = self.rules.input.as_ref();
        let answered = super::asked::answer(s.corr, t, canned, &request);
        if answered {
            s.corr.flow_stats().counters.input_rounds += 1;
        }
        let owner = request
            .related_task
            .as_deref()
            .and_then(|id| self.by_task.get(id));
        let Some(slot) = owner.and_then(|o| self.calls.slot_of(*o)) else {
            return;
        };
        let max = canned.map_or(0, |i| i.max_rounds);
        let call = self.calls.get(slot);
        if answered {
            call.rounds += 1;
            if call.rounds <= max {
                return;
            }
            s.corr.flow_stats().counters.input_rounds_exceeded += 1;
        }
        if let Some(id) = call.task.as_ref().map(|k| k.id.clone()) {
            self.cancel(s, t, &id);
        }
        self.end(s, slot, Ending::Failed, now);
    }

    /// The task is terminal (and confirmed, when asked): take its result (2025-11-25, unless
    /// cancelled), or end the call (2026-07-28 had it inline).
    fn after_terminal(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        now: Instant,
    ) {
        let terminal = self.calls.get(slot).task.as_ref().and_then(|k| k.terminal);
        let takes_result = !self.rules.revision.is_modern() && terminal != Some(Status::Cancelled);
        if takes_result {
            self.send_task(s, t, slot, TaskMethod::Result, now);
        } else {
            // 2026-07-28's terminal poll carried the result, or the error; a cancelled task
            // has neither.
            let inline = self.calls.get(slot).task.as_ref().and_then(|k| k.inline);
            let ok = matches!(inline, Some(Inline::Result { .. }));
            self.end(s, slot, Ending::Answered { ok }, now);
        }
    }

    /// Counts a terminal status that disagrees with the result it ended with, once a task.
    fn check_result(&mut self, s: &mut Sending<'_>, slot: u32, inline: Inline) {
        let modern = self.rules.revision.is_modern();
        let Some(task) = self.calls.get(slot).task.as_mut() else {
            return;
        };
        let Some(status) = task.terminal else {
            return;
        };
        if !result_agrees(status, inline, modern) && !task.mismatch_counted {
            task.mismatch_counted = true;
            s.corr.flow_stats().counters.task_result_mismatch += 1;
        }
    }

    /// A `tasks/get` answered that the task is unknown: forgotten before its `ttl`, or
    /// expired after it.
    fn unknown_task(&mut self, s: &mut Sending<'_>, slot: u32, now: Instant) {
        let Some(task) = self.calls.get(slot).task.as_ref() else {
            return;
        };
        let expired = task.ttl.is_some_and(|ttl| now >= task.created + ttl);
        let c = &mut s.corr.flow_stats().counters;
        if expired {
            c.tasks_expired += 1;
        } else {
            c.task_forgotten += 1;
        }
        self.end(s, slot, Ending::Failed, now);
    }

    /// The call's timeout: a task still working is cancelled and counted.
    fn time_out(&mut self, s: &mut Sending<'_>, t: &mut AnyTransport, slot: u32, now: Instant) {
        let working = self
            .calls
            .get(slot)
            .task
            .as_ref()
            .filter(|k| k.terminal.is_none())
            .map(|k| k.id.clone());
        if let Some(id) = working {
            s.corr.flow_stats().counters.tasks_unfinished += 1;
            self.cancel(s, t, &id);
        }
        let call = self.calls.get(slot);
        if call.waiting.is_some() {
            call.closing = true;
        } else {
            self.end(s, slot, Ending::Failed, now);
        }
    }

    /// Schedules the call's next poll.
    fn poll_later(&mut self, slot: u32, now: Instant) {
        let owner = self.calls.owner(slot);
        let call = self.calls.get(slot);
        let Some(task) = call.task.as_ref() else {
            return;
        };
        let at = now + task.poll;
        call.poll_at = Some(at);
        self.timers.push(Reverse((at, owner)));
    }

    /// Sends `tasks/get` or `tasks/result` for the call's task.
    fn send_task(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        method: TaskMethod,
        now: Instant,
    ) {
        let Some(task) = self.calls.get(slot).task.as_mut() else {
            return;
        };
        let what = match method {
            TaskMethod::Get if task.terminal.is_some() => Waiting::Confirm,
            TaskMethod::Get => Waiting::Poll,
            _ => Waiting::Result,
        };
        if method == TaskMethod::Get {
            task.polls += 1;
        }
        let task_id = task.id.clone();
        if method == TaskMethod::Get {
            s.corr.flow_stats().counters.task_polls += 1;
        }
        let (id, _) = next_id(s.seq, s.worker, s.workers, s.segment);
        s.buf.clear();
        let headers = self.rules.render_task(s.buf, &id, method, &task_id);
        let op = self.rules.side.of(method);
        if self.register(s, slot, id.clone(), op, what, now, now) {
            t.send(
                Outgoing::single(Bytes::copy_from_slice(s.buf), Some(id), headers).by(s.user(slot)),
            );
        } else {
            self.end(s, slot, Ending::Failed, now);
        }
    }

    /// Sends `tasks/cancel` for `task_id`, owned by no call (its answer is only counted).
    fn cancel(&mut self, s: &mut Sending<'_>, t: &mut AnyTransport, task_id: &str) {
        let now = Instant::now();
        let (id, _) = next_id(s.seq, s.worker, s.workers, s.segment);
        s.buf.clear();
        let headers = self
            .rules
            .render_task(s.buf, &id, TaskMethod::Cancel, task_id);
        let tag = Tag {
            op: self.rules.side.cancel,
            owner: None,
            part_of_call: true,
            progress: false,
        };
        let sent = Sent {
            due: now,
            written: now,
            deadline: now + s.timeout,
        };
        if s.corr.register_tagged(id.clone(), sent, tag).is_ok() {
            t.send(Outgoing::single(
                Bytes::copy_from_slice(s.buf),
                Some(id),
                headers,
            ));
        }
    }

    /// Ends the call in `slot`.
    fn end(&mut self, s: &mut Sending<'_>, slot: u32, ending: Ending, now: Instant) {
        let Some(call) = self.calls.release(slot) else {
            return;
        };
        if let Some(task) = &call.task {
            self.live_tasks -= 1;
            self.by_task.remove(&task.id);
        }
        if call.user {
            self.users_freed += 1;
        }
        let f: &mut FlowStats = s.corr.flow_stats();
        match ending {
            Ending::Answered { ok } => {
                f.counters.calls_answered += 1;
                f.counters.calls_ok += u64::from(ok);
                let _ = f.rounds_per_call.record(u64::from(call.rounds));
            }
            Ending::Failed => f.counters.calls_failed += 1,
        }
        if matches!(ending, Ending::Answered { .. }) {
            s.corr.record_call(call.op, call.due, call.written, now);
        }
    }
}

/// The poll interval: the server's, or the profile's when that is shorter (or the only one).
fn poll_interval(server: Option<Duration>, profile: Option<Duration>) -> Duration {
    match (server, profile) {
        (Some(s), Some(p)) => s.min(p),
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => crate::load::flow::DEFAULT_POLL_INTERVAL,
    }
}

/// An error object's `code`.
fn error_code(error: &RawValue) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(error.get())
        .ok()
        .map(|c| c.code)
}
