//! Workload profiles: the TOML format (`deny_unknown_fields` everywhere), parsed into typed
//! values whose errors name the file, line, column and field, and what would be valid.

mod auth;
pub mod expr;
mod output;
pub mod races;
pub mod scenario;
pub mod schema;
pub mod template;
mod values;

pub use auth::{AuthMethod, AuthSpec, OAuthSpec, TlsSpec};
pub use output::{Output, PrometheusOutput};
pub use scenario::{Call, Capture, Member, Poll, PollRules, Scenario, Step, StepKind, Think};
pub use values::{Levels, Spacing, TemplateText, parse_bytes, parse_duration};

use crate::correlator::{ToolErrors, ValidateOutput};
use crate::protocol::ProtocolChoice;
use crate::server::ServeConfig;
use crate::transport::DEFAULT_CONNECT_TIMEOUT;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// A profile that could not be used, with where and why.
#[derive(Debug, thiserror::Error)]
pub struct ProfileError {
    pub file: PathBuf,
    /// 1-based line and column, when the mistake has a place in the file.
    pub line_col: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_col {
            Some((l, c)) => write!(f, "{}:{l}:{c}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// A whole profile, as written.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "mcpload profile",
    description = "A workload profile of mcpload (docs/profiles.md): where the load goes, how \
                   hard and how long, what is called, and when a run fails."
)]
pub struct Profile {
    /// The JSON Schema editors check this file against (e.g. `schema/profile.json`, or the
    /// output of `mcpload profile schema`); mcpload itself does not read it.
    #[serde(default, rename = "$schema")]
    pub schema: Option<String>,
    /// Names the run folder (`results/<timestamp>-<name>`); defaults to the file's stem.
    pub name: Option<String>,
    /// What the profile is for: free text, for its readers.
    pub description: Option<String>,
    /// Where the load goes: exactly one of `builtin`, `url`, `stdio`.
    #[schemars(with = "TargetSpec")]
    pub target: Spanned<TargetSpec>,
    /// How hard, and how long.
    #[serde(default)]
    pub load: Load,
    /// Weighted operations; default (without scenarios): `tools/call` of
    /// `echo {"message":"hi"}`.
    #[serde(default)]
    #[schemars(with = "Vec<Op>")]
    pub mix: Vec<Spanned<Op>>,
    /// Weighted multi-step scenarios (docs/profiles.md "Scenarios"), beside the mix.
    // As written; [`Source::parse`] checks them into `scenarios`.
    #[serde(default, rename = "scenario")]
    #[schemars(with = "Vec<scenario::ScenarioTable>")]
    pub(crate) scenario_tables: Vec<Spanned<scenario::ScenarioTable>>,
    /// Weighted multi-step scenarios, checked (filled by [`Source::parse`]).
    #[serde(skip)]
    pub scenarios: Vec<Scenario>,
    /// Send batches instead of single requests.
    #[schemars(with = "Option<Batch>")]
    pub batch: Option<Spanned<Batch>>,
    /// Canned answers to input-required rounds.
    #[schemars(with = "Option<InputAnswers>")]
    pub input: Option<Spanned<InputAnswers>>,
    /// When a step is `failed` (docs/metrics.md "The knee").
    #[serde(default)]
    pub criteria: Criteria,
    /// Gates checked at the end of the run, e.g. `"p99_ms<250"`; any failing exits 1.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub thresholds: Vec<Spanned<String>>,
    /// The calls of `mcpload probe --races` (docs/profiles.md "[races]"); `run` ignores it.
    // As written; [`Source::parse`] checks it into `races`.
    #[serde(default, rename = "races")]
    #[schemars(with = "Option<races::RacesTable>")]
    pub(crate) races_table: Option<Spanned<races::RacesTable>>,
    /// What `probe --races` calls (checked, filled by [`Source::parse`]).
    #[serde(skip)]
    pub races: Option<races::RaceChecks>,
    /// Where the run's figures go besides its folder: `[output.prometheus]`.
    #[serde(default)]
    pub output: Output,
}

/// Where the load goes: exactly one of `builtin`, `url`, `stdio`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"required": ["builtin"]}, {"required": ["url"]}, {"required": ["stdio"]}
]))]
pub struct TargetSpec {
    /// The built-in target, started in-process with these `serve` knobs.
    pub builtin: Option<ServeConfig>,
    /// A Streamable HTTP endpoint.
    pub url: Option<String>,
    /// Extra HTTP headers; `${NAME}` expands from the environment (never written out).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A command line started as a child speaking MCP over stdio.
    pub stdio: Option<String>,
    /// Environment of the stdio child (added to mcpload's own).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the stdio child.
    pub cwd: Option<PathBuf>,
    /// stdio: `shared` (one child for every virtual user) or `per_user` (a child per virtual
    /// user's session, as desktop clients run local servers).
    #[serde(default)]
    pub process: ProcessMode,
    /// `per_user`: a session ends after this many calls; the user's next call starts a
    /// fresh child.
    pub session_calls: Option<u64>,
    /// `per_user`: a session ends this long after its child was started.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub session_duration: Option<Duration>,
    /// `per_user`: the most memory the fleet's children may hold; a step past it ends the
    /// sweep (default: half the memory available at the start).
    #[serde(default, deserialize_with = "values::fleet_memory_budget")]
    #[schemars(schema_with = "values::bytes_schema")]
    pub fleet_memory_budget: Option<usize>,
    /// `auto` (default: detect the era) or a revision such as `2025-06-18`.
    #[serde(default, deserialize_with = "values::protocol")]
    #[schemars(schema_with = "values::protocol_schema")]
    pub protocol: ProtocolChoice,
    /// HTTP: `auto` (default: Streamable HTTP, or the legacy HTTP+SSE transport when that
    /// is what the URL speaks), `streamable-http` or `sse` (2024-11-05).
    #[serde(default)]
    pub transport: crate::client::TransportChoice,
    /// HTTP: every 400 to a request that carried the session id says the session is gone
    /// (for servers known to answer an unknown session so).
    #[serde(default)]
    pub session_lost_on_400: bool,
    /// HTTP: a bearer token or OAuth client credentials (docs/profiles.md "Authorization").
    pub auth: Option<AuthSpec>,
    /// HTTP: trust and identity for `https://` targets.
    #[serde(default)]
    pub tls: TlsSpec,
    /// How the server is watched as a process (docs/watch.md): a stdio child and the built-in
    /// target are watched with no setting.
    #[serde(default)]
    pub watch: WatchTable,
}

/// How many stdio children serve the virtual users (`target.process`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessMode {
    /// One child; every virtual user's requests are in flight on it at once.
    #[default]
    Shared,
    /// A child per virtual user's session.
    PerUser,
}

/// `[target.watch]`: the server's resources, sampled once a second through the run.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchTable {
    /// A local server process (its whole process tree).
    pub pid: Option<u32>,
    /// The server's own Prometheus endpoint.
    pub metrics: Option<String>,
    /// A container's cgroup directory (v2, or v1's memory controller).
    pub cgroup: Option<PathBuf>,
    /// Named series of the Prometheus endpoint, e.g. `{ sessions = "mcp_sessions_active" }`.
    #[serde(default)]
    pub metric: BTreeMap<String, String>,
}

/// How hard, and how long.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// `closed` (virtual clients) or `open` (arrivals per second). Default: `open` when
    /// `rate` is given, else `closed`.
    pub model: Option<LoadModel>,
    /// Closed loop: virtual clients per step, a list or a range like `"1..64 x2"`.
    #[schemars(with = "Option<Levels>")]
    pub concurrency: Option<Spanned<Levels>>,
    /// Open loop: arrivals per second per step, a list or a range.
    #[schemars(with = "Option<Levels>")]
    pub rate: Option<Spanned<Levels>>,
    /// Open loop: `constant` or `poisson` spacing of arrivals.
    #[serde(default)]
    pub spacing: Spacing,
    /// Open loop: each wake of a worker also sends the arrivals due within this window ahead
    /// (fewer wake-ups; arrivals leave up to this much early, in bunches, and an early one's
    /// latency runs from its departure); zero (the default) sends each arrival at its own
    /// instant.
    #[serde(
        default,
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub send_window: Duration,
    /// How long each step's load is measured, after its warm-up.
    #[serde(
        default = "d10s",
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub duration: Duration,
    /// Sent at each step's start, then drained and thrown away before the measured time.
    #[serde(
        default = "d1s",
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub warmup: Duration,
    /// A request unanswered this long after it was written ends as `timeouts` (and is
    /// cancelled on the wire); an answer after that is `late`.
    #[serde(
        default = "d5s",
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub timeout: Duration,
    /// How long work already started (a scenario's iteration) may go on after a step's
    /// measured time; default: `timeout`.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub graceful_stop: Option<Duration>,
    /// HTTP: the longest opening a connection (TCP, and TLS for `https://`) may take; a
    /// request whose connect takes longer ends as `transport_errors`.
    #[serde(
        default = "default_connect_timeout",
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub connect_timeout: Duration,
    /// Closed loop: pause of each virtual client between an answer and its next request.
    #[serde(
        default,
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub think_time: Duration,
    /// Open loop: requests in flight at most; arrivals past it are `dropped_arrivals`.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// HTTP: the most bytes the answers being read may hold at once (docs/metrics.md); at
    /// it, the largest one fails as oversized.
    #[serde(
        default = "default_max_answer_memory",
        deserialize_with = "values::answer_memory"
    )]
    #[schemars(schema_with = "values::bytes_schema")]
    pub max_answer_memory: usize,
    /// Stop the sweep after the first failed step.
    #[serde(default = "yes")]
    pub stop_on_failure: bool,
    /// After the last step: keep watching the server this long with no load (a soak's
    /// cool-down, where leaked memory shows by not coming back).
    #[serde(
        default,
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub cooldown: Duration,
    /// The shortest steady window the soak checks judge; shorter, they are `skipped`.
    #[serde(
        default = "d2min",
        deserialize_with = "values::duration",
        serialize_with = "values::duration_text"
    )]
    #[schemars(schema_with = "values::duration_schema")]
    pub leak_min_window: Duration,
}

fn d2min() -> Duration {
    Duration::from_secs(120)
}

impl Default for Load {
    fn default() -> Self {
        Load {
            model: None,
            concurrency: None,
            rate: None,
            spacing: Spacing::default(),
            send_window: Duration::ZERO,
            duration: d10s(),
            warmup: d1s(),
            timeout: d5s(),
            graceful_stop: None,
            connect_timeout: default_connect_timeout(),
            think_time: Duration::ZERO,
            max_in_flight: default_max_in_flight(),
            max_answer_memory: default_max_answer_memory(),
            cooldown: Duration::ZERO,
            leak_min_window: d2min(),
            stop_on_failure: true,
        }
    }
}

impl Load {
    /// `graceful_stop`, or `timeout` when it is not given.
    pub fn graceful_stop_or_timeout(&self) -> Duration {
        self.graceful_stop.unwrap_or(self.timeout)
    }
}

/// `load.model`: how the load is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LoadModel {
    /// Virtual clients, each sending its next request once the last is answered.
    Closed,
    /// Arrivals per second, whether or not earlier requests were answered.
    Open,
}

/// One weighted operation of the mix.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("allOf" = [
    {"if": {"properties": {"method": {"const": "tools/call"}}}, "then": {"required": ["tool"]}},
    {"if": {"properties": {"method": {"const": "resources/read"}}}, "then": {"required": ["uri"]}},
    {"if": {"properties": {"method": {"const": "prompts/get"}}}, "then": {"required": ["prompt"]}}
]))]
pub struct Op {
    /// Names the entry in reports; default: its tool, prompt, uri or method.
    pub name: Option<String>,
    /// `tools/call`, `resources/read`, `prompts/get`, `tools/list` or `ping`.
    pub method: Method,
    /// Relative weight in the mix (default 1).
    #[serde(default = "one")]
    pub weight: u32,
    /// `tools/call`: the tool's name, or `"*"` for every tool the server lists.
    pub tool: Option<String>,
    /// `tools/call` / `prompts/get`: arguments; strings may hold `{{seq}}`, `{{worker}}`,
    /// `{{uuid}}`, `{{rand:A..B}}`, `{{csv:COLUMN}}`. JSON, since `--args` is JSON (a
    /// `null` there reaches the request as `null`; TOML has none).
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
    /// `resources/read`: the uri template.
    pub uri: Option<TemplateText>,
    /// `prompts/get`: the prompt's name.
    pub prompt: Option<String>,
    /// Rows for `{{csv:COLUMN}}`, one per request in turn (path relative to the profile).
    pub csv: Option<PathBuf>,
    /// `tools/call` as a task (docs/profiles.md "Tasks"): `true`, or `"auto"` (a task when
    /// the server says the tool supports one).
    #[serde(default, deserialize_with = "values::task_mode")]
    #[schemars(schema_with = "values::task_mode_schema")]
    pub task: TaskMode,
    /// Tasks: poll `tasks/get` at this interval when it is shorter than the server's
    /// `pollInterval` (default: the server's).
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub poll_interval: Option<Duration>,
    /// Tasks (2025-11-25): the `ttl` asked for in `params.task`.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub task_ttl: Option<Duration>,
    /// Tasks: the longest a whole call may take (creation, polls, result); a task still
    /// working then is cancelled. Default: 60s.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub task_timeout: Option<Duration>,
    /// Tasks: once a poll saw the task terminal, poll once more to check that it stays so
    /// (`task_status_regressed`).
    #[serde(default)]
    pub task_confirm: bool,
    /// Each request carries a progress token, and the progress reported for it is followed.
    #[serde(default)]
    pub progress: bool,
    /// A request of this entry unanswered this long ends as `timeouts` (in place of
    /// `load.timeout`, for an operation known to be slower or faster than the rest); the
    /// step's drain waits for the longest of them.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub timeout: Option<Duration>,
}

/// Whether a `tools/call` runs as a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskMode {
    #[default]
    Off,
    On,
    /// When the server says the tool may run as one (2025-11-25 `execution.taskSupport`
    /// optional or required; 2026-07-28: the server offers the tasks extension).
    Auto,
}

/// Canned answers to a server's input requests (`[input]`, docs/profiles.md "Input
/// rounds"): with this table, every `tools/call` of the mix answers `input_required`
/// results from it and sends the call again.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputAnswers {
    /// The answer to an `elicitation/create`: an accept with `content`, or a decline.
    pub elicitation: Option<Elicitation>,
    /// The text of the answer to a `sampling/createMessage`.
    pub sampling: Option<String>,
    /// The root URIs answering a `roots/list`.
    pub roots: Option<Vec<String>>,
    /// Rounds one call may take; more are counted as `input_rounds_exceeded` (default 10).
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
}

/// An elicitation's canned answer.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Elicitation {
    /// `accept`, `decline` or `cancel`.
    pub action: ElicitAction,
    /// With `accept`: the form's values.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub content: Option<toml::Table>,
}

/// How an elicitation is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

fn default_max_rounds() -> u32 {
    10
}

impl Op {
    /// The entry's `name`, else its tool, prompt, uri or method.
    pub fn name(&self) -> &str {
        match &self.name {
            Some(n) => n,
            None => label(
                self.method.as_str(),
                self.tool.as_deref(),
                self.prompt.as_deref(),
                self.uri.as_ref(),
            ),
        }
    }
}

/// What names a request when nothing else does: its tool, prompt or uri, else its method.
fn label<'a>(
    method: &'a str,
    tool: Option<&'a str>,
    prompt: Option<&'a str>,
    uri: Option<&'a TemplateText>,
) -> &'a str {
    tool.or(prompt)
        .or(uri.map(|u| u.0.as_str()))
        .unwrap_or(method)
}

/// The field a method's params are made from, with an example: `tools/call` needs `tool`,
/// `resources/read` `uri`, `prompts/get` `prompt`.
fn required_field(method: &str) -> Option<(&'static str, &'static str)> {
    match method {
        "tools/call" => Some(("tool", r#"tool = "echo""#)),
        "resources/read" => Some(("uri", r#"uri = "mem://item/{{seq}}""#)),
        "prompts/get" => Some(("prompt", r#"prompt = "greeting""#)),
        _ => None,
    }
}

/// The MCP method an operation of the mix sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum Method {
    #[serde(rename = "tools/call")]
    ToolsCall,
    #[serde(rename = "resources/read")]
    ResourcesRead,
    #[serde(rename = "prompts/get")]
    PromptsGet,
    #[serde(rename = "tools/list")]
    ToolsList,
    #[serde(rename = "ping")]
    Ping,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::ToolsCall => "tools/call",
            Method::ResourcesRead => "resources/read",
            Method::PromptsGet => "prompts/get",
            Method::ToolsList => "tools/list",
            Method::Ping => "ping",
        }
    }
}

/// Batches: every send is a JSON array of `size` requests drawn from the mix, plus
/// `notifications` notifications.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// Requests in each batch (1 or more).
    pub size: usize,
    /// Notifications added to each batch (`notifications/cancelled` for an id never sent,
    /// which a server ignores); they must get no answer.
    #[serde(default)]
    pub notifications: usize,
    /// Send batches even when the agreed revision forbids them (to see how a server copes).
    #[serde(default)]
    pub force: bool,
}

/// When a step is `failed` (docs/metrics.md "The knee").
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// A step with a higher `error_rate` fails (default 0.01).
    #[serde(default = "default_error_rate")]
    pub error_rate: f64,
    /// A step whose p99 is above this many milliseconds fails.
    pub p99_ms: Option<f64>,
    /// A step with any unknown_id, null_id, duplicate_id, both_result_error or
    /// invalid_jsonrpc fails.
    #[serde(default)]
    pub fail_on_anomaly: bool,
    /// `"ok"`: results with `isError: true` count as `ok`; `"error"` (default): they count
    /// as `tool_errors`, in the error rate.
    #[serde(default)]
    pub tool_errors: ToolErrors,
    /// `structuredContent` checked against the tool's `outputSchema`: `"all"` (default),
    /// `"sample:N"` (every Nth result of each operation), `"off"`.
    #[serde(default)]
    pub validate_output: ValidateOutput,
}

impl Default for Criteria {
    fn default() -> Self {
        Criteria {
            error_rate: default_error_rate(),
            p99_ms: None,
            fail_on_anomaly: false,
            tool_errors: ToolErrors::default(),
            validate_output: ValidateOutput::default(),
        }
    }
}

fn d10s() -> Duration {
    Duration::from_secs(10)
}
fn d1s() -> Duration {
    Duration::from_secs(1)
}
fn d5s() -> Duration {
    Duration::from_secs(5)
}
fn default_connect_timeout() -> Duration {
    DEFAULT_CONNECT_TIMEOUT
}
fn default_max_in_flight() -> usize {
    10_000
}
fn default_max_answer_memory() -> usize {
    crate::transport::DEFAULT_MAX_ANSWER_MEMORY
}
fn default_error_rate() -> f64 {
    0.01
}
fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}

/// A parsed profile with the text it came from (to point errors at lines, and to be copied
/// into the run folder as it was run).
#[derive(Clone, Debug)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

impl Source {
    pub fn read(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            file: path.to_owned(),
            line_col: None,
            message: format!("cannot read the profile: {e}"),
        })?;
        Ok(Source {
            path: path.to_owned(),
            text,
        })
    }

    /// Parses and checks the profile; every error names a place in the file.
    pub fn parse(&self) -> Result<Profile, ProfileError> {
        let mut p: Profile = toml::from_str(&self.text).map_err(|e| {
            let message = e.message().trim_end().to_owned();
            self.error(e.span(), message)
        })?;
        self.check(&p)?;
        p.scenarios = scenario::check(self, &p.scenario_tables)?;
        p.races = p
            .races_table
            .as_ref()
            .map(|t| races::check(self, t))
            .transpose()?;
        Ok(p)
    }

    /// An error at a byte span of the text.
    pub fn error(&self, span: Option<std::ops::Range<usize>>, message: String) -> ProfileError {
        ProfileError {
            file: self.path.clone(),
            line_col: span.map(|s| line_col(&self.text, s.start)),
            message,
        }
    }

    /// Where the value at `path` (its keys, outermost first) is written, when it is.
    fn span_of(&self, path: &[&str]) -> Option<std::ops::Range<usize>> {
        let doc = toml::de::DeTable::parse(&self.text).ok()?;
        let (last, tables) = path.split_last()?;
        let mut table = doc.get_ref();
        for key in tables {
            match table.get(*key)?.get_ref() {
                toml::de::DeValue::Table(t) => table = t,
                _ => return None,
            }
        }
        Some(table.get(*last)?.span())
    }

    /// The cross-field rules serde cannot express.
    fn check(&self, p: &Profile) -> Result<(), ProfileError> {
        let t = p.target.get_ref();
        let kinds = [t.builtin.is_some(), t.url.is_some(), t.stdio.is_some()];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(self.error(
                Some(p.target.span()),
                "field `target`: give exactly one of `builtin` (a table of serve knobs), \
                 `url` (\"http://127.0.0.1:PORT/mcp\") or `stdio` (\"command args\")"
                    .into(),
            ));
        }
        self.check_auth(t)?;
        if let Some(prom) = &p.output.prometheus
            && let Err((field, message)) = prom.check()
        {
            let span = self
                .span_of(&["output", "prometheus", field])
                .or_else(|| self.span_of(&["output", "prometheus"]));
            return Err(self.error(span, message));
        }
        let l = &p.load;
        match (l.model, &l.concurrency, &l.rate) {
            (Some(LoadModel::Closed), _, Some(r)) => {
                return Err(self.error(
                    Some(r.span()),
                    "field `load.rate`: a closed-loop load takes `concurrency`, not `rate`".into(),
                ));
            }
            (Some(LoadModel::Open), Some(c), _) => {
                return Err(self.error(
                    Some(c.span()),
                    "field `load.concurrency`: an open-loop load takes `rate`, not `concurrency`"
                        .into(),
                ));
            }
            (None, Some(c), Some(_)) => {
                return Err(self.error(
                    Some(c.span()),
                    "field `load`: give `concurrency` (closed loop) or `rate` (open loop), not both"
                        .into(),
                ));
            }
            _ => {}
        }
        let durations = [
            ("duration", l.duration),
            ("timeout", l.timeout),
            ("connect_timeout", l.connect_timeout),
        ];
        for (field, d) in durations {
            if d.is_zero() {
                return Err(self.error(
                    self.span_of(&["load", field]),
                    format!("field `load.{field}`: must be more than 0s"),
                ));
            }
        }
        for op in &p.mix {
            self.check_op(op)?;
        }
        if let (Some(b), Some(_)) = (&p.batch, p.scenario_tables.first()) {
            return Err(self.error(
                Some(b.span()),
                "field `batch`: a batch is drawn from the mix and cannot carry a scenario's \
                 steps, which wait on each other's answers; remove [batch] or the [[scenario]] \
                 tables"
                    .into(),
            ));
        }
        let flow_span = p.input.as_ref().map(Spanned::span).or_else(|| {
            p.mix
                .iter()
                .find(|o| o.get_ref().task != TaskMode::Off)
                .map(Spanned::span)
        });
        if let Some(span) = flow_span {
            let clash = if p.batch.is_some() {
                Some("[batch] (a batch member cannot wait for its task or its next round)")
            } else if !p.scenario_tables.is_empty() {
                Some("[[scenario]] tables (a scenario polls a task with a `poll` step)")
            } else {
                None
            };
            if let Some(why) = clash {
                return Err(self.error(
                    Some(span),
                    format!(
                        "task mode and [input] rounds are for the mix; they cannot go with {why}"
                    ),
                ));
            }
        }
        if let Some(i) = &p.input
            && i.get_ref().max_rounds == 0
        {
            return Err(self.error(
                Some(i.span()),
                "field `input.max_rounds`: must be 1 or more".into(),
            ));
        }
        if let Some(b) = &p.batch
            && b.get_ref().size == 0
        {
            return Err(self.error(
                Some(b.span()),
                "field `batch.size`: must be 1 or more".into(),
            ));
        }
        if !(0.0..=1.0).contains(&p.criteria.error_rate) {
            return Err(self.error(
                None,
                "field `criteria.error_rate`: must be between 0 and 1".into(),
            ));
        }
        Ok(())
    }

    /// Credentials come from the environment: an `Authorization` header written out, a
    /// secret, or auth on a stdio target is refused.
    fn check_auth(&self, t: &TargetSpec) -> Result<(), ProfileError> {
        for (name, value) in &t.headers {
            if name.eq_ignore_ascii_case("authorization") {
                let why = if t.auth.is_some() {
                    "[target.auth] sets it: remove the header".to_owned()
                } else if value.contains("${") {
                    continue;
                } else {
                    "a credential is never written in a profile: use `${VAR}` (the value \
                     from the environment), or [target.auth] with `bearer_env = \"VAR\"`"
                        .to_owned()
                };
                return Err(self.error(
                    self.span_of(&["target", "headers", name]),
                    format!("field `target.headers.{name}`: {why}"),
                ));
            }
        }
        if let Some(auth) = &t.auth {
            if t.stdio.is_some() {
                return Err(self.error(
                    self.span_of(&["target", "auth"]),
                    "field `target.auth`: a stdio target takes no HTTP authorization".into(),
                ));
            }
            if let Some((field, why)) = auth.problem() {
                let mut path = vec!["target", "auth"];
                path.extend(field.split('.'));
                return Err(self.error(
                    self.span_of(&path)
                        .or_else(|| self.span_of(&["target", "auth"])),
                    format!("field `target.auth.{field}`: {why}"),
                ));
            }
        }
        let tls = &t.tls;
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            return Err(self.error(
                self.span_of(&["target", "tls"]),
                "field `target.tls`: `client_cert` and `client_key` go together".into(),
            ));
        }
        Ok(())
    }

    fn check_op(&self, op: &Spanned<Op>) -> Result<(), ProfileError> {
        let o = op.get_ref();
        if let Some((field, example)) = required_field(o.method.as_str()) {
            let have = match field {
                "tool" => o.tool.is_some(),
                "uri" => o.uri.is_some(),
                _ => o.prompt.is_some(),
            };
            if !have {
                return Err(self.error(
                    Some(op.span()),
                    format!(
                        "field `mix.{field}`: `{}` needs `{field}`, e.g. {example}",
                        o.method.as_str()
                    ),
                ));
            }
        }
        if o.weight == 0 {
            return Err(self.error(
                Some(op.span()),
                "field `mix.weight`: must be 1 or more".into(),
            ));
        }
        if let Some(args) = &o.args {
            args.values()
                .try_for_each(values::check_json_templates)
                .map_err(|m| self.error(Some(op.span()), format!("field `mix.args`: {m}")))?;
        }
        let task_keys = [
            ("poll_interval", o.poll_interval.is_some()),
            ("task_ttl", o.task_ttl.is_some()),
            ("task_timeout", o.task_timeout.is_some()),
            ("task_confirm", o.task_confirm),
        ];
        if o.task != TaskMode::Off && o.method != Method::ToolsCall {
            return Err(self.error(
                Some(op.span()),
                format!(
                    "field `mix.task`: only a `tools/call` runs as a task, not `{}`",
                    o.method.as_str()
                ),
            ));
        }
        if let Some((field, _)) = task_keys.iter().find(|(_, set)| *set)
            && o.task == TaskMode::Off
        {
            return Err(self.error(
                Some(op.span()),
                format!(
                    "field `mix.{field}`: only for a task; add `task = true` or `task = \"auto\"`"
                ),
            ));
        }
        let zero = [
            ("poll_interval", o.poll_interval),
            ("task_timeout", o.task_timeout),
            ("timeout", o.timeout),
        ];
        if let Some((field, _)) = zero.iter().find(|(_, d)| d.is_some_and(|d| d.is_zero())) {
            return Err(self.error(
                Some(op.span()),
                format!("field `mix.{field}`: must be more than 0s"),
            ));
        }
        Ok(())
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
