//! `map`: a new element computed from the current one.

use super::{Mode, Query};
use crate::expr::Shape;
use crate::graph::LogicalOp;

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Replaces each element by `f(element)`. The closure runs once, at
    /// this call, on traced values; captured Rust values become parameters.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let k = 3;
    /// let v: Vec<i32> = [1, 2].compute().map(|x| x * k + 1).collect();
    /// assert_eq!(v, vec![4, 7]);
    /// let pairs: Vec<(i32, bool)> = [1, 2].compute().map(|x| (x, x.gt(1))).collect();
    /// assert_eq!(pairs, vec![(1, false), (2, true)]);
    /// ```
    pub fn map<R: Shape>(mut self, f: impl FnOnce(S) -> R) -> Query<'a, R, M> {
        let outputs = self.trace_closure(f);
        if self.held.is_some() {
            self.validity_of_outputs(&outputs);
        }
        // `clone_from` copies into the existing inline storage; a `clone`
        // would go through `SmallVec`'s generic `extend`.
        self.columns.clone_from(&outputs);
        self.traced.trace.ops.push(LogicalOp::Map { outputs });
        self.reshape()
    }
}
