//! Compiling a [`Stage`] into a block program: a flat list of instructions
//! over typed block registers, run once per block of `BLOCK` positions.
//!
//! Compilation validates everything the executor relies on (types, slots),
//! so running a compiled program cannot panic. It reads the plan only.

use super::exec::{identity_lanes, Identity, Lanes};
use super::lanes::dtype_index;
use crate::expr::{BinaryOp, DType, ExprArena, Node, UnaryOp, Value};
use crate::plan::bins::{bin_values, uniform_values, BinUniforms, BinValues};
use crate::plan::{AggKind, Aggregate, Combine, PhysicalPlan, RangeOp, ScanOp, Stage, Terminal};
use crate::types::{Fault, PlanError};
use smallvec::SmallVec;
use std::fmt;

/// Where an instruction operand comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    /// A block register of the operand's type.
    Reg(u16),
    /// Input slot `s`, read in place from the input column.
    Input(u16),
    /// A value computed once per run from parameters and constants (the
    /// node with this index); used as a scalar operand, never splatted.
    Uniform(u32),
}

/// One block instruction: `out[i] = f(operands[i])` for every lane `i`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) enum Instr {
    /// `out[i] = block start + i + index offset of enumerate slot` (`u64`).
    Iota { slot: u16, out: u16 },
    /// A unary operation on `ty`.
    Unary {
        op: UnaryOp,
        ty: DType,
        a: Operand,
        out: u16,
    },
    /// A binary operation on operands of type `ty` (result `bool` for
    /// comparisons).
    Binary {
        op: BinaryOp,
        ty: DType,
        a: Operand,
        b: Operand,
        out: u16,
    },
    /// `c ? a : b` on `ty`.
    Select {
        ty: DType,
        c: Operand,
        a: Operand,
        b: Operand,
        out: u16,
    },
    /// `a * b + c` on `ty`, fused for floats.
    MulAdd {
        ty: DType,
        a: Operand,
        b: Operand,
        c: Operand,
        out: u16,
    },
    /// `a as to`.
    Cast {
        from: DType,
        to: DType,
        a: Operand,
        out: u16,
    },
    /// `a^n` by the reference multiply sequence.
    Powi {
        ty: DType,
        a: Operand,
        n: i32,
        out: u16,
    },
    /// `(a op1 b) op2 c` on a float type, each operation rounded as if
    /// alone (never an FMA): an arithmetic operation whose result only the
    /// next one reads, fused into it, so that a block makes one pass fewer
    /// ([`chain_binaries`]; `sqrt(x) * 3 - x` is two passes, not three).
    Chain {
        op1: BinaryOp,
        op2: ChainOp,
        ty: DType,
        a: Operand,
        b: Operand,
        c: Operand,
        out: u16,
    },
}

/// The outer operation of an [`Instr::Chain`], `t` being the inner one's
/// result.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum ChainOp {
    /// `t + c`.
    Add,
    /// `t - c`.
    Sub,
    /// `t * c`.
    Mul,
    /// `c - t`.
    SubFrom,
}

impl ChainOp {
    /// The outer operation `t op c` (`t_first`) or `c op t` as a chain's.
    fn of(op: BinaryOp, t_first: bool) -> Option<ChainOp> {
        Some(match (op, t_first) {
            (BinaryOp::Add, _) => ChainOp::Add,
            (BinaryOp::Mul, _) => ChainOp::Mul,
            (BinaryOp::Sub, true) => ChainOp::Sub,
            (BinaryOp::Sub, false) => ChainOp::SubFrom,
            _ => return None,
        })
    }
}

/// The operands an instruction reads.
fn reads(i: &Instr) -> SmallVec<[Operand; 3]> {
    match *i {
        Instr::Iota { .. } => SmallVec::new(),
        Instr::Unary { a, .. } | Instr::Cast { a, .. } | Instr::Powi { a, .. } => {
            smallvec::smallvec![a]
        }
        Instr::Binary { a, b, .. } => smallvec::smallvec![a, b],
        Instr::Select { c, a, b, .. } => smallvec::smallvec![c, a, b],
        Instr::MulAdd { a, b, c, .. } | Instr::Chain { a, b, c, .. } => {
            smallvec::smallvec![a, b, c]
        }
    }
}

/// Whether register `t` of type `ty` is read by `later` (in order) before
/// one of them writes it again, or by `keep` (the terminal) when none does.
fn live_after(later: &[Instr], t: Operand, ty: DType, keep: &[Operand]) -> bool {
    for l in later {
        if reads(l).contains(&t) {
            return true;
        }
        if instr_out(l).is_some_and(|(out, oty)| Operand::Reg(out) == t && oty == ty) {
            return false;
        }
    }
    keep.contains(&t)
}

/// Fuses each float `t = a op1 k` (`op1` one of `+ - *`, `a` a block, `k`
/// a uniform: `x * 3`, `x + 1`) whose result is read by the next
/// instruction only, as one operand of a `+ - *` on the same type, into
/// that instruction ([`Instr::Chain`]). `keep`: registers read after the
/// instructions (the terminal's columns). Registers are compared by
/// number whatever their type, which can only keep a pair apart, never
/// fuse one wrongly.
fn chain_binaries(instrs: &mut Vec<Instr>, keep: &[Operand]) {
    let mut i = 0;
    while i + 1 < instrs.len() {
        let fused = match (instrs[i], instrs[i + 1]) {
            (
                Instr::Binary {
                    op: op1 @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul),
                    ty,
                    a,
                    b,
                    out: t,
                },
                Instr::Binary {
                    op: op2,
                    ty: ty2,
                    a: x,
                    b: y,
                    out,
                },
            ) if ty.is_float()
                && ty2 == ty
                && !matches!(a, Operand::Uniform(_))
                && matches!(b, Operand::Uniform(_)) =>
            {
                let t = Operand::Reg(t);
                let outer = match (x == t, y == t) {
                    (true, false) => ChainOp::of(op2, true).map(|o| (o, y)),
                    (false, true) => ChainOp::of(op2, false).map(|o| (o, x)),
                    _ => None,
                };
                // The chain may write its block operand `a` in place
                // (`Exec::chain`), not the other one.
                let aliased = outer.is_some_and(|(_, c)| c == Operand::Reg(out));
                let read_later = live_after(&instrs[i + 2..], t, ty, keep);
                match outer {
                    Some((op2, c)) if !aliased && !read_later => Some(Instr::Chain {
                        op1,
                        op2,
                        ty,
                        a,
                        b,
                        c,
                        out,
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        match fused {
            Some(f) => {
                instrs[i] = f;
                instrs.remove(i + 1);
            }
            None => i += 1,
        }
    }
}

/// A column the terminal reads: a register or an input slot, never a
/// uniform (uniform columns get a register filled once per run).
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Col {
    pub(crate) ty: DType,
    pub(crate) src: Operand,
}

/// The last operation of a summed column, folded by the sum itself.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Fused {
    pub(crate) op: BinaryOp,
    pub(crate) a: Operand,
    pub(crate) b: Operand,
    /// The stage's predicate, when the sum evaluates it itself.
    pub(crate) keep: Option<FusedCmp>,
    /// When set, `a` is this operation's result, computed in the fold too
    /// (`b` is then a uniform and the stage has no predicate): `x * 2 + 1`
    /// becomes one pass over `x` instead of a multiply pass and a sum pass.
    /// (`a` then holds the inner operation's first operand.)
    pub(crate) inner: Option<FusedInner>,
}

/// The operation under a fused sum's own (see [`Fused::inner`]): `a op b`
/// with `a` a block and `b` a block or a uniform.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct FusedInner {
    pub(crate) op: BinaryOp,
    pub(crate) a: Operand,
    pub(crate) b: Operand,
}

/// A predicate `x op k` (`op` one of `<`, `<=`, `>`, `>=`; `x` a column of
/// the sum's type, `k` a uniform) evaluated by a fused sum as it folds,
/// instead of by a compare instruction writing a mask register: a
/// memory-bound filtered sum then reads its input in one pass, not two.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct FusedCmp {
    pub(crate) op: BinaryOp,
    pub(crate) x: Operand,
    pub(crate) k: Operand,
}

/// One aggregate of a reduce terminal.
#[derive(Clone, Debug)]
pub(crate) struct AggProgram {
    pub(crate) kind: AggKind,
    /// The aggregated column (`None` for `Count`); when `fused` is set only
    /// its type is meaningful.
    pub(crate) col: Option<Col>,
    /// The column is `a op b`, computed inside the fold (no register).
    pub(crate) fused: Option<Fused>,
    /// The column is a cast of `col.src`, whose values are of this type,
    /// to `col.ty` (`f64`), converted inside the sum's fold (no register):
    /// the `f64` sum of a `mean` or of `stats`.
    pub(crate) cast: Option<DType>,
    /// What a leaf's accumulator starts from: typed at compile time, so a
    /// run cannot meet an aggregate it has no lanes for (a `bool` sum).
    pub(crate) init: AccInit,
}

/// The starting state of one aggregate's accumulator in a leaf.
#[derive(Clone, Debug)]
pub(crate) enum AccInit {
    /// Lanes of the numeric identity (0, the type's top, its bottom).
    Sum(Lanes),
    Min(Lanes),
    Max(Lanes),
    Count,
    Any,
    All,
    Arg {
        max: bool,
    },
    /// The user's identity, evaluated per run (it may read parameters).
    Custom(Combine),
    /// No values yet.
    Moments,
    /// No survivor yet (`first`, or `last`).
    Pick {
        last: bool,
    },
}

impl AccInit {
    /// The start of aggregate `kind` over a column of `ty`; an error for a
    /// sum, min or max of a type without arithmetic lanes.
    fn of(kind: &AggKind, ty: DType) -> Result<AccInit, Fault> {
        let lanes = |id: Identity| {
            identity_lanes(ty, id).ok_or(Fault::AggregateType {
                agg: kind.name(),
                ty,
            })
        };
        Ok(match kind {
            AggKind::Sum => AccInit::Sum(lanes(Identity::Zero)?),
            AggKind::Min => AccInit::Min(lanes(Identity::Min)?),
            AggKind::Max => AccInit::Max(lanes(Identity::Max)?),
            AggKind::Count => AccInit::Count,
            AggKind::Any => AccInit::Any,
            AggKind::All => AccInit::All,
            AggKind::ArgMin => AccInit::Arg { max: false },
            AggKind::ArgMax => AccInit::Arg { max: true },
            AggKind::Custom(c) => AccInit::Custom(c.clone()),
            AggKind::M2 => {
                lanes(Identity::Zero)?;
                AccInit::Moments
            }
            AggKind::First => AccInit::Pick { last: false },
            AggKind::Last => AccInit::Pick { last: true },
        })
    }
}

/// How a compiled stage ends.
#[derive(Clone, Debug)]
pub(crate) enum TermProgram {
    Reduce(Vec<AggProgram>),
    Collect(Vec<Col>),
    Scan {
        col: Col,
        op: Box<ScanOp>,
        exclusive: bool,
    },
    /// Counts per value of a `u32` key column, `keys` of them; with
    /// `bins`, `key` is the float column a histogram's key is computed
    /// from, by one kernel per block.
    CountByKey {
        key: Col,
        keys: u32,
        bins: Option<Bins>,
    },
}

/// The uniforms of a histogram's key (`plan::bins::BinValues`) as
/// operands: the key is computed by one kernel (`kernels::bin_keys`)
/// instead of a dozen block instructions, each a pass over the block. The
/// kernel evaluates the same expression, rounding each operation as
/// written, so the keys are those of the instructions it replaces.
pub(crate) type Bins = BinUniforms<Operand>;

/// A register filled once per run with a uniform value.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct SplatReg {
    pub(crate) node: u32,
    pub(crate) ty: DType,
    pub(crate) reg: u16,
}

/// One stage compiled into a block program.
#[derive(Clone, Debug)]
pub(crate) struct StageProgram {
    /// Nodes evaluated once per run (parameters, constants and everything
    /// computed only from them), in evaluation order.
    pub(crate) uniforms: Vec<u32>,
    /// The per-block instructions, in order.
    pub(crate) instrs: Vec<Instr>,
    /// Registers per dtype (indexed by `dtype_index`).
    pub(crate) regs: [u16; 7],
    /// Registers holding uniform terminal columns.
    pub(crate) splats: Vec<SplatReg>,
    /// The mask of surviving positions.
    pub(crate) predicate: Option<Col>,
    pub(crate) terminal: TermProgram,
    /// The dtype each input slot is read as (`None`: not read).
    pub(crate) input_types: SmallVec<[Option<DType>; 4]>,
    /// Parameter slots the stage reads: `params.len()` must be at least this.
    pub(crate) params_needed: usize,
    /// For a filter+collect stage: the same stage reduced to `count`, which
    /// the parallel executor runs first to place every leaf's survivors.
    pub(crate) count_pass: Option<Box<StageProgram>>,
    /// A collect without a predicate whose one column is the register the
    /// last instruction writes: that instruction then writes each block
    /// straight into the result column (see `StageRun::store_range`).
    pub(crate) direct_store: bool,
}

/// A compiled plan: one block program per stage. This is the artifact both
/// `cpu-simd` and `cpu-parallel` cache on the `CompiledPlan`.
#[derive(Clone, Debug)]
pub struct BlockProgram {
    pub(crate) stages: Vec<StageProgram>,
}

/// What one pass of a block instruction costs against the others, for the
/// cost model (`StageProgram::passes`): a block operation (read its
/// operands from L1, write a register) is 1. A fold reads a register and
/// writes nothing (half); a fused sum evaluates its operations in the fold's
/// registers (half, and a quarter more per operation it fuses); a square
/// root is two (its instruction's throughput); a float minimum or maximum
/// one (a compare, a NaN check and a select per lane: it took 1.4-1.5x a
/// plain sum's time at 10^5 and 1.1-1.2x at 10^7 in
/// `examples/aggregate_kernels`; it was two when LLVM compiled the fold
/// into gathers, 2-5x a sum); a pick of the first or last survivor four.
/// Fitted to this backend's runs (`selector_eval`), not measured: the
/// history corrects them.
mod pass_cost {
    pub(super) const FOLD: f64 = 0.5;
    pub(super) const FLOAT_MIN_MAX: f64 = 1.0;
    pub(super) const PICK: f64 = 4.0;
    pub(super) const FUSED_OP: f64 = 0.25;
    pub(super) const STORE: f64 = 0.5;
    pub(super) const SQRT: f64 = 2.0;
    pub(super) const MOMENTS: f64 = 1.5;
    pub(super) const SCALAR: f64 = 2.0;
}

impl StageProgram {
    /// Passes over a block per position, each a block operation's worth of
    /// work (see `pass_cost`): the instructions, and the terminal's folds or
    /// stores. What the cost model prices `cpu-simd` and `cpu-parallel`'s
    /// element work by, in place of the expression's operations, which this
    /// program fuses (`x * 2 + 1` summed is one fold, not three
    /// operations: priced as those, a sum of 10^5 was estimated at 3-4x
    /// its time). `None` for a count per key, which the model prices from
    /// its key kernel.
    pub(crate) fn passes(&self) -> Option<f64> {
        use pass_cost::*;
        let mut p = 0.0;
        for i in &self.instrs {
            p += match i {
                Instr::Unary { op, .. } if *op == UnaryOp::Sqrt => SQRT,
                // Transcendentals are priced apart, per operation.
                Instr::Unary { op, .. } if op.is_transcendental() => 0.0,
                Instr::Powi { n, .. } => (n.unsigned_abs().max(1) as f64).log2().ceil().max(1.0),
                _ => 1.0,
            };
        }
        p += match &self.terminal {
            TermProgram::Reduce(aggs) => aggs
                .iter()
                .map(|a| {
                    let fused = a.fused.map_or(0.0, |f| {
                        FUSED_OP
                            * (1.0 + f.inner.is_some() as u8 as f64 + f.keep.is_some() as u8 as f64)
                    }) + if a.cast.is_some() { FUSED_OP } else { 0.0 };
                    fused
                        + match a.init {
                            AccInit::Moments => MOMENTS,
                            AccInit::Custom(_) | AccInit::Arg { .. } => SCALAR,
                            AccInit::Pick { .. } => PICK,
                            AccInit::Min(_) | AccInit::Max(_)
                                if a.col.is_some_and(|c| c.ty.is_float()) =>
                            {
                                FLOAT_MIN_MAX
                            }
                            _ => FOLD,
                        }
                })
                .sum(),
            TermProgram::Collect(cols) if self.direct_store => STORE * (cols.len() as f64 - 1.0),
            TermProgram::Collect(cols) => STORE * cols.len() as f64,
            TermProgram::Scan { .. } => STORE,
            TermProgram::CountByKey { .. } => return None,
        };
        Some(p)
    }
}

impl BlockProgram {
    /// Compiles every stage of `plan`, validating what execution relies on.
    pub fn compile(plan: &PhysicalPlan) -> Result<BlockProgram, PlanError> {
        if plan.stages.is_empty() {
            return Err(PlanError::NoStage);
        }
        let stages = plan
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if i + 1 < plan.stages.len() && matches!(s.terminal, Terminal::Reduce(_)) {
                    return Err(Fault::ReduceNotLast.at(i));
                }
                compile_stage(s).map_err(|f| f.at(i))
            })
            .collect::<Result<Vec<_>, PlanError>>()?;
        Ok(BlockProgram { stages })
    }

    /// Block registers of the largest stage, in bytes (per executing thread).
    pub fn register_bytes(&self) -> u64 {
        self.stages
            .iter()
            .map(|s| super::lanes::Regs::bytes(&s.regs))
            .max()
            .unwrap_or(0)
    }
}

struct Alloc {
    counts: [u16; 7],
    free: [Vec<u16>; 7],
}

impl Alloc {
    fn fresh(&mut self, ty: DType) -> u16 {
        let c = &mut self.counts[dtype_index(ty)];
        *c += 1;
        *c - 1
    }

    fn take(&mut self, ty: DType) -> u16 {
        match self.free[dtype_index(ty)].pop() {
            Some(r) => r,
            None => self.fresh(ty),
        }
    }

    fn release(&mut self, ty: DType, r: u16) {
        // Keep the free list sorted high to low so low registers are reused
        // first: the block working set stays as small as possible.
        let f = &mut self.free[dtype_index(ty)];
        f.push(r);
        f.sort_unstable_by(|a, b| b.cmp(a));
    }
}

fn check_combine(c: &Combine, ty: DType, params: &mut usize) -> Result<(), Fault> {
    c.program
        .verify()
        .map_err(|e| Fault::Combine(e.to_string()))?;
    if c.output.index() >= c.program.len() || c.program.ty(c.output) != ty {
        return Err(Fault::Combine(format!("its output is not a {ty}")));
    }
    for (_, n) in c.program.iter() {
        match n.node {
            Node::Input(s) if s > 1 || n.ty != ty => {
                return Err(Fault::Combine(format!("it reads input.{s} as {}", n.ty)))
            }
            Node::Index(_) => return Err(Fault::Combine("it reads an index".into())),
            Node::Param(p) => *params = (*params).max(p as usize + 1),
            _ => {}
        }
    }
    *params = (*params).max(c.identity as usize + 1);
    Ok(())
}

/// An operation `x op y` folded into its reader instead of computed into a
/// register.
type FoldedOp = (BinaryOp, Value, Value);

/// Compiles one stage, in phases: check the stage and find the values its
/// terminal and predicate read ([`roots`]); mark what depends on no
/// position ([`uniform_values`]); take out what terminal fusion folds
/// ([`Fusion::find`]); keep what is live ([`liveness`]); allocate registers
/// and emit the instructions ([`emit`]); describe the terminal over them
/// ([`terminal_program`]).
pub(crate) fn compile_stage(stage: &Stage) -> Result<StageProgram, Fault> {
    let prog: &ExprArena = &stage.program;
    prog.verify()
        .map_err(|e| Fault::Expressions(e.to_string()))?;
    let mut params_needed = range_params(stage)?;
    let all_roots = roots(stage, &mut params_needed)?;
    let uniform = uniform_values(prog);
    let fusion = Fusion::find(stage, &all_roots, &uniform);
    let (roots, live_roots) = fusion.roots(stage, &all_roots);
    let (needed, last_use) = liveness(prog, &live_roots, &uniform);
    let code = emit(
        stage,
        &roots,
        &needed,
        &uniform,
        &last_use,
        &mut params_needed,
    )?;
    let predicate = match fusion.keep {
        Some(_) => None,
        None => stage.predicate.map(|p| code.col(prog, p)).transpose()?,
    };
    let terminal = terminal_program(stage, &fusion, &code)?;
    let mut code = code;
    if let (TermProgram::Collect(cols), None) = (&terminal, &predicate) {
        let keep: SmallVec<[Operand; 4]> = cols
            .iter()
            .map(|c| c.src)
            .chain(code.splats.iter().map(|s| Operand::Reg(s.reg)))
            .collect();
        chain_binaries(&mut code.instrs, &keep);
    }
    let count_pass = match (&stage.terminal, stage.predicate) {
        (
            Terminal::Collect(_)
            | Terminal::Sort { .. }
            | Terminal::Group { .. }
            | Terminal::Join { .. },
            Some(_),
        ) => {
            let counting = Stage {
                terminal: Terminal::Reduce(smallvec::smallvec![Aggregate {
                    kind: AggKind::Count,
                    column: None,
                }]),
                ..stage.clone()
            };
            Some(Box::new(compile_stage(&counting)?))
        }
        _ => None,
    };
    let direct_store = match (&terminal, code.instrs.last(), &predicate) {
        (TermProgram::Collect(cols), Some(last), None) => match instr_out(last) {
            Some((out, ty)) => {
                matches!(cols.as_slice(), [c] if c.src == Operand::Reg(out) && c.ty == ty)
            }
            None => false,
        },
        _ => false,
    };
    Ok(StageProgram {
        direct_store,
        uniforms: code.uniforms,
        instrs: code.instrs,
        regs: code.regs,
        splats: code.splats,
        predicate,
        terminal,
        input_types: code.input_types,
        params_needed,
        count_pass,
    })
}

/// Checks the stage's range operations; the parameters they read.
fn range_params(stage: &Stage) -> Result<usize, Fault> {
    let mut params_needed = 0usize;
    for op in &stage.range {
        match *op {
            RangeOp::Join(s) if s as usize >= stage.inputs.len() => {
                return Err(Fault::Dangling(format!("a join of input slot {s}")))
            }
            RangeOp::Enumerate(e) if e >= stage.enumerates => {
                return Err(Fault::Dangling(format!("enumerate slot {e}")))
            }
            RangeOp::Skip(p) | RangeOp::Take(p) => {
                params_needed = params_needed.max(p as usize + 1)
            }
            _ => {}
        }
    }
    Ok(params_needed)
}

/// The values the predicate and the terminal read, checked against what
/// each terminal accepts (raising `params_needed` for user combines).
fn roots(stage: &Stage, params_needed: &mut usize) -> Result<SmallVec<[Value; 8]>, Fault> {
    let prog = &stage.program;
    let in_range = |v: Value| -> Result<DType, Fault> {
        if v.index() < prog.len() {
            Ok(prog.ty(v))
        } else {
            Err(Fault::MissingValue(v.index() as u32))
        }
    };
    if stage.predicate.is_some() && matches!(stage.terminal, Terminal::Scan { .. }) {
        // Stages never carry one (a filter before a scan ends its own stage).
        return Err(Fault::PredicatedScan);
    }
    let mut roots: SmallVec<[Value; 8]> = SmallVec::new();
    if let Some(p) = stage.predicate {
        let ty = in_range(p)?;
        if ty != DType::Bool {
            return Err(Fault::PredicateNotBool {
                value: p.index() as u32,
                ty,
            });
        }
        roots.push(p);
    }
    match &stage.terminal {
        Terminal::Reduce(aggs) => {
            for Aggregate { kind, column } in aggs {
                if matches!(kind, AggKind::Count) {
                    continue;
                }
                let c = column.ok_or(Fault::AggregateColumn(kind.name()))?;
                let ty = in_range(c)?;
                let ok = match kind {
                    AggKind::Any | AggKind::All => ty == DType::Bool,
                    AggKind::First | AggKind::Last => true,
                    AggKind::Custom(comb) => {
                        check_combine(comb, ty, params_needed)?;
                        true
                    }
                    _ => ty.is_numeric(),
                };
                if !ok {
                    return Err(Fault::AggregateType {
                        agg: kind.name(),
                        ty,
                    });
                }
                roots.push(c);
            }
        }
        Terminal::Collect(cols) => {
            for &c in cols {
                in_range(c)?;
                roots.push(c);
            }
        }
        // A sort, a group or a join materializes its keys and columns
        // first.
        Terminal::Sort { .. } | Terminal::Group { .. } | Terminal::Join { .. } => {
            for c in stage.terminal.materialized() {
                in_range(c)?;
                roots.push(c);
            }
        }
        Terminal::Scan { column, op, .. } => {
            let ty = in_range(*column)?;
            match op {
                ScanOp::Sum if !ty.is_numeric() => return Err(Fault::ScanType(ty)),
                ScanOp::Sum => {}
                ScanOp::Custom(c) => check_combine(c, ty, params_needed)?,
            }
            roots.push(*column);
        }
        Terminal::CountByKey { key, .. } => {
            let ty = in_range(*key)?;
            if ty != DType::U32 {
                return Err(Fault::AggregateType {
                    agg: "count_by_key",
                    ty,
                });
            }
            roots.push(*key);
        }
    }
    Ok(roots)
}

/// What terminal fusion takes out of the instruction list (the module
/// doc's "Terminal fusion": passes over a block cost memory bandwidth).
struct Fusion {
    /// Per value: the float sum's, min's or max's column `x op y` that
    /// the fold computes itself.
    sum: Vec<Option<FoldedOp>>,
    /// Per value: the `p op q` under a fused `x op k` that the sum folds
    /// too.
    inner: Vec<Option<FoldedOp>>,
    /// The predicate `x cmp k` the fused sum evaluates itself.
    keep: Option<FoldedOp>,
    /// Per value: the `x` of an `f64` sum's column `x as f64` that the
    /// sum converts itself.
    cast: Vec<Option<Value>>,
    /// A count by a histogram's key, computed by one kernel from its
    /// float column.
    bins: Option<BinValues>,
}

impl Fusion {
    fn find(stage: &Stage, roots: &[Value], uniform: &[bool]) -> Fusion {
        let n = stage.program.len();
        if !matches!(stage.terminal, Terminal::Reduce(_)) {
            let bins = match stage.terminal {
                Terminal::CountByKey { key, .. } => bin_values(&stage.program, key, uniform),
                _ => None,
            };
            return Fusion {
                sum: vec![None; n],
                inner: vec![None; n],
                keep: None,
                cast: vec![None; n],
                bins,
            };
        }
        // Read by one reader only: the condition of every fusion case.
        let uses = value_uses(&stage.program, roots);
        let sum = fuse_sum_columns(stage, &uses, uniform);
        let keep = fused_predicate(stage, &sum, uniform, &uses);
        let inner = fuse_inner_operations(stage, &uses, uniform, &sum, keep.is_some());
        let cast = fuse_sum_casts(stage, &uses, uniform);
        Fusion {
            sum,
            inner,
            keep,
            cast,
            bins: None,
        }
    }

    /// The roots left to compute into registers, and the values that must
    /// be live at the end: those roots, with fused columns and a fused
    /// predicate replaced by their operands.
    fn roots(
        &self,
        stage: &Stage,
        roots: &[Value],
    ) -> (SmallVec<[Value; 8]>, SmallVec<[Value; 8]>) {
        let bins = |r: Value| match (&stage.terminal, self.bins) {
            (Terminal::CountByKey { key, .. }, Some(b)) if *key == r => b.v,
            _ => r,
        };
        let unfused: SmallVec<[Value; 8]> = roots
            .iter()
            .copied()
            .filter(|r| self.sum[r.index()].is_none() && self.cast[r.index()].is_none())
            .filter(|r| self.keep.is_none() || Some(*r) != stage.predicate)
            .map(bins)
            .collect();
        let mut live = unfused.clone();
        live.extend(self.bins.iter().flat_map(|b| b.uniforms.all()));
        live.extend(roots.iter().filter_map(|r| self.cast[r.index()]));
        for (x, y) in roots
            .iter()
            .filter_map(|r| self.sum[r.index()].map(|(_, x, y)| (x, y)))
            .chain(self.keep.map(|(_, x, k)| (x, k)))
        {
            match self.inner[x.index()] {
                Some((_, p, q)) => live.extend([p, q, y]),
                None => live.extend([x, y]),
            }
        }
        (unfused, live)
    }
}

/// A float sum, min or max whose column is an add, sub or mul read by
/// nothing else folds that operation itself, saving a pass over the block
/// (`sum(x * y)`, `max(x * x)`).
fn fuse_sum_columns(stage: &Stage, uses: &[usize], uniform: &[bool]) -> Vec<Option<FoldedOp>> {
    let prog = &stage.program;
    let mut fused = vec![None; prog.len()];
    let Terminal::Reduce(aggs) = &stage.terminal else {
        return fused;
    };
    for a in aggs {
        if let (AggKind::Sum | AggKind::Min | AggKind::Max, Some(c)) = (&a.kind, a.column) {
            let d = prog.get(c);
            if let Node::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), x, y) = d.node
            {
                if d.ty.is_float() && !uniform[c.index()] && uses[c.index()] == 1 {
                    fused[c.index()] = Some((op, x, y));
                }
            }
        }
    }
    fused
}

/// An `f64` sum whose column is a cast of a block of another numeric type,
/// read by nothing else (the sum of a `mean` or `stats` of `f32` or
/// integers), converts each value in its fold: the cast's register
/// (8 KiB a block) is neither written nor read again.
fn fuse_sum_casts(stage: &Stage, uses: &[usize], uniform: &[bool]) -> Vec<Option<Value>> {
    let prog = &stage.program;
    let mut cast = vec![None; prog.len()];
    let Terminal::Reduce(aggs) = &stage.terminal else {
        return cast;
    };
    for a in aggs {
        if let (AggKind::Sum, Some(c)) = (&a.kind, a.column) {
            let d = prog.get(c);
            if let Node::Cast(x) = d.node {
                if d.ty == DType::F64
                    && prog.ty(x).is_numeric()
                    && !uniform[c.index()]
                    && !uniform[x.index()]
                    && uses[c.index()] == 1
                {
                    cast[c.index()] = Some(x);
                }
            }
        }
    }
    cast
}

/// Nested fusion: a fused sum of `x op k` (`k` uniform) whose `x` is an
/// add, sub or mul of a block and anything, read by nothing else, folds
/// that operation too (`sum(x * 2 + 1)` reads its input in one pass).
/// Under a mask register (a predicate the sum does not evaluate itself,
/// such as the validity of a column with nulls), not beside a fused
/// predicate (`keep`): that would multiply the fold's variants again.
fn fuse_inner_operations(
    stage: &Stage,
    uses: &[usize],
    uniform: &[bool],
    fused: &[Option<FoldedOp>],
    keep: bool,
) -> Vec<Option<FoldedOp>> {
    let prog = &stage.program;
    let mut inner = vec![None; prog.len()];
    let Terminal::Reduce(aggs) = &stage.terminal else {
        return inner;
    };
    if keep {
        return inner;
    }
    let sums = aggs
        .iter()
        .filter(|a| a.kind == AggKind::Sum)
        .filter_map(|a| fused[a.column?.index()]);
    for (_, x, k) in sums {
        let d = prog.get(x);
        if let Node::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), p, q) = d.node {
            if uniform[k.index()]
                && !uniform[p.index()]
                && uses[x.index()] == 1
                && prog.ty(p) == d.ty
            {
                inner[x.index()] = Some((op, p, q));
            }
        }
    }
    inner
}

/// Which values must be computed (what the live roots read, transitively),
/// and the last instruction reading each one (roots live to the end).
fn liveness(prog: &ExprArena, live_roots: &[Value], uniform: &[bool]) -> (Vec<bool>, Vec<usize>) {
    let n = prog.len();
    let mut needed = vec![false; n];
    for r in live_roots {
        needed[r.index()] = true;
    }
    for i in (0..n).rev() {
        if needed[i] {
            for o in prog.get(Value::new(i)).node.operands() {
                needed[o.index()] = true;
            }
        }
    }
    let mut last_use = vec![0usize; n];
    for (v, d) in prog.iter() {
        if needed[v.index()] && !uniform[v.index()] {
            for o in d.node.operands() {
                last_use[o.index()] = last_use[o.index()].max(v.index());
            }
        }
    }
    for r in live_roots {
        last_use[r.index()] = usize::MAX;
    }
    (needed, last_use)
}

/// The emitted instructions and where every value can be read.
struct Code {
    instrs: Vec<Instr>,
    /// Per value: its register, input or uniform once emitted.
    operand: Vec<Option<Operand>>,
    /// Per uniform root: the register it is splat into.
    root_src: Vec<Option<Operand>>,
    uniforms: Vec<u32>,
    splats: Vec<SplatReg>,
    input_types: SmallVec<[Option<DType>; 4]>,
    regs: [u16; 7],
}

impl Code {
    fn operand(&self, v: Value) -> Result<Operand, Fault> {
        self.operand[v.index()].ok_or(Fault::NotCompiled(v.index() as u32))
    }

    /// Where a root column is read.
    fn col(&self, prog: &ExprArena, v: Value) -> Result<Col, Fault> {
        let src = self.root_src[v.index()]
            .or(self.operand[v.index()])
            .ok_or(Fault::NotCompiled(v.index() as u32))?;
        Ok(Col {
            ty: prog.ty(v),
            src,
        })
    }
}

/// Allocates registers by liveness and emits one instruction per needed
/// value that is not uniform (uniform ones become scalar operands).
fn emit(
    stage: &Stage,
    roots: &[Value],
    needed: &[bool],
    uniform: &[bool],
    last_use: &[usize],
    params_needed: &mut usize,
) -> Result<Code, Fault> {
    let prog = &stage.program;
    let n = prog.len();
    let mut alloc = Alloc {
        counts: [0; 7],
        free: Default::default(),
    };
    let mut operand: Vec<Option<Operand>> = vec![None; n];
    let mut uniforms = Vec::new();
    let mut input_types: SmallVec<[Option<DType>; 4]> =
        smallvec::smallvec![None; stage.inputs.len()];

    // Uniform roots get registers of their own first, so that no instruction
    // ever reuses (and overwrites) them.
    let mut splats: Vec<SplatReg> = Vec::new();
    let mut root_src: Vec<Option<Operand>> = vec![None; n];
    for r in roots {
        if uniform[r.index()] && root_src[r.index()].is_none() {
            let ty = prog.ty(*r);
            let reg = alloc.fresh(ty);
            splats.push(SplatReg {
                node: r.index() as u32,
                ty,
                reg,
            });
            root_src[r.index()] = Some(Operand::Reg(reg));
        }
    }

    let mut instrs = Vec::new();
    for (v, d) in prog.iter() {
        let i = v.index();
        if !needed[i] {
            continue;
        }
        if uniform[i] {
            if let Node::Param(p) = d.node {
                *params_needed = (*params_needed).max(p as usize + 1);
            }
            uniforms.push(i as u32);
            operand[i] = Some(Operand::Uniform(i as u32));
            continue;
        }
        let op = |o: Value| operand[o.index()].ok_or(Fault::NotCompiled(o.index() as u32));
        let instr = match d.node {
            Node::Input(s) => {
                let slot = input_types
                    .get_mut(s as usize)
                    .ok_or_else(|| Fault::Dangling(format!("input slot {s}")))?;
                match slot {
                    Some(t) if *t != d.ty => {
                        return Err(Fault::SlotTypes {
                            slot: s,
                            first: *t,
                            second: d.ty,
                        })
                    }
                    _ => *slot = Some(d.ty),
                }
                operand[i] = Some(Operand::Input(s));
                continue;
            }
            Node::Index(e) => {
                if e >= stage.enumerates {
                    return Err(Fault::Dangling(format!("enumerate slot {e}")));
                }
                Instr::Iota { slot: e, out: 0 }
            }
            // Every parameter and constant is uniform (handled above).
            Node::Param(_) | Node::Const(_) => return Err(Fault::NotCompiled(i as u32)),
            Node::Unary(o, a) => Instr::Unary {
                op: o,
                ty: prog.ty(a),
                a: op(a)?,
                out: 0,
            },
            Node::Binary(o, a, b) => Instr::Binary {
                op: o,
                ty: prog.ty(a),
                a: op(a)?,
                b: op(b)?,
                out: 0,
            },
            Node::Select(c, a, b) => Instr::Select {
                ty: d.ty,
                c: op(c)?,
                a: op(a)?,
                b: op(b)?,
                out: 0,
            },
            Node::MulAdd(a, b, c) => Instr::MulAdd {
                ty: d.ty,
                a: op(a)?,
                b: op(b)?,
                c: op(c)?,
                out: 0,
            },
            Node::Cast(a) => Instr::Cast {
                from: prog.ty(a),
                to: d.ty,
                a: op(a)?,
                out: 0,
            },
            Node::Powi(a, k) => Instr::Powi {
                ty: d.ty,
                a: op(a)?,
                n: k,
                out: 0,
            },
        };
        // Allocate the output before releasing dying operands: an
        // instruction never writes a register it reads.
        let out = alloc.take(d.ty);
        instrs.push(with_out(instr, out));
        operand[i] = Some(Operand::Reg(out));
        let mut ops = d.node.operands();
        ops.sort_unstable();
        ops.dedup();
        for o in ops {
            if last_use[o.index()] == i {
                if let Some(Operand::Reg(r)) = operand[o.index()] {
                    alloc.release(prog.ty(o), r);
                }
            }
        }
    }
    Ok(Code {
        instrs,
        operand,
        root_src,
        uniforms,
        splats,
        input_types,
        regs: alloc.counts,
    })
}

/// The terminal over the emitted code: a fused sum reads its folded
/// operands (and evaluates a fused predicate), everything else its column.
fn terminal_program(stage: &Stage, fusion: &Fusion, code: &Code) -> Result<TermProgram, Fault> {
    let prog = &stage.program;
    let keep = match fusion.keep {
        Some((op, x, k)) => Some(FusedCmp {
            op,
            x: code.operand(x)?,
            k: code.operand(k)?,
        }),
        None => None,
    };
    Ok(match &stage.terminal {
        Terminal::Reduce(aggs) => TermProgram::Reduce(
            aggs.iter()
                .map(|a| {
                    let f = a.column.and_then(|c| fusion.sum[c.index()].map(|f| (c, f)));
                    if let (Some((c, (op, x, y))), AggKind::Sum | AggKind::Min | AggKind::Max) =
                        (f, &a.kind)
                    {
                        let inner = match fusion.inner[x.index()] {
                            Some((op, p, q)) => Some(FusedInner {
                                op,
                                a: code.operand(p)?,
                                b: code.operand(q)?,
                            }),
                            None => None,
                        };
                        let a_ = match inner {
                            Some(h) => h.a,
                            None => code.operand(x)?,
                        };
                        let b_ = code.operand(y)?;
                        return Ok(AggProgram {
                            kind: a.kind.clone(),
                            init: AccInit::of(&a.kind, prog.ty(c))?,
                            col: Some(Col {
                                ty: prog.ty(c),
                                src: a_,
                            }),
                            fused: Some(Fused {
                                op,
                                a: a_,
                                b: b_,
                                keep,
                                inner,
                            }),
                            cast: None,
                        });
                    }
                    let cast = a
                        .column
                        .and_then(|c| fusion.cast[c.index()].map(|x| (c, x)));
                    if let (Some((c, x)), AggKind::Sum) = (cast, &a.kind) {
                        return Ok(AggProgram {
                            kind: a.kind.clone(),
                            init: AccInit::of(&a.kind, prog.ty(c))?,
                            col: Some(Col {
                                ty: prog.ty(c),
                                src: code.operand(x)?,
                            }),
                            fused: None,
                            cast: Some(prog.ty(x)),
                        });
                    }
                    let col = match a.kind {
                        AggKind::Count => None,
                        _ => a.column.map(|c| code.col(prog, c)).transpose()?,
                    };
                    Ok(AggProgram {
                        kind: a.kind.clone(),
                        init: AccInit::of(&a.kind, col.map_or(DType::U64, |c| c.ty))?,
                        col,
                        fused: None,
                        cast: None,
                    })
                })
                .collect::<Result<_, Fault>>()?,
        ),
        Terminal::Collect(_)
        | Terminal::Sort { .. }
        | Terminal::Group { .. }
        | Terminal::Join { .. } => TermProgram::Collect(
            stage
                .terminal
                .materialized()
                .iter()
                .map(|&c| code.col(prog, c))
                .collect::<Result<_, _>>()?,
        ),
        Terminal::Scan {
            column,
            op,
            exclusive,
        } => TermProgram::Scan {
            col: code.col(prog, *column)?,
            op: Box::new(op.clone()),
            exclusive: *exclusive,
        },
        Terminal::CountByKey { key, keys } => match fusion.bins {
            Some(b) => TermProgram::CountByKey {
                key: code.col(prog, b.v)?,
                keys: (*keys).max(1),
                bins: Some(b.uniforms.try_map(|u| code.col(prog, u).map(|c| c.src))?),
            },
            None => TermProgram::CountByKey {
                key: code.col(prog, *key)?,
                keys: (*keys).max(1),
                bins: None,
            },
        },
    })
}

/// How many times each value is read: by other nodes and as a root.
fn value_uses(prog: &ExprArena, roots: &[Value]) -> Vec<usize> {
    let mut uses = vec![0usize; prog.len()];
    for r in roots {
        uses[r.index()] += 1;
    }
    for (_, d) in prog.iter() {
        for o in d.node.operands() {
            uses[o.index()] += 1;
        }
    }
    uses
}

/// The stage's predicate as `(op, column, uniform)` when the one fused sum
/// of the stage can evaluate it itself ([`FusedCmp`]): an ordered compare of
/// a column of the sum's type with a uniform, read by nothing else. A
/// uniform on the left is moved right by flipping the compare (`k < x` is
/// `x > k`, NaN included: both are false).
fn fused_predicate(
    stage: &Stage,
    fused: &[Option<FoldedOp>],
    uniform: &[bool],
    uses: &[usize],
) -> Option<FoldedOp> {
    let p = stage.predicate?;
    let Terminal::Reduce(aggs) = &stage.terminal else {
        return None;
    };
    let [agg] = aggs.as_slice() else {
        return None;
    };
    if agg.kind != AggKind::Sum {
        return None;
    }
    let c = agg.column?;
    fused[c.index()]?;
    let prog = &stage.program;
    let Node::Binary(op, a, b) = prog.get(p).node else {
        return None;
    };
    if uses[p.index()] != 1 || prog.ty(a) != prog.ty(c) {
        return None;
    }
    let flipped = match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        _ => return None,
    };
    match (uniform[a.index()], uniform[b.index()]) {
        (false, true) => Some((op, a, b)),
        (true, false) => Some((flipped, b, a)),
        _ => None,
    }
}

/// The register an instruction writes and the type of its result (`None`
/// for an operation that does not apply to its operands' type, which
/// verified programs never hold).
fn instr_out(i: &Instr) -> Option<(u16, DType)> {
    match *i {
        Instr::Iota { out, .. } => Some((out, DType::U64)),
        // Unary operations keep their operand's type (`!` is on bools).
        Instr::Unary { ty, out, .. }
        | Instr::Select { ty, out, .. }
        | Instr::MulAdd { ty, out, .. }
        | Instr::Chain { ty, out, .. }
        | Instr::Powi { ty, out, .. } => Some((out, ty)),
        Instr::Binary { op, ty, out, .. } => op.result_type(ty).map(|t| (out, t)),
        Instr::Cast { to, out, .. } => Some((out, to)),
    }
}

fn with_out(i: Instr, out: u16) -> Instr {
    match i {
        Instr::Iota { slot, .. } => Instr::Iota { slot, out },
        Instr::Unary { op, ty, a, .. } => Instr::Unary { op, ty, a, out },
        Instr::Binary { op, ty, a, b, .. } => Instr::Binary { op, ty, a, b, out },
        Instr::Select { ty, c, a, b, .. } => Instr::Select { ty, c, a, b, out },
        Instr::MulAdd { ty, a, b, c, .. } => Instr::MulAdd { ty, a, b, c, out },
        Instr::Cast { from, to, a, .. } => Instr::Cast { from, to, a, out },
        Instr::Powi { ty, a, n, .. } => Instr::Powi { ty, a, n, out },
        Instr::Chain {
            op1,
            op2,
            ty,
            a,
            b,
            c,
            ..
        } => Instr::Chain {
            op1,
            op2,
            ty,
            a,
            b,
            c,
            out,
        },
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => write!(f, "r{r}"),
            Operand::Input(s) => write!(f, "in{s}"),
            Operand::Uniform(v) => write!(f, "u{v}"),
        }
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Instr::Iota { slot, out } => write!(f, "r{out}:u64 = iota e{slot}"),
            Instr::Unary { op, ty, a, out } => write!(f, "r{out}:{ty} = {op} {a}"),
            Instr::Binary { op, ty, a, b, out } => {
                let rt = op.result_type(ty).unwrap_or(ty);
                write!(f, "r{out}:{rt} = {op} {a}, {b}")
            }
            Instr::Select { ty, c, a, b, out } => write!(f, "r{out}:{ty} = select {c}, {a}, {b}"),
            Instr::MulAdd { ty, a, b, c, out } => write!(f, "r{out}:{ty} = mul_add {a}, {b}, {c}"),
            Instr::Cast { to, a, out, .. } => write!(f, "r{out}:{to} = cast {a}"),
            Instr::Powi { ty, a, n, out } => write!(f, "r{out}:{ty} = powi {a}, {n}"),
            Instr::Chain {
                op1,
                op2,
                ty,
                a,
                b,
                c,
                out,
            } => {
                let (outer, t_first) = match op2 {
                    ChainOp::Add => ("add", true),
                    ChainOp::Sub => ("sub", true),
                    ChainOp::Mul => ("mul", true),
                    ChainOp::SubFrom => ("sub", false),
                };
                if t_first {
                    write!(f, "r{out}:{ty} = {outer} ({op1} {a}, {b}), {c}")
                } else {
                    write!(f, "r{out}:{ty} = {outer} {c}, ({op1} {a}, {b})")
                }
            }
        }
    }
}

impl fmt::Display for StageProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  regs:")?;
        for t in DType::ALL {
            let c = self.regs[dtype_index(t)];
            if c > 0 {
                write!(f, " {t}x{c}")?;
            }
        }
        writeln!(f)?;
        for s in &self.splats {
            writeln!(f, "    r{}:{} = splat u{}", s.reg, s.ty, s.node)?;
        }
        for i in &self.instrs {
            writeln!(f, "    {i}")?;
        }
        if let Some(p) = self.predicate {
            writeln!(f, "  predicate: {}", p.src)?;
        }
        match &self.terminal {
            TermProgram::Reduce(aggs) => {
                write!(f, "  reduce:")?;
                for a in aggs {
                    if let (Some(fu), Some(c)) = (a.fused, a.col) {
                        write!(f, " {}({} ", a.kind.name(), fu.op)?;
                        match fu.inner {
                            Some(h) => write!(f, "({} {}, {})", h.op, h.a, h.b)?,
                            None => write!(f, "{}", fu.a)?,
                        }
                        write!(f, ", {}:{}", fu.b, c.ty)?;
                        if let Some(k) = fu.keep {
                            write!(f, " where {} {}, {}", k.op, k.x, k.k)?;
                        }
                        write!(f, ")")?;
                        continue;
                    }
                    match (a.col, a.cast) {
                        (Some(c), Some(from)) => {
                            write!(f, " {}({}:{from} as {})", a.kind.name(), c.src, c.ty)?
                        }
                        (Some(c), None) => write!(f, " {}({}:{})", a.kind.name(), c.src, c.ty)?,
                        (None, _) => write!(f, " {}", a.kind.name())?,
                    }
                }
                writeln!(f)
            }
            TermProgram::CountByKey { key, keys, bins } => {
                let bins = if bins.is_some() {
                    " (histogram bins)"
                } else {
                    ""
                };
                writeln!(
                    f,
                    "  count_by_key: {}:{} keys={keys}{bins}",
                    key.src, key.ty
                )
            }
            TermProgram::Collect(cols) => {
                write!(
                    f,
                    "  {}:",
                    if self.predicate.is_some() {
                        "compact"
                    } else {
                        "store"
                    }
                )?;
                for c in cols {
                    write!(f, " {}:{}", c.src, c.ty)?;
                }
                writeln!(f)
            }
            TermProgram::Scan { col, op, exclusive } => {
                let kind = if *exclusive { "exclusive" } else { "inclusive" };
                let op = match **op {
                    ScanOp::Sum => "sum",
                    ScanOp::Custom(_) => "custom",
                };
                writeln!(f, "  scan {kind} {op}({}:{})", col.src, col.ty)
            }
        }
    }
}

impl fmt::Display for BlockProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.stages.iter().enumerate() {
            writeln!(f, "stage {i}:")?;
            write!(f, "{s}")?;
        }
        Ok(())
    }
}
