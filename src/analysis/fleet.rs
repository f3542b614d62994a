//! A process per session (docs/metrics.md, "stdio children"): the largest fleet that stayed
//! healthy, the memory it took, and what ran out first past it: memory (the fleet's budget),
//! start-up (children past the timeout, or not starting), CPU, or the server's latency.

use crate::metrics::{StepSummary, Verdict};
use serde::{Deserialize, Serialize};

/// CPU use, in percent of all cores, from which a fleet counts as out of CPU.
const CPU_OUT_PCT_OF_CORES: f64 = 90.0;

/// summary.json `fleet`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetVerdict {
    /// Children (one per virtual user) of the largest step that stayed healthy: not failed,
    /// and no request of it ended for a child (none refused for the budget, none that did
    /// not start). `null` when no step did.
    pub largest_healthy: Option<u64>,
    pub largest_healthy_step: Option<u32>,
    /// The most the children held in that step (the sampler's fleet RSS), and per child.
    pub rss_bytes: Option<u64>,
    pub rss_per_child_bytes: Option<u64>,
    /// What ran out first: `cpu` at the first step that saturated with the children using
    /// 90% of the cores or more; else, at the first step that was not healthy, `memory`,
    /// `startup`, `cpu` or `latency` (the server slowed or failed with none of those
    /// short); `null` when neither happened.
    pub ran_out: Option<String>,
    pub ran_out_step: Option<u32>,
    /// One sentence, as the terminal says it.
    pub reason: String,
}

/// Judges a sweep of a process per session. `timeout_ms`: the requests' timeout, which a
/// start-up must stay within; `cores`: the machine's.
pub fn judge(steps: &[StepSummary], timeout_ms: f64, cores: u32) -> FleetVerdict {
    let healthy = |s: &StepSummary| s.verdict != Verdict::Failed && s.transport_error.is_none();
    let first_bad = steps.iter().position(|s| !healthy(s));
    let good = &steps[..first_bad.unwrap_or(steps.len())];
    let best = good.iter().max_by_key(|s| s.concurrency.unwrap_or(0));
    let rss_bytes = best.and_then(|s| s.server_rss_max_bytes);
    let children = best.and_then(|s| s.concurrency);
    let bad = first_bad.map(|i| &steps[i]);
    // A healthy step can still have run out of CPU: saturated, every core busy.
    let cpu_bound = good
        .iter()
        .find(|s| s.verdict == Verdict::Saturated && cpu_out(s, cores));
    let first = cpu_bound
        .map(|s| (s, "cpu".to_owned()))
        .or_else(|| bad.map(|s| (s, what_ran_out(s, timeout_ms, cores))));
    let size = |bytes: u64| format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20));
    let held = match (rss_bytes, children) {
        (Some(b), Some(n)) if n > 0 => format!(" holding {} ({} each)", size(b), size(b / n)),
        _ => String::new(),
    };
    let out_at = |s: &StepSummary, what: &str| {
        format!(
            "{what} ran out at {} children (step {}): {}",
            s.concurrency.unwrap_or(0),
            s.step,
            evidence(s, what, timeout_ms, cores)
        )
    };
    let mut reason = match children {
        Some(n) if bad.is_some() => format!("the largest healthy fleet was {n} children{held}"),
        Some(n) => format!("every step stayed healthy, up to {n} children{held}"),
        None if bad.is_some() => "no step stayed healthy".into(),
        None => "no step ran".into(),
    };
    if let Some((s, what)) = &first {
        reason.push_str(&format!("; {} first", out_at(s, what)));
    }
    if let (Some(b), Some((s, _))) = (bad, &first)
        && b.step != s.step
    {
        let what = what_ran_out(b, timeout_ms, cores);
        reason.push_str(&format!(", then {}", out_at(b, &what)));
    }
    FleetVerdict {
        largest_healthy: children,
        largest_healthy_step: best.map(|s| s.step),
        rss_bytes,
        rss_per_child_bytes: rss_bytes
            .zip(children.filter(|n| *n > 0))
            .map(|(b, n)| b / n),
        ran_out_step: first.as_ref().map(|(s, _)| s.step),
        ran_out: first.map(|(_, what)| what),
        reason,
    }
}

/// The children used 90% of the cores or more.
fn cpu_out(s: &StepSummary, cores: u32) -> bool {
    s.server_cpu_max_pct
        .is_some_and(|c| c >= CPU_OUT_PCT_OF_CORES * f64::from(cores.max(1)))
}

fn what_ran_out(s: &StepSummary, timeout_ms: f64, cores: u32) -> String {
    let said = s.transport_error.as_deref().unwrap_or("");
    if said.contains("memory budget") {
        "memory"
    } else if said.contains("did not start") || s.connect_p99_ms.is_some_and(|c| c > timeout_ms) {
        "startup"
    } else if cpu_out(s, cores) {
        "cpu"
    } else {
        "latency"
    }
    .into()
}

fn evidence(s: &StepSummary, what: &str, timeout_ms: f64, cores: u32) -> String {
    match what {
        "memory" | "startup" if s.transport_error.is_some() => {
            s.transport_error.clone().unwrap_or_default()
        }
        "startup" => format!(
            "connect p99 {:.0} ms, past the {timeout_ms:.0} ms timeout",
            s.connect_p99_ms.unwrap_or(0.0)
        ),
        "cpu" => format!(
            "{} with the children at {:.0}% CPU of {cores} cores",
            s.verdict.as_str(),
            s.server_cpu_max_pct.unwrap_or(0.0)
        ),
        _ => format!("the step was {}", s.verdict.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(n: u32, users: u64, verdict: Verdict) -> StepSummary {
        let mut s = crate::analysis::blank_step();
        s.step = n;
        s.concurrency = Some(users);
        s.verdict = verdict;
        s.server_rss_max_bytes = Some(users * (40 << 20));
        s
    }

    #[test]
    fn the_budget_names_memory_and_the_step_before_is_the_largest_healthy() {
        let mut out = step(3, 64, Verdict::Failed);
        out.transport_error = Some(
            "child process is not running: the child of user 40 was not started: the fleet \
             memory budget (2048 MiB) is reached"
                .into(),
        );
        let v = judge(
            &[
                step(1, 16, Verdict::Ok),
                step(2, 32, Verdict::Saturated),
                out,
            ],
            30_000.0,
            2,
        );
        assert_eq!(v.largest_healthy, Some(32));
        assert_eq!(v.rss_per_child_bytes, Some(40 << 20));
        assert_eq!(v.ran_out.as_deref(), Some("memory"));
        assert_eq!(v.ran_out_step, Some(3));
        assert!(
            v.reason.contains("memory ran out at 64 children"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn cpu_startup_and_latency_are_told_apart() {
        let mut cpu = step(2, 8, Verdict::Failed);
        cpu.server_cpu_max_pct = Some(195.0);
        assert_eq!(
            judge(&[step(1, 4, Verdict::Ok), cpu.clone()], 5_000.0, 2)
                .ran_out
                .as_deref(),
            Some("cpu")
        );
        let mut slow = cpu.clone();
        slow.server_cpu_max_pct = Some(100.0);
        slow.connect_p99_ms = Some(7_000.0);
        assert_eq!(
            judge(&[slow.clone()], 5_000.0, 2).ran_out.as_deref(),
            Some("startup")
        );
        assert_eq!(judge(&[slow.clone()], 5_000.0, 2).largest_healthy, None);
        slow.connect_p99_ms = Some(10.0);
        assert_eq!(
            judge(&[slow], 5_000.0, 2).ran_out.as_deref(),
            Some("latency")
        );
        let fine = judge(&[step(1, 4, Verdict::Ok)], 5_000.0, 2);
        assert_eq!(fine.ran_out, None);
        assert!(
            fine.reason
                .starts_with("every step stayed healthy, up to 4")
        );
    }

    #[test]
    fn cpu_that_ran_out_on_a_saturated_step_comes_first_and_the_failure_after() {
        let mut busy = step(2, 16, Verdict::Saturated);
        busy.server_cpu_max_pct = Some(188.0);
        let mut out = step(3, 32, Verdict::Failed);
        out.transport_error = Some("the fleet memory budget (2048 MiB) is reached".into());
        let v = judge(&[step(1, 8, Verdict::Ok), busy, out], 30_000.0, 2);
        assert_eq!(v.largest_healthy, Some(16));
        assert_eq!(v.ran_out.as_deref(), Some("cpu"));
        assert_eq!(v.ran_out_step, Some(2));
        let want = "cpu ran out at 16 children (step 2): saturated with the children at 188% \
                    CPU of 2 cores first, then memory ran out at 32 children (step 3)";
        assert!(v.reason.contains(want), "{}", v.reason);
    }
}
