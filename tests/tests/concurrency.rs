//! Compiled functions and autograd under concurrent use:
//! 8 threads x 10,000 compiled calls sharing one leaf, with compiled
//! training calls and eager backward passes accumulating into its `.grad`.
//! The values are small integers in f64, so every partial sum is exact and
//! the gradient must come out exactly, whatever the interleaving.

use aot_runtime::prelude::*;

const THREADS: usize = 8;
const CALLS: usize = 10_000;

#[aot_fn]
fn dot(a: &Tensor, b: &Tensor) -> Tensor {
    (a * b).sum()
}

fn vec3(v: [f64; 3]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[3], &Device::Cpu).expect("tensor")
}

fn scalar(t: &Tensor) -> f64 {
    t.to_vec::<f64>().expect("values")[0]
}

/// Thread `k`'s data: what its compiled training calls add to the gradient
/// (`x`) and what its eager backward passes add (`y`).
fn data(k: usize) -> ([f64; 3], [f64; 3]) {
    let k = k as f64;
    ([1.0, k, -k], [2.0, 0.0, k - 3.0])
}

/// One thread's calls: a quarter each of training calls `dot(w, x)` and
/// `dot(x, w)` (two specialisations) followed by `backward()`, inference
/// calls under `no_grad`, and inference calls without the leaf, each of
/// the last followed by an eager backward pass into the leaf.
fn worker(w: &Tensor, k: usize) {
    let (xv, yv) = data(k);
    let (x, y) = (vec3(xv), vec3(yv));
    let wv = w.to_vec::<f64>().expect("values");
    let w_dot_x: f64 = wv.iter().zip(&xv).map(|(a, b)| a * b).sum();
    let x_dot_x: f64 = xv.iter().map(|a| a * a).sum();
    for i in 0..CALLS {
        match i % 4 {
            0 | 1 => {
                let loss = if i % 4 == 0 { dot(w, &x) } else { dot(&x, w) }.expect("training call");
                assert_eq!(loss.grad_fn_name(), Some("CompiledFunctionBackward"));
                assert_eq!(scalar(&loss), w_dot_x);
                loss.backward().expect("compiled backward");
            }
            2 => {
                let v = aot_runtime::no_grad(|| dot(w, &x)).expect("no_grad call");
                assert!(!v.requires_grad());
                assert_eq!(scalar(&v), w_dot_x);
            }
            _ => {
                assert_eq!(scalar(&dot(&x, &x).expect("inference call")), x_dot_x);
                w.mul(&y).and_then(|t| t.sum()).and_then(|l| l.backward()).expect("eager backward");
            }
        }
    }
}

#[test]
fn concurrent_compiled_training_and_eager_backward_accumulate_exactly() {
    let w = vec3([1.0, -2.0, 3.0]).requires_grad_(true).expect("leaf");
    let x = vec3(data(1).0);
    assert_eq!(dot::compiled().call_path(&[Arg::from(&w), Arg::from(&x)]).expect("path"), "compiled training");
    assert_eq!(dot::compiled().call_path(&[Arg::from(&x), Arg::from(&w)]).expect("path"), "compiled training");
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for k in 0..THREADS {
            let w = &w;
            s.spawn(move || worker(w, k));
        }
    });
    println!("{THREADS} threads x {CALLS} compiled calls: {:?}", start.elapsed());
    let mut expect = [0.0; 3];
    for k in 0..THREADS {
        let (xv, yv) = data(k);
        for j in 0..3 {
            // Half the calls train (adding x), a quarter add y eagerly.
            expect[j] += (CALLS / 2) as f64 * xv[j] + (CALLS / 4) as f64 * yv[j];
        }
    }
    assert_eq!(w.grad().expect("grad").to_vec::<f64>().expect("values"), expect);
    // (w, x) and (x, w) training, (w, x) under no_grad, (x, x): one
    // specialisation each, however many threads built them at once.
    assert_eq!(aot_runtime::testing::num_specializations(dot::compiled()), 4);
}
