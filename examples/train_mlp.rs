//! Trains an MLP 784-1024-1024-10 (batch 256) with SGD and momentum on
//! synthetic data, every step through two `#[aot_fn]` functions:
//!
//! - `forward_loss`: the whole forward pass and the mean cross-entropy
//!   against one-hot targets, differentiated by `loss.backward()`;
//! - `sgd_step`: the optimizer step of every parameter (`sgd_momentum`:
//!   in-place updates of a parameter and its momentum buffer under
//!   `no_grad!`), in one call, so that on CUDA the six updates are one
//!   launch.
//!
//! The data are Gaussian blobs: each of the 10 classes has a fixed random
//! centre in 784 dimensions and every sample is its class centre plus
//! unit-variance noise, fresh for every batch. The classes overlap a lot
//! per pixel but are separable as a whole, so the loss can fall from
//! ln(10) ~ 2.30 towards 0.
//!
//! ```sh
//! cargo run --release --example train_mlp
//! # on CUDA (a GPU, or AOT_CUDA_SIM=1 for the simulated device):
//! cargo run --release --features cuda --example train_mlp -- --device cuda
//! ```
//!
//! `--device cpu|cuda|cuda:N` picks the device (default cpu); `--steps N`
//! the number of steps (default 300). A device that cannot be used is an
//! error that says why, and the exit status is non-zero.

use aot_runtime::prelude::*;
use indicatif::{ProgressBar, ProgressStyle};
use std::process::ExitCode;
use std::time::Instant;

const IN: usize = 784;
const HIDDEN: usize = 1024;
const CLASSES: usize = 10;
const BATCH: usize = 256;
const STEPS: usize = 300;
const LR: f64 = 0.02;
const MOMENTUM: f64 = 0.9;
/// Standard deviation of the class centres (the noise has 1).
const CENTRE_SCALE: f64 = 0.15;
const LOG_EVERY: usize = 25;

// `pub(crate)`: tests/tests/cuda_sources.rs includes this file and compiles
// these functions' CUDA kernels.

/// Forward pass (two ReLU hidden layers) and the mean cross-entropy
/// `-mean_i sum_c y_ic log_softmax(logits)_ic`.
#[aot_fn]
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward_loss(
    x: &Tensor,
    y_onehot: &Tensor,
    w1: &Tensor,
    b1: &Tensor,
    w2: &Tensor,
    b2: &Tensor,
    w3: &Tensor,
    b3: &Tensor,
) -> Tensor {
    let h1 = (x.matmul(w1) + b1).relu();
    let h2 = (h1.matmul(w2) + b2).relu();
    let logits = h2.matmul(w3) + b3;
    let nll = -(logits.log_softmax(1) * y_onehot).sum_dim(&[1], false);
    nll.mean()
}

/// PyTorch's `SGD(momentum=m)` step for one parameter:
/// `buf = m * buf + g; p -= lr * buf`.
#[aot_fn]
pub(crate) fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

/// The MLP's parameters (or their momentum buffers, or their gradients).
#[derive(TensorTree)]
pub(crate) struct Mlp {
    pub(crate) w1: Tensor,
    pub(crate) b1: Tensor,
    pub(crate) w2: Tensor,
    pub(crate) b2: Tensor,
    pub(crate) w3: Tensor,
    pub(crate) b3: Tensor,
}

impl Mlp {
    fn tensors(&self) -> [&Tensor; 6] {
        [&self.w1, &self.b1, &self.w2, &self.b2, &self.w3, &self.b3]
    }
    fn new([w1, b1, w2, b2, w3, b3]: [Tensor; 6]) -> Mlp {
        Mlp { w1, b1, w2, b2, w3, b3 }
    }
    /// `f` of each tensor.
    fn map<E>(&self, f: impl Fn(&Tensor) -> std::result::Result<Tensor, E>) -> std::result::Result<Mlp, E> {
        let [w1, b1, w2, b2, w3, b3] = self.tensors();
        Ok(Mlp::new([f(w1)?, f(b1)?, f(w2)?, f(b2)?, f(w3)?, f(b3)?]))
    }
}

/// The SGD step of every parameter, in one call (PyTorch's `foreach`
/// optimizers): on CUDA the six updates, of one code, are one launch.
#[aot_fn]
pub(crate) fn sgd_step(p: &mut Mlp, buf: &mut Mlp, g: &Mlp, lr: f64, momentum: f64) {
    sgd_momentum(&mut p.w1, &mut buf.w1, &g.w1, lr, momentum);
    sgd_momentum(&mut p.b1, &mut buf.b1, &g.b1, lr, momentum);
    sgd_momentum(&mut p.w2, &mut buf.w2, &g.w2, lr, momentum);
    sgd_momentum(&mut p.b2, &mut buf.b2, &g.b2, lr, momentum);
    sgd_momentum(&mut p.w3, &mut buf.w3, &g.w3, lr, momentum);
    sgd_momentum(&mut p.b3, &mut buf.b3, &g.b3, lr, momentum);
}

/// SplitMix64: the labels' random numbers, deterministic and dependency-free.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The synthetic task: one random centre per class.
struct Blobs {
    centres: Tensor, // [CLASSES, IN]
    rng: SplitMix64,
}

impl Blobs {
    fn new(dev: &Device) -> Result<Blobs> {
        let centres = Tensor::randn(&[CLASSES, IN], DType::F32, dev, 1234)?.mul(CENTRE_SCALE)?;
        Ok(Blobs { centres, rng: SplitMix64(42) })
    }

    /// A fresh batch `(x [BATCH, IN], y_onehot [BATCH, CLASSES])`.
    fn batch(&mut self, step: usize, dev: &Device) -> Result<(Tensor, Tensor)> {
        let mut onehot = vec![0.0f32; BATCH * CLASSES];
        for row in onehot.chunks_exact_mut(CLASSES) {
            row[(self.rng.next() % CLASSES as u64) as usize] = 1.0;
        }
        let y = Tensor::from_vec(onehot, &[BATCH, CLASSES], dev)?;
        let noise = Tensor::randn(&[BATCH, IN], DType::F32, dev, 1_000_000 + step as u64)?;
        let x = y.matmul(&self.centres)?.add(&noise)?;
        Ok((x, y))
    }
}

/// A leaf parameter: `randn * scale` (or zeros), requiring grad.
fn param(shape: &[usize], scale: f64, seed: u64, dev: &Device) -> Result<Tensor> {
    let t = if scale == 0.0 { Tensor::zeros(shape, DType::F32, dev)? } else { Tensor::randn(shape, DType::F32, dev, seed)?.mul(scale)? };
    t.requires_grad_(true)
}

/// The command line: `--device cpu|cuda|cuda:N`, `--steps N`.
fn options() -> std::result::Result<(Device, usize), String> {
    let usage = "usage: train_mlp [--device cpu|cuda|cuda:N] [--steps N]";
    let (mut dev, mut steps) = (Device::Cpu, STEPS);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value; {usage}"))?;
        match flag.as_str() {
            "--device" => {
                dev = match value.as_str() {
                    "cpu" => Device::Cpu,
                    "cuda" => Device::Cuda(0),
                    v => match v.strip_prefix("cuda:").map(str::parse) {
                        Some(Ok(i)) => Device::Cuda(i),
                        _ => return Err(format!("unknown device `{v}`; {usage}")),
                    },
                }
            }
            "--steps" => steps = value.parse().ok().filter(|&n| n > 0).ok_or(format!("--steps takes a positive count; {usage}"))?,
            _ => return Err(format!("unknown argument `{flag}`; {usage}")),
        }
    }
    Ok((dev, steps))
}

fn main() -> ExitCode {
    match train() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("train_mlp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn train() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let (dev, steps) = options()?;
    let he = |fan_in: usize| (2.0 / fan_in as f64).sqrt();
    let mut params = Mlp::new([
        param(&[IN, HIDDEN], he(IN), 1, &dev)?,
        param(&[HIDDEN], 0.0, 0, &dev)?,
        param(&[HIDDEN, HIDDEN], he(HIDDEN), 2, &dev)?,
        param(&[HIDDEN], 0.0, 0, &dev)?,
        param(&[HIDDEN, CLASSES], (1.0 / HIDDEN as f64).sqrt(), 3, &dev)?,
        param(&[CLASSES], 0.0, 0, &dev)?,
    ]);
    let mut momentum_bufs = params.map(|p| Tensor::zeros(&p.shape(), DType::F32, &dev))?;
    let n_params: usize = params.tensors().iter().map(|t| t.numel()).sum();
    println!(
        "MLP {IN}-{HIDDEN}-{HIDDEN}-{CLASSES} ({n_params} parameters) on {dev}, batch {BATCH}, {steps} steps of SGD (lr {LR}, momentum {MOMENTUM})"
    );

    let mut data = Blobs::new(&dev)?;
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40.cyan/blue} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")?.progress_chars("=> "),
    );

    let mut losses = Vec::with_capacity(steps);
    let start = Instant::now();
    for step in 1..=steps {
        let (x, y) = data.batch(step, &dev)?;
        let p = &params;
        let loss = forward_loss(&x, &y, &p.w1, &p.b1, &p.w2, &p.b2, &p.w3, &p.b3)?;
        for p in params.tensors() {
            p.set_grad(None); // zero_grad(set_to_none=True)
        }
        loss.backward()?;
        let grads = params.map(|p| p.grad().ok_or("a parameter got no gradient"))?;
        sgd_step(&mut params, &mut momentum_bufs, &grads, LR, MOMENTUM)?;

        let value = loss.item::<f32>()?;
        if !value.is_finite() {
            bar.abandon();
            return Err(format!("step {step}: the loss is {value}").into());
        }
        losses.push(value);
        bar.set_message(format!("loss {value:.4}"));
        bar.inc(1);
        if step == 1 || step % LOG_EVERY == 0 {
            let window = &losses[losses.len().saturating_sub(LOG_EVERY)..];
            let avg = window.iter().sum::<f32>() / window.len() as f32;
            // `suspend` prints even when stdout is no terminal (the bar is hidden then).
            bar.suspend(|| println!("step {step:>3}  loss {value:.4}  (mean of the last {:>2}: {avg:.4})", window.len()));
        }
    }
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();

    let first = losses[0];
    let last = *losses.last().ok_or("no steps")?;
    println!("{steps} steps in {secs:.1} s ({:.2} steps/s, {:.1} samples/s)", steps as f64 / secs, (steps * BATCH) as f64 / secs);
    let tail = &losses[losses.len().saturating_sub(LOG_EVERY)..];
    let tail_mean = tail.iter().sum::<f32>() / tail.len() as f32;
    println!("loss: first {first:.4}, final {last:.4} (mean of the last {} steps {tail_mean:.4})", tail.len());
    if last >= first {
        return Err(format!("training failed: the final loss {last:.4} is not below the first {first:.4}").into());
    }
    Ok(())
}
