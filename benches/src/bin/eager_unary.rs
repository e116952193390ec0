//! Eager single-op throughput of the vectorised math:
//! `x.tanh()` and friends on 16M f32 against `x.copy()` and against
//! candle's same ops (see `aot_benches::eager_unary`). The target is
//! `tanh` within 2x of `copy`.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin eager_unary`

fn main() -> aot_benches::BenchResult<()> {
    aot_benches::eager_unary::run()?.print();
    Ok(())
}
