//! Tracing: running a user closure over `Expr` handles so that every
//! operation it performs is appended to the query's arena.
//!
//! A thread-local points at the arena and parameter list being traced; the
//! guard restores the previous one on drop, so tracing is re-entrant and a
//! closure that panics leaves nothing behind.

use super::arena::{ExprArena, Node, NodeData, Value};
use crate::types::{DType, Scalar};
use smallvec::SmallVec;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// Run-time parameter values of one query, by slot.
pub type Params = SmallVec<[Scalar; 8]>;

pub(crate) struct TraceTarget {
    pub arena: *mut ExprArena,
    pub params: *mut Params,
    pub id: u32,
}

thread_local! {
    static CURRENT: Cell<*const TraceTarget> = const { Cell::new(std::ptr::null()) };
}

/// Identities are handed to threads in blocks of this many, so a query
/// takes its identity without an atomic operation.
const ID_BLOCK: u32 = 1 << 12;

static NEXT_BLOCK: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The next identity of this thread and the end of its block.
    static IDS: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// A fresh identity for an arena, so that an `Expr` from one query used in
/// another is caught instead of silently reading the wrong node.
pub(crate) fn fresh_id() -> u32 {
    IDS.try_with(|ids| {
        let (mut next, mut end) = ids.get();
        if next == end {
            next = block_start();
            end = next.wrapping_add(ID_BLOCK) & !(ID_BLOCK - 1);
        }
        ids.set((next.wrapping_add(1), end));
        next
    })
    // Only while the thread is torn down: any unused identity will do.
    .unwrap_or_else(|_| block_start())
}

/// The first identity of a fresh block. Block 0 starts at 1: identity 0 is
/// never handed out.
fn block_start() -> u32 {
    NEXT_BLOCK
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(ID_BLOCK)
        .max(1)
}

/// Runs `f` with `arena`/`params` as the tracing target.
pub(crate) fn with_target<R>(
    arena: &mut ExprArena,
    params: &mut Params,
    id: u32,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore(*const TraceTarget);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let target = TraceTarget { arena, params, id };
    let _restore = Restore(CURRENT.with(|c| c.replace(&target)));
    f()
}

fn current<R>(f: impl FnOnce(&mut ExprArena, &mut Params, u32) -> R) -> R {
    let ptr = CURRENT.with(|c| c.get());
    assert!(
        !ptr.is_null(),
        "computeq: an `Expr` was used outside the closure of a computeq adaptor \
         (expressions exist only while a query traces its closures)"
    );
    // SAFETY: the pointer was set by `with_target`, whose frame is still live
    // (the guard resets it before returning) and which holds the only
    // references to the arena and params for its duration.
    unsafe {
        let t = &*ptr;
        f(&mut *t.arena, &mut *t.params, t.id)
    }
}

/// Appends `node` to the arena being traced. `id` is the arena identity the
/// operands came from.
pub(crate) fn push(node: Node, ty: Option<DType>, ids: &[u32]) -> (Value, u32) {
    current(|arena, _, id| {
        for &operand_id in ids {
            assert!(
                operand_id == id,
                "computeq: an `Expr` from another query or closure was used here; \
                 expressions cannot be carried between queries"
            );
        }
        let v = match ty {
            Some(t) => arena.push_typed(node, t),
            None => arena.push(node),
        };
        (
            v.unwrap_or_else(|e| panic!("computeq: ill-typed expression: {e}")),
            id,
        )
    })
}

/// Most values one query may capture: a parameter's slot is a `u16`.
pub const MAX_PARAMS: usize = u16::MAX as usize + 1;

/// Adds a run-time parameter and returns its node.
pub(crate) fn param(value: Scalar) -> (Value, u32) {
    current(|arena, params, id| {
        // Past `MAX_PARAMS` the slot saturates instead of wrapping onto
        // another parameter, and the executor refuses the query (the
        // closure is the user's: a panic here would be inside it).
        let slot = u16::try_from(params.len()).unwrap_or(u16::MAX);
        params.push(value);
        // A parameter node has no operands and the type of its value:
        // well-typed by construction, so it skips the checks.
        let v = arena.push_unchecked(NodeData {
            node: Node::Param(slot),
            ty: value.dtype(),
        });
        (v, id)
    })
}
