//! GEMM candidates for aot's CPU matmul on W3's products and a square 1024
//! one, in f32 GFLOP/s on the same number of threads (see
//! `aot_benches::gemm_candidates`): `gemm` 0.19 as aot calls it, aot's own
//! `matmul`, and with a feature, OpenBLAS or BLIS (one at a time).
//!
//! ```sh
//! bash benches/install-openblas.sh      # libopenblas-dev, for --features openblas
//! cargo run --release --manifest-path benches/Cargo.toml --features openblas --bin gemm
//! cargo run --release --manifest-path benches/Cargo.toml --features blis --bin gemm
//! ```
//!
//! `GEMM_THREADS=n` sets the thread count (default 2); it also sizes
//! rayon's pool, which aot's matmul uses.

fn main() -> aot_benches::BenchResult<()> {
    let threads: usize = std::env::var("GEMM_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    // Before anything starts rayon's global pool.
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    for lib in aot_benches::gemm_candidates::libraries() {
        println!("{lib}");
    }
    let r = aot_benches::gemm_candidates::run(threads)?;
    println!("f32 GEMM, GFLOP/s on {} threads (median of the timed calls):", r.threads);
    println!();
    print!("{}", r.markdown());
    Ok(())
}
