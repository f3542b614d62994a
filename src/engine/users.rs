//! Closed-loop virtual users of plain requests and batches when each user carries a token or
//! a child process of its own: a user holds a slot from its request's (or batch's) send to
//! its end, so the users sending at once each have a slot, and a slot names the user
//! ([`super::worker::Sending::user`]). Scenario iterations and calls hold slots of their own
//! (`Slots` in the runner and in `Flows`), one per user already.

use super::slots::Slots;
use crate::correlator::{Correlator, Owner, Settled};

/// The users of one worker sending plain requests, by slot: each with the count of its
/// requests not yet ended.
#[derive(Default)]
pub(super) struct Users {
    slots: Slots<usize>,
    settled: Vec<Settled>,
    freed: usize,
}

impl Users {
    /// A user starts sending: its slot, and the owner its requests are tagged with.
    pub(super) fn take(&mut self) -> (u32, Owner) {
        let slot = self.slots.insert(0);
        (slot, self.slots.owner(slot))
    }

    /// The user in `slot` sent `requests` requests; none (every id collided): it is free
    /// again.
    pub(super) fn sent(&mut self, slot: u32, requests: usize) {
        *self.slots.get(slot) = requests;
        if requests == 0 {
            self.free(slot);
        }
    }

    /// Takes up the ends of the users' requests: a user whose requests all ended is free.
    pub(super) fn settle(&mut self, corr: &mut Correlator) {
        corr.take_settled(&mut self.settled);
        for end in std::mem::take(&mut self.settled) {
            if let Some(slot) = self.slots.slot_of(end.owner) {
                let left = self.slots.get(slot);
                *left = left.saturating_sub(1);
                if *left == 0 {
                    self.free(slot);
                }
            }
        }
    }

    fn free(&mut self, slot: u32) {
        self.slots.release(slot);
        self.freed += 1;
    }

    /// Users freed since the last call.
    pub(super) fn take_freed(&mut self) -> usize {
        std::mem::take(&mut self.freed)
    }

    /// A new phase: every user is free, and an end that comes for a request of the last
    /// phase frees no one.
    pub(super) fn reset(&mut self) {
        self.slots.release_all().for_each(drop);
        self.freed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlator::{End, Sent, Tag};
    use crate::jsonrpc::Id;
    use std::time::{Duration, Instant};

    #[test]
    fn a_user_is_free_once_its_requests_all_ended_and_its_slot_is_taken_again() {
        let mut corr = Correlator::default();
        let mut users = Users::default();
        let now = Instant::now();
        let sent = Sent {
            due: now,
            written: now,
            deadline: now + Duration::from_secs(5),
        };
        let (a, owner) = users.take();
        for n in 0..2 {
            let tag = Tag {
                owner: Some(owner),
                ..Tag::default()
            };
            corr.register_tagged(Id::Num(n), sent, tag).unwrap();
        }
        users.sent(a, 2);
        let (b, _) = users.take();
        assert_ne!(a, b, "two users sending at once hold two slots");
        users.sent(b, 0);
        assert_eq!(users.take_freed(), 1, "a user that sent nothing is free");
        corr.end(&Id::Num(0), End::Timeout);
        users.settle(&mut corr);
        assert_eq!(users.take_freed(), 0, "one request of two ended");
        corr.end(&Id::Num(1), End::Missing);
        users.settle(&mut corr);
        assert_eq!(users.take_freed(), 1);
        let (c, _) = users.take();
        assert!(c == a || c == b, "a freed slot is taken again");
    }
}
