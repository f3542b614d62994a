//! The name of every histogram a step's [`Stats`] holds, so that each can be written to an
//! interval log under a tag (docs/results.md, histograms.hlog) and added back into its place:
//! `latency`, `op=I/latency`, `scenario=I/part=J/polls`, `flows/time_to_task`, …

use super::{LatencyHistogram, RunCounts, Stats};
use hdrhistogram::Histogram;

impl LatencyHistogram {
    /// Adds a histogram read back from a log; fails when its values do not fit 1 µs ..= 1 h.
    pub fn add_read(
        &mut self,
        h: &Histogram<u64>,
    ) -> Result<(), hdrhistogram::errors::AdditionError> {
        self.0.add(h)
    }
}

/// One histogram of a [`Stats`], as [`Stats::histogram_mut`] finds it again.
pub enum Slot<'a> {
    Latency(&'a mut LatencyHistogram),
    Counts(&'a mut Histogram<u64>),
}

impl Slot<'_> {
    /// Adds `h` (read back from a log) into the slot.
    pub fn add(&mut self, h: &Histogram<u64>) -> Result<(), hdrhistogram::errors::AdditionError> {
        match self {
            Slot::Latency(l) => l.add_read(h),
            Slot::Counts(c) => c.add(h),
        }
    }
}

fn run_counts<'a>(prefix: &str, r: &'a RunCounts, out: &mut Vec<(String, &'a Histogram<u64>)>) {
    out.push((format!("{prefix}latency"), r.latency.histogram()));
    out.push((format!("{prefix}polls"), &r.polls));
}

impl Stats {
    /// Every non-empty histogram with its name: no comma or whitespace in it, operations and
    /// scenarios by number (their names are in summary.json and counts.jsonl).
    pub fn histograms(&self) -> Vec<(String, &Histogram<u64>)> {
        let mut out: Vec<(String, &Histogram<u64>)> = vec![
            ("latency".into(), self.latency.histogram()),
            ("service_latency".into(), self.service_latency.histogram()),
            ("batch_size".into(), &self.batch_size),
            ("first_progress".into(), self.first_progress.histogram()),
            ("progress_per_call".into(), &self.progress_per_call),
            ("token_fetch".into(), self.token_fetch.histogram()),
            ("spawn".into(), self.spawn.histogram()),
            ("connect".into(), self.connect.histogram()),
        ];
        for (i, op) in self.ops.iter().enumerate() {
            out.push((format!("op={i}/latency"), op.latency.histogram()));
            out.push((
                format!("op={i}/service_latency"),
                op.service_latency.histogram(),
            ));
        }
        for (i, sc) in self.scenarios.iter().enumerate() {
            run_counts(&format!("scenario={i}/"), &sc.iterations, &mut out);
            for (j, part) in sc.parts.iter().enumerate() {
                run_counts(&format!("scenario={i}/part={j}/"), part, &mut out);
            }
        }
        if let Some(f) = &self.flows {
            out.push(("flows/time_to_task".into(), f.time_to_task.histogram()));
            out.push((
                "flows/time_to_terminal".into(),
                f.time_to_terminal.histogram(),
            ));
            out.push(("flows/polls_per_task".into(), &f.polls_per_task));
            out.push(("flows/rounds_per_call".into(), &f.rounds_per_call));
        }
        out.retain(|(_, h)| !h.is_empty());
        out
    }

    /// The histogram [`Stats::histograms`] names `name`, made on first use (an operation,
    /// a scenario, its part, the flows); `None` for a name it never gives.
    pub fn histogram_mut(&mut self, name: &str) -> Option<Slot<'_>> {
        fn index(part: Option<&str>, key: &str) -> Option<usize> {
            part?.strip_prefix(key)?.strip_prefix('=')?.parse().ok()
        }
        fn of_run<'a>(r: &'a mut RunCounts, leaf: &str) -> Option<Slot<'a>> {
            match leaf {
                "latency" => Some(Slot::Latency(&mut r.latency)),
                "polls" => Some(Slot::Counts(&mut r.polls)),
                _ => None,
            }
        }
        let parts: Vec<&str> = name.split('/').collect();
        match parts.as_slice() {
            ["latency"] => Some(Slot::Latency(&mut self.latency)),
            ["service_latency"] => Some(Slot::Latency(&mut self.service_latency)),
            ["batch_size"] => Some(Slot::Counts(&mut self.batch_size)),
            ["first_progress"] => Some(Slot::Latency(&mut self.first_progress)),
            ["progress_per_call"] => Some(Slot::Counts(&mut self.progress_per_call)),
            ["token_fetch"] => Some(Slot::Latency(&mut self.token_fetch)),
            ["spawn"] => Some(Slot::Latency(&mut self.spawn)),
            ["connect"] => Some(Slot::Latency(&mut self.connect)),
            [op, leaf] if op.starts_with("op=") => {
                let i = u16::try_from(index(Some(op), "op")?).ok()?;
                let o = self.op_mut(i);
                match *leaf {
                    "latency" => Some(Slot::Latency(&mut o.latency)),
                    "service_latency" => Some(Slot::Latency(&mut o.service_latency)),
                    _ => None,
                }
            }
            [sc, leaf] if sc.starts_with("scenario=") => {
                let i = index(Some(sc), "scenario")?;
                of_run(&mut self.scenario_mut(i).iterations, leaf)
            }
            [sc, part, leaf] if sc.starts_with("scenario=") => {
                let i = index(Some(sc), "scenario")?;
                let j = index(Some(part), "part")?;
                of_run(self.scenario_mut(i).part_mut(j), leaf)
            }
            ["flows", leaf] => {
                let f = self.flows_mut();
                match *leaf {
                    "time_to_task" => Some(Slot::Latency(&mut f.time_to_task)),
                    "time_to_terminal" => Some(Slot::Latency(&mut f.time_to_terminal)),
                    "polls_per_task" => Some(Slot::Counts(&mut f.polls_per_task)),
                    "rounds_per_call" => Some(Slot::Counts(&mut f.rounds_per_call)),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_name_finds_its_histogram_again() {
        let mut s = Stats::default();
        let ms = Duration::from_millis;
        s.latency.record(ms(3));
        s.service_latency.record(ms(2));
        let _ = s.batch_size.record(4);
        s.first_progress.record(ms(1));
        let _ = s.progress_per_call.record(7);
        s.token_fetch.record(ms(9));
        s.op_mut(2).latency.record(ms(5));
        s.op_mut(2).service_latency.record(ms(4));
        s.scenario_mut(1).iterations.completed(ms(8));
        s.scenario_mut(1).iterations.polled(3);
        s.scenario_mut(1).part_mut(2).completed(ms(6));
        s.scenario_mut(1).part_mut(2).polled(2);
        let f = s.flows_mut();
        f.time_to_task.record(ms(1));
        f.time_to_terminal.record(ms(2));
        let _ = f.polls_per_task.record(3);
        let _ = f.rounds_per_call.record(1);
        let named = s.histograms();
        assert_eq!(
            named.len(),
            16,
            "{:?}",
            named.iter().map(|n| &n.0).collect::<Vec<_>>()
        );
        let mut back = Stats::default();
        for (name, h) in &named {
            assert!(!name.contains([',', ' ']), "{name}");
            back.histogram_mut(name).unwrap().add(h).unwrap();
        }
        let again = back.histograms();
        assert_eq!(named.len(), again.len());
        for ((n1, h1), (n2, h2)) in named.iter().zip(&again) {
            assert_eq!((n1, h1.len(), h1.max()), (n2, h2.len(), h2.max()));
        }
        assert!(back.histogram_mut("op=x/latency").is_none());
        assert!(back.histogram_mut("lag").is_none());
    }
}
