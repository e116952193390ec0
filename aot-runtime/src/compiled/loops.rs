//! Functions with `for` loops whose bounds are known only at call time
//! (`for t in 0..x.size(1)`, `for i in 0..n`). The macro traced each such
//! loop's body once ([`aot_ir::transform::unroll`]); here a call's bounds
//! are evaluated (from its scalar arguments and its arguments' sizes, or by
//! shape propagation for the size of a tensor the body computes before the
//! loop) and the loop is unrolled that many times. The unrolled graph is a
//! complete [`CompiledFn`] with its own specialisation cache, so the trip
//! counts are part of the call's guard, as the switch values of
//! `variants.rs` are.
//!
//! Loops are unrolled one at a time in program order: a later loop's
//! bounds may read a size of what an earlier one computed, and a nested
//! loop's bounds may read the enclosing loop's variable, which are known
//! only once the earlier loop is unrolled. So the stages are cached by the
//! list of (start, trip count) pairs so far, and a call walks them: one
//! evaluation of a bound and one lookup per loop.
//!
//! A trip count is `end - start`; a loop whose end is below its start is
//! an error rather than an empty loop (it is always a mistake in a model's
//! loop over a size), and the unrolled graph is capped at
//! [`MAX_UNROLLED_NODES`] ops.
//!
//! The stages are a bounded cache like the specialisations': at most
//! [`STAGE_CAPACITY`] per function, the least recently used dropped first
//! (with its compiled function), so a model called with ever new sequence
//! lengths keeps a bounded memory; a dropped stage is built again when a
//! call needs it.

use super::CompiledFn;
use crate::arg::Arg;
use crate::error::{AotError, Result};
use aot_ir::transform::unroll::{first_loop, unroll_first};
use aot_ir::{Arg as IrArg, Graph, ScalarValue};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The most ops a graph may hold once its loops are unrolled: the macro's
/// own cap on the loops it unrolls.
pub(crate) const MAX_UNROLLED_NODES: usize = 50_000;

/// The most unrolled stages a function keeps (the specialisation cache's
/// capacity).
pub(crate) const STAGE_CAPACITY: usize = super::specialize::DEFAULT_CAPACITY;

/// The loops of one traced variant and its unrolled stages.
#[derive(Debug)]
pub(crate) struct Loops {
    /// The Rust parameters (name, whether a struct), for the boundary of
    /// each unrolled function.
    params: Vec<(String, bool)>,
    /// The graph as traced (its calls inlined), every loop still a loop.
    root: Arc<Stage>,
    /// The stages past the root, by the (start, trip count) of each loop
    /// unrolled so far.
    stages: Mutex<StageCache>,
}

/// The stages past the root with the tick of each one's last use.
#[derive(Debug, Default)]
struct StageCache {
    map: HashMap<TripKey, (Arc<Stage>, u64)>,
    clock: u64,
}

impl StageCache {
    fn get(&mut self, key: &[(i64, i64)]) -> Option<Arc<Stage>> {
        self.clock += 1;
        let clock = self.clock;
        self.map.get_mut(key).map(|(s, used)| {
            *used = clock;
            s.clone()
        })
    }

    /// Adds a stage, first dropping the least recently used one when full.
    fn insert(&mut self, key: TripKey, stage: Arc<Stage>) {
        if self.map.len() >= STAGE_CAPACITY {
            if let Some(old) = self.map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) {
                self.map.remove(&old);
            }
        }
        self.clock += 1;
        self.map.insert(key, (stage, self.clock));
    }
}

/// The (start, trip count) of each loop unrolled so far, in order.
type TripKey = Vec<(i64, i64)>;

/// A graph with its first loops unrolled.
#[derive(Debug)]
struct Stage {
    graph: Graph,
    /// The node index of the next loop to unroll; `None` when none is left.
    next: Option<usize>,
    /// Once no loop is left: the compiled function of the graph.
    done: OnceLock<Result<Arc<CompiledFn>>>,
}

impl Stage {
    fn new(graph: Graph) -> Stage {
        Stage { next: first_loop(&graph), graph, done: OnceLock::new() }
    }
}

impl Loops {
    pub(crate) fn new(graph: Graph, params: &[(&str, bool)]) -> Loops {
        Loops {
            params: params.iter().map(|&(n, t)| (n.to_string(), t)).collect(),
            root: Arc::new(Stage::new(graph)),
            stages: Mutex::default(),
        }
    }

    /// The function a call with these (flat) arguments runs: the graph
    /// unrolled for the call's trip counts, built on first use.
    pub(crate) fn pick(&self, args: &[Arg]) -> Result<Arc<CompiledFn>> {
        let mut key = Vec::new();
        let mut stage = self.root.clone();
        while let Some(n) = stage.next {
            let (start, count) = bounds(&stage.graph, n, args)?;
            key.push((start, count));
            stage = self.stage(&key, &stage, start, count)?;
        }
        stage.done.get_or_init(|| self.compile(&stage.graph).map(Arc::new)).clone()
    }

    /// The stage `key` names, made from its parent by unrolling one loop.
    fn stage(&self, key: &[(i64, i64)], parent: &Stage, start: i64, count: i64) -> Result<Arc<Stage>> {
        let mut stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = stages.get(key) {
            return Ok(s);
        }
        let g = &parent.graph;
        let body = parent.next.and_then(|n| loop_body_len(g, n)).unwrap_or(0);
        let grown = usize::try_from(count).ok().and_then(|c| c.checked_mul(body)).and_then(|b| b.checked_add(g.nodes.len()));
        if grown.is_none_or(|n| n > MAX_UNROLLED_NODES) {
            return Err(signature(
                g,
                format!(
                    "a loop running {count} times unrolls to more than {MAX_UNROLLED_NODES} ops; loops are unrolled for each trip count"
                ),
            ));
        }
        let unrolled =
            unroll_first(g, start, count).map_err(|msg| AotError::Internal { op: "aot_fn", msg: format!("`{}`: {msg}", g.name) })?;
        let s = Arc::new(Stage::new(unrolled));
        stages.insert(key.to_vec(), s.clone());
        Ok(s)
    }

    /// The compiled function of a graph whose loops are all unrolled.
    fn compile(&self, g: &Graph) -> Result<CompiledFn> {
        aot_ir::verify(g)
            .map_err(|e| AotError::Internal { op: "aot_fn", msg: format!("`{}`: the unrolled graph is invalid: {e}", g.name) })?;
        // What the macro refuses, checked again: the body's writes reach
        // the function's inputs only now.
        if let Some(d) = aot_ir::analysis::refusals::check(g).into_iter().next() {
            return Err(signature(g, format!("after unrolling its loops: {}", d.message)));
        }
        let meta = aot_ir::StaticMeta::compute(g);
        let f = super::__private::from_parts(g.clone(), meta);
        if !self.params.iter().any(|p| p.1) {
            return Ok(f);
        }
        let params: Vec<(&str, bool)> = self.params.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        Ok(super::__private::with_boundary(f, &params))
    }

    /// How many specialisations the unrolled functions have cached.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn num_specializations(&self) -> usize {
        let built = |s: &Stage| s.done.get().and_then(|r| r.as_ref().ok()).map_or(0, |f| f.num_specializations());
        let stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        built(&self.root) + stages.map.values().map(|(s, _)| built(s)).sum::<usize>()
    }

    /// How many unrolled stages are cached.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn num_stages(&self) -> usize {
        self.stages.lock().unwrap_or_else(|p| p.into_inner()).map.len()
    }
}

fn signature(g: &Graph, msg: String) -> AotError {
    AotError::Signature { func: g.name.clone(), msg }
}

/// The number of ops of the body of the loop at node `n`.
fn loop_body_len(g: &Graph, n: usize) -> Option<usize> {
    match &g.nodes.get(n)?.op {
        aot_ir::Op::Call(site) => site.body.as_ref().map(|b| b.graph.nodes.len().max(1)),
        _ => None,
    }
}

/// The start and trip count of the loop at node `n` for a call with these
/// arguments.
fn bounds(g: &Graph, n: usize, args: &[Arg]) -> Result<(i64, i64)> {
    let node = &g.nodes[n];
    let scalars = crate::arg::scalar_values_before(g, args, n)?;
    let mut ends = [0i64; 2];
    for (k, end) in ends.iter_mut().enumerate() {
        let value = match node.args.get(k) {
            Some(IrArg::Scalar(e)) => e.eval(&scalars).map_err(|e| signature(g, format!("a loop bound: {e}")))?,
            _ => return Err(AotError::Internal { op: "aot_fn", msg: format!("`{}`: a loop without bounds", g.name) }),
        };
        *end = match value {
            ScalarValue::I64(v) => v,
            other => return Err(signature(g, format!("a loop bound is {other}, not an integer"))),
        };
    }
    let [start, end] = ends;
    let var = match &node.op {
        aot_ir::Op::Call(site) => site.body.as_ref().map_or("_", |b| b.var.as_str()),
        _ => "_",
    };
    if end < start {
        return Err(signature(
            g,
            format!(
                "the loop `for {var} in {start}..{end}` would run a negative number of times ({}); its end must not be below its start",
                end.saturating_sub(start)
            ),
        ));
    }
    Ok((start, end - start))
}
