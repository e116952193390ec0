//! Sizes of tensors the body computes (`logits.size(-1)`), and of a
//! parameter after an in-place change of its shape: propagated from the
//! call's argument shapes at call time (`arg/shape_prop.rs`). Each
//! compiled call is checked against the same ops run eagerly, over calls
//! of different shapes through one specialisation, with gradients, in a
//! callee, and with shapes that do not fit (an error before anything is
//! written).

use aot_runtime::prelude::*;
use aot_runtime::testing::num_specializations;

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    for (i, (a, b)) in vals(got).iter().zip(&vals(want)).enumerate() {
        assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, &Device::Cpu, seed).expect("randn")
}

#[aot_fn]
fn fold_rows(x: &Tensor) -> Tensor {
    let h = x.exp();
    let rows = h.view(&[h.size(0), -1]);
    rows.sum_dim(&[1], false) / (rows.size(1) as f64)
}

#[test]
fn a_computed_size_follows_each_call_s_shapes() -> Result<()> {
    for shape in [[2usize, 3, 4], [5, 1, 2], [1, 6, 3]] {
        let x = randn(&shape, 1);
        let got = fold_rows(&x)?;
        let want = x.exp()?.view(&[shape[0] as i64, -1])?.mean_dim(&[1], false)?;
        assert_close("fold_rows", &got, &want);
    }
    assert_eq!(num_specializations(fold_rows::compiled()), 1, "one specialisation serves every shape");
    let x = randn(&[2, 3, 4], 1);
    let eager = fold_rows::compiled().run_eager(&[(&x).into()])?;
    assert_close("run_eager", &eager[0], &fold_rows(&x)?);
    Ok(())
}

#[aot_fn]
fn lm_loss(h: &Tensor, w: &Tensor, targets: &Tensor) -> Tensor {
    let logits = h.matmul(w).gelu();
    let flat = logits.reshape(&[-1, logits.size(-1)]);
    flat.cross_entropy(&targets.reshape(&[flat.size(0)]))
}

#[test]
fn computed_sizes_in_a_training_call_give_eager_gradients() -> Result<()> {
    let (h, w) = (randn(&[2, 3, 4], 2).requires_grad_(true)?, randn(&[4, 5], 3).requires_grad_(true)?);
    let targets = Tensor::from_vec(vec![0i64, 4, 2, 1, 3, 0], &[2, 3], &Device::Cpu)?;
    let loss = lm_loss(&h, &w, &targets)?;
    loss.backward()?;
    let (gh, gw) = (h.grad().expect("h.grad"), w.grad().expect("w.grad"));

    let (h2, w2) = (h.detach()?.requires_grad_(true)?, w.detach()?.requires_grad_(true)?);
    let logits = h2.matmul(&w2)?.gelu()?;
    let want = logits.reshape(&[-1, 5])?.cross_entropy(&targets.reshape(&[6])?)?;
    want.backward()?;
    assert_close("loss", &loss, &want);
    assert_close("h.grad", &gh, &h2.grad().expect("h2.grad"));
    assert_close("w.grad", &gw, &w2.grad().expect("w2.grad"));
    Ok(())
}

#[aot_fn]
fn after_transpose(x: &mut Tensor) -> Tensor {
    let before = x.size(0);
    x.t_();
    // `x` is now [cols, rows]: its size is read after the change, while
    // `before` keeps the size it had.
    x.narrow(0, 0, x.size(0) - 1).sum_dim(&[0], false) * (before as f64)
}

#[test]
fn a_parameter_s_size_after_an_in_place_shape_change() -> Result<()> {
    let x = randn(&[2, 5], 4);
    let mut y = x.copy()?;
    let got = after_transpose(&mut y)?;
    assert_eq!(y.shape(), [5, 2]);
    let want = x.t()?.narrow(0, 0, 4)?.sum_dim(&[0], false)?.mul(2.0)?;
    assert_close("after_transpose", &got, &want);
    Ok(())
}

#[aot_fn]
fn heads(x: &Tensor, nh: i64) -> Tensor {
    let (b, t) = (x.size(0), x.size(1));
    x.view(&[b, t, nh, x.size(2) / nh]).transpose(1, 2)
}

#[aot_fn]
fn project_heads(x: &Tensor, w: &Tensor, nh: i64) -> Tensor {
    // `heads` reads the sizes of a tensor computed here.
    let q = x.matmul(w);
    heads(&q, nh).softmax(-1)
}

#[test]
fn a_callee_reads_the_size_of_a_tensor_the_caller_computes() -> Result<()> {
    let (x, w) = (randn(&[2, 3, 4], 5), randn(&[4, 6], 6));
    let got = project_heads(&x, &w, 2)?;
    let want = x.matmul(&w)?.view(&[2, 3, 2, 3])?.transpose(1, 2)?.softmax(-1)?;
    assert_close("project_heads", &got, &want);
    Ok(())
}

#[aot_fn]
fn write_then_fold(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.add_(1.0);
    let c = a.matmul(b);
    c.view(&[c.size(0), -1])
}

#[test]
fn shapes_that_do_not_fit_fail_before_anything_is_written() -> Result<()> {
    let a0 = randn(&[2, 3], 7);
    let mut a = a0.copy()?;
    let b = randn(&[4, 2], 8);
    let err = write_then_fold(&mut a, &b).expect_err("a [2, 3] @ [4, 2] product");
    let msg = err.to_string();
    assert!(msg.contains("write_then_fold") && msg.contains("matmul"), "{msg}");
    assert_eq!(vals(&a), vals(&a0), "the input is unchanged");
    // With fitting shapes the write happens and the size is right.
    let b = randn(&[3, 2], 8);
    let got = write_then_fold(&mut a, &b)?;
    assert_close("write_then_fold", &got, &a0.add(1.0)?.matmul(&b)?);
    Ok(())
}

#[aot_fn]
fn size_of_a_scalar_result(x: &Tensor) -> Tensor {
    let s = x.sum();
    s.view(&[s.size(0)])
}

#[test]
fn reading_a_dim_that_is_not_there_is_an_error() {
    let x = randn(&[3], 9);
    let err = size_of_a_scalar_result(&x).expect_err("a 0-d tensor has no dim 0");
    let msg = err.to_string();
    assert!(msg.contains("size_of_a_scalar_result") && msg.contains("0 dims"), "{msg}");
}

#[test]
fn explain_reports_a_function_with_computed_sizes() -> Result<()> {
    let x = randn(&[2, 3, 4], 1);
    let report = serde_json::to_value(fold_rows::compiled().explain(&[(&x).into()])?).expect("json");
    assert_eq!(report["fw_metadata"]["output_info"].as_array().map(Vec::len), Some(1), "{report}");
    Ok(())
}

#[aot_fn]
fn positions_of_rows(x: &Tensor) -> Tensor {
    let h = x.matmul(&x.t());
    // An `arange` whose bound is a computed size, and whose own size is read.
    let r = Tensor::arange(0, h.size(0), 1, DType::F64, &x.device());
    r.view(&[r.size(0), 1]) * h
}

#[test]
fn the_size_of_an_arange_is_propagated() -> Result<()> {
    for rows in [1usize, 3, 4] {
        let x = randn(&[rows, 2], 10);
        let h = x.matmul(&x.t()?)?;
        let r = Tensor::arange(0.0, rows as f64, 1.0, DType::F64, &Device::Cpu)?;
        assert_close("positions_of_rows", &positions_of_rows(&x)?, &r.view(&[rows as i64, 1])?.mul(&h)?);
    }
    Ok(())
}
