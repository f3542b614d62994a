//! The "Correctness" section, in text (terminal, `probe --races`) and HTML (report.html):
//! per defect, how many were found and where, a few findings with their evidence, and the
//! likely cause in one line.

use crate::metrics::{Defect, Finding};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Findings shown per defect; the rest are counted.
const SHOWN: usize = 3;

/// The findings grouped by defect, in [`Defect::ALL`] order, each with its total.
fn by_defect(findings: &[Finding]) -> BTreeMap<Defect, (u64, Vec<&Finding>)> {
    let mut out: BTreeMap<Defect, (u64, Vec<&Finding>)> = BTreeMap::new();
    for f in findings {
        let e = out.entry(f.defect).or_default();
        e.0 += f.count;
        e.1.push(f);
    }
    out
}

/// Where a finding was made: `step 2, jobs/count` or the probe's check.
fn place(f: &Finding) -> String {
    match f.step {
        Some(s) => format!("step {s}, {}", f.check),
        None => f.check.clone(),
    }
}

/// The section as text: `Correctness: …` then, per defect, its total, up to three findings
/// with their evidence, and the likely cause. Empty without findings.
pub fn correctness_text(findings: &[Finding]) -> String {
    let mut out = String::new();
    let groups = by_defect(findings);
    if groups.is_empty() {
        return out;
    }
    let total: u64 = groups.values().map(|g| g.0).sum();
    let _ = writeln!(
        out,
        "Correctness: {} defect kind{} found ({total} in all)",
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for (defect, (n, list)) in &groups {
        let _ = writeln!(out, "  {defect} {n}");
        for f in list.iter().take(SHOWN) {
            let _ = writeln!(out, "    {} ({}): {}", f.count, place(f), f.evidence());
        }
        if list.len() > SHOWN {
            let _ = writeln!(out, "    … and {} more findings", list.len() - SHOWN);
        }
        let _ = writeln!(out, "    likely cause: {}", defect.cause());
    }
    out
}

/// The section as HTML (escaped by maud): a table per defect. Empty without findings.
pub fn correctness_html(findings: &[Finding]) -> maud::Markup {
    let groups = by_defect(findings);
    maud::html! {
        @if !groups.is_empty() {
            section #correctness {
                h2 { "Correctness" }
                @for (defect, (n, list)) in &groups {
                    h3 { (defect.name()) " " (n) }
                    p.cause { "Likely cause: " (defect.cause()) }
                    table {
                        thead { tr { th { "count" } th { "where" } th { "requests" } th { "values seen" } } }
                        tbody {
                            @for f in list.iter().take(SHOWN * 4) {
                                tr {
                                    td.num { (f.count) }
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
    fn findings_group_by_defect_with_evidence_and_cause() {
        let mut second = Finding::new(Defect::LostUpdates, 2, "counter/count").ids(["7", "9"]);
        second.step = Some(2);
        let findings = vec![
            Finding::new(Defect::LostUpdates, 3, "lost_updates")
                .ids(["a", "b"])
                .value("before", 0),
            Finding::new(Defect::StaleReads, 1, "read_your_write"),
            second,
        ];
        let text = correctness_text(&findings);
        assert!(
            text.starts_with("Correctness: 2 defect kinds found (6 in all)"),
            "{text}"
        );
        assert!(text.contains("  lost_updates 5\n    3 (lost_updates): requests a, b; before=0\n    2 (step 2, counter/count): requests 7, 9\n    likely cause: a read-modify-write"), "{text}");
        assert!(text.contains("  stale_reads 1\n"), "{text}");
        assert_eq!(correctness_text(&[]), "");
        let html = correctness_html(&findings).into_string();
        assert!(html.contains("<h3>lost_updates 5</h3>"), "{html}");
        assert!(correctness_html(&[]).into_string().is_empty());
    }
}
