//! Measured history, keyed by (plan fingerprint, size bucket, backend).
//!
//! What is kept is the ratio of measured time to the cost model's estimate
//! (in logs), not raw seconds: the ratio carries over between sizes inside
//! a bucket (a bucket spans 2x in size) and corrects the model exactly
//! where it is wrong. Per key: the last [`RECENT`] log-ratios (their median
//! is the estimate, so one outlier cannot swing it, and old samples age
//! out), their spread, the sample count, and consecutive failures with the
//! run count before which the backend is not retried.
//!
//! Bounded: at most [`History::capacity`] plans
//! (`Config::history_capacity`),
//! the least recently used evicted first. Plans changed since the
//! persister's last snapshot are listed, so a snapshot copies only them.

use crate::cost::PlanShape;
use crate::plan::{OutputMemory, Residency, WorkloadCharacteristics};
use crate::types::BackendKind;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::sync::Arc;

/// Samples kept per key (the median of these is the estimate).
pub const RECENT: usize = 5;
/// A sample further than this factor from the current estimate is clamped
/// to it before it is recorded (once the key has a few samples).
const OUTLIER_FACTOR: f64 = 4.0;
/// `ln(OUTLIER_FACTOR)`.
const OUTLIER_FACTOR_LN: f32 = std::f32::consts::LN_2 * 2.0;
/// Runs of a key a failed backend sits out after its first failure; doubles
/// with each consecutive failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: u64 = 8;
const MAX_BACKOFF: u64 = 4096;

/// The size bucket of a run: `ceil(log2(elements + 1))` (at most 63), with
/// the top bit set when the inputs are resident on a device and the next
/// when the result is written into fresh memory ([`OutputMemory::Fresh`]):
/// different cost regimes.
pub fn size_bucket(w: &WorkloadCharacteristics) -> u8 {
    let log = crate::plan::size_log(w.elements) as u8;
    let device = match w.residency {
        Residency::Host => 0,
        _ => 0x80,
    };
    let fresh = match w.output_memory {
        OutputMemory::Fresh => 0x40,
        OutputMemory::Resident | OutputMemory::Unknown => 0,
    };
    log | device | fresh
}

/// What history knows about one (plan, bucket, backend).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stat {
    /// Successful measurements recorded (ever).
    pub samples: u32,
    /// The most recent log(measured / estimated), oldest overwritten first.
    pub recent: [f32; RECENT],
    /// Median of `recent`, kept up to date by `record` so selection reads
    /// one number.
    pub center: f32,
    /// Recency-weighted mean of the measured seconds (for inspection through
    /// `LearningSelector::history`; selection uses `center`).
    pub mean_seconds: f64,
    /// The most recent log(measured / estimated) as measured, before
    /// the outlier clamp: what a re-check actually showed.
    pub last: f32,
    /// Consecutive failures (reset by a success).
    pub failures: u32,
    /// The bucket's run count before which a failed backend is skipped.
    #[serde(skip)]
    pub retry_at: u64,
}

impl Stat {
    fn filled(&self) -> &[f32] {
        &self.recent[..(self.samples as usize).min(RECENT)]
    }

    /// The current estimate of log(measured / estimated): the median of
    /// the recent samples (0 = the model is right).
    pub fn log_ratio(&self) -> f64 {
        self.center as f64
    }

    /// The most recent log(measured / estimated) as measured (not clamped
    /// toward the median), if any.
    pub fn last_log_ratio(&self) -> Option<f64> {
        (self.samples > 0).then_some(self.last as f64)
    }

    /// The smallest of the recent log(measured / estimated): the key's
    /// fastest recent run, if any (a run slowed by cold state is only
    /// ever slower).
    pub fn fastest_log_ratio(&self) -> Option<f64> {
        self.filled()
            .iter()
            .copied()
            .reduce(f32::min)
            .map(f64::from)
    }

    fn median(&self) -> f64 {
        if self.samples as usize >= RECENT {
            // The common case, on every query of a key past its first
            // runs: branch-free (the sort below mispredicts on noisy
            // samples).
            return median5(self.recent) as f64;
        }
        // A key's first few samples only: a sorted copy.
        let mut a = self.recent;
        let v = &mut a[..self.filled().len()];
        v.sort_unstable_by(f32::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2] as f64,
            n => (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0,
        }
    }

    /// Spread of the recent samples: their standard deviation in log space
    /// (0.1 ≈ ±10%).
    pub fn spread(&self) -> f64 {
        let f = self.filled();
        if f.len() < 2 {
            return 0.0;
        }
        let m = f.iter().map(|&x| x as f64).sum::<f64>() / f.len() as f64;
        (f.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (f.len() - 1) as f64).sqrt()
    }

    /// Records a successful run that took `measured` seconds where the
    /// model (without compile) estimated `estimated`.
    pub fn record(&mut self, measured: f64, estimated: f64) {
        // In `f32`, as stored: `lnf` costs half of `ln`. The ratio is
        // clamped first so that it cannot leave `f32`'s range, and one
        // that is not a number (infinity over infinity) counts as "the
        // model is right": a NaN here would reach the median and then the
        // outlier clamp's bounds, where it panics.
        let ratio = measured.max(1e-9) / estimated.max(1e-9);
        let ratio = if ratio.is_nan() {
            1.0
        } else {
            ratio.clamp(1e-30, 1e30)
        };
        let mut x = (ratio as f32).ln();
        self.last = x;
        if self.samples as usize >= 3 {
            let c = self.center;
            let lim = OUTLIER_FACTOR_LN;
            x = x.clamp(c - lim, c + lim);
        }
        self.recent[self.samples as usize % RECENT] = x;
        self.samples = self.samples.saturating_add(1);
        self.center = self.median() as f32;
        let alpha = (1.0 / self.samples as f64).max(0.25);
        let clamped = measured.min(self.mean_seconds * OUTLIER_FACTOR).max(0.0);
        let m = if self.samples == 1 { measured } else { clamped };
        self.mean_seconds += alpha * (m - self.mean_seconds);
        self.failures = 0;
        self.retry_at = 0;
    }

    /// Records a failure at the bucket's run `now`: the backend sits out
    /// a doubling number of runs, then is retried.
    pub fn fail(&mut self, now: u64) {
        self.failures = self.failures.saturating_add(1);
        let backoff = (FIRST_BACKOFF << (self.failures - 1).min(12)).min(MAX_BACKOFF);
        self.retry_at = now + backoff;
    }

    /// Whether the backend is sitting out a failure at run `now`.
    pub fn backed_off(&self, now: u64) -> bool {
        self.failures > 0 && now < self.retry_at
    }
}

/// The median of five values, by eight branch-free `min`/`max`: of two
/// sorted pairs, the larger of the two minima and the smaller of the two
/// maxima are the middle two of those four (in some order), and the
/// median of five is the median of them and the fifth. Exact for numbers;
/// a NaN (which `record` never stores) is skipped by `min`/`max` rather
/// than ordered.
fn median5([a, b, c, d, e]: [f32; 5]) -> f32 {
    let (x, y) = (a.min(b).max(c.min(d)), a.max(b).min(c.max(d)));
    x.min(y).max(x.max(y).min(e))
}

/// One size bucket of one plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bucket {
    /// See [`size_bucket`].
    pub key: u8,
    /// Selections made for this bucket (the clock of back-off and of
    /// periodic re-checks).
    pub runs: u64,
    /// Per backend, by [`BackendKind::index`].
    pub stats: [Stat; BackendKind::COUNT],
    /// The backend this bucket's last selection chose (not persisted).
    pub(crate) last: Option<BackendKind>,
    /// Where an exploration's warm-up run stands (not persisted).
    pub(crate) explore: Explore,
}

/// An exploration that follows runs on another backend runs its candidate
/// twice in a row and learns from the second run only: the first pays for
/// the state the other backend left (a pool asleep and a core gone cold
/// for `cpu-parallel`, whose re-checks between runs of `cpu-simd` measured
/// 46-58 µs at 10^5 elements where its runs in a row take 22-30 µs), which
/// a run of a loop of that backend would not. (selector_eval times its
/// forced runs the same way, each after an untimed one.) A candidate
/// predicted to run for a millisecond or more (`learning::LONG_RUN`) is
/// learned from at once: that state is a few percent of its run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Explore {
    /// No exploration under way.
    #[default]
    Idle,
    /// This backend's warm-up run was chosen; its observation is not
    /// learned from.
    WarmingUp(BackendKind),
    /// The warm-up ran: the next selection picks the backend again.
    Measure(BackendKind),
}

/// Everything known about one plan.
#[derive(Clone, Debug, Default)]
pub struct PlanHistory {
    /// The plan's shape, computed on its first selection in this process.
    pub shape: Option<Arc<PlanShape>>,
    /// Learned share of elements surviving the plan's filter, if measured.
    pub selectivity: Option<f64>,
    /// Measurements behind `selectivity`.
    pub selectivity_samples: u32,
    /// Size buckets seen.
    pub buckets: SmallVec<[Bucket; 4]>,
    /// The model's prices for the last workload selected (not persisted).
    pub memo: Option<EstimateMemo>,
    /// The history's clock at the plan's last selection: the plan with
    /// the lowest is evicted first.
    pub last_use: u64,
    /// Listed in `History::changed` (changed since the last snapshot).
    changed: bool,
}

/// What persists of one plan: a copy taken for the writer
/// ([`History::take_changes`]).
#[derive(Clone, Debug)]
pub(crate) struct PlanSnapshot {
    /// The plan.
    pub fingerprint: u64,
    /// See [`PlanHistory::selectivity`].
    pub selectivity: Option<f64>,
    /// See [`PlanHistory::selectivity_samples`].
    pub selectivity_samples: u32,
    /// See [`PlanHistory::buckets`].
    pub buckets: SmallVec<[Bucket; 4]>,
}

impl PlanSnapshot {
    fn of(fingerprint: u64, p: &PlanHistory) -> PlanSnapshot {
        PlanSnapshot {
            fingerprint,
            selectivity: p.selectivity,
            selectivity_samples: p.selectivity_samples,
            buckets: p.buckets.clone(),
        }
    }
}

/// The model's prices of one workload on every backend, kept so that the
/// same query run again (the common case: a loop over same-sized data)
/// is not priced again. Valid while the workload, the selectivity and the
/// model (its revision) are the same.
#[derive(Clone, Debug)]
pub struct EstimateMemo {
    /// The workload priced.
    pub workload: WorkloadCharacteristics,
    /// The selectivity it was priced with (bits).
    pub selectivity: u64,
    /// The model revision it was priced with.
    pub revision: u64,
    /// Per backend (by [`BackendKind::index`]): steady-state seconds
    /// (compile excluded) and the compile seconds when not built; NaN for
    /// backends that were not priced.
    pub steady: [f64; BackendKind::COUNT],
    /// See `steady`.
    pub compile: [f64; BackendKind::COUNT],
}

impl EstimateMemo {
    /// Whether the memo prices `workload` at `selectivity` under model
    /// `revision`.
    pub fn is_for(
        &self,
        workload: &WorkloadCharacteristics,
        selectivity: f64,
        revision: u64,
    ) -> bool {
        // The workload last: its comparison is the longest.
        self.revision == revision
            && self.selectivity == selectivity.to_bits()
            && self.workload == *workload
    }
}

impl PlanHistory {
    /// The bucket `key`, created when new.
    pub fn bucket_mut(&mut self, key: u8) -> &mut Bucket {
        match self.buckets.iter().position(|b| b.key == key) {
            Some(i) => &mut self.buckets[i],
            None => {
                self.buckets.push(Bucket {
                    key,
                    ..Bucket::default()
                });
                self.buckets.last_mut().expect("just pushed")
            }
        }
    }

    /// The bucket `key`, if seen.
    pub fn bucket(&self, key: u8) -> Option<&Bucket> {
        self.buckets.iter().find(|b| b.key == key)
    }

    /// Records one selectivity measurement (recency-weighted).
    pub fn record_selectivity(&mut self, s: f64) {
        let s = s.clamp(0.0, 1.0);
        let alpha = (1.0 / (self.selectivity_samples as f64 + 1.0)).max(0.2);
        let cur = self.selectivity.unwrap_or(s);
        self.selectivity = Some(cur + alpha * (s - cur));
        self.selectivity_samples = self.selectivity_samples.saturating_add(1);
    }
}

/// Plans kept by default ([`History::capacity`]): about 1.5 KiB each,
/// so ~1.5 MiB at most.
pub const DEFAULT_CAPACITY: usize = 1024;

/// All plans, at most [`History::capacity`] of them.
#[derive(Clone, Debug)]
pub struct History {
    /// By plan fingerprint.
    pub plans: FxHashMap<u64, PlanHistory>,
    capacity: usize,
    /// Ticks on every selection ([`PlanHistory::last_use`]).
    clock: u64,
    /// Plans changed since the last [`History::take_changes`].
    changed: Vec<u64>,
    /// Changed plans evicted before the writer took them (at most
    /// `capacity`, the oldest dropped first).
    evicted: Vec<PlanSnapshot>,
}

impl Default for History {
    fn default() -> Self {
        History::with_capacity(DEFAULT_CAPACITY)
    }
}

impl History {
    /// An empty history of at most `capacity` plans (at least one).
    pub fn with_capacity(capacity: usize) -> History {
        History {
            plans: FxHashMap::default(),
            capacity: capacity.max(1),
            clock: 0,
            changed: Vec::new(),
            evicted: Vec::new(),
        }
    }

    /// The most plans kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The plan `fingerprint`, created when new (evicting the least
    /// recently used plans when full), marked as used now.
    pub fn touch(&mut self, fingerprint: u64) -> &mut PlanHistory {
        self.clock += 1;
        let clock = self.clock;
        // The length first: below capacity (the common case) a hit costs
        // one lookup.
        if self.plans.len() >= self.capacity && !self.plans.contains_key(&fingerprint) {
            self.evict();
        }
        let p = self.plans.entry(fingerprint).or_default();
        p.last_use = clock;
        p
    }

    /// Evicts the least recently used eighth (at least one plan), so that
    /// a stream of new plans pays for the scan once per `capacity / 8`
    /// insertions. A changed plan's data is kept for the writer.
    fn evict(&mut self) {
        let target = self.capacity - self.capacity / 8;
        let excess = (self.plans.len() + 1).saturating_sub(target).max(1);
        let mut by_use: Vec<(u64, u64)> =
            self.plans.iter().map(|(&fp, p)| (p.last_use, fp)).collect();
        if excess < by_use.len() {
            by_use.select_nth_unstable(excess - 1);
        }
        for &(_, fp) in by_use.iter().take(excess) {
            if let Some(p) = self.plans.remove(&fp) {
                if p.changed {
                    self.evicted.push(PlanSnapshot::of(fp, &p));
                }
            }
        }
        self.changed.retain(|fp| self.plans.contains_key(fp));
        self.bound_evicted();
    }

    fn bound_evicted(&mut self) {
        if self.evicted.len() > self.capacity {
            let drop = self.evicted.len() - self.capacity;
            self.evicted.drain(..drop);
        }
    }

    /// Notes that `fingerprint`'s persisted part changed (a measurement or
    /// a selectivity was recorded), for the next snapshot.
    pub fn mark_changed(&mut self, fingerprint: u64) {
        if let Some(p) = self.plans.get_mut(&fingerprint) {
            if !p.changed {
                p.changed = true;
                self.changed.push(fingerprint);
            }
        }
    }

    /// Whether [`History::take_changes`] may have anything to give.
    pub(crate) fn has_changes(&self) -> bool {
        !self.changed.is_empty() || !self.evicted.is_empty()
    }

    /// Copies of the plans changed since the last call, and of changed
    /// plans evicted meanwhile: work proportional to the changes, not to
    /// the history.
    pub(crate) fn take_changes(&mut self) -> Vec<PlanSnapshot> {
        let mut out = std::mem::take(&mut self.evicted);
        for fp in std::mem::take(&mut self.changed) {
            if let Some(p) = self.plans.get_mut(&fp) {
                p.changed = false;
                out.push(PlanSnapshot::of(fp, p));
            }
        }
        out
    }

    /// Gives back changes a writer could not persist, for the next try.
    pub(crate) fn requeue(&mut self, changes: Vec<PlanSnapshot>) {
        for c in changes {
            if self.plans.contains_key(&c.fingerprint) {
                self.mark_changed(c.fingerprint);
            } else {
                self.evicted.push(c);
            }
        }
        self.bound_evicted();
    }

    /// Adds a plan read from disk as the most recently used (callers add
    /// the least recent first); past capacity the least recent is evicted.
    /// Not marked changed: the file has it.
    pub(crate) fn insert_loaded(&mut self, s: PlanSnapshot) {
        let p = self.touch(s.fingerprint);
        p.selectivity = s.selectivity;
        p.selectivity_samples = s.selectivity_samples;
        p.buckets = s.buckets;
    }

    /// Forgets every plan.
    pub fn clear(&mut self) {
        self.plans.clear();
        self.changed.clear();
        self.evicted.clear();
    }

    /// Number of (plan, bucket, backend) keys with at least one sample or
    /// failure.
    pub fn keys(&self) -> usize {
        self.plans
            .values()
            .flat_map(|p| p.buckets.iter())
            .map(|b| {
                b.stats
                    .iter()
                    .filter(|s| s.samples > 0 || s.failures > 0)
                    .count()
            })
            .sum()
    }

    /// The stat of one key, if any.
    pub fn stat(&self, fingerprint: u64, bucket: u8, backend: BackendKind) -> Option<&Stat> {
        self.plans
            .get(&fingerprint)?
            .bucket(bucket)
            .map(|b| &b.stats[backend.index()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_ignores_one_outlier() {
        let mut s = Stat::default();
        for _ in 0..4 {
            s.record(2e-3, 1e-3);
        }
        let before = s.log_ratio();
        s.record(1.0, 1e-3); // a 500x spike (preemption)
        assert!((s.log_ratio() - before).abs() < 1e-6);
        assert!((s.log_ratio() - 2f64.ln()).abs() < 1e-3);
        // Recorded clamped, but the last sample is what was measured.
        let last = s.last_log_ratio().unwrap();
        assert!((last - 1000f64.ln()).abs() < 1e-3, "{last}");
    }

    #[test]
    fn the_median_is_the_middle_of_the_recent_samples() {
        assert!((OUTLIER_FACTOR_LN as f64 - OUTLIER_FACTOR.ln()).abs() < 1e-6);
        // Out of order, every fill level, odd and even counts.
        let ratios = [8.0, 1.0, 4.0, 0.5, 2.0, 16.0];
        let mut s = Stat::default();
        for (i, r) in ratios.iter().enumerate() {
            s.record(*r * 1e-3, 1e-3);
            let mut kept: Vec<f64> = ratios[..=i].iter().rev().take(RECENT).copied().collect();
            kept.sort_by(f64::total_cmp);
            let n = kept.len();
            let want = if n % 2 == 1 {
                kept[n / 2].ln()
            } else {
                (kept[n / 2 - 1].ln() + kept[n / 2].ln()) / 2.0
            };
            assert!(
                (s.log_ratio() - want).abs() < 1e-5,
                "{i}: {} vs {want}",
                s.log_ratio()
            );
        }
    }

    #[test]
    fn the_branch_free_median_of_five_is_the_sorted_middle() {
        // Every arrangement of five values drawn from three (every pattern
        // of ties), against the sorted middle.
        let vals = [-1.5f32, 0.0, 2.25];
        let mut distinct = [0.5f32, -3.0, 7.0, 1.0, -0.25];
        for code in 0..3usize.pow(5) {
            let mut v = [0.0f32; 5];
            let mut c = code;
            for x in &mut v {
                *x = vals[c % 3];
                c /= 3;
            }
            let mut sorted = v;
            sorted.sort_by(f32::total_cmp);
            assert_eq!(median5(v), sorted[2], "{v:?}");
        }
        // Heap's algorithm: all 120 orders of five distinct values.
        let mut stack = [0usize; 5];
        let mut seen = 1;
        assert_eq!(median5(distinct), 0.5);
        let mut i = 0;
        while i < 5 {
            if stack[i] < i {
                if i % 2 == 0 {
                    distinct.swap(0, i);
                } else {
                    distinct.swap(stack[i], i);
                }
                assert_eq!(median5(distinct), 0.5, "{distinct:?}");
                seen += 1;
                stack[i] += 1;
                i = 0;
            } else {
                stack[i] = 0;
                i += 1;
            }
        }
        assert_eq!(seen, 120);
    }

    #[test]
    fn extreme_measurements_stay_finite() {
        let mut s = Stat::default();
        for (m, e) in [
            (f64::INFINITY, 1e-3),
            (0.0, f64::INFINITY),
            (f64::NAN, f64::NAN),
            (1e300, 1e-300),
            // Enough of them to be the median, and then clamped against.
            (f64::INFINITY, f64::INFINITY),
            (f64::INFINITY, f64::INFINITY),
            (f64::INFINITY, f64::INFINITY),
            (f64::INFINITY, f64::INFINITY),
        ] {
            s.record(m, e);
            assert!(s.log_ratio().is_finite(), "{m} / {e}");
        }
    }

    #[test]
    fn a_lasting_change_takes_over_within_a_few_runs() {
        let mut s = Stat::default();
        for _ in 0..5 {
            s.record(1e-3, 1e-3);
        }
        for _ in 0..3 {
            s.record(3e-3, 1e-3);
        }
        assert!(
            (s.log_ratio() - 3f64.ln()).abs() < 1e-3,
            "{}",
            s.log_ratio()
        );
        assert!(s.spread() > 0.1);
    }

    #[test]
    fn failures_back_off_and_are_retried() {
        let mut s = Stat::default();
        s.fail(10);
        assert!(s.backed_off(11));
        assert!(!s.backed_off(10 + FIRST_BACKOFF));
        s.fail(20);
        assert!(s.backed_off(20 + FIRST_BACKOFF));
        assert!(!s.backed_off(20 + 2 * FIRST_BACKOFF));
        for i in 0..40 {
            s.fail(100 + i);
        }
        assert!(!s.backed_off(200 + MAX_BACKOFF), "never forever");
        s.record(1e-3, 1e-3);
        assert!(!s.backed_off(0) && s.failures == 0);
    }

    #[test]
    fn buckets_split_by_log_size_and_residency() {
        let mut w = WorkloadCharacteristics {
            elements: 1000,
            build_elements: 0,
            bytes_in: 4000,
            bytes_out: 8,
            ops_per_element: 1,
            transcendental_per_element: 0,
            wide_types: false,
            stages: 1,
            terminal: "reduce",
            residency: Residency::Host,
            output_on_device: false,
            output_memory: Default::default(),
        };
        let a = size_bucket(&w);
        w.elements = 1023;
        assert_eq!(size_bucket(&w), a);
        w.elements = 1024;
        assert_eq!(size_bucket(&w), a + 1);
        w.residency = Residency::Device(BackendKind::Wgpu);
        assert_ne!(size_bucket(&w), a + 1);
        // Fresh output memory is a bucket of its own; a resident one is
        // the bucket of an unknown one (a run not looked at).
        w.residency = Residency::Host;
        w.output_memory = OutputMemory::Resident;
        assert_eq!(size_bucket(&w), a + 1);
        w.output_memory = OutputMemory::Fresh;
        let fresh = size_bucket(&w);
        assert_ne!(fresh, a + 1);
        w.residency = Residency::Device(BackendKind::Wgpu);
        assert!(![a + 1, fresh].contains(&size_bucket(&w)));
        // The largest sizes keep the flags apart.
        w.elements = u64::MAX;
        w.residency = Residency::Host;
        w.output_memory = OutputMemory::Unknown;
        assert_eq!(size_bucket(&w), 63);
    }

    #[test]
    fn a_memo_prices_only_the_workload_it_was_made_for() {
        let w = WorkloadCharacteristics {
            elements: 1000,
            build_elements: 0,
            bytes_in: 4000,
            bytes_out: 8,
            ops_per_element: 3,
            transcendental_per_element: 1,
            wide_types: false,
            stages: 1,
            terminal: "reduce",
            residency: Residency::Host,
            output_on_device: false,
            output_memory: Default::default(),
        };
        let memo = EstimateMemo {
            workload: w.clone(),
            selectivity: 0.5f64.to_bits(),
            revision: 7,
            steady: [1e-6; BackendKind::COUNT],
            compile: [0.0; BackendKind::COUNT],
        };
        assert!(memo.is_for(&w, 0.5, 7));
        // The same name at another address is the same terminal.
        let other = String::from("reduce");
        let same = WorkloadCharacteristics {
            terminal: Box::leak(other.into_boxed_str()),
            ..w.clone()
        };
        assert!(memo.is_for(&same, 0.5, 7));
        assert!(!memo.is_for(&w, 0.25, 7));
        assert!(!memo.is_for(&w, 0.5, 8));
        let changed: [fn(&mut WorkloadCharacteristics); 12] = [
            |w| w.elements += 1,
            |w| w.build_elements += 1,
            |w| w.bytes_in += 1,
            |w| w.bytes_out += 1,
            |w| w.ops_per_element += 1,
            |w| w.transcendental_per_element += 1,
            |w| w.wide_types = true,
            |w| w.stages += 1,
            |w| w.terminal = "collect",
            |w| w.residency = Residency::Device(BackendKind::Wgpu),
            |w| w.output_on_device = true,
            |w| w.output_memory = OutputMemory::Fresh,
        ];
        for (i, change) in changed.iter().enumerate() {
            let mut v = w.clone();
            change(&mut v);
            assert!(!memo.is_for(&v, 0.5, 7), "field {i}");
        }
    }

    #[test]
    fn selectivity_is_a_recency_weighted_mean() {
        let mut p = PlanHistory::default();
        p.record_selectivity(0.1);
        assert_eq!(p.selectivity, Some(0.1));
        for _ in 0..30 {
            p.record_selectivity(0.9);
        }
        assert!((p.selectivity.unwrap() - 0.9).abs() < 0.01);
    }

    fn measured(h: &mut History, fp: u64) {
        h.touch(fp).bucket_mut(3).stats[0].record(1e-3, 1e-3);
        h.mark_changed(fp);
    }

    #[test]
    fn the_least_recently_used_plans_are_evicted_at_capacity() {
        let mut h = History::with_capacity(16);
        for fp in 0..16 {
            h.touch(fp);
        }
        // Plan 0 is used again: the oldest is now plan 1.
        h.touch(0);
        h.touch(100);
        assert!(h.plans.len() <= 16);
        assert!(h.plans.contains_key(&0) && h.plans.contains_key(&100));
        assert!(!h.plans.contains_key(&1));
        // A long stream of new plans never grows it past capacity, and the
        // most recent always stays.
        for fp in 1000..11_000 {
            h.touch(fp);
            assert!(h.plans.len() <= 16);
            assert!(h.plans.contains_key(&fp));
        }
        assert!(History::with_capacity(0).capacity() == 1);
    }

    #[test]
    fn snapshots_copy_only_changed_plans_and_keep_evicted_changes() {
        let mut h = History::with_capacity(8);
        for fp in 0..8 {
            h.touch(fp);
        }
        measured(&mut h, 3);
        measured(&mut h, 3);
        measured(&mut h, 5);
        let c = h.take_changes();
        let fps: Vec<u64> = c.iter().map(|s| s.fingerprint).collect();
        assert_eq!(fps, [3, 5]);
        assert_eq!(c[0].buckets[0].stats[0].samples, 2);
        assert!(h.take_changes().is_empty(), "taken once");
        // A changed plan evicted before the writer came is still written.
        measured(&mut h, 6);
        for fp in 100..120 {
            h.touch(fp);
        }
        assert!(!h.plans.contains_key(&6));
        let c = h.take_changes();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].fingerprint, 6);
        // Given back after a failed write, taken again.
        h.requeue(c);
        assert_eq!(h.take_changes().len(), 1);
        // The evicted copies are bounded too.
        for fp in 1000..1100 {
            measured(&mut h, fp);
        }
        assert!(h.take_changes().len() <= 2 * h.capacity());
    }
}
