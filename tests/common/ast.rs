//! Pipelines as data: a typed AST of element expressions, adaptors and
//! terminals, printed as the Rust code it stands for, and the proptest
//! strategy that generates it.
//!
//! Generation is two-step: proptest draws an untyped `Raw*` tree (which
//! shrinks well: towards leaves, fewer steps, small lengths), then
//! `elaborate` gives every node a type, inserting casts where the drawn
//! shape does not fit. Every drawn tree is therefore a valid query.

use super::data::{length_from, DataSpec, Dist};
use super::value::{Val, NUMERIC};
use computeq::expr::DType;
use computeq::plumbing::backends::cpu_simd::{BLOCK, LEAF};
use proptest::prelude::*;
use std::fmt;

/// Unary operations (`Not` on booleans, the rest on numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Un {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Ln,
    Sin,
    Cos,
    Floor,
    Ceil,
    Round,
    Not,
    /// `!x` on integers.
    BitNot,
}

/// The float-only unary operations.
pub const FLOAT_UN: [Un; 10] = [
    Un::Neg,
    Un::Abs,
    Un::Sqrt,
    Un::Exp,
    Un::Ln,
    Un::Sin,
    Un::Cos,
    Un::Floor,
    Un::Ceil,
    Un::Round,
];

/// Binary operations (`And`/`Or` on booleans, the rest on numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

/// The integer bit operations.
pub const BITS: [Bin; 5] = [Bin::BitAnd, Bin::BitOr, Bin::BitXor, Bin::Shl, Bin::Shr];

pub const ARITH: [Bin; 7] = [
    Bin::Add,
    Bin::Sub,
    Bin::Mul,
    Bin::Div,
    Bin::Rem,
    Bin::Min,
    Bin::Max,
];

/// Comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

pub const CMPS: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge];

/// How a literal reaches the query: as a plain Rust value next to an
/// operator (`x * 2.0`), through `Expr::param`, or as `Expr::constant`
/// (baked into the plan, so constant folding sees it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LitForm {
    Inline,
    Param,
    Const,
}

/// A typed element expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Ex {
    pub ty: DType,
    pub kind: ExKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExKind {
    /// The stream element.
    X,
    /// The zip partner's element.
    Y,
    /// The enumerate index (`u64`).
    I,
    Lit(Val, LitForm),
    Un(Un, Box<Ex>),
    Bin(Bin, Box<Ex>, Box<Ex>),
    Cmp(Cmp, Box<Ex>, Box<Ex>),
    Select(Box<Ex>, Box<Ex>, Box<Ex>),
    /// `a.cast::<ty>()`.
    Cast(Box<Ex>),
    MulAdd(Box<Ex>, Box<Ex>, Box<Ex>),
    Powi(Box<Ex>, i32),
    Clamp(Box<Ex>, Box<Ex>, Box<Ex>),
}

impl Ex {
    fn new(ty: DType, kind: ExKind) -> Ex {
        Ex { ty, kind }
    }

    /// A literal written inline (where the API allows a plain value).
    pub fn inline_lit(&self) -> Option<Val> {
        match self.kind {
            ExKind::Lit(v, LitForm::Inline) => Some(v),
            _ => None,
        }
    }

    /// Number of nodes.
    pub fn size(&self) -> usize {
        1 + match &self.kind {
            ExKind::X | ExKind::Y | ExKind::I | ExKind::Lit(..) => 0,
            ExKind::Un(_, a) | ExKind::Cast(a) | ExKind::Powi(a, _) => a.size(),
            ExKind::Bin(_, a, b) | ExKind::Cmp(_, a, b) => a.size() + b.size(),
            ExKind::Select(a, b, c) | ExKind::MulAdd(a, b, c) | ExKind::Clamp(a, b, c) => {
                a.size() + b.size() + c.size()
            }
        }
    }
}

/// Custom combine of `reduce`/`scan` (always with its true identity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comb {
    /// `|a, b| a + b`, identity 0.
    Add,
    /// `|a, b| b + a`, identity 0.
    AddRev,
    /// `|a, b| a * b`, identity 1.
    Mul,
    /// `|a, b| a.min(b)`, identity MAX (+inf).
    Min,
    /// `|a, b| a.max(b)`, identity MIN (-inf).
    Max,
    /// `|a, b| b.max(a)`, identity MIN (-inf).
    MaxRev,
}

pub const COMBS: [Comb; 6] = [
    Comb::Add,
    Comb::AddRev,
    Comb::Mul,
    Comb::Min,
    Comb::Max,
    Comb::MaxRev,
];

/// One adaptor. The stream is always one numeric column between steps:
/// `zip` and `enumerate` are followed by a map or filter that folds the
/// pair back into one column.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Map(Ex),
    Filter(Ex),
    /// `.zip(&p[k]).map(|(x, y)| ex)`, `ex` of the stream type.
    ZipMap(usize, Ex),
    /// `.zip(&p[k]).filter(|(x, y)| ex).map(|(x, _)| x)`.
    ZipFilter(usize, Ex),
    /// `.enumerate().map(|(i, x)| ex)`, `ex` of the stream type.
    EnumMap(Ex),
    /// `.enumerate().filter(|(i, x)| ex).map(|(_, x)| x)`.
    EnumFilter(Ex),
    Take(usize),
    Skip(usize),
    ScanSum {
        exclusive: bool,
    },
    Scan {
        comb: Comb,
        exclusive: bool,
    },
    /// `.sort()` / `.sort_desc()`: the canonical total order, stable.
    Sort {
        desc: bool,
    },
    /// `.semi_join(p.compute(), |x| x, |y| y.cast())` (or `anti_join`):
    /// the build side a query that runs first.
    SemiJoin {
        partner: usize,
        anti: bool,
    },
    /// `.join(p.compute().take(JOIN_BUILD), |x| x, |y| y.cast()).map(|(x, _)| x)`:
    /// an inner join, each row once per match in build order (a build
    /// side of a few rows keeps the output bounded).
    Join {
        partner: usize,
    },
}

/// Rows of an inner join's build side in the random suite.
pub const JOIN_BUILD: usize = 4;

/// The terminal.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Sum,
    Min,
    Max,
    Count,
    Mean,
    /// `.variance()`: the sample variance (`m2`).
    Variance,
    /// `.first()` / `.last()`: early-exit terminals.
    First,
    Last,
    /// `.histogram(16, -4.0, 4.0)`: counts per bin, below, above, NaN.
    Histogram,
    /// `.value_counts()`: the distinct values as group keys (`-0.0` is
    /// `+0.0`, every NaN one key), sorted, with their counts.
    ValueCounts,
    Reduce(Comb),
    Any(Ex),
    All(Ex),
    ArgMin,
    ArgMax,
    Stats,
    Collect,
    /// `.map(|x| (x, p)).collect::<Vec<(T, bool)>>()`.
    CollectPred(Ex),
    /// `.enumerate().collect::<Vec<(u64, T)>>()`.
    CollectEnumerated,
    /// `.zip(&p[k]).collect::<Vec<(T, U)>>()`.
    CollectZipped(usize),
    /// `.map(|x| p).collect::<Vec<bool>>()`.
    CollectBool(Ex),
}

/// A whole differential case: inputs, adaptors, terminal.
#[derive(Clone, PartialEq)]
pub struct Case {
    pub source: DataSpec,
    pub partners: Vec<DataSpec>,
    pub steps: Vec<Step>,
    pub term: Term,
}

impl Case {
    /// The stream type before each step, then after the last one.
    pub fn stream_types(&self) -> Vec<DType> {
        let mut t = self.source.dtype;
        let mut out = vec![t];
        for s in &self.steps {
            if let Step::Map(e) = s {
                t = e.ty;
            }
            out.push(t);
        }
        out
    }

    /// The stream type reaching the terminal.
    pub fn final_type(&self) -> DType {
        *self.stream_types().last().unwrap()
    }

    /// The largest input length.
    pub fn max_len(&self) -> usize {
        self.partners
            .iter()
            .map(|p| p.len)
            .chain([self.source.len])
            .max()
            .unwrap()
    }
}

// ---------------------------------------------------------------- printing

/// Prints an expression as it is built: inline literals only where the API
/// takes a plain value, `Expr::param(..)` elsewhere.
struct Code<'a>(&'a Ex, Pos);

#[derive(Clone, Copy, PartialEq)]
enum Pos {
    /// Receiver of a method or an operator's expression operand.
    Recv,
    /// Argument position that accepts a plain value.
    Arg,
}

impl fmt::Display for Code<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Code(e, pos) = *self;
        let r = |e| Code(e, Pos::Recv);
        let a = |e| Code(e, Pos::Arg);
        match &e.kind {
            ExKind::X => f.write_str("x"),
            ExKind::Y => f.write_str("y"),
            ExKind::I => f.write_str("i"),
            ExKind::Lit(v, form) => match (form, pos) {
                (LitForm::Inline, Pos::Arg) => write!(f, "{v}"),
                (LitForm::Const, _) => write!(f, "Expr::constant({v})"),
                _ => write!(f, "Expr::param({v})"),
            },
            ExKind::Un(op, x) => match op {
                Un::Neg => write!(f, "(-{})", r(x)),
                Un::Not | Un::BitNot => write!(f, "(!{})", r(x)),
                op => write!(f, "{}.{}()", r(x), format!("{op:?}").to_lowercase()),
            },
            ExKind::Bin(op, x, y) => {
                let sym = match op {
                    Bin::Add => "+",
                    Bin::Sub => "-",
                    Bin::Mul => "*",
                    Bin::Div => "/",
                    Bin::Rem => "%",
                    Bin::And | Bin::BitAnd => "&",
                    Bin::Or | Bin::BitOr => "|",
                    Bin::BitXor => "^",
                    Bin::Shl => "<<",
                    Bin::Shr => ">>",
                    Bin::Min => return write!(f, "{}.min({})", r(x), a(y)),
                    Bin::Max => return write!(f, "{}.max({})", r(x), a(y)),
                };
                if y.inline_lit().is_some() {
                    write!(f, "({} {sym} {})", r(x), a(y))
                } else if x.inline_lit().is_some() && !matches!(op, Bin::And | Bin::Or) {
                    write!(f, "({} {sym} {})", a(x), r(y))
                } else {
                    write!(f, "({} {sym} {})", r(x), r(y))
                }
            }
            ExKind::Cmp(op, x, y) => {
                write!(f, "{}.{}({})", r(x), format!("{op:?}").to_lowercase(), a(y))
            }
            ExKind::Select(c, x, y) => write!(f, "{}.select({}, {})", r(c), a(x), a(y)),
            ExKind::Cast(x) => write!(f, "{}.cast::<{}>()", r(x), e.ty),
            ExKind::MulAdd(x, y, z) => write!(f, "{}.mul_add({}, {})", r(x), a(y), a(z)),
            ExKind::Powi(x, n) => write!(f, "{}.powi({n})", r(x)),
            ExKind::Clamp(x, lo, hi) => write!(f, "{}.clamp({}, {})", r(x), a(lo), a(hi)),
        }
    }
}

impl fmt::Display for Ex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Code(self, Pos::Recv).fmt(f)
    }
}

impl fmt::Display for Comb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Comb::Add => "|a, b| a + b",
            Comb::AddRev => "|a, b| b + a",
            Comb::Mul => "|a, b| a * b",
            Comb::Min => "|a, b| a.min(b)",
            Comb::Max => "|a, b| a.max(b)",
            Comb::MaxRev => "|a, b| b.max(a)",
        })
    }
}

/// The identity of `c` for type `t`, as printed.
pub fn identity_name(c: Comb, t: DType) -> String {
    let float = t.is_float();
    match c {
        Comb::Add | Comb::AddRev => format!("0{}", if float { ".0" } else { "" }),
        Comb::Mul => format!("1{}", if float { ".0" } else { "" }),
        Comb::Min => format!("{t}::{}", if float { "INFINITY" } else { "MAX" }),
        Comb::Max | Comb::MaxRev => format!("{t}::{}", if float { "NEG_INFINITY" } else { "MIN" }),
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "// xs: {:?}", self.source)?;
        for (i, p) in self.partners.iter().enumerate() {
            writeln!(f, "// p{i}: {p:?}")?;
        }
        write!(f, "xs.compute()")?;
        let types = self.stream_types();
        for (k, s) in self.steps.iter().enumerate() {
            let t = types[k];
            write!(f, "\n    ")?;
            match s {
                Step::Map(e) => write!(f, ".map(|x| {e})")?,
                Step::Filter(e) => write!(f, ".filter(|x| {e})")?,
                Step::ZipMap(p, e) => write!(f, ".zip(&p{p}).map(|(x, y)| {e})")?,
                Step::ZipFilter(p, e) => {
                    write!(f, ".zip(&p{p}).filter(|(x, y)| {e}).map(|(x, _)| x)")?
                }
                Step::EnumMap(e) => write!(f, ".enumerate().map(|(i, x)| {e})")?,
                Step::EnumFilter(e) => {
                    write!(f, ".enumerate().filter(|(i, x)| {e}).map(|(_, x)| x)")?
                }
                Step::Take(n) => write!(f, ".take({})", count_name(*n))?,
                Step::Skip(n) => write!(f, ".skip({})", count_name(*n))?,
                Step::Sort { desc: false } => write!(f, ".sort()")?,
                Step::Sort { desc: true } => write!(f, ".sort_desc()")?,
                Step::SemiJoin { partner, anti } => write!(
                    f,
                    ".{}(p{partner}.compute(), |x| x, |y| y.cast())",
                    if *anti { "anti_join" } else { "semi_join" }
                )?,
                Step::Join { partner } => write!(
                    f,
                    ".join(p{partner}.compute().take({JOIN_BUILD}), |x| x, |y| y.cast()).map(|(x, _)| x)"
                )?,
                Step::ScanSum { exclusive: false } => write!(f, ".scan_sum()")?,
                Step::ScanSum { exclusive: true } => write!(f, ".scan_sum_exclusive()")?,
                Step::Scan { comb, exclusive } => write!(
                    f,
                    ".scan{}({}, {comb})",
                    if *exclusive { "_exclusive" } else { "" },
                    identity_name(*comb, t)
                )?,
            }
        }
        let t = *types.last().unwrap();
        write!(f, "\n    ")?;
        match &self.term {
            Term::Sum => write!(f, ".sum()"),
            Term::Min => write!(f, ".min()"),
            Term::Max => write!(f, ".max()"),
            Term::Count => write!(f, ".count()"),
            Term::Mean => write!(f, ".mean()"),
            Term::Variance => write!(f, ".variance()"),
            Term::First => write!(f, ".first()"),
            Term::Last => write!(f, ".last()"),
            Term::Histogram => write!(f, ".histogram(16, -4.0, 4.0)"),
            Term::ValueCounts => write!(f, ".value_counts()"),
            Term::Reduce(c) => write!(f, ".reduce({}, {c})", identity_name(*c, t)),
            Term::Any(e) => write!(f, ".any(|x| {e})"),
            Term::All(e) => write!(f, ".all(|x| {e})"),
            Term::ArgMin => write!(f, ".argmin()"),
            Term::ArgMax => write!(f, ".argmax()"),
            Term::Stats => write!(f, ".stats()"),
            Term::Collect => write!(f, ".collect::<Vec<{t}>>()"),
            Term::CollectPred(e) => write!(f, ".map(|x| (x, {e})).collect::<Vec<({t}, bool)>>()"),
            Term::CollectEnumerated => write!(f, ".enumerate().collect::<Vec<(u64, {t})>>()"),
            Term::CollectZipped(p) => write!(
                f,
                ".zip(&p{p}).collect::<Vec<({t}, {})>>()",
                self.partners[*p].dtype
            ),
            Term::CollectBool(e) => write!(f, ".map(|x| {e}).collect::<Vec<bool>>()"),
        }
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n{self}\n")
    }
}

fn count_name(n: usize) -> String {
    if n == usize::MAX {
        "usize::MAX".into()
    } else {
        n.to_string()
    }
}

// -------------------------------------------------------------- generation

/// An untyped expression as drawn by proptest; bytes pick operators and
/// types during elaboration.
#[derive(Clone, Debug)]
pub enum RawEx {
    Leaf(u8),
    Lit(u8, u8),
    Un(u8, Box<RawEx>),
    Bin(u8, Box<RawEx>, Box<RawEx>),
    Cmp(u8, u8, Box<RawEx>, Box<RawEx>),
    Select(Box<RawEx>, Box<RawEx>, Box<RawEx>),
    Cast(u8, Box<RawEx>),
    MulAdd(Box<RawEx>, Box<RawEx>, Box<RawEx>),
    Powi(i8, Box<RawEx>),
    Clamp(Box<RawEx>, Box<RawEx>, Box<RawEx>),
}

#[derive(Clone, Debug)]
pub enum RawStep {
    Map(u8, RawEx),
    Filter(RawEx),
    ZipMap(u8, RawEx),
    ZipFilter(u8, RawEx),
    EnumMap(RawEx),
    EnumFilter(RawEx),
    Take(u8, u16),
    Skip(u8, u16),
    ScanSum(bool),
    Scan(u8, bool),
    Sort(bool),
    SemiJoin(u8, bool),
    Join(u8),
}

#[derive(Clone, Debug)]
pub enum RawTerm {
    Sum,
    Min,
    Max,
    Count,
    Mean,
    Variance,
    First,
    Last,
    Histogram,
    ValueCounts,
    Reduce(u8),
    Any(RawEx),
    All(RawEx),
    ArgMin,
    ArgMax,
    Stats,
    Collect,
    CollectPred(RawEx),
    CollectEnumerated,
    CollectZipped(u8),
    CollectBool(RawEx),
}

/// An input as drawn: type byte, length bytes, distribution byte, seed.
#[derive(Clone, Debug)]
pub struct RawData {
    pub ty: u8,
    pub len: (u8, u16),
    pub dist: u8,
    pub seed: u64,
}

#[derive(Clone, Debug)]
pub struct RawCase {
    pub source: RawData,
    pub partners: [RawData; 2],
    pub steps: Vec<RawStep>,
    pub term: RawTerm,
}

fn bx(e: RawEx) -> Box<RawEx> {
    Box::new(e)
}

/// Random expression trees over every operation.
pub fn raw_ex() -> impl Strategy<Value = RawEx> {
    let leaf = prop_oneof![
        3 => any::<u8>().prop_map(RawEx::Leaf),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| RawEx::Lit(a, b)),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            3 => (any::<u8>(), inner.clone()).prop_map(|(o, a)| RawEx::Un(o, bx(a))),
            5 => (any::<u8>(), inner.clone(), inner.clone()).prop_map(|(o, a, b)| RawEx::Bin(o, bx(a), bx(b))),
            2 => (any::<u8>(), any::<u8>(), inner.clone(), inner.clone())
                .prop_map(|(o, h, a, b)| RawEx::Cmp(o, h, bx(a), bx(b))),
            1 => (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| RawEx::Select(bx(c), bx(a), bx(b))),
            1 => (any::<u8>(), inner.clone()).prop_map(|(h, a)| RawEx::Cast(h, bx(a))),
            1 => (inner.clone(), inner.clone(), inner.clone()).prop_map(|(a, b, c)| RawEx::MulAdd(bx(a), bx(b), bx(c))),
            1 => (-3i8..=9, inner.clone()).prop_map(|(n, a)| RawEx::Powi(n, bx(a))),
            1 => (inner.clone(), inner.clone(), inner).prop_map(|(a, b, c)| RawEx::Clamp(bx(a), bx(b), bx(c))),
        ]
    })
}

/// Predicates: mostly rooted at a comparison, sometimes anything (coerced).
pub fn raw_pred() -> impl Strategy<Value = RawEx> {
    prop_oneof![
        4 => (any::<u8>(), any::<u8>(), raw_ex(), raw_ex()).prop_map(|(o, h, a, b)| RawEx::Cmp(o, h, bx(a), bx(b))),
        1 => raw_ex(),
    ]
}

fn raw_step() -> impl Strategy<Value = RawStep> {
    prop_oneof![
        6 => (any::<u8>(), raw_ex()).prop_map(|(h, e)| RawStep::Map(h, e)),
        4 => raw_pred().prop_map(RawStep::Filter),
        2 => (any::<u8>(), raw_ex()).prop_map(|(p, e)| RawStep::ZipMap(p, e)),
        1 => (any::<u8>(), raw_pred()).prop_map(|(p, e)| RawStep::ZipFilter(p, e)),
        1 => raw_ex().prop_map(RawStep::EnumMap),
        1 => raw_pred().prop_map(RawStep::EnumFilter),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(a, b)| RawStep::Take(a, b)),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(a, b)| RawStep::Skip(a, b)),
        2 => any::<bool>().prop_map(RawStep::ScanSum),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(c, x)| RawStep::Scan(c, x)),
        1 => any::<bool>().prop_map(RawStep::Sort),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(p, a)| RawStep::SemiJoin(p, a)),
        1 => any::<u8>().prop_map(RawStep::Join),
    ]
}

fn raw_term() -> impl Strategy<Value = RawTerm> {
    prop_oneof![
        3 => Just(RawTerm::Sum),
        1 => Just(RawTerm::Min),
        1 => Just(RawTerm::Max),
        1 => Just(RawTerm::Count),
        1 => Just(RawTerm::Mean),
        1 => Just(RawTerm::Variance),
        1 => Just(RawTerm::First),
        1 => Just(RawTerm::Last),
        1 => Just(RawTerm::Histogram),
        1 => Just(RawTerm::ValueCounts),
        2 => any::<u8>().prop_map(RawTerm::Reduce),
        1 => raw_pred().prop_map(RawTerm::Any),
        1 => raw_pred().prop_map(RawTerm::All),
        1 => Just(RawTerm::ArgMin),
        1 => Just(RawTerm::ArgMax),
        1 => Just(RawTerm::Stats),
        4 => Just(RawTerm::Collect),
        1 => raw_pred().prop_map(RawTerm::CollectPred),
        1 => Just(RawTerm::CollectEnumerated),
        1 => any::<u8>().prop_map(RawTerm::CollectZipped),
        1 => raw_pred().prop_map(RawTerm::CollectBool),
    ]
}

fn raw_data() -> impl Strategy<Value = RawData> {
    (
        any::<u8>(),
        (any::<u8>(), any::<u16>()),
        any::<u8>(),
        any::<u64>(),
    )
        .prop_map(|(ty, len, dist, seed)| RawData {
            ty,
            len,
            dist,
            seed,
        })
}

/// Random pipelines of depth 1 to 8 (0–7 adaptors and a terminal).
pub fn raw_case() -> impl Strategy<Value = RawCase> {
    (
        raw_data(),
        raw_data(),
        raw_data(),
        prop::collection::vec(raw_step(), 0..=7),
        raw_term(),
    )
        .prop_map(|(source, p0, p1, steps, term)| RawCase {
            source,
            partners: [p0, p1],
            steps,
            term,
        })
}

/// The differential suite's strategy: typed cases.
pub fn case() -> impl Strategy<Value = Case> {
    raw_case().prop_map(|r| elaborate(&r))
}

// ------------------------------------------------------------- elaboration

/// The leaves an expression may use.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub x: DType,
    pub y: Option<DType>,
    pub index: bool,
}

impl Ctx {
    pub fn x(x: DType) -> Ctx {
        Ctx {
            x,
            y: None,
            index: false,
        }
    }
}

fn coerce(e: Ex, want: DType) -> Ex {
    if e.ty == want {
        e
    } else {
        Ex::new(want, ExKind::Cast(Box::new(e)))
    }
}

/// A literal of type `t`: mostly tame values, sometimes extremes.
pub fn literal(t: DType, sel: u8) -> Val {
    let rare = sel >= 228;
    let k = sel as usize;
    match t {
        DType::Bool => Val::Bool(sel & 1 == 1),
        DType::I32 => Val::I32(if rare {
            [i32::MIN, i32::MAX, i32::MIN + 1, -65536][k % 4]
        } else {
            [0, 1, 2, 3, -1, -2, 5, 7, 10, 100, -100, 16][k % 12]
        }),
        DType::I64 => Val::I64(if rare {
            [i64::MIN, i64::MAX, i64::MIN + 1, 1 << 40][k % 4]
        } else {
            [0, 1, 2, 3, -1, -2, 5, 7, 10, 100, -100, 16][k % 12]
        }),
        DType::U32 => Val::U32(if rare {
            [u32::MAX, u32::MAX - 1, 1 << 31, 65536][k % 4]
        } else {
            [0, 1, 2, 3, 4, 5, 7, 10, 16, 100, 255, 1000][k % 12]
        }),
        DType::U64 => Val::U64(if rare {
            [u64::MAX, u64::MAX - 1, 1 << 63, 1 << 40][k % 4]
        } else {
            [0, 1, 2, 3, 4, 5, 7, 10, 16, 100, 255, 1000][k % 12]
        }),
        DType::F32 => Val::F32(if rare {
            [
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                -0.0,
                f32::MAX,
                f32::MIN_POSITIVE,
                1e30,
                -1e-30,
            ][k % 8]
        } else {
            [
                0.5, 2.0, 1.0, -1.0, 3.0, 0.25, 10.0, -2.5, 0.001, 100.0, 0.0, 1.5,
            ][k % 12]
        }),
        DType::F64 => Val::F64(if rare {
            [
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                -0.0,
                f64::MAX,
                f64::MIN_POSITIVE,
                1e300,
                -1e-300,
            ][k % 8]
        } else {
            [
                0.5, 2.0, 1.0, -1.0, 3.0, 0.25, 10.0, -2.5, 0.001, 100.0, 0.0, 1.5,
            ][k % 12]
        }),
    }
}

fn lit_form(b: u8) -> LitForm {
    match b % 8 {
        0..=4 => LitForm::Inline,
        5 | 6 => LitForm::Param,
        _ => LitForm::Const,
    }
}

/// Types `r` at `want` within `ctx`.
pub fn elab(r: &RawEx, want: DType, ctx: Ctx) -> Ex {
    let numeric = want.is_numeric();
    // Numeric-only shapes asked for a bool: build at the stream type, then
    // `cast::<bool>()` (true when non-zero).
    let at = if numeric { want } else { ctx.x };
    let b = |e: &RawEx, t| Box::new(elab(e, t, ctx));
    match r {
        RawEx::Leaf(s) => {
            let mut leaves = vec![(ExKind::X, ctx.x)];
            if let Some(y) = ctx.y {
                leaves.push((ExKind::Y, y));
            }
            if ctx.index {
                leaves.push((ExKind::I, DType::U64));
            }
            let (k, t) = leaves.swap_remove(*s as usize % leaves.len());
            coerce(Ex::new(t, k), want)
        }
        RawEx::Lit(s, form) => Ex::new(want, ExKind::Lit(literal(want, *s), lit_form(*form))),
        RawEx::Un(o, a) => match want {
            DType::Bool => Ex::new(DType::Bool, ExKind::Un(Un::Not, b(a, DType::Bool))),
            DType::F32 | DType::F64 => {
                Ex::new(want, ExKind::Un(FLOAT_UN[*o as usize % 10], b(a, want)))
            }
            _ => match o % 5 {
                0 => Ex::new(want, ExKind::Un(Un::Neg, b(a, want))),
                1 => Ex::new(want, ExKind::Un(Un::BitNot, b(a, want))),
                2 | 3 => Ex::new(want, ExKind::Un(Un::Abs, b(a, want))),
                _ => {
                    let ft = if o & 0x80 == 0 {
                        DType::F64
                    } else {
                        DType::F32
                    };
                    let inner = Ex::new(ft, ExKind::Un(FLOAT_UN[(*o as usize / 5) % 10], b(a, ft)));
                    coerce(inner, want)
                }
            },
        },
        RawEx::Bin(o, x, y) => {
            if numeric {
                // Integers take a bit operation one time in four.
                let op = if want.is_int() && o % 4 == 3 {
                    BITS[(*o as usize / 4) % 5]
                } else {
                    ARITH[*o as usize % 7]
                };
                Ex::new(want, ExKind::Bin(op, b(x, want), b(y, want)))
            } else {
                let op = if o % 2 == 0 { Bin::And } else { Bin::Or };
                Ex::new(
                    DType::Bool,
                    ExKind::Bin(op, b(x, DType::Bool), b(y, DType::Bool)),
                )
            }
        }
        RawEx::Cmp(o, h, x, y) => {
            let t = match (h, ctx.y) {
                (0..=139, _) => ctx.x,
                (140..=189, Some(y)) if y.is_numeric() => y,
                _ => NUMERIC[*h as usize % 6],
            };
            let c = Ex::new(
                DType::Bool,
                ExKind::Cmp(CMPS[*o as usize % 6], b(x, t), b(y, t)),
            );
            coerce(c, want)
        }
        RawEx::Select(c, x, y) => Ex::new(
            want,
            ExKind::Select(b(c, DType::Bool), b(x, want), b(y, want)),
        ),
        RawEx::Cast(h, a) => {
            let from = DType::ALL[*h as usize % 7];
            if from == want {
                elab(a, want, ctx)
            } else {
                Ex::new(want, ExKind::Cast(b(a, from)))
            }
        }
        RawEx::MulAdd(x, y, z) => coerce(
            Ex::new(at, ExKind::MulAdd(b(x, at), b(y, at), b(z, at))),
            want,
        ),
        RawEx::Powi(n, a) => coerce(Ex::new(at, ExKind::Powi(b(a, at), *n as i32)), want),
        RawEx::Clamp(x, lo, hi) => coerce(
            Ex::new(at, ExKind::Clamp(b(x, at), b(lo, at), b(hi, at))),
            want,
        ),
    }
}

fn data(r: &RawData, dtype: DType, len: usize) -> DataSpec {
    DataSpec {
        dtype,
        len,
        dist: Dist::from_byte(r.dist),
        seed: r.seed,
    }
}

/// `take`/`skip` counts relative to the source length.
fn count(sel: u8, extra: u16, len: usize) -> usize {
    match sel % 12 {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => len / 2,
        4 => len.saturating_sub(1),
        5 => len,
        6 => len + 1,
        7 => BLOCK,
        8 => BLOCK + 1,
        9 => LEAF + 3,
        10 => usize::MAX,
        _ => extra as usize % (len + 1),
    }
}

/// Gives every node of a drawn case a type.
pub fn elaborate(r: &RawCase) -> Case {
    let src_ty = NUMERIC[r.source.ty as usize % 6];
    let len = length_from(r.source.len.0, r.source.len.1);
    let source = data(&r.source, src_ty, len);
    let partners: Vec<DataSpec> = r
        .partners
        .iter()
        .map(|p| {
            let ty = match p.ty {
                0..=127 => src_ty,
                240..=255 => DType::Bool,
                h => NUMERIC[h as usize % 6],
            };
            let plen = match p.len.0 % 8 {
                0..=3 => len,
                4 => len + 1,
                5 => len.saturating_sub(1),
                _ => length_from(p.len.0, p.len.1).min(len + 1000),
            };
            data(p, ty, plen)
        })
        .collect();
    let mut t = src_ty;
    let mut steps = Vec::new();
    for s in &r.steps {
        let step = match s {
            RawStep::Map(h, e) => {
                let out = if *h < 170 {
                    t
                } else {
                    NUMERIC[*h as usize % 6]
                };
                let e = elab(e, out, Ctx::x(t));
                t = out;
                Step::Map(e)
            }
            RawStep::Filter(e) => Step::Filter(elab(e, DType::Bool, Ctx::x(t))),
            RawStep::ZipMap(p, e) => {
                let k = *p as usize % 2;
                let ctx = Ctx {
                    x: t,
                    y: Some(partners[k].dtype),
                    index: false,
                };
                Step::ZipMap(k, elab(e, t, ctx))
            }
            RawStep::ZipFilter(p, e) => {
                let k = *p as usize % 2;
                let ctx = Ctx {
                    x: t,
                    y: Some(partners[k].dtype),
                    index: false,
                };
                Step::ZipFilter(k, elab(e, DType::Bool, ctx))
            }
            RawStep::EnumMap(e) => Step::EnumMap(elab(
                e,
                t,
                Ctx {
                    x: t,
                    y: None,
                    index: true,
                },
            )),
            RawStep::EnumFilter(e) => Step::EnumFilter(elab(
                e,
                DType::Bool,
                Ctx {
                    x: t,
                    y: None,
                    index: true,
                },
            )),
            RawStep::Take(a, b) => Step::Take(count(*a, *b, len)),
            RawStep::Skip(a, b) => Step::Skip(count(*a, *b, len)),
            RawStep::ScanSum(x) => Step::ScanSum { exclusive: *x },
            RawStep::Sort(d) => Step::Sort { desc: *d },
            RawStep::SemiJoin(p, a) => Step::SemiJoin {
                partner: *p as usize % 2,
                anti: *a,
            },
            RawStep::Join(p) => Step::Join {
                partner: *p as usize % 2,
            },
            RawStep::Scan(c, x) => Step::Scan {
                comb: COMBS[*c as usize % 6],
                exclusive: *x,
            },
        };
        steps.push(step);
    }
    let pred = |e: &RawEx| elab(e, DType::Bool, Ctx::x(t));
    let term = match &r.term {
        RawTerm::Sum => Term::Sum,
        RawTerm::Min => Term::Min,
        RawTerm::Max => Term::Max,
        RawTerm::Count => Term::Count,
        RawTerm::Mean => Term::Mean,
        RawTerm::Variance => Term::Variance,
        RawTerm::First => Term::First,
        RawTerm::Last => Term::Last,
        RawTerm::Histogram => Term::Histogram,
        RawTerm::ValueCounts => Term::ValueCounts,
        RawTerm::Reduce(c) => Term::Reduce(COMBS[*c as usize % 6]),
        RawTerm::Any(e) => Term::Any(pred(e)),
        RawTerm::All(e) => Term::All(pred(e)),
        RawTerm::ArgMin => Term::ArgMin,
        RawTerm::ArgMax => Term::ArgMax,
        RawTerm::Stats => Term::Stats,
        RawTerm::Collect => Term::Collect,
        RawTerm::CollectPred(e) => Term::CollectPred(pred(e)),
        RawTerm::CollectEnumerated => Term::CollectEnumerated,
        RawTerm::CollectZipped(p) => Term::CollectZipped(*p as usize % 2),
        RawTerm::CollectBool(e) => Term::CollectBool(pred(e)),
    };
    Case {
        source,
        partners,
        steps,
        term,
    }
}
