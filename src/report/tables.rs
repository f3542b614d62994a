//! steps.csv, ops.csv, scenarios.csv and timeseries.csv (docs/metrics.md, docs/results.md):
//! RFC 4180 through the csv crate, the header first, rows appended and flushed as each step or
//! second ends.

use super::{ReportError, Reporter, StepRecord};
use crate::engine::Second;
use crate::metrics::{OpSummary, Percentiles, ScenarioSummary, StepSummary};
use crate::watch::ResourceSample;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

/// One row of timeseries.csv: one second of one step. Field order is the column order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeseriesRow {
    /// Seconds from the run's start to the start of this second (the same timestamp as the
    /// interval's in latency.hlog), 3 decimals.
    pub t_s: f64,
    pub step: u32,
    /// Requests registered during this second.
    pub requests: u64,
    pub ok: u64,
    /// JSON-RPC error responses (the `errors` counter).
    pub errors: u64,
    /// `duplicate_id + late + unknown_id + null_id + both_result_error + invalid_jsonrpc +
    /// parse_errors`.
    pub anomalies: u64,
    pub missing: u64,
    pub timeouts: u64,
    /// `http_429 + http_503`.
    pub rejected: u64,
    /// Requests in flight when the second ended.
    pub in_flight: u64,
    /// Pairing latency percentiles of the responses paired this second (empty without any).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The watched server's latest sample taken by the end of this second (empty where it
    /// was not watched, or the source does not say): RSS, CPU in percent of one core,
    /// threads, open descriptors.
    #[serde(default)]
    pub server_rss_bytes: Option<u64>,
    #[serde(default)]
    pub server_cpu_pct: Option<f64>,
    #[serde(default)]
    pub server_threads: Option<u64>,
    #[serde(default)]
    pub server_fds: Option<u64>,
}

impl TimeseriesRow {
    pub fn of(s: &Second<'_>, server: Option<&ResourceSample>) -> Self {
        let c = s.counters;
        let lat = Percentiles::of(s.latency);
        TimeseriesRow {
            t_s: (s.start.as_secs_f64() * 1000.0).round() / 1000.0,
            step: s.step,
            requests: c.requests,
            ok: c.ok,
            errors: c.errors,
            anomalies: c.anomalies(),
            missing: c.missing,
            timeouts: c.timeouts,
            rejected: c.rejected(),
            in_flight: s.in_flight,
            p50_ms: lat.p50,
            p99_ms: lat.p99,
            server_rss_bytes: server.and_then(|r| r.rss_bytes),
            server_cpu_pct: server.and_then(|r| r.cpu_pct),
            server_threads: server.and_then(|r| r.threads),
            server_fds: server.and_then(|r| r.fds),
        }
    }
}

/// A CSV file written a row at a time, flushed after each row.
pub(super) struct CsvFile {
    path: PathBuf,
    out: csv::Writer<File>,
}

impl CsvFile {
    /// Creates the file and writes its header (the field names of `sample`'s type), so even
    /// a run that records no row leaves a readable CSV.
    pub(super) fn create<R: Serialize>(path: PathBuf, sample: &R) -> Result<Self, ReportError> {
        let header = header_of(sample).map_err(|e| ReportError::csv(&path, e))?;
        let file = File::create(&path).map_err(|e| ReportError::io(&path, e))?;
        let mut out = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(file);
        out.write_record(&header)
            .and_then(|()| out.flush().map_err(csv::Error::from))
            .map_err(|e| ReportError::csv(&path, e))?;
        Ok(CsvFile { path, out })
    }

    pub(super) fn append<R: Serialize>(&mut self, row: &R) -> Result<(), ReportError> {
        self.out
            .serialize(row)
            .and_then(|()| self.out.flush().map_err(csv::Error::from))
            .map_err(|e| ReportError::csv(&self.path, e))
    }
}

/// The column names of a row type, in field order, exactly as the csv crate derives them
/// when it serialises `sample` with headers.
fn header_of<R: Serialize>(sample: &R) -> Result<csv::StringRecord, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(sample)?;
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    csv::Reader::from_reader(bytes.as_slice())
        .headers()
        .cloned()
}

/// steps.csv: one [`StepSummary`] per step.
pub(super) struct StepsCsv(CsvFile);

impl StepsCsv {
    pub(super) fn create(dir: &Path) -> Result<Self, ReportError> {
        Ok(StepsCsv(CsvFile::create(
            dir.join(super::STEPS_CSV),
            &crate::analysis::blank_step(),
        )?))
    }
}

impl Reporter for StepsCsv {
    fn step(&mut self, step: &StepRecord) -> Result<(), ReportError> {
        self.0.append(&step.figures)
    }
}

/// ops.csv: each step's [`OpSummary`] rows, one per operation then the `-` row.
pub(super) struct OpsCsv(CsvFile);

impl OpsCsv {
    pub(super) fn create(dir: &Path) -> Result<Self, ReportError> {
        Ok(OpsCsv(CsvFile::create(
            dir.join(super::OPS_CSV),
            &crate::analysis::blank_op_row(),
        )?))
    }
}

impl Reporter for OpsCsv {
    fn step(&mut self, step: &StepRecord) -> Result<(), ReportError> {
        step.ops.iter().try_for_each(|row| self.0.append(row))
    }
}

/// scenarios.csv: each step's [`ScenarioSummary`] rows (none without scenarios: the header
/// alone).
pub(super) struct ScenariosCsv(CsvFile);

impl ScenariosCsv {
    pub(super) fn create(dir: &Path) -> Result<Self, ReportError> {
        Ok(ScenariosCsv(CsvFile::create(
            dir.join(super::SCENARIOS_CSV),
            &crate::analysis::blank_scenario_row(),
        )?))
    }
}

impl Reporter for ScenariosCsv {
    fn step(&mut self, step: &StepRecord) -> Result<(), ReportError> {
        step.scenarios.iter().try_for_each(|row| self.0.append(row))
    }
}

/// timeseries.csv: one [`TimeseriesRow`] per second.
pub(super) struct TimeseriesCsv(CsvFile);

impl TimeseriesCsv {
    pub(super) fn create(dir: &Path) -> Result<Self, ReportError> {
        let sample = TimeseriesRow::of(
            &Second {
                step: 0,
                start: Default::default(),
                length: Default::default(),
                counters: &Default::default(),
                in_flight: 0,
                latency: &Default::default(),
                ops: &[],
                scenarios: &[],
                flows: None,
            },
            None,
        );
        Ok(TimeseriesCsv(CsvFile::create(
            dir.join(super::TIMESERIES_CSV),
            &sample,
        )?))
    }
}

impl Reporter for TimeseriesCsv {
    fn second(
        &mut self,
        s: &Second<'_>,
        server: Option<&ResourceSample>,
    ) -> Result<(), ReportError> {
        self.0.append(&TimeseriesRow::of(s, server))
    }
}

/// Reads every complete row of a CSV written above.
pub(super) fn read_rows<R: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<R>, ReportError> {
    let bytes = std::fs::read(path).map_err(|e| ReportError::io(path, e))?;
    let mut r = csv::Reader::from_reader(super::complete_lines(&bytes));
    r.deserialize()
        .collect::<Result<_, _>>()
        .map_err(|e| ReportError::csv(path, e))
}

/// Reads `dir/timeseries.csv`.
pub fn read_timeseries(dir: &Path) -> Result<Vec<TimeseriesRow>, ReportError> {
    read_rows(&dir.join(super::TIMESERIES_CSV))
}

/// Reads `dir/steps.csv` back into its rows: the CSV half of the run folder for library users
/// (mcpload itself reads the same figures from summary.json).
pub fn read_steps(dir: &Path) -> Result<Vec<StepSummary>, ReportError> {
    read_rows(&dir.join(super::STEPS_CSV))
}

/// Reads `dir/ops.csv` back into its rows (every step's, in order).
pub fn read_ops(dir: &Path) -> Result<Vec<OpSummary>, ReportError> {
    read_rows(&dir.join(super::OPS_CSV))
}

/// Reads `dir/scenarios.csv` back into its rows (every step's, in order).
pub fn read_scenarios(dir: &Path) -> Result<Vec<ScenarioSummary>, ReportError> {
    read_rows(&dir.join(super::SCENARIOS_CSV))
}
