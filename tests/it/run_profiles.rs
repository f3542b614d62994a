//! Profile mistakes: each kind gets exit code 2 and a message naming the file, line, column
//! and field, and what would be valid. Every shipped profile parses.

use crate::support::bin;
use crate::support::run::profile;
use crate::support::scratch::scratch;

fn expect_error(name: &str, text: &str, extra: &[&str], wants: &[&str]) {
    let dir = scratch(&format!("profile-error-{name}"));
    let p = profile(&dir, name, text);
    let mut args = vec![p.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = bin().arg("run").arg("-q").args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name}: {err}");
    for w in wants {
        assert!(err.contains(w), "{name}: {w:?} not in {err:?}");
    }
}

const TARGET: &str = "[target]\nbuiltin = {}\n";

#[test]
fn an_unknown_field_names_its_place_and_the_valid_ones() {
    expect_error(
        "unknown",
        &format!("{TARGET}[load]\nconcurency = [1, 2]\n"),
        &[],
        &[
            "unknown.toml:4:1",
            "unknown field `concurency`",
            "`concurrency`",
        ],
    );
}

#[test]
fn a_bad_duration_says_how_to_write_one() {
    expect_error(
        "duration",
        &format!("{TARGET}[load]\nduration = \"ten seconds\"\n"),
        &[],
        &["duration.toml:4:", "\"10s\""],
    );
}

#[test]
fn a_zero_timeout_names_its_line_and_field() {
    expect_error(
        "connect_timeout",
        &format!("{TARGET}[load]\ntimeout = \"5s\"\nconnect_timeout = \"0s\"\n"),
        &[],
        &[
            "connect_timeout.toml:5:19",
            "field `load.connect_timeout`: must be more than 0s",
        ],
    );
    expect_error(
        "timeout",
        &format!("{TARGET}[load]\ntimeout = \"0ms\"\n"),
        &[],
        &[
            "timeout.toml:4:11",
            "field `load.timeout`: must be more than 0s",
        ],
    );
}

#[test]
fn a_bad_template_says_which_placeholders_exist() {
    expect_error(
        "template",
        &format!(
            "{TARGET}\n[[mix]]\nmethod = \"tools/call\"\ntool = \"echo\"\nargs = {{ message = \"{{{{sequence}}}}\" }}\n"
        ),
        &[],
        &["template.toml:4:1", "mix.args", "{{seq}}"],
    );
}

#[test]
fn a_bad_level_range_and_a_missing_tool_are_named() {
    expect_error(
        "levels",
        &format!("{TARGET}[load]\nconcurrency = \"1..64\"\n"),
        &[],
        &["levels.toml:4:", "\"1..64 x2\""],
    );
    expect_error(
        "notool",
        &format!("{TARGET}[[mix]]\nmethod = \"tools/call\"\n"),
        &[],
        &["notool.toml:3:1", "needs `tool`"],
    );
    expect_error(
        "method",
        &format!("{TARGET}[[mix]]\nmethod = \"tools/cal\"\n"),
        &[],
        &["method.toml:4:", "tools/call"],
    );
}

#[test]
fn a_batch_against_a_revision_that_forbids_it_is_refused_up_front() {
    expect_error(
        "batch",
        "[target]\nprotocol = \"2025-06-18\"\nbuiltin = {}\n[batch]\nsize = 4\n",
        &[],
        &["2025-06-18", "forbids JSON-RPC batches", "force = true"],
    );
}

#[test]
fn two_targets_are_one_too_many() {
    expect_error(
        "targets",
        "[target]\nurl = \"http://127.0.0.1:1/mcp\"\nstdio = \"x\"\n",
        &[],
        &["targets.toml:1:1", "exactly one of `builtin`"],
    );
}

#[test]
fn a_bad_scenario_expression_names_its_column_in_the_file() {
    expect_error(
        "until",
        &format!(
            "{TARGET}[[scenario]]\nname = \"jobs\"\n[[scenario.step]]\nname = \"wait\"\n\
             poll = {{ method = \"ping\" }}\nuntil = \"result.state == done\"\nmax_polls = 5\n"
        ),
        &[],
        &[
            "until.toml:8:26",
            "scenario `jobs`, step `wait`: field `until`: unknown name `done`",
        ],
    );
}

#[test]
fn a_variable_read_before_its_capture_is_named_with_its_step() {
    expect_error(
        "var",
        &format!(
            "{TARGET}[[scenario]]\nname = \"jobs\"\n[[scenario.step]]\nname = \"check\"\n\
             expect = [\"var.job_id != null\"]\n"
        ),
        &[],
        &[
            "var.toml:7:11",
            "step `check`",
            "`var.job_id` is read before it is set",
        ],
    );
}

#[test]
fn a_step_with_two_kinds_is_refused() {
    expect_error(
        "kinds",
        &format!(
            "{TARGET}[[scenario]]\nname = \"jobs\"\n[[scenario.step]]\n\
             call = {{ method = \"ping\" }}\nthink = \"1s\"\n"
        ),
        &[],
        &[
            "kinds.toml:5:1",
            "give exactly one of",
            "found call and think",
        ],
    );
}

#[test]
fn every_shipped_profile_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let src = mcpload::profile::Source::read(&path).unwrap();
            src.parse().unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert_eq!(
        n, 16,
        "quickstart, closed-sweep, open-rate, batch-mix, stdio-child, everything-server, \
         python-sdk-server, jobs, fan-out, everything-scenario, everything-tasks, replicas, \
         tasks, races, protected, soak"
    );
}

#[test]
fn a_progress_that_is_no_boolean_names_its_line_and_field() {
    expect_error(
        "progress",
        &format!(
            "{TARGET}[[mix]]\nmethod = \"tools/call\"\ntool = \"progress\"\nprogress = \"yes\"\n"
        ),
        &[],
        &["progress.toml:6:", "progress", "a boolean"],
    );
}

#[test]
fn a_builtin_knob_is_checked_as_the_profile_key_is() {
    expect_error(
        "knob",
        TARGET,
        &["--builtin-knob", "balance=least-loaded"],
        &["--builtin-knob", "least-loaded", "round-robin"],
    );
    expect_error(
        "knob-url",
        "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n",
        &["--builtin-knob", "replicas=2"],
        &["--builtin-knob: the target is not the built-in one"],
    );
}
