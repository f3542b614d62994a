//! The lossless record of a run, written as it goes (a crash keeps every finished step) so
//! that `mcpload merge` can add runs up exactly, as the engine adds up its workers:
//! counts.jsonl, one JSON line per second, per step and for the whole run's sessions and
//! authorization, holding every count; histograms.hlog, every histogram of every step in a
//! standard interval log, tagged `step=N/<name>`. Each second's latency histogram is
//! latency.hlog's interval of the same rank. docs/results.md describes both files.

use super::ReportError;
use super::hlog::{HlogFile, read_log};
use crate::engine::{MeasuredStep, Second};
use crate::metrics::{Counters, LatencyHistogram, ScenarioNames, Stats, StepFacts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One JSON line of counts.jsonl per second, per step, and for the run's sessions and auth.
pub const COUNTS_JSONL: &str = "counts.jsonl";
/// Every histogram of every step, one interval each, tagged `step=N/<name>`.
pub const HISTOGRAMS_HLOG: &str = "histograms.hlog";

/// The tag of the schedule lag's interval (open loop), after `step=N/`.
const LAG: &str = "lag";
/// The tag of the whole run's token fetch times (with authorization).
const RUN_TOKEN_FETCH: &str = "run/token_fetch";

/// The names operations and scenarios are numbered by (the tags and the counts use numbers).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Names {
    pub ops: Vec<String>,
    pub scenarios: Vec<ScenarioNames>,
}

/// A line of counts.jsonl.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    /// The first line.
    Names(Names),
    /// One second of a step: latency.hlog's interval of the same rank holds its latencies.
    Second {
        step: u32,
        /// Its rank within the step, from 0.
        second: u32,
        start_ns: u64,
        length_ns: u64,
        in_flight: u64,
        counters: Counters,
    },
    /// A finished step as measured, its histograms in histograms.hlog.
    Step { facts: StepFacts, stats: Box<Stats> },
    /// The whole run's transport counts, handshakes and closing included.
    Sessions { counters: Counters },
    Auth {
        token_requests: u64,
        token_refreshes: u64,
        /// With a token per user: the users holding one at the end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        users: Option<u64>,
    },
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Writes counts.jsonl and histograms.hlog.
pub(super) struct RawWriter {
    path: PathBuf,
    counts: BufWriter<File>,
    hlog: HlogFile,
    /// The step of the last second written, its rank, and its step's first second's start.
    at: Option<(u32, u32, Duration)>,
}

impl RawWriter {
    pub(super) fn create(
        dir: &Path,
        started: SystemTime,
        names: &Names,
    ) -> Result<Self, ReportError> {
        let path = dir.join(COUNTS_JSONL);
        let file = File::create(&path).map_err(|e| ReportError::io(&path, e))?;
        let hlog = HlogFile::create(
            dir.join(HISTOGRAMS_HLOG),
            started,
            "every histogram of each step, tagged step=N/<name> (docs/results.md)",
        )?;
        let mut w = RawWriter {
            path,
            counts: BufWriter::new(file),
            hlog,
            at: None,
        };
        w.line(&Line::Names(names.clone()))?;
        Ok(w)
    }

    fn line(&mut self, line: &Line) -> Result<(), ReportError> {
        let mut text = serde_json::to_vec(line).map_err(|e| ReportError::json(&self.path, e))?;
        text.push(b'\n');
        self.counts
            .write_all(&text)
            .and_then(|()| self.counts.flush())
            .map_err(|e| ReportError::io(&self.path, e))
    }

    pub(super) fn second(&mut self, s: &Second<'_>) -> Result<(), ReportError> {
        let (rank, first) = match self.at {
            Some((step, rank, first)) if step == s.step => (rank + 1, first),
            _ => (0, s.start),
        };
        self.at = Some((s.step, rank, first));
        self.line(&Line::Second {
            step: s.step,
            second: rank,
            start_ns: nanos(s.start),
            length_ns: nanos(s.length),
            in_flight: s.in_flight,
            counters: s.counters.clone(),
        })
    }

    /// The step's histograms first, then its line: a step with a line has all of them.
    pub(super) fn step(&mut self, m: &MeasuredStep) -> Result<(), ReportError> {
        let n = m.facts.step;
        let start = match self.at {
            Some((step, _, first)) if step == n => first,
            _ => Duration::ZERO,
        };
        let length = Duration::try_from_secs_f64(m.facts.duration_s).unwrap_or_default();
        for (name, h) in m.stats.histograms() {
            self.hlog
                .append(h, start, length, &format!("step={n}/{name}"))?;
        }
        if !m.lag.is_empty() {
            let tag = format!("step={n}/{LAG}");
            self.hlog.append(m.lag.histogram(), start, length, &tag)?;
        }
        self.line(&Line::Step {
            facts: m.facts.clone(),
            stats: Box::new(m.stats.clone()),
        })
    }

    pub(super) fn sessions(&mut self, whole: &Counters) -> Result<(), ReportError> {
        self.line(&Line::Sessions {
            counters: whole.clone(),
        })
    }

    pub(super) fn auth(&mut self, a: &AuthTotals) -> Result<(), ReportError> {
        if !a.fetch.is_empty() {
            self.hlog.append(
                a.fetch.histogram(),
                Duration::ZERO,
                Duration::ZERO,
                RUN_TOKEN_FETCH,
            )?;
        }
        self.line(&Line::Auth {
            token_requests: a.token_requests,
            token_refreshes: a.token_refreshes,
            users: a.users,
        })
    }
}

/// One second as recorded.
#[derive(Clone, Debug)]
pub struct RecordedSecond {
    pub step: u32,
    /// Its rank within the step, from 0.
    pub second: u32,
    pub start: Duration,
    pub length: Duration,
    pub in_flight: u64,
    pub counters: Counters,
    pub latency: LatencyHistogram,
}

impl RecordedSecond {
    /// The second as the engine hands it to a sink.
    pub fn as_second(&self) -> Second<'_> {
        Second {
            step: self.step,
            start: self.start,
            length: self.length,
            counters: &self.counters,
            in_flight: self.in_flight,
            latency: &self.latency,
            ops: &[],
            scenarios: &[],
            flows: None,
        }
    }
}

/// The whole run's authorization totals: summary.json `auth` is made from them.
#[derive(Clone, Debug, Default)]
pub struct AuthTotals {
    pub token_requests: u64,
    pub token_refreshes: u64,
    /// How long the token requests took.
    pub fetch: LatencyHistogram,
    /// With a token per user (`token_per_user`): the users holding one at the end.
    pub users: Option<u64>,
}

/// Everything a run folder recorded of its measurements, read back whole.
#[derive(Clone, Debug)]
pub struct Record {
    pub names: Names,
    /// latency.hlog's `StartTime`: the run's start, the origin of every `start`.
    pub started: Option<SystemTime>,
    pub seconds: Vec<RecordedSecond>,
    /// Every finished step, in order.
    pub steps: Vec<MeasuredStep>,
    /// The run's whole transport counts; `None` until its connections were closed.
    pub sessions: Option<Counters>,
    pub auth: Option<AuthTotals>,
}

/// What counts.jsonl says of a run without its counts or histograms: enough to check runs
/// against each other before reading any of them whole.
#[derive(Clone, Debug, Default)]
pub struct Outline {
    pub names: Names,
    /// Every finished step's facts, in order.
    pub steps: Vec<StepFacts>,
    pub sessions: bool,
    pub auth: bool,
}

impl Outline {
    /// Reads `dir/counts.jsonl` lightly (no histogram is made).
    pub fn read(dir: &Path) -> Result<Outline, ReportError> {
        let path = dir.join(COUNTS_JSONL);
        let bytes = fs::read(&path).map_err(|e| ReportError::io(&path, e))?;
        let mut out = Outline::default();
        for text in super::complete_lines(&bytes).split(|&b| b == b'\n') {
            if text.is_empty() {
                continue;
            }
            let line: serde_json::Value =
                serde_json::from_slice(text).map_err(|e| ReportError::json(&path, e))?;
            let json = |e| ReportError::json(&path, e);
            match line["kind"].as_str() {
                Some("names") => out.names = Names::deserialize(&line).map_err(json)?,
                Some("step") => out
                    .steps
                    .push(StepFacts::deserialize(&line["facts"]).map_err(json)?),
                Some("sessions") => out.sessions = true,
                Some("auth") => out.auth = true,
                _ => {}
            }
        }
        Ok(out)
    }
}

impl Record {
    /// Reads counts.jsonl, histograms.hlog and latency.hlog of `dir`. Lines cut short by a
    /// crash are left out; a histogram whose step has no line yet is too.
    pub fn read(dir: &Path) -> Result<Record, ReportError> {
        let path = dir.join(COUNTS_JSONL);
        let bytes = fs::read(&path).map_err(|e| ReportError::io(&path, e))?;
        let mut rec = Record {
            names: Names::default(),
            started: None,
            seconds: Vec::new(),
            steps: Vec::new(),
            sessions: None,
            auth: None,
        };
        for text in super::complete_lines(&bytes).split(|&b| b == b'\n') {
            if text.is_empty() {
                continue;
            }
            let line: Line =
                serde_json::from_slice(text).map_err(|e| ReportError::json(&path, e))?;
            match line {
                Line::Names(n) => rec.names = n,
                Line::Second {
                    step,
                    second,
                    start_ns,
                    length_ns,
                    in_flight,
                    counters,
                } => rec.seconds.push(RecordedSecond {
                    step,
                    second,
                    start: Duration::from_nanos(start_ns),
                    length: Duration::from_nanos(length_ns),
                    in_flight,
                    counters,
                    latency: LatencyHistogram::default(),
                }),
                Line::Step { facts, stats } => rec.steps.push(MeasuredStep {
                    facts,
                    stats: *stats,
                    lag: LatencyHistogram::default(),
                }),
                Line::Sessions { counters } => rec.sessions = Some(counters),
                Line::Auth {
                    token_requests,
                    token_refreshes,
                    users,
                } => {
                    rec.auth = Some(AuthTotals {
                        token_requests,
                        token_refreshes,
                        fetch: LatencyHistogram::default(),
                        users,
                    });
                }
            }
        }
        rec.read_histograms(dir)?;
        rec.read_latency(dir)?;
        Ok(rec)
    }

    fn read_histograms(&mut self, dir: &Path) -> Result<(), ReportError> {
        let path = dir.join(HISTOGRAMS_HLOG);
        let by_step: BTreeMap<u32, usize> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.facts.step, i))
            .collect();
        let mut fetch = LatencyHistogram::default();
        let bad = |msg: String| ReportError::Hlog {
            path: path.clone(),
            msg,
        };
        read_log(&path, |i| {
            let tag = i.tag.unwrap_or_default();
            let added = if tag == RUN_TOKEN_FETCH {
                fetch.add_read(&i.histogram)
            } else {
                let (step, name) = tag
                    .strip_prefix("step=")
                    .and_then(|t| t.split_once('/'))
                    .and_then(|(n, name)| Some((n.parse::<u32>().ok()?, name)))
                    .ok_or_else(|| bad(format!("unknown tag {tag:?}")))?;
                let Some(&k) = by_step.get(&step) else {
                    return Ok(()); // a step cut short by a crash before its line
                };
                let m = &mut self.steps[k];
                if name == LAG {
                    m.lag.add_read(&i.histogram)
                } else {
                    let mut slot = m.stats.histogram_mut(name).ok_or_else(|| {
                        bad(format!("unknown histogram {name:?} (a newer mcpload?)"))
                    })?;
                    slot.add(&i.histogram)
                }
            };
            added.map_err(|e| bad(format!("{tag}: {e:?}")))
        })?;
        if let Some(a) = self.auth.as_mut() {
            a.fetch = fetch;
        }
        Ok(())
    }

    /// Each second's latency: latency.hlog's interval of the same rank (both written by the
    /// same event, the log first).
    fn read_latency(&mut self, dir: &Path) -> Result<(), ReportError> {
        let path = dir.join(super::LATENCY_HLOG);
        let mut k = 0;
        let seconds = &mut self.seconds;
        self.started = read_log(&path, |i| {
            if let Some(s) = seconds.get_mut(k) {
                if i.tag != Some(&format!("step={}", s.step)) {
                    return Err(ReportError::Hlog {
                        path: path.clone(),
                        msg: format!(
                            "interval {} is tagged {:?}; counts.jsonl has step {} there",
                            k + 1,
                            i.tag,
                            s.step
                        ),
                    });
                }
                s.latency
                    .add_read(&i.histogram)
                    .map_err(|e| ReportError::Hlog {
                        path: path.clone(),
                        msg: format!("{e:?}"),
                    })?;
            }
            k += 1;
            Ok(())
        })?;
        Ok(())
    }
}
