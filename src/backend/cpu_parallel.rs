//! `cpu-parallel`: the `cpu-simd` block program over rayon's global pool.
//!
//! Owns only the scheduling: which thread runs which leaves. The leaves, the
//! block loops and the combine rules are `cpu_simd`'s, used unchanged, so the
//! results are bit-identical to `cpu-simd` for every thread count.
//!
//! * Reduce: `rayon::join` recursion that splits leaf ranges at the same
//!   midpoints as the reduction tree; below the grain a task evaluates its
//!   subtree sequentially. The grain only decides where tasks stop, never
//!   the tree, so the thread count cannot change a float sum.
//! * Collect: the output is allocated once and split at leaf boundaries;
//!   each task writes its own window.
//! * Filter + collect: a count pass (the predicate only, per leaf, in
//!   parallel), a sequential prefix sum of the leaf counts, then a write pass
//!   in which each task compacts its leaves into its exact window of the
//!   output. Memory: the output plus one `u64` per leaf; order is kept.
//! * Scan: leaf totals in parallel, a sequential left-to-right scan of the
//!   totals into leaf offsets, then every leaf rescanned with its offset in
//!   parallel; the same leaf-local scans and offsets as `cpu-simd`.
//!
//! Nothing inside a task can panic: every operation is panic-free by
//! construction (validated when the stage run is prepared).

use super::cpu_simd::{execute_with, tree_mid, Acct, Driver, OutSlice, Partials, StageRun};
use super::{Availability, Backend, BackendError, BackendKind, Job, RunStats};
use crate::expr::Scalar;
use crate::plan::{PhysicalPlan, PlanOutput};
use crate::runtime::column::Column;
use std::borrow::Cow;

/// Tasks per pool thread that a stage is cut into, for load balance.
pub const TASKS_PER_THREAD: usize = 4;

/// The block-program backend over rayon's global thread pool.
#[derive(Debug, Default)]
pub struct CpuParallel;

impl Backend for CpuParallel {
    fn kind(&self) -> BackendKind {
        BackendKind::CpuParallel
    }

    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Cow<'static, str>> {
        super::cpu_simd::BlockProgram::compile(plan)
            .map(|_| ())
            .map_err(Cow::Owned)
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let threads = rayon::current_num_threads().max(1);
        let driver = Parallel {
            tasks_wanted: threads * TASKS_PER_THREAD,
        };
        let out = execute_with(job, BackendKind::CpuParallel, &driver, stats)?;
        stats.parallelism = u32::try_from(threads).unwrap_or(u32::MAX);
        Ok(out)
    }
}

/// The rayon driver.
#[derive(Debug)]
pub(crate) struct Parallel {
    /// How many sequential tasks a stage should be cut into.
    pub(crate) tasks_wanted: usize,
}

impl Parallel {
    /// Leaves per task (at least one).
    fn grain(&self, leaves: usize) -> usize {
        leaves.div_ceil(self.tasks_wanted.max(1)).max(1)
    }
}

/// Runs `f` on every task range of `lo..hi` (split at tree midpoints down
/// to `grain` leaves), with `data` split alongside by `split(data, lo, mid)`.
fn for_each_task<D: Send>(
    lo: usize,
    hi: usize,
    grain: usize,
    data: D,
    split: &(impl Fn(D, usize, usize, usize) -> (D, D) + Sync),
    f: &(impl Fn(usize, usize, D) + Sync),
) {
    if hi - lo <= grain {
        f(lo, hi, data);
        return;
    }
    let mid = tree_mid(lo, hi);
    let (a, b) = split(data, lo, mid, hi);
    rayon::join(
        || for_each_task(lo, mid, grain, a, split, f),
        || for_each_task(mid, hi, grain, b, split, f),
    );
}

fn split_outs<'o>(outs: Vec<OutSlice<'o>>, at: usize) -> (Vec<OutSlice<'o>>, Vec<OutSlice<'o>>) {
    outs.into_iter().map(|o| o.split_at(at)).unzip()
}

fn reduce_rec(run: &StageRun<'_>, lo: usize, hi: usize, grain: usize, acct: &Acct) -> Partials {
    if hi - lo <= grain {
        acct.task();
        acct.alloc(run.state_bytes());
        let mut st = run.new_state();
        return run.reduce_tree(&mut st, lo, hi);
    }
    let mid = tree_mid(lo, hi);
    let (a, b) = rayon::join(
        || reduce_rec(run, lo, mid, grain, acct),
        || reduce_rec(run, mid, hi, grain, acct),
    );
    run.combine(a, b)
}

/// Fills `out[j - lo]` with `f(leaf j)` for every leaf, in parallel.
fn per_leaf<T: Send>(
    run: &StageRun<'_>,
    leaves: usize,
    grain: usize,
    out: &mut [T],
    acct: &Acct,
    f: &(impl Fn(&mut super::cpu_simd::Exec, usize) -> T + Sync),
) {
    for_each_task(
        0,
        leaves,
        grain,
        out,
        &|d: &mut [T], lo, mid, _| d.split_at_mut(mid - lo),
        &|lo, hi, d: &mut [T]| {
            acct.task();
            acct.alloc(run.state_bytes());
            let mut st = run.new_state();
            for (j, slot) in (lo..hi).zip(d.iter_mut()) {
                *slot = f(&mut st, j);
            }
        },
    );
}

impl Driver for Parallel {
    fn reduce(&self, run: &StageRun<'_>, acct: &Acct) -> Partials {
        let leaves = run.leaves();
        reduce_rec(run, 0, leaves, self.grain(leaves), acct)
    }

    fn store(&self, run: &StageRun<'_>, outs: Vec<OutSlice<'_>>, acct: &Acct) {
        let leaves = run.leaves();
        if leaves == 0 {
            return;
        }
        for_each_task(
            0,
            leaves,
            self.grain(leaves),
            outs,
            &|outs, lo, mid, _| split_outs(outs, run.leaf_range(mid).0 - run.leaf_range(lo).0),
            &|lo, hi, mut outs| {
                acct.task();
                acct.alloc(run.state_bytes());
                let mut st = run.new_state();
                let (start, _) = run.leaf_range(lo);
                let (_, end) = run.leaf_range(hi - 1);
                run.store_range(&mut st, start, end, &mut outs);
            },
        );
    }

    fn compact(&self, run: &StageRun<'_>, acct: &Acct) -> Vec<Column> {
        let leaves = run.leaves();
        let types = run.collect_types();
        let Some(counter) = run.count_run().filter(|_| leaves > 0) else {
            return types.iter().map(|&t| Column::with_capacity(t, 0)).collect();
        };
        let grain = self.grain(leaves);
        // Pass 1: survivors per leaf.
        let mut counts = vec![0u64; leaves];
        acct.alloc((leaves * 8 * 2) as u64);
        per_leaf(&counter, leaves, grain, &mut counts, acct, &|st, j| {
            counter
                .reduce_leaf(st, j)
                .first()
                .map_or(0, |p| p.v.to_bits())
        });
        // Leaf j writes output positions offsets[j]..offsets[j + 1].
        let mut offsets = Vec::with_capacity(leaves + 1);
        let mut total = 0usize;
        offsets.push(0);
        for &c in &counts {
            total = total.saturating_add(usize::try_from(c).unwrap_or(usize::MAX));
            offsets.push(total);
        }
        // Pass 2: each task compacts its leaves into its exact window.
        let mut cols: Vec<Column> = types.iter().map(|&t| Column::zeroed(t, total)).collect();
        acct.alloc(cols.iter().map(|c| c.byte_len() as u64).sum());
        let outs: Vec<OutSlice<'_>> = cols.iter_mut().map(OutSlice::of).collect();
        for_each_task(
            0,
            leaves,
            grain,
            outs,
            &|outs, lo, mid, _| split_outs(outs, offsets[mid] - offsets[lo]),
            &|lo, hi, mut outs| {
                acct.task();
                acct.alloc(run.state_bytes());
                let mut st = run.new_state();
                let (start, _) = run.leaf_range(lo);
                let (_, end) = run.leaf_range(hi - 1);
                run.compact_into(&mut st, start, end, &mut outs);
            },
        );
        cols
    }

    fn scan(&self, run: &StageRun<'_>, out: OutSlice<'_>, acct: &Acct) {
        let leaves = run.leaves();
        if leaves == 0 {
            return;
        }
        let grain = self.grain(leaves);
        // Pass 1: totals of every leaf but the last (nothing follows it).
        let mut totals = vec![Scalar::Bool(false); leaves - 1];
        acct.alloc((leaves * std::mem::size_of::<Scalar>() * 2) as u64);
        if leaves > 1 {
            per_leaf(
                run,
                leaves - 1,
                self.grain(leaves - 1),
                &mut totals,
                acct,
                &|st, j| run.scan_leaf(st, j, None, None),
            );
        }
        // Leaf offsets, left to right: exactly the carries of cpu-simd.
        let mut offsets: Vec<Option<Scalar>> = Vec::with_capacity(leaves);
        let mut offset = None;
        offsets.push(None);
        for &t in &totals {
            offset = run.scan_carry(offset, t);
            offsets.push(offset);
        }
        // Pass 2: every leaf rescanned with its offset.
        for_each_task(
            0,
            leaves,
            grain,
            out,
            &|out, lo, mid, _| out.split_at(run.leaf_range(mid).0 - run.leaf_range(lo).0),
            &|lo, hi, mut out| {
                acct.task();
                acct.alloc(run.state_bytes());
                let mut st = run.new_state();
                for (j, &offset) in offsets.iter().enumerate().take(hi).skip(lo) {
                    let (s, e) = run.leaf_range(j);
                    let (w, rest) = out.split_at(e - s);
                    out = rest;
                    run.scan_leaf(&mut st, j, offset, Some(w));
                }
            },
        );
    }
}
