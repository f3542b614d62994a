//! OAuth 2.1 for a protected MCP server, the way the MCP authorization specification has a
//! client do it: discovery (RFC 9728 protected-resource metadata, from a 401's challenge or
//! the well-known URI; RFC 8414 authorization-server metadata, with the OpenID Connect
//! fallback), then the client credentials grant with the `resource` parameter (RFC 8707),
//! the client authenticated by `client_secret_basic`, `client_secret_post` or
//! `private_key_jwt` (RFC 7523). It is the [`Fetch`] behind the transports' shared
//! [`Credentials`]; its requests go over the transport's own HTTP/1.1 client (so TLS options
//! apply to them too), one fresh connection per request ([`net`]). The authorization code
//! grant is [`login`] (done once, by `mcpload auth login`), its tokens kept in [`store`] and
//! refreshed at load by [`refresh`].

mod jwt;
pub mod login;
pub mod net;
pub mod refresh;
pub mod store;

pub use jwt::JwtKey;
pub use net::Net;

use crate::transport::auth::{Challenge, Credentials, Fetch, FetchWhy, Fetched, Token};
use crate::transport::{Reply, TlsOptions};
use base64::Engine;
use http::{HeaderName, HeaderValue, Uri};
use net::{form_encode, json_of};
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

impl OAuthConfig {
    fn net(&self) -> Net {
        Net {
            tls: self.tls.clone(),
            connect_timeout: self.connect_timeout,
            timeout: self.timeout,
        }
    }
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
        net: cfg.net(),
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

/// What discovery found of a protected resource and its authorization server.
#[derive(Clone, Debug)]
pub struct Discovered {
    /// The resource identifier (RFC 8707): the metadata's `resource`, else the MCP URL.
    pub resource: String,
    /// The issuer identifier, equal to the one the metadata was looked up by.
    pub issuer: String,
    /// The resource's `scopes_supported`, joined, when it lists any.
    pub resource_scopes: Option<String>,
    /// The authorization server's metadata (for a 2025-03-26 server without any, the
    /// default endpoints at its origin).
    pub metadata: Value,
}

impl Discovered {
    /// An endpoint of the metadata (`token_endpoint`, `authorization_endpoint`, …).
    pub fn endpoint(&self, name: &str) -> Option<&str> {
        self.metadata.get(name).and_then(Value::as_str)
    }

    /// Whether a list of the metadata holds `value`.
    pub fn lists(&self, name: &str, value: &str) -> bool {
        self.metadata
            .get(name)
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(value)))
    }

    /// A flag of the metadata (`client_id_metadata_document_supported`, …).
    pub fn flag(&self, name: &str) -> bool {
        self.metadata.get(name).and_then(Value::as_bool) == Some(true)
    }
}

/// RFC 9728 (from the challenge, else the well-known URIs), then RFC 8414 or OpenID Connect
/// discovery of the authorization server, whose metadata's `issuer` must be the one it was
/// looked up by (RFC 8414 section 3.3). A server with no resource metadata is its own
/// authorization server (MCP 2025-03-26); `fallback` then gives it the default endpoints
/// (`/authorize`, `/token`, `/register`) when it has no metadata either.
pub async fn discover(
    net: &Net,
    mcp_url: &str,
    challenge: Option<&Challenge>,
    fallback: bool,
) -> Result<Discovered, String> {
    let mcp: Uri = mcp_url.parse().map_err(|e| format!("url {mcp_url}: {e}"))?;
    let from_challenge = challenge.and_then(|c| c.resource_metadata.clone());
    let candidates = match &from_challenge {
        Some(url) => vec![url.clone()],
        None => well_known(&mcp, "oauth-protected-resource", true),
    };
    let mut tried = Vec::new();
    let mut metadata = None;
    for url in &candidates {
        match net.get_json(url).await {
            Ok(v) => {
                metadata = Some(v);
                break;
            }
            Err(e) => tried.push(format!("{url}: {e}")),
        }
    }
    let legacy = metadata.is_none();
    let (issuer, resource, resource_scopes) = match metadata {
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
                .map_or_else(|| mcp_url.to_owned(), str::to_owned);
            if origin(&resource) != origin(mcp_url) {
                return Err(format!(
                    "the protected-resource metadata is for {resource}, not for {mcp_url}"
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
            origin(mcp_url).unwrap_or_default(),
            mcp_url.to_owned(),
            None,
        ),
    };
    let issuer_uri: Uri = issuer
        .parse()
        .map_err(|e| format!("authorization server {issuer}: {e}"))?;
    let mut as_metadata = None;
    for url in as_metadata_urls(&issuer_uri) {
        match net.get_json(&url).await {
            Ok(v) => {
                as_metadata = Some(v);
                break;
            }
            Err(e) => tried.push(format!("{url}: {e}")),
        }
    }
    let metadata = match as_metadata {
        Some(m) => {
            let named = m.get("issuer").and_then(Value::as_str).unwrap_or_default();
            if named != issuer {
                return Err(format!(
                    "the authorization server metadata of {issuer} names the issuer {named:?}: \
                     not the one it was looked up by (RFC 8414 section 3.3), so it is not \
                     trusted"
                ));
            }
            m
        }
        None if legacy && fallback => serde_json::json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
        }),
        None => {
            return Err(format!(
                "no authorization-server metadata for {issuer}: {}",
                tried.join("; ")
            ));
        }
    };
    Ok(Discovered {
        resource,
        issuer,
        resource_scopes,
        metadata,
    })
}

struct Client {
    cfg: OAuthConfig,
    net: Net,
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
                    fatal: false,
                };
            }
        };
        let (form, headers) = match self.form(&found) {
            Ok(f) => f,
            Err(e) => {
                return Fetched {
                    token: Err(e),
                    token_request: None,
                    fatal: false,
                };
            }
        };
        let started = Instant::now();
        let reply = self
            .net
            .post_form(&found.token_endpoint, &form, headers)
            .await;
        let took = started.elapsed();
        Fetched {
            token: reply.and_then(|r| token_answer(&found.token_endpoint, &r).map(|t| t.token)),
            token_request: Some(took),
            fatal: false,
        }
    }

    /// The token endpoint, the resource and the scope: configured, found before, or
    /// discovered now.
    async fn found(&self, challenge: Option<&Challenge>) -> Result<Found, String> {
        if let Some(f) = self.found.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(f);
        }
        let challenged = || challenge.and_then(|c| c.scope.clone());
        let found = match &self.cfg.token_endpoint {
            Some(endpoint) => Found {
                token_endpoint: endpoint.clone(),
                issuer: None,
                resource: self.cfg.resource.clone(),
                scope: self.cfg.scope.clone().or_else(challenged),
            },
            None => {
                let d = discover(&self.net, &self.cfg.resource, challenge, false).await?;
                Found {
                    token_endpoint: d
                        .endpoint("token_endpoint")
                        .ok_or_else(|| {
                            format!("the metadata of {} names no token_endpoint", d.issuer)
                        })?
                        .to_owned(),
                    issuer: Some(d.issuer.clone()),
                    resource: d.resource,
                    scope: self
                        .cfg
                        .scope
                        .clone()
                        .or_else(challenged)
                        .or(d.resource_scopes),
                }
            }
        };
        *self.found.lock().unwrap_or_else(|e| e.into_inner()) = Some(found.clone());
        Ok(found)
    }

    /// The token request's form and headers.
    #[allow(clippy::type_complexity)]
    fn form(
        &self,
        found: &Found,
    ) -> Result<(Vec<(&'static str, String)>, Vec<(HeaderName, HeaderValue)>), String> {
        let mut form: Vec<(&str, String)> = vec![("grant_type", "client_credentials".into())];
        if let Some(scope) = &found.scope {
            form.push(("scope", scope.clone()));
        }
        form.push(("resource", found.resource.clone()));
        let mut headers = Vec::new();
        let id = &self.cfg.client_id;
        match &self.cfg.auth {
            ClientAuth::Basic(secret) => headers.push(basic_header(id, secret)?),
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
        Ok((form, headers))
    }
}

/// `Authorization: Basic` of a client id and secret (RFC 6749 section 2.3.1: both
/// form-encoded before base64), marked sensitive.
pub fn basic_header(id: &str, secret: &str) -> Result<(HeaderName, HeaderValue), String> {
    let pair = format!("{}:{}", form_encode(id), form_encode(secret));
    let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut v = HeaderValue::from_str(&format!("Basic {b64}"))
        .map_err(|_| "the client id or secret cannot go in a header".to_owned())?;
    v.set_sensitive(true);
    Ok((http::header::AUTHORIZATION, v))
}

/// A token endpoint's answer: the access token, and the refresh token and scope it came with.
pub struct Answer {
    pub token: Token,
    /// A secret, never shown.
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
}

/// The token in a token endpoint's answer, or why there is none (the server's `error` code,
/// never its free text, which could echo what was sent).
pub fn token_answer(endpoint: &str, reply: &Reply) -> Result<Answer, String> {
    let v = json_of(reply);
    if reply.status != 200 {
        let code = refusal_code(reply)
            .map(|c| format!(" {c}"))
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
    let lifetime = lifetime_of(&v);
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    Ok(Answer {
        token: Token {
            access: access.to_owned(),
            lifetime,
        },
        refresh_token: text("refresh_token"),
        scope: text("scope"),
    })
}

/// `n` random bytes from the system, base64url: a PKCE verifier (32 bytes: 43 characters), a
/// state, or (the built-in target's) a code, client or token.
pub fn random_text(n: usize) -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut bytes = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "no randomness from the system".to_owned())?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The longest lifetime a token answer is believed: a longer `expires_in` is this long.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A token answer's `expires_in` (a number or a numeric string), at most
/// [`MAX_TOKEN_LIFETIME`]: a hostile one never overflows a time.
fn lifetime_of(v: &Value) -> Option<Duration> {
    v.get("expires_in")
        .and_then(|e| e.as_f64().or_else(|| e.as_str()?.parse().ok()))
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(MAX_TOKEN_LIFETIME.as_secs_f64())))
}

/// The OAuth `error` code of a refusal (at most 64 characters), if it gave one.
pub fn refusal_code(reply: &Reply) -> Option<String> {
    json_of(reply)?
        .get("error")
        .and_then(Value::as_str)
        .map(|c| c.chars().take(64).collect())
}

/// `scheme://authority` of a URL.
pub fn origin(url: &str) -> Option<String> {
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
    fn a_hostile_expires_in_is_clamped_never_a_panic() {
        let of = |e: Value| lifetime_of(&serde_json::json!({ "expires_in": e }));
        assert_eq!(of(1e30.into()), Some(MAX_TOKEN_LIFETIME));
        assert_eq!(of("1e300".into()), Some(MAX_TOKEN_LIFETIME));
        assert_eq!(of(f64::MAX.into()), Some(MAX_TOKEN_LIFETIME));
        assert_eq!(of(u64::MAX.into()), Some(MAX_TOKEN_LIFETIME));
        assert_eq!(of(60.into()), Some(Duration::from_secs(60)));
        assert_eq!(of("0.5".into()), Some(Duration::from_millis(500)));
        for none in [
            Value::from(0),
            Value::from(-1),
            Value::from("x"),
            Value::Null,
        ] {
            assert_eq!(of(none), None);
        }
        // Ten years on from now is a time an Instant holds.
        assert!(Instant::now().checked_add(MAX_TOKEN_LIFETIME).is_some());
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin("http://127.0.0.1:5/mcp?x"),
            Some("http://127.0.0.1:5".into())
        );
    }
}
