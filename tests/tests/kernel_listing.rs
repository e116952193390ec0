//! `kernels` / `kernels_for` list every kernel a call runs, not only the
//! kernel stage's: the copies of a write into a slice of an argument, the
//! reduction of a view, the epilogue's copies back, eager reductions,
//! matmuls (cuBLAS calls on CUDA), elementwise ops outside the kernel
//! stage, gathers and scans.
//!
//! On the simulated device (`AOT_CUDA_SIM=1`, feature `cuda`), the listing
//! matches what a call launches: as many kernels as the device launched
//! for the same call (its launch counter, plus its cuBLAS calls), and the
//! listing made from a run on the CPU names the same kernels with the same
//! CUDA sources as the one made from the run on the device.

use aot_runtime::prelude::*;
use aot_runtime::{Arg, KernelSource};

/// A KV-cache write, then a read: a copy into a narrowed slice of an
/// argument in place, then a reduction over a narrowed view of it.
#[aot_fn]
fn kv(cache: &mut Tensor, x: &Tensor, len: i64) -> Tensor {
    cache.narrow(0, 0, 2).copy_(x);
    cache.narrow(0, 0, len).sum_dim(&[0], false)
}

/// A training call: the W3 loss at a small size (`examples/train_mlp.rs`).
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn mlp_loss(x: &Tensor, y_onehot: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, w3: &Tensor, b3: &Tensor) -> Tensor {
    let h1 = (x.matmul(w1) + b1).relu();
    let h2 = (h1.matmul(w2) + b2).relu();
    let logits = h2.matmul(w3) + b3;
    let nll = -(logits.log_softmax(1) * y_onehot).sum_dim(&[1], false);
    nll.mean()
}

/// Ops that run as primitives outside the kernel stage: a lone eager
/// reduction, clamp, a cast, a transposed matmul operand, a gather, a
/// scan, an index reduction, the loss and their backwards.
#[aot_fn]
fn primitives(x: &Tensor, w: &Tensor, ids: &Tensor, y: &Tensor) -> Tensor {
    let h = x.matmul(&w.t()).clamp(-2.0, 2.0);
    let e = ids.embedding(w).cumsum(1).sum_dim(&[1], false).sum_dim(&[1], false);
    let v = h.var_dim(&[1], 1, false) + h.to_dtype(DType::F64).to_dtype(DType::F32).softmax(1).amax_dim(&[1], false);
    let pick = h.argmax(1, false).to_dtype(DType::F32);
    h.cross_entropy(y) + (e + v + pick).mean()
}

#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).expect("randn")
}

fn names(ks: &[KernelSource]) -> Vec<&str> {
    ks.iter().map(|k| k.name.as_str()).collect()
}

#[test]
fn the_kv_cache_write_and_read_list_their_copies_and_reduction() {
    let mut cache = randn(&[5, 3], 1);
    let x = randn(&[2, 3], 2);
    let before = cache.to_vec::<f32>().expect("values");
    let args = [Arg::from(&mut cache), Arg::from(&x), Arg::I64(4)];
    let cpu = kv::compiled().kernels(&args).expect("the CPU listing");
    let got = names(&cpu);
    // The copy of `x` into the slice (and the plan's copies of the cache
    // around it), then the reduction of the narrowed view.
    assert!(got.iter().filter(|n| **n == "aot_to_float32").count() >= 1, "{got:?}");
    assert_eq!(got.last(), Some(&"aot_sum_dim"), "{got:?}");
    assert!(cpu.iter().all(|k| !k.source.is_empty()), "{cpu:?}");
    assert!(cpu.iter().any(|k| k.source.contains("copy_strided")), "the copy's native routine is named: {cpu:?}");
    assert_eq!(cache.to_vec::<f32>().expect("values"), before, "the listing ran on copies");
    #[cfg(feature = "cuda")]
    {
        let cuda = kv::compiled().kernels_for(&[Arg::from(&mut cache), Arg::from(&x), Arg::I64(4)], &Device::Cuda(0)).expect("CUDA");
        assert_eq!(names(&cuda), got, "the same kernels on both devices");
        for k in &cuda {
            assert!(k.source.contains(&format!("extern \"C\" __global__ void {}(", k.name)), "real CUDA C:\n{}", k.source);
        }
    }
}

#[test]
fn training_calls_list_their_matmuls_reductions_and_gradient_sums() {
    let p = |s: &[usize], seed| randn(s, seed).requires_grad_(true).expect("leaf");
    let (x, y) = (randn(&[8, 6], 1), randn(&[8, 3], 2));
    let params = [p(&[6, 5], 3), p(&[5], 4), p(&[5, 5], 5), p(&[5], 6), p(&[5, 3], 7), p(&[3], 8)];
    let args: Vec<Arg> = [&x, &y].into_iter().chain(&params).map(Arg::from).collect();
    let cpu = mlp_loss::compiled().kernels(&args).expect("listing");
    let got = names(&cpu);
    // Three products forward, five backward (no gradient of `x`).
    assert_eq!(got.iter().filter(|n| **n == "cpu_matmul").count(), 8, "{got:?}");
    // The loss's mean, and each bias's gradient, summed over the batch.
    assert_eq!(got.iter().filter(|n| **n == "aot_mean_dim").count(), 1, "{got:?}");
    assert_eq!(got.iter().filter(|n| **n == "aot_sum_dim").count(), 3, "{got:?}");
    assert!(params.iter().all(|p| p.grad().is_none()), "the listing ran on copies");
    #[cfg(feature = "cuda")]
    {
        let cuda = mlp_loss::compiled().kernels_for(&args, &Device::Cuda(0)).expect("CUDA");
        let gemms = names(&cuda).iter().filter(|n| **n == "cublasGemmStridedBatchedEx_float32").count();
        assert_eq!(gemms, 8, "{:?}", names(&cuda));
        assert_eq!(cuda.len(), cpu.len(), "{:?}", names(&cuda));
    }
}

/// The simulated device: listings against launches.
#[cfg(feature = "cuda")]
mod on_the_device {
    use super::*;
    use aot_runtime::testing::{cublas_gemms, host_round_trips};
    use aot_runtime::CompiledFn;
    use std::sync::Mutex;

    /// The counters are per process: one call at a time.
    static COUNTERS: Mutex<()> = Mutex::new(());

    /// Kernels launched and cuBLAS calls made by `f`.
    fn launched(f: impl FnOnce()) -> u64 {
        let (launches, gemms) = (host_round_trips().1, cublas_gemms());
        f();
        host_round_trips().1 - launches + cublas_gemms() - gemms
    }

    /// The arguments' tensors on `device` (leaves stay leaves).
    fn on(ts: &[Tensor], device: &Device) -> Vec<Tensor> {
        ts.iter()
            .map(|t| {
                let d = t.detach().and_then(|d| d.to_device(device)).expect("to_device");
                if t.requires_grad() {
                    d.requires_grad_(true).expect("leaf")
                } else {
                    d
                }
            })
            .collect()
    }

    /// Lists `f`'s call on CPU and on CUDA copies of `ts` (with the scalar
    /// arguments `rest`), checks that both listings agree and that the call
    /// on the device launches what its listing says; returns the listing.
    fn check(what: &str, f: &CompiledFn, ts: &[Tensor], rest: &[Arg<'static>]) -> Vec<KernelSource> {
        let _one = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
        let cuda = Device::Cuda(0);
        fn args<'a>(ts: &'a [Tensor], rest: &[Arg<'static>]) -> Vec<Arg<'a>> {
            ts.iter().map(Arg::from).chain(rest.iter().copied()).collect()
        }
        let args = |ts| args(ts, rest);
        let predicted = f.kernels_for(&args(ts), &cuda).expect("listed from the CPU");
        let dev = on(ts, &cuda);
        let listed = f.kernels_for(&args(&dev), &cuda).expect("listed from the device");
        assert_eq!(names(&listed), names(&predicted), "{what}: the device ran what the CPU run predicts");
        for (a, b) in listed.iter().zip(&predicted) {
            assert_eq!(a.source, b.source, "{what}: the source of `{}`", a.name);
        }
        // A warm call first: the listing's run made the plan.
        let outs = f.__call(&args(&dev)).expect("call");
        let n = launched(|| {
            let outs = f.__call(&args(&dev)).expect("call");
            if let [o] = &outs[..] {
                if o.requires_grad() {
                    o.backward().expect("backward");
                }
            }
        });
        drop(outs);
        assert_eq!(n, listed.len() as u64, "{what}: launched {n}, listed {:?}", names(&listed));
        listed
    }

    #[test]
    fn listings_match_what_the_device_launches() {
        if !aot_runtime::cuda::is_available() {
            assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
            eprintln!("skipped: no CUDA device (AOT_CUDA_SIM=1 simulates one)");
            return;
        }
        let kv_listed = check("kv", kv::compiled(), &[randn(&[5, 3], 1), randn(&[2, 3], 2)], &[Arg::I64(4)]);
        assert_eq!(names(&kv_listed).last(), Some(&"aot_sum_dim"));
        let leaf = |s: &[usize], seed| randn(s, seed).requires_grad_(true).expect("leaf");
        let mut ts = vec![randn(&[8, 6], 1), randn(&[8, 3], 2)];
        ts.extend([leaf(&[6, 5], 3), leaf(&[5], 4), leaf(&[5, 5], 5), leaf(&[5], 6), leaf(&[5, 3], 7), leaf(&[3], 8)]);
        check("mlp_loss", mlp_loss::compiled(), &ts, &[]);
        let ids = Tensor::from_vec(vec![0i64, 2, 1, 3, 3, 0, 1, 2], &[4, 2], &Device::Cpu).expect("ids");
        let y = Tensor::from_vec(vec![1i64, 0, 3, 2], &[4], &Device::Cpu).expect("targets");
        let ts = [randn(&[4, 3], 9), leaf(&[4, 3], 10), ids, y];
        check("primitives", primitives::compiled(), &ts, &[]);
        let ts = [ts[0].clone(), ts[1].detach().expect("detach"), ts[2].clone(), ts[3].clone()];
        check("primitives (inference)", primitives::compiled(), &ts, &[]);
        let sgd = check(
            "sgd_momentum",
            sgd_momentum::compiled(),
            &[randn(&[6, 4], 11), randn(&[6, 4], 12), randn(&[6, 4], 13)],
            &[Arg::F64(0.1), Arg::F64(0.9)],
        );
        assert_eq!(sgd.len(), 1, "one in-place kernel: {:?}", names(&sgd));
    }
}
