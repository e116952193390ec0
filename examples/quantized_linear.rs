//! A weight-only int8-quantised linear layer as a tensor subclass, trained
//! through its scale with the codes frozen.
//!
//! `Int8Weight { q, scale, bits }` declares itself a tensor subclass
//! (`#[tensor_subclass]`): `q` holds the integer codes of a weight
//! `[out, in]`, `scale` one `f32` per output row, and `bits` is a
//! non-tensor attribute. The codes are `I64`: the runtime has no `i8`
//! dtype, so they take eight bytes each here; their values are those of
//! int8, -127..=127.
//!
//! - `quantize` (an `#[aot_fn]` returning an `Int8Weight`) picks each row's
//!   scale from its largest magnitude and rounds to the nearest code; the
//!   compiled graph returns two plain tensors and the call rewraps them
//!   into an `Int8Weight` with the attribute recorded in the body
//!   (`bits: 8`).
//! - `qloss` dequantises inside the function
//!   (`w.q.to_dtype(F32) * w.scale.unsqueeze(1)`), multiplies, and takes the
//!   mean squared error; its graph sees the subclass as two plain inputs,
//!   `w.q` and `w.scale`.
//! - Training: a float layer's weight is quantised, its scales halved (a
//!   badly calibrated start), and the scales are trained by SGD on a
//!   regression task with targets from the float layer. `loss.backward()`
//!   reaches only `w.scale` (the codes do not require grad), and the step
//!   is another `#[aot_fn]`, `sgd_scale`, an in-place update under
//!   `no_grad!`. The codes are checked unchanged at the end.
//!
//! ```sh
//! cargo run --release --example quantized_linear
//! ```
//!
//! `--steps N` sets the number of steps (default 300). It fails if the loss
//! does not fall or the codes changed.

use aot_runtime::prelude::*;
use aot_runtime::subclass::create_subclass_meta;
use std::process::ExitCode;
use std::time::Instant;

const IN: usize = 64;
const OUT: usize = 32;
const BATCH: usize = 128;
const STEPS: usize = 300;
/// The codes are up to 127, so the loss is steep in the scale.
const LR: f64 = 1e-5;
const LOG_EVERY: usize = 25;

/// An int8-quantised weight: `q[o, i] * scale[o]` is the weight.
#[derive(TensorTree)]
#[tensor_subclass(size = q, dtype = scale)]
struct Int8Weight {
    q: Tensor,
    scale: Tensor,
    #[skip]
    bits: u8,
}

/// Per-row symmetric quantisation, rounding half away from zero.
#[aot_fn]
fn quantize(w: &Tensor) -> Int8Weight {
    let scale = w.abs().amax_dim(&[1], false) / 127.0;
    let y = w / scale.unsqueeze(1);
    let half = y.ge(0.0).to_dtype(DType::F32) - 0.5;
    Int8Weight { q: (y + half).to_dtype(DType::I64), scale, bits: 8 }
}

/// The mean squared error of `x @ dequant(w).T + b` against `y`.
#[aot_fn]
fn qloss(x: &Tensor, w: &Int8Weight, b: &Tensor, y: &Tensor) -> Tensor {
    let wf = w.q.to_dtype(DType::F32) * w.scale.unsqueeze(1);
    (x.matmul(&wf.t()) + b - y).square().mean()
}

/// SGD on the scale; the codes are frozen.
#[aot_fn]
fn sgd_scale(w: &mut Int8Weight, g: &Tensor, lr: f64) {
    no_grad! {
        w.scale.sub_(&(g * lr));
    }
}

fn steps_arg() -> std::result::Result<usize, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(STEPS),
        [flag, n] if flag == "--steps" => n.parse().map_err(|_| format!("--steps takes a number, not `{n}`")),
        _ => Err("usage: quantized_linear [--steps N]".into()),
    }
}

fn run(steps: usize) -> Result<bool> {
    let dev = Device::Cpu;
    let w_float = Tensor::randn(&[OUT, IN], DType::F32, &dev, 1)?.mul(0.2)?;
    let b = Tensor::randn(&[OUT], DType::F32, &dev, 2)?.mul(0.1)?;
    let q0 = quantize(&w_float)?;
    let meta = &create_subclass_meta(&q0)[0];
    println!(
        "quantised a {OUT}x{IN} weight: {} {{ {} }}, bits = {}, outer size {:?}, outer dtype {}",
        meta.type_name,
        meta.inner.join(", "),
        q0.bits,
        meta.outer_size.as_deref().unwrap_or_default(),
        meta.outer_dtype.map_or("-".to_string(), |d| format!("{d:?}"))
    );
    let codes = q0.q.to_vec::<i64>()?;
    let mut w = Int8Weight { scale: q0.scale.mul(0.5)?.requires_grad_(true)?, ..q0 };
    let (mut first, mut last) = (f32::NAN, f32::NAN);
    let start = Instant::now();
    for step in 0..steps {
        let x = Tensor::randn(&[BATCH, IN], DType::F32, &dev, 100 + step as u64)?;
        let y = x.matmul(&w_float.t()?)?.add(&b)?;
        let loss = qloss(&x, &w, &b, &y)?;
        loss.backward()?;
        let g = w.scale.grad().ok_or_else(|| AotError::Unsupported { op: "quantized_linear", msg: "the scale got no gradient".into() })?;
        w.scale.set_grad(None);
        sgd_scale(&mut w, &g, LR)?;
        last = loss.item::<f32>()?;
        if step == 0 {
            first = last;
        }
        if step % LOG_EVERY == 0 || step + 1 == steps {
            println!("step {step:4}  loss {last:.6}");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{steps} steps in {secs:.2} s ({:.0} steps/s)", steps as f64 / secs);
    let unchanged = w.q.to_vec::<i64>()? == codes && w.q.grad().is_none();
    println!("codes unchanged and without gradient: {unchanged}");
    Ok(unchanged && last < first)
}

fn main() -> ExitCode {
    let steps = match steps_arg() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match run(steps) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("the loss did not fall, or the codes changed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
