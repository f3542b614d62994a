//! The codec against the official 2026-07-28 examples and against hostile input.

use mcpload::correlator::{Class, Correlator, Sent};
use mcpload::jsonrpc::{
    self, BatchWriter, DecodeError, Decoded, Id, Message, RequestTemplate, Response, ResponseId,
    encode_notification, encode_request,
};
use serde_json::value::RawValue;
use std::path::Path;
use std::time::{Duration, Instant};

const EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp-2026-07-28-examples"
);

fn examples() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for kind in std::fs::read_dir(EXAMPLES).expect("fixtures present") {
        let kind = kind.unwrap();
        for file in std::fs::read_dir(kind.path()).unwrap() {
            let file = file.unwrap();
            let text = std::fs::read_to_string(file.path()).unwrap();
            out.push((
                kind.file_name().to_string_lossy().into_owned(),
                file.file_name().to_string_lossy().into_owned(),
                text,
            ));
        }
    }
    assert!(out.len() >= 88, "all examples copied: {}", out.len());
    out
}

#[test]
fn every_official_jsonrpc_example_classifies_as_its_folder_says() {
    let mut checked = 0;
    for (kind, file, text) in examples() {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        if v.get("jsonrpc").is_none() {
            continue;
        }
        checked += 1;
        let what = format!("{kind}/{file}");
        let Ok(Decoded::Single(m)) = jsonrpc::decode(text.as_bytes()) else {
            panic!("{what} did not decode as one message");
        };
        let mut c = Correlator::default();
        let t0 = Instant::now();
        // Register the example's id, as if we had sent the request it answers.
        if let Some(id) = v.get("id") {
            let id: Id = serde_json::from_value(id.clone()).unwrap();
            let s = Sent {
                due: t0,
                written: t0,
                deadline: t0 + Duration::from_secs(1),
            };
            c.register(id, s).unwrap();
        }
        let class = c.classify(Ok(m), t0);
        let want = if kind.ends_with("Request") || kind.ends_with("Notification") {
            Class::ServerMessage
        } else if kind.ends_with("ResultResponse") {
            Class::Ok
        } else if kind.ends_with("Error") {
            Class::Error
        } else {
            panic!("{what}: a folder kind this test does not know")
        };
        assert_eq!(class, want, "{what}");
        if want == Class::Error {
            let code = v["error"]["code"].as_i64().unwrap();
            assert_eq!(
                c.stats().counters.errors_by_code.get(&code),
                Some(&1),
                "{what}"
            );
        }
    }
    assert!(checked >= 30, "only {checked} JSON-RPC examples");
}

#[test]
fn example_fragments_that_are_not_messages_never_pair() {
    for (kind, file, text) in examples() {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        if v.get("jsonrpc").is_some() {
            continue;
        }
        let mut c = Correlator::default();
        let class = c.ingest(text.as_bytes(), Instant::now());
        assert_eq!(
            class.non_null_responses > 0,
            v.get("id").is_some() && v.get("method").is_none(),
            "{kind}/{file}"
        );
        let k = &c.stats().counters;
        assert_eq!(k.responses, 0, "{kind}/{file} paired nothing");
    }
}

#[test]
fn encoded_requests_round_trip_through_the_decoder() {
    let params =
        RawValue::from_string(r#"{"name":"echo","arguments":{"message":"hi \"there\""}}"#.into())
            .unwrap();
    let t = RequestTemplate::new("tools/call", Some(&params));
    let mut buf = Vec::new();
    for id in [
        Id::Num(0),
        Id::Num(i64::MAX),
        Id::Num(-3),
        Id::from("a\"b\\c\n"),
    ] {
        buf.clear();
        t.stamp(&mut buf, &id);
        let mut direct = Vec::new();
        encode_request(&mut direct, &id, "tools/call", Some(&params));
        assert_eq!(buf, direct);
        let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["method"], "tools/call");
        assert_eq!(v["params"]["arguments"]["message"], "hi \"there\"");
        let back: Id = serde_json::from_value(v["id"].clone()).unwrap();
        assert_eq!(back, id);
        assert!(matches!(
            jsonrpc::decode(&buf),
            Ok(Decoded::Single(Message::ServerMessage { id: Some(ref got), .. })) if *got == id
        ));
    }
}

#[test]
fn a_batch_is_an_array_of_its_members() {
    let mut b = BatchWriter::default();
    assert_eq!(b.finish(), b"[]");
    b.clear();
    encode_request(b.member(), &Id::Num(1), "ping", None);
    encode_notification(b.member(), "notifications/initialized", None);
    let v: serde_json::Value = serde_json::from_slice(b.finish()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[1].get("id"), None);
    assert_eq!(b.len(), 2);
}

fn decode_err(bytes: &[u8]) -> DecodeError {
    match jsonrpc::decode(bytes) {
        Err(e) => e,
        Ok(Decoded::Single(_)) => panic!("decoded {} bytes as a message", bytes.len()),
        Ok(Decoded::Batch(b)) => match jsonrpc::decode_message(b[0]) {
            Err(e) => e,
            Ok(_) => panic!("decoded a member of {} bytes", bytes.len()),
        },
    }
}

#[test]
fn hostile_input_is_an_error_value() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let _ = decode_err(deep.as_bytes());
    let deep_obj = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{}1{}}}"#,
        r#"{"a":"#.repeat(10_000),
        "}".repeat(10_000)
    );
    // Deep nesting inside a result is skipped without recursion: it stays raw, no overflow.
    assert!(matches!(
        jsonrpc::decode(deep_obj.as_bytes()),
        Ok(Decoded::Single(Message::Response(_)))
    ));
    let huge_id = format!(
        r#"{{"jsonrpc":"2.0","id":"{}","result":{{}}}}"#,
        "x".repeat(10 << 20)
    );
    // A string id no request of ours can carry is a response for an unknown id (docs/metrics.md,
    // hostile servers), not unreadable bytes.
    assert!(matches!(
        jsonrpc::decode(huge_id.as_bytes()),
        Ok(Decoded::Single(Message::Response(Response {
            id: ResponseId::Foreign(_),
            ..
        })))
    ));
    let unterminated = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":"{}"#,
        "y".repeat(10 << 20)
    );
    assert!(matches!(
        decode_err(unterminated.as_bytes()),
        DecodeError::NotJson(_)
    ));
    let mut bad_utf8 = br#"{"jsonrpc":"2.0","id":1,"result":""#.to_vec();
    bad_utf8.extend_from_slice(&[0xff, 0xfe, b'"', b'}']);
    assert!(matches!(decode_err(&bad_utf8), DecodeError::NotJson(_)));
    // Numbers none of our ids can be: responses for an unknown id.
    for id in [
        "9223372036854775808",
        "18446744073709551616",
        "1.0",
        "-0.5",
        "-0",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert!(
            matches!(
                jsonrpc::decode(body.as_bytes()),
                Ok(Decoded::Single(Message::Response(Response {
                    id: ResponseId::Foreign(_),
                    ..
                })))
            ),
            "{id}"
        );
    }
    // No id at all (a number past every JSON reader's range, a boolean, an array, an object):
    // unreadable.
    for id in ["1e400", "true", "[1]", "{}"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert!(
            matches!(
                decode_err(body.as_bytes()),
                DecodeError::InvalidId(_) | DecodeError::NotJson(_)
            ),
            "{id}"
        );
    }
    // A member given twice: the envelope is not well formed, whichever copy a reader keeps.
    for twice in [
        r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"error":{"code":1,"message":""}}"#,
    ] {
        let Ok(Decoded::Single(Message::Response(r))) = jsonrpc::decode(twice.as_bytes()) else {
            panic!("{twice}")
        };
        assert!(
            !r.well_formed && r.id == ResponseId::Id(Id::Num(1)),
            "{twice}"
        );
    }
    let Ok(Decoded::Single(Message::Response(r))) =
        jsonrpc::decode(br#"{"jsonrpc":"2.0","id":1,"result":{},"x":1,"x":2}"#)
    else {
        panic!()
    };
    assert!(
        r.well_formed,
        "members classification does not read may repeat"
    );
    assert!(matches!(decode_err(b"[1]"), DecodeError::NotJsonRpc(_)));
    assert!(matches!(decode_err(b""), DecodeError::NotJson(_)));
    assert!(matches!(
        decode_err(br#"{"method":5}"#),
        DecodeError::NotJson(_)
    ));
    // The ids at the edge of the range are fine.
    for id in [i64::MAX, i64::MIN] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert!(jsonrpc::decode(body.as_bytes()).is_ok(), "{id}");
    }
}

#[test]
fn a_large_result_is_kept_raw() {
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "z".repeat(1 << 20)
    );
    let Ok(Decoded::Single(Message::Response(r))) = jsonrpc::decode(big.as_bytes()) else {
        panic!("not a response");
    };
    assert_eq!(r.id, ResponseId::Id(Id::Num(7)));
    assert_eq!(
        r.result.unwrap().get().len(),
        big.len() - r#"{"jsonrpc":"2.0","id":7,"result":}"#.len()
    );
    assert!(Path::new(EXAMPLES).is_dir());
}
