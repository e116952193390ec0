//! A run of the function on copies of a call's arguments, for `explain()`.
//!
//! PyTorch collects its metadata by running the function (on functional
//! fake tensors), so some of its answers depend on the arguments' shapes,
//! layouts and dtypes; the compile-time template marks where
//! (`StaticMeta::needs_observation`). One eager run, without grad, on
//! copies that keep the arguments' alias structure (`deep_copy_args`)
//! gives both what the template cannot know (an [`Observation`]) and the
//! shapes of the traced tangents (`tangents.rs`); the caller's tensors are
//! untouched.

use super::tangents::deep_copy_args;
use crate::arg::Arg;
use crate::executor::interp;
use crate::layout::Layout;
use crate::tensor::NoGradGuard;
use crate::tensor::Tensor;
use aot_ir::analysis::{MatmulShape, Observation, ObservedAlias, ObservedOutput};
use aot_ir::{Graph, OutputAlias, StaticMeta};

/// The copies of the arguments after the run, their layouts before it, and
/// the outputs.
pub(crate) struct CopyRun {
    /// Per parameter: the copy of a tensor argument.
    pub(crate) copies: Vec<Option<Tensor>>,
    before: Vec<Option<Layout>>,
    pub(crate) outs: Vec<Tensor>,
    /// Per source node: whether a `reshape`/`contiguous` aliased.
    pub(crate) outcomes: Vec<Option<bool>>,
    /// Per output: the operand shapes of the `matmul` that computed it.
    out_matmuls: Vec<Option<MatmulShape>>,
}

impl CopyRun {
    /// Runs `g` on copies of `args`; `None` when copying or the run fails
    /// (then the call fails too, and the template's answer stands).
    pub(crate) fn new(g: &Graph, args: &[Arg]) -> Option<CopyRun> {
        let _no_grad = NoGradGuard::new();
        let copies = deep_copy_args(args).ok()?;
        let before = copies.iter().map(|c| c.as_ref().map(Tensor::layout)).collect();
        let copy_args: Vec<Arg> = args.iter().zip(&copies).map(|(a, c)| c.as_ref().map_or(*a, Arg::Tensor)).collect();
        let mut rec = interp::Recording::default();
        let outs = interp::run_recording(g, &copy_args, &mut rec).ok()?;
        let out_matmuls = g
            .outputs
            .iter()
            .map(|&v| g.nodes.iter().position(|n| n.out == Some(v)).and_then(|i| rec.matmuls.get(i).copied().flatten()))
            .collect();
        Some(CopyRun { copies, before, outs, outcomes: rec.outcomes, out_matmuls })
    }

    /// What the run shows about metadata mutations and output aliasing.
    pub(crate) fn observation(&self, meta: &StaticMeta) -> Observation {
        let metadata_unchanged =
            self.copies.iter().zip(&self.before).map(|(c, b)| c.as_ref().is_none_or(|c| Some(c.layout()) == *b)).collect();
        let mut ids = Interner::default();
        let outputs = self
            .outs
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let base = o.view_base();
                let template_input = match meta.outputs.get(k).map(|t| t.alias) {
                    Some(OutputAlias::IsInput(p) | OutputAlias::AliasOfInput(p)) => Some(p),
                    _ => None,
                };
                ObservedOutput {
                    alias: self.alias_of(o, base.as_ref(), template_input),
                    object: ids.object(o),
                    storage: ids.storage(o),
                    layout: ids.layout(o),
                    base: base.as_ref().map(|b| ids.object(b)),
                    matmul: self.out_matmuls.get(k).copied().flatten(),
                }
            })
            .collect();
        Observation { metadata_unchanged, outputs }
    }

    /// An output's relation to the arguments. Arguments that share a
    /// storage share it in the copies too, while PyTorch gives each its own
    /// functional storage: among them, the one the template names, else
    /// the one the output is a view of, else the first.
    fn alias_of(&self, o: &Tensor, base: Option<&Tensor>, template_input: Option<usize>) -> ObservedAlias {
        let copy = |p: usize| self.copies.get(p).and_then(Option::as_ref);
        let n = self.copies.len();
        let shares = |p: usize| copy(p).is_some_and(|c| c.shares_storage_with(o));
        if let Some(p) = (0..n).find(|&p| copy(p).is_some_and(|c| c.same_tensor(o))) {
            return ObservedAlias::IsInput(p);
        }
        let viewed = || base.and_then(|b| (0..n).find(|&p| copy(p).is_some_and(|c| c.same_tensor(b))));
        match template_input.filter(|&p| shares(p)).or_else(viewed).or_else(|| (0..n).find(|&p| shares(p))) {
            Some(p) => ObservedAlias::AliasOfInput(p),
            None => ObservedAlias::Intermediate,
        }
    }
}

/// Small ids for tensor objects, storages and layouts, in order of first sight.
#[derive(Default)]
struct Interner {
    objects: Vec<Tensor>,
    storages: Vec<Tensor>,
    layouts: Vec<(u32, Layout)>,
}

impl Interner {
    fn object(&mut self, t: &Tensor) -> u32 {
        let i = self.objects.iter().position(|o| o.same_tensor(t)).unwrap_or_else(|| {
            self.objects.push(t.clone());
            self.objects.len() - 1
        });
        i as u32
    }

    fn storage(&mut self, t: &Tensor) -> u32 {
        let i = self.storages.iter().position(|o| o.shares_storage_with(t)).unwrap_or_else(|| {
            self.storages.push(t.clone());
            self.storages.len() - 1
        });
        i as u32
    }

    fn layout(&mut self, t: &Tensor) -> u32 {
        let key = (self.storage(t), t.layout());
        let i = self.layouts.iter().position(|k| *k == key).unwrap_or_else(|| {
            self.layouts.push(key);
            self.layouts.len() - 1
        });
        i as u32
    }
}
