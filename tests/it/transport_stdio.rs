//! The stdio transport against plain child processes: garbage lines, a cut-off last line and
//! the child's exit are counted; a child that does not read its stdin shows as time blocked
//! writing.

use mcpload::correlator::{Correlator, Ledger, Sent};
use mcpload::jsonrpc::Id;
use mcpload::metrics::Counters;
use mcpload::transport::{Event, McpHeaders, Outgoing, StdioOptions, StdioTransport, Transport};
use std::time::{Duration, Instant};

fn sent() -> Sent {
    let now = Instant::now();
    Sent {
        due: now,
        written: now,
        deadline: now + Duration::from_secs(30),
    }
}

fn request(n: i64) -> Outgoing {
    let body = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
    Outgoing::single(body.into(), Some(Id::Num(n)), McpHeaders::default())
}

/// Applies events until the transport is down (bounded by 20 s).
async fn until_down(t: &mut StdioTransport, c: &mut Correlator, l: &mut Ledger) {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if l.apply(c, t.next_event().await).down {
                return;
            }
        }
    })
    .await
    .expect("the child's end is reported");
}

#[tokio::test]
async fn garbage_a_cut_off_line_and_the_exit_are_counted() {
    let script = r#"read line; printf 'not json\n\n{"jsonrpc":"2.0","id":1,"result":{}}\r\n{"jsonrpc":"2.0","id":2,"resu'"#;
    let mut opts = StdioOptions::from_command_line("sh -c").unwrap();
    opts.args.push(script.into());
    let mut t = StdioTransport::spawn(&opts).unwrap();
    let (mut c, mut l) = (Correlator::default(), Ledger::default());
    for n in 1..=3 {
        c.register(Id::Num(n), sent()).unwrap();
        t.send(request(n));
    }
    until_down(&mut t, &mut c, &mut l).await;
    let k = &c.stats().counters;
    assert_eq!((k.ok, k.parse_errors, k.missing), (1, 2, 2), "{k:?}");
    assert_eq!(k.requests, k.ended());
    // Later sends fail at once.
    c.register(Id::Num(4), sent()).unwrap();
    t.send(request(4));
    let ev = t.next_event().await;
    assert!(matches!(ev, Event::Failed { .. }), "{ev:?}");
    l.apply(&mut c, ev);
    assert_eq!(c.stats().counters.transport_errors, 1);
    t.close().await;
}

#[tokio::test]
async fn an_over_long_line_is_dropped_and_the_next_one_is_read() {
    let script = r#"read line; head -c 300000 /dev/zero | tr '\0' x; printf '\n{"jsonrpc":"2.0","id":1,"result":{}}\n'"#;
    let mut opts = StdioOptions::from_command_line("sh -c").unwrap();
    opts.args.push(script.into());
    opts.max_line_bytes = 100_000;
    let mut t = StdioTransport::spawn(&opts).unwrap();
    let (mut c, mut l) = (Correlator::default(), Ledger::default());
    c.register(Id::Num(1), sent()).unwrap();
    t.send(request(1));
    until_down(&mut t, &mut c, &mut l).await;
    let k = &c.stats().counters;
    assert_eq!((k.ok, k.parse_errors, k.missing), (1, 1, 0), "{k:?}");
}

#[tokio::test]
async fn a_child_that_does_not_read_blocks_writes_and_the_time_is_counted() {
    let mut t =
        StdioTransport::spawn(&StdioOptions::from_command_line("sleep 1").unwrap()).unwrap();
    let (mut c, mut l) = (Correlator::default(), Ledger::default());
    // 2 MB of requests: far beyond a pipe's buffer.
    let pad = "x".repeat(2000);
    for n in 1..=1000 {
        c.register(Id::Num(n), sent()).unwrap();
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping","params":{{"p":"{pad}"}}}}"#);
        t.send(Outgoing::single(
            body.into(),
            Some(Id::Num(n)),
            McpHeaders::default(),
        ));
    }
    assert_eq!(t.open_exchanges(), 1, "bytes wait to be written");
    until_down(&mut t, &mut c, &mut l).await;
    let mut k = Counters::default();
    t.take_counters(&mut k);
    assert!(k.stdio_write_block_ms >= 300, "{k:?}");
    assert_eq!(c.stats().counters.missing, 1000);
}
