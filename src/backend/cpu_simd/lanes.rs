//! Lane types of block registers: the seven element types, with the
//! reference semantics of `expr::eval` restated as plain functions that LLVM
//! vectorizes, and the typed register file they live in.
//!
//! Every function here must agree with `expr::eval` bit for bit; the unit
//! tests of `cpu_simd` compare against `cpu_scalar` to prove it.

use super::BLOCK;
use crate::expr::{DType, Scalar};
use crate::types::{Column, ColumnRef};
use std::mem::MaybeUninit;

/// Position of `ty` in per-dtype tables (the order of [`DType::ALL`]).
pub(crate) const fn dtype_index(ty: DType) -> usize {
    match ty {
        DType::Bool => 0,
        DType::I32 => 1,
        DType::U32 => 2,
        DType::I64 => 3,
        DType::U64 => 4,
        DType::F32 => 5,
        DType::F64 => 6,
    }
}

/// Block registers, one file per lane type, each register `BLOCK` lanes.
///
/// Typed files keep the instructions free of `unsafe`: an instruction takes
/// its output register out of the file (`std::mem::take`), reads its
/// operands from the file, and puts the output back. (The executor's one use
/// of `unsafe` is the last instruction of a collect writing straight into
/// the result column, `StageRun::store_range`.) The compiler never gives an
/// instruction an output register that is also one of its operands.
#[derive(Debug, Default)]
pub(crate) struct Regs {
    pub(crate) b: Vec<Vec<bool>>,
    pub(crate) i32: Vec<Vec<i32>>,
    pub(crate) u32: Vec<Vec<u32>>,
    pub(crate) i64: Vec<Vec<i64>>,
    pub(crate) u64: Vec<Vec<u64>>,
    pub(crate) f32: Vec<Vec<f32>>,
    pub(crate) f64: Vec<Vec<f64>>,
}

impl Regs {
    /// A file of no register (for programs that have none).
    pub(crate) const EMPTY: Regs = Regs {
        b: Vec::new(),
        i32: Vec::new(),
        u32: Vec::new(),
        i64: Vec::new(),
        u64: Vec::new(),
        f32: Vec::new(),
        f64: Vec::new(),
    };

    /// Gives the file exactly `counts` registers per type, keeping the ones
    /// it has. A kept register holds lanes of an earlier run: every
    /// instruction writes the lanes it later reads, so nothing depends on
    /// what a register held before (the same holds between the blocks of
    /// one run).
    pub(crate) fn reshape(&mut self, counts: &[u16; 7]) {
        if self.counts() == *counts {
            return;
        }
        fn file<T: Clone + Default>(f: &mut Vec<Vec<T>>, n: u16) {
            f.truncate(n as usize);
            f.resize_with(n as usize, || vec![T::default(); BLOCK]);
        }
        file(&mut self.b, counts[0]);
        file(&mut self.i32, counts[1]);
        file(&mut self.u32, counts[2]);
        file(&mut self.i64, counts[3]);
        file(&mut self.u64, counts[4]);
        file(&mut self.f32, counts[5]);
        file(&mut self.f64, counts[6]);
    }

    /// Registers held per type, in the order of [`Regs::reshape`]'s counts.
    pub(crate) fn counts(&self) -> [u16; 7] {
        [
            self.b.len(),
            self.i32.len(),
            self.u32.len(),
            self.i64.len(),
            self.u64.len(),
            self.f32.len(),
            self.f64.len(),
        ]
        .map(|n| n as u16)
    }

    /// Bytes held by registers of the given counts.
    pub(crate) fn bytes(counts: &[u16; 7]) -> u64 {
        DType::ALL
            .iter()
            .map(|&t| counts[dtype_index(t)] as u64 * (BLOCK * t.size()) as u64)
            .sum()
    }
}

/// A writable window of an output column. Its lanes may not be
/// initialized yet (a window of a column's spare capacity,
/// [`OutSlice::spare`]); only initialized values are ever written through
/// it, so a window of initialized memory stays initialized.
#[derive(Debug)]
pub(crate) enum OutSlice<'o> {
    Bool(&'o mut [MaybeUninit<bool>]),
    I32(&'o mut [MaybeUninit<i32>]),
    U32(&'o mut [MaybeUninit<u32>]),
    I64(&'o mut [MaybeUninit<i64>]),
    U64(&'o mut [MaybeUninit<u64>]),
    F32(&'o mut [MaybeUninit<f32>]),
    F64(&'o mut [MaybeUninit<f64>]),
}

macro_rules! each_out {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            OutSlice::Bool($v) => $e,
            OutSlice::I32($v) => $e,
            OutSlice::U32($v) => $e,
            OutSlice::I64($v) => $e,
            OutSlice::U64($v) => $e,
            OutSlice::F32($v) => $e,
            OutSlice::F64($v) => $e,
        }
    };
}

impl<'o> OutSlice<'o> {
    /// The whole of `c`.
    pub(crate) fn of(c: &'o mut Column) -> OutSlice<'o> {
        fn lanes<T>(v: &mut [T]) -> &mut [MaybeUninit<T>] {
            // SAFETY: same layout; the window only ever receives
            // initialized values (see the type's doc), so `v` stays
            // initialized.
            unsafe { &mut *(v as *mut [T] as *mut [MaybeUninit<T>]) }
        }
        match c {
            Column::Bool(v) => OutSlice::Bool(lanes(v)),
            Column::I32(v) => OutSlice::I32(lanes(v)),
            Column::U32(v) => OutSlice::U32(lanes(v)),
            Column::I64(v) => OutSlice::I64(lanes(v)),
            Column::U64(v) => OutSlice::U64(lanes(v)),
            Column::F32(v) => OutSlice::F32(lanes(v)),
            Column::F64(v) => OutSlice::F64(lanes(v)),
        }
    }

    /// The first `len` elements of the spare capacity of `c` (at most its
    /// spare capacity): memory not yet initialized, which no zeroing pass
    /// has touched. Whoever fills it sets the column's length after.
    pub(crate) fn spare(c: &'o mut Column, len: usize) -> OutSlice<'o> {
        fn lanes<T>(v: &mut Vec<T>, len: usize) -> &mut [MaybeUninit<T>] {
            let spare = v.spare_capacity_mut();
            let n = len.min(spare.len());
            &mut spare[..n]
        }
        match c {
            Column::Bool(v) => OutSlice::Bool(lanes(v, len)),
            Column::I32(v) => OutSlice::I32(lanes(v, len)),
            Column::U32(v) => OutSlice::U32(lanes(v, len)),
            Column::I64(v) => OutSlice::I64(lanes(v, len)),
            Column::U64(v) => OutSlice::U64(lanes(v, len)),
            Column::F32(v) => OutSlice::F32(lanes(v, len)),
            Column::F64(v) => OutSlice::F64(lanes(v, len)),
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        each_out!(self, v => v.len())
    }

    /// Splits at `mid` (clamped to the length).
    pub(crate) fn split_at(self, mid: usize) -> (OutSlice<'o>, OutSlice<'o>) {
        let mid = mid.min(self.len());
        match self {
            OutSlice::Bool(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::Bool(a), OutSlice::Bool(b))
            }
            OutSlice::I32(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::I32(a), OutSlice::I32(b))
            }
            OutSlice::U32(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::U32(a), OutSlice::U32(b))
            }
            OutSlice::I64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::I64(a), OutSlice::I64(b))
            }
            OutSlice::U64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::U64(a), OutSlice::U64(b))
            }
            OutSlice::F32(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::F32(a), OutSlice::F32(b))
            }
            OutSlice::F64(v) => {
                let (a, b) = v.split_at_mut(mid);
                (OutSlice::F64(a), OutSlice::F64(b))
            }
        }
    }
}

/// Where the last instruction of a collect writes when it writes straight
/// into the result column (`StageRun::store_range`): the block's window of
/// the column, of the column's type. Its lanes may not be initialized yet;
/// only initialized values are ever written through it.
#[derive(Debug)]
pub(crate) enum Direct<'d> {
    Bool(&'d mut [MaybeUninit<bool>]),
    I32(&'d mut [MaybeUninit<i32>]),
    U32(&'d mut [MaybeUninit<u32>]),
    I64(&'d mut [MaybeUninit<i64>]),
    U64(&'d mut [MaybeUninit<u64>]),
    F32(&'d mut [MaybeUninit<f32>]),
    F64(&'d mut [MaybeUninit<f64>]),
}

/// One lane type: where its registers live, how it is read from columns and
/// scalars.
pub(crate) trait Lane:
    Copy + Default + PartialEq + PartialOrd + Send + Sync + 'static
{
    fn file(r: &Regs) -> &[Vec<Self>];
    fn file_mut(r: &mut Regs) -> &mut Vec<Vec<Self>>;
    fn column(c: ColumnRef<'_>) -> Option<&[Self]>;
    fn column_mut(c: &mut Column) -> Option<&mut Vec<Self>>;
    fn out<'o>(o: &'o mut OutSlice<'_>) -> Option<&'o mut [MaybeUninit<Self>]>;
    /// `d` as a [`Direct`] destination.
    fn to_direct(d: &mut [MaybeUninit<Self>]) -> Direct<'_>;
    /// The lanes of `d` when it is of this type.
    fn direct<'d>(d: &'d mut Direct<'_>) -> Option<&'d mut [MaybeUninit<Self>]>;
    /// The value of a scalar, converted by `as` if its type differs (which
    /// validated plans never do; converting keeps this panic-free).
    fn from_scalar(s: Scalar) -> Self;
    fn to_scalar(self) -> Scalar;
    /// `true` only for float NaNs.
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! lane {
    ($t:ty, $v:ident, $file:ident, $nan:expr) => {
        impl Lane for $t {
            #[inline(always)]
            fn file(r: &Regs) -> &[Vec<Self>] {
                &r.$file
            }
            #[inline(always)]
            fn file_mut(r: &mut Regs) -> &mut Vec<Vec<Self>> {
                &mut r.$file
            }
            #[inline(always)]
            fn column(c: ColumnRef<'_>) -> Option<&[Self]> {
                match c {
                    ColumnRef::$v(v) => Some(v),
                    _ => None,
                }
            }
            #[inline(always)]
            fn column_mut(c: &mut Column) -> Option<&mut Vec<Self>> {
                match c {
                    Column::$v(v) => Some(v),
                    _ => None,
                }
            }
            #[inline(always)]
            fn out<'o>(o: &'o mut OutSlice<'_>) -> Option<&'o mut [MaybeUninit<Self>]> {
                match o {
                    OutSlice::$v(v) => Some(&mut **v),
                    _ => None,
                }
            }
            #[inline(always)]
            fn to_direct(d: &mut [MaybeUninit<Self>]) -> Direct<'_> {
                Direct::$v(d)
            }
            #[inline(always)]
            fn direct<'d>(d: &'d mut Direct<'_>) -> Option<&'d mut [MaybeUninit<Self>]> {
                match d {
                    Direct::$v(v) => Some(&mut **v),
                    _ => None,
                }
            }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::$v(x) => x,
                    other => match other.cast(DType::$v) {
                        Scalar::$v(x) => x,
                        _ => Self::default(),
                    },
                }
            }
            #[inline(always)]
            fn to_scalar(self) -> Scalar {
                Scalar::$v(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                let f: fn($t) -> bool = $nan;
                f(self)
            }
        }
    };
}

lane!(bool, Bool, b, |_| false);
lane!(i32, I32, i32, |_| false);
lane!(u32, U32, u32, |_| false);
lane!(i64, I64, i64, |_| false);
lane!(u64, U64, u64, |_| false);
lane!(f32, F32, f32, |x| x.is_nan());
lane!(f64, F64, f64, |x| x.is_nan());

/// Numeric lanes: arithmetic with the semantics of `eval::binary`.
pub(crate) trait Num: Lane {
    const ZERO: Self;
    const ONE: Self;
    /// Identity of `min` (NaN for floats: all-NaN and empty give NaN).
    const MIN_ID: Self;
    /// Identity of `max`.
    const MAX_ID: Self;
    fn n_add(a: Self, b: Self) -> Self;
    fn n_sub(a: Self, b: Self) -> Self;
    fn n_mul(a: Self, b: Self) -> Self;
    fn n_div(a: Self, b: Self) -> Self;
    fn n_rem(a: Self, b: Self) -> Self;
    fn n_min(a: Self, b: Self) -> Self;
    fn n_max(a: Self, b: Self) -> Self;
    fn n_neg(a: Self) -> Self;
    fn n_abs(a: Self) -> Self;
    /// Fused for floats (one rounding), wrapping `a * b + c` for integers.
    fn n_mul_add(a: Self, b: Self, c: Self) -> Self;
    /// `if k { x } else { id }` by bit masking, which vectorizes where a
    /// branch on a `bool` lane does not.
    fn n_sel(k: bool, x: Self, id: Self) -> Self;
}

macro_rules! int_num {
    ($t:ty, $abs:expr) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const MIN_ID: Self = <$t>::MAX;
            const MAX_ID: Self = <$t>::MIN;
            #[inline(always)]
            fn n_add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn n_sub(a: Self, b: Self) -> Self {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn n_mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn n_div(a: Self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn n_rem(a: Self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    a.wrapping_rem(b)
                }
            }
            #[inline(always)]
            fn n_min(a: Self, b: Self) -> Self {
                Ord::min(a, b)
            }
            #[inline(always)]
            fn n_max(a: Self, b: Self) -> Self {
                Ord::max(a, b)
            }
            #[inline(always)]
            fn n_neg(a: Self) -> Self {
                a.wrapping_neg()
            }
            #[inline(always)]
            fn n_abs(a: Self) -> Self {
                let f: fn($t) -> $t = $abs;
                f(a)
            }
            #[inline(always)]
            fn n_mul_add(a: Self, b: Self, c: Self) -> Self {
                a.wrapping_mul(b).wrapping_add(c)
            }
            #[inline(always)]
            fn n_sel(k: bool, x: Self, id: Self) -> Self {
                let m = <$t>::wrapping_sub(0, k as $t);
                (x & m) | (id & !m)
            }
        }
    };
}

int_num!(i32, |a| a.wrapping_abs());
int_num!(i64, |a| a.wrapping_abs());
int_num!(u32, |a| a);
int_num!(u64, |a| a);

/// Integer lanes: the bit operations of `eval`.
pub(crate) trait IntLane: Num {
    fn i_and(a: Self, b: Self) -> Self;
    fn i_or(a: Self, b: Self) -> Self;
    fn i_xor(a: Self, b: Self) -> Self;
    /// `a << b`, the amount modulo the width (`wrapping_shl(b as u32)`).
    fn i_shl(a: Self, b: Self) -> Self;
    /// `a >> b`, arithmetic for signed types, the amount modulo the width.
    fn i_shr(a: Self, b: Self) -> Self;
    fn i_not(a: Self) -> Self;
}

macro_rules! int_lane {
    ($($t:ty),*) => {$(
        impl IntLane for $t {
            #[inline(always)]
            fn i_and(a: Self, b: Self) -> Self {
                a & b
            }
            #[inline(always)]
            fn i_or(a: Self, b: Self) -> Self {
                a | b
            }
            #[inline(always)]
            fn i_xor(a: Self, b: Self) -> Self {
                a ^ b
            }
            #[inline(always)]
            fn i_shl(a: Self, b: Self) -> Self {
                a.wrapping_shl(b as u32)
            }
            #[inline(always)]
            fn i_shr(a: Self, b: Self) -> Self {
                a.wrapping_shr(b as u32)
            }
            #[inline(always)]
            fn i_not(a: Self) -> Self {
                !a
            }
        }
    )*};
}
int_lane!(i32, i64, u32, u64);

/// Float lanes: the math functions of `eval::unary`.
pub(crate) trait FloatLane: Num {
    fn f_sqrt(a: Self) -> Self;
    fn f_exp(a: Self) -> Self;
    fn f_ln(a: Self) -> Self;
    fn f_sin(a: Self) -> Self;
    fn f_cos(a: Self) -> Self;
    fn f_floor(a: Self) -> Self;
    fn f_ceil(a: Self) -> Self;
    fn f_round(a: Self) -> Self;
}

macro_rules! float_num {
    ($t:ty, $bits:ty) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const MIN_ID: Self = <$t>::NAN;
            const MAX_ID: Self = <$t>::NAN;
            #[inline(always)]
            fn n_add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn n_sub(a: Self, b: Self) -> Self {
                a - b
            }
            #[inline(always)]
            fn n_mul(a: Self, b: Self) -> Self {
                a * b
            }
            #[inline(always)]
            fn n_div(a: Self, b: Self) -> Self {
                a / b
            }
            #[inline(always)]
            fn n_rem(a: Self, b: Self) -> Self {
                a % b
            }
            // `a.min(b)` (`minNum`: a NaN operand gives the other one),
            // written as a compare and selects. `f32::min` is LLVM's
            // `minnum`, which its loop vectorizer takes for a reduction it
            // may reorder: in a fold's lane loop it vectorized across the
            // loop's iterations instead of across the lanes, gathering
            // strided elements with a NaN check per step, and a float
            // `min`/`max` of 10^5 took 4.6-5.5x a sum's time (2.1-2.4x at
            // 10^7, half the speed of std's `fold(NAN, f32::max)`). A select it
            // leaves to the lane-wise vectorizer. (`±0` ties give `a`,
            // which `minNum` allows; the tests compare with the reference.)
            #[inline(always)]
            fn n_min(a: Self, b: Self) -> Self {
                // One `vminps` (the select of an ordered compare), and the
                // other operand where `a` is NaN.
                let m = if b < a { b } else { a };
                if a.is_nan() {
                    b
                } else {
                    m
                }
            }
            /// `a.max(b)`, as [`Num::n_min`] is `a.min(b)`.
            #[inline(always)]
            fn n_max(a: Self, b: Self) -> Self {
                let m = if b > a { b } else { a };
                if a.is_nan() {
                    b
                } else {
                    m
                }
            }
            #[inline(always)]
            fn n_neg(a: Self) -> Self {
                -a
            }
            #[inline(always)]
            fn n_abs(a: Self) -> Self {
                a.abs()
            }
            #[inline(always)]
            fn n_mul_add(a: Self, b: Self, c: Self) -> Self {
                // `llvm.fma`: a real FMA where the function enables it, a
                // correctly rounded library call elsewhere. Never split.
                a.mul_add(b, c)
            }
            #[inline(always)]
            fn n_sel(k: bool, x: Self, id: Self) -> Self {
                let m = <$bits>::wrapping_sub(0, k as $bits);
                <$t>::from_bits((x.to_bits() & m) | (id.to_bits() & !m))
            }
        }

        impl FloatLane for $t {
            #[inline(always)]
            fn f_sqrt(a: Self) -> Self {
                a.sqrt()
            }
            #[inline(always)]
            fn f_exp(a: Self) -> Self {
                a.exp()
            }
            #[inline(always)]
            fn f_ln(a: Self) -> Self {
                a.ln()
            }
            #[inline(always)]
            fn f_sin(a: Self) -> Self {
                a.sin()
            }
            #[inline(always)]
            fn f_cos(a: Self) -> Self {
                a.cos()
            }
            #[inline(always)]
            fn f_floor(a: Self) -> Self {
                a.floor()
            }
            #[inline(always)]
            fn f_ceil(a: Self) -> Self {
                a.ceil()
            }
            #[inline(always)]
            fn f_round(a: Self) -> Self {
                a.round()
            }
        }
    };
}

float_num!(f32, u32);
float_num!(f64, u64);

/// Rust `as` conversion between lane types, as `Scalar::cast` does it.
pub(crate) trait CastTo<U> {
    fn cast_to(self) -> U;
}

macro_rules! cast_from_num {
    ($from:ty, $zero:expr; $($to:ty),*) => {
        $(impl CastTo<$to> for $from {
            #[inline(always)]
            #[allow(clippy::unnecessary_cast)]
            fn cast_to(self) -> $to {
                self as $to
            }
        })*
        impl CastTo<bool> for $from {
            #[inline(always)]
            fn cast_to(self) -> bool {
                // NaN is non-zero, hence `true`, as in `Scalar::as_bool`.
                self != $zero
            }
        }
    };
}

cast_from_num!(i32, 0; i32, u32, i64, u64, f32, f64);
cast_from_num!(u32, 0; i32, u32, i64, u64, f32, f64);
cast_from_num!(i64, 0; i32, u32, i64, u64, f32, f64);
cast_from_num!(u64, 0; i32, u32, i64, u64, f32, f64);
cast_from_num!(f32, 0.0; u32, i64, u64, f32, f64);
cast_from_num!(f64, 0.0; u32, i64, u64, f32, f64);

/// Float → `i32` as Rust `as` (NaN → 0, saturating), in a form LLVM
/// vectorizes (`vcvttps2dq` / `vcvttpd2dq` between a clamp and two
/// selects): plain `as` compiles to a scalar loop of compares per lane.
macro_rules! float_to_i32 {
    ($($from:ty: $below:expr),*) => {$(
        impl CastTo<i32> for $from {
            #[inline(always)]
            fn cast_to(self) -> i32 {
                // `max`/`min` return the non-NaN operand: `c` is in range.
                let c = self.max(i32::MIN as $from).min($below);
                // SAFETY: `c` is finite and within `i32`'s range.
                let i = unsafe { c.to_int_unchecked::<i32>() };
                if self.is_nan() {
                    0
                } else if self >= 2147483648.0 {
                    i32::MAX
                } else {
                    i
                }
            }
        }
    )*};
}
// The largest values below 2^31 of each type.
float_to_i32!(f32: 2147483520.0, f64: 2147483647.0);

macro_rules! cast_from_bool {
    ($($to:ty),*) => {
        $(impl CastTo<$to> for bool {
            #[inline(always)]
            fn cast_to(self) -> $to {
                self as u8 as $to
            }
        })*
    };
}

cast_from_bool!(i32, u32, i64, u64, f32, f64);

impl CastTo<bool> for bool {
    #[inline(always)]
    fn cast_to(self) -> bool {
        self
    }
}

/// Runs `$body` with `$T` bound to the lane type of `$ty` (any dtype).
macro_rules! with_lane {
    ($ty:expr, $T:ident => $body:expr) => {
        match $ty {
            $crate::expr::DType::Bool => {
                type $T = bool;
                $body
            }
            ty => $crate::backend::cpu_simd::lanes::with_num!(ty, $T => $body, else unreachable!("bool is matched above")),
        }
    };
}

/// Runs `$body` with `$T` bound to the numeric lane type of `$ty`; `bool`
/// runs `$other` (validated programs never get there).
macro_rules! with_num {
    ($ty:expr, $T:ident => $body:expr, else $other:expr) => {
        match $ty {
            $crate::expr::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::expr::DType::F64 => {
                type $T = f64;
                $body
            }
            ty => $crate::backend::cpu_simd::lanes::with_int!(ty, $T => $body, else $other),
        }
    };
}

/// Runs `$body` with `$T` bound to the float lane type of `$ty`; other
/// types run `$other`.
macro_rules! with_float {
    ($ty:expr, $T:ident => $body:expr, else $other:expr) => {
        match $ty {
            $crate::expr::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::expr::DType::F64 => {
                type $T = f64;
                $body
            }
            _ => $other,
        }
    };
}

/// Runs `$body` with `$T` bound to the integer lane type of `$ty`; other
/// types run `$other`.
macro_rules! with_int {
    ($ty:expr, $T:ident => $body:expr, else $other:expr) => {
        match $ty {
            $crate::expr::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::expr::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::expr::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::expr::DType::U64 => {
                type $T = u64;
                $body
            }
            _ => $other,
        }
    };
}

pub(crate) use {with_float, with_int, with_lane, with_num};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{eval, BinaryOp};

    #[test]
    fn integer_semantics_match_eval() {
        let cases = [(7i32, 0i32), (i32::MIN, -1), (-7, 2), (5, -3)];
        for (a, b) in cases {
            for (op, f) in [
                (BinaryOp::Div, <i32 as Num>::n_div as fn(i32, i32) -> i32),
                (BinaryOp::Rem, <i32 as Num>::n_rem),
                (BinaryOp::Add, <i32 as Num>::n_add),
                (BinaryOp::Mul, <i32 as Num>::n_mul),
            ] {
                assert_eq!(
                    Scalar::I32(f(a, b)),
                    eval::binary(op, Scalar::I32(a), Scalar::I32(b))
                );
            }
        }
    }

    #[test]
    fn bit_operations_match_eval() {
        use crate::expr::UnaryOp;
        fn check<T: IntLane + Copy>(cases: &[(T, T)], s: fn(T) -> Scalar) {
            for &(a, b) in cases {
                for (op, f) in [
                    (BinaryOp::BitAnd, T::i_and as fn(T, T) -> T),
                    (BinaryOp::BitOr, T::i_or),
                    (BinaryOp::BitXor, T::i_xor),
                    (BinaryOp::Shl, T::i_shl),
                    (BinaryOp::Shr, T::i_shr),
                ] {
                    assert_eq!(s(f(a, b)), eval::binary(op, s(a), s(b)), "{op}");
                }
                assert_eq!(s(T::i_not(a)), eval::unary(UnaryOp::BitNot, s(a)));
            }
        }
        check(
            &[
                (-8i32, 1),
                (1, 33),
                (1, -1),
                (i32::MIN, 31),
                (0x0f0f, 0x00ff),
            ],
            Scalar::I32,
        );
        check(&[(u32::MAX, 31), (1, 32), (0xf0, 0x3c)], Scalar::U32);
        check(&[(i64::MIN, 63), (1, 65), (-1, -1)], Scalar::I64);
        check(&[(u64::MAX, 64), (3, 127), (0xf0, 0x3c)], Scalar::U64);
    }

    #[test]
    fn casts_match_scalar_cast() {
        for x in [f32::NAN, 1e20, -1e20, -1.5, 0.0, 2.7] {
            assert_eq!(Scalar::I32(x.cast_to()), Scalar::F32(x).cast(DType::I32));
            assert_eq!(Scalar::U64(x.cast_to()), Scalar::F32(x).cast(DType::U64));
            assert_eq!(Scalar::Bool(x.cast_to()), Scalar::F32(x).cast(DType::Bool));
        }
        assert_eq!(
            Scalar::F64(true.cast_to()),
            Scalar::Bool(true).cast(DType::F64)
        );
        assert_eq!(
            Scalar::U32((-1i64).cast_to()),
            Scalar::I64(-1).cast(DType::U32)
        );
    }
}
