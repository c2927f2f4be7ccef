//! Fires when a device run spent more time moving data than computing:
//! keeping inputs (`to_device`) or results on the device would save the
//! transfer.

use super::{Context, Recommendation, RecommendationKind, Rule, Severity};

/// See the module doc.
pub struct TransfersDominateRule;

impl Rule for TransfersDominateRule {
    fn check(&self, cx: &Context<'_>) -> Option<Recommendation> {
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
