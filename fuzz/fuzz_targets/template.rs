//! The template engine on arbitrary text: compiling never panics, and a compiled template
//! renders without panicking, within a bounded size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpload::load::template::{Ctx, CsvRow, JsonTemplate, Rng, TextTemplate};

fuzz_target!(|text: &str| {
    let header = vec!["a".to_owned(), "b".to_owned()];
    let row = vec!["1".to_owned(), "x\"y".to_owned()];
    let csv = CsvRow { header: &header, row: &row };
    let vars = serde_json::json!({"a": "x\"y", "n": 20, "o": {"k": [1, null]}});
    let vars = vars.as_object();
    let mut rng = Rng::new(7);
    let mut out = Vec::new();
    if let Ok(t) = TextTemplate::new(text) {
        let mut ctx = Ctx { seq: 3, worker: 1, rng: &mut rng, csv: Some(&csv), vars };
        t.render(&mut out, &mut ctx);
        assert!(out.len() <= 64 * text.len() + 64);
    }
    let value = serde_json::Value::String(text.to_owned());
    if let Ok(t) = JsonTemplate::new(&value) {
        out.clear();
        let mut ctx = Ctx { seq: 3, worker: 1, rng: &mut rng, csv: Some(&csv), vars };
        t.render(&mut out, &mut ctx);
    }
});
