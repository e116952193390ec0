//! The CUDA backend, always compiled. This module is the one place that
//! looks at the `cuda` feature: it picks
//!
//! - `driver` (feature `cuda`): a buffer of a CUDA device (`device.rs`: a
//!   GPU through cudarc, or the simulator of `sim.rs` with
//!   `AOT_CUDA_SIM=1`), and its primitives (`backend.rs`, `ops.rs`):
//!   elementwise ops, clamp, scalar ops, scatter_add and reductions as
//!   kernels rendered from the kernel stage (`kernels.rs`, `reduce.rs`),
//!   random fills from the generator's Philox stream (`random.rs`),
//!   `arange` (`arange.rs`), the
//!   kernels of compiled calls rendered as the kernel stage fused them
//!   (`fused_kernels.rs`), the rest through the host; `listing.rs` gives
//!   the sources a noted primitive launches, for `kernels_for`. Without a GPU (and without
//!   the simulator) every request is `AotError::DeviceUnavailable` naming
//!   the op and the reason;
//! - `dummy` (no feature): a stand-in whose every primitive returns
//!   `DeviceUnavailable` with the reason that aot-runtime was built without
//!   the `cuda` feature (candle's dummy CUDA backend).
//!
//! With the feature, `nvrtc` compiles generated CUDA C to PTX (it needs
//! NVRTC, not a GPU), and `sim` runs the same CUDA C on the CPU (it
//! needs a host C++ compiler), for tests without a GPU.
//!
//! Either way [`CudaStorage`] implements `Backend` and [`is_available`]
//! and [`is_simulated`] exist, so no op or test needs a `cfg`; so do the
//! profiler's clocks and allocator statistics (`profiling.rs`; none
//! without the feature).

#[cfg(feature = "cuda")]
mod driver;
#[cfg(feature = "cuda")]
use driver as imp;
#[cfg(not(feature = "cuda"))]
mod dummy;
#[cfg(not(feature = "cuda"))]
use dummy as imp;

#[cfg(feature = "cuda")]
mod arange;
#[cfg(feature = "cuda")]
mod backend;
#[cfg(feature = "cuda")]
mod cublas;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod fused_kernels;
#[cfg(feature = "cuda")]
mod index;
#[cfg(feature = "cuda")]
mod kernels;
#[cfg(feature = "cuda")]
mod listing;
#[cfg(feature = "cuda")]
pub mod nvrtc;
#[cfg(feature = "cuda")]
mod ops;
#[cfg(feature = "cuda")]
mod profiling;
#[cfg(feature = "cuda")]
mod random;
#[cfg(feature = "cuda")]
mod reduce;
#[cfg(feature = "cuda")]
mod scan;
#[cfg(feature = "cuda")]
pub mod sim;
#[cfg(test)]
mod tests;

#[cfg(not(feature = "cuda"))]
pub(crate) use dummy::{allocator_stats, device_events};
pub use imp::{is_available, is_simulated, CudaStorage};
pub(crate) use imp::{kernel_sources, op_kernel_sources};
#[cfg(feature = "cuda")]
pub(crate) use profiling::{allocator_stats, device_events};

use crate::device::Device;
use crate::dtype::DType;

/// One CUDA device's allocator, as the profiler reports it: counts since
/// the process started, and the memory pool's bytes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolStats {
    pub ordinal: usize,
    /// The simulator (host memory, no pool).
    pub simulated: bool,
    /// Buffers allocated, and their bytes.
    pub buffers: u64,
    pub bytes: u64,
    /// The bytes the device's memory pool holds from the driver, now and
    /// at most (`None`: no pool, or the simulator).
    pub reserved: Option<u64>,
    pub peak_reserved: Option<u64>,
}

/// The buffer's metadata, the same with or without the feature.
impl CudaStorage {
    /// The device this buffer lives on.
    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }
    /// The buffer's element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
