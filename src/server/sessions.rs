//! Legacy-era sessions without a lock: a fixed table of atomic slots, each holding the
//! generation number of the session it carries and its negotiated version. A session id
//! names its generation; a slot reused by a newer session makes the old id unknown (404).
//! The table counts the sessions it holds.

use crate::protocol::Revision;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const SLOTS: usize = 1 << 16;

pub(crate) struct Sessions {
    slots: Box<[AtomicU64]>,
    next: AtomicU64,
    /// Live sessions: opened, less closed, less those a newer session's slot took over.
    held: AtomicU64,
    /// Differs between servers, so an id from an earlier server is unknown to this one.
    prefix: u32,
}

impl Sessions {
    pub(super) fn new(prefix: u32) -> Sessions {
        Sessions {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicU64::new(0),
            held: AtomicU64::new(0),
            prefix,
        }
    }

    /// What every id this table hands out starts with.
    pub(super) fn prefix(&self) -> u32 {
        self.prefix
    }

    /// The prefix an id names, if it is shaped like one of ours.
    pub(super) fn prefix_of(id: &str) -> Option<u32> {
        let (prefix, _) = id.split_once('-')?;
        u32::from_str_radix(prefix, 16).ok()
    }

    /// The sessions live now.
    pub(super) fn held(&self) -> u64 {
        self.held.load(Relaxed)
    }

    /// Opens a session at `version` and returns its id. A live session in its slot ends
    /// (the held count stays); an empty slot adds one to it.
    pub(super) fn open(&self, version: Revision) -> String {
        let generation = self.next.fetch_add(1, Relaxed) + 1;
        let before =
            self.slots[generation as usize % SLOTS].swap(pack(generation, version), Relaxed);
        if before == 0 {
            self.held.fetch_add(1, Relaxed);
        }
        format!("{:08x}-{generation:016x}", self.prefix)
    }

    fn slot(&self, id: &str) -> Option<(&AtomicU64, u64)> {
        let (_, generation) = id.split_once('-')?;
        if Self::prefix_of(id)? != self.prefix || generation.len() != 16 {
            return None;
        }
        let generation = u64::from_str_radix(generation, 16).ok()?;
        Some((&self.slots[generation as usize % SLOTS], generation))
    }

    /// The negotiated version of a live session.
    pub(super) fn lookup(&self, id: &str) -> Option<Revision> {
        let (slot, generation) = self.slot(id)?;
        let v = slot.load(Relaxed);
        (v >> 8 == generation && generation != 0)
            .then(|| Revision::ALL.get((v & 0xff) as usize).copied())
            .flatten()
    }

    /// Ends a live session; false when it was not live.
    pub(super) fn close(&self, id: &str) -> bool {
        let Some((slot, generation)) = self.slot(id) else {
            return false;
        };
        let v = slot.load(Relaxed);
        let closed = v >> 8 == generation && slot.compare_exchange(v, 0, Relaxed, Relaxed).is_ok();
        if closed {
            self.held.fetch_sub(1, Relaxed);
        }
        closed
    }
}

/// A slot's value: the generation above the revision's discriminant, which is its place in
/// [`Revision::ALL`] (the test checks every one reads back).
fn pack(generation: u64, version: Revision) -> u64 {
    (generation << 8) | version as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_lookup_close() {
        let s = Sessions::new(0xabc);
        let a = s.open(Revision::V2025_06_18);
        let b = s.open(Revision::V2025_03_26);
        assert_eq!(s.lookup(&a), Some(Revision::V2025_06_18));
        assert_eq!(s.lookup(&b), Some(Revision::V2025_03_26));
        assert!(s.close(&a));
        assert!(!s.close(&a));
        assert_eq!(s.lookup(&a), None);
        assert_eq!(s.lookup("nope"), None);
        assert_eq!(Sessions::new(0xdef).lookup(&b), None);
        for r in Revision::ALL {
            assert_eq!(s.lookup(&s.open(r)), Some(r));
        }
    }

    #[test]
    fn held_counts_open_less_closed_less_taken_over() {
        let s = Sessions::new(1);
        let first = s.open(Revision::V2025_06_18);
        let second = s.open(Revision::V2025_06_18);
        assert_eq!(s.held(), 2);
        assert!(s.close(&second));
        assert!(!s.close(&second));
        assert_eq!(s.held(), 1);
        // A full turn of the table: the last session opened takes over `first`'s slot, and
        // every slot but `second`'s (closed) holds one.
        for _ in 0..SLOTS - 1 {
            s.open(Revision::V2025_03_26);
        }
        assert_eq!(s.lookup(&first), None);
        assert_eq!(s.held(), SLOTS as u64 - 1);
        assert!(!s.close(&first));
        assert_eq!(s.held(), SLOTS as u64 - 1);
    }
}
