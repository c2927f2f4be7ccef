//! The PTX writer without a GPU: `ptxas` validates the text for sm_70,
//! sm_80 and sm_90, and a strict PTX interpreter (`ptx_interp`) runs it
//! through the library's own host protocol (`backend::ptx::run_plan` and
//! `run_plan_to_host`), compared with `cpu-scalar` on hand-built stages,
//! on real queries' plans and on random stages; and the order of chunked
//! downloads against the kernels is checked on a recording device.
//!
//! `ptxas` is found through `PTXAS`, then `PATH`, then the development
//! install in `.tools/pip`. When it is missing the ptxas tests print why
//! and pass, unless `COMPUTEQ_REQUIRE` lists `ptxas`.

#[path = "support/faults.rs"]
mod faults;
#[path = "support/golden.rs"]
mod golden;
mod ptx_interp;

use computeq::plumbing::backends::cpu_scalar;
use computeq::plumbing::backends::ptx::{
    compile, cuda_caps, download_column, run_plan, run_plan_to_host, BufferArg, PtxDevice, PtxPlan,
    RunInput, RunLimits, RunOutput,
};
use computeq::plumbing::codegen::ptx::{self, PtxModule, PtxOptions};
use computeq::plumbing::codegen::{lower_stage, Caps};
use computeq::plumbing::expr::{BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp, Value};
use computeq::plumbing::{
    AggKind, Aggregate, Combine, JoinKind, PhysicalPlan, PlanOutput, RangeOp, ScanOp, Stage,
    StageInput, Terminal,
};
use computeq::plumbing::{BackendError, BackendKind, Phase, RunStats};
use computeq::plumbing::{Column, ColumnRef};
use computeq::{Config, Engine};
use golden::Golden;
use proptest::prelude::*;
use ptx_interp::backend::InterpBackend;
use ptx_interp::device::{InterpBuffer, InterpPending, LoadedModule};
use ptx_interp::InterpDevice;
use smallvec::smallvec;
use std::rc::Rc;
use std::sync::Arc;

// ------------------------------------------------------------------ ptxas

use ptx_interp::ptxas::{check as ptxas_check, find as ptxas};

// ------------------------------------------------------------------ plans

/// Builds a one-stage plan over inputs of `types` (one `Input` node each).
fn one_stage(
    types: &[DType],
    param_count: usize,
    build: impl FnOnce(&mut ExprArena, &[Value]) -> (Option<Value>, Terminal),
) -> PhysicalPlan {
    let mut p = ExprArena::new();
    let xs: Vec<Value> = types
        .iter()
        .enumerate()
        .map(|(s, &t)| p.push_typed(Node::Input(s as u16), t).unwrap())
        .collect();
    let (predicate, terminal) = build(&mut p, &xs);
    PhysicalPlan {
        input_dtypes: types.iter().copied().collect(),
        param_count,
        stages: smallvec![Stage {
            inputs: (0..types.len() as u16).map(StageInput::Source).collect(),
            enumerates: 0,
            range: (0..types.len() as u16).map(RangeOp::Join).collect(),
            program: p,
            predicate,
            terminal,
        }],
    }
}

/// A sort by `keys` (value, descending) writing `columns`.
fn sort_terminal(keys: &[(Value, bool)], columns: &[Value]) -> Terminal {
    Terminal::Sort {
        keys: keys
            .iter()
            .map(|&(value, descending)| computeq::plumbing::SortKey { value, descending })
            .collect(),
        columns: columns.iter().copied().collect(),
        fetch: None,
    }
}

fn c(p: &mut ExprArena, s: Scalar) -> Value {
    p.push(Node::Const(s)).unwrap()
}

fn bin(p: &mut ExprArena, op: BinaryOp, a: Value, b: Value) -> Value {
    p.push(Node::Binary(op, a, b)).unwrap()
}

fn agg(kind: AggKind, column: Option<Value>) -> Aggregate {
    Aggregate { kind, column }
}

/// `x * 2 + 1` collected.
fn map_plan(t: DType) -> PhysicalPlan {
    one_stage(&[t], 0, |p, x| {
        let two = c(p, Scalar::I64(2).cast(t));
        let one = c(p, Scalar::I64(1).cast(t));
        let m = bin(p, BinaryOp::Mul, x[0], two);
        let a = bin(p, BinaryOp::Add, m, one);
        (None, Terminal::Collect(smallvec![a]))
    })
}

/// Every aggregate of `t` in one pass, optionally with `x > 0` as filter.
fn multi_agg_plan(t: DType, filter: bool) -> PhysicalPlan {
    one_stage(&[t], 0, |p, x| {
        let zero = c(p, Scalar::zero(t));
        let gt = bin(p, BinaryOp::Gt, x[0], zero);
        let lt = bin(p, BinaryOp::Lt, x[0], zero);
        let aggs = smallvec![
            agg(AggKind::Sum, Some(x[0])),
            agg(AggKind::Min, Some(x[0])),
            agg(AggKind::Max, Some(x[0])),
            agg(AggKind::Count, None),
            agg(AggKind::ArgMin, Some(x[0])),
            agg(AggKind::ArgMax, Some(x[0])),
            agg(AggKind::Any, Some(lt)),
            agg(AggKind::All, Some(gt)),
        ];
        (filter.then_some(gt), Terminal::Reduce(aggs))
    })
}

/// A combine `(a, b) -> a * b + p0` style program; `f` builds its body.
fn combine(
    t: DType,
    identity: u16,
    f: impl FnOnce(&mut ExprArena, Value, Value) -> Value,
) -> Combine {
    let mut p = ExprArena::new();
    let a = p.push_typed(Node::Input(0), t).unwrap();
    let b = p.push_typed(Node::Input(1), t).unwrap();
    let output = f(&mut p, a, b);
    Combine {
        program: p,
        output,
        identity,
    }
}

fn scan_plan(t: DType, custom: bool, exclusive: bool) -> PhysicalPlan {
    one_stage(&[t], custom as usize, |_, x| {
        let op = if custom {
            // "last non-zero": order-dependent, so the scan must keep order.
            ScanOp::Custom(combine(t, 0, |p, a, b| {
                let z = c(p, Scalar::zero(t));
                let nz = bin(p, BinaryOp::Ne, b, z);
                p.push(Node::Select(nz, b, a)).unwrap()
            }))
        } else {
            ScanOp::Sum
        };
        (
            None,
            Terminal::Scan {
                column: x[0],
                op,
                exclusive,
            },
        )
    })
}

fn compact_plan(t: DType) -> PhysicalPlan {
    one_stage(&[t, DType::I32], 0, |p, x| {
        let zero = c(p, Scalar::zero(DType::I32));
        let keep = bin(p, BinaryOp::Gt, x[1], zero);
        let neg = p.push(Node::Unary(UnaryOp::Neg, x[0])).unwrap();
        (Some(keep), Terminal::Collect(smallvec![neg, x[1]]))
    })
}

fn custom_reduce_plan(t: DType) -> PhysicalPlan {
    one_stage(&[t], 1, |_, x| {
        let comb = combine(t, 0, |p, a, b| {
            let z = c(p, Scalar::zero(t));
            let nz = bin(p, BinaryOp::Ne, b, z);
            p.push(Node::Select(nz, b, a)).unwrap()
        });
        (
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Custom(comb), Some(x[0]))]),
        )
    })
}

// ------------------------------------------------------------------ data

/// Deterministic values of `t` with the awkward ones mixed in.
fn column(t: DType, n: usize, seed: u64) -> Column {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut col = Column::with_capacity(t, n);
    for i in 0..n {
        let r = next();
        let special = r % 23 == 0;
        let v = match t {
            DType::Bool => Scalar::Bool(r & 1 == 1),
            DType::F32 | DType::F64 => {
                let specials = [
                    0.0,
                    -0.0,
                    1.0,
                    -1.0,
                    0.5,
                    -2.5,
                    f64::NAN,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    1e30,
                    -3e-40,
                ];
                let x = if special {
                    specials[(r >> 8) as usize % specials.len()]
                } else {
                    ((r >> 11) as f64 / (1u64 << 53) as f64) * 200.0 - 100.0
                };
                Scalar::F64(x).cast(t)
            }
            _ => {
                let specials = [
                    0i64,
                    1,
                    -1,
                    i64::MIN,
                    i64::MAX,
                    i32::MIN as i64,
                    i32::MAX as i64,
                    u32::MAX as i64,
                ];
                if special {
                    Scalar::I64(specials[(r >> 8) as usize % specials.len()]).cast(t)
                } else {
                    Scalar::I64((r >> 20) as i64 % 2001 - 1000 + (i as i64 % 3)).cast(t)
                }
            }
        };
        col.push(v);
    }
    col
}

// ------------------------------------------------------------------ running

fn small_caps() -> Caps {
    Caps {
        workgroup_size: 64,
        items_per_thread: 2,
        max_groups: 8,
        ..cuda_caps()
    }
}

/// Runs `plan` in the interpreter through the library's host protocol.
fn run_interp(
    plan: &PhysicalPlan,
    inputs: &[Column],
    params: &[Scalar],
    caps: &Caps,
    limits: RunLimits,
) -> Result<(PlanOutput, u64), String> {
    let ptx = compile(plan, caps, &PtxOptions::default()).map_err(|e| e.to_string())?;
    run_compiled(plan, &ptx, inputs, params, limits)
}

fn run_compiled(
    plan: &PhysicalPlan,
    ptx: &PtxPlan,
    inputs: &[Column],
    params: &[Scalar],
    limits: RunLimits,
) -> Result<(PlanOutput, u64), String> {
    let mut dev = InterpDevice::new();
    let modules = ptx
        .stages
        .iter()
        .map(|s| dev.load(&s.module))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let refs: Vec<_> = modules.iter().collect();
    let ins: Vec<RunInput<'_, _>> = inputs.iter().map(|c| RunInput::Host(c.as_ref())).collect();
    let mut stats = RunStats::default();
    let out = run_plan(
        &mut dev, plan, ptx, &refs, &ins, params, &limits, &mut stats,
    )
    .map_err(|e| e.to_string())?;
    let out = match out {
        RunOutput::Aggregates(a) => PlanOutput::Aggregates(a),
        RunOutput::Columns(cols) => PlanOutput::Columns(
            cols.iter()
                .map(|d| download_column(&mut dev, d, &mut stats))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
        ),
    };
    Ok((out, dev.lane_instructions()))
}

/// Float results agree when equal, both NaN, or within a relative bound
/// (summation order differs between the device and the left fold).
fn close(a: Scalar, b: Scalar, tol: f64) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => close_f(x as f64, y as f64, tol.max(1e-5)),
        (Scalar::F64(x), Scalar::F64(y)) => close_f(x, y, tol.max(1e-12)),
        _ => a == b,
    }
}

fn close_f(x: f64, y: f64, tol: f64) -> bool {
    (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()))
}

fn compare(want: &PlanOutput, got: &PlanOutput, tol: f64) -> Result<(), String> {
    match (want, got) {
        (PlanOutput::Aggregates(w), PlanOutput::Aggregates(g)) => {
            if w.len() != g.len() {
                return Err(format!("{} aggregates, want {}", g.len(), w.len()));
            }
            for (i, (a, b)) in w.iter().zip(g).enumerate() {
                if !close(*a, *b, tol) {
                    return Err(format!("aggregate {i}: got {b:?}, want {a:?}"));
                }
            }
        }
        (PlanOutput::Columns(w), PlanOutput::Columns(g)) => {
            if w.len() != g.len() {
                return Err(format!("{} columns, want {}", g.len(), w.len()));
            }
            for (ci, (a, b)) in w.iter().zip(g).enumerate() {
                if a.len() != b.len() {
                    return Err(format!(
                        "column {ci}: {} elements, want {}",
                        b.len(),
                        a.len()
                    ));
                }
                for i in 0..a.len() {
                    let (x, y) = (a.as_ref().get(i), b.as_ref().get(i));
                    if !close(x, y, tol) {
                        return Err(format!("column {ci}[{i}]: got {y:?}, want {x:?}"));
                    }
                }
            }
        }
        _ => return Err(format!("got {got:?}, want {want:?}")),
    }
    Ok(())
}

/// Runs `plan` on cpu-scalar and in the interpreter and compares.
fn check(
    plan: &PhysicalPlan,
    inputs: &[Column],
    params: &[Scalar],
    caps: &Caps,
    limits: RunLimits,
    tol: f64,
) -> Result<(), String> {
    let refs: Vec<ColumnRef<'_>> = inputs.iter().map(|c| c.as_ref()).collect();
    let want = cpu_scalar::run_plan(plan, &refs, params).map_err(|e| e.to_string())?;
    let (got, _) = run_interp(plan, inputs, params, caps, limits)?;
    compare(&want, &got, tol)
}

/// Lengths around every boundary of `caps`: empty, partial warps, one
/// block, several blocks, the group cap.
fn lengths(caps: &Caps) -> Vec<usize> {
    let wg = caps.workgroup_size as usize;
    let per = wg * caps.items_per_thread as usize;
    let mut v = vec![
        0,
        1,
        31,
        32,
        33,
        wg - 1,
        wg,
        wg + 1,
        per,
        per + 1,
        3 * per + 7,
    ];
    v.push(per * caps.max_groups as usize + 5);
    v.sort_unstable();
    v.dedup();
    v
}

// ------------------------------------------------------------------ tests

fn every_shape(t: DType) -> Vec<(&'static str, PhysicalPlan)> {
    let mut v = vec![
        ("map", map_plan(t)),
        ("reduce", multi_agg_plan(t, false)),
        ("reduce_filtered", multi_agg_plan(t, true)),
        ("scan_sum", scan_plan(t, false, false)),
        ("scan_sum_exclusive", scan_plan(t, false, true)),
        ("scan_custom", scan_plan(t, true, false)),
        ("compact", compact_plan(t)),
        ("reduce_custom", custom_reduce_plan(t)),
    ];
    if t == DType::Bool {
        v.clear();
    }
    v
}

const NUMERIC: [DType; 6] = [
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::F32,
    DType::F64,
];

/// A join of inputs `0` (key) and `1` with a build side of query inputs
/// `2` (key) and `3`, both of type `t`.
fn join_plan(t: DType, kind: JoinKind) -> PhysicalPlan {
    one_stage(&[t, DType::F32], 0, |_, x| {
        (
            None,
            Terminal::Join {
                kind,
                keys: smallvec![x[0]],
                columns: smallvec![x[0], x[1]],
                build: smallvec![(2, t), (3, DType::U32)],
            },
        )
    })
}

/// ptxas takes a device join's kernels (the build side's sort, the
/// probe's searches, the emit) on every key type and join kind.
#[test]
fn ptxas_accepts_every_join() {
    let Some(ptxas) = ptxas() else { return };
    for t in NUMERIC {
        let mut kernels = Vec::new();
        for kind in [JoinKind::Inner, JoinKind::Semi, JoinKind::Anti] {
            let plan = join_plan(t, kind);
            kernels.extend(lower_stage(&plan.stages[0], &cuda_caps()).unwrap().kernels);
        }
        // Two keys: the searches compare both keys' words at sorted rows.
        let two = one_stage(&[t, DType::F32], 0, |_, x| {
            (
                None,
                Terminal::Join {
                    kind: JoinKind::Inner,
                    keys: smallvec![x[0], x[1]],
                    columns: smallvec![x[1]],
                    build: smallvec![(2, t), (3, DType::F32), (4, DType::U64)],
                },
            )
        });
        kernels.extend(lower_stage(&two.stages[0], &cuda_caps()).unwrap().kernels);
        let m = ptx::write_module(&kernels, &PtxOptions::default()).unwrap();
        ptxas_check(&ptxas, &format!("joins-{t}"), &m.text).unwrap();
    }
}

/// The device lowering declines join keys past 128 bits together (the
/// CPU backends' limit) and takes 128.
#[test]
fn device_joins_decline_keys_past_128_bits() {
    let join = |keys: usize| {
        one_stage(&vec![DType::U64; keys], 0, |_, x| {
            (
                None,
                Terminal::Join {
                    kind: JoinKind::Semi,
                    keys: x.iter().copied().collect(),
                    columns: smallvec![x[0]],
                    build: (0..keys).map(|j| ((keys + j) as u16, DType::U64)).collect(),
                },
            )
        })
    };
    assert!(lower_stage(&join(2).stages[0], &cuda_caps()).is_ok());
    let e = lower_stage(&join(3).stages[0], &cuda_caps()).unwrap_err();
    assert!(e.to_string().contains("128 bits"), "{e}");
}

#[test]
fn ptxas_accepts_every_shape_on_every_type() {
    let Some(ptxas) = ptxas() else { return };
    for t in NUMERIC {
        for subgroups in [false, true] {
            let caps = Caps {
                subgroups,
                ..cuda_caps()
            };
            let mut kernels = Vec::new();
            for (_, plan) in every_shape(t) {
                for s in &plan.stages {
                    kernels.extend(lower_stage(s, &caps).unwrap().kernels);
                }
            }
            let m = ptx::write_module(&kernels, &PtxOptions::default()).unwrap();
            ptxas_check(&ptxas, &format!("shapes-{t}-{subgroups}"), &m.text).unwrap();
        }
    }
}

/// A collect stage applying every operation the element IR has to inputs
/// of `t` (and a second input for binary operations).
fn every_op_plan(t: DType) -> PhysicalPlan {
    one_stage(&[t, t], 0, |p, x| {
        let (a, b) = (x[0], x[1]);
        let mut outs: Vec<Value> = vec![a];
        for op in UnaryOp::ALL {
            if op.accepts(t) {
                outs.push(p.push(Node::Unary(op, a)).unwrap());
            }
        }
        for op in BinaryOp::ALL {
            if op.result_type(t).is_some() {
                outs.push(p.push(Node::Binary(op, a, b)).unwrap());
            }
        }
        for to in DType::ALL {
            if to != t {
                outs.push(p.push_typed(Node::Cast(a), to).unwrap());
            }
        }
        if t.is_numeric() {
            outs.push(p.push(Node::MulAdd(a, b, a)).unwrap());
            outs.push(p.push(Node::Powi(a, 5)).unwrap());
            outs.push(p.push(Node::Powi(a, -3)).unwrap());
            let m1 = c(p, Scalar::I64(-1).cast(t));
            outs.push(bin(p, BinaryOp::Div, a, m1));
            outs.push(bin(p, BinaryOp::Rem, a, m1));
        }
        let cond = if t == DType::Bool {
            a
        } else {
            bin(p, BinaryOp::Lt, a, b)
        };
        outs.push(p.push(Node::Select(cond, b, a)).unwrap());
        (None, Terminal::Collect(outs.into_iter().collect()))
    })
}

/// Values of `t` that exercise every guard: zeros of both signs, ±1,
/// extremes, NaN, infinities, halves for rounding, subnormals.
fn edge_values(t: DType) -> Vec<Scalar> {
    let f = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        2.5,
        3.0,
        -7.25,
        1e10,
        -1e10,
        3e9,
        -3e9,
        2e19,
        -2e19,
        1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e-310,
        -4e-39,
        4294967296.0,
        2147483648.0,
        -2147483649.0,
        123.456,
        1e-5,
    ];
    match t {
        DType::Bool => vec![Scalar::Bool(false), Scalar::Bool(true)],
        DType::F32 | DType::F64 => f.iter().map(|&v| Scalar::F64(v).cast(t)).collect(),
        _ => [
            0i64,
            1,
            -1,
            2,
            -2,
            7,
            -7,
            255,
            i32::MIN as i64,
            i32::MAX as i64,
            u32::MAX as i64,
            i64::MIN,
            i64::MAX,
            1 << 40,
        ]
        .iter()
        .map(|&v| Scalar::I64(v).cast(t))
        .collect(),
    }
}

#[test]
fn every_operation_on_every_type_matches_the_reference_on_edge_values() {
    let pt = ptxas();
    for t in DType::ALL {
        let plan = every_op_plan(t);
        let ptx = compile(&plan, &cuda_caps(), &PtxOptions::default()).unwrap();
        if let Some(pt) = &pt {
            ptxas_check(pt, &format!("ops-{t}"), &ptx.stages[0].module.text).unwrap();
        }
        // Every pair of edge values.
        let e = edge_values(t);
        let (mut xs, mut ys) = (Column::with_capacity(t, 0), Column::with_capacity(t, 0));
        for &x in &e {
            for &y in &e {
                xs.push(x);
                ys.push(y);
            }
        }
        let inputs = [xs, ys];
        let refs: Vec<ColumnRef<'_>> = inputs.iter().map(|c| c.as_ref()).collect();
        let want = cpu_scalar::run_plan(&plan, &refs, &[]).unwrap();
        let (got, _) = run_compiled(&plan, &ptx, &inputs, &[], RunLimits::default()).unwrap();
        // Elementwise results are exact but for the transcendental helpers
        // (within a few ulps): compare per column with that in mind.
        let (PlanOutput::Columns(w), PlanOutput::Columns(g)) = (&want, &got) else {
            panic!()
        };
        let Terminal::Collect(cols) = &plan.stages[0].terminal else {
            panic!()
        };
        for (ci, ((wc, gc), v)) in w.iter().zip(g).zip(cols).enumerate() {
            let node = plan.stages[0].program.get(*v).node;
            let approx = matches!(
                node,
                Node::Unary(UnaryOp::Exp | UnaryOp::Ln | UnaryOp::Sin | UnaryOp::Cos, _)
            );
            for i in 0..wc.len() {
                let (a, b) = (wc.as_ref().get(i), gc.as_ref().get(i));
                let ok = if approx {
                    ulps_close(a, b, 2)
                } else {
                    a == b || (is_nan(a) && is_nan(b)) || both_zero(a, b)
                };
                assert!(
                    ok,
                    "{t}: output {ci} ({node:?}) at {:?}, {:?}: got {b:?}, want {a:?}",
                    inputs[0].as_ref().get(i),
                    inputs[1].as_ref().get(i)
                );
            }
        }
    }
}

fn is_nan(s: Scalar) -> bool {
    matches!(s, Scalar::F32(v) if v.is_nan()) || matches!(s, Scalar::F64(v) if v.is_nan())
}

fn both_zero(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => x == 0.0 && y == 0.0,
        (Scalar::F64(x), Scalar::F64(y)) => x == 0.0 && y == 0.0,
        _ => false,
    }
}

/// Within `n` ulps (the transcendental helpers, see `codegen::ptx::math`).
fn ulps_close(a: Scalar, b: Scalar, n: u64) -> bool {
    let ulps = |x: u64, y: u64| (x as i64).wrapping_sub(y as i64).unsigned_abs();
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => {
            (x.is_nan() && y.is_nan())
                || x == y
                || ulps(x.to_bits() as u64, y.to_bits() as u64) <= n
        }
        (Scalar::F64(x), Scalar::F64(y)) => {
            (x.is_nan() && y.is_nan()) || x == y || ulps(x.to_bits(), y.to_bits()) <= n
        }
        _ => a == b,
    }
}

#[test]
fn math_helpers_are_accurate_over_a_sweep() {
    let xs: Vec<f64> = (0..4000)
        .map(|i| {
            let u = i as f64 / 4000.0;
            match i % 4 {
                0 => (u - 0.5) * 1400.0,            // exp's whole range
                1 => 10f64.powf(u * 600.0 - 300.0), // ln over many decades
                2 => (u - 0.5) * 2e5,               // sin/cos, moderate
                _ => (u - 0.5) * 20.0,
            }
        })
        .collect();
    let ys: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| x / ((i % 7) as f64 + 0.37) - 0.125)
        .collect();
    for t in [DType::F64, DType::F32] {
        let plan = one_stage(&[t, t], 0, |p, x| {
            let mut outs = Vec::new();
            for op in [UnaryOp::Exp, UnaryOp::Ln, UnaryOp::Sin, UnaryOp::Cos] {
                outs.push(p.push(Node::Unary(op, x[0])).unwrap());
            }
            outs.push(bin(p, BinaryOp::Rem, x[0], x[1]));
            (None, Terminal::Collect(outs.into_iter().collect()))
        });
        let a = Column::F64(xs.clone());
        let b = Column::F64(ys.clone());
        let (a, b) = if t == DType::F32 {
            let f = |c: &Column| match c {
                Column::F64(v) => Column::F32(v.iter().map(|&x| x as f32).collect()),
                _ => unreachable!(),
            };
            (f(&a), f(&b))
        } else {
            (a, b)
        };
        let inputs = [a, b];
        let refs: Vec<ColumnRef<'_>> = inputs.iter().map(|c| c.as_ref()).collect();
        let want = cpu_scalar::run_plan(&plan, &refs, &[]).unwrap();
        let (got, _) = run_interp(&plan, &inputs, &[], &cuda_caps(), RunLimits::default()).unwrap();
        let (PlanOutput::Columns(w), PlanOutput::Columns(g)) = (&want, &got) else {
            panic!()
        };
        let names = ["exp", "ln", "sin", "cos", "fmod"];
        for (k, (wc, gc)) in w.iter().zip(g).enumerate() {
            let mut worst = 0u64;
            for i in 0..wc.len() {
                let (x, y) = (wc.as_ref().get(i), gc.as_ref().get(i));
                let d = match (x, y) {
                    (Scalar::F64(p), Scalar::F64(q)) if !(p.is_nan() && q.is_nan()) => {
                        (p.to_bits() as i64 - q.to_bits() as i64).unsigned_abs()
                    }
                    (Scalar::F32(p), Scalar::F32(q)) if !(p.is_nan() && q.is_nan()) => {
                        (p.to_bits() as i64 - q.to_bits() as i64).unsigned_abs()
                    }
                    _ => 0,
                };
                let limit = if names[k] == "fmod" { 0 } else { 2 };
                assert!(
                    d <= limit,
                    "{t} {}({:?}): got {y:?}, want {x:?} ({d} ulps)",
                    names[k],
                    inputs[0].as_ref().get(i)
                );
                worst = worst.max(d);
            }
            eprintln!(
                "{t} {}: worst {worst} ulps over {} arguments",
                names[k],
                wc.len()
            );
        }
    }
}

#[test]
fn every_shape_matches_the_reference_at_boundary_lengths() {
    for caps in [
        small_caps(),
        Caps {
            subgroups: false,
            ..small_caps()
        },
        cuda_caps(),
    ] {
        let lens = if caps == cuda_caps() {
            vec![0, 1, 1000, 1025, 3000]
        } else {
            lengths(&caps)
        };
        for t in NUMERIC {
            for (name, plan) in every_shape(t) {
                for &n in &lens {
                    let inputs: Vec<Column> = plan
                        .input_dtypes
                        .iter()
                        .enumerate()
                        .map(|(s, &dt)| column(dt, n, n as u64 * 7 + s as u64))
                        .collect();
                    let params = [Scalar::zero(t)];
                    check(
                        &plan,
                        &inputs,
                        &params[..plan.param_count],
                        &caps,
                        RunLimits::default(),
                        1e-4,
                    )
                    .unwrap_or_else(|e| panic!("{name} {t} n={n} caps={caps:?}: {e}"));
                }
            }
        }
    }
}

#[test]
fn chunked_runs_carry_scans_compaction_and_aggregates_across_chunks() {
    let caps = small_caps();
    for t in [DType::I32, DType::F64, DType::U64] {
        for (name, plan) in every_shape(t) {
            for (n, chunk) in [(1000, 300), (97, 1), (2049, 1024), (50, 7)] {
                let inputs: Vec<Column> = plan
                    .input_dtypes
                    .iter()
                    .enumerate()
                    .map(|(s, &dt)| column(dt, n, 99 + s as u64))
                    .collect();
                let params = [Scalar::zero(t)];
                check(
                    &plan,
                    &inputs,
                    &params[..plan.param_count],
                    &caps,
                    RunLimits::uniform(chunk),
                    1e-4,
                )
                .unwrap_or_else(|e| panic!("{name} {t} n={n} chunk={chunk}: {e}"));
            }
        }
    }
}

#[test]
fn golden_ptx() {
    let mut golden = Golden::new("ptx");
    let pt = ptxas();
    let plans = [
        ("map_f32", map_plan(DType::F32)),
        ("reduce_multi_f32", multi_agg_plan(DType::F32, true)),
        ("reduce_multi_i64", multi_agg_plan(DType::I64, false)),
        ("scan_sum_i32", scan_plan(DType::I32, false, false)),
        ("scan_custom_i32", scan_plan(DType::I32, true, true)),
        ("compact_f64", compact_plan(DType::F64)),
        // A key-only radix sort, and one carrying rows (a descending key
        // and a column evaluated at the sorted rows).
        (
            "sort_f32",
            one_stage(&[DType::F32], 0, |_, x| {
                (None, sort_terminal(&[(x[0], false)], &[x[0]]))
            }),
        ),
        (
            "sort_rows_i32",
            one_stage(&[DType::I32, DType::F64], 0, |_, x| {
                (None, sort_terminal(&[(x[0], true)], &[x[1]]))
            }),
        ),
        // Keyed aggregation: sorted by key, then bounds, starts, folds.
        (
            "group_i32",
            one_stage(&[DType::I32, DType::F32], 0, |_, x| {
                (
                    None,
                    Terminal::Group {
                        keys: smallvec![x[0]],
                        aggs: smallvec![agg(AggKind::Count, None), agg(AggKind::Sum, Some(x[1]))],
                        first_seen: false,
                    },
                )
            }),
        ),
        // A join: the build side sorted, searched per probe row, the
        // pairs written.
        ("join_i32", join_plan(DType::I32, JoinKind::Inner)),
        (
            "math_f32",
            one_stage(&[DType::F32, DType::F32], 0, |p, x| {
                let e = p.push(Node::Unary(UnaryOp::Exp, x[0])).unwrap();
                let l = p.push(Node::Unary(UnaryOp::Ln, x[0])).unwrap();
                let s = p.push(Node::Unary(UnaryOp::Sin, x[0])).unwrap();
                let co = p.push(Node::Unary(UnaryOp::Cos, x[0])).unwrap();
                let r = bin(p, BinaryOp::Rem, x[0], x[1]);
                let rd = p.push(Node::Unary(UnaryOp::Round, x[0])).unwrap();
                let ci = p.push_typed(Node::Cast(x[0]), DType::I64).unwrap();
                (None, Terminal::Collect(smallvec![e, l, s, co, r, rd, ci]))
            }),
        ),
    ];
    for (name, plan) in &plans {
        let ptx = compile(plan, &cuda_caps(), &PtxOptions::default()).unwrap();
        let text = &ptx.stages[0].module.text;
        if let Some(pt) = &pt {
            ptxas_check(pt, name, text).unwrap();
        }
        golden.check(&format!("{name}.ptx"), text);
    }
    golden.finish();
}

#[test]
fn golden_files_all_assemble() {
    // Every file under tests/golden/ptx, including ones no test writes.
    let Some(pt) = ptxas() else { return };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/ptx");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "ptx") {
            let text = std::fs::read_to_string(&path).unwrap();
            ptxas_check(&pt, &path.file_stem().unwrap().to_string_lossy(), &text).unwrap();
        }
    }
}

#[test]
fn options_set_version_and_target() {
    let plan = map_plan(DType::F32);
    let opts = PtxOptions {
        version: (7, 8),
        target: "sm_80".into(),
    };
    let ptx = compile(&plan, &cuda_caps(), &opts).unwrap();
    let text = &ptx.stages[0].module.text;
    assert!(text.contains(".version 7.8\n.target sm_80\n.address_size 64"));
    let default = compile(&plan, &cuda_caps(), &PtxOptions::default()).unwrap();
    assert!(default.stages[0]
        .module
        .text
        .contains(".version 7.0\n.target sm_70\n"));
}

#[test]
fn captured_values_are_parameters_not_text() {
    // `x * p0 + p1` with two parameter sets: one module, both results right.
    let plan = one_stage(&[DType::F32], 2, |p, x| {
        let k = p.push_typed(Node::Param(0), DType::F32).unwrap();
        let b = p.push_typed(Node::Param(1), DType::F32).unwrap();
        let m = p.push(Node::MulAdd(x[0], k, b)).unwrap();
        (None, Terminal::Collect(smallvec![m]))
    });
    let ptx = compile(&plan, &cuda_caps(), &PtxOptions::default()).unwrap();
    let text = &ptx.stages[0].module.text;
    for (k, b) in [(3.0f32, 0.25f32), (-1.5, 7.0)] {
        assert!(!text.contains(&ptx::immediate(Scalar::F32(k))));
        let x = column(DType::F32, 300, 5);
        let params = [Scalar::F32(k), Scalar::F32(b)];
        let refs = [x.as_ref()];
        let want = cpu_scalar::run_plan(&plan, &refs, &params).unwrap();
        let (got, _) = run_compiled(
            &plan,
            &ptx,
            std::slice::from_ref(&x),
            &params,
            RunLimits::default(),
        )
        .unwrap();
        compare(&want, &got, 0.0).unwrap();
    }
}

// ------------------------------------------------------------------ strictness

fn run_text(
    plan: &PhysicalPlan,
    text: String,
    caps: &Caps,
    inputs: &[Column],
) -> Result<PlanOutput, String> {
    let mut ptx = compile(plan, caps, &PtxOptions::default()).map_err(|e| e.to_string())?;
    ptx.stages[0].module.text = text;
    run_compiled(plan, &ptx, inputs, &[], RunLimits::default()).map(|r| r.0)
}

#[test]
fn a_mutated_instruction_is_caught() {
    // `x * 2 + 1` with the add turned into a sub: the interpreter runs it
    // and the comparison with cpu-scalar fails.
    let plan = map_plan(DType::F32);
    let caps = small_caps();
    let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
    let text = &ptx.stages[0].module.text;
    assert!(text.contains("add.rn.f32"));
    let x = column(DType::F32, 200, 1);
    let want = cpu_scalar::run_plan(&plan, &[x.as_ref()], &[]).unwrap();
    let good = run_text(&plan, text.clone(), &caps, std::slice::from_ref(&x)).unwrap();
    compare(&want, &good, 0.0).unwrap();
    let bad = run_text(
        &plan,
        text.replacen("add.rn.f32", "sub.rn.f32", 1),
        &caps,
        std::slice::from_ref(&x),
    )
    .unwrap();
    assert!(
        compare(&want, &bad, 1e-4).is_err(),
        "a wrong kernel went unnoticed"
    );
}

#[test]
fn a_missing_barrier_is_a_race() {
    let plan = multi_agg_plan(DType::I32, false);
    let caps = Caps {
        subgroups: false,
        ..small_caps()
    };
    let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
    let text = ptx.stages[0].module.text.clone();
    let x = column(DType::I32, 500, 3);
    run_text(&plan, text.clone(), &caps, std::slice::from_ref(&x)).unwrap();
    // Drop the first barrier of the partial kernel.
    let broken = text.replacen("bar.sync 0;", "", 1);
    let e = run_text(&plan, broken, &caps, &[x]).unwrap_err();
    assert!(e.contains("race"), "{e}");
}

#[test]
fn a_divergent_shuffle_is_an_error() {
    let plan = one_stage(&[DType::I32], 0, |_, x| {
        (
            None,
            Terminal::Reduce(smallvec![agg(AggKind::Sum, Some(x[0]))]),
        )
    });
    let caps = small_caps();
    let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
    let text = ptx.stages[0].module.text.clone();
    let x = column(DType::I32, 500, 3);
    run_text(&plan, text.clone(), &caps, std::slice::from_ref(&x)).unwrap();
    // Let only the lower half of each warp execute the first shuffle.
    let mut broken = text.replacen(
        ".reqntid 64, 1, 1\n{\n",
        ".reqntid 64, 1, 1\n{\n\t.reg .pred %qq;\n\t.reg .b32 %qr;\n",
        1,
    );
    let at = broken.find("\tshfl.sync.bfly.b32").expect("a shuffle");
    broken.insert_str(
        at,
        "\tmov.u32 %qr, %laneid;\n\tsetp.lt.u32 %qq, %qr, 16;\n\t@%qq",
    );
    let e = run_text(&plan, broken, &caps, &[x]).unwrap_err();
    assert!(e.contains("not converged"), "{e}");
}

#[test]
fn unknown_instructions_and_operands_are_errors() {
    let plan = map_plan(DType::F32);
    let caps = small_caps();
    let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
    let text = ptx.stages[0].module.text.clone();
    let x = column(DType::F32, 10, 1);
    for (from, to) in [
        ("add.rn.f32", "add.rz.f32"),
        ("add.rn.f32", "ex2.approx.f32"),
        ("mul.rn.f32", "mul.f32"),
        ("ld.global.f32", "ld.global.nc.f32"),
        ("ret;", "exit;"),
    ] {
        let e = run_text(
            &plan,
            text.replacen(from, to, 1),
            &caps,
            std::slice::from_ref(&x),
        )
        .unwrap_err();
        assert!(
            e.contains("unsupported") || e.contains("unexpected"),
            "{from} → {to}: {e}"
        );
    }
    // A register used with the wrong type.
    let bad = text.replacen("mul.rn.f32 %f", "mul.rn.f64 %f", 1);
    let e = run_text(&plan, bad, &caps, &[x]).unwrap_err();
    assert!(e.contains("used as"), "{e}");
}

#[test]
fn out_of_bounds_accesses_are_errors() {
    let plan = map_plan(DType::F32);
    let caps = small_caps();
    let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
    let text = ptx.stages[0].module.text.clone();
    // Store at index * 4 + 4096: past the end of the output.
    let at = text.find("st.global.f32 [").unwrap();
    let close = at + text[at..].find(']').unwrap();
    let mut bad = text.clone();
    bad.insert_str(close, "+4096");
    let x = column(DType::F32, 100, 1);
    let e = run_text(&plan, bad, &caps, &[x]).unwrap_err();
    assert!(e.contains("past") || e.contains("bytes at offset"), "{e}");
}

// ------------------------------------------------------------------ real queries

fn interp_engine(caps: Caps, chunk: usize) -> Engine {
    Engine::with_config(Config::default()).with_backend(Arc::new(InterpBackend::new(caps, chunk)))
}

#[test]
fn real_queries_run_in_the_interpreter() {
    let e = interp_engine(small_caps(), 1 << 20);
    for n in [0usize, 1, 33, 200, 777] {
        let xs: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.5)
            .collect();
        let ys: Vec<i64> = (0..n).map(|i| (i as i64 * 7919) % 1000 - 500).collect();
        let k = 3.0f32;

        let q = || e.query(&xs).on(BackendKind::Cuda).no_fallback();
        let cpu = || e.query(&xs).on(BackendKind::CpuScalar);

        let a: f32 = q().map(|x| x * k + 1.0).filter(|x| x.gt(0.5)).sum();
        let b: f32 = cpu().map(|x| x * k + 1.0).filter(|x| x.gt(0.5)).sum();
        assert!(close_f(a as f64, b as f64, 1e-5), "n={n}: {a} vs {b}");

        assert_eq!(
            q().filter(|x| x.gt(0.0)).count(),
            cpu().filter(|x| x.gt(0.0)).count()
        );
        assert_eq!(q().argmin(), cpu().argmin());
        assert_eq!(q().max(), cpu().max());
        let c1: Vec<f32> = q()
            .map(|x| x.abs().sqrt() * 3.0 - x)
            .filter(|x| x.lt(10.0))
            .collect();
        let c2: Vec<f32> = cpu()
            .map(|x| x.abs().sqrt() * 3.0 - x)
            .filter(|x| x.lt(10.0))
            .collect();
        assert_eq!(c1, c2, "n={n}");
        let s1: Vec<f32> = q().scan_sum().collect();
        let s2: Vec<f32> = cpu().scan_sum().collect();
        assert_eq!(s1.len(), s2.len());
        for (x, y) in s1.iter().zip(&s2) {
            assert!(
                close_f(*x as f64, *y as f64, 1e-5),
                "n={n}: scan {x} vs {y}"
            );
        }

        let qi = || e.query(&ys).on(BackendKind::Cuda).no_fallback();
        let ci = || e.query(&ys).on(BackendKind::CpuScalar);
        let s1: i64 = qi()
            .enumerate()
            .map(|(i, y)| y * 3 - i.cast::<i64>())
            .skip(3)
            .take(500)
            .sum();
        let s2: i64 = ci()
            .enumerate()
            .map(|(i, y)| y * 3 - i.cast::<i64>())
            .skip(3)
            .take(500)
            .sum();
        assert_eq!(s1, s2, "n={n}");
        assert_eq!(
            qi().zip(&xs)
                .map(|(y, x)| (y / 7) % 5 + x.cast::<i64>())
                .collect::<Vec<i64>>(),
            ci().zip(&xs)
                .map(|(y, x)| (y / 7) % 5 + x.cast::<i64>())
                .collect::<Vec<i64>>()
        );
        assert_eq!(
            qi().reduce(i64::MIN, |a, b| a.max(b)),
            ci().reduce(i64::MIN, |a, b| a.max(b))
        );
        assert_eq!(qi().any(|y| y.gt(490)), ci().any(|y| y.gt(490)));
        assert_eq!(
            qi().scan(0, |a, b| a.max(b)).collect::<Vec<i64>>(),
            ci().scan(0, |a, b| a.max(b)).collect::<Vec<i64>>()
        );
    }
}

#[test]
fn real_queries_with_default_cuda_caps_and_chunks() {
    let e = interp_engine(cuda_caps(), 1500);
    let xs: Vec<f64> = (0..4100)
        .map(|i| ((i * 7 % 1009) as f64).sin() * 100.0)
        .collect();
    let q = || e.query(&xs).on(BackendKind::Cuda).no_fallback();
    let cpu = || e.query(&xs).on(BackendKind::CpuScalar);
    let a: f64 = q().map(|x| x.exp().ln() + x.cos()).sum();
    let b: f64 = cpu().map(|x| x.exp().ln() + x.cos()).sum();
    assert!(close_f(a, b, 1e-9), "{a} vs {b}");
    assert_eq!(q().argmax(), cpu().argmax());
    let c1: Vec<i32> = q()
        .filter(|x| x.gt(10.0))
        .map(|x| x.round().cast::<i32>())
        .collect();
    let c2: Vec<i32> = cpu()
        .filter(|x| x.gt(10.0))
        .map(|x| x.round().cast::<i32>())
        .collect();
    assert_eq!(c1, c2);
    let s1: Vec<f64> = q().scan_sum_exclusive().collect();
    let s2: Vec<f64> = cpu().scan_sum_exclusive().collect();
    for (x, y) in s1.iter().zip(&s2) {
        assert!(close_f(*x, *y, 1e-9), "{x} vs {y}");
    }
}

// ------------------------------------------------------------------ chunked downloads

/// `!x` and `x` collected, over bools.
fn bool_map_plan() -> PhysicalPlan {
    one_stage(&[DType::Bool], 0, |p, x| {
        let not = p.push(Node::Unary(UnaryOp::Not, x[0])).unwrap();
        (None, Terminal::Collect(smallvec![not, x[0]]))
    })
}

/// `!x` and `y` collected where `y > 0`: compaction of a bool column.
fn bool_compact_plan() -> PhysicalPlan {
    one_stage(&[DType::Bool, DType::I32], 0, |p, x| {
        let zero = c(p, Scalar::zero(DType::I32));
        let keep = bin(p, BinaryOp::Gt, x[1], zero);
        let not = p.push(Node::Unary(UnaryOp::Not, x[0])).unwrap();
        (Some(keep), Terminal::Collect(smallvec![not, x[1]]))
    })
}

/// Loads `ptx`'s modules on `dev` and runs `plan` over host `inputs`,
/// either to the host (chunked downloads) or to the device followed by
/// one download per column.
fn run_both_ways<D: PtxDevice>(
    dev: &mut D,
    to_host: bool,
    plan: &PhysicalPlan,
    ptx: &PtxPlan,
    inputs: &[Column],
    limits: RunLimits,
) -> Result<(PlanOutput, RunStats), BackendError> {
    let modules = ptx
        .stages
        .iter()
        .map(|s| dev.load(&s.module))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<_> = modules.iter().collect();
    let ins: Vec<RunInput<'_, _>> = inputs.iter().map(|c| RunInput::Host(c.as_ref())).collect();
    let mut stats = RunStats::default();
    let out = if to_host {
        run_plan_to_host(dev, plan, ptx, &refs, &ins, &[], &limits, &mut stats)?
    } else {
        match run_plan(dev, plan, ptx, &refs, &ins, &[], &limits, &mut stats)? {
            RunOutput::Aggregates(a) => PlanOutput::Aggregates(a),
            RunOutput::Columns(cols) => PlanOutput::Columns(
                cols.iter()
                    .map(|d| download_column(dev, d, &mut stats))
                    .collect::<Result<_, _>>()?,
            ),
        }
    };
    Ok((out, stats))
}

/// Bit-for-bit equality of two columns results (NaNs included).
fn same_bits(a: &PlanOutput, b: &PlanOutput) -> Result<(), String> {
    let (PlanOutput::Columns(a), PlanOutput::Columns(b)) = (a, b) else {
        return Err(format!("not two column results: {a:?} / {b:?}"));
    };
    if a.len() != b.len() {
        return Err(format!("{} columns vs {}", a.len(), b.len()));
    }
    for (ci, (x, y)) in a.iter().zip(b).enumerate() {
        if x.dtype() != y.dtype() || x.len() != y.len() {
            return Err(format!(
                "column {ci}: {} × {} vs {} × {}",
                x.len(),
                x.dtype(),
                y.len(),
                y.dtype()
            ));
        }
        for i in 0..x.len() {
            let (u, v) = (x.as_ref().get(i), y.as_ref().get(i));
            if u.to_bits() != v.to_bits() {
                return Err(format!("column {ci}[{i}]: {u:?} vs {v:?}"));
            }
        }
    }
    Ok(())
}

/// Lengths and chunk sizes: empty, one element, a single chunk (smaller
/// than and exactly the chunk), many full chunks, a partial last chunk,
/// and a chunk of one position.
const CHUNKINGS: [(usize, usize); 8] = [
    (0, 64),
    (1, 64),
    (200, 1000),
    (256, 256),
    (256, 64),
    (1000, 128),
    (97, 10),
    (40, 1),
];

/// Map + collect, filter + collect and an inclusive scan sum (whose carry
/// crosses chunks) of every dtype, at every chunking, downloaded per
/// chunk: the result equals `cpu-scalar`'s, equals bit for bit the same
/// run kept on the device and downloaded once, and both count the same
/// downloaded bytes. The strict device would have failed the run had any
/// chunk's kernels written a buffer under an unfinished download.
#[test]
fn per_chunk_downloads_match_the_reference_and_a_single_download() {
    let caps = small_caps();
    let mut shapes: Vec<(String, PhysicalPlan)> = vec![
        ("map bool".into(), bool_map_plan()),
        ("compact bool".into(), bool_compact_plan()),
    ];
    for t in NUMERIC {
        shapes.push((format!("map {t}"), map_plan(t)));
        shapes.push((format!("compact {t}"), compact_plan(t)));
        shapes.push((format!("scan {t}"), scan_plan(t, false, false)));
    }
    for (name, plan) in &shapes {
        let ptx = compile(plan, &caps, &PtxOptions::default()).unwrap();
        for (n, chunk) in CHUNKINGS {
            let inputs: Vec<Column> = plan
                .input_dtypes
                .iter()
                .enumerate()
                .map(|(s, &dt)| column(dt, n, n as u64 * 5 + s as u64 + 1))
                .collect();
            let refs: Vec<ColumnRef<'_>> = inputs.iter().map(|c| c.as_ref()).collect();
            let want = cpu_scalar::run_plan(plan, &refs, &[]).unwrap();
            let limits = RunLimits::uniform(chunk);
            let what = format!("{name} n={n} chunk={chunk}");
            let mut host_dev = InterpDevice::new();
            let (host, host_stats) =
                run_both_ways(&mut host_dev, true, plan, &ptx, &inputs, limits)
                    .unwrap_or_else(|e| panic!("{what}: per-chunk downloads: {e}"));
            assert_eq!(host_dev.downloads_in_flight(), 0, "{what}");
            let mut dev = InterpDevice::new();
            let (once, once_stats) = run_both_ways(&mut dev, false, plan, &ptx, &inputs, limits)
                .unwrap_or_else(|e| panic!("{what}: one download: {e}"));
            compare(&want, &host, 1e-4).unwrap_or_else(|e| panic!("{what}: {e}"));
            same_bits(&once, &host).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                host_stats.bytes_downloaded, once_stats.bytes_downloaded,
                "{what}: downloaded bytes"
            );
        }
    }
}

/// One operation of a recorded run; buffers by base address.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Upload(u64),
    Download(u64),
    Launch(Vec<u64>),
    Start { id: u64, buf: u64, len: usize },
    Finish(u64),
}

/// The interpreter device with a log of the operations, in order.
#[derive(Default)]
struct Recorder {
    inner: InterpDevice,
    log: Vec<Op>,
    next: u64,
}

impl PtxDevice for Recorder {
    type Buffer = InterpBuffer;
    type Module = Rc<LoadedModule>;
    type Pending = (u64, InterpPending);

    fn load(&mut self, m: &PtxModule) -> Result<Self::Module, BackendError> {
        self.inner.load(m)
    }

    fn alloc(&mut self, bytes: usize) -> Result<InterpBuffer, BackendError> {
        self.inner.alloc(bytes)
    }

    fn upload(
        &mut self,
        dst: &InterpBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), BackendError> {
        self.log.push(Op::Upload(dst.addr));
        self.inner.upload(dst, offset, data)
    }

    fn download(
        &mut self,
        src: &InterpBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.log.push(Op::Download(src.addr));
        self.inner.download(src, offset, out)
    }

    fn start_download(
        &mut self,
        src: &InterpBuffer,
        offset: usize,
        len: usize,
    ) -> Result<Self::Pending, BackendError> {
        let id = self.next;
        self.next += 1;
        self.log.push(Op::Start {
            id,
            buf: src.addr,
            len,
        });
        Ok((id, self.inner.start_download(src, offset, len)?))
    }

    fn finish_download(
        &mut self,
        (id, pending): Self::Pending,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.log.push(Op::Finish(id));
        self.inner.finish_download(pending, out)
    }

    fn launch(
        &mut self,
        module: &Self::Module,
        entry: usize,
        grid: u32,
        block: u32,
        buffers: &[BufferArg<'_, InterpBuffer>],
        uniforms: &[u8],
    ) -> Result<(), BackendError> {
        self.log
            .push(Op::Launch(buffers.iter().map(|b| b.buffer.addr).collect()));
        self.inner
            .launch(module, entry, grid, block, buffers, uniforms)
    }
}

/// The recorded order of a chunked run to the host: chunk `k`'s downloads
/// are started after all of chunk `k`'s launches and before any of chunk
/// `k + 1`'s, and finished after all of chunk `k + 1`'s launches and
/// before any of chunk `k + 2`'s (the last chunk's at the end). In between
/// no launch binds the buffer being downloaded, and each download covers
/// the chunk's elements (its survivors under compaction).
#[test]
fn a_chunks_download_overlaps_the_next_chunks_kernels() {
    let caps = small_caps();
    let (n, chunk) = (1000usize, 128usize);
    let chunks = n.div_ceil(chunk);
    for (name, plan) in [
        ("map f32", map_plan(DType::F32)),
        ("compact i64", compact_plan(DType::I64)),
    ] {
        let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
        let per_chunk = ptx.stages[0].plan.dispatches.len();
        let inputs: Vec<Column> = plan
            .input_dtypes
            .iter()
            .enumerate()
            .map(|(s, &dt)| column(dt, n, 17 + s as u64))
            .collect();
        let refs: Vec<ColumnRef<'_>> = inputs.iter().map(|c| c.as_ref()).collect();
        let want = cpu_scalar::run_plan(&plan, &refs, &[]).unwrap();
        let mut dev = Recorder::default();
        let (got, _) = run_both_ways(
            &mut dev,
            true,
            &plan,
            &ptx,
            &inputs,
            RunLimits::uniform(chunk),
        )
        .unwrap();
        compare(&want, &got, 0.0).unwrap_or_else(|e| panic!("{name}: {e}"));

        // Elements each chunk downloads, per output column.
        let outputs = ptx.stages[0].plan.outputs.clone();
        let survivors = |k: usize| -> usize {
            let (c0, c1) = (k * chunk, ((k + 1) * chunk).min(n));
            match &inputs[..] {
                [_, keep] => (c0..c1)
                    .filter(|&i| keep.as_ref().get(i).to_bits() as u32 as i32 > 0)
                    .count(),
                _ => c1 - c0,
            }
        };
        let log = &dev.log;
        let launches_before = |at: usize| {
            log[..at]
                .iter()
                .filter(|o| matches!(o, Op::Launch(_)))
                .count()
        };
        assert_eq!(launches_before(log.len()), chunks * per_chunk, "{name}");
        let mut started = vec![0usize; chunks];
        for (at, op) in log.iter().enumerate() {
            let Op::Start { id, buf, len } = op else {
                continue;
            };
            let before = launches_before(at);
            assert!(
                before % per_chunk == 0 && before > 0,
                "{name}: download {id} started in the middle of a chunk's launches"
            );
            let k = before / per_chunk - 1;
            let column = started[k] % outputs.len();
            started[k] += 1;
            assert_eq!(
                *len,
                survivors(k) * ptx::element_size(outputs[column]),
                "{name}: chunk {k} column {column}"
            );
            let fin = at
                + log[at..]
                    .iter()
                    .position(|o| *o == Op::Finish(*id))
                    .unwrap_or_else(|| panic!("{name}: download {id} never finished"));
            let want_before = if k + 1 < chunks {
                (k + 2) * per_chunk
            } else {
                chunks * per_chunk
            };
            assert_eq!(
                launches_before(fin),
                want_before,
                "{name}: chunk {k}'s download finished at the wrong place"
            );
            for o in &log[at..fin] {
                if let Op::Launch(bufs) = o {
                    assert!(
                        !bufs.contains(buf),
                        "{name}: chunk {k}'s download buffer bound under the download"
                    );
                }
            }
        }
        for (k, &s) in started.iter().enumerate() {
            let want = if survivors(k) == 0 { 0 } else { outputs.len() };
            assert_eq!(s, want, "{name}: downloads of chunk {k}");
        }
        // The overlap is real: some launch runs under every chunk's
        // download except the last one's.
        assert!(
            started.iter().filter(|&&s| s > 0).count() >= chunks - 1,
            "{name}"
        );
    }
}

/// The interpreter with a deliberate protocol error: of two consecutive
/// allocations of `bytes` bytes, the second aliases the first. The host
/// protocol allocates an output column's two chunk buffers one after the
/// other, so with `bytes` a chunk of output, chunk `k + 1`'s kernels then
/// write under chunk `k`'s download. (Input chunk buffers of the same size
/// are aliased too, which is harmless in the interpreter, whose uploads
/// and launches complete in order.)
struct AliasPairs {
    inner: InterpDevice,
    bytes: usize,
    last: Option<u64>,
}

impl AliasPairs {
    fn new(bytes: usize) -> AliasPairs {
        AliasPairs {
            inner: InterpDevice::new(),
            bytes,
            last: None,
        }
    }
}

impl PtxDevice for AliasPairs {
    type Buffer = InterpBuffer;
    type Module = Rc<LoadedModule>;
    type Pending = InterpPending;

    fn load(&mut self, m: &PtxModule) -> Result<Self::Module, BackendError> {
        self.inner.load(m)
    }

    fn alloc(&mut self, bytes: usize) -> Result<InterpBuffer, BackendError> {
        if bytes != self.bytes {
            self.last = None;
            return self.inner.alloc(bytes);
        }
        match self.last.take() {
            Some(addr) => Ok(InterpBuffer { addr, bytes }),
            None => {
                let buf = self.inner.alloc(bytes)?;
                self.last = Some(buf.addr);
                Ok(buf)
            }
        }
    }

    fn upload(
        &mut self,
        dst: &InterpBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), BackendError> {
        self.inner.upload(dst, offset, data)
    }

    fn download(
        &mut self,
        src: &InterpBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.inner.download(src, offset, out)
    }

    fn start_download(
        &mut self,
        src: &InterpBuffer,
        offset: usize,
        len: usize,
    ) -> Result<InterpPending, BackendError> {
        self.inner.start_download(src, offset, len)
    }

    fn finish_download(&mut self, p: InterpPending, out: &mut [u8]) -> Result<(), BackendError> {
        self.inner.finish_download(p, out)
    }

    fn launch(
        &mut self,
        module: &Self::Module,
        entry: usize,
        grid: u32,
        block: u32,
        buffers: &[BufferArg<'_, InterpBuffer>],
        uniforms: &[u8],
    ) -> Result<(), BackendError> {
        self.inner
            .launch(module, entry, grid, block, buffers, uniforms)
    }
}

/// Writes into a range under an unfinished download are errors, both
/// uploads and kernel stores, so a host protocol that reuses a buffer too
/// early fails in the interpreter; outside the range, or once finished,
/// they are fine, and the download returns the bytes as they were when
/// it started.
#[test]
fn writing_a_range_under_an_unfinished_download_is_an_error() {
    // Device operations.
    let mut dev = InterpDevice::new();
    let buf = dev.alloc(64).unwrap();
    dev.upload(&buf, 0, &[1; 64]).unwrap();
    let p = dev.start_download(&buf, 16, 16).unwrap();
    dev.upload(&buf, 0, &[2; 16]).unwrap();
    dev.upload(&buf, 32, &[2; 32]).unwrap();
    let e = dev.upload(&buf, 8, &[3; 16]).unwrap_err();
    assert_eq!(e.phase, Phase::Upload);
    assert!(e.message.contains("unfinished"), "{e}");
    let e = dev.upload(&buf, 31, &[3; 1]).unwrap_err();
    assert!(e.message.contains("unfinished"), "{e}");
    let mut read = [0u8; 64];
    dev.download(&buf, 0, &mut read).unwrap();
    assert_eq!(dev.downloads_in_flight(), 1);
    let mut out = [0u8; 16];
    dev.finish_download(p, &mut out).unwrap();
    assert_eq!(out, [1; 16]);
    assert_eq!(dev.downloads_in_flight(), 0);
    dev.upload(&buf, 8, &[3; 16]).unwrap();

    // A host protocol whose next chunk writes the buffer being downloaded:
    // 100-position chunks of 4-byte outputs.
    let caps = small_caps();
    let alias = || AliasPairs::new(400);
    for plan in [map_plan(DType::F32), compact_plan(DType::I32)] {
        let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
        let inputs: Vec<Column> = plan
            .input_dtypes
            .iter()
            .enumerate()
            .map(|(s, &dt)| column(dt, 300, 3 + s as u64))
            .collect();
        let limits = RunLimits::uniform(100);
        let e = run_both_ways(&mut alias(), true, &plan, &ptx, &inputs, limits)
            .expect_err("a kernel wrote under a download in flight");
        assert_eq!(e.phase, Phase::Execute, "{e}");
        assert!(e.message.contains("unfinished"), "{e}");
        // Kept on the device, the same aliasing is harmless (one output
        // buffer), and without it the download run succeeds.
        run_both_ways(&mut alias(), false, &plan, &ptx, &inputs, limits).unwrap();
        run_both_ways(&mut InterpDevice::new(), true, &plan, &ptx, &inputs, limits).unwrap();
    }
}

/// Through the engine (the interpreter as the `cuda` backend, running
/// `run_plan_to_host` as the CUDA backend does for collects), the metrics'
/// downloaded bytes are the result's device bytes (bools travel as 4-byte
/// words), plus, under compaction, one 4-byte survivor count per chunk.
#[test]
fn chunked_downloads_report_their_bytes_through_the_engine() {
    let chunk = 100;
    let e = interp_engine(small_caps(), chunk);
    for n in [0usize, 1, 99, 100, 101, 1000, 1234] {
        let chunks = n.div_ceil(chunk).max(1) as u64;
        let xs: Vec<f32> = (0..n).map(|i| (i % 41) as f32 - 20.0).collect();
        let q = || {
            e.query(&xs)
                .on(BackendKind::Cuda)
                .no_fallback()
                .with_metrics()
        };
        let cpu = || e.query(&xs).on(BackendKind::CpuScalar);

        let (got, m): (Vec<f32>, _) = q().map(|x| x * 2.0).collect();
        assert_eq!(got, cpu().map(|x| x * 2.0).collect::<Vec<f32>>(), "n={n}");
        assert_eq!(m.backend, BackendKind::Cuda);
        assert_eq!(m.bytes_downloaded, 4 * n as u64, "map f32, n={n}");

        let (got, m): (Vec<f64>, _) = q().map(|x| x.cast::<f64>() * 0.5).collect();
        assert_eq!(
            got,
            cpu().map(|x| x.cast::<f64>() * 0.5).collect::<Vec<f64>>()
        );
        assert_eq!(m.bytes_downloaded, 8 * n as u64, "map f64, n={n}");

        let (got, m): (Vec<bool>, _) = q().map(|x| x.gt(0.0)).collect();
        assert_eq!(got, cpu().map(|x| x.gt(0.0)).collect::<Vec<bool>>());
        assert_eq!(m.bytes_downloaded, 4 * n as u64, "map bool, n={n}");

        let (got, m): (Vec<f32>, _) = q().filter(|x| x.gt(0.0)).collect();
        let want: Vec<f32> = cpu().filter(|x| x.gt(0.0)).collect();
        assert_eq!(got, want, "n={n}");
        assert_eq!(
            m.bytes_downloaded,
            4 * want.len() as u64 + 4 * chunks,
            "filter f32, n={n}"
        );
    }
}

// ------------------------------------------------------------------ random stages

/// A random element program over inputs of `t`: a DAG of operations valid
/// for their operand types, and a random terminal.
#[derive(Clone, Debug)]
struct RandomStage {
    t: DType,
    ops: Vec<(u8, u8, u8, u8)>,
    terminal: u8,
    filter: bool,
    n: usize,
    seed: u64,
}

fn random_stage() -> impl Strategy<Value = RandomStage> {
    (
        prop::sample::select(NUMERIC.to_vec()),
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()), 1..10),
        any::<u8>(),
        any::<bool>(),
        prop::sample::select(vec![0usize, 1, 31, 64, 65, 129, 300, 700]),
        any::<u64>(),
    )
        .prop_map(|(t, ops, terminal, filter, n, seed)| RandomStage {
            t,
            ops,
            terminal,
            filter,
            n,
            seed,
        })
}

impl RandomStage {
    fn plan(&self) -> PhysicalPlan {
        let t = self.t;
        one_stage(&[t, t], 1, |p, x| {
            let mut vals: Vec<Value> = vec![x[0], x[1]];
            let param = p.push_typed(Node::Param(0), t).unwrap();
            vals.push(param);
            for &(kind, a, b, extra) in &self.ops {
                let pick = |i: u8, vals: &[Value], p: &ExprArena| {
                    let same: Vec<Value> = vals.iter().copied().filter(|&v| p.ty(v) == t).collect();
                    same[i as usize % same.len()]
                };
                let (a, b) = (pick(a, &vals, p), pick(b, &vals, p));
                let v = match kind % 8 {
                    0 => {
                        let ops: Vec<BinaryOp> = BinaryOp::ALL
                            .into_iter()
                            .filter(|o| o.result_type(t) == Some(t))
                            .collect();
                        bin(p, ops[extra as usize % ops.len()], a, b)
                    }
                    1 => {
                        let ops: Vec<UnaryOp> =
                            UnaryOp::ALL.into_iter().filter(|o| o.accepts(t)).collect();
                        p.push(Node::Unary(ops[extra as usize % ops.len()], a))
                            .unwrap()
                    }
                    2 => {
                        let ops: Vec<BinaryOp> = BinaryOp::ALL
                            .into_iter()
                            .filter(|o| o.is_comparison())
                            .collect();
                        let cnd = bin(p, ops[extra as usize % ops.len()], a, b);
                        p.push(Node::Select(cnd, a, b)).unwrap()
                    }
                    3 => p.push(Node::MulAdd(a, b, a)).unwrap(),
                    4 => {
                        let via = DType::ALL[extra as usize % DType::ALL.len()];
                        let m = p.push_typed(Node::Cast(a), via).unwrap();
                        p.push_typed(Node::Cast(m), t).unwrap()
                    }
                    5 => p.push(Node::Powi(a, (extra % 7) as i32 - 2)).unwrap(),
                    6 => {
                        let k = c(p, Scalar::I64(extra as i64 - 128).cast(t));
                        bin(p, BinaryOp::Mul, a, k)
                    }
                    _ => bin(p, BinaryOp::Add, a, param),
                };
                vals.push(v);
            }
            let last = *vals.last().unwrap();
            let zero = c(p, Scalar::zero(t));
            let pred = bin(p, BinaryOp::Ge, last, zero);
            let terminal = match self.terminal % 6 {
                0 => Terminal::Collect(smallvec![last, x[0]]),
                1 => Terminal::Reduce(smallvec![
                    agg(AggKind::Sum, Some(last)),
                    agg(AggKind::Max, Some(last)),
                    agg(AggKind::ArgMin, Some(last)),
                    agg(AggKind::Count, None),
                ]),
                2 => Terminal::Reduce(smallvec![
                    agg(AggKind::Min, Some(last)),
                    agg(AggKind::All, Some(pred))
                ]),
                3 => Terminal::Scan {
                    column: last,
                    op: ScanOp::Sum,
                    exclusive: self.filter,
                },
                4 => Terminal::Collect(smallvec![last]),
                _ => Terminal::Reduce(smallvec![
                    agg(AggKind::Any, Some(pred)),
                    agg(AggKind::ArgMax, Some(last))
                ]),
            };
            let scan = matches!(terminal, Terminal::Scan { .. });
            (
                ((self.filter && !scan) || self.terminal % 6 == 4).then_some(pred),
                terminal,
            )
        })
    }
}

fn tolerance(t: DType) -> f64 {
    if t == DType::F32 {
        1e-3
    } else {
        1e-9
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn random_stages_assemble_and_match_the_reference(r in random_stage()) {
        let plan = r.plan();
        let caps = small_caps();
        let ptx = compile(&plan, &caps, &PtxOptions::default()).unwrap();
        if let Some(pt) = ptxas() {
            ptxas_check(&pt, "random", &ptx.stages[0].module.text).unwrap();
        }
        let inputs = [column(r.t, r.n, r.seed), column(r.t, r.n, r.seed ^ 0x55)];
        let params = [Scalar::I64(3).cast(r.t)];
        let refs: Vec<ColumnRef<'_>> = inputs.iter().map(|c| c.as_ref()).collect();
        let want = cpu_scalar::run_plan(&plan, &refs, &params).unwrap();
        let (got, _) = run_compiled(&plan, &ptx, &inputs, &params, RunLimits::uniform(250)).unwrap();
        // Float sums of random programs can cancel catastrophically; only
        // integers and booleans must agree exactly here, floats loosely.
        if r.t.is_float() {
            if let Err(e) = compare(&want, &got, tolerance(r.t)) {
                prop_assert!(float_noise_only(&want, &got), "{e}\n{r:?}");
            }
        } else {
            prop_assert!(compare(&want, &got, 0.0).is_ok(), "{:?}\n{r:?}", compare(&want, &got, 0.0));
        }
    }
}

/// Float outputs that differ only where the reference itself is
/// ill-conditioned (a sum whose terms cancel, an argmin between values that
/// tie within rounding): everything but floats must still agree.
fn float_noise_only(want: &PlanOutput, got: &PlanOutput) -> bool {
    match (want, got) {
        (PlanOutput::Aggregates(w), PlanOutput::Aggregates(g)) => w
            .iter()
            .zip(g)
            .all(|(a, b)| a.dtype().is_float() || a.dtype() == DType::U64 || a == b),
        (PlanOutput::Columns(w), PlanOutput::Columns(g)) => {
            w.iter().zip(g).all(|(a, b)| a.len() == b.len())
        }
        _ => false,
    }
}

// ------------------------------------------------------------------ faults

/// The CUDA backend's fault layer over the interpreter: every injected
/// fault is an error of the right phase, out-of-memory is flagged.
#[cfg(feature = "cuda")]
#[test]
fn injected_faults_are_errors_of_their_phase() {
    use computeq::plumbing::backends::cuda::{FaultPlan, FaultyDevice};
    let plan = map_plan(DType::F32);
    let ptx = compile(&plan, &small_caps(), &PtxOptions::default()).unwrap();
    let x = column(DType::F32, 100, 1);
    for (name, phase) in faults::faults_of("cuda") {
        let faults = FaultPlan::parse(&format!("cuda:{name}"));
        assert_ne!(faults, FaultPlan::NONE, "cuda:{name} does not parse");
        let mut inner = InterpDevice::new();
        let mut dev = FaultyDevice {
            inner: &mut inner,
            faults,
        };
        let r = (|| -> Result<(), BackendError> {
            let m = dev.load(&ptx.stages[0].module)?;
            let ins = [RunInput::Host(x.as_ref())];
            let out = run_plan(
                &mut dev,
                &plan,
                &ptx,
                &[&m],
                &ins,
                &[],
                &RunLimits::default(),
                &mut RunStats::default(),
            )?;
            if let RunOutput::Columns(c) = out {
                download_column(&mut dev, &c[0], &mut RunStats::default())?;
            }
            Ok(())
        })();
        let e = r.expect_err("an injected fault must fail the run");
        assert_eq!(e.phase, phase, "{faults:?}: {e}");
        assert_eq!(e.out_of_memory, faults.oom);
        assert!(e.message.contains("injected fault"));
        // The same through `run_plan_to_host`, whose only downloads here
        // are the chunked ones (`start_download`): `cuda:download` fires
        // on them too.
        let mut inner = InterpDevice::new();
        let mut dev = FaultyDevice {
            inner: &mut inner,
            faults,
        };
        let e = run_both_ways(
            &mut dev,
            true,
            &plan,
            &ptx,
            std::slice::from_ref(&x),
            RunLimits::uniform(30),
        )
        .expect_err("an injected fault must fail the run to the host");
        assert_eq!(e.phase, phase, "to the host, {faults:?}: {e}");
        assert!(e.message.contains("injected fault"));
    }
    // And with no fault the same run succeeds.
    let mut inner = InterpDevice::new();
    let mut dev = FaultyDevice {
        inner: &mut inner,
        faults: FaultPlan::NONE,
    };
    let m = dev.load(&ptx.stages[0].module).unwrap();
    let ins = [RunInput::Host(x.as_ref())];
    run_plan(
        &mut dev,
        &plan,
        &ptx,
        &[&m],
        &ins,
        &[],
        &RunLimits::default(),
        &mut RunStats::default(),
    )
    .unwrap();
}

/// The same faults through the engine: the `cuda` backend (the interpreter
/// behind the CUDA fault layer) fails in the injected phase, the runtime
/// falls back to a CPU backend with the right answer, and the metrics
/// record the failed attempt; without fallback the error carries it.
#[cfg(feature = "cuda")]
#[test]
fn injected_faults_fall_back_through_the_runtime() {
    use computeq::plumbing::backends::cuda::FaultPlan;
    let b = Arc::new(InterpBackend::new(small_caps(), 1 << 20));
    let e = Engine::with_config(Config::default()).with_backend(b.clone());
    let xs: Vec<f32> = (0..500).map(|i| (i % 37) as f32 - 18.0).collect();
    let want_sum: f32 = e
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .map(|x| x * 2.0)
        .sum();
    let want_kept: Vec<f32> = e
        .query(&xs)
        .on(BackendKind::CpuScalar)
        .filter(|x| x.gt(0.0))
        .collect();
    for (name, phase) in faults::faults_of("cuda") {
        let faults = FaultPlan::parse(&format!("cuda:{name}"));
        assert_ne!(faults, FaultPlan::NONE, "{name} does not parse");
        *b.faults.lock() = faults;
        let attempt = |m: &computeq::metrics::ExecutionMetrics| {
            let a = m
                .attempts
                .iter()
                .find(|a| a.backend == BackendKind::Cuda)
                .unwrap_or_else(|| panic!("cuda:{name}: no failed cuda attempt recorded"));
            assert_eq!(a.phase, phase, "cuda:{name}: {}", a.message);
            assert!(
                a.message.contains(&format!("injected fault (cuda:{name})")),
                "{}",
                a.message
            );
        };
        let (s, m) = e
            .query(&xs)
            .on(BackendKind::Cuda)
            .with_metrics()
            .map(|x| x * 2.0)
            .sum();
        assert_eq!(s, want_sum, "cuda:{name}");
        assert_ne!(m.backend, BackendKind::Cuda, "cuda:{name} did not fire");
        assert!(m.fell_back(), "cuda:{name}");
        attempt(&m);
        let (kept, m): (Vec<f32>, _) = e
            .query(&xs)
            .on(BackendKind::Cuda)
            .with_metrics()
            .filter(|x| x.gt(0.0))
            .collect();
        assert_eq!(kept, want_kept, "cuda:{name}");
        assert_ne!(m.backend, BackendKind::Cuda, "cuda:{name} did not fire");
        attempt(&m);
        let err = e
            .query(&xs)
            .on(BackendKind::Cuda)
            .no_fallback()
            .map(|x| x * 2.0)
            .try_collect::<Vec<f32>>()
            .expect_err("no fallback: the fault is the answer");
        let last = err.attempts().last().expect("the attempt");
        assert_eq!(
            (last.backend, last.phase),
            (BackendKind::Cuda, phase),
            "{err}"
        );
    }
    // Cleared, the same queries run on cuda.
    *b.faults.lock() = FaultPlan::NONE;
    let (s, m) = e
        .query(&xs)
        .on(BackendKind::Cuda)
        .with_metrics()
        .map(|x| x * 2.0)
        .sum();
    assert_eq!((s, m.backend), (want_sum, BackendKind::Cuda));
    assert!(m.attempts.is_empty(), "{:?}", m.attempts);
}
