//! stdio: a child process spoken to with one JSON text per line. One buffered writer to its
//! stdin, one line reader on its stdout, both driven by the owning worker's polls (answers
//! come in any order; the correlator pairs them by id). Lines are bounded; the child's stderr
//! goes to a file; a child that exits ends everything pending as `missing`.

use super::{
    Cancelled, Event, ExchangeId, Outgoing, Transport, TransportCounters, TransportError,
    Unreadable, cancel_notification,
};
use crate::jsonrpc::Id;
use crate::metrics::Counters;
use bytes::{Buf, BytesMut};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::AsyncWrite;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The command to run, and the bounds of its output.
#[derive(Clone)]
pub struct StdioOptions {
    pub program: String,
    pub args: Vec<String>,
    /// Extra environment variables for the child (the parent's environment is inherited).
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Where the child's stderr goes (`None`: discarded).
    pub stderr: Option<PathBuf>,
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
            max_line_bytes: 16 << 20,
        })
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
}

impl StdioTransport {
    /// Starts the child.
    pub fn spawn(opts: &StdioOptions) -> Result<Self, TransportError> {
        // Appended to, so the children of several workers can share one file.
        let stderr = match &opts.stderr {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| {
                        TransportError::Invalid(format!("stderr file {}: {e}", path.display()))
                    })?,
            ),
            None => Stdio::null(),
        };
        let mut cmd = Command::new(&opts.program);
        cmd.args(&opts.args)
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        if let Some(dir) = &opts.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|e| {
            TransportError::NotRunning(format!("cannot start {:?}: {e}", opts.program))
        })?;
        Ok(StdioTransport {
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
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
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
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!("child exited ({s})"),
            _ => "child closed its output".to_string(),
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
        self.counters.hand_over(into, &mut self.handed);
    }

    fn add_totals(&self, into: &mut Counters) {
        *into += &self.handed;
        self.counters.clone().drain_into(into);
    }

    async fn close(&mut self) {
        // Closing stdin is the polite way to stop a stdio server; then it gets 2 s to go.
        self.stdin = None;
        self.stdout = None;
        if tokio::time::timeout(Duration::from_secs(2), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        self.down
            .get_or_insert(TransportError::NotRunning("closed".into()));
    }
}
