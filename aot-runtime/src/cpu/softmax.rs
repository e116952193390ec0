//! `softmax` and `log_softmax` along one dim, stabilised by subtracting the
//! maximum. Values are computed in the compute type (f32 for f16/bf16/f32,
//! f64 for f64), sums of exponentials in f64. A half-precision
//! log-softmax subtracts the log of its row's sum with both the sum and
//! the log rounded to the element type, as PyTorch's CPU kernel does
//! (it stores them in it); softmax and f32/f64 are rounded once.

use super::elem::{float_or, torch_type_name, Elem, Float, FloatElem};
use super::strided::{check_layout, map1, par_chunks, par_map, PAR_MIN};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;

/// Softmax (or log-softmax with `log`) of `l` in `src` along `dim`
/// (normalised). Floating dtypes only; the output is contiguous with the
/// shape of `l`.
pub fn softmax(src: &CpuStorage, l: &Layout, dim: usize, log: bool) -> Result<CpuStorage> {
    let op = if log { "log_softmax" } else { "softmax" };
    check_layout(op, l, src.len())?;
    let rank = l.rank();
    if dim >= rank.max(1) {
        let r = rank.max(1) as i64;
        return Err(AotError::DimOutOfRange { op, dim: dim as i64, min: -r, max: r - 1 });
    }
    float_or!(src, v => softmax_t(op, v, l, dim, log), other => Err(AotError::dtype(
        op,
        format!("\"{op}_lastdim_kernel_impl\" not implemented for '{}'", torch_type_name(other.dtype())),
    )))
}

fn softmax_t<T: FloatElem>(op: &'static str, v: &[T], l: &Layout, dim: usize, log: bool) -> Result<CpuStorage> {
    // Gather into a contiguous [outer, len, inner] buffer of the compute
    // type. Its allocation is the checked one; the per-column scratch
    // buffers below are no larger than it.
    let mut buf: Vec<T::C> = map1(op, v, l, T::to_c)?;
    let round = half_round::<T>();
    let (len, inner) = if l.rank() == 0 { (1, 1) } else { (l.shape[dim], l.shape[dim + 1..].iter().product()) };
    let block = len * inner;
    if let Some(outer) = buf.len().checked_div(block) {
        if buf.len() < PAR_MIN {
            buf.chunks_exact_mut(block).for_each(|b| softmax_block(b, inner, log, round));
        } else if outer >= rayon::current_num_threads() {
            // Whole blocks per task, a quarter of PAR_MIN elements or more each.
            let per_task = block * (PAR_MIN / 4 / block).max(1);
            par_chunks(&mut buf, per_task, &|_, blocks| blocks.chunks_exact_mut(block).for_each(|b| softmax_block(b, inner, log, round)));
        } else {
            buf.chunks_exact_mut(block).for_each(|b| softmax_block_par(b, inner, log, round));
        }
    }
    Ok(T::into_storage(T::from_c_vec(op, buf)?))
}

/// The largest element of each column of the row-major `rows` (`inner`
/// columns), ignoring NaN: a NaN input still makes its softmax NaN through
/// `exp(NaN - max)`.
fn col_max<C: Float>(rows: &[C], inner: usize) -> Vec<C> {
    let mut m = vec![C::neg_infinity(); inner];
    if inner == 1 {
        m[0] = rows.iter().fold(C::neg_infinity(), |m, &x| if x > m { x } else { m });
    } else {
        for row in rows.chunks_exact(inner) {
            for (m, &x) in m.iter_mut().zip(row) {
                if x > *m {
                    *m = x;
                }
            }
        }
    }
    m
}

/// Subtracts the column maxima `m`; for softmax (not `log`) also takes exp.
fn shift<C: Float>(rows: &mut [C], m: &[C], log: bool) {
    let f = |x: C, m: C| if log { x - m } else { (x - m).exp() };
    if let [m] = *m {
        rows.iter_mut().for_each(|x| *x = f(*x, m));
    } else {
        for row in rows.chunks_exact_mut(m.len()) {
            row.iter_mut().zip(m).for_each(|(x, &m)| *x = f(*x, m));
        }
    }
}

/// Column sums (in f64) of the shifted values' exponentials: of `exp(x)`
/// for `log`, of `x` (already exponentiated) otherwise.
fn col_sum<C: Float>(rows: &[C], inner: usize, log: bool) -> Vec<f64> {
    let e = |x: C| if log { x.exp().f64() } else { x.f64() };
    let mut s = vec![0.0f64; inner];
    if inner == 1 {
        let mut lanes = [0.0f64; 4];
        let mut chunks = rows.chunks_exact(4);
        for c in &mut chunks {
            for k in 0..4 {
                lanes[k] += e(c[k]);
            }
        }
        s[0] = chunks.remainder().iter().map(|&x| e(x)).sum::<f64>() + (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    } else {
        for row in rows.chunks_exact(inner) {
            s.iter_mut().zip(row).for_each(|(s, &x)| *s += e(x));
        }
    }
    s
}

/// How a log-softmax of a half-precision type rounds its row's sum and
/// the sum's log (to the element type); `None`: not at all.
pub(crate) type Round = Option<fn(f64) -> f64>;

/// The [`Round`] of element type `T`.
pub(crate) fn half_round<T: Elem>() -> Round {
    match T::DTYPE {
        DType::F16 | DType::BF16 => Some(|s| f64::from(T::from_f32(s as f32).to_f32())),
        _ => None,
    }
}

/// Divides by the sums (softmax) or subtracts their logs (log-softmax).
fn finish<C: Float>(rows: &mut [C], sums: &[f64], log: bool, round: Round) {
    let fin: Vec<C> = sums
        .iter()
        .map(|&s| {
            C::of(match (log, round) {
                (true, Some(r)) => r(r(s).ln()),
                (true, None) => s.ln(),
                (false, _) => s,
            })
        })
        .collect();
    let f = |x: C, v: C| if log { x - v } else { x / v };
    if let [v] = *fin {
        rows.iter_mut().for_each(|x| *x = f(*x, v));
    } else {
        for row in rows.chunks_exact_mut(fin.len()) {
            row.iter_mut().zip(&fin).for_each(|(x, &v)| *x = f(*x, v));
        }
    }
}

/// Softmax in place over the first axis of a row-major `[len, inner]` block.
pub(crate) fn softmax_block<C: Float>(b: &mut [C], inner: usize, log: bool, round: Round) {
    let m = col_max(b, inner);
    shift(b, &m, log);
    let sums = col_sum(b, inner, log);
    finish(b, &sums, log, round);
}

/// [`softmax_block`] for one large block, its passes split across threads
/// by rows.
fn softmax_block_par<C: Float>(b: &mut [C], inner: usize, log: bool, round: Round) {
    // A few pieces per thread: each pass's partial results are per piece.
    let len = b.len() / inner;
    let piece = inner * len.div_ceil(4 * rayon::current_num_threads()).max(1);
    let pieces = b.len().div_ceil(piece);
    let n = b.len();
    let range = move |p: usize| p * piece..((p + 1) * piece).min(n);
    let m = par_map(pieces, &|p| col_max(&b[range(p)], inner)).into_iter().fold(vec![C::neg_infinity(); inner], |mut acc, part| {
        acc.iter_mut().zip(part).for_each(|(a, x)| {
            if x > *a {
                *a = x
            }
        });
        acc
    });
    par_chunks(b, piece, &|_, rows| shift(rows, &m, log));
    let sums = par_map(pieces, &|p| col_sum(&b[range(p)], inner, log)).into_iter().fold(vec![0.0; inner], |mut acc, part| {
        acc.iter_mut().zip(part).for_each(|(a, x)| *a += x);
        acc
    });
    par_chunks(b, piece, &|_, rows| finish(rows, &sums, log, round));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::testutil::{assert_close, layouts, logical, random_values, rounded, storage, tol, values};
    use crate::dtype::DType;

    /// Softmax of the row-major `input` of `shape` along `dim`, in f64.
    fn reference(input: &[f64], shape: &[usize], dim: usize, log: bool) -> Vec<f64> {
        let inner: usize = shape[dim + 1..].iter().product();
        let len = shape[dim];
        let mut out = vec![0.0; input.len()];
        for base in 0..input.len() {
            if !(base / inner).is_multiple_of(len) {
                continue; // not the first element of its row
            }
            let idx: Vec<usize> = (0..len).map(|j| base + j * inner).collect();
            let m = idx.iter().map(|&i| input[i]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = idx.iter().map(|&i| (input[i] - m).exp()).sum();
            for &i in &idx {
                out[i] = if log { input[i] - m - s.ln() } else { (input[i] - m).exp() / s };
            }
        }
        out
    }

    #[test]
    fn softmax_matches_reference_along_every_dim() {
        for shape in [vec![3usize, 4, 5], vec![2, 7], vec![150, 300]] {
            for (name, l) in layouts(&shape) {
                let data = random_values(l.storage_extent(), -4.0, 4.0, 9);
                for dtype in DType::FLOATS {
                    let src = storage(dtype, &data);
                    let input = logical(&values(&src), &l);
                    for dim in 0..shape.len() {
                        for log in [false, true] {
                            let out = softmax(&src, &l, dim, log).unwrap();
                            assert_eq!(out.dtype(), dtype);
                            let want = rounded(dtype, &reference(&input, &shape, dim, log));
                            assert_close(&values(&out), &want, tol(dtype) * 2.0, &format!("log={log} {dtype} {name} {shape:?} dim {dim}"));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn large_single_blocks_split_by_rows() {
        for shape in [vec![100_000usize], vec![300, 200], vec![2, 150, 200]] {
            let l = Layout::contiguous(&shape);
            let data = random_values(l.numel(), -5.0, 5.0, 13);
            let src = storage(DType::F64, &data);
            for dim in 0..shape.len() {
                for log in [false, true] {
                    let out = softmax(&src, &l, dim, log).unwrap();
                    let want = reference(&data, &shape, dim, log);
                    assert_close(&values(&out), &want, 1e-12, &format!("{shape:?} dim {dim} log={log}"));
                }
            }
        }
    }

    #[test]
    fn rows_sum_to_one_and_log_softmax_is_log_of_softmax() {
        let shape = [4usize, 6];
        let l = Layout::contiguous(&shape).t("t").unwrap(); // [6, 4]
        let data = random_values(24, -10.0, 10.0, 4);
        for dtype in [DType::F32, DType::F64] {
            let src = storage(dtype, &data);
            for dim in 0..2 {
                let p = values(&softmax(&src, &l, dim, false).unwrap());
                let lp = values(&softmax(&src, &l, dim, true).unwrap());
                let logp: Vec<f64> = p.iter().map(|x| x.ln()).collect();
                assert_close(&lp, &logp, 1e-5, "log_softmax");
                let (rows, len) = if dim == 1 { (6, 4) } else { (4, 6) };
                for r in 0..rows {
                    let s: f64 = (0..len).map(|j| if dim == 1 { p[r * 4 + j] } else { p[j * 4 + r] }).sum();
                    assert!((s - 1.0).abs() < 1e-6, "{dtype} dim {dim} row {r}: {s}");
                }
            }
        }
    }

    #[test]
    fn softmax_is_stable_and_handles_edges() {
        let l = Layout::contiguous(&[3]);
        let big = storage(DType::F32, &[1000.0, 1001.0, 1002.0]);
        let p = values(&softmax(&big, &l, 0, false).unwrap());
        assert_close(&p, &[0.09003057317038046, 0.24472847105479767, 0.6652409557748219], 1e-6, "stable");
        let m = storage(DType::F64, &[f64::NEG_INFINITY, 0.0, 0.0]);
        assert_eq!(values(&softmax(&m, &l, 0, false).unwrap()), vec![0.0, 0.5, 0.5]);
        assert_eq!(values(&softmax(&m, &l, 0, true).unwrap())[0], f64::NEG_INFINITY);
        let n = storage(DType::F64, &[f64::NAN, 0.0, 0.0]);
        assert!(values(&softmax(&n, &l, 0, false).unwrap()).iter().all(|v| v.is_nan()));
        // 0-d and empty tensors
        let s = storage(DType::F64, &[3.0]);
        assert_eq!(values(&softmax(&s, &Layout::new(vec![], vec![], 0), 0, false).unwrap()), vec![1.0]);
        assert_eq!(values(&softmax(&s, &Layout::new(vec![], vec![], 0), 0, true).unwrap()), vec![0.0]);
        let e = CpuStorage::F32(vec![]);
        assert_eq!(softmax(&e, &Layout::contiguous(&[2, 0]), 1, false).unwrap(), CpuStorage::F32(vec![]));
        assert_eq!(softmax(&e, &Layout::contiguous(&[0, 2]), 1, false).unwrap(), CpuStorage::F32(vec![]));
        // errors
        assert!(softmax(&s, &Layout::contiguous(&[1]), 1, false).is_err());
        assert!(softmax(&CpuStorage::I64(vec![1]), &Layout::contiguous(&[1]), 0, false).is_err());
    }
}
