//! `enumerate`: pair each element with its position (a `u64`).

use super::{Mode, Query};
use crate::expr::{Expr, Node, Shape};
use crate::graph::LogicalOp;

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Pairs each element with its position in the stream at this point.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<(u64, i32)> = [5, 6, 7].compute().skip(1).enumerate().collect();
    /// assert_eq!(v, vec![(0, 6), (1, 7)]);
    /// ```
    pub fn enumerate(mut self) -> Query<'a, (Expr<u64>, S), M> {
        let slot = self.traced.trace.enumerates;
        self.traced.trace.enumerates += 1;
        let value = self
            .traced
            .trace
            .arena
            .push(Node::Index(slot))
            .expect("index nodes are well-typed");
        self.traced
            .trace
            .ops
            .push(LogicalOp::Enumerate { slot, value });
        self.columns.insert(0, value);
        if let Some(h) = self.held.as_mut() {
            h.validity.insert(0, None);
        }
        self.reshape()
    }
}
