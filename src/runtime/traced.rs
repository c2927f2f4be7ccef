//! The heap part of a query under construction: its trace and parameter
//! values, behind one box that is recycled per thread. Adaptors and
//! terminals then move a pointer instead of the ~800 bytes of the trace,
//! and a repeated query allocates nothing for its trace (the arena and the
//! lists keep their capacity from the previous query on the thread).

use crate::expr::Params;
use crate::graph::QueryTrace;
use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// A query's trace and its parameter values.
#[derive(Debug, Default)]
pub(crate) struct Traced {
    pub(crate) trace: QueryTrace,
    pub(crate) params: Params,
}

/// Boxes kept per thread for the next query; a few, for queries built
/// inside the closures of others (`zip` sources, nested queries).
const POOLED: usize = 4;

/// Nodes an arena may hold and still be kept: a query that traced a huge
/// program does not pin its memory on the thread.
const POOLED_NODES: usize = 1024;

/// Nodes a fresh arena has room for: a typical chain without regrowing.
const FRESH_NODES: usize = 16;

thread_local! {
    // Boxes, not values: a query takes the box itself, so that moving
    // the query moves a pointer.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<Traced>>> = const { RefCell::new(Vec::new()) };
}

/// An owned [`Traced`] that goes back to its thread's pool when dropped.
#[derive(Debug)]
pub(crate) struct TracedBox(ManuallyDrop<Box<Traced>>);

impl TracedBox {
    /// An empty trace, recycled when the thread has one.
    pub(crate) fn new() -> TracedBox {
        let recycled = POOL
            .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
            .ok()
            .flatten();
        TracedBox(ManuallyDrop::new(recycled.unwrap_or_else(|| {
            let mut t = Box::<Traced>::default();
            t.trace.arena.reserve(FRESH_NODES);
            t
        })))
    }
}

impl Deref for TracedBox {
    type Target = Traced;
    fn deref(&self) -> &Traced {
        &self.0
    }
}

impl DerefMut for TracedBox {
    fn deref_mut(&mut self) -> &mut Traced {
        &mut self.0
    }
}

impl Drop for TracedBox {
    fn drop(&mut self) {
        // SAFETY: the box is taken exactly once, here, and `self.0` is
        // never used again.
        let mut b = unsafe { ManuallyDrop::take(&mut self.0) };
        if b.trace.arena.capacity() > POOLED_NODES {
            return;
        }
        b.trace.clear();
        b.params.clear();
        // `try_with` fails only while the thread is torn down (the box is
        // then freed); a busy or full pool frees it too.
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                if p.len() < POOLED {
                    p.push(b);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{DType, Node, Scalar};

    #[test]
    fn a_recycled_trace_is_empty_and_keeps_its_capacity() {
        let mut t = TracedBox::new();
        for i in 0..40 {
            t.trace
                .arena
                .push_typed(Node::Param(i), DType::F32)
                .expect("typed");
            t.params.push(Scalar::F32(i as f32));
        }
        t.trace.enumerates = 3;
        let cap = t.trace.arena.capacity();
        drop(t);
        let t = TracedBox::new();
        assert!(t.trace.arena.is_empty());
        assert!(t.params.is_empty());
        assert_eq!(t.trace, QueryTrace::default());
        assert_eq!(t.trace.arena.capacity(), cap);
    }

    /// Past 65,536 captured values a `u16` slot used to wrap and read
    /// another parameter's value: now the terminal reports it.
    #[test]
    fn more_captured_values_than_slots_is_an_error_not_a_wrong_answer() {
        use crate::prelude::*;
        let engine = Engine::default();
        let over = crate::expr::MAX_PARAMS as i64 + 2;
        let r = engine
            .query(&[0i64][..])
            .map(|x| (0..over).fold(x, |acc, i| acc + i))
            .try_sum();
        let e = r.expect_err("the slots of the last two values wrapped");
        assert_eq!(e.kind(), crate::ErrorKind::TooManyParameters);
        assert!(e.to_string().contains("65536"), "{e}");
        // The same through a plain terminal: a panic with the message.
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine
                .query(&[0i64][..])
                .map(|x| (0..over).fold(x, |acc, i| acc + i))
                .sum()
        }))
        .expect_err("panics in the default mode");
        let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(text.contains("captures"), "{text}");
    }

    #[test]
    fn slots_saturate_instead_of_wrapping() {
        let mut t = TracedBox::new();
        let inner = &mut *t;
        let (arena, params) = (&mut inner.trace.arena, &mut inner.params);
        params.extend((0..crate::expr::MAX_PARAMS).map(|i| Scalar::I64(i as i64)));
        let v = crate::expr::trace::with_target(arena, params, 1, || {
            crate::expr::trace::param(Scalar::I64(-1)).0
        });
        assert_eq!(t.trace.arena.get(v).node, Node::Param(u16::MAX));
        assert_eq!(t.params.len(), crate::expr::MAX_PARAMS + 1);
    }
}
