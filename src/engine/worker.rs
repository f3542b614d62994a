//! One worker: the hot loop. It owns one transport, one correlator, one ledger and its share
//! of the load; it writes only its own state and reports to the coordinator once a second.

use super::flow::{Flows, TaskIds};
use super::scenario::Runner;
use super::segment::{Segment, part};
use super::timer::SendTimer;
use super::users::Users;
use super::{Order, Report, StepOrder, Workload};
use crate::correlator::{Correlator, Ledger, Sent, Tag};
use crate::jsonrpc::{BatchWriter, Id, encode_notification};
use crate::load::mix::{MixOp, Renderer};
use crate::load::schedule::Arrivals;
use crate::metrics::{Counters, LatencyHistogram, Model, ScenarioStats};
use crate::transport::{AnyTransport, Event, Outgoing, Transport};
use bytes::Bytes;
use futures_util::FutureExt;
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often timeouts are checked and the clock looked at between events (the loop sends
/// what is due at these wakes too).
const HOUSEKEEPING: Duration = Duration::from_millis(5);
/// Most events already received that a drain applies as it ends.
const RECEIVED_MAX: usize = 1024;
/// Most events already received that one turn of the loop applies after the one it woke
/// for: answers that came together pay for the loop's turn (the clock, the timeouts, the
/// sends they free) once.
const TURN_MAX: usize = 32;
/// How long an interrupted step waits for the answers already asked for.
const INTERRUPT_DRAIN: Duration = Duration::from_secs(2);

pub(super) struct Worker {
    pub index: u32,
    pub workers: u32,
    pub transport: AnyTransport,
    pub work: Arc<Workload>,
    pub reports: mpsc::UnboundedSender<Report>,
    pub cancel: CancellationToken,
    /// Why the transport went down for good, once it has: nothing is sent on it any more, and
    /// every step from then on ends at once.
    pub down: Option<String>,
    /// The task ids the run's calls were given, shared by the workers.
    pub task_ids: Arc<TaskIds>,
    /// Dropped once the worker has made its state (nothing is ever sent): the first step's
    /// clock starts after (a correlator's ring is megabytes touched for the first time, tens of
    /// milliseconds on a virtual machine, that would make the first sends late).
    pub ready: Option<mpsc::Sender<()>>,
}

/// Where a step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Sending, measured but not recorded.
    Warmup,
    /// Warm-up over: no sends until the warm-up's requests and exchanges have ended.
    WarmupDrain,
    /// Drained; waiting for the coordinator to start every worker's measured time at once.
    WaitGo,
    Measure,
    /// Sending over: waiting for answers up to the timeout.
    Drain,
}

/// What the worker knows of its current step.
struct StepState {
    order: StepOrder,
    phase: Phase,
    measure_start: Instant,
    /// When the current drain (of the warm-up, or of the step) began.
    drain_began: Instant,
    /// Index of the current one-second interval of the measured phase.
    second: u32,
    next_second: Instant,
    /// Closed loop: when each free virtual client may send again.
    ready: VecDeque<Instant>,
    /// Closed loop with batches: the ids of each batch a client is waiting on.
    open_batches: VecDeque<Vec<Id>>,
    arrivals: Option<Arrivals>,
    lag: LatencyHistogram,
    dropped_arrivals: u64,
    /// Open loop: arrivals dropped because no slot was free for their unit.
    dropped_no_worker: u64,
    /// How late the loop's own timer wakes (for sends and housekeeping) ran in the measured
    /// phase.
    loop_delay: LatencyHistogram,
    /// When Ctrl-C / SIGTERM stopped the sending.
    interrupted_at: Option<Instant>,
    /// The first transport failure that ended requests of the phase (the warm-up's is
    /// forgotten with its counts).
    transport_error: Option<String>,
}

impl Worker {
    pub(super) async fn run(mut self, mut orders: mpsc::UnboundedReceiver<Order>) -> AnyTransport {
        let mut corr = Correlator::default().with_rules(Arc::clone(&self.work.answer_rules));
        if let Some(cover) = self.work.mix.input_cover() {
            corr.read_input_required(cover);
        }
        let mut ledger = Ledger::default();
        let mut renderer = Renderer::new(self.index, self.work.seed);
        let mut seq = 0u64;
        let mut buf = Vec::with_capacity(512);
        let mut batch = BatchWriter::default();
        let mut units = match (&self.work.scenarios, self.work.mix.flows()) {
            (Some(sc), _) => Units::Iterations(Runner::new(sc)),
            (None, Some(rules)) => {
                Units::Calls(Flows::new(Arc::clone(rules), Arc::clone(&self.task_ids)))
            }
            (None, None) => Units::Requests(
                (self.work.named_users && self.work.model == Model::Closed).then(Users::default),
            ),
        };
        if self.work.mix.answers_server_requests() {
            corr.keep_server_requests();
        }
        drop(self.ready.take());
        while let Some(order) = orders.recv().await {
            let Order::Step(order) = order else { continue };
            let mut ctx = Sending {
                corr: &mut corr,
                renderer: &mut renderer,
                seq: &mut seq,
                buf: &mut buf,
                batch: &mut batch,
                worker: self.index,
                workers: self.workers,
                segment: self.work.segment,
                timeout: self.work.timeout,
                per_user: self.work.named_users && self.work.model == Model::Closed,
            };
            self.step(order, &mut ctx, &mut ledger, &mut units, &mut orders)
                .await;
        }
        self.transport
    }

    async fn step(
        &mut self,
        order: StepOrder,
        s: &mut Sending<'_>,
        ledger: &mut Ledger,
        units: &mut Units,
        orders: &mut mpsc::UnboundedReceiver<Order>,
    ) {
        let work = Arc::clone(&self.work);
        // The step begins when the coordinator says, not when the order arrives: on a common
        // clock, at the slot's instant.
        let now = order.start;
        let mut st = StepState {
            phase: if work.warmup.is_zero() {
                Phase::Measure
            } else {
                Phase::Warmup
            },
            measure_start: now + work.warmup,
            drain_began: now,
            second: 0,
            next_second: now + work.warmup + Duration::from_secs(1),
            ready: VecDeque::new(),
            open_batches: VecDeque::new(),
            arrivals: None,
            lag: LatencyHistogram::default(),
            dropped_arrivals: 0,
            dropped_no_worker: 0,
            loop_delay: LatencyHistogram::default(),
            interrupted_at: None,
            transport_error: None,
            order,
        };
        self.start_sending(&mut st, units, now);
        // Made once per step: polling a fresh `cancelled()` each turn would take the token's
        // lock on every event.
        let cancel = self.cancel.clone();
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        // The loop wakes by itself for housekeeping too, on the same precise timer as its
        // sends: one timer, whose lateness is the loop's delay.
        let mut housekeeping = Instant::now() + HOUSEKEEPING;
        let mut timer = SendTimer::new();
        // Set when Ctrl-C came: the units still running are interrupted once the select is
        // over (interrupting a call may send its task's cancel).
        let mut interrupt = false;
        loop {
            let sending = matches!(st.phase, Phase::Warmup | Phase::Measure) && self.down.is_none();
            let next_start = match work.model {
                // A timer wake sends the arrivals of a whole send window, so the timer waits
                // for the first arrival past it.
                Model::Open => st.arrivals.as_ref().map(|a| a.next_due()),
                Model::Closed => st.ready.front().copied(),
            }
            .filter(|_| sending);
            // Iterations' polls and think times, and calls' polls and timeouts, wake the loop
            // too.
            let next_send = match units.next_timer() {
                Some(t) => Some(next_start.map_or(t, |n| n.min(t))),
                None => next_start,
            };
            let wake = next_send.map_or(housekeeping, |t| t.min(housekeeping));
            let mut woke = None;
            let before = st.outstanding(s.corr);
            tokio::select! {
                biased;
                _ = &mut cancelled, if st.interrupted_at.is_none() => {
                    let now = Instant::now();
                    st.interrupted_at = Some(now);
                    interrupt = true;
                    if st.phase != Phase::Drain {
                        st.drain_began = now;
                    }
                    st.phase = Phase::Drain;
                }
                ev = self.transport.next_event() => {
                    self.apply(&mut st, s, ledger, ev);
                    self.apply_received(&mut st, s, ledger, TURN_MAX);
                }
                go = orders.recv(), if st.phase == Phase::WaitGo => match go {
                    Some(Order::Measure(at)) => self.start_measuring(&mut st, units, at),
                    // The coordinator is gone: end the step.
                    _ => st.interrupted_at = Some(Instant::now()),
                },
                _ = timer.wait(Some(wake)) => woke = Some(wake),
            }
            let now = Instant::now();
            // The loop's delay: how late it woke for its timer, or got round to a
            // housekeeping already due while events kept it busy.
            let due = woke.or((now >= housekeeping).then_some(housekeeping));
            if let Some(due) = due.filter(|_| st.phase == Phase::Measure) {
                st.loop_delay.record(now.saturating_duration_since(due));
            }
            if now >= housekeeping {
                housekeeping = now + HOUSEKEEPING;
            }
            if std::mem::take(&mut interrupt) {
                units.interrupt_all(s, &mut self.transport);
            }
            s.corr.expire(now, |id| self.transport.cancel(id));
            units.take_up(&work, s, &mut self.transport, now);
            if work.model == Model::Closed {
                // A client whose request (iteration, call) ended (answered, refused, timed
                // out, failed) may send again after its think time.
                let freed = units
                    .take_freed_users()
                    .unwrap_or_else(|| before.saturating_sub(st.outstanding(s.corr)));
                st.ready
                    .extend(std::iter::repeat_n(now + work.think_time, freed));
            }
            // What fell due before the sending phase ended goes out even when the worker
            // woke after the end (late, its lag recorded): the step's schedule is its load.
            // A timer wake also sends a window ahead; an answer's wake sends only what is due,
            // so the timer stays armed for the first arrival past the window.
            if let Some(end) = st.sending_end(&work).filter(|_| self.down.is_none()) {
                let window = woke.map_or(Duration::ZERO, |_| work.send_window);
                self.send_due(&mut st, s, units, end, window, now);
            }
            if self.advance(&mut st, s, ledger, units, now) {
                break;
            }
        }
    }

    /// Counts one event of the transport.
    fn apply(&mut self, st: &mut StepState, s: &mut Sending<'_>, ledger: &mut Ledger, ev: Event) {
        if let Event::Down { error } = &ev {
            self.down = Some(error.to_string());
        }
        let failure = match &ev {
            Event::Failed { error, .. } if st.transport_error.is_none() => Some(error.to_string()),
            _ => None,
        };
        // A transport that is down ends its requests in flight (`missing`).
        if ledger.apply(s.corr, ev).ended > 0 {
            st.transport_error = st.transport_error.take().or(failure);
        }
    }

    /// Counts the events the transport has ready (read, not yet taken; at most `max`, so a
    /// server that never stops talking cannot hold the loop). Before a drain ends
    /// ([`RECEIVED_MAX`]): a stdio line that came with the last answer (progress after it)
    /// belongs to the phase that asked.
    fn apply_received(
        &mut self,
        st: &mut StepState,
        s: &mut Sending<'_>,
        ledger: &mut Ledger,
        max: usize,
    ) {
        for _ in 0..max {
            let Some(ev) = self.transport.next_event().now_or_never() else {
                return;
            };
            self.apply(st, s, ledger, ev);
        }
    }

    /// Starts the measured time at `at` (the same instant for every worker).
    fn start_measuring(&self, st: &mut StepState, units: &mut Units, at: Instant) {
        st.measure_start = at;
        st.next_second = at + Duration::from_secs(1);
        st.lag = LatencyHistogram::default();
        st.dropped_arrivals = 0;
        st.dropped_no_worker = 0;
        st.loop_delay = LatencyHistogram::default();
        st.phase = Phase::Measure;
        self.start_sending(st, units, at);
    }

    /// Whether a drain is over: nothing in flight and no exchange open (so no answer of this
    /// phase can land in the next), or the timeout spent waiting for stragglers.
    fn drained(&self, st: &StepState, s: &Sending<'_>, iterations: usize, now: Instant) -> bool {
        if let Some(t) = st.interrupted_at {
            return s.corr.in_flight() == 0 || now >= t + INTERRUPT_DRAIN;
        }
        iterations == 0
            && s.corr.in_flight() == 0
            && (self.transport.open_exchanges() == 0
                || now >= st.drain_began + self.work.drain_timeout)
    }

    /// Moves the step through its phases; true when the step is over. A transport that is down
    /// ends the sending at once.
    fn advance(
        &mut self,
        st: &mut StepState,
        s: &mut Sending<'_>,
        ledger: &mut Ledger,
        units: &mut Units,
        now: Instant,
    ) -> bool {
        let work = Arc::clone(&self.work);
        let down = self.down.is_some();
        // Iterations still running at the end of the sending get the graceful stop to
        // finish; warm-up iterations are not a result and stop at once.
        let graceful_over = match st.phase {
            Phase::WarmupDrain => true,
            Phase::Drain => now >= st.drain_began + work.graceful_stop,
            _ => false,
        };
        if graceful_over && units.live() > 0 {
            units.interrupt_all(s, &mut self.transport);
        }
        let iterations = units.live();
        match st.phase {
            Phase::Warmup if now >= st.measure_start || down => {
                st.phase = Phase::WarmupDrain;
                st.drain_began = now;
            }
            Phase::WarmupDrain if self.drained(st, s, iterations, now) => {
                // Forget the warm-up: its requests have all ended, so the identity holds.
                self.apply_received(st, s, ledger, RECEIVED_MAX);
                s.corr.take_stats();
                units.take_stats();
                self.transport.take_counters(&mut Counters::default());
                self.transport
                    .take_token_fetches(&mut LatencyHistogram::default());
                st.transport_error = None;
                st.phase = Phase::WaitGo;
                let _ = self.reports.send(Report::WarmedUp {
                    step: st.order.step,
                });
            }
            Phase::Measure if now >= st.measure_start + work.duration || down => {
                st.phase = Phase::Drain;
                st.drain_began = now;
            }
            _ => {}
        }
        if st.phase == Phase::Measure && now >= st.next_second {
            self.report_second(st, s, units);
        }
        if st.phase == Phase::Drain && self.drained(st, s, iterations, now) {
            self.apply_received(st, s, ledger, RECEIVED_MAX);
            self.end_step(st, s, units);
            return true;
        }
        false
    }

    fn report_second(&mut self, st: &mut StepState, s: &mut Sending<'_>, units: &mut Units) {
        let mut stats = s.corr.take_stats();
        self.transport.take_counters(&mut stats.counters);
        self.transport.take_token_fetches(&mut stats.token_fetch);
        // A warm-up's start-ups count in its step: starting is what a warm-up would hide.
        self.transport
            .take_startups(&mut stats.spawn, &mut stats.connect);
        stats.scenarios = units.take_stats();
        units.open_interval(s);
        let _ = self.reports.send(Report::Second {
            worker: self.index,
            step: st.order.step,
            second: st.second,
            measure_start: st.measure_start,
            stats: Box::new(stats),
            in_flight: s.corr.in_flight() as u64,
        });
        st.second += 1;
        st.next_second += Duration::from_secs(1);
    }

    /// Sends the step's last second (with the drain) and its end. A step interrupted before
    /// its measured time began reports nothing measured: its warm-up is not a result.
    fn end_step(&mut self, st: &mut StepState, s: &mut Sending<'_>, units: &mut Units) {
        let measured = st.interrupted_at.is_none_or(|t| t >= st.measure_start);
        if measured {
            self.report_second(st, s, units);
        } else {
            s.corr.take_stats();
            self.transport.take_counters(&mut Counters::default());
            self.transport
                .take_token_fetches(&mut LatencyHistogram::default());
            self.transport.take_startups(
                &mut LatencyHistogram::default(),
                &mut LatencyHistogram::default(),
            );
            units.take_stats();
        }
        let _ = self.reports.send(Report::StepDone {
            worker: self.index,
            step: st.order.step,
            measured: measured.then(|| Instant::now().saturating_duration_since(st.measure_start)),
            lag: Box::new(std::mem::take(&mut st.lag)),
            loop_delay: Box::new(std::mem::take(&mut st.loop_delay)),
            dropped_arrivals: st.dropped_arrivals,
            dropped_no_worker: st.dropped_no_worker,
            in_flight_at_end: s.corr.in_flight() as u64,
            interrupted: st.interrupted_at.is_some(),
            target_down: self.down.clone(),
            transport_error: st.transport_error.take(),
        });
    }

    /// Sets up the sending side of a phase: every closed-loop client ready now, or the
    /// open-loop arrivals from now.
    fn start_sending(&self, st: &mut StepState, units: &mut Units, now: Instant) {
        let w = &self.work;
        match w.model {
            Model::Closed => {
                if let Units::Requests(Some(users)) = units {
                    users.reset();
                }
                let users = w.segment.share(st.order.level.round() as u64);
                let clients = part(users, self.index.into(), self.workers.into());
                st.ready = std::iter::repeat_n(now, clients as usize).collect();
            }
            Model::Open => {
                let rate = st.order.level;
                let lane = w.segment.lane(self.index, self.workers);
                let seed = w.seed ^ ((st.order.step as u64) << 20) ^ self.index as u64;
                st.arrivals = (rate > 0.0).then(|| Arrivals::new(now, rate, w.spacing, lane, seed));
            }
        }
    }

    /// Starts what is due by `now` and before the phase's `end`: one unit per free virtual
    /// user (closed loop), one per arrival (open loop: those due by `now`, and those due
    /// within `window` of the first of them, so windows tile the schedule; past `max_in_flight`
    /// units in flight the arrival is dropped). A unit is a scenario iteration when the run
    /// has scenarios, else a request or a batch.
    fn send_due(
        &mut self,
        st: &mut StepState,
        s: &mut Sending<'_>,
        units: &mut Units,
        end: Instant,
        window: Duration,
        now: Instant,
    ) {
        let w = Arc::clone(&self.work);
        match w.model {
            Model::Closed => {
                let due = |t: Instant| t <= now && t < end;
                while st.ready.front().is_some_and(|t| due(*t)) && !units.full() {
                    st.ready.pop_front();
                    if let Some(batch) = self.start_one(s, units, now, now) {
                        st.open_batches.push_back(batch);
                    }
                }
            }
            Model::Open => {
                let Some(arrivals) = st.arrivals.as_mut() else {
                    return;
                };
                let cap = w
                    .max_in_flight
                    .div_ceil(self.workers as usize)
                    .max(w.batch_size());
                // An arrival due within the window leaves now, early: its lag is 0 and its
                // latency runs from its departure (never from a later schedule, which would
                // shorten it). The window opens at an arrival already due, on the schedule
                // rather than at the wake, so it never takes in an arrival a whole window
                // after the first: at rates up to one a window, each leaves at its own instant.
                let first = arrivals.next_due();
                let ahead = if first <= now { first + window } else { now };
                let in_window = |t: Instant| t <= now || t < ahead;
                while in_window(arrivals.next_due()) && arrivals.next_due() < end {
                    let due = arrivals.advance();
                    let at_cap = match units {
                        Units::Requests(_) => s.corr.in_flight() + w.batch_size() > cap,
                        _ => units.live() >= cap,
                    };
                    if at_cap {
                        st.dropped_arrivals += 1;
                        continue;
                    }
                    if units.full() {
                        st.dropped_no_worker += 1;
                        continue;
                    }
                    st.lag.record(now.saturating_duration_since(due));
                    self.start_one(s, units, due.min(now), now);
                }
            }
        }
    }

    /// Starts one unit due at `due`: an iteration (run by a closed loop's virtual user), or a
    /// request or batch (returns a batch's ids).
    fn start_one(
        &mut self,
        s: &mut Sending<'_>,
        units: &mut Units,
        due: Instant,
        now: Instant,
    ) -> Option<Vec<Id>> {
        let w = Arc::clone(&self.work);
        let user = w.model == Model::Closed;
        match (units, &w.scenarios) {
            (Units::Iterations(r), Some(sc)) => {
                r.start(sc, s, &mut self.transport, due, now, user);
                None
            }
            (Units::Calls(f), _) => {
                let op = w.mix.pick(&mut s.renderer.rng);
                f.start(op, s, &mut self.transport, due, now, user);
                None
            }
            (Units::Requests(users), _) => self.send_one(s, users.as_mut(), due, now),
            (Units::Iterations(_), None) => None,
        }
    }

    /// Renders, registers and sends one request or batch (as a user of `users`, which
    /// holds its slot until they end); returns a batch's ids.
    fn send_one(
        &mut self,
        s: &mut Sending<'_>,
        mut users: Option<&mut Users>,
        due: Instant,
        now: Instant,
    ) -> Option<Vec<Id>> {
        let w = &self.work;
        // Each request's deadline is its entry's own timeout, else the load's.
        let sent = |op: &MixOp| Sent {
            due,
            written: now,
            deadline: now + op.timeout.unwrap_or(w.timeout),
        };
        s.buf.clear();
        let (slot, owner) = users.as_mut().map(|u| u.take()).unzip();
        let user = slot.and_then(|slot| s.user(slot));
        let mut registered = 0;
        let waiting = match &w.batch {
            None => {
                let (id, seq) = next_id(s.seq, self.index, self.workers, s.segment);
                let op = w.mix.pick(&mut s.renderer.rng);
                let headers = op.render(s.buf, &id, seq, s.renderer);
                let tag = Tag {
                    op: op.op,
                    owner,
                    part_of_call: false,
                    progress: op.progress,
                };
                if s.corr.register_tagged(id.clone(), sent(op), tag).is_ok() {
                    registered = 1;
                    let body = Bytes::copy_from_slice(s.buf);
                    self.transport
                        .send(Outgoing::single(body, Some(id), headers).by(user));
                }
                None
            }
            Some(b) => {
                let batch = &mut *s.batch;
                batch.clear();
                let mut ids = Vec::with_capacity(b.size);
                for _ in 0..b.size {
                    let (id, seq) = next_id(s.seq, self.index, self.workers, s.segment);
                    let op = w.mix.pick(&mut s.renderer.rng);
                    op.render(batch.member(), &id, seq, s.renderer);
                    let tag = Tag {
                        op: op.op,
                        owner,
                        part_of_call: false,
                        progress: op.progress,
                    };
                    if s.corr.register_tagged(id.clone(), sent(op), tag).is_ok() {
                        ids.push(id);
                    }
                }
                for _ in 0..b.notifications {
                    encode_notification(batch.member(), "notifications/cancelled", Some(&b.filler));
                }
                s.corr.batch_sent(b.size);
                let body = Bytes::copy_from_slice(batch.finish());
                // A closed-loop client waits on its batch's ids (unless it holds a slot);
                // an open loop needs no copy.
                let waiting = (w.model == Model::Closed && slot.is_none()).then(|| ids.clone());
                registered = ids.len();
                self.transport.send(Outgoing::batch(body, ids).by(user));
                waiting
            }
        };
        if let (Some(users), Some(slot)) = (users, slot) {
            users.sent(slot, registered);
        }
        waiting
    }
}

/// What one unit of load is in this run.
pub(super) enum Units {
    /// A request or a batch; with named users (closed loop), the users sending them.
    Requests(Option<Users>),
    /// A scenario iteration.
    Iterations(Runner),
    /// A call of the mix that may take several requests (a task, input rounds).
    Calls(Flows),
}

impl Units {
    /// When the earliest poll, think time or call timeout is due.
    fn next_timer(&self) -> Option<Instant> {
        match self {
            Units::Requests(_) => None,
            Units::Iterations(r) => r.next_timer(),
            Units::Calls(f) => f.next_timer(),
        }
    }

    /// Iterations or calls running (a step does not drain before they end).
    fn live(&self) -> usize {
        match self {
            Units::Requests(_) => 0,
            Units::Iterations(r) => r.live(),
            Units::Calls(f) => f.live(),
        }
    }

    fn full(&self) -> bool {
        match self {
            Units::Requests(_) => false,
            Units::Iterations(r) => r.full(),
            Units::Calls(f) => f.full(),
        }
    }

    /// Ends every iteration or call running.
    fn interrupt_all(&mut self, s: &mut Sending<'_>, t: &mut AnyTransport) {
        match self {
            Units::Requests(_) => {}
            Units::Iterations(r) => r.interrupt_all(),
            Units::Calls(f) => f.interrupt_all(s, t),
        }
    }

    /// Takes up the answers the correlator has for them, and the timers that are due.
    fn take_up(
        &mut self,
        work: &Workload,
        s: &mut Sending<'_>,
        t: &mut AnyTransport,
        now: Instant,
    ) {
        match (self, &work.scenarios) {
            (Units::Iterations(r), Some(sc)) => {
                r.settle(sc, s, t, now);
                r.fire_timers(sc, s, t, now);
                super::asked::answer_all(s.corr, t, work.mix.canned_input());
            }
            (Units::Calls(f), _) => {
                f.settle(s, t);
                f.fire_timers(s, t, now);
            }
            (Units::Requests(users), _) => {
                if let Some(users) = users {
                    users.settle(s.corr);
                }
                super::asked::answer_all(s.corr, t, work.mix.canned_input());
            }
            _ => {}
        }
    }

    /// Closed loop: virtual users freed since the last call; `None` when units are requests
    /// of users holding no slot (the correlator's count of requests in flight tells).
    fn take_freed_users(&mut self) -> Option<usize> {
        match self {
            Units::Requests(users) => users.as_mut().map(Users::take_freed),
            Units::Iterations(r) => Some(r.take_freed_users()),
            Units::Calls(f) => Some(f.take_freed_users()),
        }
    }

    /// Hands over the scenarios' counts so far (empty for other units).
    fn take_stats(&mut self) -> Vec<ScenarioStats> {
        match self {
            Units::Iterations(r) => r.take_stats(),
            _ => Vec::new(),
        }
    }

    /// A new interval's stats begin.
    fn open_interval(&self, s: &mut Sending<'_>) {
        if let Units::Calls(f) = self {
            f.carry_peak(s);
        }
    }
}

/// The per-worker mutable state a send touches.
pub(super) struct Sending<'a> {
    pub corr: &'a mut Correlator,
    pub renderer: &'a mut Renderer,
    pub seq: &'a mut u64,
    pub buf: &'a mut Vec<u8>,
    /// Reused for every batch a worker sends.
    pub batch: &'a mut BatchWriter,
    pub worker: u32,
    pub workers: u32,
    /// The run's segment (request sequence numbers are unique over the segments).
    pub segment: Segment,
    /// How long a request may wait for its answer when its entry sets no timeout of its own.
    pub timeout: Duration,
    /// Each virtual user's requests name it (closed loop: a token or a child of its own).
    pub per_user: bool,
}

impl Sending<'_> {
    /// The virtual user the unit in `slot` of this worker's units stands for, when each
    /// user carries its own token: numbered across the workers (slot × workers + worker),
    /// so the c users of a step are users 0 to c − 1 whichever workers run them.
    pub(super) fn user(&self, slot: u32) -> Option<u32> {
        self.per_user.then(|| slot * self.workers + self.worker)
    }
}

/// A fresh id (unique in the run: the worker's index sits in the high bits) and the
/// request's run-wide sequence number for `{{seq}}` (unique over the segments too).
pub(super) fn next_id(seq: &mut u64, worker: u32, workers: u32, segment: Segment) -> (Id, u64) {
    let local = *seq;
    *seq += 1;
    let id = Id::Num(((worker as i64) << 40) | local as i64);
    (id, segment.seq(local * workers as u64 + worker as u64))
}

impl StepState {
    /// When the current sending phase ends: the warm-up at the measured time's start, the
    /// measured time after its duration; `None` when the worker is not sending.
    fn sending_end(&self, work: &Workload) -> Option<Instant> {
        match self.phase {
            Phase::Warmup => Some(self.measure_start),
            Phase::Measure => Some(self.measure_start + work.duration),
            _ => None,
        }
    }

    /// Closed loop: virtual clients waiting for an answer. With batches, a client waits
    /// until every request of its batch has ended.
    fn outstanding(&mut self, c: &Correlator) -> usize {
        if self.open_batches.is_empty() {
            return c.in_flight();
        }
        self.open_batches
            .retain(|ids| ids.iter().any(|id| c.is_pending(id)));
        self.open_batches.len()
    }
}

/// The params of the filler notifications mixed into batches.
pub(super) fn batch_filler() -> Box<RawValue> {
    RawValue::from_string(r#"{"requestId":"mcpload-batch-filler","reason":"batch filler"}"#.into())
        .expect("valid JSON")
}
