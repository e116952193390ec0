//! Items the code `#[aot_fn]` generates names (`::aot_runtime` paths
//! only); not part of the API.

use super::CompiledFn;
use crate::error::{AotError, Result};
// Re-exported so generated code names only `::aot_runtime` paths.
pub use std::sync::OnceLock;

/// Rebuilds a compiled function from the JSON the macro embedded.
///
/// The JSON was written by the same version of `aot-ir` this crate is
/// built with, so a failure here is a build inconsistency, not a user
/// error; there is no caller to return it to (`compiled()` returns a
/// reference), hence the panic.
fn load_inner(graph_json: &str, meta_json: &str) -> CompiledFn {
    let graph = serde_json::from_str(graph_json)
        .unwrap_or_else(|e| panic!("aot: corrupt embedded graph ({e}); rebuild with matching aot-macros and aot-runtime"));
    let meta = serde_json::from_str(meta_json)
        .unwrap_or_else(|e| panic!("aot: corrupt embedded metadata ({e}); rebuild with matching aot-macros and aot-runtime"));
    from_parts(graph, meta)
}

pub(crate) fn from_parts(graph: aot_ir::Graph, meta: aot_ir::StaticMeta) -> CompiledFn {
    let may_write = super::eager_fallback::may_write(&graph, &meta);
    CompiledFn { graph, meta, cache: Default::default(), may_write, boundary: None, variants: None, loops: None, broken: None }
}

pub use super::inline::Source;

/// `NAME::compiled()`: the compiled function of what the macro traced.
/// A function that calls other `#[aot_fn]` functions gets their graphs
/// inlined into its own first (`inline.rs`); when that fails (mutual
/// recursion, a call the callee does not fit), every use of the
/// function returns the error.
pub fn load_source(src: &'static Source) -> CompiledFn {
    let params: Vec<(&str, bool)> = src.params.to_vec();
    let trees = params.iter().any(|p| p.1);
    let mut fns = Vec::with_capacity(src.graphs.len());
    for (k, graph_json) in src.graphs.iter().enumerate() {
        // The macro leaves out the metadata of a graph with calls or loops.
        let f = if src.callees.get(k).is_some_and(|c| !c.is_empty()) || src.metas.get(k).is_some_and(|m| m.is_empty()) {
            match super::inline::inlined_variant(src, k) {
                Ok(graph) if aot_ir::transform::unroll::has_loops(&graph) => with_loops(graph, &params),
                Ok(graph) => {
                    let meta = aot_ir::StaticMeta::compute(&graph);
                    from_parts(graph, meta)
                }
                Err(e) => return broken(graph_json, e),
            }
        } else {
            load_inner(graph_json, src.metas.get(k).copied().unwrap_or(""))
        };
        fns.push(if trees { with_boundary(f, &params) } else { f });
    }
    match fns.len() {
        1 => fns.pop().unwrap_or_else(|| unreachable!()),
        _ => load_variants(fns, src.switch_args),
    }
}

/// A function whose calls could not be inlined: its traced graph, and the
/// error every use returns.
fn broken(graph_json: &str, e: AotError) -> CompiledFn {
    let graph: aot_ir::Graph = serde_json::from_str(graph_json)
        .unwrap_or_else(|e| panic!("aot: corrupt embedded graph ({e}); rebuild with matching aot-macros and aot-runtime"));
    let mut f = stub(graph);
    f.broken = Some(e);
    f
}

/// A function holding `graph` whose metadata is that of its parameters
/// alone: it is never read (every call goes elsewhere), and keeps the
/// function well-formed.
fn stub(graph: aot_ir::Graph) -> CompiledFn {
    let mut stub = aot_ir::GraphBuilder::new(graph.name.clone());
    for p in &graph.params {
        stub.param(p.name.clone(), p.ty, p.span);
    }
    let stub = stub.finish(Vec::new(), aot_ir::ReturnKind::Unit);
    let meta = aot_ir::StaticMeta::compute(&stub);
    let mut f = from_parts(stub, meta);
    f.graph = graph;
    f
}

/// A function with loops unrolled per call (`loops.rs`): every call runs
/// the graph unrolled for its trip counts.
fn with_loops(graph: aot_ir::Graph, params: &[(&str, bool)]) -> CompiledFn {
    let loops = super::loops::Loops::new(graph.clone(), params);
    let mut f = stub(graph);
    f.loops = Some(std::sync::Arc::new(loops));
    f
}

pub(crate) fn with_boundary(f: CompiledFn, params: &[(&str, bool)]) -> CompiledFn {
    f.attach_boundary(params).unwrap_or_else(|e| {
        panic!("aot: {e}; the embedded graph does not match its parameters: rebuild with matching aot-macros and aot-runtime")
    })
}

/// A stand-in of type `T` for the type check of a call of another
/// `#[aot_fn]` function (in a closure that never runs).
pub fn proxy<T>() -> T {
    unreachable!("aot: a type-check stand-in was called")
}

/// A float passed to an `#[aot_fn]` function: its parameter is `f64` or `f32`.
#[diagnostic::on_unimplemented(message = "a float is passed where the `#[aot_fn]` function takes `{Self}`", label = "this is a float")]
pub trait FloatArg {}
impl FloatArg for f64 {}
impl FloatArg for f32 {}

/// An integer passed to an `#[aot_fn]` function: its parameter is an
/// integer, or a float (converted).
#[diagnostic::on_unimplemented(
    message = "an integer is passed where the `#[aot_fn]` function takes `{Self}`",
    label = "this is an integer"
)]
pub trait IntArg {}
impl IntArg for i64 {}
impl IntArg for usize {}
impl IntArg for f64 {}
impl IntArg for f32 {}

/// The stand-in of a float argument.
pub fn float_arg<T: FloatArg>() -> T {
    unreachable!("aot: a type-check stand-in was called")
}

/// The stand-in of an integer argument.
pub fn int_arg<T: IntArg>() -> T {
    unreachable!("aot: a type-check stand-in was called")
}

/// What an `#[aot_fn]` function returns: `aot_runtime::Result<T>`.
#[diagnostic::on_unimplemented(
    message = "only `#[aot_fn]` functions can be called in an `#[aot_fn]` body, but this call returns `{Self}`",
    label = "not an `#[aot_fn]` function",
    note = "helper functions must be `#[aot_fn]` themselves, so that their graph can be inlined into the caller's"
)]
pub trait AotFnResult {
    type Output;
}
impl<T> AotFnResult for Result<T> {
    type Output = T;
}

/// The value of a call of an `#[aot_fn]` function, for the type check.
pub fn aot_fn_result<R: AotFnResult>(_: R) -> R::Output {
    unreachable!("aot: a type-check stand-in was called")
}

/// A function whose body branches on `bool` parameters: `fns[k]` was
/// traced with the parameter at `switch_args[j]` equal to bit `j` of
/// `k`.
fn load_variants(fns: Vec<CompiledFn>, switch_args: &[usize]) -> CompiledFn {
    let v = super::variants::Variants::new(fns, switch_args).unwrap_or_else(|| {
        panic!("aot: the traced variants do not match their switches; rebuild with matching aot-macros and aot-runtime")
    });
    let mut f = v.all()[0].clone();
    f.variants = Some(std::sync::Arc::new(v));
    f
}

pub use crate::executor::outputs::Outputs;

/// Checks that a call produced the declared number of outputs (the
/// generated code then [`take`](Outputs::take)s each).
pub fn arity(outs: &Outputs, n: usize, func: &str) -> Result<()> {
    match outs.len() {
        m if m == n => Ok(()),
        m => Err(AotError::Internal { op: "aot_fn", msg: format!("`{func}` produced {m} outputs, expected {n}") }),
    }
}
