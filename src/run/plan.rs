//! A run's plan: a profile (or flags alone) with the command line's overrides merged in, one
//! concern at a time (target, mix, load, criteria and gates, the run folder), and the run's
//! settings as summary.json records them.

use crate::analysis::{StopCriteria, Thresholds};
use crate::auth::{ClientAuth, JwtKey, OAuthConfig};
use crate::client::{ProtocolChoice, ServerInfo, expand_env};
use crate::correlator::{ToolErrors, ValidateOutput};
use crate::engine::{Segment, Sweep};
use crate::load::mix::Mix;
use crate::metrics::Model;
use crate::profile::{
    AuthMethod, AuthSpec, Batch, Criteria, InputAnswers, Levels, Load, LoadModel, Method,
    OAuthSpec, Op, ProcessMode, Profile, ProfileError, PrometheusOutput, Source, Spacing,
    TargetSpec, TaskMode, TlsSpec,
};
use crate::report::remote_write::RemoteWriteConfig;
use crate::report::{self, ProfileCopy, RunSpec, Secrets};
use crate::server::ServeConfig;
use crate::transport::{Credentials, StdioOptions, TlsOptions};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The target the command line names in place of the profile's kind of target.
#[derive(Clone, Debug)]
pub enum TargetFlag {
    Url(String),
    Stdio(String),
    Builtin,
}

/// The load levels the command line gives in place of the profile's.
#[derive(Clone, Debug)]
pub enum LevelsFlag {
    /// Closed loop: virtual clients per step.
    Concurrency(Levels),
    /// Open loop: arrivals per second per step.
    Rate(Levels),
}

/// What the command line adds to (or puts in place of) a profile. Every value is already
/// checked on its own (the command line's parsers do that); the plan checks how they combine
/// with the profile.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub target: Option<TargetFlag>,
    /// `(name, value)`; `${VAR}` in the value expands from the environment.
    pub headers: Vec<(String, String)>,
    pub protocol: Option<ProtocolChoice>,
    pub transport: Option<crate::client::TransportChoice>,
    /// Every HTTP 400 to a request that carried the session id says the session is gone.
    pub session_lost_on_400: bool,
    /// Authorization in place of the profile's `[target.auth]`.
    pub auth: Option<AuthSpec>,
    /// One token per virtual user, with the flags' or the profile's OAuth credentials.
    pub token_per_user: bool,
    /// stdio: a child per virtual user's session (`target.process = "per_user"`).
    pub process_per_user: bool,
    pub session_calls: Option<u64>,
    pub session_duration: Option<Duration>,
    /// Bytes, at least 1.
    pub fleet_memory_budget: Option<usize>,
    /// `KEY=VALUE` added to (or replacing in) `target.env`.
    pub child_env: Vec<(String, String)>,
    /// In place of `target.cwd`.
    pub child_cwd: Option<PathBuf>,
    /// TLS settings over the profile's `[target.tls]` (each given one replaces its key;
    /// `insecure` adds).
    pub tls: TlsSpec,
    /// Knobs of the built-in target, `KEY=VALUE` as in `[target.builtin]` (the value in TOML
    /// syntax, or a bare word).
    pub builtin_knobs: Vec<(String, String)>,
    /// Replace the mix with `tools/call` of this tool, with these arguments.
    pub tool: Option<(String, Option<Map<String, Value>>)>,
    pub levels: Option<LevelsFlag>,
    pub duration: Option<Duration>,
    pub warmup: Option<Duration>,
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    pub think_time: Option<Duration>,
    pub max_in_flight: Option<usize>,
    /// Bytes, at least 1.
    pub max_answer_memory: Option<usize>,
    pub spacing: Option<Spacing>,
    pub send_window: Option<Duration>,
    pub server_pid: Option<u32>,
    pub server_metrics: Option<String>,
    pub server_cgroup: Option<PathBuf>,
    pub server_metric: Vec<(String, String)>,
    pub cooldown: Option<Duration>,
    pub leak_min_window: Option<Duration>,
    pub batch_size: Option<NonZeroUsize>,
    pub batch_notifications: Option<usize>,
    pub force_batch: bool,
    pub out: Option<PathBuf>,
    pub results: Option<PathBuf>,
    pub name: Option<String>,
    /// Gates as written (each one parses).
    pub thresholds: Vec<String>,
    /// Between 0 and 1.
    pub error_rate: Option<f64>,
    pub p99_slo_ms: Option<f64>,
    pub fail_on_anomaly: bool,
    /// `--tool-errors`: how a result with `isError: true` counts.
    pub tool_errors: Option<ToolErrors>,
    /// `--validate-output`: how results are checked against their tool's `outputSchema`.
    pub validate_output: Option<ValidateOutput>,
    /// Go on after a failed step.
    pub keep_going: bool,
    pub workers: Option<usize>,
    pub seed: Option<u64>,
    pub quiet: bool,
    /// This instance's segment of a split run (checked: `run::segment_from`).
    pub segment: Segment,
    /// The common start of every segment's first step.
    pub start_at: Option<SystemTime>,
    /// `--prometheus-remote-write URL`: in place of `output.prometheus.url`.
    pub prometheus_remote_write: Option<String>,
    /// `--metrics-listen ADDR`: serve the live series as an OpenMetrics page there.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// Why a run could not start: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("{0}")]
    Usage(String),
}

/// A run ready to go.
#[derive(Debug)]
pub struct Plan {
    pub(super) name: String,
    pub(super) source: Option<Source>,
    /// The profile's folder, for relative paths (CSV files, stdio `cwd`).
    pub(super) base: PathBuf,
    pub(super) target: TargetSpec,
    /// The `[target.builtin]` table as written, for the settings record.
    builtin_raw: Value,
    pub(super) mix: Vec<Op>,
    /// The profile's scenarios, checked; with them, mix entries are one-step scenarios.
    pub(super) scenarios: Vec<crate::profile::Scenario>,
    /// Canned answers to input-required rounds (`[input]`).
    pub(super) input: Option<InputAnswers>,
    pub(super) model: Model,
    pub(super) load: Load,
    pub(super) batch: Option<Batch>,
    /// The levels, the stop criteria and whether a failed step ends the sweep.
    pub(super) sweep: Sweep,
    pub(super) thresholds: Thresholds,
    threshold_texts: Vec<String>,
    pub(super) dir: PathBuf,
    pub(super) workers: Option<usize>,
    pub(super) seed: u64,
    pub(super) quiet: bool,
    pub(super) segment: Segment,
    /// Live metrics by Prometheus remote write, when asked for.
    pub(super) remote_write: Option<RemoteWriteConfig>,
    /// Where the live metrics' OpenMetrics page is served, when asked for.
    pub(super) metrics_listen: Option<std::net::SocketAddr>,
    /// How results are read: tool errors, output schemas (the profile's, or their flags).
    pub(super) answers: AnswerSettings,
}

/// `criteria.tool_errors` and `criteria.validate_output`, each replaced by its flag.
#[derive(Clone, Copy, Debug)]
pub(super) struct AnswerSettings {
    pub tool_errors: ToolErrors,
    pub validate_output: ValidateOutput,
}

/// Merges a profile (if any) and the overrides into a plan; every mistake is a [`PlanError`].
pub fn plan(profile: Option<&Path>, o: Overrides) -> Result<Plan, PlanError> {
    let (source, mut p) = match profile {
        Some(path) => {
            let s = Source::read(path)?;
            let p = s.parse()?;
            (Some(s), p)
        }
        None => (None, flags_only_profile()),
    };
    let mut builtin_raw = source
        .as_ref()
        .and_then(|s| s.text.parse::<toml::Table>().ok())
        .and_then(|t| t.get("target")?.get("builtin").cloned())
        .map(|b| serde_json::to_value(b).unwrap_or(Value::Null))
        .unwrap_or_else(|| json!({}));
    let target = p.target.get_mut();
    if override_target(target, &o) {
        builtin_raw = json!({});
    }
    set_builtin_knobs(target, &mut builtin_raw, &o.builtin_knobs)?;
    check_auth(target)?;
    if target.builtin.is_none() && target.url.is_none() && target.stdio.is_none() {
        return Err(PlanError::Usage(
            "no target: give a profile, or --url URL, --stdio \"COMMAND ARGS\" or --builtin".into(),
        ));
    }
    let mix = match &o.tool {
        Some((tool, args)) => vec![tool_call(tool, args.clone())],
        None if p.mix.is_empty() && p.scenarios.is_empty() => default_mix(),
        None => p.mix.into_iter().map(|m| m.into_inner()).collect(),
    };
    override_load(&mut p.load, &o);
    let (model, levels) = levels(&p.load)?;
    let remote_write = remote_write(
        p.output.prometheus.take(),
        o.prometheus_remote_write.as_deref(),
    )?;
    if model == Model::Open
        && p.target
            .get_ref()
            .auth
            .as_ref()
            .is_some_and(|a| a.token_per_user)
    {
        return Err(PlanError::Usage(
            "target.auth.token_per_user: one token per virtual user needs a closed loop \
             (`load.concurrency` or --concurrency); an open loop has arrivals, not users"
                .into(),
        ));
    }
    check_process(p.target.get_ref(), model)?;
    let batch = batch(p.batch.map(|b| b.into_inner()), &o);
    let criteria = criteria(&p.criteria, &o);
    let answers = AnswerSettings {
        tool_errors: o.tool_errors.unwrap_or(p.criteria.tool_errors),
        validate_output: o.validate_output.unwrap_or(p.criteria.validate_output),
    };
    let mut threshold_texts: Vec<String> =
        p.thresholds.iter().map(|t| t.get_ref().clone()).collect();
    threshold_texts.extend(o.thresholds.iter().cloned());
    let thresholds =
        Thresholds::parse(&threshold_texts).map_err(|e| PlanError::Usage(e.to_string()))?;
    let name = o
        .name
        .or(p.name.clone())
        .or_else(|| {
            profile
                .and_then(|f| f.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| target_name(p.target.get_ref()));
    let dir = o.out.unwrap_or_else(|| {
        report::default_run_dir(
            o.results.as_deref().unwrap_or(Path::new("results")),
            &name,
            SystemTime::now(),
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
        mix,
        // `--tool` replaces the whole workload, scenarios included.
        scenarios: if o.tool.is_some() {
            Vec::new()
        } else {
            std::mem::take(&mut p.scenarios)
        },
        input: p.input.map(toml::Spanned::into_inner),
        model,
        sweep: Sweep {
            levels,
            criteria,
            // A segment judges only its share: every segment runs the whole schedule and the
            // merge judges the whole (docs/results.md, "Segments").
            stop_on_failure: p.load.stop_on_failure && !o.keep_going && !o.segment.is_split(),
            start_at: o.start_at,
        },
        load: p.load,
        batch,
        thresholds,
        threshold_texts,
        answers,
        dir,
        workers: o.workers,
        seed: o.seed.unwrap_or(0x006d_6370_6c6f_6164),
        quiet: o.quiet,
        segment: o.segment,
        remote_write,
        metrics_listen: o.metrics_listen,
    })
}

/// `mcpload profile check`: the profile read and checked as `run` does before it connects
/// (the built-in target's knobs checked as starting it would), with no flags; an unset
/// `*_env` variable is no error here (`run` reads them as it connects).
pub fn check(profile: &Path) -> Result<Plan, PlanError> {
    let plan = plan(Some(profile), Overrides::default())?;
    if let Some(cfg) = &plan.target.builtin {
        cfg.validate().map_err(builtin_error)?;
    }
    Ok(plan)
}

/// The built-in target's knobs cannot run.
pub(super) fn builtin_error(e: impl std::fmt::Display) -> PlanError {
    PlanError::Usage(format!("field `target.builtin`: {e}"))
}

/// `[output.prometheus]` with `--prometheus-remote-write` in place of its URL: the pusher's
/// settings, checked (a profile's own were checked where it was parsed).
fn remote_write(
    output: Option<PrometheusOutput>,
    flag: Option<&str>,
) -> Result<Option<RemoteWriteConfig>, PlanError> {
    let mut out = match (output, flag) {
        (None, None) => return Ok(None),
        (out, _) => out.unwrap_or_default(),
    };
    if let Some(url) = flag {
        out.url = Some(url.to_owned());
    }
    out.check().map_err(|(_, message)| {
        PlanError::Usage(
            message.replace("field `output.prometheus.url`", "--prometheus-remote-write"),
        )
    })?;
    let mut c = RemoteWriteConfig::new(out.url.unwrap_or_default());
    c.labels = out.labels;
    c.interval = out.interval.unwrap_or(c.interval);
    c.timeout = out.timeout.unwrap_or(c.timeout);
    c.backlog = out.backlog.unwrap_or(c.backlog);
    c.retries = out.retries.unwrap_or(c.retries);
    Ok(Some(c))
}

/// The target: a flag replaces the kind of target (headers, env, cwd and protocol stay);
/// headers add up, the protocol is replaced. Whether the kind was replaced.
fn override_target(target: &mut TargetSpec, o: &Overrides) -> bool {
    if let Some(flag) = &o.target {
        target.builtin = matches!(flag, TargetFlag::Builtin).then(ServeConfig::default);
        target.url = match flag {
            TargetFlag::Url(url) => Some(url.clone()),
            _ => None,
        };
        target.stdio = match flag {
            TargetFlag::Stdio(cmd) => Some(cmd.clone()),
            _ => None,
        };
    }
    for (name, value) in &o.headers {
        target.headers.insert(name.clone(), value.clone());
    }
    if let Some(pr) = o.protocol {
        target.protocol = pr;
    }
    if let Some(tr) = o.transport {
        target.transport = tr;
    }
    target.session_lost_on_400 |= o.session_lost_on_400;
    if o.process_per_user {
        target.process = ProcessMode::PerUser;
    }
    target.session_calls = o.session_calls.or(target.session_calls);
    target.session_duration = o.session_duration.or(target.session_duration);
    target.fleet_memory_budget = o.fleet_memory_budget.or(target.fleet_memory_budget);
    target.env.extend(o.child_env.iter().cloned());
    if let Some(dir) = &o.child_cwd {
        target.cwd = Some(dir.clone());
    }
    let w = &mut target.watch;
    w.pid = o.server_pid.or(w.pid);
    w.metrics = o.server_metrics.clone().or(w.metrics.take());
    w.cgroup = o.server_cgroup.clone().or(w.cgroup.take());
    w.metric.extend(o.server_metric.iter().cloned());
    if let Some(auth) = &o.auth {
        target.auth = Some(auth.clone());
    }
    if o.token_per_user {
        target
            .auth
            .get_or_insert_with(AuthSpec::default)
            .token_per_user = true;
    }
    let tls = &mut target.tls;
    for (flag, key) in [
        (&o.tls.cacert, &mut tls.cacert),
        (&o.tls.client_cert, &mut tls.client_cert),
        (&o.tls.client_key, &mut tls.client_key),
    ] {
        if let Some(path) = flag {
            *key = Some(path.clone());
        }
    }
    tls.insecure |= o.tls.insecure;
    o.target.is_some()
}

/// A process per session: for a stdio target, in a closed loop (a child per virtual user);
/// the session bounds only with it.
fn check_process(t: &TargetSpec, model: Model) -> Result<(), PlanError> {
    let usage = |m: &str| Err(PlanError::Usage(m.into()));
    if t.process == ProcessMode::Shared {
        if t.session_calls.is_some() || t.session_duration.is_some() {
            return usage(
                "target.session_calls / session_duration end a child's session: they need `target.process = \"per_user\"` (or --process-per-user)",
            );
        }
        if t.fleet_memory_budget.is_some() {
            return usage(
                "target.fleet_memory_budget bounds a fleet of children: it needs `target.process = \"per_user\"` (or --process-per-user)",
            );
        }
        return Ok(());
    }
    if t.stdio.is_none() {
        return usage(
            "target.process = \"per_user\" (--process-per-user) starts a child per virtual user: it needs a stdio target (`target.stdio` or --stdio)",
        );
    }
    if model == Model::Open {
        return usage(
            "target.process = \"per_user\" (--process-per-user) needs a closed loop (`load.concurrency` or --concurrency): an open loop has arrivals, not users",
        );
    }
    if t.session_calls == Some(0) {
        return usage("target.session_calls: at least 1 call a session");
    }
    if t.session_duration.is_some_and(|d| d.is_zero()) {
        return usage("target.session_duration: longer than 0 s");
    }
    Ok(())
}

/// The authorization and TLS settings as the flags left them: sound, and for an HTTP target.
fn check_auth(t: &TargetSpec) -> Result<(), PlanError> {
    let usage = |m: String| Err(PlanError::Usage(m));
    if let Some(auth) = &t.auth {
        if t.stdio.is_some() {
            return usage("authorization is for HTTP targets, not stdio".into());
        }
        if let Some((field, why)) = auth.problem() {
            return usage(format!("target.auth.{field}: {why}"));
        }
        if t.headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"))
        {
            return usage(
                "an Authorization header and [target.auth] (or --bearer-env / --oauth-*) \
                 both set the credentials: give one"
                    .into(),
            );
        }
    }
    if t.tls.client_cert.is_some() != t.tls.client_key.is_some() {
        return usage("--client-cert and --client-key go together".into());
    }
    Ok(())
}

/// `--builtin-knob KEY=VALUE`: each sets a key of `[target.builtin]` (the value read as TOML,
/// else as a string), and the table is read again.
fn set_builtin_knobs(
    target: &mut TargetSpec,
    raw: &mut Value,
    knobs: &[(String, String)],
) -> Result<(), PlanError> {
    if knobs.is_empty() {
        return Ok(());
    }
    if target.builtin.is_none() {
        return Err(PlanError::Usage(
            "--builtin-knob: the target is not the built-in one (--builtin or [target.builtin])"
                .into(),
        ));
    }
    let mut table: toml::Table = serde_json::from_value(raw.clone()).unwrap_or_default();
    for (key, value) in knobs {
        table.insert(key.clone(), builtin_knob_value(value));
    }
    let cfg = ServeConfig::deserialize(toml::Value::Table(table.clone()))
        .map_err(|e| PlanError::Usage(format!("--builtin-knob: {e}")))?;
    target.builtin = Some(cfg);
    *raw = serde_json::to_value(&table).unwrap_or(Value::Null);
    Ok(())
}

/// The value of a `--builtin-knob KEY=VALUE`: read as TOML (`3`, `true`, `[1, 2]`), else
/// taken as a string (`sticky`).
pub fn builtin_knob_value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_owned()))
}

/// A mix of one operation: `tools/call` of `tool`.
fn tool_call(tool: &str, args: Option<Map<String, Value>>) -> Op {
    Op {
        name: None,
        method: Method::ToolsCall,
        weight: 1,
        tool: Some(tool.to_owned()),
        args,
        uri: None,
        prompt: None,
        csv: None,
        task: TaskMode::Off,
        poll_interval: None,
        task_ttl: None,
        task_timeout: None,
        task_confirm: false,
        progress: false,
        timeout: None,
    }
}

/// The load: levels (which set the model), durations, spacing, in-flight limit.
fn override_load(l: &mut Load, o: &Overrides) {
    match &o.levels {
        Some(LevelsFlag::Concurrency(c)) => {
            l.concurrency = Some(toml::Spanned::new(0..0, c.clone()));
            l.rate = None;
            l.model = Some(LoadModel::Closed);
        }
        Some(LevelsFlag::Rate(r)) => {
            l.rate = Some(toml::Spanned::new(0..0, r.clone()));
            l.concurrency = None;
            l.model = Some(LoadModel::Open);
        }
        None => {}
    }
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = o.$f { l.$f = v; } )* };
    }
    set!(
        duration,
        warmup,
        timeout,
        connect_timeout,
        think_time,
        max_in_flight,
        max_answer_memory,
        spacing,
        send_window,
        cooldown,
        leak_min_window
    );
}

/// The load model and the level of every step.
fn levels(l: &Load) -> Result<(Model, Vec<f64>), PlanError> {
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
            .ok_or_else(|| {
                PlanError::Usage("an open-loop load needs rates: `load.rate` or --rate".into())
            })?,
    };
    if l.send_window > crate::engine::MAX_SEND_WINDOW {
        return Err(PlanError::Usage(format!(
            "load.send_window / --send-window {:?} is longer than {:?}: arrivals would leave \
             up to that much early, in bunches, another load than the one asked for (try 1ms)",
            l.send_window,
            crate::engine::MAX_SEND_WINDOW
        )));
    }
    if model == Model::Closed && levels.iter().any(|c| c.fract() != 0.0) {
        return Err(PlanError::Usage(
            "concurrency levels must be whole numbers".into(),
        ));
    }
    Ok((model, levels))
}

/// Batches: `--batch-size` starts them (or resizes the profile's); the other flags adjust.
fn batch(mut batch: Option<Batch>, o: &Overrides) -> Option<Batch> {
    if let Some(size) = o.batch_size {
        let b = batch.get_or_insert(Batch {
            size: size.get(),
            notifications: 0,
            force: false,
        });
        b.size = size.get();
    }
    if let Some(b) = batch.as_mut() {
        b.notifications = o.batch_notifications.unwrap_or(b.notifications);
        b.force |= o.force_batch;
    }
    batch
}

/// The stop criteria: the profile's, each replaced by its flag when given.
fn criteria(c: &Criteria, o: &Overrides) -> StopCriteria {
    StopCriteria {
        max_error_rate: o.error_rate.unwrap_or(c.error_rate),
        p99_slo_ms: o.p99_slo_ms.or(c.p99_ms),
        fail_on_anomaly: c.fail_on_anomaly || o.fail_on_anomaly,
    }
}

/// A run name from the target alone: `builtin`, the URL's `host-port` (never its userinfo),
/// or the program's name.
fn target_name(t: &TargetSpec) -> String {
    if let Some(url) = &t.url {
        return report::url_host(url).unwrap_or("http").replace(':', "-");
    }
    if let Some(cmd) = &t.stdio {
        let program = StdioOptions::from_command_line(cmd).map(|o| o.program);
        return program
            .ok()
            .and_then(|p| Some(Path::new(&p).file_name()?.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "stdio".into());
    }
    "builtin".into()
}

/// The profile a run with flags alone starts from: echo against whatever target the flags name.
fn flags_only_profile() -> Profile {
    Profile {
        schema: None,
        name: None,
        description: None,
        target: toml::Spanned::new(0..0, TargetSpec::default()),
        load: Load::default(),
        mix: Vec::new(),
        scenario_tables: Vec::new(),
        scenarios: Vec::new(),
        batch: None,
        input: None,
        criteria: Criteria::default(),
        thresholds: Vec::new(),
        races_table: None,
        races: None,
        output: Default::default(),
    }
}

/// The default mix: `tools/call echo {"message": "hi"}`.
fn default_mix() -> Vec<Op> {
    let mut args = Map::new();
    args.insert("message".into(), "hi".into());
    vec![tool_call("echo", Some(args))]
}

impl Plan {
    /// The run folder the plan writes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The most requests one unit of load has in flight at once: a scenario iteration's
    /// widest parallel step; 2 for a call that may run as a task (its `tasks/result` stream
    /// open while the answer to the server's request for input, or the task's cancel, goes
    /// out); else 1.
    pub(super) fn widest_step(&self) -> usize {
        let task_calls = self.mix.iter().any(|op| op.task != TaskMode::Off);
        let calls = if task_calls { 2 } else { 1 };
        self.scenarios
            .iter()
            .flat_map(|s| &s.steps)
            .map(|st| match &st.kind {
                crate::profile::StepKind::Parallel(members) => {
                    members.iter().map(|m| m.copies as usize).sum()
                }
                _ => 1,
            })
            .fold(calls, usize::max)
    }

    /// What the run folder is created with: the settings (header values redacted), the
    /// criteria and the profile as it was read.
    pub(super) fn run_spec(&self, mix: &Mix, server: &ServerInfo) -> RunSpec {
        let t = &self.target;
        let target = if let Some(url) = &t.url {
            json!({"url": url, "headers": t.headers, "auth": auth_settings(t), "tls": tls_settings(&t.tls)})
        } else if t.auth.is_some() {
            json!({"builtin": self.builtin_raw, "auth": auth_settings(t)})
        } else if let Some(cmd) = &t.stdio {
            json!({
                "stdio": cmd,
                "env": t.env.keys().collect::<Vec<_>>(),
                "cwd": t.cwd,
                "process": t.process,
                "session_calls": t.session_calls,
                "session_duration_s": t.session_duration.map(|d| d.as_secs_f64()),
                "fleet_memory_budget_bytes": t.fleet_memory_budget,
            })
        } else {
            json!({"builtin": self.builtin_raw})
        };
        let mut target = target;
        let w = &t.watch;
        target["watch"] =
            json!({"pid": w.pid, "metrics": w.metrics, "cgroup": w.cgroup, "metric": w.metric});
        let l = &self.load;
        let c = &self.sweep.criteria;
        let mut spec = RunSpec::new(self.dir.clone(), &self.name);
        spec.settings = json!({
            "name": self.name,
            "profile": self.source.as_ref().map(|s| s.path.display().to_string()),
            "target": target,
            "protocol": t.protocol.to_string(),
            "transport": server.transport.as_str(),
            "session_lost_on_400": t.session_lost_on_400,
            "protocol_agreed": {
                "revision": server.revision.as_str(),
                "detection": server.detection,
                "tried": server.negotiation,
            },
            "load": {
                "model": self.model,
                "levels": self.sweep.levels,
                "duration_s": l.duration.as_secs_f64(),
                "warmup_s": l.warmup.as_secs_f64(),
                "timeout_s": l.timeout.as_secs_f64(),
                "connect_timeout_s": l.connect_timeout.as_secs_f64(),
                "think_time_s": l.think_time.as_secs_f64(),
                "spacing": l.spacing,
                "send_window_s": l.send_window.as_secs_f64(),
                "max_in_flight": l.max_in_flight,
                "max_answer_memory": l.max_answer_memory,
                "stop_on_failure": self.sweep.stop_on_failure,
                "cooldown_s": l.cooldown.as_secs_f64(),
                "leak_min_window_s": l.leak_min_window.as_secs_f64(),
            },
            "ops": mix.names(),
            "skipped_tools": mix.skipped(),
            "batch": self.batch.as_ref().map(|b| json!({"size": b.size, "notifications": b.notifications, "force": b.force})),
            "criteria": {
                "error_rate": c.max_error_rate,
                "p99_ms": c.p99_slo_ms,
                "fail_on_anomaly": c.fail_on_anomaly,
                "tool_errors": self.answers.tool_errors,
                "validate_output": self.answers.validate_output,
            },
            "thresholds": self.threshold_texts,
            "seed": self.seed,
            "segment": self.segment.is_split().then_some(self.segment),
            "start_at": self.sweep.start_at.map(super::segment::rfc3339),
        });
        spec.redact = t
            .headers
            .keys()
            .map(|k| {
                format!(
                    "/target/headers/{}",
                    k.replace('~', "~0").replace('/', "~1")
                )
            })
            .collect();
        spec.criteria = c.clone();
        spec.profile = self.source.as_ref().map(|s| ProfileCopy {
            source: s.path.display().to_string(),
            text: redacted_profile(&s.text),
        });
        spec
    }

    /// How `https://` targets (and token endpoints) are trusted; paths relative to the
    /// profile.
    pub(super) fn tls_options(&self) -> TlsOptions {
        let t = &self.target.tls;
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| self.base.join(p));
        TlsOptions {
            cacert: path(&t.cacert),
            client_cert: path(&t.client_cert),
            client_key: path(&t.client_key),
            insecure: t.insecure,
        }
    }

    /// The credentials requests to `url` carry, from the environment (a variable not set is
    /// a usage error).
    pub(super) fn credentials(&self, url: &str) -> Result<Option<Credentials>, PlanError> {
        let Some(a) = &self.target.auth else {
            return Ok(None);
        };
        let env = |field: &str, var: &str| {
            std::env::var(var).map_err(|_| {
                PlanError::Usage(format!(
                    "target.auth.{field}: the environment variable {var} is not set"
                ))
            })
        };
        if let Some(var) = &a.bearer_env {
            let token = env("bearer_env", var)?;
            return Credentials::fixed(token.trim())
                .map(Some)
                .map_err(|e| PlanError::Usage(format!("target.auth.bearer_env: {e}")));
        }
        let Some(o) = &a.oauth else {
            return Ok(None);
        };
        if o.is_authorization_code() {
            return self.stored_login(url, o).map(Some);
        }
        let client_id = match (&o.client_id, &o.client_id_env) {
            (Some(id), _) => id.clone(),
            (None, Some(var)) => env("oauth.client_id_env", var)?,
            (None, None) => return Err(PlanError::Usage("target.auth.oauth: no client id".into())),
        };
        let secret = || match &o.client_secret_env {
            Some(var) => env("oauth.client_secret_env", var),
            None => Err(PlanError::Usage(
                "target.auth.oauth: no client_secret_env".into(),
            )),
        };
        let auth = match o.auth_method {
            AuthMethod::Basic => ClientAuth::Basic(secret()?),
            AuthMethod::Post => ClientAuth::Post(secret()?),
            AuthMethod::PrivateKeyJwt => {
                let file = o.private_key_file.as_ref().map(|f| self.base.join(f));
                let key = JwtKey::from_pem_file(
                    file.as_deref().unwrap_or(Path::new("")),
                    o.key_alg.as_deref(),
                    o.key_id.clone(),
                )
                .map_err(|e| {
                    PlanError::Usage(format!("target.auth.oauth.private_key_file: {e}"))
                })?;
                ClientAuth::PrivateKeyJwt(std::sync::Arc::new(key))
            }
        };
        let config = OAuthConfig {
            client_id,
            auth,
            scope: o.scope.clone(),
            token_endpoint: o.token_endpoint.clone(),
            jwt_audience: o.jwt_audience,
            resource: url.to_owned(),
            tls: self.tls_options(),
            connect_timeout: self.load.connect_timeout,
            timeout: TOKEN_REQUEST_LIMIT,
        };
        Ok(Some(crate::auth::credentials(config, a.token_per_user)))
    }

    /// `grant = "authorization_code"`: the credentials of the stored login to `url` (`mcpload
    /// auth login`), refreshed with its refresh token.
    fn stored_login(&self, url: &str, o: &OAuthSpec) -> Result<Credentials, PlanError> {
        let env = |field: &str, var: &str| {
            std::env::var(var).map_err(|_| {
                PlanError::Usage(format!(
                    "target.auth.oauth.{field}: the environment variable {var} is not set"
                ))
            })
        };
        let client_id = match (&o.client_id, &o.client_id_env) {
            (Some(id), _) => Some(id.clone()),
            (None, Some(var)) => Some(env("client_id_env", var)?),
            (None, None) => None,
        };
        let secret = o
            .client_secret_env
            .as_ref()
            .map(|var| env("client_secret_env", var))
            .transpose()?;
        let store = crate::auth::store::Store::open().map_err(PlanError::Usage)?;
        let entry = store
            .find(url, client_id.as_deref())
            .map_err(PlanError::Usage)?
            .ok_or_else(|| {
                PlanError::Usage(format!(
                    "target.auth.oauth: no stored login to {url}{} in {}: log in first with \
                     `mcpload auth login {url}`",
                    client_id
                        .as_ref()
                        .map(|c| format!(" as client {c}"))
                        .unwrap_or_default(),
                    store.path().display()
                ))
            })?;
        let net = crate::auth::Net {
            tls: self.tls_options(),
            connect_timeout: self.load.connect_timeout,
            timeout: TOKEN_REQUEST_LIMIT,
        };
        Ok(crate::auth::refresh::credentials(
            entry,
            store,
            secret,
            net,
            o.login_follow_redirects,
        ))
    }

    /// Each virtual user carries a token of its own.
    /// stdio: a child per virtual user's session.
    pub(super) fn process_per_user(&self) -> bool {
        self.target.process == ProcessMode::PerUser
    }

    pub(super) fn token_per_user(&self) -> bool {
        self.target.auth.as_ref().is_some_and(|a| a.token_per_user)
    }

    /// TLS certificates are not checked (`insecure`).
    pub(super) fn insecure(&self) -> bool {
        self.target.tls.insecure
    }

    /// The run's secret values, to scrub out of its error messages: header values (as written
    /// and expanded), environment values, the URL's userinfo and query values, the values of
    /// the variables that hold credentials.
    pub(super) fn secrets(&self) -> Secrets {
        let t = &self.target;
        let mut secrets = Secrets::default();
        if let Some(a) = &t.auth {
            let o = a.oauth.as_ref();
            let vars = [
                a.bearer_env.as_ref(),
                o.and_then(|o| o.client_secret_env.as_ref()),
            ];
            for var in vars.into_iter().flatten() {
                if let Ok(v) = std::env::var(var) {
                    secrets.add(&v);
                }
            }
        }
        for value in t.headers.values() {
            secrets.add(value);
            if let Ok(expanded) = expand_env(value, |var| std::env::var(var).ok()) {
                secrets.add(&expanded);
            }
        }
        t.env.values().for_each(|v| secrets.add(v));
        if let Some(url) = &t.url {
            secrets.add_url(url);
        }
        secrets
    }
}

/// Bound on each request of a token fetch (metadata, token endpoint).
const TOKEN_REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// Where a profile writes what may be secret: `target.url`, the header values and the
/// environment values.
#[derive(Default, Deserialize)]
struct SecretPlaces {
    #[serde(default)]
    target: SecretTargetPlaces,
}

#[derive(Default, Deserialize)]
struct SecretTargetPlaces {
    url: Option<toml::Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, toml::Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, toml::Spanned<String>>,
}

/// What summary.json records of the authorization: its kind and the variables' names, never
/// their values.
fn auth_settings(t: &TargetSpec) -> Value {
    let Some(a) = &t.auth else {
        return Value::Null;
    };
    match (&a.bearer_env, &a.oauth) {
        (Some(var), _) => json!({"kind": "bearer", "bearer_env": var}),
        (None, Some(o)) => json!({
            "kind": "oauth",
            "grant": o.grant.as_deref().unwrap_or("client_credentials"),
            "client_id_env": o.client_id_env,
            "client_id": o.client_id,
            "client_secret_env": o.client_secret_env,
            "scope": o.scope,
            "token_endpoint": o.token_endpoint,
            "auth_method": o.auth_method,
            "private_key_file": o.private_key_file,
            "login_follow_redirects": o.login_follow_redirects,
            "token_per_user": a.token_per_user,
        }),
        (None, None) => Value::Null,
    }
}

/// What summary.json records of TLS; `insecure` as it is, so a run without certificate
/// checks says so.
fn tls_settings(t: &TlsSpec) -> Value {
    json!({
        "cacert": t.cacert,
        "client_cert": t.client_cert,
        "insecure": t.insecure,
    })
}

/// The profile's text with the URL shown as [`report::redact_url`] shows it and every header and
/// environment value replaced by `"[redacted]"`, in place: the rest of the text (comments,
/// layout) stays as written and the copy is still a profile that parses.
fn redacted_profile(text: &str) -> String {
    let places: SecretPlaces = toml::from_str(text).unwrap_or_default();
    let t = places.target;
    let mut edits: Vec<(std::ops::Range<usize>, String)> = t
        .headers
        .values()
        .chain(t.env.values())
        .map(|v| (v.span(), report::REDACTED.to_owned()))
        .chain(t.url.map(|u| (u.span(), report::redact_url(u.get_ref()))))
        .collect();
    edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
    let mut out = text.to_owned();
    for (span, value) in edits {
        // A JSON string is also a TOML basic string.
        out.replace_range(span, &Value::String(value).to_string());
    }
    out
}
