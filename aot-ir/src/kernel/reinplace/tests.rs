use super::*;
use crate::graph::args::*;
use crate::graph::{GraphBuilder, ReturnKind};
use crate::print::Names;
use crate::transform::{functionalize, InputGroups};
use crate::verify::Stage;

fn singles(n: usize) -> InputGroups {
    InputGroups { group_of: (0..n).map(Some).collect(), single: vec![true; n], object_of: vec![] }
}

/// `buf.mul_(0.9).add_(g); p.sub_(buf * 0.1)`, then `q.add_(h)` when
/// `other` (a second, unrelated write).
fn sgd(other: bool) -> FunctionalGraph {
    let mut b = GraphBuilder::new("sgd");
    let p = b.tensor("p", true);
    let buf = b.tensor("buf", true);
    let g = b.tensor("g", false);
    b.call(OpKind::MulInplace, buf, vec![f(0.9)]);
    b.call(OpKind::AddInplace, buf, vec![t(g)]);
    let step = b.call(OpKind::Mul, buf, vec![f(0.1)]);
    b.call(OpKind::SubInplace, p, vec![t(step)]);
    if other {
        let q = b.tensor("q", true);
        let h = b.tensor("h", false);
        b.call(OpKind::AddInplace, q, vec![t(h)]);
    }
    let graph = b.finish(vec![], ReturnKind::Unit);
    let n = if other { 5 } else { 3 };
    functionalize(&graph, &singles(n))
}

/// `k` as a node of a functional stage over `inputs` values, verified.
fn verified(k: &InPlaceKernel) {
    let n = k.inputs.len();
    let args = (0..n as u32).map(|v| t(ValueId(v))).collect();
    let node = Node::new(Op::Kernel(Box::new(k.kernel.clone())), args, Some(ValueId(n as u32)));
    let mut defined = vec![true; n];
    defined.push(false);
    Stage::Functional.check_nodes(&[node], &mut defined, &[]).expect("the kernel verifies");
}

#[test]
fn an_sgd_step_is_one_kernel_storing_buf_and_p() {
    let fg = sgd(false);
    let r = reinplace(&fg, 0).expect("an optimizer step reinplaces");
    let fused = r.fused.expect("buf's and p's kernels fuse");
    assert_eq!(fused.len(), 1);
    let k = &fused[0];
    verified(k);
    assert_eq!(k.kernel.outs().count(), 2);
    assert_eq!(k.stores.iter().map(|s| (s.group, s.dest)).collect::<Vec<_>>(), [(1, 1), (0, 0)], "buf over in1, then p over in0");
    let listing = k.listing(Names::params(&[]));
    assert!(listing.contains("store %4 in place of in1, %6 in place of in0"), "{listing}");
    // The one-kernel-per-group set stays, for destinations that differ.
    assert_eq!(r.single.len(), 2);
    assert!(r.single.iter().all(|k| k.kernel.extra_outs.is_empty() && k.stores.len() == 1));
    r.single.iter().for_each(verified);
}

#[test]
fn unrelated_writes_stay_kernels_of_their_own() {
    let r = reinplace(&sgd(true), 0).expect("reinplaces");
    let fused = r.fused.expect("sgd's kernels fuse");
    assert_eq!(fused.iter().map(|k| k.stores.len()).collect::<Vec<_>>(), [2, 1], "q's write reads nothing of p's or buf's");
    assert_eq!(r.single.len(), 3);
    // Writes that read no other's result: no fused set at all.
    let mut b = GraphBuilder::new("two");
    let p = b.tensor("p", true);
    let q = b.tensor("q", true);
    b.call(OpKind::MulInplace, p, vec![f(0.5)]);
    b.call(OpKind::MulInplace, q, vec![f(0.5)]);
    let fg = functionalize(&b.finish(vec![], ReturnKind::Unit), &singles(2));
    let r = reinplace(&fg, 0).expect("reinplaces");
    assert!(r.fused.is_none());
    assert_eq!(r.single.len(), 2);
}
