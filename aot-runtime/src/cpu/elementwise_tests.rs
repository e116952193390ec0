//! Tests of the elementwise kernels (`unary`, `binary`, `copy`) against
//! f64 references, on every layout of `testutil::layouts` and dtype.

use super::testutil::{assert_close, layouts, logical, random_values, rounded, storage, tol, values};
use super::{binary, binary_scalar, cast, clamp, copy_strided, fill, unary, where_cond};
use crate::backend::CpuStorage;

use crate::dtype::DType;
use crate::error::AotError;
use crate::layout::{elementwise_layout, preserve_layout, Layout};
use aot_ir::kernel::erf::erf;
use aot_ir::OpKind;

/// The row-major layout of `l`'s shape (the output most tests ask for).
fn row_major(l: &Layout) -> Layout {
    Layout::contiguous(l.shape())
}

const UNARY: [OpKind; 17] = [
    OpKind::Neg,
    OpKind::Exp,
    OpKind::Log,
    OpKind::Sqrt,
    OpKind::Rsqrt,
    OpKind::Abs,
    OpKind::Sin,
    OpKind::Cos,
    OpKind::Tanh,
    OpKind::Sigmoid,
    OpKind::Relu,
    OpKind::Gelu,
    OpKind::Silu,
    OpKind::Reciprocal,
    OpKind::Square,
    OpKind::Log1p,
    OpKind::Expm1,
];

fn unary_ref(op: OpKind, x: f64) -> f64 {
    match op {
        OpKind::Neg => -x,
        OpKind::Exp => x.exp(),
        OpKind::Log => x.ln(),
        OpKind::Sqrt => x.sqrt(),
        OpKind::Rsqrt => 1.0 / x.sqrt(),
        OpKind::Abs => x.abs(),
        OpKind::Sin => x.sin(),
        OpKind::Cos => x.cos(),
        OpKind::Tanh => x.tanh(),
        OpKind::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        OpKind::Relu => x.max(0.0),
        OpKind::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        OpKind::Silu => x / (1.0 + (-x).exp()),
        OpKind::Reciprocal => 1.0 / x,
        OpKind::Square => x * x,
        OpKind::Log1p => x.ln_1p(),
        OpKind::Expm1 => x.exp_m1(),
        other => panic!("`{other}` is not a unary op"),
    }
}

const ARITH: [OpKind; 7] = [OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Maximum, OpKind::Minimum];
const CMP: [OpKind; 6] = [OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge];

fn binary_ref(op: OpKind, x: f64, y: f64) -> f64 {
    let b = |c: bool| if c { 1.0 } else { 0.0 };
    match op {
        OpKind::Add => x + y,
        OpKind::Sub => x - y,
        OpKind::Mul => x * y,
        OpKind::Div => x / y,
        OpKind::Pow => x.powf(y),
        OpKind::Maximum => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.max(y)
            }
        }
        OpKind::Minimum => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.min(y)
            }
        }
        OpKind::Eq => b(x == y),
        OpKind::Ne => b(x != y),
        OpKind::Lt => b(x < y),
        OpKind::Le => b(x <= y),
        OpKind::Gt => b(x > y),
        OpKind::Ge => b(x >= y),
        other => panic!("`{other}` is not a binary op"),
    }
}

#[test]
fn unary_matches_reference_on_all_layouts_and_dtypes() {
    for shape in [vec![3usize, 5], vec![2, 3, 4], vec![300, 120]] {
        for (name, l) in layouts(&shape) {
            let data = random_values(l.storage_extent(), -3.0, 3.0, 7);
            for dtype in DType::FLOATS {
                let src = storage(dtype, &data);
                let input = logical(&values(&src), &l);
                // PyTorch's layout: permuted like a transposed input
                let ol = elementwise_layout(&shape, &[&l]);
                for op in UNARY {
                    let out = unary(op, &src, &l, &ol).unwrap();
                    assert_eq!(out.dtype(), dtype);
                    let want: Vec<f64> = input.iter().map(|&x| unary_ref(op, x)).collect();
                    let got = logical(&values(&out), &ol);
                    assert_close(&got, &rounded(dtype, &want), tol(dtype), &format!("{op:?} {dtype} {name} {shape:?}"));
                }
            }
        }
    }
}

#[test]
fn unary_special_values() {
    let l = Layout::contiguous(&[1]);
    let one = storage(DType::F64, &[1.0]);
    assert!((values(&unary(OpKind::Gelu, &one, &l, &row_major(&l)).unwrap())[0] - 0.8413447460685429).abs() < 1e-15);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let g = values(&unary(OpKind::Gelu, &storage(dtype, &[1.0]), &l, &row_major(&l)).unwrap())[0];
        assert!((g - 0.8413447460685429).abs() < tol(dtype), "{dtype}: {g}");
    }
    let l3 = Layout::contiguous(&[4]);
    let s = storage(DType::F32, &[f64::NAN, -0.0, f64::NEG_INFINITY, -1000.0]);
    let relu = values(&unary(OpKind::Relu, &s, &l3, &row_major(&l3)).unwrap());
    assert!(relu[0].is_nan());
    assert_eq!(&relu[1..], &[0.0, 0.0, 0.0]);
    let sig = values(&unary(OpKind::Sigmoid, &s, &l3, &row_major(&l3)).unwrap());
    assert_eq!(&sig[2..], &[0.0, 0.0]);
    // gelu far in the negative tail keeps its (tiny) value
    let g = values(&unary(OpKind::Gelu, &storage(DType::F64, &[-10.0]), &l, &row_major(&l)).unwrap())[0];
    assert!(g < 0.0 && (g - -7.619853024160527e-23).abs() < 1e-35, "{g}");
}

/// An empty view may start past the end of its storage (a slice at the
/// end of a dim): the vectorised f32 path must not index there.
#[test]
fn unary_of_an_empty_view_past_its_buffer() {
    let s = CpuStorage::F32(vec![1.0, 2.0, 3.0]);
    let l = Layout::new(vec![0, 1, 2], vec![4, 4, 2], 4);
    for op in [OpKind::Sigmoid, OpKind::Exp, OpKind::Neg] {
        let r = unary(op, &s, &l, &Layout::contiguous(&[0, 1, 2])).unwrap();
        assert_eq!(r, CpuStorage::F32(vec![]), "{op:?}");
    }
}

#[test]
fn unary_int_and_bool() {
    let l = Layout::contiguous(&[2, 2]).t("t").unwrap();
    let s = CpuStorage::I64(vec![-3, 4, i64::MIN, 0]);
    assert_eq!(unary(OpKind::Neg, &s, &l, &row_major(&l)).unwrap(), CpuStorage::I64(vec![3, i64::MIN, -4, 0]));
    assert_eq!(unary(OpKind::Abs, &s, &l, &row_major(&l)).unwrap(), CpuStorage::I64(vec![3, i64::MIN, 4, 0]));
    assert_eq!(unary(OpKind::Relu, &s, &l, &row_major(&l)).unwrap(), CpuStorage::I64(vec![0, 0, 4, 0]));
    assert_eq!(
        unary(OpKind::Square, &s, &Layout::contiguous(&[2]), &row_major(&Layout::contiguous(&[2]))).unwrap(),
        CpuStorage::I64(vec![9, 16])
    );
    assert!(matches!(unary(OpKind::Exp, &s, &l, &row_major(&l)), Err(AotError::DTypeMismatch { op: "exp", .. })));
    assert!(unary(OpKind::Neg, &CpuStorage::Bool(vec![true]), &Layout::contiguous(&[1]), &row_major(&Layout::contiguous(&[1]))).is_err());
    assert!(unary(OpKind::Neg, &s, &Layout::contiguous(&[5]), &row_major(&Layout::contiguous(&[5]))).is_err(), "layout past the buffer");
}

#[test]
fn binary_matches_reference_on_all_layouts_and_dtypes() {
    for shape in [vec![4usize, 6], vec![2, 3, 5], vec![200, 300]] {
        let ls = layouts(&shape);
        for (i, (na, la)) in ls.iter().enumerate() {
            let (nb, lb) = &ls[(i + 1) % ls.len()];
            let da = random_values(la.storage_extent(), -2.0, 2.0, 1);
            let mut db = random_values(lb.storage_extent(), -2.0, 2.0, 2);
            // some ties for the comparisons
            for (k, v) in db.iter_mut().enumerate().step_by(5) {
                *v = da[k % da.len()];
            }
            for dtype in DType::FLOATS {
                let (a, b) = (storage(dtype, &da), storage(dtype, &db));
                let (xa, xb) = (logical(&values(&a), la), logical(&values(&b), lb));
                let ol = elementwise_layout(&shape, &[la, lb]);
                for op in ARITH.iter().chain(&CMP) {
                    let out = binary(*op, &a, la, &b, lb, &ol).unwrap();
                    assert_eq!(out.dtype(), if op.is_comparison() { DType::Bool } else { dtype });
                    let want: Vec<f64> = xa.iter().zip(&xb).map(|(&x, &y)| binary_ref(*op, x, y)).collect();
                    let want = if op.is_comparison() { want } else { rounded(dtype, &want) };
                    assert_close(&logical(&values(&out), &ol), &want, tol(dtype), &format!("{op:?} {dtype} {na}/{nb} {shape:?}"));
                }
            }
        }
    }
}

#[test]
fn maximum_minimum_propagate_nan() {
    let l = Layout::contiguous(&[3]);
    let a = storage(DType::F32, &[f64::NAN, 1.0, 2.0]);
    let b = storage(DType::F32, &[0.0, f64::NAN, 3.0]);
    for op in [OpKind::Maximum, OpKind::Minimum] {
        let v = values(&binary(op, &a, &l, &b, &l, &row_major(&l)).unwrap());
        assert!(v[0].is_nan() && v[1].is_nan(), "{op:?}: {v:?}");
    }
    assert_eq!(values(&binary(OpKind::Maximum, &a, &l, &b, &l, &row_major(&l)).unwrap())[2], 3.0);
    assert_eq!(values(&binary(OpKind::Ne, &a, &l, &a, &l, &row_major(&l)).unwrap()), vec![1.0, 0.0, 0.0]);
}

#[test]
fn binary_int_and_bool() {
    let la = Layout::contiguous(&[2, 3]);
    let lb = Layout::new(vec![2, 3], vec![0, 1], 0);
    let a = CpuStorage::I64(vec![1, 5, -7, i64::MAX, 0, 3]);
    let b = CpuStorage::I64(vec![2, 5, 4]);
    assert_eq!(binary(OpKind::Add, &a, &la, &b, &lb, &row_major(&la)).unwrap(), CpuStorage::I64(vec![3, 10, -3, i64::MIN + 1, 5, 7]));
    assert_eq!(binary(OpKind::Sub, &a, &la, &b, &lb, &row_major(&la)).unwrap(), CpuStorage::I64(vec![-1, 0, -11, i64::MAX - 2, -5, -1]));
    assert_eq!(binary(OpKind::Mul, &a, &la, &b, &lb, &row_major(&la)).unwrap(), CpuStorage::I64(vec![2, 25, -28, -2, 0, 12]));
    assert_eq!(binary(OpKind::Maximum, &a, &la, &b, &lb, &row_major(&la)).unwrap(), CpuStorage::I64(vec![2, 5, 4, i64::MAX, 5, 4]));
    assert_eq!(binary(OpKind::Minimum, &a, &la, &b, &lb, &row_major(&la)).unwrap(), CpuStorage::I64(vec![1, 5, -7, 2, 0, 3]));
    assert_eq!(binary(OpKind::Le, &a, &la, &b, &lb, &row_major(&la)).unwrap(), CpuStorage::Bool(vec![true, true, true, false, true, true]));
    assert!(binary(OpKind::Div, &a, &la, &b, &lb, &row_major(&la)).is_err());
    // PyTorch's integer pow: exact, wrapping on overflow; a negative
    // exponent gives 1 (base 1), +-1 (base -1), else 0.
    let pow = binary(OpKind::Pow, &a, &la, &b, &lb, &row_major(&la)).unwrap();
    assert_eq!(pow, CpuStorage::I64(vec![1, 3125, 2401, i64::MAX.wrapping_mul(i64::MAX), 0, 81]));
    let (base, neg) = (CpuStorage::I64(vec![1, -1, -1, 0, 2, -5]), CpuStorage::I64(vec![-3, -3, -2, -1, -1, -4]));
    let l6 = Layout::contiguous(&[6]);
    assert_eq!(binary(OpKind::Pow, &base, &l6, &neg, &l6, &row_major(&l6)).unwrap(), CpuStorage::I64(vec![1, -1, 1, 0, 0, 0]));

    let l = Layout::contiguous(&[4]);
    let p = CpuStorage::Bool(vec![false, false, true, true]);
    let q = CpuStorage::Bool(vec![false, true, false, true]);
    assert_eq!(binary(OpKind::Add, &p, &l, &q, &l, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![false, true, true, true]));
    assert_eq!(binary(OpKind::Maximum, &p, &l, &q, &l, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![false, true, true, true]));
    assert_eq!(binary(OpKind::Mul, &p, &l, &q, &l, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![false, false, false, true]));
    assert_eq!(binary(OpKind::Minimum, &p, &l, &q, &l, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![false, false, false, true]));
    assert_eq!(binary(OpKind::Eq, &p, &l, &q, &l, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![true, false, false, true]));
    assert_eq!(binary(OpKind::Ne, &p, &l, &q, &l, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![false, true, true, false]));
    assert!(binary(OpKind::Sub, &p, &l, &q, &l, &row_major(&l)).is_err());
    assert!(binary(OpKind::Div, &p, &l, &q, &l, &row_major(&l)).is_err());
}

#[test]
fn binary_rejects_mismatches() {
    let l = Layout::contiguous(&[2]);
    let a = storage(DType::F32, &[1.0, 2.0]);
    let b = storage(DType::F64, &[1.0, 2.0]);
    assert!(matches!(binary(OpKind::Add, &a, &l, &b, &l, &row_major(&l)), Err(AotError::DTypeMismatch { .. })));
    let l3 = Layout::new(vec![3], vec![0], 0);
    assert!(matches!(binary(OpKind::Add, &a, &l, &a, &l3, &row_major(&l)), Err(AotError::ShapeMismatch { .. })));
}

#[test]
fn binary_scalar_matches_reference() {
    for (name, l) in layouts(&[3, 4]) {
        let data = random_values(l.storage_extent(), 0.5, 2.0, 3);
        for dtype in DType::FLOATS {
            let a = storage(dtype, &data);
            let xa = logical(&values(&a), &l);
            for op in ARITH.iter().chain(&CMP) {
                for first in [false, true] {
                    let s = 1.25;
                    let out = binary_scalar(*op, &a, &l, s, first, &row_major(&l)).unwrap();
                    let want: Vec<f64> = xa.iter().map(|&x| if first { binary_ref(*op, s, x) } else { binary_ref(*op, x, s) }).collect();
                    let want = if op.is_comparison() { want } else { rounded(dtype, &want) };
                    assert_close(&values(&out), &want, tol(dtype), &format!("{op:?} first={first} {dtype} {name}"));
                }
            }
        }
    }
}

#[test]
fn binary_scalar_rounding_follows_torch() {
    let l = Layout::contiguous(&[1]);
    // comparisons cast the scalar to the tensor's dtype ...
    let h = storage(DType::F16, &[0.1]);
    assert_eq!(binary_scalar(OpKind::Eq, &h, &l, 0.1, false, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![true]));
    let f = storage(DType::F32, &[0.1]);
    assert_eq!(binary_scalar(OpKind::Eq, &f, &l, 0.1, false, &row_major(&l)).unwrap(), CpuStorage::Bool(vec![true]));
    // ... arithmetic on f16 uses it in f32 and rounds once.
    let x = storage(DType::F16, &[1000.0]);
    let got = values(&binary_scalar(OpKind::Mul, &x, &l, 0.1, false, &row_major(&l)).unwrap())[0];
    assert_eq!(got, half::f16::from_f32(1000.0 * 0.1f32).to_f64());
    // rsub / rdiv / rpow
    let a = storage(DType::F64, &[2.0]);
    assert_eq!(values(&binary_scalar(OpKind::Sub, &a, &l, 10.0, true, &row_major(&l)).unwrap()), vec![8.0]);
    assert_eq!(values(&binary_scalar(OpKind::Div, &a, &l, 10.0, true, &row_major(&l)).unwrap()), vec![5.0]);
    assert_eq!(values(&binary_scalar(OpKind::Pow, &a, &l, 3.0, true, &row_major(&l)).unwrap()), vec![9.0]);
    let i = CpuStorage::I64(vec![7, -2]);
    let l2 = Layout::contiguous(&[2]);
    assert_eq!(binary_scalar(OpKind::Sub, &i, &l2, 1.0, true, &row_major(&l2)).unwrap(), CpuStorage::I64(vec![-6, 3]));
    assert_eq!(binary_scalar(OpKind::Gt, &i, &l2, 0.0, false, &row_major(&l2)).unwrap(), CpuStorage::Bool(vec![true, false]));
    assert!(binary_scalar(OpKind::Div, &i, &l2, 2.0, false, &row_major(&l2)).is_err());
    let b = CpuStorage::Bool(vec![true, false]);
    assert_eq!(binary_scalar(OpKind::Mul, &b, &l2, 1.0, false, &row_major(&l2)).unwrap(), CpuStorage::Bool(vec![true, false]));
}

#[test]
fn where_selects_with_broadcast_condition() {
    let cond = CpuStorage::Bool(vec![true, false, true]);
    let lc = Layout::new(vec![2, 3], vec![0, 1], 0);
    let a = storage(DType::F32, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let la = Layout::contiguous(&[3, 2]).t("t").unwrap(); // [[0,2,4],[1,3,5]]
    let b = storage(DType::F32, &[-1.0]);
    let lb = Layout::new(vec![2, 3], vec![0, 0], 0);
    let out = where_cond(&cond, &lc, &a, &la, &b, &lb, &row_major(&lc)).unwrap();
    assert_eq!(values(&out), vec![0.0, -1.0, 4.0, 1.0, -1.0, 5.0]);
    // big, all dtypes
    let n = 50_000;
    let c: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let l = Layout::contiguous(&[n]);
    for dtype in DType::ALL {
        let a = CpuStorage::zeros("test", dtype, n).unwrap();
        let b = CpuStorage::full("test", dtype, n, 1.0).unwrap();
        let out = where_cond(&CpuStorage::Bool(c.clone()), &l, &a, &l, &b, &l, &row_major(&l)).unwrap();
        assert_eq!(out.dtype(), dtype);
        let want: Vec<f64> = c.iter().map(|&c| if c { 0.0 } else { 1.0 }).collect();
        assert_eq!(values(&out), want);
    }
    assert!(where_cond(&a, &la, &a, &la, &a, &la, &row_major(&la)).is_err(), "condition must be bool");
    let i = CpuStorage::I64(vec![1]);
    assert!(where_cond(&cond, &lc, &a, &la, &i, &lb, &row_major(&lc)).is_err(), "dtype mismatch");
}

#[test]
fn clamp_bounds_and_nan() {
    let l = Layout::contiguous(&[5]);
    for dtype in DType::FLOATS {
        let s = storage(dtype, &[-2.0, 0.5, 3.0, f64::NAN, 1.0]);
        let v = values(&clamp(&s, &l, Some(0.0), Some(1.0), &row_major(&l)).unwrap());
        assert_eq!(&v[..3], &[0.0, 0.5, 1.0]);
        assert!(v[3].is_nan());
        assert_eq!(values(&clamp(&s, &l, Some(0.0), None, &row_major(&l)).unwrap())[..3], [0.0, 0.5, 3.0]);
        assert_eq!(values(&clamp(&s, &l, None, Some(1.0), &row_major(&l)).unwrap())[..3], [-2.0, 0.5, 1.0]);
        // min > max gives max
        assert_eq!(values(&clamp(&s, &l, Some(2.0), Some(1.0), &row_major(&l)).unwrap())[..3], [1.0, 1.0, 1.0]);
        let v = values(&clamp(&s, &l, Some(f64::NAN), None, &row_major(&l)).unwrap());
        assert!(v.iter().all(|x| x.is_nan()));
    }
    let lt = Layout::contiguous(&[2, 2]).t("t").unwrap();
    let i = CpuStorage::I64(vec![-5, 2, 7, 0]);
    assert_eq!(clamp(&i, &lt, Some(-1.0), Some(3.0), &row_major(&lt)).unwrap(), CpuStorage::I64(vec![-1, 3, 2, 0]));
    assert!(clamp(&CpuStorage::Bool(vec![true]), &Layout::contiguous(&[1]), None, None, &row_major(&Layout::contiguous(&[1]))).is_err());
}

#[test]
fn cast_between_all_dtypes() {
    let data = [-2.7, -0.0, 0.0, 0.5, 1.0, 3.9, 1e6];
    let l = Layout::contiguous(&[7]);
    for from in DType::ALL {
        let s = storage(from, &data);
        let xs = values(&s);
        for to in DType::ALL {
            let out = cast(&s, &l, to, &row_major(&l)).unwrap();
            assert_eq!(out.dtype(), to);
            let want: Vec<f64> = xs.iter().map(|&x| values(&storage(to, &[x]))[0]).collect();
            assert_eq!(values(&out), want, "{from} -> {to}");
        }
    }
    let f = storage(DType::F32, &[-2.7, 2.7, 0.0, f64::NAN]);
    let l4 = Layout::contiguous(&[4]);
    assert_eq!(cast(&f, &l4, DType::I64, &row_major(&l4)).unwrap(), CpuStorage::I64(vec![-2, 2, 0, 0]));
    assert_eq!(cast(&f, &l4, DType::Bool, &row_major(&l4)).unwrap(), CpuStorage::Bool(vec![true, true, false, true]));
    // non-contiguous gather and large i64 stay exact
    let big = CpuStorage::I64(vec![(1 << 60) + 1, 2, 3, 4, 5, 6]);
    let lt = Layout::contiguous(&[2, 3]).t("t").unwrap();
    assert_eq!(cast(&big, &lt, DType::I64, &row_major(&lt)).unwrap(), CpuStorage::I64(vec![(1 << 60) + 1, 4, 2, 5, 3, 6]));
    assert_eq!(values(&cast(&big, &lt, DType::F64, &row_major(&lt)).unwrap())[1..], [4.0, 2.0, 5.0, 3.0, 6.0]);
}

#[test]
fn copy_strided_into_views() {
    // into a transposed view, with a cast
    let src = storage(DType::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let ls = Layout::contiguous(&[2, 3]);
    let mut dst = CpuStorage::zeros("test", DType::F64, 7).unwrap();
    let ld = Layout::new(vec![2, 3], vec![1, 2], 1);
    copy_strided(&src, &ls, &mut dst, &ld).unwrap();
    assert_eq!(values(&dst), vec![0.0, 1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // same dtype, contiguous destination slice, strided source
    let mut dst = CpuStorage::zeros("test", DType::F32, 8).unwrap();
    copy_strided(&src, &ls.t("t").unwrap(), &mut dst, &Layout::new(vec![3, 2], vec![2, 1], 1)).unwrap();
    assert_eq!(values(&dst), vec![0.0, 1.0, 4.0, 2.0, 5.0, 3.0, 6.0, 0.0]);
    // same numel, other shape: row-major order
    let mut dst = CpuStorage::zeros("test", DType::I64, 6).unwrap();
    copy_strided(&src, &ls.t("t").unwrap(), &mut dst, &Layout::contiguous(&[6])).unwrap();
    assert_eq!(dst, CpuStorage::I64(vec![1, 4, 2, 5, 3, 6]));
    // broadcast source
    let mut dst = CpuStorage::zeros("test", DType::BF16, 6).unwrap();
    copy_strided(&src, &Layout::new(vec![2, 3], vec![0, 1], 3), &mut dst, &Layout::contiguous(&[3, 2]).t("t").unwrap()).unwrap();
    assert_eq!(values(&dst), vec![4.0, 4.0, 5.0, 5.0, 6.0, 6.0]);
    // errors
    let mut dst = CpuStorage::zeros("test", DType::F32, 4).unwrap();
    assert!(copy_strided(&src, &ls, &mut dst, &Layout::contiguous(&[4])).is_err());
    assert!(copy_strided(&src, &ls, &mut dst, &Layout::contiguous(&[2, 3])).is_err());
    // large, parallel path, every dtype pair
    let n = 40_000;
    let data: Vec<f64> = (0..n).map(|i| (i % 7) as f64).collect();
    let lt = Layout::contiguous(&[200, 200]).t("t").unwrap();
    for from in DType::ALL {
        let s = storage(from, &data);
        let want = logical(&values(&s), &lt);
        for to in DType::ALL {
            let mut d = CpuStorage::zeros("test", to, n).unwrap();
            copy_strided(&s, &lt, &mut d, &Layout::contiguous(&[200, 200])).unwrap();
            let want: Vec<f64> = want.iter().map(|&x| values(&storage(to, &[x]))[0]).collect();
            assert_eq!(values(&d), want, "{from} -> {to}");
        }
    }
}

#[test]
fn fill_only_touches_the_view() {
    let mut d = CpuStorage::zeros("test", DType::F32, 12).unwrap();
    let l = Layout::contiguous(&[3, 4]).slice("s", 1, 1, 4, 2).unwrap(); // columns 1 and 3
    fill(&mut d, &l, 2.5);
    assert_eq!(values(&d), vec![0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5, 0.0, 2.5]);
    let mut d = CpuStorage::zeros("test", DType::I64, 5).unwrap();
    fill(&mut d, &Layout::new(vec![3], vec![1], 1), 7.0);
    assert_eq!(d, CpuStorage::I64(vec![0, 7, 7, 7, 0]));
    let mut d = CpuStorage::zeros("test", DType::Bool, 2).unwrap();
    fill(&mut d, &Layout::new(vec![2, 2], vec![0, 1], 0), 3.0);
    assert_eq!(d, CpuStorage::Bool(vec![true, true]));
    fill(&mut d, &Layout::new(vec![0], vec![1], 10), 3.0);
}

#[test]
fn names() {
    assert_eq!(OpKind::Reciprocal.name(), "reciprocal");
    assert_eq!(OpKind::Maximum.name(), "maximum");
    assert!(OpKind::Ge.is_comparison() && !OpKind::Pow.is_comparison());
}

#[test]
fn every_kernel_writes_the_layout_it_is_given() {
    // a [2, 3, 4] input stored as [4, 2, 3] (dim 2 outermost)
    let base = Layout::contiguous(&[4, 2, 3]);
    let l = base.permute("p", &[1, 2, 0]).unwrap();
    let data: Vec<f64> = (0..24).map(|i| i as f64 - 11.5).collect();
    let want = logical(&data, &l);
    let src = storage(DType::F64, &data);
    let outs = [row_major(&l), preserve_layout(&l), Layout::new(vec![2, 3, 4], vec![1, 8, 2], 0)];
    for ol in &outs {
        let read = |s: &CpuStorage| logical(&values(s), ol);
        assert_eq!(read(&unary(OpKind::Neg, &src, &l, ol).unwrap()), want.iter().map(|x| -x).collect::<Vec<_>>());
        assert_eq!(read(&clamp(&src, &l, Some(0.0), None, ol).unwrap()), want.iter().map(|x| x.max(0.0)).collect::<Vec<_>>());
        assert_eq!(read(&cast(&src, &l, DType::F32, ol).unwrap()), want);
        assert_eq!(read(&binary_scalar(OpKind::Sub, &src, &l, 1.0, true, ol).unwrap()), want.iter().map(|x| 1.0 - x).collect::<Vec<_>>());
        let ones = storage(DType::F64, &[2.0]);
        let bl = Layout::new(vec![2, 3, 4], vec![0, 0, 0], 0);
        assert_eq!(read(&binary(OpKind::Mul, &src, &l, &ones, &bl, ol).unwrap()), want.iter().map(|x| 2.0 * x).collect::<Vec<_>>());
        let cond = CpuStorage::Bool((0..24).map(|i| i % 3 == 0).collect());
        let lc = Layout::contiguous(&[2, 3, 4]);
        let picked: Vec<f64> = want.iter().enumerate().map(|(i, &x)| if i % 3 == 0 { x } else { 2.0 }).collect();
        assert_eq!(read(&where_cond(&cond, &lc, &src, &l, &ones, &bl, ol).unwrap()), picked);
    }
    // outputs that are not dense, or of another shape, are refused
    let gap = Layout::new(vec![2, 3, 4], vec![24, 8, 2], 0);
    assert!(unary(OpKind::Neg, &src, &l, &gap).is_err());
    assert!(cast(&src, &l, DType::F32, &Layout::contiguous(&[24])).is_err());
}

/// An empty tensor may sit at an offset past its storage's end (the
/// differential test found one through the vectorised path).
#[test]
fn unary_of_an_empty_tensor_past_the_end() {
    let src = storage(DType::F32, &[0.5; 14]);
    let l = Layout::new(vec![0usize], vec![1usize], 15);
    for op in [OpKind::Tanh, OpKind::Exp, OpKind::Neg] {
        let out = unary(op, &src, &l, &row_major(&l)).unwrap();
        assert!(values(&out).is_empty(), "{op:?}");
    }
}

/// An in-place op on an empty tensor past its buffer's end writes nothing
/// and succeeds (the differential test found the dense path refusing it).
#[test]
fn inplace_binary_of_an_empty_tensor_past_the_end() {
    let l = Layout::new(vec![0usize], vec![1usize], 5);
    for dtype in [DType::F32, DType::F64] {
        let mut a = storage(dtype, &[1.0, 2.0, 3.0]);
        let b = storage(dtype, &[4.0, 5.0, 6.0]);
        crate::cpu::binary_assign(OpKind::Add, &mut a, &l, &b, &l).unwrap();
        assert_eq!(values(&a), vec![1.0, 2.0, 3.0], "{dtype}");
    }
}
