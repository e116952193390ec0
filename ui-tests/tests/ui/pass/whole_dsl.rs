//! Every op and every syntactic form of the DSL, compiled with warnings
//! denied and run once.
#![deny(warnings)]

use aot_runtime::prelude::*;

/// Binary ops and operators, with tensors and scalars on either side.
#[aot_fn]
fn binary(a: &Tensor, b: &Tensor, s: f64, k: i64) -> (Tensor, Tensor, Tensor, Tensor) {
    let x = a.add(b).sub(&b).mul(2.0).div(s).pow(2.0);
    let y = a.maximum(b).minimum(&b) + 1.0 - 2 * b / 4.0;
    let z = (1.0 - a) + (2.0 / b) + (s * (k as f64) + 0.5) * -a;
    let m = a.where_(&a.eq(b), 0.0) + b.where_(&a.ne(b), &a) + a.where_(&a.lt(b), 1) + a.where_(&a.le(b), 1.5);
    let n = a.where_(&a.gt(b), b) + a.where_(&a.ge(b), b);
    (x, y, z + m, n)
}

/// Unary ops.
#[aot_fn]
fn unary(a: &Tensor) -> Tensor {
    let p = a.abs() + 1.0;
    let u = -a.neg().exp().log().sqrt().rsqrt().abs().sin().cos().tanh();
    u.sigmoid().relu().gelu().silu() + p.reciprocal().square()
}

/// Reductions and matmul.
#[aot_fn]
fn reduce(a: &Tensor, b: &Tensor, keep: bool) -> (Tensor, Tensor, Tensor) {
    let s = a.sum() + a.mean();
    let d = a.sum_dim(&[0], keep).mean_dim(&[-1], false) + a.amax_dim(&[0, 1], false) + a.var_dim(&[1], 1, false).sum();
    let m = a.matmul(b).softmax(1).log_softmax(-1) + a.mm(&b);
    let bm = a.unsqueeze(0).bmm(&b.unsqueeze(0));
    (s + d, m, bm)
}

/// Views, including a view of a view, returned and mutated through.
#[aot_fn]
fn views(a: &mut Tensor, n: usize) -> (Tensor, Tensor, Tensor) {
    let v = a.view(&[-1]).reshape(&[2, 2]).t().transpose(0, 1).permute(&[1, 0]);
    let w = v.unsqueeze(0).squeeze(0).expand(&[2, 2]).select(0, 1).slice(0, 0, 2, 1).narrow(0, 0, 1);
    let d = a.diagonal().detach() + a.as_strided(&[2], &[1], 0);
    a.select(0, 0).mul_(n as f64);
    (v, w, d)
}

/// Data mutations (chained), metadata mutations, and a no_grad region.
#[aot_fn]
fn mutations(a: &mut Tensor, b: &mut Tensor, c: &mut Tensor, g: &Tensor) {
    a.add_(1.0).sub_(g).mul_(&g).div_(2.0);
    b.copy_(&g);
    b.fill_(0.5);
    b.zero_();
    no_grad! {
        c.clamp_(-1.0, 1.0).relu_().sigmoid_().exp_().neg_();
    }
    a.t_();
    a.transpose_(0, 1);
    a.unsqueeze_(0);
    a.squeeze_(0);
    a.as_strided_(&[2, 2], &[2, 1], 0);
}

/// Other ops, a `for` loop, blocks, tuples, shadowing and assignment.
#[aot_fn]
fn other(a: &Tensor) -> (Tensor, Tensor, Tensor) {
    let c = a.copy().contiguous().to_dtype(DType::F64).to_dtype(DType::F32);
    let z = a.zeros_like() + a.ones_like() + a.full_like(2.0) + a.rand_like() * 0.0 + a.dropout(0.0);
    let mut acc = a.zeros_like();
    for i in 0..2 {
        acc = acc + a.select(0, i).unsqueeze(0);
    }
    let (p, q) = {
        let a = a * 2.0;
        (a.sin(), a.cos())
    };
    let r = no_grad! { p + q };
    (c + z, acc, r)
}

/// The ops for models: scans, masks, extremes with their indices, losses.
#[aot_fn]
fn models(a: &Tensor, m: &Tensor, t: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let e = a.log1p().expm1().clamp(-1.0, 1.0).masked_fill(m, 0.0).tril(0).triu(-1).cumsum(1);
    let (v, i) = e.max_dim(1, false);
    let (w, j) = e.min_dim(-1, true);
    let f = e.flatten(0, 1).view_as(a) + v.sum() + w.sum();
    let loss = a.cross_entropy(t) + a.log_softmax(1).nll_loss(t);
    (f, i + j.flatten(0, -1) + a.argmax(1, false) + a.argmin(0, false), loss, e)
}

fn main() -> Result<()> {
    let dev = Device::Cpu;
    let a = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.25], &[2, 2], &dev)?;
    let b = Tensor::from_vec(vec![1.5f32, 0.5, -0.5, 2.0], &[2, 2], &dev)?;

    let (x, y, z, n) = binary(&a, &b, 2.0, 3)?;
    for t in [&x, &y, &z, &n] {
        assert_eq!(t.shape(), vec![2, 2]);
    }
    assert_eq!(unary(&a)?.shape(), vec![2, 2]);
    let (s, m, bm) = reduce(&a, &b, true)?;
    assert_eq!((s.shape(), m.shape(), bm.shape()), (vec![1], vec![2, 2], vec![1, 2, 2]));

    let mut va = a.copy()?;
    let (v, w, d) = views(&mut va, 3)?;
    assert!(v.shares_storage_with(&va) && w.shares_storage_with(&va));
    assert_eq!(va.to_vec::<f32>()?, vec![1.5, -3.0, 2.0, 0.25]);
    assert_eq!(d.shape(), vec![2]);

    let (mut ma, mut mb, mut mc) = (a.copy()?, a.copy()?, a.copy()?);
    mutations(&mut ma, &mut mb, &mut mc, &b)?;
    assert_eq!(mb.to_vec::<f32>()?, vec![0.0; 4]);
    assert_eq!(ma.shape(), vec![2, 2]);

    let (c, acc, r) = other(&a)?;
    assert_eq!((c.shape(), acc.shape(), r.shape()), (vec![2, 2], vec![2, 2], vec![2, 2]));

    let mask = Tensor::from_vec(vec![true, false, false, true], &[2, 2], &dev)?;
    let targets = Tensor::from_vec(vec![1i64, 0], &[2], &dev)?;
    let (f, idx, loss, e) = models(&a.abs()?, &mask, &targets)?;
    assert_eq!((f.shape(), idx.shape(), loss.shape(), e.shape()), (vec![2, 2], vec![2], vec![], vec![2, 2]));
    assert_eq!(idx.dtype(), DType::I64);

    // Every function exposes its graph and metadata.
    for compiled in [
        binary::compiled(),
        unary::compiled(),
        reduce::compiled(),
        views::compiled(),
        mutations::compiled(),
        other::compiled(),
        models::compiled(),
    ] {
        assert!(!compiled.graph().to_string().is_empty());
    }
    assert!(mutations::compiled().static_meta().mutates_inputs);
    Ok(())
}
