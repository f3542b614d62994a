//! The built-in target speaks both MCP eras on one endpoint, over real sockets: each era's
//! handshake or discovery, each header rule of 2026-07-28, sessions and DELETE, batches per
//! revision, SSE answers with progress, era/version restriction, and the safe defaults
//! (Origin 403, 413, 415, bounded connections). One test runs the real binary.

use crate::support::http_client::*;
use crate::support::servers::serve;
use mcpload::server::{AnswerMode, ServeConfig, ServedEras, start_http};
use serde_json::{Value, json};

async fn target(cfg: ServeConfig) -> (mcpload::server::RunningTarget, Conn) {
    let t = start_http(cfg).await.unwrap();
    let c = Conn::open(t.addr()).await;
    (t, c)
}

fn error_code(r: &Reply) -> i64 {
    r.json()["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error in {}", r.json()))
}

#[tokio::test]
async fn legacy_handshake_session_and_methods() {
    let (_t, mut c) = target(ServeConfig::default()).await;
    let session = initialize(&mut c, "2025-06-18")
        .await
        .expect("a session id");
    let hs = legacy_headers("2025-06-18", Some(&session));
    let tools = c
        .post(&hs, &request(json!(1), "tools/list", json!({})))
        .await
        .json();
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "sleep",
            "fail",
            "tool_error",
            "payload",
            "progress",
            "job_start",
            "job_status",
            "job_report",
            "job_lookup",
            "counter_add",
            "counter_read",
            "slow_task",
            "task_only"
        ]
    );
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    assert!(
        tools["result"].get("resultType").is_none(),
        "legacy results carry no resultType"
    );
    let e = c.post(&hs, &echo(2)).await.json();
    assert_eq!(e["result"]["content"][0]["text"], "m2");
    let fail = c
        .post(
            &hs,
            &request(
                json!(3),
                "tools/call",
                json!({"name": "fail", "arguments": {"code": -32042}}),
            ),
        )
        .await;
    assert_eq!((fail.status, error_code(&fail)), (200, -32042));
    let te = c
        .post(
            &hs,
            &request(
                json!(4),
                "tools/call",
                json!({"name": "tool_error", "arguments": {}}),
            ),
        )
        .await
        .json();
    assert_eq!(te["result"]["isError"], true);
    let big = c
        .post(
            &hs,
            &request(
                json!(5),
                "tools/call",
                json!({"name": "payload", "arguments": {"bytes": 100000}}),
            ),
        )
        .await
        .json();
    assert_eq!(
        big["result"]["content"][0]["text"].as_str().unwrap().len(),
        100_000
    );
    let read = c
        .post(
            &hs,
            &request(json!(6), "resources/read", json!({"uri": "mem://item/7"})),
        )
        .await
        .json();
    assert_eq!(read["result"]["contents"][0]["text"], "item 7");
    let tpl = c
        .post(
            &hs,
            &request(json!(7), "resources/templates/list", json!({})),
        )
        .await
        .json();
    assert_eq!(
        tpl["result"]["resourceTemplates"][0]["uriTemplate"],
        "mem://item/{n}"
    );
    let prompt = c
        .post(
            &hs,
            &request(
                json!(8),
                "prompts/get",
                json!({"name": "greet", "arguments": {"name": "Ada"}}),
            ),
        )
        .await
        .json();
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "Hello, Ada!"
    );
    let ping = c
        .post(&hs, &request(json!("p"), "ping", json!({})))
        .await
        .json();
    assert_eq!(ping["result"], json!({}));
    // Unknown method: -32601 with HTTP 200 in the legacy era.
    let unknown = c.post(&hs, &request(json!(9), "no/such", json!({}))).await;
    assert_eq!((unknown.status, error_code(&unknown)), (200, -32601));
    // An unknown client version is answered with the newest legacy one.
    let mut c2 = Conn::open(_t.addr()).await;
    let init = initialize_request(json!(1), "2099-01-01");
    let r = c2.post(&base_headers(), &init).await.json();
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(r["result"]["serverInfo"]["name"], "mcpload-serve");
}

#[tokio::test]
async fn sessions_unknown_404_delete_and_header_checks() {
    let (_t, mut c) = target(ServeConfig::default()).await;
    let session = initialize(&mut c, "2025-11-25").await.unwrap();
    // A version header that disagrees with the session: 400.
    let r = c
        .post(&legacy_headers("2025-06-18", Some(&session)), &echo(1))
        .await;
    assert_eq!(r.status, 400);
    // An unsupported version header: 400 naming what is supported.
    let r = c
        .post(&legacy_headers("2024-11-05", Some(&session)), &echo(2))
        .await;
    assert_eq!((r.status, error_code(&r)), (400, -32022));
    let supported = r.json()["error"]["data"]["supported"].clone();
    assert_eq!(
        supported,
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    // Unknown session: 404.
    let r = c
        .post(
            &legacy_headers("2025-11-25", Some("00000000-0000000000000001")),
            &echo(3),
        )
        .await;
    assert_eq!(r.status, 404);
    // DELETE ends the session; using or deleting it again: 404.
    let del = |s: &str| h(&[("mcp-session-id", s)]);
    assert_eq!(
        c.send("DELETE", "/mcp", &del(&session), vec![])
            .await
            .status,
        200
    );
    assert_eq!(
        c.post(&legacy_headers("2025-11-25", Some(&session)), &echo(4))
            .await
            .status,
        404
    );
    assert_eq!(
        c.send("DELETE", "/mcp", &del(&session), vec![])
            .await
            .status,
        404
    );
    assert_eq!(c.send("DELETE", "/mcp", &[], vec![]).await.status, 400);
    // GET on the endpoint: 405 (no standalone stream); other paths: 404.
    let get = c.send("GET", "/mcp", &[], vec![]).await;
    assert_eq!(
        (get.status, get.header("allow")),
        (405, Some("POST, DELETE"))
    );
    assert_eq!(c.send("GET", "/nope", &[], vec![]).await.status, 404);
    // Without any header a request is served as 2025-03-26, sessionless.
    let r = c.post(&base_headers(), &echo(5)).await;
    assert_eq!(r.json()["result"]["content"][0]["text"], "m5");
    let stats = c.stats().await;
    assert_eq!(stats["http_status"]["404"], 4); // three above and GET /nope
    assert_eq!(stats["sessions_opened"], 1);
}

#[tokio::test]
async fn modern_discovery_and_header_rules() {
    let (_t, mut c) = target(ServeConfig::default()).await;
    let (hs, body) = modern(json!("d"), "server/discover", json!({}));
    let d = c.post(&hs, &body).await;
    assert_eq!(d.status, 200);
    let d = d.json()["result"].clone();
    assert_eq!(d["resultType"], "complete");
    assert_eq!(d["supportedVersions"][0], MODERN);
    for k in ["capabilities", "ttlMs", "cacheScope"] {
        assert!(d.get(k).is_some(), "discover result lacks {k}: {d}");
    }
    let (hs, body) = modern(json!(1), "tools/list", json!({}));
    let tl = c.post(&hs, &body).await.json();
    assert_eq!(tl["result"]["resultType"], "complete");
    assert_eq!(tl["result"]["tools"].as_array().unwrap().len(), 15);
    let (hs, body) = modern(
        json!(2),
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hé"}}),
    );
    let e = c.post(&hs, &body).await.json();
    assert_eq!(e["result"]["content"][0]["text"], "hé");
    assert_eq!(e["result"]["resultType"], "complete");

    // Each header rule: (what to change, status, code).
    let call = |id: u64| {
        modern(
            json!(id),
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "x"}}),
        )
    };
    let set = |hs: &mut Vec<(String, String)>, k: &str, v: Option<&str>| {
        hs.retain(|(n, _)| n != k);
        if let Some(v) = v {
            hs.push((k.into(), v.into()));
        }
    };
    let cases: [(&str, Option<&str>, u16, i64); 6] = [
        ("mcp-method", Some("tools/list"), 400, -32020),
        ("mcp-name", Some("sleep"), 400, -32020),
        ("mcp-name", None, 400, -32020),
        ("mcp-name", Some("=?base64?ZWNobw==?="), 200, 0), // base64 of "echo": accepted
        ("mcp-protocol-version", Some("2099-01-01"), 400, -32022),
        ("mcp-protocol-version", None, 400, -32020), // body names 2026-07-28, header absent
    ];
    for (i, (header, value, status, code)) in cases.into_iter().enumerate() {
        let (mut hs, body) = call(10 + i as u64);
        set(&mut hs, header, value);
        let r = c.post(&hs, &body).await;
        assert_eq!(r.status, status, "{header}={value:?}: {}", r.json());
        if code != 0 {
            assert_eq!(error_code(&r), code, "{header}={value:?}");
            assert_eq!(r.json()["id"], 10 + i as u64);
        }
    }
    // Missing _meta, or _meta without client capabilities: -32602 with 400.
    let (hs, mut body) = call(20);
    body["params"].as_object_mut().unwrap().remove("_meta");
    let r = c.post(&hs, &body).await;
    assert_eq!((r.status, error_code(&r)), (400, -32602));
    let (hs, mut body) = call(21);
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let r = c.post(&hs, &body).await;
    assert_eq!((r.status, error_code(&r)), (400, -32602));
    // Unknown method: HTTP 404 with -32601; ping is no 2026-07-28 method.
    for m in ["no/such", "ping", "initialize"] {
        let (hs, body) = modern(json!(22), m, json!({}));
        let r = c.post(&hs, &body).await;
        assert_eq!((r.status, error_code(&r)), (404, -32601), "{m}");
    }
    // Notifications are acknowledged.
    let mut hs = base_headers();
    hs.push(("mcp-protocol-version".into(), MODERN.into()));
    let n = c.post(&hs, &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})).await;
    assert_eq!(n.status, 202);
    let stats = c.stats().await;
    assert_identity(&stats);
    assert_eq!(stats["malformed_received"], 0);
}

/// The official header check calls the first listed tool with `{}` and an `Mcp-Name` padded
/// with spaces: HTTP trims the padding, and `echo` answers its default `message`.
#[tokio::test]
async fn the_first_tool_takes_empty_arguments_under_a_padded_name() {
    let (_t, mut c) = target(ServeConfig::default()).await;
    let (hs, body) = modern(json!(1), "tools/list", json!({}));
    let first = c.post(&hs, &body).await.json()["result"]["tools"][0].clone();
    assert_eq!(first["name"], "echo");
    let schema = &first["inputSchema"];
    assert_eq!(schema["properties"]["message"]["default"], "hello");
    assert!(
        !schema["required"]
            .as_array()
            .unwrap()
            .contains(&json!("message"))
    );

    let call = |id: u64| {
        modern(
            json!(id),
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
        )
    };
    let (mut hs, body) = call(2);
    hs.retain(|(n, _)| n != "mcp-name");
    hs.push(("mcp-name".into(), "  echo  ".into()));
    let r = c.post(&hs, &body).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["result"]["content"][0]["text"], "hello");
    // Spaces inside the base64 wrapping belong to the name: " echo " is not `echo`.
    let (mut hs, body) = call(3);
    hs.retain(|(n, _)| n != "mcp-name");
    hs.push(("mcp-name".into(), "=?base64?IGVjaG8g?=".into()));
    let r = c.post(&hs, &body).await;
    assert_eq!((r.status, error_code(&r)), (400, -32020));
}

#[tokio::test]
async fn batches_per_revision_in_completion_order() {
    let (_t, mut c) = target(ServeConfig::default()).await;
    let s = initialize(&mut c, "2025-03-26").await;
    let hs = legacy_headers("2025-03-26", s.as_deref());
    let slow = request(
        json!("slow"),
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 300}}),
    );
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = c.post(&hs, &json!([slow, echo(1), note, echo(2)])).await;
    assert_eq!(r.status, 200);
    let answers = r.json();
    let ids: Vec<Value> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(
        ids.last(),
        Some(&json!("slow")),
        "answers in completion order: {ids:?}"
    );
    // Notifications only: 202; an empty batch: one Invalid Request error.
    assert_eq!(c.post(&hs, &json!([note])).await.status, 202);
    let empty = c.post(&hs, &json!([])).await;
    assert_eq!((empty.status, error_code(&empty)), (400, -32600));
    assert_eq!(empty.json()["id"], Value::Null);
    // 2025-06-18 and 2025-11-25 forbid batches: 400 with one error.
    for v in ["2025-06-18", "2025-11-25"] {
        let mut c2 = Conn::open(_t.addr()).await;
        let s = initialize(&mut c2, v).await;
        let r = c2
            .post(&legacy_headers(v, s.as_deref()), &json!([echo(1), echo(2)]))
            .await;
        assert_eq!((r.status, error_code(&r)), (400, -32600), "{v}");
        assert_eq!(r.json()["id"], Value::Null);
    }
    // And so does 2026-07-28.
    let (mut hs, _) = modern(json!(1), "tools/list", json!({}));
    hs.retain(|(k, _)| k != "mcp-method");
    let (_, a) = modern(json!(1), "tools/list", json!({}));
    let (_, b) = modern(json!(2), "tools/list", json!({}));
    let r = c.post(&hs, &json!([a, b])).await;
    assert_eq!((r.status, error_code(&r)), (400, -32600));
    let stats = c.stats().await;
    assert_eq!(
        (stats["batches"].as_u64(), stats["batch_rejected"].as_u64()),
        (Some(2), Some(3))
    );
    assert_identity(&stats);
}

#[tokio::test]
async fn sse_answers_carry_progress_then_the_result() {
    let cfg = ServeConfig {
        answer: AnswerMode::Sse,
        ..ServeConfig::default()
    };
    let (_t, mut c) = target(cfg).await;
    let (hs, mut body) = modern(
        json!(1),
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 3, "ms": 5}}),
    );
    body["params"]["_meta"]["progressToken"] = json!("tok");
    let r = c.post(&hs, &body).await;
    assert!(r.is_sse());
    let events: Vec<Value> = r
        .payloads()
        .iter()
        .map(|p| serde_json::from_slice(p).unwrap())
        .collect();
    assert_eq!(events.len(), 4);
    for (i, e) in events[..3].iter().enumerate() {
        assert_eq!(e["method"], "notifications/progress");
        assert_eq!(e["params"]["progressToken"], "tok");
        assert_eq!(e["params"]["progress"], i as u64 + 1);
    }
    assert_eq!(events[3]["id"], 1);
    // Errors found before any method runs still come as JSON with their status.
    let (mut hs, body) = modern(json!(2), "tools/list", json!({}));
    hs.retain(|(k, _)| k != "mcp-method");
    let r = c.post(&hs, &body).await;
    assert_eq!((r.status, r.is_sse()), (400, false));
    let stats = c.stats().await;
    assert_eq!(stats["client_view"]["server_messages"], 3);
}

#[tokio::test]
async fn closing_an_sse_stream_cancels_the_request() {
    let cfg = ServeConfig {
        answer: AnswerMode::Sse,
        ..ServeConfig::default()
    };
    let t = start_http(cfg).await.unwrap();
    // Raw socket: send the request, read the response head, then hang up.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_, body) = modern(
        json!(1),
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 5000}}),
    );
    let body = body.to_string();
    let mut s = tokio::net::TcpStream::connect(t.addr()).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: sleep\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("text/event-stream"));
    drop(s);
    let mut c = Conn::open(t.addr()).await;
    let start = std::time::Instant::now();
    loop {
        let stats = c.stats().await;
        if stats["cancelled"] == 1 {
            assert_identity(&stats);
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(4),
            "not cancelled: {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn era_and_version_restrictions() {
    // Legacy only: discover is refused with -32022 naming the legacy versions.
    let (_t, mut c) = target(ServeConfig {
        era: ServedEras::Legacy,
        ..ServeConfig::default()
    })
    .await;
    let (hs, body) = modern(json!(1), "server/discover", json!({}));
    let r = c.post(&hs, &body).await;
    assert_eq!((r.status, error_code(&r)), (400, -32022));
    assert_eq!(
        r.json()["error"]["data"]["supported"],
        json!(["2025-11-25", "2025-06-18", "2025-03-26"])
    );
    // Modern only: initialize is refused the same way.
    let (_t, mut c) = target(ServeConfig {
        era: ServedEras::Modern,
        ..ServeConfig::default()
    })
    .await;
    let init = initialize_request(json!(1), "2025-11-25");
    let r = c.post(&base_headers(), &init).await;
    assert_eq!((r.status, error_code(&r)), (400, -32022));
    // One version: initialize asking for another gets that one.
    let (_t, mut c) = target(ServeConfig {
        versions: vec!["2025-06-18".into()],
        ..ServeConfig::default()
    })
    .await;
    let init = initialize_request(json!(1), "2025-11-25");
    let r = c.post(&base_headers(), &init).await.json();
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
}

#[tokio::test]
async fn safe_defaults_origin_size_media_and_malformed_input() {
    let (t, mut c) = target(ServeConfig {
        max_body_bytes: 1024,
        ..ServeConfig::default()
    })
    .await;
    assert!(t.addr().ip().is_loopback());
    let with = |k: &str, v: &str| {
        let mut hs = base_headers();
        hs.push((k.into(), v.into()));
        hs
    };
    assert_eq!(
        c.post(&with("origin", "http://evil.example"), &echo(1))
            .await
            .status,
        403
    );
    assert_eq!(c.post(&with("origin", "null"), &echo(1)).await.status, 403);
    assert_eq!(
        c.post(&with("origin", "http://localhost:5173"), &echo(1))
            .await
            .status,
        200
    );
    assert_eq!(
        c.post(&with("origin", "http://[::1]:80"), &echo(1))
            .await
            .status,
        200
    );
    let big = request(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "x".repeat(2000)}}),
    );
    assert_eq!(c.post(&base_headers(), &big).await.status, 413);
    let mut c = Conn::open(t.addr()).await; // 413 closes the connection
    let mut hs = h(&[("content-type", "text/plain")]);
    assert_eq!(
        c.send("POST", "/mcp", &hs, b"{}".to_vec()).await.status,
        415
    );
    hs = h(&[
        ("content-type", "application/json"),
        ("accept", "text/html"),
    ]);
    assert_eq!(
        c.send("POST", "/mcp", &hs, b"{}".to_vec()).await.status,
        406
    );
    // Not JSON: -32700 with id null; a null id or a wrong jsonrpc: -32600 with id null.
    let r = c
        .send("POST", "/mcp", &base_headers(), b"{nope".to_vec())
        .await;
    assert_eq!(
        (r.status, error_code(&r), r.json()["id"].clone()),
        (400, -32700, Value::Null)
    );
    for bad in [
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
    ] {
        let r = c.post(&base_headers(), &bad).await;
        assert_eq!(
            (r.status, error_code(&r), r.json()["id"].clone()),
            (400, -32600, Value::Null)
        );
    }
    let stats = c.stats().await;
    assert_eq!(stats["malformed_received"], 3);
    assert_eq!(stats["client_view"]["null_id"], 3);
    assert_eq!(stats["http_status"]["403"], 2);
}

#[tokio::test]
async fn connections_beyond_the_bound_are_closed() {
    use tokio::io::AsyncReadExt;
    let (t, mut first) = target(ServeConfig {
        max_connections: 2,
        ..ServeConfig::default()
    })
    .await;
    let mut second = Conn::open(t.addr()).await;
    assert_eq!(first.post(&base_headers(), &echo(1)).await.status, 200);
    assert_eq!(second.post(&base_headers(), &echo(2)).await.status, 200);
    let mut third = tokio::net::TcpStream::connect(t.addr()).await.unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(DEADLINE, third.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "the third connection is closed without a word");
    let stats = first.stats().await;
    assert_eq!(stats["connections_refused"], 1);
    assert_eq!(stats["connections_max"], 2);
}

#[tokio::test]
async fn the_binary_prints_its_url_first_and_serves() {
    let served = serve(&["--capacity", "2", "--fault", "drop=1000"]);
    let url = &served.url;
    let rest = url.strip_prefix("http://127.0.0.1:").expect("loopback URL");
    let port: u16 = rest
        .strip_suffix("/mcp")
        .expect("/mcp endpoint")
        .parse()
        .unwrap();
    let mut c = Conn::open(([127, 0, 0, 1], port).into()).await;
    let r = c.post(&base_headers(), &echo(1)).await;
    assert_eq!(r.json()["result"]["content"][0]["text"], "m1");
    let stats = c.stats().await;
    assert_eq!(stats["requests_seen"], 1);
    // Bad flags are a usage error (exit 2).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .args(["serve", "--fault", "explode=3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpload"))
        .args(["serve", "--queue", "3"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn stdio_batches_eras_cancel_and_hostile_lines() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (client, server) = tokio::io::duplex(1 << 16);
    let (server_r, server_w) = tokio::io::split(server);
    let cfg = ServeConfig {
        max_line_bytes: 4096,
        ..ServeConfig::default()
    };
    let served = tokio::spawn(mcpload::server::serve_stdio(cfg, server_r, server_w));
    let (client_r, mut w) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(client_r).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let line = |v: &Value| format!("{v}\n").into_bytes();

    // Before any initialize the revision is 2025-03-26: batches are served, as one line.
    w.write_all(&line(&json!([echo(1), echo(2)])))
        .await
        .unwrap();
    let batch = next().await;
    assert_eq!(batch.as_array().map(Vec::len), Some(2), "{batch}");
    let init = initialize_request(json!(3), "2025-11-25");
    w.write_all(&line(&init)).await.unwrap();
    assert_eq!(next().await["result"]["protocolVersion"], "2025-11-25");
    // Under 2025-11-25 a batch is refused with one error line.
    w.write_all(&line(&json!([echo(4), echo(5)])))
        .await
        .unwrap();
    let refused = next().await;
    assert_eq!(
        (refused["id"].clone(), refused["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    // A 2026-07-28 request on the same stdio: its _meta decides (no headers to check).
    let (_, discover) = modern(json!(6), "server/discover", json!({}));
    w.write_all(&line(&discover)).await.unwrap();
    assert_eq!(next().await["result"]["resultType"], "complete");
    let (_, mut bad) = modern(json!(7), "tools/list", json!({}));
    bad["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    w.write_all(&line(&bad)).await.unwrap();
    assert_eq!(next().await["error"]["code"], -32602);
    // A cancelled request is never answered; the next one is.
    let slow = request(
        json!("slow"),
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 5000}}),
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}});
    w.write_all(&[line(&slow), line(&cancel), line(&echo(8))].concat())
        .await
        .unwrap();
    assert_eq!(next().await["id"], 8);
    // Hostile lines: not JSON, too long. Each gets an error with id null.
    w.write_all(b"}{ not json\n").await.unwrap();
    assert_eq!(next().await["error"]["code"], -32700);
    w.write_all(&[vec![b'x'; 10_000], b"\n".to_vec()].concat())
        .await
        .unwrap();
    assert_eq!(next().await["error"]["code"], -32600);
    w.shutdown().await.unwrap();
    let stats = tokio::time::timeout(DEADLINE, served)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        lines.next_line().await.unwrap().is_none(),
        "nothing after the last answer"
    );
    assert_eq!(stats.cancelled, 1);
    assert_eq!((stats.batches, stats.batch_rejected), (1, 1));
    assert_eq!(stats.malformed_received, 2);
    assert_eq!(stats.requests_seen, stats.answers_sent + stats.cancelled);
}
