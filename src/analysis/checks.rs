//! The soak checks (docs/checks.md): leaks of memory, fds, threads and sessions, latency and
//! error drift over a steady window, the server's CPU at the knee, and generator-bound steps,
//! each judged `pass` / `warn` / `fail` / `skipped` with a one-sentence reason, plus the robust
//! slope (Theil–Sen with Sen's confidence interval) they stand on. Pure functions over plain
//! slices of `(t_s, value)` samples: nothing here samples a process, reads files or prints.

use serde::{Deserialize, Serialize};

/// Shortest steady window, in seconds, a leak or drift slope is judged on; shorter: `skipped`.
pub const DEFAULT_MIN_WINDOW_S: f64 = 120.0;
/// memory_leak's limit: RSS growth of the lower envelope, MiB per minute.
pub const DEFAULT_MEMORY_LIMIT_MIB_PER_MIN: f64 = 1.0;
/// fd_leak's and thread_leak's limit: count growth per minute.
pub const DEFAULT_COUNT_LIMIT_PER_MIN: f64 = 5.0;
/// session_leak's limit: growth of the sessions the server holds beyond the client's, per minute.
pub const DEFAULT_SESSION_LIMIT_PER_MIN: f64 = 1.0;
/// latency_drift's limit: the fitted rise of p99 over the window, a fraction of its fitted start.
pub const DEFAULT_LATENCY_MAX_RISE: f64 = 0.2;
/// latency_drift: the least rise (ms) over the window that fails, whatever its share of the
/// start: a shared machine's scheduling alone moves a sub-millisecond p99 by a few
/// milliseconds (seen: 0.3 to 3 ms over two minutes beside a build), which no user acts on.
pub const LATENCY_DRIFT_FLOOR_MS: f64 = 5.0;
/// error_drift's limit: the fitted rise of the error rate over the window, percentage points.
pub const DEFAULT_ERROR_MAX_RISE_PP: f64 = 1.0;
/// cpu_ceiling: the server counts as CPU-bound at this fraction of `cores × 100%` or above.
pub const CPU_BOUND_FRACTION: f64 = 0.9;
/// memory_leak's lower envelope: the minimum RSS sample of each window this long, in seconds,
/// so a garbage-collected heap's sawtooth (a period up to this long) fits as its floor; a
/// steady window shorter than [`ENVELOPE_POINTS`] of them takes shorter windows (at least a
/// second), so that it still has that many points to fit.
pub const ENVELOPE_WINDOW_S: f64 = 10.0;
/// The fewest envelope points a steady window of any length is cut into.
pub const ENVELOPE_POINTS: f64 = 12.0;
/// A leak came back in the cool-down when the level at the cool-down's end (the minimum of its
/// last [`ENVELOPE_WINDOW_S`]) is within this fraction of the steady window's fitted growth of
/// the fitted start level (or within the floor of the check, whichever is larger).
pub const RECOVERY_FRACTION: f64 = 0.1;
/// memory_leak's floor of the cool-down tolerance, MiB.
pub const MEMORY_RECOVERY_FLOOR_MIB: f64 = 1.0;
/// fd_leak's, thread_leak's and session_leak's floor of the cool-down tolerance, a count.
pub const COUNT_RECOVERY_FLOOR: f64 = 1.0;
/// Theil–Sen fits at most this many points, taken evenly from the series (a 1-hour soak at one
/// sample a second is 3,600), so its pairwise slopes stay about half a million.
pub const MAX_SLOPE_POINTS: usize = 1000;

const MIB: f64 = 1024.0 * 1024.0;
/// The standard normal quantile of 0.975: the two-sided 95% interval.
const Z_975: f64 = 1.959_963_984_540_054;
/// Each per-minute point of latency_drift and error_drift stands for a minute around its `t_s`.
const MINUTE_S: f64 = 60.0;

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Pass,
    Warn,
    Fail,
    Skipped,
}

impl Check {
    /// Its name as gates and reports show it: `latency_drift`, or `latency_drift{op=search}`
    /// for one operation's.
    pub fn label(&self) -> String {
        match &self.op {
            Some(op) => format!("{}{{op={op}}}", self.id),
            None => self.id.clone(),
        }
    }
}

impl CheckStatus {
    /// Every status, in the order a gate's word is looked up in.
    pub const ALL: [CheckStatus; 4] = [
        CheckStatus::Pass,
        CheckStatus::Warn,
        CheckStatus::Fail,
        CheckStatus::Skipped,
    ];

    /// The word summary.json and gates use.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
            CheckStatus::Skipped => "skipped",
        }
    }
}

/// One check as summary.json writes it: `{id, status, value, unit, reason, ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `memory_leak`, `fd_leak`, `thread_leak`, `session_leak`, `latency_drift`,
    /// `error_drift`, `cpu_ceiling` or `generator`.
    pub id: String,
    pub status: CheckStatus,
    /// The judged figure, in `unit` (a slope per minute for leaks and drifts); `null` when
    /// skipped for want of data.
    pub value: Option<f64>,
    /// `MiB/min`, `fds/min`, `threads/min`, `sessions/min`, `ms/min`, `pp/min`, `%`, `steps`.
    pub unit: Option<String>,
    /// One sentence naming the figure and its unit.
    pub reason: String,
    /// 95% confidence interval of `value`, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<[f64; 2]>,
    /// memory_leak only: KiB per 1,000 requests over the steady window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kib_per_1k_requests: Option<f64>,
    /// latency_drift of one operation (the check without it is the whole step's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
}

impl Check {
    fn new(id: &str, status: CheckStatus, reason: String) -> Self {
        Check {
            id: id.to_string(),
            status,
            value: None,
            unit: None,
            reason,
            ci: None,
            kib_per_1k_requests: None,
            op: None,
        }
    }

    fn with_value(mut self, value: f64, unit: &str) -> Self {
        self.value = Some(value);
        self.unit = Some(unit.to_string());
        self
    }

    fn with_ci(mut self, lo: f64, hi: f64) -> Self {
        self.ci = Some([lo, hi]);
        self
    }
}

/// A robust slope per second of `t`, with Sen's 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slope {
    /// The median of the pairwise slopes.
    pub per_s: f64,
    pub lo_per_s: f64,
    pub hi_per_s: f64,
    /// Points fitted (after the even subsample to [`MAX_SLOPE_POINTS`]).
    pub points: usize,
}

/// Theil–Sen: the median of the slopes between every pair of points with distinct `t`, with
/// Sen's nonparametric 95% CI: the ranks `(N − C)/2` and `(N + C)/2 + 1` of the `N` sorted
/// slopes, `C = 1.96·√Var(S)`, Var(S) Kendall's variance of S with its corrections for tied
/// values and tied times (ranks between two slopes interpolate). Points with a non-finite
/// coordinate are dropped; above [`MAX_SLOPE_POINTS`] an even subsample (in time order) is
/// fitted. `None` with fewer than 3 points or every `t` equal.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<Slope> {
    let mut sorted: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(t, y)| t.is_finite() && y.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fitted = even_subsample(&sorted, MAX_SLOPE_POINTS);
    let n = fitted.len();
    if n < 3 {
        return None;
    }
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    for (i, &(ti, yi)) in fitted.iter().enumerate() {
        for &(tj, yj) in &fitted[i + 1..] {
            if tj != ti {
                slopes.push((yj - yi) / (tj - ti));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let count = slopes.len() as f64;
    let half_width = Z_975 * kendall_s_variance(&fitted).sqrt();
    // 1-based ranks (N − C)/2 and (N + C)/2 + 1, as 0-based positions.
    let lo_rank = (count - half_width) / 2.0 - 1.0;
    let hi_rank = (count + half_width) / 2.0;
    Some(Slope {
        per_s: at_rank(&slopes, (count - 1.0) / 2.0),
        lo_per_s: at_rank(&slopes, lo_rank),
        hi_per_s: at_rank(&slopes, hi_rank),
        points: n,
    })
}

/// At most `max` points, evenly spaced by index from first to last.
fn even_subsample(sorted: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if sorted.len() <= max {
        return sorted.to_vec();
    }
    let last = (sorted.len() - 1) as f64;
    (0..max)
        .map(|k| sorted[(k as f64 * last / (max - 1) as f64).round() as usize])
        .collect()
}

/// The value at a fractional 0-based position of a sorted slice, clamped to its ends.
fn at_rank(sorted: &[f64], position: f64) -> f64 {
    let position = position.clamp(0.0, (sorted.len() - 1) as f64);
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let fraction = position - below as f64;
    sorted[below] + (sorted[above] - sorted[below]) * fraction
}

/// Kendall's variance of S with ties in both coordinates (Kendall, Rank Correlation Methods).
fn kendall_s_variance(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let times: Vec<f64> = points.iter().map(|p| p.0).collect();
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    let t_ties = tie_sums(times);
    let y_ties = tie_sums(values);
    let base = (n * (n - 1.0) * (2.0 * n + 5.0) - t_ties.cubic - y_ties.cubic) / 18.0;
    let triple = t_ties.triple * y_ties.triple / (9.0 * n * (n - 1.0) * (n - 2.0));
    let double = t_ties.double * y_ties.double / (2.0 * n * (n - 1.0));
    (base + triple + double).max(0.0)
}

/// Sums over the groups of equal values of sizes `u`: `u(u−1)(2u+5)`, `u(u−1)(u−2)`, `u(u−1)`.
struct TieSums {
    cubic: f64,
    triple: f64,
    double: f64,
}

fn tie_sums(mut values: Vec<f64>) -> TieSums {
    values.sort_by(f64::total_cmp);
    let mut sums = TieSums {
        cubic: 0.0,
        triple: 0.0,
        double: 0.0,
    };
    for group in values.chunk_by(|a, b| a == b) {
        let u = group.len() as f64;
        sums.cubic += u * (u - 1.0) * (2.0 * u + 5.0);
        sums.triple += u * (u - 1.0) * (u - 2.0);
        sums.double += u * (u - 1.0);
    }
    sums
}

/// The Theil–Sen line's value at `t`: its intercept is the median of `y − slope·t`.
fn fitted_at(points: &[(f64, f64)], slope_per_s: f64, t: f64) -> f64 {
    let mut offsets: Vec<f64> = points
        .iter()
        .filter(|(t, y)| t.is_finite() && y.is_finite())
        .map(|(pt, y)| y - slope_per_s * pt)
        .collect();
    offsets.sort_by(f64::total_cmp);
    at_rank(&offsets, (offsets.len() - 1) as f64 / 2.0) + slope_per_s * t
}

/// The samples of a leak check.
#[derive(Clone, Copy, Debug)]
pub struct LeakInput<'a> {
    /// (t_s, value) samples of the steady window (after warm-up, under constant load).
    pub steady: &'a [(f64, f64)],
    /// (t_s, value) samples of the cool-down (no load), empty when none was run.
    pub cooldown: &'a [(f64, f64)],
    /// Requests completed in the steady window (memory_leak's per-1,000-requests figure).
    pub requests: Option<u64>,
    /// Shorter steady window (first to last sample): `skipped`. [`DEFAULT_MIN_WINDOW_S`].
    pub min_window_s: f64,
}

/// The lower envelope: the minimum sample (its time and value) of each window (of
/// [`ENVELOPE_WINDOW_S`], shorter for a short series: [`ENVELOPE_POINTS`]) from the first
/// sample on; a trailing window under half as long is dropped (its
/// minimum may miss the sawtooth's floor) unless it is the only one.
fn lower_envelope(samples: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(t, y)| t.is_finite() && y.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (Some(&(t0, _)), Some(&(t_end, _))) = (sorted.first(), sorted.last()) else {
        return Vec::new();
    };
    let width = ((t_end - t0) / ENVELOPE_POINTS).clamp(1.0, ENVELOPE_WINDOW_S);
    let window_of = |t: f64| ((t - t0) / width).floor();
    let mut envelope: Vec<(f64, f64)> = Vec::new();
    let mut last_window = f64::NAN;
    for &(t, y) in &sorted {
        let window = window_of(t);
        match envelope.last_mut() {
            Some(floor) if window == last_window => {
                if y < floor.1 {
                    *floor = (t, y);
                }
            }
            _ => envelope.push((t, y)),
        }
        last_window = window;
    }
    let trailing_start = t0 + last_window * width;
    let trailing_span = t_end - trailing_start;
    if envelope.len() > 1 && trailing_span < width / 2.0 {
        envelope.pop();
    }
    envelope
}

/// The level at the cool-down's end: its minimum over the last [`ENVELOPE_WINDOW_S`].
fn cooldown_end_level(cooldown: &[(f64, f64)]) -> Option<f64> {
    let finite = || {
        cooldown
            .iter()
            .filter(|(t, y)| t.is_finite() && y.is_finite())
    };
    let end = finite().map(|p| p.0).max_by(f64::total_cmp)?;
    finite()
        .filter(|(t, _)| *t >= end - ENVELOPE_WINDOW_S)
        .map(|p| p.1)
        .min_by(f64::total_cmp)
}

/// What differs between the leak checks.
struct LeakKind<'s> {
    id: &'s str,
    unit: &'s str,
    /// What grew, as the reason names it: "RSS", "open fds".
    what: &'s str,
    /// Reported units per sample unit (1/MiB for RSS bytes).
    scale: f64,
    /// The unit of a level, as the reason names it: "MiB", "fds".
    level_unit: &'s str,
    /// The cool-down tolerance's floor, in sample units.
    recovery_floor: f64,
    /// Fit the lower envelope instead of every sample.
    envelope: bool,
}

/// A judged leak, with the fitted growth over the steady window in sample units.
struct JudgedLeak {
    check: Check,
    growth: Option<f64>,
}

fn judge_leak(kind: &LeakKind<'_>, input: &LeakInput<'_>, limit_per_min: f64) -> JudgedLeak {
    let skipped = |reason: String| JudgedLeak {
        check: Check::new(kind.id, CheckStatus::Skipped, reason),
        growth: None,
    };
    let times = || {
        input
            .steady
            .iter()
            .filter(|(t, y)| t.is_finite() && y.is_finite())
            .map(|p| p.0)
    };
    let samples = times().count();
    let start = times().min_by(f64::total_cmp).unwrap_or(0.0);
    let span = times().max_by(f64::total_cmp).unwrap_or(0.0) - start;
    // Each sample stands for its interval, so n samples cover one spacing more than their
    // span (a sample a second over a 120 s step spans 119 s).
    let window = match samples {
        0 | 1 => 0.0,
        n => span * n as f64 / (n - 1) as f64,
    };
    // The window first: it is what a user changes (a longer step, `--leak-min-window`).
    if window < input.min_window_s {
        return skipped(format!(
            "the steady window was {} s, shorter than the {} s a slope of {} needs",
            num(window),
            num(input.min_window_s),
            kind.what
        ));
    }
    if samples < 3 {
        return skipped(format!(
            "{} samples in the steady window: {samples}, of the 3 a slope needs",
            kind.what
        ));
    }
    let fit_points = if kind.envelope {
        lower_envelope(input.steady)
    } else {
        input.steady.to_vec()
    };
    let Some(slope) = theil_sen(&fit_points) else {
        return skipped(format!(
            "the {} {} points of the steady window give no slope",
            fit_points.len(),
            kind.what
        ));
    };
    let per_min = |per_s: f64| per_s * 60.0 * kind.scale;
    let (value, lo, hi) = (
        per_min(slope.per_s),
        per_min(slope.lo_per_s),
        per_min(slope.hi_per_s),
    );
    let unit = kind.unit;
    let trend = format!(
        "{} {} {} {unit} (95% CI {} to {})",
        kind.what,
        if value >= 0.0 { "grew" } else { "changed by" },
        num(value),
        num(lo),
        num(hi)
    );
    let judged = |status: CheckStatus, reason: String| JudgedLeak {
        check: Check::new(kind.id, status, reason)
            .with_value(value, unit)
            .with_ci(lo, hi),
        growth: Some(slope.per_s * span),
    };
    if lo <= limit_per_min {
        let within = format!("{trend}, within the {} {unit} limit", num(limit_per_min));
        return judged(CheckStatus::Pass, within);
    }
    let Some(end_level) = cooldown_end_level(input.cooldown) else {
        let reason = format!(
            "{trend}, above the {} {unit} limit, and no cool-down was run to show it return",
            num(limit_per_min)
        );
        return judged(CheckStatus::Fail, reason);
    };
    let start_level = fitted_at(&fit_points, slope.per_s, start);
    let growth = slope.per_s * span;
    let tolerance = (RECOVERY_FRACTION * growth).max(kind.recovery_floor);
    let above_start = (end_level - start_level) * kind.scale;
    if end_level <= start_level + tolerance {
        let reason = format!(
            "{} grew {} {unit} under load and came back in the cool-down, ending {} {} from its start level",
            kind.what,
            num(value),
            num(above_start),
            kind.level_unit
        );
        return judged(CheckStatus::Warn, reason);
    }
    let reason = format!(
        "{trend}, above the {} {unit} limit, and was still {} {} above its start level at the end of the cool-down",
        num(limit_per_min),
        num(above_start),
        kind.level_unit
    );
    judged(CheckStatus::Fail, reason)
}

/// memory_leak on RSS bytes: Theil–Sen on the lower envelope ([`ENVELOPE_WINDOW_S`] minima),
/// value in MiB/min with its CI. `fail` when the CI's lower bound is above the limit and the
/// cool-down did not bring RSS back (within [`RECOVERY_FRACTION`] of the growth or
/// [`MEMORY_RECOVERY_FLOOR_MIB`] of the fitted start level), or when no cool-down was run;
/// `warn` when it came back; `pass` otherwise; `skipped` under `min_window_s`.
pub fn memory_leak(input: &LeakInput<'_>, limit_mib_per_min: f64) -> Check {
    let kind = LeakKind {
        id: "memory_leak",
        unit: "MiB/min",
        what: "RSS",
        scale: 1.0 / MIB,
        level_unit: "MiB",
        recovery_floor: MEMORY_RECOVERY_FLOOR_MIB * MIB,
        envelope: true,
    };
    let JudgedLeak { mut check, growth } = judge_leak(&kind, input, limit_mib_per_min);
    check.kib_per_1k_requests = match (growth, input.requests) {
        (Some(bytes), Some(requests)) if requests > 0 => {
            Some(bytes / 1024.0 / (requests as f64 / 1000.0))
        }
        _ => None,
    };
    check
}

/// fd_leak / thread_leak: the rule of [`memory_leak`] on counts, fitted on every sample (no
/// envelope: a count has no collector's sawtooth, and the fit's tie corrections keep a
/// stepping counter's median and CI sound), unit e.g. `fds/min`, the cool-down tolerance's
/// floor [`COUNT_RECOVERY_FLOOR`]. `what` names the count in the reason ("open fds").
pub fn count_leak(
    id: &str,
    unit: &str,
    what: &str,
    input: &LeakInput<'_>,
    limit_per_min: f64,
) -> Check {
    let level_unit = unit.strip_suffix("/min").unwrap_or(unit);
    let kind = LeakKind {
        id,
        unit,
        what,
        scale: 1.0,
        level_unit,
        recovery_floor: COUNT_RECOVERY_FLOOR,
        envelope: false,
    };
    judge_leak(&kind, input, limit_per_min).check
}

/// session_leak on samples of (t_s, sessions the server holds − sessions the client holds
/// open): the rule of [`count_leak`], unit `sessions/min`; `skipped` when the server reports
/// no sessions (empty steady samples).
pub fn session_leak(input: &LeakInput<'_>, limit_per_min: f64) -> Check {
    if input.steady.is_empty() {
        return Check::new(
            "session_leak",
            CheckStatus::Skipped,
            "the server reports no session count, so no excess of its sessions over the client's can be followed".to_string(),
        );
    }
    let kind = LeakKind {
        id: "session_leak",
        unit: "sessions/min",
        what: "server sessions beyond the client's",
        scale: 1.0,
        level_unit: "sessions",
        recovery_floor: COUNT_RECOVERY_FLOOR,
        envelope: false,
    };
    judge_leak(&kind, input, limit_per_min).check
}

/// A drift fitted on per-minute points: the window (first to last minute, whole minutes) is
/// checked first; then the slope per minute with its CI, and the fitted value at the first and
/// last minute.
struct Drift {
    slope: Slope,
    start: f64,
    rise: f64,
}

/// `Err` is the skipped check's reason.
fn fit_drift(points: &[(f64, f64)], min_window_s: f64, what: &str) -> Result<Drift, String> {
    let finite: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(t, y)| t.is_finite() && y.is_finite())
        .collect();
    let first = finite.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let last = finite.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    // Each point stands for a window as long as the points' spacing (a minute, or shorter
    // for a short steady window), so the points cover one spacing more than their span.
    let n = finite.len() as f64;
    let window = match finite.len() {
        0 => 0.0,
        1 => MINUTE_S.min(min_window_s),
        _ => (last - first) * n / (n - 1.0),
    };
    if window < min_window_s {
        return Err(format!(
            "the steady window was {} s, shorter than the {} s a slope of {what} needs",
            num(window),
            num(min_window_s)
        ));
    }
    if finite.len() < 3 {
        return Err(format!(
            "windows of {what} in the steady window: {}, of the 3 a slope needs",
            finite.len()
        ));
    }
    let slope = theil_sen(&finite).ok_or_else(|| format!("the {what} minutes give no slope"))?;
    let start = fitted_at(&finite, slope.per_s, first);
    Ok(Drift {
        slope,
        start,
        rise: slope.per_s * (last - first),
    })
}

/// latency_drift on per-minute p99 `(t_s of the minute's middle, p99_ms)` of the steady window:
/// value in ms/min with its CI. `fail` when the CI's lower bound is above 0 and the fitted rise
/// from the first to the last minute exceeds `max_rise` of the fitted start value; `warn` when
/// significant but smaller; `pass` otherwise; `skipped` under `min_window_s` (the minutes'
/// span plus one minute) or with fewer than 3 minutes.
pub fn latency_drift(per_minute_p99_ms: &[(f64, f64)], min_window_s: f64, max_rise: f64) -> Check {
    const ID: &str = "latency_drift";
    let drift = match fit_drift(per_minute_p99_ms, min_window_s, "p99") {
        Ok(drift) => drift,
        Err(reason) => return Check::new(ID, CheckStatus::Skipped, reason),
    };
    let per_min = |per_s: f64| per_s * 60.0;
    let (value, lo, hi) = (
        per_min(drift.slope.per_s),
        per_min(drift.slope.lo_per_s),
        per_min(drift.slope.hi_per_s),
    );
    let relative = if drift.start > 0.0 {
        drift.rise / drift.start
    } else if drift.rise > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let trend = format!(
        "p99 drifted {} ms/min (95% CI {} to {}), {} over the window from a fitted {} ms",
        num(value),
        num(lo),
        num(hi),
        signed_pct(relative),
        num(drift.start)
    );
    let limit = format!("the {} limit", signed_pct(max_rise));
    let (status, reason) = if lo <= 0.0 {
        (CheckStatus::Pass, format!("{trend}: no significant rise"))
    } else if relative > max_rise && drift.rise > LATENCY_DRIFT_FLOOR_MS {
        (CheckStatus::Fail, format!("{trend}, past {limit}"))
    } else if relative > max_rise {
        let floor = num(LATENCY_DRIFT_FLOOR_MS);
        let why = format!(
            "{trend}: a rise of {} ms, under the {floor} ms a drift needs",
            num(drift.rise)
        );
        (CheckStatus::Warn, why)
    } else {
        (CheckStatus::Warn, format!("{trend}, within {limit}"))
    };
    Check::new(ID, status, reason)
        .with_value(value, "ms/min")
        .with_ci(lo, hi)
}

/// error_drift on per-minute error rates `(t_s of the minute's middle, rate in 0..1)`: value in
/// percentage points per minute with its CI. A window with no errors at all passes; `fail` when
/// the CI's lower bound is above 0 and the fitted rise exceeds `max_rise_pp`; `warn` when
/// significant but smaller; `pass` otherwise; `skipped` as [`latency_drift`].
pub fn error_drift(
    per_minute_error_rate: &[(f64, f64)],
    min_window_s: f64,
    max_rise_pp: f64,
) -> Check {
    const ID: &str = "error_drift";
    let drift = match fit_drift(per_minute_error_rate, min_window_s, "error rate") {
        Ok(drift) => drift,
        Err(reason) => return Check::new(ID, CheckStatus::Skipped, reason),
    };
    let minutes = per_minute_error_rate.len();
    if per_minute_error_rate.iter().all(|p| p.1 == 0.0) {
        let reason = format!("no errors in the {minutes} minutes of the steady window: 0 pp/min");
        return Check::new(ID, CheckStatus::Pass, reason)
            .with_value(0.0, "pp/min")
            .with_ci(0.0, 0.0);
    }
    let per_min_pp = |per_s: f64| per_s * 60.0 * 100.0;
    let (value, lo, hi) = (
        per_min_pp(drift.slope.per_s),
        per_min_pp(drift.slope.lo_per_s),
        per_min_pp(drift.slope.hi_per_s),
    );
    let rise_pp = drift.rise * 100.0;
    let trend = format!(
        "the error rate drifted {} pp/min (95% CI {} to {}), {} pp over the window",
        num(value),
        num(lo),
        num(hi),
        num(rise_pp)
    );
    let limit = format!("the {} pp limit", num(max_rise_pp));
    let (status, reason) = if lo <= 0.0 {
        (CheckStatus::Pass, format!("{trend}: no significant rise"))
    } else if rise_pp > max_rise_pp {
        (CheckStatus::Fail, format!("{trend}, past {limit}"))
    } else {
        (CheckStatus::Warn, format!("{trend}, within {limit}"))
    };
    Check::new(ID, status, reason)
        .with_value(value, "pp/min")
        .with_ci(lo, hi)
}

/// cpu_ceiling: at the knee step, whether the server's CPU (percent of one core) reached
/// [`CPU_BOUND_FRACTION`] of `cores × 100%` (`pass`: the knee is the CPU) or not (`warn`: the
/// limit is elsewhere); `skipped` with no knee, no CPU figure or no core count. Also the phrase
/// the knee line appends ("with the server at 198% CPU of 2 cores"), wherever the CPU is known.
pub fn cpu_ceiling(
    knee_step: Option<u32>,
    server_cpu_pct: Option<f64>,
    cores: Option<u32>,
) -> (Check, Option<String>) {
    const ID: &str = "cpu_ceiling";
    let Some(step) = knee_step else {
        let reason = "no knee: no step saturated, so there is no step to judge the server's CPU at";
        return (
            Check::new(ID, CheckStatus::Skipped, reason.to_string()),
            None,
        );
    };
    let Some(cpu) = server_cpu_pct.filter(|c| c.is_finite()) else {
        let reason = format!("no CPU figure for the server at the knee (step {step})");
        return (Check::new(ID, CheckStatus::Skipped, reason), None);
    };
    let cpu_text = format!("{}% CPU", cpu.round());
    let Some(cores) = cores.filter(|&c| c > 0) else {
        let reason = format!(
            "the server was at {cpu_text} at the knee (step {step}), but its core count is unknown"
        );
        let check = Check::new(ID, CheckStatus::Skipped, reason).with_value(cpu, "%");
        return (check, Some(format!("with the server at {cpu_text}")));
    };
    let of_cores = format!(
        "{cpu_text} of {cores} {}",
        if cores == 1 { "core" } else { "cores" }
    );
    let (status, reason) = if cpu >= CPU_BOUND_FRACTION * f64::from(cores) * 100.0 {
        (
            CheckStatus::Pass,
            format!("the server was CPU-bound at the knee (step {step}): {of_cores}"),
        )
    } else {
        (
            CheckStatus::Warn,
            format!(
                "at the knee (step {step}) the server was at {of_cores}: the limit is not CPU (a lock, a pool, a downstream call)"
            ),
        )
    };
    let check = Check::new(ID, status, reason).with_value(cpu, "%");
    (check, Some(format!("with the server at {of_cores}")))
}

/// generator: the steps that were generator-bound, `(step number, reason)`: `fail` listing
/// them with the first one's reason, `pass` when none. Value: how many steps.
pub fn generator(bound_steps: &[(u32, String)]) -> Check {
    const ID: &str = "generator";
    let count = bound_steps.len();
    let Some((first_step, first_reason)) = bound_steps.first() else {
        let reason = "0 steps were generator-bound: every step measured the server".to_string();
        return Check::new(ID, CheckStatus::Pass, reason).with_value(0.0, "steps");
    };
    let listed: Vec<String> = bound_steps.iter().map(|(s, _)| s.to_string()).collect();
    let reason = format!(
        "{count} {} generator-bound (step{} {}), so {} measured the generator, not the server; step {first_step}: {first_reason}",
        if count == 1 { "step was" } else { "steps were" },
        if count == 1 { "" } else { "s" },
        listed.join(", "),
        if count == 1 { "it" } else { "they" },
    );
    // A warning, not a failure: the server did nothing wrong, the measurement of those
    // steps is mcpload's (a loaded CI runner must not fail a server for it).
    Check::new(ID, CheckStatus::Warn, reason).with_value(count as f64, "steps")
}

/// A figure to three significant digits (whole numbers from 100 up).
fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 6) as usize;
    let text = format!("{x:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A fraction as a signed percentage: `+23%`.
fn signed_pct(fraction: f64) -> String {
    let pct = fraction * 100.0;
    if pct.is_infinite() {
        return "an unbounded rise".to_string();
    }
    format!("{}{}%", if pct >= 0.0 { "+" } else { "" }, num(pct))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, Normal};

    fn noise(seed: u64, sd: f64) -> impl FnMut() -> f64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let normal = Normal::new(0.0, sd).unwrap();
        move || normal.sample(&mut rng)
    }

    fn least_squares_slope(points: &[(f64, f64)]) -> f64 {
        let n = points.len() as f64;
        let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let cov: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_y)).sum();
        let var: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
        cov / var
    }

    fn within(value: f64, truth: f64, rel: f64) -> bool {
        (value - truth).abs() <= rel * truth.abs()
    }

    #[test]
    fn theil_sen_is_exact_on_a_clean_line() {
        let line: Vec<(f64, f64)> = (0..50).map(|i| (i as f64, 3.0 + 0.5 * i as f64)).collect();
        let slope = theil_sen(&line).unwrap();
        assert!((slope.per_s - 0.5).abs() < 1e-12, "{slope:?}");
        assert!((slope.lo_per_s - 0.5).abs() < 1e-12, "{slope:?}");
        assert!((slope.hi_per_s - 0.5).abs() < 1e-12, "{slope:?}");
        assert_eq!(slope.points, 50);
    }

    #[test]
    fn theil_sen_shrugs_off_a_fifth_of_readings_gone_to_zero_where_least_squares_does_not() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut jitter = noise(8, 1.0);
        let points: Vec<(f64, f64)> = (0..500)
            .map(|i| {
                let t = i as f64;
                let dropout = rng.random_range(0.0..1.0) < 0.2;
                (
                    t,
                    if dropout {
                        0.0
                    } else {
                        1000.0 + 2.0 * t + jitter()
                    },
                )
            })
            .collect();
        let robust = theil_sen(&points).unwrap().per_s;
        let least_squares = least_squares_slope(&points);
        assert!(within(robust, 2.0, 0.05), "theil-sen {robust}");
        assert!(
            !within(least_squares, 2.0, 0.05),
            "least squares {least_squares}"
        );
    }

    #[test]
    fn theil_sen_interval_covers_the_true_slope_on_noisy_data() {
        let covered = (0..20)
            .filter(|&seed| {
                let mut jitter = noise(seed, 5.0);
                let points: Vec<(f64, f64)> = (0..120)
                    .map(|i| (i as f64, 0.1 * i as f64 + jitter()))
                    .collect();
                let slope = theil_sen(&points).unwrap();
                assert!(slope.lo_per_s <= slope.per_s && slope.per_s <= slope.hi_per_s);
                slope.lo_per_s <= 0.1 && 0.1 <= slope.hi_per_s
            })
            .count();
        assert!(
            covered >= 17,
            "the 95% interval covered the truth {covered} times in 20"
        );
    }

    #[test]
    fn theil_sen_interval_excludes_zero_on_a_clear_trend() {
        let mut jitter = noise(3, 2.0);
        let points: Vec<(f64, f64)> = (0..200)
            .map(|i| (i as f64, 0.2 * i as f64 + jitter()))
            .collect();
        let slope = theil_sen(&points).unwrap();
        assert!(slope.lo_per_s > 0.0, "{slope:?}");
        assert!(slope.hi_per_s > slope.lo_per_s, "{slope:?}");
    }

    #[test]
    fn theil_sen_fits_an_hour_of_seconds_on_an_even_subsample() {
        let mut jitter = noise(11, 1.0);
        let points: Vec<(f64, f64)> = (0..3600)
            .map(|i| (i as f64, 0.05 * i as f64 + jitter()))
            .collect();
        let slope = theil_sen(&points).unwrap();
        assert_eq!(slope.points, MAX_SLOPE_POINTS);
        assert!(within(slope.per_s, 0.05, 0.01), "{slope:?}");
        assert!(
            slope.lo_per_s <= 0.05 && 0.05 <= slope.hi_per_s,
            "{slope:?}"
        );
    }

    #[test]
    fn theil_sen_needs_three_points_at_two_times() {
        assert!(theil_sen(&[(0.0, 1.0), (1.0, 2.0)]).is_none());
        assert!(theil_sen(&[(5.0, 1.0), (5.0, 2.0), (5.0, 3.0)]).is_none());
        assert!(theil_sen(&[(0.0, 1.0), (1.0, f64::NAN), (2.0, 3.0)]).is_none());
        assert!(theil_sen(&[(0.0, 1.0), (0.0, 2.0), (1.0, 3.0)]).is_some());
    }

    #[test]
    fn theil_sen_on_a_stepping_counter_keeps_the_step_rate_inside_its_interval() {
        // 0,0,0,1,1,1,2,2,2,...: a third of a count per second, most slopes tied.
        let points: Vec<(f64, f64)> = (0..90).map(|i| (i as f64, (i / 3) as f64)).collect();
        let slope = theil_sen(&points).unwrap();
        assert!(within(slope.per_s, 1.0 / 3.0, 0.05), "{slope:?}");
        assert!(
            slope.lo_per_s <= 1.0 / 3.0 && 1.0 / 3.0 <= slope.hi_per_s,
            "{slope:?}"
        );
        assert!(slope.lo_per_s > 0.0, "{slope:?}");
        // One step in the window: the median is a small positive slope, the interval sound.
        let one_step: Vec<(f64, f64)> = (0..60)
            .map(|i| (i as f64, if i < 30 { 0.0 } else { 1.0 }))
            .collect();
        let slope = theil_sen(&one_step).unwrap();
        assert!(
            slope.lo_per_s <= slope.per_s && slope.per_s <= slope.hi_per_s,
            "{slope:?}"
        );
        assert!(slope.hi_per_s < 0.1, "{slope:?}");
        // A flat counter: every slope tied at 0, the interval too.
        let flat: Vec<(f64, f64)> = (0..60).map(|i| (i as f64, 4.0)).collect();
        let slope = theil_sen(&flat).unwrap();
        assert_eq!(
            (slope.per_s, slope.lo_per_s, slope.hi_per_s),
            (0.0, 0.0, 0.0)
        );
    }

    const BASE: f64 = 200.0 * MIB;

    /// RSS of a collected heap: a 20 MiB sawtooth of period 7 s over a floor rising
    /// `leak_mib_per_min`, with 0.2 MiB of noise, one sample a second.
    fn heap(range: std::ops::Range<u32>, leak_mib_per_min: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut jitter = noise(seed, 0.2 * MIB);
        range
            .map(|i| {
                let t = f64::from(i);
                let floor = BASE + leak_mib_per_min / 60.0 * t * MIB;
                (t, floor + 20.0 * MIB * (t % 7.0) / 7.0 + jitter())
            })
            .collect()
    }

    /// A cool-down after a 150 s leak of 2 MiB/min: the heap stays at its grown floor, or
    /// falls back to where it started.
    fn cooldown(stays_up: bool, seed: u64) -> Vec<(f64, f64)> {
        let grown = if stays_up {
            2.0 / 60.0 * 150.0 * MIB
        } else {
            0.0
        };
        heap(150..210, 0.0, seed)
            .into_iter()
            .map(|(t, y)| (t, y + grown))
            .collect()
    }

    fn leak_input<'a>(steady: &'a [(f64, f64)], cooldown: &'a [(f64, f64)]) -> LeakInput<'a> {
        LeakInput {
            steady,
            cooldown,
            requests: None,
            min_window_s: DEFAULT_MIN_WINDOW_S,
        }
    }

    #[test]
    fn memory_leak_passes_a_sawtooth_heap_without_a_trend() {
        let steady = heap(0..300, 0.0, 1);
        let check = memory_leak(&leak_input(&steady, &[]), DEFAULT_MEMORY_LIMIT_MIB_PER_MIN);
        assert_eq!(check.status, CheckStatus::Pass, "{}", check.reason);
        assert_eq!(check.unit.as_deref(), Some("MiB/min"));
        assert!(check.value.unwrap().abs() < 0.5, "{check:?}");
        assert!(check.reason.contains("MiB/min"), "{}", check.reason);
    }

    #[test]
    fn memory_leak_fails_growth_the_cool_down_did_not_give_back() {
        let steady = heap(0..150, 2.0, 2);
        let cool = cooldown(true, 3);
        let check = memory_leak(
            &leak_input(&steady, &cool),
            DEFAULT_MEMORY_LIMIT_MIB_PER_MIN,
        );
        assert_eq!(check.status, CheckStatus::Fail, "{}", check.reason);
        assert!(within(check.value.unwrap(), 2.0, 0.2), "{check:?}");
        let [lo, hi] = check.ci.unwrap();
        assert!(lo > 1.0 && lo <= check.value.unwrap() && check.value.unwrap() <= hi);
        assert!(
            check.reason.contains("end of the cool-down"),
            "{}",
            check.reason
        );
    }

    #[test]
    fn memory_leak_warns_of_growth_that_came_back_in_the_cool_down() {
        let steady = heap(0..150, 2.0, 2);
        let cool = cooldown(false, 3);
        let check = memory_leak(
            &leak_input(&steady, &cool),
            DEFAULT_MEMORY_LIMIT_MIB_PER_MIN,
        );
        assert_eq!(check.status, CheckStatus::Warn, "{}", check.reason);
        assert!(
            check.reason.contains("came back in the cool-down"),
            "{}",
            check.reason
        );
        assert!(within(check.value.unwrap(), 2.0, 0.2), "{check:?}");
    }

    #[test]
    fn memory_leak_without_a_cool_down_fails_and_says_so() {
        let steady = heap(0..150, 2.0, 4);
        let check = memory_leak(&leak_input(&steady, &[]), DEFAULT_MEMORY_LIMIT_MIB_PER_MIN);
        assert_eq!(check.status, CheckStatus::Fail, "{}", check.reason);
        assert!(
            check.reason.contains("no cool-down was run"),
            "{}",
            check.reason
        );
    }

    #[test]
    fn memory_leak_skips_a_window_too_short_for_a_slope() {
        let steady = heap(0..100, 2.0, 5);
        let check = memory_leak(&leak_input(&steady, &[]), DEFAULT_MEMORY_LIMIT_MIB_PER_MIN);
        assert_eq!(check.status, CheckStatus::Skipped);
        assert_eq!(check.value, None);
        assert!(
            check.reason.contains("100 s") && check.reason.contains("120 s"),
            "{}",
            check.reason
        );
        let none = memory_leak(&leak_input(&[], &[]), DEFAULT_MEMORY_LIMIT_MIB_PER_MIN);
        assert_eq!(none.status, CheckStatus::Skipped);
        assert!(
            none.reason
                .contains("the steady window was 0 s, shorter than the 120 s"),
            "{}",
            none.reason
        );
    }

    #[test]
    fn memory_leak_reports_kib_per_thousand_requests_of_the_fitted_growth() {
        let steady: Vec<(f64, f64)> = (0..150)
            .map(|i| (f64::from(i), BASE + 2.0 / 60.0 * f64::from(i) * MIB))
            .collect();
        let input = LeakInput {
            requests: Some(149_000),
            ..leak_input(&steady, &[])
        };
        let check = memory_leak(&input, DEFAULT_MEMORY_LIMIT_MIB_PER_MIN);
        // 2 MiB/min over the 149 s from first to last sample, per 149 thousand requests.
        let expected = 2.0 / 60.0 * 149.0 * 1024.0 / 149.0;
        let figure = check.kib_per_1k_requests.unwrap();
        assert!(
            (figure - expected).abs() < 1e-6,
            "{figure} against {expected}"
        );
        let no_requests = memory_leak(&leak_input(&steady, &[]), DEFAULT_MEMORY_LIMIT_MIB_PER_MIN);
        assert_eq!(no_requests.kib_per_1k_requests, None);
    }

    /// Open fds: 40 plus one every `every_s` seconds (never, for 0), one sample a second.
    fn fds(range: std::ops::Range<u32>, every_s: u32) -> Vec<(f64, f64)> {
        range
            .map(|i| {
                (
                    f64::from(i),
                    40.0 + f64::from(i.checked_div(every_s).unwrap_or(0)),
                )
            })
            .collect()
    }

    #[test]
    fn count_leak_fails_an_fd_opened_every_ten_seconds() {
        let steady = fds(0..180, 10);
        let cool: Vec<(f64, f64)> = (180..240).map(|i| (f64::from(i), 58.0)).collect();
        let check = count_leak(
            "fd_leak",
            "fds/min",
            "open fds",
            &leak_input(&steady, &cool),
            DEFAULT_COUNT_LIMIT_PER_MIN,
        );
        assert_eq!(check.status, CheckStatus::Fail, "{}", check.reason);
        assert_eq!(check.id, "fd_leak");
        assert!(within(check.value.unwrap(), 6.0, 0.2), "{check:?}");
        assert!(
            check
                .reason
                .contains("fds above its start level at the end of the cool-down"),
            "{}",
            check.reason
        );
    }

    #[test]
    fn count_leak_passes_a_flat_count() {
        let steady = fds(0..180, 0);
        let check = count_leak(
            "thread_leak",
            "threads/min",
            "threads",
            &leak_input(&steady, &[]),
            DEFAULT_COUNT_LIMIT_PER_MIN,
        );
        assert_eq!(check.status, CheckStatus::Pass, "{}", check.reason);
        assert_eq!(check.value, Some(0.0));
        assert_eq!(check.ci, Some([0.0, 0.0]));
        assert!(check.reason.contains("threads/min"), "{}", check.reason);
    }

    /// Sessions the server holds beyond the client's: `per_min` more each minute from 0.
    fn excess(range: std::ops::Range<u32>, per_min: f64) -> Vec<(f64, f64)> {
        range
            .map(|i| (f64::from(i), (per_min / 60.0 * f64::from(i)).floor()))
            .collect()
    }

    #[test]
    fn session_leak_judges_each_status() {
        let skipped = session_leak(&leak_input(&[], &[]), DEFAULT_SESSION_LIMIT_PER_MIN);
        assert_eq!(skipped.status, CheckStatus::Skipped);
        assert!(
            skipped.reason.contains("no session count"),
            "{}",
            skipped.reason
        );

        let flat = excess(0..180, 0.0);
        let pass = session_leak(&leak_input(&flat, &[]), DEFAULT_SESSION_LIMIT_PER_MIN);
        assert_eq!(pass.status, CheckStatus::Pass, "{}", pass.reason);

        let rising = excess(0..180, 4.0);
        let held: Vec<(f64, f64)> = (180..240).map(|i| (f64::from(i), 12.0)).collect();
        let fail = session_leak(&leak_input(&rising, &held), DEFAULT_SESSION_LIMIT_PER_MIN);
        assert_eq!(fail.status, CheckStatus::Fail, "{}", fail.reason);
        assert!(within(fail.value.unwrap(), 4.0, 0.2), "{fail:?}");
        assert_eq!(fail.unit.as_deref(), Some("sessions/min"));

        let released: Vec<(f64, f64)> = (180..240)
            .map(|i| (f64::from(i), if i < 200 { 12.0 } else { 0.0 }))
            .collect();
        let warn = session_leak(
            &leak_input(&rising, &released),
            DEFAULT_SESSION_LIMIT_PER_MIN,
        );
        assert_eq!(warn.status, CheckStatus::Warn, "{}", warn.reason);
    }

    /// Per-minute points at each minute's middle: `start` rising `per_min` each minute, noisy.
    fn minutes(count: u32, start: f64, per_min: f64, sd: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut jitter = noise(seed, sd);
        (0..count)
            .map(|m| {
                (
                    30.0 + 60.0 * f64::from(m),
                    start + per_min * f64::from(m) + jitter(),
                )
            })
            .collect()
    }

    #[test]
    fn a_sub_millisecond_p99_that_rises_a_few_milliseconds_only_warns() {
        // 0.3 ms to about 3 ms over 10 minutes: +900%, significant, but 2.7 ms in all.
        let noisy = minutes(10, 0.3, 0.3, 0.02, 7);
        let warn = latency_drift(&noisy, DEFAULT_MIN_WINDOW_S, DEFAULT_LATENCY_MAX_RISE);
        assert_eq!(warn.status, CheckStatus::Warn, "{}", warn.reason);
        assert!(
            warn.reason.contains("under the 5 ms a drift needs"),
            "{}",
            warn.reason
        );
        // The same share of a 100 ms p99 is 900 ms: it fails.
        let steep = minutes(10, 100.0, 100.0, 1.0, 7);
        let fail = latency_drift(&steep, DEFAULT_MIN_WINDOW_S, DEFAULT_LATENCY_MAX_RISE);
        assert_eq!(fail.status, CheckStatus::Fail, "{}", fail.reason);
    }

    #[test]
    fn latency_drift_judges_each_status() {
        let flat = minutes(10, 100.0, 0.0, 2.0, 1);
        let pass = latency_drift(&flat, DEFAULT_MIN_WINDOW_S, DEFAULT_LATENCY_MAX_RISE);
        assert_eq!(pass.status, CheckStatus::Pass, "{}", pass.reason);
        assert_eq!(pass.unit.as_deref(), Some("ms/min"));

        // +1 ms a minute over 9 minutes of 100 ms: +9%, significant, within 20%.
        let slow = minutes(10, 100.0, 1.0, 0.2, 2);
        let warn = latency_drift(&slow, DEFAULT_MIN_WINDOW_S, DEFAULT_LATENCY_MAX_RISE);
        assert_eq!(warn.status, CheckStatus::Warn, "{}", warn.reason);
        assert!(within(warn.value.unwrap(), 1.0, 0.1), "{warn:?}");
        assert!(warn.reason.contains("+9"), "{}", warn.reason);

        // +5 ms a minute: +45%, past the 20%.
        let steep = minutes(10, 100.0, 5.0, 0.5, 3);
        let fail = latency_drift(&steep, DEFAULT_MIN_WINDOW_S, DEFAULT_LATENCY_MAX_RISE);
        assert_eq!(fail.status, CheckStatus::Fail, "{}", fail.reason);
        assert!(within(fail.value.unwrap(), 5.0, 0.1), "{fail:?}");

        let short = minutes(2, 100.0, 5.0, 0.0, 4);
        let skipped = latency_drift(&short, DEFAULT_MIN_WINDOW_S, DEFAULT_LATENCY_MAX_RISE);
        assert_eq!(skipped.status, CheckStatus::Skipped);
        assert!(
            skipped
                .reason
                .contains("windows of p99 in the steady window: 2,"),
            "{}",
            skipped.reason
        );
        let under_window = latency_drift(
            &minutes(3, 100.0, 5.0, 0.0, 4),
            300.0,
            DEFAULT_LATENCY_MAX_RISE,
        );
        assert_eq!(under_window.status, CheckStatus::Skipped);
        assert!(
            under_window.reason.contains("180 s"),
            "{}",
            under_window.reason
        );
    }

    #[test]
    fn error_drift_judges_each_status() {
        let clean = minutes(10, 0.0, 0.0, 0.0, 1);
        let pass = error_drift(&clean, DEFAULT_MIN_WINDOW_S, DEFAULT_ERROR_MAX_RISE_PP);
        assert_eq!(pass.status, CheckStatus::Pass, "{}", pass.reason);
        assert!(pass.reason.contains("no errors"), "{}", pass.reason);

        let steady_errors = minutes(10, 0.02, 0.0, 0.001, 2);
        let level = error_drift(
            &steady_errors,
            DEFAULT_MIN_WINDOW_S,
            DEFAULT_ERROR_MAX_RISE_PP,
        );
        assert_eq!(level.status, CheckStatus::Pass, "{}", level.reason);

        // +0.05 pp a minute: 0.45 pp over the window, within 1 pp.
        let creeping = minutes(10, 0.01, 0.0005, 0.00002, 3);
        let warn = error_drift(&creeping, DEFAULT_MIN_WINDOW_S, DEFAULT_ERROR_MAX_RISE_PP);
        assert_eq!(warn.status, CheckStatus::Warn, "{}", warn.reason);
        assert!(within(warn.value.unwrap(), 0.05, 0.1), "{warn:?}");
        assert_eq!(warn.unit.as_deref(), Some("pp/min"));

        // +0.5 pp a minute: 4.5 pp over the window.
        let climbing = minutes(10, 0.01, 0.005, 0.0002, 4);
        let fail = error_drift(&climbing, DEFAULT_MIN_WINDOW_S, DEFAULT_ERROR_MAX_RISE_PP);
        assert_eq!(fail.status, CheckStatus::Fail, "{}", fail.reason);
        assert!(
            fail.reason
                .contains("4.48 pp over the window, past the 1 pp limit"),
            "{}",
            fail.reason
        );

        let skipped = error_drift(&clean[..2], DEFAULT_MIN_WINDOW_S, DEFAULT_ERROR_MAX_RISE_PP);
        assert_eq!(skipped.status, CheckStatus::Skipped);
    }

    #[test]
    fn cpu_ceiling_judges_each_status() {
        let (pass, phrase) = cpu_ceiling(Some(4), Some(198.0), Some(2));
        assert_eq!(pass.status, CheckStatus::Pass, "{}", pass.reason);
        assert!(
            pass.reason.contains("CPU-bound at the knee"),
            "{}",
            pass.reason
        );
        assert_eq!(
            phrase.as_deref(),
            Some("with the server at 198% CPU of 2 cores")
        );

        let (warn, phrase) = cpu_ceiling(Some(4), Some(35.0), Some(2));
        assert_eq!(warn.status, CheckStatus::Warn, "{}", warn.reason);
        assert!(
            warn.reason
                .contains("35% CPU of 2 cores: the limit is not CPU"),
            "{}",
            warn.reason
        );
        assert_eq!(
            phrase.as_deref(),
            Some("with the server at 35% CPU of 2 cores")
        );

        let (no_knee, phrase) = cpu_ceiling(None, Some(198.0), Some(2));
        assert_eq!(no_knee.status, CheckStatus::Skipped);
        assert!(no_knee.reason.starts_with("no knee"), "{}", no_knee.reason);
        assert_eq!(phrase, None);

        let (no_cpu, phrase) = cpu_ceiling(Some(4), None, Some(2));
        assert_eq!(no_cpu.status, CheckStatus::Skipped);
        assert_eq!(phrase, None);

        let (no_cores, phrase) = cpu_ceiling(Some(4), Some(95.0), None);
        assert_eq!(no_cores.status, CheckStatus::Skipped);
        assert_eq!(phrase.as_deref(), Some("with the server at 95% CPU"));
    }

    #[test]
    fn generator_warns_of_the_bound_steps_and_passes_none() {
        let pass = generator(&[]);
        assert_eq!(pass.status, CheckStatus::Pass);
        assert_eq!(pass.value, Some(0.0));
        let bound = [
            (3, "its CPU was 99% busy".to_string()),
            (4, "late sends".to_string()),
        ];
        let warn = generator(&bound);
        assert_eq!(warn.status, CheckStatus::Warn);
        assert_eq!(warn.value, Some(2.0));
        assert!(warn.reason.contains("(steps 3, 4)"), "{}", warn.reason);
        assert!(
            warn.reason.ends_with("step 3: its CPU was 99% busy"),
            "{}",
            warn.reason
        );
    }

    #[test]
    fn a_check_serializes_as_summary_json_writes_it() {
        let (check, _) = cpu_ceiling(Some(4), Some(198.0), Some(2));
        let json = serde_json::to_value(&check).unwrap();
        assert_eq!(json["status"], "pass");
        assert_eq!(json["unit"], "%");
        assert!(json.get("ci").is_none() && json.get("kib_per_1k_requests").is_none());
        let back: Check = serde_json::from_value(json).unwrap();
        assert_eq!(back, check);
    }
}
