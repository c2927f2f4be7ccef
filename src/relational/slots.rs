//! A cuckoo table from key words to groups, for grouping rows whose groups
//! fit in cache: every word sits in one of its two home slots, so a row
//! finds its group with two loads, a compare and a select, no probe loop
//! and no branch that depends on where the word lives (the hand-written
//! `FxHashMap` loop probes a control group and branches on the match).
//!
//! A slot carries the word, its group (numbered in first-appearance order)
//! and a value of the caller's (a fold's accumulator), which move together
//! when an insert displaces a word. An empty slot holds a *filler*: a word
//! whose homes are both other slots, so no lookup can ever match it and no
//! separate "occupied" test is needed on the hot path.

/// A key word: 32 or 64 bits, hashed as 64.
pub(super) trait SlotWord: Copy + Eq {
    fn wide(self) -> u64;
    fn narrow(x: u64) -> Self;
}

impl SlotWord for u32 {
    #[inline(always)]
    fn wide(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn narrow(x: u64) -> Self {
        x as u32
    }
}

impl SlotWord for u64 {
    #[inline(always)]
    fn wide(self) -> u64 {
        self
    }
    #[inline(always)]
    fn narrow(x: u64) -> Self {
        x
    }
}

/// The group of an empty slot.
const EMPTY: u32 = u32::MAX;

/// Displacements tried by an insert before the table is rebuilt with new
/// hash functions (or larger).
const MAX_KICKS: usize = 64;

/// The two home slots of `w` under multipliers `mul`, in a table of
/// `1 << (64 - shift)` slots.
#[inline(always)]
fn homes<W: SlotWord>(mul: [u64; 2], shift: u32, w: W) -> (usize, usize) {
    let x = w.wide();
    (
        (x.wrapping_mul(mul[0]) >> shift) as usize,
        (x.wrapping_mul(mul[1]) >> shift) as usize,
    )
}

/// What empty slots hold, in a table of at least three slots: a word `f`
/// (every slot but its two homes) and a word `g` whose homes are neither
/// of `f`'s (those two slots). Neither can match a lookup in a slot that
/// is not its home.
fn fillers<W: SlotWord>(mul: [u64; 2], shift: u32) -> (W, (usize, usize), W) {
    let f = W::narrow(0);
    let (a, b) = homes(mul, shift, f);
    let g = (1u64..)
        .map(W::narrow)
        .find(|&g| {
            let (c, d) = homes(mul, shift, g);
            c != a && c != b && d != a && d != b
        })
        .expect("an odd multiplier sends some word outside any two slots");
    (f, (a, b), g)
}

/// A slot's word and value, side by side: a row that finds its word in
/// a slot folds into the same cache line.
#[derive(Clone, Copy)]
struct Cell<W, T> {
    key: W,
    val: T,
}

/// Cuckoo table of `W` words to groups, each slot with a `T`.
pub(super) struct Slots<W, T> {
    cells: Vec<Cell<W, T>>,
    group: Vec<u32>,
    /// The slot of every group (its length: the groups stored).
    slot_of: Vec<usize>,
    /// Multipliers of the two hash functions (odd).
    mul: [u64; 2],
    /// `64 - log2(slots)`: a hash's top bits index a slot.
    shift: u32,
    /// The value of a new group.
    init: T,
}

impl<W: SlotWord, T: Copy> Slots<W, T> {
    /// A table for about `groups` groups (it grows past them), new groups'
    /// values starting at `init`.
    pub(super) fn with_groups(groups: usize, init: T) -> Self {
        let slots = (groups.max(16) * 4).next_power_of_two();
        let mut t = Slots {
            cells: Vec::new(),
            group: Vec::new(),
            slot_of: Vec::with_capacity(groups),
            mul: [0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F],
            shift: 0,
            init,
        };
        t.clear(slots);
        t
    }

    /// Empties the table to `slots` slots (a power of two), with fillers.
    fn clear(&mut self, slots: usize) {
        debug_assert!(slots.is_power_of_two() && slots >= 64);
        self.shift = 64 - slots.trailing_zeros();
        let (f, (a, b), g) = fillers::<W>(self.mul, self.shift);
        let empty = Cell {
            key: f,
            val: self.init,
        };
        self.cells.clear();
        self.cells.resize(slots, empty);
        (self.cells[a].key, self.cells[b].key) = (g, g);
        self.group.clear();
        self.group.resize(slots, EMPTY);
    }

    /// The two home slots of `w`.
    #[inline(always)]
    fn homes(&self, w: W) -> (usize, usize) {
        homes(self.mul, self.shift, w)
    }

    /// Folds each row's value into its word's group, in row order; `new(w,
    /// i)` for each word first seen at row `i` (groups are numbered in that
    /// order). `rows`: the (word, value) of rows `start..`, as an iterator
    /// over the columns (no bounds check per row, the columns' pointers in
    /// registers).
    #[inline(always)]
    pub(super) fn fold_rows(
        &mut self,
        start: usize,
        mut rows: impl Iterator<Item = (W, T)>,
        fold: impl Fn(T, T) -> T,
        mut new: impl FnMut(W, usize),
    ) {
        let mut i = start;
        // A row read with one whose word was missing: looked up first
        // when the loop resumes.
        let mut held: Option<(W, T)> = None;
        loop {
            // The table in locals for a run of known words (registers, not
            // reloads); an insert may move it.
            let cells = self.cells.as_mut_ptr();
            let (mul, shift) = (self.mul, self.shift);
            // The slot holding `w`, when one does.
            let find = |w: W| {
                let (a, b) = homes(mul, shift, w);
                debug_assert!(a < self.cells.len() && b < self.cells.len());
                // SAFETY: a home is a hash's top `64 - shift` bits, below
                // `1 << (64 - shift) == cells.len()` (see `clear`).
                let ka = unsafe { (*cells.add(a)).key };
                // A select, not a branch: which home holds a word is a
                // coin toss. Whether the word is present is read again
                // from the selected slot (in cache): testing both homes
                // compiles to a branch on the first (and selecting that
                // test too measured slower).
                let s = std::hint::select_unpredictable(ka == w, a, b);
                // SAFETY: as above.
                (s, unsafe { (*cells.add(s)).key } == w)
            };
            // SAFETY (both): `s` is a home of a word, in bounds as above.
            let add = |s: usize, x: T| unsafe {
                let v = &mut (*cells.add(s)).val;
                *v = fold(*v, x);
            };
            let (w, x) = 'missing: {
                if let Some((w, x)) = held.take() {
                    match find(w) {
                        (s, true) => {
                            add(s, x);
                            i += 1;
                        }
                        _ => break 'missing (w, x),
                    }
                }
                // Two rows at a time: both looked up before either folds
                // (a fold changes no word), then folded in row order.
                loop {
                    let Some((w1, x1)) = rows.next() else {
                        return;
                    };
                    let Some((w2, x2)) = rows.next() else {
                        match find(w1) {
                            (s, true) => {
                                add(s, x1);
                                return;
                            }
                            _ => break 'missing (w1, x1),
                        }
                    };
                    let ((s1, hit1), (s2, hit2)) = (find(w1), find(w2));
                    if !hit1 {
                        held = Some((w2, x2));
                        break 'missing (w1, x1);
                    }
                    add(s1, x1);
                    i += 1;
                    if !hit2 {
                        break 'missing (w2, x2);
                    }
                    add(s2, x2);
                    i += 1;
                }
            };
            let s = self.insert(w);
            new(w, i);
            self.cells[s].val = fold(self.cells[s].val, x);
            i += 1;
        }
    }

    /// Inserts `w` (absent) as the next group; its slot.
    #[cold]
    #[inline(never)]
    fn insert(&mut self, w: W) -> usize {
        let g = self.slot_of.len();
        assert!(g < EMPTY as usize, "more than 2^32 - 1 groups");
        if (g + 1) * 3 > self.cells.len() {
            self.rebuild(self.cells.len() * 2);
        }
        self.slot_of.push(0);
        let mut item = (w, g as u32, self.init);
        let mut tries = 0;
        while let Some(homeless) = self.place(item) {
            // A cycle of displacements: new hash functions, and from the
            // third try a larger table (a rare event below a third full).
            item = homeless;
            tries += 1;
            self.new_hashes();
            self.rebuild(self.cells.len() << (tries >= 3) as u32);
        }
        self.slot_of[g]
    }

    /// Other hash functions (deterministic: the same rows give the same
    /// table), after a cycle of displacements.
    fn new_hashes(&mut self) {
        self.mul = [
            self.mul[0].wrapping_mul(0xD6E8_FEB8_6659_FD93) | 1,
            self.mul[1].wrapping_mul(0xFF51_AFD7_ED55_8CCD) | 1,
        ];
    }

    /// Places `item` by displacing words along their other homes; the
    /// word left without a slot after `MAX_KICKS` displacements, if any.
    fn place(&mut self, mut item: (W, u32, T)) -> Option<(W, u32, T)> {
        let (a, b) = self.homes(item.0);
        let mut s = if self.group[a] == EMPTY || self.group[b] != EMPTY {
            a
        } else {
            b
        };
        for _ in 0..MAX_KICKS {
            let was = self.group[s];
            let old = (self.cells[s].key, was, self.cells[s].val);
            let (key, group, val) = item;
            (self.cells[s], self.group[s]) = (Cell { key, val }, group);
            self.slot_of[item.1 as usize] = s;
            if was == EMPTY {
                return None;
            }
            item = old;
            let (a, b) = self.homes(item.0);
            s = if s == a { b } else { a };
        }
        Some(item)
    }

    /// Re-places every stored word (keeping groups and values) in a table
    /// of `slots` slots with the current hash functions, changing them
    /// until every word has a slot.
    fn rebuild(&mut self, slots: usize) {
        let items: Vec<(W, u32, T)> = (0..self.cells.len())
            .filter(|&s| self.group[s] != EMPTY)
            .map(|s| (self.cells[s].key, self.group[s], self.cells[s].val))
            .collect();
        let mut slots = slots;
        let mut tries = 0;
        loop {
            self.clear(slots);
            if items.iter().all(|&item| self.place(item).is_none()) {
                return;
            }
            tries += 1;
            self.new_hashes();
            if tries % 3 == 0 {
                slots *= 2;
            }
        }
    }

    /// The groups' values, by group.
    pub(super) fn into_vals(self) -> Vec<T> {
        self.slot_of.iter().map(|&s| self.cells[s].val).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Counts per word through the table, against a map: groups numbered
    /// in first-appearance order, each with the row it first appears at
    /// (counted from 7), every row's value folded into its own.
    fn check<W: SlotWord + std::hash::Hash + std::fmt::Debug>(words: &[W], cap: usize) {
        let mut t: Slots<W, u64> = Slots::with_groups(cap, 0);
        let mut order = Vec::new();
        t.fold_rows(
            7,
            words.iter().map(|&w| (w, 1)),
            |a, x| a + x,
            |w, i| order.push((w, i)),
        );
        let mut want: FxHashMap<W, u64> = FxHashMap::default();
        let mut want_order = Vec::new();
        for (i, &w) in words.iter().enumerate() {
            let c = want.entry(w).or_insert(0);
            if *c == 0 {
                want_order.push((w, 7 + i));
            }
            *c += 1;
        }
        assert_eq!(order, want_order);
        let counts: Vec<u64> = want_order.iter().map(|(w, _)| want[w]).collect();
        assert_eq!(t.into_vals(), counts);
    }

    #[test]
    fn words_find_their_groups_in_first_appearance_order() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pool: Vec<u64> = (0..1000).map(|_| next()).collect();
        let rows: Vec<u64> = (0..20_000)
            .map(|_| pool[(next() % 1000) as usize])
            .collect();
        check(&rows, 1000);
        // Odd and tiny lengths (the fold takes rows two at a time), and a
        // new word twice in a row.
        for n in [0, 1, 2, 3, 19_999] {
            check(&rows[..n], 1000);
        }
        check(&[5u64, 5, 6, 6, 5, 7, 7, 7], 4);
        // Expected far fewer groups than come: the table grows.
        check(&rows, 4);
        let narrow: Vec<u32> = rows.iter().map(|&w| w as u32).collect();
        check(&narrow, 1000);
        check(&narrow, 1);
        // Small words are what the fillers are made of: none is taken for
        // a stored word.
        let small: Vec<u32> = (0..5000u32).map(|i| i % 300).collect();
        check(&small, 16);
        let small: Vec<u64> = (0..5000u64).rev().map(|i| i % 700).collect();
        check(&small, 700);
    }

    #[test]
    fn words_sharing_both_homes_force_new_hash_functions() {
        // Words whose two homes are the same pair in the first table:
        // more than two of them cannot all stay, so inserting them takes
        // rebuilds with other multipliers (or a larger table).
        let t: Slots<u32, u64> = Slots::with_groups(16, 0);
        let target = t.homes(12345);
        let clash: Vec<u32> = (0u32..)
            .filter(|&w| t.homes(w) == target)
            .take(12)
            .collect();
        assert_eq!(clash.len(), 12);
        let rows: Vec<u32> = clash.iter().chain(&clash).chain(&clash).copied().collect();
        check(&rows, 16);
        let mut t = t;
        let first = t.mul;
        t.fold_rows(0, clash.iter().map(|&w| (w, 1)), |a, x| a + x, |_, _| ());
        assert_ne!(t.mul, first, "the clash took new hash functions");
    }
}
