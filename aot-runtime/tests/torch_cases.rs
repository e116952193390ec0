//! Cases whose expected values come from PyTorch itself (computed by
//! tests/torch_cases.py, pasted below as constants, each under the Python
//! code that produced it). Gradients are of `(out * W(out)).sum()` with
//! `W(out) = sin(1..=numel)` reshaped like `out`.
// The pasted values are PyTorch's (e.g. sqrt(2) spelled out).
#![allow(clippy::approx_constant)]

mod common;

use aot_runtime::prelude::*;
use common::*;

/// PyTorch's result: row-major values, shape, layout (strides and storage
/// offset) and dtype.
struct Expect {
    vals: &'static [f64],
    shape: &'static [usize],
    stride: &'static [usize],
    offset: usize,
    dtype: &'static str,
}

#[track_caller]
fn check(t: &Tensor, e: &Expect, tol: f64) {
    assert_eq!(t.shape(), e.shape.to_vec(), "shape");
    assert_eq!(t.stride(), e.stride.to_vec(), "stride");
    assert_eq!(t.storage_offset(), e.offset, "storage offset");
    assert_eq!(t.dtype().name(), e.dtype, "dtype");
    let v = vals(t);
    assert_eq!(v.len(), e.vals.len());
    for (i, (&a, &b)) in v.iter().zip(e.vals).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= tol * b.abs().max(1.0)
        };
        assert!(ok, "element {i}: got {a}, PyTorch {b}\n got     {v:?}\n PyTorch {:?}", e.vals);
    }
}

const X23: [f64; 6] = [0.5, -1.25, 2.0, 1.5, 0.25, -0.75];
const X34: [f64; 12] = [0.3, -1.2, 2.5, 0.7, 1.1, 0.4, -0.9, 1.8, -0.6, 2.2, 0.05, -1.4];
const X43: [f64; 12] = [0.9, -0.3, 1.6, -2.1, 0.75, 0.2, 1.3, -1.1, 0.45, 0.6, 2.4, -0.8];
const C43: [bool; 12] = [true, false, true, false, false, true, true, true, false, false, true, true];

/// `torch.arange(24) * 0.25 - 2.9` (the Python side's X234), shape [2, 3, 4].
fn x234() -> Vec<f64> {
    (0..24).map(|i| i as f64 * 0.25 - 2.9).collect()
}
const TOL: f64 = 1e-12;

/// `[out, grad of each input]` for `(f(inputs) * W).sum()`, inputs f64 leaves.
fn grads(f: impl Fn(&[Tensor]) -> Result<Tensor>, ins: &[(&[f64], &[usize])]) -> Result<Vec<Tensor>> {
    let leaves: Vec<Tensor> = ins.iter().map(|(v, s)| t64(v, s).requires_grad_(true)).collect::<Result<_>>()?;
    let out = f(&leaves)?;
    let n = out.numel();
    let w = Tensor::from_vec((1..=n).map(|i| (i as f64).sin()).collect::<Vec<_>>(), &out.shape(), &Device::Cpu)?;
    out.mul(&w)?.sum()?.backward()?;
    let mut res = vec![out.detach()?];
    for l in &leaves {
        res.push(l.grad().unwrap_or(l.zeros_like()?));
    }
    Ok(res)
}

fn i64t(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap()
}

// ---------------------------------------------------------------- promotion

#[test]
fn promotion_f16_plus_bf16() -> Result<()> {
    let r = tdt(&[1.5, -2.25], &[2], DType::F16).add(&tdt(&[0.1, 3.3], &[2], DType::BF16))?;
    check(&r, &PROMO_F16_BF16, 0.0);
    Ok(())
}

#[test]
fn promotion_int_plus_float_scalar() -> Result<()> {
    check(&i64t(&[1, -2, 7], &[3]).add(2.5)?, &PROMO_INT_FLOAT_SCALAR, 0.0);
    Ok(())
}

#[test]
fn promotion_int_true_division() -> Result<()> {
    check(&i64t(&[7, -7, 1], &[3]).div(&i64t(&[2, 2, 3], &[3]))?, &PROMO_INT_TRUEDIV, 0.0);
    Ok(())
}

#[test]
fn promotion_zero_dim_tensors() -> Result<()> {
    let z = t64(&[0.1], &[]);
    check(&i64t(&[1, 2], &[2]).mul(&z)?, &PROMO_INT_0DIM_F64, 0.0);
    check(&tdt(&[1.0, 3.0], &[2], DType::F32).mul(&z)?, &PROMO_F32_0DIM_F64, 0.0);
    let b = Tensor::from_vec(vec![true, false], &[2], &Device::Cpu)?;
    check(&b.add(&i64t(&[3], &[]))?, &PROMO_BOOL_INT, 0.0);
    Ok(())
}

#[test]
fn promotion_f16_times_python_float() -> Result<()> {
    check(&tdt(&[1.0, 1000.0, 3.0], &[3], DType::F16).mul(0.1)?, &PROMO_F16_SCALAR, 0.0);
    Ok(())
}

// ---------------------------------------------------------------- gradients

#[test]
fn broadcasting_grads() -> Result<()> {
    let g = grads(|x| x[0].mul(&x[1])?.add(&x[0]), &[(&[0.5, -1.0, 2.0, 1.5, 0.25, -0.5], &[2, 1, 3]), (&[1.0, 2.0, -3.0, 0.5], &[4, 1])])?;
    check(&g[0], &BCAST, TOL);
    check(&g[1], &BCAST_GX, TOL);
    check(&g[2], &BCAST_GY, TOL);
    Ok(())
}

#[test]
fn copy_slices_grads() -> Result<()> {
    let g = grads(
        |x| {
            let b = x[0].mul(2.0)?;
            b.narrow(0, 1, 2)?.copy_(&x[1])?;
            b.mul(&x[0])
        },
        &[(&X34, &[3, 4]), (&[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 2.0], &[2, 4])],
    )?;
    check(&g[0], &COPYSLICES, TOL);
    check(&g[1], &COPYSLICES_GX, TOL);
    check(&g[2], &COPYSLICES_GY, TOL);
    Ok(())
}

#[test]
fn inplace_mul_on_view_grads() -> Result<()> {
    let g = grads(
        |x| {
            let b = x[0].mul(1.0)?;
            b.narrow(0, 1, 2)?.mul_(&x[1])?;
            b.exp()
        },
        &[(&X34, &[3, 4]), (&[0.5, -1.0, 2.0, 1.5], &[4])],
    )?;
    check(&g[0], &INPLACE_VIEW_MUL, TOL);
    check(&g[1], &INPLACE_VIEW_MUL_GX, TOL);
    check(&g[2], &INPLACE_VIEW_MUL_GY, TOL);
    Ok(())
}

#[test]
fn t_inplace_then_matmul_grads() -> Result<()> {
    let g = grads(
        |x| {
            let b = x[0].mul(1.0)?;
            b.t_()?;
            b.matmul(&x[1])
        },
        &[(&X23, &[2, 3]), (&[1.0, -1.0, 0.5, 2.0], &[2, 2])],
    )?;
    check(&g[0], &T_INPLACE_MATMUL, TOL);
    check(&g[1], &T_INPLACE_MATMUL_GX, TOL);
    check(&g[2], &T_INPLACE_MATMUL_GY, TOL);
    Ok(())
}

#[test]
fn var_correction() -> Result<()> {
    let x = t64(&X34, &[3, 4]);
    check(&x.var_dim(&[1], 0, false)?, &VAR_C0, TOL);
    check(&x.var_dim(&[1], 1, false)?, &VAR_C1, TOL);
    check(&x.var_dim(&[0], 2, true)?, &VAR_C2_KEEP, TOL);
    let g = grads(|x| x[0].var_dim(&[0, 1], 1, false), &[(&X34, &[3, 4])])?;
    check(&g[0], &VAR_GRAD, TOL);
    check(&g[1], &VAR_GRAD_GX, TOL);
    Ok(())
}

#[test]
fn softmax_grads() -> Result<()> {
    let g = grads(|x| x[0].softmax(-1), &[(&X34, &[3, 4])])?;
    check(&g[0], &SOFTMAX, TOL);
    check(&g[1], &SOFTMAX_GX, TOL);
    let g = grads(|x| x[0].log_softmax(0), &[(&X34, &[3, 4])])?;
    check(&g[0], &LOG_SOFTMAX, TOL);
    check(&g[1], &LOG_SOFTMAX_GX, TOL);
    Ok(())
}

#[test]
fn gelu_values_and_grads() -> Result<()> {
    let g = grads(|x| x[0].gelu(), &[(&[-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0], &[7])])?;
    check(&g[0], &GELU, TOL);
    check(&g[1], &GELU_GX, TOL);
    Ok(())
}

#[test]
fn amax_ties_split_evenly() -> Result<()> {
    let g = grads(|x| x[0].amax_dim(&[1], false), &[(&[1.0, 3.0, 3.0, 2.0, 2.0, 2.0], &[2, 3])])?;
    check(&g[0], &AMAX_TIES, TOL);
    check(&g[1], &AMAX_TIES_GX, TOL);
    let g = grads(|x| x[0].amax_dim(&[0, 1], true), &[(&[1.0, 3.0, 3.0, 0.0], &[2, 2])])?;
    check(&g[0], &AMAX_TIES_ALL, TOL);
    check(&g[1], &AMAX_TIES_ALL_GX, TOL);
    Ok(())
}

#[test]
fn maximum_minimum_ties_split_half() -> Result<()> {
    let ins: [(&[f64], &[usize]); 2] = [(&[1.0, 2.0, 3.0, -1.0], &[4]), (&[1.0, 0.5, 3.0, 2.0], &[4])];
    let g = grads(|x| x[0].maximum(&x[1]), &ins)?;
    check(&g[0], &MAXIMUM_TIES, TOL);
    check(&g[1], &MAXIMUM_TIES_GA, TOL);
    check(&g[2], &MAXIMUM_TIES_GB, TOL);
    let g = grads(|x| x[0].minimum(&x[1]), &ins)?;
    check(&g[0], &MINIMUM_TIES, TOL);
    check(&g[1], &MINIMUM_TIES_GA, TOL);
    check(&g[2], &MINIMUM_TIES_GB, TOL);
    Ok(())
}

/// Away from the bounds clamp's gradient is PyTorch's.
#[test]
fn clamp_grads_away_from_the_bounds() -> Result<()> {
    let g = grads(|x| x[0].clamp(-0.5, 0.5), &[(&[-1.0, -0.5, 0.0, 0.5, 1.0], &[5])])?;
    check(&g[0], &CLAMP_BOUNDS, TOL);
    let (got, want) = (vals(&g[1]), CLAMP_BOUNDS_GX.vals);
    for i in [0, 2, 4] {
        assert_eq!(got[i], want[i], "element {i}");
    }
    Ok(())
}

/// PyTorch 2.15 (which generated CLAMP_BOUNDS_GX) gives 0 at x == min and
/// x == max for scalar bounds; the runtime follows it.
#[test]
fn clamp_at_the_bounds_matches_torch_2_15() -> Result<()> {
    let g = grads(|x| x[0].clamp(-0.5, 0.5), &[(&[-1.0, -0.5, 0.0, 0.5, 1.0], &[5])])?;
    check(&g[1], &CLAMP_BOUNDS_GX, TOL);
    Ok(())
}

#[test]
fn pow_at_zero() -> Result<()> {
    let g = grads(|x| x[0].pow(&x[1]), &[(&[0.0, 0.0, 2.0, 3.0, 0.0], &[5]), (&[2.0, 0.0, 0.5, 0.0, 1.0], &[5])])?;
    check(&g[0], &POW_TT_ZERO, TOL);
    check(&g[1], &POW_TT_ZERO_GA, TOL);
    check(&g[2], &POW_TT_ZERO_GB, TOL);
    let g = grads(|x| x[0].pow(2.0)?.add(&x[0].pow(0.0)?)?.add(&x[0].pow(3i64)?), &[(&[0.0, 1.5, -2.0], &[3])])?;
    check(&g[0], &POW_SCALAR_ZERO, TOL);
    check(&g[1], &POW_SCALAR_ZERO_GX, TOL);
    let g = grads(|x| x[0].rpow(2.0), &[(&[0.0, 1.5, -2.0], &[3])])?;
    check(&g[0], &RPOW, TOL);
    check(&g[1], &RPOW_GX, TOL);
    Ok(())
}

#[test]
fn matmul_one_d_cases() -> Result<()> {
    let mm = |x: &[Tensor]| x[0].matmul(&x[1]);
    let g = grads(mm, &[(&[1.0, 2.0, -1.0], &[3]), (&[0.5, -0.5, 2.0], &[3])])?;
    check(&g[0], &MATMUL_1D_1D, TOL);
    check(&g[1], &MATMUL_1D_1D_GA, TOL);
    check(&g[2], &MATMUL_1D_1D_GB, TOL);
    let g = grads(mm, &[(&X23, &[2, 3]), (&[0.5, -0.5, 2.0], &[3])])?;
    check(&g[0], &MATMUL_2D_1D, TOL);
    check(&g[1], &MATMUL_2D_1D_GA, TOL);
    check(&g[2], &MATMUL_2D_1D_GB, TOL);
    let b = [1.0, 0.5, -1.0, 2.0, 0.25, 0.0, 0.0, 1.0, 1.0, 0.0, 2.0, -2.0];
    let g = grads(mm, &[(&X23, &[1, 1, 2, 3]), (&b, &[2, 3, 2])])?;
    check(&g[0], &MATMUL_BATCH_BCAST, TOL);
    check(&g[1], &MATMUL_BATCH_BCAST_GA, TOL);
    check(&g[2], &MATMUL_BATCH_BCAST_GB, TOL);
    Ok(())
}

#[test]
fn matmul_1d_first_operand() -> Result<()> {
    let mm = |x: &[Tensor]| x[0].matmul(&x[1]);
    let g = grads(mm, &[(&[1.0, -2.0], &[2]), (&X23, &[2, 3])])?;
    check(&g[0], &MATMUL_1D_2D, TOL);
    check(&g[1], &MATMUL_1D_2D_GA, TOL);
    check(&g[2], &MATMUL_1D_2D_GB, TOL);
    let x2: Vec<f64> = X23.iter().chain(X23.iter()).copied().collect();
    let g = grads(mm, &[(&[1.0, -2.0], &[2]), (&x2, &[2, 2, 3])])?;
    check(&g[0], &MATMUL_1D_3D, TOL);
    check(&g[1], &MATMUL_1D_3D_GA, TOL);
    check(&g[2], &MATMUL_1D_3D_GB, TOL);
    Ok(())
}

#[test]
fn reshape_of_transposed() -> Result<()> {
    let ar = Tensor::arange(0.0, 6.0, 1.0, DType::F64, &Device::Cpu)?;
    let g = grads(|x| x[0].t()?.reshape(&[-1])?.mul(&ar), &[(&X23, &[2, 3])])?;
    check(&g[0], &RESHAPE_T, TOL);
    check(&g[1], &RESHAPE_T_GX, TOL);
    Ok(())
}

#[test]
fn unary_mix_grads_at_kinks() -> Result<()> {
    let g = grads(
        |x| x[0].sigmoid()?.add(&x[0].tanh()?)?.add(&x[0].silu()?)?.add(&x[0].abs()?)?.add(&x[0].relu()?),
        &[(&[-2.0, -0.5, 0.0, 0.5, 2.0], &[5])],
    )?;
    check(&g[0], &UNARY_MIX, TOL);
    check(&g[1], &UNARY_MIX_GX, TOL);
    Ok(())
}

#[test]
fn where_broadcast_grads() -> Result<()> {
    let cond = Tensor::from_vec(vec![true, false, true], &[3], &Device::Cpu)?;
    let g = grads(|x| x[0].where_(&cond, &x[1]), &[(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]), (&[-1.0, -2.0], &[2, 1])])?;
    check(&g[0], &WHERE_BCAST, TOL);
    check(&g[1], &WHERE_BCAST_GA, TOL);
    check(&g[2], &WHERE_BCAST_GB, TOL);
    Ok(())
}

// ---------------------------------------------------------------- result layouts

#[test]
fn layout_transposed_plus_scalar() -> Result<()> {
    let g = grads(|x| x[0].t()?.add(1.0), &[(&X23, &[2, 3])])?;
    check(&g[0], &LAYOUT_T_PLUS_SCALAR, TOL);
    check(&g[1], &LAYOUT_T_PLUS_SCALAR_GX, TOL);
    Ok(())
}

#[test]
fn layout_permuted_unary() -> Result<()> {
    let g = grads(|x| x[0].permute(&[2, 0, 1])?.exp(), &[(&x234(), &[2, 3, 4])])?;
    check(&g[0], &LAYOUT_PERMUTE_EXP, TOL);
    check(&g[1], &LAYOUT_PERMUTE_EXP_GX, TOL);
    Ok(())
}

#[test]
fn layout_broadcast_mixed_operands() -> Result<()> {
    let ins: [(&[f64], &[usize]); 2] = [(&X34, &[3, 4]), (&X43, &[4, 3])];
    // the first operand's order wins
    let g = grads(|x| x[0].mul(&x[1].t()?), &ins)?;
    check(&g[0], &LAYOUT_MIXED_CT, TOL);
    check(&g[1], &LAYOUT_MIXED_CT_GA, TOL);
    check(&g[2], &LAYOUT_MIXED_CT_GB, TOL);
    let g = grads(|x| x[1].t()?.mul(&x[0]), &ins)?;
    check(&g[0], &LAYOUT_MIXED_TC, TOL);
    check(&g[1], &LAYOUT_MIXED_TC_GA, TOL);
    check(&g[2], &LAYOUT_MIXED_TC_GB, TOL);
    // a broadcast row does not vote
    let g = grads(|x| x[0].t()?.add(&x[1]), &[(&X43, &[4, 3]), (&[0.5, -1.0, 2.0, 0.25], &[4])])?;
    check(&g[0], &LAYOUT_T_PLUS_ROW, TOL);
    check(&g[1], &LAYOUT_T_PLUS_ROW_GA, TOL);
    check(&g[2], &LAYOUT_T_PLUS_ROW_GB, TOL);
    let col = tdt(&[1.0, 2.0, 3.0], &[3, 1], DType::F32);
    let row = tdt(&[0.5, -1.0, 2.0, 0.25], &[1, 4], DType::F32);
    check(&col.add(&row)?, &LAYOUT_COL_PLUS_ROW, 0.0);
    Ok(())
}

#[test]
fn layout_non_dense_inputs() -> Result<()> {
    let g = grads(|x| x[0].slice(1, 0, 4, 2)?.mul(2.0), &[(&X34, &[3, 4])])?;
    check(&g[0], &LAYOUT_SLICE, TOL);
    check(&g[1], &LAYOUT_SLICE_GX, TOL);
    let g = grads(|x| x[0].t()?.slice(1, 0, 3, 2)?.neg(), &[(&X34, &[3, 4])])?;
    check(&g[0], &LAYOUT_T_SLICE, TOL);
    check(&g[1], &LAYOUT_T_SLICE_GX, TOL);
    Ok(())
}

#[test]
fn layout_expanded_inputs() -> Result<()> {
    let r = tdt(&[0.5, -1.0, 2.0, 0.25], &[4], DType::F32).expand(&[3, 4])?.add(1.0)?;
    check(&r, &LAYOUT_EXPAND, 0.0);
    let g = grads(|x| x[0].t()?.unsqueeze(0)?.expand(&[2, 3, 2])?.mul(2.0), &[(&X23, &[2, 3])])?;
    check(&g[0], &LAYOUT_EXPAND_T, TOL);
    check(&g[1], &LAYOUT_EXPAND_T_GX, TOL);
    Ok(())
}

#[test]
fn layout_copy_and_like_preserve_format() -> Result<()> {
    let g = grads(|x| x[0].permute(&[2, 0, 1])?.copy(), &[(&x234(), &[2, 3, 4])])?;
    check(&g[0], &LAYOUT_CLONE_PERMUTED, TOL);
    check(&g[1], &LAYOUT_CLONE_PERMUTED_GX, TOL);
    let g = grads(|x| x[0].slice(1, 0, 4, 2)?.t()?.copy(), &[(&X34, &[3, 4])])?;
    check(&g[0], &LAYOUT_CLONE_SLICE_T, TOL);
    check(&g[1], &LAYOUT_CLONE_SLICE_T_GX, TOL);
    let p = tdt(&x234(), &[2, 3, 4], DType::F32).permute(&[2, 0, 1])?;
    check(&p.zeros_like()?, &LAYOUT_ZEROS_LIKE_PERMUTED, 0.0);
    let s = tdt(&X34, &[3, 4], DType::F32).slice(1, 0, 4, 2)?.t()?;
    check(&s.zeros_like()?, &LAYOUT_ZEROS_LIKE_SLICE_T, 0.0);
    // ones_like / full_like / rand_like share the layout
    for t in [s.ones_like()?, s.full_like(2.5)?, s.rand_like()?] {
        assert_eq!((t.stride(), t.storage_offset()), (LAYOUT_ZEROS_LIKE_SLICE_T.stride.to_vec(), 0));
    }
    check(&t64(&X23, &[2, 3]).t()?.to_dtype(DType::F32)?, &LAYOUT_TO_DTYPE_T, 1e-7);
    // contiguous() stays row-major
    let c = p.contiguous()?;
    assert_eq!((c.stride(), c.is_contiguous()), (vec![6, 3, 1], true));
    Ok(())
}

#[test]
fn layout_softmax_and_reductions_are_contiguous() -> Result<()> {
    let g = grads(|x| x[0].t()?.softmax(0), &[(&X34, &[3, 4])])?;
    check(&g[0], &LAYOUT_SOFTMAX_T, TOL);
    check(&g[1], &LAYOUT_SOFTMAX_T_GX, TOL);
    let g = grads(|x| x[0].permute(&[2, 0, 1])?.sum_dim(&[1], false), &[(&x234(), &[2, 3, 4])])?;
    check(&g[0], &LAYOUT_SUM_PERMUTED, TOL);
    check(&g[1], &LAYOUT_SUM_PERMUTED_GX, TOL);
    let p = t64(&x234(), &[2, 3, 4]).permute(&[2, 0, 1])?;
    check(&p.sum_dim(&[1], true)?, &LAYOUT_SUM_PERMUTED_KEEP, TOL);
    check(&p.mean_dim(&[0], false)?, &LAYOUT_MEAN_PERMUTED, TOL);
    check(&p.mean_dim(&[0], true)?, &LAYOUT_MEAN_PERMUTED_KEEP, TOL);
    Ok(())
}

#[test]
fn layout_where_mixed_operands() -> Result<()> {
    let ins: [(&[f64], &[usize]); 2] = [(&X34, &[3, 4]), (&X43, &[4, 3])];
    // the condition is the first operand
    let cond = Tensor::from_vec(C43.to_vec(), &[4, 3], &Device::Cpu)?.t()?;
    let g = grads(|x| x[0].where_(&cond, &x[1].t()?), &ins)?;
    check(&g[0], &LAYOUT_WHERE_COND_T, TOL);
    check(&g[1], &LAYOUT_WHERE_COND_T_GA, TOL);
    check(&g[2], &LAYOUT_WHERE_COND_T_GB, TOL);
    // a broadcast condition leaves the order to the values
    let row = Tensor::from_vec(vec![true, false, false, true], &[4], &Device::Cpu)?;
    let g = grads(|x| x[1].t()?.where_(&row, &x[0]), &ins)?;
    check(&g[0], &LAYOUT_WHERE_SELF_T, TOL);
    check(&g[1], &LAYOUT_WHERE_SELF_T_GA, TOL);
    check(&g[2], &LAYOUT_WHERE_SELF_T_GB, TOL);
    Ok(())
}

// ---- GENERATED by tests/torch_cases.py with torch 2.15.0+cu132
// r = torch.tensor([1.5, -2.25], dtype=torch.float16) + torch.tensor([0.1, 3.3], dtype=torch.bfloat16)
const PROMO_F16_BF16: Expect = Expect { vals: &[1.60009765625, 1.046875], shape: &[2], stride: &[1], offset: 0, dtype: "float32" };

// r = torch.tensor([1, -2, 7]) + 2.5
const PROMO_INT_FLOAT_SCALAR: Expect = Expect { vals: &[3.5, 0.5, 9.5], shape: &[3], stride: &[1], offset: 0, dtype: "float32" };

// r = torch.tensor([7, -7, 1]) / torch.tensor([2, 2, 3])
const PROMO_INT_TRUEDIV: Expect = Expect { vals: &[3.5, -3.5, 0.3333333432674408], shape: &[3], stride: &[1], offset: 0, dtype: "float32" };

// r = torch.tensor([1, 2]) * torch.tensor(0.1, dtype=torch.float64)
const PROMO_INT_0DIM_F64: Expect = Expect { vals: &[0.1, 0.2], shape: &[2], stride: &[1], offset: 0, dtype: "float64" };

// r = torch.tensor([1.0, 3.0]) * torch.tensor(0.1, dtype=torch.float64)
const PROMO_F32_0DIM_F64: Expect =
    Expect { vals: &[0.10000000149011612, 0.30000001192092896], shape: &[2], stride: &[1], offset: 0, dtype: "float32" };

// r = torch.tensor([1.0, 1000.0, 3.0], dtype=torch.float16) * 0.1
const PROMO_F16_SCALAR: Expect =
    Expect { vals: &[0.0999755859375, 100.0, 0.300048828125], shape: &[3], stride: &[1], offset: 0, dtype: "float16" };

// r = torch.tensor([True, False]) + torch.tensor(3)
const PROMO_BOOL_INT: Expect = Expect { vals: &[4.0, 3.0], shape: &[2], stride: &[1], offset: 0, dtype: "int64" };

// out, gx, gy = grads(lambda x, y: x * y + x, [[[0.5, -1.0, 2.0]], [[1.5, 0.25, -0.5]]], [[1.0], [2.0], [-3.0], [0.5]])
const BCAST: Expect = Expect {
    vals: &[
        1.0, -2.0, 4.0, 1.5, -3.0, 6.0, -1.0, 2.0, -4.0, 0.75, -1.5, 3.0, 3.0, 0.5, -1.0, 4.5, 0.75, -1.5, -3.0, -0.5, 1.0, 2.25, 0.375,
        -0.75,
    ],
    shape: &[2, 4, 3],
    stride: &[12, 3, 1],
    offset: 0,
    dtype: "float64",
};
const BCAST_GX: Expect = Expect {
    vals: &[-2.7174703800796243, -4.536879773410871, -2.185102825961209, -0.33640725960342455, -3.998198871966941, -3.9840648800828427],
    shape: &[2, 1, 3],
    stride: &[3, 3, 1],
    offset: 0,
    dtype: "float64",
};
const BCAST_GY: Expect = Expect {
    vals: &[0.34643655578312144, -0.2750186939703265, 0.19809633112783331, -0.11720906887093782],
    shape: &[4, 1],
    stride: &[1, 1],
    offset: 0,
    dtype: "float64",
};

// def f(x, y):
//     b = x * 2
//     b[1:3] = y
//     return b * x
// out, gx, gy = grads(f, X34, [[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.25, 2.0]])
const COPYSLICES: Expect = Expect {
    vals: &[0.18, 2.88, 12.5, 0.9799999999999999, 1.1, 0.8, -2.7, 7.2, 0.6, 1.1, 0.0125, -2.8],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const COPYSLICES_GX: Expect = Expect {
    vals: &[
        1.0097651817694757,
        -4.364627648763272,
        1.4112000805986722,
        -2.1190469868621986,
        -0.9589242746631385,
        -0.5588309963978517,
        1.9709597961563672,
        3.957432986493527,
        -0.4121184852417566,
        -0.2720105554446849,
        -0.24999755163767587,
        -1.0731458360008699,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const COPYSLICES_GY: Expect = Expect {
    vals: &[
        -1.0548167021294523,
        -0.11176619927957035,
        -0.5912879388469102,
        1.7808448439220872,
        -0.24727109114505394,
        -1.1968464439566135,
        -0.04999951032753518,
        0.7512020852006088,
    ],
    shape: &[2, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// def f(x, y):
//     b = x * 1
//     b[1:3].mul_(y)
//     return b.exp()
// out, gx, gy = grads(f, X34, [0.5, -1.0, 2.0, 1.5])
const INPLACE_VIEW_MUL: Expect = Expect {
    vals: &[
        1.3498588075760032,
        0.3011942119122021,
        12.182493960703473,
        2.0137527074704766,
        1.7332530178673953,
        0.6703200460356393,
        0.16529888822158653,
        14.879731724872837,
        0.7408182206817179,
        0.11080315836233387,
        1.1051709180756477,
        0.12245642825298195,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const INPLACE_VIEW_MUL_GX: Expect = Expect {
    vals: &[
        1.1358670201625922,
        0.27387512186655444,
        1.7191936459237578,
        -1.524013073946753,
        -0.8310291964830939,
        0.18729780961577508,
        0.21719830868939488,
        22.08207793431975,
        0.15265244147342147,
        0.06027925730232763,
        -2.210320189280595,
        -0.09856020455342013,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const INPLACE_VIEW_MUL_GY: Expect = Expect {
    vals: &[-2.0114471620309127, -0.20753348991143084, -0.1529972436422426, 26.590483045433555],
    shape: &[4],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};

// def f(x, y):
//     b = x * 1
//     b.t_()
//     return b @ y
// out, gx, gy = grads(f, X23, [[1.0, -1.0], [0.5, 2.0]])
const T_INPLACE_MATMUL: Expect =
    Expect { vals: &[1.25, 2.5, -1.125, 1.75, 1.625, -3.5], shape: &[3, 2], stride: &[2, 1], offset: 0, dtype: "float64" };
const T_INPLACE_MATMUL_GX: Expect = Expect {
    vals: &[-0.0678264420177852, 0.8979225033677954, -0.6795087764642126, 2.239330346055312, -1.4430449865859227, -1.038293133729421],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};
const T_INPLACE_MATMUL_GY: Expect = Expect {
    vals: &[-1.6735130669971627, 0.8418208361498993, 2.0166796852241653, 1.3843071400607347],
    shape: &[2, 2],
    stride: &[2, 1],
    offset: 0,
    dtype: "float64",
};

// r = torch.tensor(X34, dtype=f64).var(dim=1, correction=0)
const VAR_C0: Expect = Expect { vals: &[1.736875, 0.995, 1.78671875], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };

// r = torch.tensor(X34, dtype=f64).var(dim=1, correction=1)
const VAR_C1: Expect =
    Expect { vals: &[2.3158333333333334, 1.3266666666666667, 2.3822916666666667], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };

// r = torch.tensor(X34, dtype=f64).var(dim=0, correction=2, keepdim=True)
const VAR_C2_KEEP: Expect = Expect {
    vals: &[1.4466666666666665, 5.786666666666667, 6.155, 5.286666666666667],
    shape: &[1, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.var(dim=[0, 1], correction=1), X34)
const VAR_GRAD: Expect = Expect { vals: &[1.7100568181818183], shape: &[], stride: &[], offset: 0, dtype: "float64" };
const VAR_GRAD_GX: Expect = Expect {
    vals: &[
        -0.017211906507434264,
        -0.24670399327322423,
        0.3193764874157244,
        0.04398598329677639,
        0.10518387310098706,
        -0.0019124340563815934,
        -0.20080557592006623,
        0.2122801802583557,
        -0.15490715856690826,
        0.2734780700625664,
        -0.05546058763506592,
        -0.2773029381753295,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: torch.softmax(x, -1), X34)
const SOFTMAX: Expect = Expect {
    vals: &[
        0.0851791052217514,
        0.019006027389429348,
        0.768742574496026,
        0.12707229289279326,
        0.2742977549603936,
        0.13621223397630866,
        0.03712216435873185,
        0.552367846704566,
        0.05048078769402127,
        0.8301387223549227,
        0.09669800990867997,
        0.022682480042375965,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const SOFTMAX_GX: Expect = Expect {
    vals: &[
        0.06304929919457355,
        0.015357311441249034,
        0.030631163444800796,
        -0.10903777408062336,
        -0.337032981092631,
        -0.07480821685490999,
        0.014373655074494703,
        0.3974675428730463,
        0.048047375297158065,
        -0.003606387685146348,
        -0.04451139116242047,
        7.040355040875825e-05,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: torch.log_softmax(x, 0), X34)
const LOG_SOFTMAX: Expect = Expect {
    vals: &[
        -1.2898139085775626,
        -3.5812144092838674,
        -0.11303119147054319,
        -1.417459264201236,
        -0.4898139085775625,
        -1.9812144092838673,
        -3.513031191470543,
        -0.3174592642012359,
        -2.1898139085775625,
        -0.1812144092838671,
        -2.5630311914705435,
        -3.517459264201236,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const LOG_SOFTMAX_GX: Expect = Expect {
    vals: &[
        0.7603431699387292,
        0.9069069014182088,
        0.32142685433947227,
        -0.683130340850729,
        -1.13947754709363,
        -0.2912558480534791,
        0.6630040277753734,
        1.2106816299546332,
        0.3791343771549009,
        -0.6156510533647298,
        -0.9844308821148456,
        -0.5275512891039044,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: torch.nn.functional.gelu(x), [-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])
const GELU: Expect = Expect {
    vals: &[
        -0.00404969409489031,
        -0.15865525393145702,
        -0.15426876936299344,
        0.0,
        0.34573123063700656,
        0.841344746068543,
        2.99595030590511,
    ],
    shape: &[7],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};
const GELU_GX: Expect = Expect {
    vals: &[
        -0.010051915517072338,
        -0.07575854302015396,
        0.018699089076493994,
        -0.3784012476539641,
        -0.8318621331847198,
        -0.3026951319208622,
        0.6648347288449604,
    ],
    shape: &[7],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.amax(dim=1), [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
const AMAX_TIES: Expect = Expect { vals: &[3.0, 2.0], shape: &[2], stride: &[1], offset: 0, dtype: "float64" };
const AMAX_TIES_GX: Expect = Expect {
    vals: &[0.0, 0.42073549240394825, 0.42073549240394825, 0.3030991422752272, 0.3030991422752272, 0.3030991422752272],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.amax(dim=(0, 1), keepdim=True), [[1.0, 3.0], [3.0, 0.0]])
const AMAX_TIES_ALL: Expect = Expect { vals: &[3.0], shape: &[1, 1], stride: &[1, 1], offset: 0, dtype: "float64" };
const AMAX_TIES_ALL_GX: Expect =
    Expect { vals: &[0.0, 0.42073549240394825, 0.42073549240394825, 0.0], shape: &[2, 2], stride: &[2, 1], offset: 0, dtype: "float64" };

// out, ga, gb = grads(torch.maximum, [1.0, 2.0, 3.0, -1.0], [1.0, 0.5, 3.0, 2.0])
const MAXIMUM_TIES: Expect = Expect { vals: &[1.0, 2.0, 3.0, 2.0], shape: &[4], stride: &[1], offset: 0, dtype: "float64" };
const MAXIMUM_TIES_GA: Expect = Expect {
    vals: &[0.42073549240394825, 0.9092974268256817, 0.0705600040299336, 0.0],
    shape: &[4],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};
const MAXIMUM_TIES_GB: Expect = Expect {
    vals: &[0.42073549240394825, 0.0, 0.0705600040299336, -0.7568024953079282],
    shape: &[4],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(torch.minimum, [1.0, 2.0, 3.0, -1.0], [1.0, 0.5, 3.0, 2.0])
const MINIMUM_TIES: Expect = Expect { vals: &[1.0, 0.5, 3.0, -1.0], shape: &[4], stride: &[1], offset: 0, dtype: "float64" };
const MINIMUM_TIES_GA: Expect = Expect {
    vals: &[0.42073549240394825, 0.0, 0.0705600040299336, -0.7568024953079282],
    shape: &[4],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};
const MINIMUM_TIES_GB: Expect = Expect {
    vals: &[0.42073549240394825, 0.9092974268256817, 0.0705600040299336, 0.0],
    shape: &[4],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.clamp(-0.5, 0.5), [-1.0, -0.5, 0.0, 0.5, 1.0])
const CLAMP_BOUNDS: Expect = Expect { vals: &[-0.5, -0.5, 0.0, 0.5, 0.5], shape: &[5], stride: &[1], offset: 0, dtype: "float64" };
const CLAMP_BOUNDS_GX: Expect =
    Expect { vals: &[0.0, 0.0, 0.1411200080598672, 0.0, 0.0], shape: &[5], stride: &[1], offset: 0, dtype: "float64" };

// out, ga, gb = grads(torch.pow, [0.0, 0.0, 2.0, 3.0, 0.0], [2.0, 0.0, 0.5, 0.0, 1.0])
const POW_TT_ZERO: Expect =
    Expect { vals: &[0.0, 1.0, 1.4142135623730951, 1.0, 0.0], shape: &[5], stride: &[1], offset: 0, dtype: "float64" };
const POW_TT_ZERO_GA: Expect =
    Expect { vals: &[0.0, 0.0, 0.04989345733011618, 0.0, -0.9589242746631385], shape: &[5], stride: &[1], offset: 0, dtype: "float64" };
const POW_TT_ZERO_GB: Expect =
    Expect { vals: &[0.0, 0.0, 0.13833403710703185, -0.8314325214399794, -0.0], shape: &[5], stride: &[1], offset: 0, dtype: "float64" };

// out, gx = grads(lambda x: x.pow(2.0) + x.pow(0.0) + x.pow(3), [0.0, 1.5, -2.0])
const POW_SCALAR_ZERO: Expect = Expect { vals: &[1.0, 6.625, -3.0], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };
const POW_SCALAR_ZERO_GX: Expect =
    Expect { vals: &[0.0, 8.865649911550396, 1.1289600644789375], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };

// out, gx = grads(lambda x: 2.0 ** x, [0.0, 1.5, -2.0])
const RPOW: Expect = Expect { vals: &[1.0, 2.8284271247461903, 0.25], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };
const RPOW_GX: Expect =
    Expect { vals: &[0.583263240642594, 1.7826924149617398, 0.02445423392682343], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };

// out, ga, gb = grads(torch.matmul, [1.0, 2.0, -1.0], [0.5, -0.5, 2.0])
const MATMUL_1D_1D: Expect = Expect { vals: &[-2.5], shape: &[], stride: &[], offset: 0, dtype: "float64" };
const MATMUL_1D_1D_GA: Expect = Expect {
    vals: &[0.42073549240394825, -0.42073549240394825, 1.682941969615793],
    shape: &[3],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};
const MATMUL_1D_1D_GB: Expect =
    Expect { vals: &[0.8414709848078965, 1.682941969615793, -0.8414709848078965], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };

// out, ga, gb = grads(torch.matmul, X23, [0.5, -0.5, 2.0])
const MATMUL_2D_1D: Expect = Expect { vals: &[4.875, -0.875], shape: &[2], stride: &[1], offset: 0, dtype: "float64" };
const MATMUL_2D_1D_GA: Expect = Expect {
    vals: &[0.42073549240394825, -0.42073549240394825, 1.682941969615793, 0.45464871341284085, -0.45464871341284085, 1.8185948536513634],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};
const MATMUL_2D_1D_GB: Expect =
    Expect { vals: &[1.7846816326424708, -0.8245143743034502, 1.0009688994965318], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };

// out, ga, gb = grads(torch.matmul, [1.0, -2.0], X23)
const MATMUL_1D_2D: Expect = Expect { vals: &[-2.5, -1.75, 3.5], shape: &[3], stride: &[1], offset: 0, dtype: "float64" };
const MATMUL_1D_2D_GA: Expect =
    Expect { vals: &[-0.43364627500841957, 1.3836908278733648], shape: &[2], stride: &[1], offset: 0, dtype: "float64" };
const MATMUL_1D_2D_GB: Expect = Expect {
    vals: &[0.8414709848078965, 0.9092974268256817, 0.1411200080598672, -1.682941969615793, -1.8185948536513634, -0.2822400161197344],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(torch.matmul, [1.0, -2.0], [X23, X23])
const MATMUL_1D_3D: Expect =
    Expect { vals: &[-2.5, -1.75, 3.5, -2.5, -1.75, 3.5], shape: &[2, 3], stride: &[3, 1], offset: 0, dtype: "float64" };
const MATMUL_1D_3D_GA: Expect =
    Expect { vals: &[-0.17222317573131218, 0.2183176398948821], shape: &[2], stride: &[1], offset: 0, dtype: "float64" };
const MATMUL_1D_3D_GB: Expect = Expect {
    vals: &[
        0.8414709848078965,
        0.9092974268256817,
        0.1411200080598672,
        -1.682941969615793,
        -1.8185948536513634,
        -0.2822400161197344,
        -0.7568024953079282,
        -0.9589242746631385,
        -0.27941549819892586,
        1.5136049906158564,
        1.917848549326277,
        0.5588309963978517,
    ],
    shape: &[2, 2, 3],
    stride: &[6, 3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(torch.matmul, [[X23]], [[[1.0, 0.5], [-1.0, 2.0], [0.25, 0.0]], [[0.0, 1.0], [1.0, 0.0], [2.0, -2.0]]])
const MATMUL_BATCH_BCAST: Expect = Expect {
    vals: &[2.25, -2.25, 1.0625, 1.25, 2.75, -3.5, -1.25, 3.0],
    shape: &[1, 2, 2, 2],
    stride: &[8, 4, 2, 1],
    offset: 0,
    dtype: "float64",
};
const MATMUL_BATCH_BCAST_GA: Expect = Expect {
    vals: &[1.0167042000218114, 0.01819959418032846, -1.148649806726451, 0.7520770070292849, -0.9977383999569345, -0.6294632937942186],
    shape: &[1, 1, 2, 3],
    stride: &[6, 6, 3, 1],
    offset: 0,
    dtype: "float64",
};
const MATMUL_BATCH_BCAST_GB: Expect = Expect {
    vals: &[
        0.6324155044937491,
        -0.6805550295490513,
        -1.0165587289949038,
        -1.3258224073590843,
        1.5771019635708927,
        2.3861967251323097,
        0.5060177607466143,
        1.3443296208356097,
        1.3629019930086204,
        0.5966089344045028,
        -2.4105884983653687,
        -1.300849681365388,
    ],
    shape: &[2, 3, 2],
    stride: &[6, 2, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.t().reshape(-1) * torch.arange(6, dtype=f64), X23)
const RESHAPE_T: Expect = Expect { vals: &[0.0, 1.5, -2.5, 0.75, 8.0, -3.75], shape: &[6], stride: &[1], offset: 0, dtype: "float64" };
const RESHAPE_T_GX: Expect = Expect {
    vals: &[0.0, 0.2822400161197344, -3.835697098652554, 0.9092974268256817, -2.2704074859237844, -1.3970774909946293],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.sigmoid() + x.tanh() + torch.nn.functional.silu(x) + x.abs() + x.relu(), [-2.0, -0.5, 0.0, 0.5, 2.0])
const UNARY_MIX: Expect = Expect {
    vals: &[0.9167694979020655, 0.2266531771390629, 0.5, 2.3958061540627917, 7.606418814009464],
    shape: &[5],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};
const UNARY_MIX_GX: Expect = Expect {
    vals: &[-0.7700636211632845, 0.2559583671530239, 0.24696001410476762, -2.8466464661361908, -3.132257732610322],
    shape: &[5],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.t() + 1, X23)
const LAYOUT_T_PLUS_SCALAR: Expect =
    Expect { vals: &[1.5, 2.5, -0.25, 1.25, 3.0, 0.25], shape: &[3, 2], stride: &[1, 3], offset: 0, dtype: "float64" };
const LAYOUT_T_PLUS_SCALAR_GX: Expect = Expect {
    vals: &[0.8414709848078965, 0.1411200080598672, -0.9589242746631385, 0.9092974268256817, -0.7568024953079282, -0.27941549819892586],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.permute(2, 0, 1).exp(), X234)
const LAYOUT_PERMUTE_EXP: Expect = Expect {
    vals: &[
        0.05502322005640723,
        0.14956861922263506,
        0.40656965974059917,
        1.1051709180756477,
        3.0041660239464334,
        8.16616991256765,
        0.0706512130604296,
        0.19204990862075413,
        0.522045776761016,
        1.4190675485932573,
        3.8574255306969745,
        10.485569724727576,
        0.09071795328941251,
        0.2465969639416065,
        0.6703200460356393,
        1.822118800390509,
        4.953032424395115,
        13.463738035001692,
        0.11648415777349697,
        0.3166367693790532,
        0.8607079764250579,
        2.339646851925991,
        6.359819522601832,
        17.28778184056764,
    ],
    shape: &[4, 2, 3],
    stride: &[1, 12, 4],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_PERMUTE_EXP_GX: Expect = Expect {
    vals: &[
        0.046300443168166595,
        0.046416900163928125,
        0.03811669362059008,
        0.017458320537030825,
        0.13600236059301227,
        0.19000616085721,
        0.2442807663725781,
        0.28907203481034577,
        0.05737511365949082,
        0.21514471474560615,
        0.43590097495053504,
        0.7201161816089835,
        -0.8363961085414041,
        -0.7720027042127586,
        -0.5245940459901977,
        -0.02070893791671671,
        -2.8807677254804784,
        -3.8573877531956247,
        -4.761832950011584,
        -5.381809046897263,
        -2.2817544344971687,
        -5.626272744094092,
        -10.111095558161017,
        -15.655441161909101,
    ],
    shape: &[2, 3, 4],
    stride: &[12, 4, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(lambda a, b: a * b.t(), X34, X43)
const LAYOUT_MIXED_CT: Expect = Expect {
    vals: &[
        0.27,
        2.52,
        3.25,
        0.42,
        -0.33,
        0.30000000000000004,
        0.9900000000000001,
        4.32,
        -0.96,
        0.44000000000000006,
        0.022500000000000003,
        1.1199999999999999,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_MIXED_CT_GA: Expect = Expect {
    vals: &[
        0.7573238863271069,
        -1.9095245963339316,
        0.1834560104778274,
        -0.4540814971847569,
        0.2876772823989415,
        -0.2095616236491944,
        -0.722685258590668,
        2.374459791896116,
        0.6593895763868106,
        -0.10880422217787396,
        -0.44999559294781655,
        0.429258334400348,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_MIXED_CT_GB: Expect = Expect {
    vals: &[
        0.25244129544236893,
        -1.0548167021294523,
        -0.24727109114505394,
        -1.091156912190818,
        -0.11176619927957035,
        -1.1968464439566135,
        0.35280002014966805,
        -0.5912879388469102,
        -0.04999951032753518,
        -0.5297617467155497,
        1.7808448439220872,
        0.7512020852006088,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(lambda a, b: b.t() * a, X34, X43)
const LAYOUT_MIXED_TC: Expect = Expect {
    vals: &[
        0.27,
        2.52,
        3.25,
        0.42,
        -0.33,
        0.30000000000000004,
        0.9900000000000001,
        4.32,
        -0.96,
        0.44000000000000006,
        0.022500000000000003,
        1.1199999999999999,
    ],
    shape: &[3, 4],
    stride: &[1, 3],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_MIXED_TC_GA: Expect = Expect {
    vals: &[
        0.7573238863271069,
        -1.9095245963339316,
        0.1834560104778274,
        -0.4540814971847569,
        0.2876772823989415,
        -0.2095616236491944,
        -0.722685258590668,
        2.374459791896116,
        0.6593895763868106,
        -0.10880422217787396,
        -0.44999559294781655,
        0.429258334400348,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_MIXED_TC_GB: Expect = Expect {
    vals: &[
        0.25244129544236893,
        -1.0548167021294523,
        -0.24727109114505394,
        -1.091156912190818,
        -0.11176619927957035,
        -1.1968464439566135,
        0.35280002014966805,
        -0.5912879388469102,
        -0.04999951032753518,
        -0.5297617467155497,
        1.7808448439220872,
        0.7512020852006088,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(lambda a, r: a.t() + r, X43, [0.5, -1.0, 2.0, 0.25])
const LAYOUT_T_PLUS_ROW: Expect = Expect {
    vals: &[1.4, -3.1, 3.3, 0.85, 0.2, -0.25, 0.8999999999999999, 2.65, 2.1, -0.8, 2.45, -0.55],
    shape: &[3, 4],
    stride: &[1, 3],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_T_PLUS_ROW_GA: Expect = Expect {
    vals: &[
        0.8414709848078965,
        -0.9589242746631385,
        0.4121184852417566,
        0.9092974268256817,
        -0.27941549819892586,
        -0.5440211108893698,
        0.1411200080598672,
        0.6569865987187891,
        -0.9999902065507035,
        -0.7568024953079282,
        0.9893582466233818,
        -0.5365729180004349,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_T_PLUS_ROW_GB: Expect = Expect {
    vals: &[0.29466519538651464, 0.08586081773738607, -0.20188359977204717, -0.30401716668498135],
    shape: &[4],
    stride: &[1],
    offset: 0,
    dtype: "float64",
};

// r = torch.tensor([[1.0], [2.0], [3.0]]) + torch.tensor([[0.5, -1.0, 2.0, 0.25]])
const LAYOUT_COL_PLUS_ROW: Expect = Expect {
    vals: &[1.5, 0.0, 3.0, 1.25, 2.5, 1.0, 4.0, 2.25, 3.5, 2.0, 5.0, 3.25],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float32",
};

// out, gx = grads(lambda x: x[:, ::2] * 2, X34)
const LAYOUT_SLICE: Expect =
    Expect { vals: &[0.6, 5.0, 2.2, -1.8, -1.2, 0.1], shape: &[3, 2], stride: &[2, 1], offset: 0, dtype: "float64" };
const LAYOUT_SLICE_GX: Expect = Expect {
    vals: &[
        1.682941969615793,
        0.0,
        1.8185948536513634,
        0.0,
        0.2822400161197344,
        0.0,
        -1.5136049906158564,
        0.0,
        -1.917848549326277,
        0.0,
        -0.5588309963978517,
        0.0,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.t()[:, ::2].neg(), X34)
const LAYOUT_T_SLICE: Expect =
    Expect { vals: &[-0.3, 0.6, 1.2, -2.2, -2.5, -0.05, -0.7, 1.4], shape: &[4, 2], stride: &[1, 4], offset: 0, dtype: "float64" };
const LAYOUT_T_SLICE_GX: Expect = Expect {
    vals: &[
        -0.8414709848078965,
        -0.1411200080598672,
        0.9589242746631385,
        -0.6569865987187891,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.9092974268256817,
        0.7568024953079282,
        0.27941549819892586,
        -0.9893582466233818,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// r = torch.tensor([0.5, -1.0, 2.0, 0.25]).expand(3, 4) + 1
const LAYOUT_EXPAND: Expect = Expect {
    vals: &[1.5, 0.0, 3.0, 1.25, 1.5, 0.0, 3.0, 1.25, 1.5, 0.0, 3.0, 1.25],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float32",
};

// out, gx = grads(lambda x: x.t().unsqueeze(0).expand(2, 3, 2) * 2, X23)
const LAYOUT_EXPAND_T: Expect = Expect {
    vals: &[1.0, 3.0, -2.5, 0.5, 4.0, -1.5, 1.0, 3.0, -2.5, 0.5, 4.0, -1.5],
    shape: &[2, 3, 2],
    stride: &[6, 1, 3],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_EXPAND_T_GX: Expect = Expect {
    vals: &[2.996915167053371, 1.1064769866032476, -3.917828962427684, 3.7973113468981268, -2.601647212394596, -1.6319768323987216],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.permute(2, 0, 1).clone(), X234)
const LAYOUT_CLONE_PERMUTED: Expect = Expect {
    vals: &[
        -2.9,
        -1.9,
        -0.8999999999999999,
        0.10000000000000009,
        1.1,
        2.1,
        -2.65,
        -1.65,
        -0.6499999999999999,
        0.3500000000000001,
        1.35,
        2.35,
        -2.4,
        -1.4,
        -0.3999999999999999,
        0.6000000000000001,
        1.6,
        2.6,
        -2.15,
        -1.15,
        -0.1499999999999999,
        0.8500000000000001,
        1.85,
        2.85,
    ],
    shape: &[4, 2, 3],
    stride: &[1, 12, 4],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_CLONE_PERMUTED_GX: Expect = Expect {
    vals: &[
        0.8414709848078965,
        0.6569865987187891,
        0.4201670368266409,
        0.14987720966295234,
        0.9092974268256817,
        0.9893582466233818,
        0.9906073556948704,
        0.9129452507276277,
        0.1411200080598672,
        0.4121184852417566,
        0.6502878401571168,
        0.8366556385360561,
        -0.7568024953079282,
        -0.5440211108893698,
        -0.2879033166650653,
        -0.008851309290403876,
        -0.9589242746631385,
        -0.9999902065507035,
        -0.9613974918795568,
        -0.8462204041751706,
        -0.27941549819892586,
        -0.5365729180004349,
        -0.750987246771676,
        -0.9055783620066239,
    ],
    shape: &[2, 3, 4],
    stride: &[12, 4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x[:, ::2].t().clone(), X34)
const LAYOUT_CLONE_SLICE_T: Expect =
    Expect { vals: &[0.3, 1.1, -0.6, 2.5, -0.9, 0.05], shape: &[2, 3], stride: &[1, 2], offset: 0, dtype: "float64" };
const LAYOUT_CLONE_SLICE_T_GX: Expect = Expect {
    vals: &[
        0.8414709848078965,
        0.0,
        -0.7568024953079282,
        0.0,
        0.9092974268256817,
        0.0,
        -0.9589242746631385,
        0.0,
        0.1411200080598672,
        0.0,
        -0.27941549819892586,
        0.0,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// r = torch.zeros_like(torch.tensor(X234).permute(2, 0, 1))
const LAYOUT_ZEROS_LIKE_PERMUTED: Expect = Expect {
    vals: &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    shape: &[4, 2, 3],
    stride: &[1, 12, 4],
    offset: 0,
    dtype: "float32",
};

// r = torch.zeros_like(torch.tensor(X34)[:, ::2].t())
const LAYOUT_ZEROS_LIKE_SLICE_T: Expect =
    Expect { vals: &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], shape: &[2, 3], stride: &[1, 2], offset: 0, dtype: "float32" };

// r = torch.tensor(X23, dtype=f64).t().to(torch.float32)
const LAYOUT_TO_DTYPE_T: Expect =
    Expect { vals: &[0.5, 1.5, -1.25, 0.25, 2.0, -0.75], shape: &[3, 2], stride: &[1, 3], offset: 0, dtype: "float32" };

// out, gx = grads(lambda x: x.t().softmax(0), X34)
const LAYOUT_SOFTMAX_T: Expect = Expect {
    vals: &[
        0.08517910522175141,
        0.2742977549603936,
        0.05048078769402127,
        0.019006027389429348,
        0.13621223397630866,
        0.8301387223549227,
        0.768742574496026,
        0.03712216435873185,
        0.09669800990867997,
        0.12707229289279326,
        0.552367846704566,
        0.022682480042375965,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_SOFTMAX_T_GX: Expect = Expect {
    vals: &[
        0.029664090927991646,
        -0.023757876179459566,
        0.12589781915710657,
        -0.1318040339056387,
        0.35826899831380277,
        -0.07656353215610893,
        0.05145846727292104,
        -0.3331639334306148,
        0.017076113372693283,
        -0.06829215523340731,
        0.05891500579803567,
        -0.007698963937321667,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};

// out, gx = grads(lambda x: x.permute(2, 0, 1).sum(1), X234)
const LAYOUT_SUM_PERMUTED: Expect = Expect {
    vals: &[
        -2.8,
        -0.7999999999999998,
        1.2000000000000002,
        -2.3,
        -0.2999999999999998,
        1.7000000000000002,
        -1.7999999999999998,
        0.20000000000000018,
        2.2,
        -1.2999999999999998,
        0.7000000000000002,
        2.7,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_SUM_PERMUTED_GX: Expect = Expect {
    vals: &[
        0.8414709848078965,
        -0.7568024953079282,
        0.6569865987187891,
        -0.5440211108893698,
        0.9092974268256817,
        -0.9589242746631385,
        0.9893582466233818,
        -0.9999902065507035,
        0.1411200080598672,
        -0.27941549819892586,
        0.4121184852417566,
        -0.5365729180004349,
        0.8414709848078965,
        -0.7568024953079282,
        0.6569865987187891,
        -0.5440211108893698,
        0.9092974268256817,
        -0.9589242746631385,
        0.9893582466233818,
        -0.9999902065507035,
        0.1411200080598672,
        -0.27941549819892586,
        0.4121184852417566,
        -0.5365729180004349,
    ],
    shape: &[2, 3, 4],
    stride: &[12, 4, 1],
    offset: 0,
    dtype: "float64",
};

// r = torch.tensor(X234, dtype=f64).permute(2, 0, 1).sum(1, keepdim=True)
const LAYOUT_SUM_PERMUTED_KEEP: Expect = Expect {
    vals: &[
        -2.8,
        -0.7999999999999998,
        1.2000000000000002,
        -2.3,
        -0.2999999999999998,
        1.7000000000000002,
        -1.7999999999999998,
        0.20000000000000018,
        2.2,
        -1.2999999999999998,
        0.7000000000000002,
        2.7,
    ],
    shape: &[4, 1, 3],
    stride: &[3, 3, 1],
    offset: 0,
    dtype: "float64",
};

// r = torch.tensor(X234, dtype=f64).permute(2, 0, 1).mean(0)
const LAYOUT_MEAN_PERMUTED: Expect = Expect {
    vals: &[-2.525, -1.525, -0.5249999999999999, 0.4750000000000001, 1.475, 2.475],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// r = torch.tensor(X234, dtype=f64).permute(2, 0, 1).mean(0, keepdim=True)
const LAYOUT_MEAN_PERMUTED_KEEP: Expect = Expect {
    vals: &[-2.525, -1.525, -0.5249999999999999, 0.4750000000000001, 1.475, 2.475],
    shape: &[1, 2, 3],
    stride: &[6, 3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(lambda a, b: torch.where(torch.tensor(C43).t(), a, b.t()), X34, X43)
const LAYOUT_WHERE_COND_T: Expect = Expect {
    vals: &[0.3, -2.1, 2.5, 0.6, -0.3, 0.75, -0.9, 1.8, -0.6, 2.2, 0.45, -1.4],
    shape: &[3, 4],
    stride: &[1, 3],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_WHERE_COND_T_GA: Expect = Expect {
    vals: &[
        0.8414709848078965,
        0.0,
        0.1411200080598672,
        0.0,
        0.0,
        0.0,
        0.6569865987187891,
        0.9893582466233818,
        0.4121184852417566,
        -0.5440211108893698,
        0.0,
        -0.5365729180004349,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_WHERE_COND_T_GB: Expect = Expect {
    vals: &[
        0.0,
        -0.9589242746631385,
        0.0,
        0.9092974268256817,
        -0.27941549819892586,
        0.0,
        0.0,
        0.0,
        -0.9999902065507035,
        -0.7568024953079282,
        0.0,
        0.0,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(lambda a, b: torch.where(torch.tensor([True, False, False, True]), b.t(), a), X34, X43)
const LAYOUT_WHERE_SELF_T: Expect = Expect {
    vals: &[0.9, -1.2, 2.5, 0.6, -0.3, 0.4, -0.9, 2.4, 1.6, 2.2, 0.05, -0.8],
    shape: &[3, 4],
    stride: &[1, 3],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_WHERE_SELF_T_GA: Expect = Expect {
    vals: &[
        0.0,
        0.9092974268256817,
        0.1411200080598672,
        0.0,
        0.0,
        -0.27941549819892586,
        0.6569865987187891,
        0.0,
        0.0,
        -0.5440211108893698,
        -0.9999902065507035,
        0.0,
    ],
    shape: &[3, 4],
    stride: &[4, 1],
    offset: 0,
    dtype: "float64",
};
const LAYOUT_WHERE_SELF_T_GB: Expect = Expect {
    vals: &[
        0.8414709848078965,
        -0.9589242746631385,
        0.4121184852417566,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -0.7568024953079282,
        0.9893582466233818,
        -0.5365729180004349,
    ],
    shape: &[4, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};

// out, ga, gb = grads(lambda a, b: torch.where(torch.tensor([True, False, True]), a, b), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[-1.0], [-2.0]])
const WHERE_BCAST: Expect =
    Expect { vals: &[1.0, -1.0, 3.0, 4.0, -2.0, 6.0], shape: &[2, 3], stride: &[3, 1], offset: 0, dtype: "float64" };
const WHERE_BCAST_GA: Expect = Expect {
    vals: &[0.8414709848078965, 0.0, 0.1411200080598672, -0.7568024953079282, 0.0, -0.27941549819892586],
    shape: &[2, 3],
    stride: &[3, 1],
    offset: 0,
    dtype: "float64",
};
const WHERE_BCAST_GB: Expect =
    Expect { vals: &[0.9092974268256817, -0.9589242746631385], shape: &[2, 1], stride: &[1, 1], offset: 0, dtype: "float64" };

// ---- END GENERATED
