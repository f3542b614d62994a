//! Where the target is and what every request to it carries: the URL's parts, how a
//! connection is opened (TCP, or rustls with ring and the platform's roots for `https://`,
//! HTTP/1.1 only), and the head each request starts with.

use super::connection::{Connection, Tls};
use crate::protocol::headers;
use crate::transport::auth::Credentials;
use crate::transport::budget::AnswerBudget;
use crate::transport::{McpHeaders, TransportError};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use rustls::pki_types::ServerName;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(super) const SESSION_HEADER: HeaderName = HeaderName::from_static(headers::SESSION_ID);
pub(super) const VERSION_HEADER: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
pub(super) const METHOD_HEADER: HeaderName = HeaderName::from_static(headers::METHOD);
pub(super) const NAME_HEADER: HeaderName = HeaderName::from_static(headers::NAME);
/// Headers written per request, never from the custom headers into the prefix.
const SET_PER_REQUEST: [HeaderName; 3] = [CONTENT_LENGTH, METHOD_HEADER, NAME_HEADER];

/// How long opening a connection (TCP, and TLS for `https://`) may take unless told
/// otherwise: below the default request timeout, so that a target that does not take
/// connections shows as `transport_errors` naming the cause, not as slow answers.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How the HTTP client and its transports are set up.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The most connections a transport has open to the target at once, busy or idle.
    /// Everything it sends goes over them (the load, the handshake, cancel notifications,
    /// a session's re-initialization and DELETE, probes); a request that finds them all busy
    /// waits for the first one free. Size it to the requests in flight, so a steady load
    /// never waits or reconnects.
    pub pool_size: usize,
    /// Headers sent on every request (custom headers, already expanded). Values are marked
    /// sensitive so they never show in debug output.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Largest JSON body or SSE event accepted; a larger one is dropped and counted.
    pub max_message_bytes: usize,
    /// What answers being read may hold at once, shared by every transport given these
    /// options (or a clone of them); at the budget the largest one fails as oversized.
    pub answer_budget: AnswerBudget,
    /// Bound on opening a connection: TCP, and TLS for `https://`. A connect that takes
    /// longer fails its request, naming the part that did not finish.
    pub connect_timeout: Duration,
    /// Longest an exchange may stay open (request, answer and stream); `None`: unbounded.
    pub exchange_timeout: Option<Duration>,
    /// Every HTTP 400 to a request that carried a session id says the session is gone (for
    /// servers known to answer so); otherwise only a 400 whose JSON-RPC error says so does.
    pub session_lost_on_400: bool,
    /// Bearer credentials every request carries (`Authorization`), refreshed as they expire
    /// and when the target answers 401.
    pub auth: Option<Credentials>,
    /// How `https://` servers are trusted, and the client's own certificate.
    pub tls: TlsOptions,
    /// Counts the connections open of every transport given these options (or a clone).
    pub open_connections: super::OpenConnections,
}

/// TLS beyond the platform's roots: a CA file, a client certificate (mutual TLS), or no
/// check at all (`insecure`: anyone on the path can read and change the traffic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM certificates trusted besides the platform's roots.
    pub cacert: Option<PathBuf>,
    /// A PEM certificate chain and its PEM private key, presented to the server.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// No certificate check at all.
    pub insecure: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            pool_size: 64,
            headers: Vec::new(),
            max_message_bytes: 16 << 20,
            answer_budget: AnswerBudget::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            exchange_timeout: None,
            session_lost_on_400: false,
            auth: None,
            tls: TlsOptions::default(),
            open_connections: super::OpenConnections::default(),
        }
    }
}

/// The target of every transport made from it: its URL, how to connect, the headers every
/// request carries. Cloning shares it.
#[derive(Clone)]
pub struct HttpClient {
    target: Arc<Target>,
}

struct Target {
    url: Uri,
    /// The host to connect to (an IPv6 literal without its brackets) and its port.
    host: String,
    port: u16,
    /// `Some` for `https://`.
    tls: Option<Tls>,
    connect_timeout: Duration,
    /// The request target in origin form (`/path?query`).
    path: String,
    /// The `Host` header: the URL's host, and its port when the URL names one.
    host_header: HeaderValue,
    /// `Accept`, `Content-Type` and the custom headers (values marked sensitive).
    base: HeaderMap,
    auth: Option<Credentials>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Custom headers may hold secrets: only their number is shown.
        f.debug_struct("HttpClient")
            .field("url", &self.target.url)
            .field("headers", &self.target.base.len())
            .finish_non_exhaustive()
    }
}

/// rustls with ring: the platform's roots and `cacert`'s, or no check at all (`insecure`);
/// the client certificate, if any. HTTP/1.1 is set by ALPN later.
pub(crate) fn tls_config(o: &TlsOptions) -> Result<rustls::ClientConfig, TransportError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use rustls_platform_verifier::BuilderVerifierExt;
    let invalid = |what: String| TransportError::Invalid(format!("TLS setup: {what}"));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?;
    let read_certs = |path: &PathBuf| -> Result<Vec<CertificateDer<'static>>, TransportError> {
        let certs: Vec<_> = CertificateDer::pem_file_iter(path)
            .and_then(|i| i.collect::<Result<_, _>>())
            .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(invalid(format!("{}: no certificate in it", path.display())));
        }
        Ok(certs)
    };
    let builder = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCheck(provider)))
    } else if let Some(ca) = &o.cacert {
        let extra = read_certs(ca)?;
        let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider)
            .map_err(|e| invalid(format!("roots: {e}")))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
    } else {
        builder
            .with_platform_verifier()
            .map_err(|e| invalid(format!("roots: {e}")))?
    };
    match (&o.client_cert, &o.client_key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert)?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| invalid(format!("{}: {e}", key.display())))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid(format!("client certificate: {e}")))
        }
        _ => Err(invalid(
            "a client certificate needs its key, and a key its certificate".into(),
        )),
    }
}

/// `insecure`: every certificate is taken, only the handshake's signatures are checked.
#[derive(Debug)]
struct NoCheck(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl HttpClient {
    /// The client for `url` (`http://` or `https://`): no proxy (a proxy would be measured
    /// too), Nagle off, certificates checked as `opts.tls` says (the platform's roots by
    /// default).
    pub fn new(url: &Uri, opts: &HttpOptions) -> Result<Self, TransportError> {
        let tls = match url.scheme_str() {
            Some("https") => Some(tls_config(&opts.tls)?),
            _ => None,
        };
        Self::with_tls(url, opts, tls)
    }

    /// The client for `url`, with `tls` for an `https://` one (tests bring their own roots).
    pub(super) fn with_tls(
        url: &Uri,
        opts: &HttpOptions,
        tls: Option<rustls::ClientConfig>,
    ) -> Result<Self, TransportError> {
        let invalid = |why: &str| TransportError::Invalid(format!("url {url}: {why}"));
        let https = match url.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(invalid("use http or https")),
        };
        let bracketed = url
            .host()
            .filter(|h| !h.is_empty())
            .ok_or(invalid("no host"))?;
        let host = bracketed.trim_start_matches('[').trim_end_matches(']');
        let tls = match (https, tls) {
            (false, _) => None,
            (true, None) => return Err(invalid("no TLS setup for https")),
            (true, Some(mut config)) => {
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|e| invalid(&format!("TLS server name: {e}")))?;
                Some(Tls {
                    connector: Arc::new(config).into(),
                    name,
                })
            }
        };
        let host_header = HeaderValue::from_str(&match url.port_u16() {
            Some(port) => format!("{bracketed}:{port}"),
            None => bracketed.to_owned(),
        })
        .map_err(|_| invalid("host is not a valid header value"))?;
        let mut base = HeaderMap::new();
        base.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (k, v) in &opts.headers {
            let mut v = v.clone();
            v.set_sensitive(true);
            base.insert(k.clone(), v);
        }
        Ok(HttpClient {
            target: Arc::new(Target {
                url: url.clone(),
                host: host.to_owned(),
                port: url.port_u16().unwrap_or(if https { 443 } else { 80 }),
                tls,
                connect_timeout: opts.connect_timeout,
                path: url.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
                host_header,
                base,
                auth: opts.auth.clone(),
            }),
        })
    }

    /// The credentials every request carries, if any.
    pub(super) fn auth(&self) -> Option<&Credentials> {
        self.target.auth.as_ref()
    }

    pub fn url(&self) -> &Uri {
        &self.target.url
    }

    /// The same target at another path on its origin (`/path?query`): where the legacy
    /// HTTP+SSE transport's stream says to POST.
    pub(super) fn at_path(&self, path_and_query: &str) -> Result<HttpClient, TransportError> {
        let t = &*self.target;
        let mut parts = t.url.clone().into_parts();
        parts.path_and_query =
            Some(path_and_query.parse().map_err(|e| {
                TransportError::Invalid(format!("endpoint {path_and_query:?}: {e}"))
            })?);
        let url = Uri::from_parts(parts)
            .map_err(|e| TransportError::Invalid(format!("endpoint {path_and_query:?}: {e}")))?;
        Ok(HttpClient {
            target: Arc::new(Target {
                path: path_and_query.to_owned(),
                url,
                host: t.host.clone(),
                port: t.port,
                tls: t.tls.clone(),
                connect_timeout: t.connect_timeout,
                host_header: t.host_header.clone(),
                base: t.base.clone(),
                auth: t.auth.clone(),
            }),
        })
    }

    /// Opens a new connection to the target (TCP, then TLS for `https://`).
    pub(super) fn connect(
        &self,
    ) -> impl Future<Output = Result<Connection, TransportError>> + Send + use<> {
        let target = Arc::clone(&self.target);
        async move {
            let t = &*target;
            Connection::connect(&t.host, t.port, t.tls.as_ref(), t.connect_timeout).await
        }
    }
}

/// The request methods mcpload sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Method {
    Post,
    /// Ends a legacy session.
    Delete,
    /// Resumes an SSE stream (with `Last-Event-ID`).
    Get,
}

impl Method {
    fn verb(self) -> &'static [u8] {
        match self {
            Method::Post => b"POST",
            Method::Delete => b"DELETE",
            Method::Get => b"GET",
        }
    }
}

/// What every request of one transport starts with: the request line, `Host`, the base
/// headers, the protocol version, the session and the token, encoded once (and again when
/// one of them changes), so a request costs no header map and no formatting.
#[derive(Clone)]
pub(super) struct RequestHead {
    /// `POST <path> HTTP/1.1` and the headers up to the per-request ones.
    prefix: Vec<u8>,
    /// Custom `Mcp-Method` / `Mcp-Name` headers, sent when a request carries none of its own.
    custom_method: Option<HeaderValue>,
    custom_name: Option<HeaderValue>,
    /// It carries `Mcp-Session-Id`.
    pub(super) session: bool,
}

impl std::fmt::Debug for RequestHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The encoded headers hold credentials: only their size is shown.
        f.debug_struct("RequestHead")
            .field("bytes", &self.prefix.len())
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl RequestHead {
    pub(super) fn new(
        client: &HttpClient,
        version: Option<&HeaderValue>,
        session: Option<&HeaderValue>,
        authorization: Option<&HeaderValue>,
    ) -> Self {
        let t = &*client.target;
        let mut w = Vec::with_capacity(256);
        w.extend_from_slice(b"POST ");
        w.extend_from_slice(t.path.as_bytes());
        w.extend_from_slice(b" HTTP/1.1\r\n");
        // The headers mcpload sets win over custom headers of the same name.
        let custom = &t.base;
        let ours = [
            (&HOST, Some(&t.host_header)),
            (&VERSION_HEADER, version),
            (&SESSION_HEADER, session),
            (&AUTHORIZATION, authorization),
        ];
        let carries_session = session.or_else(|| custom.get(SESSION_HEADER)).is_some();
        for (name, value) in ours {
            if let Some(v) = value.or_else(|| custom.get(name)) {
                push_header(&mut w, name.as_str(), v.as_bytes());
            }
        }
        for (name, value) in custom {
            if !SET_PER_REQUEST.contains(name) && !ours.iter().any(|(n, _)| *n == name) {
                push_header(&mut w, name.as_str(), value.as_bytes());
            }
        }
        RequestHead {
            prefix: w,
            custom_method: custom.get(METHOD_HEADER).cloned(),
            custom_name: custom.get(NAME_HEADER).cloned(),
            session: carries_session,
        }
    }

    /// Writes a whole request: the prefix, the per-request headers, the body.
    pub(super) fn encode(
        &self,
        method: Method,
        headers: &McpHeaders,
        last_event_id: Option<&HeaderValue>,
        body: &[u8],
        w: &mut Vec<u8>,
    ) {
        // The prefix is a POST's: its first word is the method's.
        w.extend_from_slice(method.verb());
        w.extend_from_slice(&self.prefix[b"POST".len()..]);
        if let Some(v) = last_event_id {
            push_header(w, "last-event-id", v.as_bytes());
        }
        let per_request = [
            (
                &METHOD_HEADER,
                headers.method.as_ref().or(self.custom_method.as_ref()),
            ),
            (
                &NAME_HEADER,
                headers.name.as_ref().or(self.custom_name.as_ref()),
            ),
        ];
        for (name, value) in per_request {
            if let Some(v) = value {
                push_header(w, name.as_str(), v.as_bytes());
            }
        }
        for (name, value) in headers.params.iter().flat_map(|p| p.iter()) {
            push_header(w, name.as_str(), value.as_bytes());
        }
        push_header(
            w,
            "content-length",
            itoa::Buffer::new().format(body.len()).as_bytes(),
        );
        w.extend_from_slice(b"\r\n");
        w.extend_from_slice(body);
    }
}

fn push_header(w: &mut Vec<u8>, name: &str, value: &[u8]) {
    w.extend_from_slice(name.as_bytes());
    w.extend_from_slice(b": ");
    w.extend_from_slice(value);
    w.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    /// Mutual TLS: a server that wants a client certificate issued by its CA gets the one of
    /// `client_cert`/`client_key`, and a client without one is refused; the server itself is
    /// trusted through `cacert`.
    #[tokio::test]
    async fn a_client_certificate_is_presented_and_a_ca_file_trusted() {
        let dir = std::env::temp_dir().join(format!("mcpload-mtls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let server_cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .self_signed(&server_key)
            .unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let client_key = rcgen::KeyPair::generate().unwrap();
        let client_cert = rcgen::CertificateParams::new(vec!["client".to_owned()])
            .unwrap()
            .signed_by(&client_key, &issuer)
            .unwrap();
        let write = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let cacert = write("server.pem", server_cert.pem());
        let cert = write("client.pem", client_cert.pem());
        let key = write("client.key", client_key.serialize_pem());

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_cert.der().clone()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![CertificateDer::from(server_cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Uri = format!("https://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await.unwrap();
                seen.push(match acceptor.accept(tcp).await {
                    Ok(tls) => tls.get_ref().1.peer_certificates().map_or(0, |c| c.len()),
                    Err(_) => 0,
                });
            }
            seen
        });
        for (n, client_cert) in [Some((cert, key)), None].into_iter().enumerate() {
            let opts = HttpOptions {
                tls: TlsOptions {
                    cacert: Some(cacert.clone()),
                    client_key: client_cert.as_ref().map(|c| c.1.clone()),
                    client_cert: client_cert.map(|c| c.0),
                    insecure: false,
                },
                ..HttpOptions::default()
            };
            // The server is trusted through the CA file; a refused client may only learn it
            // later (TLS 1.3), so the server says what it saw.
            let conn = HttpClient::new(&url, &opts).unwrap().connect().await;
            assert!(n == 1 || conn.is_ok(), "{:?}", conn.err());
        }
        assert_eq!(
            accepted.await.unwrap(),
            [1, 0],
            "certificates the server saw"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_client_certificate_without_its_key_is_refused() {
        let o = TlsOptions {
            client_cert: Some("c.pem".into()),
            ..TlsOptions::default()
        };
        let e = tls_config(&o).unwrap_err().to_string();
        assert!(e.contains("needs its key"), "{e}");
    }
}
