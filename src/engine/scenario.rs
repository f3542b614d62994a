//! Scenario iterations inside one worker: starting them, sending each step's calls, taking
//! up the answers the correlator hands back (captures, poll conditions, joins), timers for
//! polls and think times, assertions, tallies of defects, and the counts of scenarios.csv. Worker-local like the
//! rest of the hot loop; an iteration is addressed by its slot and a generation, so an answer
//! that comes back for an iteration already ended is ignored.

use super::slots::Slots;
use super::worker::{Sending, next_id};
use crate::correlator::{Class, End, Outcome, Owner, Sent, Settled, Tag};
use crate::jsonrpc::Id;
use crate::load::mix::Bound;
use crate::load::scenario::{Call, Poll, Scenario, Scenarios, StepKind, draw};
use crate::metrics::{EXPECT_PREFIX, Finding, ScenarioStats};
use crate::profile::expr::{Root, Scope};
use crate::transport::{AnyTransport, Outgoing, Transport};
use bytes::Bytes;
use serde_json::{Map, Value};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// One running iteration.
struct Iteration {
    scenario: usize,
    /// The scenario step it is at.
    step: usize,
    vars: Map<String, Value>,
    /// Its CSV row number.
    row: u64,
    /// When it was due to start (open loop: scheduled), for its latency.
    started: Instant,
    /// When the current step began.
    step_started: Instant,
    /// Whether a closed-loop virtual user runs it (and is freed when it ends).
    user: bool,
    /// Requests of the current step still in flight: their ids and call numbers.
    waiting: Vec<(Id, usize)>,
    /// The first failure among a parallel step's members.
    member_failure: Option<String>,
    /// Polls of the current poll step, and of the whole iteration.
    step_polls: u64,
    polls: u64,
    /// With a `tally` step: the ids it sent (the first [`IDS_SENT_KEPT`]), for evidence.
    sent: Option<Vec<Id>>,
}

/// Request ids an iteration keeps for a tally's evidence.
const IDS_SENT_KEPT: usize = 256;

/// How one iteration's turn ended.
enum Turn {
    /// Waiting for answers or a timer.
    Waiting,
    Done,
    Failed(String),
}

/// The iterations of one worker.
pub(super) struct Runner {
    slots: Slots<Iteration>,
    timers: BinaryHeap<Reverse<(Instant, Owner)>>,
    stats: Vec<ScenarioStats>,
    settled: Vec<Settled>,
    /// Closed loop: virtual users whose iteration ended since last asked.
    users_freed: usize,
    /// Iterations started by this worker (their CSV rows).
    started: u64,
}

impl Runner {
    pub(super) fn new(scenarios: &Scenarios) -> Self {
        Runner {
            slots: Slots::default(),
            timers: BinaryHeap::new(),
            stats: (0..scenarios.list.len())
                .map(|_| ScenarioStats::default())
                .collect(),
            settled: Vec::new(),
            users_freed: 0,
            started: 0,
        }
    }

    /// Iterations running.
    pub(super) fn live(&self) -> usize {
        self.slots.live()
    }

    /// Whether no more iterations can start: their owners would not fit their slots.
    pub(super) fn full(&self) -> bool {
        self.slots.full()
    }

    /// The earliest timer (possibly of an iteration already ended).
    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Closed loop: how many virtual users became free since the last call.
    pub(super) fn take_freed_users(&mut self) -> usize {
        std::mem::take(&mut self.users_freed)
    }

    /// Hands over the counts so far and starts afresh.
    pub(super) fn take_stats(&mut self) -> Vec<ScenarioStats> {
        let fresh = self
            .stats
            .iter()
            .map(|_| ScenarioStats::default())
            .collect();
        std::mem::replace(&mut self.stats, fresh)
    }

    /// Starts one iteration of a scenario drawn by weight, due at `due`.
    pub(super) fn start(
        &mut self,
        sc: &Scenarios,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        due: Instant,
        now: Instant,
        user: bool,
    ) {
        let scenario = sc.pick(&mut s.renderer.rng);
        let row = self.started * s.workers as u64 + s.worker as u64;
        self.started += 1;
        self.stats[scenario].iterations.started += 1;
        let slot = self.slots.insert(Iteration {
            scenario,
            step: 0,
            vars: Map::new(),
            row,
            started: due,
            step_started: due,
            user,
            waiting: Vec::new(),
            member_failure: None,
            step_polls: 0,
            polls: 0,
            sent: sc.list[scenario].tallies.then(Vec::new),
        });
        let turn = self.run_step(sc, s, t, slot, due, now);
        self.conclude(sc, slot, turn, now);
    }

    /// Takes up the answers and ends the correlator has for iterations.
    pub(super) fn settle(
        &mut self,
        sc: &Scenarios,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        now: Instant,
    ) {
        // The buffer is kept between calls, so taking up answers allocates nothing.
        let mut settled = std::mem::take(&mut self.settled);
        s.corr.take_settled(&mut settled);
        for end in settled.drain(..) {
            if let Some(slot) = self.slots.slot_of(end.owner) {
                self.answered(sc, s, t, slot, &end, now);
            }
        }
        self.settled = settled;
    }

    /// Runs the timers that are due: polls to repeat, think times over.
    pub(super) fn fire_timers(
        &mut self,
        sc: &Scenarios,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        now: Instant,
    ) {
        while let Some(Reverse((at, owner))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(slot) = self.slots.slot_of(owner) else {
                continue;
            };
            let it = self.slots.get(slot);
            let step = &sc.list[it.scenario].steps[it.step];
            let turn = match &step.kind {
                StepKind::Poll(p) => self.send(s, t, slot, &p.call, 0, now, now),
                _ => self.next_step(sc, s, t, slot, now),
            };
            self.conclude(sc, slot, turn, now);
        }
    }

    /// Ends every running iteration as `interrupted` (the step's graceful stop ran out, or
    /// Ctrl-C); their requests still in flight end as the correlator sees them. Nothing
    /// starts after this in the phase, so their virtual users are not freed.
    pub(super) fn interrupt_all(&mut self) {
        for it in self.slots.release_all() {
            let stats = &mut self.stats[it.scenario];
            stats.iterations.interrupted += 1;
            stats.part_mut(it.step).interrupted += 1;
        }
        self.timers.clear();
    }

    /// Runs steps from the current one until one has to wait, fails or the scenario ends.
    fn run_step(
        &mut self,
        sc: &Scenarios,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        due: Instant,
        now: Instant,
    ) -> Turn {
        let it = self.slots.get(slot);
        let scenario: &Scenario = &sc.list[it.scenario];
        let Some(step) = scenario.steps.get(it.step) else {
            return Turn::Done;
        };
        it.step_started = due;
        it.step_polls = 0;
        it.member_failure = None;
        let (index, part) = (it.scenario, it.step);
        self.stats[index].part_mut(part).started += 1;
        match &step.kind {
            StepKind::Call(c) => self.send(s, t, slot, c, 0, due, now),
            StepKind::Poll(p) => self.send(s, t, slot, &p.call, 0, due, now),
            StepKind::Parallel(members) => {
                // A member sent in copies collects each capture into a list.
                let it = self.slots.get(slot);
                for m in members.iter().filter(|m| m.copies > 1) {
                    for c in &m.captures {
                        it.vars.insert(c.var.clone(), Value::Array(Vec::new()));
                    }
                }
                for (i, m) in members.iter().enumerate() {
                    for _ in 0..m.copies {
                        if let Turn::Failed(why) = self.send(s, t, slot, m, i, due, now) {
                            return Turn::Failed(why);
                        }
                    }
                }
                Turn::Waiting
            }
            StepKind::Expect(checks) => {
                let it = self.slots.get(slot);
                let scope = Scope {
                    vars: &it.vars,
                    answer: None,
                };
                for c in checks {
                    match c.holds(&scope) {
                        Ok(true) => {}
                        Ok(false) => {
                            return Turn::Failed(format!(
                                "{EXPECT_PREFIX}{}: {}",
                                step.name,
                                c.source()
                            ));
                        }
                        Err(e) => {
                            return Turn::Failed(format!(
                                "{EXPECT_PREFIX}{}: {} ({e})",
                                step.name,
                                c.source()
                            ));
                        }
                    }
                }
                self.step_done(sc, slot, now);
                self.run_step(sc, s, t, slot, now, now)
            }
            StepKind::Tally(counts) => {
                let it = self.slots.get(slot);
                let scope = Scope {
                    vars: &it.vars,
                    answer: None,
                };
                let mut counted = Vec::with_capacity(counts.len());
                for (defect, e) in counts {
                    match e
                        .eval(&scope)
                        .map_err(|e| e.to_string())
                        .and_then(tally_count)
                    {
                        Ok(n) => counted.push((*defect, n, e)),
                        Err(why) => {
                            return Turn::Failed(format!(
                                "{}: tally {defect} = {}: {why}",
                                step.name,
                                e.source()
                            ));
                        }
                    }
                }
                let tallies = &mut self.stats[index].tallies;
                for (defect, n, e) in counted {
                    tallies.add(defect, n);
                    if n > 0 {
                        let mut f =
                            Finding::new(defect, n, format!("{}/{}", scenario.name, step.name))
                                .ids(it.sent.iter().flatten());
                        f.values
                            .extend(it.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
                        tallies.keep(f.value("tally", e.source()));
                    }
                }
                self.step_done(sc, slot, now);
                self.run_step(sc, s, t, slot, now, now)
            }
            StepKind::Think(think) => {
                let pause = draw(*think, &mut s.renderer.rng);
                if pause.is_zero() {
                    self.step_done(sc, slot, now);
                    return self.run_step(sc, s, t, slot, now, now);
                }
                self.timers
                    .push(Reverse((now + pause, self.slots.owner(slot))));
                Turn::Waiting
            }
        }
    }

    /// A step that ended well: its time is recorded and the iteration moves on.
    fn step_done(&mut self, sc: &Scenarios, slot: u32, now: Instant) {
        let it = self.slots.get(slot);
        let (scenario, part, took, polls) = (
            it.scenario,
            it.step,
            now.saturating_duration_since(it.step_started),
            it.step_polls,
        );
        it.step += 1;
        let counts = self.stats[scenario].part_mut(part);
        counts.completed(took);
        if matches!(sc.list[scenario].steps[part].kind, StepKind::Poll(_)) {
            counts.polled(polls);
        }
    }

    /// After a timer: the think step is over; on to the next.
    fn next_step(
        &mut self,
        sc: &Scenarios,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        now: Instant,
    ) -> Turn {
        self.step_done(sc, slot, now);
        self.run_step(sc, s, t, slot, now, now)
    }

    /// Sends call `member` of the current step.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        call: &Call,
        member: usize,
        due: Instant,
        now: Instant,
    ) -> Turn {
        let owner = self.slots.owner(slot);
        let it = self.slots.get(slot);
        let (id, seq) = next_id(s.seq, s.worker, s.workers, s.segment);
        s.buf.clear();
        let bound = Bound {
            row: Some(it.row),
            vars: Some(&it.vars),
        };
        let headers = call.op.render_bound(s.buf, &id, seq, s.renderer, bound);
        let sent = Sent {
            due,
            written: now,
            deadline: now + call.op.timeout.unwrap_or(s.timeout),
        };
        let tag = Tag {
            op: call.op.op,
            owner: Some(owner),
            part_of_call: false,
            progress: call.op.progress,
        };
        if s.corr.register_tagged(id.clone(), sent, tag).is_err() {
            return Turn::Failed(format!("id {id} collided"));
        }
        it.waiting.push((id.clone(), member));
        if let Some(sent) = &mut it.sent
            && sent.len() < IDS_SENT_KEPT
        {
            sent.push(id.clone());
        }
        t.send(Outgoing::single(Bytes::copy_from_slice(s.buf), Some(id), headers).by(s.user(slot)));
        Turn::Waiting
    }

    /// One request of the iteration's current step ended.
    fn answered(
        &mut self,
        sc: &Scenarios,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        slot: u32,
        end: &Settled,
        now: Instant,
    ) {
        let it = self.slots.get(slot);
        let Some(pos) = it.waiting.iter().position(|(id, _)| *id == end.id) else {
            return;
        };
        let (_, member) = it.waiting.swap_remove(pos);
        let scenario = &sc.list[it.scenario];
        let step = &scenario.steps[it.step];
        let turn = match &step.kind {
            StepKind::Call(c) => match take_answer(&step.name, c, &end.outcome, &mut it.vars) {
                Ok(_) => self.next_step(sc, s, t, slot, now),
                Err(why) => Turn::Failed(why),
            },
            StepKind::Parallel(members) => {
                if let Err(why) =
                    take_answer(&step.name, &members[member], &end.outcome, &mut it.vars)
                {
                    it.member_failure.get_or_insert(why);
                }
                match (it.waiting.is_empty(), it.member_failure.take()) {
                    (false, failure) => {
                        it.member_failure = failure;
                        Turn::Waiting
                    }
                    (true, Some(why)) => Turn::Failed(why),
                    (true, None) => self.next_step(sc, s, t, slot, now),
                }
            }
            StepKind::Poll(Poll { call, rules: p }) => {
                it.step_polls += 1;
                it.polls += 1;
                let answer = match answer_value(&step.name, &end.outcome) {
                    Ok(a) => a,
                    Err(why) => return self.conclude(sc, slot, Turn::Failed(why), now),
                };
                // A poll captures from every answer; the terminal one must hold them all.
                for c in &call.captures {
                    let found = c.path.lookup(&Scope {
                        vars: &it.vars,
                        answer: Some(&answer),
                    });
                    if let Some(v) = found.cloned() {
                        it.vars.insert(c.var.clone(), v);
                    }
                }
                let scope = Scope {
                    vars: &it.vars,
                    answer: Some(&answer),
                };
                match p.until.holds(&scope) {
                    Ok(true) => match capture(&step.name, call, &answer, &mut it.vars) {
                        Ok(()) => self.next_step(sc, s, t, slot, now),
                        Err(why) => Turn::Failed(why),
                    },
                    Ok(false) => {
                        let elapsed = now.saturating_duration_since(it.step_started);
                        let wait = p
                            .server_interval
                            .then(|| server_poll_interval(&answer))
                            .flatten()
                            .unwrap_or(p.interval);
                        if p.max_polls.is_some_and(|m| it.step_polls >= m as u64) {
                            Turn::Failed(format!(
                                "{}: not done after {} polls",
                                step.name, it.step_polls
                            ))
                        } else if p.max_time.is_some_and(|m| elapsed + wait > m) {
                            Turn::Failed(format!(
                                "{}: not done within max_time {}",
                                step.name,
                                humantime::format_duration(p.max_time.unwrap_or_default())
                            ))
                        } else {
                            self.timers
                                .push(Reverse((now + wait, self.slots.owner(slot))));
                            Turn::Waiting
                        }
                    }
                    // An error answer the condition cannot read is the failure to name.
                    Err(e) => Turn::Failed(match answer.get("error") {
                        Some(err) => format!("{}: error answer ({})", step.name, error_code(err)),
                        None => format!("{}: until: {e}", step.name),
                    }),
                }
            }
            StepKind::Expect(_) | StepKind::Tally(_) | StepKind::Think(_) => Turn::Waiting,
        };
        self.conclude(sc, slot, turn, now);
    }

    /// Ends the iteration when its turn did: completed or failed, counted, its virtual user
    /// freed; else nothing.
    fn conclude(&mut self, sc: &Scenarios, slot: u32, turn: Turn, now: Instant) {
        if matches!(turn, Turn::Waiting) {
            return;
        }
        let Some(it) = self.slots.release(slot) else {
            return;
        };
        if it.user {
            self.users_freed += 1;
        }
        match turn {
            Turn::Waiting => {}
            Turn::Done => {
                let counts = &mut self.stats[it.scenario].iterations;
                counts.completed(now.saturating_duration_since(it.started));
                if sc.list[it.scenario].polls {
                    counts.polled(it.polls);
                }
            }
            Turn::Failed(why) => {
                let stats = &mut self.stats[it.scenario];
                stats.part_mut(it.step).failed(&why);
                stats.iterations.failed(&why);
                if sc.list[it.scenario].polls {
                    stats.iterations.polled(it.polls);
                }
            }
        }
    }
}

/// The answer as `{"result": …}` or `{"error": …}`, or why the request has none.
fn answer_value(step: &str, outcome: &Outcome) -> Result<Value, String> {
    match outcome {
        Outcome::Answered {
            class,
            result,
            error,
        } => {
            let mut answer = Map::new();
            let parse = |raw: &serde_json::value::RawValue| {
                serde_json::from_str::<Value>(raw.get()).unwrap_or(Value::Null)
            };
            match (class, result, error) {
                (Class::Ok, Some(r), _) => {
                    answer.insert("result".into(), parse(r));
                }
                // Not ok, so the step fails as on an error answer (with `--tool-errors ok`
                // the correlator counts a tool error `ok` and the step goes on).
                // Its text is the step's `tool_error`; the reason stays one line of a table.
                (Class::ToolError, Some(_), _) => {
                    return Err(format!("{step}: tool error (isError: true)"));
                }
                (Class::OutputSchemaViolation, Some(_), _) => {
                    return Err(format!(
                        "{step}: structuredContent breaks the tool's outputSchema"
                    ));
                }
                (Class::Error, _, Some(e)) => {
                    answer.insert("error".into(), parse(e));
                }
                (Class::InputUnanswered(kind), _, _) => {
                    return Err(format!(
                        "{step}: input_unanswered: the server asked for {} input [input] does not give",
                        kind.name()
                    ));
                }
                _ => return Err(format!("{step}: the answer was not valid JSON-RPC")),
            }
            Ok(Value::Object(answer))
        }
        Outcome::Ended(end) => Err(format!("{step}: {}", end_name(*end))),
    }
}

/// Takes a call's captures out of its answer. An error answer fails the step unless the
/// call captures, and only from `error`.
fn take_answer(
    step: &str,
    call: &Call,
    outcome: &Outcome,
    vars: &mut Map<String, Value>,
) -> Result<(), String> {
    let answer = answer_value(step, outcome)?;
    if let Some(e) = answer.get("error") {
        let code = error_code(e);
        if call.captures.is_empty() {
            return Err(format!("{step}: error answer ({code})"));
        }
        if let Some(c) = call.captures.iter().find(|c| c.path.root != Root::Error) {
            return Err(format!(
                "{step}: capture {}: the answer is an error ({code})",
                c.var
            ));
        }
    }
    capture(step, call, &answer, vars)
}

/// An error object's code, as its text (`?` when it has none).
fn error_code(error: &Value) -> String {
    error
        .get("code")
        .map_or_else(|| "?".into(), Value::to_string)
}

/// Stores each capture's value (a member sent in copies: appends it to the list), or names
/// the first that found nothing.
fn capture(
    step: &str,
    call: &Call,
    answer: &Value,
    vars: &mut Map<String, Value>,
) -> Result<(), String> {
    for c in &call.captures {
        let scope = Scope {
            vars,
            answer: Some(answer),
        };
        match c.path.lookup(&scope) {
            Some(v) => {
                let v = v.clone();
                match vars.get_mut(&c.var) {
                    Some(Value::Array(list)) if call.copies > 1 => list.push(v),
                    _ => {
                        vars.insert(c.var.clone(), v);
                    }
                }
            }
            None => {
                return Err(format!("{step}: capture {}: {} not found", c.var, c.path));
            }
        }
    }
    Ok(())
}

/// A tally's value as a count: `true` is 1, `false` 0, a whole number of 0 or more itself.
fn tally_count(v: Value) -> Result<u64, String> {
    match &v {
        Value::Bool(b) => Ok(u64::from(*b)),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(c), ..) => Ok(c),
            (None, Some(neg), _) => Err(format!(
                "gave {neg}: a count is 0 or more (did another writer change what was read?)"
            )),
            (None, None, Some(f)) if f.fract() == 0.0 && (0.0..9e15).contains(&f) => Ok(f as u64),
            _ => Err(format!("gave {v}: a count is a whole number of 0 or more")),
        },
        other => Err(format!(
            "gave {other}: a count is a whole number of 0 or more, or true / false"
        )),
    }
}

/// The answer's `pollInterval` in milliseconds (in `result`, or in its `structuredContent`).
fn server_poll_interval(answer: &Value) -> Option<Duration> {
    let r = answer.get("result")?;
    r.get("pollInterval")
        .or_else(|| r.get("structuredContent")?.get("pollInterval"))
        .and_then(Value::as_f64)
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
}

/// An unanswered end under its steps.csv column's name.
fn end_name(end: End) -> &'static str {
    match end {
        End::Missing => "missing",
        End::Timeout => "timeout",
        End::Http429 => "http_429",
        End::Http503 => "http_503",
        End::HttpOther => "http_other",
        End::Http401 => "http_401",
        End::Http403 => "http_403",
        End::Transport => "transport_error",
        End::ExpiredUnsent => "expired_unsent",
    }
}
