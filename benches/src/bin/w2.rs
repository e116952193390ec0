//! W2: `sigmoid(tanh(x * 1.5 + 0.5) * 2 - 1)` on 16M f32,
//! compiled, eager and on candle, with `x.copy()` as the bandwidth peer
//! and each variant's peak heap (see `aot_benches::w2`). Target: compiled
//! at least 20x faster than candle.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w2`
//! (`W2_ONLY=compiled` times the compiled call alone, for a profiler.)

use aot_benches::{alloc::Counting, w2, BenchResult};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> BenchResult<()> {
    if std::env::var("W2_ONLY").is_ok_and(|v| v == "compiled") {
        println!("aot compiled {:.2} ms", w2::run_compiled_only()?);
        return Ok(());
    }
    w2::run()?.print();
    Ok(())
}
