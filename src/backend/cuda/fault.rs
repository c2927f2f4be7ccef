//! Fault injection: make one phase of the CUDA backend fail on purpose, to
//! prove that every failure is an error value the runtime recovers from.
//!
//! Set by an engine whose `Config` enables fault
//! injection (`Config::with_fault_injection`; the faults come from
//! `COMPUTEQ_FAULT=cuda:compile,cuda:oom` or `Config::faults`; the
//! environment alone never turns it on) or programmatically with
//! [`CudaBackend::set_faults`](super::CudaBackend::set_faults). The faults
//! are injected by [`FaultyDevice`], a wrapper over any
//! [`PtxDevice`](crate::backend::ptx::PtxDevice), so the tests exercise it
//! with the PTX interpreter on machines without a GPU.

use crate::backend::ptx::{BufferArg, PtxDevice};
use crate::backend::{BackendError, BackendKind, Phase};
use crate::codegen::ptx::PtxModule;

/// Which phases fail. Every flag fails every run until cleared.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Module load (JIT compilation) fails (`cuda:compile`).
    pub compile: bool,
    /// Host → device copies fail (`cuda:upload`).
    pub upload: bool,
    /// Kernel launches fail (`cuda:launch`).
    pub launch: bool,
    /// Device → host copies fail (`cuda:download`).
    pub download: bool,
    /// Allocations report out of memory (`cuda:oom`).
    pub oom: bool,
}

impl FaultPlan {
    /// No fault.
    pub const NONE: FaultPlan = FaultPlan {
        compile: false,
        upload: false,
        launch: false,
        download: false,
        oom: false,
    };

    /// Parses a comma list such as `cuda:compile,wgpu:oom,cuda:launch`;
    /// entries for other backends and unknown names are ignored here
    /// (`Config` reports unknown entries of
    /// `COMPUTEQ_FAULT`).
    pub fn parse(list: &str) -> FaultPlan {
        let mut f = FaultPlan::NONE;
        for item in list.split(',').map(str::trim) {
            match item.strip_prefix("cuda:") {
                Some("compile") => f.compile = true,
                Some("upload") => f.upload = true,
                Some("launch") => f.launch = true,
                Some("download") => f.download = true,
                Some("oom") => f.oom = true,
                _ => {}
            }
        }
        f
    }

    fn check(&self, on: bool, phase: Phase, name: &str) -> Result<(), BackendError> {
        if on {
            return Err(BackendError::new(
                BackendKind::Cuda,
                phase,
                format!("injected fault (cuda:{name})"),
            ));
        }
        Ok(())
    }
}

/// A device whose operations fail as its [`FaultPlan`] says.
#[derive(Debug)]
pub struct FaultyDevice<'a, D> {
    /// The real device.
    pub inner: &'a mut D,
    /// What fails.
    pub faults: FaultPlan,
}

impl<D: PtxDevice> PtxDevice for FaultyDevice<'_, D> {
    type Buffer = D::Buffer;
    type Module = D::Module;
    type Pending = D::Pending;

    fn load(&mut self, module: &PtxModule) -> Result<D::Module, BackendError> {
        self.faults
            .check(self.faults.compile, Phase::Compile, "compile")?;
        self.inner.load(module)
    }

    fn alloc(&mut self, bytes: usize) -> Result<D::Buffer, BackendError> {
        if self.faults.oom {
            let mut e = BackendError::new(
                BackendKind::Cuda,
                Phase::Execute,
                "injected fault (cuda:oom): out of device memory",
            );
            e.out_of_memory = true;
            return Err(e);
        }
        self.inner.alloc(bytes)
    }

    fn upload(&mut self, dst: &D::Buffer, offset: usize, data: &[u8]) -> Result<(), BackendError> {
        self.faults
            .check(self.faults.upload, Phase::Upload, "upload")?;
        self.inner.upload(dst, offset, data)
    }

    fn download(
        &mut self,
        src: &D::Buffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        self.faults
            .check(self.faults.download, Phase::Download, "download")?;
        self.inner.download(src, offset, out)
    }

    /// `cuda:download` fails the downloads that overlap compute too.
    fn start_download(
        &mut self,
        src: &D::Buffer,
        offset: usize,
        len: usize,
    ) -> Result<D::Pending, BackendError> {
        self.faults
            .check(self.faults.download, Phase::Download, "download")?;
        self.inner.start_download(src, offset, len)
    }

    fn finish_download(&mut self, pending: D::Pending, out: &mut [u8]) -> Result<(), BackendError> {
        self.inner.finish_download(pending, out)
    }

    fn launch(
        &mut self,
        module: &D::Module,
        entry: usize,
        grid: u32,
        block: u32,
        buffers: &[BufferArg<'_, D::Buffer>],
        uniforms: &[u8],
    ) -> Result<(), BackendError> {
        self.faults
            .check(self.faults.launch, Phase::Execute, "launch")?;
        self.inner
            .launch(module, entry, grid, block, buffers, uniforms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_comma_list() {
        let f = FaultPlan::parse("cuda:compile, wgpu:upload,cuda:oom,cuda:nonsense");
        assert_eq!(
            f,
            FaultPlan {
                compile: true,
                oom: true,
                ..FaultPlan::NONE
            }
        );
        assert_eq!(FaultPlan::parse(""), FaultPlan::NONE);
    }

    #[test]
    fn every_cuda_entry_the_config_accepts_is_a_fault() {
        for e in crate::runtime::FAULTS
            .iter()
            .filter(|e| e.starts_with("cuda:"))
        {
            assert_ne!(FaultPlan::parse(e), FaultPlan::NONE, "{e}");
        }
    }
}
