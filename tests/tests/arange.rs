//! `Tensor::arange` inside `#[aot_fn]` bodies: PyTorch's forms
//! and defaults, call-time bounds, the causal mask of attention in a
//! training call, `explain()`'s metadata of an arange output, and errors.
//!
//! Each compiled call is compared with the eager functions written by
//! hand (`Tensor::arange` and friends) and with the source graph run op
//! by op (`run_eager`); PyTorch's own values and metadata for arange
//! programs are in the oracle corpus (`oracle/cases_new_user.py`).

use aot_runtime::prelude::*;
use aot_runtime::Arg;

const CPU: Device = Device::Cpu;

fn v64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn eager_arange(start: f64, end: f64, step: f64, dtype: DType) -> Tensor {
    Tensor::arange(start, end, step, dtype, &CPU).unwrap()
}

/// The compiled call, its source run op by op, and `want` agree on
/// shape, dtype and values.
fn check(got: &Tensor, reference: &Tensor, want: &Tensor) {
    for t in [got, reference] {
        assert_eq!((t.shape(), t.dtype()), (want.shape(), want.dtype()));
        assert_eq!(v64(t), v64(want));
        assert!(!t.requires_grad());
    }
}

#[aot_fn]
fn positions(x: &Tensor) -> Tensor {
    Tensor::arange(0, x.size(1))
}

// A tensor parameter read for its device only is unused to rustc, as the
// input is to PyTorch: hence `_x`.
#[aot_fn]
fn float_step(_x: &Tensor) -> Tensor {
    Tensor::arange(0.0, 1.0, 0.3)
}

#[aot_fn]
fn from_n_down(_x: &Tensor, n: i64) -> Tensor {
    Tensor::arange(n, 0, -2)
}

#[aot_fn]
fn scalar_bounds(_x: &Tensor, a: f64, b: f64) -> Tensor {
    Tensor::arange(a, b)
}

#[aot_fn]
fn full_form(x: &Tensor) -> Tensor {
    Tensor::arange(0.5, x.size(0) as f64, 0.5, DType::F64, &x.device())
}

#[aot_fn]
fn int_fractional(_x: &Tensor) -> Tensor {
    Tensor::arange(-3.5, 10, 2.9, DType::I64)
}

#[aot_fn]
fn end_only(x: &Tensor) -> Tensor {
    Tensor::arange(x.size(0) * 2)
}

#[test]
fn forms_and_defaults_follow_pytorch() -> Result<()> {
    let x = Tensor::zeros(&[3, 5], DType::F32, &CPU)?;
    let a = [Arg::from(&x)];
    // i64 when every bound is an integer; the size is read at call time
    check(&positions(&x)?, &positions::compiled().run_eager(&a)?[0], &eager_arange(0.0, 5.0, 1.0, DType::I64));
    assert_eq!(positions(&x)?.to_vec::<i64>()?, vec![0, 1, 2, 3, 4]);
    let wide = Tensor::zeros(&[1, 8], DType::F32, &CPU)?;
    assert_eq!(positions(&wide)?.to_vec::<i64>()?, (0..8).collect::<Vec<i64>>());
    // a float bound gives f32 (torch's default dtype); ceil((1 - 0) / 0.3) = 4 elements
    let r = float_step(&x)?;
    check(&r, &float_step::compiled().run_eager(&a)?[0], &eager_arange(0.0, 1.0, 0.3, DType::F32));
    assert_eq!(r.to_vec::<f32>()?, vec![0.0, 0.3, 0.6, 0.9]);
    // a negative step from a scalar parameter
    let r = from_n_down(&x, 7)?;
    check(&r, &from_n_down::compiled().run_eager(&[Arg::from(&x), Arg::from(7i64)])?[0], &eager_arange(7.0, 0.0, -2.0, DType::I64));
    assert_eq!(r.to_vec::<i64>()?, vec![7, 5, 3, 1]);
    // float parameters
    let args = [Arg::from(&x), Arg::from(-1.5), Arg::from(2.0)];
    check(&scalar_bounds(&x, -1.5, 2.0)?, &scalar_bounds::compiled().run_eager(&args)?[0], &eager_arange(-1.5, 2.0, 1.0, DType::F32));
    // the eager function's own form, with its dtype and device
    let r = full_form(&x)?;
    check(&r, &full_form::compiled().run_eager(&a)?[0], &eager_arange(0.5, 3.0, 0.5, DType::F64));
    assert_eq!(r.to_vec::<f64>()?, vec![0.5, 1.0, 1.5, 2.0, 2.5]);
    // `torch.arange(end)`
    assert_eq!(end_only(&x)?.to_vec::<i64>()?, vec![0, 1, 2, 3, 4, 5]);
    // i64 with fractional bounds: PyTorch truncates start and step (the
    // count stays ceil(13.5 / 2.9) = 5)
    assert_eq!(int_fractional(&x)?.to_vec::<i64>()?, vec![-3, -1, 1, 3, 5]);
    // an empty range is an empty tensor
    assert_eq!(from_n_down(&x, 0)?.shape(), vec![0]);
    Ok(())
}

#[aot_fn]
fn causal_softmax(att: &Tensor, w: &Tensor) -> Tensor {
    let t = att.size(-1);
    let i = Tensor::arange(0, t);
    let mask = i.unsqueeze(0).gt(&i.unsqueeze(1));
    (att.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1) * w).sum()
}

fn causal_softmax_eager(att: &Tensor, w: &Tensor) -> Result<Tensor> {
    let t = att.shape()[2] as f64;
    let i = Tensor::arange(0.0, t, 1.0, DType::I64, &att.device())?;
    let mask = i.unsqueeze(0)?.gt(&i.unsqueeze(1)?)?;
    att.masked_fill(&mask, f64::NEG_INFINITY)?.softmax(-1)?.mul(w)?.sum()
}

/// The causal mask of attention built from arange, in a training call:
/// the loss and the gradients of both inputs equal eager autograd's.
#[test]
fn causal_mask_trains_like_eager() -> Result<()> {
    let vals = |n: usize, k: f64| (0..n).map(|i| ((i as f64) * 0.37 + k).sin()).collect::<Vec<f64>>();
    let leaves = || -> Result<(Tensor, Tensor)> {
        let att = Tensor::from_vec(vals(2 * 4 * 4, 0.1), &[2, 4, 4], &CPU)?.requires_grad_(true)?;
        let w = Tensor::from_vec(vals(2 * 4 * 4, 0.9), &[2, 4, 4], &CPU)?.requires_grad_(true)?;
        Ok((att, w))
    };
    let (att, w) = leaves()?;
    let loss = causal_softmax(&att, &w)?;
    loss.backward()?;
    let (att_e, w_e) = leaves()?;
    let loss_e = causal_softmax_eager(&att_e, &w_e)?;
    loss_e.backward()?;
    let close = |a: Vec<f64>, b: Vec<f64>| {
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs())), "{a:?} vs {b:?}");
    };
    close(v64(&loss), v64(&loss_e));
    let grad = |t: &Tensor| v64(&t.grad().expect("a gradient"));
    close(grad(&att), grad(&att_e));
    close(grad(&w), grad(&w_e));
    // masked positions get no gradient: row 0 of each batch sees key 0 only
    let g = grad(&att);
    assert_eq!(&g[1..4], &[0.0, 0.0, 0.0]);
    // the mask is built in the forward; nothing of it requires grad
    let report = causal_softmax::compiled().explain(&[Arg::from(&att), Arg::from(&w)])?;
    let meta = serde_json::to_value(&report).unwrap();
    assert_eq!(meta["fw_metadata"]["output_info"][0]["requires_grad"], true);
    Ok(())
}

#[aot_fn]
fn arange_outputs(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let r = Tensor::arange(0, x.size(0) * 2);
    (r, r.view(&[2, -1]).t(), x * 2.0, x.select(0, 0))
}

/// An arange output is a fresh output that requires no grad, returned
/// directly or through a view chain (PyTorch reports a view of an
/// intermediate that requires no grad as `non_alias`); the input whose
/// device it takes is not mutated, and reads no differently.
#[test]
fn explain_reports_fresh_outputs_without_grad() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3], &CPU)?.requires_grad_(true)?;
    let report = serde_json::to_value(arange_outputs::compiled().explain(&[Arg::from(&x)])?).unwrap();
    let meta = &report["fw_metadata"];
    let outs: Vec<(String, bool)> = meta["output_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["output_type"].as_str().unwrap().to_string(), o["requires_grad"].as_bool().unwrap()))
        .collect();
    let want = [("non_alias", false), ("non_alias", false), ("non_alias", true), ("alias_of_input", true)];
    assert_eq!(outs, want.map(|(s, b)| (s.to_string(), b)));
    assert_eq!(meta["input_info"][0]["mutation_type"], "not_mutated");
    assert_eq!(meta["num_outputs_non_aliased"], 3);
    let (r, v, _, _) = arange_outputs(&x)?;
    assert_eq!(r.to_vec::<i64>()?, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!((v.shape(), v.to_vec::<i64>()?), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
    assert!(v.shares_storage_with(&r) && !r.requires_grad());
    Ok(())
}

#[aot_fn]
fn mutate_then_count(x: &mut Tensor) -> Tensor {
    x.add_(1.0);
    Tensor::arange(0, x.size(0), 1, DType::F32, &x.device()) * x
}

/// The tensor that gives the device may be mutated before: its mutation
/// is reported and applied as without arange.
#[test]
fn device_of_a_mutated_input() -> Result<()> {
    let mut x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3], &CPU)?;
    let y = mutate_then_count(&mut x)?;
    assert_eq!(y.to_vec::<f32>()?, vec![0.0, 3.0, 8.0]);
    assert_eq!(x.to_vec::<f32>()?, vec![2.0, 3.0, 4.0]);
    let report = serde_json::to_value(mutate_then_count::compiled().explain(&[Arg::from(&x)])?).unwrap();
    assert_eq!(report["fw_metadata"]["input_info"][0]["mutation_type"], "mutated_in_graph");
    Ok(())
}

#[aot_fn]
fn uses_positions(x: &Tensor) -> Tensor {
    positions(&x).to_dtype(DType::F32) + x
}

/// A callee's arange takes its device from the caller's argument.
#[test]
fn arange_in_an_inlined_callee() -> Result<()> {
    let x = Tensor::ones(&[2, 3], DType::F32, &CPU)?;
    assert_eq!(uses_positions(&x)?.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    Ok(())
}

#[aot_fn]
fn stepped(x: &Tensor, start: f64, end: f64, step: f64) -> Tensor {
    Tensor::arange(start, end, step) + x.sum()
}

#[aot_fn]
fn bool_range(x: &Tensor) -> Tensor {
    Tensor::arange(0, 2, 1, DType::Bool, &x.device())
}

/// A step of 0, a step whose sign points away from the end, and a range
/// too long to allocate, and a bool range (PyTorch has none): errors
/// naming the function and the op, with nothing computed.
#[test]
fn bad_ranges_are_errors() -> Result<()> {
    let x = Tensor::zeros(&[2], DType::F32, &CPU)?;
    for (start, end, step, what) in [(0.0, 4.0, 0.0, "step"), (0.0, 4.0, -1.0, "sign"), (0.0, 1e300, 1.0, "elements")] {
        let err = stepped(&x, start, end, step).expect_err(what);
        let msg = err.to_string();
        assert!(msg.contains("stepped") && msg.contains("arange"), "{msg}");
        assert!(msg.contains(what), "{msg}");
    }
    // the range's parameter is named, not `x` (whose device it would take)
    let err = stepped(&x, 0.0, 4.0, 0.0).unwrap_err();
    assert!(matches!(&err, AotError::InFunction { arg: Some(a), .. } if a == "start"), "{err:?}");
    let err = bool_range(&x).unwrap_err();
    assert!(
        matches!(&err, AotError::InFunction { func, source, .. } if func == "bool_range" && matches!(**source, AotError::DTypeMismatch { op: "arange", .. })),
        "{err:?}"
    );
    let err = stepped(&x, 0.0, 1e300, 1.0).unwrap_err();
    assert!(matches!(&err, AotError::InFunction { source, .. } if matches!(**source, AotError::Overflow { op: "arange", .. })), "{err:?}");
    Ok(())
}

/// arange is a primitive that CUDA runs as a kernel of its own (as
/// `cumsum`): `kernels_for(.., Cuda)` lists it where the call runs it,
/// before the fused kernel that reads it (the mask, the softmax and the
/// product in one); on the CPU it is a native loop, listed by its name.
#[test]
fn kernel_listing_includes_arange_for_cuda() -> Result<()> {
    let att = Tensor::zeros(&[2, 4, 4], DType::F32, &CPU)?;
    let w = Tensor::ones(&[2, 4, 4], DType::F32, &CPU)?;
    let args = [Arg::from(&att), Arg::from(&w)];
    let cpu: Vec<String> = causal_softmax::compiled().kernels(&args)?.into_iter().map(|k| k.name).collect();
    assert_eq!(cpu.first().map(String::as_str), Some("cpu_arange"), "{cpu:?}");
    let cuda = causal_softmax::compiled().kernels_for(&args, &Device::Cuda(0));
    #[cfg(feature = "cuda")]
    {
        let names: Vec<String> = cuda?.into_iter().map(|k| k.name).collect();
        let at = names.iter().position(|k| k == "aot_arange_int64").unwrap_or_else(|| panic!("no arange kernel in {names:?}"));
        assert!(names.len() > at + 1, "the mask's kernels follow: {names:?}");
        let f: Vec<String> = float_step::compiled().kernels_for(&args[..1], &Device::Cuda(0))?.into_iter().map(|k| k.name).collect();
        assert_eq!(f, vec!["aot_arange_float32".to_string()]);
    }
    #[cfg(not(feature = "cuda"))]
    assert!(matches!(cuda, Err(AotError::DeviceUnavailable { .. })), "{cuda:?}");
    Ok(())
}

#[aot_fn]
fn twice(x: &Tensor) -> (Tensor, Tensor) {
    (Tensor::arange(0, x.size(0)), Tensor::arange(0, x.size(0)))
}

/// Two equal ranges are two tensors (as two `torch.arange` calls are):
/// writing one leaves the other; an input read for its device only, even
/// one that requires grad, gives an output without grad and no gradient.
#[test]
fn equal_ranges_are_distinct_and_require_no_grad() -> Result<()> {
    let x = Tensor::ones(&[3], DType::F32, &CPU)?.requires_grad_(true)?;
    let (a, b) = twice(&x)?;
    assert!(!a.shares_storage_with(&b));
    a.add_(10i64)?;
    assert_eq!((a.to_vec::<i64>()?, b.to_vec::<i64>()?), (vec![10, 11, 12], vec![0, 1, 2]));
    assert!(!a.requires_grad() && !b.requires_grad());
    let report = serde_json::to_value(twice::compiled().explain(&[Arg::from(&x)])?).unwrap();
    let meta = &report["fw_metadata"];
    assert_eq!(meta["input_info"][0]["requires_grad"], true);
    for k in 0..2 {
        assert_eq!(meta["output_info"][k]["output_type"], "non_alias");
        assert_eq!(meta["output_info"][k]["requires_grad"], false);
    }
    assert_eq!(meta["traced_tangents"], serde_json::json!([]));
    Ok(())
}
