//! `traced_tangents`: the shapes and strides of the values the backward
//! receives gradients for, in PyTorch's order:
//!
//! 1. inputs whose data mutation happens outside the graph and that require
//!    grad (their value after the call);
//! 2. outputs of type `non_alias` or `unsafe_view_alias` that require grad;
//! 3. the intermediate bases of `alias_of_intermediate` outputs.
//!
//! PyTorch learns them by tracing with fake tensors. We learn them from the
//! run of `observation_run.rs`: eagerly, without grad, on copies of the arguments
//! that keep their alias structure, so the caller's tensors are untouched.
//! A mutated input's tangent has the layout its functional value would
//! have: an out-of-place op on it keeps a dense layout and makes a
//! non-dense one dense in the same dimension order (`preserve_layout`).

use super::observation_run::CopyRun;
use crate::arg::Arg;
use crate::layout::preserve_layout;
use crate::tensor::Tensor;
use aot_ir::{MutationType, OutputType, TangentMeta, ViewAndMutationMeta};

/// Copies of `args` with fresh storages: arguments that shared a storage
/// share the copy, and the same tensor passed twice stays one tensor.
pub(crate) fn deep_copy_args(args: &[Arg]) -> crate::Result<Vec<Option<Tensor>>> {
    let mut storages: Vec<(Tensor, Tensor)> = Vec::new();
    let mut out: Vec<Option<Tensor>> = Vec::with_capacity(args.len());
    for (k, a) in args.iter().enumerate() {
        let Some(t) = a.tensor() else {
            out.push(None);
            continue;
        };
        if let Some(j) = args[..k].iter().position(|b| b.tensor().is_some_and(|u| u.same_tensor(t))) {
            out.push(out[j].clone());
            continue;
        }
        let flat = match storages.iter().find(|(o, _)| o.shares_storage_with(t)) {
            Some((_, c)) => c.clone(),
            None => {
                let c = t.root_as_1d().copy()?;
                storages.push((t.clone(), c.clone()));
                c
            }
        };
        out.push(Some(flat.alias_like(t)?));
    }
    Ok(out)
}

/// The traced tangents of a call with metadata `meta`, from a run on
/// copies of its arguments.
pub(crate) fn traced_tangents(run: &CopyRun, meta: &ViewAndMutationMeta) -> Option<Vec<TangentMeta>> {
    let (copies, outs) = (&run.copies, &run.outs);
    let record = |t: &Tensor| TangentMeta { shape: t.shape(), stride: t.stride() };
    let mut tangents = Vec::new();
    for (info, c) in meta.input_info.iter().zip(copies) {
        if info.mutation_type == MutationType::MutatedOutGraph && info.mutates_data && info.requires_grad {
            let l = preserve_layout(&c.as_ref()?.layout());
            tangents.push(TangentMeta { shape: l.shape.into_vec(), stride: l.stride.into_vec() });
        }
    }
    for (info, o) in meta.output_info.iter().zip(outs) {
        if matches!(info.output_type, OutputType::NonAlias | OutputType::UnsafeViewAlias) && info.requires_grad {
            tangents.push(record(o));
        }
    }
    let mut bases: Vec<Tensor> = Vec::new();
    for (info, o) in meta.output_info.iter().zip(outs) {
        if info.output_type == OutputType::AliasOfIntermediate {
            let b = o.view_base().unwrap_or_else(|| o.clone());
            if !bases.iter().any(|x| x.same_tensor(&b)) {
                tangents.push(record(&b));
                bases.push(b);
            }
        }
    }
    Some(tangents)
}
