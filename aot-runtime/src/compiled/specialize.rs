//! Guards and the specialisation cache.
//!
//! A compiled function is specialised per [`GuardKey`]: per tensor
//! argument its dtype, device, `requires_grad`, `is_leaf` and rank, plus
//! the alias pattern among the arguments (which are the very same tensor,
//! which share a storage, and which of those really overlap). Shapes are
//! not in the key: the plan reads them at run time.
//!
//! The key is recomputed on every call and compared, never assumed: a call
//! whose alias pattern differs from the previous one gets its own
//! specialisation (PyTorch reused a stale one, pytorch#139789). When the
//! function mutates no input (known statically), the alias pattern cannot
//! change the result and is left out of the key, so no storage comparisons
//! are made.

use super::arg::Arg;
use crate::autograd::is_grad_enabled;
use crate::error::{AotError, Result};
use crate::tensor::Tensor;
use crate::wrappers::training_plan::TrainingPlan;
use aot_ir::analysis::input_output::{compute_overlapping_inputs, ArgGeometry};
use aot_ir::transform::{functionalize, FunctionalGraph, InputGroups};
use aot_ir::{Graph, StaticMeta};
use std::sync::{Arc, Mutex, OnceLock};

/// What one argument contributes to the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ArgKey {
    /// `u8::MAX` for scalars.
    dtype: u8,
    device: (u8, u32),
    requires_grad: bool,
    is_leaf: bool,
    rank: u32,
    /// The first argument that is this very tensor.
    same_as: u32,
    /// The first argument sharing this tensor's storage.
    storage_as: u32,
    /// Overlaps in memory another, distinct argument of its storage.
    overlaps: bool,
}

/// The guard key of a call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GuardKey {
    grad_enabled: bool,
    args: Vec<ArgKey>,
}

impl GuardKey {
    pub(crate) fn of(args: &[Arg], meta: &StaticMeta) -> GuardKey {
        let with_aliases = meta.mutates_inputs;
        let mut keys: Vec<ArgKey> = args
            .iter()
            .enumerate()
            .map(|(i, a)| match a.tensor() {
                None => ArgKey {
                    dtype: u8::MAX,
                    device: (0, 0),
                    requires_grad: false,
                    is_leaf: false,
                    rank: 0,
                    same_as: i as u32,
                    storage_as: i as u32,
                    overlaps: false,
                },
                Some(t) => {
                    let find = |f: &dyn Fn(&Tensor) -> bool| {
                        if with_aliases {
                            args[..i].iter().position(|b| b.tensor().is_some_and(f)).unwrap_or(i) as u32
                        } else {
                            i as u32
                        }
                    };
                    ArgKey {
                        dtype: t.dtype() as u8,
                        device: match t.device() {
                            crate::Device::Cpu => (0, 0),
                            crate::Device::Cuda(o) => (1, o as u32),
                        },
                        requires_grad: t.requires_grad(),
                        is_leaf: t.is_leaf(),
                        rank: t.rank() as u32,
                        same_as: find(&|u| u.same_tensor(t)),
                        storage_as: find(&|u| u.shares_storage_with(t)),
                        overlaps: false,
                    }
                }
            })
            .collect();
        if with_aliases {
            mark_overlaps(args, &mut keys);
        }
        GuardKey { grad_enabled: is_grad_enabled(), args: keys }
    }

    /// The input groups this key implies: one group per distinct tensor,
    /// except that the distinct tensors over a storage the function writes
    /// form one group (their reads must see each other's writes).
    fn groups(&self, meta: &StaticMeta) -> InputGroups {
        let mut group_of: Vec<Option<usize>> = vec![None; self.args.len()];
        let mut single: Vec<bool> = Vec::new();
        for (i, k) in self.args.iter().enumerate() {
            if k.dtype == u8::MAX {
                continue;
            }
            let storage_written = self.args.iter().enumerate().any(|(j, kj)| {
                kj.dtype != u8::MAX && kj.storage_as == k.storage_as && meta.inputs.get(j).is_some_and(|m| m.mutates_data())
            });
            let distinct_in_storage = self
                .args
                .iter()
                .enumerate()
                .filter(|(j, kj)| kj.dtype != u8::MAX && kj.storage_as == k.storage_as && kj.same_as as usize == *j)
                .count();
            let shared = storage_written && distinct_in_storage > 1;
            let leader = if shared { k.storage_as } else { k.same_as } as usize;
            group_of[i] = if leader < i {
                group_of[leader]
            } else {
                single.push(!shared);
                Some(single.len() - 1)
            };
        }
        let object_of = self.args.iter().map(|k| (k.dtype != u8::MAX).then_some(k.same_as as usize)).collect();
        InputGroups { group_of, single, object_of }
    }
}

fn mark_overlaps(args: &[Arg], keys: &mut [ArgKey]) {
    // Tensors whose storage holds another, distinct argument.
    let shared: Vec<usize> = (0..keys.len())
        .filter(|&i| {
            let ki = keys[i];
            ki.dtype != u8::MAX && keys.iter().any(|k| k.dtype != u8::MAX && k.storage_as == ki.storage_as && k.same_as != ki.same_as)
        })
        .collect();
    if shared.is_empty() {
        return;
    }
    let geoms: Vec<ArgGeometry> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match a.tensor() {
            Some(t) => ArgGeometry {
                identity: keys[i].same_as as usize,
                shape: t.shape(),
                stride: t.stride(),
                storage_offset: t.storage_offset(),
                requires_grad: t.requires_grad(),
            },
            None => ArgGeometry { identity: i, shape: vec![], stride: vec![], storage_offset: 0, requires_grad: false },
        })
        .collect();
    let mut leaders: Vec<u32> = shared.iter().map(|&i| keys[i].storage_as).collect();
    leaders.dedup();
    for l in leaders {
        let group: Vec<usize> = shared.iter().copied().filter(|&i| keys[i].storage_as == l).collect();
        for i in compute_overlapping_inputs(&geoms, &group) {
            keys[i].overlaps = true;
        }
    }
}

/// One specialisation: the functional graph for one key, and, for calls
/// that record gradients, its joint graph and partition (built on first
/// use; `Err` holds why there is no compiled training path).
#[derive(Debug)]
pub(crate) struct Specialization {
    pub(crate) graph: FunctionalGraph,
    /// Per argument, whether it required grad when this specialisation was
    /// made (from the key).
    requires_grad: Vec<bool>,
    training: OnceLock<std::result::Result<Arc<TrainingPlan>, String>>,
}

impl Specialization {
    fn build(g: &Graph, meta: &StaticMeta, key: &GuardKey) -> Result<Specialization> {
        let groups = key.groups(meta);
        let graph = functionalize(g, &groups);
        graph.verify().map_err(|e| AotError::Internal { op: "functionalize", msg: e.to_string() })?;
        let requires_grad = key.args.iter().map(|k| k.requires_grad).collect();
        Ok(Specialization { graph, requires_grad, training: OnceLock::new() })
    }

    /// PyTorch's `DebugAssertWrapper`: a call must have the `requires_grad`
    /// pattern this specialisation was made for. The guard key contains
    /// the pattern, so a mismatch means a cache bug; debug builds check
    /// every call and refuse to run a plan made for other arguments.
    pub(crate) fn debug_assert_requires_grad(&self, func: &str, args: &[Arg]) -> Result<()> {
        for (i, (a, &compiled)) in args.iter().zip(&self.requires_grad).enumerate() {
            let now = a.tensor().is_some_and(Tensor::requires_grad);
            if now != compiled {
                let (is, assumed) = if now { ("requires", "doesn't") } else { ("doesn't require", "does") };
                return Err(AotError::Internal {
                    op: "DebugAssertWrapper",
                    msg: format!("`{func}`: argument {i} {is} grad, but the specialisation was compiled assuming it {assumed}"),
                });
            }
        }
        if args.len() != self.requires_grad.len() {
            return Err(AotError::Internal {
                op: "DebugAssertWrapper",
                msg: format!("`{func}`: {} arguments, but the specialisation was compiled for {}", args.len(), self.requires_grad.len()),
            });
        }
        Ok(())
    }

    /// The training plan; the key fixes which arguments require grad, so
    /// it is the same for every call that reaches this specialisation.
    pub(crate) fn training(&self, g: &Graph) -> std::result::Result<&Arc<TrainingPlan>, &str> {
        self.training
            .get_or_init(|| TrainingPlan::build(&self.graph, g, &self.requires_grad).map(Arc::new))
            .as_ref()
            .map_err(String::as_str)
    }

    /// The bases of the input groups for these arguments: the tensor itself
    /// for a one-tensor group, else a 1-D tensor over the whole storage.
    pub(crate) fn bases(&self, args: &[Arg]) -> Vec<Tensor> {
        let groups = &self.graph.groups;
        (0..groups.single.len())
            .filter_map(|g| {
                let p = groups.group_of.iter().position(|x| *x == Some(g))?;
                let t = args.get(p)?.tensor()?;
                Some(if groups.single[g] { t.clone() } else { t.storage_as_1d() })
            })
            .collect()
    }
}

/// The cache of a compiled function: few keys in practice, so a short
/// list, most recent first.
#[derive(Debug, Default)]
pub(crate) struct SpecCache {
    entries: Mutex<Vec<(GuardKey, Arc<Specialization>)>>,
}

impl SpecCache {
    /// The specialisation for `key`, built on a miss.
    pub(crate) fn get(&self, g: &Graph, meta: &StaticMeta, key: GuardKey) -> Result<Arc<Specialization>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = entries.iter().position(|(k, _)| *k == key) {
            if i != 0 {
                let e = entries.remove(i);
                entries.insert(0, e);
            }
            return Ok(entries[0].1.clone());
        }
        let spec = Arc::new(Specialization::build(g, meta, &key)?);
        entries.insert(0, (key, spec.clone()));
        Ok(spec)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
