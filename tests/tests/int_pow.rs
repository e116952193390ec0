//! Integer `pow` in compiled calls: with a tensor exponent it fuses into a
//! kernel (PyTorch's integer power, wrapping, negative exponents included)
//! and equals eager; with a scalar exponent it stays eager's op, so a
//! negative scalar exponent is eager's error.

use aot_runtime::prelude::*;
use aot_runtime::testing::kernel_stats;
use aot_runtime::Arg;

#[aot_fn]
fn pow_tt(a: &Tensor, b: &Tensor) -> Tensor {
    (a.pow(b) + a) * 3
}

#[aot_fn]
fn pow_ts(a: &Tensor, e: i64) -> Tensor {
    a.pow(e) + a
}

fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap()
}

#[test]
fn a_tensor_exponent_fuses_and_equals_eager() {
    let a = i64s(&[2, -3, 0, 1, -1, -1, 7, 3, 5, 2, 0, 10], &[4, 3]);
    let b = i64s(&[3, 2, 0, -2, -3, -4, 0, 40, 1, 63, -1, 19], &[4, 3]);
    let args = [Arg::from(&a), Arg::from(&b)];
    let kernels = pow_tt::compiled().kernels(&args).unwrap();
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    let (fused, _) = kernel_stats();
    let c = pow_tt(&a, &b).unwrap();
    assert!(kernel_stats().0 > fused, "the call ran its kernel fused");
    let e = pow_tt::compiled().run_eager(&args).unwrap().remove(0);
    assert_eq!(c.dtype(), DType::I64);
    assert_eq!(c.to_vec::<i64>().unwrap(), e.to_vec::<i64>().unwrap());
    // 3 ** 40 wraps; negative powers give 0 but for bases 1 and -1.
    let want: Vec<i64> = [8i64, 9, 1, 1, -1, 1, 1, 3i64.wrapping_pow(40), 5, 2i64.wrapping_pow(63), 0, 10i64.wrapping_pow(19)]
        .iter()
        .zip(a.to_vec::<i64>().unwrap())
        .map(|(p, x)| p.wrapping_add(x).wrapping_mul(3))
        .collect();
    assert_eq!(c.to_vec::<i64>().unwrap(), want);
}

#[test]
fn a_negative_scalar_exponent_is_eagers_error() {
    let a = i64s(&[2, 3], &[2]);
    let got = pow_ts(&a, -2).unwrap_err();
    let want = pow_ts::compiled().run_eager(&[Arg::from(&a), Arg::from(-2i64)]).unwrap_err();
    assert_eq!(got.to_string(), want.to_string());
    assert!(got.to_string().contains("negative integer powers"), "{got}");
    assert_eq!(pow_ts(&a, 3).unwrap().to_vec::<i64>().unwrap(), vec![10, 30]);
}

/// The same call on the CUDA device (the simulator in CI): the fused
/// kernel rendered as CUDA C gives the CPU's values.
#[cfg(feature = "cuda")]
#[test]
fn a_tensor_exponent_on_cuda_equals_the_cpu() {
    if !aot_runtime::cuda::is_available() {
        assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
        eprintln!("skipped: no CUDA device (AOT_CUDA_SIM=1 simulates one)");
        return;
    }
    let a = i64s(&[2, -3, 0, 1, -1, -1, 7, 3, 5, 2, 0, 10], &[4, 3]);
    let b = i64s(&[3, 2, 0, -2, -3, -4, 0, 40, 1, 63, -1, 19], &[4, 3]);
    let cuda = Device::Cuda(0);
    let (ca, cb) = (a.to_device(&cuda).unwrap(), b.to_device(&cuda).unwrap());
    let (host0, _) = aot_runtime::testing::host_round_trips();
    let c = pow_tt(&ca, &cb).unwrap();
    assert_eq!(c.device(), cuda);
    assert_eq!(aot_runtime::testing::host_round_trips().0, host0, "no op went through the host");
    assert_eq!(c.to_vec::<i64>().unwrap(), pow_tt(&a, &b).unwrap().to_vec::<i64>().unwrap());
    // eager's one-op kernels on the device agree too
    assert_eq!(ca.pow(&cb).unwrap().to_vec::<i64>().unwrap(), a.pow(&b).unwrap().to_vec::<i64>().unwrap());
}
