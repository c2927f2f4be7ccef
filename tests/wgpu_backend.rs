//! The wgpu backend against the reference interpreter, on hand-built plans.
//!
//! Runs on whatever adapter wgpu finds (`WGPU_BACKEND=vulkan` for lavapipe,
//! `WGPU_BACKEND=gl` for llvmpipe). Without an adapter every test prints why
//! it skips, unless `COMPUTEQ_REQUIRE` lists `wgpu`, in which case it fails.
#![cfg(feature = "wgpu")]

#[path = "support/faults.rs"]
mod faults;
#[path = "support/golden.rs"]
mod golden;

use computeq::plumbing::backends::cpu_scalar::run_plan;
use computeq::plumbing::backends::wgpu::{FaultPlan, WgpuBackend};
use computeq::plumbing::codegen::{lower_stage, wgsl, Caps};
use computeq::plumbing::expr::{BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp, Value};
use computeq::plumbing::CompiledPlan;
use computeq::plumbing::{
    AggKind, Aggregate, Combine, PhysicalPlan, PlanOutput, RangeOp, ScanOp, Stage, StageInput,
    Terminal,
};
use computeq::plumbing::{
    Availability, Backend, BackendKind, DeviceColumn, Input, Job, Phase, RunStats, TimingSource,
};
use computeq::plumbing::{Column, ColumnRef, Decline};
use computeq::{Config, Engine};
use golden::Golden;
use smallvec::{smallvec, SmallVec};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What the non-finite guard says of a run it discarded (as
/// `common::DISCARDED` in tests/common; this binary does not build `common`).
const DISCARDED: &str = "met an infinity or a NaN";

// ---------------------------------------------------------------- helpers

fn required() -> bool {
    std::env::var("COMPUTEQ_REQUIRE").is_ok_and(|v| v.split(',').any(|s| s.trim() == "wgpu"))
}

/// Whether the wgpu adapter of `b` (opened) is GL, where the probe does
/// not measure the device (wgpu-hal's one context lock panics waiting
/// threads after 6 s) and its class prices it.
fn on_gl(b: &WgpuBackend) -> bool {
    b.adapter().is_some_and(|a| a.ends_with("(Gl)"))
}

/// The `wgpu.profile` setting says measured; on GL, never (the class's
/// prior, or nothing on file).
fn assert_measured(gl: bool, profile: &str, ex: &impl std::fmt::Display) {
    assert_eq!(profile.contains("measured=true"), !gl, "{profile}\n{ex}");
}

/// A backend injecting `faults` that trusts infinities and NaNs: these
/// tests check the kernels' own rules for them (NaN-skipping min/max,
/// saturating casts, ...) on the adapter at hand, which the non-finite
/// guard would discard (`guarded` opens one with the guard).
fn open(faults: FaultPlan) -> Option<WgpuBackend> {
    let b = guarded(faults)?;
    b.set_trust_non_finite(true);
    Some(b)
}

/// A backend with the default guard against infinities and NaNs.
fn guarded(faults: FaultPlan) -> Option<WgpuBackend> {
    let b = WgpuBackend::new(faults);
    match b.availability() {
        Availability::Available => Some(b),
        Availability::Unavailable(why) => {
            assert!(!required(), "COMPUTEQ_REQUIRE=wgpu but no adapter: {why}");
            eprintln!("skipping: wgpu unavailable: {why}");
            None
        }
    }
}

/// The backend shared by the tests that inject no fault.
fn shared() -> Option<&'static WgpuBackend> {
    static B: OnceLock<Option<WgpuBackend>> = OnceLock::new();
    B.get_or_init(|| {
        let b = open(FaultPlan::NONE);
        if let Some(b) = &b {
            eprintln!("wgpu adapter: {:?}, caps {:?}", b.adapter(), b.caps());
        }
        b
    })
    .as_ref()
}

macro_rules! backend {
    () => {
        match shared() {
            Some(b) => b,
            None => return,
        }
    };
}

const LENS: [usize; 9] = [0, 1, 7, 255, 256, 257, 1024, 1025, 65537];

/// Deterministic pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn f32s(&mut self, n: usize, specials: bool) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let r = self.next();
                if specials && r.is_multiple_of(97) {
                    [f32::NAN, f32::INFINITY, -0.0, 1e30, -1e30][i % 5]
                } else {
                    ((r >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0) as f32
                }
            })
            .collect()
    }

    fn i32s(&mut self, n: usize) -> Vec<i32> {
        (0..n)
            .map(|i| match self.next() % 50 {
                0 => [i32::MIN, i32::MAX, 0, -1][i % 4],
                r => (self.next() as i32) >> (r % 28),
            })
            .collect()
    }
}

/// Builds a one-stage plan over `inputs` (joined in order) with optional
/// enumerate and skip/take parameters.
#[derive(Clone)]
struct StageBuilder {
    p: ExprArena,
    inputs: Vec<Value>,
    dtypes: Vec<DType>,
    range: SmallVec<[RangeOp; 4]>,
    enumerates: u16,
    params: usize,
}

impl StageBuilder {
    fn new(dtypes: &[DType]) -> StageBuilder {
        let mut p = ExprArena::new();
        let inputs = dtypes
            .iter()
            .enumerate()
            .map(|(s, &t)| p.push_typed(Node::Input(s as u16), t).unwrap())
            .collect();
        StageBuilder {
            p,
            inputs,
            dtypes: dtypes.to_vec(),
            range: (0..dtypes.len()).map(|s| RangeOp::Join(s as u16)).collect(),
            enumerates: 0,
            params: 0,
        }
    }

    fn x(&self, s: usize) -> Value {
        self.inputs[s]
    }

    fn c(&mut self, s: Scalar) -> Value {
        self.p.push(Node::Const(s)).unwrap()
    }

    fn bin(&mut self, op: BinaryOp, a: Value, b: Value) -> Value {
        self.p.push(Node::Binary(op, a, b)).unwrap()
    }

    fn un(&mut self, op: UnaryOp, a: Value) -> Value {
        self.p.push(Node::Unary(op, a)).unwrap()
    }

    fn cast(&mut self, a: Value, to: DType) -> Value {
        self.p.push_typed(Node::Cast(a), to).unwrap()
    }

    fn param(&mut self, ty: DType) -> (Value, u16) {
        let slot = self.params as u16;
        self.params += 1;
        (self.p.push_typed(Node::Param(slot), ty).unwrap(), slot)
    }

    fn enumerate(&mut self) -> Value {
        self.range.push(RangeOp::Enumerate(self.enumerates));
        self.enumerates += 1;
        self.p
            .push_typed(Node::Index(self.enumerates - 1), DType::U64)
            .unwrap()
    }

    fn skip_take(&mut self) -> (u16, u16) {
        let (s, t) = (self.params as u16, self.params as u16 + 1);
        self.params += 2;
        self.range.push(RangeOp::Skip(s));
        self.range.push(RangeOp::Take(t));
        (s, t)
    }

    fn finish(self, predicate: Option<Value>, terminal: Terminal) -> CompiledPlan {
        let stage = Stage {
            inputs: (0..self.dtypes.len() as u16)
                .map(StageInput::Source)
                .collect(),
            enumerates: self.enumerates,
            range: self.range,
            program: self.p,
            predicate,
            terminal,
        };
        plan_of(
            self.dtypes.iter().copied().collect(),
            self.params,
            vec![stage],
        )
    }
}

fn plan_of(input_dtypes: SmallVec<[DType; 2]>, params: usize, stages: Vec<Stage>) -> CompiledPlan {
    CompiledPlan::new(
        PhysicalPlan {
            input_dtypes,
            param_count: params,
            stages: stages.into_iter().collect(),
        },
        0,
        Default::default(),
    )
}

fn combine(
    ty: DType,
    identity: u16,
    f: impl FnOnce(&mut ExprArena, Value, Value) -> Value,
) -> Combine {
    let mut p = ExprArena::new();
    let a = p.push_typed(Node::Input(0), ty).unwrap();
    let b = p.push_typed(Node::Input(1), ty).unwrap();
    let output = f(&mut p, a, b);
    Combine {
        program: p,
        output,
        identity,
    }
}

fn run(
    b: &WgpuBackend,
    plan: &CompiledPlan,
    cols: &[ColumnRef<'_>],
    params: &[Scalar],
) -> (
    Result<PlanOutput, computeq::plumbing::BackendError>,
    RunStats,
) {
    let inputs: Vec<Input<'_>> = cols.iter().map(|&c| Input::Host(c)).collect();
    let mut stats = RunStats::default();
    let job = Job {
        plan,
        inputs: &inputs,
        params,
        keep_on_device: false,
    };
    (b.execute(&job, &mut stats), stats)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

fn same_scalar(a: Scalar, b: Scalar, tol: f64) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => close(x as f64, y as f64, tol),
        (Scalar::F64(x), Scalar::F64(y)) => close(x, y, tol),
        _ => a == b,
    }
}

fn same_column(a: &Column, b: &Column, tol: f64) -> Result<(), String> {
    if a.len() != b.len() || a.dtype() != b.dtype() {
        return Err(format!(
            "{}[{}] vs {}[{}]",
            a.dtype(),
            a.len(),
            b.dtype(),
            b.len()
        ));
    }
    for i in 0..a.len() {
        let (x, y) = (a.as_ref().get(i), b.as_ref().get(i));
        if !same_scalar(x, y, tol) {
            return Err(format!("at {i}: {x} vs {y}"));
        }
    }
    Ok(())
}

/// Runs on wgpu and on cpu-scalar and compares; `tol` is the relative
/// tolerance for floats (0 for exact).
fn check(
    b: &WgpuBackend,
    plan: &CompiledPlan,
    cols: &[ColumnRef<'_>],
    params: &[Scalar],
    tol: f64,
) -> RunStats {
    let want = run_plan(&plan.plan, cols, params).expect("reference");
    let (got, stats) = run(b, plan, cols, params);
    let got = got.unwrap_or_else(|e| panic!("wgpu failed: {e}\nplan:\n{}", plan.plan));
    let len = cols.first().map_or(0, |c| c.len());
    match (&want, &got) {
        (PlanOutput::Aggregates(w), PlanOutput::Aggregates(g)) => {
            assert_eq!(w.len(), g.len());
            for (i, (x, y)) in w.iter().zip(g).enumerate() {
                assert!(
                    same_scalar(*x, *y, tol),
                    "len {len}: aggregate {i}: want {x}, got {y}\n{}",
                    plan.plan
                );
            }
        }
        (PlanOutput::Columns(w), PlanOutput::Columns(g)) => {
            assert_eq!(w.len(), g.len());
            for (i, (x, y)) in w.iter().zip(g).enumerate() {
                same_column(x, y, tol)
                    .unwrap_or_else(|e| panic!("len {len}: column {i}: {e}\n{}", plan.plan));
            }
        }
        _ => panic!("output kinds differ: {want:?} vs {got:?}"),
    }
    stats
}

// ---------------------------------------------------------------- plans

/// `collect(x * 2 + 1, sqrt(|x|), x > 0.5)` over f32.
fn map_plan() -> CompiledPlan {
    let mut s = StageBuilder::new(&[DType::F32]);
    let x = s.x(0);
    let two = s.c(Scalar::F32(2.0));
    let one = s.c(Scalar::F32(1.0));
    let m = s.bin(BinaryOp::Mul, x, two);
    let m = s.bin(BinaryOp::Add, m, one);
    let a = s.un(UnaryOp::Abs, x);
    let r = s.un(UnaryOp::Sqrt, a);
    let half = s.c(Scalar::F32(0.5));
    let g = s.bin(BinaryOp::Gt, x, half);
    s.finish(None, Terminal::Collect(smallvec![m, r, g]))
}

/// Every built-in aggregate of `x * k` (k a parameter), over `x > 0.5` or
/// everything.
fn multi_agg_plan(ty: DType, predicated: bool) -> CompiledPlan {
    let mut s = StageBuilder::new(&[ty]);
    let x = s.x(0);
    let (k, _) = s.param(ty);
    let m = s.bin(BinaryOp::Mul, x, k);
    let z = s.c(Scalar::zero(ty));
    let pos = s.bin(BinaryOp::Gt, x, z);
    let agg = |kind, column| Aggregate { kind, column };
    let aggs = smallvec![
        agg(AggKind::Sum, Some(m)),
        agg(AggKind::Min, Some(m)),
        agg(AggKind::Max, Some(m)),
        agg(AggKind::Count, None),
        agg(AggKind::ArgMin, Some(m)),
        agg(AggKind::ArgMax, Some(x)),
        agg(AggKind::Any, Some(pos)),
        agg(AggKind::All, Some(pos)),
    ];
    let pred = if predicated {
        let t = s.c(Scalar::F64(0.25).cast(ty));
        Some(s.bin(BinaryOp::Ne, x, t))
    } else {
        None
    };
    s.finish(pred, Terminal::Reduce(aggs))
}

fn scan_plan(
    ty: DType,
    op: Option<fn(&mut ExprArena, Value, Value) -> Value>,
    exclusive: bool,
) -> (CompiledPlan, usize) {
    let mut s = StageBuilder::new(&[ty]);
    let x = s.x(0);
    let (op, params) = match op {
        None => (ScanOp::Sum, 0),
        Some(f) => {
            s.param(ty);
            (ScanOp::Custom(combine(ty, 0, f)), 1)
        }
    };
    (
        s.finish(
            None,
            Terminal::Scan {
                column: x,
                op,
                exclusive,
            },
        ),
        params,
    )
}

/// `zip(x, y).enumerate().filter(x > 0).collect((i as f32, y, x))`.
fn compact_plan() -> CompiledPlan {
    let mut s = StageBuilder::new(&[DType::F32, DType::I32]);
    let i = s.enumerate();
    let fi = s.cast(i, DType::F32);
    let (x, y) = (s.x(0), s.x(1));
    let z = s.c(Scalar::F32(0.0));
    let keep = s.bin(BinaryOp::Gt, x, z);
    s.finish(Some(keep), Terminal::Collect(smallvec![fi, y, x]))
}

fn lengths() -> impl Iterator<Item = usize> {
    LENS.into_iter()
}

// ---------------------------------------------------------------- tests

#[test]
fn element_wise_store_matches_the_reference() {
    let b = backend!();
    let plan = map_plan();
    let mut rng = Rng(1);
    for n in lengths() {
        let xs = rng.f32s(n, true);
        check(b, &plan, &[ColumnRef::F32(&xs)], &[], 1e-6);
    }
}

#[test]
fn multi_aggregate_reductions_follow_the_nan_rules() {
    let b = backend!();
    let mut rng = Rng(2);
    for predicated in [false, true] {
        let plan = multi_agg_plan(DType::F32, predicated);
        for n in lengths() {
            let xs = rng.f32s(n, true);
            check(b, &plan, &[ColumnRef::F32(&xs)], &[Scalar::F32(1.5)], 1e-4);
        }
        // All NaN: min/max NaN, arg* 0.
        let xs = vec![f32::NAN; 300];
        check(b, &plan, &[ColumnRef::F32(&xs)], &[Scalar::F32(1.0)], 0.0);
        // Ties: the first position wins.
        let xs: Vec<f32> = (0..3000).map(|i| (i % 7) as f32).collect();
        check(b, &plan, &[ColumnRef::F32(&xs)], &[Scalar::F32(-1.0)], 0.0);
    }
}

#[test]
fn integer_reductions_are_exact() {
    let b = backend!();
    let mut rng = Rng(3);
    for ty in [DType::I32, DType::U32] {
        for predicated in [false, true] {
            let plan = multi_agg_plan(ty, predicated);
            for n in lengths() {
                let xs = rng.i32s(n);
                let us: Vec<u32> = xs.iter().map(|&v| v as u32).collect();
                let (col, k) = match ty {
                    DType::I32 => (ColumnRef::I32(&xs), Scalar::I32(-3)),
                    _ => (ColumnRef::U32(&us), Scalar::U32(7)),
                };
                check(b, &plan, &[col], &[k], 0.0);
            }
        }
    }
}

#[test]
fn integer_and_cast_semantics_match_the_reference() {
    let b = backend!();
    // div/rem by zero and MIN / -1, wrapping, float→int saturation, bool.
    let mut s = StageBuilder::new(&[DType::I32, DType::I32, DType::F32]);
    let (x, y, f) = (s.x(0), s.x(1), s.x(2));
    let d = s.bin(BinaryOp::Div, x, y);
    let r = s.bin(BinaryOp::Rem, x, y);
    let m = s.bin(BinaryOp::Mul, x, y);
    let n = s.un(UnaryOp::Neg, x);
    let a = s.un(UnaryOp::Abs, x);
    let fi = s.cast(f, DType::I32);
    let fu = s.cast(f, DType::U32);
    let fb = s.cast(f, DType::Bool);
    let xf = s.cast(x, DType::F32);
    let xu = s.cast(x, DType::U32);
    let rd = s.un(UnaryOp::Round, f);
    let mn = s.bin(BinaryOp::Min, f, xf);
    let fr = s.bin(BinaryOp::Rem, f, xf);
    let bb = s.bin(BinaryOp::Lt, fb, fb);
    // Two plans: GL allows 16 storage buffers per kernel.
    let s2 = s.clone();
    let plan = s.finish(None, Terminal::Collect(smallvec![d, r, m, n, a, fi, fu]));
    let plan2 = s2.finish(
        None,
        Terminal::Collect(smallvec![fb, xf, xu, rd, mn, fr, bb]),
    );
    let xs = vec![7, i32::MIN, i32::MIN, 5, -5, 0, i32::MAX, 3, -9, 100];
    let ys = vec![0, -1, 1, 2, 2, 0, 2, -1, 4, 7];
    let fs = vec![
        f32::NAN,
        3e9,
        -3e9,
        2.5,
        -2.5,
        0.5,
        -0.5,
        1.4999999,
        f32::INFINITY,
        -7.9,
    ];
    check(
        b,
        &plan,
        &[
            ColumnRef::I32(&xs),
            ColumnRef::I32(&ys),
            ColumnRef::F32(&fs),
        ],
        &[],
        1e-6,
    );
    check(
        b,
        &plan2,
        &[
            ColumnRef::I32(&xs),
            ColumnRef::I32(&ys),
            ColumnRef::F32(&fs),
        ],
        &[],
        1e-6,
    );
}

#[test]
fn scans_are_reduce_then_scan_in_order() {
    let b = backend!();
    let mut rng = Rng(4);
    let last_nonzero: fn(&mut ExprArena, Value, Value) -> Value = |p, a, b| {
        let z = p.push(Node::Const(Scalar::I32(0))).unwrap();
        let nz = p.push(Node::Binary(BinaryOp::Ne, b, z)).unwrap();
        p.push(Node::Select(nz, b, a)).unwrap()
    };
    let max: fn(&mut ExprArena, Value, Value) -> Value =
        |p, a, b| p.push(Node::Binary(BinaryOp::Max, a, b)).unwrap();
    for exclusive in [false, true] {
        let (sum_i, _) = scan_plan(DType::I32, None, exclusive);
        let (sum_f, _) = scan_plan(DType::F32, None, exclusive);
        let (last, _) = scan_plan(DType::I32, Some(last_nonzero), exclusive);
        let (mx, _) = scan_plan(DType::I32, Some(max), exclusive);
        for n in lengths() {
            let xs = rng.i32s(n);
            let sparse: Vec<i32> = xs.iter().map(|&v| if v % 5 == 0 { v } else { 0 }).collect();
            check(b, &sum_i, &[ColumnRef::I32(&xs)], &[], 0.0);
            check(b, &last, &[ColumnRef::I32(&sparse)], &[Scalar::I32(0)], 0.0);
            check(
                b,
                &mx,
                &[ColumnRef::I32(&xs)],
                &[Scalar::I32(i32::MIN)],
                0.0,
            );
            let fs: Vec<f32> = rng.f32s(n, false);
            check(b, &sum_f, &[ColumnRef::F32(&fs)], &[], 1e-3);
        }
    }
}

#[test]
fn filter_collect_keeps_order() {
    let b = backend!();
    let plan = compact_plan();
    let mut rng = Rng(5);
    for n in lengths() {
        let xs = rng.f32s(n, true);
        let ys = rng.i32s(n + 3);
        check(
            b,
            &plan,
            &[ColumnRef::F32(&xs), ColumnRef::I32(&ys)],
            &[],
            0.0,
        );
    }
    // Nothing survives / everything survives.
    let xs = vec![-1.0f32; 3000];
    let ys = vec![1i32; 3000];
    check(
        b,
        &plan,
        &[ColumnRef::F32(&xs), ColumnRef::I32(&ys)],
        &[],
        0.0,
    );
    let xs = vec![1.0f32; 3000];
    check(
        b,
        &plan,
        &[ColumnRef::F32(&xs), ColumnRef::I32(&ys)],
        &[],
        0.0,
    );
}

#[test]
fn bool_columns_travel_as_words() {
    let b = backend!();
    let mut s = StageBuilder::new(&[DType::Bool, DType::Bool]);
    let (x, y) = (s.x(0), s.x(1));
    let a = s.bin(BinaryOp::And, x, y);
    let o = s.un(UnaryOp::Not, x);
    let c = s.cast(y, DType::U32);
    let plan = s.finish(Some(o), Terminal::Collect(smallvec![a, c, y]));
    let mut rng = Rng(6);
    for n in lengths() {
        let xs: Vec<bool> = (0..n).map(|_| rng.next().is_multiple_of(3)).collect();
        let ys: Vec<bool> = (0..n).map(|_| rng.next().is_multiple_of(2)).collect();
        check(
            b,
            &plan,
            &[ColumnRef::Bool(&xs), ColumnRef::Bool(&ys)],
            &[],
            0.0,
        );
    }
}

#[test]
fn skip_take_and_enumerate() {
    let b = backend!();
    let mut s = StageBuilder::new(&[DType::U32]);
    let (sk, tk) = s.skip_take();
    let i = s.enumerate();
    let iu = s.cast(i, DType::U32);
    let x = s.x(0);
    let sum = s.bin(BinaryOp::Add, x, iu);
    let plan = s.finish(None, Terminal::Collect(smallvec![sum, iu]));
    let _ = (sk, tk);
    let xs: Vec<u32> = (0..5000).map(|v| v * 3).collect();
    for (skip, take) in [
        (0u64, u64::MAX),
        (1, 10),
        (255, 1000),
        (4999, 5),
        (6000, 1),
        (17, 0),
    ] {
        check(
            b,
            &plan,
            &[ColumnRef::U32(&xs)],
            &[Scalar::U64(skip), Scalar::U64(take)],
            0.0,
        );
    }
}

#[test]
fn multi_stage_plans_keep_intermediates_on_the_device() {
    let b = backend!();
    // stage 0: y = x * 3 (collect); stage 1: sum of y where y > 1, argmax y.
    let mut p0 = ExprArena::new();
    let x = p0.push_typed(Node::Input(0), DType::F32).unwrap();
    let k = p0.push(Node::Const(Scalar::F32(3.0))).unwrap();
    let y = p0.push(Node::Binary(BinaryOp::Mul, x, k)).unwrap();
    let s0 = Stage {
        inputs: smallvec![StageInput::Source(0)],
        enumerates: 0,
        range: smallvec![RangeOp::Join(0)],
        program: p0,
        predicate: None,
        terminal: Terminal::Collect(smallvec![y]),
    };
    let mut p1 = ExprArena::new();
    let y = p1.push_typed(Node::Input(0), DType::F32).unwrap();
    let one = p1.push(Node::Const(Scalar::F32(1.0))).unwrap();
    let gt = p1.push(Node::Binary(BinaryOp::Gt, y, one)).unwrap();
    let s1 = Stage {
        inputs: smallvec![StageInput::Stage {
            stage: 0,
            column: 0
        }],
        enumerates: 0,
        range: smallvec![RangeOp::Join(0)],
        program: p1,
        predicate: Some(gt),
        terminal: Terminal::Reduce(smallvec![
            Aggregate {
                kind: AggKind::Sum,
                column: Some(y)
            },
            Aggregate {
                kind: AggKind::ArgMax,
                column: Some(y)
            },
        ]),
    };
    let plan = plan_of(smallvec![DType::F32], 0, vec![s0, s1]);
    let mut rng = Rng(7);
    for n in lengths() {
        let xs = rng.f32s(n, false);
        let stats = check(b, &plan, &[ColumnRef::F32(&xs)], &[], 1e-4);
        assert!(stats.bytes_downloaded < 64, "only the aggregates come back");
    }
}

#[test]
fn wide_types_on_adapters_that_have_them() {
    let b = backend!();
    let caps = b.caps().unwrap();
    let plan = multi_agg_plan(DType::I64, true);
    let fplan = multi_agg_plan(DType::F64, false);
    let (scan, _) = scan_plan(DType::U64, None, false);
    if !caps.int64 {
        assert_eq!(
            b.supports(&plan.plan),
            Err(Decline::MissingType {
                dtype: DType::I64,
                feature: "SHADER_INT64"
            })
        );
        assert!(b.supports(&fplan.plan).is_err());
        eprintln!("skipping the 64-bit runs: the adapter has no SHADER_INT64");
        return;
    }
    let mut rng = Rng(8);
    for n in lengths() {
        let xs: Vec<i64> = (0..n)
            .map(|_| rng.next() as i64 >> (rng.next() % 40))
            .collect();
        check(b, &plan, &[ColumnRef::I64(&xs)], &[Scalar::I64(-3)], 0.0);
        let us: Vec<u64> = xs.iter().map(|&v| v as u64).collect();
        check(b, &scan, &[ColumnRef::U64(&us)], &[], 0.0);
        if caps.f64 {
            let fs: Vec<f64> = rng.f32s(n, true).into_iter().map(f64::from).collect();
            check(
                b,
                &fplan,
                &[ColumnRef::F64(&fs)],
                &[Scalar::F64(0.5)],
                1e-10,
            );
        }
    }
}

#[test]
fn chunked_inputs_give_the_same_results() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    b.set_max_chunk(Some(1000));
    let mut rng = Rng(9);
    let n = 4321;
    let xs = rng.f32s(n, true);
    let is = rng.i32s(n + 5);
    check(
        &b,
        &multi_agg_plan(DType::F32, true),
        &[ColumnRef::F32(&xs)],
        &[Scalar::F32(2.0)],
        1e-4,
    );
    check(
        &b,
        &multi_agg_plan(DType::I32, false),
        &[ColumnRef::I32(&is)],
        &[Scalar::I32(5)],
        0.0,
    );
    check(
        &b,
        &scan_plan(DType::I32, None, true).0,
        &[ColumnRef::I32(&is)],
        &[],
        0.0,
    );
    check(
        &b,
        &compact_plan(),
        &[ColumnRef::F32(&xs), ColumnRef::I32(&is)],
        &[],
        0.0,
    );
    check(&b, &map_plan(), &[ColumnRef::F32(&xs)], &[], 1e-6);
}

#[test]
fn histograms_sorts_and_groups_run_past_one_chunk() {
    // Chunks of 1,000 positions stand in for inputs past one storage
    // binding (lavapipe's is 128 MiB): a key count runs in chunks and adds
    // their counts; a sort of one column by itself sorts its chunks and
    // merges their runs, and so does a sort carrying other columns (by its
    // keys, which come back with them); groups by key (or in first-seen
    // order) group each chunk and merge; a join's probe chunks append.
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    b.set_max_chunk(Some(1000));
    let engine = Engine::with_config(Config::default()).with_backend(Arc::new(b));
    let mut rng = Rng(21);
    let xs = rng.f32s(4321, true);
    for (bins, lo, hi) in [(16, -1.0, 1.0), (300, -0.5, 0.75)] {
        let want = engine
            .query(&xs)
            .on(BackendKind::CpuScalar)
            .filter(|x| x.ne(0.25))
            .histogram(bins, lo, hi);
        let (got, m) = engine
            .query(&xs)
            .on(BackendKind::Wgpu)
            .no_fallback()
            .filter(|x| x.ne(0.25))
            .with_metrics()
            .histogram(bins, lo, hi);
        assert_eq!(got, want, "{bins} bins");
        assert_eq!(m.backend, BackendKind::Wgpu);
        let total: u64 = want.counts.iter().sum::<u64>() + want.below + want.above + want.nan;
        assert_eq!(total, xs.len() as u64);
    }

    // Sorts of one column: f32 with NaN, -0.0 and infinities (compared by
    // bits: -0.0 before +0.0, NaN last), i32 extremes, u64; ascending,
    // descending, after a filter (runs of uneven lengths), and 2 to 5 runs.
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<u32>>();
    for n in [1500, 2000, 4321] {
        let xs = &xs[..n];
        let on = |k| engine.query(xs).on(k).no_fallback();
        let want = on(BackendKind::CpuScalar).sort().collect::<Vec<f32>>();
        let (got, m) = on(BackendKind::Wgpu)
            .with_metrics()
            .sort()
            .collect::<Vec<f32>>();
        assert_eq!(bits(got), bits(want), "n = {n}");
        assert_eq!(m.backend, BackendKind::Wgpu);
        let want = on(BackendKind::CpuScalar).sort_desc().collect::<Vec<f32>>();
        let got = on(BackendKind::Wgpu).sort_desc().collect::<Vec<f32>>();
        assert_eq!(bits(got), bits(want), "n = {n}, descending");
        // Keeps NaN too (`x != x`).
        let want = on(BackendKind::CpuScalar)
            .filter(|x| x.gt(-0.5) | x.ne(x))
            .sort()
            .collect::<Vec<f32>>();
        let got = on(BackendKind::Wgpu)
            .filter(|x| x.gt(-0.5) | x.ne(x))
            .sort()
            .collect::<Vec<f32>>();
        assert_eq!(bits(got), bits(want), "n = {n}, filtered");
        // Top-k of one column: each chunk's top k, merged; k past a chunk.
        for k in [5, 1500] {
            let want = on(BackendKind::CpuScalar).top_k(k).collect::<Vec<f32>>();
            let got = on(BackendKind::Wgpu).top_k(k).collect::<Vec<f32>>();
            assert_eq!(bits(got), bits(want), "n = {n}, top {k}");
            let want = on(BackendKind::CpuScalar).bottom_k(k).collect::<Vec<f32>>();
            let got = on(BackendKind::Wgpu).bottom_k(k).collect::<Vec<f32>>();
            assert_eq!(bits(got), bits(want), "n = {n}, bottom {k}");
        }
    }
    let is = rng.i32s(3333);
    let want = engine
        .query(&is)
        .on(BackendKind::CpuScalar)
        .sort_desc()
        .collect::<Vec<i32>>();
    let got = engine
        .query(&is)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .sort_desc()
        .collect::<Vec<i32>>();
    assert_eq!(got, want, "i32 descending");
    let us: Vec<u64> = is
        .iter()
        .map(|&i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let want = engine
        .query(&us)
        .on(BackendKind::CpuScalar)
        .sort()
        .collect::<Vec<u64>>();
    let got = engine
        .query(&us)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .fallible()
        .sort()
        .collect::<Vec<u64>>();
    match got {
        Ok(got) => assert_eq!(got, want, "u64"),
        // GL has no 64-bit integers.
        Err(e) => assert!(e.to_string().contains("64"), "{e}"),
    }

    // Groups by key: every chunk holds every key, so each key merges
    // across the runs (count, integer sums, min, max, mean from a sum and
    // a count), float keys with NaN and ±0, distinct values.
    let keys: Vec<i32> = is.iter().map(|&i| i.rem_euclid(37) - 18).collect();
    let vals: Vec<i32> = rng.i32s(keys.len());
    let on = |k| engine.query(&keys).on(k).no_fallback().zip(&vals);
    let (got, m) = on(BackendKind::Wgpu)
        .with_metrics()
        .group_by(|(k, _)| k)
        .agg(|(_, v), a| {
            (
                a.count(),
                a.sum(v),
                a.min(v),
                a.max(v),
                a.first(v),
                a.last(v),
            )
        });
    let want = on(BackendKind::CpuScalar)
        .group_by(|(k, _)| k)
        .agg(|(_, v), a| {
            (
                a.count(),
                a.sum(v),
                a.min(v),
                a.max(v),
                a.first(v),
                a.last(v),
            )
        });
    assert_eq!(m.backend, BackendKind::Wgpu);
    assert_eq!(
        (got.keys, got.values),
        (want.keys, want.values),
        "i32 groups"
    );
    let fs = &xs[..3000];
    let (got, want) = (
        engine
            .query(fs)
            .on(BackendKind::Wgpu)
            .no_fallback()
            .value_counts(),
        engine.query(fs).on(BackendKind::CpuScalar).value_counts(),
    );
    assert_eq!(bits(got.keys), bits(want.keys), "value_counts keys");
    assert_eq!(got.values, want.values, "value_counts");
    let (got, want) = (
        engine
            .query(&keys)
            .on(BackendKind::Wgpu)
            .no_fallback()
            .distinct(),
        engine.query(&keys).on(BackendKind::CpuScalar).distinct(),
    );
    assert_eq!(got, want, "distinct");
    // (Without 1e30 and -1e30, whose sums depend on the order.)
    let plain = rng.f32s(3000, false);
    let q = || engine.query(&plain).zip(&vals[..3000]);
    let got = q()
        .on(BackendKind::Wgpu)
        .no_fallback()
        .fallible()
        .group_by(|(_, v)| v & 7)
        .agg(|(x, _), a| (a.sum(x), a.mean(x)));
    let want = q()
        .on(BackendKind::CpuScalar)
        .group_by(|(_, v)| v & 7)
        .agg(|(x, _), a| (a.sum(x), a.mean(x)));
    match got {
        Ok(got) => {
            assert_eq!(got.keys, want.keys);
            for ((gs, gm), (ws, wm)) in got.values.iter().zip(&want.values) {
                // Float sums add the runs' sums: rounded differently.
                assert!((gs - ws).abs() <= 1e-3 * ws.abs().max(1.0));
                let (gm, wm) = (gm.unwrap(), wm.unwrap());
                assert!((gm - wm).abs() <= 1e-3 * wm.abs().max(1.0));
            }
        }
        // GL has no f64 for the mean.
        Err(e) => assert!(e.to_string().contains("SHADER_F64"), "{e}"),
    }
    // First-seen groups: each chunk's groups in its first-seen order,
    // merged in first-seen order (keys seen first in later chunks too).
    let late: Vec<i32> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| if i < 2500 { k & !3 } else { k })
        .collect();
    for ks in [&keys, &late] {
        let agg = |on| {
            engine
                .query(ks)
                .on(on)
                .no_fallback()
                .zip(&vals)
                .group_by(|(k, _)| k)
                .first_seen()
                .agg(|(_, v), a| (a.count(), a.sum(v), a.min(v), a.first(v), a.last(v)))
        };
        let (got, want) = (agg(BackendKind::Wgpu), agg(BackendKind::CpuScalar));
        assert_eq!(
            (got.keys, got.values),
            (want.keys, want.values),
            "first-seen groups"
        );
    }
    // An aggregate that does not fold across runs (argmin) needs one run.
    let err = on(BackendKind::Wgpu)
        .fallible()
        .group_by(|(k, _)| k)
        .agg(|(_, v), a| a.argmin(v))
        .map(|_| ())
        .expect_err("argmin per group in chunks");
    assert!(err.to_string().contains("needs them in one run"), "{err}");

    // Sorts carrying columns: each chunk comes back sorted with its keys,
    // and the runs merge by the keys, the earlier run first among equal
    // ones (few distinct keys, so ties cross chunks).
    let on = |k| engine.query(&xs).on(k).no_fallback();
    let want = on(BackendKind::CpuScalar)
        .sort_by_key(|x| x * -2.0)
        .collect::<Vec<f32>>();
    let (got, m) = on(BackendKind::Wgpu)
        .with_metrics()
        .sort_by_key(|x| x * -2.0)
        .collect::<Vec<f32>>();
    assert_eq!(bits(got), bits(want), "by a key that is no column");
    assert_eq!(m.backend, BackendKind::Wgpu);
    let small: Vec<i32> = is.iter().map(|&i| i & 7).collect();
    let pairs = |v: Vec<(f32, i32)>| v.into_iter().map(|(x, i)| (x.to_bits(), i)).collect();
    let q = |k| engine.query(&xs[..3333]).on(k).no_fallback().zip(&small);
    let want: Vec<(u32, i32)> = pairs(
        q(BackendKind::CpuScalar)
            .filter(|(x, _)| x.gt(-0.5) | x.ne(x))
            .sort_by_key(|(x, i)| (i.desc(), (x * x).desc()))
            .collect(),
    );
    let got: Vec<(u32, i32)> = pairs(
        q(BackendKind::Wgpu)
            .filter(|(x, _)| x.gt(-0.5) | x.ne(x))
            .sort_by_key(|(x, i)| (i.desc(), (x * x).desc()))
            .collect(),
    );
    assert_eq!(got, want, "two keys, one of them no column, filtered");
    for k in [5, 1500] {
        let want: Vec<(u32, i32)> = pairs(
            q(BackendKind::CpuScalar)
                .top_k_by_key(k, |(_, i)| i)
                .collect(),
        );
        let got: Vec<(u32, i32)> =
            pairs(q(BackendKind::Wgpu).top_k_by_key(k, |(_, i)| i).collect());
        assert_eq!(got, want, "top {k} by a column");
        let want: Vec<(u32, i32)> = pairs(
            q(BackendKind::CpuScalar)
                .bottom_k_by_key(k, |(x, i)| (i, x.abs()))
                .collect(),
        );
        let got: Vec<(u32, i32)> = pairs(
            q(BackendKind::Wgpu)
                .bottom_k_by_key(k, |(x, i)| (i, x.abs()))
                .collect(),
        );
        assert_eq!(got, want, "bottom {k} by two keys");
    }
    // Joins: each chunk of the probe side joins the whole build side and
    // the chunks' rows append (probe order); a build side past one chunk
    // is declined.
    let pk: Vec<u32> = is.iter().map(|&i| (i as u32) % 97).collect();
    let bk: Vec<u32> = (0..700u32).map(|j| (j * 7919) % 131).collect();
    let bv: Vec<i32> = (0..700).map(|j| -j).collect();
    let pv = &xs[..pk.len()];
    let inner = |k| {
        engine
            .query(&pk)
            .on(k)
            .no_fallback()
            .zip(pv)
            .filter(|(x, _)| x.ne(5))
            .join(engine.query(&bk).zip(&bv), |(x, _)| x, |(y, _)| y)
            .collect::<Vec<((u32, f32), (u32, i32))>>()
    };
    let (got, want) = (inner(BackendKind::Wgpu), inner(BackendKind::CpuScalar));
    let rows = |v: Vec<((u32, f32), (u32, i32))>| -> Vec<(u32, u32, u32, i32)> {
        v.into_iter()
            .map(|((a, x), (b, y))| (a, x.to_bits(), b, y))
            .collect()
    };
    let (got, want) = (rows(got), rows(want));
    assert!(got.len() > 3000, "{} rows", got.len());
    assert_eq!(got, want, "inner join in chunks");
    let semi = |k| {
        engine
            .query(&pk)
            .on(k)
            .no_fallback()
            .semi_join(engine.query(&bk), |x| x, |y| y)
            .collect::<Vec<u32>>()
    };
    assert_eq!(
        semi(BackendKind::Wgpu),
        semi(BackendKind::CpuScalar),
        "semi"
    );
    let anti = |k| {
        engine
            .query(&pk)
            .on(k)
            .no_fallback()
            .anti_join(engine.query(&bk), |x| x, |y| y)
            .collect::<Vec<u32>>()
    };
    assert_eq!(
        anti(BackendKind::Wgpu),
        anti(BackendKind::CpuScalar),
        "anti"
    );
    let long: Vec<u32> = (0..1500).collect();
    let err = engine
        .query(&pk)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .fallible()
        .semi_join(engine.query(&long), |x| x, |y| y)
        .collect::<Vec<u32>>()
        .expect_err("a build side of 1,500 rows in chunks of 1,000");
    assert!(err.to_string().contains("needs them in one run"), "{err}");

    let want = on(BackendKind::CpuScalar).argsort().collect::<Vec<u64>>();
    match on(BackendKind::Wgpu)
        .fallible()
        .argsort()
        .collect::<Vec<u64>>()
    {
        Ok(got) => assert_eq!(got, want, "argsort"),
        // GL has no 64-bit integers for the positions.
        Err(e) => assert!(e.to_string().contains("64"), "{e}"),
    }
}

#[test]
fn a_new_parameter_value_reuses_the_pipeline() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    let plan = multi_agg_plan(DType::F32, false);
    let xs = Rng(10).f32s(5000, false);
    let first = check(&b, &plan, &[ColumnRef::F32(&xs)], &[Scalar::F32(2.0)], 1e-4);
    assert!(!first.compile_cached);
    let pipelines = b.cached_pipelines();
    let second = check(
        &b,
        &plan,
        &[ColumnRef::F32(&xs)],
        &[Scalar::F32(-7.0)],
        1e-4,
    );
    assert!(second.compile_cached);
    assert_eq!(b.cached_pipelines(), pipelines);
    // The same plan built again finds the pipelines by structural hash.
    let third = check(
        &b,
        &multi_agg_plan(DType::F32, false),
        &[ColumnRef::F32(&xs)],
        &[Scalar::F32(1.0)],
        1e-4,
    );
    assert!(third.compile_cached);
    assert_eq!(b.cached_pipelines(), pipelines);
}

#[test]
fn injected_faults_are_errors_with_their_phase_and_leak_nothing() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    let mut rng = Rng(11);
    let xs = rng.f32s(3000, true);
    let is = rng.i32s(3000);
    let plans = [
        (map_plan(), 1),
        (multi_agg_plan(DType::F32, true), 1),
        (compact_plan(), 2),
        (scan_plan(DType::F32, None, false).0, 1),
    ];
    let baseline = b.live_buffers();
    for (name, phase) in faults::faults_of("wgpu") {
        let faults = FaultPlan::parse(&format!("wgpu:{name}"));
        assert_ne!(faults, FaultPlan::NONE, "wgpu:{name} does not parse");
        for (plan, arity) in &plans {
            let cols = [ColumnRef::F32(&xs), ColumnRef::I32(&is)];
            let params = [Scalar::F32(2.0)];
            b.set_faults(faults);
            let (r, _) = run(&b, plan, &cols[..*arity], &params);
            let e = r.expect_err("the fault must surface");
            if faults.oom {
                // The first allocation fails, whichever phase makes it.
                assert!(matches!(e.phase, Phase::Upload | Phase::Execute), "{e}");
            } else {
                assert_eq!(e.phase, phase, "{faults:?}: {e}");
            }
            assert_eq!(e.out_of_memory, faults.oom);
            assert_eq!(b.live_buffers(), baseline, "{faults:?} leaked buffers");
            b.set_faults(FaultPlan::NONE);
            check(&b, plan, &cols[..*arity], &params, 1e-3);
            assert_eq!(b.live_buffers(), baseline);
        }
    }
}

#[test]
fn device_resident_columns_skip_transfers() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    let baseline = b.live_buffers();
    let xs = Rng(12).f32s(10_000, false);
    let dev = b.upload(ColumnRef::F32(&xs)).unwrap();
    assert_eq!(b.live_buffers(), baseline + 1);
    assert_eq!(dev.download().unwrap(), Column::F32(xs.clone()));

    let plan = multi_agg_plan(DType::F32, true);
    let params = [Scalar::F32(2.0)];
    let inputs = [Input::Device(&*dev)];
    let mut stats = RunStats::default();
    let job = Job {
        plan: &plan,
        inputs: &inputs,
        params: &params,
        keep_on_device: false,
    };
    let got = b.execute(&job, &mut stats).unwrap();
    let want = run_plan(&plan.plan, &[ColumnRef::F32(&xs)], &params).unwrap();
    match (got, want) {
        (PlanOutput::Aggregates(g), PlanOutput::Aggregates(w)) => {
            for (x, y) in g.iter().zip(&w) {
                assert!(same_scalar(*x, *y, 1e-4), "{x} vs {y}");
            }
        }
        _ => unreachable!(),
    }
    assert_eq!(stats.bytes_uploaded, 0);
    assert_eq!(stats.bytes_resident, 40_000);

    // Collect on the device, then use the result as an input.
    let compact = compact_plan();
    let ys = vec![1i32; 10_000];
    let ydev = b.upload(ColumnRef::I32(&ys)).unwrap();
    let inputs = [Input::Device(&*dev), Input::Device(&*ydev)];
    let job = Job {
        plan: &compact,
        inputs: &inputs,
        params: &[],
        keep_on_device: true,
    };
    let mut stats = RunStats::default();
    let cols = b.execute_to_device(&job, &mut stats).unwrap();
    assert_eq!(stats.bytes_uploaded, 0);
    assert!(
        stats.bytes_downloaded <= 4,
        "only the survivor count comes back"
    );
    let want = run_plan(
        &compact.plan,
        &[ColumnRef::F32(&xs), ColumnRef::I32(&ys)],
        &[],
    )
    .unwrap();
    let PlanOutput::Columns(want) = want else {
        unreachable!()
    };
    for (c, w) in cols.iter().zip(&want) {
        same_column(&c.download().unwrap(), w, 0.0).unwrap();
    }
    let before = b.live_buffers();
    drop(cols);
    assert_eq!(
        b.live_buffers(),
        before - 3,
        "dropping device columns frees them"
    );
    drop((dev, ydev));
    assert_eq!(b.live_buffers(), baseline);
}

#[test]
fn unsupported_plans_are_declined_with_a_reason() {
    let b = backend!();
    if b.caps().unwrap().int64 {
        return;
    }
    let mut s = StageBuilder::new(&[DType::F32]);
    let i = s.enumerate();
    let plan = s.finish(None, Terminal::Collect(smallvec![i]));
    let why = b.supports(&plan.plan).unwrap_err();
    assert_eq!(
        why,
        Decline::MissingType {
            dtype: DType::U64,
            feature: "SHADER_INT64"
        },
        "{why}"
    );
    assert!(why.to_string().contains("SHADER_INT64"), "{why}");
}

/// Runs `plan` keeping its collected columns on the device.
fn run_to_device(
    b: &WgpuBackend,
    plan: &CompiledPlan,
    inputs: &[Input<'_>],
) -> (Vec<Arc<dyn DeviceColumn>>, RunStats) {
    let job = Job {
        plan,
        inputs,
        params: &[],
        keep_on_device: true,
    };
    let mut stats = RunStats::default();
    let cols = b
        .execute_to_device(&job, &mut stats)
        .unwrap_or_else(|e| panic!("wgpu failed: {e}"));
    (cols, stats)
}

#[test]
fn execute_times_say_which_clock_measured_them() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    let has = b.has_timestamps().expect("opened");
    if has {
        eprintln!("timestamp queries available on {:?}", b.adapter());
    } else {
        eprintln!(
            "timestamp queries unavailable on {:?}: host clocks only",
            b.adapter()
        );
    }
    let mut rng = Rng(21);
    let xs = rng.f32s(100_000, false);
    let is = rng.i32s(100_000);
    let cases: [(CompiledPlan, usize, Vec<Scalar>); 3] = [
        (multi_agg_plan(DType::F32, false), 1, vec![Scalar::F32(2.0)]),
        (map_plan(), 1, vec![]),
        (compact_plan(), 2, vec![]),
    ];
    let cols = [ColumnRef::F32(&xs), ColumnRef::I32(&is)];
    for timestamps in [true, false] {
        b.set_timestamps(timestamps);
        for chunk in [None, Some(30_000)] {
            b.set_max_chunk(chunk);
            for (plan, arity, params) in &cases {
                let t = Instant::now();
                let stats = check(&b, plan, &cols[..*arity], params, 1e-4);
                let wall = t.elapsed();
                let want = if timestamps && has {
                    TimingSource::DeviceTimestamps
                } else {
                    TimingSource::HostClock
                };
                assert_eq!(
                    stats.timing, want,
                    "timestamps {timestamps}, chunk {chunk:?}"
                );
                assert!(
                    stats.execute > Duration::ZERO && stats.execute <= wall,
                    "execute {:?} outside (0, {wall:?}]",
                    stats.execute
                );
                assert!(stats.execute + stats.transfer_in + stats.transfer_out <= wall);
                eprintln!(
                    "timing={} execute={:?} transfer_out={:?} wall={wall:?}",
                    stats.timing, stats.execute, stats.transfer_out
                );
            }
        }
    }
    b.set_timestamps(true);
    b.set_max_chunk(None);

    // The metrics of a query carry the source, and print it.
    let engine = Engine::with_config(Config::default()).with_backend(Arc::new(b));
    let (_, m) = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .map(|x| x * 2.0)
        .with_metrics()
        .sum();
    assert_eq!(m.backend, BackendKind::Wgpu);
    let want = if has {
        TimingSource::DeviceTimestamps
    } else {
        TimingSource::HostClock
    };
    assert_eq!(m.phases.timing, want);
    assert!(m.to_string().contains(&format!("timing={want}")), "{m}");
}

#[test]
fn out_of_memory_retries_in_smaller_chunks_then_falls_back() {
    let Some(b) = open(FaultPlan::parse("wgpu:oom:1")) else {
        return;
    };
    let baseline = b.live_buffers();
    let mut rng = Rng(22);
    let xs = rng.f32s(20_000, true);
    let is = rng.i32s(20_000);
    let cols = [ColumnRef::F32(&xs), ColumnRef::I32(&is)];
    let plans = [
        (multi_agg_plan(DType::F32, true), 1, vec![Scalar::F32(2.0)]),
        (map_plan(), 1, vec![]),
        (compact_plan(), 2, vec![]),
        (scan_plan(DType::F32, None, false).0, 1, vec![]),
    ];
    for (plan, arity, params) in &plans {
        b.set_faults(FaultPlan::parse("wgpu:oom:1"));
        let stats = check(&b, plan, &cols[..*arity], params, 1e-3);
        assert_eq!(stats.oom_retries, 1, "one smaller-chunk retry");
        assert!(stats.launches >= 2, "the retry ran in two chunks or more");
        assert_eq!(b.live_buffers(), baseline, "retries leak nothing");
        // Twice: two halvings.
        b.set_faults(FaultPlan::parse("wgpu:oom:2"));
        let stats = check(&b, plan, &cols[..*arity], params, 1e-3);
        assert_eq!(stats.oom_retries, 2);
        assert_eq!(b.live_buffers(), baseline);
    }
    b.set_faults(FaultPlan::NONE);

    // Through the runtime: a retried run is still a wgpu run, and says so.
    let b = Arc::new(b);
    let engine = Engine::with_config(Config::default()).with_backend(b.clone());
    // The engine's device probe runs queries of its own on the device (and
    // would take the injected fault, or hold buffers while we count them):
    // let it finish first.
    engine.prepare_devices();
    assert_eq!(b.live_buffers(), baseline);
    b.set_faults(FaultPlan::parse("wgpu:oom:1"));
    let ys = rng.f32s(20_000, false);
    let want: f32 = ys.iter().map(|x| x * 0.5).sum();
    let (s, m) = engine
        .query(&ys)
        .on(BackendKind::Wgpu)
        .map(|x| x * 0.5)
        .with_metrics()
        .sum();
    assert!(
        (s - want).abs() <= 1e-2 * (1.0 + want.abs()),
        "{s} vs {want}"
    );
    assert_eq!(m.backend, BackendKind::Wgpu);
    assert_eq!(m.oom_retries, 1);
    assert!(m.to_string().contains("oom_retries=1"), "{m}");
    assert_eq!(b.live_buffers(), baseline);

    // Out of memory for good: the retries give up at the floor and the
    // runtime falls back to a CPU backend, with the failure recorded.
    b.set_faults(FaultPlan::parse("wgpu:oom"));
    let (s, m) = engine
        .query(&ys)
        .on(BackendKind::Wgpu)
        .map(|x| x * 0.5)
        .with_metrics()
        .sum();
    assert!(
        (s - want).abs() <= 1e-2 * (1.0 + want.abs()),
        "{s} vs {want}"
    );
    assert_ne!(m.backend, BackendKind::Wgpu);
    assert!(m.fell_back(), "{m}");
    let a = &m.attempts[0];
    assert_eq!(a.backend, BackendKind::Wgpu);
    assert!(a.message.contains("smaller chunks"), "{}", a.message);
    eprintln!("fell back: {}", a.message);
    assert_eq!(
        b.live_buffers(),
        baseline,
        "the failed retries leaked buffers"
    );
    b.set_faults(FaultPlan::NONE);
}

#[test]
fn multi_chunk_results_stay_on_the_device() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    let baseline = b.live_buffers();
    b.set_max_chunk(Some(1000));
    let mut rng = Rng(23);
    let n = 4321;
    let xs = rng.f32s(n, true);
    let is = rng.i32s(n);
    let xdev = b.upload(ColumnRef::F32(&xs)).unwrap();
    let idev = b.upload(ColumnRef::I32(&is)).unwrap();

    // A map: every row survives; nothing moves but the timestamps.
    let map = map_plan();
    let (cols, stats) = run_to_device(&b, &map, &[Input::Device(&*xdev)]);
    assert_eq!(stats.bytes_uploaded, 0, "no host round trip");
    assert_eq!(stats.bytes_downloaded, 0, "no host round trip");
    assert_eq!(stats.bytes_resident, (n * 4) as u64);
    assert!(stats.launches >= 5, "ran in chunks: {}", stats.launches);
    let PlanOutput::Columns(want) = run_plan(&map.plan, &[ColumnRef::F32(&xs)], &[]).unwrap()
    else {
        unreachable!()
    };
    assert_eq!(cols.len(), want.len());
    for (c, w) in cols.iter().zip(&want) {
        same_column(&c.download().unwrap(), w, 1e-6).unwrap();
    }

    // A compaction: only the survivor count of each chunk comes back.
    let compact = compact_plan();
    let inputs = [Input::Device(&*xdev), Input::Device(&*idev)];
    let (kept, stats) = run_to_device(&b, &compact, &inputs);
    assert_eq!(stats.bytes_uploaded, 0);
    assert_eq!(stats.bytes_downloaded, 5 * 4, "one count per chunk");
    assert_eq!(stats.bytes_resident, (n * 8) as u64);
    let PlanOutput::Columns(want) = run_plan(
        &compact.plan,
        &[ColumnRef::F32(&xs), ColumnRef::I32(&is)],
        &[],
    )
    .unwrap() else {
        unreachable!()
    };
    for (c, w) in kept.iter().zip(&want) {
        same_column(&c.download().unwrap(), w, 0.0).unwrap();
    }

    // A later query reads the kept columns chunk by chunk, on the device.
    let sum = multi_agg_plan(DType::F32, false);
    let inputs = [Input::Device(&*kept[2])];
    let job = Job {
        plan: &sum,
        inputs: &inputs,
        params: &[Scalar::F32(1.0)],
        keep_on_device: false,
    };
    let mut stats = RunStats::default();
    let got = b.execute(&job, &mut stats).unwrap();
    let PlanOutput::Columns(kx) = run_plan(
        &compact.plan,
        &[ColumnRef::F32(&xs), ColumnRef::I32(&is)],
        &[],
    )
    .unwrap() else {
        unreachable!()
    };
    let Column::F32(kx) = &kx[2] else {
        unreachable!()
    };
    let want = run_plan(&sum.plan, &[ColumnRef::F32(kx)], &[Scalar::F32(1.0)]).unwrap();
    match (got, want) {
        (PlanOutput::Aggregates(g), PlanOutput::Aggregates(w)) => {
            for (x, y) in g.iter().zip(&w) {
                assert!(same_scalar(*x, *y, 1e-4), "{x} vs {y}");
            }
        }
        _ => unreachable!(),
    }
    assert_eq!(stats.bytes_uploaded, 0);
    assert_eq!(stats.bytes_resident, (kx.len() * 4) as u64);

    drop((cols, kept, xdev, idev));
    assert_eq!(b.live_buffers(), baseline);
}

// ---------------------------------------------------------------- golden WGSL

fn golden_plans() -> Vec<(&'static str, CompiledPlan)> {
    let last_nonzero: fn(&mut ExprArena, Value, Value) -> Value = |p, a, b| {
        let z = p.push(Node::Const(Scalar::I32(0))).unwrap();
        let nz = p.push(Node::Binary(BinaryOp::Ne, b, z)).unwrap();
        p.push(Node::Select(nz, b, a)).unwrap()
    };
    vec![
        ("map", map_plan()),
        ("reduce_multi_f32", multi_agg_plan(DType::F32, true)),
        ("reduce_multi_i64", multi_agg_plan(DType::I64, false)),
        ("scan_sum_i32", scan_plan(DType::I32, None, false).0),
        (
            "scan_custom_i32",
            scan_plan(DType::I32, Some(last_nonzero), true).0,
        ),
        ("compact", compact_plan()),
        ("sort_f32", {
            let s = StageBuilder::new(&[DType::F32]);
            let x = s.x(0);
            s.finish(None, sort_terminal(x, false, x))
        }),
        ("sort_rows_i32", {
            let s = StageBuilder::new(&[DType::I32, DType::F32]);
            let (k, y) = (s.x(0), s.x(1));
            s.finish(None, sort_terminal(k, true, y))
        }),
        ("group_i32", {
            let s = StageBuilder::new(&[DType::I32, DType::F32]);
            let (k, v) = (s.x(0), s.x(1));
            s.finish(
                None,
                Terminal::Group {
                    keys: smallvec![k],
                    aggs: smallvec![
                        Aggregate {
                            kind: AggKind::Count,
                            column: None
                        },
                        Aggregate {
                            kind: AggKind::Sum,
                            column: Some(v)
                        },
                    ],
                    first_seen: false,
                },
            )
        }),
        ("join_i32", {
            let s = StageBuilder::new(&[DType::I32, DType::F32]);
            let (k, v) = (s.x(0), s.x(1));
            s.finish(
                None,
                Terminal::Join {
                    kind: computeq::plumbing::JoinKind::Inner,
                    keys: smallvec![k],
                    columns: smallvec![k, v],
                    build: smallvec![(2, DType::I32), (3, DType::U32)],
                },
            )
        }),
    ]
}

/// A sort by one key writing one column.
fn sort_terminal(key: Value, descending: bool, column: Value) -> Terminal {
    Terminal::Sort {
        keys: smallvec![computeq::plumbing::SortKey {
            value: key,
            descending
        }],
        columns: smallvec![column],
        fetch: None,
    }
}

fn validate(src: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .subgroup_stages(naga::valid::ShaderStages::all())
    .subgroup_operations(naga::valid::SubgroupOperationSet::all())
    .validate(&module)
    .map(|_| ())
    .map_err(|e| e.emit_to_string(src))
}

#[test]
fn golden_wgsl() {
    let mut golden = Golden::new("wgsl");
    // A kernel another plan wrote already (a group's sort passes are a
    // row-carrying sort's) is not written twice.
    let mut seen = std::collections::HashSet::new();
    for subgroups in [false, true] {
        let caps = Caps {
            subgroups,
            ..Caps::default()
        };
        for (name, plan) in golden_plans() {
            let kp = lower_stage(plan.plan.last(), &caps).unwrap();
            for k in &kp.kernels {
                let text = wgsl::write_kernel(k).unwrap();
                validate(&text).unwrap_or_else(|e| panic!("{name}/{}: {e}", k.name));
                if subgroups && !k.needs().subgroups {
                    continue;
                }
                // A sort's later digit passes differ from the first in
                // their shift constants only.
                if k.name.starts_with("sort_")
                    && k.name.split('_').any(|p| matches!(p, "8" | "16" | "24"))
                {
                    continue;
                }
                if !seen.insert(text.clone()) {
                    continue;
                }
                let file = format!(
                    "{name}.{}{}.wgsl",
                    k.name,
                    if subgroups { ".subgroups" } else { "" }
                );
                golden.check(&file, &text);
            }
        }
    }
    golden.finish();
}

/// A device is measured through the engine's own query path (within the
/// calibration budget, by a probe, in the background or in
/// `prepare_devices`), its profile handed to the selector and cached per
/// device; a second engine reads the cache. The probe queries stay out of
/// the user's run log.
#[test]
fn the_device_is_calibrated_through_the_engine_and_cached() {
    let Some(b) = open(FaultPlan::NONE) else {
        return;
    };
    let gl = on_gl(&b);
    let dir = std::env::temp_dir().join(format!("computeq-calib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = Config {
        cache_dir: Some(dir.clone()),
        ..Config::default()
    };
    let engine = Engine::with_config(config.clone()).with_backend(Arc::new(b));
    let xs = vec![1.0f32; 1 << 16];
    let t = Instant::now();
    let s: f32 = engine.query(&xs).on(BackendKind::Wgpu).sum();
    assert_eq!(s, (1 << 16) as f32);
    engine.prepare_devices();
    let first = t.elapsed();
    let ex = engine.query(&xs).explain().sum();
    let profile = ex
        .settings
        .iter()
        .find(|(k, _)| *k == "wgpu.profile")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert_measured(gl, &profile, &ex);
    if gl {
        // Nothing measured, nothing cached: the class prices GL.
        assert_eq!(engine.run_log().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let cached = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("calibration"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .unwrap_or_default();
    assert!(cached.contains("wgpu/"), "{cached}");
    eprintln!("first query with device calibration: {first:?}; {profile}");

    // A new engine on the same machine reads the profile instead.
    let b2 = open(FaultPlan::NONE).unwrap();
    let engine2 = Engine::with_config(config).with_backend(Arc::new(b2));
    let t = Instant::now();
    let _: f32 = engine2.query(&xs).on(BackendKind::Wgpu).sum();
    eprintln!(
        "first query with a cached profile: {:?} (the difference is calibration)",
        t.elapsed()
    );
    assert_eq!(
        engine2.run_log().len(),
        1,
        "no probes with a cached profile"
    );
    // The first engine's log holds the query, not the probes.
    assert_eq!(engine.run_log().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------ device errors, loss, first use

/// An engine over `b` that keeps nothing on disk, its device probe done
/// (without `b`'s injected faults: a probe running beside the test's
/// queries would take some of them, at random).
fn engine_on(b: Arc<WgpuBackend>) -> Engine {
    let faults = b.faults();
    b.set_faults(FaultPlan::NONE);
    let engine = Engine::with_config(Config::default()).with_backend(b.clone());
    engine.prepare_devices();
    b.set_faults(faults);
    engine
}

/// Twice the sum of `n` ones on wgpu through `engine` (falling back when
/// wgpu fails), checked, with the run's metrics.
fn doubled_sum(engine: &Engine, n: usize) -> computeq::metrics::ExecutionMetrics {
    let xs = vec![1.0f32; n];
    let (s, m) = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .map(|x| x * 2.0)
        .with_metrics()
        .sum();
    assert_eq!(s, 2.0 * n as f32, "{m}");
    m
}

/// A device error is charged to the run that caused it: that run fails
/// (and falls back), and the next run on the device is clean. With one
/// device-wide list of errors, the error waited in the list: its own run
/// reported success and the next run failed with it.
#[test]
fn a_device_error_fails_its_own_run_and_not_the_next() {
    let Some(b) = open(FaultPlan {
        device_errors: 1,
        ..FaultPlan::NONE
    }) else {
        return;
    };
    let engine = engine_on(Arc::new(b));
    let m = doubled_sum(&engine, 40_000);
    assert!(
        m.fell_back(),
        "the run with the device error succeeded: {m}"
    );
    let a = &m.attempts[0];
    assert_eq!(a.backend, BackendKind::Wgpu);
    assert!(
        a.message.contains("run_over_40000_elements"),
        "not this run's error: {}",
        a.message
    );
    let xs = vec![1.0f32; 50_000];
    let s = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .fallible()
        .sum()
        .unwrap_or_else(|e| panic!("a clean run failed: {e}"));
    assert_eq!(s, 50_000.0);
}

/// Two threads run queries on one device while some of the runs raise
/// device errors: every failure names its own run (each thread sums its
/// own input lengths), no run succeeds with an error of its own, and the
/// injected errors are charged once each.
#[test]
fn concurrent_runs_are_charged_only_their_own_device_errors() {
    const INJECTED: u32 = 12;
    let Some(b) = open(FaultPlan {
        device_errors: INJECTED,
        ..FaultPlan::NONE
    }) else {
        return;
    };
    let engine = engine_on(Arc::new(b));
    let failed: u32 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let engine = &engine;
                s.spawn(move || {
                    let mut failed = 0;
                    for i in 0..20 {
                        let n = 40_000 + t * 1000 + i;
                        let m = doubled_sum(engine, n);
                        for a in &m.attempts {
                            assert_eq!(a.backend, BackendKind::Wgpu);
                            assert!(
                                a.message.contains(&format!("run_over_{n}_elements")),
                                "the run over {n} elements was charged another run's error: {}",
                                a.message
                            );
                        }
                        failed += m.fell_back() as u32;
                    }
                    failed
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert_eq!(
        failed, INJECTED,
        "every injected error fails exactly its run"
    );
}

/// A lost device fails the run under way on it, and a later run opens a
/// new device instead of finding the lost one for good.
#[test]
fn a_lost_device_is_opened_again_by_a_later_run() {
    let Some(b) = open(FaultPlan {
        device_losses: 1,
        ..FaultPlan::NONE
    }) else {
        return;
    };
    let b = Arc::new(b);
    assert_eq!(b.devices_opened(), 1);
    let engine = engine_on(b.clone());
    let m = doubled_sum(&engine, 40_000);
    assert!(m.fell_back(), "the run that lost the device succeeded: {m}");
    assert!(m.attempts[0].message.contains("lost"), "{m}");
    engine.prepare_devices();
    let baseline = b.live_buffers();
    let m = doubled_sum(&engine, 40_000);
    assert_eq!(m.backend, BackendKind::Wgpu, "{m}");
    assert!(!m.fell_back(), "{m}");
    assert_eq!(b.devices_opened(), 2);
    assert_eq!(b.live_buffers(), baseline);
    // Device-resident data works on the new device too.
    let xs = vec![1.0f32; 1000];
    let col = b.upload(ColumnRef::F32(&xs)).unwrap();
    assert_eq!(col.download().unwrap(), Column::F32(xs));
}

/// A temporary cache directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("computeq-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cached_engine(dir: &TempDir, b: Arc<WgpuBackend>) -> Engine {
    Engine::with_config(Config {
        cache_dir: Some(dir.0.clone()),
        ..Config::default()
    })
    .with_backend(b)
}

/// A device nothing is known about is probed in the background: the first
/// query does not wait for it to open or be measured, and runs on a CPU
/// backend, saying why; once probed, the device is a candidate, and its
/// probe queries are nowhere in the user's run log.
#[test]
fn an_unknown_device_is_probed_in_the_background() {
    if open(FaultPlan::NONE).is_none() {
        return;
    }
    let dir = TempDir::new("probe");
    let b = Arc::new(WgpuBackend::new(FaultPlan::NONE));
    let engine = cached_engine(&dir, b.clone());
    let xs = vec![1.0f32; 1 << 16];
    let (s, m) = engine.query(&xs).with_metrics().sum();
    assert_eq!(s, (1 << 16) as f32);
    assert_ne!(m.backend, BackendKind::Wgpu);
    let ex = engine.query(&xs).explain().sum();
    let wgpu_declined = ex
        .declined
        .iter()
        .find(|a| a.backend == BackendKind::Wgpu)
        .map(|a| a.message.to_string());
    // The probe may have finished already; if not, the reason says so.
    if let Some(why) = &wgpu_declined {
        assert!(why.contains("background"), "{why}");
    }
    engine.prepare_devices();
    assert!(b.adapter().is_some());
    let ex = engine.query(&xs).explain().sum();
    assert!(
        ex.candidates.iter().any(|c| c.backend == BackendKind::Wgpu),
        "{ex}"
    );
    let profile = ex
        .settings
        .iter()
        .find(|(k, _)| *k == "wgpu.profile")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert_measured(on_gl(&b), &profile, &ex);
    assert_eq!(engine.run_log().len(), 1, "probe queries in the run log");
}

/// A later process (here: a new engine and backend on the same cache
/// directory) prices the device from its persisted profile and judges
/// plans by its remembered capabilities, without opening it: a query the
/// selector does not put on the device never opens it.
#[test]
fn a_remembered_device_is_priced_without_being_opened() {
    if open(FaultPlan::NONE).is_none() {
        return;
    }
    let dir = TempDir::new("remembered");
    let first = Arc::new(WgpuBackend::new(FaultPlan::NONE));
    cached_engine(&dir, first.clone()).prepare_devices();
    assert!(first.adapter().is_some());
    if on_gl(&first) {
        // GL is not measured, so no profile is on file to price it from.
        return;
    }

    let b = Arc::new(WgpuBackend::new(FaultPlan::NONE));
    let engine = cached_engine(&dir, b.clone());
    let xs = vec![1.0f32; 1 << 16];
    let ex = engine.query(&xs).explain().sum();
    assert!(
        ex.candidates.iter().any(|c| c.backend == BackendKind::Wgpu),
        "{ex}"
    );
    let profile = ex
        .settings
        .iter()
        .find(|(k, _)| *k == "wgpu.profile")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert_measured(on_gl(&first), &profile, &ex);
    assert!(b.adapter().is_none(), "explain opened the device");
    // What the device cannot run is declined from the record, unopened.
    let fs = vec![0.5f64; 1 << 16];
    let ex = engine.query(&fs).map(|x| x.exp()).explain().sum();
    assert!(
        ex.declined
            .iter()
            .any(|a| a.backend == BackendKind::Wgpu && a.phase == Phase::Support),
        "{ex}"
    );
    assert!(b.adapter().is_none(), "judging a plan opened the device");
    // A run the selector puts on a CPU backend leaves it closed too.
    let (_, m) = engine.query(&xs).with_metrics().sum();
    if m.backend != BackendKind::Wgpu {
        assert!(b.adapter().is_none(), "a CPU run opened the device: {m}");
    }
    // A query forced onto it opens it.
    let _: f32 = engine.query(&xs).on(BackendKind::Wgpu).sum();
    assert!(b.adapter().is_some());
}

/// WGSL lets the compiler assume that no float operation sees or gives an
/// infinity or a NaN (lavapipe computes `x - x` as `0` for an infinite
/// `x`, where IEEE says NaN). A guarded kernel flags such a value and the
/// run is discarded: an error without fallback, the CPU's answer with it.
/// Values the arithmetic never touches (a NaN-skipping `min`, a sort by
/// bits) and finite data still run on the device.
#[test]
fn runs_whose_float_arithmetic_meets_an_infinity_or_a_nan_are_discarded() {
    let Some(b) = guarded(FaultPlan::NONE) else {
        return;
    };
    let engine = Engine::with_config(Config::default()).with_backend(Arc::new(b));
    let finite: Vec<f32> = (0..3000).map(|i| (i % 13) as f32 - 6.0).collect();
    let mut xs = finite.clone();
    xs[1234] = f32::INFINITY;
    let mut nans = finite.clone();
    nans[77] = f32::NAN;

    // Without fallback: the device's result is not returned.
    for data in [&xs, &nans] {
        let err = engine
            .query(data)
            .on(BackendKind::Wgpu)
            .no_fallback()
            .fallible()
            .map(|x| x - x)
            .sum()
            .expect_err("an infinity or NaN went through x - x");
        let a = err.attempts().last().expect("an attempt");
        assert_eq!((a.backend, a.phase), (BackendKind::Wgpu, Phase::Execute));
        assert!(a.message.contains(DISCARDED), "{err}");
    }
    // A finite input whose arithmetic overflows, and a comparison with a
    // NaN, are flagged too; so is a collected column's.
    let big = engine
        .query(&finite)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .fallible()
        .map(|x| x * 1e30 * 1e30)
        .collect::<Vec<f32>>();
    assert!(big.is_err(), "x * 1e30 * 1e30 overflows");
    let compared = engine
        .query(&nans)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .fallible()
        .filter(|x| x.gt(0.5))
        .count();
    assert!(compared.is_err(), "a NaN compared");

    // With fallback the CPU answers, and the metrics say why.
    let (s, m) = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .map(|x| x - x)
        .with_metrics()
        .sum();
    assert!(s.is_nan(), "IEEE: inf - inf is NaN, got {s}");
    assert_ne!(m.backend, BackendKind::Wgpu);
    assert!(m.fell_back(), "{m}");
    assert!(m.attempts[0].message.contains(DISCARDED), "{m}");

    // Finite data runs on the device; so do NaN-skipping min/max and a
    // sort, which handle NaN by its bits.
    let (s, m) = engine
        .query(&finite)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .map(|x| x * 2.0 + 1.0)
        .with_metrics()
        .sum();
    let want: f32 = finite.iter().map(|x| x * 2.0 + 1.0).sum();
    assert_eq!((s, m.backend), (want, BackendKind::Wgpu));
    let (lo, m) = engine
        .query(&nans)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .with_metrics()
        .min();
    assert_eq!((lo, m.backend), (Some(-6.0), BackendKind::Wgpu));
    // What a filter or a select keeps away from the result does not
    // count: `1 / 0` in a lane the filter drops, and a histogram's bin
    // arithmetic on an infinity, which its `>= hi` sends to `above`.
    let zeros: Vec<f32> = (0..3000).map(|i| (i % 7) as f32).collect();
    let (s, m) = engine
        .query(&zeros)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .filter(|x| x.ne(0.0))
        .map(|x| 1.0 / x)
        .with_metrics()
        .sum();
    let want: f32 = zeros.iter().filter(|&&x| x != 0.0).map(|x| 1.0 / x).sum();
    assert!((s - want).abs() <= 1e-3 * want, "{s} vs {want}");
    assert_eq!(m.backend, BackendKind::Wgpu);
    let (h, m) = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .with_metrics()
        .histogram(16, -8.0, 8.0);
    assert_eq!((h.above, m.backend), (1, BackendKind::Wgpu));
    // A histogram's NaN test (`x != x`) and a filter's (`x == x`) test
    // the bits; a later filter's arithmetic on a value an earlier filter
    // dropped does not count (`false && p` is false whatever `p` is).
    let (h, m) = engine
        .query(&nans)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .with_metrics()
        .histogram(16, -8.0, 8.0);
    assert_eq!((h.nan, m.backend), (1, BackendKind::Wgpu));
    let (n, m) = engine
        .query(&nans)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .filter(|x| x.eq(x))
        .with_metrics()
        .count();
    assert_eq!((n, m.backend), (nans.len() - 1, BackendKind::Wgpu));
    let (n, m) = engine
        .query(&zeros)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .filter(|x| x.ne(0.0))
        .filter(|x| (1.0 / x).gt(0.3))
        .with_metrics()
        .count();
    let want = zeros.iter().filter(|&&x| x != 0.0 && 1.0 / x > 0.3).count();
    assert_eq!((n, m.backend), (want, BackendKind::Wgpu));

    // A comparison may meet an infinity (only a NaN is flagged there).
    let (n, m) = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .filter(|x| x.gt(0.5))
        .with_metrics()
        .count();
    let want = xs.iter().filter(|&&x| x > 0.5).count();
    assert_eq!((n, m.backend), (want, BackendKind::Wgpu));
    let sorted = engine
        .query(&xs)
        .on(BackendKind::Wgpu)
        .no_fallback()
        .sort()
        .collect::<Vec<f32>>();
    assert_eq!(sorted.last(), Some(&f32::INFINITY));

    // Trusted (`COMPUTEQ_WGPU_TRUST_NON_FINITE=1`): the device's answer,
    // whatever its compiler made of it.
    let trusting = Arc::new(guarded(FaultPlan::NONE).expect("opened above"));
    trusting.set_trust_non_finite(true);
    let engine = Engine::with_config(Config::default()).with_backend(trusting.clone());
    // Forced onto wgpu without fallback: `Ok` is wgpu's answer.
    let x_minus_x = || {
        engine
            .query(&xs)
            .on(BackendKind::Wgpu)
            .no_fallback()
            .fallible()
            .map(|x| x - x)
            .sum()
    };
    x_minus_x().expect("trusted");
    // The setting holds for a plan whose kernels were built under the
    // other one (the plan cache keeps them with the plan).
    trusting.set_trust_non_finite(false);
    let err = x_minus_x().expect_err("guarded again");
    assert!(err.to_string().contains(DISCARDED), "{err}");
    trusting.set_trust_non_finite(true);
    x_minus_x().expect("trusted again");
}
