//! Tensor subclasses (`#[tensor_subclass]`, `aot_runtime::subclass`): a
//! weight-only int8-quantised weight, `Int8Weight { q, scale, bits }`, is
//! unwrapped into its inner tensors at the call, rewrapped with its
//! recorded attributes when a function returns it, and trained through its
//! scale with the codes frozen. Compiled calls are checked against the
//! same code in eager ops.
//!
//! The codes are `I64`: the runtime has no `i8` dtype.

use aot_runtime::prelude::*;
use aot_runtime::subclass::create_subclass_meta;

#[derive(TensorTree)]
#[tensor_subclass(size = q, dtype = scale)]
struct Int8Weight {
    q: Tensor,
    scale: Tensor,
    #[skip]
    bits: u8,
}

/// `x @ dequant(w).T + b`, dequantised inside the function.
#[aot_fn]
fn qlinear(x: &Tensor, w: &Int8Weight, b: &Tensor) -> Tensor {
    let wf = w.q.to_dtype(DType::F32) * w.scale.unsqueeze(1);
    x.matmul(&wf.t()) + b
}

/// The mean squared error of `qlinear` against `y`.
#[aot_fn]
fn qloss(x: &Tensor, w: &Int8Weight, b: &Tensor, y: &Tensor) -> Tensor {
    let wf = w.q.to_dtype(DType::F32) * w.scale.unsqueeze(1);
    (x.matmul(&wf.t()) + b - y).square().mean()
}

/// Per-row symmetric quantisation, rounding half away from zero; the
/// returned subclass is rebuilt with `bits: 8`.
#[aot_fn]
fn quantize(w: &Tensor) -> Int8Weight {
    let scale = w.abs().amax_dim(&[1], false) / 127.0;
    let y = w / scale.unsqueeze(1);
    let half = y.ge(0.0).to_dtype(DType::F32) - 0.5;
    Int8Weight { q: (y + half).to_dtype(DType::I64), scale, bits: 8 }
}

/// A compiled SGD step on the scale (the codes are frozen).
#[aot_fn]
fn sgd_scale(w: &mut Int8Weight, g: &Tensor, lr: f64) {
    no_grad! {
        w.scale.sub_(&(g * lr));
    }
}

#[derive(TensorTree)]
struct PlainPair {
    q: Tensor,
    scale: Tensor,
}

/// Changes a field's metadata in place: fine for a plain struct, refused
/// for a subclass passed in its place.
#[aot_fn]
fn transpose_codes(w: &mut PlainPair) -> Tensor {
    w.q.t_();
    w.q.to_dtype(DType::F32) * w.scale
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).expect("randn")
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).and_then(|t| t.to_vec::<f64>()).expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    let (g, w) = (vals(got), vals(want));
    assert_eq!(g.len(), w.len(), "{what}: lengths");
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn quantize_eager(w: &Tensor) -> Result<Int8Weight> {
    let scale = w.abs()?.amax_dim(&[1], false)?.div(127.0)?;
    let y = w.div(&scale.unsqueeze(1)?)?;
    let half = y.ge(0.0)?.to_dtype(DType::F32)?.sub(0.5)?;
    Ok(Int8Weight { q: y.add(&half)?.to_dtype(DType::I64)?, scale, bits: 8 })
}

fn qloss_eager(x: &Tensor, w: &Int8Weight, b: &Tensor, y: &Tensor) -> Result<Tensor> {
    let wf = w.q.to_dtype(DType::F32)?.mul(&w.scale.unsqueeze(1)?)?;
    x.matmul(&wf.t()?)?.add(b)?.sub(y)?.square()?.mean()
}

#[test]
fn quantize_rewraps_with_the_recorded_attributes() -> Result<()> {
    let w = randn(&[4, 6], 1);
    let qw = quantize(&w)?;
    let want = quantize_eager(&w)?;
    assert_eq!(qw.bits, 8);
    assert_eq!(qw.q.dtype(), DType::I64);
    assert_eq!(qw.q.to_vec::<i64>()?, want.q.to_vec::<i64>()?);
    assert_close("scale", &qw.scale, &want.scale);
    let codes = qw.q.to_vec::<i64>()?;
    assert!(codes.iter().all(|c| (-127..=127).contains(c)), "{codes:?}");
    // Each row's largest magnitude maps to ±127.
    for row in codes.chunks(6) {
        assert_eq!(row.iter().map(|c| c.abs()).max(), Some(127), "{row:?}");
    }
    // The dequantised weight is within half a step of the original.
    let deq = qw.q.to_dtype(DType::F32)?.mul(&qw.scale.unsqueeze(1)?)?;
    let err = deq.sub(&w)?.abs()?.sub(&qw.scale.unsqueeze(1)?.mul(0.5 + 1e-4)?)?.amax_dim(&[0, 1], false)?;
    assert!(err.item::<f32>()? <= 0.0, "quantisation error beyond half a step");

    // PyTorch's SubclassCreationMeta of the output: inner tensors in order,
    // the flatten context, the outer size and dtype.
    let metas = create_subclass_meta(&qw);
    assert_eq!(metas.len(), 1);
    let m = &metas[0];
    assert_eq!((m.type_name.as_str(), m.path.as_str(), m.flat_tensor_start_idx, m.arg_count), ("Int8Weight", "", 0, 2));
    assert_eq!(m.inner, ["q", "scale"]);
    assert_eq!(m.meta, [("bits".to_string(), "8".to_string())]);
    assert_eq!(m.outer_size, Some(vec![4, 6]));
    assert_eq!(m.outer_dtype, Some(DType::F32));
    Ok(())
}

#[test]
fn compiled_matches_eager_values_and_gradients() -> Result<()> {
    let qw = quantize(&randn(&[3, 5], 2))?;
    let (x, b, y) = (randn(&[4, 5], 3), randn(&[3], 4).requires_grad_(true)?, randn(&[4, 3], 5));
    let codes = qw.q.to_vec::<i64>()?;
    let w = Int8Weight { q: qw.q.clone(), scale: qw.scale.detach()?.requires_grad_(true)?, bits: qw.bits };
    let out = qlinear(&x, &w, &b)?;
    let deq = w.q.to_dtype(DType::F32)?.mul(&w.scale.unsqueeze(1)?)?;
    assert_close("qlinear", &out, &x.matmul(&deq.t()?)?.add(&b)?);

    let loss = qloss(&x, &w, &b, &y)?;
    loss.backward()?;
    let we = Int8Weight { q: qw.q.clone(), scale: qw.scale.detach()?.requires_grad_(true)?, bits: 8 };
    let be = b.detach()?.requires_grad_(true)?;
    let loss_e = qloss_eager(&x, &we, &be, &y)?;
    loss_e.backward()?;
    assert_close("loss", &loss, &loss_e);
    assert_close("scale.grad", &w.scale.grad().expect("scale gets a gradient"), &we.scale.grad().expect("eager"));
    assert_close("b.grad", &b.grad().expect("b gets a gradient"), &be.grad().expect("eager"));
    // The frozen codes get no gradient and are unchanged.
    assert!(w.q.grad().is_none());
    assert!(!w.q.requires_grad());
    assert_eq!(w.q.to_vec::<i64>()?, codes);
    Ok(())
}

#[test]
fn the_graph_sees_only_plain_inner_tensors() -> Result<()> {
    let g = qlinear::compiled().graph();
    let names: Vec<&str> = g.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "b", "w.q", "w.scale"]);
    let w = quantize(&randn(&[3, 5], 6))?;
    let w = Int8Weight { scale: w.scale.requires_grad_(true)?, ..w };
    let (x, b) = (randn(&[2, 5], 7), randn(&[3], 8));
    let sig = qlinear::compiled().graph_signature(&[Arg::from(&x), Arg::tree(&w), Arg::from(&b)])?;
    assert_eq!(sig.parameters, ["w.q", "w.scale"]);
    assert_eq!(sig.user_inputs, ["x", "b"]);
    let bw = sig.backward_signature.expect("the scale requires grad");
    assert_eq!(bw.gradients_to_parameters.values().collect::<Vec<_>>(), ["w.scale"]);
    let report = qlinear::compiled().explain(&[Arg::from(&x), Arg::tree(&w), Arg::from(&b)])?;
    let rg: Vec<bool> = report.fw_metadata.input_info.iter().map(|i| i.requires_grad).collect();
    assert_eq!(rg, [false, false, false, true]);
    Ok(())
}

#[test]
fn training_the_scale_with_frozen_codes_lowers_the_loss() -> Result<()> {
    // A target made by a float weight; the quantised start is perturbed so
    // there is something to learn.
    let w_true = randn(&[4, 8], 10);
    let x = randn(&[32, 8], 11);
    let b = Tensor::zeros(&[4], DType::F32, &Device::Cpu)?;
    let y = x.matmul(&w_true.t()?)?;
    let q0 = quantize(&w_true)?;
    let codes = q0.q.to_vec::<i64>()?;
    let mut w = Int8Weight { scale: q0.scale.mul(0.5)?.requires_grad_(true)?, ..q0 };
    let first = qloss(&x, &w, &b, &y)?.item::<f32>()?;
    let mut last = first;
    for _ in 0..200 {
        let loss = qloss(&x, &w, &b, &y)?;
        loss.backward()?;
        let g = w.scale.grad().expect("scale gradient");
        w.scale.set_grad(None);
        // The codes are up to 127, so the loss is steep in the scale.
        sgd_scale(&mut w, &g, 5e-5)?;
        last = loss.item::<f32>()?;
    }
    assert!(last < first * 0.05, "loss {first} -> {last}");
    assert_eq!(w.q.to_vec::<i64>()?, codes);
    assert_eq!(w.bits, 8);
    Ok(())
}

#[test]
fn metadata_mutation_of_a_subclass_input_is_refused_at_run_time() -> Result<()> {
    // Through a plain struct the call is fine...
    let mut p = PlainPair { q: Tensor::ones(&[2, 3], DType::I64, &Device::Cpu)?, scale: randn(&[3, 1], 12) };
    let out = transpose_codes(&mut p)?;
    assert_eq!(p.q.shape(), [3, 2]);
    assert_eq!(out.shape(), [3, 2]);
    // ...but an `Int8Weight` passed in its place (whose type the macro did
    // not see) is refused before anything runs, naming the inner tensor.
    let w = Int8Weight { q: Tensor::ones(&[2, 3], DType::I64, &Device::Cpu)?, scale: randn(&[3, 1], 12), bits: 8 };
    let err = transpose_codes::compiled().explain(&[Arg::tree(&w)]).expect_err("refused");
    let msg = err.to_string();
    assert!(matches!(&err, AotError::InFunction { arg: Some(a), .. } if a == "w.q"), "{msg}");
    assert!(msg.contains("tensor subclass (`Int8Weight`)") && msg.contains("`transpose_codes`"), "{msg}");
    assert!(transpose_codes::compiled().__call(&[Arg::tree(&w)]).is_err());
    assert_eq!(w.q.shape(), [2, 3], "nothing was written");
    Ok(())
}
