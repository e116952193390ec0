//! Introspection of the kernel stage: the kernels a call runs
//! ([`CompiledFn::kernels`], [`CompiledFn::kernels_for`]), as the contract's
//! "Kernels and devices" specifies.

use super::CompiledFn;
use crate::arg::Arg;
use crate::autograd::is_grad_enabled;
use crate::device::Device;
use crate::error::{AotError, Result};
use aot_ir::kernel::Kernel;
use aot_ir::print::Names;
use aot_ir::Node;

/// One kernel a call runs: its entry point and its source (on the CPU,
/// which evaluates the kernel stage itself, the kernel's listing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSource {
    pub name: String,
    pub source: String,
}

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
        let device = args.iter().find_map(Arg::tensor).map_or(Device::Cpu, |t| t.device());
        self.kernels_for(args, &device)
    }

    /// [`kernels`](Self::kernels) as they would run on `device`, without
    /// needing that device. The CUDA sources come with the CUDA backend:
    /// without the `cuda` feature, `Device::Cuda` is
    /// `AotError::DeviceUnavailable`.
    pub fn kernels_for(&self, args: &[Arg], device: &Device) -> Result<Vec<KernelSource>> {
        crate::arg::scalar_values(&self.graph, args)?;
        if let Device::Cuda(_) = device {
            return Err(AotError::DeviceUnavailable {
                op: "kernels_for",
                msg: if crate::cuda::is_available() {
                    "CUDA kernel sources are not rendered yet".into()
                } else {
                    "no usable CUDA device or the `cuda` feature is off".into()
                },
            });
        }
        let spec = self.cache.get(&self.graph, &self.meta, args)?;
        let names = Names::params(&self.graph.params);
        let listing = |k: &Kernel| KernelSource { name: k.name.clone(), source: k.listing(names) };
        let requires_grad = |p: usize| args.get(p).and_then(Arg::tensor).is_some_and(|t| t.requires_grad());
        if is_grad_enabled() && self.meta.records_history(requires_grad) {
            let Ok(training) = spec.plan.training(&self.graph) else { return Ok(Vec::new()) };
            let p = &training.partition;
            return Ok(kernels_of(&p.forward.nodes).chain(kernels_of(&p.backward.nodes)).map(listing).collect());
        }
        Ok(spec.plan.kernels.kernels().map(listing).collect())
    }
}
