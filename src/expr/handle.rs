//! `Expr<T>`: the value a user closure receives and returns. Every operator
//! on it appends a node to the arena being traced (see `trace.rs`).
//!
//! Plain Rust values mixed into expressions (`x * 2.0`, `x * k`) become
//! run-time parameters, never constants: the plan is shared by every value.

use super::arena::{Node, Value};
use super::element::{Element, Float, Numeric};
use super::ops::{BinaryOp, UnaryOp};
use super::trace;
use crate::types::Scalar;
use std::fmt;
use std::marker::PhantomData;
use std::ops;

/// A traced element expression of type `T`.
///
/// Closures given to adaptors receive `Expr`s and build new ones with
/// operators and methods. An `Expr` is only meaningful inside the closure
/// that received it.
///
/// # Examples
///
/// ```
/// # let _ = computeq::set_engine(computeq::Engine::default());
/// use computeq::prelude::*;
///
/// let xs = vec![1.0f32, -2.0, 3.0];
/// let k = 0.5;
/// let ys: Vec<f32> = xs.compute().map(|x| (x * k).abs().max(1.0)).collect();
/// assert_eq!(ys, vec![1.0, 1.0, 1.5]);
/// ```
pub struct Expr<T> {
    pub(crate) value: Value,
    pub(crate) arena_id: u32,
    _ty: PhantomData<fn() -> T>,
}

impl<T> Clone for Expr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Expr<T> {}

impl<T> fmt::Debug for Expr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({})", self.value)
    }
}

impl<T: Element> Expr<T> {
    pub(crate) fn from_parts(value: Value, arena_id: u32) -> Self {
        Expr {
            value,
            arena_id,
            _ty: PhantomData,
        }
    }

    fn node(node: Node, ids: &[u32]) -> Self {
        let (v, id) = trace::push(node, None, ids);
        Expr::from_parts(v, id)
    }

    /// The arena handle of this expression.
    pub fn value(self) -> Value {
        self.value
    }

    /// The trace this expression belongs to.
    pub(crate) fn arena_id(self) -> u32 {
        self.arena_id
    }

    /// A run-time parameter with value `v` (what literals become implicitly).
    pub fn param(v: T) -> Self {
        let (value, id) = trace::param(v.to_scalar());
        Expr::from_parts(value, id)
    }

    /// A constant baked into the plan. Unlike captured values, a different
    /// constant makes a different plan (and a recompilation): prefer plain
    /// captured values unless the constant really is fixed.
    pub fn constant(v: T) -> Self {
        let (value, id) = trace::push(Node::Const(v.to_scalar()), None, &[]);
        Expr::from_parts(value, id)
    }

    fn binary<R: Element>(self, op: BinaryOp, rhs: impl IntoExpr<T>) -> Expr<R> {
        let rhs = rhs.into_expr();
        Expr::node(
            Node::Binary(op, self.value, rhs.value),
            &[self.arena_id, rhs.arena_id],
        )
    }

    /// `self == rhs`.
    pub fn eq(self, rhs: impl IntoExpr<T>) -> Expr<bool> {
        self.binary(BinaryOp::Eq, rhs)
    }
    /// `self != rhs`.
    pub fn ne(self, rhs: impl IntoExpr<T>) -> Expr<bool> {
        self.binary(BinaryOp::Ne, rhs)
    }
    /// `self < rhs` (false when either is NaN).
    pub fn lt(self, rhs: impl IntoExpr<T>) -> Expr<bool> {
        self.binary(BinaryOp::Lt, rhs)
    }
    /// `self <= rhs` (false when either is NaN).
    pub fn le(self, rhs: impl IntoExpr<T>) -> Expr<bool> {
        self.binary(BinaryOp::Le, rhs)
    }
    /// `self > rhs` (false when either is NaN).
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let n = [1.0f32, 5.0, f32::NAN].compute().filter(|x| x.gt(2.0)).count();
    /// assert_eq!(n, 1);
    /// ```
    pub fn gt(self, rhs: impl IntoExpr<T>) -> Expr<bool> {
        self.binary(BinaryOp::Gt, rhs)
    }
    /// `self >= rhs` (false when either is NaN).
    pub fn ge(self, rhs: impl IntoExpr<T>) -> Expr<bool> {
        self.binary(BinaryOp::Ge, rhs)
    }

    /// Rust `as` conversion: integers wrap or extend, float→integer saturates
    /// and NaN becomes 0, `bool` is 0/1 and a number is `true` when non-zero.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<i32> = [1.9f32, -1e20, f32::NAN].compute().map(|x| x.cast::<i32>()).collect();
    /// assert_eq!(v, vec![1, i32::MIN, 0]);
    /// ```
    pub fn cast<U: Element>(self) -> Expr<U> {
        let (v, id) = trace::push(Node::Cast(self.value), Some(U::DTYPE), &[self.arena_id]);
        Expr::from_parts(v, id)
    }
}

impl<T: Numeric> Expr<T> {
    fn unary(self, op: UnaryOp) -> Self {
        Expr::node(Node::Unary(op, self.value), &[self.arena_id])
    }

    /// Absolute value (`wrapping_abs` for integers).
    pub fn abs(self) -> Self {
        self.unary(UnaryOp::Abs)
    }

    /// The smaller of two values; for floats a NaN operand yields the other.
    pub fn min(self, rhs: impl IntoExpr<T>) -> Self {
        self.binary(BinaryOp::Min, rhs)
    }

    /// The larger of two values; for floats a NaN operand yields the other.
    pub fn max(self, rhs: impl IntoExpr<T>) -> Self {
        self.binary(BinaryOp::Max, rhs)
    }

    /// `self.max(lo).min(hi)`.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<i32> = [-5, 3, 99].compute().map(|x| x.clamp(0, 10)).collect();
    /// assert_eq!(v, vec![0, 3, 10]);
    /// ```
    pub fn clamp(self, lo: impl IntoExpr<T>, hi: impl IntoExpr<T>) -> Self {
        self.max(lo).min(hi)
    }

    /// `self * a + b`, with a single rounding for floats.
    pub fn mul_add(self, a: impl IntoExpr<T>, b: impl IntoExpr<T>) -> Self {
        let (a, b) = (a.into_expr(), b.into_expr());
        Expr::node(
            Node::MulAdd(self.value, a.value, b.value),
            &[self.arena_id, a.arena_id, b.arena_id],
        )
    }

    /// `self^n` by repeated squaring (wrapping for integers). `n` is part of
    /// the plan, not a parameter.
    pub fn powi(self, n: i32) -> Self {
        Expr::node(Node::Powi(self.value, n), &[self.arena_id])
    }
}

impl<T: Float> Expr<T> {
    /// Square root (NaN for negative input).
    pub fn sqrt(self) -> Self {
        self.unary(UnaryOp::Sqrt)
    }
    /// `e^self`.
    pub fn exp(self) -> Self {
        self.unary(UnaryOp::Exp)
    }
    /// Natural logarithm.
    pub fn ln(self) -> Self {
        self.unary(UnaryOp::Ln)
    }
    /// Sine.
    pub fn sin(self) -> Self {
        self.unary(UnaryOp::Sin)
    }
    /// Cosine.
    pub fn cos(self) -> Self {
        self.unary(UnaryOp::Cos)
    }
    /// Largest integer not above.
    pub fn floor(self) -> Self {
        self.unary(UnaryOp::Floor)
    }
    /// Smallest integer not below.
    pub fn ceil(self) -> Self {
        self.unary(UnaryOp::Ceil)
    }
    /// Nearest integer, half away from zero (as `f32::round`).
    pub fn round(self) -> Self {
        self.unary(UnaryOp::Round)
    }
}

impl Expr<bool> {
    /// `if self { a } else { b }`, computed for every element without branching.
    ///
    /// ```
    /// # let _ = computeq::set_engine(computeq::Engine::default());
    /// use computeq::prelude::*;
    /// let v: Vec<f32> = [1.0f32, -1.0].compute().map(|x| x.gt(0.0).select(x, 0.0)).collect();
    /// assert_eq!(v, vec![1.0, 0.0]);
    /// ```
    pub fn select<T: Element>(self, a: impl IntoExpr<T>, b: impl IntoExpr<T>) -> Expr<T> {
        let (a, b) = (a.into_expr(), b.into_expr());
        Expr::node(
            Node::Select(self.value, a.value, b.value),
            &[self.arena_id, a.arena_id, b.arena_id],
        )
    }
}

/// Anything usable where an `Expr<T>` is expected: an `Expr<T>` or a plain
/// `T` (which becomes a run-time parameter).
pub trait IntoExpr<T> {
    /// Converts into an expression in the arena being traced.
    fn into_expr(self) -> Expr<T>;
}

impl<T: Element> IntoExpr<T> for Expr<T> {
    fn into_expr(self) -> Expr<T> {
        self
    }
}

macro_rules! literal {
    ($($t:ty),*) => {$(
        impl IntoExpr<$t> for $t {
            fn into_expr(self) -> Expr<$t> {
                Expr::param(self)
            }
        }
    )*};
}
literal!(bool, i32, u32, i64, u64, f32, f64);

macro_rules! arith {
    ($($tr:ident $m:ident $op:ident),*) => {$(
        impl<T: Numeric, R: IntoExpr<T>> ops::$tr<R> for Expr<T> {
            type Output = Expr<T>;
            fn $m(self, rhs: R) -> Expr<T> {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        arith!(@lhs $tr $m $op: i32, u32, i64, u64, f32, f64);
    )*};
    (@lhs $tr:ident $m:ident $op:ident: $($t:ty),*) => {$(
        impl ops::$tr<Expr<$t>> for $t {
            type Output = Expr<$t>;
            fn $m(self, rhs: Expr<$t>) -> Expr<$t> {
                Expr::param(self).binary(BinaryOp::$op, rhs)
            }
        }
    )*};
}
arith!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Rem);

impl<T: Numeric> ops::Neg for Expr<T> {
    type Output = Expr<T>;
    fn neg(self) -> Expr<T> {
        self.unary(UnaryOp::Neg)
    }
}

impl ops::Not for Expr<bool> {
    type Output = Expr<bool>;
    fn not(self) -> Expr<bool> {
        Expr::node(Node::Unary(UnaryOp::Not, self.value), &[self.arena_id])
    }
}

impl<R: IntoExpr<bool>> ops::BitAnd<R> for Expr<bool> {
    type Output = Expr<bool>;
    fn bitand(self, rhs: R) -> Expr<bool> {
        self.binary(BinaryOp::And, rhs)
    }
}

impl<R: IntoExpr<bool>> ops::BitOr<R> for Expr<bool> {
    type Output = Expr<bool>;
    fn bitor(self, rhs: R) -> Expr<bool> {
        self.binary(BinaryOp::Or, rhs)
    }
}

macro_rules! bits {
    ($($t:ty),*) => {$(
        bits!(@op $t: BitAnd bitand BitAnd, BitOr bitor BitOr, BitXor bitxor BitXor, Shl shl Shl, Shr shr Shr);

        /// Every bit flipped.
        impl ops::Not for Expr<$t> {
            type Output = Expr<$t>;
            fn not(self) -> Expr<$t> {
                self.unary(UnaryOp::BitNot)
            }
        }
    )*};
    (@op $t:ty: $($tr:ident $m:ident $op:ident),*) => {$(
        impl<R: IntoExpr<$t>> ops::$tr<R> for Expr<$t> {
            type Output = Expr<$t>;
            fn $m(self, rhs: R) -> Expr<$t> {
                self.binary(BinaryOp::$op, rhs)
            }
        }
        impl ops::$tr<Expr<$t>> for $t {
            type Output = Expr<$t>;
            fn $m(self, rhs: Expr<$t>) -> Expr<$t> {
                Expr::param(self).binary(BinaryOp::$op, rhs)
            }
        }
    )*};
}
// Bit operations on integer expressions: `& | ^` and `!` as in Rust, and
// shifts by an amount of the same type taken modulo the bit width (Rust's
// `wrapping_shl(n as u32)` / `wrapping_shr(n as u32)`; `>>` is arithmetic
// for signed types), identical on every backend.
bits!(i32, u32, i64, u64);

/// A shape of traced values a closure can take or return: one `Expr<T>`, or a
/// pair of shapes (from `zip`, `enumerate`, or a closure returning a tuple).
pub trait Shape: Copy {
    /// The Rust value of one element of this shape (`f32`, `(u64, f32)`).
    type Host: Send + 'static;
    /// Number of columns.
    const WIDTH: usize;
    /// Appends the columns' handles.
    fn values(&self, out: &mut smallvec::SmallVec<[Value; 4]>);
    /// Appends the columns' types.
    fn dtypes(out: &mut smallvec::SmallVec<[super::DType; 4]>);
    /// Rebuilds from column handles (`vals.len() == WIDTH`).
    fn from_values(vals: &[Value], arena_id: u32) -> Self;
    /// Rebuilds host values from one output column per width.
    fn host_from_columns(cols: &mut Vec<crate::types::Column>) -> Vec<Self::Host>;
    /// Host value from scalars (one per column).
    fn host_from_scalars(s: &[Scalar]) -> Self::Host;
    /// The Rust value of one element whose columns may be null:
    /// `Option<T>` per column (`(Option<u64>, Option<f32>)`).
    type Options: Send + 'static;
    /// Rebuilds host values with their nulls from one output column per
    /// width and its validity (`None`: no row is null).
    fn options_from_columns(
        cols: &mut Vec<crate::types::Column>,
        valid: &mut Vec<Option<Vec<bool>>>,
    ) -> Vec<Self::Options>;
}

impl<T: Element> Shape for Expr<T> {
    type Host = T;
    const WIDTH: usize = 1;
    fn values(&self, out: &mut smallvec::SmallVec<[Value; 4]>) {
        out.push(self.value);
    }
    fn dtypes(out: &mut smallvec::SmallVec<[super::DType; 4]>) {
        out.push(T::DTYPE);
    }
    fn from_values(vals: &[Value], arena_id: u32) -> Self {
        Expr::from_parts(vals[0], arena_id)
    }
    fn host_from_columns(cols: &mut Vec<crate::types::Column>) -> Vec<T> {
        T::from_column(cols.remove(0))
    }
    fn host_from_scalars(s: &[Scalar]) -> T {
        T::from_scalar(s[0])
    }
    type Options = Option<T>;
    fn options_from_columns(
        cols: &mut Vec<crate::types::Column>,
        valid: &mut Vec<Option<Vec<bool>>>,
    ) -> Vec<Option<T>> {
        crate::types::with_nulls(T::from_column(cols.remove(0)), valid.remove(0))
    }
}

impl<A: Shape, B: Shape> Shape for (A, B) {
    type Host = (A::Host, B::Host);
    const WIDTH: usize = A::WIDTH + B::WIDTH;
    fn values(&self, out: &mut smallvec::SmallVec<[Value; 4]>) {
        self.0.values(out);
        self.1.values(out);
    }
    fn dtypes(out: &mut smallvec::SmallVec<[super::DType; 4]>) {
        A::dtypes(out);
        B::dtypes(out);
    }
    fn from_values(vals: &[Value], arena_id: u32) -> Self {
        (
            A::from_values(&vals[..A::WIDTH], arena_id),
            B::from_values(&vals[A::WIDTH..], arena_id),
        )
    }
    fn host_from_columns(cols: &mut Vec<crate::types::Column>) -> Vec<Self::Host> {
        let a = A::host_from_columns(cols);
        let b = B::host_from_columns(cols);
        // A large output on huge pages: its first writes fault 2 MiB at
        // a time, not 4 KiB.
        let mut out = crate::types::vec_for_output(a.len().min(b.len()));
        out.extend(a.into_iter().zip(b));
        out
    }
    fn host_from_scalars(s: &[Scalar]) -> Self::Host {
        (
            A::host_from_scalars(&s[..A::WIDTH]),
            B::host_from_scalars(&s[A::WIDTH..]),
        )
    }
    type Options = (A::Options, B::Options);
    fn options_from_columns(
        cols: &mut Vec<crate::types::Column>,
        valid: &mut Vec<Option<Vec<bool>>>,
    ) -> Vec<Self::Options> {
        let a = A::options_from_columns(cols, valid);
        let b = B::options_from_columns(cols, valid);
        a.into_iter().zip(b).collect()
    }
}
