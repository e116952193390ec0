//! DSL features beyond straight-line tensor code: scalar
//! arithmetic evaluated at call time (an AdamW step with bias correction
//! computed in the body), `if` on a `bool` parameter (one traced variant per
//! value), `x.size(d)` / `x.shape()[d]` in view arguments, `Vec<Tensor>`
//! returns, `#[aot_fn]` on methods of `TensorTree` structs, and
//! `#[aot_fn(crate = ..)]`. Each compiled call is checked against the same
//! code written with eager ops.

use aot_runtime::prelude::*;

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    let (g, w) = (vals(got), vals(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, &Device::Cpu, seed).expect("randn")
}

/// One AdamW step with PyTorch's bias correction, the step size computed
/// from scalar parameters inside the body at call time.
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn adamw_step(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, lr: f64, b1: f64, b2: f64, eps: f64, wd: f64, t: i64) {
    let bc1 = 1.0 - b1.powi(t as i32);
    let bc2 = 1.0 - b2.powi(t);
    let step = lr / bc1;
    p.mul_(1.0 - lr * wd);
    m.mul_(b1).add_(&(g * (1.0 - b1)));
    v.mul_(b2).add_(&(g * g * (1.0 - b2)));
    let denom = v.sqrt() / bc2.sqrt() + eps;
    p.sub_(&(m / denom * step));
}

#[allow(clippy::too_many_arguments)]
fn adamw_eager(p: &Tensor, g: &Tensor, m: &Tensor, v: &Tensor, lr: f64, b1: f64, b2: f64, eps: f64, wd: f64, t: i64) -> Result<()> {
    let bc1 = 1.0 - b1.powi(t as i32);
    let bc2 = 1.0 - b2.powi(t as i32);
    p.mul_(1.0 - lr * wd)?;
    m.mul_(b1)?.add_(&g.mul(1.0 - b1)?)?;
    v.mul_(b2)?.add_(&g.mul(g)?.mul(1.0 - b2)?)?;
    let denom = v.sqrt()?.div(bc2.sqrt())?.add(eps)?;
    p.sub_(&m.div(&denom)?.mul(lr / bc1)?)?;
    Ok(())
}

#[test]
fn adamw_with_bias_correction_in_the_body() -> Result<()> {
    let (p, g) = (randn(&[4, 3], 1), randn(&[4, 3], 2));
    let (m, v) = (Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?, Tensor::zeros(&[4, 3], DType::F64, &Device::Cpu)?);
    let (pe, me, ve) = (p.copy()?, m.copy()?, v.copy()?);
    let (mut pc, mut mc, mut vc) = (p, m, v);
    for t in 1..=3 {
        adamw_step(&mut pc, &g, &mut mc, &mut vc, 1e-2, 0.9, 0.999, 1e-8, 0.01, t)?;
        adamw_eager(&pe, &g, &me, &ve, 1e-2, 0.9, 0.999, 1e-8, 0.01, t)?;
        assert_close(&format!("p at step {t}"), &pc, &pe);
        assert_close(&format!("m at step {t}"), &mc, &me);
        assert_close(&format!("v at step {t}"), &vc, &ve);
    }
    Ok(())
}

/// Constants and the other methods of numbers.
#[aot_fn]
fn scalar_methods(x: &Tensor, a: f64, k: i64) -> Tensor {
    let c = (2.0 / f64::consts::PI).sqrt();
    let s = a.abs().ln().exp() + a.max(0.5).min(3.0) + a.powf(2.0) + (k as f64).sqrt() + k.abs() as f64 + k.max(2) as f64;
    x * c + s + std::f64::consts::E
}

#[test]
fn methods_of_numbers_and_constants_are_evaluated_at_call_time() -> Result<()> {
    let x = randn(&[5], 3);
    for (a, k) in [(-1.5, 4), (2.5, -9)] {
        let got = scalar_methods(&x, a, k)?;
        let c = (2.0 / std::f64::consts::PI).sqrt();
        let s = a.abs().ln().exp() + a.clamp(0.5, 3.0) + a.powf(2.0) + (k as f64).sqrt() + k.abs() as f64 + k.max(2) as f64;
        let want = x.mul(c)?.add(s)?.add(std::f64::consts::E)?;
        if k < 0 {
            // `sqrt` of a negative integer is NaN, as in Rust.
            assert!(vals(&got).iter().all(|v| v.is_nan()));
        } else {
            assert_close("scalar_methods", &got, &want);
        }
    }
    Ok(())
}

/// A train/eval switch: dropout only when training.
#[aot_fn]
fn block(x: &Tensor, w: &Tensor, training: bool) -> Tensor {
    let h = x.matmul(w).relu();
    let h = if training { h.dropout(0.5) } else { h };
    if !training {
        h * 2.0
    } else {
        h.sum_dim(&[1], true)
    }
}

#[test]
fn if_on_a_bool_parameter_picks_a_variant_per_value() -> Result<()> {
    let (x, w) = (randn(&[3, 4], 4), randn(&[4, 5], 5));
    let eval = block(&x, &w, false)?;
    assert_close("eval", &eval, &x.matmul(&w)?.relu()?.mul(2.0)?);
    let train = block(&x, &w, true)?;
    assert_eq!(train.shape(), vec![3, 1]);
    // The two variants are different graphs with their own specialisations.
    let f = block::compiled();
    let g_false = f.graph_for(&[Arg::from(&x), Arg::from(&w), Arg::from(false)])?.to_string();
    let g_true = f.graph_for(&[Arg::from(&x), Arg::from(&w), Arg::from(true)])?.to_string();
    assert!(g_true.contains("dropout") && !g_false.contains("dropout"), "{g_true}\n{g_false}");
    assert_eq!(aot_runtime::testing::num_specializations(f), 2);
    assert_eq!(f.call_path(&[Arg::from(&x), Arg::from(&w), Arg::from(true)])?, "inference");
    // A gradient through the eval variant.
    let wg = w.copy()?.requires_grad_(true)?;
    block(&x, &wg, false)?.sum()?.backward()?;
    let we = w.copy()?.requires_grad_(true)?;
    x.matmul(&we)?.relu()?.mul(2.0)?.sum()?.backward()?;
    assert_close("grad", &wg.grad().expect("grad"), &we.grad().expect("grad"));
    Ok(())
}

/// Multi-head attention's reshapes, with sizes read from the argument.
#[aot_fn]
fn split_heads(x: &Tensor, heads: i64) -> Tensor {
    let (b, t, c) = (x.size(0), x.size(1), x.shape()[2]);
    x.view(&[b, t, heads, c / heads]).transpose(1, 2).narrow(3, 0, x.size(-1) / heads - 1)
}

#[test]
fn sizes_are_read_from_each_call() -> Result<()> {
    for (shape, heads) in [([2, 3, 8], 2), ([1, 5, 12], 3)] {
        let x = randn(&shape, 6);
        let got = split_heads(&x, heads)?;
        let c = shape[2] as i64;
        let want = x.view(&[shape[0] as i64, shape[1] as i64, heads, c / heads])?.transpose(1, 2)?.narrow(3, 0, c / heads - 1)?;
        assert_close("split_heads", &got, &want);
    }
    // A dim the argument does not have is an error naming it, not a panic.
    let e = split_heads(&randn(&[2, 8], 7), 2).expect_err("rank 2");
    assert!(e.to_string().contains("x.size(2)"), "{e}");
    Ok(())
}

#[aot_fn]
fn pieces(x: &Tensor, n: i64) -> Vec<Tensor> {
    let mut acc = x.exp();
    let first = acc.narrow(0, 0, n);
    acc = acc * 2.0;
    vec![first, acc, x]
}

#[test]
fn vec_return() -> Result<()> {
    let x = randn(&[4], 8);
    let out = pieces(&x, 2)?;
    assert_eq!(out.len(), 3);
    assert_close("first", &out[0], &x.exp()?.narrow(0, 0, 2)?);
    assert_close("acc", &out[1], &x.exp()?.mul(2.0)?);
    assert!(out[2].same_tensor(&x), "returning an input returns that tensor");
    Ok(())
}

#[derive(TensorTree)]
struct Linear {
    w: Tensor,
    b: Tensor,
}

impl Linear {
    #[aot_fn]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.matmul(&self.w) + self.b
    }

    #[aot_fn]
    fn sgd(&mut self, gw: &Tensor, lr: f64) {
        self.w.sub_(&(gw * lr));
    }
}

#[test]
fn methods_on_tensor_trees() -> Result<()> {
    let lin = Linear { w: randn(&[3, 2], 9), b: randn(&[2], 10) };
    let x = randn(&[4, 3], 11);
    let y = lin.forward(&x)?;
    assert_close("forward", &y, &x.matmul(&lin.w)?.add(&lin.b)?);
    let mut lin2 = Linear { w: lin.w.copy()?, b: lin.b.copy()? };
    let gw = randn(&[3, 2], 12);
    lin2.sgd(&gw, 0.5)?;
    assert_close("sgd", &lin2.w, &lin.w.sub(&gw.mul(0.5)?)?);
    let report = Linear::forward_compiled().graph_signature(&[Arg::tree(&lin), Arg::from(&x)])?;
    assert_eq!(serde_json::to_value(&report).expect("json")["parameters"], serde_json::json!(["self.w", "self.b"]));
    Ok(())
}

mod renamed {
    // The runtime under another name, as a renamed dependency would be.
    pub use aot_runtime as my_aot;
}

#[aot_fn(crate = renamed::my_aot)]
fn with_renamed_crate(x: &Tensor) -> Tensor {
    x.exp()
}

#[test]
fn crate_path_attribute() -> Result<()> {
    let x = randn(&[3], 13);
    assert_close("renamed", &with_renamed_crate(&x)?, &x.exp()?);
    Ok(())
}

#[aot_fn]
fn project(x: &Tensor, w: &Tensor) -> Tensor {
    x.matmul(w)
}

#[test]
fn run_time_errors_name_the_function_and_the_odd_operand() -> Result<()> {
    let x = Tensor::ones(&[2, 3], DType::F32, &Device::Cpu)?;
    let w = Tensor::ones(&[3, 2], DType::F64, &Device::Cpu)?;
    // The receiver sets the expected dtype: the f64 `w` is blamed.
    let e = project(&x, &w).expect_err("f32 @ f64");
    assert!(matches!(&e, AotError::InFunction { func, arg: Some(a), .. } if func == "project" && a == "w"), "{e:?}");
    // An error in the compiled backward names the function.
    let xg = x.copy()?.requires_grad_(true)?;
    let y = project(&xg, &x.t()?.contiguous()?)?;
    let e = y.backward_with(&Tensor::ones(&[2, 2], DType::F64, &Device::Cpu)?).expect_err("f64 gradient");
    assert!(matches!(&e, AotError::InFunction { func, .. } if func == "project (backward)"), "{e:?}");
    Ok(())
}

/// Infinite constants, both spelled as Rust spells them: a causal mask
/// filled with `f64::NEG_INFINITY` and a clamp from `-f64::INFINITY`.
#[aot_fn]
fn causal_softmax(scores: &Tensor, mask: &Tensor) -> (Tensor, Tensor) {
    let att = scores.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1);
    let lo = scores.masked_fill(&mask, -f64::INFINITY);
    (att, lo.clamp(-f64::INFINITY, 0.0))
}

#[test]
fn infinite_constants() -> Result<()> {
    let s = randn(&[3, 3], 14);
    let mask = Tensor::ones(&[3, 3], DType::F64, &Device::Cpu)?.triu(1)?.gt(0.5)?;
    let (att, lo) = causal_softmax(&s, &mask)?;
    assert_close("softmax", &att, &s.masked_fill(&mask, f64::NEG_INFINITY)?.softmax(-1)?);
    let a = vals(&att);
    assert_eq!((a[1], a[2], a[5]), (0.0, 0.0, 0.0), "masked entries get no weight: {a:?}");
    let l = vals(&lo);
    assert!(l[1] == f64::NEG_INFINITY && l[2] == f64::NEG_INFINITY, "{l:?}");
    assert_eq!(l[0], vals(&s)[0].min(0.0));
    Ok(())
}

#[derive(TensorTree)]
struct Stack {
    l1: Linear,
    blocks: Vec<Linear>,
}

/// `let blk = &m.blocks[l];` names a part of a struct parameter: its
/// fields are read through the alias as through the full path.
#[aot_fn]
fn stack_forward(m: &Stack, x: &Tensor) -> Tensor {
    let first = &m.l1;
    let mut h = x.matmul(&first.w) + first.b;
    for l in 0..2 {
        let blk = &m.blocks[l];
        h = h.matmul(&blk.w).relu() + blk.b;
    }
    h
}

#[test]
fn let_aliases_of_struct_fields() -> Result<()> {
    let lin = |s: u64| Linear { w: randn(&[3, 3], s), b: randn(&[3], s + 1) };
    let m = Stack { l1: lin(20), blocks: vec![lin(22), lin(24)] };
    let x = randn(&[2, 3], 26);
    let mut want = x.matmul(&m.l1.w)?.add(&m.l1.b)?;
    for b in &m.blocks {
        want = want.matmul(&b.w)?.relu()?.add(&b.b)?;
    }
    assert_close("stack", &stack_forward(&m, &x)?, &want);
    // The inputs are named by their full paths, not by the aliases.
    let sig = stack_forward::compiled().graph_signature(&[Arg::tree(&m), Arg::from(&x)])?;
    assert_eq!(sig.parameters, ["m.l1.w", "m.l1.b", "m.blocks.0.w", "m.blocks.0.b", "m.blocks.1.w", "m.blocks.1.b"]);
    Ok(())
}

/// Loop bounds known when unrolling: a `let` of a literal, and an outer
/// loop's variable (`0..=i`, `i + 1..3`).
#[aot_fn]
fn triangle(x: &Tensor) -> Tensor {
    let n = 3;
    let mut acc = x.zeros_like();
    for i in 0..n {
        for j in 0..=i {
            acc = acc + x * j;
        }
        for k in i + 1..n {
            acc = acc + x.narrow(0, k, 1) * 10.0;
        }
    }
    acc
}

#[test]
fn loop_bounds_from_outer_loops() -> Result<()> {
    let x = randn(&[3], 27);
    // j sums to 0 + 1 + 3 = 4; the k loops run 2 + 1 + 0 times, reading
    // x[1] once and x[2] twice.
    let want = x.mul(4.0)?.add(&x.narrow(0, 1, 1)?.mul(10.0)?)?.add(&x.narrow(0, 2, 1)?.mul(20.0)?)?;
    assert_close("triangle", &triangle(&x)?, &want);
    Ok(())
}

/// Scalar parameters after struct parameters keep their own types, also
/// when the body binds scalar expressions of them before any field is used.
#[derive(TensorTree)]
struct TwoLeaves {
    w: Tensor,
    unused: Tensor,
}

#[aot_fn]
fn scaled_by_product(s: &mut TwoLeaves, g: &TwoLeaves, a: f64, n: i64) {
    let k = a * n as f64;
    no_grad! {
        s.w.sub_(g.w * k);
    }
}

#[aot_fn]
fn bias_corrected(s: &mut TwoLeaves, g: &TwoLeaves, lr: f64, t: i64, b1: f64) {
    let step = lr / (1.0 - b1.powi(t));
    no_grad! {
        s.w.sub_(g.w * step);
    }
}

#[test]
fn scalar_parameters_after_struct_parameters_keep_their_types() {
    let t = |v: f32| Tensor::full(&[2], v as f64, DType::F32, &Device::Cpu).unwrap();
    let mut s = TwoLeaves { w: t(1.0), unused: t(0.0) };
    let g = TwoLeaves { w: t(0.5), unused: t(0.0) };
    scaled_by_product(&mut s, &g, 0.5, 3).unwrap();
    assert_eq!(s.w.to_vec::<f32>().unwrap(), vec![0.25, 0.25]);
    bias_corrected(&mut s, &g, 0.5, 1, 0.5).unwrap();
    assert_eq!(s.w.to_vec::<f32>().unwrap(), vec![-0.25, -0.25]);
}
