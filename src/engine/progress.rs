//! The live display: one indicatif line per step (level, elapsed / planned, throughput, in
//! flight, errors, anomalies), fed once a second by the coordinator; hidden when stdout is
//! not a terminal or with `--quiet`.

use crate::analysis::Judgement;
use crate::metrics::{Model, Stats, Verdict};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// The progress display of a run. A no-op when hidden.
#[derive(Debug)]
pub struct Progress {
    visible: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    /// Shown only on a terminal and when not `quiet`.
    pub fn new(quiet: bool) -> Self {
        Progress {
            visible: !quiet && std::io::stdout().is_terminal(),
            bar: Mutex::new(None),
        }
    }

    pub fn hidden() -> Self {
        Progress {
            visible: false,
            bar: Mutex::new(None),
        }
    }

    pub(crate) fn start_step(
        &self,
        step: u32,
        steps: usize,
        model: Model,
        level: f64,
        planned: Duration,
    ) {
        if !self.visible {
            return;
        }
        let bar =
            ProgressBar::with_draw_target(Some(planned.as_secs()), ProgressDrawTarget::stdout());
        bar.set_style(
            ProgressStyle::with_template("{prefix:.bold} [{bar:20}] {pos}/{len}s {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        let load = match model {
            Model::Closed => format!("{level} concurrent"),
            Model::Open => format!("{level} req/s"),
        };
        bar.set_prefix(format!("step {step}/{steps} · {load}"));
        bar.enable_steady_tick(Duration::from_millis(250));
        *self.bar.lock().expect("not poisoned") = Some(bar);
    }

    pub(crate) fn second(&self, s: &Stats, in_flight: u64) {
        if let Some(bar) = self.bar.lock().expect("not poisoned").as_ref() {
            let c = &s.counters;
            let failed = c.requests.saturating_sub(c.ok).min(c.requests);
            bar.inc(1);
            bar.set_message(format!(
                "{} rps · {in_flight} in flight · {failed} not ok · {} anomalies",
                c.responses,
                c.anomalies()
            ));
        }
    }

    pub(crate) fn end_step(&self, j: &Judgement) {
        if let Some(bar) = self.bar.lock().expect("not poisoned").take() {
            let verdict = match j.verdict {
                Verdict::Ok => "ok",
                Verdict::Saturated => "saturated",
                Verdict::Failed => "failed",
            };
            bar.finish_with_message(format!("{} · {verdict}", bar.message()));
        }
    }
}
