//! The `RuntimeWrapper` epilogue: after every kernel of a call succeeded,
//! apply the input mutations and hand out the outputs.
//!
//! - Data mutations: the final version of each written input group is
//!   copied back over the caller's storage (`copy_`), or is already there
//!   (a kernel stored it in place: `executor/kernel/inplace.rs`), or, for a write
//!   deferred to here (`executor/deferred_writes.rs`), the write itself runs on
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
//! [`TrainingEpilogue`] is the same epilogue for a call that recorded
//! gradients: it writes with grad mode on, so the written inputs' history
//! runs through the compiled function's node.
//!
//! Nothing here can fail for a well-formed plan: the copies are between
//! buffers of one length and dtype, and the geometries were valid on a
//! storage of the same length.

use crate::arg::Arg;
use crate::arg::Bases;
use crate::error::{AotError, Result};
use crate::executor::deferred_writes::Ready;
use crate::executor::functional::{get, Env};
use crate::executor::outputs::Outputs;
use crate::tensor::NoGradGuard;
use crate::tensor::Tensor;
use crate::wrappers::autograd_fn::{arg, hidden, inplace_refused};
use aot_ir::transform::joint::{JointGraph, OutputKind};
use aot_ir::transform::{FOutput, FunctionalGraph};
use aot_ir::{Graph, StaticMeta};

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
    deferred: Option<&Ready>,
) -> Result<Outputs> {
    // With grad mode off (the caller's), only views pass `requires_grad` on.
    let grad_mode_off = !crate::tensor::is_grad_enabled();
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
        if let Some(d) = deferred.filter(|d| d.defers(group)) {
            // `Deferred::ready` checked the operands before the plan ran.
            if !d.apply(group, bases) {
                return Err(AotError::Internal { op: "epilogue", msg: format!("the deferred write of input group {group} did not run") });
            }
            continue;
        }
        let (dst, src) = (base(bases, group)?, get(env, v)?);
        if std::sync::Arc::ptr_eq(dst.storage(), src.storage()) {
            // A kernel stored the final version over the caller's storage
            // (reinplacing): only the version counter is left to bump.
            dst.storage().bump_version();
            continue;
        }
        if only_in_env(fg, env, src) && dst.storage().swap_data(src.storage()) {
            // The final version's buffer becomes the caller's: no copy.
            dst.storage().bump_version();
            crate::counters::bump(crate::counters::Counter::SwappedWriteBacks);
            continue;
        }
        if !crate::executor::direct_kernels::copy_storage(&dst, src) {
            dst.storage_as_1d().copy_(&src.storage_as_1d())?;
        }
        crate::counters::bump(crate::counters::Counter::CopiedWriteBacks);
    }
    let mut regenerated: Vec<(aot_ir::ValueId, Tensor)> = Vec::new();
    let mut results = Outputs::with_capacity(fg.outputs.len());
    for (k, o) in fg.outputs.iter().enumerate() {
        let object = fg.output_objects.get(k);
        if let Some(j) = (0..k).find(|&j| fg.output_objects.get(j) == object) {
            let same = results.get(j).cloned().ok_or_else(|| AotError::internal("epilogue", format!("no output {j} before {k}")))?;
            results.push(same);
            continue;
        }
        let r = match o {
            FOutput::Input(p) => arg_tensor(args, *p)?.clone(),
            FOutput::AliasOfInput { group, value } => {
                let t = get(env, *value)?;
                let single = fg.groups.single.get(*group).copied().unwrap_or(false);
                let anchor = anchor(fg, args, *group, t.dtype())?;
                if anchor.requires_grad() && detached(k) {
                    anchor.detach()?.as_strided_dtype(t.dtype(), &t.shape(), &t.stride(), t.storage_offset())?
                } else if single && !fg.mutated_groups.iter().any(|(g, _)| g == group) {
                    // Views replayed on the caller's tensor itself.
                    t.clone()
                } else if let Some((_, r)) = regenerated.iter().find(|(v, _)| v == value) {
                    r.clone()
                } else {
                    let r = anchor.as_strided_dtype(t.dtype(), &t.shape(), &t.stride(), t.storage_offset())?;
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

/// Whether nothing but the run's own values holds `t`'s storage, and no
/// output is made from it: then its buffer can become the caller's
/// (PyTorch reinplaces such a write; here the copy the plan wrote is kept
/// instead of copied back, so a failing call still wrote nothing). The
/// storage's reference count is that of the distinct tensor objects over
/// it in the value table.
fn only_in_env(fg: &FunctionalGraph, env: &Env, t: &Tensor) -> bool {
    let mut objects: Vec<&Tensor> = Vec::new();
    for x in env.iter().flatten().filter(|x| x.shares_storage_with(t)) {
        if !objects.iter().any(|o| o.same_tensor(x)) {
            objects.push(x);
        }
    }
    let returned = fg.outputs.iter().any(|o| match o {
        FOutput::Value(v) => get(env, *v).is_ok_and(|x| x.shares_storage_with(t)),
        FOutput::ViewOfIntermediate { base, value } => [base, value].iter().any(|v| get(env, **v).is_ok_and(|x| x.shares_storage_with(t))),
        FOutput::Input(_) | FOutput::AliasOfInput { .. } => false,
    });
    !returned && std::sync::Arc::strong_count(t.storage()) == objects.len()
}

/// The caller's tensor to regenerate an alias of group `g` from, so the
/// output is a view with the same `._base` eager gives: a member that is
/// not itself a view when there is one (the others are views of it).
pub(crate) fn anchor<'a>(fg: &FunctionalGraph, args: &[Arg<'a>], g: usize, dtype: crate::dtype::DType) -> Result<&'a Tensor> {
    let all = fg.groups.group_of.iter().enumerate().filter(|(_, x)| **x == Some(g)).filter_map(|(p, _)| args.get(p).and_then(Arg::tensor));
    // An output aliases a member of its own dtype (a group of dtype views
    // of one storage has members of several).
    let mut members: Vec<&'a Tensor> = all.clone().filter(|t| t.dtype() == dtype).collect();
    if members.is_empty() {
        members = all.collect();
    }
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

/// The epilogue of a call that recorded gradients
/// (`wrappers::autograd_fn`), run with grad mode on after the node is
/// attached: mutated inputs take the node's outputs with `copy_` (so their
/// history runs through the compiled backward), and the user's outputs are
/// rebuilt from the node's outputs.
pub(crate) struct TrainingEpilogue<'a> {
    pub jg: &'a JointGraph,
    pub fg: &'a FunctionalGraph,
    pub g: &'a Graph,
    pub meta: &'a StaticMeta,
    pub args: &'a [Arg<'a>],
    /// Per input group: the common base of a group of aliased arguments.
    pub synthetic: &'a [Option<Tensor>],
    /// The arguments' `requires_grad` as the call found them.
    pub rg_at_call: &'a [bool],
}

impl TrainingEpilogue<'_> {
    fn first_of_group(&self, group: usize) -> Option<usize> {
        self.fg.groups.group_of.iter().position(|x| *x == Some(group))
    }

    fn synthetic_base(&self, group: usize) -> Option<&Tensor> {
        self.synthetic.get(group).and_then(Option::as_ref)
    }

    /// Writes the node's outputs for mutated inputs into the arguments, then
    /// applies the metadata mutations.
    pub fn write_inputs(&self, outs: &[Tensor]) -> Result<()> {
        let in_fn = |e: AotError| e.in_function(&self.g.name, None);
        for (o, t) in self.jg.fw_outputs.iter().zip(outs) {
            let OutputKind::MutatedInput(group) = o.kind else { continue };
            let Some(p) = self.first_of_group(group) else { continue };
            let a = arg(self.args, p)?;
            {
                // The whole storage first: writes through `as_strided` can
                // reach beyond the argument's own elements.
                let _no_grad = NoGradGuard::new();
                a.storage_as_1d().copy_(&t.storage_as_1d()).map_err(in_fn)?;
            }
            // Then the argument itself (or the aliased arguments' common
            // base, whose views they are), for its autograd history.
            let _no_grad = hidden(self.fg, self.meta, self.args.len(), p).then(NoGradGuard::new);
            match self.synthetic_base(group) {
                Some(b) => b.copy_history_(&t.as_strided(&b.shape(), &b.stride(), b.storage_offset())?).map_err(in_fn)?,
                None => a.copy_history_(t).map_err(in_fn)?,
            };
        }
        for (o, t) in self.jg.fw_outputs.iter().zip(outs) {
            if let OutputKind::MetadataMutation(p) = o.kind {
                // Eager allowed the metadata mutation, so where it would
                // refuse it with grad on, the function did it under `no_grad`.
                let a = arg(self.args, p)?;
                let _no_grad = inplace_refused(a).then(NoGradGuard::new);
                a.as_strided_(&t.shape(), &t.stride(), t.storage_offset()).map_err(in_fn)?;
            }
        }
        Ok(())
    }

    /// Whether user output `k` requires grad in eager. The static
    /// `grad_deps` follow writes within one argument; writes through
    /// another argument over the same storage show in the flags the
    /// epilogue left. A view made under `no_grad` took its base's flag when
    /// it was made: the flags as the call found them.
    fn wants_grad(&self, k: usize) -> bool {
        self.meta.outputs.get(k).is_some_and(|o| {
            o.grad_deps.iter().any(|&p| match o.no_grad_view {
                true => self.rg_at_call.get(p).copied().unwrap_or(false),
                false => self.args.get(p).and_then(Arg::tensor).is_some_and(Tensor::requires_grad),
            })
        })
    }

    /// The user's outputs, rebuilt from the node's outputs.
    pub fn outputs(&self, outs: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut results: Vec<Tensor> = Vec::with_capacity(self.jg.user_outputs.len());
        for (k, fo) in self.jg.user_outputs.iter().enumerate() {
            let object = self.fg.output_objects.get(k);
            if let Some(j) = (0..k).find(|&j| self.fg.output_objects.get(j) == object) {
                let same = results[j].clone();
                results.push(same);
                continue;
            }
            // Views the function made under no_grad are regenerated under
            // no_grad (eager makes them leaves of their own).
            let src = self.g.outputs.get(k).and_then(|&v| self.g.def_node(v));
            let _no_grad = src.is_some_and(|n| n.no_grad).then(NoGradGuard::new);
            let r = self.output(k, fo, outs)?;
            // Outputs that do not require grad (through `detach`) are
            // returned detached; non-views carry no `._base`.
            let not_input = !matches!(fo, FOutput::Input(_));
            let r = if !self.wants_grad(k) && r.requires_grad() && not_input { r.detach()? } else { r };
            let is_view = self.fg.output_is_view.get(k).copied().unwrap_or(true);
            let r = if !is_view && not_input && r.view_base().is_some() { r.detach()? } else { r };
            // Another object already handed out as this tensor (`y` and
            // `y.detach()`): a distinct object over the same storage.
            let r = if not_input && results.iter().any(|x| x.same_tensor(&r)) { r.detach()? } else { r };
            results.push(r);
        }
        Ok(results)
    }

    /// User output `k` before the detach rules of [`Self::outputs`].
    fn output(&self, k: usize, fo: &FOutput, outs: &[Tensor]) -> Result<Tensor> {
        let jg = self.jg;
        let value_of = |k: usize| jg.fw_outputs.iter().position(|o| o.kind == OutputKind::User(k)).map(|i| &outs[i]);
        let geom = || value_of(k).ok_or_else(|| AotError::internal("compiled function", format!("no forward output for result {k}")));
        let wants_grad = self.wants_grad(k);
        Ok(match fo {
            FOutput::Input(p) => arg(self.args, *p)?.clone(),
            FOutput::AliasOfInput { group, .. } => {
                let v = geom()?;
                // An output that does not require grad is a view of a
                // detached alias (eager: a view of `x.detach()`). In a group
                // of aliased arguments, a view of their common base: an
                // `as_strided` of one argument would drop the gradient of
                // elements outside it.
                let a = match self.synthetic_base(*group) {
                    Some(b) => b,
                    None => arg(self.args, self.first_of_group(*group).unwrap_or(usize::MAX))?,
                };
                let a = if wants_grad { a.clone() } else { a.detach()? };
                a.as_strided(&v.shape(), &v.stride(), v.storage_offset())?
            }
            FOutput::Value(_) => geom()?.clone(),
            FOutput::ViewOfIntermediate { base, .. } => {
                let v = geom()?;
                let b = jg
                    .fw_outputs
                    .iter()
                    .position(|o| o.value == *base)
                    .map(|i| &outs[i])
                    .ok_or_else(|| AotError::internal("compiled function", format!("no base returned for result {k}")))?;
                let b = if wants_grad { b.clone() } else { b.detach()? };
                b.as_strided(&v.shape(), &v.stride(), v.storage_offset())?
            }
        })
    }
}
