//! W1 (issue 12): the per-call overhead of a tiny compiled function against
//! the same ops run eagerly and against candle's eager ops, in one run.
//!
//! W1 takes 6 f32 tensors of shape [4], adds into 2 of them in place and
//! returns the sum of the last two: three ops. Per variant the bench runs
//! rounds of `CALLS` calls, interleaving the variants round by round so
//! that they share the machine's state, and reports the median time per
//! call over the rounds, the ratios, and the heap allocations per call
//! (counted by the global allocator below).
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w1`

use aot_runtime::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

struct Counting;

thread_local! {
    // `const`, without a destructor, and not atomic: usable from inside the
    // allocator, and cheap enough not to weigh on the timings.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with` fails only while the thread is torn down; nothing to count then.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments, so
// `System`'s guarantees carry over; counting touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[aot_fn]
fn w1(a: &mut Tensor, b: &mut Tensor, c: &Tensor, d: &Tensor, e: &Tensor, f: &Tensor) -> Tensor {
    a.add_(c);
    b.add_(d);
    e + f
}

const SHAPE: [usize; 1] = [4];
const CALLS: usize = 2_000;
const ROUNDS: usize = 101;

/// One variant: a name and a closure running one call.
struct Variant<'a> {
    name: &'static str,
    call: Box<dyn FnMut() + 'a>,
    per_call_ns: Vec<f64>,
    allocations: f64,
}

impl<'a> Variant<'a> {
    fn new(name: &'static str, call: impl FnMut() + 'a) -> Self {
        Variant { name, call: Box::new(call), per_call_ns: Vec::with_capacity(ROUNDS), allocations: 0.0 }
    }

    fn round(&mut self) {
        let start = Instant::now();
        for _ in 0..CALLS {
            (self.call)();
        }
        self.per_call_ns.push(start.elapsed().as_nanos() as f64 / CALLS as f64);
    }

    fn count_allocations(&mut self) {
        let before = ALLOCATIONS.with(Cell::get);
        for _ in 0..CALLS {
            (self.call)();
        }
        self.allocations = (ALLOCATIONS.with(Cell::get) - before) as f64 / CALLS as f64;
    }

    fn median(&self) -> f64 {
        let mut v = self.per_call_ns.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
}

fn aot_inputs(seed: u64) -> Result<Vec<Tensor>> {
    (0..6).map(|i| Tensor::randn(&SHAPE, DType::F32, &Device::Cpu, seed + i)).collect()
}

fn candle_inputs() -> candle_core::Result<Vec<candle_core::Tensor>> {
    (0..6).map(|_| candle_core::Tensor::randn(0f32, 1f32, &SHAPE, &candle_core::Device::Cpu)).collect()
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let [mut ca, mut cb, cc, cd, ce, cf]: [Tensor; 6] = aot_inputs(0)?.try_into().map_err(|_| "six inputs")?;
    let [ea, eb, ec, ed, ee, ef]: [Tensor; 6] = aot_inputs(10)?.try_into().map_err(|_| "six inputs")?;
    let [mut xa, mut xb, xc, xd, xe, xf]: [candle_core::Tensor; 6] = candle_inputs()?.try_into().map_err(|_| "six inputs")?;

    let mut variants = [
        Variant::new("aot compiled", || {
            black_box(w1(&mut ca, &mut cb, &cc, &cd, &ce, &cf).expect("w1"));
        }),
        Variant::new("aot eager", || {
            ea.add_(&ec).expect("add_");
            eb.add_(&ed).expect("add_");
            black_box(ee.add(&ef).expect("add"));
        }),
        Variant::new("candle eager", || {
            xa = xa.add(&xc).expect("add");
            xb = xb.add(&xd).expect("add");
            black_box(xe.add(&xf).expect("add"));
        }),
    ];
    // `W1_ONLY=<name>` times one variant alone (for a profiler).
    if let Ok(only) = std::env::var("W1_ONLY") {
        let v = variants.iter_mut().find(|v| v.name == only).ok_or("W1_ONLY names no variant")?;
        for _ in 0..ROUNDS {
            v.round();
        }
        println!("{only}: {:.3} µs/call", v.median() / 1e3);
        return Ok(());
    }
    // Warm up (the compiled call builds its specialisation), then count.
    for v in &mut variants {
        v.round();
        v.count_allocations();
        v.per_call_ns.clear();
    }
    for _ in 0..ROUNDS {
        for v in &mut variants {
            v.round();
        }
    }
    println!("W1: 6 f32 inputs of shape {SHAPE:?}, 2 added into in place, 1 add returned; median of {ROUNDS} rounds of {CALLS} calls");
    let med: Vec<f64> = variants.iter().map(Variant::median).collect();
    for (v, m) in variants.iter().zip(&med) {
        println!("  {:<13} {:>8.3} µs/call  {:>5.1} allocations/call", v.name, m / 1e3, v.allocations);
    }
    let (compiled, eager, candle) = (med[0], med[1], med[2]);
    println!(
        "  ratios: compiled/candle {:.2}x  eager/candle {:.2}x  compiled/eager {:.2}x",
        compiled / candle,
        eager / candle,
        compiled / eager
    );
    Ok(())
}
