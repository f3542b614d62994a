//! `mcpload run` over `https://`: the same HTTP/1.1 connections as `http://`, through a TLS
//! proxy on loopback (a fresh self-signed certificate, trusted through `SSL_CERT_FILE`) in
//! front of `mcpload serve`. The handshake, the load and each session's DELETE stay within
//! the run's pool.

use crate::support::bin;
use crate::support::machine;
use crate::support::run::*;
use crate::support::scratch::scratch;
use crate::support::servers::serve;
use base64::Engine;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// What the proxy saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    deletes: AtomicUsize,
}

/// A TLS proxy to `upstream` (`host:port`) on a thread of its own: its port and what it saw.
/// Writes the certificate it presents to `cert_pem`.
fn tls_proxy(upstream: String, cert_pem: &std::path::Path) -> (u16, Arc<Seen>) {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let issued = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let der = issued.cert.der().clone();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    let pem = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    );
    std::fs::write(cert_pem, pem).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                counts.connections.fetch_add(1, SeqCst);
                let (acceptor, upstream, counts) =
                    (acceptor.clone(), upstream.clone(), counts.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(plain) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    relay(tls, plain, &counts).await;
                });
            }
        });
    });
    (port, seen)
}

/// Copies both ways until either side ends, counting the DELETEs on their way up.
async fn relay(
    tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    plain: tokio::net::TcpStream,
    seen: &Seen,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut tls_in, mut tls_out) = tokio::io::split(tls);
    let (mut plain_in, mut plain_out) = plain.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 << 10];
        while let Ok(n) = tls_in.read(&mut buf).await {
            if n == 0 {
                break;
            }
            // A request never starts mid-read here: the client writes one whole at a time.
            if buf[..n].starts_with(b"DELETE ") {
                seen.deletes.fetch_add(1, SeqCst);
            }
            if plain_out.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = plain_out.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 16 << 10];
        while let Ok(n) = plain_in.read(&mut buf).await {
            if n == 0 || tls_out.write_all(&buf[..n]).await.is_err() {
                break;
            }
            let _ = tls_out.flush().await;
        }
        let _ = tls_out.shutdown().await;
    };
    tokio::join!(up, down);
}

#[test]
fn an_https_run_keeps_its_handshake_load_and_deletes_within_the_pool() {
    let _share = machine::loading();
    let target = serve(&["--era", "legacy"]);
    let dir = scratch("https-legacy");
    let cert = dir.join("cert.pem");
    let upstream = target.url.trim_start_matches("http://").split('/').next();
    let (port, seen) = tls_proxy(upstream.unwrap().to_owned(), &cert);
    let url = format!("https://127.0.0.1:{port}/mcp");
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
