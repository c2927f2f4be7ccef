//! The plan cache: optimized plans by the structural hash of the traced
//! query. Captured values are parameters outside the key, so re-running a
//! query with new values is a hit. Entries keep their key and a hit
//! compares it, so a hash collision can never return the wrong plan.

use super::compiled::{CompiledPlan, PlanReport};
use crate::graph::{OpGraph, QueryTrace};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

type Fx = BuildHasherDefault<rustc_hash::FxHasher>;

struct Entry {
    key: QueryTrace,
    plan: Arc<CompiledPlan>,
}

/// Optimized plans by structure.
pub struct PlanCache {
    entries: Mutex<HashMap<u64, Entry, Fx>>,
    capacity: usize,
}

impl std::fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanCache")
            .field("len", &self.len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// The structural hash of a trace (parameter values are not in it).
pub fn fingerprint(trace: &QueryTrace) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    trace.hash(&mut h);
    h.finish()
}

impl PlanCache {
    /// A cache holding up to `capacity` plans.
    pub fn new(capacity: usize) -> PlanCache {
        PlanCache {
            entries: Mutex::new(HashMap::default()),
            capacity,
        }
    }

    /// The plan for `trace`, building and caching it on a miss. Returns the
    /// plan and whether it was a hit.
    pub fn get_or_build(
        &self,
        trace: &QueryTrace,
        param_count: usize,
        verify: bool,
    ) -> Result<(Arc<CompiledPlan>, bool), String> {
        let fp = fingerprint(trace);
        if let Some(e) = self.entries.lock().get(&fp) {
            if e.key == *trace {
                return Ok((e.plan.clone(), true));
            }
        }
        let plan = Arc::new(build(trace, fp, param_count, verify)?);
        let mut entries = self.entries.lock();
        if entries.len() >= self.capacity {
            // Evict one arbitrary entry: plans are cheap to rebuild and the
            // working set of a program is usually far below the capacity.
            if let Some(&k) = entries.keys().next() {
                entries.remove(&k);
            }
        }
        if self.capacity > 0 {
            entries.insert(
                fp,
                Entry {
                    key: trace.clone(),
                    plan: plan.clone(),
                },
            );
        }
        Ok((plan, false))
    }

    /// Number of cached plans.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every plan.
    pub fn clear(&self) {
        self.entries.lock().clear();
    }
}

/// Builds the optimized plan of a trace: graph, passes, lowering.
pub fn build(
    trace: &QueryTrace,
    fingerprint: u64,
    param_count: usize,
    verify: bool,
) -> Result<CompiledPlan, String> {
    let t0 = Instant::now();
    let mut graph = OpGraph::from_trace(trace);
    let graph_text = graph.to_string();
    if verify {
        graph
            .verify()
            .map_err(|e| format!("the traced graph is invalid: {e}"))?;
    }
    let t1 = Instant::now();
    let passes = crate::optimize::optimize(&mut graph, verify)?;
    let plan = crate::plan::lower(&graph, param_count)?;
    let t2 = Instant::now();
    Ok(CompiledPlan::new(
        plan,
        fingerprint,
        PlanReport {
            graph_text,
            passes_applied: passes,
            plan_time: t1 - t0,
            optimize_time: t2 - t1,
        },
    ))
}
