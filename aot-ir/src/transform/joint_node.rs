//! The node type of the joint IR ([`JNode`], [`JOp`]) and [`Emit`], the
//! [`GradBuilder`] that appends the nodes a gradient rule asks for. Both
//! [`super::joint`] (which builds the joint graph) and the partitioner
//! read these; the rules themselves ([`super::grad_rules`]) know nothing of
//! nodes.

use super::cse::{op_key, prim_node_key, regen_key, CseKey};
use super::functionalize::ChainStep;
use super::grad_rules::{GradBuilder, Prim, RuleError};
use crate::graph::args::t;
use crate::op::OpKind;
use crate::types::{Arg, ValueId};
use std::collections::HashMap;

/// What a joint node computes. Arguments are in [`JNode::args`].
#[derive(Clone, Debug, PartialEq)]
pub enum JOp {
    /// The base of input group `.0` (a primal input).
    Primal(usize),
    /// Tangent `.0` (the gradient of a forward output).
    Tangent(usize),
    /// `[src]`: a copy of `src`'s storage with its geometry.
    Cow,
    /// `[root]`: the chain replayed on `root` (a view).
    Regen(Vec<ChainStep>),
    /// A DSL op that computes or views, arguments as in the source.
    /// `src_node`: the source node it came from (forward nodes only).
    Op { op: OpKind, src_node: Option<usize>, check_alias: Option<bool> },
    /// `[root, view, args..]`: a new root version: a copy of `root` whose
    /// region `chain` (which `view` is) the in-place `op` rewrote.
    Mutate { op: OpKind, chain: Vec<ChainStep>, src_node: usize },
    /// A backward-only primitive.
    Prim(Prim),
}

/// One node: defines `out`.
#[derive(Clone, Debug, PartialEq)]
pub struct JNode {
    pub op: JOp,
    pub args: Vec<Arg>,
    pub out: ValueId,
    /// Depends on a tangent: can only run in the backward.
    pub is_backward: bool,
}

impl JNode {
    pub fn uses(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().filter_map(Arg::as_tensor)
    }

    /// Whether argument `i` is read for its shape and dtype only.
    pub fn is_meta_arg(&self, i: usize) -> bool {
        match &self.op {
            JOp::Prim(p) => p.meta_args().contains(&i),
            JOp::Op { op: OpKind::ZerosLike | OpKind::OnesLike | OpKind::FullLike, .. } => i == 0,
            _ => false,
        }
    }

    /// The tensors whose data the node reads.
    pub fn data_uses(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().enumerate().filter(|(i, _)| !self.is_meta_arg(*i)).filter_map(|(_, a)| a.as_tensor())
    }

    /// Elementwise or view-like: cheap to recompute rather than save.
    pub fn is_cheap(&self) -> bool {
        match &self.op {
            JOp::Primal(_) | JOp::Tangent(_) => false,
            JOp::Cow | JOp::Mutate { .. } => false,
            JOp::Regen(_) => true,
            JOp::Prim(p) => p.is_cheap(),
            JOp::Op { op, .. } => {
                !op.is_random()
                    && !matches!(op, OpKind::Matmul | OpKind::Mm | OpKind::Bmm | OpKind::Softmax | OpKind::LogSoftmax | OpKind::VarDim)
            }
        }
    }
}

/// Appends nodes to the joint graph under construction.
/// Identical pure nodes are emitted once (rules often recompute the same
/// value, e.g. var's mean, or a forward value).
pub(crate) struct Emit<'a> {
    pub nodes: &'a mut Vec<JNode>,
    pub num_values: &'a mut usize,
    pub seen: HashMap<CseKey, ValueId>,
}

/// The value-numbering key of a node, `None` for nodes that must not be
/// merged (inputs, random ops, mutations, copies of inputs, alias-checked
/// ops).
pub(crate) fn cse_key(op: &JOp, args: &[Arg]) -> Option<CseKey> {
    match op {
        JOp::Op { op, check_alias: None, .. } if !op.is_random() => Some(op_key(*op, args)),
        JOp::Prim(p) => prim_node_key(p, args),
        JOp::Regen(c) => Some(regen_key(c, args)),
        _ => None,
    }
}

impl Emit<'_> {
    pub fn push(&mut self, op: JOp, args: Vec<Arg>) -> ValueId {
        let key = cse_key(&op, &args);
        if let Some(v) = key.as_ref().and_then(|k| self.seen.get(k)) {
            return *v;
        }
        let out = ValueId(*self.num_values as u32);
        *self.num_values += 1;
        self.nodes.push(JNode { op, args, out, is_backward: false });
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
        Ok(self.push(JOp::Op { op, src_node: None, check_alias: None }, args))
    }
    fn prim(&mut self, p: Prim, args: Vec<Arg>) -> Result<ValueId, RuleError> {
        Ok(self.push(JOp::Prim(p), args))
    }
    fn regen(&mut self, root: ValueId, chain: &[ChainStep]) -> Result<ValueId, RuleError> {
        Ok(self.push(JOp::Regen(chain.to_vec()), vec![t(root)]))
    }
}
