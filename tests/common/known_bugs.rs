//! Engine bugs the suite has found and that are not fixed yet. A case that
//! matches one is counted and skipped, so the suite keeps finding *new*
//! bugs; each bug also has an `#[ignore]`d regression test in
//! `tests/semantics.rs` with a minimal reproducer. Set
//! `COMPUTEQ_DIFF_KNOWN_BUGS=run` to run matching cases anyway (to check a
//! fix), and delete the entry here when the bug is fixed.
//!
//! Open:
//! - wgpu on lavapipe divides an `i64` that was cast from an `i32` as if
//!   it were not negative: `x.cast::<i64>() / 2` of `-3` gives `1` (and
//!   `% 2` gives `1`). The WGSL is right (its helper divides the
//!   magnitudes and applies the sign; writing the sign test as `a < 0` or
//!   as the top bit makes no difference, and `(x * 3) / 2` is right), and
//!   the same test passes on GL through llvmpipe: the fault is in naga's
//!   SPIR-V or lavapipe's compile of it. Found by a fresh seed on 2026-12-07; regression test
//!   `semantics::an_i64_division_of_a_cast_i32_keeps_its_sign` (ignored).
//!
//! Fixed so far, each with a regression test in
//! `tests/semantics.rs` that is no longer ignored:
//! - `dead_code` dropped the previous stage's only column when a zip after a
//!   filter read none of its values, losing the stop-at-the-shorter length;
//! - `constant_fold` rewrote `-(-x)` to an `x` of an earlier stage, which
//!   the later stage could not read (now `fuse_elementwise` carries such
//!   leaves through the compaction);
//! - wgpu computed f64 `exp`/`ln`/`sin`/`cos` wrongly instead of declining;
//! - wgpu failed to compile operations on values lowering made constant,
//!   which naga evaluates as constant expressions and refuses for some
//!   (`i64` `powi(0)`, the constant `1`, then `histogram`: `f64(1li)`;
//!   `abs(1.0lf)`), found with a random seed; the kernel builder now folds
//!   them (`casts_of_values_lowering_made_constant_run_everywhere`,
//!   `operations_on_values_lowering_made_constant_agree_everywhere`).

use super::ast::{Bin, Case, Ex, ExKind, Step};
use computeq::expr::DType;
use computeq::BackendKind;

/// The known bug `case` would trip over on `kind`, if any.
pub fn known_bug(case: &Case, kind: BackendKind) -> Option<&'static str> {
    if std::env::var("COMPUTEQ_DIFF_KNOWN_BUGS").is_ok_and(|v| v == "run") {
        return None;
    }
    let exprs = case.steps.iter().filter_map(|s| match s {
        Step::Map(e)
        | Step::Filter(e)
        | Step::ZipMap(_, e)
        | Step::ZipFilter(_, e)
        | Step::EnumMap(e)
        | Step::EnumFilter(e) => Some(e),
        _ => None,
    });
    if kind == BackendKind::Wgpu && exprs.into_iter().any(divides_a_widened_i32) {
        return Some("wgpu: an i64 division or remainder of a value cast from i32 loses its sign");
    }
    None
}

/// Whether `e` divides (or takes the remainder of) an `i64` cast from an
/// `i32` anywhere.
fn divides_a_widened_i32(e: &Ex) -> bool {
    let widened = |a: &Ex| matches!(&a.kind, ExKind::Cast(inner) if a.ty == DType::I64 && inner.ty == DType::I32);
    match &e.kind {
        ExKind::Bin(op, a, b) => {
            (matches!(op, Bin::Div | Bin::Rem) && widened(a))
                || divides_a_widened_i32(a)
                || divides_a_widened_i32(b)
        }
        ExKind::Un(_, a) | ExKind::Cast(a) | ExKind::Powi(a, _) => divides_a_widened_i32(a),
        ExKind::Cmp(_, a, b) => divides_a_widened_i32(a) || divides_a_widened_i32(b),
        ExKind::Select(a, b, c) | ExKind::MulAdd(a, b, c) | ExKind::Clamp(a, b, c) => {
            [a, b, c].into_iter().any(|x| divides_a_widened_i32(x))
        }
        ExKind::X | ExKind::Y | ExKind::I | ExKind::Lit(..) => false,
    }
}
