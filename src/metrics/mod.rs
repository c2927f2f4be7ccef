//! What happened in a run: `ExecutionMetrics` (a fixed set of named values,
//! as DataFusion's metrics), and `Explain`, the printable plan with its
//! candidates, decision, recommendations and optionally measured metrics.

mod execution;

pub use crate::types::{Algorithm, OutputMemory, Passes};

pub(crate) use execution::secs;
pub use execution::{Attempt, CandidateEstimate, ExecutionMetrics, PhaseTimes, SelectionReason};

/// Formats a duration compactly: `850ns`, `12.3µs`, `4.56ms`, `1.20s`.
pub fn fmt_duration(d: std::time::Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// Formats a byte count: `512B`, `4.0KiB`, `38.1MiB`.
pub fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b < 1024.0 {
        format!("{b:.0}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1}KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1}MiB", b / 1024.0 / 1024.0)
    } else {
        format!("{:.2}GiB", b / 1024.0 / 1024.0 / 1024.0)
    }
}
