//! Regression tests: compiled calls whose arguments are in unusual autograd
//! states (a view taken before its base required grad, a view made under
//! `no_grad` whose base later gained history, a view of a non-leaf) agree
//! with eager on success or failure, and a failing call writes nothing.

use aot_runtime::prelude::*;
use aot_tests::snapshot::TensorSnapshot;

#[aot_fn]
fn add_into(dst: &mut Tensor, src: &Tensor) {
    dst.add_(src);
}

#[aot_fn]
fn twice(a: &mut Tensor) {
    a.mul_(2.0);
    a.add_(1.0);
}

#[aot_fn]
fn view_then_copy(a: &Tensor, b: &Tensor) -> Tensor {
    let x = a * 1.0;
    let v = no_grad! { x.view(&[2, 1]) };
    x.copy_(b);
    v
}

fn dev() -> Device {
    Device::Cpu
}

#[test]
fn a_view_taken_before_its_base_required_grad_is_refused_before_any_write() -> Result<()> {
    let leaf = Tensor::zeros(&[4], DType::F32, &dev())?;
    let v = leaf.narrow(0, 1, 2)?;
    leaf.requires_grad_(true)?;
    let src = Tensor::ones(&[2], DType::F32, &dev())?.requires_grad_(true)?;
    let before = TensorSnapshot::take(&leaf);
    let path = add_into::compiled().call_path(&[(&v).into(), (&src).into()])?;
    assert_eq!(path, "eager reference: argument 0 is a view taken before its base required grad");
    let r = add_into(&mut v.clone(), &src);
    assert!(r.is_err(), "eager refuses an in-place write to a view of a leaf that requires grad");
    assert!(TensorSnapshot::take(&leaf).diff(&before).is_empty(), "leaf changed: {:?}", leaf.to_vec::<f32>()?);
    Ok(())
}

#[test]
fn a_second_write_to_a_view_that_gained_history_is_refused_as_in_eager() -> Result<()> {
    for compiled in [false, true] {
        let leaf = Tensor::zeros(&[4], DType::F32, &dev())?;
        let v = leaf.narrow(0, 0, 2)?;
        leaf.requires_grad_(true)?;
        let before = TensorSnapshot::take(&leaf);
        let r = if compiled { twice(&mut v.clone()).map(|_| ()) } else { twice::compiled().run_eager(&[(&v).into()]).map(|_| ()) };
        assert!(r.is_err(), "compiled={compiled}: eager refuses the add_ after mul_");
        if compiled {
            assert!(TensorSnapshot::take(&leaf).diff(&before).is_empty(), "leaf changed: {:?}", leaf.to_vec::<f32>()?);
        }
    }
    Ok(())
}

#[test]
fn a_no_grad_view_of_a_value_then_written_with_grad_matches_eager() -> Result<()> {
    let mk = || -> Result<(Tensor, Tensor)> {
        let a = Tensor::from_vec(vec![1.0f64, 3.0], &[2], &dev())?;
        let b = Tensor::from_vec(vec![5.0f64], &[1], &dev())?.requires_grad_(true)?;
        Ok((a, b))
    };
    let (a, b) = mk()?;
    let eager = view_then_copy::compiled().run_eager(&[(&a).into(), (&b).into()])?;
    let (a, b) = mk()?;
    let compiled = view_then_copy(&a, &b)?;
    assert_eq!(eager[0].requires_grad(), compiled.requires_grad());
    assert_eq!(eager[0].to_vec::<f64>()?, compiled.to_vec::<f64>()?);
    Ok(())
}

#[test]
fn a_view_of_a_non_leaf_that_requires_grad_runs_compiled_and_matches_eager() -> Result<()> {
    let mk = || -> Result<(Tensor, Tensor, Tensor)> {
        let w = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[4], &dev())?.requires_grad_(true)?;
        let h = w.mul(2.0)?;
        let src = Tensor::from_vec(vec![0.5f64, -1.5], &[2], &dev())?.requires_grad_(true)?;
        Ok((w, h, src))
    };
    let (w, h, src) = mk()?;
    let v = h.narrow(0, 1, 2)?;
    assert_eq!(add_into::compiled().call_path(&[(&v).into(), (&src).into()])?, "compiled training");
    add_into(&mut v.clone(), &src)?;
    h.mul(&h)?.sum()?.backward()?;
    let (we, he, srce) = mk()?;
    let ve = he.narrow(0, 1, 2)?;
    add_into::compiled().run_eager(&[(&ve).into(), (&srce).into()])?;
    he.mul(&he)?.sum()?.backward()?;
    assert_eq!(h.to_vec::<f64>()?, he.to_vec::<f64>()?);
    let grads = |t: &Tensor| t.grad().map(|g| g.to_vec::<f64>()).transpose();
    assert_eq!(grads(&w)?, grads(&we)?);
    assert_eq!(grads(&src)?, grads(&srce)?);
    Ok(())
}

#[aot_fn]
fn meta_twice(a: &mut Tensor) -> (Tensor, Tensor) {
    let _x = a + 2.0;
    a.transpose_(0, 0);
    a.unsqueeze_(0);
    (a, a)
}

/// An expanded argument (elements that overlap) whose base gained history:
/// its gradient is summed over the overlapping elements, as eager does,
/// whether or not its history was looked at before the call.
#[test]
fn an_expanded_argument_that_requires_grad_gets_eager_gradients() -> Result<()> {
    let run = |compiled: bool, peek: bool| -> Result<Vec<f64>> {
        let s0 = Tensor::from_vec(vec![0.3f64, 0.7], &[2], &dev())?;
        let v = s0.as_strided(&[2, 2], &[0, 1], 0)?;
        let one = Tensor::ones(&[1], DType::F64, &dev())?.requires_grad_(true)?;
        s0.mul_(&one)?;
        if peek {
            assert!(!v.is_leaf());
        }
        let outs = if compiled {
            let (a, b) = meta_twice(&mut v.clone())?;
            vec![a, b]
        } else {
            meta_twice::compiled().run_eager(&[(&v).into()])?
        };
        outs[0].mul(2.0)?.sum()?.add(&outs[1].sum()?)?.backward()?;
        one.grad().map_or(Ok(vec![]), |g| g.to_vec::<f64>())
    };
    let want = run(false, false)?;
    assert_eq!(want.len(), 1);
    for peek in [false, true] {
        assert_eq!(run(true, peek)?, want, "peek={peek}");
    }
    Ok(())
}

#[aot_fn]
fn detached_view(a: &mut Tensor) -> Tensor {
    let d = a.detach();
    d.copy_(a);
    a.relu_();
    d.narrow(0, 0, 1)
}

/// With grad mode off, an output that is a view of a detached alias of an
/// input that requires grad does not require grad, as in eager.
#[test]
fn a_view_of_a_detached_alias_under_no_grad_does_not_require_grad() -> Result<()> {
    let run = |compiled: bool| -> Result<bool> {
        let a = Tensor::from_vec(vec![1.0f64, -2.0], &[2], &dev())?.requires_grad_(true)?;
        let out = aot_runtime::no_grad(|| {
            if compiled {
                detached_view(&mut a.clone())
            } else {
                Ok(detached_view::compiled().run_eager(&[(&a).into()])?.remove(0))
            }
        })?;
        assert_eq!(a.to_vec::<f64>()?, vec![1.0, 0.0]);
        Ok(out.requires_grad())
    };
    assert!(!run(false)?);
    assert!(!run(true)?);
    Ok(())
}

#[aot_fn]
fn no_grad_view_then_written(a: &Tensor, b: &Tensor, c: &mut Tensor) -> Tensor {
    let x = a / 2.0;
    let e = b.expand(&[2]);
    let v = no_grad! { e.unsqueeze(0) };
    c.copy_(&x);
    v
}

/// A view made under `no_grad` of an argument that gains history later in
/// the call (through another name for the same tensor) does not require
/// grad: it was made before.
#[test]
fn a_no_grad_view_of_an_argument_written_later_through_another_name_matches_eager() -> Result<()> {
    for compiled in [false, true] {
        let a = Tensor::from_vec(vec![0.3f64, 0.7], &[2], &dev())?.requires_grad_(true)?;
        let b = Tensor::from_vec(vec![0.3f64, 0.7], &[2], &dev())?;
        let args = [(&a).into(), (&b).into(), (&b).into()];
        let o = if compiled {
            no_grad_view_then_written(&a, &b, &mut b.clone())?
        } else {
            no_grad_view_then_written::compiled().run_eager(&args)?.remove(0)
        };
        assert!(!o.requires_grad(), "compiled={compiled}");
        assert!(b.requires_grad(), "compiled={compiled}");
    }
    Ok(())
}

#[aot_fn]
fn no_grad_view_then_written_once(a: &Tensor, c: &mut Tensor) -> Tensor {
    let x = a / 2.0;
    let v = no_grad! { c.unsqueeze(0) };
    c.copy_(&x);
    v
}

/// The same through one name: compiled, and the view does not require grad.
#[test]
fn a_no_grad_view_of_an_argument_written_later_runs_compiled_and_matches_eager() -> Result<()> {
    for compiled in [false, true] {
        let a = Tensor::from_vec(vec![0.3f64, 0.7], &[2], &dev())?.requires_grad_(true)?;
        let c = Tensor::from_vec(vec![0.3f64, 0.7], &[2], &dev())?;
        let args = [(&a).into(), (&c).into()];
        let o = if compiled {
            assert_eq!(no_grad_view_then_written_once::compiled().call_path(&args)?, "compiled training");
            no_grad_view_then_written_once(&a, &mut c.clone())?
        } else {
            no_grad_view_then_written_once::compiled().run_eager(&args)?.remove(0)
        };
        assert!(!o.requires_grad(), "compiled={compiled}");
        assert!(c.requires_grad(), "compiled={compiled}");
    }
    Ok(())
}

#[aot_fn]
fn detach_then_write_other_name(a: &Tensor, b: &mut Tensor) -> (Tensor, Tensor) {
    let d = a.detach();
    let n = a.neg();
    b.add_(2.0);
    let m = d.matmul(&n);
    (a, m)
}

/// A `detach()` alias of one argument read after a write through another
/// name for the same tensor passes no gradient, as in eager.
#[test]
fn a_detached_alias_read_after_a_write_through_another_name_passes_no_gradient() -> Result<()> {
    let run = |compiled: bool| -> Result<Vec<f64>> {
        let s0 = Tensor::from_vec(vec![0.3f64, 0.7], &[2], &dev())?;
        let v = s0.as_strided(&[1], &[1], 1)?;
        let one = Tensor::ones(&[1], DType::F64, &dev())?.requires_grad_(true)?;
        s0.mul_(&one)?;
        assert!(!v.is_leaf());
        let o = if compiled {
            let (x, y) = detach_then_write_other_name(&v, &mut v.clone())?;
            vec![x, y]
        } else {
            detach_then_write_other_name::compiled().run_eager(&[(&v).into(), (&v).into()])?
        };
        o[0].mul(3.0)?.sum()?.add(&o[1].sum()?)?.backward()?;
        one.grad().map_or(Ok(vec![]), |g| g.to_vec::<f64>())
    };
    let want = run(false)?;
    assert!((want[0] - 0.21).abs() < 1e-12, "{want:?}");
    assert_eq!(run(true)?, want);
    Ok(())
}

#[aot_fn]
fn write_then_scale(a: &mut Tensor, s: f64) -> Tensor {
    a.div_(2.0);
    let n = a.neg();
    a.squeeze(0).mul_(s);
    n
}

/// A non-finite scalar on the path of an output that receives no gradient
/// (the written input, unused by the loss) does not reach the gradient:
/// eager never runs that path, and the compiled backward sets what it
/// computes from the missing gradient to zero instead of `0 * NaN`.
#[test]
fn a_nan_on_a_path_without_gradient_does_not_reach_the_gradient() -> Result<()> {
    let run = |compiled: bool| -> Result<Vec<f64>> {
        let leaf = Tensor::from_vec(vec![0.8f64], &[1, 1], &dev())?.requires_grad_(true)?;
        let a = leaf.mul(1.0)?;
        let n = if compiled {
            write_then_scale(&mut a.clone(), f64::NAN)?
        } else {
            write_then_scale::compiled().run_eager(&[(&a).into(), f64::NAN.into()])?.remove(0)
        };
        n.sum()?.backward()?;
        leaf.grad().map_or(Ok(vec![]), |g| g.to_vec::<f64>())
    };
    assert_eq!(run(false)?, vec![-0.5]);
    assert_eq!(run(true)?, vec![-0.5]);
    Ok(())
}

#[aot_fn]
fn overwrite_with_own_detach(b: &mut Tensor) -> Tensor {
    let u = b.unsqueeze(0);
    let d = u.detach();
    u.copy_(&d);
    b
}

/// Copying a tensor's own detached value into it cuts its history: no
/// gradient reaches what it was computed from, as in eager.
#[test]
fn overwriting_a_tensor_with_its_own_detached_value_cuts_the_gradient() -> Result<()> {
    let run = |compiled: bool| -> Result<Vec<f64>> {
        let one = Tensor::ones(&[1], DType::F64, &dev())?.requires_grad_(true)?;
        let b = Tensor::from_vec(vec![0.7f64], &[1, 1], &dev())?.mul(&one)?;
        let out = if compiled {
            overwrite_with_own_detach(&mut b.clone())?
        } else {
            overwrite_with_own_detach::compiled().run_eager(&[(&b).into()])?.remove(0)
        };
        out.sum()?.backward()?;
        one.grad().map_or(Ok(vec![]), |g| g.to_vec::<f64>())
    };
    assert_eq!(run(false)?, vec![0.0]);
    assert_eq!(run(true)?, vec![0.0]);
    Ok(())
}

#[aot_fn]
fn view_write_then_transpose(a: &mut Tensor, b: &Tensor) -> Tensor {
    let m = a.matmul(b);
    let v = m.view(&[8, 2]);
    v.zero_();
    v.add_(a.sum());
    m.t_();
    m
}

/// The backward of a write through a `view` of a value later transposed in
/// place: the view is replayed on the gradient laid out as the value was
/// (found by the differential test at 100,000 cases).
#[test]
fn a_view_written_then_its_base_transposed_in_place_has_eager_gradients() -> Result<()> {
    let run = |compiled: bool| -> Result<Vec<f64>> {
        let a = Tensor::randn(&[4, 4], DType::F64, &dev(), 0)?.requires_grad_(true)?;
        let b = Tensor::randn(&[4, 4], DType::F64, &dev(), 1)?;
        let o = if compiled {
            view_write_then_transpose(&mut a.mul(1.0)?, &b)?
        } else {
            view_write_then_transpose::compiled().run_eager(&[(&a.mul(1.0)?).into(), (&b).into()])?.remove(0)
        };
        o.mul(&Tensor::randn(&[4, 4], DType::F64, &dev(), 2)?)?.sum()?.backward()?;
        a.grad().map_or(Ok(vec![]), |g| g.to_vec::<f64>())
    };
    let (e, c) = (run(false)?, run(true)?);
    assert_eq!(e.len(), 16);
    assert!(e.iter().zip(&c).all(|(x, y)| (x - y).abs() < 1e-12), "eager {e:?}\ncompiled {c:?}");
    Ok(())
}

#[aot_fn]
fn scale_view_then_self_copy(a: &mut Tensor, s: f64) -> Tensor {
    let o = a.sum_dim(&[0], false);
    let r = a.reshape(&[1]);
    r.mul_(s);
    r.copy_(r);
    o
}

/// The same through a view and a self-copy, whose rule makes a
/// `zeros_like` for the overwritten value: zero too, not `0 * NaN`.
#[test]
fn a_nan_before_a_self_copy_through_a_view_does_not_reach_the_gradient() -> Result<()> {
    for compiled in [false, true] {
        let one = Tensor::ones(&[1], DType::F64, &dev())?.requires_grad_(true)?;
        let a = Tensor::from_vec(vec![0.7f64], &[1, 1, 1], &dev())?.mul(&one)?;
        let args = [(&a).into(), f64::NAN.into()];
        let f = scale_view_then_self_copy::compiled();
        let o = if compiled { f.__call(&args)?.remove(0) } else { f.run_eager(&args)?.remove(0) };
        o.sum()?.backward()?;
        assert_eq!(one.grad().map(|g| g.to_vec::<f64>()).transpose()?, Some(vec![0.7]), "compiled={compiled}");
    }
    Ok(())
}

#[aot_fn]
fn write_a_slice_of_expanded(a: &Tensor, b: &mut Tensor, c: &Tensor) -> (Tensor, Tensor) {
    let v = b.narrow(0, 1, 1);
    v.fill_(2.0);
    v.copy_(c);
    let s = b.sum_dim(&[0], false);
    v.add_(2.0);
    (s, a * 1.0)
}

/// A write through a view of an expanded argument reaches every element
/// that shares the written storage: eager's gradient counts each of them
/// (found by the long fuzz run, seed 16).
#[test]
fn a_write_through_a_slice_of_an_expanded_argument_has_eager_gradients() -> Result<()> {
    let mut grads = Vec::new();
    for compiled in [false, true] {
        let s0 = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0], &[5], &dev())?.requires_grad_(true)?;
        let s1 = Tensor::from_vec((0..8).map(f64::from).collect::<Vec<_>>(), &[8], &dev())?;
        let a = s0.as_strided(&[4], &[1], 1)?;
        let mut b = s1.as_strided(&[2, 4, 2], &[0, 2, 1], 0)?;
        let c = s0.as_strided(&[4, 1], &[1, 1], 0)?;
        let outs = if compiled {
            let (s, y) = write_a_slice_of_expanded(&a, &mut b, &c)?;
            vec![s, y]
        } else {
            write_a_slice_of_expanded::compiled().run_eager(&[(&a).into(), (&b).into(), (&c).into()])?
        };
        assert_eq!(outs[0].to_vec::<f64>()?, vec![2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 8.0, 8.0]);
        outs[0].sum()?.backward()?;
        grads.push(s0.grad().expect("s0 gets a gradient").to_vec::<f64>()?);
    }
    assert_eq!(grads[0], vec![4.0, 4.0, 4.0, 4.0, 0.0]);
    assert_eq!(grads[1], grads[0]);
    Ok(())
}

#[aot_fn]
fn transpose_view_zero(a: &mut Tensor) -> Tensor {
    a.transpose_(1, 0);
    let v = a.view(&[4, 1]);
    v.zero_();
    a.add_(2.0);
    a.diagonal().matmul(a)
}

/// `view` made on an argument transposed in place: its gradient is placed
/// by the elements the view selects, not by a contiguous stand-in's strides
/// (found by the long fuzz run, seed 16).
#[test]
fn a_view_of_an_argument_transposed_in_place_has_eager_gradients() -> Result<()> {
    let mut grads = Vec::new();
    for compiled in [false, true] {
        let s0 = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[4], &dev())?.requires_grad_(true)?;
        let s = s0.mul(1.0)?;
        let mut a = s.as_strided(&[2, 2], &[1, 2], 0)?;
        let y = if compiled { transpose_view_zero(&mut a)? } else { transpose_view_zero::compiled().run_eager(&[(&a).into()])?.remove(0) };
        y.mul(&Tensor::from_vec(vec![1.0f64, 3.0], &[2], &dev())?)?.sum()?.backward()?;
        grads.push(s0.grad().expect("s0 gets a gradient").to_vec::<f64>()?);
    }
    assert_eq!(grads[1], grads[0]);
    Ok(())
}

#[aot_fn]
fn copy_into_then_return_expanded_alias(a: &Tensor, b: &mut Tensor, c: &mut Tensor) -> (Tensor, Tensor) {
    let s = a.sum_dim(&[0], false);
    b.t_();
    b.zero_();
    b.copy_(&s);
    c.t_();
    s.add_(2.0);
    (s, c)
}

/// An expanded argument (elements that overlap) that is neither written
/// nor requires grad, over a storage another argument writes and returned:
/// eager sums the gradients of its elements that share the written storage
/// element, so the call runs the eager reference (found by the long fuzz
/// run, seed 26).
#[test]
fn an_expanded_alias_of_a_written_argument_has_eager_gradients() -> Result<()> {
    let mut grads = Vec::new();
    for compiled in [false, true] {
        let a = Tensor::from_vec(vec![0.5f64, -1.0, 2.0], &[3], &dev())?.requires_grad_(true)?;
        let s1 = Tensor::from_vec((0..12).map(f64::from).collect::<Vec<_>>(), &[4, 3], &dev())?;
        let mut b = s1.clone();
        let mut c = s1.as_strided(&[3, 1], &[0, 1], 0)?;
        let outs = if compiled {
            let (s, c) = copy_into_then_return_expanded_alias(&a, &mut b, &mut c)?;
            vec![s, c]
        } else {
            copy_into_then_return_expanded_alias::compiled().run_eager(&[(&a).into(), (&b).into(), (&c).into()])?
        };
        outs[0].mul(3.0)?.sum()?.add(&outs[1].mul(&outs[1])?.sum()?)?.backward()?;
        grads.push(a.grad().expect("a gets a gradient").to_vec::<f64>()?);
    }
    assert_eq!(grads[1], grads[0]);
    Ok(())
}

#[aot_fn]
fn expanded_alias_and_zeroed(a: &Tensor) -> (Tensor, Tensor) {
    let e = a.expand(&[3, 4, 3]);
    let t = e.transpose(0, 0);
    let m = a.maximum(2.0);
    m.zero_();
    (m, t)
}

/// A bf16 leaf returned through an expanding view: the compiled call
/// regenerates the view from the argument, whose gradient scatters 9
/// addends into each element. They are summed and rounded once, as eager's
/// `sum_to` does (long fuzz, seed 27: one addend at a time drifted by an
/// ulp or two).
#[test]
fn an_overlapping_views_gradient_rounds_its_sum_once() {
    let leaf = || {
        let a = Tensor::rand(&[4, 1], DType::F64, &Device::Cpu, 3).unwrap().mul(3.0).unwrap();
        a.to_dtype(DType::BF16).unwrap().requires_grad_(true).unwrap()
    };
    let g = Tensor::randn(&[3, 4, 3], DType::F64, &Device::Cpu, 5).unwrap().to_dtype(DType::BF16).unwrap();
    let loss = |o: &[Tensor]| o[1].mul(&g).unwrap().sum().unwrap().add(&o[0].sum().unwrap()).unwrap();
    let (a, b) = (leaf(), leaf());
    let (m, t) = expanded_alias_and_zeroed(&a).unwrap();
    loss(&[m, t]).backward().unwrap();
    loss(&expanded_alias_and_zeroed::compiled().run_eager(&[Arg::from(&b)]).unwrap()).backward().unwrap();
    let exact = g.to_dtype(DType::F64).unwrap().sum_dim(&[0, 2], true).unwrap().to_dtype(DType::BF16).unwrap();
    assert_eq!(b.grad().unwrap().to_vec::<f64>().unwrap(), exact.to_vec::<f64>().unwrap(), "eager rounds once");
    assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), exact.to_vec::<f64>().unwrap(), "compiled rounds once");
}

#[aot_fn]
fn copy_into_int(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.copy_(b);
    a.sigmoid()
}

/// A float that requires grad copied into an integer argument: the write
/// is not differentiable (the integer tensor never requires grad), so no
/// gradient reaches `b`, in eager and compiled alike (fuzz seed 32).
#[test]
fn a_copy_into_an_integer_argument_carries_no_gradient() -> Result<()> {
    let b_val = Tensor::from_vec(vec![1.7f64, -2.2], &[2], &dev())?;
    let run = |compiled: bool| -> Result<(Vec<i64>, bool, Option<Vec<f64>>)> {
        let mut a = Tensor::zeros(&[2], DType::I64, &dev())?;
        let b = b_val.copy()?.requires_grad_(true)?;
        let y = if compiled {
            copy_into_int(&mut a, &b)?
        } else {
            copy_into_int::compiled().run_eager(&[Arg::from(&mut a), Arg::from(&b)])?.remove(0)
        };
        let rg = y.requires_grad();
        if rg {
            y.sum()?.backward()?;
        }
        Ok((a.to_vec::<i64>()?, rg, b.grad().map(|g| g.to_vec::<f64>()).transpose()?))
    };
    let (eager, compiled) = (run(false)?, run(true)?);
    assert_eq!(eager.0, vec![1, -2]);
    assert_eq!(compiled, eager);
    // No gradient flows through the integer tensor: as in PyTorch, neither
    // it nor what is computed from it requires grad.
    assert!(!eager.1, "the output of an integer tensor requires grad");
    assert_eq!(compiled.2, None);
    Ok(())
}

#[aot_fn]
fn through_int(b: &Tensor) -> Tensor {
    let r = b.to_dtype(DType::I64);
    let f = r.to_dtype(DType::F64);
    f.mul(b)
}

/// A round trip through an integer dtype cuts the gradient there, in eager
/// and compiled alike: d/db (trunc(b) * b) is trunc(b).
#[test]
fn a_round_trip_through_an_integer_dtype_cuts_the_gradient() -> Result<()> {
    let vals = vec![1.7f64, -2.2, 0.4];
    let run = |compiled: bool| -> Result<(Vec<f64>, Vec<f64>)> {
        let b = Tensor::from_vec(vals.clone(), &[3], &dev())?.requires_grad_(true)?;
        let y = if compiled { through_int(&b)? } else { through_int::compiled().run_eager(&[Arg::from(&b)])?.remove(0) };
        y.sum()?.backward()?;
        Ok((y.to_vec::<f64>()?, b.grad().map(|g| g.to_vec::<f64>()).transpose()?.unwrap_or_default()))
    };
    let (eager, compiled) = (run(false)?, run(true)?);
    assert_eq!(eager.1, vec![1.0, -2.0, 0.0]);
    assert_eq!(compiled, eager);
    Ok(())
}
