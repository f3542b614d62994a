//! `serve --auth`: the target as an OAuth 2.1 protected resource and its own authorization
//! server on the same port. Every MCP request needs a bearer token: a missing, unknown,
//! expired or revoked one gets 401 with a `WWW-Authenticate` challenge naming the resource
//! metadata (RFC 9728), one without the scope gets 403 `insufficient_scope`. The
//! authorization server publishes its metadata (RFC 8414, or OpenID Connect discovery
//! only) and hands out short-lived tokens for the client credentials grant, the client
//! authenticated by `client_secret_basic`, `client_secret_post` or `private_key_jwt` (RFC
//! 7523); `/introspect` (RFC 7662) tells a token's state. Tokens can be revoked at set times
//! (`auth_revoke_at`) or by a loopback-only `POST /auth/revoke`. Everything is counted for
//! `/stats`. With `auth_code`, the authorization code grant too (`auth_code.rs`).
//!
//! Tokens are checked without a lock: a token carries its number, issue and expiry times and
//! scope level (none, the required scope, and the step-up scope too), sealed with a keyed hash of this target's own; a revocation revokes every token
//! issued before it, or with `token_number=N` in the admin call's form, only the token
//! numbered N (the tokens issued are numbered from 0; checks take a lock only once one
//! token alone was revoked).

use super::auth_code as code;
use super::config::ConfigError;
use super::config::{AuthMetadata, ServeConfig};
use super::stats::AuthCounts;
use crate::auth::net::{form_decode, pairs};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::time::Instant;

/// A scope the authorization server grants besides the required one: a token asked for it
/// alone is refused 403 by the resource.
pub(crate) const OTHER_SCOPE: &str = "other";
/// Largest form a token request may carry.
const MAX_FORM: usize = 64 << 10;
/// What every token starts with (tests look for it where no token may be).
pub const TOKEN_PREFIX: &str = "mcpl_at_";

#[derive(Default)]
struct Counters {
    token_requests: AtomicU64,
    tokens_issued: AtomicU64,
    refused_invalid_client: AtomicU64,
    refused_invalid_request: AtomicU64,
    refused_unsupported_grant_type: AtomicU64,
    refused_invalid_scope: AtomicU64,
    refused_invalid_target: AtomicU64,
    refused_invalid_grant: AtomicU64,
    token_in_flight: AtomicU64,
    token_in_flight_max: AtomicU64,
    missing: AtomicU64,
    invalid: AtomicU64,
    expired: AtomicU64,
    revoked: AtomicU64,
    forbidden: AtomicU64,
    authorized: AtomicU64,
    admin_revocations: AtomicU64,
    metadata_served: AtomicU64,
    introspections: AtomicU64,
}

/// How the client authenticated at the token endpoint.
enum ClientProof {
    Secret { id: String, secret: String },
    Assertion { id: Option<String>, jwt: String },
}

/// The protected resource and its authorization server.
pub(crate) struct AuthServer {
    pub(super) client_id: String,
    pub(super) secret: Option<String>,
    key: Option<(jsonwebtoken::DecodingKey, jsonwebtoken::Algorithm)>,
    /// The `aud` an assertion must name is the token endpoint's URL, not the issuer.
    aud_token_endpoint: bool,
    scope: String,
    resources: Vec<String>,
    pub(super) lifetime_ms: u64,
    metadata: AuthMetadata,
    delay: Duration,
    revoke_at_ms: Vec<u64>,
    /// Tokens issued before this (ms since start) are revoked (`POST /auth/revoke`).
    revoked_before_ms: AtomicU64,
    /// Tokens revoked one by one, by number (`POST /auth/revoke` with `token_number`), and
    /// whether there are any.
    revoked_numbers: std::sync::Mutex<Vec<u64>>,
    any_revoked_number: std::sync::atomic::AtomicBool,
    seal: std::collections::hash_map::RandomState,
    started: Instant,
    seq: AtomicU64,
    n: Counters,
    /// `auth_code`: the authorization code grant and its clients.
    code: Option<code::CodeGrant>,
}

/// The scope level of a token that `/mcp` let through (a request extension): 2 when it
/// holds the step-up scope too.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Granted(u8);

/// Why a token is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    Missing,
    Invalid,
    Expired,
    Revoked,
    Scope,
}

impl AuthServer {
    pub(crate) fn new(cfg: &ServeConfig) -> Result<Self, ConfigError> {
        let invalid = |m: String| ConfigError::Invalid(format!("auth: {m}"));
        let secret = match std::env::var(&cfg.auth_client_secret_env) {
            Ok(s) if !s.is_empty() => Some(s),
            _ => None,
        };
        let key = match &cfg.auth_client_key {
            None => None,
            Some(path) => {
                let pem =
                    std::fs::read(path).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
                use jsonwebtoken::{Algorithm, DecodingKey};
                Some(if let Ok(k) = DecodingKey::from_rsa_pem(&pem) {
                    (k, Algorithm::RS256)
                } else if let Ok(k) = DecodingKey::from_ec_pem(&pem) {
                    (k, Algorithm::ES256)
                } else {
                    return Err(invalid(format!(
                        "{}: no RSA or EC public key in PEM",
                        path.display()
                    )));
                })
            }
        };
        if secret.is_none() && key.is_none() && !cfg.auth_code {
            return Err(invalid(format!(
                "the client secret comes from the environment variable {} (or give \
                 auth_client_key for private_key_jwt): it is not set",
                cfg.auth_client_secret_env
            )));
        }
        if cfg.auth_token_lifetime_s == 0 {
            return Err(invalid("auth_token_lifetime_s must be 1 or more".into()));
        }
        if cfg.auth_scope.is_empty()
            || cfg.auth_scope.contains(' ')
            || cfg.auth_scope == OTHER_SCOPE
        {
            return Err(invalid(format!(
                "auth_scope {:?}: one word, not {OTHER_SCOPE:?}",
                cfg.auth_scope
            )));
        }
        if let Some(up) = &cfg.auth_step_up_scope
            && (up.is_empty() || up.contains(' ') || *up == cfg.auth_scope || up == OTHER_SCOPE)
        {
            return Err(invalid(format!(
                "auth_step_up_scope {up:?}: one word, neither auth_scope nor {OTHER_SCOPE:?}"
            )));
        }
        if cfg.auth_step_up_scope.is_some() && !cfg.auth_code {
            return Err(invalid("auth_step_up_scope needs auth_code".into()));
        }
        let mut revoke_at_ms = Vec::new();
        for s in &cfg.auth_revoke_at {
            if !(s.is_finite() && *s >= 0.0) {
                return Err(invalid(format!("auth_revoke_at {s}: seconds, 0 or more")));
            }
            revoke_at_ms.push((s * 1000.0) as u64);
        }
        Ok(AuthServer {
            client_id: cfg.auth_client_id.clone(),
            secret,
            key,
            aud_token_endpoint: cfg.auth_jwt_aud_token_endpoint,
            scope: cfg.auth_scope.clone(),
            resources: cfg.auth_resources.clone(),
            lifetime_ms: cfg.auth_token_lifetime_s.saturating_mul(1000),
            metadata: cfg.auth_metadata,
            delay: Duration::from_millis(cfg.auth_token_delay_ms),
            revoke_at_ms,
            revoked_before_ms: AtomicU64::new(0),
            revoked_numbers: Default::default(),
            any_revoked_number: Default::default(),
            seal: std::collections::hash_map::RandomState::new(),
            started: Instant::now(),
            seq: AtomicU64::new(0),
            n: Counters::default(),
            code: cfg.auth_code.then(|| {
                code::CodeGrant::new(cfg.auth_step_up_scope.clone(), cfg.auth_code_confidential)
            }),
        })
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The counts for `/stats`.
    pub(crate) fn counts(&self) -> AuthCounts {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let n = &self.n;
        let refused = [
            ("invalid_client", &n.refused_invalid_client),
            ("invalid_request", &n.refused_invalid_request),
            ("unsupported_grant_type", &n.refused_unsupported_grant_type),
            ("invalid_scope", &n.refused_invalid_scope),
            ("invalid_target", &n.refused_invalid_target),
            ("invalid_grant", &n.refused_invalid_grant),
        ];
        let now = self.now_ms();
        AuthCounts {
            token_requests: g(&n.token_requests),
            tokens_issued: g(&n.tokens_issued),
            token_refused: refused
                .iter()
                .filter(|(_, a)| g(a) > 0)
                .map(|(k, a)| ((*k).to_owned(), g(a)))
                .collect(),
            token_requests_in_flight_max: g(&n.token_in_flight_max),
            unauthorized: g(&n.missing) + g(&n.invalid) + g(&n.expired) + g(&n.revoked),
            unauthorized_missing: g(&n.missing),
            unauthorized_invalid: g(&n.invalid),
            unauthorized_expired: g(&n.expired),
            unauthorized_revoked: g(&n.revoked),
            forbidden: g(&n.forbidden),
            authorized: g(&n.authorized),
            revocations: self.revoke_at_ms.iter().filter(|t| **t <= now).count() as u64
                + g(&n.admin_revocations),
            metadata_served: g(&n.metadata_served),
            introspections: g(&n.introspections),
            code: self.code.as_ref().map(code::CodeGrant::counts),
        }
    }

    fn seal(&self, seq: u64, issued: u64, expires: u64, level: u8) -> u64 {
        self.seal.hash_one((seq, issued, expires, level))
    }

    /// A token of scope `level`: 0 without the required scope, 1 with it, 2 with the step-up
    /// scope too.
    pub(super) fn issue(&self, level: u8) -> String {
        let seq = self.seq.fetch_add(1, Relaxed);
        let issued = self.now_ms();
        let expires = issued + self.lifetime_ms;
        let seal = self.seal(seq, issued, expires, level);
        format!("{TOKEN_PREFIX}{seq:x}.{issued:x}.{expires:x}.{level}.{seal:016x}")
    }

    /// The scope level of a granted scope (see [`AuthServer::issue`]).
    pub(super) fn level(&self, scope: &str, step_up: Option<&str>) -> u8 {
        let has = |w: &str| scope.split(' ').any(|s| s == w);
        match (has(&self.scope), step_up) {
            (false, _) => 0,
            (true, Some(up)) if has(up) => 2,
            (true, _) => 1,
        }
    }

    /// The scope granted for `asked` (default: the required one), or `invalid_scope`.
    pub(super) fn granted_scope(
        &self,
        asked: Option<String>,
        step_up: Option<&str>,
    ) -> Result<String, &'static str> {
        let asked = asked.unwrap_or_else(|| self.scope.clone());
        let scopes: Vec<&str> = asked.split_whitespace().collect();
        let known = |w: &str| {
            w == self.scope
                || w == OTHER_SCOPE
                || step_up == Some(w)
                || (self.code.is_some() && w == "offline_access")
        };
        if scopes.is_empty() || !scopes.iter().all(|w| known(w)) {
            return Err("invalid_scope");
        }
        Ok(scopes.join(" "))
    }

    /// Whether tokens are issued for `resource` (RFC 8707): this target's `/mcp`, or one of
    /// `auth_resources`.
    pub(super) fn resource_ok(&self, resource: &str, base: &str) -> bool {
        resource.trim_end_matches('/') == format!("{base}/mcp")
            || self.resources.iter().any(|r| r == "*" || r == resource)
    }

    /// The state of a token: its scope level when it grants the required scope now.
    fn check(&self, token: &str) -> Result<u8, Refusal> {
        let parts: Vec<&str> = token
            .strip_prefix(TOKEN_PREFIX)
            .ok_or(Refusal::Invalid)?
            .split('.')
            .collect();
        let [seq, issued, expires, scoped, seal] = parts.as_slice() else {
            return Err(Refusal::Invalid);
        };
        let num = |s: &str| u64::from_str_radix(s, 16).map_err(|_| Refusal::Invalid);
        let (seq, issued, expires, seal) = (num(seq)?, num(issued)?, num(expires)?, num(seal)?);
        let level: u8 = scoped.parse().map_err(|_| Refusal::Invalid)?;
        if self.seal(seq, issued, expires, level) != seal {
            return Err(Refusal::Invalid);
        }
        let now = self.now_ms();
        let revoked = self.revoke_at_ms.iter().any(|t| issued < *t && *t <= now)
            || issued < self.revoked_before_ms.load(Relaxed)
            || (self.any_revoked_number.load(Relaxed)
                && (self.revoked_numbers.lock())
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&seq));
        if revoked {
            return Err(Refusal::Revoked);
        }
        if now >= expires {
            return Err(Refusal::Expired);
        }
        if level == 0 {
            return Err(Refusal::Scope);
        }
        Ok(level)
    }

    /// The origin clients reach this target at, from the request's `Host`.
    fn base(h: &HeaderMap) -> String {
        let host = h
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("127.0.0.1");
        format!("http://{host}")
    }

    fn metadata_url(base: &str) -> String {
        format!("{base}/.well-known/oauth-protected-resource/mcp")
    }

    /// The answer to a request of the authorization server or of the metadata, or to an MCP
    /// request without a valid token; `Err(req)` hands an authorized MCP request (or any
    /// other) back.
    pub(crate) async fn intercept<B>(
        &self,
        req: Request<Incoming>,
        respond: impl Fn(u16, &'static str, Bytes) -> Response<B>,
    ) -> Result<Response<B>, Request<Incoming>> {
        let base = Self::base(req.headers());
        let path = req.uri().path().to_owned();
        let json = |status: u16, v: serde_json::Value| {
            let mut r = respond(status, "application/json", Bytes::from(v.to_string()));
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        };
        match (req.method(), path.as_str()) {
            (&Method::GET, "/.well-known/oauth-protected-resource")
            | (&Method::GET, "/.well-known/oauth-protected-resource/mcp") => {
                self.n.metadata_served.fetch_add(1, Relaxed);
                Ok(json(
                    200,
                    serde_json::json!({
                        "resource": format!("{base}/mcp"),
                        "authorization_servers": [base],
                        "scopes_supported": [self.scope],
                        "bearer_methods_supported": ["header"],
                    }),
                ))
            }
            (&Method::GET, "/.well-known/oauth-authorization-server")
                if self.metadata == AuthMetadata::Oauth =>
            {
                self.n.metadata_served.fetch_add(1, Relaxed);
                Ok(json(200, self.as_metadata(&base)))
            }
            (&Method::GET, "/.well-known/openid-configuration")
                if self.metadata == AuthMetadata::Openid =>
            {
                self.n.metadata_served.fetch_add(1, Relaxed);
                Ok(json(200, self.as_metadata(&base)))
            }
            (&Method::POST, "/token") => {
                let answer = self.token(req, &base).await;
                Ok(match answer {
                    Ok(v) => json(200, v),
                    Err((status, code, basic)) => {
                        let mut r = json(status, serde_json::json!({"error": code}));
                        if basic {
                            r.headers_mut().insert(
                                header::WWW_AUTHENTICATE,
                                HeaderValue::from_static("Basic realm=\"mcpload\""),
                            );
                        }
                        r
                    }
                })
            }
            (&Method::POST, "/introspect") => {
                let form = read_form(req).await.unwrap_or_default();
                let token = field(&form, "token").unwrap_or_default();
                self.n.introspections.fetch_add(1, Relaxed);
                Ok(json(200, self.introspect(&token, &base)))
            }
            (&Method::POST, "/auth/revoke") => {
                // The admin call is for the machine the target runs on.
                let local = req
                    .extensions()
                    .get::<std::net::SocketAddr>()
                    .is_none_or(|a| a.ip().is_loopback());
                if !local {
                    return Ok(respond(
                        403,
                        "text/plain",
                        Bytes::from_static(b"loopback only\n"),
                    ));
                }
                let form = read_form(req).await.unwrap_or_default();
                if field(&form, "refresh_tokens").as_deref() == Some("all") {
                    return Ok(match &self.code {
                        Some(code) => {
                            code.revoke_refresh_tokens();
                            respond(200, "text/plain", Bytes::from_static(b"revoked\n"))
                        }
                        None => respond(
                            400,
                            "text/plain",
                            Bytes::from_static(b"refresh tokens are issued with auth_code only\n"),
                        ),
                    });
                }
                match field(&form, "token_number").map(|n| n.parse::<u64>()) {
                    Some(Ok(n)) => {
                        let numbers = self.revoked_numbers.lock();
                        numbers.unwrap_or_else(|e| e.into_inner()).push(n);
                        self.any_revoked_number.store(true, Relaxed);
                    }
                    Some(Err(_)) => {
                        return Ok(respond(
                            400,
                            "text/plain",
                            Bytes::from_static(b"token_number: a number\n"),
                        ));
                    }
                    None => {
                        self.revoked_before_ms.fetch_max(self.now_ms() + 1, Relaxed);
                    }
                }
                self.n.admin_revocations.fetch_add(1, Relaxed);
                Ok(respond(200, "text/plain", Bytes::from_static(b"revoked\n")))
            }
            (&Method::GET, "/authorize") if self.code.is_some() => {
                let code = self.code.as_ref().expect("guarded");
                let query = req.uri().query().unwrap_or("").to_owned();
                Ok(match code.authorize(self, &query, &base).await {
                    Ok(location) => {
                        let mut r = respond(302, "text/plain", Bytes::new());
                        if let Ok(v) = HeaderValue::from_str(&location) {
                            r.headers_mut().insert(header::LOCATION, v);
                        }
                        r
                    }
                    Err(e) => respond(400, "text/plain", Bytes::from(format!("{e}\n"))),
                })
            }
            (&Method::POST, "/register") if self.code.is_some() => {
                let body = read_body(req).await.unwrap_or_default();
                let (status, v) = self.code.as_ref().expect("guarded").register(&body);
                Ok(json(status, v))
            }
            (_, "/mcp") => match self.authorize(req.headers()) {
                Ok(level) => {
                    let mut req = req;
                    // Read only by the step-up check (an extension allocates).
                    if self.code.as_ref().is_some_and(|c| c.step_up.is_some()) {
                        req.extensions_mut().insert(Granted(level));
                    }
                    Err(req)
                }
                Err(refusal) => Ok(self.refuse(refusal, &base, &respond)),
            },
            _ => Err(req),
        }
    }

    fn as_metadata(&self, base: &str) -> serde_json::Value {
        let mut m = self.cc_metadata(base);
        if let Some(code) = &self.code {
            let mut scopes = vec![self.scope.as_str(), OTHER_SCOPE, "offline_access"];
            scopes.extend(code.step_up.as_deref());
            let methods: &[&str] = if code.confidential {
                &[
                    "client_secret_basic",
                    "client_secret_post",
                    "private_key_jwt",
                ]
            } else {
                &[
                    "none",
                    "client_secret_basic",
                    "client_secret_post",
                    "private_key_jwt",
                ]
            };
            let extra = serde_json::json!({
                "authorization_endpoint": format!("{base}/authorize"),
                "registration_endpoint": format!("{base}/register"),
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": methods,
                "authorization_response_iss_parameter_supported": true,
                "client_id_metadata_document_supported": true,
                "scopes_supported": scopes,
            });
            if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
                m.extend(extra.clone());
            }
        }
        m
    }

    /// The metadata of the client credentials grant alone.
    fn cc_metadata(&self, base: &str) -> serde_json::Value {
        serde_json::json!({
            "issuer": base,
            "token_endpoint": format!("{base}/token"),
            "introspection_endpoint": format!("{base}/introspect"),
            "grant_types_supported": ["client_credentials"],
            "response_types_supported": ["token"],
            "token_endpoint_auth_methods_supported":
                ["client_secret_basic", "client_secret_post", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
            "scopes_supported": [self.scope, OTHER_SCOPE],
        })
    }

    fn authorize(&self, h: &HeaderMap) -> Result<u8, Refusal> {
        let token = h
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let checked = token.map_or(Err(Refusal::Missing), |t| self.check(t));
        let n = &self.n;
        let counter = match checked {
            Ok(_) => &n.authorized,
            Err(Refusal::Missing) => &n.missing,
            Err(Refusal::Invalid) => &n.invalid,
            Err(Refusal::Expired) => &n.expired,
            Err(Refusal::Revoked) => &n.revoked,
            Err(Refusal::Scope) => &n.forbidden,
        };
        counter.fetch_add(1, Relaxed);
        checked
    }

    /// 401 with the challenge, or 403 for the scope.
    fn refuse<B>(
        &self,
        why: Refusal,
        base: &str,
        respond: &impl Fn(u16, &'static str, Bytes) -> Response<B>,
    ) -> Response<B> {
        let meta = Self::metadata_url(base);
        let (status, challenge, text): (u16, String, &'static [u8]) = match why {
            Refusal::Missing => (
                401,
                format!(
                    r#"Bearer resource_metadata="{meta}", scope="{}""#,
                    self.scope
                ),
                b"a bearer token is required\n",
            ),
            Refusal::Scope => (
                403,
                format!(
                    r#"Bearer error="insufficient_scope", scope="{}", resource_metadata="{meta}""#,
                    self.scope
                ),
                b"the token lacks the scope\n",
            ),
            _ => (
                401,
                format!(
                    r#"Bearer error="invalid_token", resource_metadata="{meta}", scope="{}""#,
                    self.scope
                ),
                b"the token is invalid, expired or revoked\n",
            ),
        };
        let mut r = respond(status, "text/plain", Bytes::from_static(text));
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }

    fn introspect(&self, token: &str, base: &str) -> serde_json::Value {
        match self.check(token) {
            Ok(_) => {
                let expires = token
                    .rsplit('.')
                    .nth(2)
                    .and_then(|e| u64::from_str_radix(e, 16).ok())
                    .unwrap_or(0);
                let left = expires.saturating_sub(self.now_ms()) / 1000;
                let now_unix = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                serde_json::json!({
                    "active": true,
                    "client_id": self.client_id,
                    "scope": self.scope,
                    "token_type": "Bearer",
                    "exp": now_unix + left,
                    "aud": format!("{base}/mcp"),
                })
            }
            Err(_) => serde_json::json!({"active": false}),
        }
    }

    /// The token endpoint: a token, or (status, OAuth error code, whether the client used
    /// Basic).
    async fn token(
        &self,
        req: Request<Incoming>,
        base: &str,
    ) -> Result<serde_json::Value, (u16, &'static str, bool)> {
        let n = &self.n;
        n.token_requests.fetch_add(1, Relaxed);
        let now = n.token_in_flight.fetch_add(1, Relaxed) + 1;
        n.token_in_flight_max.fetch_max(now, Relaxed);
        let result = self.token_inner(req, base).await;
        n.token_in_flight.fetch_sub(1, Relaxed);
        match &result {
            Ok(_) => n.tokens_issued.fetch_add(1, Relaxed),
            Err((_, code, _)) => match *code {
                "invalid_client" => &n.refused_invalid_client,
                "unsupported_grant_type" => &n.refused_unsupported_grant_type,
                "invalid_scope" => &n.refused_invalid_scope,
                "invalid_target" => &n.refused_invalid_target,
                "invalid_grant" => &n.refused_invalid_grant,
                _ => &n.refused_invalid_request,
            }
            .fetch_add(1, Relaxed),
        };
        result
    }

    async fn token_inner(
        &self,
        req: Request<Incoming>,
        base: &str,
    ) -> Result<serde_json::Value, (u16, &'static str, bool)> {
        let basic = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .map(str::to_owned);
        let form = read_form(req)
            .await
            .ok_or((400, "invalid_request", false))?;
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let grant = field(&form, "grant_type");
        if let Some(code) = &self.code
            && matches!(
                grant.as_deref(),
                Some("authorization_code" | "refresh_token")
            )
        {
            let pair = match &basic {
                Some(b) => Some(basic_pair(b).ok_or((401, "invalid_client", true))?),
                None => None,
            };
            let had_basic = pair.is_some();
            return code
                .token(self, &form, pair)
                .map_err(|(status, e, _)| (status, e, had_basic && e == "invalid_client"));
        }
        if grant.as_deref() != Some("client_credentials") {
            return Err((400, "unsupported_grant_type", false));
        }
        let proof = match (&basic, field(&form, "client_assertion")) {
            (Some(b), _) => {
                let (id, secret) = basic_pair(b).ok_or((401, "invalid_client", true))?;
                ClientProof::Secret { id, secret }
            }
            (None, Some(jwt)) => ClientProof::Assertion {
                id: field(&form, "client_id"),
                jwt,
            },
            (None, None) => ClientProof::Secret {
                id: field(&form, "client_id").unwrap_or_default(),
                secret: field(&form, "client_secret").unwrap_or_default(),
            },
        };
        if !self.client_ok(proof, base) {
            return Err((401, "invalid_client", basic.is_some()));
        }
        if let Some(resource) = field(&form, "resource")
            && !self.resource_ok(&resource, base)
        {
            return Err((400, "invalid_target", false));
        }
        let step_up = self.code.as_ref().and_then(|c| c.step_up.as_deref());
        let scope = self
            .granted_scope(field(&form, "scope"), step_up)
            .map_err(|e| (400, e, false))?;
        Ok(serde_json::json!({
            "access_token": self.issue(self.level(&scope, step_up)),
            "token_type": "Bearer",
            "expires_in": self.lifetime_ms / 1000,
            "scope": scope,
        }))
    }

    fn client_ok(&self, proof: ClientProof, base: &str) -> bool {
        match proof {
            ClientProof::Secret { id, secret } => {
                id == self.client_id && self.secret.as_deref().is_some_and(|s| s == secret)
            }
            ClientProof::Assertion { id, jwt } => {
                let Some((key, alg)) = &self.key else {
                    return false;
                };
                let mut v = jsonwebtoken::Validation::new(*alg);
                // The issuer identifier (SEP-1046, RFC 7523bis) is the metadata's `issuer`.
                v.set_audience(&[if self.aud_token_endpoint {
                    format!("{base}/token")
                } else {
                    base.to_owned()
                }]);
                v.set_issuer(&[&self.client_id]);
                v.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
                let Ok(data) = jsonwebtoken::decode::<serde_json::Value>(&jwt, key, &v) else {
                    return false;
                };
                data.claims.get("sub").and_then(|s| s.as_str()) == Some(self.client_id.as_str())
                    && id.is_none_or(|i| i == self.client_id)
            }
        }
    }
}

/// A form body's pairs, decoded; `None` when it cannot be read.
async fn read_form(req: Request<Incoming>) -> Option<Vec<(String, String)>> {
    let body = read_body(req).await?;
    Some(pairs(std::str::from_utf8(&body).ok()?))
}

/// A request's body, at most `MAX_FORM` bytes (`None` beyond, or broken off).
async fn read_body(req: Request<Incoming>) -> Option<Bytes> {
    Some(
        Limited::new(req.into_body(), MAX_FORM)
            .collect()
            .await
            .ok()?
            .to_bytes(),
    )
}

pub(super) fn field(form: &[(String, String)], name: &str) -> Option<String> {
    form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// The client id and secret of an `Authorization: Basic` value (each form-decoded).
fn basic_pair(b64: &str) -> Option<(String, String)> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()
        .and_then(|d| String::from_utf8(d).ok())?;
    let (id, secret) = decoded.split_once(':')?;
    Some((form_decode(id), form_decode(secret)))
}

impl AuthServer {
    /// With a step-up scope: the 403 for a `tools/call` (alone or in a batch) whose token
    /// lacks it (`granted`: what `/mcp` let through), with the challenge naming the wider
    /// scope.
    pub(crate) fn step_up_refusal<B>(
        &self,
        granted: Option<&Granted>,
        h: &HeaderMap,
        body: &[u8],
        respond: impl Fn(u16, &'static str, Bytes) -> Response<B>,
    ) -> Option<Response<B>> {
        let code = self.code.as_ref()?;
        let up = code.step_up.as_deref()?;
        if granted.is_some_and(|g| g.0 >= 2) {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        let is_call =
            |m: &serde_json::Value| m.get("method").and_then(|m| m.as_str()) == Some("tools/call");
        let calls = match &v {
            serde_json::Value::Array(a) => a.iter().any(is_call),
            m => is_call(m),
        };
        if !calls {
            return None;
        }
        code.forbade_step_up();
        self.n.forbidden.fetch_add(1, Relaxed);
        self.n.authorized.fetch_sub(1, Relaxed);
        let meta = Self::metadata_url(&Self::base(h));
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="{} {up}", resource_metadata="{meta}""#,
            self.scope
        );
        let mut r = respond(
            403,
            "text/plain",
            Bytes::from_static(b"tools/call needs the step-up scope\n"),
        );
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_decoded() {
        let b = base64::engine::general_purpose::STANDARD.encode("a%3Ab:s+t");
        assert_eq!(basic_pair(&b), Some(("a:b".into(), "s t".into())));
        assert_eq!(basic_pair("%%%"), None);
    }
}
