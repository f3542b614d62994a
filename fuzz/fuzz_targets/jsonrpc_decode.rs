//! The JSON-RPC decoder and classifier on arbitrary bytes: no panic, and every message of a
//! decoded batch classifies once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpload::correlator::Correlator;
use std::time::Instant;

fuzz_target!(|bytes: &[u8]| {
    let _ = mcpload::jsonrpc::decode(bytes);
    // The classifier, through a correlator with nothing pending: whatever the bytes, the
    // pairing identity holds and nothing is paired.
    let mut c = Correlator::new(64);
    c.ingest(bytes, Instant::now());
    let k = &c.stats().counters;
    assert_eq!(k.requests, k.ended());
    assert_eq!(k.ok + k.errors + k.both_result_error + k.invalid_jsonrpc, 0);
});
