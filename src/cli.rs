//! The command line (clap derive): one variant of [`Command`] per subcommand, each with its
//! arguments and the glue that turns them into a library call.

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use mcpload::auth::JwtAudience;
use mcpload::client::split_header;
use mcpload::correlator::{ToolErrors, ValidateOutput};
use mcpload::profile::{
    AuthMethod, AuthSpec, Levels, OAuthSpec, Spacing, TlsSpec, parse_bytes, parse_duration,
};
use mcpload::run::{LevelsFlag, Overrides, TargetFlag};
use mcpload::server::{
    self, AnswerMode, AuthMetadata, Balance, BatchPolicy, FaultEvery, FaultOdds, HostileConfig,
    HostileKind, HostileTransport, Periods, ProgressFault, RejectStatus, ServeConfig, ServedEras,
    ServiceTime, Stall, TaskFault,
};
use std::io::Write;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Load generator and benchmarking tool for MCP servers: pairs every response to its request
/// by id, counts every pairing anomaly, and sweeps load to find where a server saturates and
/// where it fails.
#[derive(Parser, Debug)]
#[command(name = "mcpload", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Fire a workload at a target and sweep the load: a profile (profiles/*.toml) and/or
    /// flags. Writes results/<UTC timestamp>-<name>/ (or --out) step by step.
    Run(Box<RunArgs>),
    /// Run the built-in reference MCP server (HTTP on 127.0.0.1, or stdio), with a capacity
    /// model, exact fault injection and ground-truth counters at GET /stats.
    Serve(Box<ServeArgs>),
    /// Re-render report.html, the SVG plots and the terminal report of a run folder, and check
    /// thresholds on it (exit 1 when one fails).
    Report(ReportArgs),
    /// Set run folders side by side: BASE NEW with a fixed tolerance, or --baseline DIR...
    /// --candidate DIR... with a verdict that knows the noise between runs; exit 1 on a
    /// regression.
    Compare(CompareArgs),
    /// Run a profile in K interleaved pairs against two targets (the order in each pair drawn
    /// from a recorded seed) and judge every figure regressed, improved, equivalent or
    /// inconclusive against a noise band; exit 1 on any regression, 2 when it could not run.
    Ab(Box<AbArgs>),
    /// Merge the run folders of one run's segments (`run --segment I/N`) into one run folder:
    /// counts added, histograms merged, verdicts, knee and gates recomputed; exit codes as
    /// `run`'s (2 when the folders cannot be merged).
    Merge(MergeArgs),
    /// Tell how a server treats the cases that break pairing (batches, colliding and null ids,
    /// malformed JSON, unknown methods, cancellation) and whether it runs tasks and asks for
    /// input, after connecting to it as a load run would: era and version agreed,
    /// capabilities, tools. With --races: what breaks only under concurrency.
    Probe(Box<ProbeArgs>),
    /// Profiles as editors and CI see them: the JSON Schema of the format, or a profile
    /// checked without running it.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Write a starter profile from what a server lists and does: read-only tools in the mix,
    /// writes commented out with a warning, each tool probed for its timeout (the slow and the
    /// failing left out, with the reason), a sweep and gates from a short calibration.
    Init(Box<InitArgs>),
    /// Log in to a protected server once (OAuth authorization code with PKCE), show or forget
    /// the stored logins that `run --oauth-login` refreshes at load.
    #[command(subcommand)]
    Auth(crate::cli_auth::AuthCommand),
}

/// `mcpload profile …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ProfileCommand {
    /// Print the JSON Schema of the profile format (draft 07), generated from the types that
    /// parse profiles: for TOML language servers (Taplo, Tombi) and CI (docs/profiles.md,
    /// "Editors").
    Schema,
    /// Check a profile as `run` does before it connects, without running it: exit 0 when it
    /// is valid, 2 with FILE:LINE:COL and the field when not. An unset `*_env` variable is
    /// no error here (`run` reads them).
    Check {
        /// The workload profile (TOML).
        file: PathBuf,
    },
}

impl ProfileCommand {
    fn run(self) -> anyhow::Result<()> {
        match self {
            ProfileCommand::Schema => {
                let text = mcpload::profile::schema::text();
                match std::io::stdout().lock().write_all(text.as_bytes()) {
                    // A reader that stopped early (`| head`) took what it wanted.
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                    _ => Ok(()),
                }
            }
            ProfileCommand::Check { file } => {
                mcpload::run::check(&file).map_err(|e| UsageError(e.into()))?;
                println!("{}: valid", file.display());
                Ok(())
            }
        }
    }
}

impl Command {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Run(args) => args.run().await,
            Command::Serve(args) => args.run().await,
            Command::Report(args) => args.run(),
            Command::Compare(args) => args.run(),
            Command::Ab(args) => args.run().await,
            Command::Merge(args) => args.run(),
            Command::Probe(args) => args.run().await,
            Command::Profile(command) => command.run(),
            Command::Init(args) => args.run().await,
            Command::Auth(cmd) => cmd.run().await,
        }
    }
}

/// Arguments of `mcpload serve`; an absent option keeps the default of `ServeConfig`.
/// Syntax of every value: docs/target.md.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Serve MCP on stdin/stdout (one message per line; logs on stderr) instead of HTTP.
    #[arg(long)]
    pub stdio: bool,
    /// Write the final counters (the JSON of GET /stats) to FILE when the server stops.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Listen address [default: 127.0.0.1:0]; anything but loopback prints a warning.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<SocketAddr>,
    /// Eras served [default: both].
    #[arg(long, value_parser = one_of(&ServedEras::ALL, ServedEras::name, ServedEras::about))]
    pub era: Option<ServedEras>,
    /// Serve only these protocol versions (comma-separated, e.g. 2025-06-18,2026-07-28).
    #[arg(long, value_name = "V,..", value_delimiter = ',')]
    pub versions: Vec<String>,
    /// Answer POSTs with one JSON body or an SSE stream [default: json].
    #[arg(long, value_parser = one_of(&AnswerMode::ALL, AnswerMode::name, AnswerMode::about))]
    pub answer: Option<AnswerMode>,
    /// Batches: as the revision says (auto), always accepted, always rejected [default: auto].
    #[arg(long, value_parser = one_of(&BatchPolicy::ALL, BatchPolicy::name, BatchPolicy::about))]
    pub batches: Option<BatchPolicy>,
    /// Hand out no Mcp-Session-Id on initialize.
    #[arg(long)]
    pub no_sessions: bool,
    /// Do not implement server/discover (2026-07-28 allows it): it gets -32601, HTTP 404.
    #[arg(long)]
    pub no_discover: bool,
    /// 2026-07-28: list x-mcp-header tools (region_echo valid, bad_header_* invalid) and
    /// check the Mcp-Param-* headers of region_echo calls.
    #[arg(long)]
    pub header_tools: bool,
    /// 2026-07-28: ask_input asks for input whatever client capabilities the call declared
    /// (a server that does not check them).
    #[arg(long)]
    pub input_unchecked: bool,
    /// 2026-07-28: refuse the first N server/discover requests with HTTP 400, -32022 and
    /// data.supported [default: 0].
    #[arg(long, value_name = "N")]
    pub discover_refusals: Option<u64>,
    /// 2026-07-28: --fault version-rejected refuses with id null (HTTP 400, -32022): a
    /// refusal of the request, not an answer to it.
    #[arg(long)]
    pub version_rejected_without_id: bool,
    /// Requests served at once (0: unlimited, no capacity model) [default: 0].
    #[arg(long, value_name = "N")]
    pub capacity: Option<u32>,
    /// POSTs that may wait beyond --capacity; more are refused [default: 0].
    #[arg(long, value_name = "M")]
    pub queue: Option<u32>,
    /// Status of a refused POST: 429 or 503 [default: 429].
    #[arg(long, value_name = "STATUS")]
    pub reject: Option<RejectStatus>,
    /// Retry-After seconds sent with a refusal [default: 1].
    #[arg(long, value_name = "S")]
    pub retry_after: Option<u32>,
    /// Service time of every request in ms: fixed:20 (or 20), uniform:10..30, exp:20.
    #[arg(long, value_name = "DIST")]
    pub service_ms: Option<ServiceTime>,
    /// Freeze all work from AT for FOR after start, e.g. 5s:2s (repeatable).
    #[arg(long, value_name = "AT:FOR")]
    pub stall: Vec<Stall>,
    /// A leak on purpose: every tools/call retains N bytes, written (RSS grows N a call),
    /// until the server stops; at most 67108864 [default: 0: off].
    #[arg(long, value_name = "N")]
    pub leak_bytes_per_call: Option<usize>,
    /// A leak on purpose: every Nth tools/call opens /dev/null and never closes it
    /// [default: 0: off].
    #[arg(long, value_name = "N")]
    pub leak_fd_every: Option<u64>,
    /// A drift on purpose: every request's service time grows by X ms per minute since the
    /// server started, 0 to 3600000 [default: 0: off].
    #[arg(long, value_name = "X")]
    pub drift_ms_per_minute: Option<f64>,
    /// Exact faults, every Nth request: drop=N,null-id=N,unknown-id=N,duplicate=N,both=N,
    /// bad-version=N,garbage=N,truncate=N.
    #[arg(long, value_name = "KIND=N,..")]
    pub fault: Option<FaultEvery>,
    /// Seeded random faults, a probability per request: drop=0.01,garbage=0.001,...
    #[arg(long, value_name = "KIND=P,..")]
    pub fault_random: Option<FaultOdds>,
    /// Seed of random faults and service-time draws [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Largest POST body (or stdio line) in bytes; larger gets 413 [default: 4194304].
    #[arg(long, value_name = "BYTES")]
    pub max_body: Option<usize>,
    /// Open connections at most; more are closed at once [default: 1024].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Accept this Origin besides loopback ones (repeatable).
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Job API: milliseconds each item of a job takes [default: 10].
    #[arg(long, value_name = "MS")]
    pub job_item_ms: Option<u64>,
    /// Job API: each item takes up to MS more, a seeded draw [default: 0].
    #[arg(long, value_name = "MS")]
    pub job_item_jitter_ms: Option<u64>,
    /// Job API: a job stays queued this long before its first item starts [default: 0].
    #[arg(long, value_name = "MS")]
    pub job_queue_ms: Option<u64>,
    /// Job API: the pollInterval job_status advises, in ms [default: 100].
    #[arg(long, value_name = "MS")]
    pub job_poll_interval_ms: Option<u64>,
    /// Job API: item i (from 0) fails when (i+1) % K == 0; 0: none [default: 0].
    #[arg(long, value_name = "K")]
    pub job_fail_every: Option<u64>,
    /// Job API, a bug on purpose: reports leave out item i when (i+1) % L == 0; 0: off
    /// [default: 0].
    #[arg(long, value_name = "L")]
    pub job_lose_every: Option<u64>,
    /// Job API: a job is forgotten this many ms after its creation [default: 300000].
    #[arg(long, value_name = "MS")]
    pub job_ttl_ms: Option<u64>,
    /// Job API: jobs held at most; then finished ones make room, else job_start is refused
    /// [default: 10000].
    #[arg(long, value_name = "N")]
    pub max_jobs: Option<usize>,
    /// Job API, a bug on purpose: every Nth job_start naming a known request_key starts a
    /// new job anyway (a double effect, or an accepted conflict); 0: off [default: 0].
    #[arg(long, value_name = "N")]
    pub job_key_break_every: Option<u64>,
    /// Races, a bug on purpose: counter_add reads, pauses --race-window-ms, then writes,
    /// overwriting what others added meanwhile (default: atomic).
    #[arg(long)]
    pub racy: bool,
    /// With --racy: milliseconds between the read and the write (0: a yield) [default: 1].
    #[arg(long, value_name = "MS")]
    pub race_window_ms: Option<u64>,
    /// Races: counter_read sees a write only MS after it was made (eventually consistent)
    /// [default: 0].
    #[arg(long, value_name = "MS")]
    pub read_lag_ms: Option<u64>,
    /// Races: the first tools/call starts a lazy initialisation of MS that every call waits
    /// for [default: 0: none].
    #[arg(long, value_name = "MS")]
    pub lazy_init_ms: Option<u64>,
    /// Races, a bug on purpose: K calls waiting on the lazy initialisation at once deadlock
    /// it: they and every later call hang forever (needs --lazy-init-ms) [default: 0: off].
    #[arg(long, value_name = "K")]
    pub first_call_deadlock: Option<u32>,
    /// Tasks: a task's ttl in ms, and the most a 2025-11-25 `params.task.ttl` gets
    /// [default: 300000].
    #[arg(long, value_name = "MS")]
    pub task_ttl_ms: Option<u64>,
    /// Tasks: the pollInterval tasks advise, in ms [default: 100].
    #[arg(long, value_name = "MS")]
    pub task_poll_interval_ms: Option<u64>,
    /// Tasks: tasks working at once; more wait for a slot (0: unlimited) [default: 0].
    #[arg(long, value_name = "N")]
    pub task_capacity: Option<usize>,
    /// Tasks: tasks held at most; then ended ones make room, else creation is refused
    /// [default: 100000].
    #[arg(long, value_name = "N")]
    pub max_tasks: Option<usize>,
    /// Exact task faults: forget=N,reuse-id=N,never-ends=N,regress=N,mismatch=N (every Nth
    /// task), get-error=N (every Nth tasks/get).
    #[arg(long, value_name = "KIND=N,..")]
    pub task_fault: Option<Periods<TaskFault>>,
    /// Exact progress faults of the progress tool: after-result=N,down=N,unknown-token=N
    /// (every Nth call with a progress token and a stream).
    #[arg(long, value_name = "KIND=N,..")]
    pub progress_fault: Option<Periods<ProgressFault>>,
    /// SSE answers of 2025-11-25 requests: every Nth stream is closed early after a priming
    /// event with an id and `retry:`; the answer comes on a GET with `Last-Event-ID`.
    #[arg(long, value_name = "N")]
    pub sse_close_early: Option<u64>,
    /// With --sse-close-early: refuse those GETs (405), so the answers never come.
    #[arg(long)]
    pub sse_resume_refuse: bool,
    /// Also speak the legacy HTTP+SSE transport (2024-11-05): GET /sse opens a session's
    /// stream, its `endpoint` event names the POST URL, answers come on the stream.
    #[arg(long)]
    pub legacy_sse: bool,
    /// With --legacy-sse: every Nth request of a session (initialize aside) ends it:
    /// answered 202, never run, the stream ended; later POSTs naming it get 404.
    #[arg(long, value_name = "N")]
    pub legacy_sse_end_every: Option<u64>,
    /// N server replicas behind an in-process load balancer on the one port, each with its
    /// own capacity model and sessions [default: 1].
    #[arg(long, value_name = "N")]
    pub replicas: Option<usize>,
    /// How the load balancer picks a replica [default: round-robin].
    #[arg(long, value_parser = one_of(&Balance::ALL, Balance::name, Balance::about))]
    pub balance: Option<Balance>,
    /// With --replicas: every replica knows every session (as if kept in a shared store).
    #[arg(long)]
    pub shared_sessions: bool,
    /// stdio: sleep MS before reading stdin at all (a runtime's start-up; initialize waits
    /// for it) [default: 0].
    #[arg(long, value_name = "MS")]
    pub startup_ms: Option<u64>,
    /// stdio: allocate N MiB at the start, every page written, held until exit (RSS is at
    /// least N MiB); at most 4096 [default: 0].
    #[arg(long, value_name = "N")]
    pub rss_ballast_mb: Option<usize>,
    /// stdio: write TEXT and a newline to stdout before anything else (a banner a client
    /// must skip).
    #[arg(long, value_name = "TEXT")]
    pub stdout_banner: Option<String>,
    /// stdio: answer N tools/call requests; on reading the next one, print `mcpload serve:
    /// exiting after N calls` on stderr and exit at once with code 3, it unanswered.
    #[arg(long, value_name = "N")]
    pub exit_after_calls: Option<u64>,
    /// stdio: serve requests (initialize and notifications aside) one at a time in the
    /// order read, each after the previous one was answered (a single-threaded server).
    #[arg(long)]
    pub serial: bool,
    #[command(flatten)]
    pub auth: ServeAuthArgs,
    /// Be a broken server on purpose: every Nth tools/call (--hostile-every) gets KIND
    /// (slow-head, huge-body, sse-comments, id-float, die-mid-line, ...; docs/target.md).
    /// Only --stdio, --bind and --stats apply beside it.
    #[arg(long, value_name = "KIND")]
    pub hostile: Option<HostileKind>,
    /// With --hostile: which calls misbehave, every Nth [default: 1].
    #[arg(long, value_name = "N", requires = "hostile")]
    pub hostile_every: Option<u64>,
}

/// `serve --auth` and its knobs (docs/target.md, "Authorization").
#[derive(Args, Debug)]
#[command(next_help_heading = "Authorization (serve --auth)")]
pub(crate) struct ServeAuthArgs {
    /// Require bearer tokens on every MCP request, and serve an OAuth authorization server
    /// (metadata, a client credentials token endpoint) on the same port.
    #[arg(long)]
    pub auth: bool,
    /// The client id the authorization server knows [default: mcpload].
    #[arg(long, value_name = "ID", requires = "auth")]
    pub auth_client_id: Option<String>,
    /// The environment variable holding the client's secret [default: MCPLOAD_CLIENT_SECRET].
    #[arg(long, value_name = "VAR", requires = "auth")]
    pub auth_client_secret_env: Option<String>,
    /// The client's public key (PEM), to accept private_key_jwt assertions.
    #[arg(long, value_name = "FILE", requires = "auth")]
    pub auth_client_key: Option<PathBuf>,
    /// private_key_jwt: require the assertion's `aud` to be the token endpoint's URL, not the
    /// issuer identifier (the default, as SEP-1046 and RFC 7523bis require).
    #[arg(long, requires = "auth")]
    pub auth_jwt_aud_token_endpoint: bool,
    /// The scope MCP requests need [default: mcp].
    #[arg(long, value_name = "SCOPE", requires = "auth")]
    pub auth_scope: Option<String>,
    /// A resource (RFC 8707) tokens are issued for besides this target's /mcp, e.g. another
    /// server that checks them by introspection; `*` for any (repeatable).
    #[arg(long, value_name = "URL", requires = "auth")]
    pub auth_resource: Vec<String>,
    /// How long a token lives, in seconds [default: 3600].
    #[arg(long, value_name = "SECONDS", requires = "auth")]
    pub token_lifetime: Option<u64>,
    /// Revoke every token issued so far at this many seconds after the start (repeatable).
    #[arg(long, value_name = "SECONDS", requires = "auth")]
    pub revoke_at: Vec<f64>,
    /// Which authorization-server metadata is published [default: oauth].
    #[arg(long, requires = "auth", value_parser = one_of(&AuthMetadata::ALL, AuthMetadata::name, AuthMetadata::about))]
    pub auth_metadata: Option<AuthMetadata>,
    /// Milliseconds each token request takes [default: 0].
    #[arg(long, value_name = "MS", requires = "auth")]
    pub token_delay_ms: Option<u64>,
    /// Also play the authorization code grant: an authorization endpoint that approves at
    /// once (PKCE S256, `state`, `iss`), dynamic client registration, client ID metadata
    /// documents (loopback URLs only) and rotating refresh tokens.
    #[arg(long, requires = "auth")]
    pub auth_code: bool,
    /// `tools/call` needs this scope besides --auth-scope: 403 `insufficient_scope` without
    /// it, so a client steps up.
    #[arg(long, value_name = "SCOPE", requires = "auth_code")]
    pub auth_step_up_scope: Option<String>,
    /// Dynamic registration gives every client a secret: `none` is left out of
    /// `token_endpoint_auth_methods_supported` and refused at `/register`.
    #[arg(long, requires = "auth_code")]
    pub auth_code_confidential: bool,
}

/// A server knob spelled as one of a few words: `--help` lists each with its meaning, and
/// the library's `FromStr` reads it.
fn one_of<T>(
    all: &[T],
    name: fn(T) -> &'static str,
    about: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T>
where
    T: Copy + FromStr<Err = server::ConfigError> + Send + Sync + 'static,
{
    PossibleValuesParser::new(
        all.iter()
            .map(|v| PossibleValue::new(name(*v)).help(about(*v))),
    )
    .try_map(|word| word.parse::<T>())
}

impl ServeArgs {
    /// The configuration these arguments describe (defaults from `ServeConfig`).
    pub(crate) fn config(&self) -> ServeConfig {
        let d = ServeConfig::default();
        ServeConfig {
            bind: self.bind.unwrap_or(d.bind),
            era: self.era.unwrap_or(d.era),
            versions: self.versions.clone(),
            answer: self.answer.unwrap_or(d.answer),
            batches: self.batches.unwrap_or(d.batches),
            sessions: !self.no_sessions,
            discover: !self.no_discover,
            header_tools: self.header_tools,
            input_unchecked: self.input_unchecked,
            discover_refusals: self.discover_refusals.unwrap_or(d.discover_refusals),
            version_rejected_without_id: self.version_rejected_without_id,
            capacity: self.capacity.unwrap_or(d.capacity),
            queue: self.queue.unwrap_or(d.queue),
            reject: self.reject.unwrap_or(d.reject),
            retry_after_s: self.retry_after.unwrap_or(d.retry_after_s),
            service_ms: self.service_ms.unwrap_or(d.service_ms),
            stall: self.stall.clone(),
            leak_bytes_per_call: self.leak_bytes_per_call.unwrap_or(d.leak_bytes_per_call),
            leak_fd_every: self.leak_fd_every.unwrap_or(d.leak_fd_every),
            drift_ms_per_minute: self.drift_ms_per_minute.unwrap_or(d.drift_ms_per_minute),
            fault: self.fault.unwrap_or(d.fault),
            fault_random: self.fault_random.unwrap_or(d.fault_random),
            seed: self.seed.unwrap_or(d.seed),
            max_body_bytes: self.max_body.unwrap_or(d.max_body_bytes),
            max_line_bytes: self.max_body.unwrap_or(d.max_line_bytes),
            max_connections: self.max_connections.unwrap_or(d.max_connections),
            allowed_origins: self.allow_origin.clone(),
            job_item_ms: self.job_item_ms.unwrap_or(d.job_item_ms),
            job_item_jitter_ms: self.job_item_jitter_ms.unwrap_or(d.job_item_jitter_ms),
            job_queue_ms: self.job_queue_ms.unwrap_or(d.job_queue_ms),
            job_poll_interval_ms: self.job_poll_interval_ms.unwrap_or(d.job_poll_interval_ms),
            job_fail_every: self.job_fail_every.unwrap_or(d.job_fail_every),
            job_lose_every: self.job_lose_every.unwrap_or(d.job_lose_every),
            job_ttl_ms: self.job_ttl_ms.unwrap_or(d.job_ttl_ms),
            max_jobs: self.max_jobs.unwrap_or(d.max_jobs),
            job_key_break_every: self.job_key_break_every.unwrap_or(d.job_key_break_every),
            racy: self.racy || d.racy,
            race_window_ms: self.race_window_ms.unwrap_or(d.race_window_ms),
            read_lag_ms: self.read_lag_ms.unwrap_or(d.read_lag_ms),
            lazy_init_ms: self.lazy_init_ms.unwrap_or(d.lazy_init_ms),
            first_call_deadlock: self.first_call_deadlock.unwrap_or(d.first_call_deadlock),
            task_ttl_ms: self.task_ttl_ms.unwrap_or(d.task_ttl_ms),
            task_poll_interval_ms: self
                .task_poll_interval_ms
                .unwrap_or(d.task_poll_interval_ms),
            task_capacity: self.task_capacity.unwrap_or(d.task_capacity),
            max_tasks: self.max_tasks.unwrap_or(d.max_tasks),
            task_fault: self.task_fault.unwrap_or(d.task_fault),
            progress_fault: self.progress_fault.unwrap_or(d.progress_fault),
            sse_close_early: self.sse_close_early.unwrap_or(d.sse_close_early),
            sse_resume_refuse: self.sse_resume_refuse || d.sse_resume_refuse,
            legacy_sse: self.legacy_sse || d.legacy_sse,
            legacy_sse_end_every: self.legacy_sse_end_every.unwrap_or(d.legacy_sse_end_every),
            replicas: self.replicas.unwrap_or(d.replicas),
            balance: self.balance.unwrap_or(d.balance),
            shared_sessions: self.shared_sessions || d.shared_sessions,
            auth: self.auth.auth,
            auth_client_id: self.auth.auth_client_id.clone().unwrap_or(d.auth_client_id),
            auth_client_secret_env: (self.auth.auth_client_secret_env.clone())
                .unwrap_or(d.auth_client_secret_env),
            auth_client_key: self.auth.auth_client_key.clone().or(d.auth_client_key),
            auth_jwt_aud_token_endpoint: self.auth.auth_jwt_aud_token_endpoint
                || d.auth_jwt_aud_token_endpoint,
            auth_scope: self.auth.auth_scope.clone().unwrap_or(d.auth_scope),
            auth_resources: self.auth.auth_resource.clone(),
            auth_token_lifetime_s: self.auth.token_lifetime.unwrap_or(d.auth_token_lifetime_s),
            auth_revoke_at: self.auth.revoke_at.clone(),
            auth_metadata: self.auth.auth_metadata.unwrap_or(d.auth_metadata),
            auth_token_delay_ms: self.auth.token_delay_ms.unwrap_or(d.auth_token_delay_ms),
            auth_code: self.auth.auth_code || d.auth_code,
            auth_step_up_scope: self
                .auth
                .auth_step_up_scope
                .clone()
                .or(d.auth_step_up_scope),
            auth_code_confidential: self.auth.auth_code_confidential || d.auth_code_confidential,
            startup_ms: self.startup_ms.unwrap_or(d.startup_ms),
            rss_ballast_mb: self.rss_ballast_mb.unwrap_or(d.rss_ballast_mb),
            stdout_banner: self.stdout_banner.clone().or(d.stdout_banner),
            exit_after_calls: self.exit_after_calls.or(d.exit_after_calls),
            serial: self.serial || d.serial,
        }
    }

    /// HTTP: prints `listening on URL` as the first stdout line and serves until Ctrl-C or
    /// SIGTERM. stdio: serves until stdin ends.
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        if let Some(kind) = self.hostile {
            return self.run_hostile(kind).await;
        }
        let cfg = self.config();
        let snapshot = if self.stdio {
            server::serve_stdio(cfg, tokio::io::stdin(), tokio::io::stdout()).await?
        } else {
            if cfg.binds_beyond_loopback() {
                eprintln!(
                    "warning: listening on {} makes the target reachable from other hosts",
                    cfg.bind
                );
            }
            let running = server::start_http(cfg).await?;
            listen_until_stopped(&running.url()).await?;
            running.shutdown().await
        };
        if let Some(path) = &self.stats {
            write_stats(path, &snapshot)?;
        }
        Ok(())
    }
}

impl ServeArgs {
    /// `--hostile`: the same contract as a normal serve (the first stdout line, `--stats`),
    /// with the hostile server's own ground truth.
    async fn run_hostile(self, kind: HostileKind) -> anyhow::Result<()> {
        let wanted = if self.stdio {
            HostileTransport::Stdio
        } else {
            HostileTransport::Http
        };
        if kind.transport() != HostileTransport::Either && kind.transport() != wanted {
            return Err(UsageError(anyhow::anyhow!(
                "--hostile {kind} is played over {}",
                if self.stdio {
                    "HTTP: drop --stdio"
                } else {
                    "stdio: add --stdio"
                }
            ))
            .into());
        }
        let cfg = HostileConfig {
            kind,
            every: self.hostile_every.unwrap_or(1).max(1),
            bind: self.bind.unwrap_or(ServeConfig::default().bind),
        };
        let stats = if self.stdio {
            server::serve_hostile_stdio(cfg, tokio::io::stdin(), tokio::io::stdout()).await
        } else {
            let running = server::start_hostile_http(cfg)
                .await
                .with_context(|| format!("cannot listen on {}", cfg.bind))?;
            listen_until_stopped(&running.url()).await?;
            running.shutdown()
        };
        if let Some(path) = &self.stats {
            write_stats(path, &stats)?;
        }
        Ok(())
    }
}

/// An HTTP serve's contract once it listens: `listening on URL` as the first stdout line
/// (scripts and tests wait for it), then the wait for Ctrl-C or SIGTERM (forever when neither
/// could be installed).
async fn listen_until_stopped(url: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {url}")?;
    out.flush()?;
    drop(out);
    if mcpload::run::signals().recv().await.is_none() {
        std::future::pending::<()>().await;
    }
    Ok(())
}

fn write_stats(path: &Path, snapshot: &impl serde::Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_vec_pretty(snapshot)?;
    std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
}

/// An error the user can fix on the command line (a bad threshold, a folder that is no run
/// folder): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub(crate) struct UsageError(pub anyhow::Error);

/// Arguments of `mcpload report`.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The run folder (it holds summary.json, timeseries.csv and latency.hlog).
    pub dir: PathBuf,
    /// A gate checked on the stored run, e.g. 'p99_ms<250', 'error_rate<0.001',
    /// 'anomalies==0' (repeatable); shown in place of the run's own gates.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
}

impl ReportArgs {
    /// Prints the terminal report; fails (exit 1) when a threshold fails.
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let thresholds = mcpload::analysis::Thresholds::parse(&self.thresholds)
            .map_err(|e| UsageError(e.into()))?;
        let color = mcpload::report::use_color(&std::io::stdout());
        let done = mcpload::report::rerender(&self.dir, &thresholds, color)
            .map_err(|e| UsageError(e.into()))?;
        print!("{}", done.terminal);
        println!(
            "report: {}",
            self.dir.join(mcpload::report::REPORT_HTML).display()
        );
        let failed: Vec<&str> = done
            .summary
            .gates
            .iter()
            .filter(|g| !g.holds)
            .map(|g| g.threshold.as_str())
            .collect();
        anyhow::ensure!(failed.is_empty(), "threshold failed: {}", failed.join(", "));
        Ok(())
    }
}

/// Arguments of `mcpload merge`.
#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// The segments' run folders.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The merged run folder [default: results/<UTC timestamp>-<name>-merged].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Merge the segments given even when some are missing; the result is marked partial.
    #[arg(long)]
    pub partial: bool,
    /// Merge every step recorded, past a failed one too (the profile's stop_on_failure is
    /// what the merge otherwise follows).
    #[arg(long)]
    pub keep_going: bool,
    /// A gate checked on the merged run in place of the profile's, e.g. 'p99_ms<250'
    /// (repeatable).
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
}

impl MergeArgs {
    /// Prints what was merged and the terminal report; exit 1 when a gate fails or a segment
    /// was aborted, 130 when one was interrupted, 2 when the folders cannot be merged.
    pub(crate) fn run(self) -> anyhow::Result<()> {
        use mcpload::report::RunStatus;
        let thresholds = mcpload::analysis::Thresholds::parse(&self.thresholds)
            .map_err(|e| UsageError(e.into()))?;
        let options = mcpload::merge::MergeOptions {
            dirs: self.dirs,
            out: self.out,
            partial: self.partial,
            keep_going: self.keep_going,
            thresholds,
            color: mcpload::report::use_color(&std::io::stdout()),
        };
        let merged = mcpload::merge::merge(&options).map_err(|e| UsageError(e.into()))?;
        print!("{}", merged.preface);
        print!("{}", merged.finished.terminal);
        let dir = merged.finished.dir.display().to_string();
        println!("results: {dir}");
        match merged.status {
            RunStatus::Interrupted => return Err(Interrupted(dir).into()),
            RunStatus::Aborted | RunStatus::Running => {
                anyhow::bail!("a segment stopped early: see merged_from in {dir}/summary.json")
            }
            RunStatus::Complete => {}
        }
        let failed: Vec<&str> = merged
            .finished
            .summary
            .gates
            .iter()
            .filter(|g| !g.holds)
            .map(|g| g.threshold.as_str())
            .collect();
        anyhow::ensure!(
            failed.is_empty(),
            "thresholds failed: {}",
            failed.join(", ")
        );
        Ok(())
    }
}

/// Arguments of `mcpload compare`.
#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// The run folder to compare against (with NEW: the fixed-tolerance comparison).
    #[arg(requires = "new", conflicts_with_all = ["baseline", "candidate"])]
    pub base: Option<PathBuf>,
    /// The run folder under test.
    pub new: Option<PathBuf>,
    /// Baseline run folders, or folders of them (`run --repeat`), repeatable: with
    /// --candidate, the statistical verdict (docs/ab.md).
    #[arg(long, value_name = "DIR", num_args = 1.., requires = "candidate")]
    pub baseline: Vec<PathBuf>,
    /// Candidate run folders, or folders of them, repeatable.
    #[arg(long, value_name = "DIR", num_args = 1.., requires = "baseline")]
    pub candidate: Vec<PathBuf>,
    /// The fixed tolerance: how much worse a figure may get before it is a regression
    /// (0.10 = 10%), BASE NEW only [default: 0.10].
    #[arg(long, value_name = "FRACTION", conflicts_with_all = ["baseline", "candidate"])]
    pub tolerance: Option<f64>,
    /// With the fixed tolerance: a latency must also grow by more than this many ms.
    #[arg(long, default_value_t = 1.0, value_name = "MS")]
    pub latency_floor_ms: f64,
    #[command(flatten)]
    pub verdict: VerdictArgs,
}

/// How the statistical verdict judges (`ab`, `compare --baseline`).
#[derive(Args, Debug)]
pub(crate) struct VerdictArgs {
    /// The noise band δ: a change within ±δ is noise (0.05 = 5%).
    #[arg(long, default_value_t = 0.05, value_name = "FRACTION", value_parser = band)]
    pub band: f64,
    /// Family-wise error rate of the verdicts (Holm).
    #[arg(long, default_value_t = 0.05, value_name = "P", value_parser = alpha)]
    pub alpha: f64,
    /// `equivalent`: also fail (exit 1) when any figure is inconclusive.
    #[arg(long, value_name = "VERDICT", value_parser = ["equivalent"])]
    pub require: Option<String>,
    /// Keep runs with a generator-bound step in the verdict, with a warning [default: left
    /// out, with the reason].
    #[arg(long)]
    pub keep_generator_bound: bool,
    /// Write a Markdown summary (for a pull-request comment); without it, appended to
    /// $GITHUB_STEP_SUMMARY when that is set.
    #[arg(long, value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
}

impl VerdictArgs {
    fn options(&self) -> mcpload::analysis::ab::AbOptions {
        mcpload::analysis::ab::AbOptions {
            band: self.band,
            alpha: self.alpha,
            keep_generator_bound: self.keep_generator_bound,
        }
    }

    /// Writes the Markdown summary, then fails (exit 1) on a regression, or with
    /// `--require equivalent` on an inconclusive figure.
    fn conclude(
        &self,
        record: &mcpload::report::ab::AbRecord,
        markdown: &str,
    ) -> anyhow::Result<()> {
        mcpload::report::ci::write_summary_md(self.summary_md.as_deref(), markdown)
            .context("writing the Markdown summary")?;
        if record.figures.is_empty() {
            return Err(UsageError(anyhow::anyhow!(
                "nothing to compare: no step was measured on both sides in at least 2 usable runs"
            ))
            .into());
        }
        let require = self.require.is_some();
        if mcpload::ab::failed(record, require) {
            let regressed: Vec<String> = record
                .regressions()
                .iter()
                .map(|f| match f.cell.op.as_str() {
                    mcpload::analysis::ab::WHOLE_STEP => {
                        format!("{} at step {}", f.figure.as_str(), f.cell.step)
                    }
                    op => format!("{} at step {} ({op})", f.figure.as_str(), f.cell.step),
                })
                .collect();
            if regressed.is_empty() {
                anyhow::bail!("--require equivalent: some figures are inconclusive");
            }
            anyhow::bail!(
                "{} regression(s): {}",
                regressed.len(),
                regressed.join(", ")
            );
        }
        Ok(())
    }
}

/// `--band`: a fraction above 0 and below 1.
fn band(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err("must be a fraction above 0 and below 1, e.g. 0.05 for 5%".into()),
    }
}

/// `--alpha`: a probability above 0 and at most 0.5.
fn alpha(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 0.5 => Ok(x),
        _ => Err("must be a probability above 0 and at most 0.5, e.g. 0.05".into()),
    }
}

impl CompareArgs {
    /// Prints the comparison; fails (exit 1) on a regression.
    pub(crate) fn run(self) -> anyhow::Result<()> {
        if !self.baseline.is_empty() {
            return self.run_sets();
        }
        let usage = |msg: String| UsageError(anyhow::anyhow!(msg));
        let (Some(base), Some(new)) = (&self.base, &self.new) else {
            return Err(
                usage("give BASE NEW, or --baseline DIR... --candidate DIR...".to_owned()).into(),
            );
        };
        let tolerance = self.tolerance.unwrap_or(0.10);
        for (name, v) in [
            ("--tolerance", tolerance),
            ("--latency-floor-ms", self.latency_floor_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(usage(format!("{name} {v}: expected a number of 0 or more")).into());
            }
        }
        let options = mcpload::analysis::CompareOptions {
            tolerance,
            latency_floor_ms: self.latency_floor_ms,
            ..Default::default()
        };
        let color = mcpload::report::use_color(&std::io::stdout());
        let (comparison, text) = mcpload::report::compare_runs(base, new, &options, color)
            .map_err(|e| UsageError(e.into()))?;
        if !comparison.matched() {
            return Err(usage(format!(
                "{} and {} have no step at the same load: nothing to compare",
                base.display(),
                new.display()
            ))
            .into());
        }
        print!("{text}");
        let regressions = comparison.regressions();
        let mut figures: Vec<&str> = Vec::new();
        for (_, f) in &regressions {
            if !figures.contains(&f.figure) {
                figures.push(f.figure);
            }
        }
        anyhow::ensure!(
            regressions.is_empty(),
            "{} regression(s) beyond {}: {}",
            regressions.len(),
            mcpload::analysis::pct(tolerance),
            figures.join(", ")
        );
        Ok(())
    }

    /// `--baseline … --candidate …`: the statistical verdict over sets of runs.
    fn run_sets(self) -> anyhow::Result<()> {
        let record =
            mcpload::ab::compare_sets(&self.baseline, &self.candidate, &self.verdict.options())
                .map_err(|e| UsageError(e.into()))?;
        let color = mcpload::report::use_color(&std::io::stdout());
        print!(
            "{}",
            mcpload::report::ab::render_ab_terminal(&record, color)
        );
        let markdown = mcpload::report::ab::render_ab_markdown(&record, None);
        self.verdict.conclude(&record, &markdown)
    }
}

/// Arguments of `mcpload ab`: a profile, two targets (one of `--a`, `--a-stdio`,
/// `--a-builtin`, and the same for `b`), the pairs, the folder.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("side_a").required(true).args(["a", "a_stdio", "a_builtin"])))]
#[command(group(clap::ArgGroup::new("side_b").required(true).args(["b", "b_stdio", "b_builtin"])))]
pub(crate) struct AbArgs {
    /// The workload profile each run uses (its target is replaced by each side's).
    pub profile: PathBuf,
    /// Side A: a Streamable HTTP endpoint.
    #[arg(long, value_name = "URL")]
    pub a: Option<String>,
    /// Side A: a command started as a child speaking stdio (a fresh child each run).
    #[arg(long, value_name = "COMMAND")]
    pub a_stdio: Option<String>,
    /// Side A: the built-in target with these knobs, KNOB=VALUE,... ('' for none).
    #[arg(long, value_name = "KNOB=VALUE,...")]
    pub a_builtin: Option<String>,
    /// Side B: a Streamable HTTP endpoint.
    #[arg(long, value_name = "URL")]
    pub b: Option<String>,
    /// Side B: a command started as a child speaking stdio.
    #[arg(long, value_name = "COMMAND")]
    pub b_stdio: Option<String>,
    /// Side B: the built-in target with these knobs, KNOB=VALUE,...
    #[arg(long, value_name = "KNOB=VALUE,...")]
    pub b_builtin: Option<String>,
    /// Pairs of runs (one run of each side per pair), at least 2.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub pairs: u32,
    /// The A/B folder (new or empty): a-01.., b-01.. run folders, ab.json, summary.md,
    /// report.html.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of the order inside each pair [default: drawn, and recorded in ab.json].
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub steps: StepFlags,
    /// No line per run.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub verdict: VerdictArgs,
}

impl AbArgs {
    fn side(
        url: Option<String>,
        stdio: Option<String>,
        builtin: Option<String>,
        flag: &str,
    ) -> Result<mcpload::ab::AbTarget, UsageError> {
        use mcpload::ab::{AbTarget, builtin_knobs};
        let usage = |m: String| UsageError(anyhow::anyhow!(m));
        Ok(match (url, stdio, builtin) {
            (Some(u), _, _) => AbTarget {
                target: TargetFlag::Url(u),
                knobs: Vec::new(),
            },
            (None, Some(cmd), _) => AbTarget {
                target: TargetFlag::Stdio(cmd),
                knobs: Vec::new(),
            },
            (None, None, Some(k)) => AbTarget {
                target: TargetFlag::Builtin,
                knobs: builtin_knobs(&k).map_err(|e| usage(format!("--{flag}-builtin {e}")))?,
            },
            (None, None, None) => return Err(usage(format!("--{flag}: no target given"))),
        })
    }

    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let a = Self::side(self.a, self.a_stdio, self.a_builtin, "a")?;
        let b = Self::side(self.b, self.b_stdio, self.b_builtin, "b")?;
        let levels = self.steps.levels();
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        let plan = mcpload::ab::AbPlan {
            profile: self.profile,
            a,
            b,
            pairs: self.pairs,
            out: self.out,
            seed,
            options: self.verdict.options(),
            run: Overrides {
                levels,
                duration: self.steps.duration,
                warmup: self.steps.warmup,
                quiet: self.quiet,
                ..Overrides::default()
            },
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        tokio::spawn(mcpload::run::stop_on_signals(cancel.clone()));
        let outcome = mcpload::ab::run_ab(plan, cancel)
            .await
            .map_err(|e| UsageError(e.into()))?;
        let color = mcpload::report::use_color(&std::io::stdout());
        print!(
            "{}",
            mcpload::report::ab::render_ab_terminal(&outcome.record, color)
        );
        println!("results: {}", outcome.dir.display());
        if outcome.record.status == mcpload::report::ab::AbStatus::Interrupted {
            self.verdict
                .conclude(&outcome.record, &outcome.markdown)
                .ok();
            return Err(Interrupted(outcome.dir.display().to_string()).into());
        }
        self.verdict.conclude(&outcome.record, &outcome.markdown)
    }
}

/// Arguments of `mcpload probe`: one target, `--url` or `--stdio` (with `--races` also
/// `--builtin`, or a profile's `[target]`).
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).multiple(true).args(["url", "stdio", "builtin", "profile"])))]
pub(crate) struct ProbeArgs {
    /// The server's Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
    #[arg(long, value_name = "URL", conflicts_with_all = ["stdio", "builtin"])]
    pub url: Option<String>,
    /// Run the server as a child process and speak stdio: "COMMAND ARGS".
    #[arg(long, value_name = "COMMAND", conflicts_with = "builtin")]
    pub stdio: Option<String>,
    /// An HTTP header "Name: value" for every request (repeatable); ${VAR} in the value is
    /// read from the environment, so secrets stay off the command line.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = split_header)]
    pub headers: Vec<(String, String)>,
    /// auto (server/discover, then initialize, then 2026-07-28 without discovery) or a protocol revision to pin.
    #[arg(long, default_value = "auto", value_name = "auto|REVISION")]
    pub protocol: mcpload::client::ProtocolChoice,
    /// HTTP transport: auto, streamable-http, or sse (the legacy HTTP+SSE of 2024-11-05).
    #[arg(long, default_value = "auto", value_name = "TRANSPORT")]
    pub transport: mcpload::client::TransportChoice,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for an answer that may never come.
    #[arg(long, default_value = "1500ms", value_parser = parse_duration)]
    pub wait: Duration,
    /// The tool the cancel probe calls (default: one whose name and schema say it sleeps);
    /// with --isolation, the slow call kept in flight (default: the slowest tool alone).
    #[arg(long, value_name = "TOOL")]
    pub slow_tool: Option<String>,
    /// JSON arguments for --slow-tool.
    #[arg(
        long,
        default_value = "{}",
        value_name = "JSON",
        requires = "slow_tool"
    )]
    pub slow_args: String,
    /// The tool the task probe runs as a task (default: one whose taskSupport is required,
    /// else optional; under 2026-07-28 one whose name says task).
    #[arg(long, value_name = "TOOL")]
    pub task_tool: Option<String>,
    /// JSON arguments for --task-tool.
    #[arg(
        long,
        default_value = "{}",
        value_name = "JSON",
        requires = "task_tool"
    )]
    pub task_args: String,
    /// The longest the task probe waits for its task to end (then it is cancelled), and
    /// the input_required probe for each answer.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub task_wait: Duration,
    /// The tool the input_required probe calls (default: one whose name says input or
    /// elicitation).
    #[arg(long, value_name = "TOOL")]
    pub input_tool: Option<String>,
    /// JSON arguments for --input-tool.
    #[arg(
        long,
        default_value = "{}",
        value_name = "JSON",
        requires = "input_tool"
    )]
    pub input_args: String,
    /// Save a stdio server's stderr to FILE.
    #[arg(long, value_name = "FILE")]
    pub stderr: Option<PathBuf>,
    /// Run the race checks instead: first calls at once on a fresh server, lost updates,
    /// idempotency, read-your-write (the calls from the profile's [races], else the
    /// built-in target's tools when the server lists them).
    #[arg(long)]
    pub races: bool,
    /// With --races: a profile whose [target] is probed (--url, --stdio, --builtin override
    /// it) and whose [races] table names the calls.
    #[arg(requires = "races", value_name = "PROFILE")]
    pub profile: Option<PathBuf>,
    /// With --races: the built-in target (its knobs from the profile's [target.builtin]),
    /// started afresh for each first-call attempt.
    #[arg(long, requires = "races")]
    pub builtin: bool,
    /// With --races: calls sent at once by each check [default: 64, or the profile's].
    #[arg(long, value_name = "N", requires = "races")]
    pub concurrency: Option<usize>,
    /// With --races, over stdio or against the built-in target: first-call bursts, each on
    /// a fresh child or server [default: 1] (a URL's server is fresh only once: 1).
    #[arg(long, value_name = "N", requires = "races")]
    pub attempts: Option<u32>,
    /// With --races: a first call unanswered this long is waited for up to --slow-within;
    /// answered by then it is slow, else it hangs [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, requires = "races")]
    pub hang_after: Option<Duration>,
    /// With --races: how long a first call unanswered at --hang-after is waited for
    /// [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, requires = "races")]
    pub slow_within: Option<Duration>,
    /// With --races: run only this check: first_call, lost_updates, idempotency,
    /// read_your_write (repeatable) [default: the profile's, else all].
    #[arg(long = "check", value_name = "CHECK", requires = "races", value_parser = PossibleValuesParser::new(mcpload::profile::races::CHECKS))]
    pub checks: Vec<String>,
    /// With --races: how long the other checks' calls may take [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, requires = "races")]
    pub timeout: Option<Duration>,
    /// Check head-of-line blocking instead: each tool's latency alone and with a slow call
    /// (--slow-tool, else the slowest tool) in flight beside it in the same session;
    /// `blocked` when it at least doubles, waiting for the slow call.
    #[arg(long, conflicts_with = "races")]
    pub isolation: bool,
    /// With --isolation: measure only this tool (repeatable) [default: every tool listed].
    #[arg(long = "tool", value_name = "NAME", requires = "isolation")]
    pub tools: Vec<String>,
}

impl ProbeArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        if self.races {
            return self.run_races().await;
        }
        let connector = self.connector()?;
        if self.isolation {
            let opts = mcpload::probe::isolation::IsolationOptions {
                tools: self.tools,
                slow_call: named(self.slow_tool, &self.slow_args, "--slow-args")?,
            };
            let report = mcpload::probe::isolation::run_isolation(&connector, &opts).await?;
            let mut out = std::io::stdout().lock();
            if self.json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                let table = mcpload::probe::isolation::render_isolation(&report);
                out.write_all(table.as_bytes())?;
            }
            return Ok(());
        }
        let probe_opts = mcpload::probe::ProbeOptions {
            wait: self.wait,
            slow_call: named(self.slow_tool, &self.slow_args, "--slow-args")?,
            task_call: named(self.task_tool, &self.task_args, "--task-args")?,
            input_call: named(self.input_tool, &self.input_args, "--input-args")?,
            task_wait: self.task_wait,
        };
        let report = mcpload::probe::run(&connector, &probe_opts).await?;
        let mut out = std::io::stdout().lock();
        if self.json {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        } else {
            out.write_all(mcpload::probe::render_table(&report).as_bytes())?;
        }
        Ok(())
    }

    /// The connection to the one target, `--url` or `--stdio`.
    fn connector(&self) -> anyhow::Result<mcpload::client::Connector> {
        use mcpload::client::{ConnectOptions, Connector, Endpoint};
        let target = match (&self.url, &self.stdio) {
            (Some(url), _) => Endpoint::http(url.clone(), self.headers.clone()),
            (None, Some(cmd)) => {
                let mut t = Endpoint::stdio(cmd)?;
                if let Endpoint::Stdio(o) = &mut t {
                    o.stderr = self.stderr.clone();
                }
                t
            }
            (None, None) => unreachable!("clap requires --url or --stdio"),
        };
        let opts = ConnectOptions {
            protocol: self.protocol,
            transport: self.transport,
            ..ConnectOptions::default()
        };
        Ok(Connector::new(target, opts)?)
    }
}

/// Arguments of `mcpload init`: one target, and where the profile goes.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["url", "stdio", "builtin"])))]
pub(crate) struct InitArgs {
    /// The server's Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Run the server as a child process and speak stdio: "COMMAND ARGS".
    #[arg(long, value_name = "COMMAND")]
    pub stdio: Option<String>,
    /// The built-in reference server (its knobs from --builtin-knob).
    #[arg(long)]
    pub builtin: bool,
    /// A knob of the built-in target, KEY=VALUE as in [target.builtin] (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = knob, requires = "builtin")]
    pub builtin_knob: Vec<(String, String)>,
    /// With --url: an HTTP header 'Name: value' (repeatable); the profile gets a ${VAR}
    /// reference in place of a value written out, and init says which variable to set.
    #[arg(long = "header", short = 'H', value_name = "HEADER", value_parser = split_header, requires = "url")]
    pub headers: Vec<(String, String)>,
    /// With --url: a static bearer token, read from this environment variable
    /// ([target.auth] bearer_env).
    #[arg(long, value_name = "VAR", requires = "url")]
    pub bearer_env: Option<String>,
    /// auto (detect the era) or a revision to pin: 2025-03-26, 2025-06-18, 2025-11-25,
    /// 2026-07-28.
    #[arg(long, default_value = "auto", value_name = "REVISION")]
    pub protocol: mcpload::client::ProtocolChoice,
    /// The longest a probe call may take: a tool slower than this is left out.
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = positive_duration)]
    pub probe_timeout: Duration,
    /// Where the profile goes.
    #[arg(long, short = 'o', value_name = "FILE", default_value = "mcpload.toml")]
    pub out: PathBuf,
    /// Replace FILE when it exists.
    #[arg(long)]
    pub force: bool,
}

impl InitArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        use mcpload::init::{InitError, InitOptions, InitTarget, Placed};
        if self.out.exists() && !self.force {
            return Err(UsageError(anyhow::anyhow!(
                "{} exists: give another file with -o FILE, or --force to replace it",
                self.out.display()
            ))
            .into());
        }
        let target = match (self.url, self.stdio) {
            (Some(url), _) => InitTarget::Url(url),
            (None, Some(cmd)) => InitTarget::Stdio(cmd),
            (None, None) => InitTarget::Builtin(self.builtin_knob),
        };
        let scratch = std::env::temp_dir().join(format!(
            "mcpload-init-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&scratch)
            .with_context(|| format!("creating {}", scratch.display()))?;
        let opts = InitOptions {
            target,
            headers: self.headers,
            bearer_env: self.bearer_env,
            protocol: self.protocol,
            probe_timeout: self.probe_timeout,
            scratch: scratch.clone(),
            file_name: self.out.display().to_string(),
        };
        let written = mcpload::init::init(&opts).await;
        let _ = std::fs::remove_dir_all(&scratch);
        let written = match written {
            Ok(w) => w,
            Err(InitError::Usage(e)) => return Err(UsageError(anyhow::anyhow!(e)).into()),
            Err(e) => return Err(e.into()),
        };
        std::fs::write(&self.out, &written.text)
            .with_context(|| format!("writing {}", self.out.display()))?;
        let mut out = std::io::stdout().lock();
        for t in &written.tools {
            let (mark, why) = match (&t.placed, &t.probe) {
                (_, Some(Ok(p))) => ("loaded", format!("timeout {:?}", p.timeout())),
                (_, Some(Err(why))) | (Placed::Invalid { why } | Placed::Load { why }, None) => {
                    ("left out", why.clone())
                }
                (Placed::Write { why }, None) => ("commented out", why.clone()),
            };
            writeln!(out, "{:<14} {}: {why}", mark, t.name())?;
        }
        let levels: Vec<String> = written.levels.iter().map(u64::to_string).collect();
        writeln!(out, "sweep          concurrency {}", levels.join(", "))?;
        for v in &written.env {
            writeln!(out, "set {} before running: {}", v.name, v.what)?;
        }
        writeln!(
            out,
            "wrote {}; run it: mcpload run {}",
            self.out.display(),
            self.out.display()
        )?;
        Ok(())
    }
}

/// A tool named on the command line (`--slow-tool`, …), with its JSON arguments (`flag`).
fn named(
    tool: Option<String>,
    args: &str,
    flag: &'static str,
) -> anyhow::Result<Option<(String, serde_json::Value)>> {
    match tool {
        Some(tool) => Ok(Some((tool, serde_json::from_str(args).context(flag)?))),
        None => Ok(None),
    }
}

/// `mcpload run` was interrupted by Ctrl-C or SIGTERM: exit code 130.
#[derive(Debug, thiserror::Error)]
#[error("interrupted; the finished steps and the partial one are in {0}")]
pub(crate) struct Interrupted(pub String);

/// The steps' load, length and warm-up in place of the profile's (`run`, `ab`).
#[derive(Args, Debug)]
pub(crate) struct StepFlags {
    /// Closed loop: virtual clients per step, e.g. 1,2,4,8 or '1..64 x2'.
    #[arg(long, short = 'c', value_name = "LEVELS", value_parser = Levels::parse, conflicts_with = "rate")]
    pub concurrency: Option<Levels>,
    /// Open loop: arrivals per second per step, e.g. 100,200,400 or '100..800 x2'.
    #[arg(long, short = 'r', value_name = "LEVELS", value_parser = Levels::parse)]
    pub rate: Option<Levels>,
    /// Measured time of each step, e.g. 10s.
    #[arg(long, short = 'd', value_name = "DURATION", value_parser = positive_duration)]
    pub duration: Option<Duration>,
    /// Warm-up of each step (measured, not recorded), e.g. 2s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,
}

impl StepFlags {
    /// The levels flag given, if any.
    fn levels(&self) -> Option<LevelsFlag> {
        match (&self.concurrency, &self.rate) {
            (Some(c), _) => Some(LevelsFlag::Concurrency(c.clone())),
            (None, Some(r)) => Some(LevelsFlag::Rate(r.clone())),
            (None, None) => None,
        }
    }
}

/// Arguments of `mcpload run`. Flags override the profile. Every value is checked as the
/// command line is read, so a bad one is an error naming its flag (exit code 2).
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// A workload profile (TOML); see docs/profiles.md.
    pub profile: Option<PathBuf>,
    /// Target: a Streamable HTTP endpoint.
    #[arg(long, value_name = "URL", group = "target")]
    pub url: Option<String>,
    /// Target: a command started as a child speaking MCP over stdio.
    #[arg(long, value_name = "COMMAND", group = "target")]
    pub stdio: Option<String>,
    /// Target: the built-in reference server, started in-process.
    #[arg(long, group = "target")]
    pub builtin: bool,
    /// An HTTP header 'Name: value' (repeatable); ${VAR} expands from the environment.
    #[arg(long = "header", short = 'H', value_name = "HEADER", value_parser = split_header)]
    pub headers: Vec<(String, String)>,
    /// auto (detect the era) or a revision: 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28.
    #[arg(long, value_name = "REVISION")]
    pub protocol: Option<mcpload::client::ProtocolChoice>,
    /// HTTP transport: auto (Streamable HTTP, or the legacy HTTP+SSE transport when that is
    /// what the URL speaks), streamable-http, or sse (the legacy HTTP+SSE of 2024-11-05).
    #[arg(long, value_name = "TRANSPORT")]
    pub transport: Option<mcpload::client::TransportChoice>,
    /// HTTP: every 400 to a request carrying the session id means the session is gone (for
    /// servers known to answer so, like the TypeScript SDK's examples).
    #[arg(long)]
    pub session_lost_on_400: bool,
    /// A knob of the built-in target, KEY=VALUE as in [target.builtin], e.g. balance=sticky
    /// (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = knob)]
    pub builtin_knob: Vec<(String, String)>,
    /// stdio: a child per virtual user's session, as desktop clients run local servers
    /// (target.process = "per_user"); default: one child shared by every user.
    #[arg(long)]
    pub process_per_user: bool,
    /// With --process-per-user: a session ends after N calls; the next starts a new child.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub session_calls: Option<u64>,
    /// With --process-per-user: a session ends this long after its child started.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub session_duration: Option<Duration>,
    /// With --process-per-user: the most memory the children may hold; a step past it ends
    /// the sweep [default: half the memory available at the start].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub fleet_memory_budget: Option<usize>,
    /// stdio: an environment variable for the child, KEY=VALUE (repeatable; over
    /// target.env); values are never written out.
    #[arg(long, value_name = "KEY=VALUE", value_parser = child_env)]
    pub child_env: Vec<(String, String)>,
    /// stdio: the child's working directory (over target.cwd).
    #[arg(long, value_name = "DIR")]
    pub child_cwd: Option<PathBuf>,
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Replace the mix with tools/call of this tool.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Arguments of --tool, as a JSON object; strings may hold {{seq}}, {{rand:1..9}}, ...
    #[arg(long, value_name = "JSON", requires = "tool", value_parser = tool_args)]
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
    #[command(flatten)]
    pub steps: StepFlags,
    /// A request unanswered after this is a timeout (and is cancelled), e.g. 5s.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub timeout: Option<Duration>,
    /// HTTP: opening a connection (TCP, and TLS for https) taking longer ends its request as
    /// a transport error, e.g. 2s (default 3s).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub connect_timeout: Option<Duration>,
    /// Closed loop: pause between an answer and the client's next request.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub think_time: Option<Duration>,
    /// Open loop: requests in flight at most; arrivals past it are dropped and counted.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,
    /// HTTP: the most memory the answers being read may hold at once, e.g. 256MiB (the
    /// default) or 1GiB; at it, the largest one fails as oversized (missing, parse_errors).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub max_answer_memory: Option<usize>,
    /// Open loop: constant or poisson spacing of arrivals.
    #[arg(long, value_name = "SPACING", value_enum, hide_possible_values = true)]
    pub spacing: Option<Spacing>,
    /// Open loop: each wake also sends the arrivals due within this window ahead (e.g. 1ms:
    /// fewer wake-ups; arrivals leave up to that much early, their latency timed from the
    /// departure). Default 0: each arrival at its own instant.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub send_window: Option<Duration>,
    /// Send JSON-RPC batches of N requests.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub batch_size: Option<NonZeroUsize>,
    /// Notifications mixed into each batch.
    #[arg(long, value_name = "N")]
    pub batch_notifications: Option<usize>,
    /// Send batches even when the agreed revision forbids them.
    #[arg(long)]
    pub force_batch: bool,
    /// The run folder (default: results/<UTC timestamp>-<name>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where run folders go when --out is not given.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// The run's name (default: the profile's, or its file name).
    #[arg(long)]
    pub name: Option<String>,
    /// A gate checked at the end, e.g. 'p99_ms<250', 'error_rate<0.001', 'anomalies==0'
    /// (repeatable); any failing exits 1.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = threshold)]
    pub thresholds: Vec<String>,
    /// A step with a higher error rate is failed (default 0.01).
    #[arg(long, value_name = "RATE", value_parser = fraction)]
    pub max_error_rate: Option<f64>,
    /// A step whose p99 is above this many milliseconds is failed.
    #[arg(long, value_name = "MS")]
    pub slo_p99_ms: Option<f64>,
    /// A step with any pairing anomaly is failed.
    #[arg(long)]
    pub fail_on_anomaly: bool,
    /// How a tool result with isError: true counts: `error` (default: in `tool_errors`, in
    /// the error rate) or `ok` (servers that use isError for expected outcomes).
    #[arg(long, value_name = "ok|error")]
    pub tool_errors: Option<ToolErrors>,
    /// Check structuredContent against the tool's outputSchema: `all` (default), `sample:N`
    /// (every Nth result of each operation) or `off`.
    #[arg(long, value_name = "off|sample:N|all")]
    pub validate_output: Option<ValidateOutput>,
    /// Run every step even after one failed.
    #[arg(long)]
    pub keep_going: bool,
    /// Watch this local server process (and its children) once a second: RSS, CPU,
    /// threads, descriptors (a stdio child and the built-in target are watched anyway).
    #[arg(long, value_name = "PID", help_heading = "Server resources")]
    pub server_pid: Option<u32>,
    /// Read the server's own Prometheus endpoint once a second (process_resident_memory_bytes,
    /// process_cpu_seconds_total, process_open_fds, heap gauges).
    #[arg(long, value_name = "URL", help_heading = "Server resources")]
    pub server_metrics: Option<String>,
    /// Read a container's cgroup directory once a second (v2 memory.current, cpu.stat,
    /// pids.current; v1 memory.usage_in_bytes, cpuacct.usage).
    #[arg(long, value_name = "PATH", help_heading = "Server resources")]
    pub server_cgroup: Option<PathBuf>,
    /// A named series of --server-metrics, e.g. sessions=mcp_sessions_active (session_leak
    /// reads `sessions`); repeatable.
    #[arg(long, value_name = "NAME=SERIES", value_parser = named_series, help_heading = "Server resources")]
    pub server_metric: Vec<(String, String)>,
    /// After the last step, keep watching the server this long with no load (a soak's
    /// cool-down), e.g. 2m.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Server resources")]
    pub cooldown: Option<Duration>,
    /// The shortest steady window the leak and drift checks judge (default 2m); below it
    /// they are skipped.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, help_heading = "Server resources")]
    pub leak_min_window: Option<Duration>,
    /// Worker tasks (default: one per core; an open loop one per 25,000 arrivals a second of
    /// its highest rate, at most one per core; always 1 for stdio).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Seed of the mix draws, {{rand}}, {{uuid}} and Poisson arrivals.
    #[arg(long)]
    pub seed: Option<u64>,
    /// No live view: neither the screen on a terminal nor the plain lines on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Write a JUnit XML file: a test case per threshold, check and step verdict (a failed
    /// threshold is a failed case, a run that could not run an error).
    #[arg(long, value_name = "FILE", help_heading = "CI reports")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary for a pull request: verdict, steps, operations, failed
    /// gates, checks [default: appended to $GITHUB_STEP_SUMMARY when it is set].
    #[arg(long, value_name = "FILE", help_heading = "CI reports")]
    pub summary_md: Option<PathBuf>,
    /// Push live metrics every second to this Prometheus remote write receiver, e.g.
    /// http://127.0.0.1:9090/api/v1/write (docs/metrics-export.md; profile
    /// `[output.prometheus]`).
    #[arg(long, value_name = "URL", help_heading = "Live metrics")]
    pub prometheus_remote_write: Option<String>,
    /// Serve the same live series as an OpenMetrics page for scraping at this address, e.g.
    /// 127.0.0.1:9464 (docs/metrics-export.md), while the run lasts.
    #[arg(long, value_name = "ADDR", help_heading = "Live metrics")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Run it all K times, one run folder each: DIR/run-1 … DIR/run-K (DIR: --out or the
    /// default folder), for `compare --baseline DIR --candidate DIR2`.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: Option<u32>,
    /// Run segment I of N (1-based) of a run split over N instances: its share of every
    /// step (env MCPLOAD_SEGMENT).
    #[arg(long, value_name = "I/N", help_heading = "Segments")]
    pub segment: Option<String>,
    /// The number of segments, the segment being JOB_COMPLETION_INDEX + 1 (a Kubernetes
    /// Indexed Job; env MCPLOAD_SEGMENTS).
    #[arg(long, value_name = "N", help_heading = "Segments")]
    pub segments: Option<String>,
    /// Begin step 1 at this RFC 3339 time, each later step on its slot of a common clock,
    /// e.g. 2026-12-02T10:00:00Z (env MCPLOAD_START_AT).
    #[arg(long, value_name = "TIME", help_heading = "Segments")]
    pub start_at: Option<String>,
}

/// Authorization and TLS flags of `mcpload run`: in place of the profile's `[target.auth]`
/// and over its `[target.tls]` (docs/profiles.md, "Authorization"). Credentials are read
/// from the environment only.
#[derive(Args, Debug)]
#[command(next_help_heading = "Authorization and TLS")]
pub(crate) struct AuthArgs {
    /// A static bearer token, read from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub bearer_env: Option<String>,
    /// OAuth client credentials: the client id, read from this environment variable.
    #[arg(long, value_name = "VAR", conflicts_with_all = ["bearer_env", "oauth_client_id"])]
    pub oauth_client_id_env: Option<String>,
    /// OAuth client credentials: the client id as given (it is no secret).
    #[arg(long, value_name = "ID", conflicts_with = "bearer_env")]
    pub oauth_client_id: Option<String>,
    /// OAuth: the client secret, read from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub oauth_client_secret_env: Option<String>,
    /// OAuth: the scope asked for (default: the target's challenge, else its scopes_supported).
    #[arg(long, value_name = "SCOPE")]
    pub oauth_scope: Option<String>,
    /// OAuth: the token endpoint (default: discovered from the target).
    #[arg(long, value_name = "URL")]
    pub oauth_token_endpoint: Option<String>,
    /// OAuth: how the client authenticates: basic, post, private_key_jwt [default: basic].
    #[arg(long, value_name = "METHOD", value_parser = AuthMethod::parse)]
    pub oauth_auth_method: Option<AuthMethod>,
    /// OAuth private_key_jwt: the PEM private key signing the client's assertions.
    #[arg(long, value_name = "FILE", value_parser = absolute)]
    pub oauth_private_key: Option<PathBuf>,
    /// OAuth private_key_jwt: the assertion's `aud`: issuer (the authorization server's
    /// issuer identifier, discovered) or token_endpoint [default: issuer].
    #[arg(long, value_name = "AUD", value_parser = JwtAudience::parse)]
    pub oauth_jwt_audience: Option<JwtAudience>,
    /// OAuth: one token per virtual user (closed loop), each fetched when its user first
    /// sends, instead of one for the run (with these flags' or the profile's credentials).
    #[arg(long)]
    pub token_per_user: bool,
    /// OAuth: the tokens of an earlier `mcpload auth login` to the target, refreshed with its
    /// refresh token; the client flags then pick the login's client.
    #[arg(long, conflicts_with_all = ["bearer_env", "token_per_user", "oauth_private_key"])]
    pub oauth_login: bool,
    /// With --oauth-login: a 403 insufficient_scope is stepped up once, and a new
    /// authorization server logged in to, by following the authorization endpoint's redirect
    /// without a browser (test servers that approve at once only).
    #[arg(long, requires = "oauth_login")]
    pub login_follow_redirects: bool,
    /// TLS: trust the CA certificates of this PEM file besides the system's.
    #[arg(long, value_name = "FILE", value_parser = absolute)]
    pub cacert: Option<PathBuf>,
    /// TLS: present this client certificate (PEM) for mutual TLS (with --client-key).
    #[arg(long, value_name = "FILE", value_parser = absolute, requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// TLS: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", value_parser = absolute, requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// TLS: check no certificate at all (marked in the results: anyone on the path can read
    /// and change the traffic).
    #[arg(long)]
    pub insecure: bool,
}

impl AuthArgs {
    /// The authorization these flags give, if they give one.
    fn spec(&self) -> Option<AuthSpec> {
        let oauth = self.oauth_client_id_env.is_some()
            || self.oauth_client_id.is_some()
            || self.oauth_client_secret_env.is_some()
            || self.oauth_token_endpoint.is_some()
            || self.oauth_private_key.is_some();
        if self.oauth_login {
            return Some(AuthSpec {
                oauth: Some(OAuthSpec {
                    grant: Some("authorization_code".into()),
                    client_id: self.oauth_client_id.clone(),
                    client_id_env: self.oauth_client_id_env.clone(),
                    client_secret_env: self.oauth_client_secret_env.clone(),
                    scope: self.oauth_scope.clone(),
                    login_follow_redirects: self.login_follow_redirects,
                    ..OAuthSpec::default()
                }),
                ..AuthSpec::default()
            });
        }
        if self.bearer_env.is_none() && !oauth {
            return None;
        }
        Some(AuthSpec {
            bearer_env: self.bearer_env.clone(),
            oauth: oauth.then(|| OAuthSpec {
                client_id: self.oauth_client_id.clone(),
                client_id_env: self.oauth_client_id_env.clone(),
                client_secret_env: self.oauth_client_secret_env.clone(),
                scope: self.oauth_scope.clone(),
                token_endpoint: self.oauth_token_endpoint.clone(),
                auth_method: self.oauth_auth_method.unwrap_or_default(),
                private_key_file: self.oauth_private_key.clone(),
                jwt_audience: self.oauth_jwt_audience.unwrap_or_default(),
                ..OAuthSpec::default()
            }),
            ..AuthSpec::default()
        })
    }

    fn tls(&self) -> TlsSpec {
        TlsSpec {
            cacert: self.cacert.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            insecure: self.insecure,
        }
    }
}

/// A path as given, made absolute (a profile's relative paths are the profile's folder's).
fn absolute(text: &str) -> Result<PathBuf, String> {
    std::path::absolute(text).map_err(|e| e.to_string())
}

/// `--args`: a JSON object, kept as JSON (a `null` in it is sent as `null`).
fn tool_args(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(text).map_err(|e| e.to_string())? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err("must be a JSON object".into()),
    }
}

/// `--builtin-knob`: `KEY=VALUE`.
/// `--server-metric NAME=SERIES`.
fn named_series(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
            Ok((k.trim().to_owned(), v.trim().to_owned()))
        }
        _ => Err("expected NAME=SERIES, e.g. sessions=mcp_sessions_active".into()),
    }
}

fn knob(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err("expected KEY=VALUE, e.g. balance=sticky".into()),
    }
}

/// `--child-env KEY=VALUE`: the value kept as written (it may hold `=` or spaces).
fn child_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
            Ok((k.to_owned(), v.to_owned()))
        }
        _ => Err("expected KEY=VALUE, e.g. LOG_LEVEL=debug".into()),
    }
}

/// `--duration`, `--timeout`, `--connect-timeout`: a duration of more than 0s.
fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err("must be more than 0s".into());
    }
    Ok(d)
}

/// `--batch-size`: 1 or more.
fn at_least_one(text: &str) -> Result<NonZeroUsize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    NonZeroUsize::new(n).ok_or_else(|| "must be 1 or more".into())
}

/// `--max-error-rate`: a fraction between 0 and 1.
fn fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err("must be a number between 0 and 1".into()),
    }
}

/// `--threshold`: an expression that parses, kept as written (the run's settings record it
/// so).
fn threshold(text: &str) -> Result<String, mcpload::analysis::GateError> {
    text.parse::<mcpload::analysis::Threshold>()?;
    Ok(text.to_owned())
}

impl RunArgs {
    /// The profile and the overrides; an error names a bad segment or start (from a flag or
    /// the environment).
    fn overrides(self) -> Result<(Option<PathBuf>, Overrides), String> {
        let env = |var: &str| std::env::var(var).ok();
        let segment =
            mcpload::run::segment_from(self.segment.as_deref(), self.segments.as_deref(), &env)?;
        let start_at = mcpload::run::start_at_from(self.start_at.as_deref(), &env)?;
        let target = match (self.url, self.stdio, self.builtin) {
            (Some(url), _, _) => Some(TargetFlag::Url(url)),
            (None, Some(cmd), _) => Some(TargetFlag::Stdio(cmd)),
            (None, None, true) => Some(TargetFlag::Builtin),
            (None, None, false) => None,
        };
        let levels = self.steps.levels();
        let o = Overrides {
            target,
            headers: self.headers,
            protocol: self.protocol,
            transport: self.transport,
            session_lost_on_400: self.session_lost_on_400,
            auth: self.auth.spec(),
            token_per_user: self.auth.token_per_user,
            process_per_user: self.process_per_user,
            session_calls: self.session_calls,
            session_duration: self.session_duration,
            fleet_memory_budget: self.fleet_memory_budget,
            child_env: self.child_env,
            child_cwd: self.child_cwd,
            tls: self.auth.tls(),
            builtin_knobs: self.builtin_knob,
            server_pid: self.server_pid,
            server_metrics: self.server_metrics,
            server_cgroup: self.server_cgroup,
            server_metric: self.server_metric,
            cooldown: self.cooldown,
            leak_min_window: self.leak_min_window,
            tool: self.tool.map(|t| (t, self.args)),
            levels,
            duration: self.steps.duration,
            warmup: self.steps.warmup,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            think_time: self.think_time,
            max_in_flight: self.max_in_flight,
            max_answer_memory: self.max_answer_memory,
            spacing: self.spacing,
            send_window: self.send_window,
            batch_size: self.batch_size,
            batch_notifications: self.batch_notifications,
            force_batch: self.force_batch,
            out: self.out,
            results: self.results,
            name: self.name,
            thresholds: self.thresholds,
            error_rate: self.max_error_rate,
            p99_slo_ms: self.slo_p99_ms,
            fail_on_anomaly: self.fail_on_anomaly,
            tool_errors: self.tool_errors,
            validate_output: self.validate_output,
            keep_going: self.keep_going,
            workers: self.workers,
            seed: self.seed,
            quiet: self.quiet,
            segment,
            start_at,
            prometheus_remote_write: self.prometheus_remote_write,
            metrics_listen: self.metrics_listen,
        };
        Ok((self.profile, o))
    }

    /// Runs the sweep (`--repeat K`: K times, each in its own folder); exit 1 when a gate
    /// fails, 2 for a bad profile or flags, 130 when interrupted (after writing what was
    /// measured).
    pub(crate) async fn run(mut self) -> anyhow::Result<()> {
        let mut ci = CiReports {
            junit: self.junit.take(),
            summary_md: self.summary_md.take(),
            ..CiReports::default()
        };
        let ran = self.run_all(&mut ci).await;
        if let Err(e) = &ran
            && ci.suites.is_empty()
        {
            ci.failed(&format!("{e:#}"));
        }
        let written = ci.write();
        match (ran, written) {
            (Err(e), Err(w)) => {
                eprintln!("mcpload: {w:#}");
                Err(e)
            }
            (ran, written) => ran.and(written),
        }
    }

    async fn run_all(mut self, ci: &mut CiReports) -> anyhow::Result<()> {
        let repeat = self.repeat.take();
        let (profile, overrides) = self
            .overrides()
            .map_err(|e| UsageError(anyhow::anyhow!(e)))?;
        let cancel = tokio_util::sync::CancellationToken::new();
        tokio::spawn(mcpload::run::stop_on_signals(cancel.clone()));
        let Some(k) = repeat else {
            return run_once(profile.as_deref(), overrides, cancel, ci).await;
        };
        let parent = mcpload::run::plan(profile.as_deref(), overrides.clone())
            .map_err(|e| UsageError(e.into()))?
            .dir()
            .to_owned();
        let mut failed = Vec::new();
        for i in 1..=k {
            let o = Overrides {
                out: Some(parent.join(format!("run-{i}"))),
                ..overrides.clone()
            };
            match run_once(profile.as_deref(), o, cancel.clone(), ci).await {
                Ok(()) => {}
                Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                Err(e) if e.downcast_ref::<UsageError>().is_some() => return Err(e),
                Err(e) => failed.push(format!("run-{i}: {e:#}")),
            }
        }
        println!("runs: {} (run-1 … run-{k})", parent.display());
        anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
        Ok(())
    }
}

/// `--junit` and `--summary-md` (or `$GITHUB_STEP_SUMMARY`): each run's CI reports,
/// collected as the runs end and written once all have.
#[derive(Default)]
struct CiReports {
    junit: Option<PathBuf>,
    summary_md: Option<PathBuf>,
    suites: Vec<quick_junit::TestSuite>,
    markdown: String,
}

impl CiReports {
    /// A run ended with a folder: its suite and summary from its summary.json.
    fn ended(&mut self, dir: &Path) {
        use mcpload::report::{RunSummary, ci};
        match RunSummary::read(dir) {
            Ok(run) => {
                self.suites.push(ci::junit_suite(&run, dir));
                self.markdown.push_str(&ci::render_run_markdown(&run, dir));
            }
            Err(e) => self.failed(&e.to_string()),
        }
    }

    /// A run could not run: an error case, and a summary saying why.
    fn failed(&mut self, why: &str) {
        self.suites
            .push(mcpload::report::ci::junit_error_suite(why));
        let why = mcpload::report::ci::md(why);
        self.markdown
            .push_str(&format!("### ⚠️ mcpload run could not run\n\n{why}\n"));
    }

    fn write(self) -> anyhow::Result<()> {
        use anyhow::Context as _;
        if let Some(path) = &self.junit {
            mcpload::report::ci::write_junit(path, self.suites)
                .with_context(|| format!("--junit {}", path.display()))?;
        }
        mcpload::report::ci::write_summary_md(self.summary_md.as_deref(), &self.markdown)
            .context("--summary-md")
    }
}

/// One run of a plan: prints its report and the folder, and hands it to the CI reports; the
/// error says why it failed.
async fn run_once(
    profile: Option<&Path>,
    overrides: Overrides,
    cancel: tokio_util::sync::CancellationToken,
    ci: &mut CiReports,
) -> anyhow::Result<()> {
    let plan = match mcpload::run::plan(profile, overrides) {
        Ok(p) => p,
        Err(e) => {
            ci.failed(&e.to_string());
            return Err(UsageError(e.into()).into());
        }
    };
    let outcome = match mcpload::run::execute(plan, cancel).await {
        Ok(o) => o,
        Err(e) => {
            ci.failed(&e.to_string());
            return Err(match e {
                mcpload::run::RunError::Plan(e) => UsageError(e.into()).into(),
                e => e.into(),
            });
        }
    };
    ci.ended(&outcome.dir);
    print!("{}", outcome.terminal);
    println!("results: {}", outcome.dir.display());
    if let Some(why) = outcome.auth_stopped {
        return Err(UsageError(anyhow::anyhow!(
            "the run stopped: the authorization failed for good: {why}"
        ))
        .into());
    }
    if let Some(why) = outcome.aborted {
        anyhow::bail!("the run stopped early: {why}");
    }
    if outcome.interrupted {
        return Err(Interrupted(outcome.dir.display().to_string()).into());
    }
    if !outcome.failed_gates.is_empty() {
        anyhow::bail!("thresholds failed: {}", outcome.failed_gates.join(", "));
    }
    Ok(())
}

impl ProbeArgs {
    /// `probe --races`: the target and the checks from the profile and the flags.
    async fn run_races(self) -> anyhow::Result<()> {
        use mcpload::client::{Endpoint, ProtocolChoice};
        use mcpload::probe::races::{RaceTarget, render_races, run_races};
        let usage = |e: String| UsageError(anyhow::anyhow!(e));
        let profile = match &self.profile {
            Some(p) => Some(
                mcpload::profile::Source::read(p)
                    .and_then(|s| s.parse())
                    .map_err(|e| usage(e.to_string()))?,
            ),
            None => None,
        };
        let base = self
            .profile
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let target = match (&self.url, &self.stdio, self.builtin, &profile) {
            (Some(url), ..) => {
                RaceTarget::Endpoint(Endpoint::http(url.clone(), self.headers.clone()))
            }
            (None, Some(cmd), ..) => {
                let mut t = Endpoint::stdio(cmd).map_err(|e| usage(e.to_string()))?;
                if let Endpoint::Stdio(o) = &mut t {
                    o.stderr = self.stderr.clone();
                }
                RaceTarget::Endpoint(t)
            }
            (None, None, true, p) => RaceTarget::Builtin(Box::new(
                p.as_ref()
                    .and_then(|p| p.target.get_ref().builtin.clone())
                    .unwrap_or_default(),
            )),
            (None, None, false, Some(p)) => RaceTarget::of_profile(p.target.get_ref(), &base)
                .map_err(|e| usage(e.to_string()))?,
            (None, None, false, None) => unreachable!("clap requires a target"),
        };
        let mut checks = profile
            .as_ref()
            .and_then(|p| p.races.clone())
            .unwrap_or_default();
        if let Some(n) = self.concurrency {
            if !(1..=mcpload::profile::races::CONCURRENCY_MAX).contains(&n) {
                return Err(usage(format!(
                    "--concurrency {n}: from 1 to {}",
                    mcpload::profile::races::CONCURRENCY_MAX
                ))
                .into());
            }
            checks.concurrency = n;
        }
        checks.timeout = self.timeout.unwrap_or(checks.timeout);
        if !self.checks.is_empty() {
            checks.only = self.checks.clone();
        }
        let fc = &mut checks.first_call;
        fc.attempts = self.attempts.unwrap_or(fc.attempts).max(1);
        fc.hang_after = self.hang_after.unwrap_or(fc.hang_after);
        fc.slow_within = self.slow_within.unwrap_or(fc.slow_within);
        if fc.slow_within <= fc.hang_after {
            return Err(usage("--slow-within must be longer than --hang-after".into()).into());
        }
        if fc.attempts > 1 && matches!(target, RaceTarget::Endpoint(Endpoint::Http { .. })) {
            eprintln!(
                "mcpload: --attempts {}: a URL's server is fresh only once; one first-call burst",
                fc.attempts
            );
        }
        let protocol = match (self.protocol, &profile) {
            (ProtocolChoice::Auto, Some(p)) => p.target.get_ref().protocol,
            (chosen, _) => chosen,
        };
        let report = run_races(&target, &checks, protocol).await?;
        let mut out = std::io::stdout().lock();
        if self.json {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        } else {
            out.write_all(render_races(&report).as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_are_json_and_keep_null() {
        let args = tool_args(r#"{"region":"us-east1","verbose":null,"n":[1,null]}"#).unwrap();
        assert_eq!(
            serde_json::Value::Object(args),
            serde_json::json!({"region": "us-east1", "verbose": null, "n": [1, null]})
        );
        assert!(tool_args("[1]").is_err());
    }
}
