//! The differential check of one case on one backend, and the runner
//! settings of the suite.
//!
//! `cpu-scalar` must equal the std oracle bit for bit (NaN matching any NaN);
//! any other backend must equal `cpu-scalar` exactly where the oracle's
//! bound is 0 and within the bound elsewhere (see `oracle`).

use super::ast::Case;
use super::build::{self, Inputs, Out, RunError};
use super::known_bugs::known_bug;
use super::oracle::{self, Expect, Sh};
use super::value::{Col, Val};
use computeq::BackendKind;
use computeq::Engine;
use proptest::test_runner::{Config, RngSeed};
use std::fmt;

/// How one case ended for one backend (failures are `Err`).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Compared and agreed.
    Agreed,
    /// Not comparable: the oracle says the result is not determined under
    /// the backend's tolerance (e.g. a filter on a reassociated float sum).
    Inconclusive(String),
    /// The device backend declined the plan (documented limits such as
    /// 64-bit types on a GL adapter).
    Declined(String),
    /// The backend cannot run here at all.
    Unavailable(String),
    /// The case trips over a known, reported engine bug (`known_bugs`).
    KnownBug(&'static str),
}

/// Counts of outcomes over a run of the suite.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub agreed: usize,
    pub inconclusive: usize,
    pub declined: usize,
    pub unavailable: usize,
    pub known_bug: usize,
    pub first_declined: Option<String>,
}

impl Summary {
    pub fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Agreed => self.agreed += 1,
            Outcome::Inconclusive(_) => self.inconclusive += 1,
            Outcome::Declined(why) => {
                self.declined += 1;
                self.first_declined.get_or_insert_with(|| why.clone());
            }
            Outcome::Unavailable(_) => self.unavailable += 1,
            Outcome::KnownBug(_) => self.known_bug += 1,
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} agreed, {} inconclusive, {} declined, {} unavailable, {} skipped for a known bug",
            self.agreed, self.inconclusive, self.declined, self.unavailable, self.known_bug
        )?;
        if let Some(d) = &self.first_declined {
            write!(f, " (first decline: {d})")?;
        }
        Ok(())
    }
}

/// Runner settings: `COMPUTEQ_DIFF_CASES` cases (default `default_cases`),
/// a fixed seed unless `PROPTEST_RNG_SEED` is set or `COMPUTEQ_DIFF_RANDOM`
/// asks for a random one, no regression files, bounded shrinking.
pub fn differential_config(default_cases: u32) -> Config {
    let mut c = Config::default();
    c.cases = std::env::var("COMPUTEQ_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = if std::env::var_os("COMPUTEQ_DIFF_RANDOM").is_some() {
            RngSeed::Random
        } else {
            RngSeed::Fixed(0xC0_4D_07E0)
        };
    }
    c.failure_persistence = None;
    c.max_shrink_time = 120_000;
    c.max_shrink_iters = 2_000;
    c
}

/// Runs `case` on `cpu-scalar` (checked against the oracle) and on `kind`
/// (checked against `cpu-scalar` within the oracle's bounds). `Err` carries
/// a report of the disagreement.
pub fn run_case(engine: &Engine, kind: BackendKind, case: &Case) -> Result<Outcome, String> {
    run_case_reading(engine, kind, case, false)
}

/// [`run_case`] with the run on `kind` reading the inputs as Arrow arrays
/// (sliced at an offset, no nulls): the same answer as from the slices.
#[cfg(feature = "arrow")]
pub fn run_case_arrow(engine: &Engine, kind: BackendKind, case: &Case) -> Result<Outcome, String> {
    run_case_reading(engine, kind, case, true)
}

fn run_case_reading(
    engine: &Engine,
    kind: BackendKind,
    case: &Case,
    arrow: bool,
) -> Result<Outcome, String> {
    if let Some(bug) = known_bug(case, kind) {
        return Ok(Outcome::KnownBug(bug));
    }
    let inputs = Inputs::of(case);
    let oracle = oracle::run(case, &inputs, &oracle::profile(kind));
    let reference = match build::run(engine, BackendKind::CpuScalar, case, &inputs) {
        Ok((out, _)) => out,
        Err(e) => return Err(format!("cpu-scalar could not run the case: {e:?}\n{case}")),
    };
    exact(&reference, &oracle.expect)
        .map_err(|m| format!("cpu-scalar disagrees with the std-iterator oracle: {m}\n{case}"))?;
    if kind == BackendKind::CpuScalar && !arrow {
        return Ok(Outcome::Agreed);
    }
    #[cfg(feature = "arrow")]
    let read = if arrow {
        Inputs::of(case).with_arrow()
    } else {
        Inputs::of(case)
    };
    #[cfg(not(feature = "arrow"))]
    let read = Inputs::of(case);
    let what = if arrow { " (Arrow inputs)" } else { "" };
    let out = match build::run(engine, kind, case, &read) {
        Ok((out, _)) => out,
        Err(RunError::Unavailable(m)) => return Ok(Outcome::Unavailable(m)),
        Err(RunError::Declined(m)) if kind.is_device() => return Ok(Outcome::Declined(m)),
        // wgpu's guard discarded the run (`codegen::finite`): right only
        // where the oracle saw an infinity or a NaN go through a float
        // operation (or an input holds one, which a reduction may meet).
        Err(RunError::Failed(m)) if kind == BackendKind::Wgpu && m.contains(super::DISCARDED) => {
            return if oracle.met_non_finite || inputs_non_finite(&read) {
                Ok(Outcome::Inconclusive(m))
            } else {
                Err(format!(
                    "wgpu{what} discarded a run that met no infinity or NaN: {m}\n{case}"
                ))
            };
        }
        Err(e) => {
            return Err(format!(
                "{kind}{what} could not run the case: {e:?}\n{case}"
            ))
        }
    };
    if kind == BackendKind::CpuScalar {
        return exact(&out, &oracle.expect)
            .map(|()| Outcome::Agreed)
            .map_err(|m| format!("cpu-scalar{what} disagrees with the oracle: {m}\n{case}"));
    }
    if let Some(why) = oracle.inconclusive {
        return Ok(Outcome::Inconclusive(why));
    }
    within(&out, &reference, &oracle.expect)
        .map_err(|m| format!("{kind}{what} disagrees with cpu-scalar: {m}\n{case}"))?;
    Ok(Outcome::Agreed)
}

/// Whether a float input column holds an infinity or a NaN.
fn inputs_non_finite(inputs: &Inputs) -> bool {
    std::iter::once(&inputs.source)
        .chain(&inputs.partners)
        .any(|c| match c {
            Col::F32(v) => v.iter().any(|x| !x.is_finite()),
            Col::F64(v) => v.iter().any(|x| !x.is_finite()),
            _ => false,
        })
}

// ------------------------------------------------------------ exactness

fn same_f64(a: f64, b: f64) -> bool {
    Val::F64(a).same(Val::F64(b))
}

/// `out` must be the oracle's nominal values, bit for bit.
pub fn exact(out: &Out, expect: &Expect) -> Result<(), String> {
    let val = |what: &str, a: Val, b: &Sh| {
        if a.same(b.v) {
            Ok(())
        } else {
            Err(format!("{what}: got {a}, expected {}", b.v))
        }
    };
    let opt = |what: &str, a: &Option<Val>, b: &Option<Sh>| match (a, b) {
        (None, None) => Ok(()),
        (Some(a), Some(b)) => val(what, *a, b),
        _ => Err(format!("{what}: got {a:?}, expected {:?}", b.map(|s| s.v))),
    };
    let mean = |a: &Option<f64>, b: &Option<Sh>| match (a, b) {
        (None, None) => Ok(()),
        (Some(a), Some(b)) if same_f64(*a, b.v.f64()) => Ok(()),
        _ => Err(format!("mean: got {a:?}, expected {:?}", b.map(|s| s.v))),
    };
    match (out, expect) {
        (Out::Val(a), Expect::Val(b)) => val("value", *a, b),
        (Out::Opt(a), Expect::Opt(b)) => opt("value", a, b),
        (Out::Usize(a), Expect::Usize(b)) if a == b => Ok(()),
        (Out::OptUsize(a), Expect::OptUsize(b, _)) if a == b => Ok(()),
        (Out::Mean(a), Expect::Mean(b)) => mean(a, b),
        (Out::Bool(a), Expect::Bool(b)) if Val::Bool(*a) == b.v => Ok(()),
        (Out::Counts(a), Expect::Counts(b, ..)) if a == b => Ok(()),
        (Out::Cols(a), Expect::Cols(b)) => cols(a, b, None),
        (
            Out::Stats {
                count,
                sum,
                min,
                max,
                mean: m,
            },
            Expect::Stats {
                count: c2,
                sum: s2,
                min: n2,
                max: x2,
                mean: m2,
            },
        ) => {
            if count != c2 {
                return Err(format!("stats.count: got {count}, expected {c2}"));
            }
            val("stats.sum", *sum, s2)?;
            opt("stats.min", min, n2)?;
            opt("stats.max", max, x2)?;
            mean(m, m2)
        }
        (a, b) => Err(format!("got {a:?}, expected {}", describe(b))),
    }
}

fn describe(e: &Expect) -> String {
    match e {
        Expect::Val(s) => format!("{}", s.v),
        Expect::Opt(s) => format!("{:?}", s.map(|s| s.v)),
        Expect::Usize(n) => n.to_string(),
        Expect::OptUsize(n, _) => format!("{n:?}"),
        Expect::Mean(s) => format!("{:?}", s.map(|s| s.v)),
        Expect::Bool(s) => format!("{}", s.v),
        Expect::Counts(c, ..) => format!("counts {c:?}"),
        Expect::Cols(c) => format!(
            "{} column(s) of {} rows",
            c.len(),
            c.first().map_or(0, |c| c.len())
        ),
        Expect::Stats { count, .. } => format!("stats of {count} elements"),
    }
}

/// Columns equal to the oracle's (`reference` = None) or, with a reference,
/// each element within its bound.
fn cols(out: &[Col], expect: &[Vec<Sh>], reference: Option<&[Col]>) -> Result<(), String> {
    if out.len() != expect.len() {
        return Err(format!(
            "got {} columns, expected {}",
            out.len(),
            expect.len()
        ));
    }
    for (c, (col, exp)) in out.iter().zip(expect).enumerate() {
        if col.len() != exp.len() {
            return Err(format!(
                "column {c}: got {} rows, expected {}",
                col.len(),
                exp.len()
            ));
        }
        let mut bad = Vec::new();
        for (i, sh) in exp.iter().enumerate() {
            let got = col.get(i);
            let ok = match reference {
                None => got.same(sh.v),
                Some(r) => close(got, r[c].get(i), sh).is_ok(),
            };
            if !ok {
                bad.push(i);
            }
        }
        if let Some(&i) = bad.first() {
            let want = reference.map_or(sh_str(&exp[i]), |r| {
                format!("{} (bound {})", r[c].get(i), exp[i].e)
            });
            let lo = i.saturating_sub(2);
            let hi = (i + 3).min(exp.len());
            let got: Vec<String> = (lo..hi).map(|k| col.get(k).to_string()).collect();
            let wanted: Vec<String> = (lo..hi)
                .map(|k| reference.map_or(exp[k].v, |r| r[c].get(k)).to_string())
                .collect();
            return Err(format!(
                "column {c}: {} of {} rows differ; first at row {i}: got {}, expected {want}\n  rows {lo}..{hi} got      [{}]\n  rows {lo}..{hi} expected [{}]",
                bad.len(),
                exp.len(),
                col.get(i),
                got.join(", "),
                wanted.join(", ")
            ));
        }
    }
    Ok(())
}

fn sh_str(s: &Sh) -> String {
    s.v.to_string()
}

// ------------------------------------------------------------- tolerance

/// Backend value `b` against reference value `r`, whose bound is `sh.e`.
pub fn close(b: Val, r: Val, sh: &Sh) -> Result<(), String> {
    if b.dtype() != r.dtype() {
        return Err(format!("type: got {b:?}, expected {r:?}"));
    }
    if sh.is_unknown() {
        return Ok(());
    }
    let fail = || {
        Err(format!(
            "got {b}, expected {r}{}",
            if sh.e > 0.0 {
                format!(" ± {:e}", sh.e)
            } else {
                String::new()
            }
        ))
    };
    if !b.dtype().is_float() {
        return if b == r { Ok(()) } else { fail() };
    }
    let (x, y) = (b.f64(), r.f64());
    if y.is_nan() {
        return if x.is_nan() { Ok(()) } else { fail() };
    }
    if !y.is_finite() {
        return if x == y { Ok(()) } else { fail() };
    }
    if !x.is_finite() {
        return fail();
    }
    if sh.e == 0.0 {
        let ok = if sh.z { x == y } else { b.same(r) };
        return if ok { Ok(()) } else { fail() };
    }
    if (x - y).abs() <= sh.e {
        Ok(())
    } else {
        fail()
    }
}

/// The elements counted in `counts` (value counts' keys, after their
/// counts, left out), without overflow.
fn counted(counts: &[u64], keyed: bool) -> u128 {
    let n = if keyed {
        counts.len() / 2
    } else {
        counts.len()
    };
    counts[..n].iter().map(|&c| u128::from(c)).sum()
}

/// The backend's `out` against the reference's, within the oracle's bounds.
pub fn within(out: &Out, reference: &Out, expect: &Expect) -> Result<(), String> {
    let val =
        |what: &str, b: Val, r: Val, sh: &Sh| close(b, r, sh).map_err(|m| format!("{what}: {m}"));
    let opt = |what: &str, b: &Option<Val>, r: &Option<Val>, sh: &Option<Sh>| match (b, r, sh) {
        (None, None, _) => Ok(()),
        (Some(b), Some(r), Some(sh)) => val(what, *b, *r, sh),
        _ => Err(format!("{what}: got {b:?}, expected {r:?}")),
    };
    let mean = |b: &Option<f64>, r: &Option<f64>, sh: &Option<Sh>| {
        opt("mean", &b.map(Val::F64), &r.map(Val::F64), sh)
    };
    match (out, reference, expect) {
        (Out::Val(b), Out::Val(r), Expect::Val(sh)) => val("value", *b, *r, sh),
        (Out::Opt(b), Out::Opt(r), Expect::Opt(sh)) => opt("value", b, r, sh),
        (Out::Usize(b), Out::Usize(r), _) if b == r => Ok(()),
        (Out::OptUsize(b), Out::OptUsize(r), Expect::OptUsize(_, determined))
            if b == r || !determined =>
        {
            Ok(())
        }
        (Out::Mean(b), Out::Mean(r), Expect::Mean(sh)) => mean(b, r, sh),
        (Out::Bool(b), Out::Bool(r), Expect::Bool(sh)) if b == r || sh.e > 0.0 => Ok(()),
        (Out::Cols(b), Out::Cols(r), Expect::Cols(sh)) => cols(b, sh, Some(r)),
        // Undetermined counts (an inexact element may cross an edge, an
        // inexact key differ): the same number of elements, however
        // binned or grouped.
        (Out::Counts(b), Out::Counts(r), Expect::Counts(_, determined, keyed))
            if b == r || (!determined && counted(b, *keyed) == counted(r, *keyed)) =>
        {
            Ok(())
        }
        (
            Out::Stats {
                count,
                sum,
                min,
                max,
                mean: m,
            },
            Out::Stats {
                count: c2,
                sum: s2,
                min: n2,
                max: x2,
                mean: m2,
            },
            Expect::Stats {
                sum: se,
                min: ne,
                max: xe,
                mean: me,
                ..
            },
        ) => {
            if count != c2 {
                return Err(format!("stats.count: got {count}, expected {c2}"));
            }
            val("stats.sum", *sum, *s2, se)?;
            opt("stats.min", min, n2, ne)?;
            opt("stats.max", max, x2, xe)?;
            mean(m, m2, me)
        }
        (b, r, _) => Err(format!("got {b:?}, expected {r:?}")),
    }
}
