//! The reference semantics of every operation, one value at a time.
//!
//! `cpu-scalar` and constant folding evaluate through these functions, so
//! they are the definition every other backend is tested against. The rules
//! are those of docs/architecture.md: integers wrap, integer division or remainder by
//! zero gives 0, float→int casts saturate with NaN → 0, float `min`/`max`
//! return the other operand when one is NaN.

use super::arena::{ExprArena, Node, Value};
use super::ops::{BinaryOp, UnaryOp};
use crate::types::Scalar;
use smallvec::SmallVec;

/// `x` to the power `n` by binary exponentiation (the sequence of multiplies
/// every backend reproduces); a negative `n` gives `1 / x^|n|`.
pub fn powi_f64(x: f64, n: i32) -> f64 {
    let r = pow_unsigned(x, n.unsigned_abs(), |a, b| a * b, 1.0);
    if n < 0 {
        1.0 / r
    } else {
        r
    }
}

/// `f32` version of [`powi_f64`], computed in `f32` throughout.
pub fn powi_f32(x: f32, n: i32) -> f32 {
    let r = pow_unsigned(x, n.unsigned_abs(), |a, b| a * b, 1.0);
    if n < 0 {
        1.0 / r
    } else {
        r
    }
}

fn pow_unsigned<T: Copy>(x: T, mut e: u32, mul: impl Fn(T, T) -> T, one: T) -> T {
    let mut result = one;
    let mut base = x;
    let mut first = true;
    while e > 0 {
        if e & 1 == 1 {
            // Skipping the multiply by one keeps `powi(x, 1) == x` exact.
            result = if first { base } else { mul(result, base) };
            first = false;
        }
        e >>= 1;
        if e > 0 {
            base = mul(base, base);
        }
    }
    result
}

/// Evaluates a unary operation. The operand type has been checked by tracing.
pub fn unary(op: UnaryOp, x: Scalar) -> Scalar {
    use Scalar::*;
    macro_rules! float {
        ($v:expr, $c:ident) => {
            match op {
                UnaryOp::Neg => $c(-$v),
                UnaryOp::Abs => $c($v.abs()),
                UnaryOp::Sqrt => $c($v.sqrt()),
                UnaryOp::Exp => $c($v.exp()),
                UnaryOp::Ln => $c($v.ln()),
                UnaryOp::Sin => $c($v.sin()),
                UnaryOp::Cos => $c($v.cos()),
                UnaryOp::Floor => $c($v.floor()),
                UnaryOp::Ceil => $c($v.ceil()),
                UnaryOp::Round => $c($v.round()),
                UnaryOp::Not | UnaryOp::BitNot => {
                    unreachable!("`{op}` on a float survived type checking")
                }
            }
        };
    }
    match x {
        Bool(b) => match op {
            UnaryOp::Not => Bool(!b),
            _ => unreachable!("`{op}` on bool survived type checking"),
        },
        I32(v) => I32(int_unary(op, v as i64) as i32),
        I64(v) => I64(int_unary(op, v)),
        U32(v) => U32(match op {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::BitNot => !v,
            _ => v,
        }),
        U64(v) => U64(match op {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::BitNot => !v,
            _ => v,
        }),
        F32(v) => float!(v, F32),
        F64(v) => float!(v, F64),
    }
}

fn int_unary(op: UnaryOp, v: i64) -> i64 {
    // i32 values are widened to i64 here, so wrapping happens on the cast back.
    match op {
        UnaryOp::Neg => v.wrapping_neg(),
        UnaryOp::Abs => v.wrapping_abs(),
        // On the widened value: its low 32 bits are the `i32`'s `!`.
        UnaryOp::BitNot => !v,
        _ => v,
    }
}

/// Evaluates a binary operation on two operands of the same type.
pub fn binary(op: BinaryOp, a: Scalar, b: Scalar) -> Scalar {
    use Scalar::*;
    if op.is_comparison() {
        return Bool(compare(op, a, b));
    }
    macro_rules! int {
        ($x:expr, $y:expr, $c:ident) => {
            $c(match op {
                BinaryOp::Add => $x.wrapping_add($y),
                BinaryOp::Sub => $x.wrapping_sub($y),
                BinaryOp::Mul => $x.wrapping_mul($y),
                BinaryOp::Div => {
                    if $y == 0 {
                        0
                    } else {
                        $x.wrapping_div($y)
                    }
                }
                BinaryOp::Rem => {
                    if $y == 0 {
                        0
                    } else {
                        $x.wrapping_rem($y)
                    }
                }
                BinaryOp::Min => $x.min($y),
                BinaryOp::Max => $x.max($y),
                BinaryOp::BitAnd => $x & $y,
                BinaryOp::BitOr => $x | $y,
                BinaryOp::BitXor => $x ^ $y,
                // The amount as Rust's `wrapping_shl`/`wrapping_shr` take it:
                // its bits as `u32`, modulo the width.
                BinaryOp::Shl => $x.wrapping_shl($y as u32),
                BinaryOp::Shr => $x.wrapping_shr($y as u32),
                _ => unreachable!("`{op}` on integers survived type checking"),
            })
        };
    }
    macro_rules! float {
        ($x:expr, $y:expr, $c:ident) => {
            $c(match op {
                BinaryOp::Add => $x + $y,
                BinaryOp::Sub => $x - $y,
                BinaryOp::Mul => $x * $y,
                BinaryOp::Div => $x / $y,
                BinaryOp::Rem => $x % $y,
                BinaryOp::Min => $x.min($y),
                BinaryOp::Max => $x.max($y),
                _ => unreachable!("`{op}` on floats survived type checking"),
            })
        };
    }
    match (a, b) {
        (Bool(x), Bool(y)) => Bool(match op {
            BinaryOp::And => x & y,
            BinaryOp::Or => x | y,
            _ => unreachable!("`{op}` on bool survived type checking"),
        }),
        (I32(x), I32(y)) => int!(x, y, I32),
        (U32(x), U32(y)) => int!(x, y, U32),
        (I64(x), I64(y)) => int!(x, y, I64),
        (U64(x), U64(y)) => int!(x, y, U64),
        (F32(x), F32(y)) => float!(x, y, F32),
        (F64(x), F64(y)) => float!(x, y, F64),
        _ => unreachable!("mixed operand types survived type checking: {a:?} {b:?}"),
    }
}

fn compare(op: BinaryOp, a: Scalar, b: Scalar) -> bool {
    use Scalar::*;
    macro_rules! cmp {
        ($x:expr, $y:expr) => {
            match op {
                BinaryOp::Eq => $x == $y,
                BinaryOp::Ne => $x != $y,
                BinaryOp::Lt => $x < $y,
                BinaryOp::Le => $x <= $y,
                BinaryOp::Gt => $x > $y,
                BinaryOp::Ge => $x >= $y,
                _ => unreachable!(),
            }
        };
    }
    match (a, b) {
        (Bool(x), Bool(y)) => cmp!(x, y),
        (I32(x), I32(y)) => cmp!(x, y),
        (U32(x), U32(y)) => cmp!(x, y),
        (I64(x), I64(y)) => cmp!(x, y),
        (U64(x), U64(y)) => cmp!(x, y),
        (F32(x), F32(y)) => cmp!(x, y),
        (F64(x), F64(y)) => cmp!(x, y),
        _ => unreachable!("mixed operand types survived type checking: {a:?} {b:?}"),
    }
}

/// `a * b + c`: fused (one rounding) for floats, wrapping for integers.
pub fn mul_add(a: Scalar, b: Scalar, c: Scalar) -> Scalar {
    use Scalar::*;
    match (a, b, c) {
        (F32(x), F32(y), F32(z)) => F32(x.mul_add(y, z)),
        (F64(x), F64(y), F64(z)) => F64(x.mul_add(y, z)),
        _ => binary(BinaryOp::Add, binary(BinaryOp::Mul, a, b), c),
    }
}

/// `x^n` for floats, wrapping `x^n` for integers (negative `n` gives 0 for
/// integers other than ±1, as integer `1 / x^|n|` does).
pub fn powi(x: Scalar, n: i32) -> Scalar {
    use Scalar::*;
    match x {
        F32(v) => F32(powi_f32(v, n)),
        F64(v) => F64(powi_f64(v, n)),
        Bool(_) => unreachable!("powi on bool survived type checking"),
        int => {
            let one = Scalar::I64(1).cast(int.dtype());
            let p = pow_unsigned(
                int,
                n.unsigned_abs(),
                |a, b| binary(BinaryOp::Mul, a, b),
                one,
            );
            if n < 0 {
                binary(BinaryOp::Div, one, p)
            } else {
                p
            }
        }
    }
}

/// Evaluates `program` up to `output` for one element.
pub fn eval_program(
    program: &ExprArena,
    output: Value,
    inputs: &[Scalar],
    indices: &[u64],
    params: &[Scalar],
) -> Scalar {
    let mut regs: SmallVec<[Scalar; 32]> = SmallVec::with_capacity(program.len());
    eval_into(program, inputs, indices, params, &mut regs);
    regs[output.index()]
}

/// Evaluates every node of `program` for one element into `regs` (by
/// node index), reusing its allocation.
pub fn eval_into(
    program: &ExprArena,
    inputs: &[Scalar],
    indices: &[u64],
    params: &[Scalar],
    regs: &mut SmallVec<[Scalar; 32]>,
) {
    regs.clear();
    for (_, n) in program.iter() {
        let r = |v: Value| regs[v.index()];
        let value = match n.node {
            Node::Input(s) => inputs[s as usize],
            Node::Index(e) => Scalar::U64(indices[e as usize]),
            Node::Param(p) => params[p as usize],
            Node::Const(c) => c,
            Node::Unary(op, a) => unary(op, r(a)),
            Node::Binary(op, a, b) => binary(op, r(a), r(b)),
            Node::Select(c, a, b) => {
                if r(c).as_bool() {
                    r(a)
                } else {
                    r(b)
                }
            }
            Node::MulAdd(a, b, c) => mul_add(r(a), r(b), r(c)),
            Node::Cast(a) => r(a).cast(n.ty),
            Node::Powi(a, k) => powi(r(a), k),
        };
        regs.push(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_by_zero_is_zero_and_min_over_minus_one_wraps() {
        assert_eq!(binary(BinaryOp::Div, I32(7), I32(0)), I32(0));
        assert_eq!(binary(BinaryOp::Rem, U64(7), U64(0)), U64(0));
        // Bit operations; shift amounts modulo the width, signed `>>`
        // arithmetic.
        assert_eq!(
            binary(BinaryOp::BitAnd, I32(0b1100), I32(0b1010)),
            I32(0b1000)
        );
        assert_eq!(
            binary(BinaryOp::BitOr, U32(0b1100), U32(0b1010)),
            U32(0b1110)
        );
        assert_eq!(
            binary(BinaryOp::BitXor, U64(0b1100), U64(0b1010)),
            U64(0b0110)
        );
        assert_eq!(binary(BinaryOp::Shl, I32(1), I32(33)), I32(2));
        assert_eq!(binary(BinaryOp::Shl, I32(1), I32(-1)), I32(i32::MIN));
        assert_eq!(binary(BinaryOp::Shr, I32(-8), I32(1)), I32(-4));
        assert_eq!(binary(BinaryOp::Shr, U32(u32::MAX), U32(31)), U32(1));
        assert_eq!(binary(BinaryOp::Shl, U64(1), U64(64 + 3)), U64(8));
        assert_eq!(binary(BinaryOp::Shr, I64(i64::MIN), I64(63)), I64(-1));
        assert_eq!(unary(UnaryOp::BitNot, I32(0)), I32(-1));
        assert_eq!(unary(UnaryOp::BitNot, I32(i32::MAX)), I32(i32::MIN));
        assert_eq!(unary(UnaryOp::BitNot, U32(0)), U32(u32::MAX));
        assert_eq!(unary(UnaryOp::BitNot, I64(5)), I64(!5));
        assert_eq!(unary(UnaryOp::BitNot, U64(5)), U64(!5));
        assert_eq!(binary(BinaryOp::Div, I32(i32::MIN), I32(-1)), I32(i32::MIN));
        assert_eq!(binary(BinaryOp::Rem, I64(i64::MIN), I64(-1)), I64(0));
    }
    use Scalar::*;

    #[test]
    fn float_min_max_skip_nan() {
        assert_eq!(binary(BinaryOp::Min, F32(f32::NAN), F32(1.0)), F32(1.0));
        assert_eq!(binary(BinaryOp::Max, F64(2.0), F64(f64::NAN)), F64(2.0));
    }

    #[test]
    fn powi_matches_repeated_multiplication() {
        assert_eq!(powi_f64(3.0, 5), 243.0);
        assert_eq!(powi_f32(2.0, -2), 0.25);
        assert_eq!(powi_f64(7.5, 0), 1.0);
        assert_eq!(powi(I32(3), 3), I32(27));
        assert_eq!(powi(I32(2), 40), I32(0));
        assert_eq!(powi(I32(2), -1), I32(0));
    }

    #[test]
    fn unsigned_negation_wraps() {
        assert_eq!(unary(UnaryOp::Neg, U32(1)), U32(u32::MAX));
        assert_eq!(unary(UnaryOp::Abs, I32(i32::MIN)), I32(i32::MIN));
    }
}
