//! MCP's HTTP header names (lower case, as HTTP/2 and `http::HeaderName` spell them), and for
//! the 2026-07-28 headers that mirror the body (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`):
//! which field each mirrors, the `x-mcp-header` annotations of a tool's input schema, and
//! how the values are encoded.

use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;

/// The legacy era's session id, issued by `initialize` and echoed on every request.
pub const SESSION_ID: &str = "mcp-session-id";
/// The agreed revision, on every request after `initialize` (2025-06-18 on) or every request
/// (2026-07-28).
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// 2026-07-28: the body's `method`.
pub const METHOD: &str = "mcp-method";
/// 2026-07-28: the tool, resource or prompt a request names.
pub const NAME: &str = "mcp-name";

/// 2026-07-28 (SEP-2243): `Mcp-Param-{Name}` mirrors a tool argument whose schema says
/// `"x-mcp-header": "Name"`.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// The schema keyword naming an argument's header.
pub const PARAM_ANNOTATION: &str = "x-mcp-header";

/// One `x-mcp-header` annotation of a tool's input schema: the header `Mcp-Param-{name}`
/// carries the argument at `path` (a chain of `properties` keys from the schema root).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParamHeader {
    pub name: String,
    pub path: Vec<String>,
}

impl ParamHeader {
    /// The full header name, lower case: `mcp-param-region`.
    pub fn header_name(&self) -> String {
        format!("{PARAM_PREFIX}{}", self.name.to_ascii_lowercase())
    }

    /// The argument this header mirrors, in `arguments`; `None` when it is absent or null
    /// (the header is then omitted).
    pub fn argument<'a>(&self, arguments: &'a Value) -> Option<&'a Value> {
        let mut v = arguments;
        for key in &self.path {
            v = v.get(key)?;
        }
        (!v.is_null()).then_some(v)
    }
}

/// The largest integer JavaScript represents exactly (2^53 - 1): `x-mcp-header` integers
/// must stay within ±this.
const JS_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// An argument as its `Mcp-Param-*` header text, before encoding: a string as is, an integer
/// in decimal, a boolean as `true` / `false`. `None` for any other value (a number with a
/// fraction, an integer outside the JavaScript-safe range, an array, an object).
pub fn param_text(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Number(n) => n
            .as_i64()
            .filter(|i| i.abs() <= JS_SAFE_INTEGER)
            .map(|i| Cow::Owned(i.to_string())),
        _ => None,
    }
}

/// The `x-mcp-header` annotations of an input schema, as the 2026-07-28 transport page says
/// ("Custom Headers from Tool Parameters"): each not empty, an RFC 9110 token (`1*tchar`),
/// unique regardless of case, on a property of type `string`, `integer` or `boolean` reached
/// from the root through `properties` keys only. The first violation is the error: the tool
/// must not be called.
pub fn param_headers(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    annotations(schema, Some(&mut Vec::new()), &mut found)?;
    for (i, h) in found.iter().enumerate() {
        if let Some(twin) = found[..i]
            .iter()
            .find(|o| o.name.eq_ignore_ascii_case(&h.name))
        {
            return Err(format!(
                "x-mcp-header {:?} and {:?} are the same header regardless of case",
                twin.name, h.name
            ));
        }
    }
    Ok(found)
}

/// An RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Walks one schema node. `path` is `Some` while the node is reached through `properties`
/// keys only (the root: empty).
fn annotations(
    node: &Value,
    mut path: Option<&mut Vec<String>>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Value::Object(map) = node else {
        if let Value::Array(items) = node {
            for item in items {
                annotations(item, None, found)?;
            }
        }
        return Ok(());
    };
    if let Some(name) = map.get(PARAM_ANNOTATION) {
        let Some(property) = path.as_deref().filter(|p| !p.is_empty()) else {
            return Err("x-mcp-header outside a property reached through `properties` only".into());
        };
        let at = property.join(".");
        let name = name
            .as_str()
            .ok_or_else(|| format!("x-mcp-header of {at} is not a string"))?;
        if name.is_empty() {
            return Err(format!("x-mcp-header of {at} is empty"));
        }
        if !name.bytes().all(is_tchar) {
            return Err(format!(
                "x-mcp-header {name:?} of {at} has characters a header name cannot hold"
            ));
        }
        match map.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            other => {
                return Err(format!(
                    "x-mcp-header {name:?} is on {at} of type {}: only string, integer and \
                     boolean are allowed",
                    other.unwrap_or("(none)")
                ));
            }
        }
        found.push(ParamHeader {
            name: name.to_owned(),
            path: property.clone(),
        });
    }
    for (key, value) in map {
        match key.as_str() {
            // Values, not schemas: an instance may hold any key.
            "default" | "const" | "enum" | "examples" => {}
            "properties" => {
                let Value::Object(props) = value else {
                    continue;
                };
                for (prop, sub) in props {
                    match path.as_deref_mut() {
                        Some(p) => {
                            p.push(prop.clone());
                            annotations(sub, Some(p), found)?;
                            p.pop();
                        }
                        None => annotations(sub, None, found)?,
                    }
                }
            }
            _ => annotations(value, None, found)?,
        }
    }
    Ok(())
}

/// The field of `params` whose value `Mcp-Name` carries (2026-07-28).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameParam {
    /// `params.name`: `tools/call`, `prompts/get`.
    Name,
    /// `params.uri`: `resources/read`.
    Uri,
    /// `params.taskId`: `tasks/get`, `tasks/update`, `tasks/cancel` (the 2026-07-28 tasks
    /// extension, SEP-2663).
    TaskId,
}

impl NameParam {
    /// What `Mcp-Name` mirrors for `method`; `None`: the method sends no `Mcp-Name`.
    pub fn of(method: &str) -> Option<NameParam> {
        match method {
            "tools/call" | "prompts/get" => Some(NameParam::Name),
            "resources/read" => Some(NameParam::Uri),
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some(NameParam::TaskId),
            _ => None,
        }
    }

    /// The field's key in `params`.
    pub fn key(self) -> &'static str {
        match self {
            NameParam::Name => "name",
            NameParam::Uri => "uri",
            NameParam::TaskId => "taskId",
        }
    }
}

/// A value for `Mcp-Method` / `Mcp-Name`: as is when it is plain visible ASCII with no edge
/// spaces, else wrapped as `=?base64?…?=` (2026-07-28).
pub fn encode_value(s: &str) -> Cow<'_, str> {
    let plain = !s.is_empty()
        && s.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !s.starts_with(' ')
        && !s.ends_with(' ')
        && !s.starts_with("=?");
    if plain {
        Cow::Borrowed(s)
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        Cow::Owned(format!("=?base64?{b64}?="))
    }
}

/// Reads a value written by [`encode_value`]: verbatim, or `=?base64?…?=` unwrapped (invalid
/// wrapping: `None`).
pub fn decode_value(v: &str) -> Option<Cow<'_, str>> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|s| s.strip_suffix("?="))
    {
        None => Some(Cow::Borrowed(v)),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Cow::Owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_wrap_what_a_header_cannot_carry_and_read_back() {
        assert_eq!(encode_value("echo"), "echo");
        assert_eq!(encode_value("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode_value(" x"), "=?base64?IHg=?=");
        assert_eq!(encode_value("a\nb"), "=?base64?YQpi?=");
        for s in ["echo", "héllo", " x", "a\nb", "=?base64?x?="] {
            assert_eq!(decode_value(&encode_value(s)).as_deref(), Some(s));
        }
        assert_eq!(decode_value("=?base64?!!?="), None);
    }

    #[test]
    fn x_mcp_header_annotations_are_read_or_refused_as_the_transport_page_says() {
        let ok = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {
                "n": {"type": "integer", "x-mcp-header": "Count"},
            }},
            "plain": {"type": "string", "default": {"x-mcp-header": "NotASchema"}},
        }});
        let mut found = param_headers(&ok).unwrap();
        found.sort_by(|a, b| b.name.cmp(&a.name));
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].header_name(), "mcp-param-region");
        assert_eq!(found[1].path, ["opts", "n"]);
        let args = serde_json::json!({"region": "eu", "opts": {"n": null}});
        assert_eq!(found[0].argument(&args), Some(&Value::from("eu")));
        assert_eq!(found[1].argument(&args), None);
        let prop = |p: Value| serde_json::json!({"type": "object", "properties": {"a": p}});
        let bad = [
            (
                prop(serde_json::json!({"type": "string", "x-mcp-header": ""})),
                "empty",
            ),
            (
                prop(serde_json::json!({"type": "number", "x-mcp-header": "A"})),
                "type number",
            ),
            (
                prop(serde_json::json!({"type": "object", "x-mcp-header": "A"})),
                "type object",
            ),
            (
                prop(serde_json::json!({"type": "string", "x-mcp-header": "A B"})),
                "characters",
            ),
            (
                serde_json::json!({"type": "object", "properties": {
                    "a": {"type": "string", "x-mcp-header": "Dup"},
                    "b": {"type": "string", "x-mcp-header": "dUP"},
                }}),
                "regardless of case",
            ),
            (
                serde_json::json!({"type": "object", "properties": {"a": {"type": "array",
                    "items": {"type": "string", "x-mcp-header": "A"}}}}),
                "outside",
            ),
            (serde_json::json!({"x-mcp-header": "Root"}), "outside"),
        ];
        for (schema, why) in bad {
            let e = param_headers(&schema).unwrap_err();
            assert!(e.contains(why), "{schema}: {e}");
        }
    }

    #[test]
    fn arguments_become_header_text_by_type() {
        assert_eq!(
            param_text(&Value::from("us-west1")).as_deref(),
            Some("us-west1")
        );
        assert_eq!(param_text(&Value::from(-7)).as_deref(), Some("-7"));
        assert_eq!(param_text(&Value::from(true)).as_deref(), Some("true"));
        assert_eq!(param_text(&Value::from(1i64 << 53)), None);
        assert_eq!(param_text(&Value::from(1.5)), None);
        // The transport page's examples.
        assert_eq!(
            encode_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    #[test]
    fn mcp_name_mirrors_the_name_or_the_uri() {
        let key = |m| NameParam::of(m).map(NameParam::key);
        assert_eq!(key("tools/call"), Some("name"));
        assert_eq!(key("prompts/get"), Some("name"));
        assert_eq!(key("resources/read"), Some("uri"));
        assert_eq!(key("tasks/get"), Some("taskId"));
        assert_eq!(key("tools/list"), None);
    }
}
