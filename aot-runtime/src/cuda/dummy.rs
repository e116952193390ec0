//! The CUDA backend of a build without the `cuda` feature: no buffer can
//! be made, and every primitive says why.

use crate::backend::CpuStorage;
use crate::backend::{Distribution, Indexed, Rng, Targets};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::OpKind;

/// The reason every CUDA request fails in this build.
pub(crate) const REASON: &str = "aot-runtime was built without the `cuda` feature";

/// A CUDA buffer in a build without CUDA. The constructors all fail, so
/// outside this crate's tests no value of it exists; it holds the metadata
/// a buffer would report.
#[derive(Debug)]
pub struct CudaStorage {
    pub(super) ordinal: usize,
    pub(super) dtype: DType,
    pub(super) len: usize,
}

impl CudaStorage {
    /// A stand-in value, so tests can call every primitive of the dummy.
    #[cfg(test)]
    pub(crate) fn placeholder(ordinal: usize, dtype: DType, len: usize) -> CudaStorage {
        CudaStorage { ordinal, dtype, len }
    }
    fn unavailable(op: &'static str) -> AotError {
        unavailable(op, REASON)
    }
}

/// Always false: this build has no CUDA support.
pub fn is_available() -> bool {
    false
}

/// Always false: this build has no CUDA support, simulated or not.
pub fn is_simulated() -> bool {
    false
}

/// Kernel sources for CUDA need the renderer of the `cuda` feature.
pub(crate) fn kernel_sources() -> Result<()> {
    Err(AotError::DeviceUnavailable { op: "kernels_for", msg: REASON.into() })
}

/// The CUDA sources of a primitive's own kernels need the `cuda` feature
/// (`kernel_sources` reports it first).
pub(crate) fn op_kernel_sources(_: &crate::backend::OpKernels) -> Result<Vec<crate::backend::KernelSource>> {
    kernel_sources().map(|()| Vec::new())
}

/// The error of a CUDA primitive that cannot run: `op` is the eager op,
/// `reason` why (no feature, no driver, no kernel yet).
fn unavailable(op: &'static str, reason: &str) -> AotError {
    AotError::DeviceUnavailable { op, msg: reason.to_string() }
}

/// `impl Backend for CudaStorage` with every primitive failing through
/// `CudaStorage::unavailable(op)`; `device`, `dtype` and `len` come from
/// inherent methods of the same names.
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
            fn arange(op: &'static str, _: &Device, _: DType, _: usize, _: f64, _: f64) -> Result<Self> {
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
            fn unary(&self, op: OpKind, _: &Layout, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn clamp(&self, op: &'static str, _: &Layout, _: Option<f64>, _: Option<f64>, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn binary(&self, op: OpKind, _: &Layout, _: &Self, _: &Layout, _: &Layout) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_assign(&mut self, op: OpKind, _: &Layout, _: &Self, _: &Layout) -> Result<()> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_dense(&self, op: OpKind, _: std::ops::Range<usize>, _: &Self, _: std::ops::Range<usize>) -> Result<Self> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_assign_dense(&mut self, op: OpKind, _: std::ops::Range<usize>, _: &Self, _: std::ops::Range<usize>) -> Result<()> {
                Err(CudaStorage::unavailable(op.name()))
            }
            fn binary_scalar(&self, op: OpKind, _: &Layout, _: f64, _: bool, _: &Layout) -> Result<Self> {
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
            #[cfg(any(test, feature = "test-hooks"))]
            fn fill(&mut self, op: &'static str, _: &Layout, _: f64) -> Result<()> {
                Err(CudaStorage::unavailable(op))
            }
            fn gather(&self, op: &'static str, _: &Layout, _: Indexed<'_, Self>) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn scatter(&self, op: &'static str, _: &Layout, _: Indexed<'_, Self>, _: &mut Self, _: &Layout, _: bool) -> Result<()> {
                Err(CudaStorage::unavailable(op))
            }
            fn reduce(&self, op: OpKind, _: &Layout, _: &[usize], _: bool) -> Result<Self> {
                Err(CudaStorage::unavailable(op.torch_name()))
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
            fn cumsum(&self, op: &'static str, _: &Layout, _: usize, _: bool) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn extreme(&self, op: &'static str, _: &Layout, _: usize, _: bool) -> Result<(Self, Self)> {
                Err(CudaStorage::unavailable(op))
            }
            fn nll_loss(&self, op: &'static str, _: &Layout, _: Targets<'_, Self>) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            fn nll_loss_backward(&self, op: &'static str, _: &Layout, _: Targets<'_, Self>, _: DType) -> Result<Self> {
                Err(CudaStorage::unavailable(op))
            }
            /// Declined: the caller runs the kernel's ops one by one, and
            /// the first reports why CUDA is unavailable, naming itself.
            fn fused(
                _: &'static str,
                _: &$crate::backend::FusedProgram<'_>,
                _: Option<&$crate::backend::KernelCall<'_>>,
                _: &[(&Self, Layout)],
                _: &Layout,
            ) -> Option<Result<Self>> {
                None
            }
        }
    };
}
unavailable_backend!();

/// No events: this build has no CUDA device to time.
pub(crate) fn device_events(_ordinal: usize) -> Option<Box<dyn crate::backend::profile_record::DeviceEvents>> {
    None
}

/// No CUDA allocator in this build.
pub(crate) fn allocator_stats() -> Vec<super::PoolStats> {
    Vec::new()
}
