//! The CUDA backend's elementwise primitives as kernels of the kernel
//! stage: each is a one-op [`Kernel`] (the same IR the scheduler fuses),
//! rendered to CUDA C by the one renderer for the operands' dtypes and
//! rank, compiled once per (op, dtypes, rank) (the device caches modules
//! by their source) and launched with the layouts as run-time parameters.
//! Scalar operands are parameter slots, so one compiled kernel serves
//! every value. [`launch_outputs`] launches any elementwise kernel, so the
//! fused kernels of compiled calls (`fused_kernels.rs`) go through it too.

use super::device::Gpu;
use super::sim::Entry;
use crate::backend::one_op::{kernel, OneOp};
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use aot_ir::kernel::render::{pack_params, render_cuda_typed, KernelTypes, Operand, ScalarSlots};
use aot_ir::kernel::Kernel;

/// A buffer of a launch: its address on the device, layout and dtype.
#[derive(Clone, Copy)]
pub(super) struct Buf<'a> {
    pub addr: u64,
    pub layout: &'a Layout,
    pub dtype: DType,
}

/// The source `launch` renders for `one` over inputs of `inputs`' dtypes
/// into `out` of rank `rank` (for `kernels_for`'s listing).
pub(super) fn one_op_source(one: &OneOp<'_>, inputs: &[DType], out: DType, rank: usize) -> Result<crate::backend::KernelSource> {
    let (k, types) = kernel(one, inputs, out);
    let r = render_cuda_typed(&k, &types, rank, &ScalarSlots::of(&k)).map_err(|e| AotError::internal("kernels_for", e.to_string()))?;
    Ok(crate::backend::KernelSource { name: r.name, source: r.source })
}

/// The renderer's view of a layout: offset and strides (0 on size-1 dims).
pub(super) fn operand(l: &Layout) -> (i64, Vec<i64>) {
    let strides = l.stride.iter().zip(l.shape.iter()).map(|(&s, &n)| if n == 1 { 0 } else { s as i64 }).collect();
    (l.offset as i64, strides)
}

/// Launches `one` over `inputs` (laid out with `out`'s shape) into `out`.
/// `out` may be an input's buffer only with that input's exact layout.
///
/// # Safety
/// The buffers must be live buffers of `gpu`, of their dtypes, holding
/// their layouts' elements (the eager op that called the backend checked
/// the layouts), and `out` must not be used elsewhere during the launch.
pub(super) unsafe fn launch(
    name: &'static str,
    gpu: &Gpu,
    one: &OneOp<'_>,
    inputs: &[Buf<'_>],
    scalars: &[f64],
    out: Buf<'_>,
) -> Result<()> {
    let dtypes: Vec<DType> = inputs.iter().map(|b| b.dtype).collect();
    let (k, types) = kernel(one, &dtypes, out.dtype);
    // SAFETY: this function's contract.
    unsafe { launch_outputs(name, gpu, &k, &types, scalars, inputs, &[out]) }
}

/// Launches the elementwise kernel `k` (its values typed `types`, its
/// slots' values `scalars`) over `inputs` (laid out with the outputs'
/// shape) into `outs`, one per stored value ([`Kernel::outs`]), in order,
/// all laid out as the first: the one-op kernels above, and the fused
/// kernels of a compiled call (`fused_kernels.rs`).
///
/// # Safety
/// As [`launch`], for every output.
pub(super) unsafe fn launch_outputs(
    name: &'static str,
    gpu: &Gpu,
    k: &Kernel,
    types: &KernelTypes,
    scalars: &[f64],
    inputs: &[Buf<'_>],
    outs: &[Buf<'_>],
) -> Result<()> {
    let out = outs.first().ok_or_else(|| AotError::internal(name, "a kernel launch with no output"))?;
    if outs.len() != k.outs().count() || outs.iter().any(|o| o.layout != out.layout) {
        return Err(AotError::internal(name, format!("kernel `{}`: {} outputs of one layout expected", k.name, k.outs().count())));
    }
    let numel: usize = out.layout.shape.iter().product();
    if numel == 0 {
        return Ok(());
    }
    let rank = out.layout.shape.len();
    let r = render_cuda_typed(k, types, rank, &ScalarSlots::of(k)).map_err(|e| AotError::internal(name, e.to_string()))?;
    let mut pointers: Vec<String> = outs.iter().map(|o| format!("{} *", o.dtype.storage())).collect();
    pointers.extend(inputs.iter().map(|b| format!("const {} *", b.dtype.storage())));
    let entry = Entry { name: r.name.clone(), pointers, sync: false };
    let bufs: Vec<u64> = outs.iter().map(|o| o.addr).chain(inputs.iter().map(|b| b.addr)).collect();
    let layouts: Vec<(i64, Vec<i64>)> = inputs.iter().map(|b| operand(b.layout)).collect();
    let ins: Vec<Operand<'_>> = layouts.iter().map(|(o, s)| Operand { offset: *o, strides: s }).collect();
    let sizes: Vec<i64> = out.layout.shape.iter().map(|&n| n as i64).collect();
    let (oo, os) = operand(out.layout);
    let words =
        pack_params(&sizes, Operand { offset: oo, strides: &os }, &ins, scalars).map_err(|e| AotError::internal(name, e.to_string()))?;
    let grid = u32::try_from(numel.div_ceil(256).clamp(1, 1024)).unwrap_or(1024);
    // SAFETY: this function's contract, which the launch's is.
    unsafe { gpu.launch(name, &r.source, &entry, (grid, 256), &bufs, &words) }
}
