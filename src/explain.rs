//! `Explain`: the printable account of a plan and, after explain-analyze,
//! of its run. Shaped like DataFusion's `EXPLAIN ANALYZE`: the plan, then
//! per stage `metrics=[..]` with the common metrics first.

use crate::metrics::{
    fmt_bytes, fmt_duration, secs, Attempt, CandidateEstimate, ExecutionMetrics, SelectionReason,
};
use crate::plan::{PhysicalPlan, WorkloadCharacteristics};
use crate::recommend::Recommendation;
use crate::types::BackendKind;
use std::fmt;

/// The plan of one query with the selector's view of it.
#[derive(Clone, Debug)]
pub struct Explain {
    /// Structural hash of the query.
    pub fingerprint: u64,
    /// The operation graph as traced, before optimization.
    pub graph: String,
    /// Optimizer passes that changed something, in order.
    pub passes: Vec<&'static str>,
    /// The optimized physical plan.
    pub plan: PhysicalPlan,
    /// The run's workload (the real input sizes).
    pub workload: WorkloadCharacteristics,
    /// Every candidate backend with its estimated cost.
    pub candidates: Vec<CandidateEstimate>,
    /// Backends not considered, with why (unavailable, disabled, declined).
    pub declined: Vec<Attempt>,
    /// The backend chosen first.
    pub choice: BackendKind,
    /// Why.
    pub reason: SelectionReason,
    /// Selection settings in force (name, value).
    pub settings: Vec<(&'static str, String)>,
    /// Suggestions to make the query faster.
    pub recommendations: Vec<Recommendation>,
    /// Measured metrics (explain-analyze only).
    pub metrics: Option<ExecutionMetrics>,
    /// The plans of the joins' build sides that run before this query
    /// (queries of their own; a build side that only reads columns does
    /// not run and has none), with the query inputs their columns fill.
    pub build_sides: Vec<(Vec<u16>, Explain)>,
}

impl fmt::Display for Explain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let analyzed = self.metrics.is_some();
        writeln!(
            f,
            "== computeq {} (plan {:016x}) ==",
            if analyzed {
                "explain analyze"
            } else {
                "explain"
            },
            self.fingerprint
        )?;
        writeln!(f, "operation graph:")?;
        f.write_str(&self.graph)?;
        if self.passes.is_empty() {
            writeln!(f, "optimizer: no pass changed the plan")?;
        } else {
            writeln!(f, "optimizer: {}", self.passes.join(", "))?;
        }
        writeln!(f, "physical plan:")?;
        let last = self.plan.stages.len() - 1;
        for (i, s) in self.plan.stages.iter().enumerate() {
            write!(f, "stage {i}: {}", s.terminal.kind_name())?;
            if s.predicate.is_some() {
                write!(f, " (predicated)")?;
            }
            if let (Some(m), true) = (&self.metrics, i == last) {
                write!(
                    f,
                    " metrics=[output_rows={}, elapsed_compute={}, input_rows={}, bytes_in={}, \
                     backend={}, transfer_in={}, transfer_out={}, compile={}, allocated={}]",
                    m.elements_out,
                    fmt_duration(m.phases.execute),
                    m.elements_in,
                    fmt_bytes(m.bytes_in),
                    m.backend,
                    fmt_duration(m.phases.transfer_in),
                    fmt_duration(m.phases.transfer_out),
                    fmt_duration(m.phases.compile),
                    fmt_bytes(m.bytes_allocated),
                )?;
            }
            writeln!(f)?;
            write!(f, "{s}")?;
        }
        let w = &self.workload;
        write!(
            f,
            "workload: elements={} bytes_in={} bytes_out<={} ops/element={} transcendental/element={} \
             64-bit={} stages={} terminal={} residency={:?}",
            w.elements,
            fmt_bytes(w.bytes_in),
            fmt_bytes(w.bytes_out),
            w.ops_per_element,
            w.transcendental_per_element,
            w.wide_types,
            w.stages,
            w.terminal,
            w.residency
        )?;
        // What the plan's last run at this size wrote its result into, and
        // so what this run is expected to get (`OutputMemory`).
        if let Some(m) = w.output_memory.label() {
            write!(f, " output_memory={m}")?;
        }
        writeln!(f)?;
        writeln!(f, "candidates:")?;
        let mut cands = self.candidates.clone();
        cands.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        for c in &cands {
            let mark = if c.backend == self.choice {
                "  <- chosen"
            } else {
                ""
            };
            writeln!(
                f,
                "  {:<13} estimated {:>9}{mark}",
                c.backend.name(),
                fmt_duration(secs(c.seconds))
            )?;
        }
        for d in &self.declined {
            writeln!(
                f,
                "  {:<13} not considered: {}",
                d.backend.name(),
                d.message
            )?;
        }
        writeln!(f, "choice: {} ({})", self.choice, self.reason)?;
        if !self.settings.is_empty() {
            write!(f, "settings:")?;
            for (k, v) in &self.settings {
                write!(f, " {k}={v}")?;
            }
            writeln!(f)?;
        }
        if let Some(m) = &self.metrics {
            writeln!(f, "metrics: {m}")?;
        }
        if self.recommendations.is_empty() {
            writeln!(f, "recommendations: none")?;
        } else {
            writeln!(f, "recommendations:")?;
            for r in &self.recommendations {
                writeln!(f, "  {r}")?;
            }
        }
        for (input, side) in &self.build_sides {
            writeln!(f, "build side of a join, run first into inputs {input:?}:")?;
            for line in side.to_string().lines() {
                writeln!(f, "  | {line}")?;
            }
        }
        Ok(())
    }
}
