//! The server watched as a process, in the run folder: resources.csv (every sample of the
//! whole run, with the phase of the run it fell in), the server columns of timeseries.csv
//! and steps.csv, and the soak checks judged from them at the end (docs/results.md, "The
//! server's resources"; docs/checks.md).

use super::tables::CsvFile;
use super::{ReportError, StepRecord};
use crate::analysis::checks::{self, Check, LeakInput};
use crate::engine::Second;
use crate::metrics::LatencyHistogram;
use crate::transport::OpenConnections;
use crate::watch::{ResourceSample, Watcher};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// resources.csv.
pub const RESOURCES_CSV: &str = "resources.csv";

/// Where in the run a sample fell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the first step began (connecting, the handshake).
    Start,
    /// A step's warm-up and the drains before its measured time.
    Warmup(u32),
    Measure(u32),
    /// After a step's measured time, until the next step begins.
    Between(u32),
    /// After the last step, no load.
    Cooldown,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Warmup(_) => "warmup",
            Phase::Measure(_) => "measure",
            Phase::Between(_) => "between",
            Phase::Cooldown => "cooldown",
        }
    }

    fn step(self) -> Option<u32> {
        match self {
            Phase::Warmup(s) | Phase::Measure(s) | Phase::Between(s) => Some(s),
            Phase::Start | Phase::Cooldown => None,
        }
    }
}

/// One row of resources.csv. Field order is the column order.
#[derive(Serialize)]
struct ResourceRow {
    t_s: f64,
    phase: &'static str,
    step: Option<u32>,
    rss_bytes: Option<u64>,
    cpu_pct: Option<f64>,
    threads: Option<u64>,
    fds: Option<u64>,
    processes: Option<u64>,
    heap_bytes: Option<u64>,
    /// The `sessions` series of `--server-metric sessions=…`, where asked for.
    sessions: Option<f64>,
    /// mcpload's own connections to the server open when the sample was written: the
    /// descriptors the server holds for them are not a leak (empty over stdio).
    client_connections: Option<u64>,
    /// Copies of the server alive, and the median and largest RSS of one (a stdio fleet).
    children: Option<u64>,
    child_rss_p50_bytes: Option<u64>,
    child_rss_max_bytes: Option<u64>,
}

/// A row of resources.csv as read back for the plot.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct ResourcePoint {
    pub t_s: f64,
    pub phase: String,
    pub rss_bytes: Option<u64>,
    pub cpu_pct: Option<f64>,
}

/// Reads `dir/resources.csv`; none when the server was not watched.
pub fn read_resources(dir: &Path) -> Result<Vec<ResourcePoint>, ReportError> {
    let path = dir.join(RESOURCES_CSV);
    if !path.exists() {
        return Ok(Vec::new());
    }
    super::tables::read_rows(&path)
}

/// What the checks keep of a sample (the whole run's, a few words each).
#[derive(Clone, Copy, Debug)]
struct Kept {
    t_s: f64,
    phase: Phase,
    rss_bytes: Option<u64>,
    cpu_pct: Option<f64>,
    threads: Option<u64>,
    /// The watched `fds` less the descriptors of mcpload's own connections it holds.
    server_fds: Option<u64>,
    sessions: Option<f64>,
    /// A fleet of stdio children: the copies alive.
    children: Option<u64>,
}

/// One drift window of a step's measured time (a minute, or shorter: see
/// [`CheckSettings::drift_bucket_s`]): its latency (the step's, and each operation's by
/// number) and its error rate.
#[derive(Clone, Debug)]
struct Minute {
    step: u32,
    mid_s: f64,
    p99_ms: Option<f64>,
    op_p99_ms: Vec<Option<f64>>,
    error_rate: f64,
}

/// The minute being summed.
#[derive(Default)]
struct OpenMinute {
    step: u32,
    start_s: f64,
    length_s: f64,
    latency: LatencyHistogram,
    ops: Vec<LatencyHistogram>,
    requests: u64,
    ok: u64,
}

/// What the soak checks are judged with: the profile's `load.leak_min_window`.
#[derive(Clone, Copy, Debug)]
pub struct CheckSettings {
    pub min_window: Duration,
}

impl CheckSettings {
    /// How long the windows are whose p99 and error rate the drift checks fit a line to: a
    /// minute, or a sixth of the shortest window judged if that is shorter (so even the
    /// shortest window has six points), at least a second.
    fn drift_bucket_s(&self) -> f64 {
        (self.min_window.as_secs_f64() / 6.0).clamp(1.0, 60.0)
    }
}

/// What of the watched figures is mcpload's own: its connections' descriptors, its
/// sessions.
#[derive(Clone, Default)]
pub struct ClientSide {
    /// mcpload's connections open, over HTTP.
    pub connections: Option<OpenConnections>,
    /// Descriptors each such connection adds to the watched `fds`: 1 for a server in another
    /// process (its accepted socket), 2 for the built-in target in this process (both ends).
    pub fds_per_connection: u64,
    /// Sessions mcpload holds open through the run (one a transport in the legacy era).
    pub sessions: u64,
    /// The sessions the server says it holds, where it says so outside the samples (the
    /// built-in target's `sessions_held`); read as each sample is written.
    pub server_sessions: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
}

/// The server's samples as the run goes, and what they add to the run folder.
pub struct ResourceLog {
    /// The watcher and resources.csv, when the server is watched (the drift checks need
    /// neither); the watcher is gone once stopped.
    watcher: Option<Watcher>,
    csv: Option<CsvFile>,
    origin: Instant,
    client: ClientSide,
    /// Phase changes, in time order: (from t_s, phase).
    marks: Vec<(f64, Phase)>,
    /// Samples taken but not yet past the last mark's certainty (their phase may still
    /// change): written once the run has moved past their time.
    pending: Vec<ResourceSample>,
    kept: Vec<Kept>,
    latest: Option<ResourceSample>,
    minute: Option<OpenMinute>,
    minutes: Vec<Minute>,
    failures: Vec<String>,
    settings: CheckSettings,
    /// The operations' names, by number (latency_drift per operation).
    op_names: Vec<String>,
}

/// A histogram's p99 in milliseconds; none when empty.
fn p99_ms(h: &LatencyHistogram) -> Option<f64> {
    (!h.is_empty()).then(|| h.histogram().value_at_quantile(0.99) as f64 / 1000.0)
}

fn t_of(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

impl ResourceLog {
    /// Starts resources.csv in `dir` for a watcher whose samples count from `origin` (the
    /// run's start), if there is one.
    pub fn create(
        dir: &Path,
        watcher: Option<Watcher>,
        origin: Instant,
        client: ClientSide,
        settings: CheckSettings,
        op_names: Vec<String>,
    ) -> Result<Self, ReportError> {
        let csv = match watcher {
            Some(_) => Some(CsvFile::create(dir.join(RESOURCES_CSV), &blank_row())?),
            None => None,
        };
        Ok(ResourceLog {
            watcher,
            csv,
            origin,
            client,
            marks: vec![(0.0, Phase::Start)],
            pending: Vec::new(),
            kept: Vec::new(),
            latest: None,
            minute: None,
            minutes: Vec::new(),
            failures: Vec::new(),
            settings,
            op_names,
        })
    }

    fn now_s(&self) -> f64 {
        t_of(self.origin.elapsed())
    }

    fn phase_at(&self, t_s: f64) -> Phase {
        self.marks
            .iter()
            .rev()
            .find(|(from, _)| *from <= t_s)
            .map_or(Phase::Start, |(_, p)| *p)
    }

    fn mark(&mut self, from_s: f64, phase: Phase) {
        self.marks.push((from_s, phase));
    }

    /// Takes the watcher's new samples, and writes those up to `settled_s` (whose phase is
    /// known).
    fn pull(&mut self, settled_s: f64) -> Result<(), ReportError> {
        let Some(watcher) = &self.watcher else {
            return Ok(());
        };
        for why in watcher.take_failures() {
            eprintln!("mcpload: watching the server: {why}");
            self.failures.push(why);
        }
        let new = watcher.take();
        if let Some(last) = new.last() {
            self.latest = Some(last.clone());
        }
        self.pending.extend(new);
        let ready = self.pending.partition_point(|s| s.t_s <= settled_s);
        let rows: Vec<ResourceSample> = self.pending.drain(..ready).collect();
        for s in rows {
            self.write(&s)?;
        }
        Ok(())
    }

    fn write(&mut self, s: &ResourceSample) -> Result<(), ReportError> {
        let phase = self.phase_at(s.t_s);
        let sessions = s
            .named
            .iter()
            .find(|(n, _)| n == "sessions")
            .map(|(_, v)| *v)
            .or_else(|| self.client.server_sessions.as_ref().map(|f| f() as f64));
        let Some(csv) = &mut self.csv else {
            return Ok(());
        };
        let connections = self.client.connections.as_ref().map(|c| c.get() as u64);
        let own = connections.unwrap_or(0) * self.client.fds_per_connection;
        csv.append(&ResourceRow {
            t_s: s.t_s,
            phase: phase.name(),
            step: phase.step(),
            rss_bytes: s.rss_bytes,
            cpu_pct: s.cpu_pct,
            threads: s.threads,
            fds: s.fds,
            processes: s.processes,
            heap_bytes: s.heap_bytes,
            sessions,
            client_connections: connections,
            children: s.children,
            child_rss_p50_bytes: s.child_rss_p50_bytes,
            child_rss_max_bytes: s.child_rss_max_bytes,
        })?;
        self.kept.push(Kept {
            t_s: s.t_s,
            phase,
            rss_bytes: s.rss_bytes,
            cpu_pct: s.cpu_pct,
            threads: s.threads,
            server_fds: s.fds.map(|f| f.saturating_sub(own)),
            sessions,
            children: s.children,
        });
        Ok(())
    }

    /// A step is about to run: its warm-up begins now.
    pub fn step_started(&mut self, step: u32) -> Result<(), ReportError> {
        let now = self.now_s();
        self.pull(now)?;
        self.mark(now, Phase::Warmup(step));
        Ok(())
    }

    /// A second of a step ended: its samples are settled, and the latest is the one the
    /// timeseries row shows.
    pub fn second(&mut self, s: &Second<'_>) -> Result<Option<&ResourceSample>, ReportError> {
        let start = t_of(s.start);
        if self.phase_at(start) != Phase::Measure(s.step) {
            self.mark(start, Phase::Measure(s.step));
        }
        self.add_to_minute(s, start);
        let end = t_of(s.start + s.length);
        self.pull(end)?;
        Ok(self
            .latest
            .as_ref()
            .filter(|l| l.t_s <= end + 1.0 && l.t_s >= start - 1.0))
    }

    fn add_to_minute(&mut self, s: &Second<'_>, start: f64) {
        let m = match &mut self.minute {
            Some(m) if m.step == s.step => m,
            _ => {
                self.minute = Some(OpenMinute {
                    step: s.step,
                    start_s: start,
                    ..OpenMinute::default()
                });
                self.minute.as_mut().expect("just set")
            }
        };
        m.latency += s.latency;
        if m.ops.len() < s.ops.len() {
            m.ops.resize_with(s.ops.len(), LatencyHistogram::default);
        }
        for (sum, op) in m.ops.iter_mut().zip(s.ops) {
            *sum += &op.latency;
        }
        m.requests += s.counters.requests;
        m.ok += s.counters.ok.min(s.counters.requests);
        m.length_s += s.length.as_secs_f64();
        if m.length_s >= self.settings.drift_bucket_s() - 1e-6 {
            let done = self.minute.take().expect("open");
            self.minutes.push(Minute {
                step: done.step,
                mid_s: done.start_s + done.length_s / 2.0,
                p99_ms: p99_ms(&done.latency),
                op_p99_ms: done.ops.iter().map(p99_ms).collect(),
                error_rate: if done.requests == 0 {
                    0.0
                } else {
                    (done.requests - done.ok) as f64 / done.requests as f64
                },
            });
        }
    }

    /// A step's measured time ended `measured` after it began: what follows is between
    /// steps until the next begins.
    pub fn step_measured(&mut self, step: u32, measured_s: f64) -> Result<(), ReportError> {
        let start = self
            .marks
            .iter()
            .rev()
            .find(|(_, p)| *p == Phase::Measure(step))
            .map(|(t, _)| *t);
        let Some(start) = start else {
            return Ok(());
        };
        let end = t_of(Duration::from_secs_f64(start + measured_s));
        self.mark(end, Phase::Between(step));
        self.minute = None;
        let now = self.now_s();
        self.pull(now)
    }

    /// Fills a finished step's server columns: the largest RSS and CPU of its measured
    /// samples.
    pub fn fill_step(&self, record: &mut StepRecord) {
        let step = record.figures.step;
        let measured = || self.kept.iter().filter(|k| k.phase == Phase::Measure(step));
        record.figures.server_rss_max_bytes = measured().filter_map(|k| k.rss_bytes).max();
        record.figures.server_cpu_max_pct = measured()
            .filter_map(|k| k.cpu_pct)
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    }

    /// Watches the server with no load for `cooldown` (less when `stop` fires first).
    pub async fn cool_down(
        &mut self,
        cooldown: Duration,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<(), ReportError> {
        let now = self.now_s();
        self.pull(now)?;
        self.mark(now, Phase::Cooldown);
        let end = Instant::now() + cooldown;
        while Instant::now() < end && !stop.is_cancelled() {
            let tick = (end - Instant::now()).min(Duration::from_secs(1));
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = stop.cancelled() => {}
            }
            let now = self.now_s();
            self.pull(now)?;
        }
        Ok(())
    }

    /// Stops the watcher, writes what it still held, and judges the checks over the run's
    /// `steps` (the steady window is the longest measured step's, the last of equals).
    pub fn finish(
        mut self,
        steps: &[StepRecord],
        knee_step: Option<u32>,
    ) -> Result<Judged, ReportError> {
        if let Some(watcher) = self.watcher.take() {
            self.pending.extend(watcher.stop());
            for s in std::mem::take(&mut self.pending) {
                self.write(&s)?;
            }
        }
        let steady = steps
            .iter()
            .filter(|s| s.figures.duration_s > 0.0)
            .max_by(|a, b| a.figures.duration_s.total_cmp(&b.figures.duration_s));
        let min_window_s = self.settings.min_window.as_secs_f64();
        let series =
            |f: fn(&Kept) -> Option<f64>, phase: &dyn Fn(Phase) -> bool| -> Vec<(f64, f64)> {
                self.kept
                    .iter()
                    .filter(|k| phase(k.phase))
                    .filter_map(|k| f(k).map(|v| (k.t_s, v)))
                    .collect()
            };
        let steady_step = steady.map(|s| s.figures.step);
        let in_steady = |p: Phase| Some(p) == steady_step.map(Phase::Measure);
        let in_cooldown = |p: Phase| p == Phase::Cooldown;
        let requests = steady.map(|s| s.figures.requests);
        let leak = |f: fn(&Kept) -> Option<f64>| Windows {
            steady: series(f, &in_steady),
            cooldown: series(f, &in_cooldown),
        };
        let rss = leak(|k| k.rss_bytes.map(|v| v as f64));
        let fds = leak(|k| k.server_fds.map(|v| v as f64));
        let threads = leak(|k| k.threads.map(|v| v as f64));
        let sessions = leak(|k| k.sessions).less(self.client.sessions as f64);
        let minutes: Vec<&Minute> = self
            .minutes
            .iter()
            .filter(|m| Some(m.step) == steady_step)
            .collect();
        let p99: Vec<(f64, f64)> = minutes
            .iter()
            .filter_map(|m| m.p99_ms.map(|p| (m.mid_s, p)))
            .collect();
        let errors: Vec<(f64, f64)> = minutes.iter().map(|m| (m.mid_s, m.error_rate)).collect();
        let knee_cpu = knee_step.and_then(|k| {
            let cpu: Vec<f64> = series(|k| k.cpu_pct, &|p| p == Phase::Measure(k))
                .into_iter()
                .map(|(_, c)| c)
                .collect();
            (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64)
        });
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let (cpu_ceiling, knee_phrase) = checks::cpu_ceiling(knee_step, knee_cpu, Some(cores));
        // A fleet of children: the host's view of the knee, the copies and what they hold.
        let knee_fleet = knee_step.and_then(|k| {
            let at_knee = self.kept.iter().filter(|s| s.phase == Phase::Measure(k));
            let (children, rss) = at_knee
                .filter_map(|s| Some((s.children?, s.rss_bytes?)))
                .max_by_key(|(_, rss)| *rss)?;
            (children > 0).then(|| {
                let mib = |b: u64| b as f64 / f64::from(1 << 20);
                format!(
                    "{children} children holding {:.0} MiB ({:.0} MiB each)",
                    mib(rss),
                    mib(rss / children)
                )
            })
        });
        let knee_phrase = match (knee_phrase, knee_fleet) {
            (Some(cpu), Some(fleet)) => Some(format!("{cpu}, {fleet}")),
            (cpu, fleet) => cpu.or(fleet.map(|f| format!("with {f}"))),
        };
        let bound: Vec<(u32, String)> = steps
            .iter()
            .filter(|s| s.figures.generator_bound)
            .map(|s| {
                let why = s.figures.generator_bound_reason.clone().unwrap_or_default();
                (s.figures.step, why)
            })
            .collect();
        // The latency of a step the generator limited is partly mcpload's own lateness.
        let generator_bound = steady.is_some_and(|s| s.figures.generator_bound);
        let drift_of = |points: &[(f64, f64)]| {
            let mut c =
                checks::latency_drift(points, min_window_s, checks::DEFAULT_LATENCY_MAX_RISE);
            if generator_bound && c.status == checks::CheckStatus::Fail {
                c.status = checks::CheckStatus::Warn;
                c.reason.push_str(
                    "; the generator, not the server, limited the step, so part of it is \
                     mcpload's",
                );
            }
            c
        };
        let mut list = vec![
            checks::memory_leak(
                &rss.input(requests, min_window_s),
                checks::DEFAULT_MEMORY_LIMIT_MIB_PER_MIN,
            ),
            checks::count_leak(
                "fd_leak",
                "fds/min",
                "open descriptors",
                &fds.input(requests, min_window_s),
                checks::DEFAULT_COUNT_LIMIT_PER_MIN,
            ),
            checks::count_leak(
                "thread_leak",
                "threads/min",
                "threads",
                &threads.input(requests, min_window_s),
                checks::DEFAULT_COUNT_LIMIT_PER_MIN,
            ),
            checks::session_leak(
                &sessions.input(requests, min_window_s),
                checks::DEFAULT_SESSION_LIMIT_PER_MIN,
            ),
            drift_of(&p99),
        ];
        // Per operation, when there are several: one drifting call hides in the step's p99.
        if self.op_names.len() > 1 {
            for (i, name) in self.op_names.iter().enumerate() {
                let points: Vec<(f64, f64)> = minutes
                    .iter()
                    .filter_map(|m| m.op_p99_ms.get(i).copied().flatten().map(|p| (m.mid_s, p)))
                    .collect();
                let mut c = drift_of(&points);
                c.op = Some(name.clone());
                list.push(c);
            }
        }
        list.extend([
            checks::error_drift(&errors, min_window_s, checks::DEFAULT_ERROR_MAX_RISE_PP),
            cpu_ceiling,
            checks::generator(&bound),
        ]);
        if self.kept.is_empty() {
            let why = if self.csv.is_none() {
                "the server was not watched (use --server-pid, --server-metrics or \
                 --server-cgroup; a stdio child and the built-in target are watched by \
                 themselves)"
            } else {
                "no sample of the server was taken (see watch_failures)"
            };
            let of_the_server = ["memory_leak", "fd_leak", "thread_leak", "session_leak"];
            for c in list
                .iter_mut()
                .filter(|c| of_the_server.contains(&c.id.as_str()) || c.id == "cpu_ceiling")
            {
                c.status = checks::CheckStatus::Skipped;
                c.value = None;
                c.ci = None;
                c.reason = why.to_owned();
            }
        }
        Ok(Judged {
            checks: list,
            knee_phrase,
            failures: self.failures,
        })
    }
}

/// One figure's samples in the steady window and in the cool-down.
struct Windows {
    steady: Vec<(f64, f64)>,
    cooldown: Vec<(f64, f64)>,
}

impl Windows {
    fn input(&self, requests: Option<u64>, min_window_s: f64) -> LeakInput<'_> {
        LeakInput {
            steady: &self.steady,
            cooldown: &self.cooldown,
            requests,
            min_window_s,
        }
    }

    /// The same samples less `held` (what the client itself holds, e.g. its sessions).
    fn less(mut self, held: f64) -> Windows {
        for (_, v) in self.steady.iter_mut().chain(self.cooldown.iter_mut()) {
            *v -= held;
        }
        self
    }
}

/// The checks of a run, the phrase its knee line gains, and what failed while watching.
pub struct Judged {
    pub checks: Vec<Check>,
    pub knee_phrase: Option<String>,
    pub failures: Vec<String>,
}

fn blank_row() -> ResourceRow {
    ResourceRow {
        t_s: 0.0,
        phase: Phase::Start.name(),
        step: None,
        rss_bytes: None,
        cpu_pct: None,
        threads: None,
        fds: None,
        processes: None,
        heap_bytes: None,
        sessions: None,
        client_connections: None,
        children: None,
        child_rss_p50_bytes: None,
        child_rss_max_bytes: None,
    }
}
