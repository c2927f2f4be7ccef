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
//! - a *guarded* operation (float arithmetic, `mul_add`, subgroup sums,
//!   comparisons) checks its float operands just before it and its float
//!   result just after, by their bits without the sign (integer
//!   operations, which no float assumption can fold). Arithmetic may not
//!   meet an infinity or a NaN; a comparison may not meet a NaN (a
//!   compiler that assumes none may turn `!(a < b)` into `a >= b`), while
//!   a comparison of an infinity with another value is exact: only a
//!   constant operand, which [`guard`] refuses, lets a compiler fold it.
//!   An operand every definition of which is itself checked (an earlier
//!   guarded result, a finite constant, a copy of either) needs no check
//!   of its own;
//! - what a check finds *taints* the result, and taint follows the values
//!   computed from it (a shadow `bool` per register), through a select
//!   only from the arm it takes: a `1 / 0` in a lane that a filter drops,
//!   or a histogram's bin arithmetic on an infinity that its `>= hi`
//!   sends to `above`, taints nothing that is kept; nor does `p` in
//!   `a && p` where `a` is false (`a || p`: true). `x == x` and `x != x`
//!   are rewritten as the NaN tests on the bits they are;
//! - a tainted value that reaches something observable (a store, an
//!   atomic, a subgroup collective, a load's index, a branch or a loop
//!   bound) sets the invocation's flag, and at its end an invocation
//!   whose flag is set sets a one-word scratch;
//! - the executor reads that word with the run's results and, when set,
//!   discards the run ([`KernelPlan::non_finite`]); the query goes on to
//!   the next backend, as after any device failure.
//!
//! Not guarded, because they handle infinities and NaNs by their bits or
//! only move them: loads and stores, `neg`, `abs`, casts (NaN → 0 and
//! saturation are tested on the bits), the NaN-skipping `min`/`max` (NaN
//! tested on the bits first), and the sort, group and join keys
//! (canonical words).

use super::kernel::{AtomicOp, Binding, BindingId, Kernel, Local, LocalDecl, Op, Operand, Stmt};
use super::plan::{BufferRef, KernelPlan, Scratch, ScratchInit, ScratchLen};
use super::{u32c, Access, SubgroupOp};
use crate::expr::{BinaryOp, DType, Scalar, UnaryOp};
use std::collections::{HashMap, HashSet};

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

/// The registers of the guard.
struct Regs {
    /// Per taintable local, its shadow: whether its value came from a
    /// guarded operation that met what its rule forbids.
    shadow: HashMap<Local, Local>,
    /// Locals that need no check as operands.
    settled: HashSet<Local>,
    /// A tainted value reached something observable.
    flag: Local,
    /// One statement's taint, then one check's result.
    pending: Local,
    check: Local,
    /// One value's bits, and an `f64` cast to `f32`.
    bits32: Local,
    narrow: Local,
    /// One `f64`'s bits, with 64-bit integers.
    bits64: Option<Local>,
}

impl Regs {
    fn shadow_of(&self, o: Operand) -> Option<Local> {
        match o {
            Operand::Local(l) => self.shadow.get(&l).copied(),
            Operand::Const(_) => None,
        }
    }

    /// `flag |= shadow(o)`: `o` reaches something observable.
    fn sink(&self, o: Operand, out: &mut Vec<Stmt>) {
        if let Some(s) = self.shadow_of(o) {
            out.push(or_into(self.flag, s));
        }
    }
}

fn or_into(dst: Local, x: Local) -> Stmt {
    Stmt::Assign(dst, Op::Binary(BinaryOp::Or, dst.into(), x.into()))
}

/// Whether `op`'s result carries no taint from its operands: a load, an
/// atomic or a collective (what reaches them is checked there), a
/// uniform or a builtin.
fn starts_afresh(op: &Op) -> bool {
    matches!(
        op,
        Op::Load(..)
            | Op::LoadShared(..)
            | Op::Atomic { .. }
            | Op::AtomicShared { .. }
            | Op::Subgroup(..)
            | Op::Uniform(_)
            | Op::Builtin(_)
    )
}

/// The locals whose value may come from a guarded operation: its results,
/// and what is computed from them (loads, atomics and subgroup
/// collectives start afresh: what reaches them is checked there).
fn taintable(k: &Kernel) -> HashSet<Local> {
    let mut defs: Vec<(Local, Op)> = Vec::new();
    super::visit(&k.body, &mut |s| {
        if let Stmt::Assign(dst, op) = s {
            defs.push((*dst, op.clone()));
        }
    });
    let mut t = HashSet::new();
    loop {
        let before = t.len();
        for (dst, op) in &defs {
            let from = !starts_afresh(op)
                && super::op_operands(op)
                    .iter()
                    .any(|o| matches!(o, Operand::Local(l) if t.contains(l)));
            if guarded(k, op).is_some() || from {
                t.insert(*dst);
            }
        }
        if t.len() == before {
            break;
        }
    }
    t
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

/// `x == x` and `x != x` on floats as the NaN tests they are, on the
/// bits: as comparisons they would meet the NaN they test for (and a
/// compiler that assumes none may fold them).
fn self_comparisons(k: &mut Kernel, body: Vec<Stmt>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::Assign(dst, Op::Binary(op @ (BinaryOp::Eq | BinaryOp::Ne), a, b))
                if a == b && k.operand_ty(a).is_float() =>
            {
                if op == BinaryOp::Ne {
                    out.push(Stmt::Assign(dst, Op::IsNan(a)));
                } else {
                    k.locals.push(LocalDecl { ty: DType::Bool });
                    let nan = Local::new(k.locals.len() - 1);
                    out.push(Stmt::Assign(nan, Op::IsNan(a)));
                    out.push(Stmt::Assign(dst, Op::Unary(UnaryOp::Not, nan.into())));
                }
            }
            other => out.push(other.map_bodies(|b| self_comparisons(k, b))),
        }
    }
    out
}

/// Guards one kernel; whether it had anything to guard.
fn guard_kernel(k: &mut Kernel, int64: bool) -> Result<bool, String> {
    let body = std::mem::take(&mut k.body);
    k.body = self_comparisons(k, body);
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
    let settled = checked_wherever_defined(k);
    let mut tainted: Vec<Local> = taintable(k).into_iter().collect();
    tainted.sort();
    let mut shadow = HashMap::new();
    for l in tainted {
        shadow.insert(l, new_local(k, DType::Bool));
    }
    let regs = Regs {
        shadow,
        settled,
        flag: new_local(k, DType::Bool),
        pending: new_local(k, DType::Bool),
        check: new_local(k, DType::Bool),
        bits32: new_local(k, DType::U32),
        narrow: new_local(k, DType::F32),
        bits64: (wide && int64).then(|| new_local(k, DType::U64)),
    };
    let no = || Op::Copy(Scalar::Bool(false).into());
    let mut out = vec![Stmt::Assign(regs.flag, no())];
    let mut shadows: Vec<Local> = regs.shadow.values().copied().collect();
    shadows.sort();
    out.extend(shadows.into_iter().map(|s| Stmt::Assign(s, no())));
    let body = std::mem::take(&mut k.body);
    out.extend(instrument(k, body, &regs));

    // The end: an invocation whose observable values met what a rule
    // forbids sets the word.
    let binding = BindingId::new(k.bindings.len());
    k.bindings.push(Binding {
        name: "non_finite".into(),
        elem: DType::U32,
        access: Access::Atomic,
    });
    let ignored = new_local(k, DType::U32);
    out.push(Stmt::If {
        cond: regs.flag.into(),
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

/// `body` with the guard: before each assignment the taint of its value
/// (its operands' shadows; for a guarded operation the checks of its
/// unsettled float operands, and after it of its float result) into the
/// destination's shadow; before each store, atomic, collective, load
/// index, branch and loop, the shadows of what it reads into the flag.
fn instrument(k: &Kernel, body: Vec<Stmt>, r: &Regs) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::Assign(dst, op) => assign(k, dst, op, r, &mut out),
            Stmt::Store(b, i, v) => {
                r.sink(i, &mut out);
                r.sink(v, &mut out);
                out.push(Stmt::Store(b, i, v));
            }
            Stmt::StoreShared(a, i, v) => {
                r.sink(i, &mut out);
                r.sink(v, &mut out);
                out.push(Stmt::StoreShared(a, i, v));
            }
            s @ (Stmt::If { .. } | Stmt::For { .. }) => {
                for o in s.control_operands() {
                    r.sink(o, &mut out);
                }
                out.push(s.map_bodies(|b| instrument(k, b, r)));
            }
            Stmt::Barrier => out.push(Stmt::Barrier),
        }
    }
    out
}

fn assign(k: &Kernel, dst: Local, op: Op, r: &Regs, out: &mut Vec<Stmt>) {
    let keeps = r.shadow.get(&dst).copied();
    let rule = guarded(k, &op);
    // What only reaches the operation's own machinery is observable.
    match &op {
        Op::Load(_, i) | Op::LoadShared(_, i) => r.sink(*i, out),
        Op::Subgroup(_, a) => r.sink(*a, out),
        Op::Atomic { index, value, .. } | Op::AtomicShared { index, value, .. } => {
            r.sink(*index, out);
            r.sink(*value, out);
        }
        _ => {}
    }
    let fresh = starts_afresh(&op);
    let Some(shadow) = keeps else {
        debug_assert!(rule.is_none(), "a guarded result is taintable");
        out.push(Stmt::Assign(dst, op));
        return;
    };
    out.push(Stmt::Assign(
        r.pending,
        Op::Copy(Scalar::Bool(false).into()),
    ));
    if !fresh {
        match op {
            Op::Binary(b @ (BinaryOp::And | BinaryOp::Or), x, y)
                if k.operand_ty(x) == DType::Bool =>
            {
                // `false && y` is false whatever `y` is (`true || y`
                // true): a tainted operand counts where the other one
                // lets it decide, and when both are tainted.
                let (sx, sy) = (r.shadow_of(x), r.shadow_of(y));
                let lets = |o: Operand, out: &mut Vec<Stmt>| -> Operand {
                    if b == BinaryOp::And {
                        o
                    } else {
                        out.push(Stmt::Assign(r.check, Op::Unary(UnaryOp::Not, o)));
                        r.check.into()
                    }
                };
                if let Some(sx) = sx {
                    let other = lets(y, out);
                    out.push(Stmt::Assign(
                        r.check,
                        Op::Binary(BinaryOp::And, sx.into(), other),
                    ));
                    out.push(or_into(r.pending, r.check));
                }
                if let Some(sy) = sy {
                    let other = lets(x, out);
                    out.push(Stmt::Assign(
                        r.check,
                        Op::Binary(BinaryOp::And, sy.into(), other),
                    ));
                    out.push(or_into(r.pending, r.check));
                }
                if let (Some(sx), Some(sy)) = (sx, sy) {
                    out.push(Stmt::Assign(
                        r.check,
                        Op::Binary(BinaryOp::And, sx.into(), sy.into()),
                    ));
                    out.push(or_into(r.pending, r.check));
                }
            }
            Op::Select(c, a, b) => {
                if let Some(sc) = r.shadow_of(c) {
                    out.push(or_into(r.pending, sc));
                }
                let (sa, sb) = (r.shadow_of(a), r.shadow_of(b));
                if sa.is_some() || sb.is_some() {
                    let f = |s: Option<Local>| {
                        s.map_or(Operand::Const(Scalar::Bool(false)), Operand::Local)
                    };
                    out.push(Stmt::Assign(r.check, Op::Select(c, f(sa), f(sb))));
                    out.push(or_into(r.pending, r.check));
                }
            }
            _ => {
                let mut seen: Vec<Local> = Vec::new();
                for o in super::op_operands(&op) {
                    let Operand::Local(l) = o else { continue };
                    if seen.contains(&l) {
                        continue;
                    }
                    seen.push(l);
                    if let Some(s) = r.shadow.get(&l) {
                        out.push(or_into(r.pending, *s));
                    }
                    if let Some(rule) = rule {
                        if k.ty(l).is_float() && !r.settled.contains(&l) {
                            check_value(k, l, rule, r, out);
                        }
                    }
                }
            }
        }
    }
    out.push(Stmt::Assign(dst, op));
    if let Some(rule) = rule {
        if k.ty(dst).is_float() {
            check_value(k, dst, rule, r, out);
        }
    }
    out.push(Stmt::Assign(shadow, Op::Copy(r.pending.into())));
}

/// `pending |= bits(v) without the sign >= infinity's` (a NaN: `>`).
fn check_value(k: &Kernel, v: Local, rule: Rule, r: &Regs, out: &mut Vec<Stmt>) {
    let (bits, abs, inf, src) = match (k.ty(v), r.bits64) {
        (DType::F64, Some(bits64)) => (bits64, Scalar::U64(ABS64), Scalar::U64(INF64), v),
        (DType::F64, None) => {
            out.push(Stmt::Assign(r.narrow, Op::Cast(v.into())));
            (r.bits32, Scalar::U32(ABS32), Scalar::U32(INF32), r.narrow)
        }
        _ => (r.bits32, Scalar::U32(ABS32), Scalar::U32(INF32), v),
    };
    let cmp = match rule {
        Rule::Finite => BinaryOp::Ge,
        Rule::NotNan => BinaryOp::Gt,
    };
    out.push(Stmt::Assign(bits, Op::Bitcast(src.into())));
    out.push(Stmt::Assign(
        bits,
        Op::Binary(BinaryOp::BitAnd, bits.into(), abs.into()),
    ));
    out.push(Stmt::Assign(
        r.check,
        Op::Binary(cmp, bits.into(), inf.into()),
    ));
    out.push(or_into(r.pending, r.check));
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
