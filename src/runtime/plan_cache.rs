//! The plan cache: optimized plans by the structural hash of the traced
//! query. Captured values are parameters outside the key, so re-running a
//! query with new values is a hit. Entries keep their key and a hit
//! compares it, so a hash collision can never return the wrong plan.
//!
//! Each thread also remembers the entry it used last: a program that runs
//! the same query again (the common case in a loop) compares its trace with
//! that entry's key and skips hashing the trace, the lock and the lookup.
//! The memo is dropped when the cache evicts or clears anything, so it
//! never reports a hit the cache itself would not. It keeps its own copy of
//! the key, so a hit compares the trace without touching the shared entry
//! (two locked operations per hit, for the plan's count, instead of four),
//! and holds the plan weakly: a plan is never freed by a thread's exit (a
//! device backend's artifacts cannot be dropped while thread-locals are
//! torn down).

use crate::graph::{OpGraph, QueryTrace};
use crate::plan::{CompiledPlan, PlanReport};
use crate::types::PlanError;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

type Fx = BuildHasherDefault<rustc_hash::FxHasher>;

struct Entry {
    key: QueryTrace,
    plan: Arc<CompiledPlan>,
}

/// Optimized plans by structure.
pub struct PlanCache {
    entries: Mutex<HashMap<u64, Arc<Entry>, Fx>>,
    capacity: usize,
    /// This cache's identity in the per-thread memo.
    id: u64,
    /// Bumped whenever an entry leaves the cache; a memo from an older
    /// generation is ignored.
    generation: AtomicU64,
}

/// The entry a thread used last, with the cache and generation it is from.
struct Memo {
    cache: u64,
    generation: u64,
    /// A copy of the entry's key (plain data, safe to drop at any time).
    key: QueryTrace,
    plan: Weak<CompiledPlan>,
}

thread_local! {
    static LAST: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

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
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
        }
    }

    /// The plan for `trace`, building and caching it on a miss. Returns the
    /// plan and whether it was a hit.
    pub fn get_or_build(
        &self,
        trace: &QueryTrace,
        param_count: usize,
        verify: bool,
    ) -> Result<(Arc<CompiledPlan>, bool), PlanError> {
        if let Some(plan) = self.memo_hit(trace) {
            return Ok((plan, true));
        }
        let fp = fingerprint(trace);
        let found = self.entries.lock().get(&fp).cloned();
        if let Some(e) = found {
            if e.key == *trace {
                self.remember(&e);
                return Ok((e.plan.clone(), true));
            }
        }
        let plan = Arc::new(build(trace, fp, param_count, verify)?);
        if self.capacity > 0 {
            let entry = Arc::new(Entry {
                key: trace.clone(),
                plan: plan.clone(),
            });
            let mut entries = self.entries.lock();
            if entries.len() >= self.capacity {
                // Evict one arbitrary entry: plans are cheap to rebuild and
                // the working set of a program is usually far below the
                // capacity.
                if let Some(&k) = entries.keys().next() {
                    entries.remove(&k);
                    self.generation.fetch_add(1, Ordering::Relaxed);
                }
            }
            entries.insert(fp, entry.clone());
            drop(entries);
            self.remember(&entry);
        }
        Ok((plan, false))
    }

    /// The plan of this thread's last entry when `trace` is its key.
    fn memo_hit(&self, trace: &QueryTrace) -> Option<Arc<CompiledPlan>> {
        let generation = self.generation.load(Ordering::Relaxed);
        LAST.try_with(|last| {
            let last = last.try_borrow().ok()?;
            let m = last.as_ref()?;
            if m.cache != self.id || m.generation != generation || m.key != *trace {
                return None;
            }
            m.plan.upgrade()
        })
        .ok()
        .flatten()
    }

    fn remember(&self, entry: &Entry) {
        let generation = self.generation.load(Ordering::Relaxed);
        let _ = LAST.try_with(|last| {
            if let Ok(mut last) = last.try_borrow_mut() {
                *last = Some(Memo {
                    cache: self.id,
                    generation,
                    key: entry.key.clone(),
                    plan: Arc::downgrade(&entry.plan),
                });
            }
        });
    }

    /// Number of cached plans.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Drops every plan (tests: the thread memo must not outlive it).
    #[cfg(test)]
    pub(crate) fn clear(&self) {
        self.entries.lock().clear();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a trace plans, every pass verified: the check a pipeline read
/// from bytes passes before it is run.
pub(crate) fn check_plan(trace: &QueryTrace, param_count: usize) -> Result<(), PlanError> {
    build(trace, fingerprint(trace), param_count, true).map(|_| ())
}

/// Builds the optimized plan of a trace: graph, passes, lowering.
pub fn build(
    trace: &QueryTrace,
    fingerprint: u64,
    param_count: usize,
    verify: bool,
) -> Result<CompiledPlan, PlanError> {
    let t0 = Instant::now();
    let mut graph = OpGraph::from_trace(trace);
    let graph_text = graph.to_string();
    if verify {
        graph.verify()?;
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

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::runtime::Config;

    fn hit(e: &Engine, xs: &[f32], k: f32) -> bool {
        let (_, m) = e.query(xs).map(|x| x * k).with_metrics().sum();
        m.plan_cache_hit
    }

    #[test]
    fn the_thread_memo_never_outlives_the_cache_entry() {
        let e = Engine::with_config(Config::default());
        let xs = [1.0f32, 2.0];
        assert!(!hit(&e, &xs, 2.0));
        assert!(hit(&e, &xs, 3.0), "same query, new value: a hit");
        e.plans.clear();
        assert!(!hit(&e, &xs, 4.0), "a cleared cache misses");
        assert!(hit(&e, &xs, 5.0));
        // Another engine's cache is another cache: its first run misses
        // although this thread's memo holds the same trace.
        let other = Engine::with_config(Config::default());
        assert!(!hit(&other, &xs, 6.0));
        // A different query between two runs of the first.
        let (_, m) = e.query(&xs).map(|x| x + 1.0).with_metrics().sum();
        assert!(!m.plan_cache_hit);
        assert!(hit(&e, &xs, 7.0));
    }

    #[test]
    fn eviction_invalidates_the_memo() {
        let e = Engine::with_config(Config {
            plan_cache_capacity: 1,
            ..Config::default()
        });
        let xs = [1.0f32, 2.0];
        assert!(!hit(&e, &xs, 2.0));
        assert!(hit(&e, &xs, 2.0));
        // Evicts the first plan (capacity 1) on another thread, whose
        // memo is its own; this thread's memo must not report a hit.
        std::thread::scope(|s| {
            s.spawn(|| e.query(&xs).map(|x| x - 1.0).sum());
        });
        assert!(!hit(&e, &xs, 2.0));
    }
}
