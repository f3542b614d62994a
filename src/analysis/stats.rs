//! Small-sample statistics for A/B verdicts: a location shift with its interval and one-sided
//! p-values (Student's t, Hodges–Lehmann with the exact Wilcoxon signed-rank distribution,
//! Welch), Holm and Benjamini–Hochberg adjustments, two error rates compared with
//! overdispersion and the rule of three, and the lag-1 autocorrelation that batch means are
//! checked with. (benches/ab_calibration.py computes the calibration's Clopper–Pearson and
//! Kolmogorov–Smirnov figures.)

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Which interval a shift was estimated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShiftMethod {
    /// Paired: mean of the differences, Student's t with n − 1 degrees of freedom.
    T,
    /// Paired: the Hodges–Lehmann estimate (median of the Walsh averages) with the exact
    /// Wilcoxon signed-rank interval and p-values.
    HodgesLehmann,
    /// Unpaired: difference of means, Welch's t with Welch–Satterthwaite degrees of freedom.
    Welch,
}

/// Skewness past which (with at least [`HL_MIN_N`] pairs) the paired shift is estimated
/// without assuming normal differences.
const SKEW_LIMIT: f64 = 1.0;
/// Fewest pairs the Hodges–Lehmann interval is used with (below, its 90% interval is as wide
/// as the data).
const HL_MIN_N: usize = 6;
/// The interval's one-sided level: the 90% two-sided interval's ends are 95% bounds.
const ONE_SIDED: f64 = 0.05;

/// A location shift and its interval: `lo`/`hi` are the two-sided 90% interval, each a
/// one-sided 95% bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Shift {
    pub method: ShiftMethod,
    /// The point estimate: mean d, the Hodges–Lehmann estimate, or mean(b) − mean(a).
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    /// Observations: pairs (paired) or the smaller side (unpaired).
    pub n: usize,
    /// Standard deviation of one observation: of d (paired), pooled (unpaired).
    pub spread: f64,
    /// The mean's standard error and degrees of freedom (t, Welch).
    se: f64,
    df: f64,
    /// The differences (Hodges–Lehmann's p-values are computed on them).
    d: Vec<f64>,
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// The sample variance (n − 1).
fn variance(x: &[f64]) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0)
}

/// The adjusted Fisher–Pearson skewness G1; 0 without spread.
fn skewness(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let m = mean(x);
    let m2 = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n;
    let m3 = x.iter().map(|v| (v - m).powi(3)).sum::<f64>() / n;
    if m2 <= 0.0 || n < 3.0 {
        return 0.0;
    }
    (n * (n - 1.0)).sqrt() / (n - 2.0) * m3 / m2.powf(1.5)
}

/// The t quantile at `p` with `df` degrees of freedom.
fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |t| t.inverse_cdf(p))
}

/// P(T > t).
fn t_upper(t: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |d| 1.0 - d.cdf(t))
}

fn normal_upper(z: f64) -> f64 {
    1.0 - Normal::standard().cdf(z)
}

/// The null distribution of Wilcoxon's W+ for n untied ranks: counts of each sum 0..=n(n+1)/2,
/// as probabilities.
fn signed_rank_null(n: usize) -> Vec<f64> {
    let max = n * (n + 1) / 2;
    let mut counts = vec![0.0f64; max + 1];
    counts[0] = 1.0;
    for rank in 1..=n {
        for s in (rank..=max).rev() {
            counts[s] += counts[s - rank];
        }
    }
    let total = 2f64.powi(n as i32);
    counts.iter().map(|c| c / total).collect()
}

/// The Walsh averages (x_i + x_j)/2, i ≤ j, sorted.
fn walsh(d: &[f64]) -> Vec<f64> {
    let mut w = Vec::with_capacity(d.len() * (d.len() + 1) / 2);
    for i in 0..d.len() {
        for j in i..d.len() {
            w.push((d[i] + d[j]) / 2.0);
        }
    }
    w.sort_by(f64::total_cmp);
    w
}

impl Shift {
    /// Paired design on per-pair differences d_i (e.g. ln(B_i/A_i)): Student's t, or
    /// Hodges–Lehmann when n ≥ 6 and |G1| > 1. `None` with fewer than 2 or non-finite values.
    /// All d equal: a zero-width interval at their value.
    pub fn paired(d: &[f64]) -> Option<Shift> {
        if d.len() < 2 || d.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = d.len();
        let sd = variance(d).sqrt();
        let se = sd / (n as f64).sqrt();
        let df = n as f64 - 1.0;
        if n >= HL_MIN_N && skewness(d).abs() > SKEW_LIMIT {
            let w = walsh(d);
            // The largest k with P(W+ ≤ k − 1) ≤ 5%: the k-th smallest and largest Walsh
            // averages bound the 90% interval.
            let null = signed_rank_null(n);
            let mut cum = 0.0;
            let mut k = 0;
            for (s, p) in null.iter().enumerate() {
                cum += p;
                if cum > ONE_SIDED {
                    k = s;
                    break;
                }
            }
            let k = k.max(1);
            return Some(Shift {
                method: ShiftMethod::HodgesLehmann,
                estimate: median(&w),
                lo: w[k - 1],
                hi: w[w.len() - k],
                n,
                spread: sd,
                se,
                df,
                d: d.to_vec(),
            });
        }
        let m = mean(d);
        let half = t_quantile(1.0 - ONE_SIDED, df) * se;
        Some(Shift {
            method: ShiftMethod::T,
            estimate: m,
            lo: m - half,
            hi: m + half,
            n,
            spread: sd,
            se,
            df,
            d: d.to_vec(),
        })
    }

    /// Unpaired (Welch) on two samples; the shift is mean(b) − mean(a). `None` when a side has
    /// fewer than 2 or non-finite values.
    pub fn unpaired(a: &[f64], b: &[f64]) -> Option<Shift> {
        let ok = |x: &[f64]| x.len() >= 2 && x.iter().all(|v| v.is_finite());
        if !ok(a) || !ok(b) {
            return None;
        }
        let (na, nb) = (a.len() as f64, b.len() as f64);
        let (va, vb) = (variance(a) / na, variance(b) / nb);
        let se = (va + vb).sqrt();
        let df = if se > 0.0 {
            (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0))
        } else {
            na + nb - 2.0
        };
        let estimate = mean(b) - mean(a);
        let half = t_quantile(1.0 - ONE_SIDED, df) * se;
        let pooled =
            (((na - 1.0) * variance(a) + (nb - 1.0) * variance(b)) / (na + nb - 2.0)).sqrt();
        Some(Shift {
            method: ShiftMethod::Welch,
            estimate,
            lo: estimate - half,
            hi: estimate + half,
            n: a.len().min(b.len()),
            spread: pooled,
            se,
            df,
            d: Vec::new(),
        })
    }

    /// One-sided p-value of H0: shift ≤ threshold against H1: shift > threshold.
    pub fn p_above(&self, threshold: f64) -> f64 {
        match self.method {
            ShiftMethod::HodgesLehmann => wilcoxon_upper(&self.d, threshold),
            ShiftMethod::T | ShiftMethod::Welch if self.se == 0.0 => {
                if self.estimate > threshold {
                    0.0
                } else {
                    1.0
                }
            }
            ShiftMethod::T | ShiftMethod::Welch => {
                t_upper((self.estimate - threshold) / self.se, self.df)
            }
        }
    }

    /// One-sided p-value of H0: shift ≥ threshold against H1: shift < threshold.
    pub fn p_below(&self, threshold: f64) -> f64 {
        let mirrored = Shift {
            estimate: -self.estimate,
            lo: -self.hi,
            hi: -self.lo,
            d: self.d.iter().map(|v| -v).collect(),
            ..self.clone()
        };
        mirrored.p_above(-threshold)
    }

    /// Two-sided p-value of H0: shift = 0.
    pub fn p_two_sided(&self) -> f64 {
        (2.0 * self.p_above(0.0).min(self.p_below(0.0))).min(1.0)
    }

    /// The observations (pairs, or runs a side unpaired) that would likely decide between
    /// past the band and inside it at one-sided level `alpha`, from the observed spread:
    /// the smallest n ≥ 2 with `t(n−1, 1−alpha) · spread · c / √n ≤ | |estimate| − band |`
    /// (c = 1 paired, √2 unpaired). `None` when that distance is 0 or no n to 10,000 does.
    pub fn needed(&self, band: f64, alpha: f64) -> Option<usize> {
        let distance = (self.estimate.abs() - band).abs();
        if distance <= 0.0 || !distance.is_finite() {
            return None;
        }
        let c = if self.method == ShiftMethod::Welch {
            2f64.sqrt()
        } else {
            1.0
        };
        if self.spread == 0.0 {
            return Some(2);
        }
        (2..=10_000usize).find(|&n| {
            t_quantile(1.0 - alpha, n as f64 - 1.0) * self.spread * c / (n as f64).sqrt()
                <= distance
        })
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The exact one-sided Wilcoxon signed-rank p-value of H1: median(d) > threshold: zeros of
/// d − threshold dropped; ties get midranks and the exact null distribution of the doubled
/// (integer) midranks, by dynamic programming.
fn wilcoxon_upper(d: &[f64], threshold: f64) -> f64 {
    let mut x: Vec<f64> = d
        .iter()
        .map(|v| v - threshold)
        .filter(|v| *v != 0.0)
        .collect();
    if x.is_empty() {
        return 1.0;
    }
    x.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Doubled midranks: integers even with ties.
    let n = x.len();
    let mut ranks2 = vec![0usize; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && x[j + 1].abs() == x[i].abs() {
            j += 1;
        }
        // Ranks i+1 ..= j+1; their mean doubled is i + j + 2.
        for r in &mut ranks2[i..=j] {
            *r = i + j + 2;
        }
        i = j + 1;
    }
    let observed: usize = x
        .iter()
        .zip(&ranks2)
        .filter(|(v, _)| **v > 0.0)
        .map(|(_, r)| r)
        .sum();
    let max: usize = ranks2.iter().sum();
    let mut counts = vec![0.0f64; max + 1];
    counts[0] = 1.0;
    for &r in &ranks2 {
        for s in (r..=max).rev() {
            counts[s] += counts[s - r];
        }
    }
    let total: f64 = counts.iter().sum();
    counts[observed..].iter().sum::<f64>() / total
}

/// Holm's step-down adjusted p-values, in the input's order (NaN read as 1).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean = |v: f64| if v.is_nan() { 1.0 } else { v.clamp(0.0, 1.0) };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| clean(p[a]).total_cmp(&clean(p[b])));
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * clean(p[i])).min(1.0));
        out[i] = running;
    }
    out
}

/// Benjamini–Hochberg adjusted p-values (q-values), in the input's order (NaN read as 1).
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean = |v: f64| if v.is_nan() { 1.0 } else { v.clamp(0.0, 1.0) };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| clean(p[b]).total_cmp(&clean(p[a])));
    let mut out = vec![1.0; m];
    let mut running = 1.0f64;
    for (k, &i) in order.iter().enumerate() {
        let rank = m - k; // 1-based rank from the smallest
        running = running.min(clean(p[i]) * m as f64 / rank as f64);
        out[i] = running.min(1.0);
    }
    out
}

/// Error counts of one run: (failed, total).
pub type Counts = (u64, u64);

/// Two error rates compared across runs: a two-proportion test with each side's variance
/// inflated for overdispersion between runs, and the rule of three for a side without errors.
#[derive(Clone, Debug, PartialEq)]
pub struct RateTest {
    /// Pooled rate of each side: Σfailed / Σtotal.
    pub rate_a: f64,
    pub rate_b: f64,
    /// rate_b − rate_a, and its two-sided 90% interval.
    pub diff: f64,
    pub lo: f64,
    pub hi: f64,
    /// The margin a difference must pass to count: max(band · rate_a, 3 / total_a).
    pub margin: f64,
    /// Overdispersion φ ≥ 1 of each side: Pearson's χ² across its runs / (runs − 1).
    pub dispersion_a: f64,
    pub dispersion_b: f64,
    /// One-sided p-values of B worse by more than the margin, and better by more.
    pub p_worse: f64,
    pub p_better: f64,
    /// Two-sided p-value of no difference.
    pub p_two_sided: f64,
}

/// A side's pooled rate, its total and its overdispersion.
fn pooled(runs: &[Counts]) -> Option<(f64, f64, f64)> {
    let runs: Vec<Counts> = runs.iter().copied().filter(|c| c.1 > 0).collect();
    let total: u64 = runs.iter().map(|c| c.1).sum();
    if total == 0 {
        return None;
    }
    let failed: u64 = runs.iter().map(|c| c.0.min(c.1)).sum();
    let p = failed as f64 / total as f64;
    let phi = if runs.len() < 2 || p <= 0.0 || p >= 1.0 {
        1.0
    } else {
        let chi2: f64 = runs
            .iter()
            .map(|&(f, n)| {
                let e = p * n as f64;
                (f.min(n) as f64 - e).powi(2) / (e * (1.0 - p))
            })
            .sum();
        (chi2 / (runs.len() as f64 - 1.0)).max(1.0)
    };
    Some((p, total as f64, phi))
}

impl RateTest {
    /// `None` when a side has no runs with requests. Each pooled rate's variance is
    /// φ · p(1 − p)/N, p floored at 0.5/N for the variance only.
    pub fn new(a: &[Counts], b: &[Counts], band: f64) -> Option<RateTest> {
        let (pa, na, phia) = pooled(a)?;
        let (pb, nb, phib) = pooled(b)?;
        let var = |p: f64, n: f64, phi: f64| {
            let q = p.max(0.5 / n).min(1.0 - 0.5 / n);
            phi * q * (1.0 - q) / n
        };
        let se = (var(pa, na, phia) + var(pb, nb, phib)).sqrt();
        let diff = pb - pa;
        let z90 = Normal::standard().inverse_cdf(1.0 - ONE_SIDED);
        let margin = (band * pa).max(3.0 / na);
        Some(RateTest {
            rate_a: pa,
            rate_b: pb,
            diff,
            lo: diff - z90 * se,
            hi: diff + z90 * se,
            margin,
            dispersion_a: phia,
            dispersion_b: phib,
            p_worse: normal_upper((diff - margin) / se),
            p_better: normal_upper((-diff - margin) / se),
            p_two_sided: (2.0 * normal_upper(diff.abs() / se)).min(1.0),
        })
    }

    /// Inside the margin: the 90% interval lies within (−margin, +margin).
    pub fn equivalent(&self) -> bool {
        self.lo > -self.margin && self.hi < self.margin
    }
}

/// Lag-1 autocorrelation of a series; `None` with fewer than 3 values or no variance.
pub fn lag1_autocorrelation(x: &[f64]) -> Option<f64> {
    if x.len() < 3 {
        return None;
    }
    let m = mean(x);
    let den: f64 = x.iter().map(|v| (v - m).powi(2)).sum();
    if den <= 0.0 {
        return None;
    }
    let num: f64 = x.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    Some(num / den)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use rand_distr::{Distribution, Normal as RNormal};

    #[test]
    fn t_quantiles_match_the_table() {
        assert!((t_quantile(0.95, 7.0) - 1.894579).abs() < 1e-5);
        assert!((t_quantile(0.975, 7.0) - 2.364624).abs() < 1e-5);
    }

    #[test]
    fn the_paired_t_interval_is_mean_plus_minus_t_times_se() {
        let d = [0.1, 0.12, 0.08, 0.11, 0.09, 0.1, 0.13, 0.07];
        let s = Shift::paired(&d).unwrap();
        assert_eq!(s.method, ShiftMethod::T);
        let se = variance(&d).sqrt() / 8f64.sqrt();
        assert!((s.estimate - 0.1).abs() < 1e-12);
        assert!((s.hi - s.estimate - 1.894579 * se).abs() < 1e-6);
        // Wholly past 0.05: p_above(0.05) below 5% exactly when lo > 0.05.
        assert!(s.lo > 0.05 && s.p_above(0.05) < 0.05);
        assert!(s.p_below(0.05) > 0.95);
    }

    #[test]
    fn the_90_interval_covers_about_90_percent() {
        let mut rng = SmallRng::seed_from_u64(1);
        let normal = RNormal::new(0.2, 0.1).unwrap();
        let mut covered = 0;
        let mut below = 0;
        for _ in 0..2000 {
            let d: Vec<f64> = (0..8).map(|_| normal.sample(&mut rng)).collect();
            let s = Shift::paired(&d).unwrap();
            covered += usize::from(s.lo <= 0.2 && 0.2 <= s.hi);
            below += usize::from(s.p_above(0.2) < 0.05);
        }
        assert!((1720..=1880).contains(&covered), "{covered} of 2000");
        // Under the null the one-sided test rejects about 5% (whatever method was chosen).
        assert!((60..=150).contains(&below), "{below} of 2000");
    }

    #[test]
    fn wilcoxon_exact_p_values_match_the_null_distribution() {
        // n = 6, every d positive: W+ = 21, the most extreme of 64 outcomes.
        let d = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert!((wilcoxon_upper(&d, 0.0) - 1.0 / 64.0).abs() < 1e-12);
        // One negative at the smallest rank: W+ = 20, P(W+ ≥ 20) = 2/64.
        let d = [-1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert!((wilcoxon_upper(&d, 0.0) - 2.0 / 64.0).abs() < 1e-12);
        let null = signed_rank_null(6);
        assert!((null.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(null.len(), 22);
    }

    #[test]
    fn skewed_differences_take_hodges_lehmann_with_a_bracketing_interval() {
        let d = [0.01, 0.02, 0.015, 0.012, 0.018, 0.011, 0.6, 0.014];
        let s = Shift::paired(&d).unwrap();
        assert_eq!(s.method, ShiftMethod::HodgesLehmann);
        assert!(s.lo <= s.estimate && s.estimate <= s.hi);
        // The outlier does not drag the estimate as the mean (0.0875) is dragged.
        assert!(s.estimate < 0.03, "{s:?}");
        assert!(s.p_above(0.0) < 0.01);
    }

    #[test]
    fn welch_matches_a_hand_computation() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [3.0, 4.0, 5.0, 6.0, 7.0];
        let s = Shift::unpaired(&a, &b).unwrap();
        assert!((s.estimate - 2.5).abs() < 1e-12);
        let (va, vb) = (variance(&a) / 4.0, variance(&b) / 5.0);
        let df = (va + vb).powi(2) / (va * va / 3.0 + vb * vb / 4.0);
        assert!((s.hi - 2.5 - t_quantile(0.95, df) * (va + vb).sqrt()).abs() < 1e-9);
        assert!(Shift::unpaired(&a[..1], &b).is_none());
    }

    #[test]
    fn constant_differences_are_decided_exactly() {
        let s = Shift::paired(&[0.125, 0.125, 0.125]).unwrap();
        assert_eq!((s.lo, s.hi), (0.125, 0.125));
        assert_eq!(s.p_above(0.0625), 0.0);
        assert_eq!(s.p_above(0.125), 1.0);
        assert_eq!(s.p_below(0.25), 0.0);
    }

    #[test]
    fn holm_and_bh_match_textbook_examples() {
        let p = [0.01, 0.04, 0.03, 0.005];
        let h = holm(&p);
        let want = [0.03, 0.06, 0.06, 0.02];
        for (x, y) in h.iter().zip(want) {
            assert!((x - y).abs() < 1e-12, "{h:?}");
        }
        let q = benjamini_hochberg(&p);
        let want = [0.02, 0.04, 0.04, 0.02];
        for (x, y) in q.iter().zip(want) {
            assert!((x - y).abs() < 1e-12, "{q:?}");
        }
        assert_eq!(holm(&[f64::NAN]), vec![1.0]);
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn the_needed_pairs_are_the_fewest_whose_interval_clears_the_band() {
        let around = |spread: f64| -> Vec<f64> {
            [-1.0, 1.0, -0.5, 0.5, 0.0]
                .iter()
                .map(|k| 0.1 + k * spread)
                .collect()
        };
        let (wide, narrow) = (
            Shift::paired(&around(0.1)).unwrap(),
            Shift::paired(&around(0.01)).unwrap(),
        );
        let edge = 0.05f64.ln_1p();
        let (w, n) = (
            wide.needed(edge, 0.05).unwrap(),
            narrow.needed(edge, 0.05).unwrap(),
        );
        assert!(w > n, "{w} {n}");
        let half =
            |s: &Shift, n: usize| t_quantile(0.95, n as f64 - 1.0) * s.spread / (n as f64).sqrt();
        let distance = 0.1 - edge;
        assert!(half(&wide, w) <= distance && half(&wide, w - 1) > distance);
        // Right at the edge nothing decides it.
        let at = Shift::paired(&[edge - 0.01, edge + 0.01, edge]).unwrap();
        assert!(at.needed(edge, 0.05).is_none_or(|n| n > 1000));
    }

    #[test]
    fn error_rates_double_is_worse_and_zero_against_one_is_not() {
        let a = vec![(100, 10_000); 8];
        let b = vec![(200, 10_000); 8];
        let t = RateTest::new(&a, &b, 0.05).unwrap();
        assert!((t.diff - 0.01).abs() < 1e-12);
        assert!(t.p_worse < 1e-6 && !t.equivalent());
        let clean = vec![(0, 10_000); 8];
        let mut one = clean.clone();
        one[0] = (1, 10_000);
        let t = RateTest::new(&clean, &one, 0.05).unwrap();
        assert!((t.margin - 3.0 / 80_000.0).abs() < 1e-15);
        assert!(t.p_worse > 0.05, "{t:?}");
        // Overdispersed runs widen the interval.
        let steady = RateTest::new(&[(100, 10_000); 4], &[(130, 10_000); 4], 0.05).unwrap();
        let wild = RateTest::new(
            &[(20, 10_000), (180, 10_000), (40, 10_000), (160, 10_000)],
            &[(130, 10_000); 4],
            0.05,
        )
        .unwrap();
        assert!(wild.dispersion_a > 10.0 && steady.dispersion_a == 1.0);
        assert!(wild.hi - wild.lo > steady.hi - steady.lo);
        assert!(RateTest::new(&[], &b, 0.05).is_none());
    }

    #[test]
    fn lag1_autocorrelation_reads_trends_and_alternation() {
        assert!(lag1_autocorrelation(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap() > 0.4);
        assert!(lag1_autocorrelation(&[1.0, -1.0, 1.0, -1.0, 1.0, -1.0]).unwrap() < -0.7);
        assert!(lag1_autocorrelation(&[1.0, 1.0, 1.0]).is_none());
    }
}
