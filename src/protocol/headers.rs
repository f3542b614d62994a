//! MCP's HTTP header names (lower case, as HTTP/2 and `http::HeaderName` spell them), and for
//! the 2026-07-28 headers that mirror the body (`Mcp-Method`, `Mcp-Name`): which field
//! `Mcp-Name` mirrors and how their values are encoded.

use base64::Engine;
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
    fn mcp_name_mirrors_the_name_or_the_uri() {
        let key = |m| NameParam::of(m).map(NameParam::key);
        assert_eq!(key("tools/call"), Some("name"));
        assert_eq!(key("prompts/get"), Some("name"));
        assert_eq!(key("resources/read"), Some("uri"));
        assert_eq!(key("tasks/get"), Some("taskId"));
        assert_eq!(key("tools/list"), None);
    }
}
