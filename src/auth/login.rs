//! `mcpload auth login`: the authorization code grant with PKCE, done once by a person (or
//! headlessly against a test server that approves at once). Discovery as the client
//! credentials grant does it (with the 2025-03-26 fallbacks), then the client: a
//! pre-registered id (and secret from the environment), a client ID metadata document URL
//! (CIMD) where the server takes one, else dynamic registration (RFC 7591). The authorization
//! request carries PKCE S256, `state`, `resource` (RFC 8707) and the scope (the challenge's,
//! else `scopes_supported`, with `offline_access` where the server lists it); the answer
//! comes to a loopback listener (RFC 8252) and its `iss` (RFC 9207) must be the issuer,
//! compared as a plain string. No code, verifier or token is ever shown.

use super::net::{Net, form_body, json_of, pairs};
use super::store::{Entry, unix_now};
use super::{Discovered, basic_header, discover, random_text, token_answer};
use crate::transport::auth::Challenge;
use base64::Engine;
use http::{HeaderName, HeaderValue};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How the person approves the authorization request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Open the system browser (`xdg-open`), and print the URL.
    Browser,
    /// Print the URL on stderr (`--no-browser`).
    Print,
    /// Follow the authorization endpoint's redirect without a browser
    /// (`--login-follow-redirects`): only for test servers that approve at once.
    FollowRedirects,
}

/// What a login needs.
#[derive(Clone)]
pub struct Login {
    /// The MCP endpoint.
    pub url: String,
    pub net: Net,
    /// A pre-registered client id, or a CIMD URL.
    pub client_id: Option<String>,
    /// A pre-registered client's secret (from the environment).
    pub client_secret: Option<String>,
    /// The scope to ask for in place of the challenge's (a step-up: the union).
    pub scope: Option<String>,
    pub approval: Approval,
    /// How long to wait for the redirect.
    pub wait: Duration,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's secret never shows; only whether there is one.
        f.debug_struct("Login")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("scope", &self.scope)
            .field("approval", &self.approval)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// Logs in: the entry to store.
    pub async fn run(&self) -> Result<Entry, String> {
        let challenge = self.challenge().await;
        let d = discover(&self.net, &self.url, challenge.as_ref(), true).await?;
        let authorize = d
            .endpoint("authorization_endpoint")
            .ok_or_else(|| {
                format!(
                    "the metadata of {} names no authorization_endpoint",
                    d.issuer
                )
            })?
            .to_owned();
        let token_endpoint = d
            .endpoint("token_endpoint")
            .ok_or_else(|| format!("the metadata of {} names no token_endpoint", d.issuer))?
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("the loopback listener for the redirect: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let redirect_uri = format!("http://127.0.0.1:{port}/callback");
        let client = self.client(&d, &redirect_uri).await?;
        let verifier = random_text(32)?;
        let challenge_s256 =
            b64(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
        let state = random_text(16)?;
        let scope = self.scope(challenge.as_ref(), &d);
        let mut query: Vec<(&str, String)> = vec![
            ("response_type", "code".into()),
            ("client_id", client.id.clone()),
            ("redirect_uri", redirect_uri.clone()),
            ("code_challenge", challenge_s256),
            ("code_challenge_method", "S256".into()),
            ("state", state.clone()),
            ("resource", d.resource.clone()),
        ];
        if let Some(s) = &scope {
            query.push(("scope", s.clone()));
        }
        let sep = if authorize.contains('?') { '&' } else { '?' };
        let auth_url = format!("{authorize}{sep}{}", form_body(&query));
        // Together: the listener (and its port) ends as soon as either fails.
        let ((), answer) = tokio::try_join!(
            self.approve(&auth_url, &redirect_uri),
            wait_for_callback(listener, self.wait, &state)
        )?;
        let code = check_callback(&answer, &state, &d)?;
        let mut form: Vec<(&str, String)> = vec![
            ("grant_type", "authorization_code".into()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", d.resource.clone()),
        ];
        let headers = client.authenticate(&mut form)?;
        let reply = self.net.post_form(&token_endpoint, &form, headers).await?;
        let answer = token_answer(&token_endpoint, &reply)?;
        let now = unix_now();
        Ok(Entry {
            url: self.url.clone(),
            resource: d.resource.clone(),
            client_id: client.id,
            auth_method: client.method.to_owned(),
            client_secret: client.registered_secret,
            issuer: d.issuer.clone(),
            token_endpoint,
            authorization_endpoint: Some(authorize),
            access_token: answer.token.access,
            expires_at: answer
                .token
                .lifetime
                .map(|l| now.saturating_add(l.as_secs())),
            refresh_token: answer.refresh_token,
            scope: answer.scope.or(scope),
            saved_at: now,
        })
    }

    /// The target's challenge to a request without a token, if it gives one.
    async fn challenge(&self) -> Option<Challenge> {
        let ping = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let headers = vec![
            (
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (
                http::header::ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            ),
        ];
        let reply = self
            .net
            .request(&self.url, headers, Some(ping.to_string().into()))
            .await
            .ok()?;
        Challenge::parse(reply.challenge.as_deref()?)
    }

    /// The scope asked for: the given one, the challenge's, else the resource's
    /// `scopes_supported`; with `offline_access` where the authorization server lists it.
    fn scope(&self, challenge: Option<&Challenge>, d: &Discovered) -> Option<String> {
        let mut scope = self
            .scope
            .clone()
            .or_else(|| challenge.and_then(|c| c.scope.clone()))
            .or_else(|| d.resource_scopes.clone());
        if d.lists("scopes_supported", "offline_access")
            && !scope
                .as_deref()
                .is_some_and(|s| s.split(' ').any(|w| w == "offline_access"))
        {
            scope = Some(match scope {
                Some(s) => format!("{s} offline_access"),
                None => "offline_access".into(),
            });
        }
        scope
    }

    /// The client: pre-registered, a CIMD URL the server takes, or registered now.
    async fn client(&self, d: &Discovered, redirect_uri: &str) -> Result<ClientId, String> {
        // RFC 8414: without the list, client_secret_basic is the default.
        let supports = |m: &str| {
            d.metadata
                .get("token_endpoint_auth_methods_supported")
                .is_none()
                && m == "client_secret_basic"
                || d.lists("token_endpoint_auth_methods_supported", m)
        };
        if let Some(id) = &self.client_id {
            let is_url = id.starts_with("https://") || id.starts_with("http://");
            if is_url && d.flag("client_id_metadata_document_supported") {
                return Ok(ClientId::public(id.clone()));
            }
            if !is_url {
                let method = match &self.client_secret {
                    None => "none",
                    Some(_) if supports("client_secret_basic") => "client_secret_basic",
                    Some(_) if supports("client_secret_post") => "client_secret_post",
                    Some(_) => "client_secret_basic",
                };
                return Ok(ClientId {
                    id: id.clone(),
                    method,
                    secret: self.client_secret.clone(),
                    registered_secret: None,
                });
            }
        }
        let Some(register) = d.endpoint("registration_endpoint") else {
            return Err(format!(
                "{} takes no dynamic client registration{}: give a pre-registered client with \
                 --oauth-client-id ID (and --oauth-client-secret-env VAR)",
                d.issuer,
                if d.flag("client_id_metadata_document_supported") {
                    " (it takes a client ID metadata document: --oauth-client-id URL)"
                } else {
                    ""
                }
            ));
        };
        let method = ["none", "client_secret_basic", "client_secret_post"]
            .into_iter()
            .find(|m| supports(m))
            .unwrap_or("client_secret_basic");
        let request = serde_json::json!({
            "client_name": "mcpload",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        });
        let reply = self.net.post_json(register, &request).await?;
        let v = json_of(&reply).filter(|_| matches!(reply.status, 200 | 201));
        let v = v.ok_or_else(|| {
            format!(
                "the registration endpoint {register} refused: HTTP {}{}",
                reply.status,
                super::refusal_code(&reply)
                    .map(|c| format!(" {c}"))
                    .unwrap_or_default()
            )
        })?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let id = text("client_id")
            .ok_or_else(|| format!("the registration endpoint {register} gave no client_id"))?;
        let secret = text("client_secret").filter(|s| !s.is_empty());
        let method = match text("token_endpoint_auth_method").as_deref() {
            Some("client_secret_post") => "client_secret_post",
            Some("client_secret_basic") => "client_secret_basic",
            Some("none") => "none",
            _ if secret.is_none() => "none",
            _ => method,
        };
        Ok(ClientId {
            id,
            method,
            secret: secret.clone(),
            registered_secret: secret,
        })
    }

    /// Has the authorization request approved: by the person, or by following the test
    /// server's redirect to the listener.
    async fn approve(&self, auth_url: &str, redirect_uri: &str) -> Result<(), String> {
        let print = || {
            eprintln!(
                "mcpload: open this URL in a browser to log in (waiting {} s for the redirect):\n{auth_url}",
                self.wait.as_secs()
            );
        };
        match self.approval {
            Approval::Print => print(),
            Approval::Browser => {
                let opened = std::process::Command::new("xdg-open")
                    .arg(auth_url)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .is_ok();
                // The URL too, always: xdg-open may start and show no browser (none set up,
                // no display, a remote shell).
                if opened {
                    eprintln!("mcpload: the browser was opened to log in");
                }
                print();
            }
            Approval::FollowRedirects => {
                let reply = self.net.request(auth_url, Vec::new(), None).await?;
                let location = reply
                    .location
                    .filter(|_| (300..400).contains(&reply.status))
                    .ok_or_else(|| {
                        format!(
                            "--login-follow-redirects: the authorization endpoint answered HTTP \
                             {} without a redirect; it needs a person in a browser (leave out \
                             --login-follow-redirects)",
                            reply.status
                        )
                    })?;
                if !location.starts_with(redirect_uri) {
                    return Err(
                        "--login-follow-redirects: the authorization endpoint redirected \
                         elsewhere than to the loopback listener; it needs a person in a \
                         browser (leave out --login-follow-redirects)"
                            .into(),
                    );
                }
                self.net.request(&location, Vec::new(), None).await?;
            }
        }
        Ok(())
    }
}

/// The client of a login, and how it authenticates at the token endpoint.
struct ClientId {
    id: String,
    method: &'static str,
    secret: Option<String>,
    /// A secret that registration gave (to be stored for refreshes).
    registered_secret: Option<String>,
}

impl ClientId {
    fn public(id: String) -> Self {
        ClientId {
            id,
            method: "none",
            secret: None,
            registered_secret: None,
        }
    }

    /// Adds the client's authentication to a token request's form, or gives its header.
    fn authenticate(
        &self,
        form: &mut Vec<(&'static str, String)>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        authenticate(&self.id, self.method, self.secret.as_deref(), form)
    }
}

/// A client's authentication at the token endpoint by `method`: its id in the form (`none`,
/// `client_secret_post`, with the secret), or an `Authorization: Basic` header.
pub fn authenticate(
    id: &str,
    method: &str,
    secret: Option<&str>,
    form: &mut Vec<(&'static str, String)>,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    match (method, secret) {
        ("client_secret_basic", Some(secret)) => Ok(vec![basic_header(id, secret)?]),
        ("client_secret_post", Some(secret)) => {
            form.push(("client_id", id.to_owned()));
            form.push(("client_secret", secret.to_owned()));
            Ok(Vec::new())
        }
        ("none", _) => {
            form.push(("client_id", id.to_owned()));
            Ok(Vec::new())
        }
        (m, None) => Err(format!(
            "the client authenticates by {m}, and its secret is not at hand: give \
             --oauth-client-secret-env VAR"
        )),
        (m, Some(_)) => Err(format!("{m}: not a way this client authenticates")),
    }
}

/// The code of the redirect's query, once `state` and `iss` are what they must be.
fn check_callback(
    query: &[(String, String)],
    state: &str,
    d: &Discovered,
) -> Result<String, String> {
    let get = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if get("state") != Some(state) {
        return Err("the redirect's state is not the one sent: the answer is refused".into());
    }
    match get("iss") {
        Some(iss) if iss != d.issuer => {
            return Err(format!(
                "the redirect's iss {iss:?} is not the issuer {} (RFC 9207): the answer is \
                 refused",
                d.issuer
            ));
        }
        None if d.flag("authorization_response_iss_parameter_supported") => {
            return Err(format!(
                "the redirect has no iss, though {} says it sends one (RFC 9207): the answer \
                 is refused",
                d.issuer
            ));
        }
        _ => {}
    }
    if let Some(error) = get("error") {
        return Err(format!(
            "the authorization server refused: {}",
            error.chars().take(64).collect::<String>()
        ));
    }
    get("code")
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| "the redirect carries no code".into())
}

/// How long one connection to the loopback listener may take to send its request: an idle
/// one (a browser's preconnect) is dropped after it, never holding up the redirect.
const CALLBACK_READ: Duration = Duration::from_secs(2);

/// The target of a connection's `GET` request line ("" for anything else).
async fn request_target(socket: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 << 10 {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    head.lines()
        .next()
        .and_then(|l| l.strip_prefix("GET "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("")
        .to_owned()
}

/// Waits for the redirect on the loopback listener: the query of its `GET /callback?…`
/// that carries `state`. Other paths get 404 and a callback of another `state` 400 (a
/// stale tab, a forged request): both are answered and the wait goes on.
async fn wait_for_callback(
    listener: tokio::net::TcpListener,
    wait: Duration,
    state: &str,
) -> Result<Vec<(String, String)>, String> {
    let accept = async {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                continue;
            };
            let Ok(target) = tokio::time::timeout(CALLBACK_READ, request_target(&mut socket)).await
            else {
                continue;
            };
            let query = match target.split_once('?') {
                Some(("/callback", q)) => Some(q),
                None if target == "/callback" => Some(""),
                _ => None,
            };
            let Some(query) = query else {
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            };
            let answer = pairs(query);
            if !answer.iter().any(|(k, v)| k == "state" && v == state) {
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let page = "mcpload: the login is done; you can close this page.\n";
            let _ = socket
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                        page.len()
                    )
                    .as_bytes(),
                )
                .await;
            let _ = socket.shutdown().await;
            return answer;
        }
    };
    tokio::time::timeout(wait, accept).await.map_err(|_| {
        format!(
            "no redirect came to the loopback listener within {} s",
            wait.as_secs()
        )
    })
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_is_refused_unless_state_and_iss_are_exact() {
        let d = Discovered {
            resource: "http://h/mcp".into(),
            issuer: "http://as".into(),
            resource_scopes: None,
            metadata: serde_json::json!({"authorization_response_iss_parameter_supported": true}),
        };
        let q = |s: &str| pairs(s);
        assert_eq!(
            check_callback(&q("code=c&state=s&iss=http%3A%2F%2Fas"), "s", &d).unwrap(),
            "c"
        );
        assert!(check_callback(&q("code=c&state=t&iss=http%3A%2F%2Fas"), "s", &d).is_err());
        assert!(check_callback(&q("code=c&state=s&iss=http%3A%2F%2Fas%2F"), "s", &d).is_err());
        assert!(check_callback(&q("code=c&state=s"), "s", &d).is_err());
        let quiet = Discovered {
            metadata: serde_json::json!({}),
            ..d
        };
        assert!(check_callback(&q("code=c&state=s"), "s", &quiet).is_ok());
        assert!(check_callback(&q("code=c&state=s&iss=https%3A%2F%2Fevil"), "s", &quiet).is_err());
        let e = check_callback(&q("code=secretcode&state=x"), "s", &quiet).unwrap_err();
        assert!(!e.contains("secretcode"));
    }

    #[test]
    fn a_login_shown_for_debugging_shows_no_secret() {
        let login = Login {
            url: "http://127.0.0.1:1/mcp".into(),
            net: crate::auth::Net {
                tls: Default::default(),
                connect_timeout: Duration::from_secs(1),
                timeout: Duration::from_secs(1),
            },
            client_id: Some("c".into()),
            client_secret: Some("the-sekrit".into()),
            scope: None,
            approval: Approval::Print,
            wait: Duration::from_secs(1),
        };
        let shown = format!("{login:?}");
        assert!(
            !shown.contains("the-sekrit") && shown.contains("[redacted]"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn the_listener_outwaits_an_idle_connection_and_ignores_what_is_not_its_callback() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let waiting =
            tokio::spawn(
                async move { wait_for_callback(listener, Duration::from_secs(20), "s").await },
            );
        // A browser's preconnect: open, never a byte.
        let _idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let get = |target: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut head = String::new();
            tokio::time::timeout(Duration::from_secs(20), s.read_to_string(&mut head))
                .await
                .expect("answered while an idle connection is open")
                .unwrap();
            head.split(' ').nth(1).unwrap_or("").to_owned()
        };
        assert_eq!(get("/callbackXYZ?state=s&code=c").await, "404");
        assert_eq!(get("/callback?state=other&code=c").await, "400");
        assert_eq!(get("/callback?state=s&code=c").await, "200");
        let q = tokio::time::timeout(Duration::from_secs(20), waiting)
            .await
            .expect("bounded")
            .unwrap()
            .unwrap();
        assert!(q.contains(&("code".to_owned(), "c".to_owned())), "{q:?}");
    }
}
