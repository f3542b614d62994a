//! An independent HTTP/1.1 client for the built-in target (hyper's client connection, no
//! mcpload transport code), MCP request builders for both eras, an SSE reader, and a
//! classifier that counts a reply the way docs/metrics.md says a client counts it.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::HeaderMap;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

/// Every exchange in these tests ends well within this.
pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

pub(crate) struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn is_sse(&self) -> bool {
        self.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    }

    /// The JSON-RPC payloads of the reply: the data of each SSE event, or the body when not
    /// empty. A stream that ends inside an event yields that event's data too: mcpload counts
    /// those bytes as unreadable rather than dropping them silently.
    pub(crate) fn payloads(&self) -> Vec<Vec<u8>> {
        if self.is_sse() {
            sse_data(&self.body)
        } else if self.body.is_empty() {
            Vec::new()
        } else {
            vec![self.body.clone()]
        }
    }
}

/// The `data` of every SSE event in `stream`, the unterminated last one included.
pub(crate) fn sse_data(stream: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(stream).replace("\r\n", "\n");
    text.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("data:")
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                })
                .collect();
            (!data.is_empty() && data.iter().any(|d| !d.is_empty()))
                .then(|| data.join("\n").into_bytes())
        })
        .collect()
}

/// One keep-alive HTTP/1.1 connection.
pub(crate) struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    pub(crate) async fn open(addr: SocketAddr) -> Conn {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        Conn {
            sender,
            host: addr.to_string(),
        }
    }

    pub(crate) async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Reply {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.body(Full::new(Bytes::from(body))).expect("request");
        let exchange = async {
            self.sender.ready().await.expect("connection usable");
            let resp = self.sender.send_request(req).await.expect("response");
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = resp
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes()
                .to_vec();
            Reply {
                status,
                headers,
                body,
            }
        };
        tokio::time::timeout(DEADLINE, exchange)
            .await
            .expect("exchange within the deadline")
    }

    pub(crate) async fn post(&mut self, headers: &[(String, String)], body: &Value) -> Reply {
        self.send("POST", "/mcp", headers, serde_json::to_vec(body).unwrap())
            .await
    }

    pub(crate) async fn stats(&mut self) -> Value {
        self.send("GET", "/stats", &[], Vec::new()).await.json()
    }
}

pub(crate) fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Headers every client POST carries.
pub(crate) fn base_headers() -> Vec<(String, String)> {
    h(&[
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ])
}

pub(crate) const MODERN: &str = "2026-07-28";

pub(crate) fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "serve-tests", "version": "1"},
    })
}

/// A 2026-07-28 request with `_meta` in the body and matching headers.
pub(crate) fn modern(id: Value, method: &str, mut params: Value) -> (Vec<(String, String)>, Value) {
    params["_meta"] = meta();
    let mut headers = base_headers();
    headers.extend(h(&[
        ("mcp-protocol-version", MODERN),
        ("mcp-method", method),
    ]));
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(n) = name {
        headers.push(("mcp-name".into(), n.into()));
    }
    (
        headers,
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
}

pub(crate) fn legacy_headers(version: &str, session: Option<&str>) -> Vec<(String, String)> {
    let mut headers = base_headers();
    headers.push(("mcp-protocol-version".into(), version.into()));
    if let Some(s) = session {
        headers.push(("mcp-session-id".into(), s.into()));
    }
    headers
}

pub(crate) fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub(crate) fn echo(id: u64) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({"name": "echo", "arguments": {"message": format!("m{id}")}}),
    )
}

/// An `initialize` request asking for `version`.
pub(crate) fn initialize_request(id: Value, version: &str) -> Value {
    request(
        id,
        "initialize",
        json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
}

/// `initialize` + `notifications/initialized`; returns the session id, if one was given.
pub(crate) async fn initialize(conn: &mut Conn, version: &str) -> Option<String> {
    let init = initialize_request(json!(0), version);
    let r = conn.post(&base_headers(), &init).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["result"]["protocolVersion"], version);
    let session = r.header("mcp-session-id").map(str::to_owned);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let n = conn
        .post(&legacy_headers(version, session.as_deref()), &note)
        .await;
    assert_eq!(n.status, 202);
    session
}

/// What a client counts (docs/metrics.md names), kept by the tests themselves.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Tally {
    pub ok: u64,
    pub errors: u64,
    pub both_result_error: u64,
    pub invalid_jsonrpc: u64,
    pub duplicate_id: u64,
    pub unknown_id: u64,
    pub null_id: u64,
    pub server_messages: u64,
    pub parse_errors: u64,
    pub missing: u64,
    pub http_other: u64,
    pub response_count_mismatch: u64,
}

impl Tally {
    /// Counts one exchange: `sent` are the ids of the requests it carried (`batch` when it
    /// was a JSON array).
    pub(crate) fn exchange(&mut self, sent: &[Value], reply: &Reply, batch: bool) {
        self.payloads(sent, reply.payloads(), reply.status >= 400, batch);
    }

    /// Counts the payloads (JSON texts) that answered requests `sent`; `refused` when the
    /// exchange ended with an HTTP status >= 400.
    pub(crate) fn payloads(
        &mut self,
        sent: &[Value],
        payloads: Vec<Vec<u8>>,
        refused: bool,
        batch: bool,
    ) {
        let mut pending: HashSet<String> = sent.iter().map(Value::to_string).collect();
        let mut answered: HashSet<String> = HashSet::new();
        let mut with_id = 0;
        for payload in payloads {
            let Ok(v) = serde_json::from_slice::<Value>(&payload) else {
                self.parse_errors += 1;
                continue;
            };
            let members = match v {
                Value::Array(a) => a,
                other => vec![other],
            };
            for m in members {
                with_id += self.message(&m, &mut pending, &mut answered);
            }
        }
        let unanswered = pending.len() as u64;
        if refused {
            self.http_other += unanswered;
        } else {
            self.missing += unanswered;
        }
        if batch && with_id != sent.len() as u64 {
            self.response_count_mismatch += 1;
        }
    }

    /// Classifies one message; returns 1 when it is a response carrying a non-null id.
    fn message(
        &mut self,
        m: &Value,
        pending: &mut HashSet<String>,
        answered: &mut HashSet<String>,
    ) -> u64 {
        let Some(obj) = m.as_object() else {
            self.parse_errors += 1;
            return 0;
        };
        if obj.contains_key("method") {
            self.server_messages += 1;
            return 0;
        }
        let id = match obj.get("id") {
            None | Some(Value::Null) => {
                self.null_id += 1;
                return 0;
            }
            Some(id) => id.to_string(),
        };
        if !pending.remove(&id) {
            if answered.contains(&id) {
                self.duplicate_id += 1;
            } else {
                self.unknown_id += 1;
            }
            return 1;
        }
        answered.insert(id);
        let (result, error) = (obj.contains_key("result"), obj.contains_key("error"));
        if obj.get("jsonrpc") != Some(&json!("2.0")) || (!result && !error) {
            self.invalid_jsonrpc += 1;
        } else if result && error {
            self.both_result_error += 1;
        } else if error {
            self.errors += 1;
        } else {
            self.ok += 1;
        }
        1
    }

    /// The server's `client_view` object as a tally, to compare with ours.
    pub(crate) fn from_stats(stats: &Value) -> Tally {
        let v = &stats["client_view"];
        let g = |k: &str| {
            v[k].as_u64()
                .unwrap_or_else(|| panic!("client_view.{k} missing in {stats}"))
        };
        Tally {
            ok: g("ok"),
            errors: g("errors"),
            both_result_error: g("both_result_error"),
            invalid_jsonrpc: g("invalid_jsonrpc"),
            duplicate_id: g("duplicate_id"),
            unknown_id: g("unknown_id"),
            null_id: g("null_id"),
            server_messages: g("server_messages"),
            parse_errors: g("parse_errors"),
            missing: g("missing"),
            http_other: g("http_other"),
            response_count_mismatch: g("response_count_mismatch"),
        }
    }
}

/// The identity every quiet target must satisfy: each request seen was answered, lost to a
/// fault, or cancelled.
pub(crate) fn assert_identity(stats: &Value) {
    let f = &stats["faults"];
    let lost = ["drop", "null_id", "unknown_id", "garbage", "truncate"]
        .iter()
        .map(|k| f[k].as_u64().unwrap())
        .sum::<u64>();
    let u = |k: &str| stats[k].as_u64().unwrap();
    assert_eq!(u("in_flight"), 0, "{stats}");
    assert_eq!(
        u("requests_seen"),
        u("answers_sent") + lost + u("cancelled"),
        "requests_seen = answers_sent + lost + cancelled: {stats}"
    );
}

/// One 2026-07-28 `tools/call` of `tool` with id `id` on `conn`, answered 200; its JSON-RPC
/// answer.
pub(crate) async fn tool_call(conn: &mut Conn, id: u64, tool: &str, args: Value) -> Value {
    let (headers, body) = modern(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": args}),
    );
    let reply = conn.post(&headers, &body).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}
