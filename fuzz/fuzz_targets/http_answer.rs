//! The HTTP/1.1 answer reader: head parser, body framing (length, chunked, to the close) and
//! body reader, driven through the real connection and exchange by scripted reads. Whatever
//! the bytes, it never panics, never waits on an answer that has ended, never yields without
//! end, never hands on a message over the bound, and ends with exactly one terminal event;
//! and the same bytes read whole or cut at fuzzed points read the same.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpload::transport::read_scripted_answer;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Where the network cuts the answer, as offsets into it.
    cuts: Vec<u16>,
    /// A small bound (64 bytes), so the oversized paths are reached; else 1 MiB.
    small: bool,
    wire: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let max = if input.small { 64 } else { 1 << 20 };
    let whole = read_scripted_answer(vec![input.wire.clone()], max);
    let mut cuts: Vec<usize> = input
        .cuts
        .iter()
        .map(|&c| usize::from(c) % (input.wire.len() + 1))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut reads = Vec::new();
    let mut from = 0;
    for at in cuts.into_iter().chain([input.wire.len()]) {
        reads.push(input.wire[from..at].to_vec());
        from = at;
    }
    assert_eq!(read_scripted_answer(reads, max), whole);
});
