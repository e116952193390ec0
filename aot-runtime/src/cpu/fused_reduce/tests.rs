//! The evaluator against eager's reduction and softmax kernels, on every
//! layout of `testutil` (strided, transposed, offset), every float dtype,
//! every set of dims, with and without a prologue.

use super::*;
use crate::cpu::testutil::{assert_close, layouts, random_values, storage, tol, values};
use crate::cpu::{reduce, softmax, var};
use crate::dtype::DType;
use aot_ir::OpKind;

/// `op` over the dims `mask` of `(src, l)`, with `exp` as its prologue when
/// `exp` (the reduced operand is then value 1).
fn run_kernel(op: RowOp, src: &CpuStorage, l: &Layout, mask: &[bool], exp: bool) -> CpuStorage {
    let prologue = [Step::new(OpKind::Exp, 0, super::super::fused_elementwise::Rhs::None, 1, src.dtype())];
    let arg = usize::from(exp);
    let rows_out = matches!(op, RowOp::Softmax { .. });
    let p = ReduceProgram {
        prologue: if exp { &prologue } else { &[] },
        op,
        arg,
        result: arg + 1,
        epilogue: &[],
        num_values: arg + 2,
        stored: arg + 1,
        load_pro: &[true],
        load_epi: &[false],
        reduced: mask,
        rows_out,
    };
    let out_shape: Vec<usize> =
        if rows_out { l.shape.to_vec() } else { l.shape.iter().zip(mask).filter(|(_, &m)| !m).map(|(&n, _)| n).collect() };
    fused_reduce("test", &p, &[(src, l.clone())], &Layout::contiguous(&out_shape)).expect("a float dtype").expect("runs")
}

#[test]
fn reductions_match_eager_on_every_layout_dtype_and_dim_set() {
    for shape in [vec![3usize, 5, 4], vec![7, 9], vec![300, 130]] {
        for (name, l) in layouts(&shape) {
            let data = random_values(l.storage_extent(), -2.0, 2.0, 3);
            for dtype in DType::FLOATS {
                let src = storage(dtype, &data);
                let e = crate::cpu::unary(aot_ir::OpKind::Exp, &src, &l, &Layout::contiguous(&l.shape)).unwrap();
                let el = Layout::contiguous(&l.shape);
                for bits in 1u32..1 << shape.len() {
                    let mask: Vec<bool> = (0..shape.len()).map(|d| bits & (1 << d) != 0).collect();
                    let dims: Vec<usize> = (0..shape.len()).filter(|&d| mask[d]).collect();
                    let what = format!("{dtype} {name} {shape:?} dims {dims:?}");
                    for (op, rop) in [(RowOp::Sum, OpKind::SumDim), (RowOp::Mean, OpKind::MeanDim), (RowOp::Amax, OpKind::AmaxDim)] {
                        let want = values(&reduce(rop, &src, &l, &dims, false).unwrap());
                        assert_close(&values(&run_kernel(op, &src, &l, &mask, false)), &want, tol(dtype), &format!("{op:?} {what}"));
                        let want = values(&reduce(rop, &e, &el, &dims, false).unwrap());
                        assert_close(&values(&run_kernel(op, &src, &l, &mask, true)), &want, tol(dtype), &format!("exp {op:?} {what}"));
                    }
                    let want = values(&var(&src, &l, &dims, 1, false).unwrap());
                    assert_close(&values(&run_kernel(RowOp::Var { correction: 1 }, &src, &l, &mask, false)), &want, tol(dtype), &what);
                    if let [d] = dims[..] {
                        for log in [false, true] {
                            let want = values(&softmax(&src, &l, d, log).unwrap());
                            let got = values(&run_kernel(RowOp::Softmax { log }, &src, &l, &mask, false));
                            assert_close(&got, &want, tol(dtype) * 2.0, &format!("softmax log={log} {what}"));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn nan_and_infinities_propagate_as_in_eager() {
    let l = Layout::contiguous(&[2, 3]);
    let src = storage(DType::F32, &[1.0, f64::NAN, 3.0, f64::NEG_INFINITY, 0.0, f64::INFINITY]);
    let mask = [false, true];
    for (op, rop) in [(RowOp::Sum, OpKind::SumDim), (RowOp::Amax, OpKind::AmaxDim)] {
        let got = values(&run_kernel(op, &src, &l, &mask, false));
        let want = values(&reduce(rop, &src, &l, &[1], false).unwrap());
        for (g, w) in got.iter().zip(&want) {
            assert!(g == w || (g.is_nan() && w.is_nan()), "{op:?}: {got:?} vs {want:?}");
        }
        assert!(got[0].is_nan(), "{op:?}: NaN propagates");
    }
    let got = values(&run_kernel(RowOp::Softmax { log: false }, &src, &l, &mask, false));
    let want = values(&softmax(&src, &l, 1, false).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!(g == w || (g.is_nan() && w.is_nan()), "softmax {got:?} vs {want:?}");
    }
}
