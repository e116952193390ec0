//! GEMM candidates for aot's CPU matmul, in f32 GFLOP/s on W3's eight
//! products (operands laid out as the step has them: row-major, or the
//! transpose of a row-major matrix) and a square 1024 product, all on the
//! same number of threads:
//!
//! - `gemm` 0.19 with `x86-v4`, called as aot-runtime's `cpu/matmul.rs`
//!   calls it (`Parallelism::Rayon`), on the operands as laid out;
//! - aot's own `matmul` on the same views: `gemm` plus what aot adds (the
//!   output buffer, and the row-major repacking of a large transposed right
//!   operand);
//! - with the `openblas` feature, the system's OpenBLAS through
//!   `cblas_sgemm` (`openblas_set_num_threads`);
//! - with the `blis` feature, BLIS built by blis-src, through its typed API
//!   `bli_sgemm`, which takes both strides of each operand
//!   (`bli_thread_set_num_threads`).
//!
//! The two features exclude each other: blis-src's static `libblis.a`
//! defines `cblas_sgemm` too, and the linker took it over OpenBLAS's.
//!
//! Each candidate runs a block of calls on one shape after a pause (so
//! that no other library's idle threads still spin) and two untimed calls;
//! there are several rounds, the candidates' order rotating, and a figure
//! is the median of all its timed calls. Before timing, every candidate's
//! product is checked against `gemm`'s.

use crate::gemm_ceiling::{Shape, SHAPES};
use crate::{median, BenchResult};
use aot_runtime::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The square product, beside W3's eight.
const SQUARE: Shape = Shape { name: "square", m: 1024, k: 1024, n: 1024, lhs_t: false, rhs_t: false };
const ROUNDS: usize = 5;
/// Timed calls per block (after two untimed ones).
const CALLS: usize = 7;
/// The pause before each block.
const PAUSE: Duration = Duration::from_millis(250);

/// The shape classes, in the table's order.
pub const CLASSES: [&str; 5] = ["square 1024", "forward, m=256", "grad input, m=256, B^T", "weight grad, k=256, A^T", "10-wide head"];

fn class(s: &Shape) -> usize {
    if s.m == s.n && s.n == s.k {
        0
    } else if s.n == 10 || s.k == 10 {
        4
    } else if s.lhs_t {
        3
    } else if s.rhs_t {
        2
    } else {
        1
    }
}

#[cfg(all(feature = "openblas", feature = "blis"))]
compile_error!("the `openblas` and `blis` features exclude each other (both define cblas_sgemm): build one at a time");

#[cfg(feature = "openblas")]
mod openblas {
    // Links the system's libopenblas (openblas-src's `system` feature).
    use openblas_src as _;
    extern "C" {
        pub fn openblas_set_num_threads(n: std::ffi::c_int);
        pub fn openblas_get_config() -> *const std::ffi::c_char;
    }
}

#[cfg(feature = "blis")]
mod blis {
    use blis_src as _;
    /// BLIS's `trans_t` for an operand used as stored (its strides say the
    /// layout).
    pub const NO_TRANSPOSE: u32 = 0;
    extern "C" {
        #[allow(clippy::too_many_arguments)]
        pub fn bli_sgemm(
            transa: u32,
            transb: u32,
            m: i64,
            n: i64,
            k: i64,
            alpha: *const f32,
            a: *const f32,
            rs_a: i64,
            cs_a: i64,
            b: *const f32,
            rs_b: i64,
            cs_b: i64,
            beta: *const f32,
            c: *mut f32,
            rs_c: i64,
            cs_c: i64,
        );
        pub fn bli_thread_set_num_threads(n: i64);
        pub fn bli_info_get_version_str() -> *const std::ffi::c_char;
    }
}

/// One product's operands: `a` (`m x k`) and `b` (`k x n`) as stored, with
/// their (row, column) strides, the output, and the same operands as aot
/// tensors (views of the same layout).
struct Problem<'s> {
    s: &'s Shape,
    a: Vec<f32>,
    b: Vec<f32>,
    a_strides: (isize, isize),
    b_strides: (isize, isize),
    c: Vec<f32>,
    ta: Tensor,
    tb: Tensor,
}

impl Problem<'_> {
    fn new(s: &Shape) -> Result<Problem<'_>> {
        let fill = |len: usize, seed: usize| (0..len).map(|i| (((i + seed) as f32 * 0.618_034).fract() - 0.5) * 2.0).collect::<Vec<_>>();
        let (a, b) = (fill(s.m * s.k, 1), fill(s.k * s.n, 2));
        // (row stride, column stride) of a row-major `r x c`, or of the
        // transpose of a row-major `c x r`
        let strides = |rows: usize, cols: usize, t: bool| if t { (1, rows as isize) } else { (cols as isize, 1) };
        // The tensor of a stored `r x c` operand: row-major, or the `.t()`
        // of a row-major `c x r`.
        let tensor = |v: &[f32], r: usize, c: usize, t: bool| -> Result<Tensor> {
            if t {
                Tensor::from_vec(v.to_vec(), &[c, r], &Device::Cpu)?.t()
            } else {
                Tensor::from_vec(v.to_vec(), &[r, c], &Device::Cpu)
            }
        };
        Ok(Problem {
            a_strides: strides(s.m, s.k, s.lhs_t),
            b_strides: strides(s.k, s.n, s.rhs_t),
            ta: tensor(&a, s.m, s.k, s.lhs_t)?,
            tb: tensor(&b, s.k, s.n, s.rhs_t)?,
            c: vec![0.0; s.m * s.n],
            a,
            b,
            s,
        })
    }
}

/// The candidates this build has.
#[derive(Clone, Copy, PartialEq)]
pub enum Candidate {
    Gemm,
    AotMatmul,
    #[cfg(feature = "openblas")]
    OpenBlas,
    #[cfg(feature = "blis")]
    Blis,
}

impl Candidate {
    pub fn all() -> Vec<Candidate> {
        #[allow(unused_mut)]
        let mut v = vec![Candidate::Gemm, Candidate::AotMatmul];
        #[cfg(feature = "openblas")]
        v.push(Candidate::OpenBlas);
        #[cfg(feature = "blis")]
        v.push(Candidate::Blis);
        v
    }

    pub fn name(self) -> &'static str {
        match self {
            Candidate::Gemm => "gemm 0.19",
            Candidate::AotMatmul => "aot matmul",
            #[cfg(feature = "openblas")]
            Candidate::OpenBlas => "OpenBLAS",
            #[cfg(feature = "blis")]
            Candidate::Blis => "BLIS",
        }
    }

    /// One product `p.a @ p.b` into `p.c` on `threads` threads; aot's
    /// matmul writes `p.c` only when `keep` (its output is its own buffer).
    fn call(self, p: &mut Problem, threads: usize, keep: bool) -> Result<()> {
        let Shape { m, k, n, lhs_t, rhs_t, .. } = *p.s;
        let ((ars, acs), (brs, bcs)) = (p.a_strides, p.b_strides);
        match self {
            // SAFETY: `a` holds m*k elements read at i*ars + q*acs (i < m,
            // q < k), `b` holds k*n read at q*brs + j*bcs, `c` holds m*n
            // written at i*n + j; all in bounds, `c` is disjoint from both,
            // and f32 is a type `gemm` supports.
            Candidate::Gemm => unsafe {
                gemm19::gemm(
                    m,
                    n,
                    k,
                    p.c.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    p.a.as_ptr(),
                    acs,
                    ars,
                    p.b.as_ptr(),
                    bcs,
                    brs,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm19::Parallelism::Rayon(threads),
                )
            },
            Candidate::AotMatmul => {
                let out = p.ta.matmul(&p.tb)?;
                if keep {
                    p.c = out.to_vec::<f32>()?;
                }
                black_box(out);
            }
            #[cfg(feature = "openblas")]
            Candidate::OpenBlas => {
                use cblas_sys::{cblas_sgemm, CblasNoTrans, CblasRowMajor, CblasTrans};
                let (ta, lda) = if lhs_t { (CblasTrans, m) } else { (CblasNoTrans, k) };
                let (tb, ldb) = if rhs_t { (CblasTrans, k) } else { (CblasNoTrans, n) };
                let int = |v: usize| v as std::ffi::c_int;
                // SAFETY: row-major `a` is m x k (lda k) or its transpose
                // stored k x m (lda m), `b` likewise k x n or n x k, `c` is
                // m x n (ldc n): each buffer holds exactly those elements,
                // and `c` is disjoint from both.
                unsafe {
                    cblas_sgemm(
                        CblasRowMajor,
                        ta,
                        tb,
                        int(m),
                        int(n),
                        int(k),
                        1.0,
                        p.a.as_ptr(),
                        int(lda),
                        p.b.as_ptr(),
                        int(ldb),
                        0.0,
                        p.c.as_mut_ptr(),
                        int(n),
                    );
                }
            }
            #[cfg(feature = "blis")]
            Candidate::Blis => {
                let _ = (lhs_t, rhs_t);
                let (one, zero) = (1.0f32, 0.0f32);
                let i = |v: isize| v as i64;
                // SAFETY: as for `gemm` above: BLIS reads a[i*rs_a + q*cs_a]
                // and b[q*rs_b + j*cs_b] within the buffers and writes
                // c[i*n + j] (disjoint from both); alpha and beta point to
                // live floats.
                unsafe {
                    blis::bli_sgemm(
                        blis::NO_TRANSPOSE,
                        blis::NO_TRANSPOSE,
                        m as i64,
                        n as i64,
                        k as i64,
                        &one,
                        p.a.as_ptr(),
                        i(ars),
                        i(acs),
                        p.b.as_ptr(),
                        i(brs),
                        i(bcs),
                        &zero,
                        p.c.as_mut_ptr(),
                        n as i64,
                        1,
                    );
                }
            }
        }
        #[cfg(not(any(feature = "openblas", feature = "blis")))]
        let _ = (lhs_t, rhs_t);
        Ok(())
    }
}

/// One product's figures.
pub struct Row {
    pub name: &'static str,
    /// "m x k x n" and the operands' layouts (N as stored, T transposed).
    pub dims: String,
    /// Index in [`CLASSES`].
    pub class: usize,
    pub flop: f64,
    /// GFLOP/s per candidate, in [`Candidate::all`]'s order.
    pub gflops: Vec<f64>,
}

/// GFLOP/s per product (the square one first, then W3's eight) and per
/// candidate.
pub struct Report {
    pub threads: usize,
    pub candidates: Vec<Candidate>,
    pub rows: Vec<Row>,
}

/// What the linked libraries say of themselves.
pub fn libraries() -> Vec<String> {
    #[allow(unused_mut)]
    let mut v = Vec::new();
    #[cfg(feature = "openblas")]
    // SAFETY: OpenBLAS returns a static NUL-terminated string.
    v.push(format!("OpenBLAS: {}", unsafe { std::ffi::CStr::from_ptr(openblas::openblas_get_config()) }.to_string_lossy()));
    #[cfg(feature = "blis")]
    // SAFETY: BLIS returns a static NUL-terminated string.
    v.push(format!("BLIS: {}", unsafe { std::ffi::CStr::from_ptr(blis::bli_info_get_version_str()) }.to_string_lossy()));
    v
}

/// Sets the libraries' thread counts, once, before any product.
fn set_threads(threads: usize) {
    let _ = threads;
    #[cfg(feature = "openblas")]
    // SAFETY: a plain setter, called before any product.
    unsafe {
        openblas::openblas_set_num_threads(threads as std::ffi::c_int)
    };
    #[cfg(feature = "blis")]
    // SAFETY: a plain setter, called before any product.
    unsafe {
        blis::bli_thread_set_num_threads(threads as i64)
    };
}

/// Checks every candidate's product against `gemm`'s on each shape: the
/// largest difference within 1e-4 of the largest magnitude.
fn check(problems: &mut [Problem], threads: usize) -> BenchResult<()> {
    for p in problems.iter_mut() {
        Candidate::Gemm.call(p, threads, true)?;
        let want = p.c.clone();
        let scale = want.iter().fold(1e-30f32, |a, &w| a.max(w.abs()));
        for c in Candidate::all() {
            p.c.iter_mut().for_each(|x| *x = f32::NAN);
            c.call(p, threads, true)?;
            let off = |(g, w): (&f32, &f32)| (g - w).is_nan() || (g - w).abs() > 1e-4 * scale;
            if p.c.iter().zip(&want).any(off) {
                let worst = p.c.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
                return Err(format!("{} on {}: differs from gemm by {worst} (largest {scale})", c.name(), p.s.name).into());
            }
        }
    }
    Ok(())
}

/// Times every candidate on every shape on `threads` threads.
pub fn run(threads: usize) -> BenchResult<Report> {
    let shapes: Vec<&Shape> = std::iter::once(&SQUARE).chain(SHAPES.iter()).collect();
    let mut problems = shapes.iter().map(|s| Problem::new(s)).collect::<Result<Vec<_>>>()?;
    set_threads(threads);
    check(&mut problems, threads)?;
    let candidates = Candidate::all();
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); candidates.len()]; problems.len()];
    for round in 0..ROUNDS {
        for (p, t) in problems.iter_mut().zip(times.iter_mut()) {
            for j in 0..candidates.len() {
                let ci = (j + round) % candidates.len();
                let c = candidates[ci];
                std::thread::sleep(PAUSE);
                for _ in 0..2 {
                    c.call(p, threads, false)?;
                }
                for _ in 0..CALLS {
                    let st = Instant::now();
                    c.call(p, threads, false)?;
                    t[ci].push(st.elapsed().as_secs_f64());
                }
                black_box(&p.c);
            }
        }
    }
    let rows = problems
        .iter()
        .zip(times.iter_mut())
        .map(|(p, t)| {
            let s = p.s;
            let flop = 2.0 * (s.m * s.k * s.n) as f64;
            let dims = format!("{}x{}x{} {}{}", s.m, s.k, s.n, if s.lhs_t { "T" } else { "N" }, if s.rhs_t { "T" } else { "N" });
            let gflops = t.iter_mut().map(|v| flop / median(v) / 1e9).collect();
            Row { name: s.name, dims, class: class(s), flop, gflops }
        })
        .collect();
    Ok(Report { threads, candidates, rows })
}

impl Report {
    /// Per class: the summed time of its shapes' products, as GFLOP/s
    /// (total FLOP / total time), per candidate.
    pub fn by_class(&self) -> Vec<(&'static str, Vec<f64>)> {
        CLASSES
            .iter()
            .enumerate()
            .filter_map(|(ci, name)| {
                let rows: Vec<&Row> = self.rows.iter().filter(|r| r.class == ci).collect();
                if rows.is_empty() {
                    return None;
                }
                let total: f64 = rows.iter().map(|r| r.flop).sum();
                let g = (0..self.candidates.len()).map(|c| total / rows.iter().map(|r| r.flop / r.gflops[c]).sum::<f64>()).collect();
                Some((*name, g))
            })
            .collect()
    }

    /// The tables in Markdown: per shape, then per class with the fastest
    /// candidate and its lead over `gemm`.
    pub fn markdown(&self) -> String {
        let names: Vec<&str> = self.candidates.iter().map(|c| c.name()).collect();
        let head = |first: &str, extra: &str| {
            let cols = names.iter().map(|n| format!(" {n} |")).collect::<String>();
            let rule = "---|".repeat(names.len() + 1 + usize::from(!extra.is_empty()));
            format!("| {first} |{cols}{extra}\n|{rule}\n")
        };
        let mut out = head("product (m x k x n, A/B layout)", "");
        for r in &self.rows {
            let cells = r.gflops.iter().map(|x| format!(" {x:.1} |")).collect::<String>();
            out.push_str(&format!("| {} {} |{cells}\n", r.name, r.dims));
        }
        out.push('\n');
        out.push_str(&head("shape class", " fastest |"));
        for (name, g) in self.by_class() {
            let best = (0..g.len()).max_by(|&a, &b| g[a].total_cmp(&g[b])).unwrap_or(0);
            let cells = g.iter().map(|x| format!(" {x:.1} |")).collect::<String>();
            out.push_str(&format!("| {name} |{cells} {} ({:.2}x gemm) |\n", names[best], g[best] / g[0]));
        }
        out
    }
}
