//! W3 (issue 13): one training step of the MLP 784-1024-1024-10, batch 256,
//! f32, on aot (compiled, the `#[aot_fn]` functions of
//! `examples/train_mlp.rs`) and on candle (its autograd through `Var` and
//! `backward`, the momentum update with its ops), in one run.
//!
//! A step is the forward pass (matmul + bias + relu twice, the logits), the
//! loss `-(log_softmax(logits) * y_onehot).sum(1).mean()`, the backward
//! pass, and the SGD momentum update of the 6 parameters. The bench
//! alternates the two libraries step by step after a warm-up and reports
//! the median time per step, GFLOP/s, the ratio aot/candle, and the ratio
//! to the sgemm-peak bound of the issue (8.9 ms: 2.86 GFLOP at 320 GFLOP/s).
//!
//! It also times the `gemm` crate alone on the step's matrix shapes (one
//! call each, operands laid out as the step has them), on one thread and on
//! two, with its AVX2/FMA kernels and with the AVX-512 ones aot uses: the
//! ceiling of what aot can reach.
//!
//! Cargo unifies features: in this crate candle-core's `gemm` 0.19 gets
//! the `x86-v4` feature (AVX-512) that aot-runtime enables, so candle runs
//! faster here than with its default build (its matmuls are a small part
//! of its step; see the README).
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w3`
//! (`W3_STEPS=n` sets the number of timed steps; `W3_ONLY=aot` or
//! `W3_ONLY=candle` times one library alone, for a profiler.)

use aot_runtime::prelude::*;
use candle_core::{Device as CDevice, Tensor as CTensor, Var, D};
use std::hint::black_box;
use std::time::Instant;

const IN: usize = 784;
const HIDDEN: usize = 1024;
const CLASSES: usize = 10;
const BATCH: usize = 256;
const LR: f64 = 0.02;
const MOMENTUM: f64 = 0.9;
/// The count of floating-point operations per step (it includes
/// the gradient of the input, which neither library computes: the step
/// itself does 2.45 GFLOP of matmuls).
const GFLOP: f64 = 2.86;
/// The bound: `GFLOP` at the 320 GFLOP/s sgemm peak of its machine.
const PEAK_MS: f64 = 8.9;
const WARMUP: usize = 5;

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

struct AotStep {
    x: Tensor,
    y: Tensor,
    params: Vec<Tensor>,
    bufs: Vec<Tensor>,
}

impl AotStep {
    fn new(x: &[f32], y: &[f32]) -> Result<AotStep> {
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
        Ok(AotStep { x, y, params, bufs })
    }

    fn step(&mut self) -> std::result::Result<f32, Box<dyn std::error::Error>> {
        let [w1, b1, w2, b2, w3, b3] = &self.params[..] else { return Err("six parameters".into()) };
        let loss = forward_loss(&self.x, &self.y, w1, b1, w2, b2, w3, b3)?;
        for p in &self.params {
            p.set_grad(None);
        }
        loss.backward()?;
        for (p, buf) in self.params.iter_mut().zip(self.bufs.iter_mut()) {
            let g = p.grad().ok_or("a parameter got no gradient")?;
            sgd_momentum(p, buf, &g, LR, MOMENTUM)?;
        }
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One `gemm` shape: `m x k` times `k x n`, each operand row-major or
/// transposed (a column-major view, as the backward's transposes are).
struct Shape {
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    lhs_t: bool,
    rhs_t: bool,
}

const SHAPES: [Shape; 8] = [
    Shape { name: "fwd x@w1", m: BATCH, k: IN, n: HIDDEN, lhs_t: false, rhs_t: false },
    Shape { name: "fwd h1@w2", m: BATCH, k: HIDDEN, n: HIDDEN, lhs_t: false, rhs_t: false },
    Shape { name: "fwd h2@w3", m: BATCH, k: HIDDEN, n: CLASSES, lhs_t: false, rhs_t: false },
    Shape { name: "bwd x^T@g1", m: IN, k: BATCH, n: HIDDEN, lhs_t: true, rhs_t: false },
    Shape { name: "bwd h1^T@g2", m: HIDDEN, k: BATCH, n: HIDDEN, lhs_t: true, rhs_t: false },
    Shape { name: "bwd h2^T@g3", m: HIDDEN, k: BATCH, n: CLASSES, lhs_t: true, rhs_t: false },
    Shape { name: "bwd g2@w2^T", m: BATCH, k: HIDDEN, n: HIDDEN, lhs_t: false, rhs_t: true },
    Shape { name: "bwd g3@w3^T", m: BATCH, k: CLASSES, n: HIDDEN, lhs_t: false, rhs_t: true },
];

/// Median ms of one call of `gemm_fn` on `s` (`$par` a `Parallelism` of
/// that crate): a macro because the two `gemm` versions have distinct types.
macro_rules! time_gemm {
    ($krate:ident, $s:expr, $par:expr) => {{
        let s: &Shape = $s;
        let a = vec![0.5f32; s.m * s.k];
        let b = vec![0.25f32; s.k * s.n];
        let mut c = vec![0.0f32; s.m * s.n];
        // (row stride, column stride) of a row-major `r x c` or of the
        // transpose of a row-major `c x r`
        let strides = |rows: usize, cols: usize, t: bool| if t { (1isize, rows as isize) } else { (cols as isize, 1isize) };
        let (ars, acs) = strides(s.m, s.k, s.lhs_t);
        let (brs, bcs) = strides(s.k, s.n, s.rhs_t);
        let mut call = || {
            // SAFETY: `a` holds m*k elements read at i*ars + p*acs (i < m,
            // p < k), `b` holds k*n read at p*brs + j*bcs, `c` holds m*n
            // written at i*n + j; all in bounds, `c` is disjoint from both,
            // and f32 is a type `gemm` supports.
            unsafe {
                $krate::gemm(
                    s.m,
                    s.n,
                    s.k,
                    c.as_mut_ptr(),
                    1,
                    s.n as isize,
                    false,
                    a.as_ptr(),
                    acs,
                    ars,
                    b.as_ptr(),
                    bcs,
                    brs,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    $par,
                )
            }
        };
        call();
        let mut t: Vec<f64> = (0..15)
            .map(|_| {
                let st = Instant::now();
                call();
                st.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        black_box(&c);
        median(&mut t)
    }};
}

/// GFLOP/s of `gemm` alone on the step's shapes: 0.18, whose AVX-512
/// kernels need nightly Rust (so it runs AVX2/FMA ones, as 0.19 does
/// without its `x86-v4` feature), and 0.19 with `x86-v4` (AVX-512, what
/// aot uses), each on 1 and 2 threads.
fn gemm_ceiling() {
    println!("gemm alone, median of 15 single calls, GFLOP/s on 1 | 2 threads:   gemm 0.18 (FMA)  |  0.19 x86-v4 (AVX-512)");
    let mut total = [0.0f64; 4];
    for s in &SHAPES {
        let flop = 2.0 * (s.m * s.k * s.n) as f64;
        let t = [
            time_gemm!(gemm, s, gemm::Parallelism::None),
            time_gemm!(gemm, s, gemm::Parallelism::Rayon(2)),
            time_gemm!(gemm19, s, gemm19::Parallelism::None),
            time_gemm!(gemm19, s, gemm19::Parallelism::Rayon(2)),
        ];
        for (acc, ms) in total.iter_mut().zip(t) {
            *acc += ms;
        }
        let layout = format!("{}{}", if s.lhs_t { "T" } else { "N" }, if s.rhs_t { "T" } else { "N" });
        let g = |ms: f64| flop / ms / 1e6;
        println!(
            "  {:<12} {:>4}x{:<4}x{:>4} {layout}  {:>6.1} | {:>6.1}   {:>6.1} | {:>6.1}",
            s.name,
            s.m,
            s.k,
            s.n,
            g(t[0]),
            g(t[1]),
            g(t[2]),
            g(t[3])
        );
    }
    println!(
        "  the step's 8 matmuls alone, ms on 1 | 2 threads: gemm 0.18 {:.2} | {:.2}, gemm 0.19 {:.2} | {:.2}",
        total[0], total[1], total[2], total[3]
    );
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let steps: usize = std::env::var("W3_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(31);
    let (x, y) = batch_data();
    let mut aot = AotStep::new(&x, &y)?;
    let mut candle = CandleStep::new(&x, &y)?;
    let timed = |f: &mut dyn FnMut() -> std::result::Result<f32, Box<dyn std::error::Error>>| {
        let st = Instant::now();
        let loss = f()?;
        black_box(loss);
        Ok::<f64, Box<dyn std::error::Error>>(st.elapsed().as_secs_f64() * 1e3)
    };
    if let Ok(only) = std::env::var("W3_ONLY") {
        let mut t = Vec::new();
        for i in 0..WARMUP + steps {
            let ms = match only.as_str() {
                "aot" => timed(&mut || aot.step())?,
                "candle" => timed(&mut || Ok(candle.step()?))?,
                _ => return Err("W3_ONLY is aot or candle".into()),
            };
            if i >= WARMUP {
                t.push(ms);
            }
        }
        println!("{only}: {:.2} ms/step (median of {steps})", median(&mut t));
        return Ok(());
    }
    let (mut ta, mut tc) = (Vec::new(), Vec::new());
    let (mut first, mut last) = ([0.0f32; 2], [0.0f32; 2]);
    for i in 0..WARMUP + steps {
        let a = timed(&mut || {
            let l = aot.step()?;
            (if i == 0 { &mut first } else { &mut last })[0] = l;
            Ok(l)
        })?;
        let c = timed(&mut || {
            let l = candle.step()?;
            (if i == 0 { &mut first } else { &mut last })[1] = l;
            Ok(l)
        })?;
        if i >= WARMUP {
            ta.push(a);
            tc.push(c);
        }
    }
    let (a, c) = (median(&mut ta), median(&mut tc));
    println!(
        "W3: MLP {IN}-{HIDDEN}-{HIDDEN}-{CLASSES}, batch {BATCH}, f32, one SGD-momentum training step; median of {steps} after {WARMUP} warm-up, {} cores",
        cores()
    );
    println!("  loss over the steps: aot {:.4} -> {:.4}, candle {:.4} -> {:.4}", first[0], last[0], first[1], last[1]);
    for (name, ms) in [("aot compiled", a), ("candle", c)] {
        println!(
            "  {name:<13} {ms:>7.2} ms/step  {:>6.1} GFLOP/s  {:.2}x the {PEAK_MS} ms sgemm-peak bound",
            GFLOP / ms * 1e3,
            ms / PEAK_MS
        );
    }
    println!("  ratio aot/candle {:.3}x (candle/aot {:.2}x; the target is candle/aot >= 4.5x)", a / c, c / a);
    gemm_ceiling();
    Ok(())
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
