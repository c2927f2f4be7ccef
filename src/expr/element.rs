//! The Rust types a query can stream: `Element` (every lane type), `Numeric`
//! (arithmetic) and `Float` (math functions). Sealed: the set is fixed by
//! what every backend implements.

use crate::types::{Column, ColumnRef};
use crate::types::{DType, Scalar};

mod sealed {
    pub trait Sealed {}
}

/// A type whose values can flow through a query: `bool` and the six numbers.
pub trait Element:
    Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static + sealed::Sealed
{
    /// The matching [`DType`].
    const DTYPE: DType;
    /// This value as a [`Scalar`].
    fn to_scalar(self) -> Scalar;
    /// The value of a [`Scalar`] known to have type `Self::DTYPE`.
    fn from_scalar(s: Scalar) -> Self;
    /// Borrows a slice as an untyped column.
    fn column_ref(xs: &[Self]) -> ColumnRef<'_>;
    /// Takes back a column known to hold `Self` values.
    fn from_column(c: Column) -> Vec<Self>;
}

/// `f32 f64 i32 u32 i64 u64`: types with arithmetic, `sum`, `min`, `max`.
pub trait Numeric: Element {
    /// Zero.
    const ZERO: Self;
}

/// `f32 f64`: types with `sqrt exp ln sin cos floor ceil round`.
pub trait Float: Numeric {}

macro_rules! element {
    ($t:ty, $v:ident, $d:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::$v(self)
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Self {
                // The value's own type first (no conversion).
                if let Scalar::$v(x) = s {
                    return x;
                }
                match s.cast(DType::$d) {
                    Scalar::$v(x) => x,
                    _ => unreachable!(),
                }
            }
            #[inline]
            fn column_ref(xs: &[Self]) -> ColumnRef<'_> {
                ColumnRef::$v(xs)
            }
            fn from_column(c: Column) -> Vec<Self> {
                match c {
                    Column::$v(v) => v,
                    other => panic!(
                        "internal error: expected a {} column, got {}",
                        DType::$d,
                        other.dtype()
                    ),
                }
            }
        }
    };
}

element!(bool, Bool, Bool);
element!(i32, I32, I32);
element!(u32, U32, U32);
element!(i64, I64, I64);
element!(u64, U64, U64);
element!(f32, F32, F32);
element!(f64, F64, F64);

macro_rules! numeric {
    ($($t:ty => $z:expr),*) => {$( impl Numeric for $t { const ZERO: Self = $z; } )*};
}
numeric!(i32 => 0, u32 => 0, i64 => 0, u64 => 0, f32 => 0.0, f64 => 0.0);
impl Float for f32 {}
impl Float for f64 {}
