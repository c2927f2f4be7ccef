//! The learning selector: the calibrated cost model prices every candidate,
//! measured history corrects it, and bounded exploration fills the history
//! where a candidate could plausibly win.
//!
//! Every candidate is priced first ([`Ranking`]): prediction = model
//! estimate × the key's measured ratio, blended by weight
//! `samples / min_samples` (capped at 1), so the model decides while
//! samples are few and measurements take over; backends sitting out a
//! failure rank last. (Disabled and unavailable backends never reach the
//! selector: the engine leaves them out of the candidates, and says why.)
//! Then the decision is a chain of rules, the first that answers decides
//! (BurntSushi's `meta/strategy.rs` habit), each a function below whose
//! answer is the reason the metrics report:
//! 1. [`forced`] by the query or `COMPUTEQ_BACKEND` → that backend;
//! 2. [`only_candidate`] → it;
//! 3. [`exploration`]: every other run of a (plan, size) key, a candidate with
//!    fewer than `min_samples` measurements runs instead when it is
//!    plausible, and on the other runs the runner-up at runs 16, 32, 64
//!    and then once every 256 runs, if plausible, so history cannot go
//!    stale (a runner-up measured more than 8x slower is re-checked as
//!    many times less often, so a re-check never costs more than ~3% of
//!    the key's time, and not at all past 512x); a re-check that clearly
//!    beat the choice's prediction is repeated on the next run, until the
//!    runner-up's median moves or a run comes out slower. Plausible: its
//!    model price or its measured prediction (the better of the two,
//!    steady state) is within `explore_ratio` of the choice, so cold
//!    first runs cannot bar a backend for good. A candidate predicted
//!    many times slower by both is never tried, and one not built yet
//!    only once its compile costs no more than the key's runs so far
//!    took (a few runs of a 3 ms query do not pay lavapipe's 20-50 ms
//!    shader compile to try a backend priced at their time). An
//!    exploration right after runs on another backend runs its candidate
//!    twice in a row and learns from the second run only (`Explore`):
//!    the first pays for the state the other backend left, which a loop
//!    of runs on the candidate would not. A long run ([`LONG_RUN`], 1 ms)
//!    pays next to nothing for that state: it is learned from at once,
//!    and a candidate whose fastest long run is past `explore_ratio` of
//!    what the best measured is not sampled further;
//! 4. [`cheapest`]: the cheapest prediction; the reason is `History` when
//!    history decided (the winner is measured, or measurements overturned
//!    the model's pick), else `Model`.
//!
//! Cheap on the query path: one uncontended mutex around a hash lookup and
//! a few multiplications; no allocation, I/O or clock reads. Persistence
//! happens in a background thread ([`super::persist`]).
//!
//! Two locks, never one inside the other (the rule of
//! `Engine`): the history's mutex and the model's
//! `RwLock`. Pricing a plan needs the model, so a query whose memoized
//! prices are stale lets go of the history, prices, and takes it again;
//! explain's settings copy the model before they count the history. (Held
//! together they deadlocked: a reader of the model waiting for the
//! history, the history's holder waiting for a read lock queued behind a
//! model update.)

use super::history::{size_bucket, Bucket, EstimateMemo, Explore, History, PlanHistory};
use super::persist::Persister;
use super::{Decision, Forced, SelectionInput, Selector};
use crate::cost::{
    calibrate, CostModel, DeviceProfile, EstimateInput, PlanShape, PRIOR_SELECTIVITY,
};
use crate::metrics::{CandidateEstimate, ExecutionMetrics, SelectionReason};
use crate::plan::WorkloadCharacteristics;
use crate::types::{BackendKind, Phase};
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `model_generation` before the model has read the process's profile.
const NOT_CALIBRATED: u64 = u64::MAX;

/// Runs of a key between re-checks of the runner-up.
const RECHECK_EVERY: u64 = 256;
const _: () = assert!(RECHECK_EVERY.is_power_of_two());

/// A re-check is repeated when it ran faster than this share of the
/// choice's prediction: clearly faster, so that two backends within noise
/// of each other do not take turns.
const PROMISING: f64 = 0.9;

/// Before its first periodic re-check (run `RECHECK_EVERY / 2`), a key
/// re-checks its runner-up at runs 16, 32 and 64: early measurements are
/// the noisiest (cold caches, a sleeping pool, another program's burst),
/// and a choice they got wrong should not stand for 128 runs.
const FIRST_RECHECK: u64 = 16;

/// Re-checks of a runner-up measured up to this many times slower than
/// the choice come every `RECHECK_EVERY` runs; one measured `k` times
/// slower than that waits `k` (rounded up to a power of two) times as
/// long. So the periodic re-checks cost at most `RECHECK_SLOWDOWN /
/// RECHECK_EVERY` (~3%) of the key's time however slow the runner-up
/// measured, and the three early ones (only for runner-ups within this
/// factor) at most 24 runs' worth over the key's first 128 runs. (A
/// repeated re-check runs only what last measured clearly faster than
/// the choice.)
const RECHECK_SLOWDOWN: f64 = 8.0;

/// The longest wait between re-checks, as a multiple of `RECHECK_EVERY`:
/// a runner-up measured more than `RECHECK_SLOWDOWN` times this much
/// slower than the choice is not re-checked (one such run would be a
/// visible stall).
const RECHECK_MAX_STRETCH: u64 = 64;

/// How much slower than its price a run can come out for being cold
/// (caches, a sleeping pool, the state another backend left: up to ~5x
/// measured on runs of a few microseconds), with room to spare. An
/// exploration's warm-up run slower than this many times its model price
/// is learned from and not repeated, and an under-sampled candidate whose
/// measurements put it past this many times the explored range of the
/// best prediction is not explored again until re-checks come to it: one
/// cold run does not explain that, and each further run of it would be a
/// stall (`count_distinct` of 10^7 distinct `f64` on `cpu-scalar`: 17.7 s
/// a run, priced at 0.39 s, beside 0.3-0.6 s on the other CPU backends,
/// was run four times in a key's first five).
const COLD_SLACK: f64 = 8.0;

/// A run predicted to take at least this long (seconds) is learned from
/// as it comes: the state another backend left (its caches, a sleeping
/// pool, a device's threads winding down) costs it a few percent at most,
/// where runs of a few microseconds came out up to ~5x slower. Such a run
/// is explored without a warm-up run (`Explore`), and one sample of it is
/// enough to stop exploring a candidate that measured clearly slower
/// ([`Ranking::worth_sampling`]). (`selector_eval` settles its forced runs
/// with an untimed one only up to about this time, N = 10^6, too.)
const LONG_RUN: f64 = 1e-3;

/// The slowdown past which a runner-up is neither re-checked nor re-run
/// as promising.
const RECHECK_MAX_SLOWDOWN: f64 = RECHECK_SLOWDOWN * RECHECK_MAX_STRETCH as f64;

/// Whether run `now` of a key is a periodic re-check of a runner-up
/// predicted `slowdown` times the choice's time.
fn recheck_due(now: u64, slowdown: f64) -> bool {
    if slowdown.is_nan() || slowdown > RECHECK_MAX_SLOWDOWN {
        return false;
    }
    if slowdown <= RECHECK_SLOWDOWN {
        return now % RECHECK_EVERY == RECHECK_EVERY / 2
            || ((FIRST_RECHECK..RECHECK_EVERY / 2).contains(&now) && now.is_power_of_two());
    }
    let stretch = ((slowdown / RECHECK_SLOWDOWN).ceil() as u64).next_power_of_two();
    // A power of two: the remainder is a mask, not a division.
    let period = RECHECK_EVERY * stretch;
    now & (period - 1) == period / 2
}

/// The learning selector's settings (from [`Config`](crate::Config)).
#[derive(Clone, Debug, PartialEq)]
pub struct LearningSettings {
    /// Learn from runs at all.
    pub learn: bool,
    /// Samples after which history alone decides.
    pub min_samples: u32,
    /// Exploration bound (0 = off).
    pub explore_ratio: f64,
    /// Where history and calibration persist.
    pub cache_dir: Option<PathBuf>,
    /// Longest wait for calibration on the first query.
    pub calibration_budget: Duration,
    /// A CPU profile that replaces the process's calibration for good
    /// (see [`Config::cpu_profile`](crate::Config::cpu_profile)).
    pub cpu_profile: Option<crate::cost::CpuProfile>,
    /// Plans the history keeps (see
    /// [`Config::history_capacity`](crate::Config::history_capacity)).
    pub history_capacity: usize,
    /// Learn from runs that shared the machine with computeq's own
    /// measurements, the CPU calibration or a device probe
    /// ([`ExecutionMetrics::during_calibration`]), and explore while one
    /// runs ([`SelectionInput::measuring`]). Off (the engine's setting):
    /// such runs measured the calibration as much as the backend, so they
    /// teach nothing, and an exploration then would be a slow run learned
    /// from not at all.
    pub learn_beside_calibration: bool,
}

/// State shared with the background persister.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) history: Mutex<History>,
    pub(crate) dirty: AtomicBool,
    /// The background writer, woken by the first change after a write.
    pub(crate) writer: std::sync::OnceLock<std::thread::Thread>,
}

/// Cost model × history × bounded exploration. See the module doc.
#[derive(Debug)]
pub struct LearningSelector {
    settings: LearningSettings,
    model: RwLock<CostModel>,
    /// Calibration generation the model's CPU profile is at least as new
    /// as ([`NOT_CALIBRATED`] before the first refresh); written only
    /// under the model's write lock, with the profile.
    model_generation: AtomicU64,
    /// Bumped on every change of `model` (under its write lock), so
    /// memoized prices ([`EstimateMemo`]) know when they are stale.
    revision: AtomicU64,
    shared: Arc<Shared>,
    persister: Option<Persister>,
}

impl LearningSelector {
    /// A selector with `settings`; loads persisted history when a cache
    /// directory is set and learning is on, and starts the background
    /// persister.
    pub fn new(settings: LearningSettings) -> LearningSelector {
        let shared = Arc::new(Shared {
            history: Mutex::new(History::with_capacity(settings.history_capacity)),
            ..Shared::default()
        });
        let persister = match (&settings.cache_dir, settings.learn) {
            (Some(dir), true) => {
                // Read before the lock is taken.
                let loaded = super::persist::load(dir, settings.history_capacity);
                *shared.history.lock() = loaded;
                Some(Persister::start(dir.clone(), &shared))
            }
            _ => None,
        };
        let mut model = CostModel::default();
        if let Some(cpu) = &settings.cpu_profile {
            model.set_cpu(cpu.clone());
        }
        LearningSelector {
            settings,
            model: RwLock::new(model),
            model_generation: AtomicU64::new(NOT_CALIBRATED),
            revision: AtomicU64::new(0),
            shared,
            persister,
        }
    }

    /// The settings.
    pub fn learning_settings(&self) -> &LearningSettings {
        &self.settings
    }

    /// The current cost model (calibrating first if needed).
    pub fn model(&self) -> CostModel {
        self.refresh_model();
        self.model.read().clone()
    }

    /// Replaces the CPU profile (e.g. measured by the caller); later
    /// calibrations of the process replace it again.
    pub fn set_cpu_profile(&self, cpu: crate::cost::CpuProfile) {
        let g = calibrate::generation();
        self.update_model(|m| {
            m.set_cpu(cpu);
            self.model_generation.store(g, Ordering::Relaxed);
        });
    }

    /// A copy of the history (for inspection and tests).
    pub fn history(&self) -> History {
        self.shared.history.lock().clone()
    }

    /// Keeps the model's CPU profile at the process's calibration: on the
    /// first query this calibrates (bounded by the budget) or loads the
    /// persisted calibration; afterwards it is one atomic load.
    fn refresh_model(&self) {
        // A pinned profile is never replaced by the process's calibration.
        if self.settings.cpu_profile.is_some() {
            return;
        }
        self.refresh_model_from(calibrate::generation, || {
            calibrate::host_profile(
                self.settings.cache_dir.as_deref(),
                self.settings.calibration_budget,
            )
        });
    }

    /// [`Self::refresh_model`] with the process's calibration as
    /// `generation` and `profile` (injected in tests).
    fn refresh_model_from(
        &self,
        generation: impl Fn() -> u64,
        profile: impl FnOnce() -> crate::cost::CpuProfile,
    ) {
        // Read before the profile: a calibration published after this
        // read moves the generation past `g`, so a later query reads the
        // profile again even when the one read below predates it.
        let g = generation();
        if self.model_generation.load(Ordering::Relaxed) == g {
            return;
        }
        let cpu = profile();
        self.update_model(|m| {
            // Forward only: a query that read an older generation than
            // one another query installed meanwhile keeps the newer.
            let have = self.model_generation.load(Ordering::Relaxed);
            if have == NOT_CALIBRATED || have <= g {
                m.cpu = cpu;
                self.model_generation.store(g, Ordering::Relaxed);
            }
        });
    }

    /// Changes the model and its revision together (under the write lock),
    /// so that no memoized price outlives the model it came from.
    fn update_model(&self, f: impl FnOnce(&mut CostModel)) {
        let mut m = self.model.write();
        f(&mut m);
        self.revision.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether `memo` holds the model's current prices of `input`'s
    /// workload on every candidate. Checked without the model's lock: a
    /// current memo (the common case) needs no model, and a model changed
    /// between this check and the use of the memo is no different from
    /// one changed just after the query.
    fn memo_is_current(
        &self,
        memo: &Option<EstimateMemo>,
        input: &SelectionInput<'_>,
        selectivity: f64,
    ) -> bool {
        let revision = self.revision.load(Ordering::Relaxed);
        memo.as_ref().is_some_and(|m| {
            m.is_for(input.workload, selectivity, revision)
                && input
                    .candidates
                    .iter()
                    .all(|k| !m.steady[k.index()].is_nan())
        })
    }

    /// The model's prices of `input`'s workload on its candidates. Takes
    /// the model's read lock: never called with the history's held.
    fn price(
        &self,
        input: &SelectionInput<'_>,
        shape: &PlanShape,
        selectivity: f64,
    ) -> EstimateMemo {
        let model = self.model.read();
        // The revision the prices below are from (a writer holds the
        // model's write lock while it bumps it).
        let revision = self.revision.load(Ordering::Relaxed);
        let e = EstimateInput {
            workload: input.workload,
            shape,
            compiled: false,
            selectivity,
            keep_on_device: input.workload.output_on_device,
        };
        let work = model.work(&e);
        let mut steady = [f64::NAN; BackendKind::COUNT];
        let mut compile = [f64::NAN; BackendKind::COUNT];
        for &k in input.candidates {
            let est = model.estimate_work(k, &e, &work);
            steady[k.index()] = est.total() - est.compile;
            compile[k.index()] = est.compile;
        }
        EstimateMemo {
            workload: input.workload.clone(),
            selectivity: selectivity.to_bits(),
            revision,
            steady,
            compile,
        }
    }

    /// Writes the history to the cache directory now (it is also written
    /// in the background every few seconds and when the selector drops).
    pub fn flush_history(&self) {
        if let Some(p) = &self.persister {
            p.save_now(&self.shared, super::persist::Last::No);
        }
    }
}

/// The plan's entry in `h`, or in `scratch` when there is no history
/// (learning off: nothing is kept, so nothing grows).
fn plan_entry<'h>(
    h: Option<&'h mut History>,
    scratch: &'h mut PlanHistory,
    input: &SelectionInput<'_>,
) -> &'h mut PlanHistory {
    let e = match h {
        Some(h) => h.touch(input.plan.fingerprint),
        None => scratch,
    };
    if e.shape.is_none() {
        e.shape = Some(Arc::new(PlanShape::of(&input.plan.plan)));
    }
    e
}

/// One candidate as a selection sees it.
struct Cand {
    kind: BackendKind,
    /// The model's price, compile included when not built.
    model: f64,
    /// The model's steady-state price (compile excluded).
    model_steady: f64,
    /// Steady state (compile excluded), history-corrected.
    steady: f64,
    /// `steady` + compile when not built yet.
    predicted: f64,
    /// The model's steady price times the median of its measured ratios,
    /// unweighted (`steady` weighs them in by sample count), when measured.
    measured: Option<f64>,
    /// The model's steady price times the smallest recent ratio: its
    /// fastest recent run. Only for a candidate under `min_samples`, where
    /// [`Ranking::worth_sampling`] asks for it.
    fastest: Option<f64>,
    samples: u32,
    backed_off: bool,
}

impl Cand {
    /// Its compile in `predicted` (0 when it is built).
    fn compile(&self) -> f64 {
        self.predicted - self.steady
    }

    /// Whether its run is long ([`LONG_RUN`]): learned from without a
    /// warm-up, and left after one clearly slower sample. (A price that
    /// is not a number counts as long, as it did where the two rules
    /// compared it themselves.)
    fn long(&self) -> bool {
        self.steady >= LONG_RUN || self.steady.is_nan()
    }
}

/// The candidates of one selection, priced and ranked.
struct Ranking {
    cands: SmallVec<[Cand; 5]>,
    /// Indices into `cands`, cheapest prediction first, backed-off
    /// candidates last.
    by_prediction: SmallVec<[usize; 5]>,
}

impl Ranking {
    /// Per candidate, prediction = model estimate × the key's measured
    /// ratio, blended by weight `samples / min_samples` (capped at 1).
    fn new(
        input: &SelectionInput<'_>,
        prices: &EstimateMemo,
        bucket: &Bucket,
        s: &LearningSettings,
    ) -> Ranking {
        let mut cands: SmallVec<[Cand; 5]> = SmallVec::new();
        for &k in input.candidates {
            let compile = if input.plan.has_artifact(k) {
                0.0
            } else {
                prices.compile[k.index()]
            };
            let model = prices.steady[k.index()];
            let stat = &bucket.stats[k.index()];
            // In `f32`: the ratio is kept in `f32` and only ranks
            // candidates; `expf` costs half of `exp` per candidate.
            let fastest = (s.learn && stat.samples < s.min_samples)
                .then(|| stat.fastest_log_ratio())
                .flatten()
                .map(|x| model * (x as f32).exp() as f64);
            let (steady, measured) = if s.learn && stat.samples > 0 {
                let weight = (stat.samples as f32 / s.min_samples as f32).min(1.0);
                let ratio = stat.log_ratio() as f32;
                (
                    model * (weight * ratio).exp() as f64,
                    Some(model * ratio.exp() as f64),
                )
            } else {
                (model, None)
            };
            cands.push(Cand {
                kind: k,
                model: model + compile,
                model_steady: model,
                steady,
                predicted: steady + compile,
                measured,
                fastest,
                samples: stat.samples,
                backed_off: s.learn && stat.backed_off(bucket.runs),
            });
        }
        // Small fixed arrays and insertion sorts: at most five candidates,
        // and `collect`/`sort` machinery costs more than the work here.
        let mut by_prediction: SmallVec<[usize; 5]> = SmallVec::new();
        for i in 0..cands.len() {
            let key = |j: usize| (cands[j].backed_off, cands[j].predicted);
            let mut at = by_prediction.len();
            while at > 0 && {
                let (ob, op) = key(by_prediction[at - 1]);
                let (nb, np) = key(i);
                (ob, op) > (nb, np) || (ob == nb && op.is_nan())
            } {
                at -= 1;
            }
            by_prediction.insert(at, i);
        }
        Ranking {
            cands,
            by_prediction,
        }
    }

    fn best(&self) -> &Cand {
        &self.cands[self.by_prediction[0]]
    }

    /// Whether exploration may run `c` instead of the best prediction on
    /// run `runs` of the key: another candidate, not backed off, within
    /// `explore_ratio` of the best. It is judged by the better of its
    /// model price and its measurements: a cold first run or two (scratch
    /// allocated, caches cold) must not keep it out of exploration and
    /// re-checks for good while the incumbent's history warms up. Still
    /// bounded: only until `min_samples`, then one run in `RECHECK_EVERY`
    /// for the runner-up. And not before its compile (when it is not
    /// built) costs at most what the key's runs so far took at the best
    /// prediction: a key that has run as often again pays for it at most
    /// twice over (the ski-rental bound), and one that runs a few times
    /// does not pay a device's shader compile, tens of milliseconds on
    /// lavapipe, to try a candidate priced at the incumbent's time.
    fn plausible(&self, c: &Cand, s: &LearningSettings, runs: u64) -> bool {
        self.plausibly_priced(c, s) && runs >= self.affordable_from(c)
    }

    /// `plausible` but for the compile.
    fn plausibly_priced(&self, c: &Cand, s: &LearningSettings) -> bool {
        let best = self.best();
        c.kind != best.kind
            && !c.backed_off
            && c.steady.min(c.model_steady) <= best.steady * s.explore_ratio
    }

    /// Whether `c`, under-sampled, is worth more samples: not when what
    /// it measured is past [`COLD_SLACK`] times the explored range of the
    /// best prediction, nor, for a long run ([`LONG_RUN`]), when even its
    /// fastest run is past the explored range of what the best measured
    /// (its prediction while it has no samples). A long run is not slowed
    /// by the state another backend left, so one sample of it says what
    /// the next would: a device-resident sum of 10^7 `f32` on lavapipe
    /// took 14-29 ms on `wgpu` and ~44 ms on each CPU backend (the
    /// download), where the model priced the CPU at 26 ms, and
    /// `selector_eval` ran the CPU backends for ten of the key's first
    /// twelve runs to take three samples of each. Periodic re-checks of a
    /// runner-up still come, at their own pace.
    fn worth_sampling(&self, c: &Cand, s: &LearningSettings) -> bool {
        let best = self.best();
        let reference = best.measured.unwrap_or(best.steady);
        c.measured
            .is_none_or(|m| m <= best.steady * s.explore_ratio * COLD_SLACK)
            && (!c.long() || c.fastest.is_none_or(|f| f <= reference * s.explore_ratio))
    }

    /// The first run of the key at which `c`'s compile (none when it is
    /// built) costs at most the key's runs so far at the best prediction.
    fn affordable_from(&self, c: &Cand) -> u64 {
        let compile = c.compile();
        if compile <= 0.0 {
            return 0;
        }
        // Saturating (`as`): an unbounded ratio never affords it. (A NaN
        // price is never plausibly priced, so it does not get here.)
        (compile / self.best().steady).ceil() as u64
    }

    fn runner_up(&self) -> Option<&Cand> {
        self.by_prediction.get(1).map(|&i| &self.cands[i])
    }

    /// The decision to run `first` (by `reason`), then the rest by
    /// prediction; with every candidate's estimate, by backend.
    fn decision(&self, first: Option<BackendKind>, reason: SelectionReason) -> Decision {
        let mut order: SmallVec<[BackendKind; 5]> = SmallVec::new();
        order.extend(first);
        for &i in &self.by_prediction {
            if Some(self.cands[i].kind) != first {
                order.push(self.cands[i].kind);
            }
        }
        let mut estimates: SmallVec<[CandidateEstimate; 5]> = SmallVec::new();
        for c in &self.cands {
            let mut at = estimates.len();
            while at > 0 && estimates[at - 1].backend > c.kind {
                at -= 1;
            }
            estimates.insert(
                at,
                CandidateEstimate {
                    backend: c.kind,
                    seconds: c.predicted,
                },
            );
        }
        Decision {
            order,
            reason,
            estimates,
            lease: 0,
        }
    }
}

/// A rule's answer: the backend to run first (none when there is no
/// candidate at all), and why.
type Pick = (Option<BackendKind>, SelectionReason);

/// 1. Forced by the query or `COMPUTEQ_BACKEND`: that backend, whatever
///    its price.
fn forced(forced: Option<Forced>) -> Option<Pick> {
    Some(match forced? {
        Forced::Query(k) => (Some(k), SelectionReason::Forced),
        Forced::Environment(k) => (Some(k), SelectionReason::Environment),
    })
}

/// 2. One candidate left (the others disabled or unavailable: the
///    engine never offers those): it.
fn only_candidate(r: &Ranking) -> Option<Pick> {
    (r.cands.len() <= 1).then(|| {
        (
            r.cands.first().map(|c| c.kind),
            SelectionReason::OnlyCandidate,
        )
    })
}

/// 3. Bounded exploration (see the module doc): an under-sampled
///    plausible candidate on every other run of the key, else a due
///    re-check of a plausible runner-up, or a repeat of one that just
///    measured clearly faster.
fn exploration(r: &Ranking, bucket: &Bucket, s: &LearningSettings) -> Option<Pick> {
    if !s.learn || s.explore_ratio <= 0.0 {
        return None;
    }
    let now = bucket.runs;
    let best = r.best();
    let plausible = |c: &&Cand| r.plausible(c, s, bucket.runs);
    // Under-sampled candidates on every other run; when none is picked,
    // once in `RECHECK_EVERY` runs, the runner-up (its phase is even, so
    // it must not be an `else` of the even runs).
    let undersampled = if now.is_multiple_of(2) {
        r.cands
            .iter()
            .filter(plausible)
            .filter(|c| c.samples < s.min_samples && r.worth_sampling(c, s))
            .min_by(|a, b| {
                a.samples
                    .cmp(&b.samples)
                    .then(a.steady.total_cmp(&b.steady))
            })
    } else {
        None
    };
    // A re-check whose run clearly beat the choice's prediction is
    // repeated on the next run (until the runner-up's median moves or a
    // run comes out slower): one fast sample among older slow ones does
    // not move a median, and re-running what just measured faster costs
    // nothing in expectation.
    let promising = |c: &Cand| {
        bucket.stats[c.kind.index()]
            .last_log_ratio()
            .is_some_and(|x| c.model_steady * x.exp() < best.steady * PROMISING)
    };
    let pick = undersampled.or_else(|| {
        r.runner_up().filter(|c| {
            let slowdown = c.steady / best.steady;
            plausible(c)
                && slowdown <= RECHECK_MAX_SLOWDOWN
                && (recheck_due(now, slowdown) || promising(c))
        })
    })?;
    Some((Some(pick.kind), SelectionReason::Exploration))
}

/// How many runs after this one (`bucket.runs`) the cheapest prediction
/// stands, so that the engine may skip asking ([`Decision::lease`]): none
/// while the choice has fewer than `min_samples` measurements (the next
/// one may overturn the model) or a plausible candidate is under-sampled
/// (exploration may pick it on the next run), else until the runner-up's
/// next due re-check, or until the key's runs pay for an under-sampled
/// candidate's compile. A re-check measured as promising picks the
/// runner-up on this run already, so it never ends a lease early. The
/// leased runs are still observed, one in [`Decision::OBSERVE_LEASED`];
/// only a new choice waits (at most [`Decision::lease_cap`] runs: more for
/// a query of a few microseconds, whose selection is a large share of it).
fn lease(r: &Ranking, bucket: &Bucket, s: &LearningSettings) -> u32 {
    let best = r.best();
    let max = Decision::lease_cap(best.steady);
    if r.cands.len() <= 1 || !s.learn {
        return max;
    }
    if best.samples < s.min_samples || best.backed_off {
        return 0;
    }
    if s.explore_ratio <= 0.0 {
        return max;
    }
    let plausible = |c: &&Cand| r.plausible(c, s, bucket.runs);
    if r.cands
        .iter()
        .filter(plausible)
        .any(|c| c.samples < s.min_samples && r.worth_sampling(c, s))
    {
        return 0;
    }
    // An under-sampled candidate waiting only for the key's runs to pay
    // for its compile: the lease ends when they do.
    let affordable = r
        .cands
        .iter()
        .filter(|c| r.plausibly_priced(c, s) && c.samples < s.min_samples && r.worth_sampling(c, s))
        .map(|c| r.affordable_from(c).saturating_sub(bucket.runs))
        .min()
        .map_or(max, |d| d.saturating_sub(1).min(u64::from(max)) as u32);
    let Some(c) = r.runner_up().filter(plausible) else {
        return affordable;
    };
    let slowdown = c.steady / best.steady;
    (1..=u64::from(max))
        .find(|&d| recheck_due(bucket.runs + d, slowdown))
        .map_or(max, |d| (d - 1) as u32)
        .min(affordable)
}

/// 4. The cheapest prediction: `History` when measurements decided (the
///    winner is measured, or they overturned the model's pick), else
///    `Model`.
fn cheapest(r: &Ranking, s: &LearningSettings) -> Pick {
    let best = r.best();
    let model_pick = r
        .cands
        .iter()
        .filter(|c| !c.backed_off)
        .min_by(|a, b| a.model.total_cmp(&b.model))
        .map(|c| c.kind);
    let history_decided =
        s.learn && (best.samples >= s.min_samples || model_pick != Some(best.kind));
    let reason = if history_decided {
        SelectionReason::History {
            samples: best.samples,
            predicted: best.predicted,
        }
    } else {
        SelectionReason::Model {
            estimate: best.predicted,
            runner_up: r.runner_up().map(|c| (c.kind, c.predicted)),
        }
    };
    (Some(best.kind), reason)
}

impl Selector for LearningSelector {
    fn select(&self, input: &SelectionInput<'_>) -> Decision {
        self.refresh_model();
        let s = &self.settings;
        let key = size_bucket(input.workload);
        let mut scratch = PlanHistory::default();
        let mut h = s.learn.then(|| self.shared.history.lock());
        let mut plan = plan_entry(h.as_deref_mut(), &mut scratch, input);
        let selectivity = plan.selectivity.unwrap_or(PRIOR_SELECTIVITY);
        if !self.memo_is_current(&plan.memo, input, selectivity) {
            // Priced with the history released (see the module doc), then
            // the entry is looked up again: a reset may have dropped it.
            let shape = plan.shape.clone().expect("set by plan_entry");
            drop(h);
            let memo = self.price(input, &shape, selectivity);
            h = s.learn.then(|| self.shared.history.lock());
            plan = plan_entry(h.as_deref_mut(), &mut scratch, input);
            plan.memo = Some(memo);
        }
        let PlanHistory { buckets, memo, .. } = plan;
        let bucket = match buckets.iter().position(|b| b.key == key) {
            Some(i) => &mut buckets[i],
            None => {
                buckets.push(Bucket {
                    key,
                    ..Bucket::default()
                });
                buckets.last_mut().expect("just pushed")
            }
        };
        bucket.runs += 1;
        let prices = memo.as_ref().expect("current or priced above");
        let ranking = Ranking::new(input, prices, bucket, s);
        // While computeq measures the machine, no run is learned from:
        // none is explored either (see
        // `LearningSettings::learn_beside_calibration`).
        let quiet = s.learn_beside_calibration || !input.measuring;
        // An exploration's measured run, right after its warm-up.
        let measure = match std::mem::take(&mut bucket.explore) {
            Explore::Measure(k) if quiet && ranking.cands.iter().any(|c| c.kind == k) => Some(k),
            // Still waiting for the warm-up's observation.
            waiting @ Explore::WarmingUp(_) => {
                bucket.explore = waiting;
                None
            }
            _ => None,
        };
        // The chain: the first rule that answers decides.
        let (first, reason) = forced(input.forced)
            .or_else(|| only_candidate(&ranking))
            .or_else(|| measure.map(|k| (Some(k), SelectionReason::Exploration)))
            .or_else(|| quiet.then(|| exploration(&ranking, bucket, s)).flatten())
            .unwrap_or_else(|| cheapest(&ranking, s));
        if let Some(k) = first {
            // A candidate explored after runs on another backend warms up
            // first (see `Explore`), unless its run is long.
            if s.learn
                && matches!(reason, SelectionReason::Exploration)
                && measure.is_none()
                && bucket.last != Some(k)
                && ranking.cands.iter().any(|c| c.kind == k && !c.long())
            {
                bucket.explore = Explore::WarmingUp(k);
            }
            bucket.last = Some(k);
        }
        // A choice not built yet carries its compile in its estimate: not
        // leased, so that the next run's metrics price it built (leased,
        // a forced run's estimate kept a 50 ms shader compile for 32 runs).
        let unbuilt = ranking
            .cands
            .iter()
            .any(|c| Some(c.kind) == first && c.compile() > 0.0);
        let lease = match reason {
            SelectionReason::Forced
            | SelectionReason::Environment
            | SelectionReason::OnlyCandidate => {
                if unbuilt {
                    0
                } else {
                    // The forced or only backend's prediction.
                    let chosen = ranking.cands.iter().find(|c| Some(c.kind) == first);
                    Decision::lease_cap(chosen.map_or(f64::NAN, |c| c.steady))
                }
            }
            SelectionReason::Exploration => 0,
            _ => lease(&ranking, bucket, s),
        };
        // The leased runs are counted now: the engine makes them without
        // asking, and the re-check schedule runs on this count.
        bucket.runs += u64::from(lease);
        Decision {
            lease,
            ..ranking.decision(first, reason)
        }
    }

    fn generation(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    fn observe(&self, workload: &WorkloadCharacteristics, m: &ExecutionMetrics) {
        if !self.settings.learn {
            return;
        }
        let key = size_bucket(workload);
        let mut h = self.shared.history.lock();
        let Some(mut plan) = h.plans.get_mut(&m.fingerprint) else {
            return;
        };
        // The shape is borrowed, not cloned: a query whose prices are
        // memoized (the common case) needs only this one bit of it.
        let compacts = match &plan.shape {
            Some(s) => s.ends_in_compaction(),
            None => PlanShape::from_workload(workload).ends_in_compaction(),
        };
        if compacts && m.elements_in > 0 && m.attempts.is_empty() {
            plan.record_selectivity(m.elements_out as f64 / m.elements_in as f64);
        }
        let selectivity = plan.selectivity.unwrap_or(PRIOR_SELECTIVITY);
        let revision = self.revision.load(Ordering::Relaxed);
        let memoized = plan
            .memo
            .as_ref()
            .filter(|memo| memo.is_for(workload, selectivity, revision))
            .map(|memo| memo.steady[m.backend.index()])
            .filter(|s| !s.is_nan());
        let estimated = match memoized {
            Some(e) => e,
            None => {
                let shape = plan
                    .shape
                    .clone()
                    .unwrap_or_else(|| Arc::new(PlanShape::from_workload(workload)));
                // Priced with the history released (see the module doc).
                drop(h);
                let e = EstimateInput {
                    workload,
                    shape: &shape,
                    compiled: true,
                    selectivity,
                    keep_on_device: workload.output_on_device,
                };
                let estimated = self.model.read().estimate_with(m.backend, &e).total();
                h = self.shared.history.lock();
                match h.plans.get_mut(&m.fingerprint) {
                    Some(p) => plan = p,
                    // Reset meanwhile.
                    None => return,
                }
                estimated
            }
        };
        let bucket = plan.bucket_mut(key);
        let p = &m.phases;
        // In seconds, summed as floats: `Duration`'s `+` panics on
        // overflow, and a custom backend's phase times are not checked.
        let measured =
            p.transfer_in.as_secs_f64() + p.execute.as_secs_f64() + p.transfer_out.as_secs_f64();
        // A run beside the calibration teaches nothing of its backend's
        // time, and ends an exploration (its warm-up or measured run
        // would be the calibration's as much as the candidate's).
        let timed = !m.during_calibration || self.settings.learn_beside_calibration;
        if !timed {
            bucket.explore = Explore::Idle;
        }
        // An exploration's warm-up teaches nothing (see `Explore`); one
        // that ran elsewhere (a fallback) ends the exploration.
        let warm_up = match bucket.explore {
            // A warm-up far slower than the model's price is not the cold
            // state of a run (`COLD_SLACK`): learned from, not repeated.
            Explore::WarmingUp(k)
                if k == m.backend && m.attempts.is_empty() && measured > estimated * COLD_SLACK =>
            {
                bucket.explore = Explore::Idle;
                false
            }
            Explore::WarmingUp(k) if k == m.backend && m.attempts.is_empty() => {
                bucket.explore = Explore::Measure(k);
                true
            }
            Explore::WarmingUp(_) => {
                bucket.explore = Explore::Idle;
                false
            }
            _ => false,
        };
        if timed && !warm_up {
            bucket.stats[m.backend.index()].record(measured, estimated);
        }
        let mut failed = false;
        for a in &m.attempts {
            if !matches!(a.phase, Phase::Init | Phase::Support) {
                bucket.stats[a.backend.index()].fail(bucket.runs);
                failed = true;
            }
        }
        if failed {
            // Decisions leased to other threads may put runs on the
            // backend that failed: they end.
            self.revision.fetch_add(1, Ordering::Relaxed);
        }
        h.mark_changed(m.fingerprint);
        drop(h);
        self.shared.note_change();
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        self.refresh_model();
        // Counted before the model is read: one lock at a time.
        let keys = self.shared.history.lock().keys();
        let m = self.model.read().clone();
        let s = &self.settings;
        // A cache tier: its size and the one-thread/all-threads bandwidths.
        let tier = |bytes: f64, one: f64, all: f64| {
            format!(
                "{:.0}KiB@{:.1}/{:.1}GB/s",
                bytes / 1024.0,
                one / 1e9,
                all / 1e9
            )
        };
        let c = &m.cpu;
        let mut v = vec![
            ("selector", "learning".into()),
            ("learn", s.learn.to_string()),
            ("history_min_samples", s.min_samples.to_string()),
            ("explore_ratio", format!("{}", s.explore_ratio)),
            ("history_keys", keys.to_string()),
            ("calibrated", m.cpu.measured.to_string()),
            (
                "cpu.bandwidth_one",
                format!("{:.1}GB/s", m.cpu.bandwidth_one / 1e9),
            ),
            (
                "cpu.bandwidth_all",
                format!("{:.1}GB/s", m.cpu.bandwidth_all / 1e9),
            ),
            (
                "cpu.pool_wakeup",
                format!("{:.1}µs", m.cpu.pool_wakeup * 1e6),
            ),
            ("cpu.threads", m.cpu.threads.to_string()),
            (
                "cpu.near",
                tier(c.near_bytes, c.near_bandwidth_one, c.near_bandwidth_all),
            ),
            (
                "cpu.cache",
                tier(c.cache_bytes, c.cache_bandwidth_one, c.cache_bandwidth_all),
            ),
            (
                "cpu.fixed",
                format!(
                    "scalar={:.0}ns/simd={:.0}ns/parallel={:.0}ns{}",
                    m.cpu.scalar_fixed * 1e9,
                    m.cpu.simd_fixed * 1e9,
                    m.cpu.parallel_fixed * 1e9,
                    // Not from runs of the backends (yet): the priors.
                    if m.cpu.probed { "" } else { "(priors)" }
                ),
            ),
        ];
        for k in [BackendKind::Wgpu, BackendKind::Cuda] {
            if let Some(d) = m.devices[if k == BackendKind::Wgpu { 0 } else { 1 }].as_ref() {
                v.push((
                    if k == BackendKind::Wgpu {
                        "wgpu.profile"
                    } else {
                        "cuda.profile"
                    },
                    format!(
                        "measured={} up={:.1}GB/s down={:.1}GB/s down_large={:.1}GB/s latency={:.1}µs launch={:.1}µs run={:.1}µs read={:.1}GB/s op={:.3}ns",
                        d.measured,
                        d.upload_bandwidth / 1e9,
                        d.download_bandwidth / 1e9,
                        d.large_download_bandwidth / 1e9,
                        d.transfer_latency * 1e6,
                        d.launch * 1e6,
                        d.run_fixed * 1e6,
                        d.bandwidth / 1e9,
                        d.op * 1e9
                    ),
                ));
            }
        }
        if let Some(dir) = &s.cache_dir {
            v.push(("cache_dir", dir.display().to_string()));
        }
        v
    }

    fn reset(&self) {
        self.shared.history.lock().clear();
        // Leased decisions end (and memoized prices are recomputed).
        self.revision.fetch_add(1, Ordering::Relaxed);
        self.shared.dirty.store(false, Ordering::Relaxed);
        if let Some(p) = &self.persister {
            p.remove_file();
        }
    }

    fn flush(&self) {
        self.flush_history();
    }

    fn set_device_profile(&self, kind: BackendKind, profile: DeviceProfile) {
        self.update_model(|m| m.set_device(kind, profile));
    }
}

impl Drop for LearningSelector {
    fn drop(&mut self) {
        if let Some(p) = &self.persister {
            if self.shared.dirty.load(Ordering::Relaxed) {
                p.save_now(&self.shared, super::persist::Last::Yes);
            }
            p.stop(&self.shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::background;
    use crate::metrics::Attempt;
    use crate::plan::{CompiledPlan, PlanReport};
    use crate::prelude::*;

    fn settings() -> LearningSettings {
        LearningSettings {
            learn: true,
            min_samples: 3,
            explore_ratio: 1.5,
            cache_dir: None,
            calibration_budget: Duration::ZERO,
            cpu_profile: Some(host()),
            history_capacity: 1024,
            // Other tests of this process calibrate: the pause is tested
            // on its own below.
            learn_beside_calibration: true,
        }
    }

    /// The host every test here prices with, whatever this machine
    /// measured or persisted: four threads, the priors' speeds.
    fn host() -> crate::cost::CpuProfile {
        crate::cost::CpuProfile {
            threads: 4,
            ..Default::default()
        }
    }

    /// A plan of `sum(x * 2 + 1)` over `n` f32, and its workload.
    fn plan(n: usize) -> (CompiledPlan, WorkloadCharacteristics) {
        let xs = vec![1.0f32; n];
        let e = xs.compute().map(|x| x * 2.0 + 1.0).explain().sum();
        (
            CompiledPlan::new(e.plan.clone(), e.fingerprint, PlanReport::default()),
            e.workload,
        )
    }

    const CPU: [BackendKind; 3] = [
        BackendKind::CpuScalar,
        BackendKind::CpuSimd,
        BackendKind::CpuParallel,
    ];

    /// The tests' selections as the engine makes them: a leased decision
    /// ([`Decision::lease`]) serves the next runs of its selector, plan
    /// and workload without asking (one lease per test thread).
    fn select(s: &LearningSelector, p: &CompiledPlan, w: &WorkloadCharacteristics) -> Decision {
        // The selector by its shared state, held weakly: no later
        // selector of a test can have its address.
        type Held = Option<(
            std::sync::Weak<Shared>,
            u64,
            u64,
            WorkloadCharacteristics,
            Decision,
            u32,
        )>;
        thread_local! {
            static HELD: std::cell::RefCell<Held> = const { std::cell::RefCell::new(None) };
        }
        let generation = s.generation();
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some((sel, fp, gen, wl, d, left)) = h.as_mut() {
                if std::ptr::eq(sel.as_ptr(), Arc::as_ptr(&s.shared))
                    && *fp == p.fingerprint
                    && *gen == generation
                    && wl == w
                    && *left > 0
                {
                    *left -= 1;
                    return d.clone();
                }
            }
            let d = s.select(&SelectionInput {
                plan: p,
                workload: w,
                candidates: &CPU,
                forced: None,
                // As the engine asks (its devices are not probed here).
                measuring: background::active(),
            });
            *h = Some((
                Arc::downgrade(&s.shared),
                p.fingerprint,
                generation,
                w.clone(),
                d.clone(),
                d.lease,
            ));
            d
        })
    }

    fn metrics(
        p: &CompiledPlan,
        w: &WorkloadCharacteristics,
        k: BackendKind,
        secs: f64,
    ) -> ExecutionMetrics {
        ExecutionMetrics::test_run(p.fingerprint, k, w.elements, w.bytes_in, secs)
    }

    #[test]
    fn the_model_decides_first_then_measurements_take_over() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 24);
        let d = select(&s, &p, &w);
        assert_eq!(d.order[0], BackendKind::CpuParallel, "{d:?}");
        assert!(matches!(d.reason, SelectionReason::Model { .. }));
        // Measured: parallel is 3x slower than one thread here.
        for _ in 0..3 {
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuSimd, 1e-3));
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuParallel, 3e-3));
        }
        let d = select(&s, &p, &w);
        let d = if d.reason == SelectionReason::Exploration {
            select(&s, &p, &w)
        } else {
            d
        };
        assert_eq!(d.order[0], BackendKind::CpuSimd, "{d:?}");
        match d.reason {
            SelectionReason::History { samples, predicted } => {
                assert_eq!(samples, 3);
                assert!((predicted - 1e-3).abs() < 1e-4, "{predicted}");
            }
            r => panic!("{r:?}"),
        }
        // The estimates carry every candidate, history-corrected.
        assert_eq!(d.estimates.len(), 3);
        let par = d
            .estimates
            .iter()
            .find(|e| e.backend == BackendKind::CpuParallel)
            .unwrap();
        assert!((par.seconds - 3e-3).abs() < 3e-4, "{par:?}");
    }

    /// The engine's setting: runs beside the CPU calibration are neither
    /// learned from nor explored.
    fn paused_beside_calibration() -> LearningSettings {
        LearningSettings {
            learn_beside_calibration: false,
            ..settings()
        }
    }

    #[test]
    fn runs_beside_the_calibration_are_not_learned_from() {
        let s = LearningSelector::new(paused_beside_calibration());
        let (p, w) = plan(1 << 24);
        let samples = |k: BackendKind| {
            let h = s.history();
            h.plans[&p.fingerprint]
                .bucket(size_bucket(&w))
                .map_or(0, |b| b.stats[k.index()].samples)
        };
        select(&s, &p, &w);
        let beside = |k: BackendKind, secs: f64| ExecutionMetrics {
            during_calibration: true,
            ..metrics(&p, &w, k, secs)
        };
        for _ in 0..5 {
            s.observe(&w, &beside(BackendKind::CpuParallel, 9e-3));
        }
        assert_eq!(samples(BackendKind::CpuParallel), 0);
        // A failure beside it still counts: it is not a time.
        let failed = ExecutionMetrics {
            attempts: vec![Attempt {
                backend: BackendKind::CpuParallel,
                phase: Phase::Execute,
                message: "injected".into(),
                decline: None,
            }],
            ..beside(BackendKind::CpuSimd, 1e-3)
        };
        s.observe(&w, &failed);
        assert_eq!(samples(BackendKind::CpuSimd), 0);
        let h = s.history();
        let b = h.plans[&p.fingerprint].bucket(size_bucket(&w)).unwrap();
        assert!(
            b.stats[BackendKind::CpuParallel.index()].backed_off(b.runs),
            "the failure was recorded"
        );
        drop(h);
        // The same runs away from the calibration are learned from.
        s.observe(&w, &metrics(&p, &w, BackendKind::CpuSimd, 1e-3));
        assert_eq!(samples(BackendKind::CpuSimd), 1);
        // With the pause off, beside it too.
        let s = LearningSelector::new(settings());
        select(&s, &p, &w);
        s.observe(&w, &beside(BackendKind::CpuSimd, 1e-3));
        let h = s.history();
        let b = h.plans[&p.fingerprint].bucket(size_bucket(&w)).unwrap();
        assert_eq!(b.stats[BackendKind::CpuSimd.index()].samples, 1);
    }

    #[test]
    fn nothing_is_explored_while_the_calibration_runs() {
        let explored = |settings: LearningSettings| {
            // Every candidate plausible: explored unless paused.
            let s = LearningSelector::new(LearningSettings {
                explore_ratio: 1e3,
                ..settings
            });
            let (p, w) = plan(1 << 24);
            (0..12)
                .filter(|_| {
                    let d = select(&s, &p, &w);
                    s.observe(&w, &metrics(&p, &w, d.order[0], 1e-3));
                    d.reason == SelectionReason::Exploration
                })
                .count()
        };
        // Held by this test: whatever other tests do, one runs.
        let busy = background::busy();
        assert_eq!(explored(paused_beside_calibration()), 0);
        assert!(explored(settings()) > 0, "the pause off explores");
        drop(busy);
    }

    #[test]
    fn an_exploration_after_another_backend_learns_from_its_second_run() {
        let s = LearningSelector::new(settings());
        // Short runs (priced under `LONG_RUN`).
        let (p, w) = plan(1 << 20);
        // The model's pick, measured until it has its samples.
        let first = select(&s, &p, &w).order[0];
        let sample = |k: BackendKind| {
            let h = s.history();
            h.plans[&p.fingerprint]
                .bucket(size_bucket(&w))
                .unwrap()
                .stats[k.index()]
            .samples
        };
        let mut other = None;
        for _ in 0..8 {
            let d = select(&s, &p, &w);
            let k = d.order[0];
            if k != first && d.reason == SelectionReason::Exploration {
                other = Some(k);
                // The warm-up: slow, as after another backend's runs
                // (within `COLD_SLACK` of its price).
                let price = d.estimates.iter().find(|e| e.backend == k).unwrap().seconds;
                assert!(price < LONG_RUN, "{d:?}");
                s.observe(&w, &metrics(&p, &w, k, price * COLD_SLACK * 0.9));
                assert_eq!(sample(k), 0, "a warm-up is not learned from");
                // The same candidate again, measured.
                let d = select(&s, &p, &w);
                assert_eq!((d.order[0], d.reason), (k, SelectionReason::Exploration));
                s.observe(&w, &metrics(&p, &w, k, 1e-4));
                assert_eq!(sample(k), 1);
                // Its next exploration follows a run of its own: no
                // warm-up.
                let d = select(&s, &p, &w);
                if d.order[0] == k {
                    s.observe(&w, &metrics(&p, &w, k, 1e-4));
                    assert_eq!(sample(k), 2);
                }
                break;
            }
            s.observe(&w, &metrics(&p, &w, k, 2e-4));
        }
        let k = other.expect("another candidate was explored");
        let h = s.history();
        let stat = &h.plans[&p.fingerprint]
            .bucket(size_bucket(&w))
            .unwrap()
            .stats[k.index()];
        // The slow warm-up left no trace.
        assert!(stat.mean_seconds < 2e-4, "{stat:?}");
    }

    #[test]
    fn a_long_run_is_learned_from_at_once_and_one_clearly_slower_is_left() {
        let s = LearningSelector::new(settings());
        // Runs of milliseconds (`LONG_RUN`).
        let (p, w) = plan(1 << 24);
        let first = select(&s, &p, &w);
        let price = |d: &Decision, k: BackendKind| {
            d.estimates.iter().find(|e| e.backend == k).unwrap().seconds
        };
        assert!(price(&first, first.order[0]) >= LONG_RUN, "{first:?}");
        let samples = |k: BackendKind| {
            s.history().plans[&p.fingerprint]
                .bucket(size_bucket(&w))
                .unwrap()
                .stats[k.index()]
            .samples
        };
        // The model's pick runs at twice its price, so that the others are
        // plausible by theirs; every other backend at three times the
        // pick's run, past `explore_ratio` of it.
        let best = first.order[0];
        let best_secs = 2.0 * price(&first, best);
        let plausible = CPU
            .into_iter()
            .filter(|&k| k != best && price(&first, k) <= best_secs * settings().explore_ratio)
            .count();
        assert!(plausible > 0, "{first:?}");
        s.observe(&w, &metrics(&p, &w, best, best_secs));
        // The key's runs 2 to 14: the first periodic re-check of the
        // runner-up comes at run 16 (`FIRST_RECHECK`).
        let mut runs: Vec<(BackendKind, SelectionReason)> = Vec::new();
        for _ in 2..FIRST_RECHECK - 1 {
            let d = select(&s, &p, &w);
            let k = d.order[0];
            let secs = if k == best {
                best_secs
            } else {
                3.0 * best_secs
            };
            let before = samples(k);
            s.observe(&w, &metrics(&p, &w, k, secs));
            // Every run is learned from: no warm-up.
            assert_eq!(samples(k), before + 1, "{k:?} after {runs:?}");
            runs.push((k, d.reason));
        }
        // Each other backend plausible by its price ran once, then was
        // left: one run of it said what the next would.
        for k in CPU.into_iter().filter(|&k| k != best) {
            let n = runs.iter().filter(|r| r.0 == k).count();
            assert!(n <= 1, "{k:?} ran {n} times: {runs:?}");
        }
        let explored = runs.iter().filter(|r| r.0 != best).count();
        assert_eq!(explored, plausible, "{runs:?}");
        assert!(
            runs[runs.len() - 8..].iter().all(|r| r.0 == best),
            "{runs:?}"
        );
    }

    #[test]
    fn a_candidate_measured_far_past_its_price_is_not_explored_again() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 24);
        let mut explored: Option<BackendKind> = None;
        for run in 0..FIRST_RECHECK - 1 {
            let d = select(&s, &p, &w);
            let k = d.order[0];
            let price = d.estimates.iter().find(|e| e.backend == k).unwrap().seconds;
            let secs = match explored {
                // Every later run of it would be as slow: none comes.
                Some(slow) => {
                    assert_ne!(k, slow, "run {run}: {d:?}");
                    price
                }
                None if d.reason == SelectionReason::Exploration => {
                    // Its first run (a warm-up) takes 50x its price: not
                    // the cold state of a run. It is learned from, and not
                    // run again to be measured.
                    explored = Some(k);
                    50.0 * price
                }
                // The others at twice their price: the alternatives stay
                // plausible.
                None => 2.0 * price,
            };
            s.observe(&w, &metrics(&p, &w, k, secs));
            if let Some(slow) = explored.filter(|&e| e == k) {
                let h = s.history();
                let stat = h.plans[&p.fingerprint]
                    .bucket(size_bucket(&w))
                    .unwrap()
                    .stats[slow.index()];
                assert_eq!(stat.samples, 1, "the slow warm-up is a sample");
            }
        }
        assert!(explored.is_some(), "the key explored a candidate");
    }

    #[test]
    fn one_outlier_does_not_swing_the_choice() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 24);
        for _ in 0..4 {
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuSimd, 3e-3));
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuParallel, 1e-3));
        }
        s.observe(&w, &metrics(&p, &w, BackendKind::CpuParallel, 0.5));
        for _ in 0..4 {
            let d = select(&s, &p, &w);
            if d.reason != SelectionReason::Exploration {
                assert_eq!(d.order[0], BackendKind::CpuParallel);
            }
        }
    }

    #[test]
    fn exploration_is_bounded_to_plausible_candidates() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 22);
        let mut explored = Vec::new();
        // The runs before the first scheduled re-check of the runner-up
        // (run `FIRST_RECHECK`): whether cpu-simd is plausible at all next
        // to cpu-parallel depends on the host's model (on a 2-core Zen 4
        // it was not; on a 2-core AVX-512 Xeon it is, and is re-checked at
        // runs 16 and 32), so only the exploration until `min_samples` is
        // the same everywhere.
        for _ in 1..FIRST_RECHECK {
            let d = select(&s, &p, &w);
            if d.reason == SelectionReason::Exploration {
                explored.push(d.order[0]);
            }
            // Whatever ran is measured at what the model says, so the
            // choice stays.
            let est = d
                .estimates
                .iter()
                .find(|e| e.backend == d.order[0])
                .unwrap()
                .seconds;
            s.observe(&w, &metrics(&p, &w, d.order[0], est));
        }
        assert!(
            !explored.contains(&BackendKind::CpuScalar),
            "scalar is predicted many times slower"
        );
        // Each plausible alternative is tried only until it has min_samples.
        assert!(explored.len() <= 3, "{explored:?}");
    }

    /// The scenario of the "won back" tests: an 8-element plan, where every
    /// CPU backend is a fixed cost and the model ranks cpu-simd (built
    /// once: no compile in its price) first. cpu-simd's first `cold_runs`
    /// runs take `cold` times its model price; then `runs` selections
    /// follow, where cpu-simd runs at its model price and every other
    /// backend at twice that. Returns each of those runs' choice and
    /// reason (`[i]` is the key's run `i + 2`: run 1 priced the plan).
    fn cold_start(cold_runs: usize, cold: f64, runs: usize) -> Vec<(BackendKind, SelectionReason)> {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(8);
        // Any artifact will do.
        p.artifact(BackendKind::CpuSimd, || Ok::<_, ()>(0u8))
            .unwrap();
        let d = select(&s, &p, &w);
        let price = |k: BackendKind| d.estimates.iter().find(|e| e.backend == k).unwrap().seconds;
        let simd_model = price(BackendKind::CpuSimd);
        assert!(simd_model < price(BackendKind::CpuScalar), "{d:?}");
        for _ in 0..cold_runs {
            s.observe(
                &w,
                &metrics(&p, &w, BackendKind::CpuSimd, cold * simd_model),
            );
        }
        let mut chosen = Vec::with_capacity(runs);
        for _ in 0..runs {
            let d = select(&s, &p, &w);
            let k = d.order[0];
            let secs = if k == BackendKind::CpuSimd {
                simd_model
            } else {
                2.0 * simd_model
            };
            s.observe(&w, &metrics(&p, &w, k, secs));
            chosen.push((k, d.reason));
        }
        chosen
    }

    #[test]
    fn a_compile_is_explored_only_once_the_keys_runs_pay_for_it() {
        let cand = |kind, steady: f64, compile: f64, samples| Cand {
            kind,
            model: steady + compile,
            model_steady: steady,
            steady,
            predicted: steady + compile,
            measured: (samples > 0).then_some(steady),
            fastest: (samples > 0).then_some(steady),
            samples,
            backed_off: false,
        };
        // cpu-simd measured at 1 ms; cpu-parallel priced the same, not
        // built, its compile 20 ms.
        let ranking = |compile| Ranking {
            cands: [
                cand(BackendKind::CpuSimd, 1e-3, 0.0, 3),
                cand(BackendKind::CpuParallel, 1e-3, compile, 0),
            ]
            .into_iter()
            .collect(),
            by_prediction: [0, 1].into_iter().collect(),
        };
        let s = settings();
        let at = |runs| Bucket {
            runs,
            ..Bucket::default()
        };
        let explored = |r: &Ranking, runs| exploration(r, &at(runs), &s).map(|p| p.0);
        let r = ranking(20e-3);
        assert_eq!(explored(&r, 2), None);
        assert_eq!(explored(&r, 18), None);
        assert_eq!(explored(&r, 20), Some(Some(BackendKind::CpuParallel)));
        // The lease ends when the runs pay for it (run 20: 17 runs after
        // run 2), and none is given then.
        assert_eq!(lease(&r, &at(2), &s), 17);
        assert_eq!(lease(&r, &at(20), &s), 0);
        // Built, it is tried at once.
        let built = ranking(0.0);
        assert_eq!(explored(&built, 2), Some(Some(BackendKind::CpuParallel)));
        assert_eq!(lease(&built, &at(2), &s), 0);
    }

    #[test]
    fn cold_first_samples_do_not_bar_a_candidate_for_good() {
        // cpu-simd's first two runs are cold, 6x its model (3x the
        // incumbent, as measured for an 8-element P1: 1.9 µs against
        // 0.62 µs).
        let chosen = cold_start(2, 6.0, 8 * RECHECK_EVERY as usize);
        let last: Vec<BackendKind> = chosen
            .iter()
            .filter(|(_, r)| *r != SelectionReason::Exploration)
            .map(|&(k, _)| k)
            .collect();
        let tail = &last[last.len() - 50..];
        assert!(
            tail.iter().all(|&k| k == BackendKind::CpuSimd),
            "cpu-simd never won back: {tail:?}"
        );
    }

    #[test]
    fn a_runner_up_that_learned_slow_is_won_back_early() {
        // All of cpu-simd's first `min_samples` runs were slow (a noisy
        // start), so no exploration is owed to it.
        let chosen = cold_start(3, 6.0, RECHECK_EVERY as usize / 4);
        // Won back within the first quarter of the periodic re-check
        // interval, by the early re-check at run 16 and its repeats.
        let tail = &chosen[chosen.len() - 16..];
        assert!(
            tail.iter().all(|&(k, _)| k == BackendKind::CpuSimd),
            "cpu-simd not won back early: {chosen:?}"
        );
        let rechecks = chosen
            .iter()
            .filter(|(_, r)| *r == SelectionReason::Exploration)
            .count();
        assert!(rechecks <= 6, "{rechecks} re-checks: {chosen:?}");
    }

    #[test]
    fn a_runner_up_that_learned_very_slow_is_still_won_back() {
        // cpu-simd's first runs were 20x its model (a cold start): ten
        // times the incumbent's 2x, past the 8x of the regular re-checks.
        let chosen = cold_start(3, 20.0, 4 * RECHECK_EVERY as usize);
        // The first re-check comes at run 256 (a 10x slowdown waits twice
        // the regular period), and its repeats win cpu-simd back.
        let first = chosen
            .iter()
            .position(|&(k, _)| k == BackendKind::CpuSimd)
            .expect("never re-checked");
        assert_eq!(first + 2, RECHECK_EVERY as usize, "{:?}", &chosen[first..]);
        let tail = &chosen[chosen.len() - 64..];
        assert!(
            tail.iter().all(|&(k, _)| k == BackendKind::CpuSimd),
            "cpu-simd not won back: {:?}",
            &chosen[first..]
        );
    }

    #[test]
    fn rechecks_cost_a_bounded_share_however_slow_the_runner_up() {
        let runs = RECHECK_EVERY * RECHECK_MAX_STRETCH * 4;
        for slowdown in [1.0, 8.0, 9.0, 20.0, 100.0, 512.0] {
            let count = (1..=runs).filter(|&n| recheck_due(n, slowdown)).count() as f64;
            assert!(count >= 4.0, "{slowdown}x: re-checked {count} times");
            // The three early re-checks aside, at most 8 runs' worth of
            // the choice's time in every 256.
            let early = if slowdown <= RECHECK_SLOWDOWN {
                3.0
            } else {
                0.0
            };
            let share = (count - early) * slowdown / runs as f64;
            assert!(
                share <= RECHECK_SLOWDOWN / RECHECK_EVERY as f64,
                "{slowdown}x: {share}"
            );
        }
        for slowdown in [513.0, 1e9, f64::INFINITY, f64::NAN] {
            assert!(!(1..=runs).any(|n| recheck_due(n, slowdown)), "{slowdown}");
        }
    }

    #[test]
    fn failures_count_against_a_backend_and_are_retried_later() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 24);
        let d = select(&s, &p, &w);
        let (first, second) = (d.order[0], d.order[1]);
        // The fallback ran exactly as predicted, so only the failure moves
        // the order (whatever profile this machine measured).
        let predicted = d.estimates.iter().find(|e| e.backend == second).unwrap();
        let mut m = metrics(&p, &w, second, predicted.seconds);
        m.attempts.push(Attempt {
            backend: first,
            phase: crate::types::Phase::Execute,
            message: "device lost".into(),
            decline: None,
        });
        s.observe(&w, &m);
        let d = select(&s, &p, &w);
        assert_ne!(d.order[0], first);
        assert_eq!(*d.order.last().unwrap(), first, "kept as the last fallback");
        let retried = (0..40).any(|_| select(&s, &p, &w).order[0] == first);
        assert!(retried, "not excluded forever");
    }

    #[test]
    fn without_learning_history_is_ignored() {
        let s = LearningSelector::new(LearningSettings {
            learn: false,
            ..settings()
        });
        let (p, w) = plan(1 << 24);
        for _ in 0..5 {
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuParallel, 1.0));
        }
        let d = select(&s, &p, &w);
        assert_eq!(d.order[0], BackendKind::CpuParallel);
        assert!(matches!(d.reason, SelectionReason::Model { .. }));
        assert_eq!(s.history().keys(), 0);
    }

    #[test]
    fn forced_wins_and_reset_forgets() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1000);
        let d = s.select(&SelectionInput {
            plan: &p,
            workload: &w,
            candidates: &CPU,
            forced: Some(Forced::Environment(BackendKind::CpuScalar)),
            measuring: false,
        });
        assert_eq!(d.order[0], BackendKind::CpuScalar);
        assert_eq!(d.reason, SelectionReason::Environment);
        // Nothing to build: leased, for as many runs as fit the lease's
        // span at the chosen backend's price.
        let cap = |d: &Decision| {
            let e = d.estimates.iter().find(|e| e.backend == d.order[0]);
            Decision::lease_cap(e.expect("the choice is priced").seconds)
        };
        assert!(d.lease >= Decision::LEASE_FLOOR);
        assert_eq!(d.lease, cap(&d));
        // Forced onto a backend whose program is not built: its estimate
        // carries the compile, so not leased until it is built.
        let forced_simd = || {
            s.select(&SelectionInput {
                plan: &p,
                workload: &w,
                candidates: &CPU,
                forced: Some(Forced::Query(BackendKind::CpuSimd)),
                measuring: false,
            })
        };
        assert_eq!(forced_simd().lease, 0);
        p.artifact(BackendKind::CpuSimd, || Ok::<_, ()>(0u8))
            .unwrap();
        let d = forced_simd();
        assert_eq!(d.lease, cap(&d));
        s.observe(&w, &metrics(&p, &w, BackendKind::CpuScalar, 1e-3));
        assert_eq!(s.history().keys(), 1);
        s.reset();
        assert_eq!(s.history().keys(), 0);
    }

    #[test]
    fn history_persists_across_selectors() {
        let dir = crate::cost::cache_file::temp_dir("learning");
        let with_dir = || {
            LearningSelector::new(LearningSettings {
                cache_dir: Some(dir.clone()),
                ..settings()
            })
        };
        let (p, w) = plan(1 << 20);
        {
            let s = with_dir();
            select(&s, &p, &w);
            for _ in 0..3 {
                s.observe(&w, &metrics(&p, &w, BackendKind::CpuSimd, 2e-4));
            }
        } // dropped: written
        let s = with_dir();
        let st = s
            .history()
            .stat(p.fingerprint, size_bucket(&w), BackendKind::CpuSimd)
            .copied();
        assert_eq!(st.map(|s| s.samples), Some(3));
        s.reset();
        drop(s);
        assert_eq!(with_dir().history().keys(), 0, "reset removes the file");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Time for a spawned thread to reach the lock it will wait on. Not
    /// an assertion on time: a thread that has not got there yet makes
    /// the lock checks below pass without proving anything, never fail.
    const SETTLE: Duration = Duration::from_millis(100);

    /// Long enough for any thread that holds a lock only briefly.
    const PATIENCE: Duration = Duration::from_secs(10);

    #[test]
    fn select_waits_for_the_model_without_holding_the_history() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 20);
        // Calibrated now, so that the selection below does not wait to
        // write the model before it takes the history.
        s.model();
        let writer = s.model.write();
        std::thread::scope(|scope| {
            // The plan's first selection prices it: it needs the model.
            let t = scope.spawn(|| select(&s, &p, &w));
            std::thread::sleep(SETTLE);
            let free = s.shared.history.try_lock_for(PATIENCE).is_some();
            drop(writer);
            t.join().unwrap();
            assert!(
                free,
                "select() holds the history while it waits for the model"
            );
        });
    }

    #[test]
    fn observe_waits_for_the_model_without_holding_the_history() {
        let s = LearningSelector::new(settings());
        let (p, w) = plan(1 << 20);
        // The plan's entry exists, its memo prices the CPU backends only.
        select(&s, &p, &w);
        let writer = s.model.write();
        std::thread::scope(|scope| {
            // A run on a backend the memo does not price: priced now.
            let t = scope.spawn(|| s.observe(&w, &metrics(&p, &w, BackendKind::Wgpu, 1e-3)));
            std::thread::sleep(SETTLE);
            let free = s.shared.history.try_lock_for(PATIENCE).is_some();
            drop(writer);
            t.join().unwrap();
            assert!(
                free,
                "observe() holds the history while it waits for the model"
            );
        });
    }

    #[test]
    fn settings_wait_for_the_history_without_holding_the_model() {
        let s = LearningSelector::new(settings());
        s.model();
        let history = s.shared.history.lock();
        std::thread::scope(|scope| {
            let t = scope.spawn(|| s.settings());
            std::thread::sleep(SETTLE);
            // A model update (a device profile, a calibration) must not
            // wait for whoever holds the history.
            let free = s.model.try_write_for(PATIENCE).is_some();
            drop(history);
            t.join().unwrap();
            assert!(
                free,
                "settings() hold the model while they wait for the history"
            );
        });
    }

    /// The deadlock of issue 20: explain's `settings()` held the model's
    /// read lock and waited for the history; `select()` held the history
    /// and waited for a read lock, queued behind a model update's write
    /// lock, which waited for the first reader.
    #[test]
    fn explain_select_and_model_updates_together_never_deadlock() {
        crate::runtime::finishes_within(60, "settings + select + model updates", || {
            let s = LearningSelector::new(settings());
            let (p, w) = plan(1 << 20);
            let rounds = 100_000;
            let start = std::sync::Barrier::new(3);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    start.wait();
                    for _ in 0..rounds {
                        std::hint::black_box(s.settings());
                    }
                });
                scope.spawn(|| {
                    start.wait();
                    for _ in 0..rounds {
                        // Every model update makes the memo stale, so
                        // most selections price the plan anew.
                        select(&s, &p, &w);
                    }
                });
                scope.spawn(|| {
                    start.wait();
                    for i in 0..rounds {
                        let profile = DeviceProfile {
                            launch: 1e-5 * (1 + i % 7) as f64,
                            ..DeviceProfile::default()
                        };
                        s.set_device_profile(BackendKind::Wgpu, profile);
                    }
                });
            });
        });
    }

    fn cpu(threads: u32) -> crate::cost::CpuProfile {
        crate::cost::CpuProfile {
            threads,
            ..Default::default()
        }
    }

    /// Issue 20's calibration race: a calibration published while a query
    /// reads the previous profile is picked up by a later query, not
    /// skipped for good.
    #[test]
    fn a_calibration_published_during_a_refresh_is_not_skipped() {
        let s = LearningSelector::new(settings());
        let generation = AtomicU64::new(5);
        let now = || generation.load(Ordering::SeqCst);
        s.refresh_model_from(now, || {
            // `calibrate_full` publishes just after the read.
            generation.store(6, Ordering::SeqCst);
            cpu(3)
        });
        s.refresh_model_from(now, || cpu(4));
        assert_eq!(s.model.read().cpu.threads, 4);
    }

    /// Two queries refresh at once: the one that read the older profile
    /// finishes last and must not replace the newer one.
    #[test]
    fn a_slow_refresh_does_not_replace_a_newer_profile() {
        let s = LearningSelector::new(settings());
        let generation = AtomicU64::new(5);
        let now = || generation.load(Ordering::SeqCst);
        s.refresh_model_from(now, || {
            // While this query reads generation 5's profile, generation 6
            // is published and another query installs it.
            generation.store(6, Ordering::SeqCst);
            s.refresh_model_from(now, || cpu(4));
            cpu(3)
        });
        assert_eq!(s.model.read().cpu.threads, 4);
        s.refresh_model_from(now, || panic!("the model is current"));
    }

    #[test]
    fn filter_selectivity_is_learned_per_plan() {
        let s = LearningSelector::new(settings());
        let xs = vec![1.0f32; 1 << 16];
        let e = xs
            .compute()
            .filter(|x| x.gt(0.5))
            .explain()
            .collect::<Vec<f32>>();
        let p = CompiledPlan::new(e.plan.clone(), e.fingerprint, PlanReport::default());
        let w = e.workload.clone();
        select(&s, &p, &w);
        let mut m = metrics(&p, &w, BackendKind::CpuSimd, 1e-4);
        m.elements_out = w.elements / 10;
        s.observe(&w, &m);
        let sel = s.history().plans[&p.fingerprint].selectivity.unwrap();
        assert!((sel - 0.1).abs() < 1e-3, "{sel}");
    }

    #[test]
    fn without_learning_no_plan_is_kept() {
        let s = LearningSelector::new(LearningSettings {
            learn: false,
            ..settings()
        });
        let (p, w) = plan(1 << 16);
        for fp in 0..100 {
            let p = CompiledPlan::new(p.plan.clone(), fp, PlanReport::default());
            select(&s, &p, &w);
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuSimd, 1e-3));
        }
        assert!(s.history().plans.is_empty());
    }

    #[test]
    fn the_history_keeps_at_most_its_capacity_of_plans() {
        let s = LearningSelector::new(LearningSettings {
            history_capacity: 8,
            ..settings()
        });
        let (p, w) = plan(1 << 16);
        let hot = CompiledPlan::new(p.plan.clone(), 1, PlanReport::default());
        for fp in 100..1100 {
            let p = CompiledPlan::new(p.plan.clone(), fp, PlanReport::default());
            select(&s, &p, &w);
            s.observe(&w, &metrics(&p, &w, BackendKind::CpuSimd, 1e-3));
            // One plan in constant use is never the least recently used.
            select(&s, &hot, &w);
            s.observe(&w, &metrics(&hot, &w, BackendKind::CpuSimd, 1e-3));
        }
        let h = s.history();
        assert!(h.plans.len() <= 8, "{}", h.plans.len());
        // Every run of it learned from, but for the warm-ups of its few
        // explorations (`Explore`).
        let samples = h.plans[&1].bucket(size_bucket(&w)).unwrap().stats
            [BackendKind::CpuSimd.index()]
        .samples;
        assert!(samples >= 990, "{samples}");
    }
}
