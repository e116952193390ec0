//! Eager backward by the shared gradient table: [`Eval`] is the
//! `GradBuilder` that computes each value a rule of
//! `aot_ir::transform::grad_rules` asks for on tensors, at once, grad mode
//! off (the engine runs backward under `NoGradGuard`). The joint graph is
//! built from the very same rules, so eager and compiled gradients are the
//! same formulas, op for op, and both run each op through the one
//! dispatcher (`crate::eval::dispatch`).
//!
//! A rule reads the recorded op's inputs and output through [`Slot`]s:
//! values saved at record time are read through their version check only
//! when the rule reads their data, so an input modified in place after the
//! op fails backward exactly when its value is needed (PyTorch's saved
//! tensor semantics); of inputs whose metadata alone was kept, the rule may
//! read only the shape and dtype.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::eval::dispatch::{self, ArgGeometrySource, Values};
use crate::eval::prims::{eval_prim, is_shape_only_arg, meta_of};
use crate::eval::view_prims::eval_view_prim;
use crate::layout::Layout;
use crate::tensor::SavedTensor;
use crate::tensor::Tensor;
use aot_ir::transform::grad_rules::{mutate_vjp, op_vjp, GradBuilder, MutateSite, OutRef, Prim, RuleError};
use aot_ir::transform::ChainStep;
use aot_ir::{Arg as IrArg, OpKind, ValueId};
use std::borrow::Cow;

/// A value of the recorded op, as the rule may read it.
pub(crate) enum Slot<'a> {
    /// Saved at record time: its data is read through the version check.
    Saved(&'a SavedTensor),
    /// Only the shape and dtype were kept.
    Meta { shape: Vec<usize>, dtype: DType },
    /// Not kept: no rule of the op reads it.
    Absent,
}

enum Value<'a> {
    Slot(Slot<'a>),
    Ready(Tensor),
}

/// Why a value could not be computed.
pub(crate) struct EvalError(pub(crate) AotError);

impl From<AotError> for EvalError {
    fn from(e: AotError) -> Self {
        EvalError(e)
    }
}

/// A rule refusing on a recorded op means the record and the table
/// disagree: an internal error.
impl From<RuleError> for EvalError {
    fn from(msg: RuleError) -> Self {
        EvalError(AotError::internal("backward", msg))
    }
}

/// Computes a rule's values on tensors.
pub(crate) struct Eval<'a> {
    /// The backward node's name, for saved-tensor errors.
    node: &'static str,
    device: Device,
    values: Vec<Value<'a>>,
}

/// A recorded op, as its rule sees it: `op(args..) = out`, where the tensor
/// arguments name `inputs` in order (`ValueId(i)` is `inputs[i]`).
pub(crate) struct RuleCall<'a> {
    pub(crate) op: OpKind,
    pub(crate) args: Vec<IrArg>,
    pub(crate) inputs: Vec<Slot<'a>>,
    pub(crate) out: Slot<'a>,
    /// Per edge of the node, the argument position whose gradient it gets.
    pub(crate) edges: Vec<usize>,
    /// `op` overwrites its receiver in place (`copy_`, `fill_`, `zero_`):
    /// its rule is the table's mutation rule, on the whole receiver.
    pub(crate) overwrites: bool,
}

impl RuleCall<'_> {
    /// Input gradients for output gradient `g`, one per edge; `needs[i]`
    /// says whether edge `i` wants one. `None` means zero.
    pub(crate) fn run(self, node: &'static str, g: &Tensor, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let mut e = Eval { node, device: g.device(), values: self.inputs.into_iter().map(Value::Slot).collect() };
        let out = e.push(Value::Slot(self.out));
        let gv = e.push(Value::Ready(g.clone()));
        let need = |edge: usize| needs.get(edge).copied().unwrap_or(false);
        let mut arg_needs = vec![false; self.args.len()];
        for (edge, &pos) in self.edges.iter().enumerate() {
            if let Some(slot) = arg_needs.get_mut(pos) {
                *slot = need(edge);
            }
        }
        let grads = if self.overwrites {
            let site = MutateSite { op: self.op, root: ValueId(0), out, chain: &[], args: &self.args };
            mutate_vjp(&mut e, &site, gv, &arg_needs)
        } else {
            op_vjp(&mut e, self.op, &self.args, &OutRef::Value(out), gv, &arg_needs)
        };
        let grads = grads.map_err(|err| err.0)?;
        let grad = |edge: usize, pos: usize| match grads.get(pos).copied().flatten() {
            Some(v) if need(edge) => e.data(v).map(Some),
            _ => Ok(None),
        };
        self.edges.iter().enumerate().map(|(edge, &pos)| grad(edge, pos)).collect()
    }
}

impl<'a> Eval<'a> {
    fn push(&mut self, v: Value<'a>) -> ValueId {
        self.values.push(v);
        ValueId(self.values.len() as u32 - 1)
    }

    fn value(&self, v: ValueId) -> Result<&Value<'a>> {
        self.values.get(v.index()).ok_or_else(|| AotError::internal("backward", format!("value {v} was never computed")))
    }

    /// The value of `v`, for a read of its data.
    fn data(&self, v: ValueId) -> Result<Tensor> {
        match self.value(v)? {
            Value::Ready(t) => Ok(t.clone()),
            Value::Slot(Slot::Saved(s)) => s.get(self.node),
            Value::Slot(_) => Err(AotError::internal(self.node, format!("the rule reads value {v}, which was not saved"))),
        }
    }

    /// `v`, or a stand-in with its shape and dtype, for a read of its
    /// metadata only (no version check: PyTorch checks only what it unpacks).
    fn meta(&self, v: ValueId) -> Result<Tensor> {
        match self.value(v)? {
            Value::Ready(t) => Ok(t.clone()),
            Value::Slot(Slot::Saved(s)) => Ok(s.t.clone()),
            Value::Slot(Slot::Meta { shape, dtype }) => meta_of(shape, *dtype, &self.device),
            Value::Slot(Slot::Absent) => Err(AotError::internal(self.node, format!("the rule reads value {v}, which was not kept"))),
        }
    }
}

/// A rule's tensors, read through [`Eval::data`] (the saved values'
/// version checks).
impl Values for Eval<'_> {
    fn tensor(&self, v: ValueId) -> Result<Cow<'_, Tensor>> {
        match self.value(v)? {
            Value::Ready(t) => Ok(Cow::Borrowed(t)),
            _ => self.data(v).map(Cow::Owned),
        }
    }
}

/// Eager view chains have no call-time geometry.
struct NoArgGeometry;

impl ArgGeometrySource for NoArgGeometry {
    fn arg_layout(&self, _: usize) -> Result<Layout> {
        Err(AotError::internal("backward", "an eager view chain placed by argument geometry"))
    }
}

/// A view chain replayed on `t` (eager rules' scalars are constants).
fn replay(t: &Tensor, chain: &[ChainStep]) -> Result<Tensor> {
    dispatch::replay(t, chain, &NoArgGeometry, &[])
}

impl GradBuilder for Eval<'_> {
    type Error = EvalError;

    fn op(&mut self, op: OpKind, args: Vec<IrArg>) -> std::result::Result<ValueId, EvalError> {
        let t = match (op, args.first()) {
            // `zeros_like` and friends read their receiver's metadata only
            (OpKind::ZerosLike | OpKind::OnesLike | OpKind::FullLike, Some(IrArg::Tensor(v))) => {
                let x = self.meta(*v)?;
                dispatch::exec(op, &x, &args[1..], self, &[])?
            }
            _ => dispatch::exec_node(op, &args, self, &[])?,
        };
        Ok(self.push(Value::Ready(t)))
    }

    fn prim(&mut self, p: Prim, args: Vec<IrArg>) -> std::result::Result<ValueId, EvalError> {
        let tensors = args
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                IrArg::Tensor(v) if is_shape_only_arg(&p, i) => self.meta(*v).map(Some),
                IrArg::Tensor(v) => self.data(*v).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let t = match p {
            Prim::ViewGrad(_) | Prim::ViewOf(_) | Prim::ViewScatter(_) => eval_view_prim(&p, &tensors, &replay)?,
            _ => eval_prim(&p, &args, &tensors, &[])?,
        };
        Ok(self.push(Value::Ready(t)))
    }

    /// Eager outputs are values: a recorded op's rule never regenerates one.
    fn regen(&mut self, _root: ValueId, _chain: &[ChainStep]) -> std::result::Result<ValueId, EvalError> {
        Err(AotError::internal(self.node, "an eager rule asked for a regenerated view").into())
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Result;
    use crate::{DType, Device, Tensor};

    fn tensor(v: &[f64], shape: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap()
    }

    fn leaf(v: &[f64], shape: &[usize]) -> Tensor {
        tensor(v, shape).requires_grad_(true).unwrap()
    }

    /// A saved operand is read through its version check only when a
    /// needed gradient reads its data: `t * u` with `t` modified in place
    /// afterwards still differentiates w.r.t. `t` (which reads only `u`),
    /// and fails once `u` is modified instead.
    #[test]
    fn saved_operand_is_checked_only_when_read() -> Result<()> {
        let w = leaf(&[1.0, 2.0], &[2]);
        let t = w.mul(1.0)?;
        let u = tensor(&[3.0, 5.0], &[2]);
        let z = t.mul(&u)?;
        t.add_(1.0)?;
        z.sum()?.backward()?;
        assert_eq!(w.grad().unwrap().to_vec::<f64>()?, vec![3.0, 5.0]);

        let z = w.mul(&u)?;
        u.add_(1.0)?;
        let err = z.sum()?.backward().unwrap_err().to_string();
        assert!(err.contains("modified by an inplace operation") && err.contains("MulBackward0"), "{err}");
        Ok(())
    }

    /// `matmul` keeps only the operand the other's gradient reads; the
    /// rule reads the other one's shape and dtype from the record.
    #[test]
    fn matmul_reads_only_the_kept_operand() -> Result<()> {
        let w = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let a = w.mul(1.0)?;
        let m = tensor(&[1.0, 0.0, 2.0, 1.0, 0.0, 3.0], &[3, 2]);
        let z = a.matmul(&m)?;
        a.add_(1.0)?;
        z.sum()?.backward()?;
        // d sum(a @ m) / da = ones(2, 2) @ m^T: each row is m's row sums
        assert_eq!(w.grad().unwrap().to_vec::<f64>()?, vec![1.0, 3.0, 3.0, 1.0, 3.0, 3.0]);
        assert_eq!(w.grad().unwrap().shape(), vec![2, 3]);
        Ok(())
    }

    /// The selecting views' rule scatters the gradient into the input's
    /// shape by replaying the view on element indices.
    #[test]
    fn selecting_views_scatter_their_gradient() -> Result<()> {
        let x = leaf(&[0.0; 9], &[3, 3]);
        let d = x.diagonal()?.sum()?;
        let r = x.select(0, 1)?.sum()?.mul(2.0)?;
        let c = x.slice(1, 0, 3, 2)?.sum()?.mul(3.0)?;
        d.add(&r)?.add(&c)?.backward()?;
        assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![4.0, 0.0, 3.0, 5.0, 3.0, 5.0, 3.0, 0.0, 4.0]);
        assert_eq!(x.diagonal()?.grad_fn_name(), Some("DiagonalBackward0"));
        Ok(())
    }

    /// Ops that keep only metadata (add with broadcasting, a cast) get
    /// their gradient's shape and dtype from stand-ins.
    #[test]
    fn metadata_only_records_shape_and_cast_the_gradient() -> Result<()> {
        let x = leaf(&[1.0, 2.0, 3.0], &[3]);
        let y = leaf(&[1.0, 2.0], &[2, 1]);
        let z = x.to_dtype(DType::F32)?.add(&y.to_dtype(DType::F32)?)?;
        z.sum()?.backward()?;
        let (gx, gy) = (x.grad().unwrap(), y.grad().unwrap());
        assert_eq!((gx.dtype(), gx.shape(), gx.to_vec::<f64>()?), (DType::F64, vec![3], vec![2.0; 3]));
        assert_eq!((gy.dtype(), gy.shape(), gy.to_vec::<f64>()?), (DType::F64, vec![2, 1], vec![3.0; 2]));
        Ok(())
    }
}
