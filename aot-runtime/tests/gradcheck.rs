//! Gradients of every differentiable eager op, and of paths through views,
//! in-place ops on views (PyTorch's CopySlices) and metadata mutations,
//! checked against central finite differences in f64.

mod common;

use aot_runtime::prelude::*;
use common::*;

/// `gc!(name, [inputs..], |x| body)`: a test that gradchecks `body`
/// (a `Result<Tensor>` expression over the leaves `x[0]`, `x[1]`, ...).
macro_rules! gc {
    ($(#[$m:meta])* $name:ident, [$($inp:expr),* $(,)?], |$x:ident| $body:expr) => {
        #[test]
        $(#[$m])*
        fn $name() -> Result<()> {
            gradcheck(|$x: &[Tensor]| -> Result<Tensor> { $body }, &[$($inp),*])
        }
    };
}

fn r(seed: u64, shape: &[usize]) -> Tensor {
    rand64(seed, shape, -1.0, 1.0)
}
fn pos(seed: u64, shape: &[usize]) -> Tensor {
    rand64(seed, shape, 0.5, 2.0)
}
/// Values in [-2, 2] at least 0.1 away from 0.
fn away0(seed: u64, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let v: Vec<f64> = rand_vals(seed, n, 0.1, 2.0).into_iter().enumerate().map(|(i, a)| if i % 2 == 0 { a } else { -a }).collect();
    t64(&v, shape)
}

// ---------------------------------------------------------------- binary

gc!(add_tensor_broadcast, [r(1, &[2, 3]), r(2, &[3])], |x| x[0].add(&x[1]));
gc!(add_broadcast_both, [r(1, &[2, 1, 3]), r(2, &[4, 1])], |x| x[0].add(&x[1]));
gc!(sub_tensor_broadcast, [r(1, &[2, 3]), r(2, &[2, 1])], |x| x[0].sub(&x[1]));
gc!(mul_tensor_broadcast, [r(1, &[2, 3]), r(2, &[1, 3])], |x| x[0].mul(&x[1]));
gc!(mul_0dim, [r(1, &[2, 3]), r(2, &[])], |x| x[0].mul(&x[1]));
gc!(div_tensor_broadcast, [r(1, &[2, 3]), pos(2, &[3])], |x| x[0].div(&x[1]));
gc!(div_self, [pos(1, &[4])], |x| x[0].div(&x[0].add(1.0)?));
gc!(pow_tensor_tensor, [pos(1, &[2, 3]), r(2, &[2, 3])], |x| x[0].pow(&x[1]));
gc!(pow_tensor_tensor_broadcast, [pos(1, &[2, 3]), r(2, &[3])], |x| x[0].pow(&x[1]));
gc!(maximum_no_ties, [r(1, &[2, 3]), r(2, &[2, 3])], |x| x[0].maximum(&x[1]));
gc!(minimum_no_ties, [r(1, &[2, 3]), r(2, &[3])], |x| x[0].minimum(&x[1]));
gc!(scalar_ops, [r(1, &[2, 3])], |x| {
    let a = x[0].add(2.0)?.sub(0.5)?.mul(3.0)?.div(4.0)?;
    a.add(&x[0].rsub(1.0)?.mul(2i64)?)
});
gc!(rdiv_scalar, [pos(1, &[5])], |x| x[0].rdiv(3.0));
gc!(pow_scalar, [pos(1, &[5])], |x| x[0].pow(2.5));
gc!(pow_scalar_int, [r(1, &[5])], |x| x[0].pow(3i64));
gc!(rpow_scalar, [r(1, &[5])], |x| x[0].rpow(2.0));
gc!(maximum_scalar, [away0(1, &[6])], |x| x[0].maximum(0.0));
gc!(minimum_scalar, [away0(1, &[6])], |x| x[0].minimum(0.0));
gc!(where_both_sides, [r(1, &[2, 3]), r(2, &[3])], |x| {
    let cond = Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3], &Device::Cpu)?;
    x[0].where_(&cond, &x[1])
});
gc!(where_scalar_other_broadcast_cond, [r(1, &[2, 3])], |x| {
    let cond = Tensor::from_vec(vec![true, false, true], &[3], &Device::Cpu)?;
    x[0].where_(&cond, 0.5)
});

// ---------------------------------------------------------------- unary

gc!(neg, [r(1, &[2, 3])], |x| x[0].neg());
gc!(exp, [r(1, &[2, 3])], |x| x[0].exp());
gc!(log, [pos(1, &[2, 3])], |x| x[0].log());
gc!(sqrt, [pos(1, &[2, 3])], |x| x[0].sqrt());
gc!(rsqrt, [pos(1, &[2, 3])], |x| x[0].rsqrt());
gc!(abs, [away0(1, &[2, 3])], |x| x[0].abs());
gc!(sin, [r(1, &[2, 3])], |x| x[0].sin());
gc!(cos, [r(1, &[2, 3])], |x| x[0].cos());
gc!(tanh, [r(1, &[2, 3])], |x| x[0].tanh());
gc!(sigmoid, [rand64(1, &[2, 3], -3.0, 3.0)], |x| x[0].sigmoid());
gc!(relu, [away0(1, &[2, 3])], |x| x[0].relu());
gc!(gelu, [rand64(1, &[2, 4], -3.0, 3.0)], |x| x[0].gelu());
gc!(gelu_at_zero, [t64(&[0.0, -1e-3, 1e-3, 4.0, -4.0], &[5])], |x| x[0].gelu());
gc!(silu, [rand64(1, &[2, 3], -3.0, 3.0)], |x| x[0].silu());
gc!(reciprocal, [pos(1, &[2, 3])], |x| x[0].reciprocal());
gc!(square, [r(1, &[2, 3])], |x| x[0].square());
gc!(clamp_away_from_bounds, [rand64(1, &[3, 4], -2.0, 2.0)], |x| x[0].clamp(-0.5, 0.7));
gc!(clamp_min_only, [rand64(1, &[3, 4], -2.0, 2.0)], |x| x[0].clamp_opt(Some(0.3), None));
gc!(clamp_max_only, [rand64(1, &[3, 4], -2.0, 2.0)], |x| x[0].clamp_opt(None, Some(0.3)));
gc!(unary_on_transposed_view, [pos(1, &[3, 2])], |x| x[0].t()?.log()?.mul(&x[0].t()?.sigmoid()?));

// ---------------------------------------------------------------- reductions

gc!(sum_all, [r(1, &[2, 3])], |x| x[0].sum());
gc!(mean_all, [r(1, &[2, 3])], |x| x[0].mean());
gc!(sum_dim_neg, [r(1, &[2, 3, 4])], |x| x[0].sum_dim(&[-1, 0], false));
gc!(sum_dim_keepdim, [r(1, &[2, 3, 4])], |x| x[0].sum_dim(&[1], true));
gc!(mean_dim, [r(1, &[2, 3, 4])], |x| x[0].mean_dim(&[0, 2], false));
gc!(mean_dim_keepdim_neg, [r(1, &[2, 3, 4])], |x| x[0].mean_dim(&[-2], true));
gc!(amax_dim_no_ties, [r(1, &[3, 4])], |x| x[0].amax_dim(&[1], false));
gc!(amax_dim_keepdim, [r(1, &[2, 3, 4])], |x| x[0].amax_dim(&[0, -1], true));
gc!(amax_all, [r(1, &[3, 4])], |x| x[0].amax_dim(&[], false));
gc!(var_dim_corr0, [r(1, &[3, 4])], |x| x[0].var_dim(&[1], 0, false));
gc!(var_dim_corr1_keepdim, [r(1, &[3, 4])], |x| x[0].var_dim(&[0], 1, true));
gc!(var_dim_corr2_multi, [r(1, &[2, 3, 4])], |x| x[0].var_dim(&[-1, 0], 2, false));
gc!(var_dim_all, [r(1, &[3, 4])], |x| x[0].var_dim(&[], 1, false));
gc!(softmax_last, [r(1, &[3, 4])], |x| x[0].softmax(-1));
gc!(softmax_first, [r(1, &[3, 4])], |x| x[0].softmax(0));
gc!(softmax_3d_middle, [r(1, &[2, 3, 4])], |x| x[0].softmax(1));
gc!(log_softmax_last, [r(1, &[3, 4])], |x| x[0].log_softmax(-1));
gc!(log_softmax_first, [r(1, &[3, 4])], |x| x[0].log_softmax(0));
gc!(softmax_of_transposed, [r(1, &[3, 4])], |x| x[0].t()?.softmax(1));

// ---------------------------------------------------------------- matmul

gc!(matmul_1d_1d, [r(1, &[4]), r(2, &[4])], |x| x[0].matmul(&x[1]));
gc!(matmul_2d_1d, [r(1, &[3, 4]), r(2, &[4])], |x| x[0].matmul(&x[1]));
gc!(matmul_1d_2d, [r(1, &[4]), r(2, &[4, 5])], |x| x[0].matmul(&x[1]));
gc!(matmul_2d_2d, [r(1, &[3, 4]), r(2, &[4, 2])], |x| x[0].matmul(&x[1]));
gc!(matmul_batched_broadcast, [r(1, &[2, 1, 3, 4]), r(2, &[3, 4, 2])], |x| x[0].matmul(&x[1]));
gc!(matmul_2d_3d, [r(1, &[3, 4]), r(2, &[2, 4, 5])], |x| x[0].matmul(&x[1]));
gc!(matmul_1d_3d, [r(1, &[4]), r(2, &[2, 4, 3])], |x| x[0].matmul(&x[1]));
gc!(matmul_3d_1d, [r(1, &[2, 3, 4]), r(2, &[4])], |x| x[0].matmul(&x[1]));
gc!(matmul_transposed_operands, [r(1, &[4, 3]), r(2, &[2, 4])], |x| x[0].t()?.matmul(&x[1].t()?));
gc!(mm, [r(1, &[3, 4]), r(2, &[4, 2])], |x| x[0].mm(&x[1]));
gc!(bmm, [r(1, &[2, 3, 4]), r(2, &[2, 4, 2])], |x| x[0].bmm(&x[1]));

// ---------------------------------------------------------------- views

gc!(view_narrow, [r(1, &[4, 3])], |x| x[0].narrow(0, 1, 2)?.mul(&x[0].narrow(-1, 0, 1)?.narrow(0, 0, 2)?));
gc!(view_select, [r(1, &[4, 3])], |x| x[0].select(1, -1)?.mul(&x[0].select(0, 2)?.narrow(0, 0, 1)?));
gc!(view_transpose_permute, [r(1, &[2, 3, 4])], |x| x[0].transpose(0, -1)?.mul(&x[0].permute(&[2, 1, 0])?));
gc!(view_expand, [r(1, &[3, 1])], |x| x[0].expand(&[2, 3, 4])?.mul(&r(9, &[2, 3, 4])));
gc!(view_diagonal, [r(1, &[3, 3])], |x| x[0].diagonal()?.exp());
gc!(view_diagonal_3d, [r(1, &[3, 2, 4])], |x| x[0].diagonal()?.square());
gc!(view_as_strided, [r(1, &[3, 4])], |x| x[0].as_strided(&[2, 3], &[4, 2], 1));
gc!(view_as_strided_overlapping, [r(1, &[6])], |x| x[0].as_strided(&[3, 3], &[1, 1], 0)?.square());
gc!(view_as_strided_of_transposed, [r(1, &[3, 4])], |x| x[0].t()?.as_strided(&[2, 2], &[1, 4], 2)?.square());
gc!(view_as_strided_of_view, [r(1, &[4, 3])], |x| x[0].narrow(0, 1, 2)?.as_strided(&[2, 2], &[3, 1], 4)?.exp());
gc!(view_view_and_reshape, [r(1, &[2, 3, 4])], |x| x[0].view(&[6, -1])?.mul(&x[0].reshape(&[4, 6])?.t()?));
gc!(reshape_of_transposed_copies, [r(1, &[3, 4])], |x| x[0].t()?.reshape(&[-1])?.mul(&r(3, &[12])));
gc!(view_unsqueeze_squeeze, [r(1, &[3, 1, 2])], |x| x[0].squeeze(1)?.unsqueeze(0)?.unsqueeze(-1)?.mul(&x[0].squeeze(-2)?.unsqueeze(-1)?));
gc!(view_slice_step, [r(1, &[7, 2])], |x| x[0].slice(0, 1, 7, 2)?.sin());
gc!(view_t, [r(1, &[3, 2])], |x| x[0].t()?.matmul(&x[0]));
gc!(view_chain, [r(1, &[4, 5, 3])], |x| x[0].transpose(0, 2)?.narrow(1, 1, 3)?.select(2, 0)?.unsqueeze(0)?.expand(&[2, 3, 3])?.square());
gc!(copy_contiguous_dtype, [r(1, &[3, 2])], |x| x[0].t()?.contiguous()?.copy()?.to_dtype(DType::F64)?.exp());
gc!(dropout_p0, [r(1, &[3, 2])], |x| x[0].dropout(0.0)?.mul(2.0));
gc!(mlp_like, [r(1, &[2, 4]), r(2, &[4, 3]), r(3, &[3])], |x| x[0].matmul(&x[1])?.add(&x[2])?.gelu()?.softmax(-1)?.log());

// ------------------------------------------------- in-place ops and history

// b = x * 1; b[1:3] *= y; b   (CopySlices on b)
gc!(inplace_mul_on_narrow_view, [r(1, &[4, 3]), r(2, &[2, 3])], |x| {
    let b = x[0].mul(1.0)?;
    b.narrow(0, 1, 2)?.mul_(&x[1])?;
    Ok(b)
});
// z = zeros; z[1:3] = y; z * x   (slice assignment)
gc!(slice_assignment_copy_slices, [r(1, &[4, 3]), r(2, &[2, 3])], |x| {
    let z = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?;
    z.narrow(0, 1, 2)?.copy_(&x[1])?;
    z.mul(&x[0])
});
gc!(slice_assignment_broadcast_source, [r(1, &[4, 3]), r(2, &[3])], |x| {
    let z = x[0].mul(2.0)?;
    z.narrow(0, 1, 2)?.copy_(&x[1])?;
    z.mul(&x[0])
});
gc!(slice_assignment_then_view_use, [r(1, &[4, 3]), r(2, &[2, 3])], |x| {
    let z = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?;
    let v = z.narrow(0, 1, 2)?;
    v.copy_(&x[1])?;
    v.mul(&x[0].narrow(0, 0, 2)?)?.sum_dim(&[0], false)?.add(&z.sum_dim(&[0], false)?)
});
// In-place on the base after a view was taken, then using the view.
gc!(inplace_on_base_then_use_view, [r(1, &[3, 4]), r(2, &[3, 4])], |x| {
    let b = x[0].mul(1.0)?;
    let v = b.select(0, 1)?;
    b.mul_(&x[1])?;
    v.mul(2.0)
});
gc!(inplace_on_base_then_use_transposed_view, [r(1, &[3, 4]), r(2, &[4])], |x| {
    let b = x[0].sin()?;
    let v = b.t()?.narrow(0, 1, 2)?;
    b.add_(&x[1])?;
    v.square()
});
// Chained in-place ops.
gc!(chained_inplace, [r(1, &[2, 3]), r(2, &[2, 3])], |x| {
    let b = x[0].mul(1.5)?;
    b.mul_(2.0)?.add_(&x[1])?;
    b.mul(&x[0])
});
gc!(chained_inplace_on_view, [r(1, &[4, 3]), r(2, &[3])], |x| {
    let b = x[0].mul(1.0)?;
    b.select(0, 2)?.mul_(&x[1])?.add_(&x[1])?.sub_(1.0)?;
    Ok(b)
});
// t_ on a non-leaf, then matmul.
gc!(t_inplace_then_matmul, [r(1, &[3, 4]), r(2, &[3, 2])], |x| {
    let b = x[0].mul(1.0)?;
    b.t_()?;
    b.matmul(&x[1])
});
gc!(transpose_unsqueeze_squeeze_inplace, [r(1, &[2, 3, 4])], |x| {
    // (mul by a scalar saves nothing: a metadata mutation bumps the version,
    // which would invalidate a saved output, as in PyTorch)
    let b = x[0].mul(2.0)?;
    b.transpose_(0, -1)?.unsqueeze_(1)?;
    b.squeeze_(1)?;
    b.exp()?.mul(&r(5, &[4, 3, 2]))
});
gc!(as_strided_inplace_metadata, [r(1, &[3, 4])], |x| {
    let b = x[0].mul(1.0)?;
    b.as_strided_(&[2, 2], &[4, 1], 5)?;
    b.exp()
});
gc!(metadata_mutation_on_view_then_inplace, [r(1, &[4, 3]), r(2, &[3, 2])], |x| {
    let b = x[0].mul(1.0)?;
    let v = b.narrow(0, 1, 2)?;
    v.t_()?;
    v.mul_(&x[1])?;
    b.mul(&x[0])
});
gc!(inplace_on_view_of_view, [r(1, &[4, 5]), r(2, &[3, 2])], |x| {
    let b = x[0].mul(1.0)?;
    b.narrow(0, 0, 3)?.narrow(1, 1, 2)?.add_(&x[1].exp()?)?;
    b.square()
});
gc!(inplace_on_diagonal, [r(1, &[3, 3]), r(2, &[3])], |x| {
    let b = x[0].mul(1.0)?;
    b.diagonal()?.mul_(&x[1])?;
    b.exp()
});
gc!(inplace_on_transposed_view, [r(1, &[3, 4]), r(2, &[3])], |x| {
    let b = x[0].mul(1.0)?;
    b.t()?.narrow(0, 1, 1)?.add_(&x[1])?;
    b.mul(&x[0])
});
gc!(inplace_on_as_strided_view, [r(1, &[3, 4]), r(2, &[2, 2])], |x| {
    let b = x[0].mul(1.0)?;
    b.as_strided(&[2, 2], &[4, 2], 1)?.mul_(&x[1])?;
    b.sin()
});
gc!(inplace_on_overlapping_views, [r(1, &[4, 3]), r(2, &[2, 3])], |x| {
    let b = x[0].mul(1.0)?;
    let v1 = b.narrow(0, 0, 2)?;
    let v2 = b.narrow(0, 1, 2)?;
    v1.mul_(&x[1])?;
    v2.add_(&x[1].exp()?)?;
    b.sum_dim(&[0], false)?.add(&v1.mul(&v2)?.sum_dim(&[0], false)?)
});
gc!(inplace_source_is_other_slice, [r(1, &[4, 3]), r(2, &[2, 3])], |x| {
    let b = x[0].mul(1.0)?;
    // (the source must not be saved by an op: writing b bumps the version
    // that b's views share, as in PyTorch)
    b.narrow(0, 0, 2)?.copy_(&b.narrow(0, 2, 2)?.add(&x[1])?.sin()?)?;
    b.mul(&x[0])
});
gc!(inplace_unary_ops_on_views, [rand64(1, &[6, 3], -2.0, 2.0), pos(2, &[3])], |x| {
    // (sigmoid_ and exp_ save their results: a later write to the same
    // storage would fail the backward, as in PyTorch, so each is the last
    // write to its tensor)
    let b = x[0].mul(1.0)?;
    b.select(0, 2)?.neg_()?;
    b.select(0, 3)?.div_(&x[1])?;
    b.select(0, 4)?.sub_(&x[1])?;
    b.select(0, 5)?.clamp_(-0.5, 0.5)?;
    b.select(0, 1)?.sigmoid_()?;
    let c = x[0].mul(1.0)?;
    c.select(0, 0)?.exp_()?;
    b.mul(&x[0])?.add(&c)
});
gc!(inplace_relu_on_view, [away0(1, &[4, 3])], |x| {
    let b = x[0].mul(2.0)?;
    b.narrow(1, 0, 2)?.relu_()?;
    Ok(b)
});
gc!(fill_on_view_blocks_gradient, [r(1, &[4, 3])], |x| {
    // (sin saves its input, not its output, so writing b is allowed)
    let b = x[0].sin()?;
    b.narrow(0, 1, 2)?.fill_(0.5)?;
    b.select(0, 3)?.zero_()?;
    b.mul(&x[0])
});
gc!(inplace_then_view_taken_after, [r(1, &[3, 4]), r(2, &[3, 4])], |x| {
    let b = x[0].mul(1.0)?;
    b.mul_(&x[1])?;
    b.t()?.matmul(&x[0])
});
gc!(inplace_on_base_then_two_views, [r(1, &[4, 4]), r(2, &[4, 4])], |x| {
    let b = x[0].mul(1.0)?;
    let d = b.diagonal()?;
    let c = b.select(1, 2)?;
    b.add_(&x[1].square()?)?;
    d.mul(&c)
});
gc!(inplace_view_then_base_inplace, [r(1, &[3, 4]), r(2, &[4])], |x| {
    let b = x[0].mul(1.0)?;
    let v = b.select(0, 0)?;
    v.mul_(&x[1])?;
    b.mul_(&x[0])?;
    v.add(&b.sum_dim(&[0], false)?)
});
gc!(inplace_on_expanded_source, [r(1, &[3, 4]), r(2, &[4, 1])], |x| {
    let b = x[0].mul(1.0)?;
    b.t()?.add_(&x[1].expand(&[4, 3])?)?;
    Ok(b)
});
gc!(inplace_on_unsqueezed_view, [r(1, &[3, 4]), r(2, &[1, 4])], |x| {
    let b = x[0].mul(1.0)?;
    b.select(0, 1)?.unsqueeze(0)?.mul_(&x[1])?;
    Ok(b)
});
gc!(inplace_with_leaf_rhs_on_fresh_tensor, [r(1, &[3]), r(2, &[3])], |x| {
    let z = Tensor::ones(&[3], DType::F64, &Device::Cpu)?;
    z.mul_(&x[0])?.add_(&x[1])?;
    z.mul(&x[0])
});
gc!(copy_slices_twice_same_region, [r(1, &[4, 2]), r(2, &[2, 2]), r(3, &[2, 2])], |x| {
    let z = x[0].mul(1.0)?;
    z.narrow(0, 1, 2)?.copy_(&x[1])?;
    z.narrow(0, 1, 2)?.mul_(&x[2])?;
    z.exp()
});

// ------------------------------------------------- minimal value checks

/// `x.narrow(0, 1, 2).as_strided([2, 2], [3, 1], 4)` reads x's storage
/// elements 4, 5, 7, 8; the gradient of its sum is 1 exactly there.
#[test]
fn as_strided_of_offset_view_grad_positions() -> Result<()> {
    let x = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?.requires_grad_(true)?;
    let a = x.narrow(0, 1, 2)?.as_strided(&[2, 2], &[3, 1], 4)?;
    a.sum()?.backward()?;
    let g = vals(&x.grad().unwrap());
    assert_eq!(g, vec![0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
    Ok(())
}

/// A root base with a storage offset (a detached slice), modified in place
/// after a view of it was taken: the view's regenerated history must still
/// route the gradient to `y`.
#[test]
fn view_of_offset_base_after_inplace() -> Result<()> {
    let base = Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?.narrow(0, 1, 2)?.detach()?;
    assert_eq!(base.storage_offset(), 3);
    let v = base.select(0, 1)?;
    let y = t64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).requires_grad_(true)?;
    base.add_(&y)?;
    assert_eq!(vals(&v), vec![4.0, 5.0, 6.0]);
    v.sum()?.backward()?;
    assert_eq!(vals(&y.grad().unwrap()), vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    Ok(())
}
