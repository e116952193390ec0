//! Every benchmark in one process: W1, W3 (whose step is a
//! `train_mlp` step: steps/s = 1000 / ms per step), `gemm` alone on W3's
//! shapes, W4 (the `gpt` example's training step, against PyTorch when a
//! Python with torch is found), W2, and eager single-op throughput, on aot
//! and on candle. Prints each workload's figures and ratios as its own
//! binary does, then a summary table in Markdown with the targets.
//!
//! `cargo run --release --manifest-path benches/Cargo.toml --bin all`
//! (`W3_STEPS=n` and `W4_STEPS=n` set W3's and W4's numbers of timed
//! steps; `AOT_BENCH_PYTHON` names the Python with torch.) With `--features cuda`
//! and `-- --device cuda`: W2 and W3 on a GPU instead ([`aot_benches::cuda`]).

use aot_benches::{alloc::Counting, cores, eager_unary, gemm_ceiling, summary::All, w1, w2, w3, w4, BenchResult};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> BenchResult<()> {
    let steps: usize = std::env::var("W3_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(31);
    if aot_benches::cuda::wants_cuda()? {
        return aot_benches::cuda::run(steps);
    }
    let w1 = w1::run()?;
    w1.print();
    println!();
    // W3 before the 16M-element workloads: after W2, glibc's allocator
    // state made candle's W3 step 2.5x slower (not with
    // GLIBC_TUNABLES=glibc.malloc.arena_max=1), while W3 first leaves W2
    // and the eager ops as they are alone.
    let w3 = w3::run(steps)?;
    w3.print();
    let gemm = gemm_ceiling::run();
    println!();
    let w4_steps: usize = std::env::var("W4_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let w4 = w4::run(w4_steps)?;
    w4.print();
    println!();
    let w2 = w2::run()?;
    w2.print();
    println!();
    let unary = eager_unary::run()?;
    unary.print();
    println!();
    println!("Summary ({} cores; medians of one run; targets as ratios within this run):", cores());
    println!();
    print!("{}", All { w1, w2, w3, w4, gemm, unary }.markdown());
    Ok(())
}
