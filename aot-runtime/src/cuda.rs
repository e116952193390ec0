//! The CUDA backend's storage (feature `cuda`). Buffers live in device
//! memory through cudarc; kernels (NVRTC-generated) and cuBLAS matmul are
//! the next step of the roadmap, so ops on these buffers currently return
//! `DeviceUnavailable` from `Storage::with_cpu`.
//!
//! cudarc is built with `dynamic-loading`: the crate builds with no CUDA
//! toolkit, and `is_available` checks for the driver library before any
//! driver call (a missing libcuda would otherwise panic).

use cudarc::driver::CudaSlice;
use half::{bf16, f16};

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

impl CudaStorage {
    pub fn len(&self) -> usize {
        match self {
            CudaStorage::F32(s) => s.len(),
            CudaStorage::F64(s) => s.len(),
            CudaStorage::F16(s) => s.len(),
            CudaStorage::BF16(s) => s.len(),
            CudaStorage::I64(s) => s.len(),
            CudaStorage::Bool(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// True if the CUDA driver library can be loaded on this machine.
pub fn is_available() -> bool {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library and
    // reports whether that worked; it calls no driver function.
    unsafe { cudarc::driver::sys::is_culib_present() }
}
