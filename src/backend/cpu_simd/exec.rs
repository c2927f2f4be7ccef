//! Running a compiled stage: positions are cut into fixed leaves of `LEAF`
//! positions, each leaf into blocks of `BLOCK`; every block runs the
//! instruction list, then feeds the terminal. Leaf results combine by a fixed
//! rule (a midpoint binary tree for reductions, carried offsets for scans).
//!
//! A [`StageRun`] checks a run's inputs and evaluates its uniforms; its
//! terminal's work is on one view per terminal kind ([`ReduceRun`],
//! [`CollectRun`], [`ScanRun`], from [`StageRun::kind`]), so no method
//! meets a terminal it cannot handle.
//!
//! `cpu-simd` drives the leaves sequentially and `cpu-parallel` over rayon,
//! through the same functions here, so their results are bit-identical and
//! independent of the thread count. This file owns no policy about threads.

use super::isa;
pub(crate) use super::isa::Isa;
use super::kernels::{self, ArgState, Keep, KeepAll, KeepCmp, KeepMask, Op, LANES};
use super::lanes::{
    with_float, with_int, with_lane, with_num, CastTo, Direct, FloatLane, IntLane, Lane, Num,
    OutSlice, Regs,
};
use super::program::{
    AccInit, AggProgram, Bins, BlockProgram, ChainOp, Col, Fused, Instr, Operand, StageProgram,
    TermProgram,
};
use super::scan;
use super::{BLOCK, LEAF};
use crate::expr::{eval, BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp, Value};
use crate::plan::{
    AggKind, Combine, PhysicalPlan, PlanOutput, RangeOp, ScanOp, Stage, StageInput, StageRange,
    Terminal,
};
use crate::relational::{self, Algorithm, Strategy};
use crate::semantics::{
    agg_identity, is_settled, merge, Moments, Partial as SharedPartial, Settles,
};
use crate::types::{Column, ColumnRef, Fault, PlanError};
use smallvec::SmallVec;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A leaf's (or a subtree's) result for one aggregate.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Partial {
    /// The value (best value for arg-extrema).
    pub(crate) v: Scalar,
    /// Position of the best value (arg-extrema only).
    pub(crate) pos: u64,
    /// Whether an arg-extremum saw a non-NaN value.
    pub(crate) have: bool,
    /// `m2` only: the count, mean and `M2` (`v` is the `M2`).
    pub(crate) m: Moments,
}

/// One partial per aggregate.
pub(crate) type Partials = SmallVec<[Partial; 4]>;

/// Accumulator lanes of one numeric type.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Lanes {
    I32([i32; LANES]),
    U32([u32; LANES]),
    I64([i64; LANES]),
    U64([u64; LANES]),
    F32([f32; LANES]),
    F64([f64; LANES]),
}

trait LaneAcc: Num {
    fn wrap(a: [Self; LANES]) -> Lanes;
}

macro_rules! lane_acc {
    ($($t:ty => $v:ident),*) => {$(
        impl LaneAcc for $t {
            #[inline(always)]
            fn wrap(a: [Self; LANES]) -> Lanes {
                Lanes::$v(a)
            }
        }
    )*};
}
lane_acc!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// Sets `dst` to the identity lanes `init` (every lane the same value,
/// as `AccInit` holds them) when both hold the same type: a splat of the
/// one value, stored in place, where copying the enum moved all of its
/// 264 bytes through `memcpy` for every leaf. `false` (nothing written)
/// for lanes of two types.
#[inline(always)]
fn reset_lanes(dst: &mut Lanes, init: &Lanes) -> bool {
    match (dst, init) {
        (Lanes::I32(d), Lanes::I32(s)) => *d = [s[0]; LANES],
        (Lanes::U32(d), Lanes::U32(s)) => *d = [s[0]; LANES],
        (Lanes::I64(d), Lanes::I64(s)) => *d = [s[0]; LANES],
        (Lanes::U64(d), Lanes::U64(s)) => *d = [s[0]; LANES],
        (Lanes::F32(d), Lanes::F32(s)) => *d = [s[0]; LANES],
        (Lanes::F64(d), Lanes::F64(s)) => *d = [s[0]; LANES],
        _ => return false,
    }
    true
}

macro_rules! with_lanes {
    ($l:expr, $a:ident, $T:ident => $body:expr) => {
        match $l {
            Lanes::I32($a) => {
                type $T = i32;
                $body
            }
            Lanes::U32($a) => {
                type $T = u32;
                $body
            }
            Lanes::I64($a) => {
                type $T = i64;
                $body
            }
            Lanes::U64($a) => {
                type $T = u64;
                $body
            }
            Lanes::F32($a) => {
                type $T = f32;
                $body
            }
            Lanes::F64($a) => {
                type $T = f64;
                $body
            }
        }
    };
}

/// The running state of one aggregate within a leaf.
#[derive(Clone, Debug)]
enum Acc {
    Sum(Lanes),
    Min(Lanes),
    Max(Lanes),
    Count(u64),
    Any(bool),
    All(bool),
    Arg {
        max: bool,
        have: bool,
        best: Scalar,
        pos: u64,
    },
    /// `None` until the first element (leaves after the first start empty,
    /// so a user identity enters the result once, as in the sequential fold).
    Custom(Option<Scalar>),
    /// Blocks' moments merged in order.
    Moments(Moments),
    /// The first (or last) survivor's value, once `have`.
    Pick {
        last: bool,
        have: bool,
        v: Scalar,
    },
}

/// Which identity fills a sum's, min's or max's lanes.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Identity {
    Zero,
    Min,
    Max,
}

/// `LANES` copies of `id` for a column of `ty`; `None` for `bool`.
pub(crate) fn identity_lanes(ty: DType, id: Identity) -> Option<Lanes> {
    with_num!(ty, T => {
        let v = match id {
            Identity::Zero => T::ZERO,
            Identity::Min => T::MIN_ID,
            Identity::Max => T::MAX_ID,
        };
        Some(T::wrap([v; LANES]))
    }, else None)
}

/// Per-thread scratch of a stage run: the block registers and the survivor
/// index list of compaction.
///
/// Scratch is recycled through a small per-thread pool: a query over a
/// thousand elements would otherwise spend more time zeroing fresh
/// registers than computing (several KiB per run, see `new_state`).
#[derive(Debug)]
pub(crate) struct Exec {
    regs: Regs,
    idx: Vec<u32>,
    /// A leaf's accumulators, rebuilt in place for every leaf (they are a
    /// few hundred bytes each: moving them costs more than folding a
    /// small leaf).
    accs: Vec<Acc>,
}

/// Scratch states kept per thread for reuse; bounded so that a thread
/// that once ran a huge program does not hold its registers forever.
const POOLED_STATES: usize = 4;

/// Largest register file (bytes) worth keeping for reuse.
const POOLED_BYTES: u64 = 256 << 10;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Exec>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Exec {
    /// A recycled state, or an empty one to be shaped by the caller.
    fn recycled() -> Exec {
        POOL.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
            .ok()
            .flatten()
            .unwrap_or_else(Exec::empty)
    }

    fn empty() -> Exec {
        Exec {
            regs: Regs::default(),
            idx: Vec::new(),
            accs: Vec::new(),
        }
    }

    fn pooled_bytes(&self) -> u64 {
        Regs::bytes(&self.regs.counts()) + (self.idx.len() * 4) as u64
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        if self.regs.counts() == [0; 7] || self.pooled_bytes() > POOLED_BYTES {
            return;
        }
        // `try_with` fails only while the thread is being torn down; the
        // registers are then simply freed. The state pushed is built from
        // the taken fields; one that does not fit is dropped as plain
        // fields, and `self` is left empty, so dropping never recurses.
        let (regs, idx, accs) = (
            std::mem::take(&mut self.regs),
            std::mem::take(&mut self.idx),
            std::mem::take(&mut self.accs),
        );
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                if p.len() < POOLED_STATES {
                    p.push(Exec { regs, idx, accs });
                }
            }
        });
    }
}

/// What a run allocated and how many sequential tasks it ran; shared by
/// the tasks of a parallel run.
#[derive(Debug, Default)]
pub(crate) struct Acct {
    bytes: AtomicU64,
    tasks: AtomicU32,
    /// Positions of the last stage an early exit left unread.
    skipped: AtomicU64,
    /// The algorithm of the last sort or group (recorded by the calling
    /// thread), and whether there is one: a run without one (every
    /// reduction) reads the flag, not the lock.
    algorithm: std::sync::Mutex<Option<Algorithm>>,
    has_algorithm: AtomicBool,
    /// Whether only the calling thread counts here (the default is shared
    /// by the tasks of a parallel run). Local counting is a plain load and
    /// store: a locked add is a full barrier on x86, and a tiny query would
    /// pay two of them for its bookkeeping.
    local: bool,
}

impl Acct {
    /// Accounts of a run whose tasks run on several threads (`shared`) or
    /// only on the calling one.
    pub(crate) fn new(shared: bool) -> Acct {
        Acct {
            local: !shared,
            ..Acct::default()
        }
    }

    /// Records `n` bytes of allocation.
    pub(crate) fn alloc(&self, n: u64) {
        if self.local {
            let b = self.bytes.load(Ordering::Relaxed);
            self.bytes.store(b.wrapping_add(n), Ordering::Relaxed);
        } else {
            self.bytes.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Records one sequential task.
    pub(crate) fn task(&self) {
        if self.local {
            let t = self.tasks.load(Ordering::Relaxed);
            self.tasks.store(t.wrapping_add(1), Ordering::Relaxed);
        } else {
            self.tasks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bytes allocated so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Tasks run so far.
    pub(crate) fn tasks(&self) -> u32 {
        self.tasks.load(Ordering::Relaxed)
    }

    /// Records `n` positions an early exit did not read.
    pub(crate) fn skip(&self, n: u64) {
        if self.local {
            let s = self.skipped.load(Ordering::Relaxed);
            self.skipped.store(s.wrapping_add(n), Ordering::Relaxed);
        } else {
            self.skipped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Positions skipped so far.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Records the algorithm of a sort or group.
    pub(crate) fn algorithm(&self, a: Algorithm) {
        *self.algorithm.lock().unwrap_or_else(|e| e.into_inner()) = Some(a);
        self.has_algorithm.store(true, Ordering::Relaxed);
    }

    /// The algorithm of the last sort or group, if any ran.
    pub(crate) fn last_algorithm(&self) -> Option<Algorithm> {
        if !self.has_algorithm.load(Ordering::Relaxed) {
            return None;
        }
        *self.algorithm.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How the leaves of one stage are scheduled: sequentially (`cpu-simd`) or
/// over a thread pool (`cpu-parallel`). Every driver must use the leaf
/// functions of [`StageRun`] and their fixed combine order.
pub(crate) trait Driver: Sync {
    /// Whether the driver runs tasks on more than the calling thread (its
    /// [`Acct`] must then count with atomic adds).
    fn shared(&self) -> bool {
        true
    }

    /// The reduce partials of all leaves, combined by the midpoint tree.
    fn reduce(&self, run: &ReduceRun<'_, '_>, acct: &Acct) -> Partials;
    /// Every position's columns (each of length `len`).
    fn store(&self, run: &CollectRun<'_, '_>, acct: &Acct) -> Vec<Column>;
    /// The surviving positions' columns, in order.
    fn compact(&self, run: &CollectRun<'_, '_>, acct: &Acct) -> Vec<Column>;
    /// The scan's column (of length `len`, holding `ty`).
    fn scan(&self, run: &ScanRun<'_, '_>, ty: DType, acct: &Acct) -> Column;
    /// The counts per key of all leaves (`run.keys` of them).
    fn count_by_key(&self, run: &KeyRun<'_, '_>, acct: &Acct) -> Vec<u64>;
    /// How this driver runs the relational operators (sorts).
    fn strategy(&self) -> Strategy;
}

/// Midpoint of a leaf range: the one split rule of the reduction tree.
#[inline]
pub(crate) fn tree_mid(lo: usize, hi: usize) -> usize {
    lo + (hi - lo) / 2
}

/// One stage ready to run: its program, inputs, resolved range and uniform
/// values. Shared (`Sync`) by every task of a run.
#[derive(Debug)]
pub(crate) struct StageRun<'a> {
    prog: &'a StageProgram,
    stage: &'a Stage,
    inputs: SmallVec<[ColumnRef<'a>; 4]>,
    offsets: SmallVec<[usize; 4]>,
    index_offsets: SmallVec<[u64; 2]>,
    len: usize,
    uniforms: SmallVec<[Scalar; 16]>,
    params: &'a [Scalar],
    isa: Isa,
}

/// Evaluates the uniform values of `prog` into `vals` (empty before; one
/// slot per node). Filled in place: the vector is a few hundred bytes, and
/// returning it costs a copy on every run.
fn eval_uniforms(
    vals: &mut SmallVec<[Scalar; 16]>,
    prog: &ExprArena,
    list: &[u32],
    params: &[Scalar],
) {
    // A push loop: `smallvec![v; n]` goes through the generic `extend`,
    // which costs more than evaluating a typical chain's uniforms.
    for _ in 0..prog.len() {
        vals.push(Scalar::Bool(false));
    }
    // Indexed as a slice: a `SmallVec` index tests where its items live
    // on every access.
    let vals = vals.as_mut_slice();
    for &i in list {
        let i = i as usize;
        let d = prog.get(Value::new(i));
        let r = |v: Value| vals[v.index()];
        vals[i] = match d.node {
            Node::Param(p) => params[p as usize].cast(d.ty),
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
            Node::Cast(a) => r(a).cast(d.ty),
            Node::Powi(a, k) => eval::powi(r(a), k),
            Node::Input(_) | Node::Index(_) => continue,
        };
    }
}

impl<'a> StageRun<'a> {
    /// Checks the inputs and parameters against the program and resolves
    /// the stage's range ([`StageRun::from_checked`] builds the run,
    /// [`StageRun::evaluate_uniforms`] completes it).
    /// After both, nothing in the run can fail or panic.
    ///
    /// The caller builds the run itself from the range (a struct literal
    /// where the run lives): a run is ~440 bytes (its uniforms inline),
    /// and returned through `Result` it was copied three times on every
    /// query (gdb on `memmove`, `tiny_query p1 1000`).
    pub(crate) fn check(
        prog: &StageProgram,
        stage: &Stage,
        inputs: &[ColumnRef<'_>],
        params: &[Scalar],
    ) -> Result<StageRange, Fault> {
        if params.len() < prog.params_needed {
            return Err(Fault::Params {
                needed: prog.params_needed,
                given: params.len(),
            });
        }
        if inputs.len() != stage.inputs.len() {
            return Err(Fault::InputCount {
                slots: stage.inputs.len(),
                given: inputs.len(),
            });
        }
        for (s, (t, c)) in prog.input_types.iter().zip(inputs).enumerate() {
            if let Some(t) = *t {
                if c.dtype() != t {
                    return Err(Fault::InputType {
                        slot: s,
                        expected: t,
                        found: c.dtype(),
                    });
                }
            }
        }
        // Push loops here and below: `SmallVec`'s generic `collect` costs
        // more than the rest of this setup on a tiny query.
        let mut lens: SmallVec<[usize; 4]> = SmallVec::new();
        for c in inputs {
            lens.push(c.len());
        }
        let range = stage.resolve_range(&lens, params);
        for (s, t) in prog.input_types.iter().enumerate() {
            if t.is_some() && range.len > 0 && range.offsets[s].saturating_add(range.len) > lens[s]
            {
                return Err(Fault::InputShort(s));
            }
        }
        Ok(range)
    }

    /// A checked run ([`StageRun::check`] gave `range`), its uniforms not
    /// yet evaluated ([`StageRun::evaluate_uniforms`]).
    #[inline(always)]
    pub(crate) fn from_checked(
        prog: &'a StageProgram,
        stage: &'a Stage,
        inputs: SmallVec<[ColumnRef<'a>; 4]>,
        range: StageRange,
        params: &'a [Scalar],
        isa: Isa,
    ) -> StageRun<'a> {
        StageRun {
            prog,
            stage,
            uniforms: SmallVec::new(),
            inputs,
            offsets: range.offsets,
            index_offsets: range.index_offsets,
            len: range.len,
            params,
            isa,
        }
    }

    /// Evaluates the run's uniform values, in place.
    pub(crate) fn evaluate_uniforms(&mut self) {
        self.uniforms.clear();
        eval_uniforms(
            &mut self.uniforms,
            &self.stage.program,
            &self.prog.uniforms,
            self.params,
        );
    }

    /// The count-only twin of a filter+collect stage (for the parallel
    /// count pass).
    pub(crate) fn count_run(&self) -> Option<StageRun<'a>> {
        let prog = self.prog.count_pass.as_deref()?;
        let mut run = StageRun {
            prog,
            stage: self.stage,
            inputs: self.inputs.clone(),
            offsets: self.offsets.clone(),
            index_offsets: self.index_offsets.clone(),
            len: self.len,
            uniforms: SmallVec::new(),
            params: self.params,
            isa: self.isa,
        };
        eval_uniforms(
            &mut run.uniforms,
            &self.stage.program,
            &prog.uniforms,
            self.params,
        );
        Some(run)
    }

    /// Number of logical positions.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of leaves (the last one may be partial).
    pub(crate) fn leaves(&self) -> usize {
        self.len.div_ceil(LEAF)
    }

    /// Positions `start..end` of leaf `j`.
    pub(crate) fn leaf_range(&self, j: usize) -> (usize, usize) {
        let start = j.saturating_mul(LEAF).min(self.len);
        (start, start.saturating_add(LEAF).min(self.len))
    }

    /// Positions of leaves `lo..hi` (empty when `hi <= lo`).
    pub(crate) fn leaves_span(&self, lo: usize, hi: usize) -> (usize, usize) {
        let start = self.leaf_range(lo).0;
        if hi <= lo {
            return (start, start);
        }
        (start, self.leaf_range(hi - 1).1)
    }

    /// Number of positions in leaves `lo..hi`.
    pub(crate) fn leaves_len(&self, lo: usize, hi: usize) -> u64 {
        let (start, end) = self.leaves_span(lo, hi);
        (end - start) as u64
    }

    /// Whether the stage has a predicate.
    pub(crate) fn has_predicate(&self) -> bool {
        self.prog.predicate.is_some()
    }

    /// Bytes of one [`Exec`].
    pub(crate) fn state_bytes(&self) -> u64 {
        Regs::bytes(&self.prog.regs)
            + if self.has_predicate() {
                (BLOCK * 4) as u64
            } else {
                0
            }
    }

    /// Fresh per-thread scratch, with uniform terminal columns splatted.
    pub(crate) fn new_state(&self) -> Exec {
        let mut st = Exec::recycled();
        self.shape_state(&mut st);
        st
    }

    /// Runs `f` on this thread's pooled scratch, shaped for this run and
    /// borrowed where it lies in the pool: a sequential run moves no state
    /// in or out of the pool (a few hundred bytes each way, which a tiny
    /// query notices). A busy pool (never on the sequential path) gives a
    /// fresh state instead.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut Exec) -> R) -> R {
        let mut f = Some(f);
        let pooled = POOL.try_with(|p| {
            let mut pool = p.try_borrow_mut().ok()?;
            if pool.is_empty() {
                pool.push(Exec::empty());
            }
            let st = pool.last_mut()?;
            self.shape_state(st);
            let r = (f.take()?)(st);
            if st.pooled_bytes() > POOLED_BYTES {
                // Dropped while the pool is borrowed: freed, not re-pooled.
                pool.pop();
            }
            Some(r)
        });
        match (pooled, f) {
            (Ok(Some(r)), _) => r,
            (_, Some(f)) => f(&mut self.new_state()),
            (_, None) => unreachable!("`f` runs at most once and returns"),
        }
    }

    /// Gives `st` this run's registers, splatted uniform columns and
    /// survivor list.
    fn shape_state(&self, st: &mut Exec) {
        st.regs.reshape(&self.prog.regs);
        let regs = &mut st.regs;
        for s in &self.prog.splats {
            let v = self.uniforms[s.node as usize];
            with_lane!(s.ty, T => {
                if let Some(r) = T::file_mut(regs).get_mut(s.reg as usize) {
                    kernels::splat(r, T::from_scalar(v));
                }
            })
        }
        if self.has_predicate() {
            st.idx.resize(BLOCK, 0);
        } else {
            st.idx.clear();
        }
    }

    /// The identity of a user combine, as `ty`.
    fn identity_of(&self, c: &Combine, ty: DType) -> Scalar {
        self.params
            .get(c.identity as usize)
            .map_or(Scalar::zero(ty), |s| s.cast(ty))
    }

    // ---- operands ------------------------------------------------------

    /// Input slot `s` at positions `pos..pos + n`.
    #[inline(always)]
    fn input<T: Lane>(&self, s: u16, pos: usize, n: usize) -> &'a [T] {
        let s = s as usize;
        match (
            self.inputs.get(s).and_then(|c| T::column(*c)),
            self.offsets.get(s),
        ) {
            (Some(col), Some(&off)) => {
                let start = off + pos;
                col.get(start..start + n).unwrap_or(&[])
            }
            _ => &[],
        }
    }

    /// The bytes of input slot `s` at positions `pos..pos + n`, for
    /// prefetch hints (empty when the stage has no such input there).
    fn input_bytes(&self, s: usize, pos: usize, n: usize) -> &'a [u8] {
        match (self.inputs.get(s), self.offsets.get(s)) {
            (Some(col), Some(&off)) => {
                let size = col.dtype().size();
                let start = (off + pos) * size;
                let bytes = col.as_bytes();
                bytes
                    .get(start..(start + n * size).min(bytes.len()))
                    .unwrap_or(&[])
            }
            _ => &[],
        }
    }

    #[inline(always)]
    fn operand<'r, T: Lane>(
        &'r self,
        a: Operand,
        regs: &'r Regs,
        pos: usize,
        n: usize,
    ) -> Op<'r, T> {
        match a {
            Operand::Reg(r) => Op::Slice(
                T::file(regs)
                    .get(r as usize)
                    .and_then(|v| v.get(..n))
                    .unwrap_or(&[]),
            ),
            Operand::Input(s) => Op::Slice(self.input(s, pos, n)),
            Operand::Uniform(u) => Op::Splat(T::from_scalar(
                self.uniforms
                    .get(u as usize)
                    .copied()
                    .unwrap_or(Scalar::Bool(false)),
            )),
        }
    }

    /// A terminal column at `pos..pos + n`.
    #[inline(always)]
    fn col<'r, T: Lane>(
        &'r self,
        c: Option<&Col>,
        regs: &'r Regs,
        pos: usize,
        n: usize,
    ) -> &'r [T] {
        match c.map(|c| self.operand::<T>(c.src, regs, pos, n)) {
            Some(Op::Slice(s)) => s,
            _ => &[],
        }
    }

    #[inline(always)]
    fn mask<'r>(&'r self, regs: &'r Regs, pos: usize, n: usize) -> Option<&'r [bool]> {
        self.prog
            .predicate
            .as_ref()
            .map(|p| self.col::<bool>(Some(p), regs, pos, n))
    }

    // ---- instructions --------------------------------------------------

    /// Runs the instruction list over positions `pos..pos + n` (`n <= BLOCK`).
    fn run_instrs(&self, regs: &mut Regs, pos: usize, n: usize) {
        for ins in &self.prog.instrs {
            self.exec(ins, regs, pos, n, None);
        }
    }

    /// Runs the instruction list over positions `pos..pos + n` with the
    /// last instruction writing into `dst` (`n` lanes) instead of its
    /// register: for a collect whose one column is that register
    /// ([`StageProgram::direct_store`]). Whether every lane of `dst` was
    /// written (always, for compiled programs).
    fn run_instrs_into(&self, regs: &mut Regs, pos: usize, n: usize, dst: &mut Direct<'_>) -> bool {
        let Some((last, rest)) = self.prog.instrs.split_last() else {
            return false;
        };
        for ins in rest {
            self.exec(ins, regs, pos, n, None);
        }
        self.exec(last, regs, pos, n, Some(dst))
    }

    /// Takes output register `out` out of its file (no closure: everything
    /// here must inline into the ISA-specific entry points).
    #[inline(always)]
    fn take_out<T: Lane>(regs: &mut Regs, out: u16) -> Option<Vec<T>> {
        T::file_mut(regs).get_mut(out as usize).map(std::mem::take)
    }

    #[inline(always)]
    fn put_out<T: Lane>(regs: &mut Regs, out: u16, v: Vec<T>) {
        if let Some(slot) = T::file_mut(regs).get_mut(out as usize) {
            *slot = v;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn un<A: Lane, R: Lane>(
        &self,
        regs: &mut Regs,
        a: Operand,
        out: u16,
        pos: usize,
        n: usize,
        f: impl Fn(A) -> R,
        dst: Option<&mut Direct<'_>>,
    ) -> bool {
        if let Some(d) = dst {
            let Some(d) = R::direct(d).and_then(|d| d.get_mut(..n)) else {
                return false;
            };
            return match self.operand::<A>(a, regs, pos, n) {
                Op::Slice(s) => isa::unary(self.isa, s, d, f),
                Op::Splat(x) => {
                    kernels::splat(d, f(x));
                    true
                }
            };
        }
        let Some(mut o) = Self::take_out::<R>(regs, out) else {
            return false;
        };
        let k = n.min(o.len());
        match self.operand::<A>(a, regs, pos, n) {
            Op::Slice(s) => isa::unary(self.isa, s, &mut o[..k], f),
            Op::Splat(x) => {
                kernels::splat(&mut o[..k], f(x));
                true
            }
        };
        Self::put_out(regs, out, o);
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn bin<A: Lane, R: Lane>(
        &self,
        regs: &mut Regs,
        a: Operand,
        b: Operand,
        out: u16,
        pos: usize,
        n: usize,
        f: impl Fn(A, A) -> R,
        dst: Option<&mut Direct<'_>>,
    ) -> bool {
        if let Some(d) = dst {
            let Some(d) = R::direct(d).and_then(|d| d.get_mut(..n)) else {
                return false;
            };
            let (a, b) = (
                self.operand::<A>(a, regs, pos, n),
                self.operand::<A>(b, regs, pos, n),
            );
            return isa::binary(self.isa, a, b, d, f);
        }
        let Some(mut o) = Self::take_out::<R>(regs, out) else {
            return false;
        };
        let k = n.min(o.len());
        let (a, b) = (
            self.operand::<A>(a, regs, pos, n),
            self.operand::<A>(b, regs, pos, n),
        );
        isa::binary(self.isa, a, b, &mut o[..k], f);
        Self::put_out(regs, out, o);
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn tern<A: Lane, B: Lane>(
        &self,
        regs: &mut Regs,
        ops: [Operand; 3],
        out: u16,
        pos: usize,
        n: usize,
        f: impl Fn(A, B, B) -> B,
        dst: Option<&mut Direct<'_>>,
    ) -> bool {
        if let Some(d) = dst {
            let Some(d) = B::direct(d).and_then(|d| d.get_mut(..n)) else {
                return false;
            };
            let a = self.operand::<A>(ops[0], regs, pos, n);
            let b = self.operand::<B>(ops[1], regs, pos, n);
            let c = self.operand::<B>(ops[2], regs, pos, n);
            return isa::ternary(self.isa, a, b, c, d, f);
        }
        let Some(mut o) = Self::take_out::<B>(regs, out) else {
            return false;
        };
        let k = n.min(o.len());
        let a = self.operand::<A>(ops[0], regs, pos, n);
        let b = self.operand::<B>(ops[1], regs, pos, n);
        let c = self.operand::<B>(ops[2], regs, pos, n);
        isa::ternary(self.isa, a, b, c, &mut o[..k], f);
        Self::put_out(regs, out, o);
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn powi<T: Num>(
        &self,
        regs: &mut Regs,
        a: Operand,
        k: i32,
        out: u16,
        pos: usize,
        n: usize,
        dst: Option<&mut Direct<'_>>,
    ) -> bool {
        if let Some(d) = dst {
            let Some(d) = T::direct(d).and_then(|d| d.get_mut(..n)) else {
                return false;
            };
            return match self.operand::<T>(a, regs, pos, n) {
                Op::Slice(s) => isa::powi(self.isa, s, k, d),
                Op::Splat(_) => false,
            };
        }
        let Some(mut o) = Self::take_out::<T>(regs, out) else {
            return false;
        };
        let m = n.min(o.len());
        if let Op::Slice(s) = self.operand::<T>(a, regs, pos, n) {
            isa::powi(self.isa, s, k, &mut o[..m]);
        }
        Self::put_out(regs, out, o);
        false
    }

    fn iota(regs: &mut Regs, base: u64, out: u16, n: usize, dst: Option<&mut Direct<'_>>) -> bool {
        if let Some(d) = dst {
            let Some(d) = u64::direct(d).and_then(|d| d.get_mut(..n)) else {
                return false;
            };
            kernels::iota(d, base);
            return true;
        }
        if let Some(o) = u64::file_mut(regs).get_mut(out as usize) {
            let m = n.min(o.len());
            kernels::iota(&mut o[..m], base);
        }
        false
    }

    fn exec(
        &self,
        ins: &Instr,
        regs: &mut Regs,
        pos: usize,
        n: usize,
        dst: Option<&mut Direct<'_>>,
    ) -> bool {
        match *ins {
            Instr::Iota { slot, out } => {
                let off = self.index_offsets.get(slot as usize).copied().unwrap_or(0);
                let base = (pos as u64).wrapping_add(off);
                Self::iota(regs, base, out, n, dst)
            }
            Instr::Unary { op, ty, a, out } => {
                macro_rules! float {
                    ($f:ident) => {
                        with_float!(ty, T => self.un::<T, T>(regs, a, out, pos, n, T::$f, dst), else false)
                    };
                }
                match op {
                    UnaryOp::Not => self.un::<bool, bool>(regs, a, out, pos, n, |x| !x, dst),
                    UnaryOp::Neg => {
                        with_num!(ty, T => self.un::<T, T>(regs, a, out, pos, n, T::n_neg, dst), else false)
                    }
                    UnaryOp::Abs => {
                        with_num!(ty, T => self.un::<T, T>(regs, a, out, pos, n, T::n_abs, dst), else false)
                    }
                    UnaryOp::Sqrt => float!(f_sqrt),
                    UnaryOp::Exp => float!(f_exp),
                    UnaryOp::Ln => float!(f_ln),
                    UnaryOp::Sin => float!(f_sin),
                    UnaryOp::Cos => float!(f_cos),
                    UnaryOp::Floor => float!(f_floor),
                    UnaryOp::Ceil => float!(f_ceil),
                    UnaryOp::Round => float!(f_round),
                    UnaryOp::BitNot => {
                        with_int!(ty, T => self.un::<T, T>(regs, a, out, pos, n, T::i_not, dst), else false)
                    }
                }
            }
            Instr::Binary { op, ty, a, b, out } => {
                macro_rules! arith {
                    ($f:ident) => {
                        with_num!(ty, T => self.bin::<T, T>(regs, a, b, out, pos, n, T::$f, dst), else false)
                    };
                }
                macro_rules! cmp {
                    ($o:tt) => {
                        with_lane!(ty, T => self.bin::<T, bool>(regs, a, b, out, pos, n, |x: T, y: T| x $o y, dst))
                    };
                }
                macro_rules! bits {
                    ($f:ident) => {
                        with_int!(ty, T => self.bin::<T, T>(regs, a, b, out, pos, n, T::$f, dst), else false)
                    };
                }
                match op {
                    BinaryOp::Add => arith!(n_add),
                    BinaryOp::Sub => arith!(n_sub),
                    BinaryOp::Mul => arith!(n_mul),
                    BinaryOp::Div => arith!(n_div),
                    BinaryOp::Rem => arith!(n_rem),
                    BinaryOp::Min => arith!(n_min),
                    BinaryOp::Max => arith!(n_max),
                    BinaryOp::Eq => cmp!(==),
                    BinaryOp::Ne => cmp!(!=),
                    BinaryOp::Lt => cmp!(<),
                    BinaryOp::Le => cmp!(<=),
                    BinaryOp::Gt => cmp!(>),
                    BinaryOp::Ge => cmp!(>=),
                    BinaryOp::And => {
                        self.bin::<bool, bool>(regs, a, b, out, pos, n, |x, y| x & y, dst)
                    }
                    BinaryOp::Or => {
                        self.bin::<bool, bool>(regs, a, b, out, pos, n, |x, y| x | y, dst)
                    }
                    BinaryOp::BitAnd => bits!(i_and),
                    BinaryOp::BitOr => bits!(i_or),
                    BinaryOp::BitXor => bits!(i_xor),
                    BinaryOp::Shl => bits!(i_shl),
                    BinaryOp::Shr => bits!(i_shr),
                }
            }
            Instr::Select { ty, c, a, b, out } => with_lane!(ty, T => self.tern::<bool, T>(
                regs,
                [c, a, b],
                out,
                pos,
                n,
                |c, x, y| if c { x } else { y },
                dst,
            )),
            Instr::MulAdd { ty, a, b, c, out } => with_num!(ty, T => self.tern::<T, T>(
                regs,
                [a, b, c],
                out,
                pos,
                n,
                T::n_mul_add,
                dst,
            ), else false),
            Instr::Cast { from, to, a, out } => with_lane!(from, A => with_lane!(to, B => {
                self.un::<A, B>(regs, a, out, pos, n, <A as CastTo<B>>::cast_to, dst)
            })),
            Instr::Powi { ty, a, n: k, out } => {
                with_num!(ty, T => self.powi::<T>(regs, a, k, out, pos, n, dst), else false)
            }
            Instr::Chain {
                op1,
                op2,
                ty,
                a,
                b,
                c,
                out,
            } => {
                with_float!(ty, T => self.chain::<T>(regs, op1, op2, [a, b, c], out, pos, n, dst), else false)
            }
        }
    }

    /// An [`Instr::Chain`]: one kernel per pair of operations, each
    /// rounded as written. Its output may be the register of its first
    /// operand (the allocator reuses a register at its last read): then
    /// it runs in place.
    #[allow(clippy::too_many_arguments)]
    fn chain<T: Num>(
        &self,
        regs: &mut Regs,
        op1: BinaryOp,
        op2: ChainOp,
        [a, b, c]: [Operand; 3],
        out: u16,
        pos: usize,
        n: usize,
        dst: Option<&mut Direct<'_>>,
    ) -> bool {
        let Op::Splat(k) = self.operand::<T>(b, regs, pos, n) else {
            return false;
        };
        macro_rules! go {
            ($f:expr) => {{
                let f = $f;
                if let Some(d) = dst {
                    let Some(d) = T::direct(d).and_then(|d| d.get_mut(..n)) else {
                        return false;
                    };
                    let Op::Slice(a) = self.operand::<T>(a, regs, pos, n) else {
                        return false;
                    };
                    let c = self.operand::<T>(c, regs, pos, n);
                    return isa::chain(self.isa, a, k, c, d, f);
                }
                let Some(mut o) = Self::take_out::<T>(regs, out) else {
                    return false;
                };
                let m = n.min(o.len());
                if a == Operand::Reg(out) {
                    let c = self.operand::<T>(c, regs, pos, n);
                    isa::chain_in_place(self.isa, &mut o[..m], k, c, f);
                } else {
                    if let Op::Slice(a) = self.operand::<T>(a, regs, pos, n) {
                        let c = self.operand::<T>(c, regs, pos, n);
                        isa::chain(self.isa, a, k, c, &mut o[..m], f);
                    }
                }
                Self::put_out(regs, out, o);
                false
            }};
        }
        macro_rules! outer {
            ($inner:ident) => {
                match op2 {
                    ChainOp::Add => go!(|a: T, b: T, c: T| T::n_add(T::$inner(a, b), c)),
                    ChainOp::Sub => go!(|a: T, b: T, c: T| T::n_sub(T::$inner(a, b), c)),
                    ChainOp::Mul => go!(|a: T, b: T, c: T| T::n_mul(T::$inner(a, b), c)),
                    ChainOp::SubFrom => go!(|a: T, b: T, c: T| T::n_sub(c, T::$inner(a, b))),
                }
            };
        }
        match op1 {
            BinaryOp::Add => outer!(n_add),
            BinaryOp::Sub => outer!(n_sub),
            BinaryOp::Mul => outer!(n_mul),
            // Never compiled (`chain_binaries`).
            _ => false,
        }
    }
}

/// A run whose terminal is a reduction: the methods that fold leaves into
/// partial aggregates and combine them.
pub(crate) struct ReduceRun<'r, 'a> {
    run: &'r StageRun<'a>,
    aggs: &'a [AggProgram],
    /// Which end of the stream settles every aggregate, if one does.
    settles: Option<Settles>,
}

/// A run whose terminal collects columns (all positions, or the survivors
/// of its predicate).
pub(crate) struct CollectRun<'r, 'a> {
    run: &'r StageRun<'a>,
    cols: &'a [Col],
}

/// A run whose terminal is a scan.
pub(crate) struct ScanRun<'r, 'a> {
    run: &'r StageRun<'a>,
    col: &'a Col,
    op: &'a ScanOp,
    exclusive: bool,
}

/// A run seen through its terminal: each kind has only the methods that
/// apply to it, so none of them meets a terminal it cannot handle.
pub(crate) enum RunKind<'r, 'a> {
    Reduce(ReduceRun<'r, 'a>),
    Collect(CollectRun<'r, 'a>),
    Scan(ScanRun<'r, 'a>),
    CountByKey(KeyRun<'r, 'a>),
}

/// A run counting its positions per key.
pub(crate) struct KeyRun<'r, 'a> {
    run: &'r StageRun<'a>,
    key: &'r Col,
    /// Number of keys (at least 1); a larger key counts in the last.
    pub(crate) keys: usize,
    /// `key` is a histogram's float column, binned by one kernel.
    bins: Option<&'r Bins>,
}

macro_rules! run_view {
    ($($view:ident),*) => {$(
        impl<'a> std::ops::Deref for $view<'_, 'a> {
            type Target = StageRun<'a>;
            fn deref(&self) -> &StageRun<'a> {
                self.run
            }
        }
    )*};
}
run_view!(ReduceRun, CollectRun, ScanRun, KeyRun);

impl<'a> StageRun<'a> {
    /// The run as a reduction, if it is one (the count pass of a
    /// filter+collect always is).
    pub(crate) fn as_reduce(&self) -> Option<ReduceRun<'_, 'a>> {
        match self.kind() {
            RunKind::Reduce(r) => Some(r),
            _ => None,
        }
    }

    /// The run seen through its terminal.
    pub(crate) fn kind(&self) -> RunKind<'_, 'a> {
        match &self.prog.terminal {
            TermProgram::Reduce(aggs) => RunKind::Reduce(ReduceRun {
                run: self,
                aggs,
                settles: Settles::of(aggs.iter().map(|a| &a.kind)),
            }),
            TermProgram::Collect(cols) => RunKind::Collect(CollectRun { run: self, cols }),
            TermProgram::Scan { col, op, exclusive } => RunKind::Scan(ScanRun {
                run: self,
                col,
                op,
                exclusive: *exclusive,
            }),
            TermProgram::CountByKey { key, keys, bins } => RunKind::CountByKey(KeyRun {
                run: self,
                key,
                keys: *keys as usize,
                bins: bins.as_ref(),
            }),
        }
    }
}

impl KeyRun<'_, '_> {
    // ---- counts per key ------------------------------------------------

    /// The `u32` sub-count arrays `count_leaves` increments over
    /// `positions` positions, and the length of each: for a histogram of
    /// enough positions more arrays, each with the room
    /// `kernels::count_bin_keys` wants for its mask (16.5 KiB for 256 bins,
    /// where four arrays of its keys take 4 KiB: their clearing and summing
    /// cost more than the faster increments save below
    /// `kernels::WIDE_BIN_COUNTS`' positions).
    fn sub_count_arrays(&self, positions: usize) -> (usize, usize) {
        match self.bins {
            Some(_) if positions >= kernels::WIDE_BIN_COUNTS => {
                (kernels::BIN_SUB_COUNTS, kernels::bin_stride(self.keys))
            }
            _ => (kernels::SUB_COUNTS, self.keys),
        }
    }

    /// The bytes `count_leaves` allocates for leaves `lo..hi`: its
    /// sub-counts and `u64` counts.
    pub(crate) fn count_bytes(&self, lo: usize, hi: usize) -> u64 {
        let (arrays, stride) = self.sub_count_arrays(self.leaves_len(lo, hi) as usize);
        (arrays * stride * 4 + self.keys * 8) as u64
    }

    /// Adds the counts of leaves `lo..hi` to `counts` (`keys` long).
    pub(crate) fn count_leaves(&self, st: &mut Exec, counts: &mut [u64], lo: usize, hi: usize) {
        let (start, end) = self.leaves_span(lo, hi);
        if start == end {
            return;
        }
        match self.bins {
            None => {
                let mut sub = SubCounts::new(self.sub_count_arrays(end - start));
                let mut pos = start;
                while pos < end {
                    let n = (end - pos).min(BLOCK);
                    self.run_instrs(&mut st.regs, pos, n);
                    let keys = self.col::<u32>(Some(self.key), &st.regs, pos, n);
                    let mask = self.mask(&st.regs, pos, n);
                    isa::count_keys(self.isa, sub.block(counts), keys, mask);
                    pos += n;
                }
                sub.flush(counts);
            }
            Some(b) => {
                // Keys narrow where they fit in 16 bits.
                let mut sub = SubCounts::new(self.sub_count_arrays(end - start));
                if self.keys <= 1 << 16 {
                    with_float!(self.key.ty, T => self.count_bins::<T, u16>(st, &mut sub, counts, b, start, end), else ())
                } else {
                    with_float!(self.key.ty, T => self.count_bins::<T, u32>(st, &mut sub, counts, b, start, end), else ())
                }
                sub.flush(counts);
            }
        }
    }

    /// `count_leaves`'s blocks over `start..end` when the key is a
    /// histogram's: one kernel computes a block's keys from the float
    /// column (as `K`, which holds every key), another counts them (into
    /// `sub`'s arrays, in their layout).
    fn count_bins<T: kernels::BinLane, K: kernels::KeyLane>(
        &self,
        st: &mut Exec,
        sub: &mut SubCounts,
        counts: &mut [u64],
        b: &Bins,
        start: usize,
        end: usize,
    ) {
        let float = |o: Operand| match self.operand::<T>(o, &st.regs, 0, 0) {
            Op::Splat(v) => v,
            Op::Slice(_) => T::default(),
        };
        let int = |o: Operand| match self.operand::<i32>(o, &st.regs, 0, 0) {
            Op::Splat(v) => v,
            Op::Slice(_) => 0,
        };
        let p = kernels::BinParams {
            lo: float(b.lo),
            scale: float(b.scale),
            hi: float(b.hi),
            lo_cmp: float(b.lo_cmp),
            last: int(b.last),
            below: int(b.below),
            above: int(b.above),
            nan: int(b.nan),
        };
        let last_key = self.keys.saturating_sub(1) as u32;
        // What the next block reads first: the key's input, or (a key
        // computed by instructions) the stage's first input.
        let slot = match self.key.src {
            Operand::Input(s) => s as usize,
            _ => 0,
        };
        let wide = sub.arrays == kernels::BIN_SUB_COUNTS;
        let mut keys = [K::default(); BLOCK];
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(BLOCK);
            self.run_instrs(&mut st.regs, pos, n);
            let x = self.col::<T>(Some(self.key), &st.regs, pos, n);
            let keys = &mut keys[..x.len()];
            isa::bin_keys(self.isa, x, keys, p, last_key);
            let mask = self.mask(&st.regs, pos, n);
            let ahead = self.input_bytes(slot, pos + n, (end - pos - n).min(BLOCK));
            let sub = sub.block(counts);
            isa::count_bin_keys(self.isa, sub, keys, last_key, wide, mask, ahead);
            pos += n;
        }
    }
}

/// The `u32` sub-counts a count's blocks increment ([`kernels::count_keys`],
/// [`kernels::count_bin_keys`]), added to the `u64` counts before they
/// could wrap.
struct SubCounts {
    sub: Vec<u32>,
    /// The number of arrays in `sub`.
    arrays: usize,
    /// The length of each array of `sub`.
    stride: usize,
    /// Positions counted since the last flush.
    since: usize,
}

impl SubCounts {
    /// `arrays` arrays of `stride` sub-counts (`KeyRun::sub_count_arrays`).
    fn new((arrays, stride): (usize, usize)) -> SubCounts {
        SubCounts {
            sub: vec![0; arrays * stride],
            arrays,
            stride,
            since: 0,
        }
    }

    /// The sub-counts for one more block (at most `BLOCK` positions).
    fn block(&mut self, counts: &mut [u64]) -> &mut [u32] {
        if self.since > (u32::MAX as usize) - BLOCK {
            self.flush(counts);
        }
        self.since += BLOCK;
        &mut self.sub
    }

    /// Adds the sub-counts to `counts` and clears them (an array's slots
    /// past `counts` are never counted in).
    fn flush(&mut self, counts: &mut [u64]) {
        if counts.is_empty() || self.stride == 0 {
            return;
        }
        for part in self.sub.chunks_exact_mut(self.stride) {
            for (c, s) in counts.iter_mut().zip(part.iter_mut()) {
                *c += *s as u64;
                *s = 0;
            }
        }
        self.since = 0;
    }
}

impl ReduceRun<'_, '_> {
    // ---- reduce --------------------------------------------------------

    /// Sets `accs` to the identities of the leaf's accumulators.
    ///
    /// In place when `accs` already holds one per aggregate (the state is
    /// pooled per thread, so every leaf after a thread's first does): an
    /// accumulator is ~270 bytes (32 lanes of up to 8 bytes), and built
    /// then pushed it was copied twice per leaf.
    fn reset_accs(&self, accs: &mut Vec<Acc>, first_leaf: bool) {
        let aggs = self.aggs;
        if accs.len() != aggs.len() {
            accs.clear();
            accs.resize(aggs.len(), Acc::Count(0));
        }
        for (acc, a) in accs.iter_mut().zip(aggs) {
            // Lanes into the lanes already there: one copy, where a new
            // accumulator is built and then moved in.
            let reset = match (&mut *acc, &a.init) {
                (Acc::Sum(x), AccInit::Sum(l))
                | (Acc::Min(x), AccInit::Min(l))
                | (Acc::Max(x), AccInit::Max(l)) => reset_lanes(x, l),
                _ => false,
            };
            if reset {
                continue;
            }
            *acc = self.fresh_acc(a, first_leaf);
        }
    }

    /// A new accumulator of `a`, set to its identity.
    #[inline(always)]
    fn fresh_acc(&self, a: &AggProgram, first_leaf: bool) -> Acc {
        let ty = a.col.map_or(DType::U64, |c| c.ty);
        match &a.init {
            AccInit::Sum(l) => Acc::Sum(*l),
            AccInit::Min(l) => Acc::Min(*l),
            AccInit::Max(l) => Acc::Max(*l),
            AccInit::Count => Acc::Count(0),
            AccInit::Any => Acc::Any(false),
            AccInit::All => Acc::All(true),
            AccInit::Arg { max } => Acc::Arg {
                max: *max,
                have: false,
                best: Scalar::zero(ty),
                pos: 0,
            },
            AccInit::Custom(c) => Acc::Custom(first_leaf.then(|| self.identity_of(c, ty))),
            AccInit::Moments => Acc::Moments(Moments::EMPTY),
            AccInit::Pick { last } => Acc::Pick {
                last: *last,
                have: false,
                v: Scalar::zero(ty),
            },
        }
    }

    fn reduce_block(&self, accs: &mut [Acc], regs: &Regs, pos: usize, n: usize) {
        let aggs = self.aggs;
        let mask = self.mask(regs, pos, n);
        macro_rules! fold {
            ($a:expr, $x:expr, $id:expr, $f:expr) => {
                match mask {
                    Some(m) => isa::fold_lanes(self.isa, $a, $x, KeepMask(m), $id, $f),
                    None => isa::fold_lanes(self.isa, $a, $x, KeepAll, $id, $f),
                }
            };
            ($a:expr, $x:expr, cast) => {
                match mask {
                    Some(m) => isa::fold_lanes_cast(self.isa, $a, $x, KeepMask(m)),
                    None => isa::fold_lanes_cast(self.isa, $a, $x, KeepAll),
                }
            };
        }
        for (acc, agg) in accs.iter_mut().zip(aggs) {
            let col = agg.col.as_ref();
            match acc {
                Acc::Sum(l) => match (agg.fused, agg.cast) {
                    (Some(fu), _) => match l {
                        Lanes::F32(acc) => self.fused_sum::<f32>(acc, fu, regs, pos, n, mask),
                        Lanes::F64(acc) => self.fused_sum::<f64>(acc, fu, regs, pos, n, mask),
                        _ => {}
                    },
                    (None, Some(from)) => {
                        if let Lanes::F64(acc) = l {
                            with_num!(from, A => {
                                fold!(acc, self.col::<A>(col, regs, pos, n), cast)
                            }, else ())
                        }
                    }
                    (None, None) => with_lanes!(l, a, T => {
                        fold!(a, self.col::<T>(col, regs, pos, n), T::ZERO, T::n_add)
                    }),
                },
                Acc::Min(l) | Acc::Max(l) if agg.fused.is_some() => {
                    let (Some(fu), max) = (agg.fused, agg.kind == AggKind::Max) else {
                        continue;
                    };
                    match l {
                        Lanes::F32(acc) => {
                            self.fused_extreme::<f32>(acc, fu, max, regs, pos, n, mask)
                        }
                        Lanes::F64(acc) => {
                            self.fused_extreme::<f64>(acc, fu, max, regs, pos, n, mask)
                        }
                        _ => {}
                    }
                }
                Acc::Min(l) => with_lanes!(l, a, T => {
                    fold!(a, self.col::<T>(col, regs, pos, n), T::MIN_ID, T::n_min)
                }),
                Acc::Max(l) => with_lanes!(l, a, T => {
                    fold!(a, self.col::<T>(col, regs, pos, n), T::MAX_ID, T::n_max)
                }),
                Acc::Count(c) => *c = c.wrapping_add(isa::count(self.isa, n, mask)),
                Acc::Any(b) => *b |= isa::any(self.isa, self.col::<bool>(col, regs, pos, n), mask),
                Acc::All(b) => *b &= isa::all(self.isa, self.col::<bool>(col, regs, pos, n), mask),
                Acc::Arg {
                    max,
                    have,
                    best,
                    pos: at,
                } => {
                    let ty = col.map_or(DType::U64, |c| c.ty);
                    with_num!(ty, T => {
                        let mut s = ArgState { have: *have, best: T::from_scalar(*best), pos: *at };
                        let x = self.col::<T>(col, regs, pos, n);
                        if *max {
                            isa::arg(self.isa, &mut s, x, mask, pos as u64, |v, b| v > b);
                        } else {
                            isa::arg(self.isa, &mut s, x, mask, pos as u64, |v, b| v < b);
                        }
                        (*have, *best, *at) = (s.have, s.best.to_scalar(), s.pos);
                    }, else ())
                }
                Acc::Custom(v) => {
                    if let (AggKind::Custom(c), Some(col)) = (&agg.kind, col) {
                        self.custom_fold(c, col, v, regs, pos, n, mask);
                    }
                }
                Acc::Pick { last, have, v } => {
                    // `first` keeps its survivor; `last` takes each block's.
                    if *have && !*last {
                        continue;
                    }
                    let at = match (mask, *last) {
                        (None, _) if n == 0 => None,
                        (None, false) => Some(0),
                        (None, true) => Some(n - 1),
                        (Some(m), false) => m[..n].iter().position(|&k| k),
                        (Some(m), true) => m[..n].iter().rposition(|&k| k),
                    };
                    if let Some(i) = at {
                        let ty = col.map_or(DType::U64, |c| c.ty);
                        with_lane!(ty, T => {
                            if let Some(&x) = self.col::<T>(col, regs, pos, n).get(i) {
                                *v = x.to_scalar();
                                *have = true;
                            }
                        });
                    }
                }
                Acc::Moments(m) => {
                    let ty = col.map_or(DType::U64, |c| c.ty);
                    let b = with_num!(ty, T => {
                        isa::moments(self.isa, self.col::<T>(col, regs, pos, n), mask)
                    }, else Moments::EMPTY);
                    *m = Moments::merge(*m, b);
                }
            }
        }
    }

    /// A sum of `a op b` with the op fused into the fold, keeping the lanes
    /// of `mask`, or of the fused predicate when there is one.
    #[allow(clippy::too_many_arguments)]
    fn fused_sum<T: Num>(
        &self,
        acc: &mut [T; LANES],
        fu: Fused,
        regs: &Regs,
        pos: usize,
        n: usize,
        mask: Option<&[bool]>,
    ) {
        let opnd = |o: Operand| self.operand::<T>(o, regs, pos, n);
        let (a, b) = (opnd(fu.a), opnd(fu.b));
        let z = T::ZERO;
        if let Some(h) = fu.inner {
            // The compiler fuses an inner operation only under a uniform.
            let Op::Splat(c) = b else {
                return;
            };
            let (x, y) = (opnd(h.a), opnd(h.b));
            macro_rules! nested {
                ($h:expr, $keep:expr) => {
                    match fu.op {
                        BinaryOp::Add => isa::fold_lanes_nested(
                            self.isa,
                            acc,
                            x,
                            y,
                            $h,
                            c,
                            n,
                            $keep,
                            z,
                            T::n_add,
                            T::n_add,
                        ),
                        BinaryOp::Sub => isa::fold_lanes_nested(
                            self.isa,
                            acc,
                            x,
                            y,
                            $h,
                            c,
                            n,
                            $keep,
                            z,
                            T::n_sub,
                            T::n_add,
                        ),
                        _ => isa::fold_lanes_nested(
                            self.isa,
                            acc,
                            x,
                            y,
                            $h,
                            c,
                            n,
                            $keep,
                            z,
                            T::n_mul,
                            T::n_add,
                        ),
                    }
                };
            }
            // Under a mask register only: the compiler fuses no predicate
            // beside an inner operation.
            macro_rules! inner {
                ($keep:expr) => {
                    match h.op {
                        BinaryOp::Add => nested!(T::n_add, $keep),
                        BinaryOp::Sub => nested!(T::n_sub, $keep),
                        _ => nested!(T::n_mul, $keep),
                    }
                };
            }
            match mask {
                Some(m) => inner!(KeepMask(m)),
                None => inner!(KeepAll),
            }
            return;
        }
        match (fu.keep, mask) {
            (Some(c), _) => {
                let (Op::Slice(x), Op::Splat(k)) = (opnd(c.x), opnd(c.k)) else {
                    return;
                };
                macro_rules! cmp {
                    ($o:tt) => {
                        self.fused_op(acc, fu.op, a, b, n, KeepCmp { x, k, cmp: |x: T, k: T| x $o k }, z, T::n_add)
                    };
                }
                match c.op {
                    BinaryOp::Lt => cmp!(<),
                    BinaryOp::Le => cmp!(<=),
                    BinaryOp::Gt => cmp!(>),
                    _ => cmp!(>=),
                }
            }
            (None, Some(m)) => self.fused_op(acc, fu.op, a, b, n, KeepMask(m), z, T::n_add),
            (None, None) => self.fused_op(acc, fu.op, a, b, n, KeepAll, z, T::n_add),
        }
    }

    /// A min (or max) of `a op b` with the op fused into the fold, keeping
    /// the lanes of `mask` (the compiler fuses no inner operation and no
    /// predicate into a min or max).
    #[allow(clippy::too_many_arguments)]
    fn fused_extreme<T: Num>(
        &self,
        acc: &mut [T; LANES],
        fu: Fused,
        max: bool,
        regs: &Regs,
        pos: usize,
        n: usize,
        mask: Option<&[bool]>,
    ) {
        let opnd = |o: Operand| self.operand::<T>(o, regs, pos, n);
        let (a, b) = (opnd(fu.a), opnd(fu.b));
        let op = fu.op;
        match (mask, max) {
            (Some(m), false) => self.fused_op(acc, op, a, b, n, KeepMask(m), T::MIN_ID, T::n_min),
            (Some(m), true) => self.fused_op(acc, op, a, b, n, KeepMask(m), T::MAX_ID, T::n_max),
            (None, false) => self.fused_op(acc, op, a, b, n, KeepAll, T::MIN_ID, T::n_min),
            (None, true) => self.fused_op(acc, op, a, b, n, KeepAll, T::MAX_ID, T::n_max),
        }
    }

    /// Folds `a op b` by `f` (identity `id`: a sum's, a min's or a max's)
    /// over the lanes `keep` keeps.
    #[allow(clippy::too_many_arguments)]
    fn fused_op<T: Num>(
        &self,
        acc: &mut [T; LANES],
        op: BinaryOp,
        a: Op<'_, T>,
        b: Op<'_, T>,
        n: usize,
        keep: impl Keep,
        id: T,
        f: impl Fn(T, T) -> T + Copy,
    ) {
        match op {
            BinaryOp::Add => isa::fold_lanes_bin(self.isa, acc, a, b, n, keep, id, T::n_add, f),
            BinaryOp::Sub => isa::fold_lanes_bin(self.isa, acc, a, b, n, keep, id, T::n_sub, f),
            _ => isa::fold_lanes_bin(self.isa, acc, a, b, n, keep, id, T::n_mul, f),
        }
    }

    /// The slow path: a user combine, one element at a time, left to right.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn custom_fold(
        &self,
        c: &Combine,
        col: &Col,
        acc: &mut Option<Scalar>,
        regs: &Regs,
        pos: usize,
        n: usize,
        mask: Option<&[bool]>,
    ) {
        with_lane!(col.ty, T => {
            let xs = self.col::<T>(Some(col), regs, pos, n);
            let mut a = *acc;
            for (i, &v) in xs.iter().enumerate() {
                if mask.is_none_or(|m| m.get(i).copied().unwrap_or(false)) {
                    let x = v.to_scalar();
                    a = Some(a.map_or(x, |a| c.eval(a, x, self.params)));
                }
            }
            *acc = a;
        })
    }

    /// Sets `out` to the partials of a leaf's accumulators.
    fn leaf_partials(&self, accs: &[Acc], out: &mut Partials) {
        // A push loop, as in `finish`: `collect` into a `SmallVec` costs
        // more than the lane reductions of a small leaf.
        out.clear();
        for p in accs.iter().map(|a| {
            let v = match *a {
                Acc::Sum(l) => {
                    with_lanes!(l, a, T => kernels::reduce_lanes(a, T::n_add).to_scalar())
                }
                Acc::Min(l) => {
                    with_lanes!(l, a, T => kernels::reduce_lanes(a, T::n_min).to_scalar())
                }
                Acc::Max(l) => {
                    with_lanes!(l, a, T => kernels::reduce_lanes(a, T::n_max).to_scalar())
                }
                Acc::Count(c) => Scalar::U64(c),
                Acc::Any(b) | Acc::All(b) => Scalar::Bool(b),
                Acc::Arg {
                    have, best, pos, ..
                } => {
                    return Partial {
                        v: best,
                        pos,
                        have,
                        m: Moments::EMPTY,
                    }
                }
                Acc::Custom(v) => {
                    return Partial {
                        v: v.unwrap_or(Scalar::Bool(false)),
                        pos: 0,
                        have: v.is_some(),
                        m: Moments::EMPTY,
                    }
                }
                Acc::Pick { have, v, .. } => {
                    return Partial {
                        v,
                        pos: 0,
                        have,
                        m: Moments::EMPTY,
                    }
                }
                Acc::Moments(m) => {
                    return Partial {
                        v: Scalar::F64(m.m2),
                        pos: 0,
                        have: false,
                        m,
                    }
                }
            };
            Partial {
                v,
                pos: 0,
                have: false,
                m: Moments::EMPTY,
            }
        }) {
            out.push(p);
        }
    }

    /// The partials of an empty range.
    pub(crate) fn identity(&self) -> Partials {
        let aggs = self.aggs;
        aggs.iter()
            .map(|a| {
                let ty = a.col.map_or(DType::U64, |c| c.ty);
                let v = match &a.kind {
                    AggKind::Custom(c) => self.identity_of(c, ty),
                    k => agg_identity(k, ty, self.params),
                };
                Partial {
                    v,
                    pos: 0,
                    have: matches!(a.kind, AggKind::Custom(_)),
                    m: Moments::EMPTY,
                }
            })
            .collect()
    }

    /// Which end of the stream settles every aggregate, if one does
    /// (`first`, `any`, `all`: a prefix; `last`: a suffix).
    pub(crate) fn settles(&self) -> Option<Settles> {
        self.settles
    }

    /// Whether partials are final whatever is merged in from the settling
    /// side.
    pub(crate) fn settled(&self, p: &Partials) -> bool {
        self.aggs
            .iter()
            .zip(p)
            .all(|(a, p)| is_settled(&a.kind, p.v, p.have))
    }

    /// [`ReduceRun::settled`] of a leaf's accumulators so far.
    fn accs_settled(&self, accs: &[Acc]) -> bool {
        self.aggs.iter().zip(accs).all(|(a, acc)| match *acc {
            Acc::Pick { have, v, .. } => is_settled(&a.kind, v, have),
            Acc::Any(b) | Acc::All(b) => is_settled(&a.kind, Scalar::Bool(b), false),
            _ => false,
        })
    }

    /// The partials of leaf `j`.
    pub(crate) fn reduce_leaf(&self, st: &mut Exec, acct: &Acct, j: usize) -> Partials {
        let mut out = Partials::new();
        self.reduce_leaf_into(st, acct, j, &mut out);
        out
    }

    /// [`ReduceRun::reduce_leaf`] into `out`: a run of one leaf (every
    /// input up to [`LEAF`]) fills the caller's partials where they lie,
    /// where returned through the tree and the pooled state's closure
    /// they were copied twice (~230 bytes each time).
    pub(crate) fn reduce_leaf_into(
        &self,
        st: &mut Exec,
        acct: &Acct,
        j: usize,
        out: &mut Partials,
    ) {
        let (start, end) = self.leaf_range(j);
        self.reset_accs(&mut st.accs, j == 0);
        let stops = self.settles() == Some(Settles::Prefix);
        // A stage without registers (no instructions: the fold reads inputs
        // and uniforms only) folds the whole leaf in one call: the same
        // lanes in the same order, without the per-block dispatch.
        let step = if self.prog.regs == [0; 7] {
            LEAF
        } else {
            BLOCK
        };
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(step);
            self.run_instrs(&mut st.regs, pos, n);
            self.reduce_block(&mut st.accs, &st.regs, pos, n);
            pos += n;
            if stops && self.accs_settled(&st.accs) {
                acct.skip((end - pos) as u64);
                break;
            }
        }
        self.leaf_partials(&st.accs, out);
    }

    /// The partials of a run of one leaf whose program has neither
    /// instruction nor register ([`small_reduce`]): the fold of
    /// [`ReduceRun::reduce_leaf_into`] (which folds such a leaf in one
    /// block), its accumulators on the stack instead of a pooled state.
    fn fold_small_leaf(&self) -> Partials {
        static NO_REGS: Regs = Regs::EMPTY;
        // Each built where it lies (a placeholder then reset was two
        // copies of its ~260 bytes).
        let mut accs: SmallVec<[Acc; 2]> = SmallVec::new();
        for a in self.aggs {
            accs.push(self.fresh_acc(a, true));
        }
        let n = self.len();
        if n > 0 {
            self.reduce_block(&mut accs, &NO_REGS, 0, n);
        }
        let mut out = Partials::new();
        self.leaf_partials(&accs, &mut out);
        out
    }

    /// `a ⊕ b` where `a` covers the leaves just before `b`'s.
    pub(crate) fn combine(&self, mut a: Partials, b: Partials) -> Partials {
        let aggs = self.aggs;
        for ((l, r), agg) in a.iter_mut().zip(b).zip(aggs) {
            let typed = matches!(
                agg.kind,
                AggKind::Sum | AggKind::Min | AggKind::Max | AggKind::ArgMin | AggKind::ArgMax
            );
            if typed && l.v.dtype() != r.v.dtype() {
                continue;
            }
            // Custom partials may be empty (`have == false`): an empty one
            // adds nothing (its identity is the user's, not checked).
            if let AggKind::Custom(_) = agg.kind {
                match (l.have, r.have) {
                    (_, false) => continue,
                    (false, true) => {
                        *l = r;
                        continue;
                    }
                    (true, true) => {}
                }
            }
            let at = |p: &Partial| SharedPartial {
                value: p.v,
                pos: p.have.then_some(p.pos),
                moments: p.m,
            };
            let m = merge(&agg.kind, at(l), at(&r), self.params);
            l.v = m.value;
            l.m = m.moments;
            if let Some(pos) = m.pos {
                l.pos = pos;
                l.have = true;
            }
        }
        a
    }

    /// The partials of leaves `lo..hi` by the midpoint tree, sequentially.
    /// A parallel driver splits at the same midpoints (`tree_mid`) and calls
    /// this below its grain, so the result never depends on the grain.
    ///
    /// When a prefix settles every aggregate (`first`, `any`, `all`) the
    /// left half runs first and a settled result skips the right half;
    /// when a suffix does (`last`), the right half runs first and may skip
    /// the left. Skipping merges nothing the settled side would not win.
    pub(crate) fn reduce_tree(&self, st: &mut Exec, acct: &Acct, lo: usize, hi: usize) -> Partials {
        match hi.saturating_sub(lo) {
            0 => self.identity(),
            1 => self.reduce_leaf(st, acct, lo),
            _ => {
                let mid = tree_mid(lo, hi);
                // The half that may settle the result runs first: the left
                // one, or the right one when a suffix settles (`last`).
                let suffix = self.settles == Some(Settles::Suffix);
                let (near, far) = if suffix {
                    ((mid, hi), (lo, mid))
                } else {
                    ((lo, mid), (mid, hi))
                };
                let p = self.reduce_tree(st, acct, near.0, near.1);
                if self.settles.is_some() && self.settled(&p) {
                    acct.skip(self.leaves_len(far.0, far.1));
                    return p;
                }
                let q = self.reduce_tree(st, acct, far.0, far.1);
                if suffix {
                    self.combine(q, p)
                } else {
                    self.combine(p, q)
                }
            }
        }
    }

    /// The aggregate values.
    pub(crate) fn finish(&self, p: Partials) -> SmallVec<[Scalar; 4]> {
        let aggs = self.aggs;
        let mut out = SmallVec::new();
        for (p, a) in p.iter().zip(aggs) {
            out.push(match a.kind {
                AggKind::ArgMin | AggKind::ArgMax => Scalar::U64(if p.have { p.pos } else { 0 }),
                _ => p.v,
            });
        }
        out
    }
}

impl CollectRun<'_, '_> {
    // ---- collect -------------------------------------------------------

    /// Stores positions `start..end` into `out`: in a window, element 0
    /// is position `start`.
    pub(crate) fn store_range(
        &self,
        st: &mut Exec,
        start: usize,
        end: usize,
        mut out: CollectOut<'_, '_>,
    ) {
        let cols = self.cols;
        if let (true, [c]) = (self.prog.direct_store, cols) {
            with_lane!(c.ty, T => self.store_direct::<T>(st, start, end, &mut out));
            return;
        }
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(BLOCK);
            self.run_instrs(&mut st.regs, pos, n);
            for (k, c) in cols.iter().enumerate() {
                with_lane!(c.ty, T => {
                    out.store::<T>(k, pos - start, n, self.col::<T>(Some(c), &st.regs, pos, n))
                })
            }
            pos += n;
        }
    }

    /// [`StageRun::store_range`] of a program whose last instruction
    /// computes its one column ([`StageProgram::direct_store`]): that
    /// instruction writes each block straight into the column, so no block
    /// is copied from a register.
    fn store_direct<T: Lane>(
        &self,
        st: &mut Exec,
        start: usize,
        end: usize,
        out: &mut CollectOut<'_, '_>,
    ) {
        let mut pos = start;
        while pos < end {
            let n = (end - pos).min(BLOCK);
            match out {
                CollectOut::Append(cols) => {
                    let Some(v) = cols.get_mut(0).and_then(T::column_mut) else {
                        return;
                    };
                    v.reserve(n);
                    let len = v.len();
                    let lanes = &mut v.spare_capacity_mut()[..n];
                    if !self.run_instrs_into(&mut st.regs, pos, n, &mut T::to_direct(lanes)) {
                        // Never for a compiled program; whatever happened,
                        // no lane is left uninitialized.
                        kernels::splat(lanes, T::default());
                    }
                    // SAFETY: the `n` lanes after `len` are within the
                    // capacity (reserved above) and all initialized: the
                    // last instruction wrote every one (it said so), or the
                    // fill above did.
                    unsafe { v.set_len(len + n) };
                }
                CollectOut::Windows(w) => {
                    let at = pos - start;
                    let Some(win) = w
                        .get_mut(0)
                        .and_then(T::out)
                        .and_then(|d| d.get_mut(at..at + n))
                    else {
                        return;
                    };
                    let lanes = win;
                    if !self.run_instrs_into(&mut st.regs, pos, n, &mut T::to_direct(lanes)) {
                        kernels::splat(lanes, T::default());
                    }
                }
            }
            pos += n;
        }
    }

    /// Stores the survivors of positions `start..end` into `out`, in order:
    /// in a window, element 0 is the first survivor.
    pub(crate) fn compact_range(
        &self,
        st: &mut Exec,
        start: usize,
        end: usize,
        mut out: CollectOut<'_, '_>,
    ) {
        let cols = self.cols;
        let mut pos = start;
        let mut cursor = 0usize;
        while pos < end {
            let n = (end - pos).min(BLOCK);
            self.run_instrs(&mut st.regs, pos, n);
            let Some(mask) = self.mask(&st.regs, pos, n) else {
                return;
            };
            let cnt = kernels::survivors(mask, &mut st.idx);
            let idx = &st.idx[..cnt];
            for (k, c) in cols.iter().enumerate() {
                with_lane!(c.ty, T => {
                    out.gather::<T>(k, cursor, idx, self.col::<T>(Some(c), &st.regs, pos, n))
                })
            }
            cursor += cnt;
            pos += n;
        }
    }

    /// Output dtypes of the collect.
    pub(crate) fn collect_types(&self) -> SmallVec<[DType; 4]> {
        self.cols.iter().map(|c| c.ty).collect()
    }
}

impl ScanRun<'_, '_> {
    // ---- scan ----------------------------------------------------------

    /// Scans leaf `j`: the leaf-local scan (from the identity), moved by
    /// `offset` (the combined totals of the leaves before; `None` for the
    /// first leaf, which is then exactly the sequential scan). Writes into
    /// `out` (the leaf's window) when given, and returns the leaf's total.
    pub(crate) fn scan_leaf(
        &self,
        st: &mut Exec,
        j: usize,
        offset: Option<Scalar>,
        mut out: ScanOut<'_>,
    ) -> Scalar {
        let (col, op, excl) = (self.col, self.op, self.exclusive);
        let (start, end) = self.leaf_range(j);
        match op {
            ScanOp::Sum => with_num!(col.ty, T => {
                let off = offset.map(T::from_scalar);
                // The leaf's local sums moved by the leaves before it; an
                // exclusive scan's first output is the offset itself.
                let shift = |w: &mut [T], first: bool| {
                    if let Some(off) = off {
                        scan::add_offset(w, off);
                        if excl && first {
                            if let Some(f) = w.first_mut() {
                                *f = off;
                            }
                        }
                    }
                };
                let mut carry = T::ZERO;
                let mut pos = start;
                while pos < end {
                    let n = (end - pos).min(BLOCK);
                    self.run_instrs(&mut st.regs, pos, n);
                    let x = self.col::<T>(Some(col), &st.regs, pos, n);
                    let at = pos - start;
                    match &mut out {
                        ScanOut::Window(o) => {
                            if let Some(w) = T::out(o).and_then(|w| w.get_mut(at..at + n)) {
                                // SAFETY: a scan's windows are of a column
                                // allocated zeroed (`cpu_parallel`'s scan):
                                // initialized, as the offset pass reads them.
                                let w = unsafe { &mut *(w as *mut [MaybeUninit<T>] as *mut [T]) };
                                scan::scan_sum(x, w, &mut carry, excl, self.isa);
                                shift(w, at == 0);
                            }
                        }
                        ScanOut::Append(c) => {
                            if let Some(v) = T::column_mut(c) {
                                let from = v.len();
                                scan::append_scan_sum(v, x, &mut carry, excl, self.isa);
                                shift(&mut v[from..], at == 0);
                            }
                        }
                        ScanOut::Total => carry = scan::fold_sum(x, carry),
                    }
                    pos += n;
                }
                carry.to_scalar()
            }, else Scalar::Bool(false)),
            // Leaves after the first start with no carry at all, so that the
            // user identity enters once: only associativity is assumed.
            ScanOp::Custom(c) => with_lane!(col.ty, T => {
                let id = self.identity_of(c, col.ty);
                let mut carry = (j == 0).then_some(id);
                let mut pos = start;
                while pos < end {
                    let n = (end - pos).min(BLOCK);
                    self.run_instrs(&mut st.regs, pos, n);
                    let x = self.col::<T>(Some(col), &st.regs, pos, n);
                    let at = pos - start;
                    // One element: the output, and the carry moved on.
                    let mut step = |v: T| {
                        let v = v.to_scalar();
                        let next = carry.map_or(v, |a| c.eval(a, v, self.params));
                        let local = if excl { carry } else { Some(next) };
                        carry = Some(next);
                        T::from_scalar(match (offset, local) {
                            (None, Some(l)) => l,
                            (Some(off), None) => off,
                            (Some(off), Some(l)) => c.eval(off, l, self.params),
                            (None, None) => id,
                        })
                    };
                    match &mut out {
                        ScanOut::Window(o) => {
                            if let Some(w) = T::out(o).and_then(|w| w.get_mut(at..at + n)) {
                                for (o, &v) in w.iter_mut().zip(x) {
                                    o.write(step(v));
                                }
                            }
                        }
                        ScanOut::Append(o) => {
                            if let Some(w) = T::column_mut(o) {
                                w.extend(x.iter().map(|&v| step(v)));
                            }
                        }
                        ScanOut::Total => {
                            for &v in x {
                                let v = v.to_scalar();
                                carry = Some(carry.map_or(v, |a| c.eval(a, v, self.params)));
                            }
                        }
                    }
                    pos += n;
                }
                carry.unwrap_or(id)
            }),
        }
    }

    /// The offset of the leaf after one with `offset` and `total`.
    pub(crate) fn scan_carry(&self, offset: Option<Scalar>, total: Scalar) -> Option<Scalar> {
        let op = self.op;
        Some(match offset {
            None => total,
            Some(o) => match op {
                ScanOp::Sum if o.dtype() == total.dtype() => eval::binary(BinaryOp::Add, o, total),
                ScanOp::Sum => o,
                ScanOp::Custom(c) => c.eval(o, total, self.params),
            },
        })
    }
}

/// Where [`StageRun::scan_leaf`] puts a leaf's running sums.
pub(crate) enum ScanOut<'o> {
    /// Nowhere: only the leaf's total is wanted.
    Total,
    /// Into the leaf's window of a preallocated output.
    Window(OutSlice<'o>),
    /// Appended to the output column.
    Append(&'o mut Column),
}

/// Where [`StageRun::store_range`] and [`StageRun::compact_range`] put a
/// collect's columns.
pub(crate) enum CollectOut<'a, 'o> {
    /// Into preallocated windows, one per column, sized by the caller.
    Windows(&'a mut [OutSlice<'o>]),
    /// Appended to the columns.
    Append(&'a mut [Column]),
}

impl CollectOut<'_, '_> {
    /// Puts `x`, a block of `n` positions, into column `k` at window
    /// offset `at` (or at its end).
    #[inline]
    fn store<T: Lane>(&mut self, k: usize, at: usize, n: usize, x: &[T]) {
        match self {
            Self::Windows(w) => {
                let dst = w.get_mut(k).and_then(T::out);
                if let Some(d) = dst.and_then(|d| d.get_mut(at..at + n)) {
                    kernels::store(d, x);
                    if x.len() < n {
                        // Never for a compiled program (a collected column
                        // is a block); whatever happened, no position of
                        // the window is left uninitialized.
                        kernels::splat(&mut d[x.len()..], T::default());
                    }
                }
            }
            Self::Append(c) => {
                if let Some(v) = c.get_mut(k).and_then(T::column_mut) {
                    v.extend_from_slice(x);
                }
            }
        }
    }

    /// Puts `x[idx]` into column `k` at window offset `at` (or at its end).
    #[inline]
    fn gather<T: Lane>(&mut self, k: usize, at: usize, idx: &[u32], x: &[T]) {
        match self {
            Self::Windows(w) => {
                let dst = w.get_mut(k).and_then(T::out);
                if let Some(d) = dst.and_then(|d| d.get_mut(at..)) {
                    kernels::gather_into(d, idx, x);
                }
            }
            Self::Append(c) => {
                if let Some(v) = c.get_mut(k).and_then(T::column_mut) {
                    kernels::gather_push(v, idx, x);
                }
            }
        }
    }
}

/// Bytes of the elements a column has room for.
pub(crate) fn capacity_bytes(c: &mut Column) -> u64 {
    let ty = c.dtype();
    with_lane!(ty, T => T::column_mut(c).map_or(0, |v| (v.capacity() * ty.size()) as u64))
}

/// The run of a plan that is one reduction of at most one leaf ([`LEAF`]
/// positions), from its inputs as they are (no skip or take, no
/// enumerate), with a program that reads only inputs and uniforms (no
/// instruction, no register), on the calling thread: `None` for any other
/// plan, and for inputs [`StageRun::check`] would refuse, which
/// [`run_stages`] then reports.
///
/// The same fold as the general path, leaf for leaf and lane for lane
/// (`ReduceRun::fold_small_leaf`), without what serves larger or longer
/// runs: the pooled scratch state, the range resolution, the stage loop.
/// Every driver runs one leaf as one task on the calling thread (the
/// parallel one too: no helper is posted for a single task), so this is
/// also `cpu-parallel`'s run of such a plan, with the same accounting.
/// It is the common query over a thousand elements (`sum`, `dot`, a
/// fused `map` or `filter` before a reduction), whose fixed cost this
/// path cuts (`examples/tiny_query`).
pub(crate) fn small_reduce(
    program: &BlockProgram,
    plan: &PhysicalPlan,
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
    isa: Isa,
    acct: &Acct,
) -> Option<PlanOutput> {
    let ([stage], [prog]) = (plan.stages.as_slice(), program.stages.as_slice()) else {
        return None;
    };
    let (Terminal::Reduce(_), TermProgram::Reduce(_)) = (&stage.terminal, &prog.terminal) else {
        return None;
    };
    if !prog.instrs.is_empty()
        || prog.regs != [0; 7]
        || stage.enumerates > 0
        || params.len() < prog.params_needed
        || stage.range.iter().any(|r| !matches!(r, RangeOp::Join(_)))
    {
        return None;
    }
    let mut inputs: SmallVec<[ColumnRef<'_>; 4]> = SmallVec::new();
    for inp in &stage.inputs {
        match *inp {
            StageInput::Source(n) => inputs.push(*sources.get(n as usize)?),
            StageInput::Stage { .. } => return None,
        }
    }
    // `Stage::resolve_range` of joins only: the shortest joined input.
    // (This and the type test below are `StageRun::check`'s, written
    // again on purpose: calling it, with its range resolution, cost
    // ~250 of the ~350 instructions this path saves a query at 10^3.)
    let mut len = usize::MAX;
    for r in &stage.range {
        if let RangeOp::Join(s) = *r {
            len = len.min(inputs.get(s as usize)?.len());
        }
    }
    if len == usize::MAX || len == 0 || len > LEAF {
        return None;
    }
    // `StageRun::check`'s tests: each slot read is of its type and long
    // enough.
    for (t, c) in prog.input_types.iter().zip(&inputs) {
        if t.is_some_and(|t| c.dtype() != t || c.len() < len) {
            return None;
        }
    }
    let mut offsets: SmallVec<[usize; 4]> = SmallVec::new();
    for _ in 0..inputs.len() {
        offsets.push(0);
    }
    let mut run = StageRun {
        prog,
        stage,
        inputs,
        offsets,
        index_offsets: SmallVec::new(),
        len,
        uniforms: SmallVec::new(),
        params,
        isa,
    };
    run.evaluate_uniforms();
    let RunKind::Reduce(r) = run.kind() else {
        return None;
    };
    // What `Sequential::reduce`, and `Parallel::reduce` for its one task,
    // account for the run.
    acct.task();
    acct.alloc(run.state_bytes());
    Some(PlanOutput::Aggregates(r.finish(r.fold_small_leaf())))
}

/// Runs `plan`, compiled as `program`, over `sources`: checks the inputs'
/// types, then runs a small reduction by [`small_reduce`] and anything
/// else by [`run_stages`].
pub(crate) fn run_plan(
    program: &BlockProgram,
    plan: &PhysicalPlan,
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
    isa: Isa,
    driver: &dyn Driver,
    acct: &Acct,
) -> Result<PlanOutput, PlanError> {
    if program.stages.len() != plan.stages.len() {
        return Err(PlanError::ProgramMismatch);
    }
    for (n, (c, t)) in sources.iter().zip(&plan.input_dtypes).enumerate() {
        if c.dtype() != *t {
            return Err(PlanError::InputType {
                input: n,
                expected: *t,
                found: c.dtype(),
            });
        }
    }
    if let Some(out) = small_reduce(program, plan, sources, params, isa, acct) {
        return Ok(out);
    }
    run_stages(program, plan, sources, params, isa, driver, acct)
}

/// [`run_plan`]'s general path: every stage of the plan with `driver`,
/// for inputs it checked (the tests compare [`small_reduce`] with it).
pub(crate) fn run_stages(
    program: &BlockProgram,
    plan: &PhysicalPlan,
    sources: &[ColumnRef<'_>],
    params: &[Scalar],
    isa: Isa,
    driver: &dyn Driver,
    acct: &Acct,
) -> Result<PlanOutput, PlanError> {
    // Empty (no allocation) for the common single-stage plan.
    let mut produced: Vec<Vec<Column>> = Vec::new();
    // A sort, group or join stage's materialized columns, sorted, grouped
    // or joined on the host.
    let finish = |i: usize, stage: &Stage, cols: &[ColumnRef<'_>]| {
        let (out, alg) = relational::finish_stage(stage, cols, sources, params, driver.strategy())
            .expect("a sort, group or join stage")
            .map_err(|f| f.at(i))?;
        acct.algorithm(alg);
        Ok::<_, PlanError>(out)
    };
    for (i, (stage, prog)) in plan.stages.iter().zip(&program.stages).enumerate() {
        let mut inputs: SmallVec<[ColumnRef<'_>; 4]> = SmallVec::new();
        for inp in &stage.inputs {
            inputs.push(match *inp {
                StageInput::Source(n) => sources
                    .get(n as usize)
                    .copied()
                    .ok_or_else(|| Fault::Dangling(format!("input {n}")).at(i))?,
                StageInput::Stage { stage: s, column } => produced
                    .get(s as usize)
                    .and_then(|c| c.get(column as usize))
                    .map(|c| c.as_ref())
                    .ok_or_else(|| Fault::Dangling(format!("stage output {s}.{column}")).at(i))?,
            });
        }
        // A sort or group of input columns as they are: from the inputs.
        let direct =
            relational::direct_columns(stage, &inputs, params).map(|cols| finish(i, stage, &cols));
        if let Some(sorted) = direct {
            let sorted = sorted?;
            drop(inputs);
            if i + 1 == plan.stages.len() {
                return Ok(PlanOutput::Columns(sorted));
            }
            produced.push(sorted);
            continue;
        }
        let range = StageRun::check(prog, stage, &inputs, params).map_err(|f| f.at(i))?;
        // The run ends with this block, dropped where it lies (`drop(run)`
        // moved its ~440 bytes once more to free them).
        let out = {
            let mut run = StageRun::from_checked(prog, stage, inputs, range, params, isa);
            run.evaluate_uniforms();
            match run.kind() {
                RunKind::Reduce(r) => PlanOutput::Aggregates(r.finish(driver.reduce(&r, acct))),
                RunKind::Collect(c) if run.has_predicate() => {
                    PlanOutput::Columns(driver.compact(&c, acct))
                }
                RunKind::Collect(c) => {
                    PlanOutput::Columns(full(&run, driver.store(&c, acct)).map_err(|f| f.at(i))?)
                }
                RunKind::Scan(s) => {
                    let ty = s.col.ty;
                    let col = driver.scan(&s, ty, acct);
                    PlanOutput::Columns(full(&run, vec![col]).map_err(|f| f.at(i))?)
                }
                RunKind::CountByKey(k) => {
                    PlanOutput::Columns(vec![Column::U64(driver.count_by_key(&k, acct))])
                }
            }
        };
        let out = match out {
            PlanOutput::Columns(cols) if stage.terminal.is_relational() => {
                let refs: SmallVec<[ColumnRef<'_>; 4]> = cols.iter().map(|c| c.as_ref()).collect();
                PlanOutput::Columns(finish(i, stage, &refs)?)
            }
            other => other,
        };
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

/// `cols` if every one holds a value for each of the stage's positions
/// (always, for validated programs; a short column would be a wrong
/// result, so it is an error the executor can fall back from).
fn full(run: &StageRun<'_>, cols: Vec<Column>) -> Result<Vec<Column>, Fault> {
    match cols.iter().find(|c| c.len() != run.len()) {
        Some(c) => Err(Fault::Rows {
            written: c.len(),
            len: run.len(),
        }),
        None => Ok(cols),
    }
}

/// `cpu-simd`'s driver: every leaf in order on the calling thread.
#[derive(Debug, Default)]
pub(crate) struct Sequential;

impl Driver for Sequential {
    fn shared(&self) -> bool {
        false
    }

    fn strategy(&self) -> Strategy {
        Strategy::Sequential
    }

    fn count_by_key(&self, run: &KeyRun<'_, '_>, acct: &Acct) -> Vec<u64> {
        acct.task();
        // The result and the `u32` sub-counts of `count_leaves`.
        acct.alloc(run.state_bytes() + run.count_bytes(0, run.leaves()));
        let mut counts = vec![0u64; run.keys];
        run.with_state(|st| run.count_leaves(st, &mut counts, 0, run.leaves()));
        counts
    }

    fn reduce(&self, run: &ReduceRun<'_, '_>, acct: &Acct) -> Partials {
        acct.task();
        acct.alloc(run.state_bytes());
        if run.leaves() == 1 {
            let mut out = Partials::new();
            run.with_state(|st| run.reduce_leaf_into(st, acct, 0, &mut out));
            return out;
        }
        run.with_state(|st| run.reduce_tree(st, acct, 0, run.leaves()))
    }

    /// Appends block after block to columns reserved at full length: each
    /// output element is written once, never zeroed first.
    fn store(&self, run: &CollectRun<'_, '_>, acct: &Acct) -> Vec<Column> {
        acct.task();
        acct.alloc(run.state_bytes());
        let mut cols: Vec<Column> = run
            .collect_types()
            .iter()
            .map(|&t| Column::for_output(t, run.len()))
            .collect();
        acct.alloc(cols.iter_mut().map(capacity_bytes).sum());
        run.with_state(|st| run.store_range(st, 0, run.len(), CollectOut::Append(&mut cols)));
        cols
    }

    fn compact(&self, run: &CollectRun<'_, '_>, acct: &Acct) -> Vec<Column> {
        acct.task();
        acct.alloc(run.state_bytes());
        let mut cols: Vec<Column> = run
            .collect_types()
            .iter()
            .map(|&t| Column::with_capacity(t, 0))
            .collect();
        run.with_state(|st| run.compact_range(st, 0, run.len(), CollectOut::Append(&mut cols)));
        acct.alloc(cols.iter_mut().map(capacity_bytes).sum());
        cols
    }

    /// Appends leaf after leaf, as `store` does.
    fn scan(&self, run: &ScanRun<'_, '_>, ty: DType, acct: &Acct) -> Column {
        acct.task();
        acct.alloc(run.state_bytes());
        let mut out = Column::for_output(ty, run.len());
        acct.alloc(capacity_bytes(&mut out));
        run.with_state(|st| {
            let mut offset = None;
            for j in 0..run.leaves() {
                let total = run.scan_leaf(st, j, offset, ScanOut::Append(&mut out));
                offset = run.scan_carry(offset, total);
            }
        });
        out
    }
}
