//! `Emit`, the [`GradBuilder`] that appends the nodes a gradient rule
//! asks for to the joint graph under construction ([`super::joint`]),
//! emitting identical pure nodes once; the rules themselves
//! ([`super::grad_rules`]) know nothing of nodes.

use super::cse::{op_key, prim_node_key, regen_key, CseKey};
use super::functionalize::ChainStep;
use super::grad_rules::{GradBuilder, Prim, RuleError};
use crate::graph::{args::t, Node, Op};
use crate::op::OpKind;
use crate::types::{Arg, ValueId};
use std::collections::HashMap;

/// Appends nodes to the joint graph under construction.
/// Identical pure nodes are emitted once (rules often recompute the same
/// value, e.g. var's mean, or a forward value).
pub(crate) struct Emit<'a> {
    pub nodes: &'a mut Vec<Node>,
    pub num_values: &'a mut usize,
    pub seen: HashMap<CseKey, ValueId>,
}

/// The value-numbering key of a node, `None` for nodes that must not be
/// merged (inputs, random ops, mutations, copies of inputs, alias-checked
/// ops).
pub(crate) fn cse_key(op: &Op, args: &[Arg]) -> Option<CseKey> {
    match op {
        Op::Dsl { op, check_alias: None } if !op.is_random() => Some(op_key(*op, args)),
        Op::Prim(p) => prim_node_key(p, args),
        Op::Regen(c) => Some(regen_key(c, args)),
        _ => None,
    }
}

impl Emit<'_> {
    pub fn push(&mut self, op: Op, args: Vec<Arg>) -> ValueId {
        let key = cse_key(&op, &args);
        if let Some(v) = key.as_ref().and_then(|k| self.seen.get(k)) {
            return *v;
        }
        let out = ValueId(*self.num_values as u32);
        *self.num_values += 1;
        self.nodes.push(Node::new(op, args, Some(out)));
        if let Some(k) = key {
            self.seen.insert(k, out);
        }
        out
    }
}

/// Emitting never fails: a rule's refusal is the only error.
impl GradBuilder for Emit<'_> {
    type Error = RuleError;
    fn op(&mut self, op: OpKind, args: Vec<Arg>) -> Result<ValueId, RuleError> {
        Ok(self.push(op.into(), args))
    }
    fn prim(&mut self, p: Prim, args: Vec<Arg>) -> Result<ValueId, RuleError> {
        Ok(self.push(Op::Prim(p), args))
    }
    fn regen(&mut self, root: ValueId, chain: &[ChainStep]) -> Result<ValueId, RuleError> {
        Ok(self.push(Op::Regen(chain.to_vec()), vec![t(root)]))
    }
}
