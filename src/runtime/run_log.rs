//! The bounded log of recent runs: the last `capacity` metrics, oldest
//! dropped first.
//!
//! A ring over one vector: once full, a new run overwrites the oldest in
//! place, so logging a run moves its metrics once (a queue's pop and push
//! would move a few hundred bytes twice more on every query).

use crate::metrics::ExecutionMetrics;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Recent runs of an engine.
#[derive(Debug)]
pub struct RunLog {
    ring: Mutex<Ring>,
    capacity: usize,
    /// Runs numbered by a log that keeps none (capacity 0).
    unkept: AtomicU64,
}

#[derive(Debug, Default)]
struct Ring {
    runs: Vec<ExecutionMetrics>,
    /// Index of the oldest run once `runs` is full (0 before).
    oldest: usize,
    /// Runs numbered so far: the last run's `run_id`.
    numbered: u64,
}

impl Ring {
    /// Adds `m`, overwriting the oldest run once `capacity` are kept.
    #[inline]
    fn put(&mut self, m: ExecutionMetrics, capacity: usize) {
        if self.runs.len() < capacity {
            self.runs.push(m);
        } else {
            let at = self.oldest;
            self.runs[at] = m;
            // A compare, not `%`: a division on every query.
            self.oldest = if at + 1 == capacity { 0 } else { at + 1 };
        }
    }

    /// The runs, oldest first.
    fn iter(&self) -> impl Iterator<Item = &ExecutionMetrics> {
        let (newer, older) = self.runs.split_at(self.oldest);
        older.iter().chain(newer)
    }
}

impl RunLog {
    /// A log keeping `capacity` runs.
    pub fn new(capacity: usize) -> RunLog {
        RunLog {
            ring: Mutex::new(Ring {
                runs: Vec::with_capacity(capacity.min(4096)),
                oldest: 0,
                numbered: 0,
            }),
            capacity,
            unkept: AtomicU64::new(0),
        }
    }

    /// Appends a run, dropping the oldest when full.
    pub fn push(&self, m: ExecutionMetrics) {
        if self.capacity == 0 {
            return;
        }
        self.ring.lock().put(m, self.capacity);
    }

    /// Appends a run of this engine, numbering it: its `run_id` becomes
    /// the next in the log's sequence (1, 2, ...), so the log's order is
    /// the ids' order. Returns the id. Numbered under the lock the push
    /// takes anyway, where a counter of its own was one more locked add
    /// per query.
    #[inline]
    pub(crate) fn push_numbered(&self, mut m: ExecutionMetrics) -> u64 {
        if self.capacity == 0 {
            return self.unkept.fetch_add(1, Ordering::Relaxed) + 1;
        }
        let mut ring = self.ring.lock();
        ring.numbered += 1;
        let id = ring.numbered;
        m.run_id = id;
        ring.put(m, self.capacity);
        id
    }

    /// Copies of the logged runs, oldest first.
    pub fn snapshot(&self) -> Vec<ExecutionMetrics> {
        self.ring.lock().iter().cloned().collect()
    }

    /// The most recent run.
    pub fn last(&self) -> Option<ExecutionMetrics> {
        self.ring.lock().iter().last().cloned()
    }

    /// Runs matching `f`, oldest first. `f` runs under no lock, so it may
    /// query the engine (which logs its run).
    pub fn filter(&self, f: impl Fn(&ExecutionMetrics) -> bool) -> Vec<ExecutionMetrics> {
        let mut runs = self.snapshot();
        runs.retain(|m| f(m));
        runs
    }

    /// Number of runs kept.
    pub fn len(&self) -> usize {
        self.ring.lock().runs.len()
    }

    /// Whether no run is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every run.
    pub fn clear(&self) {
        let mut ring = self.ring.lock();
        ring.runs.clear();
        ring.oldest = 0;
    }

    /// Maximum number of runs kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: u64) -> ExecutionMetrics {
        ExecutionMetrics {
            run_id: id,
            ..ExecutionMetrics::test_run(0, crate::backend::BackendKind::CpuScalar, 3, 12, 1e-6)
        }
    }

    /// The closure is the caller's code: a query on the same engine from
    /// inside it logs its run, which must not wait for the filter.
    #[test]
    fn a_filter_may_query_the_engine_whose_log_it_reads() {
        crate::runtime::finishes_within(30, "a query inside RunLog::filter", || {
            let engine = crate::runtime::Engine::with_config(crate::runtime::Config {
                calibration_budget: std::time::Duration::ZERO,
                ..Default::default()
            });
            let xs = vec![1.0f32; 64];
            let sum = || -> f32 { engine.query(&xs).sum() };
            sum();
            let kept = engine.run_log().filter(|_| sum() == 64.0);
            assert_eq!(kept.len(), 1);
            // The first run, and the one the closure ran.
            assert_eq!(engine.run_log().len(), 2);
        });
    }

    #[test]
    fn numbered_runs_follow_the_log_order_past_a_wrap_and_without_a_log() {
        let log = RunLog::new(2);
        let ids: Vec<u64> = (0..5).map(|_| log.push_numbered(run(77))).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        let kept: Vec<u64> = log.snapshot().iter().map(|m| m.run_id).collect();
        assert_eq!(kept, [4, 5]);
        let none = RunLog::new(0);
        assert_eq!(none.push_numbered(run(77)), 1);
        assert_eq!(none.push_numbered(run(77)), 2);
        assert!(none.is_empty());
    }

    #[test]
    fn keeps_the_newest_runs_oldest_first_across_wraps() {
        let log = RunLog::new(3);
        assert!(log.last().is_none());
        for id in 1..=8u64 {
            log.push(run(id));
            let ids: Vec<u64> = log.snapshot().iter().map(|m| m.run_id).collect();
            let first = id.saturating_sub(2).max(1);
            assert_eq!(ids, (first..=id).collect::<Vec<_>>(), "after run {id}");
            assert_eq!(log.last().map(|m| m.run_id), Some(id));
        }
        assert_eq!(log.filter(|m| m.run_id % 2 == 0).len(), 2);
        log.clear();
        assert!(log.is_empty());
        log.push(run(9));
        assert_eq!(log.last().map(|m| m.run_id), Some(9));
    }
}
