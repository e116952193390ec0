//! `--device cuda` (feature `cuda`): W2 and W3 on a GPU, each against the
//! hardware's own bound rather than candle (whose CPU build this crate
//! uses):
//!
//! - W2, `sigmoid(tanh(x * 1.5 + 0.5) * 2 - 1)` on 16M f32, against the
//!   HBM bandwidth limit: its time for one read and one write of the
//!   tensor at the memory's peak (clock and bus width from the driver),
//!   and against a device copy (the bandwidth a kernel reaches);
//! - W3, a `train_mlp` training step (batch 256, 784-1024-1024-10),
//!   against cuBLAS's own time for the step's gemms (its three forward and
//!   five backward products, run alone through the same cuBLAS calls).
//!
//! Times include a synchronisation: a one-element download after the
//! timed work (the device's stream runs in order). On the simulated device
//! (`AOT_CUDA_SIM=1`), without a GPU or without the feature the binary
//! says why it cannot run these and exits cleanly.

use crate::BenchResult;

/// Whether the command line asks for CUDA: `--device cpu|cuda`.
pub fn wants_cuda() -> BenchResult<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["--device", "cpu"] => Ok(false),
        ["--device", "cuda"] => Ok(true),
        _ => Err(format!("unknown arguments {args:?}; usage: all [--device cpu|cuda]").into()),
    }
}

/// Why the CUDA benchmarks cannot run here, if they cannot.
fn unavailable() -> Option<String> {
    if !cfg!(feature = "cuda") {
        return Some(
            "this binary was built without the `cuda` feature \
             (cargo run --release --manifest-path benches/Cargo.toml --features cuda --bin all -- --device cuda)"
                .into(),
        );
    }
    if std::env::var("AOT_CUDA_SIM").is_ok_and(|v| !v.is_empty() && v != "0") {
        return Some("AOT_CUDA_SIM simulates the device on the CPU: it has no HBM and no cuBLAS to measure against".into());
    }
    if !aot_runtime::cuda::is_available() {
        return Some("no CUDA driver or no GPU was found on this machine".into());
    }
    None
}

/// Runs W2 and W3 on `Device::Cuda(0)` and prints them, or prints why not.
pub fn run(steps: usize) -> BenchResult<()> {
    if let Some(why) = unavailable() {
        println!("CUDA benchmarks not run: {why}.");
        return Ok(());
    }
    #[cfg(feature = "cuda")]
    gpu::run(steps)?;
    #[cfg(not(feature = "cuda"))]
    let _ = steps;
    Ok(())
}

#[cfg(feature = "cuda")]
mod gpu {
    use crate::{median, median_ms, BenchResult};
    use aot_runtime::prelude::*;
    use std::hint::black_box;
    use std::time::Instant;

    const CUDA: Device = Device::Cuda(0);
    const N: usize = 16 * 1024 * 1024;
    const REPS: usize = 15;
    const IN: usize = 784;
    const HIDDEN: usize = 1024;
    const CLASSES: usize = 10;
    const BATCH: usize = 256;
    const WARMUP: usize = 5;

    // W2's and `train_mlp`'s functions (as in w2.rs and w3.rs).
    #[aot_fn]
    fn w2(x: &Tensor) -> Tensor {
        ((x * 1.5 + 0.5).tanh() * 2.0 - 1.0).sigmoid()
    }

    #[aot_fn]
    #[allow(clippy::too_many_arguments)]
    fn forward_loss(x: &Tensor, y_onehot: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, w3: &Tensor, b3: &Tensor) -> Tensor {
        let h1 = (x.matmul(w1) + b1).relu();
        let h2 = (h1.matmul(w2) + b2).relu();
        let logits = h2.matmul(w3) + b3;
        let nll = -(logits.log_softmax(1) * y_onehot).sum_dim(&[1], false);
        nll.mean()
    }

    #[aot_fn]
    fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
        no_grad! {
            buf.mul_(momentum).add_(g);
            p.sub_(buf * lr);
        }
    }

    /// Waits for the device's queued work: a download behind it.
    fn sync() {
        Tensor::zeros(&[1], DType::F32, &CUDA).and_then(|t| t.to_vec::<f32>()).expect("a one-element download");
    }

    /// The HBM's peak in GB/s: double data rate times the bus width.
    fn hbm_gbs() -> Option<f64> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let ctx = cudarc::driver::CudaContext::new(0).ok()?;
        let khz = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).ok()?;
        let bits = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).ok()?;
        Some(2.0 * f64::from(khz) * 1e3 * f64::from(bits) / 8.0 / 1e9)
    }

    pub fn run(steps: usize) -> BenchResult<()> {
        let (host0, launches0) = aot_runtime::testing::host_round_trips();
        w2_vs_hbm()?;
        println!();
        w3_vs_cublas(steps)?;
        let (host, launches) = aot_runtime::testing::host_round_trips();
        println!("  ({} kernel launches, {} primitives through the host in these runs)", launches - launches0, host - host0);
        Ok(())
    }

    fn w2_vs_hbm() -> BenchResult<()> {
        let x = Tensor::randn(&[N], DType::F32, &CUDA, 7)?;
        let compiled = median_ms(REPS, || {
            black_box(w2(&x).expect("w2"));
            sync();
        });
        let copy = median_ms(REPS, || {
            black_box(x.copy().expect("copy"));
            sync();
        });
        let bytes = (2 * N * 4) as f64;
        let gbs = |ms: f64| bytes / (ms * 1e-3) / 1e9;
        println!("W2 on {CUDA}: sigmoid(tanh(x*1.5+0.5)*2-1) on {N} f32, median of {REPS}");
        println!("  aot compiled {compiled:8.3} ms  {:7.0} GB/s", gbs(compiled));
        println!("  device copy  {copy:8.3} ms  {:7.0} GB/s   (one read, one write)", gbs(copy));
        match hbm_gbs() {
            Some(peak) => {
                let bound = bytes / (peak * 1e9) * 1e3;
                println!(
                    "  HBM peak     {bound:8.3} ms  {peak:7.0} GB/s   compiled/bound {:.2}x, copy/bound {:.2}x",
                    compiled / bound,
                    copy / bound
                );
            }
            None => println!("  HBM peak: the driver did not report the memory clock and bus width"),
        }
        Ok(())
    }

    fn randn(shape: &[usize], scale: f64, seed: u64) -> Result<Tensor> {
        Tensor::randn(shape, DType::F32, &CUDA, seed)?.mul(scale)
    }

    /// The step's gemms alone: forward `a0·w1`, `a1·w2`, `a2·w3`; backward
    /// the weight gradients `aᵀ·dz` and the activation gradients `dz·wᵀ`.
    fn gemm_ms() -> Result<f64> {
        let (a0, a1, a2) = (randn(&[BATCH, IN], 1.0, 1)?, randn(&[BATCH, HIDDEN], 1.0, 2)?, randn(&[BATCH, HIDDEN], 1.0, 3)?);
        let (w1, w2, w3) = (randn(&[IN, HIDDEN], 0.05, 4)?, randn(&[HIDDEN, HIDDEN], 0.03, 5)?, randn(&[HIDDEN, CLASSES], 0.03, 6)?);
        let (z1, z2, z3) = (randn(&[BATCH, HIDDEN], 0.1, 7)?, randn(&[BATCH, HIDDEN], 0.1, 8)?, randn(&[BATCH, CLASSES], 0.1, 9)?);
        let gemms = || -> Result<()> {
            for (a, b) in [(&a0, &w1), (&a1, &w2), (&a2, &w3)] {
                black_box(a.matmul(b)?);
            }
            for (a, dz) in [(&a2, &z3), (&a1, &z2), (&a0, &z1)] {
                black_box(a.t()?.matmul(dz)?);
            }
            for (dz, w) in [(&z3, &w3), (&z2, &w2)] {
                black_box(dz.matmul(&w.t()?)?);
            }
            Ok(())
        };
        Ok(median_ms(REPS, || {
            gemms().expect("gemm");
            sync();
        }))
    }

    fn w3_vs_cublas(steps: usize) -> BenchResult<()> {
        let he = |fan_in: usize| (2.0 / fan_in as f64).sqrt();
        let specs: [(&[usize], f64); 6] = [
            (&[IN, HIDDEN], he(IN)),
            (&[HIDDEN], 0.0),
            (&[HIDDEN, HIDDEN], he(HIDDEN)),
            (&[HIDDEN], 0.0),
            (&[HIDDEN, CLASSES], 0.03),
            (&[CLASSES], 0.0),
        ];
        let mut params = Vec::new();
        for (i, (shape, scale)) in specs.iter().enumerate() {
            params.push(randn(shape, *scale, 10 + i as u64)?.requires_grad_(true)?);
        }
        let mut bufs = params.iter().map(Tensor::zeros_like).collect::<Result<Vec<_>>>()?;
        let x = randn(&[BATCH, IN], 1.0, 20)?;
        let hot: Vec<f32> = (0..BATCH * CLASSES).map(|i| f32::from(u8::from(i % CLASSES == (i / CLASSES) % CLASSES))).collect();
        let y = Tensor::from_vec(hot, &[BATCH, CLASSES], &CUDA)?;
        let mut times = Vec::new();
        let mut losses = Vec::new();
        for step in 0..WARMUP + steps {
            let t = Instant::now();
            let [w1, b1, w2, b2, w3, b3] = &params[..] else { unreachable!("six parameters") };
            let loss = forward_loss(&x, &y, w1, b1, w2, b2, w3, b3)?;
            loss.backward()?;
            for (p, b) in params.iter_mut().zip(bufs.iter_mut()) {
                let g = p.grad().ok_or("a parameter got no gradient")?;
                sgd_momentum(p, b, &g, 0.02, 0.9)?;
                p.set_grad(None);
            }
            // `item` downloads the loss: the step's work is done.
            losses.push(loss.item::<f32>()?);
            if step >= WARMUP {
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let step_ms = median(&mut times);
        let gemm = gemm_ms()?;
        println!("W3 on {CUDA}: a train_mlp step (batch {BATCH}, {IN}-{HIDDEN}-{HIDDEN}-{CLASSES}), median of {steps}");
        println!("  aot compiled step {step_ms:8.3} ms   loss {:.4} -> {:.4}", losses[0], losses[losses.len() - 1]);
        println!("  cuBLAS gemms      {gemm:8.3} ms   (the step's 8 products alone)   step/gemms {:.2}x", step_ms / gemm);
        Ok(())
    }
}
