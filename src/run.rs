//! `mcpload run`: a profile (or flags alone) with command-line overrides becomes a plan; the
//! plan starts the built-in target if asked, connects, writes the run folder step by step and
//! ends with the terminal report, the knee and the gates.

use crate::analysis::{StopCriteria, Thresholds};
use crate::client::{ConnectOptions, Connector, Endpoint, ProtocolChoice, Revision};
use crate::engine::{self, BatchShape, Progress, SweepEnd, Workload};
use crate::load::mix::Mix;
use crate::metrics::Model;
use crate::profile::{
    Levels, LoadModel, Method, Op, Profile, ProfileError, Source, Spacing, TargetSpec,
};
use crate::report::{self, ProfileCopy, RunEnd, RunFolder, RunSpec};
use crate::server::{self, ServeConfig};
use crate::transport::StdioOptions;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// What the command line adds to (or puts in place of) a profile.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub url: Option<String>,
    pub stdio: Option<String>,
    pub builtin: bool,
    /// `Name: value` lines; `${VAR}` expands from the environment.
    pub headers: Vec<String>,
    pub protocol: Option<ProtocolChoice>,
    /// Replace the mix with `tools/call` of this tool.
    pub tool: Option<String>,
    pub args: Option<Value>,
    pub concurrency: Option<Levels>,
    pub rate: Option<Levels>,
    pub duration: Option<Duration>,
    pub warmup: Option<Duration>,
    pub timeout: Option<Duration>,
    pub think_time: Option<Duration>,
    pub max_in_flight: Option<usize>,
    pub spacing: Option<Spacing>,
    pub batch_size: Option<usize>,
    pub batch_notifications: Option<usize>,
    pub force_batch: bool,
    pub out: Option<PathBuf>,
    pub results: Option<PathBuf>,
    pub name: Option<String>,
    pub thresholds: Vec<String>,
    pub error_rate: Option<f64>,
    pub p99_slo_ms: Option<f64>,
    pub fail_on_anomaly: bool,
    /// Go on after a failed step.
    pub keep_going: bool,
    pub workers: Option<usize>,
    pub seed: Option<u64>,
    pub quiet: bool,
}

/// Why a run could not start: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("{0}")]
    Usage(String),
}

/// How a run ended, for the exit code.
#[derive(Debug)]
pub struct Outcome {
    pub dir: PathBuf,
    pub interrupted: bool,
    /// Why the run stopped early (a worker lost), when it did.
    pub aborted: Option<String>,
    /// Gates that failed, as written.
    pub failed_gates: Vec<String>,
    /// The terminal report.
    pub terminal: String,
}

/// A run ready to go.
#[derive(Debug)]
pub struct Plan {
    name: String,
    source: Option<Source>,
    /// The profile's folder, for relative paths (CSV files, stdio `cwd`).
    base: PathBuf,
    target: TargetSpec,
    /// The `[target.builtin]` table as written, for the settings record.
    builtin_raw: Value,
    mix: Vec<Op>,
    model: Model,
    levels: Vec<f64>,
    load: crate::profile::Load,
    batch: Option<crate::profile::Batch>,
    criteria: StopCriteria,
    thresholds: Thresholds,
    threshold_texts: Vec<String>,
    stop_on_failure: bool,
    dir: PathBuf,
    workers: Option<usize>,
    seed: u64,
    quiet: bool,
}

/// Merges a profile (if any) and the overrides into a plan; every mistake is a [`PlanError`].
pub fn plan(profile: Option<&Path>, o: Overrides) -> Result<Plan, PlanError> {
    let usage = |m: String| PlanError::Usage(m);
    let (source, mut p) = match profile {
        Some(path) => {
            let s = Source::read(path)?;
            let p = s.parse()?;
            (Some(s), p)
        }
        None => (None, flags_only_profile()),
    };
    let builtin_raw = source
        .as_ref()
        .and_then(|s| s.text.parse::<toml::Table>().ok())
        .and_then(|t| t.get("target")?.get("builtin").cloned())
        .map(|b| serde_json::to_value(b).unwrap_or(Value::Null))
        .unwrap_or_else(|| json!({}));
    let target = p.target.get_mut();
    let chosen = [o.url.is_some(), o.stdio.is_some(), o.builtin];
    if chosen.iter().filter(|c| **c).count() > 1 {
        return Err(usage("give one of --url, --stdio, --builtin".into()));
    }
    let mut builtin_raw = builtin_raw;
    if chosen.iter().any(|c| *c) {
        // The flag replaces the kind of target; headers, env, cwd and protocol stay.
        target.builtin = o.builtin.then(ServeConfig::default);
        target.url = o.url.clone();
        target.stdio = o.stdio.clone();
        builtin_raw = json!({});
    }
    if target.builtin.is_none() && target.url.is_none() && target.stdio.is_none() {
        return Err(usage(
            "no target: give a profile, or --url URL, --stdio \"COMMAND ARGS\" or --builtin".into(),
        ));
    }
    for h in &o.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| usage(format!("--header {h:?}: write \"Name: value\"")))?;
        target
            .headers
            .insert(name.trim().to_owned(), value.trim().to_owned());
    }
    if let Some(pr) = o.protocol {
        target.protocol = pr;
    }
    if let Some(tool) = &o.tool {
        let args = match &o.args {
            Some(Value::Object(m)) => {
                Some(toml::Table::try_from(m.clone()).map_err(|e| usage(format!("--args: {e}")))?)
            }
            Some(_) => return Err(usage("--args must be a JSON object".into())),
            None => None,
        };
        p.mix = vec![toml::Spanned::new(
            0..0,
            Op {
                method: Method::ToolsCall,
                weight: 1,
                tool: Some(tool.clone()),
                args,
                uri: None,
                prompt: None,
                csv: None,
            },
        )];
    } else if o.args.is_some() {
        return Err(usage("--args goes with --tool".into()));
    }
    let l = &mut p.load;
    match (o.concurrency, o.rate) {
        (Some(_), Some(_)) => return Err(usage("give --concurrency or --rate, not both".into())),
        (Some(c), None) => {
            l.concurrency = Some(toml::Spanned::new(0..0, c));
            l.rate = None;
            l.model = Some(LoadModel::Closed);
        }
        (None, Some(r)) => {
            l.rate = Some(toml::Spanned::new(0..0, r));
            l.concurrency = None;
            l.model = Some(LoadModel::Open);
        }
        (None, None) => {}
    }
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = o.$f { l.$f = v; } )* };
    }
    set!(
        duration,
        warmup,
        timeout,
        think_time,
        max_in_flight,
        spacing
    );
    if l.duration.is_zero() || l.timeout.is_zero() {
        return Err(usage(
            "--duration and --timeout must be more than 0s".into(),
        ));
    }
    let model = match (l.model, &l.rate) {
        (Some(LoadModel::Open), _) | (None, Some(_)) => Model::Open,
        _ => Model::Closed,
    };
    let levels = match model {
        Model::Closed => l
            .concurrency
            .as_ref()
            .map_or(vec![1.0], |c| c.get_ref().0.clone()),
        Model::Open => l
            .rate
            .as_ref()
            .map(|r| r.get_ref().0.clone())
            .ok_or_else(|| usage("an open-loop load needs rates: `load.rate` or --rate".into()))?,
    };
    if model == Model::Closed && levels.iter().any(|c| c.fract() != 0.0) {
        return Err(usage("concurrency levels must be whole numbers".into()));
    }
    let mut batch = p.batch.map(|b| b.into_inner());
    if let Some(size) = o.batch_size {
        if size == 0 {
            return Err(usage("--batch-size must be 1 or more".into()));
        }
        let b = batch.get_or_insert(crate::profile::Batch {
            size,
            notifications: 0,
            force: false,
        });
        b.size = size;
    }
    if let Some(b) = batch.as_mut() {
        b.notifications = o.batch_notifications.unwrap_or(b.notifications);
        b.force |= o.force_batch;
    }
    let mut criteria = StopCriteria {
        max_error_rate: p.criteria.error_rate,
        p99_slo_ms: p.criteria.p99_ms,
        fail_on_anomaly: p.criteria.fail_on_anomaly,
    };
    if let Some(e) = o.error_rate {
        if !(0.0..=1.0).contains(&e) {
            return Err(usage(format!(
                "--max-error-rate {e}: must be between 0 and 1"
            )));
        }
        criteria.max_error_rate = e;
    }
    if o.p99_slo_ms.is_some() {
        criteria.p99_slo_ms = o.p99_slo_ms;
    }
    criteria.fail_on_anomaly |= o.fail_on_anomaly;
    let mut threshold_texts: Vec<String> =
        p.thresholds.iter().map(|t| t.get_ref().clone()).collect();
    threshold_texts.extend(o.thresholds.iter().cloned());
    let thresholds = Thresholds::parse(&threshold_texts).map_err(|e| usage(e.to_string()))?;
    let name = o
        .name
        .or(p.name.clone())
        .or_else(|| {
            profile
                .and_then(|f| f.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| target_name(p.target.get_ref()));
    let stop_on_failure = p.load.stop_on_failure && !o.keep_going;
    let started = SystemTime::now();
    let dir = o.out.unwrap_or_else(|| {
        report::default_run_dir(
            o.results.as_deref().unwrap_or(Path::new("results")),
            &name,
            started,
        )
    });
    let base = profile
        .and_then(Path::parent)
        .map(Path::to_owned)
        .unwrap_or_default();
    Ok(Plan {
        name,
        source,
        base,
        target: p.target.into_inner(),
        builtin_raw,
        mix: p.mix.into_iter().map(|m| m.into_inner()).collect(),
        model,
        levels,
        load: p.load,
        batch,
        criteria,
        thresholds,
        threshold_texts,
        stop_on_failure,
        dir,
        workers: o.workers,
        seed: o.seed.unwrap_or(0x006d_6370_6c6f_6164),
        quiet: o.quiet,
    })
}

/// A run name from the target alone: `builtin`, the URL's `host-port`, or the program's name.
fn target_name(t: &TargetSpec) -> String {
    if let Some(url) = &t.url {
        let host = url
            .split("://")
            .nth(1)
            .unwrap_or(url)
            .split('/')
            .next()
            .unwrap_or("http");
        return host.replace(':', "-");
    }
    if let Some(cmd) = &t.stdio {
        let program = cmd.split_whitespace().next().unwrap_or("stdio");
        return Path::new(program)
            .file_name()
            .map_or_else(|| "stdio".into(), |n| n.to_string_lossy().into_owned());
    }
    "builtin".into()
}

/// The profile a run with flags alone starts from: echo against whatever target the flags name.
fn flags_only_profile() -> Profile {
    Profile {
        name: None,
        description: None,
        target: toml::Spanned::new(0..0, TargetSpec::default()),
        load: crate::profile::Load::default(),
        mix: Vec::new(),
        batch: None,
        criteria: crate::profile::Criteria::default(),
        thresholds: Vec::new(),
    }
}

/// The default mix: `tools/call echo {"message": "hi"}`.
fn default_mix() -> Vec<Op> {
    let mut args = toml::Table::new();
    args.insert("message".into(), toml::Value::String("hi".into()));
    vec![Op {
        method: Method::ToolsCall,
        weight: 1,
        tool: Some("echo".into()),
        args: Some(args),
        uri: None,
        prompt: None,
        csv: None,
    }]
}

impl Plan {
    /// The run's settings as recorded in summary.json (header values redacted).
    fn settings(&self, mix: &Mix) -> (Value, Vec<String>) {
        let t = &self.target;
        let target = if let Some(url) = &t.url {
            json!({"url": url, "headers": t.headers})
        } else if let Some(cmd) = &t.stdio {
            json!({"stdio": cmd, "env": t.env.keys().collect::<Vec<_>>(), "cwd": t.cwd})
        } else {
            json!({"builtin": self.builtin_raw})
        };
        let redact = t
            .headers
            .keys()
            .map(|k| {
                format!(
                    "/target/headers/{}",
                    k.replace('~', "~0").replace('/', "~1")
                )
            })
            .collect();
        let l = &self.load;
        let settings = json!({
            "name": self.name,
            "profile": self.source.as_ref().map(|s| s.path.display().to_string()),
            "target": target,
            "protocol": match t.protocol {
                ProtocolChoice::Auto => "auto",
                ProtocolChoice::Pinned(r) => r.as_str(),
            },
            "load": {
                "model": match self.model { Model::Closed => "closed", Model::Open => "open" },
                "levels": self.levels,
                "duration_s": l.duration.as_secs_f64(),
                "warmup_s": l.warmup.as_secs_f64(),
                "timeout_s": l.timeout.as_secs_f64(),
                "think_time_s": l.think_time.as_secs_f64(),
                "spacing": match l.spacing { Spacing::Constant => "constant", Spacing::Poisson => "poisson" },
                "max_in_flight": l.max_in_flight,
                "stop_on_failure": self.stop_on_failure,
            },
            "mix": mix.ops().iter().map(|o| o.label.clone()).collect::<Vec<_>>(),
            "batch": self.batch.as_ref().map(|b| json!({"size": b.size, "notifications": b.notifications, "force": b.force})),
            "criteria": {
                "error_rate": self.criteria.max_error_rate,
                "p99_ms": self.criteria.p99_slo_ms,
                "fail_on_anomaly": self.criteria.fail_on_anomaly,
            },
            "thresholds": self.threshold_texts,
            "seed": self.seed,
        });
        (settings, redact)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
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
}

/// Runs the plan to its end (or to Ctrl-C / SIGTERM via `cancel`). A run that fails before
/// its first step leaves no empty folder behind (a stdio child's stderr log is kept).
pub async fn execute(plan: Plan, cancel: CancellationToken) -> Result<Outcome, RunError> {
    let dir = plan.dir.clone();
    let result = run_plan(plan, cancel).await;
    if result.is_err() {
        let _ = std::fs::remove_dir(&dir); // only succeeds when empty
    }
    result
}

async fn run_plan(plan: Plan, cancel: CancellationToken) -> Result<Outcome, RunError> {
    let progress = Progress::new(plan.quiet);
    let mut builtin = None;
    let t = &plan.target;
    let mcp_target = if let Some(cfg) = &t.builtin {
        let running = server::start_http(cfg.clone()).await.map_err(|e| match e {
            server::ServeError::Config(_) => {
                PlanError::Usage(format!("field `target.builtin`: {e}")).into()
            }
            other => RunError::Failed(format!("starting the built-in target: {other}")),
        })?;
        let url = running.url();
        builtin = Some(running);
        Endpoint::http(url, Vec::new())
    } else if let Some(url) = &t.url {
        let headers = t.headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        Endpoint::http(url.clone(), headers)
    } else {
        let cmd = t.stdio.as_deref().unwrap_or_default();
        let mut o = StdioOptions::from_command_line(cmd)
            .map_err(|e| PlanError::Usage(format!("stdio command: {e}")))?;
        o.env = t.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        o.cwd = t.cwd.as_ref().map(|c| plan.base.join(c));
        o.stderr = Some(plan.dir.join(report::TARGET_STDERR));
        Endpoint::Stdio(o)
    };
    let max_level = plan.levels.iter().cloned().fold(1.0, f64::max);
    let batch_size = plan.batch.as_ref().map_or(1, |b| b.size);
    let pool = match plan.model {
        Model::Closed => max_level as usize,
        Model::Open => plan.load.max_in_flight,
    }
    .clamp(1, 4096);
    // Over HTTP the workers split the pool: each needs a connection of its own.
    let workers = match &plan.target.stdio {
        Some(_) => 1,
        None => plan
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .min(pool),
    }
    .clamp(1, 64);
    let opts = ConnectOptions {
        protocol: t.protocol,
        pool_size: pool,
        transports: workers,
        list_tools: true,
        ..ConnectOptions::default()
    };
    std::fs::create_dir_all(&plan.dir)
        .map_err(|e| RunError::Failed(format!("cannot create {}: {e}", plan.dir.display())))?;
    let connector =
        Connector::new(mcp_target, opts).map_err(|e| PlanError::Usage(e.to_string()))?;
    let connected = connector.connect().await.map_err(|e| {
        RunError::Failed(format!(
            "connecting to {}: {e}",
            connector.target().describe()
        ))
    })?;
    let server = connected.server;
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
    let ops = if plan.mix.is_empty() {
        default_mix()
    } else {
        plan.mix.clone()
    };
    let mix = Mix::new(&ops, &server, &plan.base).map_err(PlanError::Usage)?;
    let (settings, redact) = plan.settings(&mix);
    let mut spec = RunSpec::new(plan.dir.clone(), &plan.name);
    spec.settings = settings;
    spec.redact = redact;
    spec.criteria = plan.criteria.clone();
    spec.profile = plan.source.as_ref().map(|s| ProfileCopy {
        source: s.path.display().to_string(),
        text: s.text.clone(),
    });
    let mut transports = vec![connected.transport];
    for _ in 1..workers {
        let t = connector
            .attach(&server)
            .await
            .map_err(|e| RunError::Failed(format!("opening another connection: {e}")))?;
        transports.push(t);
    }
    let l = &plan.load;
    let work = Arc::new(Workload {
        model: plan.model,
        mix,
        batch: plan
            .batch
            .as_ref()
            .map(|b| BatchShape::new(b.size, b.notifications)),
        duration: l.duration,
        warmup: l.warmup,
        timeout: l.timeout,
        think_time: l.think_time,
        spacing: l.spacing,
        max_in_flight: l.max_in_flight.max(batch_size),
        seed: plan.seed,
    });
    let mut folder = RunFolder::create(spec)?;
    folder.set_protocol_revision(server.revision.as_str())?;
    let swept = engine::sweep(
        work,
        &plan.levels,
        transports,
        &mut folder,
        plan.stop_on_failure,
        cancel,
        &progress,
    )
    .await;
    if let Some(b) = builtin {
        b.shutdown().await;
    }
    let color = report::use_color(&std::io::stdout());
    let (end, mut transports) = match swept {
        Ok(done) => done,
        Err(e) => {
            // The folder could not be written (disk full, removed): say so in it if possible.
            let _ = folder.finish(RunEnd::Aborted(e.to_string()), &plan.thresholds, color);
            return Err(e.into());
        }
    };
    engine::close_all(&mut transports).await;
    let interrupted = end == SweepEnd::Interrupted;
    let aborted = match &end {
        SweepEnd::Aborted(why) => Some(why.clone()),
        _ => None,
    };
    let run_end = match end {
        SweepEnd::Complete => RunEnd::Complete,
        SweepEnd::Interrupted => RunEnd::Interrupted,
        SweepEnd::Aborted(why) => RunEnd::Aborted(why),
    };
    let done = folder.finish(run_end, &plan.thresholds, color)?;
    let failed_gates = done
        .summary
        .gates
        .iter()
        .filter(|g| !g.holds)
        .map(|g| g.threshold.to_string())
        .collect();
    Ok(Outcome {
        dir: done.dir,
        interrupted,
        aborted,
        failed_gates,
        terminal: done.terminal,
    })
}
