//! Introspection of the kernel stage: the kernels a call runs
//! ([`CompiledFn::kernels`], [`CompiledFn::kernels_for`]).
//!
//! A kernel's CUDA C depends on the dtypes and the rank it runs with, which
//! the kernel stage leaves to run time. So the CUDA sources come from a run
//! of the call on copies of its arguments (as `explain()` observes one),
//! during which the executor reports every kernel it runs ([`note_kernel`])
//! with its inputs' dtypes and its result's rank, every random fill
//! ([`note_random`]) and every primitive that the CUDA backend runs as
//! kernels of its own ([`note_op`]: gathers and scatters by an index,
//! `cumsum`, the index reductions and `nll_loss`); a call that records
//! gradients also runs its compiled backward, with tangents of ones.
//!
//! On the CPU those primitives are native Rust kernels with no generated
//! source, as matmul is, so the CPU listing holds the kernel stage's
//! kernels only.

use super::CompiledFn;
use crate::arg::Arg;
use crate::backend::kernel_record::{self, Ran, RanKernel};
pub use crate::backend::KernelSource;
use crate::device::Device;
use crate::error::{AotError, Result};
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use aot_ir::kernel::random::render_random;
use aot_ir::kernel::render::{render_cuda_typed, KernelTypes, ScalarSlots};
use aot_ir::kernel::Kernel;
use aot_ir::print::Names;
use aot_ir::Node;

fn kernels_of(nodes: &[Node]) -> impl Iterator<Item = &Kernel> {
    nodes.iter().filter_map(|n| match &n.op {
        aot_ir::Op::Kernel(k) => Some(&**k),
        _ => None,
    })
}

impl CompiledFn {
    /// The kernels a call with these arguments runs on their device, in
    /// order: the inference stage's, or for a call that records gradients
    /// the forward's, then the backward's. A call that runs the eager
    /// reference (see `explain()`'s paths) runs none.
    ///
    /// ```
    /// use aot_runtime::prelude::*;
    /// use aot_runtime::Arg;
    ///
    /// #[aot_fn]
    /// fn f(x: &Tensor) -> Tensor {
    ///     (x * 2.0 + 1.0).tanh()
    /// }
    ///
    /// let x = Tensor::ones(&[4], DType::F32, &Device::Cpu)?;
    /// let kernels = f::compiled().kernels(&[Arg::from(&x)])?;
    /// assert_eq!(kernels.len(), 1);
    /// assert_eq!(kernels[0].name, "fused_mul_add_tanh_0");
    /// # Ok::<(), aot_runtime::AotError>(())
    /// ```
    pub fn kernels(&self, args: &[Arg]) -> Result<Vec<KernelSource>> {
        let f = self.variant(args)?;
        f.with_flat(args, |args| {
            let device = args.iter().find_map(Arg::tensor).map_or(Device::Cpu, |t| t.device());
            f.kernels_for_flat(args, &device)
        })
    }

    /// [`kernels`](Self::kernels) as they would run on `device`, without
    /// needing that device. On CUDA the random fills (dropout's mask, drawn
    /// in the forward and recomputed in the backward; `rand_like`) are
    /// kernels too, and are listed where they run. The CUDA sources come
    /// with the CUDA backend:
    /// without the `cuda` feature, `Device::Cuda` is
    /// `AotError::DeviceUnavailable`.
    pub fn kernels_for(&self, args: &[Arg], device: &Device) -> Result<Vec<KernelSource>> {
        let f = self.variant(args)?;
        f.with_flat(args, |args| f.kernels_for_flat(args, device))
    }

    /// [`kernels_for`](Self::kernels_for) on the graph's arguments (struct
    /// arguments flattened into their fields).
    fn kernels_for_flat(&self, args: &[Arg], device: &Device) -> Result<Vec<KernelSource>> {
        crate::arg::scalar_values(&self.graph, args)?;
        if let Device::Cuda(_) = device {
            crate::cuda::kernel_sources()?;
            let mut sources = Vec::new();
            for r in self.ran_kernels(args)? {
                r.cuda_sources(&mut sources)?;
            }
            return Ok(sources);
        }
        let spec = self.cache.get(&self.graph, &self.meta, args)?;
        let names = Names::params(&self.graph.params);
        let listing = |k: &Kernel| KernelSource { name: k.name.clone(), source: k.listing(names) };
        let requires_grad = |p: usize| args.get(p).and_then(Arg::tensor).is_some_and(|t| t.requires_grad());
        if is_grad_enabled() && self.meta.records_history(requires_grad) {
            let Ok(training) = spec.plan.training(&self.graph) else { return Ok(Vec::new()) };
            // Listing the backward's kernels compiles it (see `lazy_backward`).
            let p = &training.compiled_backward()?.partition;
            return Ok(kernels_of(&p.forward.nodes).chain(kernels_of(&p.backward.nodes)).map(listing).collect());
        }
        if let Some(r) = &spec.plan.reinplace {
            let bases = spec.plan.synthetic_base.bases(args);
            let scalars = crate::arg::scalar_values(&self.graph, args)?;
            if let Some(ready) = r.ready(&bases, &scalars) {
                let listing =
                    |k: &aot_ir::kernel::reinplace::InPlaceKernel| KernelSource { name: k.kernel.name.clone(), source: k.listing(names) };
                return Ok(r.kernels(&ready).iter().map(listing).collect());
            }
        }
        Ok(spec.plan.kernels.kernels().map(listing).collect())
    }
}

impl CompiledFn {
    /// The kernels a call with these arguments runs, in order, from a run
    /// on copies of the arguments (the caller's tensors are untouched):
    /// the compiled call, and for a call that records gradients its
    /// backward, from ones as the outputs' gradients.
    fn ran_kernels(&self, args: &[Arg]) -> Result<Vec<Ran>> {
        let copies = super::tangents::deep_copy_args(args)?;
        let mut leaves: Vec<Option<Tensor>> = Vec::with_capacity(args.len());
        for (a, c) in args.iter().zip(&copies) {
            // An argument that requires grad is copied as a leaf that does,
            // so the call takes the same path.
            leaves.push(match (a.tensor(), c) {
                (Some(t), Some(c)) if t.requires_grad() && is_grad_enabled() => Some(c.detach()?.requires_grad_(true)?),
                _ => None,
            });
        }
        let copy_args: Vec<Arg> =
            args.iter().zip(copies.iter().zip(&leaves)).map(|(a, (c, l))| l.as_ref().or(c.as_ref()).map_or(*a, Arg::from)).collect();
        let recording = kernel_record::Recording::start();
        // The arguments are already flat: the call skips the struct boundary.
        let outs = self.call_flat(&copy_args)?.into_vec();
        let mut total: Option<Tensor> = None;
        for o in outs.iter().filter(|o| o.requires_grad() && o.dtype().is_float()) {
            let s = o.sum()?;
            total = Some(match total {
                Some(t) => t.add(&s)?,
                None => s,
            });
        }
        if let Some(total) = total {
            total.backward()?;
        }
        Ok(recording.take())
    }
}

impl Ran {
    /// The kernels it ran, each as one CUDA C translation unit, onto `out`.
    fn cuda_sources(&self, out: &mut Vec<KernelSource>) -> Result<()> {
        match self {
            Ran::Stage(k) => out.push(k.cuda_source()?),
            Ran::Random { kind, dtype } => {
                let r = render_random(*kind, *dtype);
                out.push(KernelSource { name: r.name, source: r.source });
            }
            Ran::Op(k) => out.extend(crate::cuda::op_kernel_sources(*k)?),
        }
        Ok(())
    }
}

impl RanKernel {
    /// The kernel as one CUDA C translation unit, for the dtype and rank it
    /// ran with.
    fn cuda_source(&self) -> Result<KernelSource> {
        let k = &self.kernel;
        let unsupported = |msg: String| AotError::Unsupported { op: "kernels_for", msg: format!("kernel `{}`: {msg}", k.name) };
        let types = match &self.types {
            Some(t) => KernelTypes { values: t.iter().map(|&(v, _)| v).collect(), compute: t.iter().map(|&(_, c)| c).collect() },
            None => KernelTypes::infer(k, &self.inputs).map_err(|e| unsupported(e.to_string()))?,
        };
        let rendered = render_cuda_typed(k, &types, self.rank, &ScalarSlots::of(k)).map_err(|e| unsupported(e.to_string()))?;
        Ok(KernelSource { name: rendered.name, source: rendered.source })
    }
}
