//! `--prometheus-remote-write URL` (profile `[output.prometheus]`): the run's figures pushed
//! live to a Prometheus remote write 1.0 receiver, every second, as the series of
//! docs/metrics-export.md. A [`StepSink`]: it keeps each step's counters cumulative, encodes
//! a push on the coordinator (never on a worker) and hands it to a sender thread through a
//! bounded backlog ([`sender`]); a final push after the sweep's last drain repeats every
//! step's totals. `--metrics-listen ADDR` serves the same series as an OpenMetrics page for
//! scraping ([`page`]), renewed at every push.

mod native;
mod page;
mod proto;
mod sender;

pub use sender::PushCounts;

use crate::analysis::JudgedStep;
use crate::engine::{MeasuredStep, Second, SinkError, StepSink, StepStart, SweepEnd};
use crate::metrics::{Counters, GeneratorFacts, LatencyHistogram, Model, NO_OP, ScenarioStats};
use native::Native;
use proto::{Label, MetricMetadata, Sample, TimeSeries, WriteRequest};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Where and how to push.
#[derive(Clone, Debug)]
pub struct RemoteWriteConfig {
    /// The receiver, e.g. `http://127.0.0.1:9090/api/v1/write` (`http://` only).
    pub url: String,
    /// Labels added to every series (`testid` among them replaces the run id's default).
    pub labels: BTreeMap<String, String>,
    /// Seconds handed over between pushes (at least 1).
    pub interval: Duration,
    /// Each attempt's bound, and how long the run's end waits for the backlog to go out.
    pub timeout: Duration,
    /// Pushes held at most while the receiver is slow; past it the oldest is dropped.
    pub backlog: usize,
    /// Attempts after the first, per push, on 5xx, 429 or a connection failure.
    pub retries: u32,
}

impl RemoteWriteConfig {
    /// The defaults for `url`: a push a second, 5 s attempts, a minute of backlog, 5 retries.
    pub fn new(url: String) -> Self {
        RemoteWriteConfig {
            url,
            labels: BTreeMap::new(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            backlog: 60,
            retries: 5,
        }
    }
}

/// What the exporter tells summary.json (`export.prometheus_remote_write`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RemoteWriteSummary {
    /// The receiver, its userinfo and query values redacted (docs/results.md).
    pub url: String,
    #[serde(flatten)]
    pub counts: PushCounts,
}

/// Who a run's series belong to.
#[derive(Clone, Debug)]
pub struct RunLabels {
    /// The run folder's name.
    pub run_id: String,
    /// This instance's segment of a split run (1 for a whole run).
    pub segment: u32,
    /// Operation names by number (the mix's, then the scenarios' calls).
    pub ops: Vec<String>,
    /// Scenario names by number.
    pub scenarios: Vec<String>,
}

/// An operation's figures in one step, cumulative.
#[derive(Default)]
struct OpSeries {
    counters: Counters,
    latency: Native,
    /// The last second's p50, p90, p99 and max, in seconds (none while it had no samples).
    last: Option<[f64; 4]>,
}

/// One step's figures, cumulative over its seconds.
struct StepSeries {
    step: u32,
    level: String,
    model: Model,
    level_value: f64,
    /// By operation number; the step's counts that no operation holds last, as [`NO_OP`].
    ops: Vec<OpSeries>,
    residual: OpSeries,
    in_flight: u64,
    /// Responses per second over the last second.
    achieved: f64,
    scenarios: Vec<[u64; 4]>,
    flows: Option<[u64; 4]>,
    generator: Option<(GeneratorFacts, Option<u64>)>,
}

/// The sink: the pushes, the page, or both.
pub struct LiveMetrics {
    sender: Option<(sender::Sender, String, Duration)>,
    page: Option<page::Page>,
    common: Vec<(String, String)>,
    run: RunLabels,
    steps: Vec<StepSeries>,
    every: u32,
    seconds_since_push: u32,
    last_ms: i64,
}

impl LiveMetrics {
    /// Starts the sender thread (with `push`, checked already by
    /// `profile::PrometheusOutput::check`) and the page's (with `listen`, bound already).
    pub fn start(
        push: Option<RemoteWriteConfig>,
        listen: Option<std::net::TcpListener>,
        run: RunLabels,
    ) -> std::io::Result<Self> {
        let mut common = vec![
            ("run_id".to_owned(), run.run_id.clone()),
            ("segment".to_owned(), run.segment.to_string()),
            ("testid".to_owned(), run.run_id.clone()),
        ];
        for (k, v) in push.iter().flat_map(|c| &c.labels) {
            common.retain(|(name, _)| name != k);
            common.push((k.clone(), v.clone()));
        }
        let every = push
            .as_ref()
            .map_or(1, |c| c.interval.as_secs().max(1) as u32);
        let sender = push
            .map(|c| {
                let s = sender::Sender::start(sender::SenderSettings {
                    url: c.url.clone(),
                    timeout: c.timeout,
                    backlog: c.backlog,
                    retries: c.retries,
                })?;
                Ok::<_, std::io::Error>((s, super::redact::redact_url(&c.url), c.timeout))
            })
            .transpose()?;
        Ok(LiveMetrics {
            sender,
            page: listen.map(page::Page::serve).transpose()?,
            common,
            run,
            steps: Vec::new(),
            every,
            seconds_since_push: 0,
            last_ms: 0,
        })
    }

    /// Waits (up to the attempt timeout) for the backlog to go out after the final push;
    /// what came of every push (`None` without pushes).
    pub fn finish(self) -> Option<RemoteWriteSummary> {
        self.sender.map(|(s, url, wait)| RemoteWriteSummary {
            url,
            counts: s.finish(wait),
        })
    }

    /// Encodes and queues a push of the current step (`all`: of every step, totals only for
    /// the finished ones); renews the page with every step's series.
    fn push(&mut self, all: bool) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        // Samples of a series must come in order, even should the wall clock step back.
        let ts = now.max(self.last_ms + 1);
        self.last_ms = ts;
        self.seconds_since_push = 0;
        if let Some((sender, _, _)) = &self.sender {
            let request = WriteRequest {
                timeseries: self.series(ts, all),
                metadata: metadata(),
            };
            sender.push(proto::body(&request));
        }
        if let Some(page) = &self.page {
            page.renew(&self.series(ts, true), &metadata());
        }
    }

    /// The series of the current step (`all`: and the finished steps' totals) at `ts`.
    fn series(&self, ts: i64, all: bool) -> Vec<TimeSeries> {
        let mut out = Series {
            ts,
            common: &self.common,
            list: Vec::new(),
        };
        let last = self.steps.len().saturating_sub(1);
        for (i, step) in self.steps.iter().enumerate() {
            if i == last || all {
                step.series(&self.run, &mut out, i == last);
            }
        }
        out.list
    }
}

impl StepSink for LiveMetrics {
    fn step_started(&mut self, start: &StepStart) -> Result<(), SinkError> {
        self.steps.push(StepSeries {
            step: start.step,
            level: format!("{}", start.level),
            model: start.model,
            level_value: start.level,
            ops: (0..self.run.ops.len())
                .map(|_| OpSeries::default())
                .collect(),
            residual: OpSeries::default(),
            in_flight: 0,
            achieved: 0.0,
            scenarios: vec![[0; 4]; self.run.scenarios.len()],
            flows: None,
            generator: None,
        });
        // Every counter of the step starts at 0, so rate() sees its first second too.
        self.push(false);
        Ok(())
    }

    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        let Some(step) = self.steps.last_mut() else {
            return Ok(());
        };
        step.add(second);
        self.seconds_since_push += 1;
        if self.seconds_since_push >= self.every {
            self.push(false);
        }
        Ok(())
    }

    fn step_measured(&mut self, measured: &MeasuredStep) -> Result<(), SinkError> {
        if let Some(step) = self.steps.last_mut() {
            step.generator = Some((
                measured.facts.generator.clone(),
                measured.facts.dropped_arrivals,
            ));
        }
        self.push(false);
        Ok(())
    }

    fn step_ended(&mut self, _step: &JudgedStep) -> Result<(), SinkError> {
        Ok(())
    }

    fn sweep_ended(&mut self, _end: &SweepEnd) -> Result<(), SinkError> {
        self.push(true);
        Ok(())
    }
}

impl StepSeries {
    /// Adds one second.
    fn add(&mut self, s: &Second<'_>) {
        for (i, op) in s.ops.iter().enumerate() {
            if let Some(series) = self.ops.get_mut(i) {
                series.counters += &op.counters;
                series.add_latency(&op.latency);
            }
        }
        let rest = s.counters.residual(s.ops.iter().map(|o| &o.counters));
        self.residual.counters += &rest;
        self.in_flight = s.in_flight;
        let secs = s.length.as_secs_f64();
        self.achieved = if secs > 0.0 {
            s.counters.responses as f64 / secs
        } else {
            0.0
        };
        for (i, sc) in s.scenarios.iter().enumerate() {
            if let Some(n) = self.scenarios.get_mut(i) {
                add_runs(n, sc);
            }
        }
        if let Some(f) = s.flows {
            let c = &f.counters;
            let n = self.flows.get_or_insert([0; 4]);
            n[0] += c.calls_ok;
            n[1] += c.calls_answered.saturating_sub(c.calls_ok);
            n[2] += c.calls_failed;
            n[3] += c.calls_interrupted;
        }
    }

    /// The step's series at `out.ts`; `live`: the current step, whose gauges are pushed too.
    fn series(&self, run: &RunLabels, out: &mut Series<'_>, live: bool) {
        let step = self.step.to_string();
        let base = [("step", step.as_str()), ("level", self.level.as_str())];
        let named = self
            .ops
            .iter()
            .enumerate()
            .map(|(i, o)| (run.ops[i].as_str(), o));
        let residual = (NO_OP, &self.residual);
        // The counts of no operation (an unknown id, a parse error) as ops.csv's `-` row, once
        // there are any.
        let c = &self.residual.counters;
        let any = c.requests > 0
            || c.ends().iter().any(|(_, n)| *n > 0)
            || c.anomaly_terms().iter().any(|(_, n)| *n > 0);
        let ops = named.chain(any.then_some(residual));
        for (name, op) in ops {
            let with_op = [base[0], base[1], ("operation", name)];
            let c = &op.counters;
            out.sample("mcpload_requests_total", &with_op, &[], c.requests as f64);
            for (class, n) in c.ends() {
                out.sample(
                    "mcpload_responses_total",
                    &with_op,
                    &[("class", class)],
                    n as f64,
                );
            }
            for (kind, n) in c.anomaly_terms() {
                out.sample(
                    "mcpload_anomalies_total",
                    &with_op,
                    &[("kind", kind)],
                    n as f64,
                );
            }
            if !op.latency.is_empty() {
                out.histogram("mcpload_request_duration_seconds", &with_op, &op.latency);
            }
            if let (true, Some(p)) = (live, op.last) {
                for (suffix, v) in ["_p50", "_p90", "_p99", "_max"].iter().zip(p) {
                    let name = format!("mcpload_request_duration_seconds{suffix}");
                    out.sample(&name, &with_op, &[], v);
                }
            }
        }
        for (i, n) in self.scenarios.iter().enumerate() {
            let with_sc = [base[0], base[1], ("scenario", run.scenarios[i].as_str())];
            out.sample(
                "mcpload_iterations_started_total",
                &with_sc,
                &[],
                n[0] as f64,
            );
            for (outcome, v) in ["completed", "failed", "interrupted"].iter().zip(&n[1..]) {
                let extra = [("outcome", *outcome)];
                out.sample("mcpload_iterations_total", &with_sc, &extra, *v as f64);
            }
        }
        if let Some(n) = self.flows {
            for (outcome, v) in ["ok", "error", "failed", "interrupted"].iter().zip(n) {
                let extra = [("outcome", *outcome)];
                out.sample("mcpload_calls_total", &base, &extra, v as f64);
            }
        }
        if let Some((g, dropped)) = &self.generator {
            let opt = [
                ("mcpload_generator_cpu_percent", g.cpu_pct),
                ("mcpload_generator_wait_percent", g.wait_pct),
                ("mcpload_generator_load_thread_percent", g.load_thread_pct),
                (
                    "mcpload_generator_loop_delay_p99_seconds",
                    g.loop_delay_p99_ms.map(|ms| ms / 1000.0),
                ),
                (
                    "mcpload_generator_late_sends_total",
                    g.late_sends.map(|n| n as f64),
                ),
                (
                    "mcpload_generator_dropped_no_worker_total",
                    g.dropped_no_worker.map(|n| n as f64),
                ),
                ("mcpload_dropped_arrivals_total", dropped.map(|n| n as f64)),
            ];
            for (name, v) in opt {
                if let Some(v) = v {
                    out.sample(name, &base, &[], v);
                }
            }
            let bound = if g.bound { 1.0 } else { 0.0 };
            out.sample("mcpload_generator_bound", &base, &[], bound);
        }
        if live {
            let model = match self.model {
                Model::Closed => [("model", "closed")],
                Model::Open => [("model", "open")],
            };
            out.sample("mcpload_load_level", &base, &model, self.level_value);
            out.sample("mcpload_in_flight", &base, &[], self.in_flight as f64);
            out.sample(
                "mcpload_achieved_rate_per_second",
                &base,
                &[],
                self.achieved,
            );
            if self.model == Model::Open {
                out.sample(
                    "mcpload_target_rate_per_second",
                    &base,
                    &[],
                    self.level_value,
                );
            }
        }
    }
}

impl OpSeries {
    fn add_latency(&mut self, h: &LatencyHistogram) {
        self.latency.add(h);
        self.last = (!h.is_empty()).then(|| {
            let hdr = h.histogram();
            let at = |q: f64| hdr.value_at_quantile(q) as f64 / 1e6;
            [at(0.5), at(0.9), at(0.99), hdr.max() as f64 / 1e6]
        });
    }
}

/// A scenario's iterations: started, completed, failed, interrupted.
fn add_runs(n: &mut [u64; 4], sc: &ScenarioStats) {
    let it = &sc.iterations;
    n[0] += it.started;
    n[1] += it.completed;
    n[2] += it.failed;
    n[3] += it.interrupted;
}

/// A push's series as they are made.
struct Series<'a> {
    ts: i64,
    common: &'a [(String, String)],
    list: Vec<TimeSeries>,
}

impl Series<'_> {
    fn labels(&self, name: &str, a: &[(&str, &str)], b: &[(&str, &str)]) -> Vec<Label> {
        let mut labels: Vec<Label> = std::iter::once(("__name__", name))
            .chain(self.common.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .chain(a.iter().chain(b).copied())
            .map(|(name, value)| Label {
                name: name.to_owned(),
                value: value.to_owned(),
            })
            .collect();
        labels.sort_by(|x, y| x.name.cmp(&y.name));
        labels
    }

    fn sample(&mut self, name: &str, a: &[(&str, &str)], b: &[(&str, &str)], value: f64) {
        let labels = self.labels(name, a, b);
        self.list.push(TimeSeries {
            labels,
            samples: vec![Sample {
                value,
                timestamp: self.ts,
            }],
            histograms: Vec::new(),
        });
    }

    fn histogram(&mut self, name: &str, a: &[(&str, &str)], h: &Native) {
        let labels = self.labels(name, a, &[]);
        self.list.push(TimeSeries {
            labels,
            samples: Vec::new(),
            histograms: vec![h.message(self.ts)],
        });
    }
}

/// Every family's type and help (docs/metrics-export.md says more).
fn metadata() -> Vec<MetricMetadata> {
    const COUNTER: i32 = 1;
    const GAUGE: i32 = 2;
    const HISTOGRAM: i32 = 3;
    let families: [(&str, i32, &str); 23] = [
        (
            "mcpload_requests_total",
            COUNTER,
            "Requests sent or attempted (steps.csv requests).",
        ),
        (
            "mcpload_responses_total",
            COUNTER,
            "Requests ended, by the class they ended as.",
        ),
        (
            "mcpload_anomalies_total",
            COUNTER,
            "Anomalies of pairing and framing, by kind.",
        ),
        (
            "mcpload_request_duration_seconds",
            HISTOGRAM,
            "Pairing latency of the step.",
        ),
        (
            "mcpload_request_duration_seconds_p50",
            GAUGE,
            "Median latency of the last second.",
        ),
        (
            "mcpload_request_duration_seconds_p90",
            GAUGE,
            "p90 latency of the last second.",
        ),
        (
            "mcpload_request_duration_seconds_p99",
            GAUGE,
            "p99 latency of the last second.",
        ),
        (
            "mcpload_request_duration_seconds_max",
            GAUGE,
            "Largest latency of the last second.",
        ),
        (
            "mcpload_in_flight",
            GAUGE,
            "Requests in flight at the end of the last second.",
        ),
        (
            "mcpload_load_level",
            GAUGE,
            "The step's concurrency or arrival rate.",
        ),
        (
            "mcpload_target_rate_per_second",
            GAUGE,
            "Open loop: arrivals asked per second.",
        ),
        (
            "mcpload_achieved_rate_per_second",
            GAUGE,
            "Responses per second, the last second.",
        ),
        (
            "mcpload_iterations_started_total",
            COUNTER,
            "Scenario iterations started.",
        ),
        (
            "mcpload_iterations_total",
            COUNTER,
            "Scenario iterations ended, by outcome.",
        ),
        (
            "mcpload_calls_total",
            COUNTER,
            "Task and input-round calls ended, by outcome.",
        ),
        (
            "mcpload_generator_cpu_percent",
            GAUGE,
            "The generator's CPU, % of its cores.",
        ),
        (
            "mcpload_generator_wait_percent",
            GAUGE,
            "The generator's run-queue wait, %.",
        ),
        (
            "mcpload_generator_load_thread_percent",
            GAUGE,
            "The busiest load thread's run plus wait, % of one core.",
        ),
        (
            "mcpload_generator_loop_delay_p99_seconds",
            GAUGE,
            "p99 lateness of the workers' timer wakes.",
        ),
        (
            "mcpload_generator_late_sends_total",
            COUNTER,
            "Open loop: sends later than allowed.",
        ),
        (
            "mcpload_generator_dropped_no_worker_total",
            COUNTER,
            "Open loop: arrivals no worker could take.",
        ),
        (
            "mcpload_dropped_arrivals_total",
            COUNTER,
            "Open loop: arrivals dropped at max_in_flight.",
        ),
        (
            "mcpload_generator_bound",
            GAUGE,
            "1 when the generator, not the server, limited the step.",
        ),
    ];
    families
        .iter()
        .map(|(name, kind, help)| MetricMetadata {
            r#type: *kind,
            metric_family_name: (*name).to_owned(),
            help: (*help).to_owned(),
            unit: String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_has_its_labels_sorted_and_the_run_ones() {
        let common = vec![
            ("run_id".to_owned(), "r".to_owned()),
            ("testid".to_owned(), "t".to_owned()),
            ("segment".to_owned(), "1".to_owned()),
        ];
        let mut out = Series {
            ts: 5,
            common: &common,
            list: Vec::new(),
        };
        out.sample("m", &[("step", "2")], &[("class", "ok")], 1.0);
        let names: Vec<_> = out.list[0].labels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["__name__", "class", "run_id", "segment", "step", "testid"]
        );
    }
}
