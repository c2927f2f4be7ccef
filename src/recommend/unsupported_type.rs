//! Fires when a device backend declined the plan before running it and the
//! plan uses 64-bit types (`f64 i64 u64`), which many adapters lack
//! (`SHADER_F64`, `SHADER_INT64`; WebGPU and GL never have them).

use super::{Context, Evidence, Recommendation, RecommendationKind, Rule, Severity};
use crate::types::Phase;

/// See the module doc.
pub struct UnsupportedTypeRule;

impl Rule for UnsupportedTypeRule {
    fn check(&self, cx: &Context<'_>, ev: &Evidence<'_>) -> Option<Recommendation> {
        if !cx.workload.wide_types {
            return None;
        }
        let d = ev
            .declined
            .iter()
            .find(|a| a.phase == Phase::Support && a.backend.is_device())?;
        Some(Recommendation {
            kind: RecommendationKind::UnsupportedType,
            severity: Severity::Info,
            message: format!(
                "{} declined this plan ({}): it uses 64-bit values the device lacks; if the \
                 precision allows, use 32-bit data (`f32`/`i32`/`u32`, or `.cast::<f32>()` \
                 early in the chain) so the device can run it",
                d.backend, d.message
            ),
            saving: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed_with, engine_with, kinds, FakeDevice};
    use crate::recommend::RecommendationKind::UnsupportedType;
    use std::time::Duration;

    fn engine() -> Engine {
        engine_with(FakeDevice {
            transfer: Duration::ZERO,
            no_wide: true,
        })
    }

    #[test]
    fn fires_when_the_device_lacks_f64() {
        let e = engine();
        let xs = vec![1.0f64; 1000];
        let x = e.query(&xs).map(|x| x * 2.0).explain_analyze().sum();
        assert!(x.declined.iter().any(|a| a.backend == BackendKind::Wgpu));
        assert!(kinds(&analyzed_with(&x, None)).contains(&UnsupportedType));
        // Explain itself hands the declined backends to the rules.
        assert!(kinds(&x.recommendations).contains(&UnsupportedType), "{x}");
    }

    #[test]
    fn silent_for_32_bit_types_or_no_declining_device() {
        let e = engine();
        let xs = vec![1.0f32; 1000];
        let x = e.query(&xs).map(|x| x * 2.0).explain_analyze().sum();
        assert!(!kinds(&analyzed_with(&x, None)).contains(&UnsupportedType));
        let ys = vec![1.0f64; 1000];
        let x = ys.compute().map(|x| x * 2.0).explain_analyze().sum();
        assert!(!kinds(&analyzed_with(&x, None)).contains(&UnsupportedType));
    }
}
