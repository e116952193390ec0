//! Storage and alias classes through views.
//!
//! Every tensor value belongs to one *storage class*: the storage of a
//! parameter, or of a value an op allocated. Views join their receiver's
//! class. This is exact for the DSL except for two ops whose aliasing the
//! eager runtime decides from the layout: `reshape` (a view when possible,
//! else a copy) and `contiguous` (the receiver itself when already
//! contiguous, else a copy). The analysis assumes the aliasing outcome, the
//! common case for contiguous arguments, and marks every value that depends
//! on that assumption as `uncertain`, so the runtime can refine it.
//!
//! Besides storage, autograd cares about two other relations, kept here too:
//! - `autograd_base`: PyTorch's `._base`, the root of a chain of
//!   differentiable views. `detach()` shares storage but starts no view
//!   relation (its result has no `._base`).
//! - `grad_root`: the group of values whose `requires_grad` changes
//!   together. An in-place op on a view updates its base's history (and so
//!   every other view of that base), but not a detached alias.

use crate::graph::{Graph, ValueDef};
use crate::op::{AliasEffect, OpKind};
use crate::types::{Arg, ValueId};

/// A storage class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageId(pub u32);

/// Who allocated a storage class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageOwner {
    /// The storage of the tensor parameter at this position.
    Input(usize),
    /// Allocated inside the function by the value's defining op.
    Intermediate(ValueId),
}

/// The static alias facts of every value.
#[derive(Clone, Debug)]
pub struct AliasInfo {
    /// Per value, its storage class: values with equal ids share storage.
    pub storage: Vec<StorageId>,
    /// Per storage class, who allocated it.
    pub owners: Vec<StorageOwner>,
    /// The value this one is a view (or detach, or maybe-same) of.
    pub parent: Vec<Option<ValueId>>,
    /// Per value, how it aliases its `parent`; `None` when it has storage of
    /// its own.
    pub effect: Vec<Option<AliasEffect>>,
    /// The tensor object this value is: itself, or for `contiguous()` its receiver's identity.
    pub identity: Vec<ValueId>,
    /// PyTorch's `._base`.
    pub autograd_base: Vec<Option<ValueId>>,
    /// The group whose `requires_grad` changes together.
    pub grad_root: Vec<ValueId>,
    /// Reached through a `detach()` from its storage's owner.
    pub through_detach: Vec<bool>,
    /// Depends on the aliasing outcome of a `reshape` or `contiguous`.
    pub uncertain: Vec<bool>,
}

impl AliasInfo {
    /// Computes the facts of a source graph, assuming what the analysis
    /// decides for each `reshape`/`contiguous` (see [`AliasInfo::compute_with`]).
    pub fn compute(g: &Graph) -> AliasInfo {
        AliasInfo::compute_with(g, &[])
    }

    /// As [`AliasInfo::compute`], with the outcome of some `reshape` and
    /// `contiguous` nodes known (from a run): per node index, `Some(true)`
    /// when the result aliased its receiver, `Some(false)` when it copied.
    pub fn compute_with(g: &Graph, outcomes: &[Option<bool>]) -> AliasInfo {
        let n = g.values.len();
        let mut a = AliasInfo {
            storage: vec![StorageId(0); n],
            owners: Vec::new(),
            parent: vec![None; n],
            effect: vec![None; n],
            identity: (0..n as u32).map(ValueId).collect(),
            autograd_base: vec![None; n],
            grad_root: (0..n as u32).map(ValueId).collect(),
            through_detach: vec![false; n],
            uncertain: vec![false; n],
        };
        // Program order: parameters, then nodes. The verifier guarantees
        // every value is defined before use, so parents come first.
        let mut noncontig = vec![false; n];
        for p in &g.params {
            if let Some(v) = p.value {
                if let ValueDef::Param(i) = g.values[v.index()].def {
                    a.new_storage(v, StorageOwner::Input(i));
                }
            }
        }
        for (k, node) in g.nodes.iter().enumerate() {
            // A call not yet inlined (the macro's compile-time checks):
            // its results count as new storage; the runtime checks the
            // inlined graph again.
            if let crate::graph::Op::Call(site) = &node.op {
                for &r in site.results.iter().flatten() {
                    a.new_storage(r, StorageOwner::Intermediate(r));
                }
                continue;
            }
            // The source holds DSL nodes only (its verifier checks).
            let Some(op) = node.kind() else { continue };
            let recv = node.receiver();
            let outcome = outcomes.get(k).copied().flatten();
            if let Some(v) = node.out {
                match (op.alias_effect(), recv) {
                    (AliasEffect::MaybeView | AliasEffect::MaybeSame, Some(_)) if outcome == Some(false) => {
                        a.new_storage(v, StorageOwner::Intermediate(v));
                    }
                    (effect @ (AliasEffect::MaybeView | AliasEffect::MaybeSame), Some(p)) if outcome == Some(true) => {
                        a.derive(v, p, effect);
                        a.uncertain[v.index()] = a.uncertain[p.index()];
                        noncontig[v.index()] = noncontig[p.index()] || breaks_contiguity(op, &node.args);
                    }
                    (AliasEffect::MaybeView | AliasEffect::MaybeSame, Some(p)) if noncontig[p.index()] => {
                        // `reshape`/`contiguous` of a permuted or strided
                        // layout copies (the common case; uncertain).
                        a.new_storage(v, StorageOwner::Intermediate(v));
                        a.uncertain[v.index()] = true;
                    }
                    (AliasEffect::Fresh | AliasEffect::InPlace, _) | (_, None) => a.new_storage(v, StorageOwner::Intermediate(v)),
                    (effect, Some(p)) => {
                        a.derive(v, p, effect);
                        noncontig[v.index()] = noncontig[p.index()] || breaks_contiguity(op, &node.args);
                    }
                }
            } else if let (Some(t), true) =
                (node.target(), matches!(op, OpKind::TInplace | OpKind::TransposeInplace | OpKind::AsStridedInplace))
            {
                // The tensor object's own layout is now permuted or strided.
                let id = a.identity[t.index()];
                for (i, nc) in noncontig.iter_mut().enumerate() {
                    if a.identity[i] == id {
                        *nc = true;
                    }
                }
            }
        }
        a
    }

    fn new_storage(&mut self, v: ValueId, owner: StorageOwner) {
        self.storage[v.index()] = StorageId(self.owners.len() as u32);
        self.owners.push(owner);
    }

    fn derive(&mut self, v: ValueId, p: ValueId, effect: AliasEffect) {
        let (vi, pi) = (v.index(), p.index());
        self.storage[vi] = self.storage[pi];
        self.parent[vi] = Some(p);
        self.effect[vi] = Some(effect);
        self.uncertain[vi] = self.uncertain[pi] || matches!(effect, AliasEffect::MaybeView | AliasEffect::MaybeSame);
        self.through_detach[vi] = self.through_detach[pi] || effect == AliasEffect::Detach;
        match effect {
            AliasEffect::MaybeSame => {
                self.identity[vi] = self.identity[pi];
                self.autograd_base[vi] = self.autograd_base[pi];
                self.grad_root[vi] = self.grad_root[pi];
            }
            AliasEffect::Detach => {
                // A detached alias is a new autograd leaf: no `._base`, own group.
                self.grad_root[vi] = v;
            }
            _ => {
                self.autograd_base[vi] = Some(self.autograd_base[pi].unwrap_or(self.identity[pi]));
                self.grad_root[vi] = self.grad_root[pi];
            }
        }
    }

    /// The storage class of `v`.
    pub fn storage_of(&self, v: ValueId) -> StorageId {
        self.storage[v.index()]
    }

    /// Who allocated `v`'s storage.
    pub fn owner_of(&self, v: ValueId) -> StorageOwner {
        self.owners[self.storage_of(v).0 as usize]
    }

    /// The parameter whose storage this value lives in, if any.
    pub fn input_of(&self, v: ValueId) -> Option<usize> {
        match self.owner_of(v) {
            StorageOwner::Input(p) => Some(p),
            StorageOwner::Intermediate(_) => None,
        }
    }
}

/// One layout-changing step, as applied to a receiver.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The view or metadata op.
    pub op: OpKind,
    /// Its arguments after the receiver.
    pub args: Vec<Arg>,
}

/// How a value's layout was obtained from its storage: a storage class and
/// the view steps applied since. Two values with equal paths have the same
/// sizes, strides and offset whatever the arguments' shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutPath {
    /// The storage class the path starts from.
    pub storage: StorageId,
    /// The layout-changing steps since, in order.
    pub steps: Vec<Step>,
}

/// Tracks layout paths in program order. Metadata mutations (`t_`,
/// `as_strided_`, ..) change a tensor's layout in place, so a path is a fact
/// about a value *at a point of the program*; the tracker is advanced node
/// by node by whoever needs those facts.
#[derive(Clone, Debug)]
pub struct LayoutTracker {
    paths: Vec<Option<LayoutPath>>,
}

impl LayoutTracker {
    /// The paths of the parameters, before any node ran.
    pub fn new(g: &Graph, alias: &AliasInfo) -> Self {
        let mut paths = vec![None; g.values.len()];
        for p in &g.params {
            if let Some(v) = p.value {
                paths[v.index()] = Some(LayoutPath { storage: alias.storage_of(v), steps: Vec::new() });
            }
        }
        LayoutTracker { paths }
    }

    /// The current path of a value (`None` before it is defined).
    pub fn path(&self, v: ValueId) -> Option<&LayoutPath> {
        self.paths.get(v.index())?.as_ref()
    }

    /// Applies node `k` of the graph.
    pub fn apply(&mut self, g: &Graph, alias: &AliasInfo, k: usize) {
        let node = &g.nodes[k];
        let Some(op) = node.kind() else { return };
        let recv = node.receiver();
        if let Some(out) = node.out {
            // A `reshape`/`contiguous` the alias analysis decided copies has no parent.
            let parent = alias.parent[out.index()].and_then(|_| recv.and_then(|r| self.path(r)));
            let path = match (op.alias_effect(), parent) {
                (AliasEffect::View | AliasEffect::MaybeView, Some(p)) => extend(p, op, &node.args[1..]),
                (AliasEffect::Detach | AliasEffect::MaybeSame, Some(p)) => p.clone(),
                _ => LayoutPath { storage: alias.storage_of(out), steps: Vec::new() },
            };
            self.paths[out.index()] = Some(path);
        } else if let (Some(view_op), Some(t)) = (metadata_mutation_as_view(op), node.target()) {
            // A metadata mutation changes the layout of the tensor object, and
            // so of every value that *is* that object (a `contiguous()` that
            // returned its receiver).
            let id = alias.identity[t.index()];
            if let Some(p) = self.path(t).cloned() {
                let new = extend(&p, view_op, &node.args[1..]);
                for (i, slot) in self.paths.iter_mut().enumerate() {
                    if alias.identity[i] == id && slot.is_some() {
                        *slot = Some(new.clone());
                    }
                }
            }
        }
    }
}

/// Whether a view can leave a contiguous receiver non-contiguous. Dim-0
/// slicing keeps a contiguous tensor contiguous; permutations, broadcasts,
/// diagonals, explicit strides and slicing of inner dims do not.
fn breaks_contiguity(op: OpKind, args: &[Arg]) -> bool {
    let dim0 = || args.get(1).and_then(Arg::as_scalar).and_then(|s| s.as_const_int()) == Some(0);
    match op {
        OpKind::View
        | OpKind::Reshape
        | OpKind::Flatten
        | OpKind::ViewAs
        | OpKind::Unsqueeze
        | OpKind::Squeeze
        | OpKind::Detach
        | OpKind::Contiguous => false,
        OpKind::Select | OpKind::Narrow => !dim0(),
        OpKind::Slice => !(dim0() && args.get(4).and_then(Arg::as_scalar).and_then(|s| s.as_const_int()) == Some(1)),
        _ => true,
    }
}

fn extend(p: &LayoutPath, op: OpKind, args: &[Arg]) -> LayoutPath {
    // `as_strided` sets the layout absolutely: what came before no longer matters.
    let mut steps = if op == OpKind::AsStrided { Vec::new() } else { p.steps.clone() };
    steps.push(Step { op, args: args.to_vec() });
    LayoutPath { storage: p.storage, steps }
}

/// The view op whose layout change a metadata mutation performs in place.
pub fn metadata_mutation_as_view(op: OpKind) -> Option<OpKind> {
    Some(match op {
        OpKind::TInplace => OpKind::T,
        OpKind::TransposeInplace => OpKind::Transpose,
        OpKind::UnsqueezeInplace => OpKind::Unsqueeze,
        OpKind::SqueezeInplace => OpKind::Squeeze,
        OpKind::AsStridedInplace => OpKind::AsStrided,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::args::*;
    use crate::graph::{GraphBuilder, ReturnKind};

    #[test]
    fn views_share_storage_and_detach_cuts_the_base() {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", true);
        let v = b.call(OpKind::View, a, vec![ints(&[-1])]);
        let vv = b.call(OpKind::T, v, vec![]);
        let d = b.call(OpKind::Detach, vv, vec![]);
        let c = b.call(OpKind::Contiguous, a, vec![]);
        let m = b.call(OpKind::Mul, a, vec![f(2.0)]);
        let r = b.call(OpKind::Reshape, m, vec![ints(&[4])]);
        let g = b.finish(vec![], ReturnKind::Unit);
        let al = AliasInfo::compute(&g);
        assert_eq!(al.storage_of(vv), al.storage_of(a));
        assert_eq!(al.input_of(d), Some(0));
        assert_eq!(al.autograd_base[vv.index()], Some(a));
        assert_eq!(al.autograd_base[d.index()], None);
        assert!(al.through_detach[d.index()]);
        assert_eq!(al.grad_root[vv.index()], a);
        assert_eq!(al.grad_root[d.index()], d);
        assert_eq!(al.identity[c.index()], a);
        assert!(al.uncertain[c.index()] && al.uncertain[r.index()]);
        assert_eq!(al.owner_of(r), StorageOwner::Intermediate(m));
        assert_eq!(al.autograd_base[r.index()], Some(m));
    }

    #[test]
    fn contiguous_of_a_permuted_view_is_a_copy() {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", false);
        let row = b.call(OpKind::Select, a, vec![i(0), i(0)]);
        let same = b.call(OpKind::Contiguous, row, vec![]);
        let at = b.call(OpKind::T, a, vec![]);
        let copied = b.call(OpKind::Contiguous, at, vec![]);
        let flat = b.call(OpKind::Reshape, at, vec![ints(&[-1])]);
        let g = b.finish(vec![], ReturnKind::Unit);
        let al = AliasInfo::compute(&g);
        assert_eq!(al.identity[same.index()], row);
        assert_eq!(al.owner_of(copied), StorageOwner::Intermediate(copied));
        assert_eq!(al.owner_of(flat), StorageOwner::Intermediate(flat));
        assert!(al.uncertain[copied.index()] && al.uncertain[flat.index()]);
    }

    #[test]
    fn metadata_mutation_changes_later_paths() {
        let mut b = GraphBuilder::new("f");
        let a = b.tensor("a", false);
        let out = b.call(OpKind::Mul, a, vec![f(3.0)]);
        let v1 = b.call(OpKind::Unsqueeze, out, vec![i(0)]);
        b.call(OpKind::TInplace, out, vec![]);
        let v2 = b.call(OpKind::Unsqueeze, out, vec![i(0)]);
        let g = b.finish(vec![v1, out, v2], ReturnKind::Tuple(3));
        let al = AliasInfo::compute(&g);
        let mut lt = LayoutTracker::new(&g, &al);
        for k in 0..g.nodes.len() {
            lt.apply(&g, &al, k);
        }
        assert_ne!(lt.path(v1), lt.path(v2));
        assert_eq!(lt.path(out).unwrap().steps.len(), 1);
    }
}
