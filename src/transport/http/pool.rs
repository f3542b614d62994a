//! The connections one transport keeps to its target: idle ones ready for the next request,
//! how many are open (never more than the pool size), and the requests waiting for one.

use super::connection::Connection;
use super::exchange::Request;
use std::collections::VecDeque;

pub(super) struct Pool {
    /// The most connections open at once.
    cap: usize,
    /// Connections open or opening, idle or not.
    live: usize,
    idle: Vec<Connection>,
    waiting: VecDeque<Request>,
}

impl Pool {
    pub(super) fn new(cap: usize) -> Self {
        Pool {
            cap: cap.max(1),
            live: 0,
            idle: Vec::new(),
            waiting: VecDeque::new(),
        }
    }

    /// The idle connection used last, if any: the caller checks that it can still serve
    /// ([`Connection::reuse`]) and hands it back as gone (`put_back(None)`) if not.
    pub(super) fn take_idle(&mut self) -> Option<Connection> {
        self.idle.pop()
    }

    /// Counts one more connection (the caller opens it) if the pool has room for it.
    pub(super) fn open_one(&mut self) -> bool {
        let room = self.live < self.cap;
        self.live += usize::from(room);
        room
    }

    /// A connection is free again: idle and ready, or gone (`None`).
    pub(super) fn put_back(&mut self, back: Option<Connection>) {
        match back {
            Some(conn) => self.idle.push(conn),
            None => self.live -= 1,
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

    /// Whether a request waits for a connection.
    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The request that has waited longest, if any.
    pub(super) fn next_waiting(&mut self) -> Option<Request> {
        self.waiting.pop_front()
    }

    /// Takes back the first waiting request that `which` picks.
    pub(super) fn withdraw(&mut self, which: impl Fn(&Request) -> bool) -> Option<Request> {
        let at = self.waiting.iter().position(which)?;
        self.waiting.remove(at)
    }

    /// Forgets every connection in use and every waiting request (their exchanges were
    /// dropped); the idle ones stay for what is still to send.
    pub(super) fn keep_only_idle(&mut self) {
        self.live = self.idle.len();
        self.waiting.clear();
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
