//! A fleet of stdio children, one per virtual user's session (`target.process = "per_user"`),
//! as desktop clients run local servers: each user's requests go to its own child, started
//! when its session begins (with the handshake the first child agreed) and ended when the
//! session ends (after `session_calls` calls or `session_duration`); start-ups timed, exits
//! kept with their stderr; the ids of the children alive shared with the resource sampler.

use super::stdio::{CLOSE_GRACE, EXITS_KEPT, ProcessExit, ProcessReport, StderrTail, kill_group};
use super::{
    Cancelled, Event, ExchangeId, LegacyInit, McpHeaders, Outgoing, StdioOptions, StdioTransport,
    Transport, TransportCounters, TransportError,
};
use crate::jsonrpc::{Decoded, Id, Message, decode, decode_message, response_id};
use crate::metrics::{Counters, LatencyHistogram};
use rustc_hash::FxHashSet;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The root process of each child alive in a fleet, written by the fleet as children start
/// and end (never on a request's path), read once a second by the resource sampler; and the
/// memory the sampler last saw the fleet hold, which the fleet's budget is checked against.
#[derive(Clone, Debug, Default)]
pub struct ChildPids {
    pids: Arc<Mutex<Vec<u32>>>,
    /// At the sampler's last reading: the resident bytes of every child's tree, the children
    /// read (0: none yet), and the largest child.
    rss_bytes: Arc<AtomicU64>,
    copies: Arc<AtomicU64>,
    largest: Arc<AtomicU64>,
}

impl ChildPids {
    /// A child started.
    pub fn add(&self, pid: u32) {
        self.pids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pid);
    }

    /// A child ended (a pid not held is ignored).
    pub fn remove(&self, pid: u32) {
        self.pids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| *p != pid);
    }

    /// The children alive now, in the order they started.
    pub fn snapshot(&self) -> Vec<u32> {
        self.pids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The sampler read `copies` children holding `bytes` in all, `largest` the most of one.
    pub fn set_rss(&self, bytes: u64, copies: u64, largest: u64) {
        self.rss_bytes.store(bytes, Ordering::Relaxed);
        self.copies.store(copies, Ordering::Relaxed);
        self.largest.store(largest, Ordering::Relaxed);
    }

    /// The sampler's last reading: `(bytes held, children read, largest child)`; `None`
    /// before it read one.
    pub fn last_reading(&self) -> Option<(u64, u64, u64)> {
        let copies = self.copies.load(Ordering::Relaxed);
        (copies > 0).then(|| {
            (
                self.rss_bytes.load(Ordering::Relaxed),
                copies,
                self.largest.load(Ordering::Relaxed),
            )
        })
    }
}

/// How the fleet starts and ends its children.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// The command; its `stderr` is replaced, per user, by a file in `children_dir`.
    pub child: StdioOptions,
    /// Where each user's children drain their stderr (`user-N.log`, bounded); `None`:
    /// discarded.
    pub children_dir: Option<PathBuf>,
    /// A session ends after this many calls (its next call starts a fresh child).
    pub session_calls: Option<u64>,
    /// A session ends this long after its child was started.
    pub session_duration: Option<Duration>,
    /// The longest from a child's spawn to its handshake's answer.
    pub start_timeout: Duration,
    /// Written with each child's root process as it starts and ends.
    pub pids: ChildPids,
    /// The most memory the children may hold: a child that would take the fleet past it
    /// (at the size of the children alive) is not started, and the user's requests fail.
    pub memory_budget: Option<u64>,
}

/// Children in a row that fail to start before the fleet is down (`target_down`).
const START_FAILURES_DOWN: u32 = 3;
/// The largest each user's stderr file grows to.
const CHILD_STDERR_MAX: u64 = 1 << 20;
/// How long the calls of a user whose child was not started for the memory budget wait
/// before they fail: a client does not retry a refused start at once, and a closed loop
/// sending again at once would spin.
const REFUSED_START_FAILS_AFTER: Duration = Duration::from_secs(1);
/// The id of the handshake's `initialize` (as the connect sent it).
const HANDSHAKE_ID: &str = "mcpload-initialize";

enum Stage {
    /// Its `initialize` is written: the user's requests wait for the answer.
    Starting {
        queued: Vec<Outgoing>,
        deadline: Instant,
    },
    /// 2026-07-28: no handshake; the start-up ends at the child's first answer.
    FirstAnswer,
    Ready,
}

/// One user's child in use.
struct Member {
    t: StdioTransport,
    session: u32,
    stage: Stage,
    /// Calls written to it.
    calls: u64,
    /// Requests written to it and not yet answered.
    pending: FxHashSet<Id>,
}

impl Member {
    fn write(&mut self, out: Outgoing) {
        self.calls += out.ids.len() as u64;
        self.pending.extend(out.ids.iter().cloned());
        self.t.send(out);
    }

    /// Takes the answered ids of one message off `pending`.
    fn answered(&mut self, bytes: &[u8]) {
        if self.pending.is_empty() {
            return;
        }
        if let Some(id) = response_id(bytes) {
            self.pending.remove(&id);
        } else if let Ok(Decoded::Batch(members)) = decode(bytes) {
            for m in members {
                if let Ok(Message::Response(r)) = decode_message(m)
                    && let Some(id) = r.id.as_id()
                {
                    self.pending.remove(id);
                }
            }
        }
    }
}

/// A child on its way out: its stdin closed, its output still read until it exits.
struct Leaving {
    m: Member,
    user: u32,
    /// Past it, its group is killed.
    deadline: Instant,
    killed: bool,
    /// It exited by itself while in use: reported once reaped.
    during: Option<&'static str>,
}

/// The stdio transport of a process per session. See the module docs.
pub struct StdioFleet {
    opts: FleetOptions,
    /// What starts a legacy session; `None`: 2026-07-28, nothing to send first.
    handshake: Option<LegacyInit>,
    /// By user.
    members: Vec<Option<Member>>,
    /// By user: the sessions started.
    sessions: Vec<u32>,
    leaving: Vec<Leaving>,
    ready: VecDeque<Event>,
    next_exchange: u64,
    down: Option<TransportError>,
    start_failures_in_a_row: u32,
    counters: TransportCounters,
    handed: Counters,
    /// Counts of children gone, not yet handed over; and every count of theirs.
    carried: Counters,
    gone_totals: Counters,
    /// Start-ups of children gone before they were taken.
    spawn: LatencyHistogram,
    connect: LatencyHistogram,
    started: u64,
    start_failures: u64,
    exits_total: u64,
    /// Each exit, with its child's stderr tail read when the report is made (the drain may
    /// still be reading the last lines when the child is reaped).
    exits: Vec<(ProcessExit, StderrTail)>,
    first_pollution: Option<(u32, String)>,
    /// Children not started for the memory budget, and why the last one was not.
    budget_refusals: u64,
    budget_refused: Option<String>,
    /// Failures of calls refused a child, each with when it is due.
    deferred: VecDeque<(Instant, Event)>,
}

impl std::fmt::Debug for StdioFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioFleet")
            .field("child", &self.opts.child)
            .field("alive", &self.alive())
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl StdioFleet {
    /// A fleet whose user 0 has `first`, the child the connect started (and agreed the era
    /// with): no child is started and thrown away.
    pub fn new(first: StdioTransport, opts: FleetOptions) -> Self {
        if let Some(pid) = first.pid() {
            opts.pids.add(pid);
        }
        let handshake = first.handshake().cloned();
        StdioFleet {
            opts,
            handshake,
            members: vec![Some(Member {
                t: first,
                session: 0,
                stage: Stage::Ready,
                calls: 0,
                pending: FxHashSet::default(),
            })],
            sessions: vec![1],
            leaving: Vec::new(),
            ready: VecDeque::new(),
            next_exchange: 0,
            down: None,
            start_failures_in_a_row: 0,
            counters: TransportCounters::default(),
            handed: Counters::default(),
            carried: Counters::default(),
            gone_totals: Counters::default(),
            spawn: LatencyHistogram::default(),
            connect: LatencyHistogram::default(),
            started: 1,
            start_failures: 0,
            exits_total: 0,
            exits: Vec::new(),
            first_pollution: None,
            budget_refusals: 0,
            budget_refused: None,
            deferred: VecDeque::new(),
        }
    }

    /// Children alive: in use, or on their way out.
    fn alive(&self) -> u64 {
        (self.members.iter().flatten().count() + self.leaving.len()) as u64
    }

    fn note_alive(&mut self) {
        self.counters.processes_max = self.counters.processes_max.max(self.alive());
    }

    /// Whether the session of `m` is over: its calls made, or its time up.
    fn session_over(&self, m: &Member) -> bool {
        matches!(m.stage, Stage::Ready)
            && (self.opts.session_calls.is_some_and(|n| m.calls >= n)
                || self
                    .opts
                    .session_duration
                    .is_some_and(|d| m.t.started().elapsed() >= d))
    }

    /// Why one more child would take the fleet past its memory budget: what the children
    /// held at the sampler's last reading, plus the children started since and the next, each
    /// the size of the largest child read (a child grows after its start: the estimate leans
    /// high, so that the kernel's OOM killer never decides).
    fn over_budget(&self) -> Option<String> {
        let budget = self.opts.memory_budget?;
        let (held, read, largest) = self.opts.pids.last_reading()?;
        let alive = self.alive();
        let next = held.saturating_add(largest.saturating_mul(alive.saturating_sub(read) + 1));
        (next > budget).then(|| {
            format!(
                "the fleet memory budget ({} MiB) is reached: {alive} children, {} MiB held \
                 and {} MiB the largest",
                budget >> 20,
                held >> 20,
                largest >> 20
            )
        })
    }

    /// Starts user `user`'s next child; `false` when it could not be spawned.
    fn start(&mut self, user: usize) -> bool {
        if self.sessions.len() <= user {
            self.sessions.resize(user + 1, 0);
            self.members.resize_with(user + 1, || None);
        }
        let mut o = self.opts.child.clone();
        o.stderr = self
            .opts
            .children_dir
            .as_ref()
            .map(|d| d.join(format!("user-{user}.log")));
        o.stderr_max_bytes = CHILD_STDERR_MAX;
        if let Some(why) = self.over_budget() {
            self.budget_refusals += 1;
            self.counters.fleet_budget_refusals += 1;
            self.budget_refused = Some(why);
            return false;
        }
        let session = self.sessions[user];
        self.sessions[user] += 1;
        let mut t = match StdioTransport::spawn(&o) {
            Ok(t) => t,
            Err(e) => {
                self.start_failed(user as u32, None, e.to_string());
                return false;
            }
        };
        self.started += 1;
        if let Some(pid) = t.pid() {
            self.opts.pids.add(pid);
        }
        let stage = match &self.handshake {
            Some(init) => {
                t.send(Outgoing::single(
                    init.initialize.clone(),
                    Some(Id::Str(HANDSHAKE_ID.into())),
                    McpHeaders::default(),
                ));
                Stage::Starting {
                    queued: Vec::new(),
                    deadline: Instant::now() + self.opts.start_timeout,
                }
            }
            None => Stage::FirstAnswer,
        };
        self.members[user] = Some(Member {
            t,
            session,
            stage,
            calls: 0,
            pending: FxHashSet::default(),
        });
        self.note_alive();
        true
    }

    /// A child of `user` never answered its handshake: what waited for it fails, the child
    /// is killed; three in a row and the fleet is down.
    fn start_failed(&mut self, user: u32, m: Option<Member>, why: String) {
        self.start_failures += 1;
        self.start_failures_in_a_row += 1;
        let error =
            TransportError::NotRunning(format!("the child of user {user} did not start: {why}"));
        if let Some(mut m) = m {
            if let Stage::Starting { queued, .. } = std::mem::replace(&mut m.stage, Stage::Ready) {
                let ids: Vec<Id> = queued.into_iter().flat_map(|o| o.ids).collect();
                if !ids.is_empty() {
                    self.ready.push_back(Event::Failed {
                        exchange: None,
                        ids,
                        error: error.clone(),
                    });
                }
            }
            m.t.kill();
            self.leave(user, m, Some("start"));
        } else {
            self.exits_total += 1;
        }
        if self.start_failures_in_a_row >= START_FAILURES_DOWN && self.down.is_none() {
            let error = TransportError::NotRunning(format!(
                "{START_FAILURES_DOWN} children in a row did not start; the last: {why}"
            ));
            self.down = Some(error.clone());
            self.ready.push_back(Event::Down { error });
            for user in 0..self.members.len() {
                if let Some(mut m) = self.members[user].take() {
                    m.t.kill();
                    self.leave(user as u32, m, None);
                }
            }
        }
    }

    /// Moves a child out of use: its stdin closed, read until it exits.
    fn leave(&mut self, user: u32, mut m: Member, during: Option<&'static str>) {
        m.t.close_stdin();
        self.leaving.push(Leaving {
            m,
            user,
            deadline: Instant::now() + CLOSE_GRACE,
            killed: false,
            during,
        });
    }

    /// The handshake's answer came (`ok`: a result): the user's requests go out.
    fn handshake_answered(&mut self, user: usize, mut m: Member, bytes: &[u8]) {
        let value: Option<serde_json::Value> = serde_json::from_slice(bytes).ok();
        let result = value.as_ref().and_then(|v| v.get("result"));
        if result.is_none_or(|r| !r.is_object()) {
            let said = value
                .as_ref()
                .and_then(|v| v.get("error"))
                .map_or_else(|| "no result".to_owned(), ToString::to_string);
            self.start_failed(
                user as u32,
                Some(m),
                format!("initialize was answered: {said}"),
            );
            return;
        }
        self.start_failures_in_a_row = 0;
        m.t.mark_connected();
        if let Some(init) = &self.handshake {
            m.t.send(Outgoing::single(
                init.initialized.clone(),
                None,
                McpHeaders::default(),
            ));
        }
        if let Stage::Starting { queued, .. } = std::mem::replace(&mut m.stage, Stage::Ready) {
            let at = Instant::now();
            let mut ids = Vec::new();
            for out in queued {
                ids.extend(out.ids.iter().cloned());
                m.write(out);
            }
            if !ids.is_empty() {
                // Their service latency runs from now, when they were written.
                self.ready.push_back(Event::Released { ids, at });
            }
        }
        self.members[user] = Some(m);
    }

    /// Applies one event of user `user`'s child; the member is handed back if still in use.
    fn member_event(&mut self, user: usize, mut m: Member, ev: Event) -> Option<Member> {
        match ev {
            Event::Message {
                at, bytes, batch, ..
            } => {
                if matches!(m.stage, Stage::Starting { .. })
                    && response_id(&bytes) == Some(Id::Str(HANDSHAKE_ID.into()))
                {
                    self.handshake_answered(user, m, &bytes);
                    return None;
                }
                if matches!(m.stage, Stage::FirstAnswer) {
                    m.stage = Stage::Ready;
                    m.t.mark_connected();
                    self.start_failures_in_a_row = 0;
                }
                m.answered(&bytes);
                self.ready.push_back(Event::Message {
                    exchange: None,
                    batch,
                    at,
                    bytes,
                });
            }
            Event::Failed { ids, error, .. } => {
                for id in &ids {
                    m.pending.remove(id);
                }
                self.ready.push_back(Event::Failed {
                    exchange: None,
                    ids,
                    error,
                });
            }
            Event::Down { error } => {
                if matches!(m.stage, Stage::Starting { .. } | Stage::FirstAnswer) {
                    self.start_failed(user as u32, Some(m), error.to_string());
                } else {
                    self.counters.process_exits += 1;
                    self.leave(user as u32, m, Some("session"));
                }
                return None;
            }
            other => self.ready.push_back(other),
        }
        Some(m)
    }

    fn poll_members(&mut self, cx: &mut Context<'_>, now: Instant) {
        for user in 0..self.members.len() {
            let Some(mut m) = self.members[user].take() else {
                continue;
            };
            // What the child wrote is read first: an answer waiting in the pipe while nothing
            // polled (between steps) is not a start that timed out.
            let kept = loop {
                match m.t.poll_event(cx) {
                    Poll::Pending => break Some(m),
                    Poll::Ready(ev) => match self.member_event(user, m, ev) {
                        Some(back) => m = back,
                        None => break None,
                    },
                }
            };
            match kept {
                Some(m) if matches!(&m.stage, Stage::Starting { deadline, .. } if now >= *deadline) =>
                {
                    let waited = self.opts.start_timeout;
                    self.start_failed(
                        user as u32,
                        Some(m),
                        format!("initialize not answered within {waited:?}"),
                    );
                }
                Some(m) => self.members[user] = Some(m),
                None => {}
            }
        }
    }

    /// Reads the children on their way out, reaps those that exited, kills those past
    /// their grace.
    fn poll_leaving(&mut self, cx: &mut Context<'_>, now: Instant) {
        let mut i = 0;
        while i < self.leaving.len() {
            let l = &mut self.leaving[i];
            while let Poll::Ready(ev) = l.m.t.poll_event(cx) {
                match ev {
                    Event::Message {
                        at, bytes, batch, ..
                    } => {
                        l.m.answered(&bytes);
                        self.ready.push_back(Event::Message {
                            exchange: None,
                            batch,
                            at,
                            bytes,
                        });
                    }
                    Event::Down { .. } => break,
                    Event::Failed { .. } => {}
                    other => self.ready.push_back(other),
                }
            }
            if l.m.t.try_exit().is_none() {
                if now >= l.deadline && !l.killed {
                    l.m.t.kill();
                    l.killed = true;
                }
                i += 1;
                continue;
            }
            let l = self.leaving.swap_remove(i);
            self.gone(l);
        }
    }

    /// A child exited and was reaped: what it still owed is `missing`, its counts and
    /// start-up are kept, its exit reported if it was not asked to go.
    fn gone(&mut self, mut l: Leaving) {
        if let Some(pid) = l.m.t.pid() {
            // What it started and left running goes with it.
            kill_group(pid);
            self.opts.pids.remove(pid);
        }
        if !l.m.pending.is_empty() {
            let ids = l.m.pending.drain().collect();
            self.ready.push_back(Event::Abandoned { ids });
        }
        l.m.t.take_counters(&mut self.carried);
        l.m.t.add_totals(&mut self.gone_totals);
        l.m.t.take_startups(&mut self.spawn, &mut self.connect);
        if self.first_pollution.is_none()
            && let Some(line) = l.m.t.first_pollution()
        {
            self.first_pollution = Some((l.user, line.to_owned()));
        }
        if let Some(during) = l.during {
            self.exits_total += 1;
            if self.exits.len() < EXITS_KEPT {
                let exit = l.m.t.exit(l.user, l.m.session, during);
                self.exits.push((exit, l.m.t.stderr_tail().clone()));
            }
        }
    }

    fn each_child(&mut self) -> impl Iterator<Item = &mut StdioTransport> {
        self.members
            .iter_mut()
            .flatten()
            .map(|m| &mut m.t)
            .chain(self.leaving.iter_mut().map(|l| &mut l.m.t))
    }

    /// What the fleet's children did (summary.json `processes`).
    pub fn process_report(&self) -> ProcessReport {
        let first = self.first_pollution.clone().or_else(|| {
            self.members.iter().enumerate().find_map(|(user, m)| {
                let line = m.as_ref()?.t.first_pollution()?;
                Some((user as u32, line.to_owned()))
            })
        });
        ProcessReport {
            mode: "per_user".into(),
            started: self.started,
            start_failures: self.start_failures,
            exits_total: self.exits_total,
            exits: self
                .exits
                .iter()
                .map(|(exit, tail)| ProcessExit {
                    stderr_tail: tail.lines(),
                    ..exit.clone()
                })
                .collect(),
            first_stdout_pollution_user: first.as_ref().map(|(u, _)| *u),
            first_stdout_pollution: first.map(|(_, l)| l),
            memory_budget_bytes: self.opts.memory_budget,
            budget_refusals: self.budget_refusals,
        }
    }

    /// The ids of the children alive, as the sampler reads them.
    pub fn pids(&self) -> ChildPids {
        self.opts.pids.clone()
    }
}

impl Transport for StdioFleet {
    fn send(&mut self, out: Outgoing) -> ExchangeId {
        let ex = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        if let Some(error) = &self.down {
            self.ready.push_back(Event::Failed {
                exchange: Some(ex),
                ids: out.ids,
                error: error.clone(),
            });
            return ex;
        }
        let user = out.user.unwrap_or(0) as usize;
        if let Some(m) = self.members.get_mut(user).and_then(Option::take) {
            if self.session_over(&m) && !out.ids.is_empty() {
                self.leave(user as u32, m, None);
            } else {
                self.members[user] = Some(m);
            }
        }
        if self.members.get(user).is_none_or(Option::is_none) && !self.start(user) {
            if out.ids.is_empty() {
                return ex;
            }
            let failed = |error| Event::Failed {
                exchange: Some(ex),
                ids: out.ids,
                error,
            };
            match (&self.down, self.budget_refused.take()) {
                (Some(down), _) => self.ready.push_back(failed(down.clone())),
                (None, Some(why)) => self.deferred.push_back((
                    Instant::now() + REFUSED_START_FAILS_AFTER,
                    failed(TransportError::NotRunning(format!(
                        "the child of user {user} was not started: {why}"
                    ))),
                )),
                (None, None) => self
                    .ready
                    .push_back(failed(TransportError::NotRunning(format!(
                        "the child of user {user} could not be started"
                    )))),
            }
            return ex;
        }
        let m = self.members[user].as_mut().expect("started above");
        match &mut m.stage {
            Stage::Starting { queued, .. } => queued.push(out),
            Stage::FirstAnswer | Stage::Ready => m.write(out),
        }
        ex
    }

    fn cancel(&mut self, id: &Id) -> Cancelled {
        if let Some(i) = self.deferred.iter().position(
            |(_, ev)| matches!(ev, Event::Failed { ids, .. } if ids.len() == 1 && ids[0] == *id),
        ) {
            // Never written: no child would take it.
            self.deferred.remove(i);
            return Cancelled::Unsent;
        }
        for m in self.members.iter_mut().flatten() {
            if let Stage::Starting { queued, .. } = &mut m.stage
                && let Some(i) = queued
                    .iter()
                    .position(|o| o.ids.len() == 1 && o.ids[0] == *id)
            {
                queued.remove(i);
                return Cancelled::Unsent;
            }
            if m.pending.contains(id) {
                return m.t.cancel(id);
            }
        }
        // Pending on a child whose session ended (its stdin closed, nothing more can be
        // written to it), or unknown: it was written.
        Cancelled::Sent
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Poll::Ready(ev);
            }
            let now = Instant::now();
            while self.deferred.front().is_some_and(|(due, _)| *due <= now) {
                let (_, ev) = self.deferred.pop_front().expect("looked at above");
                self.ready.push_back(ev);
            }
            self.poll_members(cx, now);
            self.poll_leaving(cx, now);
            if self.ready.is_empty() {
                return Poll::Pending;
            }
        }
    }

    fn open_exchanges(&self) -> usize {
        self.members
            .iter()
            .flatten()
            .map(|m| m.t.open_exchanges())
            .sum()
    }

    fn take_counters(&mut self, into: &mut Counters) {
        *into += &std::mem::take(&mut self.carried);
        for t in self.each_child() {
            t.take_counters(into);
        }
        self.note_alive();
        self.counters.hand_over(into, &mut self.handed);
        self.note_alive();
    }

    fn take_startups(&mut self, spawn: &mut LatencyHistogram, connect: &mut LatencyHistogram) {
        *spawn += &self.spawn;
        *connect += &self.connect;
        self.spawn.reset();
        self.connect.reset();
        for t in self.each_child() {
            t.take_startups(spawn, connect);
        }
    }

    fn add_totals(&self, into: &mut Counters) {
        *into += &self.gone_totals;
        for m in self.members.iter().flatten() {
            m.t.add_totals(into);
        }
        for l in &self.leaving {
            l.m.t.add_totals(into);
        }
        *into += &self.handed;
        self.counters.clone().drain_into(into);
    }

    async fn close(&mut self) {
        for user in 0..self.members.len() {
            if let Some(m) = self.members[user].take() {
                self.leave(user as u32, m, None);
            }
        }
        futures_util::future::join_all(self.leaving.iter_mut().map(|l| l.m.t.close())).await;
        for l in std::mem::take(&mut self.leaving) {
            self.gone(l);
        }
        self.ready.clear();
        self.down
            .get_or_insert(TransportError::NotRunning("closed".into()));
    }
}
