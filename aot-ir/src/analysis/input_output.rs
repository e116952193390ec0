//! The metadata refinements of PyTorch's `input_output_analysis.py`:
//! removing duplicated arguments (`remove_dupe_metadata`), replacing aliased
//! mutated arguments by synthetic bases (`create_synthetic_base_metadata`),
//! and telling real overlap from false aliasing (`compute_overlapping_inputs`).
//!
//! Everything works on plain geometry (`ArgGeometry`), so the runtime feeds
//! it the facts of real tensors and tests feed it numbers.

use crate::schema::{mutation_type, InputAliasInfo, OutputAliasInfo, OutputType, SyntheticBaseEntry, TangentMeta, ViewAndMutationMeta};
use std::collections::BTreeSet;

/// What the analyses need to know about one tensor argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgGeometry {
    /// Equal for arguments that are the same tensor object.
    pub identity: usize,
    /// Sizes.
    pub shape: Vec<usize>,
    /// Strides, in elements.
    pub stride: Vec<usize>,
    /// Offset of the first element in the storage, in elements.
    pub storage_offset: usize,
    /// Whether the argument requires grad.
    pub requires_grad: bool,
}

impl ArgGeometry {
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for i in (0..self.shape.len()).rev() {
            if self.shape[i] != 1 {
                if self.stride[i] != expected {
                    return false;
                }
                expected *= self.shape[i];
            }
        }
        true
    }
    /// Storage index of the last element (`_get_last_mem_address`).
    fn last_address(&self) -> usize {
        self.storage_offset + self.shape.iter().zip(&self.stride).map(|(&n, &s)| n.saturating_sub(1) * s).sum::<usize>()
    }
}

fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut stride = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        stride[i] = acc;
        acc *= shape[i].max(1);
    }
    stride
}

/// PyTorch's `remove_dupe_metadata`: the metadata of the deduplicated call.
pub fn remove_dupe_metadata(m: &ViewAndMutationMeta, keep_arg_mask: &[bool], add_dupe_map: &[usize]) -> ViewAndMutationMeta {
    let num_data_mutations = m.input_info.iter().filter(|x| x.mutates_data).count().min(m.traced_tangents.len());
    let (inp_tangents, other_tangents) = m.traced_tangents.split_at(num_data_mutations);
    let mut traced_tangents: Vec<TangentMeta> = inp_tangents
        .iter()
        .enumerate()
        .filter(|(i, _)| m.mutated_inp_runtime_indices.get(*i).is_some_and(|&k| keep_arg_mask.get(k).copied().unwrap_or(true)))
        .map(|(_, t)| t.clone())
        .collect();
    traced_tangents.extend(other_tangents.iter().cloned());
    let input_info = m.input_info.iter().zip(keep_arg_mask).filter(|(_, &k)| k).map(|(x, _)| x.clone()).collect();
    let output_info = m
        .output_info
        .iter()
        .map(|o| OutputAliasInfo {
            output_type: o.output_type,
            // PyTorch maps every `base_idx` through the argument map, even
            // an output's index (`alias_of_intermediate_base_is_user_output`):
            // past the map's end it fails, and the unmapped output index is
            // the meaningful answer.
            base_idx: o.base_idx.map(|b| add_dupe_map.get(b).copied().unwrap_or(b)),
            requires_grad: o.requires_grad,
        })
        .collect();
    ViewAndMutationMeta::new(input_info, output_info, m.num_intermediate_bases, m.keep_input_mutations, traced_tangents)
}

/// PyTorch's `_tensors_definitely_do_not_overlap`, including its 2-D
/// row-stride test for slices of one matrix.
pub fn tensors_definitely_do_not_overlap(x: &ArgGeometry, y: &ArgGeometry) -> bool {
    if x.identity == y.identity {
        return false;
    }
    if x.numel() == 0 || y.numel() == 0 {
        return true;
    }
    let (x, y) = if x.storage_offset > y.storage_offset { (y, x) } else { (x, y) };
    if x.is_contiguous() && y.is_contiguous() {
        return x.storage_offset + x.numel() <= y.storage_offset;
    }
    if x.last_address() < y.storage_offset {
        return true;
    }
    if x.shape.len() == 2 && y.shape.len() == 2 && x.stride[1] == 1 && y.stride[1] == 1 && x.stride[0] == y.stride[0] {
        let offset_delta = y.storage_offset - x.storage_offset;
        if offset_delta < x.shape[1] {
            return false;
        }
        let x_total_elems_covered = x.stride[0] * (x.shape[0] - 1) + x.shape[1];
        if x_total_elems_covered <= offset_delta {
            return true;
        }
        let offset_delta_mod = offset_delta % x.stride[0];
        return offset_delta_mod + y.shape[1] <= x.stride[0];
    }
    false
}

/// PyTorch's `compute_overlapping_inputs`: the indices (into `args`) among
/// `aliased` that really overlap some other one.
pub fn compute_overlapping_inputs(args: &[ArgGeometry], aliased: &[usize]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for j in 0..aliased.len() {
        for i in 0..j {
            let (i_, j_) = (aliased[i], aliased[j]);
            if !tensors_definitely_do_not_overlap(&args[i_], &args[j_]) {
                out.insert(i_);
                out.insert(j_);
            }
        }
    }
    out
}

/// PyTorch's `create_synthetic_base_metadata`. `outer` are the arguments
/// before merging, `inner_shapes` the shapes of the arguments after it (the
/// synthetic bases first). Returns the new metadata and
/// `aliased_arg_idx_with_metadata_mutations`.
pub fn create_synthetic_base_metadata(
    m: &ViewAndMutationMeta,
    synthetic_base_info: &[SyntheticBaseEntry],
    outer: &[Option<ArgGeometry>],
    inner_shapes: &[Option<Vec<usize>>],
) -> (ViewAndMutationMeta, Vec<usize>) {
    let inner_of = |e: &SyntheticBaseEntry| match e {
        SyntheticBaseEntry::Index(i) => *i,
        SyntheticBaseEntry::View { base, .. } => *base,
    };
    let mut input_info = vec![];
    for inner_idx in 0..inner_shapes.len() {
        let outer_indices: Vec<usize> =
            synthetic_base_info.iter().enumerate().filter(|(_, e)| inner_of(e) == inner_idx).map(|(k, _)| k).collect();
        let infos: Vec<&InputAliasInfo> = outer_indices.iter().map(|&x| &m.input_info[x]).collect();
        let Some(first) = infos.first() else { continue };
        let many = infos.len() > 1;
        let mut info = InputAliasInfo {
            is_leaf: infos.iter().any(|x| x.is_leaf),
            mutates_data: if many { true } else { first.mutates_data },
            mutates_metadata: if many { false } else { first.mutates_metadata },
            mutations_hidden_from_autograd: infos.iter().all(|x| x.mutations_hidden_from_autograd),
            mutations_under_no_grad_or_inference_mode: infos.iter().all(|x| x.mutations_under_no_grad_or_inference_mode),
            mutates_storage_metadata: if many { false } else { first.mutates_storage_metadata },
            requires_grad: infos.iter().any(|x| x.requires_grad),
            keep_input_mutations: m.keep_input_mutations,
            mutation_type: crate::schema::MutationType::NotMutated,
        };
        info.mutation_type = mutation_type(&info);
        input_info.push(info);
    }
    let aliased_with_meta: Vec<usize> = m
        .input_info
        .iter()
        .enumerate()
        .filter(|(k, i)| i.mutates_metadata && !matches!(synthetic_base_info[*k], SyntheticBaseEntry::Index(_)))
        .map(|(k, _)| k)
        .collect();
    let mut output_info: Vec<OutputAliasInfo> = m
        .output_info
        .iter()
        .map(|o| {
            // As in `remove_dupe_metadata`, an output's index past the
            // arguments stays as it is.
            let new_base = o.base_idx.map(|b| synthetic_base_info.get(b).map_or(b, inner_of));
            // An input that is now regenerated from a synthetic base is no
            // longer the very input, even when the base kept its index
            // (PyTorch reports `alias_of_input` there too).
            let regenerated =
                o.base_idx.and_then(|b| synthetic_base_info.get(b)).is_some_and(|e| matches!(e, SyntheticBaseEntry::View { .. }));
            let output_type = if o.output_type == OutputType::IsInput && (o.base_idx != new_base || regenerated) {
                OutputType::AliasOfInput
            } else {
                o.output_type
            };
            OutputAliasInfo { output_type, base_idx: new_base, requires_grad: o.requires_grad }
        })
        .collect();
    for &k in &aliased_with_meta {
        output_info.push(OutputAliasInfo {
            output_type: OutputType::AliasOfInput,
            base_idx: Some(inner_of(&synthetic_base_info[k])),
            requires_grad: outer[k].as_ref().is_some_and(|a| a.requires_grad),
        });
    }
    let mut traced_tangents: Vec<TangentMeta> = input_info
        .iter()
        .zip(inner_shapes)
        .filter(|(i, _)| i.mutates_data && i.requires_grad)
        .filter_map(|(_, s)| s.as_ref().map(|s| TangentMeta { shape: s.clone(), stride: contiguous_strides(s) }))
        .collect();
    let skip = traced_tangents.len().min(m.traced_tangents.len());
    traced_tangents.extend(m.traced_tangents[skip..].iter().cloned());
    (
        ViewAndMutationMeta::new(input_info, output_info, m.num_intermediate_bases, m.keep_input_mutations, traced_tangents),
        aliased_with_meta,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(identity: usize, shape: &[usize], stride: &[usize], offset: usize) -> ArgGeometry {
        ArgGeometry { identity, shape: shape.to_vec(), stride: stride.to_vec(), storage_offset: offset, requires_grad: false }
    }

    #[test]
    fn rows_of_a_matrix_do_not_overlap() {
        // x[0] and x[1] of a 3x3 matrix
        assert!(tensors_definitely_do_not_overlap(&geo(1, &[3], &[1], 0), &geo(2, &[3], &[1], 3)));
        // x[0:2] and x[1:3] overlap
        assert!(!tensors_definitely_do_not_overlap(&geo(1, &[2, 3], &[3, 1], 0), &geo(2, &[2, 3], &[3, 1], 3)));
        // columns 0..2 and 2..4 of a 4x4 matrix: the 2-D row-stride test
        assert!(tensors_definitely_do_not_overlap(&geo(1, &[4, 2], &[4, 1], 0), &geo(2, &[4, 2], &[4, 1], 2)));
        assert!(!tensors_definitely_do_not_overlap(&geo(1, &[4, 3], &[4, 1], 0), &geo(2, &[4, 2], &[4, 1], 2)));
        // the same tensor always overlaps itself
        assert!(!tensors_definitely_do_not_overlap(&geo(1, &[3], &[1], 0), &geo(1, &[3], &[1], 0)));
        let args = vec![geo(1, &[3], &[1], 0), geo(2, &[3], &[1], 3), geo(3, &[2, 3], &[3, 1], 3)];
        assert_eq!(compute_overlapping_inputs(&args, &[0, 1, 2]), BTreeSet::from([1, 2]));
    }
}
