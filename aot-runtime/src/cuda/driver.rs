//! The CUDA backend with the `cuda` feature: buffers in device memory
//! through cudarc. Its kernels are not built yet (issue 14), so every
//! primitive returns `DeviceUnavailable` naming the op and the reason.
//!
//! cudarc is built with `dynamic-loading`: the crate builds with no CUDA
//! toolkit, and [`is_available`] checks for the driver library before any
//! driver call (a missing libcuda would otherwise panic).

use super::unavailable_backend;
use crate::backend::{BinaryOp, Distribution, ReduceOp, Rng, UnaryOp};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::CpuStorage;
use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use std::sync::OnceLock;

/// A device buffer of one dtype.
#[derive(Debug)]
pub enum CudaStorage {
    F32(CudaSlice<f32>),
    F64(CudaSlice<f64>),
    F16(CudaSlice<f16>),
    BF16(CudaSlice<bf16>),
    I64(CudaSlice<i64>),
    /// Bools are stored one byte each.
    Bool(CudaSlice<u8>),
}

/// Runs `$body` with `$s` bound to the typed slice of a `CudaStorage`.
macro_rules! dispatch_cuda {
    ($e:expr, $s:ident => $body:expr) => {
        match $e {
            CudaStorage::F32($s) => $body,
            CudaStorage::F64($s) => $body,
            CudaStorage::F16($s) => $body,
            CudaStorage::BF16($s) => $body,
            CudaStorage::I64($s) => $body,
            CudaStorage::Bool($s) => $body,
        }
    };
}

impl CudaStorage {
    pub fn device(&self) -> Device {
        Device::Cuda(dispatch_cuda!(self, s => s.ordinal()))
    }
    pub fn dtype(&self) -> DType {
        match self {
            CudaStorage::F32(_) => DType::F32,
            CudaStorage::F64(_) => DType::F64,
            CudaStorage::F16(_) => DType::F16,
            CudaStorage::BF16(_) => DType::BF16,
            CudaStorage::I64(_) => DType::I64,
            CudaStorage::Bool(_) => DType::Bool,
        }
    }
    pub fn len(&self) -> usize {
        dispatch_cuda!(self, s => s.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn unavailable(op: &'static str) -> AotError {
        let reason =
            if is_available() { "CUDA kernels are not built yet" } else { "no CUDA driver (libcuda) or no GPU was found on this machine" };
        super::unavailable(op, reason)
    }
}

unavailable_backend!();

/// True if the CUDA driver library loads and reports at least one GPU.
/// Never panics; the answer is computed once per process.
pub fn is_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // cudarc panics when it finds a driver library of the wrong version
        // (a missing symbol); that means no usable driver, not a crash.
        std::panic::catch_unwind(|| {
            // SAFETY: `is_culib_present` only tries to dlopen the driver
            // library and reports whether that worked; it calls no driver
            // function. The driver is called below only if it loaded.
            let present = unsafe { cudarc::driver::sys::is_culib_present() };
            present && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
        })
        .unwrap_or(false)
    })
}

/// Kernel sources can be rendered for CUDA in this build, with or without
/// a GPU.
pub(crate) fn kernel_sources() -> Result<()> {
    Ok(())
}
