//! What a terminal returns: the value (`Run`), a `Result` (`Try`), the value
//! with its metrics (`Measured`), the plan (`ExplainOnly`), or the plan with
//! measured metrics (`Analyze`). One terminal definition serves every mode.

use super::pipeline::{Finish, Pipeline};
use crate::error::Error;
use crate::explain::Explain;
use crate::metrics::ExecutionMetrics;
use crate::plan::PlanOutput;
use crate::runtime::executor::{self, Prepared};

mod sealed {
    pub trait Sealed {}
}

/// How a query's terminal reports its result.
pub trait Mode: sealed::Sealed + Sized {
    /// What a terminal producing `R` returns in this mode.
    type Out<R>;
    /// Whether terminals capture a [`Pipeline`] instead of running.
    #[doc(hidden)]
    const CAPTURE: bool = false;
    #[doc(hidden)]
    fn finish<R>(
        p: Prepared<'_>,
        describe: impl FnOnce() -> Finish,
        convert: impl FnOnce(PlanOutput) -> R,
    ) -> Self::Out<R>;
}

/// Terminals return plain values and panic when no backend could run the
/// query (only possible with `no_fallback` or a forced, failing backend)
/// or the query is malformed (more than
/// [`MAX_PARAMS`](crate::expr::MAX_PARAMS) captured values). Settings
/// never make them panic: an invalid environment variable is ignored with
/// a warning.
#[derive(Debug)]
pub struct Run;
/// Terminals return `Result<R, Error>`.
#[derive(Debug)]
pub struct Try;
/// Terminals return `(R, ExecutionMetrics)`.
#[derive(Debug)]
pub struct Measured;
/// Terminals return the [`Explain`] of the plan without running it.
#[derive(Debug)]
pub struct ExplainOnly;
/// Terminals run the query and return its [`Explain`] with metrics.
#[derive(Debug)]
pub struct Analyze;
/// Terminals return the query as a [`Pipeline`], traced but not run
/// ([`Pipeline::over`]).
#[derive(Debug)]
pub struct Capture;

impl sealed::Sealed for Run {}
impl sealed::Sealed for Try {}
impl sealed::Sealed for Measured {}
impl sealed::Sealed for ExplainOnly {}
impl sealed::Sealed for Analyze {}
impl sealed::Sealed for Capture {}

fn or_panic<T>(r: Result<T, Error>) -> T {
    r.unwrap_or_else(|e| panic!("computeq: {e}"))
}

impl Mode for Run {
    type Out<R> = R;
    fn finish<R>(
        p: Prepared<'_>,
        _: impl FnOnce() -> Finish,
        convert: impl FnOnce(PlanOutput) -> R,
    ) -> R {
        convert(or_panic(executor::run_value(p)))
    }
}

impl Mode for Try {
    type Out<R> = Result<R, Error>;
    fn finish<R>(
        p: Prepared<'_>,
        _: impl FnOnce() -> Finish,
        convert: impl FnOnce(PlanOutput) -> R,
    ) -> Result<R, Error> {
        executor::run_value(p).map(convert)
    }
}

impl Mode for Measured {
    type Out<R> = (R, ExecutionMetrics);
    fn finish<R>(
        p: Prepared<'_>,
        _: impl FnOnce() -> Finish,
        convert: impl FnOnce(PlanOutput) -> R,
    ) -> (R, ExecutionMetrics) {
        let (out, m) = or_panic(executor::run(p));
        (convert(out), m)
    }
}

impl Mode for ExplainOnly {
    type Out<R> = Explain;
    fn finish<R>(
        p: Prepared<'_>,
        _: impl FnOnce() -> Finish,
        _: impl FnOnce(PlanOutput) -> R,
    ) -> Explain {
        or_panic(executor::explain(p))
    }
}

impl Mode for Analyze {
    type Out<R> = Explain;
    fn finish<R>(
        p: Prepared<'_>,
        _: impl FnOnce() -> Finish,
        _: impl FnOnce(PlanOutput) -> R,
    ) -> Explain {
        or_panic(executor::analyze(p))
    }
}

impl Mode for Capture {
    type Out<R> = Result<Pipeline, Error>;
    const CAPTURE: bool = true;
    fn finish<R>(
        p: Prepared<'_>,
        describe: impl FnOnce() -> Finish,
        _: impl FnOnce(PlanOutput) -> R,
    ) -> Result<Pipeline, Error> {
        Pipeline::capture(p, describe())
    }
}
