//! Criterion microbenchmarks of the codec: decode and classify a 1 KiB `tools/call` answer,
//! decode a 10-member batch answer, stamp a pre-serialised request.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpload::correlator::{Correlator, Sent};
use mcpload::jsonrpc::{self, Id, RequestTemplate};
use serde_json::value::RawValue;
use std::hint::black_box;
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

fn codec(c: &mut Criterion) {
    let one = tools_call_response(7, 1024 - 89);
    assert_eq!(one.len(), 1024);
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Bytes(one.len() as u64));
    g.bench_function("decode_classify_1KiB_tools_call", |b| {
        let mut corr = Correlator::default();
        let t0 = Instant::now();
        let sent = Sent {
            due: t0,
            written: t0,
            deadline: t0 + Duration::from_secs(3600),
        };
        b.iter(|| {
            corr.register(Id::Num(7), sent).unwrap();
            black_box(corr.ingest(black_box(one.as_bytes()), t0));
        });
    });

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
