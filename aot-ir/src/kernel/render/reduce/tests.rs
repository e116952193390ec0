//! The shape of rendered reduction units and of their parameters; that
//! they compute the CPU backend's values is checked by the runtime, which
//! runs them on the simulated device and compiles them with NVRTC.

use super::super::{render_cuda, render_cuda_typed, DType, KernelTypes, Operand, ScalarSlots};
use super::pack_reduce_params;
use crate::graph::{Node, Op};
use crate::kernel::Kernel;
use crate::op::OpKind;
use crate::types::{Arg, ScalarExpr, ValueId};

fn t(v: u32) -> Arg {
    Arg::Tensor(ValueId(v))
}

fn dims(d: &[i64]) -> Arg {
    Arg::Ints(d.iter().map(|&x| ScalarExpr::I64(x)).collect())
}

fn sc(e: ScalarExpr) -> Arg {
    Arg::Scalar(e)
}

/// `load; exp; <op>; neg`: a prologue, the reduction, an epilogue.
fn kernel(op: OpKind) -> Kernel {
    let args = match op {
        OpKind::Sum | OpKind::Mean => vec![t(1)],
        OpKind::VarDim => vec![t(1), dims(&[1]), sc(ScalarExpr::Param(0)), sc(ScalarExpr::Bool(false))],
        OpKind::Softmax | OpKind::LogSoftmax => vec![t(1), sc(ScalarExpr::I64(1))],
        _ => vec![t(1), dims(&[1]), sc(ScalarExpr::Bool(true))],
    };
    let body = vec![
        Node::new(Op::Load(0), vec![], Some(ValueId(0))),
        Node::new(OpKind::Abs, vec![t(0)], Some(ValueId(1))),
        Node::new(op, args, Some(ValueId(2))),
        Node::new(OpKind::Neg, vec![t(2)], Some(ValueId(3))),
    ];
    Kernel {
        name: format!("k_{}", op.name()),
        body,
        num_values: 4,
        out: ValueId(3),
        extra_outs: Vec::new(),
        stage_values: (0..4).map(ValueId).collect(),
    }
}

const KINDS: [OpKind; 8] =
    [OpKind::Sum, OpKind::Mean, OpKind::SumDim, OpKind::MeanDim, OpKind::AmaxDim, OpKind::VarDim, OpKind::Softmax, OpKind::LogSoftmax];

#[test]
fn every_reduction_renders_a_block_reduction_with_its_prologue_and_epilogue() {
    for op in KINDS {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let k = kernel(op);
            let r = render_cuda(&k, dtype, 2, &ScalarSlots::of(&k)).unwrap_or_else(|e| panic!("{op:?} {dtype:?}: {e}"));
            let s = &r.source;
            let st = dtype.storage();
            assert!(
                s.contains(&format!("extern \"C\" __global__ void {}({st} *out, const {st} *in0, const aot_params_{} p)", r.name, r.name)),
                "{s}"
            );
            for part in ["aot_pro_", "aot_epi_", "aot_fin_"] {
                assert!(s.contains(&format!("{part}{}(", r.name)), "{op:?}: {part}\n{s}");
            }
            assert!(s.contains("__shfl_down_sync") && s.contains("__syncthreads()") && s.contains("__shared__ double aot_smem[33]"), "{s}");
            // The helper is guarded, so units concatenate.
            assert_eq!(s.matches("#ifndef AOT_ROW_REDUCE").count(), 1);
            let passes = s.matches("for (long long j = tid; j < p.row_len; j += width)").count();
            let want = match op {
                OpKind::VarDim | OpKind::Softmax | OpKind::LogSoftmax => 2,
                _ => 1,
            };
            assert_eq!(passes, want, "{op:?}: folds over the row\n{s}");
            assert_eq!(s.matches("j < p.epi_len").count(), 1, "{op:?}: one epilogue loop");
            if matches!(dtype, DType::F16 | DType::BF16) {
                assert!(s.contains(&format!("#include <{}>", dtype.header().unwrap_or_default())), "{s}");
            }
        }
    }
}

#[test]
fn sums_of_integers_accumulate_in_long_long_and_amax_propagates_nan() {
    let k = kernel(OpKind::SumDim);
    // abs of an i64 stays i64; the sum is i64, wrapping.
    let r = render_cuda(&k, DType::I64, 2, &ScalarSlots::of(&k)).expect("i64 sum");
    assert!(r.source.contains("__shared__ long long aot_smem[33]"), "{}", r.source);
    assert!(r.source.contains("(unsigned long long)a + (unsigned long long)b"), "{}", r.source);
    let k = kernel(OpKind::AmaxDim);
    let r = render_cuda(&k, DType::F32, 3, &ScalarSlots::of(&k)).expect("amax");
    assert!(r.source.contains("(a != a || a >= b) ? a : b"), "{}", r.source);
    // Softmax ignores NaN in its maximum; var reads its correction slot.
    let k = kernel(OpKind::Softmax);
    let r = render_cuda(&k, DType::F32, 1, &ScalarSlots::of(&k)).expect("softmax");
    assert!(r.source.contains("b > a ? b : a") && r.source.contains("expf("), "{}", r.source);
    let k = kernel(OpKind::VarDim);
    let slots = ScalarSlots::of(&k);
    assert_eq!(slots.exprs(), &[ScalarExpr::Param(0)]);
    let r = render_cuda(&k, DType::F64, 2, &slots).expect("var");
    assert!(r.source.contains("double div = (double)p.row_len - (p.scalars[0]);"), "{}", r.source);
    assert!(r.source.contains("double scalars[1];"), "{}", r.source);
}

#[test]
fn rank_zero_has_no_index_arithmetic() {
    let k = kernel(OpKind::Sum);
    let r = render_cuda(&k, DType::F32, 0, &ScalarSlots::of(&k)).expect("rank 0");
    assert!(!r.source.contains("sizes") && !r.source.contains("strides"), "{}", r.source);
}

#[test]
fn reductions_refuse_what_eager_refuses() {
    for op in [OpKind::Mean, OpKind::VarDim, OpKind::Softmax] {
        let k = kernel(op);
        let e = render_cuda(&k, DType::Bool, 2, &ScalarSlots::of(&k)).unwrap_err().to_string();
        assert!(e.contains("`abs` of a bool tensor"), "{e}");
        let e = render_cuda(&k, DType::I64, 2, &ScalarSlots::of(&k)).unwrap_err().to_string();
        assert!(e.contains(&format!("`{}` of a I64 tensor", op.name())), "{e}");
    }
    // Types that do not fit the reduction (a float mean to i64).
    let k = kernel(OpKind::Mean);
    let mut types = KernelTypes::infer(&k, &[DType::F32]).expect("types");
    types.values[2] = DType::I64;
    let e = render_cuda_typed(&k, &types, 1, &ScalarSlots::of(&k)).unwrap_err().to_string();
    assert!(e.contains("only floats"), "{e}");
    // The correction must be a scalar.
    let mut k = kernel(OpKind::VarDim);
    k.body[2].args[2] = dims(&[1]);
    let e = render_cuda(&k, DType::F32, 2, &ScalarSlots::of(&k)).unwrap_err().to_string();
    assert!(e.contains("correction"), "{e}");
}

#[test]
fn params_order_kept_dims_then_reduced_dims() {
    // S = [2, 3, 4], reducing dim 1; the output is one value per row.
    let out = Operand { offset: 0, strides: &[4, 0, 1] };
    let x = Operand { offset: 5, strides: &[12, 4, 1] };
    let l = pack_reduce_params(&[2, 3, 4], &[false, true, false], false, out, &[x], &[0.5]).expect("params");
    let want: Vec<u64> = vec![8, 3, 1, 1, 2, 2, 4, 3, 0, 4, 1, 0, 5, 12, 1, 4, 0.5f64.to_bits()];
    assert_eq!(l.words, want);
    assert_eq!((l.block, l.grid, l.empty), (128, 2, false), "short rows: a warp per row, four warps a block");
    // Long rows take a block each; softmax writes along the row.
    let l = pack_reduce_params(&[3, 1000], &[false, true], true, x_like(&[1000, 1]), &[x_like(&[1000, 1])], &[]).expect("long");
    assert_eq!((l.block, l.grid, l.words[2], l.words[3]), (256, 3, 1000, 0));
    // Empty rows along the row write nothing; one value per empty row does.
    assert!(pack_reduce_params(&[3, 0], &[false, true], true, x_like(&[0, 1]), &[], &[]).expect("empty").empty);
    assert!(!pack_reduce_params(&[3, 0], &[false, true], false, x_like(&[1, 0]), &[], &[]).expect("sum of nothing").empty);
    // Mismatched ranks are errors.
    assert!(pack_reduce_params(&[3, 4], &[true], false, x_like(&[4, 1]), &[], &[]).is_err());
    assert!(pack_reduce_params(&[3, 4], &[true, true], false, x_like(&[1]), &[], &[]).is_err());
}

fn x_like(strides: &'static [i64]) -> Operand<'static> {
    Operand { offset: 0, strides }
}
