//! Estimates in seconds per stage and backend: compile (zero when cached) +
//! upload (zero when resident) + launches or pool wake-ups + max(memory,
//! compute) + extra passes (tree reductions, scans, compaction) + download
//! (zero when the result stays on the device). Output sizes of filters use
//! the plan's learned selectivity.

use super::profile::{CpuProfile, DeviceProfile};
use super::shape::{row_ns, PlanShape, StageEnd};
use crate::plan::{OutputMemory, Residency, WorkloadCharacteristics};
use crate::types::BackendKind;

/// Positions per leaf of `cpu-parallel`'s work (`backend::cpu_simd::LEAF`,
/// which a test of that backend checks against this): the unit its tasks
/// are made of.
pub(crate) const PARALLEL_LEAF: f64 = 16384.0;

/// The rows from which `cpu-parallel` partitions a sort over its threads
/// (`relational`'s `MSD_MIN`, which a test there checks against this):
/// below them it runs `cpu-simd`'s sort, and the model prices it so.
pub(crate) const PARALLEL_SORT_MIN: f64 = 1_048_576.0;

/// The largest output priced as recycled memory, without page faults:
/// glibc's largest dynamic mmap threshold (32 MiB on 64-bit systems), up to
/// which it serves a block from freed memory once a block of the size was
/// freed. jemalloc and mimalloc recycle larger blocks too; the history
/// corrects what this misprices on a given program.
pub(crate) const RECYCLED_OUTPUT_MAX: f64 = 32.0 * 1024.0 * 1024.0;

/// One estimate, split by component (all seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Building kernels.
    pub compile: f64,
    /// Moving data both ways.
    pub transfer: f64,
    /// Fixed per-run costs (launches, pool wake-up).
    pub fixed: f64,
    /// The pass(es) over memory: max of memory time and compute time,
    /// summed over stages and extra passes.
    pub compute: f64,
}

/// The largest estimate, seconds (~31 years): what a component that
/// came out infinite or not a number is priced at, so that no estimate
/// leaves the range of a `Duration` or compares as NaN.
pub const MAX_ESTIMATE: f64 = 1e9;

/// `x` within `[0, MAX_ESTIMATE]`; NaN (unknown) is priced as the most
/// expensive, so a candidate priced from a broken figure is never chosen
/// for its price.
fn bounded(x: f64) -> f64 {
    if x.is_nan() {
        MAX_ESTIMATE
    } else {
        x.clamp(0.0, MAX_ESTIMATE)
    }
}

impl Estimate {
    /// Every component within `[0, MAX_ESTIMATE]`.
    fn bounded(self) -> Estimate {
        Estimate {
            compile: bounded(self.compile),
            transfer: bounded(self.transfer),
            fixed: bounded(self.fixed),
            compute: bounded(self.compute),
        }
    }

    /// Total seconds.
    pub fn total(&self) -> f64 {
        self.compile + self.transfer + self.fixed + self.compute
    }
}

/// Selectivity assumed for a filter never measured.
pub const PRIOR_SELECTIVITY: f64 = 0.5;

/// What one estimate needs besides the profiles.
#[derive(Clone, Copy, Debug)]
pub struct EstimateInput<'a> {
    /// The run's workload (real input sizes, residency).
    pub workload: &'a WorkloadCharacteristics,
    /// The plan's stages.
    pub shape: &'a PlanShape,
    /// Whether the backend's artifact for this plan is built already.
    pub compiled: bool,
    /// Share of elements that survive the plan's filters (learned per
    /// plan; [`PRIOR_SELECTIVITY`] until measured).
    pub selectivity: f64,
    /// The result stays on the device (no download).
    pub keep_on_device: bool,
}

/// Prices workloads with the current profiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostModel {
    /// The host.
    pub cpu: CpuProfile,
    /// Per device backend (`wgpu`, `cuda`), when known.
    pub devices: [Option<DeviceProfile>; 2],
}

/// Simple operations per position and digit pass of a device sort's
/// stable ranking (eight one-bit splits of about eight operations each:
/// shared loads and stores, the bit, the split position, a share of the
/// workgroup scan). A model constant: the history corrects it.
const DEVICE_RANK_OPS: f64 = 64.0;

/// Simple operations per step of a device join's binary search (the
/// step's load depends on the last; a share of the divergence). A model
/// constant: the history corrects it.
const DEVICE_SEARCH_OPS: f64 = 8.0;

/// Simple operations per position of a device scan or compaction's
/// workgroup scan (its loads and stores in workgroup memory, a share of
/// the barriers and of the spine). A model constant.
const DEVICE_SCAN_OPS: f64 = 9.0;

/// Simple operations per increment in workgroup memory (a histogram's
/// count per key). A model constant.
const DEVICE_ATOMIC_OPS: f64 = 3.0;

/// Simple operations per position of each aggregate beyond a reduction's
/// first (its accumulator, its share of a workgroup reduction). Priced
/// with the other aggregates' one operation each, lavapipe's `stats` ran
/// at 4-10x its estimates. A model constant.
const DEVICE_REDUCTION_OPS: f64 = 2.5;

/// Seconds of one operation in workgroup memory on a software device
/// (lavapipe, llvmpipe): there workgroup memory and the barriers between
/// a ranking's splits run as CPU code, one invocation after another (~200
/// ns per position and digit pass of a sort, 64 such operations), at a
/// cost of its own, not a multiple of the simple operation the device
/// calibration times (`DeviceProfile::op`, whose measured 0.05-0.5 ns it
/// does not follow). Priced at one simple operation, lavapipe's sorts and
/// groups of 10^6 rows ran at 5-14x their estimates (2026-12-01); at 40
/// simple operations, with `op` at 0.4-0.5 ns on the EPYC VM, the
/// workloads that use workgroup memory (sorts, groups, joins, histograms,
/// scans, compactions, `stats`) ran at 0.13-0.5x their estimates, median
/// ~0.2x, in three `selector_eval` runs (2026-12-03, on Vulkan and GL).
/// A model constant: the history corrects what is left.
const SOFTWARE_WORKGROUP_OP: f64 = 3e-9;

/// Seconds per position of a compaction's ranking and write of its
/// survivors on one core of `cpu-simd` and `cpu-parallel` (the positions
/// a filter keeps, written one by one). Priced at a scan's carry, filtered
/// collects of 10^5-10^7 ran at ~2x their estimates (1.1-1.4 ns per
/// position here). A model constant: the history corrects it.
const COMPACT_ELEMENT: f64 = 1.0e-9;

/// The work of one run, stage by stage, computed once and priced per
/// backend ([`CostModel::work`], [`CostModel::estimate_work`]).
#[derive(Clone, Debug, Default)]
pub struct Work {
    stages: smallvec::SmallVec<[StageWork; 2]>,
}

/// Work of one stage run, as counts.
#[derive(Clone, Debug)]
struct StageWork {
    /// Positions evaluated.
    n: f64,
    /// Bytes read.
    read: f64,
    /// Bytes written.
    write: f64,
    /// Element operations (simple, transcendental) over all positions, as
    /// the devices price them (with a join's build rows at `build_ops`
    /// each, the CPU backends' nanoseconds taken as a device's operations:
    /// an insert of the key's word and the row kept, either way).
    ops: f64,
    /// `ops` as the reference interpreter runs them.
    scalar_ops: f64,
    /// Seconds of one core of a relational stage's per-row work (its
    /// positions' and its build rows').
    rows: f64,
    /// `cpu-parallel`'s time for `rows` against one core's.
    row_parallel: f64,
    /// A top-k (see `StageShape::fetch`).
    fetch: bool,
    /// `ops` as `cpu-simd` and `cpu-parallel` run them.
    simd_ops: f64,
    trans: f64,
    end: StageEnd,
    /// Lanes per vector relative to 32-bit types (0.5 for a 64-bit stage).
    lanes: f64,
    /// A device sort's passes, its bytes beyond the store, the rows its
    /// ranking passes rank (passes times rows sorted), and a join's search
    /// steps (over its probe rows).
    device_sort: Option<(f64, f64, f64, f64)>,
    /// Increments in workgroup memory (a count per key's), over all
    /// positions.
    atomics: f64,
    /// Workgroup reductions beyond the first, over all positions.
    extra_reductions: f64,
    /// Bytes of a join's build side read (from the query's inputs).
    build_read: f64,
}

fn stage_work(e: &EstimateInput<'_>) -> Work {
    let mut out: smallvec::SmallVec<[StageWork; 2]> = smallvec::SmallVec::new();
    let elements = e.workload.elements as f64;
    let build = e.workload.build_elements as f64;
    let sel = e.selectivity.clamp(0.0, 1.0);
    for s in &e.shape.stages {
        let n = match s.reads_stage.and_then(|j| out.get(j)) {
            Some(prev) if prev.end == StageEnd::Compact => prev.n * sel,
            Some(prev) if prev.fetch => prev.n.min(super::shape::TOP_K_ROWS),
            Some(prev) => prev.n,
            None => elements,
        };
        let outputs = match s.end {
            StageEnd::Reduce => 0.0,
            StageEnd::Compact => n * sel,
            StageEnd::Store | StageEnd::Scan => n,
        };
        let build_read = build * s.build_bytes;
        out.push(StageWork {
            n,
            read: n * (s.source_bytes + s.stage_bytes) + build_read,
            write: outputs * s.out_bytes,
            ops: n * s.ops + build * s.build_ops,
            scalar_ops: n * s.scalar_ops,
            rows: (n * s.row_ops + build * s.build_ops) * 1e-9,
            row_parallel: if n >= s.row_parallel_from {
                s.row_parallel
            } else {
                1.0
            },
            fetch: s.fetch,
            simd_ops: n * s.simd_ops,
            trans: n * s.transcendental,
            end: s.end,
            lanes: if s.wide { 0.5 } else { 1.0 },
            device_sort: s.device_sort.map(|d| {
                // A join sorts its build side's rows, not the probe's.
                let sorted = if d.on_build { build } else { n };
                (
                    d.passes,
                    sorted * (d.passes * d.pass_bytes + d.other_bytes) + n * d.probe_bytes,
                    d.ranked * sorted,
                    // Two binary searches of the sorted build words.
                    n * d.searches * build.max(2.0).log2(),
                )
            }),
            atomics: n * s.atomics,
            extra_reductions: n * s.extra_reductions,
            build_read,
        });
    }
    Work { stages: out }
}

impl CostModel {
    fn device_index(kind: BackendKind) -> Option<usize> {
        match kind {
            BackendKind::Wgpu => Some(0),
            BackendKind::Cuda => Some(1),
            _ => None,
        }
    }

    /// The profile of a device backend (its prior when never measured).
    pub fn device(&self, kind: BackendKind) -> DeviceProfile {
        Self::device_index(kind)
            .and_then(|i| self.devices[i].clone())
            .unwrap_or_default()
    }

    fn device_ref(&self, kind: BackendKind) -> Option<&DeviceProfile> {
        Self::device_index(kind).and_then(|i| self.devices[i].as_ref())
    }

    /// Sets the profile of a device backend; implausible figures (not
    /// finite, zero bandwidths, ...) are replaced by the prior's, with a
    /// warning.
    pub fn set_device(&mut self, kind: BackendKind, p: DeviceProfile) {
        if let Some(i) = Self::device_index(kind) {
            let (p, bad) = p.sanitized();
            if !bad.is_empty() {
                tracing::warn!(backend = %kind, figures = ?bad, "computeq: implausible device profile figures replaced by priors");
            }
            self.devices[i] = Some(p);
        }
    }

    /// Sets the CPU profile; implausible figures are replaced by the
    /// prior's, with a warning.
    pub fn set_cpu(&mut self, p: CpuProfile) {
        let (p, bad) = p.sanitized();
        if !bad.is_empty() {
            tracing::warn!(figures = ?bad, "computeq: implausible CPU profile figures replaced by priors");
        }
        self.cpu = p;
    }

    /// Estimated cost of running `w` on `kind` from the workload alone
    /// (one stage, prior selectivity); `compiled` says whether the
    /// backend's artifact for this plan is already built.
    pub fn estimate(
        &self,
        kind: BackendKind,
        w: &WorkloadCharacteristics,
        compiled: bool,
    ) -> Estimate {
        let shape = PlanShape::from_workload(w);
        self.estimate_with(
            kind,
            &EstimateInput {
                workload: w,
                shape: &shape,
                compiled,
                selectivity: PRIOR_SELECTIVITY,
                keep_on_device: w.output_on_device,
            },
        )
    }

    /// Estimated cost of running the plan described by `e` on `kind`.
    pub fn estimate_with(&self, kind: BackendKind, e: &EstimateInput<'_>) -> Estimate {
        self.estimate_work(kind, e, &stage_work(e))
    }

    /// The work of the run described by `e` (for pricing it on several
    /// backends with [`CostModel::estimate_work`]).
    pub fn work(&self, e: &EstimateInput<'_>) -> Work {
        stage_work(e)
    }

    /// Estimated cost of `work` (from [`CostModel::work`] of the same `e`)
    /// on `kind`. Every component is finite, within `[0, MAX_ESTIMATE]`,
    /// whatever the profiles hold (the public fields may be set to
    /// anything).
    pub fn estimate_work(&self, kind: BackendKind, e: &EstimateInput<'_>, work: &Work) -> Estimate {
        self.estimate_unbounded(kind, e, work).bounded()
    }

    fn estimate_unbounded(
        &self,
        kind: BackendKind,
        e: &EstimateInput<'_>,
        work: &Work,
    ) -> Estimate {
        let work = &work.stages;
        let c = &self.cpu;
        // Three tiers: a working set in one core's level-2 cache (each
        // core's, when all threads share it), in the last-level cache, or
        // in DRAM.
        let threads = c.threads.max(1) as f64;
        let bw = |bytes: f64, all: bool| {
            let near = if all {
                c.near_bytes * threads
            } else {
                c.near_bytes
            };
            match (bytes <= near, bytes <= c.cache_bytes, all) {
                (true, _, false) => c.near_bandwidth_one,
                (true, _, true) => c.near_bandwidth_all,
                (false, true, false) => c.cache_bandwidth_one,
                (false, true, true) => c.cache_bandwidth_all,
                (false, false, false) => c.bandwidth_one,
                (false, false, true) => c.bandwidth_all,
            }
        };
        // Fresh output pages are faulted in on first write. An output the
        // allocator recycles (a freed block of the size, as in a loop of
        // queries) takes no faults. What the plan's last run at the size
        // wrote into is expected ([`OutputMemory`]); before one was seen,
        // glibc's rule: it serves blocks up to its largest dynamic mmap
        // threshold from freed memory once one such block was freed, and
        // beyond it every output is a fresh mapping.
        let fresh = |bytes: f64| match e.workload.output_memory {
            OutputMemory::Fresh => true,
            OutputMemory::Resident => false,
            OutputMemory::Unknown => bytes > RECYCLED_OUTPUT_MAX,
        };
        let fault = |bytes: f64| {
            if fresh(bytes) {
                bytes / c.fresh_write_bandwidth
            } else {
                0.0
            }
        };
        let cpu_compile = if e.compiled { 0.0 } else { c.simd_compile };
        // The bytes the first stage reads from the query's inputs.
        // A join's build side is read from the inputs too.
        let source_bytes = work
            .first()
            .map_or(0.0, |s| e.shape.stages[0].source_bytes * s.n)
            + work.iter().map(|s| s.build_read).sum::<f64>();
        // A device's profile, else the prior's.
        let prior = DeviceProfile::default();
        let device = |k: BackendKind| self.device_ref(k).unwrap_or(&prior);
        // A CPU backend reads an input resident on a device after
        // downloading it (`Input::host`): priced at that device's download
        // bandwidth. Without it, a device-resident reduction of 10^7 `f32`
        // was priced at 0.05-0.1x its time on the CPU backends, which the
        // selector then explored before the device.
        let from_device = match e.workload.residency {
            Residency::Device(k) if !kind.is_device() => {
                device(k).download_seconds(source_bytes, self.cpu.fresh_write_bandwidth)
            }
            _ => 0.0,
        };
        match kind {
            BackendKind::CpuScalar => {
                let compute = work
                    .iter()
                    .map(|s| {
                        s.n * c.scalar_element
                            + s.scalar_ops * c.scalar_op
                            + s.rows * row_ns::SCALAR
                            + s.trans * c.scalar_transcendental
                            + fault(s.write)
                    })
                    .sum();
                Estimate {
                    fixed: c.scalar_fixed,
                    compute,
                    transfer: from_device,
                    ..Estimate::default()
                }
            }
            BackendKind::CpuSimd => {
                let mut compute = 0.0;
                for s in work {
                    let bytes = s.read + s.write;
                    // A compaction's survivors are ranked and written one
                    // by one, like a scan's elements (priced at a vector
                    // operation per element, filtered collects ran at ~3x
                    // their estimate).
                    let extra = match s.end {
                        StageEnd::Compact => s.n * COMPACT_ELEMENT,
                        StageEnd::Scan => s.n * c.scan_element / s.lanes,
                        _ => 0.0,
                    };
                    let cpu = (s.simd_ops * c.simd_op + s.trans * c.simd_transcendental) / s.lanes
                        + extra
                        + s.rows;
                    compute += (bytes / bw(bytes, false)).max(cpu) + fault(s.write);
                }
                Estimate {
                    compile: cpu_compile,
                    fixed: c.simd_fixed * work.len() as f64,
                    compute,
                    transfer: from_device,
                }
            }
            BackendKind::CpuParallel => {
                let mut compute = 0.0;
                let mut wakeups = 0.0;
                // Each task sets up its own state, as a `cpu-simd` stage
                // run does once.
                let mut setups = 0.0;
                for s in work {
                    // Tasks are runs of whole leaves: a stage of one leaf
                    // is one task, run by the calling thread with no pool
                    // to wake, and a few leaves keep as many threads busy.
                    let leaves = (s.n / PARALLEL_LEAF).ceil().max(1.0);
                    let t = threads.min(leaves);
                    let pooled = t > 1.0;
                    let bytes = s.read + s.write;
                    // Compaction counts survivors first and scans compute
                    // leaf totals first: one more read and one more join.
                    let (passes, reread): (f64, f64) = match s.end {
                        StageEnd::Compact | StageEnd::Scan => (2.0, s.read),
                        _ => (1.0, 0.0),
                    };
                    let extra = match s.end {
                        StageEnd::Compact => s.n * COMPACT_ELEMENT,
                        StageEnd::Scan => s.n * c.scan_element / s.lanes,
                        _ => 0.0,
                    };
                    let cpu = ((s.simd_ops * passes.min(1.5) * c.simd_op
                        + s.trans * c.simd_transcendental)
                        / s.lanes
                        + extra)
                        / t
                        // One thread in the pool runs the rows as one
                        // core does, whatever the stage's parallel factor.
                        + s.rows * if threads > 1.0 { s.row_parallel } else { 1.0 };
                    let moved = bytes + reread;
                    // Faults of several threads overlap in part; a fresh
                    // output under 8 MiB is faulted in by one call before
                    // the threads write (`Column::for_output`).
                    let faults = if s.write < crate::types::HUGE_PAGE_MIN_BYTES as f64 {
                        fault(s.write)
                    } else {
                        fault(s.write) / t.sqrt()
                    };
                    compute += (moved / bw(bytes, pooled)).max(cpu) + faults;
                    if pooled {
                        wakeups += passes;
                    }
                    setups += t * passes;
                }
                Estimate {
                    compile: cpu_compile,
                    fixed: c.pool_wakeup * wakeups
                        + c.simd_fixed * setups
                        + c.parallel_fixed * work.len() as f64,
                    compute,
                    transfer: from_device,
                }
            }
            BackendKind::Wgpu | BackendKind::Cuda => {
                let d = device(kind);
                let w = e.workload;
                let resident = matches!(w.residency, Residency::Device(k) if k == kind);
                let upload = if resident || source_bytes == 0.0 {
                    0.0
                } else {
                    d.transfer_latency + source_bytes / d.upload_bandwidth
                };
                let last = work.last();
                let result_bytes = match last {
                    Some(s) if s.end == StageEnd::Reduce => 8.0,
                    Some(s) => s.write,
                    None => 0.0,
                };
                let kept = e.keep_on_device && last.is_some_and(|s| s.end != StageEnd::Reduce);
                let download = if kept {
                    0.0
                } else {
                    d.download_seconds(result_bytes, self.cpu.fresh_write_bandwidth)
                };
                let mut launches = 0.0;
                let mut compute = 0.0;
                // A workgroup operation: a simple one on hardware, its own
                // cost on a software device.
                let workgroup_op = if d.software {
                    SOFTWARE_WORKGROUP_OP
                } else {
                    d.op
                };
                for s in work {
                    // A reduction takes two launches whatever its length
                    // (the workgroups' partials, then one workgroup that
                    // combines them: `codegen`'s kernel plan, on wgpu and
                    // CUDA alike); a scan or compaction three launches and
                    // a second read.
                    let (l, reread) = match (s.end, s.device_sort) {
                        // A radix sort: its words, three launches per digit
                        // (count, spine, scatter; a top-k's selection two:
                        // count, pick), the final store; each pass
                        // moves the words (and rows) again.
                        (_, Some((passes, bytes, _, _))) => (2.0 + 3.0 * passes, bytes),
                        (StageEnd::Reduce, _) => (2.0, 0.0),
                        (StageEnd::Store, _) => (1.0, 0.0),
                        (StageEnd::Compact | StageEnd::Scan, _) => (3.0, s.read),
                    };
                    launches += l;
                    let bytes = s.read + s.write + reread;
                    // A sort's ranking: eight one-bit splits per digit,
                    // each a few shared-memory operations and a share of a
                    // workgroup scan per position.
                    // A join's searches: a few operations per step, each a
                    // dependent load. A scan or compaction: each position
                    // through a workgroup scan. A count per key: an
                    // increment in workgroup memory per position.
                    let (rank, search) = s
                        .device_sort
                        .map_or((0.0, 0.0), |(_, _, ranked, steps)| (ranked, steps));
                    let scanned = match s.end {
                        StageEnd::Compact | StageEnd::Scan => s.n,
                        _ => 0.0,
                    };
                    let workgroup = (rank * DEVICE_RANK_OPS
                        + search * DEVICE_SEARCH_OPS
                        + scanned * DEVICE_SCAN_OPS
                        + s.atomics * DEVICE_ATOMIC_OPS
                        + s.extra_reductions * DEVICE_REDUCTION_OPS)
                        * workgroup_op;
                    compute += (bytes / d.bandwidth)
                        .max(s.ops * d.op + workgroup + s.trans * d.transcendental);
                }
                Estimate {
                    compile: if e.compiled { 0.0 } else { d.compile },
                    transfer: upload + download,
                    // Each dispatch, and the run's own wait for its result.
                    fixed: launches * d.launch + d.run_fixed,
                    compute,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::shape::StageShape;

    fn sum_of(n: u64) -> WorkloadCharacteristics {
        WorkloadCharacteristics {
            elements: n,
            build_elements: 0,
            bytes_in: 4 * n,
            bytes_out: 8,
            ops_per_element: 2,
            transcendental_per_element: 0,
            wide_types: false,
            stages: 1,
            terminal: "reduce",
            residency: Residency::Host,
            output_on_device: false,
            output_memory: Default::default(),
        }
    }

    fn model() -> CostModel {
        CostModel {
            cpu: CpuProfile {
                threads: 2,
                ..CpuProfile::default()
            },
            ..CostModel::default()
        }
    }

    #[test]
    fn single_thread_wins_small_parallel_wins_large() {
        let m = model();
        let small = sum_of(10_000);
        let large = sum_of(10_000_000);
        let t = |k, w| m.estimate(k, w, true).total();
        assert!(t(BackendKind::CpuSimd, &small) < t(BackendKind::CpuParallel, &small));
        assert!(t(BackendKind::CpuParallel, &large) < t(BackendKind::CpuSimd, &large));
        assert!(t(BackendKind::CpuSimd, &large) < t(BackendKind::CpuScalar, &large));
    }

    #[test]
    fn residency_removes_the_upload() {
        let m = CostModel::default();
        let mut w = sum_of(1 << 24);
        let host = m.estimate(BackendKind::Wgpu, &w, true);
        w.residency = Residency::Device(BackendKind::Wgpu);
        let dev = m.estimate(BackendKind::Wgpu, &w, true);
        assert!(dev.transfer < host.transfer);
        assert!(host.transfer - dev.transfer > (4 << 24) as f64 / 12e9 * 0.9);
    }

    #[test]
    fn a_cpu_backend_pays_the_download_of_a_resident_input() {
        let m = CostModel::default();
        let mut w = sum_of(1 << 24);
        let d = DeviceProfile::default();
        // 64 MiB, past what the allocator recycles: the copy, then the
        // fresh pages' first touch (the download's rate not measured).
        let bytes = (4u64 << 24) as f64;
        let copy = d.transfer_latency + bytes / d.download_bandwidth;
        let download = copy + bytes / m.cpu.fresh_write_bandwidth;
        assert!((d.download_seconds(bytes, m.cpu.fresh_write_bandwidth) - download).abs() < 1e-12);
        for k in [
            BackendKind::CpuScalar,
            BackendKind::CpuSimd,
            BackendKind::CpuParallel,
        ] {
            w.residency = Residency::Host;
            let host = m.estimate(k, &w, true);
            assert_eq!(host.transfer, 0.0, "{k}");
            w.residency = Residency::Device(BackendKind::Wgpu);
            let dev = m.estimate(k, &w, true);
            assert!(
                (dev.transfer - download).abs() < download * 1e-9,
                "{k}: {dev:?}"
            );
            assert!((dev.total() - host.total() - download).abs() < download * 1e-6);
        }
    }

    #[test]
    fn compile_counts_only_when_not_cached() {
        let m = CostModel::default();
        let w = sum_of(1000);
        for k in [BackendKind::CpuSimd, BackendKind::Wgpu] {
            assert!(m.estimate(k, &w, false).compile > 0.0);
            assert_eq!(m.estimate(k, &w, true).compile, 0.0);
        }
    }

    fn compaction(n: u64) -> (WorkloadCharacteristics, PlanShape) {
        let mut w = sum_of(n);
        w.terminal = "collect";
        w.bytes_out = 4 * n;
        let shape = PlanShape {
            stages: smallvec::smallvec![StageShape {
                ops: 2.0,
                scalar_ops: 2.0,
                row_ops: 0.0,
                row_parallel: 1.0,
                row_parallel_from: 0.0,
                fetch: false,
                simd_ops: 2.0,
                transcendental: 0.0,
                source_bytes: 4.0,
                stage_bytes: 0.0,
                reads_stage: None,
                out_bytes: 4.0,
                end: StageEnd::Compact,
                wide: false,
                device_sort: None,
                atomics: 0.0,
                extra_reductions: 0.0,
                build_bytes: 0.0,
                build_ops: 0.0,
            }],
        };
        (w, shape)
    }

    #[test]
    fn only_outputs_past_what_the_allocator_recycles_pay_page_faults() {
        let slow_faults = |m: &CostModel| {
            let mut m = m.clone();
            m.cpu.fresh_write_bandwidth = 1e6;
            m
        };
        let m = model();
        for (n, faults) in [(1u64 << 20, false), (1 << 24, true)] {
            let (w, shape) = compaction(n);
            let e = EstimateInput {
                workload: &w,
                shape: &shape,
                compiled: true,
                selectivity: 1.0,
                keep_on_device: false,
            };
            for k in [BackendKind::CpuSimd, BackendKind::CpuParallel] {
                let plain = m.estimate_with(k, &e).total();
                let slow = slow_faults(&m).estimate_with(k, &e).total();
                assert_eq!(slow > plain, faults, "{k} at {n}: {plain} vs {slow}");
            }
        }
    }

    #[test]
    fn selectivity_scales_the_output_and_download() {
        let m = model();
        // An output past what the allocator recycles: its pages are priced.
        let (w, shape) = compaction(1 << 24);
        let at = |sel: f64, k| {
            m.estimate_with(
                k,
                &EstimateInput {
                    workload: &w,
                    shape: &shape,
                    compiled: true,
                    selectivity: sel,
                    keep_on_device: false,
                },
            )
        };
        assert!(at(0.01, BackendKind::CpuSimd).total() < at(1.0, BackendKind::CpuSimd).total());
        assert!(at(0.01, BackendKind::Wgpu).transfer < at(1.0, BackendKind::Wgpu).transfer);
    }

    /// A compiled run of `shape` over `w` whose filters keep every
    /// position and whose result comes back.
    fn all_kept<'a>(w: &'a WorkloadCharacteristics, shape: &'a PlanShape) -> EstimateInput<'a> {
        EstimateInput {
            workload: w,
            shape,
            compiled: true,
            selectivity: 1.0,
            keep_on_device: false,
        }
    }

    #[test]
    fn a_software_device_pays_for_its_workgroup_scans() {
        let (w, shape) = compaction(1 << 22);
        let d = DeviceProfile::default();
        let on_with = |software: bool, op: f64| {
            let mut m = model();
            m.devices[0] = Some(DeviceProfile {
                software,
                op,
                ..DeviceProfile::default()
            });
            m.estimate_with(BackendKind::Wgpu, &all_kept(&w, &shape))
                .compute
        };
        // Each position through a workgroup scan: on a software device,
        // workgroup memory and barriers at SOFTWARE_WORKGROUP_OP each,
        // whatever its simple operation costs; on hardware at one simple
        // operation each.
        let on = |software: bool| on_with(software, d.op);
        let n = (1u64 << 22) as f64;
        let (hw, sw) = (on(false), on(true));
        assert!(hw >= n * DEVICE_SCAN_OPS * d.op, "{hw}");
        assert!(
            sw >= n * DEVICE_SCAN_OPS * SOFTWARE_WORKGROUP_OP,
            "{sw} against {hw}"
        );
        assert!(sw > hw, "{sw} against {hw}");
        // A software device's workgroup operations do not follow its
        // simple operation's timed speed (0.05-0.5 ns on one machine).
        let fast = on_with(true, d.op / 100.0);
        assert!(
            fast >= n * DEVICE_SCAN_OPS * SOFTWARE_WORKGROUP_OP,
            "{fast}"
        );
    }

    #[test]
    fn a_result_kept_on_the_device_is_not_downloaded() {
        let m = model();
        let (w, shape) = compaction(1 << 22);
        let est = |keep| {
            m.estimate_with(
                BackendKind::Wgpu,
                &EstimateInput {
                    workload: &w,
                    shape: &shape,
                    compiled: true,
                    selectivity: 1.0,
                    keep_on_device: keep,
                },
            )
        };
        let d = m.device(BackendKind::Wgpu);
        let saved = est(false).transfer - est(true).transfer;
        assert!(
            (saved - (d.transfer_latency + (4u64 << 22) as f64 / d.download_bandwidth)).abs()
                < 1e-9
        );
    }

    #[test]
    fn a_second_stage_reads_the_survivors_only() {
        let m = model();
        let (w, mut shape) = compaction(1 << 22);
        shape.stages.push(StageShape {
            ops: 1.0,
            scalar_ops: 1.0,
            row_ops: 0.0,
            row_parallel: 1.0,
            row_parallel_from: 0.0,
            fetch: false,
            simd_ops: 1.0,
            transcendental: 0.0,
            source_bytes: 0.0,
            stage_bytes: 4.0,
            reads_stage: Some(0),
            out_bytes: 0.0,
            end: StageEnd::Reduce,
            wide: false,
            device_sort: None,
            atomics: 0.0,
            extra_reductions: 0.0,
            build_bytes: 0.0,
            build_ops: 0.0,
        });
        let at = |sel: f64| {
            m.estimate_with(
                BackendKind::CpuSimd,
                &EstimateInput {
                    workload: &w,
                    shape: &shape,
                    compiled: true,
                    selectivity: sel,
                    keep_on_device: false,
                },
            )
            .total()
        };
        assert!(at(0.1) < at(0.9));
    }

    #[test]
    fn a_device_sort_pays_its_launches_and_passes() {
        let m = model();
        let (w, mut shape) = compaction(1 << 22);
        shape.stages[0].end = StageEnd::Store;
        let price = |shape: &PlanShape| {
            m.estimate_with(
                BackendKind::Wgpu,
                &EstimateInput {
                    workload: &w,
                    shape,
                    compiled: true,
                    selectivity: 1.0,
                    keep_on_device: false,
                },
            )
        };
        let store = price(&shape);
        shape.stages[0].device_sort = Some(crate::cost::shape::DeviceSort {
            passes: 4.0,
            pass_bytes: 12.0,
            other_bytes: 4.0,
            ranked: 4.0,
            on_build: false,
            probe_bytes: 0.0,
            searches: 0.0,
        });
        let sort = price(&shape);
        let d = m.device(BackendKind::Wgpu);
        assert!((sort.fixed - 14.0 * d.launch).abs() < 1e-12);
        assert!((store.fixed - d.launch).abs() < 1e-12);
        assert!(sort.compute > store.compute);
    }

    #[test]
    fn a_device_run_pays_its_wait_once_whatever_its_launches() {
        let mut m = model();
        let w = sum_of(100);
        let before = m.estimate(BackendKind::Wgpu, &w, true);
        m.devices[0] = Some(DeviceProfile {
            run_fixed: 120e-6,
            ..m.device(BackendKind::Wgpu)
        });
        let after = m.estimate(BackendKind::Wgpu, &w, true);
        assert!(
            (after.fixed - before.fixed - 120e-6).abs() < 1e-12,
            "{after:?}"
        );
        assert_eq!(after.transfer, before.transfer);
        assert_eq!(after.compute, before.compute);
        // Once per run, not per launch: a reduction launches twice, of
        // 100 elements or of 2^25 (the kernel plan's partials and their
        // combine; it was priced as a tree of one launch per 256x shrink,
        // four for 2^25, where wgpu ran two).
        let d = m.device(BackendKind::Wgpu);
        for n in [100, 1 << 25] {
            let e = m.estimate(BackendKind::Wgpu, &sum_of(n), true);
            assert!((e.fixed - (2.0 * d.launch + 120e-6)).abs() < 1e-12, "{e:?}");
        }
    }

    #[test]
    fn a_join_is_priced_by_its_build_sides_rows_and_its_probes() {
        use crate::prelude::*;
        let m = model();
        let (xs, ys) = (vec![1u32; 16], vec![1u32; 16]);
        let plan = xs
            .compute()
            .join(ys.compute(), |x| x, |y| y)
            .explain()
            .collect::<Vec<_>>()
            .plan;
        let shape = PlanShape::of(&plan);
        let statics = crate::plan::PlanStatics::of(&plan);
        let price = |kind: BackendKind, probe: usize, build: usize| {
            let (p, b) = (vec![1u32; probe], vec![1u32; build]);
            use crate::types::{ColumnRef, Input};
            let inputs = [
                Input::Host(ColumnRef::U32(&p)),
                Input::Host(ColumnRef::U32(&b)),
            ];
            let w = WorkloadCharacteristics::with_statics(&statics, &inputs);
            assert_eq!((w.elements, w.build_elements), (probe as u64, build as u64));
            m.estimate_with(
                kind,
                &EstimateInput {
                    workload: &w,
                    shape: &shape,
                    compiled: true,
                    selectivity: 1.0,
                    keep_on_device: false,
                },
            )
            .total()
        };
        for kind in [
            BackendKind::CpuScalar,
            BackendKind::CpuSimd,
            BackendKind::Wgpu,
        ] {
            // The build side's rows cost: hashed on the CPU, sorted with
            // their digit passes and uploaded on a device.
            let (small, large) = (price(kind, 1 << 16, 1 << 8), price(kind, 1 << 16, 1 << 22));
            assert!(large > 1.5 * small, "{kind:?}: {small} then {large}");
            // A large build side with few probe rows is priced by the
            // build side: not as cheap as its probes alone.
            assert!(
                price(kind, 1 << 8, 1 << 22) > 0.5 * large,
                "{kind:?}: {} against {large}",
                price(kind, 1 << 8, 1 << 22)
            );
        }
    }

    #[test]
    fn a_sorts_rows_are_one_cores_work_on_every_cpu_backend() {
        use crate::prelude::*;
        let m = model();
        let plan = vec![1u32; 16]
            .compute()
            .sort()
            .explain()
            .collect::<Vec<_>>()
            .plan;
        let shape = PlanShape::of(&plan);
        let statics = crate::plan::PlanStatics::of(&plan);
        let n = 1usize << 20;
        let xs = vec![1u32; n];
        let inputs = [crate::types::Input::Host(crate::types::ColumnRef::U32(&xs))];
        let w = WorkloadCharacteristics::with_statics(&statics, &inputs);
        let price = |kind| m.estimate_with(kind, &all_kept(&w, &shape)).compute;
        // Four radix passes per row, scalar code on every CPU backend: not
        // divided by the lanes; on the pool, as long as it measured.
        let rows = n as f64 * 4.0 * row_ns::SORT_PASS * 1e-9;
        let (scalar, simd, parallel) = (
            price(BackendKind::CpuScalar),
            price(BackendKind::CpuSimd),
            price(BackendKind::CpuParallel),
        );
        assert!(
            simd >= rows && scalar >= rows,
            "{scalar} {simd} against {rows}"
        );
        assert!(simd < 2.0 * rows, "{simd} against {rows}");
        assert!(
            parallel >= rows * row_ns::PARALLEL_SORT,
            "{parallel} against {rows}"
        );
        // Below the partition's threshold `cpu-parallel` sorts as
        // `cpu-simd` does, on one core: the same price for the rows.
        let n = PARALLEL_SORT_MIN as usize / 2;
        let xs = vec![1u32; n];
        let inputs = [crate::types::Input::Host(crate::types::ColumnRef::U32(&xs))];
        let w = WorkloadCharacteristics::with_statics(&statics, &inputs);
        let price = |kind| m.estimate_with(kind, &all_kept(&w, &shape)).compute;
        let rows = n as f64 * 4.0 * row_ns::SORT_PASS * 1e-9;
        let (simd, parallel) = (price(BackendKind::CpuSimd), price(BackendKind::CpuParallel));
        assert!(
            parallel >= rows && parallel <= 1.05 * simd,
            "{parallel} against {simd} ({rows} for the rows)"
        );
    }

    #[test]
    fn broken_profiles_price_finitely() {
        // Zero, negative and non-finite figures, as a hand-edited or
        // corrupt profile could carry them, set straight into the public
        // fields (no sanitizing on that path).
        let broken = |v: f64| CostModel {
            cpu: CpuProfile {
                bandwidth_one: v,
                bandwidth_all: v,
                cache_bandwidth_one: v,
                cache_bandwidth_all: v,
                fresh_write_bandwidth: v,
                simd_op: -v,
                pool_wakeup: v,
                ..CpuProfile::default()
            },
            devices: [
                Some(DeviceProfile {
                    upload_bandwidth: v,
                    download_bandwidth: v,
                    bandwidth: v,
                    launch: -v,
                    ..DeviceProfile::default()
                }),
                None,
            ],
        };
        for v in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let m = broken(v);
            for n in [0, 1000, 1 << 24] {
                for k in BackendKind::ALL {
                    let e = m.estimate(k, &sum_of(n), false);
                    for x in [e.compile, e.transfer, e.fixed, e.compute, e.total()] {
                        assert!(
                            (0.0..=4.0 * MAX_ESTIMATE).contains(&x),
                            "{v} {n} {k}: {e:?}"
                        );
                    }
                }
            }
        }
        // Set through the setters, the figures are replaced by priors.
        let mut m = CostModel::default();
        m.set_cpu(broken(0.0).cpu);
        m.set_device(BackendKind::Wgpu, broken(0.0).devices[0].clone().unwrap());
        assert_eq!(m.cpu.bandwidth_one, CpuProfile::default().bandwidth_one);
        assert_eq!(
            m.device(BackendKind::Wgpu).upload_bandwidth,
            DeviceProfile::default().upload_bandwidth
        );
    }
}
