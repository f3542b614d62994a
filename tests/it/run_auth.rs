//! Authorization under load against its ground truth: the built-in target as a protected
//! resource with its own authorization server (`serve --auth`, `[target.builtin] auth`),
//! whose `/stats` counts every token it issued and every 401 and 403 it answered. Tokens
//! refreshed before they expire (one refresh at a time), a revocation costing each request
//! in flight one 401 and one retry, discovery from a bare 401 (OpenID fallback), a wrong
//! secret stopping the run at once, `private_key_jwt`, secrets written nowhere, profiles
//! that write a secret refused, and one token per virtual user (`token_per_user`): one
//! fetch per user that ran, refreshes per user, a revocation costing its user alone.

use crate::support::bin;
use crate::support::http_client::Conn;
use crate::support::machine;
use crate::support::run::{Watched, assert_identity, num, profile, steps, summary, watch};
use crate::support::scratch::scratch;
use crate::support::servers::{Server, serve_cmd, start_http, target_stats};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The client secret of these tests: no real one, but treated as one.
const SECRET: &str = "it-secret-5f2c9a71";
/// What every token of the built-in target starts with.
const TOKEN_PREFIX: &str = "mcpl_at_";

/// `mcpload run --quiet PROFILE ARGS` with `env`, bounded by `budget`.
fn run_with(profile: &Path, env: &[(&str, &str)], args: &[&str], budget: Duration) -> Watched {
    let mut run = bin();
    run.arg("run").arg("--quiet").arg(profile).args(args);
    for (k, v) in env {
        run.env(k, v);
    }
    watch(run, budget)
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// A column summed over every step of a run.
fn total(dir: &Path, col: &str) -> f64 {
    steps(dir).iter().map(|r| num(r, col)).sum()
}

fn target_stats_file(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("target-stats.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A profile against the built-in target with `auth` on and `builtin` added, the client
/// authorized by OAuth client credentials (discovered from the first 401), `load` as given.
fn builtin_profile(dir: &Path, builtin: &str, load: &str) -> PathBuf {
    profile(
        dir,
        "auth",
        &format!(
            r#"
[target.builtin]
auth = true
auth_client_secret_env = "AUTH_IT_SECRET"
{builtin}

[target.auth]
oauth = {{ client_id = "mcpload", client_secret_env = "AUTH_IT_SECRET" }}

[load]
warmup = "0s"
timeout = "20s"
{load}
"#
        ),
    )
}

#[test]
fn tokens_refreshed_under_load_are_the_servers_tokens_issued_minus_one() {
    let _share = machine::loading();
    let dir = scratch("auth_refresh");
    // 2 s tokens, a token endpoint that takes 50 ms (a storm would overlap there), 64
    // users for 11 s: more than five lifetimes.
    let p = builtin_profile(
        &dir,
        "auth_token_lifetime_s = 2\nauth_token_delay_ms = 50",
        "concurrency = [64]\nduration = \"11s\"",
    );
    let out = dir.join("run");
    let run = run_with(
        &p,
        &[("AUTH_IT_SECRET", SECRET)],
        &["--workers", "2", "--out", out.to_str().unwrap()],
        Duration::from_secs(90),
    );
    assert!(run.output.status.success(), "{:?}", text(&run.output));
    let rows = steps(&out);
    assert_eq!(rows.len(), 1);
    assert_identity(&rows[0]);
    let target = target_stats_file(&out);
    let auth = &summary(&out)["auth"];
    let issued = u(&target, "/auth/tokens_issued");
    // Every token covers at most 2 s of the 11 s of load.
    assert!(issued >= 6, "{issued} tokens for 11 s of 2 s tokens");
    assert_eq!(u(auth, "/token_refreshes"), issued - 1, "{auth} {target}");
    assert_eq!(
        u(auth, "/token_requests"),
        u(&target, "/auth/token_requests")
    );
    assert_eq!(target["auth"]["token_refused"], serde_json::json!({}));
    // No refresh storm: one token request at a time, though each took 50 ms.
    assert_eq!(u(&target, "/auth/token_requests_in_flight_max"), 1);
    // Zero failed requests: a token refreshed before it expires is never refused. The only
    // 401 is the discovery's, at the handshake.
    let r = &rows[0];
    assert_eq!(num(r, "requests"), num(r, "ok"), "{r:?}");
    assert_eq!((num(r, "http_401"), num(r, "auth_failures")), (0.0, 0.0));
    assert_eq!(u(&target, "/auth/unauthorized"), 1, "{target}");
    assert_eq!(u(&target, "/auth/unauthorized_missing"), 1);
    // Token requests of the step are counted and timed (the handshake's first is not in it).
    assert!(num(r, "token_requests") >= 5.0, "{r:?}");
    assert!(
        num(r, "token_refreshes") >= num(r, "token_requests") - 1.0,
        "{r:?}"
    );
    assert!(num(r, "token_fetch_p50_ms") >= 50.0, "{r:?}");
}

#[test]
fn a_token_revoked_mid_run_costs_each_request_in_flight_one_401_then_recovers() {
    let _share = machine::loading();
    let dir = scratch("auth_revoke");
    let p = builtin_profile(
        &dir,
        "auth_revoke_at = [2.0]",
        "concurrency = [16]\nduration = \"4s\"",
    );
    let out = dir.join("run");
    let run = run_with(
        &p,
        &[("AUTH_IT_SECRET", SECRET)],
        &["--workers", "2", "--out", out.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(run.output.status.success(), "{:?}", text(&run.output));
    let target = target_stats_file(&out);
    let s = summary(&out);
    let refused = total(&out, "http_401");
    // Ground truth: every 401 of the load is one the target answered for the revocation.
    assert_eq!(
        refused as u64,
        u(&target, "/auth/unauthorized_revoked"),
        "{target}"
    );
    assert_eq!(u(&target, "/auth/revocations"), 1);
    // At most one per user: each was in flight with the revoked token, none twice.
    assert!((1.0..=16.0).contains(&refused), "{refused} 401s");
    // Each sent again once with the new token, and answered: nothing else failed.
    let retried: u64 = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| u(st, "/retries_by_cause/token_refresh"))
        .sum();
    assert_eq!(retried as f64, refused);
    assert_eq!(total(&out, "auth_failures"), 0.0);
    assert_eq!(total(&out, "requests") - total(&out, "ok"), refused);
    assert_eq!(
        total(&out, "http_other"),
        refused,
        "401s are http_other too"
    );
    for r in steps(&out) {
        assert_identity(&r);
    }
    // One refresh, for the revocation: the single flight, however many refusals.
    assert_eq!(u(&s, "/auth/token_refreshes"), 1, "{}", s["auth"]);
    assert_eq!(u(&target, "/auth/tokens_issued"), 2);
    assert_eq!(u(&s, "/auth/retries_token_refresh") as f64, refused);
}

#[test]
fn discovery_from_a_bare_401_finds_openid_metadata_and_a_token() {
    let dir = scratch("auth_discovery");
    let p = builtin_profile(
        &dir,
        "auth_metadata = \"openid\"",
        "concurrency = [2]\nduration = \"1s\"",
    );
    let out = dir.join("run");
    let run = run_with(
        &p,
        &[("AUTH_IT_SECRET", SECRET)],
        &["--workers", "1", "--out", out.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(run.output.status.success(), "{:?}", text(&run.output));
    let target = target_stats_file(&out);
    // The handshake's first request had no token: its 401 named the resource metadata.
    assert_eq!(u(&target, "/auth/unauthorized_missing"), 1);
    // That metadata, then OpenID discovery after RFC 8414's URI was not found.
    assert_eq!(u(&target, "/auth/metadata_served"), 2);
    assert_eq!(u(&target, "/http_status/404"), 1, "{target}");
    assert_eq!(u(&target, "/auth/tokens_issued"), 1);
    let r = &steps(&out)[0];
    assert!(num(r, "ok") > 0.0);
    assert_eq!(num(r, "requests"), num(r, "ok"));
}

#[test]
fn a_wrong_secret_stops_the_run_at_once_with_exit_code_2() {
    let dir = scratch("auth_wrong_secret");
    let p = builtin_profile(&dir, "", "concurrency = [8]\nduration = \"30s\"");
    let out = dir.join("run");
    let run = run_with(
        &p,
        &[
            ("AUTH_IT_SECRET", SECRET),
            ("AUTH_IT_WRONG", "wrong-secret-value"),
        ],
        &[
            "--oauth-client-id",
            "mcpload",
            "--oauth-client-secret-env",
            "AUTH_IT_WRONG",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    // Not a sweep of failures: no step ran, and the run folder is not left behind.
    let (stdout, stderr) = text(&run.output);
    assert_eq!(run.output.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(!run.overran && run.elapsed < Duration::from_secs(20));
    assert!(stderr.contains("invalid_client"), "{stderr}");
    assert!(stderr.contains("token endpoint"), "{stderr}");
    assert!(!out.exists(), "no run folder for a run that never started");
    assert!(!stderr.contains("wrong-secret-value"), "{stderr}");
}

#[test]
fn a_missing_secret_variable_is_a_usage_error() {
    let dir = scratch("auth_missing_env");
    let p = builtin_profile(&dir, "", "concurrency = [1]\nduration = \"1s\"");
    let run = run_with(
        &p,
        &[("AUTH_IT_SECRET", SECRET)],
        &[
            "--oauth-client-id",
            "x",
            "--oauth-client-secret-env",
            "AUTH_IT_UNSET_VAR",
        ],
        Duration::from_secs(30),
    );
    let (_, stderr) = text(&run.output);
    assert_eq!(run.output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("AUTH_IT_UNSET_VAR is not set"), "{stderr}");
}

#[test]
fn a_profile_that_writes_a_secret_is_refused_naming_the_field() {
    let dir = scratch("auth_literal");
    let header = profile(
        &dir,
        "header",
        "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n\n[target.headers]\nAuthorization = \"Bearer abc123literal\"\n",
    );
    let secret = profile(
        &dir,
        "secret",
        "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n\n[target.auth]\noauth = { client_id = \"a\", client_secret = \"abc123literal\" }\n",
    );
    for (p, field, line) in [
        (&header, "target.headers.Authorization", 5),
        (&secret, "target.auth.oauth.client_secret", 5),
    ] {
        let run = run_with(p, &[], &[], Duration::from_secs(30));
        let (_, stderr) = text(&run.output);
        assert_eq!(run.output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(field), "{stderr}");
        assert!(
            stderr.contains(&format!("{}:{line}:", p.display())),
            "{stderr}"
        );
        assert!(stderr.contains("environment"), "{stderr}");
        assert!(!stderr.contains("abc123literal"), "{stderr}");
    }
}

/// With the token endpoint written in, no metadata names the issuer: the default audience
/// cannot be made, and the profile is refused naming the field and both ways out.
#[test]
fn a_jwt_profile_with_a_token_endpoint_needs_the_token_endpoint_audience() {
    let dir = scratch("auth_jwt_profile");
    let p = profile(
        &dir,
        "jwt",
        "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n\n[target.auth]\noauth = { client_id = \"a\", auth_method = \"private_key_jwt\", private_key_file = \"k.pem\", token_endpoint = \"http://127.0.0.1:9/token\" }\n",
    );
    let run = run_with(&p, &[], &[], Duration::from_secs(30));
    let (_, stderr) = text(&run.output);
    assert_eq!(run.output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("target.auth.oauth.jwt_audience"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{}:4:", p.display())), "{stderr}");
    assert!(
        stderr.contains("jwt_audience = \"token_endpoint\""),
        "{stderr}"
    );
}

/// `mcpload serve --auth` as a child, its client secret [`SECRET`], with `args` added.
fn protected_server(args: &[&str]) -> Server {
    let mut cmd = vec!["env".to_owned(), format!("MCPLOAD_CLIENT_SECRET={SECRET}")];
    let mut a = vec!["--auth"];
    a.extend_from_slice(args);
    cmd.extend(serve_cmd(&a));
    start_http(&cmd)
}

/// A token from the target's token endpoint, by `client_secret_post`.
fn fetch_token(url: &str, scope: &str) -> String {
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = Conn::open(addr).await;
        let form = format!(
            "grant_type=client_credentials&client_id=mcpload&client_secret={SECRET}&scope={scope}"
        );
        let headers = [(
            "content-type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        )];
        let reply = c.send("POST", "/token", &headers, form.into_bytes()).await;
        assert_eq!(reply.status, 200);
        reply.json()["access_token"].as_str().unwrap().to_owned()
    })
}

/// Every file under `dir`, read whole.
fn files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
}

#[test]
fn no_secret_is_written_in_the_run_folder_its_name_or_the_terminal() {
    let _share = machine::loading();
    let server = protected_server(&["--token-lifetime", "30"]);
    let dir = scratch("auth_redaction");
    let token = fetch_token(&server.url, "mcp");
    let cli_literal = "cli-literal-7d1e0b";
    // A run with OAuth (a profile naming the variables, a literal header on the command
    // line) and one with the static token.
    let p = profile(
        &dir,
        "redaction",
        &format!(
            "[target]\nurl = \"{}\"\n\n[target.auth]\noauth = {{ client_id_env = \"AUTH_IT_ID\", client_secret_env = \"AUTH_IT_SECRET\", auth_method = \"post\" }}\n\n[load]\nconcurrency = [4]\nduration = \"3s\"\nwarmup = \"0s\"\n",
            server.url
        ),
    );
    let oauth_out = dir.join("oauth");
    // One token per user: four tokens to keep out of the folder, not one.
    let oauth = run_with(
        &p,
        &[("AUTH_IT_SECRET", SECRET), ("AUTH_IT_ID", "mcpload")],
        &[
            "--token-per-user",
            "-H",
            &format!("X-Api-Key: {cli_literal}"),
            "--out",
            oauth_out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let bearer_out = dir.join("bearer");
    let mut bearer = bin();
    bearer
        .env("AUTH_IT_TOKEN", &token)
        .args(["run", "--url", &server.url, "--bearer-env", "AUTH_IT_TOKEN"])
        .args([
            "-c",
            "2",
            "-d",
            "1s",
            "--warmup",
            "0s",
            "--name",
            "bearer-run",
        ])
        .args(["--out", bearer_out.to_str().unwrap()]);
    let bearer = watch(bearer, Duration::from_secs(60));
    let mut seen = Vec::new();
    for (run, out) in [(&oauth, &oauth_out), (&bearer, &bearer_out)] {
        assert!(run.output.status.success(), "{:?}", text(&run.output));
        let r = &steps(out)[0];
        assert!(num(r, "ok") > 0.0, "the credentials were used: {r:?}");
        let (stdout, stderr) = text(&run.output);
        seen.push((out.clone(), stdout.into_bytes()));
        seen.push((out.clone(), stderr.into_bytes()));
        seen.push((out.clone(), out.display().to_string().into_bytes()));
        files(out, &mut seen);
    }
    assert_eq!(u(&summary(&oauth_out), "/auth/token_requests"), 4);
    assert_eq!(u(&summary(&oauth_out), "/auth/users"), 4);
    assert!(seen.len() > 10, "{} texts", seen.len());
    for (path, bytes) in &seen {
        let t = String::from_utf8_lossy(bytes);
        for secret in [SECRET, cli_literal, token.as_str(), TOKEN_PREFIX] {
            assert!(!t.contains(secret), "{secret} in {}:\n{t}", path.display());
        }
    }
    // The stored profile names the variables, and the settings say how it was authorized.
    let settings = &summary(&oauth_out)["settings"]["target"];
    assert_eq!(settings["auth"]["kind"], "oauth");
    assert_eq!(settings["auth"]["auth_method"], "post");
    assert_eq!(settings["headers"]["X-Api-Key"], "[redacted]");
    drop(server);
}

/// A `private_key_jwt` run against `serve --auth` with the client's public key: the run's
/// output and the target's `/stats`.
fn jwt_run(name: &str, serve_extra: &[&str], run_extra: &[&str]) -> (Watched, PathBuf, Value) {
    let dir = scratch(name);
    let key = rcgen::KeyPair::generate().unwrap();
    let private = dir.join("client.key.pem");
    let public = dir.join("client.pub.pem");
    std::fs::write(&private, key.serialize_pem()).unwrap();
    std::fs::write(&public, key.public_key_pem()).unwrap();
    let mut serve_args = vec![
        "--auth",
        "--auth-client-key",
        public.to_str().unwrap(),
        "--auth-client-id",
        "jwt-client",
    ];
    serve_args.extend_from_slice(serve_extra);
    let server = start_http(&serve_cmd(&serve_args));
    let out = dir.join("run");
    let mut run = bin();
    run.args(["run", "--quiet", "--url", &server.url])
        .args(["--oauth-client-id", "jwt-client"])
        .args(["--oauth-auth-method", "private_key_jwt"])
        .args(["--oauth-private-key", private.to_str().unwrap()])
        .args(run_extra)
        .args(["-c", "2", "-d", "1s", "--warmup", "0s", "--workers", "1"])
        .args(["--out", out.to_str().unwrap()]);
    let run = watch(run, Duration::from_secs(60));
    let stats = target_stats(&server.url);
    (run, out, stats)
}

/// Defect 6 of #23: the assertion's `aud` is the issuer identifier from the authorization
/// server's metadata (SEP-1046, RFC 7523bis) by default, which the target requires by
/// default; `--oauth-jwt-audience token_endpoint` is for a server that wants the token
/// endpoint's URL (`--auth-jwt-aud-token-endpoint`).
#[test]
fn private_key_jwt_clients_get_tokens_with_the_audience_the_server_requires() {
    for (name, serve_extra, run_extra) in [
        ("auth_jwt_issuer", &[][..], &[][..]),
        (
            "auth_jwt_token_endpoint",
            &["--auth-jwt-aud-token-endpoint"][..],
            &["--oauth-jwt-audience", "token_endpoint"][..],
        ),
    ] {
        let (run, out, stats) = jwt_run(name, serve_extra, run_extra);
        assert!(
            run.output.status.success(),
            "{name}: {:?}",
            text(&run.output)
        );
        let r = &steps(&out)[0];
        assert!(num(r, "ok") > 0.0, "{name}");
        assert_eq!(num(r, "requests"), num(r, "ok"), "{name}");
        assert_eq!(u(&stats, "/auth/tokens_issued"), 1, "{name}: {stats}");
        assert_eq!(
            stats["auth"]["token_refused"],
            serde_json::json!({}),
            "{name}"
        );
    }
}

/// An assertion for the other audience is refused `invalid_client`, and the run stops at once.
#[test]
fn a_private_key_jwt_assertion_for_the_wrong_audience_is_refused_invalid_client() {
    for (name, serve_extra, run_extra) in [
        (
            "auth_jwt_wants_issuer",
            &[][..],
            &["--oauth-jwt-audience", "token_endpoint"][..],
        ),
        (
            "auth_jwt_wants_token_endpoint",
            &["--auth-jwt-aud-token-endpoint"][..],
            &[][..],
        ),
    ] {
        let (run, out, stats) = jwt_run(name, serve_extra, run_extra);
        let (stdout, stderr) = text(&run.output);
        assert_eq!(
            run.output.status.code(),
            Some(2),
            "{name}: {stdout}\n{stderr}"
        );
        assert!(stderr.contains("invalid_client"), "{name}: {stderr}");
        assert!(
            !out.exists(),
            "{name}: no run folder for a run that never started"
        );
        assert_eq!(u(&stats, "/auth/tokens_issued"), 0, "{name}: {stats}");
        assert_eq!(
            u(&stats, "/auth/token_refused/invalid_client"),
            1,
            "{name}: {stats}"
        );
    }
}

/// The protected resource and the authorization server by hand: scope, revocation, counts.
#[tokio::test]
async fn the_target_refuses_a_token_without_the_scope_403_and_a_revoked_one_401() {
    let server = protected_server(&[]);
    let addr = server
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let url = server.url.clone();
    let (good, other) =
        tokio::task::spawn_blocking(move || (fetch_token(&url, "mcp"), fetch_token(&url, "other")))
            .await
            .unwrap();
    let mut c = Conn::open(addr).await;
    let ping = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let with = |t: &str| {
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("authorization".to_owned(), format!("Bearer {t}")),
        ]
    };
    assert_eq!(c.post(&with(&good), &ping).await.status, 200);
    let forbidden = c.post(&with(&other), &ping).await;
    assert_eq!(forbidden.status, 403);
    let challenge = forbidden.header("www-authenticate").unwrap();
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let bad = c.post(&with("mcpl_at_1.2.3.1.4"), &ping).await;
    assert_eq!(bad.status, 401);
    assert!(
        bad.header("www-authenticate")
            .unwrap()
            .contains("invalid_token")
    );
    // The admin call revokes every token issued so far.
    let revoked = c.send("POST", "/auth/revoke", &[], Vec::new()).await;
    assert_eq!(revoked.status, 200);
    assert_eq!(c.post(&with(&good), &ping).await.status, 401);
    let stats = c.stats().await;
    let a = &stats["auth"];
    assert_eq!(
        (
            u(a, "/authorized"),
            u(a, "/forbidden"),
            u(a, "/unauthorized_invalid"),
            u(a, "/unauthorized_revoked"),
            u(a, "/revocations"),
            u(a, "/tokens_issued"),
        ),
        (1, 1, 1, 1, 1, 2),
        "{a}"
    );
    assert_eq!(u(&stats, "/http_status/401"), 2);
    assert_eq!(u(&stats, "/http_status/403"), 1);
}

#[test]
fn a_step_whose_static_token_is_revoked_fails_naming_auth() {
    let _share = machine::loading();
    // Revoked 3 s after the start: the handshake, just after it, goes through with the token;
    // the load's requests then get 401, and a static token cannot be refreshed.
    let server = protected_server(&["--revoke-at", "3"]);
    let token = fetch_token(&server.url, "mcp");
    let out = scratch("auth_static_revoked").join("run");
    let mut run = bin();
    run.env("AUTH_IT_TOKEN", &token)
        .args(["run", "--url", &server.url, "--bearer-env", "AUTH_IT_TOKEN"])
        .args(["-c", "2", "-d", "5s", "--warmup", "0s", "--workers", "1"])
        .args(["--out", out.to_str().unwrap()]);
    let run = watch(run, Duration::from_secs(60));
    let (stdout, stderr) = text(&run.output);
    assert!(run.output.status.success(), "{stdout}\n{stderr}");
    let r = &steps(&out)[0];
    assert_identity(r);
    assert!(num(r, "auth_failures") > 0.0, "{r:?}");
    assert_eq!(
        num(r, "auth_failures"),
        num(r, "http_401"),
        "none sent again"
    );
    assert_eq!(num(r, "retries"), 0.0);
    assert_eq!(r["verdict"], "failed");
    let s = summary(&out);
    let tripped = &s["steps"][0]["tripped"][0];
    assert_eq!(tripped["cause"]["counter"], "auth_failures", "{tripped}");
    assert!(stdout.contains("mostly auth failures"), "{stdout}");
    assert_eq!(
        num(r, "http_401") as u64,
        u(&target_stats(&server.url), "/auth/unauthorized_revoked")
    );
}

#[test]
fn a_ca_file_is_trusted_and_no_check_at_all_is_marked_loudly() {
    use crate::support::servers::serve;
    use crate::support::tls::tls_front;
    let _share = machine::loading();
    let target = serve(&[]);
    let dir = scratch("auth_tls_options");
    let cert = dir.join("front.pem");
    let front = tls_front(&target.url, &cert, None);
    let go = |name: &str, args: &[&str]| {
        let out = dir.join(name);
        let mut run = bin();
        run.env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR")
            .args([
                "run",
                "--url",
                &front.url(),
                "-c",
                "2",
                "-d",
                "1s",
                "--warmup",
                "0s",
            ])
            .args(["--workers", "1", "--out", out.to_str().unwrap()])
            .args(args);
        (watch(run, Duration::from_secs(60)), out)
    };
    // The front's certificate is its own: not trusted without the file.
    let (untrusted, _) = go("untrusted", &[]);
    let (_, stderr) = text(&untrusted.output);
    assert_eq!(untrusted.output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    let (trusted, out) = go("cacert", &["--cacert", cert.to_str().unwrap()]);
    assert!(
        trusted.output.status.success(),
        "{:?}",
        text(&trusted.output)
    );
    assert!(num(&steps(&out)[0], "ok") > 0.0);
    assert_eq!(
        summary(&out)["settings"]["target"]["tls"]["insecure"],
        false
    );
    let (insecure, out) = go("insecure", &["--insecure"]);
    let (stdout, stderr) = text(&insecure.output);
    assert!(insecure.output.status.success(), "{stdout}\n{stderr}");
    assert!(num(&steps(&out)[0], "ok") > 0.0);
    assert!(stderr.contains("WARNING: --insecure"), "{stderr}");
    assert!(
        stdout.contains("TLS certificates were not checked"),
        "{stdout}"
    );
    assert_eq!(summary(&out)["settings"]["target"]["tls"]["insecure"], true);
}

/// Token requests summed over the steps of a run (the columns of steps.csv).
fn step_column(dir: &Path, step: usize, col: &str) -> f64 {
    num(&steps(dir)[step], col)
}

/// Runs `profile` (a `serve --auth` built-in target) with a token per user on two workers
/// into `out`, and checks it exited 0.
fn run_per_user(profile: &Path, out: &Path) {
    let run = run_with(
        profile,
        &[("AUTH_IT_SECRET", SECRET)],
        &[
            "--token-per-user",
            "--workers",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(90),
    );
    assert!(run.output.status.success(), "{:?}", text(&run.output));
}

#[test]
fn a_token_per_user_sweep_of_4_then_8_users_fetches_one_token_per_user_that_ran() {
    let _share = machine::loading();
    let dir = scratch("auth_per_user_sweep");
    // Tokens that outlive the run: every token issued is a user's first.
    let p = builtin_profile(
        &dir,
        "auth_token_lifetime_s = 600",
        "concurrency = [4, 8]\nduration = \"2s\"",
    );
    let out = dir.join("run");
    run_per_user(&p, &out);
    let target = target_stats_file(&out);
    let auth = &summary(&out)["auth"];
    // Ground truth: 8 distinct users ran (users 0-3, then 0-7), each with its own token, the
    // first 4 kept through the second step.
    assert_eq!(u(&target, "/auth/tokens_issued"), 8, "{target}");
    assert_eq!(u(auth, "/token_requests"), 8, "{auth}");
    assert_eq!(u(auth, "/users"), 8, "{auth}");
    assert_eq!(auth["token_per_user"], true);
    assert_eq!(u(auth, "/token_refreshes"), 0);
    // The second step's 4 new users fetched theirs in it, and were timed.
    assert_eq!(step_column(&out, 1, "token_requests"), 4.0);
    assert!(step_column(&out, 1, "token_fetch_p50_ms") > 0.0);
    // No user's first request went without a token: the only 401 is the discovery's at the
    // handshake (user 0's token).
    assert_eq!(u(&target, "/auth/unauthorized"), 1, "{target}");
    for r in steps(&out) {
        assert_identity(&r);
        assert_eq!(num(&r, "requests"), num(&r, "ok"), "{r:?}");
    }
}

#[test]
fn short_tokens_per_user_are_refreshed_by_each_user_with_no_request_failing() {
    let _share = machine::loading();
    let dir = scratch("auth_per_user_refresh");
    let p = builtin_profile(
        &dir,
        "auth_token_lifetime_s = 2",
        "concurrency = [4]\nduration = \"7s\"",
    );
    let out = dir.join("run");
    run_per_user(&p, &out);
    let target = target_stats_file(&out);
    let auth = &summary(&out)["auth"];
    let requests = u(auth, "/token_requests");
    assert_eq!(requests, u(&target, "/auth/tokens_issued"), "{target}");
    assert_eq!(u(auth, "/users"), 4);
    // Every fetch but each user's first replaced a token of the same user; a user sending
    // for 7 s needs at least 4 tokens of 2 s.
    assert_eq!(u(auth, "/token_refreshes"), requests - 4, "{auth}");
    assert!(requests >= 4 * 4, "{requests} token requests");
    // At most one fetch per user at a time.
    assert!(u(&target, "/auth/token_requests_in_flight_max") <= 4);
    let r = &steps(&out)[0];
    assert_identity(r);
    assert_eq!(num(r, "requests"), num(r, "ok"), "{r:?}");
    assert_eq!((num(r, "http_401"), num(r, "auth_failures")), (0.0, 0.0));
    assert_eq!(u(&target, "/auth/unauthorized"), 1, "the discovery's only");
}

#[test]
fn one_users_revoked_token_costs_that_user_alone_one_401_one_refresh_and_one_retry() {
    let _share = machine::loading();
    let server = protected_server(&["--token-lifetime", "600"]);
    let out = scratch("auth_per_user_revoke").join("run");
    let mut run = bin();
    run.env("AUTH_IT_SECRET", SECRET)
        .args(["run", "--quiet", "--url", &server.url])
        .args(["--oauth-client-id", "mcpload"])
        .args(["--oauth-client-secret-env", "AUTH_IT_SECRET"])
        .args(["--token-per-user", "-c", "4", "-d", "8s", "--warmup", "0s"])
        .args(["--workers", "2", "--out", out.to_str().unwrap()]);
    let running = std::thread::spawn(move || watch(run, Duration::from_secs(90)));
    // Once the 4 users hold their tokens (0: user 0's, fetched at the handshake), token 2,
    // one user's, is revoked.
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while u(&target_stats(&server.url), "/auth/tokens_issued") < 4 {
        assert!(std::time::Instant::now() < give_up, "the users never ran");
        assert!(!running.is_finished(), "the run ended before its users ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let addr = server.url["http://".len()..].split('/').next().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let revoked = rt.block_on(async {
        let mut c = Conn::open(addr.parse().unwrap()).await;
        let headers = [(
            "content-type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        )];
        c.send("POST", "/auth/revoke", &headers, b"token_number=2".to_vec())
            .await
    });
    assert_eq!(revoked.status, 200);
    let run = running.join().unwrap();
    assert!(run.output.status.success(), "{:?}", text(&run.output));
    let target = target_stats(&server.url);
    let s = summary(&out);
    // Ground truth: one request came with the revoked token (its user has one in flight at a
    // time), and one more token was issued, for that user.
    assert_eq!(u(&target, "/auth/unauthorized_revoked"), 1, "{target}");
    assert_eq!(u(&target, "/auth/tokens_issued"), 5, "{target}");
    assert_eq!(u(&s, "/auth/token_requests"), 5, "{}", s["auth"]);
    assert_eq!(u(&s, "/auth/token_refreshes"), 1);
    assert_eq!(u(&s, "/auth/users"), 4);
    assert_eq!(u(&s, "/auth/retries_token_refresh"), 1);
    assert_eq!(total(&out, "http_401"), 1.0);
    assert_eq!(total(&out, "auth_failures"), 0.0);
    assert_eq!(total(&out, "requests") - total(&out, "ok"), 1.0);
    for r in steps(&out) {
        assert_identity(&r);
    }
}

#[test]
fn token_per_user_is_refused_without_oauth_and_in_an_open_loop() {
    let dir = scratch("auth_per_user_refused");
    let p = profile(
        &dir,
        "static",
        "[target]\nurl = \"http://127.0.0.1:9/mcp\"\n\n[target.auth]\nbearer_env = \"AUTH_IT_TOKEN\"\ntoken_per_user = true\n",
    );
    let flags_url = ["--url", "http://127.0.0.1:9/mcp"];
    let oauth = [
        "--oauth-client-id",
        "mcpload",
        "--oauth-client-secret-env",
        "AUTH_IT_TOKEN",
        "--token-per-user",
    ];
    let cases: [(Vec<&str>, &str); 3] = [
        (vec![p.to_str().unwrap()], "target.auth.token_per_user"),
        (
            [
                &flags_url[..],
                &["--bearer-env", "AUTH_IT_TOKEN", "--token-per-user"],
            ]
            .concat(),
            "token_per_user",
        ),
        (
            [&flags_url[..], &oauth[..], &["--rate", "10"]].concat(),
            "closed loop",
        ),
    ];
    for (args, says) in cases {
        let mut run = bin();
        run.env("AUTH_IT_TOKEN", "x")
            .arg("run")
            .arg("--quiet")
            .args(&args);
        let out = watch(run, Duration::from_secs(30)).output;
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
