//! Fires when a device run spent more time moving data than computing:
//! keeping inputs (`to_device`) or results on the device would save the
//! transfer.

use super::{Context, Recommendation, RecommendationKind, Rule, Severity};

/// See the module doc.
pub struct TransfersDominateRule;

impl Rule for TransfersDominateRule {
    fn check(&self, cx: &Context<'_>, _ev: &super::Evidence<'_>) -> Option<Recommendation> {
        let m = cx.metrics?;
        if !m.backend.is_device() {
            return None;
        }
        let transfer = m.phases.transfer_in + m.phases.transfer_out;
        (transfer > m.phases.execute && m.bytes_uploaded > 0).then(|| Recommendation {
            kind: RecommendationKind::TransfersDominate,
            severity: Severity::Warning,
            message: format!(
                "moving {} bytes to the device took longer than computing; keep the input on \
                 the device with `.to_device()` and reuse it across queries",
                m.bytes_uploaded
            ),
            saving: Some(m.phases.transfer_in),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::recommend::testing::{analyzed, engine_with, kinds, FakeDevice};
    use crate::recommend::RecommendationKind::TransfersDominate;
    use std::time::Duration;

    fn run(transfer: Duration) -> crate::explain::Explain {
        let e = engine_with(FakeDevice {
            transfer,
            no_wide: false,
        });
        let xs = vec![1.0f32; 1000];
        e.query(&xs).on(BackendKind::Wgpu).explain_analyze().sum()
    }

    #[test]
    fn fires_when_the_upload_outweighs_the_work() {
        let x = run(Duration::from_millis(50));
        let r = analyzed(&x);
        assert!(kinds(&r).contains(&TransfersDominate), "{r:?}");
        let rec = r.iter().find(|r| r.kind == TransfersDominate).unwrap();
        assert_eq!(rec.saving, Some(Duration::from_millis(50)));
    }

    #[test]
    fn silent_without_transfers_or_off_the_device() {
        assert!(!kinds(&analyzed(&run(Duration::ZERO))).contains(&TransfersDominate));
        let xs = vec![1.0f32; 1000];
        let x = xs
            .compute()
            .on(BackendKind::CpuSimd)
            .explain_analyze()
            .sum();
        assert!(!kinds(&analyzed(&x)).contains(&TransfersDominate));
    }
}
