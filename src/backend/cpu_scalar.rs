//! `cpu-scalar`: a plain interpreter of the plan, one element at a time.
//!
//! It is the reference oracle of the differential tests, so it is written to
//! be obviously right rather than fast: every node is evaluated through
//! `expr::eval`, reductions and scans run strictly left to right.

use super::{Availability, Backend, BackendError, BackendKind, HostColumn, Job, Phase, RunStats};
use crate::expr::{eval, BinaryOp, DType, ExprArena, Node, Scalar, Value};
use crate::plan::{AggKind, PhysicalPlan, PlanOutput, ScanOp, Stage, StageInput, Terminal};
use crate::runtime::column::{Column, ColumnRef};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::time::Instant;

/// The reference interpreter.
#[derive(Debug, Default)]
pub struct CpuScalar;

impl Backend for CpuScalar {
    fn kind(&self) -> BackendKind {
        BackendKind::CpuScalar
    }

    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn supports(&self, _plan: &PhysicalPlan) -> Result<(), Cow<'static, str>> {
        Ok(())
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let hosts = job
            .inputs
            .iter()
            .map(|i| i.host(stats))
            .collect::<Result<Vec<HostColumn<'_>>, _>>()?;
        let sources: Vec<ColumnRef<'_>> = hosts.iter().map(|h| h.as_ref()).collect();
        let start = Instant::now();
        let out = run_plan(&job.plan.plan, &sources, job.params)
            .map_err(|m| BackendError::new(BackendKind::CpuScalar, Phase::Execute, m))?;
        stats.execute = start.elapsed();
        stats.parallelism = 1;
        stats.bytes_allocated += output_bytes(&out);
        Ok(out)
    }
}

/// Bytes held by a plan output.
pub fn output_bytes(out: &PlanOutput) -> u64 {
    match out {
        PlanOutput::Aggregates(_) => 0,
        PlanOutput::Columns(cols) => cols.iter().map(|c| c.byte_len() as u64).sum(),
    }
}

/// Runs every stage of `plan` with the reference semantics.
pub fn run_plan(
    plan: &PhysicalPlan,
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
) -> Result<PlanOutput, String> {
    let mut produced: Vec<Vec<Column>> = Vec::with_capacity(plan.stages.len());
    for (i, stage) in plan.stages.iter().enumerate() {
        let inputs: Vec<ColumnRef<'_>> = stage
            .inputs
            .iter()
            .map(|inp| match *inp {
                StageInput::Source(n) => sources[n as usize],
                StageInput::Stage { stage, column } => {
                    produced[stage as usize][column as usize].as_ref()
                }
            })
            .collect();
        let out = run_stage(stage, &inputs, params)?;
        if i + 1 == plan.stages.len() {
            return Ok(out);
        }
        match out {
            PlanOutput::Columns(c) => produced.push(c),
            PlanOutput::Aggregates(_) => {
                return Err(format!("stage {i} reduces but is not the last stage"))
            }
        }
    }
    Err("the plan has no stage".into())
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

fn eval_into(
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
            Node::Unary(op, a) => eval::unary(op, r(a)),
            Node::Binary(op, a, b) => eval::binary(op, r(a), r(b)),
            Node::Select(c, a, b) => {
                if r(c).as_bool() {
                    r(a)
                } else {
                    r(b)
                }
            }
            Node::MulAdd(a, b, c) => eval::mul_add(r(a), r(b), r(c)),
            Node::Cast(a) => r(a).cast(n.ty),
            Node::Powi(a, k) => eval::powi(r(a), k),
        };
        regs.push(value);
    }
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

/// Runs one stage with the reference semantics.
pub fn run_stage(
    stage: &Stage,
    inputs: &[ColumnRef<'_>],
    params: &[Scalar],
) -> Result<PlanOutput, String> {
    let lens: SmallVec<[usize; 4]> = inputs.iter().map(|c| c.len()).collect();
    let range = stage.resolve_range(&lens, params);
    let mut regs = SmallVec::new();
    let mut elem: SmallVec<[Scalar; 4]> = SmallVec::new();
    let mut idx: SmallVec<[u64; 2]> = SmallVec::new();
    let prog = &stage.program;

    enum State {
        Reduce(SmallVec<[Scalar; 4]>, SmallVec<[Option<Scalar>; 4]>),
        Collect(Vec<Column>),
        Scan(Column, Scalar),
    }
    let mut state = match &stage.terminal {
        Terminal::Reduce(aggs) => State::Reduce(
            aggs.iter()
                .map(|a| {
                    agg_identity(
                        &a.kind,
                        a.column.map(|c| prog.ty(c)).unwrap_or(DType::U64),
                        params,
                    )
                })
                .collect(),
            aggs.iter().map(|_| None).collect(),
        ),
        Terminal::Collect(cols) => State::Collect(
            cols.iter()
                .map(|&c| {
                    Column::with_capacity(
                        prog.ty(c),
                        if stage.predicate.is_some() {
                            0
                        } else {
                            range.len
                        },
                    )
                })
                .collect(),
        ),
        Terminal::Scan { column, op, .. } => {
            let ty = prog.ty(*column);
            let id = match op {
                ScanOp::Sum => Scalar::zero(ty),
                ScanOp::Custom(c) => params[c.identity as usize],
            };
            State::Scan(Column::with_capacity(ty, range.len), id)
        }
    };

    for k in 0..range.len {
        elem.clear();
        for (s, c) in inputs.iter().enumerate() {
            elem.push(c.get(k + range.offsets[s]));
        }
        idx.clear();
        idx.extend(range.index_offsets.iter().map(|o| k as u64 + o));
        eval_into(prog, &elem, &idx, params, &mut regs);
        if let Some(p) = stage.predicate {
            if !regs[p.index()].as_bool() {
                continue;
            }
        }
        match (&mut state, &stage.terminal) {
            (State::Reduce(accs, best), Terminal::Reduce(aggs)) => {
                for (i, a) in aggs.iter().enumerate() {
                    let x = a.column.map(|c| regs[c.index()]);
                    accs[i] = match &a.kind {
                        AggKind::Sum => eval::binary(BinaryOp::Add, accs[i], x.unwrap()),
                        AggKind::Min => eval::binary(BinaryOp::Min, accs[i], x.unwrap()),
                        AggKind::Max => eval::binary(BinaryOp::Max, accs[i], x.unwrap()),
                        AggKind::Count => Scalar::U64(accs[i].to_bits() + 1),
                        AggKind::Any => Scalar::Bool(accs[i].as_bool() | x.unwrap().as_bool()),
                        AggKind::All => Scalar::Bool(accs[i].as_bool() & x.unwrap().as_bool()),
                        AggKind::ArgMin | AggKind::ArgMax => {
                            let x = x.unwrap();
                            if arg_better(&a.kind, x, best[i]) {
                                best[i] = Some(x);
                                Scalar::U64(k as u64)
                            } else {
                                accs[i]
                            }
                        }
                        AggKind::Custom(c) => c.eval(accs[i], x.unwrap(), params),
                    };
                }
            }
            (State::Collect(out), Terminal::Collect(cols)) => {
                for (o, &c) in out.iter_mut().zip(cols) {
                    o.push(regs[c.index()]);
                }
            }
            (
                State::Scan(out, acc),
                Terminal::Scan {
                    column,
                    op,
                    exclusive,
                },
            ) => {
                let x = regs[column.index()];
                let next = match op {
                    ScanOp::Sum => eval::binary(BinaryOp::Add, *acc, x),
                    ScanOp::Custom(c) => c.eval(*acc, x, params),
                };
                out.push(if *exclusive { *acc } else { next });
                *acc = next;
            }
            _ => unreachable!(),
        }
    }
    Ok(match state {
        State::Reduce(accs, _) => PlanOutput::Aggregates(accs),
        State::Collect(cols) => PlanOutput::Columns(cols),
        State::Scan(col, _) => PlanOutput::Columns(vec![col]),
    })
}
