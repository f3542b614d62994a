//! `mcpload run` over `https://`: the same HTTP/1.1 connections as `http://`, through a TLS
//! front on loopback (a fresh self-signed certificate, trusted through `SSL_CERT_FILE`) before
//! `mcpload serve`. The handshake, the load and each session's DELETE stay within
//! the run's pool.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::serve;
use crate::support::tls::tls_front;
use std::sync::atomic::Ordering::SeqCst;

#[test]
fn an_https_run_keeps_its_handshake_load_and_deletes_within_the_pool() {
    let _share = machine::loading();
    let target = serve(&["--era", "legacy"]);
    let dir = scratch("https-legacy");
    let cert = dir.join("cert.pem");
    let front = tls_front(&target.url, &cert, None);
    let (url, seen) = (front.url(), front.seen);
    let out_dir = dir.join("run");
    let out = bin()
        .env("SSL_CERT_FILE", &cert)
        .args(["run", "--quiet", "--url", &url, "-c", "4", "--workers", "2"])
        .args([
            "-d",
            "1s",
            "--warmup",
            "0s",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = &steps(&out_dir)[0];
    assert_identity(row);
    assert!(num(row, "requests") > 100.0, "{row:?}");
    assert_eq!(num(row, "ok"), num(row, "requests"), "{row:?}");
    // Each worker's legacy session (the handshake's and the second worker's) ends with DELETE.
    assert_eq!(seen.deletes.load(SeqCst), 2);
    let opened = seen.connections.load(SeqCst);
    assert!(
        (2..=4).contains(&opened),
        "{opened} connections for 4 clients"
    );
}
