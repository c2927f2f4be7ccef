//! Estimates in seconds per backend: compile (zero when cached) + upload
//! (zero when resident) + launches + max(memory, compute) + download.

use super::profile::{CpuProfile, DeviceProfile};
use crate::backend::BackendKind;
use crate::plan::{Residency, WorkloadCharacteristics};

/// One estimate, split by component (all seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Building kernels.
    pub compile: f64,
    /// Moving data both ways.
    pub transfer: f64,
    /// Fixed per-run costs (launches, pool wake-up).
    pub fixed: f64,
    /// The pass(es) over memory: max of memory time and compute time.
    pub compute: f64,
}

impl Estimate {
    /// Total seconds.
    pub fn total(&self) -> f64 {
        self.compile + self.transfer + self.fixed + self.compute
    }
}

/// Prices workloads with the current profiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostModel {
    /// The host.
    pub cpu: CpuProfile,
    /// Per device backend (`wgpu`, `cuda`), when known.
    pub devices: [Option<DeviceProfile>; 2],
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

    /// Sets the profile of a device backend.
    pub fn set_device(&mut self, kind: BackendKind, p: DeviceProfile) {
        if let Some(i) = Self::device_index(kind) {
            self.devices[i] = Some(p);
        }
    }

    /// Estimated cost of running `w` on `kind`; `compiled` says whether the
    /// backend's artifact for this plan is already built.
    pub fn estimate(&self, kind: BackendKind, w: &WorkloadCharacteristics, compiled: bool) -> Estimate {
        let n = w.elements as f64;
        let ops = w.ops_per_element as f64;
        let trans = w.transcendental_per_element as f64;
        let bytes = (w.bytes_in + w.bytes_out) as f64;
        let passes = w.stages.max(1) as f64;
        let c = &self.cpu;
        match kind {
            BackendKind::CpuScalar => Estimate {
                fixed: 1e-6,
                compute: n * (c.scalar_element + ops * c.scalar_op + trans * c.simd_transcendental),
                ..Estimate::default()
            },
            BackendKind::CpuSimd => Estimate {
                fixed: c.simd_fixed * passes,
                compile: if compiled { 0.0 } else { 5e-6 },
                compute: (bytes / c.bandwidth_one)
                    .max(n * (ops * c.simd_op + trans * c.simd_transcendental)),
                ..Estimate::default()
            },
            BackendKind::CpuParallel => {
                let t = c.threads.max(1) as f64;
                Estimate {
                    fixed: c.pool_wakeup * passes + c.simd_fixed,
                    compile: if compiled { 0.0 } else { 5e-6 },
                    compute: (bytes / c.bandwidth_all)
                        .max(n * (ops * c.simd_op + trans * c.simd_transcendental) / t),
                    ..Estimate::default()
                }
            }
            BackendKind::Wgpu | BackendKind::Cuda => {
                let d = self.device(kind);
                let resident = matches!(w.residency, Residency::Device(k) if k == kind);
                let upload = if resident {
                    0.0
                } else {
                    d.transfer_latency + w.bytes_in as f64 / d.upload_bandwidth
                };
                let download = d.transfer_latency + w.bytes_out as f64 / d.download_bandwidth;
                // Reductions and scans take a second pass; compaction two more.
                let launches = passes * if w.terminal == "collect" { 1.0 } else { 2.0 };
                Estimate {
                    compile: if compiled { 0.0 } else { d.compile },
                    transfer: upload + download,
                    fixed: launches * d.launch,
                    compute: (bytes / d.bandwidth).max(n * (ops * d.op + trans * d.transcendental)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum_of(n: u64) -> WorkloadCharacteristics {
        WorkloadCharacteristics {
            elements: n,
            bytes_in: 4 * n,
            bytes_out: 8,
            ops_per_element: 2,
            transcendental_per_element: 0,
            wide_types: false,
            stages: 1,
            terminal: "reduce",
            residency: Residency::Host,
        }
    }

    #[test]
    fn single_thread_wins_small_parallel_wins_large() {
        let m = CostModel {
            cpu: CpuProfile {
                threads: 2,
                ..CpuProfile::default()
            },
            ..CostModel::default()
        };
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
}
