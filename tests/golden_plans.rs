//! Golden text of optimized physical plans (the stage text `explain` prints),
//! one file per query in `tests/golden/plans/`, naga/cranelift style: a
//! change in fusion, folding, CSE, predication or dead-code elimination shows
//! up as a diff in review. The first line names the optimizer passes that
//! changed the plan. `BLESS=1 cargo test --test golden_plans` rewrites the
//! files (`support/golden.rs`).

#[path = "support/golden.rs"]
mod golden;

use computeq::explain::Explain;
use computeq::prelude::*;
use computeq::{Config, Engine};
use golden::Golden;

fn text(e: &Explain) -> String {
    let passes = if e.passes.is_empty() {
        "none".to_string()
    } else {
        e.passes.join(", ")
    };
    let mut t = format!("# optimizer: {passes}\n{}", e.plan);
    for (input, side) in &e.build_sides {
        t.push_str(&format!(
            "# build side into inputs {input:?}\n{}",
            text(side)
        ));
    }
    t
}

fn check(name: &str, explain: Explain) {
    let mut golden = Golden::new("plans");
    golden.check(&format!("{name}.txt"), &text(&explain));
    golden.finish();
}

struct Data {
    xs: Vec<f32>,
    ys: Vec<f32>,
    is: Vec<i32>,
}

fn data() -> Data {
    Data {
        xs: (0..64).map(|i| i as f32 * 0.25 - 4.0).collect(),
        ys: (0..60).map(|i| 1.0 - i as f32 * 0.5).collect(),
        is: (0..64).map(|i| (i * 7) % 19 - 9).collect(),
    }
}

macro_rules! golden {
    ($($name:ident: |$e:ident, $d:ident| $query:expr;)*) => {$(
        #[test]
        fn $name() {
            let $e = Engine::with_config(Config::default());
            let $d = data();
            check(stringify!($name), $query);
        }
    )*};
}

golden! {
    p1_sum_of_map: |e, d| e.query(&d.xs).map(|x| x * 2.0 + 1.0).explain().sum();
    p2_filter_into_predicated_reduce: |e, d| e.query(&d.xs).filter(|x| x.gt(0.5)).map(|x| x * x).explain().sum();
    p3_prefix_sum_collect: |e, d| e.query(&d.xs).scan_sum().explain().collect::<Vec<f32>>();
    p4_collect_sqrt: |e, d| e.query(&d.xs).map(|x| x.sqrt() * 3.0 - x).explain().collect::<Vec<f32>>();
    p5_dot_product: |e, d| e.query(&d.xs).zip(&d.ys).map(|(x, y)| x * y).explain().sum();
    filter_collect_compacts: |e, d| e.query(&d.xs).filter(|x| x.ge(0.0)).explain().collect::<Vec<f32>>();
    enumerate_filter_argmax: |e, d| e
        .query(&d.is)
        .enumerate()
        .filter(|(i, _)| (i % 3).eq(0))
        .map(|(_, x)| x)
        .explain()
        .argmax();
    scan_then_filter_count: |e, d| e.query(&d.is).scan_sum().filter(|x| x.gt(0)).explain().count();
    stats_is_one_multi_aggregate: |e, d| e.query(&d.xs).map(|x| x.abs()).explain().stats();
    variance_is_one_m2_and_a_count: |e, d| e.query(&d.xs).map(|x| x * 2.0).explain().variance();
    aggregate_shares_identical_requests: |e, d| e.query(&d.xs).zip(&d.ys).explain().aggregate(|(x, y), a| (a.sum(x * y), a.max(y), a.count(), a.mean(x), a.count()));
    find_is_a_predicated_first: |e, d| e.query(&d.is).map(|x| x * 3).explain().find(|x| x.gt(10));
    position_enumerates_then_firsts: |e, d| e.query(&d.xs).explain().position(|x| x.ge(1.0));
    histogram_counts_by_a_traced_key: |e, d| e.query(&d.xs).filter(|x| x.ne(0.0)).explain().histogram(8, -4.0, 4.0);
    sort_after_filter_then_skip_take: |e, d| e.query(&d.xs).filter(|x| x.gt(0.0)).sort().skip(2).take(3).explain().collect::<Vec<f32>>();
    top_k_by_key_is_a_sort_with_fetch: |e, d| e.query(&d.xs).zip(&d.ys).top_k_by_key(3, |(x, y)| (x, y.desc())).map(|(x, y)| x + y).explain().sum();
    argsort_enumerates_then_sorts: |e, d| e.query(&d.is).argsort().explain().collect::<Vec<u64>>();
    group_by_agg_is_one_group_stage: |e, d| e.query(&d.is).zip(&d.is).explain().group_by(|(k, _)| k & 3).agg(|(_, x), a| (a.sum(x), a.variance(x), a.argmax(x)));
    join_ends_a_stage_and_the_query_goes_on: |e, d| e
        .query(&d.is)
        .zip(&d.xs)
        .filter(|(k, _)| k.ne(0))
        .join(e.query(&d.is).zip(&d.ys).filter(|(_, y)| y.gt(0.0)), |(k, _)| k, |(k, _)| k * 2)
        .map(|((_, x), (_, y))| x * y)
        .explain()
        .sum();
    is_in_reads_the_set_in_place: |e, d| e.query(&d.is).map(|x| x * 2).is_in(&d.is).explain().count();
    value_counts_after_filter: |e, d| e.query(&d.is).filter(|x| x.gt(0)).explain().value_counts();
    distinct_of_an_expression: |e, d| e.query(&d.xs).map(|x| x * 2.0).explain().distinct();
    skip_take_range: |e, d| e.query(&d.xs).skip(3).take(10).explain().sum();
    custom_reduce: |e, d| e.query(&d.is).explain().reduce(1, |a, b| a * b);
    custom_exclusive_scan: |e, d| e.query(&d.is).scan_exclusive(i32::MIN, |a, b| a.max(b)).explain().collect::<Vec<i32>>();
    constants_fold: |e, d| e
        .query(&d.xs)
        .map(|x| x * (Expr::constant(2.0f32) * Expr::constant(3.0f32)) + Expr::constant(1.0f32).sqrt())
        .explain()
        .sum();
    common_subexpressions_merge: |e, d| e.query(&d.xs).map(|x| (x * x + 1.0) * (x * x + 1.0)).explain().sum();
    mean_casts_to_f64: |e, d| e.query(&d.is).explain().mean();
    zip_after_filter_joins_two_stages: |e, d| e
        .query(&d.xs)
        .filter(|x| x.lt(1.0))
        .zip(&d.ys)
        .map(|(x, y)| x + y)
        .explain()
        .collect::<Vec<f32>>();
    unused_zip_column_is_dropped: |e, d| e.query(&d.xs).zip(&d.ys).map(|(_, y)| y).explain().sum();
    any_after_map: |e, d| e.query(&d.is).map(|x| x * 2).explain().any(|x| x.gt(10));
    casts_and_select: |e, d| e
        .query(&d.is)
        .map(|x| x.gt(0).select(x.cast::<f64>().sqrt(), -1.0))
        .explain()
        .collect::<Vec<f64>>();
}
