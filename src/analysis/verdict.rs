//! The verdict of one step: which stop criteria tripped (`failed`), whether more load bought
//! little more throughput (`saturated`), else `ok`. Rules and thresholds are docs/metrics.md's.

use crate::metrics::{Model, StepSummary, Verdict};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Closed loop: a step is saturated when throughput rose by less than this fraction over the
/// previous step...
pub const SATURATION_GAIN: f64 = 0.10;
/// ...although concurrency rose by this fraction or more.
pub const SATURATION_LOAD_RISE: f64 = 0.50;
/// Open loop: a step is saturated when its throughput is below this fraction of its target rate.
pub const OPEN_LOOP_SATURATION: f64 = 0.90;

/// The stop criteria of a sweep: a step that trips any of them is `failed` and ends the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StopCriteria {
    /// A step fails when its `error_rate` is above this (default 0.01).
    pub max_error_rate: f64,
    /// A step fails when its `p99_ms` is above this service-level objective (default: none).
    pub p99_slo_ms: Option<f64>,
    /// A step fails on any `unknown_id`, `null_id`, `duplicate_id`, `both_result_error` or
    /// `invalid_jsonrpc` (default: false).
    pub fail_on_anomaly: bool,
}

impl Default for StopCriteria {
    fn default() -> Self {
        StopCriteria {
            max_error_rate: 0.01,
            p99_slo_ms: None,
            fail_on_anomaly: false,
        }
    }
}

/// The unpaired end (or error) that accounts for most of a step's `requests − ok`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// Its counter (CSV column), e.g. `http_429`.
    pub counter: String,
    /// Its count divided by the step's requests.
    pub rate: f64,
}

/// One stop criterion that tripped, with the figures that tripped it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "criterion", rename_all = "snake_case")]
pub enum Tripped {
    /// The target went down for good (a stdio child that exited): nothing more was sent to it.
    TargetDown { reason: String },
    /// `error_rate` above `max_error_rate`; `cause` is the largest share of the failures.
    ErrorRate {
        value: f64,
        limit: f64,
        cause: Option<Cause>,
    },
    /// `p99_ms` above the SLO.
    P99 { value_ms: f64, slo_ms: f64 },
    /// A pairing anomaly with `fail_on_anomaly` set.
    Anomaly { counter: String, count: u64 },
    /// Calls asked for input and nothing answered (`input_unanswered`, `input_refused`):
    /// whatever its error rate, such a step is not healthy.
    InputUnanswered { count: u64 },
    /// A process per session: users' children not started for the fleet's memory budget
    /// (`fleet_budget_refusals`): the step could not run the users it asked for.
    FleetBudget { refusals: u64 },
}

/// A fraction as a percentage with at most two decimals and no trailing zeros: 0.408 → "40.8%".
pub fn pct(x: f64) -> String {
    let s = format!("{:.2}", x * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// What a counter means, in a few words, for sentences like "mostly HTTP 429".
pub(crate) fn counter_phrase(counter: &str) -> &str {
    match counter {
        "errors" => "JSON-RPC error responses",
        "tool_errors" => "tool errors (isError: true)",
        "output_schema_violations" => "results breaking their outputSchema",
        "both_result_error" | "invalid_jsonrpc" => "malformed responses",
        "missing" => "missing responses",
        "timeouts" => "timeouts",
        "http_429" => "HTTP 429",
        "http_503" => "HTTP 503",
        "http_other" => "other HTTP errors",
        "transport_errors" => "transport errors",
        "auth_failures" => "auth failures (a token refused or none to be had)",
        "http_401" => "HTTP 401 (unauthorized)",
        "http_403" => "HTTP 403 (forbidden: insufficient scope)",
        "expired_unsent" => "requests that expired unsent",
        "input_unanswered" => "requests for input nothing answered",
        "in_flight_at_end" => "requests never answered",
        other => other,
    }
}

impl fmt::Display for Tripped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tripped::TargetDown { reason } => write!(f, "the target went down: {reason}"),
            Tripped::ErrorRate {
                value,
                limit,
                cause,
            } => {
                write!(f, "error rate {} > {}", pct(*value), pct(*limit))?;
                if let Some(c) = cause {
                    write!(
                        f,
                        ", mostly {} ({} of requests)",
                        counter_phrase(&c.counter),
                        pct(c.rate)
                    )?;
                }
                Ok(())
            }
            Tripped::P99 { value_ms, slo_ms } => {
                write!(f, "p99 {value_ms} ms > SLO {slo_ms} ms")
            }
            Tripped::Anomaly { counter, count } => {
                write!(f, "{count} {counter} (fail_on_anomaly)")
            }
            Tripped::InputUnanswered { count } => {
                write!(
                    f,
                    "{count} requests for input nothing answered (see [input])"
                )
            }
            Tripped::FleetBudget { refusals } => write!(
                f,
                "{refusals} children not started for the fleet memory budget"
            ),
        }
    }
}

/// A step's verdict and, when `failed`, every criterion that tripped.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub tripped: Vec<Tripped>,
}

/// The largest term of `requests − ok`, as a counter name and a share of requests.
fn dominant_cause(s: &StepSummary) -> Option<Cause> {
    let terms = [
        ("errors", s.errors),
        ("tool_errors", s.tool_errors),
        ("output_schema_violations", s.output_schema_violations),
        ("both_result_error", s.both_result_error),
        ("invalid_jsonrpc", s.invalid_jsonrpc),
        ("missing", s.missing),
        ("timeouts", s.timeouts),
        ("http_429", s.http_429),
        ("http_503", s.http_503),
        ("http_other", s.http_other),
        ("transport_errors", s.transport_errors),
        ("expired_unsent", s.expired_unsent),
        ("input_unanswered", s.input_unanswered.unwrap_or(0)),
        ("in_flight_at_end", s.in_flight_at_end),
    ];
    let (mut counter, mut n) = terms.into_iter().max_by_key(|(_, n)| *n)?;
    // Authorization is told by name: its failures when they weigh, else the status that
    // makes up most of `http_other`.
    if s.auth_failures > 0 && s.auth_failures * 2 >= n {
        (counter, n) = ("auth_failures", s.auth_failures);
    } else if counter == "http_other" {
        for (status, k) in [("http_401", s.http_401), ("http_403", s.http_403)] {
            if k * 2 > n {
                (counter, n) = (status, k);
            }
        }
    }
    (n > 0 && s.requests > 0).then(|| Cause {
        counter: counter.to_owned(),
        rate: n as f64 / s.requests as f64,
    })
}

/// Every stop criterion this step trips, in the order: the target down (whatever the
/// criteria), error rate, p99 SLO, anomalies, input nothing answered (whatever the criteria).
pub fn tripped(s: &StepSummary, c: &StopCriteria) -> Vec<Tripped> {
    let mut out = Vec::new();
    if let Some(reason) = &s.target_down {
        out.push(Tripped::TargetDown {
            reason: reason.clone(),
        });
    }
    if s.error_rate > c.max_error_rate {
        out.push(Tripped::ErrorRate {
            value: s.error_rate,
            limit: c.max_error_rate,
            cause: dominant_cause(s),
        });
    }
    if let (Some(slo), Some(p99)) = (c.p99_slo_ms, s.p99_ms)
        && p99 > slo
    {
        out.push(Tripped::P99 {
            value_ms: p99,
            slo_ms: slo,
        });
    }
    if c.fail_on_anomaly {
        for (counter, count) in [
            ("unknown_id", s.unknown_id),
            ("null_id", s.null_id),
            ("duplicate_id", s.duplicate_id),
            ("both_result_error", s.both_result_error),
            ("invalid_jsonrpc", s.invalid_jsonrpc),
        ] {
            if count > 0 {
                out.push(Tripped::Anomaly {
                    counter: counter.to_owned(),
                    count,
                });
            }
        }
    }
    if s.fleet_budget_refusals > 0 {
        out.push(Tripped::FleetBudget {
            refusals: s.fleet_budget_refusals,
        });
    }
    let unanswered = s.input_unanswered.unwrap_or(0) + s.input_refused;
    if unanswered > 0 {
        out.push(Tripped::InputUnanswered { count: unanswered });
    }
    out
}

/// Whether more offered load bought little more throughput. Closed loop: throughput rose less
/// than [`SATURATION_GAIN`] over `previous` although concurrency rose by
/// [`SATURATION_LOAD_RISE`] or more (never for the first step, or when the previous step was
/// open loop). Open loop: throughput below [`OPEN_LOOP_SATURATION`] of the target rate.
pub fn saturated(s: &StepSummary, previous: Option<&StepSummary>) -> bool {
    match s.model {
        Model::Open => match s.target_rate {
            Some(rate) if rate > 0.0 => s.throughput_rps < OPEN_LOOP_SATURATION * rate,
            _ => false,
        },
        Model::Closed => {
            let Some(p) = previous.filter(|p| p.model == Model::Closed) else {
                return false;
            };
            let (Some(c), Some(pc)) = (s.concurrency, p.concurrency) else {
                return false;
            };
            c as f64 >= (1.0 + SATURATION_LOAD_RISE) * pc as f64
                && s.throughput_rps < (1.0 + SATURATION_GAIN) * p.throughput_rps
        }
    }
}

/// Judges one step against the criteria and the step before it: `failed` when any criterion
/// trips, else `saturated` per [`saturated`], else `ok`.
pub fn judge(s: &StepSummary, previous: Option<&StepSummary>, c: &StopCriteria) -> Judgement {
    let tripped = tripped(s, c);
    let verdict = if !tripped.is_empty() {
        Verdict::Failed
    } else if saturated(s, previous) {
        Verdict::Saturated
    } else {
        Verdict::Ok
    };
    Judgement { verdict, tripped }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Stats, StepFacts};
    use std::time::Duration;

    fn closed(step: u32, concurrency: u64, responses: u64) -> StepSummary {
        let mut stats = Stats::default();
        stats.counters.requests = responses;
        stats.counters.responses = responses;
        stats.counters.ok = responses;
        stats.latency.record(Duration::from_millis(5));
        StepSummary::new(StepFacts::closed(step, concurrency, 1.0), &stats)
    }

    #[test]
    fn closed_loop_saturation_needs_a_big_load_rise_and_a_small_gain() {
        let a = closed(1, 8, 1000);
        assert!(!saturated(&a, None));
        // +100% load, +5% throughput: saturated.
        assert!(saturated(&closed(2, 16, 1050), Some(&a)));
        // +100% load, +20% throughput: still scaling.
        assert!(!saturated(&closed(2, 16, 1200), Some(&a)));
        // +25% load only: cannot tell, so not saturated.
        assert!(!saturated(&closed(2, 10, 1000), Some(&a)));
        // Throughput fell under doubled load: saturated.
        assert!(saturated(&closed(2, 16, 900), Some(&a)));
    }

    #[test]
    fn open_loop_saturation_is_throughput_below_ninety_percent_of_target() {
        let mut s = closed(1, 1, 890);
        s.model = Model::Open;
        s.concurrency = None;
        s.target_rate = Some(1000.0);
        assert!(saturated(&s, None));
        s.throughput_rps = 900.0;
        assert!(!saturated(&s, None));
    }

    #[test]
    fn failure_names_the_dominant_cause_and_every_tripped_criterion() {
        let mut s = closed(3, 32, 590);
        s.requests = 1000;
        s.http_429 = 410;
        s.error_rate = 0.41;
        s.unknown_id = 2;
        let c = StopCriteria {
            p99_slo_ms: Some(4.0),
            fail_on_anomaly: true,
            ..StopCriteria::default()
        };
        let j = judge(&s, None, &c);
        assert_eq!(j.verdict, Verdict::Failed);
        assert_eq!(j.tripped.len(), 3, "{:?}", j.tripped);
        assert_eq!(
            j.tripped[0].to_string(),
            "error rate 41% > 1%, mostly HTTP 429 (41% of requests)"
        );
        assert_eq!(j.tripped[1].to_string(), "p99 5.003 ms > SLO 4 ms");
        assert_eq!(j.tripped[2].to_string(), "2 unknown_id (fail_on_anomaly)");
        // Without the anomaly rule and the SLO, only the error rate trips.
        assert_eq!(judge(&s, None, &StopCriteria::default()).tripped.len(), 1);
    }

    #[test]
    fn a_step_whose_target_went_down_fails_whatever_its_figures() {
        let mut s = closed(1, 4, 6);
        s.target_down = Some("child exited (exit status: 1)".into());
        let j = judge(&s, None, &StopCriteria::default());
        assert_eq!(j.verdict, Verdict::Failed);
        assert_eq!(
            j.tripped
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["the target went down: child exited (exit status: 1)"]
        );
    }

    #[test]
    fn error_rate_at_the_limit_is_not_a_failure() {
        let mut s = closed(1, 1, 990);
        s.requests = 1000;
        s.timeouts = 10;
        s.error_rate = 0.01;
        assert_eq!(
            judge(&s, None, &StopCriteria::default()).verdict,
            Verdict::Ok
        );
    }

    #[test]
    fn percentages_drop_trailing_zeros() {
        assert_eq!(pct(0.01), "1%");
        assert_eq!(pct(0.408), "40.8%");
        assert_eq!(pct(0.001), "0.1%");
        assert_eq!(pct(0.0), "0%");
    }
}
