//! The exporter's sender thread: pushes taken from a bounded backlog and POSTed one at a
//! time, retried on 5xx, 429 and connection failures with exponential backoff (remote write
//! 1.0: never on other 4xx). The sink only queues (a short lock on the coordinator, never on a
//! worker); a full backlog drops its oldest push, whose numbers the next push carries anyway
//! (every counter is cumulative), and counts it.

use crate::watch::http_get;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Remote write 1.0's request headers (besides Host, User-Agent and Content-Length).
const HEADERS: &str = "Content-Encoding: snappy\r\nContent-Type: application/x-protobuf\r\n\
                       X-Prometheus-Remote-Write-Version: 0.1.0\r\n";

/// The first retry's wait; each next one doubles, up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How the sender pushes.
#[derive(Clone, Debug)]
pub(super) struct SenderSettings {
    pub url: String,
    /// Each attempt's bound (connect, send, answer).
    pub timeout: Duration,
    /// Pushes held at most; past it the oldest is dropped.
    pub backlog: usize,
    /// Attempts after the first, per push.
    pub retries: u32,
}

/// What came of the pushes, as summary.json's `export.prometheus_remote_write` says it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PushCounts {
    /// Pushes made (one a second, and the final one).
    pub pushes: u64,
    /// Pushes the receiver took (2xx).
    pub sent: u64,
    /// Attempts made again after a 5xx, a 429, a connection failure or no answer in time.
    pub retries: u64,
    /// Pushes dropped, oldest first, because the backlog was full.
    pub dropped: u64,
    /// Pushes given up: refused with another 4xx, or still failing after every retry.
    pub failed: u64,
    /// Pushes still held (or being sent) when the run ended and waited no longer.
    pub unsent_at_end: u64,
    /// The most pushes held at once.
    pub backlog_max: u64,
    /// The last failure, e.g. "HTTP 500" or "connection refused".
    pub last_error: Option<String>,
}

struct State {
    queue: VecDeque<Vec<u8>>,
    /// A push taken from the queue and not yet done with.
    busy: bool,
    /// No more pushes come.
    closed: bool,
    /// Stop at once, even mid-retry (the run waited long enough).
    abandon: bool,
    counts: PushCounts,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// The sink's handle on the sender thread.
pub(super) struct Sender {
    shared: Arc<Shared>,
    backlog: usize,
    thread: Option<JoinHandle<()>>,
}

impl Sender {
    pub(super) fn start(settings: SenderSettings) -> std::io::Result<Sender> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::with_capacity(settings.backlog),
                busy: false,
                closed: false,
                abandon: false,
                counts: PushCounts::default(),
            }),
            changed: Condvar::new(),
        });
        let backlog = settings.backlog.max(1);
        let thread = std::thread::Builder::new()
            .name("mcpload-remote-write".into())
            .spawn({
                let shared = shared.clone();
                move || run(&shared, &settings)
            })?;
        Ok(Sender {
            shared,
            backlog,
            thread: Some(thread),
        })
    }

    /// Queues a push (a snappy-compressed `WriteRequest`); never waits for the network.
    pub(super) fn push(&self, body: Vec<u8>) {
        let mut s = lock(&self.shared);
        s.counts.pushes += 1;
        if s.queue.len() >= self.backlog {
            s.queue.pop_front();
            s.counts.dropped += 1;
        }
        s.queue.push_back(body);
        let held = s.queue.len() as u64 + u64::from(s.busy);
        s.counts.backlog_max = s.counts.backlog_max.max(held);
        drop(s);
        self.shared.changed.notify_all();
    }

    /// No more pushes: waits up to `wait` for the backlog to be sent, then stops the thread
    /// (what is left is counted `unsent_at_end`) and returns what came of every push.
    pub(super) fn finish(mut self, wait: Duration) -> PushCounts {
        let deadline = Instant::now() + wait;
        let mut s = lock(&self.shared);
        s.closed = true;
        self.shared.changed.notify_all();
        while (!s.queue.is_empty() || s.busy) && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            s = self
                .shared
                .changed
                .wait_timeout(s, left)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        s.abandon = true;
        s.counts.unsent_at_end = s.queue.len() as u64 + u64::from(s.busy);
        let counts = s.counts.clone();
        drop(s);
        self.shared.changed.notify_all();
        // A thread stuck in an attempt ends at that attempt's timeout; the run does not
        // wait for it.
        if let Some(t) = self.thread.take()
            && t.is_finished()
        {
            let _ = t.join();
        }
        counts
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The thread: takes the oldest push, sends it (with its retries), until closed and empty
/// or abandoned.
fn run(shared: &Shared, settings: &SenderSettings) {
    loop {
        let body = {
            let mut s = lock(shared);
            loop {
                if s.abandon {
                    return;
                }
                if let Some(b) = s.queue.pop_front() {
                    s.busy = true;
                    break b;
                }
                if s.closed {
                    return;
                }
                s = shared.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        let outcome = send(shared, settings, &body);
        let mut s = lock(shared);
        s.busy = false;
        match outcome {
            Ok(()) => s.counts.sent += 1,
            Err(why) => {
                s.counts.failed += 1;
                s.counts.last_error = Some(why);
            }
        }
        drop(s);
        shared.changed.notify_all();
    }
}

/// One push with its retries: Ok once taken, or the last reason it was not.
fn send(shared: &Shared, settings: &SenderSettings, body: &[u8]) -> Result<(), String> {
    let mut backoff = BACKOFF_FIRST;
    let mut attempt = 0;
    loop {
        let why = match http_get::exchange(&settings.url, "POST", HEADERS, body, settings.timeout) {
            Ok((code, _)) if (200..300).contains(&code) => return Ok(()),
            Ok((code, _)) if code == 429 || code >= 500 => format!("HTTP {code}"),
            Ok((code, answer)) => {
                let text = String::from_utf8_lossy(&answer[..answer.len().min(200)]);
                return Err(format!("HTTP {code}: {}", text.trim()));
            }
            Err(e) => e,
        };
        let mut s = lock(shared);
        s.counts.last_error = Some(why.clone());
        if attempt >= settings.retries || s.abandon {
            return Err(why);
        }
        attempt += 1;
        s.counts.retries += 1;
        // The backoff waits on the condition, so an abandoning run wakes it.
        let until = Instant::now() + backoff;
        while !s.abandon && Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            s = shared
                .changed
                .wait_timeout(s, left)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        if s.abandon {
            return Err(why);
        }
        drop(s);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusing_receiver_is_retried_and_a_full_backlog_drops_the_oldest() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let sender = Sender::start(SenderSettings {
            url: format!("http://127.0.0.1:{port}/api/v1/write"),
            timeout: Duration::from_secs(1),
            backlog: 2,
            retries: 1,
        })
        .unwrap();
        for i in 0..5u8 {
            sender.push(vec![i]);
        }
        let c = sender.finish(Duration::from_secs(5));
        assert_eq!(c.pushes, 5);
        assert_eq!(c.sent, 0);
        assert!(c.dropped >= 1, "{c:?}");
        assert!(c.backlog_max <= 3, "{c:?}");
        assert_eq!(c.sent + c.failed + c.dropped + c.unsent_at_end, 5, "{c:?}");
        assert_eq!(c.retries, c.failed, "one retry per failed push: {c:?}");
        assert_eq!(c.last_error.as_deref(), Some("connection refused"));
    }
}
