//! arrow-rs 59 compute kernels for pipelines P1, P2, P4 and P5, as an
//! Arrow user writes them: the single-pass `unary` / `binary` kernels for
//! element-wise work, `cmp::gt` + `filter` for a predicate, and the
//! `aggregate::sum` kernel. (arrow-rs has no prefix sum: P3 has no row.)
#![allow(dead_code)]

use arrow_arith::aggregate::sum;
use arrow_arith::arity::binary;
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::Float32Array;

/// An Arrow array of `xs` (the `Vec` moved into its buffer, not copied).
pub fn arrow_of(xs: &[f32]) -> Float32Array {
    Float32Array::from(xs.to_vec())
}

/// P1 `sum(x*2+1)`.
pub fn p1_arrow(xs: &Float32Array) -> f32 {
    sum(&xs.unary::<_, Float32Type>(|x| x * 2.0 + 1.0)).unwrap_or(0.0)
}

/// P2 `sum of x*x where x > 0.5`.
pub fn p2_arrow(xs: &Float32Array) -> f32 {
    let keep = arrow_ord::cmp::gt(xs, &Float32Array::new_scalar(0.5)).expect("same length");
    let kept = arrow_select::filter::filter(xs, &keep).expect("same length");
    sum(&kept
        .as_primitive::<Float32Type>()
        .unary::<_, Float32Type>(|x| x * x))
    .unwrap_or(0.0)
}

/// P4 `sqrt(x)*3-x` into a new array.
pub fn p4_arrow(xs: &Float32Array) -> Float32Array {
    xs.unary(|x| x.sqrt() * 3.0 - x)
}

/// P5 `dot(x, y)`.
pub fn p5_arrow(xs: &Float32Array, ys: &Float32Array) -> f32 {
    let prod: Float32Array = binary(xs, ys, |a, b| a * b).expect("same length");
    sum(&prod).unwrap_or(0.0)
}
