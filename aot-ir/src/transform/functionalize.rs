//! Functionalization: the graph as written (views, in-place ops, metadata
//! mutations) becomes a graph over immutable values.
//!
//! PyTorch gets there by tracing with `FunctionalTensorWrapper`s: every
//! tensor remembers its base and the view ops that led from the base to it;
//! a mutation writes a new version of the base (`*_scatter`), and a later
//! read of any alias replays its views from the newest base. This pass does
//! the same statically, over storage *roots*:
//!
//! - a root is an input storage group (the arguments that share one
//!   storage, as the caller passed them) or a storage an op allocated;
//! - every value is a root plus a [`ChainStep`] chain;
//! - a data mutation of a value produces a new version of its root:
//!   `root' = scatter(root, op(view(root, chain), ..), chain)` ([`Op::Mutate`]);
//! - a read of a value whose root has a newer version replays its chain on
//!   that version ([`Op::Regen`]);
//! - a metadata mutation (`t_`, `as_strided_`, ..) is the equivalent view op,
//!   and every value that is the same tensor object takes the new chain;
//! - the first mutation of an input group starts from a copy of the
//!   caller's storage ([`Op::Cow`]): inputs are never written inside the
//!   graph. Their final versions are graph outputs
//!   (`fn_input_mutations_to_outputs`) that the runtime epilogue copies back.
//!
//! The executor runs `Mutate` in place on the root version it consumes
//! (reinplacing): each version is read only until the next one exists,
//! because every later read goes through `Regen`. So a version is free to
//! be overwritten, and the only copies made are the `Cow`s of inputs.
//!
//! `reshape` and `contiguous` alias or copy depending on the layout at run
//! time. The pass takes the alias analysis' assumption, and marks the nodes
//! where the assumption matters (`check_alias` of [`Op::Dsl`]); the runtime
//! verifies them and falls back to a reference path when one is wrong.

use crate::analysis::alias::{metadata_mutation_as_view, AliasInfo};
pub use crate::graph::ChainStep;
use crate::graph::{Graph, Node, Op, Param};
use crate::op::{AliasEffect, OpClass, OpKind};
use crate::types::{Arg, ValueId};
use std::collections::HashSet;

/// How the call's result `i` is produced from the functional values.
#[derive(Clone, Debug, PartialEq)]
pub enum FOutput {
    /// The argument at this parameter position, the very tensor.
    Input(usize),
    /// A view of input group `group`'s storage with `value`'s geometry.
    AliasOfInput {
        /// The input group whose storage it views.
        group: usize,
        /// The functional value with the output's geometry.
        value: ValueId,
    },
    /// A tensor the graph allocated.
    Value(ValueId),
    /// A view with `value`'s geometry of the intermediate `base`, which the
    /// graph returns.
    ViewOfIntermediate {
        /// The intermediate the output views; the graph returns it.
        base: ValueId,
        /// The functional value with the output's geometry.
        value: ValueId,
    },
}

/// The input groups of one specialisation: arguments that are one tensor
/// (duplicates) or share a storage that the function writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InputGroups {
    /// Per parameter: its group, `None` for scalars.
    pub group_of: Vec<Option<usize>>,
    /// Per group: whether it holds one tensor object (its base is that
    /// tensor) or several (its base is their whole storage, 1-D).
    pub single: Vec<bool>,
    /// Per parameter: the first parameter that is the very same tensor
    /// (itself when none before it is); empty means all distinct, or one
    /// object per one-tensor group.
    pub object_of: Vec<Option<usize>>,
}

/// A functionalized graph: no value is ever written after it is defined
/// (`verify::Stage::Functional`). Its values are its own, not the source's.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionalGraph {
    /// The source function's name.
    pub name: String,
    /// The source's parameters (names for the listing, scalar types).
    pub params: Vec<Param>,
    /// How the call's arguments form input groups: the specialisation this
    /// graph is for.
    pub groups: InputGroups,
    /// How many values the graph defines; their ids are below it.
    pub num_values: usize,
    /// The nodes in program order.
    pub nodes: Vec<Node>,
    /// Per value: the source node it came from (DSL ops and writes), whose
    /// operands an error blames.
    pub src_node: Vec<Option<usize>>,
    /// `fn_input_mutations_to_outputs`: per data-mutated group, its final version.
    pub mutated_groups: Vec<(usize, ValueId)>,
    /// Per metadata-mutated parameter, the value with its final geometry.
    pub metadata_mutations: Vec<(usize, ValueId)>,
    /// Per user output, how it is produced.
    pub outputs: Vec<FOutput>,
    /// Per output: whether eager returns an autograd view (a tensor with a
    /// `._base`). A value reached through `detach()`, or an allocated
    /// tensor whose own metadata was mutated, is not one, even though the
    /// functional value is a view of its root.
    pub output_is_view: Vec<bool>,
    /// Per output: the tensor object it is (outputs with equal entries are
    /// the same tensor; others must be distinct tensors even when their
    /// functional values coincide, e.g. `y` and `y.detach()`).
    pub output_objects: Vec<ValueId>,
}

#[derive(Clone, Copy)]
struct RootState {
    value: ValueId,
    version: u32,
    group: Option<usize>,
    copied: bool,
}

struct Pass {
    alias: AliasInfo,
    nodes: Vec<Node>,
    src_node: Vec<Option<usize>>,
    num_values: u32,
    roots: Vec<RootState>,
    root_of: Vec<usize>,
    chain: Vec<Vec<ChainStep>>,
    /// The functional value of a source value and the root version it was read at.
    cur: Vec<Option<(ValueId, u32)>>,
    /// The tensor object a value is: the alias analysis' identity, with the
    /// parameters of a one-tensor group (the same tensor passed twice)
    /// made one object, so a metadata mutation through one is seen
    /// through the other.
    object: Vec<ValueId>,
}

/// Functionalizes `g` for a call whose tensor arguments form `groups`.
pub fn functionalize(g: &Graph, groups: &InputGroups) -> FunctionalGraph {
    let alias = AliasInfo::compute(g);
    let sensitive = sensitive_storages(g, &alias, groups);
    let n = g.values.len();
    let mut p = Pass {
        alias,
        nodes: Vec::new(),
        src_node: Vec::new(),
        num_values: 0,
        roots: Vec::new(),
        root_of: vec![usize::MAX; n],
        chain: vec![Vec::new(); n],
        cur: vec![None; n],
        object: Vec::new(),
    };
    let mut group_root = vec![usize::MAX; groups.single.len()];
    for (gi, slot) in group_root.iter_mut().enumerate() {
        let out = p.fresh();
        p.push(Node::new(Op::Primal(gi), vec![], Some(out)), None);
        *slot = p.roots.len();
        p.roots.push(RootState { value: out, version: 0, group: Some(gi), copied: false });
    }
    for (pi, param) in g.params.iter().enumerate() {
        let (Some(v), Some(gi)) = (param.value, groups.group_of.get(pi).copied().flatten()) else { continue };
        let r = group_root[gi];
        p.root_of[v.index()] = r;
        if groups.single[gi] {
            p.cur[v.index()] = Some((p.roots[r].value, 0));
        } else {
            p.chain[v.index()] = vec![ChainStep::ArgGeometry(pi)];
        }
    }
    let first_param_value: Vec<Option<ValueId>> = (0..groups.single.len())
        .map(|gi| {
            let pi = groups.group_of.iter().position(|x| *x == Some(gi))?;
            g.params[pi].value
        })
        .collect();
    p.object = (0..n)
        .map(|i| {
            let id = p.alias.identity[i];
            let Some(pi) = g.param_of(id) else { return id };
            if let Some(Some(first)) = groups.object_of.get(pi) {
                return g.params[*first].value.unwrap_or(id);
            }
            match groups.group_of.get(pi).copied().flatten() {
                Some(gi) if groups.single[gi] => first_param_value[gi].unwrap_or(id),
                _ => id,
            }
        })
        .collect();
    let mut metadata_mutated = vec![false; g.params.len()];
    for (k, node) in g.nodes.iter().enumerate() {
        // The source holds only DSL nodes (its verifier checks).
        let Some(op) = node.kind() else { continue };
        match op.class() {
            OpClass::DataMutation => p.mutation(k, op, node),
            OpClass::MetadataMutation => {
                if let Some(t) = node.target() {
                    let id = p.object[t.index()];
                    if let Some(pi) = g.param_of(id) {
                        metadata_mutated[pi] = true;
                    }
                }
                p.metadata_mutation(k, op, node);
            }
            OpClass::Compute | OpClass::View => p.value(k, op, node, &sensitive, groups),
        }
    }
    let outputs = g.outputs.iter().map(|&o| p.output(g, o)).collect();
    let output_objects = g.outputs.iter().map(|&o| p.object[o.index()]).collect();
    let output_is_view = g.outputs.iter().map(|&o| p.alias.autograd_base[o.index()].is_some()).collect();
    let mutated_groups = group_root.iter().enumerate().filter(|(_, &r)| p.roots[r].copied).map(|(gi, &r)| (gi, p.roots[r].value)).collect();
    let metadata_mutations = metadata_mutated
        .iter()
        .enumerate()
        .filter(|(_, &m)| m)
        .filter_map(|(pi, _)| g.params[pi].value.map(|v| (pi, p.fetch(v))))
        .collect();
    FunctionalGraph {
        name: g.name.clone(),
        params: g.params.clone(),
        groups: groups.clone(),
        num_values: p.num_values as usize,
        nodes: p.nodes,
        src_node: p.src_node,
        mutated_groups,
        metadata_mutations,
        outputs,
        output_is_view,
        output_objects,
    }
}

/// A storage as this call sees it: parameters in one input group share one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum StorageKey {
    Group(usize),
    Static(crate::analysis::alias::StorageId),
}

fn storage_key(alias: &AliasInfo, groups: &InputGroups, v: ValueId) -> StorageKey {
    match alias.owner_of(v) {
        crate::analysis::alias::StorageOwner::Input(p) => match groups.group_of.get(p).copied().flatten() {
            Some(g) => StorageKey::Group(g),
            None => StorageKey::Static(alias.storage_of(v)),
        },
        _ => StorageKey::Static(alias.storage_of(v)),
    }
}

/// Storages where a wrong `reshape`/`contiguous` assumption changes the
/// result: those written (data or metadata) and those of outputs.
fn sensitive_storages(g: &Graph, alias: &AliasInfo, groups: &InputGroups) -> HashSet<StorageKey> {
    let mut s: HashSet<_> = g.nodes.iter().filter_map(Node::target).map(|t| storage_key(alias, groups, t)).collect();
    s.extend(g.outputs.iter().map(|&o| storage_key(alias, groups, o)));
    s
}

impl Pass {
    /// A compute or view node: a new value, or a view of its receiver's
    /// root. A `reshape`/`contiguous` over a storage some write reaches is
    /// checked at run time against the plan's guess.
    fn value(&mut self, k: usize, op: OpKind, node: &Node, sensitive: &HashSet<StorageKey>, groups: &InputGroups) {
        let Some(out) = node.out else { return };
        let parent = self.alias.parent[out.index()];
        let maybe = matches!(op.alias_effect(), AliasEffect::MaybeView | AliasEffect::MaybeSame);
        let check = (maybe && sensitive.contains(&storage_key(&self.alias, groups, out))).then_some(parent.is_some());
        // The receiver of a `reshape` the analysis decided copies is still
        // sensitive when its own storage is.
        let check = check.or_else(|| {
            let recv = node.receiver()?;
            (maybe && sensitive.contains(&storage_key(&self.alias, groups, recv))).then_some(parent.is_some())
        });
        match parent {
            Some(recv) => self.view(k, op, node, out, recv, check),
            None => self.compute(k, op, node, out, check),
        }
    }

    /// How user output `o` is handed out.
    fn output(&mut self, g: &Graph, o: ValueId) -> FOutput {
        let id = self.alias.identity[o.index()];
        if let Some(pi) = g.param_of(id) {
            return FOutput::Input(pi);
        }
        let value = self.fetch(o);
        let r = self.root_of[o.index()];
        match self.roots[r].group {
            Some(group) => FOutput::AliasOfInput { group, value },
            // An allocated tensor, possibly with its own metadata changed.
            None if self.chain[o.index()].is_empty() || self.alias.autograd_base[o.index()].is_none() => FOutput::Value(value),
            None => FOutput::ViewOfIntermediate { base: self.roots[r].value, value },
        }
    }

    fn fresh(&mut self) -> ValueId {
        self.num_values += 1;
        self.src_node.push(None);
        ValueId(self.num_values - 1)
    }

    /// Appends `node`, which came from source node `src`.
    fn push(&mut self, node: Node, src: Option<usize>) {
        if let Some(slot) = self.src_node.get_mut(node.value().index()) {
            *slot = src;
        }
        self.nodes.push(node);
    }

    /// The functional value of source value `v` now: regenerated from its
    /// root's newest version when that changed since `v` was read.
    fn fetch(&mut self, v: ValueId) -> ValueId {
        let r = self.root_of[v.index()];
        let root = self.roots[r];
        if let Some((fv, ver)) = self.cur[v.index()] {
            if ver == root.version {
                return fv;
            }
        }
        let fv = if self.chain[v.index()].is_empty() {
            root.value
        } else {
            let out = self.fresh();
            self.push(Node::new(Op::Regen(self.chain[v.index()].clone()), vec![Arg::Tensor(root.value)], Some(out)), None);
            out
        };
        self.cur[v.index()] = Some((fv, root.version));
        fv
    }

    fn map_args(&mut self, node: &Node) -> Vec<Arg> {
        node.args
            .iter()
            .map(|a| match a {
                Arg::Tensor(v) => Arg::Tensor(self.fetch(*v)),
                other => other.clone(),
            })
            .collect()
    }

    fn compute(&mut self, k: usize, op: OpKind, node: &Node, out: ValueId, check: Option<bool>) {
        let args = self.map_args(node);
        let fv = self.fresh();
        self.push(Node { op: Op::Dsl { op, check_alias: check }, args, out: Some(fv), ..node.clone() }, Some(k));
        self.root_of[out.index()] = self.roots.len();
        self.roots.push(RootState { value: fv, version: 0, group: None, copied: false });
        self.cur[out.index()] = Some((fv, 0));
    }

    fn view(&mut self, k: usize, op: OpKind, node: &Node, out: ValueId, recv: ValueId, check: Option<bool>) {
        let args = self.map_args(node);
        let fv = self.fresh();
        self.push(Node { op: Op::Dsl { op, check_alias: check }, args, out: Some(fv), ..node.clone() }, Some(k));
        let r = self.root_of[recv.index()];
        self.root_of[out.index()] = r;
        self.chain[out.index()] = extend(&self.chain[recv.index()], op, &node.args);
        self.cur[out.index()] = Some((fv, self.roots[r].version));
    }

    fn mutation(&mut self, k: usize, op: OpKind, node: &Node) {
        let Some(t) = node.target() else { return };
        let r = self.root_of[t.index()];
        if self.roots[r].group.is_some() && !self.roots[r].copied {
            let out = self.fresh();
            self.push(Node::new(Op::Cow, vec![Arg::Tensor(self.roots[r].value)], Some(out)), None);
            let st = &mut self.roots[r];
            st.value = out;
            st.version += 1;
            st.copied = true;
        }
        // Operands are read after the copy, so an operand aliasing the
        // target reads the version being written, as in eager.
        let mut args = vec![Arg::Tensor(self.roots[r].value)];
        args.extend(self.map_args(node));
        let out = self.fresh();
        // A write through a `detach()` alias is invisible to autograd, like
        // one under `no_grad`: the node carries that as its `no_grad` flag.
        let no_grad = node.no_grad || self.alias.through_detach[t.index()];
        let op = Op::Mutate { op, chain: self.chain[t.index()].clone() };
        self.push(Node { op, args, out: Some(out), no_grad, ..node.clone() }, Some(k));
        let st = &mut self.roots[r];
        st.value = out;
        st.version += 1;
    }

    fn metadata_mutation(&mut self, k: usize, op: OpKind, node: &Node) {
        let (Some(t), Some(view_op)) = (node.target(), metadata_mutation_as_view(op)) else { return };
        let args = self.map_args(node);
        let fv = self.fresh();
        let view_node = Node { op: view_op.into(), args, out: Some(fv), ..node.clone() };
        let chain = extend(&self.chain[t.index()], view_op, &view_node.args);
        self.push(view_node, Some(k));
        let r = self.root_of[t.index()];
        let ver = self.roots[r].version;
        let id = self.object[t.index()];
        for i in 0..self.chain.len() {
            if self.object[i] == id && self.root_of[i] == r {
                self.chain[i] = chain.clone();
                self.cur[i] = Some((fv, ver));
            }
        }
    }
}

/// The chain of a view of a value with chain `base`. `as_strided` places
/// the view absolutely in the storage, so it replaces what came before,
/// except a leading `ArgGeometry`: that step also gives the argument's
/// dtype (an argument may read its group's storage as another dtype), in
/// whose elements `as_strided` counts; `contiguous` (assumed to return its
/// receiver) and `detach` keep the geometry.
fn extend(base: &[ChainStep], op: OpKind, args: &[Arg]) -> Vec<ChainStep> {
    let step = ChainStep::View { op, args: args[1..].to_vec() };
    match op {
        OpKind::AsStrided => base.iter().take(1).filter(|s| matches!(s, ChainStep::ArgGeometry(_))).cloned().chain([step]).collect(),
        OpKind::Contiguous | OpKind::Detach => base.to_vec(),
        _ => base.iter().cloned().chain([step]).collect(),
    }
}

#[cfg(test)]
mod tests;
