//! Functionalized RNG in compiled training calls: the generator's
//! (seed, offset) is taken in the forward and saved; dropout's mask, a pure
//! function of it, is recomputed in the backward instead of saved; eager
//! and compiled draw the same masks and leave the generator in the same
//! state; a training step run twice from one seed gives the same bits.

use aot_runtime::prelude::*;
use aot_runtime::testing::saved_storage_bytes;

/// The generator is global: tests that seed it take turns.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn randn(shape: &[usize], seed: u64, grad: bool) -> Tensor {
    let t = Tensor::randn(shape, DType::F32, &Device::Cpu, seed).unwrap();
    if grad {
        t.requires_grad_(true).unwrap()
    } else {
        t
    }
}

#[aot_fn]
fn dropout_mlp(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    let h = x.matmul(w1).relu().dropout(0.5);
    h.matmul(w2).tanh().sum()
}

/// Functionalized RNG: the compiled forward saves dropout's generator state
/// (two i64s), not its mask, and the backward recomputes the mask from it;
/// eager autograd saves the mask. Both draw the same mask and gradients.
#[test]
fn compiled_dropout_saves_the_generator_state_not_the_mask() {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let x = randn(&[64, 32], 11, false);
    let (w1, w2) = (randn(&[32, 256], 12, true), randn(&[256, 8], 13, true));
    let run = |compiled: bool| {
        aot_runtime::manual_seed(3);
        let (loss, bytes) = saved_storage_bytes(|| {
            if compiled {
                dropout_mlp(&x, &w1, &w2).unwrap()
            } else {
                dropout_mlp::compiled().run_eager(&[(&x).into(), (&w1).into(), (&w2).into()]).unwrap().remove(0)
            }
        });
        loss.backward().unwrap();
        let grads = (w1.grad().unwrap().to_vec::<f32>().unwrap(), w2.grad().unwrap().to_vec::<f32>().unwrap());
        w1.set_grad(None);
        w2.set_grad(None);
        (loss.to_vec::<f32>().unwrap(), grads, bytes, aot_runtime::rng_state())
    };
    let (eager, compiled) = (run(false), run(true));
    assert_eq!(compiled.3, eager.3, "the generator advanced differently");
    assert!((eager.0[0] - compiled.0[0]).abs() <= 1e-4 * (1.0 + eager.0[0].abs()), "{:?} {:?}", eager.0, compiled.0);
    for (e, c) in eager.1 .0.iter().zip(&compiled.1 .0).chain(eager.1 .1.iter().zip(&compiled.1 .1)) {
        assert!((e - c).abs() <= 1e-4 * (1.0 + e.abs()), "gradients differ: {e} vs {c}");
    }
    let mask_bytes = 64 * 256 * 4;
    println!(
        "dropout mlp: eager autograd saves {} bytes, the compiled call {} bytes ({} bytes less; the mask is {mask_bytes})",
        eager.2,
        compiled.2,
        eager.2 as i64 - compiled.2 as i64
    );
    assert!(compiled.2 + mask_bytes <= eager.2 + 64, "compiled {} vs eager {}", compiled.2, eager.2);
}

#[aot_fn]
fn train_step(x: &Tensor, y: &Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    let h = x.matmul(w1).tanh().dropout(0.3);
    let z = h.matmul(w2).dropout(0.1);
    (z - y).square().mean()
}

#[aot_fn]
fn sgd(p: &mut Tensor, g: &Tensor, lr: f64) {
    no_grad! {
        p.sub_(g * lr);
    }
}

/// Three steps of training with dropout from a seed: the parameters.
fn train(seed: u64, compiled: bool) -> Vec<Vec<u32>> {
    aot_runtime::manual_seed(seed);
    let (x, y) = (randn(&[16, 12], 21, false), randn(&[16, 4], 22, false));
    let mut w = [randn(&[12, 24], 23, true), randn(&[24, 4], 24, true)];
    for _ in 0..3 {
        let loss = if compiled {
            train_step(&x, &y, &w[0], &w[1]).unwrap()
        } else {
            train_step::compiled().run_eager(&[(&x).into(), (&y).into(), (&w[0]).into(), (&w[1]).into()]).unwrap().remove(0)
        };
        if compiled {
            assert_eq!(loss.grad_fn_name(), Some("CompiledFunctionBackward"), "not compiled");
        }
        loss.backward().unwrap();
        for p in w.iter_mut() {
            let g = p.grad().unwrap();
            sgd(p, &g, 0.1).unwrap();
            p.set_grad(None);
        }
    }
    w.iter().map(|p| p.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()).collect()
}

/// A training step with dropout run twice from the same seed gives
/// bit-identical parameters; another seed gives others; eager autograd
/// draws the same masks.
#[test]
fn training_twice_from_one_seed_gives_the_same_bits() {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let a = train(42, true);
    assert_eq!(train(42, true), a);
    assert_ne!(train(43, true), a);
    let eager = train(42, false);
    let close = a.iter().flatten().zip(eager.iter().flatten()).all(|(c, e)| (f32::from_bits(*c) - f32::from_bits(*e)).abs() <= 1e-5);
    assert!(close, "compiled and eager training drew different masks");
}

#[aot_fn]
fn dropout_by(x: &Tensor, p: f64) -> Tensor {
    x.dropout(p).mul(2.0)
}

#[aot_fn]
fn dropout_literal_zero(x: &Tensor) -> Tensor {
    x.dropout(0.0)
}

/// `dropout` with `p` 0 or 1 draws nothing (PyTorch's rule), in eager and in
/// compiled inference and training calls alike; `p = 0` gives a new tensor
/// equal to the input and `p = 1` zeros, with the matching gradients.
#[test]
fn dropout_of_zero_or_one_draws_nothing() {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    for grad in [false, true] {
        for p in [0.0, 1.0] {
            let x = randn(&[3, 5], 21, grad);
            let want: Vec<f32> = x.to_vec::<f32>().unwrap().iter().map(|v| if p == 0.0 { 2.0 * v } else { 0.0 }).collect();
            type Run<'a> = (&'a str, Box<dyn Fn() -> Tensor + 'a>);
            let runs: [Run; 2] = [
                ("compiled", Box::new(|| dropout_by(&x, p).unwrap())),
                ("eager", Box::new(|| dropout_by::compiled().run_eager(&[(&x).into(), p.into()]).unwrap().remove(0))),
            ];
            for (how, run) in runs {
                aot_runtime::manual_seed(5);
                let before = aot_runtime::rng_state();
                let y = run();
                assert_eq!(aot_runtime::rng_state(), before, "{how} dropout({p}) advanced the generator (grad {grad})");
                assert_eq!(y.to_vec::<f32>().unwrap(), want, "{how} dropout({p})");
                if grad {
                    y.sum().unwrap().backward().unwrap();
                    let g = x.grad().unwrap().to_vec::<f32>().unwrap();
                    assert!(g.iter().all(|&v| v == if p == 0.0 { 2.0 } else { 0.0 }), "{how} dropout({p}) gradient {g:?}");
                    x.set_grad(None);
                }
            }
        }
    }
    // A literal 0 likewise: a fresh tensor, never the input itself.
    let x = randn(&[4], 22, false);
    let before = aot_runtime::rng_state();
    let y = dropout_literal_zero(&x).unwrap();
    assert!(!y.same_tensor(&x));
    assert_eq!(y.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert_eq!(aot_runtime::rng_state(), before);
}

#[aot_fn]
fn dropout_under_no_grad(a: &Tensor) -> Tensor {
    let c = no_grad! { a.dropout(0.5) };
    (c + a).sum()
}

/// A dropout under `no_grad!` passes no gradient (the differential tests
/// found the joint treating it as differentiable): only `+ a` does.
#[test]
fn dropout_under_no_grad_passes_no_gradient() -> Result<()> {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let a = Tensor::ones(&[8], DType::F64, &Device::Cpu)?.requires_grad_(true)?;
    assert_eq!(dropout_under_no_grad::compiled().call_path(&[Arg::from(&a)])?, "compiled training");
    dropout_under_no_grad(&a)?.backward()?;
    assert_eq!(a.grad().expect("a gradient").to_vec::<f64>()?, vec![1.0; 8]);
    Ok(())
}
