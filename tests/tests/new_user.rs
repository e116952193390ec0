//! Programs written as a new user would write them (a KV cache, batch
//! norm with running statistics, Adam, slice assignment, LayerNorm+GELU,
//! an RNN, causal attention, gradient clipping, f16): each compiled call
//! equals its eager run, on outputs, on the inputs it mutates and on the
//! gradients; a few values are also checked by hand.
use aot_runtime::prelude::*;
use aot_tests::values;

#[aot_fn]
fn kv_write(cache_k: &mut Tensor, cache_v: &mut Tensor, k: &Tensor, v: &Tensor, pos: i64) {
    cache_k.narrow(2, pos, 1).copy_(k);
    cache_v.narrow(2, pos, 1).copy_(v);
}

#[aot_fn]
fn batch_norm_train(
    x: &Tensor,
    running_mean: &mut Tensor,
    running_var: &mut Tensor,
    w: &Tensor,
    b: &Tensor,
    momentum: f64,
    eps: f64,
) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        running_mean.mul_(1.0 - momentum).add_(&(mean * momentum));
        running_var.mul_(1.0 - momentum).add_(&(x.var_dim(&[0], 1, false) * momentum));
    }
    (x - &mean) / (var + eps).sqrt() * w + b
}

#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn adam_step(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, lr: f64, b1: f64, b2: f64, eps: f64, t: i64) {
    no_grad! {
        m.mul_(b1).add_(g * (1.0 - b1));
        v.mul_(b2).add_(g * g * (1.0 - b2));
        let mhat = m / (1.0 - b1.powi(t as i32));
        let vhat = v / (1.0 - b2.powi(t as i32));
        p.sub_(mhat / (vhat.sqrt() + eps) * lr);
    }
}

#[aot_fn]
fn slice_assign(x: &mut Tensor, y: &Tensor) {
    x.slice(0, 1, 3, 1).copy_(y);
    x.select(0, 0).fill_(0.0);
}

#[aot_fn]
fn ln_gelu(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let mu = x.mean_dim(&[-1], true);
    let var = x.var_dim(&[-1], 0, true);
    ((x - mu) / (var + 1e-5).sqrt() * w + b).gelu()
}

#[aot_fn]
fn rnn(x: &Tensor, h0: &Tensor, wx: &Tensor, wh: &Tensor) -> Tensor {
    let mut h = h0.copy();
    for t in 0..4 {
        h = (x.select(1, t).matmul(wx) + h.matmul(wh)).tanh();
    }
    h
}

#[aot_fn]
fn causal_attn(q: &Tensor, k: &Tensor, v: &Tensor) -> Tensor {
    let scale = 1.0 / (q.size(-1) as f64).sqrt();
    let att = q.matmul(&k.transpose(-2, -1)) * scale;
    let mask = att.ones_like().tril(0).eq(0.0);
    att.masked_fill(&mask, f64::NEG_INFINITY).softmax(-1).matmul(v)
}

#[aot_fn]
fn clip_grad(g: &mut Tensor, max_norm: f64) {
    let norm = g.square().sum().sqrt();
    let coef = (max_norm / (norm + 1e-6)).clamp(0.0, 1.0);
    g.mul_(coef);
}

#[aot_fn]
fn half_mlp(x: &Tensor, w: &Tensor) -> Tensor {
    x.to_dtype(DType::F16).matmul(&w.to_dtype(DType::F16)).relu().to_dtype(DType::F32)
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, &Device::Cpu, seed).unwrap()
}

/// Two independent copies of `xs` (same values and layouts), leaves that
/// require grad where `grad` says so.
fn twins(xs: &[Tensor], grad: &[bool]) -> (Vec<Tensor>, Vec<Tensor>) {
    let copy = |x: &Tensor, g: bool| x.detach().unwrap().copy().unwrap().requires_grad_(g).unwrap();
    let a = xs.iter().zip(grad).map(|(x, &g)| copy(x, g)).collect();
    let b = xs.iter().zip(grad).map(|(x, &g)| copy(x, g)).collect();
    (a, b)
}

fn close(what: &str, a: &Tensor, b: &Tensor) {
    let (x, y) = (values(a), values(b));
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    for (u, v) in x.iter().zip(&y) {
        assert!((u - v).abs() <= 1e-5 * (1.0 + u.abs()) || (u.is_nan() && v.is_nan()), "{what}: {x:?} vs {y:?}");
    }
}

/// Runs `f` compiled (`call`) and eagerly (`run_eager`) on twin inputs and
/// compares outputs, every input afterwards, and the gradients of a sum of
/// the outputs.
fn same(f: &aot_runtime::CompiledFn, xs: &[Tensor], grad: &[bool], scalars: &[Arg<'_>], call: impl Fn(&[Tensor]) -> Vec<Tensor>) {
    let (a, b) = twins(xs, grad);
    let mut args: Vec<Arg> = a.iter().map(Arg::from).collect();
    args.extend(scalars.iter().cloned());
    let eager = f.run_eager(&args).unwrap();
    let compiled = call(&b);
    assert_eq!(eager.len(), compiled.len());
    for (k, (e, c)) in eager.iter().zip(&compiled).enumerate() {
        close(&format!("{} output {k}", f.graph().name), e, c);
    }
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        close(&format!("{} input {k} after the call", f.graph().name), x, y);
    }
    if eager.iter().any(Tensor::requires_grad) {
        let total = |outs: &[Tensor]| outs.iter().map(|o| o.sum().unwrap()).reduce(|s, o| s.add(&o).unwrap()).unwrap();
        total(&eager).backward().unwrap();
        total(&compiled).backward().unwrap();
        for (k, (x, y)) in a.iter().zip(&b).enumerate().filter(|(k, _)| grad[*k]) {
            close(&format!("{} gradient {k}", f.graph().name), &x.grad().unwrap(), &y.grad().unwrap());
        }
    }
}

#[test]
fn kv_cache_write_at_a_position() {
    let xs = [randn(&[1, 2, 6, 4], 1), randn(&[1, 2, 6, 4], 2), randn(&[1, 2, 1, 4], 3), randn(&[1, 2, 1, 4], 4)];
    same(kv_write::compiled(), &xs, &[false; 4], &[3_i64.into()], |b| {
        let (mut k, mut v) = (b[0].copy().unwrap(), b[1].copy().unwrap());
        kv_write(&mut k, &mut v, &b[2], &b[3], 3).unwrap();
        b[0].copy_(&k).unwrap();
        b[1].copy_(&v).unwrap();
        vec![]
    });
    let (mut k, mut v) =
        (Tensor::zeros(&[1, 1, 3, 2], DType::F32, &Device::Cpu).unwrap(), Tensor::zeros(&[1, 1, 3, 2], DType::F32, &Device::Cpu).unwrap());
    let one = Tensor::ones(&[1, 1, 1, 2], DType::F32, &Device::Cpu).unwrap();
    kv_write(&mut k, &mut v, &one, &one.mul(2.0).unwrap(), 1).unwrap();
    assert_eq!(k.to_vec::<f32>().unwrap(), [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
    assert_eq!(v.to_vec::<f32>().unwrap(), [0.0, 0.0, 2.0, 2.0, 0.0, 0.0]);
}

#[test]
fn batch_norm_updates_running_statistics() {
    let xs = [randn(&[8, 3], 5), randn(&[3], 6), randn(&[3], 7).abs().unwrap(), randn(&[3], 8), randn(&[3], 9)];
    same(batch_norm_train::compiled(), &xs, &[true, false, false, true, true], &[0.1.into(), 1e-5.into()], |b| {
        let (mut m, mut v) = (b[1].copy().unwrap(), b[2].copy().unwrap());
        let y = batch_norm_train(&b[0], &mut m, &mut v, &b[3], &b[4], 0.1, 1e-5).unwrap();
        b[1].copy_(&m).unwrap();
        b[2].copy_(&v).unwrap();
        vec![y]
    });
}

#[test]
fn adam_and_clipping_update_in_place() {
    let xs = [randn(&[4, 3], 10), randn(&[4, 3], 11), randn(&[4, 3], 12), randn(&[4, 3], 13).abs().unwrap()];
    let scalars = [1e-3.into(), 0.9.into(), 0.999.into(), 1e-8.into(), 3_i64.into()];
    same(adam_step::compiled(), &xs, &[false; 4], &scalars, |b| {
        let (mut p, mut m, mut v) = (b[0].copy().unwrap(), b[2].copy().unwrap(), b[3].copy().unwrap());
        adam_step(&mut p, &b[1], &mut m, &mut v, 1e-3, 0.9, 0.999, 1e-8, 3).unwrap();
        for (k, t) in [(0, &p), (2, &m), (3, &v)] {
            b[k].copy_(t).unwrap();
        }
        vec![]
    });
    let g = randn(&[10], 14).mul(10.0).unwrap();
    same(clip_grad::compiled(), std::slice::from_ref(&g), &[false], &[1.0.into()], |b| {
        let mut g = b[0].copy().unwrap();
        clip_grad(&mut g, 1.0).unwrap();
        b[0].copy_(&g).unwrap();
        vec![]
    });
    let mut g = g.copy().unwrap();
    clip_grad(&mut g, 1.0).unwrap();
    let norm: f64 = values(&g).iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "clipped norm {norm}");
}

#[test]
fn slice_assignment_and_layer_norm() {
    let xs = [randn(&[4, 3], 15), randn(&[2, 3], 16)];
    same(slice_assign::compiled(), &xs, &[false, false], &[], |b| {
        let mut x = b[0].copy().unwrap();
        slice_assign(&mut x, &b[1]).unwrap();
        b[0].copy_(&x).unwrap();
        vec![]
    });
    let xs = [randn(&[5, 8], 17), randn(&[8], 18), randn(&[8], 19)];
    same(ln_gelu::compiled(), &xs, &[true, true, true], &[], |b| vec![ln_gelu(&b[0], &b[1], &b[2]).unwrap()]);
}

#[test]
fn rnn_attention_and_half() {
    let xs = [randn(&[2, 4, 3], 20), randn(&[2, 5], 21), randn(&[3, 5], 22), randn(&[5, 5], 23)];
    same(rnn::compiled(), &xs, &[false, false, true, true], &[], |b| vec![rnn(&b[0], &b[1], &b[2], &b[3]).unwrap()]);
    let xs = [randn(&[2, 5, 4], 24), randn(&[2, 5, 4], 25), randn(&[2, 5, 4], 26)];
    same(causal_attn::compiled(), &xs, &[true, true, true], &[], |b| vec![causal_attn(&b[0], &b[1], &b[2]).unwrap()]);
    // The first query sees only the first key: its output is the first value.
    let out = causal_attn(&xs[0], &xs[1], &xs[2]).unwrap();
    close("first position", &out.narrow(1, 0, 1).unwrap(), &xs[2].narrow(1, 0, 1).unwrap());
    let xs = [randn(&[4, 8], 27), randn(&[8, 3], 28)];
    let y = half_mlp(&xs[0], &xs[1]).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    same(half_mlp::compiled(), &xs, &[false, false], &[], |b| vec![half_mlp(&b[0], &b[1]).unwrap()]);
}
