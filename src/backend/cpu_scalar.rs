//! `cpu-scalar`: a plain interpreter of the plan, one element at a time.
//!
//! It is the reference oracle of the differential tests, so it is written to
//! be obviously right rather than fast: every node is evaluated through
//! `expr::eval`, reductions and scans run strictly left to right.

use super::{
    Availability, Backend, BackendError, BackendKind, Decline, HostColumn, Job, Phase, RunStats,
};
use crate::expr::eval::{self, eval_into};
use crate::expr::{BinaryOp, DType, Scalar};
use crate::plan::{AggKind, PhysicalPlan, PlanOutput, ScanOp, Stage, StageInput, Terminal};
use crate::relational::{self, Strategy};
use crate::semantics::{agg_identity, arg_better, is_settled, Moments, Settles};
use crate::types::{Column, ColumnRef, Fault, PlanError};
use smallvec::SmallVec;
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

    fn supports(&self, _plan: &PhysicalPlan) -> Result<(), Decline> {
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
        let mut skipped = 0;
        let out =
            run_plan_counted(&job.plan.plan, &sources, job.params, &mut skipped).map_err(|e| {
                BackendError::new(BackendKind::CpuScalar, Phase::Execute, e.to_string())
            })?;
        stats.elements_skipped = skipped;
        for s in &job.plan.plan.stages {
            stats.algorithm = match s.terminal {
                Terminal::Sort { .. } => Some(crate::metrics::Algorithm::StableSort),
                Terminal::Group { .. } => Some(crate::metrics::Algorithm::OrderedMap),
                Terminal::Join { .. } => Some(crate::metrics::Algorithm::OrderedMapJoin),
                _ => stats.algorithm,
            };
        }
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
) -> Result<PlanOutput, PlanError> {
    run_plan_counted(plan, sources, params, &mut 0)
}

/// [`run_plan`], adding to `skipped` the positions an early exit left
/// unread.
fn run_plan_counted(
    plan: &PhysicalPlan,
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
    skipped: &mut u64,
) -> Result<PlanOutput, PlanError> {
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
        let out =
            run_stage_counted(stage, &inputs, sources, params, skipped).map_err(|f| f.at(i))?;
        if i + 1 == plan.stages.len() {
            return Ok(out);
        }
        match out {
            PlanOutput::Columns(c) => produced.push(c),
            PlanOutput::Aggregates(_) => return Err(Fault::ReduceNotLast.at(i)),
        }
    }
    Err(PlanError::NoStage)
}

/// Runs one stage with the reference semantics. A join stage reads its
/// build side from the query's inputs: run it through [`run_plan`].
pub fn run_stage(
    stage: &Stage,
    inputs: &[ColumnRef<'_>],
    params: &[Scalar],
) -> Result<PlanOutput, Fault> {
    run_stage_counted(stage, inputs, &[], params, &mut 0)
}

fn run_stage_counted(
    stage: &Stage,
    inputs: &[ColumnRef<'_>],
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
    skipped: &mut u64,
) -> Result<PlanOutput, Fault> {
    let lens: SmallVec<[usize; 4]> = inputs.iter().map(|c| c.len()).collect();
    let range = stage.resolve_range(&lens, params);
    let mut regs = SmallVec::new();
    let mut elem: SmallVec<[Scalar; 4]> = SmallVec::new();
    let mut idx: SmallVec<[u64; 2]> = SmallVec::new();
    let prog = &stage.program;

    enum State {
        /// Accumulators, the best value of an arg-extremum, the first
        /// value and the moments of an `m2`.
        Reduce(
            SmallVec<[Scalar; 4]>,
            SmallVec<[Option<Scalar>; 4]>,
            Vec<(Option<f64>, Moments)>,
        ),
        Collect(Vec<Column>),
        Scan(Column, Scalar),
        /// Counts per key.
        Count(Vec<u64>),
    }
    let materialized = stage.terminal.materialized();
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
            aggs.iter().map(|_| (None, Moments::EMPTY)).collect(),
        ),
        Terminal::Collect(_)
        | Terminal::Sort { .. }
        | Terminal::Group { .. }
        | Terminal::Join { .. } => State::Collect(
            materialized
                .iter()
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
        Terminal::CountByKey { keys, .. } => State::Count(vec![0; (*keys).max(1) as usize]),
    };

    // `first`, `any`, `all` alone: stop at the element that settles them.
    let stops = matches!(&stage.terminal, Terminal::Reduce(aggs)
        if Settles::of(aggs.iter().map(|a| &a.kind)) == Some(Settles::Prefix));
    'elements: for k in 0..range.len {
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
            (State::Reduce(accs, best, moments), Terminal::Reduce(aggs)) => {
                for (i, a) in aggs.iter().enumerate() {
                    let x = a.column.map(|c| regs[c.index()]);
                    accs[i] = match &a.kind {
                        AggKind::Sum => eval::binary(BinaryOp::Add, accs[i], x.unwrap()),
                        AggKind::Min => eval::binary(BinaryOp::Min, accs[i], x.unwrap()),
                        AggKind::Max => eval::binary(BinaryOp::Max, accs[i], x.unwrap()),
                        AggKind::Count => Scalar::U64(accs[i].to_bits().wrapping_add(1)),
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
                        AggKind::First => {
                            if best[i].is_none() {
                                best[i] = x;
                            }
                            best[i].unwrap_or(accs[i])
                        }
                        AggKind::Last => x.unwrap(),
                        AggKind::M2 => {
                            // Welford's update of `x - first`: the shift
                            // (exact near the data) keeps the running mean
                            // small, so its rounding does not scale with
                            // the data's magnitude; `M2` is shift-free.
                            let (shift, m) = &mut moments[i];
                            let x = x.unwrap().as_f64();
                            let k = *shift.get_or_insert(x);
                            m.push(x - k);
                            Scalar::F64(m.m2)
                        }
                    };
                }
                if stops
                    && aggs
                        .iter()
                        .zip(accs.iter().zip(best.iter()))
                        .all(|(a, (v, b))| is_settled(&a.kind, *v, b.is_some()))
                {
                    *skipped += (range.len - k - 1) as u64;
                    break 'elements;
                }
            }
            (State::Count(counts), Terminal::CountByKey { key, .. }) => {
                let k = (regs[key.index()].to_bits() as usize).min(counts.len() - 1);
                counts[k] += 1;
            }
            (
                State::Collect(out),
                Terminal::Collect(_)
                | Terminal::Sort { .. }
                | Terminal::Group { .. }
                | Terminal::Join { .. },
            ) => {
                for (o, c) in out.iter_mut().zip(&materialized) {
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
        State::Reduce(accs, ..) => PlanOutput::Aggregates(accs),
        State::Collect(cols) => {
            let refs: Vec<ColumnRef<'_>> = cols.iter().map(|c| c.as_ref()).collect();
            match relational::finish_stage(stage, &refs, sources, params, Strategy::Reference) {
                Some(done) => PlanOutput::Columns(done?.0),
                None => PlanOutput::Columns(cols),
            }
        }
        State::Scan(col, _) => PlanOutput::Columns(vec![col]),
        State::Count(counts) => PlanOutput::Columns(vec![Column::U64(counts)]),
    })
}
