//! `AOTSyntheticBaseWrapper` and `merge_view_inputs`: arguments that share
//! storage, where one of them is mutated, are replaced by one base argument
//! and regenerated as views of it inside the graph, so the mutation is seen
//! through every alias.

use super::arg_geometry;
use crate::arg::Arg;
use crate::tensor::Tensor;
use aot_ir::analysis::input_output::{compute_overlapping_inputs, create_synthetic_base_metadata, ArgGeometry};
use aot_ir::{InputAliasInfo, SyntheticBaseEntry, SyntheticBaseInfo, ViewAndMutationMeta};

/// A synthetic base: the common autograd base of the aliases, or, when none
/// has one, a 1-D tensor over their whole storage.
#[derive(Clone, Debug)]
pub struct SyntheticBase {
    pub tensor: Tensor,
    /// True when `tensor` is the aliases' own `_base` (an existing tensor).
    pub is_view_base: bool,
}

/// The result of `merge_view_inputs`.
#[derive(Clone, Debug)]
pub struct MergedInputs {
    /// Bases first, then the other arguments in order.
    pub bases: Vec<SyntheticBase>,
    /// Outer argument index -> its entry in the inner calling convention.
    pub info: Vec<SyntheticBaseEntry>,
    /// Inner argument `k >= bases.len()` is outer argument `other[k - bases.len()]`.
    pub other: Vec<usize>,
}

/// PyTorch's `merge_view_inputs`. `None` when no synthetic base is needed.
///
/// PyTorch refuses aliased mutated arguments that are not views of one
/// differentiable base in training, and views with different dtypes; we
/// build the base from the storage instead, so both work.
pub fn merge_view_inputs(args: &[Arg], input_info: &[InputAliasInfo]) -> Option<MergedInputs> {
    if !input_info.iter().any(|i| i.mutates_data) {
        return None;
    }
    // group tensor args by storage, in order of first appearance
    let mut groups: Vec<Vec<usize>> = vec![];
    for (i, a) in args.iter().enumerate() {
        let Some(t) = a.tensor() else { continue };
        match groups.iter_mut().find(|g| args[g[0]].tensor().is_some_and(|u| u.shares_storage_with(t))) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    let geoms: Vec<Option<ArgGeometry>> = (0..args.len()).map(|i| arg_geometry(args, i)).collect();
    let dense: Vec<ArgGeometry> = geoms
        .iter()
        .map(|g| {
            g.clone().unwrap_or(ArgGeometry {
                identity: usize::MAX,
                shape: vec![],
                stride: vec![],
                storage_offset: 0,
                requires_grad: false,
            })
        })
        .collect();
    let mut bases: Vec<SyntheticBase> = vec![];
    let mut entries: Vec<Option<SyntheticBaseEntry>> = vec![None; args.len()];
    for g in &groups {
        if g.len() <= 1 || !g.iter().any(|&i| input_info.get(i).is_some_and(|x| x.mutates_data)) {
            continue;
        }
        if compute_overlapping_inputs(&dense, g).len() <= 1 {
            continue;
        }
        let tensors: Vec<&Tensor> = g.iter().filter_map(|&i| args[i].tensor()).collect();
        let view_bases: Vec<Tensor> = tensors.iter().filter_map(|t| t.view_base()).collect();
        let common = view_bases.first().filter(|b| {
            view_bases.iter().all(|o| o.same_tensor(b))
                && tensors.iter().all(|t| t.view_base().is_some() || t.same_tensor(b))
                && b.dtype() == tensors[0].dtype()
        });
        let base = match common {
            Some(b) => SyntheticBase { tensor: b.clone(), is_view_base: true },
            None => SyntheticBase { tensor: tensors[0].storage_as_1d(), is_view_base: false },
        };
        bases.push(base);
        let bi = bases.len() - 1;
        for &i in g {
            let geo = geoms[i].as_ref()?;
            entries[i] = Some(SyntheticBaseEntry::View {
                base: bi,
                size: geo.shape.clone(),
                stride: geo.stride.clone(),
                storage_offset: geo.storage_offset,
            });
        }
    }
    if bases.is_empty() {
        return None;
    }
    let mut other = vec![];
    for (i, e) in entries.iter_mut().enumerate() {
        if e.is_none() {
            *e = Some(SyntheticBaseEntry::Index(bases.len() + other.len()));
            other.push(i);
        }
    }
    Some(MergedInputs { bases, info: entries.into_iter().flatten().collect(), other })
}

/// The synthetic-base specialisation of a call with metadata `meta`.
pub fn synthetic_base_plan(args: &[Arg], meta: &ViewAndMutationMeta) -> Option<(MergedInputs, SyntheticBaseInfo)> {
    let merged = merge_view_inputs(args, &meta.input_info)?;
    let outer: Vec<Option<ArgGeometry>> = (0..args.len()).map(|i| arg_geometry(args, i)).collect();
    let mut inner_shapes: Vec<Option<Vec<usize>>> = merged.bases.iter().map(|b| Some(b.tensor.shape())).collect();
    inner_shapes.extend(merged.other.iter().map(|&i| args[i].tensor().map(|t| t.shape())));
    let (new_meta, aliased) = create_synthetic_base_metadata(meta, &merged.info, &outer, &inner_shapes);
    Some((merged, SyntheticBaseInfo { aliased_arg_idx_with_metadata_mutations: aliased, meta: new_meta }))
}
