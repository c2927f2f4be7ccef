//! `take` and `skip`: limit the stream by position. The counts are
//! parameters, so changing them reuses the plan.

use super::{Mode, Query};
use crate::expr::{Scalar, Shape};
use crate::graph::LogicalOp;

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Keeps at most the first `n` elements.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([1, 2, 3].compute().take(2).sum(), 3);
    /// ```
    pub fn take(mut self, n: usize) -> Self {
        let param = self.add_param(Scalar::U64(n as u64));
        self.traced.trace.ops.push(LogicalOp::Take { param });
        self
    }

    /// Drops the first `n` elements.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([1, 2, 3].compute().skip(2).sum(), 3);
    /// assert_eq!([1, 2, 3].compute().skip(9).sum(), 0);
    /// ```
    pub fn skip(mut self, n: usize) -> Self {
        let param = self.add_param(Scalar::U64(n as u64));
        self.traced.trace.ops.push(LogicalOp::Skip { param });
        self
    }
}
