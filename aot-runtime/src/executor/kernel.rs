//! Runs the kernel stage's [`Op::Kernel`] nodes.
//!
//! A kernel runs as one fused pass on its inputs' backend
//! ([`Storage::fused`]) when its inputs share one float dtype: the result
//! then has eager's dtype, shape and layout, which [`plan`] works out by
//! following each body op as eager would lay out its result. Otherwise
//! (integer or mixed dtypes, shapes that do not broadcast, a backend
//! without fused kernels) its body runs op by op through the dispatcher,
//! which also reports every error exactly as eager does. Both paths count
//! themselves ([`stats`]), so tests can check that the fused path is taken.
//!
//! A backward some of whose tangents never arrived tracks which values
//! are zero (see `interp::zero_result`); a kernel with a zero input runs
//! op by op then, tracking zeros through its body.

use super::dispatch::{exec_node, ArgGeometrySource};
use super::interp::{blame, get, zero_result, Ctx, Stop};
use crate::autograd::prims::scalar;
use crate::backend::{BinaryOp, FusedProgram, FusedRhs, FusedStep};
use crate::error::{AotError, Result};
use crate::layout::{broadcast_shapes, elementwise_layout, Layout};
use crate::ops::binary::{broadcast_layout, scalar_result_layout};
use crate::storage::Storage;
use crate::tensor::Tensor;
use aot_ir::kernel::Kernel;
use aot_ir::{Arg as IrArg, Node, Op, OpKind, ScalarValue};
use std::sync::atomic::{AtomicU64, Ordering};

static FUSED: AtomicU64 = AtomicU64::new(0);
static OP_BY_OP: AtomicU64 = AtomicU64::new(0);

/// How many kernels ran fused, and how many op by op, in this process.
pub fn stats() -> (u64, u64) {
    (FUSED.load(Ordering::Relaxed), OP_BY_OP.load(Ordering::Relaxed))
}

/// The value of kernel node `node`. `zeros`: the backward's zero tracking,
/// if on (the kernel's own entry is set here). `over`: an input that dies
/// here and that nothing else holds, whose buffer the fused pass may write
/// its result over (`Storage::fused_over`).
pub(crate) fn run<G: ArgGeometrySource + ?Sized>(
    k: &Kernel,
    node: &Node,
    env: &[Option<Tensor>],
    cx: &Ctx<'_, G>,
    zeros: Option<&mut [bool]>,
    over: Option<usize>,
) -> std::result::Result<Tensor, Stop> {
    let inputs = node.tensor_args().map(|v| get(env, v)).collect::<Result<Vec<_>>>()?;
    let any_zero = zeros.as_ref().is_some_and(|z| node.tensor_args().any(|v| z.get(v.index()).copied().unwrap_or(false)));
    if !any_zero {
        if let Some(t) = fused(k, &inputs, cx.scalars, over) {
            FUSED.fetch_add(1, Ordering::Relaxed);
            return Ok(t?);
        }
    }
    OP_BY_OP.fetch_add(1, Ordering::Relaxed);
    let zin: Vec<bool> = match &zeros {
        Some(z) => node.tensor_args().map(|v| z.get(v.index()).copied().unwrap_or(false)).collect(),
        None => Vec::new(),
    };
    let (t, is_zero) = op_by_op(k, &inputs, &zin, cx.scalars).map_err(|(e, at)| {
        // Named as the failing op's own node would be.
        let stage_node = at.and_then(|v| k.stage_values.get(v.index())).map(|&v| Node { out: Some(v), ..node.clone() });
        blame(e, stage_node.as_ref().unwrap_or(node), &cx.blame)
    })?;
    if let (Some(z), true) = (zeros, is_zero) {
        if let Some(slot) = node.out.and_then(|o| z.get_mut(o.index())) {
            *slot = true;
        }
    }
    Ok(t)
}

/// The kernel's body run op by op (`zin[i]`: input `i` is a tracked
/// zero); the result, and whether it is a tracked zero. An error comes
/// with the body value whose op failed.
fn op_by_op(
    k: &Kernel,
    inputs: &[&Tensor],
    zin: &[bool],
    scalars: &[Option<ScalarValue>],
) -> std::result::Result<(Tensor, bool), (AotError, Option<aot_ir::ValueId>)> {
    let mut local: Vec<Option<Tensor>> = vec![None; k.num_values];
    let mut zero = vec![false; k.num_values];
    let tracking = zin.iter().any(|&z| z);
    for n in &k.body {
        let out = n.value().index();
        let t = match &n.op {
            Op::Load(i) => {
                zero[out] = zin.get(*i).copied().unwrap_or(false);
                (*inputs.get(*i).ok_or_else(|| (internal(format!("kernel `{}` has no input {i}", k.name)), None))?).clone()
            }
            Op::Dsl { op, .. } => {
                let at = |e: AotError| (e, n.out);
                let t = exec_node(*op, &n.args, local.as_slice(), scalars).map_err(at)?;
                if tracking && zero_result(n, &zero) {
                    zero[out] = true;
                    t.storage_as_1d().zeros_like().map_err(at)?.alias_with_layout(t.layout())
                } else {
                    t
                }
            }
            other => return Err((internal(format!("`{}` in the body of kernel `{}`", other.name(), k.name)), None)),
        };
        *local.get_mut(out).ok_or_else(|| (internal(format!("kernel `{}`: value {out} out of range", k.name)), None))? = Some(t);
    }
    let t = get(&local, k.out).map_err(|e| (e, None))?.clone();
    Ok((t, zero.get(k.out.index()).copied().unwrap_or(false)))
}

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "kernel", msg }
}

/// The kernel fused on its inputs' backend; `None` where [`plan`] finds
/// it outside what the fused path computes as eager does, or the backend
/// declines.
fn fused(k: &Kernel, inputs: &[&Tensor], scalars: &[Option<ScalarValue>], over: Option<usize>) -> Option<Result<Tensor>> {
    let (steps, out, loaded) = plan(k, inputs, scalars)?;
    let program = FusedProgram { steps: &steps, num_values: k.num_values, stored: k.out.index() };
    let operands: Vec<(&Storage, Layout)> =
        inputs.iter().zip(&loaded).map(|(t, l)| (&**t.storage(), broadcast_layout(l, &out.shape))).collect();
    let storage = over
        .and_then(|i| Storage::fused_over("fused kernel", &program, &operands, i, &out))
        .or_else(|| Storage::fused("fused kernel", &program, &operands, &out))?;
    Some(storage.map(|s| Tensor::from_storage(s, out)))
}

/// The fused program, eager's layout of the result and the inputs' layouts
/// (read once), when every input has one float dtype and the shapes
/// broadcast.
fn plan(k: &Kernel, inputs: &[&Tensor], scalars: &[Option<ScalarValue>]) -> Option<(Vec<FusedStep>, Layout, Vec<Layout>)> {
    let dtype = inputs.first()?.dtype();
    if !dtype.is_float() || inputs.iter().any(|t| t.dtype() != dtype) {
        return None;
    }
    let mut layouts: Vec<Option<Layout>> = vec![None; k.num_values];
    let mut steps = Vec::with_capacity(k.body.len());
    for n in &k.body {
        let out = n.out?.index();
        let layout = match &n.op {
            Op::Load(i) => inputs.get(*i)?.layout(),
            Op::Dsl { op, .. } => {
                let a = n.args.first()?.as_tensor()?.index();
                let la = layouts.get(a)?.as_ref()?;
                let (rhs, layout) = match n.args.get(1) {
                    None => (FusedRhs::None, elementwise_layout(&la.shape, &[la])),
                    Some(IrArg::Tensor(b)) => {
                        let lb = layouts.get(b.index())?.as_ref()?;
                        let shape = broadcast_shapes(op.name(), &la.shape, &lb.shape).ok()?;
                        (FusedRhs::Value(b.index()), elementwise_layout(&shape, &[la, lb]))
                    }
                    Some(arg) => {
                        let v = match scalar(Some(arg), scalars).ok()? {
                            ScalarValue::F64(v) => v,
                            ScalarValue::I64(v) => v as f64,
                            ScalarValue::Bool(v) => f64::from(u8::from(v)),
                        };
                        (FusedRhs::Scalar(v), scalar_result_layout(binary_op(*op)?, la))
                    }
                };
                steps.push(FusedStep { op: *op, a, rhs, out });
                layout
            }
            _ => return None,
        };
        *layouts.get_mut(out)? = Some(layout);
    }
    let out = layouts.get(k.out.index())?.clone()?;
    // The loads are the body's first values, in input order (verified).
    let loaded = layouts.into_iter().take(inputs.len()).collect::<Option<Vec<Layout>>>()?;
    Some((steps, out, loaded))
}

/// The binary op of a DSL op that takes a scalar operand.
fn binary_op(op: OpKind) -> Option<BinaryOp> {
    Some(match op {
        OpKind::Add => BinaryOp::Add,
        OpKind::Sub => BinaryOp::Sub,
        OpKind::Mul => BinaryOp::Mul,
        OpKind::Div => BinaryOp::Div,
        OpKind::Pow => BinaryOp::Pow,
        OpKind::Maximum => BinaryOp::Maximum,
        OpKind::Minimum => BinaryOp::Minimum,
        _ => return None,
    })
}
