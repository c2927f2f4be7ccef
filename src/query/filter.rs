//! `filter`: keep the elements for which a predicate holds, in order.

use super::{Mode, Query};
use crate::expr::{Expr, Shape};
use crate::graph::LogicalOp;

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Keeps the elements for which `f` is true, in their order.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<f64> = [1.0, -2.0, 3.0].compute().filter(|x| x.gt(0.0)).collect();
    /// assert_eq!(v, vec![1.0, 3.0]);
    /// ```
    pub fn filter(mut self, f: impl FnOnce(S) -> Expr<bool>) -> Query<'a, S, M> {
        let mut predicate = self.trace_closure(f)[0];
        if self.held.is_some() {
            predicate = self.predicate_with_nulls(predicate);
        }
        self.traced.trace.ops.push(LogicalOp::Filter { predicate });
        self
    }
}
