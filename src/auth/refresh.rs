//! At load, the tokens of an earlier `mcpload auth login` (`[target.auth] oauth = { grant =
//! "authorization_code" }`, `run --oauth-login`): the stored access token while it lasts,
//! then refresh grants (RFC 6749 section 6) behind the transport's single-flight
//! [`Credentials`], each rotated refresh token saved to the store at once (atomically). A
//! refresh token the server refuses (`invalid_grant`: revoked, expired, reused) fails for
//! good: the run stops with the way out (log in again), never a storm of 401s. With
//! `relogin` (`--login-follow-redirects`, test servers only): a 403 `insufficient_scope` is
//! stepped up once by a new authorization for the union of the scopes, and a 401 from a
//! server whose protected-resource metadata now names another authorization server logs in
//! there anew (a new registration, never the old server's client); without it, the latter
//! stops the run.

use super::login::{Approval, Login, authenticate};
use super::net::Net;
use super::store::{Entry, Store, unix_now};
use super::{discover, refusal_code, token_answer};
use crate::transport::auth::{Credentials, Fetch, FetchWhy, Fetched, Token};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A stored access token is used first only if it has at least this long to live.
const STORED_TOKEN_MARGIN_S: u64 = 2;

/// How long a headless re-authorization may take.
const RELOGIN_WAIT: Duration = Duration::from_secs(30);

/// Credentials that start from `entry` (of `store`) and refresh with its refresh token;
/// `secret`: a pre-registered client's secret (from the environment), when it has one;
/// `relogin`: authorize anew headlessly where a step-up or a new authorization server needs
/// it.
pub fn credentials(
    entry: Entry,
    store: Store,
    secret: Option<String>,
    net: Net,
    relogin: bool,
) -> Credentials {
    let client = Arc::new(Refresher {
        entry: Mutex::new(entry),
        first: Mutex::new(true),
        store,
        secret,
        net,
        relogin,
    });
    let fetch: Fetch = Arc::new(move |why| {
        let client = Arc::clone(&client);
        Box::pin(async move { client.fetch(why).await })
    });
    if relogin {
        Credentials::fetched_with_step_up(fetch, true)
    } else {
        Credentials::fetched(fetch, true)
    }
}

struct Refresher {
    entry: Mutex<Entry>,
    /// The stored access token has not been handed out yet.
    first: Mutex<bool>,
    store: Store,
    secret: Option<String>,
    net: Net,
    relogin: bool,
}

impl Refresher {
    async fn fetch(&self, why: FetchWhy) -> Fetched {
        let entry = self.entry.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(c) = &why.challenge {
            // Authorizing anew headlessly only with --login-follow-redirects (a 401 can
            // carry this error too, and reaches here without it).
            if c.insufficient_scope() && self.relogin {
                let wider = union(entry.scope.as_deref(), c.scope.as_deref());
                return self.login(&entry, Some(wider), true, false).await;
            }
            if let Ok(d) = discover(&self.net, &entry.url, Some(c), true).await
                && d.issuer != entry.issuer
            {
                if !self.relogin {
                    return Fetched {
                        token: Err(format!(
                            "{} now names the authorization server {}, not {}: log in again: \
                             mcpload auth login {}",
                            entry.url, d.issuer, entry.issuer, entry.url
                        )),
                        token_request: None,
                        fatal: true,
                    };
                }
                return self.login(&entry, entry.scope.clone(), false, true).await;
            }
        }
        let first = std::mem::replace(
            &mut *self.first.lock().unwrap_or_else(|e| e.into_inner()),
            false,
        );
        let now = unix_now();
        if first && why.challenge.is_none() {
            let left = time_left(entry.expires_at, now);
            if left.is_none_or(|l| l >= Duration::from_secs(STORED_TOKEN_MARGIN_S)) {
                return Fetched {
                    token: Ok(Token {
                        access: entry.access_token.clone(),
                        lifetime: left,
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
        let headers = match authenticate(
            &entry.client_id,
            &entry.auth_method,
            secret.as_deref(),
            &mut form,
        ) {
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
            e.expires_at = answer
                .token
                .lifetime
                .map(|l| unix_now().saturating_add(l.as_secs()));
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
        self.save(saved, "the refreshed tokens").await;
        Fetched {
            token: Ok(answer.token),
            token_request: took,
            fatal: false,
        }
    }

    /// Saves `entry` to the store off the runtime's workers (a lock, a write and two fsyncs),
    /// saying on stderr if it could not.
    async fn save(&self, entry: Entry, what: &str) {
        let store = self.store.clone();
        let saved = tokio::task::spawn_blocking(move || store.put(entry))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(e) = saved {
            eprintln!("mcpload: {what} could not be saved: {e}");
        }
    }

    /// A new authorization, headless: for `scope`, by the same client (`same_client`) or by
    /// a new registration; its tokens replace the entry's.
    async fn login(
        &self,
        entry: &Entry,
        scope: Option<String>,
        same_client: bool,
        fatal: bool,
    ) -> Fetched {
        let login = Login {
            url: entry.url.clone(),
            net: self.net.clone(),
            client_id: same_client.then(|| entry.client_id.clone()),
            client_secret: same_client
                .then(|| entry.client_secret.clone().or_else(|| self.secret.clone()))
                .flatten(),
            scope,
            approval: Approval::FollowRedirects,
            wait: RELOGIN_WAIT,
        };
        let started = Instant::now();
        match login.run().await {
            Ok(mut new) => {
                if same_client {
                    // A pre-registered id to the login: the registration's secret and the
                    // way it authenticates are the entry's, kept for the next refreshes.
                    new.client_secret = entry.client_secret.clone();
                    new.auth_method = entry.auth_method.clone();
                }
                let token = Token {
                    access: new.access_token.clone(),
                    lifetime: time_left(new.expires_at, unix_now()),
                };
                *self.entry.lock().unwrap_or_else(|e| e.into_inner()) = new.clone();
                self.save(new, "the new login's tokens").await;
                Fetched {
                    token: Ok(token),
                    token_request: Some(started.elapsed()),
                    fatal: false,
                }
            }
            Err(e) => Fetched {
                token: Err(format!("authorizing {} anew: {e}", entry.url)),
                token_request: None,
                fatal,
            },
        }
    }
}

/// How long a stored token expiring at `expires_at` has left at `now` (Unix seconds), at
/// most: both are whole seconds and `now` is rounded down, so the token may have up to a
/// second less than their difference; that second is taken off.
fn time_left(expires_at: Option<u64>, now: u64) -> Option<Duration> {
    expires_at.map(|e| Duration::from_secs(e.saturating_sub(now).saturating_sub(1)))
}

/// The scopes of `a` and `b`, each once, in order.
fn union(a: Option<&str>, b: Option<&str>) -> String {
    let mut out: Vec<&str> = Vec::new();
    for w in a.into_iter().chain(b).flat_map(|s| s.split_whitespace()) {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn scopes_are_united_once_each() {
        assert_eq!(super::union(Some("a b"), Some("b c")), "a b c");
        assert_eq!(super::union(None, Some("c")), "c");
    }

    #[test]
    fn a_stored_token_is_believed_a_second_less_than_its_whole_seconds_say() {
        use std::time::Duration;
        // Expiring at 100 and read at 97.9 (now = 97): 2.1 s left, believed 2, never 3.
        assert_eq!(
            super::time_left(Some(100), 97),
            Some(Duration::from_secs(2))
        );
        assert_eq!(super::time_left(Some(100), 100), Some(Duration::ZERO));
        assert_eq!(super::time_left(Some(100), 120), Some(Duration::ZERO));
        assert_eq!(super::time_left(None, 1), None);
    }
}
