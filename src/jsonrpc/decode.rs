//! Decoding: bytes → one message or a batch of raw members → a classified [`Message`].
//! A `result` is kept raw (validated, never built into a tree); malformed input of any kind
//! is a [`DecodeError`], never a panic.

use super::{Id, MAX_ID_LEN};
use memchr::memmem::Finder;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

/// Why bytes could not be read as JSON-RPC.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON at all (or not UTF-8, or nested too deeply).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but no JSON-RPC message: a scalar, an empty array, an object with no
    /// `method`, `id`, `result` or `error`.
    #[error("not a JSON-RPC message: {0}")]
    NotJsonRpc(&'static str),
    /// An `id` that is no JSON-RPC id at all: a boolean, an array or an object.
    #[error("invalid id: {0}")]
    InvalidId(&'static str),
}

/// What a top-level JSON text holds: one message, or the members of a batch (kept raw so each
/// classifies on its own; a bad member spoils only itself).
#[derive(Debug)]
pub enum Decoded<'a> {
    Single(Message<'a>),
    Batch(Vec<&'a RawValue>),
}

/// One incoming JSON-RPC message, classified.
#[derive(Debug)]
pub enum Message<'a> {
    /// A response (or something that wants to be one): it has no `method`.
    Response(Response<'a>),
    /// A request or notification sent by the server (it has a `method`); its `params` kept
    /// raw, for the few methods whose params are read (`notifications/progress`).
    ServerMessage {
        method: Cow<'a, str>,
        id: Option<Id>,
        params: Option<&'a RawValue>,
    },
}

/// The `id` of a response as received.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseId {
    /// `null`, or no `id` member.
    Null,
    Id(Id),
    /// A number or string that no request of mcpload's carries, so it pairs nothing: a
    /// fractional number (`1.0`, `-0`), an integer beyond i64, a string over
    /// [`MAX_ID_LEN`](super::MAX_ID_LEN) bytes.
    Foreign(&'static str),
}

impl ResponseId {
    /// The id, when it is one mcpload could have sent.
    pub fn as_id(&self) -> Option<&Id> {
        match self {
            ResponseId::Id(id) => Some(id),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        *self == ResponseId::Null
    }
}

/// A response as received; which of `result` / `error` it carried decides its class.
#[derive(Debug)]
pub struct Response<'a> {
    pub id: ResponseId,
    /// `"jsonrpc": "2.0"` was present and no member of the envelope (`jsonrpc`, `id`,
    /// `method`, `result`, `error`) was given twice.
    pub well_formed: bool,
    pub result: Option<&'a RawValue>,
    pub error: Option<&'a RawValue>,
}

impl Response<'_> {
    /// The `code` of the error object, when there is one with an integer code.
    pub fn error_code(&self) -> Option<i64> {
        #[derive(Deserialize)]
        struct Code {
            code: i64,
        }
        let raw = self.error?;
        serde_json::from_str::<Code>(raw.get()).ok().map(|c| c.code)
    }
}

impl Response<'_> {
    /// Whether the `result` is a tool's own failure: `"isError": true` among its top-level
    /// members (MCP `CallToolResult`). Only that member is read: written last, as the SDKs
    /// write it, it is read off the result's tail; a result whose text holds no `isError`
    /// (nor an escape that could spell it) is not parsed at all, and otherwise its other
    /// members are skipped unbuilt.
    #[inline]
    pub fn is_tool_error(&self) -> bool {
        self.result.is_some_and(|r| is_tool_error(r.get()))
    }
}

/// See [`Response::is_tool_error`].
fn is_tool_error(result: &str) -> bool {
    #[derive(Deserialize)]
    struct ToolResult {
        #[serde(rename = "isError", default)]
        is_error: Option<IsError>,
    }
    /// `true` only when the member is the boolean `true`; any other value is no tool error.
    struct IsError(bool);
    impl<'de> Deserialize<'de> for IsError {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let v = IgnoredOrBool::deserialize(d)?;
            Ok(IsError(matches!(v, IgnoredOrBool::Bool(true))))
        }
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum IgnoredOrBool {
        Bool(bool),
        Other(IgnoredAny),
    }
    if !result.starts_with('{') {
        return false;
    }
    if let Some(is_error) = is_error_last(result) {
        return is_error;
    }
    static IS_ERROR: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"isError"));
    static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    let bytes = result.as_bytes();
    if IS_ERROR.find(bytes).is_none() && ESCAPE.find(bytes).is_none() {
        return false;
    }
    serde_json::from_str::<ToolResult>(result)
        .ok()
        .and_then(|r| r.is_error)
        .is_some_and(|e| e.0)
}

/// The value of a top-level `isError` member written last with a boolean
/// (`…,"isError":false}`), read off the tail of `result` (an object, valid JSON); `None`
/// when the tail is anything else. Valid JSON makes it exact: between the literal and the
/// object's last brace there is only whitespace, so the member is the outer object's, and
/// a key whose opening quote is not escaped is `isError` itself, not the end of a longer key.
fn is_error_last(result: &str) -> Option<bool> {
    let tail = result.trim_end().strip_suffix('}')?.trim_end();
    let (tail, is_error) = match tail.strip_suffix("true") {
        Some(t) => (t, true),
        None => (tail.strip_suffix("false")?, false),
    };
    let before_key = tail
        .trim_end()
        .strip_suffix(':')?
        .trim_end()
        .strip_suffix("\"isError\"")?;
    let escapes = before_key.bytes().rev().take_while(|&b| b == b'\\').count();
    (escapes % 2 == 0).then_some(is_error)
}

/// Reads one JSON text: a single message or a batch.
pub fn decode(bytes: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        let members: Vec<&RawValue> =
            serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson(e.to_string()))?;
        if members.is_empty() {
            return Err(DecodeError::NotJsonRpc("empty batch"));
        }
        Ok(Decoded::Batch(members))
    } else {
        let raw: &RawValue =
            serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson(e.to_string()))?;
        decode_message(raw).map(Decoded::Single)
    }
}

/// The id of `bytes` when they are one response (no `method`) with a usable id: what
/// [`decode`] would classify as `Single(Response)` with that id, read in one pass (no raw
/// value first). For a transport that only needs to know whether a request was answered.
pub fn response_id(bytes: &[u8]) -> Option<Id> {
    // Rejected as `decode` rejects them: a batch, bytes that are not UTF-8.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    match serde_json::from_str::<Fields>(text).ok()? {
        Fields {
            method: None,
            id: Some(IdField::Id(id)),
            ..
        } => Some(id),
        _ => None,
    }
}

/// Classifies one JSON value (a single message or one member of a batch).
pub fn decode_message(raw: &RawValue) -> Result<Message<'_>, DecodeError> {
    let text = raw.get();
    if !text.starts_with('{') {
        return Err(DecodeError::NotJsonRpc("not an object"));
    }
    let fields: Fields =
        serde_json::from_str(text).map_err(|e| DecodeError::NotJson(e.to_string()))?;
    let id = match fields.id {
        None | Some(IdField::Null) => ResponseId::Null,
        Some(IdField::Id(id)) => ResponseId::Id(id),
        Some(IdField::Foreign(why)) => ResponseId::Foreign(why),
        Some(IdField::Invalid(why)) => return Err(DecodeError::InvalidId(why)),
    };
    if let Some(method) = fields.method {
        let id = match id {
            ResponseId::Id(id) => Some(id),
            _ => None,
        };
        return Ok(Message::ServerMessage {
            method,
            id,
            params: fields.params,
        });
    }
    if !fields.has_id && fields.result.is_none() && fields.error.is_none() {
        return Err(DecodeError::NotJsonRpc("no method, id, result or error"));
    }
    Ok(Message::Response(Response {
        id,
        well_formed: fields.jsonrpc_ok && !fields.repeated_member,
        result: fields.result,
        error: fields.error,
    }))
}

const FRACTIONAL_ID: &str = "fractional id";
const ID_BEYOND_I64: &str = "integer id beyond i64";
const ID_WRONG_TYPE: &str = "id of a type other than integer or string";
const ID_TOO_LONG: &str = "string id too long";

/// The `id` member as found: a usable id, `null`, a number or string none of mcpload's ids
/// can be, or something no JSON-RPC id can be.
#[derive(Debug)]
pub(crate) enum IdField {
    Id(Id),
    Null,
    Foreign(&'static str),
    Invalid(&'static str),
}

impl<'de> Deserialize<'de> for IdField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IdField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer, a string or null")
            }
            fn visit_i64<E>(self, v: i64) -> Result<IdField, E> {
                Ok(IdField::Id(Id::Num(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<IdField, E> {
                Ok(i64::try_from(v)
                    .map_or(IdField::Foreign(ID_BEYOND_I64), |n| IdField::Id(Id::Num(n))))
            }
            fn visit_i128<E>(self, _: i128) -> Result<IdField, E> {
                Ok(IdField::Foreign(ID_BEYOND_I64))
            }
            fn visit_u128<E>(self, _: u128) -> Result<IdField, E> {
                Ok(IdField::Foreign(ID_BEYOND_I64))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IdField, E> {
                Ok(IdField::Foreign(FRACTIONAL_ID))
            }
            fn visit_str<E>(self, v: &str) -> Result<IdField, E> {
                if v.len() > MAX_ID_LEN {
                    return Ok(IdField::Foreign(ID_TOO_LONG));
                }
                Ok(IdField::Id(Id::Str(v.into())))
            }
            fn visit_unit<E>(self) -> Result<IdField, E> {
                Ok(IdField::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<IdField, E> {
                Ok(IdField::Invalid(ID_WRONG_TYPE))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<IdField, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IdField::Invalid(ID_WRONG_TYPE))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<IdField, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IdField::Invalid(ID_WRONG_TYPE))
            }
        }
        d.deserialize_any(V)
    }
}

/// The members of a message object that classification needs; everything else is skipped.
struct Fields<'a> {
    jsonrpc_ok: bool,
    /// A member that classification reads came twice (which one counts is unknowable).
    repeated_member: bool,
    has_id: bool,
    id: Option<IdField>,
    method: Option<Cow<'a, str>>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Fields<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON-RPC message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Fields<'a>, A::Error> {
                let mut f = Fields {
                    jsonrpc_ok: false,
                    repeated_member: false,
                    has_id: false,
                    id: None,
                    method: None,
                    result: None,
                    error: None,
                    params: None,
                };
                let mut jsonrpc_seen = false;
                while let Some(key) = a.next_key::<Key>()? {
                    match key {
                        Key::Jsonrpc => {
                            let v: &RawValue = a.next_value()?;
                            f.repeated_member |= jsonrpc_seen;
                            jsonrpc_seen = true;
                            f.jsonrpc_ok = v.get() == "\"2.0\"";
                        }
                        Key::Id => {
                            f.repeated_member |= f.has_id;
                            f.has_id = true;
                            let id = a.next_value()?;
                            f.id.get_or_insert(id);
                        }
                        Key::Method => {
                            let method = a.next_value::<MethodName>()?.0;
                            f.repeated_member |= f.method.is_some();
                            f.method.get_or_insert(method);
                        }
                        Key::Result => {
                            let result = a.next_value()?;
                            f.repeated_member |= f.result.is_some();
                            f.result.get_or_insert(result);
                        }
                        Key::Error => {
                            let error = a.next_value()?;
                            f.repeated_member |= f.error.is_some();
                            f.error.get_or_insert(error);
                        }
                        Key::Params => {
                            // Kept raw, never built: a server message's params.
                            f.params.get_or_insert(a.next_value()?);
                        }
                        Key::Other => {
                            a.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(f)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A member name, matched without allocating.
enum Key {
    Jsonrpc,
    Id,
    Method,
    Result,
    Error,
    Params,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "jsonrpc" => Key::Jsonrpc,
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    "params" => Key::Params,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// A `method` member: borrowed from the input unless it holds escapes.
#[derive(Deserialize)]
struct MethodName<'a>(#[serde(borrow)] Cow<'a, str>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_error_is_read_off_the_tail_only_when_it_is_the_outer_objects_last_member() {
        let cases = [
            (r#"{"content":[],"isError":true}"#, true),
            (r#"{"content":[],"isError":false}"#, false),
            ("{\"content\":[] ,\n \"isError\" :\ttrue \n}\n", true),
            // Not the last member: the parse reads it.
            (r#"{"isError":true,"content":[]}"#, true),
            // A nested object's, not the result's.
            (r#"{"content":[],"meta":{"isError":true}}"#, false),
            // The end of a longer key: `x"isError`.
            (r#"{"x\"isError":true}"#, false),
            // An escaped backslash, then the key itself.
            (r#"{"a\\":1,"isError":true}"#, true),
            // Spelled with an escape.
            (r#"{"content":[],"is\u0045rror":true}"#, true),
            // Inside a string.
            (r#"{"text":"\"isError\":true"}"#, false),
            // Not a boolean true.
            (r#"{"content":[],"isError":"true"}"#, false),
            (r#"{"content":[],"isError":1}"#, false),
            (r#"[{"isError":true}]"#, false),
        ];
        for (result, want) in cases {
            assert_eq!(is_tool_error(result), want, "{result}");
        }
    }

    /// What `decode` says `response_id` must: the id of a single response, or nothing.
    fn by_decode(bytes: &[u8]) -> Option<Id> {
        match decode(bytes) {
            Ok(Decoded::Single(Message::Response(r))) => r.id.as_id().cloned(),
            _ => None,
        }
    }

    #[test]
    fn response_id_agrees_with_decode() {
        let cases: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#,
            br#"  {"id":"s-1","error":{"code":-32000,"message":"m"}} "#,
            br#"{"jsonrpc":"2.0","id":7}"#,
            br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            br#"{"method":"notifications/progress","params":{}}"#,
            br#"{"id":null,"error":{"code":-32700}}"#,
            br#"{"id":1.0,"result":{}}"#,
            br#"{"id":true,"result":{}}"#,
            br#"{"id":7,"id":8,"result":{}}"#,
            br#"[{"id":7,"result":{}}]"#,
            br#"{"id":7,"result":{}} x"#,
            br#"{"id":7,"result":{"#,
            b"{\"id\":7,\"result\":{\"t\":\"\xff\"}}",
            br#"7"#,
            b"",
        ];
        for bytes in cases {
            assert_eq!(
                response_id(bytes),
                by_decode(bytes),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert_eq!(
            response_id(br#"{"id":7,"result":{}}"#),
            Some(Id::Num(7)),
            "the agreement is not only on None"
        );
    }
}
