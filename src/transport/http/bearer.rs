//! The tokens a transport's requests carry in `Authorization`: the run's shared one, whose
//! value sits in the transport's request head, and with `token_per_user` each virtual
//! user's own, with a request head of its own (encoded once, again only when the user's
//! token changes). Each keeps the requests waiting for its token and what the transport last
//! saw of its credentials, so a request costs a look at an epoch, no lock and no allocation.

use super::client::RequestHead;
use super::exchange::Request;
use crate::jsonrpc::Id;
use crate::transport::auth::{Credentials, Current};
use futures_util::future::BoxFuture;
use http::HeaderValue;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use tokio::time::Instant;

/// One token as a transport uses it.
pub(super) struct Bearer {
    pub(super) creds: Credentials,
    /// The `Authorization` value requests carry now, and its token's generation (0: none).
    pub(super) authorization: Option<HeaderValue>,
    pub(super) token: u64,
    /// The credentials' epoch last checked (`None`: check again), and when the token expires.
    epoch: Option<u64>,
    expires: Option<Instant>,
    /// Requests held until a token comes (or its fetch fails), and whether a wait for it is
    /// among the transport's exchanges.
    pub(super) held: Vec<Request>,
    waiting: bool,
}

/// Whether a request may go out with its token now.
pub(super) enum Checked {
    /// Yes; `renewed`: with a newer token than the last request (its head is encoded again).
    Go { renewed: bool },
    /// Held for the token being fetched; the credentials' news to wait for, unless a wait
    /// is under way already.
    Hold(Option<BoxFuture<'static, ()>>),
    /// No: the last fetch failed, for this reason.
    Failed(Arc<str>),
}

impl Bearer {
    fn new(creds: Credentials) -> Self {
        Bearer {
            creds,
            authorization: None,
            token: 0,
            epoch: None,
            expires: None,
            held: Vec::new(),
            waiting: false,
        }
    }

    /// Whether a request may go out at `now`, its token brought up to date.
    pub(super) fn check(&mut self, now: Instant) -> Checked {
        let epoch = self.creds.epoch();
        if self.epoch == Some(epoch) && self.expires.is_none_or(|e| now < e) {
            return Checked::Go { renewed: false };
        }
        match self.creds.current(now) {
            Current::Ready {
                generation,
                header,
                expires,
            } => {
                self.epoch = Some(epoch);
                self.expires = expires;
                let renewed = generation != self.token;
                if renewed {
                    self.token = generation;
                    self.authorization = Some(header);
                }
                Checked::Go { renewed }
            }
            Current::Unauthenticated => {
                self.epoch = Some(epoch);
                self.expires = None;
                Checked::Go { renewed: false }
            }
            Current::Wait => Checked::Hold(
                (!std::mem::replace(&mut self.waiting, true)).then(|| self.creds.news(epoch)),
            ),
            Current::Failed(why) => Checked::Failed(why),
        }
    }

    /// The credentials may have changed (a 401): the next request checks them again.
    pub(super) fn stale(&mut self) {
        self.epoch = None;
    }

    /// The credentials changed: the requests held, to send now (or hold again).
    pub(super) fn news_came(&mut self) -> Vec<Request> {
        self.waiting = false;
        self.epoch = None;
        std::mem::take(&mut self.held)
    }

    /// Withdraws the held request of `id` alone; whether there was one.
    fn withdraw(&mut self, id: &Id) -> bool {
        let at = self.held.iter().position(|r| r.is_single(id));
        at.map(|at| self.held.remove(at)).is_some()
    }
}

/// A virtual user's own token, and the head that carries it.
pub(super) struct UserBearer {
    pub(super) bearer: Bearer,
    pub(super) head: RequestHead,
}

/// Every token a transport's requests carry.
pub(super) struct Bearers {
    pub(super) shared: Bearer,
    /// `token_per_user`: the users who sent on this transport, by user.
    pub(super) users: FxHashMap<u32, UserBearer>,
}

impl Bearers {
    pub(super) fn new(creds: Credentials) -> Self {
        Bearers {
            shared: Bearer::new(creds),
            users: FxHashMap::default(),
        }
    }

    /// The user whose own token a request of `user` carries: `None` when tokens are shared.
    pub(super) fn own(&self, user: Option<u32>) -> Option<u32> {
        user.filter(|_| self.shared.creds.per_user())
    }

    /// Makes `user`'s token known to this transport (its credentials made, if they are new
    /// to the run), with `head` to carry it.
    pub(super) fn add_user(&mut self, user: u32, head: impl FnOnce() -> RequestHead) {
        if !self.users.contains_key(&user) {
            let bearer = Bearer::new(self.shared.creds.user(user));
            let head = head();
            self.users.insert(user, UserBearer { bearer, head });
        }
    }

    /// The token requests of `user` carry (`own` already applied).
    pub(super) fn get(&mut self, user: Option<u32>) -> &mut Bearer {
        match user.and_then(|u| self.users.get_mut(&u)) {
            Some(u) => &mut u.bearer,
            None => &mut self.shared,
        }
    }

    pub(super) fn find(&self, user: Option<u32>) -> &Bearer {
        match user.and_then(|u| self.users.get(&u)) {
            Some(u) => &u.bearer,
            None => &self.shared,
        }
    }

    /// The head of `user`'s requests, when it has one of its own.
    pub(super) fn head(&self, user: Option<u32>) -> Option<&RequestHead> {
        user.and_then(|u| self.users.get(&u)).map(|u| &u.head)
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &Bearer> {
        std::iter::once(&self.shared).chain(self.users.values().map(|u| &u.bearer))
    }

    /// Withdraws a request of `id` alone held for a token; whether there was one.
    pub(super) fn withdraw(&mut self, id: &Id) -> bool {
        self.shared.withdraw(id) || self.users.values_mut().any(|u| u.bearer.withdraw(id))
    }

    /// Forgets every request held (the transport closes).
    pub(super) fn clear(&mut self) {
        for b in
            std::iter::once(&mut self.shared).chain(self.users.values_mut().map(|u| &mut u.bearer))
        {
            b.held.clear();
            b.waiting = false;
        }
    }
}
