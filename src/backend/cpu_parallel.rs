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
//! A helper that has done its tasks lingers a while (`Linger`): it waits
//! for the next run's claims, running other pool work meanwhile and
//! yielding its core to the OS when there is none, and the next run hands
//! its claims to it instead of posting a job (which wakes a sleeping
//! worker). rayon's workers fall asleep ~100-200 µs after their last job;
//! a run of 10^5 `f32` elements that found the pool asleep took 50 µs on
//! the 2-vCPU VMs against 26 µs with it awake (and 40 µs on one core), so
//! a program that runs mid-sized queries with a little work in between
//! paid the wake-up on every one.
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
    ReduceRun, ScanOut, ScanRun, StageRun,
};
use super::{Availability, Backend, BackendError, BackendKind, Decline, Job, RunStats};
use crate::expr::{DType, Scalar};
use crate::plan::{PhysicalPlan, PlanOutput};
use crate::relational::Strategy;
use crate::semantics::Settles;
use crate::types::Column;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Tasks per pool thread that a stage is cut into, for load balance.
pub const TASKS_PER_THREAD: usize = 4;

/// How long a helper waits for the next run's claims after its tasks
/// ([`Config::pool_linger`](crate::Config::pool_linger)'s default).
pub const DEFAULT_LINGER: Duration = Duration::from_micros(500);

/// The block-program backend over rayon's global thread pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuParallel {
    /// How long its helpers linger after their tasks (zero: not at all).
    linger: Duration,
}

impl Default for CpuParallel {
    fn default() -> Self {
        CpuParallel::with_linger(DEFAULT_LINGER)
    }
}

impl CpuParallel {
    /// The backend whose helpers wait `linger` for the next run's claims
    /// after their tasks (see the module doc); zero turns it off.
    pub fn with_linger(linger: Duration) -> CpuParallel {
        CpuParallel { linger }
    }
}

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
            linger: self.linger,
        };
        let out = execute_with(job, BackendKind::CpuParallel, &driver, stats)?;
        let threads = u32::try_from(threads).unwrap_or(u32::MAX);
        // The threads that could have worked: no more than the tasks run
        // (a run of one leaf is one task, on the calling thread). A sort,
        // group or join stage's own parallel work is not counted in
        // tasks: a plan with one reports every thread.
        let relational = job
            .plan
            .plan
            .stages
            .iter()
            .any(|s| s.terminal.is_relational());
        stats.parallelism = if relational {
            threads
        } else {
            threads.min(stats.launches.max(1))
        };
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
    /// How long a helper lingers after its tasks ([`Linger`]).
    pub(crate) linger: Duration,
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
struct WaitClaims<'a> {
    claims: &'a Claims,
    /// The claims were offered to lingering helpers.
    offered: bool,
}

impl Drop for WaitClaims<'_> {
    fn drop(&mut self) {
        let c = self.claims;
        // Claims still offered to lingering helpers are withdrawn (a helper
        // that took them already finds nothing left to claim); a run that
        // offered none does not take the lounge's lock again.
        if self.offered {
            LINGER.withdraw(c);
        }
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

/// Helpers waiting for the next run's claims after their tasks, and the
/// claims offered to them. Lock order: `state` is the only lock; nothing
/// runs under it but the bookkeeping below (no task, no pool call).
struct Linger {
    state: parking_lot::Mutex<LingerState>,
    /// Bumped on every offer: what waiting helpers poll without the lock.
    offers: AtomicU64,
}

struct LingerState {
    /// Helpers waiting (each counted until it takes an offer or leaves,
    /// both under the lock: an offer never names more helpers than wait,
    /// and a helper looks at the offer before it leaves). A helper busy
    /// with other pool work it picked up meanwhile counts too: a run
    /// offered to it alone does its tasks on the calling thread until it
    /// is back (slower, never wrong).
    waiting: usize,
    /// One run's claims, and how many waiting helpers may still take them.
    offer: Option<(Arc<Claims>, usize)>,
}

static LINGER: Linger = Linger {
    state: parking_lot::Mutex::new(LingerState {
        waiting: 0,
        offer: None,
    }),
    offers: AtomicU64::new(0),
};

thread_local! {
    /// This thread is a lingering helper (a helper job it runs from the
    /// pool meanwhile does its tasks and returns, never lingers inside).
    static LINGERING: Cell<bool> = const { Cell::new(false) };
}

impl Linger {
    /// Offers `claims` to at most `wanted` waiting helpers; how many it
    /// was offered to (none when another run's offer is pending).
    fn offer(&self, claims: &Arc<Claims>, wanted: usize) -> usize {
        let mut s = self.state.lock();
        if s.offer.is_some() || s.waiting == 0 {
            return 0;
        }
        let n = wanted.min(s.waiting);
        s.offer = Some((Arc::clone(claims), n));
        drop(s);
        self.offers.fetch_add(1, Ordering::Release);
        n
    }

    /// Withdraws the offer of `claims`, if it is still pending.
    fn withdraw(&self, claims: &Claims) {
        let mut s = self.state.lock();
        if s.offer
            .as_ref()
            .is_some_and(|(c, _)| std::ptr::eq(&**c, claims))
        {
            s.offer = None;
        }
    }

    /// Takes one share of the pending offer (and stops waiting), or with
    /// `leave` and no offer, stops waiting; `None` while it waits on.
    fn take(&self, leave: bool) -> Option<Option<Arc<Claims>>> {
        let mut s = self.state.lock();
        let taken = match &mut s.offer {
            Some((c, left)) => {
                let c = Arc::clone(c);
                *left -= 1;
                if *left == 0 {
                    s.offer = None;
                }
                Some(c)
            }
            None if leave => None,
            None => return None,
        };
        s.waiting -= 1;
        Some(taken)
    }

    /// Starts waiting.
    fn arrive(&self) {
        self.state.lock().waiting += 1;
    }
}

/// A helper's wait for more claims after its tasks: up to `linger` after
/// the last ones, taking each offer, running other pool work when there
/// is some and yielding the core to the OS when there is none. Not on a
/// thread that is lingering already (or outside the pool).
fn linger(linger: Duration) {
    if linger.is_zero() || LINGERING.get() || rayon::current_thread_index().is_none() {
        return;
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            LINGERING.set(false);
        }
    }
    LINGERING.set(true);
    let _reset = Reset;
    LINGER.arrive();
    let mut deadline = Instant::now() + linger;
    let mut seen = LINGER.offers.load(Ordering::Acquire);
    loop {
        let offers = LINGER.offers.load(Ordering::Acquire);
        let expired = Instant::now() >= deadline;
        if offers != seen || expired {
            seen = offers;
            match LINGER.take(expired) {
                Some(Some(claims)) => {
                    claims.work();
                    LINGER.arrive();
                    deadline = Instant::now() + linger;
                }
                Some(None) => return,
                None => {}
            }
        }
        if rayon::yield_now() != Some(rayon::Yield::Executed) {
            std::thread::yield_now();
        }
    }
}

/// Runs `job(i)` for every `i < tasks`, on the calling thread and on up to
/// `helpers` pool workers, each claiming the next index: lingering helpers
/// first, then pool jobs (whose helpers linger `linger` after their tasks).
/// Returns how many lingering helpers it handed its claims to.
fn run_claimed(
    tasks: usize,
    helpers: usize,
    linger: Duration,
    job: &(dyn Fn(usize) + Sync),
) -> usize {
    if tasks <= 1 || helpers == 0 {
        (0..tasks).for_each(job);
        return 0;
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
    let wanted = helpers.min(tasks - 1);
    let offered = LINGER.offer(&claims, wanted);
    // Before anything that could unwind (nothing between the two can).
    let _wait = WaitClaims {
        claims: &claims,
        offered: offered > 0,
    };
    for _ in offered..wanted {
        let c = Arc::clone(&claims);
        rayon::spawn(move || {
            c.work();
            drop(c);
            self::linger(linger);
        });
    }
    claims.work();
    offered
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
        let _ = run_claimed(n, self.helpers, self.linger, &|c| {
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
        let sub: u64 = tasks.iter().map(|&(lo, hi)| run.count_bytes(lo, hi)).sum();
        acct.alloc(sub + (8 * run.keys) as u64);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `tasks` claimed tasks of 0.2 ms each on up to one helper lingering
    /// `linger`: how many lingering helpers took them, and each task's
    /// number of runs.
    fn run(tasks: usize, linger: Duration) -> (usize, Vec<usize>) {
        let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
        let handed = run_claimed(tasks, 1, linger, &|i| {
            runs[i].fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(200));
        });
        (
            handed,
            runs.iter().map(|r| r.load(Ordering::Relaxed)).collect(),
        )
    }

    #[test]
    fn a_lingering_helper_takes_the_next_runs_claims() {
        if rayon::current_num_threads() < 2 {
            eprintln!("skipped: the pool has one thread");
            return;
        }
        // The pool and the lounge are the process's: other tests' runs
        // may take the helper or hold the offer, so a few tries.
        let linger = Duration::from_millis(200);
        let mut handed = 0;
        for _ in 0..50 {
            let (h, runs) = run(8, linger);
            assert!(runs.iter().all(|&r| r == 1), "{runs:?}");
            handed = handed.max(h);
            if handed > 0 {
                break;
            }
        }
        assert_eq!(handed, 1, "no run found its helper lingering");
    }

    #[test]
    fn every_task_runs_once_with_or_without_lingering() {
        for linger in [Duration::ZERO, Duration::from_millis(5)] {
            for tasks in [0, 1, 2, 7, 64] {
                let (_, runs) = run(tasks, linger);
                assert!(runs.iter().all(|&r| r == 1), "{tasks}: {runs:?}");
            }
        }
    }

    #[test]
    fn runs_from_many_threads_share_the_lounge() {
        // Offers, takes and withdrawals from four threads at once: every
        // run's tasks run exactly once.
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for tasks in (0..40).map(|i| 2 + i % 9) {
                        let (_, runs) = run(tasks, Duration::from_millis(2));
                        assert!(runs.iter().all(|&r| r == 1), "{runs:?}");
                    }
                });
            }
        });
    }

    #[test]
    fn threads_outside_the_pool_never_linger() {
        let t = Instant::now();
        linger(Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(!LINGERING.get());
    }
}
