//! The `x-mcp-header` tools of 2026-07-28 (SEP-2243; knob `header_tools`): `region_echo`,
//! whose `region` and `count` arguments are mirrored into `Mcp-Param-Region` and
//! `Mcp-Param-Count`, and one tool per way an annotation can be invalid, which a client must
//! never call; and the check of the `Mcp-Param-*` headers of a call against its arguments.

use crate::protocol::headers::{self, ParamHeader};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::LazyLock;

/// The tool whose annotations are valid (it answers as `echo`).
pub(crate) const REGION_ECHO: &str = "region_echo";

/// `region_echo`'s input schema.
fn region_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region", "description": "Mirrored into Mcp-Param-Region"},
            "count": {"type": "integer", "x-mcp-header": "Count", "description": "Mirrored into Mcp-Param-Count"},
            "message": {"type": "string", "description": "Text to send back", "default": "hello"},
        },
        "required": ["region"],
    })
}

/// The headers `region_echo` expects.
static REGION_HEADERS: LazyLock<Vec<ParamHeader>> =
    LazyLock::new(|| headers::param_headers(&region_schema()).unwrap_or_default());

/// The tools listed under 2026-07-28 with `header_tools` on: `region_echo` and the invalid
/// ones (empty, on a `number`, on an `object`, a duplicate regardless of case, a space in
/// the name).
pub(crate) fn tools() -> Vec<Value> {
    let bad = |name: &str, what: &str, props: Value| {
        json!({
            "name": name,
            "description": format!("An invalid x-mcp-header annotation ({what}): never to be called."),
            "inputSchema": {"type": "object", "properties": props},
        })
    };
    vec![
        json!({
            "name": REGION_ECHO,
            "description": "Returns `message` as text and the arguments it got as structuredContent; `region` and `count` travel in Mcp-Param-* headers too.",
            "inputSchema": region_schema(),
        }),
        bad(
            "bad_header_empty",
            "empty",
            json!({"a": {"type": "string", "x-mcp-header": ""}}),
        ),
        bad(
            "bad_header_number",
            "type number",
            json!({"a": {"type": "number", "x-mcp-header": "A"}}),
        ),
        bad(
            "bad_header_object",
            "type object",
            json!({"a": {"type": "object", "x-mcp-header": "A"}}),
        ),
        bad(
            "bad_header_duplicate",
            "Dup and dup",
            json!({
                "a": {"type": "string", "x-mcp-header": "Dup"},
                "b": {"type": "string", "x-mcp-header": "dup"},
            }),
        ),
        bad(
            "bad_header_chars",
            "a space",
            json!({"a": {"type": "string", "x-mcp-header": "Re gion"}}),
        ),
    ]
}

/// `region_echo`'s `structuredContent`: what it read of its mirrored arguments (`region`,
/// `count`, null when absent or null) and the `arguments` object as it arrived, so that a
/// client sees what reached the body (a null stays null, distinct from "null" or absent).
pub(crate) fn received(arguments: &Value) -> Value {
    let read = |name: &str| arguments.get(name).cloned().unwrap_or(Value::Null);
    json!({"region": read("region"), "count": read("count"), "arguments": arguments})
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` of `tool` against its `arguments`, as
/// the transport page says: a mirrored argument present in the body must come with its
/// header, equal once decoded (an undecodable value is a mismatch); an absent or null one
/// (or one not mirrored, like a float) must come without (SEP-2243: the client omits it).
/// `None`: the tool mirrors nothing.
/// `Err` names the first mismatch.
pub(crate) fn check(
    tool: &str,
    arguments: Option<&RawValue>,
    received: &[(&str, &str)],
) -> Option<Result<(), String>> {
    if tool != REGION_ECHO {
        return None;
    }
    let args: Value = arguments
        .and_then(|a| serde_json::from_str(a.get()).ok())
        .unwrap_or(Value::Null);
    for h in REGION_HEADERS.iter() {
        let name = h.header_name();
        let sent = received.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name));
        let agrees = match h.argument(&args).and_then(headers::param_text) {
            Some(text) => {
                sent.and_then(|(_, v)| headers::decode_value(v)).as_deref() == Some(&text)
            }
            None => sent.is_none(),
        };
        if !agrees {
            return Some(Err(format!("Mcp-Param-{}", h.name)));
        }
    }
    Some(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_valid_tool_is_valid_and_every_invalid_one_is_not() {
        for t in tools() {
            let valid = headers::param_headers(&t["inputSchema"]).is_ok();
            assert_eq!(valid, t["name"] == REGION_ECHO, "{t}");
        }
    }

    #[test]
    fn headers_must_match_the_arguments_they_mirror() {
        let args = RawValue::from_string(r#"{"region":"Zürich","count":3}"#.into()).unwrap();
        let good = [
            ("mcp-param-region", "=?base64?WsO8cmljaA==?="),
            ("Mcp-Param-Count", "3"),
        ];
        assert_eq!(check(REGION_ECHO, Some(&args), &good), Some(Ok(())));
        let wrong = [("mcp-param-region", "Zurich"), ("mcp-param-count", "3")];
        assert_eq!(
            check(REGION_ECHO, Some(&args), &wrong),
            Some(Err("Mcp-Param-Region".into()))
        );
        let missing = [("mcp-param-region", "=?base64?WsO8cmljaA==?=")];
        assert!(matches!(
            check(REGION_ECHO, Some(&args), &missing),
            Some(Err(_))
        ));
        // No count in the body: no Mcp-Param-Count expected.
        let only_region = RawValue::from_string(r#"{"region":"eu"}"#.into()).unwrap();
        assert_eq!(
            check(
                REGION_ECHO,
                Some(&only_region),
                &[("mcp-param-region", "eu")]
            ),
            Some(Ok(()))
        );
        // A null count: no Mcp-Param-Count may be sent.
        let null_count = RawValue::from_string(r#"{"region":"eu","count":null}"#.into()).unwrap();
        let region = [("mcp-param-region", "eu")];
        assert_eq!(check(REGION_ECHO, Some(&null_count), &region), Some(Ok(())));
        let stray = [("mcp-param-region", "eu"), ("mcp-param-count", "null")];
        assert_eq!(
            check(REGION_ECHO, Some(&null_count), &stray),
            Some(Err("Mcp-Param-Count".into()))
        );
        assert_eq!(
            check(REGION_ECHO, Some(&only_region), &stray),
            Some(Err("Mcp-Param-Count".into()))
        );
        assert_eq!(check("echo", Some(&args), &[]), None);
    }
}
