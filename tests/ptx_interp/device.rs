//! [`PtxDevice`] over the interpreter: buffers are byte vectors (filled
//! with a poison pattern, so a kernel that reads what nobody wrote gives
//! garbage the differential tests see), launches run [`machine::launch`].
//!
//! Started downloads are strict: `start_download` takes a snapshot of the
//! bytes (what a real copy would read, whenever it runs) and, until
//! `finish_download`, any write into that range (an upload or a kernel's
//! store, atomics included) is an error. A host protocol that writes a
//! buffer again before finishing the download that reads it is caught
//! here, though on a GPU it would only race.

use super::machine::{self, LaunchStats, Memory};
use super::parse::{self, Module};
use computeq::plumbing::backends::ptx::{BufferArg, PtxDevice};
use computeq::plumbing::codegen::ptx::PtxModule;
use computeq::plumbing::{BackendError, BackendKind, Phase};
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

/// A started download: the bytes as they were when it started.
#[derive(Debug)]
pub struct InterpPending {
    /// Its number, to find its range in `Memory::reading`.
    id: u64,
    bytes: Vec<u8>,
}

/// The interpreter as a device.
#[derive(Default)]
pub struct InterpDevice {
    pub memory: Memory,
    pub launches: Vec<(String, u32, u32, LaunchStats)>,
    /// Ids of the unfinished downloads, in the order of `memory.reading`.
    reading_ids: Vec<u64>,
    next_download: u64,
}

fn fail(phase: Phase, m: impl Into<String>) -> BackendError {
    BackendError::new(BackendKind::Cuda, phase, m.into())
}

impl InterpDevice {
    pub fn new() -> InterpDevice {
        InterpDevice::default()
    }

    /// Downloads started and not finished.
    pub fn downloads_in_flight(&self) -> usize {
        self.reading_ids.len()
    }

    /// Total lane-instructions executed so far.
    pub fn lane_instructions(&self) -> u64 {
        self.launches.iter().map(|l| l.3.lane_instructions).sum()
    }
}

impl PtxDevice for InterpDevice {
    type Buffer = InterpBuffer;
    type Module = Rc<LoadedModule>;
    type Pending = InterpPending;

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
        self.memory
            .check_unread(b, offset..offset + data.len())
            .map_err(|e| fail(Phase::Upload, e))?;
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

    fn start_download(
        &mut self,
        src: &InterpBuffer,
        offset: usize,
        len: usize,
    ) -> Result<InterpPending, BackendError> {
        if offset + len > src.bytes {
            return Err(fail(Phase::Download, "download past the end of the buffer"));
        }
        let b = (src.addr >> 40) as usize - 1;
        let id = self.next_download;
        self.next_download += 1;
        self.memory.reading.push((b, offset..offset + len));
        self.reading_ids.push(id);
        Ok(InterpPending {
            id,
            bytes: self.memory.buffers[b][offset..offset + len].to_vec(),
        })
    }

    fn finish_download(
        &mut self,
        pending: InterpPending,
        out: &mut [u8],
    ) -> Result<(), BackendError> {
        let Some(i) = self.reading_ids.iter().position(|&id| id == pending.id) else {
            return Err(fail(
                Phase::Download,
                "finishing a download this device did not start",
            ));
        };
        if out.len() != pending.bytes.len() {
            return Err(fail(
                Phase::Download,
                format!(
                    "a download of {} bytes finished into {} bytes",
                    pending.bytes.len(),
                    out.len()
                ),
            ));
        }
        self.reading_ids.remove(i);
        self.memory.reading.remove(i);
        out.copy_from_slice(&pending.bytes);
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
