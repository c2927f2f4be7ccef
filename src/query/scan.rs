//! Scans: running sums and running user combines, inclusive or exclusive.
//! A scan ends a fused stage; what follows reads its output.

use super::{Mode, Query};
use crate::expr::trace;
use crate::expr::{Element, Expr, ExprArena, Node, Numeric, Shape};
use crate::graph::{LogicalOp, Stream, TracedCombine};

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Traces `f(acc, x)` for elements of type `T` into its own arena; the
    /// identity becomes a parameter.
    pub(crate) fn trace_combine<T: Element>(
        &mut self,
        identity: T,
        f: impl FnOnce(Expr<T>, Expr<T>) -> Expr<T>,
    ) -> TracedCombine {
        let identity = self.add_param(identity.to_scalar());
        let mut program = ExprArena::new();
        let acc = program
            .push_typed(Node::Input(0), T::DTYPE)
            .expect("typed input");
        let x = program
            .push_typed(Node::Input(1), T::DTYPE)
            .expect("typed input");
        let id = trace::fresh_id();
        let out = trace::with_target(&mut program, &mut self.traced.params, id, || {
            f(Expr::from_parts(acc, id), Expr::from_parts(x, id))
        });
        TracedCombine {
            program,
            output: out.value,
            identity,
        }
    }
}

impl<'a, T: Numeric, M: Mode> Query<'a, Expr<T>, M> {
    /// Ends the stage with a scan. A null element adds nothing (it is
    /// replaced by the identity, as SQL's running `SUM(x) OVER (ROWS
    /// UNBOUNDED PRECEDING)` skips it): its output is the running value,
    /// never null.
    fn push_scan(mut self, combine: Option<TracedCombine>, exclusive: bool, identity: T) -> Self {
        if self.has_nulls() {
            self = self.fill_null(identity);
        }
        let column = self.columns[0];
        let index = self.traced.trace.ops.len() as u16;
        let result = self.add_stream(Stream::Scan(index), T::DTYPE);
        self.traced.trace.ops.push(LogicalOp::Scan {
            column,
            combine,
            exclusive,
            result,
        });
        self.columns.clear();
        self.columns.push(result);
        self.reset_validity();
        self
    }

    /// Inclusive running sum: element `i` is `x0 + .. + xi` (wrapping for
    /// integers).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<i32> = [1, 2, 3].compute().scan_sum().collect();
    /// assert_eq!(v, vec![1, 3, 6]);
    /// ```
    pub fn scan_sum(self) -> Self {
        self.push_scan(None, false, T::ZERO)
    }

    /// Exclusive running sum: element `i` is `x0 + .. + x(i-1)`, starting at 0.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<u32> = [1, 2, 3].compute().scan_sum_exclusive().collect();
    /// assert_eq!(v, vec![0, 1, 3]);
    /// ```
    pub fn scan_sum_exclusive(self) -> Self {
        self.push_scan(None, true, T::ZERO)
    }

    /// Inclusive scan with an associative `f` and its `identity`:
    /// element `i` is `f(..f(f(identity, x0), x1).., xi)`. Backends group
    /// the combines differently, so `f` must be associative.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<i64> = [3, 1, 4, 1, 5].compute().scan(i64::MIN, |a, b| a.max(b)).collect();
    /// assert_eq!(v, vec![3, 3, 4, 4, 5]);
    /// ```
    pub fn scan(mut self, identity: T, f: impl FnOnce(Expr<T>, Expr<T>) -> Expr<T>) -> Self {
        let c = self.trace_combine(identity, f);
        self.push_scan(Some(c), false, identity)
    }

    /// Exclusive scan: element `i` combines `identity, x0, .., x(i-1)`.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<f64> = [2.0, 3.0, 4.0].compute().scan_exclusive(1.0, |a, b| a * b).collect();
    /// assert_eq!(v, vec![1.0, 2.0, 6.0]);
    /// ```
    pub fn scan_exclusive(
        mut self,
        identity: T,
        f: impl FnOnce(Expr<T>, Expr<T>) -> Expr<T>,
    ) -> Self {
        let c = self.trace_combine(identity, f);
        self.push_scan(Some(c), true, identity)
    }
}
