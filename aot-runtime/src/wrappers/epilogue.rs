//! The `RuntimeWrapper` epilogue: after every kernel of a call succeeded,
//! apply the input mutations and hand out the outputs.
//!
//! - Data mutations: the final version of each written input group is
//!   copied back over the caller's storage (`copy_`), or, for a write
//!   deferred to here (`compiled/deferred.rs`), the write itself runs on
//!   the caller's tensor. A group's version
//!   has the caller's geometry on a copy of the whole storage, so copying
//!   storage to storage is exact, whatever views were written.
//! - Metadata mutations: `as_strided_` of the caller's tensor to the final
//!   geometry.
//! - Outputs: `is_input` returns the caller's very tensor; an alias of an
//!   input is regenerated over the caller's storage with the graph value's
//!   geometry (storage offsets are absolute, so they carry over); values the
//!   graph allocated are returned as they are. A value returned twice is
//!   regenerated once, so the two outputs are the same tensor, as in eager.
//!
//! Nothing here can fail for a well-formed plan: the copies are between
//! buffers of one length and dtype, and the geometries were valid on a
//! storage of the same length.

use crate::autograd::NoGradGuard;
use crate::compiled::deferred::Deferred;
use crate::compiled::exec::{get, Env};
use crate::compiled::specialize::Bases;
use crate::compiled::Arg;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use aot_ir::transform::{FOutput, FunctionalGraph};
use aot_ir::StaticMeta;

/// Applies the effects of a finished run and builds the outputs.
/// `bases[g]` is the caller's tensor over group `g`'s storage.
/// `meta` says which outputs require grad in eager (inputs that require
/// grad reach an inference call when nothing records history, such as an
/// optimizer step under `no_grad!`).
pub(crate) fn apply(
    fg: &FunctionalGraph,
    meta: &StaticMeta,
    args: &[Arg],
    bases: &Bases,
    env: &Env,
    deferred: Option<&Deferred>,
) -> Result<Vec<Tensor>> {
    // With grad mode off (the caller's), only views pass `requires_grad` on.
    let grad_mode_off = !crate::autograd::is_grad_enabled();
    let _no_grad = NoGradGuard::new();
    let arg_rg = |p: usize| args.get(p).and_then(Arg::tensor).is_some_and(Tensor::requires_grad);
    // An alias of an input that requires grad, which eager made from a
    // detached alias: regenerated from a detached alias too.
    let detached = |k: usize| {
        meta.outputs.get(k).is_some_and(|o| {
            let deps = if grad_mode_off { &o.grad_deps_grad_mode_off } else { &o.grad_deps };
            !deps.iter().any(|&p| arg_rg(p))
        })
    };
    // Metadata first: the data copies bump the version counters after the
    // final geometry is in place, so a view's history is rebuilt on it (as
    // eager does when a write follows the metadata change).
    for &(p, v) in &fg.metadata_mutations {
        let t = get(env, v)?;
        arg_tensor(args, p)?.as_strided_(&t.shape(), &t.stride(), t.storage_offset())?;
    }
    for &(group, v) in &fg.mutated_groups {
        if let Some(d) = deferred.filter(|d| d.writes.iter().any(|w| w.group == group)) {
            // `Deferred::ready` checked the operands before the plan ran.
            if !d.apply(group, bases) {
                return Err(AotError::Internal { op: "epilogue", msg: format!("the deferred write of input group {group} did not run") });
            }
            continue;
        }
        let (dst, src) = (base(bases, group)?, get(env, v)?);
        if !crate::compiled::fast::copy_storage(&dst, src) {
            dst.storage_as_1d().copy_(&src.storage_as_1d())?;
        }
    }
    let mut regenerated: Vec<(aot_ir::ValueId, Tensor)> = Vec::new();
    let mut results: Vec<Tensor> = Vec::with_capacity(fg.outputs.len());
    for (k, o) in fg.outputs.iter().enumerate() {
        let object = fg.output_objects.get(k);
        if let Some(j) = (0..k).find(|&j| fg.output_objects.get(j) == object) {
            let same = results[j].clone();
            results.push(same);
            continue;
        }
        let r = match o {
            FOutput::Input(p) => arg_tensor(args, *p)?.clone(),
            FOutput::AliasOfInput { group, value } => {
                let t = get(env, *value)?;
                let single = fg.groups.single.get(*group).copied().unwrap_or(false);
                let anchor = anchor(fg, args, *group)?;
                if anchor.requires_grad() && detached(k) {
                    anchor.detach()?.as_strided(&t.shape(), &t.stride(), t.storage_offset())?
                } else if single && !fg.mutated_groups.iter().any(|(g, _)| g == group) {
                    // Views replayed on the caller's tensor itself.
                    t.clone()
                } else if let Some((_, r)) = regenerated.iter().find(|(v, _)| v == value) {
                    r.clone()
                } else {
                    let r = anchor.as_strided(&t.shape(), &t.stride(), t.storage_offset())?;
                    regenerated.push((*value, r.clone()));
                    r
                }
            }
            FOutput::Value(v) | FOutput::ViewOfIntermediate { value: v, .. } => get(env, *v)?.clone(),
        };
        // Not a view in eager (a detached alias, or an allocated tensor
        // whose own metadata changed): the same storage and geometry,
        // without a `._base`.
        let is_view = fg.output_is_view.get(k).copied().unwrap_or(true);
        let r = if !is_view && !matches!(o, FOutput::Input(_)) && r.view_base().is_some() { r.alias_with_layout(r.layout()) } else { r };
        // Another object already handed out as this tensor: a new object over it.
        let r =
            if !matches!(o, FOutput::Input(_)) && results.iter().any(|x| x.same_tensor(&r)) { r.alias_with_layout(r.layout()) } else { r };
        results.push(r);
    }
    Ok(results)
}

/// The caller's tensor to regenerate an alias of group `g` from, so the
/// output is a view with the same `._base` eager gives: a member that is
/// not itself a view when there is one (the others are views of it).
pub(crate) fn anchor<'a>(fg: &FunctionalGraph, args: &[Arg<'a>], g: usize) -> Result<&'a Tensor> {
    let members: Vec<&'a Tensor> = fg
        .groups
        .group_of
        .iter()
        .enumerate()
        .filter(|(_, x)| **x == Some(g))
        .filter_map(|(p, _)| args.get(p).and_then(Arg::tensor))
        .collect();
    members
        .iter()
        .find(|t| t.view_base().is_none())
        .or(members.first())
        .copied()
        .ok_or_else(|| AotError::Internal { op: "epilogue", msg: format!("input group {g} has no tensor") })
}

fn base(bases: &Bases, g: usize) -> Result<Tensor> {
    bases.get(g).ok_or_else(|| AotError::Internal { op: "epilogue", msg: format!("no base for input group {g}") })
}

fn arg_tensor<'a>(args: &[Arg<'a>], p: usize) -> Result<&'a Tensor> {
    args.get(p).and_then(Arg::tensor).ok_or_else(|| AotError::Internal { op: "epilogue", msg: format!("argument {p} is not a tensor") })
}
