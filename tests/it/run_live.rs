//! The live view end to end: `mcpload run` in a real terminal (tmux, read back with
//! `capture-pane`) shows its screen and stops on `q`, writing what it measured and leaving the
//! terminal as it found it; with `CI` set or no terminal it prints plain lines on stderr, with
//! `--quiet` nothing, and never an escape code.

use crate::support::bin;
use crate::support::installed::installed;
use crate::support::run::{steps, summary};
use crate::support::scratch::scratch;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long the screen may take to show, and the run to end once asked.
const PATIENCE: Duration = Duration::from_secs(60);

/// tmux on a socket of this test's own, so that no other tmux is touched.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        installed("live");
        Tmux {
            socket: format!("mcpload-{name}-{}", std::process::id()),
        }
    }

    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env_remove("CI")
            .output()
            .expect("run tmux")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// Polls the screen until `ready` holds, or panics with the last screen after
    /// [`PATIENCE`].
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The seconds the live screen's latency panel covers, from its title ("latency, last N s").
fn latency_window_s(screen: &str) -> Option<u32> {
    let title = "latency, last ";
    let rest = &screen[screen.find(title)? + title.len()..];
    rest.split(' ').next()?.parse().ok()
}

/// Polls until `path` exists, or panics after [`PATIENCE`].
fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{} was never written", path.display());
}

#[test]
fn in_a_terminal_the_screen_shows_the_run_and_q_stops_it_keeping_what_was_measured() {
    let dir = scratch("live_screen");
    let out = dir.join("run");
    let code = dir.join("exit-code");
    let tmux = Tmux::new("screen");
    // One step far longer than the test's patience: only `q` can end it in time.
    let script = format!(
        "NO_COLOR=1 '{bin}' run --builtin -c 2 -d 600s --warmup 0s --threshold 'error_rate<0.5' \
         --out '{out}'; echo $? > '{code}'; sleep 600",
        bin = env!("CARGO_BIN_EXE_mcpload"),
        out = out.display(),
        code = code.display(),
    );
    let started = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "120",
        "-y",
        "40",
        "sh",
        "-c",
        &script,
    ]);
    assert!(started.status.success(), "{started:?}");
    // The title counts the seconds in its window, up to 5: it reads 2 for one second only,
    // which a poll held up on a busy machine could miss.
    let screen = tmux.wait_for("live screen with two measured seconds or more", |s| {
        latency_window_s(s).is_some_and(|n| n >= 2)
    });
    for want in [
        "mcpload run builtin",
        "step 1/1 · 2 concurrent",
        "of 600 s",
        "target    2 concurrent (closed loop)",
        "p99  ",
        "no data    error_rate<0.5",
        "q or Ctrl-C: stop the run",
    ] {
        assert!(
            screen.contains(want),
            "{want:?} not on the screen:\n{screen}"
        );
    }
    assert!(tmux.cmd(&["send-keys", "-t", "t", "q"]).status.success());
    assert_eq!(wait_for_file(&code).trim(), "130", "q is an interruption");
    let after = tmux.wait_for("terminal report", |s| s.contains("results:"));
    assert!(
        !after.contains("q or Ctrl-C"),
        "the live screen is gone once the run ends:\n{after}"
    );
    let s = summary(&out);
    assert_eq!(s["status"], "interrupted", "{s}");
    let rows = steps(&out);
    assert_eq!(rows.len(), 1, "the interrupted step is kept");
    assert!(rows[0]["requests"].parse::<u64>().unwrap() > 0);
}

fn plain_run(name: &str, quiet: bool) -> Output {
    let dir = scratch(name);
    let out = dir.join("run");
    let mut args = vec![
        "run",
        "--builtin",
        "-c",
        "2",
        "-d",
        "2s",
        "--warmup",
        "0s",
        "--out",
        out.to_str().unwrap(),
    ];
    if quiet {
        args.push("--quiet");
    }
    let output = bin().args(&args).env("CI", "true").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    output
}

#[test]
fn with_ci_set_a_plain_line_goes_to_stderr_with_no_escape_codes() {
    let output = plain_run("live_plain", false);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("mcpload: step 1/1 · 2 concurrent · 1 s of 2 s")),
        "{stderr}"
    );
    assert!(!output.stdout.contains(&0x1b), "an escape code on stdout");
    assert!(!output.stderr.contains(&0x1b), "an escape code on stderr");
}

#[test]
fn quiet_prints_no_live_line() {
    let output = plain_run("live_quiet", true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("mcpload: step"), "{stderr}");
    assert!(!output.stdout.contains(&0x1b), "an escape code on stdout");
}
