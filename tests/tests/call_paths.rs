//! Which calls run compiled: every training call of the oracle, by path
//! (`compiled training`, `inference`, or the eager reference and why).
//! Calls on the eager reference are correct but not transactional and not
//! fused, so the list is a to-do list; the test pins the ones that must
//! stay compiled.

#[path = "../../ui-tests/tests/oracle/cases.rs"]
mod cases;

use aot_runtime::{Arg, Tensor};
use aot_tests::{build_args, load_cases, to_args};

#[test]
fn oracle_call_paths() {
    let table = cases::all();
    let mut eager = vec![];
    let mut total = 0;
    for (case, (name, f)) in load_cases().iter().zip(&table) {
        for call in &case.calls {
            let Ok((_, args)) = build_args(call) else { continue };
            let args = to_args(&args);
            if !args.iter().any(|a| a.tensor().is_some_and(Tensor::requires_grad)) {
                continue;
            }
            total += 1;
            let path = f.call_path(&args).unwrap_or_else(|e| format!("error: {e}"));
            if path.starts_with("eager") {
                eager.push(format!("{name}/{}: {path}", call.label));
            }
        }
    }
    println!("{} of {total} training calls run the eager reference:", eager.len());
    for e in &eager {
        println!("  {e}");
    }
    // What the joint graph does not cover yet; anything else is a regression.
    let known = ["through detach()"];
    let unexpected: Vec<&String> = eager.iter().filter(|e| !known.iter().any(|k| e.contains(k))).collect();
    assert!(unexpected.is_empty(), "training calls that should run compiled:\n{unexpected:#?}");
    assert!(total >= 60, "the oracle has {total} training calls");
}

mod training_step {
    use aot_runtime::prelude::*;

    #[aot_fn]
    pub fn loss(x: &Tensor, y: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        let logits = x.matmul(w) + b;
        -(logits.log_softmax(1) * y).sum_dim(&[1], false).mean()
    }

    #[aot_fn]
    pub fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
        no_grad! {
            buf.mul_(momentum).add_(g);
            p.sub_(buf * lr);
        }
    }

    /// Batch norm's training forward with its running mean updated under
    /// `no_grad!`: a call that records history and has a `no_grad` region.
    #[aot_fn]
    pub fn norm(x: &Tensor, running_mean: &mut Tensor) -> Tensor {
        let mean = x.mean_dim(&[0], false);
        no_grad! {
            running_mean.mul_(0.9).add_(mean * 0.1);
        }
        (x - mean).sum()
    }
}

#[test]
fn a_training_step_runs_compiled() {
    use aot_runtime::{DType, Device};
    let dev = Device::Cpu;
    let x = Tensor::randn(&[4, 3], DType::F32, &dev, 1).unwrap();
    let y = Tensor::randn(&[4, 2], DType::F32, &dev, 2).unwrap();
    let w = Tensor::randn(&[3, 2], DType::F32, &dev, 3).unwrap().requires_grad_(true).unwrap();
    let b = Tensor::zeros(&[2], DType::F32, &dev).unwrap().requires_grad_(true).unwrap();
    let loss_args = [Arg::from(&x), Arg::from(&y), Arg::from(&w), Arg::from(&b)];
    assert_eq!(training_step::loss::compiled().call_path(&loss_args).unwrap(), "compiled training");
    let l = training_step::loss(&x, &y, &w, &b).unwrap();
    assert_eq!(l.grad_fn_name(), Some("CompiledFunctionBackward"));
    l.backward().unwrap();

    // The optimizer step writes parameters that require grad, all under
    // `no_grad!`: nothing is recorded, so it runs as an inference call.
    let g = w.grad().unwrap();
    let mut buf = w.zeros_like().unwrap();
    let mut wm = w.clone();
    let before = w.to_vec::<f32>().unwrap();
    let step_args = [Arg::from(&w), Arg::from(&buf), Arg::from(&g), Arg::from(0.1), Arg::from(0.9)];
    assert_eq!(training_step::sgd_momentum::compiled().call_path(&step_args).unwrap(), "inference");
    training_step::sgd_momentum(&mut wm, &mut buf, &g, 0.1, 0.9).unwrap();
    assert!(w.is_leaf() && w.requires_grad() && w.grad_fn_name().is_none());
    let (after, gv) = (w.to_vec::<f32>().unwrap(), g.to_vec::<f32>().unwrap());
    for ((a, b0), gi) in after.iter().zip(&before).zip(&gv) {
        assert!((a - (b0 - 0.1 * gi)).abs() < 1e-6);
    }

    let xg = Tensor::randn(&[4, 3], DType::F32, &dev, 4).unwrap().requires_grad_(true).unwrap();
    let rm = Tensor::zeros(&[3], DType::F32, &dev).unwrap();
    assert_eq!(training_step::norm::compiled().call_path(&[Arg::from(&xg), Arg::from(&rm)]).unwrap(), "compiled training");
    let out = training_step::norm(&xg, &mut rm.clone()).unwrap();
    assert_eq!(out.grad_fn_name(), Some("CompiledFunctionBackward"));
    assert!(!rm.requires_grad(), "the running mean was updated under no_grad");
    let mean: Vec<f32> = {
        let v = xg.to_vec::<f32>().unwrap();
        (0..3).map(|j| (0..4).map(|i| v[i * 3 + j]).sum::<f32>() / 4.0 * 0.1).collect()
    };
    for (r, m) in rm.to_vec::<f32>().unwrap().iter().zip(&mean) {
        assert!((r - m).abs() < 1e-6);
    }
}
