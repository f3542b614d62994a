//! OAuth 2.1 for a protected MCP server, the way the MCP authorization specification has a
//! client do it: discovery (RFC 9728 protected-resource metadata, from a 401's challenge or
//! the well-known URI; RFC 8414 authorization-server metadata, with the OpenID Connect
//! fallback), then the client credentials grant with the `resource` parameter (RFC 8707),
//! the client authenticated by `client_secret_basic`, `client_secret_post` or
//! `private_key_jwt` (RFC 7523). It is the [`Fetch`] behind the transports' shared
//! [`Credentials`]; its requests go over the transport's own HTTP/1.1 client (so TLS options
//! apply to them too), one fresh connection per request.

mod jwt;

pub use jwt::JwtKey;

use crate::transport::auth::{Challenge, Credentials, Fetch, FetchWhy, Fetched, Token};
use crate::transport::{HttpClient, HttpOptions, HttpTransport, McpHeaders, Reply, TlsOptions};
use base64::Engine;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Uri};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the client proves itself to the token endpoint.
#[derive(Clone)]
pub enum ClientAuth {
    /// `client_secret_basic`: the secret in an `Authorization: Basic` header.
    Basic(String),
    /// `client_secret_post`: the secret in the form.
    Post(String),
    /// `private_key_jwt`: an assertion signed with this key.
    PrivateKeyJwt(Arc<JwtKey>),
}

impl ClientAuth {
    /// Its name in authorization-server metadata.
    pub fn name(&self) -> &'static str {
        match self {
            ClientAuth::Basic(_) => "client_secret_basic",
            ClientAuth::Post(_) => "client_secret_post",
            ClientAuth::PrivateKeyJwt(_) => "private_key_jwt",
        }
    }
}

/// The `aud` of a `private_key_jwt` assertion.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum JwtAudience {
    /// The authorization server's issuer identifier, from its metadata (SEP-1046, RFC
    /// 7523bis).
    #[default]
    Issuer,
    /// The token endpoint's URL, for servers that still want it.
    TokenEndpoint,
}

impl JwtAudience {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "issuer" => Ok(JwtAudience::Issuer),
            "token_endpoint" => Ok(JwtAudience::TokenEndpoint),
            _ => Err(format!("{s:?}: expected issuer or token_endpoint")),
        }
    }
}

/// The client credentials grant, and where to use it.
#[derive(Clone)]
pub struct OAuthConfig {
    pub client_id: String,
    pub auth: ClientAuth,
    /// The scope asked for; default: the challenge's, else the resource's `scopes_supported`.
    pub scope: Option<String>,
    /// The token endpoint; without it, it is discovered.
    pub token_endpoint: Option<String>,
    /// `private_key_jwt`: what the assertion's `aud` names.
    pub jwt_audience: JwtAudience,
    /// The MCP endpoint's URL: the resource, unless its metadata names it otherwise.
    pub resource: String,
    pub tls: TlsOptions,
    pub connect_timeout: Duration,
    /// Bound on each request a fetch makes.
    pub timeout: Duration,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret and the key never show.
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field("auth", &self.auth.name())
            .field("scope", &self.scope)
            .field("token_endpoint", &self.token_endpoint)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// Credentials whose tokens are fetched with `cfg`: before the first request when the token
/// endpoint is configured ([`Credentials::ready`]), else once the target answers 401
/// (discovery from its challenge); `per_user`: one token per virtual user, each user's first
/// fetched when it first sends (discovery done once, by user 0's).
pub fn credentials(cfg: OAuthConfig, per_user: bool) -> Credentials {
    let eager = cfg.token_endpoint.is_some();
    let client = Arc::new(Client {
        found: Mutex::new(None),
        cfg,
    });
    let fetch: Fetch = Arc::new(move |why| {
        let client = Arc::clone(&client);
        Box::pin(async move { client.fetch(why).await })
    });
    if per_user {
        Credentials::fetched_per_user(fetch, eager)
    } else {
        Credentials::fetched(fetch, eager)
    }
}

/// What discovery found (or the configuration said).
#[derive(Clone, Debug)]
struct Found {
    token_endpoint: String,
    /// The authorization server's issuer identifier, when its metadata was read.
    issuer: Option<String>,
    resource: String,
    scope: Option<String>,
}

struct Client {
    cfg: OAuthConfig,
    found: Mutex<Option<Found>>,
}

impl Client {
    async fn fetch(&self, why: FetchWhy) -> Fetched {
        let found = match self.found(why.challenge.as_ref()).await {
            Ok(f) => f,
            Err(e) => {
                return Fetched {
                    token: Err(e),
                    token_request: None,
                };
            }
        };
        let (form, headers) = match self.form(&found) {
            Ok(f) => f,
            Err(e) => {
                return Fetched {
                    token: Err(e),
                    token_request: None,
                };
            }
        };
        let started = Instant::now();
        let reply = self
            .request(&found.token_endpoint, headers, Some(form))
            .await;
        let took = started.elapsed();
        Fetched {
            token: reply.and_then(|r| token_answer(&found.token_endpoint, &r)),
            token_request: Some(took),
        }
    }

    /// The token endpoint, the resource and the scope: configured, found before, or
    /// discovered now.
    async fn found(&self, challenge: Option<&Challenge>) -> Result<Found, String> {
        if let Some(f) = self.found.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(f);
        }
        let found = match &self.cfg.token_endpoint {
            Some(endpoint) => Found {
                token_endpoint: endpoint.clone(),
                issuer: None,
                resource: self.cfg.resource.clone(),
                scope: self
                    .cfg
                    .scope
                    .clone()
                    .or_else(|| challenge.and_then(|c| c.scope.clone())),
            },
            None => self.discover(challenge).await?,
        };
        *self.found.lock().unwrap_or_else(|e| e.into_inner()) = Some(found.clone());
        Ok(found)
    }

    /// RFC 9728, then RFC 8414 or OpenID Connect discovery.
    async fn discover(&self, challenge: Option<&Challenge>) -> Result<Found, String> {
        let mcp: Uri = self
            .cfg
            .resource
            .parse()
            .map_err(|e| format!("url {}: {e}", self.cfg.resource))?;
        let from_challenge = challenge.and_then(|c| c.resource_metadata.clone());
        let candidates = match &from_challenge {
            Some(url) => vec![url.clone()],
            None => well_known(&mcp, "oauth-protected-resource", true),
        };
        let mut tried = Vec::new();
        let mut metadata = None;
        for url in &candidates {
            match self.get_json(url).await {
                Ok(v) => {
                    metadata = Some(v);
                    break;
                }
                Err(e) => tried.push(format!("{url}: {e}")),
            }
        }
        let (issuer, resource, scopes) = match metadata {
            Some(m) => {
                let issuer = m
                    .get("authorization_servers")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find_map(Value::as_str))
                    .ok_or("the protected-resource metadata names no authorization_servers")?
                    .to_owned();
                let resource = m
                    .get("resource")
                    .and_then(Value::as_str)
                    .map_or_else(|| self.cfg.resource.clone(), str::to_owned);
                if origin(&resource) != origin(&self.cfg.resource) {
                    return Err(format!(
                        "the protected-resource metadata is for {resource}, not for {}",
                        self.cfg.resource
                    ));
                }
                let scopes = m
                    .get("scopes_supported")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" ")
                    });
                (issuer, resource, scopes.filter(|s| !s.is_empty()))
            }
            // With a challenge that names its metadata, that metadata must be there; without
            // any, the server's own origin is its authorization server (MCP 2025-03-26).
            None if from_challenge.is_some() => {
                return Err(format!(
                    "no protected-resource metadata: {}",
                    tried.join("; ")
                ));
            }
            None => (
                origin(&self.cfg.resource).unwrap_or_default(),
                self.cfg.resource.clone(),
                None,
            ),
        };
        let issuer_uri: Uri = issuer
            .parse()
            .map_err(|e| format!("authorization server {issuer}: {e}"))?;
        let mut as_metadata = None;
        for url in as_metadata_urls(&issuer_uri) {
            match self.get_json(&url).await {
                Ok(v) => {
                    as_metadata = Some(v);
                    break;
                }
                Err(e) => tried.push(format!("{url}: {e}")),
            }
        }
        let as_metadata = as_metadata.ok_or_else(|| {
            format!(
                "no authorization-server metadata for {issuer}: {}",
                tried.join("; ")
            )
        })?;
        let token_endpoint = as_metadata
            .get("token_endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the metadata of {issuer} names no token_endpoint"))?
            .to_owned();
        let issuer = as_metadata
            .get("issuer")
            .and_then(Value::as_str)
            .map_or(issuer, str::to_owned);
        Ok(Found {
            token_endpoint,
            issuer: Some(issuer),
            resource,
            scope: self
                .cfg
                .scope
                .clone()
                .or_else(|| challenge.and_then(|c| c.scope.clone()))
                .or(scopes),
        })
    }

    /// The token request's form and headers.
    #[allow(clippy::type_complexity)]
    fn form(&self, found: &Found) -> Result<(Bytes, Vec<(HeaderName, HeaderValue)>), String> {
        let mut form: Vec<(&str, String)> = vec![("grant_type", "client_credentials".into())];
        if let Some(scope) = &found.scope {
            form.push(("scope", scope.clone()));
        }
        form.push(("resource", found.resource.clone()));
        let mut headers = vec![(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        )];
        let id = &self.cfg.client_id;
        match &self.cfg.auth {
            ClientAuth::Basic(secret) => {
                // RFC 6749 section 2.3.1: both form-encoded before base64.
                let pair = format!("{}:{}", form_encode(id), form_encode(secret));
                let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
                let mut v = HeaderValue::from_str(&format!("Basic {b64}"))
                    .map_err(|_| "the client id or secret cannot go in a header".to_owned())?;
                v.set_sensitive(true);
                headers.push((http::header::AUTHORIZATION, v));
            }
            ClientAuth::Post(secret) => {
                form.push(("client_id", id.clone()));
                form.push(("client_secret", secret.clone()));
            }
            ClientAuth::PrivateKeyJwt(key) => {
                form.push(("client_id", id.clone()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
                ));
                let audience = match (self.cfg.jwt_audience, &found.issuer) {
                    (JwtAudience::Issuer, Some(issuer)) => issuer,
                    (JwtAudience::Issuer, None) => {
                        return Err("private_key_jwt: the assertion's audience is the \
                                    authorization server's issuer, which only its metadata \
                                    names: leave out the token endpoint (it is discovered), \
                                    or set jwt_audience = \"token_endpoint\""
                            .into());
                    }
                    (JwtAudience::TokenEndpoint, _) => &found.token_endpoint,
                };
                form.push(("client_assertion", key.assertion(id, audience)?));
            }
        }
        let body: Vec<String> = form
            .iter()
            .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
            .collect();
        Ok((Bytes::from(body.join("&")), headers))
    }

    /// A JSON document (metadata), by GET.
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let reply = self.request(url, Vec::new(), None).await?;
        if reply.status != 200 {
            return Err(format!("HTTP {}", reply.status));
        }
        json_of(&reply).ok_or_else(|| "no JSON document".to_owned())
    }

    /// One request on a fresh connection: a GET, or a POST of `form`.
    async fn request(
        &self,
        url: &str,
        mut headers: Vec<(HeaderName, HeaderValue)>,
        form: Option<Bytes>,
    ) -> Result<Reply, String> {
        let uri: Uri = url.parse().map_err(|e| format!("url {url}: {e}"))?;
        headers.push((
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        ));
        let opts = HttpOptions {
            pool_size: 1,
            headers,
            connect_timeout: self.cfg.connect_timeout,
            tls: self.cfg.tls.clone(),
            ..HttpOptions::default()
        };
        let client = HttpClient::new(&uri, &opts).map_err(|e| e.to_string())?;
        let mut t = HttpTransport::new(client, &opts);
        let reply = match form {
            Some(body) => {
                t.post_once(body, &McpHeaders::default(), self.cfg.timeout)
                    .await
            }
            None => t.get_once(self.cfg.timeout).await,
        };
        reply.map_err(|e| format!("{url}: {e}"))
    }
}

/// The token in a token endpoint's answer, or why there is none (the server's `error` code,
/// never its free text, which could echo what was sent).
fn token_answer(endpoint: &str, reply: &Reply) -> Result<Token, String> {
    let v = json_of(reply);
    if reply.status != 200 {
        let code = v
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(Value::as_str)
            .map(|c| format!(" {}", c.chars().take(64).collect::<String>()))
            .unwrap_or_default();
        return Err(format!(
            "the token endpoint {endpoint} refused the client: HTTP {}{code}",
            reply.status
        ));
    }
    let v = v.ok_or_else(|| format!("the token endpoint {endpoint} answered no JSON"))?;
    let access = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("the token endpoint {endpoint} answered no access_token"))?;
    if let Some(kind) = v.get("token_type").and_then(Value::as_str)
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(format!(
            "the token endpoint {endpoint} gave a {kind} token, not a Bearer one"
        ));
    }
    let lifetime = v
        .get("expires_in")
        .and_then(|e| e.as_f64().or_else(|| e.as_str()?.parse().ok()))
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64);
    Ok(Token {
        access: access.to_owned(),
        lifetime,
    })
}

fn json_of(reply: &Reply) -> Option<Value> {
    reply
        .messages
        .first()
        .and_then(|(_, b)| serde_json::from_slice(b).ok())
}

/// `scheme://authority` of a URL.
fn origin(url: &str) -> Option<String> {
    let u: Uri = url.parse().ok()?;
    Some(format!("{}://{}", u.scheme_str()?, u.authority()?))
}

/// The well-known URIs of `name` for `url`: with its path inserted after the well-known
/// segment (RFC 8615 as RFC 9728 and RFC 8414 use it), then at the root (`root_too`).
fn well_known(url: &Uri, name: &str, root_too: bool) -> Vec<String> {
    let base = format!(
        "{}://{}",
        url.scheme_str().unwrap_or("http"),
        url.authority().map_or("", |a| a.as_str())
    );
    let path = url.path().trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!("{base}/.well-known/{name}{path}"));
    }
    if path.is_empty() || root_too {
        out.push(format!("{base}/.well-known/{name}"));
    }
    out
}

/// Where an authorization server's metadata may be, in the order the MCP specification
/// tries them: RFC 8414, then OpenID Connect with the path inserted, then appended.
fn as_metadata_urls(issuer: &Uri) -> Vec<String> {
    let mut out = well_known(issuer, "oauth-authorization-server", false);
    out.extend(well_known(issuer, "openid-configuration", false));
    let path = issuer.path().trim_end_matches('/');
    if !path.is_empty() {
        out.push(format!(
            "{}://{}{path}/.well-known/openid-configuration",
            issuer.scheme_str().unwrap_or("http"),
            issuer.authority().map_or("", |a| a.as_str())
        ));
    }
    out
}

/// `application/x-www-form-urlencoded` of one name or value.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_the_specifications_say() {
        let mcp: Uri = "http://h:1/mcp".parse().unwrap();
        assert_eq!(
            well_known(&mcp, "oauth-protected-resource", true),
            [
                "http://h:1/.well-known/oauth-protected-resource/mcp",
                "http://h:1/.well-known/oauth-protected-resource"
            ]
        );
        let root: Uri = "https://as.example".parse().unwrap();
        assert_eq!(
            as_metadata_urls(&root),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        let tenant: Uri = "https://as.example/tenant1".parse().unwrap();
        assert_eq!(
            as_metadata_urls(&tenant),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn form_values_are_encoded() {
        assert_eq!(form_encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
        assert_eq!(
            origin("http://127.0.0.1:5/mcp?x"),
            Some("http://127.0.0.1:5".into())
        );
    }
}
