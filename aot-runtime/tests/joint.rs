//! The joint forward+backward graph and its partition, run on the eager
//! kernels, against eager autograd (and finite differences): for each
//! program, functionalize (one single group per tensor), create the joint,
//! partition, run the forward then the backward with random tangents, and
//! compare outputs and input gradients with `run_eager` + `backward()`.

use aot_ir::graph::args::*;
use aot_ir::transform::joint::{create_joint, JointGraph, OutputKind};
use aot_ir::transform::partition::{partition, save_all, Partition};
use aot_ir::transform::{functionalize, FOutput, InputGroups};
use aot_ir::{Graph, GraphBuilder, OpKind as K, ParamType, ReturnKind, ScalarExpr, ScalarValue, ValueId};
use aot_runtime::testing::joint::{run_backward, run_forward, run_joint};
use aot_runtime::{Arg, CompiledFn, DType, Device, Tensor};

enum In {
    /// A tensor and whether it requires grad.
    T(Tensor, bool),
    S(f64),
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, &Device::Cpu, seed).unwrap()
}

fn pos(shape: &[usize], seed: u64) -> Tensor {
    randn(shape, seed).abs().unwrap().add(0.5).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn close(a: &Tensor, b: &Tensor, tol: f64, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes differ");
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtypes differ");
    let tol = if a.dtype() == DType::F64 { tol } else { tol.max(1e-5) };
    for (i, (x, y)) in vals(a).iter().zip(vals(b)).enumerate() {
        let ok = *x == y || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs())) || (x.is_nan() && y.is_nan());
        assert!(ok, "{what}[{i}]: {x} vs {y}");
    }
}

struct Built {
    jg: JointGraph,
    part: Partition,
    naive: Partition,
    groups: InputGroups,
}

fn build(g: &Graph, rg: &[bool]) -> Built {
    aot_ir::verify(g).unwrap();
    let mut next = 0;
    let group_of: Vec<Option<usize>> = g
        .params
        .iter()
        .map(|p| {
            p.ty.is_tensor().then(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    let groups = InputGroups { group_of, single: vec![true; next], object_of: vec![] };
    let fg = functionalize(g, &groups);
    fg.verify().unwrap();
    let jg = create_joint(&fg, g, rg).unwrap_or_else(|e| panic!("{e}\n{}", fg.listing()));
    let part = partition(&jg).unwrap_or_else(|e| panic!("{e}\n{jg}"));
    let naive = save_all(&jg).unwrap();
    Built { jg, part, naive, groups }
}

/// Bytes the tensors keep alive: each distinct storage once.
fn bytes(ts: &[Tensor]) -> usize {
    let mut seen = std::collections::HashSet::new();
    ts.iter().filter(|t| seen.insert(t.storage_id())).map(|t| t.storage_len() * t.dtype().size_in_bytes()).sum()
}

struct Outcome {
    saved: usize,
    saved_naive: usize,
    grads: Vec<Option<Tensor>>,
}

/// Runs the compiled forward/backward and eager autograd; compares them.
fn check(g: &Graph, inputs: &[In]) -> Outcome {
    let rg: Vec<bool> = inputs.iter().map(|i| matches!(i, In::T(_, true))).collect();
    let b = build(g, &rg);
    let scalars: Vec<Option<ScalarValue>> = inputs
        .iter()
        .map(|i| match i {
            In::S(v) => Some(ScalarValue::F64(*v)),
            In::T(..) => None,
        })
        .collect();
    let primals: Vec<Tensor> = inputs
        .iter()
        .filter_map(|i| match i {
            In::T(t, _) => Some(t.copy().unwrap()),
            In::S(_) => None,
        })
        .collect();
    let (outs, saved) =
        run_forward(&b.part, &primals, &scalars, &[]).and_then(|o| o.into_result()).unwrap_or_else(|e| panic!("{e}\n{}", b.jg));
    let tangents: Vec<Tensor> = b.jg.tangents.iter().enumerate().map(|(i, &oi)| randn(&outs[oi].shape(), 1000 + i as u64)).collect();
    let grads = run_backward(&b.part, &saved, &tangents, &[], &scalars, &[]).unwrap_or_else(|e| panic!("{e}\n{}", b.jg));
    // The whole joint and the save-everything partition agree with the partition.
    let (outs_j, grads_j) = run_joint(&b.jg, &primals, &tangents, &scalars, &[]).unwrap();
    let (outs_n, saved_n) = run_forward(&b.naive, &primals, &scalars, &[]).and_then(|o| o.into_result()).unwrap();
    let grads_n = run_backward(&b.naive, &saved_n, &tangents, &[], &scalars, &[]).unwrap();
    for (i, o) in outs.iter().enumerate() {
        close(o, &outs_j[i], 0.0, "joint output");
        close(o, &outs_n[i], 0.0, "naive output");
    }
    for (i, gr) in grads.iter().enumerate() {
        if let (Some(a), Some(j), Some(n)) = (gr, &grads_j[i], &grads_n[i]) {
            close(a, j, 1e-12, "joint grad");
            close(a, n, 1e-12, "naive grad");
        }
    }

    // Eager: leaves (requires_grad as asked), run, loss = sum(out * tangent).
    let leaves: Vec<Option<Tensor>> = inputs
        .iter()
        .map(|i| match i {
            In::T(t, r) => Some(t.copy().unwrap().requires_grad_(*r).unwrap()),
            In::S(_) => None,
        })
        .collect();
    let args: Vec<Arg> = inputs
        .iter()
        .zip(&leaves)
        .map(|(i, l)| match (i, l) {
            (_, Some(t)) => Arg::from(t),
            (In::S(v), None) => Arg::from(*v),
            _ => unreachable!(),
        })
        .collect();
    let cf = CompiledFn::new(g.clone()).unwrap();
    let eager = cf.run_eager(&args).unwrap();
    let param_of_group = |grp: usize| b.groups.group_of.iter().position(|x| *x == Some(grp)).unwrap();
    let eager_of = |k: OutputKind| -> Tensor {
        match k {
            OutputKind::MutatedInput(grp) => leaves[param_of_group(grp)].clone().unwrap(),
            OutputKind::User(i) => eager[i].clone(),
            OutputKind::MetadataMutation(p) => leaves[p].clone().unwrap(),
            OutputKind::IntermediateBase => unreachable!(),
        }
    };
    let mut loss: Option<Tensor> = None;
    for (oi, o) in b.jg.fw_outputs.iter().enumerate() {
        let e = match o.kind {
            OutputKind::IntermediateBase => {
                let i =
                    b.jg.user_outputs
                        .iter()
                        .position(|u| matches!(u, FOutput::ViewOfIntermediate { base, .. } if *base == o.value))
                        .unwrap();
                eager[i].view_base().unwrap()
            }
            k => eager_of(k),
        };
        if !matches!(o.kind, OutputKind::MetadataMutation(_)) {
            close(&outs[oi], &e, 1e-12, &format!("forward output {oi}"));
        }
        if let Some(ti) = o.tangent {
            let term = e.mul(&tangents[ti]).unwrap().sum().unwrap();
            loss = Some(match loss {
                Some(l) => l.add(&term).unwrap(),
                None => term,
            });
        }
    }
    if let Some(l) = loss.filter(Tensor::requires_grad) {
        l.backward().unwrap();
    }
    for (p, l) in leaves.iter().enumerate() {
        let Some(l) = l.as_ref().filter(|_| rg[p]) else {
            assert!(grads[p].is_none(), "param {p} has a gradient but needs none");
            continue;
        };
        match (l.grad(), &grads[p]) {
            (Some(e), Some(c)) => close(c, &e, 1e-10, &format!("grad of param {p}")),
            (None, None) => {}
            (Some(e), None) => assert!(vals(&e).iter().all(|&v| v == 0.0), "param {p}: eager has a gradient, compiled none"),
            (None, Some(c)) => assert!(vals(c).iter().all(|&v| v == 0.0), "param {p}: compiled has a gradient, eager none\n{}", b.jg),
        }
    }
    Outcome { saved: bytes(&saved), saved_naive: bytes(&saved_n), grads }
}

/// Central finite differences of sum(out * tangent) (tangents fixed at 1)
/// against the compiled gradient, for graphs whose outputs are all values.
fn gradcheck(g: &Graph, inputs: &[In]) {
    let rg: Vec<bool> = inputs.iter().map(|i| matches!(i, In::T(_, true))).collect();
    let b = build(g, &rg);
    let scalars: Vec<Option<ScalarValue>> =
        inputs.iter().map(|i| if let In::S(v) = i { Some(ScalarValue::F64(*v)) } else { None }).collect();
    let base: Vec<Vec<f64>> = inputs.iter().filter_map(|i| if let In::T(t, _) = i { Some(vals(t)) } else { None }).collect();
    let shapes: Vec<Vec<usize>> = inputs.iter().filter_map(|i| if let In::T(t, _) = i { Some(t.shape()) } else { None }).collect();
    let f = |vs: &[Vec<f64>]| -> f64 {
        let prims: Vec<Tensor> = vs.iter().zip(&shapes).map(|(v, s)| Tensor::from_vec(v.clone(), s, &Device::Cpu).unwrap()).collect();
        let (outs, _) = run_forward(&b.part, &prims, &scalars, &[]).and_then(|o| o.into_result()).unwrap();
        b.jg.tangents.iter().map(|&oi| vals(&outs[oi]).iter().sum::<f64>()).sum()
    };
    let prims: Vec<Tensor> = base.iter().zip(&shapes).map(|(v, s)| Tensor::from_vec(v.clone(), s, &Device::Cpu).unwrap()).collect();
    let (outs, saved) = run_forward(&b.part, &prims, &scalars, &[]).and_then(|o| o.into_result()).unwrap();
    let tangents: Vec<Tensor> = b.jg.tangents.iter().map(|&oi| outs[oi].ones_like().unwrap()).collect();
    let grads = run_backward(&b.part, &saved, &tangents, &[], &scalars, &[]).unwrap();
    let tensor_params: Vec<usize> = (0..inputs.len()).filter(|&p| matches!(inputs[p], In::T(..))).collect();
    for (k, &p) in tensor_params.iter().enumerate() {
        if !rg[p] {
            continue;
        }
        let gv = grads[p].as_ref().map(vals).unwrap_or_else(|| vec![0.0; base[k].len()]);
        for j in 0..base[k].len() {
            let h = 1e-6;
            let mut plus = base.clone();
            plus[k][j] += h;
            let mut minus = base.clone();
            minus[k][j] -= h;
            let fd = (f(&plus) - f(&minus)) / (2.0 * h);
            assert!((fd - gv[j]).abs() <= 1e-5 * (1.0 + fd.abs()), "param {p}[{j}]: finite difference {fd} vs {}", gv[j]);
        }
    }
}

fn mlp() -> Graph {
    let mut b = GraphBuilder::new("mlp");
    let x = b.tensor("x", false);
    let w = b.tensor("w", false);
    let bias = b.tensor("b", false);
    let y = b.tensor("y", false);
    let h = b.call(K::Matmul, x, vec![t(w)]);
    let h = b.call(K::Add, h, vec![t(bias)]);
    let h = b.call(K::Relu, h, vec![]);
    let ls = b.call(K::LogSoftmax, h, vec![i(1)]);
    let l = b.call(K::Mul, ls, vec![t(y)]);
    let l = b.call(K::Sum, l, vec![]);
    let l = b.call(K::Div, l, vec![f(-8.0)]);
    b.finish(vec![l], ReturnKind::Single)
}

fn mlp_inputs(rg_x: bool) -> Vec<In> {
    let y = Tensor::from_vec((0..8 * 5).map(|k| if k % 5 == k / 5 % 5 { 1.0 } else { 0.0 }).collect::<Vec<f64>>(), &[8, 5], &Device::Cpu)
        .unwrap();
    vec![In::T(randn(&[8, 6], 1), rg_x), In::T(randn(&[6, 5], 2), true), In::T(randn(&[5], 3), true), In::T(y, false)]
}

fn layernorm() -> Graph {
    let mut b = GraphBuilder::new("layernorm");
    let x = b.tensor("x", false);
    let gamma = b.tensor("gamma", false);
    let beta = b.tensor("beta", false);
    let mu = b.call(K::MeanDim, x, vec![ints(&[-1]), aot_ir::graph::args::b(true)]);
    let var = b.call(K::VarDim, x, vec![ints(&[-1]), i(0), aot_ir::graph::args::b(true)]);
    let c = b.call(K::Sub, x, vec![t(mu)]);
    let d = b.call(K::Add, var, vec![f(1e-5)]);
    let d = b.call(K::Sqrt, d, vec![]);
    let xh = b.call(K::Div, c, vec![t(d)]);
    let y = b.call(K::Mul, xh, vec![t(gamma)]);
    let y = b.call(K::Add, y, vec![t(beta)]);
    b.finish(vec![y], ReturnKind::Single)
}

fn ln_inputs() -> Vec<In> {
    vec![In::T(randn(&[4, 7], 4), true), In::T(randn(&[7], 5), true), In::T(randn(&[7], 6), true)]
}

#[test]
fn mlp_layer_matches_eager() {
    check(&mlp(), &mlp_inputs(true));
    check(&mlp(), &mlp_inputs(false));
}

#[test]
fn layernorm_matches_eager() {
    check(&layernorm(), &ln_inputs());
}

#[test]
fn elementwise_chain_matches_eager() {
    let mut b = GraphBuilder::new("chain");
    let x = b.tensor("x", false);
    let y = b.tensor("y", false);
    let p = b.tensor("p", false);
    let mut outs = vec![];
    for op in [K::Exp, K::Sin, K::Cos, K::Tanh, K::Sigmoid, K::Relu, K::Gelu, K::Silu, K::Abs, K::Square, K::Neg] {
        outs.push(b.call(op, x, vec![]));
    }
    for op in [K::Log, K::Sqrt, K::Rsqrt, K::Reciprocal] {
        outs.push(b.call(op, p, vec![]));
    }
    for op in [K::Add, K::Sub, K::Mul, K::Div, K::Maximum, K::Minimum] {
        outs.push(b.call(op, x, vec![t(y)]));
        outs.push(b.call(op, x, vec![f(0.3)]));
    }
    outs.push(b.call(K::Pow, p, vec![t(y)]));
    outs.push(b.call(K::Pow, x, vec![f(3.0)]));
    outs.push(b.call(K::Pow, p, vec![f(0.0)]));
    let c = b.call(K::Gt, x, vec![t(y)]);
    outs.push(b.call(K::Where, x, vec![t(c), t(y)]));
    outs.push(b.call(K::Where, x, vec![t(c), f(2.0)]));
    let e = b.call(K::Mul, x, vec![t(y)]);
    let e2 = b.call(K::Exp, e, vec![]);
    let e3 = b.call(K::Mul, e2, vec![t(x)]);
    let e4 = b.call(K::Tanh, e3, vec![]);
    outs.push(b.call(K::Add, e4, vec![t(p)]));
    let n = outs.len();
    let g = b.finish(outs, ReturnKind::Tuple(n));
    let inputs = || vec![In::T(randn(&[3, 4], 7), true), In::T(randn(&[3, 4], 8), true), In::T(pos(&[3, 4], 9), true)];
    check(&g, &inputs());
    gradcheck(&g, &inputs());
}

#[test]
fn broadcasting_matches_eager() {
    let mut b = GraphBuilder::new("bcast");
    let x = b.tensor("x", false);
    let y = b.tensor("y", false);
    let z = b.tensor("z", false);
    let a = b.call(K::Mul, y, vec![t(z)]);
    let s = b.call(K::Add, x, vec![t(a)]);
    let d = b.call(K::Div, s, vec![t(z)]);
    let m = b.call(K::Maximum, d, vec![t(y)]);
    let c = b.call(K::Lt, x, vec![f(0.0)]);
    let w = b.call(K::Where, m, vec![t(c), t(z)]);
    let g = b.finish(vec![w], ReturnKind::Single);
    let inputs = || vec![In::T(randn(&[3, 1, 4], 10), true), In::T(randn(&[2, 1], 11), true), In::T(pos(&[4], 12), true)];
    check(&g, &inputs());
    gradcheck(&g, &inputs());
}

#[test]
fn reductions_and_softmax_match_eager() {
    let mut b = GraphBuilder::new("reduce");
    let x = b.tensor("x", false);
    let mut outs = vec![b.call(K::Sum, x, vec![]), b.call(K::Mean, x, vec![])];
    for keep in [false, true] {
        let kb = aot_ir::graph::args::b(keep);
        outs.push(b.call(K::SumDim, x, vec![ints(&[0, 2]), kb.clone()]));
        outs.push(b.call(K::MeanDim, x, vec![ints(&[-1]), kb.clone()]));
        outs.push(b.call(K::AmaxDim, x, vec![ints(&[1]), kb.clone()]));
        outs.push(b.call(K::VarDim, x, vec![ints(&[1, 2]), i(1), kb]));
    }
    outs.push(b.call(K::Softmax, x, vec![i(1)]));
    outs.push(b.call(K::LogSoftmax, x, vec![i(-1)]));
    let n = outs.len();
    let g = b.finish(outs, ReturnKind::Tuple(n));
    let inputs = || vec![In::T(randn(&[2, 3, 4], 13), true)];
    check(&g, &inputs());
    gradcheck(&g, &inputs());
}

#[test]
fn matmul_forms_match_eager() {
    let mut b = GraphBuilder::new("mm");
    let v = b.tensor("v", false);
    let a = b.tensor("a", false);
    let c = b.tensor("c", false);
    let d = b.tensor("d", false);
    let o1 = b.call(K::Matmul, v, vec![t(a)]);
    let o2 = b.call(K::Matmul, c, vec![t(a)]);
    let o3 = b.call(K::Matmul, a, vec![t(v)]);
    let at = b.call(K::T, a, vec![]);
    let o4 = b.call(K::Mm, at, vec![t(at)]);
    let o5 = b.call(K::Bmm, c, vec![t(d)]);
    let g = b.finish(vec![o1, o2, o3, o4, o5], ReturnKind::Tuple(5));
    let inputs = || {
        vec![
            In::T(randn(&[3], 14), true),
            In::T(randn(&[3, 3], 15), true),
            In::T(randn(&[2, 4, 3], 16), true),
            In::T(randn(&[2, 3, 2], 17), true),
        ]
    };
    check(&g, &inputs());
    gradcheck(&g, &inputs());
}

#[test]
fn views_match_eager() {
    let inputs = || vec![In::T(randn(&[3, 4], 18), true)];
    check(&views(true), &inputs());
    // finite differences see through detach, so check without it
    gradcheck(&views(false), &inputs());
}

fn views(with_detach: bool) -> Graph {
    let mut b = GraphBuilder::new("views");
    let x = b.tensor("x", false);
    let e = b.call(K::Exp, x, vec![]);
    let mut outs = vec![
        b.call(K::T, e, vec![]),
        b.call(K::Transpose, e, vec![i(0), i(1)]),
        b.call(K::Permute, e, vec![ints(&[1, -2])]),
        b.call(K::View, e, vec![ints(&[-1])]),
        b.call(K::Reshape, e, vec![ints(&[4, 3])]),
        b.call(K::Select, e, vec![i(1), i(-1)]),
        b.call(K::Slice, e, vec![i(1), i(0), i(4), i(2)]),
        b.call(K::Narrow, e, vec![i(0), i(1), i(2)]),
        b.call(K::Diagonal, e, vec![]),
        b.call(K::AsStrided, e, vec![ints(&[2, 2]), ints(&[1, 2]), i(1)]),
        b.call(K::Contiguous, e, vec![]),
        b.call(K::Copy, e, vec![]),
    ];
    let u = b.call(K::Unsqueeze, x, vec![i(1)]);
    let ex = b.call(K::Expand, u, vec![ints(&[3, 2, 4])]);
    outs.push(b.call(K::Mul, ex, vec![f(2.0)]));
    let sq = b.call(K::Squeeze, u, vec![i(1)]);
    outs.push(b.call(K::Sin, sq, vec![]));
    if with_detach {
        let det = b.call(K::Detach, x, vec![]);
        outs.push(b.call(K::Mul, det, vec![t(x)]));
    }
    let n = outs.len();
    b.finish(outs, ReturnKind::Tuple(n))
}

#[test]
fn mutations_of_intermediates_match_eager() {
    let mut b = GraphBuilder::new("mut");
    let x = b.tensor("x", false);
    let y = b.tensor("y", false);
    // relu_, sigmoid_ and exp_ save their results: each is the last write
    // to its storage (a later one fails the backward, as in PyTorch).
    let a = b.call(K::Mul, x, vec![f(2.0)]);
    let rows = b.call(K::Narrow, a, vec![i(0), i(1), i(2)]);
    b.call(K::MulInplace, rows, vec![t(y)]);
    let col = b.call(K::Select, a, vec![i(1), i(2)]);
    b.call(K::AddInplace, col, vec![f(1.0)]);
    let at = b.call(K::T, a, vec![]);
    b.call(K::DivInplace, at, vec![f(3.0)]);
    b.call(K::SigmoidInplace, a, vec![]);
    let d = b.call(K::Mul, x, vec![f(3.0)]);
    let r0 = b.call(K::Select, d, vec![i(0), i(0)]);
    b.call(K::ReluInplace, r0, vec![]);
    let c = b.call(K::Copy, x, vec![]);
    let cr = b.call(K::Select, c, vec![i(1), i(2)]);
    b.call(K::CopyInplace, cr, vec![t(col)]);
    let cn = b.call(K::Narrow, c, vec![i(1), i(0), i(1)]);
    b.call(K::Zero, cn, vec![]);
    b.call(K::Clamp, c, vec![f(-0.5), f(0.5)]);
    b.call(K::NegInplace, c, vec![]);
    b.call(K::SubInplace, c, vec![t(a)]);
    b.call(K::ExpInplace, c, vec![]);
    let s = b.call(K::Mul, a, vec![t(c)]);
    let s = b.call(K::Add, s, vec![t(d)]);
    let g = b.finish(vec![s, at, rows], ReturnKind::Tuple(3));
    let inputs = || vec![In::T(randn(&[3, 4], 19), true), In::T(randn(&[2, 4], 20), true)];
    check(&g, &inputs());
    gradcheck(&g, &inputs());
}

#[test]
fn metadata_mutations_match_eager() {
    let mut b = GraphBuilder::new("meta");
    let x = b.tensor("x", true);
    let y = b.tensor("y", false);
    b.call(K::TInplace, x, vec![]);
    let m = b.call(K::Mul, y, vec![f(2.0)]);
    b.call(K::TransposeInplace, m, vec![i(0), i(1)]);
    b.call(K::MulInplace, m, vec![t(x)]);
    b.call(K::UnsqueezeInplace, m, vec![i(0)]);
    let o = b.call(K::Tanh, m, vec![]);
    let g = b.finish(vec![o, x], ReturnKind::Tuple(2));
    check(&g, &[In::T(randn(&[3, 4], 30), false), In::T(randn(&[3, 4], 31), true)]);
}

#[test]
fn f32_mlp_matches_eager() {
    let inputs: Vec<In> = mlp_inputs(true)
        .into_iter()
        .map(|i| match i {
            In::T(t, r) => In::T(t.to_dtype(DType::F32).unwrap(), r),
            s => s,
        })
        .collect();
    let out = check(&mlp(), &inputs);
    assert!(out.grads[1].as_ref().is_some_and(|g| g.dtype() == DType::F32));
}

#[test]
fn mutations_of_inputs_match_eager() {
    // buf does not require grad; it is written with values that do.
    let mut b = GraphBuilder::new("inmut");
    let buf = b.tensor("buf", true);
    let y = b.tensor("y", false);
    let x = b.tensor("x", false);
    let part = b.call(K::Narrow, buf, vec![i(0), i(1), i(2)]);
    b.call(K::CopyInplace, part, vec![t(y)]);
    let r = b.call(K::Select, buf, vec![i(0), i(0)]);
    b.call(K::AddInplace, r, vec![t(x)]);
    let o = b.call(K::Mul, buf, vec![t(x)]);
    let g = b.finish(vec![o, part], ReturnKind::Tuple(2));
    check(&g, &[In::T(randn(&[3, 4], 21), false), In::T(randn(&[2, 4], 22), true), In::T(randn(&[4], 23), true)]);
}

#[test]
fn no_grad_update_then_use_matches_eager() {
    // An SGD step on a leaf under no_grad, then a use of the updated leaf.
    let mut b = GraphBuilder::new("sgd");
    let w = b.tensor("w", true);
    let gr = b.tensor("g", false);
    let x = b.tensor("x", false);
    let lr = b.scalar("lr", ParamType::F64);
    let prev = b.set_no_grad(true);
    let step = b.call(K::Mul, gr, vec![aot_ir::Arg::Scalar(lr)]);
    b.call(K::SubInplace, w, vec![t(step)]);
    b.set_no_grad(prev);
    let o = b.call(K::Matmul, x, vec![t(w)]);
    let o = b.call(K::Relu, o, vec![]);
    let g = b.finish(vec![o], ReturnKind::Single);
    check(&g, &[In::T(randn(&[4, 3], 24), true), In::T(randn(&[4, 3], 25), false), In::T(randn(&[2, 4], 26), true), In::S(0.1)]);
}

#[test]
fn outputs_aliasing_intermediates_get_their_base_tangent() {
    let mut b = GraphBuilder::new("alias_out");
    let x = b.tensor("x", false);
    let e = b.call(K::Exp, x, vec![]);
    let v = b.call(K::View, e, vec![ints(&[-1])]);
    let r = b.call(K::Select, e, vec![i(0), i(1)]);
    let g = b.finish(vec![v, r], ReturnKind::Tuple(2));
    let out = check(&g, &[In::T(randn(&[2, 3], 27), true)]);
    assert!(out.grads[0].is_some());
}

#[test]
fn inputs_without_gradients_get_none() {
    let mut b = GraphBuilder::new("none");
    let x = b.tensor("x", false);
    let y = b.tensor("y", false);
    let c = b.call(K::Gt, x, vec![f(0.0)]);
    let o = b.call(K::Where, y, vec![t(c), f(1.0)]);
    let g = b.finish(vec![o], ReturnKind::Single);
    let bt = build(&g, &[true, true]);
    assert!(bt.jg.input_grads[0].is_none());
    assert!(bt.jg.input_grads[1].is_some());
    check(&g, &[In::T(randn(&[5], 28), true), In::T(randn(&[5], 29), true)]);
}

#[test]
fn joint_listing_is_stable() {
    let mut b = GraphBuilder::new("f");
    let x = b.tensor("x", false);
    let lr = b.scalar("lr", ParamType::F64);
    let e = b.call(K::Mul, x, vec![aot_ir::Arg::Scalar(ScalarExpr::Param(1))]);
    let _ = lr;
    let r = b.call(K::Relu, e, vec![]);
    let g = b.finish(vec![r], ReturnKind::Single);
    let bt = build(&g, &[true, false]);
    let text = bt.jg.listing();
    assert_eq!(
        text,
        "joint f {\n    %0 = primal(group 0)\n    %1 = mul(%0, lr)\n    %2 = relu(%1)\n    %3* = tangent(0)\n    \
         %4 = gt(%2, 0.0)\n    %5* = cast_like(%4, %3)\n    %6* = mul(%3, %5)\n    %7* = mul(%6, lr)\n    \
         %8* = cast_like(%7, %0)\n    forward (out 0: %2 ~ tangent 0)\n    grads (x: %8)\n}"
    );
    // relu's mask is saved as a Bool; of x only its dtype is needed (a
    // one-element stand-in, value 9).
    assert_eq!(bt.part.saved, vec![ValueId(4), ValueId(9)]);
}

/// Saves are priced with the kernel stage's fusion (PyTorch's min-cut
/// weights): in `relu(x @ w1 + b) @ w2` the relu's output, which the second
/// matmul reads anyway, is saved, not the sum, which the forward then
/// fuses into the relu; and the backward recomputes nothing.
#[test]
fn a_layer_saves_its_activation_not_the_sum_before_it() {
    let mut b = GraphBuilder::new("layer");
    let x = b.tensor("x", false);
    let w1 = b.tensor("w1", false);
    let bias = b.tensor("b", false);
    let w2 = b.tensor("w2", false);
    let h = b.call(K::Matmul, x, vec![t(w1)]);
    let h = b.call(K::Add, h, vec![t(bias)]);
    let r = b.call(K::Relu, h, vec![]);
    let o = b.call(K::Matmul, r, vec![t(w2)]);
    let l = b.call(K::Sum, o, vec![]);
    let g = b.finish(vec![l], ReturnKind::Single);
    let bt = build(&g, &[false, true, true, true]);
    let fw_value = |k: K| bt.jg.nodes.iter().find(|n| n.kind() == Some(k) && !bt.jg.is_backward[n.value().index()]).map(|n| n.value());
    let (sum, act) = (fw_value(K::Add).unwrap(), fw_value(K::Relu).unwrap());
    let listing = bt.part.listing(&bt.jg);
    assert!(bt.part.saved.contains(&act) && !bt.part.saved.contains(&sum), "{listing}");
    assert!(bt.part.backward.nodes.iter().all(|n| n.kind() != Some(K::Relu)), "the backward recomputes the relu:\n{listing}");
    let inputs =
        [In::T(randn(&[4, 3], 1), false), In::T(randn(&[3, 5], 2), true), In::T(randn(&[5], 3), true), In::T(randn(&[5, 2], 4), true)];
    check(&g, &inputs);
}

#[test]
fn saved_bytes_of_the_partition_are_at_most_the_naive_ones() {
    for (name, g, inputs) in [("mlp", mlp(), mlp_inputs(true)), ("layernorm", layernorm(), ln_inputs())] {
        let out = check(&g, &inputs);
        let b = build(&g, &inputs.iter().map(|i| matches!(i, In::T(_, true))).collect::<Vec<_>>());
        let every: usize = {
            // "save every intermediate": every forward value the backward could read.
            let prims: Vec<Tensor> =
                inputs.iter().filter_map(|i| if let In::T(t, _) = i { Some(t.copy().unwrap()) } else { None }).collect();
            let scalars = vec![None; inputs.len()];
            let all_fw: Vec<ValueId> = b.jg.nodes.iter().map(|n| n.value()).filter(|v| !b.jg.is_backward[v.index()]).collect();
            let mut sg = b.part.forward.clone();
            sg.nodes =
                b.jg.nodes
                    .iter()
                    .filter(|n| !b.jg.is_backward[n.value().index()] && !matches!(n.op, aot_ir::Op::Primal(_)))
                    .cloned()
                    .collect();
            sg.outputs = all_fw;
            let ts = aot_runtime::testing::joint::run_subgraph(&sg, b.jg.num_values, &prims, &scalars, &[])
                .and_then(|o| o.into_result())
                .unwrap();
            bytes(&ts)
        };
        println!(
            "{name}: partition saves {} values, {} bytes; save-all saves {} values, {} bytes; every forward value: {} bytes",
            b.part.saved.len(),
            out.saved,
            b.naive.saved.len(),
            out.saved_naive,
            every
        );
        println!("{}", b.part.listing(&b.jg));
        assert!(out.saved <= out.saved_naive, "{name}: {} > {}", out.saved, out.saved_naive);
    }
}

/// Small random programs (elementwise ops, views, in-place ops on views of
/// intermediates, reductions) against eager autograd.
#[test]
fn random_programs_match_eager() {
    for seed in 0..40u64 {
        let mut r = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = |n: u64| {
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (r >> 33) % n
        };
        let mut b = GraphBuilder::new("rand");
        let x = b.tensor("x", false);
        let y = b.tensor("y", false);
        // every value is [3, 4]
        let mut pool = vec![x, y];
        let mut outs = vec![];
        for _ in 0..6 {
            let a = pool[next(pool.len() as u64) as usize];
            let c = pool[next(pool.len() as u64) as usize];
            let v = match next(9) {
                0 => b.call([K::Tanh, K::Sin, K::Sigmoid, K::Square, K::Neg, K::Gelu][next(6) as usize], a, vec![]),
                1 => b.call([K::Add, K::Sub, K::Mul, K::Maximum, K::Minimum][next(5) as usize], a, vec![t(c)]),
                2 => b.call([K::Add, K::Mul, K::Div][next(3) as usize], a, vec![f(0.7)]),
                3 => {
                    let tt = b.call(K::T, a, vec![]);
                    let e = b.call(K::Sin, tt, vec![]);
                    b.call(K::T, e, vec![])
                }
                4 => {
                    let m = b.call(K::Mul, a, vec![f(1.5)]);
                    let v = b.call(K::Narrow, m, vec![i(1), i(next(3) as i64), i(1)]);
                    let cn = b.call(K::Narrow, c, vec![i(1), i(next(4) as i64), i(1)]);
                    b.call([K::MulInplace, K::AddInplace, K::SubInplace][next(3) as usize], v, vec![t(cn)]);
                    m
                }
                5 => {
                    let m = b.call(K::Add, a, vec![f(0.0)]);
                    let row = b.call(K::Select, m, vec![i(0), i(next(3) as i64)]);
                    b.call([K::ReluInplace, K::SigmoidInplace, K::NegInplace][next(3) as usize], row, vec![]);
                    m
                }
                6 => {
                    let s = b.call(K::SumDim, a, vec![ints(&[1]), aot_ir::graph::args::b(true)]);
                    b.call(K::Mul, c, vec![t(s)])
                }
                7 => {
                    let sm = b.call(K::Softmax, a, vec![i(next(2) as i64)]);
                    b.call(K::Mul, sm, vec![t(c)])
                }
                _ => {
                    let m = b.call(K::Copy, a, vec![]);
                    let d = b.call(K::Diagonal, m, vec![]);
                    let src = b.call(K::Select, c, vec![i(0), i(0)]);
                    let src = b.call(K::Narrow, src, vec![i(0), i(0), i(3)]);
                    b.call(K::CopyInplace, d, vec![t(src)]);
                    m
                }
            };
            pool.push(v);
            if next(3) == 0 {
                outs.push(v);
            }
        }
        outs.push(*pool.last().unwrap());
        let n = outs.len();
        let g = b.finish(outs, ReturnKind::Tuple(n));
        let rg_y = next(2) == 0;
        check(&g, &[In::T(randn(&[3, 4], 100 + seed), true), In::T(randn(&[3, 4], 200 + seed), rg_y)]);
    }
}
