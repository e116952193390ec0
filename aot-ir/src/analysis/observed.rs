//! Facts that only a run of the function shows.
//!
//! PyTorch collects its metadata by running the function, so a few of its
//! answers depend on the arguments' shapes, layouts and dtypes, which the
//! compile-time template cannot see:
//!
//! - a metadata mutation that leaves the tensor's sizes, strides and offset
//!   as they were (`t_()` of a 1-D tensor, `squeeze_(0)` of a non-unit dim,
//!   `unsqueeze_(0)` then `squeeze_(0)`) is no metadata mutation: PyTorch
//!   compares the input before and after;
//! - `reshape` is a view or a copy, `contiguous` the receiver itself or a
//!   copy, `to_dtype` to the same dtype the receiver itself;
//! - whether a view of an output has that output's very metadata (a
//!   `view(-1)` of a 1-D tensor);
//! - whether `matmul` returned an `_unsafe_view` of its product, which
//!   PyTorch reports as `unsafe_view_alias` ([`MatmulShape`]): that hangs on
//!   the operands' ranks.
//!
//! The template marks where this matters ([`StaticMeta::needs_observation`](super::StaticMeta));
//! the runtime then runs the function on copies of the arguments and hands
//! what it saw to [`StaticMeta::complete`](super::StaticMeta::complete) as an
//! [`Observation`](super::Observation).

use super::alias::{LayoutPath, Step, StorageOwner};
use super::meta_template::{OutputAlias, OutputTemplate};
use crate::graph::Graph;
use crate::op::OpKind;
use std::collections::BTreeSet;

/// Whether a storage was allocated by a `to_dtype`, which returns its
/// receiver itself when the dtype is already the one asked for.
pub(crate) fn is_to_dtype(g: &Graph, owner: StorageOwner) -> bool {
    matches!(owner, StorageOwner::Intermediate(v) if g.def_node(v).is_some_and(|n| n.is(OpKind::ToDtype)))
}

/// Outputs of an intermediate storage whose types hang on whether two of
/// them have identical metadata, where their layout paths differ but may
/// still give identical layouts for some shapes (a `view(-1)` of a 1-D
/// tensor changes nothing): a view of another output (PyTorch regenerates a
/// non-differentiable one that has its base's metadata from the base), or
/// an alias whose `requires_grad` may differ from another's (`(out,
/// out.detach())`). Then every output of such a storage is uncertain, as
/// how many of them alias depends on it.
pub(crate) fn mark_layout_uncertain(outputs: &mut [OutputTemplate], keys: &[LayoutPath]) {
    let intermediate = |o: &OutputTemplate| matches!(o.alias, OutputAlias::AliasOfIntermediate(_) | OutputAlias::NonAlias);
    let path = |o: &OutputTemplate| keys.get(o.layout_key as usize);
    let maybe_same = |a: &OutputTemplate, b: &OutputTemplate| match (path(a), path(b)) {
        (Some(p), Some(q)) => !ranks_differ(p, q),
        _ => true,
    };
    let unsure: Vec<bool> = outputs
        .iter()
        .map(|o| {
            intermediate(o)
                && outputs.iter().any(|t| {
                    t.identity != o.identity
                        && t.storage == o.storage
                        && t.layout_key != o.layout_key
                        && (o.base == Some(t.identity) || t.grad_deps != o.grad_deps)
                        && maybe_same(o, t)
                })
        })
        .collect();
    let storages: BTreeSet<u32> =
        outputs.iter().zip(&unsure).filter(|(o, &u)| u || (o.alias_uncertain && intermediate(o))).map(|(o, _)| o.storage).collect();
    for (o, u) in outputs.iter_mut().zip(unsure) {
        o.alias_uncertain |= u || (intermediate(o) && storages.contains(&o.storage));
    }
}

/// Whether two layout paths of one storage give tensors of different ranks
/// whatever the shapes: past their common steps, each adds a known range of
/// dims (a `select` drops one, an `unsqueeze` adds one, a `squeeze` drops
/// one or none), and the ranges cannot meet. Steps whose rank change
/// depends on the arguments (`view`, `expand`, ..) leave it open.
fn ranks_differ(p: &LayoutPath, q: &LayoutPath) -> bool {
    let common = p.steps.iter().zip(&q.steps).take_while(|(a, b)| a == b).count();
    let range = |steps: &[Step]| -> Option<(i64, i64)> {
        steps.iter().try_fold((0i64, 0i64), |(lo, hi), s| {
            let (a, b) = match s.op {
                OpKind::Select | OpKind::Diagonal => (-1, -1),
                OpKind::Unsqueeze => (1, 1),
                OpKind::Squeeze => (-1, 0),
                OpKind::T | OpKind::Transpose | OpKind::Permute | OpKind::Narrow | OpKind::Slice => (0, 0),
                _ => return None,
            };
            Some((lo + a, hi + b))
        })
    };
    match (range(&p.steps[common..]), range(&q.steps[common..])) {
        (Some((plo, phi)), Some((qlo, qhi))) => phi < qlo || qhi < plo,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::meta_template::{CallFacts, Observation, ObservedAlias, ObservedOutput, StaticMeta};
    use crate::graph::args::*;
    use crate::graph::{GraphBuilder, ReturnKind};
    use crate::op::OpKind;
    use crate::schema::{MutationType, OutputType};

    fn out(alias: ObservedAlias, object: u32, storage: u32, layout: u32, base: Option<u32>) -> ObservedOutput {
        ObservedOutput { alias, object, storage, layout, base, matmul: None }
    }

    #[test]
    fn a_metadata_mutation_that_changes_nothing_is_none() {
        // a.t_(); a * 2  -- on a 1-D argument, t_() is a no-op
        let mut bld = GraphBuilder::new("f");
        let a = bld.tensor("a", true);
        bld.call(OpKind::TInplace, a, vec![]);
        let m = bld.call(OpKind::Mul, a, vec![f(2.0)]);
        let g = bld.finish(vec![m], ReturnKind::Single);
        let meta = StaticMeta::compute(&g);
        assert!(meta.needs_observation);
        let mut facts = CallFacts::distinct(&[false], &[true]);
        assert_eq!(meta.complete(&facts).input_info[0].mutation_type, MutationType::MutatedOutGraph);
        facts.observed =
            Some(Observation { metadata_unchanged: vec![true], outputs: vec![out(ObservedAlias::Intermediate, 0, 0, 0, None)] });
        let full = meta.complete(&facts);
        assert!(!full.input_info[0].mutates_metadata);
        assert_eq!(full.input_info[0].mutation_type, MutationType::NotMutated);
    }

    #[test]
    fn a_reshape_that_copied_is_no_alias() {
        // a.reshape(-1)  -- of a transposed argument, a copy
        let mut bld = GraphBuilder::new("f");
        let a = bld.tensor("a", false);
        let r = bld.call(OpKind::Reshape, a, vec![ints(&[-1])]);
        let g = bld.finish(vec![r], ReturnKind::Single);
        let meta = StaticMeta::compute(&g);
        assert!(meta.needs_observation && meta.outputs[0].alias_uncertain);
        assert_eq!(meta.outputs[0].static_type, None);
        let mut facts = CallFacts::distinct(&[true], &[true]);
        facts.observed =
            Some(Observation { metadata_unchanged: vec![true], outputs: vec![out(ObservedAlias::Intermediate, 0, 0, 0, None)] });
        assert_eq!(meta.complete(&facts).output_info[0].output_type, OutputType::NonAlias);
    }

    #[test]
    fn a_same_metadata_view_of_an_output_aliases_it() {
        // b = a * 2; (b, b.view(-1))  -- for a 1-D `a`, the view is `b`'s very metadata
        let mut bld = GraphBuilder::new("f");
        let a = bld.tensor("a", false);
        let b = bld.call(OpKind::Mul, a, vec![f(2.0)]);
        let v = bld.call(OpKind::View, b, vec![ints(&[-1])]);
        let g = bld.finish(vec![b, v], ReturnKind::Tuple(2));
        let meta = StaticMeta::compute(&g);
        assert!(meta.needs_observation && meta.outputs[1].alias_uncertain);
        let mut facts = CallFacts::distinct(&[false], &[true]);
        assert_eq!(meta.complete(&facts).output_info[1].output_type, OutputType::NonAlias);
        facts.observed = Some(Observation {
            metadata_unchanged: vec![true],
            outputs: vec![out(ObservedAlias::Intermediate, 7, 0, 0, None), out(ObservedAlias::Intermediate, 8, 0, 0, Some(7))],
        });
        let types: Vec<_> = meta.complete(&facts).output_info.iter().map(|o| (o.output_type, o.base_idx)).collect();
        assert_eq!(types, [(OutputType::NonAlias, None), (OutputType::AliasOfIntermediateBaseIsUserOutput, Some(0))]);
        // A 2-D `a`: the view has other metadata.
        facts.observed = Some(Observation {
            metadata_unchanged: vec![true],
            outputs: vec![out(ObservedAlias::Intermediate, 7, 0, 0, None), out(ObservedAlias::Intermediate, 8, 0, 1, Some(7))],
        });
        assert_eq!(meta.complete(&facts).output_info[1].output_type, OutputType::NonAlias);
    }
}

/// The operands' ranks (and first batch sizes) of a `matmul` in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulShape {
    /// The rank of the left operand.
    pub lhs_dim: usize,
    /// The rank of the right operand.
    pub rhs_dim: usize,
    /// The first size of each operand (its batch size when 3-D).
    pub lhs_first: usize,
    /// The same for the right operand.
    pub rhs_first: usize,
    /// Whether the operand of higher rank (the right one, transposed, when
    /// it is the higher) folds into a matrix without a copy: it is empty,
    /// or all its sizes but the last merge as a `view` would merge them.
    pub foldable: bool,
}

impl MatmulShape {
    /// Whether PyTorch's `matmul` returns an autograd view of its product
    /// for these operands, given whether each requires grad: the product of
    /// the batched path (`bmm`, then reshaped to the broadcast batch).
    ///
    /// Products of operands of rank 2 or less are returned as they are. An
    /// operand of rank 3 or more times one of rank 2 or less is folded into
    /// an `mm`/`mv` when the smaller one requires grad, or when the larger
    /// folds without a copy (except that a matrix on the left that does not
    /// require grad is never folded from the right); the folded product is
    /// reshaped by `_unsafe_view`, which autograd does not see as a view,
    /// so that output is a plain one (PyTorch 2.15 reports `non_alias`).
    /// Everything else is batched. Of two 3-D operands with different batch
    /// sizes, one with batch size 1 that requires grad is squeezed first.
    pub fn unsafe_view(&self, lhs_rg: bool, rhs_rg: bool) -> bool {
        let (d1, d2) = (self.lhs_dim, self.rhs_dim);
        if d1 == 3 && d2 == 3 && self.lhs_first != self.rhs_first {
            if self.lhs_first == 1 && lhs_rg {
                return MatmulShape { lhs_dim: 2, ..*self }.unsafe_view(lhs_rg, rhs_rg);
            }
            if self.rhs_first == 1 && rhs_rg {
                return MatmulShape { rhs_dim: 2, ..*self }.unsafe_view(lhs_rg, rhs_rg);
            }
        }
        if d1 <= 2 && d2 <= 2 {
            return false;
        }
        !self.folds(lhs_rg, rhs_rg)
    }

    /// PyTorch's `should_fold` (without an `out=` tensor).
    fn folds(&self, lhs_rg: bool, rhs_rg: bool) -> bool {
        let (d1, d2) = (self.lhs_dim, self.rhs_dim);
        let (big, small, small_rg) = if d1 >= d2 { (d1, d2, rhs_rg) } else { (d2, d1, lhs_rg) };
        if big < 3 || small > 2 {
            return false;
        }
        small_rg || (d1 != 2 && self.foldable)
    }
}

/// Whether a tensor of these sizes and strides (of rank 3 or more) folds
/// into a matrix of its last dim without a copy; `transposed` reads it with
/// its last two dims swapped (`mT`), as `matmul` reads a larger right
/// operand.
pub fn matmul_foldable(sizes: &[usize], strides: &[usize], transposed: bool) -> bool {
    let (mut sizes, mut strides) = (sizes.to_vec(), strides.to_vec());
    let n = sizes.len();
    if transposed && n >= 2 {
        sizes.swap(n - 1, n - 2);
        strides.swap(n - 1, n - 2);
    }
    sizes.contains(&0) || (0..n.saturating_sub(2)).all(|i| strides[i] == strides[i + 1] * sizes[i + 1])
}

#[cfg(test)]
mod matmul_tests {
    use super::MatmulShape;

    fn shape(lhs_dim: usize, rhs_dim: usize) -> MatmulShape {
        MatmulShape { lhs_dim, rhs_dim, lhs_first: 2, rhs_first: 2, foldable: true }
    }

    #[test]
    fn matmul_unsafe_views_follow_pytorch() {
        assert!(!shape(2, 2).unsafe_view(true, true), "mm");
        assert!(!shape(1, 2).unsafe_view(true, true));
        assert!(!shape(3, 2).unsafe_view(true, true), "folded: _unsafe_view is no autograd view");
        assert!(!shape(3, 2).unsafe_view(true, false), "folded, the left one folds without a copy");
        let strided = MatmulShape { foldable: false, ..shape(3, 2) };
        assert!(strided.unsafe_view(true, false), "batched: the left one would need a copy to fold");
        assert!(!strided.unsafe_view(true, true), "folded anyway: the right one requires grad");
        assert!(!shape(3, 1).unsafe_view(false, true), "folded mv");
        assert!(shape(4, 4).unsafe_view(true, true), "batched");
        assert!(!shape(2, 3).unsafe_view(true, false), "folded from the right, transposed back by a copy");
        assert!(shape(2, 3).unsafe_view(false, true), "a matrix on the left is not folded from the right");
        assert!(!shape(1, 3).unsafe_view(true, true), "folded mv from the right");
        let squeezed = MatmulShape { lhs_dim: 3, rhs_dim: 3, lhs_first: 1, rhs_first: 4, foldable: true };
        assert!(!squeezed.unsafe_view(true, false), "2-D x 3-D folded from the right");
        assert!(squeezed.unsafe_view(false, true));
    }

    #[test]
    fn folding_follows_strides() {
        use super::matmul_foldable;
        assert!(matmul_foldable(&[2, 3, 4], &[12, 4, 1], false));
        assert!(!matmul_foldable(&[2, 3, 4], &[4, 8, 1], false), "a transposed batch");
        assert!(matmul_foldable(&[2, 0, 4], &[4, 8, 1], false), "empty");
        // The right operand is read transposed: [2, 4, 3] with strides
        // [12, 1, 4] is mT of a contiguous [2, 3, 4].
        assert!(matmul_foldable(&[2, 4, 3], &[12, 1, 4], true));
    }
}
