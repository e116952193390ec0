//! The CUDA backend of a build without the `cuda` feature: no buffer can
//! be made, and every primitive says why.

use super::unavailable_backend;
use crate::backend::{BinaryOp, Distribution, ReduceOp, Rng, UnaryOp};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::storage::CpuStorage;

/// The reason every CUDA request fails in this build.
pub(crate) const REASON: &str = "aot-runtime was built without the `cuda` feature";

/// A CUDA buffer in a build without CUDA. The constructors all fail, so
/// outside this crate's tests no value of it exists; it holds the metadata
/// a buffer would report.
#[derive(Debug)]
pub struct CudaStorage {
    ordinal: usize,
    dtype: DType,
    len: usize,
}

impl CudaStorage {
    /// A stand-in value, so tests can call every primitive of the dummy.
    #[cfg(test)]
    pub(crate) fn placeholder(ordinal: usize, dtype: DType, len: usize) -> CudaStorage {
        CudaStorage { ordinal, dtype, len }
    }
    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn unavailable(op: &'static str) -> AotError {
        super::unavailable(op, REASON)
    }
}

unavailable_backend!();

/// Always false: this build has no CUDA support.
pub fn is_available() -> bool {
    false
}

/// Kernel sources for CUDA need the renderer of the `cuda` feature.
pub(crate) fn kernel_sources() -> Result<()> {
    Err(AotError::DeviceUnavailable { op: "kernels_for", msg: REASON.into() })
}
