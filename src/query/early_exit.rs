//! Early-exit terminals: `first`, `last`, `nth`, `find`, `position`. Each
//! is a reduce whose aggregates a prefix (or, for `last`, a suffix) of the
//! stream settles, so the CPU backends stop reading at the answer: the
//! sequential ones at the block that holds it, `cpu-parallel` by not
//! starting the leaves past a settled one.

use super::{Mode, Query};
use crate::expr::{DType, Expr, Node, Scalar, Shape};
use crate::graph::{LogicalAgg, LogicalTerminal};
use crate::plan::{AggKind, PlanOutput};
use smallvec::SmallVec;

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// `kind` (first or last) of every column, and an `any` of `true`
    /// that says whether there was a survivor; `read` sees the columns'
    /// values.
    fn pick<R>(mut self, kind: AggKind, read: impl FnOnce(&[Scalar]) -> R) -> M::Out<Option<R>> {
        if self.has_nulls() {
            // The first (last) element without a null.
            self = self.drop_nulls();
        }
        let cols = self.columns.clone();
        // A constant has no operands and its own type: well-typed.
        let yes = self
            .traced
            .trace
            .arena
            .push_typed(Node::Const(Scalar::Bool(true)), DType::Bool)
            .expect("a constant is well-typed");
        let mut list: SmallVec<[LogicalAgg; 4]> = cols
            .iter()
            .map(|&c| LogicalAgg {
                kind: kind.clone(),
                column: Some(c),
            })
            .collect();
        list.push(LogicalAgg {
            kind: AggKind::Any,
            column: Some(yes),
        });
        let n = cols.len();
        self.finish(LogicalTerminal::Reduce(list), move |o| match o {
            PlanOutput::Aggregates(a) => a[n].as_bool().then(|| read(&a[..n])),
            PlanOutput::Columns(_) => unreachable!("a reduce plan returned columns"),
        })
    }

    /// The first element (`None` when empty). Reading stops at it. Over
    /// Arrow data with nulls: the first element without a null.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([3, 1, 4].compute().map(|x| x * 10).first(), Some(30));
    /// assert_eq!(Vec::<f32>::new().compute().first(), None);
    /// ```
    pub fn first(self) -> M::Out<Option<S::Host>> {
        self.pick(AggKind::First, S::host_from_scalars)
    }

    /// The last element (`None` when empty). `cpu-simd` and `cpu-parallel`
    /// read the stream's leaves from the end and stop at the one that
    /// holds it.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([3, 1, 4, 1].compute().filter(|x| x.gt(1)).last(), Some(4));
    /// ```
    pub fn last(self) -> M::Out<Option<S::Host>> {
        self.pick(AggKind::Last, S::host_from_scalars)
    }

    /// The element at position `i` (`None` past the end, or where it is
    /// null), as `Iterator::nth`: `skip(i)` then [`Query::first`].
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([5u32, 6, 7].compute().nth(2), Some(7));
    /// assert_eq!([5u32, 6, 7].compute().nth(3), None);
    /// ```
    pub fn nth(self, i: usize) -> M::Out<Option<S::Host>> {
        if self.has_nulls() {
            // `None` when the element at `i` is null.
            return self.skip(i).take(1).first();
        }
        self.skip(i).first()
    }

    /// The first element for which `f` holds (`None` if none does):
    /// `filter(f)` then [`Query::first`]. Reading stops at it.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs: Vec<f32> = (0..1_000_000).map(|i| i as f32).collect();
    /// assert_eq!(xs.compute().find(|x| (x * x).gt(1e6)), Some(1001.0));
    /// ```
    pub fn find(self, f: impl FnOnce(S) -> Expr<bool>) -> M::Out<Option<S::Host>> {
        self.filter(f).first()
    }

    /// The position of the first element for which `f` holds (`None` if
    /// none does), counted in the stream that reaches this call (after
    /// earlier filters). Reading stops at it.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// assert_eq!([2, 4, 5, 6].compute().position(|x| (x % 2).eq(1)), Some(2));
    /// assert_eq!([2, 4].compute().position(|x| x.gt(9)), None);
    /// ```
    pub fn position(self, f: impl FnOnce(S) -> Expr<bool>) -> M::Out<Option<usize>> {
        let mut q = self.enumerate().filter(|(_, x)| f(x));
        // The filter dropped the rows where the predicate is null; the
        // position is never null.
        q.reset_validity();
        q.pick(AggKind::First, |v| v[0].to_bits() as usize)
    }
}
