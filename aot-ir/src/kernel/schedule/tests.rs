use super::*;
use crate::op::OpKind;
use crate::print::Names;
use crate::types::ScalarExpr;
use crate::verify::Stage;

fn t(v: u32) -> Arg {
    Arg::Tensor(ValueId(v))
}

fn s(x: f64) -> Arg {
    Arg::Scalar(ScalarExpr::F64(x))
}

fn node(op: OpKind, args: Vec<Arg>, out: u32) -> Node {
    Node::new(op, args, Some(ValueId(out)))
}

/// `%0` is an input (a primal); the nodes follow.
fn stage(nodes: Vec<Node>) -> Vec<Node> {
    let mut all = vec![Node::new(Op::Primal(0), vec![], Some(ValueId(0)))];
    all.extend(nodes);
    all
}

fn checked(s: &Scheduled, num_values: usize) {
    let mut defined = vec![false; num_values];
    Stage::Functional.check_nodes(&s.nodes, &mut defined, &[]).expect("the scheduled stage verifies");
}

fn kernels(s: &Scheduled) -> Vec<String> {
    s.kernels().map(|k| k.listing(Names::params(&[]))).collect()
}

#[test]
fn a_chain_of_elementwise_ops_is_one_kernel() {
    // sigmoid(tanh(x * 1.5 + 0.5) * 2 - 1): the W2 benchmark.
    let nodes = stage(vec![
        node(OpKind::Mul, vec![t(0), s(1.5)], 1),
        node(OpKind::Add, vec![t(1), s(0.5)], 2),
        node(OpKind::Tanh, vec![t(2)], 3),
        node(OpKind::Mul, vec![t(3), s(2.0)], 4),
        node(OpKind::Sub, vec![t(4), s(1.0)], 5),
        node(OpKind::Sigmoid, vec![t(5)], 6),
    ]);
    let sch = schedule(&nodes, 7, &[ValueId(6)], 0);
    checked(&sch, 7);
    assert_eq!(sch.nodes.len(), 2);
    assert_eq!(sch.origin, vec![Some(0), None]);
    assert_eq!(sch.nodes[1].out, Some(ValueId(6)));
    assert_eq!(sch.nodes[1].args, vec![t(0)]);
    let listing = kernels(&sch);
    assert_eq!(
        listing,
        vec!["kernel fused_mul_add_tanh_mul_sub_sigmoid_0(in0) {\n    %0 = load(in0)\n    %1 = mul(%0, 1.5)\n    %2 = add(%1, 0.5)\n    %3 = tanh(%2)\n    %4 = mul(%3, 2.0)\n    %5 = sub(%4, 1.0)\n    %6 = sigmoid(%5)\n    store %6\n}\n"]
    );
}

#[test]
fn a_value_read_twice_or_needed_later_ends_its_group() {
    // %1 = exp(x) is read by two nodes: it is stored, and each reader
    // starts a group of its own.
    let nodes = stage(vec![
        node(OpKind::Exp, vec![t(0)], 1),
        node(OpKind::Neg, vec![t(1)], 2),
        node(OpKind::Sqrt, vec![t(1)], 3),
        node(OpKind::Add, vec![t(2), t(3)], 4),
    ]);
    let sch = schedule(&nodes, 5, &[ValueId(4)], 0);
    checked(&sch, 5);
    // exp alone; neg, sqrt and add fused (each read once by add).
    assert_eq!(sch.nodes.len(), 3);
    assert!(sch.nodes[1].is(OpKind::Exp));
    let Op::Kernel(k) = &sch.nodes[2].op else { panic!("expected a kernel") };
    assert_eq!(k.ops().collect::<Vec<_>>(), vec![OpKind::Neg, OpKind::Sqrt, OpKind::Add]);
    assert_eq!(sch.nodes[2].args, vec![t(1)]);

    // A live-out intermediate is stored too.
    let nodes = stage(vec![node(OpKind::Exp, vec![t(0)], 1), node(OpKind::Neg, vec![t(1)], 2), node(OpKind::Abs, vec![t(2)], 3)]);
    let sch = schedule(&nodes, 4, &[ValueId(1), ValueId(3)], 0);
    checked(&sch, 4);
    assert_eq!(sch.nodes.len(), 3, "exp is needed after the stage: neg and abs fuse, exp does not");
    assert!(sch.nodes[1].is(OpKind::Exp));
}

#[test]
fn a_node_reading_one_operand_twice_still_fuses_it() {
    let nodes = stage(vec![node(OpKind::Exp, vec![t(0)], 1), node(OpKind::Mul, vec![t(1), t(1)], 2)]);
    let sch = schedule(&nodes, 3, &[ValueId(2)], 0);
    checked(&sch, 3);
    assert_eq!(sch.nodes.len(), 2);
    assert!(matches!(sch.nodes[1].op, Op::Kernel(_)));
}

#[test]
fn no_group_spans_a_write_or_a_non_elementwise_op() {
    // y = x * 2; <write of x in place>; z = y + 1: moving the mul past the
    // write would read the new version.
    let write = Node::new(Op::Mutate { op: OpKind::AddInplace, chain: vec![] }, vec![t(0), t(0), s(1.0)], Some(ValueId(2)));
    let nodes = stage(vec![node(OpKind::Mul, vec![t(0), s(2.0)], 1), write, node(OpKind::Add, vec![t(1), s(1.0)], 3)]);
    let sch = schedule(&nodes, 4, &[ValueId(2), ValueId(3)], 0);
    checked(&sch, 4);
    assert_eq!(sch.kernels().count(), 0);
    assert_eq!(sch.nodes, nodes);

    // A matmul between two elementwise ops.
    let nodes = stage(vec![
        node(OpKind::Exp, vec![t(0)], 1),
        node(OpKind::Matmul, vec![t(1), t(0)], 2),
        node(OpKind::Neg, vec![t(2)], 3),
        node(OpKind::Abs, vec![t(3)], 4),
    ]);
    let sch = schedule(&nodes, 5, &[ValueId(4)], 7);
    checked(&sch, 5);
    assert_eq!(sch.nodes.len(), 4);
    assert_eq!(sch.kernels().map(|k| k.name.as_str()).collect::<Vec<_>>(), vec!["fused_neg_abs_7"]);
}

fn ints(v: &[i64]) -> Arg {
    Arg::Ints(v.iter().map(|&x| ScalarExpr::I64(x)).collect())
}

fn boolean(b: bool) -> Arg {
    Arg::Scalar(ScalarExpr::Bool(b))
}

#[test]
fn a_reduction_fuses_its_prologue_and_epilogue() {
    // -(exp(x) * 2).sum_dim([1], false).sqrt(): one kernel.
    let nodes = stage(vec![
        node(OpKind::Exp, vec![t(0)], 1),
        node(OpKind::Mul, vec![t(1), s(2.0)], 2),
        node(OpKind::SumDim, vec![t(2), ints(&[1]), boolean(false)], 3),
        node(OpKind::Sqrt, vec![t(3)], 4),
        node(OpKind::Neg, vec![t(4)], 5),
    ]);
    let sch = schedule(&nodes, 6, &[ValueId(5)], 0);
    checked(&sch, 6);
    assert_eq!(sch.nodes.len(), 2);
    let k = sch.kernels().next().expect("one kernel");
    assert_eq!(k.reduction(), Some(3));
    // Rendered to CUDA C as one block reduction with its prologue and epilogue.
    let r = crate::kernel::render::render_cuda(k, crate::dtype::DType::F32, 2, &crate::kernel::render::ScalarSlots::of(k))
        .expect("a reduction kernel renders");
    assert!(r.source.contains("aot_row_reduce(") && r.source.contains("aot_epi_fused_exp_mul_sum_dim_sqrt_neg_0("), "{}", r.source);
    assert_eq!(k.prologue(), vec![true, true, true, false, false, false]);
    assert_eq!(
        kernels(&sch),
        vec!["kernel fused_exp_mul_sum_dim_sqrt_neg_0(in0) {\n    %0 = load(in0)\n    %1 = exp(%0)\n    %2 = mul(%1, 2.0)\n    %3 = sum_dim(%2, [1], false)\n    %4 = sqrt(%3)\n    %5 = neg(%4)\n    store %5\n}\n"]
    );
}

#[test]
fn the_cross_entropy_pattern_fuses_around_its_stored_log_softmax() {
    // W3's loss: logits = mm + b; ls = log_softmax(logits, 1) (saved for
    // the backward); -(ls * y).sum_dim([1]) ; mean.
    let nodes = vec![
        Node::new(Op::Primal(0), vec![], Some(ValueId(0))),
        Node::new(Op::Primal(1), vec![], Some(ValueId(1))),
        Node::new(Op::Primal(2), vec![], Some(ValueId(2))),
        node(OpKind::Add, vec![t(0), t(2)], 3),
        node(OpKind::LogSoftmax, vec![t(3), Arg::Scalar(ScalarExpr::I64(1))], 4),
        node(OpKind::Mul, vec![t(4), t(1)], 5),
        node(OpKind::SumDim, vec![t(5), ints(&[1]), boolean(false)], 6),
        node(OpKind::Neg, vec![t(6)], 7),
        node(OpKind::Mean, vec![t(7)], 8),
    ];
    let sch = schedule(&nodes, 9, &[ValueId(8), ValueId(4)], 0);
    let mut defined = vec![false; 9];
    Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).expect("verifies");
    let names: Vec<&str> = sch.kernels().map(|k| k.name.as_str()).collect();
    // mean reads a reduction's result: a second reduction, its own node.
    assert_eq!(names, ["fused_add_log_softmax_0", "fused_mul_sum_dim_neg_1"]);
    assert_eq!(sch.nodes.len(), 3 + 3);
    assert!(sch.nodes[5].is(OpKind::Mean));

    // The gradient of log_softmax: g - exp(ls) * g.sum_dim([1], true), with
    // g read twice (so stored): one row kernel reads g and ls.
    let nodes = vec![
        Node::new(Op::Primal(0), vec![], Some(ValueId(0))),
        Node::new(Op::Primal(1), vec![], Some(ValueId(1))),
        node(OpKind::SumDim, vec![t(1), ints(&[1]), boolean(true)], 2),
        node(OpKind::Exp, vec![t(0)], 3),
        node(OpKind::Mul, vec![t(3), t(2)], 4),
        node(OpKind::Sub, vec![t(1), t(4)], 5),
    ];
    let sch = schedule(&nodes, 6, &[ValueId(5)], 0);
    let mut defined = vec![false; 6];
    Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).expect("verifies");
    assert_eq!(
        kernels(&sch),
        vec!["kernel fused_sum_dim_exp_mul_sub_0(in0, in1) {\n    %0 = load(in0)\n    %1 = load(in1)\n    %2 = sum_dim(%0, [1], true)\n    %3 = exp(%1)\n    %4 = mul(%3, %2)\n    %5 = sub(%0, %4)\n    store %5\n}\n"]
    );
    let k = sch.kernels().next().expect("a kernel");
    assert_eq!(k.prologue(), vec![true, false, false, false, false, false]);
}

#[test]
fn two_reductions_never_share_a_kernel() {
    // sum(exp(x).sum_dim([0])): the second reduction stays a node.
    let nodes = stage(vec![
        node(OpKind::Exp, vec![t(0)], 1),
        node(OpKind::SumDim, vec![t(1), ints(&[0]), boolean(false)], 2),
        node(OpKind::Sum, vec![t(2)], 3),
    ]);
    let sch = schedule(&nodes, 4, &[ValueId(3)], 0);
    checked(&sch, 4);
    assert_eq!(sch.kernels().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["fused_exp_sum_dim_0"]);
    assert!(sch.nodes[2].is(OpKind::Sum));

    // A kernel body with two reductions fails the verifier.
    let nodes = stage(vec![node(OpKind::Sum, vec![t(0)], 1), node(OpKind::Neg, vec![t(1)], 2)]);
    let mut sch = schedule(&nodes, 3, &[ValueId(2)], 0);
    let Op::Kernel(k) = &mut sch.nodes[1].op else { panic!("expected a kernel") };
    k.body[2] = Node::new(OpKind::Sum, vec![t(1)], Some(ValueId(2)));
    let mut defined = vec![false; 3];
    let err = Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).unwrap_err();
    assert!(err.1.contains("2 reductions"), "{err:?}");

    // An epilogue op reading a prologue value (gone once its row is
    // folded) fails it too.
    let nodes = stage(vec![node(OpKind::Exp, vec![t(0)], 1), node(OpKind::Sum, vec![t(1)], 2), node(OpKind::Neg, vec![t(2)], 3)]);
    let mut sch = schedule(&nodes, 4, &[ValueId(3)], 0);
    let Op::Kernel(k) = &mut sch.nodes[1].op else { panic!("expected a kernel") };
    k.body[3] = Node::new(OpKind::Add, vec![t(2), t(1)], Some(ValueId(3)));
    let mut defined = vec![false; 4];
    let err = Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).unwrap_err();
    assert!(err.1.contains("reads %1 of the reduction's prologue"), "{err:?}");
}

#[test]
fn a_broken_kernel_body_fails_the_verifier() {
    let nodes = stage(vec![node(OpKind::Exp, vec![t(0)], 1), node(OpKind::Neg, vec![t(1)], 2)]);
    let mut sch = schedule(&nodes, 3, &[ValueId(2)], 0);
    let Op::Kernel(k) = &mut sch.nodes[1].op else { panic!("expected a kernel") };
    k.out = ValueId(9);
    let mut defined = vec![false; 3];
    let err = Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).unwrap_err();
    assert!(err.1.contains("does not define"), "{err:?}");
    let Op::Kernel(k) = &mut sch.nodes[1].op else { panic!("expected a kernel") };
    k.out = ValueId(2);
    k.body.swap(0, 1);
    let mut defined = vec![false; 3];
    assert!(Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).is_err());
}

#[test]
fn a_kernel_stores_each_value_once_and_only_values_it_defines() {
    let nodes = stage(vec![node(OpKind::Exp, vec![t(0)], 1), node(OpKind::Neg, vec![t(1)], 2)]);
    let mut sch = schedule(&nodes, 3, &[ValueId(2)], 0);
    let Op::Kernel(k) = &mut sch.nodes[1].op else { panic!("expected a kernel") };
    // Storing the intermediate too: a valid multi-output kernel.
    k.extra_outs = vec![ValueId(1)];
    assert!(k.listing(Names::params(&[])).contains("store %2, %1"));
    checked(&sch, 3);
    for (extra, msg) in [(ValueId(2), "stores %2 twice"), (ValueId(9), "does not define")] {
        let Op::Kernel(k) = &mut sch.nodes[1].op else { panic!("expected a kernel") };
        k.extra_outs = vec![extra];
        let mut defined = vec![false; 3];
        let err = Stage::Functional.check_nodes(&sch.nodes, &mut defined, &[]).unwrap_err();
        assert!(err.1.contains(msg), "{err:?}");
    }
}
