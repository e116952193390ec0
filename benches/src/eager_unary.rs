//! Eager single-op throughput of the vectorised math:
//! `x.tanh()` and friends on 16M f32 against `x.copy()` (one read and one
//! write, the memory-bandwidth peer) and against candle's same ops, in one
//! run. The target is `tanh` within 2x of `copy`.

use crate::{median_ms, BenchResult};
use aot_runtime::prelude::*;
use std::hint::black_box;

const N: usize = 16 << 20;
const REPS: usize = 15;

/// One op's medians in ms.
pub struct OpTimes {
    pub name: &'static str,
    pub aot_ms: f64,
    pub candle_ms: f64,
}

/// The medians of `x.copy()` and of each op, in ms.
pub struct Report {
    pub copy_ms: f64,
    pub ops: Vec<OpTimes>,
}

impl Report {
    /// The op named `name`, if the bench ran it.
    pub fn op(&self, name: &str) -> Option<&OpTimes> {
        self.ops.iter().find(|o| o.name == name)
    }

    pub fn print(&self) {
        println!("eager unary ops on {N} f32 (median of {REPS}); copy {:.2} ms is the bandwidth peer", self.copy_ms);
        for o in &self.ops {
            println!("  {:<8} aot/copy {:>5.2}x   aot/candle {:>5.2}x", o.name, o.aot_ms / self.copy_ms, o.aot_ms / o.candle_ms);
        }
    }
}

type AotOp = fn(&Tensor) -> Result<Tensor>;
type CandleOp = fn(&candle_core::Tensor) -> candle_core::Result<candle_core::Tensor>;

/// Times `x.copy()`, then each op on aot and on candle.
pub fn run() -> BenchResult<Report> {
    let x = Tensor::randn(&[N], DType::F32, &Device::Cpu, 7)?;
    let cx = candle_core::Tensor::randn(0f32, 1f32, N, &candle_core::Device::Cpu)?;
    let copy_ms = median_ms(REPS, || {
        black_box(x.copy().expect("copy"));
    });
    let ops: [(&str, AotOp, CandleOp); 5] = [
        ("tanh", Tensor::tanh, candle_core::Tensor::tanh),
        ("exp", Tensor::exp, candle_core::Tensor::exp),
        ("sigmoid", Tensor::sigmoid, |t| candle_core::Tensor::ones_like(t)?.broadcast_div(&(t.neg()?.exp()? + 1.0)?)),
        ("gelu", Tensor::gelu, candle_core::Tensor::gelu_erf),
        ("sin", Tensor::sin, candle_core::Tensor::sin),
    ];
    let ops = ops
        .into_iter()
        .map(|(name, ours, theirs)| {
            let aot_ms = median_ms(REPS, || {
                black_box(ours(&x).expect(name));
            });
            let candle_ms = median_ms(REPS, || {
                black_box(theirs(&cx).expect(name));
            });
            OpTimes { name, aot_ms, candle_ms }
        })
        .collect();
    Ok(Report { copy_ms, ops })
}
