//! The overlap part of a call's guard key: which arguments overlap in
//! memory another, distinct argument (PyTorch's
//! `compute_overlapping_inputs`, run per storage shared by distinct
//! arguments). Only computed when two distinct tensors share a storage.

use super::specialize::ArgKey;
use crate::arg::Arg;
use crate::wrappers::arg_geometry;
use aot_ir::analysis::input_output::{compute_overlapping_inputs, ArgGeometry};

/// Sets `overlaps` of the tensors that overlap in memory another,
/// distinct tensor among the arguments (a repeat of a tensor takes its
/// first occurrence's bit: the same tensor passed twice is not an overlap
/// here; the alias pattern's `same_as` says it).
pub(super) fn mark_overlaps(args: &[Arg], keys: &mut [ArgKey]) {
    // First occurrences of tensors whose storage holds another, distinct argument.
    let shared: Vec<usize> = (0..keys.len())
        .filter(|&i| {
            let ki = keys[i];
            ki.dtype != u8::MAX
                && ki.same_as as usize == i
                && keys.iter().any(|k| k.dtype != u8::MAX && k.storage_as == ki.storage_as && k.same_as != ki.same_as)
        })
        .collect();
    if shared.is_empty() {
        return;
    }
    let mixed = |l: u32| {
        let mut d = shared.iter().filter(|&&i| keys[i].storage_as == l).map(|&i| keys[i].dtype);
        d.next().is_some_and(|first| d.any(|x| x != first))
    };
    let geoms: Vec<ArgGeometry> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match a.tensor() {
            // Arguments over one storage as different dtypes (dtype views)
            // are compared byte by byte: each element a run of its bytes.
            Some(t) if mixed(keys[i].storage_as) => {
                let mut g = arg_geometry(t, i);
                let size = t.dtype().size_in_bytes();
                g.stride.iter_mut().for_each(|s| *s *= size);
                g.storage_offset *= size;
                g.shape.push(size);
                g.stride.push(1);
                g
            }
            Some(t) => arg_geometry(t, i),
            None => ArgGeometry { identity: i, shape: vec![], stride: vec![], storage_offset: 0, requires_grad: false },
        })
        .collect();
    let mut leaders: Vec<u32> = shared.iter().map(|&i| keys[i].storage_as).collect();
    leaders.sort_unstable();
    leaders.dedup();
    for l in leaders {
        let group: Vec<usize> = shared.iter().copied().filter(|&i| keys[i].storage_as == l).collect();
        for i in compute_overlapping_inputs(&geoms, &group) {
            keys[i].overlaps = true;
        }
    }
    for i in 0..keys.len() {
        let first = keys[i].same_as as usize;
        if keys[i].dtype != u8::MAX && first != i {
            keys[i].overlaps = keys[first].overlaps;
        }
    }
}
