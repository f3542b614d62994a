//! The small value types of a profile with their text syntax: durations (`"10s"`), sizes
//! (`"256MiB"`), load levels (`[1, 2, 4]` or `"1..64 x2"`), protocol choice, spacing,
//! templated text; and next to each parser, the JSON Schema of what it accepts
//! (`mcpload profile schema`).

use super::template;
use crate::protocol::{ProtocolChoice, Revision};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};
use std::borrow::Cow;
use std::time::Duration;

/// humantime's units, as [`parse_duration`] reads them (case matters: `M` is a month).
const DURATION_UNITS: &str = "nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|\
     minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|\
     years|year|yrs|yr|y";

/// The text of a duration: one or more `NUMBER UNIT` (`"10s"`, `"1m 30s"`, `"1.5s"`).
fn duration_pattern() -> String {
    format!(r"^\s*(?:[0-9]+(?:\.[0-9]+)?\s*(?:{DURATION_UNITS})\s*)+$")
}

/// Schema of a duration field: what [`duration`] accepts.
pub(super) fn duration_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": duration_pattern(),
        "examples": ["10s", "250ms", "1m 30s"],
    })
}

/// serde helper (used for the default shown in the schema): a duration as its text.
pub(super) fn duration_text<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_duration(*d))
}

/// Parses `"10s"`, `"250ms"`, `"1m 30s"` (humantime's syntax).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        format!("invalid duration {text:?} ({e}); write e.g. \"10s\", \"250ms\", \"1m\"")
    })
}

/// serde helper: a duration written as text.
pub(super) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)
        .map_err(|_| de::Error::custom("expected a duration as text, e.g. \"10s\" or \"250ms\""))?;
    parse_duration(&text).map_err(de::Error::custom)
}

/// serde helper: `task = true | false | "auto"`.
pub(super) fn task_mode<'de, D: Deserializer<'de>>(d: D) -> Result<super::TaskMode, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Flag(bool),
        Text(String),
    }
    let bad = || de::Error::custom("expected `true`, `false` or \"auto\"");
    match Written::deserialize(d).map_err(|_: D::Error| bad())? {
        Written::Flag(true) => Ok(super::TaskMode::On),
        Written::Flag(false) => Ok(super::TaskMode::Off),
        Written::Text(t) if t == "auto" => Ok(super::TaskMode::Auto),
        Written::Text(_) => Err(bad()),
    }
}

/// Schema of `mix.task`: what [`task_mode`] accepts.
pub(super) fn task_mode_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"oneOf": [{"type": "boolean"}, {"const": "auto"}]})
}

/// serde helper: an optional duration written as text.
pub(super) fn optional_duration<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// Parses a size in bytes of at least 1: `"256MiB"`, `"512 KiB"`, `"1GiB"`, `"64MB"` (units
/// of 1024 or of 1000, case aside), or a plain number of bytes.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let bad = || format!("invalid size {text:?}; write e.g. \"256MiB\", \"512KiB\", \"1GiB\"");
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: usize = digits.parse().map_err(|_| bad())?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(bad()),
    };
    match n.checked_mul(scale) {
        Some(0) => Err(format!("size {text:?}: must be more than 0 bytes")),
        Some(bytes) => Ok(bytes),
        None => Err(format!("size {text:?}: too large")),
    }
}

/// serde helper: `load.max_answer_memory`, a size.
pub(super) fn answer_memory<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    size(d, "load.max_answer_memory")
}

/// serde helper: `target.fleet_memory_budget`, a size.
pub(super) fn fleet_memory_budget<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<usize>, D::Error> {
    size(d, "target.fleet_memory_budget").map(Some)
}

/// Schema of a size field: what [`parse_bytes`] accepts, as text or as a number of bytes.
pub(super) fn bytes_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "oneOf": [
            {"type": "integer", "minimum": 1},
            {
                "type": "string",
                "pattern": r"^\s*0*[1-9][0-9]*\s*(?:[bB]|[kKmMgG][iI]?[bB])?\s*$",
                "examples": ["256MiB", "512KiB", "1GiB", "64MB"],
            },
        ]
    })
}

/// A size written as text (`"256MiB"`) or as a number of bytes; an error names `field`.
fn size<'de, D: Deserializer<'de>>(d: D, field: &str) -> Result<usize, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    let named = |e: String| de::Error::custom(format!("field `{field}`: {e}"));
    match Raw::deserialize(d) {
        Ok(Raw::Number(n)) => parse_bytes(&n.to_string()).map_err(named),
        Ok(Raw::Text(t)) => parse_bytes(&t).map_err(named),
        Err(_) => Err(named(
            "expected a size: text such as \"256MiB\", or a number of bytes".into(),
        )),
    }
}

/// A sweep has at most this many steps.
const MAX_LEVELS: usize = 1000;
/// The smallest level: one arrival per 100 s.
const MIN_LEVEL: f64 = 0.01;

/// The load of each step: concurrency or arrival rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Levels(pub Vec<f64>);

impl Levels {
    /// `"1,2,4"`, `"1..64 x2"` (geometric) or `"100..500 +100"` (arithmetic).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bad = || {
            format!(
                "invalid levels {text:?}: write a list \"1,2,4\", a geometric range \"1..64 x2\" \
                 or an arithmetic one \"100..500 +100\""
            )
        };
        let levels = if let Some((from, rest)) = text.split_once("..") {
            let (to, step) = rest.trim().split_once(' ').ok_or_else(bad)?;
            let (from, to): (f64, f64) = (
                from.trim().parse().map_err(|_| bad())?,
                to.trim().parse().map_err(|_| bad())?,
            );
            let step = step.trim();
            let mut out = Vec::new();
            let mut v = from;
            if let Some(f) = step.strip_prefix('x') {
                let f: f64 = f.parse().map_err(|_| bad())?;
                if f <= 1.0 || from <= 0.0 {
                    return Err(bad());
                }
                while v <= to * (1.0 + 1e-9) && out.len() <= MAX_LEVELS {
                    out.push(v);
                    v *= f;
                }
            } else if let Some(s) = step.strip_prefix('+') {
                let s: f64 = s.parse().map_err(|_| bad())?;
                if s <= 0.0 {
                    return Err(bad());
                }
                while v <= to * (1.0 + 1e-9) && out.len() <= MAX_LEVELS {
                    out.push(v);
                    v += s;
                }
            } else {
                return Err(bad());
            }
            out
        } else {
            text.split(',')
                .map(|s| s.trim().parse::<f64>().map_err(|_| bad()))
                .collect::<Result<_, _>>()?
        };
        Levels::new(levels).map_err(|e| format!("{e} in {text:?}"))
    }

    pub fn new(levels: Vec<f64>) -> Result<Self, String> {
        if levels.is_empty() {
            return Err("no levels".into());
        }
        if levels.len() > MAX_LEVELS {
            return Err(format!("more than {MAX_LEVELS} levels"));
        }
        if levels.iter().any(|l| !l.is_finite() || *l < MIN_LEVEL) {
            return Err(format!(
                "every level must be a number of at least {MIN_LEVEL}"
            ));
        }
        Ok(Levels(levels))
    }
}

impl<'de> Deserialize<'de> for Levels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            List(Vec<f64>),
            One(f64),
            Text(String),
        }
        let raw = Raw::deserialize(d).map_err(|_| {
            de::Error::custom(
                "expected levels: a list [1, 2, 4], a number, or a range \"1..64 x2\" / \"100..500 +100\"",
            )
        })?;
        match raw {
            Raw::List(v) => Levels::new(v),
            Raw::One(v) => Levels::new(vec![v]),
            Raw::Text(t) => Levels::parse(&t),
        }
        .map_err(de::Error::custom)
    }
}

/// The text of a number as Rust's `f64` parser reads it (infinities aside).
const NUMBER: &str = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?";

impl JsonSchema for Levels {
    fn schema_name() -> Cow<'static, str> {
        "Levels".into()
    }

    /// What [`Levels::deserialize`] accepts: a list, one number, or the text of a list or a
    /// range ([`Levels::parse`]; the range's own bounds and step are checked when read).
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let level = json_schema!({"type": "number", "minimum": MIN_LEVEL});
        let list = format!(r"^\s*{NUMBER}\s*(?:,\s*{NUMBER}\s*)*$");
        let range = format!(r"^\s*{NUMBER}\s*\.\.\s*{NUMBER}\s* \s*[x+]{NUMBER}\s*$");
        json_schema!({
            "oneOf": [
                {"type": "array", "items": level, "minItems": 1, "maxItems": MAX_LEVELS},
                level,
                {"type": "string", "pattern": format!("{list}|{range}")},
            ],
            "examples": [[1, 2, 4], "1..64 x2", "100..500 +100"],
        })
    }
}

/// serde helper: `"auto"` or a revision such as `"2025-06-18"`.
pub(super) fn protocol<'de, D: Deserializer<'de>>(d: D) -> Result<ProtocolChoice, D::Error> {
    String::deserialize(d)?.parse().map_err(de::Error::custom)
}

/// Schema of `target.protocol`: what [`protocol`] accepts.
pub(super) fn protocol_schema(_: &mut SchemaGenerator) -> Schema {
    let mut words = vec!["auto"];
    words.extend(Revision::ALL.iter().map(|r| r.as_str()));
    json_schema!({"type": "string", "enum": words})
}

/// Spacing of open-loop arrivals.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Spacing {
    /// Exactly 1/rate apart.
    #[default]
    Constant,
    /// Exponential gaps with mean 1/rate (a Poisson process).
    Poisson,
}

/// A text whose `{{…}}` holes were checked when the profile was read.
#[derive(Clone, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transparent)]
pub struct TemplateText(pub String);

impl<'de> Deserialize<'de> for TemplateText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        template::parse(&s).map_err(de::Error::custom)?;
        Ok(TemplateText(s))
    }
}

/// Checks every string of a TOML value for well-formed holes.
pub(super) fn check_templates(v: &toml::Value) -> Result<(), String> {
    check_json_templates(&serde_json::to_value(v).map_err(|e| e.to_string())?)
}

/// Checks every string of a JSON value for well-formed holes.
pub(super) fn check_json_templates(v: &serde_json::Value) -> Result<(), String> {
    match v {
        serde_json::Value::String(s) => template::parse(s).map(|_| ()),
        serde_json::Value::Array(a) => a.iter().try_for_each(check_json_templates),
        serde_json::Value::Object(m) => m.values().try_for_each(check_json_templates),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_lists_and_ranges() {
        assert_eq!(
            Levels::parse("1..64 x2").unwrap().0,
            vec![1., 2., 4., 8., 16., 32., 64.]
        );
        assert_eq!(
            Levels::parse("100..300 +100").unwrap().0,
            vec![100., 200., 300.]
        );
        assert_eq!(Levels::parse("1, 3,5").unwrap().0, vec![1., 3., 5.]);
        for bad in [
            "",
            "1..64",
            "1..64 x1",
            "0..8 x2",
            "a,b",
            "1..8 -1",
            "-1",
            "1..2 +1e-20",
            "1..1e9 +1",
            "1e-20",
        ] {
            assert!(Levels::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes(" 512 kib "), Ok(512 << 10));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        for bad in [
            "",
            "MiB",
            "1.5MiB",
            "-1MiB",
            "10 parsecs",
            "0",
            "0MiB",
            "99999999999GiB",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
        assert!(parse_bytes("lots").unwrap_err().contains("\"256MiB\""));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(
            parse_duration("ten seconds")
                .unwrap_err()
                .contains("\"10s\"")
        );
    }
}
