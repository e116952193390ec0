//! W3: one training step of the MLP 784-1024-1024-10, batch 256,
//! on aot (compiled and eager) and on candle, with each variant's peak heap,
//! then `gemm` alone on the step's matrix shapes: the ceiling of what aot
//! can reach (see `aot_benches::w3` and `aot_benches::gemm_ceiling`).
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w3`
//! (`W3_STEPS=n` sets the number of timed steps; `W3_ONLY=aot`,
//! `W3_ONLY=eager` or `W3_ONLY=candle` times one variant alone, for a
//! profiler; `W3_PRE=w1`, `aot` or `w1,aot` first runs W1 and/or five aot
//! steps in the same process, as `--bin all` does before W3's variants.)

use aot_benches::{alloc::Counting, gemm_ceiling, w3, BenchResult};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> BenchResult<()> {
    let steps: usize = std::env::var("W3_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(31);
    if std::env::var("W3_PRE").is_ok_and(|v| v.contains("w1")) {
        aot_benches::w1::run()?;
    }
    if std::env::var("W3_PRE").is_ok_and(|v| v.contains("aot")) {
        w3::run_only("aot", 5)?;
    }
    if let Ok(only) = std::env::var("W3_ONLY") {
        let ms = w3::run_only(&only, steps)?;
        println!("{only}: {ms:.2} ms/step (median of {steps})");
        return Ok(());
    }
    w3::run(steps)?.print();
    gemm_ceiling::run();
    Ok(())
}
