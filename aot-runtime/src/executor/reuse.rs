//! Values computed in place at the last use of an operand: an elementwise
//! node (a fused kernel, a single elementwise op, or a fresh write's
//! out-of-place op) whose operand dies at that node and is held by nothing
//! else writes its result over that operand's buffer instead of a new one
//! (PyTorch's reinplacing of intermediates).
//!
//! "Held by nothing else" is the run's own table holding the only handle of
//! the tensor object and that object the only one over its storage: no
//! view, no alias, no saved value, no caller's tensor (the caller holds its
//! arguments, so an input never qualifies and is never written). The
//! result must have exactly the operand's layout (dense, offset 0, its
//! whole storage) and dtype, which is what the op would allocate; the
//! operand's storage is left empty and dropped after the node
//! (`liveness.rs`). The evaluator reads each block of the operand before it
//! writes the block at the same positions (`cpu::fused_elementwise::fused_over`).

use super::kernel::binary_op;
use super::liveness::Liveness;
use crate::backend::{FusedProgram, FusedRhs, FusedStep, OpKernels};
use crate::error::Result;
use crate::eval::prims::scalar;
use crate::layout::{elementwise_layout, Layout};
use crate::ops::binary::scalar_result_layout;
use crate::storage::Storage;
use crate::tensor::is_grad_enabled;
use crate::tensor::Tensor;
use aot_ir::{Arg as IrArg, Node, OpKind, ScalarValue, ValueId};
use std::sync::Arc;

/// Whether the table's handle `t` is the only one of its tensor object,
/// and that object the only one over its storage.
fn sole(t: &Tensor) -> bool {
    Arc::strong_count(&t.0) == 1
        && Arc::weak_count(&t.0) == 0
        && Arc::strong_count(t.storage()) == 1
        && Arc::weak_count(t.storage()) == 0
        && !t.storage().is_dtype_view()
}

/// Whether value `v` dies at node `i` and its tensor may be written over.
pub(crate) fn dying(v: ValueId, i: usize, env: &[Option<Tensor>], live: &Liveness) -> bool {
    live.dies_at(i, v) && env.get(v.index()).and_then(Option::as_ref).is_some_and(sole)
}

/// The position among `node`'s tensor arguments of one that dies there,
/// is read once and may be written over.
pub(crate) fn donor(node: &Node, i: usize, env: &[Option<Tensor>], live: &Liveness) -> Option<usize> {
    if is_grad_enabled() {
        return None;
    }
    // No allocation: this runs for every node of a call.
    node.tensor_args().position(|v| dying(v, i, env, live) && node.tensor_args().filter(|&w| w == v).count() == 1)
}

fn tensor<'a>(args: &[IrArg], k: usize, env: &'a [Option<Tensor>]) -> Option<&'a Tensor> {
    env.get(args.get(k)?.as_tensor()?.index())?.as_ref()
}

/// `op(args)` (an elementwise op of the kernel stage, with one tensor and
/// at most a second tensor of the same shape or a scalar) written over the
/// buffer of its tensor argument `k`; `None` where the result would not
/// have exactly that tensor's layout and dtype (the caller runs the op as
/// usual).
pub(crate) fn elementwise(
    op: OpKind,
    args: &[IrArg],
    k: usize,
    env: &[Option<Tensor>],
    scalars: &[Option<ScalarValue>],
) -> Option<Result<Tensor>> {
    // Ops whose result has their operand's dtype (no comparisons, `where_`
    // or casts).
    let same_dtype =
        !matches!(op, OpKind::Eq | OpKind::Ne | OpKind::Lt | OpKind::Le | OpKind::Gt | OpKind::Ge | OpKind::Where | OpKind::ToDtype);
    if !aot_ir::kernel::is_elementwise(op) || !same_dtype || args.len() > 2 {
        return None;
    }
    let a = tensor(args, 0, env)?;
    let la = a.layout();
    let (rhs, b, out) = match args.get(1) {
        None => (FusedRhs::None, None, elementwise_layout(&la.shape, &[&la])),
        Some(IrArg::Tensor(_)) => {
            let b = tensor(args, 1, env)?;
            let lb = b.layout();
            if lb.shape != la.shape {
                return None;
            }
            let out = elementwise_layout(&la.shape, &[&la, &lb]);
            (FusedRhs::Value(1), Some((b, lb)), out)
        }
        Some(arg) => (FusedRhs::Scalar(scalar_f64(arg, scalars)?), None, scalar_result_layout(binary_op(op)?, &la)),
    };
    let step = [FusedStep::new(op, 0, rhs, 1 + usize::from(b.is_some()), a.dtype())];
    let inputs: Vec<(&Storage, Layout)> = std::iter::once((&**a.storage(), la)).chain(b.map(|(b, lb)| (&**b.storage(), lb))).collect();
    over(op, &step, inputs, k, out, a.dtype())
}

/// A fresh write's new version, `op(p, x)` with the out-of-place `op` of
/// the write (`out_of_place_writes.rs`), over the buffer of `p` (`k == 0`: the root
/// version it replaces) or of its tensor operand `x` (`k == 1`), when
/// that buffer has `p`'s layout.
pub(crate) fn fresh(
    op: OpKind,
    p: &Tensor,
    operand: &IrArg,
    k: usize,
    env: &[Option<Tensor>],
    scalars: &[Option<ScalarValue>],
) -> Option<Result<Tensor>> {
    let lp = p.layout();
    let (rhs, x) = match operand {
        IrArg::Tensor(v) => {
            let x = env.get(v.index())?.as_ref()?;
            let lx = x.layout();
            // An in-place op keeps its receiver's shape: the operand broadcasts to it.
            let shape = crate::layout::broadcast_shapes(op.name(), &lp.shape, &lx.shape).ok()?;
            if shape != lp.shape || x.dtype() != p.dtype() {
                return None;
            }
            (FusedRhs::Value(1), Some((x, crate::ops::binary::broadcast_layout(&lx, &lp.shape))))
        }
        arg => (FusedRhs::Scalar(scalar_f64(arg, scalars)?), None),
    };
    let step = [FusedStep::new(op, 0, rhs, 1 + usize::from(x.is_some()), p.dtype())];
    let inputs: Vec<(&Storage, Layout)> =
        std::iter::once((&**p.storage(), lp.clone())).chain(x.map(|(x, l)| (&**x.storage(), l))).collect();
    over(op, &step, inputs, k, lp, p.dtype())
}

fn scalar_f64(arg: &IrArg, scalars: &[Option<ScalarValue>]) -> Option<f64> {
    Some(aot_ir::kernel::render::scalar_f64(scalar(Some(arg), scalars).ok()?))
}

/// Runs the one-step program `step` on `inputs` over input `k`'s buffer,
/// with the result laid out as `out`.
fn over(
    op: OpKind,
    step: &[FusedStep; 1],
    inputs: Vec<(&Storage, Layout)>,
    k: usize,
    out: Layout,
    dtype: crate::DType,
) -> Option<Result<Tensor>> {
    if !dtype.is_float() || inputs.iter().any(|(s, _)| s.dtype() != dtype) {
        return None;
    }
    let dtypes = [dtype; 3];
    let n = inputs.len();
    let program = FusedProgram { steps: step, num_values: n + 1, stored: n, dtypes: &dtypes[..n + 1], read: &[true, true][..n] };
    let r = Storage::fused_over("elementwise", op.name(), &program, &inputs, k, &out)?;
    if r.is_ok() && out.numel() > 0 {
        // The eager op's primitive, which the devices without this path run.
        crate::backend::kernel_record::note_op(|| {
            let (op, rank) = (step[0].op, out.rank());
            match step[0].rhs {
                FusedRhs::None => OpKernels::Unary { op, dtype, rank },
                FusedRhs::Value(_) => OpKernels::Binary { op, lhs: dtype, rhs: dtype, rank, assign: false },
                FusedRhs::Scalar(_) => OpKernels::BinaryScalar { op, dtype, scalar_first: false, rank },
            }
        });
    }
    Some(r.map(|s| Tensor::from_storage(s, out)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Device};

    /// A dense tensor of `shape` laid out with its dims in `order`
    /// (outermost first), with values in a wide range.
    fn dense(shape: &[usize], order: &[usize], dtype: DType, seed: u64) -> Tensor {
        let stored: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
        let t = Tensor::randn(&stored, DType::F64, &Device::Cpu, seed).unwrap().mul(3.0).unwrap().to_dtype(dtype).unwrap();
        let mut inverse = vec![0i64; order.len()];
        for (i, &d) in order.iter().enumerate() {
            inverse[d] = i as i64;
        }
        t.permute(&inverse).unwrap()
    }

    /// Written over its own input, a kernel computes bit for bit what it
    /// computes into a new buffer: on a permuted dense layout, across
    /// blocks and parallel tasks, whichever input is written over, in f32
    /// and f16. The donor's storage is left empty.
    #[test]
    fn a_kernel_over_its_dying_input_computes_what_it_computes_anew() {
        // 3 * 129 * 257 elements: more than a parallel task, not a multiple of a block.
        let shape = [3, 129, 257];
        for dtype in [DType::F32, DType::F16] {
            let steps = [
                FusedStep::new(OpKind::Mul, 0, FusedRhs::Value(1), 2, dtype),
                FusedStep::new(OpKind::Add, 2, FusedRhs::Scalar(0.5), 3, dtype),
                FusedStep::new(OpKind::Tanh, 3, FusedRhs::None, 4, dtype),
                FusedStep::new(OpKind::Sub, 4, FusedRhs::Value(0), 5, dtype),
            ];
            let dtypes = [dtype; 6];
            let p = FusedProgram { steps: &steps, num_values: 6, stored: 5, dtypes: &dtypes, read: &[true, true] };
            for k in [0, 1] {
                let a = dense(&shape, &[2, 0, 1], dtype, 1);
                let b = dense(&shape, &[2, 0, 1], dtype, 2);
                let out = a.layout();
                let inputs = [(&**a.storage(), a.layout()), (&**b.storage(), b.layout())];
                let anew = Storage::fused("test", &p, &inputs, &out).unwrap().unwrap();
                let anew = Tensor::from_storage(anew, out.clone()).to_vec::<f64>().unwrap();
                let over = Storage::fused_over("test", "test", &p, &inputs, k, &out).expect("qualifies").unwrap();
                let over = Tensor::from_storage(over, out.clone());
                assert_eq!(over.stride(), a.stride());
                let (got, want): (Vec<u64>, Vec<u64>) =
                    (over.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect(), anew.iter().map(|x| x.to_bits()).collect());
                assert!(got == want, "{dtype:?}, over input {k}");
                let donor = if k == 0 { &a } else { &b };
                assert_eq!(donor.storage().read_len(), 0, "the donor's buffer was taken");
            }
        }
    }

    /// Declined, with nothing taken: another layout, a buffer shared with
    /// another input, a mismatched dtype.
    #[test]
    fn a_kernel_that_cannot_write_over_its_input_takes_nothing() {
        let steps = [FusedStep::new(OpKind::Add, 0, FusedRhs::Value(1), 2, DType::F32)];
        let p = FusedProgram { steps: &steps, num_values: 3, stored: 2, dtypes: &[DType::F32; 3], read: &[true, true] };
        let a = dense(&[4, 5], &[0, 1], DType::F32, 3);
        let t = a.t().unwrap();
        let wide = a.to_dtype(DType::F64).unwrap();
        type Inputs<'a> = [(&'a Storage, Layout); 2];
        let cases: [(&str, Inputs<'_>, Layout); 3] = [
            ("transposed", [(&**t.storage(), t.layout()), (&**t.storage(), t.layout())], a.layout()),
            ("one buffer twice", [(&**a.storage(), a.layout()), (&**a.storage(), a.layout())], a.layout()),
            ("dtypes differ", [(&**a.storage(), a.layout()), (&**wide.storage(), wide.layout())], a.layout()),
        ];
        for (what, inputs, out) in cases {
            assert!(Storage::fused_over("test", "test", &p, &inputs, 0, &out).is_none(), "{what}");
            assert_eq!(a.storage().read_len(), 20, "{what}: nothing taken");
        }
    }
}
