//! summary.json: the whole run in one JSON document (settings, protocol revision, every step,
//! the knee, the gates), rewritten atomically after every step so a crash leaves a valid file.

use super::ReportError;
use crate::analysis::{
    GateResult, JudgedStep, Knee, RunFigures, StopCriteria, Thresholds, Tripped,
};
use crate::metrics::{
    AuthSummary, ByKind, Finding, FlowSummary, OpSummary, RetriesByCause, ScenarioSummary,
    SessionSummary, StepSummary,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// The version of summary.json's layout. Bumped when a field is renamed or redefined; adding
/// a field does not bump it.
pub const SCHEMA_VERSION: u32 = 3;

/// The oldest summary.json layout still read (docs/results.md lists what each changed).
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

/// Where the run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still measuring, or the process died before it could say otherwise.
    Running,
    /// Every planned step ran, or the sweep stopped at its failure point.
    Complete,
    /// Stopped by Ctrl-C / SIGTERM; the steps recorded are the ones that finished (the last
    /// one possibly cut short, see its `interrupted` column).
    Interrupted,
    /// Stopped by an error (see `status_reason`).
    Aborted,
}

impl RunStatus {
    /// Its name in summary.json.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Aborted => "aborted",
        }
    }
}

/// One step in summary.json: every column of steps.csv under the same name, plus what the CSV
/// cannot hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    #[serde(flatten)]
    pub figures: StepSummary,
    /// docs/metrics.md's `anomalies`: `duplicate_id + late + unknown_id + null_id +
    /// both_result_error + invalid_jsonrpc + parse_errors`.
    pub anomalies: u64,
    /// `http_429 + http_503`.
    pub rejected: u64,
    /// Error responses by JSON-RPC error code (the code as a string key).
    pub errors_by_code: BTreeMap<String, u64>,
    /// Retries by cause; steps.csv's `retries` is their sum.
    #[serde(default)]
    pub retries_by_cause: RetriesByCause,
    /// The stop criteria this step tripped (empty unless its verdict is `failed`).
    pub tripped: Vec<Tripped>,
    /// The step's ops.csv rows: one per operation, then the `-` row (what belongs to no
    /// request). A folder written before per-operation figures existed has none.
    #[serde(default)]
    pub ops: Vec<OpSummary>,
    /// The step's scenarios.csv rows: per scenario, its `*` row (whole iterations), then one
    /// per scenario step. Empty without scenarios.
    #[serde(default)]
    pub scenarios: Vec<ScenarioSummary>,
    /// Tasks and input rounds whole: every count (the unanswered input kinds too) and the
    /// percentiles of their histograms. Absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<FlowSummary>,
    /// The first findings of the scenarios' `tally` steps: the defect, how many, where,
    /// the request ids and the values seen, the likely cause (docs/results.md). Absent
    /// without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// `input_unanswered` and `input_refused` by kind of input (`elicitation`, `sampling`,
    /// `roots`, `other`).
    #[serde(default)]
    pub input_unanswered_by_kind: ByKind,
    #[serde(default)]
    pub input_refused_by_kind: ByKind,
}

impl StepRecord {
    /// The record of a judged step.
    pub fn of(step: &JudgedStep) -> Self {
        let figures = step.figures.clone();
        StepRecord {
            anomalies: figures.anomalies(),
            rejected: figures.rejected(),
            errors_by_code: step
                .errors_by_code
                .iter()
                .map(|(code, n)| (code.to_string(), *n))
                .collect(),
            retries_by_cause: step.retries_by_cause,
            tripped: step.tripped.clone(),
            ops: step.ops.clone(),
            scenarios: step.scenarios.clone(),
            flows: step.flows.clone(),
            findings: step.findings.clone(),
            input_unanswered_by_kind: step.input_unanswered_by_kind,
            input_refused_by_kind: step.input_refused_by_kind,
            figures,
        }
    }
}

/// Which segment of a run split over several instances this folder holds, and how its
/// steps lined up on the common clock (docs/results.md, "Segments").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentRecord {
    /// 1-based, of `count`.
    pub index: u32,
    pub count: u32,
    /// The common start (`--start-at`), RFC 3339; `null` without one.
    pub start_at: Option<String>,
    /// How late this process began step 1 against `start_at`, on its own clock; `null`
    /// without a common start, or before step 1 began.
    pub start_late_ms: Option<f64>,
    /// Each finished step's measured window, appended as each step ends.
    pub steps: Vec<StepWindowRecord>,
}

/// A step's measured window (its measured time's start to the end of its drain) as
/// wall-clock Unix milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepWindowRecord {
    pub step: u32,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
}

/// The content of summary.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// [`SCHEMA_VERSION`] of the mcpload that wrote it.
    pub schema_version: u32,
    pub mcpload_version: String,
    /// The run's name (also the tail of its folder's name).
    pub name: String,
    pub status: RunStatus,
    /// Why the run was aborted or interrupted, when known.
    pub status_reason: Option<String>,
    /// RFC 3339 UTC, to the second.
    pub started_at: String,
    pub finished_at: Option<String>,
    /// The MCP protocol revision agreed with the target (`null` until known).
    pub protocol_revision: Option<String>,
    /// The stop criteria the verdicts were judged with.
    pub criteria: StopCriteria,
    /// The run's settings as the engine gave them, secrets replaced by `"[redacted]"`.
    pub settings: Value,
    /// The file in this folder holding the profile as it was run.
    pub profile_file: Option<String>,
    pub steps: Vec<StepRecord>,
    /// The knee over the steps recorded so far.
    pub knee: Knee,
    /// The threshold gates evaluated at the end of the run (empty before, or without any).
    pub gates: Vec<GateResult>,
    /// Sessions over the whole run, handshakes, warm-ups and the closing DELETEs included;
    /// `null` until the connections are closed.
    #[serde(default)]
    pub sessions: Option<SessionSummary>,
    /// Token requests, refreshes and auth failures over the whole run, when the target was
    /// authorized; `null` without, and until the connections are closed.
    #[serde(default)]
    pub auth: Option<AuthSummary>,
    /// The segment this folder holds of a run split over instances (`--segment`), or of a
    /// run on a common clock (`--start-at`); `null` for a plain run.
    #[serde(default)]
    pub segment: Option<SegmentRecord>,
    /// A run made by `mcpload merge`: the folders it was merged from, by segment; absent
    /// for a run measured here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<Vec<MergedFrom>>,
    /// A merged run that misses segments (`mcpload merge --partial`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<bool>,
    /// A merged run: the segments whose step windows started more than a tenth of the step's
    /// duration away from the others'; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misaligned: Option<Vec<Misaligned>>,
    /// The soak checks (docs/checks.md): `[{id, status, value, unit, reason}]`, judged at the
    /// run's end (empty until then).
    #[serde(default)]
    pub checks: Vec<crate::analysis::checks::Check>,
    /// The server's CPU at the knee, as the knee line says it ("with the server at 198% CPU
    /// of 2 cores").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_cpu: Option<String>,
    /// What failed while the server was watched (a source that stopped answering).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch_failures: Vec<String>,
    /// stdio: the children started, those that failed to start or exited while in use (each
    /// exit's code and last stderr lines), the first stdout line that was not JSON; `null`
    /// over HTTP, and until the connections are closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<crate::transport::ProcessReport>,
    /// A process per session: the largest fleet that stayed healthy, its memory, and what
    /// ran out first (docs/metrics.md, "stdio children"); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::analysis::fleet::FleetVerdict>,
    /// What came of the live metrics pushes (`--prometheus-remote-write`); absent without
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<Export>,
}

/// summary.json's `export`: the live metrics' pushes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Export {
    pub prometheus_remote_write: super::remote_write::RemoteWriteSummary,
}

/// One folder of a merged run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedFrom {
    pub dir: String,
    /// Its segment, `index` of `count` (none for a whole run merged alone).
    pub index: Option<u32>,
    pub count: Option<u32>,
    /// How the segment's own run ended (`interrupted`, `aborted`: shown as such).
    pub status: RunStatus,
    /// How late the segment began step 1 against `--start-at`, on its own clock.
    pub start_late_ms: Option<f64>,
}

/// A segment's step window away from the others'.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Misaligned {
    pub dir: String,
    pub index: u32,
    pub step: u32,
    /// Its window's start minus the median start of the step's windows.
    pub offset_ms: f64,
}

impl RunSummary {
    /// Every step's figures, in order.
    pub fn step_figures(&self) -> Vec<StepSummary> {
        self.steps.iter().map(|s| s.figures.clone()).collect()
    }

    /// Every step's ops.csv rows, in order.
    pub fn op_rows(&self) -> Vec<OpSummary> {
        self.steps.iter().flat_map(|s| s.ops.clone()).collect()
    }

    /// Every step's scenarios.csv rows, in order.
    pub fn scenario_rows(&self) -> Vec<ScenarioSummary> {
        self.steps
            .iter()
            .flat_map(|s| s.scenarios.clone())
            .collect()
    }

    /// Evaluates `thresholds` on the run as recorded: its steps, their operation and scenario
    /// rows, and its knee.
    pub fn evaluate_gates(&self, thresholds: &Thresholds) -> Vec<GateResult> {
        let (steps, ops, scenarios) = (self.step_figures(), self.op_rows(), self.scenario_rows());
        thresholds.evaluate(&RunFigures {
            steps: &steps,
            ops: &ops,
            scenarios: &scenarios,
            knee: &self.knee,
            checks: &self.checks,
        })
    }

    /// Reads `dir/summary.json`, refusing a newer or unknown schema.
    pub fn read(dir: &Path) -> Result<RunSummary, ReportError> {
        let path = dir.join(super::SUMMARY_JSON);
        let text = fs::read_to_string(&path).map_err(|e| ReportError::io(&path, e))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| ReportError::json(&path, e))?;
        let found = value.get("schema_version").and_then(Value::as_u64);
        let readable = u64::from(OLDEST_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION);
        if !found.is_some_and(|v| readable.contains(&v)) {
            return Err(ReportError::Schema {
                path,
                found: found.map_or_else(|| "none".to_owned(), |v| v.to_string()),
            });
        }
        serde_json::from_value(value).map_err(|e| ReportError::json(&path, e))
    }

    /// Writes `dir/summary.json` atomically: a temporary file renamed over the old one.
    pub(crate) fn write(&self, dir: &Path) -> Result<(), ReportError> {
        let path = dir.join(super::SUMMARY_JSON);
        let tmp = dir.join(".summary.json.tmp");
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| ReportError::json(&path, e))?;
        text.push(b'\n');
        fs::write(&tmp, text).map_err(|e| ReportError::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| ReportError::io(&path, e))
    }
}
