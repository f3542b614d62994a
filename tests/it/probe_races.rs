//! `mcpload probe --races` (the binary, `--json`) against the built-in target's race knobs:
//! each count it reports equals the target's own ground truth (`GET /stats`), exactly, and a
//! first-call deadlock is found over HTTP and stdio within a generous budget. Then against
//! the real servers, whose findings the README records.

use crate::support::machine;
use crate::support::run::watch;
use crate::support::servers::*;
use crate::support::{bin, scratch::scratch};
use serde_json::Value;
use std::time::Duration;

/// `mcpload probe --races --json ARGS`, killed past `budget` (a hang fails the test).
fn races(args: &[&str], budget: Duration) -> Value {
    let mut cmd = bin();
    cmd.args(["probe", "--races", "--json"]).args(args);
    let w = watch(cmd, budget);
    assert!(!w.overran, "probe --races {args:?} ran past {budget:?}");
    assert!(
        w.output.status.success(),
        "probe --races {args:?} failed: {}",
        String::from_utf8_lossy(&w.output.stderr)
    );
    serde_json::from_slice(&w.output.stdout).expect("probe --races --json prints JSON")
}

fn check<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {r:#}"))
}

fn count(r: &Value, name: &str, key: &str) -> u64 {
    check(r, name)["counts"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no count {key} in {name}: {r:#}"))
}

/// The one finding of `defect` in check `name`.
fn finding<'a>(r: &'a Value, name: &str, defect: &str) -> &'a Value {
    check(r, name)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["defect"] == defect)
        .unwrap_or_else(|| panic!("no {defect} finding in {name}: {r:#}"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is no count"))
}

const BUDGET: Duration = Duration::from_secs(90);

#[test]
fn a_racy_counter_loses_exactly_the_updates_the_target_overwrote_and_an_atomic_one_none() {
    let _share = machine::loading();
    let racy = serve(&["--racy", "--race-window-ms", "50"]);
    let r = races(
        &[
            "--url",
            &racy.url,
            "--check",
            "lost_updates",
            "--concurrency",
            "64",
        ],
        BUDGET,
    );
    let truth = target_stats(&racy.url);
    let lost = count(&r, "lost_updates", "lost_updates");
    assert_eq!(lost, n(&truth["races"]["overwritten"]), "{r:#}\n{truth:#}");
    assert!(
        lost > 0,
        "64 adds with a 50 ms window between read and write: {r:#}"
    );
    assert_eq!(check(&r, "lost_updates")["verdict"], "found");
    let f = finding(&r, "lost_updates", "lost_updates");
    let v = &f["values"];
    assert_eq!(
        n(&v["expected"]) - (n(&v["after"]) - n(&v["before"])),
        lost,
        "the evidence adds up: {f:#}"
    );
    assert_eq!(n(&v["expected"]), 64);
    assert!(
        f["request_ids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id.as_str().unwrap().starts_with("lost-add-")),
        "{f:#}"
    );
    assert!(f["cause"].as_str().unwrap().contains("read-modify-write"));
    for c in ["first_call", "idempotency", "read_your_write"] {
        assert_eq!(check(&r, c)["verdict"], "skipped", "{c}");
    }

    let atomic = serve(&[]);
    let r = races(&["--url", &atomic.url, "--check", "lost_updates"], BUDGET);
    let truth = target_stats(&atomic.url);
    assert_eq!(check(&r, "lost_updates")["verdict"], "ok", "{r:#}");
    assert_eq!(count(&r, "lost_updates", "lost_updates"), 0);
    assert_eq!(n(&truth["races"]["overwritten"]), 0);
    assert_eq!(n(&truth["races"]["counter_adds"]), 64);
}

#[test]
fn idempotency_broken_one_time_in_n_gives_exactly_that_many_double_effects() {
    let _share = machine::loading();
    for every in [7u64, 8] {
        let server = serve(&["--job-key-break-every", &every.to_string()]);
        let r = races(&["--url", &server.url, "--check", "idempotency"], BUDGET);
        let truth = target_stats(&server.url);
        let jobs = &truth["jobs"];
        // 64 identical starts: the first creates the job, the 63 others name a known key,
        // and every `every`th of those starts a job anyway; the changed input is known-key
        // start 64.
        let double = count(&r, "idempotency", "double_effects");
        let accepted = count(&r, "idempotency", "accepted_conflicts");
        assert_eq!(double, n(&jobs["double_effects"]), "{r:#}\n{jobs:#}");
        assert_eq!(double, 63 / every);
        assert_eq!(accepted, n(&jobs["accepted_conflicts"]), "{r:#}\n{jobs:#}");
        assert_eq!(accepted, u64::from(64 % every == 0));
        let f = finding(&r, "idempotency", "double_effects");
        assert_eq!(n(&f["values"]["read_back"]), double + 1, "{f:#}");
        assert_eq!(n(&f["values"]["distinct_effects"]), double + 1, "{f:#}");
        assert!(f["cause"].as_str().unwrap().contains("idempotency key"));
    }
    let sound = serve(&[]);
    let r = races(&["--url", &sound.url, "--check", "idempotency"], BUDGET);
    let jobs = target_stats(&sound.url)["jobs"].clone();
    assert_eq!(check(&r, "idempotency")["verdict"], "ok", "{r:#}");
    assert_eq!(
        (
            n(&jobs["created"]),
            n(&jobs["conflicts"]),
            n(&jobs["replays"])
        ),
        (1, 1, 63)
    );
    let summary = check(&r, "idempotency")["summary"].as_str().unwrap();
    assert!(summary.ends_with("refused (error -32010)"), "{summary}");
}

#[test]
fn a_first_call_deadlock_is_found_over_http_within_the_budget() {
    let _share = machine::loading();
    let server = serve(&["--lazy-init-ms", "2000", "--first-call-deadlock", "4"]);
    let started = std::time::Instant::now();
    let r = races(
        &[
            "--url",
            &server.url,
            "--concurrency",
            "8",
            "--hang-after",
            "500ms",
            "--slow-within",
            "4s",
        ],
        BUDGET,
    );
    let took = started.elapsed();
    let truth = target_stats(&server.url);
    let first = check(&r, "first_call");
    assert_eq!(first["verdict"], "found", "{r:#}");
    let hung = count(&r, "first_call", "first_call_hangs");
    assert_eq!(
        hung,
        n(&truth["races"]["first_call_hung"]),
        "{r:#}\n{truth:#}"
    );
    assert_eq!(
        hung, 8,
        "the deadlock holds every call from the fourth on, and the first three"
    );
    let f = finding(&r, "first_call", "first_call_hangs");
    assert_eq!(f["request_ids"].as_array().unwrap().len(), 8);
    // The server is wedged: the other checks are not run against it.
    for c in ["lost_updates", "idempotency", "read_your_write"] {
        assert_eq!(check(&r, c)["verdict"], "skipped", "{c}: {r:#}");
    }
    assert!(took < BUDGET, "{took:?}");
}

#[test]
fn a_first_call_deadlock_is_found_over_stdio_on_each_fresh_child_and_slow_is_not_hung() {
    let _share = machine::loading();
    let stuck = line(&serve_cmd(&[
        "--stdio",
        "--lazy-init-ms",
        "2000",
        "--first-call-deadlock",
        "4",
    ]));
    let r = races(
        &[
            "--stdio",
            &stuck,
            "--check",
            "first_call",
            "--attempts",
            "2",
            "--concurrency",
            "8",
            "--hang-after",
            "500ms",
            "--slow-within",
            "4s",
        ],
        BUDGET,
    );
    assert_eq!(r["transport"], "stdio");
    assert_eq!(check(&r, "first_call")["verdict"], "found", "{r:#}");
    assert_eq!(count(&r, "first_call", "first_call_hangs"), 16);
    let f = finding(&r, "first_call", "first_call_hangs");
    assert_eq!(n(&f["values"]["attempts_with_hangs"]), 2, "{f:#}");

    // A lazy initialisation longer than --hang-after but no deadlock: slow, none hung.
    let slow = line(&serve_cmd(&["--stdio", "--lazy-init-ms", "1500"]));
    let r = races(
        &[
            "--stdio",
            &slow,
            "--check",
            "first_call",
            "--attempts",
            "2",
            "--concurrency",
            "8",
            "--hang-after",
            "500ms",
            "--slow-within",
            "20s",
        ],
        BUDGET,
    );
    let first = check(&r, "first_call");
    assert_eq!(first["verdict"], "slow", "{r:#}");
    assert_eq!(count(&r, "first_call", "first_call_hangs"), 0);
    assert_eq!(count(&r, "first_call", "answered"), 16);
    assert_eq!(
        count(&r, "first_call", "slow"),
        16,
        "each waited for the 1.5 s initialisation"
    );
}

#[test]
fn lagging_reads_are_stale_exactly_as_often_as_the_target_served_them() {
    let _share = machine::loading();
    let server = serve(&["--read-lag-ms", "5000"]);
    let r = races(
        &[
            "--url",
            &server.url,
            "--check",
            "read_your_write",
            "--concurrency",
            "16",
        ],
        BUDGET,
    );
    let truth = target_stats(&server.url);
    let stale = count(&r, "read_your_write", "stale_reads");
    assert_eq!(stale, n(&truth["races"]["stale_reads"]), "{r:#}\n{truth:#}");
    assert!(stale > 0, "reads within 5 s of their write: {r:#}");
    assert_eq!(count(&r, "read_your_write", "compared"), 16);
    let f = finding(&r, "read_your_write", "stale_reads");
    let pair = &f["values"]["pairs"][0];
    assert_ne!(pair["wrote"], pair["saw"], "{f:#}");
}

#[test]
fn the_profile_names_the_calls_and_the_builtin_target_starts_fresh_for_each_attempt() {
    let _share = machine::loading();
    let dir = scratch("probe-races-profile");
    let profile = dir.join("races.toml");
    std::fs::write(
        &profile,
        r#"
[target.builtin]
racy = true
race_window_ms = 100
lazy_init_ms = 300

[races]
concurrency = 16
checks = ["first_call", "lost_updates"]

[races.first_call]
call = { method = "tools/call", tool = "counter_read", args = { key = "{{var.key}}" } }
hang_after = "100ms"
slow_within = "20s"
attempts = 2

[races.lost_updates]
add = { method = "tools/call", tool = "counter_add", args = { key = "{{var.key}}", by = 2 } }
read = { method = "tools/call", tool = "counter_read", args = { key = "{{var.key}}" } }
value = "result.structuredContent.value"
step = 2
"#,
    )
    .unwrap();
    let r = races(&[profile.to_str().unwrap()], BUDGET);
    assert_eq!(r["target"], "builtin");
    // Each attempt's server was fresh: every first call waited for its initialisation.
    assert_eq!(count(&r, "first_call", "attempts"), 2);
    assert_eq!(count(&r, "first_call", "slow"), 32, "{r:#}");
    let lost = check(&r, "lost_updates");
    assert_eq!(lost["verdict"], "found", "{r:#}");
    let f = finding(&r, "lost_updates", "lost_updates");
    assert_eq!(n(&f["values"]["expected"]), 32, "16 adds of 2");
    assert_eq!(
        n(&f["values"]["expected"]) - (n(&f["values"]["after"]) - n(&f["values"]["before"])),
        n(&f["count"])
    );
    assert_eq!(check(&r, "idempotency")["verdict"], "skipped");
}

/// The real servers: a burst of first calls on a fresh session (HTTP) or on fresh children
/// (stdio) is answered in full, and the checks that need a stateful tool say which tools
/// they looked for (neither server has a counter or an idempotency key).
#[test]
fn the_real_servers_answer_bursts_of_first_calls_and_say_what_they_lack() {
    let _share = machine::loading();
    let everything = start_http(&everything_cmd("streamableHttp"));
    let python = start_http(&python_cmd(&["http"]));
    let http = [
        ("everything", everything.url.clone()),
        ("python", python.url.clone()),
    ];
    let stdio = [
        ("everything", line(&everything_cmd("stdio"))),
        ("python", line(&python_cmd(&["stdio"]))),
    ];
    let runs = http
        .iter()
        .map(|(name, url)| (*name, vec!["--url", url.as_str()], 1))
        .chain(
            stdio
                .iter()
                .map(|(name, cmd)| (*name, vec!["--stdio", cmd.as_str(), "--attempts", "2"], 2)),
        );
    for (name, target, attempts) in runs {
        let r = races(&target, BUDGET);
        let calls = 64 * attempts;
        let first = check(&r, "first_call");
        assert_eq!(count(&r, "first_call", "calls"), calls, "{name}: {r:#}");
        assert_eq!(
            count(&r, "first_call", "answered")
                + count(&r, "first_call", "failed")
                + count(&r, "first_call", "first_call_hangs"),
            calls,
            "{name}: every first call is accounted for: {r:#}"
        );
        assert_eq!(
            count(&r, "first_call", "first_call_hangs"),
            0,
            "{name}: {r:#}"
        );
        assert_eq!(count(&r, "first_call", "failed"), 0, "{name}: {r:#}");
        assert!(["ok", "slow"].contains(&first["verdict"].as_str().unwrap()));
        for (c, tool) in [
            ("lost_updates", "counter_add"),
            ("idempotency", "job_start"),
            ("read_your_write", "counter_add"),
        ] {
            let skipped = check(&r, c);
            assert_eq!(skipped["verdict"], "skipped", "{name} {c}: {r:#}");
            let why = skipped["summary"].as_str().unwrap();
            assert!(
                why.contains(tool) && why.contains("[races."),
                "{name} {c}: {why}"
            );
        }
    }
}
