//! Shares of the machine: keeps each test that measures throughput or latency against a model
//! from overlapping the tests that load the machine.
//!
//! All integration tests are threads of one process, two at a time on a 2-core machine. A
//! neighbour that keeps the cores busy (a real server under load, a flat-out `mcpload run`,
//! a browser) slows the measured target and its client, and figures such as "8 clients reach
//! 75% of the 400 req/s ceiling", "16 clients gain less than 10% over 8" or "two runs of one
//! profile agree" then fail for the neighbour's sake. So a `measuring` test waits until no
//! `loading` test runs, and none starts until it is done; `loading` tests may overlap each
//! other (as they did when each file was its own binary). Quick tests that load nothing take
//! no share and run beside anything.

use std::sync::{Condvar, Mutex};

struct Shares {
    loading: usize,
    measuring: bool,
    measuring_waiting: usize,
}

static SHARES: Mutex<Shares> = Mutex::new(Shares {
    loading: 0,
    measuring: false,
    measuring_waiting: 0,
});
static CHANGED: Condvar = Condvar::new();

/// A test's share of the machine, given back when dropped (also when the test panics).
#[must_use = "the share lasts as long as the value: bind it for the whole test"]
pub(crate) struct Share {
    measuring: bool,
}

/// For a test that loads the machine: waits while a measuring test runs or waits.
pub(crate) fn loading() -> Share {
    let shares = SHARES.lock().unwrap();
    // A waiting measuring test goes first: a stream of loading tests must not starve it.
    let mut shares = CHANGED
        .wait_while(shares, |s| s.measuring || s.measuring_waiting > 0)
        .unwrap();
    shares.loading += 1;
    Share { measuring: false }
}

/// For a test whose assertions compare measured throughput or latency with a model: waits
/// until it has the machine to itself (but for tests that take no share).
pub(crate) fn measuring() -> Share {
    let mut shares = SHARES.lock().unwrap();
    shares.measuring_waiting += 1;
    let mut shares = CHANGED
        .wait_while(shares, |s| s.measuring || s.loading > 0)
        .unwrap();
    shares.measuring_waiting -= 1;
    shares.measuring = true;
    Share { measuring: true }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut shares = SHARES.lock().unwrap();
        if self.measuring {
            shares.measuring = false;
        } else {
            shares.loading -= 1;
        }
        CHANGED.notify_all();
    }
}
