//! Composite (struct) arguments of `#[aot_fn]` functions: structs that
//! derive `TensorTree` are flattened at the call, the fields the body uses
//! are graph inputs named by their paths, in-place updates of a `&mut`
//! struct's fields reach the caller's tensors, and gradients reach the
//! fields that require grad. Each compiled call is checked against the same
//! code written with eager tensor ops.

use aot_runtime::prelude::*;
use aot_runtime::tree::LeafKind;
use aot_tests::models::{mlp_loss, Mlp};

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("values")
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    let (g, w) = (vals(got), vals(want));
    assert_eq!(g.len(), w.len(), "{what}: lengths");
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "{what}[{i}]: {a} vs {b}");
    }
}

/// One SGD step of a two-layer MLP on the mean squared error, with the
/// gradients written out by hand, updating the parameters in place.
#[aot_fn]
fn sgd_step(m: &mut Mlp, x: &Tensor, y: &Tensor, lr: f64) -> Tensor {
    let pre = x.matmul(&m.w1) + m.b1;
    let h = pre.relu();
    let d = h.matmul(&m.w2) + m.b2 - y;
    let loss = d.square().mean();
    let dout = d * (2.0 / 10.0);
    let gw2 = h.t().matmul(&dout);
    let gb2 = dout.sum_dim(&[0], false);
    let dpre = dout.matmul(&m.w2.t()) * pre.gt(0.0).to_dtype(DType::F64);
    let gw1 = x.t().matmul(&dpre);
    let gb1 = dpre.sum_dim(&[0], false);
    m.w1.sub_(&(gw1 * lr));
    m.b1.sub_(&(gb1 * lr));
    m.w2.sub_(&(gw2 * lr));
    m.b2.sub_(&(gb2 * lr));
    loss
}

/// `sgd_step` in eager ops.
fn sgd_step_eager(m: &Mlp, x: &Tensor, y: &Tensor, lr: f64) -> Result<Tensor> {
    let pre = x.matmul(&m.w1)?.add(&m.b1)?;
    let h = pre.relu()?;
    let d = h.matmul(&m.w2)?.add(&m.b2)?.sub(y)?;
    let loss = d.square()?.mean()?;
    let dout = d.mul(2.0 / 10.0)?;
    let gw2 = h.t()?.matmul(&dout)?;
    let gb2 = dout.sum_dim(&[0], false)?;
    let dpre = dout.matmul(&m.w2.t()?)?.mul(&pre.gt(0.0)?.to_dtype(DType::F64)?)?;
    let gw1 = x.t()?.matmul(&dpre)?;
    let gb1 = dpre.sum_dim(&[0], false)?;
    m.w1.sub_(&gw1.mul(lr)?)?;
    m.b1.sub_(&gb1.mul(lr)?)?;
    m.w2.sub_(&gw2.mul(lr)?)?;
    m.b2.sub_(&gb2.mul(lr)?)?;
    Ok(loss)
}

#[test]
fn mlp_sgd_steps_match_eager_and_update_the_callers_tensors() -> Result<()> {
    let mut m = Mlp::new(10)?;
    let reference = m.copy()?;
    let w1 = m.w1.clone();
    let x = Tensor::randn(&[5, 3], DType::F64, &Device::Cpu, 1)?;
    let y = Tensor::randn(&[5, 2], DType::F64, &Device::Cpu, 2)?;
    let names: Vec<&str> = sgd_step::compiled().graph().params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "y", "lr", "m.w1", "m.b1", "m.w2", "m.b2"]);
    let mut losses = Vec::new();
    for _ in 0..3 {
        let got = sgd_step(&mut m, &x, &y, 0.1)?;
        let want = sgd_step_eager(&reference, &x, &y, 0.1)?;
        assert_close("loss", &got, &want);
        losses.push(got.item::<f64>()?);
    }
    assert_close("w1", &m.w1, &reference.w1);
    assert_close("b1", &m.b1, &reference.b1);
    assert_close("w2", &m.w2, &reference.w2);
    assert_close("b2", &m.b2, &reference.b2);
    // The caller's tensor objects were written, not replaced.
    assert!(m.w1.same_tensor(&w1));
    assert!(losses[2] < losses[0], "the loss goes down: {losses:?}");
    Ok(())
}

#[test]
fn gradients_reach_the_fields_that_require_grad() -> Result<()> {
    let m = Mlp::new(20)?;
    let e = m.copy()?;
    for t in [&m.w1, &m.b1, &m.w2, &e.w1, &e.b1, &e.w2] {
        t.requires_grad_(true)?;
    }
    let x = Tensor::randn(&[6, 3], DType::F64, &Device::Cpu, 3)?;
    let y = Tensor::randn(&[6, 2], DType::F64, &Device::Cpu, 4)?;
    let args = [Arg::tree(&m), Arg::from(&x), Arg::from(&y)];
    assert_eq!(mlp_loss::compiled().call_path(&args)?, "compiled training");
    let loss = mlp_loss(&m, &x, &y)?;
    loss.backward()?;
    let h = x.matmul(&e.w1)?.add(&e.b1)?.relu()?;
    let want = h.matmul(&e.w2)?.add(&e.b2)?.sub(&y)?.square()?.mean()?;
    want.backward()?;
    assert_close("loss", &loss, &want);
    for (name, got, want) in [("w1", &m.w1, &e.w1), ("b1", &m.b1, &e.b1), ("w2", &m.w2, &e.w2)] {
        assert_close(name, &got.grad().expect("a gradient"), &want.grad().expect("a gradient"));
    }
    assert!(m.b2.grad().is_none(), "b2 does not require grad");
    Ok(())
}

#[derive(TensorTree)]
struct BatchNorm {
    weight: Tensor,
    bias: Tensor,
    #[buffer]
    running_mean: Tensor,
    #[buffer]
    running_var: Tensor,
    #[skip]
    momentum: f64,
}

#[aot_fn]
fn batch_norm_train(bn: &mut BatchNorm, x: &Tensor, momentum: f64) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        bn.running_mean.mul_(1.0 - momentum).add_(&(mean * momentum));
        bn.running_var.mul_(1.0 - momentum).add_(&(x.var_dim(&[0], 1, false) * momentum));
    }
    (x - mean) / (var + 1e-5).sqrt() * bn.weight + bn.bias
}

#[test]
fn batch_norm_updates_its_buffers_in_place() -> Result<()> {
    let c = 3;
    let bn = || -> Result<BatchNorm> {
        Ok(BatchNorm {
            weight: Tensor::randn(&[c], DType::F64, &Device::Cpu, 7)?,
            bias: Tensor::randn(&[c], DType::F64, &Device::Cpu, 8)?,
            running_mean: Tensor::zeros(&[c], DType::F64, &Device::Cpu)?,
            running_var: Tensor::ones(&[c], DType::F64, &Device::Cpu)?,
            momentum: 0.1,
        })
    };
    let mut got = bn()?;
    let want = bn()?;
    got.weight.requires_grad_(true)?;
    want.weight.requires_grad_(true)?;
    let flat = got.flatten();
    let kinds: Vec<(&str, LeafKind)> = flat.iter().map(|l| (l.path.as_str(), l.kind)).collect();
    assert_eq!(kinds[2], ("running_mean", LeafKind::Buffer));
    assert_eq!(kinds[0], ("weight", LeafKind::Parameter));
    for step in 0..2 {
        let x = Tensor::randn(&[8, c], DType::F64, &Device::Cpu, 30 + step)?;
        let momentum = got.momentum;
        let out = batch_norm_train(&mut got, &x, momentum)?;
        // Eager.
        let mean = x.mean_dim(&[0], false)?;
        let var = x.var_dim(&[0], 0, false)?;
        {
            let _g = aot_runtime::NoGradGuard::new();
            want.running_mean.mul_(0.9)?.add_(&mean.mul(0.1)?)?;
            want.running_var.mul_(0.9)?.add_(&x.var_dim(&[0], 1, false)?.mul(0.1)?)?;
        }
        let expect = x.sub(&mean)?.div(&var.add(1e-5)?.sqrt()?)?.mul(&want.weight)?.add(&want.bias)?;
        assert_close("output", &out, &expect);
        assert_close("running_mean", &got.running_mean, &want.running_mean);
        assert_close("running_var", &got.running_var, &want.running_var);
        out.sum()?.backward()?;
        expect.sum()?.backward()?;
    }
    assert_close("weight.grad", &got.weight.grad().expect("grad"), &want.weight.grad().expect("grad"));
    // explain() names the flattened inputs; the buffers are written.
    let x = Tensor::ones(&[4, c], DType::F64, &Device::Cpu)?;
    let report = batch_norm_train::compiled().explain(&[Arg::tree(&got), Arg::from(&x), Arg::from(0.1)])?;
    let g = batch_norm_train::compiled().graph();
    let written: Vec<&str> =
        report.fw_metadata.input_info.iter().zip(&g.params).filter(|(i, _)| i.mutates_data).map(|(_, p)| p.name.as_str()).collect();
    assert_eq!(written, ["bn.running_mean", "bn.running_var"]);
    Ok(())
}

#[derive(TensorTree)]
struct Linear {
    w: Tensor,
    b: Tensor,
}

#[derive(TensorTree)]
struct Net {
    input: Linear,
    blocks: Vec<Tensor>,
    #[skip]
    label: String,
}

#[aot_fn]
fn net_forward(n: &Net, x: &Tensor) -> Tensor {
    let mut h = x.matmul(&n.input.w) + n.input.b;
    for i in 0..2 {
        h = h.matmul(&n.blocks[i]).tanh();
    }
    h + n.blocks[0].sum()
}

#[test]
fn nested_structs_and_vec_fields() -> Result<()> {
    let t = |s: &[usize], k| Tensor::randn(s, DType::F64, &Device::Cpu, k);
    let n = Net {
        input: Linear { w: t(&[3, 4], 1)?, b: t(&[4], 2)? },
        blocks: vec![t(&[4, 4], 3)?, t(&[4, 4], 4)?, t(&[4, 4], 5)?],
        label: "net".into(),
    };
    let x = t(&[2, 3], 6)?;
    let names: Vec<String> = net_forward::compiled().graph().params.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["x", "n.input.w", "n.input.b", "n.blocks.0", "n.blocks.1"]);
    let got = net_forward(&n, &x)?;
    let mut h = x.matmul(&n.input.w)?.add(&n.input.b)?;
    for i in 0..2 {
        h = h.matmul(&n.blocks[i])?.tanh()?;
    }
    assert_close("output", &got, &h.add(&n.blocks[0].sum()?)?);
    assert_eq!(n.label, "net");

    // Too few blocks: an error naming the missing path, not a panic.
    let short =
        Net { input: Linear { w: n.input.w.clone(), b: n.input.b.clone() }, blocks: vec![n.blocks[0].clone()], label: String::new() };
    let err = net_forward(&short, &x).unwrap_err().to_string();
    assert!(err.contains("`n.blocks.1`") && err.contains("blocks.0"), "{err}");
    // A tensor where a struct is expected, and the other way round.
    let err = net_forward::compiled().explain(&[Arg::from(&x), Arg::from(&x)]).unwrap_err().to_string();
    assert!(err.contains("argument `n` is a struct of tensors"), "{err}");
    let err = net_forward::compiled().explain(&[Arg::tree(&n), Arg::tree(&n)]).unwrap_err().to_string();
    assert!(err.contains("argument `x` is not a struct"), "{err}");
    // The struct's tensors rebuild the struct.
    let leaves: Vec<Tensor> = n.flatten().into_iter().map(|l| l.tensor).collect();
    let again = n.rebuild_from(leaves)?;
    assert!(again.blocks[2].same_tensor(&n.blocks[2]));
    assert_eq!(again.label, "net");
    Ok(())
}

#[test]
fn the_listing_names_fields_by_path() {
    let listing = sgd_step::compiled().graph().to_string();
    assert!(listing.contains("m.w1: &mut Tensor"), "{listing}");
    assert!(listing.contains("sub_("), "{listing}");
}

#[derive(TensorTree)]
struct Tied {
    embed: Tensor,
    unembed: Tensor,
}

#[aot_fn]
fn tied_update(t: &mut Tied, lr: f64) -> Tensor {
    t.embed.mul_(1.0 - lr);
    t.unembed.sum()
}

#[test]
fn a_struct_holding_one_tensor_twice_sees_its_own_writes() -> Result<()> {
    // Tied weights: both fields are the same tensor, so the write through
    // `embed` is visible through `unembed`, as in eager code.
    let w = Tensor::ones(&[2, 2], DType::F64, &Device::Cpu)?;
    let mut t = Tied { embed: w.clone(), unembed: w.clone() };
    let s = tied_update(&mut t, 0.5)?;
    assert_eq!(s.item::<f64>()?, 2.0);
    assert_eq!(vals(&w), [0.5; 4]);
    Ok(())
}

/// A struct built by the body is returned: its tensors are the graph's
/// outputs, and the generated function rebuilds it.
#[aot_fn]
fn sgd_new(m: &Mlp, g: &Mlp, lr: f64) -> Mlp {
    Mlp { w1: m.w1 - g.w1 * lr, b1: m.b1 - g.b1 * lr, w2: m.w2 - g.w2 * lr, b2: m.b2 }
}

#[derive(TensorTree)]
struct TwoLayers {
    first: Linear,
    second: Linear,
}

#[aot_fn]
fn swap_layers(t: &TwoLayers, s: f64) -> TwoLayers {
    TwoLayers { first: Linear { w: t.second.w * s, b: t.second.b }, second: Linear { b: t.first.b.exp(), w: t.first.w } }
}

#[test]
fn a_struct_can_be_returned() -> Result<()> {
    let m = Mlp::new(40)?;
    let g = Mlp::new(50)?;
    let new = sgd_new(&m, &g, 0.5)?;
    assert_close("w1", &new.w1, &m.w1.sub(&g.w1.mul(0.5)?)?);
    assert_close("b1", &new.b1, &m.b1.sub(&g.b1.mul(0.5)?)?);
    assert_close("w2", &new.w2, &m.w2.sub(&g.w2.mul(0.5)?)?);
    // A returned input is the input itself, as for a returned `&Tensor`.
    assert_close("b2", &new.b2, &m.b2);
    assert!(!new.w1.same_tensor(&m.w1));
    assert_eq!(sgd_new::compiled().graph().ret.arity(), 4);

    let lin = |k| -> Result<Linear> {
        Ok(Linear { w: Tensor::randn(&[2, 2], DType::F64, &Device::Cpu, k)?, b: Tensor::randn(&[2], DType::F64, &Device::Cpu, k + 1)? })
    };
    let t = TwoLayers { first: lin(60)?, second: lin(70)? };
    let s = swap_layers(&t, 3.0)?;
    assert_close("first.w", &s.first.w, &t.second.w.mul(3.0)?);
    assert_close("first.b", &s.first.b, &t.second.b);
    assert_close("second.b", &s.second.b, &t.first.b.exp()?);
    assert_close("second.w", &s.second.w, &t.first.w);
    Ok(())
}

/// Called by one test only, so that its cache counts are its own.
#[aot_fn]
fn probe_loss(m: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    (x.matmul(&m.w1).relu().matmul(&m.w2) - y).sum()
}

#[test]
fn struct_calls_are_cached_like_plain_calls() -> Result<()> {
    use aot_runtime::testing::{cache_probe, num_specializations};
    let m = Mlp::new(80)?;
    let x = Tensor::randn(&[2, 3], DType::F64, &Device::Cpu, 81)?;
    let y = Tensor::randn(&[2, 2], DType::F64, &Device::Cpu, 82)?;
    let f = probe_loss::compiled();
    let args = [Arg::tree(&m), Arg::from(&x), Arg::from(&y)];
    probe_loss(&m, &x, &y)?;
    assert!(cache_probe(f, &args));
    let n = num_specializations(f);
    probe_loss(&Mlp::new(90)?, &x, &y)?;
    assert_eq!(num_specializations(f), n, "the same guard key for another struct of the same shape");
    Ok(())
}
