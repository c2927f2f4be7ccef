//! Element types and typed scalar values shared by every stage of the path.
//!
//! `DType` names the type of one lane; `Scalar` carries one value of any
//! `DType` (parameters, constants, reduction results). Nothing here knows
//! about plans or backends.

use std::fmt;
use std::hash::{Hash, Hasher};

/// The type of one element of a stream or expression.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum DType {
    /// `bool`: results of comparisons, predicates.
    Bool,
    /// `i32`, wrapping arithmetic.
    I32,
    /// `u32`, wrapping arithmetic.
    U32,
    /// `i64`, wrapping arithmetic.
    I64,
    /// `u64`, wrapping arithmetic.
    U64,
    /// `f32`, IEEE 754 single precision.
    F32,
    /// `f64`, IEEE 754 double precision.
    F64,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 7] = [
        DType::Bool,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F32,
        DType::F64,
    ];

    /// Size of one element in bytes, as stored in host memory.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// `f32` or `f64`.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Any of the four integer types.
    pub const fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32 | DType::I64 | DType::U64)
    }

    /// Signed integer or float.
    pub const fn is_signed(self) -> bool {
        matches!(self, DType::I32 | DType::I64 | DType::F32 | DType::F64)
    }

    /// Integers and floats: the types that support arithmetic.
    pub const fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool)
    }

    /// 64-bit lanes (`i64 u64 f64`): the ones some GPUs lack.
    pub const fn is_wide(self) -> bool {
        self.size() == 8
    }

    /// The Rust spelling: `f32`, `u64`, `bool`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value of any [`DType`].
///
/// Equality and hashing compare bit patterns, so `NaN == NaN` here and
/// `0.0 != -0.0`: a `Scalar` is a value in a plan, not a number to compare.
#[derive(Copy, Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(into = "ScalarBits", from = "ScalarBits")]
pub enum Scalar {
    /// A `bool`.
    Bool(bool),
    /// An `i32`.
    I32(i32),
    /// A `u32`.
    U32(u32),
    /// An `i64`.
    I64(i64),
    /// A `u64`.
    U64(u64),
    /// An `f32`.
    F32(f32),
    /// An `f64`.
    F64(f64),
}

impl Scalar {
    /// The dtype of this value.
    pub const fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::I32(_) => DType::I32,
            Scalar::U32(_) => DType::U32,
            Scalar::I64(_) => DType::I64,
            Scalar::U64(_) => DType::U64,
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
        }
    }

    /// The raw bits, zero-extended to 64.
    pub fn to_bits(self) -> u64 {
        match self {
            Scalar::Bool(v) => v as u64,
            Scalar::I32(v) => v as u32 as u64,
            Scalar::U32(v) => v as u64,
            Scalar::I64(v) => v as u64,
            Scalar::U64(v) => v,
            Scalar::F32(v) => v.to_bits() as u64,
            Scalar::F64(v) => v.to_bits(),
        }
    }

    /// Rebuilds a value of `dtype` from [`Scalar::to_bits`].
    pub fn from_bits(dtype: DType, bits: u64) -> Scalar {
        match dtype {
            DType::Bool => Scalar::Bool(bits != 0),
            DType::I32 => Scalar::I32(bits as u32 as i32),
            DType::U32 => Scalar::U32(bits as u32),
            DType::I64 => Scalar::I64(bits as i64),
            DType::U64 => Scalar::U64(bits),
            DType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
            DType::F64 => Scalar::F64(f64::from_bits(bits)),
        }
    }

    /// The zero (or `false`) of `dtype`.
    pub fn zero(dtype: DType) -> Scalar {
        Scalar::from_bits(dtype, 0).cast(dtype)
    }

    /// The value as `f64` (lossy for large 64-bit integers).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(v) => v as u8 as f64,
            Scalar::I32(v) => v as f64,
            Scalar::U32(v) => v as f64,
            Scalar::I64(v) => v as f64,
            Scalar::U64(v) => v as f64,
            Scalar::F32(v) => v as f64,
            Scalar::F64(v) => v,
        }
    }

    /// The value as `bool`: non-zero is `true`.
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::Bool(v) => v,
            Scalar::F32(v) => v != 0.0,
            Scalar::F64(v) => v != 0.0,
            other => other.to_bits() != 0,
        }
    }

    /// Rust `as` conversion to `to`: integers wrap or extend, floats to
    /// integers saturate with NaN → 0, `bool` becomes 0/1 and back `!= 0`.
    pub fn cast(self, to: DType) -> Scalar {
        macro_rules! conv {
            ($v:expr) => {
                match to {
                    DType::Bool => Scalar::Bool(Scalar::from($v).as_bool()),
                    DType::I32 => Scalar::I32($v as i32),
                    DType::U32 => Scalar::U32($v as u32),
                    DType::I64 => Scalar::I64($v as i64),
                    DType::U64 => Scalar::U64($v as u64),
                    DType::F32 => Scalar::F32($v as f32),
                    DType::F64 => Scalar::F64($v as f64),
                }
            };
        }
        match self {
            Scalar::Bool(v) => conv!(v as u8),
            Scalar::I32(v) => conv!(v),
            Scalar::U32(v) => conv!(v),
            Scalar::I64(v) => conv!(v),
            Scalar::U64(v) => conv!(v),
            Scalar::F32(v) => conv!(v),
            Scalar::F64(v) => conv!(v),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Scalar { Scalar::$v(v) }
        }
    )*};
}
scalar_from!(bool => Bool, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

impl From<u8> for Scalar {
    fn from(v: u8) -> Scalar {
        Scalar::U32(v as u32)
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        self.dtype() == other.dtype() && self.to_bits() == other.to_bits()
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.to_bits().hash(state);
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(v) => write!(f, "{v}"),
            Scalar::I32(v) => write!(f, "{v}i32"),
            Scalar::U32(v) => write!(f, "{v}u32"),
            Scalar::I64(v) => write!(f, "{v}i64"),
            Scalar::U64(v) => write!(f, "{v}u64"),
            Scalar::F32(v) => write!(f, "{v:?}f32"),
            Scalar::F64(v) => write!(f, "{v:?}f64"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_follow_rust_as() {
        assert_eq!(Scalar::F32(f32::NAN).cast(DType::I32), Scalar::I32(0));
        assert_eq!(Scalar::F32(1e20).cast(DType::I32), Scalar::I32(i32::MAX));
        assert_eq!(Scalar::F64(-1.0).cast(DType::U32), Scalar::U32(0));
        assert_eq!(Scalar::I64(-1).cast(DType::U32), Scalar::U32(u32::MAX));
        assert_eq!(Scalar::I32(2).cast(DType::Bool), Scalar::Bool(true));
        assert_eq!(Scalar::Bool(true).cast(DType::F64), Scalar::F64(1.0));
    }

    #[test]
    fn bits_round_trip() {
        for s in [
            Scalar::Bool(true),
            Scalar::I32(-5),
            Scalar::U32(7),
            Scalar::I64(i64::MIN),
            Scalar::U64(u64::MAX),
            Scalar::F32(-0.0),
            Scalar::F64(f64::NAN),
        ] {
            assert_eq!(Scalar::from_bits(s.dtype(), s.to_bits()), s);
        }
    }
}

/// A [`Scalar`] as its type and raw bits: the serialized form (NaN and
/// infinities survive formats such as JSON that have no such numbers).
#[derive(Copy, Clone, serde::Serialize, serde::Deserialize)]
struct ScalarBits(DType, u64);

impl From<Scalar> for ScalarBits {
    fn from(s: Scalar) -> ScalarBits {
        ScalarBits(s.dtype(), s.to_bits())
    }
}

impl From<ScalarBits> for Scalar {
    fn from(b: ScalarBits) -> Scalar {
        Scalar::from_bits(b.0, b.1)
    }
}
