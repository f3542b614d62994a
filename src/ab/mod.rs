//! `mcpload ab` and the statistical `compare` (docs/ab.md): a profile run K times against
//! each of two targets, interleaved in pairs whose order is drawn from a recorded seed, each
//! run an ordinary run folder under one A/B folder; and sets of run folders compared unpaired
//! (or by batch means, one folder a side). Both end in one `AbRecord`: ab.json, the terminal
//! table, summary.md and report.html.

use crate::analysis::ab::{AbOptions, AbVerdict, Design};
use crate::report::ab::{
    AB_SUMMARY_MD, AbRecord, AbStatus, PairRecord, ReadRun, RunUse, Side, read_batches, read_run,
    render_ab_markdown, run_folders, write_ab_html,
};
use crate::report::{ReportError, redact_url};
use crate::run::{Overrides, PlanError, TargetFlag, plan};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// One side of `mcpload ab`: a target and, for the built-in one, its knobs.
#[derive(Clone, Debug)]
pub struct AbTarget {
    pub target: TargetFlag,
    /// `KEY=VALUE` knobs of the built-in target (as `--builtin-knob`).
    pub knobs: Vec<(String, String)>,
}

impl AbTarget {
    /// The target for people and ab.json: a URL with its secrets redacted, the command, or
    /// `builtin` with its knobs.
    pub fn label(&self) -> String {
        match &self.target {
            TargetFlag::Url(u) => redact_url(u),
            TargetFlag::Stdio(cmd) => format!("stdio {cmd}"),
            TargetFlag::Builtin if self.knobs.is_empty() => "builtin".to_owned(),
            TargetFlag::Builtin => {
                let knobs: Vec<String> =
                    self.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("builtin {}", knobs.join(","))
            }
        }
    }
}

/// Splits `--a-builtin KNOB=VALUE,...` at the commas that start a new `KEY=`: a value may
/// hold commas itself (`versions=2025-06-18,2026-07-28`). Empty text is no knob.
pub fn builtin_knobs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        match part.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !k.contains(char::is_whitespace) => {
                out.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            _ => match out.last_mut() {
                Some(last) => {
                    last.1.push(',');
                    last.1.push_str(part.trim());
                }
                None => {
                    return Err(format!(
                        "{part:?}: expected KNOB=VALUE (e.g. service_ms=5,capacity=64)"
                    ));
                }
            },
        }
    }
    Ok(out)
}

/// What `mcpload ab` is asked to do.
#[derive(Clone, Debug)]
pub struct AbPlan {
    pub profile: PathBuf,
    pub a: AbTarget,
    pub b: AbTarget,
    pub pairs: u32,
    /// The A/B folder: new or empty.
    pub out: PathBuf,
    pub seed: u64,
    pub options: AbOptions,
    /// What every run takes from the command line besides its target and folder (levels,
    /// duration, warm-up).
    pub run: Overrides,
}

/// Why `mcpload ab` could not run: exit 2.
#[derive(Debug, thiserror::Error)]
pub enum AbError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("{0}")]
    Failed(String),
}

/// The A/B comparison as it ended.
#[derive(Debug)]
pub struct AbOutcome {
    pub record: AbRecord,
    pub dir: PathBuf,
    pub markdown: String,
}

/// The folder of side `side`'s run in pair `pair`: `a-01`.
fn run_dir_name(side: Side, pair: u32) -> String {
    format!("{}-{pair:02}", side.as_str())
}

/// Runs the pairs (stopping after the run in progress at Ctrl-C), writing ab.json after each
/// pair and every report at the end. A run that fails to start is an error (exit 2); a run
/// that stops early is kept and left out of the verdict with its reason.
pub async fn run_ab(p: AbPlan, cancel: CancellationToken) -> Result<AbOutcome, AbError> {
    if p.out.exists() && std::fs::read_dir(&p.out).map_or(true, |mut d| d.next().is_some()) {
        return Err(AbError::Failed(format!(
            "{}: the folder already holds files; give each A/B comparison a new folder",
            p.out.display()
        )));
    }
    // Every run's plan is checked before the first one starts: a typo fails at once.
    for (side, target) in [(Side::A, &p.a), (Side::B, &p.b)] {
        plan(
            Some(&p.profile),
            overrides(&p, target, &p.out.join(run_dir_name(side, 1))),
        )?;
    }
    std::fs::create_dir_all(&p.out)
        .map_err(|e| AbError::Failed(format!("cannot create {}: {e}", p.out.display())))?;
    let mut record = AbRecord::new("ab", Design::Paired, p.a.label(), p.b.label(), &p.options);
    record.profile = Some(p.profile.display().to_string());
    record.pairs_asked = Some(p.pairs);
    record.seed = Some(p.seed);
    let mut rng = SmallRng::seed_from_u64(p.seed);
    let mut a_runs: Vec<(RunUse, ReadRun)> = Vec::new();
    let mut b_runs: Vec<(RunUse, ReadRun)> = Vec::new();
    let quiet = p.run.quiet;
    'pairs: for pair in 1..=p.pairs {
        let b_first: bool = rng.random();
        let order = if b_first {
            [Side::B, Side::A]
        } else {
            [Side::A, Side::B]
        };
        for side in order {
            if cancel.is_cancelled() {
                break 'pairs;
            }
            let target = if side == Side::A { &p.a } else { &p.b };
            let name = run_dir_name(side, pair);
            let dir = p.out.join(&name);
            if !quiet {
                eprintln!(
                    "mcpload ab: pair {pair}/{}: {} ({})",
                    p.pairs,
                    side.as_str().to_uppercase(),
                    target.label()
                );
            }
            let planned = plan(Some(&p.profile), overrides(&p, target, &dir))?;
            let outcome = crate::run::execute(planned, cancel.clone())
                .await
                .map_err(|e| AbError::Failed(format!("{name}: {e}")))?;
            let read = read_run(&dir, &p.options)?;
            let used = RunUse {
                side,
                pair: Some(pair),
                dir: name,
                used: true,
                reason: None,
                generator_bound: None,
                trends: Vec::new(),
            };
            let runs = if side == Side::A {
                &mut a_runs
            } else {
                &mut b_runs
            };
            runs.push((used, read));
            if outcome.interrupted {
                break 'pairs;
            }
        }
        record.pairs.push(PairRecord {
            pair,
            order: order.iter().map(|s| s.as_str()).collect(),
            a: run_dir_name(Side::A, pair),
            b: run_dir_name(Side::B, pair),
        });
        record.judge_runs(&a_runs, &b_runs);
        record.write(&p.out)?;
    }
    record.judge_runs(&a_runs, &b_runs);
    record.status = if cancel.is_cancelled() {
        AbStatus::Interrupted
    } else {
        AbStatus::Complete
    };
    finish(record, &p.out)
}

/// A run's overrides: the command line's, this side's target and knobs, its folder; its
/// progress bar off (ab prints a line per run).
fn overrides(p: &AbPlan, target: &AbTarget, dir: &Path) -> Overrides {
    Overrides {
        target: Some(target.target.clone()),
        builtin_knobs: target.knobs.clone(),
        out: Some(dir.to_owned()),
        quiet: true,
        ..p.run.clone()
    }
}

/// Writes ab.json, summary.md and report.html into `dir` and renders the terminal report.
fn finish(record: AbRecord, dir: &Path) -> Result<AbOutcome, AbError> {
    record.write(dir)?;
    let markdown = render_ab_markdown(&record, Some(dir));
    let path = dir.join(AB_SUMMARY_MD);
    std::fs::write(&path, &markdown)
        .map_err(|e| AbError::Failed(format!("{}: {e}", path.display())))?;
    write_ab_html(dir, &record)?;
    Ok(AbOutcome {
        record,
        dir: dir.to_owned(),
        markdown,
    })
}

/// `compare --baseline DIR... --candidate DIR...`: each argument a run folder or a folder of
/// them. Several runs a side: unpaired; one a side: batch means of each steady window, with
/// the warning that this ignores the noise between runs.
pub fn compare_sets(
    baseline: &[PathBuf],
    candidate: &[PathBuf],
    options: &AbOptions,
) -> Result<AbRecord, ReportError> {
    let expand = |dirs: &[PathBuf]| -> Result<Vec<PathBuf>, ReportError> {
        let mut out = Vec::new();
        for d in dirs {
            out.extend(run_folders(d)?);
        }
        Ok(out)
    };
    let (a, b) = (expand(baseline)?, expand(candidate)?);
    let label = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let design = if a.len() == 1 && b.len() == 1 {
        Design::BatchMeans
    } else {
        Design::Unpaired
    };
    let mut record = AbRecord::new("compare", design, label(&a), label(&b), options);
    record.status = AbStatus::Complete;
    if design == Design::BatchMeans {
        let (ab, mut wa) = read_batches(&a[0])?;
        let (bb, wb) = read_batches(&b[0])?;
        wa.extend(wb);
        wa.insert(
            0,
            "one run a side: batch means ignore the noise between runs; this is a weak test \
             (repeat the runs with run --repeat K and compare the folders)"
                .to_owned(),
        );
        record.warnings = wa;
        record.judge(&ab, &bb);
        return Ok(record);
    }
    let read = |dirs: &[PathBuf], side: Side| -> Result<Vec<(RunUse, ReadRun)>, ReportError> {
        dirs.iter()
            .map(|d| {
                let r = read_run(d, options)?;
                let u = RunUse {
                    side,
                    pair: None,
                    dir: d.display().to_string(),
                    used: true,
                    reason: None,
                    generator_bound: None,
                    trends: Vec::new(),
                };
                Ok((u, r))
            })
            .collect()
    };
    let (ar, br) = (read(&a, Side::A)?, read(&b, Side::B)?);
    record.judge_runs(&ar, &br);
    Ok(record)
}

/// The exit status a verdict asks for: a regression fails; with `require_equivalent`, so
/// does any figure left inconclusive.
pub fn failed(record: &AbRecord, require_equivalent: bool) -> bool {
    record.verdict == AbVerdict::Regressed
        || (require_equivalent
            && record
                .figures
                .iter()
                .any(|f| f.verdict == AbVerdict::Inconclusive))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_split_at_keys_and_keep_commas_inside_values() {
        let k = builtin_knobs("service_ms=5,versions=2025-06-18,2026-07-28,capacity=0").unwrap();
        assert_eq!(
            k,
            vec![
                ("service_ms".into(), "5".into()),
                ("versions".into(), "2025-06-18,2026-07-28".into()),
                ("capacity".into(), "0".into()),
            ]
        );
        assert!(builtin_knobs("").unwrap().is_empty());
        assert!(builtin_knobs("fast").unwrap_err().contains("KNOB=VALUE"));
    }

    fn observations(p50: &[f64]) -> Vec<crate::analysis::ab::Observation> {
        use crate::analysis::ab::{Cell, Measured, WHOLE_STEP};
        p50.iter()
            .map(|&p| {
                vec![Measured {
                    cell: Cell {
                        step: 1,
                        model: crate::metrics::Model::Closed,
                        load: 1.0,
                        op: WHOLE_STEP.to_owned(),
                    },
                    throughput_rps: 100.0,
                    p50_ms: Some(p),
                    p99_ms: Some(p),
                    failed: 0,
                    total: 1000,
                }]
            })
            .collect()
    }

    #[test]
    fn a_regression_fails_and_require_equivalent_also_fails_on_inconclusive() {
        let options = AbOptions::default();
        let verdict = |a: &[f64], b: &[f64]| {
            let mut r = AbRecord::new("ab", Design::Paired, "a".into(), "b".into(), &options);
            r.judge(&observations(a), &observations(b));
            r
        };
        let slower = verdict(&[5.0, 5.1, 4.9, 5.0], &[7.0, 7.1, 6.9, 7.05]);
        assert!(failed(&slower, false));
        let noisy = verdict(&[5.0, 5.1, 4.9, 5.0], &[5.0, 6.0, 4.2, 5.3]);
        assert_eq!(noisy.verdict, AbVerdict::Inconclusive, "{noisy:#?}");
        assert!(!failed(&noisy, false));
        assert!(failed(&noisy, true));
        let same = verdict(&[5.0, 5.1, 4.9, 5.0], &[5.0, 5.1, 4.9, 5.0]);
        assert!(!failed(&same, true), "{same:#?}");
    }
}
