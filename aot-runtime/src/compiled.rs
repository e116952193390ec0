//! What `#[aot_fn]` produces at run time: the traced graph with its static
//! metadata ([`CompiledFn`]), the specialisation cache, the report of
//! [`CompiledFn::explain`] ([`CallReport`], `explain.rs`), and the routing of a call to
//! the inference path, the training path (`crate::wrappers`) or the
//! transactional eager reference. The graphs themselves run in
//! `crate::executor`; call arguments are [`Arg`] (`crate::arg`).
//!
//! Struct arguments ([`Arg::Tree`]) are flattened into the field tensors
//! the graph takes before anything else sees the call (`boundary.rs`);
//! [`CompiledFn::graph_signature`] names the graph's inputs and outputs as
//! PyTorch's `aot_export_module` does (`graph_signature.rs`).
//!
//! The macro embeds the graph and the static metadata template as JSON;
//! `NAME::compiled()` deserialises them once, on first use. A body that
//! calls other `#[aot_fn]` functions gets their graphs inlined then, and
//! its metadata computed on the result (`inline.rs`); if that fails (a
//! cycle of calls), every use of the function returns the error. Each guard key
//! gets one specialisation (`specialize.rs`) holding one plan, which the
//! runtime wrappers' pre-compile steps build (`crate::wrappers::CallPlan`).
//! A call ([`CompiledFn::__call`]) runs that plan's run-time steps: the
//! functional graph (inference) or the partitioned joint graph (training),
//! then the epilogue; [`CompiledFn::explain`] reports the same plan's
//! dedupe and synthetic-base decisions. The few calls those paths do not
//! model (arguments in unusual autograd states, program shapes the joint
//! graph does not cover yet) run the transactional eager reference
//! (`eager_fallback.rs`); a call whose `reshape`/`contiguous` aliased
//! otherwise than functionalization assumed reruns eagerly on shadows of
//! its arguments (`alias_fallback.rs`), so its effects are exactly eager's
//! and still nothing is written when an op fails. [`CompiledFn::run_eager`]
//! is the reference the compiled paths are tested against.
//!
//! An inference call's fixed cost is kept small: the guard key is computed
//! on the stack in one pass over the arguments (`specialize.rs`), small
//! elementwise nodes and the plan's copies run direct kernels
//! (`executor/direct_kernels.rs`), an in-place write of an input that nothing
//! else reads waits for the epilogue instead of being made on a copy
//! (`executor/deferred_writes.rs`), and the outputs come back in a list held
//! inline (`executor/outputs.rs`), from which the generated code takes them.

mod alias_fallback;
mod boundary;
mod eager_fallback;
mod explain;
mod graph_signature;
mod inline;
#[cfg(feature = "test-hooks")]
pub(crate) mod introspect;
pub(crate) mod kernels;
pub(crate) mod last_call;
mod loops;
mod observation_run;
mod overlaps;
mod report;
pub(crate) mod specialize;
mod tangents;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compiled;
#[cfg(test)]
mod tests_deferred;
#[cfg(test)]
mod tests_plan;
mod variants;

pub use crate::arg::Arg;
pub use graph_signature::{BackwardSignature, GraphSignature};
pub use kernels::KernelSource;
pub use report::CallReport;

use crate::error::{AotError, Result};
use crate::executor::outputs::Outputs;
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use aot_ir::{Graph, StaticMeta};
use specialize::SpecCache;
use std::sync::Arc;

/// A traced `#[aot_fn]` function: its graph, static metadata and the cache
/// of its specialisations.
#[derive(Clone, Debug)]
pub struct CompiledFn {
    graph: Graph,
    meta: StaticMeta,
    cache: Arc<SpecCache>,
    /// The function may write an argument (`eager_fallback::may_write`),
    /// decided once: every call asks.
    may_write: bool,
    /// Set for functions with struct parameters: how their fields become
    /// graph inputs (`boundary.rs`).
    boundary: Option<Arc<boundary::Boundary>>,
    /// Set for functions that branch on `bool` parameters: one traced
    /// variant per combination of their values (`variants.rs`); this
    /// function's own graph is the first variant's (every switch false).
    variants: Option<Arc<variants::Variants>>,
    /// Set for functions with `for` loops whose bounds are known only at
    /// call time: the traced loops, unrolled per call's trip counts
    /// (`loops.rs`); this function's own graph is the traced one.
    loops: Option<Arc<loops::Loops>>,
    /// Set when the calls of the body could not be inlined (`inline.rs`):
    /// every use returns this error.
    broken: Option<AotError>,
}

impl CompiledFn {
    /// Builds a compiled function from a graph (for graphs built in code,
    /// e.g. by property tests): verifies it and analyses it as the macro does.
    pub fn new(graph: Graph) -> Result<CompiledFn> {
        aot_ir::verify(&graph)
            .map_err(|e| AotError::Internal { op: "CompiledFn::new", msg: format!("invalid graph `{}`: {e}", graph.name) })?;
        if aot_ir::transform::inline::has_calls(&graph) {
            return Err(AotError::Signature {
                func: graph.name.clone(),
                msg: "the graph calls other functions; `NAME::compiled()` inlines them".into(),
            });
        }
        let meta = StaticMeta::compute(&graph);
        let may_write = eager_fallback::may_write(&graph, &meta);
        Ok(CompiledFn { graph, meta, cache: Arc::default(), may_write, boundary: None, variants: None, loops: None, broken: None })
    }

    /// [`new`](Self::new), for a graph whose inputs named `m.path` are the
    /// tensors at `path` of a struct parameter `m`, as `#[aot_fn]` builds
    /// a function with a parameter `m: &Mlp`. `params` lists the Rust
    /// parameters in order: name, and whether it is a struct (passed as
    /// [`Arg::tree`]); every other graph input is the plain parameter of
    /// its name.
    ///
    /// ```
    /// use aot_ir::graph::args::t;
    /// use aot_ir::{GraphBuilder, OpKind, ReturnKind};
    /// use aot_runtime::prelude::*;
    /// use aot_runtime::{Arg, CompiledFn};
    ///
    /// #[derive(TensorTree)]
    /// struct Pair { a: Tensor, b: Tensor }
    ///
    /// // fn f(m: &Pair, x: &Tensor) -> Tensor { m.b.mul(x) }
    /// let mut g = GraphBuilder::new("f");
    /// let b = g.tensor("m.b", false);
    /// let x = g.tensor("x", false);
    /// let y = g.call(OpKind::Mul, b, vec![t(x)]);
    /// let f = CompiledFn::with_struct_params(g.finish(vec![y], ReturnKind::Single), &[("m", true), ("x", false)])?;
    ///
    /// let t = |v: f64| Tensor::full(&[2], v, DType::F32, &Device::Cpu);
    /// let (m, x) = (Pair { a: t(1.0)?, b: t(3.0)? }, t(2.0)?);
    /// let out = f.__call(&[Arg::tree(&m), (&x).into()])?;
    /// assert_eq!(out[0].to_vec::<f32>()?, [6.0, 6.0]);
    /// # Ok::<(), AotError>(())
    /// ```
    pub fn with_struct_params(graph: Graph, params: &[(&str, bool)]) -> Result<CompiledFn> {
        CompiledFn::new(graph)?.attach_boundary(params)
    }

    /// This function with its graph's inputs taken from the Rust
    /// parameters `params` (see [`with_struct_params`](Self::with_struct_params)).
    fn attach_boundary(mut self, params: &[(&str, bool)]) -> Result<CompiledFn> {
        let b = boundary::Boundary::new(&self.graph, &self.meta, params).ok_or_else(|| AotError::Signature {
            func: self.graph.name.clone(),
            msg: format!(
                "the graph's inputs ({}) do not match the parameters {:?}",
                self.graph.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
                params
            ),
        })?;
        self.boundary = Some(Arc::new(b));
        Ok(self)
    }

    /// The traced IR; its `Display` is the listing. For a function whose
    /// body branches on `bool` parameters (`if training { .. }`), the graph
    /// traced with every such parameter `false`; [`graph_for`](Self::graph_for)
    /// gives the one a call runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The traced IR a call with these arguments runs: [`graph`](Self::graph),
    /// or for a function that branches on `bool` parameters, the variant
    /// their values select; a `for` loop whose bounds are known only at
    /// call time is unrolled for this call's trip count.
    pub fn graph_for(&self, args: &[Arg]) -> Result<std::borrow::Cow<'_, Graph>> {
        Ok(match self.variant(args)? {
            Picked::Ref(f) => std::borrow::Cow::Borrowed(&f.graph),
            Picked::Unrolled(f) => std::borrow::Cow::Owned(f.graph.clone()),
        })
    }

    /// The variant a call with these arguments runs: itself unless the
    /// body branches on `bool` parameters (`variants.rs`) or has loops
    /// unrolled per call (`loops.rs`).
    fn variant(&self, args: &[Arg]) -> Result<Picked<'_>> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let f = match &self.variants {
            None => self,
            Some(v) => v.pick(args)?,
        };
        match &f.loops {
            None => Ok(Picked::Ref(f)),
            Some(l) => f.with_flat(args, |args| l.pick(args)).map(Picked::Unrolled),
        }
    }

    /// The compile-time metadata template, before any call's facts. For a
    /// function with loops over call-time bounds, that of its parameters
    /// alone: each trip count's unrolled graph has its own, which
    /// [`explain`](Self::explain) reports.
    pub fn static_meta(&self) -> &StaticMeta {
        &self.meta
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        &self.graph.name
    }

    /// Runs `f` on the graph's arguments: `args` with struct arguments
    /// flattened into the field tensors the graph takes.
    fn with_flat<R>(&self, args: &[Arg], f: impl FnOnce(&[Arg]) -> Result<R>) -> Result<R> {
        match &self.boundary {
            None => f(args),
            Some(b) => {
                let picked = b.pick(&self.graph.name, args)?;
                f(&b.flat(args, &picked))
            }
        }
    }

    /// Runs the graph op by op on eager tensors: the reference semantics.
    pub fn run_eager(&self, args: &[Arg]) -> Result<Vec<Tensor>> {
        let f = self.variant(args)?;
        f.with_flat(args, |args| crate::executor::interp::run_source(&f.graph, args))
    }

    /// The entry point of the functions `#[aot_fn]` generates.
    ///
    /// Every call: guard key, cached specialisation, then its plan's
    /// run-time steps (`crate::wrappers`): the `requires_grad` check (debug
    /// builds), the input groups' bases, then
    /// - inference calls (no tensor argument requires grad, or grad mode is
    ///   off): the functional graph on the CPU kernels, then the epilogue;
    /// - calls that record gradients: the partitioned forward and one
    ///   autograd node whose backward is the partitioned backward
    ///   (`wrappers::autograd_fn`).
    ///
    /// Nothing is written to an argument unless every forward op succeeded.
    #[doc(hidden)]
    pub fn __call(&self, args: &[Arg]) -> Result<Vec<Tensor>> {
        self.__call_outputs(args).map(Outputs::into_vec)
    }

    /// [`__call`](Self::__call), with the outputs held inline (what the
    /// generated code calls: a small call allocates nothing for the list).
    #[doc(hidden)]
    pub fn __call_outputs(&self, args: &[Arg]) -> Result<Outputs> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        if let Some(v) = &self.variants {
            return v.pick(args)?.__call_outputs(args);
        }
        if let Some(l) = &self.loops {
            return self.with_flat(args, |args| l.pick(args))?.__call_outputs(args);
        }
        if self.boundary.is_some() {
            return self.with_flat(args, |args| self.call_flat(args));
        }
        self.call_flat(args)
    }

    fn call_flat(&self, args: &[Arg]) -> Result<Outputs> {
        let scalars = crate::arg::scalar_values(&self.graph, args)?;
        // The key, and `unusual_autograd_state` in the same pass over the
        // arguments (each view is checked before its key regenerates its
        // history).
        let check_unusual = is_grad_enabled() && self.may_write;
        let keyed = last_call::key_and_spec(&self.cache, &self.graph, &self.meta, args, self.meta.mutates_inputs, check_unusual)?;
        let Some((probe, spec)) = keyed else { return self.run_reference(args).map(Outputs::from) };
        let records_grad = is_grad_enabled() && self.meta.records_history(|p| probe.requires_grad(p));
        let plan = &spec.plan;
        if cfg!(debug_assertions) {
            plan.debug_assert.check(&self.graph.name, args)?;
        }
        if records_grad {
            // Functions the joint graph does not cover yet (see
            // `TrainingPlan::build`) run the eager reference.
            let Ok(training) = plan.training(&self.graph) else { return self.run_reference(args).map(Outputs::from) };
            let rng = self.meta.has_random_ops.then(crate::ops::rng_snapshot);
            return match crate::wrappers::autograd_fn::run(plan, training, &self.graph, &self.meta, args, &scalars)? {
                Some(outs) => Ok(Outputs::from(outs)),
                None => {
                    // Abandoned before any effect: give back what it drew.
                    if let Some(state) = rng {
                        crate::ops::rng_restore(state);
                    }
                    self.run_reference(args).map(Outputs::from)
                }
            };
        }
        let rng = self.meta.has_random_ops.then(crate::ops::rng_snapshot);
        let bases = plan.synthetic_base.bases(args);
        // Not a block returning the pair: the value table and the checked
        // writes are held inline, and moving them cost a tiny call more
        // than the work they describe.
        let no_grad = crate::tensor::NoGradGuard::new();
        let deferred = plan.runtime.deferred(&bases, |p| probe.geom(p));
        if deferred.is_none() {
            if let Some(outs) = self.run_in_place(plan, args, &bases, &scalars)? {
                return Ok(outs);
            }
        }
        let skip = deferred.as_ref().map_or(&[][..], |d| d.skip());
        let env =
            crate::executor::functional::execute(&plan.graph, (&plan.kernels, &plan.liveness), &self.graph, args, &bases, &scalars, skip)?;
        drop(no_grad);
        match env {
            Some(env) => {
                let outs = plan.runtime.apply(&plan.graph, &self.meta, args, &bases, &env, deferred.as_ref());
                // The run's last values, and the old buffers of inputs
                // whose new buffers the epilogue handed over, for the next call.
                crate::buffer_cache::recycling(|| drop(env));
                outs
            }
            None => {
                // A `reshape`/`contiguous` aliased otherwise than assumed:
                // give back the random numbers drawn and run the reference.
                if let Some(state) = rng {
                    crate::ops::rng_restore(state);
                }
                // The shadows carry no autograd state: with arguments that
                // require grad (a call that records nothing), eager itself.
                if args.iter().any(|a| a.tensor().is_some_and(Tensor::requires_grad)) {
                    return self.run_reference(args).map(Outputs::from);
                }
                alias_fallback::run(&self.graph, &self.meta, args).map(Outputs::from)
            }
        }
    }

    /// The call run as kernels stored over the written arguments
    /// (reinplacing), when the plan has them and this call's arguments
    /// pass their checks; `None`: nothing ran or was written.
    fn run_in_place(
        &self,
        plan: &crate::wrappers::CallPlan,
        args: &[Arg],
        bases: &crate::arg::Bases,
        scalars: &[Option<aot_ir::ScalarValue>],
    ) -> Result<Option<Outputs>> {
        let Some(r) = &plan.reinplace else { return Ok(None) };
        let Some(checked) = r.ready(bases, scalars) else { return Ok(None) };
        let mut env = crate::executor::functional::Env::new(plan.graph.num_values);
        let ran = {
            let _no_grad = crate::tensor::NoGradGuard::new();
            r.run(&checked, &mut env)?
        };
        if !ran {
            return Ok(None);
        }
        plan.runtime.apply(&plan.graph, &self.meta, args, bases, &env, None).map(Some)
    }

    /// The functional graph a call with these arguments runs, as a listing.
    pub fn functional_listing(&self, args: &[Arg]) -> Result<String> {
        let f = self.variant(args)?;
        f.with_flat(args, |args| {
            crate::arg::scalar_values(&f.graph, args)?;
            let spec = f.cache.get(&f.graph, &f.meta, args)?;
            Ok(spec.plan.graph.listing())
        })
    }

    /// The eager reference for a call that records gradients (shadows carry
    /// no autograd state), after a dry run on replicas (`eager_fallback.rs`).
    fn run_reference(&self, args: &[Arg]) -> Result<Vec<Tensor>> {
        eager_fallback::run(&self.graph, &self.meta, args)
    }

    /// An argument in an autograd state the compiled paths do not model,
    /// when the function may write an argument (`eager_fallback.rs`).
    fn unusual_autograd_state(&self, args: &[Arg]) -> Option<(usize, &'static str)> {
        if !is_grad_enabled() || !self.may_write {
            return None;
        }
        eager_fallback::unusual_autograd_state(args)
    }

    /// A call records history only when an op run with grad mode on reads
    /// a value that requires grad. Otherwise (say, an optimizer step whose
    /// writes to the parameters are all under `no_grad!`) it is an
    /// inference call: the epilogue's writes are hidden from autograd, as
    /// eager's are.
    fn records_grad(&self, args: &[Arg]) -> bool {
        is_grad_enabled() && self.meta.records_history(|p| args.get(p).and_then(Arg::tensor).is_some_and(Tensor::requires_grad))
    }

    /// How a call with these arguments would run, without running it:
    /// `"inference"` (no argument requires grad, or grad mode is off: the
    /// functional graph), `"compiled training"` (the partitioned forward and
    /// backward), or `"eager reference: <why>"` for a call that records
    /// gradients in a way the compiled paths do not cover yet (the op-by-op
    /// reference runs it, with the same results).
    ///
    /// ```
    /// use aot_runtime::prelude::*;
    /// #[aot_fn]
    /// fn double(x: &Tensor) -> Tensor {
    ///     x * 2.0
    /// }
    /// let x = Tensor::ones(&[3], DType::F32, &Device::Cpu)?;
    /// assert_eq!(double::compiled().call_path(&[Arg::from(&x)])?, "inference");
    /// let w = Tensor::ones(&[3], DType::F32, &Device::Cpu)?.requires_grad_(true)?;
    /// assert_eq!(double::compiled().call_path(&[Arg::from(&w)])?, "compiled training");
    /// # Ok::<(), AotError>(())
    /// ```
    pub fn call_path(&self, args: &[Arg]) -> Result<String> {
        let f = self.variant(args)?;
        f.with_flat(args, |args| f.call_path_flat(args))
    }

    fn call_path_flat(&self, args: &[Arg]) -> Result<String> {
        crate::arg::scalar_values(&self.graph, args)?;
        if let Some((p, why)) = self.unusual_autograd_state(args) {
            return Ok(format!("eager reference: argument {p} is {why}"));
        }
        if !self.records_grad(args) {
            return Ok("inference".into());
        }
        let spec = self.cache.get(&self.graph, &self.meta, args)?;
        Ok(match spec.plan.training(&self.graph) {
            Ok(_) => match crate::wrappers::autograd_fn::call_refusal(&spec.plan.synthetic_base, &self.meta, args) {
                None => "compiled training".into(),
                Some(why) => format!("eager reference: {why}"),
            },
            Err(why) => format!("eager reference: {why}"),
        })
    }

    /// How many specialisations are cached (of every variant).
    #[cfg(any(test, feature = "test-hooks"))]
    fn num_specializations(&self) -> usize {
        match (&self.variants, &self.loops) {
            (Some(v), _) => v.all().iter().map(CompiledFn::num_specializations).sum(),
            (None, Some(l)) => l.num_specializations(),
            (None, None) => self.cache.len(),
        }
    }
}

/// The function a call runs ([`CompiledFn::variant`]): borrowed, or
/// unrolled for the call's trip counts and shared with the loop cache.
enum Picked<'a> {
    Ref(&'a CompiledFn),
    Unrolled(Arc<CompiledFn>),
}

impl std::ops::Deref for Picked<'_> {
    type Target = CompiledFn;
    fn deref(&self) -> &CompiledFn {
        match self {
            Picked::Ref(f) => f,
            Picked::Unrolled(f) => f,
        }
    }
}

/// Support for the code `#[aot_fn]` generates. Not a public API.
#[doc(hidden)]
#[path = "compiled/private_api.rs"]
pub mod __private;
