//! Every knob of the built-in target in one serde type ([`ServeConfig`]), the small value
//! types with their text syntax (`fixed:20`, `5s:2s`, `drop=10,garbage=7`, …), and the checks
//! that turn a raw configuration into one that can run.

use super::faults::{FaultEvery, FaultOdds, Periods, ProgressFault, SyntaxError, TaskFault};
use crate::protocol::Revision;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

/// The revisions the target can serve, oldest first (2024-11-05 is not among them).
pub(crate) const SERVABLE: [Revision; 4] = [
    Revision::V2025_03_26,
    Revision::V2025_06_18,
    Revision::V2025_11_25,
    Revision::V2026_07_28,
];

/// A configuration that cannot run, or a knob whose text does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    #[error("{0}")]
    Invalid(String),
}

fn syntax(what: &'static str, text: &str, why: impl fmt::Display) -> ConfigError {
    ConfigError::Syntax(SyntaxError {
        what,
        text: text.to_owned(),
        why: why.to_string(),
    })
}

/// Which MCP eras the endpoint serves (`--era`, profile key `era`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServedEras {
    #[default]
    Both,
    Legacy,
    Modern,
}

/// How a request's answer travels over HTTP (`--answer`, profile key `answer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMode {
    #[default]
    Json,
    Sse,
}

/// Whether a JSON array POST body (a batch) is served (`--batches`, profile key `batches`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BatchPolicy {
    #[default]
    Auto,
    Accept,
    Reject,
}

/// Reads one of a knob's words (`--era both`, `--answer sse`); profiles spell them the same.
fn parse_word<T: Copy>(
    what: &'static str,
    text: &str,
    all: &[T],
    name: fn(T) -> &'static str,
) -> Result<T, ConfigError> {
    all.iter()
        .copied()
        .find(|v| name(*v) == text)
        .ok_or_else(|| {
            let words: Vec<&str> = all.iter().map(|v| name(*v)).collect();
            syntax(what, text, format!("expected one of {}", words.join(", ")))
        })
}

impl ServedEras {
    pub const ALL: [ServedEras; 3] = [ServedEras::Both, ServedEras::Legacy, ServedEras::Modern];

    pub fn name(self) -> &'static str {
        match self {
            ServedEras::Both => "both",
            ServedEras::Legacy => "legacy",
            ServedEras::Modern => "modern",
        }
    }

    /// What the value means (listed by `--help`).
    pub fn about(self) -> &'static str {
        match self {
            ServedEras::Both => {
                "Legacy (`initialize`, 2025-03-26 … 2025-11-25) and 2026-07-28, on one endpoint"
            }
            ServedEras::Legacy => "Only the `initialize` era",
            ServedEras::Modern => "Only 2026-07-28 (`server/discover`, per-request `_meta`)",
        }
    }
}

impl FromStr for ServedEras {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        parse_word("era", s, &ServedEras::ALL, ServedEras::name)
    }
}

impl AnswerMode {
    pub const ALL: [AnswerMode; 2] = [AnswerMode::Json, AnswerMode::Sse];

    pub fn name(self) -> &'static str {
        match self {
            AnswerMode::Json => "json",
            AnswerMode::Sse => "sse",
        }
    }

    /// What the value means (listed by `--help`).
    pub fn about(self) -> &'static str {
        match self {
            AnswerMode::Json => "One `application/json` body per POST",
            AnswerMode::Sse => {
                "A `text/event-stream`: progress notifications (when asked for), then the response"
            }
        }
    }
}

impl FromStr for AnswerMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        parse_word("answer mode", s, &AnswerMode::ALL, AnswerMode::name)
    }
}

impl BatchPolicy {
    pub const ALL: [BatchPolicy; 3] = [BatchPolicy::Auto, BatchPolicy::Accept, BatchPolicy::Reject];

    pub fn name(self) -> &'static str {
        match self {
            BatchPolicy::Auto => "auto",
            BatchPolicy::Accept => "accept",
            BatchPolicy::Reject => "reject",
        }
    }

    /// What the value means (listed by `--help`).
    pub fn about(self) -> &'static str {
        match self {
            BatchPolicy::Auto => {
                "As the revision in use says: accepted under 2025-03-26, rejected under later ones"
            }
            BatchPolicy::Accept => "Always served, whatever the revision",
            BatchPolicy::Reject => {
                "Always rejected: HTTP 400 with one JSON-RPC error (stdio: that error on one line)"
            }
        }
    }
}

impl FromStr for BatchPolicy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        parse_word("batch policy", s, &BatchPolicy::ALL, BatchPolicy::name)
    }
}

/// How the load balancer in front of `replicas` picks a replica (`--balance`, profile key
/// `balance`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    #[default]
    RoundRobin,
    Sticky,
    Random,
}

impl Balance {
    pub const ALL: [Balance; 3] = [Balance::RoundRobin, Balance::Sticky, Balance::Random];

    pub fn name(self) -> &'static str {
        match self {
            Balance::RoundRobin => "round-robin",
            Balance::Sticky => "sticky",
            Balance::Random => "random",
        }
    }

    /// What the value means (listed by `--help`).
    pub fn about(self) -> &'static str {
        match self {
            Balance::RoundRobin => "Each new connection goes to the next replica in turn",
            Balance::Sticky => {
                "A request with Mcp-Session-Id goes to the replica that handed the id out; \
                 others go where their connection goes (round-robin)"
            }
            Balance::Random => "Each new connection goes to a replica drawn with --seed",
        }
    }
}

impl FromStr for Balance {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        parse_word("balance", s, &Balance::ALL, Balance::name)
    }
}

/// Which authorization-server metadata `serve --auth` publishes (`--auth-metadata`, profile
/// key `auth_metadata`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuthMetadata {
    /// RFC 8414, `/.well-known/oauth-authorization-server`.
    #[default]
    Oauth,
    /// OpenID Connect discovery only, `/.well-known/openid-configuration`.
    Openid,
}

impl AuthMetadata {
    pub const ALL: [AuthMetadata; 2] = [AuthMetadata::Oauth, AuthMetadata::Openid];

    pub fn name(self) -> &'static str {
        match self {
            AuthMetadata::Oauth => "oauth",
            AuthMetadata::Openid => "openid",
        }
    }

    /// What the value means (listed by `--help`).
    pub fn about(self) -> &'static str {
        match self {
            AuthMetadata::Oauth => "RFC 8414 at /.well-known/oauth-authorization-server",
            AuthMetadata::Openid => {
                "OpenID Connect discovery only, at /.well-known/openid-configuration"
            }
        }
    }
}

impl FromStr for AuthMetadata {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        parse_word("auth metadata", s, &AuthMetadata::ALL, AuthMetadata::name)
    }
}

/// The HTTP status of a POST refused by the capacity model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "u16")]
pub enum RejectStatus {
    #[default]
    TooManyRequests,
    ServiceUnavailable,
}

impl RejectStatus {
    pub fn code(self) -> u16 {
        match self {
            RejectStatus::TooManyRequests => 429,
            RejectStatus::ServiceUnavailable => 503,
        }
    }
}

impl TryFrom<u16> for RejectStatus {
    type Error = ConfigError;
    fn try_from(code: u16) -> Result<Self, ConfigError> {
        match code {
            429 => Ok(RejectStatus::TooManyRequests),
            503 => Ok(RejectStatus::ServiceUnavailable),
            _ => Err(syntax(
                "reject status",
                &code.to_string(),
                "must be 429 or 503",
            )),
        }
    }
}

impl JsonSchema for RejectStatus {
    fn schema_name() -> Cow<'static, str> {
        "RejectStatus".into()
    }

    /// What [`RejectStatus::try_from`] takes.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "enum": [429, 503]})
    }
}

impl FromStr for RejectStatus {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let code: u16 = s
            .trim()
            .parse()
            .map_err(|_| syntax("reject status", s, "must be 429 or 503"))?;
        RejectStatus::try_from(code)
    }
}

/// How long a request occupies its service slot, in milliseconds: `fixed:20` (or just `20`),
/// `uniform:10..30`, `exp:20` (exponential with mean 20). `0` means no service time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ServiceTime {
    Fixed(f64),
    Uniform(f64, f64),
    Exp(f64),
}

impl Default for ServiceTime {
    fn default() -> Self {
        ServiceTime::Fixed(0.0)
    }
}

impl ServiceTime {
    /// True when no request ever waits for service.
    pub fn is_zero(&self) -> bool {
        matches!(self, ServiceTime::Fixed(ms) if *ms == 0.0)
    }

    /// The mean service time in milliseconds (the `S` of the `C/S` throughput ceiling).
    pub fn mean_ms(&self) -> f64 {
        match *self {
            ServiceTime::Fixed(ms) | ServiceTime::Exp(ms) => ms,
            ServiceTime::Uniform(lo, hi) => (lo + hi) / 2.0,
        }
    }
}

impl FromStr for ServiceTime {
    type Err = ConfigError;
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        const WHAT: &str = "service time";
        let ms = |s: &str| -> Result<f64, ConfigError> {
            let v: f64 = s.trim().parse().map_err(|_| {
                syntax(WHAT, text, format!("`{s}` is not a number of milliseconds"))
            })?;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(syntax(WHAT, text, "milliseconds must be finite and >= 0"))
            }
        };
        let t = text.trim();
        let (kind, arg) = t.split_once(':').unwrap_or(("fixed", t));
        match kind {
            "fixed" => Ok(ServiceTime::Fixed(ms(arg)?)),
            "exp" => Ok(ServiceTime::Exp(ms(arg)?)),
            "uniform" => {
                let (lo, hi) = arg
                    .split_once("..")
                    .ok_or_else(|| syntax(WHAT, text, "uniform needs LO..HI"))?;
                let (lo, hi) = (ms(lo)?, ms(hi)?);
                if lo > hi {
                    return Err(syntax(WHAT, text, "LO must not exceed HI"));
                }
                Ok(ServiceTime::Uniform(lo, hi))
            }
            _ => Err(syntax(
                WHAT,
                text,
                "expected fixed:MS, uniform:LO..HI or exp:MEAN",
            )),
        }
    }
}

impl fmt::Display for ServiceTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceTime::Fixed(ms) => write!(f, "fixed:{ms}"),
            ServiceTime::Uniform(lo, hi) => write!(f, "uniform:{lo}..{hi}"),
            ServiceTime::Exp(ms) => write!(f, "exp:{ms}"),
        }
    }
}

impl JsonSchema for ServiceTime {
    fn schema_name() -> Cow<'static, str> {
        "ServiceTime".into()
    }

    /// What [`ServiceTime::deserialize`] reads: milliseconds as a number, or the text syntax
    /// of [`ServiceTime::from_str`] (`LO <= HI` is checked when read).
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let ms = r"\s*(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*";
        json_schema!({
            "oneOf": [
                {"type": "number", "minimum": 0},
                {
                    "type": "string",
                    "pattern": format!(r"^\s*(?:(?:fixed:|exp:)?{ms}|uniform:{ms}\.\.{ms})$"),
                    "examples": ["fixed:20", "uniform:10..30", "exp:20"],
                },
            ]
        })
    }
}

impl<'de> Deserialize<'de> for ServiceTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A number is taken as fixed milliseconds, a string in the text syntax.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Ms(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Ms(ms) => format!("fixed:{ms}").parse(),
            Raw::Text(s) => s.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}

/// `AT:FOR`: from `AT` after the server started, all work freezes for `FOR` (durations with
/// units: `5s:2s`, `1500ms:500ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Stall {
    pub at: Duration,
    pub duration: Duration,
}

impl FromStr for Stall {
    type Err = ConfigError;
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let (at, dur) = text
            .split_once(':')
            .ok_or_else(|| syntax("stall", text, "expected AT:FOR, e.g. 5s:2s"))?;
        let parse =
            |s: &str| humantime::parse_duration(s.trim()).map_err(|e| syntax("stall", text, e));
        Ok(Stall {
            at: parse(at)?,
            duration: parse(dur)?,
        })
    }
}

impl JsonSchema for Stall {
    fn schema_name() -> Cow<'static, str> {
        "Stall".into()
    }

    /// What [`Stall::from_str`] reads: two durations (number and unit) around a colon; the
    /// units are checked when read.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let duration = r"\s*(?:[0-9]+(?:\.[0-9]+)?\s*[a-zA-Zµ]+\s*)+";
        json_schema!({
            "type": "string",
            "pattern": format!("^{duration}:{duration}$"),
            "examples": ["5s:2s", "1500ms:500ms"],
        })
    }
}

impl TryFrom<String> for Stall {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Self, ConfigError> {
        s.parse()
    }
}

/// Largest `job_item_ms + job_item_jitter_ms`: a job of 1,000 items then ends within 17 hours.
const JOB_ITEM_MS_MAX: u64 = 60_000;
/// Largest `job_queue_ms` and `job_poll_interval_ms`.
const JOB_QUEUE_MS_MAX: u64 = 3_600_000;
/// Largest `job_ttl_ms`.
const JOB_TTL_MS_MAX: u64 = 7 * 24 * 3_600_000;
/// Largest `max_jobs`: a job takes about 100 bytes, so at most about 100 MB.
const MAX_JOBS_MAX: usize = 1_000_000;
/// Largest `max_tasks`: a task takes a few hundred bytes, so at most a few hundred MB.
const MAX_TASKS_MAX: usize = 1_000_000;
/// Largest `replicas`.
const REPLICAS_MAX: usize = 64;
/// Largest `leak_bytes_per_call`: 64 MiB, so that a typo does not take the machine's memory
/// in a few calls.
const LEAK_BYTES_PER_CALL_MAX: usize = 64 << 20;
/// Largest `rss_ballast_mb`: 4 GiB, so that a typo cannot exhaust the machine.
const RSS_BALLAST_MB_MAX: usize = 4096;

/// Largest `drift_ms_per_minute`: an hour more per minute, so that a week's drift still
/// fits a `Duration`.
const DRIFT_MS_PER_MINUTE_MAX: f64 = 3_600_000.0;

/// Every knob of the built-in target. `Default` is a plain fast echo server on
/// `127.0.0.1:0`: both eras, JSON answers, no capacity limit, no faults. A profile's
/// `[target.builtin]` table deserialises into it; unknown keys are an error.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Address to listen on (HTTP). Anything but loopback prints a warning.
    pub bind: SocketAddr,
    /// Eras served on the one endpoint.
    pub era: ServedEras,
    /// Restrict to these protocol versions (empty: every version of the era).
    #[schemars(schema_with = "versions_schema")]
    pub versions: Vec<String>,
    /// JSON or SSE answers over HTTP.
    pub answer: AnswerMode,
    /// Batch policy.
    pub batches: BatchPolicy,
    /// Legacy era: hand out `Mcp-Session-Id` on `initialize`.
    pub sessions: bool,
    /// 2026-07-28: implement `server/discover`; off, it is an unknown method (-32601, HTTP
    /// 404), as the revision allows.
    pub discover: bool,
    /// 2026-07-28: list the `x-mcp-header` tools too (`region_echo`, valid; `bad_header_*`,
    /// invalid) and check the `Mcp-Param-*` headers of `region_echo` calls.
    pub header_tools: bool,
    /// 2026-07-28: `ask_input` asks whatever capabilities the client declared (a server
    /// that does not check them), so a client that declares none is asked too.
    pub input_unchecked: bool,
    /// 2026-07-28: the first N `server/discover` requests are refused HTTP 400, -32022 with
    /// `data.supported` (a server that refuses the revision a client first offers).
    pub discover_refusals: u64,
    /// 2026-07-28: `--fault version-rejected` answers with id null (HTTP 400, -32022), a
    /// refusal of the request rather than an answer to it (`http_other` for a client).
    pub version_rejected_without_id: bool,
    /// Requests served at once (0: unlimited, no capacity model).
    pub capacity: u32,
    /// POSTs that may wait for a service slot beyond `capacity`; past that they are refused.
    pub queue: u32,
    /// Status of a refused POST: 429 or 503.
    pub reject: RejectStatus,
    /// `Retry-After` seconds sent with a refusal.
    pub retry_after_s: u32,
    /// Service time of every request.
    pub service_ms: ServiceTime,
    /// Windows in which all work freezes.
    pub stall: Vec<Stall>,
    /// A leak on purpose: every call of a tool retains this many bytes, written, for as
    /// long as the target runs (its RSS grows by that much per call); 0: off.
    pub leak_bytes_per_call: usize,
    /// A leak on purpose: every Nth call of a tool opens a file descriptor (`/dev/null`) and
    /// keeps it open for as long as the target runs; 0: off.
    pub leak_fd_every: u64,
    /// A drift on purpose: every request's service time grows by this many milliseconds
    /// per minute elapsed since the target started; 0: off.
    pub drift_ms_per_minute: f64,
    /// Exact faults: `drop=10,garbage=7` (every Nth request).
    pub fault: FaultEvery,
    /// Seeded random faults: `drop=0.01,truncate=0.001` (probability per request).
    pub fault_random: FaultOdds,
    /// Seed of the random faults and of the service-time draws.
    pub seed: u64,
    /// Largest POST body accepted (bytes); larger gets 413.
    pub max_body_bytes: usize,
    /// Largest stdio line accepted (bytes).
    pub max_line_bytes: usize,
    /// Open connections at most; more are closed at once.
    pub max_connections: usize,
    /// `Origin` values accepted besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// Job API: milliseconds each item of a job takes.
    pub job_item_ms: u64,
    /// Job API: each item takes up to this many milliseconds more (a seeded draw).
    pub job_item_jitter_ms: u64,
    /// Job API: milliseconds a job stays `queued` before its first item starts.
    pub job_queue_ms: u64,
    /// Job API: the `pollInterval` (milliseconds) `job_status` advises.
    pub job_poll_interval_ms: u64,
    /// Job API: item `i` (from 0) fails when `(i + 1) % K == 0`; 0: none fails.
    pub job_fail_every: u64,
    /// Job API, a bug on purpose: a report leaves out item `i` when `(i + 1) % L == 0`;
    /// 0: off.
    pub job_lose_every: u64,
    /// Job API: milliseconds after its creation a job is forgotten.
    pub job_ttl_ms: u64,
    /// Job API: jobs held at most.
    pub max_jobs: usize,
    /// Tasks: the `ttl` (ms) of a task, and the most a 2025-11-25 `params.task.ttl` gets.
    pub task_ttl_ms: u64,
    /// Tasks: the `pollInterval` (ms) tasks advise.
    pub task_poll_interval_ms: u64,
    /// Tasks: tasks working at once (0: unlimited); more wait, `working`, for a slot.
    pub task_capacity: usize,
    /// Tasks: tasks held at most; then ended ones make room, else creation is refused.
    pub max_tasks: usize,
    /// Exact task faults: `forget=5,regress=3` (every Nth task; `get-error`: every Nth
    /// `tasks/get`).
    pub task_fault: Periods<TaskFault>,
    /// Exact progress faults of the `progress` tool: `after-result=2,down=3`.
    pub progress_fault: Periods<ProgressFault>,
    /// SSE answers of 2025-11-25 requests: every Nth stream is closed after a priming event
    /// with an id and `retry:`, its answer delivered on a GET with `Last-Event-ID`; 0: off.
    pub sse_close_early: u64,
    /// With `sse_close_early`: such GETs are refused 405, so those answers never come.
    pub sse_resume_refuse: bool,
    /// The legacy HTTP+SSE transport (2024-11-05): `GET /sse` opens a session's stream, its
    /// `endpoint` event names `POST /messages?session_id=…`, every answer comes on the stream.
    pub legacy_sse: bool,
    /// With `legacy_sse`: every Nth request (not `initialize`) POSTed in a session ends the
    /// session: answered 202 and never run, the stream ended once the session's other
    /// requests are answered, later POSTs naming it answered 404; 0: off.
    pub legacy_sse_end_every: u64,
    /// HTTP: server replicas behind one in-process load balancer on the one port, each with
    /// its own capacity model and (unless `shared_sessions`) its own sessions.
    pub replicas: usize,
    /// How the load balancer picks a replica.
    pub balance: Balance,
    /// Every replica knows every session (as if kept in a shared store).
    pub shared_sessions: bool,
    /// Races, a bug on purpose: `counter_add` reads, pauses `race_window_ms`, then writes
    /// what it read plus its increment, overwriting what others added meanwhile.
    pub racy: bool,
    /// With `racy`: milliseconds between the read and the write (0: a yield).
    pub race_window_ms: u64,
    /// Races: `counter_read` sees a write only this many milliseconds after it was made
    /// (eventually consistent reads); 0: at once.
    pub read_lag_ms: u64,
    /// Races: the first `tools/call` starts a lazy initialisation this long that every call
    /// waits for; 0: none.
    pub lazy_init_ms: u64,
    /// Races, a bug on purpose: when this many calls wait on the lazy initialisation at
    /// once, it deadlocks: they, and every call after, hang forever; 0: never.
    pub first_call_deadlock: u32,
    /// Job API, a bug on purpose: every Nth `job_start` naming a known `request_key`
    /// starts a new job anyway (a double effect, or an accepted conflict when its input
    /// differs); 0: off.
    pub job_key_break_every: u64,
    /// HTTP: every MCP request needs a bearer token of this target's own authorization
    /// server, served on the same port (docs/target.md, "Authorization").
    pub auth: bool,
    /// The one client the authorization server knows.
    pub auth_client_id: String,
    /// The environment variable holding that client's secret (read when the target starts).
    pub auth_client_secret_env: String,
    /// The client's public key (PEM), for `private_key_jwt`.
    pub auth_client_key: Option<std::path::PathBuf>,
    /// `private_key_jwt`: the assertion's `aud` must be the token endpoint's URL instead of
    /// the issuer identifier (for clients written before SEP-1046 / RFC 7523bis).
    #[serde(default)]
    pub auth_jwt_aud_token_endpoint: bool,
    /// The scope MCP requests need.
    pub auth_scope: String,
    /// Resources (RFC 8707) the authorization server issues tokens for besides this
    /// target's own `/mcp` (another server checking them by introspection); `*`: any.
    pub auth_resources: Vec<String>,
    /// How long a token lives, in seconds.
    pub auth_token_lifetime_s: u64,
    /// Seconds after the start at which every token issued so far is revoked.
    pub auth_revoke_at: Vec<f64>,
    /// Which authorization-server metadata is published.
    pub auth_metadata: AuthMetadata,
    /// Milliseconds each token request takes before it is answered.
    pub auth_token_delay_ms: u64,
    /// The authorization code grant with PKCE, dynamic registration (RFC 7591), client ID
    /// metadata documents and rotating refresh tokens, besides client credentials.
    #[serde(default)]
    pub auth_code: bool,
    /// `tools/call` needs this scope besides `auth_scope` (403 `insufficient_scope` without
    /// it: a step-up).
    #[serde(default)]
    pub auth_step_up_scope: Option<String>,
    /// Dynamic registration gives every client a secret (`none` is not offered).
    #[serde(default)]
    pub auth_code_confidential: bool,
    /// stdio: milliseconds slept before stdin is read at all (a runtime's start-up; a
    /// client's `initialize` waits for it).
    pub startup_ms: u64,
    /// stdio: MiB allocated at the start, every page written, and held until exit, so that
    /// the process's RSS is at least this much.
    pub rss_ballast_mb: usize,
    /// stdio: one line written to stdout before anything else (a server that prints a
    /// banner: stdout pollution a client must skip).
    pub stdout_banner: Option<String>,
    /// stdio: answer this many `tools/call` requests; on reading the next one, say so on
    /// stderr and exit the process at once with code 3, that request unanswered.
    pub exit_after_calls: Option<u64>,
    /// stdio: serve requests (`initialize` and notifications aside) one at a time in the
    /// order read, each after the previous one was answered (a single-threaded server).
    pub serial: bool,
}

/// Schema of `versions`: the revisions [`ServeConfig::served_versions`] knows.
fn versions_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"enum": SERVABLE.map(Revision::as_str)}})
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            era: ServedEras::Both,
            versions: Vec::new(),
            answer: AnswerMode::Json,
            batches: BatchPolicy::Auto,
            sessions: true,
            discover: true,
            header_tools: false,
            input_unchecked: false,
            discover_refusals: 0,
            version_rejected_without_id: false,
            capacity: 0,
            queue: 0,
            reject: RejectStatus::TooManyRequests,
            retry_after_s: 1,
            service_ms: ServiceTime::default(),
            stall: Vec::new(),
            leak_bytes_per_call: 0,
            leak_fd_every: 0,
            drift_ms_per_minute: 0.0,
            fault: FaultEvery::default(),
            fault_random: FaultOdds::default(),
            seed: 0,
            max_body_bytes: 4 << 20,
            max_line_bytes: 4 << 20,
            max_connections: 1024,
            allowed_origins: Vec::new(),
            job_item_ms: 10,
            job_item_jitter_ms: 0,
            job_queue_ms: 0,
            job_poll_interval_ms: 100,
            job_fail_every: 0,
            job_lose_every: 0,
            job_ttl_ms: 300_000,
            max_jobs: 10_000,
            task_ttl_ms: 300_000,
            task_poll_interval_ms: 100,
            task_capacity: 0,
            max_tasks: 100_000,
            task_fault: Periods::default(),
            progress_fault: Periods::default(),
            sse_close_early: 0,
            sse_resume_refuse: false,
            legacy_sse: false,
            legacy_sse_end_every: 0,
            replicas: 1,
            balance: Balance::RoundRobin,
            shared_sessions: false,
            racy: false,
            race_window_ms: 1,
            read_lag_ms: 0,
            lazy_init_ms: 0,
            first_call_deadlock: 0,
            job_key_break_every: 0,
            auth: false,
            auth_client_id: "mcpload".into(),
            auth_client_secret_env: "MCPLOAD_CLIENT_SECRET".into(),
            auth_client_key: None,
            auth_jwt_aud_token_endpoint: false,
            auth_scope: "mcp".into(),
            auth_resources: Vec::new(),
            auth_token_lifetime_s: 3600,
            auth_revoke_at: Vec::new(),
            auth_metadata: AuthMetadata::Oauth,
            auth_token_delay_ms: 0,
            auth_code: false,
            auth_step_up_scope: None,
            auth_code_confidential: false,
            startup_ms: 0,
            rss_ballast_mb: 0,
            stdout_banner: None,
            exit_after_calls: None,
            serial: false,
        }
    }
}

impl ServeConfig {
    /// The protocol versions served, newest first; an error when the restriction leaves none
    /// or names an unknown version.
    pub fn served_versions(&self) -> Result<Vec<Revision>, ConfigError> {
        let in_era = |v: Revision| match self.era {
            ServedEras::Both => true,
            ServedEras::Legacy => !v.is_modern(),
            ServedEras::Modern => v.is_modern(),
        };
        let mut out = Vec::new();
        if self.versions.is_empty() {
            out.extend(SERVABLE.iter().copied().filter(|v| in_era(*v)));
        } else {
            for name in &self.versions {
                let v = SERVABLE
                    .into_iter()
                    .find(|v| v.as_str() == name)
                    .ok_or_else(|| {
                        ConfigError::Invalid(format!(
                            "unknown protocol version `{name}` (known: {})",
                            SERVABLE.map(Revision::as_str).join(", ")
                        ))
                    })?;
                if !in_era(v) {
                    return Err(ConfigError::Invalid(format!(
                        "version {name} is not in the {:?} era",
                        self.era
                    )));
                }
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out.sort_by(|a, b| b.cmp(a));
        Ok(out)
    }

    /// Checks everything that parsing alone cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.served_versions()?;
        if self.queue > 0 && self.capacity == 0 {
            return Err(ConfigError::Invalid("--queue needs --capacity".into()));
        }
        if self.max_body_bytes == 0 || self.max_line_bytes == 0 || self.max_connections == 0 {
            return Err(ConfigError::Invalid(
                "body, line and connection limits must be > 0".into(),
            ));
        }
        if (self.auth_code || self.auth_step_up_scope.is_some()) && !self.auth {
            return Err(ConfigError::Invalid(
                "auth_code and auth_step_up_scope need auth".into(),
            ));
        }
        if self.auth_code_confidential && !self.auth_code {
            return Err(ConfigError::Invalid(
                "auth_code_confidential needs auth_code".into(),
            ));
        }
        if self.auth_token_delay_ms > JOB_ITEM_MS_MAX {
            return Err(ConfigError::Invalid(format!(
                "auth_token_delay_ms must be at most {JOB_ITEM_MS_MAX} (one minute)"
            )));
        }
        if self.legacy_sse && self.replicas > 1 {
            return Err(ConfigError::Invalid(
                "legacy_sse is served by one replica (its sessions are not balanced)".into(),
            ));
        }
        if self.legacy_sse_end_every > 0 && !self.legacy_sse {
            return Err(ConfigError::Invalid(
                "legacy_sse_end_every needs legacy_sse".into(),
            ));
        }
        if !(1..=REPLICAS_MAX).contains(&self.replicas) {
            return Err(ConfigError::Invalid(format!(
                "replicas must be from 1 to {REPLICAS_MAX}"
            )));
        }
        self.validate_races()?;
        self.validate_misbehaviour()?;
        self.validate_start()?;
        self.validate_jobs()
    }

    /// The stdio start-up knobs: bounded, and the banner one line.
    fn validate_start(&self) -> Result<(), ConfigError> {
        if self.startup_ms > JOB_QUEUE_MS_MAX {
            return Err(ConfigError::Invalid(format!(
                "startup_ms must be at most {JOB_QUEUE_MS_MAX} (one hour)"
            )));
        }
        if self.rss_ballast_mb > RSS_BALLAST_MB_MAX {
            return Err(ConfigError::Invalid(format!(
                "rss_ballast_mb must be at most {RSS_BALLAST_MB_MAX} (4 GiB)"
            )));
        }
        if self
            .stdout_banner
            .as_ref()
            .is_some_and(|b| b.contains(['\n', '\r']))
        {
            return Err(ConfigError::Invalid(
                "stdout_banner must be one line (no line break)".into(),
            ));
        }
        Ok(())
    }

    /// The knobs only the stdio front has, by their profile names, as set here.
    pub(crate) fn stdio_only_knobs(&self) -> Vec<&'static str> {
        [
            ("startup_ms", self.startup_ms > 0),
            ("rss_ballast_mb", self.rss_ballast_mb > 0),
            ("stdout_banner", self.stdout_banner.is_some()),
            ("exit_after_calls", self.exit_after_calls.is_some()),
            ("serial", self.serial),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }

    /// The leak and drift knobs: bounded, so that a typo cannot exhaust the machine.
    fn validate_misbehaviour(&self) -> Result<(), ConfigError> {
        if self.leak_bytes_per_call > LEAK_BYTES_PER_CALL_MAX {
            return Err(ConfigError::Invalid(format!(
                "leak_bytes_per_call must be at most {LEAK_BYTES_PER_CALL_MAX} (64 MiB)"
            )));
        }
        if !(0.0..=DRIFT_MS_PER_MINUTE_MAX).contains(&self.drift_ms_per_minute) {
            return Err(ConfigError::Invalid(format!(
                "drift_ms_per_minute must be from 0 to {DRIFT_MS_PER_MINUTE_MAX} (an hour a \
                 minute)"
            )));
        }
        Ok(())
    }

    /// The race knobs: a deadlock needs a lazy initialisation, and two calls to wait.
    fn validate_races(&self) -> Result<(), ConfigError> {
        for (name, value, max) in [
            ("race_window_ms", self.race_window_ms, JOB_ITEM_MS_MAX),
            ("read_lag_ms", self.read_lag_ms, JOB_QUEUE_MS_MAX),
            ("lazy_init_ms", self.lazy_init_ms, JOB_QUEUE_MS_MAX),
        ] {
            if value > max {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be at most {max}"
                )));
            }
        }
        match self.first_call_deadlock {
            0 => Ok(()),
            1 => Err(ConfigError::Invalid(
                "first_call_deadlock must be 0 (off) or 2 or more: the calls that wait on \
                 each other"
                    .into(),
            )),
            _ if self.lazy_init_ms == 0 => Err(ConfigError::Invalid(
                "first_call_deadlock needs lazy_init_ms: the initialisation the first calls \
                 wait on"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// The job API's and the tasks' knobs: every job ends within a day and is held a while.
    fn validate_jobs(&self) -> Result<(), ConfigError> {
        // Each knob with its lowest and highest valid value, and the highest in words.
        let bounds: [(&str, u64, u64, u64, &str); 9] = [
            (
                "job_item_ms + job_item_jitter_ms",
                self.job_item_ms.saturating_add(self.job_item_jitter_ms),
                0,
                JOB_ITEM_MS_MAX,
                " (one minute)",
            ),
            (
                "job_queue_ms",
                self.job_queue_ms,
                0,
                JOB_QUEUE_MS_MAX,
                " (one hour)",
            ),
            (
                "job_poll_interval_ms",
                self.job_poll_interval_ms,
                0,
                JOB_QUEUE_MS_MAX,
                " (one hour)",
            ),
            (
                "job_ttl_ms",
                self.job_ttl_ms,
                1,
                JOB_TTL_MS_MAX,
                " (one week)",
            ),
            ("max_jobs", self.max_jobs as u64, 1, MAX_JOBS_MAX as u64, ""),
            (
                "task_ttl_ms",
                self.task_ttl_ms,
                1,
                JOB_TTL_MS_MAX,
                " (one week)",
            ),
            (
                "task_poll_interval_ms",
                self.task_poll_interval_ms,
                0,
                JOB_QUEUE_MS_MAX,
                " (one hour)",
            ),
            (
                "max_tasks",
                self.max_tasks as u64,
                1,
                MAX_TASKS_MAX as u64,
                "",
            ),
            (
                "task_capacity",
                self.task_capacity as u64,
                0,
                MAX_TASKS_MAX as u64,
                "",
            ),
        ];
        for (name, value, min, max, words) in bounds {
            if !(min..=max).contains(&value) {
                let range = if min == 0 {
                    format!("at most {max}")
                } else {
                    format!("from {min} to {max}")
                };
                return Err(ConfigError::Invalid(format!(
                    "{name} must be {range}{words}"
                )));
            }
        }
        Ok(())
    }

    /// True when the listener is reachable from other hosts.
    pub fn binds_beyond_loopback(&self) -> bool {
        !self.bind.ip().is_loopback()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_time_syntax() {
        assert_eq!("20".parse::<ServiceTime>(), Ok(ServiceTime::Fixed(20.0)));
        assert_eq!(
            "fixed:2.5".parse::<ServiceTime>(),
            Ok(ServiceTime::Fixed(2.5))
        );
        assert_eq!(
            "uniform:10..30".parse::<ServiceTime>(),
            Ok(ServiceTime::Uniform(10.0, 30.0))
        );
        assert_eq!("exp:20".parse::<ServiceTime>(), Ok(ServiceTime::Exp(20.0)));
        assert!("uniform:30..10".parse::<ServiceTime>().is_err());
        assert!("exp:-1".parse::<ServiceTime>().is_err());
        assert!("gauss:3".parse::<ServiceTime>().is_err());
        assert_eq!(ServiceTime::Uniform(10.0, 30.0).mean_ms(), 20.0);
    }

    #[test]
    fn stall_syntax() {
        let s: Stall = "5s:1500ms".parse().unwrap();
        assert_eq!(s.at, Duration::from_secs(5));
        assert_eq!(s.duration, Duration::from_millis(1500));
        assert!("5:2".parse::<Stall>().is_err());
        assert!("5s".parse::<Stall>().is_err());
    }

    #[test]
    fn profile_table_parses_and_rejects_unknown_keys() {
        let cfg: ServeConfig = serde_json::from_str(
            r#"{"capacity":4,"queue":4,"reject":503,"service_ms":"exp:20",
                "fault":"drop=10,null-id=3","stall":["1s:2s"],"era":"legacy"}"#,
        )
        .unwrap();
        assert_eq!(cfg.capacity, 4);
        assert_eq!(cfg.reject, RejectStatus::ServiceUnavailable);
        assert_eq!(cfg.service_ms, ServiceTime::Exp(20.0));
        assert_eq!(cfg.era, ServedEras::Legacy);
        assert!(cfg.validate().is_ok());
        let num: ServeConfig = serde_json::from_str(r#"{"service_ms":15}"#).unwrap();
        assert_eq!(num.service_ms, ServiceTime::Fixed(15.0));
        assert!(serde_json::from_str::<ServeConfig>(r#"{"capacty":4}"#).is_err());
        assert!(serde_json::from_str::<ServeConfig>(r#"{"reject":500}"#).is_err());
    }

    #[test]
    fn profile_toml_table() {
        let cfg: ServeConfig = toml::from_str(
            r#"
            bind = "127.0.0.1:0"
            capacity = 4
            queue = 4
            reject = 429
            service_ms = "uniform:10..30"
            fault = "drop=10"
            fault_random = "garbage=0.01"
            stall = ["1s:500ms"]
            answer = "sse"
            batches = "accept"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.service_ms, ServiceTime::Uniform(10.0, 30.0));
        assert_eq!(cfg.answer, AnswerMode::Sse);
        assert_eq!(cfg.batches, BatchPolicy::Accept);
        assert_eq!(cfg.fault.to_string(), "drop=10");
        assert_eq!(cfg.stall[0].duration, Duration::from_millis(500));
        assert!(toml::from_str::<ServeConfig>("fault = \"drop=0\"").is_err());
    }

    #[test]
    fn words_read_as_in_profiles() {
        fn same<
            T: FromStr<Err = ConfigError> + serde::de::DeserializeOwned + PartialEq + fmt::Debug,
        >(
            all: &[T],
            name: fn(&T) -> &'static str,
        ) {
            for v in all {
                let word = name(v);
                assert_eq!(word.parse::<T>().as_ref(), Ok(v));
                assert_eq!(&serde_json::from_value::<T>(word.into()).unwrap(), v);
            }
        }
        same(&ServedEras::ALL, |v| v.name());
        same(&AnswerMode::ALL, |v| v.name());
        same(&BatchPolicy::ALL, |v| v.name());
        same(&Balance::ALL, |v| v.name());
        assert!("Both".parse::<ServedEras>().is_err());
    }

    #[test]
    fn version_restriction() {
        let all = ServeConfig::default().served_versions().unwrap();
        assert_eq!(all.first(), Some(&Revision::V2026_07_28));
        assert_eq!(all.len(), 4);
        let cfg = ServeConfig {
            versions: vec!["2024-11-05".into()],
            ..ServeConfig::default()
        };
        assert!(cfg.served_versions().is_err());
        let cfg = ServeConfig {
            era: ServedEras::Legacy,
            versions: vec!["2026-07-28".into()],
            ..ServeConfig::default()
        };
        assert!(cfg.served_versions().is_err());
        let cfg = ServeConfig {
            versions: vec!["2025-06-18".into()],
            ..ServeConfig::default()
        };
        assert_eq!(cfg.served_versions().unwrap(), vec![Revision::V2025_06_18]);
        let cfg = ServeConfig {
            queue: 3,
            ..ServeConfig::default()
        };
        assert!(cfg.validate().is_err());
    }

    #[test]
    fn task_knobs_read_and_check() {
        let cfg: ServeConfig = toml::from_str(
            r#"
            task_ttl_ms = 5000
            task_poll_interval_ms = 20
            task_capacity = 8
            max_tasks = 50
            task_fault = "regress=3,get-error=4"
            progress_fault = "down=2"
            "#,
        )
        .unwrap();
        assert_eq!((cfg.task_ttl_ms, cfg.task_poll_interval_ms), (5000, 20));
        assert_eq!((cfg.task_capacity, cfg.max_tasks), (8, 50));
        assert_eq!(cfg.task_fault.to_string(), "regress=3,get-error=4");
        assert_eq!(cfg.progress_fault.period(ProgressFault::Down), 2);
        assert!(cfg.validate().is_ok());
        assert!(toml::from_str::<ServeConfig>("task_fault = \"drop=2\"").is_err());
        for bad in [r#"{"task_ttl_ms":0}"#, r#"{"max_tasks":0}"#] {
            let cfg: ServeConfig = serde_json::from_str(bad).unwrap();
            assert!(cfg.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn race_knobs_read_and_check() {
        let cfg: ServeConfig = toml::from_str(
            r#"
            racy = true
            race_window_ms = 5
            read_lag_ms = 50
            lazy_init_ms = 100
            first_call_deadlock = 4
            job_key_break_every = 3
            "#,
        )
        .unwrap();
        assert!(cfg.racy);
        assert_eq!((cfg.race_window_ms, cfg.read_lag_ms), (5, 50));
        assert_eq!((cfg.lazy_init_ms, cfg.first_call_deadlock), (100, 4));
        assert_eq!(cfg.job_key_break_every, 3);
        assert!(cfg.validate().is_ok());
        for (bad, says) in [
            (r#"{"first_call_deadlock":2}"#, "needs lazy_init_ms"),
            (
                r#"{"first_call_deadlock":1,"lazy_init_ms":5}"#,
                "0 (off) or 2 or more",
            ),
            (r#"{"read_lag_ms":3600001}"#, "read_lag_ms must be at most"),
        ] {
            let cfg: ServeConfig = serde_json::from_str(bad).unwrap();
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn leak_and_drift_knobs_read_and_check() {
        let cfg: ServeConfig = toml::from_str(
            r#"
            leak_bytes_per_call = 65536
            leak_fd_every = 10
            drift_ms_per_minute = 2.5
            "#,
        )
        .unwrap();
        assert_eq!(cfg.leak_bytes_per_call, 65536);
        assert_eq!(cfg.leak_fd_every, 10);
        assert_eq!(cfg.drift_ms_per_minute, 2.5);
        assert!(cfg.validate().is_ok());
        // A whole number of milliseconds reads as the float knob too.
        let whole: ServeConfig = toml::from_str("drift_ms_per_minute = 3").unwrap();
        assert_eq!(whole.drift_ms_per_minute, 3.0);
        let off = ServeConfig::default();
        assert_eq!(
            (
                off.leak_bytes_per_call,
                off.leak_fd_every,
                off.drift_ms_per_minute
            ),
            (0, 0, 0.0)
        );
        assert!(toml::from_str::<ServeConfig>("leak_fd_every = -1").is_err());
        for (bad, says) in [
            (
                r#"{"leak_bytes_per_call":67108865}"#,
                "leak_bytes_per_call must be at most 67108864",
            ),
            (
                r#"{"drift_ms_per_minute":-1}"#,
                "drift_ms_per_minute must be from 0",
            ),
            (
                r#"{"drift_ms_per_minute":3600001}"#,
                "drift_ms_per_minute must be from 0",
            ),
        ] {
            let cfg: ServeConfig = serde_json::from_str(bad).unwrap();
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn stdio_start_knobs_read_and_check() {
        let cfg: ServeConfig = toml::from_str(
            r#"
            startup_ms = 1500
            rss_ballast_mb = 64
            stdout_banner = "hello"
            exit_after_calls = 0
            serial = true
            "#,
        )
        .unwrap();
        assert_eq!((cfg.startup_ms, cfg.rss_ballast_mb), (1500, 64));
        assert_eq!(cfg.stdout_banner.as_deref(), Some("hello"));
        assert_eq!((cfg.exit_after_calls, cfg.serial), (Some(0), true));
        assert!(cfg.validate().is_ok());
        assert_eq!(
            cfg.stdio_only_knobs(),
            [
                "startup_ms",
                "rss_ballast_mb",
                "stdout_banner",
                "exit_after_calls",
                "serial"
            ]
        );
        assert!(ServeConfig::default().stdio_only_knobs().is_empty());
        for (bad, says) in [
            (
                r#"{"rss_ballast_mb":4097}"#,
                "rss_ballast_mb must be at most",
            ),
            (r#"{"startup_ms":3600001}"#, "startup_ms must be at most"),
            (r#"{"stdout_banner":"a\nb"}"#, "one line"),
        ] {
            let cfg: ServeConfig = serde_json::from_str(bad).unwrap();
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn job_knobs_read_and_check() {
        let cfg: ServeConfig = toml::from_str(
            r#"
            job_item_ms = 5
            job_item_jitter_ms = 2
            job_queue_ms = 50
            job_poll_interval_ms = 25
            job_fail_every = 3
            job_lose_every = 7
            job_ttl_ms = 1000
            max_jobs = 10
            "#,
        )
        .unwrap();
        assert_eq!((cfg.job_item_ms, cfg.job_item_jitter_ms), (5, 2));
        assert_eq!((cfg.job_fail_every, cfg.job_lose_every), (3, 7));
        assert_eq!((cfg.job_queue_ms, cfg.job_poll_interval_ms), (50, 25));
        assert_eq!((cfg.job_ttl_ms, cfg.max_jobs), (1000, 10));
        assert!(cfg.validate().is_ok());
        for (bad, says) in [
            (r#"{"job_ttl_ms":0}"#, "job_ttl_ms must be from 1"),
            (r#"{"max_jobs":0}"#, "max_jobs must be from 1"),
            (
                r#"{"job_item_ms":60000,"job_item_jitter_ms":1}"#,
                "at most 60000",
            ),
            (
                r#"{"job_queue_ms":3600001}"#,
                "job_queue_ms must be at most",
            ),
        ] {
            let cfg: ServeConfig = serde_json::from_str(bad).unwrap();
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
