//! Open-loop pacing: when each arrival is due, at a constant or Poisson spacing. Pure
//! arithmetic on instants, so tests need no clock.

use super::template::Rng;
use crate::profile::Spacing;
use std::time::{Duration, Instant};

/// Which arrivals of a step's whole schedule one sender takes: `offset`, `offset + stride`,
/// `offset + 2 × stride`, … (0-based). Senders with the same stride and every offset below
/// it share the schedule exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    pub offset: u64,
    pub stride: u64,
}

impl Lane {
    /// The whole schedule.
    pub const WHOLE: Lane = Lane {
        offset: 0,
        stride: 1,
    };
}

/// The arrival times of one sender's lane of an open-loop step.
#[derive(Debug)]
pub struct Arrivals {
    start: Instant,
    /// The whole schedule's rate.
    total_rate: f64,
    /// This lane's rate: the whole's over the stride.
    rate: f64,
    spacing: Spacing,
    lane: Lane,
    /// Arrivals issued so far (constant spacing computes from it, so errors never add up).
    count: u64,
    /// Seconds since `start` of the next arrival (Poisson spacing adds exponential gaps).
    next_s: f64,
    rng: Rng,
}

impl Arrivals {
    /// The `lane` of a schedule of `total_rate` arrivals per second from `start`. Constant
    /// spacing: arrival `k` of the whole is due at `k / total_rate` exactly, so lanes
    /// interleave and together are the whole schedule. Poisson spacing: the lane's own
    /// exponential gaps at `total_rate / stride`.
    pub fn new(start: Instant, total_rate: f64, spacing: Spacing, lane: Lane, seed: u64) -> Self {
        let mut a = Arrivals {
            start,
            total_rate,
            rate: total_rate / lane.stride as f64,
            spacing,
            lane,
            count: 0,
            next_s: 0.0,
            rng: Rng::new(seed),
        };
        a.next_s = match spacing {
            Spacing::Constant => a.constant_at(0),
            Spacing::Poisson => a.gap(),
        };
        a
    }

    /// Constant spacing: seconds from the start to the lane's arrival `n`.
    fn constant_at(&self, n: u64) -> f64 {
        (self.lane.offset + n * self.lane.stride) as f64 / self.total_rate
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
            Spacing::Constant => self.constant_at(self.count),
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
        // The second of two lanes of 2000/s: every other arrival, from the second.
        let lane = Lane {
            offset: 1,
            stride: 2,
        };
        let mut a = Arrivals::new(t0, 2000.0, Spacing::Constant, lane, 1);
        assert_eq!(a.next_due() - t0, Duration::from_micros(500));
        a.advance();
        assert_eq!(a.next_due() - t0, Duration::from_micros(1500));
        let mut b = Arrivals::new(t0, 3.0, Spacing::Constant, Lane::WHOLE, 1);
        assert_eq!(count_within(&mut b, t0, 100), 300);
    }

    #[test]
    fn poisson_spacing_has_the_rate_on_average() {
        let t0 = Instant::now();
        let lane = Lane {
            offset: 0,
            stride: 2,
        };
        let mut a = Arrivals::new(t0, 1000.0, Spacing::Poisson, lane, 42);
        let n = count_within(&mut a, t0, 100);
        // 50 000 expected, standard deviation about 224.
        assert!((48_500..51_500).contains(&n), "{n}");
    }
}
