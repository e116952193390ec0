//! The `gemm` crate alone on W3's matrix shapes (one call each, operands
//! laid out as the step has them), on one thread and on two, with its
//! AVX2/FMA kernels and with the AVX-512 ones aot uses: the ceiling of what
//! aot's training step can reach.

use crate::median;
use crate::w3::{BATCH, CLASSES, HIDDEN, IN};
use std::hint::black_box;
use std::time::Instant;

/// One `gemm` shape: `m x k` times `k x n`, each operand row-major or
/// transposed (a column-major view, as the backward's transposes are).
pub(crate) struct Shape {
    pub name: &'static str,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub lhs_t: bool,
    pub rhs_t: bool,
}

pub(crate) const SHAPES: [Shape; 8] = [
    Shape { name: "fwd x@w1", m: BATCH, k: IN, n: HIDDEN, lhs_t: false, rhs_t: false },
    Shape { name: "fwd h1@w2", m: BATCH, k: HIDDEN, n: HIDDEN, lhs_t: false, rhs_t: false },
    Shape { name: "fwd h2@w3", m: BATCH, k: HIDDEN, n: CLASSES, lhs_t: false, rhs_t: false },
    Shape { name: "bwd x^T@g1", m: IN, k: BATCH, n: HIDDEN, lhs_t: true, rhs_t: false },
    Shape { name: "bwd h1^T@g2", m: HIDDEN, k: BATCH, n: HIDDEN, lhs_t: true, rhs_t: false },
    Shape { name: "bwd h2^T@g3", m: HIDDEN, k: BATCH, n: CLASSES, lhs_t: true, rhs_t: false },
    Shape { name: "bwd g2@w2^T", m: BATCH, k: HIDDEN, n: HIDDEN, lhs_t: false, rhs_t: true },
    Shape { name: "bwd g3@w3^T", m: BATCH, k: CLASSES, n: HIDDEN, lhs_t: false, rhs_t: true },
];

/// Median ms of one call of `gemm_fn` on `s` (`$par` a `Parallelism` of
/// that crate): a macro because the two `gemm` versions have distinct types.
macro_rules! time_gemm {
    ($krate:ident, $s:expr, $par:expr) => {{
        let s: &Shape = $s;
        let a = vec![0.5f32; s.m * s.k];
        let b = vec![0.25f32; s.k * s.n];
        let mut c = vec![0.0f32; s.m * s.n];
        // (row stride, column stride) of a row-major `r x c` or of the
        // transpose of a row-major `c x r`
        let strides = |rows: usize, cols: usize, t: bool| if t { (1isize, rows as isize) } else { (cols as isize, 1isize) };
        let (ars, acs) = strides(s.m, s.k, s.lhs_t);
        let (brs, bcs) = strides(s.k, s.n, s.rhs_t);
        let mut call = || {
            // SAFETY: `a` holds m*k elements read at i*ars + p*acs (i < m,
            // p < k), `b` holds k*n read at p*brs + j*bcs, `c` holds m*n
            // written at i*n + j; all in bounds, `c` is disjoint from both,
            // and f32 is a type `gemm` supports.
            unsafe {
                $krate::gemm(
                    s.m,
                    s.n,
                    s.k,
                    c.as_mut_ptr(),
                    1,
                    s.n as isize,
                    false,
                    a.as_ptr(),
                    acs,
                    ars,
                    b.as_ptr(),
                    bcs,
                    brs,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    $par,
                )
            }
        };
        call();
        let mut t: Vec<f64> = (0..15)
            .map(|_| {
                let st = Instant::now();
                call();
                st.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        black_box(&c);
        median(&mut t)
    }};
}

/// The ms of the step's 8 matmuls alone, summed over the shapes, on 1 | 2
/// threads for `gemm` 0.18 (FMA) and 0.19 `x86-v4` (AVX-512).
pub struct Report {
    /// gemm 0.18 on 1 and 2 threads, then gemm 0.19 on 1 and 2.
    pub total_ms: [f64; 4],
}

impl Report {
    /// The best the step's matmuls did: gemm 0.19 (what aot uses) on both
    /// threads.
    pub fn best_ms(&self) -> f64 {
        self.total_ms[3]
    }
}

/// Times `gemm` alone on the step's shapes, printing a line per shape:
/// 0.18, whose AVX-512 kernels need nightly Rust (so it runs AVX2/FMA ones,
/// as 0.19 does without its `x86-v4` feature), and 0.19 with `x86-v4`
/// (AVX-512, what aot uses), each on 1 and 2 threads.
pub fn run() -> Report {
    println!("gemm alone, median of 15 single calls, GFLOP/s on 1 | 2 threads:   gemm 0.18 (FMA)  |  0.19 x86-v4 (AVX-512)");
    let mut total = [0.0f64; 4];
    for s in &SHAPES {
        let flop = 2.0 * (s.m * s.k * s.n) as f64;
        let t = [
            time_gemm!(gemm, s, gemm::Parallelism::None),
            time_gemm!(gemm, s, gemm::Parallelism::Rayon(2)),
            time_gemm!(gemm19, s, gemm19::Parallelism::None),
            time_gemm!(gemm19, s, gemm19::Parallelism::Rayon(2)),
        ];
        for (acc, ms) in total.iter_mut().zip(t) {
            *acc += ms;
        }
        let layout = format!("{}{}", if s.lhs_t { "T" } else { "N" }, if s.rhs_t { "T" } else { "N" });
        let g = |ms: f64| flop / ms / 1e6;
        println!(
            "  {:<12} {:>4}x{:<4}x{:>4} {layout}  {:>6.1} | {:>6.1}   {:>6.1} | {:>6.1}",
            s.name,
            s.m,
            s.k,
            s.n,
            g(t[0]),
            g(t[1]),
            g(t[2]),
            g(t[3])
        );
    }
    println!(
        "  the step's 8 matmuls alone, ms on 1 | 2 threads: gemm 0.18 {:.2} | {:.2}, gemm 0.19 {:.2} | {:.2}",
        total[0], total[1], total[2], total[3]
    );
    Report { total_ms: total }
}
