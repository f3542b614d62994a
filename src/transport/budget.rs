//! The budget for answer bytes in flight (`--max-answer-memory`, docs/metrics.md): every
//! buffer that holds part of an answer while the rest is awaited (a JSON body, an SSE event)
//! charges what it allocates to one budget shared by all workers, through atomics (no lock).
//! When a charge finds the budget spent, the largest answer being read is picked to fail as
//! oversized: it is woken, gives its bytes back and its connection is closed.
//!
//! An answer is known by size once it holds 1/[`SLOTS`] of the budget: it takes a slot, where
//! a charge over the budget looks for the largest. Smaller answers cost one atomic add per
//! allocation and one subtraction at their end.

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Waker;

/// The default budget: 256 MiB.
pub const DEFAULT_MAX_ANSWER_MEMORY: usize = 256 << 20;
/// Answers that can be known by size at once; one holding 1/SLOTS of the budget takes one.
const SLOTS: usize = 1024;
/// Set in a slot's state once its answer was picked to fail; its size is frozen from then.
const PICKED: usize = 1 << (usize::BITS - 1);
/// Tries at picking the largest answer before a charge gives up and fails its own.
const PICK_TRIES: usize = 8;

/// A budget shared by every transport of a run. Cloning shares it.
#[derive(Clone)]
pub struct AnswerBudget(Arc<Shared>);

struct Shared {
    limit: usize,
    /// Bytes charged by every answer being read.
    used: AtomicUsize,
    /// Of `used`, the bytes of picked answers not yet given back.
    freeing: AtomicUsize,
    /// An answer holding this much takes a slot.
    tracked_from: usize,
    slots: Box<[Slot]>,
    /// Where the next slot search starts, so answers spread over the slots.
    next_slot: AtomicUsize,
}

struct Slot {
    /// 0 when free; else the bytes its answer holds, with [`PICKED`] once it must fail.
    state: AtomicUsize,
    /// Wakes the answer's exchange when it is picked.
    waker: AtomicWaker,
}

impl fmt::Debug for AnswerBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerBudget")
            .field("limit", &self.0.limit)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl Default for AnswerBudget {
    fn default() -> Self {
        AnswerBudget::new(DEFAULT_MAX_ANSWER_MEMORY)
    }
}

impl AnswerBudget {
    /// A budget of `limit` bytes (at least 1).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        AnswerBudget(Arc::new(Shared {
            limit,
            used: AtomicUsize::new(0),
            freeing: AtomicUsize::new(0),
            tracked_from: (limit / SLOTS).max(1),
            slots: (0..SLOTS)
                .map(|_| Slot {
                    state: AtomicUsize::new(0),
                    waker: AtomicWaker::new(),
                })
                .collect(),
            next_slot: AtomicUsize::new(0),
        }))
    }

    /// The bytes charged now by every answer being read.
    pub fn in_flight(&self) -> usize {
        self.0.used.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// Adds `more` bytes to an answer holding `held` (after the add) in `slot`. `Err`: the
    /// answer must fail (it was picked, or it is the largest and the budget is spent); the
    /// bytes stay charged until it gives them back.
    fn charge(&self, held: usize, more: usize, slot: &mut Option<usize>) -> Result<(), Oversized> {
        if let Some(i) = *slot {
            let before = self.slots[i].state.fetch_add(more, Ordering::AcqRel);
            if before & PICKED != 0 {
                // Frozen at the size the picker counted in `freeing`.
                self.slots[i].state.fetch_sub(more, Ordering::AcqRel);
                self.used.fetch_add(more, Ordering::Relaxed);
                return Err(Oversized);
            }
        }
        let used = self.used.fetch_add(more, Ordering::Relaxed) + more;
        if slot.is_none() && held >= self.tracked_from {
            *slot = self.take_slot(held);
        }
        if used.saturating_sub(self.freeing.load(Ordering::Acquire)) <= self.limit {
            return Ok(());
        }
        self.pick_larger_than(held, *slot)
    }

    /// A free slot, now holding `held`; `None` when every slot is taken (then the answer
    /// cannot be picked by others, only fail on its own charge).
    fn take_slot(&self, held: usize) -> Option<usize> {
        let start = self.next_slot.fetch_add(1, Ordering::Relaxed);
        (0..SLOTS).map(|k| (start + k) % SLOTS).find(|&i| {
            self.slots[i]
                .state
                .compare_exchange(0, held, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// The budget is spent: picks the largest answer known by size, if it is larger than the
    /// charging one (`held`, in `own`), and wakes it to fail; else the charging one fails.
    fn pick_larger_than(&self, held: usize, own: Option<usize>) -> Result<(), Oversized> {
        for _ in 0..PICK_TRIES {
            let largest = self
                .slots
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != own)
                .map(|(i, s)| (i, s.state.load(Ordering::Acquire)))
                .filter(|(_, v)| *v != 0 && v & PICKED == 0)
                .max_by_key(|(_, v)| *v);
            let Some((i, v)) = largest.filter(|(_, v)| *v > held) else {
                return Err(Oversized);
            };
            let slot = &self.slots[i];
            if slot
                .state
                .compare_exchange(v, v | PICKED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.freeing.fetch_add(v, Ordering::AcqRel);
                slot.waker.wake();
                return Ok(());
            }
        }
        Err(Oversized)
    }

    /// Gives back `held` bytes and the slot, if any.
    fn release(&self, held: usize, slot: Option<usize>) {
        if let Some(i) = slot {
            let s = &self.slots[i];
            drop(s.waker.take());
            let state = s.state.swap(0, Ordering::AcqRel);
            if state & PICKED != 0 {
                self.freeing.fetch_sub(state & !PICKED, Ordering::AcqRel);
            }
        }
        self.used.fetch_sub(held, Ordering::Relaxed);
    }

    fn picked(&self, slot: Option<usize>) -> bool {
        slot.is_some_and(|i| self.slots[i].state.load(Ordering::Acquire) & PICKED != 0)
    }
}

/// An answer that may not grow: past its size bound, or failed at the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oversized;

/// The bytes of one answer while the rest of it is awaited, charged to a budget (none: not
/// charged). They are held as they arrive: a first piece that grows by doubling up to
/// [`PIECE`] bytes (most answers fit in it, and are handed on as they are), then pieces of
/// [`PIECE`] bytes, joined once the answer is whole. So an answer that never ends (one cut at
/// its bound, or picked by the budget) is never copied, and it holds within a piece of what
/// arrived. Its bound is its reader's to check. Small (it moves inline with an exchange's
/// phase): what only a large answer needs is boxed.
pub struct AnswerBuf {
    first: Vec<u8>,
    /// Pieces past the first, and the answer's slot in the budget (boxed: most answers
    /// never need them).
    rest: Option<Box<Rest>>,
    budget: Option<AnswerBudget>,
}

/// What only a large answer needs.
#[derive(Default)]
struct Rest {
    /// Full pieces after the first, and the one being filled.
    pieces: Vec<Vec<u8>>,
    /// Bytes in `pieces`.
    len: usize,
    /// Bytes allocated for `pieces`.
    held: usize,
    /// The answer's slot in the budget, once it is large enough to be known by size.
    slot: Option<usize>,
}

/// The size of the pieces an answer past its first piece is held in.
pub const PIECE: usize = 64 << 10;

impl fmt::Debug for AnswerBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerBuf")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl AnswerBuf {
    /// An empty buffer charged to `budget`.
    pub fn new(budget: Option<AnswerBudget>) -> Self {
        AnswerBuf {
            first: Vec::new(),
            rest: None,
            budget,
        }
    }

    pub fn len(&self) -> usize {
        self.first.len() + self.rest.as_ref().map_or(0, |r| r.len)
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// The bytes allocated (what is charged).
    pub fn capacity(&self) -> usize {
        self.first.capacity() + self.rest.as_ref().map_or(0, |r| r.held)
    }

    fn slot(&self) -> Option<usize> {
        self.rest.as_ref().and_then(|r| r.slot)
    }

    /// Appends `bytes`. `Err`: the budget picked this answer, or it is the largest and the
    /// budget is spent; the caller drops it ([`AnswerBuf::clear`]).
    pub fn extend(&mut self, mut bytes: &[u8]) -> Result<(), Oversized> {
        if self.rest.as_ref().is_none_or(|r| r.pieces.is_empty()) {
            let (len, cap) = (self.first.len(), self.first.capacity());
            let now = bytes.len().min(PIECE.max(cap) - len);
            if len + now > cap {
                let grown = (len + now).max((2 * cap).min(PIECE));
                self.first.reserve_exact(grown - len);
                self.charge(self.first.capacity() - cap)?;
            }
            self.first.extend_from_slice(&bytes[..now]);
            bytes = &bytes[now..];
        }
        while !bytes.is_empty() {
            let rest = self.rest.get_or_insert_default();
            if rest.pieces.last().is_none_or(|p| p.len() == p.capacity()) {
                let piece = Vec::with_capacity(PIECE);
                let added = piece.capacity();
                rest.held += added;
                rest.pieces.push(piece);
                self.charge(added)?;
            }
            let rest = self.rest.as_mut().expect("made above");
            let piece = rest.pieces.last_mut().expect("a piece with room was made");
            let now = bytes.len().min(piece.capacity() - piece.len());
            piece.extend_from_slice(&bytes[..now]);
            rest.len += now;
            bytes = &bytes[now..];
        }
        Ok(())
    }

    /// Charges `added` bytes, just allocated, to the budget.
    fn charge(&mut self, added: usize) -> Result<(), Oversized> {
        let Some(b) = &self.budget else {
            return Ok(());
        };
        let mut slot = self.slot();
        let charged = b.0.charge(self.capacity(), added, &mut slot);
        if slot != self.slot() {
            self.rest.get_or_insert_default().slot = slot;
        }
        charged
    }

    /// The bytes held, in one piece, handed on (the charge given back: they are no longer
    /// awaited).
    pub fn take(&mut self) -> Bytes {
        let capacity = self.capacity();
        let mut whole = std::mem::take(&mut self.first);
        if let Some(rest) = self.rest.as_mut()
            && !rest.pieces.is_empty()
        {
            whole.reserve_exact(rest.len);
            for piece in rest.pieces.drain(..) {
                whole.extend_from_slice(&piece);
            }
        }
        self.give_back(capacity);
        Bytes::from(whole)
    }

    /// Drops the bytes held and gives their charge back.
    pub fn clear(&mut self) {
        let capacity = self.capacity();
        self.first = Vec::new();
        self.give_back(capacity);
    }

    /// Gives the charge of `capacity` bytes back, with the slot; forgets the pieces.
    fn give_back(&mut self, capacity: usize) {
        let slot = self.rest.take().and_then(|r| r.slot);
        if let Some(b) = &self.budget
            && (capacity > 0 || slot.is_some())
        {
            b.0.release(capacity, slot);
        }
    }

    /// Whether the budget picked this answer to fail.
    pub fn picked(&self) -> bool {
        self.budget
            .as_ref()
            .is_some_and(|b| b.0.picked(self.slot()))
    }

    /// Has `waker` woken when the budget picks this answer; returns whether it was picked
    /// already (checked after registering, so a pick is never missed).
    pub fn watch(&self, waker: &Waker) -> bool {
        match (&self.budget, self.slot()) {
            (Some(b), Some(i)) => {
                b.0.slots[i].waker.register(waker);
                b.0.picked(Some(i))
            }
            _ => false,
        }
    }
}

impl Drop for AnswerBuf {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::task::Wake;

    fn buf(budget: &AnswerBudget) -> AnswerBuf {
        AnswerBuf::new(Some(budget.clone()))
    }

    #[test]
    fn buffers_grow_with_what_arrives_and_give_it_back() {
        let budget = AnswerBudget::new(1 << 20);
        let mut a = buf(&budget);
        a.extend(&[b'x'; 100]).unwrap();
        assert_eq!(a.capacity(), 100, "the first bytes are held exactly");
        a.extend(&[b'x'; 10]).unwrap();
        assert_eq!(a.capacity(), 200, "then doubling");
        assert_eq!(budget.in_flight(), 200);
        let taken = a.take();
        assert_eq!((taken.len(), budget.in_flight()), (110, 0));
        a.extend(b"y").unwrap();
        drop(a);
        assert_eq!(budget.in_flight(), 0, "dropping gives the charge back");
    }

    #[test]
    fn past_the_first_piece_bytes_are_held_in_pieces_and_joined_whole() {
        let budget = AnswerBudget::new(1 << 30);
        let mut a = buf(&budget);
        let mut want = Vec::new();
        for i in 0..300u32 {
            let part = vec![(i % 251) as u8; 1000 + i as usize];
            a.extend(&part).unwrap();
            want.extend_from_slice(&part);
            assert!(
                a.capacity() < a.len() + 2 * PIECE,
                "held within a piece of what came"
            );
        }
        assert_eq!(a.capacity(), budget.in_flight());
        assert_eq!(a.take(), want);
        assert_eq!(budget.in_flight(), 0);
    }

    #[test]
    fn the_first_piece_doubles_up_to_a_piece_then_pieces_follow() {
        let mut a = AnswerBuf::new(None);
        a.extend(&[b'x'; 600]).unwrap();
        a.extend(&[b'x'; 300]).unwrap();
        assert_eq!(a.capacity(), 1200);
        a.extend(&[b'x'; 40_000]).unwrap();
        assert_eq!(
            a.capacity(),
            40_900,
            "what arrived when that is more than double"
        );
        a.extend(&[b'x'; 40_000]).unwrap();
        assert_eq!((a.len(), a.capacity()), (80_900, 2 * PIECE));
        assert!(
            !a.picked(),
            "without a budget nothing is charged, nothing picked"
        );
    }

    #[test]
    fn at_the_budget_the_largest_answer_is_picked_and_woken() {
        struct Flag(AtomicBool);
        impl Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let budget = AnswerBudget::new(10_000);
        let (mut big, mut small, mut third) = (buf(&budget), buf(&budget), buf(&budget));
        big.extend(&[b'x'; 6000]).unwrap();
        small.extend(&[b'x'; 3000]).unwrap();
        let woken = Arc::new(Flag(AtomicBool::new(false)));
        assert!(!big.watch(&Waker::from(woken.clone())));
        // 11 000 bytes: over; the largest other answer (6 000) is picked, the charger goes on.
        third.extend(&[b'x'; 2000]).unwrap();
        assert!(big.picked() && woken.0.load(Ordering::SeqCst));
        assert!(!small.picked() && !third.picked());
        assert_eq!(
            big.extend(b"more"),
            Err(Oversized),
            "a picked answer grows no more"
        );
        big.clear();
        assert_eq!(budget.in_flight(), 5000);
        // Over again with no larger answer than the charging one: the charger fails.
        assert_eq!(third.extend(&[b'x'; 6000]), Err(Oversized));
        assert!(!small.picked());
        small.clear();
        third.clear();
        assert_eq!(budget.in_flight(), 0);
        assert_eq!(budget.0.freeing.load(Ordering::SeqCst), 0);
    }
}
