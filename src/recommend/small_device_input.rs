//! Fires when a device backend ran an input so small that the best CPU
//! backend is estimated faster: launches and transfers dominate.

use super::{estimate_of, Context, Recommendation, RecommendationKind, Rule, Severity};
use crate::types::BackendKind;

/// See the module doc.
pub struct SmallDeviceInputRule;

impl Rule for SmallDeviceInputRule {
    fn check(&self, cx: &Context<'_>, _ev: &super::Evidence<'_>) -> Option<Recommendation> {
        if !cx.backend.is_device() {
            return None;
        }
        let dev = cx
            .metrics
            .map(|m| m.phases.total.as_secs_f64())
            .or_else(|| estimate_of(cx, cx.backend))?;
        let cpu = [BackendKind::CpuSimd, BackendKind::CpuParallel]
            .into_iter()
            .filter_map(|k| estimate_of(cx, k))
            .fold(f64::INFINITY, f64::min);
        (cpu.is_finite() && cpu < dev).then(|| Recommendation {
            kind: RecommendationKind::SmallDeviceInput,
            severity: Severity::Warning,
            message: format!(
                "{} ran only {} elements; the CPU is estimated faster at this size. Batch more \
                 data per query or leave it on the CPU",
                cx.backend, cx.workload.elements
            ),
            saving: Some(crate::metrics::secs(dev - cpu)),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::CandidateEstimate;
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, engine_with, kinds, FakeDevice};
    use crate::recommend::{recommend, Context, RecommendationKind::SmallDeviceInput};
    use std::time::Duration;

    #[test]
    fn fires_when_a_device_ran_a_tiny_input() {
        let e = engine_with(FakeDevice {
            transfer: Duration::from_micros(200),
            no_wide: false,
        });
        let xs = vec![1.0f32; 100];
        let x = e.query(&xs).on(BackendKind::Wgpu).explain_analyze().sum();
        assert_eq!(x.metrics.as_ref().unwrap().backend, BackendKind::Wgpu);
        assert!(kinds(&analyzed(&x)).contains(&SmallDeviceInput));
    }

    #[test]
    fn silent_on_the_cpu_or_when_the_device_is_estimated_faster() {
        let xs = vec![1.0f32; 100];
        let x = xs
            .compute()
            .on(BackendKind::CpuSimd)
            .explain_analyze()
            .sum();
        assert!(!kinds(&analyzed(&x)).contains(&SmallDeviceInput));
        // Planned (not run) on a device the model prices below the CPU.
        let x = xs.compute().explain().sum();
        let estimates = [
            CandidateEstimate {
                backend: BackendKind::CpuSimd,
                seconds: 5e-3,
            },
            CandidateEstimate {
                backend: BackendKind::CpuParallel,
                seconds: 3e-3,
            },
            CandidateEstimate {
                backend: BackendKind::Wgpu,
                seconds: 1e-3,
            },
        ];
        let r = recommend(&Context {
            plan: &x.plan,
            workload: &x.workload,
            estimates: &estimates,
            backend: BackendKind::Wgpu,
            metrics: None,
        });
        assert!(!kinds(&r).contains(&SmallDeviceInput));
    }
}
