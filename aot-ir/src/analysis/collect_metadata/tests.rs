use super::*;
use crate::graph::args::*;
use crate::graph::{GraphBuilder, ReturnKind};
use crate::op::OpKind;
use crate::schema::MutationType;

#[test]
fn input_mutation_facts() {
    // a.mul_(2); no_grad { b.add_(1) }; c.detach().mul_(2); d.t_()
    let mut bld = GraphBuilder::new("f");
    let a = bld.tensor("a", true);
    let b = bld.tensor("b", true);
    let c = bld.tensor("c", true);
    let d = bld.tensor("d", true);
    bld.call(OpKind::MulInplace, a, vec![f(2.0)]);
    bld.set_no_grad(true);
    bld.call(OpKind::AddInplace, b, vec![f(1.0)]);
    bld.set_no_grad(false);
    let cd = bld.call(OpKind::Detach, c, vec![]);
    bld.call(OpKind::MulInplace, cd, vec![f(2.0)]);
    bld.call(OpKind::TInplace, d, vec![]);
    let g = bld.finish(vec![], ReturnKind::Unit);
    let m = StaticMeta::compute(&g);
    assert_eq!((m.inputs[0].data_mutations, m.inputs[0].data_mutations_under_no_grad), (1, 0));
    assert_eq!((m.inputs[1].data_mutations, m.inputs[1].data_mutations_under_no_grad), (1, 1));
    assert!(m.inputs[2].mutated_only_through_detach);
    assert!(m.inputs[3].mutates_metadata && !m.inputs[3].mutates_data());
    assert!(m.mutates_inputs);

    let full = m.complete(&CallFacts::distinct(&[false; 4], &[true; 4]));
    let kinds: Vec<_> = full.input_info.iter().map(|i| i.mutation_type).collect();
    assert_eq!(
        kinds,
        [MutationType::MutatedInGraph, MutationType::MutatedInGraph, MutationType::MutatedInGraph, MutationType::MutatedOutGraph]
    );
    let grad = m.complete(&CallFacts::distinct(&[true; 4], &[true; 4]));
    assert_eq!(grad.input_info[0].mutation_type, MutationType::MutatedOutGraph);
    assert_eq!(grad.input_info[1].mutation_type, MutationType::MutatedInGraph);
    assert!(grad.input_info[3].mutations_hidden_from_autograd);
}

#[test]
fn outputs_aliasing_intermediates() {
    // out = a * 3; (out.select(0, 0), out.select(0, 1), out)
    let mut bld = GraphBuilder::new("f");
    let a = bld.tensor("a", false);
    let out = bld.call(OpKind::Mul, a, vec![f(3.0)]);
    let s0 = bld.call(OpKind::Select, out, vec![i(0), i(0)]);
    let s1 = bld.call(OpKind::Select, out, vec![i(0), i(1)]);
    let g = bld.finish(vec![s0, s1, out], ReturnKind::Tuple(3));
    let m = StaticMeta::compute(&g);
    let grad = m.complete(&CallFacts::distinct(&[true], &[true]));
    let types: Vec<_> = grad.output_info.iter().map(|o| (o.output_type, o.base_idx)).collect();
    assert_eq!(
        types,
        [
            (OutputType::AliasOfIntermediateBaseIsUserOutput, Some(2)),
            (OutputType::AliasOfIntermediateBaseIsUserOutput, Some(2)),
            (OutputType::NonAlias, None)
        ]
    );
    assert_eq!(m.outputs[2].static_type, Some(OutputType::NonAlias));
    assert_eq!(m.outputs[0].static_type, None);
    assert_eq!(m.outputs[0].alias, OutputAlias::AliasOfIntermediate(out));
    assert_eq!(m.outputs[2].alias, OutputAlias::NonAlias);
}

#[test]
fn in_place_from_a_grad_input_spreads_to_the_base() {
    // x.select(0, 0).add_(y); return x  -> x requires grad when y does
    let mut bld = GraphBuilder::new("f");
    let x = bld.tensor("x", true);
    let y = bld.tensor("y", false);
    let v = bld.call(OpKind::Select, x, vec![i(0), i(0)]);
    bld.call(OpKind::AddInplace, v, vec![t(y)]);
    let g = bld.finish(vec![x], ReturnKind::Single);
    let m = StaticMeta::compute(&g);
    assert_eq!(m.inputs[0].final_grad_deps, vec![0, 1]);
    assert_eq!(m.outputs[0].alias, OutputAlias::IsInput(0));
    let meta = m.complete(&CallFacts::distinct(&[false, true], &[true, true]));
    assert!(meta.input_info[0].requires_grad && meta.output_info[0].requires_grad);
}
