//! The "Correctness" section, in text (the terminal, `probe --races`) and HTML
//! (report.html): per defect, how many were counted and where, a few findings with their
//! evidence, and the likely cause in one line.

use super::RunSummary;
use crate::metrics::{Defect, Finding, StepSummary};
use std::fmt::Write;

/// Findings shown per defect in text; the rest are counted.
const SHOWN: usize = 3;
/// Findings shown per defect in report.html.
const SHOWN_HTML: usize = 12;

/// How many of one defect were counted, and in which steps of a run (none for a probe).
#[derive(Clone, Debug, PartialEq)]
pub struct Total {
    pub defect: Defect,
    pub count: u64,
    pub steps: Vec<u32>,
}

/// The totals of a probe's findings: each defect found, summed.
pub fn totals_of(findings: &[Finding]) -> Vec<Total> {
    Defect::ALL
        .into_iter()
        .filter_map(|d| {
            let mine: Vec<&Finding> = findings.iter().filter(|f| f.defect == d).collect();
            (!mine.is_empty()).then(|| Total {
                defect: d,
                count: mine.iter().map(|f| f.count).sum(),
                steps: Vec::new(),
            })
        })
        .collect()
}

/// The step column a `tally` counts `d` in.
fn column(s: &StepSummary, d: Defect) -> Option<u64> {
    match d {
        Defect::LostUpdates => s.lost_updates,
        Defect::DoubleEffects => s.double_effects,
        Defect::AcceptedConflicts => s.accepted_conflicts,
        Defect::StaleReads => s.stale_reads,
        Defect::FirstCallHangs => None,
    }
}

/// A run's totals from its steps' columns: each defect some `tally` counted (zeros too),
/// with the steps where it was more than 0.
pub(super) fn run_totals(run: &RunSummary) -> Vec<Total> {
    Defect::TALLIED
        .into_iter()
        .filter_map(|d| {
            let counted: Vec<(u32, u64)> = run
                .steps
                .iter()
                .filter_map(|r| column(&r.figures, d).map(|n| (r.figures.step, n)))
                .collect();
            (!counted.is_empty()).then(|| Total {
                defect: d,
                count: counted.iter().map(|(_, n)| n).sum(),
                steps: counted
                    .iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(s, _)| *s)
                    .collect(),
            })
        })
        .collect()
}

/// A run's findings, step by step.
pub(super) fn run_findings(run: &RunSummary) -> Vec<Finding> {
    run.steps
        .iter()
        .flat_map(|s| s.findings.iter().cloned())
        .collect()
}

/// Where a finding was made: `step 2, jobs/count` or the probe's check.
fn place(f: &Finding) -> String {
    match f.step {
        Some(s) => format!("step {s}, {}", f.check),
        None => f.check.clone(),
    }
}

/// `lost_updates 37 in steps 1, 2` (a probe's: `lost_updates 37`).
fn headline(t: &Total) -> String {
    if t.steps.is_empty() {
        format!("{} {}", t.defect, t.count)
    } else {
        format!(
            "{} {} in {}",
            t.defect,
            t.count,
            super::terminal::step_list(&t.steps)
        )
    }
}

/// The section as text: `Correctness:` with every total, then per defect counted above 0 up
/// to three findings with their evidence and the likely cause. Empty without totals.
pub fn correctness_text(totals: &[Total], findings: &[Finding]) -> String {
    let mut out = String::new();
    if totals.is_empty() {
        return out;
    }
    let all: Vec<String> = totals
        .iter()
        .map(|t| format!("{} {}", t.defect, t.count))
        .collect();
    let _ = writeln!(out, "Correctness: {}", all.join(", "));
    for t in totals.iter().filter(|t| t.count > 0) {
        let _ = writeln!(out, "  {}", headline(t));
        let mine: Vec<&Finding> = findings.iter().filter(|f| f.defect == t.defect).collect();
        for f in mine.iter().take(SHOWN) {
            let _ = writeln!(out, "    {} ({}): {}", f.count, place(f), f.evidence());
        }
        if mine.len() > SHOWN {
            let _ = writeln!(out, "    … and {} more findings", mine.len() - SHOWN);
        }
        let _ = writeln!(out, "    likely cause: {}", t.defect.cause());
    }
    out
}

/// The section as HTML (escaped by maud): every total, and per defect counted above 0 its
/// likely cause and a table of findings. Empty without totals.
pub fn correctness_html(totals: &[Total], findings: &[Finding]) -> maud::Markup {
    maud::html! {
        @if !totals.is_empty() {
            section #correctness {
                h2 { "Correctness" }
                ul {
                    @for t in totals {
                        li { code { (t.defect.name()) } " " (t.count)
                            @if !t.steps.is_empty() { " in " (super::terminal::step_list(&t.steps)) } }
                    }
                }
                @for t in totals.iter().filter(|t| t.count > 0) {
                    h3 { (headline(t)) }
                    p { "Likely cause: " (t.defect.cause()) }
                    table {
                        thead { tr { th { "count" } th { "where" } th { "requests" } th { "values seen" } } }
                        tbody {
                            @for f in findings.iter().filter(|f| f.defect == t.defect).take(SHOWN_HTML) {
                                tr {
                                    td { (f.count) }
                                    td { (place(f)) }
                                    td { (f.request_ids.join(", ")) }
                                    td { code { (serde_json::Value::Object(f.values.clone())) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_head_the_section_and_findings_carry_evidence_and_cause() {
        let mut second = Finding::new(Defect::LostUpdates, 2, "counter/count").ids(["7", "9"]);
        second.step = Some(2);
        let findings = vec![
            Finding::new(Defect::LostUpdates, 3, "lost_updates")
                .ids(["a", "b"])
                .value("before", 0),
            Finding::new(Defect::StaleReads, 1, "read_your_write"),
            second,
        ];
        let mut totals = totals_of(&findings);
        assert_eq!(
            totals
                .iter()
                .map(|t| (t.defect, t.count))
                .collect::<Vec<_>>(),
            [(Defect::LostUpdates, 5), (Defect::StaleReads, 1)]
        );
        totals.push(Total {
            defect: Defect::DoubleEffects,
            count: 0,
            steps: Vec::new(),
        });
        let text = correctness_text(&totals, &findings);
        assert!(
            text.starts_with("Correctness: lost_updates 5, stale_reads 1, double_effects 0\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  lost_updates 5\n    3 (lost_updates): requests a, b; before=0\n    2 (step 2, counter/count): requests 7, 9\n    likely cause: a read-modify-write"
            ),
            "{text}"
        );
        assert!(!text.contains("  double_effects"), "{text}");
        assert_eq!(correctness_text(&[], &findings), "");
        let html = correctness_html(&totals, &findings).into_string();
        assert!(html.contains("<h3>lost_updates 5</h3>"), "{html}");
        assert!(correctness_html(&[], &[]).into_string().is_empty());
    }
}
