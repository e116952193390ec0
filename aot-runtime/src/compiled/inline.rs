//! Calls between `#[aot_fn]` functions: the callee's graph is inlined into
//! the caller's when the caller's compiled form is first built
//! (`NAME::compiled()`), before anything analyses it, so `graph()`,
//! `explain()`, `kernels()`, calls and training all see one program and
//! fusion crosses the call (`aot_ir::transform::inline` splices).
//!
//! Each function's macro emits a [`Source`]: its traced graphs and a table
//! of its callees' sources. Inlining reads the callees' sources, never
//! their `compiled()` (whose one-time initialisation would re-enter itself
//! on a cycle), and keeps the chain of functions being inlined, so mutual
//! recursion is an error naming the cycle instead of a deadlock or a stack
//! overflow.

use crate::error::{AotError, Result};
use aot_ir::transform::inline::{inline, CallArg, CallSite, Callee};
use aot_ir::{Arg, Graph, ScalarExpr, ScalarValue};

/// What `#[aot_fn]` traced for one function (emitted by the macro).
#[derive(Debug)]
pub struct Source {
    /// The function's name.
    pub name: &'static str,
    /// The graph of each variant (one per combination of the switch
    /// parameters' values), as JSON.
    pub graphs: &'static [&'static str],
    /// Each variant's static metadata as JSON; empty for a graph with
    /// calls, which is analysed once they are inlined.
    pub metas: &'static [&'static str],
    /// The Rust parameters: name, and whether it is a struct.
    pub params: &'static [(&'static str, bool)],
    /// The switch parameters' positions among the arguments.
    pub switch_args: &'static [usize],
    /// Per variant, the sources of the functions it calls, in the order
    /// of `CallSite::index`.
    pub callees: &'static [&'static [fn() -> &'static Source]],
}

/// Variant `k` of `src` with every call inlined.
pub(crate) fn inlined_variant(src: &'static Source, k: usize) -> Result<Graph> {
    let mut chain = vec![src];
    inline_variant(src, k, &mut chain)
}

fn parse(src: &Source, k: usize) -> Result<Graph> {
    let json = src.graphs.get(k).ok_or_else(|| internal(src, format!("no variant {k}")))?;
    serde_json::from_str(json)
        .map_err(|e| internal(src, format!("corrupt embedded graph ({e}); rebuild with matching aot-macros and aot-runtime")))
}

fn internal(src: &Source, msg: String) -> AotError {
    AotError::Internal { op: "aot_fn", msg: format!("`{}`: {msg}", src.name) }
}

fn inline_variant(src: &'static Source, k: usize, chain: &mut Vec<&'static Source>) -> Result<Graph> {
    let graph = parse(src, k)?;
    if !aot_ir::transform::inline::has_calls(&graph) {
        return Ok(graph);
    }
    let table = src.callees.get(k).copied().unwrap_or(&[]);
    let mut failure: Option<AotError> = None;
    let mut resolve = |site: &CallSite, args: &[Arg]| -> std::result::Result<Callee, String> {
        let callee = (table.get(site.index).ok_or_else(|| format!("no callee {} in the table", site.index))?)();
        if let Some(at) = chain.iter().position(|s| std::ptr::eq(*s, callee)) {
            let mut names: Vec<&str> = chain[at..].iter().map(|s| s.name).collect();
            names.push(callee.name);
            let e = AotError::Signature {
                func: src.name.to_string(),
                msg: format!(
                    "recursive calls between `#[aot_fn]` functions: {}; a callee's graph is inlined into its caller's, so a chain of calls must end",
                    names.join(" calls ")
                ),
            };
            failure = Some(e);
            return Err(String::new());
        }
        let variant = pick_variant(callee, site, args)?;
        chain.push(callee);
        let graph = inline_variant(callee, variant, chain);
        chain.pop();
        match graph {
            Ok(graph) => Ok(Callee { graph, params: callee.params.iter().map(|&(n, t)| (n.to_string(), t)).collect() }),
            Err(e) => {
                failure = Some(e);
                Err(String::new())
            }
        }
    };
    let inlined = inline(&graph, &mut resolve);
    if let Some(e) = failure {
        return Err(e);
    }
    let g = inlined.map_err(|msg| AotError::Signature { func: src.name.to_string(), msg })?;
    refuse(src, &g)?;
    Ok(g)
}

/// The callee's variant a call picks: its switch parameters must be `bool`s
/// the caller knows (a literal, or a switch of its own).
fn pick_variant(callee: &Source, site: &CallSite, args: &[Arg]) -> std::result::Result<usize, String> {
    let all = site.arguments(args).ok_or_else(|| format!("the call of `{}` has inconsistent arguments", site.callee))?;
    let mut k = 0;
    for (j, &pos) in callee.switch_args.iter().enumerate() {
        let name = callee.params.get(pos).map_or("?", |p| p.0);
        match all.get(pos) {
            Some(CallArg::Plain(Arg::Scalar(e))) => match e.as_const() {
                Some(ScalarValue::Bool(true)) => k |= 1 << j,
                Some(ScalarValue::Bool(false)) => {}
                _ if matches!(e, ScalarExpr::Param(_)) || e.as_const().is_none() => {
                    return Err(format!(
                        "`{}` branches on its argument `{name}`, which must be a `bool` literal or a `bool` parameter of the caller",
                        site.callee
                    ))
                }
                _ => return Err(format!("argument `{name}` of `{}` must be a `bool`", site.callee)),
            },
            _ => return Err(format!("argument `{name}` of `{}` must be a `bool`", site.callee)),
        }
    }
    Ok(k)
}

/// What the macro refuses at compile time, checked again on the inlined
/// graph: a callee's writes reach the caller's inputs only now.
fn refuse(src: &Source, g: &Graph) -> Result<()> {
    match aot_ir::analysis::refusals::check(g).into_iter().next() {
        None => Ok(()),
        Some(d) => Err(AotError::Signature { func: src.name.to_string(), msg: format!("after inlining its calls: {}", d.message) }),
    }
}
