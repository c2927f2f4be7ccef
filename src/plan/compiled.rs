//! A plan as cached by the engine: the optimized physical plan, what explain
//! shows about how it was made, and one lazily built artifact per backend
//! (block program, WGSL pipeline, PTX module).

use super::PhysicalPlan;
use crate::types::{BackendKind, Decline, OutputMemory};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What the optimizer did, kept for `explain`.
#[derive(Clone, Debug, Default)]
pub struct PlanReport {
    /// The operation graph before optimization, in text form.
    pub graph_text: String,
    /// Each pass that changed something, in order.
    pub passes_applied: Vec<&'static str>,
    /// Time spent building the graph.
    pub plan_time: Duration,
    /// Time spent in optimizer passes and lowering.
    pub optimize_time: Duration,
}

/// An optimized plan plus per-backend compiled artifacts.
pub struct CompiledPlan {
    /// The plan every backend executes.
    pub plan: PhysicalPlan,
    /// Structural hash of the traced query (captured values excluded).
    pub fingerprint: u64,
    /// How it was made.
    pub report: PlanReport,
    /// The plan's part of every run's workload, computed once.
    pub statics: super::PlanStatics,
    artifacts: [OnceLock<Arc<dyn Any + Send + Sync>>; BackendKind::COUNT],
    support: [OnceLock<Result<(), Decline>>; BackendKind::COUNT],
    /// Per device backend, whether the device this process remembers
    /// (from its cache directory, not opened yet) can run the plan: judged
    /// once per plan (it lowers the plan to kernel IR), not per query.
    remembered: [OnceLock<Result<(), Decline>>; BackendKind::COUNT],
    /// What the memory of the last looked-at result of a run was, per
    /// size: the next run at the size expects the same.
    outputs: OutputMemo,
}

/// What the memory of a plan's last looked-at result was, per
/// `ceil(log2(elements + 1))` ([`OutputMemory`]): bit i of `seen`, that
/// size was looked at; of `fresh`, and its memory was fresh.
#[derive(Debug, Default)]
struct OutputMemo {
    seen: AtomicU64,
    fresh: AtomicU64,
}

impl OutputMemo {
    #[inline]
    fn expected(&self, elements: u64) -> OutputMemory {
        let bit = 1u64 << size_log(elements);
        if self.seen.load(Relaxed) & bit == 0 {
            OutputMemory::Unknown
        } else if self.fresh.load(Relaxed) & bit != 0 {
            OutputMemory::Fresh
        } else {
            OutputMemory::Resident
        }
    }

    fn note(&self, elements: u64, m: OutputMemory) {
        if m == OutputMemory::Unknown || self.expected(elements) == m {
            return;
        }
        let bit = 1u64 << size_log(elements);
        if m == OutputMemory::Fresh {
            self.fresh.fetch_or(bit, Relaxed);
        } else {
            self.fresh.fetch_and(!bit, Relaxed);
        }
        self.seen.fetch_or(bit, Relaxed);
    }
}

impl std::fmt::Debug for CompiledPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPlan")
            .field("fingerprint", &format_args!("{:016x}", self.fingerprint))
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl CompiledPlan {
    /// Wraps an optimized plan.
    pub fn new(plan: PhysicalPlan, fingerprint: u64, report: PlanReport) -> CompiledPlan {
        CompiledPlan {
            statics: super::PlanStatics::of(&plan),
            plan,
            fingerprint,
            report,
            artifacts: Default::default(),
            support: Default::default(),
            remembered: Default::default(),
            outputs: OutputMemo::default(),
        }
    }

    /// The memory a run over `elements` positions is expected to write its
    /// result into: what the last run at that size got.
    #[inline]
    pub fn expected_output_memory(&self, elements: u64) -> OutputMemory {
        self.outputs.expected(elements)
    }

    /// Remembers what a run over `elements` positions wrote its result
    /// into (nothing for [`OutputMemory::Unknown`]). Two threads' runs at
    /// the same size may interleave their stores: the expectation is a
    /// guess either way, and the next run corrects it.
    pub fn note_output_memory(&self, elements: u64, m: OutputMemory) {
        self.outputs.note(elements, m);
    }

    /// The artifact of `backend`, built by `build` on first use. Returns it
    /// with `true` when it came from the cache. Two threads racing on the
    /// first use may both build; one result is kept.
    pub fn artifact<T, E>(
        &self,
        backend: BackendKind,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<(Arc<T>, bool), E>
    where
        T: Any + Send + Sync,
    {
        let (stored, cached) = self.stored(backend, build)?;
        let t = stored
            .clone()
            .downcast::<T>()
            .unwrap_or_else(|_| panic!("two artifact types for backend {backend}"));
        Ok((t, cached))
    }

    /// [`CompiledPlan::artifact`] borrowed from the plan: no reference
    /// count changes hands on the cached path (two atomic operations fewer
    /// per run of a CPU backend).
    pub fn artifact_ref<T, E>(
        &self,
        backend: BackendKind,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<(&T, bool), E>
    where
        T: Any + Send + Sync,
    {
        let (stored, cached) = self.stored(backend, build)?;
        let t = stored
            .downcast_ref::<T>()
            .unwrap_or_else(|| panic!("two artifact types for backend {backend}"));
        Ok((t, cached))
    }

    /// The stored artifact of `backend`, built on first use.
    fn stored<T, E>(
        &self,
        backend: BackendKind,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<(&Arc<dyn Any + Send + Sync>, bool), E>
    where
        T: Any + Send + Sync,
    {
        let slot = &self.artifacts[backend.index()];
        if let Some(a) = slot.get() {
            return Ok((a, true));
        }
        let built: Arc<dyn Any + Send + Sync> = {
            let _span = tracing::debug_span!(
                "computeq.compile",
                backend = backend.name(),
                fingerprint = self.fingerprint
            )
            .entered();
            Arc::new(build()?)
        };
        let _ = slot.set(built);
        Ok((slot.get().expect("just set"), false))
    }

    /// Whether `backend` accepts this plan (its answer is `supports`),
    /// asked once per plan: device backends lower the plan to answer, which
    /// must not happen per run.
    pub fn supported_by(
        &self,
        backend: BackendKind,
        supports: impl FnOnce(&PhysicalPlan) -> Result<(), Decline>,
    ) -> Result<(), Decline> {
        self.support[backend.index()]
            .get_or_init(|| supports(&self.plan))
            .clone()
    }

    /// [`CompiledPlan::supported_by`] for a device known only from the
    /// record this process read of it (not opened yet), cached apart.
    pub fn supported_by_remembered(
        &self,
        backend: BackendKind,
        supports: impl FnOnce(&PhysicalPlan) -> Result<(), Decline>,
    ) -> Result<(), Decline> {
        self.remembered[backend.index()]
            .get_or_init(|| supports(&self.plan))
            .clone()
    }

    /// Whether `backend` has built its artifact.
    pub fn has_artifact(&self, backend: BackendKind) -> bool {
        self.artifacts[backend.index()].get().is_some()
    }
}

/// `ceil(log2(n + 1))`, at most 63: the size part of a history bucket.
pub(crate) fn size_log(n: u64) -> u32 {
    (64 - n.leading_zeros()).min(63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_expects_the_output_memory_its_last_run_at_the_size_got() {
        let plan = OutputMemo::default();
        assert_eq!(plan.expected(100_000), OutputMemory::Unknown);
        plan.note(100_000, OutputMemory::Fresh);
        assert_eq!(plan.expected(100_000), OutputMemory::Fresh);
        // The same bucket of sizes (ceil(log2(n + 1)) = 17), not another.
        assert_eq!(plan.expected(131_071), OutputMemory::Fresh);
        assert_eq!(plan.expected(131_072), OutputMemory::Unknown);
        assert_eq!(plan.expected(1 << 20), OutputMemory::Unknown);
        // A run not looked at changes nothing; a recycled one does.
        plan.note(100_000, OutputMemory::Unknown);
        assert_eq!(plan.expected(100_000), OutputMemory::Fresh);
        plan.note(100_000, OutputMemory::Resident);
        assert_eq!(plan.expected(100_000), OutputMemory::Resident);
        plan.note(u64::MAX, OutputMemory::Fresh);
        assert_eq!(plan.expected(u64::MAX), OutputMemory::Fresh);
        assert_eq!(plan.expected(100_000), OutputMemory::Resident);
    }
}
