//! Criterion microbenchmarks of the codec: decode and classify a 1 KiB `tools/call` answer
//! (and the same with its `structuredContent` checked against the tool's `outputSchema`),
//! decode a 10-member batch answer, stamp a pre-serialised request.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpload::correlator::{
    AnswerRules, Correlator, OutputSchema, Sent, ToolErrors, ValidateOutput,
};
use mcpload::jsonrpc::{self, Id, RequestTemplate};
use serde_json::value::RawValue;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A `tools/call` result of 1 KiB, the shape MCP servers send.
fn tools_call_response(id: i64, text_len: usize) -> String {
    let text: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(text_len)
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}}}"#
    )
}

/// A `tools/call` result of `len` bytes whose text is mirrored in `structuredContent`.
fn structured_response(id: i64, len: usize) -> String {
    let frame = |text: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}}],"structuredContent":{{"message":"{text}","count":3}},"isError":false}}}}"#
        )
    };
    let text_len = (len - frame("").len()) / 2;
    let text: String = "lorem ipsum ".chars().cycle().take(text_len).collect();
    frame(&text)
}

fn codec(c: &mut Criterion) {
    let one = tools_call_response(7, 1024 - 89);
    assert_eq!(one.len(), 1024);
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Bytes(one.len() as u64));
    let classify = |mut corr: Correlator, answer: &'static str| {
        move |b: &mut criterion::Bencher<'_>| {
            let t0 = Instant::now();
            let sent = Sent {
                due: t0,
                written: t0,
                deadline: t0 + Duration::from_secs(3600),
            };
            b.iter(|| {
                corr.register(Id::Num(7), sent).unwrap();
                black_box(corr.ingest(black_box(answer.as_bytes()), t0));
            });
        }
    };
    let one: &'static str = one.leak();
    g.bench_function(
        "decode_classify_1KiB_tools_call",
        classify(Correlator::default(), one),
    );

    // The same size of answer carrying `structuredContent`, checked against a compiled
    // `outputSchema` (what `--validate-output all` does for every such result).
    let structured: &'static str = structured_response(7, 1024).leak();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"message": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["message", "count"],
    });
    let mut rules = AnswerRules::new(ToolErrors::Error, ValidateOutput::All);
    rules.set_schema(0, Arc::new(OutputSchema::compile(&schema).unwrap()));
    let rules = Arc::new(rules);
    g.bench_function(
        "decode_classify_1KiB_structured_unchecked",
        classify(Correlator::default(), structured),
    );
    g.bench_function(
        "decode_classify_1KiB_structured_validated",
        classify(Correlator::default().with_rules(rules), structured),
    );

    let batch = format!(
        "[{}]",
        (0..10)
            .map(|i| tools_call_response(i, 100))
            .collect::<Vec<_>>()
            .join(",")
    );
    g.throughput(Throughput::Bytes(batch.len() as u64));
    g.bench_function("decode_10_member_batch", |b| {
        b.iter(|| {
            let Ok(jsonrpc::Decoded::Batch(members)) = jsonrpc::decode(black_box(batch.as_bytes()))
            else {
                unreachable!("a batch")
            };
            for m in members {
                black_box(jsonrpc::decode_message(m).is_ok());
            }
        });
    });

    let params =
        RawValue::from_string(r#"{"name":"echo","arguments":{"message":"hi"}}"#.into()).unwrap();
    let template = RequestTemplate::new("tools/call", Some(&params));
    g.throughput(Throughput::Elements(1));
    g.bench_function("stamp_request", |b| {
        let mut buf = Vec::with_capacity(128);
        let mut id = 0;
        b.iter(|| {
            buf.clear();
            id += 1;
            template.stamp(&mut buf, &Id::Num(id));
            black_box(&buf);
        });
    });
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
