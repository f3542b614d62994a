//! Request building per era: the `_meta` every 2026-07-28 request carries, the `Mcp-Method` /
//! `Mcp-Name` headers, and [`Operation`], a request serialised once and stamped with a fresh
//! id per send.

use super::{McpError, Revision};
use crate::jsonrpc::{Id, RequestTemplate};
use crate::protocol::headers::{self, NameParam};
use crate::transport::{McpHeaders, Outgoing};
use bytes::Bytes;
use http::HeaderValue;
use serde_json::{Map, Value, json};

/// The name and version mcpload gives as `clientInfo`.
pub fn client_info() -> Value {
    json!({ "name": "mcpload", "version": env!("CARGO_PKG_VERSION") })
}

/// The `_meta` members a 2026-07-28 request must carry.
pub fn modern_meta() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        Value::from(Revision::V2026_07_28.as_str()),
    );
    m.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        json!({}),
    );
    m.insert("io.modelcontextprotocol/clientInfo".into(), client_info());
    m
}

/// One kind of request, ready to send many times: method, params (with the era's `_meta`)
/// and headers are fixed; only the id changes.
#[derive(Clone, Debug)]
pub struct Operation {
    template: RequestTemplate,
    headers: McpHeaders,
}

impl Operation {
    /// Builds the operation for `revision`. `params` must be an object (or absent); under
    /// 2026-07-28 its `_meta` gets the required members (members already there are kept).
    pub fn new(revision: Revision, method: &str, params: Option<&Value>) -> Result<Self, McpError> {
        let mut params = match params {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => {
                return Err(McpError::Protocol {
                    step: "building a request",
                    detail: format!("params of {method} must be a JSON object"),
                });
            }
        };
        let mut headers = McpHeaders::default();
        if revision.is_modern() {
            let p = params.get_or_insert_with(Map::new);
            let meta = p
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(meta) = meta else {
                return Err(McpError::Protocol {
                    step: "building a request",
                    detail: "params._meta must be a JSON object".into(),
                });
            };
            for (k, v) in modern_meta() {
                meta.entry(k).or_insert(v);
            }
            headers.method = Some(header_value(method));
            headers.name = NameParam::of(method)
                .and_then(|f| p.get(f.key()))
                .and_then(Value::as_str)
                .map(header_value);
        }
        let raw = params
            .map(|p| serde_json::value::to_raw_value(&p))
            .transpose()
            .map_err(|e| McpError::Protocol {
                step: "building a request",
                detail: e.to_string(),
            })?;
        Ok(Operation {
            template: RequestTemplate::new(method, raw.as_deref()),
            headers,
        })
    }

    pub fn method(&self) -> &str {
        self.template.method()
    }

    pub fn headers(&self) -> &McpHeaders {
        &self.headers
    }

    /// The request with `id`, ready for `Transport::send`.
    pub fn request(&self, id: Id) -> Outgoing {
        let mut body = Vec::with_capacity(128);
        self.template.stamp(&mut body, &id);
        Outgoing::single(Bytes::from(body), Some(id), self.headers.clone())
    }

    /// Appends the request with `id` to `out` (a batch member, a probe's hand-made body).
    pub fn stamp(&self, out: &mut Vec<u8>, id: &Id) {
        self.template.stamp(out, id);
    }
}

/// A header value for `Mcp-Method` / `Mcp-Name` ([`headers::encode_value`]).
pub fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(&headers::encode_value(s)).expect("encoded values are visible ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(op: &Operation, id: i64) -> Value {
        let out = op.request(Id::Num(id));
        assert_eq!(out.ids, vec![Id::Num(id)]);
        serde_json::from_slice(&out.body).unwrap()
    }

    #[test]
    fn modern_requests_carry_meta_and_headers() {
        let params = json!({"name": "echo", "arguments": {"m": 1}, "_meta": {"progressToken": 5}});
        let op = Operation::new(Revision::V2026_07_28, "tools/call", Some(&params)).unwrap();
        let v = body(&op, 7);
        assert_eq!(v["id"], 7);
        let meta = &v["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "mcpload"
        );
        assert_eq!(meta["progressToken"], 5);
        assert_eq!(v["params"]["arguments"], json!({"m": 1}));
        assert_eq!(op.headers().method.as_ref().unwrap(), "tools/call");
        assert_eq!(op.headers().name.as_ref().unwrap(), "echo");
        let op = Operation::new(Revision::V2026_07_28, "tools/list", None).unwrap();
        assert!(body(&op, 1)["params"]["_meta"].is_object());
        assert!(op.headers().name.is_none());
    }

    #[test]
    fn legacy_requests_are_left_alone() {
        let params = json!({"name": "echo"});
        let op = Operation::new(Revision::V2025_06_18, "tools/call", Some(&params)).unwrap();
        assert_eq!(body(&op, 1)["params"], params);
        assert!(op.headers().method.is_none() && op.headers().name.is_none());
        let op = Operation::new(Revision::V2025_11_25, "ping", None).unwrap();
        assert!(body(&op, 1).get("params").is_none());
        assert!(Operation::new(Revision::V2025_11_25, "x", Some(&json!([1]))).is_err());
    }
}
