//! The kernel launches of one W3 training step (`examples/train_mlp.rs`,
//! `benches/src/w3.rs`: an MLP 784-1024-1024-10, here at a small size,
//! which launches the same kernels) on the simulated CUDA device
//! (`AOT_CUDA_SIM=1`), counted by the device and checked exactly, so a
//! change that adds a launch shows here. The listing of what launched is
//! printed (`--nocapture`).
//!
//! A step: the forward and loss (`forward_loss`, compiled training), its
//! backward, and SGD with momentum, either as `train_mlp` writes it (one
//! `sgd_momentum` call per parameter) or as one call over all of them
//! (`sgd_step`), whose six in-place updates launch as one kernel of six
//! segments. The products are cuBLAS calls on a GPU (the CPU's gemm on
//! the simulator), counted apart from the kernels.
#![cfg(feature = "cuda")]

use aot_runtime::prelude::*;
use aot_runtime::testing::{cublas_gemms, host_round_trips};
use aot_runtime::Arg;

/// `examples/train_mlp.rs`'s loss.
#[aot_fn]
#[allow(clippy::too_many_arguments)]
fn forward_loss(x: &Tensor, y_onehot: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, w3: &Tensor, b3: &Tensor) -> Tensor {
    let h1 = (x.matmul(w1) + b1).relu();
    let h2 = (h1.matmul(w2) + b2).relu();
    let logits = h2.matmul(w3) + b3;
    let nll = -(logits.log_softmax(1) * y_onehot).sum_dim(&[1], false);
    nll.mean()
}

/// `examples/train_mlp.rs`'s optimizer step of one parameter.
#[aot_fn]
fn sgd_momentum(p: &mut Tensor, buf: &mut Tensor, g: &Tensor, lr: f64, momentum: f64) {
    no_grad! {
        buf.mul_(momentum).add_(g);
        p.sub_(buf * lr);
    }
}

/// The MLP's parameters (or their momentum buffers, or gradients).
#[derive(TensorTree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    w3: Tensor,
    b3: Tensor,
}

impl Mlp {
    fn tensors(&self) -> [&Tensor; 6] {
        [&self.w1, &self.b1, &self.w2, &self.b2, &self.w3, &self.b3]
    }
    fn from(t: [Tensor; 6]) -> Mlp {
        let [w1, b1, w2, b2, w3, b3] = t;
        Mlp { w1, b1, w2, b2, w3, b3 }
    }
}

/// The optimizer step of every parameter in one call.
#[aot_fn]
fn sgd_step(p: &mut Mlp, buf: &mut Mlp, g: &Mlp, lr: f64, momentum: f64) {
    sgd_momentum(&mut p.w1, &mut buf.w1, &g.w1, lr, momentum);
    sgd_momentum(&mut p.b1, &mut buf.b1, &g.b1, lr, momentum);
    sgd_momentum(&mut p.w2, &mut buf.w2, &g.w2, lr, momentum);
    sgd_momentum(&mut p.b2, &mut buf.b2, &g.b2, lr, momentum);
    sgd_momentum(&mut p.w3, &mut buf.w3, &g.w3, lr, momentum);
    sgd_momentum(&mut p.b3, &mut buf.b3, &g.b3, lr, momentum);
}

const LR: f64 = 0.02;
const MOMENTUM: f64 = 0.9;
const SIZES: (usize, usize, usize, usize) = (24, 32, 10, 16);

/// Kernel launches and cuBLAS calls of `f`.
fn count(f: impl FnOnce()) -> (u64, u64) {
    let (k, g) = (host_round_trips().1, cublas_gemms());
    f();
    (host_round_trips().1 - k, cublas_gemms() - g)
}

/// A W3 step's state on `device`.
struct W3 {
    x: Tensor,
    y: Tensor,
    p: Mlp,
    buf: Mlp,
}

impl W3 {
    fn new(device: &Device) -> W3 {
        let (i, h, c, n) = SIZES;
        let on = |t: Tensor| t.to_device(device).expect("to_device");
        let param = |s: &[usize], seed| on((&Tensor::randn(s, DType::F32, &Device::Cpu, seed).expect("randn") * 0.3).expect("scale"));
        let p = Mlp::from([param(&[i, h], 1), param(&[h], 2), param(&[h, h], 3), param(&[h], 4), param(&[h, c], 5), param(&[c], 6)]);
        let p = Mlp::from(p.tensors().map(|t| t.requires_grad_(true).expect("leaf")));
        let buf = Mlp::from(p.tensors().map(|t| t.zeros_like().expect("zeros")));
        let x = on(Tensor::randn(&[n, i], DType::F32, &Device::Cpu, 7).expect("randn"));
        let hot: Vec<f32> = (0..n * c).map(|k| if k % c == (k / c * 7) % c { 1.0 } else { 0.0 }).collect();
        let y = on(Tensor::from_vec(hot, &[n, c], &Device::Cpu).expect("one-hot"));
        W3 { x, y, p, buf }
    }

    fn loss_args(&self) -> Vec<Arg<'_>> {
        [&self.x, &self.y].into_iter().chain(self.p.tensors()).map(Arg::from).collect()
    }

    /// One step; per phase (forward, backward, optimizer), the kernels
    /// and cuBLAS calls it launched; and the loss.
    fn step(&mut self, one_call: bool) -> ([(u64, u64); 3], f32) {
        let mut loss = None;
        let fw = count(|| loss = Some(forward_loss::compiled().__call(&self.loss_args()).expect("forward").remove(0)));
        let loss = loss.expect("a loss");
        for p in self.p.tensors() {
            p.set_grad(None);
        }
        let bw = count(|| loss.backward().expect("backward"));
        let g = Mlp::from(self.p.tensors().map(|p| p.grad().expect("a gradient")));
        let opt = count(|| {
            if one_call {
                sgd_step(&mut self.p, &mut self.buf, &g, LR, MOMENTUM).expect("sgd_step");
            } else {
                let Mlp { w1, b1, w2, b2, w3, b3 } = &mut self.p;
                let bufs = [&mut self.buf.w1, &mut self.buf.b1, &mut self.buf.w2, &mut self.buf.b2, &mut self.buf.w3, &mut self.buf.b3];
                for ((p, buf), g) in [w1, b1, w2, b2, w3, b3].into_iter().zip(bufs).zip(g.tensors()) {
                    sgd_momentum(p, buf, g, LR, MOMENTUM).expect("sgd_momentum");
                }
            }
        });
        ([fw, bw, opt], loss.item::<f32>().expect("loss"))
    }

    /// The kernels of the step's forward and backward, and of its
    /// optimizer step in one call, as listed.
    fn listing(&mut self) -> (Vec<String>, Vec<String>) {
        let names = |ks: Vec<aot_runtime::KernelSource>| ks.into_iter().map(|k| k.name).collect::<Vec<_>>();
        let cuda = Device::Cuda(0);
        let train = names(forward_loss::compiled().kernels_for(&self.loss_args(), &cuda).expect("listing"));
        let g = Mlp::from(self.p.tensors().map(|p| p.zeros_like().expect("zeros")));
        let args = [Arg::tree(&self.p), Arg::tree(&self.buf), Arg::tree(&g), LR.into(), MOMENTUM.into()];
        (train, names(sgd_step::compiled().kernels_for(&args, &cuda).expect("listing")))
    }
}

#[test]
fn a_w3_step_launches_15_kernels_and_8_cublas_calls() {
    if !aot_runtime::cuda::is_available() {
        assert!(std::env::var_os("CI").is_none(), "CI runs this file with AOT_CUDA_SIM=1");
        eprintln!("skipped: no CUDA device (AOT_CUDA_SIM=1 simulates one)");
        return;
    }
    let mut cuda = W3::new(&Device::Cuda(0));
    let (train, opt) = cuda.listing();
    println!("forward and backward ({} entries):\n  {}", train.len(), train.join("\n  "));
    println!("optimizer, one call ({}):\n  {}", opt.len(), opt.join("\n  "));
    let mut cpu = W3::new(&Device::Cpu);
    for step in 0..3 {
        let one_call = step != 1;
        let (launched, loss) = cuda.step(one_call);
        let (_, cpu_loss) = cpu.step(one_call);
        assert_eq!(loss, cpu_loss, "step {step}: the simulator computes the CPU's bits");
        println!(
            "step {step} (one optimizer call: {one_call}): (kernels, cuBLAS) forward {:?}, backward {:?}, optimizer {:?}",
            launched[0], launched[1], launched[2]
        );
        // Forward: the two bias-add-relu kernels, log_softmax with its
        // bias add, the product with the targets (its metadata is saved for
        // the backward), the row sum, the mean; three products.
        assert_eq!(launched[0], (6, 3), "step {step}: forward");
        // Backward: the mean's and the loss's kernels, the product with the
        // targets, three bias gradients (sums over the batch), two relu
        // masks; five products (no gradient of `x`).
        assert_eq!(launched[1], (8, 5), "step {step}: backward");
        let optimizer = if one_call { 1 } else { 6 };
        assert_eq!(launched[2], (optimizer, 0), "step {step}: optimizer");
        let total = launched.iter().map(|l| l.0).sum::<u64>();
        assert_eq!(total, if one_call { 15 } else { 20 }, "step {step}");
    }
    for (a, b) in cuda.p.tensors().into_iter().zip(cpu.p.tensors()) {
        assert_eq!(a.to_vec::<f32>().expect("values"), b.to_vec::<f32>().expect("values"), "the parameters after three steps");
    }
    assert_eq!(opt.len(), 1, "one launch of six segments: {opt:?}");
    assert!(opt[0].ends_with("_x6"), "{opt:?}");
    assert_eq!(train.iter().filter(|n| n.starts_with("cublasGemm")).count(), 8, "{train:?}");
    assert_eq!(train.len(), 6 + 8 + 8, "{train:?}");
}
