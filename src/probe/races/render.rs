//! The race report for people (`--json` prints its serde form instead): what was agreed with
//! the server, one row per check, then the correctness section with every finding's evidence
//! and likely cause.

use super::RaceReport;
use crate::metrics::Finding;
use crate::report::{correctness_text, totals_of};
use std::fmt::Write;

/// Renders the report.
pub fn render_races(r: &RaceReport) -> String {
    let mut out = crate::probe::render::head(&r.target, r.transport, &r.server, false);
    let _ = writeln!(out, "concurrency   {} calls at once", r.concurrency);
    let _ = writeln!(out);
    let w0 = r
        .checks
        .iter()
        .map(|c| c.check.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let w1 = r
        .checks
        .iter()
        .map(|c| c.verdict.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let _ = writeln!(out, "{:w0$}  {:w1$}  summary", "check", "verdict");
    for c in &r.checks {
        let _ = writeln!(out, "{:w0$}  {:w1$}  {}", c.check, c.verdict, c.summary);
    }
    let findings: Vec<Finding> = r.findings().cloned().collect();
    let section = correctness_text(&totals_of(&findings), &findings);
    let _ = writeln!(out);
    if section.is_empty() {
        let _ = writeln!(out, "Correctness: nothing found");
    } else {
        out.push_str(&section);
    }
    out
}
