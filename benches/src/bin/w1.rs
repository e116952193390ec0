//! W1: the per-call overhead of a tiny compiled function against
//! the same ops run eagerly and against candle's eager ops, in one run
//! (see `aot_benches::w1`). Counts heap allocations per call.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w1`
//! (`W1_ONLY="aot compiled"`, `"aot eager"` or `"candle eager"` times one
//! variant alone, for a profiler.)

use aot_benches::{alloc::Counting, w1, BenchResult};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> BenchResult<()> {
    if let Ok(only) = std::env::var("W1_ONLY") {
        let ns = w1::run_only(&only)?;
        println!("{only}: {:.3} µs/call", ns / 1e3);
        return Ok(());
    }
    w1::run()?.print();
    Ok(())
}
