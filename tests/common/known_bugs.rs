//! Engine bugs the suite has found and that are not fixed yet. A case that
//! matches one is counted and skipped, so the suite keeps finding *new*
//! bugs; each bug also has an `#[ignore]`d regression test in
//! `tests/semantics.rs` with a minimal reproducer. Set
//! `COMPUTEQ_DIFF_KNOWN_BUGS=run` to run matching cases anyway (to check a
//! fix), and delete the entry here when the bug is fixed.
//!
//! Open: none.
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
//!   `operations_on_values_lowering_made_constant_agree_everywhere`);
//! - wgpu on lavapipe (Mesa 22.3) divided an `i64` cast from a negative
//!   `i32` as if it were not negative (`x.cast::<i64>() / 2` of `-3` gave
//!   `1`): Mesa miscompiles a comparison of a sign-extended `i32` with a
//!   64-bit constant (`i64(x) < 0li` is false for every negative `x`; the
//!   SPIR-V naga writes is right, `OpSConvert` then `OpSLessThan`), which
//!   the division helper's sign test and a user's compare after the cast
//!   both met. The WGSL writer now writes the extension as a zero
//!   extension and a flip of the sign bit
//!   (`an_i64_division_of_a_cast_i32_keeps_its_sign`).

use super::ast::Case;
use computeq::BackendKind;

/// The known bug `case` would trip over on `kind`, if any. An entry is a
/// matcher over the case's steps and expressions (see the git history of
/// this file for examples) returning the bug's one-line description.
pub fn known_bug(case: &Case, kind: BackendKind) -> Option<&'static str> {
    if std::env::var("COMPUTEQ_DIFF_KNOWN_BUGS").is_ok_and(|v| v == "run") {
        return None;
    }
    // No entry is open. One reads `if matcher(case, kind) { return
    // Some("<backend>: <the bug in one line>"); }`.
    let _ = (case, kind);
    None
}
