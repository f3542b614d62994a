//! `mcpload init`: a starter profile written from what a server says and does. It connects,
//! lists the tools (with their annotations and schemas), prompts and resources; places each
//! tool by its annotations (read-only ones loaded, writes commented out); probes each tool it
//! would load with a short run of the real engine (so a call is judged as `run` judges it:
//! errors, `isError`, input nobody answers, a call past the probe's timeout); calibrates a
//! sweep with one more short run; and hands the profile text to [`write`], which says why for
//! every choice. Nothing secret is written: header values and tokens become `${VAR}` and
//! `bearer_env` references.

mod write;

pub use write::{Calibration, EnvVar, Placed, Probed, ToolEntry};

use crate::client::{
    ConnectOptions, Connector, Endpoint, List, ProtocolChoice, ServerInfo, ToolInfo, list_all,
};
use crate::load::flow::{CannedInput, client_capabilities};
use crate::load::schema_args::arguments_for;
use crate::profile::{Levels, Source};
use crate::report::{RunSummary, StepRecord};
use crate::run::{LevelsFlag, Overrides};
use crate::transport::Transport;
use futures_util::StreamExt;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest one probe call may take by default (`--probe-timeout`): a tool slower than
/// this is left out.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Each tool's probe: calls one after the other for this long (one virtual user).
const PROBE_DURATION: Duration = Duration::from_millis(500);
/// Probes run at once (each its own connection, or its own child for stdio).
const PROBES_AT_ONCE: usize = 4;
/// Tools not yet probed when this much of `init` has passed are left out, unprobed.
const PROBE_BUDGET: Duration = Duration::from_secs(30);
/// The calibration's levels (closed loop) at most, 1 to 64 doubling; each measured this long
/// after a short warm-up.
const CALIBRATION_LEVELS: u64 = 7;
const CALIBRATION_STEP: Duration = Duration::from_secs(1);
/// A calibration level's worst case besides its measured time: the warm-up, its drain and the
/// step's drain, each bounded by the probe timeout (2 s), and a graceful stop for calls.
const CALIBRATION_LEVEL_BOUND: Duration = Duration::from_secs(7);
const CALIBRATION_WARMUP: Duration = Duration::from_millis(250);
/// What `init` aims to finish within: the calibration takes fewer levels when the probes
/// left less (two at least).
const INIT_BUDGET: Duration = Duration::from_secs(60);
/// The longest the listing of tools, prompts or resources may take.
const LIST_WAIT: Duration = Duration::from_secs(15);

/// Where `init` connects.
#[derive(Clone, Debug)]
pub enum InitTarget {
    Url(String),
    Stdio(String),
    /// The built-in target with these `--builtin-knob KEY=VALUE` settings.
    Builtin(Vec<(String, String)>),
}

/// What `init` is asked to do.
#[derive(Clone, Debug)]
pub struct InitOptions {
    pub target: InitTarget,
    /// HTTP headers `(name, value)` as given on the command line (`${VAR}` expanded when
    /// connecting); the profile gets `${VAR}` references in their place.
    pub headers: Vec<(String, String)>,
    /// The variable that holds a static bearer token (`[target.auth] bearer_env`).
    pub bearer_env: Option<String>,
    pub protocol: ProtocolChoice,
    /// The longest a probe call may take.
    pub probe_timeout: Duration,
    /// A folder for the probe and calibration runs (removed by the caller).
    pub scratch: PathBuf,
    /// The file the profile will be written to (named in its head comment).
    pub file_name: String,
}

/// Why `init` could not write a profile.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The flags cannot make a profile (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// The server could not be reached or listed.
    #[error("{0}")]
    Failed(String),
}

/// The profile `init` wrote, and what a person should know about it.
#[derive(Debug)]
pub struct Written {
    pub text: String,
    /// Variables the profile reads, to be set before `mcpload run`.
    pub env: Vec<EnvVar>,
    pub tools: Vec<ToolEntry>,
    /// The sweep's levels.
    pub levels: Vec<u64>,
}

/// Connects, lists, probes, calibrates and writes the profile text.
pub async fn init(opts: &InitOptions) -> Result<Written, InitError> {
    let started = Instant::now();
    let target = write::target(opts)?;
    let target = &target;
    let listing = discover(opts, target).await?;
    let offers_tasks = listing.server.offers_tasks();
    let mut tools: Vec<ToolEntry> = listing
        .tools
        .iter()
        .map(|(raw, info)| write::place(raw, info))
        .collect();
    let probes = futures_util::stream::iter(tools.iter().enumerate())
        .filter(|(_, t)| std::future::ready(matches!(t.placed, Placed::Load { .. })))
        .map(|(i, t)| async move {
            if started.elapsed() > PROBE_BUDGET {
                let why = format!(
                    "not probed: init's {} s for probes were spent",
                    PROBE_BUDGET.as_secs()
                );
                return (i, t.task, Err(why));
            }
            let mut t = t.clone();
            let mut result = probe(opts, target, &t, &format!("probe-{i}")).await;
            if let Err(Refused::MissingCapability(_)) = &result
                && offers_tasks
                && !t.task
            {
                t.task = true;
                result = probe(opts, target, &t, &format!("probe-{i}-task")).await;
            }
            (i, t.task, result.map_err(Refused::into_reason))
        })
        .buffer_unordered(PROBES_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    for (i, task, result) in probes {
        tools[i].task = task;
        tools[i].probe = Some(result);
    }
    let left = INIT_BUDGET.saturating_sub(started.elapsed());
    let levels = (left.as_secs() / CALIBRATION_LEVEL_BOUND.as_secs()).clamp(2, CALIBRATION_LEVELS);
    let calibration = calibrate(opts, target, &tools, levels).await;
    let written = write::profile(opts, target, &listing, &tools, &calibration);
    check_text(&opts.file_name, &written).map_err(|e| {
        InitError::Failed(format!(
            "the profile init wrote does not parse (a bug): {e}"
        ))
    })?;
    Ok(Written {
        text: written,
        env: target.env.clone(),
        levels: calibration.levels.clone(),
        tools,
    })
}

/// What the server lists.
struct Listing {
    server: ServerInfo,
    /// Each tool as listed, and as the client reads it.
    tools: Vec<(Value, ToolInfo)>,
    prompts: Vec<Value>,
    resources: Vec<Value>,
}

/// Connects once and lists tools, prompts and resources (a listing refused counts as empty,
/// for a server without that capability).
async fn discover(opts: &InitOptions, target: &write::Target) -> Result<Listing, InitError> {
    let failed = |e: &dyn std::fmt::Display| InitError::Failed(format!("connecting: {e}"));
    let (_running, endpoint) = match &opts.target {
        InitTarget::Url(url) => (None, Endpoint::http(url.clone(), connect_headers(opts))),
        InitTarget::Stdio(cmd) => (
            None,
            Endpoint::stdio(cmd).map_err(|e| InitError::Usage(e.to_string()))?,
        ),
        InitTarget::Builtin(_) => {
            let cfg = target.builtin.clone().unwrap_or_default();
            let running = crate::server::start_http(cfg)
                .await
                .map_err(|e| InitError::Failed(format!("the built-in target: {e}")))?;
            let url = running.url();
            (Some(running), Endpoint::http(url, Vec::new()))
        }
    };
    // Declared as the probes declare them: a server may list tools that ask for input only
    // to a client that can answer.
    let canned = write::canned_input().map(|i| CannedInput::new(&i));
    let connect = ConnectOptions {
        protocol: opts.protocol,
        list_tools: false,
        client_capabilities: client_capabilities(canned.as_ref(), false),
        ..ConnectOptions::default()
    };
    let connector = Connector::new(endpoint, connect).map_err(|e| failed(&e))?;
    let mut conn = connector.connect().await.map_err(|e| failed(&e))?;
    let revision = conn.server.revision;
    let t = &mut conn.transport;
    let tools = list_all(t, revision, List::Tools, LIST_WAIT)
        .await
        .map_err(|e| failed(&e))?;
    let caps = &conn.server.capabilities;
    let mut prompts = Vec::new();
    if caps.get("prompts").is_some() {
        prompts = list_all(t, revision, List::Prompts, LIST_WAIT)
            .await
            .unwrap_or_default();
    }
    let mut resources = Vec::new();
    if caps.get("resources").is_some() {
        resources = list_all(t, revision, List::Resources, LIST_WAIT)
            .await
            .unwrap_or_default();
    }
    conn.transport.close().await;
    let tools = tools
        .into_iter()
        .filter_map(|raw| {
            let info = ToolInfo::of_listing(&raw, revision)?;
            Some((raw, info))
        })
        .collect();
    Ok(Listing {
        server: (*conn.server).clone(),
        tools,
        prompts,
        resources,
    })
}

/// The headers to connect with: as given, and the bearer token's variable as a header.
fn connect_headers(opts: &InitOptions) -> Vec<(String, String)> {
    let mut headers = opts.headers.clone();
    if let Some(var) = &opts.bearer_env {
        headers.push(("Authorization".into(), format!("Bearer ${{{var}}}")));
    }
    headers
}

/// One short run of `text` (a profile) through the plan and engine `run` uses, in the
/// scratch folder; the run's summary.
async fn run_internal(
    opts: &InitOptions,
    name: &str,
    text: &str,
    overrides: Overrides,
) -> Result<RunSummary, String> {
    let path = opts.scratch.join(format!("{name}.toml"));
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    let overrides = Overrides {
        headers: connect_headers(opts),
        out: Some(opts.scratch.join(name)),
        quiet: true,
        ..overrides
    };
    let plan = crate::run::plan(Some(&path), overrides).map_err(|e| e.to_string())?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let outcome = crate::run::execute(plan, cancel)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(why) = outcome.aborted {
        return Err(format!("the run stopped early: {why}"));
    }
    RunSummary::read(&outcome.dir).map_err(|e| e.to_string())
}

/// Probes one tool: calls of it, one at a time, for [`PROBE_DURATION`], each given the probe
/// timeout; what they did, or why the tool is left out.
async fn probe(
    opts: &InitOptions,
    target: &write::Target,
    tool: &ToolEntry,
    run_name: &str,
) -> Result<Probed, Refused> {
    let text = write::probe_profile(target, tool, opts.probe_timeout);
    let overrides = Overrides {
        levels: Some(LevelsFlag::Concurrency(Levels(vec![1.0]))),
        duration: Some(PROBE_DURATION),
        warmup: Some(Duration::ZERO),
        timeout: Some(opts.probe_timeout),
        ..Overrides::default()
    };
    let run = run_internal(opts, run_name, &text, overrides)
        .await
        .map_err(Refused::Other)?;
    let step = run
        .steps
        .first()
        .ok_or(Refused::Other("the probe recorded no step".into()))?;
    judge_probe(step, opts.probe_timeout).map_err(|why| {
        let code = crate::protocol::codes::MISSING_CLIENT_CAPABILITY.to_string();
        if step.errors_by_code.contains_key(&code) {
            Refused::MissingCapability(why)
        } else {
            Refused::Other(why)
        }
    })
}

/// Why a probe left its tool out.
enum Refused {
    /// Refused for a capability the call did not declare (-32021): under 2026-07-28, a tool
    /// that runs only as a task.
    MissingCapability(String),
    Other(String),
}

impl Refused {
    fn into_reason(self) -> String {
        match self {
            Refused::MissingCapability(why) | Refused::Other(why) => why,
        }
    }
}

/// What a probe's step says of its tool: the latency of its calls, or why it is left out.
fn judge_probe(step: &StepRecord, probe_timeout: Duration) -> Result<Probed, String> {
    let s = &step.figures;
    if let Some(why) = &s.target_down {
        return Err(format!("the server went down during the probe: {why}"));
    }
    let calls = s.calls.unwrap_or(s.requests);
    if calls == 0 {
        return Err("no call could be sent in the probe".into());
    }
    let of = |n: u64| format!("{n} of {calls} calls");
    let unfinished = s.timeouts + s.tasks_unfinished.unwrap_or(0);
    if unfinished > 0 {
        return Err(format!(
            "ran past the probe: {} unanswered within {}",
            of(unfinished.min(calls)),
            write::duration_text(probe_timeout)
        ));
    }
    let unanswered =
        s.input_unanswered.unwrap_or(0) + s.input_refused + s.input_rounds_exceeded.unwrap_or(0);
    if unanswered > 0 {
        let kinds: Vec<&str> = step
            .input_unanswered_by_kind
            .kinds()
            .map(|k| k.name())
            .collect();
        return Err(format!(
            "asked for input that cannot be answered{} ({})",
            if kinds.is_empty() {
                String::new()
            } else {
                format!(": {}", kinds.join(", "))
            },
            of(unanswered.min(calls))
        ));
    }
    if s.tool_errors > 0 {
        return Err(format!(
            "answered isError: true ({})",
            of(s.tool_errors.min(calls))
        ));
    }
    if s.errors > 0 {
        let codes: Vec<&str> = step.errors_by_code.keys().map(String::as_str).collect();
        return Err(format!(
            "answered a JSON-RPC error {} ({})",
            codes.join(", "),
            of(s.errors.min(calls))
        ));
    }
    let failed = s
        .calls_failed
        .unwrap_or(0)
        .max(s.requests - s.ok.min(s.requests));
    if failed > 0 || s.tasks_failed.unwrap_or(0) > 0 {
        let why = s
            .transport_error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        return Err(format!("{} failed{why}", of(failed.max(1).min(calls))));
    }
    Ok(Probed {
        calls,
        p50_ms: s.p50_ms.unwrap_or(0.0),
        p99_ms: s.p99_ms.unwrap_or(0.0),
        max_ms: s.max_ms.unwrap_or(0.0),
        input_rounds: s.input_rounds.unwrap_or(0) > 0,
    })
}

/// One more short run: the kept tools (or `tools/list`) swept at `levels` levels from 1,
/// doubling, a second a level; the levels and gates of the profile come from it.
async fn calibrate(
    opts: &InitOptions,
    target: &write::Target,
    tools: &[ToolEntry],
    levels: u64,
) -> Calibration {
    let text = write::calibration_profile(target, tools, opts.probe_timeout);
    let overrides = Overrides {
        levels: Some(LevelsFlag::Concurrency(Levels(
            (0..levels).map(|i| (1u64 << i) as f64).collect(),
        ))),
        duration: Some(CALIBRATION_STEP),
        warmup: Some(CALIBRATION_WARMUP),
        timeout: Some(opts.probe_timeout),
        ..Overrides::default()
    };
    match run_internal(opts, "calibration", &text, overrides).await {
        Ok(run) => Calibration::of(&run),
        Err(why) => Calibration::failed(why),
    }
}

/// The tools whose probe passed.
fn kept(tools: &[ToolEntry]) -> impl Iterator<Item = (&ToolEntry, &Probed)> {
    tools.iter().filter_map(|t| match &t.probe {
        Some(Ok(p)) => Some((t, p)),
        _ => None,
    })
}

/// The arguments a tool is called with: from its schema, as `tool = "*"` makes them.
fn arguments(info: &ToolInfo) -> Value {
    arguments_for(&info.input_schema)
}

/// Checks a profile text with the parser `run` uses (`file` names it in errors).
pub fn check_text(file: &str, text: &str) -> Result<crate::profile::Profile, String> {
    Source {
        path: PathBuf::from(file),
        text: text.to_owned(),
    }
    .parse()
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Stats, StepFacts, StepSummary};

    /// A probe's step of ten calls, all answered, changed by `set`.
    fn step(set: impl FnOnce(&mut StepSummary, &mut StepRecord)) -> StepRecord {
        let mut figures = StepSummary::new(StepFacts::closed(1, 1, 0.5), &Stats::default());
        figures.requests = 10;
        figures.responses = 10;
        figures.ok = 10;
        figures.p50_ms = Some(0.4);
        figures.p99_ms = Some(0.9);
        figures.max_ms = Some(1.3);
        let mut r = StepRecord {
            figures: figures.clone(),
            anomalies: 0,
            rejected: 0,
            errors_by_code: Default::default(),
            retries_by_cause: Default::default(),
            tripped: Vec::new(),
            ops: Vec::new(),
            scenarios: Vec::new(),
            flows: None,
            findings: Vec::new(),
            input_unanswered_by_kind: Default::default(),
            input_refused_by_kind: Default::default(),
        };
        set(&mut figures, &mut r);
        r.figures = figures;
        r
    }

    #[test]
    fn a_probe_keeps_a_tool_only_when_every_call_was_answered_well() {
        let t = Duration::from_secs(2);
        let kept = judge_probe(&step(|_, _| {}), t).unwrap();
        assert_eq!(
            (kept.calls, kept.max_ms, kept.input_rounds),
            (10, 1.3, false)
        );
        let why =
            |set: fn(&mut StepSummary, &mut StepRecord)| judge_probe(&step(set), t).unwrap_err();
        assert_eq!(
            why(|s, _| {
                s.ok = 0;
                s.timeouts = 1;
                s.requests = 1;
            }),
            "ran past the probe: 1 of 1 calls unanswered within 2s"
        );
        assert_eq!(
            why(|s, _| {
                s.ok = 7;
                s.tool_errors = 3;
            }),
            "answered isError: true (3 of 10 calls)"
        );
        assert_eq!(
            why(|s, r| {
                s.ok = 0;
                s.errors = 10;
                r.errors_by_code.insert("-32602".into(), 10);
            }),
            "answered a JSON-RPC error -32602 (10 of 10 calls)"
        );
        assert_eq!(
            why(|s, r| {
                s.ok = 9;
                s.input_unanswered = Some(1);
                r.input_unanswered_by_kind.elicitation = 1;
            }),
            "asked for input that cannot be answered: elicitation (1 of 10 calls)"
        );
        assert_eq!(
            why(|s, _| {
                s.ok = 8;
                s.http_503 = 2;
            }),
            "2 of 10 calls failed"
        );
        assert_eq!(
            why(|s, _| s.target_down = Some("exited with code 3".into())),
            "the server went down during the probe: exited with code 3"
        );
    }
}
