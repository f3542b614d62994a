//! Execution segments and the common clock: which share of every step one of several
//! instances runs (virtual users, arrival lanes, counts that bound the whole), and the
//! schedule of step slots that lines the steps of every instance up on the wall clock.

use crate::load::schedule::Lane;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant, SystemTime};

/// Segment `index` (1-based) of `count`: one instance of a run split over `count`
/// instances, each running its share of every step. `1/1` is the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub index: u32,
    pub count: u32,
}

impl Default for Segment {
    fn default() -> Self {
        Segment::WHOLE
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Part `i` (0-based) of `n` of `total` whole units: `total / n`, one more for the first
/// `total % n` parts, so the `n` parts add up to `total` exactly.
pub(crate) fn part(total: u64, i: u64, n: u64) -> u64 {
    total / n + u64::from(i < total % n)
}

impl Segment {
    /// The whole run.
    pub const WHOLE: Segment = Segment { index: 1, count: 1 };

    /// Segment `index` of `count`, when `1 <= index <= count`.
    pub fn new(index: u32, count: u32) -> Option<Segment> {
        (1..=count)
            .contains(&index)
            .then_some(Segment { index, count })
    }

    /// More than one segment: this instance runs a share.
    pub fn is_split(&self) -> bool {
        self.count > 1
    }

    /// This segment's share of `total` whole units (virtual users, `max_in_flight`).
    pub fn share(&self, total: u64) -> u64 {
        part(total, u64::from(self.index - 1), u64::from(self.count))
    }

    /// This segment's share of an open-loop rate.
    pub fn rate(&self, total: f64) -> f64 {
        total / f64::from(self.count)
    }

    /// The arrivals of a step's whole schedule that worker `worker` of `workers` sends: the
    /// segments interleave innermost (arrival `k` belongs to segment `k mod count`), the
    /// workers of a segment take turns among its arrivals. The lanes of every worker of every
    /// segment cover the schedule exactly once, however many workers each segment has.
    pub fn lane(&self, worker: u32, workers: u32) -> Lane {
        let n = u64::from(self.count);
        Lane {
            offset: u64::from(worker) * n + u64::from(self.index - 1),
            stride: u64::from(workers) * n,
        }
    }

    /// The seed of this segment's draws: the run's for segment 1, mixed with the index for
    /// the others, so segments do not repeat one another's mix draws and values.
    pub fn seed(&self, seed: u64) -> u64 {
        seed.wrapping_add(u64::from(self.index - 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// A request's run-wide sequence number from this segment's own: segment `I` of `N`
    /// numbers its requests `I-1, I-1+N, I-1+2N, …`, unique over the segments.
    pub fn seq(&self, local: u64) -> u64 {
        local * u64::from(self.count) + u64::from(self.index - 1)
    }
}

/// Slack added to each bounded wait of a slot: the workers look at the clock every few
/// milliseconds, and the coordinator hands each step to the run folder between steps.
pub(crate) const SLOT_MARGIN: Duration = Duration::from_millis(200);

/// The common clock of a run started with `--start-at`: every step gets a slot of the same
/// length, computed from the schedule alone, and step `k` (1-based) starts its warm-up at
/// `start_at + (k-1) × slot` whatever happened before it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock {
    pub start_at: SystemTime,
    /// From a slot's start to its measured time's start: the warm-up, then (with a warm-up)
    /// the bound on its drain and the 0.2 s margin.
    pub measure_offset: Duration,
    /// The whole slot: `measure_offset`, the measured time, the bound on the step's drain and
    /// the 0.2 s margin.
    pub slot: Duration,
}

/// What bounds a slot's parts.
#[derive(Clone, Copy, Debug)]
pub struct SlotShape {
    pub warmup: Duration,
    pub duration: Duration,
    /// The most a warm-up's drain can take: a request's timeout (its iterations stop at once).
    pub warmup_drain: Duration,
    /// The most a step's drain can take: the timeout, after the graceful stop when units are
    /// iterations or calls that may go on past the measured time.
    pub drain: Duration,
}

impl Clock {
    pub fn new(start_at: SystemTime, shape: SlotShape) -> Clock {
        let measure_offset = if shape.warmup.is_zero() {
            Duration::ZERO
        } else {
            shape.warmup + shape.warmup_drain + SLOT_MARGIN
        };
        Clock {
            start_at,
            measure_offset,
            slot: measure_offset + shape.duration + shape.drain + SLOT_MARGIN,
        }
    }

    /// The slot of step `index` (0-based) starts this long after `start_at`.
    pub fn slot_offset(&self, index: usize) -> Duration {
        self.slot * index as u32
    }

    /// `start_at` on this process's monotonic clock, read against the system clock now.
    pub fn origin(&self) -> Instant {
        let (now, wall) = (Instant::now(), SystemTime::now());
        match self.start_at.duration_since(wall) {
            Ok(ahead) => now + ahead,
            Err(e) => now.checked_sub(e.duration()).unwrap_or(now),
        }
    }

    /// How far `start_at` lies in the past (zero when it is ahead).
    pub fn late_by(&self, wall: SystemTime) -> Duration {
        wall.duration_since(self.start_at).unwrap_or(Duration::ZERO)
    }
}

/// Instants of this process read as wall-clock Unix milliseconds, against one reading of
/// both clocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WallClock {
    instant: Instant,
    unix_ms: f64,
}

impl WallClock {
    /// Reads both clocks now.
    pub(crate) fn now() -> WallClock {
        let (instant, wall) = (Instant::now(), SystemTime::now());
        let unix_ms = wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        WallClock { instant, unix_ms }
    }

    /// `at` as Unix milliseconds.
    pub(crate) fn unix_ms(&self, at: Instant) -> f64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => self.unix_ms + after.as_secs_f64() * 1000.0,
            None => self.unix_ms - self.instant.duration_since(at).as_secs_f64() * 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::schedule::Arrivals;
    use crate::profile::Spacing;
    use std::collections::BTreeSet;

    #[test]
    fn shares_add_up_exactly() {
        for count in 1..=9u32 {
            for total in 0..=40u64 {
                let shares: Vec<u64> = (1..=count)
                    .map(|i| Segment::new(i, count).unwrap().share(total))
                    .collect();
                assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {count}");
                let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                assert!(hi - lo <= 1, "{total} over {count}: {shares:?}");
            }
        }
        let four: Vec<u64> = (1..=4)
            .map(|i| Segment::new(i, 4).unwrap().share(6))
            .collect();
        assert_eq!(four, [2, 2, 1, 1]);
        let one: Vec<u64> = (1..=4)
            .map(|i| Segment::new(i, 4).unwrap().share(1))
            .collect();
        assert_eq!(one, [1, 0, 0, 0]);
    }

    #[test]
    fn bad_segments_are_refused() {
        assert_eq!(Segment::new(0, 4), None);
        assert_eq!(Segment::new(5, 4), None);
        assert_eq!(Segment::new(1, 0), None);
        assert!(!Segment::new(1, 1).unwrap().is_split());
    }

    /// The first arrivals of every worker of every segment, as offsets from the start.
    fn first_arrivals(rate: f64, workers: &[u32], per_lane: usize) -> Vec<Duration> {
        let t0 = Instant::now();
        let count = workers.len() as u32;
        let mut all = Vec::new();
        for (i, &w) in workers.iter().enumerate() {
            let seg = Segment::new(i as u32 + 1, count).unwrap();
            for worker in 0..w {
                let lane = seg.lane(worker, w);
                let mut a = Arrivals::new(t0, rate, Spacing::Constant, lane, 7);
                all.extend((0..per_lane).map(|_| a.advance() - t0));
            }
        }
        all.sort();
        all
    }

    #[test]
    fn interleaved_lanes_are_the_whole_schedule_exactly() {
        // Four segments with different numbers of workers (machines differ), 1000/s.
        let rate = 1000.0;
        let got = first_arrivals(rate, &[2, 3, 1, 2], 60);
        // Every lane of a segment with w workers sends every (4w)th arrival: the union of
        // the first 60 of each covers the schedule's first 4 × 60 arrivals at least.
        let want: Vec<Duration> = (0..240u64)
            .map(|k| Duration::from_secs_f64(k as f64 / rate))
            .collect();
        assert_eq!(&got[..240], &want[..]);
        let distinct: BTreeSet<Duration> = got.iter().copied().collect();
        assert_eq!(distinct.len(), got.len(), "no arrival is sent twice");
        // One segment of one worker is the plain schedule.
        let whole = first_arrivals(rate, &[1], 5);
        assert_eq!(whole, want[..5]);
    }

    #[test]
    fn slots_come_from_the_schedule_alone() {
        let shape = SlotShape {
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(10),
            warmup_drain: Duration::from_secs(2),
            drain: Duration::from_secs(3),
        };
        let c = Clock::new(SystemTime::UNIX_EPOCH, shape);
        assert_eq!(c.measure_offset, Duration::from_secs(3) + SLOT_MARGIN);
        assert_eq!(c.slot, Duration::from_secs(16) + 2 * SLOT_MARGIN);
        assert_eq!(c.slot_offset(3), 3 * c.slot);
        let no_warmup = Clock::new(
            SystemTime::UNIX_EPOCH,
            SlotShape {
                warmup: Duration::ZERO,
                ..shape
            },
        );
        assert_eq!(no_warmup.measure_offset, Duration::ZERO);
        assert_eq!(no_warmup.slot, Duration::from_secs(13) + SLOT_MARGIN);
    }

    #[test]
    fn sequence_numbers_and_seeds_differ_between_segments() {
        let segs: Vec<Segment> = (1..=3).map(|i| Segment::new(i, 3).unwrap()).collect();
        let seqs: BTreeSet<u64> = segs
            .iter()
            .flat_map(|s| (0..10).map(|l| s.seq(l)))
            .collect();
        assert_eq!(seqs, (0..30).collect());
        assert_eq!(Segment::WHOLE.seq(5), 5);
        assert_eq!(Segment::WHOLE.seed(42), 42);
        assert_ne!(segs[1].seed(42), segs[2].seed(42));
    }
}
