//! The load engine: workers that fire the mix at the target, one step at a time, and the
//! coordinator that merges their once-a-second reports, has each finished step judged
//! (`analysis`), decides whether the sweep goes on, and hands everything to a [`StepSink`].
//! The engine never writes files, formats or prints.

mod asked;
mod flow;
pub mod health;
mod scenario;
mod segment;
mod sink;
mod slots;
mod timer;
mod users;
mod worker;

pub use segment::{Clock, Segment, SlotShape};
/// The longest `send_window`: arrivals leave up to the window early, in bunches of the
/// window's arrivals; past a few milliseconds that is another load than the one asked for.
pub const MAX_SEND_WINDOW: Duration = Duration::from_millis(5);
pub use sink::{FanOut, MeasuredStep, Second, SinkError, StepSink, StepStart, StepWindow};

use crate::analysis::{StopCriteria, SweepJudge};
use crate::correlator::AnswerRules;
use crate::load::mix::Mix;
use crate::load::scenario::Scenarios;
use crate::metrics::{self, GeneratorFacts, LatencyHistogram, Model, Observed, Stats, StepFacts};
use crate::profile::Spacing;
use crate::transport::{AnyTransport, Transport};
use health::ProcessSample;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Everything the workers need that does not change between steps.
#[derive(Debug)]
pub struct Workload {
    pub model: Model,
    pub mix: Mix,
    /// When the profile has scenarios, every virtual user (or arrival) runs iterations of
    /// them, the mix's entries included as one-step scenarios; the mix alone is not drawn.
    pub scenarios: Option<Scenarios>,
    /// Every operation's name, by operation number (the mix's and the scenarios' calls).
    pub op_names: Vec<String>,
    /// How long iterations still running when the sending ends may take to finish before
    /// they count as `interrupted`.
    pub graceful_stop: Duration,
    pub batch: Option<BatchShape>,
    pub duration: Duration,
    pub warmup: Duration,
    /// A request's timeout, unless its mix entry sets its own.
    pub timeout: Duration,
    /// The longest a drain waits for requests still in flight: the longest request timeout
    /// of the load's and the mix entries' own.
    pub drain_timeout: Duration,
    pub think_time: Duration,
    pub spacing: Spacing,
    /// Open loop: a worker sends at most once per this window (zero: at each arrival).
    pub send_window: Duration,
    /// This segment's share of the profile's `max_in_flight` (the whole of it unsegmented).
    pub max_in_flight: usize,
    pub seed: u64,
    /// Which share of every step this instance runs.
    pub segment: Segment,
    /// Closed loop: each virtual user's requests say which user sent them, for a token of
    /// its own (`token_per_user`) or a child process of its own (`process = "per_user"`).
    pub named_users: bool,
    /// How results are read: tool errors, output schemas.
    pub answer_rules: Arc<AnswerRules>,
}

impl Workload {
    fn batch_size(&self) -> usize {
        self.batch.as_ref().map_or(1, |b| b.size)
    }

    /// What bounds each part of a step, for the slots of a common clock. A warm-up's drain
    /// ends its iterations at once and waits at most a request's timeout; a step's drain
    /// gives iterations and calls (tasks, input rounds) the graceful stop, then their last
    /// requests the timeout; requests alone, the timeout.
    pub fn slot_shape(&self) -> SlotShape {
        let lasting_units = self.scenarios.is_some() || self.mix.flows().is_some();
        SlotShape {
            warmup: self.warmup,
            duration: self.duration,
            warmup_drain: self.drain_timeout,
            drain: self.drain_timeout
                + if lasting_units {
                    self.graceful_stop
                } else {
                    Duration::ZERO
                },
        }
    }
}

/// Every send is a JSON array of `size` requests and `notifications` notifications.
#[derive(Debug)]
pub struct BatchShape {
    pub size: usize,
    pub notifications: usize,
    filler: Box<RawValue>,
}

impl BatchShape {
    pub fn new(size: usize, notifications: usize) -> Self {
        BatchShape {
            size,
            notifications,
            filler: worker::batch_filler(),
        }
    }
}

/// What the coordinator tells a worker.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Order {
    /// Run this step.
    Step(StepOrder),
    /// Every worker's warm-up has drained: start the measured time at this instant.
    Measure(Instant),
}

/// One step as the coordinator hands it to every worker.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepOrder {
    pub step: u32,
    /// Concurrency (closed loop) or arrivals per second (open loop), for the whole step of
    /// every segment: each worker takes its segment's share of it.
    pub level: f64,
    /// When the step (its warm-up) begins: its slot's instant on a common clock, else when
    /// the coordinator gave the order.
    pub start: Instant,
}

/// What workers tell the coordinator.
#[derive(Debug)]
pub(crate) enum Report {
    /// The worker's warm-up requests and exchanges have all ended.
    WarmedUp { step: u32 },
    /// One measured second (the last one of a step also holds the drain).
    Second {
        worker: u32,
        step: u32,
        second: u32,
        /// When the worker's measured phase began (second 0 starts here).
        measure_start: Instant,
        stats: Box<Stats>,
        in_flight: u64,
    },
    StepDone {
        worker: u32,
        step: u32,
        /// From the start of the measured phase to the end of the drain; `None` when the step
        /// was interrupted before its measured time began.
        measured: Option<Duration>,
        /// Open loop: how late each send left compared with its schedule.
        lag: Box<LatencyHistogram>,
        /// How late the worker loop's own timer wakes ran.
        loop_delay: Box<LatencyHistogram>,
        dropped_arrivals: u64,
        /// Open loop: arrivals dropped for want of a free slot.
        dropped_no_worker: u64,
        in_flight_at_end: u64,
        interrupted: bool,
        /// Why the worker's transport is down for good, when it is.
        target_down: Option<String>,
        /// The first transport failure that ended requests of the step, when one did.
        transport_error: Option<String>,
    },
}

/// How a sweep ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SweepEnd {
    /// Every step ran, or the sweep stopped after a failed step as asked.
    Complete,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// A worker stopped in the middle of a step (it panicked): the run cannot go on.
    Aborted(String),
}

/// The steps of a sweep and when it stops early.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// One step per level: concurrency (closed loop) or arrivals per second (open loop).
    pub levels: Vec<f64>,
    /// What makes a step `failed`.
    pub criteria: StopCriteria,
    /// End the sweep after the first failed step.
    pub stop_on_failure: bool,
    /// The common clock's start (`--start-at`): step `k` begins on its slot's instant.
    pub start_at: Option<SystemTime>,
}

/// Runs every level as one step, handing each second, each judged step and the end to `sink`
/// as they happen. Transports are handed back for closing.
pub async fn sweep(
    work: Arc<Workload>,
    plan: &Sweep,
    transports: Vec<AnyTransport>,
    sink: &mut dyn StepSink,
    cancel: CancellationToken,
) -> Result<(SweepEnd, Vec<AnyTransport>), SinkError> {
    let workers = transports.len() as u32;
    let clock = plan.start_at.map(|at| Clock::new(at, work.slot_shape()));
    // Seconds count from the common start when there is one, so that step k's seconds line
    // up over the segments.
    let run_start = clock.as_ref().map_or_else(Instant::now, Clock::origin);
    let wall = segment::WallClock::now();
    let (report_tx, reports) = mpsc::unbounded_channel();
    let mut crew = Crew {
        orders: Vec::new(),
        reports,
        tasks: JoinSet::new(),
    };
    let task_ids = Arc::new(flow::TaskIds::default());
    // Each worker holds a sender and drops it once ready: the channel closes when all are.
    let (ready_tx, mut ready) = mpsc::channel::<()>(1);
    for (i, transport) in transports.into_iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel();
        crew.orders.push(tx);
        let w = worker::Worker {
            index: i as u32,
            workers,
            transport,
            work: Arc::clone(&work),
            reports: report_tx.clone(),
            cancel: cancel.clone(),
            down: None,
            task_ids: Arc::clone(&task_ids),
            ready: Some(ready_tx.clone()),
        };
        crew.tasks.spawn(async move { (i, w.run(rx).await) });
    }
    drop(report_tx);
    drop(ready_tx);
    // Every worker ready (or gone) before the first step's clock starts.
    let _ = ready.recv().await;
    let mut judge = SweepJudge::new(plan.criteria.clone())
        .naming_ops(work.op_names.clone())
        .naming_scenarios(
            work.scenarios
                .as_ref()
                .map_or_else(Vec::new, Scenarios::names),
        );
    let mut end = SweepEnd::Complete;
    for (i, level) in plan.levels.iter().enumerate() {
        if cancel.is_cancelled() {
            end = SweepEnd::Interrupted;
            break;
        }
        // On a common clock the step waits for its slot; a step late (the first one after a
        // late start, or one after a drain past its bound) begins at once.
        let slot = clock.map(|c| run_start + c.slot_offset(i));
        if let Some(at) = slot.filter(|at| *at > Instant::now()) {
            let mut timer = timer::SendTimer::new();
            tokio::select! {
                _ = timer.wait(Some(at)) => {}
                _ = cancel.cancelled() => {
                    end = SweepEnd::Interrupted;
                    break;
                }
            }
        }
        let start = Instant::now();
        if let (0, Some(at)) = (i, slot) {
            sink.clock_started(start.saturating_duration_since(at))?;
        }
        let order = StepOrder {
            step: i as u32 + 1,
            level: *level,
            start: slot.map_or(start, |at| at.max(start)),
        };
        sink.step_started(&StepStart {
            step: order.step,
            steps: plan.levels.len(),
            model: work.model,
            level: share_of_level(&work, *level),
            planned: work.duration,
        })?;
        for o in &crew.orders {
            let _ = o.send(Order::Step(order));
        }
        // The measured time starts on the schedule even when the step began a little late.
        let measure_at = clock.zip(slot).map(|(c, at)| at + c.measure_offset);
        let collected = collect_step(&mut crew, order, measure_at, &work, sink, run_start).await?;
        let (step, window) = match collected {
            StepOutcome::Done(step, window) => (*step, window),
            StepOutcome::NotMeasured => {
                end = SweepEnd::Interrupted;
                break;
            }
            StepOutcome::WorkerLost(why) => {
                end = SweepEnd::Aborted(why);
                break;
            }
        };
        sink.step_window(&StepWindow {
            step: order.step,
            start_unix_ms: wall.unix_ms(window.0),
            end_unix_ms: wall.unix_ms(window.1),
        })?;
        sink.step_measured(&step)?;
        let judged = judge.judge(step.facts, &step.stats);
        sink.step_ended(&judged)?;
        if judged.figures.interrupted {
            end = SweepEnd::Interrupted;
            break;
        }
        // Nothing can be measured against a target that is down, whatever stop_on_failure
        // (which the plan turns off for a segment: a segment judges only its share, so every
        // segment runs the whole schedule and the merge judges the whole).
        if judged.figures.target_down.is_some() || plan.stop_on_failure && judged.stop() {
            break;
        }
    }
    sink.sweep_ended(&end)?;
    drop(crew.orders);
    let mut back: Vec<(usize, AnyTransport)> = Vec::new();
    while let Some(joined) = crew.tasks.join_next().await {
        if let Ok(t) = joined {
            back.push(t);
        }
    }
    back.sort_by_key(|(i, _)| *i);
    Ok((end, back.into_iter().map(|(_, t)| t).collect()))
}

/// The coordinator's side of the workers: their order channels, their reports, their tasks.
struct Crew {
    orders: Vec<mpsc::UnboundedSender<Order>>,
    reports: mpsc::UnboundedReceiver<Report>,
    tasks: JoinSet<(usize, AnyTransport)>,
}

/// What this instance runs of a step's level: its segment's share of the virtual users or of
/// the rate (the steps' `concurrency` and `target_rate` columns).
fn share_of_level(work: &Workload, level: f64) -> f64 {
    match work.model {
        Model::Closed => work.segment.share(level.round() as u64) as f64,
        Model::Open => work.segment.rate(level),
    }
}

enum StepOutcome {
    /// The step, and its measured time's start and the end of its drain.
    Done(Box<MeasuredStep>, (Instant, Instant)),
    /// Interrupted before its measured time began: nothing to record.
    NotMeasured,
    /// A worker task ended in the middle of the step.
    WorkerLost(String),
}

/// One second of a step, merged over the workers that reported it.
struct SecondSlot {
    stats: Box<Stats>,
    in_flight: u64,
    /// Sum of each worker's in-flight peak in this second.
    peak_sum: u64,
    /// Sum of each worker's peak of live tasks in this second.
    task_peak_sum: u64,
}

/// Gathers one step's reports from every worker: starts every worker's measured time at once
/// when all have drained their warm-up (at `measure_at` on a common clock, or at once if that
/// has passed), and hands each second to `sink` once all workers sent it.
async fn collect_step(
    crew: &mut Crew,
    order: StepOrder,
    measure_at: Option<Instant>,
    work: &Workload,
    sink: &mut dyn StepSink,
    run_start: Instant,
) -> Result<StepOutcome, SinkError> {
    let workers = crew.orders.len();
    let mut total = Stats::default();
    let mut seconds: BTreeMap<u32, SecondSlot> = BTreeMap::new();
    let mut step_start: Option<Instant> = None;
    let mut peak = 0u64;
    let mut task_peak = 0u64;
    let mut lag = LatencyHistogram::default();
    let mut loop_delay = LatencyHistogram::default();
    let mut dropped_no_worker = 0u64;
    // The process as the measured time began (with no warm-up, now): what the generator
    // cost itself from there.
    let mut measured_from = work.warmup.is_zero().then(ProcessSample::take).flatten();
    let mut facts = StepFacts {
        step: order.step,
        model: work.model,
        concurrency: (work.model == Model::Closed)
            .then(|| share_of_level(work, order.level) as u64),
        target_rate: (work.model == Model::Open).then(|| share_of_level(work, order.level)),
        duration_s: 0.0,
        schedule_lag_p99_ms: None,
        dropped_arrivals: (work.model == Model::Open).then_some(0),
        schedule_lag_p50_ms: None,
        schedule_lag_max_ms: None,
        generator: GeneratorFacts::default(),
        in_flight_at_end: 0,
        interrupted: false,
        target_down: None,
        transport_error: None,
    };
    let mut measured: Option<Duration> = None;
    let mut warmed = 0;
    // Per worker: the last second it reported, and whether it finished the step.
    let mut last_second_of: Vec<Option<u32>> = vec![None; workers];
    let mut finished = vec![false; workers];
    while finished.iter().any(|f| !f) {
        let r = tokio::select! {
            r = crew.reports.recv() => r,
            j = crew.tasks.join_next() => {
                let why = match j {
                    Some(Err(e)) if e.is_panic() => "a worker panicked",
                    _ => "a worker stopped",
                };
                return Ok(StepOutcome::WorkerLost(format!("{why} during step {}", order.step)));
            }
        };
        let Some(r) = r else {
            return Ok(StepOutcome::WorkerLost("every worker stopped".into()));
        };
        match r {
            Report::WarmedUp { step } if step == order.step => {
                warmed += 1;
                if warmed == workers {
                    measured_from = ProcessSample::take();
                    let now = Instant::now();
                    let at = measure_at.map_or(now, |m| m.max(now));
                    for o in &crew.orders {
                        let _ = o.send(Order::Measure(at));
                    }
                }
            }
            Report::Second {
                worker,
                step,
                second,
                measure_start,
                stats,
                in_flight,
            } if step == order.step => {
                total += &*stats;
                step_start = Some(step_start.map_or(measure_start, |s| s.min(measure_start)));
                let peak = stats.counters.in_flight_max;
                let task_peak = stats
                    .flows
                    .as_ref()
                    .map_or(0, |f| f.counters.tasks_live_max);
                // The second's first report becomes its slot: a slot made empty and added to
                // zeroes its histograms anew each second, and the coordinator's once-a-second
                // work then held up a worker sharing its core (issue #24).
                let slot = match seconds.entry(second) {
                    Entry::Vacant(v) => v.insert(SecondSlot {
                        stats,
                        in_flight: 0,
                        peak_sum: 0,
                        task_peak_sum: 0,
                    }),
                    Entry::Occupied(o) => {
                        let slot = o.into_mut();
                        *slot.stats += &*stats;
                        slot
                    }
                };
                slot.in_flight += in_flight;
                slot.peak_sum += peak;
                slot.task_peak_sum += task_peak;
                last_second_of[worker as usize] = Some(second);
            }
            Report::StepDone {
                worker,
                step,
                measured: m,
                lag: l,
                loop_delay: d,
                dropped_arrivals,
                dropped_no_worker: no_worker,
                in_flight_at_end,
                interrupted,
                target_down,
                transport_error,
            } if step == order.step => {
                finished[worker as usize] = true;
                if let Some(m) = m {
                    measured = Some(measured.map_or(m, |d| d.max(m)));
                }
                lag += &*l;
                loop_delay += &*d;
                dropped_no_worker += no_worker;
                if let Some(d) = facts.dropped_arrivals.as_mut() {
                    *d += dropped_arrivals;
                }
                facts.in_flight_at_end += in_flight_at_end;
                facts.interrupted |= interrupted;
                facts.target_down = facts.target_down.take().or(target_down);
                facts.transport_error = facts.transport_error.take().or(transport_error);
            }
            _ => {}
        }
        // A second is handed over once every worker has moved past it or finished the step (a
        // worker's last second also holds the drain, so its length is known only then).
        while let Some((&sec, _)) = seconds.first_key_value() {
            let complete = (0..workers)
                .all(|w| finished[w] || last_second_of[w].is_some_and(|last| last > sec));
            if !complete {
                break;
            }
            let (_, mut slot) = seconds.pop_first().expect("peeked");
            // Workers keep their own peaks: their sum bounds the step's true peak from above.
            slot.stats.counters.in_flight_max = slot.peak_sum;
            peak = peak.max(slot.peak_sum);
            task_peak = task_peak.max(slot.task_peak_sum);
            let last = seconds.is_empty() && finished.iter().all(|f| *f);
            let offset = Duration::from_secs(sec as u64);
            let length = match (last, measured) {
                (true, Some(m)) => m.saturating_sub(offset).max(Duration::from_millis(1)),
                _ => Duration::from_secs(1),
            };
            let base =
                step_start.map_or(Duration::ZERO, |s| s.saturating_duration_since(run_start));
            sink.second(&Second {
                step: order.step,
                start: base + offset,
                length,
                counters: &slot.stats.counters,
                in_flight: slot.in_flight,
                latency: &slot.stats.latency,
                ops: &slot.stats.ops,
                scenarios: &slot.stats.scenarios,
                flows: slot.stats.flows.as_deref(),
            })?;
        }
    }
    let (Some(measured), Some(start)) = (measured, step_start) else {
        return Ok(StepOutcome::NotMeasured);
    };
    facts.duration_s = measured.as_secs_f64();
    total.counters.in_flight_max = peak;
    if let Some(f) = total.flows.as_mut() {
        f.counters.tasks_live_max = task_peak;
    }
    facts.set_lag(&lag);
    let cost = measured_from
        .zip(ProcessSample::take())
        .and_then(|(from, to)| from.cost_until(&to));
    let open = work.model == Model::Open;
    facts.generator = metrics::judge(&Observed {
        lag: open.then_some(&lag),
        loop_delay: &loop_delay,
        p50_us: (!total.latency.is_empty())
            .then(|| total.latency.histogram().value_at_quantile(0.5)),
        dropped_no_worker: open.then_some(dropped_no_worker),
        cpu_pct: cost.map(|c| c.cpu_pct),
        wait_pct: cost.map(|c| c.wait_pct),
        cores: cost.map(|c| c.cores),
        load_thread_pct: cost.and_then(|c| c.load_thread_pct),
    });
    Ok(StepOutcome::Done(
        Box::new(MeasuredStep {
            facts,
            stats: total,
            lag,
        }),
        (start, start + measured),
    ))
}

/// Closes every transport (DELETE of legacy sessions, a child's stdin closed and reaped).
pub async fn close_all(transports: &mut [AnyTransport]) {
    for t in transports {
        t.close().await;
    }
}
