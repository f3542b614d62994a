//! At load, the tokens of an earlier `mcpload auth login` (`[target.auth] oauth = { grant =
//! "authorization_code" }`, `run --oauth-login`): the stored access token while it lasts,
//! then refresh grants (RFC 6749 section 6) behind the transport's single-flight
//! [`Credentials`], each rotated refresh token saved to the store at once (atomically). A
//! refresh token the server refuses (`invalid_grant`: revoked, expired, reused) fails for
//! good: the run stops with the way out (log in again), never a storm of 401s.

use super::login::authenticate;
use super::net::Net;
use super::store::{Entry, Store, unix_now};
use super::{refusal_code, token_answer};
use crate::transport::auth::{Credentials, Fetch, FetchWhy, Fetched, Token};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A stored access token is used first only if it has at least this long to live.
const STORED_TOKEN_MARGIN_S: u64 = 2;

/// Credentials that start from `entry` (of `store`) and refresh with its refresh token;
/// `secret`: a pre-registered client's secret (from the environment), when it has one.
pub fn credentials(entry: Entry, store: Store, secret: Option<String>, net: Net) -> Credentials {
    let client = Arc::new(Refresher {
        entry: Mutex::new(entry),
        first: Mutex::new(true),
        store,
        secret,
        net,
    });
    let fetch: Fetch = Arc::new(move |why| {
        let client = Arc::clone(&client);
        Box::pin(async move { client.fetch(why).await })
    });
    Credentials::fetched(fetch, true)
}

struct Refresher {
    entry: Mutex<Entry>,
    /// The stored access token has not been handed out yet.
    first: Mutex<bool>,
    store: Store,
    secret: Option<String>,
    net: Net,
}

impl Refresher {
    async fn fetch(&self, why: FetchWhy) -> Fetched {
        let entry = self.entry.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let first = std::mem::replace(&mut *self.first.lock().unwrap_or_else(|e| e.into_inner()), false);
        let now = unix_now();
        if first && why.challenge.is_none() {
            let left = entry.expires_at.map(|e| e.saturating_sub(now));
            if left.is_none_or(|l| l >= STORED_TOKEN_MARGIN_S) {
                return Fetched {
                    token: Ok(Token {
                        access: entry.access_token.clone(),
                        lifetime: left.map(Duration::from_secs),
                    }),
                    token_request: None,
                    fatal: false,
                };
            }
        }
        let relogin = format!("log in again: mcpload auth login {}", entry.url);
        let Some(refresh_token) = entry.refresh_token.clone() else {
            return Fetched {
                token: Err(format!(
                    "the stored access token for {} has expired (or was refused) and the \
                     authorization server gave no refresh token; {relogin}",
                    entry.url
                )),
                token_request: None,
                fatal: true,
            };
        };
        let mut form: Vec<(&str, String)> = vec![
            ("grant_type", "refresh_token".into()),
            ("refresh_token", refresh_token),
            ("resource", entry.resource.clone()),
        ];
        let secret = entry.client_secret.clone().or_else(|| self.secret.clone());
        let headers = match authenticate(&entry.client_id, &entry.auth_method, secret.as_deref(), &mut form) {
            Ok(h) => h,
            Err(e) => {
                return Fetched {
                    token: Err(e),
                    token_request: None,
                    fatal: true,
                };
            }
        };
        let started = Instant::now();
        let reply = self
            .net
            .post_form(&entry.token_endpoint, &form, headers)
            .await;
        let took = Some(started.elapsed());
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                return Fetched {
                    token: Err(e),
                    token_request: took,
                    fatal: false,
                };
            }
        };
        if matches!(reply.status, 400 | 401) {
            // invalid_grant (revoked, expired, reused) or invalid_client: for good.
            let code = refusal_code(&reply).unwrap_or_else(|| format!("HTTP {}", reply.status));
            return Fetched {
                token: Err(format!(
                    "the authorization server {} refused the refresh token ({code}); {relogin}",
                    entry.issuer
                )),
                token_request: took,
                fatal: true,
            };
        }
        let answer = match token_answer(&entry.token_endpoint, &reply) {
            Ok(a) => a,
            Err(e) => {
                return Fetched {
                    token: Err(e),
                    token_request: took,
                    fatal: false,
                };
            }
        };
        let saved = {
            let mut e = self.entry.lock().unwrap_or_else(|e| e.into_inner());
            e.access_token = answer.token.access.clone();
            e.expires_at = answer.token.lifetime.map(|l| unix_now() + l.as_secs());
            if let Some(rotated) = answer.refresh_token {
                e.refresh_token = Some(rotated);
            }
            if answer.scope.is_some() {
                e.scope = answer.scope;
            }
            e.saved_at = unix_now();
            e.clone()
        };
        // The rotated refresh token is the only one that works now: saved before use.
        if let Err(e) = self.store.put(saved) {
            eprintln!("mcpload: the refreshed tokens could not be saved: {e}");
        }
        Fetched {
            token: Ok(answer.token),
            token_request: took,
            fatal: false,
        }
    }
}
