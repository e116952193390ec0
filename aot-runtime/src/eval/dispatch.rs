//! The one dispatcher: the single place that maps an [`OpKind`] and its IR
//! arguments to the eager `Tensor` op that computes it.
//!
//! Every executor runs its ops through [`exec`]: the source interpreter
//! (`executor::interp`), the functional executor, the joint executor, and
//! eager backward's gradient rules (`autograd::grad_eval`). View chains are
//! replayed by applying it to each step ([`replay`]). Each caller supplies
//! its tensors through [`Values`] (an environment indexed by value, or
//! eager backward's saved values behind their version checks), so no
//! caller builds a node or clones arguments to run one.

use crate::arg::Arg;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::layout::Layout;
use crate::ops::Operand;
use crate::tensor::Tensor;
use aot_ir::transform::ChainStep;
use aot_ir::{Arg as IrArg, OpKind, ScalarValue, ValueId};
use std::borrow::Cow;

/// Where the dispatcher reads the tensor of an `IrArg::Tensor(v)`.
pub(crate) trait Values {
    /// The tensor of value `v`, borrowed where the environment holds it.
    fn tensor(&self, v: ValueId) -> Result<Cow<'_, Tensor>>;
}

/// An executor's environment: value `v` is `self[v]` once computed.
impl Values for [Option<Tensor>] {
    fn tensor(&self, v: ValueId) -> Result<Cow<'_, Tensor>> {
        self.get(v.index())
            .and_then(Option::as_ref)
            .map(Cow::Borrowed)
            .ok_or_else(|| AotError::Internal { op: "executor", msg: format!("value {v} used before it was computed") })
    }
}

/// Runs `op` on `args` (the receiver first, as in the source); in-place
/// ops return their (mutated) receiver.
pub(crate) fn exec_node(op: OpKind, args: &[IrArg], env: &(impl Values + ?Sized), scalars: &[Option<ScalarValue>]) -> Result<Tensor> {
    let x = match args.first() {
        Some(IrArg::Tensor(v)) => env.tensor(*v)?,
        _ => return Err(AotError::Internal { op: op.name(), msg: "argument 0 is not a tensor".into() }),
    };
    exec(op, &x, args.get(1..).unwrap_or(&[]), env, scalars)
}

/// A view chain replayed on `root`: [`exec`] applied to each step.
pub(crate) fn replay(
    root: &Tensor,
    chain: &[ChainStep],
    geometry: &(impl ArgGeometrySource + ?Sized),
    scalars: &[Option<ScalarValue>],
) -> Result<Tensor> {
    let mut t = root.clone();
    for step in chain {
        t = match step {
            ChainStep::ArgGeometry(p) => {
                let l = geometry.arg_layout(*p)?;
                // An argument over the group's bytes as another dtype.
                let dtype = geometry.arg_dtype(*p).unwrap_or(t.dtype());
                t.as_strided_dtype(dtype, &l.shape, &l.stride, l.offset)?
            }
            // A view whose geometry comes from another tensor (`view_as`)
            // cannot be replayed from the chain alone.
            ChainStep::View { op, args } if args.iter().any(|a| a.as_tensor().is_some()) => {
                return Err(AotError::Unsupported {
                    op: op.name(),
                    msg: format!("a write through a `{op}` view is not supported yet: write through `view(&[..])` instead"),
                })
            }
            ChainStep::View { op, args } => exec(*op, &t, args, NO_VALUES, scalars)?,
        };
    }
    Ok(t)
}

/// A chain's steps name no tensor but their receiver.
const NO_VALUES: &[Option<Tensor>] = &[];

/// Where `ChainStep::ArgGeometry` finds an argument's geometry: the call's
/// arguments themselves, or (for a backward that runs later, after the
/// epilogue may have changed their metadata) their layouts at call time.
pub(crate) trait ArgGeometrySource {
    fn arg_layout(&self, p: usize) -> Result<Layout>;
    /// The argument's dtype, where known (else its group base's).
    fn arg_dtype(&self, _p: usize) -> Option<crate::dtype::DType> {
        None
    }
}

impl ArgGeometrySource for [Arg<'_>] {
    fn arg_layout(&self, p: usize) -> Result<Layout> {
        self.get(p)
            .and_then(Arg::tensor)
            .map(Tensor::layout)
            .ok_or_else(|| AotError::Internal { op: "compiled call", msg: format!("argument {p} is not a tensor") })
    }
    fn arg_dtype(&self, p: usize) -> Option<crate::dtype::DType> {
        self.get(p).and_then(Arg::tensor).map(Tensor::dtype)
    }
}

impl ArgGeometrySource for [Option<Layout>] {
    fn arg_layout(&self, p: usize) -> Result<Layout> {
        self.get(p)
            .cloned()
            .flatten()
            .ok_or_else(|| AotError::Internal { op: "compiled call", msg: format!("no geometry for argument {p}") })
    }
}

/// A resolved tensor-or-scalar operand, owning what the environment lent.
enum Rhs<'e> {
    Tensor(Cow<'e, Tensor>),
    Scalar(ScalarValue),
}

impl Rhs<'_> {
    fn get(&self) -> Operand<'_> {
        match self {
            Rhs::Tensor(t) => Operand::Tensor(t),
            Rhs::Scalar(ScalarValue::F64(v)) => Operand::from(*v),
            Rhs::Scalar(ScalarValue::I64(v)) => Operand::from(*v),
            Rhs::Scalar(ScalarValue::Bool(v)) => Operand::from(*v),
        }
    }
}

/// The arguments after the receiver; `arg(i)` is argument `i` of the op
/// (the receiver is argument 0), so errors number them as the source does.
struct Ctx<'e, E: Values + ?Sized> {
    op: OpKind,
    rest: &'e [IrArg],
    env: &'e E,
    scalars: &'e [Option<ScalarValue>],
}

impl<'e, E: Values + ?Sized> Ctx<'e, E> {
    fn bad(&self, msg: impl Into<String>) -> AotError {
        AotError::Unsupported { op: self.op.name(), msg: msg.into() }
    }

    fn internal(&self, msg: String) -> AotError {
        AotError::Internal { op: self.op.name(), msg }
    }

    fn arg(&self, i: usize) -> Result<&'e IrArg> {
        i.checked_sub(1).and_then(|j| self.rest.get(j)).ok_or_else(|| self.internal(format!("missing argument {i}")))
    }

    fn tensor(&self, i: usize) -> Result<Cow<'e, Tensor>> {
        match self.arg(i)? {
            IrArg::Tensor(v) => self.env.tensor(*v),
            _ => Err(self.internal(format!("argument {i} is not a tensor"))),
        }
    }

    fn scalar(&self, i: usize) -> Result<ScalarValue> {
        match self.arg(i)? {
            IrArg::Scalar(s) => s.eval(self.scalars).map_err(|e| self.bad(e.to_string())),
            _ => Err(self.internal(format!("argument {i} is not a scalar"))),
        }
    }

    fn operand(&self, i: usize) -> Result<Rhs<'e>> {
        Ok(match self.arg(i)? {
            IrArg::Tensor(_) => Rhs::Tensor(self.tensor(i)?),
            _ => Rhs::Scalar(self.scalar(i)?),
        })
    }

    fn float(&self, i: usize) -> Result<f64> {
        match self.scalar(i)? {
            ScalarValue::F64(v) => Ok(v),
            ScalarValue::I64(v) => Ok(v as f64),
            ScalarValue::Bool(_) => Err(self.bad("expected a number, got a bool")),
        }
    }

    fn int(&self, i: usize) -> Result<i64> {
        match self.scalar(i)? {
            ScalarValue::I64(v) => Ok(v),
            other => Err(self.bad(format!("expected an integer, got {other}"))),
        }
    }

    fn boolean(&self, i: usize) -> Result<bool> {
        match self.scalar(i)? {
            ScalarValue::Bool(v) => Ok(v),
            other => Err(self.bad(format!("expected a bool, got {other}"))),
        }
    }

    fn ints(&self, i: usize) -> Result<Vec<i64>> {
        match self.arg(i)? {
            IrArg::Ints(items) => items
                .iter()
                .map(|s| match s.eval(self.scalars).map_err(|e| self.bad(e.to_string()))? {
                    ScalarValue::I64(v) => Ok(v),
                    other => Err(self.bad(format!("expected an integer, got {other}"))),
                })
                .collect(),
            _ => Err(self.internal(format!("argument {i} is not an integer list"))),
        }
    }

    fn usizes(&self, i: usize) -> Result<Vec<usize>> {
        self.ints(i)?
            .into_iter()
            .map(|v| usize::try_from(v).map_err(|_| self.bad(format!("expected a non-negative size, got {v}"))))
            .collect()
    }

    fn usize(&self, i: usize) -> Result<usize> {
        let v = self.int(i)?;
        usize::try_from(v).map_err(|_| self.bad(format!("expected a non-negative offset, got {v}")))
    }

    fn dtype(&self, i: usize) -> Result<DType> {
        match self.arg(i)? {
            IrArg::DType(d) => Ok(*d),
            _ => Err(self.internal(format!("argument {i} is not a dtype"))),
        }
    }
}

/// Runs `op` on receiver `x` and the arguments after it (`rest`, which
/// name tensors of `env` and read the call's `scalars`); in-place ops
/// return their (mutated) receiver.
pub(crate) fn exec(
    op: OpKind,
    x: &Tensor,
    rest: &[IrArg],
    env: &(impl Values + ?Sized),
    scalars: &[Option<ScalarValue>],
) -> Result<Tensor> {
    use OpKind as K;
    let c = Ctx { op, rest, env, scalars };
    match op {
        K::Add => x.add(c.operand(1)?.get()),
        K::Sub => x.sub(c.operand(1)?.get()),
        K::Mul => x.mul(c.operand(1)?.get()),
        K::Div => x.div(c.operand(1)?.get()),
        K::Pow => x.pow(c.operand(1)?.get()),
        K::Maximum => x.maximum(c.operand(1)?.get()),
        K::Minimum => x.minimum(c.operand(1)?.get()),
        K::Eq => x.eq(c.operand(1)?.get()),
        K::Ne => x.ne(c.operand(1)?.get()),
        K::Lt => x.lt(c.operand(1)?.get()),
        K::Le => x.le(c.operand(1)?.get()),
        K::Gt => x.gt(c.operand(1)?.get()),
        K::Ge => x.ge(c.operand(1)?.get()),
        K::Where => x.where_(&*c.tensor(1)?, c.operand(2)?.get()),
        K::Neg => x.neg(),
        K::Exp => x.exp(),
        K::Log => x.log(),
        K::Sqrt => x.sqrt(),
        K::Rsqrt => x.rsqrt(),
        K::Abs => x.abs(),
        K::Sin => x.sin(),
        K::Cos => x.cos(),
        K::Tanh => x.tanh(),
        K::Sigmoid => x.sigmoid(),
        K::Relu => x.relu(),
        K::Gelu => x.gelu(),
        K::Silu => x.silu(),
        K::Reciprocal => x.reciprocal(),
        K::Square => x.square(),
        K::Sum => x.sum(),
        K::Mean => x.mean(),
        K::SumDim => x.sum_dim(&c.ints(1)?, c.boolean(2)?),
        K::MeanDim => x.mean_dim(&c.ints(1)?, c.boolean(2)?),
        K::AmaxDim => x.amax_dim(&c.ints(1)?, c.boolean(2)?),
        K::VarDim => x.var_dim(&c.ints(1)?, c.int(2)?, c.boolean(3)?),
        K::Softmax => x.softmax(c.int(1)?),
        K::LogSoftmax => x.log_softmax(c.int(1)?),
        K::Matmul => x.matmul(&*c.tensor(1)?),
        K::Mm => x.mm(&*c.tensor(1)?),
        K::Bmm => x.bmm(&*c.tensor(1)?),
        K::View => x.view(&c.ints(1)?),
        K::Reshape => x.reshape(&c.ints(1)?),
        K::T => x.t(),
        K::Transpose => x.transpose(c.int(1)?, c.int(2)?),
        K::Permute => x.permute(&c.ints(1)?),
        K::Unsqueeze => x.unsqueeze(c.int(1)?),
        K::Squeeze => x.squeeze(c.int(1)?),
        K::Expand => x.expand(&c.ints(1)?),
        K::Select => x.select(c.int(1)?, c.int(2)?),
        K::Slice => x.slice(c.int(1)?, c.int(2)?, c.int(3)?, c.int(4)?),
        K::Narrow => x.narrow(c.int(1)?, c.int(2)?, c.int(3)?),
        K::Diagonal => x.diagonal(),
        K::AsStrided => x.as_strided(&c.usizes(1)?, &c.usizes(2)?, c.usize(3)?),
        K::Detach => x.detach(),
        K::AddInplace => x.add_(c.operand(1)?.get()),
        K::SubInplace => x.sub_(c.operand(1)?.get()),
        K::MulInplace => x.mul_(c.operand(1)?.get()),
        K::DivInplace => x.div_(c.operand(1)?.get()),
        K::CopyInplace => x.copy_(&*c.tensor(1)?),
        K::Fill => x.fill_(c.float(1)?),
        K::Zero => x.zero_(),
        K::Clamp => x.clamp_(c.float(1)?, c.float(2)?),
        K::ReluInplace => x.relu_(),
        K::SigmoidInplace => x.sigmoid_(),
        K::ExpInplace => x.exp_(),
        K::NegInplace => x.neg_(),
        K::TInplace => x.t_(),
        K::TransposeInplace => x.transpose_(c.int(1)?, c.int(2)?),
        K::UnsqueezeInplace => x.unsqueeze_(c.int(1)?),
        K::SqueezeInplace => x.squeeze_(c.int(1)?),
        K::AsStridedInplace => x.as_strided_(&c.usizes(1)?, &c.usizes(2)?, c.usize(3)?),
        K::Copy => x.copy(),
        K::Contiguous => x.contiguous(),
        K::ToDtype => x.to_dtype(c.dtype(1)?),
        K::ZerosLike => x.zeros_like(),
        K::OnesLike => x.ones_like(),
        K::FullLike => x.full_like(c.float(1)?),
        K::RandLike => x.rand_like(),
        K::Dropout => x.dropout(c.float(1)?),
        K::Log1p | K::Expm1 | K::ClampOut | K::MaskedFill | K::Tril | K::Triu | K::Cumsum | K::Flatten | K::ViewAs => exec_models(x, &c),
        K::Argmax | K::Argmin | K::MaxDim | K::MinDim | K::CrossEntropy | K::NllLoss => exec_models(x, &c),
        K::IndexSelect | K::Gather | K::ScatterAdd | K::Embedding | K::IndexCopy | K::IndexAdd => exec_models(x, &c),
        K::IndexCopyInplace | K::IndexAddInplace | K::Cat | K::Stack => exec_models(x, &c),
        // a factory: `x` gives the device only
        K::Arange => Tensor::arange(c.float(1)?, c.float(2)?, c.float(3)?, c.dtype(4)?, &x.device()),
    }
}

/// [`exec`] of the ops for models (indexing, scans, masks,
/// losses, `cat`/`stack`).
fn exec_models(x: &Tensor, c: &Ctx<'_, impl Values + ?Sized>) -> Result<Tensor> {
    use OpKind as K;
    let (op, rest) = (c.op, c.rest);
    match op {
        K::Log1p => x.log1p(),
        K::Expm1 => x.expm1(),
        K::ClampOut => x.clamp(c.float(1)?, c.float(2)?),
        K::MaskedFill => x.masked_fill(&*c.tensor(1)?, c.float(2)?),
        K::Tril => x.tril(c.int(1)?),
        K::Triu => x.triu(c.int(1)?),
        K::Cumsum => x.cumsum(c.int(1)?),
        K::Flatten => x.flatten(c.int(1)?, c.int(2)?),
        K::ViewAs => x.view_as(&*c.tensor(1)?),
        K::Argmax => x.argmax(c.int(1)?, c.boolean(2)?),
        K::Argmin => x.argmin(c.int(1)?, c.boolean(2)?),
        // The values; the DSL computes the indices with `argmax`/`argmin`.
        K::MaxDim => x.max_dim(c.int(1)?, c.boolean(2)?).map(|(v, _)| v),
        K::MinDim => x.min_dim(c.int(1)?, c.boolean(2)?).map(|(v, _)| v),
        K::CrossEntropy => x.cross_entropy(&*c.tensor(1)?),
        K::NllLoss => x.nll_loss(&*c.tensor(1)?),
        K::IndexSelect => x.index_select(c.int(1)?, &*c.tensor(2)?),
        K::Gather => x.gather(c.int(1)?, &*c.tensor(2)?),
        K::ScatterAdd => x.scatter_add(c.int(1)?, &*c.tensor(2)?, &*c.tensor(3)?),
        K::Embedding => x.embedding(&*c.tensor(1)?),
        K::IndexCopy => x.index_copy(c.int(1)?, &*c.tensor(2)?, &*c.tensor(3)?),
        K::IndexAdd => x.index_add(c.int(1)?, &*c.tensor(2)?, &*c.tensor(3)?),
        K::IndexCopyInplace => x.index_copy_(c.int(1)?, &*c.tensor(2)?, &*c.tensor(3)?),
        K::IndexAddInplace => x.index_add_(c.int(1)?, &*c.tensor(2)?, &*c.tensor(3)?),
        K::Cat | K::Stack => {
            // the list is spread: `x` and the tensors of `rest` before the dim
            let n = op.sig().list_len(rest.len() + 1);
            let others = (1..n).map(|k| c.tensor(k)).collect::<Result<Vec<_>>>()?;
            let mut list = vec![x];
            list.extend(others.iter().map(|t| &**t));
            let dim = c.int(n)?;
            if op == K::Cat {
                Tensor::cat(&list, dim)
            } else {
                Tensor::stack(&list, dim)
            }
        }
        _ => Err(c.internal(format!("`{op}` is not an op for models"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use aot_ir::graph::args::{b, dtype, f, i, ints, t};
    use aot_ir::ScalarExpr;

    fn m23() -> Tensor {
        Tensor::from_vec((0..6).map(|v| v as f64 * 0.5 - 1.0).collect::<Vec<_>>(), &[2, 3], &Device::Cpu).unwrap()
    }

    fn vals(t: &Tensor) -> (Vec<usize>, Vec<usize>, usize, DType, Vec<f64>) {
        (t.shape(), t.stride(), t.storage_offset(), t.dtype(), t.to_vec::<f64>().unwrap())
    }

    /// The dispatcher computes what the eager method computes, for
    /// tensor, scalar, integer-list, bool and dtype arguments; arguments
    /// name the environment's values.
    #[test]
    fn ops_run_the_eager_method() {
        let (x, y) = (m23(), m23().mul(2.0).unwrap());
        let env = [Some(x.clone()), Some(y.clone())];
        let env = &env[..];
        let run = |op, args: &[IrArg]| exec_node(op, args, env, &[]).unwrap();
        let v0 = ValueId(0);
        let v1 = ValueId(1);
        assert_eq!(vals(&run(OpKind::Sub, &[t(v0), t(v1)])), vals(&x.sub(&y).unwrap()));
        assert_eq!(vals(&run(OpKind::Pow, &[t(v0), f(2.0)])), vals(&x.pow(2.0).unwrap()));
        let cond = x.gt(0.0).unwrap();
        let env2 = [Some(x.clone()), Some(cond.clone())];
        let w = exec_node(OpKind::Where, &[t(v0), t(v1), f(-7.0)], &env2[..], &[]).unwrap();
        assert_eq!(vals(&w), vals(&x.where_(&cond, -7.0).unwrap()));
        assert_eq!(vals(&run(OpKind::SumDim, &[t(v0), ints(&[1]), b(true)])), vals(&x.sum_dim(&[1], true).unwrap()));
        assert_eq!(vals(&run(OpKind::Narrow, &[t(v0), i(1), i(1), i(2)])), vals(&x.narrow(1, 1, 2).unwrap()));
        assert_eq!(vals(&run(OpKind::ToDtype, &[t(v0), dtype(DType::F32)])), vals(&x.to_dtype(DType::F32).unwrap()));
        // Scalars that are parameters read the call's values.
        let p = IrArg::Scalar(ScalarExpr::Param(0));
        let r = exec_node(OpKind::Mul, &[t(v0), p], env, &[Some(ScalarValue::F64(3.0))]).unwrap();
        assert_eq!(vals(&r), vals(&x.mul(3.0).unwrap()));
        // An in-place op returns its receiver, written.
        let r = run(OpKind::AddInplace, &[t(v0), f(1.0)]);
        assert!(r.shares_storage_with(&x));
        assert_eq!(x.to_vec::<f64>().unwrap(), vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
    }

    /// `cat` and `stack` read their spread list (every tensor before the
    /// dim); the index ops read their index tensors.
    #[test]
    fn static_and_index_ops_run_the_eager_method() {
        let (x, y) = (m23(), m23().mul(2.0).unwrap());
        let idx = Tensor::from_vec(vec![2i64, 0], &[2], &crate::Device::Cpu).unwrap();
        let rows = Tensor::from_vec(vec![1i64, 1], &[2], &crate::Device::Cpu).unwrap();
        let env = [Some(x.clone()), Some(y.clone()), Some(idx.clone()), Some(rows)];
        let env = &env[..];
        let run = |op, args: &[IrArg]| exec_node(op, args, env, &[]).unwrap();
        let (v0, v1, v2, v3) = (ValueId(0), ValueId(1), ValueId(2), ValueId(3));
        let c = run(OpKind::Cat, &[t(v0), t(v1), t(v0), i(-1)]);
        assert_eq!(vals(&c), vals(&Tensor::cat(&[&x, &y, &x], 1).unwrap()));
        let s = run(OpKind::Stack, &[t(v1), i(0)]);
        assert_eq!(vals(&s), vals(&Tensor::stack(&[&y], 0).unwrap()));
        assert_eq!(vals(&run(OpKind::IndexSelect, &[t(v0), i(1), t(v2)])), vals(&x.index_select(1, &idx).unwrap()));
        let want = vals(&x.index_add(0, &env[3].clone().unwrap(), &y).unwrap());
        let r = run(OpKind::IndexAddInplace, &[t(v0), i(0), t(v3), t(v1)]);
        assert!(r.same_tensor(&x));
        assert_eq!(vals(&x), want);
    }

    /// Errors name the op and the argument by its position in the source
    /// (the receiver is argument 0).
    #[test]
    fn errors_name_op_and_argument() {
        let env = [Some(m23())];
        let env = &env[..];
        let err = exec_node(OpKind::Softmax, &[t(ValueId(0)), f(1.5)], env, &[]).unwrap_err();
        assert!(matches!(err, AotError::Unsupported { op: "softmax", .. }), "{err}");
        assert!(err.to_string().contains("expected an integer"), "{err}");
        let err = exec_node(OpKind::Matmul, &[t(ValueId(0)), f(1.0)], env, &[]).unwrap_err();
        assert!(err.to_string().contains("argument 1 is not a tensor"), "{err}");
        let err = exec_node(OpKind::Add, &[t(ValueId(0)), t(ValueId(3))], env, &[]).unwrap_err();
        assert!(err.to_string().contains("value %3 used before it was computed"), "{err}");
        let err = exec_node(OpKind::Transpose, &[t(ValueId(0)), i(0)], env, &[]).unwrap_err();
        assert!(err.to_string().contains("missing argument 2"), "{err}");
    }

    /// A chain replays each view step through the dispatcher; argument
    /// geometry comes from the source the caller names.
    #[test]
    fn replay_applies_each_view_step() {
        let x = m23();
        let chain = vec![
            ChainStep::View { op: OpKind::T, args: vec![] },
            ChainStep::View { op: OpKind::Select, args: vec![i(1), i(1)] },
            ChainStep::View { op: OpKind::Unsqueeze, args: vec![i(0)] },
        ];
        let r = replay(&x, &chain, &[] as &[Option<Layout>], &[]).unwrap();
        assert_eq!(vals(&r), vals(&x.t().unwrap().select(1, 1).unwrap().unsqueeze(0).unwrap()));
        assert!(r.shares_storage_with(&x));
        let placed = x.narrow(1, 1, 2).unwrap().layout();
        let r = replay(&x, &[ChainStep::ArgGeometry(0)], &[Some(placed.clone())][..], &[]).unwrap();
        assert_eq!(r.layout(), placed);
        assert!(replay(&x, &[ChainStep::ArgGeometry(1)], &[Some(placed)][..], &[]).is_err(), "no geometry for argument 1");
    }
}
