//! [`PtxDevice`] over the interpreter: buffers are byte vectors (filled
//! with a poison pattern, so a kernel that reads what nobody wrote gives
//! garbage the differential tests see), launches run [`machine::launch`].

use super::machine::{self, LaunchStats, Memory};
use super::parse::{self, Module};
use computeq::backend::{BackendError, BackendKind, Phase};
use computeq::codegen::ptx::{BufferArg, PtxDevice, PtxModule};
use std::rc::Rc;

/// A loaded module: the parse and the entry names in kernel order.
pub struct LoadedModule {
    pub module: Module,
    pub entries: Vec<usize>,
}

/// A buffer: its base address in [`Memory`].
#[derive(Debug)]
pub struct InterpBuffer {
    pub addr: u64,
    pub bytes: usize,
}

/// The interpreter as a device.
#[derive(Default)]
pub struct InterpDevice {
    pub memory: Memory,
    pub launches: Vec<(String, u32, u32, LaunchStats)>,
}

fn fail(phase: Phase, m: impl Into<String>) -> BackendError {
    BackendError::new(BackendKind::Cuda, phase, m.into())
}

impl InterpDevice {
    pub fn new() -> InterpDevice {
        InterpDevice::default()
    }

    /// Total lane-instructions executed so far.
    pub fn lane_instructions(&self) -> u64 {
        self.launches.iter().map(|l| l.3.lane_instructions).sum()
    }
}

impl PtxDevice for InterpDevice {
    type Buffer = InterpBuffer;
    type Module = Rc<LoadedModule>;

    /// Parses a module (the analogue of `cuModuleLoadData`).
    fn load(&mut self, m: &PtxModule) -> Result<Rc<LoadedModule>, BackendError> {
        let module = parse::parse(&m.text).map_err(|e| fail(Phase::Compile, e))?;
        let entries = m
            .entries
            .iter()
            .map(|e| {
                module
                    .function(e)
                    .filter(|&i| module.functions[i].is_entry)
                    .ok_or_else(|| fail(Phase::Compile, format!("no entry {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Rc::new(LoadedModule { module, entries }))
    }

    fn alloc(&mut self, bytes: usize) -> Result<InterpBuffer, BackendError> {
        Ok(InterpBuffer {
            addr: self.memory.alloc(bytes),
            bytes,
        })
    }

    fn upload(
        &mut self,
        dst: &InterpBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), BackendError> {
        if offset + data.len() > dst.bytes {
            return Err(fail(Phase::Upload, "upload past the end of the buffer"));
        }
        let b = (dst.addr >> 40) as usize - 1;
        self.memory.buffers[b][offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn download(
        &mut self,
        src: &InterpBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        if offset + out.len() > src.bytes {
            return Err(fail(Phase::Download, "download past the end of the buffer"));
        }
        let b = (src.addr >> 40) as usize - 1;
        out.copy_from_slice(&self.memory.buffers[b][offset..offset + out.len()]);
        Ok(())
    }

    fn launch(
        &mut self,
        module: &Rc<LoadedModule>,
        entry: usize,
        grid: u32,
        block: u32,
        buffers: &[BufferArg<'_, InterpBuffer>],
        uniforms: &[u8],
    ) -> Result<(), BackendError> {
        let f = module.entries[entry];
        let mut params: Vec<Vec<u8>> = buffers
            .iter()
            .map(|b| (b.buffer.addr + b.offset as u64).to_le_bytes().to_vec())
            .collect();
        // The uniform block is the last parameter when the kernel has one.
        if module.module.functions[f].params.len() == buffers.len() + 1 {
            params.push(uniforms.to_vec());
        }
        let stats = machine::launch(&module.module, f, grid, block, &params, &mut self.memory)
            .map_err(|e| {
                fail(
                    Phase::Execute,
                    format!("{}: {e}", module.module.functions[f].name),
                )
            })?;
        self.launches
            .push((module.module.functions[f].name.clone(), grid, block, stats));
        Ok(())
    }
}
