//! Fault injection: make one phase of the wgpu backend fail on purpose, to
//! prove that every failure is an error value the runtime can recover from.
//!
//! Set by an engine whose `Config` enables fault
//! injection (`Config::with_fault_injection`; the faults come from
//! `COMPUTEQ_FAULT=wgpu:compile,wgpu:oom` or `Config::faults`), or
//! programmatically with
//! [`WgpuBackend::set_faults`](super::WgpuBackend::set_faults), which tests
//! use to avoid racing on the process environment. The environment alone
//! never turns it on.

use crate::backend::{BackendError, BackendKind, Phase};

/// Which phases fail. Every flag fails every run until cleared, except an
/// out-of-memory fault with a count (`wgpu:oom:N`), which fails the first
/// allocation of the next `N` attempts and then clears itself.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Shader or pipeline creation fails (`wgpu:compile`).
    pub compile: bool,
    /// Host → device copies fail (`wgpu:upload`).
    pub upload: bool,
    /// Kernel dispatch fails (`wgpu:dispatch`).
    pub dispatch: bool,
    /// Device → host copies fail (`wgpu:readback`).
    pub readback: bool,
    /// Buffer allocation reports out of memory (`wgpu:oom`).
    pub oom: bool,
    /// With `oom`: how many failing attempts remain (`wgpu:oom:N`); 0 means
    /// every attempt fails.
    pub oom_times: u32,
    /// Runs that end with one invalid device operation of their own, a real
    /// wgpu validation error naming the run's input length
    /// (`wgpu:device-error:N`; `u32::MAX`, plain `wgpu:device-error`: every
    /// run). Proves that a device error is charged to the run that caused
    /// it, never to another run polling the same device.
    pub device_errors: u32,
    /// Runs that end by destroying the device (`wgpu:lose-device:N`;
    /// `u32::MAX`: every run), as a driver reset would: the run fails and a
    /// later one opens a new device.
    pub device_losses: u32,
}

impl FaultPlan {
    /// No fault.
    pub const NONE: FaultPlan = FaultPlan {
        compile: false,
        upload: false,
        dispatch: false,
        readback: false,
        oom: false,
        oom_times: 0,
        device_errors: 0,
        device_losses: 0,
    };

    /// Parses a comma list such as `wgpu:compile,cuda:launch,wgpu:oom`;
    /// entries for other backends and unknown names are ignored here
    /// (`Config` reports unknown entries of
    /// `COMPUTEQ_FAULT`).
    pub fn parse(list: &str) -> FaultPlan {
        let mut f = FaultPlan::NONE;
        for item in list.split(',').map(str::trim) {
            match item.strip_prefix("wgpu:") {
                Some("compile") => f.compile = true,
                Some("upload") => f.upload = true,
                Some("dispatch") => f.dispatch = true,
                Some("readback") => f.readback = true,
                Some("oom") => {
                    f.oom = true;
                    f.oom_times = 0;
                }
                Some("device-error") => f.device_errors = u32::MAX,
                Some("lose-device") => f.device_losses = u32::MAX,
                Some(other) => {
                    let count = |prefix: &str| other.strip_prefix(prefix)?.parse::<u32>().ok();
                    if let Some(n) = count("oom:") {
                        f.oom = n > 0;
                        f.oom_times = n;
                    } else if let Some(n) = count("device-error:") {
                        f.device_errors = n;
                    } else if let Some(n) = count("lose-device:") {
                        f.device_losses = n;
                    }
                }
                None => {}
            }
        }
        f
    }

    /// Counts one attempt failed by an injected out-of-memory fault; a
    /// counted fault clears itself after its last attempt.
    pub(crate) fn spend_oom(&mut self) {
        if self.oom && self.oom_times > 0 {
            self.oom_times -= 1;
            self.oom = self.oom_times > 0;
        }
    }

    /// Takes one run's share of a counted fault: whether this run injects it.
    fn take(count: &mut u32) -> bool {
        match *count {
            0 => false,
            u32::MAX => true,
            _ => {
                *count -= 1;
                true
            }
        }
    }

    /// Whether this run ends with an invalid device operation (counts it).
    pub(crate) fn take_device_error(&mut self) -> bool {
        FaultPlan::take(&mut self.device_errors)
    }

    /// Whether this run ends by destroying the device (counts it).
    pub(crate) fn take_device_loss(&mut self) -> bool {
        FaultPlan::take(&mut self.device_losses)
    }

    /// The injected error for `phase`, when that phase is set to fail.
    pub(crate) fn check(&self, phase: Phase) -> Result<(), BackendError> {
        let on = match phase {
            Phase::Compile => self.compile,
            Phase::Upload => self.upload,
            Phase::Execute => self.dispatch,
            Phase::Download => self.readback,
            _ => false,
        };
        if on {
            return Err(BackendError::new(
                BackendKind::Wgpu,
                phase,
                format!("injected fault (wgpu:{})", phase_fault_name(phase)),
            ));
        }
        Ok(())
    }

    /// The injected out-of-memory error of an allocation.
    pub(crate) fn check_alloc(&self, phase: Phase) -> Result<(), BackendError> {
        if self.oom {
            let mut e = BackendError::new(
                BackendKind::Wgpu,
                phase,
                "injected fault (wgpu:oom): out of device memory",
            );
            e.out_of_memory = true;
            return Err(e);
        }
        Ok(())
    }
}

fn phase_fault_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Compile => "compile",
        Phase::Upload => "upload",
        Phase::Execute => "dispatch",
        Phase::Download => "readback",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_comma_list() {
        let f = FaultPlan::parse("wgpu:compile, cuda:launch,wgpu:oom,wgpu:nonsense");
        assert_eq!(
            f,
            FaultPlan {
                compile: true,
                oom: true,
                ..FaultPlan::NONE
            }
        );
        assert!(f.check(Phase::Compile).is_err());
        assert!(f.check(Phase::Upload).is_ok());
        assert!(f.check_alloc(Phase::Upload).unwrap_err().out_of_memory);
    }

    #[test]
    fn every_wgpu_entry_the_config_accepts_is_a_fault() {
        for e in crate::runtime::FAULTS
            .iter()
            .filter(|e| e.starts_with("wgpu:"))
        {
            assert_ne!(FaultPlan::parse(e), FaultPlan::NONE, "{e}");
        }
        assert_ne!(FaultPlan::parse("wgpu:oom:3"), FaultPlan::NONE);
    }

    #[test]
    fn a_counted_oom_clears_itself() {
        let mut f = FaultPlan::parse("wgpu:oom:2");
        assert!(f.oom && f.oom_times == 2);
        f.spend_oom();
        assert!(f.check_alloc(Phase::Execute).is_err());
        f.spend_oom();
        assert!(f.check_alloc(Phase::Execute).is_ok());
        assert_eq!(f, FaultPlan::NONE);
        let mut once = FaultPlan::parse("wgpu:device-error:1,wgpu:lose-device");
        assert!(once.take_device_error() && !once.take_device_error());
        assert!(once.take_device_loss() && once.take_device_loss());
        let mut always = FaultPlan::parse("wgpu:oom");
        always.spend_oom();
        assert!(always.oom);
    }
}
