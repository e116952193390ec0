//! W2: `sigmoid(tanh(x * 1.5 + 0.5) * 2 - 1)` on 16M f32, one
//! fused kernel when compiled, against the same six ops run eagerly (aot
//! and candle) and against `x.copy()` (one read and one write: the
//! memory-bandwidth peer), in one run. Target: compiled at least 20x
//! faster than candle.
//!
//! It also reports each variant's peak heap ([`crate::alloc`]). Candle runs
//! first, so that none of aot's cached buffers (which count as live heap)
//! weighs on its figure.

use crate::{alloc, median_ms, mib, BenchResult, PEAK_NOTE};
use aot_runtime::prelude::*;
use std::hint::black_box;

const N: usize = 16 * 1024 * 1024;
const REPS: usize = 15;

#[aot_fn]
fn w2(x: &Tensor) -> Tensor {
    ((x * 1.5 + 0.5).tanh() * 2.0 - 1.0).sigmoid()
}

/// W2's medians in ms, and the peak heap of three variants in bytes
/// (`None` without the counting allocator).
pub struct Report {
    pub compiled_ms: f64,
    pub eager_ms: f64,
    pub candle_ms: f64,
    pub copy_ms: f64,
    pub compiled_peak: Option<usize>,
    pub eager_peak: Option<usize>,
    pub candle_peak: Option<usize>,
}

impl Report {
    /// The ratio: candle's time over the compiled call's.
    pub fn speedup(&self) -> f64 {
        self.candle_ms / self.compiled_ms
    }

    pub fn print(&self) {
        let (compiled, eager, candle, copy) = (self.compiled_ms, self.eager_ms, self.candle_ms, self.copy_ms);
        println!("W2: sigmoid(tanh(x*1.5+0.5)*2-1) on {N} f32, median of {REPS}");
        println!("  aot compiled {compiled:8.2} ms   (one fused kernel)   peak {}", mib(self.compiled_peak));
        println!("  aot eager    {eager:8.2} ms                        peak {}", mib(self.eager_peak));
        println!("  candle       {candle:8.2} ms                        peak {}", mib(self.candle_peak));
        println!("  copy         {copy:8.2} ms   (one read, one write)");
        println!(
            "  ratios: candle/compiled {:.1}x  eager/compiled {:.1}x  compiled/copy {:.2}x",
            self.speedup(),
            eager / compiled,
            compiled / copy
        );
        println!("  ({PEAK_NOTE})");
    }
}

/// candle-core's sigmoid as its ops compute it: `1 / (1 + exp(-x))`.
fn candle_sigmoid(t: &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> {
    ((t.neg()?.exp()? + 1.0)?).recip()
}

fn candle_w2(x: &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> {
    let t = (((x * 1.5)? + 0.5)?.tanh()? * 2.0)? - 1.0;
    candle_sigmoid(&t?)
}

/// Times every variant, one after the other, each with its peak heap.
pub fn run() -> BenchResult<Report> {
    let x = Tensor::randn(&[N], DType::F32, &Device::Cpu, 7)?;
    let cx = candle_core::Tensor::randn(0f32, 1f32, N, &candle_core::Device::Cpu)?;
    let base = alloc::live_bytes();
    let (candle_ms, candle_peak) = alloc::peak_during(base, || {
        median_ms(REPS, || {
            black_box(candle_w2(&cx).expect("candle w2"));
        })
    });
    let (compiled_ms, compiled_peak) = alloc::peak_during(base, || {
        median_ms(REPS, || {
            black_box(w2(&x).expect("w2"));
        })
    });
    let (eager_ms, eager_peak) = alloc::peak_during(base, || {
        median_ms(REPS, || {
            black_box(w2::compiled().run_eager(&[Arg::from(&x)]).expect("eager w2"));
        })
    });
    let copy_ms = median_ms(REPS, || {
        black_box(x.copy().expect("copy"));
    });
    Ok(Report { compiled_ms, eager_ms, candle_ms, copy_ms, compiled_peak, eager_peak, candle_peak })
}

/// The compiled call alone, for a profiler: its median in ms.
pub fn run_compiled_only() -> BenchResult<f64> {
    let x = Tensor::randn(&[N], DType::F32, &Device::Cpu, 7)?;
    Ok(median_ms(REPS, || {
        black_box(w2(&x).expect("w2"));
    }))
}
