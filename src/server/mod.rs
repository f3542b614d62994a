//! The built-in reference MCP server (`mcpload serve`, profile target `builtin`): both MCP
//! eras on one Streamable HTTP endpoint or on stdio, a capacity model, exact and seeded
//! fault injection, replicas behind an in-process load balancer (HTTP), and ground-truth
//! counters to test a client's numbers against.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcpload::server::ServeError> {
//! use mcpload::server::{ServeConfig, start_http};
//! let target = start_http(ServeConfig { capacity: 4, ..ServeConfig::default() }).await?;
//! println!("{}", target.url());
//! let seen = target.stats().requests_seen;
//! # let _ = seen;
//! target.shutdown().await;
//! # Ok(()) }
//! ```

mod auth;
mod auth_code;
mod capacity;
mod config;
mod faults;
mod fleet;
mod handler;
mod hostile;
mod http;
mod input;
mod job;
mod job_api;
mod leaks;
mod legacy_sse;
mod mcp;
mod methods;
mod param_tools;
mod races;
mod resume;
mod sessions;
mod stats;
mod stdio;
mod tasks;
mod wire;

pub use auth::TOKEN_PREFIX;
pub use auth_code::{CODE_PREFIX, REFRESH_PREFIX};
pub use config::{
    AnswerMode, AuthMetadata, Balance, BatchPolicy, ConfigError, RejectStatus, ServeConfig,
    ServedEras, ServiceTime, Stall,
};
pub use faults::{Anomaly, FaultEvery, FaultKind, FaultOdds, Periods, ProgressFault, TaskFault};
pub use hostile::{
    HostileConfig, HostileKind, HostileStats, HostileTransport, RunningHostile,
    serve_hostile_stdio, start_hostile_http,
};
pub use stats::{
    AuthCounts, ClientView, FaultCounts, InputCounts, JobCounts, OperationCounts, ProgressCounts,
    RaceCounts, ReplicaCounts, StatsSnapshot, TaskCounts, TaskFaultCounts,
};

use capacity::Capacity;
use faults::FaultPlan;
use fleet::Fleet;
use job_api::JobStore;
use leaks::Leaks;
use mcp::Protocol;
use races::Races;
use resume::Resumptions;
use sessions::Sessions;
use stats::{ReplicaStats, Stats};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tasks::TaskStore;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the target could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("stdio: {0}")]
    Io(#[from] std::io::Error),
}

/// State shared by every connection of one target: of one replica, behind `replicas`.
/// Only the capacity model, the replica's own counters and (unless `shared_sessions`) the
/// sessions are a replica's own; the rest is the fleet's, as if kept in a shared store.
pub(crate) struct Shared {
    cfg: ServeConfig,
    protocol: Protocol,
    capacity: Arc<Capacity>,
    faults: FaultPlan,
    stats: Arc<Stats>,
    fault_seq: Arc<AtomicU64>,
    sessions: Arc<Sessions>,
    jobs: Arc<JobStore>,
    tasks: Arc<TaskStore>,
    /// The race targets: shared, as if kept in one store, by whoever shares this target's
    /// jobs.
    races: Arc<Races>,
    /// The leaks on purpose: the process's, so the fleet's.
    leaks: Arc<Leaks>,
    /// Keys the `requestState` of input-required rounds.
    salt: u64,
    resumptions: Arc<Resumptions>,
    /// `legacy_sse`: the open sessions of the HTTP+SSE transport and their streams.
    legacy: legacy_sse::Sessions,
    replica: ReplicaStats,
    /// `auth`: the protected resource's checks and the authorization server (the fleet's).
    auth: Option<Arc<auth::AuthServer>>,
}

impl Shared {
    fn new(cfg: ServeConfig) -> Result<Shared, ConfigError> {
        cfg.validate()?;
        let prefix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id().rotate_left(16);
        Ok(Shared {
            protocol: Protocol::new(&cfg)?,
            capacity: Arc::new(Capacity::new(&cfg, tokio::time::Instant::now())),
            faults: FaultPlan::new(cfg.fault, cfg.fault_random, cfg.seed),
            stats: Arc::new(Stats::default()),
            fault_seq: Arc::default(),
            sessions: Arc::new(Sessions::new(prefix)),
            jobs: Arc::new(JobStore::new(&cfg)),
            races: Arc::new(Races::new(&cfg)),
            leaks: Arc::new(Leaks::new(&cfg)),
            tasks: Arc::new(TaskStore::new(
                &cfg,
                u64::from(prefix).rotate_left(32) ^ cfg.seed,
            )),
            salt: u64::from(prefix) ^ 0x6d72_7472_7374_6174,
            resumptions: Arc::new(Resumptions::new(cfg.sse_close_early, cfg.sse_resume_refuse)),
            legacy: legacy_sse::Sessions::default(),
            replica: ReplicaStats::default(),
            auth: cfg
                .auth
                .then(|| auth::AuthServer::new(&cfg))
                .transpose()?
                .map(Arc::new),
            cfg,
        })
    }

    /// Replica `n` (from 1) of the fleet `self` is replica 0 of: a capacity model of its
    /// own, and sessions of its own (their ids carry a prefix of their own) unless
    /// `shared_sessions`.
    fn sibling(&self, n: usize) -> Result<Shared, ConfigError> {
        let sessions = if self.cfg.shared_sessions {
            Arc::clone(&self.sessions)
        } else {
            Arc::new(Sessions::new(self.sessions.prefix().wrapping_add(n as u32)))
        };
        Ok(Shared {
            protocol: Protocol::new(&self.cfg)?,
            capacity: Arc::new(Capacity::new(&self.cfg, tokio::time::Instant::now())),
            faults: FaultPlan::new(self.cfg.fault, self.cfg.fault_random, self.cfg.seed),
            stats: Arc::clone(&self.stats),
            fault_seq: Arc::clone(&self.fault_seq),
            sessions,
            jobs: Arc::clone(&self.jobs),
            races: Arc::clone(&self.races),
            leaks: Arc::clone(&self.leaks),
            tasks: Arc::clone(&self.tasks),
            salt: self.salt,
            resumptions: Arc::clone(&self.resumptions),
            // Never served by more than one replica (checked).
            legacy: legacy_sse::Sessions::default(),
            replica: ReplicaStats::default(),
            auth: self.auth.clone(),
            cfg: self.cfg.clone(),
        })
    }

    /// The counters now, the job API's and this replica's sessions included.
    fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            sessions_held: self.sessions.held(),
            jobs: self.jobs.counts(),
            tasks: self.tasks.counts(),
            races: self.races.counts(),
            auth: self.auth.as_ref().map(|a| a.counts()),
            ..self.stats.snapshot()
        }
    }
}

/// A target serving HTTP in the background. Dropping it (or [`RunningTarget::shutdown`])
/// stops it.
pub struct RunningTarget {
    addr: SocketAddr,
    fleet: Arc<Fleet>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    /// The runtime of its own it serves on ([`start_http_apart`]), if it has one.
    runtime: Option<tokio::runtime::Runtime>,
}

impl RunningTarget {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint, `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The counters now.
    pub fn stats(&self) -> StatsSnapshot {
        self.fleet.snapshot()
    }

    /// Reads the legacy sessions the target holds now (`sessions_held`), from any thread,
    /// for as long as the reader lives.
    pub fn sessions_held(&self) -> impl Fn() -> u64 + Send + 'static {
        let fleet = Arc::clone(&self.fleet);
        move || fleet.snapshot().sessions_held
    }

    /// Stops accepting, lets answers in progress finish (a few seconds at most), and returns
    /// the final counters.
    pub async fn shutdown(mut self) -> StatsSnapshot {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.stats()
    }
}

impl Drop for RunningTarget {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        // Dropped from async code too: its threads are left to end by themselves.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Connections waiting to be accepted at most (the kernel may cap it: somaxconn). tokio's
/// default, 1,024, overflows when thousands of clients reconnect at once (10,000 virtual
/// users whose idle connections the server closed), and a SYN dropped twice takes longer
/// than a client's connect timeout.
const LISTEN_BACKLOG: u32 = 8192;

/// A listening socket on `addr` with room for [`LISTEN_BACKLOG`] pending connections.
pub(crate) fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As TcpListener::bind does: a restarted server may bind while old connections linger.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Starts the HTTP target on `config.bind` in the background of the current tokio runtime:
/// one server, or `replicas` of them behind a load balancer on the one port.
pub async fn start_http(config: ServeConfig) -> Result<RunningTarget, ServeError> {
    spawn_http(config)
}

/// [`start_http`], from inside a runtime's context (its tasks go to that runtime).
fn spawn_http(config: ServeConfig) -> Result<RunningTarget, ServeError> {
    let stdio_only = config.stdio_only_knobs();
    if !stdio_only.is_empty() {
        return Err(ConfigError::Invalid(format!(
            "{} {} served over stdio only: add --stdio",
            stdio_only.join(", "),
            if stdio_only.len() == 1 { "is" } else { "are" }
        ))
        .into());
    }
    let fleet = Arc::new(Fleet::new(Shared::new(config)?)?);
    let addr = fleet.cfg().bind;
    let listener = listen(addr).map_err(|source| ServeError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(http::accept_loop(listener, Arc::clone(&fleet), stopped));
    Ok(RunningTarget {
        addr,
        fleet,
        stop,
        task: Some(task),
        runtime: None,
    })
}

/// [`start_http`] on a runtime of its own, whose threads are named `threads`: the built-in
/// target of a run serves from the run's process, and the generator's view of its own CPU
/// leaves those threads out.
pub fn start_http_apart(config: ServeConfig, threads: &str) -> Result<RunningTarget, ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name(threads)
        .enable_all()
        .build()?;
    let mut running = {
        let _inside = runtime.enter();
        spawn_http(config)?
    };
    running.runtime = Some(runtime);
    Ok(running)
}

/// Serves MCP over `input`/`output` (one JSON-RPC message or batch per line) until `input`
/// ends and every request has been answered; returns the final counters.
pub async fn serve_stdio<R, W>(
    config: ServeConfig,
    input: R,
    output: W,
) -> Result<StatsSnapshot, ServeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    if config.replicas > 1 {
        return Err(ConfigError::Invalid("replicas are served over HTTP only".into()).into());
    }
    if config.auth {
        return Err(ConfigError::Invalid("auth is served over HTTP only".into()).into());
    }
    let shared = Arc::new(Shared::new(config)?);
    stdio::serve(Arc::clone(&shared), input, output).await?;
    Ok(shared.snapshot())
}
