//! `cpu-parallel`: the `cpu-simd` block program over rayon's global pool.
//!
//! Owns only the scheduling: which thread runs which leaves. The leaves, the
//! block loops and the combine rules are `cpu_simd`'s, used unchanged, so the
//! results are bit-identical to `cpu-simd` for every thread count.
//!
//! # Scheduling
//!
//! A stage's leaves are cut into tasks of whole leaves (about
//! [`TASKS_PER_THREAD`] per pool thread). The calling thread does not hand
//! the work to the pool and sleep: it posts up to `threads - 1` helper jobs
//! and then claims tasks itself, one at a time from a shared counter, as the
//! helpers do once they are awake. Waking a sleeping worker costs tens of
//! microseconds on our machines; with claiming, that latency only decides
//! how much the helpers get to do, never how long the caller waits (a helper
//! that wakes after the last claim finds nothing and leaves). The caller
//! returns once every claimed task is done.
//!
//! * Reduce: tasks are the subtrees of the leaf midpoint tree at the grain;
//!   their partials are combined afterwards by the same tree, so the result
//!   is the sequential tree's, bit for bit, whatever the grain.
//! * Collect: the output is allocated once and split at leaf boundaries;
//!   each task writes its own window.
//! * Filter + collect: a count pass (the predicate only), a sequential
//!   prefix sum of the leaf counts, then a write pass in which each task
//!   compacts its leaves into its exact window of the output. Memory: the
//!   output plus one `u64` per leaf; order is kept.
//! * Scan: leaf totals in parallel, a sequential left-to-right scan of the
//!   totals into leaf offsets, then every leaf rescanned with its offset in
//!   parallel: the same leaf-local scans and offsets as `cpu-simd`.
//!
//! Nothing inside a task can panic: every operation is panic-free by
//! construction (validated when the stage run is prepared). Were a helper
//! to panic anyway, rayon aborts the process rather than unwind past the
//! borrowed data.

use super::cpu_simd::{
    execute_with, tree_mid, Acct, CollectOut, CollectRun, Driver, Exec, KeyRun, OutSlice, Partials,
    ReduceRun, ScanOut, ScanRun, StageRun, SUB_COUNTS,
};
use super::{Availability, Backend, BackendError, BackendKind, Decline, Job, RunStats};
use crate::expr::{DType, Scalar};
use crate::plan::{PhysicalPlan, PlanOutput};
use crate::relational::Strategy;
use crate::semantics::Settles;
use crate::types::Column;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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

    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        super::cpu_simd::BlockProgram::compile(plan)
            .map(|_| ())
            .map_err(Decline::from)
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let threads = rayon::current_num_threads().max(1);
        let driver = Parallel {
            tasks_wanted: threads * TASKS_PER_THREAD,
            helpers: threads - 1,
        };
        let out = execute_with(job, BackendKind::CpuParallel, &driver, stats)?;
        stats.parallelism = u32::try_from(threads).unwrap_or(u32::MAX);
        Ok(out)
    }
}

/// The rayon driver.
#[derive(Debug)]
pub(crate) struct Parallel {
    /// How many tasks a stage should be cut into.
    pub(crate) tasks_wanted: usize,
    /// How many pool jobs to post besides the calling thread.
    pub(crate) helpers: usize,
}

/// The counter that the caller and the helpers claim tasks from.
struct Claims {
    next: AtomicUsize,
    done: AtomicUsize,
    tasks: usize,
    /// The task body, with its borrow lifetime erased (see the `Send` impl).
    job: *const (dyn Fn(usize) + Sync + 'static),
}

// SAFETY: `job` points to a `Sync` closure, and it is only called by a
// thread that claimed an index below `tasks`; `run_claimed` does not return
// or unwind before every claimed index is counted in `done`, so the closure
// and what it borrows outlive every call. Helpers that start late claim
// nothing and never touch `job`.
unsafe impl Send for Claims {}
unsafe impl Sync for Claims {}

struct CountDone<'a>(&'a AtomicUsize);

impl Drop for CountDone<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl Claims {
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.tasks {
                return;
            }
            // Counted even if the task unwinds, so the caller never waits
            // forever on its own failed task.
            let _done = CountDone(&self.done);
            // SAFETY: index `i` was claimed (see the `Send` impl).
            unsafe { (*self.job)(i) };
        }
    }
}

/// Stops further claims and waits until every claimed task is done; runs
/// when `run_claimed` returns and when it unwinds.
struct WaitClaims<'a>(&'a Claims);

impl Drop for WaitClaims<'_> {
    fn drop(&mut self) {
        let c = self.0;
        let claimed = c.next.fetch_add(c.tasks, Ordering::AcqRel).min(c.tasks);
        let mut spins = 0u32;
        while c.done.load(Ordering::Acquire) < claimed {
            // A claimed task is at most one task's work away: spin briefly,
            // then give the core away.
            if spins < 1 << 12 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Runs `job(i)` for every `i < tasks`, on the calling thread and on up to
/// `helpers` pool workers, each claiming the next index.
fn run_claimed(tasks: usize, helpers: usize, job: &(dyn Fn(usize) + Sync)) {
    if tasks <= 1 || helpers == 0 {
        (0..tasks).for_each(job);
        return;
    }
    let job: *const (dyn Fn(usize) + Sync + '_) = job;
    // SAFETY: only the lifetime changes; see the `Send` impl of `Claims`.
    let job: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(job) };
    let claims = Arc::new(Claims {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        tasks,
        job,
    });
    for _ in 0..helpers.min(tasks - 1) {
        let c = Arc::clone(&claims);
        rayon::spawn(move || c.work());
    }
    let _wait = WaitClaims(&claims);
    claims.work();
}

/// The tasks of leaves `lo..hi`: subtrees of the midpoint tree of at most
/// `grain` leaves, in order.
fn split_tasks(lo: usize, hi: usize, grain: usize, out: &mut Vec<(usize, usize)>) {
    if hi - lo <= grain {
        out.push((lo, hi));
    } else {
        let mid = tree_mid(lo, hi);
        split_tasks(lo, mid, grain, out);
        split_tasks(mid, hi, grain, out);
    }
}

/// Combines task partials by the same midpoint tree `split_tasks` walked.
fn combine_tasks(
    run: &ReduceRun<'_, '_>,
    lo: usize,
    hi: usize,
    grain: usize,
    parts: &mut impl Iterator<Item = Partials>,
) -> Partials {
    if hi - lo <= grain {
        return parts.next().unwrap_or_else(|| run.identity());
    }
    let mid = tree_mid(lo, hi);
    let a = combine_tasks(run, lo, mid, grain, parts);
    let b = combine_tasks(run, mid, hi, grain, parts);
    run.combine(a, b)
}

fn split_outs<'o>(outs: Vec<OutSlice<'o>>, at: usize) -> (Vec<OutSlice<'o>>, Vec<OutSlice<'o>>) {
    outs.into_iter().map(|o| o.split_at(at)).unzip()
}

/// Cuts `outs` into consecutive windows of the given lengths.
fn windows<'o>(
    mut outs: Vec<OutSlice<'o>>,
    lens: impl Iterator<Item = usize>,
) -> Vec<Mutex<Option<Vec<OutSlice<'o>>>>> {
    lens.map(|n| {
        let (w, rest) = split_outs(std::mem::take(&mut outs), n);
        outs = rest;
        Mutex::new(Some(w))
    })
    .collect()
}

fn take<T>(m: &Mutex<Option<T>>) -> Option<T> {
    m.lock().unwrap_or_else(|e| e.into_inner()).take()
}

impl Parallel {
    /// Leaves per task (at least one).
    fn grain(&self, leaves: usize) -> usize {
        leaves.div_ceil(self.tasks_wanted.max(1)).max(1)
    }

    fn tasks(&self, leaves: usize) -> (usize, Vec<(usize, usize)>) {
        let grain = self.grain(leaves);
        let mut tasks = Vec::new();
        if leaves > 0 {
            split_tasks(0, leaves, grain, &mut tasks);
        }
        (grain, tasks)
    }

    /// Runs `f(state, lo, hi)` for every task, each with its own scratch.
    fn run(
        &self,
        run: &StageRun<'_>,
        tasks: &[(usize, usize)],
        acct: &Acct,
        f: &(dyn Fn(&mut Exec, usize, usize, usize) + Sync),
    ) {
        self.run_from(run, tasks, false, acct, f)
    }

    /// [`Parallel::run`], claiming the tasks from the last one down when
    /// `from_end` (a reduction that its last elements settle).
    fn run_from(
        &self,
        run: &StageRun<'_>,
        tasks: &[(usize, usize)],
        from_end: bool,
        acct: &Acct,
        f: &(dyn Fn(&mut Exec, usize, usize, usize) + Sync),
    ) {
        let n = tasks.len();
        run_claimed(n, self.helpers, &|c| {
            let i = if from_end { n - 1 - c } else { c };
            acct.task();
            acct.alloc(run.state_bytes());
            let mut st = run.new_state();
            let (lo, hi) = tasks[i];
            f(&mut st, i, lo, hi);
        });
    }

    /// One value per leaf, computed in parallel.
    fn per_leaf<T: Send + Sync + Clone>(
        &self,
        run: &StageRun<'_>,
        leaves: usize,
        acct: &Acct,
        f: &(dyn Fn(&mut Exec, usize) -> T + Sync),
    ) -> Vec<T> {
        let (_, tasks) = self.tasks(leaves);
        let slots: Vec<OnceLock<Vec<T>>> = tasks.iter().map(|_| OnceLock::new()).collect();
        self.run(run, &tasks, acct, &|st, i, lo, hi| {
            let _ = slots[i].set((lo..hi).map(|j| f(st, j)).collect());
        });
        slots
            .into_iter()
            .flat_map(|s| s.into_inner().unwrap_or_default())
            .collect()
    }
}

impl Driver for Parallel {
    fn strategy(&self) -> Strategy {
        Strategy::Parallel
    }

    /// Each task counts its leaves into its own array; the arrays are
    /// summed in task order (integer sums: any order gives the same).
    fn count_by_key(&self, run: &KeyRun<'_, '_>, acct: &Acct) -> Vec<u64> {
        let (_, tasks) = self.tasks(run.leaves());
        let slots: Vec<OnceLock<Vec<u64>>> = tasks.iter().map(|_| OnceLock::new()).collect();
        // Per task its counts and `u32` sub-counts (`count_leaves`), and
        // the total.
        acct.alloc(((tasks.len() * (SUB_COUNTS * 4 + 8) + 8) * run.keys) as u64);
        self.run(run, &tasks, acct, &|st, i, lo, hi| {
            let mut counts = vec![0u64; run.keys];
            run.count_leaves(st, &mut counts, lo, hi);
            let _ = slots[i].set(counts);
        });
        let mut total = vec![0u64; run.keys];
        for s in slots {
            for (t, c) in total.iter_mut().zip(s.into_inner().unwrap_or_default()) {
                *t += c;
            }
        }
        total
    }

    fn reduce(&self, run: &ReduceRun<'_, '_>, acct: &Acct) -> Partials {
        let leaves = run.leaves();
        let (grain, tasks) = self.tasks(leaves);
        let slots: Vec<OnceLock<Partials>> = tasks.iter().map(|_| OnceLock::new()).collect();
        // When one end settles every aggregate (`first`, `any`, `all`: the
        // earliest task with a settled result; `last`: the latest), a task
        // on the far side of a settled one is not run: its partials could
        // not change the result. `settled` holds that task's index + 1
        // (0: none yet); tasks claimed before it was set run anyway.
        // Tasks are claimed from the settling end, so on any number of
        // threads the far side is claimed last.
        let settles = run.settles();
        let settled = AtomicUsize::new(match settles {
            Some(Settles::Prefix) => usize::MAX,
            _ => 0,
        });
        let from_end = settles == Some(Settles::Suffix);
        self.run_from(run, &tasks, from_end, acct, &|st, i, lo, hi| {
            let skip = match settles {
                Some(Settles::Prefix) => settled.load(Ordering::Relaxed) <= i,
                Some(Settles::Suffix) => settled.load(Ordering::Relaxed) > i + 1,
                None => false,
            };
            let p = if skip {
                acct.skip(run.leaves_len(lo, hi));
                run.identity()
            } else {
                let p = run.reduce_tree(st, acct, lo, hi);
                if settles.is_some() && run.settled(&p) {
                    match settles {
                        Some(Settles::Prefix) => settled.fetch_min(i + 1, Ordering::Relaxed),
                        _ => settled.fetch_max(i + 1, Ordering::Relaxed),
                    };
                }
                p
            };
            let _ = slots[i].set(p);
        });
        let mut parts = slots.into_iter().filter_map(|s| s.into_inner());
        combine_tasks(run, 0, leaves, grain, &mut parts)
    }

    /// Tasks write disjoint windows of the columns' spare capacity, which
    /// together cover every position: no pass zeroes the output first.
    /// (Zeroed columns cost nothing only when the allocator hands out
    /// fresh pages; memory it recycles, as every allocator does for some
    /// sizes, was zeroed by one thread, a third pass over the output.)
    fn store(&self, run: &CollectRun<'_, '_>, acct: &Acct) -> Vec<Column> {
        let len = run.len();
        let mut cols: Vec<Column> = run
            .collect_types()
            .iter()
            .map(|&t| Column::for_output(t, len))
            .collect();
        acct.alloc(cols.iter().map(|c| (c.dtype().size() * len) as u64).sum());
        let outs: Vec<OutSlice<'_>> = cols.iter_mut().map(|c| OutSlice::spare(c, len)).collect();
        let (_, tasks) = self.tasks(run.leaves());
        let span = |&(lo, hi): &(usize, usize)| run.leaves_span(lo, hi);
        let wins = windows(outs, tasks.iter().map(|t| span(t).1 - span(t).0));
        self.run(run, &tasks, acct, &|st, i, lo, hi| {
            if let Some(mut w) = take(&wins[i]) {
                let (start, end) = span(&(lo, hi));
                run.store_range(st, start, end, CollectOut::Windows(&mut w));
            }
        });
        // Every window taken: every task ran (a task that panicked never
        // gets here, rayon resumes the panic above).
        assert!(
            wins.iter().all(|w| take(w).is_none()),
            "a collect task did not run"
        );
        drop(wins);
        for c in &mut cols {
            // SAFETY: the capacity holds `len` elements (`for_output`), and
            // the tasks' windows, which tile `0..len`, each wrote every
            // position of its own (`store_range` writes each block whole).
            unsafe { c.set_len(len) };
        }
        cols
    }

    fn compact(&self, run: &CollectRun<'_, '_>, acct: &Acct) -> Vec<Column> {
        let leaves = run.leaves();
        let types = run.collect_types();
        let empty = || types.iter().map(|&t| Column::with_capacity(t, 0)).collect();
        let Some(counter) = run.count_run().filter(|_| leaves > 0) else {
            return empty();
        };
        let Some(count) = counter.as_reduce() else {
            return empty();
        };
        // Pass 1: survivors per leaf.
        acct.alloc((leaves * 8 * 2) as u64);
        let counts = self.per_leaf(&counter, leaves, acct, &|st, j| {
            count
                .reduce_leaf(st, acct, j)
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
        let (_, tasks) = self.tasks(leaves);
        let outs: Vec<OutSlice<'_>> = cols.iter_mut().map(OutSlice::of).collect();
        let wins = windows(
            outs,
            tasks.iter().map(|&(lo, hi)| offsets[hi] - offsets[lo]),
        );
        self.run(run, &tasks, acct, &|st, i, lo, hi| {
            if let Some(mut w) = take(&wins[i]) {
                run.compact_range(
                    st,
                    run.leaf_range(lo).0,
                    run.leaf_range(hi - 1).1,
                    CollectOut::Windows(&mut w),
                );
            }
        });
        cols
    }

    fn scan(&self, run: &ScanRun<'_, '_>, ty: DType, acct: &Acct) -> Column {
        let mut col = Column::zeroed(ty, run.len());
        acct.alloc(col.byte_len() as u64);
        let leaves = run.leaves();
        if leaves == 0 {
            return col;
        }
        let out = OutSlice::of(&mut col);
        // Pass 1: totals of every leaf but the last (nothing follows it).
        acct.alloc((leaves * std::mem::size_of::<Scalar>() * 2) as u64);
        let totals = self.per_leaf(run, leaves - 1, acct, &|st, j| {
            run.scan_leaf(st, j, None, ScanOut::Total)
        });
        // Leaf offsets, left to right: exactly the carries of cpu-simd.
        let mut offsets: Vec<Option<Scalar>> = Vec::with_capacity(leaves);
        let mut offset = None;
        offsets.push(None);
        for &t in &totals {
            offset = run.scan_carry(offset, t);
            offsets.push(offset);
        }
        // Pass 2: every leaf rescanned with its offset.
        let (_, tasks) = self.tasks(leaves);
        let span = |&(lo, hi): &(usize, usize)| run.leaves_span(lo, hi);
        let wins = windows(vec![out], tasks.iter().map(|t| span(t).1 - span(t).0));
        self.run(run, &tasks, acct, &|st, i, lo, hi| {
            let Some(w) = take(&wins[i]) else {
                return;
            };
            let Some(mut out) = w.into_iter().next() else {
                return;
            };
            for (j, &offset) in offsets.iter().enumerate().take(hi).skip(lo) {
                let (s, e) = run.leaf_range(j);
                let (w, rest) = out.split_at(e - s);
                out = rest;
                run.scan_leaf(st, j, offset, ScanOut::Window(w));
            }
        });
        col
    }
}
