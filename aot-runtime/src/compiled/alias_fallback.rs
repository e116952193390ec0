//! The reference path of a compiled call, kept transactional: the eager
//! interpreter runs on *shadows* of the arguments (new tensor objects with
//! the same geometry; over a copy of the storage where the function writes
//! it), and the same kind of epilogue commits the effects.
//!
//! Compiled execution falls back to it when a `reshape`/`contiguous`
//! aliased differently from what the functionalization pass assumed; the
//! result is then exactly eager's, effects included, and still nothing is
//! written to the caller's tensors when an op fails.

use crate::arg::Arg;
use crate::error::Result;
use crate::executor::interp;
use crate::tensor::NoGradGuard;
use crate::tensor::Tensor;
use aot_ir::{Graph, StaticMeta};

pub(crate) fn run(g: &Graph, meta: &StaticMeta, args: &[Arg]) -> Result<Vec<Tensor>> {
    let _no_grad = NoGradGuard::new();
    // Storages copied once each: (caller's, copy, the copy's version). With
    // any in-place op every storage is copied: the static facts of what is
    // written assumed an aliasing this call does not have, and even a
    // metadata mutation bumps a version counter, which a failed call must
    // not. The commit writes back the copies whose version moved.
    let copy_all = g.has_inplace_ops();
    let mut copies: Vec<(Tensor, Tensor, u64)> = Vec::new();
    let mut shadows: Vec<Option<Tensor>> = vec![None; args.len()];
    for (i, a) in args.iter().enumerate() {
        let Some(t) = a.tensor() else { continue };
        if let Some(j) = (0..i).find(|&j| args[j].tensor().is_some_and(|u| u.same_tensor(t))) {
            shadows[i] = shadows[j].clone();
            continue;
        }
        let written = args
            .iter()
            .enumerate()
            .any(|(k, b)| b.tensor().is_some_and(|u| u.shares_storage_with(t)) && meta.inputs.get(k).is_some_and(|m| m.mutates_data()));
        let over = if written || copy_all {
            match copies.iter().find(|(orig, _, _)| orig.shares_storage_with(t)) {
                Some((_, c, _)) => c.clone(),
                None => {
                    // The whole buffer (a dtype view's root), which every
                    // argument over it reads as its own dtype.
                    let c = t.root_as_1d().copy()?;
                    let version = c.version();
                    copies.push((t.root_as_1d(), c.clone(), version));
                    c
                }
            }
        } else {
            t.clone()
        };
        shadows[i] = Some(over.alias_like(t)?);
    }
    let shadow_args: Vec<Arg> = args.iter().zip(&shadows).map(|(a, s)| s.as_ref().map_or(*a, Arg::Tensor)).collect();
    let outs = interp::run_source(g, &shadow_args)?;

    // Commit.
    for (orig, copy, _) in copies.iter().filter(|(_, c, v)| c.version() != *v) {
        orig.copy_(copy)?;
    }
    for (i, a) in args.iter().enumerate() {
        if let (Some(t), Some(s)) = (a.tensor(), &shadows[i]) {
            let first = !(0..i).any(|j| args[j].tensor().is_some_and(|u| u.same_tensor(t)));
            let mutated = args
                .iter()
                .enumerate()
                .any(|(k, b)| b.tensor().is_some_and(|u| u.same_tensor(t)) && meta.inputs.get(k).is_some_and(|m| m.mutates_metadata));
            if first && mutated {
                t.as_strided_(&s.shape(), &s.stride(), s.storage_offset())?;
            }
        }
    }
    let mut regenerated: Vec<(Tensor, Tensor)> = Vec::new();
    outs.into_iter()
        .map(|o| {
            if let Some(i) = shadows.iter().position(|s| s.as_ref().is_some_and(|s| s.same_tensor(&o))) {
                return Ok(args[i].tensor().map_or(o, Tensor::clone));
            }
            // Over a caller's storage (a copy of it, or the storage itself
            // seen through a shadow): regenerate from the caller's tensors,
            // preferring one that is not itself a view, for eager's `._base`.
            let over_copy = copies.iter().any(|(_, c, _)| c.shares_storage_with(&o));
            let members: Vec<&Tensor> = args
                .iter()
                .zip(&shadows)
                .filter(|(_, s)| s.as_ref().is_some_and(|s| s.shares_storage_with(&o)))
                .filter_map(|(a, _)| a.tensor())
                .collect();
            // An output aliases a member of its own dtype (dtype views).
            let typed: Vec<&Tensor> = members.iter().copied().filter(|t| t.dtype() == o.dtype()).collect();
            let members = if typed.is_empty() { members } else { typed };
            let Some(anchor) = members.iter().find(|t| t.view_base().is_none()).or(members.first()).copied() else { return Ok(o) };
            if !over_copy && o.view_base().is_none_or(|b| !shadows.iter().flatten().any(|s| s.same_tensor(&b))) {
                return Ok(o);
            }
            if let Some((_, r)) = regenerated.iter().find(|(s, _)| s.same_tensor(&o)) {
                return Ok(r.clone());
            }
            let r = if o.view_base().is_some() {
                anchor.as_strided_dtype(o.dtype(), &o.shape(), &o.stride(), o.storage_offset())?
            } else {
                anchor.alias_like(&o)?
            };
            regenerated.push((o, r.clone()));
            Ok(r)
        })
        .collect()
}
