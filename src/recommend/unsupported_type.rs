//! Fires when a device backend declined the plan because of its 64-bit
//! values (a typed [`Decline`](crate::types::Decline): a 64-bit type the
//! adapter lacks, `SHADER_F64`, `SHADER_INT64`, which WebGPU and GL never
//! have, or an operation its language lacks on one, WGSL's `f64` `exp`).

use super::{Context, Evidence, Recommendation, RecommendationKind, Rule, Severity};
use crate::types::Phase;

/// See the module doc.
pub struct UnsupportedTypeRule;

impl Rule for UnsupportedTypeRule {
    fn check(&self, _cx: &Context<'_>, ev: &Evidence<'_>) -> Option<Recommendation> {
        let (a, why) = ev.declined.iter().find_map(|a| match &a.decline {
            Some(d) if a.phase == Phase::Support && a.backend.is_device() && d.is_64_bit() => {
                Some((a, d))
            }
            _ => None,
        })?;
        Some(Recommendation {
            kind: RecommendationKind::UnsupportedType,
            severity: Severity::Info,
            message: format!(
                "{} declined this plan ({why}): if the precision allows, use 32-bit data \
                 (`f32`/`i32`/`u32`, or `.cast::<f32>()` early in the chain) so the device can \
                 run it",
                a.backend
            ),
            saving: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::Attempt;
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed_with, engine_with, kinds, FakeDevice};
    use crate::recommend::RecommendationKind::UnsupportedType;
    use crate::types::Decline;
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
    fn silent_when_the_device_declined_for_another_reason() {
        // The rule reads the typed reason: f64 data and a device that
        // declined for a limit is not a matter of 64-bit values.
        let e = engine();
        let xs = vec![1.0f64; 1000];
        let mut x = e.query(&xs).map(|x| x * 2.0).explain_analyze().sum();
        let mut seen = false;
        for a in &mut x.declined {
            if a.backend == BackendKind::Wgpu {
                let limit = "kernel `k` needs 9 storage buffers, the adapter allows 8";
                *a = Attempt::declined(a.backend, Decline::Limit(limit.into()));
                seen = true;
            }
        }
        assert!(seen, "{x}");
        assert!(!kinds(&analyzed_with(&x, None)).contains(&UnsupportedType));
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
