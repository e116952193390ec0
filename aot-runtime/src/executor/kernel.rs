//! Runs the kernel stage's [`Op::Kernel`] nodes.
//!
//! A kernel runs as one fused pass on its inputs' backend
//! (`Storage::fused_kernel`) when [`plan`] can follow each body op as eager
//! would compute it: each value's dtype by eager's promotion (mixed float
//! dtypes, bool masks, i64 values; integer `div` and float functions of
//! integers in f32), each step's compute dtype, and each value's layout as
//! eager lays out that op's result. The result then has eager's dtype,
//! shape and layout. Otherwise (an op eager refuses for its dtypes, such as
//! float math on bools, integer `pow` of a scalar exponent (a negative one
//! is eager's error), shapes that do not broadcast, a
//! backend without fused kernels) its body runs op by op through the
//! dispatcher, which also reports every error exactly as eager does. Both paths count
//! themselves ([`stats`]), so tests can check that the fused path is taken.
//!
//! A kernel with a reduction is planned in [`reduce`]: the same, with
//! eager's contiguous layout of the reduced (or softmax) result.
//!
//! A backward some of whose tangents never arrived tracks which values
//! are zero (see `interp::zero_result`); a kernel with a zero input runs
//! op by op then, tracking zeros through its body.

use super::interp::{blame, get, zero_result, Ctx, Stop};
use crate::backend::kernel_record::{self, RanKernel};
use crate::backend::{FusedProgram, FusedRhs, FusedStep, KernelCall};
use crate::counters::{bump, Counter};
use crate::dtype::{DType, Scalar};
use crate::error::{AotError, Result};
use crate::eval::dispatch::{exec_node, ArgGeometrySource};
use crate::eval::prims::scalar;
use crate::layout::{broadcast_shapes, elementwise_layout, is_dense_output, preserve_layout, Layout};
use crate::ops::binary::{broadcast_layout, scalar_result_layout};
use crate::ops::result_type_ranked;
use crate::storage::Storage;
use crate::tensor::Tensor;
use aot_ir::kernel::render::{KernelTypes, ScalarSlots};
use aot_ir::kernel::Kernel;
use aot_ir::{Arg as IrArg, Node, Op, OpKind, Prim, ScalarValue};

mod inplace;
mod reduce;

pub(crate) use inplace::Reinplace;

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
    let mark = kernel_record::mark();
    let mut declined = false;
    if !any_zero {
        match fused(k, &inputs, cx.scalars, over) {
            Fused::Ran(t) => {
                bump(Counter::FusedKernels);
                return Ok(t?);
            }
            Fused::Declined => declined = true,
            Fused::Unplanned => {}
        }
    }
    bump(Counter::OpByOpKernels);
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
    // The ops noted themselves as they ran; a kernel only the backend
    // declined is one kernel where the kernel stage is rendered.
    if declined {
        kernel_record::note_declined(mark, || ran_kernel(k, &inputs, &t, None));
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
            Op::Dsl { .. } | Op::Prim(Prim::CastLike | Prim::OpMath) => {
                let at = |e: AotError| (e, n.out);
                let t = match &n.op {
                    Op::Dsl { op, .. } => exec_node(*op, &n.args, local.as_slice(), scalars),
                    _ => cast_like(&n.args, &local, matches!(n.op, Op::Prim(Prim::OpMath))),
                }
                .map_err(at)?;
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

/// `cast_like(x, like)`: `x` cast to `like`'s dtype, as eager's primitive.
/// `cast_like` (to the dtype of argument 1), or `opmath` (to the opmath
/// dtype of argument 0).
fn cast_like(args: &[IrArg], local: &[Option<Tensor>], opmath: bool) -> Result<Tensor> {
    let t = |i: usize| match args.get(i) {
        Some(IrArg::Tensor(v)) => get(local, *v),
        _ => Err(internal(format!("cast: argument {i} is not a tensor"))),
    };
    let x = t(0)?;
    x.to_dtype(if opmath { x.dtype().opmath() } else { t(1)?.dtype() })
}

fn internal(msg: String) -> AotError {
    AotError::Internal { op: "kernel", msg }
}

/// What the fused path made of a kernel.
pub(super) enum Fused {
    /// It ran as one kernel.
    Ran(Result<Tensor>),
    /// It was planned, and the backend declined it.
    Declined,
    /// It is outside what the fused path computes as eager does.
    Unplanned,
}

/// The kernel fused on its inputs' backend (see [`Fused`]).
fn fused(k: &Kernel, inputs: &[&Tensor], scalars: &[Option<ScalarValue>], over: Option<usize>) -> Fused {
    if let Some(r) = k.reduction() {
        let f = reduce::fused(k, r, inputs, scalars);
        if let Fused::Ran(Ok(t)) = &f {
            note_ran(k, inputs, t, None);
        }
        return f;
    }
    let Some(p) = plan(k, inputs, scalars) else { return Fused::Unplanned };
    let program = FusedProgram { steps: &p.steps, num_values: k.num_values, stored: k.out.index(), dtypes: &p.dtypes, read: &p.read };
    // An input read only for its dtype: any layout of the output's shape.
    let unread = || broadcast_layout(&Layout::new(vec![], vec![], 0), &p.out.shape);
    let operands: Vec<(&Storage, Layout)> = inputs
        .iter()
        .zip(&p.loaded)
        .zip(&p.read)
        .map(|((t, l), &r)| (&**t.storage(), if r { broadcast_layout(l, &p.out.shape) } else { unread() }))
        .collect();
    // Per body value: its dtype and the dtype its op computes in.
    let mut compute = p.dtypes.clone();
    for s in &p.steps {
        if let Some(c) = compute.get_mut(s.out) {
            *c = s.compute;
        }
    }
    let types = KernelTypes { values: p.dtypes.to_vec(), compute: compute.to_vec() };
    let slots = slot_values(k, scalars);
    let call = KernelCall { kernel: k, types: &types, slots: &slots };
    let storage = over
        .and_then(|i| Storage::fused_over("fused kernel", &k.name, &program, &operands, i, &p.out))
        .or_else(|| Storage::fused_kernel("fused kernel", &program, &call, &operands, &p.out));
    let Some(storage) = storage else { return Fused::Declined };
    let t = storage.map(|s| Tensor::from_storage(s, p.out));
    if let Ok(t) = &t {
        note_ran(k, inputs, t, Some(&|| p.dtypes.iter().copied().zip(compute.iter().copied()).collect()));
    }
    Fused::Ran(t)
}

/// The values of `k`'s scalar slots for a call with these scalars; none
/// where one does not evaluate (a backend that renders the kernel then
/// declines, and the ops run one by one, reporting it).
pub(super) fn slot_values(k: &Kernel, scalars: &[Option<ScalarValue>]) -> Vec<f64> {
    ScalarSlots::of(k).values(scalars).unwrap_or_default()
}

/// A kernel's fused program, with what eager would make of its result.
struct Plan {
    steps: Vec<FusedStep>,
    /// Per body value, its dtype.
    dtypes: Vec<DType>,
    /// Per input, whether the body reads its elements.
    read: Vec<bool>,
    /// Eager's layout of the result.
    out: Layout,
    /// The inputs' layouts (read once).
    loaded: Vec<Layout>,
}

/// A body value as eager would have it: layout and dtype.
#[derive(Clone)]
struct Val {
    layout: Layout,
    dtype: DType,
}

/// One planned step: its operands, compute dtype and eager's result.
struct Planned {
    a: usize,
    rhs: FusedRhs,
    cond: Option<usize>,
    compute: DType,
    result: Val,
}

/// The fused program, when every op's result (dtype and layout, from its
/// operands') is one the fused path computes as eager does and the shapes
/// broadcast. Each value's dtype follows eager's promotion, and its layout
/// eager's layout of that op (of the operands cast to the computing
/// dtype, as eager casts them first).
fn plan(k: &Kernel, inputs: &[&Tensor], scalars: &[Option<ScalarValue>]) -> Option<Plan> {
    let loads: Vec<Val> = inputs.iter().map(|t| Val { layout: t.layout(), dtype: t.dtype() }).collect();
    plan_of(k, &loads, scalars)
}

/// [`plan`] from the inputs' layouts and dtypes alone.
fn plan_of(k: &Kernel, inputs: &[Val], scalars: &[Option<ScalarValue>]) -> Option<Plan> {
    let mut vals: Vec<Option<Val>> = vec![None; k.num_values];
    let mut steps = Vec::with_capacity(k.body.len());
    let mut read = vec![false; inputs.len()];
    for n in &k.body {
        let out = n.out?.index();
        let val = match &n.op {
            Op::Load(i) => inputs.get(*i)?.clone(),
            op => {
                let p = match op {
                    Op::Dsl { op, .. } => plan_dsl(*op, &n.args, &vals, scalars)?,
                    Op::Prim(Prim::CastLike) => {
                        let like = vals.get(n.args.get(1)?.as_tensor()?.index())?.as_ref()?.dtype;
                        plan_cast(&n.args, &vals, like)?
                    }
                    Op::Prim(Prim::OpMath) => {
                        let to = vals.get(n.args.first()?.as_tensor()?.index())?.as_ref()?.dtype.opmath();
                        plan_cast(&n.args, &vals, to)?
                    }
                    _ => return None,
                };
                let op = if matches!(n.op, Op::Prim(_)) { OpKind::ToDtype } else { n.kind()? };
                for v in std::iter::once(p.a).chain(p.cond).chain(match p.rhs {
                    FusedRhs::Value(b) => Some(b),
                    _ => None,
                }) {
                    if let Some(r) = read.get_mut(v) {
                        *r = true;
                    }
                }
                steps.push(FusedStep { op, a: p.a, rhs: p.rhs, out, compute: p.compute, cond: p.cond });
                p.result
            }
        };
        *vals.get_mut(out)? = Some(val);
    }
    let out = vals.get(k.out.index())?.clone()?.layout;
    // A result that is an input's layout unchanged (casts to its own
    // dtype) may be a view; the fused path writes dense outputs only.
    if !is_dense_output(&out) {
        return None;
    }
    let dtypes = vals.iter().map(|v| v.as_ref().map(|v| v.dtype)).collect::<Option<Vec<DType>>>()?;
    // PyTorch computes part of a half-precision `rsqrt` with two roundings
    // (`cpu::fused_elementwise::scalar_tail`), which only its single-op kernel follows.
    if steps.len() > 1 && steps.iter().any(|s| half_rsqrt(s.op, dtypes.get(s.out).copied())) {
        return None;
    }
    // The loads are the body's first values, in input order (verified).
    let loaded = vals.into_iter().take(inputs.len()).map(|v| v.map(|v| v.layout)).collect::<Option<Vec<Layout>>>()?;
    Some(Plan { steps, dtypes, read, out, loaded })
}

/// Whether `op` is `rsqrt` giving f16/bf16 (see [`plan_of`]).
fn half_rsqrt(op: OpKind, dtype: Option<DType>) -> bool {
    op == OpKind::Rsqrt && matches!(dtype, Some(DType::F16 | DType::BF16))
}

/// `Some` when every input has one float dtype.
fn float_inputs(inputs: &[&Tensor]) -> Option<()> {
    let dtype = inputs.first()?.dtype();
    (dtype.is_float() && inputs.iter().all(|t| t.dtype() == dtype)).then_some(())
}

/// The fused step of elementwise node `n` of a reduction kernel, all of
/// whose values have the float dtype `dtype`, and eager's layout of its
/// result, from its operands' layouts. Only float arithmetic and math
/// (comparisons, `where_` and casts change dtypes: the planner declines).
fn elementwise_step(
    op: OpKind,
    n: &Node,
    layouts: &[Option<Layout>],
    scalars: &[Option<ScalarValue>],
    dtype: DType,
) -> Option<(FusedStep, Layout)> {
    if matches!(op, OpKind::Eq | OpKind::Ne | OpKind::Lt | OpKind::Le | OpKind::Gt | OpKind::Ge | OpKind::Where | OpKind::ToDtype)
        || half_rsqrt(op, Some(dtype))
    {
        return None;
    }
    let out = n.out?.index();
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
            (FusedRhs::Scalar(v), scalar_result_layout(binary_op(op)?, la))
        }
    };
    Some((FusedStep::new(op, a, rhs, out, dtype), layout))
}

/// The value of a tensor argument.
fn arg_val<'a>(vals: &'a [Option<Val>], a: &IrArg) -> Option<(usize, &'a Val)> {
    let v = a.as_tensor()?.index();
    Some((v, vals.get(v)?.as_ref()?))
}

/// `layout` as eager reads an operand of dtype `from` computed in `to`:
/// itself, or its cast copy (`preserve_layout`).
fn as_computed(layout: &Layout, from: DType, to: DType) -> Layout {
    if from == to {
        layout.clone()
    } else {
        preserve_layout(layout)
    }
}

/// `to_dtype(x, dtype)` (`cast_like` gives the dtype of its second
/// argument): a copy laid out as eager's `.to()`, or `x` itself.
fn plan_cast(args: &[IrArg], vals: &[Option<Val>], to: DType) -> Option<Planned> {
    let (a, x) = arg_val(vals, args.first()?)?;
    let result = Val { layout: as_computed(&x.layout, x.dtype, to), dtype: to };
    Some(Planned { a, rhs: FusedRhs::None, cond: None, compute: to, result })
}

fn plan_dsl(op: OpKind, args: &[IrArg], vals: &[Option<Val>], scalars: &[Option<ScalarValue>]) -> Option<Planned> {
    let (a, x) = arg_val(vals, args.first()?)?;
    match op {
        OpKind::ToDtype => match args.get(1)? {
            IrArg::DType(d) => plan_cast(args, vals, *d),
            _ => None,
        },
        OpKind::Where => plan_where(args, vals, scalars),
        _ if args.len() == 1 => {
            let compute = match x.dtype {
                DType::Bool => return None,
                DType::I64 if !matches!(op, OpKind::Neg | OpKind::Abs | OpKind::Square | OpKind::Relu) => DType::F32,
                d => d,
            };
            let l = as_computed(&x.layout, x.dtype, compute);
            let result = Val { layout: elementwise_layout(&l.shape, &[&l]), dtype: compute };
            Some(Planned { a, rhs: FusedRhs::None, cond: None, compute, result })
        }
        _ => plan_binary(op, a, x, args.get(1)?, vals, scalars),
    }
}

/// Arithmetic and comparisons of a tensor and a tensor or scalar.
fn plan_binary(op: OpKind, a: usize, x: &Val, rhs: &IrArg, vals: &[Option<Val>], scalars: &[Option<ScalarValue>]) -> Option<Planned> {
    let bop = binary_op(op)?;
    let compute_of = |promoted: DType| match bop {
        // true division of integers happens in the default float dtype
        OpKind::Div if !promoted.is_float() => DType::F32,
        _ => promoted,
    };
    let (rhs, compute, layout) = match rhs {
        IrArg::Tensor(_) => {
            let (b, y) = arg_val(vals, rhs)?;
            let promoted = result_type_ranked(x.dtype, x.layout.rank(), y.dtype, y.layout.rank());
            let c = compute_of(promoted);
            let shape = broadcast_shapes(op.name(), &x.layout.shape, &y.layout.shape).ok()?;
            let (la, lb) = (as_computed(&x.layout, x.dtype, c), as_computed(&y.layout, y.dtype, c));
            (FusedRhs::Value(b), c, elementwise_layout(&shape, &[&la, &lb]))
        }
        arg => {
            let s = dtype_scalar(scalar(Some(arg), scalars).ok()?);
            let c = compute_of(s.promote_with(x.dtype));
            (FusedRhs::Scalar(s.to_f64()), c, scalar_result_layout(bop, &as_computed(&x.layout, x.dtype, c)))
        }
    };
    // Integer `pow` with a scalar exponent is eager's op, which refuses a
    // negative exponent: op by op. A tensor exponent has no error to give.
    if op == OpKind::Pow && compute == DType::I64 && matches!(rhs, FusedRhs::Scalar(_)) {
        return None;
    }
    let dtype = if bop.is_comparison() { DType::Bool } else { compute };
    Some(Planned { a, rhs, cond: None, compute, result: Val { layout, dtype } })
}

/// `x.where_(cond, other)`: computed in the dtype of `x` and `other` (a
/// scalar `other` is a 0-dim tensor of its promotion with `x`), laid out
/// from the condition and the two cast operands, in that order.
fn plan_where(args: &[IrArg], vals: &[Option<Val>], scalars: &[Option<ScalarValue>]) -> Option<Planned> {
    let (a, x) = arg_val(vals, args.first()?)?;
    let (cond, c) = arg_val(vals, args.get(1)?)?;
    if c.dtype != DType::Bool {
        return None;
    }
    let (rhs, other) = match args.get(2)? {
        IrArg::Tensor(_) => {
            let (b, y) = arg_val(vals, args.get(2)?)?;
            (FusedRhs::Value(b), y.clone())
        }
        arg => {
            let s = dtype_scalar(scalar(Some(arg), scalars).ok()?);
            (FusedRhs::Scalar(s.to_f64()), Val { layout: Layout::new(vec![], vec![], 0), dtype: s.promote_with(x.dtype) })
        }
    };
    let compute = result_type_ranked(x.dtype, x.layout.rank(), other.dtype, other.layout.rank());
    let shape = broadcast_shapes("where", &x.layout.shape, &other.layout.shape).ok()?;
    let shape = broadcast_shapes("where", &shape, &c.layout.shape).ok()?;
    let (la, lb) = (as_computed(&x.layout, x.dtype, compute), as_computed(&other.layout, other.dtype, compute));
    let layout = elementwise_layout(&shape, &[&c.layout, &la, &lb]);
    Some(Planned { a, rhs, cond: Some(cond), compute, result: Val { layout, dtype: compute } })
}

/// A graph scalar as eager's scalar operand.
fn dtype_scalar(v: ScalarValue) -> Scalar {
    match v {
        ScalarValue::F64(v) => Scalar::F64(v),
        ScalarValue::I64(v) => Scalar::I64(v),
        ScalarValue::Bool(v) => Scalar::Bool(v),
    }
}

/// `op` when it is a binary elementwise op (a tensor or scalar operand).
pub(crate) fn binary_op(op: OpKind) -> Option<OpKind> {
    op.is_binary_elementwise().then_some(op)
}

/// Notes a kernel that ran as one kernel (`kernel_record`): `types` gives
/// the plan's value and compute dtypes, where the kernel ran from a plan.
fn note_ran(k: &Kernel, inputs: &[&Tensor], out: &Tensor, types: Option<&dyn Fn() -> Vec<(DType, DType)>>) {
    kernel_record::note_kernel(|| ran_kernel(k, inputs, out, types));
}

/// The record of kernel `k` that computed `out` from `inputs`.
pub(super) fn ran_kernel(k: &Kernel, inputs: &[&Tensor], out: &Tensor, types: Option<&dyn Fn() -> Vec<(DType, DType)>>) -> RanKernel {
    // A reduction kernel is rendered for the rank of the reduction's
    // input, the broadcast of its prologue's inputs.
    let rank = match k.reduction() {
        Some(_) => inputs.iter().zip(k.prologue()).filter(|(_, pro)| *pro).map(|(t, _)| t.rank()).max().unwrap_or(0),
        None => out.rank(),
    };
    let (inputs, types) = (inputs.iter().map(|t| t.dtype()).collect(), types.map(|f| f()));
    RanKernel { kernel: k.clone(), inputs, types, rank, empty: out.numel() == 0, in_place: None }
}
