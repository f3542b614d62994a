//! What a result says beyond "answered": a tool's own failure (`isError: true`), or a
//! `structuredContent` that breaks its tool's declared `outputSchema`; and the run's rules for
//! both (`--tool-errors`, `--validate-output`, the schemas compiled once per operation).

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::Arc;

/// How a result with `isError: true` counts (`--tool-errors`, `criteria.tool_errors`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolErrors {
    /// In `tool_errors`: not ok, in the error rate.
    #[default]
    Error,
    /// As `ok`: for servers that use `isError` for expected outcomes.
    Ok,
}

impl FromStr for ToolErrors {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "error" => Ok(ToolErrors::Error),
            "ok" => Ok(ToolErrors::Ok),
            other => Err(format!("`{other}`: expected ok or error")),
        }
    }
}

/// How results are checked against their tool's `outputSchema` (`--validate-output`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ValidateOutput {
    Off,
    /// Every Nth result of each operation (per worker).
    Sample(NonZeroU32),
    /// Every result of a tool that declares a schema.
    #[default]
    All,
}

impl FromStr for ValidateOutput {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}`: expected off, all or sample:N (N a whole number above 0)");
        match s.trim() {
            "off" => Ok(ValidateOutput::Off),
            "all" => Ok(ValidateOutput::All),
            other => other
                .strip_prefix("sample:")
                .and_then(|n| n.trim().parse::<NonZeroU32>().ok())
                .map(ValidateOutput::Sample)
                .ok_or_else(bad),
        }
    }
}

impl fmt::Display for ValidateOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidateOutput::Off => f.write_str("off"),
            ValidateOutput::Sample(n) => write!(f, "sample:{n}"),
            ValidateOutput::All => f.write_str("all"),
        }
    }
}

impl schemars::JsonSchema for ValidateOutput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ValidateOutput".into()
    }

    /// What [`ValidateOutput::from_str`] reads.
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": r"^\s*(?:off|all|sample:\s*0*[1-9][0-9]*)\s*$",
            "examples": ["all", "sample:10", "off"],
        })
    }
}

impl<'de> Deserialize<'de> for ValidateOutput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for ValidateOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Refuses every external resource: a schema's remote (or file) `$ref` is never fetched, so
/// compiling a schema that needs one fails instead of reaching the network.
struct NoRetrieval;

impl jsonschema::Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("{uri}: mcpload never fetches a schema").into())
    }
}

/// A tool's `outputSchema`, compiled once (JSON Schema 2020-12 unless it says `$schema`).
pub struct OutputSchema(jsonschema::Validator);

impl fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OutputSchema")
    }
}

impl OutputSchema {
    /// Compiles `schema`; an invalid one, or one that needs a resource from elsewhere, is an
    /// error naming why.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .with_retriever(NoRetrieval)
            .build(schema)
            .map(OutputSchema)
            .map_err(|e| e.to_string())
    }

    /// Checks a result's `structuredContent` (absent: a violation, since a tool that declares
    /// an `outputSchema` MUST return one); the first violation as `PATH: MESSAGE`.
    pub fn check(&self, result: &RawValue) -> Result<(), String> {
        let Some(structured) = structured_content(result) else {
            return Err("/: no structuredContent, though the tool declares an outputSchema".into());
        };
        match self.0.validate(&structured) {
            Ok(()) => Ok(()),
            Err(e) => {
                let path = e.instance_path().to_string();
                let path = if path.is_empty() { "/".into() } else { path };
                Err(format!("{path}: {e}"))
            }
        }
    }

    /// Whether a result's `structuredContent` conforms, without describing a violation: for
    /// an operation whose first violation is already kept (no error text built per answer).
    pub fn conforms(&self, result: &RawValue) -> bool {
        structured_content(result).is_some_and(|s| self.0.is_valid(&s))
    }
}

/// A result's `structuredContent`, when it has one.
fn structured_content(result: &RawValue) -> Option<Value> {
    #[derive(Deserialize)]
    struct Structured {
        #[serde(rename = "structuredContent")]
        structured: Option<Value>,
    }
    serde_json::from_str::<Structured>(result.get())
        .ok()
        .and_then(|s| s.structured)
}

/// The run's rules for reading results, shared by every worker's correlator.
#[derive(Debug, Default)]
pub struct AnswerRules {
    /// `--tool-errors ok`: a result with `isError: true` counts as `ok`.
    pub tool_errors_ok: bool,
    pub validate: ValidateOutput,
    /// The compiled `outputSchema` of each operation's tool, by operation number.
    schemas: Vec<Option<Arc<OutputSchema>>>,
}

impl AnswerRules {
    pub fn new(tool_errors: ToolErrors, validate: ValidateOutput) -> Self {
        AnswerRules {
            tool_errors_ok: tool_errors == ToolErrors::Ok,
            validate,
            schemas: Vec::new(),
        }
    }

    /// Results of operation `op` are checked against `schema` (unless validation is off).
    pub fn set_schema(&mut self, op: u16, schema: Arc<OutputSchema>) {
        let i = op as usize;
        if i >= self.schemas.len() {
            self.schemas.resize(i + 1, None);
        }
        self.schemas[i] = Some(schema);
    }

    /// The schema that results of `op` are checked against, and how often.
    #[inline]
    pub(super) fn schema(&self, op: u16) -> Option<(&OutputSchema, u32)> {
        let every = match self.validate {
            ValidateOutput::Off => return None,
            ValidateOutput::Sample(n) => n.get(),
            ValidateOutput::All => 1,
        };
        Some((self.schemas.get(op as usize)?.as_deref()?, every))
    }
}

/// The text of a tool error, for the report: its first text content (or the result itself),
/// cut to a line.
pub(super) fn tool_error_text(result: &RawValue) -> String {
    #[derive(Deserialize)]
    struct Content {
        text: Option<String>,
    }
    #[derive(Deserialize)]
    struct ToolResult {
        #[serde(default)]
        content: Vec<Content>,
    }
    let text = serde_json::from_str::<ToolResult>(result.get())
        .ok()
        .and_then(|r| r.content.into_iter().find_map(|c| c.text))
        .unwrap_or_else(|| result.get().to_owned());
    one_line(&text)
}

/// At most 300 characters of `text` on one line.
pub(super) fn one_line(text: &str) -> String {
    const MAX: usize = 300;
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX + 1)
        .collect();
    if line.chars().count() > MAX {
        format!("{}…", line.chars().take(MAX).collect::<String>())
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn validate_output_reads_and_prints() {
        assert_eq!("off".parse(), Ok(ValidateOutput::Off));
        assert_eq!("all".parse(), Ok(ValidateOutput::All));
        let s: ValidateOutput = "sample:10".parse().unwrap();
        assert_eq!(s.to_string(), "sample:10");
        assert!("sample:0".parse::<ValidateOutput>().is_err());
        assert!("some".parse::<ValidateOutput>().is_err());
    }

    #[test]
    fn structured_content_is_checked_with_path_and_message() {
        let s = OutputSchema::compile(&json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        }))
        .unwrap();
        assert!(
            s.check(&raw(json!({"structuredContent": {"n": 1}})))
                .is_ok()
        );
        let why = s
            .check(&raw(json!({"structuredContent": {"n": "one"}})))
            .unwrap_err();
        assert!(why.starts_with("/n: "), "{why}");
        let why = s.check(&raw(json!({"structuredContent": {}}))).unwrap_err();
        assert!(why.starts_with("/: ") && why.contains("\"n\""), "{why}");
        assert!(s.check(&raw(json!({"content": []}))).is_err());
    }

    /// A remote `$ref` is never fetched: the schema that needs one does not compile, and the
    /// retriever is asked (and refuses) without touching the network.
    #[test]
    fn a_remote_ref_is_never_fetched() {
        // Our retriever is asked, and refuses: no connection is tried (one to port 9 would
        // fail with another message).
        for uri in ["http://127.0.0.1:9/schema.json", "file:///etc/passwd"] {
            let err = OutputSchema::compile(&json!({"$ref": uri})).unwrap_err();
            assert!(err.contains("never fetches"), "{uri}: {err}");
        }
        // Under the meta-schemas' own host the crate's registry answers, fetching nothing.
        let uri = "https://json-schema.org/draft/2020-12/schema-of-nothing";
        assert!(OutputSchema::compile(&json!({"$ref": uri})).is_err());
        // A local `$ref` into the schema itself still works.
        let local = OutputSchema::compile(&json!({
            "$defs": {"n": {"type": "integer"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/n"}},
        }))
        .unwrap();
        assert!(
            local
                .check(&raw(json!({"structuredContent": {"n": "x"}})))
                .is_err()
        );
    }

    #[test]
    fn a_tool_errors_text_is_its_first_text_content() {
        let r = raw(
            json!({"content": [{"type": "image"}, {"type": "text", "text": "bad\nx"}],
            "isError": true}),
        );
        assert_eq!(tool_error_text(&r), "bad x");
        assert_eq!(one_line(&"a".repeat(400)).chars().count(), 301);
    }
}
