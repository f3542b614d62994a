//! Issue #11, "never fooled, never stuck", on the run side: no secret of the target's URL or
//! headers reaches the run folder, the terminal or an error message; closing comes before the
//! built-in target stops; a dead stdio target stops the sweep instead of being "sent" to.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::serve;
use std::path::Path;

/// Every secret a run against `url_host` is given, each recognizable.
const USER: &str = "user-s3cr1t-A";
const PASSWORD: &str = "pw-s3cr1t-B";
const QUERY_TOKEN: &str = "qs-s3cr1t-C";
const QUERY_KEY: &str = "qs-s3cr1t-D";
const AUTHORIZATION: &str = "auth-s3cr1t-E";
const FROM_ENV: &str = "env-s3cr1t-F";
const ENV_VAR: &str = "MCPLOAD_TEST_HEADER_SECRET";

fn secret_url(host_port: &str) -> String {
    format!("http://{USER}:{PASSWORD}@{host_port}/mcp?token={QUERY_TOKEN}&api_key={QUERY_KEY}")
}

/// `host:port` of a served target's URL.
fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://").split('/').next().unwrap()
}

/// No secret in any name or file under `dir`, nor in the output of the run.
fn assert_no_secret(dir: &Path, out: &std::process::Output) {
    let mut texts = vec![
        (
            "stdout".to_owned(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ),
        (
            "stderr".to_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
    ];
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let name = path.display().to_string();
            texts.push((format!("the name {name}"), name.clone()));
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                texts.push((name, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }
    for (what, text) in &texts {
        for secret in [
            USER,
            PASSWORD,
            QUERY_TOKEN,
            QUERY_KEY,
            AUTHORIZATION,
            FROM_ENV,
        ] {
            assert!(
                !text.contains(secret),
                "{what} holds the secret {secret}:\n{text}"
            );
        }
    }
}

fn run_with_env(args: &[&str]) -> std::process::Output {
    bin()
        .arg("run")
        .arg("--quiet")
        .args(args)
        .env(ENV_VAR, FROM_ENV)
        .output()
        .unwrap()
}

/// A one-second run against `url` with a secret `Authorization` header and a header taken from
/// the environment, its folder under `results`.
fn run_with_secret_flags(url: &str, results: &Path) -> std::process::Output {
    let auth = format!("Authorization: Bearer {AUTHORIZATION}");
    let from_env = format!("X-Key: ${{{ENV_VAR}}}");
    run_with_env(&[
        "--url",
        url,
        "-H",
        &auth,
        "-H",
        &from_env,
        "-c",
        "1",
        "-d",
        "1s",
        "--warmup",
        "0s",
        "--results",
        results.to_str().unwrap(),
    ])
}

#[test]
fn no_secret_of_the_command_line_leaks_into_the_run_folder_or_the_terminal() {
    let _share = machine::loading();
    let target = serve(&["--bind", "127.0.0.1:0"]);
    let dir = scratch("secrets_flags");
    let url = secret_url(host_port(&target.url));
    let out = run_with_secret_flags(&url, &dir);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let runs: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(runs.len(), 1, "one run folder");
    let run_dir = runs.into_iter().next().unwrap().unwrap().path();
    assert!(
        run_dir
            .display()
            .to_string()
            .ends_with(&host_port(&target.url).replace(':', "-")),
        "the folder is named after host and port: {}",
        run_dir.display()
    );
    let s = summary(&run_dir);
    assert_eq!(
        s["steps"][0]["ok"].as_u64().map(|n| n > 0),
        Some(true),
        "{s}"
    );
    assert_no_secret(&dir, &out);
}

#[test]
fn no_secret_of_a_profile_leaks_into_its_copy() {
    let _share = machine::loading();
    let target = serve(&["--bind", "127.0.0.1:0"]);
    let dir = scratch("secrets_profile");
    let profile = profile(
        &dir,
        "with-secrets",
        &format!(
            "[target]\nurl = \"{}\"\nheaders = {{ X-Api-Key = \"Bearer {AUTHORIZATION}\", \
             X-Key = \"${{{ENV_VAR}}}\", X-Other = \"a\\\"quoted\\\\{PASSWORD}\" }}\n\
             [load]\nconcurrency = [1]\nduration = \"1s\"\nwarmup = \"0s\"\n",
            secret_url(host_port(&target.url))
        ),
    );
    let results = dir.join("results");
    let out = run_with_env(&[
        profile.to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let run_dir = std::fs::read_dir(&results)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let copy = std::fs::read_to_string(run_dir.join("profile.toml")).unwrap();
    let parsed: toml::Table = copy.parse().expect("the copy is still TOML");
    assert_eq!(parsed["load"]["duration"].as_str(), Some("1s"), "{copy}");
    assert!(copy.contains("[redacted]"), "{copy}");
    assert_no_secret(&results, &out);
}

#[test]
fn no_secret_leaks_when_the_target_is_unreachable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = scratch("secrets_unreachable");
    let url = secret_url(&format!("127.0.0.1:{port}"));
    let out = run_with_secret_flags(&url, &dir);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert_no_secret(&dir, &out);
}

#[test]
fn the_built_in_target_stops_after_the_sessions_are_closed() {
    let _share = machine::loading();
    let dir = scratch("builtin_shutdown");
    let out = run(&[
        "--builtin",
        "--protocol",
        "2025-11-25",
        "-c",
        "2",
        "-d",
        "1s",
        "--warmup",
        "0s",
        "--workers",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = std::fs::read_to_string(dir.join("target-stats.json")).expect("target-stats.json");
    let stats: serde_json::Value = serde_json::from_str(&text).unwrap();
    let opened = stats["sessions_opened"].as_u64().unwrap();
    assert!(opened >= 2, "a session per connection: {stats}");
    assert_eq!(
        stats["sessions_closed"].as_u64(),
        Some(opened),
        "every session's DELETE reached the target before it stopped: {stats}"
    );
    assert_eq!(stats["in_flight"], 0, "{stats}");
}

/// A stdio target that dies after a few answers: no request is sent after it is down, the step
/// fails naming the death, the sweep stops there (even with --keep-going) and the run does
/// not wait out its planned time.
fn a_dead_stdio_target_is_not_sent_to(kind: &str) {
    let _share = machine::loading();
    let dir = scratch(&format!("dead_stdio_{kind}"));
    let command = format!(
        "{} serve --stdio --hostile {kind} --hostile-every 7",
        env!("CARGO_BIN_EXE_mcpload")
    );
    let started = std::time::Instant::now();
    let out = run(&[
        "--stdio",
        &command,
        "--protocol",
        "2025-03-26",
        "-c",
        "4,8",
        "-d",
        "10s",
        "--warmup",
        "0s",
        "--timeout",
        "1s",
        "--keep-going",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{kind}: {out:?}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "{kind}: took {took:?}"
    );
    let rows = steps(&dir);
    assert_eq!(rows.len(), 1, "{kind}: no step after the target died");
    let row = &rows[0];
    assert_identity(row);
    let (requests, ok) = (num(row, "requests"), num(row, "ok"));
    assert!(
        requests <= ok + 4.0,
        "{kind}: {requests} requests, {ok} ok: {row:?}"
    );
    assert!(num(row, "transport_errors") <= 4.0, "{kind}: {row:?}");
    assert_eq!(row["verdict"], "failed", "{kind}");
    let s = summary(&dir);
    let tripped = &s["steps"][0]["tripped"];
    let down = tripped
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["criterion"] == "target_down")
        .unwrap_or_else(|| panic!("{kind}: no target_down in {tripped}"));
    assert!(
        down["reason"].as_str().unwrap().contains("child"),
        "{kind}: {down}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the target went down"), "{kind}: {stdout}");
}

#[test]
fn a_stdio_target_that_dies_mid_line_stops_the_sweep() {
    a_dead_stdio_target_is_not_sent_to("die-mid-line");
}

#[test]
fn a_stdio_target_that_closes_its_stdout_stops_the_sweep() {
    a_dead_stdio_target_is_not_sent_to("stdout-closed");
}
