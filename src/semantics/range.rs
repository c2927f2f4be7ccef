//! The run-time range of a stage: which positions of its inputs it reads
//! (`zip` joins, `enumerate`, `skip`, `take`).

/// One step of the run-time range computation of a stage.
///
/// A stage's logical positions are `0..len`; input slot `s` at position `k`
/// reads element `k + offset[s]` and enumerate slot `e` yields
/// `k + index_offset[e]`. The steps are replayed at run time because the
/// `skip`/`take` counts are parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RangeOp {
    /// Input slot `s` joins (source or zip): `len = min(len, len(s))`.
    Join(u16),
    /// Enumerate slot `e` starts counting here.
    Enumerate(u16),
    /// `skip(n)` with `n` in parameter slot `p` (a `u64`).
    Skip(u16),
    /// `take(n)` with `n` in parameter slot `p` (a `u64`).
    Take(u16),
}
