//! Task mode and input-required rounds, end to end: `mcpload run` of mixes whose calls are
//! tasks or answer input rounds, against the built-in target with its task faults
//! (docs/target.md, "Tasks") and `ask_input`. Every count equals the target's ground truth.

use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::{serve, target_stats};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

type Row = HashMap<String, String>;

/// Runs `body` (the profile after `[target]`) for one closed-loop step of `clients` against
/// `target` (a `[target]` key: `url = …`, `stdio = …`) at `revision`; returns its steps.csv
/// row, its ops.csv rows by operation, and its summary.json step.
fn run_tasks(dir: &Path, target: &str, revision: &str, body: &str, clients: &str) -> RunRows {
    let text = format!(
        "[target]\n{target}\nprotocol = '{revision}'\n[load]\ngraceful_stop = \"4s\"\n{body}"
    );
    let p = profile(dir, "tasks", &text);
    let out_dir = dir.join("run");
    let out = run(&[
        p.to_str().unwrap(),
        "-c",
        clients,
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--timeout",
        "3s",
        "--keep-going",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = steps(&out_dir);
    assert_eq!(rows.len(), 1);
    let step = rows[0].clone();
    assert_identity(&step);
    let ops = table(&out_dir, "ops.csv")
        .into_iter()
        .map(|r| (r["op"].clone(), r))
        .collect();
    let summary = summary(&out_dir)["steps"][0].clone();
    let terminal = String::from_utf8_lossy(&out.stdout).into_owned();
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    RunRows {
        step,
        ops,
        summary,
        terminal,
        html,
    }
}

struct RunRows {
    step: Row,
    ops: HashMap<String, Row>,
    summary: Value,
    /// What the run printed, and its report.html.
    terminal: String,
    html: String,
}

impl RunRows {
    fn n(&self, col: &str) -> u64 {
        num(&self.step, col) as u64
    }

    fn op(&self, op: &str, col: &str) -> u64 {
        num(&self.ops[op], col) as u64
    }

    /// A count of summary.json's `flows`.
    fn flow(&self, key: &str) -> &Value {
        &self.summary["flows"][key]
    }
}

/// The `[target]` line of a URL.
fn url_of(url: &str) -> String {
    format!("url = '{url}'")
}

/// A count of the target's `/stats`, at a JSON pointer.
fn truth(stats: &Value, pointer: &str) -> u64 {
    stats
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no {pointer} in {stats}"))
}

const SLOW_TASK: &str = r#"
[[mix]]
method = "tools/call"
tool = "slow_task"
args = { ms = 30 }
task = true
task_timeout = "1s"
"#;

/// A faultless target: every task created is polled to its end and its result taken as the
/// revision says; the counts are the target's, the operation's latency is the whole call.
#[test]
fn tasks_run_to_their_end_as_each_revision_says() {
    let _share = machine::loading();
    for revision in ["2025-11-25", "2026-07-28"] {
        let target = serve(&["--task-poll-interval-ms", "10"]);
        let dir = scratch(&format!("tasks-clean-{revision}"));
        let r = run_tasks(&dir, &url_of(&target.url), revision, SLOW_TASK, "4");
        let stats = target_stats(&target.url);
        let created = truth(&stats, "/tasks/created");
        assert!(created > 0, "{revision}: no task");
        assert_eq!(r.n("tasks_created"), created, "{revision}");
        assert_eq!(r.n("tasks_completed"), truth(&stats, "/tasks/completed"));
        assert_eq!(
            r.n("task_polls"),
            truth(&stats, "/tasks/polls"),
            "{revision}"
        );
        assert_eq!(r.op("tasks/get", "requests"), r.n("task_polls"));
        let results = if revision == "2025-11-25" {
            r.op("tasks/result", "requests")
        } else {
            assert!(
                !r.ops.contains_key("tasks/result"),
                "2026-07-28 has it inline"
            );
            0
        };
        assert_eq!(results, truth(&stats, "/tasks/results"), "{revision}");
        assert_eq!(r.n("calls"), created);
        assert_eq!(r.n("calls_answered"), created);
        assert_eq!(r.n("task_anomalies"), 0, "{revision}");
        assert_eq!(r.op("slow_task", "requests"), created);
        // The call's latency covers the task's work, which its creation answer did not.
        assert!(num(&r.ops["slow_task"], "p50_ms") >= 30.0, "{revision}");
        assert!(num(&r.step, "time_to_task_p50_ms") < num(&r.step, "time_to_terminal_p50_ms"));
        assert!(r.n("polls_per_task_p50") >= 1);
        assert!(r.n("tasks_live_max") >= 1 && r.n("tasks_live_max") <= 4);
        assert_eq!(
            r.n("tasks_live_max"),
            truth(&stats, "/tasks/working_max"),
            "{revision}: the peak of live tasks"
        );
    }
}

/// A task of known work time polled at a known interval takes that time over the interval in
/// polls, within one: the server's `pollInterval`, and the profile's `poll_interval` where it
/// is the shorter. (Each poll waits its interval after the answer before, so a busy machine
/// can only make a task need fewer polls, never more.)
#[test]
fn polls_per_task_follow_the_interval_within_one_poll() {
    let _share = machine::loading();
    let job_ms = 500;
    for (revision, server_ms, profile_ms) in [
        ("2025-11-25", 100, None),
        ("2026-07-28", 100, None),
        ("2026-07-28", 250, Some(100)),
    ] {
        let target = serve(&["--task-poll-interval-ms", &server_ms.to_string()]);
        let dir = scratch(&format!("tasks-polls-{revision}-{server_ms}"));
        let interval =
            profile_ms.map_or(String::new(), |ms| format!("poll_interval = \"{ms}ms\"\n"));
        let body = format!(
            "[[mix]]\nmethod = \"tools/call\"\ntool = \"slow_task\"\nargs = {{ ms = {job_ms} }}\n\
             task = true\ntask_timeout = \"3s\"\n{interval}"
        );
        let r = run_tasks(&dir, &url_of(&target.url), revision, &body, "4");
        let poll_ms = profile_ms.map_or(server_ms, |p| p.min(server_ms));
        let expected = job_ms / poll_ms;
        let case = format!("{revision}, pollInterval {server_ms} ms, profile {profile_ms:?}");
        let ended = r.n("tasks_completed");
        assert!(ended >= 4, "{case}: {ended} tasks");
        assert_eq!(r.n("tasks_created"), ended, "{case}");
        assert_eq!(
            r.n("task_polls"),
            truth(&target_stats(&target.url), "/tasks/polls")
        );
        let within = |polls: u64, what: &str| {
            assert!(
                polls.abs_diff(expected) <= 1,
                "{case}: {what} {polls} polls, expected {job_ms} / {poll_ms} = {expected}"
            );
        };
        within(r.n("polls_per_task_p50"), "p50");
        within(r.flow("polls_per_task_max").as_u64().unwrap(), "max");
        within(
            (r.n("task_polls") as f64 / ended as f64).round() as u64,
            "mean",
        );
    }
}

/// Each task fault of the target shows as its anomaly, exactly as often as the target
/// played it, in both revisions.
#[test]
fn each_task_fault_is_counted_exactly_in_both_eras() {
    let _share = machine::loading();
    let confirmed = format!("{SLOW_TASK}task_confirm = true\n");
    for revision in ["2025-11-25", "2026-07-28"] {
        let target = serve(&[
            "--task-poll-interval-ms",
            "10",
            "--task-fault",
            "forget=5,never-ends=7,regress=9,mismatch=6,get-error=4",
        ]);
        let dir = scratch(&format!("tasks-faults-{revision}"));
        let r = run_tasks(&dir, &url_of(&target.url), revision, &confirmed, "4");
        let stats = target_stats(&target.url);
        for (col, key) in [
            ("task_forgotten", "forget"),
            ("tasks_unfinished", "never_ends"),
            ("task_status_regressed", "regress"),
            ("task_result_mismatch", "mismatch"),
        ] {
            let played = truth(&stats, &format!("/tasks/faults/{key}"));
            assert!(played > 0, "{revision}: the target never played {key}");
            assert_eq!(r.flow(col).as_u64(), Some(played), "{revision}: {col}");
        }
        assert_eq!(
            r.flow("task_poll_errors").as_u64(),
            Some(truth(&stats, "/tasks/faults/get_error")),
            "{revision}: task_poll_errors"
        );
        assert_eq!(r.flow("task_id_reused").as_u64(), Some(0));
        assert_eq!(r.n("tasks_created"), truth(&stats, "/tasks/created"));
        // Every task still working at the timeout was cancelled, and only those.
        assert_eq!(
            r.op("tasks/cancel", "requests"),
            r.n("tasks_unfinished"),
            "{revision}"
        );
        // Each task ended one way.
        assert_eq!(
            r.n("tasks_completed")
                + r.n("tasks_failed")
                + r.n("tasks_cancelled")
                + r.n("tasks_expired")
                + r.n("tasks_unfinished")
                + r.flow("task_forgotten").as_u64().unwrap(),
            r.n("tasks_created"),
            "{revision}"
        );
        assert_eq!(
            r.n("calls_failed"),
            r.n("tasks_unfinished") + r.flow("task_forgotten").as_u64().unwrap()
        );
    }
}

/// Over stdio too, in both revisions: each task fault counted exactly (the target writes
/// its ground truth to a file when its stdin closes).
#[test]
fn each_task_fault_is_counted_exactly_over_stdio() {
    let _share = machine::loading();
    let confirmed = format!("{SLOW_TASK}task_confirm = true\n");
    for revision in ["2025-11-25", "2026-07-28"] {
        let dir = scratch(&format!("tasks-stdio-{revision}"));
        let stats_file = dir.join("target-stats.json");
        let command = format!(
            "stdio = '{} serve --stdio --task-poll-interval-ms 10 --task-fault \
             forget=5,never-ends=7,regress=9,mismatch=6,get-error=4 --stats {}'",
            env!("CARGO_BIN_EXE_mcpload"),
            stats_file.display()
        );
        let r = run_tasks(&dir, &command, revision, &confirmed, "4");
        let stats: Value =
            serde_json::from_str(&std::fs::read_to_string(&stats_file).unwrap()).unwrap();
        for (col, key) in [
            ("task_forgotten", "forget"),
            ("tasks_unfinished", "never_ends"),
            ("task_status_regressed", "regress"),
            ("task_result_mismatch", "mismatch"),
            ("task_poll_errors", "get_error"),
        ] {
            let played = truth(&stats, &format!("/tasks/faults/{key}"));
            assert!(played > 0, "{revision}: the target never played {key}");
            assert_eq!(r.flow(col).as_u64(), Some(played), "{revision}: {col}");
        }
        assert_eq!(r.n("tasks_created"), truth(&stats, "/tasks/created"));
        // The target's `polls` are the tasks/get it answered with a task.
        assert_eq!(
            r.n("task_polls"),
            truth(&stats, "/tasks/polls")
                + truth(&stats, "/tasks/faults/get_error")
                + truth(&stats, "/tasks/unknown_task")
        );
    }
}

/// A target that gives one task id to two calls: each second use is counted.
#[test]
fn a_task_id_given_twice_is_counted() {
    let _share = machine::loading();
    for revision in ["2025-11-25", "2026-07-28"] {
        let target = serve(&[
            "--task-poll-interval-ms",
            "10",
            "--task-fault",
            "reuse-id=5",
        ]);
        let dir = scratch(&format!("tasks-reuse-{revision}"));
        let r = run_tasks(&dir, &url_of(&target.url), revision, SLOW_TASK, "4");
        let stats = target_stats(&target.url);
        let played = truth(&stats, "/tasks/faults/reuse_id");
        assert!(played > 0);
        assert!(r.n("task_anomalies") >= played);
        assert_eq!(
            r.flow("task_id_reused").as_u64(),
            Some(played),
            "{revision}"
        );
        // The task whose id was given again is gone: its call, if still polling, is told so.
        assert!(r.flow("task_forgotten").as_u64().unwrap() <= played);
    }
}

/// Input-required rounds (2026-07-28) answered from the profile's canned input: each round
/// the target asked for is answered and counted, and with `then = "task"` the last one
/// leads into a task.
#[test]
fn input_rounds_are_answered_and_lead_into_a_task() {
    let _share = machine::loading();
    let target = serve(&["--task-poll-interval-ms", "10"]);
    let dir = scratch("tasks-input");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "ask_input"
args = { rounds = 2, kinds = ["elicitation", "sampling", "roots"], then = "task", ms = 20 }
task = true

[[mix]]
method = "tools/call"
tool = "ask_input"
name = "ask_once"
args = { rounds = 1 }

[input]
elicitation = { action = "accept", content = { name = "mcpload" } }
sampling = "a canned reply"
roots = ["file:///tmp/mcpload"]
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2026-07-28", body, "4");
    let stats = target_stats(&target.url);
    let asked = truth(&stats, "/input/rounds_asked");
    assert!(asked > 0);
    assert_eq!(r.n("input_rounds"), asked);
    assert_eq!(truth(&stats, "/input/rounds_answered"), asked);
    for key in ["responses_missing", "responses_invalid", "state_invalid"] {
        assert_eq!(truth(&stats, &format!("/input/{key}")), 0, "{key}");
    }
    let to_task = truth(&stats, "/input/to_task");
    assert!(to_task > 0);
    assert_eq!(r.n("tasks_created"), to_task);
    assert_eq!(r.n("tasks_completed"), to_task);
    assert_eq!(r.n("input_unanswered"), 0);
    // Two rounds and a task, or one round: every round is a request of the operation.
    let multi = r.op("ask_input", "requests");
    let once = r.op("ask_once", "requests");
    assert_eq!(multi + once, r.n("calls") + asked);
    assert_eq!(r.flow("rounds_per_call_max").as_u64(), Some(2));
    assert_eq!(r.n("calls_failed"), 0);
}

/// A call that needs two rounds and then completes: two rounds counted, and the call's
/// latency covers both (each round is answered only after the one before came back).
#[test]
fn two_rounds_then_a_result_are_one_call() {
    let _share = machine::loading();
    let target = serve(&["--service-ms", "fixed:20"]);
    let dir = scratch("tasks-two-rounds");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "ask_input"
args = { rounds = 2 }

[input]
elicitation = { action = "accept", content = { name = "mcpload" } }
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2026-07-28", body, "2");
    let stats = target_stats(&target.url);
    let calls = r.n("calls_answered");
    assert!(calls > 0);
    assert_eq!(truth(&stats, "/input/completed"), calls);
    assert_eq!(r.n("input_rounds"), 2 * calls);
    assert_eq!(r.op("ask_input", "requests"), 3 * calls);
    assert_eq!(r.flow("rounds_per_call_p50").as_u64(), Some(2));
    assert_eq!(r.flow("rounds_per_call_max").as_u64(), Some(2));
    // Three requests of at least 20 ms of service each, one after the other.
    assert!(num(&r.ops["ask_input"], "p50_ms") >= 60.0);
    assert!(num(&r.step, "calls_per_s") > 0.0);
}

/// An input kind the profile has no answer for ends the call, counted with its kind; rounds
/// past `max_rounds` end it too. Neither hangs.
#[test]
fn unanswered_input_and_too_many_rounds_end_the_call() {
    let _share = machine::loading();
    let target = serve(&[]);
    let dir = scratch("tasks-input-unanswered");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "ask_input"
name = "roots"
args = { kinds = ["roots"] }

[[mix]]
method = "tools/call"
tool = "ask_input"
name = "long"
args = { rounds = 5 }

[input]
elicitation = { action = "decline" }
max_rounds = 2
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2026-07-28", body, "2");
    let stats = target_stats(&target.url);
    let roots_calls = r.op("roots", "requests");
    assert!(roots_calls > 0);
    assert_eq!(r.n("input_unanswered"), roots_calls);
    assert_eq!(r.op("roots", "input_unanswered"), roots_calls);
    assert_eq!(r.op("roots", "ok"), 0);
    assert_eq!(
        r.summary["input_unanswered_by_kind"]["roots"].as_u64(),
        Some(roots_calls)
    );
    // A long call: asked three rounds, two answered, the third over the limit.
    let long_calls = r.n("input_rounds_exceeded");
    assert!(long_calls > 0);
    assert_eq!(r.op("long", "requests"), 3 * long_calls);
    assert_eq!(
        truth(&stats, "/input/rounds_asked"),
        roots_calls + 3 * long_calls
    );
    assert_eq!(r.n("calls_failed"), roots_calls + long_calls);
    assert_eq!(r.n("calls_answered"), 0);
}

/// Without `[input]`, a call answered `input_required` has not completed: its answer is
/// `input_unanswered` (by kind, per operation, in the pairing identity), never `ok`, and
/// the step is not judged healthy. Each is one of the target's rounds asked, none answered.
#[test]
fn input_required_without_input_is_unanswered_never_ok() {
    let _share = machine::loading();
    // A target that asks whatever the client declared (mcpload declares no input
    // capability without `[input]`).
    let target = serve(&["--input-unchecked"]);
    let dir = scratch("tasks-input-none");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "ask_input"
args = { kinds = ["sampling", "roots"] }
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2026-07-28", body, "2");
    let stats = target_stats(&target.url);
    let asked = truth(&stats, "/input/rounds_asked");
    assert!(asked > 0);
    assert_eq!(truth(&stats, "/input/rounds_answered"), 0);
    assert_eq!(r.n("ok"), 0);
    assert_eq!(r.n("input_unanswered"), asked);
    assert_eq!(r.op("ask_input", "input_unanswered"), asked);
    assert_eq!(r.op("ask_input", "requests"), asked);
    // The first kind asked for that nothing answers.
    assert_eq!(
        r.summary["input_unanswered_by_kind"]["sampling"].as_u64(),
        Some(asked)
    );
    assert_eq!(r.step["error_rate"], "1.0");
    assert_eq!(r.step["verdict"], "failed");
    let tripped = r.summary["tripped"].as_array().unwrap();
    assert!(
        tripped.iter().any(|t| t["criterion"] == "input_unanswered"),
        "{tripped:?}"
    );
    // Both reports name the tool that asked and the `[input]` line that would answer it.
    for (report, text) in [("terminal", &r.terminal), ("report.html", &r.html)] {
        assert!(text.contains("asked by ask_input"), "{report}:\n{text}");
        assert!(
            text.contains("answer with [input] sampling = "),
            "{report}:\n{text}"
        );
    }
}

/// SEP-1034: an elicitation accepted with no canned `content` fills the requested schema
/// (its defaults first, then values made as tool arguments are), so the target takes every
/// round as answered in full and validly.
#[test]
fn an_accept_without_content_fills_the_requested_schema() {
    let _share = machine::loading();
    let target = serve(&[]);
    let dir = scratch("tasks-input-accept");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "ask_input"

[input]
elicitation = { action = "accept" }
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2026-07-28", body, "2");
    let stats = target_stats(&target.url);
    let asked = truth(&stats, "/input/rounds_asked");
    assert!(asked > 0);
    assert_eq!(truth(&stats, "/input/responses_invalid"), 0);
    assert_eq!(truth(&stats, "/input/rounds_answered"), asked);
    assert_eq!(r.n("input_rounds"), asked);
    assert_eq!(r.n("input_unanswered"), 0);
    assert_eq!(r.n("calls_answered"), truth(&stats, "/input/completed"));
    assert_eq!(r.n("errors"), 0);
}

/// An `[input]` that answers one kind of two: the rounds asking for the other are
/// `input_unanswered`, counted under that kind.
#[test]
fn input_required_for_a_kind_input_does_not_give_is_unanswered() {
    let _share = machine::loading();
    let target = serve(&[]);
    let dir = scratch("tasks-input-partial");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "ask_input"
args = { kinds = ["elicitation", "sampling"] }

[input]
elicitation = { action = "decline" }
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2026-07-28", body, "2");
    let stats = target_stats(&target.url);
    let asked = truth(&stats, "/input/rounds_asked");
    assert!(asked > 0);
    assert_eq!(r.n("ok"), 0);
    assert_eq!(r.n("input_unanswered"), asked);
    assert_eq!(r.n("input_rounds"), 0);
    assert_eq!(r.n("calls_failed"), asked);
    assert_eq!(
        r.summary["input_unanswered_by_kind"]["sampling"].as_u64(),
        Some(asked)
    );
    assert_eq!(
        r.summary["input_unanswered_by_kind"]["elicitation"].as_u64(),
        Some(0)
    );
}

/// `task = "auto"` makes a task of a tool the server says may run as one, and leaves the
/// others plain calls.
#[test]
fn auto_task_mode_follows_the_tools_task_support() {
    let _share = machine::loading();
    let target = serve(&["--task-poll-interval-ms", "10"]);
    let dir = scratch("tasks-auto");
    let body = r#"
[[mix]]
method = "tools/call"
tool = "slow_task"
args = { ms = 10 }
task = "auto"

[[mix]]
method = "tools/call"
tool = "echo"
args = { message = "plain" }
task = "auto"
"#;
    let r = run_tasks(&dir, &url_of(&target.url), "2025-11-25", body, "2");
    let stats = target_stats(&target.url);
    assert_eq!(r.n("tasks_created"), r.op("slow_task", "requests"));
    assert_eq!(truth(&stats, "/tasks/created"), r.n("tasks_created"));
    assert!(r.op("echo", "ok") > 0);
    assert_eq!(
        r.n("calls"),
        r.op("slow_task", "requests") + r.op("echo", "requests")
    );
}

/// The shipped profiles/tasks.toml, a sweep of live tasks against the built-in target with a
/// task capacity, finds the knee at that capacity. Up to the capacity every task gets a slot
/// at once and each user adds its share of throughput; past it the extra tasks only wait.
/// The expectations come from the profile's own knobs (capacity, job time, poll interval).
#[test]
fn a_sweep_of_live_tasks_finds_the_knee_at_the_task_capacity() {
    let _share = machine::measuring();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/tasks.toml");
    let shipped: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let int = |v: &toml::Value| v.as_integer().unwrap() as u64;
    let builtin = &shipped["target"]["builtin"];
    let capacity = int(&builtin["task_capacity"]);
    let poll_ms = int(&builtin["task_poll_interval_ms"]);
    let job_ms = int(&shipped["mix"][0]["args"]["ms"]);
    let levels: Vec<u64> = shipped["load"]["concurrency"]
        .as_array()
        .unwrap()
        .iter()
        .map(int)
        .collect();
    // The sweep steps onto the capacity, then past it by at least half (what a saturated
    // step needs, docs/metrics.md "The knee").
    let at = levels.iter().position(|l| *l == capacity).unwrap();
    assert!(at > 0 && 2 * levels[at + 1] >= 3 * capacity, "{levels:?}");

    let dir = scratch("tasks-knee");
    let out_dir = dir.join("run");
    let out = run(&[path.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let rows = steps(&out_dir);
    let s = summary(&out_dir);
    let got: Vec<u64> = rows.iter().map(|r| num(r, "concurrency") as u64).collect();
    assert_eq!(got, levels);
    // A task whose slot was free ends before its first `ceil(job / poll)` polls are done.
    let polls_free = job_ms.div_ceil(poll_ms);
    for (i, r) in rows.iter().enumerate() {
        assert_identity(r);
        let users = levels[i];
        let step = format!("{users} live tasks: {r:?}");
        assert_eq!(num(r, "calls_failed"), 0.0, "{step}");
        assert_eq!(num(r, "task_anomalies"), 0.0, "{step}");
        assert!(num(r, "tasks_live_max") as u64 <= users, "{step}");
        // At most min(users, capacity) tasks work at once, each `job_ms`: the calls ended
        // in the measured time, and at most one more per user still running at its end.
        let working = users.min(capacity) as f64;
        let ceiling = working * 1000.0 / job_ms as f64 + users as f64 / num(r, "duration_s");
        assert!(
            num(r, "calls_per_s") <= ceiling,
            "{step}: ceiling {ceiling}"
        );
        let max_polls = s["steps"][i]["flows"]["polls_per_task_max"]
            .as_u64()
            .unwrap();
        if users <= capacity {
            assert_eq!(r["verdict"], "ok", "{step}");
            assert!(max_polls <= polls_free, "{step}: no task waits for a slot");
        } else {
            // The tasks past the capacity waited for a slot: polled more than once.
            assert!(max_polls > polls_free, "{step}: no task waited");
        }
    }
    assert_eq!(rows[at + 1]["verdict"], "saturated", "{rows:?}");
    assert_eq!(
        s["knee"]["saturation_point"].as_f64(),
        Some(capacity as f64),
        "{}",
        s["knee"]
    );
}
