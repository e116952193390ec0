//! W2 (issue 13): `sigmoid(tanh(x * 1.5 + 0.5) * 2 - 1)` on 16M f32, one
//! fused kernel when compiled, against the same six ops run eagerly (aot
//! and candle) and against `x.copy()` (one read and one write: the
//! memory-bandwidth peer), in one run. Targets: compiled at least 20x
//! faster than candle.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w2`

use aot_runtime::prelude::*;
use std::hint::black_box;
use std::time::Instant;

const N: usize = 16 * 1024 * 1024;
const REPS: usize = 15;

#[aot_fn]
fn w2(x: &Tensor) -> Tensor {
    ((x * 1.5 + 0.5).tanh() * 2.0 - 1.0).sigmoid()
}

fn median_ms(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..REPS)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[REPS / 2]
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let x = Tensor::randn(&[N], DType::F32, &Device::Cpu, 7)?;
    let cx = candle_core::Tensor::randn(0f32, 1f32, N, &candle_core::Device::Cpu)?;
    if std::env::var("W2_ONLY").is_ok_and(|v| v == "compiled") {
        // For profilers: the compiled call alone.
        let t = median_ms(|| {
            black_box(w2(&x).expect("w2"));
        });
        println!("aot compiled {t:.2} ms");
        return Ok(());
    }
    let compiled = median_ms(|| {
        black_box(w2(&x).expect("w2"));
    });
    let eager = median_ms(|| {
        black_box(w2::compiled().run_eager(&[Arg::from(&x)]).expect("eager w2"));
    });
    let candle = median_ms(|| {
        let y = (((&cx * 1.5).and_then(|t| t + 0.5)).and_then(|t| t.tanh()).and_then(|t| t * 2.0).and_then(|t| t - 1.0))
            .and_then(|t| candle_nn_sigmoid(&t))
            .expect("candle w2");
        black_box(y);
    });
    let copy = median_ms(|| {
        black_box(x.copy().expect("copy"));
    });
    println!("W2: sigmoid(tanh(x*1.5+0.5)*2-1) on {N} f32, median of {REPS}");
    println!("  aot compiled {compiled:8.2} ms   (one fused kernel)");
    println!("  aot eager    {eager:8.2} ms");
    println!("  candle       {candle:8.2} ms");
    println!("  copy         {copy:8.2} ms   (one read, one write)");
    println!(
        "  ratios: candle/compiled {:.1}x  eager/compiled {:.1}x  compiled/copy {:.2}x",
        candle / compiled,
        eager / compiled,
        compiled / copy
    );
    Ok(())
}

/// candle-core's sigmoid as its ops compute it: `1 / (1 + exp(-x))`.
fn candle_nn_sigmoid(t: &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> {
    ((t.neg()?.exp()? + 1.0)?).recip()
}
