//! Dynamically typed values and columns for the test interpreters, and the
//! `El`/`Num` traits that move between them and computeq's typed `Expr<T>`.
//!
//! Independent of computeq's own `Scalar`/`Column`: the oracle must not share
//! code with the engine it checks.

use computeq::expr::DType;
use computeq::prelude::*;
use std::fmt;

/// One value of any element type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    Bool(bool),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl Val {
    pub fn dtype(self) -> DType {
        match self {
            Val::Bool(_) => DType::Bool,
            Val::I32(_) => DType::I32,
            Val::U32(_) => DType::U32,
            Val::I64(_) => DType::I64,
            Val::U64(_) => DType::U64,
            Val::F32(_) => DType::F32,
            Val::F64(_) => DType::F64,
        }
    }

    /// The value as an `f64` (exact for floats and for integers below 2^53).
    pub fn f64(self) -> f64 {
        match self {
            Val::Bool(b) => b as u8 as f64,
            Val::I32(v) => v as f64,
            Val::U32(v) => v as f64,
            Val::I64(v) => v as f64,
            Val::U64(v) => v as f64,
            Val::F32(v) => v as f64,
            Val::F64(v) => v,
        }
    }

    pub fn is_nan(self) -> bool {
        matches!(self, Val::F32(v) if v.is_nan()) || matches!(self, Val::F64(v) if v.is_nan())
    }

    /// Finite (always for integers and booleans).
    pub fn is_finite(self) -> bool {
        match self {
            Val::F32(v) => v.is_finite(),
            Val::F64(v) => v.is_finite(),
            _ => true,
        }
    }

    pub fn bool(self) -> bool {
        match self {
            Val::Bool(b) => b,
            other => panic!("expected a bool, got {other:?}"),
        }
    }

    /// Float zero of either sign.
    pub fn is_float_zero(self) -> bool {
        matches!(self, Val::F32(v) if v == 0.0) || matches!(self, Val::F64(v) if v == 0.0)
    }

    /// Float with the sign bit set (`-0.0` included).
    pub fn sign_negative(self) -> bool {
        match self {
            Val::F32(v) => v.is_sign_negative(),
            Val::F64(v) => v.is_sign_negative(),
            _ => false,
        }
    }

    /// Bit-exact equality, with every NaN equal to every NaN.
    pub fn same(self, other: Val) -> bool {
        match (self, other) {
            (Val::F32(a), Val::F32(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (Val::F64(a), Val::F64(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        }
    }
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Val::Bool(v) => write!(f, "{v}"),
            Val::I32(v) => write!(
                f,
                "{}i32",
                lit_int(v as i128, i32::MIN as i128, i32::MAX as i128, "i32")
            ),
            Val::U32(v) => write!(f, "{}u32", lit_int(v as i128, 0, u32::MAX as i128, "u32")),
            Val::I64(v) => write!(
                f,
                "{}i64",
                lit_int(v as i128, i64::MIN as i128, i64::MAX as i128, "i64")
            ),
            Val::U64(v) => write!(f, "{}u64", lit_int(v as i128, 0, u64::MAX as i128, "u64")),
            Val::F32(v) => f.write_str(&lit_float(
                v as f64,
                v.is_nan(),
                v == f32::MAX,
                v == f32::MIN_POSITIVE,
                "f32",
            )),
            Val::F64(v) => f.write_str(&lit_float(
                v,
                v.is_nan(),
                v == f64::MAX,
                v == f64::MIN_POSITIVE,
                "f64",
            )),
        }
    }
}

fn lit_int(v: i128, min: i128, max: i128, t: &str) -> String {
    if v == min && min != 0 {
        format!("({t}::MIN)")
    } else if v == max {
        format!("({t}::MAX)")
    } else if v < 0 {
        format!("({v})")
    } else {
        v.to_string()
    }
}

fn lit_float(v: f64, nan: bool, max: bool, min_pos: bool, t: &str) -> String {
    if nan {
        format!("{t}::NAN")
    } else if v == f64::INFINITY {
        format!("{t}::INFINITY")
    } else if v == f64::NEG_INFINITY {
        format!("{t}::NEG_INFINITY")
    } else if max {
        format!("{t}::MAX")
    } else if min_pos {
        format!("{t}::MIN_POSITIVE")
    } else if v.is_sign_negative() {
        format!("({v:?}{t})")
    } else {
        format!("{v:?}{t}")
    }
}

/// One column of any element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Col {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

macro_rules! each_col {
    ($c:expr, $v:ident => $e:expr) => {
        match $c {
            Col::Bool($v) => $e,
            Col::I32($v) => $e,
            Col::U32($v) => $e,
            Col::I64($v) => $e,
            Col::U64($v) => $e,
            Col::F32($v) => $e,
            Col::F64($v) => $e,
        }
    };
}

impl Col {
    pub fn len(&self) -> usize {
        each_col!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> DType {
        match self {
            Col::Bool(_) => DType::Bool,
            Col::I32(_) => DType::I32,
            Col::U32(_) => DType::U32,
            Col::I64(_) => DType::I64,
            Col::U64(_) => DType::U64,
            Col::F32(_) => DType::F32,
            Col::F64(_) => DType::F64,
        }
    }

    pub fn get(&self, i: usize) -> Val {
        match self {
            Col::Bool(v) => Val::Bool(v[i]),
            Col::I32(v) => Val::I32(v[i]),
            Col::U32(v) => Val::U32(v[i]),
            Col::I64(v) => Val::I64(v[i]),
            Col::U64(v) => Val::U64(v[i]),
            Col::F32(v) => Val::F32(v[i]),
            Col::F64(v) => Val::F64(v[i]),
        }
    }

    /// A column of `dtype` from values of that type.
    pub fn from_vals(dtype: DType, vals: impl Iterator<Item = Val>) -> Col {
        macro_rules! collect {
            ($v:ident) => {
                Col::$v(
                    vals.map(|x| match x {
                        Val::$v(x) => x,
                        other => panic!("expected {}, got {other:?}", dtype),
                    })
                    .collect(),
                )
            };
        }
        match dtype {
            DType::Bool => collect!(Bool),
            DType::I32 => collect!(I32),
            DType::U32 => collect!(U32),
            DType::I64 => collect!(I64),
            DType::U64 => collect!(U64),
            DType::F32 => collect!(F32),
            DType::F64 => collect!(F64),
        }
    }
}

/// A traced expression of any element type: what the builder passes around
/// while it turns an AST into closures.
#[derive(Clone, Copy, Debug)]
pub enum D {
    Bool(Expr<bool>),
    I32(Expr<i32>),
    U32(Expr<u32>),
    I64(Expr<i64>),
    U64(Expr<u64>),
    F32(Expr<f32>),
    F64(Expr<f64>),
}

/// An element type the tests can move between `Val`, `Col` and `D`.
pub trait El: Element + Copy + Send + Sync + 'static {
    fn d(e: Expr<Self>) -> D;
    fn from_d(d: D) -> Expr<Self>;
    fn val(self) -> Val;
    fn of(v: Val) -> Self;
    fn col(v: Vec<Self>) -> Col;
    fn slice(c: &Col) -> &[Self];
}

macro_rules! el {
    ($t:ty, $v:ident) => {
        impl El for $t {
            fn d(e: Expr<Self>) -> D {
                D::$v(e)
            }
            fn from_d(d: D) -> Expr<Self> {
                match d {
                    D::$v(e) => e,
                    other => panic!("expected a {} expression, got {other:?}", stringify!($t)),
                }
            }
            fn val(self) -> Val {
                Val::$v(self)
            }
            fn of(v: Val) -> Self {
                match v {
                    Val::$v(x) => x,
                    other => panic!("expected a {} value, got {other:?}", stringify!($t)),
                }
            }
            fn col(v: Vec<Self>) -> Col {
                Col::$v(v)
            }
            fn slice(c: &Col) -> &[Self] {
                match c {
                    Col::$v(x) => x,
                    other => panic!(
                        "expected a {} column, got {}",
                        stringify!($t),
                        other.dtype()
                    ),
                }
            }
        }
    };
}
el!(bool, Bool);
el!(i32, I32);
el!(u32, U32);
el!(i64, I64);
el!(u64, U64);
el!(f32, F32);
el!(f64, F64);

/// A numeric stream type, with the identities of the custom combines.
pub trait Num: El + Numeric {
    const ONE: Self;
    /// Identity of `min`: the largest value (`+inf` for floats).
    const TOP: Self;
    /// Identity of `max`: the smallest value (`-inf` for floats).
    const BOTTOM: Self;
}

macro_rules! num {
    ($($t:ty => $one:expr, $top:expr, $bottom:expr;)*) => {$(
        impl Num for $t {
            const ONE: Self = $one;
            const TOP: Self = $top;
            const BOTTOM: Self = $bottom;
        }
    )*};
}
num! {
    i32 => 1, i32::MAX, i32::MIN;
    u32 => 1, u32::MAX, u32::MIN;
    i64 => 1, i64::MAX, i64::MIN;
    u64 => 1, u64::MAX, u64::MIN;
    f32 => 1.0, f32::INFINITY, f32::NEG_INFINITY;
    f64 => 1.0, f64::INFINITY, f64::NEG_INFINITY;
}

/// The six numeric stream types.
pub const NUMERIC: [DType; 6] = [
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::F32,
    DType::F64,
];

/// Machine epsilon of a float type (as `f64`).
pub fn eps(t: DType) -> f64 {
    match t {
        DType::F32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    }
}

/// Largest finite value of a float type (as `f64`).
pub fn max_finite(t: DType) -> f64 {
    match t {
        DType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    }
}

/// Smallest positive normal value of a float type (as `f64`).
pub fn min_normal(t: DType) -> f64 {
    match t {
        DType::F32 => f32::MIN_POSITIVE as f64,
        _ => f64::MIN_POSITIVE,
    }
}
