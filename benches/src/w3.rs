//! W3: one training step of the MLP 784-1024-1024-10, batch 256,
//! f32, on aot (the `#[aot_fn]` functions of `examples/train_mlp.rs`,
//! compiled, and the same functions run eagerly through `run_eager`) and on
//! candle (its autograd through `Var` and `backward`, the momentum update
//! with its ops), in one run. A W3 step is a `train_mlp` step, so its
//! steps/s is 1000 / (ms per step).
//!
//! A step is the forward pass (matmul + bias + relu twice, the logits), the
//! loss `-(log_softmax(logits) * y_onehot).sum(1).mean()`, the backward
//! pass, and the SGD momentum update of the 6 parameters. The bench first
//! measures each variant's peak heap over a few steps, then alternates the
//! variants step by step after a warm-up and reports the median time per
//! step, GFLOP/s, the ratios, and the ratio to the sgemm-peak bound of the
//! issue (8.9 ms: 2.86 GFLOP at 320 GFLOP/s).
//!
//! Cargo unifies features: in this crate candle-core's `gemm` 0.19 gets
//! the `x86-v4` feature (AVX-512) that aot-runtime enables, so candle runs
//! faster here than with its default build (its matmuls are a small part
//! of its step; see the README).

use crate::{alloc, cores, median, mib, BenchResult, PEAK_NOTE};
use aot_runtime::prelude::*;
use candle_core::{Device as CDevice, Tensor as CTensor, Var, D};
use std::hint::black_box;
use std::time::Instant;

pub const IN: usize = 784;
pub const HIDDEN: usize = 1024;
pub const CLASSES: usize = 10;
pub const BATCH: usize = 256;
const LR: f64 = 0.02;
const MOMENTUM: f64 = 0.9;
/// The count of floating-point operations per step (it includes
/// the gradient of the input, which neither library computes: the step
/// itself does 2.45 GFLOP of matmuls).
const GFLOP: f64 = 2.86;
/// The bound: `GFLOP` at the 320 GFLOP/s sgemm peak of its machine.
const PEAK_MS: f64 = 8.9;
const WARMUP: usize = 5;
/// Steps per variant over which its peak heap is taken (after one more).
const MEMORY_STEPS: usize = 2;
/// The variants, in [`Report`]'s order; `W3_ONLY` takes `aot`, `eager` or `candle`.
pub const VARIANTS: [&str; 3] = ["aot compiled", "aot eager", "candle"];

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

/// W3's figures, per variant in [`VARIANTS`]' order: median ms per step,
/// the loss at the first and the last step, and the peak heap in bytes
/// (`None` without the counting allocator).
pub struct Report {
    pub steps: usize,
    pub ms: [f64; 3],
    pub first_loss: [f32; 3],
    pub last_loss: [f32; 3],
    pub peak: [Option<usize>; 3],
    /// Median ms of a step's six `sgd_momentum` calls, compiled and eager.
    pub optimizer_ms: [f64; 2],
}

impl Report {
    pub fn compiled_ms(&self) -> f64 {
        self.ms[0]
    }
    pub fn eager_ms(&self) -> f64 {
        self.ms[1]
    }
    pub fn candle_ms(&self) -> f64 {
        self.ms[2]
    }
    /// The ratio: candle's step time over aot's compiled one.
    pub fn speedup(&self) -> f64 {
        self.candle_ms() / self.compiled_ms()
    }

    pub fn print(&self) {
        println!(
            "W3: MLP {IN}-{HIDDEN}-{HIDDEN}-{CLASSES}, batch {BATCH}, f32, one SGD-momentum training step; median of {} after {WARMUP} warm-up, {} cores",
            self.steps,
            cores()
        );
        let losses: Vec<String> =
            (0..3).map(|i| format!("{} {:.4} -> {:.4}", VARIANTS[i], self.first_loss[i], self.last_loss[i])).collect();
        println!("  loss over the steps: {}", losses.join(", "));
        for ((name, ms), peak) in VARIANTS.iter().zip(self.ms).zip(self.peak) {
            println!(
                "  {name:<13} {ms:>7.2} ms/step  {:>6.1} steps/s  {:>6.1} GFLOP/s  {:.2}x the {PEAK_MS} ms sgemm-peak bound  peak {}",
                1e3 / ms,
                GFLOP / ms * 1e3,
                ms / PEAK_MS,
                mib(peak)
            );
        }
        let [oc, oe] = self.optimizer_ms;
        println!("  of which the six sgd_momentum calls: compiled {oc:.2} ms, eager {oe:.2} ms");
        let (a, c) = (self.compiled_ms(), self.candle_ms());
        println!(
            "  ratio aot/candle {:.3}x (candle/aot {:.2}x; the target is candle/aot >= 4.5x)  eager/compiled {:.2}x",
            a / c,
            c / a,
            self.eager_ms() / a
        );
        println!("  ({PEAK_NOTE})");
    }
}

/// The parameters' shapes and initial scales (He for the hidden layers).
fn param_specs() -> [(Vec<usize>, f64); 6] {
    let he = |fan_in: usize| (2.0 / fan_in as f64).sqrt();
    [
        (vec![IN, HIDDEN], he(IN)),
        (vec![HIDDEN], 0.0),
        (vec![HIDDEN, HIDDEN], he(HIDDEN)),
        (vec![HIDDEN], 0.0),
        (vec![HIDDEN, CLASSES], (1.0 / HIDDEN as f64).sqrt()),
        (vec![CLASSES], 0.0),
    ]
}

/// A fixed batch: Gaussian inputs and one-hot labels `i % CLASSES`.
fn batch_data() -> (Vec<f32>, Vec<f32>) {
    let x = (0..BATCH * IN).map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * 2.0).collect();
    let mut y = vec![0.0f32; BATCH * CLASSES];
    for (i, row) in y.chunks_exact_mut(CLASSES).enumerate() {
        row[(i * 7) % CLASSES] = 1.0;
    }
    (x, y)
}

/// aot's step, through the compiled functions or through `run_eager`.
struct AotStep {
    compiled: bool,
    x: Tensor,
    y: Tensor,
    params: Vec<Tensor>,
    bufs: Vec<Tensor>,
    /// Each step's ms in the optimizer calls.
    optimizer_ms: Vec<f64>,
}

impl AotStep {
    fn new(x: &[f32], y: &[f32], compiled: bool) -> Result<AotStep> {
        let dev = Device::Cpu;
        let mut params = Vec::new();
        for (i, (shape, scale)) in param_specs().into_iter().enumerate() {
            let t = if scale == 0.0 {
                Tensor::zeros(&shape, DType::F32, &dev)?
            } else {
                Tensor::randn(&shape, DType::F32, &dev, i as u64)?.mul(scale)?
            };
            params.push(t.requires_grad_(true)?);
        }
        let bufs = params.iter().map(|p| Tensor::zeros(&p.shape(), DType::F32, &dev)).collect::<Result<Vec<_>>>()?;
        let x = Tensor::from_vec(x.to_vec(), &[BATCH, IN], &dev)?;
        let y = Tensor::from_vec(y.to_vec(), &[BATCH, CLASSES], &dev)?;
        Ok(AotStep { compiled, x, y, params, bufs, optimizer_ms: Vec::new() })
    }

    fn loss(&self) -> BenchResult<Tensor> {
        let [w1, b1, w2, b2, w3, b3] = &self.params[..] else { return Err("six parameters".into()) };
        if self.compiled {
            return Ok(forward_loss(&self.x, &self.y, w1, b1, w2, b2, w3, b3)?);
        }
        let args: Vec<Arg> = [&self.x, &self.y, w1, b1, w2, b2, w3, b3].into_iter().map(Arg::from).collect();
        let mut out = forward_loss::compiled().run_eager(&args)?;
        Ok(out.pop().ok_or("forward_loss returned nothing")?)
    }

    fn step(&mut self) -> BenchResult<f32> {
        let loss = self.loss()?;
        for p in &self.params {
            p.set_grad(None);
        }
        loss.backward()?;
        let st = Instant::now();
        for (p, buf) in self.params.iter_mut().zip(self.bufs.iter_mut()) {
            let g = p.grad().ok_or("a parameter got no gradient")?;
            if self.compiled {
                sgd_momentum(p, buf, &g, LR, MOMENTUM)?;
            } else {
                let args = [Arg::from(&*p), Arg::from(&*buf), Arg::from(&g), Arg::F64(LR), Arg::F64(MOMENTUM)];
                sgd_momentum::compiled().run_eager(&args)?;
            }
        }
        self.optimizer_ms.push(st.elapsed().as_secs_f64() * 1e3);
        Ok(loss.item::<f32>()?)
    }
}

struct CandleStep {
    x: CTensor,
    y: CTensor,
    params: Vec<Var>,
    bufs: Vec<CTensor>,
}

impl CandleStep {
    fn new(x: &[f32], y: &[f32]) -> candle_core::Result<CandleStep> {
        let dev = CDevice::Cpu;
        let mut params = Vec::new();
        for (shape, scale) in param_specs() {
            let t = if scale == 0.0 {
                CTensor::zeros(shape, candle_core::DType::F32, &dev)?
            } else {
                CTensor::randn(0f32, scale as f32, shape, &dev)?
            };
            params.push(Var::from_tensor(&t)?);
        }
        let bufs = params.iter().map(|p| p.zeros_like()).collect::<candle_core::Result<Vec<_>>>()?;
        let x = CTensor::from_slice(x, (BATCH, IN), &dev)?;
        let y = CTensor::from_slice(y, (BATCH, CLASSES), &dev)?;
        Ok(CandleStep { x, y, params, bufs })
    }

    fn step(&mut self) -> candle_core::Result<f32> {
        let p = &self.params;
        let h1 = self.x.matmul(p[0].as_tensor())?.broadcast_add(p[1].as_tensor())?.relu()?;
        let h2 = h1.matmul(p[2].as_tensor())?.broadcast_add(p[3].as_tensor())?.relu()?;
        let logits = h2.matmul(p[4].as_tensor())?.broadcast_add(p[5].as_tensor())?;
        // log_softmax with candle-core's ops (candle-nn's is the same sequence)
        let max = logits.max_keepdim(D::Minus1)?;
        let shifted = logits.broadcast_sub(&max)?;
        let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let log_probs = shifted.broadcast_sub(&lse)?;
        let loss = (log_probs * &self.y)?.sum(1)?.neg()?.mean_all()?;
        let grads = loss.backward()?;
        for (var, buf) in self.params.iter().zip(self.bufs.iter_mut()) {
            let g = grads.get(var).ok_or_else(|| candle_core::Error::Msg("a parameter got no gradient".into()))?;
            *buf = ((&*buf * MOMENTUM)? + g)?;
            var.set(&(var.as_tensor() - (&*buf * LR)?)?)?;
        }
        loss.to_scalar::<f32>()
    }
}

/// The three variants, each on its own copy of the same problem.
struct Steps {
    compiled: AotStep,
    eager: AotStep,
    candle: CandleStep,
}

impl Steps {
    fn new() -> BenchResult<Steps> {
        let (x, y) = batch_data();
        Ok(Steps { compiled: AotStep::new(&x, &y, true)?, eager: AotStep::new(&x, &y, false)?, candle: CandleStep::new(&x, &y)? })
    }

    /// One step of variant `i` (in [`VARIANTS`]' order): its ms and loss.
    fn timed(&mut self, i: usize) -> BenchResult<(f64, f32)> {
        let st = Instant::now();
        let loss = match i {
            0 => self.compiled.step()?,
            1 => self.eager.step()?,
            _ => self.candle.step()?,
        };
        Ok((st.elapsed().as_secs_f64() * 1e3, black_box(loss)))
    }
}

/// Each variant's peak heap over `MEMORY_STEPS` steps after a first one,
/// candle first so that none of aot's cached buffers weighs on it.
fn peaks(s: &mut Steps, base: usize) -> BenchResult<[Option<usize>; 3]> {
    let mut peak = [None; 3];
    for i in [2, 0, 1] {
        s.timed(i)?;
        let (r, p) = alloc::peak_during(base, || (0..MEMORY_STEPS).try_for_each(|_| s.timed(i).map(drop)));
        r?;
        peak[i] = p;
    }
    Ok(peak)
}

/// Measures the peaks, then alternates the three variants step by step:
/// `WARMUP` steps, then `steps` timed ones.
pub fn run(steps: usize) -> BenchResult<Report> {
    let mut s = Steps::new()?;
    let base = alloc::live_bytes();
    let peak = peaks(&mut s, base)?;
    let mut t: [Vec<f64>; 3] = Default::default();
    let (mut first_loss, mut last_loss) = ([0.0f32; 3], [0.0f32; 3]);
    for step in 0..WARMUP + steps {
        if step == WARMUP {
            s.compiled.optimizer_ms.clear();
            s.eager.optimizer_ms.clear();
        }
        for (i, times) in t.iter_mut().enumerate() {
            let (ms, loss) = s.timed(i)?;
            if step == 0 {
                first_loss[i] = loss;
            }
            last_loss[i] = loss;
            if step >= WARMUP {
                times.push(ms);
            }
        }
    }
    let ms = [0, 1, 2].map(|i| median(&mut t[i]));
    let optimizer_ms = [median(&mut s.compiled.optimizer_ms), median(&mut s.eager.optimizer_ms)];
    Ok(Report { steps, ms, first_loss, last_loss, peak, optimizer_ms })
}

/// Times one variant alone (`aot`, `eager` or `candle`), for a profiler:
/// its median ms per step over `steps` after the warm-up.
pub fn run_only(name: &str, steps: usize) -> BenchResult<f64> {
    let i = match name {
        "aot" => 0,
        "eager" => 1,
        "candle" => 2,
        _ => return Err("W3_ONLY is aot, eager or candle".into()),
    };
    let mut s = Steps::new()?;
    let mut t = Vec::new();
    for step in 0..WARMUP + steps {
        let (ms, _) = s.timed(i)?;
        if step >= WARMUP {
            t.push(ms);
        }
    }
    Ok(median(&mut t))
}
