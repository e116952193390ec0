//! The CUDA backend with the `cuda` feature: a [`CudaStorage`] is one
//! buffer of a CUDA device ([`super::device`]: a GPU through cudarc, or the
//! simulator). Its primitives are in `backend.rs`.
//!
//! cudarc is built with `dynamic-loading`: the crate builds with no CUDA
//! toolkit, and [`is_available`] checks for the driver library before any
//! driver call (a missing libcuda would otherwise panic).

use super::device::{self, Gpu, Mem};
use crate::dtype::DType;
use crate::error::Result;
use std::sync::OnceLock;

/// A buffer of `len` elements of `dtype` on CUDA device `ordinal`. Bools
/// are stored one byte each, half types two bytes.
#[derive(Debug)]
pub struct CudaStorage {
    pub(super) mem: Mem,
    pub(super) dtype: DType,
    pub(super) len: usize,
    pub(super) ordinal: usize,
}

impl CudaStorage {
    /// The device this buffer lives on.
    pub(super) fn gpu(&self, op: &'static str) -> Result<&'static Gpu> {
        device::gpu(op, self.ordinal)
    }
}

/// True if the CUDA device is the simulator (`AOT_CUDA_SIM=1`). Its
/// kernels are the same CUDA C compiled for the CPU, and its matmul runs
/// on the host, so it gives the CPU backend's bits everywhere; a real GPU
/// gives them for the generated kernels but not for cuBLAS's matmul, whose
/// summation order differs (a few ulps in f32).
pub fn is_simulated() -> bool {
    device::simulated()
}

/// True if a CUDA device can be used: the driver library loads and reports
/// at least one GPU, or the simulator is on (`AOT_CUDA_SIM=1`, see
/// [`super::device`]). Never panics; the driver is asked once per process.
pub fn is_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    device::simulated()
        || *AVAILABLE.get_or_init(|| {
            // cudarc panics when it finds a driver library of the wrong
            // version (a missing symbol); that means no usable driver.
            std::panic::catch_unwind(|| {
                // SAFETY: `is_culib_present` only tries to dlopen the
                // driver library and reports whether that worked; it calls
                // no driver function. The driver is called below only if
                // it loaded.
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

pub(crate) use super::listing::op_kernel_sources;
