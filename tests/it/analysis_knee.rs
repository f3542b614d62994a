//! The knee and the USL fit on synthetic step series with known answers, through the public
//! API: closed-loop sweeps generated from a known law, an open-loop sweep, and the built-in
//! target's capacity model (C workers, S seconds each: λ ≈ 1/S, ceiling ≈ C/S).

use mcpload::analysis::{Knee, StopCriteria, fit_usl, judge};
use mcpload::metrics::{Model, Stats, StepFacts, StepSummary, Verdict};

fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// A judged sweep from (load, throughput per second) over 10-second steps.
fn sweep(model: Model, points: &[(f64, f64)]) -> Vec<StepSummary> {
    let mut out: Vec<StepSummary> = Vec::new();
    for (i, &(load, x)) in points.iter().enumerate() {
        let mut stats = Stats::default();
        let n = (x * 10.0).round() as u64;
        stats.counters.requests = n;
        stats.counters.responses = n;
        stats.counters.ok = n;
        let mut s = StepSummary::new(
            StepFacts {
                step: i as u32 + 1,
                model,
                concurrency: (model == Model::Closed).then_some(load as u64),
                target_rate: (model == Model::Open).then_some(load),
                duration_s: 10.0,
                schedule_lag_p99_ms: None,
                dropped_arrivals: None,
                schedule_lag_p50_ms: None,
                schedule_lag_max_ms: None,
                generator: Default::default(),
                in_flight_at_end: 0,
                interrupted: false,
                target_down: None,
                transport_error: None,
            },
            &stats,
        );
        s.verdict = judge(&s, out.last(), &StopCriteria::default()).verdict;
        out.push(s);
    }
    out
}

#[test]
fn usl_recovers_a_known_law_from_a_closed_loop_sweep() {
    let (lambda, sigma, kappa) = (250.0, 0.04, 0.0008);
    let points: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
        .iter()
        .map(|&n| (n, usl(lambda, sigma, kappa, n)))
        .collect();
    let steps = sweep(Model::Closed, &points);
    let k = Knee::of(&steps, &StopCriteria::default());
    let f = k.usl.expect("seven closed-loop steps");
    // Throughputs were rounded to whole requests over 10 s: recovery to a part in a thousand.
    assert!((f.lambda / lambda - 1.0).abs() < 1e-3, "{f:?}");
    assert!((f.sigma - sigma).abs() < 1e-3, "{f:?}");
    assert!((f.kappa / kappa - 1.0).abs() < 1e-2, "{f:?}");
    let n_star = ((1.0 - sigma) / kappa).sqrt();
    assert!(
        (f.peak_concurrency.unwrap() / n_star - 1.0).abs() < 1e-2,
        "{f:?}"
    );
    assert!(
        (f.peak_throughput_rps.unwrap() / usl(lambda, sigma, kappa, n_star) - 1.0).abs() < 1e-3
    );
    // X(16) = 2232, X(32) = 2637 (+18%: still scaling), X(64) = 2372 (fell: saturated), so
    // 32 is the saturation point.
    let v: Vec<Verdict> = steps.iter().map(|s| s.verdict).collect();
    use Verdict::*;
    assert_eq!(v, [Ok, Ok, Ok, Ok, Ok, Ok, Saturated]);
    assert_eq!(k.saturation_point, Some(32.0));
    assert_eq!(k.max_sustainable, Some(64.0));
    assert!(k.failure_point.is_none());
    assert_eq!(k.peak_step, Some(6));
}

#[test]
fn a_capacity_model_fits_its_service_rate_and_ceiling() {
    for (c, s) in [(8.0, 0.010), (4.0, 0.050), (16.0, 0.002)] {
        let points: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
            .iter()
            .map(|&n: &f64| (n, n.min(c) / s))
            .collect();
        let f = fit_usl(&points).unwrap();
        assert!((f.lambda * s - 1.0).abs() < 0.15, "C={c} S={s}: {f:?}");
        assert!(
            (f.peak_throughput_rps.unwrap() / (c / s) - 1.0).abs() < 0.15,
            "C={c} S={s}: {f:?}"
        );
    }
}

#[test]
fn open_loop_saturates_below_ninety_percent_of_the_offered_rate() {
    // The server tops out at 500 req/s.
    let points: Vec<(f64, f64)> = [100.0, 200.0, 400.0, 800.0]
        .iter()
        .map(|&r: &f64| (r, r.min(500.0)))
        .collect();
    let steps = sweep(Model::Open, &points);
    let v: Vec<Verdict> = steps.iter().map(|s| s.verdict).collect();
    assert_eq!(
        v,
        [Verdict::Ok, Verdict::Ok, Verdict::Ok, Verdict::Saturated]
    );
    let k = Knee::of(&steps, &StopCriteria::default());
    assert_eq!(k.model, Some(Model::Open));
    assert_eq!(k.saturation_point, Some(400.0));
    assert_eq!(k.peak_throughput_rps, Some(500.0));
    assert!(
        k.usl.is_none(),
        "the USL is fitted over closed-loop steps only"
    );
}

#[test]
fn a_p99_slo_and_anomalies_fail_steps_when_asked() {
    let mut steps = sweep(Model::Closed, &[(1.0, 100.0), (2.0, 200.0)]);
    steps[1].p99_ms = Some(300.0);
    steps[1].null_id = 1;
    let strict = StopCriteria {
        p99_slo_ms: Some(250.0),
        fail_on_anomaly: true,
        ..StopCriteria::default()
    };
    let j = judge(&steps[1], Some(&steps[0]), &strict);
    assert_eq!(j.verdict, Verdict::Failed);
    let why: Vec<String> = j.tripped.iter().map(ToString::to_string).collect();
    assert_eq!(
        why,
        ["p99 300 ms > SLO 250 ms", "1 null_id (fail_on_anomaly)"]
    );
    assert_eq!(
        judge(&steps[1], Some(&steps[0]), &StopCriteria::default()).verdict,
        Verdict::Ok
    );
}
