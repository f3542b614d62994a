//! The generator's own health in a step (docs/metrics.md, "The generator's own health"):
//! what mcpload saw of itself (its CPU and run-queue wait, how late its sends and its event
//! loop ran, arrivals it had no room for), and the judgement whether the generator, not the
//! server, limited the step (`generator_bound`, with its reason).

use super::LatencyHistogram;
use serde::{Deserialize, Serialize};

/// The least lateness that limits a step: 1 ms, or a tenth of the step's p50 if larger.
const LATE_FLOOR_US: u64 = 1_000;
/// CPU demand (time run plus time waiting for a core), in percent of the cores mcpload may
/// use, at which the generator is the bottleneck.
const DEMAND_BOUND_PCT: f64 = 90.0;
/// CPU demand past which a generator that waited for a core at least as long as it ran was
/// starved: it wanted most of its cores and got at most half of what it wanted.
const STARVED_DEMAND_PCT: f64 = 75.0;
/// The fewest late sends (or late wakes) that limit a step: in a short step one slow wake
/// is the p99 of a hundred sends, and no bottleneck.
const MIN_LATE: u64 = 10;

/// What the generator measured of itself over a step's measured time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorFacts {
    /// Open loop: sends that left later than [`late_allowance_us`] after their schedule.
    pub late_sends: Option<u64>,
    /// Open loop: arrivals dropped because the worker had no free slot for a unit (a limit
    /// of the generator's, not `max_in_flight`).
    pub dropped_no_worker: Option<u64>,
    /// p99 of how late the worker loops' own timer wakes ran (ms).
    pub loop_delay_p99_ms: Option<f64>,
    /// The process's CPU time (user + system; the built-in target's threads left out) over
    /// the wall time, in percent of the cores it may use.
    pub cpu_pct: Option<f64>,
    /// Its threads' time waiting for a core on a run queue, on the same scale.
    pub wait_pct: Option<f64>,
    /// The cores the process may use (its affinity and quota).
    pub cores: Option<u32>,
    /// The busiest load thread's time run plus time waiting for a core, in percent of the
    /// wall time: a worker runs on one core at most, however many the process may use.
    pub load_thread_pct: Option<f64>,
    /// The generator, not the server, limited the step.
    pub bound: bool,
    /// Why, in one sentence (reasons joined with "; ").
    pub bound_reason: Option<String>,
}

impl GeneratorFacts {
    /// Adds a segment's (or worker's) facts of the same step: counts add up, the worst
    /// figures stay, and the step is generator-bound where any part was.
    pub fn merge(&mut self, o: &GeneratorFacts) {
        fn add(a: &mut Option<u64>, b: Option<u64>) {
            *a = match (*a, b) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            };
        }
        fn worst(a: &mut Option<f64>, b: Option<f64>) {
            *a = match (*a, b) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => x.or(y),
            };
        }
        add(&mut self.late_sends, o.late_sends);
        add(&mut self.dropped_no_worker, o.dropped_no_worker);
        worst(&mut self.loop_delay_p99_ms, o.loop_delay_p99_ms);
        worst(&mut self.cpu_pct, o.cpu_pct);
        worst(&mut self.wait_pct, o.wait_pct);
        worst(&mut self.load_thread_pct, o.load_thread_pct);
        self.cores = self.cores.or(o.cores);
        if !self.bound && o.bound {
            self.bound_reason.clone_from(&o.bound_reason);
        }
        self.bound |= o.bound;
    }
}

/// The lateness (µs) past which a send or a wake limited a step whose median latency is
/// `p50_us`: 1 ms, or a tenth of the median if that is larger.
pub fn late_allowance_us(p50_us: Option<u64>) -> u64 {
    p50_us.map_or(LATE_FLOOR_US, |p| (p / 10).max(LATE_FLOOR_US))
}

/// What a step's judgement reads.
pub struct Observed<'a> {
    /// Open loop: each send's lateness against its schedule.
    pub lag: Option<&'a LatencyHistogram>,
    /// The loops' wakes' lateness.
    pub loop_delay: &'a LatencyHistogram,
    /// The step's median latency (µs), if anything was answered.
    pub p50_us: Option<u64>,
    /// Open loop: arrivals dropped for want of a free slot.
    pub dropped_no_worker: Option<u64>,
    /// CPU and run-queue wait in percent of `cores`, when the platform tells them.
    pub cpu_pct: Option<f64>,
    pub wait_pct: Option<f64>,
    pub cores: Option<u32>,
    /// The busiest load thread's demand in percent of the wall time.
    pub load_thread_pct: Option<f64>,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// How many of `h`'s values lie past `allowed`.
fn late(h: &LatencyHistogram, allowed: u64) -> u64 {
    let h = h.histogram();
    if h.max() > allowed {
        h.count_between(allowed + 1, h.max())
    } else {
        0
    }
}

fn p99(h: &LatencyHistogram) -> Option<u64> {
    (!h.is_empty()).then(|| h.histogram().value_at_quantile(0.99))
}

/// Judges a step: its facts, and whether (and why) the generator limited it.
pub fn judge(o: &Observed<'_>) -> GeneratorFacts {
    let allowed = late_allowance_us(o.p50_us);
    let mut reasons = Vec::new();
    if let (Some(cpu), Some(wait), Some(cores)) = (o.cpu_pct, o.wait_pct, o.cores) {
        let of = if cores == 1 { "core" } else { "cores" };
        let demand = cpu + wait;
        let cost = format!("(ran {cpu:.0}%, waited for a core {wait:.0}%)");
        if demand >= DEMAND_BOUND_PCT {
            reasons.push(format!(
                "mcpload wanted {demand:.0}% of its {cores} {of} {cost}"
            ));
        } else if demand >= STARVED_DEMAND_PCT && wait >= cpu {
            reasons.push(format!(
                "mcpload was starved: it wanted {demand:.0}% of its {cores} {of} and waited for \
                 a core as long as it ran {cost}"
            ));
        }
    }
    // Said only where the process's own demand did not already bind (the reasons so far).
    if let Some(busy) = o
        .load_thread_pct
        .filter(|b| *b >= DEMAND_BOUND_PCT && reasons.is_empty())
    {
        reasons.push(format!(
            "a load worker's thread wanted {busy:.0}% of its core (ran, or waited for it): a \
             worker runs on one core, whatever the others do"
        ));
    }
    let late_sends = o.lag.map(|h| late(h, allowed));
    let lag_p99 = o.lag.and_then(p99);
    if let Some(lag) = lag_p99.filter(|l| *l > allowed && late_sends >= Some(MIN_LATE)) {
        reasons.push(format!(
            "sends left late: schedule lag p99 {:.3} ms, over the {:.3} ms allowed",
            ms(lag),
            ms(allowed)
        ));
    }
    let loop_p99 = p99(o.loop_delay);
    let late_wakes = late(o.loop_delay, allowed);
    if let Some(delay) = loop_p99.filter(|d| *d > allowed && late_wakes >= MIN_LATE) {
        reasons.push(format!(
            "the event loop woke late: loop delay p99 {:.3} ms, over the {:.3} ms allowed",
            ms(delay),
            ms(allowed)
        ));
    }
    if let Some(n) = o.dropped_no_worker.filter(|n| *n > 0) {
        reasons.push(format!("{n} arrivals dropped for want of a free slot"));
    }
    GeneratorFacts {
        late_sends,
        dropped_no_worker: o.dropped_no_worker,
        loop_delay_p99_ms: loop_p99.map(ms),
        cpu_pct: o.cpu_pct.map(round1),
        wait_pct: o.wait_pct.map(round1),
        cores: o.cores,
        load_thread_pct: o.load_thread_pct.map(round1),
        bound: !reasons.is_empty(),
        bound_reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// What a user can do about any generator-bound step.
const REMEDIES: [&str; 3] = [
    "lower the rate",
    "give mcpload more cores",
    "split the load with --segment",
];

/// What an open loop that sends each arrival at its own instant (no `--send-window`) can do
/// too: it pays a wake-up per arrival, and sending a millisecond's arrivals in one wake-up
/// costs a quarter to under half of its CPU per request at 5,000 to 20,000/s (0.26 to 0.43 in
/// benches/README.md's rounds), at the price of a load in bunches.
const WINDOW_REMEDY: &str = "send each millisecond's arrivals in one wake-up with \
     --send-window 1ms (under half the CPU per request; the server gets them in bunches)";

/// The hint under generator-bound steps: the remedies, the window's last for an open loop of
/// exact instants.
pub fn bound_hint(exact_open_loop: bool) -> String {
    let mut remedies = REMEDIES.to_vec();
    if exact_open_loop {
        remedies.push(WINDOW_REMEDY);
    }
    let (last, first) = remedies.split_last().expect("there are remedies");
    format!("{}, or {last}", first.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn hist(us: &[u64]) -> LatencyHistogram {
        let mut h = LatencyHistogram::default();
        for u in us {
            h.record(Duration::from_micros(*u));
        }
        h
    }

    fn observed<'a>(
        lag: Option<&'a LatencyHistogram>,
        delay: &'a LatencyHistogram,
    ) -> Observed<'a> {
        Observed {
            lag,
            loop_delay: delay,
            p50_us: Some(20_000),
            dropped_no_worker: lag.map(|_| 0),
            cpu_pct: Some(10.0),
            wait_pct: Some(1.0),
            cores: Some(2),
            load_thread_pct: Some(8.0),
        }
    }

    #[test]
    fn the_hint_lists_the_remedies_and_offers_the_window_to_exact_open_loops_only() {
        assert_eq!(
            bound_hint(false),
            "lower the rate, give mcpload more cores, or split the load with --segment"
        );
        let open = bound_hint(true);
        assert!(
            open.starts_with(
                "lower the rate, give mcpload more cores, split the load with --segment, or \
                 send each millisecond's arrivals in one wake-up with --send-window 1ms ("
            ),
            "{open}"
        );
    }

    #[test]
    fn a_step_on_time_with_cores_to_spare_is_not_bound() {
        let lag = hist(&[50; 100]);
        let delay = hist(&[100; 100]);
        let f = judge(&observed(Some(&lag), &delay));
        assert!(!f.bound, "{f:?}");
        assert_eq!(f.late_sends, Some(0));
        assert_eq!(f.bound_reason, None);
    }

    #[test]
    fn the_allowance_is_a_tenth_of_the_median_and_at_least_a_millisecond() {
        assert_eq!(late_allowance_us(None), 1_000);
        assert_eq!(late_allowance_us(Some(2_000)), 1_000);
        assert_eq!(late_allowance_us(Some(20_000)), 2_000);
    }

    #[test]
    fn late_sends_past_the_allowance_bind_the_step_and_are_counted() {
        // p50 20 ms: 2 ms allowed; 20 of 1,000 sends 3 ms late, so p99 is past it.
        let mut lags = vec![100; 980];
        lags.extend([3_000; 20]);
        let lag = hist(&lags);
        let f = judge(&observed(Some(&lag), &hist(&[10])));
        assert!(f.bound);
        assert_eq!(f.late_sends, Some(20));
        let why = f.bound_reason.unwrap();
        assert!(
            why.starts_with("sends left late: schedule lag p99 3.0"),
            "{why}"
        );
    }

    #[test]
    fn a_few_late_sends_in_a_short_step_are_counted_but_bind_nothing() {
        // 80 sends, one of them late: it is the p99, and no bottleneck.
        let mut lags = vec![100; 79];
        lags.push(10_000);
        let lag = hist(&lags);
        let f = judge(&observed(Some(&lag), &hist(&[10])));
        assert_eq!(f.late_sends, Some(1));
        assert!(!f.bound, "{f:?}");
    }

    #[test]
    fn demand_near_the_cores_binds_even_a_closed_loop() {
        let delay = hist(&[10]);
        let mut o = observed(None, &delay);
        (o.cpu_pct, o.wait_pct, o.cores) = (Some(48.0), Some(47.0), Some(1));
        let f = judge(&o);
        assert!(f.bound);
        assert_eq!(f.late_sends, None);
        assert_eq!(
            f.bound_reason.as_deref(),
            Some("mcpload wanted 95% of its 1 core (ran 48%, waited for a core 47%)")
        );
    }

    /// One worker on two cores: the process wants half of them, its worker's thread all of
    /// its one. Said once where the process's demand already binds.
    #[test]
    fn a_load_thread_that_wants_its_whole_core_binds_whatever_the_process_wants() {
        let delay = hist(&[10]);
        let mut o = observed(None, &delay);
        (o.cpu_pct, o.wait_pct, o.load_thread_pct) = (Some(49.0), Some(2.0), Some(97.4));
        let f = judge(&o);
        assert!(f.bound);
        assert_eq!(f.load_thread_pct, Some(97.4));
        assert_eq!(
            f.bound_reason.as_deref(),
            Some(
                "a load worker's thread wanted 97% of its core (ran, or waited for it): a \
                 worker runs on one core, whatever the others do"
            )
        );
        o.load_thread_pct = Some(85.0);
        assert!(!judge(&o).bound, "a thread with time to spare");
        (o.cpu_pct, o.wait_pct, o.load_thread_pct) = (Some(60.0), Some(35.0), Some(99.0));
        let why = judge(&o).bound_reason.unwrap();
        assert!(
            why.starts_with("mcpload wanted 95% of its 2 cores"),
            "{why}"
        );
        assert!(!why.contains("load worker"), "{why}");
    }

    #[test]
    fn a_generator_that_waits_as_long_as_it_runs_for_most_of_its_cores_is_starved() {
        let delay = hist(&[10]);
        let mut o = observed(None, &delay);
        (o.cpu_pct, o.wait_pct, o.cores) = (Some(16.3), Some(71.6), Some(1));
        let why = judge(&o).bound_reason.unwrap();
        assert!(
            why.starts_with("mcpload was starved: it wanted 88% of its 1 core"),
            "{why}"
        );
        // As much demand, but mostly run: a busy generator with a core to itself.
        (o.cpu_pct, o.wait_pct) = (Some(70.0), Some(10.0));
        assert!(!judge(&o).bound);
        // Waiting more than running, but wanting little: a neighbour's load, no bottleneck.
        (o.cpu_pct, o.wait_pct) = (Some(4.5), Some(15.6));
        assert!(!judge(&o).bound);
    }

    #[test]
    fn a_late_loop_and_dropped_arrivals_each_bind_with_their_reason() {
        let lag = hist(&[10]);
        let delay = hist(&[5_000; 10]);
        let mut o = observed(Some(&lag), &delay);
        o.dropped_no_worker = Some(3);
        let why = judge(&o).bound_reason.unwrap();
        assert!(
            why.contains("the event loop woke late: loop delay p99 5.0"),
            "{why}"
        );
        assert!(
            why.ends_with("3 arrivals dropped for want of a free slot"),
            "{why}"
        );
    }

    #[test]
    fn a_merged_step_is_bound_where_any_part_was() {
        let mut a = GeneratorFacts {
            late_sends: Some(1),
            cpu_pct: Some(20.0),
            ..GeneratorFacts::default()
        };
        let b = GeneratorFacts {
            late_sends: Some(2),
            cpu_pct: Some(95.0),
            bound: true,
            bound_reason: Some("why".into()),
            ..GeneratorFacts::default()
        };
        a.merge(&b);
        assert!(a.bound);
        assert_eq!(a.late_sends, Some(3));
        assert_eq!(a.cpu_pct, Some(95.0));
        assert_eq!(a.bound_reason.as_deref(), Some("why"));
    }
}
