//! stdio: a child process spoken to with one JSON text per line. One buffered writer to its
//! stdin, one line reader on its stdout, both driven by the owning worker's polls (answers
//! come in any order; the correlator pairs them by id). Lines are bounded; a line that is not
//! JSON is counted as stdout pollution; the child's stderr is drained always, into a bounded
//! file, its last lines kept; a child that exits ends everything pending as `missing`. The
//! child runs in a process group of its own, ended whole, so a launcher (`npx`, `uvx`)
//! leaves nothing behind.

use super::http::LegacyInit;
use super::{
    Cancelled, Event, ExchangeId, Outgoing, Transport, TransportCounters, TransportError,
    Unreadable, cancel_notification,
};
use crate::jsonrpc::Id;
use crate::metrics::{Counters, LatencyHistogram};
use bytes::{Buf, BytesMut};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// Lines of a child's stderr kept in memory, and the longest kept of each.
const TAIL_LINES: usize = 20;
const TAIL_LINE_BYTES: usize = 400;
/// The longest stdout line kept as the example of pollution.
const POLLUTION_KEPT_BYTES: usize = 200;
/// How long a child is given to exit once its stdin is closed, before its group is killed.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The command to run, and the bounds of its output.
#[derive(Clone)]
pub struct StdioOptions {
    pub program: String,
    pub args: Vec<String>,
    /// Extra environment variables for the child (the parent's environment is inherited).
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Where the child's stderr is drained to, appended (`None`: discarded).
    pub stderr: Option<PathBuf>,
    /// The largest that stderr file grows to; past it stderr is read and dropped (its last
    /// lines are still kept in memory).
    pub stderr_max_bytes: u64,
    /// Longest line accepted from the child; a longer one is dropped and counted.
    pub max_line_bytes: usize,
}

impl std::fmt::Debug for StdioOptions {
    /// Environment values may be secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("StdioOptions")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .field("stderr", &self.stderr)
            .field("stderr_max_bytes", &self.stderr_max_bytes)
            .field("max_line_bytes", &self.max_line_bytes)
            .finish()
    }
}

impl StdioOptions {
    /// Splits a command line the way a POSIX shell would (quotes, escapes; no expansion).
    pub fn from_command_line(line: &str) -> Result<Self, TransportError> {
        let mut words = shell_words::split(line)
            .map_err(|e| TransportError::Invalid(format!("command line: {e}")))?
            .into_iter();
        let program = words
            .next()
            .ok_or_else(|| TransportError::Invalid("empty command line".into()))?;
        Ok(StdioOptions {
            program,
            args: words.collect(),
            env: Vec::new(),
            cwd: None,
            stderr: None,
            stderr_max_bytes: 16 << 20,
            max_line_bytes: 16 << 20,
        })
    }
}

/// The last lines a child wrote on its stderr, filled while it is drained.
#[derive(Clone, Debug, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn push(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line).trim_end().to_owned();
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// Reads a child's stderr to its end, so a child that writes much never blocks on a full
/// pipe: appended to `path` until the file holds `max_bytes`, the last lines kept in `tail`.
async fn drain_stderr(mut from: ChildStderr, path: PathBuf, max_bytes: u64, tail: StderrTail) {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .await
        .ok();
    let mut room = match &file {
        Some(f) => max_bytes.saturating_sub(f.metadata().await.map_or(0, |m| m.len())),
        None => 0,
    };
    let mut line = Vec::new();
    let mut buf = vec![0u8; 8 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if let Some(f) = file.as_mut() {
            let keep = chunk.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            let cut = keep < chunk.len();
            let written = f.write_all(&chunk[..keep]).await.is_ok()
                && (!cut
                    || f.write_all(b"\n[mcpload: the file is full; later stderr is dropped]\n")
                        .await
                        .is_ok());
            room -= keep as u64;
            if cut || !written {
                let _ = f.flush().await;
                file = None;
            }
        }
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            take_up_to(&mut line, &rest[..i]);
            tail.push(&line);
            line.clear();
            rest = &rest[i + 1..];
        }
        take_up_to(&mut line, rest);
    }
    if !line.is_empty() {
        tail.push(&line);
    }
    if let Some(f) = file.as_mut() {
        let _ = f.flush().await;
    }
}

/// Appends to a kept line no more than its bound.
fn take_up_to(line: &mut Vec<u8>, bytes: &[u8]) {
    let room = TAIL_LINE_BYTES.saturating_sub(line.len());
    line.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// Kills every process of the group a child leads (the child itself, and what it started
/// and did not move elsewhere); a group already gone is not an error.
pub(crate) fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The stdio transport. See [`super::Transport`].
#[derive(Debug)]
pub struct StdioTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Bytes queued for stdin.
    wbuf: BytesMut,
    /// Since when the queued bytes have been waiting for a full pipe.
    blocked_since: Option<Instant>,
    rbuf: BytesMut,
    /// How much of `rbuf` is known to hold no newline.
    scanned: usize,
    /// When the bytes now in `rbuf` were read.
    read_at: Instant,
    /// Dropping the rest of an over-long line.
    skipping: bool,
    max_line: usize,
    down: Option<TransportError>,
    ready: VecDeque<Event>,
    next_exchange: u64,
    counters: TransportCounters,
    /// What `counters` handed over so far.
    handed: Counters,
    /// The child's process id (its process group's too), kept after it exits.
    pid: Option<u32>,
    /// When the spawn began, how long it took, and how long until the handshake was answered.
    began: Instant,
    spawn_time: Duration,
    connect_time: Option<Duration>,
    /// The start-up was handed over to a step's histograms.
    startup_taken: bool,
    /// What the handshake sent (legacy eras), for children started later like this one.
    handshake: Option<LegacyInit>,
    stderr_tail: StderrTail,
    /// The first stdout line that was not JSON, cut to a bound.
    first_pollution: Option<String>,
    /// The child ended its output while in use (not closed by mcpload).
    ended_early: bool,
    /// How the child exited, once it has been reaped.
    status: Option<ExitStatus>,
}

/// One child that exited while in use (summary.json `processes.exits`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessExit {
    /// The virtual user whose child it was (0 for a shared child) and its session (0 first).
    pub user: u32,
    pub session: u32,
    pub pid: Option<u32>,
    /// `start` (before its handshake was answered) or `session`.
    pub during: String,
    /// The exit code, or the signal that ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The last lines of its stderr.
    pub stderr_tail: Vec<String>,
}

/// The children of a stdio run (summary.json `processes`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessReport {
    /// `shared` (one child for every user) or `per_user`.
    pub mode: String,
    /// Children started, the first one's (the connect's) included.
    pub started: u64,
    /// Children that never answered their handshake (exited, refused it, or timed out).
    pub start_failures: u64,
    /// Children that exited while in use, at start or in a session; the first
    /// [`EXITS_KEPT`] in `exits`.
    pub exits_total: u64,
    pub exits: Vec<ProcessExit>,
    /// The first stdout line that was not JSON, and whose child wrote it.
    pub first_stdout_pollution: Option<String>,
    pub first_stdout_pollution_user: Option<u32>,
    /// A process per session: the memory budget the fleet was held to, and the children not
    /// started for it (their users' requests failed as `transport_errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget_bytes: Option<u64>,
    #[serde(default)]
    pub budget_refusals: u64,
}

/// Exits kept in detail in a [`ProcessReport`].
pub const EXITS_KEPT: usize = 100;

impl StdioTransport {
    /// Starts the child.
    pub fn spawn(opts: &StdioOptions) -> Result<Self, TransportError> {
        // Appended to, so the children of several workers can share one file.
        if let Some(path) = &opts.stderr {
            // Checked here, so that a folder that cannot be written is an error at once.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    TransportError::Invalid(format!("stderr file {}: {e}", path.display()))
                })?;
        }
        let mut cmd = Command::new(&opts.program);
        cmd.args(&opts.args)
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if opts.stderr.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &opts.cwd {
            cmd.current_dir(dir);
        }
        let began = Instant::now();
        let mut child = cmd.spawn().map_err(|e| {
            TransportError::NotRunning(format!("cannot start {:?}: {e}", opts.program))
        })?;
        let spawn_time = began.elapsed();
        let stderr_tail = StderrTail::default();
        if let (Some(from), Some(path)) = (child.stderr.take(), &opts.stderr) {
            tokio::spawn(drain_stderr(
                from,
                path.clone(),
                opts.stderr_max_bytes,
                stderr_tail.clone(),
            ));
        }
        Ok(StdioTransport {
            pid: child.id(),
            began,
            spawn_time,
            connect_time: None,
            startup_taken: false,
            handshake: None,
            stderr_tail,
            first_pollution: None,
            ended_early: false,
            status: None,
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            wbuf: BytesMut::with_capacity(64 << 10),
            blocked_since: None,
            rbuf: BytesMut::with_capacity(64 << 10),
            scanned: 0,
            read_at: Instant::now(),
            skipping: false,
            max_line: opts.max_line_bytes.max(1),
            down: None,
            ready: VecDeque::new(),
            next_exchange: 0,
            counters: TransportCounters::default(),
            handed: Counters::default(),
        })
    }

    /// The child's process id while it runs.
    pub fn child_id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The child's process id, also after it exited.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The handshake is answered: the child's start-up ends here.
    pub fn mark_connected(&mut self) {
        self.connect_time
            .get_or_insert_with(|| self.began.elapsed());
    }

    /// The connect is over: its start-up ends here if the handshake did not end it, and what
    /// the counters saw while connecting is forgotten (the connect read those lines itself,
    /// so none reached the pairing counts), except its stdout pollution: a banner the child
    /// printed as it started is counted in the first step like any later child's, as a parse
    /// error too.
    pub fn connected(&mut self) {
        self.mark_connected();
        let polluted = self.counters.stdout_pollution;
        self.counters = TransportCounters {
            stdout_pollution: polluted,
            connect_parse_errors: polluted,
            ..TransportCounters::default()
        };
    }

    /// Keeps what the handshake sent, for children started later the same way.
    pub fn set_handshake(&mut self, init: LegacyInit) {
        self.handshake = Some(init);
    }

    pub(crate) fn handshake(&self) -> Option<&LegacyInit> {
        self.handshake.as_ref()
    }

    pub(crate) fn stderr_tail(&self) -> &StderrTail {
        &self.stderr_tail
    }

    /// When its spawn began.
    pub(crate) fn started(&self) -> Instant {
        self.began
    }

    pub(crate) fn first_pollution(&self) -> Option<&str> {
        self.first_pollution.as_deref()
    }

    /// Whether the child has exited, and how (reaping it).
    pub(crate) fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// How the child ended, as [`ProcessReport`] tells it.
    pub(crate) fn exit(&self, user: u32, session: u32, during: &'static str) -> ProcessExit {
        use std::os::unix::process::ExitStatusExt;
        ProcessExit {
            user,
            session,
            pid: self.pid,
            during: during.to_owned(),
            code: self.status.and_then(|s| s.code()),
            signal: self.status.and_then(|s| s.signal()),
            stderr_tail: self.stderr_tail.lines(),
        }
    }

    /// The one child of a run that shares it among every user.
    pub fn process_report(&self) -> ProcessReport {
        ProcessReport {
            mode: "shared".into(),
            started: 1,
            start_failures: 0,
            exits_total: u64::from(self.ended_early),
            exits: self
                .ended_early
                .then(|| self.exit(0, 0, "session"))
                .into_iter()
                .collect(),
            first_stdout_pollution: self.first_pollution.clone(),
            first_stdout_pollution_user: self.first_pollution.as_ref().map(|_| 0),
            memory_budget_bytes: None,
            budget_refusals: 0,
        }
    }

    /// Closes the child's stdin, the polite way to ask a stdio server to stop; its output is
    /// still read.
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
        self.wbuf.clear();
        self.unblocked();
    }

    /// Kills the child's whole process group.
    pub(crate) fn kill(&mut self) {
        if let Some(pid) = self.pid {
            kill_group(pid);
        }
        let _ = self.child.start_kill();
    }

    /// Waits for the child to be gone, and reaps it.
    pub(crate) async fn reap(&mut self) {
        if let Ok(status) = self.child.wait().await {
            self.status.get_or_insert(status);
        }
    }

    /// Writes bytes as they are, with no newline added (probes send malformed lines).
    pub fn write_raw(&mut self, bytes: &[u8]) {
        if self.down.is_none() {
            self.wbuf.extend_from_slice(bytes);
        }
    }

    fn poll_write_side(&mut self, cx: &mut Context<'_>) {
        while !self.wbuf.is_empty() {
            let Some(stdin) = self.stdin.as_mut() else {
                self.wbuf.clear();
                return;
            };
            match Pin::new(stdin).poll_write(cx, &self.wbuf) {
                Poll::Ready(Ok(n)) if n > 0 => {
                    self.wbuf.advance(n);
                    self.unblocked();
                }
                // The child closed its stdin or died; its stdout will tell the rest.
                Poll::Ready(_) => {
                    self.stdin = None;
                    self.wbuf.clear();
                    self.unblocked();
                }
                Poll::Pending => {
                    self.blocked_since.get_or_insert_with(Instant::now);
                    return;
                }
            }
        }
    }

    /// Writing is possible again (or pointless): the time it was blocked is counted.
    fn unblocked(&mut self) {
        if let Some(t) = self.blocked_since.take() {
            self.counters.stdio_write_block += t.elapsed();
        }
    }

    /// The next complete line of `rbuf` as an event, if there is one.
    fn take_line(&mut self) -> Option<Event> {
        loop {
            let Some(i) = memchr::memchr(b'\n', &self.rbuf[self.scanned..]) else {
                self.scanned = self.rbuf.len();
                if self.rbuf.len() > self.max_line {
                    self.rbuf.clear();
                    self.scanned = 0;
                    if !self.skipping {
                        self.skipping = true;
                        return Some(self.unreadable(Unreadable::TooLarge));
                    }
                }
                return None;
            };
            let mut line = self.rbuf.split_to(self.scanned + i + 1);
            self.scanned = 0;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            line.truncate(line.len() - 1);
            if line.last() == Some(&b'\r') {
                line.truncate(line.len() - 1);
            }
            if line.len() > self.max_line {
                return Some(self.unreadable(Unreadable::TooLarge));
            }
            let Some(&first) = line.iter().find(|b| !b.is_ascii_whitespace()) else {
                continue;
            };
            if first != b'{' && first != b'[' {
                // Not JSON at all: a log line or a banner on stdout. Still handed on, so the
                // correlator counts it among `parse_errors`.
                self.counters.stdout_pollution += 1;
                if self.first_pollution.is_none() {
                    let kept = &line[..line.len().min(POLLUTION_KEPT_BYTES)];
                    self.first_pollution = Some(String::from_utf8_lossy(kept).into_owned());
                }
            }
            return Some(Event::Message {
                exchange: None,
                batch: false,
                at: self.read_at,
                bytes: line.freeze(),
            });
        }
    }

    fn unreadable(&self, why: Unreadable) -> Event {
        Event::Unreadable {
            exchange: None,
            at: self.read_at,
            why,
        }
    }

    /// The child's output ended: report a cut-off line, then the transport is down.
    fn output_ended(&mut self, cause: Option<std::io::Error>) {
        self.stdout = None;
        self.stdin = None;
        self.wbuf.clear();
        self.unblocked();
        if !self.skipping && self.rbuf.iter().any(|b| !b.is_ascii_whitespace()) {
            self.read_at = Instant::now();
            self.ready.push_back(self.unreadable(Unreadable::Truncated));
        }
        self.rbuf.clear();
        self.scanned = 0;
        self.ended_early = true;
        let status = match self.try_exit() {
            Some(s) => format!("child exited ({s})"),
            None => "child closed its output".to_string(),
        };
        let error = TransportError::NotRunning(match cause {
            Some(e) => format!("{status}: {e}"),
            None => status,
        });
        self.down = Some(error.clone());
        self.ready.push_back(Event::Down { error });
    }
}

impl Transport for StdioTransport {
    fn send(&mut self, out: Outgoing) -> ExchangeId {
        let ex = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        match &self.down {
            Some(error) => self.ready.push_back(Event::Failed {
                exchange: Some(ex),
                ids: out.ids,
                error: error.clone(),
            }),
            None => {
                self.wbuf.extend_from_slice(&out.body);
                self.wbuf.extend_from_slice(b"\n");
            }
        }
        ex
    }

    fn cancel(&mut self, id: &Id) -> Cancelled {
        // stdio has no stream per request: every era cancels with a notification. A request
        // is written to the child's pipe as it is sent (bytes the pipe has not yet taken
        // count as sent: the line may be half written).
        if self.down.is_none() {
            self.wbuf.extend_from_slice(&cancel_notification(id));
            self.wbuf.extend_from_slice(b"\n");
        }
        Cancelled::Sent
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Poll::Ready(ev);
            }
            self.poll_write_side(cx);
            if let Some(ev) = self.take_line() {
                return Poll::Ready(ev);
            }
            let Some(stdout) = self.stdout.as_mut() else {
                return Poll::Pending;
            };
            if self.rbuf.capacity() - self.rbuf.len() < 8 << 10 {
                self.rbuf.reserve(64 << 10);
            }
            match tokio_util::io::poll_read_buf(Pin::new(stdout), cx, &mut self.rbuf) {
                Poll::Ready(Ok(0)) => self.output_ended(None),
                Poll::Ready(Ok(_)) => self.read_at = Instant::now(),
                Poll::Ready(Err(e)) => self.output_ended(Some(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn open_exchanges(&self) -> usize {
        usize::from(!self.wbuf.is_empty())
    }

    fn take_counters(&mut self, into: &mut Counters) {
        if let Some(t) = self.blocked_since.as_mut() {
            let now = Instant::now();
            self.counters.stdio_write_block += now - *t;
            *t = now;
        }
        self.counters.processes_max = u64::from(self.down.is_none());
        self.counters.hand_over(into, &mut self.handed);
    }

    fn take_startups(&mut self, spawn: &mut LatencyHistogram, connect: &mut LatencyHistogram) {
        if let Some(connected) = self.connect_time
            && !std::mem::replace(&mut self.startup_taken, true)
        {
            spawn.record(self.spawn_time);
            connect.record(connected);
        }
    }

    fn add_totals(&self, into: &mut Counters) {
        *into += &self.handed;
        self.counters.clone().drain_into(into);
    }

    async fn close(&mut self) {
        // Closing stdin is the polite way to stop a stdio server; then it gets a grace
        // period to go, and its whole group is killed (what a launcher started too).
        self.close_stdin();
        self.stdout = None;
        if tokio::time::timeout(CLOSE_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.kill();
        }
        if let Some(pid) = self.pid {
            kill_group(pid);
        }
        self.reap().await;
        self.down
            .get_or_insert(TransportError::NotRunning("closed".into()));
    }
}
