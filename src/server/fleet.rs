//! The load balancer in front of `replicas` (`mcpload serve --replicas N --balance …`):
//! which replica a new connection is assigned to, which replica serves each request, and the
//! fleet's counters (the totals, and each replica's own). One server is a fleet of one.
//!
//! Round-robin and random pick per connection, as a layer-4 balancer (a Kubernetes
//! Service, a TCP proxy) does: every request of a keep-alive connection goes to its
//! replica. Sticky looks at each request: one carrying `Mcp-Session-Id` goes to the replica
//! that handed that id out (the balancer reads it off the id, as one that learns ids from
//! the answers would), any other where its connection goes.

use super::Shared;
use super::config::{Balance, ConfigError, ServeConfig};
use super::faults::draw_rng;
use super::sessions::Sessions;
use super::stats::{Stats, StatsSnapshot};
use rand::RngExt;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Keeps the balancer's draws apart from the faults' and the service times' for one seed.
const BALANCE_SALT: u64 = 0x6261_6c61_6e63_6521;

pub(crate) struct Fleet {
    replicas: Vec<Arc<Shared>>,
    /// Connections assigned so far: round-robin's turn, random's draw number.
    turns: AtomicU64,
}

impl Fleet {
    /// The fleet of `first` and the `replicas - 1` siblings it makes.
    pub(super) fn new(first: Shared) -> Result<Fleet, ConfigError> {
        let siblings = (1..first.cfg.replicas)
            .map(|n| first.sibling(n).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let mut replicas = vec![Arc::new(first)];
        replicas.extend(siblings);
        Ok(Fleet {
            replicas,
            turns: AtomicU64::new(0),
        })
    }

    pub(crate) fn cfg(&self) -> &ServeConfig {
        &self.replicas[0].cfg
    }

    /// The fleet's counters (every replica adds into them).
    pub(crate) fn stats(&self) -> &Arc<Stats> {
        &self.replicas[0].stats
    }

    /// The replica a new connection is assigned to.
    pub(crate) fn assign(&self) -> usize {
        let n = self.replicas.len();
        if n == 1 {
            return 0;
        }
        let turn = self.turns.fetch_add(1, Relaxed);
        let cfg = self.cfg();
        let i = match cfg.balance {
            Balance::Random => draw_rng(cfg.seed ^ BALANCE_SALT, turn).random_range(0..n),
            Balance::RoundRobin | Balance::Sticky => (turn % n as u64) as usize,
        };
        Stats::add(&self.replicas[i].replica.connections, 1);
        i
    }

    /// The replica that serves a request carrying `session` on a connection assigned to
    /// replica `conn`.
    pub(crate) fn route(&self, conn: usize, session: Option<&str>) -> &Arc<Shared> {
        let sticky = self.cfg().balance == Balance::Sticky && self.replicas.len() > 1;
        session
            .filter(|_| sticky)
            .and_then(|id| self.issuer(id))
            .unwrap_or(&self.replicas[conn])
    }

    /// The replica that handed out session `id`; with shared sessions (one table, one
    /// prefix) a replica chosen by the id's hash, the same for every request of a session.
    fn issuer(&self, id: &str) -> Option<&Arc<Shared>> {
        if self.cfg().shared_sessions {
            let hash = rustc_hash::FxBuildHasher.hash_one(id);
            return Some(&self.replicas[(hash % self.replicas.len() as u64) as usize]);
        }
        let prefix = Sessions::prefix_of(id)?;
        self.replicas.iter().find(|r| r.sessions.prefix() == prefix)
    }

    /// The counters now: the fleet's totals, and with several replicas each one's own.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let mut s = self.replicas[0].snapshot();
        if !self.cfg().shared_sessions {
            s.sessions_held = self.replicas.iter().map(|r| r.sessions.held()).sum();
        }
        if self.replicas.len() > 1 {
            s.replicas = (self.replicas.iter().enumerate())
                .map(|(i, r)| r.replica.snapshot(i))
                .collect();
        }
        s
    }
}
