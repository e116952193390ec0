//! Eager single-op throughput of the vectorised math (issue 13, item 3):
//! `x.tanh()` and friends on 16M f32 against `x.copy()` (one read and one
//! write, the memory-bandwidth peer) and against candle's same ops, in one
//! run. The target is `tanh` within 2x of `copy`.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin eager_unary`

use aot_runtime::prelude::*;
use std::hint::black_box;
use std::time::Instant;

const N: usize = 16 << 20;
const REPS: usize = 15;

/// The median time of `REPS` runs of `f`, in ms.
fn median_ms(mut f: impl FnMut()) -> f64 {
    f(); // warm up: first-touch page faults, thread pool start
    let mut t: Vec<f64> = (0..REPS)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[REPS / 2]
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let x = Tensor::randn(&[N], DType::F32, &Device::Cpu, 7)?;
    let cx = candle_core::Tensor::randn(0f32, 1f32, N, &candle_core::Device::Cpu)?;
    let copy = median_ms(|| {
        black_box(x.copy().expect("copy"));
    });
    println!("eager unary ops on {N} f32 (median of {REPS}); copy {copy:.2} ms is the bandwidth peer");
    type AotOp = fn(&Tensor) -> Result<Tensor>;
    type CandleOp = fn(&candle_core::Tensor) -> candle_core::Result<candle_core::Tensor>;
    let ops: [(&str, AotOp, CandleOp); 5] = [
        ("tanh", Tensor::tanh, candle_core::Tensor::tanh),
        ("exp", Tensor::exp, candle_core::Tensor::exp),
        ("sigmoid", Tensor::sigmoid, |t| candle_core::Tensor::ones_like(t)?.broadcast_div(&(t.neg()?.exp()? + 1.0)?)),
        ("gelu", Tensor::gelu, candle_core::Tensor::gelu_erf),
        ("sin", Tensor::sin, candle_core::Tensor::sin),
    ];
    for (name, ours, theirs) in ops {
        let a = median_ms(|| {
            black_box(ours(&x).expect(name));
        });
        let c = median_ms(|| {
            black_box(theirs(&cx).expect(name));
        });
        println!("  {name:<8} aot/copy {:>5.2}x   aot/candle {:>5.2}x", a / copy, a / c);
    }
    Ok(())
}
