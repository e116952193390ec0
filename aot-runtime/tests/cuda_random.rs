//! Random fills on CUDA (feature `cuda`): the device computes the
//! generator's Philox stream itself, and gives the CPU's bits for every
//! distribution and dtype, advancing the generator alike. Runs on the
//! simulated device (`AOT_CUDA_SIM=1`, as `.ci/run` does); the kernels also
//! compile with NVRTC and ptxas when `AOT_CUDA_TOOLS` is set.
#![cfg(feature = "cuda")]

mod cuda_common;

use aot_ir::kernel::random::{render_random, RandomKind};
use aot_runtime::cuda::nvrtc;
use aot_runtime::prelude::*;
use aot_runtime::testing::host_round_trips;
use cuda_common::{on, CUDA, DTYPES};

fn bits(t: &Tensor) -> Vec<u64> {
    let t = t.to_device(&Device::Cpu).unwrap();
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::F64 => t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect(),
        DType::F16 => t.to_vec::<half::f16>().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::BF16 => t.to_vec::<half::bf16>().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::I64 => t.to_vec::<i64>().unwrap().iter().map(|&x| x as u64).collect(),
        DType::Bool => t.to_vec::<bool>().unwrap().iter().map(|&x| u64::from(x)).collect(),
    }
}

/// `f` run on the CPU and on CUDA from the same generator state: the same
/// bits, and the same state after.
fn same_stream(what: &str, f: impl Fn(&Device) -> Tensor) {
    // The tests of this file share the global generator.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    aot_runtime::set_rng_state(11, 5);
    let cpu = f(&Device::Cpu);
    let after_cpu = aot_runtime::rng_state();
    aot_runtime::set_rng_state(11, 5);
    let cuda = f(&CUDA);
    assert_eq!(cuda.device(), CUDA, "{what}");
    assert_eq!(aot_runtime::rng_state(), after_cpu, "{what}: the generator advanced differently");
    assert_eq!(bits(&cpu), bits(&cuda), "{what}");
}

#[test]
fn random_fills_give_the_cpus_bits_on_the_device() {
    if !on() {
        return;
    }
    let before = host_round_trips();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for n in [1usize, 3, 4, 5, 8, 1001] {
            let what = format!("{dtype:?} x{n}");
            same_stream(&format!("randn {what}"), |d| Tensor::randn(&[n], dtype, d, 7).unwrap());
            same_stream(&format!("rand {what}"), |d| Tensor::rand(&[n], dtype, d, 7).unwrap());
            same_stream(&format!("rand_like {what}"), |d| Tensor::zeros(&[n], dtype, d).unwrap().rand_like().unwrap());
            same_stream(&format!("dropout {what}"), |d| {
                aot_runtime::no_grad(|| Tensor::ones(&[n], dtype, d).unwrap().dropout(0.3).unwrap())
            });
        }
    }
    let after = host_round_trips();
    assert_eq!(after.0, before.0, "random fills ran on the host");
    assert!(after.1 > before.1, "no kernel was launched");
}

#[test]
fn a_large_fill_matches_the_cpus_parallel_draw() {
    if !on() {
        return;
    }
    for dtype in [DType::F32, DType::F64] {
        same_stream(&format!("randn {dtype:?}"), |d| Tensor::randn(&[300, 700], dtype, d, 3).unwrap());
        same_stream(&format!("rand {dtype:?}"), |d| Tensor::zeros(&[300, 701], dtype, d).unwrap().rand_like().unwrap());
    }
}

#[test]
fn random_kernels_compile_with_nvrtc_and_ptxas() {
    if let Err(why) = nvrtc::nvrtc_status() {
        assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let mut unit = String::new();
    for kind in [RandomKind::Uniform, RandomKind::Normal, RandomKind::Dropout] {
        for dtype in DTYPES {
            let r = render_random(kind, dtype);
            // Each kernel compiles alone, and all of them as one unit.
            nvrtc::compile_ptx(&r.name, &r.source, "compute_80").unwrap_or_else(|e| panic!("{e}\n{}", r.source));
            unit.push_str(&r.source);
        }
    }
    nvrtc::compile_and_assemble("random", &unit).unwrap_or_else(|e| panic!("{e}"));
}
