//! `AOTSyntheticBaseWrapper` and `merge_view_inputs`: arguments that share
//! storage, where one of them is mutated, are replaced by one base argument
//! and regenerated as views of it inside the graph, so the mutation is seen
//! through every alias.
//!
//! The pre-compile step, once per guard key, decides two things from the
//! key's alias pattern and the mutation facts:
//!
//! - the **input groups** the graph runs on (`InputGroups`): one group per
//!   distinct tensor, except that all distinct tensors over a storage the
//!   function writes form one group, whose base is the whole storage (1-D).
//!   Functionalize copies a group's whole storage before writing it
//!   (copy-on-write) and the epilogue copies the whole storage back, so
//!   two groups over one written storage would each write all of it back,
//!   the second undoing the first's writes. Execution therefore keeps
//!   storage-level groups even where PyTorch keeps the tensors apart.
//! - the **synthetic bases PyTorch reports** (`merged`, what `explain`
//!   shows): PyTorch's `merge_view_inputs` merges the arguments of a
//!   written storage only when some two of them really overlap
//!   (`compute_overlapping_inputs`; the same tensor passed twice counts).
//!   They are derived from the input groups: a group of several tensors is
//!   reported merged when the key's overlap bit is set for one of its
//!   members, or when it still holds a repeated tensor after deduplication.
//!   Every reported merge is thus one execution group; a written storage
//!   whose tensors do not overlap is one execution group that PyTorch
//!   reports as separate arguments. Both run the same program: the
//!   group's regenerated views hold the very elements of the arguments.
//!
//! At run time the wrapper gives each group's base ([`Bases`]: the tensor
//! itself, or its whole storage) and, for calls that record gradients,
//! the aliased arguments' common autograd base
//! ([`AOTSyntheticBaseWrapper::autograd_bases`]). PyTorch refuses aliased
//! mutated arguments that are not views of one differentiable base in
//! training, and views with different dtypes; we run the first eagerly
//! and build the second's base from the storage: the group's base is all
//! of the storage's bytes (as its root's dtype, `Tensor::root_as_1d`), and
//! each argument is regenerated as a view of those bytes as its own dtype
//! (`ChainStep::ArgGeometry` replays the argument's dtype and geometry,
//! `Tensor::as_strided_dtype`). Such a group of dtype views
//! (`Tensor::view_dtype`) runs compiled in inference; in training a dtype
//! view has no gradient, so the group has no differentiable base and the
//! call runs eagerly. `explain` reports the group as it does any other
//! (PyTorch has no metadata for it), with the arguments' overlaps compared
//! byte by byte.

use super::dedupe::AOTDedupeWrapper;
use super::{arg_geometry, AliasPattern, Mutations};
use crate::arg::{Arg, Bases};
use crate::tensor::Tensor;
use aot_ir::analysis::input_output::{create_synthetic_base_metadata, ArgGeometry};
use aot_ir::transform::InputGroups;
use aot_ir::{SyntheticBaseEntry, SyntheticBaseInfo, ViewAndMutationMeta};

#[derive(Debug)]
pub(crate) struct AOTSyntheticBaseWrapper {
    /// The groups the functional graph takes as inputs.
    pub(crate) groups: InputGroups,
    /// Per input group, the first argument in it and whether it is the
    /// group's only tensor (what [`Bases`] reads).
    group_args: Vec<(usize, bool)>,
    /// PyTorch's synthetic bases: per base, the positions (in the
    /// deduplicated calling convention) of the arguments merged into it,
    /// in order of first appearance. Empty when none is needed.
    pub(crate) merged: Vec<Vec<usize>>,
}

impl AOTSyntheticBaseWrapper {
    /// Pre-compile: the input groups and PyTorch's merge decision (see the
    /// module doc), after the dedupe wrapper's decision.
    pub(crate) fn pre_compile(pattern: &AliasPattern, mutations: &Mutations, dedupe: &AOTDedupeWrapper) -> AOTSyntheticBaseWrapper {
        let groups = input_groups(pattern, &mutations.data);
        let group_args = (0..groups.single.len())
            .filter_map(|g| Some((groups.group_of.iter().position(|x| *x == Some(g))?, groups.single[g])))
            .collect();
        let merged = merge_view_inputs(&groups, pattern, dedupe);
        AOTSyntheticBaseWrapper { groups, group_args, merged }
    }

    /// Run time: the bases of the input groups for these arguments, each
    /// made when the plan asks for it (an inference call reads each at
    /// most twice; collecting them cost a `Vec` and a handle per argument).
    pub(crate) fn bases<'s, 'a>(&'s self, args: &'s [Arg<'a>]) -> Bases<'s, 'a> {
        Bases::new(&self.group_args, args)
    }

    /// [`bases`](Self::bases), collected.
    pub(crate) fn collect_bases(&self, args: &[Arg]) -> Vec<Tensor> {
        let bases = self.bases(args);
        (0..self.group_args.len()).filter_map(|g| bases.get(g)).collect()
    }

    /// Run time, for calls that record gradients: per input group, for a
    /// group of aliased arguments, their common base: each argument is it
    /// or a view of it made with grad mode on (PyTorch's
    /// `_are_differentiable_views`; its synthetic base in training is this
    /// `._base`). The joint's gradient is the storage's, read back at the
    /// base's elements, so the base must not overlap itself. `None` when
    /// some group has no such base: the call runs eagerly.
    pub(crate) fn autograd_bases(&self, args: &[Arg]) -> Option<Vec<Option<Tensor>>> {
        let groups = &self.groups;
        let mut out: Vec<Option<Tensor>> = vec![None; groups.single.len()];
        for (gi, slot) in out.iter_mut().enumerate() {
            if groups.single.get(gi).copied().unwrap_or(true) {
                continue;
            }
            let mut base: Option<Tensor> = None;
            for (p, _) in groups.group_of.iter().enumerate().filter(|(_, g)| **g == Some(gi)) {
                let t = args.get(p)?.tensor()?;
                let b = match &t.state().ag.view {
                    Some(v) if v.created_in_no_grad => return None,
                    Some(v) => v.base.clone(),
                    None => t.clone(),
                };
                match &base {
                    Some(prev) if !prev.same_tensor(&b) => return None,
                    Some(_) => {}
                    None => base = Some(b),
                }
            }
            let b = base?;
            if !b.layout().is_non_overlapping_and_dense() {
                return None;
            }
            *slot = Some(b);
        }
        Some(out)
    }

    /// The decision as `explain` reports it: `synthetic_base_info` and the
    /// rewritten metadata, for the deduplicated arguments and their
    /// metadata. The entries' geometry is the arguments' at this call.
    pub(crate) fn report(&self, deduped: &[Arg], meta: &ViewAndMutationMeta) -> Option<(Vec<SyntheticBaseEntry>, SyntheticBaseInfo)> {
        if self.merged.is_empty() {
            return None;
        }
        let mut entries: Vec<Option<SyntheticBaseEntry>> = vec![None; deduped.len()];
        let mut inner_shapes: Vec<Option<Vec<usize>>> = Vec::with_capacity(deduped.len());
        for (b, members) in self.merged.iter().enumerate() {
            let tensors: Vec<&Tensor> = members.iter().filter_map(|&d| deduped.get(d)?.tensor()).collect();
            inner_shapes.push(Some(reported_base(&tensors)?.shape()));
            for (&d, t) in members.iter().zip(&tensors) {
                let l = t.layout();
                entries[d] = Some(SyntheticBaseEntry::View {
                    base: b,
                    size: l.shape.into_vec(),
                    stride: l.stride.into_vec(),
                    storage_offset: l.offset,
                });
            }
        }
        for (d, e) in entries.iter_mut().enumerate() {
            if e.is_none() {
                *e = Some(SyntheticBaseEntry::Index(inner_shapes.len()));
                inner_shapes.push(deduped[d].tensor().map(Tensor::shape));
            }
        }
        let info: Vec<SyntheticBaseEntry> = entries.into_iter().flatten().collect();
        let outer: Vec<Option<ArgGeometry>> = deduped.iter().enumerate().map(|(d, a)| a.tensor().map(|t| arg_geometry(t, d))).collect();
        let (new_meta, aliased) = create_synthetic_base_metadata(meta, &info, &outer, &inner_shapes);
        Some((info, SyntheticBaseInfo { aliased_arg_idx_with_metadata_mutations: aliased, meta: new_meta }))
    }
}

/// The input groups of a call with this alias pattern, where `written[p]`
/// says whether argument `p`'s data is mutated: one group per distinct
/// tensor, except that the distinct tensors over a written storage form
/// one group (their reads must see each other's writes).
fn input_groups(pattern: &AliasPattern, written: &[bool]) -> InputGroups {
    let keys = &pattern.0;
    let mut group_of: Vec<Option<usize>> = vec![None; keys.len()];
    let mut single: Vec<bool> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if !k.is_tensor {
            continue;
        }
        let in_storage = |j: usize| keys[j].is_tensor && keys[j].storage_as == k.storage_as;
        let storage_written = (0..keys.len()).any(|j| in_storage(j) && written.get(j).copied().unwrap_or(false));
        let distinct_in_storage = (0..keys.len()).filter(|&j| in_storage(j) && keys[j].same_as == j).count();
        let shared = storage_written && distinct_in_storage > 1;
        let leader = if shared { k.storage_as } else { k.same_as };
        group_of[i] = if leader < i {
            group_of[leader]
        } else {
            single.push(!shared);
            Some(single.len() - 1)
        };
    }
    let object_of = keys.iter().map(|k| k.is_tensor.then_some(k.same_as)).collect();
    InputGroups { group_of, single, object_of }
}

/// PyTorch's `merge_view_inputs` decision, derived from the input groups:
/// per synthetic base, the deduplicated positions of its arguments.
fn merge_view_inputs(groups: &InputGroups, pattern: &AliasPattern, dedupe: &AOTDedupeWrapper) -> Vec<Vec<usize>> {
    // The arguments PyTorch's merge sees: the deduplicated ones.
    let kept: Vec<usize> = (0..pattern.len()).filter(|&i| dedupe.keeps(i)).collect();
    let group = |i: usize| groups.group_of.get(i).copied().flatten().filter(|&g| !groups.single.get(g).copied().unwrap_or(true));
    let mut base_of: Vec<Option<Option<usize>>> = vec![None; groups.single.len()];
    let mut merged: Vec<Vec<usize>> = Vec::new();
    for (d, &i) in kept.iter().enumerate() {
        let Some(g) = group(i) else { continue };
        let base = *base_of[g].get_or_insert_with(|| {
            let members: Vec<usize> = kept.iter().copied().filter(|&j| group(j) == Some(g)).collect();
            let overlap = members.iter().any(|&j| pattern.0[j].overlaps)
                || members.iter().enumerate().any(|(a, &j)| members[..a].iter().any(|&k| pattern.same(j, k)));
            overlap.then(|| {
                merged.push(Vec::new());
                merged.len() - 1
            })
        });
        if let Some(b) = base {
            merged[b].push(d);
        }
    }
    merged
}

/// The base PyTorch would pass for merged arguments (only its shape is
/// reported): their common autograd `._base` when each is it or a view of
/// it, of the same dtype; else a 1-D tensor over their whole storage.
fn reported_base(tensors: &[&Tensor]) -> Option<Tensor> {
    let first = tensors.first()?;
    let view_bases: Vec<Tensor> = tensors.iter().filter_map(|t| t.view_base()).collect();
    let common = view_bases.first().filter(|b| {
        view_bases.iter().all(|o| o.same_tensor(b))
            && tensors.iter().all(|t| t.view_base().is_some() || t.same_tensor(b))
            && b.dtype() == first.dtype()
    });
    Some(match common {
        Some(b) => b.clone(),
        None => first.storage_as_1d(),
    })
}
