//! Scenario expressions on arbitrary text: parsing and evaluating never panic (deep nesting,
//! huge numbers, division by zero), and a parse error's column lies within the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpload::profile::expr::{Expr, Path, Scope};

fuzz_target!(|text: &str| {
    let vars = serde_json::json!({"n": 20, "s": "done", "big": 1e308, "l": [1, "a", null]});
    let answer = serde_json::json!({"result": {"structuredContent": {"state": "ok", "n": -9223372036854775808i64}, "content": [{"text": "hi"}]}});
    let scope = Scope { vars: vars.as_object().unwrap(), answer: Some(&answer) };
    let columns = text.chars().count() + 1;
    match Expr::parse(text) {
        Ok(e) => {
            let _ = e.eval(&scope);
            let _ = e.holds(&scope);
            let _ = e.var_names();
        }
        Err(err) => assert!((1..=columns).contains(&err.column), "{err}"),
    }
    if let Ok(p) = Path::parse(text) {
        let _ = p.lookup(&scope);
        assert!(Path::parse(&p.to_string()).is_ok(), "{p}");
    }
});
