//! A TLS front on loopback for `https://` runs, on a thread of its own: it presents a fresh
//! self-signed certificate for `127.0.0.1` (written as PEM, for the client to trust through
//! `SSL_CERT_FILE`) and relays each connection in plain to the `http://` target behind it. It
//! can play a TLS fault instead, on every connection or on those the load opens: a handshake
//! that never finishes, a certificate nobody trusts, a trusted certificate for another name.

use base64::Engine;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A TLS fault the front plays on a connection.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// The TCP connection is accepted and the client's hello read, and nothing is ever
    /// answered: the handshake stalls until the client gives up.
    Stall,
    /// A self-signed certificate the client has no reason to trust.
    Untrusted,
    /// A certificate the client trusts, issued for `localhost` only.
    OtherName,
}

/// Which connections get the fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Faulted {
    /// Every one, from the first: the run's handshake meets it.
    All,
    /// Those accepted once the handshake's last step (`tools/list`) went through: the
    /// handshake succeeds, the connections the load opens meet the fault.
    Load,
}

/// What the front saw.
#[derive(Default)]
pub(crate) struct Seen {
    /// Connections accepted.
    pub connections: AtomicUsize,
    /// Of those, the ones played the fault.
    pub faulted: AtomicUsize,
    /// DELETE requests relayed.
    pub deletes: AtomicUsize,
    /// A `tools/list` request went through.
    tools_listed: AtomicBool,
}

/// A running front: its port and what it saw.
pub(crate) struct TlsFront {
    pub port: u16,
    pub seen: Arc<Seen>,
}

impl TlsFront {
    /// The `https://` URL of the front.
    pub(crate) fn url(&self) -> String {
        format!("https://127.0.0.1:{}/mcp", self.port)
    }
}

/// A certificate and its acceptor, the certificate also as PEM.
struct Identity {
    acceptor: tokio_rustls::TlsAcceptor,
    pem: String,
}

/// A self-signed certificate for `names`, its subject `subject`: the client picks the
/// certificate it trusts by subject, so each identity needs its own (one sharing the trusted
/// one's would fail as a bad signature, not as an unknown issuer).
fn identity(subject: &str, names: &[&str]) -> Identity {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = rcgen::CertificateParams::new(names).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, subject);
    let signing_key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&signing_key).unwrap();
    let der: CertificateDer<'static> = cert.der().clone();
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
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .unwrap();
    Identity {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        pem,
    }
}

/// Starts a front to `upstream` (an `http://` URL), playing `fault` where `faulted` says.
/// Writes the certificates the client should trust to `trusted_pem`.
pub(crate) fn tls_front(
    upstream: &str,
    trusted_pem: &Path,
    fault: Option<(Fault, Faulted)>,
) -> TlsFront {
    let upstream = upstream
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let good = identity("mcpload test front", &["127.0.0.1"]);
    let untrusted = identity("mcpload test untrusted", &["127.0.0.1"]);
    let other_name = identity("mcpload test other name", &["localhost"]);
    std::fs::write(trusted_pem, format!("{}{}", good.pem, other_name.pem)).unwrap();
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
                let faulted = fault.filter(|(_, which)| {
                    *which == Faulted::All || counts.tools_listed.load(SeqCst)
                });
                if faulted.is_some() {
                    counts.faulted.fetch_add(1, SeqCst);
                }
                let acceptor = match faulted.map(|(f, _)| f) {
                    None => good.acceptor.clone(),
                    Some(Fault::Stall) => {
                        tokio::spawn(stall(tcp));
                        continue;
                    }
                    Some(Fault::Untrusted) => untrusted.acceptor.clone(),
                    Some(Fault::OtherName) => other_name.acceptor.clone(),
                };
                let (upstream, counts) = (upstream.clone(), counts.clone());
                tokio::spawn(async move {
                    // A client that rejects the certificate ends the handshake here.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(plain) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    relay(tls, plain, &counts).await;
                });
            }
        });
    });
    TlsFront { port, seen }
}

/// Reads what the client sends (its hello) and answers nothing, until it gives up.
async fn stall(mut tcp: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = tcp.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

/// Copies both ways until either side ends, noting the DELETEs and `tools/list` on their way
/// up.
async fn relay(tls: tokio_rustls::server::TlsStream<TcpStream>, plain: TcpStream, seen: &Seen) {
    let (mut tls_in, mut tls_out) = tokio::io::split(tls);
    let (mut plain_in, mut plain_out) = plain.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 << 10];
        while let Ok(n) = tls_in.read(&mut buf).await {
            if n == 0 {
                break;
            }
            // A request never starts mid-read here: the client writes one whole at a time.
            let request = &buf[..n];
            if request.starts_with(b"DELETE ") {
                seen.deletes.fetch_add(1, SeqCst);
            }
            if memchr::memmem::find(request, b"\"tools/list\"").is_some() {
                seen.tools_listed.store(true, SeqCst);
            }
            if plain_out.write_all(request).await.is_err() {
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
