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
    /// Minimum; float NaNs are skipped, all-NaN gives NaN. Result: the column's type.
    Min,
    /// Maximum; float NaNs are skipped, all-NaN gives NaN. Result: the column's type.
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
            AggKind::Custom(_) => "reduce",
        }
    }

    /// Type of the result for a column of type `column`.
    pub fn result_type(&self, column: Option<DType>) -> DType {
        match self {
            AggKind::Count | AggKind::ArgMin | AggKind::ArgMax => DType::U64,
            AggKind::Any | AggKind::All => DType::Bool,
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
}

/// `a ⊕ b` for partials of adjacent runs, `a` the earlier: the one merge
/// every backend uses. Counts add wrapping (like every integer sum);
/// `argmin`/`argmax` keep the earlier of equal values (ties keep the
/// first position) and never pick a run without a position.
pub fn merge(kind: &AggKind, a: Partial, b: Partial, params: &[Scalar]) -> Partial {
    let value = |v| Partial {
        value: v,
        pos: None,
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
        AggKind::ArgMin | AggKind::ArgMax => {
            if b.pos.is_some() && arg_better(kind, b.value, a.pos.map(|_| a.value)) {
                b
            } else {
                a
            }
        }
    }
}
