//! What breaks only under concurrency, on purpose and counted: a keyed counter
//! (`counter_add`, `counter_read`) that is atomic by default, a read-modify-write with a
//! pause between its read and its write with `racy` (every update it overwrites counted),
//! and eventually consistent with `read_lag_ms` (a read sees writes only that much later;
//! every stale read counted); and a lazy initialisation that the first `tools/call` starts
//! (`lazy_init_ms`) and that deadlocks when `first_call_deadlock` calls wait on it at once
//! (every call that hangs counted). Their counters are the ground truth of `probe --races`.

use super::config::ServeConfig;
use super::stats::RaceCounts;
use crate::jsonrpc::ErrorObject;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Counters held at most; a `counter_add` of a new key past it is refused.
pub(crate) const COUNTERS_MAX: usize = 100_000;
/// Longest counter key, in bytes.
pub(crate) const KEY_MAX: usize = 256;
/// Largest `by` of one `counter_add`.
pub(crate) const BY_MAX: u64 = 1_000_000;
/// The key of `counter_add` and `counter_read` when the call names none.
pub(crate) const DEFAULT_KEY: &str = "default";
/// `counter_add` of a new key found [`COUNTERS_MAX`] counters held.
pub(crate) const COUNTERS_FULL: i64 = -32013;

/// The counters and the lazy initialisation of one target.
pub(crate) struct Races {
    racy: bool,
    window: Duration,
    lag: Duration,
    inner: Mutex<Inner>,
    init: Option<LazyInit>,
}

struct Inner {
    counters: HashMap<String, Counter>,
    adds: u64,
    reads: u64,
    stale_reads: u64,
    /// Summed over racy writes: how much of the value each write discarded (what was
    /// added between its read and its write).
    overwritten: i64,
}

/// One counter.
#[derive(Default)]
struct Counter {
    value: i64,
    /// With `read_lag_ms`: the writes readers do not see yet, oldest first (when each was
    /// made, and the value it left).
    recent: VecDeque<(Instant, i64)>,
    /// What readers see.
    visible: i64,
}

impl Counter {
    fn write(&mut self, value: i64, lag: Duration, now: Instant) {
        self.value = value;
        if lag.is_zero() {
            self.visible = value;
        } else {
            self.recent.push_back((now, value));
        }
    }

    /// What a read at `now` sees: the last write made at least `lag` ago.
    fn read(&mut self, lag: Duration, now: Instant) -> i64 {
        while let Some(&(at, value)) = self.recent.front() {
            if now.duration_since(at) < lag {
                break;
            }
            self.visible = value;
            self.recent.pop_front();
        }
        self.visible
    }
}

impl Races {
    pub(crate) fn new(cfg: &ServeConfig) -> Races {
        Races {
            racy: cfg.racy,
            window: Duration::from_millis(cfg.race_window_ms),
            lag: Duration::from_millis(cfg.read_lag_ms),
            inner: Mutex::new(Inner {
                counters: HashMap::new(),
                adds: 0,
                reads: 0,
                stale_reads: 0,
                overwritten: 0,
            }),
            init: (cfg.lazy_init_ms > 0).then(|| LazyInit::new(cfg)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `counter_add`: adds `by` to counter `key` and answers the value it left. Racy, it
    /// reads, pauses `race_window_ms` (yields when 0), then writes what it read plus `by`.
    pub(crate) async fn add(&self, key: String, by: u64) -> Result<Value, ErrorObject> {
        let by = i64::try_from(by).unwrap_or(i64::MAX);
        let value = if self.racy {
            let read = {
                let mut inner = self.lock();
                inner.counter(&key)?.value
            };
            if self.window.is_zero() {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(self.window).await;
            }
            let mut inner = self.lock();
            let counter = inner.counter(&key)?;
            let discarded = counter.value - read;
            counter.write(read + by, self.lag, Instant::now());
            inner.overwritten += discarded;
            inner.adds += 1;
            read + by
        } else {
            let mut inner = self.lock();
            let counter = inner.counter(&key)?;
            let value = counter.value + by;
            counter.write(value, self.lag, Instant::now());
            inner.adds += 1;
            value
        };
        Ok(json!({"key": key, "value": value}))
    }

    /// `counter_read`: the value of counter `key` as readers see it (0 for a key never
    /// added to).
    pub(crate) fn read(&self, key: String) -> Value {
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.reads += 1;
        let value = match inner.counters.get_mut(&key) {
            Some(c) => {
                let seen = c.read(self.lag, Instant::now());
                if seen != c.value {
                    inner.stale_reads += 1;
                }
                seen
            }
            None => 0,
        };
        json!({"key": key, "value": value})
    }

    /// Before a `tools/call` runs: nothing, or the lazy initialisation (waited for, started,
    /// or deadlocked in).
    pub(crate) async fn before_tool_call(&self) {
        if let Some(init) = &self.init {
            init.enter().await;
        }
    }

    /// The counters now.
    pub(crate) fn counts(&self) -> RaceCounts {
        let inner = self.lock();
        let (waited, hung) = self
            .init
            .as_ref()
            .map_or((0, 0), |i| (i.waited.load(Relaxed), i.hung.load(Relaxed)));
        RaceCounts {
            counter_adds: inner.adds,
            counter_reads: inner.reads,
            overwritten: u64::try_from(inner.overwritten).unwrap_or(0),
            stale_reads: inner.stale_reads,
            counters: inner.counters.len() as u64,
            lazy_init_waited: waited,
            first_call_hung: hung,
        }
    }
}

impl Inner {
    /// Counter `key`, created at 0 unless [`COUNTERS_MAX`] are held.
    fn counter(&mut self, key: &str) -> Result<&mut Counter, ErrorObject> {
        if !self.counters.contains_key(key) {
            if self.counters.len() >= COUNTERS_MAX {
                return Err(ErrorObject {
                    code: COUNTERS_FULL,
                    message: format!("{COUNTERS_MAX} counters are held: no room for {key:?}"),
                    data: None,
                });
            }
            self.counters.insert(key.to_owned(), Counter::default());
        }
        Ok(self.counters.get_mut(key).expect("inserted above"))
    }
}

/// Where the lazy initialisation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    NotStarted,
    /// Started by a call; `waiting` calls (that one included) are inside it.
    Running {
        waiting: u32,
    },
    Done,
    /// `first_call_deadlock` calls were inside at once: it never ends.
    Deadlocked,
}

/// The work the first `tools/call` after start does before any call can be served.
struct LazyInit {
    duration: Duration,
    /// Calls inside at once that deadlock it (0: never).
    deadlock_at: u32,
    phase: Mutex<Phase>,
    /// Quick check of [`Phase::Done`].
    done: AtomicBool,
    finished: watch::Sender<bool>,
    /// Calls answered after waiting for it (the one that ran it included).
    waited: AtomicU64,
    /// Calls that will never be answered: inside it when it deadlocked, or arrived after.
    hung: AtomicU64,
}

impl LazyInit {
    fn new(cfg: &ServeConfig) -> LazyInit {
        LazyInit {
            duration: Duration::from_millis(cfg.lazy_init_ms),
            deadlock_at: cfg.first_call_deadlock,
            phase: Mutex::new(Phase::NotStarted),
            done: AtomicBool::new(false),
            finished: watch::Sender::new(false),
            waited: AtomicU64::new(0),
            hung: AtomicU64::new(0),
        }
    }

    async fn enter(&self) {
        if self.done.load(Relaxed) {
            return;
        }
        let mut finished = self.finished.subscribe();
        match self.arrive() {
            Arrival::Done => return,
            Arrival::Hangs => return std::future::pending().await,
            Arrival::Starts => {
                tokio::time::sleep(self.duration).await;
                if !self.finish() {
                    return std::future::pending().await;
                }
            }
            Arrival::Waits => {
                if finished.wait_for(|done| *done).await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
        self.waited.fetch_add(1, Relaxed);
    }

    /// A call arrives: what it does, the phase moved on and hung calls counted.
    fn arrive(&self) -> Arrival {
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        match *phase {
            Phase::Done => Arrival::Done,
            Phase::Deadlocked => {
                self.hung.fetch_add(1, Relaxed);
                Arrival::Hangs
            }
            Phase::NotStarted => {
                *phase = Phase::Running { waiting: 1 };
                Arrival::Starts
            }
            Phase::Running { waiting } => {
                let waiting = waiting + 1;
                if self.deadlock_at > 0 && waiting >= self.deadlock_at {
                    *phase = Phase::Deadlocked;
                    self.hung.fetch_add(u64::from(waiting), Relaxed);
                    Arrival::Hangs
                } else {
                    *phase = Phase::Running { waiting };
                    Arrival::Waits
                }
            }
        }
    }

    /// The initialisation's work is over: done, and the waiting calls released; false when
    /// it deadlocked meanwhile.
    fn finish(&self) -> bool {
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        if *phase == Phase::Deadlocked {
            return false;
        }
        *phase = Phase::Done;
        self.done.store(true, Relaxed);
        self.finished.send_replace(true);
        true
    }
}

/// What a call arriving at the lazy initialisation does.
enum Arrival {
    Done,
    Starts,
    Waits,
    Hangs,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn races(cfg: ServeConfig) -> std::sync::Arc<Races> {
        std::sync::Arc::new(Races::new(&cfg))
    }

    fn value(v: &Value) -> i64 {
        v["value"].as_i64().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn racy_adds_overwrite_and_count_what_they_discarded() {
        let r = races(ServeConfig {
            racy: true,
            race_window_ms: 10,
            ..ServeConfig::default()
        });
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let r = std::sync::Arc::clone(&r);
            all.spawn(async move { r.add("k".into(), 1).await.unwrap() });
        }
        let answers = all.join_all().await;
        // All eight read 0 before any wrote: each wrote 1.
        assert!(answers.iter().all(|a| value(a) == 1), "{answers:?}");
        assert_eq!(value(&r.read("k".into())), 1);
        let c = r.counts();
        assert_eq!((c.counter_adds, c.overwritten, c.counters), (8, 7, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn atomic_adds_lose_nothing() {
        let r = races(ServeConfig::default());
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let r = std::sync::Arc::clone(&r);
            all.spawn(async move { r.add("k".into(), 2).await.unwrap() });
        }
        let mut seen: Vec<i64> = all.join_all().await.iter().map(value).collect();
        seen.sort_unstable();
        assert_eq!(seen, (1..=8).map(|i| 2 * i).collect::<Vec<_>>());
        assert_eq!(r.counts().overwritten, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn lagging_reads_are_stale_until_the_lag_passes() {
        let r = races(ServeConfig {
            read_lag_ms: 100,
            ..ServeConfig::default()
        });
        assert_eq!(value(&r.read("k".into())), 0);
        r.add("k".into(), 5).await.unwrap();
        assert_eq!(value(&r.read("k".into())), 0);
        tokio::time::advance(Duration::from_millis(60)).await;
        r.add("k".into(), 5).await.unwrap();
        tokio::time::advance(Duration::from_millis(50)).await;
        assert_eq!(value(&r.read("k".into())), 5);
        tokio::time::advance(Duration::from_millis(60)).await;
        assert_eq!(value(&r.read("k".into())), 10);
        let c = r.counts();
        assert_eq!((c.counter_reads, c.stale_reads), (4, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn lazy_init_is_waited_for_and_deadlocks_at_k_waiting() {
        let slow = races(ServeConfig {
            lazy_init_ms: 100,
            ..ServeConfig::default()
        });
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..5 {
            let r = std::sync::Arc::clone(&slow);
            all.spawn(async move { r.before_tool_call().await });
        }
        all.join_all().await;
        slow.before_tool_call().await;
        assert_eq!(slow.counts().lazy_init_waited, 5);

        let stuck = races(ServeConfig {
            lazy_init_ms: 100,
            first_call_deadlock: 3,
            ..ServeConfig::default()
        });
        let mut all = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let r = std::sync::Arc::clone(&stuck);
            all.spawn(async move { r.before_tool_call().await });
        }
        tokio::time::advance(Duration::from_secs(3600)).await;
        tokio::task::yield_now().await;
        assert_eq!(all.len(), 4);
        assert!(all.try_join_next().is_none(), "none of them ever ends");
        let c = stuck.counts();
        assert_eq!((c.first_call_hung, c.lazy_init_waited), (4, 0));
        all.abort_all();
    }

    #[tokio::test]
    async fn a_full_store_refuses_new_keys_only() {
        let r = races(ServeConfig::default());
        {
            let mut inner = r.lock();
            for i in 0..COUNTERS_MAX {
                inner.counters.insert(format!("k{i}"), Counter::default());
            }
        }
        assert_eq!(
            r.add("new".into(), 1).await.unwrap_err().code,
            COUNTERS_FULL
        );
        assert_eq!(value(&r.add("k7".into(), 1).await.unwrap()), 1);
    }
}
