//! The JSON-RPC 2.0 codec: ids, error objects, cheap re-stampable request encoding, and a
//! decoder that classifies incoming messages (one or a batch) without parsing a `result`.

mod decode;
mod encode;

pub use decode::{
    DecodeError, Decoded, Message, Response, ResponseId, decode, decode_message, response_id,
};
pub use encode::{
    BatchWriter, RequestTemplate, encode_notification, encode_request, encode_request_with,
};

use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest string id accepted from the wire; a longer one is hostile, not an id.
pub const MAX_ID_LEN: usize = 1024;

/// A request id: an integer or a string, never null, never fractional.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    Num(i64),
    Str(Box<str>),
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.into())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Num(n) => s.serialize_i64(*n),
            Id::Str(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match decode::IdField::deserialize(d)? {
            decode::IdField::Id(id) => Ok(id),
            decode::IdField::Null => Err(serde::de::Error::custom("a request id is never null")),
            decode::IdField::Foreign(why) | decode::IdField::Invalid(why) => {
                Err(serde::de::Error::custom(why))
            }
        }
    }
}

/// A JSON-RPC error object as it travels on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

/// JSON-RPC's own error codes (MCP's are in `protocol::codes`).
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}
