//! The types of a rendered body: per body value its dtype and the dtype
//! its op computes in ([`KernelTypes`]).
//!
//! The runtime knows them from its plan of the call (eager's promotion,
//! which also depends on which operands are 0-dim tensors) and passes them
//! to [`super::render_cuda_typed`]. [`KernelTypes::infer`] works them out
//! from the inputs' dtypes alone, with eager's promotion between operands
//! that are not 0-dim: comparisons give bool; arithmetic promotes bool <
//! integer < float (f64 over the rest; f16 with bf16 is f32); integer
//! `div` and float functions of integers compute in f32; a literal scalar
//! promotes only a tensor of a lower category (float literals to f32). A
//! reduction keeps its operand's dtype, except that sums of i64 and bool
//! give i64; means, variances and softmaxes take floats only, and amax
//! refuses bools, as eager does.

use super::{KernelDType, RenderError};
use crate::graph::{Op, Prim};
use crate::kernel::elementwise::Comparison;
use crate::kernel::Kernel;
use crate::op::OpKind;
use crate::types::{Arg, IrDType, ScalarValue};

/// Per body value (indexed like the body's values): its dtype, and the
/// dtype its op computes in (a load's: its own; a comparison's: its
/// operands' promotion, while the value is bool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTypes {
    /// Per body value, its dtype.
    pub values: Vec<KernelDType>,
    /// Per body value, the dtype its op computes in.
    pub compute: Vec<KernelDType>,
}

fn category(d: KernelDType) -> u8 {
    match d {
        KernelDType::Bool => 0,
        KernelDType::I64 => 1,
        _ => 2,
    }
}

/// `torch.promote_types`.
fn promote(a: KernelDType, b: KernelDType) -> KernelDType {
    use KernelDType::*;
    if a == b {
        return a;
    }
    match (category(a), category(b)) {
        (ca, cb) if ca != cb => {
            if ca > cb {
                a
            } else {
                b
            }
        }
        _ if a == F64 || b == F64 => F64,
        _ => F32,
    }
}

/// The dtype a tensor of `t` computes in with the literal `v`.
fn promote_scalar(t: KernelDType, v: ScalarValue) -> KernelDType {
    let (c, default) = match v {
        ScalarValue::F64(_) => (2, KernelDType::F32),
        ScalarValue::I64(_) => (1, KernelDType::I64),
        ScalarValue::Bool(_) => (0, KernelDType::Bool),
    };
    if c > category(t) {
        default
    } else {
        t
    }
}

pub(super) fn of_ir(d: IrDType) -> KernelDType {
    match d {
        IrDType::F32 => KernelDType::F32,
        IrDType::F64 => KernelDType::F64,
        IrDType::F16 => KernelDType::F16,
        IrDType::BF16 => KernelDType::BF16,
        IrDType::I64 => KernelDType::I64,
        IrDType::Bool => KernelDType::Bool,
    }
}

impl KernelTypes {
    /// The types of `k`'s values for inputs of dtypes `inputs` (see the
    /// module doc); an error for an op eager refuses for its dtypes, or a
    /// scalar parameter (not a literal) next to a non-float tensor, whose
    /// promotion depends on the parameter's type.
    pub fn infer(k: &Kernel, inputs: &[KernelDType]) -> Result<KernelTypes, RenderError> {
        let fail = |node: usize, msg: String| RenderError::Body { kernel: k.name.clone(), node, msg };
        let mut t: Vec<Option<(KernelDType, KernelDType)>> = vec![None; k.num_values];
        for (i, n) in k.body.iter().enumerate() {
            let dt = |a: Option<&Arg>| -> Result<KernelDType, RenderError> {
                let v = a.and_then(Arg::as_tensor).ok_or_else(|| fail(i, "expected a tensor argument".into()))?;
                t.get(v.index()).copied().flatten().map(|p| p.0).ok_or_else(|| fail(i, format!("{v} is not defined")))
            };
            // The promotion of tensor `x` with argument `b`.
            let with = |x: KernelDType, b: Option<&Arg>| -> Result<KernelDType, RenderError> {
                match b {
                    Some(Arg::Tensor(_)) => Ok(promote(x, dt(b)?)),
                    Some(Arg::Scalar(e)) => match e.as_const() {
                        Some(v) => Ok(promote_scalar(x, v)),
                        None if category(x) == 2 => Ok(x),
                        None => Err(fail(i, "a scalar parameter with a non-float tensor: pass the types".into())),
                    },
                    _ => Err(fail(i, "a missing operand".into())),
                }
            };
            let (value, compute) = match &n.op {
                Op::Load(j) => {
                    let d = *inputs.get(*j).ok_or_else(|| fail(i, format!("no dtype for input {j}")))?;
                    (d, d)
                }
                Op::Prim(Prim::CastLike) => {
                    let d = dt(n.args.get(1))?;
                    (d, d)
                }
                Op::Prim(Prim::OpMath) => {
                    let d = match dt(n.args.first())? {
                        KernelDType::F16 | KernelDType::BF16 => KernelDType::F32,
                        d => d,
                    };
                    (d, d)
                }
                Op::Dsl { op: OpKind::ToDtype, .. } => match n.args.get(1) {
                    Some(Arg::DType(d)) => (of_ir(*d), of_ir(*d)),
                    _ => return Err(fail(i, "`to_dtype` without a dtype".into())),
                },
                Op::Dsl { op: OpKind::Where, .. } => {
                    if dt(n.args.get(1))? != KernelDType::Bool {
                        return Err(fail(i, "`where_` with a condition that is not bool".into()));
                    }
                    let c = with(dt(n.args.first())?, n.args.get(2))?;
                    (c, c)
                }
                // A reduction gives its operand's dtype; sums of integers
                // and bools give i64, as eager's; the others take floats.
                Op::Dsl { op, .. } if crate::kernel::is_reduction(*op) => {
                    let c = match (op, dt(n.args.first())?) {
                        (OpKind::Sum | OpKind::SumDim, KernelDType::I64 | KernelDType::Bool) => KernelDType::I64,
                        (OpKind::AmaxDim, d) if d != KernelDType::Bool => d,
                        (_, d) if category(d) == 2 => d,
                        (_, d) => return Err(fail(i, format!("`{}` of a {d:?} tensor", op.name()))),
                    };
                    (c, c)
                }
                Op::Dsl { op, .. } if Comparison::of(*op).is_some() => (KernelDType::Bool, with(dt(n.args.first())?, n.args.get(1))?),
                Op::Dsl { op, .. } if n.args.len() == 2 => {
                    let p = with(dt(n.args.first())?, n.args.get(1))?;
                    let c = match (op, p) {
                        (OpKind::Div, KernelDType::I64 | KernelDType::Bool) => KernelDType::F32,
                        // eager checks a scalar exponent (negative: an error)
                        (OpKind::Pow, KernelDType::I64) if !matches!(n.args.get(1), Some(Arg::Tensor(_))) => {
                            return Err(fail(i, "integer `pow` with a scalar exponent is not rendered".into()))
                        }
                        _ => p,
                    };
                    (c, c)
                }
                Op::Dsl { op, .. } => {
                    let c = match dt(n.args.first())? {
                        KernelDType::Bool => return Err(fail(i, format!("`{}` of a bool tensor", op.name()))),
                        KernelDType::I64 if !matches!(op, OpKind::Neg | OpKind::Abs | OpKind::Square | OpKind::Relu) => KernelDType::F32,
                        d => d,
                    };
                    (c, c)
                }
                other => return Err(fail(i, format!("`{}` in a kernel body", other.name()))),
            };
            let out = n.out.ok_or_else(|| fail(i, "no result".into()))?;
            *t.get_mut(out.index()).ok_or_else(|| fail(i, format!("{out} is beyond the body's values")))? = Some((value, compute));
        }
        let all = t.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| fail(k.body.len(), "a value is never defined".into()))?;
        Ok(KernelTypes { values: all.iter().map(|p| p.0).collect(), compute: all.iter().map(|p| p.1).collect() })
    }
}
