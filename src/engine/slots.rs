//! Live units of work addressed by an [`Owner`] (a slot and its generation), so that an
//! answer or a timer that comes back for a unit already ended is ignored: the scenario
//! runner's iterations and the multi-request calls of task mode and input rounds.

use crate::correlator::Owner;

/// Bits of an owner that hold the slot; the rest hold the slot's generation.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Live units one worker can hold at once.
const MAX_LIVE: usize = SLOT_MASK as usize;

struct Slot<T> {
    generation: u32,
    unit: Option<T>,
}

/// Units by slot, with the free slots kept for reuse.
pub(super) struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
}

impl<T> Slots<T> {
    /// Units live now.
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Whether no more units fit: their owners would not fit their slots.
    pub(super) fn full(&self) -> bool {
        self.live >= MAX_LIVE
    }

    /// Holds `unit` in a free slot; returns the slot.
    pub(super) fn insert(&mut self, unit: T) -> u32 {
        let slot = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    unit: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        self.slots[slot as usize].unit = Some(unit);
        slot
    }

    /// The slot `owner` addresses, when its unit is still the one it was given to.
    pub(super) fn slot_of(&self, owner: Owner) -> Option<u32> {
        let raw = owner.get() - 1;
        let (slot, generation) = (raw & SLOT_MASK, raw >> SLOT_BITS);
        let s = self.slots.get(slot as usize)?;
        (s.generation == generation && s.unit.is_some()).then_some(slot)
    }

    /// The owner that addresses the unit now in `slot`.
    pub(super) fn owner(&self, slot: u32) -> Owner {
        let generation = self.slots[slot as usize].generation & (u32::MAX >> SLOT_BITS);
        Owner::new(((generation << SLOT_BITS) | slot) + 1).expect("slot + 1 is not zero")
    }

    /// The unit in a live slot.
    pub(super) fn get(&mut self, slot: u32) -> &mut T {
        self.slots[slot as usize]
            .unit
            .as_mut()
            .expect("a live slot")
    }

    /// Frees a slot: anything still addressed to its unit is ignored from now on.
    pub(super) fn release(&mut self, slot: u32) -> Option<T> {
        let s = &mut self.slots[slot as usize];
        let unit = s.unit.take()?;
        // Generations wrap within the owner's bits; an answer 4,096 units stale on the same
        // slot is the only one that could be mistaken.
        s.generation = (s.generation + 1) & (u32::MAX >> SLOT_BITS);
        self.free.push(slot);
        self.live -= 1;
        Some(unit)
    }

    /// Frees every slot, handing over the units.
    pub(super) fn release_all(&mut self) -> impl Iterator<Item = T> + '_ {
        (0..self.slots.len() as u32).filter_map(|slot| self.release(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_of_a_released_unit_addresses_nothing() {
        let mut s = Slots::default();
        let a = s.insert("a");
        let owner = s.owner(a);
        assert_eq!(s.slot_of(owner), Some(a));
        assert_eq!(s.release(a), Some("a"));
        let b = s.insert("b");
        assert_eq!(b, a, "the slot is reused");
        assert_eq!(s.slot_of(owner), None, "a new generation");
        assert_eq!(s.release_all().collect::<Vec<_>>(), ["b"]);
        assert_eq!(s.live(), 0);
    }
}
