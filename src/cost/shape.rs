//! The per-stage summary of a plan that the cost model prices: work and
//! bytes per element of each stage and how it ends. Computed once per plan
//! (the selector keeps it beside the plan's history), so pricing a run
//! never walks an expression program.

use crate::expr::ops::UnaryOp;
use crate::expr::Node;
use crate::plan::{AggKind, PhysicalPlan, StageInput, Terminal, WorkloadCharacteristics};
use smallvec::SmallVec;

/// What a square root costs, in simple operations (see `PlanShape::of`).
const SQRT_OPS: f64 = 4.0;

/// What a histogram's key costs `cpu-simd` in simple operations: its
/// kernel, about ten vector instructions per eight values, and the
/// scalar increment (see `StageShape::simd_ops`).
const BIN_KEY_OPS: f64 = 4.0;

/// How a stage ends, for pricing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StageEnd {
    /// One or more aggregates (a tree reduction on devices).
    Reduce,
    /// Every position written.
    Store,
    /// Survivors of a predicate written in order (compaction: a count or
    /// flag pass before the write).
    Compact,
    /// An inclusive or exclusive scan (a second pass over the data).
    Scan,
}

/// One stage as the cost model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct StageShape {
    /// Element operations per position, with a relational stage's per-row
    /// work counted as operations too (as the devices price it).
    pub ops: f64,
    /// Element operations per position as the reference interpreter runs
    /// them: `ops` without a relational stage's per-row work, which that
    /// backend runs as native code too (`row_ops`).
    pub scalar_ops: f64,
    /// A relational stage's per-row work on the CPU backends (a radix
    /// sort's passes, a hash probe, a join's gathers), in nanoseconds of
    /// one core per position (`row_ns`): scalar code on every CPU
    /// backend, never divided by vector lanes. Priced as lane work, a
    /// sort of 10^6 was estimated at 0.05-0.13x its time on `cpu-simd`
    /// and `cpu-parallel`, and at 2-5x on the interpreter, which priced it
    /// as interpreted operations.
    pub row_ops: f64,
    /// `cpu-parallel`'s time for `row_ops` against one core's (`row_ns`'s
    /// `PARALLEL_*`) from `row_parallel_from` rows: 1 for stages without
    /// per-row work.
    pub row_parallel: f64,
    /// The rows from which `cpu-parallel` runs the stage's per-row work
    /// its own way (`row_parallel`); below them as one core does (factor
    /// 1): a sort partitions over threads from `cost::PARALLEL_SORT_MIN` rows only.
    pub row_parallel_from: f64,
    /// A top-k: its output is its `k` rows, not a row per position (`k`
    /// is a run's parameter; priced as `TOP_K_ROWS`).
    pub fetch: bool,
    /// Element work per position as `cpu-simd` and `cpu-parallel` run
    /// it, in block operations: the passes of the stage's block program
    /// (`StageProgram::passes`, which counts what it fuses as it runs
    /// it), and for a histogram's key, which they compute with one kernel
    /// (`plan::bins`), that kernel, not its dozen operations (priced as
    /// those, their histograms ran at ~0.4x their estimates).
    pub simd_ops: f64,
    /// Transcendental operations per position.
    pub transcendental: f64,
    /// Bytes read per position from the query's inputs.
    pub source_bytes: f64,
    /// Bytes read per position from earlier stages' outputs.
    pub stage_bytes: f64,
    /// Index of the earlier stage whose output this stage reads, if any
    /// (its element count is that stage's output count).
    pub reads_stage: Option<usize>,
    /// Bytes written per output element (0 for reductions).
    pub out_bytes: f64,
    /// How it ends.
    pub end: StageEnd,
    /// Whether the stage reads 64-bit elements: a vector operation then holds
    /// half the lanes, so the CPU backends' operations cost twice as much
    /// per element (not priced, the 64-bit reductions and `stats` ran at
    /// 2-4x their estimates on `cpu-simd`).
    pub wide: bool,
    /// A sort's (or a group's) digit passes on a device, and the
    /// bytes each moves per position (read to count, read and written to
    /// scatter: its words and row indices); `None` for other stages.
    pub device_sort: Option<DeviceSort>,
    /// Bytes a join reads per row of its build side (the keys, and the
    /// columns an inner join writes); 0 without a build side.
    pub build_bytes: f64,
    /// Nanoseconds of one core per build row on the CPU backends
    /// (`row_ns`): a hash insert of the key's word and the row kept.
    pub build_ops: f64,
    /// Increments in workgroup memory per position on a device (a count
    /// per key's: 1); 0 for other stages.
    pub atomics: f64,
    /// A reduction's aggregates beyond its first: each one more workgroup
    /// reduction on a device; an `m2`'s moments (one accumulator of three
    /// figures) a quarter of one (counted as two, lavapipe's variance of
    /// 10^7 was estimated at 4.8x its time; as none, 0.5x); 0 for other
    /// stages.
    pub extra_reductions: f64,
}

/// The rows a top-k is priced to write (its `k`, a parameter of each run,
/// is not in the shape): a stage reading its output reads at most these.
pub const TOP_K_ROWS: f64 = 1000.0;

/// What a relational stage's per-row work costs on the CPU backends, in
/// nanoseconds of one core (`StageShape::row_ops`); measured on the 2-core
/// Xeon VM of docs/performance.md (`bench_relational`, `selector_eval`).
/// Model constants: the history corrects them on another machine.
pub(crate) mod row_ns {
    /// One LSD radix pass over a row's key word (a count and a scatter).
    pub const SORT_PASS: f64 = 1.5;
    /// A row's column gathered after the sort.
    pub const GATHER: f64 = 1.5;
    /// A top-k's selection per row and key (counts, no scatter).
    pub const SELECT: f64 = 0.25;
    /// A group's key hashed or indexed and probed.
    pub const GROUP_KEY: f64 = 1.5;
    /// A group's aggregate updated (its row's slot found and folded:
    /// `distinct` of 10^5 took 1.9 ns a row here, a group's sum 5).
    pub const GROUP_AGG: f64 = 3.0;
    /// A join's probe per key.
    pub const PROBE: f64 = 4.0;
    /// A column a join writes per pair.
    pub const PAIR_COLUMN: f64 = 2.5;
    /// A build row's key inserted.
    pub const BUILD_KEY: f64 = 8.0;
    /// A build row's column kept.
    pub const BUILD_COLUMN: f64 = 1.0;
    /// The reference interpreter's per-row time against one core's of
    /// `cpu-simd` (its stages' columns come through the interpreter): its
    /// sorts, groups and joins ran at ~2x their estimates priced at 1.
    pub const SCALAR: f64 = 2.0;
    /// `cpu-parallel`'s per-row time against one core's, by stage, as
    /// measured on two threads: its sorts partition by key range from
    /// `cost::PARALLEL_SORT_MIN` rows (below, they are `cpu-simd`'s sort) and took
    /// 0.62-0.80x its time at 3·10^6 and 0.70x at 10^7
    /// (`examples/sort_backends`; priced at 1.6x, when the partition
    /// started at 2,048 rows, every sort below 2^20 in `selector_eval` came
    /// out at 1.6-1.7x its time); its groups and joins as long as one
    /// core's, its top-k selections 0.7x.
    pub const PARALLEL_SORT: f64 = 0.75;
    /// See `PARALLEL_SORT`.
    pub const PARALLEL_GROUP: f64 = 1.0;
    /// See `PARALLEL_SORT`.
    pub const PARALLEL_JOIN: f64 = 1.0;
    /// See `PARALLEL_SORT`.
    pub const PARALLEL_SELECT: f64 = 0.7;
}

/// What a device top-k's counting passes cost per row, in rankings of a
/// digit pass (`DeviceSort::ranked`).
const SELECT_RANKED: f64 = 0.6;

/// What a device radix sort does per position, beyond the store it ends
/// in (see `codegen::lower::sort`).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct DeviceSort {
    /// Digit passes, every key together.
    pub passes: f64,
    /// Bytes per position of one pass.
    pub pass_bytes: f64,
    /// Bytes per position outside the passes: the words computed per key
    /// (with the first key's row indices) and the rows read to gather.
    pub other_bytes: f64,
    /// Passes that rank every position in workgroup memory (a sort's
    /// scatters; a share of one in a top-k's selection, which only counts).
    pub ranked: f64,
    /// The rows sorted are a join's build side: `passes`, `pass_bytes`,
    /// `other_bytes` and `ranked` are per build row, and `probe_bytes`
    /// per probe position.
    pub on_build: bool,
    /// Bytes per probe position of a join (its searches of the sorted
    /// build words, the counts, and an inner join's sizing read); 0 for
    /// other stages.
    pub probe_bytes: f64,
    /// Binary searches of the sorted build words per probe position (each
    /// `log2` of the build rows steps); 0 for other stages.
    pub searches: f64,
}

/// A sort key of type `ty` as a radix sort sees it: the bytes of its word
/// (8 for 64-bit types, else 4) and its digit passes (a byte each, one for
/// a `bool`).
fn key_word(ty: crate::expr::DType) -> (f64, f64) {
    let word = if ty.size() == 8 { 8.0 } else { 4.0 };
    let passes = if ty == crate::expr::DType::Bool {
        1.0
    } else {
        word
    };
    (word, passes)
}

impl DeviceSort {
    fn of(s: &crate::plan::Stage) -> Option<DeviceSort> {
        // A device group sorts its rows by the key, then reads the sorted
        // words twice (boundaries, starts) and the rows once (the folds).
        let mut probe = None;
        let (keys, rows, mut other_bytes): (SmallVec<[crate::expr::Value; 2]>, f64, f64) = match &s
            .terminal
        {
            Terminal::Sort {
                keys,
                fetch: Some(_),
                ..
            } => return Some(Self::select(s, keys)),
            Terminal::Sort { keys, columns, .. } => {
                let key_only = keys.len() == 1 && columns.len() == 1 && columns[0] == keys[0].value;
                let rows = if key_only { 0.0 } else { 4.0 };
                (keys.iter().map(|k| k.value).collect(), rows, rows)
            }
            Terminal::Group { keys, .. } => {
                let word: f64 = keys
                    .iter()
                    .map(|&k| s.program.ty(k).size().max(4) as f64)
                    .sum();
                (keys.clone(), 4.0, 4.0 + 2.0 * word)
            }
            // A device join sorts the build side's key words (with its
            // rows for an inner join), then searches them twice per probe
            // row (about 2 log2 m scattered reads, priced as 64 bytes) and
            // writes the counts and first matches; an inner join reads the
            // counts again to size its output and writes the rows out.
            Terminal::Join { keys, kind, .. } if keys.len() == 1 => {
                let inner = *kind == crate::plan::JoinKind::Inner;
                probe = Some(64.0 + 8.0 + if inner { 8.0 } else { 0.0 });
                let rows = if inner { 4.0 } else { 0.0 };
                (keys.clone(), rows, 0.0)
            }
            _ => return None,
        };
        let (mut passes, mut pass_bytes) = (0.0, 0.0);
        for &k in &keys {
            let (word, p) = key_word(s.program.ty(k));
            passes += p;
            // Count: read the word; scatter: read and write word and row.
            pass_bytes += p * (3.0 * word + 2.0 * rows);
            other_bytes += word + rows;
        }
        Some(DeviceSort {
            passes,
            pass_bytes: pass_bytes / passes.max(1.0),
            other_bytes,
            ranked: passes,
            on_build: probe.is_some(),
            probe_bytes: probe.unwrap_or(0.0),
            searches: if probe.is_some() { 2.0 } else { 0.0 },
        })
    }

    /// A top-k's radix select (see `codegen::lower::select`): every key's
    /// words written once; per digit of the keys and of the position
    /// (tie-break), the words of the keys so far read to count; the words
    /// read twice more to take the rows. The sort of the `k` rows taken
    /// is not priced (`k` is far below the length where it matters).
    fn select(s: &crate::plan::Stage, keys: &[crate::semantics::order::SortKey]) -> DeviceSort {
        let (mut passes, mut pass_bytes, mut words) = (4.0, 0.0, 0.0);
        for k in keys {
            let (word, p) = key_word(s.program.ty(k.value));
            words += word;
            passes += p;
            pass_bytes += p * words;
        }
        pass_bytes += 4.0 * words;
        DeviceSort {
            passes,
            pass_bytes: pass_bytes / passes,
            other_bytes: 3.0 * words,
            // Its counts in workgroup memory: on lavapipe ~0.6 of a
            // ranking's work in all (10^6-10^7 rows, `selector_eval`).
            ranked: SELECT_RANKED,
            on_build: false,
            probe_bytes: 0.0,
            searches: 0.0,
        }
    }
}

/// Every stage of a plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlanShape {
    /// In execution order.
    pub stages: SmallVec<[StageShape; 2]>,
}

impl PlanShape {
    /// Summarizes `plan`.
    pub fn of(plan: &PhysicalPlan) -> PlanShape {
        let mut stages: SmallVec<[StageShape; 2]> = SmallVec::new();
        let passes = super::cpu_kernels()
            .map(|k| (k.stage_passes)(plan))
            .unwrap_or_default();
        for (si, s) in plan.stages.iter().enumerate() {
            let mut source_bytes = 0.0;
            let mut stage_bytes = 0.0;
            let mut reads_stage = None;
            for (slot, i) in s.inputs.iter().enumerate() {
                let size = s
                    .program
                    .iter()
                    .find(|(_, d)| matches!(d.node, Node::Input(k) if k as usize == slot))
                    .map_or(4.0, |(_, d)| d.ty.size() as f64);
                match i {
                    StageInput::Source(_) => source_bytes += size,
                    StageInput::Stage { stage, .. } => {
                        stage_bytes += size;
                        reads_stage = Some(*stage as usize);
                    }
                }
            }
            // A square root is one instruction on every backend's vector
            // or device path (not a polynomial, as `exp` and `sin` are):
            // priced as `SQRT_OPS` simple operations. As a transcendental
            // it priced P4's `sqrt(x)*3-x` at ~4x its time on the CPU.
            let unary = |sqrt: bool| {
                s.program
                    .iter()
                    .filter(|(_, n)| {
                        matches!(n.node, Node::Unary(op, _)
                            if op.is_transcendental() && (op == UnaryOp::Sqrt) == sqrt)
                    })
                    .count() as f64
            };
            let trans = unary(false);
            let sqrt_ops = unary(true) * (SQRT_OPS - 1.0);
            // Each aggregate beyond the first is one more update per element
            // (`stats` keeps five): priced as a simple operation each. Not
            // counted, `stats` was priced at 0.3-0.5x its time.
            // An `m2` is a conversion, a subtract, a multiply and two adds
            // (`Σ (x - c)` and `Σ (x - c)²`): four more.
            let extra_aggs = match &s.terminal {
                Terminal::Reduce(aggs) => {
                    let m2 = aggs.iter().filter(|a| a.kind == AggKind::M2).count();
                    aggs.len().saturating_sub(1) as f64 + 4.0 * m2 as f64
                }
                Terminal::CountByKey { .. } => 1.0,
                // A radix sort reads and scatters its `(key, position)`
                // words once per digit (four for 32-bit keys) and gathers
                // the columns: about as much again per pass as the store.
                Terminal::Sort { keys, .. } => 16.0 * keys.len() as f64,
                // A group: the key's word, a hash probe or index, and one
                // scattered update per aggregate.
                Terminal::Group { keys, aggs, .. } => {
                    8.0 * keys.len() as f64 + 2.0 * aggs.len() as f64
                }
                // A join: the key's word, a hash probe, and a gather of
                // every column written (the build table: `build_ops`).
                Terminal::Join { keys, columns, .. } => {
                    8.0 * keys.len() as f64 + 2.0 * columns.len() as f64
                }
                _ => 0.0,
            };
            let top_k = matches!(s.terminal, Terminal::Sort { fetch: Some(_), .. });
            let row_ops = match &s.terminal {
                Terminal::Sort {
                    keys,
                    fetch: Some(_),
                    ..
                } => row_ns::SELECT * keys.len() as f64,
                Terminal::Sort { keys, columns, .. } => {
                    let key_only =
                        keys.len() == 1 && columns.len() == 1 && columns[0] == keys[0].value;
                    let passes: f64 = keys.iter().map(|k| key_word(s.program.ty(k.value)).1).sum();
                    row_ns::SORT_PASS * passes
                        + if key_only {
                            0.0
                        } else {
                            row_ns::GATHER * columns.len() as f64
                        }
                }
                Terminal::Group { keys, aggs, .. } => {
                    row_ns::GROUP_KEY * keys.len() as f64 + row_ns::GROUP_AGG * aggs.len() as f64
                }
                Terminal::Join { keys, columns, .. } => {
                    row_ns::PROBE * keys.len() as f64 + row_ns::PAIR_COLUMN * columns.len() as f64
                }
                _ => 0.0,
            };
            let (row_parallel, row_parallel_from) = match &s.terminal {
                Terminal::Sort { .. } if top_k => (row_ns::PARALLEL_SELECT, 0.0),
                Terminal::Sort { .. } => (row_ns::PARALLEL_SORT, super::PARALLEL_SORT_MIN),
                Terminal::Group { .. } => (row_ns::PARALLEL_GROUP, 0.0),
                Terminal::Join { .. } => (row_ns::PARALLEL_JOIN, 0.0),
                _ => (1.0, 0.0),
            };
            let relational = s.terminal.is_relational();
            let (end, out_bytes) = match &s.terminal {
                Terminal::Reduce(_) => (StageEnd::Reduce, 0.0),
                // A count per key: the key's computation is in the
                // program; the increment is one more operation.
                Terminal::CountByKey { .. } => (StageEnd::Reduce, 0.0),
                Terminal::Group { .. } => (StageEnd::Reduce, 0.0),
                Terminal::Collect(_) => {
                    let w = s.output_dtypes().iter().map(|d| d.size() as f64).sum();
                    let end = if s.predicate.is_some() {
                        StageEnd::Compact
                    } else {
                        StageEnd::Store
                    };
                    (end, w)
                }
                // A top-k writes its `k` rows: nothing per position.
                Terminal::Sort { .. } if top_k => (StageEnd::Store, 0.0),
                // Priced as a store of the materialized columns; the
                // sort's passes and the join's probes are in `extra_aggs`.
                Terminal::Sort { .. } | Terminal::Join { .. } => (
                    StageEnd::Store,
                    s.terminal
                        .materialized()
                        .iter()
                        .map(|&c| s.program.ty(c).size() as f64)
                        .sum(),
                ),
                Terminal::Scan { .. } => (
                    StageEnd::Scan,
                    s.output_dtypes().iter().map(|d| d.size() as f64).sum(),
                ),
            };
            let ops = s.ops_per_element() as f64 + sqrt_ops + extra_aggs;
            // The interpreter's square root is one call, and its `m2` one
            // update (priced at the vector figures, its variances ran at
            // 0.45x their estimates and its square roots at 0.75x).
            let scalar_ops = s.ops_per_element() as f64
                + match &s.terminal {
                    Terminal::Reduce(aggs) => aggs.len().saturating_sub(1) as f64,
                    _ if relational => 0.0,
                    _ => extra_aggs,
                };
            // A build row: its key word hashed and inserted (priced as a
            // probe is), the row kept; its key and written columns read.
            let (build_bytes, build_ops) = match &s.terminal {
                Terminal::Join { keys, build, .. } => (
                    build.iter().map(|&(_, t)| t.size() as f64).sum(),
                    row_ns::BUILD_KEY * keys.len() as f64
                        + row_ns::BUILD_COLUMN * (build.len() - keys.len()) as f64,
                ),
                _ => (0.0, 0.0),
            };
            let simd_ops = match s.terminal {
                Terminal::CountByKey { key, .. }
                    if crate::plan::bins::bin_values(
                        &s.program,
                        key,
                        &crate::plan::bins::uniform_values(&s.program),
                    )
                    .is_some() =>
                {
                    (ops - crate::plan::bins::KEY_OPS + BIN_KEY_OPS).max(1.0)
                }
                Terminal::CountByKey { .. } => ops,
                _ => passes.get(si).copied().flatten().unwrap_or(scalar_ops),
            };
            stages.push(StageShape {
                ops,
                scalar_ops,
                row_ops,
                row_parallel,
                row_parallel_from,
                fetch: top_k,
                simd_ops,
                transcendental: trans,
                source_bytes,
                stage_bytes,
                reads_stage,
                out_bytes,
                end,
                // By what the stage reads: `stats` of `i32` keeps one `f64`
                // sum, which its 32-bit lanes feed (priced as wide, it ran
                // at 0.4x its estimate).
                wide: s
                    .program
                    .iter()
                    .any(|(_, d)| matches!(d.node, Node::Input(_)) && d.ty.size() == 8),
                device_sort: DeviceSort::of(s),
                build_bytes,
                build_ops,
                atomics: match s.terminal {
                    Terminal::CountByKey { .. } => 1.0,
                    _ => 0.0,
                },
                extra_reductions: match &s.terminal {
                    Terminal::Reduce(aggs) => {
                        let m2 = aggs.iter().filter(|a| a.kind == AggKind::M2).count();
                        aggs.len().saturating_sub(1) as f64 + 0.25 * m2 as f64
                    }
                    _ => 0.0,
                },
            });
        }
        PlanShape { stages }
    }

    /// A one-stage approximation from the workload alone (when the plan is
    /// not at hand).
    pub fn from_workload(w: &WorkloadCharacteristics) -> PlanShape {
        let n = (w.elements as f64).max(1.0);
        let end = match w.terminal {
            "collect" => StageEnd::Store,
            "scan" => StageEnd::Scan,
            _ => StageEnd::Reduce,
        };
        let out_bytes = if end == StageEnd::Reduce {
            0.0
        } else {
            w.bytes_out as f64 / n
        };
        PlanShape {
            stages: smallvec::smallvec![StageShape {
                ops: w.ops_per_element as f64,
                scalar_ops: w.ops_per_element as f64,
                row_ops: 0.0,
                row_parallel: 1.0,
                row_parallel_from: 0.0,
                fetch: false,
                simd_ops: w.ops_per_element as f64,
                transcendental: w.transcendental_per_element as f64,
                source_bytes: w.bytes_in as f64 / n,
                stage_bytes: 0.0,
                reads_stage: None,
                out_bytes,
                end,
                wide: w.wide_types,
                device_sort: None,
                build_bytes: 0.0,
                build_ops: 0.0,
                atomics: 0.0,
                extra_reductions: 0.0,
            }],
        }
    }

    /// Whether the plan ends in a compaction (filter + collect): the plans
    /// whose selectivity is learned.
    pub fn ends_in_compaction(&self) -> bool {
        self.stages
            .last()
            .is_some_and(|s| s.end == StageEnd::Compact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn a_square_root_is_priced_as_simple_operations() {
        let xs = vec![1.0f32; 10];
        let sqrt = xs.compute().map(|x| x.sqrt() * 3.0 - x).explain().sum();
        let exp = xs.compute().map(|x| x.exp() * 3.0 - x).explain().sum();
        let (s, e) = (
            &PlanShape::of(&sqrt.plan).stages[0],
            &PlanShape::of(&exp.plan).stages[0],
        );
        assert_eq!(s.transcendental, 0.0);
        assert_eq!(e.transcendental, 1.0);
        assert_eq!(s.ops, e.ops + SQRT_OPS - 1.0);
    }

    #[test]
    fn a_device_top_k_counts_digits_instead_of_ranking() {
        let xs = vec![1.0f32; 10];
        let sort = xs.compute().sort_desc().explain().collect::<Vec<_>>();
        let top = xs.compute().top_k(3).explain().collect::<Vec<_>>();
        let of = |e: &crate::Explain| {
            PlanShape::of(&e.plan)
                .stages
                .iter()
                .find_map(|s| s.device_sort)
                .expect("a device sort shape")
        };
        let (s, t) = (of(&sort), of(&top));
        // A sort: four digit passes, each ranking every position.
        assert_eq!((s.passes, s.ranked), (4.0, 4.0));
        // A top-k: four digits of the key and four of the position
        // (tie-break) counted, none ranked (its counts in workgroup memory
        // priced as a share of one ranking); fewer bytes per pass.
        assert_eq!((t.passes, t.ranked), (8.0, SELECT_RANKED));
        assert!(t.ranked < 1.0);
        assert!(t.pass_bytes < s.pass_bytes, "{t:?} against {s:?}");
    }

    #[test]
    fn a_histograms_key_is_priced_as_the_cpu_kernel_that_computes_it() {
        let xs = vec![0.5f32; 10];
        let hist = xs.compute().explain().histogram(16, 0.0, 1.0);
        let sum = xs.compute().map(|x| x * 2.0 + 1.0).explain().sum();
        let stage = |e: &crate::Explain| PlanShape::of(&e.plan).stages[0].clone();
        let (h, s) = (stage(&hist), stage(&sum));
        // The key's dozen operations on the devices and `cpu-scalar`, its
        // kernel on `cpu-simd`; everything else is priced alike.
        assert_eq!(
            h.simd_ops,
            h.ops - crate::plan::bins::KEY_OPS + BIN_KEY_OPS,
            "{h:?}"
        );
        assert!(h.ops >= 13.0, "{h:?}");
        assert!(s.simd_ops < s.ops, "a sum's operations fuse: {s:?}");
        // An `i64` column's key is computed from its cast to `f64`.
        let ys = vec![5i64; 10];
        let wide = ys.compute().explain().histogram(16, 0.0, 10.0);
        let w = stage(&wide);
        assert_eq!(
            w.simd_ops,
            w.ops - crate::plan::bins::KEY_OPS + BIN_KEY_OPS,
            "{w:?}"
        );
    }

    #[test]
    fn the_vector_backends_price_the_block_programs_passes() {
        let xs = vec![0.5f32; 10];
        let stage = |e: &crate::Explain| PlanShape::of(&e.plan).stages[0].clone();
        // `x * 2 + 1` summed: one fold over `x`, the two operations inside
        // it; two operations for the interpreter.
        let sum = stage(&xs.compute().map(|x| x * 2.0 + 1.0).explain().sum());
        assert!(sum.simd_ops <= 1.0 && sum.ops >= 2.0, "{sum:?}");
        // Two block instructions (a square root, then `* 3 - x` chained)
        // written to the output: more than the fused sum.
        let collect = stage(
            &xs.compute()
                .map(|x| x.sqrt() * 3.0 - x)
                .explain()
                .collect::<Vec<_>>(),
        );
        assert!(collect.simd_ops > 2.0 * sum.simd_ops, "{collect:?}");
        // Every instruction is a pass: a longer chain costs more.
        let long = stage(
            &xs.compute()
                .map(|x| (x * 2.0 + 1.0).max(x * 0.5).min(x + 3.0))
                .explain()
                .sum(),
        );
        assert!(long.simd_ops > sum.simd_ops + 2.0, "{long:?}");
    }

    #[test]
    fn a_relational_stages_rows_are_priced_as_scalar_work() {
        let (xs, ws) = (vec![1u32; 10], vec![1u64; 10]);
        let stages = |e: &crate::Explain| PlanShape::of(&e.plan).stages;
        let sort = |e: &crate::Explain| {
            stages(e)
                .into_iter()
                .find(|s| s.row_ops > 0.0)
                .expect("a relational stage")
        };
        // A sort of its keys alone: a radix pass per key byte.
        let s32 = sort(&xs.compute().sort().explain().collect::<Vec<_>>());
        let s64 = sort(&ws.compute().sort().explain().collect::<Vec<_>>());
        assert_eq!(s32.row_ops, 4.0 * row_ns::SORT_PASS, "{s32:?}");
        assert_eq!(s64.row_ops, 8.0 * row_ns::SORT_PASS, "{s64:?}");
        // The interpreter runs the sort natively too: its operations are
        // the element program's, without the sort's.
        assert!(s32.scalar_ops < s32.ops, "{s32:?}");
        // A top-k selects: far less per row than a sort.
        let top = sort(&xs.compute().top_k(5).explain().collect::<Vec<_>>());
        assert!(top.row_ops < s32.row_ops / 4.0, "{top:?}");
        // A group: its key probed, each aggregate updated.
        let g = xs.compute().explain().group_by(|x| x & 7).sum();
        let g = sort(&g);
        assert_eq!(g.row_ops, row_ns::GROUP_KEY + row_ns::GROUP_AGG, "{g:?}");
    }

    #[test]
    fn a_device_join_prices_the_build_sides_sort_and_the_searches() {
        let (xs, ys) = (vec![1u32; 10], vec![1u64; 4]);
        let semi = xs
            .compute()
            .semi_join(ys.compute(), |x| x, |y| y.cast::<u32>())
            .explain()
            .collect::<Vec<_>>();
        let inner = xs
            .compute()
            .join(ys.compute(), |x| x.cast::<u64>(), |y| y)
            .explain()
            .collect::<Vec<_>>();
        let of = |e: &crate::Explain| {
            PlanShape::of(&e.plan)
                .stages
                .iter()
                .find_map(|s| s.device_sort)
                .expect("a device join shape")
        };
        let (s, i) = (of(&semi), of(&inner));
        // The key's digit passes (4 for a u32 key, 8 for a u64 one), over
        // the build side's rows; an inner join carries the build rows
        // through them and reads its counts again to size its output.
        assert!(s.on_build && i.on_build);
        assert_eq!((s.passes, i.passes), (4.0, 8.0));
        assert!(i.pass_bytes > 2.0 * s.pass_bytes, "{i:?} against {s:?}");
        assert!(s.probe_bytes >= 64.0, "the searches are priced: {s:?}");
        assert!(i.probe_bytes > s.probe_bytes, "{i:?} against {s:?}");
        // On the CPU a build row is read and hashed: the semi-join's key
        // (4 bytes), the inner join's key and written column (16), priced
        // as one core's nanoseconds per row.
        let build = |e: &crate::Explain| {
            let st = PlanShape::of(&e.plan).stages;
            let j = st.iter().find(|s| s.device_sort.is_some()).expect("a join");
            (j.build_bytes, j.build_ops)
        };
        assert_eq!(build(&semi), (4.0, row_ns::BUILD_KEY));
        assert_eq!(
            build(&inner),
            (16.0, row_ns::BUILD_KEY + row_ns::BUILD_COLUMN)
        );
    }
}
