//! The kernels of a compiled call on the CUDA backend: `Backend::fused`
//! and `Backend::fused_reduce` render the kernel stage's [`Kernel`] itself
//! (not the CPU's evaluator program) with the plan's types and the call's
//! scalar slot values ([`KernelCall`]), and launch it: an elementwise
//! kernel through `kernels.rs`, a reduction kernel through `reduce.rs`.
//! The device caches the compiled module by its source, which holds the
//! kernel, its types and its rank, so a kernel compiles once per
//! specialisation.
//!
//! Several in-place kernels of one code, whose operands are each laid out
//! alike, launch as one kernel of segments
//! ([`fused_in_place_segments`], `aot_ir::kernel::render::segments`).
//!
//! A kernel is declined (`None`: the executor runs its ops one by one,
//! each a kernel of its own where it has one) where the call does not fit
//! what was planned: inputs of other dtypes than the plan's, scalar slots
//! that did not evaluate, inputs on several devices, a kernel the renderer
//! refuses.

use super::device::{gpu, Gpu};
use super::kernels::{self, Buf};
use super::reduce::{self, Rows};
use super::sim::Entry;
use super::CudaStorage;
use crate::backend::{FusedProgram, FusedReduceProgram, InPlaceSegment, KernelCall};
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::{contiguous_strides, Layout};
use aot_ir::kernel::render::{
    launch_blocks, pack_params, pack_segments, render_cuda_segments, same_code, segments_per_launch, Operand, ScalarSlots,
};

/// The device and the output dtype, when the call fits its inputs (see
/// the module doc).
fn fits(call: &KernelCall<'_>, inputs: &[(&CudaStorage, Layout)]) -> Option<(usize, DType)> {
    let k = call.kernel;
    let (first, _) = inputs.first()?;
    let ordinal = first.ordinal;
    let same = inputs.len() == k.num_inputs()
        && call.types.values.len() == k.num_values
        && call.types.compute.len() == k.num_values
        && inputs.iter().zip(&call.types.values).all(|((s, _), &d)| s.ordinal == ordinal && s.dtype == d)
        && call.slots.len() == ScalarSlots::of(k).exprs().len();
    let dtype = *call.types.values.get(k.out.index())?;
    same.then_some((ordinal, dtype))
}

/// A new buffer of `n` elements of `dtype`, and the device.
fn alloc(name: &'static str, ordinal: usize, dtype: DType, n: usize) -> Result<(&'static Gpu, super::device::Mem)> {
    let g = gpu(name, ordinal)?;
    let mem = g.alloc(name, n * dtype.size_in_bytes())?;
    Ok((g, mem))
}

/// `Backend::fused` for CUDA: the elementwise kernel of `call` over
/// `inputs` (broadcast to `out`'s shape) into a new buffer laid out as
/// `out` (dense, offset 0).
pub(super) fn fused(
    name: &'static str,
    p: &FusedProgram<'_>,
    call: &KernelCall<'_>,
    inputs: &[(&CudaStorage, Layout)],
    out: &Layout,
) -> Option<Result<CudaStorage>> {
    let (ordinal, dtype) = fits(call, inputs)?;
    // An input only cast reads (for its dtype) is still loaded at element
    // 0 of its buffer: it must have one.
    if inputs.iter().zip(p.read).any(|((s, _), &read)| !read && s.len == 0) {
        return None;
    }
    let n: usize = out.shape.iter().product();
    let run = || -> Result<CudaStorage> {
        let (g, mem) = alloc(name, ordinal, dtype, n)?;
        let bufs: Vec<Buf<'_>> = inputs.iter().map(|(s, l)| s.buf(g, l)).collect();
        let to = Buf { addr: mem.address(g), layout: out, dtype };
        // SAFETY: the inputs are live buffers of this device, laid out
        // (as the executor planned) within their storages; `mem` is new and
        // holds `out`'s elements (dense, offset 0).
        unsafe { kernels::launch_outputs(name, g, call.kernel, call.types, call.slots, &bufs, &[to]) }?;
        Ok(CudaStorage { mem, dtype, len: n, ordinal })
    };
    Some(run())
}

/// The elementwise kernel of `call` stored over its destinations' own
/// buffers (reinplacing): `dests` pairs an input with the body value
/// stored over it, in the kernel's order of stored values; each such input
/// is laid out as `out` (dense, offset 0, the whole buffer) and is no
/// other input's buffer, so each thread reads the elements it then writes.
/// `None`: declined, nothing launched.
pub(super) fn fused_in_place(
    name: &'static str,
    p: &FusedProgram<'_>,
    call: &KernelCall<'_>,
    inputs: &[(&CudaStorage, Layout)],
    dests: &[(usize, usize)],
    out: &Layout,
) -> Option<Result<()>> {
    let (ordinal, dtype) = fits(call, inputs)?;
    let n: usize = out.shape.iter().product();
    let stored: Vec<usize> = call.kernel.outs().map(|v| v.index()).collect();
    if dests.iter().map(|&(_, v)| v).ne(stored.iter().copied()) || out.offset != 0 {
        return None;
    }
    for &(k, v) in dests {
        let (dst, layout) = inputs.get(k)?;
        let vd = *call.types.values.get(v)?;
        if dst.dtype != dtype || vd != dtype || *layout != *out || dst.len != n {
            return None;
        }
    }
    if inputs.iter().zip(p.read).any(|((s, _), &read)| !read && s.len == 0) {
        return None;
    }
    let run = || -> Result<()> {
        let g = gpu(name, ordinal)?;
        let bufs: Vec<Buf<'_>> = inputs.iter().map(|(s, l)| s.buf(g, l)).collect();
        let tos: Vec<Buf<'_>> = dests.iter().map(|&(k, _)| Buf { addr: inputs[k].0.mem.address(g), layout: out, dtype }).collect();
        // SAFETY: the inputs are live buffers of this device laid out within
        // their storages; each output is a destination input's buffer,
        // holding `out`'s `n` elements, which each thread reads at the
        // position it writes.
        unsafe { kernels::launch_outputs(name, g, call.kernel, call.types, call.slots, &bufs, &tos) }
    };
    Some(run())
}

/// `Backend::fused_reduce` for CUDA: the reduction kernel of `call` over
/// `inputs` (laid out over the reduction's input shape `S`) into a new
/// buffer for `out` (`S`'s shape, densely, when the program writes along
/// rows; else contiguous, one value per row).
pub(super) fn fused_reduce(
    name: &'static str,
    p: &FusedReduceProgram<'_>,
    call: &KernelCall<'_>,
    inputs: &[(&CudaStorage, Layout)],
    out: &Layout,
) -> Option<Result<CudaStorage>> {
    let (ordinal, dtype) = fits(call, inputs)?;
    let shape = inputs.first()?.1.shape.to_vec();
    if p.reduced.len() != shape.len() || inputs.iter().any(|(_, l)| l.shape.as_slice() != shape.as_slice()) || out.offset != 0 {
        return None;
    }
    // The output over `S`: its own layout along rows, else one value per
    // row (contiguous over the kept dims, stride 0 along the reduced ones).
    let over = if p.rows_out {
        if out.shape.as_slice() != shape.as_slice() || !crate::layout::is_dense_output(out) {
            return None;
        }
        out.clone()
    } else {
        if !out.is_contiguous() {
            return None;
        }
        let kept: Vec<usize> = shape.iter().zip(p.reduced).map(|(&n, &r)| if r { 1 } else { n }).collect();
        let mut stride = contiguous_strides(&kept);
        stride.iter_mut().zip(p.reduced).filter(|(_, &r)| r).for_each(|(s, _)| *s = 0);
        Layout::new(shape, stride, 0)
    };
    let n: usize = out.shape.iter().product();
    let run = || -> Result<CudaStorage> {
        let (g, mem) = alloc(name, ordinal, dtype, n)?;
        let bufs: Vec<Buf<'_>> = inputs.iter().map(|(s, l)| s.buf(g, l)).collect();
        let to = Buf { addr: mem.address(g), layout: &over, dtype };
        let rows = Rows { reduced: p.reduced, rows_out: p.rows_out };
        // SAFETY: the inputs are live buffers of this device laid out over
        // `S` within their storages (the executor's plan); `mem` is new and
        // holds `out`'s `n` elements, which `over` addresses.
        unsafe { reduce::launch(name, g, call, &bufs, to, &rows) }?;
        Ok(CudaStorage { mem, dtype, len: n, ordinal })
    };
    Some(run())
}

/// `Backend::fused_in_place_segments` for CUDA: the segments' kernels (one
/// code, one set of types) as launches of segments, each segment's
/// operands flat (laid out as its `out`, which is dense over its whole
/// buffer). `None`: a segment does not fit that; nothing launched.
pub(super) fn fused_in_place_segments(name: &'static str, segs: &[InPlaceSegment<'_, CudaStorage>]) -> Option<Result<()>> {
    let first = segs.first()?;
    let (k, types) = (first.call.kernel, first.call.types);
    let mut ordinal = None;
    for seg in segs {
        let (o, dtype) = fits(&seg.call, &seg.inputs)?;
        let stored: Vec<usize> = seg.call.kernel.outs().map(|v| v.index()).collect();
        let same = same_code(seg.call.kernel, k) && seg.call.types == types && *ordinal.get_or_insert(o) == o;
        let flat = seg.inputs.iter().all(|(_, l)| l.shape == seg.out.shape && l.stride == seg.out.stride)
            && seg.out.offset == 0
            && crate::layout::is_dense_output(seg.out);
        let dests_ok = seg.dests.iter().map(|&(_, v)| v).eq(stored.iter().copied())
            && seg.dests.iter().all(|&(i, _)| seg.inputs.get(i).is_some_and(|(d, _)| d.dtype == dtype && d.len == seg.out.numel()));
        let unread = seg.inputs.iter().zip(seg.read).any(|((s, _), &read)| !read && s.len == 0);
        if !same || !flat || !dests_ok || unread || seg.out.numel() == 0 {
            return None;
        }
    }
    let ordinal = ordinal?;
    let run = || -> Result<()> {
        let g = gpu(name, ordinal)?;
        for chunk in segs.chunks(segments_per_launch(k)) {
            launch_segments(name, g, chunk)?;
        }
        Ok(())
    };
    Some(run())
}

/// One launch of `segs` (checked by [`fused_in_place_segments`]).
fn launch_segments(name: &'static str, g: &Gpu, segs: &[InPlaceSegment<'_, CudaStorage>]) -> Result<()> {
    let call = &segs[0].call;
    let internal = |e: aot_ir::kernel::render::RenderError| AotError::internal(name, e.to_string());
    let r = render_cuda_segments(call.kernel, call.types, &ScalarSlots::of(call.kernel), segs.len()).map_err(internal)?;
    let (mut pointers, mut bufs, mut params, mut blocks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for seg in segs {
        let n = seg.out.numel();
        for &(i, _) in seg.dests {
            let d = seg.inputs[i].0;
            pointers.push(format!("{} *", d.dtype.storage()));
            bufs.push(d.mem.address(g));
        }
        for (s, _) in &seg.inputs {
            pointers.push(format!("const {} *", s.dtype.storage()));
            bufs.push(s.mem.address(g));
        }
        let ins: Vec<Operand<'_>> = seg.inputs.iter().map(|(_, l)| Operand { offset: l.offset as i64, strides: &[1] }).collect();
        params.push(pack_params(&[n as i64], Operand { offset: 0, strides: &[1] }, &ins, seg.call.slots).map_err(internal)?);
        blocks.push(launch_blocks(n));
    }
    let words = pack_segments(&blocks, &params);
    let grid: u32 = blocks.iter().sum();
    let entry = Entry { name: r.name.clone(), pointers, sync: false };
    // SAFETY: every segment's inputs are live buffers of this device (the
    // storage holds their locks), laid out flat over `n` elements within
    // them, and each output is a destination input's buffer, written where
    // the same thread reads it; no buffer a segment writes is another
    // segment's (checked by the storage).
    unsafe { g.launch(name, &r.source, &entry, (grid, 256), &bufs, &words) }
}
