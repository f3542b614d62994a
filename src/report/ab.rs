//! A/B results (docs/ab.md): run folders read as samples of the A/B verdict (their steady
//! figures per step and operation, the trend and generator checks that keep a run out, batches
//! of seconds for a one-folder-per-side compare), and the verdict's outputs: `ab.json`, the
//! terminal table, the Markdown summary and the A/B report.html with its forest plot.

pub use super::ab_html::write_ab_html;
use super::ci::md;
use super::raw::Record;
use super::summary::{RunStatus, RunSummary};
use super::terminal::{BOLD, GREEN, RED, Table, YELLOW, paint};
use super::{ReportError, SUMMARY_JSON};
use crate::analysis::ab::{
    self, AbOptions, AbVerdict, Cell, Design, Figure, FigureVerdict, Measured, Observation,
    TREND_MIN_POINTS, Trend, WHOLE_STEP,
};
use crate::analysis::pct;
use crate::analysis::stats;
use crate::metrics::{LatencyHistogram, NO_OP, Percentiles};
use anstyle::Style;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};

/// The A/B folder's machine-readable record.
pub const AB_JSON: &str = "ab.json";
/// The A/B folder's Markdown summary.
pub const AB_SUMMARY_MD: &str = "summary.md";
/// ab.json's schema version.
pub const AB_SCHEMA_VERSION: u32 = 1;
/// Batches a one-folder-per-side compare splits each steady window into (at most).
const BATCHES: usize = 10;
/// Batch means whose lag-1 autocorrelation passes this are not independent enough to trust.
const BATCH_AUTOCORRELATION_LIMIT: f64 = 0.3;

/// A side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
}

/// A step's steady window checked for a trend in throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepTrend {
    pub step: u32,
    /// Whole seconds in the steady window.
    pub seconds: usize,
    /// `null` when the window is shorter than the check needs.
    pub trend: Option<Trend>,
}

/// One run folder as the verdict uses it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunUse {
    pub side: Side,
    /// Its pair (`mcpload ab`), from 1.
    pub pair: Option<u32>,
    /// The folder, relative to the A/B folder where it lies inside it.
    pub dir: String,
    /// Whether its figures are in the verdict.
    pub used: bool,
    /// Why not, when not.
    pub reason: Option<String>,
    /// Its generator-bound steps and why, when it had any (docs/metrics.md, "The
    /// generator").
    #[serde(default)]
    pub generator_bound: Option<String>,
    pub trends: Vec<StepTrend>,
}

/// The start of the warning naming the generator-bound runs compared.
const GENERATOR_WARNING: &str = "generator-bound:";

/// A run folder read for the verdict.
#[derive(Clone, Debug)]
pub struct ReadRun {
    pub observation: Observation,
    /// Why the run is left out of the verdict, when it is.
    pub excluded: Option<String>,
    /// Its generator-bound steps and why, when it had any.
    pub generator_bound: Option<String>,
    pub trends: Vec<StepTrend>,
}

/// Reads a run folder's steady figures, per step (`*`) and per operation, and checks it:
/// a run that did not complete, that has a generator-bound step (unless
/// `keep_generator_bound`), or whose steady window still trends past the band is read but
/// marked excluded, with the reason.
pub fn read_run(dir: &Path, options: &AbOptions) -> Result<ReadRun, ReportError> {
    let band = options.band;
    let summary = RunSummary::read(dir)?;
    let mut observation = Vec::new();
    for s in &summary.steps {
        let f = &s.figures;
        let load = f
            .concurrency
            .map_or(f.target_rate.unwrap_or(0.0), |c| c as f64);
        let cell = |op: &str| Cell {
            step: f.step,
            model: f.model,
            load,
            op: op.to_owned(),
        };
        observation.push(Measured {
            cell: cell(WHOLE_STEP),
            throughput_rps: f.throughput_rps,
            p50_ms: f.p50_ms,
            p99_ms: f.p99_ms,
            failed: f.requests.saturating_sub(f.ok),
            total: f.requests,
        });
        // One operation is the step itself: its rows would only repeat it.
        if s.ops.iter().filter(|o| o.op != NO_OP).count() > 1 {
            for o in s.ops.iter().filter(|o| o.op != NO_OP) {
                observation.push(Measured {
                    cell: cell(&o.op),
                    throughput_rps: o.throughput_rps,
                    p50_ms: o.p50_ms,
                    p99_ms: o.p99_ms,
                    failed: o.requests.saturating_sub(o.ok),
                    total: o.requests,
                });
            }
        }
    }
    let record = Record::read(dir)?;
    let trends: Vec<StepTrend> = summary
        .steps
        .iter()
        .map(|s| {
            let points = throughput_per_second(&record, s.figures.step);
            StepTrend {
                step: s.figures.step,
                seconds: points.len(),
                trend: ab::trend(&points, band),
            }
        })
        .collect();
    let bound: Vec<String> = summary
        .steps
        .iter()
        .filter(|s| s.figures.generator_bound)
        .map(|s| {
            let why = s.figures.generator_bound_reason.as_deref().unwrap_or("");
            format!("step {} was generator-bound ({why})", s.figures.step)
        })
        .collect();
    let trending: Vec<String> = trends
        .iter()
        .filter_map(|t| {
            let tr = t.trend.filter(|tr| tr.trending)?;
            Some(format!(
                "step {} still trends: throughput {:+.1}% over its steady window",
                t.step,
                tr.change * 100.0
            ))
        })
        .collect();
    let excluded = if summary.status != RunStatus::Complete {
        Some(format!(
            "the run did not complete ({})",
            super::terminal::status_phrase(summary.status)
        ))
    } else if summary.steps.is_empty() {
        Some("the run measured no step".to_owned())
    } else if !options.keep_generator_bound && !bound.is_empty() {
        Some(bound.join("; "))
    } else if !trending.is_empty() {
        Some(trending.join("; "))
    } else {
        None
    };
    Ok(ReadRun {
        observation,
        excluded,
        generator_bound: (!bound.is_empty()).then(|| bound.join("; ")),
        trends,
    })
}

/// Whole seconds (at least 0.999 s long) of a step: `(start s, responses per second)`.
fn throughput_per_second(record: &Record, step: u32) -> Vec<(f64, f64)> {
    record
        .seconds
        .iter()
        .filter(|s| s.step == step && s.length.as_secs_f64() >= 0.999)
        .map(|s| {
            let len = s.length.as_secs_f64();
            (s.start.as_secs_f64(), s.counters.responses as f64 / len)
        })
        .collect()
}

/// A one-folder side: each step's steady window split into up to [`BATCHES`] batches of
/// whole seconds, each batch an observation of the step (`*` only: seconds are not kept per
/// operation), its latencies from the batch's merged histograms, its error rate over the
/// requests that ended in it. Also the warnings: a generator-bound step (one run a side has
/// no other run to fall back on, so it is kept and said), and batch means that are
/// autocorrelated.
pub fn read_batches(dir: &Path) -> Result<(Vec<Observation>, Vec<String>), ReportError> {
    let summary = RunSummary::read(dir)?;
    let record = Record::read(dir)?;
    let mut batches: Vec<Observation> = Vec::new();
    let mut warnings = Vec::new();
    for s in &summary.steps {
        let f = &s.figures;
        let load = f
            .concurrency
            .map_or(f.target_rate.unwrap_or(0.0), |c| c as f64);
        let seconds: Vec<_> = record
            .seconds
            .iter()
            .filter(|x| x.step == f.step && x.length.as_secs_f64() >= 0.999)
            .collect();
        if seconds.len() < 2 * 2 {
            warnings.push(format!(
                "{}: step {} has {} whole seconds, too few to batch",
                dir.display(),
                f.step,
                seconds.len()
            ));
            continue;
        }
        let size = seconds.len().div_ceil(BATCHES);
        let mut means = Vec::new();
        for (i, chunk) in seconds.chunks(size).enumerate() {
            let mut latency = LatencyHistogram::default();
            // A second's requests may end in the next: a batch counts the requests that
            // ended in it, and those that ended other than ok.
            let (mut responses, mut ended, mut ok, mut secs) = (0u64, 0u64, 0u64, 0.0);
            for x in chunk {
                latency += &x.latency;
                responses += x.counters.responses;
                ended += x.counters.ended();
                ok += x.counters.ok;
                secs += x.length.as_secs_f64();
            }
            let p = Percentiles::of(&latency);
            let rps = responses as f64 / secs;
            means.push(rps);
            if batches.len() <= i {
                batches.push(Vec::new());
            }
            batches[i].push(Measured {
                cell: Cell {
                    step: f.step,
                    model: f.model,
                    load,
                    op: WHOLE_STEP.to_owned(),
                },
                throughput_rps: rps,
                p50_ms: p.p50,
                p99_ms: p.p99,
                failed: ended.saturating_sub(ok),
                total: ended,
            });
        }
        if let Some(r) = stats::lag1_autocorrelation(&means)
            && r > BATCH_AUTOCORRELATION_LIMIT
        {
            warnings.push(format!(
                "{}: step {}'s batch means are autocorrelated (lag-1 {r:.2} > \
                 {BATCH_AUTOCORRELATION_LIMIT}): the intervals are too narrow",
                dir.display(),
                f.step
            ));
        }
    }
    Ok((batches, warnings))
}

/// The folders a `compare` argument stands for: a run folder itself, or a folder of run
/// folders (`run --repeat`, an A/B folder's side), each subfolder holding a summary.json, in
/// name order.
pub fn run_folders(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if dir.join(SUMMARY_JSON).is_file() {
        return Ok(vec![dir.to_owned()]);
    }
    let entries = fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(SUMMARY_JSON).is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(ReportError::io(
            &dir.join(SUMMARY_JSON),
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not a run folder, nor a folder of run folders",
            ),
        ));
    }
    Ok(found)
}

/// Where an A/B comparison stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbStatus {
    Running,
    Complete,
    Interrupted,
}

/// A pair of `mcpload ab`: its two runs and the order they ran in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairRecord {
    pub pair: u32,
    /// `ab` or `ba`.
    pub order: String,
    pub a: String,
    pub b: String,
}

/// ab.json: every number of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbRecord {
    pub schema_version: u32,
    pub mcpload_version: String,
    /// `ab` or `compare`.
    pub command: String,
    pub status: AbStatus,
    pub design: Design,
    pub profile: Option<String>,
    /// Each side's target (secrets redacted) or folders.
    pub a: String,
    pub b: String,
    /// `mcpload ab`: the pairs asked for, and the seed the orders were drawn with.
    pub pairs_asked: Option<u32>,
    pub seed: Option<u64>,
    pub band: f64,
    pub alpha: f64,
    /// Runs with a generator-bound step were kept (`--keep-generator-bound`), not left out.
    #[serde(default)]
    pub keep_generator_bound: bool,
    pub pairs: Vec<PairRecord>,
    pub runs: Vec<RunUse>,
    pub warnings: Vec<String>,
    /// The comparison's answer (`analysis::ab::overall`).
    pub verdict: AbVerdict,
    pub figures: Vec<FigureVerdict>,
}

impl AbRecord {
    /// A record with nothing judged yet.
    pub fn new(command: &str, design: Design, a: String, b: String, options: &AbOptions) -> Self {
        AbRecord {
            schema_version: AB_SCHEMA_VERSION,
            mcpload_version: env!("CARGO_PKG_VERSION").to_owned(),
            command: command.to_owned(),
            status: AbStatus::Running,
            design,
            profile: None,
            a,
            b,
            pairs_asked: None,
            seed: None,
            band: options.band,
            alpha: options.alpha,
            keep_generator_bound: options.keep_generator_bound,
            pairs: Vec::new(),
            runs: Vec::new(),
            warnings: Vec::new(),
            verdict: AbVerdict::Inconclusive,
            figures: Vec::new(),
        }
    }

    pub fn options(&self) -> AbOptions {
        AbOptions {
            band: self.band,
            alpha: self.alpha,
            keep_generator_bound: self.keep_generator_bound,
        }
    }

    /// Judges the runs read: paired by position (`mcpload ab`; a pair with an excluded run
    /// is left out whole), or each side's used runs as independent samples. Records each
    /// run's use.
    pub fn judge_runs(&mut self, a: &[(RunUse, ReadRun)], b: &[(RunUse, ReadRun)]) {
        let used = |side: &[(RunUse, ReadRun)], keep: &dyn Fn(usize) -> bool| -> Vec<Observation> {
            side.iter()
                .enumerate()
                .filter(|(i, (_, r))| r.excluded.is_none() && keep(*i))
                .map(|(_, (_, r))| r.observation.clone())
                .collect()
        };
        let (ao, bo) = if self.design == Design::Paired {
            let both = |i: usize| {
                a.get(i).is_some_and(|x| x.1.excluded.is_none())
                    && b.get(i).is_some_and(|x| x.1.excluded.is_none())
            };
            (used(a, &both), used(b, &both))
        } else {
            (used(a, &|_| true), used(b, &|_| true))
        };
        self.runs = a
            .iter()
            .chain(b)
            .map(|(u, r)| RunUse {
                used: r.excluded.is_none(),
                reason: r.excluded.clone(),
                generator_bound: r.generator_bound.clone(),
                trends: r.trends.clone(),
                ..u.clone()
            })
            .collect();
        if self.design == Design::Paired {
            for run in &mut self.runs {
                let partner_out = self.pairs.iter().any(|p| Some(p.pair) == run.pair)
                    && a.iter().chain(b).any(|(u, r)| {
                        u.pair == run.pair && u.side != run.side && r.excluded.is_some()
                    });
                if run.used && partner_out {
                    run.used = false;
                    run.reason = Some("its pair's other run is left out".to_owned());
                }
            }
        }
        self.warn_of_generator_bound_runs();
        self.judge(&ao, &bo);
    }

    /// One warning naming the runs in the verdict that had a generator-bound step (replacing
    /// the last judgement's).
    fn warn_of_generator_bound_runs(&mut self) {
        self.warnings.retain(|w| !w.starts_with(GENERATOR_WARNING));
        let bound: Vec<&str> = (self.runs.iter())
            .filter(|r| r.used && r.generator_bound.is_some())
            .map(|r| r.dir.as_str())
            .collect();
        if !bound.is_empty() {
            self.warnings.push(format!(
                "{GENERATOR_WARNING} {} of the runs compared ({}) kept by \
                 --keep-generator-bound: their latencies include mcpload's own delay, which \
                 the interleaving spreads over both sides",
                bound.len(),
                bound.join(", ")
            ));
        }
    }

    /// Judges observations directly (batch means) and sets the overall verdict.
    pub fn judge(&mut self, a: &[Observation], b: &[Observation]) {
        self.figures = ab::judge(a, b, self.design, &self.options());
        self.verdict = ab::overall(&self.figures);
    }

    /// The figures that regressed.
    pub fn regressions(&self) -> Vec<&FigureVerdict> {
        self.figures
            .iter()
            .filter(|f| f.verdict == AbVerdict::Regressed)
            .collect()
    }

    /// Writes `dir/ab.json` atomically.
    pub fn write(&self, dir: &Path) -> Result<(), ReportError> {
        let path = dir.join(AB_JSON);
        let tmp = dir.join(".ab.json.tmp");
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| ReportError::json(&path, e))?;
        text.push(b'\n');
        fs::write(&tmp, text).map_err(|e| ReportError::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| ReportError::io(&path, e))
    }

    /// Reads `dir/ab.json`.
    pub fn read(dir: &Path) -> Result<AbRecord, ReportError> {
        let path = dir.join(AB_JSON);
        let text = fs::read_to_string(&path).map_err(|e| ReportError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| ReportError::json(&path, e))
    }
}

/// Where a figure was measured, for people: `step 2 (8) tools/call echo`.
pub(super) fn place(f: &FigureVerdict) -> String {
    let load = super::terminal::num(f.cell.load);
    if f.cell.op == WHOLE_STEP {
        format!("step {} ({load})", f.cell.step)
    } else {
        format!("step {} ({load}) {}", f.cell.step, f.cell.op)
    }
}

/// A figure's value in its unit.
pub(super) fn value(figure: Figure, v: Option<f64>) -> String {
    match (figure, v) {
        (_, None) => "-".to_owned(),
        (Figure::Throughput, Some(v)) => super::terminal::rps(v),
        (Figure::P50 | Figure::P99, v) => super::terminal::ms(v),
        (Figure::ErrorRate, Some(v)) => pct(v),
    }
}

/// The change and its interval: `+9.8% [+7.1%, +12.6%]` (a ratio), or in percentage points
/// for an error rate.
pub(super) fn change(f: &FigureVerdict) -> String {
    let rel = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    let pts = |d: f64| format!("{:+.2}pt", d * 100.0);
    match (
        f.ratio, f.ratio_lo, f.ratio_hi, f.diff, f.diff_lo, f.diff_hi,
    ) {
        (Some(r), Some(lo), Some(hi), ..) => format!("{} [{}, {}]", rel(r), rel(lo), rel(hi)),
        (.., Some(d), Some(lo), Some(hi)) => format!("{} [{}, {}]", pts(d), pts(lo), pts(hi)),
        _ => "-".to_owned(),
    }
}

fn verdict_style(v: AbVerdict) -> Style {
    match v {
        AbVerdict::Regressed => RED,
        AbVerdict::Improved => GREEN,
        AbVerdict::Equivalent => Style::new(),
        AbVerdict::Inconclusive => YELLOW,
    }
}

/// `inconclusive (~14 pairs)`.
pub(super) fn verdict_text(r: &AbRecord, f: &FigureVerdict) -> String {
    let unit = if r.design == Design::Paired {
        "pairs"
    } else if r.design == Design::BatchMeans {
        "batches"
    } else {
        "runs"
    };
    match f.needed {
        Some(n) if f.verdict == AbVerdict::Inconclusive => {
            format!("{} (~{n} {unit})", f.verdict.as_str())
        }
        _ => f.verdict.as_str().to_owned(),
    }
}

/// The design in words, with the weak test said plainly.
pub(super) fn design_phrase(r: &AbRecord) -> String {
    match r.design {
        Design::Paired => format!(
            "{} pairs interleaved (order drawn with seed {})",
            r.pairs.len(),
            r.seed.unwrap_or(0)
        ),
        Design::Unpaired => format!(
            "{} runs against {} runs, unpaired (Welch's t on the ln of each run's figures)",
            r.runs.iter().filter(|x| x.side == Side::A).count(),
            r.runs.iter().filter(|x| x.side == Side::B).count()
        ),
        Design::BatchMeans => "one run a side: batch means of each steady window. This ignores \
             the noise between runs and is a weak test; repeat runs (run --repeat K) for a \
             real one"
            .to_owned(),
    }
}

/// The terminal report: a line on the design, the table (each figure with A, B, the change
/// and its 90% interval, and the verdict), the runs left out, the warnings, and the answer.
pub fn render_ab_terminal(r: &AbRecord, color: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} A {} → B {}: {}; band ±{}, α {}\n",
        paint(&format!("mcpload {}:", r.command), BOLD, color),
        r.a,
        r.b,
        design_phrase(r),
        pct(r.band),
        r.alpha
    );
    let mut t = Table::new(&["where", "figure", "A", "B", "B vs A [90% CI]", "verdict"])
        .left(1)
        .left(5);
    for f in &r.figures {
        t.row(vec![
            (place(f), Style::new()),
            (f.figure.as_str().to_owned(), Style::new()),
            (value(f.figure, f.a), Style::new()),
            (value(f.figure, f.b), Style::new()),
            (change(f), Style::new()),
            (verdict_text(r, f), verdict_style(f.verdict)),
        ]);
    }
    if r.figures.is_empty() {
        out.push_str("nothing to compare: no step measured on both sides in at least 2 runs\n");
    } else {
        t.render(&mut out, color);
    }
    for run in r.runs.iter().filter(|x| !x.used) {
        let _ = writeln!(
            out,
            "left out: {} ({}): {}",
            run.dir,
            run.side.as_str(),
            run.reason.as_deref().unwrap_or("")
        );
    }
    let short: Vec<String> = r
        .runs
        .iter()
        .flat_map(|x| x.trends.iter())
        .filter(|t| t.trend.is_none())
        .map(|t| t.step.to_string())
        .collect();
    if !short.is_empty() {
        let _ = writeln!(
            out,
            "trend not checked in {} step window(s) shorter than {TREND_MIN_POINTS} seconds",
            short.len()
        );
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let _ = writeln!(
        out,
        "\n{} {}",
        paint("verdict:", BOLD, color),
        paint(&answer(r), verdict_style(r.verdict), color)
    );
    out
}

/// The answer in a sentence: `regressed: p99_ms at step 1 (8) (+9.8%)` and the like.
pub(super) fn answer(r: &AbRecord) -> String {
    let count = |v: AbVerdict| r.figures.iter().filter(|f| f.verdict == v).count();
    let list = |v: AbVerdict| {
        r.figures
            .iter()
            .filter(|f| f.verdict == v)
            .map(|f| format!("{} at {} ({})", f.figure.as_str(), place(f), change(f)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match r.verdict {
        AbVerdict::Regressed => format!("{}: {}", r.verdict.as_str(), list(AbVerdict::Regressed)),
        AbVerdict::Improved => format!("{}: {}", r.verdict.as_str(), list(AbVerdict::Improved)),
        AbVerdict::Equivalent => format!(
            "{}: all {} figures within ±{}",
            r.verdict.as_str(),
            r.figures.len(),
            pct(r.band)
        ),
        AbVerdict::Inconclusive => format!(
            "{}: {} of {} figures could not be told apart from ±{} with these runs",
            r.verdict.as_str(),
            count(AbVerdict::Inconclusive),
            r.figures.len(),
            pct(r.band)
        ),
    }
}

/// The Markdown summary for a pull-request comment or `$GITHUB_STEP_SUMMARY`: the answer
/// first, then the table, the runs left out and the warnings, and where the folder is.
pub fn render_ab_markdown(r: &AbRecord, folder: Option<&Path>) -> String {
    let mut out = String::new();
    let icon = match r.verdict {
        AbVerdict::Regressed => "❌",
        AbVerdict::Improved => "✅",
        AbVerdict::Equivalent => "✅",
        AbVerdict::Inconclusive => "⚠️",
    };
    let _ = writeln!(
        out,
        "### {icon} mcpload {}: {}\n",
        r.command,
        md(&answer(r))
    );
    let _ = writeln!(
        out,
        "A `{}` → B `{}`; {}; band ±{}, α {}.\n",
        r.a.replace('`', "'"),
        r.b.replace('`', "'"),
        md(&design_phrase(r)),
        pct(r.band),
        r.alpha
    );
    if !r.figures.is_empty() {
        out.push_str("| where | figure | A | B | B vs A [90% CI] | verdict |\n");
        out.push_str("|---|---|---:|---:|---:|---|\n");
        for f in &r.figures {
            let verdict = verdict_text(r, f);
            let verdict = if f.verdict == AbVerdict::Regressed {
                format!("**{verdict}**")
            } else {
                verdict
            };
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} | {} |",
                md(&place(f)),
                f.figure.as_str(),
                value(f.figure, f.a),
                value(f.figure, f.b),
                change(f),
                verdict
            );
        }
        out.push('\n');
    }
    for run in r.runs.iter().filter(|x| !x.used) {
        let _ = writeln!(
            out,
            "- left out: `{}` ({}): {}",
            run.dir,
            run.side.as_str(),
            md(run.reason.as_deref().unwrap_or(""))
        );
    }
    for w in &r.warnings {
        let _ = writeln!(out, "- warning: {}", md(w));
    }
    if let Some(dir) = folder {
        let _ = writeln!(out, "\nResults: `{}`", dir.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Model;

    fn run_dir_name(side: Side, pair: u32) -> String {
        format!("{}-{pair:02}", side.as_str())
    }

    fn run(pair: u32, side: Side, p50: f64, excluded: Option<&str>) -> (RunUse, ReadRun) {
        let m = Measured {
            cell: Cell {
                step: 1,
                model: Model::Closed,
                load: 4.0,
                op: WHOLE_STEP.to_owned(),
            },
            throughput_rps: 1000.0 / p50,
            p50_ms: Some(p50),
            p99_ms: Some(p50 * 2.0),
            failed: 0,
            total: 10_000,
        };
        (
            RunUse {
                side,
                pair: Some(pair),
                dir: run_dir_name(side, pair),
                used: true,
                reason: None,
                generator_bound: None,
                trends: Vec::new(),
            },
            ReadRun {
                observation: vec![m],
                excluded: excluded.map(str::to_owned),
                generator_bound: None,
                trends: Vec::new(),
            },
        )
    }

    fn record(pairs: u32) -> AbRecord {
        let mut r = AbRecord::new(
            "ab",
            Design::Paired,
            "a".into(),
            "b".into(),
            &AbOptions::default(),
        );
        r.pairs = (1..=pairs)
            .map(|p| PairRecord {
                pair: p,
                order: "ab".into(),
                a: run_dir_name(Side::A, p),
                b: run_dir_name(Side::B, p),
            })
            .collect();
        r
    }

    #[test]
    fn a_left_out_run_takes_its_partner_out_and_the_rest_still_judge() {
        let mut r = record(4);
        let a: Vec<_> = (1..=4)
            .map(|p| run(p, Side::A, 5.0 + 0.01 * f64::from(p), None))
            .collect();
        let mut b: Vec<_> = (1..=4)
            .map(|p| run(p, Side::B, 10.0 + 0.02 * f64::from(p), None))
            .collect();
        b[1] = run(
            2,
            Side::B,
            99.0,
            Some("step 1 still trends: throughput -9.0%"),
        );
        r.judge_runs(&a, &b);
        let a2 = r.runs.iter().find(|x| x.dir == "a-02").unwrap();
        assert!(!a2.used);
        assert_eq!(
            a2.reason.as_deref(),
            Some("its pair's other run is left out")
        );
        let b2 = r.runs.iter().find(|x| x.dir == "b-02").unwrap();
        assert!(b2.reason.as_deref().unwrap().contains("still trends"));
        let p50 = r.figures.iter().find(|f| f.figure == Figure::P50).unwrap();
        assert_eq!(p50.n, 3);
        // The 99 ms outlier was left out: the ratio is the other pairs' 2.
        assert!((p50.ratio.unwrap() - 2.0).abs() < 0.01, "{p50:?}");
        assert_eq!(r.verdict, AbVerdict::Regressed);
    }

    #[test]
    fn a_generator_bound_run_is_kept_and_named_in_one_warning() {
        let mut r = record(3);
        let a: Vec<_> = (1..=3)
            .map(|p| run(p, Side::A, 5.0 + 0.01 * f64::from(p), None))
            .collect();
        let mut b: Vec<_> = (1..=3)
            .map(|p| run(p, Side::B, 10.0 + 0.02 * f64::from(p), None))
            .collect();
        b[2].1.generator_bound = Some("step 1 was generator-bound (x)".into());
        // Judged after each pair: the warning is replaced, never repeated.
        r.judge_runs(&a, &b);
        r.judge_runs(&a, &b);
        let b3 = r.runs.iter().find(|x| x.dir == "b-03").unwrap();
        assert!(b3.used && b3.generator_bound.is_some(), "{b3:?}");
        let warned: Vec<_> = r
            .warnings
            .iter()
            .filter(|w| w.starts_with(GENERATOR_WARNING))
            .collect();
        assert_eq!(warned.len(), 1, "{:?}", r.warnings);
        assert!(
            warned[0].contains("1 of the runs compared (b-03)"),
            "{warned:?}"
        );
        let p50 = r.figures.iter().find(|f| f.figure == Figure::P50).unwrap();
        assert_eq!(p50.n, 3);
    }

    #[test]
    fn the_markdown_leads_with_the_answer_and_escapes_cells() {
        let mut r = record(3);
        let a: Vec<_> = (1..=3).map(|p| run(p, Side::A, 5.0, None)).collect();
        let b: Vec<_> = (1..=3).map(|p| run(p, Side::B, 5.0, None)).collect();
        r.judge_runs(&a, &b);
        r.warnings.push("a | b".into());
        let md = render_ab_markdown(&r, Some(Path::new("out/ab")));
        assert!(md.starts_with("### ✅ mcpload ab: equivalent"), "{md}");
        assert!(md.contains("| step 1 (4) | `p50_ms` |"), "{md}");
        assert!(md.contains("a \\| b"), "{md}");
        assert!(md.trim_end().ends_with("Results: `out/ab`"), "{md}");
    }
}
