//! The relational operators against what a Rust programmer writes without
//! computeq, in one run, sampled in interleaved rounds (medians of the
//! rounds' ratios, as `examples/bench.rs`): `sort` of f32 and u32 against
//! `sort_unstable` and rayon's `par_sort_unstable`, `sort_by_key` with a
//! payload against std's stable `sort_by_key`, `top_k(100)` against a
//! full sort then take and against one pass over the input;
//! `group_by(..).agg(sum)` with 10^3 and 10^6 distinct sparse `u32` keys
//! against a hand-written FxHash (hashbrown) loop (on one thread, and on
//! every thread with the maps merged: the machine's ceiling for it) and
//! std's `HashMap`,
//! `distinct` against `sort_unstable` + `dedup` (every contender returns
//! its groups sorted by key); `join` of the rows with a 10^5-row build side
//! (keys from one pool, some repeated) summing a product of the pairs,
//! against a hand-written FxHash join and std's `HashMap`. For the sorts,
//! keys per second and the fraction of an LSD radix sort's memory-traffic
//! bound: its passes times a copy of the data measured in the same rounds.
//!
//! `cargo run --release --example bench_relational` (`-- --sizes 1000,10000000`).

#[path = "../benches/common/baselines.rs"]
mod baselines;
#[path = "../benches/common/order.rs"]
mod order;
#[path = "../benches/common/relational_baselines.rs"]
mod relational_baselines;

use baselines::data;
use computeq::prelude::*;
use order::*;
use relational_baselines::*;
use std::hint::black_box;

/// Runs of each computeq query before it is measured (the selector's
/// exploration of a new plan, as in `bench.rs`).
const WARM_UP_RUNS: usize = 16;

struct Row {
    name: String,
    n: usize,
    backend: BackendKind,
    algorithm: String,
    cq: f64,
    /// (baseline name, median ratio baseline / computeq).
    vs: Vec<(&'static str, f64)>,
}

fn main() {
    // Any device opened and probed before anything is timed: a probe
    // started by the first large query runs in the background, and the
    // rows measured beside it share the cores with its kernels.
    computeq::engine().prepare_devices();
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = match args.iter().position(|a| a == "--sizes") {
        Some(i) => args[i + 1]
            .split(',')
            .map(|s| s.parse().expect("size"))
            .collect(),
        None => vec![1_000, 10_000_000],
    };
    println!(
        "computeq relational bench: {} threads, sizes {:?}; ratio = other / computeq (>1: computeq faster)",
        rayon::current_num_threads(),
        sizes.iter().map(|&n| fmt_n(n)).collect::<Vec<_>>()
    );
    black_box(data(1 << 20, 3).compute().sum());
    let mut rows: Vec<Row> = Vec::new();
    let mut bounds: Vec<String> = Vec::new();
    for &n in &sizes {
        let xs = data(n, 1);
        let us: Vec<u32> = xs.iter().map(|&x| (x * 4.0e9) as u32).collect();
        let payload: Vec<u32> = (0..n as u32).collect();
        let reps = if n >= 10_000_000 { 11 } else { 21 };
        let mut copy_out = vec![0f32; n];
        let t = measure(
            &mut rows,
            n,
            reps,
            "sort f32".into(),
            &mut || {
                black_box(xs.compute().sort().collect::<Vec<f32>>());
            },
            vec![
                ("sort_unstable", &mut || {
                    black_box(sort_std_f32(&xs));
                }),
                ("par_sort_unstable", &mut || {
                    black_box(sort_rayon_f32(&xs));
                }),
                ("copy", &mut || copy_f32(&xs, &mut copy_out)),
            ],
        );
        if n >= 1_000_000 {
            bounds.push(bound_line("sort f32", n, &t));
        }
        let t = measure(
            &mut rows,
            n,
            reps,
            "sort u32".into(),
            &mut || {
                black_box(us.compute().sort().collect::<Vec<u32>>());
            },
            vec![
                ("sort_unstable", &mut || {
                    black_box(sort_std_u32(&us));
                }),
                ("par_sort_unstable", &mut || {
                    black_box(sort_rayon_u32(&us));
                }),
                ("copy", &mut || copy_f32(&xs, &mut copy_out)),
            ],
        );
        if n >= 1_000_000 {
            bounds.push(bound_line("sort u32", n, &t));
        }
        measure(
            &mut rows,
            n,
            reps,
            "sort_by_key u32 + payload".into(),
            &mut || {
                let v: Vec<(u32, u32)> =
                    us.compute().zip(&payload).sort_by_key(|(k, _)| k).collect();
                black_box(v);
            },
            vec![
                ("std sort_by_key", &mut || {
                    black_box(sort_by_key_std(&us, &payload));
                }),
                ("rayon par_sort_by_key", &mut || {
                    black_box(sort_by_key_rayon(&us, &payload));
                }),
            ],
        );
        for distinct in [1_000usize, 1_000_000] {
            if distinct * 10 > n.max(10_000) {
                continue;
            }
            let (keys, vals) = keyed(n, distinct, 9);
            measure(
                &mut rows,
                n,
                reps,
                format!("group_by.sum, {} keys", fmt_n(distinct)),
                &mut || {
                    black_box(
                        keys.compute()
                            .zip(&vals)
                            .group_by(|(k, _)| k)
                            .agg(|(_, v), a| a.sum(v)),
                    );
                },
                vec![
                    ("FxHash loop", &mut || {
                        black_box(group_sum_fx(&keys, &vals));
                    }),
                    ("std HashMap", &mut || {
                        black_box(group_sum_std(&keys, &vals));
                    }),
                    ("FxHash loop over threads", &mut || {
                        black_box(group_sum_fx_par(&keys, &vals));
                    }),
                ],
            );
        }
        {
            let (keys, _) = keyed(n, (n / 100).clamp(10, 100_000), 4);
            measure(
                &mut rows,
                n,
                reps,
                format!("distinct, {} values", fmt_n((n / 100).clamp(10, 100_000))),
                &mut || {
                    black_box(keys.compute().distinct());
                },
                vec![("sort_unstable + dedup", &mut || {
                    black_box(distinct_sort_dedup(&keys));
                })],
            );
        }
        {
            let d = (n / 10).clamp(10, 100_000);
            let (pk, pv) = keyed(n, d, 21);
            let (bk, bv) = keyed(d, d, 21);
            measure(
                &mut rows,
                n,
                reps,
                format!("join.sum, {} build rows", fmt_n(d)),
                &mut || {
                    black_box(
                        pk.compute()
                            .zip(&pv)
                            .join(bk.compute().zip(&bv), |(k, _)| k, |(k, _)| k)
                            .map(|((_, a), (_, b))| a * b)
                            .sum(),
                    );
                },
                vec![
                    ("FxHash join", &mut || {
                        black_box(join_sum_fx(&pk, &pv, &bk, &bv));
                    }),
                    ("std HashMap join", &mut || {
                        black_box(join_sum_std(&pk, &pv, &bk, &bv));
                    }),
                ],
            );
        }
        if n > 1000 {
            measure(
                &mut rows,
                n,
                reps,
                "top_k(100) f32".into(),
                &mut || {
                    black_box(xs.compute().top_k(100).collect::<Vec<f32>>());
                },
                vec![
                    ("full sort + take", &mut || {
                        black_box(top_k_by_sort(&xs, 100));
                    }),
                    ("select_nth_unstable", &mut || {
                        black_box(top_k_by_select(&xs, 100));
                    }),
                    ("one pass (max)", &mut || {
                        black_box(one_pass_max(&xs));
                    }),
                ],
            );
        }
    }
    println!("\n| query | N | computeq | backend | algorithm | vs |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let vs: Vec<String> = r.vs.iter().map(|(n, x)| format!("{n} {x:.2}x")).collect();
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.name,
            fmt_n(r.n),
            fmt_secs(r.cq),
            r.backend,
            r.algorithm,
            vs.join(", ")
        );
    }
    for b in &bounds {
        println!("{b}");
    }
    println!("\nTargets: sort at 10^7 >= 3x sort_unstable and >= 1.5x par_sort_unstable; sort_by_key >= 2x std; group_by.sum >= 2x an FxHash loop and >= 5x std HashMap; distinct (10^5 values) >= 2x sort_unstable + dedup; top_k(100) >= 5x a full sort and within 1.5x of one pass; at 10^3 sort within 1.5x of sort_unstable and group_by within 2x of the loop.");
    let get = |r: &Row, name: &str| r.vs.iter().find(|v| v.0 == name).map_or(0.0, |v| v.1);
    for r in &rows {
        let verdicts: Vec<String> = match (r.name.as_str(), r.n >= 10_000_000) {
            ("sort f32" | "sort u32", true) => vec![
                check("vs sort_unstable", get(r, "sort_unstable"), 3.0),
                check("vs par_sort_unstable", get(r, "par_sort_unstable"), 1.5),
            ],
            ("sort f32" | "sort u32", false) if r.n <= 1000 => {
                vec![check(
                    "vs sort_unstable",
                    get(r, "sort_unstable"),
                    1.0 / 1.5,
                )]
            }
            ("sort_by_key u32 + payload", true) => {
                vec![check("vs std sort_by_key", get(r, "std sort_by_key"), 2.0)]
            }
            (name, true) if name.starts_with("group_by.sum") => vec![
                check("vs FxHash loop", get(r, "FxHash loop"), 2.0),
                check("vs std HashMap", get(r, "std HashMap"), 5.0),
            ],
            (name, false) if name.starts_with("group_by.sum") && r.n <= 1000 => {
                vec![check("vs FxHash loop", get(r, "FxHash loop"), 0.5)]
            }
            (name, true) if name.starts_with("distinct") => {
                vec![check(
                    "vs sort_unstable + dedup",
                    get(r, "sort_unstable + dedup"),
                    2.0,
                )]
            }
            ("top_k(100) f32", true) => vec![
                check("vs full sort", get(r, "full sort + take"), 5.0),
                check("vs one pass", get(r, "one pass (max)"), 1.0 / 1.5),
            ],
            _ => continue,
        };
        println!("  {} at {}: {}", r.name, fmt_n(r.n), verdicts.join(", "));
    }
}

/// Measures `cq` against `others` in interleaved rounds and adds a row;
/// returns every contender's samples.
fn measure<'a>(
    rows: &mut Vec<Row>,
    n: usize,
    reps: usize,
    name: String,
    cq: &'a mut dyn FnMut(),
    others: Vec<(&'static str, &'a mut dyn FnMut())>,
) -> Vec<Vec<f64>> {
    // The backend shown is the one most of the warm-up runs took: the
    // last run alone may be one of the selector's periodic re-checks of
    // another candidate.
    let mut taken: Vec<(BackendKind, String)> = Vec::new();
    for _ in 0..WARM_UP_RUNS {
        cq();
        if let Some(m) = engine().last_run() {
            let algorithm = m.algorithm.map_or("–".to_string(), |a| a.to_string());
            taken.push((m.backend, algorithm));
        }
    }
    let (backend, algorithm) = taken
        .iter()
        .max_by_key(|t| taken.iter().filter(|u| u.0 == t.0).count())
        .cloned()
        .unwrap_or((BackendKind::CpuScalar, "–".to_string()));
    let names: Vec<&'static str> = others.iter().map(|o| o.0).collect();
    let mut fs: Vec<&mut dyn FnMut()> = vec![cq];
    fs.extend(others.into_iter().map(|o| o.1));
    let t = interleaved(&mut fs, reps);
    rows.push(Row {
        name,
        n,
        backend,
        algorithm,
        cq: median(t[0].clone()),
        vs: names
            .iter()
            .enumerate()
            .map(|(i, nm)| (*nm, ratio(&t[i + 1], &t[0])))
            .collect(),
    });
    t
}

fn check(what: &str, x: f64, need: f64) -> String {
    format!(
        "{what} {x:.2}x (need {need:.2}x) {}",
        if x >= need { "met" } else { "MISSED" }
    )
}

/// Keys per second, and the fraction of an LSD radix sort's traffic bound:
/// its four digit passes (read + scatter-write of the words), the key
/// transform in and the decode out, each at the rate of the copy measured
/// in the same rounds (4 bytes read and written per key per pass): six
/// copies of the keys.
fn bound_line(name: &str, n: usize, t: &[Vec<f64>]) -> String {
    let cq = median(t[0].clone());
    let copy = median(t[3].clone());
    let bound = 6.0 * copy;
    format!(
        "  {name} at {}: {:.0} Mkeys/s; a copy of the keys takes {}, an LSD radix sort's traffic bound (6 copies) {}: computeq at {:.0}% of it",
        fmt_n(n),
        n as f64 / cq / 1e6,
        fmt_secs(copy),
        fmt_secs(bound),
        100.0 * bound / cq
    )
}
