//! Profile parsing on arbitrary text: an error value with a place, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpload::profile::Source;

fuzz_target!(|text: &str| {
    let source = Source {
        path: "fuzz.toml".into(),
        text: text.to_owned(),
    };
    if let Err(e) = source.parse() {
        assert!(e.to_string().contains("fuzz.toml"), "{e}");
    }
});
