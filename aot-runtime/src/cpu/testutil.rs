//! Helpers shared by the kernels' tests: storages from f64 values, the
//! layouts each op is checked on, and tolerant comparison. References read
//! inputs through `Layout::offsets`, independently of the kernels' own
//! strided engine.

use crate::backend::CpuStorage;
use crate::backend::Rng;
use crate::dtype::DType;
use crate::layout::{contiguous_strides, Layout};

/// A buffer of `dtype` holding `vals` (rounded as a cast does).
pub(crate) fn storage(dtype: DType, vals: &[f64]) -> CpuStorage {
    CpuStorage::from_f64s("test", dtype, vals.iter().copied()).unwrap()
}

/// The elements of a buffer as f64.
pub(crate) fn values(s: &CpuStorage) -> Vec<f64> {
    (0..s.len()).map(|i| s.get_f64(i)).collect()
}

/// `vals` rounded to `dtype` (the reference for a result computed exactly
/// and rounded once).
pub(crate) fn rounded(dtype: DType, vals: &[f64]) -> Vec<f64> {
    values(&storage(dtype, vals))
}

/// `n` values uniform on `[lo, hi)`, reproducible from `seed`.
pub(crate) fn random_values(n: usize, lo: f64, hi: f64, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| lo + (hi - lo) * rng.uniform()).collect()
}

/// The elements of `l` over `data` in row-major order (the reference walk).
pub(crate) fn logical(data: &[f64], l: &Layout) -> Vec<f64> {
    l.offsets().map(|i| data[i]).collect()
}

/// Layouts of logical `shape` (rank >= 1): contiguous, transposed (all dims
/// reversed in memory), sliced (every other element of a wider last dim,
/// at an offset) and broadcast (stride 0 in dim 0).
pub(crate) fn layouts(shape: &[usize]) -> Vec<(&'static str, Layout)> {
    let rank = shape.len();
    let mut out = vec![("contiguous", Layout::contiguous(shape))];
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let perm: Vec<i64> = (0..rank as i64).rev().collect();
    out.push(("transposed", Layout::contiguous(&rev).permute("test", &perm).expect("permute")));
    let mut wide = shape.to_vec();
    wide[rank - 1] = 2 * shape[rank - 1] + 1;
    let sliced = Layout::contiguous(&wide).slice("test", rank as i64 - 1, 1, wide[rank - 1] as i64, 2).expect("slice");
    assert_eq!(sliced.shape(), shape);
    out.push(("sliced", sliced));
    let mut stride = vec![0];
    stride.extend(contiguous_strides(&shape[1..]));
    out.push(("broadcast", Layout::new(shape.to_vec(), stride, 3)));
    out
}

/// Relative tolerance for results of `dtype`.
pub(crate) fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        DType::I64 | DType::Bool => 0.0,
    }
}

/// `got` equals `want` up to `tol` relative (absolute below 1); NaN matches
/// NaN, infinities must match exactly.
pub(crate) fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0)
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}
