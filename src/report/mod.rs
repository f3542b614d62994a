//! The run folder and everything read from it: steps.csv, ops.csv, scenarios.csv,
//! timeseries.csv, latency.hlog, summary.json, report.html with its SVG plots, and the terminal
//! report. One file per output, each behind this module's private `Reporter` trait, each
//! written as the run goes so a crash loses nothing already measured. docs/results.md
//! describes every file and column.
//!
//! The engine hands a run to [`RunFolder`] (and to the [`LiveView`]) as a
//! [`StepSink`]; the folder only writes, the verdicts and the knee come judged from `analysis`:
//!
//! ```no_run
//! # use mcpload::report::*;
//! # use mcpload::analysis::{StopCriteria, SweepJudge, Thresholds};
//! # use mcpload::engine::{Second, SweepEnd};
//! # use mcpload::metrics::*;
//! # use std::time::Duration;
//! # fn demo(facts: StepFacts, stats: Stats, second: Stats) -> Result<(), ReportError> {
//! let mut spec = RunSpec::new(default_run_dir("results".as_ref(), "sweep", std::time::SystemTime::now()), "sweep");
//! spec.settings = serde_json::json!({"target": {"url": "http://127.0.0.1:8080/mcp"}});
//! let mut judge = SweepJudge::new(spec.criteria.clone());
//! let mut run = RunFolder::create(spec)?;
//! run.set_protocol_revision("2025-06-18")?;
//! // every second of a step:
//! run.record_second(&Second {
//!     step: 1,
//!     start: Duration::ZERO,
//!     length: Duration::from_secs(1),
//!     counters: &second.counters,
//!     in_flight: 4,
//!     latency: &second.latency,
//!     ops: &second.ops,
//!     scenarios: &second.scenarios,
//!     flows: second.flows.as_deref(),
//! })?;
//! // at the end of the step:
//! let step = judge.judge(facts, &stats);
//! run.record_step(&step)?;
//! if step.stop() { /* the sweep ends here */ }
//! // at the end of the run:
//! run.record_end(&SweepEnd::Complete)?;
//! let s = run.summary();
//! let gates = s.evaluate_gates(&Thresholds::default());
//! let done = run.finish(gates, false)?;
//! print!("{}", done.terminal);
//! # Ok(()) }
//! ```

pub mod ab;
mod ab_html;
pub mod ci;
mod compare_text;
mod correctness;
mod hlog;
mod html;
mod live;
mod plots;
mod raw;
mod redact;
pub mod remote_write;
mod resources;
mod summary;
mod tables;
mod terminal;

pub use correctness::{Total, correctness_html, correctness_text, totals_of};
pub use hlog::{Interval, read_hlog, step_histograms};
pub use live::{GateState, LiveMode, LiveState, LiveView, ROLLING_SECONDS, Rolling, draw};
pub use raw::{AuthTotals, COUNTS_JSONL, HISTOGRAMS_HLOG, Names, Outline, Record, RecordedSecond};
pub use redact::{REDACTED, SECRET_KEY_PARTS, Secrets, redact, redact_url, redact_urls, url_host};
pub use summary::{
    Export, MergedFrom, Misaligned, OLDEST_SCHEMA_VERSION, RunStatus, RunSummary, SCHEMA_VERSION,
    SegmentRecord, StepRecord, StepWindowRecord,
};
pub use tables::{TimeseriesRow, read_ops, read_scenarios, read_steps, read_timeseries};
pub use terminal::use_color;

use crate::analysis::{
    CompareOptions, Comparison, GateResult, JudgedStep, Knee, StopCriteria, Thresholds, compare,
};
use crate::engine::{MeasuredStep, Second, SinkError, StepSink, StepStart, StepWindow, SweepEnd};
use crate::metrics::{AuthSummary, Counters, SessionSummary};
use crate::watch::ResourceSample;
use compare_text::render_comparison;
pub use resources::{
    CheckSettings, ClientSide, RESOURCES_CSV, ResourceLog, ResourcePoint, read_resources,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use terminal::render_terminal;

/// One row per step: [`StepSummary`](crate::metrics::StepSummary).
pub const STEPS_CSV: &str = "steps.csv";
/// Per step, one row per operation and a `-` row: [`OpSummary`](crate::metrics::OpSummary).
pub const OPS_CSV: &str = "ops.csv";
/// Per step, per scenario a `*` row and one per scenario step:
/// [`ScenarioSummary`](crate::metrics::ScenarioSummary).
pub const SCENARIOS_CSV: &str = "scenarios.csv";
/// One row per second per step: [`TimeseriesRow`].
pub const TIMESERIES_CSV: &str = "timeseries.csv";
/// HdrHistogram interval log, one interval per second tagged `step=N`.
pub const LATENCY_HLOG: &str = "latency.hlog";
/// [`RunSummary`].
pub const SUMMARY_JSON: &str = "summary.json";
/// The self-contained HTML report.
pub const REPORT_HTML: &str = "report.html";
/// The stdio target's standard error, when the engine captured it.
pub const TARGET_STDERR: &str = "target-stderr.log";
/// A process per session: each user's children's stderr, `user-N.log` (bounded).
pub const CHILDREN_DIR: &str = "children";
/// The built-in target's own counters when it stopped (what `mcpload serve --stats` writes).
pub const TARGET_STATS: &str = "target-stats.json";

/// Why a run folder could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Csv { path: PathBuf, source: csv::Error },
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: not a valid HdrHistogram interval log: {msg}", path.display())]
    Hlog { path: PathBuf, msg: String },
    #[error("{}: the folder already holds files; give each run a new folder", path.display())]
    NotEmpty { path: PathBuf },
    #[error(
        "{}: schema_version {found}; this mcpload reads versions {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}",
        path.display()
    )]
    Schema { path: PathBuf, found: String },
    #[error("plot {name}: {msg}")]
    Plot { name: &'static str, msg: String },
}

impl ReportError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        ReportError::Io {
            path: path.to_owned(),
            source,
        }
    }
    fn csv(path: &Path, source: csv::Error) -> Self {
        ReportError::Csv {
            path: path.to_owned(),
            source,
        }
    }
    fn json(path: &Path, source: serde_json::Error) -> Self {
        ReportError::Json {
            path: path.to_owned(),
            source,
        }
    }
}

/// `bytes` up to its last newline: a line cut short by a crash mid-write is left out, since
/// every file of the folder is written a whole line at a time.
fn complete_lines(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    &bytes[..end]
}

/// The profile as it was run, stored beside the results.
#[derive(Clone, Debug)]
pub struct ProfileCopy {
    /// The profile's file name (or path) as the user gave it; its extension names the copy,
    /// `profile.<ext>` (`profile.toml` without one).
    pub source: String,
    /// The text to store, as given: the caller redacts what may be secret in it (the run
    /// does; docs/results.md).
    pub text: String,
}

/// What a run folder is created with.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The folder; created if missing, refused if it already holds files.
    pub dir: PathBuf,
    pub name: String,
    /// The run's settings as JSON, redacted before they are stored.
    pub settings: Value,
    /// Extra keys or JSON pointers to redact, besides [`SECRET_KEY_PARTS`] (see [`redact`]).
    pub redact: Vec<String>,
    pub profile: Option<ProfileCopy>,
    pub criteria: StopCriteria,
    /// The run's start: summary.json's `started_at`, latency.hlog's StartTime/BaseTime.
    pub started: SystemTime,
    /// What operations and scenarios are numbered by in counts.jsonl and histograms.hlog.
    pub names: Names,
}

impl RunSpec {
    /// A spec with no settings, no profile, the default criteria, started now.
    pub fn new(dir: PathBuf, name: &str) -> Self {
        RunSpec {
            dir,
            name: name.to_owned(),
            settings: Value::Null,
            redact: Vec::new(),
            profile: None,
            criteria: StopCriteria::default(),
            started: SystemTime::now(),
            names: Names::default(),
        }
    }
}

/// `results/<UTC timestamp>-<name>`, e.g. `results/20260102T030405Z-sweep`; characters of the
/// name other than letters, digits, `-`, `_` and `.` become `-`.
pub fn default_run_dir(results: &Path, name: &str, started: SystemTime) -> PathBuf {
    let stamp: String = humantime::format_rfc3339_seconds(started)
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    results.join(format!("{stamp}-{name}"))
}

/// One output file of the run folder, fed as the run goes. Every hook defaults to doing
/// nothing, so each file implements only the events it records.
trait Reporter {
    /// The run's metadata or steps changed (at creation, when the protocol is known, after
    /// each step).
    fn changed(&mut self, _run: &RunSummary) -> Result<(), ReportError> {
        Ok(())
    }
    /// A second of a step ended; `server`: the watched server's latest sample by its end.
    fn second(
        &mut self,
        _s: &Second<'_>,
        _server: Option<&ResourceSample>,
    ) -> Result<(), ReportError> {
        Ok(())
    }
    /// A step ended and was judged.
    fn step(&mut self, _step: &StepRecord) -> Result<(), ReportError> {
        Ok(())
    }
    /// The run ended; `run` is final.
    fn finish(&mut self, _run: &RunSummary) -> Result<(), ReportError> {
        Ok(())
    }
}

/// summary.json, rewritten on every change.
struct SummaryJson(PathBuf);

impl Reporter for SummaryJson {
    fn changed(&mut self, run: &RunSummary) -> Result<(), ReportError> {
        run.write(&self.0)
    }
    fn finish(&mut self, run: &RunSummary) -> Result<(), ReportError> {
        run.write(&self.0)
    }
}

/// report.html and its SVG plots, drawn once the run is over from the folder's own files.
struct HtmlReport(PathBuf);

impl Reporter for HtmlReport {
    fn finish(&mut self, run: &RunSummary) -> Result<(), ReportError> {
        html::write_report(&self.0, run)
    }
}

/// The results of a finished run.
#[derive(Clone, Debug)]
pub struct Finished {
    pub dir: PathBuf,
    pub summary: RunSummary,
    /// The terminal report, ready to print (ANSI colours only when asked for).
    pub terminal: String,
}

/// A run folder being written. Every call does a little blocking file I/O (a row, an interval,
/// one JSON rewrite per step); none of it is on the request path.
pub struct RunFolder {
    dir: PathBuf,
    summary: RunSummary,
    reporters: Vec<Box<dyn Reporter + Send>>,
    /// counts.jsonl and histograms.hlog: what the reporters' files leave out.
    raw: raw::RawWriter,
    /// The server watched as a process: resources.csv and the server columns.
    resources: Option<ResourceLog>,
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

impl RunFolder {
    /// Creates the folder with the headers of every file, the profile copy and a first
    /// summary.json (status `running`).
    pub fn create(spec: RunSpec) -> Result<RunFolder, ReportError> {
        let dir = spec.dir;
        fs::create_dir_all(&dir).map_err(|e| ReportError::io(&dir, e))?;
        // A stdio target's stderr log is opened before the folder is created (the child
        // starts while connecting), and a fleet's empty `children/`; anything else means the
        // folder belongs to another run.
        let mut entries = fs::read_dir(&dir).map_err(|e| ReportError::io(&dir, e))?;
        let ours = |e: &fs::DirEntry| {
            e.file_name() == TARGET_STDERR
                || (e.file_name() == CHILDREN_DIR
                    && fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_none()))
        };
        if entries.any(|e| e.map_or(true, |e| !ours(&e))) {
            return Err(ReportError::NotEmpty { path: dir });
        }
        let profile_file = match spec.profile {
            Some(p) => {
                let ext = Path::new(&p.source)
                    .extension()
                    .and_then(|e| e.to_str())
                    .filter(|e| e.chars().all(|c| c.is_ascii_alphanumeric()))
                    .unwrap_or("toml");
                let name = format!("profile.{ext}");
                let path = dir.join(&name);
                fs::write(&path, p.text).map_err(|e| ReportError::io(&path, e))?;
                Some(name)
            }
            None => None,
        };
        let mut settings = spec.settings;
        redact(&mut settings, &spec.redact);
        let summary = RunSummary {
            schema_version: SCHEMA_VERSION,
            mcpload_version: env!("CARGO_PKG_VERSION").to_owned(),
            name: spec.name,
            status: RunStatus::Running,
            status_reason: None,
            started_at: humantime::format_rfc3339_seconds(spec.started).to_string(),
            finished_at: None,
            protocol_revision: None,
            criteria: spec.criteria,
            settings,
            profile_file,
            steps: Vec::new(),
            knee: Knee::default(),
            gates: Vec::new(),
            sessions: None,
            auth: None,
            segment: None,
            merged_from: None,
            partial: None,
            misaligned: None,
            checks: Vec::new(),
            knee_cpu: None,
            watch_failures: Vec::new(),
            processes: None,
            fleet: None,
            export: None,
        };
        let reporters: Vec<Box<dyn Reporter + Send>> = vec![
            Box::new(tables::StepsCsv::create(&dir)?),
            Box::new(tables::OpsCsv::create(&dir)?),
            Box::new(tables::ScenariosCsv::create(&dir)?),
            Box::new(tables::TimeseriesCsv::create(&dir)?),
            Box::new(hlog::HlogWriter::create(&dir, spec.started)?),
            Box::new(SummaryJson(dir.clone())),
            Box::new(HtmlReport(dir.clone())),
        ];
        let raw = raw::RawWriter::create(&dir, spec.started, &spec.names)?;
        let mut run = RunFolder {
            dir,
            summary,
            reporters,
            raw,
            resources: None,
        };
        run.each(|r, s| r.changed(s))?;
        Ok(run)
    }

    fn each(
        &mut self,
        mut f: impl FnMut(&mut dyn Reporter, &RunSummary) -> Result<(), ReportError>,
    ) -> Result<(), ReportError> {
        for r in &mut self.reporters {
            f(r.as_mut(), &self.summary)?;
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run as recorded so far.
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// Records the MCP protocol revision agreed with the target.
    pub fn set_protocol_revision(&mut self, revision: &str) -> Result<(), ReportError> {
        self.summary.protocol_revision = Some(revision.to_owned());
        self.each(|r, s| r.changed(s))
    }

    /// Records which segment of a split run (or of a run on a common clock) this folder
    /// holds; its steps' windows and its late start are added as the sweep goes.
    pub fn set_segment(&mut self, segment: SegmentRecord) -> Result<(), ReportError> {
        self.summary.segment = Some(segment);
        self.each(|r, s| r.changed(s))
    }

    /// Records how late the first step began against the common start.
    pub fn record_start_late(&mut self, late: Duration) -> Result<(), ReportError> {
        if let Some(seg) = self.summary.segment.as_mut() {
            seg.start_late_ms = Some(late.as_secs_f64() * 1000.0);
            self.each(|r, s| r.changed(s))?;
        }
        Ok(())
    }

    /// Records a finished step's measured window (summary.json is rewritten with the step).
    pub fn record_window(&mut self, w: &StepWindow) {
        if let Some(seg) = self.summary.segment.as_mut() {
            seg.steps.push(StepWindowRecord {
                step: w.step,
                start_unix_ms: w.start_unix_ms,
                end_unix_ms: w.end_unix_ms,
            });
        }
    }

    /// Watches the server through the rest of the run (resources.csv is created now).
    pub fn watch(&mut self, log: ResourceLog) {
        self.resources = Some(log);
    }

    /// A step is about to run.
    pub fn record_step_started(&mut self, step: u32) -> Result<(), ReportError> {
        self.resources
            .as_mut()
            .map_or(Ok(()), |r| r.step_started(step))
    }

    /// Records one second: a timeseries.csv row (with the server's latest sample), a
    /// latency.hlog interval, a counts.jsonl line.
    pub fn record_second(&mut self, s: &Second<'_>) -> Result<(), ReportError> {
        let server: Option<ResourceSample> = match self.resources.as_mut() {
            Some(r) => r.second(s)?.cloned(),
            None => None,
        };
        self.record_second_with(s, server.as_ref())
    }

    /// Records one second with the server's figures given (a merged run's, from its
    /// segments' timeseries.csv).
    pub fn record_second_with(
        &mut self,
        s: &Second<'_>,
        server: Option<&ResourceSample>,
    ) -> Result<(), ReportError> {
        for r in &mut self.reporters {
            r.second(s, server)?;
        }
        self.raw.second(s)
    }

    /// After the last step: watches the server with no load for `cooldown` (or until
    /// `stop`).
    pub async fn cool_down(
        &mut self,
        cooldown: Duration,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<(), ReportError> {
        match self.resources.as_mut() {
            Some(r) if !cooldown.is_zero() => r.cool_down(cooldown, stop).await,
            _ => Ok(()),
        }
    }

    /// Stops watching the server and judges the soak checks into summary.json (before the
    /// gates, which may read them).
    pub fn judge_checks(&mut self) -> Result<(), ReportError> {
        let Some(log) = self.resources.take() else {
            return Ok(());
        };
        let knee_step = self.summary.knee.saturation_step;
        let judged = log.finish(&self.summary.steps, knee_step)?;
        self.summary.checks = judged.checks;
        self.summary.knee_cpu = judged.knee_phrase;
        self.summary.watch_failures = judged.failures;
        self.each(|r, s| r.changed(s))
    }

    /// Records a finished step as measured, before its verdict: its histograms to
    /// histograms.hlog, its counts to counts.jsonl.
    pub fn record_measured(&mut self, step: &MeasuredStep) -> Result<(), ReportError> {
        self.raw.step(step)
    }

    /// Records a judged step: appends it to steps.csv, its rows to ops.csv and scenarios.csv,
    /// and rewrites summary.json (the knee included).
    pub fn record_step(&mut self, step: &JudgedStep) -> Result<(), ReportError> {
        let mut record = StepRecord::of(step);
        if let Some(r) = &self.resources {
            r.fill_step(&mut record);
        }
        for r in &mut self.reporters {
            r.step(&record)?;
        }
        self.summary.steps.push(record);
        self.summary.knee = step.knee.clone();
        self.each(|r, s| r.changed(s))
    }

    /// Records how the sweep ended (status and end time) and rewrites summary.json.
    pub fn record_end(&mut self, end: &SweepEnd) -> Result<(), ReportError> {
        let s = &mut self.summary;
        (s.status, s.status_reason) = match end {
            SweepEnd::Complete => (RunStatus::Complete, None),
            SweepEnd::Interrupted => (RunStatus::Interrupted, None),
            SweepEnd::Aborted(why) => (RunStatus::Aborted, Some(why.clone())),
        };
        s.finished_at = Some(now_rfc3339());
        self.each(|r, s| r.changed(s))
    }

    /// Records what the run's connections saw of their sessions, once they are closed, from
    /// their whole-run counts.
    pub fn record_sessions(&mut self, whole: &Counters) -> Result<(), ReportError> {
        self.raw.sessions(whole)?;
        self.summary.sessions = Some(SessionSummary::of(whole));
        self.each(|r, s| r.changed(s))
    }

    /// Records what a stdio run's children did, once its connections are closed; a process
    /// per session is judged as a fleet too, its start-ups held to `timeout`.
    pub fn record_processes(
        &mut self,
        report: crate::transport::ProcessReport,
        timeout: std::time::Duration,
    ) -> Result<(), ReportError> {
        if report.mode == "per_user" {
            let steps: Vec<_> = self
                .summary
                .steps
                .iter()
                .map(|s| s.figures.clone())
                .collect();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            let ms = timeout.as_secs_f64() * 1000.0;
            self.summary.fleet = Some(crate::analysis::fleet::judge(&steps, ms, cores));
        }
        self.summary.processes = Some(report);
        self.each(|r, s| r.changed(s))
    }

    /// Records what authorization cost the run, once its connections are closed: the
    /// connections' whole-run counts and the credentials' own totals.
    pub fn record_auth(&mut self, whole: &Counters, a: &AuthTotals) -> Result<(), ReportError> {
        self.raw.auth(a)?;
        let mut summary = AuthSummary::of(whole, a.token_requests, a.token_refreshes, &a.fetch);
        summary.token_per_user = a.users.is_some();
        summary.users = a.users;
        self.summary.auth = Some(summary);
        self.each(|r, s| r.changed(s))
    }

    /// Records what came of the live metrics pushes (`--prometheus-remote-write`), once the
    /// last one went out or was given up.
    pub fn record_export(
        &mut self,
        pushes: remote_write::RemoteWriteSummary,
    ) -> Result<(), ReportError> {
        self.summary.export = Some(Export {
            prometheus_remote_write: pushes,
        });
        self.each(|r, s| r.changed(s))
    }

    /// Records where a merged run comes from (`mcpload merge`).
    pub fn record_merge(
        &mut self,
        from: Vec<MergedFrom>,
        partial: bool,
        misaligned: Vec<Misaligned>,
    ) -> Result<(), ReportError> {
        self.summary.merged_from = Some(from);
        self.summary.partial = Some(partial);
        self.summary.misaligned = Some(misaligned);
        self.each(|r, s| r.changed(s))
    }

    /// Records the built-in target's final counters, once it has stopped.
    pub fn record_target_stats(&self, stats: &impl serde::Serialize) -> Result<(), ReportError> {
        let path = self.dir.join(TARGET_STATS);
        let mut text = serde_json::to_vec_pretty(stats).map_err(|e| ReportError::json(&path, e))?;
        text.push(b'\n');
        fs::write(&path, text).map_err(|e| ReportError::io(&path, e))
    }

    /// Ends the run (after [`RunFolder::record_end`]) with the gates checked on it: writes the
    /// final summary.json, report.html and the SVG plots, and returns the terminal report
    /// (`color`: ANSI colours, for a terminal).
    pub fn finish(mut self, gates: Vec<GateResult>, color: bool) -> Result<Finished, ReportError> {
        self.summary.gates = gates;
        self.each(|r, s| r.finish(s))?;
        Ok(Finished {
            terminal: render_terminal(&self.summary, color),
            dir: self.dir,
            summary: self.summary,
        })
    }
}

/// The run folder as the engine's sink: every event written as it comes.
impl StepSink for RunFolder {
    fn clock_started(&mut self, late: Duration) -> Result<(), SinkError> {
        Ok(self.record_start_late(late)?)
    }
    fn step_window(&mut self, window: &StepWindow) -> Result<(), SinkError> {
        self.record_window(window);
        Ok(())
    }
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        Ok(self.record_second(second)?)
    }
    fn step_started(&mut self, start: &StepStart) -> Result<(), SinkError> {
        Ok(self.record_step_started(start.step)?)
    }
    fn step_measured(&mut self, step: &MeasuredStep) -> Result<(), SinkError> {
        if let Some(r) = self.resources.as_mut() {
            r.step_measured(step.facts.step, step.facts.duration_s)?;
        }
        Ok(self.record_measured(step)?)
    }
    fn step_ended(&mut self, step: &JudgedStep) -> Result<(), SinkError> {
        Ok(self.record_step(step)?)
    }
    fn sweep_ended(&mut self, end: &SweepEnd) -> Result<(), SinkError> {
        Ok(self.record_end(end)?)
    }
}

/// `mcpload report DIR`: re-renders report.html, the SVG plots and the terminal report from a
/// run folder alone. With thresholds, they are evaluated on the stored run and shown in place
/// of the stored gates (summary.json is left as it is).
pub fn rerender(dir: &Path, thresholds: &Thresholds, color: bool) -> Result<Finished, ReportError> {
    let mut summary = RunSummary::read(dir)?;
    if !thresholds.is_empty() {
        summary.gates = summary.evaluate_gates(thresholds);
    }
    html::write_report(dir, &summary)?;
    Ok(Finished {
        terminal: render_terminal(&summary, color),
        dir: dir.to_owned(),
        summary,
    })
}

/// `mcpload compare BASE NEW`: reads both run folders' summary.json, compares them and renders
/// the comparison for the terminal.
pub fn compare_runs(
    base: &Path,
    new: &Path,
    options: &CompareOptions,
    color: bool,
) -> Result<(Comparison, String), ReportError> {
    let (b, n) = (RunSummary::read(base)?, RunSummary::read(new)?);
    let (bs, ns) = (b.step_figures(), n.step_figures());
    let c = compare((&bs, &b.knee), (&ns, &n.knee), options);
    let text = render_comparison(
        &c,
        &base.display().to_string(),
        &new.display().to_string(),
        color,
    );
    Ok((c, text))
}
