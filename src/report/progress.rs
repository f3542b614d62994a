//! The live display: one indicatif line per step (level, elapsed / planned, throughput, in
//! flight, errors, anomalies), fed once a second as a [`StepSink`]; hidden when stdout is not
//! a terminal or with `--quiet`.

use crate::analysis::JudgedStep;
use crate::engine::{Second, SinkError, StepSink, StepStart};
use crate::metrics::Model;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// The progress display of a run. A no-op when hidden.
#[derive(Debug)]
pub struct Progress {
    visible: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Shown only on a terminal and when not `quiet`.
    pub fn new(quiet: bool) -> Self {
        Progress {
            visible: !quiet && std::io::stdout().is_terminal(),
            bar: None,
        }
    }
}

impl StepSink for Progress {
    fn step_started(&mut self, s: &StepStart) -> Result<(), SinkError> {
        if !self.visible {
            return Ok(());
        }
        let bar =
            ProgressBar::with_draw_target(Some(s.planned.as_secs()), ProgressDrawTarget::stdout());
        bar.set_style(
            ProgressStyle::with_template("{prefix:.bold} [{bar:20}] {pos}/{len}s {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        let load = match s.model {
            Model::Closed => format!("{} concurrent", s.level),
            Model::Open => format!("{} req/s", s.level),
        };
        bar.set_prefix(format!("step {}/{} · {load}", s.step, s.steps));
        bar.enable_steady_tick(Duration::from_millis(250));
        self.bar = Some(bar);
        Ok(())
    }

    fn second(&mut self, s: &Second<'_>) -> Result<(), SinkError> {
        if let Some(bar) = &self.bar {
            let c = s.counters;
            let failed = c.requests.saturating_sub(c.ok).min(c.requests);
            bar.inc(1);
            bar.set_message(format!(
                "{} rps · {} in flight · {failed} not ok · {} anomalies",
                c.responses,
                s.in_flight,
                c.anomalies()
            ));
        }
        Ok(())
    }

    fn step_ended(&mut self, step: &JudgedStep) -> Result<(), SinkError> {
        if let Some(bar) = self.bar.take() {
            let verdict = step.figures.verdict.as_str();
            bar.finish_with_message(format!("{} · {verdict}", bar.message()));
        }
        Ok(())
    }
}
