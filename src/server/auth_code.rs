//! `serve --auth --auth-code`: the authorization code grant played in full, for ground truth.
//! The authorization endpoint approves at once and redirects with a code, the `state` and
//! `iss` (RFC 9207); PKCE S256 is required and checked; the `resource` (RFC 8707) must be
//! this target's. Clients are the pre-registered one, clients registered dynamically (RFC
//! 7591), and client ID metadata documents (a URL `client_id` whose document is fetched, from
//! loopback only). Refresh tokens rotate: each works once; `POST /auth/revoke` with
//! `refresh_tokens=all` revokes them all. Everything is counted for `/stats`
//! (`auth.code`). The maps are locked only by these grants, never by an MCP request.

use super::auth::{AuthServer, field};
use crate::auth::net::{Net, form_body, pairs};
use crate::server::stats::CodeCounts;
use base64::Engine;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// How long a code may wait for its token request.
const CODE_LIFETIME_MS: u64 = 60_000;
/// What every refresh token starts with (tests look for it where no token may be).
pub const REFRESH_PREFIX: &str = "mcpl_rt_";
/// What every code starts with.
pub const CODE_PREFIX: &str = "mcpl_ac_";
/// Most clients registered (dynamically or by document) at once.
const MAX_CLIENTS: usize = 10_000;

#[derive(Default)]
struct Counters {
    authorization_requests: AtomicU64,
    codes_issued: AtomicU64,
    codes_redeemed: AtomicU64,
    pkce_failures: AtomicU64,
    registrations: AtomicU64,
    metadata_documents: AtomicU64,
    refreshes: AtomicU64,
    rotations: AtomicU64,
    refresh_reused: AtomicU64,
    refresh_revoked: AtomicU64,
    refresh_revocations: AtomicU64,
    step_ups: AtomicU64,
    forbidden_step_up: AtomicU64,
}

struct Client {
    /// `None`: a public client (`none`).
    secret: Option<String>,
    redirect_uris: Vec<String>,
}

struct PendingCode {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: String,
    scope: String,
    expires_ms: u64,
}

enum Refresh {
    Live(Grant),
    Rotated,
    Revoked,
}

struct Grant {
    client_id: String,
    resource: String,
    scope: String,
}

#[derive(Default)]
struct State {
    clients: HashMap<String, Client>,
    codes: HashMap<String, PendingCode>,
    /// Refresh tokens: live, or kept once rotated out or revoked to tell which.
    refresh: HashMap<String, Refresh>,
    authorization_refused: BTreeMap<String, u64>,
}

/// The code grant's state and counts.
pub(crate) struct CodeGrant {
    state: Mutex<State>,
    n: Counters,
    pub(super) step_up: Option<String>,
    /// Registration gives every client a secret: `none` is refused.
    pub(super) confidential: bool,
}

/// A refusal of the token endpoint: status and OAuth error code.
pub(super) type TokenError = (u16, &'static str, bool);

impl CodeGrant {
    pub(super) fn new(step_up: Option<String>, confidential: bool) -> Self {
        CodeGrant {
            state: Mutex::default(),
            n: Counters::default(),
            step_up,
            confidential,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn counts(&self) -> CodeCounts {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let n = &self.n;
        CodeCounts {
            authorization_requests: g(&n.authorization_requests),
            authorization_refused: self.lock().authorization_refused.clone(),
            codes_issued: g(&n.codes_issued),
            codes_redeemed: g(&n.codes_redeemed),
            pkce_failures: g(&n.pkce_failures),
            registrations: g(&n.registrations),
            metadata_documents: g(&n.metadata_documents),
            refreshes: g(&n.refreshes),
            rotations: g(&n.rotations),
            refresh_reused: g(&n.refresh_reused),
            refresh_revoked: g(&n.refresh_revoked),
            refresh_revocations: g(&n.refresh_revocations),
            step_ups: g(&n.step_ups),
            forbidden_step_up: g(&n.forbidden_step_up),
        }
    }

    /// A new code, client or token: `prefix` and 24 random bytes; `None` without randomness
    /// from the system (the request is then refused `server_error`, never given a guessable
    /// one).
    fn random(prefix: &str) -> Option<String> {
        crate::auth::random_text(24)
            .ok()
            .map(|t| format!("{prefix}{t}"))
    }

    /// Counts a `tools/call` refused for want of the step-up scope.
    pub(super) fn forbade_step_up(&self) {
        self.n.forbidden_step_up.fetch_add(1, Relaxed);
    }

    /// Revokes every refresh token issued so far.
    pub(super) fn revoke_refresh_tokens(&self) {
        let mut s = self.lock();
        for r in s.refresh.values_mut() {
            if matches!(r, Refresh::Live(_)) {
                *r = Refresh::Revoked;
            }
        }
        self.n.refresh_revocations.fetch_add(1, Relaxed);
    }

    /// `POST /register` (RFC 7591): 201 with the client, or 400 with the error code.
    pub(super) fn register(&self, body: &[u8]) -> (u16, serde_json::Value) {
        self.n.registrations.fetch_add(1, Relaxed);
        let bad = |e: &str| (400, serde_json::json!({"error": e}));
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
            return bad("invalid_client_metadata");
        };
        let uris = redirect_uris(&v);
        if uris.is_empty() {
            return bad("invalid_redirect_uri");
        }
        let method = v
            .get("token_endpoint_auth_method")
            .and_then(|m| m.as_str())
            .unwrap_or("client_secret_basic");
        let secret = match method {
            "none" if self.confidential => return bad("invalid_client_metadata"),
            "none" => None,
            "client_secret_basic" | "client_secret_post" => match Self::random("mcpl_cs_") {
                Some(s) => Some(s),
                None => return (500, serde_json::json!({"error": "server_error"})),
            },
            _ => return bad("invalid_client_metadata"),
        };
        let Some(id) = Self::random("mcpl_client_") else {
            return (500, serde_json::json!({"error": "server_error"}));
        };
        let mut s = self.lock();
        if s.clients.len() >= MAX_CLIENTS {
            return bad("invalid_client_metadata");
        }
        s.clients.insert(
            id.clone(),
            Client {
                secret: secret.clone(),
                redirect_uris: uris.clone(),
            },
        );
        let mut answer = serde_json::json!({
            "client_id": id,
            "redirect_uris": uris,
            "token_endpoint_auth_method": method,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        });
        if let Some(secret) = secret {
            answer["client_secret"] = secret.into();
        }
        (201, answer)
    }

    /// A client ID metadata document's client, fetched now (loopback URLs only) unless known.
    async fn document_client(&self, id: &str) -> Result<(), &'static str> {
        if self.lock().clients.contains_key(id) {
            return Ok(());
        }
        if !is_loopback_url(id) {
            return Err("invalid_client");
        }
        let net = Net {
            tls: Default::default(),
            connect_timeout: Duration::from_secs(3),
            timeout: Duration::from_secs(5),
        };
        self.n.metadata_documents.fetch_add(1, Relaxed);
        let doc = net.get_json(id).await.map_err(|_| "invalid_client")?;
        if doc.get("client_id").and_then(|c| c.as_str()) != Some(id) {
            return Err("invalid_client");
        }
        let uris = redirect_uris(&doc);
        let mut s = self.lock();
        if s.clients.len() < MAX_CLIENTS {
            s.clients.insert(
                id.to_owned(),
                Client {
                    secret: None,
                    redirect_uris: uris,
                },
            );
        }
        Ok(())
    }

    fn refused(&self, code: &str) {
        *self
            .lock()
            .authorization_refused
            .entry(code.to_owned())
            .or_default() += 1;
    }

    /// `GET /authorize?…`: a redirect with a code (or with an error), or 400 when the client
    /// or its redirect URI is not known (no redirect then, RFC 6749 section 4.1.2.1).
    pub(super) async fn authorize(
        &self,
        auth: &AuthServer,
        query: &str,
        base: &str,
    ) -> Result<String, &'static str> {
        self.n.authorization_requests.fetch_add(1, Relaxed);
        let q = pairs(query);
        let get = |k: &str| field(&q, k).unwrap_or_default();
        let (id, redirect) = (get("client_id"), get("redirect_uri"));
        if (id.starts_with("http://") || id.starts_with("https://"))
            && let Err(e) = self.document_client(&id).await
        {
            self.refused(e);
            return Err(e);
        }
        let known = id == auth.client_id && is_loopback_url(&redirect)
            || self
                .lock()
                .clients
                .get(&id)
                .is_some_and(|c| c.redirect_uris.iter().any(|u| same_redirect(u, &redirect)));
        if !known {
            self.refused("invalid_client");
            return Err("invalid_client");
        }
        let mut answer: Vec<(&str, String)> = Vec::new();
        let outcome = self.grant_code(auth, &q, &id, &redirect, base);
        match outcome {
            Ok(code) => answer.push(("code", code)),
            Err(e) => {
                self.refused(e);
                answer.push(("error", e.into()));
            }
        }
        let state = get("state");
        if !state.is_empty() {
            answer.push(("state", state));
        }
        answer.push(("iss", base.to_owned()));
        let sep = if redirect.contains('?') { '&' } else { '?' };
        Ok(format!("{redirect}{sep}{}", form_body(&answer)))
    }

    fn grant_code(
        &self,
        auth: &AuthServer,
        q: &[(String, String)],
        id: &str,
        redirect: &str,
        base: &str,
    ) -> Result<String, &'static str> {
        let get = |k: &str| field(q, k).unwrap_or_default();
        if get("response_type") != "code" {
            return Err("unsupported_response_type");
        }
        let challenge = get("code_challenge");
        if get("code_challenge_method") != "S256" || challenge.len() < 43 {
            self.n.pkce_failures.fetch_add(1, Relaxed);
            return Err("invalid_request");
        }
        let resource = get("resource");
        if !auth.resource_ok(&resource, base) {
            return Err("invalid_target");
        }
        let scope = auth.granted_scope(field(q, "scope"), self.step_up.as_deref())?;
        if self
            .step_up
            .as_deref()
            .is_some_and(|s| scope.split(' ').any(|w| w == s))
        {
            self.n.step_ups.fetch_add(1, Relaxed);
        }
        let code = Self::random(CODE_PREFIX).ok_or("server_error")?;
        let now = auth.now_ms();
        let mut s = self.lock();
        s.codes.retain(|_, c| c.expires_ms > now);
        s.codes.insert(
            code.clone(),
            PendingCode {
                client_id: id.to_owned(),
                redirect_uri: redirect.to_owned(),
                challenge,
                resource,
                scope,
                expires_ms: now + CODE_LIFETIME_MS,
            },
        );
        self.n.codes_issued.fetch_add(1, Relaxed);
        Ok(code)
    }

    /// The client a token request authenticates as: `(id, secret)` from Basic or the form.
    fn client_ok(&self, auth: &AuthServer, id: &str, secret: Option<&str>) -> bool {
        if id == auth.client_id {
            // Without a secret configured, the pre-registered client is a public one.
            return auth.secret.as_deref() == secret;
        }
        match self.lock().clients.get(id) {
            Some(c) => c.secret.as_deref() == secret,
            None => false,
        }
    }

    /// `grant_type=authorization_code` or `refresh_token`: the token answer.
    pub(super) fn token(
        &self,
        auth: &AuthServer,
        form: &[(String, String)],
        basic: Option<(String, String)>,
    ) -> Result<serde_json::Value, TokenError> {
        let get = |k: &str| field(form, k);
        let (id, secret) = match basic {
            Some((id, secret)) => (id, Some(secret)),
            None => (get("client_id").unwrap_or_default(), get("client_secret")),
        };
        if !self.client_ok(auth, &id, secret.as_deref()) {
            return Err((401, "invalid_client", false));
        }
        let grant = match get("grant_type").as_deref() {
            Some("authorization_code") => {
                let code = get("code").unwrap_or_default();
                let pending = self.lock().codes.remove(&code);
                let Some(p) = pending.filter(|p| p.expires_ms > auth.now_ms()) else {
                    return Err((400, "invalid_grant", false));
                };
                if p.client_id != id || Some(&p.redirect_uri) != get("redirect_uri").as_ref() {
                    return Err((400, "invalid_grant", false));
                }
                let verifier = get("code_verifier").unwrap_or_default();
                let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
                let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
                if computed != p.challenge {
                    self.n.pkce_failures.fetch_add(1, Relaxed);
                    return Err((400, "invalid_grant", false));
                }
                if get("resource").is_some_and(|r| r != p.resource) {
                    return Err((400, "invalid_target", false));
                }
                self.n.codes_redeemed.fetch_add(1, Relaxed);
                Grant {
                    client_id: id,
                    resource: p.resource,
                    scope: p.scope,
                }
            }
            _ => {
                let old = get("refresh_token").unwrap_or_default();
                let mut s = self.lock();
                // Another client's or another resource's request is refused before the
                // token is spent: it stays live for its own client.
                match s.refresh.get(&old) {
                    Some(Refresh::Live(g)) if g.client_id != id => {
                        return Err((400, "invalid_grant", false));
                    }
                    Some(Refresh::Live(g)) if get("resource").is_some_and(|r| r != g.resource) => {
                        return Err((400, "invalid_target", false));
                    }
                    Some(Refresh::Live(_)) => {}
                    Some(Refresh::Rotated) => {
                        self.n.refresh_reused.fetch_add(1, Relaxed);
                        return Err((400, "invalid_grant", false));
                    }
                    Some(Refresh::Revoked) => {
                        self.n.refresh_revoked.fetch_add(1, Relaxed);
                        return Err((400, "invalid_grant", false));
                    }
                    None => return Err((400, "invalid_grant", false)),
                }
                let Some(Refresh::Live(g)) = s.refresh.insert(old, Refresh::Rotated) else {
                    return Err((400, "invalid_grant", false));
                };
                drop(s);
                self.n.refreshes.fetch_add(1, Relaxed);
                self.n.rotations.fetch_add(1, Relaxed);
                g
            }
        };
        let refresh = Self::random(REFRESH_PREFIX).ok_or((500, "server_error", false))?;
        let scope = grant.scope.clone();
        self.lock()
            .refresh
            .insert(refresh.clone(), Refresh::Live(grant));
        Ok(serde_json::json!({
            "access_token": auth.issue(auth.level(&scope, self.step_up.as_deref())),
            "token_type": "Bearer",
            "expires_in": auth.lifetime_ms / 1000,
            "refresh_token": refresh,
            "scope": scope,
        }))
    }
}

/// An `http` URL on loopback with a port (RFC 8252 section 7.3: any port), parsed: host
/// 127.0.0.1, localhost or ::1, and no userinfo (`http://127.0.0.1:1@evil.example/` is
/// evil.example's). What a redirect URI of the pre-registered client, and a client ID
/// metadata document's URL, must be.
fn is_loopback_url(uri: &str) -> bool {
    loopback_parts(uri).is_some()
}

/// A loopback URL's host and path (with its query), without the port; `None` if it is not
/// one ([`is_loopback_url`]).
fn loopback_parts(uri: &str) -> Option<String> {
    let u = uri.parse::<http::Uri>().ok()?;
    let a = u.authority()?;
    let loopback = matches!(a.host(), "127.0.0.1" | "localhost" | "[::1]" | "::1");
    (u.scheme_str() == Some("http") && !a.as_str().contains('@') && a.port().is_some() && loopback)
        .then(|| {
            format!(
                "{}{}",
                a.host(),
                u.path_and_query().map_or("/", |p| p.as_str())
            )
        })
}

/// A redirect URI equal to a registered one, the port of a loopback one aside.
fn same_redirect(registered: &str, given: &str) -> bool {
    registered == given
        || loopback_parts(registered).is_some_and(|r| Some(r) == loopback_parts(given))
}

/// The `redirect_uris` of client metadata (a registration or a metadata document); the
/// members that are not strings are passed over.
fn redirect_uris(metadata: &serde_json::Value) -> Vec<String> {
    metadata
        .get("redirect_uris")
        .and_then(|u| u.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_redirects_match_on_any_port() {
        assert!(same_redirect(
            "http://127.0.0.1:1/callback",
            "http://127.0.0.1:5555/callback"
        ));
        assert!(!same_redirect(
            "http://127.0.0.1:1/callback",
            "http://127.0.0.1:1/other"
        ));
        assert!(!same_redirect(
            "https://a.example/cb",
            "https://b.example/cb"
        ));
        assert!(!same_redirect(
            "http://127.0.0.1:1/callback",
            "http://127.0.0.1:1@evil.example/callback"
        ));
    }

    #[test]
    fn only_a_loopback_host_is_loopback_userinfo_or_not() {
        for ok in [
            "http://127.0.0.1:8080/doc",
            "http://localhost:1/callback",
            "http://[::1]:9/cb?x=1",
        ] {
            assert!(is_loopback_url(ok), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:1@evil.example/doc",
            "http://127.0.0.1:1@evil.example:80/doc",
            "http://user@127.0.0.1:1/doc",
            "http://127.0.0.1.evil.example:1/doc",
            "http://localhost.evil.example:1/doc",
            "https://127.0.0.1:1/doc",
            "http://127.0.0.1/doc",
            "http://evil.example/127.0.0.1:1",
            "not a url",
        ] {
            assert!(!is_loopback_url(bad), "{bad}");
        }
    }
}
