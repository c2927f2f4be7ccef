//! Aggregates and scans: what they compute, their identities, and how two
//! partial results merge. Defined once here; every backend, the kernel
//! lowering and the host side of the device backends use these functions,
//! so a count merges the same way everywhere.

use crate::expr::eval;
use crate::expr::{BinaryOp, ExprArena, Value};
use crate::types::{DType, Scalar};

/// A two-operand program `(a, b) -> c` for `reduce` and `scan`: slot 0 of
/// `Input` is the accumulator, slot 1 the element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Combine {
    /// The program; `Param` nodes use the query's parameter slots.
    pub program: ExprArena,
    /// Its result.
    pub output: Value,
    /// Parameter slot holding the identity value.
    pub identity: u16,
}

impl Combine {
    /// Evaluates the combine with the reference semantics.
    pub fn eval(&self, a: Scalar, b: Scalar, params: &[Scalar]) -> Scalar {
        crate::expr::eval::eval_program(&self.program, self.output, &[a, b], &[], params)
    }
}

/// The kinds of aggregate a reduce terminal computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AggKind {
    /// Sum (wrapping for integers). Result type: the column's.
    Sum,
    /// Minimum; float NaNs are skipped, all-NaN gives NaN (IEEE 754
    /// `minNum`: where the minimum is a zero of both signs, either zero may
    /// come back). Result: the column's type.
    Min,
    /// Maximum; float NaNs are skipped, all-NaN gives NaN (`maxNum`, zeros
    /// as for `Min`). Result: the column's type.
    Max,
    /// Number of surviving elements. No column. Result: `u64`.
    Count,
    /// Position of the first minimum (NaNs skipped; all-NaN gives 0). Result: `u64`.
    ArgMin,
    /// Position of the first maximum (NaNs skipped; all-NaN gives 0). Result: `u64`.
    ArgMax,
    /// Whether any surviving element's boolean column is true. Result: `bool`.
    Any,
    /// Whether every surviving element's boolean column is true. Result: `bool`.
    All,
    /// The sum of squared deviations from the mean (`M2`, from which
    /// `variance` and `std_dev` divide), in `f64` whatever the column's
    /// numeric type: updated with Welford's step one element at a time or
    /// computed per block about one of the block's values, and merged across
    /// runs with Chan's formula (`Moments`), so `1e8 + noise` loses no
    /// digits to cancellation. NaN if any element is NaN or infinite.
    /// Result: `f64`.
    M2,
    /// The value of the first surviving element (any type; the value is
    /// meaningless when nothing survives: terminals pair it with an `any`
    /// of `true`). Settled by the first survivor, so runs after it need
    /// not be read. Result: the column's type.
    First,
    /// The value of the last surviving element; as [`AggKind::First`],
    /// settled by the last survivor (runs before it need not be read).
    Last,
    /// A user combine, applied left to right within a block and over block
    /// results in order. Result: the column's type.
    Custom(Combine),
}

impl AggKind {
    /// The text-form name.
    pub fn name(&self) -> &'static str {
        match self {
            AggKind::Sum => "sum",
            AggKind::Min => "min",
            AggKind::Max => "max",
            AggKind::Count => "count",
            AggKind::ArgMin => "argmin",
            AggKind::ArgMax => "argmax",
            AggKind::Any => "any",
            AggKind::All => "all",
            AggKind::M2 => "m2",
            AggKind::First => "first",
            AggKind::Last => "last",
            AggKind::Custom(_) => "reduce",
        }
    }

    /// Type of the result for a column of type `column`.
    pub fn result_type(&self, column: Option<DType>) -> DType {
        match self {
            AggKind::Count | AggKind::ArgMin | AggKind::ArgMax => DType::U64,
            AggKind::Any | AggKind::All => DType::Bool,
            AggKind::M2 => DType::F64,
            _ => column.expect("aggregate without a column"),
        }
    }
}

/// One aggregate of a reduce terminal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Aggregate {
    /// What to compute.
    pub kind: AggKind,
    /// The column aggregated (`None` only for `Count`).
    pub column: Option<Value>,
}

/// The scan operator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    /// Running sum (wrapping for integers).
    Sum,
    /// A user combine with its identity.
    Custom(Combine),
}

/// The starting accumulator of an aggregate.
pub fn agg_identity(kind: &AggKind, ty: DType, params: &[Scalar]) -> Scalar {
    match kind {
        AggKind::Sum => Scalar::zero(ty),
        AggKind::Count | AggKind::ArgMin | AggKind::ArgMax => Scalar::U64(0),
        AggKind::Any => Scalar::Bool(false),
        AggKind::All => Scalar::Bool(true),
        AggKind::M2 => Scalar::F64(0.0),
        AggKind::First | AggKind::Last => Scalar::zero(ty),
        AggKind::Min => match ty {
            DType::F32 => Scalar::F32(f32::NAN),
            DType::F64 => Scalar::F64(f64::NAN),
            DType::I32 => Scalar::I32(i32::MAX),
            DType::U32 => Scalar::U32(u32::MAX),
            DType::I64 => Scalar::I64(i64::MAX),
            DType::U64 => Scalar::U64(u64::MAX),
            DType::Bool => Scalar::Bool(true),
        },
        AggKind::Max => match ty {
            DType::F32 => Scalar::F32(f32::NAN),
            DType::F64 => Scalar::F64(f64::NAN),
            DType::I32 => Scalar::I32(i32::MIN),
            DType::U32 => Scalar::U32(0),
            DType::I64 => Scalar::I64(i64::MIN),
            DType::U64 => Scalar::U64(0),
            DType::Bool => Scalar::Bool(false),
        },
        AggKind::Custom(c) => params[c.identity as usize],
    }
}

fn is_nan(s: Scalar) -> bool {
    match s {
        Scalar::F32(v) => v.is_nan(),
        Scalar::F64(v) => v.is_nan(),
        _ => false,
    }
}

/// Whether `x` replaces `best` as the arg-extremum (strictly better, NaNs
/// never win; ties keep the earlier position).
pub fn arg_better(kind: &AggKind, x: Scalar, best: Option<Scalar>) -> bool {
    if is_nan(x) {
        return false;
    }
    match best {
        None => true,
        Some(b) => {
            let op = if matches!(kind, AggKind::ArgMin) {
                BinaryOp::Lt
            } else {
                BinaryOp::Gt
            };
            eval::binary(op, x, b).as_bool()
        }
    }
}

/// The partial result of an aggregate over one run of elements: its value
/// and, for `argmin`/`argmax`, the position of the best element (`None`
/// when the run had none that counts: empty or all NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Partial {
    /// The run's value (the identity for an empty run).
    pub value: Scalar,
    /// `argmin`/`argmax` only: where the best element is.
    pub pos: Option<u64>,
    /// `m2` only: the run's count, mean and `M2` (`value` is the `M2`).
    pub moments: Moments,
}

/// Count, mean and sum of squared deviations of a run of values, in `f64`:
/// the state of [`AggKind::M2`]. Runs merge with Chan, Golub and LeVeque's
/// formula, so a block's figures can be computed about the block's own
/// mean and combined without the cancellation of `Σx² - (Σx)²/n`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moments {
    /// Number of values.
    pub n: u64,
    /// Their mean (0 when `n == 0`).
    pub mean: f64,
    /// `Σ (x - mean)²`.
    pub m2: f64,
}

impl Moments {
    /// No values.
    pub const EMPTY: Moments = Moments {
        n: 0,
        mean: 0.0,
        m2: 0.0,
    };

    /// Adds one value (Welford's step).
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// The moments of `a` followed by `b` (Chan et al.; the order of the
    /// two only rounds differently).
    pub fn merge(a: Moments, b: Moments) -> Moments {
        if b.n == 0 {
            return a;
        }
        if a.n == 0 {
            return b;
        }
        let n = a.n + b.n;
        let (na, nb, nf) = (a.n as f64, b.n as f64, n as f64);
        let d = b.mean - a.mean;
        Moments {
            n,
            mean: a.mean + d * (nb / nf),
            m2: a.m2 + b.m2 + d * d * (na * nb / nf),
        }
    }

    /// The moments of a block of values given as its count, the sum of its
    /// values and a way to sum `(x - mean)²` over them: the two-pass form a
    /// backend uses on a block that sits in its cache. Inlined: the sum is
    /// a backend's kernel, compiled for its instruction set only where it
    /// is inlined into the kernel's own entry point (`cpu-simd`'s AVX2
    /// twin ran it as baseline SSE2 code: half of a variance's time).
    #[inline(always)]
    pub fn of_block(n: u64, sum: f64, squared_deviations: impl FnOnce(f64) -> f64) -> Moments {
        if n == 0 {
            return Moments::EMPTY;
        }
        let mean = sum / n as f64;
        Moments {
            n,
            mean,
            m2: squared_deviations(mean),
        }
    }
}

/// `a ⊕ b` for partials of adjacent runs, `a` the earlier: the one merge
/// every backend uses. Counts add wrapping (like every integer sum);
/// `argmin`/`argmax` keep the earlier of equal values (ties keep the
/// first position) and never pick a run without a position.
pub fn merge(kind: &AggKind, a: Partial, b: Partial, params: &[Scalar]) -> Partial {
    let value = |v| Partial {
        value: v,
        pos: None,
        moments: Moments::EMPTY,
    };
    match kind {
        AggKind::Sum => value(eval::binary(BinaryOp::Add, a.value, b.value)),
        AggKind::Min => value(eval::binary(BinaryOp::Min, a.value, b.value)),
        AggKind::Max => value(eval::binary(BinaryOp::Max, a.value, b.value)),
        AggKind::Count => value(Scalar::U64(
            a.value.to_bits().wrapping_add(b.value.to_bits()),
        )),
        AggKind::Any => value(Scalar::Bool(a.value.as_bool() | b.value.as_bool())),
        AggKind::All => value(Scalar::Bool(a.value.as_bool() & b.value.as_bool())),
        AggKind::Custom(c) => value(c.eval(a.value, b.value, params)),
        // `pos` is `Some` once a run has its survivor.
        AggKind::First => {
            if a.pos.is_some() {
                a
            } else {
                b
            }
        }
        AggKind::Last => {
            if b.pos.is_some() {
                b
            } else {
                a
            }
        }
        AggKind::M2 => {
            let m = Moments::merge(a.moments, b.moments);
            Partial {
                value: Scalar::F64(m.m2),
                pos: None,
                moments: m,
            }
        }
        AggKind::ArgMin | AggKind::ArgMax => {
            if b.pos.is_some() && arg_better(kind, b.value, a.pos.map(|_| a.value)) {
                b
            } else {
                a
            }
        }
    }
}

/// Which end of a stream settles every aggregate of a reduce, so that a
/// backend may stop reading: `first`, `any` and `all` are settled by a
/// prefix (the first survivor, a `true`, a `false`), `last` by a suffix.
/// Anything else needs every element.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Settles {
    /// A prefix decides: read forward and stop once settled.
    Prefix,
    /// A suffix decides: read backward (by runs) and stop once settled.
    Suffix,
}

impl Settles {
    /// For a reduce's aggregates; `None` when some aggregate needs every
    /// element (or there is nothing to settle).
    pub fn of<'k>(kinds: impl IntoIterator<Item = &'k AggKind>) -> Option<Settles> {
        let (mut prefix, mut suffix, mut any) = (true, true, false);
        for k in kinds {
            any = true;
            match k {
                AggKind::First => suffix = false,
                AggKind::Last => prefix = false,
                AggKind::Any | AggKind::All => {}
                _ => return None,
            }
        }
        match (any, prefix, suffix) {
            (false, ..) => None,
            (true, true, _) => Some(Settles::Prefix),
            (true, false, true) => Some(Settles::Suffix),
            (true, false, false) => None,
        }
    }
}

/// Whether a reduce's states so far settle it by a prefix (its later
/// elements cannot change it): every aggregate is one a prefix settles
/// and each state `(kind, value, found)` is settled. The device hosts
/// launch no chunk after one that does.
pub fn prefix_settled<'k>(
    states: impl IntoIterator<Item = (&'k AggKind, Option<Scalar>, bool)>,
) -> bool {
    let states: Vec<_> = states.into_iter().collect();
    Settles::of(states.iter().map(|s| s.0)) == Some(Settles::Prefix)
        && states
            .iter()
            .all(|&(k, v, found)| v.is_some_and(|v| is_settled(k, v, found)))
}

/// Whether one aggregate's partial is final whatever else is merged into
/// it from the settling side: a survivor found, an `any` true, an `all`
/// false.
pub fn is_settled(kind: &AggKind, value: Scalar, found: bool) -> bool {
    match kind {
        AggKind::First | AggKind::Last => found,
        AggKind::Any => value.as_bool(),
        AggKind::All => !value.as_bool(),
        _ => false,
    }
}
