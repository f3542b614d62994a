//! `mcpload profile schema` and `mcpload profile check`: the shipped schema/profile.json is
//! the generated one; independent readers of it (PyPI `check-jsonschema`, and the CLIs of the
//! TOML language servers Tombi and Taplo, installed by tests/profile_schema/setup.sh) pass every
//! shipped profile and refuse each broken one at the field, line and column that mcpload's own
//! parser names; `profile check` exits as `run` does on a bad profile, and leaves `*_env`
//! variables to `run`.

use crate::support::bin;
use crate::support::installed::installed;
use crate::support::run::profile;
use crate::support::scratch::scratch;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn shipped_schema() -> PathBuf {
    repo().join("schema/profile.json")
}

/// A tool of tests/profile_schema/.venv.
fn tool(name: &str) -> Command {
    Command::new(installed("profile_schema").join(".venv/bin").join(name))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn shipped_profiles() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(repo().join("profiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    all.sort();
    assert_eq!(all.len(), 16, "every shipped profile: {all:?}");
    all
}

#[test]
fn the_shipped_schema_is_the_generated_one() {
    let out = bin().args(["profile", "schema"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let generated = String::from_utf8(out.stdout).unwrap();
    let shipped = std::fs::read_to_string(shipped_schema()).unwrap_or_default();
    assert!(
        generated == shipped,
        "schema/profile.json differs from what the profile types generate: regenerate it with \
         `cargo run -- profile schema > schema/profile.json` and commit it"
    );
    let schema: Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], serde_json::json!(["target"]));
    assert!(schema["properties"]["$schema"].is_object());
    // Descriptions come from the doc comments of the fields.
    let duration = &schema["definitions"]["Load"]["properties"]["duration"];
    assert_eq!(duration["default"], "10s");
    assert!(
        duration["description"]
            .as_str()
            .is_some_and(|d| d.contains("measured")),
        "{duration}"
    );
}

/// `mcpload profile schema | head`: a reader that stops early ends the command quietly, with
/// exit 0 and no panic about a broken pipe.
#[test]
fn a_reader_that_stops_early_is_no_error() {
    use std::io::Read;
    let mut child = bin()
        .args(["profile", "schema"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's read end is dropped here, with most of the schema unread.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(out.stderr.is_empty(), "{}", text(&out));
}

#[test]
fn every_shipped_profile_passes_check_jsonschema_tombi_taplo_and_profile_check() {
    let profiles = shipped_profiles();
    let out = tool("check-jsonschema")
        .arg("--schemafile")
        .arg(shipped_schema())
        .args(&profiles)
        .output()
        .unwrap();
    assert!(out.status.success(), "check-jsonschema: {}", text(&out));
    // The language servers find the schema by each profile's `#:schema` line.
    let out = tool("tombi")
        .args(["lint", "--offline"])
        .args(&profiles)
        .output()
        .unwrap();
    assert!(out.status.success(), "tombi: {}", text(&out));
    assert!(
        text(&out).contains("16 files linted successfully"),
        "{}",
        text(&out)
    );
    let out = tool("taplo").arg("check").args(&profiles).output().unwrap();
    assert!(out.status.success(), "taplo: {}", text(&out));
    for p in &profiles {
        let first = std::fs::read_to_string(p).unwrap();
        assert!(
            first.starts_with("#:schema ../schema/profile.json\n"),
            "{}: the editors' schema line comes first",
            p.display()
        );
        let out = bin().args(["profile", "check"]).arg(p).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            p.display(),
            text(&out)
        );
        assert!(text(&out).contains("valid"), "{}", text(&out));
    }
}

/// A broken profile: its text (a `#:schema` line goes before it), where check-jsonschema puts its
/// error (a JSON path) and a word that error names, and where Tombi puts it when not where
/// mcpload's parser does.
struct Broken {
    name: &'static str,
    text: &'static str,
    path: &'static str,
    word: &'static str,
    tombi_at: Option<&'static str>,
}

const BUILTIN: &str = "[target]\nbuiltin = {}\n";

/// The structural mistakes of tests/it/run_profiles.rs, and more; the schema refuses each.
/// (run_profiles.rs's other mistakes are not structure: a zero timeout, a template's
/// placeholder, a scenario's expression or variable; `profile check` refuses them, below.)
const BROKEN: &[Broken] = &[
    Broken {
        name: "unknown",
        text: "[target]\nbuiltin = {}\n[load]\nconcurency = [1, 2]\n",
        path: "$.load",
        word: "concurency",
        tombi_at: None,
    },
    Broken {
        name: "duration",
        text: "[target]\nbuiltin = {}\n[load]\nduration = \"ten seconds\"\n",
        path: "$.load.duration",
        word: "ten seconds",
        tombi_at: None,
    },
    Broken {
        name: "levels",
        text: "[target]\nbuiltin = {}\n[load]\nconcurrency = \"1..64\"\n",
        path: "$.load.concurrency",
        word: "1..64",
        tombi_at: None,
    },
    Broken {
        name: "memory",
        text: "[target]\nbuiltin = {}\n[load]\nmax_answer_memory = \"lots\"\n",
        path: "$.load.max_answer_memory",
        word: "lots",
        tombi_at: None,
    },
    Broken {
        name: "notool",
        text: "[target]\nbuiltin = {}\n[[mix]]\nmethod = \"tools/call\"\n",
        path: "$.mix[0]",
        word: "tool",
        tombi_at: None,
    },
    Broken {
        name: "method",
        text: "[target]\nbuiltin = {}\n[[mix]]\nmethod = \"tools/cal\"\n",
        path: "$.mix[0].method",
        word: "tools/cal",
        tombi_at: None,
    },
    Broken {
        name: "progress",
        text: "[target]\nbuiltin = {}\n[[mix]]\nmethod = \"tools/call\"\ntool = \"progress\"\nprogress = \"yes\"\n",
        path: "$.mix[0].progress",
        word: "yes",
        tombi_at: None,
    },
    Broken {
        name: "kinds",
        text: "[target]\nbuiltin = {}\n[[scenario]]\nname = \"jobs\"\n[[scenario.step]]\ncall = { method = \"ping\" }\n\
               think = \"1s\"\n",
        path: "$.scenario[0].step[0]",
        word: "think",
        tombi_at: None,
    },
    Broken {
        name: "balance",
        text: "[target.builtin]\nbalance = \"least-loaded\"\n",
        path: "$.target.builtin.balance",
        word: "least-loaded",
        tombi_at: None,
    },
    Broken {
        name: "fault",
        text: "[target.builtin]\nfault = \"drop=0\"\n",
        path: "$.target.builtin.fault",
        word: "drop=0",
        tombi_at: None,
    },
    Broken {
        name: "token",
        text: "[target]\nurl = \"http://127.0.0.1:1/mcp\"\n[target.auth]\ntoken = \"abc\"\n",
        path: "$.target.auth.token",
        word: "abc",
        tombi_at: None,
    },
    // Tombi puts a table's `oneOf` at the document's start.
    Broken {
        name: "targets",
        text: "[target]\nurl = \"http://127.0.0.1:1/mcp\"\nstdio = \"x\"\n",
        path: "$.target",
        word: "stdio",
        tombi_at: Some("1:1"),
    },
];

/// The broken profile's file, with a `#:schema` line for the language servers.
fn write(dir: &Path, b: &Broken) -> PathBuf {
    let schema = shipped_schema();
    profile(
        dir,
        b.name,
        &format!("#:schema {}\n{}", schema.display(), b.text),
    )
}

/// `mcpload profile check FILE`: its exit code and the `LINE:COL` of its error.
fn parser_place(file: &Path) -> (Option<i32>, String, String) {
    let out = bin().args(["profile", "check"]).arg(file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let name = file.file_name().unwrap().to_string_lossy();
    let place = err
        .split_once(&format!("{name}:"))
        .and_then(|(_, rest)| rest.split(": ").next())
        .unwrap_or_default()
        .to_owned();
    (out.status.code(), place, err)
}

#[test]
fn each_broken_profile_is_refused_by_the_schema_where_the_parser_refuses_it() {
    let dir = scratch("schema-broken");
    let files: Vec<PathBuf> = BROKEN.iter().map(|b| write(&dir, b)).collect();
    let out = tool("check-jsonschema")
        .arg("--schemafile")
        .arg(shipped_schema())
        .args(["-o", "JSON"])
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = report["errors"].as_array().unwrap();
    for (b, file) in BROKEN.iter().zip(&files) {
        let (code, place, err) = parser_place(file);
        assert_eq!(code, Some(2), "{}: profile check: {err}", b.name);
        assert!(
            place.split(':').count() == 2 && place.split(':').all(|n| n.parse::<u32>().is_ok()),
            "{}: no LINE:COL in {err}",
            b.name
        );
        // check-jsonschema: an error at the field's path, naming it or its value.
        let file_name = file.display().to_string();
        let mine: Vec<&Value> = errors
            .iter()
            .filter(|e| e["filename"] == file_name.as_str())
            .collect();
        assert!(
            mine.iter().any(|e| e["path"] == b.path),
            "{}: check-jsonschema put no error at {}: {mine:?}",
            b.name,
            b.path
        );
        // Tombi: an error at the parser's line and column.
        let out = tool("tombi")
            .args(["lint", "--offline"])
            .arg(file)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let tombi = text(&out);
        assert!(
            !out.status.success(),
            "{}: tombi passed it: {tombi}",
            b.name
        );
        let at = format!("{}.toml:{}", b.name, b.tombi_at.unwrap_or(&place));
        assert!(
            tombi.contains(&at),
            "{}: tombi has no error at {at} (the parser's {place}): {tombi}",
            b.name
        );
        let words = format!("{err}{tombi}{mine:?}");
        assert!(words.contains(b.word), "{}: {:?} not named", b.name, b.word);
    }
}

#[test]
fn taplo_finds_the_schema_by_the_schema_key_and_names_the_bad_field() {
    let dir = scratch("schema-taplo");
    // A key holds a URL (a relative path works too, from the profile's folder).
    let url = format!("file://{}", shipped_schema().display());
    let head = format!("\"$schema\" = \"{url}\"\n{BUILTIN}");
    let good = profile(
        &dir,
        "good",
        &format!("{head}[load]\nconcurrency = \"1..8 x2\"\n"),
    );
    let bad = profile(&dir, "bad", &format!("{head}[load]\nconcurency = [1, 2]\n"));
    let out = tool("taplo").arg("check").arg(&good).output().unwrap();
    assert!(out.status.success(), "taplo, good: {}", text(&out));
    let out = tool("taplo").arg("check").arg(&bad).output().unwrap();
    assert!(!out.status.success(), "taplo passed a bad profile");
    assert!(
        text(&out).contains("'concurency' was unexpected"),
        "{}",
        text(&out)
    );
    // mcpload itself reads the key and goes on.
    let out = bin()
        .args(["profile", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn profile_check_refuses_what_run_refuses_and_leaves_env_variables_to_run() {
    let dir = scratch("profile-check");
    // Mistakes that are no structure: the same LINE:COL and exit code as `run`.
    for (name, body, place) in [
        ("zero", "[load]\ntimeout = \"0ms\"\n", "4:11"),
        (
            "template",
            "[[mix]]\nmethod = \"tools/call\"\ntool = \"echo\"\n\
             args = { message = \"{{sequence}}\" }\n",
            "3:1",
        ),
        (
            "until",
            "[[scenario]]\nname = \"jobs\"\n[[scenario.step]]\nname = \"wait\"\n\
             poll = { method = \"ping\" }\nuntil = \"result.state == done\"\nmax_polls = 5\n",
            "8:26",
        ),
    ] {
        let p = profile(&dir, name, &format!("{BUILTIN}{body}"));
        let (code, got, err) = parser_place(&p);
        assert_eq!((code, got.as_str()), (Some(2), place), "{name}: {err}");
        let run = bin().args(["run", "-q"]).arg(&p).output().unwrap();
        assert_eq!(run.status.code(), Some(2), "{name}: run");
        assert_eq!(
            String::from_utf8_lossy(&run.stderr),
            err,
            "{name}: run says otherwise"
        );
    }
    // An unset `*_env` variable is no error to `check`; `run` names it (exit 2) before it
    // connects.
    let var = "MCPLOAD_PROFILE_CHECK_UNSET_TOKEN";
    let p = profile(
        &dir,
        "env",
        &format!(
            "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n[target.auth]\nbearer_env = \"{var}\"\n"
        ),
    );
    let out = bin()
        .args(["profile", "check"])
        .arg(&p)
        .env_remove(var)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = bin()
        .args(["run", "-q", "--out"])
        .arg(dir.join("env-run"))
        .arg(&p)
        .env_remove(var)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains(var), "{}", text(&out));
    // Nothing runs: no results folder where `run` would write one.
    let quiet = scratch("profile-check-writes-nothing");
    let p = profile(
        &quiet,
        "fine",
        &format!("{BUILTIN}[load]\nconcurrency = [1, 2]\n"),
    );
    let out = bin()
        .args(["profile", "check", "fine.toml"])
        .current_dir(&quiet)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fine.toml: valid\n");
    let left: Vec<_> = std::fs::read_dir(&quiet)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, [p], "profile check wrote something");
    // A file that is not there: exit 2, naming it.
    let out = bin()
        .args(["profile", "check"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("missing.toml"), "{}", text(&out));
}
