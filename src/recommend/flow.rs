//! Data flow between queries: which recent query produced the buffer another
//! query reads. A collected `Vec` keeps the allocation of the plan's output
//! column (no copy), so the address and length of a collect's output
//! identify it when it is fed to the next query.
//!
//! The tracker is a small ring of the last [`SLOTS`] collects of at least
//! [`MIN_ELEMENTS`] elements: recording is one comparison for small
//! outputs and one short lock otherwise; lookup happens only for explain.
//! It is a heuristic: a freed buffer's address can be reused by another
//! allocation of the same length and type, so advice built on it says
//! "appears to".

use crate::expr::DType;
use crate::plan::{PhysicalPlan, PlanOutput, Terminal};
use crate::types::Input;
use parking_lot::Mutex;
use std::time::Duration;

/// Collects remembered.
pub const SLOTS: usize = 8;
/// Smaller outputs are not worth advice and are not recorded.
pub const MIN_ELEMENTS: usize = 4096;

/// A recent collect's output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Produced {
    /// Address of the first output column's data.
    pub addr: usize,
    /// Its length in elements.
    pub len: usize,
    /// Its element type.
    pub dtype: DType,
    /// Fingerprint of the producing query.
    pub fingerprint: u64,
    /// Whether the producer filtered (its collect compacted survivors).
    pub filtered: bool,
    /// Elements the producer read.
    pub elements_in: u64,
    /// The producer's execute time.
    pub execute: Duration,
}

/// The ring of recent collects (one per engine).
#[derive(Debug, Default)]
pub struct OutputTracker {
    ring: Mutex<([Option<Produced>; SLOTS], usize)>,
}

impl OutputTracker {
    /// Records the output of a finished run of `plan` (only a collect of at
    /// least [`MIN_ELEMENTS`] elements is kept).
    pub fn record(
        &self,
        fingerprint: u64,
        plan: &PhysicalPlan,
        out: &PlanOutput,
        elements_in: u64,
        execute: Duration,
    ) {
        let PlanOutput::Columns(cols) = out else {
            return;
        };
        let Some(c) = cols.first() else { return };
        if c.len() < MIN_ELEMENTS {
            return;
        }
        let last = plan.last();
        let filtered = matches!(last.terminal, Terminal::Collect(_)) && last.predicate.is_some();
        self.push(Produced {
            addr: c.as_ref().as_bytes().as_ptr() as usize,
            len: c.len(),
            dtype: c.dtype(),
            fingerprint,
            filtered,
            elements_in,
            execute,
        });
    }

    /// Records `p` directly.
    pub fn push(&self, p: Produced) {
        let mut r = self.ring.lock();
        let i = r.1 % SLOTS;
        r.0[i] = Some(p);
        r.1 = r.1.wrapping_add(1);
    }

    /// The recent collect whose output is the buffer `addr` of `len`
    /// elements of `dtype`, if any.
    pub fn find(&self, addr: usize, len: usize, dtype: DType) -> Option<Produced> {
        self.ring
            .lock()
            .0
            .iter()
            .flatten()
            .find(|p| p.addr == addr && p.len == len && p.dtype == dtype)
            .copied()
    }

    /// The producer of any of a query's host inputs, if one is a recent
    /// collect's output.
    pub fn producer_of(&self, inputs: &[Input<'_>]) -> Option<Produced> {
        inputs.iter().find_map(|i| match i {
            Input::Host(c) if c.len() >= MIN_ELEMENTS => {
                self.find(c.as_bytes().as_ptr() as usize, c.len(), c.dtype())
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(addr: usize) -> Produced {
        Produced {
            addr,
            len: 5000,
            dtype: DType::F32,
            fingerprint: addr as u64,
            filtered: false,
            elements_in: 5000,
            execute: Duration::ZERO,
        }
    }

    #[test]
    fn keeps_the_last_slots_and_matches_exactly() {
        let t = OutputTracker::default();
        for a in 0..(SLOTS + 2) {
            t.push(p(1000 + a));
        }
        assert_eq!(t.find(1000, 5000, DType::F32), None, "evicted");
        assert!(t.find(1000 + SLOTS + 1, 5000, DType::F32).is_some());
        assert_eq!(t.find(1000 + SLOTS + 1, 4999, DType::F32), None);
        assert_eq!(t.find(1000 + SLOTS + 1, 5000, DType::I32), None);
    }
}
