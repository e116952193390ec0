//! The CUDA sources of `kernels_for(&args, &Device::Cuda(0))`, without a
//! GPU: without the `cuda` feature they are `DeviceUnavailable`; with it,
//! every source compiles with the real NVRTC (all of them batched in one
//! translation unit, as the renderer allows) for `compute_80` and
//! `compute_90`, and the PTX assembles with ptxas for `sm_80` and `sm_90`.
//!
//! The NVRTC and ptxas come from `AOT_CUDA_TOOLS` (`.ci/cuda-tools`
//! installs them and prints the folder), or a CUDA toolkit. Without them
//! the compile test fails under CI and says why elsewhere.

use aot_runtime::prelude::*;
use aot_runtime::Arg;
#[cfg(feature = "cuda")]
use aot_runtime::KernelSource;

#[aot_fn]
fn w2(x: &Tensor) -> Tensor {
    ((x * 1.5 + 0.5).tanh() * 2.0 - 1.0).sigmoid()
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn mixed(a: &Tensor, b: &Tensor, s: f64) -> Tensor {
    let u = (a * b + a).relu().sqrt().exp().neg().abs().log();
    let v = (u.sin().cos() + b.gelu().silu()).square().reciprocal();
    (v.maximum(a).minimum(b) * s).pow(2.0).rsqrt() - a.pow(b.abs())
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn relu_layer(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    (x.matmul(w) + b).relu().relu().sum()
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn ints(a: &Tensor, b: &Tensor) -> Tensor {
    let m = (a * 3 + b).maximum(b).abs();
    a.neg().where_(&m.gt(b), 7)
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn layer(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    ((x.matmul(w) + b).tanh() * 0.5 + 0.5).gelu()
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn reductions(x: &Tensor) -> Tensor {
    let whole = x.sum() + x.mean();
    let rows = (x * 2.0).sum_dim(&[1], true).exp();
    let soft = x.softmax(1) + x.log_softmax(0);
    let var = x.var_dim(&[0], 1, false);
    ((soft * rows).sum_dim(&[0], false) + var + whole).mean_dim(&[0], false)
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn int_sums(a: &Tensor) -> Tensor {
    (a * 2).sum_dim(&[1], false).abs()
}

#[cfg(feature = "cuda")]
#[aot_fn]
fn noisy(x: &Tensor, w: &Tensor) -> Tensor {
    let h = x.matmul(w).dropout(0.2);
    (h + x.rand_like()).sum()
}

fn t(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).and_then(|t| t.to_dtype(dtype)).expect("randn")
}

/// The CUDA sources of the test functions, over dtypes and ranks, and of
/// training calls (forward, then backward kernels; the MLP's loss last);
/// one list per call.
#[cfg(feature = "cuda")]
fn sources() -> aot_runtime::Result<Vec<Vec<KernelSource>>> {
    let cuda = Device::Cuda(0);
    let mut all = Vec::new();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = t(&[3, 5], dtype, 1);
        all.push(w2::compiled().kernels_for(&[Arg::from(&x)], &cuda)?);
        let (a, b) = (t(&[4], dtype, 2), t(&[2, 3, 4], dtype, 3));
        all.push(mixed::compiled().kernels_for(&[Arg::from(&a), Arg::from(&b), Arg::from(0.5)], &cuda)?);
        let (mut p, mut m, g) = (t(&[6, 2], dtype, 4), t(&[6, 2], dtype, 5), t(&[6, 2], dtype, 6));
        all.push(
            sgd_momentum::compiled().kernels_for(&[Arg::from(&mut p), Arg::from(&mut m), Arg::from(&g), 0.1.into(), 0.9.into()], &cuda)?,
        );
        // sum, mean, sum_dim, mean_dim, softmax, log_softmax, var_dim.
        let x = t(&[3, 70], dtype, 13);
        all.push(reductions::compiled().kernels_for(&[Arg::from(&x)], &cuda)?);
    }
    let a = t(&[4, 3], DType::I64, 14);
    all.push(int_sums::compiled().kernels_for(&[Arg::from(&a)], &cuda)?);
    let x = t(&[8, 5], DType::F32, 7);
    let w = t(&[5, 3], DType::F32, 8).requires_grad_(true)?;
    let b = t(&[3], DType::F32, 9).requires_grad_(true)?;
    let training = layer::compiled().kernels_for(&[Arg::from(&x), Arg::from(&w), Arg::from(&b)], &cuda)?;
    assert!(w.grad().is_none(), "kernels_for wrote a gradient of the caller's tensor");
    all.push(training);
    // Bool masks and casts in a training backward (relu's), i64 kernels.
    let w = t(&[5, 3], DType::F32, 10).requires_grad_(true)?;
    all.push(relu_layer::compiled().kernels_for(&[Arg::from(&x), Arg::from(&w), Arg::from(&b)], &cuda)?);
    let (a, b) = (t(&[4, 3], DType::I64, 11), t(&[3], DType::I64, 12));
    all.push(ints::compiled().kernels_for(&[Arg::from(&a), Arg::from(&b)], &cuda)?);
    // Random fills: dropout's mask drawn in the forward and recomputed in
    // the backward from the generator state, and rand_like.
    for dtype in [DType::F32, DType::F16] {
        let (x, w) = (t(&[6, 6], dtype, 21), t(&[6, 6], dtype, 22).requires_grad_(true)?);
        let ks = noisy::compiled().kernels_for(&[Arg::from(&x), Arg::from(&w)], &cuda)?;
        let names: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
        let dropout = format!("aot_random_dropout_{}", if dtype == DType::F32 { "f32" } else { "f16" });
        assert_eq!(names.iter().filter(|n| **n == dropout).count(), 2, "drawn, then recomputed: {names:?}");
        assert!(names.iter().any(|n| n.starts_with("aot_random_uniform_")), "{names:?}");
        all.push(ks);
    }
    // The MLP's loss: a training call's forward and backward kernels.
    let x = t(&[16, 8], DType::F32, 15);
    let y = (t(&[16, 4], DType::F32, 16).gt(0.0)?).to_dtype(DType::F32)?;
    let params: Vec<Tensor> = [(&[8usize, 12][..], 17u64), (&[12], 18), (&[12, 4], 19), (&[4], 20)]
        .iter()
        .map(|(s, seed)| t(s, DType::F32, *seed).requires_grad_(true))
        .collect::<aot_runtime::Result<_>>()?;
    let mut args = vec![Arg::from(&x), Arg::from(&y)];
    args.extend(params.iter().map(Arg::from));
    all.push(forward_loss::compiled().kernels_for(&args, &cuda)?);
    Ok(all)
}

#[test]
fn cuda_sources_need_the_feature() {
    let x = t(&[3], DType::F32, 1);
    let got = w2::compiled().kernels_for(&[Arg::from(&x)], &Device::Cuda(0));
    if cfg!(feature = "cuda") {
        let k = got.expect("the cuda feature renders CUDA sources without a GPU");
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].name, "fused_mul_add_tanh_mul_sub_sigmoid_0");
        assert!(k[0].source.contains("extern \"C\" __global__ void fused_mul_add_tanh_mul_sub_sigmoid_0("), "{}", k[0].source);
    } else {
        assert!(matches!(got, Err(AotError::DeviceUnavailable { .. })), "{got:?}");
    }
}

#[cfg(feature = "cuda")]
#[test]
fn training_calls_list_forward_then_backward_kernels_for_cuda() {
    let x = t(&[8, 5], DType::F32, 7);
    let w = t(&[5, 3], DType::F32, 8).requires_grad_(true).expect("leaf");
    let b = t(&[3], DType::F32, 9).requires_grad_(true).expect("leaf");
    let args = [Arg::from(&x), Arg::from(&w), Arg::from(&b)];
    let cpu: Vec<String> = layer::compiled().kernels(&args).expect("cpu").into_iter().map(|k| k.name).collect();
    let cuda: Vec<String> = layer::compiled().kernels_for(&args, &Device::Cuda(0)).expect("cuda").into_iter().map(|k| k.name).collect();
    assert!(cpu.iter().filter(|n| n.starts_with("fused_")).count() >= 2, "forward and backward kernels: {cpu:?}");
    // The products are the CPU's gemm there and cuBLAS calls here.
    let cuda_as_cpu: Vec<&str> = cuda.iter().map(|n| if n.starts_with("cublasGemm") { "cpu_matmul" } else { n.as_str() }).collect();
    assert_eq!(cuda_as_cpu, cpu, "the same kernels, in the same order, on both devices");
    assert!(w.grad().is_none() && b.grad().is_none(), "kernels_for ran on copies");
}

#[cfg(feature = "cuda")]
#[test]
fn every_cuda_source_compiles_with_nvrtc_and_ptxas() {
    use aot_runtime::cuda::nvrtc;
    if let Err(why) = nvrtc::nvrtc_status() {
        assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let sources = sources().expect("kernel sources");
    let ptxas = nvrtc::ptxas().expect("ptxas next to NVRTC");
    let count: usize = sources.iter().map(Vec::len).sum();
    assert!(count >= 12, "{count} sources");
    // Reduction kernels are listed (and compiled below), the MLP's loss
    // among them, forward and backward.
    let reductions = sources.iter().flatten().filter(|k| k.source.contains("aot_row_reduce(")).count();
    assert!(reductions >= 20, "{reductions} reduction kernels");
    let loss = sources.last().expect("the loss's kernels");
    assert!(loss.iter().any(|k| k.name.contains("log_softmax")), "{:?}", loss.iter().map(|k| &k.name).collect::<Vec<_>>());
    assert!(loss.iter().filter(|k| k.source.contains("aot_row_reduce(")).count() >= 3, "forward and backward reductions");
    for (call, kernels) in sources.iter().enumerate() {
        for k in kernels {
            // Each source is complete by itself.
            nvrtc::compile_ptx(&k.name, &k.source, "compute_80").unwrap_or_else(|e| panic!("{e}\n{}", k.source));
        }
        // A call's kernels form one unit (the renderer guards its shared
        // helpers), each once: a kernel launched twice (an eager op of the
        // backward, say) is listed twice; one name with another source
        // (another dtype or rank) goes to a unit of its own.
        let mut units: Vec<Vec<&KernelSource>> = Vec::new();
        for k in kernels {
            if units.iter().flatten().any(|u| u.source == k.source) {
                continue;
            }
            match units.iter_mut().find(|u| u.iter().all(|u| u.name != k.name)) {
                Some(u) => u.push(k),
                None => units.push(vec![k]),
            }
        }
        for (i, u) in units.iter().enumerate() {
            let unit: String = u.iter().map(|k| k.source.as_str()).collect::<Vec<_>>().join("\n");
            assemble(&ptxas, &format!("call{call}_{i}"), &unit);
        }
    }
}

#[cfg(feature = "cuda")]
fn assemble(ptxas: &std::path::Path, name: &str, unit: &str) {
    aot_tests::cuda::assemble(ptxas, name, unit).unwrap_or_else(|e| panic!("{e}"));
}

#[cfg(feature = "cuda")]
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn forward_loss(x: &Tensor, y_onehot: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor) -> Tensor {
    let h1 = (x.matmul(w1) + b1).relu();
    let logits = h1.matmul(w2) + b2;
    let nll = -(logits.log_softmax(1) * y_onehot).sum_dim(&[1], false);
    nll.mean()
}

/// Compiled training steps on the simulated device (`AOT_CUDA_SIM=1`)
/// give the CPU's losses and parameters: its kernels compute the CPU's
/// bits, and the other primitives run on the host. On a real GPU cuBLAS's
/// matmul rounds differently, so there the values agree within 1e-5
/// relative.
#[cfg(feature = "cuda")]
#[test]
fn compiled_training_steps_on_the_simulated_device_match_the_cpu() {
    if !aot_runtime::cuda::is_available() {
        assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
        eprintln!("skipped: no CUDA device (AOT_CUDA_SIM=1 simulates one)");
        return;
    }
    let run = |device: &Device| -> (Vec<f32>, Vec<Vec<f32>>) {
        let on = |t: Tensor| t.to_device(device).expect("to_device");
        let x = on(t(&[16, 8], DType::F32, 1));
        let hot: Vec<f32> = (0..16 * 4).map(|i| if i % 4 == (i / 4) % 3 { 1.0 } else { 0.0 }).collect();
        let y = on(Tensor::from_vec(hot, &[16, 4], &Device::Cpu).expect("one-hot"));
        let mut params: Vec<Tensor> = [(&[8usize, 12][..], 2u64), (&[12], 3), (&[12, 4], 4), (&[4], 5)]
            .iter()
            .map(|(s, seed)| on((&t(s, DType::F32, *seed) * 0.3).expect("scale")).requires_grad_(true).expect("leaf"))
            .collect();
        let mut bufs: Vec<Tensor> = params.iter().map(|p| p.zeros_like().expect("zeros")).collect();
        let mut losses = Vec::new();
        for _ in 0..3 {
            let loss = forward_loss(&x, &y, &params[0], &params[1], &params[2], &params[3]).expect("forward");
            assert_eq!(loss.device(), *device);
            losses.push(loss.item::<f32>().expect("item"));
            loss.backward().expect("backward");
            for (p, b) in params.iter_mut().zip(&mut bufs) {
                let g = p.grad().expect("grad");
                sgd_momentum(p, b, &g, 0.1, 0.9).expect("sgd");
                p.set_grad(None);
            }
        }
        (losses, params.iter().map(|p| p.to_vec::<f32>().expect("values")).collect())
    };
    let (cpu_losses, cpu_params) = run(&Device::Cpu);
    let (cuda_losses, cuda_params) = run(&Device::Cuda(0));
    assert!(cpu_losses[2] < cpu_losses[0], "{cpu_losses:?}");
    if aot_runtime::cuda::is_simulated() {
        assert_eq!(cuda_losses, cpu_losses);
        assert_eq!(cuda_params, cpu_params);
    } else {
        let near = |a: &[f32], b: &[f32], what: &str| {
            assert_eq!(a.len(), b.len(), "{what}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{what}[{i}]: cuda {x}, cpu {y}");
            }
        };
        near(&cuda_losses, &cpu_losses, "losses");
        for (k, (c, p)) in cuda_params.iter().zip(&cpu_params).enumerate() {
            near(c, p, &format!("parameter {k}"));
        }
    }
}

/// The PTX cache: a second compile of the same source reads the disk.
#[cfg(feature = "cuda")]
#[test]
fn ptx_is_cached_on_disk() {
    use aot_runtime::cuda::nvrtc;
    if let Err(why) = nvrtc::nvrtc_status() {
        assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let x = t(&[3, 2], DType::F32, 1);
    let k = w2::compiled().kernels_for(&[Arg::from(&x)], &Device::Cuda(0)).expect("sources");
    // A source of its own (the first compile may find it cached already).
    let src = format!("{}\n// the PTX cache test\n", k[0].source);
    let first = nvrtc::compile_ptx_cached(&k[0].name, &src, "compute_80").expect("compile");
    let runs = aot_runtime::testing::nvrtc_runs();
    let second = nvrtc::compile_ptx_cached(&k[0].name, &src, "compute_80").expect("cached");
    assert_eq!(first, second);
    assert_eq!(aot_runtime::testing::nvrtc_runs(), runs, "the second compile ran NVRTC");
}

/// The contiguous path of an elementwise kernel loads and stores f32 four
/// at a time (16-byte accesses), in the PTX NVRTC makes of it.
#[cfg(feature = "cuda")]
#[test]
fn contiguous_f32_kernels_use_vector_loads_and_stores() {
    use aot_runtime::cuda::nvrtc;
    if let Err(why) = nvrtc::nvrtc_status() {
        assert!(std::env::var_os("CI").is_none(), "CI must install the CUDA tools (.ci/cuda-tools): {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let x = t(&[64, 64], DType::F32, 1);
    let k = w2::compiled().kernels_for(&[Arg::from(&x)], &Device::Cuda(0)).expect("sources");
    assert_eq!(k.len(), 1, "{k:?}");
    let ptx = nvrtc::compile_ptx(&k[0].name, &k[0].source, "compute_80").expect("compile");
    assert!(ptx.contains("ld.global.v4.f32"), "no 16-byte load in:\n{ptx}");
    assert!(ptx.contains("st.global.v4.f32"), "no 16-byte store in:\n{ptx}");
}
