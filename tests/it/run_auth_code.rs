//! The authorization code grant end to end against its ground truth: `serve --auth
//! --auth-code` (an authorization server that approves at once) and its `/stats`
//! (`auth.code`). The flow's refusals on raw requests (PKCE, resource, code and refresh token
//! reuse); `mcpload auth login --login-follow-redirects` by dynamic registration, by a client
//! ID metadata document served on loopback, and as a pre-registered client, its token store
//! (mode 0600 in a 0700 folder, in the scratch `XDG_CONFIG_HOME`); `run --oauth-login` refreshing 4 s
//! tokens under load without one failed request, each rotated refresh token saved; a revoked
//! refresh token stopping the run with exit code 2 and no 401; and no token, refresh token or
//! code anywhere in the output, the run folder or its name.

use crate::support::bin;
use crate::support::http_client::Conn;
use crate::support::machine;
use crate::support::run::{Watched, num, profile, steps, summary, watch};
use crate::support::scratch::scratch;
use crate::support::servers::{Server, serve_cmd, start_http, target_stats};
use base64::Engine;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the built-in target's access tokens, refresh tokens and codes start with.
const SECRET_PREFIXES: [&str; 3] = ["mcpl_at_", "mcpl_rt_", "mcpl_ac_"];

fn serve_code(args: &[&str]) -> Server {
    let mut a = vec!["--auth", "--auth-code"];
    a.extend_from_slice(args);
    start_http(&serve_cmd(&a))
}

fn code_stats(server: &Server) -> Value {
    target_stats(&server.url)["auth"]["code"].clone()
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `mcpload ARGS` with the token store in `config`.
fn mcpload(config: &Path, args: &[&str], budget: Duration) -> Watched {
    let mut c = bin();
    c.env("XDG_CONFIG_HOME", config).args(args);
    watch(c, budget)
}

/// A closed loop of `users` calling echo for `secs` seconds with `--oauth-login
/// --login-follow-redirects` (so a 403 asking for a wider scope is stepped up), into `out`.
fn logged_in_echo_run(config: &Path, url: &str, users: u32, secs: u32, out: &Path) -> Watched {
    let (users, secs) = (users.to_string(), format!("{secs}s"));
    mcpload(
        config,
        &[
            "run",
            "--quiet",
            "--url",
            url,
            "--oauth-login",
            "--login-follow-redirects",
            "--tool",
            "echo",
            "-c",
            &users,
            "-d",
            &secs,
            "--warmup",
            "0s",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    )
}

fn login(config: &Path, url: &str, extra: &[&str]) -> Watched {
    let mut args = vec!["auth", "login", url, "--login-follow-redirects"];
    args.extend_from_slice(extra);
    let w = mcpload(config, &args, Duration::from_secs(60));
    assert!(w.output.status.success(), "{}", text(&w.output));
    w
}

fn store(config: &Path) -> Value {
    let path = config.join("mcpload/tokens.json");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
    let dir = config.join("mcpload");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn load_profile(dir: &Path, url: &str, secs: u32) -> PathBuf {
    profile(
        dir,
        "code",
        &format!(
            "[target]\nurl = \"{url}\"\n\n[target.auth]\noauth = {{ grant = \"authorization_code\" }}\n\n[load]\nconcurrency = [8]\nduration = \"{secs}s\"\nwarmup = \"0s\"\ntimeout = \"20s\"\n\n[[mix]]\nmethod = \"tools/list\"\n"
        ),
    )
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The query pairs of a URL (values left encoded: the tests' values need no decoding).
fn query(url: &str) -> Vec<(String, String)> {
    let q = url.split_once('?').map_or("", |(_, q)| q);
    q.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn get<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

#[test]
fn the_authorization_server_refuses_what_the_flow_forbids_and_counts_it() {
    let server = serve_code(&["--token-lifetime", "60"]);
    let addr = server.addr();
    let base = format!("http://{addr}");
    let resource = format!("{base}/mcp");
    let enc = |s: &str| s.replace(':', "%3A").replace('/', "%2F");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = Conn::open(addr).await;
        let json = [("content-type".to_owned(), "application/json".to_owned())];
        let form = [(
            "content-type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        )];
        let redirect = "http://127.0.0.1:9/callback";
        let reg = serde_json::json!({"redirect_uris": [redirect], "token_endpoint_auth_method": "none"});
        let r = c.send("POST", "/register", &json, reg.to_string().into_bytes()).await;
        assert_eq!(r.status, 201);
        let client = r.json()["client_id"].as_str().unwrap().to_owned();
        let verifier = "v".repeat(50);
        let challenge = b64(ring_free_sha256(verifier.as_bytes()).as_slice());
        let authorize = |method: &str, res: &str, redirect: &str| {
            format!(
                "/authorize?response_type=code&client_id={client}&redirect_uri={}&code_challenge={challenge}&code_challenge_method={method}&state=st8&resource={}&scope=mcp",
                enc(redirect),
                enc(res)
            )
        };
        // An unknown redirect URI: no redirect at all.
        let r = c.send("GET", &authorize("S256", &resource, "http://evil.example/cb"), &[], vec![]).await;
        assert_eq!(r.status, 400);
        // PKCE plain, a foreign resource: redirected with the error, the state and iss.
        let r = c.send("GET", &authorize("plain", &resource, redirect), &[], vec![]).await;
        assert_eq!(r.status, 302);
        let q = query(r.header("location").unwrap());
        assert_eq!(get(&q, "error"), Some("invalid_request"));
        assert_eq!(get(&q, "state"), Some("st8"));
        let r = c.send("GET", &authorize("S256", "http://other/mcp", redirect), &[], vec![]).await;
        assert_eq!(get(&query(r.header("location").unwrap()), "error"), Some("invalid_target"));
        // The right request: a code, the state, the issuer (on another loopback port too).
        let r = c.send("GET", &authorize("S256", &resource, "http://127.0.0.1:5555/callback"), &[], vec![]).await;
        assert_eq!(r.status, 302);
        let q = query(r.header("location").unwrap());
        assert!(r.header("location").unwrap().starts_with("http://127.0.0.1:5555/callback?"));
        assert_eq!(get(&q, "iss"), Some(enc(&base).as_str()));
        let code = get(&q, "code").unwrap().to_owned();
        let token = |code: &str, verifier: &str| {
            format!(
                "grant_type=authorization_code&code={code}&client_id={client}&redirect_uri={}&code_verifier={verifier}&resource={}",
                enc("http://127.0.0.1:5555/callback"),
                enc(&resource)
            )
        };
        // A wrong verifier spends the code.
        let r = c.send("POST", "/token", &form, token(&code, &"w".repeat(50)).into_bytes()).await;
        assert_eq!((r.status, r.json()["error"].clone()), (400, "invalid_grant".into()));
        let r = c.send("POST", "/token", &form, token(&code, &verifier).into_bytes()).await;
        assert_eq!(r.status, 400, "a code works once");
        // A new code, redeemed right: a token of the scope and a refresh token.
        let r = c.send("GET", &authorize("S256", &resource, redirect), &[], vec![]).await;
        let code = get(&query(r.header("location").unwrap()), "code").unwrap().to_owned();
        let t = |code: &str| {
            format!(
                "grant_type=authorization_code&code={code}&client_id={client}&redirect_uri={}&code_verifier={verifier}&resource={}",
                enc(redirect),
                enc(&resource)
            )
        };
        let r = c.send("POST", "/token", &form, t(&code).into_bytes()).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let first = r.json()["refresh_token"].as_str().unwrap().to_owned();
        assert_eq!(r.json()["scope"], "mcp");
        // Rotation: the first refresh token works once; presented again it is refused.
        let refresh = |rt: &str| format!("grant_type=refresh_token&refresh_token={rt}&client_id={client}");
        // For another resource it is refused, and not spent by that.
        let elsewhere = format!("{}&resource={}", refresh(&first), enc("http://127.0.0.1:1/other"));
        let r = c.send("POST", "/token", &form, elsewhere.into_bytes()).await;
        assert_eq!((r.status, r.json()["error"].clone()), (400, "invalid_target".into()));
        let r = c.send("POST", "/token", &form, refresh(&first).into_bytes()).await;
        assert_eq!(r.status, 200);
        let second = r.json()["refresh_token"].as_str().unwrap().to_owned();
        assert_ne!(first, second);
        let r = c.send("POST", "/token", &form, refresh(&first).into_bytes()).await;
        assert_eq!(r.status, 400);
        // Revoked: the live one is refused too.
        let r = c.send("POST", "/auth/revoke", &form, b"refresh_tokens=all".to_vec()).await;
        assert_eq!(r.status, 200);
        let r = c.send("POST", "/token", &form, refresh(&second).into_bytes()).await;
        assert_eq!(r.status, 400);
    });
    let n = code_stats(&server);
    assert_eq!(u(&n, "/registrations"), 1);
    assert_eq!(u(&n, "/authorization_requests"), 5);
    assert_eq!(
        n["authorization_refused"],
        serde_json::json!({"invalid_client": 1, "invalid_request": 1, "invalid_target": 1})
    );
    assert_eq!(u(&n, "/codes_issued"), 2);
    assert_eq!(u(&n, "/codes_redeemed"), 1);
    assert_eq!(u(&n, "/pkce_failures"), 2);
    assert_eq!(u(&n, "/refreshes"), 1);
    assert_eq!(u(&n, "/rotations"), 1);
    assert_eq!(u(&n, "/refresh_reused"), 1);
    assert_eq!(u(&n, "/refresh_revoked"), 1);
    assert_eq!(u(&n, "/refresh_revocations"), 1);
    let auth = &target_stats(&server.url)["auth"];
    assert_eq!(auth["token_refused"]["invalid_grant"], 4);
    assert_eq!(auth["token_refused"]["invalid_target"], 1);
}

/// SHA-256 by the system's `sha256sum` (the test checks the server's PKCE with a tool of
/// its own, not the code under test).
fn ring_free_sha256(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Once the run against `server` has sent requests: every access token issued so far
/// revoked (`POST /auth/revoke`), so the users sending then are all answered 401 at once.
fn revoke_access_tokens_mid_run(server: &Server) -> std::thread::JoinHandle<()> {
    let url = server.url.clone();
    let addr = server.addr();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while u(&target_stats(&url), "/requests_seen") < 200 {
            assert!(std::time::Instant::now() < deadline, "the run sent nothing");
            std::thread::sleep(Duration::from_millis(50));
        }
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut c = Conn::open(addr).await;
            let r = c.send("POST", "/auth/revoke", &[], Vec::new()).await;
            assert_eq!(r.status, 200);
        });
    })
}

#[test]
fn a_soak_on_second_long_tokens_never_fails_a_request_and_saves_each_rotated_refresh_token() {
    let _share = machine::loading();
    // 4 s tokens: each is refreshed 2 s before it expires, a margin a loaded machine keeps.
    let server = serve_code(&["--token-lifetime", "4", "--token-delay-ms", "50"]);
    let dir = scratch("auth_code_soak");
    let config = dir.join("config");
    let url = server.url.clone();
    // Logged in by the profile that names the target.
    let p = load_profile(&dir, &url, 12);
    let login_out = login(&config, p.to_str().unwrap(), &[]);
    let entry = store(&config)["entries"][0].clone();
    let after_login = entry["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(entry["scope"], "mcp offline_access");
    let status = mcpload(&config, &["auth", "status"], Duration::from_secs(20));
    assert!(text(&status.output).contains("refresh token held"));
    assert_eq!(entry["url"], url.as_str());
    let out = dir.join("run");
    let revoker = revoke_access_tokens_mid_run(&server);
    let run = mcpload(
        &config,
        &[
            "run",
            "--quiet",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(90),
    );
    revoker.join().unwrap();
    assert!(run.output.status.success(), "{}", text(&run.output));
    let rows = steps(&out);
    let r = &rows[0];
    for col in ["errors", "auth_failures"] {
        assert_eq!(num(r, col), 0.0, "{col}: {r:?}");
    }
    assert!(num(r, "ok") > 0.0);
    let code = code_stats(&server);
    let auth = &summary(&out)["auth"];
    // 12 s of 4 s tokens: refreshed every 2 s or so, and once for the revocation: every one a
    // token request of the run, one at a time though each took 50 ms and every user sending
    // at the revocation was refused at once.
    assert!(u(&code, "/refreshes") >= 3, "{code}");
    assert_eq!(
        u(auth, "/token_requests"),
        u(&code, "/refreshes"),
        "{auth} {code}"
    );
    assert_eq!(u(&code, "/refresh_reused"), 0);
    let stats = target_stats(&server.url);
    assert_eq!(u(&stats, "/auth/token_requests_in_flight_max"), 1);
    // Every 401 the target gave, but the login's probe, was the revocation's: each one sent
    // again, none an error; no token expired unrefreshed.
    let refused = u(&stats, "/auth/unauthorized") - 1;
    assert!(refused >= 1, "{stats}");
    assert_eq!(u(&stats, "/auth/unauthorized_revoked"), refused, "{stats}");
    assert_eq!(u(&stats, "/auth/unauthorized_expired"), 0, "{stats}");
    assert_eq!(num(r, "http_401") as u64, refused, "{r:?}");
    assert_eq!(num(r, "retries") as u64, refused, "{r:?}");
    // The refresh token in the store is the last one issued: a new login's worth of it.
    let saved = store(&config)["entries"][0]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(saved, after_login);
    assert_eq!(
        summary(&out)["settings"]["target"]["auth"]["grant"],
        "authorization_code"
    );
    no_secrets(&[&login_out, &status, &run], &[&out]);
}

/// No token, refresh token or code in `outputs` or under `dirs` (names included), and no
/// field named as they are in a results file.
fn no_secrets(outputs: &[&Watched], dirs: &[&Path]) {
    let mut texts: Vec<(String, String)> = outputs
        .iter()
        .map(|w| ("output".to_owned(), text(&w.output)))
        .collect();
    for d in dirs {
        let mut stack = vec![d.to_path_buf()];
        while let Some(p) = stack.pop() {
            texts.push((p.display().to_string(), p.display().to_string()));
            if p.is_dir() {
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            } else {
                let t = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                for field in ["access_token", "refresh_token", "code_verifier"] {
                    assert!(!t.contains(field), "{field} in {}", p.display());
                }
                texts.push((p.display().to_string(), t));
            }
        }
    }
    for (place, t) in texts {
        for s in SECRET_PREFIXES {
            assert!(!t.contains(s), "{s} in {place}:\n{t}");
        }
    }
}

#[test]
fn a_revoked_refresh_token_stops_the_run_with_exit_code_2_and_no_401() {
    let _share = machine::loading();
    let server = serve_code(&["--token-lifetime", "10"]);
    let dir = scratch("auth_code_revoked");
    let config = dir.join("config");
    let login_out = login(&config, &server.url, &[]);
    // Revoked before the run: its stored access token works for 10 s (the run uses it while
    // it has 2 s left), then the refresh is refused (at half its remaining life).
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = Conn::open(server.addr()).await;
        let form = [(
            "content-type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        )];
        let r = c
            .send(
                "POST",
                "/auth/revoke",
                &form,
                b"refresh_tokens=all".to_vec(),
            )
            .await;
        assert_eq!(r.status, 200);
    });
    let p = load_profile(&dir, &server.url, 30);
    let out = dir.join("run");
    let run = mcpload(
        &config,
        &[
            "run",
            "--quiet",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let said = text(&run.output);
    assert_eq!(run.output.status.code(), Some(2), "{said}");
    assert!(
        said.contains("refused the refresh token (invalid_grant)"),
        "{said}"
    );
    assert!(said.contains("mcpload auth login"), "{said}");
    // Stopped long before its 30 s: what ran is in the folder.
    let r = &steps(&out)[0];
    assert!(num(r, "duration_s") < 20.0, "{r:?}");
    assert_eq!(num(r, "http_401"), 0.0, "{r:?}");
    let stats = target_stats(&server.url);
    assert_eq!(
        u(&stats, "/auth/unauthorized"),
        1,
        "the login's probe alone: {stats}"
    );
    assert_eq!(u(&stats, "/auth/code/refresh_revoked"), 1);
    no_secrets(&[&login_out, &run], &[&out]);
}

/// A client ID metadata document, served on loopback by the test: every request gets it.
fn serve_document(redirect_prefix: &str) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/client.json", listener.local_addr().unwrap());
    let doc = serde_json::json!({
        "client_id": url,
        "client_name": "mcpload test",
        "redirect_uris": [redirect_prefix],
        "token_endpoint_auth_method": "none",
    })
    .to_string();
    let handle = std::thread::spawn(move || {
        // One fetch is all the authorization server makes; none within 60 s ends the wait.
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let accepted = loop {
            match listener.accept() {
                Ok((s, _)) => break Some(s),
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => break None,
            }
        };
        if let Some(mut s) = accepted {
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}",
                doc.len()
            );
        }
    });
    (url, handle)
}

#[test]
fn a_client_id_metadata_document_and_a_pre_registered_client_log_in_without_registration() {
    let server = start_http(&{
        let mut cmd = vec![
            "env".to_owned(),
            "MCPLOAD_CLIENT_SECRET=pre-secret-1b7e".to_owned(),
        ];
        cmd.extend(serve_cmd(&["--auth", "--auth-code"]));
        cmd
    });
    let dir = scratch("auth_code_clients");
    let config = dir.join("config");
    let (doc, fetched) = serve_document("http://127.0.0.1:1/callback");
    let by_document = login(&config, &server.url, &["--oauth-client-id", &doc]);
    fetched.join().unwrap();
    let n = code_stats(&server);
    assert_eq!(
        (u(&n, "/metadata_documents"), u(&n, "/registrations")),
        (1, 0)
    );
    let mut c = bin();
    c.env("XDG_CONFIG_HOME", &config)
        .env("PRE_SECRET", "pre-secret-1b7e")
        .args(["auth", "login", &server.url, "--login-follow-redirects"])
        .args([
            "--oauth-client-id",
            "mcpload",
            "--oauth-client-secret-env",
            "PRE_SECRET",
        ]);
    let pre = watch(c, Duration::from_secs(60));
    assert!(pre.output.status.success(), "{}", text(&pre.output));
    let entries = store(&config)["entries"].as_array().unwrap().clone();
    let clients: Vec<&str> = entries
        .iter()
        .map(|e| e["client_id"].as_str().unwrap())
        .collect();
    assert_eq!(clients, [doc.as_str(), "mcpload"]);
    assert_eq!(entries[1]["auth_method"], "client_secret_basic");
    assert!(
        entries[1].get("client_secret").is_none(),
        "a pre-registered secret stays in the environment"
    );
    // The pre-registered client refreshes with its secret from the environment.
    let out = dir.join("run");
    let mut c = bin();
    c.env("XDG_CONFIG_HOME", &config)
        .env("PRE_SECRET", "pre-secret-1b7e")
        .args(["run", "--quiet", "--url", &server.url, "--oauth-login"])
        .args([
            "--oauth-client-id",
            "mcpload",
            "--oauth-client-secret-env",
            "PRE_SECRET",
        ])
        .args([
            "-c",
            "1",
            "-d",
            "1s",
            "--warmup",
            "0s",
            "--out",
            out.to_str().unwrap(),
        ]);
    let run = watch(c, Duration::from_secs(60));
    assert!(run.output.status.success(), "{}", text(&run.output));
    assert!(num(&steps(&out)[0], "ok") > 0.0);
    no_secrets(&[&by_document, &pre, &run], &[&out]);
    // Logging out forgets both.
    let out = mcpload(
        &config,
        &["auth", "logout", &server.url],
        Duration::from_secs(20),
    );
    assert!(text(&out.output).contains("forgot 2 login(s)"));
    assert_eq!(store(&config)["entries"], serde_json::json!([]));
    let n = code_stats(&server);
    assert_eq!(u(&n, "/codes_redeemed"), 2);
}

#[test]
fn a_step_up_scope_is_refused_403_on_tools_call_and_stepped_up_once_where_allowed() {
    let server = serve_code(&["--auth-step-up-scope", "write"]);
    let dir = scratch("auth_code_step_up");
    let config = dir.join("config");
    let login_out = login(&config, &server.url, &[]);
    let run_mix = |name: &str, mix: &str| {
        let p = profile(
            &dir,
            name,
            &format!(
                "[target]\nurl = \"{}\"\n\n[target.auth]\noauth = {{ grant = \"authorization_code\" }}\n\n[load]\nconcurrency = [1]\nduration = \"1s\"\nwarmup = \"0s\"\n\n[[mix]]\n{mix}\n",
                server.url
            ),
        );
        let out = dir.join(name);
        let run = mcpload(
            &config,
            &[
                "run",
                "--quiet",
                p.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            Duration::from_secs(60),
        );
        (run, out)
    };
    let (list, list_out) = run_mix("list", "method = \"tools/list\"");
    assert!(list.output.status.success(), "{}", text(&list.output));
    assert_eq!(num(&steps(&list_out)[0], "http_403"), 0.0);
    let before = target_stats(&server.url);
    let (call, call_out) = run_mix("call", "method = \"tools/call\"\ntool = \"echo\"");
    let r = &steps(&call_out)[0];
    assert!(num(r, "http_403") > 0.0, "{r:?} {}", text(&call.output));
    let after = target_stats(&server.url);
    let refused =
        u(&after, "/auth/code/forbidden_step_up") - u(&before, "/auth/code/forbidden_step_up");
    assert_eq!(num(r, "http_403") as u64, refused);
    assert_eq!(
        u(&after, "/auth/forbidden") - u(&before, "/auth/forbidden"),
        refused
    );
    assert_eq!(
        u(&after, "/auth/code/step_ups"),
        0,
        "no step-up without --login-follow-redirects"
    );
    // With --login-follow-redirects: the first 403 is stepped up (a new authorization of the
    // same client for both scopes), its request sent again, and none fails after.
    let out = dir.join("stepped");
    let run = logged_in_echo_run(&config, &server.url, 2, 2, &out);
    assert!(run.output.status.success(), "{}", text(&run.output));
    let r = &steps(&out)[0];
    let last = target_stats(&server.url);
    assert_eq!(u(&last, "/auth/code/step_ups"), 1);
    // Every 403 the target gave is a 403 of the run: the stepped-up one (sent again once)
    // and any sent by the other user before the wider token came; none after it.
    let refused =
        u(&last, "/auth/code/forbidden_step_up") - u(&after, "/auth/code/forbidden_step_up");
    assert_eq!(num(r, "http_403") as u64, refused, "{r:?}");
    assert!((1..=2).contains(&refused), "{refused}");
    // The stepped-up request is sent again; the other user's, only if the wider token had
    // come by then.
    assert_eq!(num(r, "http_401"), 0.0, "{r:?}");
    assert!((1.0..=refused as f64).contains(&num(r, "retries")), "{r:?}");
    assert_eq!(num(r, "ok"), num(r, "requests") - refused as f64, "{r:?}");
    assert_eq!(
        u(&last, "/auth/code/registrations"),
        1,
        "the same client, authorized anew"
    );
    let scope = store(&config)["entries"][0]["scope"].clone();
    assert_eq!(scope, "mcp offline_access write");
    no_secrets(
        &[&login_out, &list, &call, &run],
        &[&list_out, &call_out, &out],
    );
}

/// One `GET` over a plain socket: the status and the `Location` header.
fn get_location(url: &str) -> (u16, Option<String>) {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut head = String::new();
    s.read_to_string(&mut head).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let location = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    (status, location)
}

/// The authorization URL `child` prints on stderr, and what it said up to it; within 60 s
/// (a reader thread: a silent child never hangs the test).
fn printed_url(child: &mut std::process::Child) -> (String, String) {
    use std::io::BufRead;
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut said = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            said.push_str(&line);
            said.push('\n');
            if line.starts_with("http://") {
                let _ = tx.send(Ok((line.trim().to_owned(), said)));
                return;
            }
        }
        let _ = tx.send(Err(said));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(found)) => found,
        Ok(Err(said)) => panic!("no URL printed: {said}"),
        Err(_) => {
            let _ = child.kill();
            panic!("no URL printed within 60 s");
        }
    }
}

#[test]
fn without_a_browser_the_url_is_printed_and_a_person_approving_it_completes_the_login() {
    let server = serve_code(&[]);
    let dir = scratch("auth_code_no_browser");
    let config = dir.join("config");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .env("XDG_CONFIG_HOME", &config)
        .args(["auth", "login", &server.url, "--no-browser"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The person: reads the URL mcpload printed, and the browser follows the redirect.
    let (url, said) = printed_url(&mut child);
    assert!(
        url.contains("code_challenge_method=S256") && url.contains("state="),
        "{url}"
    );
    let (status, location) = get_location(&url);
    assert_eq!(status, 302);
    let (status, _) = get_location(&location.unwrap());
    assert_eq!(status, 200, "the loopback listener took the redirect");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{said}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("refresh token held"));
    assert_eq!(store(&config)["entries"].as_array().unwrap().len(), 1);
    for s in SECRET_PREFIXES {
        assert!(!said.contains(s) && !String::from_utf8_lossy(&out.stdout).contains(s));
    }
}

/// `POST /register` with `token_endpoint_auth_method` `method`: the status and answer.
fn register(server: &Server, method: &str) -> (u16, Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = Conn::open(server.addr()).await;
        let body = serde_json::json!({
            "redirect_uris": ["http://127.0.0.1:1/callback"],
            "token_endpoint_auth_method": method,
        });
        let json = [("content-type".to_owned(), "application/json".to_owned())];
        let r = c
            .send("POST", "/register", &json, body.to_string().into_bytes())
            .await;
        (
            r.status,
            serde_json::from_slice(&r.body).unwrap_or(Value::Null),
        )
    })
}

#[test]
fn a_step_up_keeps_the_registered_clients_secret_for_the_refreshes_after_it() {
    let _share = machine::loading();
    let server = serve_code(&[
        "--auth-step-up-scope",
        "write",
        "--auth-code-confidential",
        "--token-lifetime",
        "4",
    ]);
    // The target gives a secret on registration when asked, and refuses a public client.
    let (status, v) = register(&server, "client_secret_basic");
    assert_eq!(status, 201, "{v}");
    assert!(
        v["client_secret"].as_str().is_some_and(|s| !s.is_empty()),
        "{v}"
    );
    let (status, v) = register(&server, "none");
    assert_eq!(
        (status, &v["error"]),
        (400, &Value::from("invalid_client_metadata"))
    );
    let dir = scratch("auth_code_step_up_secret");
    let config = dir.join("config");
    let login_out = login(&config, &server.url, &[]);
    let entry = store(&config)["entries"][0].clone();
    assert_eq!(entry["auth_method"], "client_secret_basic", "{entry}");
    // Stepped up at the first tools/call, then refreshed (4 s tokens over 7 s) as the
    // registered client, by its secret.
    let out = dir.join("run");
    let run = logged_in_echo_run(&config, &server.url, 1, 7, &out);
    assert!(run.output.status.success(), "{}", text(&run.output));
    let code = code_stats(&server);
    assert_eq!(u(&code, "/step_ups"), 1, "{code}");
    assert!(u(&code, "/refreshes") >= 1, "{code}");
    let r = &steps(&out)[0];
    assert_eq!(num(r, "auth_failures"), 0.0, "{r:?}");
    let after = store(&config)["entries"][0].clone();
    assert_eq!(after["auth_method"], "client_secret_basic", "{after}");
    assert_eq!(after["client_secret"], entry["client_secret"]);
    assert_eq!(after["scope"], "mcp offline_access write");
    no_secrets(&[&login_out, &run], &[&out]);
}

#[test]
fn a_browser_that_shows_nothing_still_leaves_the_url_on_stderr() {
    let server = serve_code(&[]);
    let dir = scratch("auth_code_browser");
    // An xdg-open that starts and shows nothing (no display, no browser set up).
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let opener = bin_dir.join("xdg-open");
    std::fs::write(&opener, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("PATH", path)
        .args(["auth", "login", &server.url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (url, said) = printed_url(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    assert!(said.contains("browser was opened"), "{said}");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
}

#[test]
fn auth_status_never_shows_a_urls_userinfo_or_query_values() {
    let dir = scratch("auth_code_status_redacted");
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("mcpload")).unwrap();
    let url = "http://user:pw-sekrit@127.0.0.1:1/mcp?key=key-sekrit";
    let contents = serde_json::json!({"version": 1, "entries": [{
        "url": url, "resource": url, "client_id": "c", "auth_method": "none",
        "issuer": "http://127.0.0.1:1", "token_endpoint": "http://127.0.0.1:1/token",
        "access_token": "mcpl_at_x", "saved_at": 1,
    }]});
    std::fs::write(
        config.join("mcpload/tokens.json"),
        serde_json::to_vec(&contents).unwrap(),
    )
    .unwrap();
    let status = mcpload(&config, &["auth", "status"], Duration::from_secs(20));
    let said = text(&status.output);
    assert!(status.output.status.success(), "{said}");
    assert!(said.contains("127.0.0.1:1/mcp"), "{said}");
    assert!(!said.contains("sekrit"), "{said}");
}
