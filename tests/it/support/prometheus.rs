//! A real Prometheus (Debian's package, installed by tests/prometheus/setup.sh) started by the
//! test itself with its remote write receiver and native histograms on, an empty scrape
//! configuration and its own storage, and queried over its HTTP API; and a remote write
//! receiver that misbehaves on purpose (500s, then 429s, then no answer at all).

use super::installed::installed;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A Prometheus server on a free loopback port, killed when dropped.
pub(crate) struct Prometheus {
    child: Child,
    pub port: u16,
}

impl Prometheus {
    /// Starts one with its data and log in `dir`, scraping nothing; waits (bounded) until it
    /// is ready.
    pub(crate) fn start(dir: &Path) -> Prometheus {
        Prometheus::start_with(dir, "scrape_configs: []\n")
    }

    /// Starts one scraping `target` (`HOST:PORT`) every second as job `mcpload`.
    pub(crate) fn scraping(dir: &Path, target: &str) -> Prometheus {
        let config = format!(
            "scrape_configs:\n  - job_name: mcpload\n    scrape_interval: 1s\n    \
             scrape_timeout: 1s\n    static_configs:\n      - targets: ['{target}']\n"
        );
        let p = Prometheus::start_with(dir, &config);
        // Discovery hands targets to the scrape loop up to 5 s after the start: wait for it.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, body) = get(p.port, "/api/v1/targets").expect("prometheus answers");
            let v: Value = serde_json::from_slice(&body).unwrap();
            if v["data"]["activeTargets"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
            {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "no scrape target after 60 s: {v}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn start_with(dir: &Path, config_text: &str) -> Prometheus {
        installed("prometheus");
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, config_text).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver")
            .arg("--enable-feature=native-histograms")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus (tests/prometheus/setup.sh installs it)");
        let p = Prometheus { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while get(port, "/-/ready").map(|(code, _)| code) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready within 60 s; see {}",
                dir.join("prometheus.log").display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// Its remote write URL.
    pub(crate) fn write_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }

    /// An instant query's `data.result`.
    pub(crate) fn query(&self, promql: &str) -> Vec<Value> {
        self.api(&format!("/api/v1/query?query={}", encode(promql)))
    }

    /// A range query's `data.result`, over `[start, end]` (Unix seconds) at 1 s steps.
    pub(crate) fn query_range(&self, promql: &str, start: f64, end: f64) -> Vec<Value> {
        self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            encode(promql)
        ))
    }

    fn api(&self, path: &str) -> Vec<Value> {
        let (code, body) = get(self.port, path).expect("prometheus answers");
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(code, 200, "{path}: {v}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Polls an instant query until `done` holds for its result (ingestion is asynchronous),
    /// within `within`; the last result.
    pub(crate) fn wait_for(
        &self,
        promql: &str,
        within: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let r = self.query(promql);
            if done(&r) || Instant::now() >= deadline {
                return r;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sample's value in an instant query's result.
pub(crate) fn value(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

/// The results by the value of `label`.
pub(crate) fn by_label(result: &[Value], label: &str) -> std::collections::BTreeMap<String, f64> {
    result
        .iter()
        .map(|s| {
            (
                s["metric"][label].as_str().unwrap_or("").to_owned(),
                value(s),
            )
        })
        .collect()
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One blocking GET (the answer read to the close): status and body.
fn get(port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let code = head.split(' ').nth(1)?.parse().ok()?;
    let body = raw[head_end + 4..].to_vec();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Some((code, if chunked { dechunk(&body) } else { body }))
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 2 + size + 2..];
    }
    out
}

/// What a [`FaultyReceiver`] saw.
#[derive(Default)]
pub(crate) struct Seen {
    pub answered_500: AtomicU64,
    pub answered_429: AtomicU64,
    pub hung: AtomicU64,
    /// Requests whose headers or body broke remote write 1.0 (each with why).
    pub broken: Mutex<Vec<String>>,
}

/// A remote write receiver on a free loopback port that answers its first `fail_500`
/// requests 500, the next `fail_429` 429, and every later one never (the connection held
/// open, unanswered, until dropped).
pub(crate) struct FaultyReceiver {
    pub port: u16,
    pub seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
}

impl FaultyReceiver {
    pub(crate) fn start(fail_500: u64, fail_429: u64) -> FaultyReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                let Ok((conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                n += 1;
                let (seen, stop) = (seen2.clone(), stop2.clone());
                std::thread::spawn(move || serve_one(conn, n, fail_500, fail_429, &seen, &stop));
            }
        });
        FaultyReceiver { port, seen, stop }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }
}

impl Drop for FaultyReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_one(
    mut conn: TcpStream,
    n: u64,
    fail_500: u64,
    fail_429: u64,
    seen: &Seen,
    stop: &AtomicBool,
) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    // The head, then the body to its Content-Length.
    let (head, body) = loop {
        let Ok(k) = conn.read(&mut buf) else { return };
        if k == 0 {
            return;
        }
        raw.extend_from_slice(&buf[..k]);
        let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if raw.len() >= end + 4 + length {
            break (head, raw[end + 4..end + 4 + length].to_vec());
        }
    };
    let mut broken = Vec::new();
    for want in [
        "post ",
        "content-encoding: snappy",
        "content-type: application/x-protobuf",
        "x-prometheus-remote-write-version: 0.1.0",
    ] {
        if !head.contains(want) {
            broken.push(format!("no {want:?}"));
        }
    }
    if snap::raw::Decoder::new().decompress_vec(&body).is_err() {
        broken.push("the body is not snappy's block format".into());
    }
    if !broken.is_empty() {
        seen.broken.lock().unwrap().push(broken.join(", "));
    }
    let status = if n <= fail_500 {
        seen.answered_500.fetch_add(1, Ordering::Relaxed);
        "500 Internal Server Error"
    } else if n <= fail_500 + fail_429 {
        seen.answered_429.fetch_add(1, Ordering::Relaxed);
        "429 Too Many Requests"
    } else {
        seen.hung.fetch_add(1, Ordering::Relaxed);
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        return;
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}
