//! The checkers of the pass results, run after each pass: the functional
//! graph, the joint graph and the partitions, each its stage's nodes
//! ([`Stage::check_nodes`]) plus its container's own invariants.

use super::joint::{backward_values, JointError, JointGraph};
use super::partition::{Partition, SubGraph};
use super::{FOutput, FunctionalGraph};
use crate::graph::{Node, Op};
use crate::types::{ParamType, ValueId};
use crate::verify::{Stage, VerifyError};

/// A verifier's finding about the joint graph or its partitions.
impl From<VerifyError> for JointError {
    fn from(e: VerifyError) -> JointError {
        match e {
            VerifyError::Stage { stage, graph, msg } => JointError { name: graph, msg: format!("{stage} graph: {msg}") },
            other => JointError { name: String::new(), msg: other.to_string() },
        }
    }
}

/// The checks of one stage's graph, failing with its name.
struct Check<'a> {
    stage: Stage,
    graph: &'a str,
}

impl Check<'_> {
    fn err(&self, msg: String) -> VerifyError {
        VerifyError::Stage { stage: self.stage, graph: self.graph.to_string(), msg }
    }

    /// [`Stage::check_nodes`] with `inputs` defined first; returns the
    /// defined values.
    fn nodes(&self, nodes: &[Node], num_values: usize, inputs: &[ValueId], params: &[ParamType]) -> Result<Vec<bool>, VerifyError> {
        let mut defined = vec![false; num_values];
        for v in inputs {
            match defined.get_mut(v.index()) {
                Some(d) if !*d => *d = true,
                _ => return Err(self.err(format!("input {v} is out of range or given twice"))),
            }
        }
        self.stage
            .check_nodes(nodes, &mut defined, params)
            .map_err(|(i, m)| self.err(format!("node {i} (`{}`): {m}", nodes[i].op.name())))?;
        Ok(defined)
    }

    fn outputs<'v>(&self, defined: &[bool], mut values: impl Iterator<Item = &'v ValueId>) -> Result<(), VerifyError> {
        match values.find(|v| !defined.get(v.index()).copied().unwrap_or(false)) {
            Some(v) => Err(self.err(format!("output {v} is not defined"))),
            None => Ok(()),
        }
    }
}

impl FunctionalGraph {
    /// The checker run after functionalization: [`Stage::Functional`]'s
    /// nodes, one primal per input group, every output defined.
    pub fn verify(&self) -> Result<(), VerifyError> {
        let c = Check { stage: Stage::Functional, graph: &self.name };
        let params: Vec<ParamType> = self.params.iter().map(|p| p.ty).collect();
        let defined = c.nodes(&self.nodes, self.num_values, &[], &params)?;
        let mut bases = vec![0usize; self.groups.single.len()];
        for n in &self.nodes {
            if let Op::Primal(g) = n.op {
                *bases.get_mut(g).ok_or_else(|| c.err(format!("no group {g}")))? += 1;
            }
        }
        if let Some(g) = bases.iter().position(|&b| b != 1) {
            return Err(c.err(format!("group {g} has {} bases", bases[g])));
        }
        if self.src_node.len() != self.num_values {
            return Err(c.err("the source-node table does not cover the values".into()));
        }
        if self.outputs.iter().any(|o| matches!(o, FOutput::Input(p) if !self.groups.group_of.get(*p).is_some_and(Option::is_some))) {
            return Err(c.err("an output is an input outside every group".into()));
        }
        let values = self.outputs.iter().flat_map(|o| match o {
            FOutput::Input(_) => [None, None],
            FOutput::AliasOfInput { value, .. } | FOutput::Value(value) => [Some(value), None],
            FOutput::ViewOfIntermediate { base, value } => [Some(base), Some(value)],
        });
        let written = self.mutated_groups.iter().chain(&self.metadata_mutations).map(|(_, v)| v);
        c.outputs(&defined, values.flatten().chain(written))
    }
}

impl JointGraph {
    /// The checker run after `create_joint` (and its common-subexpression
    /// elimination): [`Stage::Joint`]'s nodes, tangents numbered in order,
    /// the backward flags right, every output and gradient defined, and no
    /// forward output depending on a tangent.
    pub fn verify(&self) -> Result<(), VerifyError> {
        let c = Check { stage: Stage::Joint, graph: &self.name };
        let params: Vec<ParamType> = self.params.iter().map(|p| p.ty).collect();
        let defined = c.nodes(&self.nodes, self.num_values, &[], &params)?;
        let mut next_tangent = 0;
        for (i, node) in self.nodes.iter().enumerate() {
            match node.op {
                Op::Tangent(t) if t != next_tangent => return Err(c.err(format!("node {i}: tangent {t} out of order"))),
                Op::Tangent(_) => next_tangent += 1,
                Op::Primal(g) if g >= self.num_primals => return Err(c.err(format!("node {i}: no primal {g}"))),
                _ => {}
            }
        }
        if next_tangent != self.tangents.len() {
            return Err(c.err(format!("{} tangent nodes for {} tangents", next_tangent, self.tangents.len())));
        }
        if self.is_backward != backward_values(&self.nodes, self.num_values) || self.src_node.len() != self.num_values {
            return Err(c.err("wrong backward flags or source-node table".into()));
        }
        c.outputs(&defined, self.fw_outputs.iter().map(|o| &o.value).chain(self.input_grads.iter().flatten()))?;
        if let Some(o) = self.fw_outputs.iter().find(|o| self.is_backward[o.value.index()]) {
            return Err(c.err(format!("forward output {} depends on a tangent", o.value)));
        }
        for (ti, &oi) in self.tangents.iter().enumerate() {
            if self.fw_outputs.get(oi).and_then(|o| o.tangent) != Some(ti) {
                return Err(c.err(format!("tangent {ti} does not match forward output {oi}")));
            }
        }
        Ok(())
    }
}

impl Partition {
    /// The checker run after partitioning `jg`: each graph's nodes from
    /// its inputs ([`Stage::Forward`], [`Stage::Backward`]), every output
    /// defined, the forward free of tangents, and a slot per gradient.
    pub fn verify(&self, jg: &JointGraph) -> Result<(), VerifyError> {
        let params: Vec<ParamType> = jg.params.iter().map(|p| p.ty).collect();
        let check = |stage: Stage, sg: &SubGraph| {
            let c = Check { stage, graph: &jg.name };
            let defined = c.nodes(&sg.nodes, self.num_values, &sg.inputs, &params)?;
            c.outputs(&defined, sg.outputs.iter())
        };
        check(Stage::Forward, &self.forward)?;
        check(Stage::Backward, &self.backward)?;
        let c = Check { stage: Stage::Forward, graph: &jg.name };
        if self.forward.nodes.iter().any(|n| jg.is_backward.get(n.value().index()).copied().unwrap_or(false)) {
            return Err(c.err("a forward node depends on a tangent".into()));
        }
        if self.forward.outputs.len() != self.num_fw_outputs + self.saved.len() || self.grad_slots.len() != jg.params.len() {
            return Err(c.err("outputs, saved values and gradient slots do not line up".into()));
        }
        Ok(())
    }
}
