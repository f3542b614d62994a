//! The capacity model: admission of POSTs (`capacity + queue` at most, the rest refused),
//! service slots (a semaphore of `capacity`), drawn service times, and stall windows in
//! which no work proceeds. With capacity C and mean service time S the ceiling is C/S.

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
    seed: u64,
    stalls: Vec<(Instant, Instant)>,
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
    /// any stall, spends the service time, works, and waits out a stall again before the
    /// answer may leave.
    pub(super) async fn serve<F: Future>(&self, stats: &Stats, ordinal: u64, work: F) -> F::Output {
        if self.slots.is_none() && self.service.is_zero() && self.stalls.is_empty() {
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
        let service = self.service_time(ordinal);
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
