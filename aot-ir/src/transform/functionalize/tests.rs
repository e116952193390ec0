use super::*;
use crate::graph::args::*;
use crate::graph::{GraphBuilder, ReturnKind};

fn singles(n: usize) -> InputGroups {
    InputGroups { group_of: (0..n).map(Some).collect(), single: vec![true; n], object_of: vec![] }
}

#[test]
fn a_mutation_through_a_view_becomes_a_scatter_and_later_reads_regenerate() {
    let mut b = GraphBuilder::new("f");
    let a = b.tensor("a", true);
    let row = b.call(OpKind::Select, a, vec![i(0), i(1)]);
    b.call(OpKind::AddInplace, row, vec![f(1.0)]);
    let s = b.call(OpKind::Mul, a, vec![f(2.0)]);
    let g = b.finish(vec![s, row], ReturnKind::Tuple(2));
    let fg = functionalize(&g, &singles(1));
    fg.verify().unwrap();
    let text = fg.listing();
    assert_eq!(
        text,
        "functional f {\n    %0 = primal(group 0)\n    %1 = select(%0, 0, 1)\n    %2 = copy_storage(%0)\n    \
         %3 = regen(%2, [select(0, 1)])\n    %4 = scatter(%2, [select(0, 1)], add_(%3, 1.0))\n    \
         %5 = mul(%4, 2.0)\n    %6 = regen(%4, [select(0, 1)])\n    copy_back(group 0, %4)\n    \
         return (%5, alias(group 0, %6))\n}"
    );
}

#[test]
fn metadata_mutations_become_views_of_the_same_object() {
    let mut b = GraphBuilder::new("f");
    let a = b.tensor("a", true);
    b.call(OpKind::TInplace, a, vec![]);
    let m = b.call(OpKind::Mul, a, vec![f(2.0)]);
    b.call(OpKind::UnsqueezeInplace, m, vec![i(0)]);
    let g = b.finish(vec![a, m], ReturnKind::Tuple(2));
    let fg = functionalize(&g, &singles(1));
    fg.verify().unwrap();
    assert_eq!(fg.metadata_mutations.len(), 1);
    assert!(fg.mutated_groups.is_empty());
    assert_eq!(fg.outputs[0], FOutput::Input(0));
    // `m` is an allocated tensor whose own metadata changed: a value, not a view.
    assert!(matches!(fg.outputs[1], FOutput::Value(_)));
    assert_eq!(fg.output_is_view, vec![false, false]);
}

#[test]
fn aliased_inputs_share_one_base() {
    let mut b = GraphBuilder::new("f");
    let x = b.tensor("x", true);
    let y = b.tensor("y", false);
    b.call(OpKind::MulInplace, x, vec![f(2.0)]);
    let s = b.call(OpKind::Add, y, vec![f(0.0)]);
    let g = b.finish(vec![s], ReturnKind::Single);
    let groups = InputGroups { group_of: vec![Some(0), Some(0)], single: vec![false], object_of: vec![] };
    let fg = functionalize(&g, &groups);
    fg.verify().unwrap();
    let text = fg.listing();
    assert!(text.contains("regen(%1, [arg_geometry(x)])"), "{text}");
    assert!(text.contains("regen(%3, [arg_geometry(y)])"), "{text}");
}
