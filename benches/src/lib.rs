//! Benchmarks of aot against candle and PyTorch. Each workload is a module
//! with a `run` function returning its figures; the binaries in `src/bin/`
//! print them: one per workload (`w1`, `w2`, `w3`, `w4`, `eager_unary`),
//! `gemm` (the GEMM candidates on W3's shapes, [`gemm_candidates`]), and
//! `all`, which runs every workload in one process and ends with a summary
//! table of the targets ([`summary`]).
//!
//! Peak memory comes from the counting allocator of [`alloc`], which each
//! binary that reports it declares as its global allocator.

pub mod alloc;
pub mod cuda;
pub mod eager_unary;
pub mod gemm_candidates;
pub mod gemm_ceiling;
pub mod summary;
pub mod w1;
pub mod w2;
pub mod w3;
pub mod w4;

use std::time::Instant;

/// The benches' error type: aot's and candle's errors and plain messages.
pub type BenchResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The median of `v` (sorted in place); NaN for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median time of `reps` runs of `f` in ms, after one untimed run (the
/// warm-up: first-touch page faults, thread-pool start, compilation).
pub fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&mut t)
}

/// `bytes` in MiB, for printing; "n/a" when not measured.
pub fn mib(bytes: Option<usize>) -> String {
    match bytes {
        Some(b) => format!("{:.0} MiB", b as f64 / (1 << 20) as f64),
        None => "n/a".to_string(),
    }
}

/// The number of cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// What the outputs say about peak memory, once per binary.
pub const PEAK_NOTE: &str = "peak = the most heap live at once during a variant, above what was live before the workload's \
variants ran (its inputs); aot keeps large freed buffers for reuse (up to AOT_CPU_CACHE_BYTES, default 1 GiB), \
which count as live heap";
