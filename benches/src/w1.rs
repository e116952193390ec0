//! W1: the per-call overhead of a tiny compiled function against
//! the same ops run eagerly and against candle's eager ops, in one run.
//!
//! W1 takes 6 f32 tensors of shape [4], adds into 2 of them in place and
//! returns the sum of the last two: three ops. Per variant the bench runs
//! rounds of `CALLS` calls, interleaving the variants round by round so
//! that they share the machine's state, and reports the median time per
//! call over the rounds, the ratios, and the heap allocations per call
//! (counted by [`crate::alloc::Counting`] when it is the global allocator).

use crate::{alloc, median, BenchResult};
use aot_runtime::prelude::*;
use std::hint::black_box;
use std::time::Instant;

#[aot_fn]
fn w1(a: &mut Tensor, b: &mut Tensor, c: &Tensor, d: &Tensor, e: &Tensor, f: &Tensor) -> Tensor {
    a.add_(c);
    b.add_(d);
    e + f
}

const SHAPE: [usize; 1] = [4];
const CALLS: usize = 2_000;
const ROUNDS: usize = 101;
/// The variants' names, in [`Report`]'s order; `W1_ONLY` takes one of them.
pub const VARIANTS: [&str; 3] = ["aot compiled", "aot eager", "candle eager"];

/// W1's figures: per variant (in [`VARIANTS`]' order) the median time per
/// call and the heap allocations per call (`None` without the counting
/// allocator).
pub struct Report {
    pub per_call_ns: [f64; 3],
    pub allocations: [Option<f64>; 3],
}

impl Report {
    pub fn compiled_ns(&self) -> f64 {
        self.per_call_ns[0]
    }
    pub fn eager_ns(&self) -> f64 {
        self.per_call_ns[1]
    }
    pub fn candle_ns(&self) -> f64 {
        self.per_call_ns[2]
    }

    pub fn print(&self) {
        println!("W1: 6 f32 inputs of shape {SHAPE:?}, 2 added into in place, 1 add returned; median of {ROUNDS} rounds of {CALLS} calls");
        for ((name, ns), allocs) in VARIANTS.iter().zip(self.per_call_ns).zip(self.allocations) {
            let allocs = allocs.map_or("n/a".to_string(), |a| format!("{a:.1}"));
            println!("  {name:<13} {:>8.3} µs/call  {allocs:>5} allocations/call", ns / 1e3);
        }
        let (compiled, eager, candle) = (self.compiled_ns(), self.eager_ns(), self.candle_ns());
        println!(
            "  ratios: compiled/candle {:.2}x  eager/candle {:.2}x  compiled/eager {:.2}x",
            compiled / candle,
            eager / candle,
            compiled / eager
        );
    }
}

/// One variant: a closure running one call, and its timings.
struct Variant<'a> {
    call: Box<dyn FnMut() + 'a>,
    per_call_ns: Vec<f64>,
}

impl<'a> Variant<'a> {
    fn new(call: impl FnMut() + 'a) -> Self {
        Variant { call: Box::new(call), per_call_ns: Vec::with_capacity(ROUNDS) }
    }

    fn round(&mut self) {
        let start = Instant::now();
        for _ in 0..CALLS {
            (self.call)();
        }
        self.per_call_ns.push(start.elapsed().as_nanos() as f64 / CALLS as f64);
    }

    fn count_allocations(&mut self) -> Option<f64> {
        let before = alloc::allocations();
        for _ in 0..CALLS {
            (self.call)();
        }
        alloc::is_installed().then(|| (alloc::allocations() - before) as f64 / CALLS as f64)
    }
}

fn aot_inputs(seed: u64) -> Result<Vec<Tensor>> {
    (0..6).map(|i| Tensor::randn(&SHAPE, DType::F32, &Device::Cpu, seed + i)).collect()
}

fn candle_inputs() -> candle_core::Result<Vec<candle_core::Tensor>> {
    (0..6).map(|_| candle_core::Tensor::randn(0f32, 1f32, &SHAPE, &candle_core::Device::Cpu)).collect()
}

/// Builds the three variants on their own inputs and hands them to `body`.
fn with_variants<R>(body: impl FnOnce(&mut [Variant; 3]) -> BenchResult<R>) -> BenchResult<R> {
    let [mut ca, mut cb, cc, cd, ce, cf]: [Tensor; 6] = aot_inputs(0)?.try_into().map_err(|_| "six inputs")?;
    let [ea, eb, ec, ed, ee, ef]: [Tensor; 6] = aot_inputs(10)?.try_into().map_err(|_| "six inputs")?;
    let [mut xa, mut xb, xc, xd, xe, xf]: [candle_core::Tensor; 6] = candle_inputs()?.try_into().map_err(|_| "six inputs")?;
    let mut variants = [
        Variant::new(|| {
            black_box(w1(&mut ca, &mut cb, &cc, &cd, &ce, &cf).expect("w1"));
        }),
        Variant::new(|| {
            ea.add_(&ec).expect("add_");
            eb.add_(&ed).expect("add_");
            black_box(ee.add(&ef).expect("add"));
        }),
        Variant::new(|| {
            xa = xa.add(&xc).expect("add");
            xb = xb.add(&xd).expect("add");
            black_box(xe.add(&xf).expect("add"));
        }),
    ];
    body(&mut variants)
}

/// Runs the three variants interleaved, round by round, after a warm-up
/// round (the compiled call builds its specialisation) and a count of
/// allocations.
pub fn run() -> BenchResult<Report> {
    with_variants(|variants| {
        let mut allocations = [None; 3];
        for (v, a) in variants.iter_mut().zip(&mut allocations) {
            v.round();
            *a = v.count_allocations();
            v.per_call_ns.clear();
        }
        for _ in 0..ROUNDS {
            for v in variants.iter_mut() {
                v.round();
            }
        }
        let per_call_ns = [0, 1, 2].map(|i| median(&mut variants[i].per_call_ns));
        Ok(Report { per_call_ns, allocations })
    })
}

/// Times the variant named `name` (one of [`VARIANTS`]) alone, for a
/// profiler: the median ns per call.
pub fn run_only(name: &str) -> BenchResult<f64> {
    let at = VARIANTS.iter().position(|v| *v == name).ok_or("W1_ONLY names no variant")?;
    with_variants(|variants| {
        let v = &mut variants[at];
        for _ in 0..ROUNDS {
            v.round();
        }
        Ok(median(&mut v.per_call_ns))
    })
}
