//! The servers the tests talk to, started as children on 127.0.0.1 and killed when dropped:
//! the built-in target (`mcpload serve`, the real binary, also playing a hostile server) and
//! the installed third-party ones (the TypeScript "everything" server, the Python SDK
//! server), by command line.

use super::installed::installed;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `mcpload serve ARGS` over HTTP: each flag of `mcpload serve` is an option here.
pub(crate) fn serve(args: &[&str]) -> Server {
    start_http(&serve_cmd(args))
}

/// `mcpload serve --hostile KIND --hostile-every EVERY` over HTTP: every EVERYth tools/call
/// gets the misbehaviour KIND. Its `GET /stats` ([`target_stats`]) is the ground truth
/// `{calls_received, hostile_answers, connections}`.
pub(crate) fn serve_hostile(kind: &str, every: u64) -> Server {
    serve(&["--hostile", kind, "--hostile-every", &every.to_string()])
}

/// The command line of `mcpload serve ARGS` (for `--stdio`, or for [`start_http`]).
pub(crate) fn serve_cmd(args: &[&str]) -> Vec<String> {
    let mut v = vec![env!("CARGO_BIN_EXE_mcpload").to_string(), "serve".into()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// The command line of the TypeScript "everything" server, forced onto 127.0.0.1.
pub(crate) fn everything_cmd(mode: &str) -> Vec<String> {
    let d = installed("interop_servers");
    vec![
        "node".into(),
        "-r".into(),
        d.join("force_loopback.cjs").display().to_string(),
        d.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .display()
            .to_string(),
        mode.into(),
    ]
}

/// The command line of the Python SDK server script.
pub(crate) fn python_cmd(args: &[&str]) -> Vec<String> {
    let d = installed("interop_servers");
    let mut v = vec![
        d.join(".venv/bin/python").display().to_string(),
        d.join("py_server.py").display().to_string(),
    ];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// The resident set of process `pid`, in bytes (`VmRSS` of `/proc/<pid>/status`).
pub(crate) fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"));
    kib * 1024
}

/// A command line as one shell-quoted string (for `--stdio`).
pub(crate) fn line(cmd: &[String]) -> String {
    shell_words::join(cmd)
}

/// A server process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub url: String,
}

impl Server {
    /// The server's process id, to read its ground truth from `/proc` or watch it with
    /// `--server-pid`.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The address it listens on (`127.0.0.1:PORT` of its URL).
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        let authority = self.url.trim_start_matches("http://").split('/').next();
        authority
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {}", self.url))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts an HTTP server and waits (20 s at most) for its port: `LISTENING <port>` on stderr
/// (our preload and script) or `listening on <url>` on stdout (`mcpload serve`). Every other
/// line the server prints goes to the test's output, shown when the test fails.
pub(crate) fn start_http(cmd: &[String]) -> Server {
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .env("PORT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        let program = cmd[0].rsplit('/').next().unwrap_or_default().to_owned();
        std::thread::spawn(move || {
            for l in BufReader::new(stream).lines().map_while(Result::ok) {
                let url = if let Some(port) = l.strip_prefix("LISTENING ") {
                    Some(format!("http://127.0.0.1:{}/mcp", port.trim()))
                } else {
                    l.strip_prefix("listening on ")
                        .map(|u| u.trim().to_string())
                };
                match url {
                    Some(u) => {
                        let _ = tx.send(u);
                    }
                    None => eprintln!("[{program}] {l}"),
                }
            }
        });
    }
    let mut server = Server {
        child,
        url: String::new(),
    };
    server.url = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{cmd:?} did not report a port within 20 s"));
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    server
}

/// `GET /stats` of the target served at `url`, over a plain socket. The body is read by its
/// `Content-Length`, not to the end of the connection: a hostile server keeps it open.
pub(crate) fn target_stats(url: &str) -> Value {
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
    let mut chunk = [0u8; 8192];
    let body = loop {
        let n = s.read(&mut chunk).unwrap();
        text.push_str(std::str::from_utf8(&chunk[..n]).expect("a UTF-8 answer"));
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let length = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok());
        match length {
            Some(length) if body.len() >= length => break &body[..length],
            _ if n == 0 => break body,
            _ => {}
        }
    };
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Sends one request for a legacy session with a plain hyper client (not mcpload's):
/// its HTTP status.
pub(crate) async fn session_request(
    method: &str,
    url: &str,
    session: &str,
    body: &'static str,
) -> u16 {
    use http_body_util::Full;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<bytes::Bytes>>();
    let req = http::Request::builder()
        .method(method)
        .uri(url)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from_static(body.as_bytes())))
        .unwrap();
    client.request(req).await.unwrap().status().as_u16()
}
