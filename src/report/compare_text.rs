//! `mcpload compare` output: the two runs side by side per step and on the knee, regressions
//! marked, and a closing line that names every regressed figure.

use super::terminal::{BOLD, GREEN, RED, Table, YELLOW, ms, num, paint, rps, step_list};
use crate::analysis::{Comparison, FigureDelta, pct};
use anstyle::Style;
use std::fmt::Write;

/// A figure's value in the unit people read it in.
fn show(figure: &str, v: Option<f64>) -> String {
    match (figure, v) {
        (_, None) => "-".to_owned(),
        ("p50_ms" | "p99_ms", v) => ms(v),
        ("error_rate", Some(v)) => pct(v),
        ("throughput_rps" | "peak_throughput_rps", Some(v)) => rps(v),
        (_, Some(v)) => num(v),
    }
}

/// `base → new (+12.3%)`, with a `!` and red when it regressed.
fn cell(f: &FigureDelta) -> (String, Style) {
    let mut s = format!("{} → {}", show(f.figure, f.base), show(f.figure, f.new));
    if let Some(c) = f.change() {
        let _ = write!(s, " ({}{:.1}%)", if c >= 0.0 { "+" } else { "" }, c * 100.0);
    }
    if f.regressed {
        s.push_str(" !");
        (s, RED)
    } else {
        (s, Style::new())
    }
}

/// Renders a comparison for the terminal (`color`: ANSI colours).
pub(super) fn render_comparison(
    c: &Comparison,
    base_name: &str,
    new_name: &str,
    color: bool,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} base {base_name} → new {new_name} (tolerance {})\n",
        paint("mcpload compare:", BOLD, color),
        pct(c.tolerance)
    );
    let mut header = vec!["load".to_owned(), "steps".to_owned()];
    if let Some(first) = c.steps.first() {
        header.extend(first.figures.iter().map(|f| f.figure.to_owned()));
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&header);
    for s in &c.steps {
        let mut row = vec![
            (num(s.load), Style::new()),
            (format!("{} → {}", s.base_step, s.new_step), Style::new()),
        ];
        row.extend(s.figures.iter().map(cell));
        t.row(row);
    }
    t.render(&mut out, color);
    for (which, loads) in [("base", &c.only_in_base), ("new", &c.only_in_new)] {
        if !loads.is_empty() {
            let l: Vec<String> = loads.iter().map(|l| num(*l)).collect();
            let _ = writeln!(out, "only in {which}: load {}", l.join(", "));
        }
    }
    out.push('\n');
    let mut k = Table::new(&["knee", "base → new"]);
    for f in &c.knee {
        k.row(vec![(f.figure.to_owned(), Style::new()), cell(f)]);
    }
    k.render(&mut out, color);
    out.push('\n');
    for (which, steps) in [
        ("base", &c.base_generator_bound),
        ("new", &c.new_generator_bound),
    ] {
        if !steps.is_empty() {
            let _ = writeln!(
                out,
                "{} in the {which} run the generator, not the server, limited {}: a \
                 difference there may be mcpload's, not the server's.",
                paint("warning:", YELLOW, color),
                step_list(steps)
            );
        }
    }
    let regressions = c.regressions();
    if regressions.is_empty() {
        let _ = writeln!(
            out,
            "{} no regression beyond {}.",
            paint("pass:", GREEN, color),
            pct(c.tolerance)
        );
    } else {
        let list: Vec<String> = regressions
            .iter()
            .map(|(at, f)| {
                format!(
                    "{at} {} {} → {}",
                    f.figure,
                    show(f.figure, f.base),
                    show(f.figure, f.new)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "{} {} regression{} beyond {}: {}.",
            paint("FAIL:", RED, color),
            regressions.len(),
            if regressions.len() == 1 { "" } else { "s" },
            pct(c.tolerance),
            list.join("; ")
        );
    }
    out
}
