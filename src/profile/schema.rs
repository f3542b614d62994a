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
