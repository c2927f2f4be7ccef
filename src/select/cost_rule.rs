//! The cost rule: price every candidate with the cost model and take the
//! cheapest. For the CPU this is "one thread below the crossover where the
//! pool's wake-up cost dominates, all threads above", with the crossover
//! following from the profile rather than a hard-coded size.

use super::{Decision, Forced, SelectionInput, Selector};
use crate::cost::CostModel;
use crate::metrics::{CandidateEstimate, SelectionReason};
use parking_lot::RwLock;
use smallvec::SmallVec;

/// Cheapest-estimate selection over a cost model.
#[derive(Debug, Default)]
pub struct CostRule {
    model: RwLock<CostModel>,
}

impl CostRule {
    /// A rule over `model`.
    pub fn new(model: CostModel) -> CostRule {
        CostRule {
            model: RwLock::new(model),
        }
    }

    /// The current model.
    pub fn model(&self) -> CostModel {
        self.model.read().clone()
    }

    /// Replaces the model (after calibration).
    pub fn set_model(&self, model: CostModel) {
        *self.model.write() = model;
    }

    /// The element count above which `cpu-parallel` is estimated cheaper
    /// than `cpu-simd` for a memory-bound `f32` reduction.
    pub fn parallel_crossover(&self) -> u64 {
        let c = &self.model.read().cpu;
        let per_elem_one = 4.0 / c.bandwidth_one;
        let per_elem_all = 4.0 / c.bandwidth_all;
        let gain = (per_elem_one - per_elem_all).max(1e-15);
        ((c.pool_wakeup) / gain) as u64
    }
}

impl Selector for CostRule {
    fn select(&self, input: &SelectionInput<'_>) -> Decision {
        let model = self.model.read();
        let mut estimates: SmallVec<[CandidateEstimate; 5]> = input
            .candidates
            .iter()
            .map(|&k| CandidateEstimate {
                backend: k,
                seconds: model
                    .estimate(k, input.workload, input.plan.has_artifact(k))
                    .total(),
            })
            .collect();
        drop(model);
        let mut by_cost = estimates.clone();
        by_cost.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let mut order: SmallVec<[crate::types::BackendKind; 5]> =
            by_cost.iter().map(|e| e.backend).collect();
        let reason = match input.forced {
            Some(f) => {
                let (k, reason) = match f {
                    Forced::Query(k) => (k, SelectionReason::Forced),
                    Forced::Environment(k) => (k, SelectionReason::Environment),
                };
                order.retain(|&mut b| b != k);
                order.insert(0, k);
                reason
            }
            None if by_cost.len() == 1 => SelectionReason::OnlyCandidate,
            None => SelectionReason::Model {
                estimate: by_cost.first().map_or(0.0, |e| e.seconds),
                runner_up: by_cost.get(1).map(|e| (e.backend, e.seconds)),
            },
        };
        estimates.sort_by_key(|e| e.backend);
        Decision {
            order,
            reason,
            estimates,
            lease: 0,
        }
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        let m = self.model.read();
        vec![
            ("selector", "cost-rule".into()),
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
            ("parallel_crossover_f32_sum", {
                drop(m);
                self.parallel_crossover().to_string()
            }),
        ]
    }
}
