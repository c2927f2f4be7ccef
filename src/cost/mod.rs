//! The cost model: estimated seconds for running a workload on a backend,
//! from device profiles. The built-in profiles are priors (the measured
//! facts of DESIGN.md and common PCIe/launch figures) until calibration
//! replaces them.

mod model;
mod profile;

pub use model::{CostModel, Estimate};
pub use profile::{CpuProfile, DeviceProfile};
