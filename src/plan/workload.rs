//! What one run of a plan asks of a machine: the real input size, bytes to
//! move, work per element, where the data lives. Computed per run from the
//! actual inputs — the selector never guesses the size.

use super::stage::{PhysicalPlan, Terminal};
use crate::expr::Node;
use crate::types::{BackendKind, Input, OutputMemory};

/// Where a run's inputs live.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Residency {
    /// Every input is in host memory.
    Host,
    /// Every input is on this device.
    Device(BackendKind),
    /// Some inputs on the host, some on a device.
    Mixed,
}

/// The measurable shape of one run.
#[derive(Clone, Debug)]
pub struct WorkloadCharacteristics {
    /// Elements of the first stage (the longest pass).
    pub elements: u64,
    /// Rows of a join's build side (its inputs, read whole); 0 without a
    /// join.
    pub build_elements: u64,
    /// Bytes of input read.
    pub bytes_in: u64,
    /// Upper bound of bytes written as the result.
    pub bytes_out: u64,
    /// Element operations per position, summed over stages.
    pub ops_per_element: u32,
    /// Transcendental operations (sqrt, exp, ln, sin, cos) per position.
    pub transcendental_per_element: u32,
    /// Whether any value is 64-bit (`f64 i64 u64`).
    pub wide_types: bool,
    /// Number of stages (passes over memory).
    pub stages: u32,
    /// `reduce`, `collect` or `scan`.
    pub terminal: &'static str,
    /// Where the inputs are.
    pub residency: Residency,
    /// The result is asked to stay on the device (no download).
    pub output_on_device: bool,
    /// The memory its result columns are expected to be written into (when
    /// selecting) or were written into (when learning).
    pub output_memory: OutputMemory,
}

/// Field by field, as derived, except that the terminal name is compared
/// by address first: the names are the plans' static strings, and the
/// derived comparison calls `memcmp` on them. The selector's price memo
/// compares a workload on every query. Destructured in full, so that a new
/// field cannot be forgotten here.
impl PartialEq for WorkloadCharacteristics {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let WorkloadCharacteristics {
            elements,
            build_elements,
            bytes_in,
            bytes_out,
            ops_per_element,
            transcendental_per_element,
            wide_types,
            stages,
            terminal,
            residency,
            output_on_device,
            output_memory,
        } = other;
        self.elements == *elements
            && self.build_elements == *build_elements
            && self.bytes_in == *bytes_in
            && self.bytes_out == *bytes_out
            && self.ops_per_element == *ops_per_element
            && self.transcendental_per_element == *transcendental_per_element
            && self.wide_types == *wide_types
            && self.stages == *stages
            && (std::ptr::eq(self.terminal, *terminal) || self.terminal == *terminal)
            && self.residency == *residency
            && self.output_on_device == *output_on_device
            && self.output_memory == *output_memory
    }
}

/// The parts of a run's shape that depend only on the plan, computed once
/// per cached plan so that a run only looks at its inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanStatics {
    /// Result bytes of a reduction, or `None` for a column result.
    reduce_bytes: Option<u64>,
    /// Result bytes per element of a column result.
    out_bytes_per_element: u64,
    ops_per_element: u32,
    transcendental_per_element: u32,
    wide_types: bool,
    stages: u32,
    terminal: &'static str,
    /// Query inputs read by position (the source, `zip`s): the element
    /// count is the shortest. A join's build side is read whole, and a
    /// build column the plan does not read is not read at all.
    positional: smallvec::SmallVec<[u16; 2]>,
    /// Query inputs of a join's build side.
    build: smallvec::SmallVec<[u16; 2]>,
}

impl PlanStatics {
    /// Walks `plan` once.
    pub fn of(plan: &PhysicalPlan) -> PlanStatics {
        let last = plan.last();
        let out: u64 = last.output_dtypes().iter().map(|d| d.size() as u64).sum();
        let reduce_bytes = match &last.terminal {
            Terminal::Reduce(_) => Some(8 * last.output_dtypes().len() as u64),
            _ => None,
        };
        let mut ops = 0u32;
        let mut trans = 0u32;
        let mut wide = false;
        for s in &plan.stages {
            ops += s.ops_per_element() as u32;
            wide |= s.uses_wide_types();
            trans += s
                .program
                .iter()
                .filter(|(_, n)| matches!(n.node, Node::Unary(op, _) if op.is_transcendental()))
                .count() as u32;
        }
        PlanStatics {
            reduce_bytes,
            out_bytes_per_element: out,
            ops_per_element: ops,
            transcendental_per_element: trans,
            wide_types: wide,
            stages: plan.stages.len() as u32,
            terminal: last.terminal.kind_name(),
            positional: plan
                .stages
                .iter()
                .flat_map(|s| &s.inputs)
                .filter_map(|i| match *i {
                    super::StageInput::Source(k) => Some(k),
                    super::StageInput::Stage { .. } => None,
                })
                .collect(),
            build: plan
                .stages
                .iter()
                .flat_map(|s| match &s.terminal {
                    Terminal::Join { build, .. } => build.as_slice(),
                    _ => &[],
                })
                .map(|&(k, _)| k)
                .collect(),
        }
    }
}

impl WorkloadCharacteristics {
    /// Measures `plan` run over `inputs`.
    pub fn measure(plan: &PhysicalPlan, inputs: &[Input<'_>]) -> WorkloadCharacteristics {
        WorkloadCharacteristics::with_statics(&PlanStatics::of(plan), inputs)
    }

    /// Measures a run over `inputs` of the plan whose statics are `st`.
    pub fn with_statics(st: &PlanStatics, inputs: &[Input<'_>]) -> WorkloadCharacteristics {
        // One host column read by position, the common query: its figures
        // without the general walks (each input's length, type and place
        // are matched once here, not once per walk: ~150 instructions of
        // a query at 10^3).
        if let [Input::Host(c)] = inputs {
            if st.build.is_empty() && st.positional.iter().all(|&k| k == 0) {
                let elements = c.len() as u64;
                let bytes_in = elements * c.dtype().size() as u64;
                return WorkloadCharacteristics::of(st, elements, 0, bytes_in, Residency::Host);
            }
        }
        WorkloadCharacteristics::walked(st, inputs)
    }

    /// The workload of the plan whose statics are `st`, from the figures
    /// its inputs give (the output on the host).
    #[inline(always)]
    fn of(
        st: &PlanStatics,
        elements: u64,
        build_elements: u64,
        bytes_in: u64,
        residency: Residency,
    ) -> WorkloadCharacteristics {
        WorkloadCharacteristics {
            elements,
            build_elements,
            bytes_in,
            bytes_out: st
                .reduce_bytes
                .unwrap_or(elements * st.out_bytes_per_element),
            ops_per_element: st.ops_per_element,
            transcendental_per_element: st.transcendental_per_element,
            wide_types: st.wide_types,
            stages: st.stages,
            terminal: st.terminal,
            residency,
            output_on_device: false,
            output_memory: Default::default(),
        }
    }

    /// [`WorkloadCharacteristics::with_statics`] by the general walks over
    /// the inputs (the tests compare its one-column shortcut with it).
    fn walked(st: &PlanStatics, inputs: &[Input<'_>]) -> WorkloadCharacteristics {
        let positional = |k: usize| st.positional.is_empty() || st.positional.contains(&(k as u16));
        let elements = inputs
            .iter()
            .enumerate()
            .filter(|(k, _)| positional(*k))
            .map(|(_, i)| i.len())
            .min()
            .unwrap_or(0) as u64;
        let bytes_in: u64 = inputs
            .iter()
            .enumerate()
            .map(|(k, i)| {
                let rows = if positional(k) {
                    (i.len() as u64).min(elements)
                } else {
                    i.len() as u64
                };
                rows * i.dtype().size() as u64
            })
            .sum();
        let build_elements = st
            .build
            .iter()
            .filter_map(|&k| inputs.get(k as usize))
            .map(|i| i.len() as u64)
            .max()
            .unwrap_or(0);
        let mut devices = inputs.iter().map(|i| i.device());
        let first = devices.next().flatten();
        let residency = match first {
            None if inputs.iter().all(|i| i.device().is_none()) => Residency::Host,
            Some(d) if inputs.iter().all(|i| i.device() == Some(d)) => Residency::Device(d),
            _ => Residency::Mixed,
        };
        WorkloadCharacteristics::of(st, elements, build_elements, bytes_in, residency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use crate::types::{ColumnRef, Input};

    /// The one-column shortcut of `with_statics` gives the walks' figures,
    /// for reductions, collects, sorts and the variance over empty, one,
    /// 10^3 and 2^20 rows; two inputs still take the walks (the shorter
    /// one's rows, both columns' bytes).
    #[test]
    fn one_host_columns_shortcut_gives_the_walks_figures() {
        let xs = vec![1.0f32; 16];
        let plans = [
            xs.compute().map(|x| x * 2.0).explain().sum().plan,
            xs.compute()
                .filter(|x| x.gt(0.5))
                .explain()
                .collect::<Vec<_>>()
                .plan,
            xs.compute().sort().explain().collect::<Vec<_>>().plan,
            xs.compute().explain().variance().plan,
        ];
        for plan in &plans {
            let st = PlanStatics::of(plan);
            for n in [0usize, 1, 1000, 1 << 20] {
                let col = vec![0.5f32; n];
                let inputs = [Input::Host(ColumnRef::F32(&col))];
                assert_eq!(
                    WorkloadCharacteristics::with_statics(&st, &inputs),
                    WorkloadCharacteristics::walked(&st, &inputs),
                    "{plan:?} over {n}"
                );
            }
        }
        let ys = vec![2.0f32; 16];
        let zipped = xs
            .compute()
            .zip(&ys)
            .map(|(x, y)| x * y)
            .explain()
            .sum()
            .plan;
        let st = PlanStatics::of(&zipped);
        let (a, b) = (vec![1.0f32; 10], vec![1.0f32; 7]);
        let inputs = [
            Input::Host(ColumnRef::F32(&a)),
            Input::Host(ColumnRef::F32(&b)),
        ];
        let w = WorkloadCharacteristics::with_statics(&st, &inputs);
        assert_eq!((w.elements, w.bytes_in), (7, 56));
    }
}
