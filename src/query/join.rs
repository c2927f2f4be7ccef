//! Equi-joins: `join`, `semi_join`, `anti_join`, `is_in` and `not_in`.
//!
//! A join ends a fused stage (the stage computes the probe keys and
//! materializes its columns, then joins them); the query goes on over the
//! joined columns. The other query, the build side, is a query of its own:
//! it runs first (its run is recorded like any other), collecting its keys
//! and the columns this query's optimized plan reads, which become inputs
//! of this one, read whole, not by position. A build
//! side that only reads plain columns (`ys.compute()`, with `zip`s of
//! equal-length columns) is not run at all: the join reads the columns.
//!
//! Keys compare as group keys (`-0.0` is `+0.0`, every NaN one key). The
//! result is in probe order (this query's order), and the build rows that
//! match one probe row come in build order.

use super::{IntoSource, Mode, Query};
use crate::expr::{DType, Element, Expr, Node, Shape, Value};
use crate::graph::{LogicalOp, LogicalTerminal, Stream};
use crate::runtime::executor::{Prepared, Side};
use crate::semantics::order::JoinKind;
use crate::types::{ColumnRef, Input};
use smallvec::SmallVec;

/// What a join's key closures may return: one expression or a tuple of up
/// to four (compared together). Both closures return the same type, so
/// the keys have the same types on both sides.
pub trait JoinKeys {
    /// Appends the keys' values with their arena ids.
    fn push_keys(&self, out: &mut SmallVec<[(Value, u32); 2]>);
}

impl<T: Element> JoinKeys for Expr<T> {
    fn push_keys(&self, out: &mut SmallVec<[(Value, u32); 2]>) {
        out.push((self.value, self.arena_id));
    }
}

macro_rules! tuple_keys {
    ($($n:ident),*) => {
        impl<$($n: JoinKeys),*> JoinKeys for ($($n,)*) {
            #[allow(non_snake_case)]
            fn push_keys(&self, out: &mut SmallVec<[(Value, u32); 2]>) {
                let ($($n,)*) = self;
                $($n.push_keys(out);)*
            }
        }
    };
}
tuple_keys!(A, B);
tuple_keys!(A, B, C);
tuple_keys!(A, B, C, D);

/// An empty host column of `ty`: an input the executor fills when the
/// query runs (a build side's columns, a column a query over Arrow data
/// owns).
pub(super) fn placeholder(ty: DType) -> Input<'static> {
    Input::Host(match ty {
        DType::Bool => ColumnRef::Bool(&[]),
        DType::I32 => ColumnRef::I32(&[]),
        DType::U32 => ColumnRef::U32(&[]),
        DType::I64 => ColumnRef::I64(&[]),
        DType::U64 => ColumnRef::U64(&[]),
        DType::F32 => ColumnRef::F32(&[]),
        DType::F64 => ColumnRef::F64(&[]),
    })
}

impl<'a, S: Shape, M: Mode> Query<'a, S, M> {
    /// Traces a key closure over this query's columns.
    fn trace_join_keys<K: JoinKeys>(&mut self, f: impl FnOnce(S) -> K) -> SmallVec<[Value; 2]> {
        let keys = self.trace_with(f);
        let mut out = SmallVec::new();
        keys.push_keys(&mut out);
        out.into_iter()
            .map(|(v, id)| {
                assert!(
                    id == self.arena_id,
                    "computeq: a join key from another query or closure was used here; \
                     expressions cannot be carried between queries"
                );
                v
            })
            .collect()
    }

    /// The query input a plain column of this query reads, if `v` is one
    /// and the query only reads and zips equal-length inputs.
    fn plain_input(&self, v: Value) -> Option<Input<'a>> {
        let t = &self.traced.trace;
        let plain = t
            .ops
            .iter()
            .all(|op| matches!(op, LogicalOp::Source { .. } | LogicalOp::Zip { .. }))
            && self.inputs.iter().all(|i| i.len() == self.inputs[0].len())
            && self.sides.is_empty();
        match (plain, t.arena.get(v).node) {
            (true, Node::Input(slot)) => match t.streams.get(slot as usize) {
                Some(Stream::Input(k)) => self.inputs.get(*k as usize).copied(),
                _ => None,
            },
            _ => None,
        }
    }

    /// The validity of a whole join key (every component valid), when
    /// some component may be null.
    fn key_validity(&mut self, keys: &[Value]) -> Option<Value> {
        if !self.has_nulls() {
            return None;
        }
        let vs = keys.iter().filter_map(|&k| self.validity_of(k)).collect();
        self.and_all(vs)
    }

    /// Adds `other` as the build side of a join on `other_key`, returning
    /// the query inputs of its keys, then of its columns when `columns`,
    /// then of the validities of those columns that may be null; and for
    /// each column, which of those validities is its own. Build rows
    /// whose key is null are dropped (a null matches nothing); `flag`
    /// puts a zero "is null" key before the keys, to match the probe's.
    fn add_build_side<S2: Shape, M2: Mode, K: JoinKeys>(
        &mut self,
        mut other: Query<'a, S2, M2>,
        other_key: impl FnOnce(S2) -> K,
        columns: bool,
        flag: bool,
    ) -> (SmallVec<[u16; 4]>, SmallVec<[Option<usize>; 4]>) {
        let mut keys = other.trace_join_keys(other_key);
        if let Some(v) = other.key_validity(&keys) {
            other.push_filter(v);
        }
        if flag {
            let zero = other
                .traced
                .trace
                .arena
                .push_unchecked(crate::expr::NodeData {
                    node: Node::Const(crate::expr::Scalar::U32(0)),
                    ty: DType::U32,
                });
            keys.insert(0, zero);
        }
        let mut wanted: SmallVec<[Value; 4]> = keys.iter().copied().collect();
        let mut own: SmallVec<[Option<usize>; 4]> = SmallVec::new();
        if columns {
            wanted.extend(other.columns.iter().copied());
            let mut validities: SmallVec<[Value; 4]> = SmallVec::new();
            for c in other.columns.clone() {
                own.push(other.validity_of(c).map(|v| {
                    crate::graph::push_unique(&mut validities, [v]);
                    validities.iter().position(|&u| u == v).expect("pushed")
                }));
            }
            wanted.extend(validities);
        }
        let dtype = |v: Value| other.traced.trace.arena.ty(v);
        // Read in place when every wanted value is a plain input column
        // (not one the other query owns: an Arrow conversion or validity
        // fills its input only when that query runs).
        let direct: Option<SmallVec<[Input<'a>; 4]>> = match other.held {
            Some(_) => None,
            None => wanted.iter().map(|&v| other.plain_input(v)).collect(),
        };
        if let Some(direct) = direct {
            let build = wanted
                .iter()
                .zip(direct)
                .map(|(&v, input)| {
                    let n = self.inputs.len() as u16;
                    self.inputs.push(input);
                    self.traced.trace.input_dtypes.push(dtype(v));
                    n
                })
                .collect();
            return (build, own);
        }
        // Otherwise the side runs first and collects each value once.
        let mut unique: SmallVec<[Value; 4]> = SmallVec::new();
        crate::graph::push_unique(&mut unique, wanted.iter().copied());
        let first_input = self.inputs.len() as u16;
        for &v in &unique {
            self.inputs.push(placeholder(dtype(v)));
            self.traced.trace.input_dtypes.push(dtype(v));
        }
        other.traced.trace.terminal = Some(LogicalTerminal::Collect(unique.clone()));
        self.sides.push(Side {
            prepared: Prepared {
                engine: other.engine,
                traced: other.traced,
                inputs: other.inputs,
                options: other.options,
                started: other.started,
                sides: other.sides,
                held: other.held,
                plan: None,
            },
            at: (first_input..first_input + unique.len() as u16).collect(),
        });
        let build = wanted
            .iter()
            .map(|v| first_input + unique.iter().position(|u| u == v).expect("collected") as u16)
            .collect();
        (build, own)
    }

    /// Ends the stage with a join; the query goes on over its columns
    /// (this query's, then `added` for an inner join). The validities of
    /// this query's columns travel through the join beside them; an added
    /// column `j` has the validity `added_valid[j]` among the build side's
    /// validity columns (the inputs after its columns).
    fn push_join(
        mut self,
        kind: JoinKind,
        keys: SmallVec<[Value; 2]>,
        build: SmallVec<[u16; 4]>,
        added: &[DType],
        added_valid: &[Option<usize>],
    ) -> Self {
        let index = self.traced.trace.ops.len() as u16;
        let mut carried: SmallVec<[Value; 4]> = SmallVec::new();
        if let Some(h) = self.held.as_ref() {
            crate::graph::push_unique(&mut carried, h.validity.iter().flatten().copied());
        }
        let mut columns = self.columns.clone();
        let width = columns.len();
        columns.extend(carried.iter().copied());
        let build_valid = added_valid.iter().flatten().max().map_or(0, |&m| m + 1);
        let mut dtypes: SmallVec<[DType; 4]> = SmallVec::new();
        S::dtypes(&mut dtypes);
        dtypes.extend(carried.iter().map(|_| DType::Bool));
        dtypes.extend_from_slice(added);
        dtypes.extend((0..build_valid).map(|_| DType::Bool));
        let results: SmallVec<[Value; 4]> = dtypes
            .iter()
            .enumerate()
            .map(|(j, &ty)| {
                self.add_stream(
                    Stream::Join {
                        op: index,
                        column: j as u16,
                    },
                    ty,
                )
            })
            .collect();
        self.traced.trace.ops.push(LogicalOp::Join {
            kind,
            keys,
            columns,
            build,
            results: results.clone(),
        });
        let probe = width + carried.len();
        let first = probe + added.len();
        let at = |v: Value| results[width + carried.iter().position(|&c| c == v).expect("carried")];
        let mut validity: SmallVec<[Option<Value>; 4]> = (0..width)
            .map(|i| {
                let v = self
                    .held
                    .as_ref()
                    .and_then(|h| h.validity.get(i).copied().flatten());
                v.map(at)
            })
            .collect();
        validity.extend(added_valid.iter().map(|v| v.map(|j| results[first + j])));
        self.columns = results[..width]
            .iter()
            .chain(&results[probe..first])
            .copied()
            .collect();
        if self.held.is_some() || validity.iter().any(Option::is_some) {
            self.held().validity = validity;
        }
        self
    }

    fn join_with<S2: Shape, M2: Mode, K: JoinKeys>(
        mut self,
        kind: JoinKind,
        other: Query<'a, S2, M2>,
        key: impl FnOnce(S) -> K,
        other_key: impl FnOnce(S2) -> K,
    ) -> Self {
        let mut keys = self.trace_join_keys(key);
        // A null key matches nothing: an inner or semi join drops the
        // rows; an anti join keeps them, behind an "is null" key that no
        // build row has (the build side's is zero).
        let mut flag = false;
        if let Some(v) = self.key_validity(&keys) {
            if kind == JoinKind::Anti {
                for k in keys.iter_mut() {
                    *k = self.zero_where_null(v, *k);
                }
                keys.insert(0, self.null_flag(v));
                flag = true;
            } else {
                self.push_filter(v);
            }
        }
        let inner = kind == JoinKind::Inner;
        let (build, added_valid) = self.add_build_side(other, other_key, inner, flag);
        let mut added: SmallVec<[DType; 4]> = SmallVec::new();
        if inner {
            S2::dtypes(&mut added);
        }
        self.push_join(kind, keys, build, &added, &added_valid)
    }

    /// The inner equi-join of this query with `other`: every pair of
    /// elements whose keys (`key` of this one, `other_key` of the other)
    /// are equal, as `(this, other)`. Keys compare as group keys (`-0.0`
    /// equals `+0.0`, NaN equals NaN); a tuple of keys compares them
    /// together. The pairs come in this query's order, and the matches of
    /// one element in `other`'s order. `other` runs first, as a query of
    /// its own (unless it only reads columns, which are then read in
    /// place).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let order_customer = [7u32, 3, 7, 9];
    /// let order_amount = [10.0f32, 20.0, 30.0, 40.0];
    /// let customer_id = [3u32, 7];
    /// let customer_rate = [0.5f32, 2.0];
    /// let billed: Vec<f32> = order_customer
    ///     .compute()
    ///     .zip(&order_amount)
    ///     .join(customer_id.compute().zip(&customer_rate), |(c, _)| c, |(id, _)| id)
    ///     .map(|((_, amount), (_, rate))| amount * rate)
    ///     .collect();
    /// assert_eq!(billed, [20.0, 10.0, 60.0]);
    /// ```
    pub fn join<S2: Shape, M2: Mode, K: JoinKeys>(
        self,
        other: Query<'a, S2, M2>,
        key: impl FnOnce(S) -> K,
        other_key: impl FnOnce(S2) -> K,
    ) -> Query<'a, (S, S2), M> {
        self.join_with(JoinKind::Inner, other, key, other_key)
            .reshape()
    }

    /// The elements whose key some element of `other` has (a semi-join:
    /// each at most once, in order).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [1i64, 2, 3, 4, 5, 6];
    /// let ys = [3i64, 9, 12, 3];
    /// // The xs whose triple is among the ys.
    /// let v: Vec<i64> = xs.compute().semi_join(ys.compute(), |x| x * 3, |y| y).collect();
    /// assert_eq!(v, [1, 3, 4]);
    /// ```
    pub fn semi_join<S2: Shape, M2: Mode, K: JoinKeys>(
        self,
        other: Query<'a, S2, M2>,
        key: impl FnOnce(S) -> K,
        other_key: impl FnOnce(S2) -> K,
    ) -> Self {
        self.join_with(JoinKind::Semi, other, key, other_key)
    }

    /// The elements whose key no element of `other` has (an anti-join),
    /// in order.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [1u32, 2, 3, 4];
    /// let banned = [2u32, 4, 8];
    /// let v: Vec<u32> = xs.compute().anti_join(banned.compute(), |x| x, |b| b).collect();
    /// assert_eq!(v, [1, 3]);
    /// ```
    pub fn anti_join<S2: Shape, M2: Mode, K: JoinKeys>(
        self,
        other: Query<'a, S2, M2>,
        key: impl FnOnce(S) -> K,
        other_key: impl FnOnce(S2) -> K,
    ) -> Self {
        self.join_with(JoinKind::Anti, other, key, other_key)
    }
}

impl<'a, T: Element, M: Mode> Query<'a, Expr<T>, M> {
    /// The elements that appear in `set` (read in place; group-key
    /// equality: `-0.0` equals `+0.0`, NaN equals NaN), in order.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let xs = [5u32, 1, 7, 1, 9];
    /// let v: Vec<u32> = xs.compute().is_in(&[1u32, 9]).collect();
    /// assert_eq!(v, [1, 1, 9]);
    /// ```
    pub fn is_in<Z: IntoSource<'a, Elem = T>>(self, set: Z) -> Self {
        let engine = self.engine;
        self.semi_join(engine.query(set), |x| x, |y| y)
    }

    /// The elements that do not appear in `set`, in order.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let n: usize = [0.0f32, -0.0, 1.0, f32::NAN].compute().not_in(&[0.0f32, f32::NAN]).count();
    /// assert_eq!(n, 1);
    /// ```
    pub fn not_in<Z: IntoSource<'a, Elem = T>>(self, set: Z) -> Self {
        let engine = self.engine;
        self.anti_join(engine.query(set), |x| x, |y| y)
    }
}
