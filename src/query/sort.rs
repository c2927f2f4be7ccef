//! Ordering: `sort`, `sort_desc`, `sort_by_key`, `argsort`, `top_k`,
//! `bottom_k` and `top_k_by_key`. A sort ends a fused stage (the stage
//! computes the keys and materializes the columns, then sorts them); the
//! query goes on over the sorted columns.
//!
//! Keys order by the canonical total order (`NaN` one value, above
//! `+inf`; `-0.0` before `+0.0`). Every sort is stable; a descending key
//! is the complement of the ascending one, so ties keep their input order
//! there too, and `NaN` comes first.

use super::{Mode, Query};
use crate::expr::{Element, Expr, Shape, Value};
use crate::graph::{LogicalOp, Stream};
use crate::semantics::order::SortKey;
use smallvec::SmallVec;

/// A descending sort key: `sort_by_key(|(a, b)| (a, b.desc()))` orders
/// by `a` ascending, then by `b` descending.
#[derive(Copy, Clone, Debug)]
pub struct Desc<E>(pub E);

impl<T: Element> Expr<T> {
    /// This expression as a descending sort key (see
    /// [`Query::sort_by_key`]).
    pub fn desc(self) -> Desc<Expr<T>> {
        Desc(self)
    }
}

/// What a `sort_by_key` closure may return: one key (`x`, `x.desc()`) or
/// a tuple of up to four, most significant first ("then by").
pub trait SortKeys {
    /// Appends the keys with their directions and arena ids.
    fn push_keys(&self, out: &mut SmallVec<[(SortKey, u32); 2]>);
}

impl<T: Element> SortKeys for Expr<T> {
    fn push_keys(&self, out: &mut SmallVec<[(SortKey, u32); 2]>) {
        out.push((
            SortKey {
                value: self.value,
                descending: false,
            },
            self.arena_id,
        ));
    }
}

impl<T: Element> SortKeys for Desc<Expr<T>> {
    fn push_keys(&self, out: &mut SmallVec<[(SortKey, u32); 2]>) {
        out.push((
            SortKey {
                value: self.0.value,
                descending: true,
            },
            self.0.arena_id,
        ));
    }
}

macro_rules! tuple_keys {
    ($($n:ident),*) => {
        impl<$($n: SortKeys),*> SortKeys for ($($n,)*) {
            #[allow(non_snake_case)]
            fn push_keys(&self, out: &mut SmallVec<[(SortKey, u32); 2]>) {
                let ($($n,)*) = self;
                $($n.push_keys(out);)*
            }
        }
    };
}
tuple_keys!(A, B);
tuple_keys!(A, B, C);
tuple_keys!(A, B, C, D);

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Ends the stage with a sort of every column by `keys`; the query
    /// goes on over the sorted columns.
    fn push_sort(mut self, mut keys: SmallVec<[SortKey; 2]>) -> Self {
        // Null keys last (or first): an "is null" flag before each key
        // that may be null, and the columns' validities travel through the
        // sort beside them.
        let mut carried: SmallVec<[Value; 4]> = SmallVec::new();
        if self.has_nulls() {
            keys = self.sort_keys_with_nulls(keys);
            if let Some(h) = self.held.as_ref() {
                crate::graph::push_unique(&mut carried, h.validity.iter().flatten().copied());
            }
        }
        let index = self.traced.trace.ops.len() as u16;
        let mut columns = self.columns.clone();
        let width = columns.len();
        columns.extend(carried.iter().copied());
        let mut dtypes: SmallVec<[crate::expr::DType; 4]> = SmallVec::new();
        S::dtypes(&mut dtypes);
        dtypes.extend(carried.iter().map(|_| crate::expr::DType::Bool));
        let results: SmallVec<[Value; 4]> = dtypes
            .iter()
            .enumerate()
            .map(|(j, &ty)| {
                self.add_stream(
                    Stream::Sort {
                        op: index,
                        column: j as u16,
                    },
                    ty,
                )
            })
            .collect();
        self.traced.trace.ops.push(LogicalOp::Sort {
            keys,
            columns,
            results: results.clone(),
        });
        if let Some(h) = self.held.as_mut() {
            for v in h.validity.iter_mut().flatten() {
                let at = carried.iter().position(|c| c == v).expect("carried");
                *v = results[width + at];
            }
        }
        self.columns = results[..width].iter().copied().collect();
        self
    }

    /// Traces a key closure.
    fn trace_keys<K: SortKeys>(&mut self, f: impl FnOnce(S) -> K) -> SmallVec<[SortKey; 2]> {
        let keys = self.trace_with(f);
        let mut out = SmallVec::new();
        keys.push_keys(&mut out);
        out.into_iter()
            .map(|(k, id)| {
                assert!(
                    id == self.arena_id,
                    "computeq: a sort key from another query or closure was used here; \
                     expressions cannot be carried between queries"
                );
                k
            })
            .collect()
    }

    /// The elements ordered by the keys `f` computes (a stable sort: equal
    /// keys keep their order). Return a tuple for "then by" and mark a
    /// descending component with [`Expr::desc`].
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [3i32, 1, 2, 1];
    /// let ys = [10.0f32, 20.0, 30.0, 40.0];
    /// // By x ascending, then y descending.
    /// let v: Vec<_> = xs.compute().zip(&ys).sort_by_key(|(x, y)| (x, y.desc())).collect();
    /// assert_eq!(v, vec![(1, 40.0), (1, 20.0), (2, 30.0), (3, 10.0)]);
    /// ```
    pub fn sort_by_key<K: SortKeys>(mut self, f: impl FnOnce(S) -> K) -> Self {
        let keys = self.trace_keys(f);
        self.push_sort(keys)
    }

    /// The `k` elements with the largest keys, largest first (ties: the
    /// earlier element first): `sort_by_key` on the descending keys, then
    /// `take(k)`, computed by selection without sorting the rest.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let names = [0u32, 1, 2, 3];
    /// let score = [0.5f32, 0.9, 0.1, 0.7];
    /// let best: Vec<_> = names.compute().zip(&score).top_k_by_key(2, |(_, s)| s).collect();
    /// assert_eq!(best, vec![(1, 0.9), (3, 0.7)]);
    /// ```
    pub fn top_k_by_key<K: SortKeys>(mut self, k: usize, f: impl FnOnce(S) -> K) -> Self {
        let mut keys = self.trace_keys(f);
        for key in &mut keys {
            key.descending = !key.descending;
        }
        self.push_sort(keys).take(k)
    }

    /// The `k` elements with the smallest keys, smallest first:
    /// `sort_by_key(f).take(k)`, computed by selection.
    pub fn bottom_k_by_key<K: SortKeys>(mut self, k: usize, f: impl FnOnce(S) -> K) -> Self {
        let keys = self.trace_keys(f);
        self.push_sort(keys).take(k)
    }
}

impl<'a, T: Element, M: Mode> Query<'a, Expr<T>, M> {
    /// The elements in ascending order (stable; `NaN` last, `-0.0`
    /// before `+0.0`).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [3.0f32, f32::NAN, -1.0, 0.0, -0.0];
    /// let v: Vec<f32> = xs.compute().sort().collect();
    /// assert_eq!(&v[..3], &[-1.0, -0.0, 0.0]);
    /// assert!(v[1].is_sign_negative() && v[4].is_nan());
    /// // The query goes on after the sort.
    /// let s: f32 = xs.compute().filter(|x| x.ge(-1.0)).sort().skip(1).take(2).sum();
    /// assert_eq!(s, 0.0);
    /// ```
    pub fn sort(self) -> Self {
        self.sort_by_key(|x| x)
    }

    /// The elements in descending order (`NaN` first).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<u32> = [2u32, 7, 5].compute().sort_desc().collect();
    /// assert_eq!(v, [7, 5, 2]);
    /// ```
    pub fn sort_desc(self) -> Self {
        self.sort_by_key(|x| x.desc())
    }

    /// The positions (in the stream reaching it) that would sort it: a
    /// stable `argsort`, `u64` positions.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [0.5f32, -1.0, 0.5, 0.0];
    /// let order: Vec<u64> = xs.compute().argsort().collect();
    /// assert_eq!(order, [1, 3, 0, 2]);
    /// ```
    pub fn argsort(self) -> Query<'a, Expr<u64>, M> {
        self.enumerate().sort_by_key(|(_, x)| x).map(|(i, _)| i)
    }

    /// The `k` largest elements, largest first (`NaN` counts as the
    /// largest): `sort_desc().take(k)`, computed by selection.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1000).collect();
    /// let top: Vec<i64> = xs.compute().top_k(3).collect();
    /// assert_eq!(top, [999, 998, 997]);
    /// ```
    pub fn top_k(self, k: usize) -> Self {
        self.sort_desc().take(k)
    }

    /// The `k` smallest elements, smallest first: `sort().take(k)`.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let low: Vec<u32> = [5u32, 1, 4, 1].compute().bottom_k(3).collect();
    /// assert_eq!(low, [1, 1, 4]);
    /// ```
    pub fn bottom_k(self, k: usize) -> Self {
        self.sort().take(k)
    }
}
