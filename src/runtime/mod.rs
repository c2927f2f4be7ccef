//! The runtime: the engine, plan cache, executor with fallback and run log.

pub mod column;
pub mod compiled;
