//! Guards a stage's kernels against the infinities and NaNs that WGSL lets
//! a compiler assume away.
//!
//! WGSL allows an implementation to assume that no float operation sees or
//! gives an infinity or a NaN, and the drivers we run do: lavapipe,
//! llvmpipe and NVIDIA's driver compute `x - x` as `0` for an infinite `x`.
//! Such a kernel is exact whenever every float value its arithmetic touches
//! is finite, and may be anything otherwise. [`guard`] makes the second
//! case visible instead of silently wrong:
//!
//! - every float operand of a *guarded* operation (float arithmetic,
//!   `mul_add`, subgroup sums, comparisons) is checked just before it, and
//!   its float result just after: the value's bits without the sign go
//!   into a running `max` per invocation (two integer operations, which no
//!   float assumption can fold). A check sits where the operation does, so
//!   a NaN that a filter or a select keeps away from the arithmetic is not
//!   flagged. An operand every definition of which is itself checked (an
//!   earlier guarded result, a finite constant, a copy of either) needs no
//!   check of its own;
//! - arithmetic may not meet an infinity or a NaN; a comparison may not
//!   meet a NaN (a compiler that assumes none may turn `!(a < b)` into
//!   `a >= b`). A comparison of an infinity with another value is exact:
//!   only a constant operand, which [`guard`] refuses, lets a compiler fold
//!   it;
//! - at the end of the kernel an invocation whose `max` says it met one
//!   sets a one-word scratch;
//! - the executor reads that word with the run's results and, when set,
//!   discards the run ([`KernelPlan::non_finite`]); the query goes on to
//!   the next backend, as after any device failure.
//!
//! Not guarded, because they handle infinities and NaNs by their bits or
//! only move them: loads and stores that only carry a value (a sort's
//! payload), `neg`, `abs`, casts (NaN → 0 and saturation are tested on the
//! bits), the NaN-skipping `min`/`max` (NaN tested on the bits first), and
//! the sort, group and join keys (canonical words). A guarded operation
//! with a constant infinity or NaN operand cannot be guarded at run time
//! (the compiler sees the constant): [`guard`] refuses it, and the stage
//! is declined.

use super::kernel::{AtomicOp, Binding, BindingId, Kernel, Local, LocalDecl, Op, Operand, Stmt};
use super::plan::{BufferRef, KernelPlan, Scratch, ScratchInit, ScratchLen};
use super::{u32c, Access, SubgroupOp};
use crate::expr::{BinaryOp, DType, Scalar, UnaryOp};
use std::collections::HashSet;

/// Why the executor discards a run whose guard word is set (the message of
/// its `BackendError`; the recommendation rule `NonFinite` looks for it).
pub(crate) const DISCARDED: &str = "a float operation met an infinity or a NaN, which WGSL \
     lets the device's compiler assume away: the result is not trusted";

/// An `f32`'s bits without the sign.
const ABS32: u32 = 0x7fff_ffff;
/// `f32` bits without the sign from here up: an infinity or a NaN.
const INF32: u32 = 0x7f80_0000;
const ABS64: u64 = 0x7fff_ffff_ffff_ffff;
const INF64: u64 = 0x7ff0_0000_0000_0000;

/// What a guarded operation may not meet.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Rule {
    /// Arithmetic: an infinity or a NaN.
    Finite,
    /// A comparison: a NaN.
    NotNan,
}

/// The rule of `op` when its float operands and result are guarded.
fn guarded(k: &Kernel, op: &Op) -> Option<Rule> {
    use BinaryOp::*;
    let float = |o: &Operand| k.operand_ty(*o).is_float();
    let arithmetic = match op {
        Op::Unary(u, a) => float(a) && !matches!(u, UnaryOp::Neg | UnaryOp::Abs),
        Op::Binary(Eq | Ne | Lt | Le | Gt | Ge, x, _) if float(x) => return Some(Rule::NotNan),
        Op::Binary(b, x, _) => float(x) && matches!(b, Add | Sub | Mul | Div | Rem),
        Op::MulAdd(a, _, _) => float(a),
        Op::Subgroup(SubgroupOp::Add | SubgroupOp::InclusiveAdd, a) => float(a),
        _ => false,
    };
    arithmetic.then_some(Rule::Finite)
}

fn non_finite(c: Scalar) -> bool {
    c.dtype().is_float() && !c.as_f64().is_finite()
}

/// Adds the guard to every kernel of `kp` that has a guarded operation,
/// and the scratch word they set. Kernels without one are left as they
/// are. `int64`: the device has 64-bit integers (an `f64`'s bits are
/// tested as a `u64`; without them through its cast to `f32`, which also
/// flags finite values past `f32`'s range in arithmetic: a run discarded
/// needlessly, never a wrong one kept).
///
/// Errs when a guarded operation has a constant infinity or NaN operand.
pub(crate) fn guard(kp: &mut KernelPlan, int64: bool) -> Result<(), String> {
    let flag = kp.scratch.len() as u16;
    let mut any = false;
    for i in 0..kp.kernels.len() {
        if guard_kernel(&mut kp.kernels[i], int64)? {
            any = true;
            for d in kp.dispatches.iter_mut().filter(|d| d.kernel == i) {
                d.buffers.push(BufferRef::Scratch(flag));
            }
        }
    }
    if any {
        kp.scratch.push(Scratch {
            name: "non_finite".into(),
            elem: DType::U32,
            len: ScratchLen::One,
            init: ScratchInit::Zero,
        });
        kp.non_finite = Some(flag);
    }
    Ok(())
}

/// The registers of the checks: per rule, the largest sign-less bits met
/// (`f32`, and `f64` cast to `f32` without 64-bit integers; `f64`), and
/// scratch for one value's bits.
struct Regs {
    max32: [Local; 2],
    bits32: Local,
    narrow: Local,
    wide: Option<([Local; 2], Local)>,
}

/// Guards one kernel; whether it had anything to guard.
fn guard_kernel(k: &mut Kernel, int64: bool) -> Result<bool, String> {
    let mut found = false;
    let mut wide = false;
    let mut bad_const = None;
    super::visit(&k.body, &mut |s| {
        if let Stmt::Assign(_, op) = s {
            if guarded(k, op).is_some() {
                found = true;
                for o in super::op_operands(op) {
                    wide |= k.operand_ty(o) == DType::F64;
                    if let Operand::Const(c) = o {
                        if non_finite(c) {
                            bad_const = Some((c, op.clone()));
                        }
                    }
                }
            }
        }
    });
    if let Some((c, op)) = bad_const {
        return Err(format!(
            "`{op}` has the constant {c}, which WGSL lets the compiler assume away"
        ));
    }
    if !found {
        return Ok(false);
    }

    let new_local = |k: &mut Kernel, ty| {
        k.locals.push(LocalDecl { ty });
        Local::new(k.locals.len() - 1)
    };
    let regs = Regs {
        max32: [new_local(k, DType::U32), new_local(k, DType::U32)],
        bits32: new_local(k, DType::U32),
        narrow: new_local(k, DType::F32),
        wide: (wide && int64).then(|| {
            (
                [new_local(k, DType::U64), new_local(k, DType::U64)],
                new_local(k, DType::U64),
            )
        }),
    };
    let mut out = Vec::new();
    for m in regs.max32 {
        out.push(Stmt::Assign(m, Op::Copy(u32c(0))));
    }
    for m in regs.wide.iter().flat_map(|w| w.0) {
        out.push(Stmt::Assign(m, Op::Copy(Scalar::U64(0).into())));
    }
    let settled = checked_wherever_defined(k);
    let body = std::mem::take(&mut k.body);
    out.extend(instrument(k, body, &regs, &settled));

    // The end: an invocation that met what a rule forbids sets the word.
    let binding = BindingId::new(k.bindings.len());
    k.bindings.push(Binding {
        name: "non_finite".into(),
        elem: DType::U32,
        access: Access::Atomic,
    });
    let seen = new_local(k, DType::Bool);
    let one = new_local(k, DType::Bool);
    let ignored = new_local(k, DType::U32);
    out.push(Stmt::Assign(seen, Op::Copy(Scalar::Bool(false).into())));
    let met = |out: &mut Vec<Stmt>, max: Local, op: BinaryOp, bound: Scalar| {
        out.push(Stmt::Assign(one, Op::Binary(op, max.into(), bound.into())));
        out.push(Stmt::Assign(
            seen,
            Op::Binary(BinaryOp::Or, seen.into(), one.into()),
        ));
    };
    met(&mut out, regs.max32[0], BinaryOp::Ge, Scalar::U32(INF32));
    met(&mut out, regs.max32[1], BinaryOp::Gt, Scalar::U32(INF32));
    if let Some((max64, _)) = regs.wide {
        met(&mut out, max64[0], BinaryOp::Ge, Scalar::U64(INF64));
        met(&mut out, max64[1], BinaryOp::Gt, Scalar::U64(INF64));
    }
    out.push(Stmt::If {
        cond: seen.into(),
        then_body: vec![Stmt::Assign(
            ignored,
            Op::Atomic {
                op: AtomicOp::Or,
                binding,
                index: u32c(0),
                value: u32c(1),
            },
        )],
        else_body: Vec::new(),
    });
    k.body = out;
    Ok(true)
}

/// The float locals whose every definition is checked where it happens
/// (a guarded operation's result), is a finite constant, or copies or
/// selects such locals: as operands they need no check of their own.
fn checked_wherever_defined(k: &Kernel) -> HashSet<Local> {
    let mut sources: Vec<(Local, Vec<Local>)> = Vec::new();
    let mut unchecked: HashSet<Local> = HashSet::new();
    super::visit(&k.body, &mut |s| {
        let Stmt::Assign(dst, op) = s else { return };
        if !k.ty(*dst).is_float() || guarded(k, op).is_some() {
            return;
        }
        let from = match op {
            Op::Copy(a) => vec![*a],
            Op::Select(_, a, b) => vec![*a, *b],
            _ => {
                unchecked.insert(*dst);
                return;
            }
        };
        let mut locals = Vec::new();
        for o in from {
            match o {
                Operand::Local(l) => locals.push(l),
                Operand::Const(c) if non_finite(c) => {
                    unchecked.insert(*dst);
                }
                Operand::Const(_) => {}
            }
        }
        sources.push((*dst, locals));
    });
    // A copy of an unchecked local is unchecked, to the fixed point.
    loop {
        let before = unchecked.len();
        for (dst, from) in &sources {
            if from.iter().any(|l| unchecked.contains(l)) {
                unchecked.insert(*dst);
            }
        }
        if unchecked.len() == before {
            break;
        }
    }
    (0..k.locals.len())
        .map(Local::new)
        .filter(|l| k.ty(*l).is_float() && !unchecked.contains(l))
        .collect()
}

/// `body` with its guarded operations' float operands checked before
/// them (but those `settled` checks where they are defined) and their
/// float results after.
fn instrument(k: &Kernel, body: Vec<Stmt>, r: &Regs, settled: &HashSet<Local>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::Assign(dst, op) => match guarded(k, &op) {
                Some(rule) => {
                    let mut seen: Vec<Local> = Vec::new();
                    for o in super::op_operands(&op) {
                        if let Operand::Local(l) = o {
                            if k.ty(l).is_float() && !settled.contains(&l) && !seen.contains(&l) {
                                seen.push(l);
                                check_value(k, l, rule, r, &mut out);
                            }
                        }
                    }
                    out.push(Stmt::Assign(dst, op));
                    if k.ty(dst).is_float() {
                        check_value(k, dst, rule, r, &mut out);
                    }
                }
                None => out.push(Stmt::Assign(dst, op)),
            },
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => out.push(Stmt::If {
                cond,
                then_body: instrument(k, then_body, r, settled),
                else_body: instrument(k, else_body, r, settled),
            }),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => out.push(Stmt::For {
                var,
                start,
                end,
                step,
                body: instrument(k, body, r, settled),
            }),
            other => out.push(other),
        }
    }
    out
}

/// `max[rule] = max(max[rule], bits(v) & !sign)`.
fn check_value(k: &Kernel, v: Local, rule: Rule, r: &Regs, out: &mut Vec<Stmt>) {
    let at = (rule == Rule::NotNan) as usize;
    let (max, bits, abs, src) = match (k.ty(v), r.wide) {
        (DType::F64, Some((max64, bits64))) => (max64[at], bits64, Scalar::U64(ABS64), v),
        (DType::F64, None) => {
            out.push(Stmt::Assign(r.narrow, Op::Cast(v.into())));
            (r.max32[at], r.bits32, Scalar::U32(ABS32), r.narrow)
        }
        _ => (r.max32[at], r.bits32, Scalar::U32(ABS32), v),
    };
    out.push(Stmt::Assign(bits, Op::Bitcast(src.into())));
    out.push(Stmt::Assign(
        bits,
        Op::Binary(BinaryOp::BitAnd, bits.into(), abs.into()),
    ));
    out.push(Stmt::Assign(
        max,
        Op::Binary(BinaryOp::Max, max.into(), bits.into()),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::{Builtin, KernelBuilder};

    /// `out[i] = in[i] op rhs` over `f32`, `rhs` the loaded value itself
    /// when `None`.
    fn kernel(op: BinaryOp, rhs: Option<Scalar>) -> Kernel {
        let mut b = KernelBuilder::new("k", 64);
        let input = b.binding("in", DType::F32, Access::Read);
        let out_ty = if op.is_comparison() {
            DType::Bool
        } else {
            DType::F32
        };
        let out = b.binding("out", out_ty, Access::ReadWrite);
        let i = b.builtin(Builtin::GlobalId);
        let x = b.assign(DType::F32, Op::Load(input, i.into()));
        let y = b.binary(op, x, rhs.map_or(Operand::Local(x), Operand::Const));
        b.push(Stmt::Store(out, i.into(), y.into()));
        b.finish().expect("a valid kernel")
    }

    fn count(k: &Kernel, what: &str) -> usize {
        k.to_string().matches(what).count()
    }

    #[test]
    fn arithmetic_checks_its_operand_once_and_its_result() {
        let mut k = kernel(BinaryOp::Sub, None);
        assert!(guard_kernel(&mut k, true).unwrap());
        k.verify().expect("the guarded kernel verifies");
        // `x - x`: `x` checked once, the result once.
        assert_eq!(count(&k, "bitcast"), 2, "{k}");
        assert_eq!(count(&k, "atomic.or"), 1, "{k}");
        let last = k.bindings.last().unwrap();
        assert_eq!((last.elem, last.access), (DType::U32, Access::Atomic));
        crate::codegen::wgsl::write_kernel(&k).expect("WGSL");
    }

    #[test]
    fn a_checked_result_needs_no_second_check_as_an_operand() {
        let mut b = KernelBuilder::new("k", 64);
        let input = b.binding("in", DType::F32, Access::Read);
        let out = b.binding("out", DType::F32, Access::ReadWrite);
        let i = b.builtin(Builtin::GlobalId);
        let x = b.assign(DType::F32, Op::Load(input, i.into()));
        let t = b.binary(BinaryOp::Mul, x, Scalar::F32(2.0));
        let c = b.assign(DType::F32, Op::Copy(t.into()));
        let u = b.binary(BinaryOp::Add, c, Scalar::F32(1.0));
        b.push(Stmt::Store(out, i.into(), u.into()));
        let mut k = b.finish().unwrap();
        assert!(guard_kernel(&mut k, true).unwrap());
        // `x` (a load) as an operand, `t` and `u` as results; `c` copies
        // a checked value.
        assert_eq!(count(&k, "bitcast"), 3, "{k}");
    }

    #[test]
    fn comparisons_check_their_operands_for_nan_only() {
        let mut k = kernel(BinaryOp::Lt, Some(Scalar::F32(0.5)));
        assert!(guard_kernel(&mut k, true).unwrap());
        // `x < 0.5`: `x` checked (for a NaN), no float result.
        assert_eq!(count(&k, "bitcast"), 1, "{k}");
    }

    #[test]
    fn operations_that_handle_non_finite_values_by_their_bits_are_left_alone() {
        let plain = kernel(BinaryOp::Min, None);
        let mut k = plain.clone();
        assert!(!guard_kernel(&mut k, true).unwrap());
        assert_eq!(k, plain);
    }

    #[test]
    fn a_constant_infinity_or_nan_in_guarded_arithmetic_is_refused() {
        for c in [f32::INFINITY, f32::NAN] {
            let mut k = kernel(BinaryOp::Mul, Some(Scalar::F32(c)));
            let e = guard_kernel(&mut k, true).unwrap_err();
            assert!(e.contains("assume away"), "{e}");
        }
        let mut k = kernel(BinaryOp::Lt, Some(Scalar::F32(f32::INFINITY)));
        assert!(guard_kernel(&mut k, true).is_err());
    }
}
