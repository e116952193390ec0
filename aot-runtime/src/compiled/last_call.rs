//! The last call's guard key, remembered by the identity of its arguments.
//!
//! A call's key (`specialize.rs`) reads every tensor argument's state under
//! its lock, hashes the result and looks it up; for a tiny function that is
//! a quarter of the call. Most calls repeat the last one with the same
//! tensors (a training loop passes its parameters, a cache its buffers),
//! so each `SpecCache` remembers the last key with a stamp per argument:
//! the tensor's id and its state's generation, which every write lock on
//! the state bumps ([`Tensor::state_stamp`]). A call whose stamps and grad
//! mode equal the remembered ones has the remembered key and
//! specialization, checked with one atomic load per argument.
//!
//! Only keys that are a function of the arguments' own states are
//! remembered: no argument may be a view (a view's `requires_grad` and
//! history follow its base, which the stamps do not cover) and none may be
//! in an unusual autograd state. Ids are never reused, so a stamp cannot
//! match a different tensor that took a freed one's place.

use super::specialize::{ProbeKey, SpecCache, Specialization, INLINE_ARGS};
use crate::arg::Arg;
use crate::error::Result;
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use aot_ir::{Graph, StaticMeta};
use std::sync::{Arc, Mutex};

/// One remembered call (see the module doc).
struct Memo {
    grad_enabled: bool,
    /// Per argument: the tensor's [`Tensor::state_stamp`], or `(0, 0)` for
    /// an argument that is not a tensor (tensor ids start at 1).
    stamps: Stamps,
    len: usize,
    probe: Arc<ProbeKey>,
    spec: Arc<Specialization>,
    /// Calls answered from this memo (for tests).
    hits: usize,
}

/// A `SpecCache`'s last call, shared by the threads calling the function;
/// a thread that finds it locked computes its key instead of waiting.
#[derive(Default)]
pub(crate) struct LastCall(Mutex<Option<Memo>>);

/// Per argument, its [`Tensor::state_stamp`] or `(0, 0)` (see [`Memo`]).
type Stamps = [(usize, u64); INLINE_ARGS];

/// A call's key and specialization. The key is shared with the memo: a
/// hit clones a handle, not the key's few hundred bytes.
pub(crate) type Keyed = (Arc<ProbeKey>, Arc<Specialization>);

impl LastCall {
    /// The remembered key and specialization, if `stamps` (of `len`
    /// arguments) match them.
    fn hit(&self, stamps: &Stamps, len: usize) -> Option<Keyed> {
        let mut guard = self.0.try_lock().ok()?;
        let memo = guard.as_mut()?;
        let same = memo.len == len && memo.grad_enabled == is_grad_enabled() && memo.stamps[..len] == stamps[..len];
        if !same {
            return None;
        }
        memo.hits += 1;
        crate::counters::bump(crate::counters::Counter::LastCallHits);
        Some((memo.probe.clone(), memo.spec.clone()))
    }

    /// How many calls the current memo answered (0 when there is none).
    #[cfg(test)]
    pub(crate) fn hits(&self) -> usize {
        self.0.lock().map_or(0, |g| g.as_ref().map_or(0, |m| m.hits))
    }

    /// Remembers `probe` and `spec` under `stamps`, read before the key
    /// was (so a state changed meanwhile can only cause a miss), when the
    /// key depends on the arguments' own states only (see the module doc).
    fn remember(&self, stamps: Stamps, len: usize, probe: &Arc<ProbeKey>, spec: &Arc<Specialization>) {
        if probe.unusual.is_some() || probe.has_view {
            return;
        }
        if let Ok(mut guard) = self.0.try_lock() {
            *guard = Some(Memo { grad_enabled: probe.grad_enabled(), stamps, len, probe: probe.clone(), spec: spec.clone(), hits: 0 });
        }
    }
}

/// The guard key of a call with `args` and its specialization (built on a
/// miss), or `None` when an argument is in an autograd state the compiled
/// paths do not model (checked with `check_unusual`; the call then runs
/// the eager reference). `with_aliases`: as [`ProbeKey::fill`].
pub(crate) fn key_and_spec(
    cache: &SpecCache,
    g: &Graph,
    meta: &StaticMeta,
    args: &[Arg],
    with_aliases: bool,
    check_unusual: bool,
) -> Result<Option<Keyed>> {
    let stamps = (args.len() <= INLINE_ARGS).then(|| {
        let mut stamps = [(0, 0); INLINE_ARGS];
        for (slot, a) in stamps.iter_mut().zip(args) {
            *slot = a.tensor().map_or((0, 0), Tensor::state_stamp);
        }
        stamps
    });
    if let Some(hit) = stamps.as_ref().and_then(|s| cache.last.hit(s, args.len())) {
        return Ok(Some(hit));
    }
    let mut probe = ProbeKey::empty(args.len());
    probe.fill(args, with_aliases, check_unusual);
    if probe.unusual.is_some() {
        return Ok(None);
    }
    let spec = cache.get_probed(g, meta, &probe)?;
    let probe = Arc::new(probe);
    if let Some(stamps) = stamps {
        cache.last.remember(stamps, args.len(), &probe, &spec);
    }
    Ok(Some((probe, spec)))
}

#[cfg(test)]
#[path = "tests_last_call.rs"]
mod tests;
