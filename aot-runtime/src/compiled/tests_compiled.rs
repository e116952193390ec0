//! Compiled execution against the eager reference, on hand-picked alias
//! patterns (the random ones are in the aot-tests crate).

use super::{Arg, CompiledFn};
use crate::{Device, Tensor};
use aot_ir::graph::args::{f, i, ints, t};
use aot_ir::{GraphBuilder, OpKind, ReturnKind};

fn tensor(values: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape, &Device::Cpu).expect("tensor")
}

fn seq(n: usize, shape: &[usize]) -> Tensor {
    tensor(&(0..n).map(|v| v as f32).collect::<Vec<_>>(), shape)
}

/// Deep copies of `args` with the same sharing.
fn deep_copy(args: &[&Tensor]) -> Vec<Tensor> {
    let args: Vec<Arg> = args.iter().map(|t| Arg::from(*t)).collect();
    super::tangents::deep_copy_args(&args).expect("copies").into_iter().map(|t| t.expect("a tensor")).collect()
}

fn state(t: &Tensor) -> (Vec<usize>, Vec<usize>, usize, Vec<f32>) {
    (t.shape(), t.stride(), t.storage_offset(), t.to_vec::<f32>().expect("values"))
}

/// Runs `f` eagerly and compiled on deep copies of `args`; compares outputs,
/// inputs after the call and storage sharing.
fn check(f: &CompiledFn, args: &[&Tensor], scalars: &[Arg]) {
    let (ea, ca) = (deep_copy(args), deep_copy(args));
    fn to_args<'a>(ts: &'a [Tensor], scalars: &[Arg<'a>]) -> Vec<Arg<'a>> {
        let mut v: Vec<Arg> = ts.iter().map(Arg::from).collect();
        v.extend_from_slice(scalars);
        v
    }
    let (eo, co) = (f.run_eager(&to_args(&ea, scalars)), f.__call(&to_args(&ca, scalars)));
    let (eo, co) = match (eo, co) {
        (Ok(e), Ok(c)) => (e, c),
        (Err(e), Err(c)) => {
            assert_eq!(e.to_string(), c.to_string());
            return;
        }
        (e, c) => panic!("eager {e:?} vs compiled {c:?}"),
    };
    for (e, c) in eo.iter().zip(&co) {
        assert_eq!(state(e), state(c));
    }
    for (e, c) in ea.iter().zip(&ca) {
        assert_eq!(state(e), state(c));
    }
    for (k, (e, c)) in eo.iter().zip(&co).enumerate() {
        for (j, (x, y)) in ea.iter().zip(&ca).enumerate() {
            assert_eq!(e.shares_storage_with(x), c.shares_storage_with(y), "output {k} / arg {j} storage");
            assert_eq!(e.same_tensor(x), c.same_tensor(y), "output {k} / arg {j} identity");
        }
        for (m, (x, y)) in eo.iter().zip(&co).enumerate() {
            assert_eq!(e.same_tensor(x), c.same_tensor(y), "outputs {k} / {m} identity");
            assert_eq!(e.shares_storage_with(x), c.shares_storage_with(y), "outputs {k} / {m} storage");
        }
    }
}

/// `a.add_(1); (a + b, a.view(-1))`
fn add_then_read() -> CompiledFn {
    let mut b = GraphBuilder::new("add_then_read");
    let a = b.tensor("a", true);
    let x = b.tensor("b", false);
    b.call(OpKind::AddInplace, a, vec![f(1.0)]);
    let s = b.call(OpKind::Add, a, vec![t(x)]);
    let v = b.call(OpKind::View, a, vec![ints(&[-1])]);
    CompiledFn::new(b.finish(vec![s, v], ReturnKind::Tuple(2))).expect("valid graph")
}

#[test]
fn alternating_alias_patterns_respecialise() {
    // pytorch#139789: a cached specialisation for distinct arguments was
    // reused for a call passing one tensor twice.
    let f = add_then_read();
    let (x, y) = (seq(4, &[2, 2]), seq(4, &[2, 2]));
    for round in 0..3 {
        check(&f, &[&x, &x], &[]);
        check(&f, &[&x, &y], &[]);
        let row0 = x.narrow(0, 0, 1).expect("view");
        let row01 = x.narrow(1, 0, 2).expect("view");
        check(&f, &[&row0, &x.narrow(0, 1, 1).expect("view")], &[]);
        check(&f, &[&row01, &x], &[]);
        assert_eq!(f.num_specializations(), 4, "round {round}");
    }
}

#[test]
fn mutations_through_views_of_inputs_and_intermediates() {
    let mut b = GraphBuilder::new("views");
    let a = b.tensor("a", true);
    let row = b.call(OpKind::Select, a, vec![i(0), i(1)]);
    b.call(OpKind::MulInplace, row, vec![f(3.0)]);
    let m = b.call(OpKind::Mul, a, vec![f(2.0)]);
    let mt = b.call(OpKind::T, m, vec![]);
    let col = b.call(OpKind::Select, mt, vec![i(0), i(0)]);
    b.call(OpKind::Fill, col, vec![f(-1.0)]);
    b.call(OpKind::TInplace, a, vec![]);
    let out = b.call(OpKind::Add, a, vec![f(0.5)]);
    let f_ = CompiledFn::new(b.finish(vec![a, row, m, mt, out], ReturnKind::Tuple(5))).expect("valid graph");
    let x = seq(9, &[3, 3]);
    check(&f_, &[&x], &[]);
    let xt = seq(9, &[3, 3]).t().expect("t");
    check(&f_, &[&xt], &[]);
    let text = f_.functional_listing(&[Arg::from(&x)]).expect("listing");
    assert!(text.contains("scatter(") && text.contains("copy_storage("), "{text}");
}

#[test]
fn a_failing_op_leaves_every_input_untouched() {
    let mut b = GraphBuilder::new("fails_late");
    let a = b.tensor("a", true);
    let x = b.tensor("b", true);
    b.call(OpKind::MulInplace, a, vec![f(2.0)]);
    b.call(OpKind::TInplace, x, vec![]);
    b.call(OpKind::View, a, vec![ints(&[7])]);
    let f_ = CompiledFn::new(b.finish(vec![], ReturnKind::Unit)).expect("valid graph");
    let (p, q) = (seq(4, &[2, 2]), seq(6, &[2, 3]));
    let before = (state(&p), state(&q), p.version());
    let err = f_.__call(&[Arg::from(&p), Arg::from(&q)]).expect_err("bad view").to_string();
    assert!(err.contains("fails_late") && err.contains("view"), "{err}");
    assert_eq!((state(&p), state(&q), p.version()), before);
}

#[test]
fn reshape_that_copies_falls_back_to_the_reference() {
    // The analysis assumes `reshape` of an argument aliases; for a
    // transposed argument it copies, and the mutation must not reach `a`.
    let mut b = GraphBuilder::new("reshape_copy");
    let a = b.tensor("a", true);
    let r = b.call(OpKind::Reshape, a, vec![ints(&[-1])]);
    b.call(OpKind::AddInplace, r, vec![f(1.0)]);
    let f_ = CompiledFn::new(b.finish(vec![r], ReturnKind::Single)).expect("valid graph");
    check(&f_, &[&seq(6, &[2, 3])], &[]);
    check(&f_, &[&seq(6, &[2, 3]).t().expect("t")], &[]);
}

#[test]
fn contiguous_of_a_strided_reshape_copies_before_the_write() {
    let mut b = GraphBuilder::new("strided");
    let a = b.tensor("a", true);
    let r = b.call(OpKind::Reshape, a, vec![ints(&[3, 3])]);
    let c = b.call(OpKind::Contiguous, r, vec![]);
    b.call(OpKind::AddInplace, a, vec![f(0.5)]);
    b.call(OpKind::Fill, c, vec![f(2.0)]);
    let f_ = CompiledFn::new(b.finish(vec![a], ReturnKind::Single)).expect("valid graph");
    let flat = seq(11, &[11]);
    let x = flat.as_strided(&[1, 3, 3], &[12, 4, 1], 0).expect("view");
    check(&f_, &[&x], &[]);
    let y = seq(9, &[1, 3, 3]);
    check(&f_, &[&y], &[]);
    check(&f_, &[&x], &[]);
}

/// `(a * b).sum()`
fn mul_sum() -> CompiledFn {
    let mut b = GraphBuilder::new("mul_sum");
    let a = b.tensor("a", false);
    let x = b.tensor("b", false);
    let m = b.call(OpKind::Mul, a, vec![t(x)]);
    let s = b.call(OpKind::Sum, m, vec![]);
    CompiledFn::new(b.finish(vec![s], ReturnKind::Single)).expect("valid graph")
}

#[test]
fn each_requires_grad_pattern_gets_its_own_specialisation() {
    // DebugAssertWrapper's contract: a plan compiled for one pattern is
    // never reused for another (debug builds also check every call).
    let f = mul_sum();
    let (x, y) = (seq(4, &[2, 2]), seq(4, &[2, 2]));
    let xg = seq(4, &[2, 2]).requires_grad_(true).expect("leaf");
    for round in 0..2 {
        let plain = f.__call(&[Arg::from(&x), Arg::from(&y)]).expect("call");
        assert!(!plain[0].requires_grad());
        assert_eq!(f.call_path(&[Arg::from(&x), Arg::from(&y)]).expect("path"), "inference");
        let grad = f.__call(&[Arg::from(&xg), Arg::from(&y)]).expect("call");
        assert!(grad[0].requires_grad(), "round {round}: the output of a call with a grad input requires grad");
        assert_eq!(f.call_path(&[Arg::from(&xg), Arg::from(&y)]).expect("path"), "compiled training");
        grad[0].backward().expect("backward");
        assert_eq!(xg.grad().expect("grad").to_vec::<f32>().expect("values"), y.to_vec::<f32>().expect("values"));
        xg.set_grad(None);
        assert_eq!(f.num_specializations(), 2, "round {round}");
    }
}

#[test]
fn debug_assert_wrapper_refuses_a_plan_made_for_another_pattern() {
    let f = mul_sum();
    let (x, y) = (seq(4, &[2, 2]), seq(4, &[2, 2]));
    let xg = seq(4, &[2, 2]).requires_grad_(true).expect("leaf");
    let spec = f.cache.get(f.graph(), f.static_meta(), &[Arg::from(&x), Arg::from(&y)]).expect("specialisation");
    spec.plan.debug_assert.check("mul_sum", &[Arg::from(&x), Arg::from(&y)]).expect("same pattern");
    let err = spec.plan.debug_assert.check("mul_sum", &[Arg::from(&xg), Arg::from(&y)]).expect_err("other pattern").to_string();
    assert!(err.contains("mul_sum") && err.contains("argument 0 requires grad"), "{err}");
}
