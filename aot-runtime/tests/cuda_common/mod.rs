//! Shared helpers of the CUDA integration tests (`cuda_*.rs`): the device,
//! the dtypes, whether a device (or the simulator) is there, and a small
//! reproducible generator.
#![allow(dead_code)]

use aot_runtime::backend::Backend;
use aot_runtime::backend::CpuStorage;
use aot_runtime::cuda::{is_available, CudaStorage};
use aot_runtime::layout::Layout;
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

/// The bits of every element, for exact comparisons.
/// The bits of every element, for exact comparisons.
pub fn bits(s: &CpuStorage) -> Vec<u64> {
    match s {
        CpuStorage::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        CpuStorage::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        CpuStorage::F16(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        CpuStorage::BF16(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        CpuStorage::I64(v) => v.iter().map(|&x| x as u64).collect(),
        CpuStorage::Bool(v) => v.iter().map(|&x| u64::from(x)).collect(),
    }
}

/// A device buffer holding `s`.
pub fn upload(s: &CpuStorage) -> CudaStorage {
    CudaStorage::from_host("test", &CUDA, s.clone()).unwrap()
}

/// The whole device buffer back on the host.
pub fn download(s: &CudaStorage) -> CpuStorage {
    s.to_host("test", &Layout::contiguous(&[s.len()]), s.dtype()).unwrap()
}

/// A strided layout of `shape` (dims in a random order, some strided by
/// 2) with an offset, and the buffer length it needs.
pub fn layout(g: &mut Gen, shape: &[usize]) -> (Layout, usize) {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, g.below(i + 1));
    }
    let mut stride = vec![0; shape.len()];
    let mut step = 1 + g.below(2);
    for &d in order.iter().rev() {
        stride[d] = step;
        step *= shape[d].max(1) * (1 + g.below(2));
    }
    let l = Layout::new(shape.to_vec(), stride, g.below(3));
    let len = l.storage_extent() + g.below(2);
    (l, len)
}
