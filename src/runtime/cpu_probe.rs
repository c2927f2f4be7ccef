//! The last step of the CPU calibration: the CPU backends' own fixed costs
//! and the interpreter's speed, measured by running them
//! (`cost::calibrate::set_backend_probe`; the engine sets it).
//!
//! The calibration's other figures time raw loops (bandwidths, a block
//! operation); a backend's call adds its own set-up (the compiled program's
//! lookup, the stage run, the partials), which decides the price of a small
//! query: priced at the priors, a sum of 100 elements was estimated at
//! 0.4x its time on `cpu-simd` and `cpu-parallel` and the interpreter at
//! ~0.75x everywhere. The probe runs `sum(x * 2 + 1)` over `f32` forced on
//! each CPU backend at two sizes on a private engine (no history, no run
//! log, no devices) and fits, per backend, the time of a run as
//! `fixed + n * per_element` through the medians of interleaved rounds,
//! each time the backend time the model prices and the history records
//! (transfers and execute). It also runs the query over four leaves on
//! `cpu-simd` and `cpu-parallel`, and takes the pool's wake-up as what the
//! parallel run paid beyond its share of the work ([`pool_wakeup`]).

use super::Engine;
use crate::backend::cpu_simd;
use crate::cost::{CpuKernels, CpuProfile};
use crate::types::BackendKind;
use std::time::Instant;

/// `cpu-simd`'s kernels and block programs, for the cost model (which
/// cannot name the backends, `cost::CpuKernels`).
pub(crate) const KERNELS: CpuKernels = CpuKernels {
    sum: cpu_simd::timed::sum,
    mul: cpu_simd::timed::mul,
    transcendental: cpu_simd::timed::transcendental,
    stage_passes: cpu_simd::stage_passes,
};

/// The small input: the fixed cost (its work is a few vector operations).
const SMALL: usize = 64;
/// The large input per backend (`KINDS`' order): the per-element cost.
/// One leaf of `cpu-parallel` (a stage this long is one task on the
/// calling thread, as the small one), in the level-1/level-2 caches; the
/// interpreter's speed does not depend on the cache, and 2,048 elements
/// take it as long as the others' 16,384 take them ten times over.
const LARGE: [usize; 3] = [2_048, 16_384, 16_384];
/// The input that `cpu-parallel` splits into tasks on the pool: four
/// leaves (its wake-up, beside `cpu-simd`'s run of the same input).
const POOLED: usize = 4 * crate::cost::PARALLEL_LEAF as usize;
/// Interleaved rounds at most (fewer when the deadline comes first; the
/// fit needs `MIN_ROUNDS`). A round takes ~0.3 ms here.
const ROUNDS: usize = 21;
const MIN_ROUNDS: usize = 5;
/// Simple operations per element of the probe query (`x * 2 + 1`).
const OPS: f64 = 2.0;

const KINDS: [BackendKind; 3] = [
    BackendKind::CpuScalar,
    BackendKind::CpuSimd,
    BackendKind::CpuParallel,
];

/// Fits `p`'s backend figures (see the module doc) before `deadline`;
/// figures it cannot measure keep their values.
pub(crate) fn measure(p: &mut CpuProfile, deadline: Instant) {
    let engine = Engine::with_config(super::devices::probe_config(vec![
        BackendKind::Wgpu,
        BackendKind::Cuda,
    ]));
    let small = vec![0.5f32; SMALL];
    let large = vec![0.5f32; POOLED];
    // The backend time of one run of the probe query forced on `k` (none
    // when another backend ran it).
    let time = |k: BackendKind, xs: &[f32]| {
        let (_, m) = engine
            .query(xs)
            .on(k)
            .map(|x| x * 2.0 + 1.0)
            .with_metrics()
            .sum();
        let t = m.phases.transfer_in + m.phases.execute + m.phases.transfer_out;
        (m.backend == k).then_some(t.as_secs_f64())
    };
    // Untimed: the plan, each backend's program, the pooled scratch.
    for (i, k) in KINDS.into_iter().enumerate() {
        let _ = time(k, &small);
        let _ = time(k, &large[..LARGE[i]]);
    }
    let mut samples: [[Vec<f64>; 2]; 3] = Default::default();
    // `cpu-simd`'s and `cpu-parallel`'s runs of `POOLED` elements.
    let mut pooled: [Vec<f64>; 2] = Default::default();
    for _ in 0..ROUNDS {
        if Instant::now() >= deadline {
            break;
        }
        for (i, &k) in KINDS.iter().enumerate() {
            // The first of two back-to-back runs warms what the other
            // backends' runs disturbed; the second is kept.
            for (j, xs) in [&small[..], &large[..LARGE[i]]].into_iter().enumerate() {
                let _ = time(k, xs);
                if let Some(t) = time(k, xs) {
                    samples[i][j].push(t);
                }
            }
            if i > 0 {
                let _ = time(k, &large);
                if let Some(t) = time(k, &large) {
                    pooled[i - 1].push(t);
                }
            }
        }
    }
    let mut fits = [None; 3];
    for ((fit, s), n) in fits.iter_mut().zip(samples.iter_mut()).zip(LARGE) {
        if s[0].len() >= MIN_ROUNDS && s[1].len() >= MIN_ROUNDS {
            *fit = Some(Fit::through(median(&mut s[0]), median(&mut s[1]), n));
        }
    }
    apply(p, fits);
    if pooled.iter().all(|s| s.len() >= MIN_ROUNDS) {
        let (simd, parallel) = (median(&mut pooled[0]), median(&mut pooled[1]));
        p.pool_wakeup = pool_wakeup(p, simd, parallel);
    }
}

/// The wake-up of the pool that a run of `POOLED` elements on
/// `cpu-parallel` paid (`parallel` seconds), against `cpu-simd`'s run of
/// them (`simd`): what is left of it beside its tasks' share of the work
/// and the fixed costs the model prices apart. The pool a query meets
/// back to back with another is awake (its workers spin a while before
/// they sleep): the quick calibration's wake-up, timed from a thread
/// outside the pool, was 18-84 us here, and parallel runs of 10^5
/// positions were priced at 2-3.4x their time (0.6-2.0x since). Never
/// below `MIN_WAKEUP`: the noise of two medians is no free pool.
fn pool_wakeup(p: &CpuProfile, simd: f64, parallel: f64) -> f64 {
    let threads = f64::from(p.threads.max(1));
    let work = (simd - p.simd_fixed).max(0.0) / threads;
    (parallel - work - p.simd_fixed * threads - p.parallel_fixed).max(MIN_WAKEUP)
}

/// The least wake-up `pool_wakeup` fits, seconds.
const MIN_WAKEUP: f64 = 0.5e-6;

/// `fixed + n * per_element`, through the medians at `SMALL` and a large
/// size.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Fit {
    fixed: f64,
    per_element: f64,
}

impl Fit {
    fn through(small: f64, large: f64, n: usize) -> Fit {
        let per_element = ((large - small) / n.saturating_sub(SMALL).max(1) as f64).max(0.0);
        Fit {
            fixed: (small - per_element * SMALL as f64).max(0.0),
            per_element,
        }
    }
}

/// Sets the figures of `p` that the fits of `cpu-scalar`, `cpu-simd` and
/// `cpu-parallel` (in that order) measured.
fn apply(p: &mut CpuProfile, [scalar, simd, parallel]: [Option<Fit>; 3]) {
    if let Some(f) = scalar {
        p.scalar_fixed = f.fixed;
        // The interpreter's per-element figures keep their proportions,
        // scaled to its measured speed.
        let priced = p.scalar_element + OPS * p.scalar_op;
        if f.per_element > 0.0 && priced > 0.0 {
            let k = f.per_element / priced;
            p.scalar_element *= k;
            p.scalar_op *= k;
            p.scalar_transcendental *= k;
        }
    }
    if let Some(f) = simd {
        p.simd_fixed = f.fixed;
        p.probed = true;
    }
    // A one-task stage of `cpu-parallel` pays a task's set-up (priced at
    // `simd_fixed`) and its own.
    if let (Some(f), Some(s)) = (parallel, simd) {
        p.parallel_fixed = (f.fixed - s.fixed).max(0.0);
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_fit_goes_through_both_sizes() {
        let n = 4096;
        let f = Fit::through(300e-9, 300e-9 + (n - SMALL) as f64 * 2e-9, n);
        assert!((f.per_element - 2e-9).abs() < 1e-15, "{f:?}");
        assert!(
            (f.fixed - (300e-9 - SMALL as f64 * 2e-9)).abs() < 1e-12,
            "{f:?}"
        );
        // Noise that makes the large run look cheaper is no negative speed.
        let f = Fit::through(500e-9, 400e-9, n);
        assert_eq!(f.per_element, 0.0);
        assert_eq!(f.fixed, 500e-9);
    }

    #[test]
    fn the_fits_set_the_backend_figures() {
        let prior = CpuProfile::default();
        let mut p = prior.clone();
        let fit = |fixed, per_element| Some(Fit { fixed, per_element });
        let per = 2.0 * (prior.scalar_element + OPS * prior.scalar_op);
        apply(
            &mut p,
            [fit(400e-9, per), fit(250e-9, 0.1e-9), fit(600e-9, 0.1e-9)],
        );
        assert_eq!(p.scalar_fixed, 400e-9);
        assert!((p.scalar_element - 2.0 * prior.scalar_element).abs() < 1e-18);
        assert!((p.scalar_op - 2.0 * prior.scalar_op).abs() < 1e-18);
        assert_eq!(p.simd_fixed, 250e-9);
        assert!((p.parallel_fixed - 350e-9).abs() < 1e-15);
        // Unmeasured backends keep their figures.
        let mut q = prior.clone();
        apply(&mut q, [None, None, fit(600e-9, 0.0)]);
        assert_eq!(q, prior);
    }

    #[test]
    fn the_pools_wake_up_is_what_the_pooled_run_left() {
        let p = CpuProfile {
            threads: 2,
            simd_fixed: 200e-9,
            parallel_fixed: 100e-9,
            ..CpuProfile::default()
        };
        // 20 us on one core is 10 us of each thread's; the two tasks' set-up
        // and the stage's own besides: 2 us of the 12.5 us are the wake-up.
        let simd = 20e-6 + 200e-9;
        let w = pool_wakeup(&p, simd, 12.5e-6);
        assert!(
            (w - (12.5e-6 - 10e-6 - 400e-9 - 100e-9)).abs() < 1e-12,
            "{w}"
        );
        // A pooled run measured faster than its share is noise, not a
        // free pool.
        assert_eq!(pool_wakeup(&p, simd, 5e-6), MIN_WAKEUP);
    }

    #[test]
    fn the_probe_measures_this_machines_backends() {
        let mut p = CpuProfile::default();
        measure(&mut p, Instant::now() + Duration::from_secs(5));
        let (sane, bad) = p.clone().sanitized();
        assert!(bad.is_empty(), "{bad:?} in {p:?}");
        // Measured, not the priors: a 64-element run of `cpu-simd` costs
        // its set-up, and the interpreter's speed is its own. (Its fixed
        // cost may fit at zero: at 64 elements its work is ~90% of a run.)
        let prior = CpuProfile::default();
        assert!(sane.simd_fixed > 0.0 && sane.simd_fixed != prior.simd_fixed);
        assert!(sane.scalar_element != prior.scalar_element);
    }
}
