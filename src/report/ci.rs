//! A run as CI systems read it: JUnit XML (`--junit FILE`: a test case per threshold, check
//! and step verdict) and a Markdown summary for a pull request or `$GITHUB_STEP_SUMMARY`
//! (`--summary-md FILE`). Both are made from summary.json's content once the run has ended;
//! docs/ci.md describes them.

use super::summary::{RunStatus, RunSummary};
use super::terminal::{knee_sentence, load_phrase, ms, rps};
use crate::analysis::GateResult;
use crate::analysis::checks::CheckStatus;
use crate::metrics::{StepSummary, Verdict};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::fmt::Write as _;
use std::path::Path;

/// The JUnit suite's name, and the prefix of its test cases' class names.
const SUITE: &str = "mcpload";

/// The JUnit suite of a run that ended (completely or not), named by its folder: its
/// properties name the run, target, revision and seed; a threshold fails as its figure
/// against its limit and is skipped when it had no data; a check fails on `fail` and is
/// skipped when skipped; a step's verdict is a passing case naming it (a verdict alone never
/// fails a run); a run aborted or interrupted adds an `error` case saying why.
pub fn junit_suite(run: &RunSummary, dir: &Path) -> TestSuite {
    let run_id = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut suite = TestSuite::new(format!("{SUITE} {run_id}"));
    suite.add_property(("run_id", run_id.as_str()));
    suite.add_property(("target", target_of(&run.settings).as_str()));
    if let Some(rev) = &run.protocol_revision {
        suite.add_property(("revision", rev.as_str()));
    }
    if let Some(seed) = run.settings.get("seed").and_then(serde_json::Value::as_u64) {
        suite.add_property(("seed", seed.to_string().as_str()));
    }
    suite.add_property(("status", run.status.as_str()));
    suite.add_property(("mcpload_version", run.mcpload_version.as_str()));
    suite.add_test_cases(run.gates.iter().map(gate_case));
    for check in &run.checks {
        let status = match check.status {
            CheckStatus::Fail => failure(&check.reason),
            CheckStatus::Skipped => skipped(&check.reason),
            CheckStatus::Pass | CheckStatus::Warn => TestCaseStatus::success(),
        };
        let mut case = TestCase::new(format!("check {}", check.label()), status);
        case.set_classname(format!("{SUITE}.checks"));
        case.set_system_out(format!("{}: {}", check.status.as_str(), check.reason));
        suite.add_test_case(case);
    }
    for s in run.steps.iter().map(|s| &s.figures) {
        let mut case = TestCase::new(
            format!("step {} ({})", s.step, level(s)),
            TestCaseStatus::success(),
        );
        case.set_classname(format!("{SUITE}.steps"));
        case.set_time(std::time::Duration::from_secs_f64(s.duration_s.max(0.0)));
        let mut out = format!("verdict: {}", s.verdict.as_str());
        if s.generator_bound {
            out.push_str(" (generator-bound: the generator, not the server, limited it)");
        }
        case.set_system_out(out);
        suite.add_test_case(case);
    }
    if matches!(run.status, RunStatus::Aborted | RunStatus::Interrupted) {
        let why = run.status_reason.as_deref().unwrap_or(run.status.as_str());
        suite.add_test_case(error_case(&format!(
            "the run was {}: {why}",
            run.status.as_str()
        )));
    }
    suite
}

/// The JUnit suite of a run that could not run at all (a bad profile, an unreachable
/// target): one `error` case holding why.
pub fn junit_error_suite(why: &str) -> TestSuite {
    let mut suite = TestSuite::new(SUITE);
    suite.add_test_case(error_case(why));
    suite
}

fn error_case(why: &str) -> TestCase {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
    status.set_message(why);
    let mut case = TestCase::new("run", status);
    case.set_classname(SUITE);
    case
}

/// Writes the suites (one per run) to `path` as one JUnit file.
pub fn write_junit(path: &Path, suites: Vec<TestSuite>) -> std::io::Result<()> {
    let mut report = Report::new(SUITE);
    report.add_test_suites(suites);
    let xml = report.to_string().map_err(std::io::Error::other)?;
    std::fs::write(path, xml)
}

fn gate_case(g: &GateResult) -> TestCase {
    let status = if g.holds {
        TestCaseStatus::success()
    } else if g.no_data {
        skipped(&g.detail)
    } else {
        let mut s = failure(g.failure.as_deref().unwrap_or(&g.detail));
        s.set_description(g.detail.as_str());
        s
    };
    let mut case = TestCase::new(format!("threshold {}", g.threshold), status);
    case.set_classname(format!("{SUITE}.thresholds"));
    case
}

fn failure(message: &str) -> TestCaseStatus {
    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
    s.set_message(message);
    s
}

fn skipped(message: &str) -> TestCaseStatus {
    let mut s = TestCaseStatus::skipped();
    s.set_message(message);
    s
}

/// The target as a property: the URL's host and port (never its userinfo or path), the stdio
/// program's name, or `builtin`.
fn target_of(settings: &serde_json::Value) -> String {
    let t = &settings["target"];
    if let Some(url) = t.get("url").and_then(|u| u.as_str()) {
        return super::url_host(url).unwrap_or("http").to_owned();
    }
    if let Some(cmd) = t.get("stdio").and_then(|c| c.as_str()) {
        let program = shell_words::split(cmd)
            .ok()
            .and_then(|w| w.into_iter().next())
            .unwrap_or_default();
        let name = Path::new(&program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        return format!("stdio {}", name.unwrap_or_else(|| "?".into()));
    }
    "builtin".into()
}

/// A step's load level, as the terminal says it: `4 concurrent` or `200 req/s offered`.
fn level(s: &StepSummary) -> String {
    load_phrase(Some(s.model), s.load())
}

/// How a run ended, as a reader's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Complete, and every threshold and check held.
    Pass,
    /// Complete, with a failed threshold or check.
    Fail,
    /// Aborted, interrupted, or still running.
    Unfinished,
}

impl Outcome {
    /// Its CSS class in report.html.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Unfinished => "unfinished",
        }
    }
}

/// The run's verdict and its sentence: unfinished runs first, then failed thresholds, then
/// failed checks (what the exit code follows), e.g. "2 of 5 thresholds failed".
pub(super) fn run_verdict(run: &RunSummary) -> (Outcome, String) {
    let failed = run.gates.iter().filter(|g| !g.holds).count();
    let failed_checks = run
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .count();
    match run.status {
        RunStatus::Aborted | RunStatus::Interrupted | RunStatus::Running => (
            Outcome::Unfinished,
            format!(
                "the run was {}{}",
                run.status.as_str(),
                run.status_reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        ),
        RunStatus::Complete if failed > 0 => (
            Outcome::Fail,
            format!("{failed} of {} thresholds failed", run.gates.len()),
        ),
        RunStatus::Complete if failed_checks > 0 => {
            (Outcome::Fail, format!("{failed_checks} check(s) failed"))
        }
        RunStatus::Complete if run.gates.is_empty() => (
            Outcome::Pass,
            "complete (no thresholds were set)".to_owned(),
        ),
        RunStatus::Complete => (
            Outcome::Pass,
            format!("all {} thresholds hold", run.gates.len()),
        ),
    }
}

/// The Markdown summary of a run: the verdict first, then the steps, each operation's rows,
/// the failed gates, the checks that did not pass, and a line naming the run folder (with a
/// link to the workflow run where GitHub's variables say where it is).
pub fn render_run_markdown(run: &RunSummary, dir: &Path) -> String {
    let mut out = String::new();
    let failed: Vec<&GateResult> = run.gates.iter().filter(|g| !g.holds).collect();
    let (outcome, verdict) = run_verdict(run);
    let icon = match outcome {
        Outcome::Pass => "✅",
        Outcome::Fail => "❌",
        Outcome::Unfinished => "⚠️",
    };
    let _ = writeln!(
        out,
        "### {icon} mcpload {}: {}\n",
        md(&run.name),
        md(&verdict)
    );
    let _ = writeln!(out, "Knee: {}\n", md(&knee_sentence(run)));
    if !run.steps.is_empty() {
        out.push_str("| step | load | req/s | p50 ms | p99 ms | error rate | verdict |\n");
        out.push_str("|---:|---|---:|---:|---:|---:|---|\n");
        for s in run.steps.iter().map(|s| &s.figures) {
            let mut verdict = s.verdict.as_str().to_owned();
            if s.verdict == Verdict::Failed {
                verdict = format!("**{verdict}**");
            }
            if s.generator_bound {
                verdict.push_str(" (generator-bound)");
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {verdict} |",
                s.step,
                level(s),
                rps(s.throughput_rps),
                ms(s.p50_ms),
                ms(s.p99_ms),
                pct(s.error_rate)
            );
        }
        out.push('\n');
    }
    let ops: Vec<_> = run
        .steps
        .iter()
        .flat_map(|s| &s.ops)
        .filter(|o| o.op != "-" && o.requests > 0)
        .collect();
    if ops.len() > run.steps.len() {
        // More than one operation: a row each (one operation's rows are the steps' own).
        out.push_str("| step | operation | requests | p50 ms | p99 ms | error rate |\n");
        out.push_str("|---:|---|---:|---:|---:|---:|\n");
        for o in ops {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} | {} |",
                o.step,
                o.op.replace('`', "'"),
                o.requests,
                ms(o.p50_ms),
                ms(o.p99_ms),
                pct(o.error_rate)
            );
        }
        out.push('\n');
    }
    for g in &failed {
        let _ = writeln!(
            out,
            "- ❌ `{}`: {}",
            g.threshold,
            md(g.failure.as_deref().unwrap_or(&g.detail))
        );
    }
    let holding = run.gates.len() - failed.len();
    if holding > 0 {
        let _ = writeln!(out, "- ✅ {holding} threshold(s) hold");
    }
    for c in run
        .checks
        .iter()
        .filter(|c| matches!(c.status, CheckStatus::Fail | CheckStatus::Warn))
    {
        let icon = if c.status == CheckStatus::Fail {
            "❌"
        } else {
            "⚠️"
        };
        let _ = writeln!(
            out,
            "- {icon} check `{}` {}: {}",
            c.label(),
            c.status.as_str(),
            md(&c.reason)
        );
    }
    let _ = writeln!(out, "\nResults: `{}`{}", dir.display(), workflow_link());
    out
}

/// ` ([workflow run](…))` when GitHub's variables name the run, where its artifacts are.
fn workflow_link() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        (Some(server), Some(repo), Some(id)) => {
            format!(" ([workflow run]({server}/{repo}/actions/runs/{id}))")
        }
        _ => String::new(),
    }
}

/// `--summary-md FILE`, or `$GITHUB_STEP_SUMMARY` (appended to) when no file is given.
pub fn write_summary_md(file: Option<&Path>, markdown: &str) -> std::io::Result<()> {
    use std::io::Write;
    match file {
        Some(f) => std::fs::write(f, markdown),
        None => match std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty()) {
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?
                .write_all(markdown.as_bytes()),
            None => Ok(()),
        },
    }
}

fn pct(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

/// Text safe in a Markdown table cell or list item.
pub fn md(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}
