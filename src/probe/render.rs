//! The probe report as a table for people (`--json` prints the report's serde form instead).

use super::{Evidence, ProbeReport, TaskOffer};
use crate::client::{ServerInfo, TaskSupport};
use serde_json::{Value, json};
use std::fmt::Write;

/// The lines every probe report starts with: the target, the server, the protocol agreed
/// (with `session`: whether a session was opened too).
pub(super) fn head(target: &str, transport: &str, s: &ServerInfo, session: bool) -> String {
    let mut out = String::new();
    let name = |k: &str| s.server_info.get(k).and_then(Value::as_str).unwrap_or("?");
    let _ = writeln!(out, "target        {target} ({transport})");
    let _ = writeln!(out, "server        {} {}", name("name"), name("version"));
    let _ = writeln!(
        out,
        "protocol      {} ({:?} era{})",
        s.revision,
        s.era,
        if session && s.session {
            ", session"
        } else {
            ""
        }
    );
    out
}

/// Renders the report: what was agreed with the server, its tools, then one row per probe.
pub fn render_table(r: &ProbeReport) -> String {
    let s = &r.server;
    let mut out = head(&r.target, r.transport, s, true);
    let _ = writeln!(out, "detected by   {}", s.detection);
    let caps: Vec<&str> = s
        .capabilities
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(out, "capabilities  {}", caps.join(", "));
    let _ = writeln!(out, "tasks         {}", offer(&r.tasks));
    let _ = writeln!(out, "tools         {}", s.tools.len());
    for t in &s.tools {
        let task = match t.task_support {
            TaskSupport::Forbidden => String::new(),
            other => format!(" [task: {}]", json!(other).as_str().unwrap_or("?")),
        };
        let _ = writeln!(out, "  {}({}){task}", t.name, t.required.join(", "));
    }
    let _ = writeln!(out);
    let rows: Vec<(String, String, String)> = r
        .probes
        .iter()
        .map(|p| {
            let probe = match p.variant {
                Some(v) => format!("{} ({v})", p.probe),
                None => p.probe.to_string(),
            };
            let verdict = match &p.detail {
                Some(d) => format!("{} [{d}]", p.verdict),
                None => p.verdict.to_string(),
            };
            (probe, verdict, evidence(&p.evidence))
        })
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(5);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(7);
    let _ = writeln!(out, "{:w0$}  {:w1$}  evidence", "probe", "verdict");
    for (p, v, e) in rows {
        let _ = writeln!(out, "{p:w0$}  {v:w1$}  {e}");
    }
    out
}

fn evidence(e: &Evidence) -> String {
    let mut parts = Vec::new();
    if !e.status.is_empty() {
        let s: Vec<String> = e.status.iter().map(u16::to_string).collect();
        parts.push(format!("HTTP {}", s.join("+")));
    }
    for ct in &e.content_type {
        parts.push(ct.split(';').next().unwrap_or(ct).to_string());
    }
    if let Some(t) = &e.task {
        parts.push(t.describe());
    } else if let Some(i) = &e.input {
        parts.push(i.describe());
    } else if e.answered.is_empty() {
        parts.push("no response".to_string());
    } else {
        parts.push(format!("ids {}", e.answered.join(",")));
    }
    if !e.error_codes.is_empty() {
        let c: Vec<String> = e.error_codes.iter().map(i64::to_string).collect();
        parts.push(format!("errors {}", c.join(",")));
    }
    if e.server_messages > 0 {
        parts.push(format!("{} server messages", e.server_messages));
    }
    if e.unreadable > 0 {
        parts.push(format!("{} unreadable", e.unreadable));
    }
    if let Some(n) = &e.note {
        parts.push(n.clone());
    }
    parts.join("; ")
}

/// What the server declares of tasks, in words.
fn offer(o: &TaskOffer) -> String {
    match o.declared {
        "none" => "none".into(),
        "extension" => format!(
            "extension {} (the server decides per call)",
            crate::protocol::TASKS_EXTENSION
        ),
        declared => {
            let mut what: Vec<String> = [("list", o.list), ("cancel", o.cancel)]
                .iter()
                .filter(|(_, on)| *on)
                .map(|(n, _)| n.to_string())
                .collect();
            if !o.requests.is_empty() {
                what.push(format!("task-augmented: {}", o.requests.join(", ")));
            }
            format!("{declared} ({})", what.join("; "))
        }
    }
}
