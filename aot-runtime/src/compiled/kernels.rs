//! Introspection of the kernels a call runs ([`CompiledFn::kernels`],
//! [`CompiledFn::kernels_for`]).
//!
//! A kernel's source depends on the dtypes, ranks and layouts it runs
//! with, and which kernels run at all depends on the call (the plan's
//! paths, the eager ops of a fallback or of autograd), so the listing comes
//! from a run of the call on copies of its arguments (as `explain()`
//! observes one), during which the record (`backend::kernel_record`) is on:
//!
//! - the executor notes every kernel of the kernel stage it runs, with its
//!   inputs' dtypes and its result's rank;
//! - the storage notes every primitive that does device work outside the
//!   kernel stage (the eager ops' copies, casts, elementwise ops,
//!   reductions, matmuls, gathers and scatters, scans, losses, random
//!   fills), and these are listed where they run: a write into a slice of
//!   an argument, a reduction of a view, the epilogue's copies back;
//! - a CUDA device notes every kernel it launches, as launched, and every
//!   cuBLAS call.
//!
//! A call that records gradients also runs its backward, from tangents of
//! ones. On a CUDA device the listing is what the device launched. For
//! another device it is what the CUDA backend launches for each note (its
//! rendered CUDA C; a primitive it runs on the host launches nothing), or,
//! for the CPU, each note's listing: a stage kernel's listing, a
//! primitive's one-op kernel or the name of its native routine.
//! Transfers (uploads, downloads) are no kernels and are not listed.

use super::CompiledFn;
use crate::arg::Arg;
use crate::backend::kernel_record::{self, Ran, RanKernel};
pub use crate::backend::KernelSource;
use crate::device::Device;
use crate::error::{AotError, Result};
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use aot_ir::kernel::random::render_random;
use aot_ir::kernel::render::{render_cuda_segments, render_cuda_typed, segments_per_launch, KernelTypes, ScalarSlots};
use aot_ir::print::Names;

impl CompiledFn {
    /// The kernels a call with these arguments runs on their device, in
    /// order: the compiled call's (the kernel stage's, and the primitives
    /// it runs outside it), or for a call that records gradients the
    /// forward's, then the backward's. A call that runs the eager
    /// reference (see `explain()`'s paths) lists the eager ops' kernels.
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
    /// kernels too, and matmuls are cuBLAS calls (listed with a comment for
    /// a source). The CUDA sources come with the CUDA backend: without the
    /// `cuda` feature, `Device::Cuda` is `AotError::DeviceUnavailable`.
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
        }
        let ran_on_cuda = args.iter().find_map(Arg::tensor).is_some_and(|t| matches!(t.device(), Device::Cuda(_)));
        let ran = self.ran_kernels(args)?;
        let names = Names::params(&self.graph.params);
        let mut sources = Vec::new();
        for r in &ran {
            match device {
                // What the device launched.
                Device::Cuda(_) if ran_on_cuda => {
                    if let Ran::Launched(k) = r {
                        sources.push(k.clone());
                    }
                }
                Device::Cuda(_) => r.cuda_sources(&mut sources)?,
                Device::Cpu => r.cpu_listings(names, &mut sources),
            }
        }
        Ok(sources)
    }

    /// What a call with these arguments runs, in order, from a run on
    /// copies of the arguments (the caller's tensors are untouched): the
    /// compiled call, and for a call that records gradients its backward,
    /// from ones as the outputs' gradients.
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
        let differentiable: Vec<&Tensor> = outs.iter().filter(|o| o.requires_grad() && o.dtype().is_float()).collect();
        match differentiable[..] {
            [] => {}
            // The gradient a loss's `backward()` starts from.
            [o] => {
                let ones = {
                    let _own = kernel_record::Pause::start();
                    o.ones_like()?
                };
                o.backward_with(&ones)?;
            }
            // One root for every output: their sums, added (the listing's
            // own ops, not the call's).
            ref several => {
                let total = {
                    let _own = kernel_record::Pause::start();
                    let mut total: Option<Tensor> = None;
                    for o in several {
                        let s = o.sum()?;
                        total = Some(match total {
                            Some(t) => t.add(&s)?,
                            None => s,
                        });
                    }
                    total
                };
                if let Some(total) = total {
                    total.backward()?;
                }
            }
        }
        Ok(recording.take())
    }
}

impl Ran {
    /// The CUDA kernels it stands for, each as one CUDA C translation unit
    /// (a cuBLAS call as its comment), onto `out`.
    fn cuda_sources(&self, out: &mut Vec<KernelSource>) -> Result<()> {
        match self {
            Ran::Stage(k) | Ran::Declined { stage: k, .. } => {
                if !k.empty {
                    out.push(k.cuda_source()?);
                }
            }
            Ran::Segments(ks) => {
                let Some(first) = ks.first() else { return Ok(()) };
                for chunk in ks.chunks(segments_per_launch(&first.kernel)) {
                    out.push(first.segments_source(chunk.len())?);
                }
            }
            Ran::Random { kind, dtype } => {
                let r = render_random(*kind, *dtype);
                out.push(KernelSource { name: r.name, source: r.source });
            }
            Ran::Op(k) => out.extend(crate::cuda::op_kernel_sources(k)?),
            // A note of another device's run than the one listed.
            Ran::Launched(_) => {}
        }
        Ok(())
    }

    /// The CPU's kernels it stands for, onto `out`: a stage kernel's
    /// listing (`names` names the scalar parameters), or a primitive's.
    fn cpu_listings(&self, names: Names<'_>, out: &mut Vec<KernelSource>) {
        match self {
            Ran::Stage(k) => out.push(k.cpu_listing(names)),
            Ran::Declined { ops, .. } => ops.iter().for_each(|r| r.cpu_listings(names, out)),
            Ran::Segments(ks) => out.extend(ks.iter().map(|k| k.cpu_listing(names))),
            Ran::Random { kind, dtype } => out.push(KernelSource {
                name: "cpu_random".into(),
                source: format!("// the CPU backend's `random` (native Rust): {kind:?} of {}\n", dtype.name()),
            }),
            Ran::Op(k) => out.push(k.cpu_listing()),
            Ran::Launched(_) => {}
        }
    }
}

impl RanKernel {
    /// The kernel as one CUDA C translation unit, for the dtype and rank it
    /// ran with.
    fn cuda_source(&self) -> Result<KernelSource> {
        let k = &self.kernel;
        let rendered = render_cuda_typed(k, &self.types()?, self.rank, &ScalarSlots::of(k)).map_err(|e| self.unsupported(e.to_string()))?;
        Ok(KernelSource { name: rendered.name, source: rendered.source })
    }

    /// The kernel as a launch of `n` segments.
    fn segments_source(&self, n: usize) -> Result<KernelSource> {
        let k = &self.kernel;
        let rendered = render_cuda_segments(k, &self.types()?, &ScalarSlots::of(k), n).map_err(|e| self.unsupported(e.to_string()))?;
        Ok(KernelSource { name: rendered.name, source: rendered.source })
    }

    /// The kernel's listing (a kernel stored over its inputs names them).
    fn cpu_listing(&self, names: Names<'_>) -> KernelSource {
        let source = self.in_place.as_ref().map_or_else(|| self.kernel.listing(names), |ik| ik.listing(names));
        KernelSource { name: self.kernel.name.clone(), source }
    }

    /// Its values' types: the plan's, or inferred from the inputs'.
    fn types(&self) -> Result<KernelTypes> {
        Ok(match &self.types {
            Some(t) => KernelTypes { values: t.iter().map(|&(v, _)| v).collect(), compute: t.iter().map(|&(_, c)| c).collect() },
            None => KernelTypes::infer(&self.kernel, &self.inputs).map_err(|e| self.unsupported(e.to_string()))?,
        })
    }

    fn unsupported(&self, msg: String) -> AotError {
        AotError::Unsupported { op: "kernels_for", msg: format!("kernel `{}`: {msg}", self.kernel.name) }
    }
}
