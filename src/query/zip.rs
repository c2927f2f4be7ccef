//! `zip`: pair each element with the element of another input at the same
//! position; stops at the shorter one.

use super::{IntoSource, Mode, Query};
use crate::expr::{Element, Expr, Shape};
use crate::graph::{LogicalOp, Stream};

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Pairs elements with `other`'s, stopping at the shorter input.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let a = vec![1.0f32, 2.0, 3.0];
    /// let b = vec![4.0f32, 5.0];
    /// let dot: f32 = a.compute().zip(&b).map(|(x, y)| x * y).sum();
    /// assert_eq!(dot, 14.0);
    /// ```
    pub fn zip<Z: IntoSource<'a>>(mut self, other: Z) -> Query<'a, (S, Expr<Z::Elem>), M> {
        let dtype = <Z::Elem as Element>::DTYPE;
        let (value, n, validity) = if Z::PLAIN {
            let n = self.inputs.len() as u16;
            (self.add_input(other.into_input(), dtype), n, None)
        } else {
            let parts = other.into_parts();
            let (value, n) = self.add_source(parts.values, dtype);
            (value, n, parts.validity)
        };
        self.traced.trace.ops.push(LogicalOp::Zip {
            stream: Stream::Input(n),
            value,
        });
        self.push_source_column(value, validity);
        self.reshape()
    }
}
