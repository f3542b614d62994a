//! Arguments made up from a tool's `inputSchema`, for `tool = "*"` and for the calls `mcpload
//! probe` makes: every required property gets its default, const, first example or enum
//! member, or a plain value of its type. The content of an elicitation accepted with no
//! canned content (SEP-1034) is made the same way, every property's default first. A `$ref`
//! is never followed (nor fetched): its property gets a plain value.

use serde_json::{Map, Value};

/// An arguments object that satisfies the schema's `required` list and property types.
pub fn arguments_for(schema: &Value) -> Value {
    object_for(schema, 0)
}

/// The content of an elicitation accepted with no canned content, for its
/// `requestedSchema`: every property that has a `default` gets it (SEP-1034), then every
/// required property still without a value gets one as [`arguments_for`] makes it.
pub fn elicited_content(schema: &Value) -> Value {
    let mut out = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    for (name, prop) in props.into_iter().flatten() {
        if let Some(d) = prop.get("default") {
            out.insert(name.clone(), d.clone());
        }
    }
    if let Value::Object(made) = object_for(schema, 0) {
        for (name, v) in made {
            out.entry(name).or_insert(v);
        }
    }
    Value::Object(out)
}

fn object_for(schema: &Value, depth: usize) -> Value {
    let mut out = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let prop = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        out.insert(name.to_owned(), value_for(prop, depth + 1));
    }
    Value::Object(out)
}

fn value_for(schema: &Value, depth: usize) -> Value {
    if let Some(v) = schema
        .get("default")
        .or_else(|| schema.get("const"))
        .or_else(|| schema.get("examples").and_then(|e| e.get(0)))
        .or_else(|| schema.get("enum").and_then(|e| e.get(0)))
    {
        return v.clone();
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ => "string",
    };
    let num = |key: &str| schema.get(key).and_then(Value::as_f64);
    match ty {
        "integer" => Value::from(num("minimum").map_or(1, |m| m.ceil() as i64)),
        "number" => Value::from(num("minimum").unwrap_or(1.0)),
        "boolean" => Value::from(true),
        "array" => Value::Array(Vec::new()),
        "object" if depth < 4 => object_for(schema, depth),
        "object" => Value::Object(Map::new()),
        "null" => Value::Null,
        _ => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(1) as usize;
            Value::from("x".repeat(min.clamp(1, 64)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_properties_get_values_of_their_type() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "number"}, "b": {"type": "integer", "minimum": 3},
                "msg": {"type": "string"}, "mode": {"enum": ["fast", "slow"]},
                "opt": {"type": "string"}, "flag": {"type": "boolean", "default": false},
                "d": {"type": "number", "default": 2.5}, "k": {"const": "v"},
                "long": {"type": "string", "minLength": 3},
                "inner": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
            },
            "required": ["a", "b", "msg", "mode", "flag", "d", "k", "long", "inner"]
        });
        assert_eq!(
            arguments_for(&schema),
            json!({"a": 1.0, "b": 3, "msg": "x", "mode": "fast", "flag": false, "d": 2.5,
                   "k": "v", "long": "xxx", "inner": {"x": 1}})
        );
        assert_eq!(arguments_for(&json!({})), json!({}));
    }

    #[test]
    fn elicited_content_takes_every_default_then_fills_the_required() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "nick": {"type": "string"},
                "email": {"type": "string", "minLength": 2},
                "remote": {"$ref": "https://example.invalid/schema.json"}
            },
            "required": ["email", "remote"]
        });
        assert_eq!(
            elicited_content(&schema),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active",
                   "verified": true, "email": "xx", "remote": "x"})
        );
    }
}
