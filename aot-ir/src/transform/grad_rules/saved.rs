//! Which operands a rule reads: what eager autograd saves for an op's
//! backward (PyTorch's saved tensors), found by running the op's rule on a
//! builder that only records the values asked for.
//!
//! Eager autograd checks each saved tensor's version when the backward
//! runs: a tensor written in place after it was saved fails the backward
//! ("modified by an inplace operation"). The compiled training path reads
//! the functional version instead and would silently succeed, so a
//! function that writes a saved tensor runs the eager reference
//! (`aot-runtime`'s training plan asks this module).

use super::{op_vjp, ChainStep, GradBuilder, OutRef, Prim};
use crate::graph::{Node, Op};
use crate::op::OpKind;
use crate::types::{Arg, SpanId, ValueId};

/// What an op's backward reads of its operands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Saved {
    /// Per argument position: its data is read.
    pub inputs: Vec<bool>,
    /// The op's result is read.
    pub out: bool,
}

/// The operands whose data the backward of `op(args..)` reads, for the
/// argument positions that want a gradient (`needs`). `None` when the op
/// has no rule (nothing is recorded for it, or it is refused elsewhere).
pub fn saved_operands(op: OpKind, args: &[Arg], needs: &[bool]) -> Option<Saved> {
    let n = args.len() as u32;
    // Argument i is ValueId(i), the result n, the output gradient n + 1.
    let probe_args: Vec<Arg> =
        args.iter().enumerate().map(|(i, a)| if a.as_tensor().is_some() { Arg::Tensor(ValueId(i as u32)) } else { a.clone() }).collect();
    let mut p = Probe { next: n + 2, operands: n, read: vec![false; args.len() + 1] };
    op_vjp(&mut p, op, &probe_args, &OutRef::Value(ValueId(n)), ValueId(n + 1), needs).ok()?;
    let out = p.read[args.len()];
    p.read.truncate(args.len());
    Some(Saved { inputs: p.read, out })
}

/// A builder that hands out fresh values and records which operands (and
/// the result) are read for their data.
struct Probe {
    next: u32,
    /// Values below this are the op's arguments, this one its result.
    operands: u32,
    read: Vec<bool>,
}

impl Probe {
    fn fresh(&mut self) -> ValueId {
        self.next += 1;
        ValueId(self.next - 1)
    }

    /// Records the data reads of a node with these arguments.
    fn reads(&mut self, node: &Node) {
        for v in node.data_uses() {
            if v.0 <= self.operands {
                self.read[v.index()] = true;
            }
        }
    }
}

impl GradBuilder for Probe {
    type Error = String;

    fn op(&mut self, op: OpKind, args: Vec<Arg>) -> Result<ValueId, String> {
        self.reads(&Node { op: op.into(), args, out: None, no_grad: false, span: SpanId(0) });
        Ok(self.fresh())
    }

    fn prim(&mut self, p: Prim, args: Vec<Arg>) -> Result<ValueId, String> {
        self.reads(&Node { op: Op::Prim(p), args, out: None, no_grad: false, span: SpanId(0) });
        Ok(self.fresh())
    }

    fn regen(&mut self, root: ValueId, _: &[ChainStep]) -> Result<ValueId, String> {
        if root.0 <= self.operands {
            self.read[root.index()] = true;
        }
        Ok(self.fresh())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::args::{f, t};

    fn saved(op: OpKind, args: &[Arg], needs: &[bool]) -> (Vec<bool>, bool) {
        let s = saved_operands(op, args, needs).expect("a rule");
        (s.inputs, s.out)
    }

    #[test]
    fn follows_pytorchs_saved_tensors() {
        let (x, y) = (t(ValueId(10)), t(ValueId(11)));
        // add saves nothing (its rule only undoes broadcasting, by shape)
        assert_eq!(saved(OpKind::Add, &[x.clone(), y.clone()], &[true, true]), (vec![false, false], false));
        // mul saves each operand for the other's gradient
        assert_eq!(saved(OpKind::Mul, &[x.clone(), y.clone()], &[true, true]), (vec![true, true], false));
        assert_eq!(saved(OpKind::Mul, &[x.clone(), y.clone()], &[true, false]), (vec![false, true], false));
        assert_eq!(saved(OpKind::Mul, &[x.clone(), f(2.0)], &[true, false]), (vec![false, false], false));
        // sigmoid and exp save their result, sin and cos their input
        assert_eq!(saved(OpKind::Sigmoid, std::slice::from_ref(&x), &[true]), (vec![false], true));
        assert_eq!(saved(OpKind::Exp, std::slice::from_ref(&x), &[true]), (vec![false], true));
        assert_eq!(saved(OpKind::Cos, std::slice::from_ref(&x), &[true]), (vec![true], false));
        assert_eq!(saved(OpKind::Matmul, &[x.clone(), y.clone()], &[true, true]), (vec![true, true], false));
    }
}
