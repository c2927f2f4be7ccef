//! Device-resident data: `DeviceArray<T>` made by `.to_device()` or by
//! collecting a query on the device. A query over a `DeviceArray` skips the
//! upload; a result kept on the device skips the download; dropping the
//! array frees its buffer.

use super::{Mode, Query};
use crate::backend::{BackendKind, DeviceColumn, Input};
use crate::error::{Error, ErrorKind};
use crate::expr::{Element, Expr};
use crate::graph::LogicalTerminal;
use crate::metrics::ExecutionMetrics;
use crate::runtime::executor::{self, Collected, Prepared};
use crate::runtime::Engine;
use std::marker::PhantomData;
use std::sync::Arc;

/// A column of `T` kept on a device, or on the host when no device could
/// hold it (check [`DeviceArray::is_resident`]).
pub struct DeviceArray<T> {
    storage: Storage<T>,
}

enum Storage<T> {
    Device(Arc<dyn DeviceColumn>, PhantomData<T>),
    Host(Vec<T>),
}

impl<T: Element> std::fmt::Debug for DeviceArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("len", &self.len())
            .field("device", &self.device())
            .finish()
    }
}

impl<T: Element> DeviceArray<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Device(c, _) => c.len(),
            Storage::Host(v) => v.len(),
        }
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device holding the data, `None` when it stayed on the host.
    pub fn device(&self) -> Option<BackendKind> {
        match &self.storage {
            Storage::Device(c, _) => Some(c.backend()),
            Storage::Host(_) => None,
        }
    }

    /// Whether the data is on a device.
    pub fn is_resident(&self) -> bool {
        self.device().is_some()
    }

    /// Copies the data back to the host.
    pub fn to_vec(&self) -> Result<Vec<T>, Error> {
        match &self.storage {
            Storage::Host(v) => Ok(v.clone()),
            Storage::Device(c, _) => c.download().map(T::from_column).map_err(|e| {
                Error::new(ErrorKind::BackendFailed, "download failed").with_attempts(vec![e])
            }),
        }
    }

    pub(crate) fn input(&self) -> Input<'_> {
        match &self.storage {
            Storage::Device(c, _) => Input::Device(&**c),
            Storage::Host(v) => Input::Host(T::column_ref(v)),
        }
    }

    fn from_collected(c: Collected) -> DeviceArray<T> {
        match c {
            Collected::Device(mut cols) => DeviceArray {
                storage: Storage::Device(cols.remove(0), PhantomData),
            },
            Collected::Host(mut cols) => DeviceArray {
                storage: Storage::Host(T::from_column(cols.remove(0))),
            },
        }
    }
}

impl<'a, T: Element> super::IntoSource<'a> for &'a DeviceArray<T> {
    type Elem = T;
    fn into_input(self) -> Input<'a> {
        self.input()
    }
}

/// Adds `.to_device()` to slices and vectors.
pub trait ToDevice<T: Element> {
    /// Uploads to the best available device of the default engine.
    fn to_device(&self) -> Result<DeviceArray<T>, Error> {
        self.to_device_on(crate::runtime::engine())
    }

    /// Uploads to the best available device of `engine`.
    fn to_device_on(&self, engine: &Engine) -> Result<DeviceArray<T>, Error>;
}

impl<T: Element> ToDevice<T> for [T] {
    fn to_device_on(&self, engine: &Engine) -> Result<DeviceArray<T>, Error> {
        let mut errors = Vec::new();
        for kind in [BackendKind::Cuda, BackendKind::Wgpu] {
            let Some(b) = engine.backend(kind) else {
                continue;
            };
            if !engine.config().enabled(kind) {
                continue;
            }
            if let crate::backend::Availability::Unavailable(_) = b.availability() {
                continue;
            }
            match b.upload(T::column_ref(self)) {
                Ok(c) => {
                    return Ok(DeviceArray {
                        storage: Storage::Device(c, PhantomData),
                    })
                }
                Err(e) => errors.push(e),
            }
        }
        Err(Error::new(
            ErrorKind::NoBackend,
            "no device backend could hold the data",
        )
        .with_attempts(errors))
    }
}

impl<T: Element> ToDevice<T> for Vec<T> {
    fn to_device_on(&self, engine: &Engine) -> Result<DeviceArray<T>, Error> {
        self.as_slice().to_device_on(engine)
    }
}

impl<'a, T: Element, M: Mode> Query<'a, Expr<T>, M> {
    /// Collects the result and keeps it on the device when a device backend
    /// runs the query (no download); when the CPU runs it, the array stays
    /// on the host. Returns the run's metrics too.
    pub fn collect_on_device(self) -> Result<(DeviceArray<T>, ExecutionMetrics), Error> {
        let mut q = self;
        let cols = q.columns.clone();
        let mut terminal = LogicalTerminal::Collect(cols);
        q.settle_nulls(&mut terminal);
        q.traced.trace.terminal = Some(terminal);
        let (c, m) = executor::run_to_device(Prepared {
            engine: q.engine,
            traced: q.traced,
            inputs: q.inputs,
            options: q.options,
            started: q.started,
            sides: q.sides,
            held: q.held,
            plan: None,
        })?;
        Ok((DeviceArray::from_collected(c), m))
    }
}
