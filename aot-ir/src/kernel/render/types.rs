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

use super::RenderError;
use crate::dtype::{Category, DType};
use crate::graph::{Op, Prim};
use crate::kernel::Kernel;
use crate::op::OpKind;
use crate::types::{Arg, ScalarValue};

/// Per body value (indexed like the body's values): its dtype, and the
/// dtype its op computes in (a load's: its own; a comparison's: its
/// operands' promotion, while the value is bool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTypes {
    /// Per body value, its dtype.
    pub values: Vec<DType>,
    /// Per body value, the dtype its op computes in.
    pub compute: Vec<DType>,
}

/// The dtype a tensor of `t` computes in with the literal `v`.
fn promote_scalar(t: DType, v: ScalarValue) -> DType {
    let (c, default) = match v {
        ScalarValue::F64(_) => (Category::Float, DType::F32),
        ScalarValue::I64(_) => (Category::Int, DType::I64),
        ScalarValue::Bool(_) => (Category::Bool, DType::Bool),
    };
    if c > t.category() {
        default
    } else {
        t
    }
}

impl KernelTypes {
    /// The types of `k`'s values for inputs of dtypes `inputs` (see the
    /// module doc); an error for an op eager refuses for its dtypes, or a
    /// scalar parameter (not a literal) next to a non-float tensor, whose
    /// promotion depends on the parameter's type.
    pub fn infer(k: &Kernel, inputs: &[DType]) -> Result<KernelTypes, RenderError> {
        let fail = |node: usize, msg: String| RenderError::Body { kernel: k.name.clone(), node, msg };
        let mut t: Vec<Option<(DType, DType)>> = vec![None; k.num_values];
        for (i, n) in k.body.iter().enumerate() {
            let dt = |a: Option<&Arg>| -> Result<DType, RenderError> {
                let v = a.and_then(Arg::as_tensor).ok_or_else(|| fail(i, "expected a tensor argument".into()))?;
                t.get(v.index()).copied().flatten().map(|p| p.0).ok_or_else(|| fail(i, format!("{v} is not defined")))
            };
            // The promotion of tensor `x` with argument `b`.
            let with = |x: DType, b: Option<&Arg>| -> Result<DType, RenderError> {
                match b {
                    Some(Arg::Tensor(_)) => Ok(DType::promote(x, dt(b)?)),
                    Some(Arg::Scalar(e)) => match e.as_const() {
                        Some(v) => Ok(promote_scalar(x, v)),
                        None if x.is_float() => Ok(x),
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
                        DType::F16 | DType::BF16 => DType::F32,
                        d => d,
                    };
                    (d, d)
                }
                Op::Dsl { op: OpKind::ToDtype, .. } => match n.args.get(1) {
                    Some(Arg::DType(d)) => (*d, *d),
                    _ => return Err(fail(i, "`to_dtype` without a dtype".into())),
                },
                Op::Dsl { op: OpKind::Where, .. } => {
                    if dt(n.args.get(1))? != DType::Bool {
                        return Err(fail(i, "`where_` with a condition that is not bool".into()));
                    }
                    let c = with(dt(n.args.first())?, n.args.get(2))?;
                    (c, c)
                }
                // A reduction gives its operand's dtype; sums of integers
                // and bools give i64, as eager's; the others take floats.
                Op::Dsl { op, .. } if crate::kernel::is_reduction(*op) => {
                    let c = match (op, dt(n.args.first())?) {
                        (OpKind::Sum | OpKind::SumDim, DType::I64 | DType::Bool) => DType::I64,
                        (OpKind::AmaxDim, d) if d != DType::Bool => d,
                        (_, d) if d.is_float() => d,
                        (_, d) => return Err(fail(i, format!("`{}` of a {d:?} tensor", op.name()))),
                    };
                    (c, c)
                }
                Op::Dsl { op, .. } if op.is_comparison() => (DType::Bool, with(dt(n.args.first())?, n.args.get(1))?),
                Op::Dsl { op, .. } if n.args.len() == 2 => {
                    let p = with(dt(n.args.first())?, n.args.get(1))?;
                    let c = match (op, p) {
                        (OpKind::Div, DType::I64 | DType::Bool) => DType::F32,
                        // eager checks a scalar exponent (negative: an error)
                        (OpKind::Pow, DType::I64) if !matches!(n.args.get(1), Some(Arg::Tensor(_))) => {
                            return Err(fail(i, "integer `pow` with a scalar exponent is not rendered".into()))
                        }
                        _ => p,
                    };
                    (c, c)
                }
                Op::Dsl { op, .. } => {
                    let c = match dt(n.args.first())? {
                        DType::Bool => return Err(fail(i, format!("`{}` of a bool tensor", op.name()))),
                        DType::I64 if !matches!(op, OpKind::Neg | OpKind::Abs | OpKind::Square | OpKind::Relu) => DType::F32,
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
