//! Open-loop pacing: when each arrival is due, at a constant or Poisson spacing. Pure
//! arithmetic on instants, so tests need no clock.

use super::template::Rng;
use crate::profile::Spacing;
use std::time::{Duration, Instant};

/// The arrival times of one worker's share of an open-loop step.
#[derive(Debug)]
pub struct Arrivals {
    start: Instant,
    rate: f64,
    spacing: Spacing,
    /// Arrivals issued so far (constant spacing computes from it, so errors never add up).
    count: u64,
    /// Seconds since `start` of the next arrival (Poisson spacing adds exponential gaps).
    next_s: f64,
    rng: Rng,
}

impl Arrivals {
    /// `rate` arrivals per second from `start`. A worker's share of a step's rate is offset by
    /// `phase` (0..1 of one gap) so that workers do not all fire at the same instant.
    pub fn new(start: Instant, rate: f64, spacing: Spacing, phase: f64, seed: u64) -> Self {
        let mut a = Arrivals {
            start,
            rate,
            spacing,
            count: 0,
            next_s: 0.0,
            rng: Rng::new(seed),
        };
        a.next_s = match spacing {
            Spacing::Constant => phase / rate,
            Spacing::Poisson => a.gap(),
        };
        a
    }

    fn gap(&mut self) -> f64 {
        // Exponential with mean 1/rate; 1 - U is in (0, 1], so ln never sees 0.
        -(1.0 - self.rng.unit()).ln() / self.rate
    }

    /// When the next arrival is due.
    pub fn next_due(&self) -> Instant {
        self.start + Duration::from_secs_f64(self.next_s)
    }

    /// Takes the next arrival's due time and moves on.
    pub fn advance(&mut self) -> Instant {
        let due = self.next_due();
        self.count += 1;
        self.next_s = match self.spacing {
            Spacing::Constant => {
                let phase = self.next_s - (self.count - 1) as f64 / self.rate;
                self.count as f64 / self.rate + phase
            }
            Spacing::Poisson => self.next_s + self.gap(),
        };
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_within(a: &mut Arrivals, start: Instant, secs: u64) -> usize {
        let end = start + Duration::from_secs(secs);
        let mut n = 0;
        while a.next_due() < end {
            a.advance();
            n += 1;
        }
        n
    }

    #[test]
    fn constant_spacing_is_exact_and_does_not_drift() {
        let t0 = Instant::now();
        let mut a = Arrivals::new(t0, 1000.0, Spacing::Constant, 0.5, 1);
        assert_eq!(a.next_due() - t0, Duration::from_micros(500));
        a.advance();
        assert_eq!(a.next_due() - t0, Duration::from_micros(1500));
        let mut b = Arrivals::new(t0, 3.0, Spacing::Constant, 0.0, 1);
        assert_eq!(count_within(&mut b, t0, 100), 300);
    }

    #[test]
    fn poisson_spacing_has_the_rate_on_average() {
        let t0 = Instant::now();
        let mut a = Arrivals::new(t0, 500.0, Spacing::Poisson, 0.0, 42);
        let n = count_within(&mut a, t0, 100);
        // 50 000 expected, standard deviation about 224.
        assert!((48_500..51_500).contains(&n), "{n}");
    }
}
