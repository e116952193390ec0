//! Items the generated code and the tests use; not part of the API.

use crate::arg::Arg;
pub use crate::autograd::saved_storage_bytes;

/// How many backward stages of training plans were compiled (on their
/// first `backward()`, `AutogradLazyBackwardCompileInfo`), in this
/// process.
pub fn backward_compiles() -> u64 {
    crate::wrappers::lazy_backward::backward_compiles()
}

/// How many kernels of the kernel stage ran fused, and how many op by
/// op, in this process (tests check that the fused path is taken).
pub fn kernel_stats() -> (u64, u64) {
    crate::executor::kernel::stats()
}

/// How many written inputs of inference calls took the call's final
/// buffer instead of a copy of it, in this process.
pub fn swapped_write_backs() -> u64 {
    crate::wrappers::epilogue::swapped_write_backs()
}

/// How many first writes of inference calls computed their new version
/// out of place, without copying the input first, in this process.
pub fn fresh_writes() -> u64 {
    crate::executor::fresh::count()
}

/// How many results of compiled calls were written over the buffer of
/// an operand that died at their node, instead of a new buffer, in this
/// process.
pub fn reused_buffers() -> u64 {
    crate::executor::reuse::count()
}

/// How many kernels of inference calls stored their result over a
/// written argument's own storage (reinplacing), in this process.
pub fn in_place_kernels() -> u64 {
    crate::executor::kernel::inplace_count()
}

/// How many written inputs of inference calls the epilogue copied back
/// (storage to storage), in this process.
pub fn copied_write_backs() -> u64 {
    crate::wrappers::epilogue::copied_write_backs()
}

/// The most values the executor's table held at once during the last
/// run of a graph (any stage) that finished on this thread: values are
/// dropped after their last use.
pub fn last_peak_values() -> usize {
    crate::executor::interp::last_peak_values()
}

/// The joint executors, for tests that run joint graphs directly.
pub mod joint {
    pub use crate::executor::joint::{run_backward, run_forward, run_joint, run_subgraph, Outcome};
}

/// [`CompiledFn::call_path`], under its former name (kept for code
/// written against it; use the method).
pub fn call_path(f: &CompiledFn, args: &[Arg]) -> Result<String> {
    f.call_path(args)
}

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

use super::CompiledFn;
// Re-exported so generated code names only `::aot_runtime` paths.
use crate::error::{AotError, Result};
pub use std::sync::OnceLock;

/// Rebuilds a compiled function from the JSON the macro embedded.
///
/// The JSON was written by the same version of `aot-ir` this crate is
/// built with, so a failure here is a build inconsistency, not a user
/// error; there is no caller to return it to (`compiled()` returns a
/// reference), hence the panic.
pub fn load(graph_json: &str, meta_json: &str) -> CompiledFn {
    load_inner(graph_json, meta_json)
}

/// [`load`] for a function with struct parameters: `params` lists the
/// Rust parameters (name, and whether it is a struct).
pub fn load_tree(graph_json: &str, meta_json: &str, params: &[(&str, bool)]) -> CompiledFn {
    let mut f = load_inner(graph_json, meta_json);
    let b = super::boundary::Boundary::new(&f.graph, &f.meta, params).unwrap_or_else(|| {
        panic!("aot: the graph of `{}` does not match its parameters; rebuild with matching aot-macros and aot-runtime", f.graph.name)
    });
    f.boundary = Some(std::sync::Arc::new(b));
    f
}

fn load_inner(graph_json: &str, meta_json: &str) -> CompiledFn {
    let graph = serde_json::from_str(graph_json)
        .unwrap_or_else(|e| panic!("aot: corrupt embedded graph ({e}); rebuild with matching aot-macros and aot-runtime"));
    let meta = serde_json::from_str(meta_json)
        .unwrap_or_else(|e| panic!("aot: corrupt embedded metadata ({e}); rebuild with matching aot-macros and aot-runtime"));
    let may_write = super::reference::may_write(&graph, &meta);
    CompiledFn { graph, meta, cache: Default::default(), may_write, boundary: None, variants: None }
}

/// A function whose body branches on `bool` parameters: `fns[k]` was
/// traced with the parameter at `switch_args[j]` equal to bit `j` of
/// `k`.
pub fn load_variants(fns: Vec<CompiledFn>, switch_args: &[usize]) -> CompiledFn {
    let v = super::variants::Variants::new(fns, switch_args).unwrap_or_else(|| {
        panic!("aot: the traced variants do not match their switches; rebuild with matching aot-macros and aot-runtime")
    });
    let mut f = v.all()[0].clone();
    f.variants = Some(std::sync::Arc::new(v));
    f
}

pub use super::outputs::Outputs;

/// Checks that a call produced the declared number of outputs (the
/// generated code then [`take`](Outputs::take)s each).
pub fn arity(outs: &Outputs, n: usize, func: &str) -> Result<()> {
    match outs.len() {
        m if m == n => Ok(()),
        m => Err(AotError::Internal { op: "aot_fn", msg: format!("`{func}` produced {m} outputs, expected {n}") }),
    }
}
