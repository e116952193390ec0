//! Plans a kernel with a reduction ([`Kernel::reduction`]) for the fused
//! path: its prologue and epilogue steps, the reduction's row op and
//! reduced dims, and every input laid out over the reduction's input shape
//! `S` (an epilogue input of a one-value-per-row kernel with stride 0
//! along the reduced dims, so each row reads its one element).
//!
//! Eager's layout of a reduction (and of softmax) is contiguous, and the
//! epilogue's elementwise ops keep it contiguous unless an operand of
//! another memory order sets it: the fused path writes any dense layout
//! along rows, and a contiguous one for one value per row.
//! It declines (the kernel then runs op by op, with eager's results and
//! errors) where eager's behaviour is its own: dims that do not resolve,
//! empty inputs, an epilogue whose shape is neither the reduced shape nor
//! (for softmax and `keepdim` reductions) `S`, an input both folded and
//! read per output.

use super::{elementwise_step, float_inputs, Fused};
use crate::backend::FusedRhs;
use crate::backend::{FusedReduceProgram, FusedRowOp, FusedStep, KernelCall};
use crate::eval::prims::{ints, scalar};
use crate::layout::{is_dense_output, wrap_dim, Layout};
use crate::ops::binary::broadcast_layout;
use crate::ops::normalize_dims;
use crate::storage::Storage;
use crate::tensor::Tensor;
use aot_ir::kernel::render::KernelTypes;
use aot_ir::kernel::Kernel;
use aot_ir::{Node, Op, OpKind, Prim, ScalarValue};

/// What [`plan`] works out.
struct Plan {
    prologue: Vec<FusedStep>,
    epilogue: Vec<FusedStep>,
    op: FusedRowOp,
    arg: usize,
    result: usize,
    load_pro: Vec<bool>,
    load_epi: Vec<bool>,
    reduced: Vec<bool>,
    rows_out: bool,
    operands: Vec<Layout>,
    out: Layout,
}

/// Kernel `k` (its reduction at body index `r`) fused on its inputs'
/// backend (see [`Fused`]).
pub(super) fn fused(k: &Kernel, r: usize, inputs: &[&Tensor], scalars: &[Option<ScalarValue>]) -> Fused {
    let Some(p) = plan(k, r, inputs, scalars) else { return Fused::Unplanned };
    let program = FusedReduceProgram {
        prologue: &p.prologue,
        op: p.op,
        arg: p.arg,
        result: p.result,
        epilogue: &p.epilogue,
        num_values: k.num_values,
        stored: k.out.index(),
        load_pro: &p.load_pro,
        load_epi: &p.load_epi,
        reduced: &p.reduced,
        rows_out: p.rows_out,
    };
    let operands: Vec<(&Storage, Layout)> = inputs.iter().zip(&p.operands).map(|(t, l)| (&**t.storage(), l.clone())).collect();
    // Every value of a planned reduction kernel has the inputs' float dtype.
    let Some(d) = inputs.first().map(|t| t.dtype()) else { return Fused::Unplanned };
    let types = KernelTypes { values: vec![d; k.num_values], compute: vec![d; k.num_values] };
    let slots = super::slot_values(k, scalars);
    let call = KernelCall { kernel: k, types: &types, slots: &slots };
    match Storage::fused_reduce("fused kernel", &program, &call, &operands, &p.out) {
        Some(storage) => Fused::Ran(storage.map(|s| Tensor::from_storage(s, p.out))),
        None => Fused::Declined,
    }
}

fn plan(k: &Kernel, r: usize, inputs: &[&Tensor], scalars: &[Option<ScalarValue>]) -> Option<Plan> {
    float_inputs(inputs)?;
    let dtype = inputs.first()?.dtype();
    let pro = k.prologue();
    let mut layouts: Vec<Option<Layout>> = vec![None; k.num_values];
    let (mut prologue, mut epilogue) = (Vec::new(), Vec::new());
    let mut load_epi = vec![false; inputs.len()];
    let mut spec = None;
    for (i, n) in k.body.iter().enumerate() {
        let out = n.out?.index();
        let layout = match &n.op {
            Op::Load(j) => inputs.get(*j)?.layout(),
            Op::Dsl { op, .. } if i == r => {
                let arg = n.args.first()?.as_tensor()?.index();
                let shape = layouts.get(arg)?.as_ref()?.shape.to_vec();
                let (row_op, reduced, keepdim) = reduction(*op, n, &shape, scalars)?;
                let out_shape: Vec<usize> = match row_op {
                    FusedRowOp::Softmax { .. } => shape.clone(),
                    _ => shape.iter().zip(&reduced).filter_map(|(&s, &red)| if !red { Some(s) } else { keepdim.then_some(1) }).collect(),
                };
                spec = Some((row_op, arg, out, reduced, keepdim, shape));
                Layout::contiguous(&out_shape)
            }
            Op::Dsl { op, .. } => {
                let (step, layout) = elementwise_step(*op, n, &layouts, scalars, dtype)?;
                if pro[i] {
                    prologue.push(step);
                } else {
                    for v in n.tensor_args().filter(|v| v.index() < inputs.len()) {
                        load_epi[v.index()] = true;
                    }
                    epilogue.push(step);
                }
                layout
            }
            // A cast to the kernel's one dtype (`opmath` of f32/f64, a
            // `cast_like` of a value of the same dtype) changes nothing: an
            // exact identity step (`x * 1`).
            Op::Prim(Prim::OpMath | Prim::CastLike) if dtype.opmath() == dtype => {
                let a = n.args.first()?.as_tensor()?.index();
                let layout = layouts.get(a)?.clone()?;
                let step = FusedStep::new(OpKind::Mul, a, FusedRhs::Scalar(1.0), out, dtype);
                if pro[i] {
                    prologue.push(step);
                } else {
                    load_epi.iter_mut().enumerate().filter(|(j, _)| *j == a).for_each(|(_, l)| *l = true);
                    epilogue.push(step);
                }
                layout
            }
            _ => return None,
        };
        *layouts.get_mut(out)? = Some(layout);
    }
    let (op, arg, result, reduced, keepdim, shape) = spec?;
    let out = layouts.get(k.out.index())?.clone()?;
    if out.offset != 0 || shape.iter().product::<usize>() == 0 {
        return None;
    }
    let result_shape = &layouts.get(result)?.as_ref()?.shape;
    let rows_out = match op {
        FusedRowOp::Softmax { .. } => true,
        // (Both, where every reduced dim has size 1: along the rows, which
        // lets an input be folded and read again.)
        _ if keepdim && out.shape.as_slice() == shape.as_slice() => true,
        _ if out.shape == *result_shape => false,
        _ => return None,
    };
    // Rows write through the output's strides: any dense layout of `S`
    // (an epilogue operand may give it its memory order); one value per row
    // is written in row order: contiguous.
    let writable = if rows_out { out.shape.as_slice() == shape.as_slice() && is_dense_output(&out) } else { out.is_contiguous() };
    if !writable {
        return None;
    }
    // The loads are the body's first nodes, in input order (verified).
    let load_pro: Vec<bool> = pro.iter().take(inputs.len()).copied().collect();
    let mut operands = Vec::with_capacity(inputs.len());
    for (j, t) in inputs.iter().enumerate() {
        let l = t.layout();
        let layout = if load_pro[j] || rows_out { over(&l, &shape)? } else { per_row(&over(&l, &out.shape)?, &shape, &reduced, keepdim) };
        if load_pro[j] && load_epi[j] && !rows_out {
            return None;
        }
        operands.push(layout);
    }
    Some(Plan { prologue, epilogue, op, arg, result, load_pro, load_epi, reduced, rows_out, operands, out })
}

/// `l` broadcast to `shape`, if its shape broadcasts to it.
fn over(l: &Layout, shape: &[usize]) -> Option<Layout> {
    let lead = shape.len().checked_sub(l.rank())?;
    l.shape.iter().zip(&shape[lead..]).all(|(&a, &b)| a == b || a == 1).then(|| broadcast_layout(l, shape))
}

/// `l` (laid out over the reduced shape) over `S`: stride 0 along the
/// reduced dims, which the reduced shape drops (or keeps as size 1).
fn per_row(l: &Layout, shape: &[usize], reduced: &[bool], keepdim: bool) -> Layout {
    let mut kept = l.stride.iter();
    let stride: Vec<usize> = reduced
        .iter()
        .map(|&red| {
            let s = if red && !keepdim { None } else { kept.next().copied() };
            if red {
                0
            } else {
                s.unwrap_or(0)
            }
        })
        .collect();
    Layout::new(shape.to_vec(), stride, l.offset)
}

/// The row op, the reduced dims (a mask over `shape`, the operand's) and
/// `keepdim` of reduction node `n`; `None` where its arguments do not
/// resolve as eager would take them (eager then reports the error).
fn reduction(op: OpKind, n: &Node, shape: &[usize], scalars: &[Option<ScalarValue>]) -> Option<(FusedRowOp, Vec<bool>, bool)> {
    use OpKind as K;
    let rank = shape.len();
    let dims = |i: usize| -> Option<Vec<bool>> {
        let dims = ints(n.args.get(i), scalars).ok()?;
        if dims.is_empty() {
            return Some(vec![true; rank]);
        }
        let d = normalize_dims(op.name(), &dims, rank).ok()?;
        Some((0..rank).map(|i| d.contains(&i)).collect())
    };
    let boolean = |i: usize| match scalar(n.args.get(i), scalars).ok()? {
        ScalarValue::Bool(b) => Some(b),
        _ => None,
    };
    let int = |i: usize| match scalar(n.args.get(i), scalars).ok()? {
        ScalarValue::I64(v) => Some(v),
        _ => None,
    };
    Some(match op {
        K::Sum => (FusedRowOp::Sum, vec![true; rank], false),
        K::Mean => (FusedRowOp::Mean, vec![true; rank], false),
        K::SumDim => (FusedRowOp::Sum, dims(1)?, boolean(2)?),
        K::MeanDim => (FusedRowOp::Mean, dims(1)?, boolean(2)?),
        K::AmaxDim => (FusedRowOp::Amax, dims(1)?, boolean(2)?),
        K::VarDim => (FusedRowOp::Var { correction: int(2)? }, dims(1)?, boolean(3)?),
        K::Softmax | K::LogSoftmax => {
            // Eager's 0-d softmax is a case of its own.
            let d = wrap_dim(op.name(), int(1)?, rank).ok().filter(|_| rank > 0)?;
            (FusedRowOp::Softmax { log: op == K::LogSoftmax }, (0..rank).map(|i| i == d).collect(), true)
        }
        _ => return None,
    })
}
