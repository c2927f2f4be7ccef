//! Engine settings: every threshold and switch in one type, with its
//! default and where it comes from. Environment variables are read once,
//! when an engine is created.

use crate::backend::BackendKind;
use crate::error::{Error, ErrorKind};

/// Settings of an [`Engine`](super::Engine).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Run every query on this backend (`COMPUTEQ_BACKEND`); a query's own
    /// `.on(..)` still wins. Default: none.
    pub forced_backend: Option<BackendKind>,
    /// Backends never used (`COMPUTEQ_DISABLE=wgpu,cuda`). Default: none.
    pub disabled: Vec<BackendKind>,
    /// Retry on the next backend when one fails. Default: true.
    pub fallback: bool,
    /// Runs kept in the run log. Default: 256.
    pub run_log_capacity: usize,
    /// Optimized plans kept in the plan cache. Default: 512.
    pub plan_cache_capacity: usize,
    /// Verify the graph after every optimizer pass. Default: on in debug
    /// builds and tests, off in release builds.
    pub verify_passes: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            forced_backend: None,
            disabled: Vec::new(),
            fallback: true,
            run_log_capacity: 256,
            plan_cache_capacity: 512,
            verify_passes: cfg!(debug_assertions),
        }
    }
}

impl Config {
    /// Defaults overridden by `COMPUTEQ_BACKEND` and `COMPUTEQ_DISABLE`.
    pub fn from_env() -> Result<Config, Error> {
        Config::from_vars(|k| std::env::var(k).ok())
    }

    /// As [`Config::from_env`], reading variables through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, Error> {
        let mut c = Config::default();
        if let Some(v) = get("COMPUTEQ_BACKEND").filter(|v| !v.trim().is_empty()) {
            let v = v.trim();
            if !v.eq_ignore_ascii_case("auto") {
                c.forced_backend = Some(parse_backend("COMPUTEQ_BACKEND", v)?);
            }
        }
        if let Some(v) = get("COMPUTEQ_DISABLE") {
            for name in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                c.disabled.push(parse_backend("COMPUTEQ_DISABLE", name)?);
            }
        }
        Ok(c)
    }

    /// Whether `kind` may be used.
    pub fn enabled(&self, kind: BackendKind) -> bool {
        !self.disabled.contains(&kind)
    }
}

fn parse_backend(var: &str, name: &str) -> Result<BackendKind, Error> {
    BackendKind::parse(name).ok_or_else(|| {
        let names: Vec<&str> = BackendKind::ALL.iter().map(|k| k.name()).collect();
        Error::new(
            ErrorKind::Config,
            format!("{var}: `{name}` is not a backend (expected one of {})", names.join(", ")),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn reads_backend_and_disable_lists() {
        let c = Config::from_vars(vars(&[
            ("COMPUTEQ_BACKEND", "cpu-simd"),
            ("COMPUTEQ_DISABLE", "wgpu, cuda"),
        ]))
        .unwrap();
        assert_eq!(c.forced_backend, Some(BackendKind::CpuSimd));
        assert_eq!(c.disabled, vec![BackendKind::Wgpu, BackendKind::Cuda]);
        assert!(!c.enabled(BackendKind::Wgpu));
        assert_eq!(Config::from_vars(vars(&[("COMPUTEQ_BACKEND", "auto")])).unwrap().forced_backend, None);
    }

    #[test]
    fn a_typo_is_a_clear_error() {
        let e = Config::from_vars(vars(&[("COMPUTEQ_BACKEND", "gpu")])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("cpu-simd"), "{e}");
    }
}
