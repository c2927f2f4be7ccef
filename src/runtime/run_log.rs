//! The bounded log of recent runs: the last `capacity` metrics, oldest
//! dropped first.

use crate::metrics::ExecutionMetrics;
use parking_lot::Mutex;
use std::collections::VecDeque;

/// Recent runs of an engine.
#[derive(Debug)]
pub struct RunLog {
    runs: Mutex<VecDeque<ExecutionMetrics>>,
    capacity: usize,
}

impl RunLog {
    /// A log keeping `capacity` runs.
    pub fn new(capacity: usize) -> RunLog {
        RunLog {
            runs: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            capacity,
        }
    }

    /// Appends a run, dropping the oldest when full.
    pub fn push(&self, m: ExecutionMetrics) {
        if self.capacity == 0 {
            return;
        }
        let mut runs = self.runs.lock();
        if runs.len() == self.capacity {
            runs.pop_front();
        }
        runs.push_back(m);
    }

    /// Copies of the logged runs, oldest first.
    pub fn snapshot(&self) -> Vec<ExecutionMetrics> {
        self.runs.lock().iter().cloned().collect()
    }

    /// The most recent run.
    pub fn last(&self) -> Option<ExecutionMetrics> {
        self.runs.lock().back().cloned()
    }

    /// Runs matching `f`, oldest first.
    pub fn filter(&self, f: impl Fn(&ExecutionMetrics) -> bool) -> Vec<ExecutionMetrics> {
        self.runs.lock().iter().filter(|m| f(m)).cloned().collect()
    }

    /// Number of runs kept.
    pub fn len(&self) -> usize {
        self.runs.lock().len()
    }

    /// Whether no run is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every run.
    pub fn clear(&self) {
        self.runs.lock().clear();
    }

    /// Maximum number of runs kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
