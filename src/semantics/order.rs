//! The canonical total order of keys: what sorts and top-k order by.
//!
//! Integers and `bool` order numerically. Floats order by IEEE 754's total
//! order after every NaN has become one value, greater than `+inf`: `-0.0`
//! sorts before `+0.0`. As group keys `-0.0` and `+0.0` are one key (and
//! every NaN is one key).
//!
//! Every key maps to an unsigned word whose plain order is that order
//! ([`ordered_bits`]): 32 bits for the 4-byte types and `bool`, 64 for the
//! 8-byte ones. A descending key is the complement of that word, so ties
//! keep their input order and NaN comes first.

use crate::types::{DType, Scalar};
use std::cmp::Ordering;

/// One key of a sort: a column and its direction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SortKey {
    /// The key column.
    pub value: crate::expr::Value,
    /// Larger keys first (the complement of the key: ties keep their
    /// order, NaN comes first).
    pub descending: bool,
}

/// What a join keeps of the probe side (the stream reaching the join).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum JoinKind {
    /// Every (probe row, build row) pair with equal keys: the probe's
    /// columns, then the build side's.
    Inner,
    /// The probe rows whose key some build row has (`semi_join`, `is_in`).
    Semi,
    /// The probe rows whose key no build row has (`anti_join`, `not_in`).
    Anti,
}

impl JoinKind {
    /// The name in plans and metrics.
    pub fn name(self) -> &'static str {
        match self {
            JoinKind::Inner => "join",
            JoinKind::Semi => "semi_join",
            JoinKind::Anti => "anti_join",
        }
    }
}

/// The canonical NaN of each float type's keys.
const NAN32: u32 = 0x7fc0_0000;
const NAN64: u64 = 0x7ff8_0000_0000_0000;

/// The order-preserving word of an `f32` key.
#[inline(always)]
pub fn f32_word(x: f32) -> u32 {
    let b = if x.is_nan() { NAN32 } else { x.to_bits() };
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// The `f32` whose word is `w` (NaN comes back as the canonical NaN).
#[inline(always)]
pub fn f32_of_word(w: u32) -> f32 {
    f32::from_bits(if w >> 31 == 1 { w & 0x7fff_ffff } else { !w })
}

/// The order-preserving word of an `f64` key.
#[inline(always)]
pub fn f64_word(x: f64) -> u64 {
    let b = if x.is_nan() { NAN64 } else { x.to_bits() };
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The `f64` whose word is `w`.
#[inline(always)]
pub fn f64_of_word(w: u64) -> f64 {
    f64::from_bits(if w >> 63 == 1 { w & !(1 << 63) } else { !w })
}

/// The order-preserving word of any key (the 4-byte types and `bool` use
/// the low 32 bits).
pub fn ordered_bits(s: Scalar) -> u64 {
    match s {
        Scalar::Bool(b) => b as u64,
        Scalar::I32(x) => ((x as u32) ^ 0x8000_0000) as u64,
        Scalar::U32(x) => x as u64,
        Scalar::F32(x) => f32_word(x) as u64,
        Scalar::I64(x) => (x as u64) ^ (1 << 63),
        Scalar::U64(x) => x,
        Scalar::F64(x) => f64_word(x),
    }
}

/// Whether a key of `ty` has a 32-bit word.
pub fn is_narrow(ty: DType) -> bool {
    ty.size() <= 4
}

/// The canonical order of two keys of one dtype.
pub fn cmp(a: Scalar, b: Scalar) -> Ordering {
    ordered_bits(a).cmp(&ordered_bits(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_order_like_the_documented_total_order() {
        let xs = [
            f32::NEG_INFINITY,
            -1.5,
            -f32::MIN_POSITIVE / 2.0,
            -0.0,
            0.0,
            f32::MIN_POSITIVE / 2.0,
            1.0,
            f32::INFINITY,
            f32::NAN,
        ];
        for w in xs.windows(2) {
            assert!(f32_word(w[0]) < f32_word(w[1]), "{} {}", w[0], w[1]);
        }
        // Every NaN is one key, above +inf, and comes back as NaN.
        assert_eq!(f32_word(-f32::NAN), f32_word(f32::NAN));
        assert_eq!(f32_word(f32::from_bits(0x7f80_0001)), f32_word(f32::NAN));
        assert!(f32_of_word(f32_word(f32::NAN)).is_nan());
        for x in xs.iter().filter(|x| !x.is_nan()) {
            assert_eq!(f32_of_word(f32_word(*x)).to_bits(), x.to_bits());
            let d = *x as f64;
            assert_eq!(f64_of_word(f64_word(d)).to_bits(), d.to_bits());
        }
        assert!(f64_word(-0.0) < f64_word(0.0) && f64_word(f64::INFINITY) < f64_word(f64::NAN));
        assert_eq!(cmp(Scalar::I32(-1), Scalar::I32(0)), Ordering::Less);
        assert_eq!(cmp(Scalar::I64(i64::MIN), Scalar::I64(-1)), Ordering::Less);
    }
}
