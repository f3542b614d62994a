//! The capacity model: admission of POSTs (`capacity + queue` at most, the rest refused),
//! service slots (a semaphore of `capacity`), drawn service times and their drift
//! (`drift_ms_per_minute`), and stall windows in which no work proceeds. With capacity C and
//! mean service time S the ceiling is C/S.

use super::config::{ServeConfig, ServiceTime, Stall};
use super::faults::draw_rng;
use super::stats::Stats;
use rand::RngExt;
use rand_distr::{Distribution, Exp};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

const SERVICE_SALT: u64 = 0x7365_7276_6963_6521;

pub(crate) struct Capacity {
    /// `None`: no capacity model, every request is served at once.
    slots: Option<Semaphore>,
    admit_max: u32,
    admitted: AtomicU32,
    service: ServiceTime,
    /// Milliseconds added to every service time per minute since `started`.
    drift_ms_per_minute: f64,
    started: Instant,
    seed: u64,
    stalls: Vec<(Instant, Instant)>,
}

/// What `drift_ms_per_minute` adds to a service time `elapsed` after the target started.
fn drift(drift_ms_per_minute: f64, elapsed: Duration) -> Duration {
    // Validated to at most an hour a minute: a `Duration` holds any drift of centuries.
    Duration::from_secs_f64(drift_ms_per_minute * elapsed.as_secs_f64() / 60.0 / 1000.0)
}

/// A POST admitted past the queue limit check; dropping it frees its place.
pub(crate) struct Admission {
    capacity: Arc<Capacity>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.capacity.admitted.fetch_sub(1, Relaxed);
    }
}

impl Capacity {
    pub(super) fn new(cfg: &ServeConfig, started: Instant) -> Capacity {
        let limited = cfg.capacity > 0;
        Capacity {
            slots: limited.then(|| Semaphore::new(cfg.capacity as usize)),
            admit_max: cfg.capacity.saturating_add(cfg.queue),
            admitted: AtomicU32::new(0),
            service: cfg.service_ms,
            drift_ms_per_minute: cfg.drift_ms_per_minute,
            started,
            seed: cfg.seed,
            stalls: cfg
                .stall
                .iter()
                .map(|Stall { at, duration }| (started + *at, started + *at + *duration))
                .collect(),
        }
    }

    /// Admits one more POST, or `None` when `capacity + queue` are already taken.
    /// Without a capacity model every POST is admitted.
    pub(super) fn try_admit(self: &Arc<Self>) -> Option<Admission> {
        if self.slots.is_some() {
            let before = self.admitted.fetch_add(1, Relaxed);
            if before >= self.admit_max {
                self.admitted.fetch_sub(1, Relaxed);
                return None;
            }
        } else {
            self.admitted.fetch_add(1, Relaxed);
        }
        Some(Admission {
            capacity: Arc::clone(self),
        })
    }

    /// The service time of request `ordinal`: the same for the same seed and ordinal.
    fn service_time(&self, ordinal: u64) -> Duration {
        let ms = match self.service {
            ServiceTime::Fixed(ms) => ms,
            ServiceTime::Uniform(lo, hi) if hi > lo => {
                draw_rng(self.seed ^ SERVICE_SALT, ordinal).random_range(lo..hi)
            }
            ServiceTime::Uniform(lo, _) => lo,
            ServiceTime::Exp(mean) if mean > 0.0 => Exp::new(1.0 / mean).map_or(mean, |d| {
                d.sample(&mut draw_rng(self.seed ^ SERVICE_SALT, ordinal))
            }),
            ServiceTime::Exp(_) => 0.0,
        };
        Duration::from_secs_f64(ms / 1000.0)
    }

    /// Waits while `now` lies in a stall window.
    async fn stall_wait(&self) {
        loop {
            let now = Instant::now();
            match self.stalls.iter().find(|(s, e)| *s <= now && now < *e) {
                Some((_, end)) => tokio::time::sleep_until(*end).await,
                None => return,
            }
        }
    }

    /// Runs `work` for request `ordinal` inside the model: takes a service slot, waits out
    /// any stall, spends the service time (drawn, plus the drift by then), works, and waits out a stall again before the
    /// answer may leave.
    pub(super) async fn serve<F: Future>(&self, stats: &Stats, ordinal: u64, work: F) -> F::Output {
        if self.slots.is_none()
            && self.service.is_zero()
            && self.drift_ms_per_minute == 0.0
            && self.stalls.is_empty()
        {
            let _serving = stats.serving();
            return work.await;
        }
        let _slot = match &self.slots {
            // The semaphore is never closed.
            Some(s) => s.acquire().await.ok(),
            None => None,
        };
        let _serving = stats.serving();
        self.stall_wait().await;
        let service = self.service_time(ordinal)
            + drift(self.drift_ms_per_minute, Instant::now() - self.started);
        if !service.is_zero() {
            tokio::time::sleep(service).await;
        }
        let out = work.await;
        self.stall_wait().await;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(capacity: u32, queue: u32, service: &str) -> ServeConfig {
        ServeConfig {
            capacity,
            queue,
            service_ms: service.parse().unwrap(),
            ..ServeConfig::default()
        }
    }

    #[test]
    fn admission_stops_at_capacity_plus_queue() {
        let c = Arc::new(Capacity::new(&cfg(2, 1, "0"), Instant::now()));
        let held: Vec<_> = (0..3).map(|_| c.try_admit().unwrap()).collect();
        assert!(c.try_admit().is_none());
        drop(held);
        assert!(c.try_admit().is_some());
        let free = Arc::new(Capacity::new(&ServeConfig::default(), Instant::now()));
        let many: Vec<_> = (0..10_000).filter_map(|_| free.try_admit()).collect();
        assert_eq!(many.len(), 10_000);
    }

    #[test]
    fn service_draws_are_seeded_and_in_range() {
        let c = Capacity::new(&cfg(1, 0, "uniform:10..30"), Instant::now());
        for n in 0..1000 {
            let t = c.service_time(n);
            assert!(t >= Duration::from_millis(10) && t < Duration::from_millis(30));
            assert_eq!(t, c.service_time(n));
        }
        let e = Capacity::new(&cfg(1, 0, "exp:20"), Instant::now());
        let mean = (0..20_000)
            .map(|n| e.service_time(n).as_secs_f64())
            .sum::<f64>()
            / 20_000.0;
        assert!((0.018..0.022).contains(&mean), "{mean}");
    }

    #[test]
    fn drift_grows_with_the_minutes_elapsed() {
        let ms =
            |per_minute: f64, elapsed: Duration| drift(per_minute, elapsed).as_secs_f64() * 1e3;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert_eq!(drift(0.0, Duration::from_secs(3600)), Duration::ZERO);
        assert_eq!(drift(5.0, Duration::ZERO), Duration::ZERO);
        assert!(close(ms(5.0, Duration::from_secs(60)), 5.0));
        assert!(close(ms(5.0, Duration::from_secs(90)), 7.5));
        assert!(close(ms(2.5, Duration::from_secs(3600)), 150.0));
        assert!(close(ms(60_000.0, Duration::from_millis(250)), 250.0));
        // A week at the largest drift allowed.
        let week = Duration::from_secs(7 * 24 * 3600);
        assert!(close(
            ms(3_600_000.0, week),
            3_600_000.0 * 7.0 * 24.0 * 60.0
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn drift_adds_to_the_drawn_service_time() {
        // Paused time is exact, but a drift of 0.06 s has no exact binary form and the timer
        // rounds its deadline to a whole millisecond: hence the one-millisecond windows.
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let stats = Stats::default();
        let mut c = cfg(0, 0, "fixed:10");
        c.drift_ms_per_minute = 120.0;
        let start = Instant::now();
        let cap = Capacity::new(&c, start);
        // At 30 s after the start: 10 ms drawn + 60 ms of drift.
        tokio::time::sleep(Duration::from_secs(30)).await;
        cap.serve(&stats, 1, async {}).await;
        let took = ms(Instant::now() - start) - 30_000.0;
        assert!((69.0..=71.0).contains(&took), "{took}");
        // Drift alone (no service time, no capacity model) is spent too.
        let alone = ServeConfig {
            drift_ms_per_minute: 60.0,
            ..ServeConfig::default()
        };
        let cap = Capacity::new(&alone, Instant::now());
        tokio::time::sleep(Duration::from_secs(60)).await;
        let before = Instant::now();
        cap.serve(&stats, 2, async {}).await;
        let took = ms(Instant::now() - before);
        assert!((59.0..=61.0).contains(&took), "{took}");
    }

    #[tokio::test(start_paused = true)]
    async fn slots_bound_concurrency_and_stalls_freeze_work() {
        let stats = Arc::new(Stats::default());
        let mut c = cfg(2, 0, "fixed:100");
        c.stall = vec!["1s:2s".parse().unwrap()];
        let start = Instant::now();
        let cap = Arc::new(Capacity::new(&c, start));
        // Six requests through two slots of 100 ms: three rounds.
        let mut set = tokio::task::JoinSet::new();
        for i in 0..6 {
            let (cap, stats) = (Arc::clone(&cap), Arc::clone(&stats));
            set.spawn(async move {
                cap.serve(&stats, i, async {}).await;
                Instant::now() - start
            });
        }
        let ends = set.join_all().await;
        assert_eq!(ends.iter().max(), Some(&Duration::from_millis(300)));
        assert_eq!(stats.snapshot().serving_max, 2);
        // A request arriving inside the stall (1 s .. 3 s) starts only when it ends.
        tokio::time::sleep_until(start + Duration::from_millis(1500)).await;
        cap.serve(&stats, 99, async {}).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(3100));
    }
}
