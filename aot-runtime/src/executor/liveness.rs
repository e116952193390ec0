//! [`Liveness`]: per node of a stage, the values no later node reads and
//! that are not needed after the stage (outputs, saved values, copy-backs),
//! so the interpreter drops them from its table right after that node.
//! A dropped intermediate's buffer goes back to the allocator (or to the
//! buffer cache, `crate::buffer_cache`) while the run goes on, so a chain of
//! unfused ops holds only the values still to be read, not all of them.
//!
//! Dropping a value drops one handle: a view of it keeps its storage alive
//! through its own reference, so nothing a live value needs goes away. It
//! is computed once per plan (per scheduled stage), so a call pays only a
//! walk over short slices.

use aot_ir::transform::ChainStep;
use aot_ir::{Node, Op, ValueId};

/// The values that die at each node of a stage, as one flat list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Liveness {
    /// Node `i`'s values are `dead[starts[i] .. starts[i + 1]]`; empty for
    /// a stage without liveness (nothing is dropped).
    starts: Vec<u32>,
    dead: Vec<ValueId>,
}

impl Liveness {
    /// The liveness of `nodes` (values below `num_values`), with `live_out`
    /// read after the stage. A value is dropped after its last reader, or
    /// right after the node that made it when nothing reads it; values
    /// bound before the run and never read are left alone.
    pub(crate) fn new(nodes: &[Node], num_values: usize, live_out: &[ValueId]) -> Liveness {
        const NEVER: usize = usize::MAX;
        let mut last = vec![NEVER; num_values];
        for (i, n) in nodes.iter().enumerate() {
            if let Some(slot) = n.out.and_then(|v| last.get_mut(v.index())) {
                *slot = i;
            }
            for v in reads(n) {
                if let Some(slot) = last.get_mut(v.index()) {
                    *slot = i;
                }
            }
        }
        for v in live_out {
            if let Some(slot) = last.get_mut(v.index()) {
                *slot = NEVER;
            }
        }
        let mut per_node: Vec<Vec<ValueId>> = vec![Vec::new(); nodes.len()];
        for (v, &at) in last.iter().enumerate() {
            if let Some(list) = per_node.get_mut(at) {
                list.push(ValueId(v as u32));
            }
        }
        let mut starts = Vec::with_capacity(nodes.len() + 1);
        let mut dead = Vec::new();
        for list in per_node {
            starts.push(dead.len() as u32);
            dead.extend(list);
        }
        starts.push(dead.len() as u32);
        Liveness { starts, dead }
    }

    /// The values that die at node `i` (none for a stage without liveness).
    #[inline]
    pub(crate) fn after(&self, i: usize) -> &[ValueId] {
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&a), Some(&b)) => self.dead.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Whether `v` dies at node `i`.
    #[inline]
    pub(crate) fn dies_at(&self, i: usize, v: ValueId) -> bool {
        self.after(i).contains(&v)
    }
}

/// The values `n` reads: its tensor arguments, and any tensor argument of
/// the view steps of its chain.
fn reads(n: &Node) -> impl Iterator<Item = ValueId> + '_ {
    let chain: &[ChainStep] = match &n.op {
        Op::Mutate { chain, .. } | Op::Regen(chain) => chain,
        _ => &[],
    };
    let in_chain = chain.iter().flat_map(|s| match s {
        ChainStep::View { args, .. } => args.as_slice(),
        ChainStep::ArgGeometry(_) => &[],
    });
    n.tensor_args().chain(in_chain.filter_map(aot_ir::Arg::as_tensor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aot_ir::{Arg, OpKind};

    fn node(op: OpKind, args: &[u32], out: u32) -> Node {
        let args = args.iter().map(|&v| Arg::Tensor(ValueId(v))).collect();
        Node::new(Op::Dsl { op, check_alias: None }, args, Some(ValueId(out)))
    }

    #[test]
    fn values_die_after_their_last_reader_unless_live_out() {
        // 0 is bound before the run; 1 = tanh(0); 2 = 1 * 0; 3 = sigmoid(2); 4 = exp(1) (unread)
        let nodes =
            [node(OpKind::Tanh, &[0], 1), node(OpKind::Mul, &[1, 0], 2), node(OpKind::Sigmoid, &[2], 3), node(OpKind::Exp, &[1], 4)];
        let l = Liveness::new(&nodes, 5, &[ValueId(3)]);
        assert_eq!(l.after(0), &[] as &[ValueId]);
        assert_eq!(l.after(1), &[ValueId(0)], "the bound input dies at its last reader");
        assert_eq!(l.after(2), &[ValueId(2)]);
        assert_eq!(l.after(3), &[ValueId(1), ValueId(4)], "an unread result dies where it is made");
        assert!(l.dies_at(1, ValueId(0)) && !l.dies_at(1, ValueId(1)));
        assert!(!(0..4).any(|i| l.dies_at(i, ValueId(3))), "live-out");
        assert_eq!(Liveness::default().after(0), &[] as &[ValueId], "no liveness: nothing dies");
    }
}
