//! The Universal Scalability Law fit of throughput against concurrency:
//! `X(N) = λN / (1 + σ(N−1) + κN(N−1))`, with `λ > 0`, `0 ≤ σ ≤ 1`, `κ ≥ 0`.
//!
//! The fit minimises the squared relative throughput error `Σ ((Xᵢ − X(Nᵢ)) / Xᵢ)²`:
//! measurement noise grows with throughput, and relative errors keep the few high-load points
//! from outweighing the low-load ones that pin λ down. It uses the exact linear form of the
//! law in `Nᵢ/Xᵢ` (Little's law's response time): `N/X = u + s(N−1) + k·N(N−1)` with
//! `u = 1/λ`, `s = σ/λ`, `k = κ/λ`. Each pass solves that linear problem by weighted least
//! squares under the constraints (every face of the feasible set is tried, so the constrained
//! optimum is exact), with weights `X̂ᵢ³/(Xᵢ·Nᵢ²)` from the previous pass's fitted
//! throughputs `X̂`. At the fixed point of that iteration the gradient equals the gradient of
//! the relative throughput error, so it converges to that least-squares fit, not to the fit
//! in `N/X`. No crate was used: the problem is three parameters, and a general
//! Levenberg–Marquardt crate would bring a linear-algebra stack and still need the bounds.

use serde::{Deserialize, Serialize};

/// A fitted Universal Scalability Law.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Contention: the serial fraction of the work (0 ≤ σ ≤ 1).
    pub sigma: f64,
    /// Coherency: the cost of crosstalk between clients (κ ≥ 0); above 0 throughput falls
    /// past a peak.
    pub kappa: f64,
    /// Throughput of one client alone, requests per second.
    pub lambda: f64,
    /// Concurrency where the fitted throughput peaks, `√((1−σ)/κ)`; `null` when κ = 0 (no
    /// retrograde region: throughput only approaches its ceiling).
    pub peak_concurrency: Option<f64>,
    /// The fitted ceiling: throughput at `peak_concurrency`, or the asymptote `λ/σ` when κ = 0;
    /// `null` when both σ and κ are 0 (linear scaling, no ceiling in sight).
    pub peak_throughput_rps: Option<f64>,
    /// Coefficient of determination of the fitted throughputs (1 is a perfect fit).
    pub r_squared: f64,
    /// Root-mean-square throughput error, requests per second.
    pub rmse_rps: f64,
    /// Number of (concurrency, throughput) points fitted.
    pub points: usize,
}

impl UslFit {
    /// The fitted throughput at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        usl(self.lambda, self.sigma, self.kappa, n)
    }
}

fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// The three linear coefficients of `N/X = u + s(N−1) + k·N(N−1)`.
#[derive(Clone, Copy, Debug)]
struct Coef {
    u: f64,
    s: f64,
    k: f64,
}

/// One face of the feasible set `{u > 0, 0 ≤ s ≤ u, k ≥ 0}`: which constraints hold with
/// equality. The free parameters are fitted on the face's basis.
#[derive(Clone, Copy)]
enum Face {
    Interior,
    SigmaZero,
    KappaZero,
    SigmaKappaZero,
    SigmaOne,
    SigmaOneKappaZero,
}

impl Face {
    const ALL: [Face; 6] = [
        Face::Interior,
        Face::SigmaZero,
        Face::KappaZero,
        Face::SigmaKappaZero,
        Face::SigmaOne,
        Face::SigmaOneKappaZero,
    ];

    /// The basis columns at concurrency `n` (at most 3; unused ones are 0).
    fn basis(self, n: f64) -> ([f64; 3], usize) {
        let (a, b) = (n - 1.0, n * (n - 1.0));
        match self {
            Face::Interior => ([1.0, a, b], 3),
            Face::SigmaZero => ([1.0, b, 0.0], 2),
            Face::KappaZero => ([1.0, a, 0.0], 2),
            Face::SigmaKappaZero => ([1.0, 0.0, 0.0], 1),
            Face::SigmaOne => ([n, b, 0.0], 2),
            Face::SigmaOneKappaZero => ([n, 0.0, 0.0], 1),
        }
    }

    fn coef(self, t: [f64; 3]) -> Coef {
        match self {
            Face::Interior => Coef {
                u: t[0],
                s: t[1],
                k: t[2],
            },
            Face::SigmaZero => Coef {
                u: t[0],
                s: 0.0,
                k: t[1],
            },
            Face::KappaZero => Coef {
                u: t[0],
                s: t[1],
                k: 0.0,
            },
            Face::SigmaKappaZero => Coef {
                u: t[0],
                s: 0.0,
                k: 0.0,
            },
            Face::SigmaOne => Coef {
                u: t[0],
                s: t[0],
                k: t[1],
            },
            Face::SigmaOneKappaZero => Coef {
                u: t[0],
                s: t[0],
                k: 0.0,
            },
        }
    }
}

/// Solves the `m × m` system `a·x = b` by Gaussian elimination with partial pivoting;
/// `None` when it is singular.
fn solve(mut a: [[f64; 3]; 3], mut b: [f64; 3], m: usize) -> Option<[f64; 3]> {
    for col in 0..m {
        let pivot = (col..m).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col];
        for row in col + 1..m {
            let f = a[row][col] / pivot_row[col];
            for (cell, p) in a[row][col..m].iter_mut().zip(&pivot_row[col..m]) {
                *cell -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..m).rev() {
        let tail: f64 = (row + 1..m).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Weighted least squares of `y` on the face's basis; columns are scaled to unit size first
/// so the normal equations stay well conditioned.
fn fit_face(face: Face, n: &[f64], y: &[f64], w: &[f64]) -> Option<Coef> {
    let m = face.basis(1.0).1;
    let mut scale = [0.0f64; 3];
    for &ni in n {
        let (row, _) = face.basis(ni);
        for j in 0..m {
            scale[j] = scale[j].max(row[j].abs());
        }
    }
    if scale[..m].contains(&0.0) {
        return None;
    }
    let mut ata = [[0.0; 3]; 3];
    let mut aty = [0.0; 3];
    for i in 0..n.len() {
        let (mut row, _) = face.basis(n[i]);
        for j in 0..m {
            row[j] /= scale[j];
        }
        for j in 0..m {
            aty[j] += w[i] * row[j] * y[i];
            for k in 0..m {
                ata[j][k] += w[i] * row[j] * row[k];
            }
        }
    }
    let mut t = solve(ata, aty, m)?;
    for j in 0..m {
        t[j] /= scale[j];
    }
    let c = face.coef(t);
    // Feasible: u > 0, 0 ≤ s ≤ u, k ≥ 0 (with a little slack for rounding).
    let eps = 1e-12 * c.u.abs().max(1e-300);
    // Built only once feasible (`then`, not `then_some`): clamping to a negative `u` panics.
    (c.u > 0.0 && c.s >= -eps && c.s <= c.u + eps && c.k >= -eps).then(|| Coef {
        u: c.u,
        s: c.s.clamp(0.0, c.u),
        k: c.k.max(0.0),
    })
}

/// The constrained weighted least-squares optimum: the best feasible face minimiser.
fn fit_constrained(n: &[f64], y: &[f64], w: &[f64]) -> Option<Coef> {
    let sse = |c: &Coef| -> f64 {
        (0..n.len())
            .map(|i| {
                let r = y[i] - (c.u + c.s * (n[i] - 1.0) + c.k * n[i] * (n[i] - 1.0));
                w[i] * r * r
            })
            .sum()
    };
    Face::ALL
        .iter()
        .filter_map(|&f| fit_face(f, n, y, w))
        .min_by(|a, b| sse(a).total_cmp(&sse(b)))
}

/// Sum of squared relative throughput errors of coefficients `c`.
fn relative_sse(c: &Coef, n: &[f64], x: &[f64]) -> f64 {
    (0..n.len())
        .map(|i| {
            let r = (x[i] - usl(1.0 / c.u, c.s / c.u, c.k / c.u, n[i])) / x[i];
            r * r
        })
        .sum()
}

/// Fits the law to `(concurrency, throughput_rps)` points. Points with a non-positive or
/// non-finite concurrency or throughput are ignored. `None` when fewer than three distinct
/// concurrencies remain, or no fit with `λ > 0` exists.
pub fn fit_usl(points: &[(f64, f64)]) -> Option<UslFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, x)| n.is_finite() && x.is_finite() && n > 0.0 && x > 0.0)
        .collect();
    let mut distinct: Vec<f64> = pts.iter().map(|p| p.0).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 3 {
        return None;
    }
    let n: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let x: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let y: Vec<f64> = pts.iter().map(|p| p.0 / p.1).collect();

    // Iteratively reweighted: weights from the previous fit's throughputs.
    let mut fitted = x.clone();
    let mut best: Option<(f64, Coef)> = None;
    for _ in 0..50 {
        let w: Vec<f64> = (0..n.len())
            .map(|i| fitted[i].powi(3) / (x[i] * n[i] * n[i]))
            .collect();
        let top = w.iter().copied().fold(0.0f64, f64::max);
        if !(top.is_finite() && top > 0.0) {
            break;
        }
        let w: Vec<f64> = w.iter().map(|v| v / top).collect();
        let Some(c) = fit_constrained(&n, &y, &w) else {
            break;
        };
        let sse = relative_sse(&c, &n, &x);
        let improved = best.as_ref().is_none_or(|(b, _)| sse < *b);
        let converged = best
            .as_ref()
            .is_some_and(|(b, _)| (b - sse).abs() <= 1e-12 * b.max(1e-300));
        if improved {
            best = Some((sse, c));
        }
        if converged {
            break;
        }
        fitted = n
            .iter()
            .map(|&ni| usl(1.0 / c.u, c.s / c.u, c.k / c.u, ni).max(f64::MIN_POSITIVE))
            .collect();
    }
    let (_, c) = best?;

    let (lambda, mut sigma, mut kappa) = (1.0 / c.u, c.s / c.u, c.k / c.u);
    // Rounding leaves traces like κ = 1e-20; a term that cannot move the curve by a part in a
    // billion over the measured range is zero.
    let n_max = distinct[distinct.len() - 1];
    if sigma * n_max < 1e-9 {
        sigma = 0.0;
    }
    if kappa * n_max * n_max < 1e-9 {
        kappa = 0.0;
    }
    let sse: f64 = (0..n.len())
        .map(|i| (x[i] - usl(lambda, sigma, kappa, n[i])).powi(2))
        .sum();
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let sst: f64 = x.iter().map(|v| (v - mean) * (v - mean)).sum();
    let r_squared = if sst > 0.0 {
        1.0 - sse / sst
    } else if sse == 0.0 {
        1.0
    } else {
        0.0
    };
    let peak_concurrency = (kappa > 0.0).then(|| ((1.0 - sigma) / kappa).sqrt().max(1.0));
    let peak_throughput_rps = match peak_concurrency {
        Some(p) => Some(usl(lambda, sigma, kappa, p)),
        None if sigma > 0.0 => Some(lambda / sigma),
        None => None,
    };
    Some(UslFit {
        sigma,
        kappa,
        lambda,
        peak_concurrency,
        peak_throughput_rps,
        r_squared,
        rmse_rps: (sse / x.len() as f64).sqrt(),
        points: x.len(),
    })
}

#[cfg(test)]
mod tests {
    /// Throughput falling as clients are added (a fleet whose every process competes for
    /// two cores): some faces fit with λ < 0, which must be turned down, not clamped.
    #[test]
    fn falling_throughput_is_fitted_or_refused_without_a_panic() {
        for third in [9_000.0, 12_000.0, 15_000.0, 1_000.0] {
            let fit = fit_usl(&[(8.0, 22_239.2), (16.0, 16_180.6), (32.0, third)]);
            if let Some(f) = fit {
                assert!(f.lambda > 0.0 && f.sigma >= 0.0 && f.kappa >= 0.0, "{f:?}");
            }
        }
    }

    use super::*;

    const NS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

    fn series(lambda: f64, sigma: f64, kappa: f64) -> Vec<(f64, f64)> {
        NS.iter()
            .map(|&n| (n, usl(lambda, sigma, kappa, n)))
            .collect()
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-12)
    }

    #[test]
    fn recovers_exact_parameters_and_the_peak() {
        let f = fit_usl(&series(100.0, 0.05, 0.002)).unwrap();
        assert!(close(f.lambda, 100.0, 1e-6), "{f:?}");
        assert!(close(f.sigma, 0.05, 1e-6), "{f:?}");
        assert!(close(f.kappa, 0.002, 1e-6), "{f:?}");
        let n_star = (0.95f64 / 0.002).sqrt();
        assert!(close(f.peak_concurrency.unwrap(), n_star, 1e-6));
        assert!(close(
            f.peak_throughput_rps.unwrap(),
            usl(100.0, 0.05, 0.002, n_star),
            1e-6
        ));
        assert!(f.r_squared > 0.999_999);
        assert_eq!(f.points, 7);
    }

    #[test]
    fn pure_contention_has_an_asymptote_and_no_peak() {
        let f = fit_usl(&series(50.0, 0.1, 0.0)).unwrap();
        assert!(f.kappa.abs() < 1e-9, "{f:?}");
        assert_eq!(f.peak_concurrency, None);
        assert!(close(f.peak_throughput_rps.unwrap(), 500.0, 1e-6), "{f:?}");
    }

    #[test]
    fn linear_scaling_has_no_ceiling() {
        let f = fit_usl(&series(10.0, 0.0, 0.0)).unwrap();
        assert!(close(f.lambda, 10.0, 1e-9));
        assert_eq!(f.peak_throughput_rps, None);
    }

    #[test]
    fn noisy_measurements_stay_close_to_the_truth() {
        // ±4% deterministic noise.
        let pts: Vec<(f64, f64)> = series(200.0, 0.03, 0.0005)
            .into_iter()
            .enumerate()
            .map(|(i, (n, x))| (n, x * (1.0 + 0.04 * (i as f64 * 2.3).sin())))
            .collect();
        let f = fit_usl(&pts).unwrap();
        let true_peak = (0.97f64 / 0.0005).sqrt();
        assert!(close(f.lambda, 200.0, 0.08), "{f:?}");
        assert!((f.sigma - 0.03).abs() < 0.02, "{f:?}");
        assert!(close(f.peak_concurrency.unwrap(), true_peak, 0.25), "{f:?}");
        assert!(close(
            f.peak_throughput_rps.unwrap(),
            usl(200.0, 0.03, 0.0005, true_peak),
            0.08
        ));
        assert!(f.r_squared > 0.95, "{f:?}");
    }

    #[test]
    fn the_fit_is_a_least_squares_optimum_in_relative_throughput() {
        // Nudging any parameter away from the fit makes the relative error worse.
        let pts: Vec<(f64, f64)> = series(80.0, 0.08, 0.001)
            .into_iter()
            .enumerate()
            .map(|(i, (n, x))| (n, x * (1.0 + 0.05 * (i as f64 * 1.7).cos())))
            .collect();
        let f = fit_usl(&pts).unwrap();
        let sse = |l: f64, s: f64, k: f64| -> f64 {
            pts.iter()
                .map(|&(n, x)| ((x - usl(l, s, k, n)) / x).powi(2))
                .sum()
        };
        let best = sse(f.lambda, f.sigma, f.kappa);
        for d in [0.99, 1.01] {
            assert!(sse(f.lambda * d, f.sigma, f.kappa) >= best);
            assert!(sse(f.lambda, f.sigma * d, f.kappa) >= best);
            assert!(sse(f.lambda, f.sigma, f.kappa * d) >= best);
        }
    }

    #[test]
    fn a_capacity_limited_server_fits_its_service_rate_and_ceiling() {
        // C = 8 workers, S = 10 ms each: X = min(N, 8) / 0.010.
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
            .iter()
            .map(|&n: &f64| (n, n.min(8.0) / 0.010))
            .collect();
        let f = fit_usl(&pts).unwrap();
        assert!(close(f.lambda, 100.0, 0.10), "{f:?}");
        assert!(close(f.peak_throughput_rps.unwrap(), 800.0, 0.15), "{f:?}");
    }

    #[test]
    fn too_few_points_or_garbage_give_no_fit() {
        assert!(fit_usl(&[(1.0, 10.0), (2.0, 20.0)]).is_none());
        assert!(fit_usl(&[(1.0, 10.0), (1.0, 11.0), (2.0, 20.0), (2.0, 19.0)]).is_none());
        assert!(fit_usl(&[(1.0, 10.0), (2.0, 0.0), (4.0, f64::NAN), (8.0, 5.0)]).is_none());
    }
}
