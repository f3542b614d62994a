//! The JSON Schema of the profile format (`mcpload profile schema`, `schema/profile.json`),
//! generated from the types that parse profiles, so that the two cannot drift.

use super::Profile;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The schema as JSON (draft 07, which every TOML language server reads), pretty-printed
/// with a final newline: the text of `schema/profile.json`.
pub fn text() -> String {
    let mut text = serde_json::to_string_pretty(&value()).expect("a JSON value prints");
    text.push('\n');
    text
}

/// The schema of [`Profile`] as a JSON value.
pub fn value() -> Value {
    let schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Profile>();
    let mut value = schema.to_value();
    without_null(&mut value);
    value
}

/// TOML has no null: an optional key is left out, never null. Removes the `null` that
/// `Option` adds (a `type` member, an `anyOf` branch, a `default`), so that editors neither
/// offer nor accept it.
fn without_null(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("default").is_some_and(Value::is_null) {
                o.remove("default");
            }
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if let [one] = types.as_slice() {
                    let one = one.clone();
                    o.insert("type".into(), one);
                }
            }
            for key in ["anyOf", "oneOf"] {
                drop_null_branch(o, key);
            }
            o.values_mut().for_each(without_null);
        }
        Value::Array(a) => a.iter_mut().for_each(without_null),
        _ => {}
    }
}

/// Drops the `{"type": "null"}` branch of `anyOf` / `oneOf`; one branch left is merged into
/// the object itself (a reference, into an `allOf` of one).
fn drop_null_branch(o: &mut Map<String, Value>, key: &str) {
    let Some(Value::Array(branches)) = o.get_mut(key) else {
        return;
    };
    let before = branches.len();
    branches.retain(|b| b.get("type").is_none_or(|t| t != "null"));
    if branches.len() == before || branches.len() != 1 {
        return;
    }
    let Some(Value::Object(only)) = branches.pop() else {
        return;
    };
    o.remove(key);
    if only.contains_key("$ref") {
        // Draft 07 ignores a `$ref`'s siblings: the description stays beside an `allOf`.
        o.insert("allOf".into(), Value::Array(vec![Value::Object(only)]));
    } else {
        for (k, v) in only {
            o.entry(k).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Source;

    /// Whether the profile parser and the schema agree on `text`: both accept it, or both
    /// refuse it. Returns (parser, schema).
    fn verdicts(validator: &jsonschema::Validator, text: &str) -> (bool, bool) {
        let src = Source {
            path: "t.toml".into(),
            text: text.to_owned(),
        };
        let parsed = src.parse().is_ok();
        let table: toml::Table = toml::from_str(text).expect("the sample is TOML");
        let json = serde_json::to_value(table).expect("TOML converts to JSON");
        (parsed, validator.is_valid(&json))
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .build(&value())
            .expect("the schema compiles")
    }

    /// Each hand-written schema accepts what its parser accepts and refuses what it refuses,
    /// on the values people write and the mistakes they make.
    #[test]
    fn hand_written_schemas_agree_with_their_parsers() {
        let v = validator();
        let target = "[target]\nbuiltin = {}\n";
        let cases: &[(&str, &[&str])] = &[
            (
                "[load]\nwarmup = VALUE\n",
                &[
                    "\"10s\"",
                    "\"250ms\"",
                    "\"1m 30s\"",
                    "\"1m30s\"",
                    "\"1.5s\"",
                    "\"0s\"",
                    "\" 2h \"",
                    "\"3 days\"",
                    "\"1M\"",
                    "\"10µs\"",
                    "\"ten seconds\"",
                    "\"10\"",
                    "\"\"",
                    "\"s\"",
                    "\"10 S\"",
                    "\"1.s\"",
                    "\"-1s\"",
                    "\"10sx\"",
                    "10",
                ],
            ),
            (
                "[load]\nmax_answer_memory = VALUE\n",
                &[
                    "\"256MiB\"",
                    "\" 512 kib \"",
                    "\"2GB\"",
                    "\"4096\"",
                    "4096",
                    "\"1b\"",
                    "\"0\"",
                    "0",
                    "\"0MiB\"",
                    "\"1.5MiB\"",
                    "\"-1MiB\"",
                    "\"10 parsecs\"",
                    "\"MiB\"",
                    "-5",
                    "true",
                ],
            ),
            (
                "[load]\nconcurrency = VALUE\n",
                &[
                    "[1, 2, 4]",
                    "4",
                    "0.5",
                    "\"1,2,4\"",
                    "\"1..64 x2\"",
                    "\"100..300 +100\"",
                    "\" 1 .. 8 x2 \"",
                    "[]",
                    "[0]",
                    "0",
                    "\"1..64\"",
                    "\"a,b\"",
                    "\"1..8 -1\"",
                    "\"\"",
                    "\"1..8 x 2\"",
                    "true",
                ],
            ),
            (
                "[criteria]\nvalidate_output = VALUE\n",
                &[
                    "\"all\"",
                    "\"off\"",
                    "\"sample:10\"",
                    "\" sample: 3 \"",
                    "\"sample:0\"",
                    "\"sample:\"",
                    "\"some\"",
                    "1",
                ],
            ),
            (
                "[[mix]]\nmethod = \"tools/call\"\ntool = \"echo\"\ntask = VALUE\n",
                &["true", "false", "\"auto\"", "\"yes\"", "1"],
            ),
            (
                "[target]\nbuiltin = {}\nprotocol = VALUE\n",
                &[
                    "\"auto\"",
                    "\"2025-06-18\"",
                    "\"2026-07-28\"",
                    "\"2023-01-01\"",
                    "\"latest\"",
                ],
            ),
            (
                "[target.builtin]\nservice_ms = VALUE\n",
                &[
                    "20",
                    "0.5",
                    "\"20\"",
                    "\"fixed:20\"",
                    "\"exp:5\"",
                    "\"uniform:10..30\"",
                    "\"uniform: 1 .. 2\"",
                    "-1",
                    "\"fixed:-1\"",
                    "\"uniform:10\"",
                    "\"gauss:3\"",
                    "\"\"",
                ],
            ),
            (
                "[target.builtin]\nfault = VALUE\n",
                &[
                    "\"drop=10,garbage=7\"",
                    "\"\"",
                    "\" null-id = 3 \"",
                    "\"drop=10,\"",
                    "\"drop=0\"",
                    "\"drop\"",
                    "\"lose=3\"",
                    "\"drop=-1\"",
                    "\"drop=1.5\"",
                ],
            ),
            (
                "[target.builtin]\nfault_random = VALUE\n",
                &[
                    "\"drop=0.01,truncate=0.001\"",
                    "\"drop=1\"",
                    "\"drop=.5\"",
                    "\"drop=0\"",
                    "\"drop=1.5\"",
                    "\"drop=2\"",
                    "\"drop=\"",
                    "\"lose=0.1\"",
                ],
            ),
            (
                "[target.builtin]\nstall = [VALUE]\n",
                &[
                    "\"5s:2s\"",
                    "\"1500ms:500ms\"",
                    "\"5s\"",
                    "\"5s:\"",
                    "\":2s\"",
                ],
            ),
            (
                "[target.builtin]\nreject = VALUE\n",
                &["429", "503", "500", "\"429\""],
            ),
        ];
        for (template, samples) in cases {
            let mut accepted = 0;
            for sample in *samples {
                let body = template.replacen("VALUE", sample, 1);
                let text = if body.starts_with("[target") {
                    body
                } else {
                    format!("{target}{body}")
                };
                let (parser, schema) = verdicts(&v, &text);
                assert_eq!(parser, schema, "parser {parser}, schema {schema}: {text}");
                accepted += usize::from(parser);
            }
            assert!(
                0 < accepted && accepted < samples.len(),
                "{template}: the samples must hold good and bad ones ({accepted} accepted)"
            );
        }
    }

    /// The rules across fields that the schema states agree with the parser's.
    #[test]
    fn rules_across_fields_agree_with_the_parser() {
        let v = validator();
        for (text, valid) in [
            ("[target]\nurl = \"http://127.0.0.1:1/mcp\"\n", true),
            (
                "[target]\nurl = \"http://127.0.0.1:1/mcp\"\nstdio = \"x\"\n",
                false,
            ),
            ("[target]\nheaders = { a = \"b\" }\n", false),
            (
                "[target]\nbuiltin = {}\n[[mix]]\nmethod = \"tools/call\"\n",
                false,
            ),
            (
                "[target]\nbuiltin = {}\n[[mix]]\nmethod = \"prompts/get\"\n",
                false,
            ),
            ("[target]\nbuiltin = {}\n[[mix]]\nmethod = \"ping\"\n", true),
            (
                "[target]\nurl = \"http://127.0.0.1:1/mcp\"\n[target.auth]\ntoken = \"t\"\n",
                false,
            ),
            (
                "[target]\nbuiltin = {}\n[[scenario]]\nname = \"a\"\n[[scenario.step]]\n\
                 call = { method = \"ping\" }\nthink = \"1s\"\n",
                false,
            ),
            (
                "[target]\nbuiltin = {}\n[[scenario]]\nname = \"a\"\n[[scenario.step]]\n\
                 think = { min = \"1s\", max = \"2s\" }\n",
                true,
            ),
            (
                "[target]\nbuiltin = {}\n[[scenario]]\nname = \"a\"\n[[scenario.step]]\n\
                 think = { mean = \"1s\", max = \"2s\" }\n",
                false,
            ),
            (
                "\"$schema\" = \"../schema/profile.json\"\n[target]\nbuiltin = {}\n",
                true,
            ),
        ] {
            assert_eq!(verdicts(&v, text), (valid, valid), "{text}");
        }
    }

    /// Every key a profile may hold says what it is for (the doc comment of its field),
    /// which editors show on hover and completion.
    #[test]
    fn every_key_has_a_description() {
        fn walk(node: &Value, path: &str, missing: &mut Vec<String>) {
            match node {
                Value::Object(o) => {
                    if let Some(Value::Object(props)) = o.get("properties") {
                        for (key, schema) in props {
                            if schema.get("description").is_none_or(|d| d == "") {
                                missing.push(format!("{path}.{key}"));
                            }
                        }
                    }
                    for (key, child) in o {
                        // An `if` only selects (`method` of an operation): no key of its own.
                        if key != "if" {
                            walk(child, &format!("{path}/{key}"), missing);
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|c| walk(c, path, missing)),
                _ => {}
            }
        }
        let mut missing = Vec::new();
        walk(&value(), "", &mut missing);
        assert!(
            missing.is_empty(),
            "keys without a description: {missing:?}"
        );
    }

    /// Draft 07 ignores every sibling of a `$ref`: none has one (a description sits beside
    /// an `allOf` of the reference).
    #[test]
    fn no_reference_has_siblings() {
        fn walk(node: &Value) {
            match node {
                Value::Object(o) => {
                    assert!(!o.contains_key("$ref") || o.len() == 1, "{node}");
                    o.values().for_each(walk);
                }
                Value::Array(a) => a.iter().for_each(walk),
                _ => {}
            }
        }
        walk(&value());
    }

    /// Every `Duration` field is written as text and has the text's schema: serde's own
    /// schema of a `Duration` (an object of `secs` and `nanos`) is nowhere.
    #[test]
    fn every_duration_is_described_as_text() {
        assert!(
            !text().contains("\"secs\""),
            "a Duration field lacks #[schemars(schema_with = \"values::duration_schema\")]"
        );
    }

    /// TOML has no null: the schema offers none.
    #[test]
    fn no_null_anywhere() {
        let text = text();
        assert!(!text.contains("\"null\""), "a null type is left");
        assert!(!text.contains(": null"), "a null default is left");
    }
}
