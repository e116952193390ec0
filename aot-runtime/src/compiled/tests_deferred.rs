//! Writes deferred to the epilogue (`deferred_writes.rs`): which plans defer, and
//! that a deferred call leaves outputs, inputs and version counters as
//! eager does, including when the operands do not qualify at run time and
//! when a later node fails.

use super::{Arg, CompiledFn};
use crate::{DType, Device, Tensor};
use aot_ir::graph::args::{ints, t};
use aot_ir::{GraphBuilder, OpKind, ReturnKind};

fn seq(n: usize, shape: &[usize], dtype: DType) -> Tensor {
    let v: Vec<f64> = (0..n).map(|v| v as f64 * 0.75 - 1.0).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).and_then(|x| x.to_dtype(dtype)).expect("tensor")
}

/// Everything a caller sees of a tensor after a call.
fn state(x: &Tensor) -> (Vec<usize>, Vec<usize>, usize, Vec<f64>, u64) {
    (x.shape(), x.stride(), x.storage_offset(), x.to_vec::<f64>().expect("values"), x.version())
}

/// `a.add_(c); b.mul_(d); [a.view(7)]; e - f`: W1's shape.
fn w1(fails_late: bool) -> CompiledFn {
    let mut g = GraphBuilder::new("w1");
    let [a, b, c, d, e, f] = ["a", "b", "c", "d", "e", "f"].map(|n| g.tensor(n, matches!(n, "a" | "b")));
    g.call(OpKind::AddInplace, a, vec![t(c)]);
    g.call(OpKind::MulInplace, b, vec![t(d)]);
    if fails_late {
        g.call(OpKind::View, e, vec![ints(&[7])]);
    }
    let out = g.call(OpKind::Sub, e, vec![t(f)]);
    CompiledFn::new(g.finish(vec![out], ReturnKind::Single)).expect("valid graph")
}

/// Calls `f` compiled and eagerly on fresh tensors `make()` returns (both
/// succeed), and compares results and every argument afterwards; returns how many writes
/// the call's specialisation defers.
fn agrees(f: &CompiledFn, make: &dyn Fn() -> Vec<Tensor>) -> usize {
    let (c, e) = (make(), make());
    let args = |ts: &[Tensor]| -> Vec<Tensor> { ts.to_vec() };
    let (cargs, eargs) = (args(&c), args(&e));
    let ca: Vec<Arg> = cargs.iter().map(Arg::from).collect();
    let ea: Vec<Arg> = eargs.iter().map(Arg::from).collect();
    let (co, eo) = (f.__call(&ca).expect("compiled call"), f.run_eager(&ea).expect("eager call"));
    assert_eq!(co.iter().map(state).collect::<Vec<_>>(), eo.iter().map(state).collect::<Vec<_>>());
    assert_eq!(c.iter().map(state).collect::<Vec<_>>(), e.iter().map(state).collect::<Vec<_>>());
    f.cache.get(f.graph(), f.static_meta(), &ca).expect("specialisation").plan.runtime.deferred.writes.len()
}

#[test]
fn w1_defers_both_writes_and_matches_eager() {
    let f = w1(false);
    for dtype in [DType::F32, DType::F64] {
        let make = || (0..6).map(|_| seq(4, &[4], dtype)).collect::<Vec<_>>();
        assert_eq!(agrees(&f, &make), 2, "{dtype:?}");
    }
}

#[test]
fn operands_that_do_not_qualify_run_the_plan() {
    let f = w1(false);
    // Broadcasting, integers, a transposed operand: the plan's copies run.
    let shapes = |c: &[usize]| {
        let c = c.to_vec();
        move || {
            vec![
                seq(4, &[2, 2], DType::F32),
                seq(4, &[2, 2], DType::F32),
                seq(c.iter().product(), &c, DType::F32),
                seq(4, &[2, 2], DType::F32),
                seq(4, &[2, 2], DType::F32),
                seq(4, &[2, 2], DType::F32),
            ]
        }
    };
    agrees(&f, &shapes(&[2]));
    agrees(&f, &shapes(&[1, 2]));
    agrees(&f, &|| (0..6).map(|_| seq(4, &[4], DType::I64)).collect());
    agrees(&f, &|| {
        let mut v: Vec<Tensor> = (0..6).map(|_| seq(4, &[2, 2], DType::F32)).collect();
        v[2] = v[2].t().expect("t");
        v
    });
}

#[test]
fn a_failing_node_leaves_deferred_targets_untouched() {
    let f = w1(true);
    let ts: Vec<Tensor> = (0..6).map(|_| seq(4, &[4], DType::F32)).collect();
    let before: Vec<_> = ts.iter().map(state).collect();
    let args: Vec<Arg> = ts.iter().map(Arg::from).collect();
    let err = f.__call(&args).expect_err("view of 4 elements as 7").to_string();
    assert!(err.contains("view"), "{err}");
    // Eager has written `a` and `b` by then; the compiled call nothing.
    assert_eq!(ts.iter().map(state).collect::<Vec<_>>(), before);
    let spec = f.cache.get(f.graph(), f.static_meta(), &args).expect("specialisation");
    assert_eq!(spec.plan.runtime.deferred.writes.len(), 2);
}

#[test]
fn writes_whose_target_or_operand_is_read_elsewhere_are_not_deferred() {
    // `a.add_(b); b.add_(c); a + b`
    let mut g = GraphBuilder::new("chained");
    let [a, b, c] = ["a", "b", "c"].map(|n| g.tensor(n, n != "c"));
    g.call(OpKind::AddInplace, a, vec![t(b)]);
    g.call(OpKind::AddInplace, b, vec![t(c)]);
    let out = g.call(OpKind::Add, a, vec![t(b)]);
    let f = CompiledFn::new(g.finish(vec![out], ReturnKind::Single)).expect("valid graph");
    assert_eq!(agrees(&f, &|| (0..3).map(|_| seq(4, &[4], DType::F32)).collect()), 0);
    // The same tensor as target and operand: one group, nothing deferred.
    let f = w1(false);
    let x = seq(4, &[4], DType::F32);
    let y = seq(4, &[4], DType::F32);
    let others: Vec<Tensor> = (0..4).map(|_| seq(4, &[4], DType::F32)).collect();
    let args = [Arg::from(&x), Arg::from(&others[0]), Arg::from(&x), Arg::from(&others[1]), Arg::from(&others[2]), Arg::from(&others[3])];
    f.__call(&args).expect("call");
    let spec = f.cache.get(f.graph(), f.static_meta(), &args).expect("specialisation");
    assert_eq!(spec.plan.runtime.deferred.writes.len(), 1, "only `b.mul_(d)` defers");
    y.add_(&y.copy().expect("copy")).expect("add_");
    assert_eq!(state(&x), state(&y), "x.add_(x) as eager");
}

#[test]
fn an_operand_whose_metadata_changes_is_not_deferred() {
    // `a.add_(c); c.unsqueeze_(0); a`: the epilogue reshapes `c` before it
    // writes data (found by the differential test).
    let mut g = GraphBuilder::new("reshaped_operand");
    let [a, c] = ["a", "c"].map(|n| g.tensor(n, true));
    g.call(OpKind::AddInplace, a, vec![t(c)]);
    g.call(OpKind::UnsqueezeInplace, c, vec![aot_ir::graph::args::i(0)]);
    let f = CompiledFn::new(g.finish(vec![a], ReturnKind::Single)).expect("valid graph");
    assert_eq!(agrees(&f, &|| (0..2).map(|_| seq(4, &[4, 1, 1], DType::F64)).collect()), 0);
}
