//! `mcpload run` end to end: write a profile, run the real binary (or watch it: time and
//! peak memory), read the run folder back (steps.csv, summary.json).

use super::bin;
use serde_json::Value;
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Writes `text` as `<dir>/<name>.toml` and returns its path.
pub(crate) fn profile(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `mcpload run` with `args`, bounded in time by the profile itself; returns the output.
pub(crate) fn run(args: &[&str]) -> Output {
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

pub(crate) fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The first line of a file: a CSV file's header.
pub(crate) fn first_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned()
}

/// steps.csv as a list of column → value maps.
pub(crate) fn steps(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    table(dir, "steps.csv")
}

/// A CSV file of the run folder (steps.csv, ops.csv, scenarios.csv) as column → value maps.
pub(crate) fn table(dir: &Path, file: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(dir.join(file)).unwrap();
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

pub(crate) fn num(row: &std::collections::HashMap<String, String>, col: &str) -> f64 {
    row.get(col)
        .unwrap_or_else(|| panic!("no column {col}"))
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?} is no number", row[col]))
}

/// The ends of a request in the pairing identity of docs/metrics.md: each request sent ends
/// as exactly one of these.
pub(crate) const ENDS: [&str; 15] = [
    "ok",
    "tool_errors",
    "output_schema_violations",
    "errors",
    "both_result_error",
    "invalid_jsonrpc",
    "missing",
    "timeouts",
    "http_429",
    "http_503",
    "http_other",
    "transport_errors",
    "expired_unsent",
    "input_unanswered",
    "in_flight_at_end",
];

/// The requests of one steps.csv row that ended one way or another (the identity's right side).
pub(crate) fn ended(row: &std::collections::HashMap<String, String>) -> f64 {
    ENDS.iter().map(|t| num(row, t)).sum()
}

/// The pairing identity of docs/metrics.md on one steps.csv row.
pub(crate) fn assert_identity(row: &std::collections::HashMap<String, String>) {
    assert_eq!(
        num(row, "requests"),
        ended(row),
        "pairing identity, step {}",
        row["step"]
    );
}

/// What [`run_watched`] saw of one `mcpload run`.
pub(crate) struct Watched {
    /// What it printed, and how it ended (killed, when it overran its budget).
    pub output: Output,
    pub elapsed: Duration,
    /// Its peak resident memory (VmHWM), KiB: the last value read before it exited. The
    /// process alone: a stdio target it started is not counted.
    pub peak_rss_kib: u64,
    /// The most TCP connections it held open at once (of those seen every 50 ms).
    pub peak_tcp_connections: usize,
    /// Still running at its budget, so killed.
    pub overran: bool,
}

/// Runs `mcpload run --quiet ARGS` under [`watch`].
pub(crate) fn run_watched(args: &[&str], budget: Duration) -> Watched {
    let mut run = bin();
    run.arg("run").arg("--quiet").args(args);
    watch(run, budget)
}

/// Runs `command` (no colour), reading its peak memory and open connections every 50 ms;
/// kills it when it is still running after `budget`, so that a hang fails the test instead of
/// stalling it.
pub(crate) fn watch(command: Command, budget: Duration) -> Watched {
    watch_each(command, budget, |_| {})
}

/// [`watch`], calling `each` with the process id at every reading too.
pub(crate) fn watch_each(
    mut command: Command,
    budget: Duration,
    mut each: impl FnMut(u32),
) -> Watched {
    let start = Instant::now();
    let mut child = command
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcpload run");
    let stdout = read_all(child.stdout.take().unwrap());
    let stderr = read_all(child.stderr.take().unwrap());
    let pid = child.id();
    let proc_status = format!("/proc/{pid}/status");
    let mut peak_rss_kib = 0;
    let mut peak_tcp_connections = 0;
    let mut overran = false;
    let status = loop {
        // Read before reaping: an exited process has no VmHWM line any more.
        if let Some(kib) = vm_hwm_kib(&proc_status) {
            peak_rss_kib = kib;
        }
        peak_tcp_connections = peak_tcp_connections.max(open_tcp_connections(pid));
        each(pid);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > budget {
            overran = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = start.elapsed();
    Watched {
        output: Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        },
        elapsed,
        peak_rss_kib,
        peak_tcp_connections,
        overran,
    }
}

/// Reads a child's pipe to its end on a thread of its own.
fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// The `VmHWM` line of a /proc/<pid>/status file, in KiB.
fn vm_hwm_kib(proc_status: &str) -> Option<u64> {
    std::fs::read_to_string(proc_status)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The established IPv4 TCP connections of process `pid`: its socket descriptors that
/// /proc/net/tcp lists in state 01. Counted by inode: a table read while sockets come and go
/// may list one twice.
fn open_tcp_connections(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let sockets: HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let established: HashSet<&str> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.len() > 9 && cols[3] == "01" && sockets.contains(cols[9]))
        .map(|cols| cols[9])
        .collect();
    established.len()
}
