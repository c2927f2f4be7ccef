//! Pipelines P1–P7 (P6: the one-pass variance, P7: a 256-bin histogram) on f32 at N = 10^3, 10^5, 10^7, 10^8: computeq (auto
//! selected) against std iterators, rayon and a hand-written `wide` loop,
//! in one run. The four are sampled in interleaved rounds (each round one
//! sample of each, in a fresh order) and a ratio is the median of the
//! rounds' ratios, so that load from other tenants of a shared machine
//! falls on all four alike. computeq is measured in steady state, after
//! `WARM_UP_RUNS` runs of each query (a new plan's first runs at a size
//! explore alternative backends); plus peak extra memory per
//! pipeline and, when a wgpu adapter exists, the wgpu backend with its
//! upload / execute / download split.
//!
//! `cargo run --release --example bench` (`-- --quick` stops at 10^7;
//! `-- --sizes 1000,100000` picks sizes; `-- --devices` prints only the
//! device backends' rows; `-- --collect` only P4's allocator-regime table;
//! `BENCH_TRACE=1` prints each P4 run's backend, reason and prices to
//! stderr).

#[path = "../benches/common/arrow_baselines.rs"]
mod arrow_baselines;
#[path = "../benches/common/baselines.rs"]
mod baselines;
#[path = "../benches/common/fresh_mappings.rs"]
mod fresh_mappings;
#[path = "../benches/common/order.rs"]
mod order;

use arrow_baselines::*;
use baselines::*;
use computeq::prelude::*;
use fresh_mappings::FreshMappings;
use order::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{
    AtomicBool, AtomicIsize, AtomicU8,
    Ordering::{Relaxed, SeqCst},
};

/// Counts live and peak heap bytes, to report what a query allocates;
/// only inside [`peak_extra`], so that the timed calls (computeq's and the
/// baselines' alike) pay one relaxed load per allocation and free, not the
/// counters' locked read-modify-writes (each a full barrier on x86).
struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed since `peak_extra` began (negative
/// when older allocations are freed).
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn counting() -> bool {
    COUNTING.load(Relaxed)
}

/// Counts `bytes` more live (and the peak) when `p` was allocated.
fn grown(p: *mut u8, bytes: usize) -> *mut u8 {
    if !p.is_null() && counting() {
        let bytes = bytes as isize;
        let now = LIVE.fetch_add(bytes, Relaxed) + bytes;
        PEAK.fetch_max(now, Relaxed);
    }
    p
}

/// Counts `bytes` fewer live.
fn shrunk(bytes: usize) {
    if counting() {
        LIVE.fetch_sub(bytes as isize, Relaxed);
    }
}

/// Where large blocks come from, for the collect rows ([`Regime`]).
static REGIME: AtomicU8 = AtomicU8::new(Regime::System as u8);

/// Blocks at least this large are recycled (regime `Recycled`) or fresh
/// mappings (regime `Fresh`).
const LARGE: usize = 128 << 10;

/// How the allocator serves large blocks. Which one a program meets
/// depends on its allocator and the size: glibc maps blocks above its
/// (adaptive, at most 32 MiB) threshold fresh from the system and reuses
/// freed heap memory below it; jemalloc and mimalloc reuse freed memory
/// of every size.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Regime {
    /// The system allocator as configured.
    System = 0,
    /// A freed large block is kept and handed to the next request of its
    /// size and alignment: no page faults, and a zeroed request pays a
    /// pass of zeroing (as `calloc` does over reused memory).
    Recycled = 1,
    /// Every large block is a fresh mapping of its own (`mmap`, unmapped
    /// when freed): each first write of a page faults. (Setting glibc's
    /// `mmap` threshold to [`LARGE`] is not enough: glibc serves a request
    /// from a free heap chunk before it maps one, so after the recycled
    /// phase of a size had freed its blocks into the heap, the fresh phase
    /// reused them and measured no faults at all.)
    Fresh = 2,
}

/// Blocks kept by regime `Recycled`: (address, size, alignment); an
/// empty slot has address 0.
static KEPT: std::sync::Mutex<[(usize, usize, usize); 8]> = std::sync::Mutex::new([(0, 0, 0); 8]);

fn set_regime(r: Regime) {
    if r != Regime::Recycled {
        // Kept blocks go back to the system.
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        for slot in kept.iter_mut().filter(|s| s.0 != 0) {
            let (p, size, align) = std::mem::take(slot);
            // SAFETY: a block the system allocated with this layout.
            unsafe { System.dealloc(p as *mut u8, Layout::from_size_align_unchecked(size, align)) };
        }
    }
    #[cfg(target_os = "linux")]
    // SAFETY: a plain setting of glibc's allocator (ignored by others). The
    // default's adaptive threshold cannot be restored; 32 MiB is where it
    // ends up after the first large free.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
    REGIME.store(r as u8, SeqCst);
}

/// Blocks mapped by regime `Fresh` and not yet unmapped. A block freed
/// after the regime changed is still recognized here.
static MAPPED: FreshMappings = FreshMappings::new();

/// A fresh mapping for `l` (regime `Fresh`, a large block), or null.
fn map_fresh(l: Layout) -> *mut u8 {
    if regime() != Regime::Fresh as u8 || l.size() < LARGE {
        return std::ptr::null_mut();
    }
    MAPPED.map(l)
}

fn regime() -> u8 {
    REGIME.load(Relaxed)
}

/// A kept block for `l` (regime `Recycled`), or null.
fn reuse(l: Layout) -> *mut u8 {
    if regime() != Regime::Recycled as u8 || l.size() < LARGE {
        return std::ptr::null_mut();
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    match kept
        .iter_mut()
        .find(|s| s.0 != 0 && s.1 == l.size() && s.2 == l.align())
    {
        Some(slot) => std::mem::take(slot).0 as *mut u8,
        None => std::ptr::null_mut(),
    }
}

/// Whether `p` was kept for reuse (regime `Recycled`) instead of freed.
fn keep(p: *mut u8, l: Layout) -> bool {
    if regime() != Regime::Recycled as u8 || l.size() < LARGE {
        return false;
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    match kept.iter_mut().find(|s| s.0 == 0) {
        Some(slot) => {
            *slot = (p as usize, l.size(), l.align());
            true
        }
        None => false,
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = reuse(l);
        if !p.is_null() {
            return grown(p, l.size());
        }
        let p = map_fresh(l);
        if !p.is_null() {
            return grown(p, l.size());
        }
        grown(unsafe { System.alloc(l) }, l.size())
    }
    // Zeroed allocations and reallocations must reach the system
    // allocator's own paths: the default methods would allocate and then
    // write zeros (or copy), touching every page of a fresh column before
    // the library sees it, and measure a slower program than users run.
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = reuse(l);
        if !p.is_null() {
            // SAFETY: a kept block of `l.size()` bytes.
            unsafe { std::ptr::write_bytes(p, 0, l.size()) };
            return grown(p, l.size());
        }
        // A fresh mapping is zeroed.
        let p = map_fresh(l);
        if !p.is_null() {
            return grown(p, l.size());
        }
        grown(unsafe { System.alloc_zeroed(l) }, l.size())
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if l.size() >= LARGE && MAPPED.contains(p) {
            // A block of regime `Fresh`: moved, as the system would.
            // SAFETY: `l` with the new size is a valid layout (the
            // caller's promise), and both blocks hold the bytes copied.
            unsafe {
                let new = Layout::from_size_align_unchecked(new_size, l.align());
                let q = self.alloc(new);
                if !q.is_null() {
                    std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                    self.dealloc(p, l);
                }
                return q;
            }
        }
        let q = unsafe { System.realloc(p, l, new_size) };
        if new_size >= l.size() {
            grown(q, new_size - l.size())
        } else {
            if !q.is_null() {
                shrunk(l.size() - new_size);
            }
            q
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // A block regime `Fresh` mapped is unmapped whatever the regime
        // is now (kept, it would reach the system allocator later).
        if l.size() < LARGE || (!MAPPED.unmap(p) && !keep(p, l)) {
            unsafe { System.dealloc(p, l) };
        }
        shrunk(l.size());
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak bytes allocated above the live bytes at the start while `f` runs
/// (on every thread).
fn peak_extra<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LIVE.store(0, SeqCst);
    PEAK.store(0, SeqCst);
    COUNTING.store(true, SeqCst);
    let r = f();
    COUNTING.store(false, SeqCst);
    (r, PEAK.load(SeqCst).max(0) as usize)
}

/// Runs of each computeq query before it is measured.
const WARM_UP_RUNS: usize = 16;

struct Ceiling {
    vs_cq: f64,
    std_ratio: f64,
    rayon_ratio: f64,
}

struct Row {
    name: &'static str,
    n: usize,
    /// Median seconds per query.
    cq: f64,
    /// Medians of the per-round ratios other / computeq.
    std_ratio: f64,
    rayon_ratio: f64,
    wide_ratio: f64,
    /// arrow-rs kernels over computeq (none for P3: arrow has no scan).
    arrow_ratio: Option<f64>,
    /// For the reductions, the hand-written `wide` loop on both cores
    /// (`*_wide_par`): its time over computeq's (>1: computeq faster),
    /// and its own ratios against std and rayon, the most any program
    /// reached in this run.
    ceiling: Option<Ceiling>,
    backend: BackendKind,
    extra: usize,
    out_bytes: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    TRACE.store(std::env::var_os("BENCH_TRACE").is_some(), Relaxed);
    let quick = args.iter().any(|a| a == "--quick");
    let sizes: Vec<usize> = match args.iter().position(|a| a == "--sizes") {
        Some(i) => args[i + 1]
            .split(',')
            .map(|s| s.parse().expect("size"))
            .collect(),
        None if quick => vec![1_000, 100_000, 10_000_000],
        None => vec![1_000, 100_000, 10_000_000, 100_000_000],
    };
    println!(
        "computeq bench: {} threads, sizes {:?}; median time per call; ratio = other / computeq (>1: computeq faster)",
        rayon::current_num_threads(),
        sizes.iter().map(|&n| fmt_n(n)).collect::<Vec<_>>()
    );
    if args.iter().any(|a| a == "--devices") {
        // The device section alone (a lent GPU machine's time is short).
        device_section(&sizes);
        return;
    }
    // The engine calibrates the host on its first query and a device on
    // the first query large enough to probe it (or loads the persisted
    // calibrations): both happen here, before anything is measured, so
    // that neither their time nor their buffers count against a pipeline.
    // A device's probe runs in the background: waited for, or the first
    // rows would share the cores with it (lavapipe's probe runs its
    // kernels on both; the 10^3 rows measured 40-50% slower beside it).
    black_box(data(1 << 20, 3).compute().sum());
    engine().prepare_devices();
    if args.iter().any(|a| a == "--collect") {
        // The P4 allocator-regime table alone (for before/after runs of a
        // change to the collect path, in alternating processes).
        collect_regimes(&sizes);
        return;
    }
    let mut rows = Vec::new();
    for &n in &sizes {
        let xs = data(n, 1);
        let ys = data(n, 2);
        let (xa, ya) = (arrow_of(&xs), arrow_of(&ys));
        let reps = if n >= 100_000_000 { 7 } else { 21 };
        let mut run = |name: &'static str,
                       cq: &mut dyn FnMut() -> usize,
                       std: &mut dyn FnMut(),
                       ray: &mut dyn FnMut(),
                       wide: &mut dyn FnMut(),
                       arrow: Option<&mut dyn FnMut()>,
                       ceil: Option<&mut dyn FnMut()>| {
            let (out_bytes, extra) = peak_extra(&mut *cq);
            // Steady state: during a plan's first runs at a size the
            // selector tries plausible alternatives (until each has
            // `history_min_samples` measurements), which a fresh history
            // would otherwise mix into the few samples of a large size.
            for _ in 0..WARM_UP_RUNS {
                cq();
            }
            let backend = engine()
                .last_run()
                .map_or(BackendKind::CpuScalar, |m| m.backend);
            let mut cq_call = || {
                black_box(cq());
            };
            let mut fs: Vec<&mut dyn FnMut()> =
                vec![&mut cq_call, &mut *std, &mut *ray, &mut *wide];
            let arrow_at = arrow.map(|a| {
                fs.push(a);
                fs.len() - 1
            });
            let ceil_at = ceil.map(|c| {
                fs.push(c);
                fs.len() - 1
            });
            let t = interleaved(&mut fs, reps);
            let (cq_t, std_t, ray_t, wide_t) = (&t[0], &t[1], &t[2], &t[3]);
            // Ratios of the same round, then their median.
            rows.push(Row {
                name,
                n,
                std_ratio: ratio(std_t, cq_t),
                rayon_ratio: ratio(ray_t, cq_t),
                wide_ratio: ratio(wide_t, cq_t),
                arrow_ratio: arrow_at.map(|i| ratio(&t[i], cq_t)),
                ceiling: ceil_at.map(|i| &t[i]).map(|ceil_t| Ceiling {
                    vs_cq: ratio(ceil_t, cq_t),
                    std_ratio: ratio(std_t, ceil_t),
                    rayon_ratio: ratio(ray_t, ceil_t),
                }),
                cq: median(cq_t.clone()),
                backend,
                extra,
                out_bytes,
            });
        };
        run(
            "P1 sum(x*2+1)",
            &mut || {
                black_box(xs.compute().map(|x| x * 2.0 + 1.0).sum());
                0
            },
            &mut || {
                black_box(p1_std(&xs));
            },
            &mut || {
                black_box(p1_rayon(&xs));
            },
            &mut || {
                black_box(p1_wide(&xs));
            },
            Some(&mut || {
                black_box(p1_arrow(&xa));
            }),
            Some(&mut || {
                black_box(p1_wide_par(&xs));
            }),
        );
        run(
            "P2 sum(x*x | x>0.5)",
            &mut || {
                black_box(xs.compute().filter(|x| x.gt(0.5)).map(|x| x * x).sum());
                0
            },
            &mut || {
                black_box(p2_std(&xs));
            },
            &mut || {
                black_box(p2_rayon(&xs));
            },
            &mut || {
                black_box(p2_wide(&xs));
            },
            Some(&mut || {
                black_box(p2_arrow(&xa));
            }),
            Some(&mut || {
                black_box(p2_wide_par(&xs));
            }),
        );
        run(
            "P3 prefix sum",
            &mut || {
                let v: Vec<f32> = xs.compute().scan_sum().collect();
                let b = v.len() * 4;
                black_box(v);
                b
            },
            &mut || {
                black_box(p3_std(&xs));
            },
            &mut || {
                black_box(p3_rayon(&xs));
            },
            &mut || {
                black_box(p3_wide(&xs));
            },
            None,
            None,
        );
        run(
            "P4 collect(sqrt(x)*3-x)",
            &mut || {
                let v: Vec<f32> = xs.compute().map(|x| x.sqrt() * 3.0 - x).collect();
                let b = v.len() * 4;
                black_box(v);
                trace_run("main");
                b
            },
            &mut || {
                black_box(p4_std(&xs));
            },
            &mut || {
                black_box(p4_rayon(&xs));
            },
            &mut || {
                black_box(p4_wide(&xs));
            },
            Some(&mut || {
                black_box(p4_arrow(&xa));
            }),
            None,
        );
        run(
            "P5 dot(x, y)",
            &mut || {
                black_box(xs.compute().zip(&ys).map(|(a, b)| a * b).sum());
                0
            },
            &mut || {
                black_box(p5_std(&xs, &ys));
            },
            &mut || {
                black_box(p5_rayon(&xs, &ys));
            },
            &mut || {
                black_box(p5_wide(&xs, &ys));
            },
            Some(&mut || {
                black_box(p5_arrow(&xa, &ya));
            }),
            Some(&mut || {
                black_box(p5_wide_par(&xs, &ys));
            }),
        );
        // The floor of any histogram that increments a counter per value.
        let p7_k = p7_keys(&xs);
        run(
            "P7 histogram(256)",
            &mut || {
                black_box(xs.compute().histogram(256, 0.0, 1.0));
                0
            },
            &mut || {
                black_box(p7_std(&xs));
            },
            &mut || {
                black_box(p7_rayon(&xs));
            },
            &mut || {
                black_box(p7_wide(&xs));
            },
            None,
            Some(&mut || {
                black_box(p7_increments_par(&p7_k));
            }),
        );
        run(
            "P6 variance",
            &mut || {
                black_box(xs.compute().variance());
                0
            },
            &mut || {
                black_box(p6_std(&xs));
            },
            &mut || {
                black_box(p6_rayon(&xs));
            },
            &mut || {
                black_box(p6_wide(&xs));
            },
            None,
            None,
        );
    }

    let one_pass = |r: &Row| r.name.starts_with("P6") || r.name.starts_with("P7");
    println!(
        "\n| pipeline | N | computeq | backend | vs std | vs rayon | vs arrow-rs | vs wide | vs wide, 2 threads | peak extra memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {:.2}x | {:.2}x | {} | {:.2}x | {} | {} |",
            r.name,
            fmt_n(r.n),
            fmt_secs(r.cq),
            r.backend,
            r.std_ratio,
            r.rayon_ratio,
            r.arrow_ratio
                .map_or("–".to_string(), |a| format!("{a:.2}x")),
            r.wide_ratio,
            // (P7's "ceiling" is its increments alone, in its verdict.)
            r.ceiling
                .as_ref()
                .filter(|_| !one_pass(r))
                .map_or("–".to_string(), |c| format!("{:.2}x", c.vs_cq)),
            if r.out_bytes > 0 {
                format!(
                    "{} (output {})",
                    computeq::metrics::fmt_bytes(r.extra as u64),
                    computeq::metrics::fmt_bytes(r.out_bytes as u64)
                )
            } else {
                computeq::metrics::fmt_bytes(r.extra as u64)
            }
        );
    }

    println!("\nTargets (N >= 10^7): P1/P2/P5 >= 0.9x wide, >= 5x std, >= 3x rayon; P3/P4 >= 0.8x wide. N = 10^3, the whole query: P1/P2/P5 <= 0.5µs and >= 1.0x std, P4 >= 0.8x std (at most 1.25x its time), the others < 1µs.");
    for r in rows.iter().filter(|r| r.n >= 10_000_000 && !one_pass(r)) {
        let (need_wide, other) = if r.name.starts_with("P3") || r.name.starts_with("P4") {
            (0.8, false)
        } else {
            (0.9, true)
        };
        let ok_wide = r.wide_ratio >= need_wide;
        let ok_std = !other || r.std_ratio >= 5.0;
        let ok_rayon = !other || r.rayon_ratio >= 3.0;
        println!(
            "  {} at {}: wide {} std {} rayon {}",
            r.name,
            fmt_n(r.n),
            verdict(ok_wide),
            if other { verdict(ok_std) } else { "n/a" },
            if other { verdict(ok_rayon) } else { "n/a" }
        );
        // A missed ratio against std or rayon next to what the fastest
        // hand-written program reached in the same rounds: when that is
        // short of the target too, the target is past this machine's
        // memory bandwidth, not past computeq.
        if let Some(c) = r.ceiling.as_ref().filter(|_| !(ok_std && ok_rayon)) {
            println!(
                "    the hand-written wide loop on both cores reached {:.2}x std, {:.2}x rayon; computeq ran at {:.2}x its speed",
                c.std_ratio,
                c.rayon_ratio,
                c.vs_cq
            );
        }
    }
    // The variance and the histogram are one pass: their rate against the
    // P1 reduction's, in the same rounds (target >= 0.8x at 10^7).
    for v in rows.iter().filter(|r| one_pass(r) && r.n >= 10_000_000) {
        if let Some(p1) = rows.iter().find(|r| r.name.starts_with("P1") && r.n == v.n) {
            let rate = p1.cq / v.cq;
            println!(
                "  {} at {}: {:.2}x the P1 reduction's rate ({} against {}), {:.2}x wide: {}",
                v.name,
                fmt_n(v.n),
                rate,
                fmt_secs(v.cq),
                fmt_secs(p1.cq),
                v.wide_ratio,
                verdict(rate >= 0.8)
            );
            if let Some(c) = &v.ceiling {
                println!(
                    "    the increments alone (keys computed beforehand, one byte each, every thread) ran at {:.2}x the P1 reduction's rate; computeq at {:.2}x their speed",
                    rate / c.vs_cq,
                    c.vs_cq
                );
            }
        }
    }
    for r in rows.iter().filter(|r| r.n == 1_000 && !one_pass(r)) {
        let p = &r.name[..2];
        let ok = match p {
            "P1" | "P2" | "P5" => r.cq <= 0.5e-6 && r.std_ratio >= 1.0,
            "P4" => r.std_ratio >= 0.8,
            _ => r.cq < 1e-6,
        };
        println!(
            "  {} at 10^3: {} per query, {:.2}x std: {}",
            r.name,
            fmt_secs(r.cq),
            r.std_ratio,
            verdict(ok)
        );
    }
    // The first query above creates any device and waits for its probe
    // (so that no row times either); from then on a tiny query has one
    // more candidate to price when it selects (once a lease, up to 256
    // runs): within the noise of these rows on lavapipe.
    let devices: Vec<&str> = [BackendKind::Wgpu, BackendKind::Cuda]
        .into_iter()
        .filter(|k| engine().backend(*k).is_some_and(|b| b.is_initialized()))
        .map(BackendKind::name)
        .collect();
    if !devices.is_empty() && rows.iter().any(|r| r.n == 1_000) {
        println!(
            "  (measured with a {} device created and probed; COMPUTEQ_DISABLE={} measures the 10^3 rows without one)",
            devices.join(" and "),
            devices.join(",")
        );
    }

    collect_regimes(&sizes);
    device_section(&sizes);
}

/// P4's collect against std's `map().collect()` and arrow-rs's `unary`
/// when large blocks are recycled and when each is a fresh mapping
/// ([`Regime`]), at every size from 10^5: interleaved rounds per regime.
fn collect_regimes(sizes: &[usize]) {
    let sizes: Vec<usize> = sizes.iter().copied().filter(|&n| n >= 100_000).collect();
    if sizes.is_empty() {
        return;
    }
    println!("\nP4 collect(sqrt(x)*3-x) by allocator regime (recycled: freed large blocks reused, no page faults; fresh: every large block a new mapping):");
    println!("| N | regime | computeq | backend | std map().collect() | arrow-rs unary | vs std | vs arrow-rs |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut missed = Vec::new();
    for &n in &sizes {
        let xs = data(n, 1);
        let xa = arrow_of(&xs);
        let reps = if n >= 100_000_000 { 7 } else { 21 };
        for regime in [Regime::Recycled, Regime::Fresh] {
            set_regime(regime);
            let mut cq = || {
                let v: Vec<f32> = xs.compute().map(|x| x.sqrt() * 3.0 - x).collect();
                black_box(v);
                trace_run(if regime == Regime::Recycled {
                    "recycled"
                } else {
                    "fresh"
                });
            };
            for _ in 0..WARM_UP_RUNS {
                cq();
            }
            let backend = engine()
                .last_run()
                .map_or(BackendKind::CpuScalar, |m| m.backend);
            let mut std = || {
                black_box(p4_std(&xs));
            };
            let mut arrow = || {
                black_box(p4_arrow(&xa));
            };
            let t = interleaved(&mut [&mut cq, &mut std, &mut arrow], reps);
            let (vs_std, vs_arrow) = (ratio(&t[1], &t[0]), ratio(&t[2], &t[0]));
            println!(
                "| {} | {regime:?} | {} | {backend} | {} | {} | {vs_std:.2}x | {vs_arrow:.2}x |",
                fmt_n(n),
                fmt_secs(median(t[0].clone())),
                fmt_secs(median(t[1].clone())),
                fmt_secs(median(t[2].clone())),
            );
            if vs_std < 1.0 || vs_arrow < 1.0 {
                missed.push(format!("{} {regime:?}", fmt_n(n)));
            }
        }
    }
    set_regime(Regime::System);
    println!(
        "Target: >= 1.0x std and >= 1.0x arrow-rs in both regimes at every size: {}",
        if missed.is_empty() {
            "met".to_string()
        } else {
            format!("MISSED at {}", missed.join(", "))
        }
    );
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

/// Each device backend (wgpu; cuda with `--features cuda`), forced, with its
/// phases split out, when it is available here.
fn device_section(sizes: &[usize]) {
    for kind in [BackendKind::Wgpu, BackendKind::Cuda] {
        let availability = engine().backends().into_iter().find(|(k, _)| *k == kind);
        match availability {
            Some((_, computeq::plumbing::Availability::Available)) => device_rows(kind, sizes),
            Some((_, computeq::plumbing::Availability::Unavailable(why))) => {
                println!("\n{kind}: unavailable here ({why}); device figures skipped")
            }
            None => println!("\n{kind}: feature off; device figures skipped"),
        }
    }
    #[cfg(feature = "wgpu")]
    dispatch_overhead();
    #[cfg(not(feature = "wgpu"))]
    println!("\nwgpu: feature off; executor overhead per dispatch not measured");
}

/// P1 and P4 forced onto device backend `kind`, phase by phase.
fn device_rows(kind: BackendKind, sizes: &[usize]) {
    println!("\n{kind} (forced; on a software device these figures are about overheads):");
    println!("| pipeline | N | total | upload | execute | download | compile |");
    println!("|---|---|---|---|---|---|---|");
    // 10^8 only on CUDA (a software wgpu device takes minutes there).
    for &n in sizes
        .iter()
        .filter(|&&n| n <= 10_000_000 || kind == BackendKind::Cuda)
    {
        let xs = data(n, 1);
        let p1 = |xs: &[f32]| {
            xs.compute()
                .on(kind)
                .map(|x| x * 2.0 + 1.0)
                .with_metrics()
                .sum()
                .1
        };
        let p4 = |xs: &[f32]| {
            let (v, m): (Vec<f32>, _) = xs
                .compute()
                .on(kind)
                .map(|x| x.sqrt() * 3.0 - x)
                .with_metrics()
                .collect();
            black_box(v);
            m
        };
        // The same two on data already on the device (made there by a
        // query kept on it), P4's result kept there too: no transfer at all.
        let resident = xs
            .compute()
            .on(kind)
            .map(|x| x)
            .collect_on_device()
            .ok()
            .map(|(a, _)| a)
            .filter(|a| a.device() == Some(kind));
        let p1_resident = |_: &[f32]| {
            let a = resident.as_ref().expect("checked before use");
            engine()
                .query(a)
                .on(kind)
                .map(|x| x * 2.0 + 1.0)
                .with_metrics()
                .sum()
                .1
        };
        let p4_resident = |_: &[f32]| {
            let a = resident.as_ref().expect("checked before use");
            let (d, m) = engine()
                .query(a)
                .on(kind)
                .map(|x| x.sqrt() * 3.0 - x)
                .collect_on_device()
                .expect("a resident collect");
            black_box(d);
            m
        };
        #[allow(clippy::type_complexity)]
        let mut cases: Vec<(&str, &dyn Fn(&[f32]) -> ExecutionMetrics)> =
            vec![("P1 sum(x*2+1)", &p1), ("P4 collect", &p4)];
        if resident.is_some() {
            cases.push(("P1, data on the device", &p1_resident));
            cases.push(("P4, data and result on the device", &p4_resident));
        }
        for (name, f) in cases {
            let _warm = f(&xs);
            let mut ms: Vec<ExecutionMetrics> = (0..5).map(|_| f(&xs)).collect();
            ms.sort_by_key(|m| m.phases.total);
            let m = &ms[ms.len() / 2];
            println!(
                "| {name} | {} | {} | {} | {} | {} | {} |{}",
                fmt_n(n),
                fmt_secs(m.phases.total.as_secs_f64()),
                fmt_secs(m.phases.transfer_in.as_secs_f64()),
                fmt_secs(m.phases.execute.as_secs_f64()),
                fmt_secs(m.phases.transfer_out.as_secs_f64()),
                fmt_secs(m.phases.compile.as_secs_f64()),
                if m.backend != kind {
                    " (fell back!)"
                } else {
                    ""
                }
            );
        }
        // What the selector picks on its own for P1 over the resident data,
        // once its first runs at this size have explored.
        if let Some(a) = &resident {
            let mut ms: Vec<ExecutionMetrics> = (0..WARM_UP_RUNS + 9)
                .map(|_| {
                    engine()
                        .query(a)
                        .map(|x| x * 2.0 + 1.0)
                        .with_metrics()
                        .sum()
                        .1
                })
                .skip(WARM_UP_RUNS)
                .collect();
            ms.sort_by_key(|m| m.phases.total);
            let chosen: Vec<String> = ms.iter().map(|m| m.backend.to_string()).collect();
            println!(
                "| P1, data on the device, auto-selected | {} | {} | | | | | chose: {}",
                fmt_n(n),
                fmt_secs(ms[ms.len() / 2].phases.total.as_secs_f64()),
                chosen.join(",")
            );
        }
    }
}

/// The executor's own cost per dispatch on a cached pipeline: a 1k-element
/// sum through the wgpu backend minus the same device work done directly
/// with wgpu (`benches/wgpu_dispatch.rs` has the criterion version).
#[cfg(feature = "wgpu")]
fn dispatch_overhead() {
    use computeq::plumbing::backends::wgpu::{measure_overhead, FaultPlan, WgpuBackend};
    use computeq::plumbing::ColumnRef;
    use computeq::plumbing::{CompiledPlan, PlanReport};
    let backend = WgpuBackend::new(FaultPlan::NONE);
    let xs: Vec<f32> = (0..1024).map(|i| i as f32 * 0.25).collect();
    let e = xs.compute().map(|x| x * 2.0 + 1.0).explain().sum();
    let plan = CompiledPlan::new(e.plan.clone(), e.fingerprint, PlanReport::default());
    let params = vec![computeq::expr::Scalar::F32(1.0); plan.plan.param_count];
    match measure_overhead(&backend, &plan, ColumnRef::F32(&xs), &params, 2000) {
        Ok(o) => println!(
            "\nwgpu executor overhead per dispatch (cached pipeline, 1k sum): median {} \
             (executor {}, raw wgpu {}); target < 20µs: {}",
            fmt_secs(o.overhead.as_secs_f64()),
            fmt_secs(o.executor.as_secs_f64()),
            fmt_secs(o.raw.as_secs_f64()),
            verdict(o.overhead < std::time::Duration::from_micros(20))
        ),
        Err(e) => println!("\nwgpu executor overhead: not measured ({e})"),
    }
}

/// Set from `BENCH_TRACE` (read once: a lookup of the environment in a
/// timed closure would cost more than a 10^3 query).
static TRACE: AtomicBool = AtomicBool::new(false);

/// With `BENCH_TRACE=1`, one line on stderr per P4 run: its table, the
/// backend, the selector's reason (`H<n>`: history with `n` samples of
/// the choice), the run's execute time and every candidate's price in ms.
/// What the selector saw when it settled on a backend (docs/performance.md,
/// "Why P4 at 10^8 ran on `cpu-simd`").
fn trace_run(tag: &str) {
    if !TRACE.load(Relaxed) {
        return;
    }
    if let Some(m) = engine().last_run() {
        let est: Vec<String> = m
            .estimates
            .iter()
            .map(|e| format!("{}={:.1}", e.backend, e.seconds * 1e3))
            .collect();
        let r = match m.reason {
            computeq::metrics::SelectionReason::History { samples, .. } => format!("H{samples}"),
            r => format!("{r:?}").chars().take(12).collect(),
        };
        eprintln!(
            "TRACE {tag} {} {} {:.1}ms [{}]",
            m.backend,
            r,
            m.phases.execute.as_secs_f64() * 1e3,
            est.join(" ")
        );
    }
}
