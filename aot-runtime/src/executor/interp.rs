//! The eager reference: runs a graph op by op on real eager tensors.
//!
//! Parameters are bound to the very argument tensors (handle clones), so
//! in-place ops write the caller's tensors, metadata mutations change the
//! caller's tensor objects, views alias for real, and an output that is a
//! parameter is returned as that same tensor. `no_grad` nodes run under the
//! runtime's `NoGradGuard`. This is the semantics compiled execution is
//! tested against.

use crate::arg::{scalar_values, Arg};
use crate::autograd::NoGradGuard;
use crate::dtype::DType;
use crate::error::{AotError, Result};
use crate::ops::Operand;
use crate::tensor::Tensor;
use aot_ir::{Arg as IrArg, Graph, IrDType, Node, OpKind, ScalarValue};

/// Runs `g` on `args` and returns its outputs.
pub(crate) fn run(g: &Graph, args: &[Arg]) -> Result<Vec<Tensor>> {
    run_recording(g, args, &mut Vec::new())
}

/// [`run`], recording per node whether a `reshape`/`contiguous` result
/// aliased its receiver (`None` for other nodes).
pub(crate) fn run_recording(g: &Graph, args: &[Arg], outcomes: &mut Vec<Option<bool>>) -> Result<Vec<Tensor>> {
    use aot_ir::op::AliasEffect;
    outcomes.clear();
    let scalars = scalar_values(g, args)?;
    let mut env: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for (p, a) in g.params.iter().zip(args) {
        if let (Some(v), Some(t)) = (p.value, a.tensor()) {
            env[v.index()] = Some(t.clone());
        }
    }
    for node in &g.nodes {
        let op =
            node.kind().ok_or_else(|| AotError::Internal { op: "interpreter", msg: format!("`{}` in a source graph", node.op.name()) })?;
        let result = {
            let _no_grad = node.no_grad.then(NoGradGuard::new);
            exec(&Ctx { op, args: &node.args, env: &env, scalars: &scalars })
        };
        let t = result.map_err(|e| e.in_function(&g.name, blame(g, node)))?;
        let maybe = matches!(op.alias_effect(), AliasEffect::MaybeView | AliasEffect::MaybeSame);
        let recv = node.receiver().and_then(|r| env.get(r.index()).cloned().flatten());
        outcomes.push(recv.filter(|_| maybe).map(|r| t.shares_storage_with(&r)));
        if let Some(out) = node.out {
            env[out.index()] = Some(t);
        }
    }
    g.outputs
        .iter()
        .map(|v| {
            env.get(v.index())
                .cloned()
                .flatten()
                .ok_or_else(|| AotError::Internal { op: "interpreter", msg: format!("output {v} of `{}` was never computed", g.name) })
        })
        .collect()
}

/// The argument an error at `node` concerns: the first parameter among its
/// tensor operands (the receiver first).
pub(crate) fn blame<'g>(g: &'g Graph, node: &Node) -> Option<&'g str> {
    node.tensor_args().find_map(|v| g.param_of(v)).map(|p| g.params[p].name.as_str())
}

pub(crate) struct Ctx<'a> {
    /// The op, and its arguments (receiver first) as in the source.
    pub(crate) op: OpKind,
    pub(crate) args: &'a [IrArg],
    pub(crate) env: &'a [Option<Tensor>],
    pub(crate) scalars: &'a [Option<ScalarValue>],
}

impl<'a> Ctx<'a> {
    fn op(&self) -> &'static str {
        self.op.name()
    }

    fn bad(&self, msg: impl Into<String>) -> AotError {
        AotError::Unsupported { op: self.op(), msg: msg.into() }
    }

    fn arg(&self, i: usize) -> Result<&'a IrArg> {
        self.args.get(i).ok_or_else(|| AotError::Internal { op: self.op(), msg: format!("missing argument {i}") })
    }

    fn tensor(&self, i: usize) -> Result<&'a Tensor> {
        match self.arg(i)? {
            IrArg::Tensor(v) => self
                .env
                .get(v.index())
                .and_then(Option::as_ref)
                .ok_or_else(|| AotError::Internal { op: self.op(), msg: format!("value {v} used before it was computed") }),
            _ => Err(AotError::Internal { op: self.op(), msg: format!("argument {i} is not a tensor") }),
        }
    }

    fn scalar(&self, i: usize) -> Result<ScalarValue> {
        match self.arg(i)? {
            IrArg::Scalar(s) => s.eval(self.scalars).map_err(|e| self.bad(e.to_string())),
            _ => Err(AotError::Internal { op: self.op(), msg: format!("argument {i} is not a scalar") }),
        }
    }

    fn operand(&self, i: usize) -> Result<Operand<'a>> {
        Ok(match self.arg(i)? {
            IrArg::Tensor(_) => Operand::Tensor(self.tensor(i)?),
            _ => match self.scalar(i)? {
                ScalarValue::F64(v) => Operand::from(v),
                ScalarValue::I64(v) => Operand::from(v),
                ScalarValue::Bool(v) => Operand::from(v),
            },
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
            _ => Err(AotError::Internal { op: self.op(), msg: format!("argument {i} is not an integer list") }),
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
            IrArg::DType(d) => Ok(match d {
                IrDType::F32 => DType::F32,
                IrDType::F64 => DType::F64,
                IrDType::F16 => DType::F16,
                IrDType::BF16 => DType::BF16,
                IrDType::I64 => DType::I64,
                IrDType::Bool => DType::Bool,
            }),
            _ => Err(AotError::Internal { op: self.op(), msg: format!("argument {i} is not a dtype") }),
        }
    }
}

/// Executes one node; in-place ops return their (mutated) receiver.
pub(crate) fn exec(c: &Ctx) -> Result<Tensor> {
    use OpKind as K;
    let x = c.tensor(0)?;
    match c.op {
        K::Add => x.add(c.operand(1)?),
        K::Sub => x.sub(c.operand(1)?),
        K::Mul => x.mul(c.operand(1)?),
        K::Div => x.div(c.operand(1)?),
        K::Pow => x.pow(c.operand(1)?),
        K::Maximum => x.maximum(c.operand(1)?),
        K::Minimum => x.minimum(c.operand(1)?),
        K::Eq => x.eq(c.operand(1)?),
        K::Ne => x.ne(c.operand(1)?),
        K::Lt => x.lt(c.operand(1)?),
        K::Le => x.le(c.operand(1)?),
        K::Gt => x.gt(c.operand(1)?),
        K::Ge => x.ge(c.operand(1)?),
        K::Where => x.where_(c.tensor(1)?, c.operand(2)?),
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
        K::Matmul => x.matmul(c.tensor(1)?),
        K::Mm => x.mm(c.tensor(1)?),
        K::Bmm => x.bmm(c.tensor(1)?),
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
        K::AddInplace => x.add_(c.operand(1)?),
        K::SubInplace => x.sub_(c.operand(1)?),
        K::MulInplace => x.mul_(c.operand(1)?),
        K::DivInplace => x.div_(c.operand(1)?),
        K::CopyInplace => x.copy_(c.tensor(1)?),
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
    }
}
