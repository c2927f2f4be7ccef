//! Interpreter two, the oracle: a `Case` run as plain std iterator code
//! (`iter().map()`, `filter`, `zip`, `enumerate`, `take`, `skip`, folds)
//! with the semantics docs/architecture.md states, written without any computeq code.
//!
//! Every value carries, next to its exact (`cpu-scalar`) value, a bound on
//! how far a conforming backend of a given [`Profile`] may be from it:
//!
//! * `e == 0`: the backend must produce these exact bits (`NaN` matching any
//!   `NaN`; with `z` set, either sign of zero);
//! * `0 < e < inf`: same class (finite, `NaN`, `+inf`, `-inf`) and within
//!   `e` — only floats;
//! * `e == inf`: unknown (the backend may legitimately produce anything
//!   here, e.g. a float sum whose reassociation can overflow, or an integer
//!   cast from a float that sits within rounding of an integer boundary).
//!
//! Bounds come from reassociation (`n · ε · Σ|x|` for sums, `k · ε` relative
//! for products), from documented per-op accuracies of GPU targets, and are
//! propagated through later operations by first-order error analysis, with
//! discontinuities (comparisons, `floor`, casts to integers) turning a
//! bounded error into "unknown" when the interval straddles the jump. A
//! filter whose predicate is unknown makes the whole case inconclusive for
//! that backend (the stream itself is no longer determined).

use super::ast::{Bin, Case, Cmp, Comb, Ex, ExKind, Step, Term, Un, BITS};
use super::build::Inputs;
use super::value::{eps, max_finite, min_normal, Col, Val};
use computeq::expr::DType;
use computeq::BackendKind;

/// What a backend may do differently from the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    /// Float reductions and scans may combine in any order.
    pub reassociates: bool,
    /// Element-wise float operations have GPU accuracy (WGSL/PTX rules:
    /// division 2.5 ulp, `sqrt` inherited, `exp` 3+2|x| ulp, `ln` 3 ulp or
    /// 2^-21 absolute on [0.5, 2], `sin`/`cos` 2^-11 absolute on [-π, π],
    /// `mul_add` possibly unfused, `%` through a quotient, subnormals
    /// possibly flushed to zero).
    pub gpu_accuracy: bool,
    /// The target's compiler may assume that no float operation sees or
    /// gives an infinity or a NaN (WGSL allows it: lavapipe, llvmpipe
    /// and NVIDIA's driver fold `x - x` to 0 for an infinite `x`): such an
    /// operation's result is unknown.
    pub assumes_finite: bool,
}

/// `cpu-scalar` and the std oracle: strictly left to right, bit-exact.
pub const EXACT: Profile = Profile {
    name: "exact",
    reassociates: false,
    gpu_accuracy: false,
    assumes_finite: false,
};
/// `cpu-simd`, `cpu-parallel`: exact element-wise, any reduction order.
pub const CPU: Profile = Profile {
    name: "cpu (reassociating)",
    reassociates: true,
    gpu_accuracy: false,
    assumes_finite: false,
};
/// `cuda` (PTX's float operations are IEEE's, infinities and NaNs too).
pub const GPU: Profile = Profile {
    name: "gpu (reassociating, GPU accuracy)",
    reassociates: true,
    gpu_accuracy: true,
    assumes_finite: false,
};
/// `wgpu`: [`GPU`], and no infinity or NaN promised.
pub const WGSL: Profile = Profile {
    name: "wgsl (reassociating, GPU accuracy, finite)",
    reassociates: true,
    gpu_accuracy: true,
    assumes_finite: true,
};

/// The tolerance profile of a backend.
pub fn profile(kind: BackendKind) -> Profile {
    match kind {
        BackendKind::CpuScalar => EXACT,
        BackendKind::CpuSimd | BackendKind::CpuParallel => CPU,
        BackendKind::Wgpu => WGSL,
        BackendKind::Cuda => GPU,
    }
}

const UNKNOWN: f64 = f64::INFINITY;

/// A value with its error bound (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sh {
    pub v: Val,
    pub e: f64,
    /// Exact up to the sign of zero.
    pub z: bool,
}

impl Sh {
    pub fn exact(v: Val) -> Sh {
        Sh {
            v,
            e: 0.0,
            z: false,
        }
    }
    pub fn unknown(v: Val) -> Sh {
        Sh {
            v,
            e: UNKNOWN,
            z: true,
        }
    }
    pub fn is_unknown(&self) -> bool {
        self.e == UNKNOWN
    }
}

/// What the terminal should return, with bounds.
#[derive(Clone, Debug)]
pub enum Expect {
    Val(Sh),
    Opt(Option<Sh>),
    Usize(usize),
    /// The position, and whether it is determined.
    OptUsize(Option<usize>, bool),
    Mean(Option<Sh>),
    Bool(Sh),
    Cols(Vec<Vec<Sh>>),
    /// A histogram's counts, or value counts' counts then their keys;
    /// whether they are determined (every element exact: otherwise one
    /// near an edge may fall either side, and an inexact key may differ);
    /// whether keys follow the counts (value counts).
    Counts(Vec<u64>, bool, bool),
    Stats {
        count: u64,
        sum: Sh,
        min: Option<Sh>,
        max: Option<Sh>,
        mean: Option<Sh>,
    },
}

/// The oracle's answer for one case and profile.
#[derive(Clone, Debug)]
pub struct Oracle {
    pub expect: Expect,
    /// Why the backend cannot be compared on this case (an undetermined
    /// filter), if so.
    pub inconclusive: Option<String>,
    /// Under a profile that assumes finite values: an element operation
    /// met an infinity or a NaN or could have (its bound cannot rule one
    /// out: a GPU's `%` through a quotient that overflows), or the result
    /// holds one (a float sum that overflowed). wgpu's guard may then
    /// discard the run, and only then (`codegen::finite`).
    pub met_non_finite: bool,
}

impl Expect {
    /// Whether a float the terminal returns is infinite or NaN, or may be
    /// (its bound cannot rule it out: a reassociated sum whose partial
    /// sums may overflow in some order).
    fn has_non_finite(&self) -> bool {
        let bad = |s: &Sh| (is_float(s.v) && !s.v.is_finite()) || may_leave_range(s);
        match self {
            Expect::Val(s) | Expect::Bool(s) | Expect::Opt(Some(s)) | Expect::Mean(Some(s)) => {
                bad(s)
            }
            Expect::Cols(cols) => cols.iter().flatten().any(bad),
            Expect::Stats {
                sum,
                min,
                max,
                mean,
                ..
            } => bad(sum) || [min, max, mean].into_iter().flatten().any(bad),
            _ => false,
        }
    }
}

/// Whether a float's bound cannot rule out an infinity or a NaN: its value
/// is unknown, or the bound reaches past the type's range.
fn may_leave_range(s: &Sh) -> bool {
    is_float(s.v) && (s.is_unknown() || s.v.f64().abs() + s.e > max_finite(s.v.dtype()))
}

// ------------------------------------------------------ nominal semantics

fn int_div<T>(a: T, b: T, zero: T, div: impl Fn(T, T) -> T) -> T
where
    T: PartialEq + Copy,
{
    if b == zero {
        zero
    } else {
        div(a, b)
    }
}

macro_rules! int_bin {
    ($op:expr, $x:expr, $y:expr) => {
        match $op {
            Bin::Add => $x.wrapping_add($y),
            Bin::Sub => $x.wrapping_sub($y),
            Bin::Mul => $x.wrapping_mul($y),
            Bin::Div => int_div($x, $y, 0, |a, b| a.wrapping_div(b)),
            Bin::Rem => int_div($x, $y, 0, |a, b| a.wrapping_rem(b)),
            Bin::Min => std::cmp::min($x, $y),
            Bin::Max => std::cmp::max($x, $y),
            Bin::BitAnd => $x & $y,
            Bin::BitOr => $x | $y,
            Bin::BitXor => $x ^ $y,
            // Rust's `wrapping_shl(n as u32)`: the amount modulo the width.
            Bin::Shl => $x.wrapping_shl($y as u32),
            Bin::Shr => $x.wrapping_shr($y as u32),
            Bin::And | Bin::Or => unreachable!(),
        }
    };
}

macro_rules! float_bin {
    ($op:expr, $x:expr, $y:expr) => {
        match $op {
            Bin::Add => $x + $y,
            Bin::Sub => $x - $y,
            Bin::Mul => $x * $y,
            Bin::Div => $x / $y,
            Bin::Rem => $x % $y,
            Bin::Min => $x.min($y),
            Bin::Max => $x.max($y),
            _ => unreachable!("{:?} on floats", $op),
        }
    };
}

pub fn bin(op: Bin, a: Val, b: Val) -> Val {
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => Val::Bool(match op {
            Bin::And => x & y,
            Bin::Or => x | y,
            _ => unreachable!(),
        }),
        (Val::I32(x), Val::I32(y)) => Val::I32(int_bin!(op, x, y)),
        (Val::U32(x), Val::U32(y)) => Val::U32(int_bin!(op, x, y)),
        (Val::I64(x), Val::I64(y)) => Val::I64(int_bin!(op, x, y)),
        (Val::U64(x), Val::U64(y)) => Val::U64(int_bin!(op, x, y)),
        (Val::F32(x), Val::F32(y)) => Val::F32(float_bin!(op, x, y)),
        (Val::F64(x), Val::F64(y)) => Val::F64(float_bin!(op, x, y)),
        (a, b) => panic!("{op:?} on {a:?} and {b:?}"),
    }
}

pub fn un(op: Un, a: Val) -> Val {
    macro_rules! f {
        ($x:expr) => {
            match op {
                Un::Neg => -$x,
                Un::Abs => $x.abs(),
                Un::Sqrt => $x.sqrt(),
                Un::Exp => $x.exp(),
                Un::Ln => $x.ln(),
                Un::Sin => $x.sin(),
                Un::Cos => $x.cos(),
                Un::Floor => $x.floor(),
                Un::Ceil => $x.ceil(),
                Un::Round => $x.round(),
                Un::Not | Un::BitNot => unreachable!(),
            }
        };
    }
    match (op, a) {
        (Un::Not, Val::Bool(b)) => Val::Bool(!b),
        (Un::BitNot, Val::I32(x)) => Val::I32(!x),
        (Un::BitNot, Val::U32(x)) => Val::U32(!x),
        (Un::BitNot, Val::I64(x)) => Val::I64(!x),
        (Un::BitNot, Val::U64(x)) => Val::U64(!x),
        (Un::Neg, Val::I32(x)) => Val::I32(x.wrapping_neg()),
        (Un::Neg, Val::U32(x)) => Val::U32(x.wrapping_neg()),
        (Un::Neg, Val::I64(x)) => Val::I64(x.wrapping_neg()),
        (Un::Neg, Val::U64(x)) => Val::U64(x.wrapping_neg()),
        (Un::Abs, Val::I32(x)) => Val::I32(x.wrapping_abs()),
        (Un::Abs, Val::I64(x)) => Val::I64(x.wrapping_abs()),
        (Un::Abs, v @ (Val::U32(_) | Val::U64(_))) => v,
        (_, Val::F32(x)) => Val::F32(f!(x)),
        (_, Val::F64(x)) => Val::F64(f!(x)),
        (op, a) => panic!("{op:?} on {a:?}"),
    }
}

pub fn cmp(op: Cmp, a: Val, b: Val) -> bool {
    macro_rules! c {
        ($x:expr, $y:expr) => {
            match op {
                Cmp::Eq => $x == $y,
                Cmp::Ne => $x != $y,
                Cmp::Lt => $x < $y,
                Cmp::Le => $x <= $y,
                Cmp::Gt => $x > $y,
                Cmp::Ge => $x >= $y,
            }
        };
    }
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => c!(x, y),
        (Val::I32(x), Val::I32(y)) => c!(x, y),
        (Val::U32(x), Val::U32(y)) => c!(x, y),
        (Val::I64(x), Val::I64(y)) => c!(x, y),
        (Val::U64(x), Val::U64(y)) => c!(x, y),
        (Val::F32(x), Val::F32(y)) => c!(x, y),
        (Val::F64(x), Val::F64(y)) => c!(x, y),
        (a, b) => panic!("{op:?} on {a:?} and {b:?}"),
    }
}

/// Rust `as`; `bool` is 0/1, and a number is `true` when `!= 0` (NaN too).
pub fn cast(v: Val, to: DType) -> Val {
    macro_rules! conv {
        ($x:expr, $zero:expr) => {
            match to {
                DType::Bool => Val::Bool($x != $zero),
                DType::I32 => Val::I32($x as i32),
                DType::U32 => Val::U32($x as u32),
                DType::I64 => Val::I64($x as i64),
                DType::U64 => Val::U64($x as u64),
                DType::F32 => Val::F32($x as f32),
                DType::F64 => Val::F64($x as f64),
            }
        };
    }
    match v {
        Val::Bool(b) => conv!(b as u8, 0),
        Val::I32(x) => conv!(x, 0),
        Val::U32(x) => conv!(x, 0),
        Val::I64(x) => conv!(x, 0),
        Val::U64(x) => conv!(x, 0),
        Val::F32(x) => conv!(x, 0.0),
        Val::F64(x) => conv!(x, 0.0),
    }
}

/// Float `x^n` by binary exponentiation: square the base, multiply the
/// result by it at each set bit; `1 / x^|n|` for negative `n`.
macro_rules! powi_float {
    ($x:expr, $n:expr, $one:expr) => {{
        let mut r = $one;
        let mut b = $x;
        let mut e = $n.unsigned_abs();
        while e > 0 {
            if e & 1 == 1 {
                r = r * b;
            }
            e >>= 1;
            if e > 0 {
                b = b * b;
            }
        }
        if $n < 0 {
            $one / r
        } else {
            r
        }
    }};
}

macro_rules! powi_int {
    ($x:expr, $n:expr, $t:ty) => {{
        let p = $x.wrapping_pow($n.unsigned_abs());
        if $n < 0 {
            int_div(1 as $t, p, 0, |a, b| a.wrapping_div(b))
        } else {
            p
        }
    }};
}

pub fn powi(v: Val, n: i32) -> Val {
    match v {
        Val::I32(x) => Val::I32(powi_int!(x, n, i32)),
        Val::U32(x) => Val::U32(powi_int!(x, n, u32)),
        Val::I64(x) => Val::I64(powi_int!(x, n, i64)),
        Val::U64(x) => Val::U64(powi_int!(x, n, u64)),
        Val::F32(x) => Val::F32(powi_float!(x, n, 1.0f32)),
        Val::F64(x) => Val::F64(powi_float!(x, n, 1.0f64)),
        Val::Bool(_) => unreachable!(),
    }
}

/// `a * b + c`: one rounding for floats, wrapping for integers.
pub fn mul_add(a: Val, b: Val, c: Val) -> Val {
    match (a, b, c) {
        (Val::F32(x), Val::F32(y), Val::F32(z)) => Val::F32(x.mul_add(y, z)),
        (Val::F64(x), Val::F64(y), Val::F64(z)) => Val::F64(x.mul_add(y, z)),
        _ => bin(Bin::Add, bin(Bin::Mul, a, b), c),
    }
}

// -------------------------------------------------------- error analysis

fn is_float(v: Val) -> bool {
    v.dtype().is_float()
}

fn ulp(t: DType, y: f64) -> f64 {
    eps(t) * y.abs().max(min_normal(t))
}

fn subnormal(v: Val) -> bool {
    let t = v.dtype();
    let a = v.f64().abs();
    t.is_float() && a > 0.0 && a < min_normal(t)
}

/// Rounding slack of an operation evaluated on perturbed inputs.
fn slack(t: DType, r: f64) -> f64 {
    4.0 * eps(t) * r.abs() + 2.0 * min_normal(t)
}

/// The result `v` with bound `e`: integers and booleans are exact or
/// unknown; a float bound that could change the class becomes unknown.
fn finish(v: Val, e: f64, z: bool) -> Sh {
    if !is_float(v) {
        return if e > 0.0 {
            Sh::unknown(v)
        } else {
            Sh::exact(v)
        };
    }
    if e == 0.0 {
        return Sh { v, e, z };
    }
    if !e.is_finite() || !v.is_finite() || v.f64().abs() + e >= max_finite(v.dtype()) {
        return Sh::unknown(v);
    }
    Sh { v, e, z: true }
}

fn zero_sign_open(s: &Sh) -> bool {
    s.z && s.v.is_float_zero()
}

struct Eval<'p> {
    p: &'p Profile,
    /// An element operation met an infinity or a NaN that the profile's
    /// compiler may assume away ([`Oracle::met_non_finite`]).
    met: std::cell::Cell<bool>,
}

/// The leaves of one element.
pub struct OEnv {
    pub x: Sh,
    pub y: Option<Sh>,
    pub i: Option<u64>,
}

impl Eval<'_> {
    /// [`Self::value`], noting under a profile that assumes finite values
    /// when a float's bound cannot rule out an infinity or a NaN (an
    /// unknown value, or one whose bound reaches past the type's range:
    /// the device may have met one, and its guard then discards the run).
    fn ex(&self, e: &Ex, env: &OEnv) -> Sh {
        let r = self.value(e, env);
        if self.p.assumes_finite && may_leave_range(&r) {
            self.met.set(true);
        }
        r
    }

    /// A scan, noting where its float arithmetic (a sum or a product; a
    /// `min`/`max` only moves values) takes or gives an infinity or a NaN,
    /// even where a later step drops that row.
    fn scan(&self, comb: Comb, exclusive: bool, t: DType, s: &[Sh]) -> Vec<Sh> {
        let out = scan(self.p, comb, exclusive, t, s);
        let arithmetic = matches!(comb, Comb::Add | Comb::AddRev | Comb::Mul);
        if self.p.assumes_finite && arithmetic && s.iter().chain(&out).any(may_leave_range) {
            self.met.set(true);
        }
        out
    }

    fn value(&self, e: &Ex, env: &OEnv) -> Sh {
        match &e.kind {
            ExKind::X => env.x,
            ExKind::Y => env.y.expect("y outside zip"),
            ExKind::I => Sh::exact(Val::U64(env.i.expect("i outside enumerate"))),
            ExKind::Lit(v, _) => Sh::exact(*v),
            ExKind::Un(op, a) => self.un(*op, self.ex(a, env)),
            ExKind::Bin(op @ (Bin::And | Bin::Or), a, b) => {
                self.logic(*op, self.ex(a, env), self.ex(b, env))
            }
            ExKind::Bin(op, a, b) => self.bin(*op, self.ex(a, env), self.ex(b, env)),
            ExKind::Cmp(op, a, b) => self.cmp(*op, self.ex(a, env), self.ex(b, env)),
            ExKind::Select(c, a, b) => {
                self.select(self.ex(c, env), self.ex(a, env), self.ex(b, env))
            }
            ExKind::Cast(a) => self.cast(self.ex(a, env), e.ty),
            ExKind::MulAdd(a, b, c) => {
                self.mul_add(self.ex(a, env), self.ex(b, env), self.ex(c, env))
            }
            ExKind::Powi(a, n) => self.powi(self.ex(a, env), *n),
            ExKind::Clamp(a, lo, hi) => {
                let m = self.bin(Bin::Max, self.ex(a, env), self.ex(lo, env));
                self.bin(Bin::Min, m, self.ex(hi, env))
            }
        }
    }

    /// Flush-to-zero allowance of GPU targets.
    fn ftz(&self, inputs: &[Val], r: Val) -> f64 {
        if self.p.gpu_accuracy && (subnormal(r) || inputs.iter().any(|v| subnormal(*v))) {
            min_normal(r.dtype())
        } else {
            0.0
        }
    }

    /// Whether a float among `vals` (an operation's operands and result)
    /// is infinite or NaN where the profile's compiler may assume none is.
    fn assumed_away(&self, vals: &[Val]) -> bool {
        let away = self.p.assumes_finite && vals.iter().any(|&v| is_float(v) && !v.is_finite());
        if away {
            self.met.set(true);
        }
        away
    }

    fn un(&self, op: Un, a: Sh) -> Sh {
        let r = un(op, a.v);
        if !is_float(a.v) {
            return finish(r, a.e, false);
        }
        if a.is_unknown() || self.assumed_away(&[a.v, r]) {
            return Sh::unknown(r);
        }
        let t = a.v.dtype();
        let (x, rv) = (a.v.f64(), r.f64());
        let mut e = 0.0;
        let mut z = zero_sign_open(&a) && r.is_float_zero() && op != Un::Abs;
        if a.e > 0.0 {
            let (lo, hi) = (x - a.e, x + a.e);
            let spread = |f: fn(f64) -> f64| (f(hi) - rv).abs().max((rv - f(lo)).abs());
            e = match op {
                Un::Neg | Un::Abs => a.e,
                Un::Sqrt if lo < 0.0 => UNKNOWN,
                Un::Sqrt => spread(f64::sqrt),
                Un::Exp => spread(f64::exp),
                Un::Ln if lo <= 0.0 => UNKNOWN,
                Un::Ln => spread(f64::ln),
                Un::Sin | Un::Cos => a.e.min(2.0),
                Un::Floor => spread(f64::floor),
                Un::Ceil => spread(f64::ceil),
                Un::Round => spread(f64::round),
                Un::Not | Un::BitNot => unreachable!(),
            };
            if matches!(op, Un::Floor | Un::Ceil | Un::Round) && e == 0.0 {
                // A step function that did not step: exact, up to the sign
                // of a zero result.
                z |= r.is_float_zero();
            } else {
                e = e * (1.0 + 1e-9) + slack(t, rv);
            }
        }
        if self.p.gpu_accuracy && r.is_finite() {
            e += match op {
                Un::Sqrt => 5.0 * ulp(t, rv),
                Un::Exp => (3.0 + 2.0 * x.abs()) * ulp(t, rv),
                Un::Ln if (0.5..=2.0).contains(&x) => 2f64.powi(-21),
                Un::Ln => 3.0 * ulp(t, rv),
                Un::Sin | Un::Cos if x.abs() <= std::f64::consts::PI => 2f64.powi(-11),
                Un::Sin | Un::Cos => 2.0,
                _ => 0.0,
            };
            e += self.ftz(&[a.v], r);
        }
        finish(r, e, z)
    }

    fn bin(&self, op: Bin, a: Sh, b: Sh) -> Sh {
        let r = bin(op, a.v, b.v);
        if BITS.contains(&op) {
            // Exact operands give an exact result; an uncertain one (an
            // integer cast from an inexact float) any result.
            return if a.e == 0.0 && b.e == 0.0 {
                Sh::exact(r)
            } else {
                Sh::unknown(r)
            };
        }
        if !is_float(a.v) {
            return finish(r, a.e.max(b.e), false);
        }
        if a.is_unknown() || b.is_unknown() || self.assumed_away(&[a.v, b.v, r]) {
            return Sh::unknown(r);
        }
        let t = r.dtype();
        let (x, y, rv) = (a.v.f64(), b.v.f64(), r.f64());
        let (ea, eb) = (a.e, b.e);
        let open = zero_sign_open(&a) || zero_sign_open(&b);
        let mut e = 0.0;
        let mut z = false;
        if ea > 0.0 || eb > 0.0 {
            if !r.is_finite() {
                // Only certain when a certain non-finite operand decides it.
                let certain = r.is_nan() && (a.v.is_nan() || b.v.is_nan())
                    || matches!(op, Bin::Add | Bin::Sub) && (!a.v.is_finite() || !b.v.is_finite())
                    || op == Bin::Mul
                        && (!a.v.is_finite() && y.abs() > eb || !b.v.is_finite() && x.abs() > ea);
                return if certain {
                    Sh::exact(r)
                } else {
                    Sh::unknown(r)
                };
            }
            e = match op {
                Bin::Add | Bin::Sub => ea + eb,
                Bin::Mul => x.abs() * eb + y.abs() * ea + ea * eb,
                Bin::Div if y.abs() <= eb => UNKNOWN,
                Bin::Div => (x.abs() * eb + y.abs() * ea) / (y.abs() * (y.abs() - eb)),
                Bin::Rem if y.abs() <= eb => UNKNOWN,
                Bin::Rem => 2.0 * (y.abs() + eb),
                Bin::Min | Bin::Max => ea.max(eb),
                _ => unreachable!(),
            };
            e = e * (1.0 + 1e-9) + slack(t, rv);
        } else {
            if open && !r.is_finite() && !r.is_nan() {
                // `x / ±0` with the zero's sign open.
                return Sh::unknown(r);
            }
            z = open && r.is_float_zero();
            if matches!(op, Bin::Min | Bin::Max)
                && a.v.is_float_zero()
                && b.v.is_float_zero()
                && a.v.sign_negative() != b.v.sign_negative()
            {
                // IEEE minNum/maxNum leave the sign of a ±0 tie open.
                z = true;
            }
        }
        if self.p.gpu_accuracy && r.is_finite() {
            e += match op {
                Bin::Div if y.abs() >= min_normal(t) && y.abs() <= 1.0 / min_normal(t) => {
                    3.0 * ulp(t, rv)
                }
                Bin::Div => UNKNOWN,
                Bin::Rem => y.abs() + 4.0 * ulp(t, x),
                _ => 0.0,
            };
            e += self.ftz(&[a.v, b.v], r);
        }
        finish(r, e, z)
    }

    fn logic(&self, op: Bin, a: Sh, b: Sh) -> Sh {
        let r = bin(op, a.v, b.v);
        let known = |s: &Sh| s.e == 0.0;
        let decided = |s: &Sh| known(s) && s.v.bool() == (op == Bin::Or);
        if (known(&a) && known(&b)) || decided(&a) || decided(&b) {
            Sh::exact(r)
        } else {
            Sh::unknown(r)
        }
    }

    fn cmp(&self, op: Cmp, a: Sh, b: Sh) -> Sh {
        let r = Val::Bool(cmp(op, a.v, b.v));
        if self.assumed_away(&[a.v, b.v]) {
            return Sh::unknown(r);
        }
        if a.e == 0.0 && b.e == 0.0 {
            return Sh::exact(r);
        }
        if !is_float(a.v) || a.is_unknown() || b.is_unknown() {
            return Sh::unknown(r);
        }
        if a.v.is_nan() || b.v.is_nan() {
            return Sh::exact(r);
        }
        let (x, y) = (a.v.f64(), b.v.f64());
        let (xl, xh, yl, yh) = (x - a.e, x + a.e, y - b.e, y + b.e);
        let decided = match op {
            Cmp::Lt => xh < yl || xl >= yh,
            Cmp::Le => xh <= yl || xl > yh,
            Cmp::Gt => xl > yh || xh <= yl,
            Cmp::Ge => xl >= yh || xh < yl,
            Cmp::Eq | Cmp::Ne => xh < yl || yh < xl,
        };
        if decided {
            Sh::exact(r)
        } else {
            Sh::unknown(r)
        }
    }

    fn select(&self, c: Sh, a: Sh, b: Sh) -> Sh {
        if c.e == 0.0 {
            return if c.v.bool() { a } else { b };
        }
        let r = if c.v.bool() { a.v } else { b.v };
        if is_float(r) && a.v.is_finite() && b.v.is_finite() && !a.is_unknown() && !b.is_unknown() {
            let e = a.e.max(b.e) + (a.v.f64() - b.v.f64()).abs();
            if e == 0.0 {
                return Sh {
                    v: r,
                    e: 0.0,
                    z: true,
                };
            }
            return finish(r, e + slack(r.dtype(), r.f64()), true);
        }
        Sh::unknown(r)
    }

    fn cast(&self, a: Sh, to: DType) -> Sh {
        let r = cast(a.v, to);
        let from = a.v.dtype();
        if a.is_unknown() || self.assumed_away(&[a.v, r]) {
            return Sh::unknown(r);
        }
        if !from.is_float() {
            let mut e = if a.e > 0.0 { UNKNOWN } else { 0.0 };
            if self.p.gpu_accuracy && to.is_float() && e == 0.0 {
                // Integer → float conversion may round either way.
                let exact_limit = if to == DType::F32 {
                    16_777_216.0
                } else {
                    9_007_199_254_740_992.0
                };
                if a.v.f64().abs() > exact_limit {
                    e = ulp(to, r.f64());
                }
            }
            return finish(r, e, false);
        }
        if a.e == 0.0 {
            let z = zero_sign_open(&a) && r.is_float_zero();
            let e = if self.p.gpu_accuracy && to.is_float() {
                self.ftz(&[a.v], r)
            } else {
                0.0
            };
            return finish(r, e, z);
        }
        let (lo, hi) = (a.v.f64() - a.e, a.v.f64() + a.e);
        match to {
            DType::F32 | DType::F64 => {
                let extra = if to == DType::F32 && from == DType::F64 {
                    ulp(DType::F32, r.f64())
                } else {
                    0.0
                };
                finish(r, a.e + extra + slack(to, r.f64()), true)
            }
            DType::Bool => {
                if lo > 0.0 || hi < 0.0 {
                    Sh::exact(r)
                } else {
                    Sh::unknown(r)
                }
            }
            _ => {
                if cast(Val::F64(lo), to) == cast(Val::F64(hi), to) {
                    Sh::exact(r)
                } else {
                    Sh::unknown(r)
                }
            }
        }
    }

    fn mul_add(&self, a: Sh, b: Sh, c: Sh) -> Sh {
        let r = mul_add(a.v, b.v, c.v);
        if !is_float(r) {
            return finish(r, a.e.max(b.e).max(c.e), false);
        }
        if a.is_unknown()
            || b.is_unknown()
            || c.is_unknown()
            || self.assumed_away(&[a.v, b.v, c.v, r])
        {
            return Sh::unknown(r);
        }
        let t = r.dtype();
        let (x, y, rv) = (a.v.f64(), b.v.f64(), r.f64());
        let open = zero_sign_open(&a) || zero_sign_open(&b) || zero_sign_open(&c);
        let mut e = 0.0;
        let mut z = open && r.is_float_zero();
        if a.e > 0.0 || b.e > 0.0 || c.e > 0.0 {
            if !r.is_finite() {
                return if r.is_nan() && (a.v.is_nan() || b.v.is_nan() || c.v.is_nan()) {
                    Sh::exact(r)
                } else {
                    Sh::unknown(r)
                };
            }
            e = (x.abs() * b.e + y.abs() * a.e + a.e * b.e + c.e) * (1.0 + 1e-9) + slack(t, rv);
            z = true;
        } else if open && !r.is_finite() {
            return Sh::unknown(r);
        }
        if self.p.gpu_accuracy && r.is_finite() {
            e += ulp(t, x * y) + ulp(t, rv) + self.ftz(&[a.v, b.v, c.v], r);
        }
        finish(r, e, z)
    }

    fn powi(&self, a: Sh, n: i32) -> Sh {
        let r = powi(a.v, n);
        if !is_float(r) {
            return finish(r, a.e, false);
        }
        if a.is_unknown() || self.assumed_away(&[a.v, r]) {
            return Sh::unknown(r);
        }
        let t = r.dtype();
        let rv = r.f64();
        let open = zero_sign_open(&a);
        if a.e == 0.0 {
            if open && !r.is_finite() && !r.is_nan() {
                return Sh::unknown(r);
            }
            let e = if self.p.gpu_accuracy {
                self.ftz(&[a.v], r)
            } else {
                0.0
            };
            return finish(r, e, open && r.is_float_zero());
        }
        if !r.is_finite() {
            return if r.is_nan() && a.v.is_nan() {
                Sh::exact(r)
            } else {
                Sh::unknown(r)
            };
        }
        let x = a.v.f64();
        let (lo, hi) = (x - a.e, x + a.e);
        let straddles = lo <= 0.0 && hi >= 0.0;
        if n < 0 && straddles {
            return Sh::unknown(r);
        }
        let p = |v: f64| v.powi(n);
        let mut e = (p(lo) - rv).abs().max((p(hi) - rv).abs());
        if straddles {
            e = e.max(rv.abs());
        }
        let steps = 2.0 * (32 - n.unsigned_abs().leading_zeros()) as f64 + 2.0;
        let mag = p(lo).abs().max(p(hi).abs()).max(rv.abs());
        e = e * (1.0 + 1e-9) + steps * 2.0 * eps(t) * mag + 2.0 * min_normal(t);
        finish(r, e, true)
    }
}

// ------------------------------------------------------- folds and scans

/// A running fold (reduction or scan) of one combine, with the bound a
/// reassociating backend must meet at the current prefix.
struct Fold<'p> {
    p: &'p Profile,
    comb: Comb,
    v: Val,
    t: DType,
    k: usize,
    unknown: bool,
    nan: bool,
    pinf: bool,
    ninf: bool,
    zero: bool,
    zero_open: bool,
    abs: f64,
    err: f64,
    emax: f64,
    rel: f64,
    log_hi: f64,
    log_lo: f64,
}

fn identity_val(c: Comb, t: DType) -> Val {
    let f = t.is_float();
    match (c, t) {
        (Comb::Add | Comb::AddRev, _) => cast(Val::I32(0), t),
        (Comb::Mul, _) => cast(Val::I32(1), t),
        (Comb::Min, DType::I32) => Val::I32(i32::MAX),
        (Comb::Min, DType::U32) => Val::U32(u32::MAX),
        (Comb::Min, DType::I64) => Val::I64(i64::MAX),
        (Comb::Min, DType::U64) => Val::U64(u64::MAX),
        (Comb::Min, _) if f => cast(Val::F64(f64::INFINITY), t),
        (_, DType::I32) => Val::I32(i32::MIN),
        (_, DType::U32) => Val::U32(0),
        (_, DType::I64) => Val::I64(i64::MIN),
        (_, DType::U64) => Val::U64(0),
        _ => cast(Val::F64(f64::NEG_INFINITY), t),
    }
}

fn combine(c: Comb, a: Val, b: Val) -> Val {
    match c {
        Comb::Add => bin(Bin::Add, a, b),
        Comb::AddRev => bin(Bin::Add, b, a),
        Comb::Mul => bin(Bin::Mul, a, b),
        Comb::Min => bin(Bin::Min, a, b),
        Comb::Max => bin(Bin::Max, a, b),
        Comb::MaxRev => bin(Bin::Max, b, a),
    }
}

fn max_exp(t: DType) -> f64 {
    if t == DType::F32 {
        127.0
    } else {
        1023.0
    }
}

fn min_exp(t: DType) -> f64 {
    if t == DType::F32 {
        -126.0
    } else {
        -1022.0
    }
}

impl<'p> Fold<'p> {
    fn new(p: &'p Profile, comb: Comb, t: DType) -> Fold<'p> {
        Fold {
            p,
            comb,
            v: identity_val(comb, t),
            t,
            k: 0,
            unknown: false,
            nan: false,
            pinf: false,
            ninf: false,
            zero: false,
            zero_open: false,
            abs: 0.0,
            err: 0.0,
            emax: 0.0,
            rel: 0.0,
            log_hi: 0.0,
            log_lo: 0.0,
        }
    }

    fn push(&mut self, x: &Sh) {
        self.v = combine(self.comb, self.v, x.v);
        self.k += 1;
        self.unknown |= x.is_unknown();
        self.zero_open |= x.z;
        if !self.t.is_float() {
            return;
        }
        let f = x.v.f64();
        self.nan |= f.is_nan();
        self.pinf |= f == f64::INFINITY;
        self.ninf |= f == f64::NEG_INFINITY;
        self.emax = self.emax.max(x.e);
        if f.is_finite() {
            self.abs += f.abs();
            self.err += x.e;
            if f == 0.0 {
                self.zero = true;
                if x.e > 0.0 {
                    // A factor that may or may not be zero.
                    self.rel = UNKNOWN;
                }
            } else {
                self.rel += x.e / f.abs();
                let l = f.abs().log2();
                self.log_hi += l.max(0.0);
                self.log_lo += l.min(0.0);
            }
        }
    }

    /// The current prefix's value with its bound.
    fn get(&self) -> Sh {
        let v = self.v;
        if !self.t.is_float() {
            return if self.unknown {
                Sh::unknown(v)
            } else {
                Sh::exact(v)
            };
        }
        if self.unknown {
            return Sh::unknown(v);
        }
        if !self.p.reassociates {
            // Left to right, as the reference: exact, and any error of the
            // elements carried through (only when a profile combines both).
            return finish(v, self.err, false);
        }
        let t = self.t;
        let k = self.k as f64;
        match self.comb {
            Comb::Add | Comb::AddRev => {
                if self.nan || (self.pinf && self.ninf) {
                    return Sh::exact(v);
                }
                let total = self.abs + self.err;
                let over = total * (1.0 + (k + 1.0) * eps(t)) >= max_finite(t);
                if over {
                    return Sh::unknown(v);
                }
                if self.pinf || self.ninf {
                    return Sh::exact(v);
                }
                let e = self.err + k * eps(t) * total + k * min_normal(t) * 1e-3;
                if e == 0.0 {
                    // Every term zero: the sign of the zero depends on order.
                    return Sh { v, e, z: true };
                }
                finish(v, e, true)
            }
            Comb::Mul => {
                if self.nan || (self.zero && (self.pinf || self.ninf)) && self.rel.is_finite() {
                    return Sh::exact(v);
                }
                let over = self.log_hi >= max_exp(t) - 1.0;
                let under = self.log_lo <= min_exp(t) + 1.0;
                if !self.rel.is_finite() || self.rel >= 0.5 {
                    return Sh::unknown(v);
                }
                if self.pinf || self.ninf {
                    return if under { Sh::unknown(v) } else { Sh::exact(v) };
                }
                if self.zero {
                    return if over { Sh::unknown(v) } else { Sh::exact(v) };
                }
                if over || under {
                    return Sh::unknown(v);
                }
                let e = v.f64().abs() * (k * eps(t) + self.rel) * 1.01 + slack(t, v.f64());
                if e == 0.0 {
                    return Sh::exact(v);
                }
                finish(v, e, false)
            }
            Comb::Min | Comb::Max | Comb::MaxRev => {
                let z = self.zero_open || v.is_float_zero();
                if self.emax > 0.0 {
                    return finish(v, self.emax, z);
                }
                Sh { v, e: 0.0, z }
            }
        }
    }
}

// ------------------------------------------------------------ the stream

/// Runs `case` as std iterator code on `inputs`, with `p`'s bounds.
pub fn run(case: &Case, inputs: &Inputs, p: &Profile) -> Oracle {
    let ev = Eval {
        p,
        met: std::cell::Cell::new(false),
    };
    let mut inconclusive = None;
    let mut undetermined = |what: &str, at: usize| {
        if inconclusive.is_none() {
            inconclusive = Some(format!(
                "{what} is undetermined at stream position {at} under {}",
                p.name
            ));
        }
    };
    let exact = |c: &Col| {
        (0..c.len())
            .map(|i| Sh::exact(c.get(i)))
            .collect::<Vec<Sh>>()
    };
    let mut s: Vec<Sh> = exact(&inputs.source);
    let mut t = case.source.dtype;
    let keep = |p: Sh, at: usize, und: &mut dyn FnMut(&str, usize)| {
        if p.e > 0.0 {
            und("a filter predicate", at);
        }
        p.v.bool()
    };
    for step in &case.steps {
        s = match step {
            Step::Map(e) => {
                t = e.ty;
                s.iter()
                    .map(|&x| {
                        ev.ex(
                            e,
                            &OEnv {
                                x,
                                y: None,
                                i: None,
                            },
                        )
                    })
                    .collect()
            }
            Step::Filter(e) => s
                .iter()
                .enumerate()
                .filter(|(k, &x)| {
                    keep(
                        ev.ex(
                            e,
                            &OEnv {
                                x,
                                y: None,
                                i: None,
                            },
                        ),
                        *k,
                        &mut undetermined,
                    )
                })
                .map(|(_, &x)| x)
                .collect(),
            Step::ZipMap(k, e) => {
                let other = exact(&inputs.partners[*k]);
                s.iter()
                    .zip(other.iter())
                    .map(|(&x, &y)| {
                        ev.ex(
                            e,
                            &OEnv {
                                x,
                                y: Some(y),
                                i: None,
                            },
                        )
                    })
                    .collect()
            }
            Step::ZipFilter(k, e) => {
                let other = exact(&inputs.partners[*k]);
                s.iter()
                    .zip(other.iter())
                    .enumerate()
                    .filter(|(at, (&x, &y))| {
                        keep(
                            ev.ex(
                                e,
                                &OEnv {
                                    x,
                                    y: Some(y),
                                    i: None,
                                },
                            ),
                            *at,
                            &mut undetermined,
                        )
                    })
                    .map(|(_, (&x, _))| x)
                    .collect()
            }
            Step::EnumMap(e) => s
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    ev.ex(
                        e,
                        &OEnv {
                            x,
                            y: None,
                            i: Some(i as u64),
                        },
                    )
                })
                .collect(),
            Step::EnumFilter(e) => s
                .iter()
                .enumerate()
                .filter(|(i, &x)| {
                    keep(
                        ev.ex(
                            e,
                            &OEnv {
                                x,
                                y: None,
                                i: Some(*i as u64),
                            },
                        ),
                        *i,
                        &mut undetermined,
                    )
                })
                .map(|(_, &x)| x)
                .collect(),
            Step::Take(n) => s.into_iter().take(*n).collect(),
            Step::Skip(n) => s.into_iter().skip(*n).collect(),
            Step::Sort { desc } => {
                // Only exact values have a determined order.
                if let Some(at) = s.iter().position(|x| x.e != 0.0 || x.z) {
                    undetermined("a sort key", at);
                }
                let mut s = s;
                s.sort_by(|a, b| {
                    let o = total_order(a.v).cmp(&total_order(b.v));
                    if *desc {
                        o.reverse()
                    } else {
                        o
                    }
                });
                s
            }
            Step::SemiJoin { partner, anti } => {
                // Only exact values have a determined membership.
                if let Some(at) = s.iter().position(|x| x.e != 0.0 || x.z) {
                    undetermined("a join key", at);
                }
                let c = &inputs.partners[*partner];
                let set: std::collections::HashSet<i128> =
                    (0..c.len()).map(|i| group_key(cast(c.get(i), t))).collect();
                s.into_iter()
                    .filter(|x| set.contains(&group_key(x.v)) != *anti)
                    .collect()
            }
            Step::Join { partner } => {
                if let Some(at) = s.iter().position(|x| x.e != 0.0 || x.z) {
                    undetermined("a join key", at);
                }
                let c = &inputs.partners[*partner];
                let build: Vec<i128> = (0..c.len().min(super::ast::JOIN_BUILD))
                    .map(|i| group_key(cast(c.get(i), t)))
                    .collect();
                s.into_iter()
                    .flat_map(|x| {
                        let n = build.iter().filter(|&&k| k == group_key(x.v)).count();
                        std::iter::repeat_n(x, n)
                    })
                    .collect()
            }
            Step::ScanSum { exclusive } => ev.scan(Comb::Add, *exclusive, t, &s),
            Step::Scan { comb, exclusive } => ev.scan(*comb, *exclusive, t, &s),
        };
    }
    let expect = terminal(&ev, case, t, &s, inputs);
    let met_non_finite = p.assumes_finite && (ev.met.get() || expect.has_non_finite());
    Oracle {
        expect,
        inconclusive,
        met_non_finite,
    }
}

/// The documented order of sort keys as an integer: numeric for integers
/// and `bool`; floats by IEEE total order with every NaN one value above
/// `+inf` (so `-0.0` before `+0.0`).
/// A group (and join) key: `-0.0` is `+0.0`, every NaN one key.
pub fn group_key(v: Val) -> i128 {
    match v {
        // A float pattern compares with `==`: it matches -0.0 too.
        Val::F32(0.0) => total_order(Val::F32(0.0)),
        Val::F64(0.0) => total_order(Val::F64(0.0)),
        v => total_order(v),
    }
}

fn total_order(v: Val) -> i128 {
    let float = |bits: i128, sign: bool, nan: bool, width: u32| {
        if nan {
            i128::MAX
        } else if sign {
            -(bits & ((1i128 << (width - 1)) - 1)) - 1
        } else {
            bits
        }
    };
    match v {
        Val::Bool(b) => b as i128,
        Val::I32(x) => x as i128,
        Val::U32(x) => x as i128,
        Val::I64(x) => x as i128,
        Val::U64(x) => x as i128,
        Val::F32(x) => float(x.to_bits() as i128, x.is_sign_negative(), x.is_nan(), 32),
        Val::F64(x) => float(x.to_bits() as i128, x.is_sign_negative(), x.is_nan(), 64),
    }
}

fn scan(p: &Profile, comb: Comb, exclusive: bool, t: DType, s: &[Sh]) -> Vec<Sh> {
    let mut f = Fold::new(p, comb, t);
    s.iter()
        .map(|x| {
            if exclusive {
                let before = if f.k == 0 { Sh::exact(f.v) } else { f.get() };
                f.push(x);
                before
            } else {
                f.push(x);
                f.get()
            }
        })
        .collect()
}

fn fold(p: &Profile, comb: Comb, t: DType, s: &[Sh]) -> Sh {
    let mut f = Fold::new(p, comb, t);
    s.iter().for_each(|x| f.push(x));
    if f.k == 0 {
        Sh::exact(f.v)
    } else {
        f.get()
    }
}

/// `min()`/`max()`: `iter().copied().reduce(T::min)`, NaN skipped.
fn extremum(p: &Profile, max: bool, s: &[Sh]) -> Option<Sh> {
    let first = s.first()?;
    let v = s[1..].iter().fold(first.v, |a, x| {
        bin(if max { Bin::Max } else { Bin::Min }, a, x.v)
    });
    if s.iter().any(|x| x.is_unknown()) {
        return Some(Sh::unknown(v));
    }
    let emax = s.iter().map(|x| x.e).fold(0.0, f64::max);
    let z = p.reassociates && v.is_float_zero() || s.iter().any(|x| x.z);
    Some(if emax > 0.0 {
        finish(v, emax, true)
    } else {
        Sh { v, e: 0.0, z }
    })
}

/// `argmin`/`argmax`: first strict extremum, NaN never wins, all-NaN → 0.
fn arg(max: bool, s: &[Sh]) -> (Option<usize>, bool) {
    if s.is_empty() {
        return (None, true);
    }
    let better = |a: Val, b: Val| {
        if max {
            cmp(Cmp::Gt, a, b)
        } else {
            cmp(Cmp::Lt, a, b)
        }
    };
    let mut best: Option<usize> = None;
    for (i, x) in s.iter().enumerate() {
        if x.v.is_nan() {
            continue;
        }
        if best.is_none_or(|b| better(x.v, s[b].v)) {
            best = Some(i);
        }
    }
    let b = best.unwrap_or(0);
    if s.iter().any(|x| x.is_unknown()) {
        return (Some(b), false);
    }
    if s.iter().all(|x| x.e == 0.0) {
        return (Some(b), true);
    }
    if best.is_none() {
        return (Some(0), true);
    }
    let (vb, eb) = (s[b].v.f64(), s[b].e);
    let clear = s
        .iter()
        .enumerate()
        .all(|(j, x)| j == b || x.v.is_nan() || (x.v.f64() - vb).abs() > x.e + eb);
    (Some(b), clear)
}

/// `mean()`: the elements as `f64`, summed left to right, divided by n.
/// `histogram(16, -4.0, 4.0)` of the nominal values: the bin formula in
/// `f32` for `f32` elements, `f64` otherwise; then below, above, NaN.
fn histogram(s: &[Sh]) -> Vec<u64> {
    let mut c = vec![0u64; 19];
    for x in s {
        let k = match x.v {
            Val::F32(v) => {
                if v.is_nan() {
                    18
                } else if v < -4.0 {
                    16
                } else if v >= 4.0 {
                    17
                } else {
                    (((v - -4.0) * 2.0f32).floor() as usize).min(15)
                }
            }
            v => {
                let v = cast(v, DType::F64).f64();
                if v.is_nan() {
                    18
                } else if v < -4.0 {
                    16
                } else if v >= 4.0 {
                    17
                } else {
                    (((v - -4.0) * 2.0f64).floor() as usize).min(15)
                }
            }
        };
        c[k] += 1;
    }
    c
}

/// The sample variance as `cpu-scalar` computes it (Welford's update of
/// `x - first` in `f64`, in order), bounded by the inputs' errors carried
/// through `∂var/∂xᵢ = 2 (xᵢ - mean) / (n - 1)` plus the rounding of a
/// blocked two-pass or Chan merge (~`n eps` relative, and the data's
/// magnitude against their spread). NaN when an element is NaN or
/// infinite; unknown past `1e150`, where squares overflow differently by
/// algorithm.
fn variance(s: &[Sh]) -> Option<Sh> {
    if s.len() < 2 {
        return None;
    }
    let xs: Vec<f64> = s.iter().map(|x| cast(x.v, DType::F64).f64()).collect();
    let k = xs[0];
    let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
    for &x in &xs {
        let y = x - k;
        n += 1;
        let d = y - mean;
        mean += d / n as f64;
        m2 += d * (y - mean);
    }
    let nf = s.len() as f64;
    let v = Val::F64(m2 / (nf - 1.0));
    // A NaN or infinite element makes it NaN on every backend, exactly.
    if xs.iter().any(|x| !x.is_finite()) && !s.iter().any(Sh::is_unknown) {
        return Some(Sh::exact(Val::F64(f64::NAN)));
    }
    let big = xs.iter().any(|x| x.abs() > 1e150);
    if big || s.iter().any(Sh::is_unknown) || !v.f64().is_finite() {
        return Some(Sh::unknown(v));
    }
    let mu = k + mean;
    let input: f64 = s
        .iter()
        .zip(&xs)
        .map(|(sh, x)| 2.0 * (x - mu).abs() * (sh.e + eps(DType::F64) * x.abs()))
        .sum::<f64>()
        / (nf - 1.0);
    let e64 = eps(DType::F64);
    let rounding = 8.0 * (nf + 2.0) * e64 * (v.f64() + e64 * mu * mu);
    Some(finish(
        v,
        input + rounding + 2.0 * min_normal(DType::F64),
        true,
    ))
}

fn mean(p: &Profile, s: &[Sh]) -> Option<Sh> {
    if s.is_empty() {
        return None;
    }
    let as_f64: Vec<Sh> = s
        .iter()
        .map(|x| {
            let v = cast(x.v, DType::F64);
            if x.is_unknown() {
                Sh::unknown(v)
            } else {
                Sh { v, e: x.e, z: x.z }
            }
        })
        .collect();
    let sum = fold(p, Comb::Add, DType::F64, &as_f64);
    let n = s.len() as f64;
    let v = Val::F64(sum.v.f64() / n);
    Some(if sum.is_unknown() {
        Sh::unknown(v)
    } else if sum.e == 0.0 {
        Sh {
            v,
            e: 0.0,
            z: sum.z,
        }
    } else {
        finish(v, sum.e / n + slack(DType::F64, v.f64()), true)
    })
}

fn terminal(ev: &Eval<'_>, case: &Case, t: DType, s: &[Sh], inputs: &Inputs) -> Expect {
    let p = ev.p;
    let pred = |e: &Ex, x: Sh| {
        ev.ex(
            e,
            &OEnv {
                x,
                y: None,
                i: None,
            },
        )
    };
    match &case.term {
        Term::Sum => Expect::Val(fold(p, Comb::Add, t, s)),
        Term::Reduce(c) => Expect::Val(fold(p, *c, t, s)),
        Term::Min => Expect::Opt(extremum(p, false, s)),
        Term::Max => Expect::Opt(extremum(p, true, s)),
        Term::Count => Expect::Usize(s.len()),
        Term::Mean => Expect::Mean(mean(p, s)),
        Term::Variance => Expect::Mean(variance(s)),
        Term::First => Expect::Opt(s.first().copied()),
        Term::Last => Expect::Opt(s.last().copied()),
        Term::Histogram => Expect::Counts(histogram(s), s.iter().all(|x| x.e == 0.0), false),
        Term::ValueCounts => {
            let mut groups: std::collections::BTreeMap<i128, u64> = Default::default();
            for x in s {
                *groups.entry(group_key(x.v)).or_default() += 1;
            }
            let mut v: Vec<u64> = groups.values().copied().collect();
            v.extend(groups.keys().map(|&k| k as u64));
            // Determined when every value is exact (the sign of a zero does
            // not matter: -0.0 is +0.0).
            Expect::Counts(v, s.iter().all(|x| x.e == 0.0), true)
        }
        Term::Any(e) | Term::All(e) => {
            let any = matches!(case.term, Term::Any(_));
            let ps: Vec<Sh> = s.iter().map(|&x| pred(e, x)).collect();
            let decisive = ps.iter().any(|q| q.e == 0.0 && q.v.bool() == any);
            let open = ps.iter().any(|q| q.e > 0.0);
            let v = if any {
                ps.iter().any(|q| q.v.bool())
            } else {
                ps.iter().all(|q| q.v.bool())
            };
            Expect::Bool(if decisive || !open {
                Sh::exact(Val::Bool(v))
            } else {
                Sh::unknown(Val::Bool(v))
            })
        }
        Term::ArgMin => {
            let (i, ok) = arg(false, s);
            Expect::OptUsize(i, ok)
        }
        Term::ArgMax => {
            let (i, ok) = arg(true, s);
            Expect::OptUsize(i, ok)
        }
        Term::Stats => Expect::Stats {
            count: s.len() as u64,
            sum: fold(p, Comb::Add, t, s),
            min: extremum(p, false, s),
            max: extremum(p, true, s),
            mean: mean(p, s),
        },
        Term::Collect => Expect::Cols(vec![s.to_vec()]),
        Term::CollectPred(e) => {
            Expect::Cols(vec![s.to_vec(), s.iter().map(|&x| pred(e, x)).collect()])
        }
        Term::CollectEnumerated => Expect::Cols(vec![
            (0..s.len())
                .map(|i| Sh::exact(Val::U64(i as u64)))
                .collect(),
            s.to_vec(),
        ]),
        Term::CollectZipped(k) => {
            let other = &inputs.partners[*k];
            let n = s.len().min(other.len());
            Expect::Cols(vec![
                s[..n].to_vec(),
                (0..n).map(|i| Sh::exact(other.get(i))).collect(),
            ])
        }
        Term::CollectBool(e) => Expect::Cols(vec![s.iter().map(|&x| pred(e, x)).collect()]),
    }
}
