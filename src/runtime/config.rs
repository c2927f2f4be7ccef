//! Engine settings: every threshold and switch in one type, with its
//! default and where it comes from. Environment variables are read once,
//! here, when an engine is created; backends and the selector get their
//! settings from the [`Config`] and never read the environment themselves.
//!
//! One rule for every variable: an invalid value (or list entry) is
//! ignored, as if it were not set, and reported as a [`ConfigWarning`]
//! naming the variable, the value and what it accepts. An engine made from
//! the environment logs each with `tracing::warn!` and keeps them
//! ([`Engine::config_warnings`](super::Engine::config_warnings));
//! [`Config::from_env`] returns them as an error instead, for programs
//! that would rather fail.

use crate::backend::BackendKind;
use crate::cost::CpuProfile;
use crate::error::{Error, ErrorKind};
use std::fmt;
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
    /// `~/.cache/computeq` (`COMPUTEQ_CACHE_DIR=off` disables it). Each
    /// must be an absolute path: a cache that moves with the working
    /// directory is a setting mistake.
    pub cache_dir: Option<PathBuf>,
    /// The first query's budget for CPU calibration when no persisted
    /// calibration exists: the measurement runs in the background within
    /// it, and the first query waits for it at most three quarters of it
    /// (then goes on with the priors); zero keeps the built-in priors.
    /// `COMPUTEQ_CALIBRATION_MS`. Default: 200 ms (the quick calibration
    /// usually needs ~50 ms; [`calibrate_full`](super::calibrate_full) runs the long
    /// one explicitly). A process that measured also probes its CPU
    /// backends three times more in the background, 1 s, 4 s and 16 s
    /// later (~10 ms of queries each), and keeps the faster figures.
    pub calibration_budget: Duration,
    /// Measurements of a (plan, size, backend) needed before history alone
    /// decides; fewer are blended with the model. Default: 3.
    pub history_min_samples: u32,
    /// Exploration tries a candidate with too few measurements only when
    /// its prediction is within this factor of the current choice's, so a
    /// candidate predicted many times slower is never tried. Zero (or
    /// `COMPUTEQ_EXPLORE=0`) turns exploration off. Default: 1.5.
    pub explore_ratio: f64,
    /// Price the CPU backends with this profile instead of the process's
    /// calibration (which is then neither measured nor loaded for this
    /// engine's decisions): reproducible decisions, and tests that must
    /// not depend on the machine. Default: none.
    pub cpu_profile: Option<CpuProfile>,
    /// Let wgpu kernels use subgroup operations when the adapter offers
    /// them (`COMPUTEQ_WGPU_SUBGROUPS=0` turns them off). Default: on.
    pub wgpu_subgroups: bool,
    /// Ask the wgpu adapter for timestamp queries to time kernels
    /// (`COMPUTEQ_WGPU_TIMESTAMPS=0`: host timers around fences instead).
    /// Default: on.
    pub wgpu_timestamps: bool,
    /// Return wgpu's float results even when a float operation met an
    /// infinity or a NaN (`COMPUTEQ_WGPU_TRUST_NON_FINITE=1`). WGSL lets
    /// the device's compiler assume none occurs, and lavapipe, llvmpipe
    /// and NVIDIA's driver fold some of that arithmetic (`x - x` is `0`
    /// for an infinite `x`). Default: off: the kernels check every float
    /// value their arithmetic and comparisons touch, and a run in which
    /// an infinity or a NaN so met reaches the result is discarded, so the
    /// query runs on the next backend (the CPU). On: faster on such data,
    /// and possibly wrong.
    pub wgpu_trust_non_finite: bool,
    /// Whether the default backends inject the faults of [`Config::faults`]
    /// (see [`Config::with_fault_injection`]). Never set from the
    /// environment, so an inherited `COMPUTEQ_FAULT` cannot break an
    /// application that did not ask for it. Default: off.
    pub fault_injection: bool,
    /// Faults to inject when [`Config::fault_injection`] is on: entries of
    /// `COMPUTEQ_FAULT` such as `wgpu:compile` or `cuda:oom` (see
    /// [`FAULTS`] for every accepted entry). Default: none.
    pub faults: Vec<String>,
    /// Plans the selector's history keeps (in memory and in its file), the
    /// least recently used evicted first; about 1.5 KiB each. Default:
    /// 1024.
    pub history_capacity: usize,
    /// How long a `cpu-parallel` helper thread, its tasks done, waits for
    /// the next run's (`COMPUTEQ_POOL_LINGER_US`, microseconds; 0 turns it
    /// off). Meanwhile it runs other work of the pool and gives its core
    /// to the OS when there is none. Without it, a query that finds the
    /// pool asleep (rayon's workers sleep ~100-200 µs after their last
    /// job) pays the wake-up, 15-25 µs on a 2-vCPU VM: at 10^5 elements that
    /// made `cpu-parallel` slower than one core. Default: 500 µs.
    pub pool_linger: Duration,
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
            cpu_profile: None,
            wgpu_subgroups: true,
            wgpu_timestamps: true,
            wgpu_trust_non_finite: false,
            fault_injection: false,
            faults: Vec::new(),
            history_capacity: crate::select::history::DEFAULT_CAPACITY,
            pool_linger: crate::backend::cpu_parallel::DEFAULT_LINGER,
        }
    }
}

/// Every entry `COMPUTEQ_FAULT` accepts (besides `wgpu:oom:N`, which fails
/// the next `N` device allocations): one phase of one backend fails on
/// purpose, to prove that each failure is an error the runtime recovers
/// from. Effective only with [`Config::fault_injection`].
pub const FAULTS: &[&str] = &[
    "wgpu:compile",
    "wgpu:upload",
    "wgpu:dispatch",
    "wgpu:readback",
    "wgpu:oom",
    "cuda:compile",
    "cuda:upload",
    "cuda:launch",
    "cuda:download",
    "cuda:oom",
];

/// What an on/off variable accepts.
const SWITCH: &str = "1/0, on/off, true/false, yes/no";

/// An environment variable set to a value it does not accept: the value
/// was ignored (the setting keeps its default, or the list its other
/// entries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The variable, e.g. `COMPUTEQ_LEARN`.
    pub variable: &'static str,
    /// The value (or, for a list, the entry) that was ignored.
    pub value: String,
    /// What the variable accepts, in words.
    pub accepted: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: `{}` is not valid (accepted: {}); ignored",
            self.variable, self.value, self.accepted
        )
    }
}

/// Reads variables through a getter and collects what it had to ignore.
struct Reader<G> {
    get: G,
    warnings: Vec<ConfigWarning>,
}

impl<G: Fn(&str) -> Option<String>> Reader<G> {
    /// The trimmed value of `name`; unset and blank are the same.
    fn var(&self, name: &str) -> Option<String> {
        (self.get)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn ignore(&mut self, variable: &'static str, value: &str, accepted: impl Into<String>) {
        self.warnings.push(ConfigWarning {
            variable,
            value: value.to_string(),
            accepted: accepted.into(),
        });
    }

    fn switch(&mut self, name: &'static str) -> Option<bool> {
        let v = self.var(name)?;
        let on = parse_switch(&v);
        if on.is_none() {
            self.ignore(name, &v, SWITCH);
        }
        on
    }

    fn backend(&mut self, name: &'static str, v: &str) -> Option<BackendKind> {
        let k = BackendKind::parse(v);
        if k.is_none() {
            self.ignore(name, v, backend_names(name == "COMPUTEQ_BACKEND"));
        }
        k
    }

    /// An absolute path (a relative one would move with the working
    /// directory; the XDG base directory rules ignore them too).
    fn absolute(&mut self, name: &'static str, v: &str, accepted: &str) -> Option<PathBuf> {
        let p = PathBuf::from(v);
        // U+FFFD: the variable was not Unicode (see `env_var`), and a
        // mangled path must not be used.
        if p.is_absolute() && !v.contains('\u{FFFD}') {
            Some(p)
        } else {
            self.ignore(name, v, accepted);
            None
        }
    }
}

/// The on/off spelling every switch variable shares: `1`, `on`, `true`,
/// `yes` and `0`, `off`, `false`, `no` (any case, spaces trimmed); `None`
/// for anything else.
pub fn parse_switch(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

fn backend_names(auto: bool) -> String {
    let names: Vec<&str> = BackendKind::ALL.iter().map(|k| k.name()).collect();
    format!(
        "{}one of {}",
        if auto {
            "auto or "
        } else {
            "a comma list, each "
        },
        names.join(", ")
    )
}

/// Whether `entry` is a `COMPUTEQ_FAULT` entry.
fn fault_known(entry: &str) -> bool {
    FAULTS.contains(&entry)
        || entry
            .strip_prefix("wgpu:oom:")
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

impl Config {
    /// The selector's share of these settings.
    pub fn learning_settings(&self) -> crate::select::LearningSettings {
        crate::select::LearningSettings {
            learn: self.learn,
            min_samples: self.history_min_samples.max(1),
            explore_ratio: self.explore_ratio,
            cache_dir: self.cache_dir.clone(),
            calibration_budget: self.calibration_budget,
            cpu_profile: self.cpu_profile.clone(),
            history_capacity: self.history_capacity,
            learn_beside_calibration: false,
        }
    }

    /// Defaults overridden by `COMPUTEQ_BACKEND`, `COMPUTEQ_DISABLE`,
    /// `COMPUTEQ_LEARN`, `COMPUTEQ_CACHE_DIR` (or `XDG_CACHE_HOME`, `HOME`),
    /// `COMPUTEQ_CALIBRATION_MS`, `COMPUTEQ_EXPLORE`,
    /// `COMPUTEQ_WGPU_SUBGROUPS`, `COMPUTEQ_WGPU_TIMESTAMPS`,
    /// `COMPUTEQ_POOL_LINGER_US` and
    /// `COMPUTEQ_FAULT` (kept in [`Config::faults`], applied only with
    /// [`Config::with_fault_injection`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when any variable holds a value it does not
    /// accept (every such value is named). [`Config::from_env_lenient`]
    /// ignores them instead, as engines do.
    pub fn from_env() -> Result<Config, Error> {
        Config::from_vars(env_var)
    }

    /// The settings of the environment with every invalid value ignored,
    /// and what was ignored.
    pub fn from_env_lenient() -> (Config, Vec<ConfigWarning>) {
        Config::from_vars_lenient(env_var)
    }

    /// As [`Config::from_env`], reading variables through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, Error> {
        let (c, warnings) = Config::from_vars_lenient(get);
        if warnings.is_empty() {
            return Ok(c);
        }
        let all: Vec<String> = warnings
            .iter()
            .map(|w| {
                format!(
                    "{}: `{}` is not valid (expected {})",
                    w.variable, w.value, w.accepted
                )
            })
            .collect();
        Err(Error::new(ErrorKind::Config, all.join("; ")))
    }

    /// As [`Config::from_env_lenient`], reading variables through `get`.
    pub fn from_vars_lenient(get: impl Fn(&str) -> Option<String>) -> (Config, Vec<ConfigWarning>) {
        let mut r = Reader {
            get,
            warnings: Vec::new(),
        };
        let mut c = Config::default();
        if let Some(v) = r.var("COMPUTEQ_BACKEND") {
            if !v.eq_ignore_ascii_case("auto") {
                c.forced_backend = r.backend("COMPUTEQ_BACKEND", &v);
            }
        }
        if let Some(v) = r.var("COMPUTEQ_DISABLE") {
            for name in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if let Some(k) = r.backend("COMPUTEQ_DISABLE", name) {
                    c.disabled.push(k);
                }
            }
        }
        if let Some(on) = r.switch("COMPUTEQ_LEARN") {
            c.learn = on;
        }
        if r.switch("COMPUTEQ_EXPLORE") == Some(false) {
            c.explore_ratio = 0.0;
        }
        if let Some(v) = r.var("COMPUTEQ_CALIBRATION_MS") {
            match v.parse::<u64>() {
                Ok(ms) => c.calibration_budget = Duration::from_millis(ms),
                Err(_) => r.ignore(
                    "COMPUTEQ_CALIBRATION_MS",
                    &v,
                    "a whole number of milliseconds (0 keeps the priors)",
                ),
            }
        }
        if let Some(v) = r.var("COMPUTEQ_POOL_LINGER_US") {
            match v.parse::<u64>() {
                // At most a second: a helper that waits longer is a core
                // spent, not a wake-up saved.
                Ok(us) if us <= 1_000_000 => c.pool_linger = Duration::from_micros(us),
                _ => r.ignore(
                    "COMPUTEQ_POOL_LINGER_US",
                    &v,
                    "a whole number of microseconds up to 1000000 (0 turns it off)",
                ),
            }
        }
        if let Some(on) = r.switch("COMPUTEQ_WGPU_SUBGROUPS") {
            c.wgpu_subgroups = on;
        }
        if let Some(on) = r.switch("COMPUTEQ_WGPU_TIMESTAMPS") {
            c.wgpu_timestamps = on;
        }
        if let Some(on) = r.switch("COMPUTEQ_WGPU_TRUST_NON_FINITE") {
            c.wgpu_trust_non_finite = on;
        }
        if let Some(v) = r.var("COMPUTEQ_FAULT") {
            for entry in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if fault_known(entry) {
                    c.faults.push(entry.to_string());
                } else {
                    r.ignore(
                        "COMPUTEQ_FAULT",
                        entry,
                        format!(
                            "a comma list, each one of {}, wgpu:oom:N",
                            FAULTS.join(", ")
                        ),
                    );
                }
            }
        }
        c.cache_dir = cache_dir(&mut r);
        (c, r.warnings)
    }

    /// The same settings with fault injection on or off: with it on, the
    /// engine's default backends inject [`Config::faults`] (from
    /// `COMPUTEQ_FAULT`). For tests and for checking an application's
    /// handling of device failures; off by default, so that the variable
    /// alone never makes a production engine fail.
    ///
    /// ```
    /// use computeq::prelude::*;
    /// use computeq::Config;
    ///
    /// let mut config = Config::default().with_fault_injection(true);
    /// config.faults = vec!["wgpu:compile".into()];
    /// let engine = Engine::with_config(config);
    /// // The wgpu backend, if any, fails to compile; another one answers.
    /// let s: f32 = engine.query(&[1.0f32, 2.0]).sum();
    /// assert_eq!(s, 3.0);
    /// ```
    pub fn with_fault_injection(mut self, on: bool) -> Config {
        self.fault_injection = on;
        self
    }

    /// Whether `kind` may be used.
    pub fn enabled(&self, kind: BackendKind) -> bool {
        !self.disabled.contains(&kind)
    }

    /// The `COMPUTEQ_FAULT`-style list the default backends inject: the
    /// faults when fault injection is on, else empty.
    #[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
    pub(crate) fn injected_faults(&self) -> String {
        if self.fault_injection {
            self.faults.join(",")
        } else {
            String::new()
        }
    }

    /// The device backends' share of these settings (faults only when
    /// fault injection is on).
    pub fn device_settings(&self) -> crate::backend::DeviceSettings {
        crate::backend::DeviceSettings {
            faults: self.injected_faults(),
            wgpu_subgroups: self.wgpu_subgroups,
            wgpu_timestamps: self.wgpu_timestamps,
            wgpu_trust_non_finite: self.wgpu_trust_non_finite,
            pool_linger: self.pool_linger,
        }
    }
}

/// A variable of the process environment. A value that is not Unicode is
/// passed on lossily, so that it is reported as invalid rather than taken
/// as unset.
fn env_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// `COMPUTEQ_CACHE_DIR`, else `$XDG_CACHE_HOME/computeq`, else
/// `$HOME/.cache/computeq`; `off`/`none`/`0` disables persistence.
fn cache_dir<G: Fn(&str) -> Option<String>>(r: &mut Reader<G>) -> Option<PathBuf> {
    if let Some(v) = r.var("COMPUTEQ_CACHE_DIR") {
        if ["off", "none", "0"]
            .iter()
            .any(|o| v.eq_ignore_ascii_case(o))
        {
            return None;
        }
        if let Some(p) = r.absolute("COMPUTEQ_CACHE_DIR", &v, "off, none, 0 or an absolute path") {
            return Some(p);
        }
    }
    if let Some(x) = r.var("XDG_CACHE_HOME") {
        if let Some(p) = r.absolute("XDG_CACHE_HOME", &x, "an absolute path") {
            return Some(p.join("computeq"));
        }
    }
    let h = r.var("HOME")?;
    r.absolute("HOME", &h, "an absolute path")
        .map(|h| h.join(".cache").join("computeq"))
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

    /// The lenient reading of `pairs`: its config and the variables it
    /// ignored.
    fn lenient(pairs: &[(&str, &str)]) -> (Config, Vec<&'static str>) {
        let (c, w) = Config::from_vars_lenient(vars(pairs));
        (c, w.iter().map(|w| w.variable).collect())
    }

    #[test]
    fn each_invalid_variable_is_ignored_with_a_warning_naming_it() {
        // Every variable, one typo each: the rest of the settings stand.
        let (c, w) = lenient(&[("COMPUTEQ_BACKEND", "gpu"), ("COMPUTEQ_LEARN", "0")]);
        assert_eq!((c.forced_backend, c.learn), (None, false));
        assert_eq!(w, ["COMPUTEQ_BACKEND"]);
        let (c, w) = lenient(&[("COMPUTEQ_LEARN", "nope")]);
        assert!(c.learn);
        assert_eq!(w, ["COMPUTEQ_LEARN"]);
        let (c, w) = lenient(&[("COMPUTEQ_EXPLORE", "sometimes")]);
        assert_eq!(c.explore_ratio, Config::default().explore_ratio);
        assert_eq!(w, ["COMPUTEQ_EXPLORE"]);
        let (c, w) = lenient(&[("COMPUTEQ_CALIBRATION_MS", "200ms")]);
        assert_eq!(c.calibration_budget, Config::default().calibration_budget);
        assert_eq!(w, ["COMPUTEQ_CALIBRATION_MS"]);
        let (c, w) = lenient(&[("COMPUTEQ_WGPU_SUBGROUPS", "maybe")]);
        assert!(c.wgpu_subgroups);
        assert_eq!(w, ["COMPUTEQ_WGPU_SUBGROUPS"]);
        let (c, w) = lenient(&[("COMPUTEQ_WGPU_TIMESTAMPS", "2")]);
        assert!(c.wgpu_timestamps);
        assert_eq!(w, ["COMPUTEQ_WGPU_TIMESTAMPS"]);
        for bad in ["500us", "-1", "2000000"] {
            let (c, w) = lenient(&[("COMPUTEQ_POOL_LINGER_US", bad)]);
            assert_eq!(c.pool_linger, Config::default().pool_linger, "{bad}");
            assert_eq!(w, ["COMPUTEQ_POOL_LINGER_US"], "{bad}");
        }
        let (c, w) = lenient(&[("COMPUTEQ_POOL_LINGER_US", "0")]);
        assert_eq!((c.pool_linger, w.len()), (Duration::ZERO, 0));
        assert_eq!(c.device_settings().pool_linger, Duration::ZERO);
        // Lists keep their valid entries.
        let (c, w) = lenient(&[("COMPUTEQ_DISABLE", "wgpu,cdua")]);
        assert_eq!(c.disabled, vec![BackendKind::Wgpu]);
        assert_eq!(w, ["COMPUTEQ_DISABLE"]);
        let (c, w) = lenient(&[(
            "COMPUTEQ_FAULT",
            "wgpu:compile,wgpu:compiel,cuda:oom,wgpu:oom:3",
        )]);
        assert_eq!(c.faults, ["wgpu:compile", "cuda:oom", "wgpu:oom:3"]);
        assert_eq!(w, ["COMPUTEQ_FAULT"]);
        // Paths: a relative one falls through to the next source.
        let (c, w) = lenient(&[("COMPUTEQ_CACHE_DIR", "cache"), ("HOME", "/h")]);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/h/.cache/computeq")));
        assert_eq!(w, ["COMPUTEQ_CACHE_DIR"]);
        let (c, w) = lenient(&[("XDG_CACHE_HOME", "x"), ("HOME", "/h")]);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/h/.cache/computeq")));
        assert_eq!(w, ["XDG_CACHE_HOME"]);
        let (c, w) = lenient(&[("HOME", "h")]);
        assert_eq!((c.cache_dir, w), (None, vec!["HOME"]));
        let (c, w) = lenient(&[("COMPUTEQ_CACHE_DIR", "/not\u{FFFD}unicode")]);
        assert_eq!((c.cache_dir, w), (None, vec!["COMPUTEQ_CACHE_DIR"]));
        // Blank is unset, not invalid.
        let (c, w) = lenient(&[("COMPUTEQ_LEARN", " "), ("COMPUTEQ_BACKEND", "")]);
        assert_eq!(c, Config::default());
        assert!(w.is_empty());
    }

    #[test]
    fn a_warning_names_the_variable_the_value_and_what_it_accepts() {
        let (_, w) = Config::from_vars_lenient(vars(&[("COMPUTEQ_LEARN", "maybe")]));
        let text = w[0].to_string();
        for part in ["COMPUTEQ_LEARN", "maybe", "on/off", "ignored"] {
            assert!(text.contains(part), "{text}");
        }
        let (_, w) = Config::from_vars_lenient(vars(&[("COMPUTEQ_FAULT", "wgpu:nonsense")]));
        assert_eq!(w[0].value, "wgpu:nonsense");
        assert!(w[0].accepted.contains("wgpu:readback"), "{}", w[0]);
        // The strict reading fails with every invalid value named.
        let e = Config::from_vars(vars(&[
            ("COMPUTEQ_LEARN", "maybe"),
            ("COMPUTEQ_FAULT", "wgpu:nonsense"),
        ]))
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        let text = e.to_string();
        assert!(
            text.contains("maybe") && text.contains("wgpu:nonsense"),
            "{text}"
        );
    }

    #[test]
    fn every_switch_has_the_same_spellings() {
        for (v, on) in [
            ("1", true),
            ("on", true),
            ("TRUE", true),
            ("yes", true),
            ("0", false),
            ("off", false),
            ("False", false),
            (" no ", false),
        ] {
            assert_eq!(parse_switch(v), Some(on), "{v}");
            for name in [
                "COMPUTEQ_LEARN",
                "COMPUTEQ_EXPLORE",
                "COMPUTEQ_WGPU_SUBGROUPS",
                "COMPUTEQ_WGPU_TIMESTAMPS",
                "COMPUTEQ_WGPU_TRUST_NON_FINITE",
            ] {
                let c = Config::from_vars(vars(&[(name, v)])).unwrap();
                let got = match name {
                    "COMPUTEQ_LEARN" => c.learn,
                    "COMPUTEQ_EXPLORE" => c.explore_ratio > 0.0,
                    "COMPUTEQ_WGPU_SUBGROUPS" => c.wgpu_subgroups,
                    "COMPUTEQ_WGPU_TRUST_NON_FINITE" => c.wgpu_trust_non_finite,
                    _ => c.wgpu_timestamps,
                };
                assert_eq!(got, on, "{name}={v}");
            }
        }
        assert_eq!(parse_switch("enabled"), None);
    }

    #[test]
    fn faults_apply_only_with_fault_injection() {
        let c = Config::from_vars(vars(&[("COMPUTEQ_FAULT", "wgpu:compile,cuda:launch")])).unwrap();
        assert_eq!(c.faults, ["wgpu:compile", "cuda:launch"]);
        assert!(!c.fault_injection, "never switched on by the environment");
        assert_eq!(c.injected_faults(), "");
        let c = c.with_fault_injection(true);
        assert_eq!(c.injected_faults(), "wgpu:compile,cuda:launch");
    }
}
