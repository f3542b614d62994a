//! The connections one transport keeps to its target: idle ones ready for the next request,
//! how many are open (never more than the pool size), the requests waiting for one, and
//! the connections being opened for them. A connection is opened for the requests waiting,
//! not for one of them: the first connection free, a new one or one whose answer was read,
//! serves the request that has waited longest. Dialing for one request each let a burst of
//! arrivals open a connection per arrival while the connections already open were about to
//! be free: at 20,000 arrivals a second from a cold start, a thousand connections and more,
//! past what the target accepts, and each new one slower to serve than a reused one.

use super::connection::Connection;
use super::exchange::Request;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The connections open or opening of every pool given the same gauge (a run's transports):
/// the server's watcher reads it, so that descriptors the server holds for mcpload's own
/// connections are never read as a leak. Changed as connections open and close, never per
/// request.
#[derive(Clone, Debug, Default)]
pub struct OpenConnections(Arc<AtomicUsize>);

impl OpenConnections {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

pub(super) struct Pool {
    /// The most connections open at once.
    cap: usize,
    /// Connections open or opening, idle or not (mirrored into `gauge`).
    live: usize,
    gauge: OpenConnections,
    idle: Vec<Connection>,
    waiting: VecDeque<Request>,
    /// Connections being opened (counted in `live`).
    dialing: usize,
}

/// Most connections a transport opens at once. Enough to grow the pool fast when a target
/// is slow to answer (each dial takes a round trip); few enough that a burst does not flood
/// the target with handshakes while its open connections would soon have been free.
const MAX_DIALING: usize = 32;

impl Pool {
    pub(super) fn new(cap: usize, gauge: OpenConnections) -> Self {
        Pool {
            cap: cap.max(1),
            live: 0,
            gauge,
            idle: Vec::new(),
            waiting: VecDeque::new(),
            dialing: 0,
        }
    }

    /// The idle connection used last, if any: the caller checks that it can still serve
    /// ([`Connection::reuse`]) and hands it back as gone (`put_back(None)`) if not.
    pub(super) fn take_idle(&mut self) -> Option<Connection> {
        self.idle.pop()
    }

    /// Counts one more connection being opened (the caller dials it) when more requests wait
    /// than connections are being opened for them, and the pool has room.
    pub(super) fn dial_one(&mut self) -> bool {
        let wanted = self.dialing < self.waiting.len().min(MAX_DIALING) && self.live < self.cap;
        self.set_live(self.live + usize::from(wanted));
        self.dialing += usize::from(wanted);
        wanted
    }

    /// A dial ended. Its room stays counted: the caller hands it on with
    /// [`Self::put_back`], or to the exchange of the request that waited longest, which gives
    /// it back as it ends.
    pub(super) fn dialed(&mut self) {
        self.dialing -= 1;
    }

    /// A connection is free again: idle and ready, or gone (`None`).
    pub(super) fn put_back(&mut self, back: Option<Connection>) {
        match back {
            Some(conn) => self.idle.push(conn),
            None => self.set_live(self.live - 1),
        }
    }

    /// Queues a request until a connection is free: load in its turn, a side request (a
    /// cancel notification, a handshake step) ahead of the load.
    pub(super) fn wait(&mut self, request: Request) {
        if request.is_load() {
            self.waiting.push_back(request);
        } else {
            self.waiting.push_front(request);
        }
    }

    /// Whether a request waits that no connection being opened will serve, with no room to
    /// open one for it.
    pub(super) fn is_starved(&self) -> bool {
        self.waiting.len() > self.dialing && self.live >= self.cap
    }

    /// The request that has waited longest, if any.
    pub(super) fn next_waiting(&mut self) -> Option<Request> {
        self.waiting.pop_front()
    }

    /// Takes back the first waiting request that `which` picks; with whether a connection
    /// was being opened for it (it was among the first as many waiting as are being opened).
    pub(super) fn withdraw(&mut self, which: impl Fn(&Request) -> bool) -> Option<(Request, bool)> {
        let at = self.waiting.iter().position(which)?;
        let dialed_for = at < self.dialing;
        self.waiting.remove(at).map(|r| (r, dialed_for))
    }

    /// Forgets every connection in use or being opened and every waiting request (their
    /// exchanges and dials were dropped); the idle ones stay for what is still to send.
    pub(super) fn keep_only_idle(&mut self) {
        self.set_live(self.idle.len());
        self.waiting.clear();
        self.dialing = 0;
    }

    fn set_live(&mut self, live: usize) {
        if live > self.live {
            self.gauge.0.fetch_add(live - self.live, Ordering::Relaxed);
        } else {
            self.gauge.0.fetch_sub(self.live - live, Ordering::Relaxed);
        }
        self.live = live;
    }

    #[cfg(test)]
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.live, self.idle.len())
    }

    /// Whether every idle connection could still take a request.
    #[cfg(test)]
    pub(super) fn idle_reusable(&mut self) -> bool {
        self.idle.iter_mut().all(|c| c.reusable())
    }
}

impl Drop for Pool {
    /// The transport is gone, and its connections with it.
    fn drop(&mut self) {
        self.set_live(0);
    }
}
