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
//!   comparisons, `mul_add`, subgroup sums) is checked just before it, and
//!   its float result just after: the value's exponent field, masked out
//!   of its bits, goes into a running `max` per invocation (two integer
//!   operations, which no float assumption can fold). A check sits where
//!   the operation does, so a NaN that a filter or a select keeps away
//!   from the arithmetic is not flagged;
//! - at the end of the kernel an invocation whose `max` is the all-ones
//!   exponent (an infinity or a NaN went through) sets a one-word scratch;
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

/// The exponent field of an `f32`, all ones: an infinity or a NaN.
const EXP32: u32 = 0x7f80_0000;
/// The exponent field of an `f64`, all ones.
const EXP64: u64 = 0x7ff0_0000_0000_0000;

/// Whether `op` is one whose float operands and result the compiler may
/// assume finite.
fn guarded(k: &Kernel, op: &Op) -> bool {
    let float = |o: &Operand| k.operand_ty(*o).is_float();
    match op {
        Op::Unary(u, a) => float(a) && !matches!(u, UnaryOp::Neg | UnaryOp::Abs),
        Op::Binary(b, x, _) => {
            use BinaryOp::*;
            float(x) && matches!(b, Add | Sub | Mul | Div | Rem | Eq | Ne | Lt | Le | Gt | Ge)
        }
        Op::MulAdd(a, _, _) => float(a),
        Op::Subgroup(SubgroupOp::Add | SubgroupOp::InclusiveAdd, a) => float(a),
        _ => false,
    }
}

fn operands(op: &Op) -> Vec<Operand> {
    super::op_operands(op)
}

fn non_finite(c: Scalar) -> bool {
    c.dtype().is_float() && !c.as_f64().is_finite()
}

/// Adds the guard to every kernel of `kp` that has a guarded operation,
/// and the scratch word they set. Kernels without one are left as they
/// are. `int64`: the device has 64-bit integers (an `f64`'s bits are
/// tested as a `u64`; without them through its cast to `f32`, which also
/// flags finite values past `f32`'s range: a run discarded needlessly,
/// never a wrong one kept).
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

/// Guards one kernel; whether it had anything to guard.
fn guard_kernel(k: &mut Kernel, int64: bool) -> Result<bool, String> {
    let mut found = false;
    let mut wide = false;
    let mut bad_const = None;
    super::visit(&k.body, &mut |s| {
        if let Stmt::Assign(_, op) = s {
            if guarded(k, op) {
                found = true;
                for o in operands(op) {
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
        max32: new_local(k, DType::U32),
        bits32: new_local(k, DType::U32),
        narrow: new_local(k, DType::F32),
        wide: if wide && int64 {
            Some((new_local(k, DType::U64), new_local(k, DType::U64)))
        } else {
            None
        },
    };
    let body = std::mem::take(&mut k.body);
    let mut out = vec![Stmt::Assign(regs.max32, Op::Copy(u32c(0)))];
    if let Some((max64, _)) = regs.wide {
        out.push(Stmt::Assign(max64, Op::Copy(Scalar::U64(0).into())));
    }
    out.extend(instrument(k, body, &regs));

    // The end: an invocation that saw an all-ones exponent sets the word.
    let binding = BindingId::new(k.bindings.len());
    k.bindings.push(Binding {
        name: "non_finite".into(),
        elem: DType::U32,
        access: Access::Atomic,
    });
    let seen = new_local(k, DType::Bool);
    let ignored = new_local(k, DType::U32);
    out.push(Stmt::Assign(
        seen,
        Op::Binary(BinaryOp::Eq, regs.max32.into(), u32c(EXP32)),
    ));
    if let Some((max64, _)) = regs.wide {
        let seen64 = new_local(k, DType::Bool);
        out.push(Stmt::Assign(
            seen64,
            Op::Binary(BinaryOp::Eq, max64.into(), Scalar::U64(EXP64).into()),
        ));
        out.push(Stmt::Assign(
            seen,
            Op::Binary(BinaryOp::Or, seen.into(), seen64.into()),
        ));
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

/// The registers of the checks.
struct Regs {
    /// The largest `f32` exponent field seen (and `f64`s cast to `f32`
    /// without 64-bit integers).
    max32: Local,
    /// Scratch for one `f32`'s bits.
    bits32: Local,
    /// Scratch for an `f64` cast to `f32`.
    narrow: Local,
    /// The largest `f64` exponent field seen, and scratch for the bits.
    wide: Option<(Local, Local)>,
}

/// `body` with its guarded operations' float operands checked before
/// them and their float results after.
fn instrument(k: &Kernel, body: Vec<Stmt>, r: &Regs) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::Assign(dst, op) if guarded(k, &op) => {
                let mut seen: Vec<Local> = Vec::new();
                for o in operands(&op) {
                    if let Operand::Local(l) = o {
                        if k.ty(l).is_float() && !seen.contains(&l) {
                            seen.push(l);
                            check_value(k, l, r, &mut out);
                        }
                    }
                }
                out.push(Stmt::Assign(dst, op));
                if k.ty(dst).is_float() {
                    check_value(k, dst, r, &mut out);
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => out.push(Stmt::If {
                cond,
                then_body: instrument(k, then_body, r),
                else_body: instrument(k, else_body, r),
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
                body: instrument(k, body, r),
            }),
            other => out.push(other),
        }
    }
    out
}

/// `max = max(max, bits(v) & exponent)`.
fn check_value(k: &Kernel, v: Local, r: &Regs, out: &mut Vec<Stmt>) {
    let (max, bits, exp, src): (Local, Local, Scalar, Local) = match (k.ty(v), r.wide) {
        (DType::F64, Some((max64, bits64))) => (max64, bits64, Scalar::U64(EXP64), v),
        (DType::F64, None) => {
            out.push(Stmt::Assign(r.narrow, Op::Cast(v.into())));
            (r.max32, r.bits32, Scalar::U32(EXP32), r.narrow)
        }
        _ => (r.max32, r.bits32, Scalar::U32(EXP32), v),
    };
    out.push(Stmt::Assign(bits, Op::Bitcast(src.into())));
    out.push(Stmt::Assign(
        bits,
        Op::Binary(BinaryOp::BitAnd, bits.into(), exp.into()),
    ));
    out.push(Stmt::Assign(
        max,
        Op::Binary(BinaryOp::Max, max.into(), bits.into()),
    ));
}
