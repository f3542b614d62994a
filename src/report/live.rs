//! The live view of a run, fed once a second as a [`StepSink`]: on a terminal a full screen
//! (ratatui) with the step, rates, rolling latency, error classes, a latency chart, every
//! threshold's state and the generator's health, where `q` or Ctrl-C stops the run as the
//! first signal does; with no terminal, `CI` set or `--quiet`, a plain line every few seconds
//! on stderr, or nothing, and never an escape code.

use super::terminal::{load_phrase, ms, rps};
use crate::analysis::{GateResult, RunFigures, Selector, Thresholds};
use crate::analysis::{JudgedStep, Knee};
use crate::engine::{Second, SinkError, StepSink, StepStart, SweepEnd};
use crate::metrics::{
    Counters, LatencyHistogram, Model, OpSummary, ScenarioSummary, StepSummary, Verdict,
};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Sparkline, Wrap};
use ratatui::{DefaultTerminal, Frame};
use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Seconds the rolling latency figures cover.
pub const ROLLING_SECONDS: usize = 5;
/// Seconds the latency chart shows.
const CHART_SECONDS: usize = 120;
/// Rows of the latency chart, its border included.
const CHART_ROWS: u16 = 10;
/// How often the plain form prints a line.
const PLAIN_EVERY: Duration = Duration::from_secs(5);
/// Exit code of a run quit at once by a second `q` or Ctrl-C (as by a second signal).
const EXIT_INTERRUPTED: i32 = 130;

/// How a run is shown while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveMode {
    /// The full screen: stdout and stdin are a terminal, not `CI`, not `--quiet`.
    Screen,
    /// One plain line on stderr every few seconds: no terminal, or `CI` set.
    Plain,
    /// Nothing: `--quiet`.
    Hidden,
}

impl LiveMode {
    /// The mode for this process: `quiet` hides, a terminal (stdout and stdin) shows the
    /// screen unless the `CI` variable is set to anything but empty, `0` or `false`.
    pub fn detect(quiet: bool) -> LiveMode {
        let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
        if quiet {
            LiveMode::Hidden
        } else if !ci && std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
            LiveMode::Screen
        } else {
            LiveMode::Plain
        }
    }
}

/// One second's figures kept for the chart and the rolling window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct SecondPoint {
    responses_per_s: f64,
    p99_us: u64,
}

/// A threshold's state as the live view shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateState {
    Passing,
    Failing,
    NoData,
    /// A check's gate: judged once the run has ended.
    AtTheEnd,
}

impl GateState {
    fn word(self) -> &'static str {
        match self {
            GateState::Passing => "passing",
            GateState::Failing => "failing",
            GateState::NoData => "no data",
            GateState::AtTheEnd => "at the end",
        }
    }

    fn style(self) -> Style {
        match self {
            GateState::Passing => Style::new().fg(Color::Green),
            GateState::Failing => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            GateState::NoData | GateState::AtTheEnd => Style::new().fg(Color::DarkGray),
        }
    }
}

/// Everything the view shows, kept up to date by the sink's events; drawn by [`draw`].
#[derive(Debug)]
pub struct LiveState {
    name: String,
    thresholds: Thresholds,
    start: Option<StepStart>,
    /// Measured time of the current step so far (the seconds handed over).
    elapsed: Duration,
    in_flight: u64,
    /// The current step's counts so far.
    counters: Counters,
    /// The last seconds' latency histograms, newest last, at most [`ROLLING_SECONDS`].
    rolling: VecDeque<LatencyHistogram>,
    /// The last seconds, newest last, at most [`CHART_SECONDS`] (across steps).
    points: VecDeque<SecondPoint>,
    steps: Vec<StepSummary>,
    ops: Vec<OpSummary>,
    scenarios: Vec<ScenarioSummary>,
    knee: Knee,
    gates: Vec<(String, GateState)>,
    /// Set once a stop was asked for from the screen.
    stopping: bool,
}

/// Rolling latency over the last seconds, in ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rolling {
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Responses per second over the same seconds.
    pub responses_per_s: f64,
}

impl LiveState {
    /// A view of the run `name` with its `thresholds` (each `no data` until a step ends).
    pub fn new(name: &str, thresholds: &Thresholds) -> LiveState {
        let mut state = LiveState {
            name: name.to_owned(),
            thresholds: thresholds.clone(),
            start: None,
            elapsed: Duration::ZERO,
            in_flight: 0,
            counters: Counters::default(),
            rolling: VecDeque::with_capacity(ROLLING_SECONDS),
            points: VecDeque::with_capacity(CHART_SECONDS),
            steps: Vec::new(),
            ops: Vec::new(),
            scenarios: Vec::new(),
            knee: Knee::default(),
            gates: Vec::new(),
            stopping: false,
        };
        state.judge_gates();
        state
    }

    fn step_started(&mut self, start: &StepStart) {
        self.start = Some(*start);
        self.elapsed = Duration::ZERO;
        self.in_flight = 0;
        self.counters = Counters::default();
        self.rolling.clear();
    }

    fn second(&mut self, s: &Second<'_>) {
        self.elapsed += s.length;
        self.in_flight = s.in_flight;
        self.counters += s.counters;
        // The oldest second's histogram is reused for the newest: no allocation a second.
        let mut newest = if self.rolling.len() == ROLLING_SECONDS {
            self.rolling.pop_front().unwrap_or_default()
        } else {
            LatencyHistogram::default()
        };
        newest.reset();
        newest += s.latency;
        self.rolling.push_back(newest);
        if self.points.len() == CHART_SECONDS {
            self.points.pop_front();
        }
        let secs = s.length.as_secs_f64();
        self.points.push_back(SecondPoint {
            responses_per_s: if secs > 0.0 {
                s.counters.responses as f64 / secs
            } else {
                0.0
            },
            p99_us: s.latency.histogram().value_at_quantile(0.99),
        });
    }

    fn step_ended(&mut self, step: &JudgedStep) {
        self.steps.push(step.figures.clone());
        self.ops.extend(step.ops.iter().cloned());
        self.scenarios.extend(step.scenarios.iter().cloned());
        self.knee = step.knee.clone();
        self.judge_gates();
    }

    /// Every threshold over the steps finished so far (a check's at the run's end).
    fn judge_gates(&mut self) {
        let figures = RunFigures {
            steps: &self.steps,
            ops: &self.ops,
            scenarios: &self.scenarios,
            knee: &self.knee,
            checks: &[],
        };
        let results = self.thresholds.evaluate(&figures);
        self.gates = self
            .thresholds
            .0
            .iter()
            .zip(results)
            .map(|(t, r)| {
                let state = if matches!(t.selector, Selector::Check(_)) {
                    GateState::AtTheEnd
                } else {
                    gate_state(&r, self.steps.is_empty())
                };
                (r.threshold, state)
            })
            .collect();
    }

    /// Latency and rate over the last [`ROLLING_SECONDS`] seconds of the current step.
    pub fn rolling(&self) -> Rolling {
        let mut merged = LatencyHistogram::default();
        for h in &self.rolling {
            merged += h;
        }
        let at = |q: f64| {
            (!merged.is_empty()).then(|| merged.histogram().value_at_quantile(q) as f64 / 1000.0)
        };
        let seconds = self.rolling.len();
        let n = self.points.len();
        let responses: f64 = self
            .points
            .iter()
            .skip(n.saturating_sub(seconds))
            .map(|p| p.responses_per_s)
            .sum();
        Rolling {
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: (!merged.is_empty()).then(|| merged.histogram().max() as f64 / 1000.0),
            responses_per_s: if seconds == 0 {
                0.0
            } else {
                responses / seconds as f64
            },
        }
    }

    /// Each threshold as written with its state.
    pub fn gates(&self) -> &[(String, GateState)] {
        &self.gates
    }

    /// The one line of the plain form.
    pub fn plain_line(&self) -> String {
        let r = self.rolling();
        let c = &self.counters;
        format!(
            "mcpload: {} · {} · {} req/s · p50 {} ms · p99 {} ms · {} in flight · {} not ok · \
             {} anomalies",
            self.step_phrase(),
            self.time_phrase(),
            rps(r.responses_per_s),
            ms(r.p50_ms),
            ms(r.p99_ms),
            self.in_flight,
            c.ended().saturating_sub(c.ok),
            c.anomalies()
        )
    }

    fn step_phrase(&self) -> String {
        match &self.start {
            Some(s) => format!(
                "step {}/{} · {}",
                s.step,
                s.steps,
                load_phrase(Some(s.model), s.level)
            ),
            None => "connecting".to_owned(),
        }
    }

    fn time_phrase(&self) -> String {
        let planned = self.start.map_or(Duration::ZERO, |s| s.planned);
        let left = planned.saturating_sub(self.elapsed);
        format!(
            "{} of {}, {} left",
            seconds(self.elapsed),
            seconds(planned),
            seconds(left)
        )
    }
}

fn gate_state(r: &GateResult, nothing_finished: bool) -> GateState {
    if nothing_finished || r.no_data {
        GateState::NoData
    } else if r.holds {
        GateState::Passing
    } else {
        GateState::Failing
    }
}

fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs())
}

/// The ends of a request other than `ok` (docs/metrics.md's pairing identity), with their
/// counts.
fn error_classes(c: &Counters) -> impl Iterator<Item = (&'static str, u64)> {
    c.ends().into_iter().filter(|(name, _)| *name != "ok")
}

/// Draws the whole screen from `state`.
pub fn draw(frame: &mut Frame<'_>, state: &LiveState) {
    let [head, top, chart, middle, bottom, steps, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(5),
        Constraint::Length(CHART_ROWS),
        Constraint::Length(state.middle_height()),
        Constraint::Length(4),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                format!("mcpload run {}", state.name),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                " · {} · {}",
                state.step_phrase(),
                state.time_phrase()
            )),
        ])),
        head,
    );
    let [rates, latency] = Layout::horizontal([Constraint::Fill(1); 2]).areas(top);
    state.draw_rates(frame, rates);
    state.draw_latency(frame, latency);
    state.draw_chart(frame, chart);
    let [errors, gates] = Layout::horizontal([Constraint::Fill(1); 2]).areas(middle);
    state.draw_errors(frame, errors);
    state.draw_gates(frame, gates);
    state.draw_generator(frame, bottom);
    state.draw_steps(frame, steps);
    let footer = if state.stopping {
        "stopping: draining in-flight requests, writing results (q again to quit at once)"
    } else {
        "q or Ctrl-C: stop the run and write what was measured"
    };
    frame.render_widget(
        Paragraph::new(footer).style(Style::new().fg(Color::DarkGray)),
        foot,
    );
}

impl LiveState {
    fn middle_height(&self) -> u16 {
        let errors = 3 + error_classes(&self.counters)
            .filter(|(_, n)| *n > 0)
            .count();
        let gates = self.gates.len().max(1);
        (errors.max(gates) + 2).min(14) as u16
    }

    fn draw_rates(&self, frame: &mut Frame<'_>, area: Rect) {
        let target = match &self.start {
            Some(s) if s.model == Model::Open => format!("{} req/s", rps(s.level)),
            Some(s) => format!("{} concurrent (closed loop)", s.level),
            None => "-".to_owned(),
        };
        let last = self.points.back().map_or(0.0, |p| p.responses_per_s);
        let lines = vec![
            Line::from(format!("target    {target}")),
            Line::from(format!(
                "achieved  {} req/s (last second), {} req/s (last {} s)",
                rps(last),
                rps(self.rolling().responses_per_s),
                self.rolling.len()
            )),
            Line::from(format!("in flight {}", self.in_flight)),
        ];
        frame.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" rate ")),
            area,
        );
    }

    fn draw_latency(&self, frame: &mut Frame<'_>, area: Rect) {
        let r = self.rolling();
        let lines = vec![
            Line::from(format!("p50  {} ms", ms(r.p50_ms))),
            Line::from(format!("p99  {} ms", ms(r.p99_ms))),
            Line::from(format!("max  {} ms", ms(r.max_ms))),
        ];
        let title = format!(" latency, last {} s ", self.rolling.len());
        frame.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(title)),
            area,
        );
    }

    fn draw_chart(&self, frame: &mut Frame<'_>, area: Rect) {
        let width = usize::from(area.width.saturating_sub(2));
        let n = self.points.len();
        let shown: Vec<u64> = self
            .points
            .iter()
            .skip(n.saturating_sub(width))
            .map(|p| p.p99_us)
            .collect();
        let top = shown.iter().copied().max().unwrap_or(0);
        let title = format!(
            " p99 per second, last {} s (top of the chart {} ms) ",
            shown.len(),
            ms(Some(top as f64 / 1000.0))
        );
        frame.render_widget(
            Sparkline::default()
                .block(Block::bordered().title(title))
                .data(&shown)
                .style(Style::new().fg(Color::Cyan)),
            area,
        );
    }

    fn draw_errors(&self, frame: &mut Frame<'_>, area: Rect) {
        let c = &self.counters;
        let mut lines = vec![Line::from(format!(
            "requests {} · ok {} · not ok {}",
            c.requests,
            c.ok,
            c.ended().saturating_sub(c.ok)
        ))];
        lines.extend(
            error_classes(c).filter(|(_, n)| *n > 0).map(|(name, n)| {
                Line::styled(format!("  {name} {n}"), Style::new().fg(Color::Red))
            }),
        );
        lines.push(Line::from(format!(
            "anomalies {} · rejected {}",
            c.anomalies(),
            c.rejected()
        )));
        frame.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" this step ")),
            area,
        );
    }

    fn draw_gates(&self, frame: &mut Frame<'_>, area: Rect) {
        let lines: Vec<Line<'_>> = if self.gates.is_empty() {
            vec![Line::styled(
                "none (--threshold adds one)",
                Style::new().fg(Color::DarkGray),
            )]
        } else {
            self.gates
                .iter()
                .map(|(gate, state)| {
                    Line::from(vec![
                        Span::styled(format!("{:<10} ", state.word()), state.style()),
                        Span::raw(gate.clone()),
                    ])
                })
                .collect()
        };
        let title = format!(" thresholds, over {} finished steps ", self.steps.len());
        frame.render_widget(
            Paragraph::new(lines)
                .block(Block::bordered().title(title))
                .wrap(Wrap { trim: true }),
            area,
        );
    }

    /// The finished steps, the latest ones that fit.
    fn draw_steps(&self, frame: &mut Frame<'_>, area: Rect) {
        let fit = usize::from(area.height.saturating_sub(2));
        let lines: Vec<Line<'_>> = self
            .steps
            .iter()
            .skip(self.steps.len().saturating_sub(fit))
            .map(|s| {
                let level = s
                    .concurrency
                    .map_or(s.target_rate.unwrap_or(0.0), |c| c as f64);
                let style = match s.verdict {
                    Verdict::Ok => Style::new().fg(Color::Green),
                    Verdict::Saturated => Style::new().fg(Color::Yellow),
                    Verdict::Failed => Style::new().fg(Color::Red),
                };
                Line::from(vec![
                    Span::raw(format!(
                        "step {} · {} · {} req/s · p99 {} ms · ",
                        s.step,
                        load_phrase(Some(s.model), level),
                        rps(s.throughput_rps),
                        ms(s.p99_ms)
                    )),
                    Span::styled(s.verdict.as_str(), style),
                ])
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" finished steps ")),
            area,
        );
    }

    fn draw_generator(&self, frame: &mut Frame<'_>, area: Rect) {
        let lines = match self.steps.last() {
            None => vec![Line::styled(
                "judged as each step ends",
                Style::new().fg(Color::DarkGray),
            )],
            Some(s) => {
                let pct = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}%"));
                let health = format!(
                    "step {}: CPU {} of the cores, run-queue wait {}, schedule lag p99 {} ms, \
                     loop delay p99 {} ms",
                    s.step,
                    pct(s.generator_cpu_pct),
                    pct(s.generator_wait_pct),
                    ms(s.schedule_lag_p99_ms),
                    ms(s.loop_delay_p99_ms)
                );
                let verdict = if s.generator_bound {
                    Line::styled(
                        format!(
                            "generator-bound: {}",
                            s.generator_bound_reason.as_deref().unwrap_or("")
                        ),
                        Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                    )
                } else {
                    Line::styled(
                        "not generator-bound: the step measured the server",
                        Style::new().fg(Color::Green),
                    )
                };
                vec![Line::from(health), verdict]
            }
        };
        frame.render_widget(
            Paragraph::new(lines)
                .block(Block::bordered().title(" the generator "))
                .wrap(Wrap { trim: true }),
            area,
        );
    }
}

/// The full screen and the thread that reads its keys.
struct Screen {
    terminal: DefaultTerminal,
    /// Presses of `q` or Ctrl-C so far (the key thread counts, the sink reads).
    presses: Arc<AtomicU8>,
    done: Arc<AtomicBool>,
    keys: Option<JoinHandle<()>>,
}

impl Screen {
    /// Enters the alternate screen in raw mode and starts reading keys: the first `q` or
    /// Ctrl-C cancels the run, the second restores the terminal and exits at once.
    fn open(cancel: CancellationToken) -> std::io::Result<Screen> {
        let terminal = ratatui::try_init()?;
        let presses = Arc::new(AtomicU8::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let keys = {
            let (presses, done) = (presses.clone(), done.clone());
            std::thread::Builder::new()
                .name("mcpload-keys".to_owned())
                .spawn(move || read_keys(&presses, &done, &cancel))?
        };
        Ok(Screen {
            terminal,
            presses,
            done,
            keys: Some(keys),
        })
    }

    fn close(&mut self) {
        if let Some(keys) = self.keys.take() {
            self.done.store(true, Ordering::Relaxed);
            let _ = keys.join();
            ratatui::restore();
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.close();
    }
}

fn read_keys(presses: &AtomicU8, done: &AtomicBool, cancel: &CancellationToken) {
    while !done.load(Ordering::Relaxed) {
        match event::poll(Duration::from_millis(100)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => return,
        }
        let Ok(Event::Key(key)) = event::read() else {
            continue;
        };
        let stop = key.kind == KeyEventKind::Press
            && (matches!(key.code, KeyCode::Char('q') | KeyCode::Char('Q'))
                || (key.code == KeyCode::Char('c')
                    && key.modifiers.contains(KeyModifiers::CONTROL)));
        if !stop {
            continue;
        }
        if presses.fetch_add(1, Ordering::Relaxed) == 0 {
            cancel.cancel();
        } else {
            ratatui::restore();
            eprintln!("mcpload: quit at once: the steps already finished are in the run folder");
            std::process::exit(EXIT_INTERRUPTED);
        }
    }
}

/// How the view is put out.
enum Output {
    Hidden,
    Plain { last: Option<Instant> },
    Screen(Screen),
}

/// The live view of a run, as a [`StepSink`].
pub struct LiveView {
    state: LiveState,
    output: Output,
}

impl std::fmt::Debug for LiveView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveView")
            .field("state", &self.state)
            .finish()
    }
}

impl LiveView {
    /// The view of run `name` in `mode`; the screen's `q` and Ctrl-C cancel `cancel`. A screen
    /// that cannot be opened falls back to plain lines, with a warning.
    pub fn new(
        mode: LiveMode,
        name: &str,
        thresholds: &Thresholds,
        cancel: CancellationToken,
    ) -> LiveView {
        let output = match mode {
            LiveMode::Hidden => Output::Hidden,
            LiveMode::Plain => Output::Plain { last: None },
            LiveMode::Screen => match Screen::open(cancel) {
                Ok(screen) => Output::Screen(screen),
                Err(e) => {
                    eprintln!("mcpload: warning: no live view ({e}); plain lines instead");
                    Output::Plain { last: None }
                }
            },
        };
        LiveView {
            state: LiveState::new(name, thresholds),
            output,
        }
    }

    fn show(&mut self) -> Result<(), SinkError> {
        match &mut self.output {
            Output::Hidden => {}
            Output::Plain { last } => {
                if last.is_none_or(|t| t.elapsed() >= PLAIN_EVERY) {
                    *last = Some(Instant::now());
                    let mut err = std::io::stderr().lock();
                    writeln!(err, "{}", self.state.plain_line())?;
                }
            }
            Output::Screen(screen) => {
                self.state.stopping = screen.presses.load(Ordering::Relaxed) > 0;
                screen.terminal.draw(|f| draw(f, &self.state))?;
            }
        }
        Ok(())
    }
}

impl StepSink for LiveView {
    fn step_started(&mut self, start: &StepStart) -> Result<(), SinkError> {
        self.state.step_started(start);
        if let Output::Screen(screen) = &mut self.output {
            // Whatever else wrote to the terminal (a warning on stderr) is wiped.
            screen.terminal.clear()?;
            self.show()?;
        }
        Ok(())
    }

    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        self.state.second(second);
        self.show()
    }

    fn step_ended(&mut self, step: &JudgedStep) -> Result<(), SinkError> {
        self.state.step_ended(step);
        if matches!(self.output, Output::Screen(_)) {
            self.show()?;
        }
        Ok(())
    }

    fn sweep_ended(&mut self, _end: &SweepEnd) -> Result<(), SinkError> {
        if let Output::Screen(screen) = &mut self.output {
            screen.close();
        }
        self.output = Output::Hidden;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{StopCriteria, SweepJudge};
    use crate::metrics::{Stats, StepFacts};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn start(step: u32, level: f64) -> StepStart {
        StepStart {
            step,
            steps: 5,
            model: Model::Closed,
            level,
            planned: Duration::from_secs(10),
        }
    }

    /// One second in which `n` requests were answered `ok`, each after `ms` milliseconds,
    /// and `refused` more were refused with HTTP 429.
    fn second(state: &mut LiveState, n: u64, ms: u64, refused: u64) {
        let mut counters = Counters {
            requests: n + refused,
            responses: n,
            ok: n,
            http_429: refused,
            ..Counters::default()
        };
        counters.in_flight_max = 3;
        let mut latency = LatencyHistogram::default();
        for _ in 0..n {
            latency.record(Duration::from_millis(ms));
        }
        state.second(&Second {
            step: state.start.map_or(1, |s| s.step),
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            counters: &counters,
            in_flight: 3,
            latency: &latency,
            ops: &[],
            scenarios: &[],
            flows: None,
        });
    }

    fn judged(step: u32, ok: u64, refused: u64, ms: u64) -> JudgedStep {
        let mut stats = Stats::default();
        stats.counters.requests = ok + refused;
        stats.counters.responses = ok;
        stats.counters.ok = ok;
        stats.counters.http_429 = refused;
        for _ in 0..ok {
            stats.latency.record(Duration::from_millis(ms));
        }
        SweepJudge::new(StopCriteria::default()).judge(StepFacts::closed(step, 4, 1.0), &stats)
    }

    fn thresholds(exprs: &[&str]) -> Thresholds {
        Thresholds::parse(exprs).unwrap()
    }

    fn screen(state: &LiveState, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| draw(f, state)).unwrap();
        let buffer = terminal.backend().buffer();
        let mut text = String::new();
        for y in 0..buffer.area.height {
            for x in 0..buffer.area.width {
                text.push_str(buffer[(x, y)].symbol());
            }
            text.push('\n');
        }
        text
    }

    #[test]
    fn rolling_figures_cover_only_the_last_seconds_of_the_step() {
        let mut state = LiveState::new("t", &Thresholds::default());
        state.step_started(&start(1, 4.0));
        // Second k answers 10 k requests, each after k ms.
        for k in 1..=7 {
            second(&mut state, 10 * k, k, 0);
        }
        let r = state.rolling();
        // Seconds 3 to 7: 250 answers (30 + 40 + 50 + 60 + 70), the 125th in second 6, the
        // p99 and max in second 7.
        let within = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want * 0.001;
        assert!(within(r.p50_ms, 6.0), "{r:?}");
        assert!(within(r.p99_ms, 7.0), "{r:?}");
        assert!(within(r.max_ms, 7.0), "{r:?}");
        assert_eq!(r.responses_per_s, 50.0);
        // A new step starts its window afresh, but the chart keeps the seconds.
        state.step_started(&start(2, 8.0));
        assert_eq!(state.rolling().p50_ms, None);
        second(&mut state, 10, 2, 0);
        assert!(within(state.rolling().max_ms, 2.0));
        assert_eq!(state.points.len(), 8);
    }

    #[test]
    fn thresholds_have_no_data_until_a_step_ends_and_checks_wait_for_the_end() {
        let gates = thresholds(&[
            "p99_ms<250",
            "error_rate<0.01",
            "check{id=memory_leak}!=fail",
        ]);
        let mut state = LiveState::new("t", &gates);
        let states = |s: &LiveState| s.gates().iter().map(|(_, g)| *g).collect::<Vec<_>>();
        assert_eq!(
            states(&state),
            [GateState::NoData, GateState::NoData, GateState::AtTheEnd]
        );
        state.step_ended(&judged(1, 90, 0, 20));
        assert_eq!(
            states(&state),
            [GateState::Passing, GateState::Passing, GateState::AtTheEnd]
        );
        // A step where half the requests were refused breaks the error rate, not the p99.
        state.step_ended(&judged(2, 50, 50, 20));
        assert_eq!(
            states(&state),
            [GateState::Passing, GateState::Failing, GateState::AtTheEnd]
        );
        assert_eq!(state.gates()[1].0, "error_rate<0.01");
    }

    #[test]
    fn the_screen_shows_the_step_the_rates_the_latency_the_classes_and_the_gates() {
        let mut state = LiveState::new("quick", &thresholds(&["error_rate<0.01", "p99_ms<1"]));
        state.step_ended(&judged(1, 90, 0, 20));
        state.step_started(&start(2, 16.0));
        second(&mut state, 40, 12, 7);
        second(&mut state, 40, 12, 0);
        let text = screen(&state, 120, 40);
        for want in [
            "mcpload run quick",
            "step 2/5",
            "16 concurrent",
            "2 s of 10 s, 8 s left",
            "40.0 req/s (last second)",
            "in flight 3",
            "p50  12.0",
            "p99  12.0",
            "latency, last 2 s",
            "requests 87",
            "http_429 7",
            "anomalies 0 · rejected 7",
            "passing    error_rate<0.01",
            "failing    p99_ms<1",
            "over 1 finished steps",
            "step 1: CPU",
            "q or Ctrl-C",
            "step 1 · 4 concurrent · 90.0 req/s · p99 20.0",
        ] {
            assert!(text.contains(want), "{want:?} not on the screen:\n{text}");
        }
        assert!(!text.contains("http_503"), "a class at zero is left out");
    }

    #[test]
    fn the_stop_footer_replaces_the_hint_once_asked() {
        let mut state = LiveState::new("t", &Thresholds::default());
        state.stopping = true;
        let text = screen(&state, 100, 30);
        assert!(text.contains("stopping: draining"), "{text}");
        assert!(text.contains("none (--threshold adds one)"), "{text}");
    }

    #[test]
    fn a_tiny_terminal_is_drawn_without_a_panic() {
        let mut state = LiveState::new("t", &thresholds(&["p99_ms<250"]));
        state.step_started(&start(1, 1.0));
        second(&mut state, 5, 1, 2);
        for (w, h) in [(1, 1), (20, 5), (40, 12)] {
            screen(&state, w, h);
        }
    }

    #[test]
    fn the_plain_line_is_plain_text() {
        let mut state = LiveState::new("t", &Thresholds::default());
        assert!(state.plain_line().contains("connecting"));
        state.step_started(&start(3, 8.0));
        second(&mut state, 20, 4, 1);
        let line = state.plain_line();
        assert!(
            line.starts_with("mcpload: step 3/5 · 8 concurrent · 1 s of 10 s, 9 s left"),
            "{line}"
        );
        assert!(
            line.contains("20.0 req/s") && line.contains("1 not ok"),
            "{line}"
        );
        assert!(line.chars().all(|c| !c.is_control()), "{line:?}");
        // Requests still in flight are not "not ok": only those that ended otherwise are.
        state.counters.requests += 4;
        assert!(
            state.plain_line().contains("· 1 not ok"),
            "{}",
            state.plain_line()
        );
    }
}
