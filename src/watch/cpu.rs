//! CPU percent from what a source can read: a cumulative CPU time turned into a rate over
//! the wall time between readings, and, for a set of processes or threads that come and go,
//! a cumulative time built from each member's own increase.

use std::time::Instant;

#[cfg(target_os = "linux")]
use rustc_hash::FxHashMap;

/// Percent of one core over the interval since the previous reading of a cumulative CPU time.
#[derive(Default)]
pub(super) struct CpuRate {
    last: Option<(Instant, f64)>,
}

impl CpuRate {
    /// `cpu_s` is the CPU seconds used up to `at`. None at the first reading, after
    /// `forget`, and when the total went back (a restarted server's counter): that interval
    /// has no honest figure, and the next one counts from the new total.
    pub(super) fn percent(&mut self, at: Instant, cpu_s: f64) -> Option<f64> {
        let last = self.last.replace((at, cpu_s));
        let (then, cpu_then) = last?;
        let wall = at.checked_duration_since(then)?.as_secs_f64();
        if wall <= 0.0 || cpu_s < cpu_then || !cpu_s.is_finite() {
            return None;
        }
        Some(100.0 * (cpu_s - cpu_then) / wall)
    }

    /// Drops the previous reading: after a failed read the next rate starts afresh.
    pub(super) fn forget(&mut self) {
        self.last = None;
    }
}

/// A member of a process tree or a thread set: its id and start time (clock ticks since
/// boot), so that a reused id is a new member.
#[cfg(target_os = "linux")]
pub(super) type MemberId = (i32, u64);

/// The CPU time of a changing set of members, as a total that only grows: each reading adds
/// every live member's increase since the previous one (a member new since then adds all it
/// has run, having been born in the interval). A member that ended between readings drops
/// out: its run since the previous reading is lost, but the total never goes back, so the
/// rate is never negative.
#[cfg(target_os = "linux")]
#[derive(Default)]
pub(super) struct MemberCpu {
    ticks: FxHashMap<MemberId, u64>,
    total_ticks: u64,
}

#[cfg(target_os = "linux")]
impl MemberCpu {
    /// Takes the members' cumulative times (user + system, in clock ticks) now and returns
    /// the total in ticks.
    pub(super) fn advance(&mut self, members: impl IntoIterator<Item = (MemberId, u64)>) -> u64 {
        let mut now = FxHashMap::default();
        for (id, ticks) in members {
            let before = self.ticks.get(&id).copied().unwrap_or(0);
            self.total_ticks += ticks.saturating_sub(before);
            now.insert(id, ticks);
        }
        self.ticks = now;
        self.total_ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cumulative_time_becomes_percent_of_one_core_and_a_reset_gives_none() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut rate = CpuRate::default();
        assert_eq!(rate.percent(at(0), 10.0), None, "no interval yet");
        assert_eq!(
            rate.percent(at(500), 11.0),
            Some(200.0),
            "1 s of CPU in 0.5 s"
        );
        assert_eq!(rate.percent(at(1500), 2.0), None, "the counter went back");
        assert_eq!(rate.percent(at(2500), 2.25), Some(25.0));
        rate.forget();
        assert_eq!(rate.percent(at(3500), 3.0), None, "forgotten");
        assert_eq!(rate.percent(at(3500), 3.0), None, "no wall time passed");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_member_that_ends_drops_out_and_a_new_one_counts_whole() {
        let mut cpu = MemberCpu::default();
        assert_eq!(cpu.advance([((1, 0), 100), ((2, 0), 50)]), 150);
        // Member 2 ended (its 50 ticks stay in the total), member 3 was born with 7 ticks,
        // member 1 ran 10 more.
        assert_eq!(cpu.advance([((1, 0), 110), ((3, 0), 7)]), 167);
        // Id 3 reused by a process started later: a new member, counted from zero.
        assert_eq!(cpu.advance([((1, 0), 110), ((3, 9), 2)]), 169);
        assert_eq!(cpu.advance([]), 169, "all gone: the total stays");
    }
}
