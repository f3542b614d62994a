//! A fleet of stdio children, one per virtual user's session (`target.process = "per_user"`):
//! the ids of the children alive, shared with the resource sampler.

use std::sync::{Arc, Mutex, PoisonError};

/// The root process of each child alive in a fleet, written by the fleet as children start
/// and end (never on a request's path), read once a second by the resource sampler.
#[derive(Clone, Debug, Default)]
pub struct ChildPids(Arc<Mutex<Vec<u32>>>);

impl ChildPids {
    /// A child started.
    pub fn add(&self, pid: u32) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pid);
    }

    /// A child ended (a pid not held is ignored).
    pub fn remove(&self, pid: u32) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| *p != pid);
    }

    /// The children alive now, in the order they started.
    pub fn snapshot(&self) -> Vec<u32> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
