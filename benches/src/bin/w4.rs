//! W4: one training step of the `gpt` example's model, compiled and eager
//! on aot and eager on PyTorch when a Python with torch is found (see
//! `aot_benches::w4`), in tokens/s.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin w4`
//! (`W4_STEPS=n` sets the number of timed steps; `AOT_BENCH_PYTHON` names
//! the Python that has torch, else `benches/.venv/bin/python`, else
//! `python3`; `W4_ONLY=compiled` or `W4_ONLY=eager` times one aot variant
//! alone, for a profiler.)

fn main() -> aot_benches::BenchResult<()> {
    let steps: usize = std::env::var("W4_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    if let Ok(only) = std::env::var("W4_ONLY") {
        let ms = aot_benches::w4::run_only(&only, steps)?;
        println!("{only}: {ms:.2} ms/step (median of {steps})");
        return Ok(());
    }
    aot_benches::w4::run(steps)?.print();
    Ok(())
}
