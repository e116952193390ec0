//! The CUDA backend on the simulated device (`AOT_CUDA_SIM=1`, feature
//! `cuda`): every eager op on `Device::Cuda(0)` gives the CPU backend's
//! results, elementwise float ops through rendered kernels (checked bit
//! for bit, and counted), the rest through the host for now. `.ci/run`
//! runs this file with the simulator on; elsewhere it says it is skipped.
#![cfg(feature = "cuda")]

use aot_runtime::cuda::{host_round_trips, is_available};
use aot_runtime::prelude::*;

const CUDA: Device = Device::Cuda(0);

fn on() -> bool {
    if !is_available() {
        assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
        eprintln!("skipped: no CUDA device (set AOT_CUDA_SIM=1 to simulate one)");
    }
    is_available()
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::F64 => t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect(),
        DType::F16 => t.to_vec::<half::f16>().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::BF16 => t.to_vec::<half::bf16>().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
        DType::I64 => t.to_vec::<i64>().unwrap().iter().map(|&x| x as u64).collect(),
        DType::Bool => t.to_vec::<bool>().unwrap().iter().map(|&x| u64::from(x)).collect(),
    }
}

fn same(cpu: &Tensor, cuda: &Tensor, what: &str) {
    close(cpu, cuda, 0, what);
}

/// Equal within `ulps` units in the last place (0: bit for bit).
fn close(cpu: &Tensor, cuda: &Tensor, ulps: u64, what: &str) {
    assert_eq!(cuda.device(), CUDA, "{what}");
    assert_eq!(cpu.shape(), cuda.shape(), "{what}");
    assert_eq!(cpu.stride(), cuda.stride(), "{what}: eager's layout on both devices");
    let (want, got) = (bits(cpu), bits(&cuda.to_device(&Device::Cpu).unwrap()));
    let far = want.iter().zip(&got).filter(|(w, g)| w.abs_diff(**g) > ulps).count();
    assert_eq!(far, 0, "{what}: {far} elements differ by more than {ulps} ulps:\n{want:?}\n{got:?}");
}

fn randn(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).and_then(|t| t.to_dtype(dtype)).unwrap()
}

#[test]
fn tensors_move_between_devices_in_every_dtype() {
    if !on() {
        return;
    }
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::Bool] {
        let x = randn(&[3, 4], DType::F32, 1).to_dtype(dtype).unwrap().t().unwrap();
        let c = x.to_device(&CUDA).unwrap();
        assert_eq!(c.device(), CUDA);
        assert_eq!(bits(&c.to_device(&Device::Cpu).unwrap()), bits(&x), "{dtype:?}");
    }
    let z = Tensor::zeros(&[2, 3], DType::F32, &CUDA).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    let f = Tensor::full(&[2], 2.5, DType::F64, &CUDA).unwrap();
    assert_eq!(f.to_vec::<f64>().unwrap(), vec![2.5, 2.5]);
}

#[test]
fn elementwise_float_ops_run_rendered_kernels_bit_for_bit() {
    if !on() {
        return;
    }
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        // The same transposed view on both devices.
        let a_base = randn(&[5, 7], dtype, 2);
        let (a, ca) = (a_base.t().unwrap(), a_base.to_device(&CUDA).unwrap().t().unwrap());
        let b = randn(&[5], dtype, 3);
        let cb = b.to_device(&CUDA).unwrap();
        let (_, launched) = host_round_trips();
        // f64's transcendental functions call the platform's libm on the
        // device (the renderer's module doc), so they may differ in the
        // last place; everything else is bit for bit.
        let libm = if dtype == DType::F64 { 2 } else { 0 };
        close(&a.tanh().unwrap(), &ca.tanh().unwrap(), libm, "tanh of a transposed view");
        close(&a.gelu().unwrap(), &ca.gelu().unwrap(), libm, "gelu");
        close(&a.sigmoid().unwrap(), &ca.sigmoid().unwrap(), libm, "sigmoid");
        same(&(&a * &b).unwrap(), &(&ca * &cb).unwrap(), "mul, broadcast");
        same(&(&a - 0.25).unwrap(), &(&ca - 0.25).unwrap(), "sub scalar");
        same(&a.maximum(&b).unwrap(), &ca.maximum(&cb).unwrap(), "maximum");
        assert!(host_round_trips().1 >= launched + 6, "{dtype:?}: each op launched a kernel");
        // In place, through a view: the kernel writes the base's buffer.
        let x = randn(&[4, 5], dtype, 4);
        let cx = x.to_device(&CUDA).unwrap();
        x.narrow(1, 1, 3).unwrap().add_(&b.narrow(0, 0, 3).unwrap()).unwrap();
        cx.narrow(1, 1, 3).unwrap().add_(&cb.narrow(0, 0, 3).unwrap()).unwrap();
        same(&x, &cx, "add_ into a narrowed view");
        x.mul_(3.0).unwrap();
        cx.mul_(3.0).unwrap();
        same(&x, &cx, "mul_ by a scalar");
    }
}

#[test]
fn other_ops_agree_through_the_host() {
    if !on() {
        return;
    }
    let a = randn(&[4, 6], DType::F32, 5);
    let w = randn(&[6, 3], DType::F32, 6);
    let (ca, cw) = (a.to_device(&CUDA).unwrap(), w.to_device(&CUDA).unwrap());
    same(&a.matmul(&w).unwrap(), &ca.matmul(&cw).unwrap(), "matmul");
    same(&a.sum_dim(&[1], false).unwrap(), &ca.sum_dim(&[1], false).unwrap(), "sum_dim");
    same(&a.log_softmax(1).unwrap(), &ca.log_softmax(1).unwrap(), "log_softmax");
    same(&a.gt(0.0).unwrap(), &ca.gt(0.0).unwrap(), "gt");
    same(&a.to_dtype(DType::F16).unwrap(), &ca.to_dtype(DType::F16).unwrap(), "cast");
    same(&a.t().unwrap().contiguous().unwrap(), &ca.t().unwrap().contiguous().unwrap(), "contiguous");
}

#[test]
fn gradients_on_the_device_match_the_cpu() {
    if !on() {
        return;
    }
    let x = randn(&[4, 6], DType::F32, 7);
    let w0 = randn(&[6, 3], DType::F32, 8);
    let loss = |x: &Tensor, w: &Tensor| -> Tensor {
        let h = x.matmul(w).unwrap().tanh().unwrap();
        (&h * &h).unwrap().sum().unwrap()
    };
    let w = w0.clone().requires_grad_(true).unwrap();
    loss(&x, &w).backward().unwrap();
    let cw = w0.to_device(&CUDA).unwrap().requires_grad_(true).unwrap();
    loss(&x.to_device(&CUDA).unwrap(), &cw).backward().unwrap();
    same(&w.grad().unwrap(), &cw.grad().unwrap(), "the gradient of w");
}

#[test]
fn device_errors_are_clear() {
    if !on() {
        return;
    }
    let a = Tensor::ones(&[2], DType::F32, &Device::Cpu).unwrap();
    let c = a.to_device(&CUDA).unwrap();
    assert!(matches!(&a + &c, Err(AotError::DeviceMismatch { .. })), "{:?}", &a + &c);
    let e = Tensor::zeros(&[2], DType::F32, &Device::Cuda(7));
    assert!(matches!(e, Err(AotError::DeviceUnavailable { .. })), "{e:?}");
}
