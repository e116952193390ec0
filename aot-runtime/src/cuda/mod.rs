//! The CUDA backend, always compiled. This module is the one place that
//! looks at the `cuda` feature: it picks
//!
//! - `driver` (feature `cuda`): buffers in device memory through cudarc.
//!   The NVRTC kernels and cuBLAS matmul come next (issue 14); until then
//!   every primitive returns [`AotError::DeviceUnavailable`] naming the op,
//!   with the reason "CUDA kernels are not built yet", or that no driver or
//!   GPU was found;
//! - `dummy` (no feature): a stand-in whose every primitive returns
//!   `DeviceUnavailable` with the reason that aot-runtime was built without
//!   the `cuda` feature (candle's dummy CUDA backend).
//!
//! With the feature, [`nvrtc`] compiles generated CUDA C to PTX (it needs
//! NVRTC, not a GPU), and [`sim`] runs the same CUDA C on the CPU (it
//! needs a host C++ compiler), for tests without a GPU.
//!
//! Either way [`CudaStorage`] implements [`Backend`](crate::backend::Backend)
//! and [`is_available`] exists, so no op or test needs a `cfg`.

#[cfg(feature = "cuda")]
mod driver;
#[cfg(feature = "cuda")]
use driver as imp;
#[cfg(not(feature = "cuda"))]
mod dummy;
#[cfg(not(feature = "cuda"))]
use dummy as imp;

#[cfg(feature = "cuda")]
pub mod nvrtc;
#[cfg(feature = "cuda")]
pub mod sim;
#[cfg(test)]
mod tests;

pub(crate) use imp::kernel_sources;
pub use imp::{is_available, CudaStorage};

use crate::error::AotError;

/// The error of a CUDA primitive that cannot run: `op` is the eager op,
/// `reason` why (no feature, no driver, no kernel yet).
fn unavailable(op: &'static str, reason: &str) -> AotError {
    AotError::DeviceUnavailable { op, msg: reason.to_string() }
}

/// `impl Backend for CudaStorage` with every primitive failing through
/// `CudaStorage::unavailable(op)`; `device`, `dtype` and `len` come from
/// inherent methods of the same names. Written once for both storages.
macro_rules! unavailable_backend {
    () => {
        impl $crate::backend::Backend for CudaStorage {
            fn device(&self) -> $crate::device::Device {
                CudaStorage::device(self)
            }
            fn dtype(&self) -> $crate::dtype::DType {
                CudaStorage::dtype(self)
            }
            fn len(&self) -> usize {
                CudaStorage::len(self)
            }
            fn full(op: &'static str, _: &Device, _: DType, _: usize, _: f64) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn from_host(op: &'static str, _: &Device, _: CpuStorage) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn random(op: &'static str, _: &Device, _: Distribution, _: DType, _: usize, _: &mut Rng) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn to_host(&self, op: &'static str, _: &Layout, _: DType) -> Result<CpuStorage> {
                Err(CudaStorage::unavailable(op))
            }
            fn unary(&self, op: UnaryOp, _: &Layout, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn clamp(&self, op: &'static str, _: &Layout, _: Option<f64>, _: Option<f64>, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn binary(&self, op: BinaryOp, _: &Layout, _: &Self, _: &Layout, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_assign(&mut self, op: BinaryOp, _: &Layout, _: &Self, _: &Layout) -> Result<()> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_dense(&self, op: BinaryOp, _: std::ops::Range<usize>, _: &Self, _: std::ops::Range<usize>) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_assign_dense(&mut self, op: BinaryOp, _: std::ops::Range<usize>, _: &Self, _: std::ops::Range<usize>) -> Result<()> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_scalar(&self, op: BinaryOp, _: &Layout, _: f64, _: bool, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn where_cond(&self, op: &'static str, _: &Layout, _: &Self, _: &Layout, _: &Self, _: &Layout, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn cast(&self, op: &'static str, _: &Layout, _: DType, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn copy_strided(&self, op: &'static str, _: &Layout, _: &mut Self, _: &Layout) -> Result<()> {
                Err(CudaStorage::unavailable(op))
            }
            fn scatter_add(&self, op: &'static str, _: &Layout, _: &mut Self, _: &Layout) -> Result<()> {
                Err(CudaStorage::unavailable(op))
            }
            fn fill(&mut self, op: &'static str, _: &Layout, _: f64) -> Result<()> {
                Err(CudaStorage::unavailable(op))
            }
            fn reduce(&self, op: ReduceOp, _: &Layout, _: &[usize], _: bool) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn var(&self, op: &'static str, _: &Layout, _: &[usize], _: i64, _: bool) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn softmax(&self, op: &'static str, _: &Layout, _: usize, _: bool) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn matmul(&self, op: &'static str, _: &Layout, _: &Self, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            /// Declined: the caller runs the kernel's ops one by one, and
            /// the first reports why CUDA is unavailable, naming itself.
            fn fused(_: &'static str, _: &$crate::backend::FusedProgram<'_>, _: &[(&Self, Layout)], _: &Layout) -> Option<Result<Self>> {
                None
            }
        }
    };
}
use unavailable_backend;
