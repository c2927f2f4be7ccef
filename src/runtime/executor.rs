//! The executor: plan (cache), measure the workload, select, run with
//! fallback, and record `ExecutionMetrics` in the run log.
//!
//! A backend that returns an error — or panics — is recorded as a failed
//! attempt and the next backend in the decision's order runs the same plan.

use super::clock::Tick;
use super::Engine;
use crate::backend::{Availability, BackendError, BackendKind, Input, Job, Phase, RunStats};
use crate::error::{Error, ErrorKind};
use crate::explain::Explain;
use crate::graph::LogicalTerminal;
use crate::metrics::{Attempt, ExecutionMetrics, PhaseTimes, SelectionReason};
use crate::plan::CompiledPlan;
use crate::plan::{OutputMemory, PlanOutput, WorkloadCharacteristics};
use crate::recommend;
use crate::select::{Decision, Forced, SelectionInput};
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::Duration;

/// Per-query settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryOptions {
    /// Run on this backend (overrides selection and `COMPUTEQ_BACKEND`).
    pub backend: Option<BackendKind>,
    /// Do not retry on another backend when the chosen one fails.
    pub no_fallback: bool,
    /// Keep a collected result on the device when it ran on one.
    pub keep_on_device: bool,
    /// The caller runs this query on one of several threads that already
    /// share the cores (a DataFusion partition): `cpu-parallel` is not a
    /// candidate, so the query does not fan out over cores that are busy.
    pub one_thread: bool,
}

/// A query ready to plan and run (built by a terminal).
pub struct Prepared<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) traced: super::TracedBox,
    pub(crate) inputs: SmallVec<[Input<'a>; 2]>,
    pub(crate) options: QueryOptions,
    pub(crate) started: Tick,
    /// Build sides of joins, run before the query.
    pub(crate) sides: Vec<Side<'a>>,
    /// Columns the query owns (Arrow validities, converted values) and why
    /// it cannot run, if so.
    pub(crate) held: Option<Box<Held>>,
    /// The query's plan when the caller resolved it already (a
    /// pipeline's bound plan), and whether the plan cache had
    /// it then (the metrics' `plan_cache_hit`): the cache is not asked
    /// again, and the trace need not be filled. `None`: planned from the
    /// trace.
    pub(crate) plan: Option<(Arc<CompiledPlan>, bool)>,
}

/// What a query over Arrow data holds beyond its borrowed inputs.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// The validity of each current column (`None`: never null), parallel
    /// to the query's columns.
    pub(crate) validity: SmallVec<[Option<crate::expr::Value>; 4]>,
    /// Columns the query owns (unpacked validity bitmaps, widened values)
    /// and the input each fills when the query runs (the input is an
    /// empty placeholder until then).
    pub(crate) owned: Vec<(u16, crate::types::Column)>,
    /// Why the query cannot run, recorded by the first operation that
    /// does not take nulls; reported by the terminal.
    pub(crate) error: Option<String>,
    /// Sorts put null elements first (`Query::nulls_first`).
    pub(crate) nulls_first: bool,
    /// The conjunctions of validities traced so far, by the sorted
    /// validities they join (one node for one set, so aggregates of one
    /// compound validity compare equal).
    pub(crate) conjunctions: Vec<(SmallVec<[crate::expr::Value; 4]>, crate::expr::Value)>,
}

/// A join's build side that runs before the query: its result columns
/// replace the placeholders at `at` of the query's inputs.
pub(crate) struct Side<'a> {
    /// The build query, ending in a collect of its keys and columns.
    pub(crate) prepared: Prepared<'a>,
    /// Where each collected column goes among the joining query's inputs.
    pub(crate) at: SmallVec<[u16; 4]>,
}

struct Planned {
    plan: Arc<CompiledPlan>,
    plan_cache_hit: bool,
    workload: WorkloadCharacteristics,
    decision: Decision,
    candidates: SmallVec<[BackendKind; 5]>,
    declined: Vec<Attempt>,
    trace_time: Duration,
    plan_time: Duration,
    select_time: Duration,
    /// When selection ended: the first attempt's start (one clock read
    /// fewer on the path of a tiny query).
    selected: Tick,
    /// Whether the selector observes the run when it succeeds at once
    /// (a leased run is observed one time in [`Decision::OBSERVE_LEASED`]).
    observe: bool,
    /// Whether the decision came from this thread's lease.
    leased: bool,
}

/// Leased decisions kept per thread ([`Decision::lease`]), one per plan
/// and workload: a program that runs the same queries in a loop skips
/// selection for them.
const LEASES: usize = 4;

/// A decision the selector leased, for the next runs of one query on this
/// thread.
struct Lease {
    /// The plan it is for, held weakly (a thread's exit must never free a
    /// plan); while it is held, no other plan can have its address.
    plan: std::sync::Weak<CompiledPlan>,
    /// The selector's [`Selector::generation`](crate::select::Selector::generation)
    /// when it was leased.
    generation: u64,
    options: QueryOptions,
    workload: WorkloadCharacteristics,
    /// Runs left.
    left: u32,
    /// Runs taken.
    taken: u32,
    decision: Decision,
    candidates: SmallVec<[BackendKind; 5]>,
}

impl Lease {
    fn is_of(&self, plan: &Arc<CompiledPlan>) -> bool {
        std::ptr::eq(self.plan.as_ptr(), Arc::as_ptr(plan))
    }

    fn is_for(&self, plan: &Arc<CompiledPlan>, workload: &WorkloadCharacteristics) -> bool {
        self.is_of(plan) && self.workload == *workload
    }
}

thread_local! {
    static LEASED: std::cell::RefCell<[Option<Lease>; LEASES]> = const {
        std::cell::RefCell::new([const { None }; LEASES])
    };
}

/// Takes one run of a lease for this query, when one is held: the
/// decision, the candidates, and whether the run is one the selector
/// observes.
fn leased(
    plan: &Arc<CompiledPlan>,
    generation: u64,
    options: QueryOptions,
    workload: &WorkloadCharacteristics,
) -> Option<(Decision, SmallVec<[BackendKind; 5]>, bool)> {
    LEASED
        .try_with(|l| {
            let mut l = l.try_borrow_mut().ok()?;
            let slot = l
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|s| s.is_for(plan, workload)))?;
            let lease = slot.as_mut()?;
            if lease.left == 0 || lease.generation != generation || lease.options != options {
                *slot = None;
                return None;
            }
            lease.left -= 1;
            let observe = lease.taken.is_multiple_of(Decision::OBSERVE_LEASED);
            lease.taken += 1;
            Some((
                lease.decision.clone(),
                SmallVec::from_slice(&lease.candidates),
                observe,
            ))
        })
        .ok()
        .flatten()
}

/// Keeps `decision`'s lease for the next runs of this query on this
/// thread (replacing its old lease, else the slot used longest ago).
fn keep_lease(
    plan: &Arc<CompiledPlan>,
    generation: u64,
    options: QueryOptions,
    workload: &WorkloadCharacteristics,
    decision: &Decision,
    candidates: &[BackendKind],
) {
    let _ = LEASED.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return;
        };
        let at = l
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.is_for(plan, workload)))
            .or_else(|| l.iter().position(Option::is_none))
            .unwrap_or(0);
        // Newest last: the slot used longest ago is the first.
        let lease = Lease {
            plan: Arc::downgrade(plan),
            generation,
            options,
            workload: workload.clone(),
            left: decision.lease.min(Decision::MAX_LEASE),
            taken: 0,
            decision: decision.clone(),
            candidates: candidates.iter().copied().collect(),
        };
        l[at..].rotate_left(1);
        l[LEASES - 1] = Some(lease);
    });
}

/// Ends this thread's lease for `plan` (a run of it failed).
fn end_lease(plan: &Arc<CompiledPlan>) {
    let _ = LEASED.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            for s in l.iter_mut() {
                if s.as_ref().is_some_and(|s| s.is_of(plan)) {
                    *s = None;
                }
            }
        }
    });
}

fn plan(p: &Prepared<'_>) -> Result<Planned, Error> {
    plan_with(p, false)
}

/// Plans `p`; with `use_lease`, from this thread's leased decision when
/// it holds one for the query (runs only: explain shows a full selection).
///
/// The lookup and a leased decision are inlined into the run; a selection
/// proper is [`select`], out of line. (The planned query, ~330 bytes, is
/// still copied out of the `Result` once per query: gdb counts it with or
/// without the inlining.)
#[inline(always)]
fn plan_with(p: &Prepared<'_>, use_lease: bool) -> Result<Planned, Error> {
    let engine = p.engine;
    let captured = p.traced.params.len();
    if captured > crate::expr::MAX_PARAMS {
        // Tracing saturated the slots past the limit: every later value
        // would read the last slot's.
        return Err(Error::new(
            ErrorKind::TooManyParameters,
            format!(
                "the query captures {captured} values (captured variables and literals); \
                 at most {} fit its parameter slots: pass large tables as an input \
                 column (`zip`) instead",
                crate::expr::MAX_PARAMS
            ),
        ));
    }
    let t0 = Tick::now();
    let (plan, hit) = match &p.plan {
        Some((plan, hit)) => (plan.clone(), *hit),
        None => {
            let _span = tracing::trace_span!("computeq.plan").entered();
            engine
                .plans
                .get_or_build(
                    &p.traced.trace,
                    p.traced.params.len(),
                    engine.config.verify_passes,
                )
                .map_err(|e| Error::new(ErrorKind::InvalidQuery, e.to_string()))?
        }
    };
    if !hit {
        tracing::debug!(
            fingerprint = plan.fingerprint,
            stages = plan.plan.stages.len(),
            passes = ?plan.report.passes_applied,
            "computeq.plan_built"
        );
    }
    let _select = tracing::trace_span!("computeq.select").entered();
    let mut workload = WorkloadCharacteristics::with_statics(&plan.statics, &p.inputs);
    workload.output_on_device = p.options.keep_on_device;
    workload.output_memory = plan.expected_output_memory(workload.elements);
    let forced = p
        .options
        .backend
        .map(Forced::Query)
        .or(engine.config.forced_backend.map(Forced::Environment));
    let generation = engine.selector.generation();
    if use_lease {
        if let Some((decision, candidates, observe)) =
            leased(&plan, generation, p.options, &workload)
        {
            // No choice is made: the lease's lookup is timed with the
            // plan's (`select` zero), one clock read fewer (a `rdtsc` costs
            // ~10 ns on this project's VM, far more than its one
            // instruction suggests to callgrind).
            let t2 = Tick::now();
            return Ok(Planned {
                plan_cache_hit: hit,
                workload,
                decision,
                candidates,
                declined: Vec::new(),
                trace_time: t0.since(p.started),
                plan_time: t2.since(t0),
                select_time: Duration::ZERO,
                selected: t2,
                observe,
                leased: true,
                plan,
            });
        }
    }
    let t1 = Tick::now();
    select(
        p,
        Unselected {
            plan,
            hit,
            workload,
            forced,
            generation,
            t0,
            t1,
        },
        use_lease,
        _select,
    )
}

/// A planned query before its selection.
struct Unselected {
    plan: Arc<CompiledPlan>,
    hit: bool,
    workload: WorkloadCharacteristics,
    forced: Option<Forced>,
    generation: u64,
    t0: Tick,
    t1: Tick,
}

/// Selects the backends of `p` (planned as `u`) and, with `use_lease`,
/// keeps the decision's lease; ends the selection's span.
#[inline(never)]
fn select(
    p: &Prepared<'_>,
    u: Unselected,
    use_lease: bool,
    _select: tracing::span::EnteredSpan,
) -> Result<Planned, Error> {
    let engine = p.engine;
    let (plan, hit, workload, forced, generation) =
        (u.plan, u.hit, u.workload, u.forced, u.generation);
    let (t0, t1) = (u.t0, u.t1);
    let mut candidates = SmallVec::new();
    let mut declined = Vec::new();
    let forced_kind = forced.map(|f| match f {
        Forced::Query(k) | Forced::Environment(k) => k,
    });
    // A query may open a device only when it is forced onto it or reads
    // data resident on one; any other is priced from what is known and
    // opened by the run the selector puts on it (see `devices`).
    let pinned_all = matches!(workload.residency, crate::plan::Residency::Device(_));
    // Device probes start after selection: the first query's selection
    // calibrates the host, which a probe would share the cores with.
    let mut probes: SmallVec<[&Arc<dyn crate::backend::Backend>; 2]> = SmallVec::new();
    for b in engine.all_backends() {
        let kind = b.kind();
        if kind.is_device() && !pinned_all && forced_kind != Some(kind) {
            // Probing a device costs tens of milliseconds, once: not for
            // inputs far too small to repay a launch.
            if !b.is_initialized() && workload.elements < DEVICE_PROBE_MIN_ELEMENTS {
                declined.push(Attempt {
                    backend: kind,
                    phase: Phase::Init,
                    message: "not probed: input below the device probe threshold".into(),
                    decline: None,
                });
                continue;
            }
            let verdict = if engine.config.enabled(kind) {
                let mut probe = false;
                let v = engine.devices.consider(engine, b, &plan, &mut probe);
                if probe {
                    probes.push(b);
                }
                v
            } else {
                check(engine, kind, &plan)
            };
            match verdict {
                Ok(()) => candidates.push(kind),
                Err(a) => declined.push(a),
            }
            continue;
        }
        if kind == BackendKind::CpuParallel && p.options.one_thread {
            declined.push(Attempt {
                backend: kind,
                phase: Phase::Init,
                message: "not a candidate: the caller runs this query on one of several \
                          threads that share the cores (one thread per partition)"
                    .into(),
                decline: None,
            });
            continue;
        }
        let verdict = check(engine, kind, &plan);
        if kind.is_device() && verdict.is_ok() && engine.devices.needs_probe(b) {
            probes.push(b);
        }
        match verdict {
            Ok(()) => candidates.push(kind),
            Err(a) => declined.push(a),
        }
    }
    let decision = engine.selector.select(&SelectionInput {
        plan: &plan,
        workload: &workload,
        candidates: &candidates,
        forced,
        measuring: engine.devices.measuring(),
    });
    if use_lease && decision.lease > 0 {
        keep_lease(
            &plan,
            generation,
            p.options,
            &workload,
            &decision,
            &candidates,
        );
    }
    let t2 = Tick::now();
    drop(_select);
    for b in probes {
        engine.devices.start_probe(engine, b);
    }
    Ok(Planned {
        plan_cache_hit: hit,
        workload,
        decision,
        candidates,
        declined,
        trace_time: t0.since(p.started),
        plan_time: t1.since(t0),
        select_time: t2.since(t1),
        selected: t2,
        observe: true,
        leased: false,
        plan,
    })
}

/// Whether `kind` can run `plan` here; the reason when not.
fn check(engine: &Engine, kind: BackendKind, plan: &CompiledPlan) -> Result<(), Attempt> {
    let declined = |phase, message| Attempt {
        backend: kind,
        phase,
        message,
        decline: None,
    };
    if !engine.config.enabled(kind) {
        return Err(declined(Phase::Init, "disabled by configuration".into()));
    }
    let Some(b) = engine.backend(kind) else {
        return Err(declined(Phase::Init, "not compiled in".into()));
    };
    if let Availability::Unavailable(why) = b.availability() {
        return Err(declined(Phase::Init, why));
    }
    plan.supported_by(b.kind(), |p| b.supports(p))
        .map_err(|why| Attempt::declined(kind, why))
}

/// Inputs smaller than this never trigger the creation of a device (a
/// launch alone costs more than a CPU pass over them); a device already
/// created is still considered.
pub const DEVICE_PROBE_MIN_ELEMENTS: u64 = 1 << 15;

fn attempt_of(e: BackendError) -> Attempt {
    Attempt {
        backend: e.backend,
        phase: e.phase,
        message: e.message,
        decline: None,
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs the query: plan, select, execute with fallback, record metrics.
pub fn run(mut p: Prepared<'_>) -> Result<(PlanOutput, ExecutionMetrics), Error> {
    let mut m = None;
    let out = if p.sides.is_empty() && p.held.is_none() {
        // Nothing to run first or to substitute (the common case: no
        // copy of the query into one with shorter lifetimes).
        run_host(&p, Some(&mut m))?
    } else {
        let sides = run_sides(&mut p)?;
        let p = with_side_inputs(p, &sides);
        run_host(&p, Some(&mut m))?
    };
    Ok((out, m.expect("set on success")))
}

/// Runs the query for its value only: its metrics go to the run log
/// without a copy for the caller.
#[inline]
pub fn run_value(mut p: Prepared<'_>) -> Result<PlanOutput, Error> {
    if p.sides.is_empty() && p.held.is_none() {
        return run_host(&p, None);
    }
    let sides = run_sides(&mut p)?;
    let p = with_side_inputs(p, &sides);
    run_host(&p, None)
}

/// A join's build side once it has run: the joining query's inputs its
/// columns go to, and the columns.
type SideColumns = (SmallVec<[u16; 4]>, Vec<crate::types::Column>);

/// Makes each build side of `p`'s joins collect only the columns `p`'s
/// optimized plan reads (its keys, and what the rest of the query uses).
fn trim_sides(p: &mut Prepared<'_>) -> Result<(), Error> {
    if p.sides.is_empty() {
        return Ok(());
    }
    let (plan, _) = p
        .engine
        .plans
        .get_or_build(
            &p.traced.trace,
            p.traced.params.len(),
            p.engine.config.verify_passes,
        )
        .map_err(|e| Error::new(ErrorKind::InvalidQuery, e.to_string()))?;
    let read: SmallVec<[u16; 8]> = plan
        .plan
        .stages
        .iter()
        .flat_map(|s| match &s.terminal {
            crate::plan::Terminal::Join { build, .. } => build.iter().map(|&(k, _)| k).collect(),
            _ => SmallVec::<[u16; 4]>::new(),
        })
        .collect();
    for side in &mut p.sides {
        if let Some(LogicalTerminal::Collect(cols)) = side.prepared.traced.trace.terminal.as_mut() {
            (*cols, side.at) = cols
                .iter()
                .zip(&side.at)
                .filter(|(_, k)| read.contains(k))
                .map(|(&c, &k)| (c, k))
                .unzip();
        }
    }
    Ok(())
}

/// Runs the build sides of `p`'s joins, each a query of its own (planned,
/// selected, recorded in the run log like any other), in order.
/// The columns `p` owns (Arrow validities, converted values) join them,
/// and a query that recorded why it cannot run fails here.
fn run_sides(p: &mut Prepared<'_>) -> Result<Vec<SideColumns>, Error> {
    if p.sides.is_empty() && p.held.is_none() {
        return Ok(Vec::new());
    }
    let owned = take_owned(p)?;
    trim_sides(p)?;
    let mut out: Vec<SideColumns> = std::mem::take(&mut p.sides)
        .into_iter()
        .map(|side| match run_value(side.prepared)? {
            PlanOutput::Columns(cols) => Ok((side.at, cols)),
            PlanOutput::Aggregates(_) => Err(Error::new(
                ErrorKind::InvalidQuery,
                "a join's build side returned aggregates, not columns",
            )),
        })
        .collect::<Result<_, Error>>()?;
    out.extend(owned);
    Ok(out)
}

/// The columns `p` owns, to fill their placeholder inputs, or the error a
/// query over nulls recorded.
fn take_owned(p: &mut Prepared<'_>) -> Result<Vec<SideColumns>, Error> {
    let Some(held) = p.held.take() else {
        return Ok(Vec::new());
    };
    if let Some(why) = held.error {
        return Err(Error::new(ErrorKind::InvalidQuery, why));
    }
    Ok(held
        .owned
        .into_iter()
        .map(|(k, c)| (smallvec::smallvec![k], vec![c]))
        .collect())
}

/// `p` reading the build sides' columns in place of their placeholders
/// (its inputs moved one by one: a `SmallVec` cannot shorten the
/// lifetime of what it holds).
fn with_side_inputs<'b, 'p: 'b>(p: Prepared<'p>, sides: &'b [SideColumns]) -> Prepared<'b> {
    let mut inputs: SmallVec<[Input<'b>; 2]> =
        p.inputs.into_iter().map(|i| i as Input<'b>).collect();
    for (at, cols) in sides {
        for (&k, c) in at.iter().zip(cols) {
            if let Some(input) = inputs.get_mut(k as usize) {
                *input = Input::Host(c.as_ref());
            }
        }
    }
    Prepared {
        engine: p.engine,
        traced: p.traced,
        inputs,
        options: p.options,
        started: p.started,
        sides: Vec::new(),
        held: None,
        plan: p.plan,
    }
}

/// Runs `p` on the host (borrowed, not moved: a query is ~200 bytes, and
/// each move was a copy on the path of a tiny query).
fn run_host(
    p: &Prepared<'_>,
    metrics_out: Option<&mut Option<ExecutionMetrics>>,
) -> Result<PlanOutput, Error> {
    run_with(
        p,
        metrics_out,
        |b, job, stats| b.execute(job, stats),
        output_size,
        |engine, plan, out, m| {
            engine.outputs.record(
                m.fingerprint,
                &plan.plan,
                out,
                m.elements_in,
                m.phases.execute,
            )
        },
    )
}

fn output_size(out: &PlanOutput) -> (u64, u64) {
    match out {
        PlanOutput::Aggregates(a) => (a.len() as u64, 8 * a.len() as u64),
        PlanOutput::Columns(c) => columns_size(c),
    }
}

/// Rows and bytes of host result columns.
fn columns_size(cols: &[crate::types::Column]) -> (u64, u64) {
    (
        cols.first().map_or(0, |c| c.len() as u64),
        cols.iter().map(|c| c.byte_len() as u64).sum(),
    )
}

/// Where a collected result ended up.
pub enum Collected {
    /// On the device that ran the query.
    Device(Vec<Arc<dyn crate::backend::DeviceColumn>>),
    /// On the host (a CPU backend ran it, or a device fell back).
    Host(Vec<crate::types::Column>),
}

/// Runs a collect query keeping the result on the device when a device
/// backend runs it.
pub fn run_to_device(mut p: Prepared<'_>) -> Result<(Collected, ExecutionMetrics), Error> {
    let sides = run_sides(&mut p)?;
    let mut p = with_side_inputs(p, &sides);
    p.options.keep_on_device = true;
    let mut m = None;
    let c = run_with(
        &p,
        Some(&mut m),
        |b, job, stats| {
            if b.kind().is_device() {
                b.execute_to_device(job, stats).map(Collected::Device)
            } else {
                b.execute(job, stats).map(|out| match out {
                    PlanOutput::Columns(c) => Collected::Host(c),
                    PlanOutput::Aggregates(_) => unreachable!("a collect plan returned aggregates"),
                })
            }
        },
        |c| match c {
            Collected::Device(cols) => (
                cols.first().map_or(0, |c| c.len() as u64),
                cols.iter()
                    .map(|c| (c.len() * c.dtype().size()) as u64)
                    .sum(),
            ),
            Collected::Host(cols) => columns_size(cols),
        },
        |_, _, _, _| {},
    )?;
    Ok((c, m.expect("set on success")))
}

/// Runs `p` with `exec` and fallback; on success a copy of the metrics
/// goes to `metrics_out` when given (the run log keeps the original: the
/// metrics are moved, never returned through the `Result`, as they are
/// several hundred bytes).
fn run_with<O>(
    p: &Prepared<'_>,
    metrics_out: Option<&mut Option<ExecutionMetrics>>,
    exec: impl Fn(&dyn crate::backend::Backend, &Job<'_>, &mut RunStats) -> Result<O, BackendError>,
    size: impl Fn(&O) -> (u64, u64),
    record: impl Fn(&Engine, &CompiledPlan, &O, &ExecutionMetrics),
) -> Result<O, Error> {
    // Levels keep tiny queries cheap: with no subscriber at debug level a
    // disabled span costs one cached interest check.
    let span = tracing::debug_span!(
        "computeq.query",
        fingerprint = tracing::field::Empty,
        elements = tracing::field::Empty,
        terminal = tracing::field::Empty,
        backend = tracing::field::Empty,
    );
    let _enter = span.enter();
    let mut planned = plan_with(p, true)?;
    let engine = p.engine;
    if !span.is_disabled() {
        span.record("fingerprint", planned.plan.fingerprint);
        span.record("elements", planned.workload.elements);
        span.record("terminal", planned.workload.terminal);
    }
    tracing::debug!(
        choice = %planned.decision.order.first().map_or("none", |k| k.name()),
        reason = %planned.decision.reason,
        cache_hit = planned.plan_cache_hit,
        "computeq.decision"
    );
    let mut attempts: Vec<Attempt> = Vec::new();
    let fallback = engine.config.fallback && !p.options.no_fallback;
    let first = planned.decision.order.first().copied();
    for &kind in &planned.decision.order {
        if !planned.candidates.contains(&kind) {
            // A forced backend that cannot run here: record why, move on.
            if let Err(a) = check(engine, kind, &planned.plan) {
                attempts.push(a);
                if !fallback {
                    break;
                }
                continue;
            }
        }
        // Borrowed: the engine outlives the run (an `Arc` clone would be
        // two locked adds per query).
        let backend: &dyn crate::backend::Backend = &**engine.backend(kind).expect("checked above");
        let mut stats = RunStats::default();
        let job = Job {
            plan: &planned.plan,
            inputs: &p.inputs,
            params: &p.traced.params,
            keep_on_device: p.options.keep_on_device,
        };
        let t = if attempts.is_empty() {
            planned.selected
        } else {
            Tick::now()
        };
        let exec_span = tracing::debug_span!("computeq.execute", backend = kind.name());
        let _exec = exec_span.enter();
        let measurements = engine.devices.mark();
        // What the backend's result columns are written into is noted on
        // this thread as they are allocated (`Column::for_output`).
        crate::types::take_output_memory();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exec(backend, &job, &mut stats)
        }))
        .unwrap_or_else(|payload| {
            Err(BackendError::new(
                kind,
                Phase::Execute,
                format!("the backend panicked: {}", panic_message(payload)),
            ))
        });
        let end = Tick::now();
        let wall = end.since(t);
        let during_calibration = !engine.devices.quiet_since(measurements);
        let memory = crate::types::take_output_memory();
        drop(_exec);
        match result {
            Ok(out) => {
                // The run is learned from in the bucket of the memory it
                // wrote into, and the plan's next run at the size expects
                // the same.
                if memory != OutputMemory::Unknown {
                    planned
                        .plan
                        .note_output_memory(planned.workload.elements, memory);
                    planned.workload.output_memory = memory;
                }
                let reason = match first {
                    Some(f) if f != kind => SelectionReason::Fallback { from: f },
                    _ => planned.decision.reason,
                };
                // The run ends here: its metrics take the estimates.
                let estimates = std::mem::take(&mut planned.decision.estimates);
                let mut m = metrics(
                    &planned,
                    estimates,
                    kind,
                    reason,
                    attempts,
                    &stats,
                    wall,
                    size(&out),
                    end.since(p.started),
                );
                m.during_calibration = during_calibration;
                m.output_memory = memory;
                span.record("backend", kind.name());
                tracing::debug!(
                    backend = %kind,
                    total_ns = m.phases.total.as_nanos() as u64,
                    compile_ns = m.phases.compile.as_nanos() as u64,
                    transfer_in_ns = m.phases.transfer_in.as_nanos() as u64,
                    execute_ns = m.phases.execute.as_nanos() as u64,
                    transfer_out_ns = m.phases.transfer_out.as_nanos() as u64,
                    "computeq.done"
                );
                // A failed attempt is always observed (it ended the lease),
                // and so is a leased run that took far longer than its
                // decision predicted, which ends the lease too: what the
                // decision stood on (a quiet machine, the allocator's
                // state, a device's load) no longer holds, and the lease's
                // other runs would be observed one in four. (Not one that
                // shared the cores with the calibration: that is why.)
                let surprised = planned.leased && !m.during_calibration && surprising(&m);
                if planned.observe || surprised || !m.attempts.is_empty() {
                    engine.selector.observe(&planned.workload, &m);
                }
                if surprised {
                    end_lease(&planned.plan);
                }
                record(engine, &planned.plan, &out, &m);
                match metrics_out {
                    Some(slot) => {
                        let copy = slot.insert(m.clone());
                        copy.run_id = engine.run_log().push_numbered(m);
                    }
                    None => {
                        engine.run_log().push_numbered(m);
                    }
                }
                return Ok(out);
            }
            Err(e) => {
                tracing::warn!(backend = %kind, phase = %e.phase, error = %e.message, "computeq.backend_failed");
                // The next run asks the selector again (which learns of
                // the failure from this run's metrics).
                end_lease(&planned.plan);
                attempts.push(attempt_of(e));
                if !fallback {
                    break;
                }
            }
        }
    }
    let errors: Vec<BackendError> = attempts
        .iter()
        .map(|a| BackendError::new(a.backend, a.phase, a.message.clone()))
        .collect();
    let kind = if fallback {
        ErrorKind::NoBackend
    } else {
        ErrorKind::BackendFailed
    };
    let msg = if fallback {
        "no backend could run the query"
    } else {
        "the chosen backend failed and fallback is disabled"
    };
    Err(Error::new(kind, msg).with_attempts(errors))
}

/// A run at least this many times its decision's prediction surprises
/// ([`surprising`]).
pub(crate) const SURPRISE_FACTOR: f64 = 3.0;

/// ... and at least this much longer: a sub-microsecond query that the
/// scheduler interrupts for a few microseconds is not news.
pub(crate) const SURPRISE_MIN: Duration = Duration::from_micros(50);

/// Whether a run's backend time (transfers and execution, as the selector
/// records it) is far past the time its decision predicted for it. A run
/// whose decision has no prediction for its backend (a selector that gives
/// none) never is. A run shorter than [`SURPRISE_MIN`], every tiny query,
/// is answered before the prediction is looked up.
fn surprising(m: &ExecutionMetrics) -> bool {
    let p = &m.phases;
    // Saturating: a backend's absurd phase time must not panic here.
    let took = p
        .transfer_in
        .saturating_add(p.execute)
        .saturating_add(p.transfer_out);
    if took <= SURPRISE_MIN {
        return false;
    }
    // In seconds, as predicted: a NaN or infinite prediction surprises no
    // one (both comparisons are false).
    let took = took.as_secs_f64();
    m.estimates
        .iter()
        .find(|e| e.backend == m.backend)
        .is_some_and(|e| {
            took > e.seconds * SURPRISE_FACTOR && took - e.seconds > SURPRISE_MIN.as_secs_f64()
        })
}

#[allow(clippy::too_many_arguments)]
fn metrics(
    planned: &Planned,
    estimates: SmallVec<[crate::metrics::CandidateEstimate; 5]>,
    backend: BackendKind,
    reason: SelectionReason,
    attempts: Vec<Attempt>,
    stats: &RunStats,
    wall: Duration,
    (elements_out, bytes_out): (u64, u64),
    total: Duration,
) -> ExecutionMetrics {
    // Saturating: a backend's phase times are its own word (a custom
    // backend's absurd ones must not panic the query).
    let accounted = stats
        .compile
        .saturating_add(stats.transfer_in)
        .saturating_add(stats.transfer_out);
    let execute = if stats.execute.is_zero() {
        wall.saturating_sub(accounted)
    } else {
        stats.execute
    };
    let report = &planned.plan.report;
    ExecutionMetrics {
        // Numbered by the run log when the run is logged.
        run_id: 0,
        fingerprint: planned.plan.fingerprint,
        backend,
        reason,
        attempts,
        elements_in: planned.workload.elements,
        bytes_in: planned.workload.bytes_in,
        elements_out,
        bytes_out,
        phases: PhaseTimes {
            trace: planned.trace_time,
            plan: if planned.plan_cache_hit {
                planned.plan_time
            } else {
                report.plan_time
            },
            optimize: if planned.plan_cache_hit {
                Duration::ZERO
            } else {
                report.optimize_time
            },
            select: planned.select_time,
            compile: stats.compile,
            transfer_in: stats.transfer_in,
            execute,
            transfer_out: stats.transfer_out,
            total,
            timing: stats.timing,
        },
        plan_cache_hit: planned.plan_cache_hit,
        compile_cache_hit: stats.compile_cached,
        bytes_allocated: stats.bytes_allocated,
        bytes_uploaded: stats.bytes_uploaded,
        bytes_downloaded: stats.bytes_downloaded,
        bytes_resident: stats.bytes_resident,
        estimates,
        parallelism: stats.parallelism,
        launches: stats.launches,
        stages: planned.workload.stages,
        terminal: planned.workload.terminal,
        oom_retries: stats.oom_retries,
        elements_skipped: stats.elements_skipped,
        algorithm: stats.algorithm,
        during_calibration: false,
        output_memory: OutputMemory::Unknown,
    }
}

fn explain_of(
    engine: &Engine,
    planned: &Planned,
    metrics: Option<ExecutionMetrics>,
    producer: Option<recommend::Produced>,
) -> Explain {
    let backend = metrics
        .as_ref()
        .map(|m| m.backend)
        .or(planned.decision.order.first().copied())
        .unwrap_or(BackendKind::CpuScalar);
    let recommendations = recommend::recommend_with(
        &recommend::Context {
            plan: &planned.plan.plan,
            workload: &planned.workload,
            estimates: &planned.decision.estimates,
            backend,
            metrics: metrics.as_ref(),
        },
        &recommend::Evidence {
            declined: &planned.declined,
            producer,
        },
    );
    let mut settings = engine.selector.settings();
    if let Some(k) = engine.config.forced_backend {
        settings.push(("COMPUTEQ_BACKEND", k.name().into()));
    }
    for w in engine.config_warnings() {
        settings.push(("ignored", w.to_string()));
    }
    Explain {
        fingerprint: planned.plan.fingerprint,
        graph: planned.plan.report.graph_text.clone(),
        passes: planned.plan.report.passes_applied.clone(),
        plan: planned.plan.plan.clone(),
        workload: planned.workload.clone(),
        candidates: planned.decision.estimates.to_vec(),
        declined: planned.declined.to_vec(),
        choice: backend,
        reason: metrics
            .as_ref()
            .map(|m| m.reason)
            .unwrap_or(planned.decision.reason),
        settings,
        recommendations,
        metrics,
        build_sides: Vec::new(),
    }
}

/// The plans of `p`'s build sides (trimmed to what `p` reads), without
/// running them.
fn explain_sides(p: &mut Prepared<'_>) -> Result<Vec<(Vec<u16>, Explain)>, Error> {
    trim_sides(p)?;
    p.sides
        .iter_mut()
        .map(|s| explain_ref(&mut s.prepared).map(|e| (s.at.to_vec(), e)))
        .collect()
}

fn explain_ref(p: &mut Prepared<'_>) -> Result<Explain, Error> {
    let planned = plan(p)?;
    let producer = p.engine.outputs.producer_of(&p.inputs);
    let mut e = explain_of(p.engine, &planned, None, producer);
    e.build_sides = explain_sides(p)?;
    Ok(e)
}

/// The plan and decision, without running.
/// A join's build side that would run first is planned too (its inputs
/// here are empty placeholders: the plan is the same, the sizes are not).
pub fn explain(mut p: Prepared<'_>) -> Result<Explain, Error> {
    if p.held.is_none() {
        return explain_ref(&mut p);
    }
    // The columns the query owns fill their inputs (the sizes are real);
    // the build sides are planned first (the substitution drops them).
    let build_sides = explain_sides(&mut p)?;
    let owned = take_owned(&mut p)?;
    let mut p = with_side_inputs(p, &owned);
    let mut e = explain_ref(&mut p)?;
    e.build_sides = build_sides;
    Ok(e)
}

/// Runs the query and returns the plan with its measured metrics.
/// A join's build sides are planned (shown without metrics: each run is
/// in the run log), then run before the query.
pub fn analyze(mut p: Prepared<'_>) -> Result<Explain, Error> {
    let build_sides = explain_sides(&mut p)?;
    let sides = run_sides(&mut p)?;
    let p = with_side_inputs(p, &sides);
    let engine = p.engine;
    let planned = plan(&p)?;
    let producer = engine.outputs.producer_of(&p.inputs);
    let (_, m) = run(p)?;
    let mut e = explain_of(engine, &planned, Some(m), producer);
    e.build_sides = build_sides;
    Ok(e)
}
