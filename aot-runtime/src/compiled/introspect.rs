//! What tests read of a compiled function's state (its caches, its
//! loops, the sizes shape propagation gives), through `crate::testing`.
//! Here, inside `compiled`, because it reads the function's private fields.

use super::CompiledFn;
use crate::arg::Arg;
use crate::error::Result;

/// Whether a call with these arguments finds its specialisation cached
/// (the guard key and lookup of a call, nothing else).
pub fn cache_probe(f: &CompiledFn, args: &[Arg]) -> bool {
    let Ok(f) = f.variant(args) else { return false };
    f.with_flat(args, |args| Ok(f.cache_probe(args))).unwrap_or(false)
}

/// How many specialisations `f` has cached.
pub fn num_specializations(f: &CompiledFn) -> usize {
    f.num_specializations()
}

/// How many unrolled stages of its loops over call-time bounds `f` keeps
/// (0 for a function without such loops).
pub fn num_loop_stages(f: &CompiledFn) -> usize {
    f.loops.as_ref().map_or(0, |l| l.num_stages())
}

/// The sizes `f`'s body reads of tensors it computes
/// ([`aot_ir::Graph::value_sizes`], in order), as shape propagation gives
/// them for a call with these arguments (tensor arguments only).
pub fn value_sizes(f: &CompiledFn, args: &[Arg]) -> Result<Vec<i64>> {
    let g = &f.graph;
    let values = crate::arg::scalar_values(g, args)?;
    let start = g.params.len() + g.sizes.len();
    Ok(values.get(start..).unwrap_or(&[]).iter().map(|v| if let Some(aot_ir::ScalarValue::I64(n)) = v { *n } else { -1 }).collect())
}

/// The partitioned forward and backward that a call with these arguments
/// runs when it records gradients, as a listing (both scheduled into
/// kernels; listing the backward compiles it, as `lazy_backward` does on
/// the first `backward()`).
pub fn training_listing(f: &CompiledFn, args: &[Arg]) -> Result<String> {
    let f = f.variant(args)?;
    f.with_flat(args, |args| {
        crate::arg::scalar_values(&f.graph, args)?;
        let spec = f.cache.get(&f.graph, &f.meta, args)?;
        let training = spec.plan.training(&f.graph).map_err(|why| crate::error::AotError::unsupported("training_listing", why))?;
        Ok(training.compiled_backward()?.partition.listing(&training.joint))
    })
}
