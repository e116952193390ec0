//! `arange` on the CUDA backend (`cuda/arange.rs`): the buffer is made by
//! a kernel on the device, with the CPU backend's bits for every dtype and
//! for integer, fractional, negative and empty ranges, and eager
//! `Tensor::arange` on a CUDA device runs it without a host round trip.
//! Runs on the simulated device (`AOT_CUDA_SIM=1`, feature `cuda`);
//! elsewhere it says it is skipped.
#![cfg(feature = "cuda")]

mod cuda_common;

use aot_runtime::backend::Backend;
use aot_runtime::backend::CpuStorage;
use aot_runtime::cuda::CudaStorage;
use aot_runtime::testing::host_round_trips;
use aot_runtime::{DType, Device, Tensor};
use cuda_common::{bits, download, on, CUDA, DTYPES};

const RANGES: [(f64, f64, f64); 6] =
    [(0.0, 7.0, 1.0), (0.0, 1.0, 0.3), (5.0, -3.0, -2.5), (-1.5, 2.0, 0.25), (3.0, 3.0, 1.0), (1e6, 1e6 + 40.0, 3.0)];

fn count(start: f64, end: f64, step: f64) -> usize {
    ((end - start) / step).ceil().max(0.0) as usize
}

#[test]
fn arange_matches_the_cpu_bit_for_bit() {
    if !on() {
        return;
    }
    for dtype in DTYPES {
        for (start, end, step) in RANGES {
            let n = count(start, end, step);
            let cpu = <CpuStorage as Backend>::arange("arange", &Device::Cpu, dtype, n, start, step).unwrap();
            let cuda = <CudaStorage as Backend>::arange("arange", &CUDA, dtype, n, start, step).unwrap();
            assert_eq!(bits(&cpu), bits(&download(&cuda)), "{dtype:?} [{start}, {end}) step {step}");
        }
    }
}

#[test]
fn eager_arange_runs_on_the_device() {
    if !on() {
        return;
    }
    let before = host_round_trips().0;
    let t = Tensor::arange(0.0, 1.0, 0.3, DType::F32, &CUDA).unwrap();
    assert_eq!(host_round_trips().0, before, "arange ran through the host");
    assert_eq!(t.device(), CUDA);
    assert_eq!(t.to_device(&Device::Cpu).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.3, 0.6, 0.9]);
    // errors are the eager function's, before anything is allocated
    assert!(Tensor::arange(0.0, 1.0, 0.0, DType::F32, &CUDA).is_err());
}
