//! What the cost model takes from the CPU backends, which sit above it in
//! the layers of docs/architecture.md: their kernels, for the calibration
//! to time (so that its figures are the speeds those backends run at),
//! and the passes of their block programs, for the shapes to price. The
//! runtime sets them when it creates an engine, as it sets the backend
//! probe (`runtime::cpu_probe`); until then the calibration times its own
//! portable loops and the shapes price a stage's operations.

use crate::plan::PhysicalPlan;
use smallvec::SmallVec;
use std::sync::OnceLock;

/// The CPU backends' entry points the cost model uses.
#[derive(Clone, Copy, Debug)]
pub struct CpuKernels {
    /// The sum of a column, as a reduction's fold runs it.
    pub sum: fn(&[f32]) -> f32,
    /// `reps` times `out = a * b`: one instruction of the block program.
    pub mul: fn(&[f32], &[f32], &mut [f32], usize),
    /// `reps` times two transcendental instructions (`exp`, then `sin`)
    /// of the block program over the column into `out`.
    pub transcendental: fn(&[f32], &mut [f32], usize),
    /// Per stage of a plan, the passes over a block per position its
    /// block program makes (`None`: priced by its operations).
    pub stage_passes: fn(&PhysicalPlan) -> SmallVec<[Option<f64>; 2]>,
}

static KERNELS: OnceLock<CpuKernels> = OnceLock::new();

/// Makes `k` the kernels every calibration and shape of this process uses
/// (the first set stays).
pub fn set_cpu_kernels(k: CpuKernels) {
    let _ = KERNELS.set(k);
}

/// The kernels, once set.
pub(crate) fn cpu_kernels() -> Option<&'static CpuKernels> {
    KERNELS.get()
}
