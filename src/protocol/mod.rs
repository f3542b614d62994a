//! The one MCP vocabulary, shared by the client and the reference server: protocol
//! revisions and their eras, the `--protocol` choice, the handshake methods, header names,
//! the field `Mcp-Name` mirrors and the encoding of header values, and MCP's own error codes.

pub mod headers;

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A protocol revision mcpload speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Revision {
    pub const ALL: [Revision; 5] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];
    /// The newest revision of the legacy era, offered in `initialize`.
    pub const LATEST_LEGACY: Revision = Revision::V2025_11_25;

    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    pub fn parse(s: &str) -> Option<Revision> {
        Revision::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn era(self) -> Era {
        if self >= Revision::V2026_07_28 {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    pub fn is_modern(self) -> bool {
        self.era() == Era::Modern
    }

    /// The `MCP-Protocol-Version` header is required on every request after `initialize`
    /// from 2025-06-18 on (and on every request in 2026-07-28).
    pub fn sends_version_header(self) -> bool {
        self >= Revision::V2025_06_18
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Revision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The two eras of MCP (docs/target.md, "Eras, versions, routing").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Era {
    /// 2024-11-05 to 2025-11-25: `initialize`, `notifications/initialized`, sessions.
    Legacy,
    /// 2026-07-28: `_meta` on every request, `server/discover`, no session.
    Modern,
}

/// `--protocol`: detect the era, or pin one revision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProtocolChoice {
    /// `server/discover`; then `initialize`; then, when `initialize` is refused, 2026-07-28
    /// without discovery.
    #[default]
    Auto,
    Pinned(Revision),
}

impl FromStr for ProtocolChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(ProtocolChoice::Auto);
        }
        Revision::parse(s)
            .map(ProtocolChoice::Pinned)
            .ok_or_else(|| {
                let all: Vec<&str> = Revision::ALL.iter().map(|r| r.as_str()).collect();
                format!(
                    "unknown protocol {s:?}: use auto or one of {}",
                    all.join(", ")
                )
            })
    }
}

impl fmt::Display for ProtocolChoice {
    /// The `--protocol` spelling: `auto` or the pinned revision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolChoice::Auto => f.write_str("auto"),
            ProtocolChoice::Pinned(r) => f.write_str(r.as_str()),
        }
    }
}

/// Methods a client uses to start talking: never faulted, never counted as load.
pub fn is_handshake(method: &str) -> bool {
    matches!(method, "initialize" | "server/discover")
}

/// The extension id of tasks under 2026-07-28.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// MCP's error codes (JSON-RPC's own are in [`crate::jsonrpc::codes`]).
pub mod codes {
    /// 2026-07-28: an HTTP header disagrees with the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: a client capability the request needs is missing.
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    /// 2026-07-28: the protocol version is not supported.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_parse_order_and_split_into_eras() {
        for r in Revision::ALL {
            assert_eq!(Revision::parse(r.as_str()), Some(r));
        }
        assert!(Revision::V2025_11_25 < Revision::V2026_07_28);
        assert_eq!(Revision::V2025_11_25.era(), Era::Legacy);
        assert!(Revision::V2026_07_28.is_modern());
        assert!(!Revision::V2025_03_26.sends_version_header());
        assert_eq!("auto".parse(), Ok(ProtocolChoice::Auto));
        assert_eq!(
            "2025-06-18".parse(),
            Ok(ProtocolChoice::Pinned(Revision::V2025_06_18))
        );
        assert!("2023-01-01".parse::<ProtocolChoice>().is_err());
        for choice in [
            ProtocolChoice::Auto,
            ProtocolChoice::Pinned(Revision::V2026_07_28),
        ] {
            assert_eq!(choice.to_string().parse(), Ok(choice));
        }
    }
}
