//! Interpreter one: a `Case` becomes a computeq query, with closures that
//! rebuild the AST on the traced `Expr`s, run on one forced backend.

use super::ast::{Bin, Case, Cmp, Comb, Ex, ExKind, LitForm, Step, Term, Un};
use super::value::{Col, El, Num, Val, D};
use computeq::expr::DType;
use computeq::metrics::ExecutionMetrics;
use computeq::prelude::*;
use computeq::query::Stats;
use computeq::BackendKind;
use computeq::Engine;
use computeq::{Error, ErrorKind};

/// What a terminal returned, whatever its type.
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    Val(Val),
    Opt(Option<Val>),
    Usize(usize),
    OptUsize(Option<usize>),
    Mean(Option<f64>),
    Bool(bool),
    /// One column per element of the collected tuple.
    Cols(Vec<Col>),
    /// A histogram's bins, then below, above and NaN.
    Counts(Vec<u64>),
    Stats {
        count: u64,
        sum: Val,
        min: Option<Val>,
        max: Option<Val>,
        mean: Option<f64>,
    },
}

/// The inputs of a case, materialized.
pub struct Inputs {
    pub source: Col,
    pub partners: Vec<Col>,
    /// The same columns as Arrow arrays, which the query reads instead
    /// when present (feature `arrow`).
    #[cfg(feature = "arrow")]
    pub arrow: Option<(ArrowCol, Vec<ArrowCol>)>,
}

impl Inputs {
    pub fn of(case: &Case) -> Inputs {
        Inputs {
            source: case.source.generate(),
            partners: case.partners.iter().map(|p| p.generate()).collect(),
            #[cfg(feature = "arrow")]
            arrow: None,
        }
    }

    /// The query reads Arrow arrays of the same values, each a slice at an
    /// offset into a longer array (no nulls: the values, and so the
    /// oracle's answer, are the slices').
    #[cfg(feature = "arrow")]
    pub fn with_arrow(mut self) -> Inputs {
        self.arrow = Some((
            ArrowCol::of(&self.source),
            self.partners.iter().map(ArrowCol::of).collect(),
        ));
        self
    }
}

/// A column as an Arrow array.
#[cfg(feature = "arrow")]
pub enum ArrowCol {
    Bool(arrow_array::BooleanArray),
    I32(arrow_array::Int32Array),
    U32(arrow_array::UInt32Array),
    I64(arrow_array::Int64Array),
    U64(arrow_array::UInt64Array),
    F32(arrow_array::Float32Array),
    F64(arrow_array::Float64Array),
}

#[cfg(feature = "arrow")]
impl ArrowCol {
    /// `c`'s values after three others, sliced past them.
    fn of(c: &Col) -> ArrowCol {
        fn offset<T: Copy + Default>(v: &[T]) -> Vec<T> {
            let mut out = vec![T::default(); 3];
            out.extend_from_slice(v);
            out
        }
        match c {
            Col::Bool(v) => {
                ArrowCol::Bool(arrow_array::BooleanArray::from(offset(v)).slice(3, v.len()))
            }
            Col::I32(v) => {
                ArrowCol::I32(arrow_array::Int32Array::from(offset(v)).slice(3, v.len()))
            }
            Col::U32(v) => {
                ArrowCol::U32(arrow_array::UInt32Array::from(offset(v)).slice(3, v.len()))
            }
            Col::I64(v) => {
                ArrowCol::I64(arrow_array::Int64Array::from(offset(v)).slice(3, v.len()))
            }
            Col::U64(v) => {
                ArrowCol::U64(arrow_array::UInt64Array::from(offset(v)).slice(3, v.len()))
            }
            Col::F32(v) => {
                ArrowCol::F32(arrow_array::Float32Array::from(offset(v)).slice(3, v.len()))
            }
            Col::F64(v) => {
                ArrowCol::F64(arrow_array::Float64Array::from(offset(v)).slice(3, v.len()))
            }
        }
    }
}

/// Why a run produced no value.
#[derive(Clone, Debug)]
pub enum RunError {
    /// The backend cannot run here at all (phase `init`).
    Unavailable(String),
    /// The backend declined this plan (phase `support`, e.g. 64-bit types
    /// on a GL adapter).
    Declined(String),
    /// Anything else: a real failure.
    Failed(String),
}

fn classify(e: Error) -> RunError {
    use computeq::plumbing::Phase;
    let msg = e.to_string();
    match e.attempts().last().map(|a| a.phase) {
        Some(Phase::Init) if e.kind() != ErrorKind::InvalidQuery => RunError::Unavailable(msg),
        Some(Phase::Support) => RunError::Declined(msg),
        _ => RunError::Failed(msg),
    }
}

/// Runs `case` on `engine`, forced onto `kind` without fallback, and returns
/// the value with the metrics of that run (checked to be a new run of `kind`).
pub fn run(
    engine: &Engine,
    kind: BackendKind,
    case: &Case,
    inputs: &Inputs,
) -> Result<(Out, ExecutionMetrics), RunError> {
    let before = engine.last_run().map(|m| m.run_id);
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_inner(engine, kind, case, inputs)
    }))
    .map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        RunError::Failed(format!(
            "panicked while building or running the query: {msg}"
        ))
    })?
    .map_err(classify)?;
    let m = engine
        .last_run()
        .filter(|m| Some(m.run_id) != before)
        .ok_or_else(|| RunError::Failed("the run left no metrics in the run log".into()))?;
    if m.backend != kind {
        return Err(RunError::Failed(format!(
            "forced onto {kind} with no fallback, but metrics say it ran on {} ({})",
            m.backend, m.reason
        )));
    }
    Ok((out, m))
}

/// A query over one numeric column of any type.
pub enum Q<'a> {
    I32(Query<'a, Expr<i32>>),
    U32(Query<'a, Expr<u32>>),
    I64(Query<'a, Expr<i64>>),
    U64(Query<'a, Expr<u64>>),
    F32(Query<'a, Expr<f32>>),
    F64(Query<'a, Expr<f64>>),
}

macro_rules! with_q {
    ($q:expr, $x:ident => $body:expr) => {
        match $q {
            Q::I32($x) => $body,
            Q::U32($x) => $body,
            Q::I64($x) => $body,
            Q::U64($x) => $body,
            Q::F32($x) => $body,
            Q::F64($x) => $body,
        }
    };
}

/// Calls the generic `$f::<T>($args)` for the element type of a column.
macro_rules! with_col {
    ($c:expr, $v:ident => $body:expr) => {
        match $c {
            Col::Bool($v) => $body,
            Col::I32($v) => $body,
            Col::U32($v) => $body,
            Col::I64($v) => $body,
            Col::U64($v) => $body,
            Col::F32($v) => $body,
            Col::F64($v) => $body,
        }
    };
}

/// Calls `$body` with `$v` bound to partner `$p` as a source: its Arrow
/// array when the inputs have them, else its slice.
macro_rules! with_partner {
    ($inputs:expr, $p:expr, $v:ident => $body:expr) => {{
        #[cfg(feature = "arrow")]
        let arrow = $inputs.arrow.as_ref().map(|(_, ps)| &ps[$p]);
        #[cfg(not(feature = "arrow"))]
        let arrow: Option<&()> = None;
        match arrow {
            #[cfg(feature = "arrow")]
            Some(a) => match a {
                ArrowCol::Bool($v) => $body,
                ArrowCol::I32($v) => $body,
                ArrowCol::U32($v) => $body,
                ArrowCol::I64($v) => $body,
                ArrowCol::U64($v) => $body,
                ArrowCol::F32($v) => $body,
                ArrowCol::F64($v) => $body,
            },
            _ => with_col!(&$inputs.partners[$p], c => {
                let $v = c.as_slice();
                $body
            }),
        }
    }};
}

fn run_inner(
    engine: &Engine,
    kind: BackendKind,
    case: &Case,
    inputs: &Inputs,
) -> Result<Out, Error> {
    #[cfg(feature = "arrow")]
    if let Some((source, _)) = &inputs.arrow {
        let mut q = match source {
            ArrowCol::I32(a) => Q::I32(engine.query(a)),
            ArrowCol::U32(a) => Q::U32(engine.query(a)),
            ArrowCol::I64(a) => Q::I64(engine.query(a)),
            ArrowCol::U64(a) => Q::U64(engine.query(a)),
            ArrowCol::F32(a) => Q::F32(engine.query(a)),
            ArrowCol::F64(a) => Q::F64(engine.query(a)),
            ArrowCol::Bool(_) => unreachable!("sources are numeric"),
        };
        for step in &case.steps {
            q = with_q!(q, q => apply(engine, q, step, inputs));
        }
        return with_q!(q, q => terminal(q.on(kind).no_fallback().fallible(), &case.term, inputs));
    }
    let mut q = match &inputs.source {
        Col::I32(v) => Q::I32(engine.query(v)),
        Col::U32(v) => Q::U32(engine.query(v)),
        Col::I64(v) => Q::I64(engine.query(v)),
        Col::U64(v) => Q::U64(engine.query(v)),
        Col::F32(v) => Q::F32(engine.query(v)),
        Col::F64(v) => Q::F64(engine.query(v)),
        Col::Bool(_) => unreachable!("sources are numeric"),
    };
    for step in &case.steps {
        q = with_q!(q, q => apply(engine, q, step, inputs));
    }
    with_q!(q, q => terminal(q.on(kind).no_fallback().fallible(), &case.term, inputs))
}

/// A numeric stream type that knows its `Q` variant.
pub trait Stream: Num {
    fn wrap<'a>(q: Query<'a, Expr<Self>>) -> Q<'a>;
}

macro_rules! stream {
    ($($t:ty => $v:ident),*) => {$(
        impl Stream for $t {
            fn wrap<'a>(q: Query<'a, Expr<Self>>) -> Q<'a> {
                Q::$v(q)
            }
        }
    )*};
}
stream!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

fn apply<'a, T: Stream>(
    engine: &'a Engine,
    q: Query<'a, Expr<T>>,
    step: &Step,
    inputs: &'a Inputs,
) -> Q<'a> {
    let wrap = T::wrap;
    let env = |x: Expr<T>| Env {
        x: T::d(x),
        y: None,
        i: None,
    };
    match step {
        Step::Map(e) => match e.ty {
            DType::I32 => Q::I32(q.map(|x| i32::from_d(build(e, &env(x))))),
            DType::U32 => Q::U32(q.map(|x| u32::from_d(build(e, &env(x))))),
            DType::I64 => Q::I64(q.map(|x| i64::from_d(build(e, &env(x))))),
            DType::U64 => Q::U64(q.map(|x| u64::from_d(build(e, &env(x))))),
            DType::F32 => Q::F32(q.map(|x| f32::from_d(build(e, &env(x))))),
            DType::F64 => Q::F64(q.map(|x| f64::from_d(build(e, &env(x))))),
            DType::Bool => unreachable!("streams are numeric"),
        },
        Step::Filter(e) => wrap(q.filter(|x| bool::from_d(build(e, &env(x))))),
        Step::ZipMap(p, e) => with_partner!(inputs, *p, v => wrap(zip_map(q, v, e))),
        Step::ZipFilter(p, e) => with_partner!(inputs, *p, v => wrap(zip_filter(q, v, e))),
        Step::EnumMap(e) => wrap(q.enumerate().map(|(i, x)| {
            T::from_d(build(
                e,
                &Env {
                    x: T::d(x),
                    y: None,
                    i: Some(i),
                },
            ))
        })),
        Step::EnumFilter(e) => wrap(
            q.enumerate()
                .filter(|(i, x)| {
                    bool::from_d(build(
                        e,
                        &Env {
                            x: T::d(x),
                            y: None,
                            i: Some(i),
                        },
                    ))
                })
                .map(|(_, x)| x),
        ),
        Step::Take(n) => wrap(q.take(*n)),
        Step::Skip(n) => wrap(q.skip(*n)),
        Step::Sort { desc: false } => wrap(q.sort()),
        Step::Sort { desc: true } => wrap(q.sort_desc()),
        Step::SemiJoin { partner, anti } => {
            with_partner!(inputs, *partner, v => wrap(semi_join(engine, q, v, *anti)))
        }
        Step::Join { partner } => {
            with_partner!(inputs, *partner, v => wrap(inner_join(engine, q, v)))
        }
        Step::ScanSum { exclusive: false } => wrap(q.scan_sum()),
        Step::ScanSum { exclusive: true } => wrap(q.scan_sum_exclusive()),
        Step::Scan {
            comb,
            exclusive: false,
        } => wrap(q.scan(identity::<T>(*comb), |a, b| combine(*comb, a, b))),
        Step::Scan {
            comb,
            exclusive: true,
        } => wrap(q.scan_exclusive(identity::<T>(*comb), |a, b| combine(*comb, a, b))),
    }
}

/// A semi- or anti-join with a partner cast to the stream's type: a build
/// side that runs first (a cast is computed) on `cpu-simd` (the case's
/// backend runs the join), on the case's engine (not the process-wide
/// one, which would read and write the environment's cache directory).
fn semi_join<'a, T: Num, Z: IntoSource<'a>>(
    engine: &'a Engine,
    q: Query<'a, Expr<T>>,
    other: Z,
    anti: bool,
) -> Query<'a, Expr<T>>
where
    Z::Elem: El,
{
    let side = engine.query(other).on(BackendKind::CpuSimd);
    if anti {
        q.anti_join(side, |x| x, |y| y.cast::<T>())
    } else {
        q.semi_join(side, |x| x, |y| y.cast::<T>())
    }
}

/// An inner join with the first rows of a partner cast to the stream's
/// type, keeping the probe side's value: each row once per match.
fn inner_join<'a, T: Num, Z: IntoSource<'a>>(
    engine: &'a Engine,
    q: Query<'a, Expr<T>>,
    other: Z,
) -> Query<'a, Expr<T>>
where
    Z::Elem: El,
{
    let side = engine
        .query(other)
        .on(BackendKind::CpuSimd)
        .take(super::ast::JOIN_BUILD);
    q.join(side, |x| x, |y| y.cast::<T>()).map(|(x, _)| x)
}

fn zip_map<'a, T: Num, Z: IntoSource<'a>>(
    q: Query<'a, Expr<T>>,
    other: Z,
    e: &Ex,
) -> Query<'a, Expr<T>>
where
    Z::Elem: El,
{
    q.zip(other).map(|(x, y)| {
        T::from_d(build(
            e,
            &Env {
                x: T::d(x),
                y: Some(<Z::Elem as El>::d(y)),
                i: None,
            },
        ))
    })
}

fn zip_filter<'a, T: Num, Z: IntoSource<'a>>(
    q: Query<'a, Expr<T>>,
    other: Z,
    e: &Ex,
) -> Query<'a, Expr<T>>
where
    Z::Elem: El,
{
    q.zip(other)
        .filter(|(x, y)| {
            bool::from_d(build(
                e,
                &Env {
                    x: T::d(x),
                    y: Some(<Z::Elem as El>::d(y)),
                    i: None,
                },
            ))
        })
        .map(|(x, _)| x)
}

/// The true identity of a combine for `T`.
pub fn identity<T: Num>(c: Comb) -> T {
    match c {
        Comb::Add | Comb::AddRev => T::ZERO,
        Comb::Mul => T::ONE,
        Comb::Min => T::TOP,
        Comb::Max | Comb::MaxRev => T::BOTTOM,
    }
}

fn combine<T: Num>(c: Comb, a: Expr<T>, b: Expr<T>) -> Expr<T> {
    match c {
        Comb::Add => a + b,
        Comb::AddRev => b + a,
        Comb::Mul => a * b,
        Comb::Min => a.min(b),
        Comb::Max => a.max(b),
        Comb::MaxRev => b.max(a),
    }
}

fn terminal<'a, T: Num>(
    q: Query<'a, Expr<T>, computeq::query::Try>,
    term: &Term,
    inputs: &'a Inputs,
) -> Result<Out, Error> {
    let pred = |e: &Ex, x: Expr<T>| {
        bool::from_d(build(
            e,
            &Env {
                x: T::d(x),
                y: None,
                i: None,
            },
        ))
    };
    Ok(match term {
        Term::Sum => Out::Val(q.sum()?.val()),
        Term::Min => Out::Opt(q.min()?.map(El::val)),
        Term::Max => Out::Opt(q.max()?.map(El::val)),
        Term::Count => Out::Usize(q.count()?),
        Term::Mean => Out::Mean(q.mean()?),
        Term::Variance => Out::Mean(q.variance()?),
        Term::First => Out::Opt(q.first()?.map(El::val)),
        Term::Last => Out::Opt(q.last()?.map(El::val)),
        Term::Histogram => {
            let h = q.histogram(16, -4.0, 4.0)?;
            let mut v = h.counts;
            v.extend([h.below, h.above, h.nan]);
            Out::Counts(v)
        }
        Term::ValueCounts => {
            // The counts, then each key's group key (its place in the
            // keys' order), compared as one list.
            let g = q.value_counts()?;
            let mut v = g.values;
            v.extend(
                g.keys
                    .iter()
                    .map(|k| super::oracle::group_key(k.val()) as u64),
            );
            Out::Counts(v)
        }
        Term::Reduce(c) => Out::Val(q.reduce(identity::<T>(*c), |a, b| combine(*c, a, b))?.val()),
        Term::Any(e) => Out::Bool(q.any(|x| pred(e, x))?),
        Term::All(e) => Out::Bool(q.all(|x| pred(e, x))?),
        Term::ArgMin => Out::OptUsize(q.argmin()?),
        Term::ArgMax => Out::OptUsize(q.argmax()?),
        Term::Stats => {
            let s: Stats<T> = q.stats()?;
            Out::Stats {
                count: s.count,
                sum: s.sum.val(),
                min: s.min.map(El::val),
                max: s.max.map(El::val),
                mean: s.mean,
            }
        }
        Term::Collect => Out::Cols(vec![T::col(q.collect::<Vec<T>>()?)]),
        Term::CollectPred(e) => {
            let v: Vec<(T, bool)> = q.map(|x| (x, pred(e, x))).collect()?;
            let (a, b): (Vec<T>, Vec<bool>) = v.into_iter().unzip();
            Out::Cols(vec![T::col(a), Col::Bool(b)])
        }
        Term::CollectEnumerated => {
            let v: Vec<(u64, T)> = q.enumerate().collect()?;
            let (a, b): (Vec<u64>, Vec<T>) = v.into_iter().unzip();
            Out::Cols(vec![Col::U64(a), T::col(b)])
        }
        Term::CollectZipped(p) => with_partner!(inputs, *p, v => collect_zipped(q, v)?),
        Term::CollectBool(e) => Out::Cols(vec![Col::Bool(
            q.map(|x| pred(e, x)).collect::<Vec<bool>>()?,
        )]),
    })
}

fn collect_zipped<'a, T: Num, Z: IntoSource<'a>>(
    q: Query<'a, Expr<T>, computeq::query::Try>,
    other: Z,
) -> Result<Out, Error>
where
    Z::Elem: El,
{
    let v: Vec<(T, Z::Elem)> = q.zip(other).collect()?;
    let (a, b): (Vec<T>, Vec<Z::Elem>) = v.into_iter().unzip();
    Ok(Out::Cols(vec![T::col(a), <Z::Elem as El>::col(b)]))
}

// ------------------------------------------------------------- expressions

/// The leaves visible to an expression.
pub struct Env {
    pub x: D,
    pub y: Option<D>,
    pub i: Option<Expr<u64>>,
}

macro_rules! num_pair {
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($a, $b) {
            (D::I32($x), D::I32($y)) => D::I32($body),
            (D::U32($x), D::U32($y)) => D::U32($body),
            (D::I64($x), D::I64($y)) => D::I64($body),
            (D::U64($x), D::U64($y)) => D::U64($body),
            (D::F32($x), D::F32($y)) => D::F32($body),
            (D::F64($x), D::F64($y)) => D::F64($body),
            (a, b) => panic!("operand types differ or are not numeric: {a:?} {b:?}"),
        }
    };
}

macro_rules! num_lit {
    ($a:expr, $v:expr, |$x:ident, $l:ident| $body:expr) => {
        match ($a, $v) {
            (D::I32($x), Val::I32($l)) => D::I32($body),
            (D::U32($x), Val::U32($l)) => D::U32($body),
            (D::I64($x), Val::I64($l)) => D::I64($body),
            (D::U64($x), Val::U64($l)) => D::U64($body),
            (D::F32($x), Val::F32($l)) => D::F32($body),
            (D::F64($x), Val::F64($l)) => D::F64($body),
            (a, b) => panic!("operand types differ or are not numeric: {a:?} {b:?}"),
        }
    };
}

macro_rules! num_one {
    ($a:expr, |$x:ident| $body:expr) => {
        match $a {
            D::I32($x) => D::I32($body),
            D::U32($x) => D::U32($body),
            D::I64($x) => D::I64($body),
            D::U64($x) => D::U64($body),
            D::F32($x) => D::F32($body),
            D::F64($x) => D::F64($body),
            D::Bool(_) => panic!("numeric operation on a bool"),
        }
    };
}

macro_rules! any_one {
    ($a:expr, |$x:ident| $body:expr) => {
        match $a {
            D::Bool($x) => $body,
            D::I32($x) => $body,
            D::U32($x) => $body,
            D::I64($x) => $body,
            D::U64($x) => $body,
            D::F32($x) => $body,
            D::F64($x) => $body,
        }
    };
}

fn lit_expr(v: Val, form: LitForm) -> D {
    macro_rules! mk {
        ($($v:ident),*) => {
            match v {
                $(Val::$v(x) => D::$v(if form == LitForm::Const { Expr::constant(x) } else { Expr::param(x) }),)*
            }
        };
    }
    mk!(Bool, I32, U32, I64, U64, F32, F64)
}

fn arith<T: Numeric, R: IntoExpr<T>>(op: Bin, a: Expr<T>, b: R) -> Expr<T> {
    match op {
        Bin::Add => a + b,
        Bin::Sub => a - b,
        Bin::Mul => a * b,
        Bin::Div => a / b,
        Bin::Rem => a % b,
        Bin::Min => a.min(b),
        Bin::Max => a.max(b),
        Bin::And | Bin::Or => unreachable!("boolean operator on numbers"),
        _ => unreachable!("bit operation built by `bits`"),
    }
}

/// An integer bit operation: `x op y`, `x op literal` or `literal op y`
/// (the operators of `Expr<int>` and of the integer types).
fn bits(op: Bin, a: &Ex, b: &Ex, env: &Env) -> D {
    macro_rules! apply {
        ($l:expr, $r:expr) => {
            match op {
                Bin::BitAnd => $l & $r,
                Bin::BitOr => $l | $r,
                Bin::BitXor => $l ^ $r,
                Bin::Shl => $l << $r,
                _ => $l >> $r,
            }
        };
    }
    macro_rules! go {
        ($($v:ident),*) => {
            match (a.inline_lit(), b.inline_lit()) {
                (_, Some(l)) => match (build(a, env), l) {
                    $((D::$v(x), Val::$v(l)) => D::$v(apply!(x, l)),)*
                    (x, l) => panic!("{op:?} on {x:?} and {l:?}"),
                },
                (Some(l), None) => match (l, build(b, env)) {
                    $((Val::$v(l), D::$v(y)) => D::$v(apply!(l, y)),)*
                    (l, y) => panic!("{op:?} on {l:?} and {y:?}"),
                },
                (None, None) => match (build(a, env), build(b, env)) {
                    $((D::$v(x), D::$v(y)) => D::$v(apply!(x, y)),)*
                    (x, y) => panic!("{op:?} on {x:?} and {y:?}"),
                },
            }
        };
    }
    go!(I32, U32, I64, U64)
}

/// `literal op expr`, through the `impl Add<Expr<T>> for T` operators.
fn lhs_lit(op: Bin, l: Val, b: D) -> D {
    macro_rules! go {
        ($($v:ident),*) => {
            match (l, b) {
                $((Val::$v(l), D::$v(y)) => D::$v(match op {
                    Bin::Add => l + y,
                    Bin::Sub => l - y,
                    Bin::Mul => l * y,
                    Bin::Div => l / y,
                    Bin::Rem => l % y,
                    _ => unreachable!("only operators take a literal on the left"),
                }),)*
                (l, b) => panic!("operand types differ: {l:?} {b:?}"),
            }
        };
    }
    go!(I32, U32, I64, U64, F32, F64)
}

fn compare<T: Element, R: IntoExpr<T>>(op: Cmp, a: Expr<T>, b: R) -> Expr<bool> {
    match op {
        Cmp::Eq => a.eq(b),
        Cmp::Ne => a.ne(b),
        Cmp::Lt => a.lt(b),
        Cmp::Le => a.le(b),
        Cmp::Gt => a.gt(b),
        Cmp::Ge => a.ge(b),
    }
}

fn cast_to<U: El>(d: D) -> Expr<U> {
    any_one!(d, |x| x.cast::<U>())
}

fn float_un<T: Float>(op: Un, x: Expr<T>) -> Expr<T> {
    match op {
        Un::Sqrt => x.sqrt(),
        Un::Exp => x.exp(),
        Un::Ln => x.ln(),
        Un::Sin => x.sin(),
        Un::Cos => x.cos(),
        Un::Floor => x.floor(),
        Un::Ceil => x.ceil(),
        Un::Round => x.round(),
        _ => unreachable!(),
    }
}

fn select_arm(e: &Ex, env: &Env) -> D {
    build(e, env)
}

/// Builds `e` on traced values. Inline literals go where the API takes a
/// plain value; elsewhere they become `Expr::param` (as `ast` prints them).
pub fn build(e: &Ex, env: &Env) -> D {
    match &e.kind {
        ExKind::X => env.x,
        ExKind::Y => env.y.expect("y outside a zip"),
        ExKind::I => D::U64(env.i.expect("i outside an enumerate")),
        ExKind::Lit(v, form) => lit_expr(*v, *form),
        ExKind::Un(op, a) => {
            let a = build(a, env);
            match op {
                Un::Not => D::Bool(!bool_of(a)),
                Un::Neg => num_one!(a, |x| -x),
                Un::Abs => num_one!(a, |x| x.abs()),
                Un::BitNot => match a {
                    D::I32(x) => D::I32(!x),
                    D::U32(x) => D::U32(!x),
                    D::I64(x) => D::I64(!x),
                    D::U64(x) => D::U64(!x),
                    other => panic!("bit not on {other:?}"),
                },
                op => match a {
                    D::F32(x) => D::F32(float_un(*op, x)),
                    D::F64(x) => D::F64(float_un(*op, x)),
                    other => panic!("{op:?} on {other:?}"),
                },
            }
        }
        ExKind::Bin(op @ (Bin::And | Bin::Or), a, b) => {
            let x = bool_of(build(a, env));
            D::Bool(match (op, b.inline_lit()) {
                (Bin::And, Some(Val::Bool(l))) => x & l,
                (Bin::Or, Some(Val::Bool(l))) => x | l,
                (Bin::And, _) => x & bool_of(build(b, env)),
                _ => x | bool_of(build(b, env)),
            })
        }
        ExKind::Bin(op @ (Bin::BitAnd | Bin::BitOr | Bin::BitXor | Bin::Shl | Bin::Shr), a, b) => {
            bits(*op, a, b, env)
        }
        ExKind::Bin(op, a, b) => {
            if let Some(l) = b.inline_lit() {
                num_lit!(build(a, env), l, |x, l| arith(*op, x, l))
            } else if let (Some(l), false) = (a.inline_lit(), matches!(op, Bin::Min | Bin::Max)) {
                lhs_lit(*op, l, build(b, env))
            } else {
                num_pair!(build(a, env), build(b, env), |x, y| arith(*op, x, y))
            }
        }
        ExKind::Cmp(op, a, b) => {
            let x = build(a, env);
            D::Bool(match b.inline_lit() {
                Some(l) => match (x, l) {
                    (D::I32(x), Val::I32(l)) => compare(*op, x, l),
                    (D::U32(x), Val::U32(l)) => compare(*op, x, l),
                    (D::I64(x), Val::I64(l)) => compare(*op, x, l),
                    (D::U64(x), Val::U64(l)) => compare(*op, x, l),
                    (D::F32(x), Val::F32(l)) => compare(*op, x, l),
                    (D::F64(x), Val::F64(l)) => compare(*op, x, l),
                    (a, b) => panic!("comparison of {a:?} and {b:?}"),
                },
                None => {
                    let y = build(b, env);
                    match (x, y) {
                        (D::I32(x), D::I32(y)) => compare(*op, x, y),
                        (D::U32(x), D::U32(y)) => compare(*op, x, y),
                        (D::I64(x), D::I64(y)) => compare(*op, x, y),
                        (D::U64(x), D::U64(y)) => compare(*op, x, y),
                        (D::F32(x), D::F32(y)) => compare(*op, x, y),
                        (D::F64(x), D::F64(y)) => compare(*op, x, y),
                        (a, b) => panic!("comparison of {a:?} and {b:?}"),
                    }
                }
            })
        }
        ExKind::Select(c, a, b) => {
            let c = bool_of(build(c, env));
            macro_rules! sel {
                ($($v:ident: $t:ty),*) => {
                    match e.ty {
                        $(DType::$v => D::$v(c.select(arg::<$t>(a, env), arg::<$t>(b, env))),)*
                    }
                };
            }
            sel!(Bool: bool, I32: i32, U32: u32, I64: i64, U64: u64, F32: f32, F64: f64)
        }
        ExKind::Cast(a) => {
            let a = build(a, env);
            match e.ty {
                DType::Bool => D::Bool(cast_to::<bool>(a)),
                DType::I32 => D::I32(cast_to::<i32>(a)),
                DType::U32 => D::U32(cast_to::<u32>(a)),
                DType::I64 => D::I64(cast_to::<i64>(a)),
                DType::U64 => D::U64(cast_to::<u64>(a)),
                DType::F32 => D::F32(cast_to::<f32>(a)),
                DType::F64 => D::F64(cast_to::<f64>(a)),
            }
        }
        ExKind::MulAdd(a, b, c) => {
            macro_rules! ma {
                ($($v:ident: $t:ty),*) => {
                    match build(a, env) {
                        $(D::$v(x) => D::$v(x.mul_add(arg::<$t>(b, env), arg::<$t>(c, env))),)*
                        D::Bool(_) => unreachable!(),
                    }
                };
            }
            ma!(I32: i32, U32: u32, I64: i64, U64: u64, F32: f32, F64: f64)
        }
        ExKind::Powi(a, n) => num_one!(build(a, env), |x| x.powi(*n)),
        ExKind::Clamp(a, lo, hi) => {
            macro_rules! cl {
                ($($v:ident: $t:ty),*) => {
                    match build(a, env) {
                        $(D::$v(x) => D::$v(x.clamp(arg::<$t>(lo, env), arg::<$t>(hi, env))),)*
                        D::Bool(_) => unreachable!(),
                    }
                };
            }
            cl!(I32: i32, U32: u32, I64: i64, U64: u64, F32: f32, F64: f64)
        }
    }
}

/// An argument in a position that takes `impl IntoExpr<T>`: a plain value
/// for inline literals, the built expression otherwise.
enum Arg<T> {
    Plain(T),
    Traced(Expr<T>),
}

impl<T: El> IntoExpr<T> for Arg<T>
where
    T: IntoExpr<T>,
{
    fn into_expr(self) -> Expr<T> {
        match self {
            Arg::Plain(v) => v.into_expr(),
            Arg::Traced(e) => e,
        }
    }
}

fn arg<T: El>(e: &Ex, env: &Env) -> Arg<T> {
    match e.inline_lit() {
        Some(v) => Arg::Plain(T::of(v)),
        None => Arg::Traced(T::from_d(select_arm(e, env))),
    }
}

fn bool_of(d: D) -> Expr<bool> {
    match d {
        D::Bool(b) => b,
        other => panic!("expected a bool expression, got {other:?}"),
    }
}
