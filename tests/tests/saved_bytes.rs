//! What a compiled training call saves for backward, against eager
//! autograd on the same function: the partitioner (min-cut, recomputing
//! cheap elementwise ops) must not save more than eager does. Run with
//! `--nocapture` for the report.

use aot_runtime::prelude::*;
use aot_runtime::testing::saved_storage_bytes;

#[aot_fn]
fn mlp(x: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, y: &Tensor) -> Tensor {
    let h = (x.matmul(w1) + b1).relu();
    let logits = h.matmul(w2) + b2;
    -(logits.log_softmax(1) * y).sum_dim(&[1], false).mean()
}

#[aot_fn]
fn layernorm(x: &Tensor, gamma: &Tensor, beta: &Tensor) -> Tensor {
    let mean = x.mean_dim(&[1], true);
    let centred = x - mean;
    let var = (centred.square()).mean_dim(&[1], true);
    let normed = centred * (var + 1e-5).rsqrt();
    (normed * gamma + beta).tanh().sum()
}

fn randn(shape: &[usize], seed: u64, grad: bool) -> Tensor {
    let t = Tensor::randn(shape, DType::F32, &Device::Cpu, seed).unwrap();
    if grad {
        t.requires_grad_(true).unwrap()
    } else {
        t
    }
}

/// (eager bytes, compiled bytes), after checking both give the same loss.
fn measure(name: &str, call: impl Fn(bool) -> Tensor) -> (usize, usize) {
    let (eager, eager_bytes) = saved_storage_bytes(|| call(false));
    let (compiled, compiled_bytes) = saved_storage_bytes(|| call(true));
    assert_eq!(compiled.grad_fn_name(), Some("CompiledFunctionBackward"), "{name}: not compiled");
    let (e, c) = (eager.to_vec::<f32>().unwrap()[0], compiled.to_vec::<f32>().unwrap()[0]);
    assert!((e - c).abs() <= 1e-4 * (1.0 + e.abs()), "{name}: loss {e} vs {c}");
    eager.backward().unwrap();
    compiled.backward().unwrap();
    println!(
        "{name}: eager autograd saves {eager_bytes} bytes, the compiled call {compiled_bytes} bytes ({:.2}x)",
        compiled_bytes as f64 / eager_bytes as f64
    );
    (eager_bytes, compiled_bytes)
}

#[test]
fn compiled_training_saves_no_more_than_eager_autograd() {
    let (x, y) = (randn(&[32, 64], 1, false), randn(&[32, 10], 2, false).softmax(1).unwrap());
    let (w1, b1, w2, b2) = (randn(&[64, 128], 3, true), randn(&[128], 4, true), randn(&[128, 10], 5, true), randn(&[10], 6, true));
    let (eager, compiled) = measure("mlp 64-128-10, batch 32", |c| {
        if c {
            mlp(&x, &w1, &b1, &w2, &b2, &y).unwrap()
        } else {
            mlp::compiled()
                .run_eager(&[(&x).into(), (&w1).into(), (&b1).into(), (&w2).into(), (&b2).into(), (&y).into()])
                .unwrap()
                .remove(0)
        }
    });
    assert!(compiled <= eager, "mlp: compiled saves {compiled} > eager {eager}");

    let (xl, gamma, beta) = (randn(&[32, 64], 7, true), randn(&[64], 8, true), randn(&[64], 9, true));
    let (eager, compiled) = measure("layernorm 32x64", |c| {
        if c {
            layernorm(&xl, &gamma, &beta).unwrap()
        } else {
            layernorm::compiled().run_eager(&[(&xl).into(), (&gamma).into(), (&beta).into()]).unwrap().remove(0)
        }
    });
    assert!(compiled <= eager, "layernorm: compiled saves {compiled} > eager {eager}");
}
