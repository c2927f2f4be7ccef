//! The inputs of one run: a host column or one already on a device.

use super::{BackendError, BackendKind, Column, ColumnRef, DType, RunStats};
use std::fmt;

/// A column stored on a device (`DeviceArray`), seen by backends.
pub trait DeviceColumn: Send + Sync + fmt::Debug {
    /// The backend owning the memory.
    fn backend(&self) -> BackendKind;
    /// Element type.
    fn dtype(&self) -> DType;
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether there is no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies the data back to the host.
    fn download(&self) -> Result<Column, BackendError>;
    /// For the owning backend to recover its own type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// One input column of a run.
#[derive(Copy, Clone, Debug)]
pub enum Input<'a> {
    /// In host memory.
    Host(ColumnRef<'a>),
    /// Already on a device.
    Device(&'a dyn DeviceColumn),
}

impl<'a> Input<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Input::Host(c) => c.len(),
            Input::Device(d) => d.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Input::Host(c) => c.dtype(),
            Input::Device(d) => d.dtype(),
        }
    }

    /// Where the data lives: `None` for the host.
    pub fn device(&self) -> Option<BackendKind> {
        match self {
            Input::Host(_) => None,
            Input::Device(d) => Some(d.backend()),
        }
    }

    /// The data on the host, downloading it when it lives on a device (the
    /// download is recorded in `stats`).
    pub fn host(&self, stats: &mut RunStats) -> Result<HostColumn<'a>, BackendError> {
        match *self {
            Input::Host(c) => Ok(HostColumn::Borrowed(c)),
            Input::Device(d) => {
                let t = std::time::Instant::now();
                let c = d.download()?;
                stats.transfer_out += t.elapsed();
                stats.bytes_downloaded += c.byte_len() as u64;
                Ok(HostColumn::Owned(c))
            }
        }
    }
}

/// A host column, borrowed from the user or downloaded for this run.
#[derive(Debug)]
pub enum HostColumn<'a> {
    /// The user's data.
    Borrowed(ColumnRef<'a>),
    /// Downloaded from a device.
    Owned(Column),
}

impl HostColumn<'_> {
    /// Borrows the data.
    pub fn as_ref(&self) -> ColumnRef<'_> {
        match self {
            HostColumn::Borrowed(c) => *c,
            HostColumn::Owned(c) => c.as_ref(),
        }
    }
}
