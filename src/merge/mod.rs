//! `mcpload merge`: the run folders of one run's segments, checked against each other, added
//! up as the engine adds up its workers (every count, every histogram, the levels) and replayed
//! through a fresh judge into a normal run folder, so that percentiles, verdicts, the knee, the
//! USL fit, the CSVs and report.html come from the same code as a run's. Nothing is rebuilt
//! from percentiles: each folder's counts.jsonl, histograms.hlog and latency.hlog hold every
//! count and histogram of every second and step.

use crate::analysis::{SweepJudge, Thresholds};
use crate::engine::Second;
use crate::engine::{MeasuredStep, SweepEnd};
use crate::metrics::{Counters, StepSummary};
use crate::report::{
    self, AuthTotals, Finished, MergedFrom, Misaligned, Outline, ProfileCopy, Record,
    RecordedSecond, ReportError, RunFolder, RunSpec, RunStatus, RunSummary, SegmentRecord,
};
use crate::watch::ResourceSample;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What to merge and how.
#[derive(Clone, Debug)]
pub struct MergeOptions {
    /// The segments' run folders, in any order.
    pub dirs: Vec<PathBuf>,
    /// The merged folder; `results/<UTC timestamp>-<name>-merged` when absent.
    pub out: Option<PathBuf>,
    /// Merge what is there when segments are missing, and mark the result partial.
    pub partial: bool,
    /// Gates checked in place of the profile's (none: the profile's own).
    pub thresholds: Thresholds,
    /// Judge every step recorded, past a failed one too, whatever the profile's
    /// `stop_on_failure`.
    pub keep_going: bool,
    /// ANSI colours in the terminal report.
    pub color: bool,
}

/// Why folders could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{}: {reason}", dir.display())]
    Refused { dir: PathBuf, reason: String },
    #[error(
        "segment(s) {} of {count} missing (merging {}): give every segment's folder, or --partial to merge what is there",
        list(missing),
        list(present)
    )]
    Missing {
        missing: Vec<u32>,
        present: Vec<u32>,
        count: u32,
    },
    #[error("nothing to merge: give at least one run folder")]
    Nothing,
    #[error(transparent)]
    Report(#[from] ReportError),
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// A finished merge.
#[derive(Debug)]
pub struct Merged {
    pub finished: Finished,
    /// What the terminal is told before the report: the folders merged, each segment's status,
    /// what was left out, the misaligned windows.
    pub preface: String,
    /// The merged run's status (the worst of the segments').
    pub status: RunStatus,
}

/// One folder read.
struct Input {
    dir: PathBuf,
    summary: RunSummary,
    segment: Option<SegmentRecord>,
    /// The profile copy: its file name and text.
    profile: Option<(String, String)>,
    /// Its counts.jsonl's names and step facts: read whole, one folder at a time, only once
    /// every folder is checked.
    outline: Outline,
}

impl Input {
    fn read(dir: &Path) -> Result<Input, MergeError> {
        let refuse = |reason: String| MergeError::Refused {
            dir: dir.to_owned(),
            reason,
        };
        let summary = RunSummary::read(dir)?;
        let segment = summary.segment.clone();
        let profile = match &summary.profile_file {
            Some(name) => {
                let text = std::fs::read_to_string(dir.join(name))
                    .map_err(|e| refuse(format!("{name}: {e}")))?;
                Some((name.clone(), text))
            }
            None => None,
        };
        let outline = Outline::read(dir).map_err(|e| match e {
            ReportError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                refuse(format!(
                    "no {} or {}: written by an mcpload older than `mcpload merge`, it holds \
                     no lossless record of its histograms and cannot be merged exactly",
                    report::COUNTS_JSONL,
                    report::HISTOGRAMS_HLOG
                ))
            }
            other => other.into(),
        })?;
        Ok(Input {
            dir: dir.to_owned(),
            summary,
            segment,
            profile,
            outline,
        })
    }

    fn label(&self) -> String {
        match &self.segment {
            Some(s) => format!("segment {}/{}", s.index, s.count),
            None => "whole run".into(),
        }
    }

    /// `settings.load.<key>`.
    fn load(&self, key: &str) -> Value {
        self.summary.settings["load"][key].clone()
    }
}

/// Merges the folders of `options` into one run folder.
pub fn merge(options: &MergeOptions) -> Result<Merged, MergeError> {
    if options.dirs.is_empty() {
        return Err(MergeError::Nothing);
    }
    let mut inputs = options
        .dirs
        .iter()
        .map(|d| Input::read(d))
        .collect::<Result<Vec<_>, _>>()?;
    let partial = check_segments(&mut inputs, options.partial)?;
    check_alike(&inputs)?;
    let first = &inputs[0];
    let mut preface = String::new();
    let steps = inputs
        .iter()
        .map(|i| i.outline.steps.len())
        .min()
        .unwrap_or(0);
    for i in &inputs {
        let n = i.outline.steps.len();
        if n > steps {
            preface.push_str(&format!(
                "steps {}..{n} of {} left out: not every segment recorded them\n",
                steps + 1,
                i.dir.display()
            ));
        }
    }
    for (k, i) in inputs.iter().enumerate() {
        for (j, m) in i.outline.steps.iter().take(steps).enumerate() {
            let want = first.outline.steps[j].step;
            if m.step != want || m.model != first.outline.steps[j].model {
                return Err(MergeError::Refused {
                    dir: i.dir.clone(),
                    reason: format!(
                        "misaligned steps: its step record {} is step {} ({:?}), {}'s is step {want}",
                        j + 1,
                        m.step,
                        m.model,
                        inputs[if k == 0 { 1 } else { 0 }].dir.display()
                    ),
                });
            }
        }
    }
    let misaligned = misaligned(&inputs);
    let status = inputs
        .iter()
        .map(|i| i.summary.status)
        .max_by_key(|s| severity(*s))
        .unwrap_or(RunStatus::Complete);
    let from: Vec<MergedFrom> = inputs
        .iter()
        .map(|i| MergedFrom {
            dir: i.dir.display().to_string(),
            index: i.segment.as_ref().map(|s| s.index),
            count: i.segment.as_ref().map(|s| s.count),
            status: i.summary.status,
            start_late_ms: i.segment.as_ref().and_then(|s| s.start_late_ms),
        })
        .collect();
    let mut head = format!("merged {} folder(s):\n", inputs.len());
    for (i, f) in inputs.iter().zip(&from) {
        let status = match f.status {
            RunStatus::Complete => String::new(),
            other => format!(
                "  [{}{}]",
                status_name(other),
                i.summary
                    .status_reason
                    .as_ref()
                    .map_or_else(String::new, |r| format!(": {r}"))
            ),
        };
        head.push_str(&format!("  {} {}{status}\n", i.label(), i.dir.display()));
    }
    if partial {
        head.push_str(
            "PARTIAL: segments are missing; the merged figures are of those given only\n",
        );
    }
    for m in &misaligned {
        head.push_str(&format!(
            "WARNING: {} (segment {}) started step {} {:+.0} ms from the others (more than a tenth of the step)\n",
            m.dir, m.index, m.step, m.offset_ms
        ));
    }
    preface.insert_str(0, &head);

    // Every folder checked, each is read whole in turn and added up: the memory of one
    // folder's record and of the sums, not of every folder's.
    let mut sums = Sums::new(steps);
    for i in &inputs {
        let record = Record::read(&i.dir)?;
        sums.add(record, &i.summary.started_at);
    }
    let started = sums.started.unwrap_or_else(SystemTime::now);
    let dir = options.out.clone().unwrap_or_else(|| {
        report::default_run_dir(
            Path::new("results"),
            &format!("{}-merged", first.summary.name),
            SystemTime::now(),
        )
    });
    let mut spec = RunSpec::new(dir, &first.summary.name);
    spec.settings = first.summary.settings.clone();
    if let Some(o) = spec.settings.as_object_mut() {
        o.remove("segment"); // segment 1's own: the merged run is every segment
    }
    spec.criteria = first.summary.criteria.clone();
    spec.started = started;
    spec.names = first.outline.names.clone();
    spec.profile = first
        .profile
        .clone()
        .map(|(source, text)| ProfileCopy { source, text });
    let mut folder = RunFolder::create(spec)?;
    if let Some(r) = &first.summary.protocol_revision {
        folder.set_protocol_revision(r)?;
    }
    let mut judge = SweepJudge::new(first.summary.criteria.clone())
        .naming_ops(first.outline.names.ops.clone())
        .naming_scenarios(first.outline.names.scenarios.clone());
    // Segments run the whole schedule (a share cannot tell when the whole failed): the
    // merge stops where one process would have, as the engine does.
    let stop_on_failure = !options.keep_going && profile_stops_on_failure(first);
    let server_seconds = ServerSeconds::read(&inputs)?;
    for (k, sum) in std::mem::take(&mut sums.steps).into_iter().enumerate() {
        let (seconds, step) = sum.finish();
        for s in &seconds {
            let second = s.as_second();
            folder.record_second_with(&second, server_seconds.of(&second).as_ref())?;
        }
        folder.record_measured(&step)?;
        let mut judged = judge.judge(step.facts, &step.stats);
        server_maxima(&mut judged.figures, &inputs);
        folder.record_step(&judged)?;
        let f = &judged.figures;
        if k + 1 < steps
            && (f.interrupted || f.target_down.is_some() || stop_on_failure && judged.stop())
        {
            let why = if f.interrupted {
                "it was interrupted"
            } else if f.target_down.is_some() {
                "the target went down"
            } else {
                "it failed and the profile stops on failure (--keep-going merges them)"
            };
            preface.push_str(&format!(
                "steps {}..{steps} not merged: the merged run ends at step {} ({why})\n",
                f.step + 1,
                f.step
            ));
            break;
        }
    }
    folder.record_end(&match status {
        RunStatus::Complete => SweepEnd::Complete,
        RunStatus::Interrupted => SweepEnd::Interrupted,
        _ => SweepEnd::Aborted(
            inputs
                .iter()
                .filter(|i| severity(i.summary.status) >= severity(RunStatus::Running))
                .map(|i| {
                    format!(
                        "{} ({}) {}",
                        i.label(),
                        i.dir.display(),
                        match (i.summary.status, &i.summary.status_reason) {
                            (RunStatus::Running, _) => "never finished (its process died)".into(),
                            (_, Some(r)) => format!("aborted: {r}"),
                            _ => "aborted".into(),
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
    })?;
    if let Some(whole) = &sums.sessions {
        folder.record_sessions(whole)?;
        if let Some(auth) = &sums.auth {
            folder.record_auth(whole, auth)?;
        }
    }
    folder.record_merge(from, partial, misaligned)?;
    let thresholds = if options.thresholds.is_empty() {
        let texts: Vec<String> = first.summary.settings["thresholds"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Thresholds::parse(&texts).map_err(|e| MergeError::Refused {
            dir: first.dir.clone(),
            reason: format!("its thresholds: {e}"),
        })?
    } else {
        options.thresholds.clone()
    };
    let gates = folder.summary().evaluate_gates(&thresholds);
    let finished = folder.finish(gates, options.color)?;
    Ok(Merged {
        finished,
        preface,
        status,
    })
}

/// The profile copy's `load.stop_on_failure` (`true` when there is none, its default).
fn profile_stops_on_failure(input: &Input) -> bool {
    input.profile.as_ref().is_none_or(|(name, text)| {
        let source = crate::profile::Source {
            path: input.dir.join(name),
            text: text.clone(),
        };
        source.parse().map_or(true, |p| p.load.stop_on_failure)
    })
}

/// Complete < interrupted < running (the process died) < aborted.
fn severity(s: RunStatus) -> u8 {
    match s {
        RunStatus::Complete => 0,
        RunStatus::Interrupted => 1,
        RunStatus::Running => 2,
        RunStatus::Aborted => 3,
    }
}

fn status_name(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Complete => "complete",
        RunStatus::Interrupted => "interrupted",
        RunStatus::Running => "never finished",
        RunStatus::Aborted => "aborted",
    }
}

/// Checks the segment blocks and sorts `inputs` by segment; says whether segments miss.
fn check_segments(inputs: &mut [Input], partial: bool) -> Result<bool, MergeError> {
    if inputs.len() == 1 && inputs[0].segment.is_none() {
        return Ok(false); // a whole run alone: merged, it is itself
    }
    if let Some(i) = inputs.iter().find(|i| i.segment.is_none()) {
        return Err(MergeError::Refused {
            dir: i.dir.clone(),
            reason: "not a segment (its summary.json has no segment block): only the segments \
                     of one run (`mcpload run --segment I/N`) merge, or one whole run alone; \
                     whole runs were not split to add up and need not have run at the same time"
                .into(),
        });
    }
    inputs.sort_by_key(|i| i.segment.as_ref().map(|s| s.index));
    let seg = |i: &Input| i.segment.clone().expect("checked");
    let count = seg(&inputs[0]).count;
    for w in inputs.windows(2) {
        let (a, b) = (seg(&w[0]), seg(&w[1]));
        if b.count != count {
            return Err(MergeError::Refused {
                dir: w[1].dir.clone(),
                reason: format!(
                    "segment {}/{}, but {} is a segment of {count}: not the same run",
                    b.index,
                    b.count,
                    inputs[0].dir.display()
                ),
            });
        }
        if a.index == b.index {
            return Err(MergeError::Refused {
                dir: w[1].dir.clone(),
                reason: format!(
                    "segment {}/{count} twice: {} is segment {}/{count} too",
                    b.index,
                    w[0].dir.display(),
                    a.index
                ),
            });
        }
    }
    if let Some(i) = inputs.iter().find(|i| {
        let s = seg(i);
        s.index == 0 || s.index > s.count
    }) {
        let s = seg(i);
        return Err(MergeError::Refused {
            dir: i.dir.clone(),
            reason: format!("segment {}/{}: no such segment", s.index, s.count),
        });
    }
    let present: Vec<u32> = inputs.iter().map(|i| seg(i).index).collect();
    let missing: Vec<u32> = (1..=count).filter(|k| !present.contains(k)).collect();
    if !missing.is_empty() && !partial {
        return Err(MergeError::Missing {
            missing,
            present,
            count,
        });
    }
    Ok(!missing.is_empty())
}

/// Refuses folders that did not run the same thing: the profile, the protocol revision, the
/// planned steps (model, how many, how long), the operations and scenarios.
fn check_alike(inputs: &[Input]) -> Result<(), MergeError> {
    let first = &inputs[0];
    for i in &inputs[1..] {
        let refuse = |reason: String| MergeError::Refused {
            dir: i.dir.clone(),
            reason,
        };
        let other = first.dir.display();
        if i.profile.as_ref().map(|p| &p.1) != first.profile.as_ref().map(|p| &p.1) {
            return Err(refuse(format!(
                "its profile differs from {other}'s (compare their profile copies): not the same run"
            )));
        }
        if i.summary.protocol_revision != first.summary.protocol_revision {
            return Err(refuse(format!(
                "protocol revision {:?}, {other}'s is {:?}",
                i.summary.protocol_revision, first.summary.protocol_revision
            )));
        }
        let plan = |x: &Input| {
            (
                x.load("model"),
                x.load("levels").as_array().map_or(0, Vec::len),
                x.load("duration_s"),
            )
        };
        if plan(i) != plan(first) {
            let (m, n, d) = plan(i);
            let (m0, n0, d0) = plan(first);
            return Err(refuse(format!(
                "misaligned steps: it plans {n} step(s) of {d} s ({m}), {other} {n0} of {d0} s ({m0})"
            )));
        }
        if i.outline.names != first.outline.names {
            return Err(refuse(format!(
                "its operations or scenarios differ from {other}'s"
            )));
        }
    }
    Ok(())
}

/// The segments whose step windows start more than a tenth of the step's planned duration
/// from the (lower) median start of that step's windows.
fn misaligned(inputs: &[Input]) -> Vec<Misaligned> {
    let duration_ms = inputs[0].load("duration_s").as_f64().unwrap_or(0.0) * 1000.0;
    let mut by_step: BTreeMap<u32, Vec<(&Input, u32, f64)>> = BTreeMap::new();
    for i in inputs {
        if let Some(s) = &i.segment {
            for w in &s.steps {
                by_step
                    .entry(w.step)
                    .or_default()
                    .push((i, s.index, w.start_unix_ms));
            }
        }
    }
    let mut out = Vec::new();
    for (step, windows) in by_step {
        let mut starts: Vec<f64> = windows.iter().map(|w| w.2).collect();
        starts.sort_by(f64::total_cmp);
        let median = starts[(starts.len() - 1) / 2];
        for (i, index, start) in windows {
            let offset_ms = start - median;
            if offset_ms.abs() > duration_ms / 10.0 {
                out.push(Misaligned {
                    dir: i.dir.display().to_string(),
                    index,
                    step,
                    offset_ms,
                });
            }
        }
    }
    out
}

/// The watched server's figures of every second of the segments (timeseries.csv's
/// `server_*` columns), by step and start: a merged second shows the largest any segment saw
/// (each watched the server, or its own share of a fleet, in the same second).
struct ServerSeconds(BTreeMap<(u32, u64), ResourceSample>);

impl ServerSeconds {
    fn read(inputs: &[Input]) -> Result<ServerSeconds, MergeError> {
        let mut all: BTreeMap<(u32, u64), ResourceSample> = BTreeMap::new();
        for i in inputs {
            for row in report::read_timeseries(&i.dir)? {
                let got = ResourceSample {
                    rss_bytes: row.server_rss_bytes,
                    cpu_pct: row.server_cpu_pct,
                    threads: row.server_threads,
                    fds: row.server_fds,
                    ..ResourceSample::default()
                };
                let at = all
                    .entry((row.step, (row.t_s * 1000.0).round() as u64))
                    .or_default();
                at.rss_bytes = at.rss_bytes.max(got.rss_bytes);
                at.cpu_pct = match (at.cpu_pct, got.cpu_pct) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                at.threads = at.threads.max(got.threads);
                at.fds = at.fds.max(got.fds);
            }
        }
        Ok(ServerSeconds(all))
    }

    fn of(&self, s: &Second<'_>) -> Option<ResourceSample> {
        let ms = (s.start.as_secs_f64() * 1000.0).round() as u64;
        self.0.get(&(s.step, ms)).cloned()
    }
}

/// The watched server's largest RSS and CPU in a merged step: the largest any segment saw
/// (each watched the server, or its own share of a fleet, in the same window).
fn server_maxima(figures: &mut StepSummary, inputs: &[Input]) {
    let same = || {
        inputs
            .iter()
            .flat_map(|i| &i.summary.steps)
            .map(|r| &r.figures)
            .filter(|f| f.step == figures.step)
    };
    figures.server_rss_max_bytes = same().filter_map(|f| f.server_rss_max_bytes).max();
    figures.server_cpu_max_pct = same()
        .filter_map(|f| f.server_cpu_max_pct)
        .max_by(f64::total_cmp);
}

/// The folders added up so far, one at a time.
struct Sums {
    steps: Vec<StepSum>,
    /// The earliest run start (latency.hlog's `StartTime`, else summary.json's).
    started: Option<SystemTime>,
    /// `None` as soon as one folder lacks them.
    sessions: Option<Counters>,
    auth: Option<AuthTotals>,
}

impl Sums {
    fn new(steps: usize) -> Self {
        Sums {
            steps: (0..steps).map(|_| StepSum::default()).collect(),
            started: None,
            sessions: Some(Counters::default()),
            auth: Some(AuthTotals::default()),
        }
    }

    /// Adds one folder's record: its first `self.steps.len()` steps and their seconds, its
    /// sessions and auth.
    fn add(&mut self, record: Record, started_at: &str) {
        let started = record
            .started
            .or_else(|| humantime::parse_rfc3339(started_at).ok());
        self.started = match (self.started, started) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut seconds = record.seconds.into_iter().peekable();
        for (sum, m) in self.steps.iter_mut().zip(record.steps) {
            let n = m.facts.step;
            // Seconds come in step order: skip those of steps left out, take this step's.
            while seconds.next_if(|s| s.step != n).is_some() {}
            let mine = std::iter::from_fn(|| seconds.next_if(|s| s.step == n));
            sum.add(m, mine);
        }
        self.sessions = match (self.sessions.take(), record.sessions) {
            (Some(mut a), Some(b)) => {
                a += &b;
                Some(a)
            }
            _ => None,
        };
        self.auth = match (self.auth.take(), record.auth) {
            (Some(mut a), Some(b)) => {
                a.token_requests += b.token_requests;
                a.token_refreshes += b.token_refreshes;
                a.fetch += &b.fetch;
                // Users of different segments are different users.
                a.users = match (a.users, b.users) {
                    (None, u) | (u, None) => u,
                    (Some(x), Some(y)) => Some(x + y),
                };
                Some(a)
            }
            _ => None,
        };
    }
}

/// One step of every folder added so far.
#[derive(Default)]
struct StepSum {
    step: Option<MeasuredStep>,
    /// The sum of the folders' task peaks.
    tasks_live: u64,
    /// By rank in the step.
    seconds: BTreeMap<u32, RecordedSecond>,
}

impl StepSum {
    fn add(&mut self, m: MeasuredStep, seconds: impl Iterator<Item = RecordedSecond>) {
        self.tasks_live += m
            .stats
            .flows
            .as_ref()
            .map_or(0, |f| f.counters.tasks_live_max);
        match self.step.as_mut() {
            None => self.step = Some(m),
            Some(sum) => {
                let (facts, f) = (&mut sum.facts, &m.facts);
                // Each segment holds its share of the level: the whole is their sum.
                if let (Some(c), Some(x)) = (facts.concurrency.as_mut(), f.concurrency) {
                    *c += x;
                }
                if let (Some(r), Some(x)) = (facts.target_rate.as_mut(), f.target_rate) {
                    *r += x;
                }
                if let (Some(d), Some(x)) = (facts.dropped_arrivals.as_mut(), f.dropped_arrivals) {
                    *d += x;
                }
                // As the engine takes its longest worker's: every count is over that window.
                facts.duration_s = facts.duration_s.max(f.duration_s);
                facts.in_flight_at_end += f.in_flight_at_end;
                facts.interrupted |= f.interrupted;
                facts.generator.merge(&f.generator);
                facts.target_down = facts.target_down.take().or_else(|| f.target_down.clone());
                facts.transport_error = facts
                    .transport_error
                    .take()
                    .or_else(|| f.transport_error.clone());
                sum.stats += &m.stats;
                sum.lag += &m.lag;
            }
        }
        for s in seconds {
            match self.seconds.get_mut(&s.second) {
                None => {
                    self.seconds.insert(s.second, s);
                }
                Some(slot) => {
                    // As the engine merges workers: the second's peak is the sum of theirs.
                    let peaks = slot.counters.in_flight_max + s.counters.in_flight_max;
                    slot.counters += &s.counters;
                    slot.counters.in_flight_max = peaks;
                    slot.start = slot.start.min(s.start);
                    slot.length = slot.length.max(s.length);
                    slot.in_flight += s.in_flight;
                    slot.latency += &s.latency;
                }
            }
        }
    }

    /// The merged step and its seconds.
    fn finish(self) -> (Vec<RecordedSecond>, MeasuredStep) {
        let mut m = self.step.expect("every folder has the step");
        // Sums of floating shares (a third of a rate, thrice): to a millionth.
        m.facts.target_rate = m.facts.target_rate.map(|r| (r * 1e6).round() / 1e6);
        if let Some(peak) = self
            .seconds
            .values()
            .map(|s| s.counters.in_flight_max)
            .max()
        {
            m.stats.counters.in_flight_max = peak;
        }
        if let Some(f) = m.stats.flows.as_mut() {
            // Per-second task peaks are not recorded: the sum of the segments' peaks bounds
            // the true one from above, as the engine's sum of its workers' does.
            f.counters.tasks_live_max = self.tasks_live;
        }
        m.facts.set_lag(&m.lag);
        (self.seconds.into_values().collect(), m)
    }
}
