//! `mcpload run`: a profile (or flags alone) with command-line overrides becomes a [`Plan`];
//! the plan starts the built-in target if asked, connects, runs the sweep with the run folder
//! and the live view as its sinks, and ends with the terminal report, the knee and the
//! gates.

mod plan;
mod segment;
mod signals;

pub use plan::{
    LevelsFlag, Overrides, Plan, PlanError, TargetFlag, builtin_knob_value, check, plan,
};
pub use segment::{segment_from, start_at_from};
pub use signals::{signals, stop_on_signals};

use crate::analysis::Thresholds;
use crate::client::{
    ConnectOptions, Connected, Connector, Endpoint, McpError, Revision, ServerInfo, TransportKind,
};
use crate::correlator::{AnswerRules, OutputSchema, ValidateOutput};
use crate::engine::{self, BatchShape, Clock, FanOut, SweepEnd, Workload};
use crate::load::flow::{CannedInput, client_capabilities};
use crate::load::mix::Mix;
use crate::load::scenario::{self, Scenarios};
use crate::metrics::{Counters, Model};
use crate::report::{self, Finished, LiveMode, LiveView, RunFolder, Secrets, SegmentRecord};
use crate::server::{self, RunningTarget};
use crate::transport::{
    AnyTransport, ChildPids, FleetOptions, StdioFleet, StdioOptions, StdioTransport, Transport,
};
use crate::watch::{WatchSource, WatchSpec, Watcher};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

/// How a run ended, for the exit code.
#[derive(Debug)]
pub struct Outcome {
    pub dir: PathBuf,
    pub interrupted: bool,
    /// Why the run stopped early (a worker lost), when it did.
    pub aborted: Option<String>,
    /// The authorization failed for good during the run (a refresh token refused): why.
    /// The run was stopped; the exit code is 2, as for credentials refused at the start.
    pub auth_stopped: Option<String>,
    /// Gates that failed, as written.
    pub failed_gates: Vec<String>,
    /// The terminal report.
    pub terminal: String,
}

/// Why a run stopped before its first step.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Report(#[from] report::ReportError),
    /// The sweep could not hand its results over (a run folder file could not be written).
    #[error(transparent)]
    Sink(engine::SinkError),
}

/// Runs the plan to its end (or to Ctrl-C / SIGTERM via `cancel`). A run that fails before
/// its first step leaves no empty folder behind (a stdio child's stderr log is kept).
pub async fn execute(plan: Plan, cancel: CancellationToken) -> Result<Outcome, RunError> {
    let dir = plan.dir.clone();
    let secrets = plan.secrets();
    let result = on_load_runtime(plan, cancel).await;
    if result.is_err() {
        let _ = std::fs::remove_dir(&dir); // only succeeds when empty
    }
    result.map_err(|e| e.scrubbed(&secrets))
}

/// Runs the plan on a runtime of its own, on a thread of its own, with one runtime thread per
/// load worker. A worker woken on a runtime with a thread to spare wakes that idle thread
/// too (a futex call and a context switch for most answers and sends: 1.6 futex calls a
/// request at 5,000/s, and a fifth of the CPU per request, benches/README.md, issue #24), so
/// a run with one worker (an open loop under 25,000/s, stdio) gets one thread. The run's
/// tasks (connections, token refreshes) are spawned on it, and it drives the run's sockets
/// and a child's pipes. A panic in the run is the caller's.
async fn on_load_runtime(plan: Plan, cancel: CancellationToken) -> Result<Outcome, RunError> {
    let threads = worker_count(&plan);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("mcpload-run".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name(crate::engine::health::LOAD_THREAD)
                .enable_all()
                .build();
            let result = match runtime {
                Ok(rt) => {
                    let result = rt.block_on(run_plan(plan, cancel));
                    // A blocking task still running (a token store's write) is not waited for.
                    rt.shutdown_background();
                    result
                }
                Err(e) => Err(RunError::Failed(format!(
                    "cannot start the run's runtime: {e}"
                ))),
            };
            let _ = tx.send(result);
        })
        .map_err(|e| RunError::Failed(format!("cannot start the run's thread: {e}")))?;
    match rx.await {
        Ok(result) => result,
        // The thread ended without a result: it panicked.
        Err(_) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => Err(RunError::Failed(
                "the run's thread ended without a result".into(),
            )),
        },
    }
}

impl RunError {
    /// The error with the run's secrets scrubbed out of its message (a URL's password in a
    /// connection error, a header value in a transport's complaint).
    fn scrubbed(self, secrets: &Secrets) -> RunError {
        match self {
            RunError::Plan(e) => RunError::Plan(PlanError::Usage(secrets.scrub(&e.to_string()))),
            other => RunError::Failed(secrets.scrub(&other.to_string())),
        }
    }
}

async fn run_plan(plan: Plan, cancel: CancellationToken) -> Result<Outcome, RunError> {
    if plan.target.stdio.is_none() && pool_size(&plan) < wanted_pool(&plan) {
        eprintln!(
            "mcpload: the open-file limit ({}) leaves room for {} connections, not the {} this \
             load would open; users past them wait for a connection (raise the hard limit: \
             ulimit -Hn)",
            open_files_limit().unwrap_or(0),
            pool_size(&plan),
            wanted_pool(&plan)
        );
    }
    let (builtin, endpoint) = endpoint(&plan).await?;
    std::fs::create_dir_all(&plan.dir)
        .map_err(|e| RunError::Failed(format!("cannot create {}: {e}", plan.dir.display())))?;
    let (connector, connected) = connect(&plan, endpoint).await?;
    if plan.insecure() {
        eprintln!(
            "mcpload: WARNING: --insecure: TLS certificates are not checked; anyone on the path \
             can read and change this traffic, and the results say so"
        );
    }
    let server = connected.server;
    if server.transport == TransportKind::Sse {
        eprintln!(
            "mcpload: speaking the legacy HTTP+SSE transport (2024-11-05), protocol {}: {}",
            server.revision, server.detection
        );
    }
    if let Some(b) = &plan.batch
        && server.revision > Revision::V2025_03_26
        && !b.force
    {
        return Err(PlanError::Usage(format!(
            "batches: the agreed revision {} forbids JSON-RPC batches (only 2025-03-26 allows them); \
             set `force = true` under [batch] (or --force-batch) to send them anyway",
            server.revision
        ))
        .into());
    }
    let mix =
        Mix::new(&plan.mix, &server, &plan.base, plan.input.as_ref()).map_err(PlanError::Usage)?;
    if !mix.unlisted().is_empty() {
        let listed: Vec<&str> = server.tools.iter().map(|t| t.name.as_str()).collect();
        for name in mix.unlisted() {
            eprintln!(
                "mcpload: warning: tool {name} is not among the {} tools the server lists ({}); \
                 its calls will likely end as errors",
                listed.len(),
                listed.join(", ")
            );
        }
    }
    for s in mix.skipped() {
        eprintln!(
            "mcpload: tool {} skipped, never called: {}",
            s.tool, s.reason
        );
    }
    let scenarios = (!plan.scenarios.is_empty())
        .then(|| scenario::compile(&mix, &plan.scenarios, &server, &plan.base))
        .transpose()
        .map_err(PlanError::Usage)?;
    let mut spec = plan.run_spec(&mix, &server);
    let scenario_tools = scenarios
        .as_ref()
        .map_or(&[][..], |(s, _)| s.called_tools());
    let answer_rules = Arc::new(answer_rules(&plan, &mix, scenario_tools, &server));
    let work = Arc::new(workload(&plan, mix, scenarios, answer_rules));
    let clock = plan
        .sweep
        .start_at
        .map(|at| common_clock(at, &work, plan.quiet))
        .transpose()?;
    if let Some(c) = &clock {
        // Seconds, timeseries.csv and latency.hlog count from the common start.
        spec.started = c.start_at;
    }
    let transports = open_connections(&plan, &connector, &server, connected.transport).await?;
    spec.names = report::Names {
        ops: work.op_names.clone(),
        scenarios: work
            .scenarios
            .as_ref()
            .map_or_else(Vec::new, Scenarios::names),
    };
    let mut folder = RunFolder::create(spec)?;
    folder.set_protocol_revision(server.revision.as_str())?;
    // Seconds count from the run's start, or from the common start: the samples too.
    let origin = clock.as_ref().map_or_else(Instant::now, Clock::origin);
    let log = report::ResourceLog::create(
        folder.dir(),
        watch_spec(&plan, &transports, origin).map(Watcher::start),
        origin,
        client_side(
            &plan,
            &connector,
            &transports,
            server.revision,
            builtin.as_ref(),
        ),
        report::CheckSettings {
            min_window: plan.load.leak_min_window,
        },
        work.op_names.clone(),
    )?;
    folder.watch(log);
    if plan.segment.is_split() || clock.is_some() {
        folder.set_segment(SegmentRecord {
            index: plan.segment.index,
            count: plan.segment.count,
            start_at: clock.map(|c| segment::rfc3339(c.start_at)),
            start_late_ms: None,
            steps: Vec::new(),
        })?;
    }
    let mut live = LiveView::new(
        LiveMode::detect(plan.quiet),
        &plan.name,
        &plan.thresholds,
        cancel.clone(),
    );
    let listen = plan
        .metrics_listen
        .map(|addr| {
            std::net::TcpListener::bind(addr)
                .map_err(|e| RunError::Failed(format!("--metrics-listen {addr}: {e}")))
        })
        .transpose()?;
    let mut export = (plan.remote_write.is_some() || listen.is_some())
        .then(|| {
            report::remote_write::LiveMetrics::start(
                plan.remote_write.clone(),
                listen,
                report::remote_write::RunLabels {
                    run_id: run_id(&plan.dir),
                    segment: plan.segment.index,
                    ops: work.op_names.clone(),
                    scenarios: work.scenarios.as_ref().map_or_else(Vec::new, |s| {
                        s.names().into_iter().map(|n| n.scenario).collect()
                    }),
                },
            )
        })
        .transpose()
        .map_err(|e| RunError::Failed(format!("cannot start the live metrics: {e}")))?;
    let mut sinks: Vec<&mut dyn engine::StepSink> = vec![&mut folder, &mut live];
    if let Some(e) = export.as_mut() {
        sinks.push(e);
    }
    // A refresh token refused for good stops the run as Ctrl-C would (what was measured is
    // kept), instead of letting every request fail.
    let sweep_cancel = cancel.child_token();
    let auth_watch = connector.options().auth.clone().map(|auth| {
        let stop = sweep_cancel.clone();
        tokio::spawn(async move {
            let why = auth.fatal_news().await;
            eprintln!("mcpload: stopping the run: {}", report::redact_urls(&why));
            stop.cancel();
        })
    });
    let swept = engine::sweep(
        work,
        &plan.sweep,
        transports,
        &mut FanOut(sinks),
        sweep_cancel,
    )
    .await;
    if let Some(w) = auth_watch {
        w.abort();
    }
    let auth_stopped = connector
        .options()
        .auth
        .as_ref()
        .and_then(|a| a.fatal())
        .map(|why| why.to_string());
    // The final push went out at the sweep's end; what came of every push is the run's.
    if let Some(pushes) = export.and_then(report::remote_write::LiveMetrics::finish) {
        folder.record_export(pushes)?;
    }
    let color = report::use_color(&std::io::stdout());
    let (end, mut transports) = match swept {
        Ok(done) => done,
        Err(e) => {
            // The folder could not be written (disk full, removed): say so in it if possible.
            let _ = folder.record_end(&SweepEnd::Aborted(e.to_string()));
            let _ = finish(folder, &plan.thresholds, color);
            return Err(RunError::Sink(e));
        }
    };
    // The cool-down watches the server with no load, its connections (a stdio child) still
    // open and idle. Then the connections close (a legacy session's DELETE must reach the
    // target), then the built-in target stops and its final counters are kept.
    if end != SweepEnd::Interrupted {
        folder.cool_down(plan.load.cooldown, &cancel).await?;
    }
    // The watching ends with the cool-down (closing a stdio child is not the server's doing).
    folder.judge_checks()?;
    engine::close_all(&mut transports).await;
    let mut whole = Counters::default();
    for t in &transports {
        t.add_totals(&mut whole);
    }
    folder.record_sessions(&whole)?;
    if let Some(report) = transports.first().and_then(AnyTransport::process_report) {
        folder.record_processes(report, plan.load.timeout)?;
    }
    if let Some(auth) = &connector.options().auth {
        // No refresh after the last request: the counts are the run's, and a built-in
        // target's tokens issued agree with them.
        auth.stop().await;
        let (requests, refreshes, fetch_time) = auth.totals();
        let totals = report::AuthTotals {
            token_requests: requests,
            token_refreshes: refreshes,
            fetch: fetch_time,
            users: auth.per_user().then(|| auth.holders()),
        };
        folder.record_auth(&whole, &totals)?;
    }
    if let Some(b) = builtin {
        folder.record_target_stats(&b.shutdown().await)?;
    }
    let done = finish(folder, &plan.thresholds, color)?;
    let failed_checks = done
        .summary
        .checks
        .iter()
        .filter(|c| c.status == crate::analysis::checks::CheckStatus::Fail)
        .map(|c| format!("check {}: {}", c.id, c.reason));
    let failed_gates = done
        .summary
        .gates
        .iter()
        .filter(|g| !g.holds)
        .map(|g| g.threshold.to_string())
        .chain(failed_checks)
        .collect();
    Ok(Outcome {
        dir: done.dir,
        interrupted: end == SweepEnd::Interrupted,
        aborted: match end {
            SweepEnd::Aborted(why) => Some(why),
            _ => None,
        },
        failed_gates,
        terminal: done.terminal,
        auth_stopped,
    })
}

/// The run's id, as its series and CI reports name it: the run folder's name.
fn run_id(dir: &std::path::Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What watches the server as a process, if anything does: the sources the plan names
/// (`[target.watch]`, `--server-pid`, `--server-metrics`, `--server-cgroup`), then the ones
/// every run has: the built-in target in this process, a stdio child.
fn watch_spec(plan: &Plan, transports: &[AnyTransport], origin: Instant) -> Option<WatchSpec> {
    let w = &plan.target.watch;
    let mut sources = Vec::new();
    sources.extend(w.pid.map(WatchSource::Pid));
    sources.extend(w.metrics.clone().map(|url| WatchSource::Metrics { url }));
    sources.extend(
        w.cgroup
            .as_ref()
            .map(|c| WatchSource::Cgroup(plan.base.join(c))),
    );
    if plan.target.builtin.is_some() {
        sources.push(WatchSource::InProcessTarget);
    }
    match transports.first() {
        Some(AnyTransport::Stdio(t)) => sources.extend(t.child_id().map(WatchSource::Pid)),
        Some(AnyTransport::Fleet(f)) => sources.push(WatchSource::Fleet(f.pids())),
        _ => {}
    }
    (!sources.is_empty()).then(|| WatchSpec {
        sources,
        named: w
            .metric
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        interval: Duration::from_secs(1),
        origin,
    })
}

/// What of the watched server's figures is mcpload's own: its connections' descriptors (the
/// built-in target in this process holds both ends of each), its sessions (one a transport
/// in the legacy era).
fn client_side(
    plan: &Plan,
    connector: &Connector,
    transports: &[AnyTransport],
    revision: Revision,
    builtin: Option<&RunningTarget>,
) -> report::ClientSide {
    report::ClientSide {
        server_sessions: builtin.map(|b| {
            let held = b.sessions_held();
            Arc::new(held) as Arc<dyn Fn() -> u64 + Send + Sync>
        }),
        connections: connector.open_connections(),
        fds_per_connection: if plan.target.builtin.is_some() { 2 } else { 1 },
        sessions: if revision < Revision::V2026_07_28 {
            transports.len() as u64
        } else {
            0
        },
    }
}

/// Where the load goes: the built-in target started here (handed back for shutting down), an
/// HTTP endpoint, or a stdio child (its stderr kept in the run folder).
async fn endpoint(plan: &Plan) -> Result<(Option<RunningTarget>, Endpoint), RunError> {
    let t = &plan.target;
    if let Some(cfg) = &t.builtin {
        let running = server::start_http_apart(cfg.clone(), engine::health::TARGET_THREAD)
            .map_err(|e| match e {
                server::ServeError::Config(_) => plan::builtin_error(e).into(),
                other => RunError::Failed(format!("starting the built-in target: {other}")),
            })?;
        let endpoint = Endpoint::http(running.url(), Vec::new());
        return Ok((Some(running), endpoint));
    }
    if let Some(url) = &t.url {
        let headers = t.headers.clone().into_iter().collect();
        return Ok((None, Endpoint::http(url.clone(), headers)));
    }
    let cmd = t.stdio.as_deref().unwrap_or_default();
    let mut o = StdioOptions::from_command_line(cmd)
        .map_err(|e| PlanError::Usage(format!("stdio command: {e}")))?;
    o.env = t.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    o.cwd = t.cwd.as_ref().map(|c| plan.base.join(c));
    o.stderr = Some(plan.dir.join(report::TARGET_STDERR));
    Ok((None, Endpoint::Stdio(o)))
}

/// The most connections the run opens to an HTTP target: the highest level of a closed loop,
/// `max_in_flight` of an open one; times the widest parallel step of the scenarios, whose
/// members are in flight at once (HTTP/1.1 carries one request per connection at a time);
/// times [`connections_per_call`]; at most 4,096, and at most what the open-file limit
/// leaves room for ([`files_for_pool`]).
fn pool_size(plan: &Plan) -> usize {
    wanted_pool(plan).min(files_for_pool(plan).unwrap_or(usize::MAX))
}

fn wanted_pool(plan: &Plan) -> usize {
    let per_unit = match plan.model {
        Model::Closed => max_users(plan),
        Model::Open => plan.segment.share(plan.load.max_in_flight as u64) as usize,
    };
    per_unit
        .saturating_mul(plan.widest_step())
        .saturating_mul(connections_per_call(plan))
        .clamp(1, 4096)
}

/// Connections one call in flight may need at once: with `[input]` a legacy server may ask
/// during a call, which holds the call's connection open (its answer's stream) while the
/// answer to the server is POSTed on another; a pool of one per call would keep every
/// answer waiting behind the calls it unblocks.
fn connections_per_call(plan: &Plan) -> usize {
    if plan.input.is_some() { 2 } else { 1 }
}

/// Descriptors kept for what is not a load connection: the run folder's files, a stdio
/// child's pipes, the runtime's own.
const SPARE_FILES: usize = 64;

/// How many connections the open-file limit (as `main` raised it) leaves room for: a socket
/// is a file, twice over with the built-in target in the same process (its end too). A pool
/// past it would have connects refused for want of a file (EMFILE), each failing its request
/// at once and its user sending again at once: a storm that starves the answers. Within it,
/// users past the pool wait for a connection.
fn files_for_pool(plan: &Plan) -> Option<usize> {
    let limit = open_files_limit()?;
    let per_connection = if plan.target.builtin.is_some() { 2 } else { 1 };
    Some((limit.saturating_sub(SPARE_FILES) / per_connection).max(1))
}

#[cfg(target_os = "linux")]
fn open_files_limit() -> Option<usize> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit.current.and_then(|n| usize::try_from(n).ok())
}

#[cfg(not(target_os = "linux"))]
fn open_files_limit() -> Option<usize> {
    None
}

/// Over the legacy HTTP+SSE transport a transport is one session (its stream), and real
/// clients hold one each: in a closed loop (with no `--workers`) the run makes one per
/// virtual user of the highest level, each its own worker, so that each user has a session of
/// its own (at most 64: past them users share the 64). An open loop has no users: `None`.
fn session_count(plan: &Plan) -> Option<usize> {
    (plan.model == Model::Closed && plan.workers.is_none()).then(|| max_users(plan).clamp(1, 64))
}

/// Closed loop: this segment's share of the virtual users of the sweep's highest level.
fn max_users(plan: &Plan) -> usize {
    let max_level = plan.sweep.levels.iter().cloned().fold(1.0, f64::max);
    plan.segment.share(max_level.round() as u64) as usize
}

/// Workers: one for stdio; else `--workers` or [`default_workers`], at most 64, and over
/// HTTP at most the calls the pool has room for, since the workers split it and each needs a
/// connection of its own.
fn worker_count(plan: &Plan) -> usize {
    match &plan.target.stdio {
        Some(_) => 1,
        None => plan
            .workers
            .unwrap_or_else(|| default_workers(plan))
            .min(pool_size(plan) / connections_per_call(plan)),
    }
    .clamp(1, 64)
}

/// Arrivals a second one worker of an open loop takes on by default. Workers past what the
/// rate needs cost CPU without adding sends: their threads wake each other for every few
/// answers (benches/README.md, issue #24: at 20,000/s against `mcpload serve`, two workers
/// spent 42.6 µs a request and one 30.3, at the same achieved rate).
const OPEN_RATE_PER_WORKER: usize = 25_000;

/// One worker per core; an open loop one per [`OPEN_RATE_PER_WORKER`] of its highest rate,
/// at most one per core.
fn default_workers(plan: &Plan) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    match plan.model {
        Model::Closed => cores,
        Model::Open => max_users(plan)
            .div_ceil(OPEN_RATE_PER_WORKER)
            .clamp(1, cores),
    }
}

/// The first connection (handshake, tool list), with a pool sized for the highest level.
async fn connect(plan: &Plan, endpoint: Endpoint) -> Result<(Connector, Connected), RunError> {
    let auth = match &endpoint {
        Endpoint::Http { url, .. } => plan.credentials(url)?,
        Endpoint::Stdio(_) => None,
    };
    let opts = ConnectOptions {
        auth,
        tls: plan.tls_options(),
        protocol: plan.target.protocol,
        transport: plan.target.transport,
        pool_size: pool_size(plan),
        transports: worker_count(plan),
        connect_timeout: plan.load.connect_timeout,
        max_answer_memory: plan.load.max_answer_memory,
        list_tools: true,
        session_lost_on_400: plan.target.session_lost_on_400,
        client_capabilities: plan.input.as_ref().map_or_else(Default::default, |i| {
            client_capabilities(Some(&CannedInput::new(i)), false)
        }),
        ..ConnectOptions::default()
    };
    let connector = Connector::new(endpoint, opts).map_err(|e| PlanError::Usage(e.to_string()))?;
    let connected = connector.connect().await.map_err(|e| {
        let why = format!("connecting to {}: {e}", connector.target().describe());
        match e {
            // Credentials missing or refused: the configuration is at fault (exit code 2).
            McpError::Auth(_) => RunError::Plan(PlanError::Usage(why)),
            _ => RunError::Failed(why),
        }
    })?;
    Ok((connector, connected))
}

/// One transport per worker ([`worker_count`], or [`session_count`] over the legacy
/// HTTP+SSE transport): `first`, then the others.
async fn open_connections(
    plan: &Plan,
    connector: &Connector,
    server: &ServerInfo,
    first: AnyTransport,
) -> Result<Vec<AnyTransport>, RunError> {
    let count = match (&first, session_count(plan)) {
        (AnyTransport::LegacySse(_), Some(sessions)) => {
            connector.share_pool(sessions);
            sessions
        }
        _ => worker_count(plan),
    };
    let first = match first {
        AnyTransport::Stdio(child) if plan.process_per_user() => {
            return Ok(vec![AnyTransport::Fleet(Box::new(fleet(
                plan, connector, *child,
            )?))]);
        }
        other => other,
    };
    let mut transports = vec![first];
    for _ in 1..count {
        let t = connector
            .attach(server)
            .await
            .map_err(|e| RunError::Failed(format!("opening another connection: {e}")))?;
        transports.push(t);
    }
    Ok(transports)
}

/// A process per session: the connect's child is user 0's; each other user starts its own
/// with the same command, environment and handshake, its stderr under `children/`.
fn fleet(
    plan: &Plan,
    connector: &Connector,
    first: StdioTransport,
) -> Result<StdioFleet, RunError> {
    let Endpoint::Stdio(child) = connector.target() else {
        unreachable!("a process per user is planned for stdio targets only")
    };
    let children = plan.dir.join(report::CHILDREN_DIR);
    std::fs::create_dir_all(&children)
        .map_err(|e| RunError::Failed(format!("cannot create {}: {e}", children.display())))?;
    let t = &plan.target;
    Ok(StdioFleet::new(
        first,
        FleetOptions {
            child: StdioOptions {
                max_line_bytes: connector.options().max_message_bytes,
                ..child.clone()
            },
            children_dir: Some(children),
            session_calls: t.session_calls,
            session_duration: t.session_duration,
            start_timeout: connector.options().handshake_timeout,
            pids: ChildPids::default(),
            memory_budget: Some(match t.fleet_memory_budget {
                Some(bytes) => bytes as u64,
                None => half_the_memory_available()?,
            }),
        },
    ))
}

/// The default fleet memory budget: half of /proc/meminfo's `MemAvailable` at the start, so
/// that the kernel's OOM killer never decides where the sweep ends.
fn half_the_memory_available() -> Result<u64, RunError> {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024 / 2)
        .ok_or_else(|| {
            RunError::Plan(PlanError::Usage(
                "--process-per-user: /proc/meminfo says no MemAvailable; give the fleet a \
                 budget with --fleet-memory-budget (or target.fleet_memory_budget)"
                    .into(),
            ))
        })
}

/// How the workers read results: tool errors as the plan says, and each called tool's
/// `outputSchema` (2025-06-18 on) compiled once, for the mix's operations and the scenario
/// steps' (`scenario_tools`). A schema that does not compile (invalid, or
/// needing a `$ref` from elsewhere, which is never fetched) leaves its tool unchecked, said
/// on stderr.
fn answer_rules(
    plan: &Plan,
    mix: &Mix,
    scenario_tools: &[(u16, String)],
    server: &ServerInfo,
) -> AnswerRules {
    let a = plan.answers;
    let mut rules = AnswerRules::new(a.tool_errors, a.validate_output);
    if a.validate_output == ValidateOutput::Off || server.revision < Revision::V2025_06_18 {
        return rules;
    }
    let mut compiled: BTreeMap<&str, Option<Arc<OutputSchema>>> = BTreeMap::new();
    for (op, name) in mix.called_tools().iter().chain(scenario_tools) {
        let Some(schema) = server.tool(name).and_then(|t| t.output_schema.as_ref()) else {
            continue;
        };
        let entry = compiled.entry(name).or_insert_with(|| {
            OutputSchema::compile(schema)
                .inspect_err(|why| {
                    eprintln!(
                        "mcpload: tool {name}: its outputSchema does not compile ({why}); its \
                         results are not checked"
                    )
                })
                .ok()
                .map(Arc::new)
        });
        if let Some(s) = entry {
            rules.set_schema(*op, Arc::clone(s));
        }
    }
    rules
}

/// What every worker runs, step after step.
fn workload(
    plan: &Plan,
    mix: Mix,
    scenarios: Option<(Scenarios, Vec<String>)>,
    answer_rules: Arc<AnswerRules>,
) -> Workload {
    let l = &plan.load;
    let batch_size = plan.batch.as_ref().map_or(1, |b| b.size);
    let drain_timeout = mix
        .longest_timeout()
        .map_or(l.timeout, |t| t.max(l.timeout));
    let (scenarios, op_names) = match scenarios {
        Some((s, names)) => (Some(s), names),
        None => (None, mix.names().to_vec()),
    };
    Workload {
        model: plan.model,
        op_names,
        mix,
        scenarios,
        graceful_stop: l.graceful_stop_or_timeout(),
        batch: plan
            .batch
            .as_ref()
            .map(|b| BatchShape::new(b.size, b.notifications)),
        duration: l.duration,
        warmup: l.warmup,
        timeout: l.timeout,
        drain_timeout,
        think_time: l.think_time,
        spacing: l.spacing,
        send_window: l.send_window,
        // A fixed count that bounds the whole load: each segment bounds its share.
        max_in_flight: (plan.segment.share(l.max_in_flight as u64) as usize).max(batch_size),
        seed: plan.segment.seed(plan.seed),
        segment: plan.segment,
        named_users: plan.token_per_user() || plan.process_per_user(),
        answer_rules,
    }
}

/// The common clock of a run started with `--start-at`: a start further in the past than one
/// step's slot is a usage error (the segments could not line up); one a little late starts at
/// once, and the run records how late.
fn common_clock(start_at: SystemTime, work: &Workload, quiet: bool) -> Result<Clock, PlanError> {
    let clock = Clock::new(start_at, work.slot_shape());
    let late = clock.late_by(SystemTime::now());
    if late > clock.slot {
        return Err(PlanError::Usage(format!(
            "--start-at {}: {:.1} s in the past, more than one step's slot ({:.1} s: warm-up, \
             its drain bound, duration, drain bound); give every segment a start ahead of all \
             their launches",
            segment::rfc3339(start_at),
            late.as_secs_f64(),
            clock.slot.as_secs_f64()
        )));
    }
    if !quiet {
        let wait = start_at
            .duration_since(SystemTime::now())
            .map_or(0.0, |d| d.as_secs_f64());
        eprintln!(
            "mcpload: segment {} starts at {} (in {wait:.1} s); each step's slot is {:.1} s",
            work.segment,
            segment::rfc3339(start_at),
            clock.slot.as_secs_f64()
        );
    }
    Ok(clock)
}

/// Checks the gates on the recorded sweep and writes the folder's last files.
fn finish(
    folder: RunFolder,
    thresholds: &Thresholds,
    color: bool,
) -> Result<Finished, report::ReportError> {
    let gates = folder.summary().evaluate_gates(thresholds);
    folder.finish(gates, color)
}
