//! Devices. CPU is always there. CUDA tensors need the `cuda` feature and
//! a GPU ([`crate::cuda::is_available`]); otherwise a CUDA request is an
//! `AotError::DeviceUnavailable` that says why.

use serde::{Deserialize, Serialize};

/// Where a tensor's storage lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Device {
    /// The host.
    Cpu,
    /// The CUDA device of this ordinal.
    Cuda(usize),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
