//! Engine settings: every threshold and switch in one type, with its
//! default and where it comes from. Environment variables are read once,
//! when an engine is created.

use crate::backend::BackendKind;
use crate::error::{Error, ErrorKind};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Learn from measured runs (history per plan, size and backend).
    /// `COMPUTEQ_LEARN=0` turns it off: the cost model alone decides.
    /// Default: on.
    pub learn: bool,
    /// Where calibration and history persist between processes. `None`
    /// keeps them in memory only. [`Config::default`] has none (tests and
    /// embedded engines never touch the disk); [`Config::from_env`] uses
    /// `COMPUTEQ_CACHE_DIR`, else `$XDG_CACHE_HOME/computeq`, else
    /// `~/.cache/computeq` (`COMPUTEQ_CACHE_DIR=off` disables it).
    pub cache_dir: Option<PathBuf>,
    /// Longest time the first query waits for CPU calibration when no
    /// persisted calibration exists; zero keeps the built-in priors.
    /// `COMPUTEQ_CALIBRATION_MS`. Default: 200 ms (the quick calibration
    /// usually needs ~50 ms; [`crate::cost::calibrate_full`] runs the long
    /// one explicitly).
    pub calibration_budget: Duration,
    /// Measurements of a (plan, size, backend) needed before history alone
    /// decides; fewer are blended with the model. Default: 3.
    pub history_min_samples: u32,
    /// Exploration tries a candidate with too few measurements only when
    /// its prediction is within this factor of the current choice's, so a
    /// candidate predicted many times slower is never tried. Zero (or
    /// `COMPUTEQ_EXPLORE=0`) turns exploration off. Default: 1.5.
    pub explore_ratio: f64,
    /// Plans the selector's history keeps (in memory and in its file), the
    /// least recently used evicted first; about 1.5 KiB each. Default:
    /// 1024.
    pub history_capacity: usize,
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
            learn: true,
            cache_dir: None,
            calibration_budget: Duration::from_millis(200),
            history_min_samples: 3,
            explore_ratio: 1.5,
            history_capacity: crate::select::history::DEFAULT_CAPACITY,
        }
    }
}

impl Config {
    /// Defaults overridden by `COMPUTEQ_BACKEND`, `COMPUTEQ_DISABLE`,
    /// `COMPUTEQ_LEARN`, `COMPUTEQ_CACHE_DIR` (or `XDG_CACHE_HOME`, `HOME`),
    /// `COMPUTEQ_CALIBRATION_MS` and `COMPUTEQ_EXPLORE`.
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
        if let Some(v) = get("COMPUTEQ_LEARN") {
            c.learn = parse_switch("COMPUTEQ_LEARN", &v)?;
        }
        if let Some(v) = get("COMPUTEQ_EXPLORE") {
            if !parse_switch("COMPUTEQ_EXPLORE", &v)? {
                c.explore_ratio = 0.0;
            }
        }
        if let Some(v) = get("COMPUTEQ_CALIBRATION_MS") {
            let ms: u64 = v.trim().parse().map_err(|_| {
                Error::new(
                    ErrorKind::Config,
                    format!("COMPUTEQ_CALIBRATION_MS: `{v}` is not a number of milliseconds"),
                )
            })?;
            c.calibration_budget = Duration::from_millis(ms);
        }
        c.cache_dir = cache_dir(&get);
        Ok(c)
    }

    /// Whether `kind` may be used.
    pub fn enabled(&self, kind: BackendKind) -> bool {
        !self.disabled.contains(&kind)
    }
}

/// `COMPUTEQ_CACHE_DIR`, else `$XDG_CACHE_HOME/computeq`, else
/// `$HOME/.cache/computeq`; `off`/`none`/`0` disables persistence.
fn cache_dir(get: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    if let Some(v) = set("COMPUTEQ_CACHE_DIR") {
        let v = v.trim();
        if ["off", "none", "0"]
            .iter()
            .any(|o| v.eq_ignore_ascii_case(o))
        {
            return None;
        }
        return Some(PathBuf::from(v));
    }
    if let Some(x) = set("XDG_CACHE_HOME") {
        return Some(PathBuf::from(x).join("computeq"));
    }
    set("HOME").map(|h| PathBuf::from(h).join(".cache").join("computeq"))
}

fn parse_switch(var: &str, v: &str) -> Result<bool, Error> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(Error::new(
            ErrorKind::Config,
            format!("{var}: `{v}` is not 0/1, on/off or true/false"),
        )),
    }
}

fn parse_backend(var: &str, name: &str) -> Result<BackendKind, Error> {
    BackendKind::parse(name).ok_or_else(|| {
        let names: Vec<&str> = BackendKind::ALL.iter().map(|k| k.name()).collect();
        Error::new(
            ErrorKind::Config,
            format!(
                "{var}: `{name}` is not a backend (expected one of {})",
                names.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
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
        assert_eq!(
            Config::from_vars(vars(&[("COMPUTEQ_BACKEND", "auto")]))
                .unwrap()
                .forced_backend,
            None
        );
    }

    #[test]
    fn learning_and_cache_settings() {
        let c = Config::from_vars(vars(&[("COMPUTEQ_LEARN", "0"), ("HOME", "/home/u")])).unwrap();
        assert!(!c.learn);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/home/u/.cache/computeq")));
        let c = Config::from_vars(vars(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/home/u")])).unwrap();
        assert!(c.learn);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/x/computeq")));
        let c = Config::from_vars(vars(&[
            ("COMPUTEQ_CACHE_DIR", "/c"),
            ("XDG_CACHE_HOME", "/x"),
        ]))
        .unwrap();
        assert_eq!(c.cache_dir, Some(PathBuf::from("/c")));
        let c = Config::from_vars(vars(&[("COMPUTEQ_CACHE_DIR", "off"), ("HOME", "/h")])).unwrap();
        assert_eq!(c.cache_dir, None);
        let c = Config::from_vars(vars(&[
            ("COMPUTEQ_CALIBRATION_MS", "0"),
            ("COMPUTEQ_EXPLORE", "off"),
        ]))
        .unwrap();
        assert_eq!(c.calibration_budget, Duration::ZERO);
        assert_eq!(c.explore_ratio, 0.0);
        assert_eq!(Config::default().cache_dir, None);
        assert_eq!(
            Config::from_vars(vars(&[("COMPUTEQ_LEARN", "maybe")]))
                .unwrap_err()
                .kind(),
            ErrorKind::Config
        );
    }

    #[test]
    fn a_typo_is_a_clear_error() {
        let e = Config::from_vars(vars(&[("COMPUTEQ_BACKEND", "gpu")])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("cpu-simd"), "{e}");
    }
}
