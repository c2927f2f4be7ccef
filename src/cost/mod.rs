//! The cost model: estimated seconds for running a workload on a backend,
//! from device profiles. The built-in profiles are priors (the measured
//! facts of docs/architecture.md and common PCIe/launch figures) until calibration
//! replaces them with measurements of this machine ([`calibrate`]).
//!
//! Owns profiles, their calibration and persistence, and pricing; it never
//! chooses a backend (that is `select`) and never runs a query.

pub(crate) mod background;
pub mod cache_file;
pub mod calibrate;
mod kernels;
mod model;
mod profile;
mod shape;

pub use calibrate::{
    calibrate_full_into, device_profile, recall_device, remember_device, set_backend_probe,
    Calibrate, DeviceRecord,
};
pub(crate) use kernels::cpu_kernels;
pub use kernels::{set_cpu_kernels, CpuKernels};
pub use model::{CostModel, EstimateInput, MAX_ESTIMATE, PRIOR_SELECTIVITY};
pub(crate) use model::{PARALLEL_LEAF, PARALLEL_SORT_MIN};
pub use profile::{CpuProfile, DeviceProfile};
pub use shape::PlanShape;
