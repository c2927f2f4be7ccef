//! Fires when a device backend ran an input so small that the best CPU
//! backend is estimated faster: launches and transfers dominate.

use super::{estimate_of, Context, Recommendation, RecommendationKind, Rule, Severity};
use crate::backend::BackendKind;

/// See the module doc.
pub struct SmallDeviceInputRule;

impl Rule for SmallDeviceInputRule {
    fn check(&self, cx: &Context<'_>) -> Option<Recommendation> {
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
            saving: Some(std::time::Duration::from_secs_f64(dev - cpu)),
        })
    }
}
