//! Autograd bookkeeping and errors: leaves, requires_grad propagation,
//! in-place checks on leaves and views of leaves, no_grad, saved-tensor
//! version checks, second backward, gradient accumulation, detach.

mod common;

use aot_runtime::prelude::*;
use common::*;

fn leaf(vals: &[f64], shape: &[usize]) -> Tensor {
    t64(vals, shape).requires_grad_(true).expect("requires_grad_")
}

#[test]
fn requires_grad_propagation_and_is_leaf() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let c = t64(&[4.0, 5.0, 6.0], &[3]);
    assert!(x.requires_grad());
    assert!(x.is_leaf());
    assert!(!c.requires_grad());
    assert!(c.is_leaf());
    assert!(x.grad().is_none());

    let y = x.mul(&c)?;
    assert!(y.requires_grad());
    assert!(!y.is_leaf());
    let z = c.add(1.0)?;
    assert!(!z.requires_grad());
    assert!(z.is_leaf());
    // Views of a leaf require grad and are not leaves.
    let v = x.narrow(0, 0, 2)?;
    assert!(v.requires_grad());
    assert!(!v.is_leaf());
    // Views of a tensor that does not require grad are leaves.
    assert!(c.narrow(0, 0, 2)?.is_leaf());
    assert!(!c.t()?.requires_grad());
    // Every differentiable op propagates.
    for t in [
        x.exp()?,
        x.sum()?,
        x.softmax(0)?,
        x.matmul(&c)?,
        x.to_dtype(DType::F32)?,
        x.copy()?,
        x.unsqueeze(0)?.expand(&[2, 3])?,
        x.clamp(0.0, 2.0)?,
        c.where_(&c.gt(4.5)?, &x)?,
        x.dropout(0.0)?,
        x.var_dim(&[0], 1, false)?,
    ] {
        assert!(t.requires_grad(), "{t:?}");
        assert!(!t.is_leaf());
    }
    // Comparisons and *_like do not.
    assert!(!x.gt(1.0)?.requires_grad());
    assert!(!x.zeros_like()?.requires_grad());
    assert!(!x.ones_like()?.requires_grad());
    assert!(!x.full_like(2.0)?.requires_grad());
    // Casting to an integer dtype drops the history.
    assert!(!x.to_dtype(DType::I64)?.requires_grad());
    // Under no_grad nothing records.
    let n = aot_runtime::no_grad(|| x.mul(2.0))?;
    assert!(!n.requires_grad());
    assert!(n.is_leaf());
    assert!(aot_runtime::is_grad_enabled());
    aot_runtime::no_grad(|| assert!(!aot_runtime::is_grad_enabled()));
    assert!(aot_runtime::is_grad_enabled());
    // requires_grad_(false) on a leaf clears it; on a non-leaf it is refused.
    let w = leaf(&[1.0], &[1]);
    w.requires_grad_(false)?;
    assert!(!w.requires_grad());
    assert_err(y.requires_grad_(false), &["requires_grad_"]);
    // Only float tensors can require grad.
    assert_err(Tensor::from_vec(vec![1i64], &[1], &Device::Cpu)?.requires_grad_(true), &["requires_grad_", "floating point"]);
    Ok(())
}

#[test]
fn detach_shares_storage_and_has_no_history() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.mul(3.0)?;
    let d = y.detach()?;
    assert!(d.shares_storage_with(&y));
    assert!(!d.same_tensor(&y));
    assert!(!d.requires_grad());
    assert!(d.is_leaf());
    assert!(d.grad().is_none());
    let dx = x.detach()?;
    assert!(!dx.requires_grad());
    assert!(dx.is_leaf());
    // Writing through the detached alias is visible in the original.
    d.add_(1.0)?;
    assert_eq!(vals(&y), vec![4.0, 7.0]);
    // Gradients do not flow through detach.
    let z = x.mul(&x.detach()?)?.sum()?;
    z.backward()?;
    assert_eq!(vals(&x.grad().unwrap()), vec![1.0, 2.0]);
    Ok(())
}

#[test]
fn inplace_on_leaf_requiring_grad_is_refused() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let e = assert_err(x.add_(1.0), &["add_", "leaf Variable"]);
    assert!(matches!(e, AotError::Autograd { .. }), "{e:?}");
    assert_err(x.mul_(&t64(&[1.0, 2.0, 3.0], &[3])), &["mul_", "leaf Variable"]);
    assert_err(x.copy_(&t64(&[0.0; 3], &[3])), &["copy_", "leaf Variable"]);
    assert_err(x.fill_(0.0), &["fill_", "leaf Variable"]);
    assert_err(x.zero_(), &["leaf Variable"]);
    assert_err(x.exp_(), &["exp_", "leaf Variable"]);
    assert_err(x.clamp_(0.0, 1.0), &["clamp_", "leaf Variable"]);
    assert_err(x.relu_(), &["relu_", "leaf Variable"]);
    assert_err(x.sigmoid_(), &["sigmoid_", "leaf Variable"]);
    assert_err(x.neg_(), &["neg_", "leaf Variable"]);
    assert_err(x.sub_(1.0), &["sub_", "leaf Variable"]);
    assert_err(x.div_(1.0), &["div_", "leaf Variable"]);
    assert_eq!(vals(&x), vec![1.0, 2.0, 3.0], "refused writes change nothing");
    // Metadata mutations of a leaf that requires grad are refused too.
    let m = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_err(m.t_(), &["leaf Variable"]);
    assert_err(m.unsqueeze_(0), &["leaf Variable"]);
    assert_eq!(m.shape(), vec![2, 2]);
    assert_eq!(m.stride(), vec![2, 1]);
    assert!(x.is_leaf());
    Ok(())
}

#[test]
fn inplace_on_view_of_leaf_is_refused() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    for v in [x.narrow(0, 0, 1)?, x.select(1, 0)?, x.t()?, x.view(&[-1])?, x.diagonal()?, x.as_strided(&[2], &[1], 1)?] {
        let e = assert_err(v.add_(1.0), &["add_", "leaf Variable"]);
        assert!(matches!(e, AotError::Autograd { .. }), "{e:?}");
        assert_err(v.mul_(2.0), &["view of a leaf Variable"]);
        assert_err(v.copy_(&v.detach()?.copy()?), &["copy_", "leaf Variable"]);
        assert_err(v.fill_(1.0), &["fill_", "leaf Variable"]);
    }
    // A view of a view of the leaf.
    let vv = x.t()?.narrow(0, 1, 1)?;
    assert_err(vv.zero_(), &["leaf Variable"]);
    assert_eq!(vals(&x), vec![1.0, 2.0, 3.0, 4.0]);
    assert!(x.is_leaf());
    Ok(())
}

#[test]
fn no_grad_optimizer_step_on_leaf() -> Result<()> {
    let w = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let loss = w.mul(&w)?.sum()?;
    loss.backward()?;
    let g = w.grad().unwrap();
    assert_eq!(vals(&g), vec![2.0, 4.0, 6.0, 8.0]);
    aot_runtime::no_grad(|| -> Result<()> {
        w.sub_(&g.mul(0.5)?)?;
        w.narrow(0, 0, 1)?.mul_(10.0)?; // through a view of the leaf
        w.t()?.select(0, 1)?.add_(1.0)?;
        Ok(())
    })?;
    assert_eq!(vals(&w), vec![0.0, 1.0, 0.0, 1.0]);
    assert!(w.is_leaf(), "still a leaf after a no_grad step");
    assert!(w.requires_grad());
    assert!(w.grad().is_some());
    // A metadata mutation under no_grad is allowed too.
    aot_runtime::no_grad(|| w.t_())?;
    assert!(w.is_leaf());
    aot_runtime::no_grad(|| w.t_())?;
    // The leaf can be used again; grads accumulate into the kept .grad.
    w.mul(&w)?.sum()?.backward()?;
    assert_eq!(vals(&w.grad().unwrap()), vec![2.0, 6.0, 6.0, 10.0]);
    // Zeroing .grad.
    w.set_grad(None);
    assert!(w.grad().is_none());
    Ok(())
}

#[test]
fn modified_saved_tensor_is_detected() -> Result<()> {
    let x = leaf(&[0.5, 1.0], &[2]);
    let y = x.exp()?;
    y.mul_(2.0)?;
    let e = assert_err(y.sum()?.backward(), &["modified by an inplace operation", "ExpBackward0"]);
    assert!(matches!(e, AotError::Autograd { .. }), "{e:?}");
    assert!(x.grad().is_none(), "a failed backward leaves .grad untouched");

    // An input saved by mul, modified afterwards through a view.
    let a = leaf(&[1.0, 2.0], &[2]);
    let b = a.mul(1.0)?;
    let c = b.mul(&b)?;
    b.narrow(0, 0, 1)?.add_(1.0)?;
    assert_err(c.sum()?.backward(), &["modified by an inplace operation", "MulBackward0"]);

    // Ops that save nothing are not affected (add).
    let p = leaf(&[1.0, 2.0], &[2]);
    let q = p.add(1.0)?;
    let r = q.add(&q)?;
    q.mul_(3.0)?;
    r.sum()?.backward()?;
    assert_eq!(vals(&p.grad().unwrap()), vec![2.0, 2.0]);
    Ok(())
}

#[test]
fn second_backward_through_saved_tensors_is_refused() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.mul(&x)?.sum()?;
    y.backward()?;
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, 4.0]);
    let e = assert_err(y.backward(), &["second time"]);
    assert!(matches!(e, AotError::Autograd { .. }), "{e:?}");
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, 4.0], "a failed backward leaves .grad untouched");
    // A graph without saved tensors may run twice (like PyTorch).
    let z = x.add(1.0)?.sum()?;
    z.backward()?;
    z.backward()?;
    assert_eq!(vals(&x.grad().unwrap()), vec![4.0, 6.0]);
    Ok(())
}

#[test]
fn grad_accumulates_across_backwards() -> Result<()> {
    let x = leaf(&[1.0, -2.0, 3.0], &[3]);
    x.mul(&x)?.sum()?.backward()?;
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, -4.0, 6.0]);
    x.mul(3.0)?.sum()?.backward()?;
    assert_eq!(vals(&x.grad().unwrap()), vec![5.0, -1.0, 9.0]);
    // The same leaf used twice in one graph sums both paths.
    let y = leaf(&[2.0], &[1]);
    y.mul(&y)?.add(&y)?.sum()?.backward()?;
    assert_eq!(vals(&y.grad().unwrap()), vec![5.0]);
    // The grad of a leaf has the leaf's dtype and shape.
    let h = tdt(&[1.0, 2.0], &[2, 1], DType::F32).requires_grad_(true)?;
    h.mul(&t64(&[1.0, 2.0, 3.0], &[3]))?.sum()?.backward()?;
    let g = h.grad().unwrap();
    assert_eq!(g.dtype(), DType::F32);
    assert_eq!(g.shape(), vec![2, 1]);
    assert_eq!(vals(&g), vec![6.0, 6.0]);
    Ok(())
}

#[test]
fn backward_errors() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2]);
    assert_err(x.mul(2.0)?.backward(), &["backward"]);
    assert_err(t64(&[1.0], &[]).backward(), &["backward", "does not require grad"]);
    // backward_with an explicit gradient.
    let y = x.mul(2.0)?;
    y.backward_with(&t64(&[1.0, 10.0], &[2]))?;
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, 20.0]);
    assert_err(x.mul(2.0)?.backward_with(&t64(&[1.0], &[1])), &["backward"]);
    // backward on a leaf itself.
    let s = leaf(&[3.0], &[]);
    s.backward()?;
    assert_eq!(vals(&s.grad().unwrap()), vec![1.0]);
    Ok(())
}

#[test]
fn view_created_in_no_grad_then_modified_in_grad_mode() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2]);
    let b = x.mul(1.0)?;
    let v = aot_runtime::no_grad(|| b.narrow(0, 0, 1))?;
    assert_err(v.mul_(&leaf(&[2.0], &[1])), &["no_grad"]);
    Ok(())
}

#[test]
fn half_precision_gradients() -> Result<()> {
    for dt in [DType::F32, DType::F16, DType::BF16] {
        let x = tdt(&[0.5, -1.0, 2.0], &[3], dt).requires_grad_(true)?;
        let y = x.mul(&x)?.mul(3.0)?.sum()?;
        assert_eq!(y.dtype(), dt);
        y.backward()?;
        let g = x.grad().unwrap();
        assert_eq!(g.dtype(), dt);
        assert_close(&vals(&g), &[3.0, -6.0, 12.0], tol(dt));
        // Mixed precision: the f32 grad flows back into an f16 leaf.
        let h = tdt(&[1.0, 2.0], &[2], dt).requires_grad_(true)?;
        h.to_dtype(DType::F64)?.mul(&t64(&[3.0, 4.0], &[2]))?.sum()?.backward()?;
        let g = h.grad().unwrap();
        assert_eq!(g.dtype(), dt);
        assert_eq!(vals(&g), vec![3.0, 4.0]);
    }
    Ok(())
}

#[test]
fn grad_fn_names() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(x.grad_fn_name(), None);
    assert_eq!(x.mul(&x)?.grad_fn_name(), Some("MulBackward0"));
    assert_eq!(x.t()?.grad_fn_name(), Some("TransposeBackward0"));
    assert!(x.sum()?.grad_fn_name().is_some());
    let b = x.mul(1.0)?;
    let v = b.select(0, 1)?;
    assert_eq!(v.grad_fn_name(), Some("SelectBackward0"));
    b.narrow(0, 0, 1)?.mul_(2.0)?;
    assert_eq!(b.grad_fn_name(), Some("CopySlices"));
    // A view whose base changed in place regenerates its history (PyTorch: AsStridedBackward0).
    assert_eq!(v.grad_fn_name(), Some("AsStridedBackward0"));
    Ok(())
}

/// PyTorch: `y = x.exp(); y.t_(); y.sum().backward()` fails, because `t_`
/// is an in-place op that bumps the version of the saved output.
#[test]
fn metadata_mutation_bumps_version_like_pytorch() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = x.exp()?;
    let v0 = y.version();
    y.t_()?;
    assert!(y.version() > v0);
    assert_err(y.sum()?.backward(), &["modified by an inplace operation", "ExpBackward0"]);
    Ok(())
}

/// PyTorch: `a = x * 1; a.mul_(a); a.sum().backward()` fails (mul_ saved
/// `a` as its other operand and then overwrote it); `a.add_(a)` saves
/// nothing and works, giving 2.
#[test]
fn inplace_with_itself_as_operand() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0], &[3]);
    let a = x.mul(1.0)?;
    a.mul_(&a)?;
    assert_eq!(vals(&a), vec![1.0, 4.0, 9.0]);
    assert_err(a.sum()?.backward(), &["modified by an inplace operation"]);
    let b = x.mul(1.0)?;
    b.add_(&b)?;
    b.sum()?.backward()?;
    assert_eq!(vals(&x.grad().unwrap()), vec![2.0, 2.0, 2.0]);
    Ok(())
}

/// copy_ between dtypes: the gradient reaches an f32 source as f32.
#[test]
fn copy_across_dtypes_gradient() -> Result<()> {
    let x = tdt(&[1.0, 2.0], &[2], DType::F32).requires_grad_(true)?;
    let z = Tensor::zeros(&[2, 2], DType::F64, &Device::Cpu)?;
    z.select(0, 1)?.copy_(&x)?;
    z.mul(&t64(&[1.0, 2.0, 3.0, 4.0], &[2, 2]))?.sum()?.backward()?;
    let g = x.grad().unwrap();
    assert_eq!(g.dtype(), DType::F32);
    assert_eq!(vals(&g), vec![3.0, 4.0]);
    Ok(())
}

/// Writing a float that requires grad into an integer tensor, or into a
/// view of one, gives it no history (its dtype is not differentiable), as
/// in PyTorch; what is computed from it does not require grad.
#[test]
fn integer_tensors_written_from_grad_tensors_get_no_history() -> Result<()> {
    let b = Tensor::from_vec(vec![1.5f32, -2.5, 3.0, 0.25], &[4], &Device::Cpu)?.requires_grad_(true)?;
    let a = Tensor::zeros(&[4], DType::I64, &Device::Cpu)?;
    a.copy_(&b)?;
    assert!(!a.requires_grad());
    assert_eq!(a.to_vec::<i64>()?, vec![1, -2, 3, 0]);
    assert!(!a.sigmoid()?.requires_grad());
    let base = Tensor::zeros(&[2, 4], DType::I64, &Device::Cpu)?;
    let row = base.select(0, 1)?;
    row.copy_(&b)?;
    assert!(!row.requires_grad() && !base.requires_grad());
    assert_eq!(base.to_vec::<i64>()?, vec![0, 0, 0, 0, 1, -2, 3, 0]);
    Ok(())
}
