//! Helpers shared by the `mcpload run` tests: write a profile, run the real binary, read the
//! run folder back.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcpload"))
}

/// A fresh scratch folder under the target dir, removed first if a previous run left it.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

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

/// The pairing identity of docs/metrics.md on one steps.csv row.
pub fn assert_identity(row: &std::collections::HashMap<String, String>) {
    let terms = [
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
    let sum: f64 = terms.iter().map(|t| num(row, t)).sum();
    assert_eq!(
        num(row, "requests"),
        sum,
        "pairing identity, step {}",
        row["step"]
    );
}

/// A `mcpload serve` child on 127.0.0.1; killed on drop.
pub struct Served {
    pub child: std::process::Child,
    pub url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `mcpload serve ARGS` and reads its first line, `listening on http://…/mcp`.
pub fn serve(args: &[&str]) -> Served {
    use std::io::BufRead;
    let mut child = bin()
        .arg("serve")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Served { child, url }
}

/// `GET /stats` of a served target, over a plain socket.
pub fn target_stats(url: &str) -> Value {
    use std::io::{Read, Write};
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let mut s = std::net::TcpStream::connect(&authority).unwrap();
    write!(
        s,
        "GET /stats HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").expect("a body").1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}
