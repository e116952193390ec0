//! Shared helpers of the CUDA integration tests (`cuda_*.rs`): the device,
//! the dtypes, whether a device (or the simulator) is there, and a small
//! reproducible generator.
#![allow(dead_code)]

use aot_runtime::cuda::is_available;
use aot_runtime::{DType, Device};

pub const CUDA: Device = Device::Cuda(0);
pub const DTYPES: [DType; 6] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool];

/// Whether a CUDA device (or the simulator, `AOT_CUDA_SIM=1`) can run the
/// test; elsewhere the test says it is skipped. CI always simulates one.
pub fn on() -> bool {
    if !is_available() {
        assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
        eprintln!("skipped: no CUDA device (set AOT_CUDA_SIM=1 to simulate one)");
    }
    is_available()
}

/// xorshift64*: reproducible cases without a dependency.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
