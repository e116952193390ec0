//! The kernel stage's kernels on a storage's backend: [`Storage::fused_kernel`]
//! (an elementwise kernel) and [`Storage::fused_reduce`] (a kernel with a
//! reduction), dispatched to the CPU evaluator or the CUDA backend by where
//! the inputs live. Each is profiled under its kernel's name.

use super::dtype_view::DataRead;
use super::{made, Storage, StorageData};
use crate::backend::profile_record::{Cost, Span};
use crate::backend::CpuStorage;
use crate::backend::{Backend, FusedProgram, KernelCall};
use crate::cuda::CudaStorage;
use crate::error::Result;
use crate::layout::Layout;

impl Storage {
    /// [`Backend::fused`] over `inputs` (storages and their broadcast
    /// layouts; a storage may appear more than once). `None`: the backend
    /// declined, or the inputs are not on one device (the caller's
    /// op-by-op path reports that).
    pub(crate) fn fused_kernel(
        name: &'static str,
        p: &FusedProgram<'_>,
        call: &KernelCall<'_>,
        inputs: &[(&Storage, Layout)],
        out: &Layout,
    ) -> Option<Result<Storage>> {
        Storage::fused_on(name, p, Some(call), inputs, out)
    }

    /// [`Storage::fused_kernel`] of the CPU's program alone (tests of the
    /// evaluator, which have no kernel to render: CUDA declines).
    #[cfg(test)]
    pub(crate) fn fused(name: &'static str, p: &FusedProgram<'_>, inputs: &[(&Storage, Layout)], out: &Layout) -> Option<Result<Storage>> {
        Storage::fused_on(name, p, None, inputs, out)
    }

    fn fused_on(
        name: &'static str,
        p: &FusedProgram<'_>,
        call: Option<&KernelCall<'_>>,
        inputs: &[(&Storage, Layout)],
        out: &Layout,
    ) -> Option<Result<Storage>> {
        let row = call.map_or(name, |c| c.kernel.name.as_str());
        let span = kernel_span(row, inputs);
        let r = Storage::on_one_backend(
            inputs,
            |cpu| CpuStorage::fused(name, p, call, cpu, out),
            |cuda| CudaStorage::fused(name, p, call, cuda, out),
        );
        kernel_made(span, r)
    }

    /// `cpu` on the host data of `inputs` if they all are on the host,
    /// else `cuda` on their device data if they all are on devices, under
    /// one read lock per distinct storage. `None`: a dtype view (those run
    /// op by op, through the primitives), or the inputs are not on one
    /// kind of device.
    fn on_one_backend(
        inputs: &[(&Storage, Layout)],
        cpu: impl FnOnce(&[(&CpuStorage, Layout)]) -> Option<Result<CpuStorage>>,
        cuda: impl FnOnce(&[(&CudaStorage, Layout)]) -> Option<Result<CudaStorage>>,
    ) -> Option<Result<Storage>> {
        if inputs.iter().any(|(s, _)| s.is_dtype_view()) {
            return None;
        }
        let mut distinct: Vec<&Storage> = Vec::new();
        let slot: Vec<usize> = inputs
            .iter()
            .map(|(s, _)| match distinct.iter().position(|d| std::ptr::eq(*d, *s)) {
                Some(k) => k,
                None => {
                    distinct.push(s);
                    distinct.len() - 1
                }
            })
            .collect();
        let guards: Vec<DataRead<'_>> = distinct.iter().map(|s| s.read()).collect();
        let layouts = inputs.iter().map(|(_, l)| l.clone());
        let on_cpu: Option<Vec<(&CpuStorage, Layout)>> = slot
            .iter()
            .zip(layouts.clone())
            .map(|(&k, l)| match &*guards[k] {
                StorageData::Cpu(c) => Some((c, l)),
                StorageData::Cuda(_) => None,
            })
            .collect();
        if let Some(on_cpu) = on_cpu {
            return cpu(&on_cpu).map(|r| r.map(|d| Storage::new(StorageData::Cpu(d))));
        }
        let on_cuda: Option<Vec<(&CudaStorage, Layout)>> = slot
            .iter()
            .zip(layouts)
            .map(|(&k, l)| match &*guards[k] {
                StorageData::Cuda(c) => Some((c, l)),
                StorageData::Cpu(_) => None,
            })
            .collect();
        cuda(&on_cuda?).map(|r| r.map(|d| Storage::new(StorageData::Cuda(d))))
    }

    /// [`Backend::supports_fused`] of the backend of `device`.
    pub(crate) fn supports_fused(device: crate::device::Device, p: &FusedProgram<'_>, inputs: usize) -> bool {
        match device {
            crate::device::Device::Cpu => CpuStorage::supports_fused(p, inputs),
            crate::device::Device::Cuda(_) => CudaStorage::supports_fused(p, inputs),
        }
    }

    /// [`Backend::fused_reduce`] over `inputs` (as for
    /// [`Storage::fused_kernel`]). `None`: the backend declined, or the
    /// inputs are not on one device.
    pub(crate) fn fused_reduce(
        name: &'static str,
        p: &crate::backend::FusedReduceProgram<'_>,
        call: &KernelCall<'_>,
        inputs: &[(&Storage, Layout)],
        out: &Layout,
    ) -> Option<Result<Storage>> {
        let span = kernel_span(&call.kernel.name, inputs);
        let r = Storage::on_one_backend(
            inputs,
            |cpu| CpuStorage::fused_reduce(name, p, call, cpu, out),
            |cuda| CudaStorage::fused_reduce(name, p, call, cuda, out),
        );
        kernel_made(span, r)
    }
}

/// What a kernel over `inputs` reads: each input's elements once.
pub(super) fn reads(inputs: &[(&Storage, Layout)]) -> Cost {
    let bytes = inputs.iter().map(|(s, l)| crate::profile::footprint(l, s.dtype)).sum();
    Cost { bytes, flops: 0 }
}

/// The span of the kernel `row` over `inputs` (on the first one's device).
pub(super) fn kernel_span<'a>(row: &'a str, inputs: &[(&Storage, Layout)]) -> Option<Span<'a>> {
    let (first, _) = inputs.first()?;
    crate::profile::span(first.device, row, || reads(inputs))
}

/// `r`, the result of `span`'s kernel; a declined kernel (`None`) ran
/// nothing and is not recorded.
pub(super) fn kernel_made(span: Option<Span<'_>>, r: Option<Result<Storage>>) -> Option<Result<Storage>> {
    match r {
        Some(r) => Some(made(span, r)),
        None => {
            if let Some(s) = span {
                s.cancel();
            }
            None
        }
    }
}
