//! `cpu-simd`: each stage compiled once into a block program, run one block
//! of [`BLOCK`] positions at a time on the calling thread.
//!
//! Owns the block program (`program.rs`), its typed kernels (`kernels.rs`,
//! `isa.rs`, `lanes.rs`, the running sum in `scan.rs`) and the leaf machinery (`exec.rs`) that `cpu-parallel` drives
//! over rayon. It reads plans and inputs; it never chooses or retries.
//!
//! # Design
//!
//! * **Block program.** A stage's element program becomes a flat list of
//!   instructions over typed block registers (`r2:f32 = mul in0, u1`).
//!   Each instruction is one tight loop over a whole block, so the match on
//!   the opcode happens once per block per instruction, never per element.
//!   Stage inputs are read in place (`in0`); parameters, constants and
//!   everything computed only from them are evaluated once per run and used
//!   as scalar operands (`u1`). Registers are reused by liveness, so the
//!   block working set of a typical chain is a few KiB and stays in L1.
//! * **Terminal fusion.** Passes over a block cost memory bandwidth: the
//!   first pass over an input waits on DRAM, and during the later passes
//!   the hardware prefetcher, which runs ahead of demand misses only,
//!   idles. So a float sum folds the last add/sub/mul of its column itself,
//!   and the add/sub/mul under it when the outer one takes a uniform
//!   (`x * 2 + 1`), and evaluates an ordered compare of a column with a
//!   uniform as its predicate (`x > 0.5`): the common memory-bound sums read
//!   their inputs in one pass, with no register at all, and then fold a
//!   whole leaf per call. An `f64` sum of a cast (the sum of a `mean` or of
//!   `stats` over `f32` or integers) converts in its fold the same way, and
//!   a float `min` or `max` folds the add/sub/mul of its column
//!   (`max(x * x)`). (Prefetching the next block's lines during the
//!   fold instead was tried and measured slower: the software prefetches
//!   hold L1 miss buffers the hardware streamer would have used.)
//!   A histogram's key (a chain of a dozen compares, selects, a floor and
//!   a cast over one float column) is one kernel too (`program::Bins`):
//!   a block's keys in vector registers, then the increments.
//! * **Leaves.** Positions are cut into fixed leaves of [`LEAF`] positions
//!   ([`LEAF_BLOCKS`] blocks). A reduction folds each leaf into [`LANES`]
//!   independent accumulator lanes (lane `j` takes positions `j`, `j + 32`,
//!   ...), reduces the lanes by a fixed pairwise tree, and combines leaf
//!   results by a fixed midpoint binary tree over leaf indices. A scan runs
//!   each leaf from the identity and moves it by the combined totals of the
//!   leaves before it (left to right); inside a block, a running sum adds
//!   groups of eight by a fixed tree (`scan.rs`). None of this depends on
//!   the thread count, so `cpu-simd` and `cpu-parallel` are bit-identical.
//! * **ISA dispatch.** Every kernel (one operation over one block) is
//!   compiled twice, for the build's baseline and with AVX2+FMA, and chosen
//!   at run time per call (`isa.rs`: one small function per kernel, not one
//!   interpreter per ISA, which is what keeps the release build short); the
//!   running sum has AVX2 kernels written with intrinsics.
//!   All give the same bits: lanes never reassociate, and
//!   `mul_add` is `f32::mul_add` (a real FMA, or the correctly rounded
//!   library call), never split into a multiply and an add.
//! * **Memory.** A reduction allocates only registers (O(1)); a collect
//!   allocates its output and writes it in place; a filter+collect grows its
//!   output as survivors arrive.
//! * **Slow paths.** User combines (`reduce`, custom `scan`) are evaluated
//!   one element at a time with the reference semantics; transcendental
//!   functions call `libm` per lane.

mod exec;
mod isa;
mod kernels;
mod lanes;
mod program;
mod scan;

pub(crate) use exec::{
    tree_mid, Acct, CollectOut, CollectRun, Driver, Exec, Isa, KeyRun, Partials, ReduceRun,
    ScanOut, ScanRun, StageRun,
};
pub(crate) use lanes::OutSlice;
pub use program::BlockProgram;

use super::cpu_scalar::output_bytes;
use super::{
    Availability, Backend, BackendError, BackendKind, Decline, HostColumn, Job, Phase, RunStats,
};
use crate::plan::{PhysicalPlan, PlanOutput};
use crate::types::ColumnRef;
use smallvec::SmallVec;
use std::time::Instant;

/// Positions per block: one instruction runs over this many lanes. 1024
/// keeps a block register at 4 KiB (`f32`) or 8 KiB (`f64`), so the few
/// registers of a chain stay in a 32 KiB L1 data cache.
pub const BLOCK: usize = 1024;

/// Blocks per leaf.
pub const LEAF_BLOCKS: usize = 16;

/// Positions per leaf: the unit of partial results and of parallel work.
/// A constant, never derived from the thread count, so that results do not
/// depend on it.
pub const LEAF: usize = BLOCK * LEAF_BLOCKS;

/// Accumulator lanes per reduction within a leaf.
pub const LANES: usize = kernels::LANES;

/// The name of the instruction set the block loops use on this CPU
/// (`"avx512+avx2+fma"`, `"avx2+fma"` or `"portable"`), for metrics and
/// explain.
pub fn isa_name() -> &'static str {
    Isa::detect().name()
}

/// The loops the CPU calibration times (`cost::calibrate`), run through
/// this backend's own kernel entries for the instruction set it runs
/// (`Isa::detect`): the figures it measures are then this backend's
/// speeds. Timed as `wide` loops instead, which the build's baseline
/// (SSE2) compiles to 128-bit halves, a block operation measured ~4x and a
/// read from the level-2 cache ~1.7x what the AVX2 twins take here, and
/// every stage of 10^4-10^6 positions was priced at 2-4x its time.
pub(crate) mod timed {
    use super::isa::{self, Isa};
    use super::kernels::{KeepAll, Op, LANES};
    use super::BLOCK;

    /// The sum of `xs`, as a reduction's fold runs it (block by block
    /// into `LANES` accumulators).
    pub(crate) fn sum(xs: &[f32]) -> f32 {
        let isa = Isa::detect();
        let mut acc = [0f32; LANES];
        for b in xs.chunks(BLOCK) {
            isa::fold_lanes(isa, &mut acc, b, KeepAll, 0.0, |a, x| a + x);
        }
        acc.iter().sum()
    }

    /// `reps` times `out = a * b`: one instruction of the block program.
    pub(crate) fn mul(a: &[f32], b: &[f32], out: &mut [f32], reps: usize) {
        let isa = Isa::detect();
        for _ in 0..reps {
            isa::binary(isa, Op::Slice(a), Op::Slice(b), &mut *out, |x, y| x * y);
            std::hint::black_box(&mut *out);
        }
    }

    /// `reps` times `out = exp(x)` then `out = sin(x)`: two transcendental
    /// instructions of the block program.
    pub(crate) fn transcendental(x: &[f32], out: &mut [f32], reps: usize) {
        use super::lanes::FloatLane;
        let isa = Isa::detect();
        for _ in 0..reps {
            isa::unary(isa, x, &mut *out, <f32 as FloatLane>::f_exp);
            std::hint::black_box(&mut *out);
            isa::unary(isa, x, &mut *out, <f32 as FloatLane>::f_sin);
            std::hint::black_box(&mut *out);
        }
    }
}

/// Per stage of `plan`, the passes over a block per position that its
/// block program makes (`StageProgram::passes`), for the cost model;
/// `None` for a stage it prices otherwise or a plan that does not compile.
pub(crate) fn stage_passes(plan: &PhysicalPlan) -> SmallVec<[Option<f64>; 2]> {
    match BlockProgram::compile(plan) {
        Ok(p) => p.stages.iter().map(|s| s.passes()).collect(),
        Err(_) => plan.stages.iter().map(|_| None).collect(),
    }
}

/// The compiled block program of `job`'s plan for `kind`, from the plan's
/// artifact cache; records compile time and whether it was cached.
pub(crate) fn compiled<'j>(
    job: &Job<'j>,
    kind: BackendKind,
    stats: &mut RunStats,
) -> Result<&'j BlockProgram, BackendError> {
    // The clock is read only when the program is built: a cached lookup
    // is the common case and costs less than a clock read.
    let mut built = None;
    let (prog, cached) = job
        .plan
        .artifact_ref(kind, || {
            let t = Instant::now();
            let p = BlockProgram::compile(&job.plan.plan);
            built = Some(t.elapsed());
            p
        })
        .map_err(|e| BackendError::new(kind, Phase::Compile, e.to_string()))?;
    stats.compile_cached = cached;
    if let Some(t) = built {
        stats.compile = t;
    }
    Ok(prog)
}

/// Runs a job with `driver`, filling `stats` (except `parallelism`).
pub(crate) fn execute_with(
    job: &Job<'_>,
    kind: BackendKind,
    driver: &dyn Driver,
    stats: &mut RunStats,
) -> Result<PlanOutput, BackendError> {
    let prog = compiled(job, kind, stats)?;
    // Plain loops: `collect` into a `SmallVec` (through `Result`) costs
    // more than the rest of this function on a tiny query.
    let mut hosts: SmallVec<[HostColumn<'_>; 2]> = SmallVec::new();
    for i in job.inputs {
        hosts.push(i.host(stats)?);
    }
    let mut sources: SmallVec<[ColumnRef<'_>; 2]> = SmallVec::new();
    for h in &hosts {
        sources.push(h.as_ref());
    }
    let acct = Acct::new(driver.shared());
    // No clock here: the executor times the call, and for a CPU backend
    // everything it does besides the plan is a cache lookup.
    let out = exec::run_plan(
        prog,
        &job.plan.plan,
        &sources,
        job.params,
        Isa::detect(),
        driver,
        &acct,
    )
    .map_err(|e| BackendError::new(kind, Phase::Execute, e.to_string()))?;
    stats.bytes_allocated += acct.bytes().max(output_bytes(&out));
    stats.launches = acct.tasks();
    stats.elements_skipped = acct.skipped();
    stats.algorithm = acct.last_algorithm();
    Ok(out)
}

/// The block-program backend on the calling thread.
#[derive(Debug, Default)]
pub struct CpuSimd;

impl Backend for CpuSimd {
    fn kind(&self) -> BackendKind {
        BackendKind::CpuSimd
    }

    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        BlockProgram::compile(plan)
            .map(|_| ())
            .map_err(Decline::from)
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let out = execute_with(job, BackendKind::CpuSimd, &exec::Sequential, stats)?;
        stats.parallelism = 1;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
