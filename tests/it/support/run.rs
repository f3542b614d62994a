//! `mcpload run` end to end: write a profile, run the real binary, read the run folder back
//! (steps.csv, summary.json).

use super::bin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Writes `text` as `<dir>/<name>.toml` and returns its path.
pub fn profile(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `mcpload run` with `args`, bounded in time by the profile itself; returns the output.
pub fn run(args: &[&str]) -> Output {
    let out = bin().arg("run").arg("--quiet").args(args).output().unwrap();
    if !out.status.success() {
        eprintln!(
            "mcpload run {args:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

pub fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// steps.csv as a list of column → value maps.
pub fn steps(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(dir.join("steps.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            header
                .iter()
                .map(str::to_owned)
                .zip(rec.iter().map(str::to_owned))
                .collect()
        })
        .collect()
}

pub fn num(row: &std::collections::HashMap<String, String>, col: &str) -> f64 {
    row.get(col)
        .unwrap_or_else(|| panic!("no column {col}"))
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?} is no number", row[col]))
}

/// The ends of a request in the pairing identity of docs/metrics.md: each request sent ends
/// as exactly one of these.
pub const ENDS: [&str; 11] = [
    "ok",
    "errors",
    "both_result_error",
    "invalid_jsonrpc",
    "missing",
    "timeouts",
    "http_429",
    "http_503",
    "http_other",
    "transport_errors",
    "in_flight_at_end",
];

/// The requests of one steps.csv row that ended one way or another (the identity's right side).
pub fn ended(row: &std::collections::HashMap<String, String>) -> f64 {
    ENDS.iter().map(|t| num(row, t)).sum()
}

/// The pairing identity of docs/metrics.md on one steps.csv row.
pub fn assert_identity(row: &std::collections::HashMap<String, String>) {
    assert_eq!(
        num(row, "requests"),
        ended(row),
        "pairing identity, step {}",
        row["step"]
    );
}
