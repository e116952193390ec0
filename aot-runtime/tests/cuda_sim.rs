//! The CUDA backend on the simulated device (`AOT_CUDA_SIM=1`, feature
//! `cuda`): every eager op on `Device::Cuda(0)` gives the CPU backend's
//! results, elementwise float ops and reductions through rendered kernels
//! (checked bit for bit, or within a reduction's tolerance, and counted),
//! the rest through the host for now; compiled calls run the kernel
//! stage's fused kernels. `.ci/run` runs this file with the simulator on;
//! elsewhere it says it is skipped.
#![cfg(feature = "cuda")]

mod cuda_common;

use aot_runtime::cuda::is_simulated;
use aot_runtime::prelude::*;
use aot_runtime::testing::host_round_trips;
use cuda_common::{on, CUDA};
use std::sync::{Mutex, MutexGuard};

/// The tests count launches and host round trips, which are per process:
/// they run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
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

/// Values that went through a matmul: the simulator's (on the host) are the
/// CPU's bits; cuBLAS on a real GPU sums in another order, so there they
/// are compared within 1e-5 relative (f32; cuBLAS differed by up to 24
/// ulps on an H100).
fn same_after_matmul(cpu: &Tensor, cuda: &Tensor, what: &str) {
    if is_simulated() {
        return same(cpu, cuda, what);
    }
    assert_eq!((cpu.shape(), cpu.stride()), (cuda.shape(), cuda.stride()), "{what}");
    let f64s = |t: &Tensor| t.to_device(&Device::Cpu).unwrap().to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    for (i, (w, g)) in f64s(cpu).iter().zip(f64s(cuda)).enumerate() {
        assert!((w - g).abs() <= 1e-5 * w.abs().max(1.0), "{what}: element {i}: cpu {w}, cuda {g}");
    }
}

fn randn(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).and_then(|t| t.to_dtype(dtype)).unwrap()
}

#[test]
fn tensors_move_between_devices_in_every_dtype() {
    let _one = serial();
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
    let _one = serial();
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

/// Matmul (on the host on the simulator, which has no cuBLAS), a reduction and a
/// softmax (kernels), comparisons, casts and copies.
#[test]
fn other_ops_agree() {
    let _one = serial();
    if !on() {
        return;
    }
    let a = randn(&[4, 6], DType::F32, 5);
    let w = randn(&[6, 3], DType::F32, 6);
    let (ca, cw) = (a.to_device(&CUDA).unwrap(), w.to_device(&CUDA).unwrap());
    same_after_matmul(&a.matmul(&w).unwrap(), &ca.matmul(&cw).unwrap(), "matmul");
    same(&a.sum_dim(&[1], false).unwrap(), &ca.sum_dim(&[1], false).unwrap(), "sum_dim");
    same(&a.log_softmax(1).unwrap(), &ca.log_softmax(1).unwrap(), "log_softmax");
    same(&a.gt(0.0).unwrap(), &ca.gt(0.0).unwrap(), "gt");
    same(&a.to_dtype(DType::F16).unwrap(), &ca.to_dtype(DType::F16).unwrap(), "cast");
    same(&a.t().unwrap().contiguous().unwrap(), &ca.t().unwrap().contiguous().unwrap(), "contiguous");
}

#[test]
fn gradients_on_the_device_match_the_cpu() {
    let _one = serial();
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
    same_after_matmul(&w.grad().unwrap(), &cw.grad().unwrap(), "the gradient of w");
}

#[test]
fn device_errors_are_clear() {
    let _one = serial();
    if !on() {
        return;
    }
    let a = Tensor::ones(&[2], DType::F32, &Device::Cpu).unwrap();
    let c = a.to_device(&CUDA).unwrap();
    assert!(matches!(&a + &c, Err(AotError::DeviceMismatch { .. })), "{:?}", &a + &c);
    let e = Tensor::zeros(&[2], DType::F32, &Device::Cuda(7));
    assert!(matches!(e, Err(AotError::DeviceUnavailable { .. })), "{e:?}");
}

/// Equal to the CPU's result within what summing in another order changes
/// (f64 accumulators, rounded once), NaN where it is NaN; same layout.
fn near(cpu: &Tensor, cuda: &Tensor, what: &str) {
    assert_eq!(cuda.device(), CUDA, "{what}");
    assert_eq!((cpu.shape(), cpu.stride(), cpu.dtype()), (cuda.shape(), cuda.stride(), cuda.dtype()), "{what}");
    let cuda = cuda.to_device(&Device::Cpu).unwrap();
    if !cpu.dtype().is_float() {
        assert_eq!(bits(cpu), bits(&cuda), "{what}");
        return;
    }
    let f64s = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let tol = match cpu.dtype() {
        DType::F64 => 1e-12,
        DType::F32 => 1e-6,
        DType::F16 => 2e-3,
        _ => 1e-2,
    };
    for (i, (w, g)) in f64s(cpu).iter().zip(f64s(&cuda)).enumerate() {
        let ok = if w.is_nan() { g.is_nan() } else { w == &g || (w - g).abs() <= tol * w.abs().max(1.0) };
        assert!(ok, "{what}: element {i}: cpu {w}, cuda {g}");
    }
}

/// A small deterministic generator of shapes and dims.
struct Gen(u64);

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// `x` on both devices: a permuted view (strided) of a random buffer of
/// `dtype`, with every seventh element NaN when `nan` (float dtypes).
fn operand(g: &mut Gen, shape: &[usize], dtype: DType, nan: bool) -> (Tensor, Tensor) {
    let rank = shape.len();
    // The buffer holds the reversed shape; reversing the dims views it back.
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let n: usize = shape.iter().product();
    let vals: Vec<f32> = (0..n).map(|i| if nan && i % 7 == 3 { f32::NAN } else { (g.below(2001) as f32 - 1000.0) / 250.0 }).collect();
    let base = Tensor::from_vec(vals, &rev, &Device::Cpu).unwrap().to_dtype(dtype).unwrap();
    let perm: Vec<i64> = (0..rank as i64).rev().collect();
    let cpu = base.permute(&perm).unwrap();
    let cuda = base.to_device(&CUDA).unwrap().permute(&perm).unwrap();
    (cpu, cuda)
}

#[test]
fn reductions_run_as_kernels_and_match_the_cpu() {
    let _one = serial();
    if !on() {
        return;
    }
    let mut g = Gen(7);
    let (host0, launched0) = host_round_trips();
    let mut launches = 0;
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        // Rank 3 for f32/f64 (long rows take a block, short ones a warp),
        // rank 2 for the half types.
        let (rank, cases) = if matches!(dtype, DType::F32 | DType::F64) { (3, 5) } else { (2, 3) };
        for case in 0..cases {
            let shape: Vec<usize> = (0..rank)
                .map(|_| [1, 3, 5, 70, 130][g.below(5) as usize])
                .map(|n: usize| n.min(if rank == 3 { 40 } else { 300 }))
                .collect();
            let (x, cx) = operand(&mut g, &shape, dtype, case % 2 == 1);
            let d = g.below(rank as u64) as i64;
            let dims: Vec<i64> = if case == 2 { vec![0, rank as i64 - 1] } else { vec![d] };
            let keep = case % 2 == 0;
            let what = |op: &str| format!("{op} of {dtype:?} {shape:?} over {dims:?} (keepdim {keep})");
            near(&x.sum().unwrap(), &cx.sum().unwrap(), &what("sum"));
            near(&x.mean().unwrap(), &cx.mean().unwrap(), &what("mean"));
            near(&x.sum_dim(&dims, keep).unwrap(), &cx.sum_dim(&dims, keep).unwrap(), &what("sum_dim"));
            near(&x.mean_dim(&dims, keep).unwrap(), &cx.mean_dim(&dims, keep).unwrap(), &what("mean_dim"));
            near(&x.amax_dim(&dims, keep).unwrap(), &cx.amax_dim(&dims, keep).unwrap(), &what("amax_dim"));
            let c = (case % 2) as i64;
            near(&x.var_dim(&dims, c, keep).unwrap(), &cx.var_dim(&dims, c, keep).unwrap(), &what("var_dim"));
            near(&x.softmax(d).unwrap(), &cx.softmax(d).unwrap(), &what("softmax"));
            near(&x.log_softmax(-1).unwrap(), &cx.log_softmax(-1).unwrap(), &what("log_softmax"));
            launches += 8;
        }
    }
    // Integer and bool sums give i64; an integer maximum stays i64.
    let (x, cx) = operand(&mut g, &[6, 9], DType::F32, false);
    let (i, ci) = ((&x * 100.0).unwrap().to_dtype(DType::I64).unwrap(), (&cx * 100.0).unwrap().to_dtype(DType::I64).unwrap());
    near(&i.sum_dim(&[1], false).unwrap(), &ci.sum_dim(&[1], false).unwrap(), "i64 sum_dim");
    near(&i.amax_dim(&[0], true).unwrap(), &ci.amax_dim(&[0], true).unwrap(), "i64 amax_dim");
    let (b, cb) = (x.gt(0.0).unwrap(), cx.gt(0.0).unwrap());
    near(&b.sum().unwrap(), &cb.sum().unwrap(), "bool sum");
    launches += 3;
    // Empty reductions: a sum of nothing is 0, a mean NaN; a 0-d softmax is 1.
    let (e, ce) = operand(&mut g, &[3, 0], DType::F32, false);
    near(&e.sum_dim(&[1], false).unwrap(), &ce.sum_dim(&[1], false).unwrap(), "empty sum");
    near(&e.mean_dim(&[1], true).unwrap(), &ce.mean_dim(&[1], true).unwrap(), "empty mean");
    let s = Tensor::full(&[], 2.5, DType::F32, &Device::Cpu).unwrap();
    near(&s.softmax(0).unwrap(), &s.to_device(&CUDA).unwrap().softmax(0).unwrap(), "0-d softmax");
    launches += 3;
    let (host, launched) = host_round_trips();
    assert_eq!(host, host0, "no reduction ran on the host");
    assert!(launched - launched0 >= launches, "{} launches for {launches} reductions", launched - launched0);
    // What eager refuses is refused the same way.
    let err = |r: Result<Tensor>| r.map(|_| ()).unwrap_err().to_string();
    assert_eq!(err(ce.amax_dim(&[1], false)), err(e.amax_dim(&[1], false)));
    assert_eq!(err(ci.mean()), err(i.mean()));
}

#[aot_fn]
fn w2(x: &Tensor, y: &Tensor) -> Tensor {
    ((x * 1.5 + y).tanh() * 2.0 - 1.0).sigmoid()
}

#[aot_fn]
fn row_logsumexp(x: &Tensor, b: &Tensor) -> Tensor {
    ((x * 2.0 + b).exp().sum_dim(&[1], false) + 1.0).log()
}

#[aot_fn]
fn scaled_log_softmax(x: &Tensor, s: f64) -> Tensor {
    (x * s).log_softmax(1) * 2.0
}

/// Compiled calls on the device run the kernel stage's kernels fused
/// (rendered and launched as they are): an elementwise kernel gives the
/// CPU's bits, reduction kernels the CPU's values within tolerance.
#[test]
fn compiled_kernels_run_fused_on_the_device() {
    let _one = serial();
    if !on() {
        return;
    }
    let stats = aot_runtime::testing::kernel_stats;
    for dtype in [DType::F32, DType::F16] {
        let (x, y) = (randn(&[37, 6], dtype, 21), randn(&[6], dtype, 22));
        let (cx, cy) = (x.to_device(&CUDA).unwrap(), y.to_device(&CUDA).unwrap());
        let want = w2(&x, &y).unwrap();
        let (before, host0) = (stats(), host_round_trips().0);
        let got = w2(&cx, &cy).unwrap();
        let after = stats();
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 0), "{dtype:?}: the elementwise kernel ran fused");
        same(&want, &got, "the fused elementwise kernel");
        let xt = randn(&[90, 5], dtype, 23);
        let (xt, cxt) = (xt.t().unwrap(), xt.to_device(&CUDA).unwrap().t().unwrap());
        let b = randn(&[5, 1], dtype, 24);
        let cb = b.to_device(&CUDA).unwrap();
        let before = stats();
        let got = row_logsumexp(&cxt, &cb).unwrap();
        let mid = stats();
        assert_eq!((mid.0 - before.0, mid.1 - before.1), (1, 0), "{dtype:?}: the reduction kernel ran fused");
        near(&row_logsumexp(&xt, &b).unwrap(), &got, "sum_dim with a prologue and an epilogue, transposed input");
        let before = stats();
        let got = scaled_log_softmax(&cxt, 0.75).unwrap();
        let after = stats();
        assert!(after.0 > before.0 && after.1 == before.1, "{dtype:?}: log_softmax ran fused: {before:?} -> {after:?}");
        near(&scaled_log_softmax(&xt, 0.75).unwrap(), &got, "log_softmax with a scalar parameter in its prologue");
        assert_eq!(host_round_trips().0, host0, "{dtype:?}: nothing ran on the host");
    }
}
