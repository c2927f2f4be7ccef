//! The runtime: the engine and its parts (plan cache, run log, settings,
//! device probes),
//! the executor that selects, runs and falls back, and the column types
//! that cross into backends.

pub(crate) mod clock;
mod config;
mod cpu_probe;
mod devices;
mod engine;
pub(crate) mod executor;
mod plan_cache;
mod run_log;
mod traced;

pub use config::{Config, ConfigWarning, FAULTS};
#[cfg(test)]
pub(crate) use engine::finishes_within;
pub use engine::{calibrate_full, engine, set_engine, Engine};
pub use executor::QueryOptions;
pub(crate) use plan_cache::check_plan;
pub use plan_cache::fingerprint;
pub use run_log::RunLog;
pub(crate) use traced::TracedBox;
