//! Engine bugs the suite has found and that are not fixed yet. A case that
//! matches one is counted and skipped, so the suite keeps finding *new*
//! bugs; each bug also has an `#[ignore]`d regression test in
//! `tests/semantics.rs` with a minimal reproducer. Set
//! `COMPUTEQ_DIFF_KNOWN_BUGS=run` to run matching cases anyway (to check a
//! fix), and delete the entry here when the bug is fixed.

use super::ast::{Case, Ex, ExKind, Step, Term, Un};
use computeq::backend::BackendKind;
use computeq::expr::DType;

/// The known bug `case` would trip over on `kind`, if any.
pub fn known_bug(case: &Case, kind: BackendKind) -> Option<&'static str> {
    if std::env::var("COMPUTEQ_DIFF_KNOWN_BUGS").is_ok_and(|v| v == "run") {
        return None;
    }
    if zip_after_stage_break_with_dead_values(case) {
        return Some(DEAD_JOIN);
    }
    if double_negation_across_stages(case) {
        return Some(DOUBLE_NEGATION_ACROSS_STAGES);
    }
    if kind == BackendKind::Wgpu && any_expr(case, &|e| f64_transcendental(e)) {
        return Some(WGPU_F64_TRANSCENDENTAL);
    }
    None
}

/// The wgpu backend emits `exp`/`ln`/`sin`/`cos` on `f64`, which the
/// device does not implement: garbage comes back instead of a decline.
pub const WGPU_F64_TRANSCENDENTAL: &str = "wgpu computes f64 exp/ln/sin/cos wrongly (exp gives \
     denormals, ln gives -88.03, sin 0, cos 1) instead of declining the plan";

fn f64_transcendental(e: &Ex) -> bool {
    matches!(e.kind, ExKind::Un(Un::Exp | Un::Ln | Un::Sin | Un::Cos, _)) && e.ty == DType::F64
}

/// Whether any expression node of the case satisfies `f`.
pub fn any_expr(case: &Case, f: &dyn Fn(&Ex) -> bool) -> bool {
    fn walk(e: &Ex, f: &dyn Fn(&Ex) -> bool) -> bool {
        f(e) || match &e.kind {
            ExKind::X | ExKind::Y | ExKind::I | ExKind::Lit(..) => false,
            ExKind::Un(_, a) | ExKind::Cast(a) | ExKind::Powi(a, _) => walk(a, f),
            ExKind::Bin(_, a, b) | ExKind::Cmp(_, a, b) => walk(a, f) || walk(b, f),
            ExKind::Select(a, b, c) | ExKind::MulAdd(a, b, c) | ExKind::Clamp(a, b, c) => {
                walk(a, f) || walk(b, f) || walk(c, f)
            }
        }
    }
    let steps = case.steps.iter().any(|s| match s {
        Step::Map(e)
        | Step::Filter(e)
        | Step::ZipMap(_, e)
        | Step::ZipFilter(_, e)
        | Step::EnumMap(e)
        | Step::EnumFilter(e) => walk(e, f),
        _ => false,
    });
    steps
        || match &case.term {
            Term::Any(e) | Term::All(e) | Term::CollectPred(e) | Term::CollectBool(e) => walk(e, f),
            _ => false,
        }
}

/// `dead_code` drops a stage input that is only needed for its length.
pub const DEAD_JOIN: &str = "dead_code drops the previous stage's column when a zip follows a \
     filter/scan and the column's values are unused, losing `zip`'s stop-at-the-shorter-input \
     length (e.g. `[0, 1, 2].compute().filter(|x| x.eq(0)).zip(&[5, 5, 5]).count()` is 3, not 1)";

pub fn uses_x(e: &Ex) -> bool {
    match &e.kind {
        ExKind::X => true,
        ExKind::Y | ExKind::I | ExKind::Lit(..) => false,
        ExKind::Un(_, a) | ExKind::Cast(a) | ExKind::Powi(a, _) => uses_x(a),
        ExKind::Bin(_, a, b) | ExKind::Cmp(_, a, b) => uses_x(a) || uses_x(b),
        ExKind::Select(a, b, c) | ExKind::MulAdd(a, b, c) | ExKind::Clamp(a, b, c) => {
            uses_x(a) || uses_x(b) || uses_x(c)
        }
    }
}

fn breaks_stage(s: &Step) -> bool {
    matches!(
        s,
        Step::Filter(_)
            | Step::ZipFilter(..)
            | Step::EnumFilter(_)
            | Step::ScanSum { .. }
            | Step::Scan { .. }
    )
}

/// Whether the stream's values entering each step (and, last, the
/// terminal) are read by anything downstream.
fn live_in(case: &Case) -> Vec<bool> {
    let n = case.steps.len();
    let mut live = vec![false; n + 1];
    live[n] = match &case.term {
        Term::Count => false,
        Term::Any(e) | Term::All(e) | Term::CollectBool(e) => uses_x(e),
        _ => true,
    };
    for k in (0..n).rev() {
        let after = live[k + 1];
        live[k] = match &case.steps[k] {
            Step::Map(e) | Step::ZipMap(_, e) | Step::EnumMap(e) => after && uses_x(e),
            Step::Filter(e) | Step::ZipFilter(_, e) | Step::EnumFilter(e) => after || uses_x(e),
            _ => after,
        };
    }
    live
}

fn zip_after_stage_break_with_dead_values(case: &Case) -> bool {
    let n = case.steps.len();
    let live = live_in(case);
    let zips = (0..n)
        .filter(|&k| matches!(case.steps[k], Step::ZipMap(..) | Step::ZipFilter(..)))
        .chain(matches!(case.term, Term::CollectZipped(_)).then_some(n));
    for z in zips {
        // The zip's stage starts after the last stage break before it; it
        // loses the previous stage's length when it reads none of its values.
        if let Some(b) = (0..z).rev().find(|&j| breaks_stage(&case.steps[j])) {
            if !live[b + 1] {
                return true;
            }
        }
    }
    false
}

/// `constant_fold` rewrites `-(-x)` (and `!!b`) to `x` even when the inner
/// negation belongs to an earlier stage, so a later stage reads a value it
/// cannot see: the plan is rejected as invalid.
pub const DOUBLE_NEGATION_ACROSS_STAGES: &str = "constant_fold simplifies -(-x) across a stage \
     boundary (`[1, 2].compute().map(|x| -x).filter(|x| x.lt(0)).take(1).map(|x| -x).sum()` fails \
     with InvalidQuery: stage 1 reads v0 which belongs to another stage)";

fn negates_x(e: &Ex) -> bool {
    match &e.kind {
        ExKind::Un(Un::Neg, a) => matches!(a.kind, ExKind::X) || negates_x(a),
        ExKind::X | ExKind::Y | ExKind::I | ExKind::Lit(..) => false,
        ExKind::Un(_, a) | ExKind::Cast(a) | ExKind::Powi(a, _) => negates_x(a),
        ExKind::Bin(_, a, b) | ExKind::Cmp(_, a, b) => negates_x(a) || negates_x(b),
        ExKind::Select(a, b, c) | ExKind::MulAdd(a, b, c) | ExKind::Clamp(a, b, c) => {
            negates_x(a) || negates_x(b) || negates_x(c)
        }
    }
}

fn double_negation_across_stages(case: &Case) -> bool {
    let mut neg_root = false;
    let mut broke = false;
    let later = |e: &Ex, neg_root: bool, broke: bool| neg_root && broke && negates_x(e);
    for s in &case.steps {
        match s {
            Step::Map(e) | Step::ZipMap(_, e) | Step::EnumMap(e) => {
                if later(e, neg_root, broke) {
                    return true;
                }
                neg_root = matches!(e.kind, ExKind::Un(Un::Neg, _));
                broke = false;
            }
            Step::Filter(e) | Step::ZipFilter(_, e) | Step::EnumFilter(e) => {
                if later(e, neg_root, broke) {
                    return true;
                }
                broke = true;
            }
            Step::ScanSum { .. } | Step::Scan { .. } => neg_root = false,
            Step::Take(_) | Step::Skip(_) => broke = true,
        }
    }
    match &case.term {
        Term::Any(e) | Term::All(e) | Term::CollectPred(e) | Term::CollectBool(e) => {
            later(e, neg_root, broke)
        }
        _ => false,
    }
}
