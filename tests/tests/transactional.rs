//! Transactional calls: an error injected at any op position of a mutating
//! function leaves every input bit-identical (values, the whole storage,
//! shape, stride, storage offset, version counter, autograd flags).
//!
//! Each function below mutates its inputs in several ways (in-place ops on
//! inputs, on views of inputs, on intermediates copied back, metadata
//! mutations), and is called with several alias patterns (independent
//! arguments, the same tensor twice, overlapping and disjoint views of one
//! base, non-contiguous and offset inputs). For every node position `k` a
//! variant of the function gets a failing op inserted before node `k` (or
//! after the last node), on a value live at that point; its result is
//! returned, so no dead-code elimination can drop it. The call must fail,
//! name the function and the failing op, and change nothing.
//!
//! Compiled execution applies input mutations in an epilogue that runs only
//! after every kernel succeeded, so this holds there. Training calls that
//! run the eager reference (functions the joint graph does not cover yet)
//! first dry-run the function on copies of the arguments, so an op that
//! fails on them fails before anything is written. The sanity test checks
//! that the functions run, that every injected failure is an error naming
//! the function and the op, and that a failure before the first node
//! changes nothing.

use aot_ir::graph::args::{f, i, ints, t};
use aot_ir::{Arg as IrArg, Graph, GraphBuilder, OpKind, ParamType, ReturnKind, ValueId};
use aot_runtime::{CompiledFn, DType};
use aot_tests::alias::{ArgSpec, ArgTemplate, GradState, StorageSpec};
use aot_tests::snapshot::{snapshot_all, TensorSnapshot};

/// The ops injected to fail, in turn: each names itself in its error.
const FAILING_OPS: [&str; 3] = ["view", "select", "expand"];

/// Builds a function, inserting a failing op before node `fail_at`.
struct Fb {
    b: GraphBuilder,
    fail_at: Option<usize>,
    nodes: usize,
    first_param: Option<ValueId>,
    failing: Option<(ValueId, &'static str)>,
}

impl Fb {
    fn new(name: &str, fail_at: Option<usize>) -> Fb {
        Fb { b: GraphBuilder::new(name), fail_at, nodes: 0, first_param: None, failing: None }
    }

    fn tensor(&mut self, name: &str, mutable: bool) -> ValueId {
        let v = self.b.tensor(name, mutable);
        self.first_param.get_or_insert(v);
        v
    }

    fn scalar(&mut self, name: &str) -> IrArg {
        IrArg::Scalar(self.b.scalar(name, ParamType::F64))
    }

    /// A failing op on `v`: a view to a size no tensor here has, a select
    /// far out of range, or an expand to a negative size (refused whatever
    /// the rank).
    fn inject(&mut self, v: ValueId) {
        let k = self.fail_at.unwrap_or(0) % FAILING_OPS.len();
        let out = match k {
            0 => self.b.call(OpKind::View, v, vec![ints(&[1_000_003])]),
            1 => self.b.call(OpKind::Select, v, vec![i(0), i(1_000_003)]),
            _ => self.b.call(OpKind::Expand, v, vec![ints(&[-2])]),
        };
        self.failing = Some((out, FAILING_OPS[k]));
    }

    fn call(&mut self, op: OpKind, recv: ValueId, rest: Vec<IrArg>) -> ValueId {
        if self.fail_at == Some(self.nodes) {
            self.inject(recv);
        }
        self.nodes += 1;
        self.b.call(op, recv, rest)
    }

    fn no_grad(&mut self, on: bool) {
        self.b.set_no_grad(on);
    }

    /// The graph, returning `outs` and then the failing op's result. Also
    /// returns the number of nodes of the function without the failure.
    fn finish(mut self, outs: Vec<ValueId>) -> (Graph, usize, Option<&'static str>) {
        if self.failing.is_none() && self.fail_at.is_some() {
            let on = outs.first().copied().or(self.first_param).unwrap_or(ValueId(0));
            self.b.set_no_grad(false);
            self.inject(on);
        }
        let mut outs = outs;
        if let Some((v, _)) = self.failing {
            outs.push(v);
        }
        let ret = match outs.len() {
            0 => ReturnKind::Unit,
            1 => ReturnKind::Single,
            n => ReturnKind::Tuple(n),
        };
        let op = self.failing.map(|(_, op)| op);
        (self.b.finish(outs, ret), self.nodes, op)
    }
}

/// One mutating function and the alias patterns it is called with.
struct Case {
    name: &'static str,
    build: fn(&mut Fb) -> Vec<ValueId>,
    patterns: Vec<ArgTemplate>,
}

fn st(len: usize, base_shape: Option<&[usize]>, seed: usize) -> StorageSpec {
    StorageSpec { len, base_shape: base_shape.map(<[usize]>::to_vec), requires_grad: false, seed, state: GradState::Plain, dtype: None }
}

fn view(storage: usize, size: &[usize], stride: &[usize], offset: usize) -> ArgSpec {
    ArgSpec::View { storage, size: size.to_vec(), stride: stride.to_vec(), offset }
}

fn tpl(dtype: DType, storages: Vec<StorageSpec>, args: Vec<ArgSpec>) -> ArgTemplate {
    ArgTemplate { dtype, storages, args }
}

fn cases() -> Vec<Case> {
    use DType::{F32, F64};
    vec![
        // w.sub_(g * lr); w.mul_(0.9); (w.sum(), w)
        Case {
            name: "sgd_step",
            build: |fb| {
                let w = fb.tensor("w", true);
                let g = fb.tensor("g", false);
                let lr = fb.scalar("lr");
                let step = fb.call(OpKind::Mul, g, vec![lr]);
                fb.call(OpKind::SubInplace, w, vec![t(step)]);
                fb.call(OpKind::MulInplace, w, vec![f(0.9)]);
                let s = fb.call(OpKind::Sum, w, vec![]);
                vec![s, w]
            },
            patterns: vec![
                tpl(
                    F32,
                    vec![st(6, Some(&[2, 3]), 0), st(6, Some(&[2, 3]), 1)],
                    vec![ArgSpec::Base(0), ArgSpec::Base(1), ArgSpec::Scalar(0.1)],
                ),
                // g overlaps w (shifted by one row)
                tpl(F64, vec![st(9, None, 0)], vec![view(0, &[2, 3], &[3, 1], 0), view(0, &[2, 3], &[3, 1], 3), ArgSpec::Scalar(0.5)]),
                // g is w
                tpl(F64, vec![st(6, Some(&[2, 3]), 0)], vec![ArgSpec::Base(0), ArgSpec::Same(0), ArgSpec::Scalar(0.5)]),
            ],
        },
        // r = a.select(0, 1); r.fill_(3); c = a.transpose(0, 1); c.add_(1); a.unsqueeze_(0); (a, r)
        Case {
            name: "views_of_an_input",
            build: |fb| {
                let a = fb.tensor("a", true);
                let r = fb.call(OpKind::Select, a, vec![i(0), i(1)]);
                fb.call(OpKind::Fill, r, vec![f(3.0)]);
                let c = fb.call(OpKind::Transpose, a, vec![i(0), i(1)]);
                fb.call(OpKind::AddInplace, c, vec![f(1.0)]);
                fb.call(OpKind::UnsqueezeInplace, a, vec![i(0)]);
                vec![a, r]
            },
            patterns: vec![
                tpl(F32, vec![st(9, Some(&[3, 3]), 0)], vec![ArgSpec::Base(0)]),
                // transposed, with an offset
                tpl(F64, vec![st(11, None, 0)], vec![view(0, &[3, 3], &[1, 3], 2)]),
                // padded rows
                tpl(F64, vec![st(16, None, 0)], vec![view(0, &[3, 3], &[5, 1], 1)]),
            ],
        },
        // a.mul_(2); b.add_(a); a.t_(); b.neg_(); (a + b.t())
        Case {
            name: "two_aliased_inputs",
            build: |fb| {
                let a = fb.tensor("a", true);
                let b = fb.tensor("b", true);
                fb.call(OpKind::MulInplace, a, vec![f(2.0)]);
                fb.call(OpKind::AddInplace, b, vec![t(a)]);
                fb.call(OpKind::TInplace, a, vec![]);
                fb.call(OpKind::NegInplace, b, vec![]);
                let bt = fb.call(OpKind::T, b, vec![]);
                let s = fb.call(OpKind::Add, a, vec![t(bt)]);
                vec![s]
            },
            patterns: vec![
                tpl(F64, vec![st(4, Some(&[2, 2]), 0), st(4, Some(&[2, 2]), 1)], vec![ArgSpec::Base(0), ArgSpec::Base(1)]),
                tpl(F64, vec![st(4, Some(&[2, 2]), 0)], vec![ArgSpec::Base(0), ArgSpec::Same(0)]),
                // disjoint halves of one storage
                tpl(F32, vec![st(8, Some(&[8]), 0)], vec![view(0, &[2, 2], &[2, 1], 0), view(0, &[2, 2], &[2, 1], 4)]),
                // two views with the same geometry (not the same tensor object)
                tpl(F64, vec![st(6, None, 0)], vec![view(0, &[2, 2], &[2, 1], 1), view(0, &[2, 2], &[2, 1], 1)]),
            ],
        },
        // a.as_strided_([2, 2], [1, 2], 1); a.mul_(3); b.unsqueeze_(0); b.clamp_(-0.5, 0.5); b.squeeze_(0); (a, b)
        Case {
            name: "metadata_then_data",
            build: |fb| {
                let a = fb.tensor("a", true);
                let b = fb.tensor("b", true);
                fb.call(OpKind::AsStridedInplace, a, vec![ints(&[2, 2]), ints(&[1, 2]), i(1)]);
                fb.call(OpKind::MulInplace, a, vec![f(3.0)]);
                fb.call(OpKind::UnsqueezeInplace, b, vec![i(0)]);
                fb.call(OpKind::Clamp, b, vec![f(-0.5), f(0.5)]);
                fb.call(OpKind::SqueezeInplace, b, vec![i(0)]);
                vec![a, b]
            },
            patterns: vec![
                tpl(F64, vec![st(6, Some(&[6]), 0), st(3, Some(&[3]), 1)], vec![ArgSpec::Base(0), ArgSpec::Base(1)]),
                // b is the tail of a's storage
                tpl(F64, vec![st(8, Some(&[8]), 0)], vec![ArgSpec::Base(0), view(0, &[3], &[1], 5)]),
                // b overlaps a's strided window
                tpl(F32, vec![st(8, Some(&[8]), 0)], vec![ArgSpec::Base(0), view(0, &[3], &[2], 1)]),
            ],
        },
        // tmp = a.copy(); tmp.add_(1); v = tmp.narrow(0, 0, 1); v.zero_(); a.copy_(tmp); b.transpose_(0, 1); b.exp_(); (v, b)
        Case {
            name: "intermediate_copied_back",
            build: |fb| {
                let a = fb.tensor("a", true);
                let b = fb.tensor("b", true);
                let tmp = fb.call(OpKind::Copy, a, vec![]);
                fb.call(OpKind::AddInplace, tmp, vec![f(1.0)]);
                let v = fb.call(OpKind::Narrow, tmp, vec![i(0), i(0), i(1)]);
                fb.call(OpKind::Zero, v, vec![]);
                fb.call(OpKind::CopyInplace, a, vec![t(tmp)]);
                fb.call(OpKind::TransposeInplace, b, vec![i(0), i(1)]);
                fb.call(OpKind::ExpInplace, b, vec![]);
                vec![v, b]
            },
            patterns: vec![
                tpl(F32, vec![st(6, Some(&[2, 3]), 0), st(6, Some(&[3, 2]), 1)], vec![ArgSpec::Base(0), ArgSpec::Base(1)]),
                // a is a transposed view, b a view of the same storage
                tpl(F64, vec![st(12, None, 0)], vec![view(0, &[2, 3], &[1, 2], 0), view(0, &[3, 2], &[2, 1], 6)]),
            ],
        },
        // no_grad { a.mul_(0.5); a.t_() }; y = a * 2; (y,) -- a is a leaf that requires grad
        Case {
            name: "no_grad_update_of_a_leaf",
            build: |fb| {
                let a = fb.tensor("a", true);
                fb.no_grad(true);
                fb.call(OpKind::MulInplace, a, vec![f(0.5)]);
                fb.call(OpKind::TInplace, a, vec![]);
                fb.no_grad(false);
                let y = fb.call(OpKind::Mul, a, vec![f(2.0)]);
                vec![y]
            },
            patterns: vec![tpl(
                F64,
                vec![StorageSpec {
                    len: 6,
                    base_shape: Some(vec![2, 3]),
                    requires_grad: true,
                    seed: 0,
                    state: GradState::Plain,
                    dtype: None,
                }],
                vec![ArgSpec::Base(0)],
            )],
        },
    ]
}

/// What went wrong for one function, pattern and position; empty when fine.
fn check(case: &Case, p: usize, fail_at: usize, inputs_unchanged: bool) -> Vec<String> {
    let mut fb = Fb::new(case.name, Some(fail_at));
    let outs = (case.build)(&mut fb);
    let (graph, _, op) = fb.finish(outs);
    let op = op.unwrap_or("?");
    let listing = graph.to_string();
    let ctx = format!("`{}` with pattern {p}, failing `{op}` at position {fail_at}", case.name);
    let f = match CompiledFn::new(graph) {
        Ok(f) => f,
        Err(e) => return vec![format!("{ctx}: CompiledFn::new failed: {e}\n{listing}")],
    };
    let m = match case.patterns[p].materialise() {
        Ok(m) => m,
        Err(e) => return vec![format!("{ctx}: materialising failed: {e}")],
    };
    let before = snapshot_all(&m.tensors);
    let mut errs = vec![];
    match f.__call(&m.args()) {
        Ok(_) => errs.push(format!("{ctx}: the call succeeded")),
        Err(e) => {
            let msg = e.to_string();
            if !msg.contains(&format!("`{}`", case.name)) || !msg.contains(op) {
                errs.push(format!("{ctx}: the error does not name the function and the op: {msg}"));
            }
        }
    }
    if inputs_unchanged {
        let after = snapshot_all(&m.tensors);
        for (j, (x, y)) in before.iter().zip(&after).enumerate() {
            if let (Some(x), Some(y)) = (x, y) {
                let d = TensorSnapshot::diff(y, x);
                if !d.is_empty() {
                    errs.push(format!("{ctx}: argument {j} changed: {}", d.join("; ")));
                }
            }
        }
    }
    if !errs.is_empty() {
        errs.push(format!("program:\n{listing}\nalias pattern:\n{}", case.patterns[p]));
    }
    errs
}

/// The number of nodes of a case's function without an injected failure.
fn node_count(case: &Case) -> usize {
    let mut fb = Fb::new(case.name, None);
    let outs = (case.build)(&mut fb);
    fb.finish(outs).1
}

#[test]
fn injected_errors_name_the_function_and_the_op() {
    let mut errs = vec![];
    for case in cases() {
        // The functions themselves run, both ways alike, with every pattern.
        let mut fb = Fb::new(case.name, None);
        let outs = (case.build)(&mut fb);
        let (graph, _, _) = fb.finish(outs);
        let f = CompiledFn::new(graph).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        for (p, tpl) in case.patterns.iter().enumerate() {
            let m = tpl.materialise().unwrap_or_else(|e| panic!("{}: {e}", case.name));
            if let Err(e) = f.__call(&m.args()) {
                errs.push(format!("`{}` with pattern {p} fails without an injected error: {e}", case.name));
            }
        }
        // Every position fails with a message naming the function and the op;
        // a failure before the first node leaves the inputs alone.
        for p in 0..case.patterns.len() {
            for k in 0..=node_count(&case) {
                errs.extend(check(&case, p, k, k == 0));
            }
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n\n"));
}

#[test]
fn an_error_at_any_op_leaves_every_input_bit_identical() {
    let mut errs = vec![];
    let (mut checked, mut failed) = (0, 0);
    for case in cases() {
        for p in 0..case.patterns.len() {
            for k in 0..=node_count(&case) {
                checked += 1;
                let e = check(&case, p, k, true);
                failed += usize::from(!e.is_empty());
                errs.extend(e);
            }
        }
    }
    assert!(errs.is_empty(), "{failed} of {checked} failing calls were not transactional:\n\n{}", errs.join("\n\n"));
}

/// The same check for every inference call (no argument requires grad):
/// compiled execution writes nothing before every op succeeded.
#[test]
fn an_error_at_any_op_of_an_inference_call_leaves_every_input_bit_identical() {
    let mut errs = vec![];
    let mut checked = 0;
    for case in cases() {
        for p in 0..case.patterns.len() {
            let m = case.patterns[p].materialise().unwrap_or_else(|e| panic!("{}: {e}", case.name));
            if m.tensors.iter().flatten().any(|t| t.requires_grad()) {
                continue;
            }
            for k in 0..=node_count(&case) {
                checked += 1;
                errs.extend(check(&case, p, k, true));
            }
        }
    }
    assert!(checked >= 50, "only {checked} inference calls checked");
    assert!(errs.is_empty(), "{}", errs.join("\n\n"));
}
