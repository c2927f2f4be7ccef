//! Differential tests of `cpu-simd` and `cpu-parallel` against the
//! `cpu-scalar` reference, on hand-built plans. `cpu-parallel` and the
//! portable ISA must also equal `cpu-simd` bit for bit.

use super::exec::{run_plan, Acct, Isa, Sequential};
use super::*;
use crate::backend::cpu_parallel::{CpuParallel, Parallel};
use crate::backend::{cpu_scalar, Input};
use crate::expr::{BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp, Value};
use crate::plan::CompiledPlan;
use crate::plan::{
    AggKind, Aggregate, Combine, PhysicalPlan, PlanOutput, RangeOp, ScanOp, Stage, StageInput,
    Terminal,
};
use crate::types::{Column, ColumnRef};
use smallvec::{smallvec, SmallVec};

/// Lengths around every boundary: block, leaf, several leaves + a partial.
pub(crate) const LENGTHS: [usize; 11] = [
    0,
    1,
    31,
    33,
    BLOCK - 1,
    BLOCK,
    BLOCK + 1,
    LEAF - 1,
    LEAF,
    LEAF + 1,
    3 * LEAF + 517,
];

/// A small builder over an arena.
#[derive(Default)]
pub(crate) struct P(pub(crate) ExprArena);

impl P {
    pub(crate) fn input(&mut self, s: u16, t: DType) -> Value {
        self.0.push_typed(Node::Input(s), t).unwrap()
    }
    pub(crate) fn param(&mut self, p: u16, t: DType) -> Value {
        self.0.push_typed(Node::Param(p), t).unwrap()
    }
    pub(crate) fn konst(&mut self, s: Scalar) -> Value {
        self.0.push(Node::Const(s)).unwrap()
    }
    pub(crate) fn bin(&mut self, op: BinaryOp, a: Value, b: Value) -> Value {
        self.0.push(Node::Binary(op, a, b)).unwrap()
    }
    pub(crate) fn un(&mut self, op: UnaryOp, a: Value) -> Value {
        self.0.push(Node::Unary(op, a)).unwrap()
    }
    pub(crate) fn node(&mut self, n: Node) -> Value {
        self.0.push(n).unwrap()
    }
    pub(crate) fn cast(&mut self, a: Value, t: DType) -> Value {
        self.0.push_typed(Node::Cast(a), t).unwrap()
    }
}

/// A stage over query inputs `0..n`, all joined.
pub(crate) fn stage(n: u16, p: P, predicate: Option<Value>, terminal: Terminal) -> Stage {
    Stage {
        inputs: (0..n).map(StageInput::Source).collect(),
        enumerates: 0,
        range: (0..n).map(RangeOp::Join).collect(),
        program: p.0,
        predicate,
        terminal,
    }
}

pub(crate) fn plan(dtypes: &[DType], params: usize, stages: Vec<Stage>) -> PhysicalPlan {
    PhysicalPlan {
        input_dtypes: dtypes.iter().copied().collect(),
        param_count: params,
        stages: stages.into_iter().collect(),
    }
}

pub(crate) fn agg(kind: AggKind, column: Option<Value>) -> Aggregate {
    Aggregate { kind, column }
}

/// Deterministic pseudo-random data.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// In `[-1, 2)`.
    pub(crate) fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 3.0 - 1.0
    }
    pub(crate) fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f64() as f32).collect()
    }
    pub(crate) fn f64s(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.f64()).collect()
    }
}

fn float_eq(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

fn scalar_close(a: Scalar, b: Scalar, tolerant: bool) -> bool {
    let tol = match a {
        Scalar::F32(_) if tolerant => 1e-4,
        Scalar::F64(_) if tolerant => 1e-10,
        _ => 0.0,
    };
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => float_eq(x as f64, y as f64, tol),
        (Scalar::F64(x), Scalar::F64(y)) => float_eq(x, y, tol),
        _ => a == b,
    }
}

fn column_scalars(c: &Column) -> Vec<Scalar> {
    let r = c.as_ref();
    (0..r.len()).map(|i| r.get(i)).collect()
}

/// `got` equals the reference: exactly for integers and bools, and for
/// floats within a tolerance when `tolerant` (summation order differs).
pub(crate) fn assert_close(want: &PlanOutput, got: &PlanOutput, tolerant: bool, what: &str) {
    match (want, got) {
        (PlanOutput::Aggregates(w), PlanOutput::Aggregates(g)) => {
            assert_eq!(w.len(), g.len(), "{what}");
            for (i, (a, b)) in w.iter().zip(g).enumerate() {
                assert!(
                    scalar_close(*a, *b, tolerant),
                    "{what}: aggregate {i}: want {a}, got {b}"
                );
            }
        }
        (PlanOutput::Columns(w), PlanOutput::Columns(g)) => {
            assert_eq!(w.len(), g.len(), "{what}");
            for (c, (a, b)) in w.iter().zip(g).enumerate() {
                assert_eq!(a.dtype(), b.dtype(), "{what}");
                assert_eq!(a.len(), b.len(), "{what}: column {c} length");
                for (i, (x, y)) in column_scalars(a)
                    .into_iter()
                    .zip(column_scalars(b))
                    .enumerate()
                {
                    assert!(
                        scalar_close(x, y, tolerant),
                        "{what}: column {c}[{i}]: want {x}, got {y}"
                    );
                }
            }
        }
        _ => panic!("{what}: output kinds differ: {want:?} vs {got:?}"),
    }
}

/// Bit-for-bit equality (NaN payloads and signed zeros included).
pub(crate) fn assert_bitwise(a: &PlanOutput, b: &PlanOutput, what: &str) {
    match (a, b) {
        (PlanOutput::Aggregates(x), PlanOutput::Aggregates(y)) => assert_eq!(x, y, "{what}"),
        (PlanOutput::Columns(x), PlanOutput::Columns(y)) => {
            assert_eq!(x.len(), y.len(), "{what}");
            for (p, q) in x.iter().zip(y) {
                assert_eq!(p.dtype(), q.dtype(), "{what}");
                assert!(
                    p.as_ref().as_bytes() == q.as_ref().as_bytes(),
                    "{what}: columns differ"
                );
            }
        }
        _ => panic!("{what}: output kinds differ"),
    }
}

fn run_backend(
    b: &dyn crate::backend::Backend,
    cp: &CompiledPlan,
    inputs: &[ColumnRef<'_>],
    params: &[Scalar],
) -> (PlanOutput, RunStats) {
    let ins: Vec<Input<'_>> = inputs.iter().map(|&c| Input::Host(c)).collect();
    let job = Job {
        plan: cp,
        inputs: &ins,
        params,
        keep_on_device: false,
    };
    let mut stats = RunStats::default();
    let out = b.execute(&job, &mut stats).unwrap();
    (out, stats)
}

/// Runs `plan` on cpu-scalar, cpu-simd (every ISA here) and cpu-parallel (the
/// pool's driver and several fixed task counts), and checks them.
pub(crate) fn check(
    p: PhysicalPlan,
    inputs: &[ColumnRef<'_>],
    params: &[Scalar],
    tolerant: bool,
) -> PlanOutput {
    let want = cpu_scalar::run_plan(&p, inputs, params).unwrap();
    let cp = CompiledPlan::new(p, 0, Default::default());
    let (simd, _) = run_backend(&CpuSimd, &cp, inputs, params);
    assert_close(&want, &simd, tolerant, "cpu-simd vs cpu-scalar");
    let (par, _) = run_backend(&CpuParallel::default(), &cp, inputs, params);
    assert_bitwise(&simd, &par, "cpu-parallel vs cpu-simd");

    let prog = BlockProgram::compile(&cp.plan).unwrap();
    // The general path gives the bits of a small reduction's direct one
    // (`small_reduce`, which both backends take below a leaf).
    let general = super::exec::run_stages(
        &prog,
        &cp.plan,
        inputs,
        params,
        Isa::detect(),
        &Sequential,
        &Acct::default(),
    )
    .unwrap();
    assert_bitwise(&simd, &general, "cpu-simd vs its general path");
    // Every instruction set this CPU runs (the baseline, AVX2, AVX-512)
    // gives the detected one's bits.
    for isa in Isa::all_here() {
        let other = run_plan(
            &prog,
            &cp.plan,
            inputs,
            params,
            isa,
            &Sequential,
            &Acct::default(),
        )
        .unwrap();
        assert_bitwise(
            &simd,
            &other,
            &format!("{} vs detected ISA ({})", isa.name(), Isa::detect().name()),
        );
    }
    for (tasks, helpers) in [(1, 1), (3, 0), (3, 2), (64, 1), (64, 5)] {
        let d = Parallel {
            tasks_wanted: tasks,
            helpers,
            linger: crate::backend::cpu_parallel::DEFAULT_LINGER,
        };
        let out = run_plan(
            &prog,
            &cp.plan,
            inputs,
            params,
            Isa::detect(),
            &d,
            &Acct::default(),
        )
        .unwrap();
        assert_bitwise(
            &simd,
            &out,
            &format!("cpu-parallel: {tasks} tasks, {helpers} helpers"),
        );
    }
    simd
}

/// `x * 2 + 1` over an f32 input: the program most tests reduce.
fn affine_f32() -> (P, Value) {
    let mut p = P::default();
    let x = p.input(0, DType::F32);
    let two = p.param(0, DType::F32);
    let one = p.konst(Scalar::F32(1.0));
    let m = p.bin(BinaryOp::Mul, x, two);
    let y = p.bin(BinaryOp::Add, m, one);
    (p, y)
}

#[test]
fn multi_aggregate_reduce_matches_scalar_at_every_boundary() {
    let mut rng = Rng(7);
    for n in LENGTHS {
        let xs = rng.f32s(n);
        let (mut p, y) = affine_f32();
        let x = Value::new(0);
        let half = p.konst(Scalar::F32(0.5));
        let big = p.bin(BinaryOp::Gt, x, half);
        let aggs = smallvec![
            agg(AggKind::Sum, Some(y)),
            agg(AggKind::Min, Some(y)),
            agg(AggKind::Max, Some(y)),
            agg(AggKind::Count, None),
            agg(AggKind::ArgMin, Some(y)),
            agg(AggKind::ArgMax, Some(y)),
            agg(AggKind::Any, Some(big)),
            agg(AggKind::All, Some(big)),
        ];
        let pl = plan(
            &[DType::F32],
            1,
            vec![stage(1, p, None, Terminal::Reduce(aggs))],
        );
        check(pl, &[ColumnRef::F32(&xs)], &[Scalar::F32(2.0)], true);
    }
}

#[test]
fn predicated_reduce_skips_dropped_elements() {
    let mut rng = Rng(11);
    for n in LENGTHS {
        let xs = rng.f64s(n);
        let mut p = P::default();
        let x = p.input(0, DType::F64);
        let t = p.param(0, DType::F64);
        let keep = p.bin(BinaryOp::Gt, x, t);
        let sq = p.bin(BinaryOp::Mul, x, x);
        let lo = p.konst(Scalar::F64(1.5));
        let over = p.bin(BinaryOp::Lt, x, lo);
        let aggs = smallvec![
            agg(AggKind::Sum, Some(sq)),
            agg(AggKind::Count, None),
            agg(AggKind::Min, Some(x)),
            agg(AggKind::Max, Some(sq)),
            agg(AggKind::Any, Some(over)),
            agg(AggKind::All, Some(over)),
            agg(AggKind::ArgMax, Some(x)),
        ];
        let pl = plan(
            &[DType::F64],
            1,
            vec![stage(1, p, Some(keep), Terminal::Reduce(aggs))],
        );
        check(pl, &[ColumnRef::F64(&xs)], &[Scalar::F64(0.25)], true);
    }
}

/// The first aggregate of a reduce's output.
fn first_aggregate(o: &PlanOutput) -> Scalar {
    match o {
        PlanOutput::Aggregates(a) => a[0],
        PlanOutput::Columns(_) => panic!("not a reduce"),
    }
}

#[test]
fn fused_predicate_gives_the_bits_of_the_mask() {
    // `sum(x * x) where x op t`, with NaNs, the uniform on either side: the
    // compare folded into the sum must give exactly the mask pass's bits
    // (a second aggregate keeps the mask pass).
    let mut rng = Rng(23);
    for n in LENGTHS {
        let mut xs = rng.f32s(n);
        for i in (0..n).step_by(5) {
            xs[i] = f32::NAN;
        }
        for op in [BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge] {
            for uniform_left in [false, true] {
                let build = |with_count: bool| {
                    let mut p = P::default();
                    let x = p.input(0, DType::F32);
                    let t = p.param(0, DType::F32);
                    let keep = if uniform_left {
                        p.bin(op, t, x)
                    } else {
                        p.bin(op, x, t)
                    };
                    let sq = p.bin(BinaryOp::Mul, x, x);
                    let mut aggs = smallvec![agg(AggKind::Sum, Some(sq))];
                    if with_count {
                        aggs.push(agg(AggKind::Count, None));
                    }
                    plan(
                        &[DType::F32],
                        1,
                        vec![stage(1, p, Some(keep), Terminal::Reduce(aggs))],
                    )
                };
                let fused = build(false);
                let text = BlockProgram::compile(&fused).unwrap().to_string();
                assert!(
                    text.contains(" where ") && !text.contains("predicate"),
                    "{text}"
                );
                let params = [Scalar::F32(0.5)];
                let a = check(fused, &[ColumnRef::F32(&xs)], &params, true);
                let b = check(build(true), &[ColumnRef::F32(&xs)], &params, true);
                assert_eq!(
                    first_aggregate(&a).to_bits(),
                    first_aggregate(&b).to_bits(),
                    "{op} uniform_left={uniform_left} n={n}"
                );
            }
        }
    }
}

#[test]
fn nested_fused_sum_gives_the_bits_of_the_register() {
    // `sum((x op1 y) op2 k)` with `y` an input or a parameter, with and
    // without a mask: folding the inner operation too must give the bits
    // of computing it into a register first (a second aggregate reading it
    // keeps the register).
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];
    let mut rng = Rng(29);
    for n in LENGTHS {
        let xs = rng.f64s(n);
        let ys = rng.f64s(n);
        // A mask read from an input, as a column with nulls has its
        // validity: the nested fold keeps its lanes.
        let valid: Vec<bool> = (0..n).map(|i| i % 7 != 3 && i % 11 != 0).collect();
        for inner in ops {
            for outer in ops {
                for (y_input, masked) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let build = |with_max: bool| {
                        let mut p = P::default();
                        let x = p.input(0, DType::F64);
                        let y = if y_input {
                            p.input(1, DType::F64)
                        } else {
                            p.param(0, DType::F64)
                        };
                        let keep = masked.then(|| p.input(2, DType::Bool));
                        let k = p.konst(Scalar::F64(0.75));
                        let h = p.bin(inner, x, y);
                        let c = p.bin(outer, h, k);
                        let mut aggs = smallvec![agg(AggKind::Sum, Some(c))];
                        if with_max {
                            aggs.push(agg(AggKind::Max, Some(h)));
                        }
                        plan(
                            &[DType::F64, DType::F64, DType::Bool],
                            1,
                            vec![stage(3, p, keep, Terminal::Reduce(aggs))],
                        )
                    };
                    let nested = build(false);
                    let text = BlockProgram::compile(&nested).unwrap().to_string();
                    let no_register = if masked {
                        "regs:\n  predicate: in2\n  reduce"
                    } else {
                        "regs:\n  reduce"
                    };
                    assert!(text.contains(no_register), "{text}");
                    let inputs = [
                        ColumnRef::F64(&xs),
                        ColumnRef::F64(&ys),
                        ColumnRef::Bool(&valid),
                    ];
                    let params = [Scalar::F64(1.25)];
                    let a = check(nested, &inputs, &params, true);
                    let b = check(build(true), &inputs, &params, true);
                    assert_eq!(
                        first_aggregate(&a).to_bits(),
                        first_aggregate(&b).to_bits(),
                        "{inner} {outer} y_input={y_input} masked={masked} n={n}"
                    );
                }
            }
        }
    }
}

/// A one-stage reduction of at most one leaf whose program has no register
/// runs by `small_reduce`, with the bits of the general path (`run_stages`,
/// on the sequential and the parallel driver); anything else is left to
/// the general path.
#[test]
fn small_register_free_reductions_take_the_direct_path_with_the_general_bits() {
    use super::exec::{run_stages, small_reduce};
    let one_task = Parallel {
        tasks_wanted: 1,
        helpers: 0,
        linger: crate::backend::cpu_parallel::DEFAULT_LINGER,
    };
    let mut rng = Rng(31);
    // sum(x * 2 + 1), a masked dot product and a variance with a count:
    // folds of inputs and uniforms only.
    let affine = || {
        let (p, y) = affine_f32();
        plan(
            &[DType::F32],
            1,
            vec![stage(
                1,
                p,
                None,
                Terminal::Reduce(smallvec![agg(AggKind::Sum, Some(y))]),
            )],
        )
    };
    let dot = || {
        let mut p = P::default();
        let x = p.input(0, DType::F32);
        let y = p.input(1, DType::F32);
        let keep = p.input(2, DType::Bool);
        let m = p.bin(BinaryOp::Mul, x, y);
        let aggs = smallvec![agg(AggKind::Sum, Some(m)), agg(AggKind::Count, None)];
        plan(
            &[DType::F32, DType::F32, DType::Bool],
            1,
            vec![stage(3, p, Some(keep), Terminal::Reduce(aggs))],
        )
    };
    let moments = || {
        let mut p = P::default();
        let x = p.input(0, DType::F32);
        let aggs = smallvec![agg(AggKind::M2, Some(x)), agg(AggKind::Count, None)];
        plan(
            &[DType::F32],
            1,
            vec![stage(1, p, None, Terminal::Reduce(aggs))],
        )
    };
    let params = [Scalar::F32(2.0)];
    for n in LENGTHS {
        let xs = rng.f32s(n);
        let ys = rng.f32s(n);
        let keep: Vec<bool> = (0..n).map(|i| i % 3 != 1).collect();
        let inputs = [
            ColumnRef::F32(&xs),
            ColumnRef::F32(&ys),
            ColumnRef::Bool(&keep),
        ];
        for (name, pl) in [("affine", affine()), ("dot", dot()), ("moments", moments())] {
            let prog = BlockProgram::compile(&pl).unwrap();
            assert_eq!(prog.stages[0].regs, [0; 7], "{name}: {prog}");
            let ins = &inputs[..pl.input_dtypes.len()];
            let general = |d: &dyn super::exec::Driver| {
                let acct = Acct::new(d.shared());
                let out = run_stages(&prog, &pl, ins, &params, Isa::detect(), d, &acct).unwrap();
                (out, acct.tasks(), acct.bytes())
            };
            let (sequential, tasks, bytes) = general(&Sequential);
            let (parallel, ..) = general(&one_task);
            let acct = Acct::default();
            let direct = small_reduce(&prog, &pl, ins, &params, Isa::detect(), &acct);
            match direct {
                Some(direct) => {
                    assert!((1..=LEAF).contains(&n), "{name} at {n}");
                    assert_bitwise(&sequential, &direct, &format!("{name} at {n}"));
                    assert_bitwise(&parallel, &direct, &format!("{name} at {n}, parallel"));
                    // Accounted as the general path accounts its one task.
                    assert_eq!((acct.tasks(), acct.bytes()), (tasks, bytes), "{name}");
                }
                // Empty, or more than one leaf: the general path's.
                None => assert!(n == 0 || n > LEAF, "{name} at {n}: not taken"),
            }
        }
    }
    // A program with an instruction and its register (the square root),
    // a stage that skips, and too few parameters: the general path.
    let xs = rng.f32s(100);
    let (mut p, y) = affine_f32();
    let s = p.un(UnaryOp::Sqrt, y);
    let aggs = smallvec![agg(AggKind::Sum, Some(s)), agg(AggKind::Max, Some(s))];
    let registers = plan(
        &[DType::F32],
        1,
        vec![stage(1, p, None, Terminal::Reduce(aggs))],
    );
    let mut skipping = affine();
    skipping.param_count = 2;
    skipping.stages[0].range.push(RangeOp::Skip(1));
    let runs = [
        (registers, vec![Scalar::F32(2.0)]),
        (skipping, vec![Scalar::F32(2.0), Scalar::U64(3)]),
        (affine(), vec![]),
    ];
    for (pl, params) in runs {
        let prog = BlockProgram::compile(&pl).unwrap();
        let inputs = [ColumnRef::F32(&xs)];
        let direct = small_reduce(
            &prog,
            &pl,
            &inputs,
            &params,
            Isa::detect(),
            &Acct::default(),
        );
        assert!(direct.is_none(), "{prog}");
    }
}

#[test]
fn a_min_or_max_of_an_operation_folds_it_with_the_bits_of_the_register() {
    // `min(x op y)` and `max(x op y)`, `y` an input or a parameter, NaNs
    // among the values, with and without a mask: folding the operation
    // must give the bits of computing it into a register first (a second
    // aggregate reading it keeps the register).
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];
    let mut rng = Rng(37);
    for n in LENGTHS {
        let mut xs = rng.f32s(n);
        for i in (0..n).step_by(9) {
            xs[i] = f32::NAN;
        }
        let ys: Vec<f32> = rng.f32s(n).iter().map(|v| v - 0.5).collect();
        let valid: Vec<bool> = (0..n).map(|i| i % 5 != 2).collect();
        for op in ops {
            for kind in [AggKind::Min, AggKind::Max] {
                for (y_input, masked) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let build = |with_count: bool| {
                        let mut p = P::default();
                        let x = p.input(0, DType::F32);
                        let y = if y_input {
                            p.input(1, DType::F32)
                        } else {
                            p.param(0, DType::F32)
                        };
                        let keep = masked.then(|| p.input(2, DType::Bool));
                        let c = p.bin(op, x, y);
                        let mut aggs = smallvec![agg(kind.clone(), Some(c))];
                        if with_count {
                            aggs.push(agg(AggKind::Sum, Some(c)));
                        }
                        plan(
                            &[DType::F32, DType::F32, DType::Bool],
                            1,
                            vec![stage(3, p, keep, Terminal::Reduce(aggs))],
                        )
                    };
                    let fused = build(false);
                    let text = BlockProgram::compile(&fused).unwrap().to_string();
                    assert!(text.contains(&format!("{}({op} ", kind.name())), "{text}");
                    let inputs = [
                        ColumnRef::F32(&xs),
                        ColumnRef::F32(&ys),
                        ColumnRef::Bool(&valid),
                    ];
                    let params = [Scalar::F32(-0.25)];
                    let a = check(fused, &inputs, &params, false);
                    let b = check(build(true), &inputs, &params, false);
                    assert_eq!(
                        first_aggregate(&a).to_bits(),
                        first_aggregate(&b).to_bits(),
                        "{} {op} y_input={y_input} masked={masked} n={n}",
                        kind.name()
                    );
                }
            }
        }
    }
}

#[test]
fn a_sum_of_a_cast_folds_the_cast_with_the_bits_of_the_register() {
    // `sum(x as f64)` over every other numeric lane type, with and without
    // a predicate on `x`: converting in the fold must give the bits of casting
    // the block into a register first (a second aggregate reading the
    // cast keeps the register).
    let mut rng = Rng(31);
    for n in LENGTHS {
        let f: Vec<f32> = rng.f32s(n).iter().map(|v| (v - 0.5) * 1e7).collect();
        let wide = |r: &mut Rng| r.next() | (1 << 63);
        let u64s: Vec<u64> = (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    wide(&mut rng)
                } else {
                    rng.next() >> 11
                }
            })
            .collect();
        let i64s: Vec<i64> = u64s.iter().map(|&v| v as i64).collect();
        let u32s: Vec<u32> = u64s.iter().map(|&v| (v >> 7) as u32).collect();
        let i32s: Vec<i32> = u32s.iter().map(|&v| v as i32).collect();
        let cols = [
            ColumnRef::F32(&f),
            ColumnRef::I32(&i32s),
            ColumnRef::U32(&u32s),
            ColumnRef::I64(&i64s),
            ColumnRef::U64(&u64s),
        ];
        for col in cols {
            let ty = col.dtype();
            for filtered in [false, true] {
                let build = |with_max: bool| {
                    let mut p = P::default();
                    let x = p.input(0, ty);
                    let c = p.cast(x, DType::F64);
                    let keep = filtered.then(|| {
                        let t = p.konst(Scalar::zero(ty));
                        p.bin(BinaryOp::Gt, x, t)
                    });
                    let mut aggs = smallvec![agg(AggKind::Sum, Some(c)), agg(AggKind::Count, None)];
                    if with_max {
                        aggs.push(agg(AggKind::Max, Some(c)));
                    }
                    plan(&[ty], 0, vec![stage(1, p, keep, Terminal::Reduce(aggs))])
                };
                let fused = build(false);
                let text = BlockProgram::compile(&fused).unwrap().to_string();
                assert!(text.contains(&format!(":{ty} as f64)")), "{text}");
                let a = check(fused, &[col], &[], true);
                let b = check(build(true), &[col], &[], true);
                assert_eq!(
                    first_aggregate(&a).to_bits(),
                    first_aggregate(&b).to_bits(),
                    "{ty} filtered={filtered} n={n}"
                );
            }
        }
    }
}

#[test]
fn nan_min_max_and_arg_extrema() {
    let n = 2 * LEAF + 100;
    let mut rng = Rng(3);
    let mut xs = rng.f32s(n);
    for i in (0..n).step_by(7) {
        xs[i] = f32::NAN;
    }
    // Ties: the first extremum must win, across leaves too.
    xs[LEAF + 5] = -7.0;
    xs[2 * LEAF + 1] = -7.0;
    xs[3] = 9.0;
    xs[LEAF + 9] = 9.0;
    let all_nan = vec![f32::NAN; LEAF + 3];
    for data in [&xs, &all_nan, &xs[..0].to_vec()] {
        let mut p = P::default();
        let x = p.input(0, DType::F32);
        let aggs = smallvec![
            agg(AggKind::Min, Some(x)),
            agg(AggKind::Max, Some(x)),
            agg(AggKind::ArgMin, Some(x)),
            agg(AggKind::ArgMax, Some(x)),
            agg(AggKind::Count, None),
        ];
        let pl = plan(
            &[DType::F32],
            0,
            vec![stage(1, p, None, Terminal::Reduce(aggs))],
        );
        let out = check(pl, &[ColumnRef::F32(data)], &[], false);
        if data.len() == n {
            assert_eq!(
                out,
                PlanOutput::Aggregates(smallvec![
                    Scalar::F32(-7.0),
                    Scalar::F32(9.0),
                    Scalar::U64((LEAF + 5) as u64),
                    Scalar::U64(3),
                    Scalar::U64(n as u64)
                ])
            );
        }
    }
}

fn combine(op: BinaryOp, ty: DType, identity: u16) -> Combine {
    let mut c = P::default();
    let a = c.input(0, ty);
    let b = c.input(1, ty);
    let out = c.bin(op, a, b);
    Combine {
        program: c.0,
        output: out,
        identity,
    }
}

#[test]
fn custom_reduce_matches_scalar() {
    let mut rng = Rng(5);
    for n in LENGTHS {
        let xs: Vec<i64> = (0..n).map(|_| rng.next() as i64).collect();
        let mut p = P::default();
        let x = p.input(0, DType::I64);
        let k = p.param(1, DType::I64);
        let r = p.bin(BinaryOp::Rem, x, k);
        let aggs = smallvec![
            agg(
                AggKind::Custom(combine(BinaryOp::Add, DType::I64, 0)),
                Some(x)
            ),
            agg(
                AggKind::Custom(combine(BinaryOp::Max, DType::I64, 2)),
                Some(r)
            ),
            agg(AggKind::Sum, Some(x)),
        ];
        let pl = plan(
            &[DType::I64],
            3,
            vec![stage(1, p, None, Terminal::Reduce(aggs))],
        );
        let params = [Scalar::I64(0), Scalar::I64(1000), Scalar::I64(i64::MIN)];
        check(pl, &[ColumnRef::I64(&xs)], &params, false);
    }
    // A start value that is not an identity enters the result once (only
    // associativity is assumed), across leaves too.
    let xs: Vec<i64> = (0..3 * LEAF + 7).map(|i| i as i64 % 97 - 40).collect();
    let mut p = P::default();
    let x = p.input(0, DType::I64);
    let aggs = smallvec![agg(
        AggKind::Custom(combine(BinaryOp::Add, DType::I64, 0)),
        Some(x)
    )];
    let pl = plan(
        &[DType::I64],
        1,
        vec![stage(1, p, None, Terminal::Reduce(aggs))],
    );
    check(pl, &[ColumnRef::I64(&xs)], &[Scalar::I64(1000)], false);
    for exclusive in [false, true] {
        let mut p = P::default();
        let x = p.input(0, DType::I64);
        let t = Terminal::Scan {
            column: x,
            op: ScanOp::Custom(combine(BinaryOp::Add, DType::I64, 0)),
            exclusive,
        };
        let pl = plan(&[DType::I64], 1, vec![stage(1, p, None, t)]);
        check(pl, &[ColumnRef::I64(&xs)], &[Scalar::I64(1000)], false);
    }

    // Within one leaf a custom reduce is exactly the sequential fold, even
    // for a non-associative combine with a non-identity start.
    let xs: Vec<f64> = Rng(9).f64s(LEAF);
    let mut p = P::default();
    let x = p.input(0, DType::F64);
    let keep = {
        let z = p.konst(Scalar::F64(0.0));
        p.bin(BinaryOp::Gt, x, z)
    };
    let aggs = smallvec![agg(
        AggKind::Custom(combine(BinaryOp::Sub, DType::F64, 0)),
        Some(x)
    )];
    let pl = plan(
        &[DType::F64],
        1,
        vec![stage(1, p, Some(keep), Terminal::Reduce(aggs))],
    );
    let want = cpu_scalar::run_plan(&pl, &[ColumnRef::F64(&xs)], &[Scalar::F64(3.0)]).unwrap();
    let got = check(pl, &[ColumnRef::F64(&xs)], &[Scalar::F64(3.0)], true);
    assert_bitwise(&want, &got, "single-leaf custom reduce");
}

#[test]
fn scans_inclusive_and_exclusive() {
    let mut rng = Rng(13);
    for n in LENGTHS {
        let fs = rng.f32s(n);
        let is: Vec<i32> = (0..n).map(|_| rng.next() as i32).collect();
        for exclusive in [false, true] {
            // f32 running sum of x * 2 + 1.
            let (p, y) = affine_f32();
            let t = Terminal::Scan {
                column: y,
                op: ScanOp::Sum,
                exclusive,
            };
            let pl = plan(&[DType::F32], 1, vec![stage(1, p, None, t)]);
            check(pl, &[ColumnRef::F32(&fs)], &[Scalar::F32(2.0)], true);
            // i32 running sum that wraps.
            let mut p = P::default();
            let x = p.input(0, DType::I32);
            let t = Terminal::Scan {
                column: x,
                op: ScanOp::Sum,
                exclusive,
            };
            let pl = plan(&[DType::I32], 0, vec![stage(1, p, None, t)]);
            check(pl, &[ColumnRef::I32(&is)], &[], false);
            // Custom: running max of i32 from a parameter identity.
            let mut p = P::default();
            let x = p.input(0, DType::I32);
            let t = Terminal::Scan {
                column: x,
                op: ScanOp::Custom(combine(BinaryOp::Max, DType::I32, 0)),
                exclusive,
            };
            let pl = plan(&[DType::I32], 1, vec![stage(1, p, None, t)]);
            check(pl, &[ColumnRef::I32(&is)], &[Scalar::I32(i32::MIN)], false);
            // Custom f64 sum.
            let ds: Vec<f64> = fs.iter().map(|&v| v as f64).collect();
            let mut p = P::default();
            let x = p.input(0, DType::F64);
            let t = Terminal::Scan {
                column: x,
                op: ScanOp::Custom(combine(BinaryOp::Add, DType::F64, 0)),
                exclusive,
            };
            let pl = plan(&[DType::F64], 1, vec![stage(1, p, None, t)]);
            check(pl, &[ColumnRef::F64(&ds)], &[Scalar::F64(0.0)], true);
        }
    }
}

#[test]
fn store_and_compact_keep_order() {
    let mut rng = Rng(17);
    for n in LENGTHS {
        let xs = rng.f32s(n);
        for filtered in [false, true] {
            let mut p = P::default();
            let x = p.input(0, DType::F32);
            let two = p.param(0, DType::F32);
            let y = p.bin(BinaryOp::Mul, x, two);
            let i = p.cast(y, DType::I32);
            let z = p.konst(Scalar::F32(0.0));
            let pos = p.bin(BinaryOp::Gt, x, z);
            let cols = smallvec![y, i, pos, x];
            let pred = filtered.then_some(pos);
            let pl = plan(
                &[DType::F32],
                1,
                vec![stage(1, p, pred, Terminal::Collect(cols))],
            );
            let out = check(pl, &[ColumnRef::F32(&xs)], &[Scalar::F32(2.5)], false);
            if let PlanOutput::Columns(c) = &out {
                let want = if filtered {
                    xs.iter().filter(|&&v| v > 0.0).count()
                } else {
                    n
                };
                assert_eq!(c[0].len(), want);
            }
        }
    }
}

#[test]
fn multi_stage_reads_earlier_outputs() {
    let mut rng = Rng(19);
    for n in [0, 5, LEAF + 3, 3 * LEAF + 517] {
        let xs = rng.f32s(n);
        let is: Vec<u32> = (0..n).map(|_| rng.next() as u32 % 1000).collect();
        // Stage 0: filter x > 0 and keep (x, i); stage 1: sum and argmax of
        // x * i over the survivors; stage 0 is a compaction.
        let mut p0 = P::default();
        let x = p0.input(0, DType::F32);
        let i = p0.input(1, DType::U32);
        let z = p0.konst(Scalar::F32(0.0));
        let keep = p0.bin(BinaryOp::Gt, x, z);
        let s0 = stage(2, p0, Some(keep), Terminal::Collect(smallvec![x, i]));
        let mut p1 = P::default();
        let a = p1.input(0, DType::F32);
        let b = p1.input(1, DType::U32);
        let bf = p1.cast(b, DType::F32);
        let prod = p1.bin(BinaryOp::Mul, a, bf);
        let mut s1 = stage(
            2,
            p1,
            None,
            Terminal::Reduce(smallvec![
                agg(AggKind::Sum, Some(prod)),
                agg(AggKind::ArgMax, Some(prod)),
                agg(AggKind::Count, None)
            ]),
        );
        s1.inputs = smallvec![
            StageInput::Stage {
                stage: 0,
                column: 0
            },
            StageInput::Stage {
                stage: 0,
                column: 1
            }
        ];
        let pl = plan(&[DType::F32, DType::U32], 0, vec![s0, s1]);
        check(pl, &[ColumnRef::F32(&xs), ColumnRef::U32(&is)], &[], true);

        // Stage 0: a scan; stage 1 stores the scan doubled.
        let mut p0 = P::default();
        let x = p0.input(0, DType::U32);
        let s0 = stage(
            1,
            p0,
            None,
            Terminal::Scan {
                column: x,
                op: ScanOp::Sum,
                exclusive: true,
            },
        );
        let mut p1 = P::default();
        let a = p1.input(0, DType::U32);
        let d = p1.bin(BinaryOp::Add, a, a);
        let mut s1 = stage(1, p1, None, Terminal::Collect(smallvec![d]));
        s1.inputs = smallvec![StageInput::Stage {
            stage: 0,
            column: 0
        }];
        let pl = plan(&[DType::U32], 0, vec![s0, s1]);
        check(pl, &[ColumnRef::U32(&is)], &[], false);
    }
}

/// Every binary arithmetic op, unary op and comparison on one dtype, with
/// operands drawn to hit zero divisors, `MIN / -1` and overflow.
fn all_ops_plan(ty: DType) -> (PhysicalPlan, usize) {
    let mut p = P::default();
    let a = p.input(0, ty);
    let b = p.input(1, ty);
    let k = p.param(0, ty);
    let mut cols: SmallVec<[Value; 4]> = SmallVec::new();
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Min,
        BinaryOp::Max,
    ] {
        cols.push(p.bin(op, a, b));
        cols.push(p.bin(op, a, k));
        cols.push(p.bin(op, k, b));
    }
    for op in [
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ] {
        cols.push(p.bin(op, a, b));
        cols.push(p.bin(op, k, a));
    }
    cols.push(p.un(UnaryOp::Neg, a));
    cols.push(p.un(UnaryOp::Abs, a));
    if ty.is_float() {
        for op in [
            UnaryOp::Sqrt,
            UnaryOp::Exp,
            UnaryOp::Ln,
            UnaryOp::Sin,
            UnaryOp::Cos,
            UnaryOp::Floor,
            UnaryOp::Ceil,
            UnaryOp::Round,
        ] {
            cols.push(p.un(op, a));
        }
    }
    for n in [0, 1, 2, 3, 7, 31, -1, -3] {
        cols.push(p.node(Node::Powi(a, n)));
    }
    cols.push(p.node(Node::MulAdd(a, b, k)));
    cols.push(p.node(Node::MulAdd(k, a, b)));
    let lt = p.bin(BinaryOp::Lt, a, b);
    cols.push(p.node(Node::Select(lt, a, b)));
    cols.push(p.node(Node::Select(lt, k, b)));
    let ge = p.bin(BinaryOp::Ge, a, k);
    let both = p.bin(BinaryOp::And, lt, ge);
    let either = p.bin(BinaryOp::Or, lt, ge);
    let not = p.un(UnaryOp::Not, both);
    cols.extend([both, either, not]);
    for to in DType::ALL {
        cols.push(p.cast(a, to));
    }
    let bc = p.cast(lt, ty);
    cols.push(bc);
    let n = cols.len();
    (
        plan(
            &[ty, ty],
            1,
            vec![stage(2, p, None, Terminal::Collect(cols))],
        ),
        n,
    )
}

fn int_values<T: Copy>(rng: &mut Rng, n: usize, special: &[T], conv: impl Fn(u64) -> T) -> Vec<T> {
    (0..n)
        .map(|_| {
            let r = rng.next();
            if r.is_multiple_of(4) {
                special[(r >> 8) as usize % special.len()]
            } else {
                conv(r >> 3)
            }
        })
        .collect()
}

/// Two input columns of `n` values of `ty` (the type's edge values among
/// them) and a parameter, for [`all_ops_plan`].
fn all_ops_inputs(ty: DType, n: usize, rng: &mut Rng) -> (Column, Column, Scalar) {
    macro_rules! go {
        ($t:ty, $v:ident, $special:expr, $conv:expr, $k:expr) => {{
            let a: Vec<$t> = int_values(rng, n, &$special, $conv);
            let b: Vec<$t> = int_values(rng, n, &$special, $conv);
            (Column::$v(a), Column::$v(b), Scalar::$v($k))
        }};
    }
    match ty {
        DType::I32 => go!(
            i32,
            I32,
            [0, -1, 1, i32::MIN, i32::MAX],
            |r| r as i32 % 1000,
            -1
        ),
        DType::U32 => go!(u32, U32, [0, 1, u32::MAX], |r| r as u32, 0),
        DType::I64 => go!(
            i64,
            I64,
            [0, -1, i64::MIN, i64::MAX],
            |r| r as i64,
            i64::MIN
        ),
        DType::U64 => go!(u64, U64, [0, 1, u64::MAX], |r| r % 77, 3),
        DType::F32 => go!(
            f32,
            F32,
            [0.0, -0.5, 2.5, f32::NAN, f32::INFINITY, -1e30, 3e9, -0.0],
            |r| (r % 20000) as f32 / 100.0 - 100.0,
            1.5
        ),
        DType::F64 => go!(
            f64,
            F64,
            [0.0, 0.5, -2.5, f64::NAN, f64::NEG_INFINITY, 1e300, -3e19],
            |r| (r % 20000) as f64 / 64.0 - 100.0,
            -0.75
        ),
        DType::Bool => unreachable!("no arithmetic on bool inputs"),
    }
}

/// The numeric dtypes (`all_ops_plan` does arithmetic on its inputs).
fn all_ops_types() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|t| *t != DType::Bool)
}

#[test]
fn every_op_and_dtype_matches_reference_semantics() {
    let n = BLOCK + 77;
    let mut rng = Rng(23);
    for ty in all_ops_types() {
        let (pl, _) = all_ops_plan(ty);
        let (a, b, k) = all_ops_inputs(ty, n, &mut rng);
        check(pl, &[a.as_ref(), b.as_ref()], &[k], false);
    }
}

/// A collect of one computed column has its last instruction write straight
/// into the result (`direct_store`, no copy from a register): for every
/// operation and dtype, on one block, across blocks and on the pool's
/// windows, it gives the reference's values.
#[test]
fn direct_stores_match_reference_semantics() {
    let mut rng = Rng(29);
    for ty in all_ops_types() {
        let (pl, _) = all_ops_plan(ty);
        let Terminal::Collect(cols) = &pl.stages[0].terminal else {
            unreachable!("all_ops_plan collects");
        };
        for n in [1, BLOCK - 1, 2 * BLOCK + 3] {
            let (a, b, k) = all_ops_inputs(ty, n, &mut rng);
            for &c in cols {
                let mut one = pl.clone();
                one.stages[0].terminal = Terminal::Collect(smallvec![c]);
                let prog = BlockProgram::compile(&one).unwrap();
                assert!(prog.stages[0].direct_store, "{ty}: {}", prog.stages[0]);
                check(one, &[a.as_ref(), b.as_ref()], &[k], false);
            }
        }
    }
}

/// What `direct_store` must not take: several columns, a predicate, a
/// column that is an input or a uniform. (A lone computed column is always
/// the last instruction's: the compiler drops instructions nothing reads.)
#[test]
fn direct_store_only_for_one_computed_column() {
    let direct = |pred: bool, cols: fn(&[Value; 4]) -> SmallVec<[Value; 4]>| {
        let mut p = P::default();
        let x = p.input(0, DType::F32);
        let two = p.param(0, DType::F32);
        let y = p.bin(BinaryOp::Mul, x, two);
        let z = p.un(UnaryOp::Sqrt, x);
        let keep = p.bin(BinaryOp::Gt, x, two);
        let vals = [x, two, y, z];
        let pl = plan(
            &[DType::F32],
            1,
            vec![stage(
                1,
                p,
                pred.then_some(keep),
                Terminal::Collect(cols(&vals)),
            )],
        );
        let prog = BlockProgram::compile(&pl).unwrap();
        let xs = Rng(31).f32s(BLOCK + 5);
        check(pl, &[ColumnRef::F32(&xs)], &[Scalar::F32(0.5)], false);
        prog.stages[0].direct_store
    };
    assert!(direct(false, |v| smallvec![v[3]]));
    assert!(!direct(true, |v| smallvec![v[3]]), "filtered");
    assert!(!direct(false, |v| smallvec![v[2], v[3]]), "two columns");
    assert!(!direct(false, |v| smallvec![v[0]]), "an input");
    assert!(!direct(false, |v| smallvec![v[1]]), "a uniform");
    // `y` is computed before `z` but only `y` is collected: `z` is dead,
    // so `y` is the last instruction.
    assert!(direct(false, |v| smallvec![v[2]]));
}

/// A one-stage collect over input 0 of `ty` (`x`) with parameter 0 (`k`)
/// of `t = sqrt(x) op1 k` and `y = t op2 x` (`t_first`) or `x op2 t`, the
/// shape of `sqrt(x) * 3 - x`; `cols` picks the collected columns from
/// `t` and `y`, and may add instructions.
fn sqrt_chain(
    ty: DType,
    op1: BinaryOp,
    op2: BinaryOp,
    t_first: bool,
    cols: impl FnOnce(&mut P, Value, Value) -> SmallVec<[Value; 4]>,
) -> PhysicalPlan {
    let mut p = P::default();
    let x = p.input(0, ty);
    let k = p.param(0, ty);
    let r = p.un(UnaryOp::Sqrt, x);
    let t = p.bin(op1, r, k);
    let y = if t_first {
        p.bin(op2, t, x)
    } else {
        p.bin(op2, x, t)
    };
    let cols = cols(&mut p, t, y);
    plan(&[ty], 1, vec![stage(1, p, None, Terminal::Collect(cols))])
}

/// A float `+ - *` read only by the next `+ - *` is fused into it
/// ([`Instr::Chain`]), with the bits of the two instructions, in each
/// operand position, on f32 and f64, with a direct store or into a
/// register; never when its result is read again.
#[test]
fn chained_binaries_match_reference_semantics() {
    use super::program::Instr;
    let chains = |prog: &BlockProgram| {
        prog.stages[0]
            .instrs
            .iter()
            .filter(|i| matches!(i, Instr::Chain { .. }))
            .count()
    };
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];
    let mut rng = Rng(37);
    for ty in [DType::F32, DType::F64] {
        let n = 2 * BLOCK + 3;
        let (xs, k) = match ty {
            DType::F32 => (Column::F32(rng.f32s(n)), Scalar::F32(1.75)),
            _ => (Column::F64(rng.f64s(n)), Scalar::F64(1.75)),
        };
        for op1 in ops {
            for op2 in ops {
                for t_first in [true, false] {
                    let pl = sqrt_chain(ty, op1, op2, t_first, |_, _, y| smallvec![y]);
                    let prog = BlockProgram::compile(&pl).unwrap();
                    assert_eq!(
                        chains(&prog),
                        1,
                        "{op1} {op2} {t_first}: {}",
                        prog.stages[0]
                    );
                    check(pl, &[xs.as_ref()], &[k], false);
                }
            }
        }
        // The chain into a register (not the last instruction), in place
        // of its first operand.
        let (sub, mul) = (BinaryOp::Sub, BinaryOp::Mul);
        let pl = sqrt_chain(ty, mul, sub, true, |p, _, y| smallvec![p.bin(mul, y, y)]);
        let prog = BlockProgram::compile(&pl).unwrap();
        assert_eq!(chains(&prog), 1, "{}", prog.stages[0]);
        assert!(
            prog.stages[0].to_string().contains("r0:f")
                && prog.stages[0]
                    .to_string()
                    .contains("= sub (mul r0, u1), in0"),
            "{}",
            prog.stages[0]
        );
        check(pl, &[xs.as_ref()], &[k], false);
        // `t` collected too: its register is read after the chain's pair.
        let pl = sqrt_chain(ty, mul, sub, true, |_, t, y| smallvec![t, y]);
        assert_eq!(chains(&BlockProgram::compile(&pl).unwrap()), 0);
        check(pl, &[xs.as_ref()], &[k], false);
        // `t` read by a later instruction.
        let pl = sqrt_chain(ty, mul, sub, true, |p, t, y| smallvec![p.bin(mul, y, t)]);
        let prog = BlockProgram::compile(&pl).unwrap();
        assert!(
            !prog.stages[0].to_string().contains("sub (mul"),
            "{}",
            prog.stages[0]
        );
        check(pl, &[xs.as_ref()], &[k], false);
    }
    // The text form.
    let pl = sqrt_chain(DType::F32, BinaryOp::Mul, BinaryOp::Sub, true, |_, _, y| {
        smallvec![y]
    });
    let text = BlockProgram::compile(&pl).unwrap().to_string();
    assert!(text.contains(":f32 = sub (mul r0, u1), in0"), "{text}");
}

#[test]
fn bool_columns_cast_and_select() {
    let n = 2 * BLOCK + 5;
    let mut rng = Rng(29);
    let bs: Vec<bool> = (0..n).map(|_| rng.next().is_multiple_of(3)).collect();
    let mut p = P::default();
    let b = p.input(0, DType::Bool);
    let t = p.konst(Scalar::Bool(true));
    let eq = p.bin(BinaryOp::Eq, b, t);
    let lt = p.bin(BinaryOp::Lt, b, t);
    let f = p.cast(b, DType::F64);
    let i = p.cast(b, DType::U64);
    let sel = p.node(Node::Select(b, f, f));
    let cols = smallvec![b, eq, lt, f, i, sel];
    let pl = plan(
        &[DType::Bool],
        0,
        vec![stage(1, p, Some(b), Terminal::Collect(cols))],
    );
    check(pl, &[ColumnRef::Bool(&bs)], &[], false);
    let mut p = P::default();
    let b = p.input(0, DType::Bool);
    let aggs = smallvec![
        agg(AggKind::Any, Some(b)),
        agg(AggKind::All, Some(b)),
        agg(AggKind::Count, None)
    ];
    let pl = plan(
        &[DType::Bool],
        0,
        vec![stage(1, p, Some(b), Terminal::Reduce(aggs))],
    );
    check(pl, &[ColumnRef::Bool(&bs)], &[], false);
}

#[test]
fn enumerate_zip_skip_take() {
    let mut rng = Rng(31);
    let xs = rng.f32s(3 * LEAF + 11);
    let ys: Vec<i64> = (0..2 * LEAF + 999)
        .map(|_| rng.next() as i64 % 50)
        .collect();
    for (skip, take) in [
        (0u64, u64::MAX),
        (5, 100),
        (LEAF as u64 - 3, 2 * LEAF as u64),
        (10_000_000, 5),
    ] {
        let mut p = P::default();
        let x = p.input(0, DType::F32);
        let y = p.input(1, DType::I64);
        let e = p.0.push_typed(Node::Index(0), DType::U64).unwrap();
        let yf = p.cast(y, DType::F32);
        let s = p.bin(BinaryOp::Add, x, yf);
        let ei = p.cast(e, DType::I64);
        let odd = {
            let two = p.konst(Scalar::U64(2));
            let r = p.bin(BinaryOp::Rem, e, two);
            let one = p.konst(Scalar::U64(1));
            p.bin(BinaryOp::Eq, r, one)
        };
        let mut st = stage(2, p, None, Terminal::Collect(smallvec![s, e, ei]));
        st.enumerates = 1;
        st.range = smallvec![
            RangeOp::Join(0),
            RangeOp::Join(1),
            RangeOp::Enumerate(0),
            RangeOp::Skip(0),
            RangeOp::Take(1)
        ];
        let params = [Scalar::U64(skip), Scalar::U64(take)];
        let inputs = [ColumnRef::F32(&xs), ColumnRef::I64(&ys)];
        check(
            plan(&[DType::F32, DType::I64], 2, vec![st.clone()]),
            &inputs,
            &params,
            false,
        );
        st.predicate = Some(odd);
        check(
            plan(&[DType::F32, DType::I64], 2, vec![st.clone()]),
            &inputs,
            &params,
            false,
        );
        st.predicate = None;
        st.terminal = Terminal::Reduce(smallvec![
            agg(AggKind::ArgMin, Some(s)),
            agg(AggKind::Sum, Some(ei))
        ]);
        check(
            plan(&[DType::F32, DType::I64], 2, vec![st]),
            &inputs,
            &params,
            true,
        );
    }
}

#[test]
fn uniform_columns_and_predicates() {
    let xs = Rng(37).f32s(LEAF + 9);
    let mut p = P::default();
    let _x = p.input(0, DType::F32);
    let k = p.param(0, DType::F32);
    let k2 = p.bin(BinaryOp::Mul, k, k);
    let t = p.konst(Scalar::Bool(true));
    let aggs = smallvec![
        agg(AggKind::Sum, Some(k2)),
        agg(AggKind::Count, None),
        agg(AggKind::Max, Some(k))
    ];
    let pl = plan(
        &[DType::F32],
        1,
        vec![stage(1, p, Some(t), Terminal::Reduce(aggs))],
    );
    check(pl, &[ColumnRef::F32(&xs)], &[Scalar::F32(1.5)], true);
    let mut p = P::default();
    let _x = p.input(0, DType::F32);
    let k = p.param(0, DType::F32);
    let f = p.konst(Scalar::Bool(false));
    let pl = plan(
        &[DType::F32],
        1,
        vec![stage(1, p, Some(f), Terminal::Collect(smallvec![k]))],
    );
    check(pl, &[ColumnRef::F32(&xs)], &[Scalar::F32(1.5)], false);
}

#[test]
fn mul_add_stays_fused() {
    // a * b + c where rounding the product first changes the result.
    let a = vec![1.0f32 + f32::EPSILON; BLOCK + 3];
    let b = vec![1.0f32 - f32::EPSILON; BLOCK + 3];
    let mut p = P::default();
    let x = p.input(0, DType::F32);
    let y = p.input(1, DType::F32);
    let c = p.param(0, DType::F32);
    let m = p.node(Node::MulAdd(x, y, c));
    let pl = plan(
        &[DType::F32, DType::F32],
        1,
        vec![stage(2, p, None, Terminal::Collect(smallvec![m]))],
    );
    let out = check(
        pl,
        &[ColumnRef::F32(&a), ColumnRef::F32(&b)],
        &[Scalar::F32(-1.0)],
        false,
    );
    let want = a[0].mul_add(b[0], -1.0);
    assert_ne!(
        want,
        a[0] * b[0] - 1.0,
        "the test needs a case where fusing matters"
    );
    assert_eq!(
        out,
        PlanOutput::Columns(vec![Column::F32(vec![want; BLOCK + 3])])
    );
}

#[test]
fn bad_runs_are_errors_not_panics() {
    let (p, y) = affine_f32();
    let pl = plan(
        &[DType::F32],
        1,
        vec![stage(
            1,
            p,
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Sum, Some(y))]),
        )],
    );
    let cp = CompiledPlan::new(pl, 0, Default::default());
    let xs = [1.0f32, 2.0];
    let is = [1i32, 2];
    for (inputs, params) in [
        (vec![Input::Host(ColumnRef::F32(&xs))], vec![]),
        (
            vec![Input::Host(ColumnRef::I32(&is))],
            vec![Scalar::F32(1.0)],
        ),
        (vec![], vec![Scalar::F32(1.0)]),
    ] {
        let job = Job {
            plan: &cp,
            inputs: &inputs,
            params: &params,
            keep_on_device: false,
        };
        assert!(CpuSimd.execute(&job, &mut RunStats::default()).is_err());
        assert!(CpuParallel::default()
            .execute(&job, &mut RunStats::default())
            .is_err());
    }
    // An ill-typed aggregate is declined before any work.
    let mut p = P::default();
    let x = p.input(0, DType::F32);
    let pl = plan(
        &[DType::F32],
        0,
        vec![stage(
            1,
            p,
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Any, Some(x))]),
        )],
    );
    assert!(CpuSimd.supports(&pl).is_err());
}

#[test]
fn compiles_once_and_allocates_little_for_reductions() {
    let (p, y) = affine_f32();
    let pl = plan(
        &[DType::F32],
        1,
        vec![stage(
            1,
            p,
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Sum, Some(y))]),
        )],
    );
    let cp = CompiledPlan::new(pl, 0, Default::default());
    let xs = vec![1.0f32; 1 << 20];
    let params = [Scalar::F32(2.0)];
    let (out, first) = run_backend(&CpuSimd, &cp, &[ColumnRef::F32(&xs)], &params);
    assert_eq!(
        out,
        PlanOutput::Aggregates(smallvec![Scalar::F32(3.0 * (1 << 20) as f32)])
    );
    assert!(!first.compile_cached);
    let (_, second) = run_backend(&CpuSimd, &cp, &[ColumnRef::F32(&xs)], &params);
    assert!(second.compile_cached);
    assert!(second.bytes_allocated < 64 * 1024, "{second:?}");
    assert_eq!(second.parallelism, 1);
    let (_, par) = run_backend(
        &CpuParallel::default(),
        &cp,
        &[ColumnRef::F32(&xs)],
        &params,
    );
    assert!(par.launches >= 1 && par.parallelism >= 1, "{par:?}");
    // Never more threads than tasks: one leaf is one task, on one thread.
    let threads = rayon::current_num_threads() as u32;
    assert_eq!(par.parallelism, threads.min(par.launches), "{par:?}");
    let (_, one_leaf) = run_backend(
        &CpuParallel::default(),
        &cp,
        &[ColumnRef::F32(&xs[..1000])],
        &params,
    );
    assert_eq!((one_leaf.launches, one_leaf.parallelism), (1, 1));
    assert!(
        par.bytes_allocated < 64 * 1024 * par.launches as u64,
        "{par:?}"
    );
}

#[test]
fn block_program_text_form() {
    let (p, y) = affine_f32();
    let pl = plan(
        &[DType::F32],
        1,
        vec![stage(
            1,
            p,
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Sum, Some(y))]),
        )],
    );
    let prog = BlockProgram::compile(&pl).unwrap();
    // The add and the multiply under it are fused into the sum: no
    // register, one pass over the input.
    assert_eq!(
        prog.to_string(),
        "stage 0:\n  regs:\n  reduce: sum(add (mul in0, u1), u2:f32)\n"
    );
}

/// `cargo test --release --lib backend::cpu_simd::tests::bench -- --ignored --nocapture`
#[test]
#[ignore = "timing; run in release"]
fn bench_sum_affine_against_hand_written_simd() {
    use std::time::Instant;
    let n = 10_000_000;
    let xs = Rng(1).f32s(n);
    let (p, y) = affine_f32();
    let pl = plan(
        &[DType::F32],
        1,
        vec![stage(
            1,
            p,
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Sum, Some(y))]),
        )],
    );
    let cp = CompiledPlan::new(pl, 0, Default::default());
    let params = [Scalar::F32(2.0)];
    let best = |f: &mut dyn FnMut() -> f32| {
        let mut t = f64::MAX;
        let mut v = 0.0;
        for _ in 0..15 {
            let s = Instant::now();
            v = f();
            t = t.min(s.elapsed().as_secs_f64());
        }
        (t, v)
    };
    let (hand, hv) = best(&mut || {
        let xs = std::hint::black_box(&xs);
        use wide::f32x8;
        let two = f32x8::splat(2.0);
        let one = f32x8::splat(1.0);
        let mut acc = [f32x8::ZERO; 8];
        let chunks = xs.chunks_exact(64);
        let rem = chunks.remainder();
        for c in chunks {
            for (k, a) in acc.iter_mut().enumerate() {
                let v = f32x8::from(<[f32; 8]>::try_from(&c[k * 8..k * 8 + 8]).unwrap());
                *a += v * two + one;
            }
        }
        let mut s = acc.iter().fold(f32x8::ZERO, |a, &b| a + b).reduce_add();
        for &v in rem {
            s += v * 2.0 + 1.0;
        }
        s
    });
    let (simd, sv) = best(
        &mut || match run_backend(&CpuSimd, &cp, &[ColumnRef::F32(&xs)], &params).0 {
            PlanOutput::Aggregates(a) => match a[0] {
                Scalar::F32(v) => v,
                _ => 0.0,
            },
            _ => 0.0,
        },
    );
    let (par, pv) = best(&mut || match run_backend(
        &CpuParallel::default(),
        &cp,
        &[ColumnRef::F32(&xs)],
        &params,
    )
    .0
    {
        PlanOutput::Aggregates(a) => match a[0] {
            Scalar::F32(v) => v,
            _ => 0.0,
        },
        _ => 0.0,
    });
    let gb = |t: f64| (n * 4) as f64 / t / 1e9;
    println!("isa {}", isa_name());
    println!(
        "hand f32x8 x8: {:.3} ms {:.1} GB/s ({hv})",
        hand * 1e3,
        gb(hand)
    );
    println!(
        "cpu-simd:      {:.3} ms {:.1} GB/s ({sv}) ratio {:.2}",
        simd * 1e3,
        gb(simd),
        hand / simd
    );
    println!(
        "cpu-parallel:  {:.3} ms {:.1} GB/s ({pv}) ratio {:.2}",
        par * 1e3,
        gb(par),
        hand / par
    );
}

/// The cost model prices `cpu-parallel` by leaves of this backend's size.
#[test]
fn the_cost_model_knows_the_leaf() {
    assert_eq!(crate::cost::PARALLEL_LEAF, super::LEAF as f64);
}

/// A histogram's key over input 0 of type `ty` (the shape `histogram`
/// traces), its uniforms params 0..8, with `lt` as the below test (`Le`
/// for a key of another shape).
fn histogram_key(ty: DType, below_op: BinaryOp) -> (P, Value) {
    let mut p = P::default();
    let x = p.input(0, ty);
    let v = if ty.is_float() {
        x
    } else {
        p.cast(x, DType::F64)
    };
    let fty = if ty == DType::F32 {
        DType::F32
    } else {
        DType::F64
    };
    let lo = p.param(0, fty);
    let d = p.bin(BinaryOp::Sub, v, lo);
    let scale = p.param(1, fty);
    let m = p.bin(BinaryOp::Mul, d, scale);
    let f = p.un(UnaryOp::Floor, m);
    let i = p.cast(f, DType::I32);
    let last = p.param(2, DType::I32);
    let inside = p.bin(BinaryOp::Min, i, last);
    let hi = p.param(3, fty);
    let ge = p.bin(BinaryOp::Ge, v, hi);
    let above = p.param(4, DType::I32);
    let k = p.node(Node::Select(ge, above, inside));
    let lo_cmp = p.param(5, fty);
    let lt = p.bin(below_op, v, lo_cmp);
    let below = p.param(6, DType::I32);
    let k = p.node(Node::Select(lt, below, k));
    let ne = p.bin(BinaryOp::Ne, v, v);
    let nan = p.param(7, DType::I32);
    let k = p.node(Node::Select(ne, nan, k));
    let key = p.cast(k, DType::U32);
    (p, key)
}

#[test]
fn histogram_keys_are_one_kernel_with_the_instructions_results() {
    // Values at and around the bounds, NaN, infinities, -0.0, values past
    // i32 once scaled, subnormals, and a spread between.
    let mut xs: Vec<f64> = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        -1.0,
        3.0,
        3.0 - 1e-7,
        -1.0 - 1e-9,
        1e30,
        -1e30,
        5e-324,
        2.999_999_9,
    ];
    // Past `kernels::WIDE_BIN_COUNTS` positions too: the wide sub-counts.
    xs.extend((0..5 * LEAF + 517).map(|i| (i as f64 * 0.618_034).fract() * 5.0 - 1.5));
    let narrow: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let ints: Vec<i32> = xs.iter().map(|&x| (x * 1e6) as i32).collect();
    // lo, scale, last, hi, above, lo_cmp, below, nan: the histogram's own
    // uniforms (7 bins over [-1, 3)), then ones no histogram has (the
    // kernel must follow the expression, not the histogram's intent).
    let sets: [[f64; 8]; 2] = [
        [-1.0, 7.0 / 4.0, 6.0, 3.0, 8.0, -1.0, 7.0, 9.0],
        [
            0.5,
            1e9,
            1_000_000.0,
            2.0,
            -3.0,
            -0.5,
            2_000_000_000.0,
            -7.0,
        ],
    ];
    for (ty, col) in [
        (DType::F32, ColumnRef::F32(&narrow)),
        (DType::F64, ColumnRef::F64(&xs)),
        (DType::I32, ColumnRef::I32(&ints)),
    ] {
        let fty = if ty == DType::F32 {
            DType::F32
        } else {
            DType::F64
        };
        for set in &sets {
            let params: Vec<Scalar> = set
                .iter()
                .enumerate()
                .map(|(i, &v)| match i {
                    2 | 4 | 6 | 7 => Scalar::I32(v as i32),
                    _ => Scalar::F64(v).cast(fty),
                })
                .collect();
            for (below_op, filtered) in [
                (BinaryOp::Lt, false),
                (BinaryOp::Lt, true),
                (BinaryOp::Le, false),
            ] {
                let (mut p, key) = histogram_key(ty, below_op);
                let predicate = filtered.then(|| {
                    let x = p.input(0, ty);
                    let z = p.konst(Scalar::F64(0.25).cast(ty));
                    p.bin(BinaryOp::Gt, x, z)
                });
                let pl = plan(
                    &[ty],
                    8,
                    vec![stage(
                        1,
                        p,
                        predicate,
                        Terminal::CountByKey { key, keys: 12 },
                    )],
                );
                let prog = BlockProgram::compile(&pl).unwrap();
                let fused = matches!(
                    prog.stages[0].terminal,
                    program::TermProgram::CountByKey { bins: Some(_), .. }
                );
                assert_eq!(fused, below_op == BinaryOp::Lt, "{ty:?} {below_op:?}");
                if fused && ty.is_float() && !filtered {
                    assert!(prog.stages[0].instrs.is_empty(), "{prog:?}");
                }
                for n in LENGTHS.into_iter().chain([xs.len()]) {
                    let n = n.min(xs.len());
                    let col = match col {
                        ColumnRef::F32(c) => ColumnRef::F32(&c[..n]),
                        ColumnRef::F64(c) => ColumnRef::F64(&c[..n]),
                        ColumnRef::I32(c) => ColumnRef::I32(&c[..n]),
                        _ => unreachable!(),
                    };
                    check(pl.clone(), &[col], &params, false);
                }
            }
        }
    }
}

/// A histogram's key uniforms: 7 bins over [-1, 3), its slots 7, 8 and 9.
fn seven_bins<T: From<f32>>() -> super::kernels::BinParams<T> {
    super::kernels::BinParams {
        lo: T::from(-1.0),
        scale: T::from(7.0 / 4.0),
        hi: T::from(3.0),
        lo_cmp: T::from(-1.0),
        last: 6,
        below: 7,
        above: 8,
        nan: 9,
    }
}

/// `bin_keys` gives, on every instruction set and in `u16` and `u32`,
/// what the key's expression gives value by value (`kernels::bin_key`,
/// then the clamp to the last key): in its short form (the bounds a
/// histogram is asked for, including a last bin past the last key, a NaN
/// `hi`, slots past the last key and a scale that overflows) and in its
/// general form (bounds only a hand-written program has: `lo_cmp` below
/// `lo`, a negative, infinite or NaN scale, an infinite `lo`, a negative
/// last bin), over random values, bin edges, NaN, infinities, signed
/// zeros, subnormals and values far outside.
#[test]
fn bin_keys_agree_with_the_key_expression() {
    use super::isa;
    use super::kernels::{bin_key, BinLane, BinParams, KeyLane};
    fn check<T: BinLane + std::fmt::Debug, K: KeyLane + std::fmt::Debug + PartialEq>(
        what: &str,
        x: &[T],
        p: BinParams<T>,
        last_key: u32,
    ) {
        let want: Vec<K> = x
            .iter()
            .map(|&v| K::of(bin_key(v, &p).min(last_key)))
            .collect();
        for i in Isa::all_here() {
            let mut got = vec![K::default(); x.len()];
            isa::bin_keys(i, x, &mut got, p, last_key);
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{what}, {}: key of {:?} ({p:?})", i.name(), x[j]);
            }
        }
    }
    let base = seven_bins::<f64>();
    let cases: [(&str, BinParams<f64>, u32); 13] = [
        ("a histogram", base, 9),
        (
            "last bin past the last key",
            BinParams { last: 20, ..base },
            9,
        ),
        (
            "slots past the last key",
            BinParams {
                below: -5,
                above: 40,
                nan: 12,
                ..base
            },
            9,
        ),
        (
            "NaN hi",
            BinParams {
                hi: f64::NAN,
                ..base
            },
            9,
        ),
        (
            "scale that overflows",
            BinParams {
                scale: 1e300,
                ..base
            },
            9,
        ),
        (
            "lo_cmp above lo",
            BinParams {
                lo_cmp: 0.5,
                ..base
            },
            9,
        ),
        (
            "lo_cmp below lo",
            BinParams {
                lo_cmp: -2.0,
                ..base
            },
            9,
        ),
        (
            "negative scale",
            BinParams {
                scale: -2.0,
                ..base
            },
            9,
        ),
        (
            "infinite scale",
            BinParams {
                scale: f64::INFINITY,
                ..base
            },
            9,
        ),
        (
            "NaN scale",
            BinParams {
                scale: f64::NAN,
                ..base
            },
            9,
        ),
        (
            "infinite lo",
            BinParams {
                lo: f64::NEG_INFINITY,
                lo_cmp: f64::NEG_INFINITY,
                ..base
            },
            9,
        ),
        ("negative last bin", BinParams { last: -3, ..base }, 9),
        (
            "NaN lo_cmp",
            BinParams {
                lo_cmp: f64::NAN,
                ..base
            },
            9,
        ),
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut xs: Vec<f64> = (0..BLOCK + 37).map(|_| rng.f64() * 6.0 - 2.0).collect();
    // Bin edges and their neighbours, then values of their own kind.
    for b in 0..=8 {
        let edge = -1.0 + b as f64 * 4.0 / 7.0;
        xs.extend([edge, edge - 1e-9, edge + 1e-9]);
    }
    xs.extend([
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        -1.0,
        3.0,
        3.0 - 1e-12,
        -1.000_001,
        1e300,
        -1e300,
        f64::MAX,
        f64::MIN,
    ]);
    for (what, p, last_key) in cases {
        check::<f64, u32>(what, &xs, p, last_key);
        check::<f64, u16>(what, &xs, p, last_key);
        let narrow = BinParams {
            lo: p.lo as f32,
            scale: p.scale as f32,
            hi: p.hi as f32,
            lo_cmp: p.lo_cmp as f32,
            last: p.last,
            below: p.below,
            above: p.above,
            nan: p.nan,
        };
        let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
        check::<f32, u32>(what, &x32, narrow, last_key);
        check::<f32, u16>(what, &x32, narrow, last_key);
    }
}

/// `count_bin_keys` counts what a plain loop counts, on every instruction
/// set, in `u16` and `u32`, with and without a mask, at lengths around its
/// groups: over the wide layout with room for its mask (`bin_stride`, as a
/// histogram's run of many positions allocates it), over wide arrays just
/// long enough, where it clamps instead, and over the four arrays of a
/// small run.
#[test]
fn count_bin_keys_counts_as_a_plain_loop() {
    use super::isa;
    use super::kernels::{bin_stride, KeyLane, BIN_SUB_COUNTS, SUB_COUNTS};
    fn check<K: KeyLane + Into<u32>>(raw: &[u32], keep: &[bool], keys: usize) {
        let last_key = keys as u32 - 1;
        let ks: Vec<K> = raw.iter().map(|&k| K::of(k)).collect();
        let layouts = [
            (BIN_SUB_COUNTS, bin_stride(keys), true),
            (BIN_SUB_COUNTS, keys, true),
            (SUB_COUNTS, keys, false),
        ];
        for (arrays, stride, wide) in layouts {
            for mask in [None, Some(keep)] {
                let mut want = vec![0u64; keys];
                for (j, &k) in raw.iter().enumerate() {
                    if mask.is_none_or(|m| m[j]) {
                        want[(k as usize).min(keys - 1)] += 1;
                    }
                }
                for i in Isa::all_here() {
                    let mut sub = vec![0u32; arrays * stride];
                    isa::count_bin_keys(i, &mut sub, &ks, last_key, wide, mask, &[]);
                    let mut got = vec![0u64; keys];
                    for part in sub.chunks_exact(stride) {
                        assert!(
                            part[keys..].iter().all(|&c| c == 0),
                            "a count past the keys"
                        );
                        got.iter_mut().zip(part).for_each(|(g, &c)| *g += c as u64);
                    }
                    let what = format!("{}: {} keys, {arrays} x {stride}", i.name(), raw.len());
                    assert_eq!(got, want, "{what}, mask {}", mask.is_some());
                }
            }
        }
    }
    let mut rng = Rng(0x6a09_e667_f3bc_c909);
    let keep: Vec<bool> = (0..BLOCK).map(|_| !rng.next().is_multiple_of(3)).collect();
    for keys in [1usize, 7, 259, 300] {
        for n in [0, 1, 7, 8, 9, 31, 32, 33, 100, BLOCK] {
            let raw: Vec<u32> = (0..n).map(|_| (rng.next() % keys as u64) as u32).collect();
            check::<u16>(&raw, &keep[..n], keys);
            check::<u32>(&raw, &keep[..n], keys);
        }
    }
}

/// The `wide` kernels (an AVX-512 twin where the CPU has it) give the bits
/// of the baseline and AVX2 twins: the moments of every lane type, with
/// and without a mask, at lengths around the kernels' chunk of sixteen and
/// a block, over data with outliers, NaN, infinities and values far from
/// zero; and a histogram's keys over bounds, NaN and infinities.
#[test]
fn wide_kernels_give_the_same_bits_on_every_isa() {
    use super::isa;
    let isas = Isa::all_here();
    println!("instruction sets here: {isas:?}");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut xs: Vec<f64> = (0..BLOCK + 37).map(|_| rng.f64()).collect();
    for (i, v) in [
        (3, 1e8),
        (17, -1e8),
        (40, 1e300),
        (41, -1e300),
        (90, 5e-324),
    ] {
        xs[i] = v;
    }
    let far: Vec<f64> = (0..BLOCK).map(|i| 1e8 + (i % 7) as f64 / 1024.0).collect();
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0];
    let mask: Vec<bool> = (0..xs.len())
        .map(|_| !rng.next().is_multiple_of(3))
        .collect();
    let lens = (0..70).chain([BLOCK - 1, BLOCK, BLOCK + 37]);
    fn bits(m: crate::semantics::Moments) -> (u64, u64, u64) {
        (m.n, m.mean.to_bits(), m.m2.to_bits())
    }
    fn same<T: super::kernels::ToF64 + std::fmt::Debug>(isas: &[Isa], x: &[T], m: Option<&[bool]>) {
        let want = bits(isa::moments(Isa::Portable, x, m));
        for &i in isas {
            let got = bits(isa::moments(i, x, m));
            assert_eq!(got, want, "{} moments of {} values", i.name(), x.len());
        }
    }
    for data in [&xs, &far] {
        for n in lens.clone() {
            let n = n.min(data.len());
            let d = &data[..n];
            let narrow: Vec<f32> = d.iter().map(|&v| v as f32).collect();
            let ints: Vec<i32> = d.iter().map(|&v| (v * 1e6) as i32).collect();
            let wide_ints: Vec<u64> = d.iter().map(|&v| (v.abs() * 1e9) as u64).collect();
            for m in [None, Some(&mask[..n])] {
                same(&isas, d, m);
                same(&isas, &narrow, m);
                same(&isas, &ints, m);
                same(&isas, &wide_ints, m);
            }
        }
    }
    // One special value at each position of a chunk: the blocks that are
    // redone in two passes.
    for s in special {
        for at in 0..17 {
            let mut d = xs[..40].to_vec();
            d[at] = s;
            same(&isas, &d, None);
            same(
                &isas,
                &d.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                None,
            );
        }
    }
    // A histogram's keys: 7 bins over [-1, 3), the last key 9.
    let p = seven_bins::<f32>();
    let mut keys_of: Vec<f32> = xs.iter().map(|&v| (v * 2.0) as f32).collect();
    keys_of.extend(special.iter().map(|&v| v as f32));
    keys_of.extend([-1.0, 3.0, 3.0 - 1e-7, -1.000_001, 1e30, -1e30]);
    for n in (0..70).chain([BLOCK - 1, BLOCK, keys_of.len()]) {
        let x = &keys_of[..n.min(keys_of.len())];
        let mut want = vec![0u32; x.len()];
        isa::bin_keys(Isa::Portable, x, &mut want, p, 9);
        for &i in &isas {
            let mut got = vec![u32::MAX; x.len()];
            isa::bin_keys(i, x, &mut got, p, 9);
            assert_eq!(got, want, "{} keys of {} values", i.name(), x.len());
        }
    }
}
