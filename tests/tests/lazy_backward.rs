//! The backward of a training call is compiled on the first `backward()`
//! (`AutogradLazyBackwardCompileInfo`): a forward alone never compiles it,
//! the first backward does, once per specialisation, and the gradients are
//! eager's.

use aot_runtime::prelude::*;
use aot_runtime::testing::backward_compiles;
use aot_runtime::Arg;
use std::sync::Mutex;

/// The counter is per process: one test at a time.
static ONE: Mutex<()> = Mutex::new(());

#[aot_fn]
fn loss(x: &Tensor, w: &Tensor) -> Tensor {
    (x.matmul(w).tanh() * 2.0).sum()
}

fn inputs(seed: u64) -> (Tensor, Tensor) {
    let x = Tensor::randn(&[4, 3], DType::F64, &Device::Cpu, seed).unwrap();
    let w = Tensor::randn(&[3, 2], DType::F64, &Device::Cpu, seed + 1).unwrap().requires_grad_(true).unwrap();
    (x, w)
}

#[test]
fn the_backward_compiles_on_the_first_backward_only() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (x, w) = inputs(1);
    let before = backward_compiles();
    let l = loss(&x, &w).unwrap();
    let path = loss::compiled().call_path(&[Arg::from(&x), Arg::from(&w)]).unwrap();
    assert!(path.contains("compiled"), "{path}");
    assert_eq!(backward_compiles(), before, "the forward alone compiled the backward");
    // Forwards that never run a backward never compile it either.
    for seed in 2..5 {
        let (x, w) = inputs(seed);
        loss(&x, &w).unwrap();
    }
    assert_eq!(backward_compiles(), before);
    l.backward().unwrap();
    assert_eq!(backward_compiles(), before + 1, "the first backward compiled it");
    // Later backwards of the same specialisation reuse it.
    let (x2, w2) = inputs(7);
    loss(&x2, &w2).unwrap().backward().unwrap();
    assert_eq!(backward_compiles(), before + 1);
    // And the gradients are eager's.
    let we = w.detach().unwrap().requires_grad_(true).unwrap();
    let eager = loss::compiled().run_eager(&[Arg::from(&x), Arg::from(&we)]).unwrap().remove(0);
    eager.backward().unwrap();
    let (g, ge) = (w.grad().unwrap().to_vec::<f64>().unwrap(), we.grad().unwrap().to_vec::<f64>().unwrap());
    for (a, b) in g.iter().zip(&ge) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{g:?} vs {ge:?}");
    }
}
