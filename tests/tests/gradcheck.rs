//! Gradient checks of compiled `#[aot_fn]` functions, in f64.
//!
//! Every function below is written in the DSL and called through the
//! public path: the generated function itself (`NAME(&x, ..)?`, which is
//! `NAME::compiled().__call`) with fresh leaves that require grad, then
//! `backward()` of the weighted-sum loss `sum_k sum(out_k * w_k)` over the
//! outputs that require grad (fixed deterministic weights `w_k`). The
//! gradients of the leaves must equal:
//! - central finite differences (eps 1e-6) of the same loss, each forward
//!   being a call of the compiled function with leaves that do not require
//!   grad (the inference path), on every element of every leaf;
//! - the gradients of the same program run by the eager reference
//!   (`NAME::compiled().run_eager`) with the same weights, tightly; the
//!   outputs (values, shapes, dtypes, `requires_grad`) must match too.
//!
//! Inputs that a function mutates are made inside the test's closure, fresh
//! for every evaluation: a non-leaf `leaf.copy()` (PyTorch's `clone()`)
//! when the mutated input carries gradients to a leaf, or a plain buffer
//! when it does not. A mutated input is part of the loss after the call, so
//! the gradient of its new value reaches the leaf through its history.
//!
//! Each test also records whether the call took the compiled training path
//! (an output produced by `CompiledFunctionBackward`) and asserts it where
//! the runtime is expected to compile the function (`Path::Compiled`,
//! every function here, `no_grad!` regions included).
//!
//! The last tests call `backward()` twice on a graph built by a compiled
//! call: the second call must be PyTorch's error (graph freed,
//! `retain_graph=True`).

use aot_runtime::prelude::*;
use aot_runtime::Arg;

// ---------------------------------------------------------------------------
// Calling a generated function either way

/// Which path a call takes: the generated function, or the eager reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Compiled,
    Eager,
}

/// The outputs of a generated function as a list.
trait Outs {
    fn outs(self) -> Vec<Tensor>;
}

impl Outs for () {
    fn outs(self) -> Vec<Tensor> {
        vec![]
    }
}

impl Outs for Tensor {
    fn outs(self) -> Vec<Tensor> {
        vec![self]
    }
}

impl Outs for (Tensor, Tensor) {
    fn outs(self) -> Vec<Tensor> {
        vec![self.0, self.1]
    }
}

impl Outs for (Tensor, Tensor, Tensor) {
    fn outs(self) -> Vec<Tensor> {
        vec![self.0, self.1, self.2]
    }
}

impl Outs for (Tensor, Tensor, Tensor, Tensor) {
    fn outs(self) -> Vec<Tensor> {
        vec![self.0, self.1, self.2, self.3]
    }
}

impl Outs for (Tensor, Tensor, Tensor, Tensor, Tensor) {
    fn outs(self) -> Vec<Tensor> {
        vec![self.0, self.1, self.2, self.3, self.4]
    }
}

/// `call!(mode, f(args..))`: the outputs of `f(args..)` (the generated
/// function) or of `f::compiled().run_eager(&[args..])`, as a `Vec<Tensor>`.
macro_rules! call {
    ($mode:expr, $f:ident($($a:expr),* $(,)?)) => {
        match $mode {
            Mode::Compiled => $f($($a),*)?.outs(),
            Mode::Eager => $f::compiled().run_eager(&[$(Arg::from($a)),*])?,
        }
    };
}

// ---------------------------------------------------------------------------
// The checker

/// Whether a test requires the compiled training path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// The call must be compiled (an output from `CompiledFunctionBackward`).
    Compiled,
}

const EPS: f64 = 1e-6;
/// Analytic against numeric: `|a - n| <= ATOL + RTOL * |n|`.
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-5;
/// Compiled against eager (outputs and gradients): relative to magnitude.
const TIGHT: f64 = 1e-10;

/// Deterministic values in `[lo, hi]` (SplitMix64).
fn rand_vals(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x2545_F491_4F6C_DD1D).wrapping_add(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            lo + (hi - lo) * ((z >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn t64(values: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(values, shape, &Device::Cpu).expect("from_vec")
}

/// A leaf's initial values: uniform in `[-1, 1]`.
fn r(seed: u64, shape: &[usize]) -> Tensor {
    t64(rand_vals(seed, shape.iter().product(), -1.0, 1.0), shape)
}

/// The weight of output `k` in the loss: fixed, not all equal, of both signs.
fn weights(k: usize, n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 * (0.9 * i as f64 + 1.7 * k as f64 + 0.3).sin() + 0.25 * (0.31 * i as f64).cos()).collect()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).and_then(|t| t.to_vec::<f64>()).expect("values as f64")
}

type Raw = Vec<(Vec<f64>, Vec<usize>)>;

fn fresh_leaves(raw: &Raw, requires_grad: bool) -> Vec<Tensor> {
    raw.iter()
        .map(|(v, s)| {
            let t = t64(v.clone(), s);
            if requires_grad {
                t.requires_grad_(true).expect("requires_grad_")
            } else {
                t
            }
        })
        .collect()
}

/// What one call with leaves that require grad produced.
struct Run {
    /// Per output: shape, dtype, values, requires_grad.
    outs: Vec<(Vec<usize>, DType, Vec<f64>, bool)>,
    /// Per leaf: its gradient (None if it got none).
    grads: Vec<Option<Vec<f64>>>,
    /// Whether an output came from the compiled autograd node.
    compiled_node: bool,
    /// The outputs' `grad_fn` names, for the messages.
    grad_fns: Vec<Option<&'static str>>,
}

type Body<'a> = &'a dyn Fn(Mode, &[Tensor]) -> Result<Vec<Tensor>>;

fn run_with_grad(name: &str, mode: Mode, raw: &Raw, body: Body) -> Run {
    let leaves = fresh_leaves(raw, true);
    let outs = body(mode, &leaves).unwrap_or_else(|e| panic!("{name}: the {mode:?} call failed: {e}"));
    let mut loss: Option<Tensor> = None;
    for (k, o) in outs.iter().enumerate() {
        if !o.requires_grad() {
            continue;
        }
        let w = t64(weights(k, o.numel()), &o.shape());
        let term = o.mul(&w).and_then(|x| x.sum()).unwrap_or_else(|e| panic!("{name}: loss term {k}: {e}"));
        loss = Some(match loss {
            Some(l) => l.add(&term).expect("loss add"),
            None => term,
        });
    }
    let loss = loss.unwrap_or_else(|| panic!("{name}: no output of the {mode:?} call requires grad"));
    loss.backward().unwrap_or_else(|e| panic!("{name}: backward of the {mode:?} call failed: {e}"));
    for (i, l) in leaves.iter().enumerate() {
        assert!(l.is_leaf(), "{name}: leaf {i} stopped being a leaf ({mode:?})");
    }
    let grads = leaves
        .iter()
        .enumerate()
        .map(|(i, l)| {
            l.grad().map(|g| {
                assert_eq!(g.shape(), l.shape(), "{name}: {mode:?} grad of leaf {i} has the wrong shape");
                assert_eq!(g.dtype(), DType::F64, "{name}: {mode:?} grad of leaf {i} has the wrong dtype");
                vals(&g)
            })
        })
        .collect();
    let grad_fns: Vec<Option<&'static str>> = outs.iter().map(Tensor::grad_fn_name).collect();
    Run {
        outs: outs.iter().map(|o| (o.shape(), o.dtype(), vals(o), o.requires_grad())).collect(),
        grads,
        compiled_node: grad_fns.contains(&Some("CompiledFunctionBackward")),
        grad_fns,
    }
}

/// The loss of a call with leaves that do not require grad (the compiled
/// inference path), over the outputs selected by `mask`.
fn loss_value(name: &str, raw: &Raw, body: Body, mask: &[bool]) -> f64 {
    let leaves = fresh_leaves(raw, false);
    let outs = body(Mode::Compiled, &leaves).unwrap_or_else(|e| panic!("{name}: a finite-difference call failed: {e}"));
    assert_eq!(outs.len(), mask.len(), "{name}: number of outputs changed");
    let mut loss = 0.0;
    for (k, o) in outs.iter().enumerate() {
        if mask[k] {
            loss += vals(o).iter().zip(weights(k, o.numel())).map(|(v, w)| v * w).sum::<f64>();
        }
    }
    loss
}

fn close_tight(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= TIGHT * (1.0 + a.abs().max(b.abs())) || (a.is_nan() && b.is_nan())
}

/// Checks gradients of `body` (outputs from leaves made from `inputs`)
/// against finite differences and the eager reference. Returns which
/// outputs required grad. Panics with every failure found.
#[track_caller]
fn gradcheck(name: &str, path: Path, inputs: &[Tensor], body: impl Fn(Mode, &[Tensor]) -> Result<Vec<Tensor>>) -> Vec<bool> {
    let body: Body = &body;
    let raw: Raw = inputs.iter().map(|t| (vals(t), t.shape())).collect();
    for (i, t) in inputs.iter().enumerate() {
        assert_eq!(t.dtype(), DType::F64, "{name}: leaf {i} must be f64");
    }
    let compiled = run_with_grad(name, Mode::Compiled, &raw, body);
    let eager = run_with_grad(name, Mode::Eager, &raw, body);
    let mut errs: Vec<String> = vec![];

    if path == Path::Compiled && !compiled.compiled_node {
        errs.push(format!(
            "the call did not take the compiled training path (no output from CompiledFunctionBackward; grad_fns {:?})",
            compiled.grad_fns
        ));
    }

    // Outputs: compiled against eager.
    if compiled.outs.len() != eager.outs.len() {
        errs.push(format!("number of outputs: compiled {}, eager {}", compiled.outs.len(), eager.outs.len()));
    }
    for (k, (c, e)) in compiled.outs.iter().zip(&eager.outs).enumerate() {
        if c.0 != e.0 || c.1 != e.1 {
            errs.push(format!("output {k}: compiled {:?} {:?}, eager {:?} {:?}", c.1, c.0, e.1, e.0));
            continue;
        }
        if c.3 != e.3 {
            errs.push(format!("output {k}: requires_grad: compiled {}, eager {}", c.3, e.3));
        }
        if let Some(j) = (0..c.2.len()).find(|&j| !close_tight(c.2[j], e.2[j])) {
            errs.push(format!("output {k}, element {j}: compiled {}, eager {}", c.2[j], e.2[j]));
        }
    }

    // Gradients: compiled against eager.
    for (i, (c, e)) in compiled.grads.iter().zip(&eager.grads).enumerate() {
        match (c, e) {
            (Some(c), Some(e)) => {
                if let Some(j) = (0..c.len()).find(|&j| !close_tight(c[j], e[j])) {
                    errs.push(format!("leaf {i}, element {j}: compiled grad {}, eager grad {}", c[j], e[j]));
                }
            }
            (None, None) => {}
            (c, e) => errs.push(format!("leaf {i}: compiled grad is {}, eager grad is {}", some(c), some(e))),
        }
    }

    // Gradients: compiled against central finite differences.
    let mask: Vec<bool> = compiled.outs.iter().map(|o| o.3).collect();
    for (i, (v, _)) in raw.iter().enumerate() {
        let analytic = compiled.grads[i].clone().unwrap_or_else(|| vec![0.0; v.len()]);
        for (j, &a) in analytic.iter().enumerate() {
            let mut plus = raw.clone();
            plus[i].0[j] += EPS;
            let mut minus = raw.clone();
            minus[i].0[j] -= EPS;
            let n = (loss_value(name, &plus, body, &mask) - loss_value(name, &minus, body, &mask)) / (2.0 * EPS);
            let ok = (a - n).abs() <= ATOL + RTOL * n.abs();
            if !ok {
                errs.push(format!(
                    "leaf {i}, element {j}: compiled analytic grad {a}, numeric {n} (|diff| {:.3e}){}",
                    (a - n).abs(),
                    if compiled.grads[i].is_none() { " (the leaf got no grad)" } else { "" }
                ));
            }
        }
    }

    if !errs.is_empty() {
        let shown = errs.len().min(20);
        panic!(
            "gradcheck of `{name}` failed ({} problems{}):\n  {}\ncompiled grads: {:?}\neager grads: {:?}",
            errs.len(),
            if shown < errs.len() { ", first 20 shown" } else { "" },
            errs[..shown].join("\n  "),
            compiled.grads,
            eager.grads
        );
    }
    eprintln!(
        "{name}: ok ({} path, {} elements checked)",
        if compiled.compiled_node { "compiled" } else { "eager-fallback" },
        raw.iter().map(|(v, _)| v.len()).sum::<usize>()
    );
    mask
}

fn some<T>(o: &Option<T>) -> &'static str {
    if o.is_some() {
        "Some"
    } else {
        "None"
    }
}

// ---------------------------------------------------------------------------
// Networks and losses

/// A 2-layer MLP (tanh then relu) and a squared-error loss with an L2 term.
#[aot_fn]
fn mlp_loss(x: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, target: &Tensor) -> Tensor {
    let h = (x.matmul(w1) + b1).tanh();
    let z = (h.mm(w2) + b2).relu();
    let d = z - target;
    d.square().sum_dim(&[1], false).mean() + w1.square().sum() * 0.01
}

#[test]
fn mlp() {
    let inputs = [r(1, &[3, 4]), r(2, &[4, 5]), r(3, &[5]), r(4, &[5, 2]), r(5, &[2]), r(6, &[3, 2])];
    gradcheck("mlp_loss", Path::Compiled, &inputs, |m, x| Ok(call!(m, mlp_loss(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]))));
}

/// Cross-entropy of a linear layer against one-hot targets (no grad).
#[aot_fn]
fn cross_entropy(x: &Tensor, w: &Tensor, b: &Tensor, onehot: &Tensor) -> Tensor {
    let logits = x.matmul(w) + b;
    -(logits.log_softmax(1) * onehot).sum_dim(&[1], false).mean()
}

#[test]
fn cross_entropy_loss() {
    let inputs = [r(11, &[3, 4]), r(12, &[4, 5]), r(13, &[5])];
    gradcheck("cross_entropy", Path::Compiled, &inputs, |m, x| {
        let onehot = t64((0..15).map(|i| if i % 5 == (2 * (i / 5) + 1) % 5 { 1.0 } else { 0.0 }).collect(), &[3, 5]);
        Ok(call!(m, cross_entropy(&x[0], &x[1], &x[2], &onehot)))
    });
}

/// Layer norm by hand: mean, centred square, rsqrt.
#[aot_fn]
fn layer_norm_rsqrt(x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Tensor {
    let mu = x.mean_dim(&[-1], true);
    let xc = x - mu;
    let var = xc.square().mean_dim(&[-1], true);
    xc * (var + eps).rsqrt() * gamma + beta
}

#[test]
fn layer_norm_with_rsqrt() {
    let inputs = [r(21, &[3, 5]), r(22, &[5]), r(23, &[5])];
    gradcheck("layer_norm_rsqrt", Path::Compiled, &inputs, |m, x| Ok(call!(m, layer_norm_rsqrt(&x[0], &x[1], &x[2], 1e-5))));
}

/// Layer norm by hand: sum / n, var_dim, sqrt and a division.
#[aot_fn]
fn layer_norm_sqrt_div(x: &Tensor, gamma: &Tensor, beta: &Tensor) -> Tensor {
    let mu = x.sum_dim(&[1], true) / 4.0;
    let var = x.var_dim(&[1], 0, true);
    (x - mu) / (var + 1e-5).sqrt() * gamma + beta
}

#[test]
fn layer_norm_with_sqrt_and_div() {
    let inputs = [r(31, &[3, 4]), r(32, &[4]), r(33, &[1, 4])];
    gradcheck("layer_norm_sqrt_div", Path::Compiled, &inputs, |m, x| Ok(call!(m, layer_norm_sqrt_div(&x[0], &x[1], &x[2]))));
}

/// softmax, log_softmax, and a softmax by hand shifted by amax.
#[aot_fn]
fn softmaxes(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let m = x.amax_dim(&[1], true);
    let e = (x - m).exp();
    let manual = e / e.sum_dim(&[1], true);
    (x.softmax(1), x.log_softmax(0), manual)
}

#[test]
fn softmax_and_log_softmax() {
    gradcheck("softmaxes", Path::Compiled, &[r(41, &[3, 4])], |m, x| Ok(call!(m, softmaxes(&x[0]))));
}

/// var_dim with corrections 0 and 1, over one and two dims.
#[aot_fn]
fn variances(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    (x.var_dim(&[1], 1, false), x.var_dim(&[0], 0, true), x.var_dim(&[0, 1], 1, false).sqrt())
}

#[test]
fn var() {
    gradcheck("variances", Path::Compiled, &[r(51, &[3, 4])], |m, x| Ok(call!(m, variances(&x[0]))));
}

/// Scaled dot-product attention on batches.
#[aot_fn]
fn attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Tensor {
    let s = q.bmm(&k.transpose(1, 2)) * scale;
    s.softmax(-1).bmm(&v.permute(&[0, 2, 1]).permute(&[0, 2, 1]))
}

#[test]
fn attention_bmm() {
    let inputs = [r(61, &[2, 3, 4]), r(62, &[2, 3, 4]), r(63, &[2, 3, 2])];
    gradcheck("attention", Path::Compiled, &inputs, |m, x| Ok(call!(m, attention(&x[0], &x[1], &x[2], 0.5))));
}

/// An unrolled recurrent net.
#[aot_fn]
fn rnn(xs: &Tensor, h0: &Tensor, w: &Tensor, u: &Tensor) -> Tensor {
    let mut h = h0.tanh();
    for i in 0..3 {
        h = (h.matmul(w) + xs.select(0, i).matmul(u)).tanh();
    }
    h
}

#[test]
fn unrolled_rnn() {
    let inputs = [r(71, &[3, 1, 2]), r(72, &[1, 3]), r(73, &[3, 3]), r(74, &[2, 3])];
    gradcheck("rnn", Path::Compiled, &inputs, |m, x| Ok(call!(m, rnn(&x[0], &x[1], &x[2], &x[3]))));
}

// ---------------------------------------------------------------------------
// Elementwise chains and broadcasting

/// exp / log / sigmoid-style chains and the other unary ops.
#[aot_fn]
fn elementwise(x: &Tensor, y: &Tensor) -> Tensor {
    let s = 1.0 / (1.0 + (-x).exp());
    let softplus = (1.0 + x.exp()).log();
    let a = s * y.sigmoid() + softplus * y.tanh();
    let p = y.abs() + 0.5;
    let b = p.sqrt() * p.pow(1.5) + p.reciprocal() + p.log() / p.rsqrt();
    a + b + x.silu() + x.gelu() + (x * y).sin().cos() - x.neg().exp().square()
}

#[test]
fn elementwise_chains() {
    let inputs = [r(81, &[2, 3]), r(82, &[2, 3])];
    gradcheck("elementwise", Path::Compiled, &inputs, |m, x| Ok(call!(m, elementwise(&x[0], &x[1]))));
}

/// Broadcasting between [3, 1], [4] and [2, 1, 4], maximum and minimum.
#[aot_fn]
fn broadcasting(a: &Tensor, b: &Tensor, c: &Tensor, s: f64) -> (Tensor, Tensor) {
    let ab = a * b - s;
    let abc = ab.unsqueeze(0) + c * a;
    (abc.maximum(c).sum_dim(&[0], false), ab.minimum(b) / (c.square() + 1.0))
}

#[test]
fn broadcasting_binary_ops() {
    let inputs = [r(91, &[3, 1]), r(92, &[4]), r(93, &[2, 1, 4])];
    gradcheck("broadcasting", Path::Compiled, &inputs, |m, x| Ok(call!(m, broadcasting(&x[0], &x[1], &x[2], 0.25))));
}

/// where_ with a comparison, maximum and minimum against scalars.
#[aot_fn]
fn where_select(x: &Tensor, y: &Tensor) -> Tensor {
    let m = x.gt(y);
    x.where_(&m, &(y * 2.0)) + x.maximum(0.1) * y.minimum(-0.1)
}

#[test]
fn where_and_scalar_extrema() {
    let inputs = [r(101, &[3, 4]), r(102, &[4])];
    gradcheck("where_select", Path::Compiled, &inputs, |m, x| Ok(call!(m, where_select(&x[0], &x[1]))));
}

// ---------------------------------------------------------------------------
// Views of inputs

/// transpose / permute / t / expand / select / narrow / slice / diagonal /
/// view / reshape / unsqueeze / squeeze of inputs.
#[aot_fn]
fn input_views(a: &Tensor, b: &Tensor, m: &Tensor) -> (Tensor, Tensor, Tensor) {
    let x = a.t() * b + b.permute(&[1, 0]).t().transpose(0, 1).t();
    let d = m.diagonal();
    let e = a.select(0, 1).unsqueeze(0).expand(&[4, 4]);
    let n = a.narrow(1, 1, 2);
    let sl = b.slice(0, 0, 4, 2);
    let v = a.view(&[2, 6]).reshape(&[6, 2]).unsqueeze(0).squeeze(0);
    (x * d, e * d.sum(), sl.matmul(n) + v.narrow(0, 3, 2))
}

#[test]
fn views_of_inputs() {
    let inputs = [r(111, &[3, 4]), r(112, &[4, 3]), r(113, &[3, 3])];
    gradcheck("input_views", Path::Compiled, &inputs, |m, x| Ok(call!(m, input_views(&x[0], &x[1], &x[2]))));
}

// ---------------------------------------------------------------------------
// In-place ops on intermediates

/// `copy()` of an input, then in-place ops on views of the copy.
#[aot_fn]
fn inplace_on_views(x: &Tensor, y: &Tensor) -> Tensor {
    let z = x.copy();
    z.narrow(1, 1, 2).mul_(y);
    z.select(0, 0).add_(y.sum());
    z.t().select(0, 3).mul_(2.0);
    let w = z.sin();
    w.diagonal().sub_(&x.diagonal().square());
    w.sum_dim(&[0], false) * z.select(0, 1)
}

#[test]
fn inplace_on_views_of_intermediates() {
    let inputs = [r(121, &[3, 4]), r(122, &[3, 2])];
    gradcheck("inplace_on_views", Path::Compiled, &inputs, |m, x| Ok(call!(m, inplace_on_views(&x[0], &x[1]))));
}

/// A chain of in-place ops on an intermediate, clamp_ and sigmoid_ included.
#[aot_fn]
fn inplace_chain(x: &Tensor, g: &Tensor) -> Tensor {
    let buf = x * 1.5;
    buf.mul_(g).add_(g).sub_(0.25).div_(&(g.square() + 1.0));
    buf.clamp_(-0.5, 0.5);
    buf.sigmoid_();
    // (neg_ before exp_: exp_ saves its result, which a later write would
    // make eager's backward refuse, as PyTorch's does.)
    let e = g.copy();
    e.neg_().exp_();
    buf * e
}

#[test]
fn inplace_chain_on_intermediate() {
    let inputs = [r(131, &[3, 4]), r(132, &[4])];
    gradcheck("inplace_chain", Path::Compiled, &inputs, |m, x| Ok(call!(m, inplace_chain(&x[0], &x[1]))));
}

/// Slice assignment: `copy_` into a narrow slice and a column of a copy,
/// and into a zero buffer.
#[aot_fn]
fn slice_assign(x: &Tensor, y: &Tensor, c: &Tensor) -> (Tensor, Tensor) {
    let out = x.copy();
    out.narrow(0, 1, 2).copy_(&y.tanh());
    out.select(1, 4).copy_(c);
    let buf = x.zeros_like();
    buf.slice(1, 1, 5, 2).copy_(&(x.slice(1, 0, 4, 2) * y.select(0, 0).narrow(0, 0, 1)));
    (out * x, buf.exp())
}

#[test]
fn slice_assignment() {
    let inputs = [r(141, &[4, 5]), r(142, &[2, 5]), r(143, &[4])];
    gradcheck("slice_assign", Path::Compiled, &inputs, |m, x| Ok(call!(m, slice_assign(&x[0], &x[1], &x[2]))));
}

// ---------------------------------------------------------------------------
// Mutations of inputs that require grad (non-leaves)

/// Data mutations of an input (whole and through a view).
#[aot_fn]
fn mutate_input(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.mul_(b).add_(1.0);
    a.narrow(0, 0, 1).mul_(&b.narrow(0, 1, 1));
    (a * b).sum_dim(&[0], false)
}

#[test]
fn mutation_of_a_non_leaf_input() {
    let inputs = [r(151, &[3, 4]), r(152, &[3, 4])];
    let mask = gradcheck("mutate_input", Path::Compiled, &inputs, |m, x| {
        let mut a = x[0].copy()?;
        let mut outs = call!(m, mutate_input(&mut a, &x[1]));
        outs.push(a);
        Ok(outs)
    });
    assert_eq!(mask, [true, true]);
}

/// A mutated input returned as views: slice assignment into it, then an
/// in-place add, then two views of it.
#[aot_fn]
fn mutate_input_view_outputs(a: &mut Tensor, b: &Tensor) -> (Tensor, Tensor) {
    a.t().select(0, 1).copy_(&b.exp());
    a.add_(&b.unsqueeze(1));
    (a.t(), a.diagonal() * 2.0)
}

#[test]
fn mutation_of_a_non_leaf_input_returned_as_views() {
    let inputs = [r(161, &[3, 4]), r(162, &[3])];
    gradcheck("mutate_input_view_outputs", Path::Compiled, &inputs, |m, x| {
        let mut a = x[0].mul(2.0)?;
        let mut outs = call!(m, mutate_input_view_outputs(&mut a, &x[1]));
        outs.push(a);
        Ok(outs)
    });
}

/// The mutated input is a view of a non-leaf: the gradient reaches the leaf
/// through the base's history (CopySlices).
#[aot_fn]
fn mutate_view_input(a: &mut Tensor, b: &Tensor) -> Tensor {
    a.mul_(&b.sigmoid());
    a.select(1, 0).zero_();
    a.sum_dim(&[1], false)
}

#[test]
fn mutation_of_an_input_that_is_a_view_of_a_non_leaf() {
    let inputs = [r(171, &[4, 3]), r(172, &[2, 3])];
    gradcheck("mutate_view_input", Path::Compiled, &inputs, |m, x| {
        let base = x[0].copy()?;
        let mut a = base.narrow(0, 1, 2)?;
        let mut outs = call!(m, mutate_view_input(&mut a, &x[1]));
        outs.push(base);
        Ok(outs)
    });
}

// ---------------------------------------------------------------------------
// Dropout: the mask is a forward value, drawn as eager draws it

/// Two dropouts (of one value, so they must not be merged) in an MLP
/// layer, and a dropout of an input.
#[aot_fn]
fn dropout_layer(x: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    let h = x.matmul(w);
    let a = h.dropout(0.3).tanh();
    let b = h.dropout(0.5) * 2.0;
    (a + b, x.dropout(0.25))
}

/// The generator is global: tests that seed it take turns.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn dropout_masks() {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let inputs = [r(201, &[4, 5]), r(202, &[5, 3])];
    // Every evaluation draws the same masks: the generator is reseeded.
    gradcheck("dropout_layer", Path::Compiled, &inputs, |m, x| {
        aot_runtime::manual_seed(11);
        Ok(call!(m, dropout_layer(&x[0], &x[1])))
    });
}

/// A compiled training call consumes the generator as eager does: the
/// draws after it are the same.
#[test]
fn dropout_consumes_the_generator_as_eager_does() -> Result<()> {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let x = r(203, &[3, 4]).requires_grad_(true)?;
    let w = r(204, &[4, 2]).requires_grad_(true)?;
    let next_draws = |mode: Mode| -> Result<Vec<f64>> {
        aot_runtime::manual_seed(5);
        let outs = call!(mode, dropout_layer(&x, &w));
        assert!(outs[0].requires_grad());
        Tensor::zeros(&[8], DType::F64, &Device::Cpu)?.rand_like()?.to_vec::<f64>()
    };
    assert_eq!(next_draws(Mode::Compiled)?, next_draws(Mode::Eager)?);
    Ok(())
}

// ---------------------------------------------------------------------------
// Aliased inputs that require grad (PyTorch's synthetic base in training)

/// Two overlapping views of one non-leaf, one mutated, both read after the
/// write, one returned as a view: the joint takes their shared storage as
/// one primal, and the gradient reaches the leaf through their common base.
#[aot_fn]
fn aliased_views(a: &mut Tensor, b: &Tensor, w: &Tensor) -> (Tensor, Tensor) {
    a.mul_(w);
    let s = a.sin().sum_dim(&[0], false) + b * 2.0;
    (s, b.t())
}

#[test]
fn aliased_inputs_that_require_grad() {
    let inputs = [r(191, &[4, 3]), r(192, &[3])];
    gradcheck("aliased_views", Path::Compiled, &inputs, |m, x| {
        let base = x[0].mul(1.0)?;
        let mut a = base.narrow(0, 1, 2)?;
        let b = base.narrow(0, 0, 3)?;
        let mut outs = call!(m, aliased_views(&mut a, &b, &x[1]));
        outs.push(base);
        Ok(outs)
    });
}

/// The base itself and a view of it, both passed, the view written with
/// values that require grad from another leaf, then the base read.
#[aot_fn]
fn base_and_view(x: &mut Tensor, v: &mut Tensor, y: &Tensor) -> (Tensor, Tensor) {
    v.copy_(&(y * 3.0));
    x.add_(1.0);
    (x.square().sum_dim(&[1], false), v.view(&[-1]))
}

#[test]
fn a_base_and_its_view_passed_together() {
    let inputs = [r(193, &[3, 4]), r(194, &[4])];
    gradcheck("base_and_view", Path::Compiled, &inputs, |m, x| {
        let mut base = x[0].mul(1.0)?;
        let mut v = base.select(0, 1)?;
        let mut outs = call!(m, base_and_view(&mut base, &mut v, &x[1]));
        outs.push(base);
        Ok(outs)
    });
}

/// Disjoint slices of one flat parameter buffer (one storage), updated
/// under `no_grad!` and used with grad on: an optimizer over a flat buffer.
#[aot_fn]
fn flat_params(w: &mut Tensor, b: &mut Tensor, gw: &Tensor, x: &Tensor) -> Tensor {
    no_grad! {
        w.sub_(gw * 0.1);
        b.sub_(0.05);
    }
    (x.matmul(w) + b).tanh()
}

#[test]
fn slices_of_one_flat_buffer() {
    // The step's gradient is a constant: what `no_grad!` reads has no
    // analytic gradient, but finite differences would see it.
    let inputs = [r(195, &[8]), r(197, &[2, 3])];
    gradcheck("flat_params", Path::Compiled, &inputs, |m, x| {
        let flat = x[0].mul(1.0)?;
        let mut w = flat.narrow(0, 0, 6)?.view(&[3, 2])?;
        let mut b = flat.narrow(0, 6, 2)?;
        let gw = r(196, &[3, 2]);
        let mut outs = call!(m, flat_params(&mut w, &mut b, &gw, &x[1]));
        outs.push(flat);
        Ok(outs)
    });
}

// ---------------------------------------------------------------------------
// Outputs that alias, outputs that do not require grad

/// Views of an input and of an intermediate, returned, and one output that
/// is not a view (so that the compiled node is visible).
#[aot_fn]
fn view_outputs(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    let z = x * y + 1.0;
    (x.t(), z.view(&[-1]), z.narrow(0, 1, 2), x.select(1, 0).unsqueeze(0), z.exp())
}

#[test]
fn outputs_that_are_views() {
    let inputs = [r(181, &[3, 4]), r(182, &[4])];
    let mask = gradcheck("view_outputs", Path::Compiled, &inputs, |m, x| Ok(call!(m, view_outputs(&x[0], &x[1]))));
    assert_eq!(mask, [true; 5]);
}

/// Several outputs, three of which do not require grad (a detached value,
/// a function of a constant input, a comparison).
#[aot_fn]
fn mixed_outputs(x: &Tensor, c: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let y = x.sigmoid() * c;
    (y, x.detach() * 3.0, c.exp(), x.gt(0.0))
}

#[test]
fn outputs_that_do_not_require_grad() {
    let mask = gradcheck("mixed_outputs", Path::Compiled, &[r(191, &[2, 3])], |m, x| {
        let c = t64(rand_vals(192, 3, 0.5, 1.5), &[3]);
        Ok(call!(m, mixed_outputs(&x[0], &c)))
    });
    assert_eq!(mask, [true, false, false, false]);
}

// ---------------------------------------------------------------------------
// no_grad! mutations of buffers

/// Batch norm in training mode: running statistics updated in place under
/// `no_grad!` while the normalised output requires grad.
#[aot_fn]
fn batch_norm_train(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    running_mean: &mut Tensor,
    running_var: &mut Tensor,
    momentum: f64,
) -> Tensor {
    let mean = x.mean_dim(&[0], false);
    let var = x.var_dim(&[0], 0, false);
    no_grad! {
        running_mean.mul_(1.0 - momentum).add_(mean * momentum);
        running_var.mul_(1.0 - momentum).add_(x.var_dim(&[0], 1, false) * momentum);
    }
    (x - mean) * (var + 1e-5).rsqrt() * gamma + beta
}

#[test]
fn no_grad_buffer_mutation() {
    let inputs = [r(201, &[4, 3]), r(202, &[3]), r(203, &[3])];
    let mask = gradcheck("batch_norm_train", Path::Compiled, &inputs, |m, x| {
        let mut rm = Tensor::zeros(&[3], DType::F64, &Device::Cpu)?;
        let mut rv = Tensor::ones(&[3], DType::F64, &Device::Cpu)?;
        let mut outs = call!(m, batch_norm_train(&x[0], &x[1], &x[2], &mut rm, &mut rv, 0.1));
        outs.push(rm);
        outs.push(rv);
        Ok(outs)
    });
    assert_eq!(mask, [true, false, false]);
}

/// A momentum-like step on a buffer under `no_grad!` (from an input that
/// does not require grad: an update computed from the leaves would be a
/// dependence finite differences see and autograd, rightly, does not), with
/// gradient-carrying outputs computed from the buffer's old and new values.
#[aot_fn]
fn no_grad_step(w: &Tensor, x: &Tensor, buf: &mut Tensor, g: &Tensor) -> (Tensor, Tensor) {
    let y = x.matmul(w);
    let before = (y + buf.select(0, 0)).tanh();
    no_grad! {
        buf.mul_(0.9).add_(&(g * 0.5));
    }
    (before, y * buf)
}

#[test]
fn no_grad_buffer_read_before_and_after() {
    let inputs = [r(211, &[3, 2]), r(212, &[2, 3])];
    let mask = gradcheck("no_grad_step", Path::Compiled, &inputs, |m, x| {
        let mut buf = t64(rand_vals(213, 2, -1.0, 1.0), &[1, 2]);
        let g = t64(rand_vals(214, 2, -1.0, 1.0), &[2]);
        let mut outs = call!(m, no_grad_step(&x[0], &x[1], &mut buf, &g));
        outs.push(buf);
        Ok(outs)
    });
    assert_eq!(mask, [true, true, false]);
}

// ---------------------------------------------------------------------------
// backward twice

/// The second `backward()` through a compiled node is PyTorch's error.
#[test]
fn backward_twice_through_a_compiled_call_is_an_error() -> Result<()> {
    let leaves = [r(1, &[3, 4]), r(2, &[4, 5]), r(3, &[5]), r(4, &[5, 2]), r(5, &[2]), r(6, &[3, 2])]
        .map(|t| t.requires_grad_(true).expect("requires_grad_"));
    let loss = mlp_loss(&leaves[0], &leaves[1], &leaves[2], &leaves[3], &leaves[4], &leaves[5])?;
    assert_eq!(loss.grad_fn_name(), Some("CompiledFunctionBackward"), "the call did not take the compiled training path");
    loss.backward()?;
    let first = leaves[1].grad().expect("w1 got a gradient").to_vec::<f64>()?;
    let err = loss.backward().expect_err("a second backward through a compiled call must fail");
    let msg = err.to_string();
    assert!(msg.contains("second time") && msg.contains("retain_graph"), "unexpected error message: {msg}");
    // The failed backward accumulated nothing.
    assert_eq!(leaves[1].grad().expect("w1 keeps its gradient").to_vec::<f64>()?, first);

    // The eager reference reports the same error.
    let outs = mlp_loss::compiled().run_eager(&leaves.iter().map(Arg::from).collect::<Vec<_>>())?;
    outs[0].backward()?;
    let eager = outs[0].backward().expect_err("a second eager backward must fail").to_string();
    assert!(eager.contains("second time") && eager.contains("retain_graph"), "unexpected eager error message: {eager}");
    Ok(())
}

/// The same with a non-scalar output (backward with an explicit gradient)
/// and a mutated non-leaf input.
#[test]
fn backward_twice_with_explicit_grad_is_an_error() -> Result<()> {
    let x = r(151, &[3, 4]).requires_grad_(true)?;
    let b = r(152, &[3, 4]).requires_grad_(true)?;
    let mut a = x.copy()?;
    let out = mutate_input(&mut a, &b)?;
    assert_eq!(out.grad_fn_name(), Some("CompiledFunctionBackward"), "the call did not take the compiled training path");
    let g = t64(weights(0, 4), &[4]);
    out.backward_with(&g)?;
    assert!(x.grad().is_some() && b.grad().is_some());
    let msg = out.backward_with(&g).expect_err("a second backward through a compiled call must fail").to_string();
    assert!(msg.contains("second time") && msg.contains("retain_graph"), "unexpected error message: {msg}");
    Ok(())
}
