//! Arrow inputs and outputs with nulls (feature `arrow`) on every backend
//! against a reference written over `Option` values: every element type
//! (and the widened and bit-packed ones), nulls in every position,
//! all-null and null-free arrays, sliced arrays, empty arrays, lengths
//! around the block sizes; nulls through map, filter, zip, sort and the
//! aggregates and group_by; what does not take nulls fails with a clear
//! error. The same checks run on the PTX writer's kernels in the test
//! interpreter (as the `cuda` backend, modules checked by `ptxas` when it
//! is found).
#![cfg(feature = "arrow")]

mod common;
mod ptx_interp;

use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float16Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, PrimitiveArray, RecordBatch, TimestampMicrosecondArray,
    UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use computeq::arrow::{column, ArrowColumn};
use computeq::prelude::*;
use std::sync::Arc;

fn backends(engine: &Engine) -> Vec<BackendKind> {
    let mut all = common::CPU.to_vec();
    all.extend(common::devices(engine));
    all
}

fn lengths() -> Vec<usize> {
    vec![0, 1, 2, 63, 64, 65, 1000, 4097, 70_001]
}

/// Null patterns: none, all, first, last, every other, ~30% at random.
fn patterns(n: usize, seed: u64) -> Vec<Vec<bool>> {
    let r = common::lcg(n, seed);
    vec![
        vec![true; n],
        vec![false; n],
        (0..n).map(|i| i != 0).collect(),
        (0..n).map(|i| i + 1 != n).collect(),
        (0..n).map(|i| i % 2 == 1).collect(),
        r.iter().map(|&w| w % 10 >= 3).collect(),
    ]
}

/// Values drawn from random words `r`: `value(w)` where `keep(w)`, else
/// null.
fn drawn<T>(r: &[u64], keep: impl Fn(u64) -> bool, value: impl Fn(u64) -> T) -> Vec<Option<T>> {
    r.iter().map(|&w| keep(w).then(|| value(w))).collect()
}

fn options<T: Copy>(values: &[T], valid: &[bool]) -> Vec<Option<T>> {
    values
        .iter()
        .zip(valid)
        .map(|(&x, &ok)| ok.then_some(x))
        .collect()
}

/// The checks of one `i64` column on one backend (integers: exact).
fn check_i64(engine: &Engine, kind: BackendKind, a: &Int64Array, what: &str) {
    let opts: Vec<Option<i64>> = a.iter().collect();
    let valid: Vec<i64> = opts.iter().flatten().copied().collect();
    let q = || a.compute_on(engine).on(kind);
    let ctx = format!("{what} on {kind}");
    assert_eq!(q().count(), valid.len(), "count {ctx}");
    assert_eq!(q().count_rows(), opts.len(), "count_rows {ctx}");
    let sum = valid
        .iter()
        .fold(0i64, |s, &x| s.wrapping_add(x.wrapping_mul(3) ^ 5));
    assert_eq!(q().map(|x| (x * 3) ^ 5).sum(), sum, "sum {ctx}");
    assert_eq!(q().min(), valid.iter().min().copied(), "min {ctx}");
    assert_eq!(q().max(), valid.iter().max().copied(), "max {ctx}");
    assert_eq!(
        q().filter(|x| x.gt(0)).count(),
        valid.iter().filter(|&&x| x > 0).count(),
        "filter {ctx}"
    );
    assert_eq!(
        q().map(|x| x + 1).collect_options(),
        opts.iter()
            .map(|x| x.map(|x| x.wrapping_add(1)))
            .collect::<Vec<_>>(),
        "collect_options {ctx}"
    );
    let expect: Int64Array = opts.iter().map(|x| x.map(|x| x / 7)).collect();
    assert_eq!(
        q().map(|x| x / 7).collect_arrow(),
        expect,
        "collect_arrow {ctx}"
    );
    let mut sorted = valid.clone();
    sorted.sort();
    let mut expect: Vec<Option<i64>> = sorted.iter().map(|&x| Some(x)).collect();
    expect.resize(opts.len(), None);
    assert_eq!(q().sort().collect_options(), expect, "sort {ctx}");
    sorted.reverse();
    let mut expect: Vec<Option<i64>> = sorted.iter().map(|&x| Some(x)).collect();
    expect.resize(opts.len(), None);
    assert_eq!(q().sort_desc().collect_options(), expect, "sort_desc {ctx}");
    expect.rotate_right(opts.len() - valid.len());
    assert_eq!(
        q().nulls_first().sort_desc().collect_options(),
        expect,
        "nulls_first {ctx}"
    );
    assert_eq!(
        q().fill_null(-1).collect::<Vec<i64>>(),
        opts.iter().map(|x| x.unwrap_or(-1)).collect::<Vec<_>>(),
        "fill_null {ctx}"
    );
    assert_eq!(
        q().drop_nulls().collect::<Vec<i64>>(),
        valid,
        "drop_nulls {ctx}"
    );
    assert_eq!(
        q().first(),
        valid.first().copied(),
        "first skips nulls {ctx}"
    );
    assert_eq!(q().last(), valid.last().copied(), "last skips nulls {ctx}");
    let i = opts.len() / 2;
    assert_eq!(q().nth(i), opts.get(i).copied().flatten(), "nth {ctx}");
    assert_eq!(
        q().position(|x| x.gt(0)),
        opts.iter().position(|x| x.is_some_and(|x| x > 0)),
        "position {ctx}"
    );
    let k = 5.min(valid.len());
    let mut top = valid.clone();
    top.sort_by(|a, b| b.cmp(a));
    let mut expect: Vec<Option<i64>> = top[..k].iter().map(|&x| Some(x)).collect();
    expect.resize(5.min(opts.len()), None);
    assert_eq!(q().top_k(5).collect_options(), expect, "top_k {ctx}");
}

#[test]
fn i64_nulls_in_every_position_on_every_backend() {
    let engine = common::engine();
    for kind in backends(&engine) {
        for n in lengths() {
            let values: Vec<i64> = common::lcg(n, n as u64 + 1)
                .iter()
                .map(|&w| match w % 7 {
                    0 => i64::MIN,
                    1 => i64::MAX,
                    _ => (w >> 20) as i64 - (1 << 40),
                })
                .collect();
            for (p, valid) in patterns(n, 7).iter().enumerate() {
                let a = Int64Array::from(options(&values, valid));
                check_i64(&engine, kind, &a, &format!("n={n} pattern {p}"));
                if n > 8 {
                    // A sliced array reads its slice (offset and validity).
                    let s = a.slice(3, n - 8);
                    let s = s.as_any().downcast_ref::<Int64Array>().unwrap();
                    check_i64(&engine, kind, s, &format!("n={n} pattern {p} sliced"));
                }
            }
        }
    }
}

/// Sum, min, max and mean of a float column with nulls, and its collect.
fn check_float<T>(engine: &Engine, kind: BackendKind, a: &PrimitiveArray<T>, what: &str)
where
    T: ArrowPrimitiveType,
    T::Native: computeq::arrow::ArrowElement + Float + Into<f64>,
    for<'b> &'b PrimitiveArray<T>: IntoSource<'b, Elem = T::Native>,
{
    let opts: Vec<Option<T::Native>> = a.iter().collect();
    let valid: Vec<f64> = opts.iter().flatten().map(|&x| x.into()).collect();
    let q = || a.compute_on(engine).on(kind);
    let ctx = format!("{what} on {kind}");
    let sum: f64 = q().map(|x| x + x).sum().into();
    let expect: f64 = valid.iter().map(|x| x * 2.0).sum();
    let tol = 1e-3 * valid.iter().map(|x| x.abs() * 2.0).sum::<f64>().max(1.0);
    assert!((sum - expect).abs() <= tol, "sum {ctx}: {sum} vs {expect}");
    let mean = q().mean();
    match (mean, valid.is_empty()) {
        (None, true) => {}
        (Some(m), false) => {
            let e = expect / 2.0 / valid.len() as f64;
            assert!(
                (m - e).abs() <= 1e-3 * (e.abs() + 1.0),
                "mean {ctx}: {m} vs {e}"
            );
        }
        other => panic!("mean {ctx}: {other:?}"),
    }
    let min = q().min().map(Into::into);
    let max = q().max().map(Into::into);
    assert_eq!(min, valid.iter().copied().reduce(f64::min), "min {ctx}");
    assert_eq!(max, valid.iter().copied().reduce(f64::max), "max {ctx}");
    assert_eq!(q().count(), valid.len(), "count {ctx}");
    let collected = q().map(|x| x.sqrt()).collect_options();
    assert_eq!(collected.len(), opts.len(), "collect length {ctx}");
    for (i, (c, o)) in collected.iter().zip(&opts).enumerate() {
        match (c, o) {
            (None, None) => {}
            (Some(c), Some(o)) => {
                let (c, o): (f64, f64) = ((*c).into(), (*o).into());
                assert!(
                    c.to_bits() == o.sqrt().to_bits()
                        || (c - o.sqrt()).abs() <= 1e-6 * o.abs()
                        || (c.is_nan() && o.sqrt().is_nan()),
                    "sqrt at {i} {ctx}: {c} vs {o}"
                );
            }
            other => panic!("validity at {i} {ctx}: {other:?}"),
        }
    }
}

#[test]
fn floats_with_nulls_on_every_backend() {
    let engine = common::engine();
    for kind in backends(&engine) {
        for n in lengths() {
            let r = common::lcg(n, 99);
            let v32: Vec<f32> = r
                .iter()
                .map(|&w| ((w >> 11) as f32 / 1e6).sin() * 100.0 + 150.0)
                .collect();
            for (p, valid) in patterns(n, 3).iter().enumerate() {
                let what = format!("n={n} pattern {p}");
                let a = Float32Array::from(options(&v32, valid));
                check_float(&engine, kind, &a, &format!("f32 {what}"));
                let v64: Vec<f64> = v32.iter().map(|&x| x as f64 * 1.5).collect();
                let b = Float64Array::from(options(&v64, valid));
                check_float(&engine, kind, &b, &format!("f64 {what}"));
            }
        }
    }
}

#[test]
fn every_integer_type_reads_with_its_nulls() {
    let engine = common::engine();
    let n = 4097;
    let r = common::lcg(n, 5);
    let valid = patterns(n, 11).pop().unwrap();
    for kind in backends(&engine) {
        let i32s: Vec<Option<i32>> = options(
            &r.iter().map(|&w| (w >> 33) as i32).collect::<Vec<_>>(),
            &valid,
        );
        let a = Int32Array::from(i32s.clone());
        let expect = i32s.iter().flatten().fold(0i32, |s, &x| s.wrapping_add(x));
        assert_eq!(
            a.compute_on(&engine).on(kind).sum(),
            expect,
            "i32 on {kind}"
        );

        let u32s: Vec<Option<u32>> = options(
            &r.iter().map(|&w| (w >> 32) as u32).collect::<Vec<_>>(),
            &valid,
        );
        let a = UInt32Array::from(u32s.clone());
        assert_eq!(
            a.compute_on(&engine).on(kind).max(),
            u32s.iter().flatten().max().copied(),
            "u32 on {kind}"
        );

        let u64s: Vec<Option<u64>> = options(&r, &valid);
        let a = UInt64Array::from(u64s.clone());
        assert_eq!(
            a.compute_on(&engine).on(kind).min(),
            u64s.iter().flatten().min().copied(),
            "u64 on {kind}"
        );

        // Narrow types are widened (one copy), with their nulls.
        let i8s: Vec<Option<i8>> = options(
            &r.iter().map(|&w| (w >> 40) as i8).collect::<Vec<_>>(),
            &valid,
        );
        let a = Int8Array::from(i8s.clone());
        let s: i32 = a.compute_on(&engine).on(kind).sum();
        assert_eq!(
            s,
            i8s.iter().flatten().map(|&x| x as i32).sum::<i32>(),
            "i8 on {kind}"
        );
        let i16s: Vec<Option<i16>> = options(
            &r.iter().map(|&w| (w >> 40) as i16).collect::<Vec<_>>(),
            &valid,
        );
        let a = Int16Array::from(i16s.clone());
        let s: i32 = a.compute_on(&engine).on(kind).sum();
        assert_eq!(
            s,
            i16s.iter().flatten().map(|&x| x as i32).sum::<i32>(),
            "i16 on {kind}"
        );
        let u8s: Vec<Option<u8>> = options(
            &r.iter().map(|&w| (w >> 40) as u8).collect::<Vec<_>>(),
            &valid,
        );
        let a = UInt8Array::from(u8s.clone());
        let c = a.compute_on(&engine).on(kind).filter(|x| x.gt(100)).count();
        assert_eq!(
            c,
            u8s.iter().flatten().filter(|&&x| x > 100).count(),
            "u8 on {kind}"
        );
        let u16s: Vec<Option<u16>> = options(
            &r.iter().map(|&w| (w >> 40) as u16).collect::<Vec<_>>(),
            &valid,
        );
        let a = UInt16Array::from(u16s.clone());
        assert_eq!(
            a.compute_on(&engine).on(kind).max(),
            u16s.iter().flatten().max().map(|&x| x as u32),
            "u16 on {kind}"
        );
        let f16s: Vec<Option<half::f16>> = options(
            &r.iter()
                .map(|&w| half::f16::from_f32((w >> 54) as f32 / 4.0))
                .collect::<Vec<_>>(),
            &valid,
        );
        let a = Float16Array::from(f16s.clone());
        assert_eq!(
            a.compute_on(&engine).on(kind).max(),
            f16s.iter().flatten().map(|x| x.to_f32()).reduce(f32::max),
            "f16 on {kind}"
        );
        // Temporal types read as their integers.
        let ts: Vec<Option<i64>> = options(
            &r.iter().map(|&w| (w >> 20) as i64).collect::<Vec<_>>(),
            &valid,
        );
        let a = TimestampMicrosecondArray::from(ts.clone());
        assert_eq!(
            a.compute_on(&engine).on(kind).max(),
            ts.iter().flatten().max().copied(),
            "timestamp on {kind}"
        );
        // Booleans unpack from bits.
        let bs: Vec<Option<bool>> =
            options(&r.iter().map(|&w| w % 3 == 0).collect::<Vec<_>>(), &valid);
        let a = BooleanArray::from(bs.clone());
        assert_eq!(
            a.compute_on(&engine).on(kind).filter(|b| b).count(),
            bs.iter().flatten().filter(|&&b| b).count(),
            "bool on {kind}"
        );
        assert_eq!(
            a.compute_on(&engine).on(kind).map(|b| !b).collect_arrow(),
            bs.iter().map(|b| b.map(|b| !b)).collect::<BooleanArray>(),
            "bool collect on {kind}"
        );
    }
}

#[test]
fn zip_keeps_each_columns_own_nulls() {
    let engine = common::engine();
    let n = 3000;
    let r = common::lcg(n, 17);
    let a: Vec<Option<i32>> = drawn(&r, |w| w % 5 != 0, |w| (w >> 40) as i32);
    let b: Vec<Option<i32>> = drawn(&r, |w| w % 7 != 1, |w| (w >> 44) as i32);
    let (aa, ba) = (Int32Array::from(a.clone()), Int32Array::from(b.clone()));
    for kind in backends(&engine) {
        let q = || aa.compute_on(&engine).on(kind).zip(&ba);
        // Null where either input is.
        let both: Vec<Option<i32>> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| Some(x.as_ref()?.wrapping_add(*y.as_ref()?)))
            .collect();
        assert_eq!(
            q().map(|(x, y)| x + y).collect_options(),
            both,
            "a + b on {kind}"
        );
        // Only the column read decides.
        let only_a: Vec<Option<i32>> = a.iter().map(|x| x.map(|x| x * 2)).collect();
        assert_eq!(
            q().map(|(x, _)| x * 2).collect_options(),
            only_a,
            "a * 2 on {kind}"
        );
        // A predicate on `b` drops the rows where `b` is null or false.
        let kept: i32 = a
            .iter()
            .zip(&b)
            .filter(|(_, y)| y.is_some_and(|y| y > 0))
            .filter_map(|(x, _)| *x)
            .fold(0, i32::wrapping_add);
        assert_eq!(
            q().filter(|(_, y)| y.gt(0)).map(|(x, _)| x).sum(),
            kept,
            "filter on b, sum of a, on {kind}"
        );
        // Several aggregates over one validity in one pass.
        let (s, c) = q()
            .map(|(x, y)| x - y)
            .aggregate(|x, g| (g.sum(x), g.count()));
        let diffs: Vec<i32> = a
            .iter()
            .zip(&b)
            .filter_map(|(x, y)| Some(x.as_ref()?.wrapping_sub(*y.as_ref()?)))
            .collect();
        assert_eq!(
            s,
            diffs.iter().fold(0i32, |s, &x| s.wrapping_add(x)),
            "{kind}"
        );
        assert_eq!(c as usize, diffs.len(), "{kind}");
    }
}

#[test]
fn record_batch_columns_and_checked_array_refs() {
    let engine = common::engine();
    let x: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), None, Some(4.0)]));
    let k: ArrayRef = Arc::new(Int32Array::from(vec![Some(2), Some(3), None]));
    let batch = RecordBatch::try_from_iter([("x", x.clone()), ("k", k)]).unwrap();
    let s: f64 = column::<f64>(&batch, "x")
        .unwrap()
        .compute_on(&engine)
        .zip(column::<i32>(&batch, "k").unwrap())
        .map(|(x, k)| x * k.cast::<f64>())
        .sum();
    assert_eq!(s, 2.0);
    let e = column::<f64>(&batch, "nope").unwrap_err();
    assert!(e.to_string().contains("no column \"nope\""), "{e}");
    let e = column::<i64>(&batch, "x").unwrap_err();
    assert!(e.to_string().contains("Float64"), "{e}");
    assert_eq!(
        ArrowColumn::<f64>::new(x.as_ref())
            .unwrap()
            .compute_on(&engine)
            .count(),
        2
    );
}

#[test]
fn what_does_not_take_nulls_yet_is_an_error() {
    let engine = common::engine();
    let a = Int32Array::from(vec![Some(1), None, Some(1)]);
    let q = || a.compute_on(&engine).fallible();
    let e = q().collect::<Vec<i32>>().unwrap_err();
    assert!(e.to_string().contains("collect_arrow"), "{e}");
    let e = q().zip(&a).group_by(|(x, y)| (x, y)).count().unwrap_err();
    assert!(e.to_string().contains("tuple key with nulls"), "{e}");
    let e = q().distinct().unwrap_err();
    assert!(
        e.to_string().contains("distinct") && e.to_string().contains("drop_nulls"),
        "{e}"
    );
    // An argmax among other aggregates skips the nulls, positions
    // counting them.
    assert_eq!(
        q().aggregate(|x, g| (g.argmax(x), g.sum(x))).unwrap(),
        (Some(0), 2)
    );
    let b = Int32Array::from(vec![1, 2, 3]);
    let e = q()
        .zip(&b)
        .aggregate(|(x, y), g| (g.variance(x), g.sum(y)))
        .unwrap_err();
    assert!(e.to_string().contains("different nulls"), "{e}");
    // Once the nulls are gone, all of it runs.
    assert_eq!(q().drop_nulls().group_by(|x| x).count().unwrap().len(), 1);
    assert_eq!(q().fill_null(0).distinct().unwrap(), vec![0, 1]);
    // count_distinct skips the nulls (SQL's COUNT(DISTINCT x)).
    assert_eq!(q().count_distinct().unwrap(), 1);
    // A query without nulls is unaffected; an array whose validity has no
    // null reads as one without.
    let no_nulls = Int32Array::from(vec![Some(2), Some(1)]);
    assert_eq!(no_nulls.compute_on(&engine).collect::<Vec<i32>>(), [2, 1]);
}

#[test]
fn explain_and_metrics_see_the_real_lengths() {
    let engine = common::engine();
    let a = Float32Array::from(
        (0..5000)
            .map(|i| (i % 3 != 0).then_some(i as f32))
            .collect::<Vec<_>>(),
    );
    let (s, m) = a.compute_on(&engine).map(|x| x + 1.0).with_metrics().sum();
    let expect: f32 = (0..5000)
        .filter(|i| i % 3 != 0)
        .map(|i| i as f32 + 1.0)
        .sum();
    assert!((s - expect).abs() <= 1e-3 * expect, "{s} vs {expect}");
    assert_eq!(m.elements_in, 5000);
    let plan = a
        .compute_on(&engine)
        .map(|x| x + 1.0)
        .explain()
        .sum()
        .to_string();
    assert!(
        plan.contains("5000")
            || plan.contains("5,000")
            || plan.contains("5.0K")
            || plan.contains("5K"),
        "{plan}"
    );
}

#[test]
fn empty_and_all_null_arrays() {
    let engine = common::engine();
    for kind in backends(&engine) {
        let empty = Float64Array::from(Vec::<Option<f64>>::new());
        assert_eq!(empty.compute_on(&engine).on(kind).sum(), 0.0);
        assert_eq!(empty.compute_on(&engine).on(kind).collect_options(), []);
        let nulls = Float64Array::from(vec![None; 100]);
        assert_eq!(nulls.compute_on(&engine).on(kind).count(), 0);
        assert_eq!(nulls.compute_on(&engine).on(kind).max(), None);
        assert_eq!(nulls.compute_on(&engine).on(kind).mean(), None);
        assert_eq!(nulls.compute_on(&engine).on(kind).variance(), None);
        assert_eq!(nulls.compute_on(&engine).on(kind).sum(), 0.0);
        assert_eq!(
            nulls
                .compute_on(&engine)
                .on(kind)
                .map(|x| x * 2.0)
                .collect_arrow(),
            Float64Array::from(vec![None; 100])
        );
    }
}

#[test]
fn a_null_key_is_a_group_of_its_own_and_values_skip_nulls() {
    use std::collections::BTreeMap;
    let engine = common::engine();
    for n in [0, 1, 100, 5000, 300_000] {
        let r = common::lcg(n, 23);
        let keys: Vec<Option<i32>> = drawn(&r, |w| w % 9 != 0, |w| (w >> 40) as i32 % 50 - 25);
        let vals: Vec<Option<i64>> = drawn(&r, |w| w % 4 != 1, |w| (w >> 30) as i64);
        let (ka, va) = (
            Int32Array::from(keys.clone()),
            Int64Array::from(vals.clone()),
        );
        // Reference: count of rows and sum and count of the non-null
        // values per key (every key has its group, (0, 0) when its values
        // are all null), `None` the null key's group.
        let mut rows: BTreeMap<Option<i32>, u64> = BTreeMap::new();
        let mut sums: BTreeMap<Option<i32>, (i64, u64)> = BTreeMap::new();
        let mut mins: BTreeMap<Option<i32>, Option<i64>> = BTreeMap::new();
        // max, the values (for the mean), any and all of `v > 2^32` over
        // the non-null values.
        type More = (Option<i64>, Vec<i64>, bool, bool);
        let mut more: BTreeMap<Option<i32>, More> = BTreeMap::new();
        for (k, v) in keys.iter().zip(&vals) {
            *rows.entry(*k).or_default() += 1;
            let e = sums.entry(*k).or_default();
            let m = mins.entry(*k).or_default();
            let o = more.entry(*k).or_insert((None, Vec::new(), false, true));
            if let Some(v) = v {
                e.0 = e.0.wrapping_add(*v);
                e.1 += 1;
                *m = Some(m.map_or(*v, |m| m.min(*v)));
                o.0 = Some(o.0.map_or(*v, |m| m.max(*v)));
                o.1.push(*v);
                o.2 |= *v > 1 << 32;
                o.3 &= *v > 1 << 32;
            }
        }
        for kind in backends(&engine) {
            let ctx = format!("n={n} on {kind}");
            let g = ka.compute_on(&engine).on(kind).value_counts();
            let expect: Vec<(i32, u64)> =
                rows.iter().filter_map(|(k, c)| Some(((*k)?, *c))).collect();
            assert_eq!(
                g.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
                expect,
                "{ctx}"
            );
            assert_eq!(g.null_group, rows.get(&None).copied(), "null group {ctx}");
            // SQL's COUNT(DISTINCT k): the null key is not counted.
            assert_eq!(
                ka.compute_on(&engine).on(kind).count_distinct(),
                rows.keys().filter(|k| k.is_some()).count() as u64,
                "count_distinct {ctx}"
            );

            let g = ka
                .compute_on(&engine)
                .on(kind)
                .zip(&va)
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| (a.sum(v), a.count()));
            let expect: Vec<(i32, (i64, u64))> =
                sums.iter().filter_map(|(k, s)| Some(((*k)?, *s))).collect();
            assert_eq!(g.clone().into_pairs(), expect, "sums {ctx}");
            assert_eq!(
                g.null_group,
                sums.get(&None).copied(),
                "null group sums {ctx}"
            );
            // A min of only nulls is `None`; with a variance among the
            // aggregates, rows with a null value are dropped first (a key
            // whose values are all null has no group).
            let g = ka
                .compute_on(&engine)
                .on(kind)
                .zip(&va)
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| a.min(v));
            let expect: Vec<(i32, Option<i64>)> =
                mins.iter().filter_map(|(k, m)| Some(((*k)?, *m))).collect();
            assert_eq!(g.into_pairs(), expect, "mins {ctx}");
            let g = ka
                .compute_on(&engine)
                .on(kind)
                .zip(&va)
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| {
                    let big = v.gt(1i64 << 32);
                    (a.max(v), a.mean(v), a.any(big), a.all(big))
                });
            let expect: Vec<_> = more
                .iter()
                .filter_map(|(k, (max, vs, any, all))| {
                    let mean = (!vs.is_empty())
                        .then(|| vs.iter().map(|&x| x as f64).sum::<f64>() / vs.len() as f64);
                    Some(((*k)?, (*max, mean, *any, *all)))
                })
                .collect();
            assert_eq!(
                g.keys,
                expect.iter().map(|e| e.0).collect::<Vec<_>>(),
                "{ctx}"
            );
            for ((_, (max, mean, any, all)), (k, got)) in expect.iter().zip(g.iter()) {
                assert_eq!((got.0, got.2, got.3), (*max, *any, *all), "key {k} {ctx}");
                match (got.1, mean) {
                    (Some(a), Some(b)) => {
                        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{ctx}")
                    }
                    (a, b) => assert_eq!(a, *b, "mean of key {k} {ctx}"),
                }
            }
            let g = ka
                .compute_on(&engine)
                .on(kind)
                .zip(&va)
                .group_by(|(k, _)| k)
                .agg(|(_, v), a| (a.min(v), a.variance(v)));
            let expect: Vec<i32> = mins.iter().filter_map(|(k, m)| m.and(*k)).collect();
            assert_eq!(g.keys, expect, "keys with a variance {ctx}");
        }
    }
}

/// The element-wise, filter and aggregate checks on the PTX writer's
/// kernels, run by the test interpreter as the `cuda` backend (short
/// inputs: the interpreter is slow).
#[test]
fn nulls_on_the_ptx_interpreter() {
    use computeq::plumbing::backends::ptx::cuda_caps;
    use computeq::plumbing::codegen::Caps;
    use ptx_interp::backend::InterpBackend;
    let caps = Caps {
        workgroup_size: 64,
        items_per_thread: 2,
        max_groups: 8,
        ..cuda_caps()
    };
    let b = Arc::new(InterpBackend::new(caps, 2000).with_ptxas(ptx_interp::ptxas::find()));
    let engine = common::engine().with_backend(b.clone());
    let kind = BackendKind::Cuda;
    for n in [0, 1, 65, 300, 2100] {
        let values: Vec<i64> = common::lcg(n, 41)
            .iter()
            .map(|&w| (w >> 24) as i64 - (1 << 39))
            .collect();
        for (p, valid) in patterns(n, 13).iter().enumerate() {
            let opts = options(&values, valid);
            let a = Int64Array::from(opts.clone());
            let non_null: Vec<i64> = opts.iter().flatten().copied().collect();
            let ctx = format!("n={n} pattern {p}");
            let q = || a.compute_on(&engine).on(kind).no_fallback();
            let sum = non_null.iter().fold(0i64, |s, &x| s.wrapping_add(x * 3));
            assert_eq!(q().map(|x| x * 3).sum(), sum, "sum {ctx}");
            assert_eq!(q().count(), non_null.len(), "count {ctx}");
            assert_eq!(q().max(), non_null.iter().max().copied(), "max {ctx}");
            assert_eq!(
                q().filter(|x| x.lt(0)).count(),
                non_null.iter().filter(|&&x| x < 0).count(),
                "filter {ctx}"
            );
            assert_eq!(
                q().map(|x| x - 1).collect_options(),
                opts.iter().map(|x| x.map(|x| x - 1)).collect::<Vec<_>>(),
                "collect {ctx}"
            );
            let running: Vec<i64> = opts
                .iter()
                .scan(0i64, |s, x| {
                    *s = s.wrapping_add(x.unwrap_or(0));
                    Some(*s)
                })
                .collect();
            assert_eq!(q().scan_sum().collect::<Vec<_>>(), running, "scan {ctx}");
            // Another column with other nulls: each aggregate skips its own.
            let ps = patterns(n, 13);
            let other = options(&values, &ps[(p + 1) % ps.len()]);
            let b = Int64Array::from(other.clone());
            let ys: Vec<i64> = other.iter().flatten().copied().collect();
            let both = opts
                .iter()
                .zip(&other)
                .filter(|(x, y)| x.is_some() && y.is_some());
            let got = q()
                .zip(&b)
                .aggregate(|(x, y), g| (g.sum(x), g.max(y), g.count(), g.argmin(x)));
            let argmin = opts
                .iter()
                .enumerate()
                .filter_map(|(i, x)| Some((x.as_ref()?, i)))
                .min()
                .map(|(_, i)| i);
            assert_eq!(
                got,
                (
                    non_null.iter().fold(0i64, |s, &x| s.wrapping_add(x)),
                    ys.iter().max().copied(),
                    both.count() as u64,
                    argmin
                ),
                "different nulls {ctx}"
            );
            let f = Float32Array::from(
                opts.iter()
                    .map(|x| x.map(|x| (x % 1000) as f32 / 8.0))
                    .collect::<Vec<_>>(),
            );
            let fs: Vec<f32> = f.iter().flatten().collect();
            let mean = f.compute_on(&engine).on(kind).no_fallback().mean();
            match mean {
                None => assert!(fs.is_empty(), "mean {ctx}"),
                Some(m) => {
                    let e = fs.iter().map(|&x| x as f64).sum::<f64>() / fs.len() as f64;
                    assert!(
                        (m - e).abs() <= 1e-6 * (e.abs() + 1.0),
                        "mean {ctx}: {m} vs {e}"
                    );
                }
            }
        }
    }
    let m = engine.last_run().expect("a run");
    assert_eq!(m.backend, kind, "the interpreter ran the queries");
    eprintln!(
        "cuda (interpreter): {} distinct modules assembled by ptxas",
        b.modules_assembled()
    );
}

#[test]
fn converted_columns_join_and_zip_like_slices() {
    // Narrow integers are widened into columns the query owns: a join's
    // build side and a zip read them, not their placeholders.
    let engine = common::engine();
    let keys = UInt8Array::from(vec![1u8, 2, 3, 2]);
    let probe = UInt32Array::from(vec![2u32, 3, 9]);
    let pairs: Vec<(u32, u32)> = probe
        .compute_on(&engine)
        .join(keys.compute_on(&engine), |x| x, |y| y)
        .collect();
    assert_eq!(pairs, [(2, 2), (2, 2), (3, 3)]);
    let keys32 = UInt16Array::from(vec![1u16, 2, 3, 2]);
    assert_eq!(probe.compute_on(&engine).is_in(&keys32).count(), 2);
    assert_eq!(
        probe
            .compute_on(&engine)
            .semi_join(keys.compute_on(&engine), |x| x, |y| y)
            .collect::<Vec<u32>>(),
        [2, 3]
    );
    let small = Int16Array::from(vec![1i16, -2, 3]);
    let s: i32 = Int32Array::from(vec![10, 20, 30])
        .compute_on(&engine)
        .zip(&small)
        .map(|(a, b)| a * b)
        .sum();
    assert_eq!(s, 10 - 40 + 90);
}

#[test]
fn a_sort_puts_the_null_keys_apart_not_the_other_columns_nulls() {
    let engine = common::engine();
    let a = Int32Array::from(vec![Some(3), None, Some(1), None, Some(2), Some(1)]);
    let b = Int32Array::from(vec![None, Some(10), Some(20), Some(30), Some(40), None]);
    for kind in backends(&engine) {
        // Ordered by `b`, whose nulls go last; `a`'s nulls stay with their rows.
        let by_b: Vec<Option<i32>> = a
            .compute_on(&engine)
            .on(kind)
            .zip(&b)
            .sort_by_key(|(_, y)| y)
            .map(|(x, _)| x)
            .collect_options();
        assert_eq!(
            by_b,
            [None, Some(1), None, Some(2), Some(3), Some(1)],
            "{kind}"
        );
        // Ordered by `a` descending, ties and nulls in input order.
        let order: Vec<u64> = a.compute_on(&engine).on(kind).argsort().collect();
        assert_eq!(order, [2, 5, 4, 0, 1, 3], "argsort on {kind}");
        let desc: Vec<Option<i32>> = a
            .compute_on(&engine)
            .on(kind)
            .zip(&b)
            .sort_by_key(|(x, _)| x.desc())
            .map(|(_, y)| y)
            .collect_options();
        assert_eq!(
            desc,
            [None, Some(40), Some(20), None, Some(10), Some(30)],
            "{kind}"
        );
    }
}

/// `argmin`/`argmax` reference over `Option` values: the first position
/// of the best non-null non-NaN value (`<`/`>`: `-0.0` ties `+0.0`), else
/// of the first non-null NaN, else `None`.
fn arg_ref(v: &[Option<f64>], max: bool) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, x) in v.iter().enumerate() {
        let Some(x) = *x else { continue };
        if x.is_nan() {
            continue;
        }
        let better = match best {
            None => true,
            Some((_, b)) => (max && x > b) || (!max && x < b),
        };
        if better {
            best = Some((i, x));
        }
    }
    best.map(|(i, _)| i)
        .or_else(|| v.iter().position(|x| x.is_some()))
}

#[test]
fn argmin_and_argmax_skip_nulls_on_every_backend() {
    let engine = common::engine();
    // Hand-picked: a null before the best, NaNs, both zeros, all-null,
    // all-NaN with nulls, a tie.
    let cases: Vec<Vec<Option<f64>>> = vec![
        vec![],
        vec![None],
        vec![None, None],
        vec![None, Some(f64::NAN), Some(f64::NAN)],
        vec![Some(0.0), None, Some(-0.0), Some(0.0)],
        vec![None, Some(-0.0), Some(0.0)],
        vec![
            Some(f64::NAN),
            None,
            Some(3.0),
            Some(-1.0),
            None,
            Some(-1.0),
            Some(7.0),
        ],
        vec![None, Some(f64::INFINITY), Some(f64::NEG_INFINITY), None],
    ];
    let mut all = cases;
    for n in [1000usize, 70_001] {
        let r = common::lcg(n, 41);
        all.push(
            r.iter()
                .map(|&w| match w % 13 {
                    0 => None,
                    1 => Some(f64::NAN),
                    _ => Some(((w >> 20) % 1000) as f64 - 500.0),
                })
                .collect(),
        );
    }
    for v in &all {
        let a64 = Float64Array::from(v.clone());
        let a32 = Float32Array::from(v.iter().map(|x| x.map(|x| x as f32)).collect::<Vec<_>>());
        let ints: Vec<Option<i32>> = v
            .iter()
            .map(|x| x.filter(|x| !x.is_nan()).map(|x| x as i32))
            .collect();
        let ai = Int32Array::from(ints.clone());
        let as_f: Vec<Option<f64>> = ints.iter().map(|x| x.map(f64::from)).collect();
        for kind in backends(&engine) {
            let ctx = format!("n={} on {kind}", v.len());
            let q64 = || a64.compute_on(&engine).on(kind);
            let q32 = || a32.compute_on(&engine).on(kind);
            let qi = || ai.compute_on(&engine).on(kind);
            for max in [false, true] {
                let arg = |q: Query<'_, Expr<f64>>| if max { q.argmax() } else { q.argmin() };
                assert_eq!(arg(q64()), arg_ref(v, max), "f64 max={max} {ctx}");
                let got = if max { q32().argmax() } else { q32().argmin() };
                assert_eq!(got, arg_ref(v, max), "f32 max={max} {ctx}");
                let got = if max { qi().argmax() } else { qi().argmin() };
                assert_eq!(got, arg_ref(&as_f, max), "i32 max={max} {ctx}");
            }
            // After a filter (which drops the null rows: their predicate
            // is null), a position in the filtered stream; after an
            // enumerate's filter, nulls remain.
            let kept: Vec<Option<f64>> = v
                .iter()
                .copied()
                .filter(|x| x.is_some_and(|x| x.is_nan() || x <= 400.0))
                .collect();
            let got = q64().filter(|x| !x.gt(400.0)).argmax();
            assert_eq!(got, arg_ref(&kept, true), "filtered {ctx}");
            let kept: Vec<Option<f64>> = v.iter().copied().skip(1).step_by(2).collect();
            let got = q64()
                .enumerate()
                .filter(|(i, _)| (i % 2).eq(1))
                .map(|(_, x)| x)
                .argmax();
            assert_eq!(got, arg_ref(&kept, true), "filtered {ctx}");
        }
    }
}

#[test]
fn a_scan_adds_nothing_for_a_null_on_every_backend() {
    let engine = common::engine();
    for n in lengths() {
        let r = common::lcg(n, 47);
        for valid in patterns(n, 5) {
            let vals: Vec<i64> = r.iter().map(|&w| (w >> 33) as i64 - (1 << 30)).collect();
            let a = Int64Array::from(options(&vals, &valid));
            let x = |i: usize| if valid[i] { vals[i] } else { 0 };
            let inclusive: Vec<i64> = (0..n)
                .scan(0i64, |s, i| {
                    *s = s.wrapping_add(x(i));
                    Some(*s)
                })
                .collect();
            let exclusive: Vec<i64> = (0..n)
                .scan(0i64, |s, i| {
                    let before = *s;
                    *s = s.wrapping_add(x(i));
                    Some(before)
                })
                .collect();
            let running_max: Vec<i64> = (0..n)
                .scan(i64::MIN, |s, i| {
                    if valid[i] {
                        *s = (*s).max(vals[i]);
                    }
                    Some(*s)
                })
                .collect();
            for kind in backends(&engine) {
                let ctx = format!("n={n} on {kind}");
                let q = || a.compute_on(&engine).on(kind);
                // Every output is a value: a plain collect works.
                assert_eq!(q().scan_sum().collect::<Vec<_>>(), inclusive, "{ctx}");
                assert_eq!(
                    q().scan_sum_exclusive().collect::<Vec<_>>(),
                    exclusive,
                    "exclusive {ctx}"
                );
                assert_eq!(
                    q().scan(i64::MIN, |s, x| s.max(x)).collect::<Vec<_>>(),
                    running_max,
                    "running max {ctx}"
                );
                // A null before the scan from a map of two columns.
                let doubled: Vec<i64> = q().zip(&a).map(|(x, y)| x + y).scan_sum().collect();
                let expect: Vec<i64> = inclusive.iter().map(|s| s.wrapping_mul(2)).collect();
                assert_eq!(doubled, expect, "map then scan {ctx}");
            }
        }
    }
}

/// `None` after every value, as the groups order a null component.
fn nulls_last<T: Copy>(x: Option<T>) -> (bool, Option<T>) {
    (x.is_none(), x)
}

#[test]
fn tuple_keys_and_distinct_with_nulls_come_back_as_options_on_every_backend() {
    use std::collections::BTreeMap;
    let engine = common::engine();
    for n in [0, 1, 100, 5000, 70_001] {
        let r = common::lcg(n, 53);
        let k1: Vec<Option<i32>> = drawn(&r, |w| w % 7 != 0, |w| (w >> 40) as i32 % 5 - 2);
        let k2: Vec<Option<u32>> = drawn(&r, |w| w % 5 != 1, |w| (w >> 20) as u32 % 3);
        let v: Vec<Option<i64>> = drawn(&r, |w| w % 11 != 2, |w| (w >> 30) as i64 - (1 << 33));
        let (a1, a2, av) = (
            Int32Array::from(k1.clone()),
            UInt32Array::from(k2.clone()),
            Int64Array::from(v.clone()),
        );
        // Reference: per (k1, k2), the rows and the sum of the non-null
        // values; groups ordered component by component, nulls last.
        type Key = (Option<i32>, Option<u32>);
        let order = |k: &Key| (nulls_last(k.0), nulls_last(k.1));
        let mut rows: BTreeMap<_, (Key, u64)> = BTreeMap::new();
        let mut sums: BTreeMap<_, (Key, i64, u64)> = BTreeMap::new();
        let mut first_seen: Vec<Key> = Vec::new();
        for i in 0..n {
            let k = (k1[i], k2[i]);
            rows.entry(order(&k)).or_insert((k, 0)).1 += 1;
            if !first_seen.contains(&k) {
                first_seen.push(k);
            }
            if let Some(x) = v[i] {
                let e = sums.entry(order(&k)).or_insert((k, 0, 0));
                e.1 = e.1.wrapping_add(x);
                e.2 += 1;
            }
        }
        let mut distinct: Vec<Option<i32>> = k1.clone();
        distinct.sort_by_key(|&x| nulls_last(x));
        distinct.dedup();
        for kind in backends(&engine) {
            let ctx = format!("n={n} on {kind}");
            let q = || a1.compute_on(&engine).on(kind).zip(&a2);
            let g = q().group_by(|(a, b)| (a, b)).option_keys().count();
            assert_eq!(
                g.into_pairs(),
                rows.values().copied().collect::<Vec<_>>(),
                "counts {ctx}"
            );
            let g = q()
                .group_by(|(a, b)| (a, b))
                .option_keys()
                .first_seen()
                .count();
            assert_eq!(g.keys, first_seen, "first seen {ctx}");
            let g = q()
                .zip(&av)
                .group_by(|((a, b), _)| (a, b))
                .option_keys()
                .agg(|(_, x), a| (a.sum(x), a.count()));
            assert_eq!(
                g.into_pairs(),
                sums.values()
                    .map(|&(k, s, c)| (k, (s, c)))
                    .collect::<Vec<_>>(),
                "sums {ctx}"
            );
            // One key: the null group as the key `None`, last.
            let g = a1
                .compute_on(&engine)
                .on(kind)
                .group_by(|x| x)
                .option_keys()
                .count();
            assert_eq!(g.keys, distinct, "one key {ctx}");
            assert_eq!(g.null_group, None, "{ctx}");
            let d = a1.compute_on(&engine).on(kind).distinct_options();
            assert_eq!(d, distinct, "distinct_options {ctx}");
        }
    }
    // Two 64-bit keys that may be null need 192 bits: a clear error.
    let a = Int64Array::from(vec![Some(1), None]);
    let e = a
        .compute_on(&engine)
        .fallible()
        .zip(&a)
        .group_by(|(x, y)| (x, y))
        .option_keys()
        .count()
        .unwrap_err();
    assert!(e.to_string().contains("128 bits"), "{e}");
}

#[test]
fn a_null_join_key_matches_nothing_and_payload_nulls_travel_on_every_backend() {
    let engine = common::engine();
    for (n, m) in [(0, 5), (7, 0), (100, 30), (5000, 700), (70_001, 4000)] {
        let r = common::lcg(n, 59);
        let s = common::lcg(m, 61);
        let k: Vec<Option<i32>> = drawn(&r, |w| w % 6 != 0, |w| (w >> 40) as i32 % 40);
        let p: Vec<Option<i64>> = drawn(&r, |w| w % 5 != 3, |w| (w >> 20) as i64 % 1000);
        // Build keys: some null, some repeated (a probe row matches each).
        let bk: Vec<Option<i32>> = drawn(&s, |w| w % 4 != 0, |w| (w >> 40) as i32 % 60);
        let bp: Vec<Option<i64>> = drawn(&s, |w| w % 3 != 1, |w| (w >> 24) as i64 % 100);
        let (ka, pa, bka, bpa) = (
            Int32Array::from(k.clone()),
            Int64Array::from(p.clone()),
            Int32Array::from(bk.clone()),
            Int64Array::from(bp.clone()),
        );
        // References: pairs in probe order, matches in build order.
        let mut pairs: Vec<(Option<i64>, Option<i64>)> = Vec::new();
        let mut semi: Vec<Option<i64>> = Vec::new();
        let mut anti: Vec<Option<i64>> = Vec::new();
        for i in 0..n {
            let matches: Vec<usize> = (0..m)
                .filter(|&j| k[i].is_some() && bk[j] == k[i])
                .collect();
            pairs.extend(matches.iter().map(|&j| (p[i], bp[j])));
            if matches.is_empty() {
                anti.push(p[i]);
            } else {
                semi.push(p[i]);
            }
        }
        let sums: Vec<Option<i64>> = pairs.iter().map(|&(a, b)| Some(a? + b?)).collect();
        for kind in backends(&engine) {
            let ctx = format!("n={n} m={m} on {kind}");
            let q = || ka.compute_on(&engine).on(kind).zip(&pa);
            let b = || bka.compute_on(&engine).zip(&bpa);
            let joined = || q().join(b(), |(k, _)| k, |(k, _)| k);
            assert_eq!(joined().count_rows(), pairs.len(), "rows {ctx}");
            assert_eq!(
                joined().map(|((_, p), _)| p).collect_options(),
                pairs.iter().map(|x| x.0).collect::<Vec<_>>(),
                "probe payload {ctx}"
            );
            assert_eq!(
                joined().map(|(_, (_, bp))| bp).collect_options(),
                pairs.iter().map(|x| x.1).collect::<Vec<_>>(),
                "build payload {ctx}"
            );
            assert_eq!(
                joined().map(|((_, p), (_, bp))| p + bp).collect_options(),
                sums,
                "both payloads {ctx}"
            );
            // Aggregates skip the nulls that came through the join.
            assert_eq!(
                joined().map(|(_, (_, bp))| bp).sum(),
                pairs.iter().filter_map(|x| x.1).sum::<i64>(),
                "sum {ctx}"
            );
            assert_eq!(
                q().semi_join(b(), |(k, _)| k, |(k, _)| k)
                    .map(|(_, p)| p)
                    .collect_options(),
                semi,
                "semi {ctx}"
            );
            // An anti join keeps a null key's rows: it matches nothing.
            assert_eq!(
                q().anti_join(b(), |(k, _)| k, |(k, _)| k)
                    .map(|(_, p)| p)
                    .collect_options(),
                anti,
                "anti {ctx}"
            );
            let set: Vec<i32> = bk.iter().flatten().copied().collect();
            assert_eq!(
                q().map(|(k, _)| k).not_in(&set).count_rows(),
                anti.len(),
                "not_in {ctx}"
            );
        }
    }
}

/// `f64` sums in another order: equal within a relative `1e-9`.
fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * (a.abs().max(b.abs()) + 1.0),
        (a, b) => a == b,
    }
}

#[test]
fn aggregates_over_columns_with_different_nulls_skip_each_their_own_on_every_backend() {
    use std::collections::BTreeMap;
    let engine = common::engine();
    for n in [0, 1, 64, 1000, 70_001] {
        let r = common::lcg(n, 29);
        let k: Vec<Option<i32>> = drawn(&r, |w| w % 11 != 3, |w| (w >> 50) as i32 % 7);
        // Nulls in a: out of 10, in b: out of 7 (20% and 14%; none and
        // 86%; all and none; none and all).
        for (p, (na, nb)) in [(2, 1), (0, 6), (10, 0), (0, 7)].into_iter().enumerate() {
            let a: Vec<Option<i64>> = drawn(&r, |w| w % 10 >= na, |w| (w >> 33) as i64 - (1 << 30));
            let b: Vec<Option<f64>> = drawn(
                &r,
                |w| (w >> 8) % 7 >= nb,
                |w| ((w >> 20) % 1000) as f64 / 100.0,
            );
            let (aa, ba, kk) = (
                Int64Array::from(a.clone()),
                Float64Array::from(b.clone()),
                Int32Array::from(k.clone()),
            );
            let xs: Vec<i64> = a.iter().flatten().copied().collect();
            let ys: Vec<f64> = b.iter().flatten().copied().collect();
            let both: Vec<f64> = a
                .iter()
                .zip(&b)
                .filter_map(|(x, y)| Some(*x.as_ref()? as f64 * y.as_ref()?))
                .collect();
            let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
            let fmin = |v: &[f64]| v.iter().copied().reduce(f64::min);
            for kind in backends(&engine) {
                let ctx = format!("n={n} pattern {p} on {kind}");
                let q = || aa.compute_on(&engine).on(kind).zip(&ba);
                // Each aggregate skips the nulls of what it reads, in one
                // pass; `count()` counts the elements with no null.
                let (s, c, m, lo, hi, any, all) = q().aggregate(|(x, y), g| {
                    (
                        g.sum(x),
                        g.count(),
                        g.mean(y),
                        g.min(x),
                        g.max(y),
                        g.any(y.gt(5.0)),
                        g.all(x.gt(0i64)),
                    )
                });
                assert_eq!(s, xs.iter().fold(0i64, |s, &x| s.wrapping_add(x)), "{ctx}");
                assert_eq!(c as usize, both.len(), "count {ctx}");
                assert!(close(m, mean(&ys)), "mean {ctx}: {m:?}");
                assert_eq!(lo, xs.iter().min().copied(), "min {ctx}");
                assert_eq!(hi, ys.iter().copied().reduce(f64::max), "max {ctx}");
                assert_eq!(any, ys.iter().any(|&y| y > 5.0), "any {ctx}");
                assert_eq!(all, xs.iter().all(|&x| x > 0), "all {ctx}");
                // An expression of both is null where either is.
                let (d, md, lod) = q().aggregate(|(x, y), g| {
                    let xy = x.cast::<f64>() * y;
                    (g.sum(xy), g.mean(xy), g.min(xy))
                });
                assert!(close(Some(d), Some(both.iter().sum())), "dot {ctx}");
                assert!(close(md, mean(&both)), "mean of xy {ctx}");
                assert_eq!(lod, fmin(&both), "min of xy {ctx}");
                // Argmin and argmax among them: positions count the nulls.
                let arg = |v: &[Option<f64>], max: bool| {
                    let mut best: Option<(usize, f64)> = None;
                    for (i, x) in v.iter().enumerate() {
                        let Some(x) = *x else { continue };
                        if best.is_none_or(|(_, b)| if max { x > b } else { x < b }) {
                            best = Some((i, x));
                        }
                    }
                    best.map(|(i, _)| i)
                };
                let af: Vec<Option<f64>> = a.iter().map(|x| x.map(|x| x as f64)).collect();
                let got =
                    q().aggregate(|(x, y), g| (g.argmin(x), g.argmax(y), g.sum(y), g.count()));
                assert_eq!(
                    (got.0, got.1, got.3),
                    (arg(&af, false), arg(&b, true), both.len() as u64),
                    "argmin, argmax {ctx}"
                );
                assert!(close(Some(got.2), Some(ys.iter().sum())), "sum {ctx}");

                // Per group of a key that may be null.
                #[derive(Default, Debug, PartialEq)]
                struct G {
                    rows: u64,
                    xs: Vec<i64>,
                    ys: Vec<f64>,
                }
                let mut groups: BTreeMap<Option<i32>, G> = BTreeMap::new();
                for ((k, x), y) in k.iter().zip(&a).zip(&b) {
                    let g = groups.entry(*k).or_default();
                    if x.is_some() && y.is_some() {
                        g.rows += 1;
                    }
                    g.xs.extend(x);
                    g.ys.extend(y);
                }
                let g = kk
                    .compute_on(&engine)
                    .on(kind)
                    .zip(&aa)
                    .zip(&ba)
                    .group_by(|((k, _), _)| k)
                    .agg(|((_, x), y), g| (g.count(), g.sum(x), g.min(x), g.mean(y), g.max(y)));
                let keys: Vec<i32> = groups.keys().filter_map(|k| *k).collect();
                assert_eq!(g.keys, keys, "group keys {ctx}");
                let mut got: Vec<_> = g.values.clone();
                got.extend(g.null_group);
                for ((key, e), v) in groups
                    .iter()
                    .filter(|(k, _)| k.is_some())
                    .chain(groups.iter().filter(|(k, _)| k.is_none()))
                    .zip(&got)
                {
                    let sum = e.xs.iter().fold(0i64, |s, &x| s.wrapping_add(x));
                    assert_eq!(
                        (v.0, v.1, v.2),
                        (e.rows, sum, e.xs.iter().min().copied()),
                        "group {key:?} {ctx}"
                    );
                    assert!(close(v.3, mean(&e.ys)), "group {key:?} mean {ctx}");
                    assert_eq!(
                        v.4,
                        e.ys.iter().copied().reduce(f64::max),
                        "group {key:?} {ctx}"
                    );
                }
                assert_eq!(got.len(), groups.len(), "groups {ctx}");
            }
        }
    }
    // What cannot read the identity at a null row is refused over
    // columns with different nulls, with a clear error.
    let a = Int64Array::from(vec![Some(1), None, Some(3)]);
    let b = Float64Array::from(vec![Some(1.0), Some(2.0), None]);
    let q = || a.compute_on(&engine).zip(&b).fallible();
    let e = q()
        .aggregate(|(x, y), g| (g.variance(x), g.sum(y)))
        .unwrap_err();
    assert!(
        e.to_string().contains("variance") && e.to_string().contains("different nulls"),
        "{e}"
    );
    let e = q()
        .group_by(|(x, _)| x & 1)
        .agg(|(x, y), g| (g.first(x), g.sum(y)))
        .unwrap_err();
    assert!(e.to_string().contains("first"), "{e}");
    // With one validity they run (rows with a null are skipped), and
    // so does a variance of a column never null beside others.
    assert_eq!(
        q().aggregate(|(x, _), g| (g.variance(x), g.sum(x)))
            .unwrap(),
        (Some(2.0), 4)
    );
    let c = [1.0f64, 2.0, 4.0];
    let got = q()
        .zip(&c)
        .aggregate(|((x, _), z), g| (g.sum(x), g.variance(z), g.first(z)))
        .unwrap();
    assert_eq!((got.0, got.2), (4, Some(1.0)));
    assert!(close(got.1, Some(7.0 / 3.0)), "{got:?}");
    // An argmin whose valid values all tie with its mask (the type's
    // extreme, or NaN) is the first valid row, not a null one before it.
    let big = Int64Array::from(vec![None, Some(i64::MAX), None, Some(i64::MAX)]);
    let nan = Float64Array::from(vec![None, None, Some(f64::NAN), Some(f64::NAN)]);
    let small = Int64Array::from(vec![None, Some(i64::MIN), Some(3)]);
    for kind in backends(&engine) {
        let got = big
            .compute_on(&engine)
            .on(kind)
            .zip(&nan)
            .aggregate(|(x, y), g| {
                (
                    g.argmin(x),
                    g.argmax(x),
                    g.argmin(y),
                    g.argmax(y),
                    g.count(),
                )
            });
        assert_eq!(got, (Some(1), Some(1), Some(2), Some(2), 1), "on {kind}");
        let got = small
            .compute_on(&engine)
            .on(kind)
            .aggregate(|x, g| (g.argmax(x), g.argmin(x), g.sum(x)));
        assert_eq!(got, (Some(2), Some(1), i64::MIN + 3), "on {kind}");
    }
}
