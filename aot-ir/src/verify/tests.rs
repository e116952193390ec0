use super::*;
use crate::graph::args::*;
use crate::graph::{GraphBuilder, Node, ReturnKind};
use crate::op::OpKind;
use crate::transform::FunctionalGraph;
use crate::types::{SpanId, ValueId};

fn sample() -> Graph {
    let mut b = GraphBuilder::new("f");
    let a = b.tensor("a", true);
    b.call(OpKind::MulInplace, a, vec![f(2.0)]);
    let o = b.call(OpKind::View, a, vec![ints(&[-1])]);
    b.finish(vec![o], ReturnKind::Single)
}

#[test]
fn accepts_a_good_graph() {
    assert_eq!(verify(&sample()), Ok(()));
    assert!(checked(sample(), "test").is_ok());
}

#[test]
fn rejects_use_before_def_and_bad_kinds() {
    let mut g = sample();
    g.nodes[0].args[0] = Arg::Tensor(ValueId(2));
    assert!(matches!(verify(&g), Err(VerifyError::Node { node: 0, .. })));

    let mut g = sample();
    g.nodes[1].args[1] = f(1.0);
    assert!(verify(&g).unwrap_err().to_string().contains("integer list"));

    let mut g = sample();
    g.nodes[0].out = Some(ValueId(1));
    assert!(verify(&g).is_err());

    let mut g = sample();
    g.outputs.push(ValueId(0));
    assert!(matches!(verify(&g), Err(VerifyError::Outputs(_))));

    let mut g = sample();
    g.nodes.push(Node { op: OpKind::Select.into(), args: vec![t(ValueId(0)), f(0.5), i(0)], out: None, no_grad: false, span: SpanId(0) });
    assert!(verify(&g).is_err());
}

fn functional() -> FunctionalGraph {
    let g = sample();
    let groups = crate::transform::InputGroups { group_of: vec![Some(0)], single: vec![true], object_of: vec![] };
    crate::transform::functionalize(&g, &groups)
}

#[test]
fn each_stage_admits_its_own_primitives() {
    use crate::graph::{ChainStep, Prim};
    let mutate = Op::Mutate { op: OpKind::MulInplace, chain: vec![] };
    assert!(Stage::Source.admits(&OpKind::MulInplace.into()));
    assert!(!Stage::Functional.admits(&OpKind::MulInplace.into()), "past the source writes are scatters");
    assert!(!Stage::Source.admits(&mutate));
    assert!(Stage::Functional.admits(&mutate) && Stage::Forward.admits(&mutate) && !Stage::Backward.admits(&mutate));
    assert!(Stage::Joint.admits(&Op::Tangent(0)) && !Stage::Functional.admits(&Op::Tangent(0)));
    assert!(!Stage::Forward.admits(&Op::Tangent(0)) && !Stage::Backward.admits(&Op::Primal(0)));
    assert!(Stage::Backward.admits(&Op::Prim(Prim::SumToLike)) && !Stage::Functional.admits(&Op::Prim(Prim::SumToLike)));
    assert!(Stage::Backward.admits(&Op::Regen(vec![ChainStep::ArgGeometry(0)])) && !Stage::Source.admits(&Op::Cow));
    let checked_reshape = Op::Dsl { op: OpKind::Reshape, check_alias: Some(true) };
    assert!(Stage::Functional.admits(&checked_reshape) && !Stage::Source.admits(&checked_reshape));
    assert!(!Stage::Functional.admits(&Op::Dsl { op: OpKind::Mul, check_alias: Some(true) }), "only reshape/contiguous are checked");
}

#[test]
fn functional_graphs_are_ssa_with_checked_primitives() {
    let fg = functional();
    assert_eq!(fg.verify(), Ok(()));
    let stage_err = |fg: &FunctionalGraph| match fg.verify() {
        Err(VerifyError::Stage { stage: Stage::Functional, msg, .. }) => msg,
        other => panic!("expected a functional-stage error, got {other:?}"),
    };

    // A value written after it is defined.
    let mut bad = fg.clone();
    let last = bad.nodes.len() - 1;
    bad.nodes[last].out = bad.nodes[0].out;
    assert!(stage_err(&bad).contains("defined twice"), "{}", stage_err(&bad));

    // A source in-place op left in the functional graph.
    let mut bad = fg.clone();
    let k = bad.nodes.iter().position(|n| matches!(n.op, Op::Mutate { .. })).unwrap();
    bad.nodes[k].op = OpKind::MulInplace.into();
    assert!(stage_err(&bad).contains("not admitted"));

    // A scatter without its root: the op's arguments no longer fit.
    let mut bad = fg.clone();
    bad.nodes[k].args.remove(0);
    assert!(stage_err(&bad).contains("argument"), "{}", stage_err(&bad));

    // A tangent has no place before the joint.
    let mut bad = fg.clone();
    bad.nodes[k].op = Op::Tangent(0);
    bad.nodes[k].args.clear();
    assert!(stage_err(&bad).contains("not admitted"));

    // Two bases for one group.
    let mut bad = fg;
    let extra = ValueId(bad.num_values as u32);
    bad.num_values += 1;
    bad.src_node.push(None);
    bad.nodes.push(Node::new(Op::Primal(0), vec![], Some(extra)));
    assert!(stage_err(&bad).contains("2 bases"));
}

#[test]
fn joint_and_partitions_are_verified_by_their_stage() {
    use crate::transform::{joint, partition};
    let fg = functional();
    let jg = joint::create_joint(&fg, &sample(), &[true]).unwrap();
    assert_eq!(jg.verify(), Ok(()));
    let p = partition::partition(&jg).unwrap();
    assert_eq!(p.verify(&jg), Ok(()));

    let mut bad = jg.clone();
    let t = bad.nodes.iter().position(|n| matches!(n.op, Op::Tangent(_))).unwrap();
    bad.is_backward[bad.nodes[t].value().index()] = false;
    assert!(matches!(bad.verify(), Err(VerifyError::Stage { stage: Stage::Joint, .. })));

    // A backward node moved into the forward reads a tangent it lacks.
    let mut bad = p.clone();
    let first = bad.backward.nodes[0].clone();
    bad.forward.nodes.push(first);
    assert!(matches!(bad.verify(&jg), Err(VerifyError::Stage { stage: Stage::Forward, .. })));
}

/// `cat`'s tensor list is spread over its first arguments: one or more
/// tensors, then the dim.
#[test]
fn static_ops_take_a_spread_tensor_list() {
    let build = |list: usize| {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", false);
        let mut args: Vec<Arg> = (0..list).map(|_| t(a)).collect();
        args.push(i(-1));
        let o = b.op(OpKind::Cat, args, SpanId(0));
        b.finish(o.into_iter().collect(), ReturnKind::Single)
    };
    assert_eq!(verify(&build(1)), Ok(()));
    assert_eq!(verify(&build(3)), Ok(()));
    assert!(verify(&build(0)).unwrap_err().to_string().contains("at least one tensor"));
    let mut g = build(2);
    g.nodes[0].args[1] = f(1.0);
    assert!(verify(&g).unwrap_err().to_string().contains("tensor of the list"));
    let mut g = build(2);
    g.nodes[0].args[2] = f(1.0);
    assert!(verify(&g).is_err());
    assert_eq!(OpKind::Cat.sig().list_len(4), 3);
    assert!(OpKind::Stack.differentiable_arg(2, 4) && !OpKind::Stack.differentiable_arg(3, 4));
    assert!(!OpKind::Embedding.differentiable_arg(0, 2) && OpKind::Embedding.differentiable_arg(1, 2));
    assert!(!OpKind::IndexCopyInplace.differentiable_arg(2, 4));
}
