//! One launch of an elementwise kernel over several sets of operands
//! ("multi-tensor apply", as PyTorch's foreach optimizers update every
//! parameter in one launch): each set is a segment, with its own buffers,
//! sizes and scalar values, and the launch's blocks are shared out among
//! the segments, so updating many tensors by one body costs one launch.
//!
//! # ABI
//! The entry point `<name>_x<n>` takes, for each of the `n` segments in
//! order, the kernel's own pointers (`out`, `out1`, .., `in0`, ..), then
//! `aot_params_<name>_x<n>` by value: `long long blocks[n + 1]` (segment
//! `k` runs on the blocks from `blocks[k]` to `blocks[k + 1]`), then the
//! kernel's parameter struct of each segment ([`super::pack_params`];
//! the segment's items are named `<name>_x<n>_seg`),
//! in order ([`pack_segments`] builds it). Each segment runs the kernel's
//! loop on its own blocks, as the kernel alone would on a grid of that
//! many blocks; no element is in two segments.
//!
//! The kernel is rendered for rank 1: each segment's operands are laid out
//! alike (an in-place update's tensors), so element `i` of each is at its
//! offset plus `i`, whatever their shapes.

use super::{c_name, check, elementwise_parts, entry, Head, KernelTypes, RenderError, RenderedKernel, ScalarSlots};
use crate::graph::Kernel;
use crate::graph::Node;
use std::fmt::Write as _;

/// The most bytes of parameters (pointers and the struct) a launch passes:
/// CUDA's limit for a kernel's parameters on every device.
const PARAM_BYTES: usize = 4096;
/// The most words of a parameter struct the runtime passes.
const PARAM_WORDS: usize = 480;

/// `k` (an elementwise kernel) as the CUDA C of a launch of `segments`
/// segments (see the module doc).
pub fn render_cuda_segments(
    k: &Kernel,
    types: &KernelTypes,
    scalars: &ScalarSlots,
    segments: usize,
) -> Result<RenderedKernel, RenderError> {
    let rank = 1;
    check(k, types)?;
    if k.reduction().is_some() || segments == 0 {
        return Err(RenderError::Body { kernel: k.name.clone(), node: 0, msg: format!("{segments} segments of a reduction") });
    }
    let seg = format!("{}_x{segments}", c_name(k));
    // The segment's own items are named apart from the kernel's alone, so
    // that both may share a unit.
    let name = format!("{seg}_seg");
    let (mut s, ins, outs) = elementwise_parts(k, types, rank, scalars, &name)?;
    entry(&mut s, &name, &ins, &outs, rank, Head::Segment);
    let _ = writeln!(s, "struct aot_params_{seg} {{\n    long long blocks[{}];\n    aot_params_{name} seg[{segments}];\n}};", segments + 1);
    let names = |k: usize| -> Vec<String> {
        let outs = (0..outs.len()).map(|j| if j == 0 { format!("out_{k}") } else { format!("out{j}_{k}") });
        outs.chain((0..ins.len()).map(|j| format!("in{j}_{k}"))).collect()
    };
    let mut params = Vec::new();
    for k in 0..segments {
        let types = outs.iter().map(|d| format!("{} *", d.storage())).chain(ins.iter().map(|d| format!("const {} *", d.storage())));
        params.extend(types.zip(names(k)).map(|(t, n)| format!("{t}{n}")));
    }
    let _ = writeln!(s, "extern \"C\" __global__ void {seg}({}, const aot_params_{seg} p) {{", params.join(", "));
    s.push_str("    const long long b = blockIdx.x;\n");
    for k in 0..segments {
        let args = names(k).join(", ");
        let _ = writeln!(
            s,
            "    if (b < p.blocks[{n}]) {{\n        aot_run_{name}({args}, p.seg[{k}], b - p.blocks[{k}], p.blocks[{n}] - p.blocks[{k}]);\n        return;\n    }}",
            n = k + 1
        );
    }
    s.push_str("}\n");
    Ok(RenderedKernel { name: seg, source: s })
}

/// The blocks of 256 threads a segment (or a kernel alone) of `numel`
/// elements runs on: one per 256 elements, at least 1, at most 1024 (the
/// loop strides over the rest).
pub fn launch_blocks(numel: usize) -> u32 {
    u32::try_from(numel.div_ceil(256).clamp(1, 1024)).unwrap_or(1024)
}

/// The parameter words of a launch of segments: the segments' first
/// blocks from their block counts, then each segment's words
/// ([`super::pack_params`]).
pub fn pack_segments(blocks: &[u32], params: &[Vec<u64>]) -> Vec<u64> {
    let mut w: Vec<u64> = Vec::with_capacity(blocks.len() + 1 + params.iter().map(Vec::len).sum::<usize>());
    w.push(0);
    for &b in blocks {
        w.push(w.last().copied().unwrap_or(0) + u64::from(b));
    }
    for p in params {
        w.extend_from_slice(p);
    }
    w
}

/// The most segments of `k` one launch takes (at least 1), so that its
/// parameters fit CUDA's limit.
pub fn segments_per_launch(k: &Kernel) -> usize {
    // Per segment: its pointers, and its struct for rank 1 (`numel`,
    // `contiguous`, one size, each operand's offset and stride, the slots).
    let (inputs, outputs, slots) = (k.num_inputs(), k.outs().count(), ScalarSlots::of(k).exprs().len());
    let (words, pointers) = (3 + 2 * (1 + inputs) + slots, outputs + inputs);
    let fits = |n: usize| {
        let struct_words = n + 1 + n * words;
        struct_words <= PARAM_WORDS && 8 * (struct_words + n * pointers) <= PARAM_BYTES
    };
    (1..).take_while(|&n| fits(n)).last().unwrap_or(1)
}

/// Whether `a` and `b` compute the same values from their loads (their
/// names and where their ops come from aside): one rendering serves both.
pub fn same_code(a: &Kernel, b: &Kernel) -> bool {
    let node = |m: &Node, n: &Node| m.op == n.op && m.args == n.args && m.out == n.out;
    a.num_values == b.num_values
        && a.out == b.out
        && a.extra_outs == b.extra_outs
        && a.body.len() == b.body.len()
        && a.body.iter().zip(&b.body).all(|(m, n)| node(m, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::Op;
    use crate::op::OpKind;
    use crate::types::{Arg, ScalarExpr, ValueId};

    /// `in0 * s + in1`, stored over in0 (an update of one tensor).
    fn update(span: u32) -> Kernel {
        let load = |i: u32| Node::new(Op::Load(i as usize), vec![], Some(ValueId(i)));
        let mut mul = Node::new(OpKind::Mul, vec![Arg::Tensor(ValueId(0)), Arg::Scalar(ScalarExpr::Param(0))], Some(ValueId(2)));
        mul.span = crate::types::SpanId(span);
        let add = Node::new(OpKind::Add, vec![Arg::Tensor(ValueId(2)), Arg::Tensor(ValueId(1))], Some(ValueId(3)));
        Kernel {
            name: format!("upd_{span}"),
            body: vec![load(0), load(1), mul, add],
            num_values: 4,
            out: ValueId(3),
            extra_outs: Vec::new(),
            stage_values: (0..4).map(ValueId).collect(),
        }
    }

    #[test]
    fn a_launch_of_segments_runs_each_segment_on_its_own_blocks() {
        let k = update(1);
        let types = KernelTypes::infer(&k, &[DType::F32, DType::F32]).unwrap();
        let r = render_cuda_segments(&k, &types, &ScalarSlots::of(&k), 3).unwrap();
        assert_eq!(r.name, "upd_1_x3");
        let s = &r.source;
        assert!(s.contains("struct aot_params_upd_1_x3 {\n    long long blocks[4];\n    aot_params_upd_1_x3_seg seg[3];\n};"), "{s}");
        assert!(
            s.contains("extern \"C\" __global__ void upd_1_x3(float *out_0, const float *in0_0, const float *in1_0, float *out_1,"),
            "{s}"
        );
        assert!(s.contains("aot_run_upd_1_x3_seg(out_2, in0_2, in1_2, p.seg[2], b - p.blocks[2], p.blocks[3] - p.blocks[2]);"), "{s}");
        // Nothing of the kernel alone, so both fit in one unit.
        assert!(!s.contains("aot_params_upd_1 ") && !s.contains("aot_body_upd_1("), "{s}");
        assert_eq!(pack_segments(&[2, 1, 4], &[vec![7], vec![8, 9], vec![]]), vec![0, 2, 3, 7, 7, 8, 9]);
        assert_eq!(launch_blocks(0), 1);
        assert_eq!(launch_blocks(257), 2);
        assert_eq!(launch_blocks(1 << 30), 1024);
    }

    #[test]
    fn kernels_of_one_code_share_a_launch_within_the_parameter_limit() {
        // The same ops from other places of the source are one code.
        assert!(same_code(&update(1), &update(2)));
        let mut other = update(1);
        other.body[3].op = Op::Dsl { op: OpKind::Sub, check_alias: None };
        assert!(!same_code(&update(1), &other));
        // 10 words (3 + 2 * 3 + 1 slot) and 3 pointers a segment: 36
        // segments take 8 * (37 + 360 + 108) = 4040 bytes, 37 would pass
        // CUDA's 4096.
        assert_eq!(segments_per_launch(&update(1)), 36);
    }
}
