//! # computeq
//!
//! A lazy, LINQ-style query engine for numeric slices. Closures are traced
//! into an expression graph, adaptor chains are fused into as few passes
//! over memory as possible, every available backend is priced against the
//! real input, the cheapest runs, a failing device falls back to the CPU,
//! and every run leaves [`ExecutionMetrics`].
//!
//! ## Contents
//! - [Example](#example)
//! - [The API](#the-api)
//! - [The path of a query](#the-path-of-a-query)
//! - [Semantics](#semantics)
//! - [Backends and features](#backends-and-features)
//! - [Reliability](#reliability)
//!
//! ## Example
//!
//! ```
//! # let _ = computeq::set_engine(computeq::Engine::default());
//! use computeq::prelude::*;
//!
//! let xs: Vec<f32> = (0..10_000).map(|i| (i as f32).sin()).collect();
//! let s: f32 = xs.compute().map(|x| x * 2.0 + 1.0).filter(|x| x.gt(0.5)).sum();
//!
//! let (n, metrics) = xs.compute().filter(|x| x.gt(0.0)).with_metrics().count();
//! println!("{n} positives on {} ({})", metrics.backend, metrics.reason);
//! println!("{}", xs.compute().map(|x| x.abs()).explain().max());
//! # let _ = s;
//! ```
//!
//! ## The API
//!
//! - Start a query with `.compute()` on a slice, a `Vec` or a
//!   [`DeviceArray`] ([`Compute`], in the [`prelude`]), or with
//!   [`Engine::query`] on an engine of your own; chain adaptors (`map`,
//!   `filter`, `zip`, `enumerate`, `take`, `skip`, scans) and end with a
//!   terminal (`sum`, `count`, `min`, `argmax`, `stats`, `variance`,
//!   `reduce`, `collect`, the early-exit `first`, `last`, `nth`, `find`,
//!   `position`, ...), or with `aggregate(|x, a| (a.sum(x),
//!   a.max(x * x), a.count()))`: any aggregates of traced expressions in
//!   one pass ([`query::Aggregates`]). Closures receive [`Expr<T>`](expr::Expr) handles and
//!   are traced once per plan; captured values become parameters.
//! - **Modes** decide what a terminal returns: the value (the default,
//!   [`query::Run`]; it panics only when no backend can run the query, e.g.
//!   a forced, failing backend with `no_fallback`), a `Result<_, `[`Error`]`>`
//!   (`.fallible()`, [`query::Try`]), the value with its
//!   [`ExecutionMetrics`] (`.with_metrics()`), the plan without running it
//!   (`.explain()`, an [`Explain`]), or the plan with the run's metrics
//!   (`.explain_analyze()`).
//! - **Errors** are one [`Error`] with an [`ErrorKind`] (no backend could
//!   run the query, the forced one failed without fallback, a malformed
//!   query, a bad setting, too many captured values) and the failed
//!   attempts, each a typed backend error with its phase.
//! - **Choice of backend**: automatic by default; `.on(BackendKind::..)`
//!   forces one (falling back to the CPU if it fails, unless
//!   `.no_fallback()`); [`Config`] disables backends or pins one for every
//!   query. [`DeviceArray`] (`.to_device()`, `collect_on_device()`) keeps
//!   data on a GPU between queries.
//! - **Engines**: the process-wide one ([`engine()`], made from the
//!   environment on first use unless [`set_engine`] installed one before) or
//!   your own ([`Engine::with_config`]); an engine is shared by any number
//!   of threads.
//! - **Metrics and advice**: every run's [`ExecutionMetrics`] (backend,
//!   reason, phase times, estimates, attempts) in the engine's run log;
//!   [`recommend`] reads a plan and its metrics into advice, which
//!   [`Explain`] prints.
//! - [`plumbing`] is the machinery for custom backends and selectors, and
//!   for tests: nothing a query needs.
//!
//! ## The path of a query
//!
//! `query` (the lazy builder) → `expr` (traced element expressions) →
//! `graph` (operation graph) → `optimize` (passes: constant folding, CSE,
//! fusion, filter-into-reduce, dead code) → `plan` (fused stages, workload)
//! → `cost`/`select` (estimates and choice) → `codegen` (kernels for the
//! device targets) → `backend` (execution) → `runtime` (engine, fallback,
//! run log) → `metrics`, `recommend` and `explain`.
//!
//! The imports point one way, from the user's surface down to the data
//! types: `types` (dtypes, scalars, columns, backend kinds) and
//! `semantics` (aggregates: identities and the one merge of partials) sit
//! at the bottom, and no module imports one above it. `docs/architecture.md`
//! draws the layers; `tests/layering.rs` checks them.
//!
//! ## Semantics
//!
//! Shared by every backend:
//! - Integer arithmetic wraps; integer division or remainder by zero is 0;
//!   `MIN / -1` wraps.
//! - Integer expressions take Rust's bit operators `& | ^ << >>` and `!`;
//!   a shift amount is taken modulo the bit width, as
//!   `wrapping_shl(n as u32)` / `wrapping_shr(n as u32)` take it, and `>>`
//!   is arithmetic for signed types:
//!
//! ```
//! # let _ = computeq::set_engine(computeq::Engine::default());
//! use computeq::prelude::*;
//! let keys: Vec<u32> = [5u32, 12, 7].compute().map(|x| (x << 4 | x >> 2) ^ !x & 0xff).collect();
//! let rust: Vec<u32> = [5u32, 12, 7].iter().map(|&x| (x << 4 | x >> 2) ^ !x & 0xff).collect();
//! assert_eq!(keys, rust);
//! let wrapped: Vec<i32> = [1i32].compute().map(|x| x << 33).collect();
//! assert_eq!(wrapped, vec![2]); // 1i32.wrapping_shl(33)
//! ```
//! - Float → integer casts saturate and NaN becomes 0 (Rust `as`).
//! - Float arithmetic on infinities and NaNs follows IEEE 754 on the CPU
//!   backends and on CUDA. WGSL lets a compiler assume that neither
//!   occurs, and every driver tried folds some of it (lavapipe, llvmpipe
//!   and NVIDIA's driver compute `x - x` as `0` for an infinite `x`, where
//!   IEEE says NaN). So wgpu's float kernels check, by their bits, every
//!   float value that their arithmetic and sums take or give (for an
//!   infinity or a NaN) and that their comparisons take (for a NaN), and a
//!   run that meets one is discarded: the query runs on the next backend
//!   (without fallback, it fails with that reason), and the selector
//!   learns to keep that workload off wgpu. What never reaches a result
//!   does not count: a NaN that only moves (collected, sorted, grouped or
//!   joined by its bits, skipped by `min`/`max`), a `1 / 0` in a lane a
//!   filter drops, a histogram's infinity or NaN (binned as `below`,
//!   `above`, `nan`; `x != x` tests the bits). `COMPUTEQ_WGPU_TRUST_NON_FINITE=1`
//!   ([`Config::wgpu_trust_non_finite`](runtime::Config::wgpu_trust_non_finite))
//!   returns the device's results anyway.
//! - Float `min`/`max` return the non-NaN operand; the `min()`/`max()`
//!   terminals skip NaNs and return NaN only when every element is NaN;
//!   `argmin`/`argmax` never pick a NaN (all-NaN gives position 0).
//! - `variance`/`std_dev` are the sample figures (divided by `n - 1`;
//!   `None` below two elements), computed in `f64` in one pass without the
//!   cancellation of `Σx² - (Σx)²/n`: `cpu-simd` and `cpu-parallel` sum
//!   `x - c` and `(x - c)²` over each block of 1,024 values, `c` the
//!   block's first value (so the subtraction loses at most ~10 bits, a
//!   bit or two on data near its mean), and merge blocks with Chan's
//!   formula; `cpu-scalar` runs Welford's update on `x - first`. They agree
//!   to about `n · ε` relative, and to ~1e-11 on `1e8 + noise` or when every
//!   block starts with an outlier (tests/aggregates.rs). A NaN or infinite
//!   element gives NaN; squares past `f64`'s range give `inf`. The GPU
//!   backends compute them where the device has `f64` (moments per
//!   invocation, Chan merges) and decline them elsewhere (a query with one
//!   then runs on the CPU).
//! - `first`, `find`, `position`, `nth`, `any` and `all` stop reading at
//!   the element that settles them: `cpu-scalar` at that element,
//!   `cpu-simd` at its block, `cpu-parallel` starts no leaf past a settled
//!   one. `last` reads leaves from the end on `cpu-simd` and
//!   `cpu-parallel` (`cpu-scalar`, the reference, reads forward).
//!   `ExecutionMetrics::elements_skipped` says how many positions were
//!   never read. `position` counts in the stream
//!   that reaches it (after earlier filters), as `Iterator::position`.
//!   The GPU backends decline `first`/`last` (they run `any`/`all`).
//! - `histogram(bins, lo, hi)` bins as CUB's `HistogramEven`: bin
//!   `floor((x - lo) · bins / (hi - lo))` in `f64`, never past the last;
//!   values below `lo`, at or above `hi`, and NaNs are counted apart. It
//!   is one pass on the CPU backends (the GPU backends decline it); counts
//!   are `u64` and identical on every backend.
//! - Sorts (`sort`, `sort_desc`, `sort_by_key`, `argsort`, `top_k`,
//!   `bottom_k`, `top_k_by_key`) order keys by one canonical total order:
//!   integers numerically, floats by IEEE total order with every NaN one
//!   value above `+inf` (`-0.0` before `+0.0`). Every sort is stable; a
//!   descending key is the complement of the ascending one, so ties keep
//!   their input order and NaN comes first. A sorted float key comes back
//!   as the canonical NaN. `top_k(k)` is `sort_desc().take(k)` exactly.
//!   The query goes on over the sorted stream; `sort` + `take` runs as a
//!   selection. Groups (`group_by`, `distinct`, `count_distinct`,
//!   `value_counts`) compare keys as group keys: `-0.0` is `+0.0` (and
//!   comes out as `+0.0`), every NaN one key; groups come sorted by key
//!   unless `first_seen()` asks for first-row order; keys hold at most
//!   128 bits together; group sums wrap like `sum`, counts are `u64`, an
//!   argmin/argmax per group is a position in the stream reaching the
//!   grouping. The CPU backends run them (`cpu-scalar` by the standard
//!   library's stable sort and a `BTreeMap`, the others by radix sorts and
//!   direct-index or hash groups); the GPU backends decline them.
//! - Joins (`join`, `semi_join`, `anti_join`, `is_in`, `not_in`) compare
//!   keys as group keys, at most 128 bits together. An inner join yields
//!   `(this, other)` for every pair with equal keys, in this query's
//!   order, and the matches of one element in the other query's order
//!   (the order of a nested loop); semi- and anti-joins keep this query's
//!   elements in order, each once. The other query (the build side) runs
//!   first as a query of its own, recorded in the run log; one that only
//!   reads columns is not run, its columns are read in place. CPU
//!   backends only (`cpu-scalar` through a `BTreeMap`, the others hash the
//!   smaller side).
//! - `round` rounds half away from zero; `powi` multiplies by binary
//!   exponentiation; `mul_add` is fused for floats.
//! - `zip` stops at the shorter input; empty inputs are valid everywhere;
//!   `filter` keeps the order of survivors.
//! - Integer and boolean results are identical on every backend. Float
//!   reductions and scans differ only by summation order: the differential
//!   tests bound the difference by `n · ε · Σ|x|`. For one backend and one
//!   input length the result does not depend on the number of threads.
//!
//! ## Backends and features
//!
//! `cpu-scalar` (reference interpreter), `cpu-simd` (block program with
//! SIMD lanes), `cpu-parallel` (the block program over rayon). Feature
//! `wgpu` (default) adds the WGSL backend; feature `cuda` the PTX backend.
//! Feature `arrow` reads and writes Arrow arrays, with SQL nulls on every
//! backend (the [`arrow`] module when enabled). Feature `datafusion` runs
//! pipelines ([`query::Pipeline`]: a query traced without data) inside
//! DataFusion as scalar and aggregate functions and as a plan node (the
//! `datafusion` module when enabled); feature `ballista` carries them to
//! a Ballista cluster's executors inside the plan (the `ballista` module).
//!
//! ## Reliability
//!
//! ### Locks
//!
//! An engine may be shared by any number of threads. No lock is held while
//! another is taken, nor while your code runs (a closure passed to
//! [`RunLog::filter`](runtime::RunLog::filter), a custom backend or
//! selector, a `tracing` subscriber), a file is read or written, or the
//! CPU is measured; so a query may be run from anywhere, a filter closure
//! or a rayon worker included. The one place that holds two, the CUDA
//! device and its buffers, keeps the one order written down at the top of
//! `src/runtime/engine.rs`.
//!
//! ### Settings
//!
//! Every setting is a field of [`runtime::Config`]. Environment variables
//! are read once, when an engine is made from the environment (the
//! process-wide engine behind `.compute()` is), and handed down: no
//! backend reads one itself. They are `COMPUTEQ_BACKEND`,
//! `COMPUTEQ_DISABLE`, `COMPUTEQ_LEARN`, `COMPUTEQ_EXPLORE`,
//! `COMPUTEQ_CALIBRATION_MS`, `COMPUTEQ_CACHE_DIR` (else
//! `XDG_CACHE_HOME`, `HOME`; absolute paths only), `COMPUTEQ_WGPU_SUBGROUPS`,
//! `COMPUTEQ_WGPU_TIMESTAMPS`, `COMPUTEQ_WGPU_TRUST_NON_FINITE`,
//! `COMPUTEQ_POOL_LINGER_US` and
//! `COMPUTEQ_FAULT`; every on/off switch takes `1`/`0`, `on`/`off`,
//! `true`/`false` or `yes`/`no`.
//!
//! A bad value never makes a query fail: the engine ignores it (the
//! default stands; a list keeps its valid entries), logs one
//! `tracing::warn!` naming the variable, the value and what it accepts,
//! and lists it in [`Engine::config_warnings`](runtime::Engine::config_warnings)
//! (and in `explain`'s settings). A program that would rather stop calls
//! [`Config::from_env`](runtime::Config::from_env), which returns the
//! error, and installs its engine with [`runtime::set_engine`] before the
//! first query.
//!
//! ### Files
//!
//! An engine with a cache directory (`COMPUTEQ_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/computeq`, else `$HOME/.cache/computeq`;
//! `COMPUTEQ_CACHE_DIR=off` or [`Config::cache_dir`](runtime::Config)
//! `None` for none) keeps two files there, per library version and
//! machine: the calibration (CPU and device profiles, and the device each
//! backend opened) and the selector's history. The directory is created
//! `0700`, and one another user owns is not used. Writes go to a new
//! temporary file (created exclusively, `0600`, never through a symbolic
//! link) renamed over the old one, under a file lock, merged with what
//! another process wrote meanwhile. Reads are bounded in size; a file that
//! is corrupt, too large or from another version or machine is ignored
//! and rebuilt, and every value read is range-checked (an implausible
//! profile or history entry is dropped, with one warning per file). The
//! history keeps at most [`Config::history_capacity`](runtime::Config)
//! plans, least recently used evicted first, in memory and on disk. It is
//! written soon after the first observations, then every few seconds with
//! what changed, at normal process exit, and on
//! [`Engine::flush`](runtime::Engine::flush).
//!
//! ### Devices
//!
//! A device is opened only by a query that runs on it (or is forced onto
//! it, or reads data resident on it); the others price it from the profile
//! an earlier process persisted, or, when none is known, it is probed in a
//! background thread through a private engine (its probe runs appear in no
//! run log or history). A device error is charged to the run that caused
//! it (each run's work is inside its own wgpu error scopes), and a lost
//! device is opened again by a later run. A program that exits while a
//! probe is under way waits for it (at most 10 s) instead of tearing the
//! driver down under it.
//!
//! ### Fault injection
//!
//! `COMPUTEQ_FAULT=wgpu:compile,wgpu:oom:2,cuda:launch` (every entry:
//! [`runtime::FAULTS`]) makes one phase of a device backend fail on
//! purpose, to check that each failure becomes an error value or a
//! fallback. Only an engine whose `Config` asks for it injects faults:
//! `Engine::with_config(Config::from_env()?.with_fault_injection(true))`.
//! The variable alone, inherited by an application that never opted in,
//! does nothing. Tests can also set faults on a backend object directly
//! (`WgpuBackend::set_faults`).
#![warn(missing_docs)]

#[cfg(feature = "arrow")]
pub mod arrow;
mod backend;
#[cfg(feature = "ballista")]
pub mod ballista;
mod codegen;
mod cost;
#[cfg(feature = "datafusion")]
pub mod datafusion;
mod error;
pub mod explain;
pub mod expr;
mod graph;
pub mod metrics;
mod optimize;
mod plan;
pub mod plumbing;
pub mod prelude;
pub mod query;
pub mod recommend;
mod relational;
mod runtime;
mod select;
mod semantics;
#[cfg(feature = "otel")]
pub mod telemetry;
mod types;

pub use error::{Error, ErrorKind, Result};
pub use explain::Explain;
pub use metrics::ExecutionMetrics;
pub use query::{Compute, DeviceArray, IntoSource, Query, ToDevice};
pub use runtime::{calibrate_full, engine, set_engine, Config, Engine};
pub use types::BackendKind;
