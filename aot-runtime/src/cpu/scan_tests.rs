//! The CPU scan, extreme and loss kernels against plain references over
//! every layout shape of `testutil::layouts`, in parallel and serial sizes.

use super::*;
use crate::cpu::testutil::{layouts, logical, random_values, storage, values};

/// Row-major references along `dim` of `shape`: the positions of each
/// line, in order.
fn lines(shape: &[usize], dim: usize) -> Vec<Vec<usize>> {
    let (outer, len, inner) = split(shape, dim);
    (0..outer * inner).map(|u| (0..len).map(|k| (u / inner * len + k) * inner + u % inner).collect()).collect()
}

#[test]
fn cumsum_rounds_each_f64_prefix_once_along_every_dim() {
    for shape in [vec![3usize, 4, 5], vec![70, 600]] {
        for (name, l) in layouts(&shape) {
            let data = random_values(l.storage_extent(), -4.0, 4.0, 3);
            for dtype in DType::FLOATS {
                let src = storage(dtype, &data);
                let input = logical(&values(&src), &l);
                for dim in 0..shape.len() {
                    for rev in [false, true] {
                        let mut want = vec![0.0; input.len()];
                        for line in lines(&shape, dim) {
                            let order: Vec<usize> = if rev { line.into_iter().rev().collect() } else { line };
                            let mut acc = 0.0;
                            for p in order {
                                acc += input[p];
                                want[p] = values(&CpuStorage::from_f64s("t", dtype, std::iter::once(acc)).unwrap())[0];
                            }
                        }
                        let got = values(&cumsum("cumsum", &src, &l, dim, rev).unwrap());
                        assert_eq!(got, want, "{dtype} {name} {shape:?} dim {dim} rev {rev}");
                    }
                }
            }
        }
    }
}

#[test]
fn cumsum_of_integers_and_bools_is_i64_and_wraps() {
    let l = Layout::contiguous(&[2, 3]);
    let out = cumsum("cumsum", &CpuStorage::Bool(vec![true, false, true, true, true, false]), &l, 1, false).unwrap();
    assert_eq!(out, CpuStorage::I64(vec![1, 1, 2, 1, 2, 2]));
    let out = cumsum("cumsum", &CpuStorage::I64(vec![i64::MAX, 1, 5, 1, 2, 3]), &l, 0, true).unwrap();
    assert_eq!(out, CpuStorage::I64(vec![i64::MAX.wrapping_add(1), 3, 8, 1, 2, 3]));
    let empty = cumsum("cumsum", &CpuStorage::F32(vec![]), &Layout::contiguous(&[0, 3]), 1, false).unwrap();
    assert_eq!(empty, CpuStorage::F32(vec![]));
}

#[test]
fn extremes_pick_the_first_index_and_nan_wins() {
    for shape in [vec![3usize, 4, 5], vec![300, 200]] {
        for (name, l) in layouts(&shape) {
            // Few distinct values, so ties are common.
            let data: Vec<f64> = random_values(l.storage_extent(), -3.0, 3.0, 5).iter().map(|x| x.round()).collect();
            for dtype in [DType::F32, DType::BF16, DType::I64] {
                let src = storage(dtype, &data);
                let input = logical(&values(&src), &l);
                for dim in 0..shape.len() {
                    for max in [true, false] {
                        let (v, i) = extreme("argmax", &src, &l, dim, max).unwrap();
                        let (v, i) = (values(&v), values(&i));
                        for (u, line) in lines(&shape, dim).into_iter().enumerate() {
                            let pick = if max { f64::max } else { f64::min };
                            let best = line.iter().map(|&p| input[p]).fold(input[line[0]], pick);
                            let first = line.iter().position(|&p| input[p] == best).unwrap();
                            assert_eq!((v[u], i[u]), (best, first as f64), "{dtype} {name} dim {dim} max {max} line {u}");
                        }
                    }
                }
            }
        }
    }
    let nan = storage(DType::F64, &[1.0, f64::NAN, 3.0, f64::NAN]);
    let (v, i) = extreme("max_dim", &nan, &Layout::contiguous(&[4]), 0, true).unwrap();
    assert!(values(&v)[0].is_nan());
    assert_eq!(i, CpuStorage::I64(vec![1]));
    let (_, i) = extreme("argmin", &nan, &Layout::contiguous(&[4]), 0, false).unwrap();
    assert_eq!(i, CpuStorage::I64(vec![1]));
    assert!(extreme("argmax", &nan, &Layout::contiguous(&[4, 0]), 1, true).is_err());
}

#[test]
fn nll_loss_and_its_gradient_read_strided_inputs() {
    // x = [[0, 1, 2], [3, 4, 5]] transposed storage: column-major [2, 3].
    let x = storage(DType::F32, &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let l = Layout::new(vec![2, 3], vec![1, 2], 0);
    let tg = CpuStorage::I64(vec![2, -100, 1]);
    let lt = Layout::new(vec![2], vec![2], 0); // targets [2, 1]
    let t = |count| Targets { index: &tg, layout: &lt, classes: 3, ignore: -100, count };
    assert_eq!(values(&nll_loss("nll_loss", &x, &l, t(2)).unwrap()), vec![-(2.0 + 4.0) / 2.0]);
    let g = storage(DType::F64, &[9.0, 4.0]);
    let grad = nll_loss_backward("nll_loss_backward", &g, &Layout::new(vec![], vec![], 1), t(2), DType::F32).unwrap();
    assert_eq!(values(&grad), vec![0.0, 0.0, -2.0, 0.0, -2.0, 0.0]);
    let bad = CpuStorage::I64(vec![3, 0]);
    let lb = Layout::contiguous(&[2]);
    let r = nll_loss("nll_loss", &x, &l, Targets { index: &bad, layout: &lb, classes: 3, ignore: -100, count: 2 });
    assert!(matches!(r, Err(AotError::IndexOutOfRange { index: 3, .. })), "{r:?}");
}
