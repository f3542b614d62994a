//! Where the coordinator hands what it measured as soon as it is known: each step's start,
//! every second of a step, every finished step as measured and then with its verdict, and the
//! sweep's end. The run
//! folder writes them down and the progress display shows them; the engine knows neither.

use super::SweepEnd;
use crate::analysis::JudgedStep;
use crate::metrics::{
    Counters, FlowStats, LatencyHistogram, Model, OpStats, ScenarioStats, Stats, StepFacts,
};
use std::time::Duration;

/// Why a sink could not take an event (a file that could not be written): the sweep stops.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// A step about to run.
#[derive(Clone, Copy, Debug)]
pub struct StepStart {
    /// 1-based, of `steps`.
    pub step: u32,
    pub steps: usize,
    pub model: Model,
    /// Concurrency (closed loop) or arrivals per second (open loop).
    pub level: f64,
    /// Measured time planned for the step.
    pub planned: Duration,
}

/// One second of one step, merged over the workers.
#[derive(Clone, Copy, Debug)]
pub struct Second<'a> {
    /// The step it belongs to.
    pub step: u32,
    /// When the second began, measured from the run's start (the same clock for every step).
    pub start: Duration,
    /// How long it lasted (1 s, or less for the last part of a step).
    pub length: Duration,
    /// The counts of this second alone (not cumulative).
    pub counters: &'a Counters,
    /// Requests in flight when the second ended.
    pub in_flight: u64,
    /// Pairing latencies recorded during this second alone. The intervals of a step must add
    /// up to the step's latency histogram: latency.hlog is where report.html reads it back.
    pub latency: &'a LatencyHistogram,
    /// This second's figures per operation, by operation number (empty where not kept: a
    /// merged run's seconds).
    pub ops: &'a [OpStats],
    /// This second's scenario iterations, by scenario number (empty where none ran or not
    /// kept).
    pub scenarios: &'a [ScenarioStats],
    /// This second's tasks and input rounds, when any ran (and were kept).
    pub flows: Option<&'a FlowStats>,
}

/// A finished step's measured window on the wall clock: from its measured time's start to the
/// end of its drain, in Unix milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepWindow {
    pub step: u32,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
}

/// A finished step as measured, before it is judged: everything the engine merged over its
/// workers. Segments of a run on several machines are added up from this, exactly as the
/// engine adds up workers (`mcpload merge`).
#[derive(Clone, Debug)]
pub struct MeasuredStep {
    pub facts: StepFacts,
    pub stats: Stats,
    /// Open loop: how late each send left compared with its schedule (empty in closed loop).
    pub lag: LatencyHistogram,
}

/// A receiver of a sweep's events, each handed over as it happens (so a crash or Ctrl-C loses
/// nothing already measured).
pub trait StepSink: Send {
    /// On a common clock (`--start-at`): the first step begins `late` after its instant, on
    /// this process's clock.
    fn clock_started(&mut self, _late: Duration) -> Result<(), SinkError> {
        Ok(())
    }
    /// A step is about to run.
    fn step_started(&mut self, _start: &StepStart) -> Result<(), SinkError> {
        Ok(())
    }
    /// A second of the current step ended.
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError>;
    /// A step ended: its measured window (just before it is judged).
    fn step_window(&mut self, _window: &StepWindow) -> Result<(), SinkError> {
        Ok(())
    }
    /// A step ended; it is judged next.
    fn step_measured(&mut self, _step: &MeasuredStep) -> Result<(), SinkError> {
        Ok(())
    }
    /// A step ended and was judged.
    fn step_ended(&mut self, step: &JudgedStep) -> Result<(), SinkError>;
    /// The sweep ended; no event follows.
    fn sweep_ended(&mut self, _end: &SweepEnd) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Several sinks, each told every event in the order given; the first error stops the telling.
pub struct FanOut<'a>(pub Vec<&'a mut dyn StepSink>);

impl StepSink for FanOut<'_> {
    fn clock_started(&mut self, late: Duration) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.clock_started(late))
    }
    fn step_started(&mut self, start: &StepStart) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.step_started(start))
    }
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.second(second))
    }
    fn step_window(&mut self, window: &StepWindow) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.step_window(window))
    }
    fn step_measured(&mut self, step: &MeasuredStep) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.step_measured(step))
    }
    fn step_ended(&mut self, step: &JudgedStep) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.step_ended(step))
    }
    fn sweep_ended(&mut self, end: &SweepEnd) -> Result<(), SinkError> {
        self.0.iter_mut().try_for_each(|s| s.sweep_ended(end))
    }
}
