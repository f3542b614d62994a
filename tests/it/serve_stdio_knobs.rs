//! The start-up and failure knobs of `mcpload serve --stdio` (`--stdout-banner`,
//! `--exit-after-calls`, `--rss-ballast-mb`, `--startup-ms`, `--serial`), each checked on
//! the real binary as a child process spoken to in JSON-RPC lines: what it prints, how it
//! exits, its RSS read from `/proc`, and the order and lower bounds of its answers.

use crate::support::http_client::{DEADLINE, echo, initialize_request, request};
use crate::support::mcpload;
use crate::support::servers::rss_bytes;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// `mcpload serve --stdio ARGS` as a child, killed when dropped.
struct Served {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Served {
    fn start(args: &[&str]) -> Served {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
            .args(["serve", "--stdio"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Served {
            child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// The next stdout line (`None` at its end), within the deadline.
    async fn line(&mut self) -> Option<String> {
        tokio::time::timeout(DEADLINE, self.lines.next_line())
            .await
            .expect("a line or the end of stdout within the deadline")
            .unwrap()
    }

    /// The next stdout line, as JSON.
    async fn answer(&mut self) -> Value {
        let line = self.line().await.expect("an answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// `initialize` answered, then `notifications/initialized`.
    async fn initialize(&mut self) {
        self.send(&initialize_request(json!(0), "2025-11-25")).await;
        let init = self.answer().await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.send(&note).await;
    }
}

/// A `tools/call` of `sleep` for `ms`.
fn sleep_call(id: u64, ms: u64) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": ms}}),
    )
}

#[tokio::test]
async fn the_banner_is_the_first_stdout_line_and_no_json() {
    const BANNER: &str = "Server v1.2 starting (not JSON-RPC)";
    let mut served = Served::start(&["--stdout-banner", BANNER]);
    served
        .send(&initialize_request(json!(0), "2025-11-25"))
        .await;
    let first = served.line().await.expect("a first line");
    assert_eq!(first, BANNER);
    assert!(serde_json::from_str::<Value>(&first).is_err());
    let init = served.answer().await;
    assert_eq!(init["id"], 0, "{init}");

    // Without the knob the first line is the answer.
    let mut plain = Served::start(&[]);
    plain
        .send(&initialize_request(json!(0), "2025-11-25"))
        .await;
    assert_eq!(plain.answer().await["id"], 0);
}

#[tokio::test]
async fn three_calls_are_answered_then_the_fourth_ends_the_process_with_code_3() {
    let mut served = Served::start(&["--exit-after-calls", "3"]);
    served.initialize().await;
    // One call in flight at a time: each answered before the next is sent.
    for id in 1..=3 {
        served.send(&echo(id)).await;
        let answer = served.answer().await;
        assert_eq!(answer["id"], id, "{answer}");
        assert!(answer.get("result").is_some(), "{answer}");
    }
    served.send(&echo(4)).await;
    assert_eq!(
        served.line().await,
        None,
        "the fourth call is never answered"
    );
    let status = tokio::time::timeout(DEADLINE, served.child.wait())
        .await
        .expect("exits within the deadline")
        .unwrap();
    assert_eq!(status.code(), Some(3), "{status}");
    let mut stderr = String::new();
    let mut pipe = served.child.stderr.take().unwrap();
    pipe.read_to_string(&mut stderr).await.unwrap();
    assert!(
        stderr
            .lines()
            .any(|l| l == "mcpload serve: exiting after 3 calls"),
        "stderr: {stderr}"
    );
}

#[tokio::test]
async fn the_ballast_is_resident_from_the_start() {
    const MIB: u64 = 1 << 20;
    let mut ballasted = Served::start(&["--rss-ballast-mb", "64"]);
    let mut plain = Served::start(&[]);
    // Answered: both are past their start-up, the ballast written.
    ballasted.initialize().await;
    plain.initialize().await;
    let with = rss_bytes(ballasted.child.id().unwrap());
    let without = rss_bytes(plain.child.id().unwrap());
    assert!(with >= 64 * MIB, "RSS {with} bytes with 64 MiB of ballast");
    // The plain process holds 30 to 40 MiB (the binary, a runtime thread per core, the
    // allocator); the ballast adds its own 64 MiB on top, most of it at least.
    assert!(
        without < 64 * MIB,
        "RSS {without} bytes without ballast: not well below 64 MiB"
    );
    assert!(
        with >= without + 48 * MIB,
        "RSS {with} bytes with 64 MiB of ballast, {without} without"
    );
}

#[tokio::test]
async fn initialize_waits_for_the_start_up() {
    let started = Instant::now();
    let mut served = Served::start(&["--startup-ms", "1500"]);
    served
        .send(&initialize_request(json!(0), "2025-11-25"))
        .await;
    assert_eq!(served.answer().await["id"], 0);
    // A lower bound only: a busy machine makes it later, never sooner.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "answered after {took:?}"
    );
}

/// Sends a `sleep` of `slow_ms` (id 1) and at once an `echo` (id 2); returns the ids in the
/// order answered and how long after its sending the echo was answered.
async fn slow_then_fast(served: &mut Served, slow_ms: u64) -> (Vec<Value>, Duration) {
    served.initialize().await;
    served.send(&sleep_call(1, slow_ms)).await;
    let sent = Instant::now();
    served.send(&echo(2)).await;
    let mut order = Vec::new();
    let mut fast_took = None;
    for _ in 0..2 {
        let answer = served.answer().await;
        assert!(answer.get("result").is_some(), "{answer}");
        if answer["id"] == 2 {
            fast_took = Some(sent.elapsed());
        }
        order.push(answer["id"].clone());
    }
    (order, fast_took.expect("the echo answered"))
}

#[tokio::test]
async fn serial_service_holds_a_fast_call_behind_a_slow_one() {
    const SLOW_MS: u64 = 1000;
    let mut serial = Served::start(&["--serial"]);
    let (order, fast_took) = slow_then_fast(&mut serial, SLOW_MS).await;
    assert_eq!(order, [json!(1), json!(2)], "serial: the slow call first");
    // The echo waited for the sleep, sent a moment before it: its delay less a margin.
    assert!(
        fast_took >= Duration::from_millis(SLOW_MS - 200),
        "the echo took {fast_took:?} beside a {SLOW_MS} ms sleep"
    );

    let mut concurrent = Served::start(&[]);
    let (order, _) = slow_then_fast(&mut concurrent, SLOW_MS).await;
    assert_eq!(
        order,
        [json!(2), json!(1)],
        "concurrent: the fast call first"
    );
}

#[test]
fn the_stdio_knobs_are_refused_over_http() {
    for args in [
        &["serve", "--serial"][..],
        &["serve", "--startup-ms", "10"],
        &["serve", "--rss-ballast-mb", "1"],
        &["serve", "--stdout-banner", "hi"],
        &["serve", "--exit-after-calls", "1"],
    ] {
        let out = mcpload(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("served over stdio only: add --stdio"),
            "{args:?}: {stderr}"
        );
    }
}
