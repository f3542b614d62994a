//! Bearer credentials that every transport of a run shares: the `Authorization` value to
//! send now (a static token, or an OAuth token that the `auth` layer fetches through a
//! [`Fetch`]), its refresh before it expires, the refresh a 401 asks for, and the counts of
//! both. A refresh is single-flight: one fetch at a time per token, however many transports
//! and virtual users share it. Fetches run on tasks of their own; a transport waiting for a
//! token is woken through a watch channel. With `token_per_user`, every virtual user has
//! credentials of its own (its own token, refresh and counts), made from the run's when the
//! user first sends ([`Credentials::user`]); the run's are user 0's.

use crate::metrics::{Counters, LatencyHistogram};
use futures_util::future::BoxFuture;
use http::HeaderValue;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// After a failed fetch, requests fail at once for this long before a fetch is tried again.
const FAILED_FETCH_PAUSE: Duration = Duration::from_secs(1);
/// After a fetch failed for good: longer than any run.
const FOR_GOOD: Duration = Duration::from_secs(100 * 365 * 86_400);

/// A token as the authorization server handed it.
pub struct Token {
    /// The access token: a secret, never shown.
    pub access: String,
    /// `expires_in`, when the server gave one.
    pub lifetime: Option<Duration>,
}

/// The `Bearer` challenge of a 401 or 403 (`WWW-Authenticate`, RFC 6750 section 3 and RFC
/// 9728 section 5.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    /// Where the protected resource's metadata is (RFC 9728).
    pub resource_metadata: Option<String>,
    /// The scope the resource asks for.
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
}

impl Challenge {
    /// Whether it asks for a wider scope (`error="insufficient_scope"`): a step-up.
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// Whether a `WWW-Authenticate` value is a Bearer challenge asking for a wider scope,
    /// read as [`Challenge::parse`] reads it (never a substring: an `error_description`
    /// may name it).
    pub fn asks_for_scope(value: Option<&str>) -> bool {
        value
            .and_then(Challenge::parse)
            .is_some_and(|c| c.insufficient_scope())
    }

    /// The `Bearer` challenge of a `WWW-Authenticate` value (several challenges may share
    /// one value; the others are skipped). `None` when there is none.
    pub fn parse(value: &str) -> Option<Challenge> {
        let mut rest = value.trim();
        let mut found = None;
        // Challenges are `scheme param=value, param="value", scheme2 …`.
        while !rest.is_empty() {
            if rest.starts_with([' ', ',', '=']) {
                // A separator where a word should be: skipped, so every turn moves on.
                rest = &rest[1..];
                continue;
            }
            let (word, after) = rest.split_at(rest.find([' ', ',', '=']).unwrap_or(rest.len()));
            let after_trim = after.trim_start();
            if after_trim.starts_with('=') && !after_trim.starts_with("==") {
                // A parameter of the current challenge.
                let (v, next) = param_value(after_trim[1..].trim_start());
                if let Some(c) = found.as_mut().filter(|_| !word.is_empty()) {
                    let c: &mut Challenge = c;
                    match word.to_ascii_lowercase().as_str() {
                        "resource_metadata" => c.resource_metadata = Some(v),
                        "scope" => c.scope = Some(v),
                        "error" => c.error = Some(v),
                        _ => {}
                    }
                }
                rest = next.trim_start_matches([',', ' ']);
            } else {
                if !word.is_empty() {
                    if word.eq_ignore_ascii_case("bearer") {
                        found = Some(Challenge::default());
                    } else if found.is_some() {
                        // The next scheme: the Bearer challenge is over.
                        break;
                    }
                }
                rest = after.trim_start_matches([',', ' ']);
            }
        }
        found
    }
}

/// A parameter value (a token or a quoted string) and what follows it.
fn param_value(s: &str) -> (String, &str) {
    if let Some(q) = s.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = q.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        out.push(e);
                    }
                }
                '"' => return (out, &q[i + 1..]),
                c => out.push(c),
            }
        }
        (out, "")
    } else {
        let end = s.find([',', ' ']).unwrap_or(s.len());
        (s[..end].to_owned(), &s[end..])
    }
}

/// Why a token is fetched: the challenge of the 401 that asked for it, if one did.
#[derive(Clone, Debug, Default)]
pub struct FetchWhy {
    pub challenge: Option<Challenge>,
}

/// One fetch's outcome.
pub struct Fetched {
    /// The token, or why there is none (a message that names no secret).
    pub token: Result<Token, String>,
    /// How long the POST to the token endpoint took, when one was made (a fetch may fail in
    /// discovery before it).
    pub token_request: Option<Duration>,
    /// The failure is for good (a refresh token refused): no fetch is tried again, and the
    /// run stops ([`Credentials::fatal`]).
    pub fatal: bool,
}

/// How a token is fetched (the `auth` layer's OAuth client).
pub type Fetch = Arc<dyn Fn(FetchWhy) -> BoxFuture<'static, Fetched> + Send + Sync>;

/// What a request may carry now.
#[derive(Clone, Debug)]
pub enum Current {
    /// This `Authorization` value, of token generation `generation` (from 1), usable until
    /// `expires` if that is known.
    Ready {
        generation: u64,
        header: HeaderValue,
        expires: Option<Instant>,
    },
    /// No token yet, and none is fetched until the target asks for one with a 401: the
    /// request goes without (discovery from the 401's challenge). Never for credentials
    /// that fetch their first token eagerly: their first use starts the fetch.
    Unauthenticated,
    /// A token is being fetched: hold the request until [`Credentials::news`].
    Wait,
    /// The last fetch failed: the request fails with this reason.
    Failed(Arc<str>),
}

/// What to do with a request the target answered 401.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Send it again once a newer token is there (a refresh is under way, or done).
    Retry,
    /// Do not: the token was fresh (fetched in answer to a 401 and never accepted since), or
    /// it is a static one. An auth failure.
    Fail,
}

/// Counts of token fetches: per step (drained) and for the whole run.
#[derive(Default)]
struct Counts {
    token_requests: AtomicU64,
    token_refreshes: AtomicU64,
    fetch_time: Mutex<LatencyHistogram>,
}

struct State {
    /// The current token's generation (0: none yet).
    generation: u64,
    header: Option<HeaderValue>,
    expires: Option<Instant>,
    /// The current token was answered 401: it is not sent again.
    refused: bool,
    /// The current token was fetched in answer to a 401.
    reactive: bool,
    fetching: bool,
    /// No fetch is started any more (the run is over).
    stopped: bool,
    /// The last fetch failed: why, and until when no fetch is tried again.
    failed: Option<(Arc<str>, Instant)>,
    /// The proactive refresh's timer task.
    timer: Option<tokio::task::AbortHandle>,
    /// A fetch failed for good: why.
    fatal: Option<Arc<str>>,
}

struct Inner {
    fetch: Option<Fetch>,
    /// The first token is fetched before the first request ([`Credentials::ready`]), not
    /// once a 401 asks for it.
    eager: bool,
    state: Mutex<State>,
    /// Bumped on every change a waiting transport cares for.
    epoch: watch::Sender<u64>,
    /// The highest generation an answer accepted (a 2xx).
    accepted: AtomicU64,
    step: Counts,
    total: Counts,
    /// `token_per_user`: the other users' credentials, by user (these are user 0's).
    users: Option<Mutex<FxHashMap<u32, Credentials>>>,
    /// A 403 `insufficient_scope` may be answered by a fetch for the wider scope (a new
    /// authorization), and whether that was done: it is done once.
    step_up: bool,
    stepped_up: std::sync::atomic::AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(s) = self.state.get_mut()
            && let Some(t) = s.timer.take()
        {
            t.abort();
        }
    }
}

/// The bearer credentials of a run, shared by its transports (cloning shares them).
#[derive(Clone)]
pub struct Credentials(Arc<Inner>);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: only whether one is held is shown.
        let s = self.lock();
        f.debug_struct("Credentials")
            .field("generation", &s.generation)
            .field("refreshable", &self.0.fetch.is_some())
            .finish_non_exhaustive()
    }
}

/// When a token of `lifetime`, asked for at `sent`, is refreshed: at 80% of its lifetime or
/// 30 s before it expires, whichever comes first, but never before half of it has passed
/// (a token of under a minute would otherwise be refreshed as soon as it came).
pub fn refresh_at(sent: Instant, lifetime: Duration) -> Instant {
    let eighty = lifetime.mul_f64(0.8);
    let before = lifetime.saturating_sub(Duration::from_secs(30));
    later(sent, eighty.min(before).max(lifetime / 2))
}

/// `at + by`, or as late as an `Instant` goes near it (a lifetime no clock holds never
/// panics the fetch task, whose waiters would then never wake).
fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(at)
}

impl Credentials {
    fn with(fetch: Option<Fetch>, eager: bool, header: Option<HeaderValue>) -> Self {
        Self::made(fetch, eager, header, false)
    }

    fn made(fetch: Option<Fetch>, eager: bool, header: Option<HeaderValue>, users: bool) -> Self {
        let (epoch, _) = watch::channel(0);
        Credentials(Arc::new(Inner {
            users: users.then(Mutex::default),
            step_up: false,
            stepped_up: Default::default(),
            fetch,
            eager,
            state: Mutex::new(State {
                generation: u64::from(header.is_some()),
                header,
                expires: None,
                refused: false,
                reactive: false,
                fetching: false,
                stopped: false,
                failed: None,
                timer: None,
                fatal: None,
            }),
            epoch,
            accepted: AtomicU64::new(0),
            step: Counts::default(),
            total: Counts::default(),
        }))
    }

    /// A static token (`Authorization: Bearer TOKEN`), never refreshed.
    pub fn fixed(token: &str) -> Result<Self, String> {
        let mut v = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the token holds characters a header cannot carry".to_owned())?;
        v.set_sensitive(true);
        Ok(Self::with(None, false, Some(v)))
    }

    /// Tokens fetched by `fetch`: the first one by [`Credentials::ready`] when `eager`,
    /// else once the target answers 401.
    pub fn fetched(fetch: Fetch, eager: bool) -> Self {
        Self::with(Some(fetch), eager, None)
    }

    /// One token per virtual user (`token_per_user`): these credentials are user 0's, and
    /// [`Credentials::user`] makes the others'. Each user fetches its first token when it
    /// first sends (the run's, user 0's, as `fetched` says).
    pub fn fetched_per_user(fetch: Fetch, eager: bool) -> Self {
        Self::made(Some(fetch), eager, None, true)
    }

    /// Like [`Credentials::fetched`], and a 403 `insufficient_scope` is answered once by a
    /// fetch given its challenge (the wider scope authorized anew).
    pub fn fetched_with_step_up(fetch: Fetch, eager: bool) -> Self {
        let mut c = Self::with(Some(fetch), eager, None);
        if let Some(inner) = Arc::get_mut(&mut c.0) {
            inner.step_up = true;
        }
        c
    }

    /// After a 403 `insufficient_scope` to a request sent with token `generation`: whether to
    /// send it again. The first one that can starts a fetch for the challenge's scope
    /// (credentials that can step up); once that fetch started, later ones are not sent
    /// again, unless a newer token came since. One answered without a fetch (a newer token is
    /// there, a refresh is under way) does not use the step-up up.
    pub fn step_up(&self, generation: u64, challenge: Option<Challenge>) -> Refusal {
        if !self.0.step_up {
            return Refusal::Fail;
        }
        self.refuse(generation, challenge, true)
    }

    /// Whether every virtual user has a token of its own.
    pub fn per_user(&self) -> bool {
        self.0.users.is_some()
    }

    /// Virtual user `user`'s credentials: these (shared tokens, or user 0), else the user's
    /// own, made now if it has none yet. Its first token is fetched on its first request
    /// (discovery, if any, was done by user 0's first fetch).
    pub fn user(&self, user: u32) -> Credentials {
        match &self.0.users {
            Some(users) if user != 0 => {
                let mut users = users.lock().unwrap_or_else(|e| e.into_inner());
                users
                    .entry(user)
                    .or_insert_with(|| Self::with(self.0.fetch.clone(), true, None))
                    .clone()
            }
            _ => self.clone(),
        }
    }

    /// These credentials and every user's made from them.
    fn all(&self) -> Vec<Credentials> {
        let mut all = vec![self.clone()];
        if let Some(users) = &self.0.users {
            all.extend(
                users
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .values()
                    .cloned(),
            );
        }
        all
    }

    /// How many tokens are held (by virtual users, with `token_per_user`).
    pub fn holders(&self) -> u64 {
        self.all()
            .iter()
            .filter(|c| c.lock().header.is_some())
            .count() as u64
    }

    /// Ready for the first request: the first token fetched when it is fetched eagerly.
    pub async fn ready(&self) -> Result<(), String> {
        if self.0.eager {
            self.prime().await
        } else {
            Ok(())
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes when anything a waiting request cares for changes.
    pub fn epoch(&self) -> u64 {
        *self.0.epoch.borrow()
    }

    /// What a request may carry at `now`. Starts a fetch when the token has expired (or a
    /// failed fetch's pause is over) and none is under way.
    pub fn current(&self, now: Instant) -> Current {
        let mut s = self.lock();
        if let Some((why, until)) = &s.failed {
            if now < *until {
                return Current::Failed(why.clone());
            }
            s.failed = None;
            self.start_fetch(&mut s, FetchWhy::default(), false);
            return Current::Wait;
        }
        let refreshable = self.0.fetch.is_some();
        let usable = !(refreshable && s.refused) && s.expires.is_none_or(|e| now < e);
        match &s.header {
            Some(h) if usable => Current::Ready {
                generation: s.generation,
                header: h.clone(),
                expires: s.expires,
            },
            None if !s.fetching && !self.0.eager => Current::Unauthenticated,
            _ => {
                if !s.fetching {
                    self.start_fetch(&mut s, FetchWhy::default(), false);
                }
                Current::Wait
            }
        }
    }

    /// Fetches the first token now, unless there is one, and waits for it.
    async fn prime(&self) -> Result<(), String> {
        let mut news = self.0.epoch.subscribe();
        {
            let mut s = self.lock();
            if s.header.is_some() || self.0.fetch.is_none() {
                return Ok(());
            }
            if !s.fetching {
                self.start_fetch(&mut s, FetchWhy::default(), false);
            }
        }
        self.settled(&mut news).await
    }

    /// After a 401 to a request sent with token `generation` (0: none): whether to send it again.
    /// Starts the refresh it calls for, unless one is under way or a newer token is there.
    pub fn refused(&self, generation: u64, challenge: Option<Challenge>) -> Refusal {
        self.refuse(generation, challenge, false)
    }

    /// A 401 (or, `step_up`, a 403 `insufficient_scope`) to a request sent with token
    /// `generation`. The step-up is marked done, under the state's lock, only where its
    /// fetch starts.
    fn refuse(&self, generation: u64, challenge: Option<Challenge>, step_up: bool) -> Refusal {
        if self.0.fetch.is_none() {
            return Refusal::Fail;
        }
        let mut s = self.lock();
        if generation < s.generation {
            return Refusal::Retry;
        }
        if step_up && self.0.stepped_up.load(Relaxed) {
            return Refusal::Fail;
        }
        if generation > 0 && s.reactive && self.0.accepted.load(Relaxed) < generation {
            return Refusal::Fail;
        }
        if !s.refused {
            s.refused = true;
            self.0.epoch.send_modify(|e| *e += 1);
        }
        if !s.fetching && self.start_fetch(&mut s, FetchWhy { challenge }, true) && step_up {
            self.0.stepped_up.store(true, Relaxed);
        }
        Refusal::Retry
    }

    /// After a 401 at the handshake: a newer token than `generation`, fetched now if none is under
    /// way, or why there is none. A fresh token refused is an error.
    pub async fn renew(&self, generation: u64, challenge: Option<Challenge>) -> Result<(), String> {
        let mut news = self.0.epoch.subscribe();
        if self.refused(generation, challenge) == Refusal::Fail {
            return Err(if self.0.fetch.is_none() {
                "the target refused the token (HTTP 401)".into()
            } else {
                "the target refused a token just fetched (HTTP 401)".into()
            });
        }
        self.settled(&mut news).await
    }

    /// Waits for the fetch under way to end: Ok once a token is ready.
    async fn settled(&self, news: &mut watch::Receiver<u64>) -> Result<(), String> {
        loop {
            match self.current(Instant::now()) {
                Current::Ready { .. } => return Ok(()),
                Current::Failed(why) => return Err(why.to_string()),
                Current::Unauthenticated => return Err("no token was fetched".into()),
                Current::Wait => {
                    if news.changed().await.is_err() {
                        return Err("the credentials were dropped".into());
                    }
                }
            }
        }
    }

    /// An answer of 2xx came to a request sent with token `generation`.
    pub fn accepted(&self, generation: u64) {
        self.0.accepted.fetch_max(generation, Relaxed);
    }

    /// Resolves once anything changed since epoch `since` (a token came, a fetch failed).
    pub fn news(&self, since: u64) -> BoxFuture<'static, ()> {
        let mut rx = self.0.epoch.subscribe();
        Box::pin(async move {
            let _ = rx.wait_for(|e| *e != since).await;
        })
    }

    /// Why a fetch failed for good (a refresh token refused), if one did: the run stops.
    pub fn fatal(&self) -> Option<Arc<str>> {
        self.all().iter().find_map(|c| c.lock().fatal.clone())
    }

    /// Resolves once a fetch failed for good ([`Credentials::fatal`]).
    pub async fn fatal_news(&self) -> Arc<str> {
        let mut rx = self.0.epoch.subscribe();
        loop {
            if let Some(why) = self.fatal() {
                return why;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The generation of the newest token (0: none yet).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Starts a fetch (the caller holds the state's lock): whether it did (not once stopped).
    fn start_fetch(&self, s: &mut State, why: FetchWhy, reactive: bool) -> bool {
        let Some(fetch) = self.0.fetch.clone().filter(|_| !s.stopped) else {
            return false;
        };
        s.fetching = true;
        let weak = Arc::downgrade(&self.0);
        let sent = Instant::now();
        tokio::spawn(async move {
            let fetched = fetch(why).await;
            if let Some(inner) = weak.upgrade() {
                Credentials(inner).store(fetched, sent, reactive);
            }
        });
        true
    }

    fn store(&self, fetched: Fetched, sent: Instant, reactive: bool) {
        if let Some(took) = fetched.token_request {
            for c in [&self.0.step, &self.0.total] {
                c.token_requests.fetch_add(1, Relaxed);
                c.fetch_time
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .record(took);
            }
        }
        let mut s = self.lock();
        s.fetching = false;
        let fatal = fetched.fatal;
        match fetched.token.and_then(|t| {
            let mut h = HeaderValue::from_str(&format!("Bearer {}", t.access))
                .map_err(|_| "the token holds characters a header cannot carry".to_owned())?;
            h.set_sensitive(true);
            Ok((h, t.lifetime))
        }) {
            Ok((header, lifetime)) => {
                if s.generation > 0 {
                    for c in [&self.0.step, &self.0.total] {
                        c.token_refreshes.fetch_add(1, Relaxed);
                    }
                }
                s.generation += 1;
                s.header = Some(header);
                s.expires = lifetime.map(|l| later(sent, l));
                s.refused = false;
                s.reactive = reactive;
                s.failed = None;
                if let Some(t) = s.timer.take() {
                    t.abort();
                }
                if let Some(l) = lifetime {
                    s.timer = Some(self.refresh_timer(s.generation, refresh_at(sent, l)));
                }
            }
            Err(why) if fatal => {
                // Requests fail at once from now on, never sent for a 401 each.
                let why: Arc<str> = why.into();
                s.failed = Some((why.clone(), Instant::now() + FOR_GOOD));
                s.fatal = Some(why);
                s.stopped = true;
            }
            Err(why) => {
                s.failed = Some((why.into(), Instant::now() + FAILED_FETCH_PAUSE));
            }
        }
        drop(s);
        self.0.epoch.send_modify(|e| *e += 1);
    }

    /// A task that refreshes token `generation` at `at`, if it is still the current one then.
    fn refresh_timer(&self, generation: u64, at: Instant) -> tokio::task::AbortHandle {
        let weak: Weak<Inner> = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            if let Some(inner) = weak.upgrade() {
                let c = Credentials(inner);
                let mut s = c.lock();
                if s.generation == generation && !s.fetching {
                    c.start_fetch(&mut s, FetchWhy::default(), false);
                }
            }
        })
        .abort_handle()
    }

    /// Starts no fetch any more (for any user), and waits for the ones under way to end: the
    /// counts are final then (the run is over).
    pub async fn stop(&self) {
        for c in self.all() {
            c.stop_one().await;
        }
    }

    async fn stop_one(&self) {
        let mut news = self.0.epoch.subscribe();
        loop {
            {
                let mut s = self.lock();
                s.stopped = true;
                if let Some(t) = s.timer.take() {
                    t.abort();
                }
                if !s.fetching {
                    return;
                }
            }
            if news.changed().await.is_err() {
                return;
            }
        }
    }

    /// Adds the token requests and refreshes since the last call into `into`, and the
    /// fetch times into `fetch_time`.
    pub fn take_counts(&self, into: &mut Counters, fetch_time: &mut LatencyHistogram) {
        let c = &self.0.step;
        into.token_requests += c.token_requests.swap(0, Relaxed);
        into.token_refreshes += c.token_refreshes.swap(0, Relaxed);
        let mut h = c.fetch_time.lock().unwrap_or_else(|e| e.into_inner());
        *fetch_time += &h;
        h.reset();
    }

    /// Token requests and refreshes of the whole run, and every fetch time (summed over the
    /// users).
    pub fn totals(&self) -> (u64, u64, LatencyHistogram) {
        let (mut requests, mut refreshes) = (0, 0);
        let mut fetch_time = LatencyHistogram::default();
        for u in self.all() {
            let c = &u.0.total;
            requests += c.token_requests.load(Relaxed);
            refreshes += c.token_refreshes.load(Relaxed);
            fetch_time += &*c.fetch_time.lock().unwrap_or_else(|e| e.into_inner());
        }
        (requests, refreshes, fetch_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetch that gave the token `access` (of `lifetime`) after `took`.
    fn fetched(access: String, lifetime: Option<Duration>, took: Duration) -> Fetched {
        Fetched {
            token: Ok(Token { access, lifetime }),
            token_request: Some(took),
            fatal: false,
        }
    }

    #[test]
    fn a_bearer_challenge_is_read_among_others() {
        let c = Challenge::parse(
            r#"Basic realm="x", Bearer error="invalid_token", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", scope="mcp read""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scope.as_deref(), Some("mcp read"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
        assert_eq!(
            Challenge::parse("bearer scope=mcp")
                .unwrap()
                .scope
                .as_deref(),
            Some("mcp")
        );
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        // Only its error asks for a step-up, never a mention of it elsewhere.
        assert!(Challenge::asks_for_scope(Some(
            r#"Bearer error="insufficient_scope", scope="mcp write""#
        )));
        for not in [
            r#"Bearer error="invalid_token", error_description="insufficient_scope? no""#,
            r#"Basic realm="insufficient_scope""#,
            r#"Bearer scope="insufficient_scope""#,
        ] {
            assert!(!Challenge::asks_for_scope(Some(not)), "{not}");
        }
        assert!(!Challenge::asks_for_scope(None));
        // Whatever a server writes, reading it ends.
        for odd in [
            "==",
            "Bearer ==",
            "=",
            ",, ,",
            "Bearer a=\"open",
            "Bearer =x y=",
            "Bearer a==b",
        ] {
            let _ = Challenge::parse(odd);
        }
    }

    #[test]
    fn refresh_comes_at_eighty_percent_or_thirty_seconds_before_never_before_half() {
        let t = Instant::now();
        let at = |s: u64| refresh_at(t, Duration::from_secs(s)) - t;
        assert_eq!(at(3600), Duration::from_secs(2880));
        assert_eq!(at(100), Duration::from_secs(70));
        assert_eq!(at(2), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn each_user_fetches_its_own_token_on_first_use_and_the_counts_add_up() {
        let fetch: Fetch =
            Arc::new(|_| Box::pin(async { fetched("t".into(), None, Duration::from_millis(1)) }));
        let run = Credentials::fetched_per_user(fetch, true);
        run.ready().await.unwrap();
        assert!(
            Arc::ptr_eq(&run.user(0).0, &run.0),
            "user 0's are the run's"
        );
        let one = run.user(1);
        assert!(Arc::ptr_eq(&run.user(1).0, &one.0), "made once");
        // Its first use starts its own fetch (no request goes without a token).
        assert!(matches!(one.current(Instant::now()), Current::Wait));
        one.news(0).await;
        assert!(matches!(one.current(Instant::now()), Current::Ready { .. }));
        assert_eq!(run.holders(), 2);
        run.stop().await;
        let (requests, refreshes, times) = run.totals();
        assert_eq!((requests, refreshes, times.len()), (2, 0, 2));
    }

    #[tokio::test]
    async fn one_refresh_at_a_time_however_many_refusals() {
        use std::sync::atomic::AtomicUsize;
        let fetches = Arc::new(AtomicUsize::new(0));
        let f = fetches.clone();
        let fetch: Fetch = Arc::new(move |_| {
            let f = f.clone();
            Box::pin(async move {
                let n = f.fetch_add(1, Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
                fetched(format!("t{n}"), None, Duration::from_millis(20))
            })
        });
        let c = Credentials::fetched(fetch, true);
        c.ready().await.unwrap();
        let Current::Ready { generation, .. } = c.current(Instant::now()) else {
            panic!("a token after prime");
        };
        c.accepted(generation);
        // A hundred requests refused with the same token: one refresh.
        for _ in 0..100 {
            assert_eq!(c.refused(generation, None), Refusal::Retry);
        }
        assert!(matches!(c.current(Instant::now()), Current::Wait));
        c.renew(generation, None).await.unwrap();
        assert_eq!(fetches.load(Relaxed), 2);
        // The new token was fetched in answer to a 401 and never accepted: refused too, it is
        // an auth failure, not another refresh.
        assert_eq!(c.refused(generation + 1, None), Refusal::Fail);
        let mut k = Counters::default();
        let mut h = LatencyHistogram::default();
        c.take_counts(&mut k, &mut h);
        assert_eq!((k.token_requests, k.token_refreshes, h.len()), (2, 1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fetch_failed_for_good_is_never_tried_again_and_a_step_up_is_tried_once() {
        use std::sync::atomic::AtomicUsize;
        let fetches = Arc::new(AtomicUsize::new(0));
        let f = fetches.clone();
        let fetch: Fetch = Arc::new(move |why: FetchWhy| {
            let n = f.fetch_add(1, Relaxed);
            Box::pin(async move {
                // The first token, then a step-up's, then a refused refresh.
                let fatal = n == 2;
                Fetched {
                    token: if fatal {
                        Err("refused".into())
                    } else {
                        Ok(Token {
                            access: format!("t{n}{}", why.challenge.is_some()),
                            lifetime: None,
                        })
                    },
                    token_request: Some(Duration::from_millis(1)),
                    fatal,
                }
            })
        });
        let c = Credentials::fetched_with_step_up(fetch, true);
        c.ready().await.unwrap();
        let scope = Some(Challenge {
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        });
        c.accepted(1);
        assert_eq!(c.step_up(1, scope.clone()), Refusal::Retry);
        c.renew(1, None).await.ok();
        assert_eq!(c.generation(), 2);
        // Once: a later 403 with the wider token is not stepped up again.
        assert_eq!(c.step_up(2, scope), Refusal::Fail);
        c.accepted(2);
        assert_eq!(c.refused(2, None), Refusal::Retry);
        c.fatal_news().await;
        assert!(c.fatal().is_some());
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(matches!(c.current(Instant::now()), Current::Failed(_)));
        assert_eq!(
            fetches.load(Relaxed),
            3,
            "no fetch after one failed for good"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_403_while_a_refresh_is_under_way_leaves_the_step_up_for_the_next_one() {
        use std::sync::atomic::AtomicUsize;
        let step_ups = Arc::new(AtomicUsize::new(0));
        let f = step_ups.clone();
        let fetch: Fetch = Arc::new(move |why: FetchWhy| {
            if why.challenge.is_some() {
                f.fetch_add(1, Relaxed);
            }
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                fetched("t".into(), None, Duration::from_millis(20))
            })
        });
        let c = Credentials::fetched_with_step_up(fetch, true);
        c.ready().await.unwrap();
        c.accepted(1);
        let scope = Some(Challenge {
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        });
        // A 401 starts a refresh; a 403 while it is under way is sent again with its token,
        // no step-up started.
        assert_eq!(c.refused(1, None), Refusal::Retry);
        assert_eq!(c.step_up(1, scope.clone()), Refusal::Retry);
        c.renew(1, None).await.unwrap();
        assert_eq!((c.generation(), step_ups.load(Relaxed)), (2, 0));
        // The refreshed token is refused 403 too: this one steps up.
        c.accepted(2);
        assert_eq!(c.step_up(2, scope.clone()), Refusal::Retry);
        c.renew(2, None).await.unwrap();
        assert_eq!((c.generation(), step_ups.load(Relaxed)), (3, 1));
        c.accepted(3);
        assert_eq!(c.step_up(3, scope), Refusal::Fail, "once");
    }

    #[tokio::test]
    async fn a_lifetime_no_clock_holds_gives_a_token_not_a_panic() {
        let fetch: Fetch = Arc::new(|_| {
            Box::pin(async { fetched("t".into(), Some(Duration::MAX), Duration::from_millis(1)) })
        });
        let c = Credentials::fetched(fetch, true);
        // Bounded: a panic in the fetch task would leave the waiter asleep.
        tokio::time::timeout(Duration::from_secs(10), c.ready())
            .await
            .expect("the token came")
            .unwrap();
        assert!(matches!(c.current(Instant::now()), Current::Ready { .. }));
    }
}
